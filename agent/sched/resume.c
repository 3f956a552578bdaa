/*
 * Resume across tries and runs (see include/biomirror/resume.h).
 *
 * Invariants: a resume_file's ranges are sorted, disjoint and never
 * adjacent (merged), within [0, size); covered is their total length.
 * They are held in a growing array (at most RESUME_MAX_HELD ranges); a
 * manifest row holds at most MANIFEST_MAX_RANGES, so a row records the
 * largest ranges held: a subset, never a byte more than is held.
 * A manifest row is written only from a snapshot of ranges whose bytes
 * the caller made durable just before (fdatasync), so the row never
 * promises bytes that a crash could lose.  The validators are those of
 * the response that wrote the first byte held; every later response must
 * carry the same ones, and later tries send If-Range, so bytes of two
 * upstream versions never mix in one file.  This module never logs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/resume.h"
#include "biomirror/store.h"

#define NS	1000000000LL

/* One kept partial row (owned copies). */
struct resume_row {
	char		*path;		/* owned */
	char		*tmpname;	/* owned */
	int64_t		 size;		/* bytes */
	int64_t		 up_mtime;	/* ns, -1 unknown */
	char		*etag;		/* owned, NULL if none */
	uint64_t	*ranges;	/* owned: nranges pairs */
	size_t		 nranges;
};

struct resume_set {
	struct resume_row *rows;	/* owned: kept rows, sorted by path */
	size_t		 n, cap;
	struct partial_rec *drops;	/* owned array, strings in dropstr */
	char		**dropstr;	/* owned: drop paths */
	size_t		 ndrops, dcap;
	const struct action **fetch;	/* owned array of borrowed actions */
	size_t		 nfetch;
};

struct resume_file {
	uint64_t	*iv;		/* owned: niv held ranges (pairs) */
	size_t		 niv, ivcap;	/* ranges used, allocated */
	uint64_t	 covered;	/* bytes in iv */
	uint64_t	 size;		/* exact size */
	int64_t		 list_mtime;	/* ns */
	char		*path;		/* owned */
	char		*tmpname;	/* owned: kept row's temp file, or NULL */
	bool		 valid;		/* etag/mtime are those of the bytes held */
	char		 etag[256];	/* "" if none */
	int64_t		 mtime;		/* Last-Modified s, -1 unknown */
	char		 if_range[64 + 256]; /* If-Range value, "" none */
	bool		 in_manifest;	/* a row exists */
	bool		 drop;		/* the row is to be dropped */
	uint64_t	 recorded;	/* covered when last recorded */
	uint64_t	 snap[2 * RESUME_MAX_RANGES];	/* snapshot being recorded */
	size_t		 nsnap;
	uint64_t	 snap_covered;	/* covered at the snapshot */
	bool		 snap_drop;
};

static bool
etag_strong(const char *e)
{
	return e != NULL && e[0] != '\0' && strncmp(e, "W/", 2) != 0;
}

static int
row_cmp(const void *a, const void *b)
{
	return strcmp(((const struct resume_row *)a)->path,
	    ((const struct resume_row *)b)->path);
}

static int
act_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct action *const *)a)->path,
	    (*(const struct action *const *)b)->path);
}

static int
act_key_cmp(const void *key, const void *elem)
{
	return strcmp(key, (*(const struct action *const *)elem)->path);
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
row_free(struct resume_row *r)
{
	free(r->path);
	free(r->tmpname);
	free(r->etag);
	free(r->ranges);
}

void
resume_set_free(struct resume_set *rs)
{
	size_t	 i;

	if (rs == NULL)
		return;
	for (i = 0; i < rs->n; i++)
		row_free(&rs->rows[i]);
	for (i = 0; i < rs->ndrops; i++)
		free(rs->dropstr[i]);
	free(rs->rows);
	free(rs->drops);
	free(rs->dropstr);
	free(rs->fetch);
	free(rs);
}

/* Queue the row of path for dropping. */
static int
set_drop(struct resume_set *rs, const char *path)
{
	void	*p;

	if (rs->ndrops == rs->dcap) {
		rs->dcap = rs->dcap ? rs->dcap * 2 : 16;
		if ((p = reallocarray(rs->drops, rs->dcap,
		    sizeof(*rs->drops))) == NULL)
			return BM_ENOMEM;
		rs->drops = p;
		if ((p = reallocarray(rs->dropstr, rs->dcap,
		    sizeof(*rs->dropstr))) == NULL)
			return BM_ENOMEM;
		rs->dropstr = p;
	}
	if ((rs->dropstr[rs->ndrops] = strdup(path)) == NULL)
		return BM_ENOMEM;
	memset(&rs->drops[rs->ndrops], 0, sizeof(*rs->drops));
	rs->drops[rs->ndrops].path = rs->dropstr[rs->ndrops];
	rs->ndrops++;
	return 0;
}

/* Keep a copy of row p. */
static int
set_keep(struct resume_set *rs, const struct partial_rec *p)
{
	struct resume_row *r;
	void		*v;

	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? rs->cap * 2 : 16;
		if ((v = reallocarray(rs->rows, rs->cap,
		    sizeof(*rs->rows))) == NULL)
			return BM_ENOMEM;
		rs->rows = v;
	}
	r = &rs->rows[rs->n];
	memset(r, 0, sizeof(*r));
	r->size = p->size;
	r->up_mtime = p->up_mtime;
	r->nranges = p->nranges;
	if ((r->path = strdup(p->path)) == NULL ||
	    (r->tmpname = strdup(p->tmpname)) == NULL ||
	    (p->etag != NULL && (r->etag = strdup(p->etag)) == NULL) ||
	    (r->ranges = calloc(2 * p->nranges, sizeof(*r->ranges))) == NULL) {
		row_free(r);
		return BM_ENOMEM;
	}
	memcpy(r->ranges, p->ranges, 2 * p->nranges * sizeof(*r->ranges));
	rs->n++;
	return 0;
}

/* manifest_partials() callback: keep or drop one row. */
static int
prepare_row(void *ctx, const struct partial_rec *p)
{
	struct resume_set *rs = ctx;
	const struct action *const *ap;
	const struct action *a;

	ap = bsearch(p->path, rs->fetch, rs->nfetch, sizeof(*rs->fetch),
	    act_key_cmp);
	a = ap != NULL ? *ap : NULL;
	if (a != NULL && a->fs.listed.size_exact &&
	    a->fs.listed.size == p->size &&
	    a->fs.listed.mtime == p->list_mtime && p->nranges > 0 &&
	    p->size >= RESUME_MIN_SIZE &&
	    (etag_strong(p->etag) || p->up_mtime >= 0))
		return set_keep(rs, p);
	return set_drop(rs, p->path);
}

/* Relative paths of the kept temp files, sorted, into a new array. */
static int
prepare_keep_paths(const struct resume_set *rs, char ***ret)
{
	char		**v;
	const char	*slash;
	size_t		 i;
	int		 n;

	if ((v = calloc(rs->n + 1, sizeof(*v))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < rs->n; i++) {
		slash = strrchr(rs->rows[i].path, '/');
		n = slash == NULL ? asprintf(&v[i], "%s", rs->rows[i].tmpname) :
		    asprintf(&v[i], "%.*s/%s",
		    (int)(slash - rs->rows[i].path), rs->rows[i].path,
		    rs->rows[i].tmpname);
		if (n < 0) {
			v[i] = NULL;
			for (i = 0; v[i] != NULL; i++)
				free(v[i]);
			free(v);
			return BM_ENOMEM;
		}
	}
	qsort(v, rs->n, sizeof(*v), str_cmp);
	*ret = v;
	return 0;
}

/* Sorted pointers to the fetch actions among acts[0..n). */
static int
prepare_fetches(struct resume_set *rs, const struct action *acts, size_t n)
{
	size_t	 i;

	if ((rs->fetch = calloc(n ? n : 1, sizeof(*rs->fetch))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < n; i++)
		if (acts[i].op == ACT_FETCH)
			rs->fetch[rs->nfetch++] = &acts[i];
	qsort(rs->fetch, rs->nfetch, sizeof(*rs->fetch), act_cmp);
	return 0;
}

int
resume_prepare(struct manifest *m, struct store *s,
    const struct action *acts, size_t n, struct resume_set **ret,
    size_t *ret_kept, size_t *ret_removed)
{
	struct resume_set *rs;
	char		**keep = NULL;
	size_t		 i, removed = 0;
	int		 rc;

	if ((rs = calloc(1, sizeof(*rs))) == NULL)
		return BM_ENOMEM;
	if ((rc = prepare_fetches(rs, acts, n)) != 0)
		goto out;
	if ((rc = manifest_partials(m, prepare_row, rs)) != 0)
		goto out;
	if (rs->n > 1)
		qsort(rs->rows, rs->n, sizeof(*rs->rows), row_cmp);
	if (rs->ndrops > 0 && (rc = manifest_partials_put(m, 0, rs->drops,
	    rs->ndrops)) != 0)
		goto out;
	if ((rc = prepare_keep_paths(rs, &keep)) != 0)
		goto out;
	/* A temp file that cannot be removed is retried next run. */
	(void)store_clean_temps_except(s, (const char *const *)keep, rs->n,
	    &removed);
	free(rs->fetch);
	rs->fetch = NULL;
	rs->nfetch = 0;
	*ret_kept = rs->n;
	*ret_removed = removed;
	*ret = rs;
	rs = NULL;
	rc = 0;
out:
	for (i = 0; keep != NULL && keep[i] != NULL; i++)
		free(keep[i]);
	free(keep);
	resume_set_free(rs);
	return rc;
}

/* Compute the If-Range value from the validators. */
static void
file_if_range(struct resume_file *rf)
{
	struct tm	 tm;
	time_t		 t;

	rf->if_range[0] = '\0';
	if (!rf->valid)
		return;
	if (etag_strong(rf->etag)) {
		(void)snprintf(rf->if_range, sizeof(rf->if_range), "%s",
		    rf->etag);
		return;
	}
	t = (time_t)rf->mtime;
	/* An HTTP-date (IMF-fixdate, RFC 9110 section 5.6.7), C locale. */
	if (rf->mtime >= 0 && gmtime_r(&t, &tm) != NULL &&
	    strftime(rf->if_range, sizeof(rf->if_range),
	    "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0)
		rf->if_range[0] = '\0';
}

/*
 * Room for at least n ranges in rf->iv.  Returns 0, BM_ENOMEM, or
 * BM_ELIMIT past RESUME_MAX_HELD.
 */
static int
file_grow(struct resume_file *rf, size_t n)
{
	uint64_t	*p;
	size_t		 cap;

	if (n <= rf->ivcap)
		return 0;
	if (n > RESUME_MAX_HELD)
		return BM_ELIMIT;
	cap = rf->ivcap ? rf->ivcap : 16;
	while (cap < n)
		cap *= 2;
	if (cap > RESUME_MAX_HELD)
		cap = RESUME_MAX_HELD;
	if ((p = reallocarray(rf->iv, 2 * cap, sizeof(*p))) == NULL)
		return BM_ENOMEM;
	rf->iv = p;
	rf->ivcap = cap;
	return 0;
}

struct resume_file *
resume_file_new(const struct resume_set *set, const char *path,
    int64_t size, int64_t list_mtime)
{
	struct resume_file *rf;
	struct resume_row key, *r = NULL;
	size_t		 i;

	if ((rf = calloc(1, sizeof(*rf))) == NULL)
		return NULL;
	rf->size = size > 0 ? (uint64_t)size : 0;
	rf->list_mtime = list_mtime;
	rf->mtime = -1;
	if ((rf->path = strdup(path)) == NULL) {
		free(rf);
		return NULL;
	}
	if (set != NULL && set->n > 0) {
		key.path = rf->path;
		r = bsearch(&key, set->rows, set->n, sizeof(*set->rows),
		    row_cmp);
	}
	if (r == NULL || r->nranges > RESUME_MAX_RANGES)
		return rf;
	if (file_grow(rf, r->nranges) != 0 ||
	    (rf->tmpname = strdup(r->tmpname)) == NULL) {
		resume_file_free(rf);
		return NULL;
	}
	memcpy(rf->iv, r->ranges, 2 * r->nranges * sizeof(*rf->iv));
	rf->niv = r->nranges;
	for (i = 0; i < rf->niv; i++)
		rf->covered += rf->iv[2 * i + 1] - rf->iv[2 * i];
	rf->recorded = rf->covered;
	rf->in_manifest = true;
	rf->valid = true;
	(void)snprintf(rf->etag, sizeof(rf->etag), "%s",
	    r->etag != NULL ? r->etag : "");
	rf->mtime = r->up_mtime >= 0 ? r->up_mtime / NS : -1;
	file_if_range(rf);
	return rf;
}

void
resume_file_free(struct resume_file *rf)
{
	if (rf == NULL)
		return;
	free(rf->path);
	free(rf->tmpname);
	free(rf->iv);
	free(rf);
}

const char *
resume_file_tmpname(const struct resume_file *rf)
{
	return rf->tmpname;
}

/* Forget ranges and validators (the row, if any, stays until dropped). */
static void
file_clear(struct resume_file *rf)
{
	rf->niv = 0;
	rf->covered = 0;
	rf->recorded = 0;
	rf->valid = false;
	rf->etag[0] = '\0';
	rf->mtime = -1;
	rf->if_range[0] = '\0';
}

bool
resume_file_reopened(struct resume_file *rf, bool ok, uint64_t length)
{
	free(rf->tmpname);
	rf->tmpname = NULL;
	if (ok && rf->niv > 0 && rf->iv[2 * rf->niv - 1] <= length)
		return true;
	file_clear(rf);
	rf->drop = rf->in_manifest;
	return false;
}

int
resume_file_add(struct resume_file *rf, uint64_t off, uint64_t len)
{
	uint64_t	 a = off, b = off + len;
	size_t		 i, j, k;
	int		 rc;

	if (len == 0)
		return 0;
	/* First range ending at or after a: it may touch or overlap. */
	for (i = 0; i < rf->niv && rf->iv[2 * i + 1] < a; i++)
		continue;
	/* Ranges i..j-1 overlap or touch [a, b): merge them. */
	for (j = i; j < rf->niv && rf->iv[2 * j] <= b; j++) {
		if (rf->iv[2 * j] < a)
			a = rf->iv[2 * j];
		if (rf->iv[2 * j + 1] > b)
			b = rf->iv[2 * j + 1];
		rf->covered -= rf->iv[2 * j + 1] - rf->iv[2 * j];
	}
	if (j == i && (rc = file_grow(rf, rf->niv + 1)) != 0)
		return rc;	/* covered unchanged: nothing was merged */
	/* Replace ranges i..j-1 by [a, b). */
	k = rf->niv - j;
	memmove(&rf->iv[2 * (i + 1)], &rf->iv[2 * j], 2 * k * sizeof(*rf->iv));
	rf->niv = i + 1 + k;
	rf->iv[2 * i] = a;
	rf->iv[2 * i + 1] = b;
	rf->covered += b - a;
	return 0;
}

int
resume_file_check(struct resume_file *rf, const char *etag, int64_t mtime,
    int64_t total, char *errbuf, size_t errlen)
{
	if (total >= 0 && (uint64_t)total != rf->size) {
		(void)snprintf(errbuf, errlen, "upstream changed: size %lld, "
		    "listed %llu", (long long)total,
		    (unsigned long long)rf->size);
		return BM_ECHANGED;
	}
	if (!rf->valid) {
		(void)snprintf(rf->etag, sizeof(rf->etag), "%s",
		    etag != NULL ? etag : "");
		rf->mtime = mtime;
		rf->valid = true;
		file_if_range(rf);
		return 0;
	}
	if (strcmp(rf->etag, etag != NULL ? etag : "") != 0 ||
	    rf->mtime != mtime) {
		(void)snprintf(errbuf, errlen, "upstream changed between "
		    "ranges (ETag, Last-Modified or FTP MDTM differ): "
		    "starting over");
		return BM_ECHANGED;
	}
	return 0;
}

void
resume_file_validators(struct resume_file *rf, const char *etag,
    int64_t mtime)
{
	if (rf->valid && (rf->etag[0] != '\0' || rf->mtime >= 0))
		return;
	(void)snprintf(rf->etag, sizeof(rf->etag), "%s",
	    etag != NULL ? etag : "");
	rf->mtime = mtime;
	rf->valid = true;
	file_if_range(rf);
}

uint64_t
resume_file_covered(const struct resume_file *rf)
{
	return rf->covered;
}

bool
resume_file_usable(const struct resume_file *rf)
{
	return rf->covered > 0 && rf->if_range[0] != '\0';
}

const char *
resume_file_if_range(const struct resume_file *rf)
{
	return rf->if_range;
}

size_t
resume_file_gaps(const struct resume_file *rf, uint64_t *gaps, size_t max)
{
	uint64_t	 at = 0;
	size_t		 i, n = 0;

	for (i = 0; i <= rf->niv; i++) {
		uint64_t end = i < rf->niv ? rf->iv[2 * i] : rf->size;
		if (end > at) {
			if (n == max)
				return max + 1;
			gaps[2 * n] = at;
			gaps[2 * n + 1] = end;
			n++;
		}
		if (i < rf->niv)
			at = rf->iv[2 * i + 1];
	}
	return n;
}

void
resume_file_reset(struct resume_file *rf)
{
	file_clear(rf);
	rf->drop = rf->in_manifest;
}

bool
resume_file_same_digest(struct resume_file *rf, const char *digest)
{
	const char	*p = rf->etag, *held = "";
	size_t		 n;

	if (!rf->in_manifest || rf->niv == 0 || strncmp(p, "\"bm-", 4) != 0)
		return true;
	p += 4;
	p += strspn(p, "0123456789");
	if (*p == '-')
		p++;
	if (*p == '-')
		p++;		/* a negative mtime */
	p += strspn(p, "0123456789");
	n = strlen(p);
	if (n >= 1 && p[n - 1] == '"' && *p == '-') {
		held = p + 1;
		n -= 2;
	} else if (strcmp(p, "\"") == 0)
		n = 0;
	else
		return true;	/* not one of ours */
	if (strlen(digest) == n && strncmp(held, digest, n) == 0)
		return true;
	resume_file_reset(rf);
	return false;
}

bool
resume_file_in_manifest(const struct resume_file *rf)
{
	return rf->in_manifest && !rf->drop;
}

bool
resume_file_due(const struct resume_file *rf, uint64_t min_new)
{
	if (resume_file_usable(rf) && rf->covered > rf->recorded &&
	    rf->covered - rf->recorded >= min_new)
		return true;
	return rf->drop;
}

static int
size_cmp(const void *a, const void *b)
{
	size_t	 x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/* Length of held range i. */
static uint64_t
iv_len(const struct resume_file *rf, size_t i)
{
	return rf->iv[2 * i + 1] - rf->iv[2 * i];
}

/* Restore the min-heap on lengths of the n range indexes h[] below k. */
static void
heap_down(const struct resume_file *rf, size_t *h, size_t n, size_t k)
{
	size_t	 c, t;

	for (; (c = 2 * k + 1) < n; k = c) {
		if (c + 1 < n && iv_len(rf, h[c + 1]) < iv_len(rf, h[c]))
			c++;
		if (iv_len(rf, h[k]) <= iv_len(rf, h[c]))
			break;
		t = h[k];
		h[k] = h[c];
		h[c] = t;
	}
}

/*
 * Snapshot into rf->snap the ranges a row can hold: all of them, or the
 * RESUME_MAX_RANGES largest (a min-heap of their indexes), in order.
 */
static void
file_snapshot(struct resume_file *rf)
{
	size_t	 h[RESUME_MAX_RANGES], n, i;

	if (rf->niv <= RESUME_MAX_RANGES) {
		memcpy(rf->snap, rf->iv, 2 * rf->niv * sizeof(*rf->iv));
		rf->nsnap = rf->niv;
		return;
	}
	for (n = 0; n < RESUME_MAX_RANGES; n++)
		h[n] = n;
	for (i = n / 2; i-- > 0; )
		heap_down(rf, h, n, i);
	for (i = n; i < rf->niv; i++)
		if (iv_len(rf, i) > iv_len(rf, h[0])) {
			h[0] = i;
			heap_down(rf, h, n, 0);
		}
	qsort(h, n, sizeof(*h), size_cmp);
	for (i = 0; i < n; i++) {
		rf->snap[2 * i] = rf->iv[2 * h[i]];
		rf->snap[2 * i + 1] = rf->iv[2 * h[i] + 1];
	}
	rf->nsnap = n;
}

bool
resume_file_record(struct resume_file *rf, const char *tmpname,
    struct partial_rec *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->path = rf->path;
	rf->snap_drop = tmpname == NULL || !resume_file_usable(rf);
	if (rf->snap_drop)
		return rf->drop;	/* else keep the row as it is */
	file_snapshot(rf);
	rf->snap_covered = rf->covered;
	ret->tmpname = tmpname;
	ret->size = (int64_t)rf->size;
	ret->list_mtime = rf->list_mtime;
	ret->up_mtime = clock_secs_ns(rf->mtime);
	ret->etag = rf->etag[0] ? rf->etag : NULL;
	ret->ranges = rf->snap;
	ret->nranges = rf->nsnap;
	return true;
}

void
resume_file_recorded(struct resume_file *rf, bool ok)
{
	if (!ok)
		return;
	if (rf->snap_drop) {
		rf->in_manifest = false;
		rf->drop = false;
		return;
	}
	rf->recorded = rf->snap_covered;
	rf->in_manifest = true;
	rf->drop = false;
}
