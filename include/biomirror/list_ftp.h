/*
 * The FTP lister (lister_ftp_ops: ftp://, ftps://): MLSD and LIST replies
 * into listing entries, a tree of them over the shared crawl (crawl.h).
 * Replies come through the lister's fetch callback; names stay the bytes
 * the server listed.  Never touches SQLite or the destination.  Reply
 * formats and symlink rules: see docs/ftp.md.
 */
#ifndef BIOMIRROR_LIST_FTP_H
#define BIOMIRROR_LIST_FTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "biomirror/lister.h"
#include "biomirror/listing.h"

/*
 * Parse one MLSD (mlsd true) or LIST (mlsd false) reply: body, len
 * (borrowed, not NUL-terminated; lines end in CRLF or LF); now_wall, the
 * server's clock read as UTC, dates LIST gives without a year; prefix,
 * this directory's relative path ("" for the root); entries appended to
 * out; *ret_skipped (may be NULL) counts lines not understood and unsafe
 * names.  A bad line is skipped, never fatal; a line whose date does not
 * exist is kept with an unknown time; a LIST size of 0 is a hint (size
 * unknown, size_display "0"), MLSD's size=0 is exact.  Returns 0, BM_ENOMEM or
 * BM_ELIMIT (the listing's cap).  Formats: see docs/ftp.md, "Parsing
 * MLSD and LIST replies".
 */
int	list_ftp_parse(const uint8_t *body, size_t len, bool mlsd,
	    int64_t now_wall, const char *prefix, struct listing *out,
	    size_t *ret_skipped);

/*
 * Why list_ftp_parse() skips one line (line, len: borrowed, no line end;
 * mlsd and now_wall as there): a static reason ("unsafe name", "no size
 * and date columns ..."), or NULL when the line makes an entry or is
 * always left out (blank, "total", ".", devices).  A line whose date
 * does not exist (Feb 30) makes an entry with an unknown time.
 */
const char *list_ftp_line_why(const uint8_t *line, size_t len, bool mlsd,
	    int64_t now_wall);

/*
 * True when a FEAT reply (RFC 2389; the server's reply lines as
 * received, borrowed) advertises MLST, i.e. MLSD can be used (RFC 3659
 * section 7.8).
 */
bool	list_ftp_feat_mlst(const uint8_t *body, size_t len);

/*
 * True when a FEAT reply (as above) lists the feature NAME ("MLST",
 * "DCAU"; compared without case, RFC 2389 section 3.2); feat_mlst() is
 * feat_has(body, len, "MLST").  DCAU marks a GridFTP server (docs/ftp.md,
 * "Parsing MLSD and LIST replies").
 */
bool	list_ftp_feat_has(const uint8_t *body, size_t len, const char *name);

struct ftp_crawl_opts {
	const struct filter *filter;	/* borrowed: include/exclude, NULL for all */
	unsigned	 max_depth;	/* hard depth limit (directories below root) */
	bool		 shallow;	/* past max_depth: no error (crawl.h) */
	size_t		 batch;		/* replies fetched per callback call */
	size_t		 max_entries;	/* entries per directory, 0: none */
	listing_drain_fn drain;		/* NULL, or out's consumer after each
					   batch (crawl_params); not used
					   with follow (links are resolved
					   against the whole listing) */
	void		*drain_ctx;	/* borrowed: drain's ctx */
	int64_t		 now_wall;	/* server's clock, for LIST year inference */
	bool		*ret_mlsd;	/* borrowed, may be NULL: set to true
					   when MLSD was used */
	bool		*ret_gridftp;	/* borrowed, may be NULL: set to true
					   when FEAT listed DCAU (GridFTP) */
	size_t		*ret_loops;	/* borrowed, may be NULL: directories not
					   entered because MLSD gave them the
					   unique= of one already listed */
	size_t		*ret_skipped;	/* borrowed, may be NULL: lines skipped */
	size_t		*ret_unread;	/* borrowed, may be NULL: of them, the
					   lines not understood, then not in
					   *ret_skipped (at -v each is logged) */
	bool		 follow;	/* follow_symlinks: fetch link targets */
	size_t		*ret_dangling;	/* borrowed, may be NULL: followed links
					   whose target is not in the listing */
	struct listing	*unlisted;	/* borrowed, may be NULL: directories
					   inside a followed link (the link's
					   own, or below it) that the server
					   refused to list with a 5xx reply
					   (RFC 959: permanent; e.g. a target
					   outside the paths it serves) are
					   appended here (ENTRY_DIR, path, the
					   reply as size_display) instead of
					   failing the listing; NULL: they fail
					   it */
	/*
	 * May be NULL: called once FEAT is read, before the first listing,
	 * with feat_arg, whether MLSD will be used and whether the server
	 * is GridFTP (FEAT lists DCAU), so that the caller can set up its
	 * transport for them.
	 */
	void		(*on_feat)(void *arg, bool mlsd, bool gridftp);
	void		*feat_arg;	/* borrowed: on_feat's arg */
};

/*
 * Crawl the FTP tree under source_url (ftp:// or ftps://, ending in '/'):
 * FEAT once, then MLSD (when MLST is advertised) or LIST per directory,
 * breadth first in batches of opts->batch, never past max_depth.
 * Symlinks are ENTRY_SYMLINK unless opts->follow (rules: see docs/ftp.md,
 * "Crawling an FTP tree").  out gets the entries.  Returns 0 when the
 * listing is complete, the first failed reply's BM_E* code (incomplete),
 * BM_ELIMIT (a directory past max_depth) or BM_ENOMEM; errbuf gets
 * "URL: reason".
 */
int	list_ftp_crawl(const char *source_url,
	    const struct ftp_crawl_opts *opts, http_fetch_fn fetch, void *ctx,
	    struct listing *out, char *errbuf, size_t errlen);

#endif
