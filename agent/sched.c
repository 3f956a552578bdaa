/*
 * The scheduler (see include/biomirror/sched.h).  Each file to fetch has
 * a struct sfile: QUEUED -> RUNNING -> (WAITING -> RUNNING)* -> DONE or
 * FAILED.  Every transfer ends in sched_finish(), which ignores files
 * already DONE or FAILED, so a late or double completion cannot commit a
 * file twice.  Finished files collect in a batch; sched_flush() publishes
 * the batch through store_commit() (mtimes, one syncfs, renames, parent
 * fsyncs) and then records it with one manifest_commit() transaction.  A
 * file is only ever in the manifest after its rename.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/report.h"
#include "biomirror/sched.h"
#include "biomirror/store.h"
#include "biomirror/xfer.h"

#define NS	1000000000LL

enum sfile_state { SF_QUEUED = 0, SF_RUNNING, SF_WAITING, SF_DONE, SF_FAILED };

struct sched;

struct sfile {
	struct action	*act;		/* borrowed: the planned action */
	struct sched	*sc;		/* borrowed: back pointer */
	enum sfile_state state;
	unsigned	 attempts;	/* tries started */
	int64_t		 not_before;	/* monotonic ns before which not to retry */
	char		*url;		/* owned: request URL */
	struct store_file *sf;		/* owned while running: the temp file */
	struct xfer_job	 job;		/* the transport job and its result */
	int64_t		 mtime;		/* ns set on the committed file */
};

struct sched {
	const struct sched_opts *o;	/* borrowed */
	struct xfer	*x;		/* borrowed */
	struct store	*s;		/* borrowed */
	struct manifest	*m;		/* borrowed */
	struct mirror_result *res;	/* borrowed */
	struct sfile	*files;		/* owned: one per fetch action */
	size_t		 nfiles;
	size_t		 next;		/* next QUEUED index */
	size_t		 inflight;	/* RUNNING files */
	size_t		 waiting;	/* WAITING files */
	struct store_commit_item *items; /* owned: batch of files to publish */
	struct sfile	**itemf;	/* owned: file of each item */
	size_t		 nitems;
	struct commit_rec *recs;	/* owned: other records of the batch */
	size_t		 nrecs;
	size_t		 cap;		/* capacity of items/itemf and recs */
	uint64_t	 batch_bytes;
	int64_t		 batch_start;	/* monotonic ns of the batch's first file */
	int		 fatal;		/* BM_ENOSPC, BM_EDB, BM_EINTR: stop */
};

static int64_t
now_mono(void)
{
	struct timespec	 ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

static int64_t
now_real(void)
{
	struct timespec	 ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

static int
sink_store(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct sfile	*f = arg;
	int		 rc;

	/* A conditional GET opens its temp file with the first byte. */
	if (f->sf == NULL && (rc = store_file_open(f->sc->s, f->act->path,
	    -1, &f->sf)) != 0)
		return rc;
	return store_file_write(f->sf, off, buf, len);
}

/* Fill a commit record from the planned action's listed values. */
static void
rec_from_action(struct commit_rec *r, const struct action *a,
    enum commit_op op)
{
	memset(r, 0, sizeof(*r));
	r->path = a->path;
	r->op = op;
	r->type = a->type;
	r->list_size = a->list_size;
	r->list_size_exact = a->list_size_exact;
	r->list_mtime = a->list_mtime;
	r->list_prec = a->list_prec;
	r->up_size = a->up_size;
	r->up_mtime = a->up_mtime;
	r->etag = a->etag;
	r->local_size = a->local_size;
	r->local_mtime = a->local_mtime;
}

static struct commit_rec *
rec_new(struct sched *sc)
{
	return &sc->recs[sc->nrecs++];
}

static int
sched_flush(struct sched *sc)
{
	struct commit_rec *all = NULL, *r;
	struct sfile	*f;
	size_t		 i, n = 0;
	int		 rc = 0;

	if (sc->nitems == 0 && sc->nrecs == 0)
		return 0;
	if (sc->nitems > 0 && (rc = store_commit(sc->s, sc->items,
	    sc->nitems)) != 0) {
		log_errx("%s: syncfs: %s", store_path(sc->s), bm_strerror(rc));
		for (i = 0; i < sc->nitems; i++)
			sc->items[i].rc = rc;
	}
	if ((all = calloc(sc->nitems + sc->nrecs, sizeof(*all))) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	for (i = 0; i < sc->nitems; i++) {
		f = sc->itemf[i];
		f->sf = NULL;	/* store_commit freed it */
		r = &all[n++];
		if (sc->items[i].rc != 0) {
			rec_from_action(r, f->act, COMMIT_FAILED);
			r->reason = bm_strerror(sc->items[i].rc);
			f->state = SF_FAILED;
			sc->res->failed++;
			log_warnx("%s: commit: %s", f->act->path, r->reason);
			(void)result_add_error(sc->res, f->act->path, "commit",
			    r->reason);
			continue;
		}
		rec_from_action(r, f->act, COMMIT_FETCHED);
		r->up_size = f->job.res.size >= 0 ? f->job.res.size :
		    (int64_t)f->job.res.bytes;
		r->up_mtime = f->job.res.mtime >= 0 ?
		    f->job.res.mtime * NS : -1;
		r->etag = f->job.res.etag[0] ? f->job.res.etag : NULL;
		r->local_size = (int64_t)f->job.res.bytes;
		r->local_mtime = f->mtime;
		r->bytes = (int64_t)f->job.res.bytes;
		sc->res->fetched++;
		sc->res->bytes += f->job.res.bytes;
		log_debug("%s: fetched %llu bytes", f->act->path,
		    (unsigned long long)f->job.res.bytes);
	}
	for (i = 0; i < sc->nrecs; i++)
		all[n++] = sc->recs[i];
	if ((rc = manifest_commit(sc->m, sc->o->run, all, n)) != 0)
		log_errx("manifest: commit: %s", manifest_errmsg(sc->m));
out:
	free(all);
	sc->nitems = 0;
	sc->nrecs = 0;
	sc->batch_bytes = 0;
	sc->batch_start = 0;
	if (rc != 0 && sc->fatal == 0)
		sc->fatal = rc == BM_ENOMEM ? BM_ENOMEM : BM_EDB;
	return rc;
}

static void
sched_fail(struct sched *sc, struct sfile *f, enum commit_op op,
    const char *reason)
{
	struct commit_rec *r;

	f->state = SF_FAILED;
	r = rec_new(sc);
	rec_from_action(r, f->act, op);
	r->reason = reason;
	if (op == COMMIT_VANISHED) {
		log_warnx("%s: fetch: %s (listed, but gone upstream; not "
		    "deleted)", f->act->path, reason);
		(void)result_add_error(sc->res, f->act->path, "vanished",
		    reason);
	} else {
		log_warnx("%s: fetch: %s", f->act->path, reason);
		(void)result_add_error(sc->res, f->act->path, "fetch", reason);
	}
	sc->res->failed++;
}

int64_t
sched_backoff_ns(unsigned attempt, long retry_after)
{
	int64_t		 d = (NS / 2) << (attempt > 7 ? 7 : attempt - 1);
	uint32_t	 r = 0;

	if (d > 60 * NS)
		d = 60 * NS;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = 0;	/* no jitter is still a valid backoff */
	d += (int64_t)(r % 1000) * (d / 2000);	/* up to +50% jitter */
	if (retry_after >= 0) {
		if (retry_after > 600)
			retry_after = 600;
		if (retry_after * NS > d)
			d = retry_after * NS;
	}
	return d;
}

/*
 * The one end of every transfer.  Idempotent: a file already DONE or
 * FAILED is ignored.
 */
static void
sched_finish(struct sched *sc, struct sfile *f)
{
	struct xfer_result *res = &f->job.res;
	struct store_commit_item *it;

	if (f->state == SF_DONE || f->state == SF_FAILED)
		return;
	sc->inflight--;
	if (res->cls != XFER_OK) {
		store_file_abort(f->sf);
		f->sf = NULL;
	}
	switch (res->cls) {
	case XFER_OK:
		/* An empty body never reached sink_store(): open it now. */
		if (f->sf == NULL && (res->rc = store_file_open(sc->s,
		    f->act->path, -1, &f->sf)) != 0) {
			if (res->rc == BM_ENOSPC)
				sc->fatal = BM_ENOSPC;
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "open temp file: %s", bm_strerror(res->rc));
			sched_fail(sc, f, COMMIT_FAILED, res->errmsg);
			return;
		}
		f->state = SF_DONE;
		if (res->mtime >= 0)
			f->mtime = res->mtime * NS;
		else if (f->act->list_prec != MTIME_UNKNOWN)
			f->mtime = f->act->list_mtime;
		else
			f->mtime = now_real();
		it = &sc->items[sc->nitems];
		sc->itemf[sc->nitems++] = f;
		it->file = f->sf;
		it->size = res->size >= 0 ? res->size : (int64_t)res->bytes;
		it->mtime = f->mtime;
		it->rc = 0;
		if (sc->batch_start == 0)
			sc->batch_start = now_mono();
		sc->batch_bytes += res->bytes;
		return;
	case XFER_NOT_MODIFIED:
		f->state = SF_DONE;
		rec_from_action(rec_new(sc), f->act, COMMIT_NOT_MODIFIED);
		if (sc->batch_start == 0)
			sc->batch_start = now_mono();
		return;
	case XFER_GONE:
		sched_fail(sc, f, COMMIT_VANISHED, res->errmsg);
		return;
	case XFER_RETRY:
	case XFER_CHANGED:
		if (f->attempts <= sc->o->retries && !*sc->o->stop) {
			f->state = SF_WAITING;
			f->not_before = now_mono() +
			    sched_backoff_ns(f->attempts, res->retry_after);
			sc->waiting++;
			log_info("%s: fetch: %s (retry %u of %u)",
			    f->act->path, res->errmsg, f->attempts,
			    sc->o->retries);
			return;
		}
		sched_fail(sc, f, COMMIT_FAILED, res->errmsg);
		return;
	case XFER_PERMANENT:
		if (res->rc == BM_ENOSPC)
			sc->fatal = BM_ENOSPC;
		sched_fail(sc, f, COMMIT_FAILED, res->errmsg);
		return;
	}
}

static void
on_done(void *ctx, struct xfer_job *job)
{
	sched_finish(ctx, job->owner);
}

static int
sched_start(struct sched *sc, struct sfile *f)
{
	const struct action *a = f->act;
	int		 rc;

	f->attempts++;
	/*
	 * A conditional GET (a listing without size or date) is mostly
	 * answered 304 without a body: its temp file is opened only when
	 * bytes arrive (sink_store) or at the end of an empty 200
	 * (sched_finish).  Creating and removing one per file would touch
	 * every directory's mtime on runs that change nothing.
	 */
	if (a->op == ACT_COND_FETCH)
		f->sf = NULL;
	else if ((rc = store_file_open(sc->s, a->path, a->list_size_exact ?
	    a->list_size : -1, &f->sf)) != 0) {
		if (rc == BM_ENOSPC)
			sc->fatal = BM_ENOSPC;
		f->state = SF_RUNNING;
		sc->inflight++;
		f->job.res.cls = XFER_PERMANENT;
		f->job.res.rc = rc;
		(void)snprintf(f->job.res.errmsg, sizeof(f->job.res.errmsg),
		    "open temp file: %s", bm_strerror(rc));
		sched_finish(sc, f);
		return 0;
	}
	memset(&f->job, 0, sizeof(f->job));
	f->job.url = f->url;
	f->job.expect_size = -1;
	f->job.if_modified_since = -1;
	f->job.sink = sink_store;
	f->job.sink_arg = f;
	f->job.owner = f;
	if (a->op == ACT_COND_FETCH) {
		f->job.if_none_match = a->etag;
		if (a->up_mtime >= 0)
			f->job.if_modified_since = a->up_mtime / NS;
	}
	if ((rc = xfer_submit(sc->x, &f->job)) != 0) {
		store_file_abort(f->sf);
		f->sf = NULL;
		return rc;
	}
	f->state = SF_RUNNING;
	sc->inflight++;
	return 0;
}

static void
sched_touch(struct sched *sc, struct action *a)
{
	struct commit_rec *r;
	int		 rc;

	if ((rc = store_set_mtime(sc->s, a->path, a->local_mtime)) != 0) {
		r = rec_new(sc);
		rec_from_action(r, a, COMMIT_FAILED);
		r->reason = bm_strerror(rc);
		log_warnx("%s: touch: %s", a->path, r->reason);
		(void)result_add_error(sc->res, a->path, "touch", r->reason);
		sc->res->failed++;
		return;
	}
	rec_from_action(rec_new(sc), a, COMMIT_TOUCHED);
	sc->res->touched++;
}

/* Pick the next file to start: a due retry first, then the queue. */
static struct sfile *
sched_next(struct sched *sc, int64_t now, int64_t *ret_wait)
{
	size_t	 i;

	*ret_wait = 200 * 1000000LL;
	if (sc->waiting > 0)
		for (i = 0; i < sc->nfiles; i++) {
			struct sfile *f = &sc->files[i];
			if (f->state != SF_WAITING)
				continue;
			if (f->not_before <= now) {
				sc->waiting--;
				return f;
			}
			if (f->not_before - now < *ret_wait)
				*ret_wait = f->not_before - now;
		}
	if (sc->next < sc->nfiles)
		return &sc->files[sc->next++];
	return NULL;
}

static bool
batch_due(const struct sched *sc)
{
	if (sc->nitems + sc->nrecs == 0)
		return false;
	return sc->nitems + sc->nrecs + sc->o->concurrency + 2 >= sc->cap ||
	    sc->nitems >= sc->o->batch_files ||
	    sc->batch_bytes >= sc->o->batch_bytes ||
	    now_mono() - sc->batch_start >= (int64_t)sc->o->batch_ms * 1000000;
}

static void
sched_abandon(struct sched *sc)
{
	size_t	 i;

	for (i = 0; i < sc->nfiles; i++) {
		struct sfile *f = &sc->files[i];
		if (f->state == SF_RUNNING) {
			xfer_cancel(sc->x, &f->job);
			store_file_abort(f->sf);
			f->sf = NULL;
			f->state = SF_FAILED;
			sc->inflight--;
		}
	}
}

static int
sched_loop(struct sched *sc)
{
	struct sfile	*f;
	int64_t		 wait, next_wait;
	int		 rc;

	for (;;) {
		if (*sc->o->stop && sc->fatal == 0)
			sc->fatal = BM_EINTR;
		if (sc->fatal)
			break;
		while (sc->inflight < sc->o->concurrency &&
		    sc->nitems + sc->nrecs + sc->inflight + 2 < sc->cap &&
		    (f = sched_next(sc, now_mono(), &next_wait)) != NULL)
			if ((rc = sched_start(sc, f)) != 0)
				return rc;
		if (sc->inflight == 0 && sc->waiting == 0 &&
		    sc->next >= sc->nfiles)
			break;
		wait = 100;	/* ms: bounds the delay of due retries */
		if ((rc = xfer_poll(sc->x, (int)wait, on_done, sc)) != 0)
			return rc;
		if (batch_due(sc) && sched_flush(sc) != 0)
			break;
	}
	sched_abandon(sc);
	return 0;
}

int
sched_run(const struct sched_opts *o, struct xfer *x, struct store *s,
    struct manifest *m, struct action *acts, size_t n,
    struct mirror_result *res)
{
	struct sched	 sc;
	size_t		 i, nf = 0;
	char		*enc;
	int		 rc = BM_ENOMEM;

	memset(&sc, 0, sizeof(sc));
	sc.o = o;
	sc.x = x;
	sc.s = s;
	sc.m = m;
	sc.res = res;
	sc.cap = o->batch_files + o->concurrency + 64;
	for (i = 0; i < n; i++)
		if (acts[i].op == ACT_FETCH || acts[i].op == ACT_COND_FETCH)
			nf++;
	if ((sc.files = calloc(nf ? nf : 1, sizeof(*sc.files))) == NULL ||
	    (sc.items = calloc(sc.cap, sizeof(*sc.items))) == NULL ||
	    (sc.itemf = calloc(sc.cap, sizeof(*sc.itemf))) == NULL ||
	    (sc.recs = calloc(sc.cap, sizeof(*sc.recs))) == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		if (acts[i].op == ACT_TOUCH) {
			sched_touch(&sc, &acts[i]);
			if (sc.nrecs + 2 >= sc.cap && sched_flush(&sc) != 0)
				break;
			continue;
		}
		if (acts[i].op != ACT_FETCH && acts[i].op != ACT_COND_FETCH)
			continue;
		if ((rc = path_encode(acts[i].path, strlen(acts[i].path),
		    &enc)) != 0)
			goto out;
		if (asprintf(&sc.files[sc.nfiles].url, "%s%s", o->source_url,
		    enc) < 0) {
			sc.files[sc.nfiles].url = NULL;
			free(enc);
			rc = BM_ENOMEM;
			goto out;
		}
		free(enc);
		sc.files[sc.nfiles].act = &acts[i];
		sc.files[sc.nfiles].sc = &sc;
		sc.nfiles++;
	}
	if (sc.fatal == 0 && (rc = sched_loop(&sc)) != 0)
		goto out;
	(void)sched_flush(&sc);
	rc = sc.fatal;
	if (rc == BM_EINTR)
		log_warnx("interrupted: in-flight files abandoned, finished "
		    "files committed");
out:
	if (sc.files) {
		for (i = 0; i < sc.nfiles; i++) {
			if (sc.files[i].state == SF_RUNNING)
				xfer_cancel(x, &sc.files[i].job);
			store_file_abort(sc.files[i].sf);
			free(sc.files[i].url);
		}
	}
	free(sc.files);
	free(sc.items);
	free(sc.itemf);
	free(sc.recs);
	return rc;
}
