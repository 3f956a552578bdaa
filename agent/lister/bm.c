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
 * counted for the run's log.  With the run's drain each entry is judged
 * as it arrives and the final ones are handed on in batches while the
 * LIST streams (struct bm_stream).  No socket here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/bmproto.h"
#include "biomirror/digest.h"
#include "biomirror/error.h"
#include "biomirror/lister.h"
#include "biomirror/listing.h"
#include "biomirror/text.h"

#define NS	1000000000LL
#define BM_DRAIN_AT	1024	/* judged entries handed on at once */

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

/* The digest an ENTRY states as "sha256:HEX" into *ret (malloc'd). */
static int
bm_checksum(const struct bmp_entry *e, char **ret)
{
	struct digest_value v;
	char		 text[DIGEST_TEXT_MAX];

	v.alg = DIGEST_SHA256;
	memcpy(v.md, e->digest, BMP_DIGEST_LEN);
	if (digest_to_text(&v, text, sizeof(text)) != 0)
		return BM_ELIMIT;
	if ((*ret = strdup(text)) == NULL)
		return BM_ENOMEM;
	return 0;
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
		if (e->digest_kind == BMP_D_SHA256 && (rc = bm_checksum(e,
		    &dst->checksum)) != 0)
			goto out;	/* dst is the listing's: freed with it */
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

/* Whether e passes the filter and max_depth (bm_tree's last test). */
static bool
bm_wanted(const struct lister_run *lr, struct entry *e)
{
	return bm_ancestors_taken(lr->filter, e->path, strlen(e->path),
	    lr->max_depth) && (e->type == ENTRY_DIR ?
	    filter_dir(lr->filter, e->path) : filter_file(lr->filter, e->path));
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
		if (below[i] || !bm_wanted(lr, e))
			continue;
		if ((rc = listing_move_in(out, e)) != 0)
			goto out;
	}
	rc = 0;
out:
	free(below);
	return rc;
}

/*
 * Every path listed so far with the type it was first listed as: the
 * judge of names listed again and of what lies beneath a file or
 * symlink while the listing is handed on as it comes.  Open addressing,
 * at most half full.
 */
struct bm_seen {
	struct bm_seen_slot {
		char		*path;	/* owned, NULL: empty */
		enum entry_type	 type;
		unsigned	 gen;	/* the last LIST (sent again: + 1)
					   it came in */
	}		*v;		/* owned: cap slots */
	size_t		 n, cap;	/* cap: 0 or a power of 2 */
};

/* The slot of path's first len bytes (empty when not seen). */
static struct bm_seen_slot *
bm_seen_slot(const struct bm_seen *ss, const char *path, size_t len)
{
	struct bm_seen_slot *sl;
	size_t		 i = (size_t)text_fnv1a(path, len) & (ss->cap - 1);

	for (;; i = (i + 1) & (ss->cap - 1)) {
		sl = &ss->v[i];
		if (sl->path == NULL || (strncmp(sl->path, path, len) == 0 &&
		    sl->path[len] == '\0'))
			return sl;
	}
}

/*
 * Note path as listed with type in LIST gen; *ret_again: it was listed
 * before (the first type kept), last in LIST *ret_gen.  0 or BM_ENOMEM.
 */
static int
bm_seen_add(struct bm_seen *ss, const char *path, enum entry_type type,
    unsigned gen, bool *ret_again, unsigned *ret_gen)
{
	struct bm_seen_slot *sl, *old = ss->v;
	size_t		 i, ocap = ss->cap;

	if (ss->cap > 0 && (sl = bm_seen_slot(ss, path, strlen(path)))->path !=
	    NULL) {
		*ret_again = true;
		*ret_gen = sl->gen;
		sl->gen = gen;
		return 0;
	}
	if ((ss->n + 1) * 2 > ss->cap) {
		ss->cap = ocap > 0 ? ocap * 2 : 4096;
		if ((ss->v = calloc(ss->cap, sizeof(*ss->v))) == NULL) {
			ss->v = old;
			ss->cap = ocap;
			return BM_ENOMEM;
		}
		for (i = 0; i < ocap; i++)
			if (old[i].path != NULL)
				*bm_seen_slot(ss, old[i].path,
				    strlen(old[i].path)) = old[i];
		free(old);
	}
	sl = bm_seen_slot(ss, path, strlen(path));
	if ((sl->path = strdup(path)) == NULL)
		return BM_ENOMEM;
	sl->type = type;
	sl->gen = gen;
	ss->n++;
	*ret_again = false;
	return 0;
}

/* Free the paths and slots of ss; ss is empty again (reusable). */
static void
bm_seen_free(struct bm_seen *ss)
{
	size_t	 i;

	for (i = 0; i < ss->cap; i++)
		free(ss->v[i].path);
	free(ss->v);
	memset(ss, 0, sizeof(*ss));
}

enum bm_anc {
	BM_ANC_DIRS,		/* every ancestor listed, as a directory */
	BM_ANC_UNSEEN,		/* none is a file or symlink, some unlisted */
	BM_ANC_BENEATH		/* one was first listed as no directory */
};

/* What the listing so far says of path's ancestors. */
static enum bm_anc
bm_seen_ancestors(const struct bm_seen *ss, const char *path)
{
	const struct bm_seen_slot *sl;
	enum bm_anc	 a = BM_ANC_DIRS;
	size_t		 k;

	for (k = 0; path[k] != '\0'; k++) {
		if (path[k] != '/')
			continue;
		sl = bm_seen_slot(ss, path, k);
		if (sl->path == NULL)
			a = BM_ANC_UNSEEN;
		else if (sl->type != ENTRY_DIR)
			return BM_ANC_BENEATH;
	}
	return a;
}

/*
 * The ENTRY frames of the LIST as they arrive: whole frames are decoded
 * into all, the frame in progress is kept (at most BMP_FRAME_MAX bytes).
 * With a drain (lr->drain) each entry is judged as it comes (seen): one
 * whose ancestors are all listed, as directories, is final and goes to
 * out, handed on every BM_DRAIN_AT; one with an unlisted ancestor waits
 * in all for the end (that ancestor may yet come as a file).
 */
struct bm_stream {
	struct page_stream ops;		/* the page's stream (arg: this) */
	const struct lister_run *lr;	/* borrowed */
	struct lister_stats *st;	/* borrowed */
	struct listing	*all;		/* borrowed: the entries so far (with a
					   drain: those still to be judged) */
	struct listing	*out;		/* borrowed: the lister's output */
	struct bm_seen	 seen;		/* owned: with a drain, all paths */
	size_t		 ncap;		/* with a drain: entries the LIST may
					   have (all's cap without one) */
	size_t		 nlisted;	/* with a drain: entries decoded */
	size_t		 handed;	/* entries put in out (with a drain) */
	unsigned	 gen;		/* LISTs sent again after some entries
					   were handed on: the earlier ones'
					   names are not counted as repeats */
	uint8_t		*buf;		/* owned: the frame in progress */
	size_t		 len, cap;
	uint64_t	 off;		/* reply bytes before buf */
	int		 rc;		/* first failure */
	char		 err[256];	/* its reason */
};

/*
 * With a drain: judge the entry just decoded (the last of all).  A
 * repeat or one beneath a file or symlink is dropped and counted, a
 * final one moved to out (or dropped by the filter), the rest left in
 * all.  0, BM_ENOMEM, BM_ELIMIT or the drain's code.
 */
static int
bm_arrive(struct bm_stream *bs)
{
	struct entry	*e = listing_get_mut(bs->all,
			    listing_count(bs->all) - 1);
	enum bm_anc	 a;
	unsigned	 gen = 0;
	bool		 again;
	int		 rc;

	if ((rc = bm_seen_add(&bs->seen, e->path, e->type, bs->gen, &again,
	    &gen)) != 0)
		return rc;
	if (again) {
		if (gen == bs->gen)
			bs->st->dups++;
		else
			bs->nlisted--;	/* sent again: not against the cap */
		listing_pop(bs->all);
		return 0;
	}
	if ((a = bm_seen_ancestors(&bs->seen, e->path)) == BM_ANC_BENEATH) {
		bs->st->beneath++;
		listing_pop(bs->all);
		return 0;
	}
	if (a == BM_ANC_UNSEEN)
		return 0;
	if (bm_wanted(bs->lr, e)) {
		if ((rc = listing_move_in(bs->out, e)) != 0)
			return rc;
		bs->handed++;
	}
	listing_pop(bs->all);
	if (listing_count(bs->out) < BM_DRAIN_AT)
		return 0;
	return bs->lr->drain(bs->lr->ctx, bs->out);
}

/*
 * With a drain, at the end: the entries that waited, judged against the
 * whole listing as bm_tree does, into out.  0, BM_ENOMEM or BM_ELIMIT.
 */
static int
bm_rest(struct bm_stream *bs)
{
	struct entry	*e;
	size_t		 i, n = listing_count(bs->all);
	int		 rc;

	for (i = 0; i < n; i++) {
		e = listing_get_mut(bs->all, i);
		if (bm_seen_ancestors(&bs->seen, e->path) == BM_ANC_BENEATH)
			bs->st->beneath++;
		else if (bm_wanted(bs->lr, e) &&
		    (rc = listing_move_in(bs->out, e)) != 0)
			return rc;
	}
	return 0;
}

/* Decode the whole ENTRY frames of bs->buf; keep the rest. */
static int
bm_decode(struct bm_stream *bs)
{
	const struct lister_run *lr = bs->lr;
	struct bmp_entry e;
	uint32_t	 id;
	uint8_t		 type;
	size_t		 off = 0, plen;
	int		 rc = 0;

	while (bs->len - off >= BMP_HDR_LEN) {
		if (bmp_header(bs->buf + off, BMP_FRAME_MAX, &type,
		    &plen) != 0 || type != BMP_ENTRY) {
			rc = BM_EPROTO;
			break;
		}
		if (plen > bs->len - off - BMP_HDR_LEN)
			break;	/* the rest of it is still to come */
		if (bmp_dec_entry(bs->buf + off + BMP_HDR_LEN, plen, &id,
		    &e) != 0) {
			rc = BM_EPROTO;
			break;
		}
		off += BMP_HDR_LEN + plen;
		if (!path_is_safe((const char *)e.path.p, e.path.len) ||
		    (e.type != BMP_T_FILE && e.type != BMP_T_DIR &&
		    e.type != BMP_T_LINK) || e.size > INT64_MAX ||
		    (e.type == BMP_T_LINK && (e.target.len == 0 ||
		    memchr(e.target.p, '\0', e.target.len) != NULL))) {
			bs->st->skipped++;
			continue;
		}
		if (lr->drain != NULL && bs->nlisted >= bs->ncap)
			rc = BM_ELIMIT;
		else if ((rc = bm_take(&e, bs->all)) == 0 &&
		    lr->drain != NULL) {
			bs->nlisted++;
			rc = bm_arrive(bs);
		}
		if (rc != 0) {
			if (rc == BM_ELIMIT)
				(void)snprintf(bs->err, sizeof(bs->err), "%s: "
				    "more than %zu entries (max_entries)",
				    lr->source, lr->drain != NULL ?
				    bs->nlisted : listing_count(bs->all));
			goto out;
		}
	}
	if (rc == BM_EPROTO)
		(void)snprintf(bs->err, sizeof(bs->err), "%s: a malformed "
		    "listing entry at byte %llu", lr->source,
		    (unsigned long long)(bs->off + off));
out:
	memmove(bs->buf, bs->buf + off, bs->len - off);
	bs->len -= off;
	bs->off += off;
	return rc;
}

static int
bm_begin(void *arg)
{
	struct bm_stream *bs = arg;

	/*
	 * Sent again: from scratch, unless some were handed on already;
	 * then the first listing of each name stays the one that counts
	 * (as the staging table keeps it), the waiting ones too.
	 */
	if (bs->handed > 0)
		bs->gen++;
	else {
		while (listing_count(bs->all) > 0)
			listing_pop(bs->all);
		bm_seen_free(&bs->seen);
		bs->nlisted = 0;
	}
	bs->len = 0;
	bs->off = 0;
	bs->rc = 0;
	bs->err[0] = '\0';
	return 0;
}

static int
bm_feed(void *arg, const char *ctype, const uint8_t *data, size_t len)
{
	struct bm_stream *bs = arg;
	uint8_t		*nb;
	size_t		 ncap;

	(void)ctype;
	if (bs->rc != 0)
		return bs->rc;
	if (bs->len + len > bs->cap) {
		ncap = bs->cap ? bs->cap : 65536;
		while (ncap < bs->len + len)
			ncap *= 2;
		if ((nb = realloc(bs->buf, ncap)) == NULL)
			return bs->rc = BM_ENOMEM;
		bs->buf = nb;
		bs->cap = ncap;
	}
	memcpy(bs->buf + bs->len, data, len);
	bs->len += len;
	return bs->rc = bm_decode(bs);
}

/* lister_ops.list: one page, the source's LIST, decoded as it comes. */
static int
bm_list(const struct lister_run *lr, struct listing *out,
    struct lister_stats *ret, char *errbuf, size_t errlen)
{
	struct http_page pg;
	struct bm_stream bs;
	struct listing	*all = NULL;
	size_t		 cap;
	int		 rc;

	memset(ret, 0, sizeof(*ret));
	memset(&pg, 0, sizeof(pg));
	memset(&bs, 0, sizeof(bs));
	/* Capped as out is: out takes at most what all holds. */
	cap = listing_room(out);
	if (lr->max_entries > 0 && lr->max_entries < cap)
		cap = lr->max_entries;
	if ((all = listing_new(cap)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	bs.ops.begin = bm_begin;
	bs.ops.feed = bm_feed;
	bs.ops.arg = &bs;
	bs.lr = lr;
	bs.st = ret;
	bs.all = all;
	bs.out = out;
	bs.ncap = cap;
	pg.url = lr->source;
	pg.command = "LIST";
	pg.stream = &bs.ops;
	if ((rc = lr->fetch(lr->ctx, &pg, 1)) != 0) {
		if (rc != BM_EINTR && rc != BM_ENOMEM)
			(void)snprintf(errbuf, errlen, "%s: %s", lr->source,
			    bm_strerror(rc));
		goto out;
	}
	if ((rc = bs.rc) != 0) {
		(void)snprintf(errbuf, errlen, "%s", bs.err);
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
	if (bs.len > 0) {
		rc = BM_EPROTO;
		(void)snprintf(errbuf, errlen, "%s: a malformed listing entry "
		    "at byte %llu", lr->source, (unsigned long long)bs.off);
		goto out;
	}
	if ((rc = lr->drain != NULL ? bm_rest(&bs) : bm_tree(lr, all, out,
	    ret)) == BM_ELIMIT)
		(void)snprintf(errbuf, errlen, "%s: more than %zu entries",
		    lr->source, listing_count(out));
out:
	listing_free(all);
	bm_seen_free(&bs.seen);
	free(bs.buf);
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
