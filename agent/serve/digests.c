/*
 * The digests the server knows (docs/protocol.md, "LIST" and "GET"):
 * for an export `mirror = NAME`, the SHA-256 recorded for each committed
 * file, read through manifest/'s API only; for any export, the SHA-256
 * of a file the server hashed as it served it whole (the hashed table).
 *
 * Recorded: one table per export, shared by its sessions (counted
 * references under srv->lock), loaded again when the manifest file
 * changed.  A digest is trusted for a file on disk only when the file
 * still is what the manifest recorded: the same size and mtime (ns), and
 * its ctime before the end of the run that fetched it, the one that
 * recorded the row (a write, touch, chmod or rename since then moves
 * ctime past it; a later run does not move the guard).
 *
 * Hashed: one direct-mapped table of SV_HASHED_SLOTS for the server
 * (its own lock), keyed by device and inode, filled by sv_hashed_note()
 * when a whole file over SV_BUF was read and hashed (data.c), fstat(2)
 * showed the same size, mtime and ctime (ns) before and after the read,
 * and that ctime was a second old when the read began; trusted while the
 * file still shows those.  A tier-1 server so hashes a file version
 * once, not once per downstream.  Anything else is hashed as it is read.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "biomirror/clock.h"
#include "biomirror/digest.h"
#include "biomirror/error.h"
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/text.h"

#include "serve_int.h"

/* One file's recorded digest. */
struct sv_dent {
	char		*path;		/* owned */
	int64_t		 size, mtime;	/* committed locally (ns) */
	int64_t		 guard_ns;	/* end of the run that fetched it: the
					   file's ctime must be before it */
	uint8_t		 d[BMP_DIGEST_LEN]; /* SHA-256 */
};

struct sv_digests {
	unsigned	 refs;		/* under srv->lock */
	int64_t		 stamp[4];	/* db and -wal mtime (ns) and size */
	struct sv_dent	*e;		/* owned, sorted by path */
	size_t		 n, cap;
};

static void
sv_dg_free(struct sv_digests *t)
{
	size_t	 i;

	if (t == NULL)
		return;
	for (i = 0; i < t->n; i++)
		free(t->e[i].path);
	free(t->e);
	free(t);
}

/* The manifest file's identity now: db and -wal mtime and size. */
static void
sv_dg_stamp(const char *db, int64_t st4[4])
{
	char		 wal[PATH_MAX];
	struct stat	 st;

	memset(st4, 0, 4 * sizeof(*st4));
	if (stat(db, &st) == 0) {
		st4[0] = (int64_t)st.st_mtim.tv_sec * 1000000000LL +
		    st.st_mtim.tv_nsec;
		st4[1] = (int64_t)st.st_size;
	}
	if ((size_t)snprintf(wal, sizeof(wal), "%s-wal", db) < sizeof(wal) &&
	    stat(wal, &st) == 0) {
		st4[2] = (int64_t)st.st_mtim.tv_sec * 1000000000LL +
		    st.st_mtim.tv_nsec;
		st4[3] = (int64_t)st.st_size;
	}
}

/* manifest_ls callback: keep a file row with a SHA-256. */
static int
sv_dg_row(void *ctx, const struct file_row *r)
{
	struct sv_digests *t = ctx;
	struct digest_value v;
	struct sv_dent	*ne;
	size_t		 ncap;

	if (r->type != ENTRY_FILE || r->checksum == NULL ||
	    r->fs.local.size < 0 || r->fs.local.mtime < 0 ||
	    r->fetched_end_ns <= 0 ||
	    digest_from_text(r->checksum, &v) != 0 || v.alg != DIGEST_SHA256)
		return 0;
	if (t->n == t->cap) {
		ncap = t->cap ? t->cap * 2 : 256;
		if ((ne = reallocarray(t->e, ncap, sizeof(*ne))) == NULL)
			return BM_ENOMEM;
		t->e = ne;
		t->cap = ncap;
	}
	if ((t->e[t->n].path = strndup(r->path, r->pathlen)) == NULL)
		return BM_ENOMEM;
	t->e[t->n].size = r->fs.local.size;
	t->e[t->n].mtime = r->fs.local.mtime;
	t->e[t->n].guard_ns = r->fetched_end_ns;
	memcpy(t->e[t->n].d, v.md, BMP_DIGEST_LEN);
	t->n++;
	return 0;
}

static int
sv_dent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sv_dent *)a)->path,
	    ((const struct sv_dent *)b)->path);
}

static int
sv_dent_key(const void *key, const void *b)
{
	return strcmp(key, ((const struct sv_dent *)b)->path);
}

/* A new table from the manifest at db (stamped st4).  0 or BM_E*. */
static int
sv_dg_load(const char *db, const int64_t st4[4], struct sv_digests **ret)
{
	struct manifest	*m = NULL;
	struct sv_digests *t;
	char		 err[512];
	int		 rc;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return BM_ENOMEM;
	memcpy(t->stamp, st4, sizeof(t->stamp));
	err[0] = '\0';
	if ((rc = manifest_open_read(db, &m, err, sizeof(err))) != 0 ||
	    (rc = manifest_ls(m, "", sv_dg_row, t)) != 0)
		goto out;
	if (t->n > 1)
		qsort(t->e, t->n, sizeof(*t->e), sv_dent_cmp);
	*ret = t;
	t = NULL;
	rc = 0;
out:
	if (rc != 0)
		log_warnx("serve: %s: no recorded digests: %s", db,
		    err[0] != '\0' ? err : bm_strerror(rc));
	manifest_close(m);
	sv_dg_free(t);
	return rc;
}

/*
 * A reference to export e's digest table as its manifest is now (loaded
 * again when the file changed), or NULL: not a served mirror, or none
 * to be had (logged once per state of the file).  Release it with
 * sv_digests_put().
 */
struct sv_digests *
sv_digests_get(struct sv_server *srv, const struct sv_export *ce)
{
	struct sv_export *e = &srv->exports[ce - srv->exports];
	struct sv_digests *t = NULL, *old = NULL;
	int64_t		 st4[4];
	bool		 failed;

	if (e->manifest == NULL)
		return NULL;
	sv_dg_stamp(e->manifest, st4);
	(void)pthread_mutex_lock(&srv->lock);
	if (e->dg != NULL && memcmp(e->dg->stamp, st4, sizeof(st4)) == 0) {
		t = e->dg;
		t->refs++;
	}
	failed = memcmp(e->dg_failed, st4, sizeof(st4)) == 0;
	(void)pthread_mutex_unlock(&srv->lock);
	if (t != NULL || failed)
		return t;
	if (sv_dg_load(e->manifest, st4, &t) != 0) {
		(void)pthread_mutex_lock(&srv->lock);
		memcpy(e->dg_failed, st4, sizeof(st4));
		(void)pthread_mutex_unlock(&srv->lock);
		return NULL;
	}
	(void)pthread_mutex_lock(&srv->lock);
	old = e->dg;
	e->dg = t;
	t->refs = 2;		/* the export's and the caller's */
	if (old != NULL && --old->refs > 0)
		old = NULL;
	(void)pthread_mutex_unlock(&srv->lock);
	sv_dg_free(old);
	return t;
}

/* Drop a reference from sv_digests_get() (NULL: nothing). */
void
sv_digests_put(struct sv_server *srv, struct sv_digests *t)
{
	bool	 last;

	if (t == NULL)
		return;
	(void)pthread_mutex_lock(&srv->lock);
	last = --t->refs == 0;
	(void)pthread_mutex_unlock(&srv->lock);
	if (last)
		sv_dg_free(t);
}

/* The recorded SHA-256 of path into d when t holds one and st holds. */
static bool
sv_recorded_of(const struct sv_digests *t, const char *path,
    const struct stat *st, uint8_t d[BMP_DIGEST_LEN])
{
	const struct sv_dent *r;

	if (t == NULL)
		return false;
	if ((r = bsearch(path, t->e, t->n, sizeof(*t->e), sv_dent_key)) ==
	    NULL)
		return false;
	if (r->size != (int64_t)st->st_size ||
	    r->mtime != clock_ts_ns(&st->st_mtim) ||
	    clock_ts_ns(&st->st_ctim) >= r->guard_ns)
		return false;
	memcpy(d, r->d, BMP_DIGEST_LEN);
	return true;
}

/* One file version hashed whole as served. */
struct sv_hent {
	uint64_t	 dev, ino;	/* the key; ino 0: an empty slot */
	int64_t		 size, mtime, ctime; /* what fstat showed (ns) */
	uint8_t		 d[BMP_DIGEST_LEN]; /* SHA-256 */
};

struct sv_hashed {
	pthread_mutex_t	 lock;
	struct sv_hent	 e[SV_HASHED_SLOTS];
};

/* The slot of (dev, ino): splitmix64's finaliser of the two mixed. */
static size_t
sv_hslot(uint64_t dev, uint64_t ino)
{
	return (size_t)(text_mix64(ino ^ (dev * TEXT_GOLDEN64)) &
	    (SV_HASHED_SLOTS - 1));
}

/* Does slot h hold st's file as st shows it now? */
static bool
sv_hent_fits(const struct sv_hent *h, const struct stat *st)
{
	return h->ino != 0 && h->ino == (uint64_t)st->st_ino &&
	    h->dev == (uint64_t)st->st_dev &&
	    h->size == (int64_t)st->st_size &&
	    h->mtime == clock_ts_ns(&st->st_mtim) &&
	    h->ctime == clock_ts_ns(&st->st_ctim);
}

/*
 * Note that the whole file open as fd, which fstat showed as before when
 * it was opened, hashed to d as it was read from start_ns (the wall
 * clock, ns) on: kept when fstat shows the same now (no write, truncate
 * or touch came between) and its ctime is over SV_HASHED_SETTLE_NS older
 * than start_ns.  The kernel stamps ctime from a coarse clock (a tick of
 * up to 10 ms), so a write in the same tick as the change before it
 * leaves ctime as it was; a second later it cannot.  The table is made by
 * the first note (a failed allocation: nothing kept).
 */
void
sv_hashed_note(struct sv_server *srv, int fd, const struct stat *before,
    int64_t start_ns, const uint8_t d[BMP_DIGEST_LEN])
{
	struct sv_hashed *t;
	struct sv_hent	*h;
	struct stat	 now;

	if (!S_ISREG(before->st_mode) || before->st_ino == 0 ||
	    clock_ts_ns(&before->st_ctim) >= start_ns - SV_HASHED_SETTLE_NS ||
	    fstat(fd, &now) == -1 || now.st_ino != before->st_ino ||
	    now.st_dev != before->st_dev || now.st_size != before->st_size ||
	    clock_ts_ns(&now.st_mtim) != clock_ts_ns(&before->st_mtim) ||
	    clock_ts_ns(&now.st_ctim) != clock_ts_ns(&before->st_ctim))
		return;
	(void)pthread_mutex_lock(&srv->lock);
	if ((t = atomic_load(&srv->hashed)) == NULL &&
	    (t = calloc(1, sizeof(*t))) != NULL) {
		(void)pthread_mutex_init(&t->lock, NULL);
		atomic_store(&srv->hashed, t);
	}
	(void)pthread_mutex_unlock(&srv->lock);
	if (t == NULL)
		return;
	(void)pthread_mutex_lock(&t->lock);
	h = &t->e[sv_hslot((uint64_t)now.st_dev, (uint64_t)now.st_ino)];
	h->dev = (uint64_t)now.st_dev;
	h->ino = (uint64_t)now.st_ino;
	h->size = (int64_t)now.st_size;
	h->mtime = clock_ts_ns(&now.st_mtim);
	h->ctime = clock_ts_ns(&now.st_ctim);
	memcpy(h->d, d, BMP_DIGEST_LEN);
	(void)pthread_mutex_unlock(&t->lock);
}

/* Drop what the hashed table holds of st's file (device and inode). */
void
sv_hashed_forget(struct sv_server *srv, const struct stat *st)
{
	struct sv_hashed *t = atomic_load(&srv->hashed);
	struct sv_hent	*h;

	if (t == NULL)
		return;
	(void)pthread_mutex_lock(&t->lock);
	h = &t->e[sv_hslot((uint64_t)st->st_dev, (uint64_t)st->st_ino)];
	if (h->ino == (uint64_t)st->st_ino && h->dev == (uint64_t)st->st_dev)
		h->ino = 0;
	(void)pthread_mutex_unlock(&t->lock);
}

/* Free the hashed table (server teardown: no thread left). */
void
sv_hashed_free(struct sv_server *srv)
{
	struct sv_hashed *t = atomic_exchange(&srv->hashed, NULL);

	if (t == NULL)
		return;
	(void)pthread_mutex_destroy(&t->lock);
	free(t);
}

/*
 * The SHA-256 the server knows of session s's file path (st: the file
 * as opened or listed now) into d: recorded by the served mirror's
 * manifest, or hashed when it was last served whole and unchanged
 * since; else false.
 */
bool
sv_digest_of(const struct sv_session *s, const char *path,
    const struct stat *st, uint8_t d[BMP_DIGEST_LEN])
{
	struct sv_hashed *t;
	const struct sv_hent *h;
	bool		 ok = false;

	if (!S_ISREG(st->st_mode))
		return false;
	if (sv_recorded_of(s->dg, path, st, d))
		return true;
	/*
	 * Only files over SV_BUF are noted (data.c); a session with a
	 * secret never asks for a whole file with the digest known (it is
	 * hashed with the session key), so it could never find one stale.
	 */
	if (s->keyed || st->st_size <= SV_BUF ||
	    (t = atomic_load(&s->srv->hashed)) == NULL)
		return false;
	(void)pthread_mutex_lock(&t->lock);
	h = &t->e[sv_hslot((uint64_t)st->st_dev, (uint64_t)st->st_ino)];
	if ((ok = sv_hent_fits(h, st)))
		memcpy(d, h->d, BMP_DIGEST_LEN);
	(void)pthread_mutex_unlock(&t->lock);
	return ok;
}

/* Free the export's own reference (server teardown). */
void
sv_digests_drop(struct sv_export *e)
{
	if (e->dg != NULL && --e->dg->refs == 0)
		sv_dg_free(e->dg);
	e->dg = NULL;
	free(e->manifest);
	e->manifest = NULL;
}
