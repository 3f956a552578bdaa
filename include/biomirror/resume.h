/*
 * Resume: the finished byte ranges of temp files, kept across tries and
 * runs (DESIGN.md).  resume_prepare() keeps the partial rows the plan
 * fetches again unchanged and removes the rest; a recorded range is
 * always durable (fdatasync first); a later try asks only for the gaps,
 * with If-Range.  See docs/internals.md, "Resume".
 */
#ifndef BIOMIRROR_RESUME_H
#define BIOMIRROR_RESUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct manifest;
struct store;
struct action;
struct partial_rec;

#define RESUME_MIN_SIZE		(1024 * 1024)	/* bytes: smaller files restart */
#define RESUME_MAX_RANGES	128		/* = MANIFEST_MAX_RANGES */
#define RESUME_MAX_HELD		(1024 * 1024)	/* ranges in memory */

struct resume_set;
struct resume_file;

/*
 * Match the manifest's partial rows against the fetch actions among
 * acts[0..n) (borrowed): a row is kept when its path is fetched with an
 * exact listed size and the same listed mtime as recorded, and holds a
 * strong validator (ETag not W/, or Last-Modified).  Other rows are
 * dropped (one transaction); then every temp file in the destination but
 * the kept ones is removed (*ret_removed counts them, *ret_kept the
 * kept).  *ret (resume_set_free) is borrowed by resume_file_new().
 * Returns 0, BM_ENOMEM or BM_EDB (manifest_errmsg() says why).
 */
int	resume_prepare(struct manifest *m, struct store *s,
	    const struct action *acts, size_t n, struct resume_set **ret,
	    size_t *ret_kept, size_t *ret_removed);
/* Free a set.  NULL is a no-op. */
void	resume_set_free(struct resume_set *rs);

/*
 * The resume state of path (borrowed, copied) of exact size bytes listed
 * with mtime list_mtime (ns): with the kept row of set (may be NULL), if
 * any.  Returns NULL on out-of-memory.
 */
struct resume_file *resume_file_new(const struct resume_set *set,
	    const char *path, int64_t size, int64_t list_mtime);
void	resume_file_free(struct resume_file *rf);
/* Temp file name of a kept row to reopen, or NULL (borrowed). */
const char *resume_file_tmpname(const struct resume_file *rf);
/*
 * The kept temp file was reopened with length bytes (ok) or could not be
 * (!ok): on failure, or when it is shorter than the recorded ranges, the
 * ranges are forgotten and the file starts over.  Returns true when the
 * ranges are kept.  Thread: may run on a worker while the loop leaves rf
 * alone (the file is being opened).
 */
bool	resume_file_reopened(struct resume_file *rf, bool ok,
	    uint64_t length);
/*
 * Bytes [off, off+len) were written.  Returns 0, BM_ENOMEM, or BM_ELIMIT
 * (more than RESUME_MAX_HELD separate ranges); on failure the ranges
 * held are unchanged.
 */
int	resume_file_add(struct resume_file *rf, uint64_t off, uint64_t len);
/*
 * A response is about to write its first byte: etag ("" none), mtime
 * (Last-Modified, s, -1 none) and total (Content-Range total, -1 none)
 * must agree with the bytes held; the first response sets them.  Returns
 * 0, or BM_ECHANGED with the reason in errbuf.
 */
int	resume_file_check(struct resume_file *rf, const char *etag,
	    int64_t mtime, int64_t total, char *errbuf, size_t errlen);
/*
 * The bytes held came with no validator (no ETag, no MDTM time): take
 * etag ("" none) and mtime (s, -1 none) from a later check of the same
 * version as theirs.  No-op when validators are already known.
 */
void	resume_file_validators(struct resume_file *rf, const char *etag,
	    int64_t mtime);
/* Bytes held (the ranges' total length). */
uint64_t resume_file_covered(const struct resume_file *rf);
/*
 * True when the bytes held can be continued: some are held and a strong
 * validator for If-Range is known.
 */
bool	resume_file_usable(const struct resume_file *rf);
/* The If-Range value (strong ETag, else HTTP-date); "" if none. */
const char *resume_file_if_range(const struct resume_file *rf);
/*
 * The missing ranges as pairs [start, end) into gaps (max pairs), in
 * order; returns how many (0 when complete, max + 1 when there are more).
 */
size_t	resume_file_gaps(const struct resume_file *rf, uint64_t *gaps,
	    size_t max);
/*
 * Start over: forget ranges and validators; a recorded row is dropped at
 * the next record.
 */
void	resume_file_reset(struct resume_file *rf);
/*
 * Bytes an earlier run kept under a bm:// validator ("bm-SIZE-MTIME" and
 * "-sha256:HEX" when the listing stated a digest) are continued only
 * when digest (the one listed now, "" none) is the same: else the
 * ranges are dropped (the temp file goes when reopened) and false.
 */
bool	resume_file_same_digest(struct resume_file *rf, const char *digest);
/* True when the manifest holds a row for this file (keep its temp file). */
bool	resume_file_in_manifest(const struct resume_file *rf);
/*
 * Whether a record is due: a drop, or at least min_new bytes more held
 * than when last recorded (any more when min_new is 0) with a strong
 * validator.
 */
bool	resume_file_due(const struct resume_file *rf, uint64_t min_new);
/*
 * Fill *ret with a record of rf's current ranges in temp file tmpname
 * (borrowed; NULL when it could not be made durable), or with a drop of
 * the row when the file started over.  Past RESUME_MAX_RANGES ranges the
 * record holds the largest ones: fewer bytes than held, never more.  The
 * record borrows rf's snapshot until resume_file_recorded() or the next
 * call.  Returns false when there is nothing to write (tmpname NULL and
 * no drop pending).
 */
bool	resume_file_record(struct resume_file *rf, const char *tmpname,
	    struct partial_rec *ret);
/* The last record is in the manifest (ok) or was not written (!ok). */
void	resume_file_recorded(struct resume_file *rf, bool ok);

#endif
