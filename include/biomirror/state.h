/*
 * The state directory: where manifests, locks and run history live
 * (DESIGN.md "State").  Layout under STATE_DIR:
 *   manifests/NAME.db	one SQLite manifest per mirror
 *   locks/NAME.lock	flock(2)ed while a run of NAME is going on; holds
 *			the holder's PID as text
 * Ad-hoc syncs use NAME = "adhoc-" + the first 16 hex digits of the
 * SHA-256 of the destination's absolute path.
 */
#ifndef BIOMIRROR_STATE_H
#define BIOMIRROR_STATE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The default state directory into buf (len bytes): $STATE_DIRECTORY
 * when systemd sets it (StateDirectory=biomirror: /var/lib/biomirror,
 * the first of a colon-separated list), /var/lib/biomirror for root,
 * else $XDG_STATE_HOME/biomirror or ~/.local/state/biomirror.
 * Returns 0, BM_EINVAL (no HOME) or BM_ELIMIT (buf too small).
 */
int	state_default_dir(char *buf, size_t len);
/*
 * Create dir, dir/manifests and dir/locks (mode 0755) as needed.
 * Returns 0 or BM_EIO (errno kept).
 */
int	state_prepare(const char *dir);
/*
 * dest as an absolute path, spelled canonically (fileio_path_canon(),
 * relative to the working directory), into buf (len bytes).
 * Returns 0, BM_EIO (getcwd) or BM_ELIMIT.
 */
int	state_abs_path(const char *dest, char *buf, size_t len);
/*
 * Key of an ad-hoc mirror for destination dest into buf ("adhoc-" + 16
 * hex digits of SHA-256 of its absolute path, via OpenSSL EVP; the path
 * spelled canonically first: "/srv//x/./" is "/srv/x").
 * Returns 0, BM_EIO or BM_ELIMIT.
 */
int	state_adhoc_key(const char *dest, char *buf, size_t len);
/*
 * Take the run lock of mirror name: flock(LOCK_EX|LOCK_NB) on
 * dir/locks/NAME.lock, then write our PID into it.  *ret_fd is kept open
 * for the run.  Returns 0; BM_ELOCKED with the holder's PID in
 * *ret_holder (0 if unknown); BM_EIO.
 */
int	state_lock(const char *dir, const char *name, int *ret_fd,
	    long *ret_holder);
/*
 * Whether a run of mirror name holds its lock now: a shared flock with
 * LOCK_NB on dir/locks/NAME.lock, released at once (state_lock() retries
 * for ~100 ms, so this probe never makes a run exit 75).  A run that died
 * (kill -9, a crash) holds no lock: its flock went with its process.
 * When held, *ret_holder gets the PID the file names (0 if unknown).
 * A missing or unreadable lock file counts as not held.
 */
bool	state_lock_held(const char *dir, const char *name, long *ret_holder);
/* Release a lock taken by state_lock().  fd < 0 is a no-op. */
void	state_unlock(int fd);
/* Path of mirror name's manifest into buf.  0 or BM_ELIMIT. */
int	state_manifest_path(const char *dir, const char *name, char *buf,
	    size_t len);

#endif
