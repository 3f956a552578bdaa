/*
 * The scheduler (see include/biomirror/sched.h).  Each file is a small
 * struct sfile, QUEUED -> RUNNING -> (WAITING -> RUNNING)* -> DONE or
 * FAILED; while RUNNING it owns a struct sfile_try (one transport job per
 * range).  Invariants: a file ends only in sched_finish(), which ignores
 * files already DONE or FAILED (no double commit); a file is in the
 * manifest only after its rename (the committer thread: commit_batch() in
 * agent/sched/commit.c); hashing never holds up a transfer.  States,
 * batches and digests: see docs/internals.md, "The scheduler's files and
 * batches".
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "biomirror/autotune.h"
#include "biomirror/clock.h"
#include "biomirror/commit.h"
#include "biomirror/digest.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/report.h"
#include "biomirror/resume.h"
#include "biomirror/sched.h"
#include "biomirror/store.h"
#include "biomirror/workq.h"
#include "biomirror/xfer.h"

/* The mirror's name for log lines: every per-file line names its mirror. */
#define MIRROR(sc)	((sc)->o->name != NULL ? (sc)->o->name : "")
#define NS			1000000000LL
#define SCHED_MAX_STREAMS	64	/* the config's upper bound for streams */
#define RESUME_EVERY_NS		(250 * 1000000LL) /* record ranges this often */
#define RESUME_MIN_NEW		(256 * 1024)	/* ... when this much is new */
#define RESUME_SOON_BYTES	(64ULL << 20)	/* this much new in all files ... */
#define RESUME_SOON_NS		(100 * 1000000LL) /* ... is recorded this soon */

enum sfile_state {
	SF_QUEUED = 0,
	SF_OPENING,		/* its temp file is being created by a worker */
	SF_WRITING,		/* a worker writes its body (in memory) to a temp file */
	SF_RUNNING,
	SF_HASHING,		/* all bytes in: waiting for its digest */
	SF_WAITING,
	SF_DONE,
	SF_FAILED,
};

_Static_assert(SF_FAILED <= UINT8_MAX, "sfile state fits its byte");

#define SCHED_OPENERS	4	/* worker threads creating temp files */
/*
 * A file of at most this many bytes (exact listed size, one stream) is
 * received into memory and written to its temp file by a worker when
 * its body is complete: the event loop then neither waits for the temp
 * file before the request nor writes to the page cache, the two costs
 * that bound a run of many small files.
 */
#define SCHED_MEM_MAX	(256 * 1024)
#define SCHED_HASHERS	2	/* worker threads computing digests */
#define HASH_STEP	(8ULL * 1024 * 1024)	/* hash when the prefix grew this much */
#define SCHED_REAP_MIN	256	/* live files before the first sched_reap */
#define SCHED_SPANS_MIN	1024	/* slots of spans to start with */

struct sched;

/* One try of one file: what only exists while it is in flight. */
struct sfile_try {
	char		*url;		/* owned: request URL */
	struct xfer_job	*jobs;		/* owned: one per range */
	unsigned	 njobs;		/* ranges (1: one stream) */
	uint64_t	 running;	/* bit i: jobs[i] is in flight */
	bool		*cancelled;	/* owned: jobs[i] was cancelled by us */
	struct xfer_job	*check;		/* owned: the end check of a try in
					   ranges (check_start), NULL if none */
	bool		 checking;	/* check is in flight */
	bool		 cut;		/* one stream ended well but short of
					   the listed size: the end check tells a
					   cut transfer (continue) from a change */
	struct xfer_result res;		/* the try's result (sfile_result) */
	char		 checksum[DIGEST_TEXT_MAX]; /* "sha256:HEX" to record, "" if none */
	char		 sidecar[SIDECAR_TEXT_MAX]; /* published digests it matched, "" if none */
	uint8_t		*mem;		/* owned: body of an in-memory try, or NULL */
	size_t		 mem_len;	/* bytes of mem received */
	size_t		 mem_cap;	/* bytes mem holds: the listed size */
	bool		 in_mem;	/* this try is received into mem */
	int64_t		 start_ns;	/* monotonic: its jobs were submitted */
	int64_t		 end_ns;	/* monotonic: its transfers ended well */
};

/*
 * What the commit needs of a finished try: kept in place of the try (of
 * some 10 KB with its jobs) from sched_publish() until commit_done(), as
 * up to two batches of a thousand files wait there.
 */
struct sfile_done {
	int64_t		 size;		/* upstream size, or the bytes received */
	int64_t		 up_mtime;	/* ns from Last-Modified/MDTM, -1 */
	uint64_t	 bytes;		/* body bytes the file holds */
	uint64_t	 received;	/* ... of them received by this run's
					   last try (bytes held from an
					   earlier run or try not counted) */
	char		 etag[sizeof(((struct xfer_result *)0)->etag)];
	char		 checksum[DIGEST_TEXT_MAX]; /* to record, "" if none */
	char		 sidecar[SIDECAR_TEXT_MAX]; /* to record, "" if none */
	unsigned	 net;		/* enum report_net that carried it */
	int64_t		 start_ns;	/* monotonic: its last try began ... */
	int64_t		 end_ns;	/* ... and ended */
};

/*
 * When a fetched file was in flight over a transport: the run's time per
 * transport is the union of these spans (sched_net_seconds), as files
 * overlap.
 */
struct sspan {
	int64_t		 a, b;		/* monotonic ns, a <= b */
	unsigned	 net;		/* enum report_net */
};

/* The digest of one try (see the file comment). */
struct hasher {
	struct sfile	*f;		/* borrowed; NULL once the try is abandoned */
	struct digest	*d;		/* owned */
	int		 fd;		/* owned: readable dup of the temp file, -1 not yet */
	struct sidecar_sum sum;		/* published digests to check (may be none) */
	uint64_t	 hashed;	/* bytes fed (changed by the worker while busy) */
	uint64_t	 target;	/* the task hashes up to this offset */
	bool		 busy;		/* a task is queued or running */
	bool		 final;		/* the try ended well: finish at its last byte */
	int		 rc;		/* the last task's result */
	unsigned	 algs;		/* d's (digest_new) */
	/*
	 * The tap (hash_tap): a body written from offset 0 on feeds d on
	 * the thread that writes it, as it lands, and is not read back.
	 */
	struct store_file *tap_sf;	/* borrowed: tapped, NULL if not */
	bool		 tap_tried;	/* tapped once: never again */
	uint64_t	 fed;		/* bytes fed (the tap's thread) */
	atomic_int	 tap_gap;	/* 0: in order; TAP_SKIP, TAP_REDO */
	struct hasher	*next;		/* sched's list of live hashers */
};
#define TAP_SKIP	1	/* a write past fed: the rest is read back */
#define TAP_REDO	2	/* a write below fed, or a digest error: all is */

/*
 * One file of the plan's fetches, made when it starts and freed once
 * nothing refers to it (sched_reap): only the files in flight, waiting,
 * or in a batch exist at a time, not one per file of a cold run.  Files
 * with resumable ranges are made up front and kept for the run.
 */
struct sfile {
	struct action	*act;		/* borrowed: the planned action */
	struct sched	*sc;		/* borrowed: back pointer */
	struct sfile	*lprev, *lnext;	/* sched's list of live files */
	int64_t		 not_before;	/* monotonic ns before which not to retry */
	struct store_file *sf;		/* owned while running: the temp file */
	struct sfile_try *t;		/* owned: the try in flight */
	struct sfile_done *d;		/* owned: what a published try left */
	struct hasher	*h;		/* owned by sched's list: the try's digest, NULL if none */
	int64_t		 mtime;		/* ns set on the committed file */
	struct resume_file *rf;		/* owned: ranges held, NULL: not resumable */
	unsigned	 attempts;	/* tries started */
	int		 open_rc;	/* result of the worker's store_file_open */
	int		 open_err;	/* its errno when open_rc is BM_EIO */
	uint8_t		 state;		/* enum sfile_state */
	bool		 single;	/* the server ignored Range: one stream */
	bool		 keep;		/* FAILED, its temp file kept for the next
					   run: recorded, then closed, by the
					   next resume_tick */
	bool		 continued;	/* this try continues bytes held */
	bool		 restarted;	/* held bytes found stale once: the
					   restart was not counted a retry */
	bool		 restart_now;	/* that restart: no backoff (once) */
};

/*
 * A batch handed to the committer thread: the arrays of struct sched's
 * current batch, swapped in by sched_flush().  Owned by the committer
 * from workq_push() until commit_done() on the loop thread.
 */
struct sbatch {
	struct sched	*sc;		/* borrowed: back pointer */
	struct store_commit_item *items; /* owned */
	struct sfile	**itemf;	/* owned */
	size_t		 nitems;
	struct commit_rec *recs;	/* owned */
	char		**reasons;	/* owned */
	size_t		 nrecs;
	struct commit_rec *all;		/* owned: 2 * cap records for the manifest */
	bool		 busy;		/* pushed, not yet through commit_done */
	int		 store_rc;	/* store_commit's result */
	int		 db_rc;		/* commit_batch's result */
	char		 db_err[256];	/* manifest_errmsg when db_rc != 0 */
};

struct sched {
	const struct sched_opts *o;	/* borrowed */
	struct xfer	*x;		/* borrowed */
	struct store	*s;		/* borrowed */
	struct manifest	*m;		/* borrowed */
	struct mirror_result *res;	/* borrowed */
	struct sfile	*live;		/* owned: list of the files made */
	size_t		 nlive;		/* files on it */
	size_t		 reap_at;	/* sched_reap when nlive reaches this */
	struct action	*acts;		/* borrowed: the plan's actions */
	size_t		 nacts;
	size_t		 scan;		/* next action to look at for a file */
	struct sfile	**pre;		/* owned: files made up front (ranges
					   to resume), in plan order */
	size_t		 npre;
	size_t		 prei;		/* next of them to start */
	size_t		 nfiles;	/* fetches of this pass */
	size_t		 next;		/* fetches started from the queue */
	size_t		 inflight;	/* RUNNING files */
	size_t		 waiting;	/* WAITING files, listed in wait[] */
	size_t		 big_left;	/* big files (sfile_big) QUEUED,
					   WAITING or RUNNING */
	struct sfile	**wait;		/* owned: the WAITING files */
	size_t		 wait_cap;	/* slots of wait */
	struct store_commit_item *items; /* owned: batch of files to publish */
	struct sfile	**itemf;	/* owned: file of each item */
	size_t		 nitems;
	struct commit_rec *recs;	/* owned: other records of the batch */
	char		**reasons;	/* owned: reason string of each rec, or NULL */
	size_t		 nrecs;
	size_t		 cap;		/* capacity of items/itemf and recs */
	uint64_t	 batch_bytes;
	int64_t		 batch_start;	/* monotonic ns of the batch's first file */
	int		 fatal;		/* BM_ENOSPC, BM_EDB, BM_EINTR: stop */
	uint64_t	 bytes_seen;	/* body bytes written, for progress */
	size_t		 kept;		/* temp files kept for the next run */
	size_t		 dropped;	/* temp files removed at the end */
	bool		 keep_due;	/* a file to keep: resume_tick at once */
	struct progress	*progress;	/* owned unless o->line: the live line,
					   may be a no-op */
	int64_t		 fetched0;	/* res->fetched when the pass began */
	int64_t		 unchanged;	/* files found unchanged (304) */
	struct workq	*wq;		/* owned: creates temp files off the loop */
	struct workq	*cq;		/* owned: the committer thread */
	struct sbatch	 cb;		/* the batch the committer has, if busy */
	struct workq	*hq;		/* owned: computes digests off the loop */
	struct hasher	*hashers;	/* owned: list of hashers not yet freed */
	size_t		 hashing;	/* SF_HASHING files */
	size_t		 writing;	/* SF_WRITING files */
	int64_t		 resume_last;	/* monotonic ns of the last range record */
	uint64_t	 resume_new;	/* bytes of resumable files since then */
	struct sspan	*spans;		/* owned: of fetched files, merged into
					   their union when full (span_add) */
	size_t		 nspans;
	size_t		 spans_cap;	/* slots of spans */
	int64_t		 span_ns[REPORT_NETS]; /* of the union of spans
					   folded out of spans (span_merge) */
};

static int	sched_launch(struct sched *, struct sfile *);
static bool	sfile_ranges(struct sfile *);
static void	sfile_check_size(struct sfile *);
static void	open_task(void *);
static void	write_task(void *);
static void	mem_drop(struct sfile *);
static void	sched_publish(struct sched *, struct sfile *);
static int	hash_start(struct sched *, struct sfile *, bool);
static void	hash_finish(struct sched *, struct sfile *);
static void	hash_abandon(struct sched *, struct sfile *);
static int	hash_untap(struct hasher *, struct sfile *);
static void	hash_tap_start(struct sfile *, uint64_t);
static int	hash_restart(struct hasher *);
static void	hash_poll(struct sched *);
static void	hash_free_all(struct sched *);
static void	sched_retry(struct sched *, struct sfile *);
static int	sink_store(void *, uint64_t, const void *, size_t);
static void	commit_done(void *, void *);
static void	span_add(struct sched *, const struct sspan *);
static int64_t	span_floor(const struct sched *);
static void	span_merge(struct sched *, int64_t);
static bool	sched_wants(const struct sched_opts *, const struct action *);
static bool	sched_fetches(const struct sched_opts *, const struct action *);
static bool	resume_wanted(const struct action *);

/* Files in flight to keep now: fixed, or sized by the tuner. */
static unsigned
sched_conc(const struct sched *sc)
{
	return sc->o->tune ? tune_concurrency(sc->o->tune) :
	    sc->o->concurrency;
}

/* Ranges for a large file started now. */
static unsigned
sched_streams(const struct sched *sc)
{
	return sc->o->tune ? tune_streams(sc->o->tune) : sc->o->streams;
}

/*
 * Body bytes a try received, its end check aside (they no longer count
 * for progress if it failed; a resumed try has only the gaps).
 */
static uint64_t
try_bytes(const struct sfile_try *t)
{
	uint64_t	 n = 0;
	unsigned	 i;

	for (i = 0; t != NULL && t->jobs != NULL && i < t->njobs; i++)
		if (t->jobs[i].kind != XFER_JOB_VALIDATE)
			n += t->jobs[i].res.bytes;
	return n;
}

static void
try_free(struct sfile_try *t)
{
	if (t == NULL)
		return;
	free(t->url);
	free(t->jobs);
	free(t->cancelled);
	free(t->check);
	free(t->mem);
	free(t);
}

/* The SHA-256 stated for f as "sha256:HEX" into buf, "" if none. */
static void
listed_sha256(const struct sfile *f, char *buf, size_t len)
{
	struct sidecar_sum sum;

	buf[0] = '\0';
	if (f->sc->o->sums == NULL || !sidecar_set_find(f->sc->o->sums,
	    f->act->path, &sum) || !sum.has[DIGEST_SHA256] ||
	    sum.conflict[DIGEST_SHA256])
		return;
	if (digest_to_text(&sum.v[DIGEST_SHA256], buf, len) != 0)
		buf[0] = '\0';
}

/*
 * A listing's mtime (to the ns; to the second) and the SHA-256 stated
 * for f go with each job of f (bm checks the one and makes both part of
 * its validator; GridFTP takes the other for MDTM's time).
 */
static void
job_listed_mtime(struct xfer_job *j, const struct sfile *f)
{
	const struct action *a = f->act;

	j->listed_ns = a->fs.listed.prec == MTIME_NS;
	j->listed_mtime = j->listed_ns ? a->fs.listed.mtime : 0;
	j->listed_sec = a->fs.listed.prec >= MTIME_SECOND;
	j->listed_secs = j->listed_sec ? a->fs.listed.mtime / NS : 0;
	listed_sha256(f, j->listed_sha256, sizeof(j->listed_sha256));
}

/*
 * ---- Resume: ranges held across tries and runs (agent/sched/resume.c) ----
 * A large file of exact size keeps the ranges it has written.  A try that
 * fails transiently keeps its temp file, and the next try asks only for
 * what is missing, with If-Range; a change upstream starts it over.
 * Every RESUME_EVERY_NS the ranges of files in flight are recorded in
 * the manifest, each after an fdatasync of its temp file, so that a
 * killed run is continued by the next one (resume_prepare in sync.c).
 */

/* Discard f's temp file and the ranges it held (its row is dropped). */
static void
resume_forget(struct sfile *f)
{
	store_file_abort(f->sf);
	f->sf = NULL;
	if (f->rf != NULL)
		resume_file_reset(f->rf);
}

/* Is a a big file (xfer_job.big_left)?  1 or 0, for the counts. */
static size_t
act_big(const struct action *a)
{
	return a->fs.listed.size_exact &&
	    a->fs.listed.size > (int64_t)XFER_BIG ? 1 : 0;
}

/* Is f a big file (act_big)?  1 or 0. */
static size_t
sfile_big(const struct sfile *f)
{
	return act_big(f->act);
}

/*
 * Does f's try hold bytes its transport did not check (res.unchecked)
 * and that no published digest of the whole file will check?  Such
 * bytes are neither kept nor recorded for resume.
 */
static bool
resume_unfit(const struct sfile *f)
{
	struct sidecar_sum sum;
	bool		 unchecked = false;
	unsigned	 i;
	int		 k;

	for (i = 0; f->t != NULL && i < f->t->njobs; i++)
		unchecked |= f->t->jobs[i].res.unchecked;
	if (!unchecked)
		return false;
	if (f->sc->o->sums == NULL || !sidecar_set_find(f->sc->o->sums,
	    f->act->path, &sum))
		return true;
	for (k = 0; k < DIGEST__N; k++)
		if (sum.conflict[k])
			return true;
	return false;
}

/*
 * A try that did not succeed: keep the temp file for the next try when
 * the failure is transient and the bytes held can be continued, else
 * start over.
 */
static void
resume_end_try(struct sfile *f)
{
	const struct xfer_result *res = &f->t->res;

	if (res->cls == XFER_RETRY && !res->ignored_range && f->rf != NULL &&
	    f->sf != NULL && resume_file_usable(f->rf) && !resume_unfit(f))
		return;
	resume_forget(f);
}

/*
 * The run is over for f's temp file: kept when its ranges are recorded
 * (unless the disk is full: then it is removed to give the space back),
 * else removed.  Counted in sc->kept or sc->dropped.
 */
static void
resume_close(struct sched *sc, struct sfile *f)
{
	if (f->sf == NULL)
		return;
	if (f->rf != NULL && resume_file_in_manifest(f->rf) &&
	    sc->fatal != BM_ENOSPC) {
		store_file_keep(f->sf);
		f->sf = NULL;
		sc->kept++;
		return;
	}
	sc->dropped++;
	resume_forget(f);
}

/* Worker thread: reopen the temp file an earlier run kept for f. */
static void
resume_reopen(struct sfile *f)
{
	const struct action *a = f->act;
	struct store_file *sf = NULL;
	int		 rc;

	rc = store_file_resume(f->sc->s, a->path, resume_file_tmpname(f->rf),
	    a->fs.listed.size, &sf);
	if (resume_file_reopened(f->rf, rc == 0,
	    rc == 0 ? store_file_length(sf) : 0)) {
		f->sf = sf;
		return;
	}
	store_file_abort(sf);	/* shorter than recorded: of no use */
}

/*
 * The jobs of a try that continues f: one per missing range, large ones
 * split so that about min(streams, missing / min_split) ranges run, at
 * most SCHED_MAX_STREAMS; each with If-Range.  A gap is cut into equal
 * pieces, as many as it holds chunks rounded to the nearest (at least
 * one), so that no piece is a sliver left over by the rounding.  Returns
 * 0 or BM_ENOMEM.
 */
static int
resume_jobs(struct sched *sc, struct sfile *f)
{
	struct sfile_try *t = f->t;
	struct xfer_job	*j;
	uint64_t	 gaps[2 * SCHED_MAX_STREAMS], missing = 0, want, chunk;
	uint64_t	 pieces[SCHED_MAX_STREAMS], total = 0, off, len, i, glen;
	size_t		 ngaps, g;

	ngaps = resume_file_gaps(f->rf, gaps, SCHED_MAX_STREAMS);
	if (ngaps > SCHED_MAX_STREAMS) {	/* refetch the rest whole */
		ngaps = SCHED_MAX_STREAMS;
		gaps[2 * ngaps - 1] = (uint64_t)f->act->fs.listed.size;
	} else if (ngaps == 0) {		/* all held: one byte confirms */
		gaps[0] = (uint64_t)f->act->fs.listed.size - 1;
		gaps[1] = (uint64_t)f->act->fs.listed.size;
		ngaps = 1;
	}
	for (g = 0; g < ngaps; g++)
		missing += gaps[2 * g + 1] - gaps[2 * g];
	want = sc->o->min_split ? missing / sc->o->min_split : 1;
	if (want > sched_streams(sc))
		want = sched_streams(sc);
	if (want < ngaps)
		want = ngaps;
	chunk = (missing + want - 1) / want;
	for (g = 0; g < ngaps; g++) {
		glen = gaps[2 * g + 1] - gaps[2 * g];
		pieces[g] = glen / chunk + (glen % chunk >= (chunk + 1) / 2);
		if (pieces[g] == 0)
			pieces[g] = 1;
		total += pieces[g];
	}
	if (total > SCHED_MAX_STREAMS) {	/* one job per gap */
		for (g = 0; g < ngaps; g++)
			pieces[g] = 1;
		total = ngaps;
	}
	if ((t->jobs = calloc(total, sizeof(*t->jobs))) == NULL ||
	    (t->cancelled = calloc(total, sizeof(*t->cancelled))) == NULL)
		return BM_ENOMEM;
	for (g = 0; g < ngaps; g++) {
		glen = gaps[2 * g + 1] - gaps[2 * g];
		chunk = (glen + pieces[g] - 1) / pieces[g];
		for (off = gaps[2 * g]; off < gaps[2 * g + 1]; off += len) {
			len = gaps[2 * g + 1] - off;
			if (len > chunk)
				len = chunk;
			j = &t->jobs[t->njobs++];
			j->url = t->url;
			j->off = off;
			j->len = len;
			j->to_end = f->act->fs.listed.size >= 0 &&
			    off + len == (uint64_t)f->act->fs.listed.size;
			j->expect_size = -1;
			j->if_modified_since = -1;
			j->if_range = resume_file_if_range(f->rf);
			job_listed_mtime(j, f);
			j->sink = sink_store;
			j->sink_arg = j;
			j->owner = f;
		}
	}
	f->continued = true;
	i = resume_file_covered(f->rf);
	log_info("%s: %s: continuing with %llu of %lld bytes held: %u "
	    "range(s)", MIRROR(sc), f->act->path, (unsigned long long)i,
	    (long long)f->act->fs.listed.size, t->njobs);
	return 0;
}

/*
 * Close the temp files of failed files to keep (sched_retry): kept when
 * their ranges are in the manifest (resume_close), else removed.
 */
static void
resume_keep_close(struct sched *sc)
{
	struct sfile	*f;

	sc->keep_due = false;
	for (f = sc->live; f != NULL; f = f->lnext) {
		if (!f->keep || f->sf == NULL)
			continue;
		if (f->rf != NULL && resume_file_in_manifest(f->rf) &&
		    sc->fatal != BM_ENOSPC) {
			store_file_keep(f->sf);
			f->sf = NULL;
		} else
			resume_forget(f);
	}
}

/*
 * Record the ranges of files in flight that grew by RESUME_MIN_NEW (any
 * growth when final) and drop the rows of files that started over, every
 * RESUME_EVERY_NS, or after RESUME_SOON_NS when RESUME_SOON_BYTES came
 * in meanwhile (both counted from nine times the last record's duration
 * after it), or when final: fdatasync each temp file
 * first, then one manifest transaction.  A failure is logged; the run
 * goes on (the next run then continues from older ranges or restarts).
 */
static void
resume_tick(struct sched *sc, bool final)
{
	struct partial_rec *recs = NULL;
	struct sfile	**who = NULL;
	struct sfile	*f;
	const char	*tmp;
	size_t		 i, n = 0, due = 0;
	int64_t		 now = clock_mono_ns();
	int		 rc;

	if (!final && !sc->keep_due && now - sc->resume_last <
	    RESUME_EVERY_NS && (sc->resume_new < RESUME_SOON_BYTES ||
	    now - sc->resume_last < RESUME_SOON_NS))
		return;
	sc->resume_last = now;
	sc->resume_new = 0;
	for (f = sc->live; f != NULL; f = f->lnext)
		if (f->rf != NULL && resume_file_due(f->rf,
		    final || f->keep ? 0 : RESUME_MIN_NEW))
			due++;
	if (due == 0)
		goto out;
	/*
	 * The manifest is the committer thread's while it has a batch, and
	 * files of that batch are settled by commit_done: wait for both.
	 */
	if (sc->cb.busy)
		workq_wait(sc->cq, commit_done, sc);
	if ((recs = calloc(due, sizeof(*recs))) == NULL ||
	    (who = calloc(due, sizeof(*who))) == NULL)
		goto out;
	for (f = sc->live; f != NULL && n < due; f = f->lnext) {
		if (f->rf == NULL || !resume_file_due(f->rf,
		    final || f->keep ? 0 : RESUME_MIN_NEW) || resume_unfit(f))
			continue;
		tmp = NULL;
		if ((f->state == SF_RUNNING || f->state == SF_WAITING ||
		    f->keep) && f->sf != NULL && store_file_sync(f->sf) == 0)
			tmp = store_file_tmpname(f->sf);
		if (resume_file_record(f->rf, tmp, &recs[n]))
			who[n++] = f;
	}
	rc = n > 0 ? manifest_partials_put(sc->m, sc->o->run, recs, n) : 0;
	if (rc != 0)
		log_warnx("%s: manifest: record finished ranges: %s",
		    MIRROR(sc), manifest_errmsg(sc->m));
	for (i = 0; i < n; i++)
		resume_file_recorded(who[i]->rf, rc == 0);
out:
	free(recs);
	free(who);
	if (sc->keep_due)
		resume_keep_close(sc);
	/*
	 * The fdatasyncs above block the loop (for long when the disk is
	 * behind the network): wait nine times as long before the next
	 * record, so that recording never takes more than a tenth of it.
	 */
	sc->resume_last = now + 9 * (clock_mono_ns() - now);
}

/* Forget f's in-memory body (a try that ended or moved to a file). */
static void
mem_drop(struct sfile *f)
{
	unsigned	 i;

	if (f->t == NULL)
		return;
	free(f->t->mem);
	f->t->mem = NULL;
	for (i = 0; i < f->t->njobs; i++) {
		f->t->jobs[i].mem = NULL;	/* the transport's no more */
		f->t->jobs[i].mem_cap = 0;
	}
	f->t->mem_len = 0;
	f->t->in_mem = false;
}

static int
sink_store(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct xfer_job	*j = arg;
	struct sfile	*f = j->owner;
	int		 rc;

	if (f->t->in_mem) {
		struct sfile_try *t = f->t;

		if (off <= t->mem_cap && len <= t->mem_cap - off) {
			/* The transport's bytes may be there already (j->mem). */
			if (buf != t->mem + off)
				memcpy(t->mem + off, buf, len);
			if (off + len > t->mem_len)
				t->mem_len = (size_t)(off + len);
			f->sc->bytes_seen += len;
			if (f->sc->o->tune)
				tune_bytes(f->sc->o->tune, len, false);
			return 0;
		}
		/* More than the listing said: go on in a temp file. */
		if ((rc = store_file_open(f->sc->s, f->act->path, -1,
		    &f->sf)) != 0 || (t->mem_len > 0 && (rc =
		    store_file_write(f->sf, 0, t->mem, t->mem_len)) != 0))
			return rc;
		mem_drop(f);
	}
	/* A conditional GET opens its temp file with the first byte. */
	if (f->sf == NULL && (rc = store_file_open(f->sc->s, f->act->path,
	    -1, &f->sf)) != 0)
		return rc;
	/* Bytes the transport does not check: hashed here (hash_claim). */
	if (j->res.unchecked && f->h == NULL && (rc = hash_start(f->sc, f,
	    true)) != 0)
		return rc;
	/*
	 * The first byte of a response: same upstream version as held?  If
	 * not, the next try is one stream (sfile_ranges() says why).
	 */
	if (f->rf != NULL && j->res.bytes == 0 && (rc = resume_file_check(
	    f->rf, j->res.etag, j->res.mtime, j->res.full ? -1 : j->res.total,
	    j->res.errmsg, sizeof(j->res.errmsg))) != 0) {
		if (rc == BM_ECHANGED && f->t->njobs > 1)
			f->single = true;
		return rc;
	}
	/*
	 * A streamed body is copied to the store's writer threads, so that
	 * its page-cache copy does not hold up the loop (store.h); its
	 * bytes are waited for where they are read or published.
	 */
	(void)store_file_write_behind(f->sf);
	hash_tap_start(f, off);
	if ((rc = store_file_write(f->sf, off, buf, len)) == 0) {
		f->sc->bytes_seen += len;
		if (f->sc->o->tune)
			tune_bytes(f->sc->o->tune, len, f->t->njobs > 1);
		if (f->rf != NULL) {
			f->sc->resume_new += len;
			rc = resume_file_add(f->rf, off, len);
		}
	}
	return rc;
}

/*
 * A new record of the batch; reason (may be NULL) is copied and owned by
 * the batch until the flush.
 */
static struct commit_rec *
rec_new(struct sched *sc, const struct action *a, enum commit_op op,
    const char *reason)
{
	struct commit_rec *r = &sc->recs[sc->nrecs];

	commit_rec_action(r, a, op);
	sc->reasons[sc->nrecs] = reason ? strdup(reason) : NULL;
	r->reason = sc->reasons[sc->nrecs] ? sc->reasons[sc->nrecs] :
	    (reason ? "out of memory" : NULL);
	sc->nrecs++;
	if (sc->batch_start == 0)
		sc->batch_start = clock_mono_ns();
	return r;
}

/* Why item rc (non-zero) was not published. */
/*
 * Why a store call failed: for BM_EIO the errno it kept (err, 0 if none),
 * so that "Permission denied" or "Read-only file system" is not shown as
 * an "I/O error" that sends an admin looking for a disk fault.
 */
static const char *
store_reason(int rc, int err)
{
	if (rc == BM_EIO && err != 0)
		return strerror(err);
	return rc == BM_EUNSAFE ? "a directory or symlink is in the way" :
	    bm_strerror(rc);
}

/*
 * commit_item_fn: the manifest record of a published (or not) batch
 * item.  Committer thread: reads the file's action and try, changes
 * nothing.
 */
static void
item_record(void *ctx, size_t i, const struct store_commit_item *it,
    struct commit_rec *r)
{
	const struct sbatch *b = ctx;
	const struct sfile *f = b->itemf[i];
	const struct sfile_done *d = f->d;

	if (it->rc != 0) {
		commit_rec_action(r, f->act, COMMIT_FAILED);
		r->reason = store_reason(it->rc, it->err);
		return;
	}
	commit_rec_action(r, f->act, COMMIT_FETCHED);
	r->fs.upstream.size = d->size;
	r->fs.upstream.mtime = d->up_mtime;
	r->etag = d->etag[0] ? d->etag : NULL;
	r->fs.local.size = (int64_t)d->bytes;
	r->fs.local.mtime = it->mtime;	/* what the file system kept */
	r->bytes = (int64_t)d->received;
	r->checksum = d->checksum[0] ? d->checksum : NULL;
	r->sidecar = d->sidecar[0] ? d->sidecar : NULL;
	r->net = report_net_name(d->net);
}

/*
 * Committer thread: publish batch b and record it in the manifest, in
 * one commit_batch() (intents, renames, one transaction).
 */
static void
commit_task(void *arg)
{
	struct sbatch	*b = arg;
	struct sched	*sc = b->sc;

	b->db_err[0] = '\0';
	if ((b->db_rc = commit_batch(sc->m, sc->s, sc->o->run, b->items,
	    b->nitems, item_record, b, b->recs, b->nrecs, b->all,
	    &b->store_rc)) != 0)
		(void)snprintf(b->db_err, sizeof(b->db_err), "%s",
		    manifest_errmsg(sc->m));
}

/* Loop thread: a batch is through the committer; count and report it. */
static void
commit_done(void *ctx, void *arg)
{
	struct sched	*sc = ctx;
	struct sbatch	*b = arg;
	size_t		 i;

	if (b->store_rc != 0)
		log_errx("%s: %s: syncfs: %s", MIRROR(sc), store_path(sc->s),
		    bm_strerror(b->store_rc));
	for (i = 0; i < b->nitems; i++) {
		struct sfile *f = b->itemf[i];
		const struct sfile_done *d = f->d;

		f->sf = NULL;	/* store_commit freed it */
		if (b->items[i].rc != 0) {
			const char *why = store_reason(b->items[i].rc,
			    b->items[i].err);

			f->state = SF_FAILED;
			sc->res->failed++;
			/* A queued write found the disk full: stop. */
			if (b->items[i].rc == BM_ENOSPC)
				sc->fatal = BM_ENOSPC;
			log_warnx("%s: %s: commit: %s", MIRROR(sc),
			    f->act->path, why);
			(void)result_add_error(sc->res, f->act->path,
			    "commit", why);
		} else {
			sc->res->fetched++;
			sc->res->bytes += d->received;
			sc->res->nets[d->net].files++;
			sc->res->nets[d->net].bytes += d->received;
			span_add(sc, &(struct sspan){ d->start_ns,
			    d->end_ns, d->net });
			log_debug("%s: fetched %llu bytes over %s",
			    f->act->path, (unsigned long long)d->bytes,
			    report_net_name(d->net));
		}
		free(f->d);
		f->d = NULL;
	}
	for (i = 0; i < b->nrecs; i++) {
		free(b->reasons[i]);
		b->reasons[i] = NULL;
	}
	if (b->db_rc != 0) {
		log_errx("%s: manifest: commit: %s", MIRROR(sc), b->db_err);
		if (sc->fatal == 0)
			sc->fatal = b->db_rc == BM_ENOMEM ? BM_ENOMEM : BM_EDB;
	}
	b->nitems = 0;
	b->nrecs = 0;
	b->busy = false;
}

/*
 * Hand the current batch to the committer thread (after the batch it
 * has, if any, is through), and with wait, also wait for it.  The next
 * batch fills the committed batch's arrays.  Returns sc->fatal.
 */
static int
sched_flush(struct sched *sc, bool wait)
{
	struct sbatch	*b = &sc->cb;
	struct store_commit_item *items;
	struct sfile	**itemf;
	struct commit_rec *recs;
	char		**reasons;

	if (b->busy)
		workq_wait(sc->cq, commit_done, sc);
	if (sc->nitems + sc->nrecs > 0) {
		items = b->items, itemf = b->itemf;
		recs = b->recs, reasons = b->reasons;
		b->items = sc->items, b->itemf = sc->itemf;
		b->recs = sc->recs, b->reasons = sc->reasons;
		b->nitems = sc->nitems, b->nrecs = sc->nrecs;
		sc->items = items, sc->itemf = itemf;
		sc->recs = recs, sc->reasons = reasons;
		sc->nitems = 0;
		sc->nrecs = 0;
		sc->batch_bytes = 0;
		sc->batch_start = 0;
		b->busy = true;
		if (workq_push(sc->cq, commit_task, b) != 0) {
			/* No memory for the task node: commit right here. */
			commit_task(b);
			commit_done(sc, b);
		}
	}
	if (wait && b->busy)
		workq_wait(sc->cq, commit_done, sc);
	return sc->fatal;
}

/*
 * End f as failed (op, reason: its record).  Its temp file and ranges
 * go, unless f->keep (sched_retry): then the next resume_tick records
 * and keeps them.
 */
static void
sched_fail(struct sched *sc, struct sfile *f, enum commit_op op,
    const char *reason)
{
	if (!f->keep)
		resume_forget(f);
	f->state = SF_FAILED;
	(void)rec_new(sc, f->act, op, reason);
	if (f->keep) {
		log_warnx("%s: %s: fetch: %s (%llu of %lld bytes kept for the "
		    "next run to continue)", MIRROR(sc), f->act->path, reason,
		    (unsigned long long)resume_file_covered(f->rf),
		    (long long)f->act->fs.listed.size);
		(void)result_add_error(sc->res, f->act->path, "fetch", reason);
	} else if (op == COMMIT_VANISHED &&
	    sc->o->pass == SCHED_PASS_SIDECARS && sc->o->sidecar_gone_warns) {
		/* A stale index entry (NCBI's): its files go unchecked. */
		log_warnx("%s: %s: fetch: %s (a listed sidecar gone upstream: "
		    "the files it covers are not checked; verify = sidecar "
		    "makes this a failure)", MIRROR(sc), f->act->path, reason);
		(void)result_add_error(sc->res, f->act->path, "vanished",
		    reason);
	} else if (op == COMMIT_VANISHED) {
		log_warnx("%s: %s: fetch: %s (listed, but gone upstream; not "
		    "deleted)", MIRROR(sc), f->act->path, reason);
		(void)result_add_error(sc->res, f->act->path, "vanished",
		    reason);
	} else {
		log_warnx("%s: %s: fetch: %s", MIRROR(sc), f->act->path,
		    reason);
		(void)result_add_error(sc->res, f->act->path, "fetch", reason);
	}
	if (!(op == COMMIT_VANISHED && sc->o->pass == SCHED_PASS_SIDECARS &&
	    sc->o->sidecar_gone_warns))
		sc->res->failed++;
	sc->bytes_seen -= try_bytes(f->t) < sc->bytes_seen ?
	    try_bytes(f->t) : sc->bytes_seen;
	try_free(f->t);
	f->t = NULL;
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

/* The transport that carried a try (enum report_net): UDT if any job. */
static unsigned
try_net(const struct sfile_try *t)
{
	unsigned	 i;

	for (i = 0; i < t->njobs; i++)
		if (t->jobs[i].res.net == XFER_NET_UDT)
			return REPORT_NET_UDT;
	return REPORT_NET_TCP;
}

/* Queue a finished file for the next batch commit. */
static void
sched_publish(struct sched *sc, struct sfile *f)
{
	struct xfer_result *res = &f->t->res;
	struct store_commit_item *it;
	struct sfile_done *d;
	bool		 weak;

	if ((d = calloc(1, sizeof(*d))) == NULL) {
		store_file_abort(f->sf);
		f->sf = NULL;
		sched_fail(sc, f, COMMIT_FAILED, "out of memory");
		return;
	}
	if (res->mtime >= 0 && sc->o->fix_mtime != NULL)
		res->mtime = sc->o->fix_mtime(sc->o->fix_mtime_ctx, res->mtime);
	d->size = res->size >= 0 ? res->size : (int64_t)res->bytes;
	/*
	 * A file listed without a time is checked by its validators alone:
	 * weak ones are not kept, so the next check asks unconditionally.
	 */
	weak = res->weak && f->act->fs.listed.prec == MTIME_UNKNOWN;
	d->up_mtime = weak ? -1 : clock_secs_ns(res->mtime);
	d->bytes = res->bytes;
	d->received = try_bytes(f->t);
	if (d->received > d->bytes)
		d->received = d->bytes;
	(void)snprintf(d->etag, sizeof(d->etag), "%s", weak ? "" : res->etag);
	(void)snprintf(d->checksum, sizeof(d->checksum), "%s",
	    f->t->checksum);
	(void)snprintf(d->sidecar, sizeof(d->sidecar), "%s",
	    sc->o->unchecked != NULL && sc->o->unchecked(sc->o->unchecked_ctx,
	    f->act->path) ? MANIFEST_SIDECAR_UNCHECKED : f->t->sidecar);
	d->net = try_net(f->t);
	d->start_ns = f->t->start_ns;
	d->end_ns = f->t->end_ns > d->start_ns ? f->t->end_ns : d->start_ns;
	f->state = SF_DONE;
	if (clock_secs_ns(res->mtime) >= 0)
		f->mtime = clock_secs_ns(res->mtime);
	else if (f->act->fs.listed.prec != MTIME_UNKNOWN)
		f->mtime = f->act->fs.listed.mtime;
	else
		f->mtime = clock_real_ns();
	it = &sc->items[sc->nitems];
	sc->itemf[sc->nitems++] = f;
	it->file = f->sf;
	it->size = res->size >= 0 ? res->size : (int64_t)res->bytes;
	it->mtime = f->mtime;
	it->rc = 0;
	if (sc->batch_start == 0)
		sc->batch_start = clock_mono_ns();
	sc->batch_bytes += res->bytes;
	try_free(f->t);
	f->t = NULL;
	f->d = d;
}

/* Double the slots of sc->wait.  0 or BM_ENOMEM. */
static int
wait_grow(struct sched *sc)
{
	struct sfile	**w;
	size_t		 n = sc->wait_cap ? 2 * sc->wait_cap : 64;

	if ((w = reallocarray(sc->wait, n, sizeof(*w))) == NULL)
		return BM_ENOMEM;
	sc->wait = w;
	sc->wait_cap = n;
	return 0;
}

/* A retryable end: wait and try again, or give up. */
static void
sched_retry(struct sched *sc, struct sfile *f)
{
	struct xfer_result *res = &f->t->res;
	bool		 now;

	if (f->attempts > sc->o->retries || *sc->o->stop) {
		/*
		 * Out of tries on a transient failure: bytes held under a
		 * strong validator (resume_end_try kept them) stay for the
		 * next run, which asks for the rest with If-Range.  Wrong
		 * bytes or a changed upstream left nothing to keep.
		 */
		if (f->sf != NULL && f->rf != NULL &&
		    resume_file_usable(f->rf) && sc->fatal != BM_ENOSPC) {
			f->keep = true;
			sc->keep_due = true;
		}
		sched_fail(sc, f, COMMIT_FAILED, res->errmsg);
		return;
	}
	f->state = SF_WAITING;
	/*
	 * After an ignored Range the one-stream try starts at once, as does
	 * the restart of a file whose held bytes were stale (f->restarted,
	 * attempts not counted: see the XFER_CHANGED case).
	 */
	now = f->restart_now;
	f->restart_now = false;
	f->not_before = clock_mono_ns() + (res->ignored_range || now ? 0 :
	    sched_backoff_ns(f->attempts, res->retry_after));
	if (sc->waiting == sc->wait_cap && wait_grow(sc) != 0) {
		sched_fail(sc, f, COMMIT_FAILED, "out of memory");
		return;
	}
	sc->wait[sc->waiting++] = f;
	sc->big_left += sfile_big(f);
	if (f->sf == NULL)	/* nothing kept */
		sc->bytes_seen -= try_bytes(f->t) < sc->bytes_seen ?
		    try_bytes(f->t) : sc->bytes_seen;
	if (res->ignored_range)
		log_info("%s: %s: fetch: %s: trying one stream", MIRROR(sc),
		    f->act->path, res->errmsg);
	else if (now)
		log_info("%s: %s: fetch: %s", MIRROR(sc), f->act->path,
		    res->errmsg);
	else
		log_info("%s: %s: fetch: %s (retry %u of %u)", MIRROR(sc),
		    f->act->path, res->errmsg, f->attempts, sc->o->retries);
	try_free(f->t);
	f->t = NULL;
}

/*
 * A try that ended well has its whole body in its temp file, or failed
 * to get it there (rc, from the step named what): publish it (after its
 * digest, if it has one), or fail the file.
 */
static void
sched_body_ready(struct sched *sc, struct sfile *f, int rc, int err,
    const char *what)
{
	struct xfer_result *res = &f->t->res;

	if (rc != 0) {
		if (rc == BM_ENOSPC)
			sc->fatal = BM_ENOSPC;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "%s: %s",
		    what, store_reason(rc, err));
		hash_abandon(sc, f);
		sched_fail(sc, f, COMMIT_FAILED, res->errmsg);
		return;
	}
	if (f->h != NULL)
		hash_finish(sc, f);	/* publishes when it matches */
	else if (f->t->njobs > 0 && f->t->jobs[0].res.unchecked) {
		/* Unchecked bytes and no hasher (out of memory): not these. */
		resume_forget(f);
		res->cls = XFER_RETRY;
		res->rc = BM_ENOMEM;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "digest: %s",
		    bm_strerror(BM_ENOMEM));
		sched_retry(sc, f);
	} else
		sched_publish(sc, f);
}

/*
 * The one end of every transfer.  Idempotent: a file already DONE or
 * FAILED is ignored.
 */
static void
sched_finish(struct sched *sc, struct sfile *f)
{
	struct xfer_result *res = &f->t->res;
	int		 rc;

	if (f->state == SF_DONE || f->state == SF_FAILED)
		return;
	sc->inflight--;
	sc->big_left -= sfile_big(f);
	if (res->cls != XFER_OK) {
		hash_abandon(sc, f);
		resume_end_try(f);
		mem_drop(f);
	}
	switch (res->cls) {
	case XFER_OK:
		f->t->end_ns = clock_mono_ns();
		progress_net(sc->progress, try_net(f->t));
		if (f->t->in_mem) {
			/* A worker writes the body; write_done goes on. */
			f->state = SF_WRITING;
			sc->writing++;
			if (workq_push(sc->wq, write_task, f) != 0) {
				sc->writing--;
				mem_drop(f);
				hash_abandon(sc, f);
				sched_fail(sc, f, COMMIT_FAILED,
				    "out of memory");
			}
			return;
		}
		/* An empty body never reached sink_store(): open it now. */
		rc = f->sf != NULL ? 0 :
		    store_file_open(sc->s, f->act->path, -1, &f->sf);
		sched_body_ready(sc, f, rc, rc == BM_EIO ? errno : 0,
		    "open temp file");
		return;
	case XFER_NOT_MODIFIED:
		f->state = SF_DONE;
		sc->unchanged++;
		/* Unchanged upstream; a drifted local mtime is set back. */
		if (f->act->touch && store_set_mtime(sc->s, f->act->path,
		    action_local(f->act).mtime) == 0)
			sc->res->touched++;
		(void)rec_new(sc, f->act, COMMIT_NOT_MODIFIED, NULL);
		try_free(f->t);
		f->t = NULL;
		return;
	case XFER_GONE:
		sched_fail(sc, f, COMMIT_VANISHED, res->errmsg);
		return;
	case XFER_CHANGED:
		if (f->continued && !f->restarted) {
			/*
			 * The bytes held (of an earlier run or try) are of an
			 * older file: nothing transient happened, so starting
			 * over at once is not a retry (once per file).
			 */
			f->restarted = f->restart_now = true;
			f->attempts--;
		}
		sched_retry(sc, f);
		return;
	case XFER_RETRY:
		sched_retry(sc, f);
		return;
	case XFER_PERMANENT:
		if (res->rc == BM_ENOSPC)
			sc->fatal = BM_ENOSPC;
		sched_fail(sc, f, COMMIT_FAILED, res->errmsg);
		return;
	}
}

/*
 * The result of a try once all its jobs ended: the first failure among
 * them, except that ranges the server answered with the whole file are
 * no failure when the first range took that whole file; a range answered
 * with the whole file otherwise makes the next try one stream; ranges
 * that disagree on the total size, ETag or Last-Modified, or a total
 * other than the listed size, mean upstream changed: start over.  A try
 * in ranges that ended well still waits for its end check (check_start).
 */
static void
sfile_result(struct sfile *f)
{
	struct sfile_try *t = f->t;
	struct xfer_result *res = &t->res, *r0 = &t->jobs[0].res, *ri;
	unsigned	 i;

	*res = *r0;
	/* A try in ranges (also one range that continues a file). */
	if (t->jobs[0].len > 0 && !(r0->cls == XFER_OK && r0->full) &&
	    !sfile_ranges(f))
		return;
	if (t->njobs > 1 && r0->full) {
		/* Range 0 took the whole file: nothing else may have written. */
		for (i = 1; i < t->njobs; i++) {
			ri = &t->jobs[i].res;
			if (ri->bytes > 0) {
				res->cls = XFER_CHANGED;
				res->rc = BM_ECHANGED;
				f->single = true;
				(void)snprintf(res->errmsg, sizeof(res->errmsg),
				    "one range came whole, others in part: "
				    "starting over in one stream");
				return;
			}
		}
		res->size = (int64_t)r0->bytes;
	}
	/* Earlier tries or runs may hold part of the bytes. */
	if (f->rf != NULL && res->cls == XFER_OK)
		res->bytes = resume_file_covered(f->rf);
	sfile_check_size(f);
}

/*
 * An exact listed size is a promise: a body of another length (a file
 * changed since the listing, or an error page sent with 200) is never
 * published; the file is tried again (and fails this run if it stays so).
 */
static void
sfile_check_size(struct sfile *f)
{
	struct xfer_result *res = &f->t->res;
	const struct action *a = f->act;
	int64_t		 got;

	if (res->cls != XFER_OK || !a->fs.listed.size_exact ||
	    a->fs.listed.size < 0)
		return;
	got = res->size >= 0 ? res->size : (int64_t)res->bytes;
	if (got == a->fs.listed.size &&
	    (int64_t)res->bytes == a->fs.listed.size)
		return;
	if (got == a->fs.listed.size)
		got = (int64_t)res->bytes;	/* the body fell short */
	res->cls = XFER_CHANGED;
	res->rc = BM_ECHANGED;
	(void)snprintf(res->errmsg, sizeof(res->errmsg), "got %lld bytes, "
	    "the listing says %lld", (long long)got,
	    (long long)a->fs.listed.size);
	/*
	 * A body that ended early (an FTP 226 before the end) whose bytes
	 * are held for resume: the end check asks for SIZE and MDTM; if they
	 * still match, the transfer was cut, not changed (check_done).
	 */
	if (f->t->njobs == 1 && f->t->jobs[0].len == 0 && f->rf != NULL &&
	    f->sf != NULL && got == (int64_t)res->bytes && res->bytes > 0 &&
	    (int64_t)res->bytes < a->fs.listed.size &&
	    (res->size < 0 || res->size == a->fs.listed.size))
		f->t->cut = true;
}

/*
 * The result of a try in ranges (all 206): the first real failure
 * (ranges cancelled because another failed are skipped), or a fall back
 * to one stream when the server did not honour Range, or "upstream
 * changed" when ranges disagree on the total size, ETag or
 * Last-Modified.  Returns true when all ranges are good and consistent.
 */
static bool
sfile_ranges(struct sfile *f)
{
	struct sfile_try *t = f->t;
	struct xfer_result *res = &t->res, *r0 = &t->jobs[0].res, *ri;
	unsigned	 i;

	res->bytes = 0;
	for (i = 0; i < t->njobs; i++) {
		ri = &t->jobs[i].res;
		if (ri->ignored_range) {
			/* Fall back to one stream at once, as a new try. */
			f->single = true;
			f->attempts--;	/* the fallback is not a retry */
			*res = *ri;
			res->cls = XFER_RETRY;
			return false;
		}
	}
	for (i = 0; i < t->njobs; i++) {
		ri = &t->jobs[i].res;
		if (ri->cls != XFER_OK && !t->cancelled[i]) {
			*res = *ri;
			return false;
		}
	}
	for (i = 0; i < t->njobs; i++) {
		ri = &t->jobs[i].res;
		if (ri->cls != XFER_OK) {
			*res = *ri;	/* only cancelled ones failed */
			return false;
		}
		res->bytes += ri->bytes;
		if (ri->total != r0->total || ri->mtime != r0->mtime ||
		    strcmp(ri->etag, r0->etag) != 0) {
			/*
			 * A file that changed, or a server behind a load
			 * balancer whose backends give one file each their
			 * own ETag: either way one response, not ranges from
			 * several, is what can be trusted, so the next try
			 * is one stream (else such a file never completes).
			 */
			f->single = true;
			res->cls = XFER_CHANGED;
			res->rc = BM_ECHANGED;
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "upstream changed between ranges: starting over "
			    "in one stream");
			return false;
		}
	}
	res->size = r0->total;
	return true;
}

/* Cancel the jobs of f still in flight (no done callback follows). */
static void
sfile_cancel(struct sched *sc, struct sfile *f, const char *why)
{
	struct sfile_try *t = f->t;
	unsigned	 i;

	if (t == NULL)
		return;
	if (t->checking) {
		xfer_cancel(sc->x, t->check);
		t->checking = false;
	}
	for (i = 0; i < t->njobs; i++)
		if (t->running & (1ULL << i)) {
			xfer_cancel(sc->x, &t->jobs[i]);
			t->running &= ~(1ULL << i);
			t->cancelled[i] = true;
			t->jobs[i].res.cls = XFER_RETRY;
			t->jobs[i].res.rc = BM_ENET;
			(void)snprintf(t->jobs[i].res.errmsg,
			    sizeof(t->jobs[i].res.errmsg), "%s", why);
		}
}

/*
 * ---- The end check of a try in ranges ----
 * A try whose bytes came from more than one response asks once more for
 * its validators after its last range ended well, before its digest or
 * publication; a validator not reported is not compared.  Why:
 * docs/internals.md, "The end check of a try in ranges".
 */

/* Does f's try, judged by sfile_result(), still need its end check? */
static bool
check_wanted(const struct sfile *f)
{
	const struct sfile_try *t = f->t;

	if (t->check != NULL)
		return false;
	if (t->cut)
		return true;
	return t->res.cls == XFER_OK && t->jobs[0].len > 0 &&
	    !t->jobs[0].res.full;
}

/* Submit the end check of f's try.  Returns 0 or BM_ENOMEM. */
static int
check_start(struct sched *sc, struct sfile *f)
{
	struct sfile_try *t = f->t;
	struct xfer_job	*j;
	int		 rc;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return BM_ENOMEM;
	t->check = j;
	j->url = t->url;
	j->kind = XFER_JOB_VALIDATE;
	j->expect_size = -1;
	j->listed_exact = f->act->fs.listed.size_exact && f->act->fs.listed.size >= 0;
	j->listed_size = j->listed_exact ? (uint64_t)f->act->fs.listed.size : 0;
	job_listed_mtime(j, f);
	j->if_modified_since = -1;
	j->owner = f;
	if ((rc = xfer_submit(sc->x, j)) != 0)
		return rc;
	t->checking = true;
	return 0;
}

/*
 * The end check differs from what the ranges saw: the try ends as
 * "upstream changed" (start over, never published).  what names the
 * validator, was and now its values.
 */
static void
check_changed(struct xfer_result *res, const char *what, const char *was,
    const char *now)
{
	res->cls = XFER_CHANGED;
	res->rc = BM_ECHANGED;
	(void)snprintf(res->errmsg, sizeof(res->errmsg), "upstream changed "
	    "during the transfer (%s now %.80s, the ranges had %.80s): "
	    "starting over", what, now, was);
}

/*
 * The end check of f's try came back: compare it with the first range
 * (the others agree with it), then end the try.  A check that failed
 * ends the try as a failed range would (a transient failure is retried),
 * never with the file published unchecked.
 */
/*
 * The end check of a body cut short (sfile_check_size): SIZE still the
 * listed size and MDTM (or ETag) the time the body came with (or, when
 * it came with none, the listed time to the second) make it a cut
 * transfer: the try is retried and continues at its last byte (REST),
 * the bytes kept.  Anything else leaves it "upstream changed".
 */
static void
cut_done(struct sched *sc, struct sfile *f)
{
	struct sfile_try *t = f->t;
	const struct xfer_result *c = &t->check->res, *r0 = &t->jobs[0].res;
	const struct action *a = f->act;
	struct xfer_result *res = &t->res;

	if (c->cls != XFER_OK || c->size != a->fs.listed.size)
		goto changed;
	if (r0->etag[0] != '\0' && strcmp(c->etag, r0->etag) != 0)
		goto changed;
	if (r0->mtime >= 0 ? c->mtime != r0->mtime :
	    a->fs.listed.prec >= MTIME_SECOND &&
	    (c->mtime < 0 || c->mtime != a->fs.listed.mtime / NS))
		goto changed;
	if (r0->mtime < 0 && r0->etag[0] == '\0')
		resume_file_validators(f->rf, c->etag, c->mtime);
	if (!resume_file_usable(f->rf))
		goto changed;
	res->cls = XFER_RETRY;
	res->rc = BM_ENET;
	(void)snprintf(res->errmsg, sizeof(res->errmsg), "cut short at %llu "
	    "of %lld bytes (size and mtime unchanged upstream): continuing "
	    "from there", (unsigned long long)res->bytes,
	    (long long)a->fs.listed.size);
	sched_finish(sc, f);
	return;
changed:
	log_debug("%s: %s: short body: upstream changed, or not checked: "
	    "starting over", MIRROR(sc), a->path);
	sched_finish(sc, f);
}

static void
check_done(struct sched *sc, struct sfile *f)
{
	struct sfile_try *t = f->t;
	const struct xfer_result *c = &t->check->res, *r0 = &t->jobs[0].res;
	struct xfer_result *res = &t->res;
	int64_t		 size = res->size >= 0 ? res->size :
			    f->act->fs.listed.size;
	char		 was[32], now[32];

	t->checking = false;
	if (t->cut) {
		cut_done(sc, f);
		return;
	}
	if (c->cls != XFER_OK) {
		res->cls = c->cls == XFER_NOT_MODIFIED ? XFER_RETRY : c->cls;
		res->rc = c->rc != 0 ? c->rc : BM_EPROTO;
		res->retry_after = c->retry_after;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "checking "
		    "upstream after the ranges: %.200s", c->errmsg);
	} else if (r0->etag[0] != '\0' && c->etag[0] != '\0' &&
	    strcmp(c->etag, r0->etag) != 0)
		check_changed(res, "ETag", r0->etag, c->etag);
	else if (r0->mtime >= 0 && c->mtime >= 0 && c->mtime != r0->mtime) {
		clock_fmt_utc(r0->mtime, was, sizeof(was));
		clock_fmt_utc(c->mtime, now, sizeof(now));
		check_changed(res, "mtime", was, now);
	} else if (size >= 0 && c->size >= 0 && c->size != size) {
		(void)snprintf(was, sizeof(was), "%lld", (long long)size);
		(void)snprintf(now, sizeof(now), "%lld", (long long)c->size);
		check_changed(res, "size", was, now);
	} else
		log_debug("%s: %s: unchanged upstream after %u range(s)",
		    MIRROR(sc), f->act->path, t->njobs);
	sched_finish(sc, f);
}

static void
on_done(void *ctx, struct xfer_job *job)
{
	struct sched	*sc = ctx;
	struct sfile	*f = job->owner;
	struct sfile_try *t = f->t;
	int		 rc;

	if (sc->o->tune)
		tune_job(sc->o->tune, job);
	if (job == t->check) {
		check_done(sc, f);
		return;
	}
	t->running &= ~(1ULL << (job - t->jobs));
	/*
	 * A failed range makes the others pointless: stop them now; unless
	 * it is a transient failure and what the others fetch is kept (the
	 * next try asks only for what is missing).
	 */
	if (job->res.cls != XFER_OK && !job->res.ignored_range &&
	    !(job->res.cls == XFER_RETRY && f->rf != NULL &&
	    resume_file_usable(f->rf)))
		sfile_cancel(sc, f, "cancelled: another range failed");
	if (t->running != 0)
		return;
	sfile_result(f);
	if (check_wanted(f)) {
		if ((rc = check_start(sc, f)) == 0)
			return;
		t->res.cls = XFER_PERMANENT;
		t->res.rc = rc;
		(void)snprintf(t->res.errmsg, sizeof(t->res.errmsg),
		    "checking upstream after the ranges: %s", bm_strerror(rc));
	}
	sched_finish(sc, f);
}

/*
 * Set up the jobs of one try of f: a file whose exact size S is known
 * gets min(streams, S / min_split) ranges of equal size (DESIGN.md,
 * min_split), the first of which may take a 200 as the whole file; any
 * other file, or one whose server ignored Range, gets one stream.
 * Returns 0 or BM_ENOMEM.
 */
static int
sched_jobs(struct sched *sc, struct sfile *f)
{
	const struct action *a = f->act;
	struct sfile_try *t = f->t;
	struct xfer_job	*j;
	uint64_t	 size = 0, chunk = 0, n = 1, off;
	unsigned	 i;

	if (f->rf != NULL && resume_file_usable(f->rf))
		return resume_jobs(sc, f);
	if (!f->single && a->op == ACT_FETCH && a->fs.listed.size_exact &&
	    a->fs.listed.size > 0 && sched_streams(sc) > 1 &&
	    sc->o->min_split > 0) {
		size = (uint64_t)a->fs.listed.size;
		n = size / sc->o->min_split;
		if (n > sched_streams(sc))
			n = sched_streams(sc);
		if (n > SCHED_MAX_STREAMS)
			n = SCHED_MAX_STREAMS;
		if (n < 1)
			n = 1;
		chunk = (size + n - 1) / n;
	}
	if ((t->jobs = calloc(n, sizeof(*t->jobs))) == NULL ||
	    (t->cancelled = calloc(n, sizeof(*t->cancelled))) == NULL)
		return BM_ENOMEM;
	t->njobs = (unsigned)n;
	for (i = 0, off = 0; i < n; i++, off += chunk) {
		j = &t->jobs[i];
		j->url = t->url;
		j->expect_size = -1;
		j->if_modified_since = -1;
		j->sink = sink_store;
		j->sink_arg = j;
		j->owner = f;
		j->in_memory = t->in_mem;
		if (t->in_mem && n == 1) {
			j->mem = t->mem;
			j->mem_cap = t->mem_cap;
		}
		j->listed_exact = a->fs.listed.size_exact && a->fs.listed.size >= 0;
		j->listed_size = j->listed_exact ? (uint64_t)a->fs.listed.size : 0;
		j->big_left = sc->big_left;
		job_listed_mtime(j, f);
		if (n > 1) {
			j->off = off;
			j->len = i + 1 < n ? chunk : size - off;
			j->accept_full = i == 0;
			j->to_end = i + 1 == n;
		} else {
			/* sfile_check_size */
			j->size_checked = a->fs.listed.size_exact &&
			    a->fs.listed.size >= 0;
			/*
			 * A file listed to the second (MLSD) takes the
			 * listed mtime (sfile_done): no MDTM, unless it is
			 * large enough to be resumed, whose validators
			 * include the MDTM time.
			 */
			j->mtime_listed = a->fs.listed.prec >= MTIME_SECOND &&
			    f->rf == NULL && !(a->fs.listed.size_exact &&
			    a->fs.listed.size >= RESUME_MIN_SIZE);
		}
	}
	if (a->op == ACT_COND_FETCH) {
		t->jobs[0].if_none_match = action_etag(a);
		if (action_upstream(a).mtime >= 0)
			t->jobs[0].if_modified_since =
			    action_upstream(a).mtime / NS;
	}
	return 0;
}

/*
 * f's try failed before its bytes came (rc; its reason as fmt says):
 * finished as a transport's permanent failure would be.
 */
static void __attribute__((format(printf, 4, 5)))
sched_try_failed(struct sched *sc, struct sfile *f, int rc,
    const char *fmt, ...)
{
	va_list	 ap;

	f->state = SF_RUNNING;	/* counted in inflight already */
	f->t->res.cls = XFER_PERMANENT;
	f->t->res.rc = rc;
	va_start(ap, fmt);
	(void)vsnprintf(f->t->res.errmsg, sizeof(f->t->res.errmsg), fmt, ap);
	va_end(ap);
	sched_finish(sc, f);
}

/* A try that failed before any request: end it as a permanent failure. */
static void
sched_start_failed(struct sched *sc, struct sfile *f, int rc, int err,
    const char *what)
{
	if (rc == BM_ENOSPC)
		sc->fatal = BM_ENOSPC;
	sched_try_failed(sc, f, rc, "%s: %s", what, store_reason(rc, err));
}

static int
sched_start(struct sched *sc, struct sfile *f)
{
	const struct action *a = f->act;
	char		*enc = NULL;
	int		 rc;

	f->attempts++;
	f->continued = false;
	if ((f->t = calloc(1, sizeof(*f->t))) == NULL)
		return BM_ENOMEM;
	if ((rc = path_encode(a->path, strlen(a->path), &enc)) != 0)
		return rc;
	rc = asprintf(&f->t->url, "%s%s", sc->o->source_url, enc);
	free(enc);
	if (rc < 0) {
		f->t->url = NULL;
		return BM_ENOMEM;
	}
	sc->inflight++;
	/*
	 * A conditional GET (a listing without size or date) is mostly
	 * answered 304 without a body: its temp file is opened only when
	 * bytes arrive (sink_store) or at the end of an empty 200
	 * (sched_finish).  Creating and removing one per file would touch
	 * every directory's mtime on runs that change nothing.  Other temp
	 * files are created by the worker pool: file creation is the
	 * slowest step of a run of many small files, and it blocks.
	 */
	/* A temp file kept from the last try goes on at once. */
	if (a->op == ACT_COND_FETCH || f->sf != NULL)
		return sched_launch(sc, f);
	/* A small file in one stream: received into memory. */
	if (a->op == ACT_FETCH && a->fs.listed.size_exact &&
	    a->fs.listed.size >= 0 && a->fs.listed.size <= SCHED_MEM_MAX &&
	    f->rf == NULL &&
	    (f->single || sc->o->streams < 2 || sc->o->min_split == 0 ||
	    (uint64_t)a->fs.listed.size / sc->o->min_split < 2) &&
	    (f->t->mem = malloc(a->fs.listed.size > 0 ?
	    (size_t)a->fs.listed.size : 1)) != NULL) {
		f->t->in_mem = true;
		f->t->mem_cap = (size_t)a->fs.listed.size;
		f->state = SF_RUNNING;
		return sched_launch(sc, f);
	}
	f->state = SF_OPENING;
	return workq_push(sc->wq, open_task, f);
}

/* Worker thread: a task finished; wake the loop out of its poll. */
static void
wake_loop(void *arg)
{
	xfer_wakeup(arg);
}

/* Worker thread: create f's temp file. */
static void
open_task(void *arg)
{
	struct sfile	*f = arg;
	const struct action *a = f->act;

	if (f->rf != NULL && resume_file_tmpname(f->rf) != NULL)
		resume_reopen(f);
	if (f->sf != NULL) {
		f->open_rc = 0;
		return;
	}
	f->open_rc = store_file_open(f->sc->s, a->path,
	    a->fs.listed.size_exact ? a->fs.listed.size : -1, &f->sf);
	f->open_err = f->open_rc == BM_EIO ? errno : 0;
}

/*
 * Worker thread: write f's in-memory body to a new temp file, and feed
 * it to f's digest from memory, not read back (the loop leaves a hasher
 * alone while its file is SF_WRITING, and frees none before the workers
 * stopped).
 */
static void
write_task(void *arg)
{
	struct sfile	*f = arg;
	const struct action *a = f->act;
	struct hasher	*h = f->h;
	int		 rc;

	rc = store_file_open(f->sc->s, a->path, (int64_t)f->t->mem_len,
	    &f->sf);
	f->open_err = rc == BM_EIO ? errno : 0;
	if (rc == 0 && f->t->mem_len > 0 && (rc = store_file_write(f->sf, 0,
	    f->t->mem, f->t->mem_len)) != 0) {
		f->open_err = rc == BM_EIO ? errno : 0;
		store_file_abort(f->sf);
		f->sf = NULL;
	}
	f->open_rc = rc;
	if (rc == 0 && h != NULL && !h->busy && h->hashed == 0 &&
	    h->tap_sf == NULL && f->t->mem_len > 0) {
		if (digest_update(h->d, f->t->mem, f->t->mem_len) == 0)
			h->hashed = f->t->mem_len;
		else
			h->rc = hash_restart(h);	/* 0: read back */
	}
}

/* Loop thread: f's body is in its temp file (or not): publish it. */
static void
write_done(struct sched *sc, struct sfile *f)
{
	sc->writing--;
	mem_drop(f);
	sched_body_ready(sc, f, f->open_rc, f->open_err, "write temp file");
}

/* Loop thread: a temp file is ready (or not): start the transfer. */
static void
open_done(void *ctx, void *arg)
{
	struct sched	*sc = ctx;
	struct sfile	*f = arg;
	int		 rc;

	if (f->state == SF_WRITING) {
		write_done(sc, f);
		return;
	}
	if (f->state != SF_OPENING)
		return;	/* abandoned meanwhile: sched_run aborts the file */
	if (f->open_rc != 0) {
		sched_start_failed(sc, f, f->open_rc, f->open_err,
		    "open temp file");
		return;
	}
	if ((rc = sched_launch(sc, f)) != 0 && sc->fatal == 0)
		sc->fatal = rc;
}

/* Submit the jobs of f's try. */
static int
sched_launch(struct sched *sc, struct sfile *f)
{
	unsigned	 i;
	int		 rc;

	if ((rc = sched_jobs(sc, f)) != 0 || (rc = hash_start(sc, f,
	    false)) != 0)
		return rc;
	f->t->start_ns = clock_mono_ns();
	for (i = 0; i < f->t->njobs; i++) {
		if ((rc = xfer_submit(sc->x, &f->t->jobs[i])) != 0 &&
		    rc != BM_ENOMEM) {
			/* Refused (a URL it cannot ask for): f fails, said. */
			sfile_cancel(sc, f, "not submitted");
			sched_try_failed(sc, f, rc, "the transport refused "
			    "%s: %s", f->t->url, bm_strerror(rc));
			return 0;
		}
		if (rc != 0) {
			sfile_cancel(sc, f, "out of memory");
			hash_abandon(sc, f);
			store_file_abort(f->sf);
			f->sf = NULL;
			return rc;
		}
		f->t->running |= 1ULL << i;
	}
	f->state = SF_RUNNING;
	return 0;
}

static void
sched_touch(struct sched *sc, struct action *a)
{
	const char	*reason;
	int64_t		 kept;
	int		 rc;

	if ((rc = store_set_mtime_kept(sc->s, a->path, action_local(a).mtime,
	    &kept)) != 0) {
		reason = bm_strerror(rc);
		(void)rec_new(sc, a, COMMIT_FAILED, reason);
		log_warnx("%s: %s: touch: %s", MIRROR(sc), a->path, reason);
		(void)result_add_error(sc->res, a->path, "touch", reason);
		sc->res->failed++;
		return;
	}
	/* A clamped time is recorded as kept: not touched again next run. */
	rec_new(sc, a, COMMIT_TOUCHED, NULL)->fs.local.mtime = kept;
	sc->res->touched++;
}

/* A new QUEUED file of action a on sc's live list, NULL: no memory. */
static struct sfile *
sfile_new(struct sched *sc, struct action *a)
{
	struct sfile	*f;

	if ((f = calloc(1, sizeof(*f))) == NULL)
		return NULL;
	f->act = a;
	f->sc = sc;
	f->lnext = sc->live;
	if (sc->live != NULL)
		sc->live->lprev = f;
	sc->live = f;
	sc->nlive++;
	return f;
}

/* Unlink f from sc's live list and free it (its parts are gone). */
static void
sfile_free(struct sched *sc, struct sfile *f)
{
	if (f->lprev != NULL)
		f->lprev->lnext = f->lnext;
	else
		sc->live = f->lnext;
	if (f->lnext != NULL)
		f->lnext->lprev = f->lprev;
	sc->nlive--;
	free(f);
}

/*
 * Free the files that ended and that nothing refers to any more: no
 * try, temp file, digest, commit record or ranges.  Called when the live
 * list has doubled since the last call, so its cost per file is bounded.
 */
static void
sched_reap(struct sched *sc)
{
	struct sfile	*f, *next;

	for (f = sc->live; f != NULL; f = next) {
		next = f->lnext;
		if ((f->state == SF_DONE || f->state == SF_FAILED) &&
		    f->t == NULL && f->d == NULL && f->sf == NULL &&
		    f->h == NULL && f->rf == NULL && !f->keep)
			sfile_free(sc, f);
	}
	sc->reap_at = 2 * sc->nlive + SCHED_REAP_MIN;
}

/*
 * Pick the next file to start: a due retry first, then the queue (the
 * next wanted fetch of the plan: a file made up front, or a new one).
 * NULL when none is due, or out of memory (sc->fatal is then set).
 */
static struct sfile *
sched_next(struct sched *sc, int64_t now)
{
	struct action	*a;
	struct sfile	*f;
	size_t		 i;

	for (i = 0; i < sc->waiting; i++) {
		f = sc->wait[i];
		if (f->not_before <= now) {
			sc->wait[i] = sc->wait[--sc->waiting];
			return f;
		}
	}
	for (; sc->next < sc->nfiles && sc->scan < sc->nacts; sc->scan++) {
		a = &sc->acts[sc->scan];
		if (!sched_fetches(sc->o, a))
			continue;
		if (sc->prei < sc->npre && sc->pre[sc->prei]->act == a)
			f = sc->pre[sc->prei++];
		else if ((f = sfile_new(sc, a)) == NULL) {
			sc->fatal = BM_ENOMEM;
			return NULL;
		}
		sc->scan++;
		sc->next++;
		return f;
	}
	return NULL;
}

static bool
batch_due(const struct sched *sc)
{
	if (sc->nitems + sc->nrecs == 0)
		return false;
	if (sc->nitems + sc->nrecs + sched_conc(sc) + 2 >= sc->cap)
		return true;
	/* The committer is busy: keep filling this batch until it is full. */
	if (sc->cb.busy)
		return false;
	return sc->nitems >= sc->o->batch_files ||
	    sc->batch_bytes >= sc->o->batch_bytes ||
	    clock_mono_ns() - sc->batch_start >= (int64_t)sc->o->batch_ms * 1000000;
}

static void
sched_abandon(struct sched *sc)
{
	struct sfile	*f;

	for (f = sc->live; f != NULL; f = f->lnext) {
		if (f->state == SF_HASHING) {
			hash_abandon(sc, f);
			if (f->sf != NULL)
				sc->dropped++;
			store_file_abort(f->sf);
			f->sf = NULL;
			try_free(f->t);
			f->t = NULL;
			f->state = SF_FAILED;
			sc->hashing--;
		} else if (f->state == SF_RUNNING) {
			sfile_cancel(sc, f, "abandoned");
			hash_abandon(sc, f);
			resume_close(sc, f);
			try_free(f->t);
			f->t = NULL;
			f->state = SF_FAILED;
			sc->inflight--;
			sc->big_left -= sfile_big(f);
		} else if (f->state == SF_OPENING) {
			/* The worker may still create it: aborted at the end. */
			f->state = SF_FAILED;
			sc->inflight--;
			sc->big_left -= sfile_big(f);
		} else if (f->state == SF_WRITING) {
			/* Likewise: its temp file is aborted at the end. */
			f->state = SF_FAILED;
			sc->writing--;
		}
	}
}

/*
 * What an interrupted run leaves of the files it had in flight: the
 * temp files with recorded ranges stay for the next run to continue;
 * the others (nothing recorded yet, or waiting for their digest) are
 * removed.
 */
static void
sched_log_stop(const struct sched *sc)
{
	char	 gone[128];

	gone[0] = '\0';
	if (sc->dropped > 0)
		(void)snprintf(gone, sizeof(gone), "; %zu other in-flight "
		    "files removed (fetched again from the start)",
		    sc->dropped);
	log_warnx("%s: interrupted: finished files committed; %zu partly "
	    "fetched files kept for the next run to continue%s",
	    MIRROR(sc), sc->kept, gone);
}

static int
sched_loop(struct sched *sc)
{
	struct sfile	*f;
	int		 rc;

	for (;;) {
		if (*sc->o->stop && sc->fatal == 0)
			sc->fatal = BM_EINTR;
		if (sc->fatal)
			break;
		if (sc->nlive >= sc->reap_at)
			sched_reap(sc);
		while (sc->inflight < sched_conc(sc) &&
		    sc->hashing < sched_conc(sc) &&
		    sc->writing < 4 * sched_conc(sc) &&
		    sc->nitems + sc->nrecs + sc->inflight + sc->hashing +
		    sc->writing + 2 < sc->cap &&
		    (f = sched_next(sc, clock_mono_ns())) != NULL)
			if ((rc = sched_start(sc, f)) != 0)
				return rc;
		if (sc->inflight == 0 && sc->waiting == 0 &&
		    sc->hashing == 0 && sc->writing == 0 &&
		    sc->next >= sc->nfiles)
			break;
		/* 100 ms bounds the delay of due retries. */
		if ((rc = xfer_poll(sc->x, 100, on_done, sc)) != 0)
			return rc;
		(void)workq_collect(sc->wq, open_done, sc);
		(void)workq_collect(sc->cq, commit_done, sc);
		hash_poll(sc);
		resume_tick(sc, false);
		if (sc->o->tune)
			tune_tick(sc->o->tune, clock_mono_ns());
		/* Complete files: committed, in a batch, or unchanged. */
		progress_update(sc->progress, sc->res->fetched - sc->fetched0 +
		    (int64_t)(sc->nitems + sc->cb.nitems) + sc->unchanged,
		    sc->bytes_seen);
		if (batch_due(sc) && sched_flush(sc, false) != 0)
			break;
	}
	/* The last ranges of files in flight, before they are abandoned. */
	if (sc->fatal != BM_ENOSPC)
		resume_tick(sc, true);
	sched_abandon(sc);
	return 0;
}

/* ---- digests (verify = sidecar | checksum) ---- */

/* Is a (a planned action) part of this pass?  Sidecars go first. */
static bool
sched_wants(const struct sched_opts *o, const struct action *a)
{
	const char	*base;

	if (o->pass == SCHED_PASS_ALL)
		return true;
	if (o->pass == SCHED_PASS_PARKED)
		return a->parked;
	base = strrchr(a->path, '/');
	base = base ? base + 1 : a->path;
	return sidecar_name(base, NULL) == (o->pass == SCHED_PASS_SIDECARS);
}

/* Is a a fetch (or conditional fetch) of this pass? */
static bool
sched_fetches(const struct sched_opts *o, const struct action *a)
{
	return (a->op == ACT_FETCH || a->op == ACT_COND_FETCH) &&
	    sched_wants(o, a);
}

/* Unlink h from sc's list and free it. */
static void
hash_free(struct sched *sc, struct hasher *h)
{
	struct hasher	**pp;

	for (pp = &sc->hashers; *pp != NULL; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	if (h->fd != -1)
		(void)close(h->fd);
	digest_free(h->d);
	free(h);
}

/*
 * Tap thread (a write-behind writer, or whoever writes f's temp file):
 * feed the bytes just written to h's digest while they come in order.
 */
static void
hash_tap(void *arg, uint64_t off, const uint8_t *p, size_t len)
{
	struct hasher	*h = arg;
	int		 gap;

	gap = atomic_load_explicit(&h->tap_gap, memory_order_relaxed);
	if (gap == TAP_REDO)
		return;
	if (off < h->fed)	/* below what was fed, after a skip too */
		atomic_store(&h->tap_gap, TAP_REDO);
	else if (gap != 0)
		return;
	else if (off > h->fed)
		atomic_store(&h->tap_gap, TAP_SKIP);
	else if (digest_update(h->d, p, len) != 0)
		atomic_store(&h->tap_gap, TAP_REDO);
	else
		h->fed += len;
}

/*
 * Loop thread, the first byte of f's body at offset 0 into an empty temp
 * file: tap it (once per hasher), so that its digest follows the writes.
 */
static void
hash_tap_start(struct sfile *f, uint64_t off)
{
	struct hasher	*h = f->h;

	if (h == NULL || h->tap_tried || h->busy || h->hashed != 0 ||
	    off != 0 || f->t->njobs != 1 || store_file_length(f->sf) != 0)
		return;
	h->tap_tried = true;
	h->tap_sf = f->sf;
	store_file_tap(f->sf, hash_tap, h);
}

/*
 * Loop thread: no more tap for h (f: its file, NULL if none): once this
 * returns no tap call runs or is to come.  A temp file no longer f's
 * went with its tap.  Then the bytes fed count as hashed, or, after a
 * write below them, h starts over from byte 0.  0 or BM_ENOMEM.
 */
static int
hash_untap(struct hasher *h, struct sfile *f)
{
	if (h->tap_sf == NULL)
		return 0;
	if (f != NULL && f->sf == h->tap_sf)
		store_file_tap(f->sf, NULL, NULL);
	else
		atomic_store(&h->tap_gap, TAP_REDO);
	h->tap_sf = NULL;
	if (atomic_load(&h->tap_gap) != TAP_REDO) {
		h->hashed = h->fed;
		return 0;
	}
	return hash_restart(h);
}

/* h from byte 0 again, its digest new.  0 or BM_ENOMEM. */
static int
hash_restart(struct hasher *h)
{
	struct digest	*d;
	int		 rc;

	if ((rc = digest_new(h->algs, &d)) != 0)
		return rc;
	digest_free(h->d);
	h->d = d;
	h->hashed = 0;
	return 0;
}

/* Free every hasher (the digest workers are stopped). */
static void
hash_free_all(struct sched *sc)
{
	while (sc->hashers != NULL) {
		(void)hash_untap(sc->hashers, sc->hashers->f);
		if (sc->hashers->f != NULL)
			sc->hashers->f->h = NULL;
		hash_free(sc, sc->hashers);
	}
}

/* Is the source bm://?  Its transport may hand over unchecked bytes. */
static bool
sched_bm(const struct sched *sc)
{
	return sc->o->source_url != NULL &&
	    strncasecmp(sc->o->source_url, "bm://", 5) == 0;
}

/*
 * A new try of f: give it a hasher when it has a published digest to
 * check, every file's digest is recorded, or (unchecked) its transport
 * hands over bytes it did not check (res.unchecked: their SHA-256 is
 * checked against res.sha256).  0 or BM_ENOMEM.
 */
static int
hash_start(struct sched *sc, struct sfile *f, bool unchecked)
{
	struct hasher	*h;
	unsigned	 algs = 0;
	int		 i, rc;

	if (sc->hq == NULL)
		return 0;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return BM_ENOMEM;
	h->fd = -1;
	if (sc->o->sums != NULL && sidecar_set_find(sc->o->sums, f->act->path,
	    &h->sum))
		for (i = 0; i < DIGEST__N; i++)
			if (h->sum.has[i])
				algs |= DIGEST_BIT(i);
	if (sc->o->record_digest)
		algs |= DIGEST_BIT(DIGEST_SHA256);
	/* bm:// bodies the transport did not check: their SHA-256 is. */
	if (unchecked || (algs != 0 && sched_bm(sc)))
		algs |= DIGEST_BIT(DIGEST_SHA256);
	if (algs == 0) {
		free(h);
		return 0;
	}
	if ((rc = digest_new(algs, &h->d)) != 0) {
		free(h);
		return rc;
	}
	h->algs = algs;
	h->f = f;
	h->next = sc->hashers;
	sc->hashers = h;
	f->h = h;
	return 0;
}

/* The try of f ended badly (or was given up): detach its hasher. */
static void
hash_abandon(struct sched *sc, struct sfile *f)
{
	struct hasher	*h = f->h;

	if (h == NULL)
		return;
	hash_untap(h, f);
	f->h = NULL;
	h->f = NULL;
	if (!h->busy)
		hash_free(sc, h);
	/* else freed when its task comes back (hash_done) */
}

/* Bytes of f's try that are in the temp file from offset 0 on. */
static uint64_t
hash_prefix(const struct sfile *f)
{
	const struct sfile_try *t = f->t;
	const struct xfer_job *j;
	uint64_t	 end = 0;
	unsigned	 i;

	if (f->h->final)
		return t->res.bytes;
	for (i = 0; i < t->njobs; i++)
		if (t->jobs[i].res.scattered)
			return f->h->hashed;	/* no prefix before the end */
	if (t->njobs == 1 || t->jobs[0].res.full)
		return t->jobs[0].res.bytes;
	for (i = 0; i < t->njobs; i++) {
		j = &t->jobs[i];
		end = j->off + j->res.bytes;
		if (j->res.bytes < j->len)
			break;
	}
	return end;
}

/* Worker thread: feed [hashed, target) of the temp file to the digest. */
static void
hash_task(void *arg)
{
	struct hasher	*h = arg;
	uint64_t	 n = 0;

	h->rc = digest_fd(h->d, h->fd, h->hashed, h->target, &n);
	h->hashed += n;
}

/* Push the next step of h when its prefix grew enough (or at the end). */
static void
hash_kick(struct sched *sc, struct hasher *h)
{
	struct sfile	*f = h->f;
	uint64_t	 prefix;

	/*
	 * SF_WRITING: a worker creates f->sf and writes the body held in
	 * memory (write_task); f->sf is the loop's again in write_done.
	 */
	if (h->busy || f == NULL || f->t == NULL || f->state == SF_WRITING ||
	    f->sf == NULL)
		return;
	if (h->tap_sf != NULL) {
		if (!h->final && atomic_load(&h->tap_gap) == 0)
			return;		/* the tap keeps up */
		/* The end, or a write out of order: the rest is read back. */
		if ((h->rc = store_file_drain(f->sf)) != 0 ||
		    (h->rc = hash_untap(h, f)) != 0)
			return;
	}
	if (h->fd == -1 && store_file_dup(f->sf, &h->fd) != 0) {
		h->rc = BM_EIO;
		return;
	}
	prefix = hash_prefix(f);
	/* More fed than the try holds (a transport's slip): all again. */
	if (h->hashed > prefix && (h->rc = hash_restart(h)) != 0)
		return;
	if (prefix <= h->hashed || (!h->final && prefix - h->hashed <
	    HASH_STEP))
		return;
	/* The bytes to hash may still be queued for the temp file. */
	if ((h->rc = store_file_drain(f->sf)) != 0)
		return;
	h->target = prefix;
	h->busy = true;
	if (workq_push(sc->hq, hash_task, h) != 0) {
		h->busy = false;
		h->rc = BM_ENOMEM;
	}
}

/*
 * The try of f failed its published digests (res->errmsg says how; got:
 * the body's digest): with o->park_mismatch (and a retry left) the file
 * is parked for the caller, who fetches its sidecar again (sched.h);
 * after such a park, the same body again ends the file with a
 * COMMIT_MISMATCH record naming both digests.  Else true: retry it.
 */
static bool
hash_mismatch(struct sched *sc, struct sfile *f, const char *want,
    const char *got)
{
	struct xfer_result *res = &f->t->res;
	struct commit_rec *r;
	struct action	*a = f->act;
	char		*buf, *g;
	size_t		 n;

	if (sc->o->park_mismatch && got[0] && f->attempts <= sc->o->retries &&
	    !*sc->o->stop) {
		if (action_more(a) == NULL || (g = strdup(got)) == NULL)
			return true;
		free(a->more->got);
		a->more->got = g;
		a->parked = true;
		log_info("%s: %s: fetch: %s: fetching its sidecar again",
		    MIRROR(sc), a->path, res->errmsg);
		resume_forget(f);
		f->state = SF_FAILED;	/* this pass: no record, not counted */
		sc->bytes_seen -= try_bytes(f->t) < sc->bytes_seen ?
		    try_bytes(f->t) : sc->bytes_seen;
		try_free(f->t);
		f->t = NULL;
		return false;
	}
	if (action_got(a) == NULL || got[0] == '\0' ||
	    strcmp(action_got(a), got) != 0) {
		/* Another body: upstream is changing; try again. */
		if (got[0] && action_more(a) != NULL &&
		    (g = strdup(got)) != NULL) {
			free(a->more->got);
			a->more->got = g;
		}
		return true;
	}
	n = strlen(res->errmsg);
	(void)snprintf(res->errmsg + n, sizeof(res->errmsg) - n, " again "
	    "(the same body twice, its sidecar asked for again): not fetched "
	    "again until upstream's file or sidecar changes");
	resume_forget(f);
	f->state = SF_FAILED;
	/* One allocation owns the strings: reason, want, got, etag. */
	if (asprintf(&buf, "%s%c%s%c%s%c%s", res->errmsg, 0, want, 0, got, 0,
	    res->etag) < 0) {
		sched_fail(sc, f, COMMIT_FAILED, res->errmsg);
		return false;
	}
	r = rec_new(sc, a, COMMIT_FAILED, NULL);
	sc->reasons[sc->nrecs - 1] = buf;
	r->op = COMMIT_MISMATCH;
	r->reason = buf;
	r->sidecar = buf + strlen(buf) + 1;
	r->checksum = r->sidecar + strlen(r->sidecar) + 1;
	r->etag = r->checksum + strlen(r->checksum) + 1;
	if (r->etag[0] == '\0')
		r->etag = NULL;
	r->fs.upstream.size = res->size;
	r->fs.upstream.mtime = clock_secs_ns(res->mtime);
	log_warnx("%s: %s: fetch: %s", MIRROR(sc), a->path, res->errmsg);
	(void)result_add_error(sc->res, a->path, "fetch", res->errmsg);
	sc->res->failed++;
	sc->bytes_seen -= try_bytes(f->t) < sc->bytes_seen ?
	    try_bytes(f->t) : sc->bytes_seen;
	try_free(f->t);
	f->t = NULL;
	return false;
}

/*
 * The bytes of f's try that its transport did not check (res.unchecked)
 * against the SHA-256 the server sent for them (res.sha256): 0 (none, or
 * they match), BM_ECHECKSUM (errmsg says so) or BM_E*.
 */
static int
hash_claim(struct sfile *f)
{
	struct xfer_result *res = &f->t->res;
	struct digest_value v, c;
	unsigned	 i;
	int		 rc;

	for (i = 0; i < f->t->njobs; i++) {
		if (!f->t->jobs[i].res.unchecked)
			continue;
		if (f->t->njobs != 1 || f->t->jobs[0].off != 0)
			return BM_EPROTO;	/* not a whole body */
		if ((rc = digest_final(f->h->d, DIGEST_SHA256, &v)) != 0)
			return rc;
		if (digest_from_text(f->t->jobs[0].res.sha256, &c) == 0 &&
		    digest_equal(&v, &c))
			return 0;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "bytes [0, "
		    "%llu): the SHA-256 does not match the server's: fetched "
		    "again", (unsigned long long)res->bytes);
		log_warnx("%s: %s: %s", MIRROR(f->sc), f->act->path,
		    res->errmsg);
		return BM_ECHECKSUM;
	}
	return 0;
}

/*
 * All bytes of f are hashed: compare with the published digests, keep
 * the SHA-256 to record, then publish, or discard and retry on a
 * mismatch (the old file stays as it is; hash_mismatch).
 */
static void
hash_check(struct sched *sc, struct sfile *f)
{
	struct hasher	*h = f->h;
	struct xfer_result *res = &f->t->res;
	struct digest_value v;
	char		 want[SIDECAR_TEXT_MAX], got[DIGEST_TEXT_MAX];
	char		 one[DIGEST_TEXT_MAX];
	bool		 claim = false;
	int		 i, rc = h->rc;

	sc->hashing--;
	got[0] = '\0';
	if (sidecar_sum_text(&h->sum, want, sizeof(want)) != 0)
		want[0] = '\0';
	/* Bytes the server did not send as it said: not a published one's. */
	if (rc == 0 && (rc = hash_claim(f)) == BM_ECHECKSUM)
		claim = true;
	for (i = 0; rc == 0 && i < DIGEST__N; i++) {
		if (!h->sum.has[i])
			continue;
		if ((rc = digest_final(h->d, (enum digest_alg)i, &v)) != 0)
			break;
		if (h->sum.conflict[i]) {
			/*
			 * Two digests for one file: neither can vouch (and
			 * no body can match: retried as usual, not parked).
			 */
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "checksum mismatch: %.60s gives conflicting %s "
			    "digests", h->sum.from[i],
			    digest_alg_name((enum digest_alg)i));
			rc = BM_ECHECKSUM;
			break;
		}
		(void)digest_to_text(&v, got, sizeof(got));
		if (digest_equal(&v, &h->sum.v[i]))
			continue;
		(void)digest_to_text(&h->sum.v[i], one, sizeof(one));
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "checksum "
		    "mismatch: %.60s says %.75s, got %.75s", h->sum.from[i],
		    one, got);
		rc = BM_ECHECKSUM;
	}
	if (rc == 0 && sc->o->record_digest &&
	    (rc = digest_final(h->d, DIGEST_SHA256, &v)) == 0)
		(void)digest_to_text(&v, f->t->checksum, sizeof(f->t->checksum));
	hash_abandon(sc, f);
	if (rc == 0) {
		(void)snprintf(f->t->sidecar, sizeof(f->t->sidecar), "%s",
		    want);
		sched_publish(sc, f);
		return;
	}
	if (rc == BM_ENOSPC) {		/* a queued write found the disk full */
		sched_body_ready(sc, f, rc, 0, "write");
		return;
	}
	if (rc != BM_ECHECKSUM)
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "digest: %s",
		    bm_strerror(rc));
	else if (!claim && !hash_mismatch(sc, f, want, got))
		return;
	/* Wrong bytes: none of them may be continued by a later try. */
	resume_forget(f);
	res->cls = XFER_CHANGED;
	res->rc = rc;
	res->retry_after = -1;
	sched_retry(sc, f);
}

/* The try of f ended well: wait for its digest to cover every byte. */
static void
hash_finish(struct sched *sc, struct sfile *f)
{
	f->state = SF_HASHING;
	sc->hashing++;
	f->h->final = true;
	hash_kick(sc, f->h);
	if (!f->h->busy && (f->h->rc != 0 ||
	    f->h->hashed == f->t->res.bytes))
		hash_check(sc, f);
}

/* Loop thread: a digest step came back. */
static void
hash_done(void *ctx, void *arg)
{
	struct sched	*sc = ctx;
	struct hasher	*h = arg;

	h->busy = false;
	if (h->f == NULL)
		hash_free(sc, h);	/* its try was abandoned meanwhile */
}

/* Loop thread: collect digest steps, start the next ones, finish files. */
static void
hash_poll(struct sched *sc)
{
	struct hasher	*h, *next;
	struct sfile	*f;

	if (sc->hq == NULL)
		return;
	(void)workq_collect(sc->hq, hash_done, sc);
	for (h = sc->hashers; h != NULL; h = next) {
		next = h->next;
		if ((f = h->f) == NULL || h->busy)
			continue;
		if (h->rc == 0)
			hash_kick(sc, h);
		if (f->state == SF_HASHING && !h->busy && (h->rc != 0 ||
		    h->hashed == f->t->res.bytes))
			hash_check(sc, f);	/* may free h */
	}
}

/*
 * A large file of exact size keeps its ranges (resume), starting from
 * those an earlier run recorded, if any.  Returns 0 or BM_ENOMEM.
 */
static int
resume_setup(struct sched *sc, struct sfile *f)
{
	const struct action *a = f->act;
	char		 sum[DIGEST_TEXT_MAX];

	if (!resume_wanted(a))
		return 0;
	if ((f->rf = resume_file_new(sc->o->resume, a->path, a->fs.listed.size,
	    a->fs.listed.mtime)) == NULL)
		return BM_ENOMEM;
	listed_sha256(f, sum, sizeof(sum));
	if (!resume_file_same_digest(f->rf, sum))
		log_info("%s: %s: the listed digest is not that of the bytes "
		    "an earlier run kept: starting over", MIRROR(sc), a->path);
	sc->bytes_seen += resume_file_covered(f->rf);
	return 0;
}

/* Does a keep its ranges (resume_setup)?  Its file is made up front. */
static bool
resume_wanted(const struct action *a)
{
	return a->op == ACT_FETCH && a->fs.listed.size_exact &&
	    a->fs.listed.size >= RESUME_MIN_SIZE;
}

static int
sched_setup(struct sched *sc, struct action *acts, size_t n)
{
	struct sfile	*f;
	size_t		 i, nf = 0, npre = 0;
	uint64_t	 total = 0;

	for (i = 0; i < n; i++)
		if (sched_fetches(sc->o, &acts[i])) {
			nf++;
			npre += resume_wanted(&acts[i]);
			if (acts[i].op == ACT_FETCH &&
			    acts[i].fs.listed.size > 0)
				total += (uint64_t)acts[i].fs.listed.size;
		}
	sc->acts = acts;
	sc->nacts = n;
	sc->spans_cap = SCHED_SPANS_MIN;
	sc->reap_at = SCHED_REAP_MIN;
	if ((sc->pre = calloc(npre ? npre : 1, sizeof(*sc->pre))) == NULL ||
	    (sc->spans = calloc(sc->spans_cap, sizeof(*sc->spans))) == NULL ||
	    (sc->items = calloc(sc->cap, sizeof(*sc->items))) == NULL ||
	    (sc->itemf = calloc(sc->cap, sizeof(*sc->itemf))) == NULL ||
	    (sc->recs = calloc(sc->cap, sizeof(*sc->recs))) == NULL ||
	    (sc->reasons = calloc(sc->cap, sizeof(*sc->reasons))) == NULL ||
	    (sc->cb.items = calloc(sc->cap, sizeof(*sc->cb.items))) == NULL ||
	    (sc->cb.itemf = calloc(sc->cap, sizeof(*sc->cb.itemf))) == NULL ||
	    (sc->cb.recs = calloc(sc->cap, sizeof(*sc->cb.recs))) == NULL ||
	    (sc->cb.reasons = calloc(sc->cap, sizeof(*sc->cb.reasons))) ==
	    NULL ||
	    (sc->cb.all = calloc(2 * sc->cap, sizeof(*sc->cb.all))) == NULL ||
	    (sc->progress = sc->o->line != NULL ? sc->o->line :
	    progress_new(sc->o->name ? sc->o->name : "", (int64_t)nf, total,
	    sc->o->progress)) == NULL)
		return BM_ENOMEM;
	if (nf > 0 && workq_new(SCHED_OPENERS, wake_loop, sc->x,
	    &sc->wq) != 0)
		return BM_ENOMEM;
	sc->cb.sc = sc;
	if (workq_new(1, wake_loop, sc->x, &sc->cq) != 0)
		return BM_ENOMEM;
	if (nf > 0 && (sc->o->sums != NULL || sc->o->record_digest ||
	    sched_bm(sc)) &&
	    workq_new(SCHED_HASHERS, wake_loop, sc->x, &sc->hq) != 0)
		return BM_ENOMEM;
	for (i = 0; i < n; i++) {
		if (!sched_fetches(sc->o, &acts[i]))
			continue;
		if (sc->o->tune)
			tune_plan(sc->o->tune, acts[i].fs.listed.size);
		if (resume_wanted(&acts[i])) {
			if ((f = sfile_new(sc, &acts[i])) == NULL)
				return BM_ENOMEM;
			sc->pre[sc->npre++] = f;
			if (resume_setup(sc, f) != 0)
				return BM_ENOMEM;
		}
		sc->big_left += act_big(&acts[i]);
		sc->nfiles++;
	}
	return 0;
}

/*
 * Note the span of a fetched file.  When the slots are full, the spans
 * are merged into their union first (what sched_net_seconds counts),
 * and the slots doubled if that leaves them more than half full; out of
 * memory, the span is left out.
 */
static void
span_add(struct sched *sc, const struct sspan *sp)
{
	struct sspan	*p;

	if (sc->nspans == sc->spans_cap) {
		span_merge(sc, span_floor(sc));
		if (2 * sc->nspans > sc->spans_cap && (p = reallocarray(
		    sc->spans, 2 * sc->spans_cap, sizeof(*p))) != NULL) {
			sc->spans = p;
			sc->spans_cap *= 2;
		}
		if (sc->nspans == sc->spans_cap)
			return;
	}
	sc->spans[sc->nspans++] = *sp;
}

static int
span_cmp(const void *x, const void *y)
{
	const struct sspan *p = x, *q = y;

	if (p->net != q->net)
		return p->net < q->net ? -1 : 1;
	return p->a < q->a ? -1 : p->a > q->a;
}

/*
 * The earliest start of a span still to come: no file of sc's started
 * its try or committed earlier than this, nor will one that starts later.
 */
static int64_t
span_floor(const struct sched *sc)
{
	const struct sfile *f;
	int64_t		 m = clock_mono_ns();

	for (f = sc->live; f != NULL; f = f->lnext) {
		if (f->t != NULL && f->t->start_ns > 0 && f->t->start_ns < m)
			m = f->t->start_ns;
		if (f->d != NULL && f->d->start_ns < m)
			m = f->d->start_ns;
	}
	return m;
}

/*
 * Replace sc's spans with their union, per transport, in place; the
 * parts of it that end before floor (monotonic ns: no span still to
 * come starts earlier, span_floor) are added to sc->span_ns and dropped.
 */
static void
span_merge(struct sched *sc, int64_t floor)
{
	struct sspan	*p, *o = NULL;
	size_t		 k, n = 0;

	qsort(sc->spans, sc->nspans, sizeof(*sc->spans), span_cmp);
	for (k = 0; k < sc->nspans; k++) {
		p = &sc->spans[k];
		if (o == NULL || p->net != o->net || p->a > o->b) {
			if (o != NULL && o->b < floor) {
				sc->span_ns[o->net] += o->b - o->a;
				n--;
			}
			o = &sc->spans[n++];
			*o = *p;
		} else if (p->b > o->b)
			o->b = p->b;
	}
	if (o != NULL && o->b < floor) {
		sc->span_ns[o->net] += o->b - o->a;
		n--;
	}
	sc->nspans = n;
}

/*
 * Add to each transport's seconds the time this pass had at least one of
 * its fetched files in flight (the union of their spans).  Passes run one
 * after another, so their times add up.
 */
static void
sched_net_seconds(struct sched *sc)
{
	unsigned	 i;

	span_merge(sc, INT64_MAX);	/* all of it: sc->nspans is 0 */
	for (i = 0; i < REPORT_NETS; i++) {
		sc->res->nets[i].seconds += (double)sc->span_ns[i] / 1e9;
		sc->span_ns[i] = 0;
	}
}

int
sched_run(const struct sched_opts *o, struct xfer *x, struct store *s,
    struct manifest *m, struct action *acts, size_t n,
    struct mirror_result *res)
{
	struct sched	 sc;
	struct sfile	*f;
	size_t		 i;
	int		 rc;

	memset(&sc, 0, sizeof(sc));
	sc.o = o;
	sc.x = x;
	sc.s = s;
	sc.m = m;
	sc.res = res;
	sc.fetched0 = res->fetched;
	sc.cap = o->batch_files + (o->tune ? tune_max_concurrency(o->tune) :
	    o->concurrency) + 64;
	if ((rc = sched_setup(&sc, acts, n)) != 0)
		goto out;
	for (i = 0; i < n && sc.fatal == 0; i++) {
		if (acts[i].op != ACT_TOUCH || !sched_wants(o, &acts[i]))
			continue;
		sched_touch(&sc, &acts[i]);
		if (sc.nrecs + 2 >= sc.cap)
			(void)sched_flush(&sc, false);
	}
	if (sc.fatal == 0 && (rc = sched_loop(&sc)) != 0)
		goto out;
	(void)sched_flush(&sc, true);
	rc = sc.fatal;
out:
	if (sc.spans != NULL)
		sched_net_seconds(&sc);
	if (o->line != NULL)
		progress_pass_end(sc.progress);
	else
		progress_free(sc.progress);
	/* Every temp file a worker made is in its sfile once this returns. */
	workq_free(sc.wq);
	/* An error path may leave a batch with the committer: finish it. */
	if (sc.cb.busy)
		workq_wait(sc.cq, commit_done, &sc);
	workq_free(sc.cq);
	sc.cq = NULL;
	/* No digest task runs after this: their hashers can go. */
	workq_free(sc.hq);
	hash_free_all(&sc);
	for (f = sc.live; f != NULL; f = f->lnext) {
		if (f->state == SF_RUNNING)
			sfile_cancel(&sc, f, "abandoned");
		resume_close(&sc, f);
		mem_drop(f);
		try_free(f->t);
		free(f->d);
	}
	resume_tick(&sc, true);	/* rows of files started over */
	while (sc.live != NULL) {
		resume_file_free(sc.live->rf);
		sfile_free(&sc, sc.live);
	}
	if (rc == BM_EINTR && sc.fatal == BM_EINTR)
		sched_log_stop(&sc);
	if (sc.reasons)
		for (i = 0; i < sc.nrecs; i++)
			free(sc.reasons[i]);
	free(sc.pre);
	free(sc.spans);
	free(sc.wait);
	free(sc.items);
	free(sc.itemf);
	free(sc.recs);
	free(sc.reasons);
	free(sc.cb.items);
	free(sc.cb.itemf);
	free(sc.cb.recs);
	free(sc.cb.reasons);
	free(sc.cb.all);
	return rc;
}
