/*
 * The store: the only code that writes inside the destination tree
 * (DESIGN.md, STYLE.md rules 34-37).  Invariants: one path-based open of
 * the destination, every other call relative to its fd; no symlink inside
 * it is followed (openat2 RESOLVE_BENEATH, else an O_NOFOLLOW walk);
 * every path checked with path_is_safe() and free of STORE_TMP_PREFIX
 * before anything is touched; new content lives in temp files beside its
 * target until store_commit() renames it.  Never logs (rule 24).  See
 * docs/internals.md, "The store's invariants".
 */
#include <sys/file.h>
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/store.h"
#include "biomirror/text.h"

#define STORE_PREFIX_LEN	(sizeof(STORE_TMP_PREFIX) - 1)
#define STORE_TMP_NAMELEN	(STORE_PREFIX_LEN + 8)
#define STORE_TMP_TRIES		8	/* EEXIST retries for a temp name */
#define STORE_OPENAT2_TRIES	3	/* EAGAIN retries before walking */
#define STORE_MAX_DEPTH		256	/* store_clean_temps recursion cap */
/*
 * Directory levels the prefetch enters: it holds one open directory per
 * level while the run opens its connections (a low RLIMIT_NOFILE must
 * not run out for it), and deeper trees are only not warmed.
 */
#define STORE_PREFETCH_DEPTH	16
/*
 * lstats the prefetch keeps for the planner's store_stat (about 64 bytes
 * each, 4 MiB at most); past the cap it only warms the inodes.
 */
#define STORE_PREFETCH_KEEP	65536
#define STORE_PREFETCH_BUCKETS	8192	/* hash chains of the kept lstats */
#define STORE_NS		1000000000LL
#define STORE_WALK		1	/* store_openat2: walk instead */
/* Distinct parents a commit fsyncs one by one; more: one syncfs. */
#define STORE_SYNC_PARENTS	4

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
	uint64_t	 changes;	/* entries created, replaced, removed or re-timed */
	struct store_set *set;		/* owned: publish = set state, NULL otherwise */
	struct store_wb	*wb;		/* owned: write-behind, NULL until first used */
	struct store_prefetch *prefetch; /* owned: running prefetch, or NULL */
	/*
	 * The prefetch walked the whole tree and saw no temp file, and
	 * nothing changed it since: store_clean_temps has nothing to do.
	 * Atomic: the opener workers clear it as they make temp files.
	 */
	atomic_bool	 no_temps;
};

#define STORE_STAT_MISSING	(-2)	/* stat_dir is known not to exist */
#define STORE_WRITEBACK_BYTES	(8ULL * 1024 * 1024)	/* see store_pwrite */

/*
 * Write-behind (store_file_write_behind): the page-cache copy of a large
 * body costs this kernel about a CPU-second per GiB, more than receiving
 * it, so a body streamed in by the event loop is copied into chunks and
 * written by STORE_WRITERS threads while the loop receives the next
 * bytes.  The chunks of one file are written in the order queued, by one
 * writer at a time (a file is "busy" while a writer holds its chunks), so
 * that "every chunk queued before now is in the file" is one counter.
 * At most STORE_WB_MAX bytes of chunks exist per store: a writer that
 * would go past it waits (backpressure on the loop, as a slow pwrite
 * was before).
 */
#define STORE_WRITERS	2			/* write-behind threads */
#define STORE_WB_CHUNK	(256U * 1024)		/* bytes one chunk holds */
#define STORE_WB_MAX	(32U * 1024 * 1024)	/* bytes of chunks per store */

struct store_chunk {
	struct store_chunk *next;
	uint64_t	 off;		/* file offset of data[0], bytes */
	size_t		 len;		/* bytes of data in use */
	uint8_t		 data[];	/* STORE_WB_CHUNK bytes */
};

struct store_wb {
	pthread_mutex_t	 mu;		/* guards everything below and the wb_* of files */
	pthread_cond_t	 work;		/* writers: a file is ready, or stop */
	pthread_cond_t	 done;		/* waiters: chunks were written */
	pthread_t	 th[STORE_WRITERS];
	unsigned	 nth;		/* threads started */
	struct store_file *ready;	/* files with queued chunks, no writer, FIFO */
	struct store_file *ready_tail;
	struct store_chunk *spare;	/* owned: written chunks for reuse */
	size_t		 nchunks;	/* chunks allocated (queued, busy or spare) */
	bool		 stop;		/* writers exit once nothing is ready */
};

struct store_file {
	struct store	*s;		/* borrowed: the store it belongs to */
	int		 dirfd;		/* owned: parent dir until commit */
	int		 fd;		/* owned: the temp file, O_RDWR (hashed back) */
	dev_t		 dir_dev;	/* parent's st_dev, to group fsyncs */
	ino_t		 dir_ino;	/* parent's st_ino, to group fsyncs */
	uint64_t	 length;	/* highest offset written + 1, bytes */
	uint64_t	 unflushed;	/* bytes written since the last writeback kick */
	char		*name;		/* owned: final name inside dirfd */
	char		 tmpname[STORE_TMP_NAMELEN + 1]; /* in dirfd */
	/* Write-behind; the wb_* fields below wb are guarded by s->wb->mu. */
	bool		 wb;		/* writes are queued to s->wb */
	struct store_chunk *wb_head;	/* owned: queued chunks, oldest first */
	struct store_chunk *wb_tail;
	struct store_file *wb_next;	/* next in s->wb->ready */
	bool		 wb_ready;	/* listed in s->wb->ready */
	bool		 wb_busy;	/* a writer holds its chunks */
	uint64_t	 wb_queued;	/* chunks queued so far */
	uint64_t	 wb_written;	/* of those, written (in order) */
	int		 wb_rc;		/* first failed write: BM_ENOSPC, BM_EIO */
	int		 wb_errno;	/* its errno */
	/* store_file_tap: changed only while no writer holds f (wb->mu) */
	store_tap_fn	 tap;		/* NULL: none */
	void		*tap_arg;	/* borrowed */
};

static void	store_set_free(struct store_set *);
static void	store_wb_free(struct store *);

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

/* ns since the epoch of a file's timespec (as store_stat gives it). */
static int64_t
store_timespec_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * STORE_NS + ts->tv_nsec;
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
/* Drop store_stat's cached parent directory. */
static void
store_stat_dir_drop(struct store *s)
{
	if (s->stat_dirfd >= 0)
		store_close_fd(s->stat_dirfd);
	s->stat_dirfd = -1;
	s->stat_dir[0] = '\0';
}

static void	store_prefetch_discard(struct store *);
static bool	store_prefetch_take(struct store *, const char *,
		    struct local_stat *);

/*
 * The tree changes: the prefetch's kept lstats would no longer be what
 * is there, and store_clean_temps must walk again.
 */
static void
store_tree_changes(struct store *s)
{
	store_prefetch_discard(s);
	s->no_temps = false;
}

/* The tree may change: store_tree_changes, and the cached parent goes. */
static void
store_stat_forget(struct store *s)
{
	store_stat_dir_drop(s);
	store_tree_changes(s);
}

/* st as store_stat reports it. */
static void
store_local_of(const struct stat *st, struct local_stat *ret)
{
	if (S_ISREG(st->st_mode))
		ret->type = 'f';
	else if (S_ISDIR(st->st_mode))
		ret->type = 'd';
	else if (S_ISLNK(st->st_mode))
		ret->type = 'l';
	else
		ret->type = '?';
	ret->size = (int64_t)st->st_size;
	ret->mtime = (int64_t)st->st_mtim.tv_sec * STORE_NS +
	    st->st_mtim.tv_nsec;
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
		if (mkdirat(dirfd, name, s->dir_mode) == 0) {
			made = true;
			s->changes++;
		}
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

/*
 * Fill buf with STORE_TMP_PREFIX and 8 hex digits: splitmix64 of a
 * per-process random seed (getrandom(2) once) plus a counter, so a name
 * costs no system call; O_EXCL and STORE_TMP_TRIES settle a collision.
 */
static int
store_tmpname(char buf[STORE_TMP_NAMELEN + 1])
{
	static _Atomic uint64_t	 seed, next;
	uint64_t		 s = atomic_load(&seed), z = 0;
	ssize_t			 n;

	if (s == 0) {
		if ((n = getrandom(&s, sizeof(s), 0)) != (ssize_t)sizeof(s)) {
			if (n != -1)
				errno = EIO;
			return BM_EIO;
		}
		s |= 1;		/* never 0: 0 means not yet drawn */
		if (!atomic_compare_exchange_strong(&seed, &z, s))
			s = z;	/* another thread drew first */
	}
	z = text_mix64(s + TEXT_GOLDEN64 * (atomic_fetch_add(&next, 1) + 1));
	(void)snprintf(buf, STORE_TMP_NAMELEN + 1, "%s%08x", STORE_TMP_PREFIX,
	    (unsigned)(z >> 32));
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
 * See include/biomirror/store.h.
 * Sandbox: create directories along dest.
 */
int
store_make_dest(const char *dest, mode_t dir_mode)
{
	bool	 made;
	int	 fd, rc;

	if ((rc = store_mkdir_p(dest, dir_mode, &made)) != 0 || !made)
		return rc;
	if ((fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return BM_EIO;
	rc = fchmod(fd, dir_mode) == -1 ? BM_EIO : 0;
	store_close_fd(fd);
	return rc;
}

/*
 * Open the destination directory dest (a path from the config; borrowed,
 * copied) with O_DIRECTORY|O_CLOEXEC, mkdir -p first; dest and its parents
 * may be symlinks (docs/internals.md, "The store's invariants").  *ret is
 * owned by the caller (store_close).  Returns 0, BM_EINVAL (NULL or empty
 * dest), BM_EIO (errno kept: ENOTDIR when dest is a file or a symlink to
 * one, EACCES or EROFS when we cannot write into it) or BM_ENOMEM.  Never
 * BM_EUNSAFE.  Sandbox: create directories along dest, read-write beneath.
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
	(void)store_prefetch_stop(s, false, NULL);
	store_stat_forget(s);
	store_wb_free(s);
	store_close_fd(s->fd);
	store_set_free(s->set);
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
 * or not a directory), BM_EINVAL (NULL) or BM_EIO (errno kept).  While
 * a prefetch runs, its lstat of path (if kept) is taken instead.
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
	if (store_prefetch_take(s, path, ret))
		return 0;
	if (s->stat_dirfd == -1 || strcmp(dir, s->stat_dir) != 0) {
		store_stat_dir_drop(s);
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
	store_local_of(&st, ret);
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
	(void)store_file_drain(f);	/* no writer may hold f's fd */
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
	const int	 flags = O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW |
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
	store_tree_changes(s);		/* a new temp file */
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
 * pwrite all len bytes of buf at off of f's temp file, retrying short
 * writes and EINTR, and start writeback of a large file as it comes in
 * (without waiting for it), so that the syncfs before the batch's renames
 * finds little left to write.  Called by one thread at a time per file
 * (the loop, or the writer that holds f).  Returns 0, BM_ENOSPC or BM_EIO
 * (errno kept).
 */
static int
store_pwrite(struct store_file *f, uint64_t off, const uint8_t *p,
    size_t len)
{
	ssize_t		 w;

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
		f->unflushed += (uint64_t)w;
	}
	/* Advisory: a failure changes nothing. */
	if (f->unflushed >= STORE_WRITEBACK_BYTES) {
		(void)sync_file_range(f->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
		f->unflushed = 0;
	}
	return 0;
}

/* Append f to wb's ready list (wb->mu held; f neither busy nor listed). */
static void
store_wb_ready(struct store_wb *wb, struct store_file *f)
{
	f->wb_next = NULL;
	f->wb_ready = true;
	if (wb->ready_tail != NULL)
		wb->ready_tail->wb_next = f;
	else
		wb->ready = f;
	wb->ready_tail = f;
	(void)pthread_cond_signal(&wb->work);
}

/*
 * Writer thread: take the chunks of the first ready file, write them in
 * order, count them written, give the chunks back.  After a failed write
 * the file's later chunks are dropped (counted, not written): its first
 * error is what every later call on it returns.
 */
static void *
store_wb_main(void *arg)
{
	struct store_wb	*wb = arg;
	struct store_file *f;
	struct store_chunk *c, *list, *last;
	uint64_t	 n;
	int		 rc, err;

	(void)pthread_mutex_lock(&wb->mu);
	for (;;) {
		while (wb->ready == NULL && !wb->stop)
			(void)pthread_cond_wait(&wb->work, &wb->mu);
		if ((f = wb->ready) == NULL)
			break;
		if ((wb->ready = f->wb_next) == NULL)
			wb->ready_tail = NULL;
		f->wb_ready = false;
		f->wb_busy = true;
		list = f->wb_head;
		f->wb_head = f->wb_tail = NULL;
		rc = f->wb_rc;
		(void)pthread_mutex_unlock(&wb->mu);

		n = 0;
		err = 0;
		for (c = list, last = NULL; c != NULL; last = c, c = c->next) {
			n++;
			if (rc == 0 && (rc = store_pwrite(f, c->off, c->data,
			    c->len)) != 0)
				err = errno;
			else if (rc == 0 && f->tap != NULL)
				f->tap(f->tap_arg, c->off, c->data, c->len);
		}

		(void)pthread_mutex_lock(&wb->mu);
		if (last != NULL) {
			last->next = wb->spare;
			wb->spare = list;
		}
		if (rc != 0 && f->wb_rc == 0) {
			f->wb_rc = rc;
			f->wb_errno = err;
		}
		f->wb_written += n;
		f->wb_busy = false;
		if (f->wb_head != NULL)
			store_wb_ready(wb, f);
		(void)pthread_cond_broadcast(&wb->done);
	}
	(void)pthread_mutex_unlock(&wb->mu);
	return NULL;
}

/* Stop s's writers (every file's chunks are written by then) and free. */
static void
store_wb_free(struct store *s)
{
	struct store_wb	*wb = s->wb;
	struct store_chunk *c;
	unsigned	 i;

	if (wb == NULL)
		return;
	(void)pthread_mutex_lock(&wb->mu);
	wb->stop = true;
	(void)pthread_cond_broadcast(&wb->work);
	(void)pthread_mutex_unlock(&wb->mu);
	for (i = 0; i < wb->nth; i++)
		(void)pthread_join(wb->th[i], NULL);
	while ((c = wb->spare) != NULL) {
		wb->spare = c->next;
		free(c);
	}
	(void)pthread_cond_destroy(&wb->done);
	(void)pthread_cond_destroy(&wb->work);
	(void)pthread_mutex_destroy(&wb->mu);
	free(wb);
	s->wb = NULL;
}

/* Start s's writers.  0 or BM_ENOMEM (nothing left behind). */
static int
store_wb_new(struct store *s)
{
	struct store_wb	*wb;

	if ((wb = calloc(1, sizeof(*wb))) == NULL)
		return BM_ENOMEM;
	if (pthread_mutex_init(&wb->mu, NULL) != 0) {
		free(wb);
		return BM_ENOMEM;
	}
	if (pthread_cond_init(&wb->work, NULL) != 0) {
		(void)pthread_mutex_destroy(&wb->mu);
		free(wb);
		return BM_ENOMEM;
	}
	if (pthread_cond_init(&wb->done, NULL) != 0) {
		(void)pthread_cond_destroy(&wb->work);
		(void)pthread_mutex_destroy(&wb->mu);
		free(wb);
		return BM_ENOMEM;
	}
	s->wb = wb;
	while (wb->nth < STORE_WRITERS && pthread_create(&wb->th[wb->nth],
	    NULL, store_wb_main, wb) == 0)
		wb->nth++;
	if (wb->nth == 0) {
		store_wb_free(s);
		return BM_ENOMEM;
	}
	return 0;
}

/*
 * From now on, queue f's writes to the store's writer threads (started
 * on first use) instead of writing them in the caller's thread: for a
 * body that the event loop receives, so that the page-cache copy runs on
 * other cores.  f's later calls then wait for its queued writes where
 * they need them (store_file_drain, store_file_sync, store_commit, and
 * before its descriptor is closed).  Idempotent.  Returns 0, or BM_ENOMEM
 * when no thread could be started (writes then stay in the caller).
 * Not thread-safe against other calls on the same store's files from
 * other threads: call it on the thread that writes f.
 */
int
store_file_write_behind(struct store_file *f)
{
	int	 rc;

	if (f->wb)
		return 0;
	if (f->s->wb == NULL && (rc = store_wb_new(f->s)) != 0)
		return rc;
	f->wb = true;
	return 0;
}

/* Queue len bytes of p at off to f's writer (see store_file_write). */
static int
store_wb_write(struct store_file *f, uint64_t off, const uint8_t *p,
    size_t len)
{
	struct store_wb	*wb = f->s->wb;
	struct store_chunk *c, *t;
	size_t		 n;
	int		 rc = 0;

	(void)pthread_mutex_lock(&wb->mu);
	while (len > 0 && (rc = f->wb_rc) == 0) {
		/* The newest queued chunk continues here: fill it up. */
		t = f->wb_tail;
		if (t != NULL && t->off + t->len == off &&
		    t->len < STORE_WB_CHUNK) {
			n = STORE_WB_CHUNK - t->len < len ?
			    STORE_WB_CHUNK - t->len : len;
			memcpy(t->data + t->len, p, n);
			t->len += n;
		} else {
			while ((c = wb->spare) == NULL && wb->nchunks >=
			    STORE_WB_MAX / STORE_WB_CHUNK && f->wb_rc == 0)
				(void)pthread_cond_wait(&wb->done, &wb->mu);
			if ((rc = f->wb_rc) != 0)
				break;
			if (c != NULL)
				wb->spare = c->next;
			else if ((c = malloc(sizeof(*c) + STORE_WB_CHUNK)) ==
			    NULL) {
				rc = BM_ENOMEM;
				break;
			} else
				wb->nchunks++;
			/* Not yet queued: no lock needed for the copy. */
			(void)pthread_mutex_unlock(&wb->mu);
			n = len < STORE_WB_CHUNK ? len : STORE_WB_CHUNK;
			memcpy(c->data, p, n);
			c->off = off;
			c->len = n;
			c->next = NULL;
			(void)pthread_mutex_lock(&wb->mu);
			if (f->wb_tail != NULL)
				f->wb_tail->next = c;
			else
				f->wb_head = c;
			f->wb_tail = c;
			f->wb_queued++;
			if (!f->wb_busy && !f->wb_ready)
				store_wb_ready(wb, f);
		}
		p += n;
		off += n;
		len -= n;
		if (off > f->length)
			f->length = off;
	}
	if (rc != 0 && rc != BM_ENOMEM)
		errno = f->wb_errno;
	(void)pthread_mutex_unlock(&wb->mu);
	return rc;
}

/*
 * Write len bytes of buf (borrowed) at byte offset off of the temp file;
 * ranges may come in any order and overlap.  Retries short writes and
 * EINTR.  With write-behind (store_file_write_behind) the bytes are
 * copied and queued, and the first error of an earlier queued write is
 * returned instead.  Returns 0, BM_ENOSPC (ENOSPC, EDQUOT), BM_ENOMEM
 * (write-behind: no memory for a chunk) or BM_EIO (errno kept; EFBIG when
 * off + len does not fit in off_t).
 * Sandbox: write to an open fd only.
 */
int
store_file_write(struct store_file *f, uint64_t off, const void *buf,
    size_t len)
{
	int	 rc;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off) {
		errno = EFBIG;
		return BM_EIO;
	}
	if (f->wb)
		return store_wb_write(f, off, buf, len);
	if ((rc = store_pwrite(f, off, buf, len)) != 0)
		return rc;
	if (off + len > f->length)
		f->length = off + len;
	if (f->tap != NULL)
		f->tap(f->tap_arg, off, buf, len);
	return 0;
}

void
store_file_tap(struct store_file *f, store_tap_fn fn, void *arg)
{
	struct store_wb	*wb = f->s->wb;

	if (!f->wb || wb == NULL) {
		f->tap = fn;
		f->tap_arg = arg;
		return;
	}
	/* A writer that holds f calls the tap without the lock: wait. */
	(void)pthread_mutex_lock(&wb->mu);
	while (f->wb_busy)
		(void)pthread_cond_wait(&wb->done, &wb->mu);
	f->tap = fn;
	f->tap_arg = arg;
	(void)pthread_mutex_unlock(&wb->mu);
}

/*
 * Wait until every write queued to f so far is in its temp file.
 * Returns 0, or the first failed write's BM_ENOSPC or BM_EIO (errno
 * kept).  Without write-behind: 0 at once.
 */
int
store_file_drain(struct store_file *f)
{
	struct store_wb	*wb = f->s->wb;
	uint64_t	 target;
	int		 rc;

	if (!f->wb || wb == NULL)
		return 0;
	(void)pthread_mutex_lock(&wb->mu);
	target = f->wb_queued;
	while (f->wb_written < target)
		(void)pthread_cond_wait(&wb->done, &wb->mu);
	if ((rc = f->wb_rc) != 0)
		errno = f->wb_errno;
	(void)pthread_mutex_unlock(&wb->mu);
	return rc;
}

/* Highest offset written + 1 (bytes): the temp file's current length. */
uint64_t
store_file_length(const struct store_file *f)
{
	return f->length;
}

/*
 * A new read-write descriptor of f's temp file (fcntl F_DUPFD_CLOEXEC)
 * into *ret_fd, owned by the caller (close it), so that a digest worker
 * can pread the bytes written so far whatever becomes of f meanwhile.
 * Returns 0 or BM_EIO (errno kept).
 * Sandbox: none beyond the open fd.
 */
int
store_file_dup(const struct store_file *f, int *ret_fd)
{
	int	 fd;

	if ((fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0)) == -1)
		return BM_EIO;
	*ret_fd = fd;
	return 0;
}

/*
 * Open the regular file at path (relative, checked, borrowed) for
 * reading, never following symlinks (also in parent components):
 * *ret_fd is O_RDONLY|O_CLOEXEC, owned by the caller; *ret (may be NULL)
 * gets its stat.  For re-hashing published files and reading sidecar
 * checksum files.  Returns 0, BM_ENOENT, BM_EUNSAFE (a symlink or not a
 * regular file) or BM_EIO (errno kept).
 * Sandbox: read files beneath the destination.
 */
int
store_open_read(struct store *s, const char *path, int *ret_fd,
    struct local_stat *ret)
{
	const char	*name;
	struct stat	 st;
	int		 dirfd = -1, fd = -1, rc;

	if ((rc = store_parent(s, path, false, &dirfd, &name)) != 0)
		goto out;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC);
	if (fd == -1) {
		rc = errno == ENOENT ? BM_ENOENT : errno == ELOOP ?
		    BM_EUNSAFE : BM_EIO;
		goto out;
	}
	if (fstat(fd, &st) == -1) {
		rc = BM_EIO;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = BM_EUNSAFE;
		goto out;
	}
	if (ret != NULL) {
		ret->type = 'f';
		ret->size = (int64_t)st.st_size;
		ret->mtime = (int64_t)st.st_mtim.tv_sec * 1000000000LL +
		    st.st_mtim.tv_nsec;
	}
	*ret_fd = fd;
	fd = -1;
	rc = 0;
out:
	store_close_fd(fd);
	store_close_fd(dirfd);
	return rc;
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

/* True when name is one of our temp names: prefix and 8 hex digits. */
static bool
store_is_tmpname(const char *name)
{
	size_t	 i;

	if (strlen(name) != STORE_TMP_NAMELEN ||
	    strncmp(name, STORE_TMP_PREFIX, STORE_PREFIX_LEN) != 0)
		return false;
	for (i = STORE_PREFIX_LEN; i < STORE_TMP_NAMELEN; i++)
		if (strchr("0123456789abcdef", name[i]) == NULL)
			return false;
	return true;
}

/*
 * Reopen the temp file tmpname (borrowed; a name store_file_tmpname()
 * gave, checked) beside path (relative, checked, borrowed) to continue
 * writing it: a regular file we can write, not a symlink, at most size
 * bytes long.  *ret is owned by the caller as from store_file_open().
 * Returns 0, BM_ENOENT (gone), BM_EUNSAFE (bad path or name, not a
 * regular file), BM_ECHECKSUM (longer than size), BM_ENOMEM or BM_EIO.
 * Sandbox: write regular files beneath the destination.
 */
int
store_file_resume(struct store *s, const char *path, const char *tmpname,
    int64_t size, struct store_file **ret)
{
	struct store_file	*f = NULL;
	struct stat		 st, dst;
	const char		*name;
	int			 dirfd = -1, rc;

	if (tmpname == NULL || !store_is_tmpname(tmpname))
		return BM_EUNSAFE;
	if ((rc = store_parent(s, path, false, &dirfd, &name)) != 0)
		goto out;
	if ((f = calloc(1, sizeof(*f))) == NULL ||
	    (f->name = strdup(name)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	f->s = s;
	f->dirfd = dirfd;
	dirfd = -1;
	/* Readable too: store_file_dup() hands it to the hashers. */
	f->fd = openat(f->dirfd, tmpname, O_RDWR | O_NOFOLLOW | O_CLOEXEC |
	    O_NONBLOCK);
	if (f->fd == -1) {
		rc = errno == ENOENT ? BM_ENOENT : errno == ELOOP ?
		    BM_EUNSAFE : BM_EIO;
		goto out;
	}
	if (fstat(f->fd, &st) == -1 || fstat(f->dirfd, &dst) == -1) {
		rc = BM_EIO;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = BM_EUNSAFE;
		goto out;
	}
	if (size < 0 || st.st_size > size) {
		rc = BM_ECHECKSUM;
		goto out;
	}
	f->dir_dev = dst.st_dev;
	f->dir_ino = dst.st_ino;
	f->length = (uint64_t)st.st_size;
	memcpy(f->tmpname, tmpname, STORE_TMP_NAMELEN + 1);
	*ret = f;
	f = NULL;
	rc = 0;
out:
	store_close_fd(dirfd);
	store_file_free(f, false);	/* never unlink what we did not make */
	return rc;
}

/* The temp file's name in its directory (borrowed, valid while f lives). */
const char *
store_file_tmpname(const struct store_file *f)
{
	return f->tmpname;
}

/*
 * Make the bytes written to f so far durable (fdatasync), so that the
 * ranges they fill may be recorded for resume.  Returns 0, BM_ENOSPC or
 * BM_EIO (errno kept).
 * Sandbox: an open fd only.
 */
int
store_file_sync(struct store_file *f)
{
	int	 rc;

	if ((rc = store_file_drain(f)) != 0)
		return rc;
	while (fdatasync(f->fd) == -1) {
		if (errno != EINTR)
			return store_errno_rc(errno);
	}
	return 0;
}

/*
 * Close f and free it, leaving the temp file on disk for a later run
 * (its ranges are recorded).  NULL is a no-op.  Keeps errno.
 */
void
store_file_keep(struct store_file *f)
{
	store_file_free(f, false);
}

/* Commit step 1 for one item: byte count, mtime, mode. */
static int
store_commit_prepare(struct store *s, struct store_commit_item *it)
{
	struct timespec	 ts[2];
	struct stat	 st;
	int		 rc;

	if (it->file == NULL || it->file->s != s)
		return BM_EINVAL;
	if ((rc = store_file_drain(it->file)) != 0)
		return rc;
	if (it->size < 0)
		return BM_ECHECKSUM;
	store_ns_to_timespec(it->mtime, &ts[0]);
	ts[1] = ts[0];
	if (futimens(it->file->fd, ts) == -1)
		return BM_EIO;
	if (fchmod(it->file->fd, s->file_mode) == -1)
		return BM_EIO;
	/*
	 * One fstat for both checks (the file is ours, 0600, and no write
	 * is queued): its byte count, and the time the file system kept (one
	 * it cannot store is clamped).  A file of the wrong size is removed.
	 */
	if (fstat(it->file->fd, &st) == -1)
		return BM_EIO;
	if ((int64_t)st.st_size != it->size)
		return BM_ECHECKSUM;
	it->mtime = store_timespec_ns(&st.st_mtim);
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

	/*
	 * A new name (the common case of a cold run) needs no look first:
	 * RENAME_NOREPLACE (renameat2(2), Linux 3.15) fails with EEXIST
	 * when anything is there, and then the check below decides.
	 * EINVAL or ENOSYS: the file system cannot; check and rename.
	 */
	if (renameat2(f->dirfd, f->tmpname, f->dirfd, f->name,
	    RENAME_NOREPLACE) == 0) {
		f->tmpname[0] = '\0';
		return 0;
	}
	if (errno != EEXIST && errno != EINVAL && errno != ENOSYS)
		return store_errno_rc(errno);
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
 * Commit step 4: make the renames durable: fsync each distinct parent of
 * a published item once, or, past STORE_SYNC_PARENTS of them all on the
 * destination's file system (st: the destination's fstat), one syncfs
 * of it (one writeback pass and one
 * cache flush instead of a synchronous write per directory; a batch of a
 * tree with a file or two per directory would otherwise fsync up to a
 * thousand).  A failed fsync
 * marks that directory's items BM_EIO, a failed syncfs every published
 * item: their names are visible but not known durable, so the manifest
 * must not record them.
 */
static void
store_commit_sync_parents(struct store *s, const struct stat *st,
    struct store_commit_item *items, size_t n)
{
	struct store_commit_item	**v;
	size_t				  i, j, nv = 0, nparents = 0;
	int				  err;
	bool				  good, one_fs;

	if ((v = calloc(n, sizeof(*v))) == NULL) {
		/* XXX: out of memory: fsync every parent, slow but right. */
		for (i = 0; i < n; i++)
			if (items[i].rc == 0 &&
			    fsync(items[i].file->dirfd) == -1) {
				items[i].rc = BM_EIO;
				items[i].err = errno;
			}
		return;
	}
	for (i = 0; i < n; i++)
		if (items[i].rc == 0)
			v[nv++] = &items[i];
	qsort(v, nv, sizeof(*v), store_cmp_parent);
	for (i = 0; i < nv; i++)
		if (i == 0 || store_cmp_parent(&v[i - 1], &v[i]) != 0)
			nparents++;
	/* syncfs covers the destination's file system only (no mounts). */
	one_fs = nparents > STORE_SYNC_PARENTS;
	for (i = 0; i < nv && one_fs; i++)
		one_fs = v[i]->file->dir_dev == st->st_dev;
	if (one_fs) {
		good = syncfs(s->fd) == 0;
		err = good ? 0 : errno;
		for (i = 0; i < nv && !good; i++) {
			v[i]->rc = BM_EIO;
			v[i]->err = err;
		}
		free(v);
		return;
	}
	for (i = 0; i < nv; i = j) {
		good = fsync(v[i]->file->dirfd) == 0;
		err = good ? 0 : errno;
		for (j = i; j < nv && store_cmp_parent(&v[i], &v[j]) == 0; j++)
			if (!good) {
				v[j]->rc = BM_EIO;
				v[j]->err = err;
			}
	}
	free(v);
}

/*
 * syncfs(2) of the destination (st: its fstat) does not reach a file
 * system mounted beneath it: each prepared item whose temp file lies on another one is
 * fsynced itself before its rename (a failure: rc BM_EIO, not renamed).
 */
static void
store_commit_sync_mounts(const struct stat *st,
    struct store_commit_item *items, size_t n)
{
	size_t		 i;

	for (i = 0; i < n; i++)
		if (items[i].rc == 0 && items[i].file->dir_dev != st->st_dev &&
		    fsync(items[i].file->fd) == -1) {
			items[i].rc = BM_EIO;
			items[i].err = errno;
		}
}

/*
 * Publish a batch of n items (array borrowed; every items[i].file is
 * owned by the store from the call on, freed, and set to NULL); the steps:
 * docs/internals.md, "The store's invariants".  items[i].rc gets 0 or why
 * the item was not published (BM_ECHECKSUM, BM_EUNSAFE, BM_EINVAL for a
 * NULL file, ...); failed items' temp files are removed.  Returns 0 when
 * the batch ran, or BM_EIO (errno kept) when syncfs failed: nothing
 * renamed, every temp file removed, every rc non-zero.
 * Sandbox: write, rename and remove files beneath the destination.
 */
int
store_commit(struct store *s, struct store_commit_item *items, size_t n)
{
	struct stat st;
	size_t	 i;
	int	 err, rc;

	store_stat_forget(s);

	for (i = 0; i < n; i++) {
		items[i].rc = store_commit_prepare(s, &items[i]);
		items[i].err = items[i].rc == BM_EIO ? errno : 0;
	}
	if (fstat(s->fd, &st) == -1 || syncfs(s->fd) == -1) {
		err = errno;
		for (i = 0; i < n; i++)
			if (items[i].rc == 0) {
				items[i].rc = BM_EIO;
				items[i].err = err;
			}
		errno = err;
		rc = BM_EIO;
		goto out;
	}
	store_commit_sync_mounts(&st, items, n);
	for (i = 0; i < n; i++)
		if (items[i].rc == 0) {
			items[i].rc = store_commit_rename(items[i].file);
			items[i].err = items[i].rc == BM_EIO ? errno : 0;
		}
	for (i = 0; i < n; i++)
		if (items[i].rc == 0)
			s->changes++;
	store_commit_sync_parents(s, &st, items, n);
	rc = 0;
out:
	for (i = 0; i < n; i++) {
		/* A published file has no temp name left to unlink. */
		store_file_free(items[i].file, true);
		items[i].file = NULL;
	}
	return rc;
}

/* Copy the whole of fd in to fd out (copy_file_range, else read/write). */
static int
store_copy_data(int in, int out)
{
	char	 buf[65536];
	ssize_t	 n, w, off;
	bool	 plain = false;

	for (;;) {
		if (!plain) {
			n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
			if (n == -1 && (errno == EXDEV || errno == EINVAL ||
			    errno == ENOSYS || errno == EOPNOTSUPP)) {
				plain = true;
				continue;
			}
		} else
			n = read(in, buf, sizeof(buf));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return store_errno_rc(errno);
		if (n == 0)
			return 0;
		for (off = 0; plain && off < n; off += w) {
			if ((w = write(out, buf + off, (size_t)(n - off))) == -1) {
				if (errno == EINTR) {
					w = 0;
					continue;
				}
				return store_errno_rc(errno);
			}
		}
	}
}

/*
 * Give the regular file name in dirfd (whose lstat is *st) a new inode
 * with the same content and mode and the times ts, renamed over it: the
 * other hard links (a published snapshot) keep the old inode untouched.
 * The copy is made durable by the syncfs before publication.
 */
static int
store_unshare(int dirfd, const char *name, const struct stat *st,
    const struct timespec ts[2])
{
	char		 tmp[STORE_TMP_NAMELEN + 1] = "";
	struct stat	 ist;
	int		 in = -1, out = -1, i, rc = BM_EIO;

	in = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in == -1) {
		rc = (errno == ENOENT) ? BM_ENOENT : BM_EIO;
		goto out;
	}
	if (fstat(in, &ist) == -1)
		goto out;
	if (ist.st_ino != st->st_ino || ist.st_dev != st->st_dev) {
		errno = EAGAIN;	/* replaced meanwhile: not ours to copy */
		goto out;
	}
	for (i = 0; i < STORE_TMP_TRIES && out == -1; i++) {
		if ((rc = store_tmpname(tmp)) != 0)
			goto out;
		out = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY |
		    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out == -1 && errno != EEXIST) {
			tmp[0] = '\0';
			rc = store_errno_rc(errno);
			goto out;
		}
	}
	if (out == -1) {
		tmp[0] = '\0';
		rc = BM_EIO;
		goto out;
	}
	if ((rc = store_copy_data(in, out)) != 0)
		goto out;
	rc = BM_EIO;
	if (fchmod(out, st->st_mode & 07777) == -1 || futimens(out, ts) == -1)
		goto out;
	if (renameat(dirfd, tmp, dirfd, name) == -1) {
		rc = store_errno_rc(errno);
		goto out;
	}
	tmp[0] = '\0';
	rc = 0;
out:
	if (tmp[0] != '\0') {
		i = errno;
		(void)unlinkat(dirfd, tmp, 0);
		errno = i;
	}
	store_close_fd(in);
	store_close_fd(out);
	return rc;
}

/*
 * Set the mtime (ns since the epoch; atime too) of the file, directory or
 * symlink at path (relative, checked, borrowed; never followed); nothing
 * is written when it is already that.  In a set store a shared inode gets
 * its own copy (docs/internals.md, "The store's invariants").  dir_only
 * (store_set_dir_mtime()): anything but a directory is BM_EUNSAFE.
 * Returns 0, BM_ENOENT, BM_EUNSAFE, BM_EINVAL (NULL), BM_ENOSPC (the copy)
 * or BM_EIO.  Sandbox: write attributes beneath the destination.
 */
static int
store_set_mtime_of(struct store *s, const char *path, int64_t mtime,
    bool dir_only, int64_t *ret_kept)
{
	struct timespec	 ts[2];
	struct stat	 st, now;
	const char	*name;
	int		 dirfd = -1, rc;

	store_tree_changes(s);		/* an mtime (and maybe a copy) */
	if ((rc = store_parent(s, path, false, &dirfd, &name)) != 0)
		goto out;
	store_ns_to_timespec(mtime, &ts[0]);
	ts[1] = ts[0];
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		rc = (errno == ENOENT) ? BM_ENOENT : BM_EIO;
		goto out;
	}
	if (dir_only && !S_ISDIR(st.st_mode)) {
		rc = BM_EUNSAFE;
		goto out;
	}
	if (ret_kept != NULL)
		*ret_kept = mtime;
	if (st.st_mtim.tv_sec == ts[0].tv_sec &&
	    st.st_mtim.tv_nsec == ts[0].tv_nsec) {
		rc = 0;
		goto out;
	}
	if (s->set != NULL && S_ISREG(st.st_mode) && st.st_nlink > 1) {
		if ((rc = store_unshare(dirfd, name, &st, ts)) != 0)
			goto out;
		s->changes++;
	} else if (utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) == -1) {
		rc = (errno == ENOENT) ? BM_ENOENT : BM_EIO;
		goto out;
	}
	/*
	 * A time out of the file system's range is clamped: what it kept
	 * is the answer, and setting it again is no change.
	 */
	if (fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0) {
		if (ret_kept != NULL)
			*ret_kept = store_timespec_ns(&now.st_mtim);
		if (now.st_mtim.tv_sec != st.st_mtim.tv_sec ||
		    now.st_mtim.tv_nsec != st.st_mtim.tv_nsec)
			s->changes++;
	} else
		s->changes++;
	rc = 0;
out:
	store_close_fd(dirfd);
	return rc;
}

int
store_set_mtime(struct store *s, const char *path, int64_t mtime)
{
	return store_set_mtime_of(s, path, mtime, false, NULL);
}

int
store_set_mtime_kept(struct store *s, const char *path, int64_t mtime,
    int64_t *ret_kept)
{
	return store_set_mtime_of(s, path, mtime, false, ret_kept);
}

int
store_set_dir_mtime(struct store *s, const char *path, int64_t mtime)
{
	return store_set_mtime_of(s, path, mtime, true, NULL);
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
	s->changes++;
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
		s->changes++;
		rc = 0;
		goto out;
	}
	err = errno;
	if (err == EISDIR || err == EPERM) {
		if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0) {
			s->changes++;
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

/*
 * A walk of the destination tree (store_clean_temps_except and
 * store_prefetch): fn is called for each entry but "." and ".." of each
 * directory, with rel holding the directory's path relative to the
 * destination ("" at the top) and type a DT_* code (DT_UNKNOWN resolved
 * with an lstat).  A directory entry for which fn returns 0 is then
 * descended into (never through a symlink, at most STORE_MAX_DEPTH
 * levels).  With all, the walk goes on after an error and returns the
 * first; else it stops at it.
 */
struct store_tree {
	int		(*fn)(struct store_tree *w, int dfd, const char *name,
			    unsigned char type);
	bool		 all;
	int		 skip_below;	/* > 0: directories this deep are not
					   entered (and no error); 0: the cap is
					   STORE_MAX_DEPTH, past which BM_ELIMIT */
	bool		 skipped;	/* a directory was not entered */
	char		 rel[PATH_MAX];
};

static int	store_tree_dir(struct store_tree *, int fd, int depth);

/* Descend into directory name of dfd with w->rel extended by it. */
static int
store_tree_subdir(struct store_tree *w, int dfd, const char *name, int depth)
{
	size_t	 len = strlen(w->rel);
	int	 fd, rc;

	if (depth >= STORE_MAX_DEPTH)
		return BM_ELIMIT;
	if ((size_t)snprintf(w->rel + len, sizeof(w->rel) - len, "%s%s",
	    len ? "/" : "", name) >= sizeof(w->rel) - len) {
		w->rel[len] = '\0';
		return BM_ELIMIT;
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)	/* gone or swapped for a link: skip it */
		rc = (errno == ENOENT || errno == ELOOP ||
		    errno == ENOTDIR) ? 0 : BM_EIO;
	else
		rc = store_tree_dir(w, fd, depth + 1);
	w->rel[len] = '\0';
	return rc;
}

/* What store_each_entry() calls for each entry of the directory dfd. */
typedef int (*store_entry_fn)(int dfd, const struct dirent *de, void *arg);

/*
 * Call fn(fd, entry, arg) for each entry of the open directory fd (owned:
 * closed here) but "." and "..", in readdir(3) order.  With all, go on
 * after an error and return the first; else stop at it.  Returns 0, fn's
 * error or BM_EIO (readdir failed; errno kept).
 */
static int
store_each_entry(int fd, bool all, store_entry_fn fn, void *arg)
{
	struct dirent	*de;
	DIR		*d;
	int		 r, rc = 0;

	if ((d = fdopendir(fd)) == NULL) {
		store_close_fd(fd);
		return BM_EIO;
	}
	while (rc == 0 || all) {
		errno = 0;
		if ((de = readdir(d)) == NULL) {
			if (errno != 0 && rc == 0)
				rc = BM_EIO;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		r = fn(dirfd(d), de, arg);
		if (r != 0 && rc == 0)
			rc = r;
	}
	r = errno;
	(void)closedir(d);
	errno = r;
	return rc;
}

struct store_tree_at {
	struct store_tree *w;
	int		 depth;
};

/* store_tree_dir's work for one directory entry of dfd. */
static int
store_tree_one(int dfd, const struct dirent *de, void *arg)
{
	struct store_tree_at *at = arg;
	struct stat	 st;
	unsigned char	 type = de->d_type;
	int		 rc;

	if (type == DT_UNKNOWN) {
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			return (errno == ENOENT) ? 0 : BM_EIO;
		type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ?
		    DT_REG : S_ISLNK(st.st_mode) ? DT_LNK : DT_UNKNOWN;
	}
	if ((rc = at->w->fn(at->w, dfd, de->d_name, type)) != 0 ||
	    type != DT_DIR)
		return rc;
	if (at->w->skip_below > 0 && at->depth + 1 >= at->w->skip_below) {
		at->w->skipped = true;
		return 0;
	}
	return store_tree_subdir(at->w, dfd, de->d_name, at->depth);
}

/* Walk the directory fd (owned: closed here) and below. */
static int
store_tree_dir(struct store_tree *w, int fd, int depth)
{
	struct store_tree_at at = { w, depth };

	return store_each_entry(fd, w->all, store_tree_one, &at);
}

/*
 * Walk the whole destination from a fresh open file description of its
 * top (readdir must not move s->fd's offset).  Returns what
 * store_tree_dir returns, or BM_EIO when the top cannot be opened.
 */
static int
store_tree_top(int topfd, struct store_tree *w)
{
	int	 fd;

	if ((fd = openat(topfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return BM_EIO;
	w->rel[0] = '\0';
	return store_tree_dir(w, fd, 0);
}

/* What store_clean_temps_except walks with (w first: fn casts back). */
struct store_clean {
	struct store_tree w;
	const char *const *keep;	/* borrowed: sorted relative paths to keep */
	size_t		 nkeep;
	size_t		 n;		/* temp files removed */
};

static int
store_keep_cmp(const void *key, const void *elem)
{
	return strcmp(key, *(const char *const *)elem);
}

/* True when temp file name in the directory being walked is to be kept. */
static bool
store_clean_keeps(const struct store_clean *c, const char *name)
{
	char	 path[PATH_MAX];

	if (c->nkeep == 0)
		return false;
	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", c->w.rel,
	    c->w.rel[0] ? "/" : "", name) >= sizeof(path))
		return false;
	return bsearch(path, c->keep, c->nkeep, sizeof(*c->keep),
	    store_keep_cmp) != NULL;
}

/* store_clean_temps for one entry: remove it when it is a stale temp file. */
static int
store_clean_entry(struct store_tree *w, int dfd, const char *name,
    unsigned char type)
{
	struct store_clean *c = (struct store_clean *)w;

	if (type == DT_DIR ||
	    strncmp(name, STORE_TMP_PREFIX, STORE_PREFIX_LEN) != 0)
		return 0;
	if (type == DT_REG && store_clean_keeps(c, name))
		return 0;
	if (unlinkat(dfd, name, 0) == -1)
		return (errno == ENOENT) ? 0 : BM_EIO;
	c->n++;
	return 0;
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
	return store_clean_temps_except(s, NULL, 0, ret_n);
}

/*
 * store_clean_temps(), except that the regular temp files whose relative
 * paths ("dir/.biomirror-tmp.XXXXXXXX") are among keep[0..nkeep) (sorted
 * by strcmp, borrowed) are left alone: their finished ranges are
 * recorded for resume.  Same returns.
 */
int
store_clean_temps_except(struct store *s, const char *const *keep,
    size_t nkeep, size_t *ret_n)
{
	struct store_clean *c;
	int		 rc;

	if (s->no_temps) {
		if (ret_n != NULL)
			*ret_n = 0;
		return 0;
	}
	store_stat_forget(s);

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return BM_ENOMEM;
	c->w.fn = store_clean_entry;
	c->w.all = true;
	c->keep = keep;
	c->nkeep = nkeep;
	rc = store_tree_top(s->fd, &c->w);
	if (ret_n != NULL)
		*ret_n = c->n;
	free(c);
	return rc;
}

/*
 * Prefetch (store_prefetch_start): a thread lstats every entry of the
 * destination tree (STORE_PREFETCH_DEPTH levels deep) while the run lists
 * upstream, so that the planner's store_stat calls, one per listed file,
 * find the inodes in the kernel's cache instead of reading them from disk
 * one after another.  It keeps what it saw (up to STORE_PREFETCH_KEEP
 * entries, not directories) and store_stat takes a kept lstat instead of
 * making a second one: the destination is lstat'ed once per run.  The
 * kept lstats go at the first change to the tree (store_stat_forget) and
 * at the stop.  A walk of the whole tree that saw no temp file, with no
 * change meanwhile, spares store_clean_temps its own walk (no_temps).
 * It only reads; it stops at its stop flag, checked at every entry.
 */
struct store_pf_ent {
	struct store_pf_ent *next;	/* owned: the hash chain */
	struct local_stat st;
	char		 path[];	/* relative, as store_stat is asked */
};

struct store_prefetch {
	struct store_tree w;		/* first: fn casts back */
	int		 fd;		/* owned: the destination, for the thread */
	pthread_t	 thread;
	atomic_bool	 stop;
	size_t		 n;		/* entries looked at, read after the join */
	int		 rc;		/* the walk's result, read after the join */
	pthread_mutex_t	 mu;		/* guards keep, nkept, discarded */
	struct store_pf_ent **keep;	/* owned: STORE_PREFETCH_BUCKETS chains,
					   NULL when none could be allocated */
	size_t		 nkept;		/* entries in keep */
	size_t		 nadded;	/* the thread's: entries it put in keep,
					   <= STORE_PREFETCH_KEEP */
	bool		 discarded;	/* the tree changed: keep nothing more */
	bool		 joined;	/* store_prefetch_wait joined the thread */
	size_t		 ntemps;	/* temp files seen, read after the join */
};

/* FNV-1a of a path: its chain in keep. */
static size_t
store_pf_hash(const char *path)
{
	return (size_t)(text_fnv1a(path, strlen(path)) %
	    STORE_PREFETCH_BUCKETS);
}

/* Keep the lstat st of w->rel/name (a full keep or no memory: skipped). */
static void
store_pf_keep(struct store_prefetch *pf, const char *name,
    const struct stat *st)
{
	struct store_pf_ent *e;
	size_t		 dl = strlen(pf->w.rel), nl = strlen(name), b;

	if (pf->keep == NULL || pf->nadded >= STORE_PREFETCH_KEEP ||
	    (e = malloc(sizeof(*e) + dl + 1 + nl + 1)) == NULL)
		return;
	pf->nadded++;
	memcpy(e->path, pf->w.rel, dl);
	if (dl > 0)
		e->path[dl++] = '/';
	memcpy(e->path + dl, name, nl + 1);
	store_local_of(st, &e->st);
	b = store_pf_hash(e->path);
	(void)pthread_mutex_lock(&pf->mu);
	if (pf->discarded) {
		(void)pthread_mutex_unlock(&pf->mu);
		free(e);
		return;
	}
	e->next = pf->keep[b];
	pf->keep[b] = e;
	pf->nkept++;
	(void)pthread_mutex_unlock(&pf->mu);
}

/* Free every kept lstat and keep no more (pf->mu held, or no thread). */
static void
store_pf_free_kept(struct store_prefetch *pf)
{
	struct store_pf_ent *e, *next;
	size_t		 b;

	pf->discarded = true;
	if (pf->keep == NULL)
		return;
	for (b = 0; b < STORE_PREFETCH_BUCKETS; b++) {
		for (e = pf->keep[b]; e != NULL; e = next) {
			next = e->next;
			free(e);
		}
		pf->keep[b] = NULL;
	}
	pf->nkept = 0;
}

/* The tree changes: the kept lstats are dropped (no-op without one). */
static void
store_prefetch_discard(struct store *s)
{
	struct store_prefetch *pf = s->prefetch;

	if (pf == NULL)
		return;
	/* keep is looked at under the lock: openers call this at once. */
	(void)pthread_mutex_lock(&pf->mu);
	if (pf->keep != NULL)
		store_pf_free_kept(pf);
	(void)pthread_mutex_unlock(&pf->mu);
}

/*
 * store_stat's look-up: true with *ret filled when the prefetch kept an
 * lstat of path (taken out: a second store_stat of it lstats again).
 */
static bool
store_prefetch_take(struct store *s, const char *path,
    struct local_stat *ret)
{
	struct store_prefetch *pf = s->prefetch;
	struct store_pf_ent **pp, *e = NULL;

	if (pf == NULL || pf->keep == NULL)
		return false;
	(void)pthread_mutex_lock(&pf->mu);
	for (pp = &pf->keep[store_pf_hash(path)]; *pp != NULL;
	    pp = &(*pp)->next) {
		if (strcmp((*pp)->path, path) == 0) {
			e = *pp;
			*pp = e->next;
			pf->nkept--;
			break;
		}
	}
	(void)pthread_mutex_unlock(&pf->mu);
	if (e == NULL)
		return false;
	*ret = e->st;
	free(e);
	return true;
}

static int
store_prefetch_entry(struct store_tree *w, int dfd, const char *name,
    unsigned char type)
{
	struct store_prefetch *pf = (struct store_prefetch *)w;
	struct stat	 st;

	if (atomic_load_explicit(&pf->stop, memory_order_relaxed))
		return BM_EINTR;
	pf->n++;
	if (type != DT_DIR &&
	    strncmp(name, STORE_TMP_PREFIX, STORE_PREFIX_LEN) == 0)
		pf->ntemps++;
	/* A directory's inode is read by the walk's openat. */
	if (type != DT_DIR &&
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !S_ISDIR(st.st_mode))
		store_pf_keep(pf, name, &st);
	return 0;
}

static void *
store_prefetch_main(void *arg)
{
	struct store_prefetch *pf = arg;

	pf->rc = store_tree_top(pf->fd, &pf->w);
	return NULL;
}

/*
 * Start the prefetch of the destination's metadata on a thread of its own
 * (see struct store_prefetch); a store has at most one, and a second
 * start is a no-op.  Stop it with store_prefetch_stop() (store_close does
 * too).  Until then, or the first change to the tree, store_stat takes
 * the lstats it kept.  It only speeds up later store_stat calls (what they
 * return is the same, lstat'ed a little earlier): a failure to start is
 * returned (BM_ENOMEM, BM_EIO with errno kept, or BM_ELIMIT when no
 * thread could be created) but changes nothing else.
 * Sandbox: read directories and lstat entries beneath the destination.
 */
int
store_prefetch_start(struct store *s)
{
	struct store_prefetch *pf;
	int		 err;

	if (s->prefetch != NULL)
		return 0;
	if ((pf = calloc(1, sizeof(*pf))) == NULL)
		return BM_ENOMEM;
	pf->w.fn = store_prefetch_entry;
	pf->w.all = false;
	pf->w.skip_below = STORE_PREFETCH_DEPTH;
	atomic_init(&pf->stop, false);
	/* Without room to keep lstats it still warms the inodes. */
	pf->keep = calloc(STORE_PREFETCH_BUCKETS, sizeof(*pf->keep));
	if ((err = pthread_mutex_init(&pf->mu, NULL)) != 0) {
		free(pf->keep);
		free(pf);
		errno = err;
		return BM_ELIMIT;
	}
	if ((pf->fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0)) == -1) {
		err = errno;
		(void)pthread_mutex_destroy(&pf->mu);
		free(pf->keep);
		free(pf);
		errno = err;
		return BM_EIO;
	}
	if ((err = pthread_create(&pf->thread, NULL, store_prefetch_main,
	    pf)) != 0) {
		store_close_fd(pf->fd);
		(void)pthread_mutex_destroy(&pf->mu);
		free(pf->keep);
		free(pf);
		errno = err;
		return BM_ELIMIT;
	}
	s->prefetch = pf;
	return 0;
}

/*
 * Wait for the prefetch's walk to end (no-op without one); unlike
 * store_prefetch_stop() the lstats it kept stay for store_stat until the
 * stop or the next change to the tree.  Sandbox: none.
 */
void
store_prefetch_wait(struct store *s)
{
	struct store_prefetch *pf = s->prefetch;

	if (pf == NULL || pf->joined)
		return;
	(void)pthread_join(pf->thread, NULL);
	pf->joined = true;
}

/*
 * Stop the prefetch started by store_prefetch_start() and wait for its
 * thread; with finish, let it walk the whole tree first.  *ret_n (may be
 * NULL) gets the number of entries it looked at (0 when none was
 * running).  Returns 0 when the walk finished (directories deeper than
 * STORE_PREFETCH_DEPTH are left out), BM_EINTR when it was stopped
 * first, BM_EIO when a directory could not be read; none of these
 * matters to the sync, which stats what it needs itself.
 */
int
store_prefetch_stop(struct store *s, bool finish, size_t *ret_n)
{
	struct store_prefetch *pf = s->prefetch;
	int		 rc;

	if (ret_n != NULL)
		*ret_n = 0;
	if (pf == NULL)
		return 0;
	if (!finish)
		atomic_store(&pf->stop, true);
	if (!pf->joined)
		(void)pthread_join(pf->thread, NULL);
	store_close_fd(pf->fd);
	if (ret_n != NULL)
		*ret_n = pf->n;
	rc = pf->rc;
	/* discarded: the tree changed while it walked. */
	s->no_temps = rc == 0 && !pf->w.skipped && pf->ntemps == 0 &&
	    !pf->discarded;
	store_pf_free_kept(pf);
	free(pf->keep);
	(void)pthread_mutex_destroy(&pf->mu);
	free(pf);
	s->prefetch = NULL;
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

/*
 * publish = set (DESIGN.md "publish"; docs/biomirror.conf.5): DEST is a
 * symlink "NAME.biomirror/snapshots/ID", one complete version of the tree
 * per ID.  Which snapshot is published, working or old, when an
 * unpublished one is continued, and how a run writes and publishes:
 * docs/internals.md, "The snapshots of publish = set".  Every step leaves
 * a state store_open_set() completes or undoes (store_set_recover); names
 * made while a step is in flight start with STORE_TMP_PREFIX.
 */
#define SET_SUFFIX	".biomirror"
#define SET_SNAPS	"snapshots"
#define SET_CONVERT	"convert"	/* in DEST.biomirror, during conversion */
#define SET_MAX_SNAPS	1024		/* snapshot entries scanned */
#define SET_ID_DIGITS	18

struct store_set {
	int		 pfd;		/* owned: the directory holding DEST */
	int		 mfd;		/* owned: DEST.biomirror, -1 none (read-only) */
	int		 sfd;		/* owned: DEST.biomirror/snapshots, -1 none */
	char		*name;		/* owned: last component of DEST */
	int64_t		 run;		/* names a new snapshot; 0: read-only */
	int64_t		 published;	/* the snapshot DEST points at, -1 none */
	int64_t		 previous;	/* published before this run's publication, -1 */
	int64_t		 working;	/* the root when it is not published, -1 */
	int64_t		 maxid;		/* highest snapshot id present, -1 none */
	int64_t		 cont;		/* the only unpublished id to continue */
	int64_t		 discarded;	/* stale unpublished id dropped, -1 */
	bool		 reused;	/* working is an earlier run's snapshot */
	size_t		 held;		/* snapshots store_set_prune kept for
					   serve sessions holding them */
};

static void
store_set_free(struct store_set *set)
{
	if (set == NULL)
		return;
	store_close_fd(set->pfd);
	store_close_fd(set->mfd);
	store_close_fd(set->sfd);
	free(set->name);
	free(set);
}

/* A snapshot name: 1..SET_ID_DIGITS decimal digits, no leading zero. */
static int64_t
set_parse_id(const char *s)
{
	int64_t	 v = 0;
	size_t	 i;

	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9' || i >= SET_ID_DIGITS)
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (i == 0 || (s[0] == '0' && i > 1))
		return -1;
	return v;
}

/* The target text of DEST's symlink for snapshot id. */
static int
set_target(const struct store_set *set, int64_t id, char *buf, size_t len)
{
	int	 n;

	n = snprintf(buf, len, "%s" SET_SUFFIX "/" SET_SNAPS "/%lld",
	    set->name, (long long)id);
	return (n < 0 || (size_t)n >= len) ? BM_EINVAL : 0;
}

/*
 * The snapshot id the symlink name in set->pfd points at: -1 when it is
 * not a symlink of ours (its target is not NAME.biomirror/snapshots/ID).
 */
static int64_t
set_link_id(const struct store_set *set, const char *name)
{
	char	 buf[PATH_MAX], want[PATH_MAX];
	ssize_t	 n;
	size_t	 plen;

	n = readlinkat(set->pfd, name, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (set_target(set, 0, want, sizeof(want)) != 0)
		return -1;
	plen = strlen(want) - 1;	/* without the "0" */
	if ((size_t)n <= plen || strncmp(buf, want, plen) != 0)
		return -1;
	return set_parse_id(buf + plen);
}

static int	store_rmtree(int dirfd, const char *name, int depth);

/* store_rmtree_fd for one entry: a directory goes with its contents. */
static int
store_rmtree_one(int dfd, const struct dirent *de, void *arg)
{
	const int	*depth = arg;
	struct stat	 st;
	unsigned char	 type = de->d_type;

	if (type == DT_UNKNOWN &&
	    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
	if (type == DT_DIR)
		return store_rmtree(dfd, de->d_name, *depth + 1);
	if (unlinkat(dfd, de->d_name, 0) == -1 && errno != ENOENT)
		return BM_EIO;
	return 0;
}

/* Remove every entry of the open directory fd (owned: closed here). */
static int
store_rmtree_fd(int fd, int depth)
{
	return store_each_entry(fd, true, store_rmtree_one, &depth);
}

/*
 * Remove the directory name in dirfd with everything beneath it, never
 * following a symlink (a symlink or file there is just unlinked); gone
 * already is fine.  Returns 0, BM_ELIMIT (deeper than STORE_MAX_DEPTH) or
 * BM_EIO (errno kept).
 */
static int
store_rmtree(int dirfd, const char *name, int depth)
{
	int	 fd, rc;

	if (depth >= STORE_MAX_DEPTH)
		return BM_ELIMIT;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (fd == -1) {
		if (errno == ENOENT)
			return 0;
		if (errno != ELOOP && errno != ENOTDIR)
			return BM_EIO;
		if (unlinkat(dirfd, name, 0) == -1 && errno != ENOENT)
			return BM_EIO;
		return 0;
	}
	if ((rc = store_rmtree_fd(fd, depth)) != 0)
		return rc;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == -1 && errno != ENOENT)
		return BM_EIO;
	return 0;
}

/* Give the directory fd the mode and times of *st (a source directory). */
static int
store_copy_dir_attrs(int fd, const struct stat *st)
{
	struct timespec	 ts[2];

	ts[0] = st->st_atim;
	ts[1] = st->st_mtim;
	if (fchmod(fd, st->st_mode & 07777) == -1 || futimens(fd, ts) == -1)
		return BM_EIO;
	return 0;
}

static int	store_link_tree(int src, int dst, int depth);

/* store_link_tree for the subdirectory name of src, *st its lstat. */
static int
store_link_subdir(int src, int dst, const char *name, const struct stat *st,
    int depth)
{
	const int	 flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC;
	int		 sd = -1, dd = -1, rc;

	if (depth >= STORE_MAX_DEPTH)
		return BM_ELIMIT;
	if (mkdirat(dst, name, 0700) == -1 && errno != EEXIST)
		return store_errno_rc(errno);
	if ((sd = openat(src, name, flags)) == -1 ||
	    (dd = openat(dst, name, flags)) == -1) {
		rc = BM_EIO;
		goto out;
	}
	if ((rc = store_link_tree(sd, dd, depth + 1)) != 0)
		goto out;
	/* Last: linking into dd changed its mtime. */
	rc = store_copy_dir_attrs(dd, st);
out:
	store_close_fd(sd);
	store_close_fd(dd);
	return rc;
}

/*
 * Make the directory dst (empty) a copy of src made of hard links: every
 * directory is created (same mode and times), every other entry (files,
 * symlinks) is linked, never followed.  Temp files of the store are left
 * out.  Returns 0, BM_ELIMIT, BM_ENOSPC or BM_EIO (errno kept: EMLINK
 * when a file has too many links).
 */
struct store_link_at {
	int		 src, dst;	/* borrowed: the two directories */
	int		 depth;
};

/* store_link_tree for one entry of src. */
static int
store_link_one(int dfd, const struct dirent *de, void *arg)
{
	const struct store_link_at *at = arg;
	struct stat	 st;

	(void)dfd;	/* a second description of at->src */
	if (strncmp(de->d_name, STORE_TMP_PREFIX, STORE_PREFIX_LEN) == 0)
		return 0;
	if (fstatat(at->src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return (errno == ENOENT) ? 0 : BM_EIO;
	if (S_ISDIR(st.st_mode))
		return store_link_subdir(at->src, at->dst, de->d_name, &st,
		    at->depth);
	if (linkat(at->src, de->d_name, at->dst, de->d_name, 0) == -1 &&
	    errno != EEXIST)
		return store_errno_rc(errno);
	return 0;
}

static int
store_link_tree(int src, int dst, int depth)
{
	struct store_link_at at = { src, dst, depth };
	int		 fd;

	/* A fresh open file description: readdir must not move src's. */
	if ((fd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return BM_EIO;
	return store_each_entry(fd, false, store_link_one, &at);
}

/*
 * Complete or undo a conversion of a real directory DEST that was
 * interrupted (store_set_convert), from what is on disk:
 * - DEST.biomirror/convert is a directory: the first exchange happened
 *   (DEST is our symlink to snapshots/ID, which is a symlink to
 *   ../convert): do the second (snapshots/ID becomes the directory).
 * - convert is a symlink and DEST is missing: the fallback without
 *   RENAME_EXCHANGE moved DEST into snapshots/ID: put the symlink in place.
 * - convert is a symlink otherwise: remove it (before the first exchange
 *   it was not yet used; after the second it is left over).  A symlink
 *   left as snapshots/ID is removed by the snapshot scan.
 */
static int
store_set_recover(struct store_set *set)
{
	char		 idname[32];
	struct stat	 st, dst;
	int64_t		 id;

	if (fstatat(set->mfd, SET_CONVERT, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : BM_EIO;
	if (S_ISDIR(st.st_mode)) {
		if ((id = set_link_id(set, set->name)) < 0) {
			errno = EEXIST;
			return BM_EUNSAFE;
		}
		(void)snprintf(idname, sizeof(idname), "%lld", (long long)id);
		if (fstatat(set->sfd, idname, &dst, AT_SYMLINK_NOFOLLOW) == 0) {
			if (!S_ISLNK(dst.st_mode)) {
				errno = EEXIST;
				return BM_EUNSAFE;
			}
			if (renameat2(set->mfd, SET_CONVERT, set->sfd, idname,
			    RENAME_EXCHANGE) == -1)
				return BM_EIO;
		} else if (errno != ENOENT || renameat(set->mfd, SET_CONVERT,
		    set->sfd, idname) == -1)
			return BM_EIO;
	} else if (S_ISLNK(st.st_mode) &&
	    fstatat(set->pfd, set->name, &dst, AT_SYMLINK_NOFOLLOW) == -1 &&
	    errno == ENOENT) {
		if (renameat(set->mfd, SET_CONVERT, set->pfd, set->name) == -1)
			return BM_EIO;
	}
	if (unlinkat(set->mfd, SET_CONVERT, 0) == -1 && errno != ENOENT)
		return BM_EIO;
	(void)fsync(set->sfd);
	(void)fsync(set->mfd);
	(void)fsync(set->pfd);
	return 0;
}

/*
 * Turn the real directory DEST into snapshot id without copying and
 * without a moment in which DEST does not resolve:
 *   snapshots/ID -> ../convert and DEST.biomirror/convert -> NAME.biomirror/
 *   snapshots/ID are made; DEST and convert are exchanged (RENAME_EXCHANGE:
 *   DEST is now our symlink, reaching the directory through
 *   snapshots/ID -> ../convert); then convert and snapshots/ID are
 *   exchanged (snapshots/ID is the directory) and convert is removed.
 * Where the file system cannot exchange (EINVAL), DEST is renamed into
 * snapshots/ID and the symlink renamed into its place: DEST is missing
 * for that moment.  EXDEV: DEST is a mount point.
 */
static int
store_set_convert(struct store_set *set, int64_t id)
{
	char	 idname[32], target[PATH_MAX];
	int	 rc;

	(void)snprintf(idname, sizeof(idname), "%lld", (long long)id);
	if ((rc = set_target(set, id, target, sizeof(target))) != 0)
		return rc;
	if (symlinkat("../" SET_CONVERT, set->sfd, idname) == -1 ||
	    symlinkat(target, set->mfd, SET_CONVERT) == -1) {
		rc = store_errno_rc(errno);
		goto undo;
	}
	if (renameat2(set->pfd, set->name, set->mfd, SET_CONVERT,
	    RENAME_EXCHANGE) == 0) {
		if (renameat2(set->mfd, SET_CONVERT, set->sfd, idname,
		    RENAME_EXCHANGE) == -1)
			return BM_EIO;	/* store_set_recover finishes it */
		(void)unlinkat(set->mfd, SET_CONVERT, 0);
	} else if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
		if (unlinkat(set->sfd, idname, 0) == -1 ||
		    renameat(set->pfd, set->name, set->sfd, idname) == -1) {
			rc = BM_EIO;
			goto undo;
		}
		if (renameat(set->mfd, SET_CONVERT, set->pfd, set->name) == -1)
			return BM_EIO;	/* store_set_recover finishes it */
	} else {
		rc = BM_EIO;
		goto undo;
	}
	(void)fsync(set->sfd);
	(void)fsync(set->mfd);
	(void)fsync(set->pfd);
	return 0;
undo:
	rc = errno;
	(void)unlinkat(set->mfd, SET_CONVERT, 0);
	(void)unlinkat(set->sfd, idname, 0);
	errno = rc;
	return BM_EIO;
}

/*
 * Read the snapshot directory: ids of the snapshot directories into
 * ids[] (*ret_n of them, at most SET_MAX_SNAPS).  Unless read-only,
 * entries made by an interrupted step are removed: names starting with
 * STORE_TMP_PREFIX (a snapshot being built), numeric names that are not
 * directories (a conversion's placeholder).
 */
struct store_scan_at {
	struct store_set *set;		/* borrowed */
	int64_t		*ids;		/* borrowed: SET_MAX_SNAPS slots */
	size_t		 n;		/* ids found */
};

/* store_set_scan for one entry of snapshots/. */
static int
store_scan_one(int dfd, const struct dirent *de, void *arg)
{
	struct store_scan_at *at = arg;
	struct store_set *set = at->set;
	struct stat	 st;
	int64_t		 id;

	(void)dfd;	/* a second description of set->sfd */
	if (strncmp(de->d_name, STORE_TMP_PREFIX, STORE_PREFIX_LEN) == 0)
		return set->run > 0 ? store_rmtree(set->sfd, de->d_name, 0) : 0;
	if ((id = set_parse_id(de->d_name)) < 0 ||
	    fstatat(set->sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return 0;
	if (!S_ISDIR(st.st_mode)) {
		if (set->run > 0 && unlinkat(set->sfd, de->d_name, 0) == -1)
			return BM_EIO;
		return 0;
	}
	if (at->n == SET_MAX_SNAPS)
		return BM_ELIMIT;
	at->ids[at->n++] = id;
	return 0;
}

static int
store_set_scan(struct store_set *set, int64_t *ids, size_t *ret_n)
{
	struct store_scan_at at = { set, ids, 0 };
	int		 fd, rc;

	*ret_n = 0;
	if (set->sfd == -1)
		return 0;
	if ((fd = openat(set->sfd, ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1)
		return BM_EIO;
	rc = store_each_entry(fd, false, store_scan_one, &at);
	*ret_n = at.n;
	return rc;
}

/* Open snapshot id (a directory in set->sfd) into *ret. */
static int
store_set_opensnap(struct store_set *set, int64_t id, int *ret)
{
	char	 idname[32];

	(void)snprintf(idname, sizeof(idname), "%lld", (long long)id);
	*ret = openat(set->sfd, idname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (*ret == -1)
		return errno == ENOENT ? BM_ENOENT : BM_EIO;
	return 0;
}

/* Id for a new snapshot: this run's, or above every present one. */
static int64_t
store_set_newid(const struct store_set *set)
{
	return set->run > set->maxid ? set->run : set->maxid + 1;
}

/* "PATH" + msg into errbuf (may be NULL). */
static void
set_err(char *errbuf, size_t errlen, const char *msg, const char *path)
{
	if (errbuf != NULL && errlen > 0)
		(void)snprintf(errbuf, errlen, "%s%s", path, msg);
}

/*
 * Before anything is made beside DEST: refuse what publish = set cannot
 * use, so that a refused run leaves no DEST.biomirror/snapshots behind.
 * DEST must be missing, a directory on its parent's file system or our
 * symlink; DEST.biomirror missing or a directory on that file system too
 * (rename(2) cannot cross file systems: EXDEV; a mount point cannot be
 * renamed: EBUSY).  meta is DEST.biomirror's name.
 */
static int
store_set_preflight(struct store *s, struct store_set *set, const char *meta,
    char *errbuf, size_t errlen)
{
	struct stat	 pst, st;

	if (fstat(set->pfd, &pst) == -1)
		return BM_EIO;
	if (fstatat(set->pfd, set->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode) && st.st_dev != pst.st_dev) {
			set_err(errbuf, errlen, ": is a mount point: "
			    "publish = set needs it to be a directory on the "
			    "file system of its parent, to rename it into the "
			    "first snapshot (set dest to a directory inside "
			    "it)", s->path);
			errno = EXDEV;
			return BM_EUNSAFE;
		}
		if (!S_ISDIR(st.st_mode) && (!S_ISLNK(st.st_mode) ||
		    set_link_id(set, set->name) < 0)) {
			set_err(errbuf, errlen, ": not a directory nor a "
			    "symlink made by publish = set "
			    "(NAME.biomirror/snapshots/ID): not touched",
			    s->path);
			errno = EEXIST;
			return BM_EUNSAFE;
		}
	} else if (errno != ENOENT)
		return BM_EIO;
	if (fstatat(set->pfd, meta, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			set_err(errbuf, errlen, SET_SUFFIX ": not a directory "
			    "(publish = set keeps its snapshots there)",
			    s->path);
			errno = ENOTDIR;
			return BM_EUNSAFE;
		}
		if (st.st_dev != pst.st_dev) {
			set_err(errbuf, errlen, SET_SUFFIX ": is a mount "
			    "point: publish = set needs it on the file "
			    "system of the destination's parent (snapshots "
			    "are renamed into place and published by "
			    "renaming a symlink over the destination)",
			    s->path);
			errno = EXDEV;
			return BM_EUNSAFE;
		}
	} else if (errno != ENOENT)
		return BM_EIO;
	return 0;
}

/*
 * Pick the root among the snapshots ids[n] (read by store_set_scan) once
 * set->published is known: the unpublished snapshot above it when the
 * preceding run left it (set->cont), renamed to this run's id; else the
 * published one; else, when nothing is published, a new empty snapshot.
 * Unless read-only, every other unpublished snapshot is removed.
 */
static int
store_set_root(struct store *s, struct store_set *set, const int64_t *ids,
    size_t n, char *errbuf, size_t errlen)
{
	char		 idname[32], newname[32];
	int64_t		 partial = -1;
	size_t		 i;
	bool		 ro = set->run <= 0;
	int		 rc;

	/* The highest snapshot above the published one is unpublished work. */
	for (i = 0; i < n; i++)
		if (ids[i] > set->published && ids[i] > partial)
			partial = ids[i];
	if (partial >= 0 && partial != set->cont) {
		set->discarded = partial;	/* not the manifest's any more */
		partial = -1;
	}
	for (i = 0; !ro && i < n; i++) {
		if (ids[i] <= set->published || ids[i] == partial)
			continue;
		(void)snprintf(idname, sizeof(idname), "%lld",
		    (long long)ids[i]);
		if ((rc = store_rmtree(set->sfd, idname, 0)) != 0)
			return rc;
	}
	if (partial >= 0 && !ro && set->run > partial) {
		/* Named by this run now: the next run may continue it. */
		(void)snprintf(idname, sizeof(idname), "%lld",
		    (long long)partial);
		(void)snprintf(newname, sizeof(newname), "%lld",
		    (long long)set->run);
		if (renameat(set->sfd, idname, set->sfd, newname) == -1)
			return store_errno_rc(errno);
		(void)fsync(set->sfd);
		partial = set->maxid = set->run;
	}
	if (partial >= 0) {
		set->working = partial;
		set->reused = true;
		return store_set_opensnap(set, partial, &s->fd);
	}
	if (set->published >= 0) {
		rc = store_set_opensnap(set, set->published, &s->fd);
		if (rc == BM_ENOENT) {
			set_err(errbuf, errlen, ": points at a snapshot that "
			    "is missing", s->path);
			errno = ENOENT;
			rc = BM_EIO;
		}
		return rc;
	}
	if (ro)
		return 0;
	/* Nothing published yet: the first snapshot starts empty. */
	set->working = store_set_newid(set);
	set->maxid = set->working;
	(void)snprintf(idname, sizeof(idname), "%lld", (long long)set->working);
	if (mkdirat(set->sfd, idname, s->dir_mode) == -1)
		return store_errno_rc(errno);
	if ((rc = store_set_opensnap(set, set->working, &s->fd)) == 0 &&
	    fchmod(s->fd, s->dir_mode) == -1)
		rc = BM_EIO;
	return rc;
}

/*
 * Find or make the directories beside DEST and decide the store's root
 * (store_open_set); s->path is DEST, set->name its last component.
 */
static int
store_set_setup(struct store *s, struct store_set *set, char *errbuf,
    size_t errlen)
{
	const int	 dflags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC;
	char		 meta[NAME_MAX + 1], why[160];
	int64_t		*ids = NULL;
	struct stat	 st;
	size_t		 i, n = 0;
	bool		 ro = set->run <= 0;
	int		 rc;

	if ((size_t)snprintf(meta, sizeof(meta), "%s" SET_SUFFIX,
	    set->name) >= sizeof(meta)) {
		errno = ENAMETOOLONG;
		return BM_EIO;
	}
	if ((rc = store_set_preflight(s, set, meta, errbuf, errlen)) != 0)
		return rc;
	if (!ro && mkdirat(set->pfd, meta, 0755) == -1 && errno != EEXIST)
		return store_errno_rc(errno);
	if ((set->mfd = openat(set->pfd, meta, dflags)) == -1 &&
	    !(ro && errno == ENOENT)) {
		rc = errno;
		set_err(errbuf, errlen, SET_SUFFIX ": not a directory "
		    "(publish = set keeps its snapshots there)", s->path);
		errno = rc;
		return (rc == ELOOP || rc == ENOTDIR) ? BM_EUNSAFE : BM_EIO;
	}
	if (set->mfd != -1) {
		if (!ro && mkdirat(set->mfd, SET_SNAPS, 0755) == -1 &&
		    errno != EEXIST)
			return store_errno_rc(errno);
		set->sfd = openat(set->mfd, SET_SNAPS, dflags);
		if (set->sfd == -1 && !(ro && errno == ENOENT))
			return (errno == ELOOP || errno == ENOTDIR) ?
			    BM_EUNSAFE : BM_EIO;
	}
	if (!ro && (rc = store_set_recover(set)) != 0) {
		set_err(errbuf, errlen, ": cannot finish an interrupted "
		    "conversion to publish = set", s->path);
		return rc;
	}
	if ((ids = calloc(SET_MAX_SNAPS, sizeof(*ids))) == NULL)
		return BM_ENOMEM;
	if ((rc = store_set_scan(set, ids, &n)) != 0)
		goto out;
	for (i = 0; i < n; i++)
		if (ids[i] > set->maxid)
			set->maxid = ids[i];
	/*
	 * An empty directory DEST beside snapshots is none of ours (an
	 * older verify made one on a mirror with nothing published): it is
	 * no first snapshot, so it goes, as if DEST were missing.  rmdir(2) fails on anything
	 * not empty, which is converted as before.
	 */
	if (!ro && n > 0 && unlinkat(set->pfd, set->name, AT_REMOVEDIR) == 0)
		(void)fsync(set->pfd);
	if (fstatat(set->pfd, set->name, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		if (errno != ENOENT) {
			rc = BM_EIO;
			goto out;
		}
	} else if (S_ISDIR(st.st_mode)) {
		if (ro) {
			/* Not converted yet: a dry run reads it as it is. */
			s->fd = openat(set->pfd, set->name, dflags);
			rc = s->fd == -1 ? BM_EIO : 0;
			goto out;
		}
		set->published = set->maxid + 1;
		if ((rc = store_set_convert(set, set->published)) != 0) {
			(void)snprintf(why, sizeof(why), ": cannot convert it "
			    "into the first snapshot: rename: %s",
			    strerror(errno));
			set_err(errbuf, errlen, why, s->path);
			goto out;
		}
		set->maxid = set->published;
	} else if (!S_ISLNK(st.st_mode) ||
	    (set->published = set_link_id(set, set->name)) < 0) {
		set_err(errbuf, errlen, ": not a directory nor a symlink made "
		    "by publish = set (NAME.biomirror/snapshots/ID): not "
		    "touched", s->path);
		errno = EEXIST;
		rc = BM_EUNSAFE;
		goto out;
	}
	rc = store_set_root(s, set, ids, n, errbuf, errlen);
out:
	free(ids);
	return rc;
}

/*
 * See include/biomirror/store.h.
 * Sandbox: read-write in DEST's parent (DEST, DEST.biomirror and beneath).
 */
int
store_open_set(const char *dest, mode_t file_mode, mode_t dir_mode,
    int64_t run, int64_t cont, struct store **ret, char *errbuf,
    size_t errlen)
{
	struct store	*s = NULL;
	struct store_set *set;
	char		*slash, *parent = NULL;
	size_t		 len;
	bool		 made;
	int		 rc;

	*ret = NULL;
	if (errbuf != NULL && errlen > 0)
		errbuf[0] = '\0';
	if (dest == NULL || dest[0] == '\0')
		return BM_EINVAL;
	rc = BM_ENOMEM;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return BM_ENOMEM;
	s->fd = -1;
	s->stat_dirfd = -1;
	s->file_mode = file_mode;
	s->dir_mode = dir_mode;
	if ((s->path = strdup(dest)) == NULL ||
	    (set = calloc(1, sizeof(*set))) == NULL)
		goto out;
	s->set = set;
	set->pfd = set->mfd = set->sfd = -1;
	set->published = set->previous = set->working = set->maxid = -1;
	set->discarded = -1;
	set->run = run;
	set->cont = cont;
	for (len = strlen(s->path); len > 1 && s->path[len - 1] == '/'; len--)
		s->path[len - 1] = '\0';
	slash = strrchr(s->path, '/');
	if ((set->name = strdup(slash ? slash + 1 : s->path)) == NULL)
		goto out;
	if (slash == s->path)
		parent = strdup("/");
	else if (slash != NULL)
		parent = strndup(s->path, (size_t)(slash - s->path));
	else
		parent = strdup(".");
	if (parent == NULL)
		goto out;
	if (set->name[0] == '\0' || strcmp(set->name, ".") == 0 ||
	    strcmp(set->name, "..") == 0) {
		rc = BM_EINVAL;
		goto out;
	}
	if (run > 0 && (rc = store_mkdir_p(parent, dir_mode, &made)) != 0)
		goto out;
	if ((set->pfd = open(parent, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1) {
		rc = (run <= 0 && errno == ENOENT) ? 0 : BM_EIO;
		goto out;
	}
	if ((rc = store_set_setup(s, set, errbuf, errlen)) != 0)
		goto out;
	if (s->fd == -1)
		goto out;	/* read-only, nothing there yet */
	if (run > 0 && faccessat(s->fd, ".", W_OK | X_OK, AT_EACCESS) == -1) {
		rc = BM_EIO;
		goto out;
	}
	*ret = s;
	s = NULL;
	rc = 0;
out:
	free(parent);
	store_close(s);
	return rc;
}

/*
 * See include/biomirror/store.h.
 * Sandbox: create directories and hard links beneath DEST.biomirror.
 */
int
store_set_begin(struct store *s)
{
	struct store_set *set = s->set;
	char		 tmp[STORE_TMP_NAMELEN + 1] = "", idname[32];
	struct stat	 st;
	int64_t		 id;
	int		 fd = -1, err, rc;

	if (set == NULL || set->run <= 0)
		return BM_EINVAL;
	if (set->working >= 0)
		return 0;
	store_stat_forget(s);
	id = store_set_newid(set);
	(void)snprintf(idname, sizeof(idname), "%lld", (long long)id);
	if ((rc = store_tmpname(tmp)) != 0)
		return rc;
	if (mkdirat(set->sfd, tmp, 0700) == -1) {
		tmp[0] = '\0';
		rc = store_errno_rc(errno);
		goto out;
	}
	if ((fd = openat(set->sfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		rc = BM_EIO;
		goto out;
	}
	if ((rc = store_link_tree(s->fd, fd, 0)) != 0)
		goto out;
	rc = BM_EIO;
	if (fstat(s->fd, &st) == -1 || store_copy_dir_attrs(fd, &st) != 0 ||
	    syncfs(fd) == -1)
		goto out;
	if (renameat(set->sfd, tmp, set->sfd, idname) == -1) {
		rc = store_errno_rc(errno);
		goto out;
	}
	tmp[0] = '\0';
	(void)fsync(set->sfd);
	store_close_fd(s->fd);
	s->fd = fd;
	fd = -1;
	set->working = id;
	set->maxid = id;
	s->changes = 0;
	rc = 0;
out:
	err = errno;
	store_close_fd(fd);
	if (tmp[0] != '\0')
		(void)store_rmtree(set->sfd, tmp, 0);
	errno = err;
	return rc;
}

/* See include/biomirror/store.h. */
bool
store_set_pending(const struct store *s)
{
	return s->set != NULL && s->set->working >= 0 &&
	    (s->set->reused || s->changes > 0);
}

/*
 * See include/biomirror/store.h.
 * Sandbox: create and rename a symlink in DEST's parent.
 */
int
store_set_publish(struct store *s, int64_t *ret_id)
{
	struct store_set *set = s->set;
	char		 tmp[STORE_TMP_NAMELEN + 1] = "", target[PATH_MAX];
	struct stat	 st;
	int		 err, rc;

	if (set == NULL || set->run <= 0 || set->working < 0)
		return BM_EINVAL;
	store_tree_changes(s);	/* a temp link is made */
	if ((rc = set_target(set, set->working, target, sizeof(target))) != 0)
		return rc;
	if (syncfs(s->fd) == -1)
		return BM_EIO;
	if (fstatat(set->pfd, set->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (!S_ISLNK(st.st_mode) || set_link_id(set, set->name) < 0)) {
		errno = EEXIST;
		return BM_EUNSAFE;
	}
	if ((rc = store_tmplink(set->mfd, target, tmp)) != 0)
		return rc;
	if (renameat(set->mfd, tmp, set->pfd, set->name) == -1) {
		err = errno;
		(void)unlinkat(set->mfd, tmp, 0);
		errno = err;
		return (err == EISDIR || err == ENOTEMPTY) ? BM_EUNSAFE :
		    store_errno_rc(err);
	}
	if (fsync(set->pfd) == -1)
		return BM_EIO;
	set->previous = set->published;
	set->published = set->working;
	set->working = -1;
	set->reused = false;
	if (ret_id != NULL)
		*ret_id = set->published;
	return 0;
}

/*
 * See include/biomirror/store.h.
 * Sandbox: remove directories beneath DEST.biomirror.
 */
int
store_set_prune(struct store *s, size_t *ret_n)
{
	struct store_set *set = s->set;
	char		 idname[32];
	int64_t		*ids;
	size_t		 i, n = 0, gone = 0;
	int		 r, rc, lfd;

	if (ret_n != NULL)
		*ret_n = 0;
	if (set == NULL || set->run <= 0)
		return BM_EINVAL;
	set->held = 0;
	if ((ids = calloc(SET_MAX_SNAPS, sizeof(*ids))) == NULL)
		return BM_ENOMEM;
	rc = store_set_scan(set, ids, &n);
	for (i = 0; i < n; i++) {
		if (ids[i] == set->published || ids[i] == set->previous ||
		    ids[i] == set->working)
			continue;
		(void)snprintf(idname, sizeof(idname), "%lld",
		    (long long)ids[i]);
		/* A serve session's shared lock (store_set_hold) keeps it. */
		lfd = openat(set->sfd, idname, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC);
		if (lfd != -1 && flock(lfd, LOCK_EX | LOCK_NB) == -1 &&
		    errno == EWOULDBLOCK) {
			store_close_fd(lfd);
			set->held++;
			continue;
		}
		if ((r = store_rmtree(set->sfd, idname, 0)) == 0)
			gone++;
		else if (rc == 0)
			rc = r;
		store_close_fd(lfd);
	}
	(void)fsync(set->sfd);
	free(ids);
	if (ret_n != NULL)
		*ret_n = gone;
	return rc;
}

/*
 * See include/biomirror/store.h.
 * Sandbox: remove directories beneath DEST.biomirror.
 */
int
store_set_discard(struct store *s)
{
	struct store_set *set = s->set;
	char		 idname[32];
	int		 rc;

	if (set == NULL || set->run <= 0)
		return BM_EINVAL;
	if (set->working < 0 || set->reused)
		return 0;
	store_stat_forget(s);
	(void)snprintf(idname, sizeof(idname), "%lld", (long long)set->working);
	rc = store_rmtree(set->sfd, idname, 0);
	(void)fsync(set->sfd);
	set->working = -1;
	return rc;
}

/* The snapshot id DEST (name in the directory pfd) points at, -1 none. */
static int64_t
set_hold_id(int pfd, const char *name)
{
	struct store_set set;

	memset(&set, 0, sizeof(set));
	set.pfd = pfd;
	set.name = (char *)(uintptr_t)name;
	return set_link_id(&set, name);
}

/*
 * See include/biomirror/store.h.  The shared flock(2) on the snapshot's
 * directory is what store_set_prune() tests with LOCK_EX|LOCK_NB; a
 * snapshot removed between readlink and lock shows as a directory with
 * no links left (or as a lock the pruner holds), and DEST is read again.
 * Sandbox: read DEST's parent and DEST.biomirror.
 */
int
store_set_hold(const char *dest, int *ret_fd, int64_t *ret_id)
{
	char		 parent[PATH_MAX], path[PATH_MAX];
	const char	*name, *slash;
	struct stat	 st;
	int64_t		 id = -1;
	int		 pfd = -1, fd = -1, tries, n, rc = BM_EINVAL;

	if (dest == NULL || (slash = strrchr(dest, '/')) == NULL ||
	    slash[1] == '\0' || (size_t)(slash - dest) >= sizeof(parent))
		return BM_EINVAL;
	memcpy(parent, dest, (size_t)(slash - dest));
	parent[slash - dest] = '\0';
	name = slash + 1;
	if ((pfd = open(parent[0] != '\0' ? parent : "/", O_RDONLY |
	    O_DIRECTORY | O_CLOEXEC)) == -1) {
		rc = errno == ENOENT ? BM_ENOENT : BM_EIO;
		goto out;
	}
	for (tries = 0; tries < 8; tries++) {
		if ((id = set_hold_id(pfd, name)) < 0) {
			rc = BM_EINVAL;	/* not (yet) a set destination */
			goto out;
		}
		n = snprintf(path, sizeof(path), "%s" SET_SUFFIX "/" SET_SNAPS
		    "/%lld", name, (long long)id);
		if (n < 0 || (size_t)n >= sizeof(path))
			goto out;
		fd = openat(pfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (fd != -1 && flock(fd, LOCK_SH | LOCK_NB) == 0 &&
		    fstat(fd, &st) == 0 && st.st_nlink > 0)
			break;
		store_close_fd(fd);
		fd = -1;
	}
	if (fd == -1) {
		rc = BM_ELOCKED;
		goto out;
	}
	*ret_fd = fd;
	*ret_id = id;
	fd = -1;
	rc = 0;
out:
	store_close_fd(fd);
	store_close_fd(pfd);
	return rc;
}

/* See include/biomirror/store.h. */
void
store_set_get_info(const struct store *s, struct store_set_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->published = ret->previous = ret->working = ret->discarded = -1;
	if (s == NULL || s->set == NULL)
		return;
	ret->published = s->set->published;
	ret->previous = s->set->previous;
	ret->working = s->set->working;
	ret->reused = s->set->reused;
	ret->discarded = s->set->discarded;
	ret->held = s->set->held;
	ret->changes = s->changes;
}

/* ---- pre_publish: what a check in the staged snapshot changed ---- */

/* One entry of the working snapshot as a scan saw it. */
struct scan_ent {
	char		*path;		/* owned: relative path */
	mode_t		 type;		/* S_IFMT bits */
	dev_t		 dev;
	ino_t		 ino;
	struct timespec	 ctime;
	off_t		 size;
	struct timespec	 mtime;
};

struct store_scan {
	struct scan_ent	*ents;		/* owned: sorted by path */
	size_t		 n, cap;
};

void
store_scan_free(struct store_scan *sc)
{
	size_t	 i;

	if (sc == NULL)
		return;
	for (i = 0; i < sc->n; i++)
		free(sc->ents[i].path);
	free(sc->ents);
	free(sc);
}

static int
scan_ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct scan_ent *)a)->path,
	    ((const struct scan_ent *)b)->path);
}

/*
 * Add every entry beneath directory fd (taken: closed here), whose path
 * is prefix ("" for the root), to sc; depth bounds the recursion.
 */
static int
scan_dir(struct store_scan *sc, int fd, const char *prefix, unsigned depth)
{
	DIR		*d = NULL;
	struct dirent	*de;
	struct scan_ent	*e, *ne;
	struct stat	 st;
	char		 path[PATH_MAX];
	int		 n, cfd, rc = BM_EIO;

	if (depth > 256) {
		rc = BM_ELIMIT;
		goto out;
	}
	if ((d = fdopendir(fd)) == NULL)
		goto out;
	fd = -1;
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		n = snprintf(path, sizeof(path), "%s%s%s", prefix,
		    prefix[0] ? "/" : "", de->d_name);
		if (n < 0 || (size_t)n >= sizeof(path)) {
			rc = BM_ELIMIT;
			goto out;
		}
		if (fstatat(dirfd(d), de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) == -1)
			goto out;
		if (sc->n == sc->cap) {
			size_t	 cap = sc->cap ? sc->cap * 2 : 256;

			if ((ne = reallocarray(sc->ents, cap,
			    sizeof(*ne))) == NULL) {
				rc = BM_ENOMEM;
				goto out;
			}
			sc->ents = ne;
			sc->cap = cap;
		}
		e = &sc->ents[sc->n];
		if ((e->path = strdup(path)) == NULL) {
			rc = BM_ENOMEM;
			goto out;
		}
		sc->n++;
		e->type = st.st_mode & S_IFMT;
		e->dev = st.st_dev;
		e->ino = st.st_ino;
		e->ctime = st.st_ctim;
		e->size = st.st_size;
		e->mtime = st.st_mtim;
		if (S_ISDIR(st.st_mode)) {
			if ((cfd = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
				goto out;
			if ((rc = scan_dir(sc, cfd, path, depth + 1)) != 0)
				goto out;
			rc = BM_EIO;
		}
	}
	if (errno != 0)
		goto out;
	rc = 0;
out:
	if (d != NULL)
		(void)closedir(d);
	store_close_fd(fd);
	return rc;
}

/*
 * See include/biomirror/store.h.
 * Sandbox: read beneath the working snapshot.
 */
int
store_set_stage_scan(struct store *s, struct store_scan **ret)
{
	struct store_scan *sc;
	int		 fd, rc;

	*ret = NULL;
	if (s->set == NULL || s->set->working < 0)
		return BM_EINVAL;
	if ((sc = calloc(1, sizeof(*sc))) == NULL)
		return BM_ENOMEM;
	if ((fd = openat(s->fd, ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1) {
		store_scan_free(sc);
		return BM_EIO;
	}
	if ((rc = scan_dir(sc, fd, "", 0)) != 0) {
		store_scan_free(sc);
		return rc;
	}
	if (sc->n > 1)
		qsort(sc->ents, sc->n, sizeof(*sc->ents), scan_ent_cmp);
	*ret = sc;
	return 0;
}

static const struct scan_ent *
scan_find(const struct store_scan *sc, const char *path)
{
	struct scan_ent	 key;

	key.path = (char *)(uintptr_t)path;
	return sc->n == 0 ? NULL : bsearch(&key, sc->ents, sc->n,
	    sizeof(*sc->ents), scan_ent_cmp);
}

static bool
scan_same(const struct scan_ent *a, const struct scan_ent *b)
{
	return a->type == b->type && a->dev == b->dev && a->ino == b->ino &&
	    a->ctime.tv_sec == b->ctime.tv_sec &&
	    a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Remove path beneath the working snapshot, a directory with all it holds. */
static int
scan_remove(struct store *s, const struct scan_ent *e)
{
	if (unlinkat(s->fd, e->path, S_ISDIR(e->type) ? AT_REMOVEDIR :
	    0) == -1 && errno != ENOENT)
		return BM_EIO;
	return 0;
}

/*
 * A changed staged file (b: before the hook; inplace: its inode is still
 * there, changed): back as a hard link to the published snapshot's copy
 * when it was one and that copy is unchanged (*ret_what RESTORED), else
 * removed (REMOVED; INPLACE when the published copy is that same inode,
 * changed with it).
 */
static int
scan_restore(struct store *s, int pubfd, const struct scan_ent *b,
    bool inplace, enum store_check *ret_what)
{
	struct stat	 st;
	char		 parent[PATH_MAX], tmp[STORE_TMP_NAMELEN + 1];
	const char	*slash;
	int		 rc, dfd = -1;

	*ret_what = STORE_CHECK_REMOVED;
	store_stat_forget(s);
	if (unlinkat(s->fd, b->path, 0) == -1 && errno != ENOENT &&
	    (errno != EISDIR || unlinkat(s->fd, b->path, AT_REMOVEDIR) == -1))
		return BM_EIO;
	if (pubfd < 0 || fstatat(pubfd, b->path, &st,
	    AT_SYMLINK_NOFOLLOW) == -1)
		return 0;
	if (inplace) {
		/* Its bytes or mode changed under both names. */
		if (st.st_dev == b->dev && st.st_ino == b->ino)
			*ret_what = STORE_CHECK_INPLACE;
		return 0;
	}
	/*
	 * The same inode with the same size and mtime: the staged name was
	 * replaced, not the bytes both names share (its ctime moved with
	 * the link count, so it says nothing here).
	 */
	if ((st.st_mode & S_IFMT) != b->type || st.st_dev != b->dev ||
	    st.st_ino != b->ino || st.st_size != b->size ||
	    st.st_mtim.tv_sec != b->mtime.tv_sec ||
	    st.st_mtim.tv_nsec != b->mtime.tv_nsec)
		return 0;	/* not a link to it, or changed there too */
	if ((slash = strrchr(b->path, '/')) != NULL) {
		(void)snprintf(parent, sizeof(parent), "%.*s",
		    (int)(slash - b->path), b->path);
		if ((rc = store_mkdirs(s, parent)) != 0)
			return rc;
		if ((dfd = openat(s->fd, parent, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) == -1)
			return BM_EIO;
	}
	if ((rc = store_tmpname(tmp)) != 0)
		goto out;
	rc = BM_EIO;
	if (linkat(pubfd, b->path, dfd >= 0 ? dfd : s->fd, tmp, 0) == -1)
		goto out;
	if (renameat(dfd >= 0 ? dfd : s->fd, tmp, dfd >= 0 ? dfd : s->fd,
	    slash ? slash + 1 : b->path) == -1) {
		(void)unlinkat(dfd >= 0 ? dfd : s->fd, tmp, 0);
		goto out;
	}
	*ret_what = STORE_CHECK_RESTORED;
	rc = 0;
out:
	store_close_fd(dfd);
	return rc;
}

/*
 * See include/biomirror/store.h.
 * Sandbox: read-write beneath the working snapshot, read the published.
 */
int
store_set_check(struct store *s, const struct store_scan *before,
    store_check_fn cb, void *ctx)
{
	struct store_scan *after = NULL;
	const struct scan_ent *b, *a;
	struct store_set *set = s->set;
	enum store_check what;
	char		 id[32];
	size_t		 i;
	int		 pubfd = -1, rc;

	if ((rc = store_set_stage_scan(s, &after)) != 0)
		return rc;
	if (set->published >= 0) {
		(void)snprintf(id, sizeof(id), "%lld",
		    (long long)set->published);
		pubfd = openat(set->sfd, id, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC);
	}
	/*
	 * Made by the hook, or put where an entry of another type was (a
	 * file or symlink for a directory): deepest first (a path sorts
	 * after its parent); unlinkat follows no symlink.
	 */
	for (i = after->n; i-- > 0;) {
		a = &after->ents[i];
		if ((b = scan_find(before, a->path)) != NULL &&
		    b->type == a->type)
			continue;
		store_stat_forget(s);
		if ((rc = scan_remove(s, a)) != 0)
			goto out;
		cb(ctx, a->path, STORE_CHECK_CREATED);
	}
	/* Staged entries it changed, replaced or removed: parents first. */
	for (i = 0; i < before->n; i++) {
		b = &before->ents[i];
		a = scan_find(after, b->path);
		if (S_ISDIR(b->type)) {
			if (a != NULL && S_ISDIR(a->type))
				continue;
			if ((rc = store_mkdirs(s, b->path)) != 0)
				goto out;
			cb(ctx, b->path, STORE_CHECK_DIR);
			continue;
		}
		if (!S_ISREG(b->type))
			continue;
		if (a != NULL && scan_same(a, b))
			continue;
		if ((rc = scan_restore(s, pubfd, b, a != NULL &&
		    a->type == b->type && a->dev == b->dev &&
		    a->ino == b->ino, &what)) != 0)
			goto out;
		cb(ctx, b->path, what);
	}
	s->changes++;
	rc = 0;
out:
	store_close_fd(pubfd);
	store_scan_free(after);
	return rc;
}

/* See include/biomirror/store.h. */
int
store_set_working_path(const struct store *s, char *buf, size_t len)
{
	char		 target[PATH_MAX];
	const char	*slash;
	int		 n, rc;

	if (s->set == NULL || s->set->working < 0)
		return BM_EINVAL;
	if ((rc = set_target(s->set, s->set->working, target,
	    sizeof(target))) != 0)
		return rc;
	slash = strrchr(s->path, '/');
	if (slash == NULL)
		n = snprintf(buf, len, "%s", target);
	else
		n = snprintf(buf, len, "%.*s/%s", (int)(slash - s->path),
		    s->path, target);
	return n < 0 || (size_t)n >= len ? BM_ELIMIT : 0;
}
