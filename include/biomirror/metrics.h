/*
 * Metrics: the metrics_file key.  After each run (not a dry run, not a
 * run that found the lock taken) the mirror's gauges, labelled
 * mirror="NAME", replace its samples in a Prometheus textfile shared with
 * other mirrors, under an flock of PATH.lock, by temp file and rename.
 * See docs/internals.md, "The metrics file".
 */
#ifndef BIOMIRROR_METRICS_H
#define BIOMIRROR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_MAX_FILE	(16 * 1024 * 1024)	/* bytes of an old file read */

/* What one run of one mirror tells the metrics. */
struct metrics_run {
	const char	*mirror;	/* borrowed: mirror name (label value) */
	int64_t		 end_ns;	/* wall clock at the run's end, ns since the epoch */
	double		 seconds;	/* duration of the run */
	int		 ok;		/* 1 when the run's status is "ok" */
	int		 exit_code;	/* DESIGN.md exit status of this mirror's run */
	int64_t		 listed, fetched, touched, deleted, failed;	/* file counts */
	uint64_t	 bytes;		/* bytes fetched */
	int64_t		 last_success_ns; /* end of the newest ok run (this one
					   * included), 0 if none, -1 unknown:
					   * keep the value the file holds */
	const char *const *mirrors;	/* borrowed: names of the mirrors in
					   the config (their samples are
					   kept), NULL = keep every mirror's */
	size_t		 nmirrors;	/* entries in mirrors */
};

/*
 * Make the new content of a metrics file: old[0..oldlen) is the file as
 * it was (NULL/0 for none; borrowed), r the run to record; which lines
 * are kept, replaced or dropped, in what order: docs/internals.md, "The
 * metrics file".  *ret is malloc'd (NUL-terminated, *retlen bytes without
 * the NUL).  Returns 0 or BM_ENOMEM.
 */
int	metrics_merge(const char *old, size_t oldlen,
	    const struct metrics_run *r, char **ret, size_t *retlen);

/*
 * Record run r in the metrics file at path (absolute; borrowed): lock
 * PATH.lock (blocking flock; held only while the file is rewritten),
 * read the file, metrics_merge(), write a temp file beside it (mode
 * 0644), fsync it, rename it over path, fsync the directory.  Returns 0;
 * BM_EIO with "PATH: operation: strerror" in errbuf (errlen bytes);
 * BM_ELIMIT when the old file is larger than METRICS_MAX_FILE; BM_ENOMEM.
 * Needs write access to path's directory.
 */
int	metrics_write(const char *path, const struct metrics_run *r,
	    char *errbuf, size_t errlen);

#endif
