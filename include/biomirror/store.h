/*
 * The store: the only code that writes inside the destination tree
 * (DESIGN.md).  The destination is opened once as a directory fd and every
 * operation is relative to it without following symlinks (openat2
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it, else a
 * component-by-component walk with O_NOFOLLOW).  New content goes to a
 * temp file beside its target (".biomirror-tmp.XXXXXXXX", mode 0600); a
 * batch commit sets mtimes and modes, calls syncfs once, renames, and
 * fsyncs each parent directory once.  Paths passed in must already be
 * valid (path_is_safe); the store checks again and refuses bad ones.
 */
#ifndef BIOMIRROR_STORE_H
#define BIOMIRROR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "biomirror/listing.h"

/* The store's temp-file names (no listed path may use them: listing.h). */
#define STORE_TMP_PREFIX	LISTING_TMP_PREFIX

struct store;
struct store_file;

/*
 * Open (and create with dir_mode if missing, parents included) the
 * destination directory dest.  dest itself may be a symlink to a
 * directory (the admin's choice); symlinks inside it are never followed.
 * file_mode/dir_mode are applied to published files and created
 * directories.  Returns 0, BM_EIO (errno kept: ENOTDIR, EACCES or EROFS
 * when the destination is not a writable directory) or BM_ENOMEM.
 */
int	store_open(const char *dest, mode_t file_mode, mode_t dir_mode,
	    struct store **ret);
/*
 * mkdir -p of dest (a path from the config, followed like store_open's),
 * dest itself getting exactly dir_mode when made here, its parents
 * dir_mode under the umask: what store_open() makes, for a caller that
 * must lock DEST before the store opens it (agent/destlock.c).  Returns
 * 0 or BM_EIO (errno kept).
 */
int	store_make_dest(const char *dest, mode_t dir_mode);
/* Close the destination fd.  Open store_files must be finished first. */
void	store_close(struct store *s);

struct local_stat {
	int		 type;		/* 'f', 'd', 'l' or '?' (other) */
	int64_t		 size;		/* bytes */
	int64_t		 mtime;		/* ns since epoch */
};
/*
 * lstat path relative to the destination, never following symlinks
 * (also in parent components).  Returns 0, BM_ENOENT, BM_EUNSAFE (a
 * parent component is a symlink or not a directory) or BM_EIO.
 */
int	store_stat(struct store *s, const char *path, struct local_stat *ret);

/*
 * Warm the kernel's inode cache for the destination: a thread lstats
 * every entry of the tree (never through a symlink; 16 directory levels
 * deep, one open directory per level) while the run lists
 * upstream, so that the planner's store_stat calls do not each wait for a
 * disk read; until the stop or the first change to the tree, store_stat
 * takes the lstat it kept (up to 65,536) instead of making a second one.
 * Read-only; at most one per store; a second start is a no-op.  Returns
 * 0, BM_ENOMEM, BM_EIO or BM_ELIMIT (no thread); a failure only loses
 * the speed-up.
 */
int	store_prefetch_start(struct store *s);
/*
 * Wait for the prefetch's walk to end, keeping its lstats for store_stat
 * (no-op when none runs).  The run never needs to (store_stat takes
 * what is kept so far); test_store uses it for a walk known to be done.
 */
void	store_prefetch_wait(struct store *s);
/*
 * Stop the prefetch (with finish: once it has walked the whole tree) and
 * join its thread; *ret_n (may be NULL) gets the entries it looked at.
 * Returns 0 (walked it all, to its depth), BM_EINTR (stopped first) or
 * BM_EIO (a directory could not be read).  store_close() stops it too.
 */
int	store_prefetch_stop(struct store *s, bool finish, size_t *ret_n);

/*
 * Create the directory path and any missing parents with dir_mode.  An
 * existing directory is fine; a symlink or file in the way is BM_EUNSAFE.
 */
int	store_mkdirs(struct store *s, const char *path);

/*
 * Create a temp file beside path (its parent directories are created) for
 * new content of expected_size bytes (-1 unknown).  *ret is owned by the
 * caller until store_file_abort() or store_commit().
 * Returns 0, BM_EUNSAFE, BM_EIO, BM_ENOSPC or BM_ENOMEM.
 */
int	store_file_open(struct store *s, const char *path,
	    int64_t expected_size, struct store_file **ret);
/*
 * Write len bytes at byte offset off (pwrite; ranges may arrive in any
 * order).  With write-behind the bytes are copied and queued, and an
 * earlier queued write's first error is returned.  Returns 0, BM_ENOSPC,
 * BM_ENOMEM (write-behind only) or BM_EIO.
 */
int	store_file_write(struct store_file *f, uint64_t off, const void *buf,
	    size_t len);
/*
 * From now on, queue f's writes (copies of at most 256 KiB each, at most
 * 32 MiB per store, then store_file_write waits) to the store's writer
 * threads, started on first use, so that the page-cache copy of a body
 * the event loop receives runs on other cores.  Call it from the thread
 * that writes f.  Idempotent.  0, or BM_ENOMEM (writes stay synchronous).
 */
int	store_file_write_behind(struct store_file *f);
/*
 * Wait until every write queued to f is in its temp file (before reading
 * it back).  0 at once without write-behind; else 0 or the first failed
 * write's BM_ENOSPC or BM_EIO.  store_file_sync, store_commit and the
 * functions that close f drain it themselves.
 */
int	store_file_drain(struct store_file *f);
/*
 * A tap: each range written to f, once in its temp file, is handed to
 * fn(arg, off, bytes, len) on the thread that wrote it (the caller, or
 * the write-behind writer that holds f: one at a time, in the order the
 * writes were made), so that a digest can follow the writes instead of
 * reading them back.  fn NULL: none from now on; once this returns, no
 * call of the old tap is running or to come.  Set it before f's first
 * write, from the thread that writes f.
 */
typedef void (*store_tap_fn)(void *arg, uint64_t off, const uint8_t *p,
	    size_t len);
void	store_file_tap(struct store_file *f, store_tap_fn fn, void *arg);
/* Highest offset written + 1 (bytes), i.e. the file's current length. */
uint64_t store_file_length(const struct store_file *f);
/*
 * A duplicate descriptor of f's temp file, readable, owned by the caller
 * (for hashing what was written, off the event-loop thread).  0 or BM_EIO.
 */
int	store_file_dup(const struct store_file *f, int *ret_fd);
/*
 * Open the regular file path for reading without following symlinks;
 * *ret_fd is the caller's to close; *ret (may be NULL) gets its stat.
 * Returns 0, BM_ENOENT, BM_EUNSAFE (symlink, not a regular file) or BM_EIO.
 */
int	store_open_read(struct store *s, const char *path, int *ret_fd,
	    struct local_stat *ret);
/* Discard the temp file (unlink) and free f.  NULL is a no-op. */
void	store_file_abort(struct store_file *f);
/*
 * Reopen the temp file tmpname beside path, kept by an earlier run, to
 * continue it (resume): a regular file of at most size bytes.  Returns 0,
 * BM_ENOENT, BM_EUNSAFE, BM_ECHECKSUM (longer than size), BM_ENOMEM or
 * BM_EIO.
 */
int	store_file_resume(struct store *s, const char *path,
	    const char *tmpname, int64_t size, struct store_file **ret);
/* The temp file's name inside its directory (borrowed). */
const char *store_file_tmpname(const struct store_file *f);
/* fdatasync the temp file: 0, BM_ENOSPC or BM_EIO. */
int	store_file_sync(struct store_file *f);
/* Close and free f, leaving its temp file for a later run.  NULL no-op. */
void	store_file_keep(struct store_file *f);

/* One file ready to publish. */
struct store_commit_item {
	struct store_file *file;	/* owned by the store from the call on */
	int64_t		 size;		/* expected byte count, checked against the file */
	int64_t		 mtime;		/* ns since epoch to set; out: what
					   the file system kept (a time out
					   of its range is clamped) */
	int		 rc;		/* out: 0, or why this item was not published */
	int		 err;		/* out: errno of the failed call when rc
					   is BM_EIO (EACCES, EPERM, EROFS ...),
					   else 0 */
};
/*
 * Publish a batch (the steps: docs/internals.md, "The store's
 * invariants", store_commit).  Items that fail get item->rc and their temp
 * file is removed; the others are published.  Every store_file is freed.
 * Returns 0 when the batch ran (see each rc), or BM_EIO when syncfs
 * failed (nothing renamed, all temp files removed).
 */
int	store_commit(struct store *s, struct store_commit_item *items,
	    size_t n);

/* Set the mtime (ns) of an existing file or directory, not following symlinks. */
int	store_set_mtime(struct store *s, const char *path, int64_t mtime);
/*
 * The same, with the mtime the file system kept in *ret_kept (clamped to
 * its range; the mtime asked for when it was already there).
 */
int	store_set_mtime_kept(struct store *s, const char *path,
	    int64_t mtime, int64_t *ret_kept);
/*
 * The same for a directory only: anything else at path (a file of the
 * admin's where upstream has a directory: a conflict, left alone) is
 * BM_EUNSAFE and keeps its mtime.
 */
int	store_set_dir_mtime(struct store *s, const char *path, int64_t mtime);
/*
 * Make path a symlink to target (replacing an existing symlink or file).
 * Returns 0, BM_EUNSAFE (target absolute or escaping), BM_EIO.
 */
int	store_symlink(struct store *s, const char *path, const char *target);
/*
 * True when a symlink at path (relative) pointing at target stays inside
 * the destination, judged lexically as store_symlink() judges it.
 */
bool	store_link_inside(const char *path, const char *target);
/*
 * Remove the file or symlink at path (unlinkat, never following); a
 * directory is removed only when empty.  BM_ENOENT if already gone.
 */
int	store_delete(struct store *s, const char *path);
/*
 * Remove every temp file left by a killed run (names starting with
 * STORE_TMP_PREFIX) anywhere in the tree; *ret_n counts them (may be NULL).
 * Nothing is walked when the last prefetch walked the whole tree, saw no
 * temp file, and nothing has changed the tree since.
 */
int	store_clean_temps(struct store *s, size_t *ret_n);
/*
 * The same, except regular temp files whose relative paths are in keep
 * (nkeep strings sorted by strcmp, borrowed): their ranges are recorded
 * for resume.  Returns 0, BM_ELIMIT, BM_ENOMEM or BM_EIO.
 */
int	store_clean_temps_except(struct store *s, const char *const *keep,
	    size_t nkeep, size_t *ret_n);
/* Free bytes available to us on the destination file system (fstatvfs). */
int	store_free_space(struct store *s, uint64_t *ret);
/*
 * publish = set: DEST is a symlink to DEST.biomirror/snapshots/ID, a run
 * builds a new snapshot there (hard links to the published one, its own
 * copy of every file it changes) and publishes it by renaming a new
 * symlink over DEST.
 */
struct store_set_info {
	int64_t		 published;	/* snapshot id DEST points at, -1 none */
	int64_t		 previous;	/* id replaced by store_set_publish, -1 */
	int64_t		 working;	/* the root's id when unpublished, -1 */
	bool		 reused;	/* working was left by an earlier run */
	int64_t		 discarded;	/* stale unpublished snapshot dropped
					 * (not left by the preceding run), -1 */
	uint64_t	 changes;	/* entries this run changed in the root */
	size_t		 held;		/* old snapshots store_set_prune kept
					   because a serve session holds them */
};

/*
 * Open the destination dest (borrowed, copied) for publish = set.  run > 0
 * (the manifest's run id, naming a new snapshot) prepares a run and picks
 * its root, continuing cont (the mirror's preceding run, -1 none) when
 * that run left an unpublished snapshot; run == 0 opens read-only, and
 * *ret is NULL when no tree exists.  See docs/internals.md, "Opening a
 * publish = set destination".  *ret is owned by the caller (store_close).
 * Returns 0, BM_EINVAL (NULL, dest without a last component), BM_EUNSAFE
 * (DEST or DEST.biomirror a mount point or not ours; reason in errbuf),
 * BM_ELIMIT (over 1024 snapshots), BM_ENOSPC, BM_ENOMEM or BM_EIO (errno
 * kept; errbuf, may be NULL, says more where errno would not).
 */
int	store_open_set(const char *dest, mode_t file_mode, mode_t dir_mode,
	    int64_t run, int64_t cont, struct store **ret, char *errbuf,
	    size_t errlen);
/*
 * Make the root a working snapshot that can be written, unless it is one
 * already (docs/internals.md, "The snapshots of publish = set",
 * store_set_begin).  Call after planning and only when there is something
 * to do.  Returns 0, BM_EINVAL (not a set store, or read-only),
 * BM_ELIMIT, BM_ENOSPC or BM_EIO (errno kept).
 */
int	store_set_begin(struct store *s);
/*
 * True when the root is a working snapshot that differs from the
 * published one: this run changed something in it, or it is an earlier
 * run's unpublished snapshot (whose files the manifest records).
 */
bool	store_set_pending(const struct store *s);
/*
 * Publish the working snapshot (the steps: docs/internals.md, "The
 * snapshots of publish = set", store_set_publish); *ret_id (may be NULL)
 * gets its id.  The snapshot published before stays (store_set_prune).
 * Returns 0, BM_EINVAL (no working snapshot), BM_EUNSAFE (something other
 * than our symlink appeared at DEST; nothing published) or BM_EIO.
 */
int	store_set_publish(struct store *s, int64_t *ret_id);
/*
 * After a publication: remove every snapshot but the published one and
 * the one it replaced (a reader may still be working in that one), and
 * but those a biomirror serve session holds (store_set_hold(): counted
 * in store_set_info.held, removed by a later run's prune).
 * *ret_n (may be NULL) counts the snapshots removed.  Returns 0,
 * BM_EINVAL (not a set store), BM_ELIMIT or BM_EIO (errno kept).
 */
int	store_set_prune(struct store *s, size_t *ret_n);
/*
 * Give up this run's working snapshot (nothing changed, or nothing worth
 * keeping after a failure): removed when this run made it; one that an
 * earlier run made is kept for the next run.  The root is unusable
 * afterwards (store_close only).  Returns 0, BM_EINVAL (not a set store)
 * or BM_EIO (errno kept).
 */
int	store_set_discard(struct store *s);
/*
 * For biomirror serve: open the snapshot the publish = set destination
 * dest (absolute, borrowed) points at now and take a shared lock on it,
 * so that a sync's store_set_prune() leaves it alone while the fd stays
 * open.  *ret_fd (a directory fd, the caller's to close: closing ends
 * the hold) and *ret_id (the snapshot id).  Needs no store and takes no
 * mirror lock: a run may publish meanwhile.  Returns 0; BM_EINVAL when
 * dest is not a symlink to one of its snapshots (not a set destination,
 * or nothing published yet); BM_ENOENT; BM_ELOCKED when the snapshot
 * kept vanishing under a prune; BM_EIO (errno kept).
 */
int	store_set_hold(const char *dest, int *ret_fd, int64_t *ret_id);
/*
 * pre_publish (biomirror.conf(5)): what the working snapshot holds, to
 * compare after a check command ran in it.  store_set_stage_scan records every
 * entry's path, type, inode and ctime into *ret (free with
 * store_scan_free; NULL is a no-op).  Returns 0, BM_EINVAL (no working
 * snapshot), BM_ELIMIT (too deep), BM_ENOMEM or BM_EIO (errno kept).
 */
struct store_scan;
int	store_set_stage_scan(struct store *s, struct store_scan **ret);
void	store_scan_free(struct store_scan *sc);

/* What store_set_check did to one path. */
enum store_check {
	STORE_CHECK_CREATED,	/* made by the check: removed */
	STORE_CHECK_RESTORED,	/* a staged file it changed: linked again
				   to the published snapshot's copy */
	STORE_CHECK_REMOVED,	/* a staged file it changed that has no
				   unchanged published copy: removed (to be
				   fetched again) */
	STORE_CHECK_INPLACE,	/* a staged file it changed in place (same
				   inode, new ctime) that is the published
				   copy too: removed from the staged one (to
				   be fetched again); the published snapshot
				   holds the changed file */
	STORE_CHECK_DIR,	/* a staged directory it removed or
				   replaced: made again (its files are
				   restored or removed as above) */
};
typedef void (*store_check_fn)(void *ctx, const char *path,
	    enum store_check what);
/*
 * Compare the working snapshot with before (store_set_stage_scan): every entry
 * that was not there, or had another type, is removed (never followed);
 * every directory that is gone is made again; every regular file whose
 * inode or ctime differs, or that is gone, is restored or removed (enum
 * store_check);
 * cb(ctx, path, what) is told of each (path borrowed for the call).
 * Returns 0, BM_ENOMEM, BM_ELIMIT or BM_EIO (errno kept).
 */
int	store_set_check(struct store *s, const struct store_scan *before,
	    store_check_fn cb, void *ctx);
/*
 * The working snapshot's path (DEST's parent joined with
 * NAME.biomirror/snapshots/ID; relative when DEST is) into buf.
 * Returns 0, BM_EINVAL (no working snapshot) or BM_ELIMIT (too long).
 */
int	store_set_working_path(const struct store *s, char *buf, size_t len);

/* Snapshot state of a set store (see struct store_set_info). */
void	store_set_get_info(const struct store *s, struct store_set_info *ret);

/* Path of the destination as opened (borrowed). */
const char *store_path(const struct store *s);

#endif
