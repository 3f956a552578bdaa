/*
 * The served tree: every path a client names is opened beneath the
 * session's root directory fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS) (a symlink inside the export is followed while
 * it stays inside; one that leaves it, "..", or an absolute path fails
 * with EXDEV), or, where the kernel has no openat2 (ENOSYS), by a walk
 * one component at a time with O_NOFOLLOW (every symlink refused).
 * Names are checked with path_is_safe() first.  LIST walks below a
 * directory without following symlinks and streams one ENTRY per file,
 * directory or symlink, in frames gathered into one buffer and written
 * every SV_LIST_CHUNK bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/store.h"

#include "serve_int.h"

#define SV_DEPTH_MAX	256		/* directory levels a LIST descends */
/*
 * ENTRY bytes a LIST gathers before it writes them: the client decodes
 * and stages a chunk while the walk goes on, instead of waiting for the
 * whole walk (5,000 entries fit in one SV_BUF).
 */
#define SV_LIST_CHUNK	(32 * 1024)

/* An errno of opening a client's path as a BM_E* code. */
static int
sv_open_rc(int err)
{
	if (err == ENOENT || err == ENOTDIR)
		return BM_ENOENT;
	if (err == EXDEV || err == ELOOP)
		return BM_EUNSAFE;
	return BM_EIO;
}

/* The fallback: one component at a time, no symlink followed. */
static int
sv_walk(int root, const char *path, int flags, int *ret_fd)
{
	char		 comp[NAME_MAX + 1];
	const char	*p = path, *slash;
	size_t		 n;
	int		 dfd = root, fd, err;

	for (;;) {
		slash = strchr(p, '/');
		n = slash != NULL ? (size_t)(slash - p) : strlen(p);
		if (n > NAME_MAX)
			return BM_EUNSAFE;
		memcpy(comp, p, n);
		comp[n] = '\0';
		fd = openat(dfd, comp, slash != NULL ? O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC : flags | O_NOFOLLOW | O_CLOEXEC);
		err = errno;
		if (dfd != root)
			(void)close(dfd);
		if (fd == -1)
			return sv_open_rc(err);
		if (slash == NULL)
			break;
		dfd = fd;
		p = slash + 1;
	}
	*ret_fd = fd;
	return 0;
}

/*
 * Open path (relative, "" = the root itself) beneath root with flags.
 * Returns 0 with *ret_fd (the caller's); BM_EUNSAFE for a path that is
 * not safe or leaves the root; BM_ENOENT; BM_EIO.
 */
int
sv_open_beneath(int root, const char *path, int flags, int *ret_fd)
{
	struct open_how	 how;
	long		 fd;

	if (path[0] == '\0') {
		if ((fd = openat(root, ".", flags | O_CLOEXEC)) == -1)
			return sv_open_rc(errno);
		*ret_fd = (int)fd;
		return 0;
	}
	if (!path_is_safe(path, strlen(path)))
		return BM_EUNSAFE;
	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	fd = syscall(SYS_openat2, root, path, &how, sizeof(how));
	if (fd == -1 && errno == ENOSYS)
		return sv_walk(root, path, flags, ret_fd);
	if (fd == -1)
		return sv_open_rc(errno);
	*ret_fd = (int)fd;
	return 0;
}

/* The wire code for a BM_E* code of serving a path. */
uint16_t
sv_wire_error(int rc)
{
	switch (rc) {
	case BM_ENOENT:	return BMP_E_NOENT;
	case BM_EUNSAFE: return BMP_E_UNSAFE;
	case BM_EINVAL:	return BMP_E_INVAL;
	case BM_ELIMIT:	return BMP_E_LIMIT;
	default:	return BMP_E_IO;
	}
}

/* A LIST in progress: the frames gathered before a write. */
struct sv_walk {
	struct sv_session *s;		/* borrowed */
	uint32_t	 id;
	const char	*base;		/* borrowed: the LIST's path */
	uint8_t		*buf;		/* owned: gathered frames */
	size_t		 len;		/* bytes in buf */
	char		 rel[PATH_MAX];	/* path of the directory being read */
	uint64_t	 count;
};

static int
sv_walk_flush(struct sv_walk *w)
{
	int	 rc;

	if (w->len == 0)
		return 0;
	(void)pthread_mutex_lock(&w->s->wlock);
	rc = sv_write(w->s->ctl, w->buf, w->len);
	(void)pthread_mutex_unlock(&w->s->wlock);
	w->len = 0;
	return rc;
}

/* The digest the server knows of the file w->rel (st), if any. */
static bool
sv_walk_digest(const struct sv_walk *w, const struct stat *st,
    uint8_t d[BMP_DIGEST_LEN])
{
	char	 full[PATH_MAX];

	if ((w->s->features & BMP_F_DIGESTS) == 0)
		return false;
	if (w->base[0] == '\0')
		return sv_digest_of(w->s, w->rel, st, d);
	if ((size_t)snprintf(full, sizeof(full), "%s/%s", w->base, w->rel) >=
	    sizeof(full))
		return false;
	return sv_digest_of(w->s, full, st, d);
}

/* One entry (name in the directory dfd) as an ENTRY frame. */
static int
sv_walk_entry(struct sv_walk *w, int dfd, const char *name,
    const struct stat *st, size_t rl)
{
	struct bmp_entry e;
	char		 target[PATH_MAX];
	ssize_t		 tl;
	size_t		 n;
	int		 rc;

	memset(&e, 0, sizeof(e));
	e.path.p = (const uint8_t *)w->rel;
	e.path.len = rl;
	e.size = (uint64_t)st->st_size;
	e.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL +
	    st->st_mtim.tv_nsec;
	e.mode = (uint32_t)(st->st_mode & 07777);
	if (S_ISDIR(st->st_mode)) {
		e.type = BMP_T_DIR;
		e.size = 0;
	} else if (S_ISLNK(st->st_mode)) {
		e.type = BMP_T_LINK;
		tl = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (tl <= 0 || tl > BMP_STR_MAX)
			return 0;	/* gone, or too long to send: skip */
		e.target.p = (const uint8_t *)target;
		e.target.len = (size_t)tl;
		e.size = (uint64_t)tl;
	} else {
		e.type = BMP_T_FILE;
		if (sv_walk_digest(w, st, e.digest))
			e.digest_kind = BMP_D_SHA256;
	}
	if ((w->len >= SV_LIST_CHUNK ||
	    BMP_HDR_LEN + BMP_FRAME_MAX > SV_BUF - w->len) &&
	    (rc = sv_walk_flush(w)) != 0)
		return rc;
	if ((rc = bmp_enc_entry(w->id, &e, w->buf + w->len, SV_BUF - w->len,
	    &n)) != 0)
		return rc;
	w->len += n;
	w->count++;
	return 0;
}

/* Every entry below the directory fd (its path w->rel, rl bytes). */
static int
sv_walk_dir(struct sv_walk *w, int fd, size_t rl, int depth)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	size_t		 nl, sub;
	int		 cfd, rc = 0;

	if (depth > SV_DEPTH_MAX || (d = fdopendir(fd)) == NULL) {
		(void)close(fd);
		return depth > SV_DEPTH_MAX ? BM_ELIMIT : BM_EIO;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		nl = strlen(de->d_name);
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0 ||
		    !name_is_safe(de->d_name, nl))
			continue;	/* temp files, control bytes: not served */
		sub = rl + (rl > 0 ? 1 : 0) + nl;
		if (sub >= sizeof(w->rel) || sub > BMP_STR_MAX)
			continue;
		if (rl > 0)
			w->rel[rl] = '/';
		memcpy(w->rel + sub - nl, de->d_name, nl + 1);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
		    -1 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) ||
		    S_ISLNK(st.st_mode)))
			continue;
		if ((rc = sv_walk_entry(w, dirfd(d), de->d_name, &st, sub)) !=
		    0 || !S_ISDIR(st.st_mode))
			continue;
		cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC);
		if (cfd != -1)
			rc = sv_walk_dir(w, cfd, sub, depth + 1);
	}
	w->rel[rl] = '\0';
	(void)closedir(d);
	return rc;
}

/*
 * LIST id of path (checked, "" = the root) in session s: ENTRY frames on
 * the control connection; the caller sends LIST_END or the ERROR.
 * Returns 0 with the count; BM_ENOENT, BM_EUNSAFE, BM_EINVAL (not a
 * directory), BM_ELIMIT (too deep), BM_ENET (the client went away),
 * BM_ENOMEM, BM_EIO.
 */
int
sv_list(struct sv_session *s, uint32_t id, const char *path,
    uint64_t *ret_count)
{
	struct sv_walk	*w;
	int		 fd, rc;

	if ((rc = sv_open_beneath(s->root, path, O_RDONLY | O_DIRECTORY,
	    &fd)) == BM_ENOENT && sv_open_beneath(s->root, path, O_PATH,
	    &fd) == 0) {
		(void)close(fd);	/* there, but not a directory */
		rc = BM_EINVAL;
	}
	if (rc != 0)
		return rc;
	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->buf = malloc(SV_BUF)) == NULL) {
		free(w);
		(void)close(fd);
		return BM_ENOMEM;
	}
	w->s = s;
	w->id = id;
	w->base = path;
	rc = sv_walk_dir(w, fd, 0, 0);
	if (rc == 0)
		rc = sv_walk_flush(w);
	*ret_count = w->count;
	free(w->buf);
	free(w);
	return rc;
}

/*
 * Open export e's root for a new session: a publish = set mirror's
 * published snapshot, held with store_set_hold() (*ret_snap its id),
 * else the directory itself (*ret_snap -1).  Returns 0 or a BM_E* code.
 */
int
sv_open_root(const struct sv_export *e, int *ret_fd, int64_t *ret_snap)
{
	int	 fd;

	*ret_snap = -1;
	if (e->set)
		return store_set_hold(e->root, ret_fd, ret_snap);
	if ((fd = open(e->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return errno == ENOENT ? BM_ENOENT : BM_EIO;
	*ret_fd = fd;
	return 0;
}
