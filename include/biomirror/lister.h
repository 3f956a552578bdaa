/*
 * The lister seam (DESIGN.md): a lister turns a source URL into a
 * listing (listing.h), fetching its pages through the run's callback (the
 * transport owns the sockets).  One table per lister (struct lister_ops:
 * agent/lister/http.c, agent/lister/ftp.c), picked by the source's
 * scheme from one registry (agent/lister/lister.c); the listers share one
 * breadth-first crawl (crawl.h).  A lister includes no transport's or store's header.
 */
#ifndef BIOMIRROR_LISTER_H
#define BIOMIRROR_LISTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "biomirror/listing.h"

/*
 * How a page's body reaches its lister as it arrives (http_page.stream):
 * begin when a try starts (a retry or a redirect drops what an earlier
 * try fed), then feed with each piece in order and the Content-Type
 * (borrowed, "" when none).  Both return 0 or a BM_E* code, which aborts
 * the page with that code.
 */
struct page_stream {
	int		(*begin)(void *arg);
	int		(*feed)(void *arg, const char *content_type,
			    const uint8_t *data, size_t len);
	void		*arg;		/* borrowed: the lister's page state */
};

/* One page to fetch, filled in by the fetch callback. */
struct http_page {
	const char	*url;		/* borrowed: absolute URL to GET */
	const char	*command;	/* borrowed: FTP "FEAT", "MLSD" or
					   "LIST"; NULL for HTTP */
	int		 rc;		/* 0, or BM_E* when the fetch failed */
	long		 status;	/* HTTP status (FTP: reply), 0: none */
	const struct page_stream *stream; /* borrowed, NULL: the body is
					   kept whole in body */
	uint8_t		*body;		/* owned (malloc): body, NULL if none
					   or streamed */
	size_t		 len;		/* body length in bytes (streamed
					   too) */
	char		*content_type;	/* owned: Content-Type or NULL */
	char		*effective_url;	/* owned: URL after redirects or NULL */
	char		 errmsg[256];	/* reason when rc != 0 */
};

/*
 * Fetch every page in pages[0..n) (concurrently if it can) and fill in
 * their result fields.  Returns 0 when it tried them all (per-page
 * failures are in page->rc), or a BM_E* code when it could not run.
 */
typedef int (*http_fetch_fn)(void *ctx, struct http_page *pages, size_t n);

/* What a lister learned of the server, for the transport's next jobs. */
enum lister_hint {
	LISTER_HINT_GRIDFTP,	/* on: FEAT listed DCAU (a GridFTP server) */
	LISTER_HINT_MODE_E,	/* on: MLSD and whole files in GridFTP MODE E;
				   off: stream mode */
};

/* Which key's zone a lister's listed wall-clock times are read in. */
enum lister_zone {
	LISTER_ZONE_LISTING,	/* listing_timezone (index pages) */
	LISTER_ZONE_FTP,	/* ftp_timezone (LIST replies) */
};

/* One listing of one mirror: what the run hands its lister. */
struct lister_run {
	const char	*name;		/* borrowed: the mirror's, for logs */
	const char	*source;	/* borrowed: source URL, ends in '/' */
	const struct filter *filter;	/* borrowed: include/exclude */
	const struct tzspec *tz;	/* borrowed: the zone of ops->zone */
	unsigned	 max_depth;	/* directory levels below the source */
	bool		 shallow;	/* directories past max_depth are
					   listed, not entered: no error */
	size_t		 max_entries;	/* cap per directory (rule 31) */
	unsigned	 connections;	/* per host: max_connections, or the
					   lister's default */
	bool		 follow;	/* follow_symlinks */
	bool		 mode_e;	/* ftp_mode = extended */
	http_fetch_fn	 fetch;		/* fetches the pages */
	void		*ctx;		/* borrowed: fetch's and hint's ctx */
	void		(*hint)(void *ctx, enum lister_hint h, bool on);
					/* may be NULL */
	listing_drain_fn drain;		/* NULL, or called with out (ctx
					   passed) as batches of entries come
					   in, to take them and empty out;
					   a lister that needs the whole
					   listing does not call it */
	listing_retract_fn retract;	/* NULL, or takes back what drain
					   took of one directory (ctx
					   passed): its page failed */
	struct listing	*unlisted;	/* borrowed, may be NULL: directories
					   inside followed links that the
					   server refused to list
					   (list_ftp.h) */
};

/* What a listing counted, for the run's log. */
struct lister_stats {
	size_t		 skipped;	/* names or lines skipped (ops->unit) */
	size_t		 unread;	/* listing lines not understood,
					   skipped (FTP LIST and MLSD) */
	size_t		 loops;		/* directories not entered: repeats */
	size_t		 dups;		/* names listed again (as a file and
					   as a directory too): first kept */
	size_t		 beneath;	/* entries below a listed file or
					   symlink: skipped */
};

/*
 * A lister's table.  list appends the tree under lr->source to out
 * and returns 0 when the listing is complete, else a BM_E* code with
 * "URL: reason" in errbuf (the listing is then incomplete); *ret is
 * filled in either way.
 */
struct lister_ops {
	const char	*name;		/* "http", "ftp" */
	const char *const *schemes;	/* NULL-terminated, lower case */
	unsigned	 connections;	/* per-host cap, max_connections 0 */
	const char	*unit;		/* what ret->skipped counts ("links") */
	enum lister_zone zone;		/* the zone of its listed times */
	int		(*list)(const struct lister_run *lr,
			    struct listing *out, struct lister_stats *ret,
			    char *errbuf, size_t errlen);
};

/* The listers of this build (agent/lister/http.c, ftp.c, bm.c). */
extern const struct lister_ops lister_http_ops;
extern const struct lister_ops lister_ftp_ops;
extern const struct lister_ops lister_bm_ops;

/*
 * The lister of the registry whose schemes hold url's scheme (compared
 * without case; url borrowed), NULL when none does.
 */
const struct lister_ops *lister_find(const char *url);
/*
 * The registry's schemes for a message, "http://, https://, ftp:// or
 * ftps://", into buf (len bytes; as many whole names as fit).
 */
void	lister_schemes(char *buf, size_t len);

#endif
