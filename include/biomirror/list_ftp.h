/*
 * The FTP lister (lister_ftp_ops: ftp://, ftps://): turns MLSD replies
 * (RFC 3659 section 7) and LIST replies (Unix "ls -l" style, DOS/IIS
 * style) into listing entries, and crawls a tree of them with the shared
 * crawl (crawl.h).  Replies are fetched through the same callback as
 * index pages (lister.h: the transport owns the sockets); a page's
 * command field selects FEAT, MLSD or LIST.  Names are kept as
 * the bytes the server listed (never re-encoded), so a name that is not
 * UTF-8 is requested with exactly those bytes.  This module never
 * touches SQLite or the destination.
 */
#ifndef BIOMIRROR_LIST_FTP_H
#define BIOMIRROR_LIST_FTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "biomirror/lister.h"
#include "biomirror/listing.h"

/*
 * Parse one MLSD (mlsd true) or LIST (mlsd false) reply.
 *   body, len	the reply bytes (borrowed; need not be NUL-terminated);
 *		lines end in CRLF or LF, never anything else (a 0x85 byte
 *		inside a name is a byte, not a line break)
 *   now_wall	the current time on the server's clock, seconds read as
 *		if UTC (timegm): LIST dates without a year take the most
 *		recent year that puts them no more than one day after it
 *		(the rule "ls" writes them by; FileZilla's)
 *   prefix	relative path of this directory ("" for the root); each
 *		entry's path is prefix + "/" + name
 *   out	entries are appended here
 *   ret_skipped lines neither understood nor always-skipped ("total N",
 *		".", "..", blank lines, cdir/pdir), plus unsafe names
 *		(name_is_safe()); may be NULL
 * MLSD: facts are case-insensitive; "size" is exact, "modify" is UTC to
 * the second or finer, "type" file/dir/OS.unix=slink:TARGET/
 * OS.unix=symlink (GridFTP: any type with a UNIX.slink=TARGET fact is a
 * symlink), "unique" is kept in entry->unique; the name is
 * everything after the first "; ".  A record without a type fact is a
 * file.  LIST Unix: "Mon DD HH:MM" has MTIME_MINUTE precision with an
 * inferred year, "Mon DD YYYY" MTIME_DAY; human sizes ("1.1k") are
 * inexact with the range a truncating formatter stands for; "l" entries
 * are symlinks ("name -> target").  LIST DOS: "MM-DD-YY[YY] HH:MM[AM|PM]
 * <DIR>|size name", MTIME_MINUTE.  LIST times are wall-clock in the
 * server's zone (zone_stated false: ftp_timezone resolves them).
 * A bad line is skipped, never fatal.  Returns 0, BM_ENOMEM or BM_ELIMIT
 * (the listing's cap).
 */
int	list_ftp_parse(const uint8_t *body, size_t len, bool mlsd,
	    int64_t now_wall, const char *prefix, struct listing *out,
	    size_t *ret_skipped);

/*
 * True when a FEAT reply (RFC 2389; the server's reply lines as
 * received, borrowed) advertises MLST, i.e. MLSD can be used (RFC 3659
 * section 7.8).
 */
bool	list_ftp_feat_mlst(const uint8_t *body, size_t len);

/*
 * True when a FEAT reply (as above) lists the feature NAME (a keyword such
 * as "MLST" or "DCAU", compared without case; RFC 2389 section 3.2: one
 * feature per line, after one space, parameters after a space).
 * list_ftp_feat_mlst() is list_ftp_feat_has(body, len, "MLST").  A FEAT
 * listing DCAU (data channel authentication, OGF GFD.20) comes from a
 * GridFTP server, which fixes a data connection's TYPE when the
 * connection opens (see xfer_ftp_opts.gridftp).
 */
bool	list_ftp_feat_has(const uint8_t *body, size_t len, const char *name);

struct ftp_crawl_opts {
	const struct filter *filter;	/* borrowed: include/exclude, NULL for all */
	unsigned	 max_depth;	/* hard depth limit (directories below root) */
	size_t		 batch;		/* replies fetched per callback call */
	int64_t		 now_wall;	/* server's clock, for LIST year inference */
	bool		*ret_mlsd;	/* borrowed, may be NULL: set to true
					   when MLSD was used */
	bool		*ret_gridftp;	/* borrowed, may be NULL: set to true
					   when FEAT listed DCAU (GridFTP) */
	size_t		*ret_loops;	/* borrowed, may be NULL: directories not
					   entered because MLSD gave them the
					   unique= of one already listed */
	size_t		*ret_skipped;	/* borrowed, may be NULL: lines skipped */
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
 * Crawl the FTP tree under source_url (ftp:// or ftps://, ending in
 * '/'): ask FEAT once (page command "FEAT"), then list each directory
 * with "MLSD" when MLST is advertised, else "LIST", breadth first in
 * batches of opts->batch replies, never past max_depth.  Directory URLs
 * are source_url + path_encode(path) + "/" (RFC 1738: relative to the
 * login directory unless the source starts with %2F).  Symlinks are
 * listed as ENTRY_SYMLINK, never descended, unless opts->follow: then
 * each link's target is resolved lexically (RFC 3986-style "." and ".."
 * removal, POSIX path resolution of every component through the links
 * listed on the way) against the link's real directory, once the real
 * tree is listed.  A link to a listed file becomes an ENTRY_FILE at the
 * link's path with the target's listed size and time (fetched with RETR
 * of the link's path, exact through SIZE/MDTM like any listed file); a
 * link to a listed directory is listed as a directory at the link's path,
 * unless its real path (or its MLSD unique=) is the one of the link's own
 * directory or an ancestor's: that is a loop, counted in *ret_loops and
 * not entered.  A target that leaves the source tree (absolute, or ".."
 * past the root) is an ENTRY_FILE of unknown size and time at the link's
 * path (what the server serves under that name); a target inside the
 * tree that is not listed (dangling, excluded, or a link chain over 40
 * hops) is counted in *ret_dangling and dropped.  Directories filtered out by
 * opts->filter are not listed; files not taken are not appended.
 * Returns 0 when the listing is complete, the first failed reply's
 * BM_E* code (the listing is then incomplete), BM_ELIMIT when a
 * directory lay past max_depth, or BM_ENOMEM.  errbuf gets "URL: reason".
 */
int	list_ftp_crawl(const char *source_url,
	    const struct ftp_crawl_opts *opts, http_fetch_fn fetch, void *ctx,
	    struct listing *out, char *errbuf, size_t errlen);

#endif
