/*
 * The destination lock and its owner record: one flock per destination
 * (of DEST.biomirror, or of DEST when it is a directory), whatever the
 * publish mode, config or state directory; the owner record beside DEST
 * names the holder.  Runs that would mix publish modes or mirrors on one
 * tree are refused before locking, naming the owner.  The rules: see
 * docs/internals.md, "The destination lock".  Never logs; callers log
 * once (STYLE.md rule 24).
 */
#ifndef BIOMIRROR_DESTLOCK_H
#define BIOMIRROR_DESTLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct dest_lock;

/* Who a run is: what the owner record says and what is compared. */
struct dest_who {
	const char	*mirror;	/* borrowed: mirror name (ad-hoc: its key) */
	const char	*config;	/* borrowed: config file, NULL: ad-hoc run */
	const char	*state_dir;	/* borrowed: state directory */
	bool		 set;		/* publish = set */
};

#define DEST_LOCK_SHARED	0x1	/* read-only run (plan, verify): LOCK_SH */
#define DEST_LOCK_CREATE	0x2	/* make DEST (publish = file) or
					   DEST.biomirror (set) when missing */

/*
 * Check dest's kind against self and lock it (see above); never blocks.
 * dest and self are borrowed (copied); dir_mode is the mode of a DEST made
 * here (DEST_LOCK_CREATE).  *ret is the caller's (dest_lock_free).
 * Returns 0, BM_EUNSAFE (refused by kind: exit 2), BM_ELOCKED (held by
 * another run: exit 75), BM_EINVAL (no last component), BM_EIO or
 * BM_ENOMEM; errbuf says why.  What it makes, reads and names:
 * docs/internals.md, "The destination lock".
 */
int	dest_lock_take(const char *dest, const struct dest_who *self,
	    unsigned flags, mode_t dir_mode, struct dest_lock **ret,
	    char *errbuf, size_t errlen);
/*
 * Write the owner record of a held write lock (once the store opened the
 * tree, so a run the store refuses leaves no record); a publish = set
 * run whose DEST is now its symlink drops the plain-tree record beside
 * DEST.  A no-op for a shared or empty lock.  Returns 0 or BM_EIO (errno
 * kept: EACCES or EROFS when DEST's parent is not writable).
 */
int	dest_lock_record(struct dest_lock *l);
/*
 * Release the lock (closing its descriptors) and free l; NULL is a no-op.
 * A DEST.biomirror that dest_lock_take made and that is still empty (the
 * store refused the tree) is removed.  Keeps errno.
 */
void	dest_lock_free(struct dest_lock *l);

#endif
