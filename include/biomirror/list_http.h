/*
 * The HTTP lister (lister_http_ops: http://, https://): turns index
 * pages (HTML, nginx JSON/XML) into listing entries, and crawls a tree
 * of them with the shared crawl (crawl.h).  Pages are fetched through a
 * callback (lister.h: the transport owns the sockets); this module parses
 * with libxml2 (HTML and XML) and jansson (JSON) and never touches SQLite
 * or the destination.
 */
#ifndef BIOMIRROR_LIST_HTTP_H
#define BIOMIRROR_LIST_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "biomirror/lister.h"
#include "biomirror/listing.h"

/* Which index generator a page came from (detected from its markup). */
enum page_format {
	PAGE_GENERIC = 0,	/* any page: names and types from <a href> only */
	PAGE_NGINX,		/* nginx autoindex html */
	PAGE_NGINX_JSON,	/* nginx autoindex_format json */
	PAGE_NGINX_XML,		/* nginx autoindex_format xml */
	PAGE_NGINX_FANCY,	/* ngx-fancyindex */
	PAGE_APACHE_PRE,	/* Apache mod_autoindex FancyIndexing <pre> */
	PAGE_APACHE_TABLE,	/* Apache mod_autoindex HTMLTable */
	PAGE_APACHE_UL,		/* Apache mod_autoindex plain <ul> */
	PAGE_LIGHTTPD,		/* lighttpd mod_dirlisting */
	PAGE_IIS,		/* IIS directory browsing */
	PAGE_CADDY1,		/* Caddy v1 browse */
	PAGE_CADDY2,		/* Caddy v2 file_server browse */
	PAGE_SNT,		/* SNT index generator (explicit offsets) */
	PAGE_DOCKER,		/* download.docker.com style */
};

/* Name of a page format, for logs and tests ("nginx", "apache-table", ...). */
const char	*page_format_name(enum page_format f);

/*
 * Parse one index page body[0..len) (borrowed, need not be NUL-terminated;
 * content_type may be NULL) fetched from page_url (absolute, ending in
 * '/', after redirects), appending to out each entry with path prefix
 * ("" for the root, else "a/b") + "/" + decoded name.  *ret_format gets
 * the format, *ret_skipped the unsafe names skipped (either may be NULL).
 * Which links count: docs/internals.md, "Reading index pages".  Returns 0,
 * BM_EPROTO (not a parseable page), BM_ENOMEM or BM_ELIMIT; errbuf
 * (errlen bytes, may be NULL) receives a reason on failure.
 */
int	list_http_parse(const uint8_t *body, size_t len,
	    const char *content_type, const char *page_url, const char *prefix,
	    struct listing *out, enum page_format *ret_format,
	    size_t *ret_skipped, char *errbuf, size_t errlen);

/*
 * A page parsed as it arrives, with list_http_parse's rules and results:
 * list_http_push_new (arguments as list_http_parse's, borrowed for the
 * parser's life; content_type copied; the HTML tree pruned every
 * prune_bytes, 0: only at the end), list_http_push_feed with each piece
 * in order, list_http_push_end, list_http_push_free.  new returns 0 or
 * BM_ENOMEM; feed 0, or BM_ENOMEM or BM_ELIMIT (out is full: the page
 * is lost; other failures wait for end); end what list_http_parse
 * returns, taking the page's entries back out of out on failure.
 */
struct list_http_push;
int	list_http_push_new(const char *content_type, const char *page_url,
	    const char *prefix, struct listing *out, size_t prune_bytes,
	    struct list_http_push **ret);
int	list_http_push_feed(struct list_http_push *hp, const uint8_t *data,
	    size_t len);
int	list_http_push_end(struct list_http_push *hp,
	    enum page_format *ret_format, size_t *ret_skipped, char *errbuf,
	    size_t errlen);
void	list_http_push_free(struct list_http_push *hp);
/*
 * A huge page handed on as it is read: when firm says every entry in
 * out is final, forget keeps only their names (to drop a later row that
 * repeats one), and the caller moves them on and empties out.  Forget
 * returns 0 or BM_ENOMEM.
 */
bool	list_http_push_firm(const struct list_http_push *hp);
int	list_http_push_forget(struct list_http_push *hp);

struct crawl_opts {
	const struct filter *filter;	/* borrowed: include/exclude, NULL for all */
	unsigned	 max_depth;	/* hard depth limit (directories below root) */
	bool		 shallow;	/* past max_depth: no error (crawl.h) */
	size_t		 max_entries;	/* entries per directory, 0: none */
	size_t		 batch;		/* pages fetched per callback call */
	listing_drain_fn drain;		/* NULL, or out's consumer after each
					   batch (crawl_params) */
	void		*drain_ctx;	/* borrowed: drain's ctx */
	listing_retract_fn retract;	/* NULL, or drain's undo (crawl_params) */
	size_t		*ret_loops;	/* borrowed, may be NULL: set to the number
					   of directories not descended because
					   they repeat an ancestor (symlink loop) */
	size_t		*ret_skipped;	/* borrowed, may be NULL: set to the number
					   of hostile/invalid names skipped */
};

/*
 * Crawl the tree under source_url (absolute, ending in '/') breadth first,
 * opts->batch pages at a time, appending entries to out with paths
 * relative to the source; its bounds and the filter: docs/internals.md,
 * "Reading index pages".  Returns 0 when the listing is complete;
 * BM_ENET/BM_EPROTO/BM_EHTTP/BM_ENOENT when a page failed (incomplete:
 * never used for deletes), BM_ENOMEM or BM_ELIMIT.  errbuf gets "URL:
 * reason" of the first failure.
 */
int	list_http_crawl(const char *source_url, const struct crawl_opts *opts,
	    http_fetch_fn fetch, void *ctx, struct listing *out,
	    char *errbuf, size_t errlen);

#endif
