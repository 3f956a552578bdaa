/*
 * The manifest: the only SQLite connection (DESIGN.md).  One database file
 * per mirror records what upstream said of each path (listed size and
 * mtime with their precision, exact size/mtime/ETag from the GET), what
 * was committed locally (size, mtime), the runs and per-file events.  The
 * diff of a new listing against it is SQL over a staging table.  Paths are
 * stored as BLOBs (bytes, never re-encoded).  This module never logs; it
 * returns BM_E* codes and fills the caller's error buffer.
 */
#ifndef BIOMIRROR_MANIFEST_H
#define BIOMIRROR_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "biomirror/file_state.h"
#include "biomirror/listing.h"

struct manifest;

/*
 * Open the manifest at path (a file name; its directory must exist).  With
 * create, a missing file is made with the current schema and an older one
 * migrated; without, a missing file is BM_ENOENT.  Every open runs PRAGMA
 * quick_check, unless the file is byte for byte what a close of ours
 * that found it sound left, within a week of a full check (the check
 * stamp: docs/internals.md).  Returns 0, BM_ENOENT, BM_ECORRUPT (damaged), BM_ENOSPC or
 * BM_EDB, with "PATH: reason" in errbuf; which failure is which, and the
 * -wal set aside: docs/internals.md, "Opening the manifest".  *ret is
 * freed with manifest_close().
 */
int	manifest_open(const char *path, bool create, struct manifest **ret,
	    char *errbuf, size_t errlen);
/*
 * manifest_open() for a sync run: where the file allows (a WAL header,
 * the current schema, no -wal left before), the quick_check runs in a
 * thread beside the run instead of before the open returns.  Until
 * manifest_check_join() says the file is sound, writes stay in the -wal
 * (nothing is checkpointed into the file), so the caller may record the
 * run and list upstream, but must join before it acts on the mirror.
 * Found damaged, manifest_close() removes the -wal and -shm the open made
 * and the file is left byte for byte.
 */
int	manifest_open_run(const char *path, bool create, struct manifest **ret,
	    char *errbuf, size_t errlen);
/*
 * Wait for manifest_open_run()'s check: 0 (sound, or nothing deferred),
 * BM_ECORRUPT with the fault in manifest_errmsg(), or BM_EDB.  The same
 * answer again on a later call; manifest_close() joins too.
 */
int	manifest_check_join(struct manifest *m);
/*
 * Open an existing manifest for reading only (status, ls, history), as
 * manifest_open(path, false, ...) does, but also where this process may
 * not write it or the disk is full (docs/internals.md, "Opening the
 * manifest").  An older schema is read as it is, never migrated (what
 * it lacks reads as none: no zones, no transports); a PATH-wal is left
 * as it is.  Returns as manifest_open().
 */
int	manifest_open_read(const char *path, struct manifest **ret,
	    char *errbuf, size_t errlen);
/*
 * manifest_open() that reads an older schema as it is and never
 * migrates it (a dry run: plan); a write the old schema lacks a table
 * or column for fails with BM_EDB.
 */
int	manifest_open_as_is(const char *path, bool create,
	    struct manifest **ret, char *errbuf, size_t errlen);
/*
 * A new, empty manifest of the current schema in memory, never written
 * to disk (a dry run of a rebuild plans against it).  0, BM_ENOMEM or
 * BM_EDB with the reason in errbuf.
 */
int	manifest_open_scratch(struct manifest **ret, char *errbuf,
	    size_t errlen);
/*
 * What the open of m found that the caller should warn about ("" none;
 * borrowed): a PATH-wal that cannot be read, its commits lost to this
 * manifest; a reader (manifest_open_read) leaves that -wal as it is, a
 * writer keeps a copy of it (named in the text).
 */
const char *manifest_warning(const struct manifest *m);
/*
 * The highest run id that the (maybe damaged) manifest file at path
 * records, read from the file alone without writing anything, into
 * *ret_id (0: no run).  0, or BM_ECORRUPT / BM_ENOMEM when it cannot be
 * read.
 */
int	manifest_peek_last_run(const char *path, int64_t *ret_id);
/*
 * Number m's new runs from next on (the manifest's own next id when
 * higher): a rebuilt manifest carries on the old one's run ids.
 */
void	manifest_run_ids_from(struct manifest *m, int64_t next);
/*
 * How many times SQLite compiled m's statements again since the open (a
 * schema or connection flag change expires them all): 0 on a connection
 * set up once.  For tests.
 */
int64_t	manifest_reprepares(const struct manifest *m);
/* Close the connection (finalizing every statement).  NULL is a no-op. */
void	manifest_close(struct manifest *m);
/* Last error text of the connection ("" if none); borrowed. */
const char *manifest_errmsg(const struct manifest *m);
/*
 * Is every files row's path a BLOB of a safe relative path (no NUL, no
 * "..", not absolute or empty), as only another program writes one?  A
 * scan of the table, made once per connection (the integrity check at
 * the open makes it; resync --adopt asks after its open, which may not
 * have checked).  0, BM_ECORRUPT with the fault in manifest_errmsg(),
 * or BM_EDB.
 */
int	manifest_check_paths_all(struct manifest *m);
/*
 * What the failures of m so far say of its file: BM_ECORRUPT once SQLite
 * found it damaged, else BM_ENOSPC once it found the disk (or quota)
 * full, else 0.  Statements themselves fail with BM_EDB.
 */
int	manifest_fault(const struct manifest *m);
/*
 * Move the (damaged) manifest at path and its -wal and -shm aside, as
 * PATH.corrupt-YYYYMMDDTHHMMSSZ (UTC; kept, never removed); the name
 * into ret_name (len bytes).  No connection may be open on it.  0, or
 * BM_ELIMIT or BM_EIO with "PATH: reason" in errbuf.
 */
int	manifest_set_aside(const char *path, char *ret_name, size_t len,
	    char *errbuf, size_t errlen);
/*
 * Set how long a statement waits for another connection's lock, in ms
 * (open sets 5000); past it the call fails with BM_EDB.  0 or BM_EDB.
 */
int	manifest_set_busy_timeout(struct manifest *m, int ms);

/* ---- runs ---- */

#define RUN_NETS_MAX	4	/* transports recorded per run */

/* What one transport carried in a run (fetched files only). */
struct run_net {
	char		 net[8];	/* "tcp", "udt" */
	int64_t		 files;		/* files it carried */
	int64_t		 bytes;		/* their bytes received */
	int64_t		 ns;		/* time with one of them in flight */
};

struct run_record {
	int64_t		 id;		/* run id (rowid) */
	char		 command[16];	/* "sync", "plan", "resync" */
	int64_t		 start_ns;	/* wall clock, ns since epoch */
	int64_t		 end_ns;	/* 0 while running */
	char		 status[12];	/* ok, partial, failed, refused, locked,
					 * running, interrupted (died unrecorded) */
	int64_t		 listed, fetched, touched, deleted, failed;	/* counts */
	int64_t		 bytes;		/* bytes fetched */
	char		 error[1024];	/* first error, "" if none (the column
					   is unbounded; sync's r->err fits) */
	struct run_net	 nets[RUN_NETS_MAX]; /* per transport, by name */
	size_t		 nnets;		/* entries of nets used */
};

/*
 * Record the start of a run; *ret_id is the new run id.  The caller holds
 * the run lock: runs still "running" (their process died) are marked
 * "interrupted" first.
 */
int	manifest_run_begin(struct manifest *m, const char *command,
	    int64_t start_ns, int64_t *ret_id);
/*
 * Record the end of run r->id with r's counts, status, end time and
 * per-transport figures (nets), in one transaction.
 */
int	manifest_run_end(struct manifest *m, const struct run_record *r);
/*
 * The newest max runs, newest first, into a malloc'd array *ret of *ret_n
 * records (free()).  Returns 0 (possibly with *ret_n == 0) or BM_EDB.
 */
int	manifest_runs(struct manifest *m, size_t max, struct run_record **ret,
	    size_t *ret_n);
/* The newest run with status "ok" into *ret; BM_ENOENT if none. */
int	manifest_last_success(struct manifest *m, struct run_record *ret);

/* The time zone of one upstream host, as a run learnt or checked it. */
struct zone_rec {
	char		 host[256];	/* "scheme://host[:port]" */
	int32_t		 offset;	/* listed times' offset, s east of UTC */
	bool		 mdtm_local;	/* MDTM answers in that zone too */
	int64_t		 learnt_ns;	/* when offset was last set (changed) */
	int64_t		 checked_ns;	/* when a run last checked it */
};
/* The record of host into *ret.  0, BM_ENOENT (none) or BM_EDB. */
int	manifest_zone_get(struct manifest *m, const char *host,
	    struct zone_rec *ret);
/* Write (replace) the record z->host.  0 or BM_EDB. */
int	manifest_zone_put(struct manifest *m, const struct zone_rec *z);
/* Called per zone record; a non-zero return stops the walk. */
typedef int (*manifest_zone_fn)(void *ctx, const struct zone_rec *z);
/* Every zone record, by host.  0, the callback's value, or BM_EDB. */
int	manifest_zones(struct manifest *m, manifest_zone_fn fn, void *ctx);

/* ---- staging and diff ---- */

/*
 * Replace the staging table with the entries of l (one transaction).
 * Entry mtimes must be resolved (listing_resolve_times) first.
 */
int	manifest_stage(struct manifest *m, const struct listing *l);
/*
 * The same in batches, as a crawl hands them on: manifest_stage_begin
 * empties staging, each manifest_stage_add adds l's entries (one
 * transaction each; a path staged already keeps its first entry, so
 * batches in listing order stage what manifest_stage of the whole
 * listing would).  0 or BM_EDB.
 */
int	manifest_stage_begin(struct manifest *m);
int	manifest_stage_add(struct manifest *m, const struct listing *l);
/*
 * Drop the staged direct children of directory prefix ("" the root):
 * its page failed after some were staged.  0, BM_ENOMEM or BM_EDB.
 */
int	manifest_stage_drop(struct manifest *m, const char *prefix);
/* Number of staged paths (after duplicates were dropped).  0 or BM_EDB. */
int	manifest_staged_count(struct manifest *m, int64_t *ret);
/* A staged row as manifest_staged_walk lends it. */
struct staged_row {
	const char	*path;		/* borrowed until the callback returns */
	size_t		 pathlen;	/* bytes in path */
	enum entry_type	 type;		/* ENTRY_DIR or ENTRY_FILE */
	int64_t		 mtime;		/* ns, UTC; 0 when prec is unknown */
	enum mtime_prec	 prec;		/* listed precision */
	const char	*checksum;	/* "ALG:HEX" the listing states, NULL
					   if none (borrowed) */
};
typedef int (*manifest_staged_fn)(void *ctx, const struct staged_row *r);
/*
 * Walk the staged directories with a known mtime and (files) every
 * staged file, in path order.  0, fn's non-zero value, or BM_EDB.
 */
int	manifest_staged_walk(struct manifest *m, bool files,
	    manifest_staged_fn fn, void *ctx);

enum diff_kind {
	DIFF_NEW = 0,	/* not in the manifest, or never committed */
	DIFF_CHANGED,	/* listed size, mtime or type differ from what was recorded */
	DIFF_UNKNOWN,	/* listing shows neither size nor mtime, or its minute
			   (day) had not ended when the file was recorded:
			   conditional GET */
	DIFF_SAME,	/* listing unchanged: the planner still checks the local file */
	DIFF_GONE,	/* in the manifest, not in the listing */
};

struct diff_row {
	const char	*path;		/* borrowed until the callback returns */
	size_t		 pathlen;	/* bytes in path */
	enum diff_kind	 kind;
	enum entry_type	 type;		/* listed type; recorded type for DIFF_GONE */
	struct file_state fs;		/* listed: staged; upstream: the last
					   GET; local: committed (-1 if none) */
	const char	*target;	/* staged symlink target or NULL (borrowed) */
	bool		 recorded;	/* the manifest has a committed row */
	struct listed_state rec_listed;	/* the listing it recorded, when
					   recorded */
	enum entry_type	 rec_type;	/* type committed; the listed type
					   when not recorded */
	const char	*etag;		/* ETag from the last GET, NULL if none (borrowed) */
	const char	*checksum;	/* recorded "ALG:HEX" digest, NULL if none (borrowed) */
};

/* Called once per diff row; a non-zero return stops the walk and is returned. */
typedef int (*manifest_diff_fn)(void *ctx, const struct diff_row *row);
/*
 * Walk the diff of the staging table against the manifest, in path order:
 * one row per staged path, then one DIFF_GONE row per committed path that
 * is not staged.  Returns 0, the callback's non-zero value, or BM_EDB.
 */
int	manifest_diff(struct manifest *m, manifest_diff_fn fn, void *ctx);
/* Number of committed paths of type file into *ret. */
int	manifest_file_count(struct manifest *m, int64_t *ret);

/* ---- commits ---- */

/*
 * files.sidecar of content committed without the check a sidecar could
 * have made (verify = size, or a sidecar that may cover it could not be
 * fetched): a later run with verify = sidecar | checksum hashes it.
 */
#define MANIFEST_SIDECAR_UNCHECKED	"unchecked"

enum commit_op {
	COMMIT_FETCHED = 0,	/* new content committed under its final name */
	COMMIT_NOT_MODIFIED,	/* conditional GET said 304: record listing values */
	COMMIT_TOUCHED,		/* only the local mtime was set */
	COMMIT_MKDIR,		/* a directory exists locally */
	COMMIT_SYMLINK,		/* a symlink was created */
	COMMIT_DELETED,		/* removed locally (row deleted) */
	COMMIT_FAILED,		/* an error; row kept as it was, event recorded */
	COMMIT_VANISHED,	/* listed but 404/410 on GET: reported, not deleted */
	COMMIT_ADOPTED,		/* an existing local file matching the listing, recorded */
	COMMIT_DIGEST,		/* checksum recorded for a row that had none
				   (resync --checksum); nothing else changes */
	COMMIT_RELEASED,	/* gone upstream, but the local file is not the
				   one committed: kept, row deleted */
	COMMIT_SIDECAR,		/* the local file was hashed against its
				   published digests: record sidecar (required;
				   "" when it matched none; a match drops the
				   path's mismatch); nothing else changes */
	COMMIT_MISMATCH,	/* a failure (row kept as it was, event
				   "failed"): upstream's body (digest checksum)
				   kept failing the published sidecar; both and
				   the validators go into mismatches */
};

struct commit_rec {
	const char	*path;		/* borrowed: relative path */
	enum commit_op	 op;
	enum entry_type	 type;
	struct file_state fs;		/* what to record: listed (as staged),
					   upstream (the GET), local (-1 n/a) */
	const char	*etag;		/* borrowed, NULL if none */
	const char	*target;	/* borrowed: symlink target, NULL if none */
	int64_t		 bytes;		/* bytes transferred for this file */
	const char	*checksum;	/* borrowed: FETCHED (or ADOPTED, NOT_MODIFIED:
					   kept when NULL; DIGEST: required)
					   content's "ALG:HEX", NULL if none */
	const char	*sidecar;	/* borrowed: FETCHED, SIDECAR: the published
					   digests the content matched
					   (sidecar_sum_text), NULL if none,
					   MANIFEST_SIDECAR_UNCHECKED;
					   MISMATCH: those it failed */
	const char	*reason;	/* borrowed: failure reason, NULL if none */
	const char	*net;		/* borrowed: FETCHED: the transport
					   that carried it ("tcp", "udt"),
					   NULL if none */
};

/*
 * Record a batch of outcomes of run in one transaction: upsert/delete the
 * file rows and append one event per record.  Returns 0 or BM_EDB (then
 * nothing of the batch is recorded).
 */
int	manifest_commit(struct manifest *m, int64_t run,
	    const struct commit_rec *recs, size_t n);

/*
 * Before a batch's renames: record the n files it is about to publish
 * (recs borrowed: path, fs.listed, fs.local), in one transaction of their own.
 * manifest_commit() drops each path's intent with its FETCHED or FAILED
 * record.  A run killed between the renames and that transaction leaves
 * its intents: the next run learns from them which files it published
 * (manifest_intents()), instead of taking them for files it never
 * committed.  Returns 0 or BM_EDB.
 */
int	manifest_intent(struct manifest *m, const struct commit_rec *recs,
	    size_t n);

/*
 * Called with each intent left (a commit_rec: op COMMIT_ADOPTED, type
 * ENTRY_FILE, the recorded fields; fs.upstream -1; strings valid
 * during the call only); a non-zero return stops the walk.
 */
typedef int (*manifest_intent_fn)(void *ctx, const struct commit_rec *c);
/* Walk the intents left in path order.  0, fn's value, or BM_EDB. */
int	manifest_intents(struct manifest *m, manifest_intent_fn fn, void *ctx);
/* Drop every intent.  0 or BM_EDB. */
int	manifest_intents_clear(struct manifest *m);

/* ---- reading ---- */

struct file_row {
	const char	*path;		/* borrowed until the callback returns */
	size_t		 pathlen;
	enum entry_type	 type;
	struct file_state fs;		/* as recorded */
	const char	*etag;		/* NULL if none */
	int64_t		 seen_run, fetched_run;
	int64_t		 fetched_end_ns; /* manifest_ls: end of run fetched_run
					   (ns), 0 unfinished; -1 unknown */
	const char	*target;	/* borrowed: symlink target or NULL */
	const char	*checksum;	/* borrowed: recorded "ALG:HEX" digest or NULL */
	const char	*sidecar;	/* borrowed: published digests the content
					   last matched, "" none,
					   MANIFEST_SIDECAR_UNCHECKED, NULL
					   unknown */
};
typedef int (*manifest_file_fn)(void *ctx, const struct file_row *row);
/*
 * Walk the committed rows whose path is prefix or lies under prefix/
 * (prefix "" or NULL for all), in path order.
 */
int	manifest_ls(struct manifest *m, const char *prefix,
	    manifest_file_fn fn, void *ctx);
/*
 * Walk the rows whose sidecar is MANIFEST_SIDECAR_UNCHECKED, in path
 * order.  Returns 0, fn's non-zero value or BM_EDB.
 */
int	manifest_ls_unchecked(struct manifest *m, manifest_file_fn fn,
	    void *ctx);

struct event_row {
	int64_t		 run;
	const char	*path;		/* borrowed */
	const char	*op;		/* "fetched", "touched", "deleted", "failed", ... */
	const char	*reason;	/* NULL if none */
	int64_t		 bytes;
	int64_t		 time_ns;
	const char	*net;		/* borrowed: transport that carried a
					   fetched file, NULL if none */
};
typedef int (*manifest_event_fn)(void *ctx, const struct event_row *row);
/* Walk the events of one run in order. */
int	manifest_events(struct manifest *m, int64_t run,
	    manifest_event_fn fn, void *ctx);

/* ---- partial files (resume across runs) ---- */

#define MANIFEST_MAX_RANGES	128	/* finished ranges per partial file */

/* A temp file being fetched and the byte ranges of it already durable. */
struct partial_rec {
	const char	*path;		/* borrowed: relative path of the target */
	const char	*tmpname;	/* borrowed: temp file name beside it; NULL: drop */
	int64_t		 size;		/* exact listed size, bytes */
	int64_t		 list_mtime;	/* listed mtime when started, ns */
	int64_t		 up_mtime;	/* Last-Modified of the bytes held, ns, -1 unknown */
	const char	*etag;		/* borrowed: ETag of the bytes held, NULL if none */
	const uint64_t	*ranges;	/* borrowed: nranges pairs [start, end) */
	size_t		 nranges;	/* 0..MANIFEST_MAX_RANGES */
};

/*
 * Record or drop (tmpname NULL) n partial rows of run in one
 * transaction; the ranges' bytes must already be durable (fdatasync).
 * FETCHED, NOT_MODIFIED, DELETED, RELEASED and VANISHED commits drop the
 * row of their path.  Returns 0, BM_EINVAL, BM_ENOMEM or BM_EDB.
 */
int	manifest_partials_put(struct manifest *m, int64_t run,
	    const struct partial_rec *recs, size_t n);
typedef int (*manifest_partial_fn)(void *ctx, const struct partial_rec *row);
/*
 * Walk the partial rows in path order (strings and ranges borrowed until
 * fn returns; undecodable ranges give nranges 0).  Returns 0, fn's value
 * or BM_EDB.
 */
int	manifest_partials(struct manifest *m, manifest_partial_fn fn,
	    void *ctx);

/* ---- checksum mismatches (upstream's body fails its sidecar) ---- */

/* A file whose fetched body twice gave the same digest, not the published one. */
struct mismatch_rec {
	const char	*path;		/* borrowed */
	struct file_state fs;		/* listed when it failed, upstream
					   from the GET; local -1 */
	const char	*etag;		/* NULL if none */
	const char	*want;		/* the published digests (sidecar_sum_text) */
	const char	*got;		/* the body's "ALG:HEX" */
	int64_t		 run;		/* the run that recorded it */
};
typedef int (*manifest_mismatch_fn)(void *ctx, const struct mismatch_rec *r);
/*
 * Walk the mismatches in path order (COMMIT_MISMATCH records them;
 * FETCHED of checked content, ADOPTED, DELETED, RELEASED and VANISHED
 * drop the path's).
 * Returns 0, fn's value or BM_EDB.
 */
int	manifest_mismatches(struct manifest *m, manifest_mismatch_fn fn,
	    void *ctx);

#endif
