/*
 * The bm:// lister (lister.h; docs/protocol.md "LIST"): one page, the
 * source's whole recursive listing in one LIST request, fetched through
 * the run's callback (the "bm" transport, agent/xfer/bm.c, owns the
 * session and hands the ENTRY frames over as they came).  This file
 * decodes them with the shared codec (bmproto.h): exact sizes (a listed 0
 * is exact), nanosecond mtimes stated in UTC, symlinks with their
 * targets.  Every name is judged again here (path_is_safe): the server's
 * listing is data, not truth.  So is its shape: a name listed again keeps
 * the first, and an entry below a listed file or symlink is skipped, both
 * counted for the run's log.  No socket here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/bmproto.h"
#include "biomirror/error.h"
#include "biomirror/lister.h"
#include "biomirror/listing.h"

#define NS	1000000000LL

/*
 * Whether every directory above path (len bytes) is one the filter
 * descends into, and path lies at most max_depth levels down.
 */
static bool
bm_ancestors_taken(const struct filter *f, char *path, size_t len,
    unsigned max_depth)
{
	unsigned depth = 0;
	size_t	 i;
	bool	 ok = true;

	for (i = 0; i < len && ok; i++) {
		if (path[i] != '/')
			continue;
		depth++;
		path[i] = '\0';
		ok = filter_dir(f, path) && depth <= max_depth;
		path[i] = '/';
	}
	return ok;
}

/*
 * One ENTRY (e, its path already checked) into out.  Returns 0,
 * BM_ENOMEM or BM_ELIMIT (listing full).
 */
static int
bm_take(const struct bmp_entry *e, struct listing *out)
{
	struct entry	*dst = NULL;
	char		*path = NULL, *target = NULL;
	int		 rc = BM_ENOMEM;

	if ((path = strndup((const char *)e->path.p, e->path.len)) == NULL)
		goto out;
	if (e->type == BMP_T_LINK && (target = strndup((const char *)
	    e->target.p, e->target.len)) == NULL)
		goto out;
	if ((rc = listing_append(out, &dst)) != 0)
		goto out;
	dst->path = path;
	dst->target = target;
	path = target = NULL;
	dst->type = e->type == BMP_T_FILE ? ENTRY_FILE : e->type == BMP_T_DIR ?
	    ENTRY_DIR : ENTRY_SYMLINK;
	if (dst->type == ENTRY_FILE) {
		dst->size = (int64_t)e->size;
		dst->size_exact = true;
		dst->size_min = dst->size_max = dst->size;
	}
	/* Floor division: a time before 1970 keeps 0 <= nsec < 1 s. */
	dst->mtime_wall = e->mtime_ns / NS - (e->mtime_ns % NS < 0);
	dst->mtime_nsec = (int32_t)(e->mtime_ns - dst->mtime_wall * NS);
	dst->mtime_prec = MTIME_NS;
	dst->zone_stated = true;
	dst->zone_offset = 0;
	rc = 0;
out:
	free(path);
	free(target);
	return rc;
}

/* Whether a listed ancestor of e (in all, sorted) is not a directory. */
static bool
bm_beneath(const struct listing *all, const struct entry *e)
{
	const struct entry *a;
	const char	*p = e->path;
	ssize_t		 i;
	size_t		 k;

	for (k = 0; p[k] != '\0'; k++) {
		if (p[k] != '/' || (i = listing_find(all, p, k)) < 0)
			continue;
		a = listing_get(all, (size_t)i);
		if (a->type != ENTRY_DIR)
			return true;
	}
	return false;
}

/*
 * The listing as a tree, into out: all sorted, a name listed again
 * dropped (the first kept: st->dups), an entry below a listed file or
 * symlink dropped (st->beneath: nothing is ever made or written beneath
 * what the listing says is not a directory), then the filter.  Moves
 * the entries it keeps out of all.  0, BM_ENOMEM or BM_ELIMIT.
 */
static int
bm_tree(const struct lister_run *lr, struct listing *all,
    struct listing *out, struct lister_stats *st)
{
	struct entry	*e;
	bool		*below = NULL;
	size_t		 i, n;
	int		 rc;

	if ((rc = listing_sort_count(all, &st->dups)) != 0)
		goto out;
	n = listing_count(all);
	rc = BM_ENOMEM;
	if (n > 0 && (below = calloc(n, sizeof(*below))) == NULL)
		goto out;
	/* All judged before any moves: a moved entry is blank in all. */
	for (i = 0; i < n; i++)
		if ((below[i] = bm_beneath(all, listing_get(all, i))))
			st->beneath++;
	for (i = 0; i < n; i++) {
		e = listing_get_mut(all, i);
		if (below[i] || !bm_ancestors_taken(lr->filter, e->path,
		    strlen(e->path), lr->max_depth) || (e->type == ENTRY_DIR ?
		    !filter_dir(lr->filter, e->path) :
		    !filter_file(lr->filter, e->path)))
			continue;
		if ((rc = listing_move_in(out, e)) != 0)
			goto out;
	}
	rc = 0;
out:
	free(below);
	return rc;
}

/* Decode the ENTRY frames of body (len bytes) into out. */
static int
bm_decode(const struct lister_run *lr, const uint8_t *body, size_t len,
    struct listing *out, struct lister_stats *st, char *errbuf,
    size_t errlen)
{
	struct bmp_entry e;
	uint32_t	 id;
	uint8_t		 type;
	size_t		 off = 0, plen;
	int		 rc;

	while (off < len) {
		if (len - off < BMP_HDR_LEN ||
		    bmp_header(body + off, BMP_FRAME_MAX, &type, &plen) != 0 ||
		    type != BMP_ENTRY || plen > len - off - BMP_HDR_LEN ||
		    bmp_dec_entry(body + off + BMP_HDR_LEN, plen, &id, &e) != 0) {
			(void)snprintf(errbuf, errlen, "%s: a malformed listing "
			    "entry at byte %zu", lr->source, off);
			return BM_EPROTO;
		}
		off += BMP_HDR_LEN + plen;
		if (!path_is_safe((const char *)e.path.p, e.path.len) ||
		    (e.type != BMP_T_FILE && e.type != BMP_T_DIR &&
		    e.type != BMP_T_LINK) || e.size > INT64_MAX ||
		    (e.type == BMP_T_LINK && (e.target.len == 0 ||
		    memchr(e.target.p, '\0', e.target.len) != NULL))) {
			st->skipped++;
			continue;
		}
		if ((rc = bm_take(&e, out)) != 0) {
			if (rc == BM_ELIMIT)
				(void)snprintf(errbuf, errlen, "%s: more than "
				    "%zu entries", lr->source,
				    listing_count(out));
			return rc;
		}
	}
	return 0;
}

/* lister_ops.list: one page, the source's LIST. */
static int
bm_list(const struct lister_run *lr, struct listing *out,
    struct lister_stats *ret, char *errbuf, size_t errlen)
{
	struct http_page pg;
	struct listing	*all = NULL;
	int		 rc;

	memset(ret, 0, sizeof(*ret));
	memset(&pg, 0, sizeof(pg));
	pg.url = lr->source;
	pg.command = "LIST";
	if ((rc = lr->fetch(lr->ctx, &pg, 1)) != 0) {
		if (rc != BM_EINTR && rc != BM_ENOMEM)
			(void)snprintf(errbuf, errlen, "%s: %s", lr->source,
			    bm_strerror(rc));
		goto out;
	}
	if ((rc = pg.rc) != 0) {
		/* The transport's reasons name the server already. */
		if (pg.errmsg[0] != '\0')
			(void)snprintf(errbuf, errlen, "%s", pg.errmsg);
		else
			(void)snprintf(errbuf, errlen, "%s: %s", lr->source,
			    bm_strerror(rc));
		goto out;
	}
	/* Capped as out is: out takes at most what all holds. */
	if ((all = listing_new(listing_room(out))) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	if ((rc = bm_decode(lr, pg.body, pg.len, all, ret, errbuf,
	    errlen)) != 0)
		goto out;
	if ((rc = bm_tree(lr, all, out, ret)) == BM_ELIMIT)
		(void)snprintf(errbuf, errlen, "%s: more than %zu entries",
		    lr->source, listing_count(out));
out:
	listing_free(all);
	free(pg.body);
	free(pg.content_type);
	free(pg.effective_url);
	return rc;
}

static const char *const bm_schemes[] = { "bm", NULL };

const struct lister_ops lister_bm_ops = {
	.name = "bm",
	.schemes = bm_schemes,
	.connections = 4,
	.unit = "entries",
	.zone = LISTER_ZONE_LISTING,
	.list = bm_list,
};
