/*
 * The store: the only code that writes inside the destination tree
 * (DESIGN.md, STYLE.md rules 34-37).
 *
 * Invariants:
 * - The destination is opened once (store_open) as an O_DIRECTORY fd; that
 *   open and the mkdir -p before it are the only path-based calls.  Every
 *   other call is relative to that fd or to a directory fd reached from it.
 *   The destination path itself is the administrator's choice and is
 *   followed like any path (a /srv/mirror symlink to a data volume is
 *   common); the store starts at the directory it resolves to.
 * - No symlink inside the destination is ever followed.  A parent
 *   directory is reached with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
 *   RESOLVE_NO_MAGICLINKS) when the kernel has it, else (ENOSYS, EINVAL)
 *   with a walk of openat(O_DIRECTORY|O_NOFOLLOW) one component at a time;
 *   the store remembers which one works (a per-store flag, not a global).
 *   A symlink or non-directory where a directory must be is BM_EUNSAFE.
 * - Every path is checked with path_is_safe() first; an unsafe path, or a
 *   path with a component that starts with STORE_TMP_PREFIX (it would
 *   collide with our temp files and be removed by store_clean_temps), is
 *   refused with BM_EUNSAFE before anything is touched.
 * - New content lives in STORE_TMP_PREFIX + 8 random hex digits, mode
 *   0600, beside its target, and only store_commit() gives it its final
 *   name.  A store_file keeps its parent directory fd open until then, so
 *   a batch of small files costs no extra path walks, and the commit can
 *   fsync each distinct parent (by st_dev/st_ino) once.
 * The store never logs: callers log once where they decide (rule 24).
 */
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <linux/openat2.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/store.h"

#define STORE_PREFIX_LEN	(sizeof(STORE_TMP_PREFIX) - 1)
#define STORE_TMP_NAMELEN	(STORE_PREFIX_LEN + 8)
#define STORE_TMP_TRIES		8	/* EEXIST retries for a temp name */
#define STORE_OPENAT2_TRIES	3	/* EAGAIN retries before walking */
#define STORE_MAX_DEPTH		256	/* store_clean_temps recursion cap */
#define STORE_NS		1000000000LL
#define STORE_WALK		1	/* store_openat2: walk instead */

struct store {
	int		 fd;		/* destination directory, O_DIRECTORY */
	char		*path;		/* owned: destination as opened */
	mode_t		 file_mode;	/* mode of published files */
	mode_t		 dir_mode;	/* mode of directories we create */
	bool		 no_openat2;	/* openat2 unusable: walk instead */
	/*
	 * store_stat's parent-directory cache (the planner stats every
	 * file in path order, so consecutive calls share a parent): one
	 * open directory and its relative path.  Used and changed only by
	 * the loop thread; dropped by every call that changes the tree.
	 */
	int		 stat_dirfd;	/* owned; -1 none, STORE_STAT_MISSING: no such dir */
	char		 stat_dir[PATH_MAX]; /* relative path of stat_dirfd */
};

#define STORE_STAT_MISSING	(-2)	/* stat_dir is known not to exist */
#define STORE_WRITEBACK_BYTES	(8ULL * 1024 * 1024)	/* see store_file_write */

struct store_file {
	struct store	*s;		/* borrowed: the store it belongs to */
	int		 dirfd;		/* owned: parent dir until commit */
	int		 fd;		/* owned: the temp file, O_WRONLY */
	dev_t		 dir_dev;	/* parent's st_dev, to group fsyncs */
	ino_t		 dir_ino;	/* parent's st_ino, to group fsyncs */
	uint64_t	 length;	/* highest offset written + 1, bytes */
	uint64_t	 unflushed;	/* bytes written since the last writeback kick */
	char		*name;		/* owned: final name inside dirfd */
	char		 tmpname[STORE_TMP_NAMELEN + 1]; /* in dirfd */
};

/* close(2) that keeps errno for the caller's report (rule 26). */
static void
store_close_fd(int fd)
{
	int	 err = errno;

	if (fd != -1)
		(void)close(fd);
	errno = err;
}

/* errno of a failed write-side call to a BM_E* code. */
static int
store_errno_rc(int err)
{
	if (err == ENOSPC || err == EDQUOT)
		return BM_ENOSPC;
	return BM_EIO;
}

static void
store_ns_to_timespec(int64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / STORE_NS);
	ts->tv_nsec = (long)(ns % STORE_NS);
	if (ts->tv_nsec < 0) {
		ts->tv_nsec += STORE_NS;
		ts->tv_sec--;
	}
}

/*
 * Check path and split it: the parent directory (copied into dir, "" for
 * the root) and a pointer to the final name inside path.
 */
/* Drop store_stat's cached parent directory (the tree may change). */
static void
store_stat_forget(struct store *s)
{
	if (s->stat_dirfd >= 0)
		store_close_fd(s->stat_dirfd);
	s->stat_dirfd = -1;
	s->stat_dir[0] = '\0';
}

static int
store_split(const char *path, char dir[PATH_MAX], const char **ret_name)
{
	const char	*p, *slash;
	size_t		 len;

	if (path == NULL)
		return BM_EINVAL;
	len = strlen(path);
	if (len >= PATH_MAX || !path_is_safe(path, len))
		return BM_EUNSAFE;
	for (p = path; p != NULL; p = (slash == NULL) ? NULL : slash + 1) {
		slash = strchr(p, '/');
		if (strncmp(p, STORE_TMP_PREFIX, STORE_PREFIX_LEN) == 0)
			return BM_EUNSAFE;
	}
	slash = strrchr(path, '/');
	if (slash == NULL) {
		dir[0] = '\0';
		*ret_name = path;
	} else {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
		*ret_name = slash + 1;
	}
	return 0;
}

/*
 * Open the directory dir (no leading '/', no "..", checked) beneath the
 * root with one openat2 call.  Returns 0, STORE_WALK (use the walk),
 * BM_ENOENT, BM_EUNSAFE or BM_EIO.
 */
static int
store_openat2(struct store *s, const char *dir, int *ret)
{
	struct open_how	 how;
	int		 fd, err = 0, i;

	if (s->no_openat2)
		return STORE_WALK;
	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS;
	for (i = 0; i < STORE_OPENAT2_TRIES; i++) {
		fd = (int)syscall(SYS_openat2, s->fd, dir, &how, sizeof(how));
		if (fd != -1) {
			*ret = fd;
			return 0;
		}
		err = errno;
		if (err != EAGAIN && err != EINTR)
			break;
	}
	errno = err;
	switch (err) {
	case ENOSYS:
	case EINVAL:
		/* Old kernel or a seccomp filter: walk from now on. */
		s->no_openat2 = true;
		return STORE_WALK;
	case EAGAIN:
	case EINTR:
		return STORE_WALK;
	case ENOENT:
		return BM_ENOENT;
	case ELOOP:
	case EXDEV:
	case ENOTDIR:
		return BM_EUNSAFE;
	default:
		return BM_EIO;
	}
}

/*
 * One step of the walk: open the directory name inside dirfd without
 * following a symlink, creating it (dir_mode, exactly) when create is set.
 */
static int
store_step(struct store *s, int dirfd, const char *name, bool create,
    int *ret)
{
	const int	 flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC;
	bool		 made = false;
	int		 fd, err, rc;

	fd = openat(dirfd, name, flags);
	if (fd == -1 && errno == ENOENT && create) {
		if (mkdirat(dirfd, name, s->dir_mode) == 0)
			made = true;
		else if (errno != EEXIST) {
			rc = store_errno_rc(errno);
			goto out;
		}
		fd = openat(dirfd, name, flags);
	}
	if (fd == -1) {
		err = errno;
		if (err == ELOOP || err == ENOTDIR)
			rc = BM_EUNSAFE;
		else if (err == ENOENT)
			rc = BM_ENOENT;
		else
			rc = BM_EIO;
		goto out;
	}
	/* mkdirat applied the umask; dir_mode is what was asked for. */
	if (made && fchmod(fd, s->dir_mode) == -1) {
		rc = BM_EIO;
		store_close_fd(fd);
		goto out;
	}
	*ret = fd;
	rc = 0;
out:
	return rc;
}

/* Walk dir one component at a time from the root (see store_step). */
static int
store_walk(struct store *s, const char *dir, bool create, int *ret)
{
	char	 buf[PATH_MAX];
	char	*comp, *next;
	int	 cur, fd, rc;

	if ((size_t)snprintf(buf, sizeof(buf), "%s", dir) >= sizeof(buf))
		return BM_EUNSAFE;
	if ((cur = fcntl(s->fd, F_DUPFD_CLOEXEC, 0)) == -1)
		return BM_EIO;
	for (comp = buf; comp != NULL; comp = next) {
		if ((next = strchr(comp, '/')) != NULL)
			*next++ = '\0';
		if ((rc = store_step(s, cur, comp, create, &fd)) != 0)
			goto out;
		(void)close(cur);
		cur = fd;
	}
	*ret = cur;
	cur = -1;
	rc = 0;
out:
	store_close_fd(cur);
	return rc;
}

/*
 * Open the checked relative directory dir ("" is the root) as a new fd,
 * creating missing components when create is set.
 */
static int
store_opendir(struct store *s, const char *dir, bool create, int *ret)
{
	int	 fd, rc;

	if (dir[0] == '\0') {
		if ((fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0)) == -1)
			return BM_EIO;
		*ret = fd;
		return 0;
	}
	rc = store_openat2(s, dir, &fd);
	if (rc == STORE_WALK || (rc == BM_ENOENT && create))
		rc = store_walk(s, dir, create, &fd);
	if (rc == 0)
		*ret = fd;
	return rc;
}

/* Check path and open its parent directory; *ret_name points into path. */
static int
store_parent(struct store *s, const char *path, bool create, int *ret_fd,
    const char **ret_name)
{
	char		 dir[PATH_MAX];
	const char	*name;
	int		 rc;

	if ((rc = store_split(path, dir, &name)) != 0)
		return rc;
	if ((rc = store_opendir(s, dir, create, ret_fd)) != 0)
		return rc;
	*ret_name = name;
	return 0;
}

/* Fill buf with STORE_TMP_PREFIX and 8 random hex digits. */
static int
store_tmpname(char buf[STORE_TMP_NAMELEN + 1])
{
	uint8_t	 r[4];
	ssize_t	 n;

	if ((n = getrandom(r, sizeof(r), 0)) != (ssize_t)sizeof(r)) {
		if (n != -1)
			errno = EIO;
		return BM_EIO;
	}
	(void)snprintf(buf, STORE_TMP_NAMELEN + 1, "%s%02x%02x%02x%02x",
	    STORE_TMP_PREFIX, r[0], r[1], r[2], r[3]);
	return 0;
}

/* mkdir -p of the administrator's dest path; only path-based code here. */
static int
store_mkdir_p(const char *dest, mode_t mode, bool *ret_made)
{
	char		 buf[PATH_MAX];
	struct stat	 st;
	size_t		 i, len;
	int		 err;

	len = strlen(dest);
	if (len >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return BM_EIO;
	}
	memcpy(buf, dest, len + 1);
	*ret_made = false;
	for (i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		if (buf[i - 1] == '/')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) == 0)
			*ret_made = (i == len);
		else if (errno != EEXIST) {
			err = errno;
			/* EACCES/EROFS on an existing ancestor is fine. */
			if (stat(buf, &st) == -1 || !S_ISDIR(st.st_mode)) {
				errno = err;
				return BM_EIO;
			}
		}
		if (i < len)
			buf[i] = '/';
	}
	return 0;
}

/*
 * Open the destination directory dest (a path from the config; borrowed,
 * copied) with O_DIRECTORY|O_CLOEXEC, creating it and missing parents
 * first (mkdir -p; dest itself gets exactly dir_mode when we create it,
 * parents get dir_mode under the umask).  dest and its parents may be
 * symlinks to directories: the administrator chose them, so they are
 * followed; only symlinks inside the destination are refused (by every
 * other call).  Trailing '/' are dropped from store_path().  The
 * directory must be writable and searchable by our effective ids
 * (faccessat AT_EACCESS), so that a run fails here with "Permission
 * denied" or "Read-only file system", not on its first file.  *ret is
 * owned by the caller (store_close).  Returns 0, BM_EINVAL (NULL or
 * empty dest), BM_EIO (errno kept: ENOTDIR when dest is a file or a
 * symlink to one, EACCES or EROFS when we cannot write into it) or
 * BM_ENOMEM.  Never BM_EUNSAFE.
 * Sandbox: create directories along dest, read-write beneath it.
 */
int
store_open(const char *dest, mode_t file_mode, mode_t dir_mode,
    struct store **ret)
{
	struct store	*s = NULL;
	size_t		 len;
	bool		 made;
	int		 rc;

	if (dest == NULL || dest[0] == '\0')
		return BM_EINVAL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return BM_ENOMEM;
	s->fd = -1;
	s->stat_dirfd = -1;
	s->file_mode = file_mode;
	s->dir_mode = dir_mode;
	if ((s->path = strdup(dest)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	for (len = strlen(s->path); len > 1 && s->path[len - 1] == '/'; len--)
		s->path[len - 1] = '\0';
	if ((rc = store_mkdir_p(s->path, dir_mode, &made)) != 0)
		goto out;
	s->fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->fd == -1) {
		rc = BM_EIO;
		goto out;
	}
	if (made && fchmod(s->fd, dir_mode) == -1) {
		rc = BM_EIO;
		goto out;
	}
	if (faccessat(s->fd, ".", W_OK | X_OK, AT_EACCESS) == -1) {
		rc = BM_EIO;
		goto out;
	}
	*ret = s;
	s = NULL;
	rc = 0;
out:
	store_close(s);
	return rc;
}

/*
 * Close the destination fd and free s (NULL is a no-op).  Every
 * store_file must have been committed or aborted first.  Keeps errno.
 */
void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	store_stat_forget(s);
	store_close_fd(s->fd);
	free(s->path);
	free(s);
}

/*
 * Destination path as opened, without trailing '/' (borrowed, valid until
 * store_close).
 */
const char *
store_path(const struct store *s)
{
	return s->path;
}

/*
 * lstat path (relative, checked, borrowed) beneath the destination into
 * *ret: type 'f', 'd', 'l' or '?', size in bytes, mtime in ns.  Returns
 * 0, BM_ENOENT, BM_EUNSAFE (bad path, or a parent component is a symlink
 * or not a directory), BM_EINVAL (NULL) or BM_EIO (errno kept).
 * Sandbox: read beneath the destination.
 */
int
store_stat(struct store *s, const char *path, struct local_stat *ret)
{
	struct stat	 st;
	char		 dir[PATH_MAX];
	const char	*name;
	int		 dirfd = -1, rc;

	if ((rc = store_split(path, dir, &name)) != 0)
		return rc;
	if (s->stat_dirfd == -1 || strcmp(dir, s->stat_dir) != 0) {
		store_stat_forget(s);
		rc = store_opendir(s, dir, false, &dirfd);
		if (rc != 0 && rc != BM_ENOENT)
			return rc;
		/* A missing directory is remembered too (cold runs). */
		s->stat_dirfd = rc == 0 ? dirfd : STORE_STAT_MISSING;
		memcpy(s->stat_dir, dir, strlen(dir) + 1);
	}
	if (s->stat_dirfd == STORE_STAT_MISSING)
		return BM_ENOENT;
	dirfd = s->stat_dirfd;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		rc = (errno == ENOENT) ? BM_ENOENT : BM_EIO;
		goto out;
	}
	if (S_ISREG(st.st_mode))
		ret->type = 'f';
	else if (S_ISDIR(st.st_mode))
		ret->type = 'd';
	else if (S_ISLNK(st.st_mode))
		ret->type = 'l';
	else
		ret->type = '?';
	ret->size = (int64_t)st.st_size;
	ret->mtime = (int64_t)st.st_mtim.tv_sec * STORE_NS +
	    st.st_mtim.tv_nsec;
	rc = 0;
out:
	return rc;
}

/*
 * Create the directory path (relative, checked, borrowed) and its missing
 * parents with exactly dir_mode; existing directories are left alone.
 * Returns 0, BM_EUNSAFE (bad path, or a symlink or non-directory in the
 * way), BM_ENOSPC, BM_EINVAL (NULL) or BM_EIO (errno kept).
 * Sandbox: read beneath the destination, create directories.
 */
int
store_mkdirs(struct store *s, const char *path)
{
	char		 dir[PATH_MAX];
	const char	*name;
	int		 fd, rc;

	store_stat_forget(s);

	/* Checks path and each component; the split itself is unused. */
	if ((rc = store_split(path, dir, &name)) != 0)
		return rc;
	if ((rc = store_opendir(s, path, true, &fd)) != 0)
		return rc;
	(void)close(fd);
	return 0;
}

/* Free f: close its fds, unlink its temp file when unlink_tmp.  Keeps errno. */
static void
store_file_free(struct store_file *f, bool unlink_tmp)
{
	int	 err = errno;

	if (f == NULL)
		return;
	if (f->fd != -1)
		(void)close(f->fd);
	if (unlink_tmp && f->dirfd != -1 && f->tmpname[0] != '\0')
		(void)unlinkat(f->dirfd, f->tmpname, 0);
	if (f->dirfd != -1)
		(void)close(f->dirfd);
	free(f->name);
	free(f);
	errno = err;
}

/* Create f's temp file (O_EXCL, 0600) inside f->dirfd. */
static int
store_tmpfile(struct store_file *f)
{
	const int	 flags = O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW |
			    O_CLOEXEC;
	int		 i, rc;

	for (i = 0; i < STORE_TMP_TRIES; i++) {
		if ((rc = store_tmpname(f->tmpname)) != 0)
			break;
		f->fd = openat(f->dirfd, f->tmpname, flags, 0600);
		if (f->fd != -1)
			return 0;
		rc = store_errno_rc(errno);
		if (errno != EEXIST)
			break;
	}
	f->tmpname[0] = '\0';	/* not ours: never unlink it */
	return rc;
}

/*
 * Create a temp file (mode 0600) beside path (relative, checked,
 * borrowed), creating its parent directories, for new content of
 * expected_size bytes (-1 unknown; XXX: not used, no preallocation: the
 * planner checks free space).  *ret is owned by the caller until
 * store_file_abort() or store_commit().  Returns 0, BM_EUNSAFE (bad path,
 * symlink or file in a parent position), BM_ENOSPC, BM_EINVAL (NULL),
 * BM_ENOMEM or BM_EIO with errno kept from the call that failed (EACCES
 * for a directory we may not write, EROFS, ...) so that the caller can
 * report strerror(errno).
 * Sandbox: create directories and regular files beneath the destination.
 */
int
store_file_open(struct store *s, const char *path, int64_t expected_size,
    struct store_file **ret)
{
	struct store_file	*f = NULL;
	struct stat		 st;
	const char		*name;
	int			 dirfd = -1, rc;

	(void)expected_size;
	if ((rc = store_parent(s, path, true, &dirfd, &name)) != 0)
		goto out;
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	f->s = s;
	f->fd = -1;
	f->dirfd = dirfd;
	dirfd = -1;
	if ((f->name = strdup(name)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	if (fstat(f->dirfd, &st) == -1) {
		rc = BM_EIO;
		goto out;
	}
	f->dir_dev = st.st_dev;
	f->dir_ino = st.st_ino;
	if ((rc = store_tmpfile(f)) != 0)
		goto out;
	*ret = f;
	f = NULL;
	rc = 0;
out:
	store_close_fd(dirfd);
	store_file_free(f, true);
	return rc;
}

/*
 * Write len bytes of buf (borrowed) at byte offset off of the temp file;
 * ranges may come in any order and overlap.  Retries short writes and
 * EINTR.  Returns 0, BM_ENOSPC (ENOSPC, EDQUOT) or BM_EIO (errno kept;
 * EFBIG when off + len does not fit in off_t).
 * Sandbox: write to an open fd only.
 */
int
store_file_write(struct store_file *f, uint64_t off, const void *buf,
    size_t len)
{
	const uint8_t	*p = buf;
	ssize_t		 w;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off) {
		errno = EFBIG;
		return BM_EIO;
	}
	while (len > 0) {
		w = pwrite(f->fd, p, len, (off_t)off);
		if (w == -1) {
			if (errno == EINTR)
				continue;
			return store_errno_rc(errno);
		}
		if (w == 0) {
			errno = EIO;
			return BM_EIO;
		}
		p += w;
		off += (uint64_t)w;
		len -= (size_t)w;
		if (off > f->length)
			f->length = off;
		f->unflushed += (uint64_t)w;
	}
	/*
	 * Start writeback of a large file as it comes in (without waiting
	 * for it), so that the syncfs before the batch's renames finds
	 * little left to write.  Advisory: a failure changes nothing.
	 */
	if (f->unflushed >= STORE_WRITEBACK_BYTES) {
		(void)sync_file_range(f->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
		f->unflushed = 0;
	}
	return 0;
}

/* Highest offset written + 1 (bytes): the temp file's current length. */
uint64_t
store_file_length(const struct store_file *f)
{
	return f->length;
}

/*
 * Unlink the temp file and free f (the caller's pointer is dead after).
 * NULL is a no-op.  Keeps errno.
 * Sandbox: remove files beneath the destination.
 */
void
store_file_abort(struct store_file *f)
{
	store_file_free(f, true);
}

/* Commit step 1 for one item: byte count, mtime, mode. */
static int
store_commit_prepare(struct store *s, struct store_commit_item *it)
{
	struct timespec	 ts[2];
	struct stat	 st;

	if (it->file == NULL || it->file->s != s)
		return BM_EINVAL;
	if (fstat(it->file->fd, &st) == -1)
		return BM_EIO;
	if (it->size < 0 || (int64_t)st.st_size != it->size)
		return BM_ECHECKSUM;
	store_ns_to_timespec(it->mtime, &ts[0]);
	ts[1] = ts[0];
	if (futimens(it->file->fd, ts) == -1)
		return BM_EIO;
	if (fchmod(it->file->fd, s->file_mode) == -1)
		return BM_EIO;
	return 0;
}

/*
 * Commit step 3 for one item: give the temp file its final name, unless a
 * directory or symlink (which we never replace or follow) is there.
 */
static int
store_commit_rename(struct store_file *f)
{
	struct stat	 st;
	int		 err;

	if (fstatat(f->dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISREG(st.st_mode))
			return BM_EUNSAFE;
	} else if (errno != ENOENT)
		return BM_EIO;
	if (renameat(f->dirfd, f->tmpname, f->dirfd, f->name) == -1) {
		err = errno;
		if (err == EISDIR || err == ENOTDIR || err == ENOTEMPTY)
			return BM_EUNSAFE;
		return store_errno_rc(err);
	}
	f->tmpname[0] = '\0';	/* published: nothing left to remove */
	return 0;
}

static int
store_cmp_parent(const void *a, const void *b)
{
	const struct store_file	*fa, *fb;

	fa = (*(const struct store_commit_item *const *)a)->file;
	fb = (*(const struct store_commit_item *const *)b)->file;
	if (fa->dir_dev != fb->dir_dev)
		return fa->dir_dev < fb->dir_dev ? -1 : 1;
	if (fa->dir_ino != fb->dir_ino)
		return fa->dir_ino < fb->dir_ino ? -1 : 1;
	return 0;
}

/*
 * Commit step 4: fsync each distinct parent of a published item once.  A
 * failed fsync marks that directory's items BM_EIO: their names are
 * visible but not known durable, so the manifest must not record them.
 */
static void
store_commit_sync_parents(struct store_commit_item *items, size_t n)
{
	struct store_commit_item	**v;
	size_t				  i, j, nv = 0;
	bool				  good;

	if ((v = calloc(n, sizeof(*v))) == NULL) {
		/* XXX: out of memory: fsync every parent, slow but right. */
		for (i = 0; i < n; i++)
			if (items[i].rc == 0 &&
			    fsync(items[i].file->dirfd) == -1)
				items[i].rc = BM_EIO;
		return;
	}
	for (i = 0; i < n; i++)
		if (items[i].rc == 0)
			v[nv++] = &items[i];
	qsort(v, nv, sizeof(*v), store_cmp_parent);
	for (i = 0; i < nv; i = j) {
		good = fsync(v[i]->file->dirfd) == 0;
		for (j = i; j < nv && store_cmp_parent(&v[i], &v[j]) == 0; j++)
			if (!good)
				v[j]->rc = BM_EIO;
	}
	free(v);
}

/*
 * Publish a batch of n items (array borrowed; every items[i].file is
 * owned by the store from the call on, freed, and set to NULL): check
 * each byte count (BM_ECHECKSUM), set mtime (atime too) and file_mode,
 * syncfs once, renameat each temp file over its target (a regular file is
 * replaced; a directory or symlink in the way is BM_EUNSAFE and left
 * alone), then fsync each distinct parent directory once.  items[i].rc
 * gets 0 or why the item was not published (also BM_EINVAL for a NULL
 * file); failed items' temp files are removed.  Returns 0 when the batch
 * ran, or BM_EIO (errno kept) when syncfs failed: nothing renamed, every
 * temp file removed, every rc non-zero.
 * Sandbox: write, rename and remove files beneath the destination.
 */
int
store_commit(struct store *s, struct store_commit_item *items, size_t n)
{
	size_t	 i;
	int	 err, rc;

	store_stat_forget(s);

	for (i = 0; i < n; i++)
		items[i].rc = store_commit_prepare(s, &items[i]);
	if (syncfs(s->fd) == -1) {
		err = errno;
		for (i = 0; i < n; i++)
			if (items[i].rc == 0)
				items[i].rc = BM_EIO;
		errno = err;
		rc = BM_EIO;
		goto out;
	}
	for (i = 0; i < n; i++)
		if (items[i].rc == 0)
			items[i].rc = store_commit_rename(items[i].file);
	store_commit_sync_parents(items, n);
	rc = 0;
out:
	for (i = 0; i < n; i++) {
		/* A published file has no temp name left to unlink. */
		store_file_free(items[i].file, true);
		items[i].file = NULL;
	}
	return rc;
}

/*
 * Set the mtime (ns since the epoch) of the file, directory or symlink at
 * path (relative, checked, borrowed; never followed); atime is set too.
 * Returns 0, BM_ENOENT, BM_EUNSAFE, BM_EINVAL (NULL) or BM_EIO.
 * Sandbox: write attributes beneath the destination.
 */
int
store_set_mtime(struct store *s, const char *path, int64_t mtime)
{
	struct timespec	 ts[2];
	const char	*name;
	int		 dirfd = -1, rc;

	if ((rc = store_parent(s, path, false, &dirfd, &name)) != 0)
		goto out;
	store_ns_to_timespec(mtime, &ts[0]);
	ts[1] = ts[0];
	if (utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) == -1) {
		rc = (errno == ENOENT) ? BM_ENOENT : BM_EIO;
		goto out;
	}
	rc = 0;
out:
	store_close_fd(dirfd);
	return rc;
}

/*
 * True when a symlink in directory depth ndir pointing at target stays
 * beneath the root, resolved lexically ("a/../.." counts as "..").
 * XXX: lexical, like rsync --safe-links; sound because the store never
 * follows links and refuses unsafe ones at every depth.
 */
static bool
store_link_is_safe(const char *path, const char *target)
{
	const char	*p, *e;
	long		 depth = 0;
	size_t		 clen, len;

	for (p = path; (p = strchr(p, '/')) != NULL; p++)
		depth++;
	len = strlen(target);
	if (len == 0 || len >= PATH_MAX || target[0] == '/')
		return false;
	for (p = target; *p != '\0'; p = (*e == '/') ? e + 1 : e) {
		if ((e = strchr(p, '/')) == NULL)
			e = p + strlen(p);
		clen = (size_t)(e - p);
		if (clen == 0 || (clen == 1 && p[0] == '.'))
			continue;
		if (clen == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return false;
		} else
			depth++;
	}
	return true;
}

bool
store_link_inside(const char *path, const char *target)
{
	return path != NULL && target != NULL &&
	    store_link_is_safe(path, target);
}

/* Create a symlink to target under a fresh temp name in dirfd. */
static int
store_tmplink(int dirfd, const char *target, char tmp[STORE_TMP_NAMELEN + 1])
{
	int	 i, rc = BM_EIO;

	for (i = 0; i < STORE_TMP_TRIES; i++) {
		if ((rc = store_tmpname(tmp)) != 0)
			break;
		if (symlinkat(target, dirfd, tmp) == 0)
			return 0;
		rc = store_errno_rc(errno);
		if (errno != EEXIST)
			break;
	}
	tmp[0] = '\0';
	return rc;
}

/*
 * Make path (relative, checked, borrowed) a symlink to target (borrowed),
 * replacing a file or symlink there, atomically (temp link + renameat);
 * parent directories are created.  XXX: the parent is not fsynced; the
 * next run re-creates a link lost in a crash.  Returns 0, BM_EUNSAFE (bad
 * path, target empty, absolute or escaping the root, a directory in the
 * way), BM_ENOSPC, BM_EINVAL (NULL) or BM_EIO (errno kept).
 * Sandbox: create symlinks and directories beneath the destination.
 */
int
store_symlink(struct store *s, const char *path, const char *target)
{
	char		 tmp[STORE_TMP_NAMELEN + 1] = "";
	struct stat	 st;
	const char	*name;
	int		 dirfd = -1, err, rc;

	store_stat_forget(s);

	if (path == NULL || target == NULL)
		return BM_EINVAL;
	if (!store_link_is_safe(path, target))
		return BM_EUNSAFE;
	if ((rc = store_parent(s, path, true, &dirfd, &name)) != 0)
		goto out;
	if ((rc = store_tmplink(dirfd, target, tmp)) != 0)
		goto out;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode)) {
		rc = BM_EUNSAFE;
		goto out;
	}
	if (renameat(dirfd, tmp, dirfd, name) == -1) {
		rc = (errno == EISDIR || errno == ENOTEMPTY) ? BM_EUNSAFE :
		    store_errno_rc(errno);
		goto out;
	}
	tmp[0] = '\0';
	rc = 0;
out:
	if (tmp[0] != '\0') {
		err = errno;
		(void)unlinkat(dirfd, tmp, 0);
		errno = err;
	}
	store_close_fd(dirfd);
	return rc;
}

/*
 * Remove the file or symlink at path (relative, checked, borrowed; never
 * followed), or the directory there when it is empty.  Returns 0,
 * BM_ENOENT (already gone, also a missing parent), BM_EUNSAFE, BM_EINVAL
 * (NULL) or BM_EIO (errno kept: ENOTEMPTY for a non-empty directory).
 * Sandbox: remove files and directories beneath the destination.
 */
int
store_delete(struct store *s, const char *path)
{
	const char	*name;
	int		 dirfd = -1, err, rc;

	store_stat_forget(s);

	if ((rc = store_parent(s, path, false, &dirfd, &name)) != 0)
		goto out;
	if (unlinkat(dirfd, name, 0) == 0) {
		rc = 0;
		goto out;
	}
	err = errno;
	if (err == EISDIR || err == EPERM) {
		if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0) {
			rc = 0;
			goto out;
		}
		if (errno == ENOTDIR)
			errno = err;	/* EPERM on a file: report that */
		err = errno;
	}
	rc = (err == ENOENT) ? BM_ENOENT : BM_EIO;
	if (err == EEXIST)
		err = ENOTEMPTY;
	errno = err;
out:
	store_close_fd(dirfd);
	return rc;
}

static int	store_clean_dir(int fd, int depth, size_t *n);

/* store_clean_temps for one directory entry of dfd. */
static int
store_clean_entry(int dfd, const struct dirent *de, int depth, size_t *n)
{
	struct stat	 st;
	unsigned char	 type = de->d_type;
	int		 fd;

	if (type == DT_UNKNOWN) {
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			return (errno == ENOENT) ? 0 : BM_EIO;
		type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
	}
	if (type == DT_DIR) {
		if (depth >= STORE_MAX_DEPTH)
			return BM_ELIMIT;
		fd = openat(dfd, de->d_name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd == -1)	/* gone or swapped for a link: skip it */
			return (errno == ENOENT || errno == ELOOP ||
			    errno == ENOTDIR) ? 0 : BM_EIO;
		return store_clean_dir(fd, depth + 1, n);
	}
	if (strncmp(de->d_name, STORE_TMP_PREFIX, STORE_PREFIX_LEN) != 0)
		return 0;
	if (unlinkat(dfd, de->d_name, 0) == -1)
		return (errno == ENOENT) ? 0 : BM_EIO;
	(*n)++;
	return 0;
}

/*
 * Remove temp files in the directory fd (owned: closed here) and below.
 * Keeps going after an error and returns the first one.
 */
static int
store_clean_dir(int fd, int depth, size_t *n)
{
	struct dirent	*de;
	DIR		*d;
	int		 r, rc = 0;

	if ((d = fdopendir(fd)) == NULL) {
		store_close_fd(fd);
		return BM_EIO;
	}
	for (;;) {
		errno = 0;
		if ((de = readdir(d)) == NULL) {
			if (errno != 0)
				rc = BM_EIO;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		r = store_clean_entry(dirfd(d), de, depth, n);
		if (r != 0 && rc == 0)
			rc = r;
	}
	r = errno;
	(void)closedir(d);
	errno = r;
	return rc;
}

/*
 * Remove every temp file (name starting with STORE_TMP_PREFIX, any type
 * but directory) left anywhere in the tree by a killed run, never
 * following symlinks and descending at most STORE_MAX_DEPTH levels.
 * *ret_n (may be NULL) gets the number removed, also on error.  Returns
 * 0, BM_ELIMIT (a deeper directory was skipped) or BM_EIO (errno kept);
 * either way everything reachable was cleaned.
 * Sandbox: read directories and remove files beneath the destination.
 */
int
store_clean_temps(struct store *s, size_t *ret_n)
{
	size_t	 n = 0;
	int	 fd, rc;

	store_stat_forget(s);

	/* A fresh open file description: readdir must not move s->fd's. */
	fd = openat(s->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		return BM_EIO;
	rc = store_clean_dir(fd, 0, &n);
	if (ret_n != NULL)
		*ret_n = n;
	return rc;
}

/*
 * Bytes available to an unprivileged user on the destination's file
 * system (f_bavail * f_frsize) into *ret.  Returns 0 or BM_EIO.
 * Sandbox: none beyond the open destination fd.
 */
int
store_free_space(struct store *s, uint64_t *ret)
{
	struct statvfs	 sv;

	if (fstatvfs(s->fd, &sv) == -1)
		return BM_EIO;
	*ret = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
	return 0;
}
