/*
 * The breadth-first crawl the listers share (agent/lister/crawl.c): a queue of
 * the directories under a source URL, listed in batches of pages through
 * the run's fetch callback, never past a depth limit, with the loop
 * checks and the counts.  A lister says how a batch of fetched pages is
 * read (struct crawl_ops) and takes their entries with crawl_take(); the
 * crawl owns the queue, the URLs, the first failure and the stats.  A
 * directory's URL is the source + path_encode(its path) + "/", so no
 * request leaves the source.
 */
#ifndef BIOMIRROR_CRAWL_H
#define BIOMIRROR_CRAWL_H

#include <stdbool.h>
#include <stddef.h>

#include "biomirror/lister.h"
#include "biomirror/listing.h"

#define CRAWL_ROOT	SIZE_MAX	/* the parent index of the source */

/* A directory of the queue (index 0 is the source itself). */
struct crawl_dir {
	char		*prefix;	/* owned: relative path, "" for root */
	char		*real;		/* owned: its path upstream when not
					   prefix (inside a followed link),
					   NULL: prefix */
	char		*key;		/* owned: what identifies it upstream
					   (FTP: MLSD unique=; HTTP: a digest
					   of its entries), NULL if unknown */
	size_t		 nkey;		/* HTTP: entries its key covers */
	size_t		 parent;	/* parent's index, CRAWL_ROOT: none */
	unsigned	 depth;		/* levels below the source */
	bool		 via_link;	/* inside a followed directory link */
};

/* What a crawl counts. */
struct crawl_stats {
	size_t		 skipped;	/* names or lines skipped */
	size_t		 unread;	/* lines not understood, skipped */
	size_t		 loops;		/* directories not entered: repeats */
	size_t		 dangling;	/* followed links not in the listing */
};

struct crawl_params {
	const char	*source;	/* borrowed: absolute, ends in '/' */
	const struct filter *filter;	/* borrowed: NULL for all */
	unsigned	 max_depth;	/* directory levels below the source */
	bool		 shallow;	/* a directory past max_depth is listed,
					   not entered, and no error (list) */
	size_t		 batch;		/* pages per fetch call, 0 as 1 */
	const char	*command;	/* borrowed: every page's command (FTP
					   "MLSD" or "LIST"), NULL for HTTP */
	http_fetch_fn	 fetch;
	void		*ctx;		/* borrowed: fetch's ctx */
	struct listing	*out;		/* borrowed: entries are appended */
	listing_drain_fn drain;		/* NULL, or called with out after
					   each batch of pages and whenever
					   it holds a few thousand entries:
					   it takes them and empties out
					   (listing_drain) */
	void		*drain_ctx;	/* borrowed: drain's ctx */
	listing_retract_fn retract;	/* NULL, or takes back what drain took
					   of a directory whose page failed
					   (drain_ctx passed); with it a
					   huge page is handed on as it is
					   read (crawl_flush) */
	char		*errbuf;	/* borrowed, may be NULL: "URL: reason"
					   of the first failure */
	size_t		 errlen;
};

struct crawl;

/*
 * Fill p for a crawl of source (everything borrowed, see crawl_params):
 * the filter, depth limit and batch size, where pages come from (fetch,
 * ctx), where entries go (out) and the first failure is said (errbuf,
 * errlen).  No command: HTTP (crawl_set_command for FTP).
 */
void	crawl_params_init(struct crawl_params *p, const char *source,
	    const struct filter *filter, unsigned max_depth, size_t batch,
	    http_fetch_fn fetch, void *ctx, struct listing *out, char *errbuf,
	    size_t errlen);

/* How a lister reads its pages; arg is its own state. */
struct crawl_ops {
	/*
	 * Read pages[0..n), fetched for dirs [first, first + n) (pages
	 * borrowed; their bodies may be taken, set to NULL): take entries
	 * (crawl_take), note failed pages (crawl_fail).  Returns 0, or a
	 * BM_E* code that stops the crawl.
	 */
	int		(*read)(void *arg, struct crawl *c, size_t first,
			    struct http_page *pages, size_t n);
	/*
	 * May be NULL: the queue is done; queue more (crawl_push) and set
	 * *ret_again when the crawl should go on.  Returns 0 or BM_E*.
	 */
	int		(*more)(void *arg, struct crawl *c, bool *ret_again);
	/*
	 * May be NULL: before pages[0..n) of dirs [first, first + n) are
	 * fetched, set their streams (http_page.stream) to read them as
	 * they arrive.  Returns 0 or BM_E*.  release (may be NULL) then
	 * frees what prepare made, after read or a failed fetch.
	 */
	int		(*prepare)(void *arg, struct crawl *c, size_t first,
			    struct http_page *pages, size_t n);
	void		(*release)(void *arg, struct http_page *pages,
			    size_t n);
};

/*
 * A crawl of p (copied; pointers borrowed for the crawl's life); errbuf
 * is emptied.  Returns 0 or BM_ENOMEM.  Free with crawl_free().
 */
int	crawl_new(const struct crawl_params *p, struct crawl **ret);
/*
 * Queue the source and list the queue breadth first in batches, reading
 * each batch with ops (arg passed on) and handing its entries to the
 * drain, if any.  Returns 0 when the listing is complete; the first
 * failure's code (crawl_fail); BM_ELIMIT when a directory lay past
 * max_depth; or the code a fetch, read, more or drain call failed with.
 */
int	crawl_run(struct crawl *c, const struct crawl_ops *ops, void *arg);
/* Free c.  NULL is a no-op. */
void	crawl_free(struct crawl *c);

/* Set the command of the pages from now on (borrowed; see crawl_params). */
void	crawl_set_command(struct crawl *c, const char *command);
/* Directory d (borrowed; valid until the next crawl_push), and the count. */
struct crawl_dir *crawl_dir(struct crawl *c, size_t d);
size_t	crawl_ndirs(const struct crawl *c);
/* Directory d's path upstream: its real, else its prefix (borrowed). */
const char *crawl_real(const struct crawl *c, size_t d);
/* The counters (borrowed), the output listing and the filter. */
struct crawl_stats *crawl_stats(struct crawl *c);
struct listing *crawl_out(struct crawl *c);
const struct filter *crawl_filter(const struct crawl *c);

/*
 * True when a child of directory parent is within max_depth; else the
 * depth limit is noted (crawl_run then ends BM_ELIMIT) and false.
 */
bool	crawl_depth_ok(struct crawl *c, size_t parent);
/*
 * Queue a directory below parent at prefix (strings copied; real and
 * key may be NULL).  Returns 0 or BM_ENOMEM.
 */
int	crawl_push(struct crawl *c, size_t parent, const char *prefix,
	    const char *real, const char *key, bool via_link);
/*
 * Take entry e listed in directory d into the output (its strings moved,
 * but its href and size_display freed; e left zeroed) when the filter
 * takes it; a directory is queued as well,
 * unless past max_depth (noted) or its unique= was already listed
 * outside a followed link (a loop: counted).  A full output goes to the
 * drain (crawl_params).  Returns 0, BM_ENOMEM, BM_ELIMIT (the output's
 * cap) or the drain's code.
 */
int	crawl_take(struct crawl *c, size_t d, struct entry *e);
/*
 * Whether entries may be handed on before their page is read whole: a
 * drain and a retract were given.  crawl_flush hands what out holds to
 * the drain now; crawl_retract takes back what the drain took of
 * directory d's entries.  Both return 0 or the callback's code.
 */
bool	crawl_streams(const struct crawl *c);
int	crawl_flush(struct crawl *c);
int	crawl_retract(struct crawl *c, size_t d);
/*
 * Note a failed page (url: why, code rc): the first one is the crawl's
 * result and errbuf's "url: why" (why "" gives "url").
 */
void	crawl_fail(struct crawl *c, const char *url, int rc, const char *why);
/*
 * True when directory from or one of its ancestors has the real path
 * real (NULL: not compared) or the key key (NULL: not compared).
 */
bool	crawl_ancestor(const struct crawl *c, size_t from, const char *real,
	    const char *key);

#endif
