/*
 * Reporting: the result of one mirror run (counts, status, per-file
 * errors), its one-line summary, and the --json array (DESIGN.md
 * "--json").  JSON is written with jansson; names that are not valid
 * UTF-8 are escaped (see text_utf8_escape(), text.h), never dropped.
 */
#ifndef BIOMIRROR_REPORT_H
#define BIOMIRROR_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define REPORT_MAX_ERRORS	10000	/* errors kept per run; more are counted */

struct report_error {
	char		*path;		/* owned */
	char		*op;		/* owned: "fetch", "list", "delete", ... */
	char		*reason;	/* owned */
	char		*mirror;	/* owned: the mirror it belongs to, when
					   the result is of no mirror (a config
					   file's errors); NULL if none */
};

/* One planned action of a plan (--json "actions"). */
struct report_action {
	char		*path;		/* owned */
	const char	*op;		/* static: "fetch", "delete", ... */
	int64_t		 bytes;		/* bytes it moves, -1 unknown */
	const char	*reason;	/* static: "new", "gone upstream" */
};

/* The transports that carry files, in the order shown. */
enum report_net {
	REPORT_NET_TCP = 0,
	REPORT_NET_UDT,
	REPORT_NETS
};

/* What one transport carried in a run (fetched files only). */
struct report_net_use {
	int64_t		 files;		/* files it carried */
	uint64_t	 bytes;		/* their bytes received */
	double		 seconds;	/* time with one of them in flight */
};

struct mirror_result {
	char		*mirror;	/* owned: mirror name, NULL for errors of
					   no mirror (status "error") */
	int64_t		 run;		/* run id, 0 if none was recorded */
	const char	*status;	/* static: ok, partial, failed, refused,
					   locked, or error (not run: config
					   errors in errors[]) */
	int		 exit_code;	/* DESIGN.md exit status for this mirror */
	int64_t		 listed, fetched, touched, deleted, failed;
	int64_t		 adopted;	/* resync --adopt: recorded without a fetch */
	char		*kept_manifest;	/* owned: resync --adopt of a damaged
					   manifest: where it was moved (it
					   keeps the old run history), NULL */
	int64_t		 digest_recorded; /* resync --checksum: files whose
					   SHA-256 was recorded without a fetch
					   (they had no recorded digest) */
	bool		 verify;	/* a verify run: the two counts below apply */
	int64_t		 digest_checked; /* verify: files hashed against a
					   recorded or sidecar digest */
	int64_t		 size_only;	/* verify: files with no digest to
					   compare: size and mtime checked only */
	int64_t		 checks;	/* plan: of fetched, the checks (fetched
					   only if changed) */
	int64_t		 unsized;	/* plan: files to fetch whose size the
					   listing does not give */
	uint64_t	 bytes;		/* bytes fetched */
	double		 seconds;	/* wall time of the run */
	bool		 dry_run;	/* a plan, nothing changed */
	int		 post_sync_status; /* exit status of the post_sync hook
					   * (128 + signal), -1 if it did not run */
	bool		 tuned;		/* concurrency or streams = auto: the
					   four values below apply */
	unsigned	 tuned_concurrency; /* files in flight chosen */
	unsigned	 tuned_streams;	/* ranges per large file chosen */
	double		 tuned_rtt_ms;	/* median RTT measured, -1 unknown */
	double		 tuned_conn_rate; /* bytes/s per connection, 0 unknown */
	struct report_net_use nets[REPORT_NETS]; /* per transport */
	struct report_error *errors;	/* owned */
	size_t		 nerrors, cap;
	struct report_action *actions;	/* owned: a plan's actions, NULL
					   if none were collected */
	size_t		 nactions, actions_cap;
	size_t		 nerrors_dropped; /* past REPORT_MAX_ERRORS */
};

/* New result for mirror name (copied; may be NULL).  NULL on ENOMEM. */
struct mirror_result *result_new(const char *name);
/* Free a result.  NULL is a no-op. */
void	result_free(struct mirror_result *r);
/*
 * Record one error (strings copied).  Past REPORT_MAX_ERRORS only the
 * count grows.  Returns 0 or BM_ENOMEM.
 */
int	result_add_error(struct mirror_result *r, const char *path,
	    const char *op, const char *reason);
/*
 * result_add_error(), naming the mirror the error belongs to (copied;
 * NULL: none), for a result that holds several mirrors' errors.
 */
int	result_add_mirror_error(struct mirror_result *r, const char *mirror,
	    const char *path, const char *op, const char *reason);
/*
 * Add one planned action (path copied; op and reason are static strings,
 * borrowed).  Returns 0 or BM_ENOMEM.
 */
int	result_add_action(struct mirror_result *r, const char *path,
	    const char *op, int64_t bytes, const char *reason);
/* "tcp", "udt"; "?" for a value out of range. */
const char *report_net_name(unsigned n);
/*
 * Print the one-line summary ("blast: ok: listed 120, fetched 3, touched
 * 0, deleted 0, failed 0, 4.2 MiB in 1.3 s (3.2 MB/s); udt 3 files, 4.2
 * MiB in 1.1 s (3.8 MB/s)": each transport that carried files, with its
 * rate over the time it had one in flight) to fp; for status "error",
 * "blast: error: not run (2 errors)".
 */
void	report_summary(const struct mirror_result *r, FILE *fp);
/*
 * Print the --json array of results[0..n) to fp, one object per mirror
 * run with the DESIGN.md fields and those listed in docs/internals.md,
 * "The --json fields beyond DESIGN.md".  Returns 0 or BM_ENOMEM.
 */
int	report_json(struct mirror_result *const *results, size_t n, FILE *fp);
/*
 * The process's peak resident set so far in KiB (getrusage ru_maxrss:
 * every mirror of the process so far), -1 if unknown: --json's
 * peak_rss_kib.
 */
int64_t	report_peak_rss_kib(void);
/* "4.2 MiB" (or "300 B") for b bytes into buf (len bytes).  Never fails. */
void	report_human_bytes(uint64_t b, char *buf, size_t len);
/*
 * A duration of secs seconds into buf, exact to the second: "0.4s" (under
 * 10 s), "45s", "9m19s", "1h59m59s", "2h", "7d"; units that are 0 at the
 * end are left out.  Never fails.
 */
void	report_duration(double secs, char *buf, size_t len);
/*
 * The rate of b bytes in secs seconds into buf: "3.8 MB/s" from 1 MB/s,
 * "4.9 KB/s" from 1 kB/s, else "300 B/s" (decimal units; "0 B/s" when
 * secs is not above 0).  Never fails.
 */
void	report_rate(uint64_t b, double secs, char *buf, size_t len);
/*
 * The JSON object of one result as report_json() prints it (a new
 * reference, NULL on out-of-memory).  A result with status "error" is
 * {"mirror" (when named), "status": "error", "errors": [{path, op,
 * reason}]}.
 */
struct json_t;
struct json_t *report_result_json(const struct mirror_result *r);

/*
 * The live progress line: one line on stderr, redrawn in place ("\r")
 * at most every 500 ms, with files and bytes done of the total, the rate
 * and the ETA.  Only on a terminal, never under the journal.
 */
struct progress;

/*
 * Make a progress line for a run of total_files files and total_bytes
 * bytes (0 if unknown): the whole plan, one total across the
 * scheduler's passes (sidecars first, then data).  enabled false (or stderr not a terminal, or
 * JOURNAL_STREAM set) makes every call a no-op.  NULL on out-of-memory.
 */
struct progress *progress_new(const char *name, int64_t total_files,
	    uint64_t total_bytes, bool enabled);
/*
 * A file came over transport n (enum report_net): the line names the
 * transports that carried files so far (", over udt"), redrawn at the
 * next update when that is a new one.
 */
void	progress_net(struct progress *p, unsigned n);
/*
 * Report the files done (complete: fetched, or unchanged upstream) and
 * bytes done (partial files too) of the current pass so far; the line
 * shows them added to those of the passes that ended.
 */
void	progress_update(struct progress *p, int64_t files_done,
	    uint64_t bytes_done);
/* The current pass ended: what it last reported stays counted. */
void	progress_pass_end(struct progress *p);
/* Erase the line and free p.  NULL is a no-op. */
void	progress_free(struct progress *p);

#endif
