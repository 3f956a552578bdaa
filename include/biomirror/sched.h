/*
 * The scheduler: keeps `concurrency` files in flight on a transport,
 * retries with exponential backoff and jitter (Retry-After honoured up to
 * 10 minutes), ends every file through one idempotent finish function,
 * and hands finished files to the store's batch commit, which is the only
 * step that records them in the manifest (STYLE.md rule 21).  It does not
 * know which protocol carries its jobs.
 */
#ifndef BIOMIRROR_SCHED_H
#define BIOMIRROR_SCHED_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct xfer;
struct store;
struct manifest;
struct mirror_result;
struct action;
struct sidecar_set;
struct tune;
struct progress;

/* Which planned actions one sched_run() carries out. */
enum sched_pass {
	SCHED_PASS_ALL = 0,	/* every action */
	SCHED_PASS_SIDECARS,	/* only sidecar checksum files (sidecar_name) */
	SCHED_PASS_DATA,	/* everything but sidecar checksum files */
	SCHED_PASS_PARKED,	/* only the actions parked (park_mismatch) */
};
struct resume_set;


struct sched_opts {
	const char	*source_url;	/* borrowed: ends in '/'; paths are appended encoded */
	const char	*name;		/* borrowed: mirror name, for the progress line */
	unsigned	 concurrency;	/* files in flight */
	unsigned	 streams;	/* ranges per large file, 1..64 */
	uint64_t	 min_split;	/* bytes: smallest range worth a stream */
	bool		 progress;	/* show the live progress line (on a tty) */
	struct progress	*line;		/* borrowed, NULL: the run's progress
					   line over every pass (sched_run
					   then makes none of its own) */
	unsigned	 retries;	/* retries per file after the first try */
	int64_t		 run;		/* manifest run id for commit records */
	size_t		 batch_files;	/* commit after this many files ... */
	uint64_t	 batch_bytes;	/* ... or this many bytes ... */
	unsigned	 batch_ms;	/* ... or this many milliseconds */
	volatile sig_atomic_t *stop;	/* borrowed: set by SIGTERM/SIGINT */
	enum sched_pass	 pass;		/* which actions (verify = sidecar: two passes) */
	struct sidecar_set *sums;	/* borrowed: published digests to check, NULL for none */
	bool		 record_digest;	/* record each fetched file's SHA-256 (verify = checksum) */
	bool		 sidecar_gone_warns; /* pass SIDECARS: a sidecar gone
					   upstream (404) is a warning, not a
					   failed file (verify by default) */
	bool		 park_mismatch;	/* a body that fails its published
					   digests (with a retry left) is not
					   retried: its action gets the body's
					   digest (got) and parked, and it ends
					   this pass unrecorded and uncounted;
					   the caller fetches its sidecar again
					   and runs the parked actions.  In any
					   pass, an action whose got that same
					   body repeats ends at once: a
					   COMMIT_MISMATCH record, both digests
					   in the error (exit 1) */
	bool		(*unchecked)(void *ctx, const char *path);
					/* NULL, or true when path's content
					   could not be checked this run
					   (verify = size, a sidecar that may
					   cover it failed): it is recorded
					   with MANIFEST_SIDECAR_UNCHECKED */
	void		*unchecked_ctx;	/* borrowed: unchecked's ctx */
	int64_t		(*fix_mtime)(void *ctx, int64_t s);
					/* NULL, or an upstream time (s, as a
					   response said it) to UTC: an FTP
					   server whose MDTM is local time */
	void		*fix_mtime_ctx;	/* borrowed: fix_mtime's ctx */
	const struct resume_set *resume; /* borrowed: ranges kept by earlier
					   runs (resume_prepare), NULL if none */
	struct tune	*tune;		/* borrowed: concurrency/streams = auto
					   (agent/sched/autotune.c) decides
					   both and gets every job's
					   measurement; NULL: the two fixed
					   values above */
};

/*
 * Carry out the fetch, conditional-fetch and touch actions among
 * acts[0..n) (others ignored; borrowed for the call, which may park an
 * action and set its digest got, action_more): transfers through x, in
 * ranges for large files; writes through s; hashes and checks digests
 * (o->sums, o->record_digest) before publishing; keeps finished ranges
 * for resume; records through m; counts and per-file errors into res.
 * See docs/internals.md, "How sched_run moves files".  Returns 0 when
 * every action was tried (failures counted in res), BM_EDB (a batch not
 * recorded), BM_ENOSPC (in flight abandoned, finished committed),
 * BM_EINTR (stopped by a signal), BM_ENOMEM, or the transport's error.
 */
int	sched_run(const struct sched_opts *o, struct xfer *x, struct store *s,
	    struct manifest *m, struct action *acts, size_t n,
	    struct mirror_result *res);

/*
 * Backoff before retry number attempt (1-based), in nanoseconds:
 * 0.5 s doubling per attempt up to 60 s, plus up to 50% jitter; at least
 * retry_after seconds (capped at 10 minutes) when it is >= 0.
 */
int64_t	sched_backoff_ns(unsigned attempt, long retry_after);

#endif
