/*
 * The destination lock and owner record (see include/biomirror/destlock.h).
 * Every call is relative to DEST's real parent directory (symlinks
 * resolved, and an administrator's symlink DEST followed to the tree it
 * names), opened once; DEST and DEST.biomirror are opened with O_NOFOLLOW.
 * A lock is taken only after the destination's kind was checked, and kept
 * only when the kind is the same once it is held (a conversion or
 * publication in between: again).  The checks of other trees (a
 * DEST.biomirror on DEST's path or in its top level, an owner record of
 * an ancestor) cost a few stat/open calls per path component and one
 * read of DEST's top directory: no walk of the tree.
 */
#include <sys/file.h>
#include <sys/stat.h>

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

#include "biomirror/destlock.h"
#include "biomirror/error.h"
#include "biomirror/fileio.h"
#include "biomirror/store.h"

#define DL_META		".biomirror"	/* NAME.biomirror beside DEST */
#define DL_SNAPS	"/snapshots/"
#define DL_OWNER	"owner"		/* the record in DEST.biomirror */
#define DL_OWNER_TMP	".owner.tmp"
#define DL_BESIDE	".biomirror-owner" /* "." NAME DL_BESIDE beside DEST */
#define DL_RECORD_MAX	8192		/* bytes of a record read */
#define DL_TRIES	3		/* kind changed while locking: again */
#define DL_HOPS		40		/* symlinks followed to DEST's tree */
#define DL_DIRFLAGS	(O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

enum dl_kind {
	DL_MISSING,	/* no DEST */
	DL_PLAIN,	/* a directory, or the administrator's symlink to one */
	DL_SET,		/* our symlink NAME.biomirror/snapshots/ID */
	DL_INSIDE,	/* a DEST.biomirror or inside one, through symlinks */
	DL_OTHER	/* a file, a symlink to no directory: the store judges */
};

struct dl_owner {
	bool		 found;		/* a record was read */
	long		 pid;		/* 0 if none */
	char		 mirror[256];
	char		 config[PATH_MAX]; /* "" for an ad-hoc run */
	char		 state_dir[PATH_MAX];
	bool		 set;		/* "publish set" */
};

struct dest_lock {
	int		 pfd;		/* owned: DEST's parent, -1 none yet */
	int		 dfd;		/* owned: DEST, flocked; -1 none */
	int		 mfd;		/* owned: DEST.biomirror, flocked; -1 none */
	char		*dest;		/* owned: DEST as given, absolute (messages) */
	char		*real;		/* owned: parent/name */
	char		*parent;	/* owned: DEST's real parent as a path */
	char		*name;		/* owned: DEST's last component there */
	char		*meta;		/* owned: "NAME.biomirror" */
	char		*beside;	/* owned: ".NAME.biomirror-owner" */
	bool		 shared;	/* LOCK_SH: a read-only run, no record */
	bool		 create;	/* DEST_LOCK_CREATE */
	bool		 set;		/* a publish = set run */
	bool		 made_meta;	/* DEST.biomirror made (and locked) here */
	char		 mirror[256];	/* the run's who, control bytes as '?' */
	char		 config[PATH_MAX]; /* resolved; "" for an ad-hoc run */
	char		 state_dir[PATH_MAX]; /* resolved */
};

/* src into dst (len bytes) with control bytes as '?': one record line. */
static void
dl_clean(char *dst, size_t len, const char *src)
{
	size_t	 i;

	for (i = 0; src != NULL && src[i] != '\0' && i + 1 < len; i++)
		dst[i] = ((unsigned char)src[i] < 0x20 || src[i] == 0x7f) ?
		    '?' : src[i];
	if (len > 0)
		dst[i] = '\0';
}

/* Resolved path of p into dst (cleaned); "" for NULL.  0 or BM_ENOMEM. */
static int
dl_resolved(char *dst, size_t len, const char *p)
{
	char	*r;

	dst[0] = '\0';
	if (p == NULL)
		return 0;
	if ((r = fileio_path_resolve(p)) == NULL)
		return BM_ENOMEM;
	dl_clean(dst, len, r);
	free(r);
	return 0;
}

/*
 * l's names from path p (absolute, canonical): parent, name, real, meta
 * and beside, replacing those there were.  0, BM_EINVAL (no last name)
 * or BM_ENOMEM.
 */
static int
dl_place(struct dest_lock *l, const char *p)
{
	const char	*slash = strrchr(p, '/');

	if (slash == NULL || slash[1] == '\0' || strcmp(slash + 1, "..") == 0 ||
	    strcmp(slash + 1, ".") == 0)
		return BM_EINVAL;
	free(l->parent);
	free(l->name);
	free(l->real);
	free(l->meta);
	free(l->beside);
	l->real = l->meta = l->beside = NULL;
	l->parent = slash == p ? strdup("/") :
	    strndup(p, (size_t)(slash - p));
	l->name = strdup(slash + 1);
	if (l->parent == NULL || l->name == NULL)
		return BM_ENOMEM;
	if (asprintf(&l->real, "%s", p) < 0)
		l->real = NULL;
	if (asprintf(&l->meta, "%s" DL_META, l->name) < 0)
		l->meta = NULL;
	if (asprintf(&l->beside, ".%s" DL_BESIDE, l->name) < 0)
		l->beside = NULL;
	if (l->real == NULL || l->meta == NULL || l->beside == NULL)
		return BM_ENOMEM;
	return 0;
}

/* Names of l from dest and self; BM_EINVAL when dest has no last name. */
static int
dl_init(struct dest_lock *l, const char *dest, const struct dest_who *self)
{
	char	*cwd = NULL;
	int	 rc;

	if (dest == NULL || dest[0] == '\0')
		return BM_EINVAL;
	if (dest[0] != '/' && (cwd = getcwd(NULL, 0)) == NULL)
		return errno == ENOMEM ? BM_ENOMEM : BM_EIO;
	if (asprintf(&l->dest, "%s%s%s", cwd != NULL ? cwd : "",
	    cwd != NULL ? "/" : "", dest) < 0)
		l->dest = NULL;
	free(cwd);
	if (l->dest == NULL)
		return BM_ENOMEM;
	fileio_path_canon(l->dest);
	if ((rc = dl_place(l, l->dest)) != 0)
		return rc;
	dl_clean(l->mirror, sizeof(l->mirror), self->mirror);
	if ((rc = dl_resolved(l->config, sizeof(l->config),
	    self->config)) != 0)
		return rc;
	l->set = self->set;
	return dl_resolved(l->state_dir, sizeof(l->state_dir),
	    self->state_dir);
}

/*
 * Whether the symlink path (in dirfd) is ours: its target is
 * NAME.biomirror/snapshots/ID, NAME its last component name.
 */
static bool
dl_is_setlink(int dirfd, const char *path, const char *name)
{
	char	 buf[PATH_MAX];
	ssize_t	 n;
	size_t	 plen = strlen(name), slen = strlen(DL_META DL_SNAPS), d;

	if ((n = readlinkat(dirfd, path, buf, sizeof(buf) - 1)) <= 0)
		return false;
	buf[n] = '\0';
	if ((size_t)n <= plen + slen || strncmp(buf, name, plen) != 0 ||
	    strncmp(buf + plen, DL_META DL_SNAPS, slen) != 0)
		return false;
	d = strspn(buf + plen + slen, "0123456789");
	return d > 0 && buf[plen + slen + d] == '\0';
}

/*
 * The real place of the symlink DEST's target buf (relative to DEST's
 * parent): its directory resolved, its last name kept.  Returns a
 * malloc'd path, NULL when it cannot be resolved (or ENOMEM).
 */
static char *
dl_target(const struct dest_lock *l, const char *buf)
{
	char		*full = NULL, *last, *res = NULL, *out = NULL;
	const char	*dir;

	if (asprintf(&full, "%s%s%s", buf[0] == '/' ? "" : l->parent,
	    buf[0] == '/' || strcmp(l->parent, "/") == 0 ? "" : "/", buf) < 0)
		return NULL;
	fileio_path_canon(full);
	last = strrchr(full, '/');
	if (last == NULL || last[1] == '\0')
		goto out;
	if (strcmp(last + 1, "..") == 0) {
		out = realpath(full, NULL);
		goto out;
	}
	*last = '\0';
	dir = last == full ? "/" : full;
	if ((res = realpath(dir, NULL)) != NULL && asprintf(&out, "%s/%s",
	    strcmp(res, "/") == 0 ? "" : res, last + 1) < 0)
		out = NULL;
out:
	free(res);
	free(full);
	return out;
}

/*
 * Move l to DEST's real place once its parent is open (or known to be
 * missing): the parent with symlinks resolved, then an administrator's
 * symlink DEST to a directory followed (never our publish = set symlink),
 * so that DEST.biomirror and the owner record are the real tree's
 * whatever path names it.  A link that cannot be followed is left for
 * the store.  0, BM_ENOMEM or BM_EIO (errbuf says why, errno kept).
 */
static int
dl_canon(struct dest_lock *l, char *errbuf, size_t errlen)
{
	struct stat	 st;
	char		 buf[PATH_MAX], *p = NULL;
	ssize_t		 n;
	int		 hops, fd, rc = 0;

	if ((p = fileio_path_resolve(l->parent)) == NULL)
		return BM_ENOMEM;
	free(l->parent);
	l->parent = p;
	p = NULL;
	for (hops = 0; hops < DL_HOPS && l->pfd != -1; hops++) {
		if (fstatat(l->pfd, l->name, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
		    !S_ISLNK(st.st_mode) ||
		    dl_is_setlink(l->pfd, l->name, l->name) ||
		    fstatat(l->pfd, l->name, &st, 0) == -1 ||
		    !S_ISDIR(st.st_mode))
			break;
		if ((n = readlinkat(l->pfd, l->name, buf, sizeof(buf) - 1)) <= 0)
			break;
		buf[n] = '\0';
		if ((p = dl_target(l, buf)) == NULL || strcmp(p, "/") == 0)
			break;
		if ((rc = dl_place(l, p)) != 0)
			goto out;
		if ((fd = open(l->parent, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) == -1) {
			rc = errno;
			(void)snprintf(errbuf, errlen, "%.200s: %s", l->parent,
			    strerror(rc));
			errno = rc;
			rc = BM_EIO;
			goto out;
		}
		(void)close(l->pfd);
		l->pfd = fd;
		free(p);
		p = NULL;
	}
	free(p);
	if (asprintf(&p, "%s%s%s", l->parent, strcmp(l->parent, "/") == 0 ?
	    "" : "/", l->name) < 0) {
		p = NULL;
		rc = BM_ENOMEM;
		goto out;
	}
	free(l->real);
	l->real = p;
	p = NULL;
	rc = 0;
out:
	free(p);
	return rc;
}

/* One "key value" line of a record into o. */
static void
dl_owner_line(struct dl_owner *o, const char *k, size_t klen, const char *v)
{
	char	*end;
	long	 pid;

	if (klen == 3 && strncmp(k, "pid", 3) == 0) {
		errno = 0;
		pid = strtol(v, &end, 10);
		if (errno == 0 && end != v && *end == '\0' && pid > 0)
			o->pid = pid;
	} else if (klen == 6 && strncmp(k, "mirror", 6) == 0)
		dl_clean(o->mirror, sizeof(o->mirror), v);
	else if (klen == 6 && strncmp(k, "config", 6) == 0)
		dl_clean(o->config, sizeof(o->config), v);
	else if (klen == 9 && strncmp(k, "state_dir", 9) == 0)
		dl_clean(o->state_dir, sizeof(o->state_dir), v);
	else if (klen == 7 && strncmp(k, "publish", 7) == 0)
		o->set = strcmp(v, "set") == 0;
}

/*
 * Read the record path (in dirfd) into *o; a missing, unreadable or
 * oversized one is no record (o->found false).  Never fails.
 */
static void
dl_owner_read(int dirfd, const char *path, struct dl_owner *o)
{
	struct stat	 st;
	char		*buf = NULL, *line, *nl, *sp;
	size_t		 len;
	int		 fd;

	memset(o, 0, sizeof(*o));
	if ((fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) == -1)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    fileio_read_all(fd, DL_RECORD_MAX, &buf, &len) == 0) {
		o->found = true;
		for (line = buf; *line != '\0'; line = nl + 1) {
			if ((nl = strchr(line, '\n')) == NULL)
				break;	/* a cut last line: not used */
			*nl = '\0';
			if ((sp = strchr(line, ' ')) != NULL)
				dl_owner_line(o, line, (size_t)(sp - line),
				    sp + 1);
		}
	}
	free(buf);
	(void)close(fd);
}

/*
 * Whether the path meta (absolute, resolved, named X.biomirror) is a
 * DEST.biomirror: a directory, and X our symlink into it, or its owner
 * record says publish set, or X missing and snapshots/ in it (nothing
 * published yet by a run that kept no record).
 */
static bool
dl_is_meta(const char *meta)
{
	struct dl_owner	 o;
	struct stat	 st;
	char		 x[PATH_MAX], rec[PATH_MAX + 16];
	const char	*base;
	size_t		 n = strlen(meta) - strlen(DL_META);
	bool		 xlink, xgone;

	if (n >= sizeof(x) || lstat(meta, &st) == -1 || !S_ISDIR(st.st_mode))
		return false;
	memcpy(x, meta, n);
	x[n] = '\0';
	if ((base = strrchr(x, '/')) == NULL)
		return false;
	xgone = lstat(x, &st) == -1 && errno == ENOENT;
	xlink = !xgone && S_ISLNK(st.st_mode);
	if (xlink && dl_is_setlink(AT_FDCWD, x, base + 1))
		return true;
	(void)snprintf(rec, sizeof(rec), "%s/" DL_OWNER, meta);
	dl_owner_read(AT_FDCWD, rec, &o);
	if (o.found && o.set)
		return true;
	(void)snprintf(rec, sizeof(rec), "%s" DL_SNAPS, meta);
	return xgone && lstat(rec, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Whether the resolved path p is or lies in a DEST.biomirror (the
 * outermost component X.biomirror that dl_is_meta()).  Returns 1 with its
 * path in *ret_meta (malloc'd) and *ret_snap whether p is in one of its
 * snapshots, 0, or BM_ENOMEM.
 */
static int
dl_in_meta(const char *p, char **ret_meta, bool *ret_snap)
{
	const char	*c, *e;
	char		*meta;
	size_t		 ml = strlen(DL_META), sl = strlen(DL_SNAPS), d;

	for (c = p; *c != '\0'; c = e) {
		while (*c == '/')
			c++;
		e = c + strcspn(c, "/");
		if ((size_t)(e - c) <= ml || strncmp(e - ml, DL_META, ml) != 0)
			continue;
		if ((meta = strndup(p, (size_t)(e - p))) == NULL)
			return BM_ENOMEM;
		if (dl_is_meta(meta)) {
			d = strncmp(e, DL_SNAPS, sl) == 0 ?
			    strspn(e + sl, "0123456789") : 0;
			*ret_snap = d > 0 && (e[sl + d] == '/' ||
			    e[sl + d] == '\0');
			*ret_meta = meta;
			return 1;
		}
		free(meta);
	}
	return 0;
}

/*
 * The kind of DEST now (*ret_inside: the DEST.biomirror of DL_INSIDE,
 * malloc'd, else NULL; *ret_snap: in one of its snapshots).  Returns 0,
 * BM_ENOMEM or BM_EIO (errno kept).
 */
static int
dl_kind(const struct dest_lock *l, enum dl_kind *ret, char **ret_inside,
    bool *ret_snap)
{
	struct stat	 st;
	char		*res;
	int		 rc, err = 0;
	bool		 have;

	free(*ret_inside);
	*ret_inside = NULL;
	*ret_snap = false;
	have = l->pfd != -1 &&
	    fstatat(l->pfd, l->name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (!have)
		err = l->pfd == -1 ? ENOENT : errno;
	if (have && S_ISLNK(st.st_mode) &&
	    dl_is_setlink(l->pfd, l->name, l->name)) {
		*ret = DL_SET;
		return 0;
	}
	if ((res = fileio_path_resolve(l->real)) == NULL)
		return BM_ENOMEM;
	rc = dl_in_meta(res, ret_inside, ret_snap);
	free(res);
	if (rc != 0) {
		*ret = DL_INSIDE;
		return rc < 0 ? rc : 0;
	}
	if (!have && err != ENOENT) {
		errno = err;
		return BM_EIO;
	}
	if (!have)
		*ret = DL_MISSING;
	else if (S_ISDIR(st.st_mode) || (S_ISLNK(st.st_mode) &&
	    fstatat(l->pfd, l->name, &st, 0) == 0 && S_ISDIR(st.st_mode)))
		*ret = DL_PLAIN;
	else
		*ret = DL_OTHER;
	return 0;
}

/*
 * Whether a run holds the directory path (in dirfd) now: a shared flock
 * that would block.  1 yes, 0 no, -1 unknown (cannot open it).
 */
static int
dl_running(int dirfd, const char *path, bool follow)
{
	int	 fd, held;

	fd = openat(dirfd, path, follow ? DL_DIRFLAGS & ~O_NOFOLLOW :
	    DL_DIRFLAGS);
	if (fd == -1)
		return -1;
	held = flock(fd, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK;
	(void)close(fd);	/* drops our shared lock, if we got it */
	return held ? 1 : 0;
}

/* "mirror M of C (state directory S, pid N, running)" and the like. */
static void
dl_who(const struct dl_owner *o, int running, const char *where, char *buf,
    size_t len)
{
	char	 pid[64];

	if (!o->found) {
		(void)snprintf(buf, len, "an owner biomirror has no record of "
		    "(no %.200s)", where);
		return;
	}
	if (running == 1)
		(void)snprintf(pid, sizeof(pid), "pid %ld, running", o->pid);
	else if (running == 0)
		(void)snprintf(pid, sizeof(pid), "pid %ld, not running now",
		    o->pid);
	else
		(void)snprintf(pid, sizeof(pid), "pid %ld", o->pid);
	if (o->config[0] == '\0')
		(void)snprintf(buf, len, "an ad-hoc run (state directory "
		    "%.200s, %s)", o->state_dir, pid);
	else
		(void)snprintf(buf, len, "mirror %.100s of %.200s (state "
		    "directory %.200s, %s)", o->mirror, o->config,
		    o->state_dir, pid);
}

/* Whether DEST.biomirror is there (as anything). */
static bool
dl_has_meta(const struct dest_lock *l)
{
	struct stat	 st;

	return l->pfd != -1 &&
	    fstatat(l->pfd, l->meta, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/*
 * The record of DEST as it is into *o, its path into where:
 * DEST.biomirror/owner when DEST.biomirror exists, else (or when that has
 * none but one is beside DEST) the one beside DEST.
 */
static void
dl_record_of(const struct dest_lock *l, struct dl_owner *o, char *where,
    size_t len)
{
	char	 rel[PATH_MAX];

	memset(o, 0, sizeof(*o));
	(void)snprintf(rel, sizeof(rel), "%s", l->beside);
	if (dl_has_meta(l)) {
		(void)snprintf(rel, sizeof(rel), "%s/" DL_OWNER, l->meta);
		dl_owner_read(l->pfd, rel, o);
		if (!o->found && faccessat(l->pfd, l->beside, F_OK,
		    AT_SYMLINK_NOFOLLOW) == 0)
			(void)snprintf(rel, sizeof(rel), "%s", l->beside);
	}
	if (!o->found && l->pfd != -1 && strcmp(rel, l->beside) == 0)
		dl_owner_read(l->pfd, rel, o);
	(void)snprintf(where, len, "%s%s%s", l->parent,
	    strcmp(l->parent, "/") == 0 ? "" : "/", rel);
}

/*
 * Whether DEST.biomirror holds a publish = set tree in the making: the
 * record o says publish set, or it has snapshots/ (a first run or a
 * conversion cut short before it wrote a record).
 */
static bool
dl_meta_set(const struct dest_lock *l, const struct dl_owner *o)
{
	struct stat	 st;
	char		 rel[PATH_MAX];

	if (!dl_has_meta(l))
		return false;
	if (o->found && o->set)
		return true;
	(void)snprintf(rel, sizeof(rel), "%s" DL_SNAPS, l->meta);
	return fstatat(l->pfd, rel, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

/* Whether record o names the run l is (its state directory and name). */
static bool
dl_is_self(const struct dest_lock *l, const struct dl_owner *o)
{
	return o->found && strcmp(o->state_dir, l->state_dir) == 0 &&
	    strcmp(o->mirror, l->mirror) == 0;
}

/* Whether a run holds the tree DEST (its DEST.biomirror, else DEST). */
static int
dl_running_dest(const struct dest_lock *l)
{
	return dl_has_meta(l) ? dl_running(l->pfd, l->meta, false) :
	    dl_running(l->pfd, l->name, true);
}

/* The owner of the DEST.biomirror meta (a path) named into who. */
static void
dl_meta_who(const char *meta, char *who, size_t len)
{
	struct dl_owner	 o;
	char		 where[PATH_MAX + 16];

	(void)snprintf(where, sizeof(where), "%s/" DL_OWNER, meta);
	dl_owner_read(AT_FDCWD, where, &o);
	dl_who(&o, dl_running(AT_FDCWD, meta, false), where, who, len);
}

/* DEST is the DEST.biomirror inside, or lies in it: refused. */
static int
dl_refuse_meta(const struct dest_lock *l, const char *inside, bool snap,
    char *errbuf, size_t errlen)
{
	char	 who[1024];
	int	 tlen = (int)(strlen(inside) - strlen(DL_META));

	dl_meta_who(inside, who, sizeof(who));
	if (snap)
		(void)snprintf(errbuf, errlen, "%.200s lies inside a snapshot "
		    "of the publish = set tree %.*s of %s: a run there would "
		    "change a published snapshot: refused", l->dest, tlen,
		    inside, who);
	else if (strcmp(l->real, inside) == 0)
		(void)snprintf(errbuf, errlen, "%.200s holds the snapshots and "
		    "owner record of the publish = set tree %.*s of %s: a run "
		    "there would change them: refused", l->dest, tlen, inside,
		    who);
	else
		(void)snprintf(errbuf, errlen, "%.200s lies inside %.200s, "
		    "which holds the snapshots and owner record of the publish "
		    "= set tree %.*s of %s: a run there would change them: "
		    "refused", l->dest, inside, tlen, inside, who);
	return BM_EUNSAFE;
}

/*
 * DEST's own kind and record against the run: a publish = file or ad-hoc
 * run on a publish = set tree (published or not yet), a publish = set run
 * on a tree whose record names another mirror.  BM_EUNSAFE or 0.
 */
static int
dl_refuse_kind(const struct dest_lock *l, enum dl_kind kind, char *errbuf,
    size_t errlen)
{
	struct dl_owner	 o;
	char		 where[PATH_MAX + 32], who[1024];
	const char	*sep = strcmp(l->parent, "/") == 0 ? "" : "/";
	bool		 self, pending;

	if (kind == DL_INSIDE || kind == DL_OTHER)
		return 0;
	dl_record_of(l, &o, where, sizeof(where));
	self = dl_is_self(l, &o);
	pending = kind != DL_SET && dl_meta_set(l, &o);
	if ((l->set && (!o.found || self)) || (kind == DL_MISSING &&
	    !pending) || (!l->set && kind != DL_SET && !pending))
		return 0;	/* nobody's, or ours; or a plain tree */
	dl_who(&o, dl_running_dest(l), where, who, sizeof(who));
	if (kind == DL_SET)
		(void)snprintf(errbuf, errlen, "%.200s is a publish = set tree "
		    "(a symlink to a snapshot in %.200s%s%.200s) of %s: ",
		    l->dest, l->parent, sep, l->meta, who);
	else if (pending)
		(void)snprintf(errbuf, errlen, "%.200s is the destination of "
		    "the publish = set tree %.200s%s%.200s of %s, not published "
		    "or not converted yet: ", l->dest, l->parent, sep, l->meta,
		    who);
	else
		(void)snprintf(errbuf, errlen, "%.200s is a plain tree of %s: ",
		    l->dest, who);
	if (!l->set)
		(void)snprintf(errbuf + strlen(errbuf), errlen -
		    strlen(errbuf), "a publish = file or ad-hoc run would %s: "
		    "refused (%s; to go back to publish = file see publish in "
		    "biomirror.conf(5))", kind == DL_SET ? "write into its "
		    "published snapshot" : "take it over", self ? "set "
		    "publish = set again" : "sync that mirror instead");
	else
		(void)snprintf(errbuf + strlen(errbuf), errlen -
		    strlen(errbuf), "a publish = set run of another mirror "
		    "would %s: refused (if that mirror no longer uses it, "
		    "remove %.200s)", kind == DL_PLAIN && !pending ? "move it "
		    "into its snapshots" : "take over its snapshots", where);
	return BM_EUNSAFE;
}

/*
 * The record of the tree t (absolute, real) into *o and its path into
 * where: t.biomirror/owner when t.biomirror is a directory, else the one
 * beside t.  Returns whether a run holds t now (dl_running), -1 when no
 * record was found.
 */
static int
dl_tree_record(const char *t, struct dl_owner *o, char *where, size_t len)
{
	struct stat	 st;
	char		 meta[PATH_MAX];
	const char	*slash = strrchr(t, '/');

	memset(o, 0, sizeof(*o));
	if (slash == NULL || (size_t)snprintf(meta, sizeof(meta),
	    "%s" DL_META, t) >= sizeof(meta))
		return -1;
	if (lstat(meta, &st) == 0 && S_ISDIR(st.st_mode)) {
		(void)snprintf(where, len, "%s/" DL_OWNER, meta);
		dl_owner_read(AT_FDCWD, where, o);
		return o->found ? dl_running(AT_FDCWD, meta, false) : -1;
	}
	(void)snprintf(where, len, "%.*s/.%s" DL_BESIDE, (int)(slash - t), t,
	    slash + 1);
	dl_owner_read(AT_FDCWD, where, o);
	return o->found ? dl_running(AT_FDCWD, t, true) : -1;
}

/*
 * DEST lies inside another mirror's tree: an ancestor of DEST has a
 * record (beside it, or in its DEST.biomirror) naming another run.
 */
static int
dl_refuse_above(const struct dest_lock *l, char *errbuf, size_t errlen)
{
	struct dl_owner	 o;
	char		 a[PATH_MAX], where[PATH_MAX + 32], who[1024];
	const char	*e;
	size_t		 n;
	int		 running;

	for (e = l->parent; strcmp(l->parent, "/") != 0 && *e != '\0'; ) {
		e++;
		e += strcspn(e, "/");
		if ((n = (size_t)(e - l->parent)) >= sizeof(a))
			break;
		memcpy(a, l->parent, n);
		a[n] = '\0';
		running = dl_tree_record(a, &o, where, sizeof(where));
		if (!o.found || dl_is_self(l, &o))
			continue;
		dl_who(&o, running, where, who, sizeof(who));
		(void)snprintf(errbuf, errlen, "%.200s lies inside %.200s, the "
		    "%s tree of %s: a run there would change that mirror's "
		    "tree: refused (if that mirror no longer uses it, remove "
		    "%.200s)", l->dest, a, o.set ? "publish = set" : "plain",
		    who, where);
		return BM_EUNSAFE;
	}
	return 0;
}

/*
 * DEST holds a DEST.biomirror in its top directory (one read of it; a
 * deeper one is not looked for): refused.  BM_EUNSAFE, 0 or BM_ENOMEM.
 */
static int
dl_refuse_holds(const struct dest_lock *l, char *errbuf, size_t errlen)
{
	struct dirent	*de;
	DIR		*dir;
	char		*res, meta[PATH_MAX], who[1024];
	size_t		 n, ml = strlen(DL_META);
	int		 fd, rc = 0;

	if ((fd = openat(l->pfd, l->name, O_RDONLY | O_DIRECTORY |
	    O_NONBLOCK | O_CLOEXEC)) == -1)
		return 0;	/* the store judges */
	if ((dir = fdopendir(fd)) == NULL) {
		(void)close(fd);
		return 0;
	}
	if ((res = fileio_path_resolve(l->real)) == NULL)
		rc = BM_ENOMEM;
	while (rc == 0 && (de = readdir(dir)) != NULL) {
		n = strlen(de->d_name);
		if (n <= ml || strcmp(de->d_name + n - ml, DL_META) != 0 ||
		    (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) ||
		    (size_t)snprintf(meta, sizeof(meta), "%s/%s", res,
		    de->d_name) >= sizeof(meta) || !dl_is_meta(meta))
			continue;
		dl_meta_who(meta, who, sizeof(who));
		(void)snprintf(errbuf, errlen, "%.200s contains %.200s, which "
		    "holds the snapshots and owner record of the publish = set "
		    "tree %.*s of %s: a run there would change them: refused",
		    l->dest, meta, (int)(strlen(meta) - ml), meta, who);
		rc = BM_EUNSAFE;
	}
	(void)closedir(dir);
	free(res);
	return rc;
}

/*
 * The checks before locking (include/biomirror/destlock.h): BM_EUNSAFE
 * with the owner named in errbuf when a run like l may not write to
 * DEST, else 0 (or BM_ENOMEM).
 */
static int
dl_refuse(const struct dest_lock *l, enum dl_kind kind, const char *inside,
    bool snap, char *errbuf, size_t errlen)
{
	int	 rc;

	if (kind == DL_INSIDE)
		return dl_refuse_meta(l, inside, snap, errbuf, errlen);
	if ((rc = dl_refuse_kind(l, kind, errbuf, errlen)) != 0 ||
	    (rc = dl_refuse_above(l, errbuf, errlen)) != 0)
		return rc;
	if (kind == DL_PLAIN || kind == DL_SET)
		return dl_refuse_holds(l, errbuf, errlen);
	return 0;
}

/* flock(2) fd without blocking: 0, BM_ELOCKED or BM_EIO (errno kept). */
static int
dl_flock(int fd, bool shared)
{
	while (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == -1) {
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? BM_ELOCKED : BM_EIO;
	}
	return 0;
}

/* BM_ELOCKED on fd (locked by another run): errbuf names the holder. */
static int
dl_locked(const struct dest_lock *l, int fd, char *errbuf, size_t errlen)
{
	struct dl_owner	 o;
	char		 where[PATH_MAX + 32], who[1024];

	/* Only read-only runs hold it when a shared lock is granted. */
	if (!l->shared && flock(fd, LOCK_SH | LOCK_NB) == 0) {
		(void)snprintf(errbuf, errlen, "the destination %.200s is in "
		    "use by another run: a plan or verify (read-only)",
		    l->dest);
		return BM_ELOCKED;
	}
	dl_record_of(l, &o, where, sizeof(where));
	dl_who(&o, 1, where, who, sizeof(who));
	(void)snprintf(errbuf, errlen, "the destination %.200s is in use by "
	    "another run: %s", l->dest, who);
	return BM_ELOCKED;
}

/* Open (O_NOFOLLOW unless follow) and lock the directory path in pfd. */
static int
dl_lock_one(struct dest_lock *l, const char *path, bool follow, int *ret_fd,
    char *errbuf, size_t errlen)
{
	int	 fd, rc, err;

	fd = openat(l->pfd, path, follow ? DL_DIRFLAGS & ~O_NOFOLLOW :
	    DL_DIRFLAGS);
	if (fd == -1) {
		err = errno;
		(void)snprintf(errbuf, errlen, "%.200s/%.200s: open: %s",
		    l->parent, path, strerror(err));
		errno = err;
		return BM_EIO;
	}
	*ret_fd = fd;
	if ((rc = dl_flock(fd, l->shared)) == BM_ELOCKED)
		return dl_locked(l, fd, errbuf, errlen);
	if (rc != 0) {
		err = errno;
		(void)snprintf(errbuf, errlen, "%.200s/%.200s: flock: %s",
		    l->parent, path, strerror(err));
		errno = err;
	}
	return rc;
}

/*
 * Lock what DEST of this kind has: DEST when it is a directory, and
 * DEST.biomirror when it exists (made first for a publish = set run that
 * may create it).  A DEST.biomirror that is no directory is left for the
 * store to refuse.
 */
static int
dl_lock(struct dest_lock *l, enum dl_kind kind, char *errbuf, size_t errlen)
{
	struct stat	 st;
	bool		 made = false;
	int		 rc;

	if (kind == DL_PLAIN && (rc = dl_lock_one(l, l->name, true, &l->dfd,
	    errbuf, errlen)) != 0)
		return rc;
	if (fstatat(l->pfd, l->meta, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		if (errno != ENOENT || !l->set || !l->create)
			return 0;
		if (mkdirat(l->pfd, l->meta, 0755) == 0)
			made = true;
		else if (errno != EEXIST) {
			rc = errno;
			(void)snprintf(errbuf, errlen, "%.200s/%.200s: mkdir: "
			    "%s", l->parent, l->meta, strerror(rc));
			errno = rc;
			return BM_EIO;
		}
	} else if (!S_ISDIR(st.st_mode))
		return 0;
	if ((rc = dl_lock_one(l, l->meta, false, &l->mfd, errbuf,
	    errlen)) != 0)
		return rc;
	if (made)
		l->made_meta = true;
	return 0;
}

/* Whether what l locked is still what DEST and DEST.biomirror are. */
static bool
dl_same(int dirfd, const char *path, int flags, int fd)
{
	struct stat	 a, b;

	return fstatat(dirfd, path, &a, flags) == 0 && fstat(fd, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Close the descriptors (releasing the locks). */
static void
dl_unlock(struct dest_lock *l)
{
	int	 err = errno;

	if (l->dfd != -1)
		(void)close(l->dfd);
	if (l->mfd != -1)
		(void)close(l->mfd);
	l->dfd = l->mfd = -1;
	errno = err;
}

/*
 * Open DEST's parent; with make, make it (or DEST, publish = file) first
 * when missing (once the checks let the run go).
 */
static int
dl_open_parent(struct dest_lock *l, bool make, mode_t dir_mode,
    char *errbuf, size_t errlen)
{
	int	 rc, err;

	l->pfd = open(l->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->pfd != -1 || errno != ENOENT || !make)
		goto out;
	if ((rc = store_make_dest(l->set ? l->parent : l->dest,
	    dir_mode)) != 0) {
		err = errno;
		(void)snprintf(errbuf, errlen, "%.200s: mkdir: %s", l->dest,
		    strerror(err));
		errno = err;
		return rc;
	}
	l->pfd = open(l->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
out:
	if (l->pfd == -1 && (errno != ENOENT || make)) {
		err = errno;
		(void)snprintf(errbuf, errlen, "%.200s: %s", l->parent,
		    strerror(err));
		errno = err;
		return BM_EIO;
	}
	return 0;
}

/*
 * Once locked: whether DEST is still of kind and still the directories
 * locked (no conversion, publication or DEST.biomirror made meanwhile).
 */
static int
dl_stable(const struct dest_lock *l, enum dl_kind kind, bool *ret)
{
	enum dl_kind	 now;
	struct stat	 st;
	char		*inside = NULL;
	bool		 snap;
	int		 rc;

	*ret = false;
	if ((rc = dl_kind(l, &now, &inside, &snap)) != 0)
		return rc;
	free(inside);
	if (now != kind)
		return 0;
	if (l->dfd != -1 && !dl_same(l->pfd, l->name, 0, l->dfd))
		return 0;
	if (l->mfd != -1 ? !dl_same(l->pfd, l->meta, AT_SYMLINK_NOFOLLOW,
	    l->mfd) : (fstatat(l->pfd, l->meta, &st, AT_SYMLINK_NOFOLLOW) ==
	    0 && S_ISDIR(st.st_mode)))
		return 0;	/* a DEST.biomirror made meanwhile: not ours */
	*ret = true;
	return 0;
}

/* See include/biomirror/destlock.h. */
int
dest_lock_take(const char *dest, const struct dest_who *self,
    unsigned flags, mode_t dir_mode, struct dest_lock **ret, char *errbuf,
    size_t errlen)
{
	struct dest_lock *l;
	enum dl_kind	 kind;
	char		*inside = NULL, dummy[1];
	bool		 made = false, stable = false, snap;
	int		 tries, rc;

	if (errbuf == NULL || errlen == 0) {
		errbuf = dummy;
		errlen = sizeof(dummy);
	}
	errbuf[0] = '\0';
	*ret = NULL;
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return BM_ENOMEM;
	l->pfd = l->dfd = l->mfd = -1;
	l->shared = (flags & DEST_LOCK_SHARED) != 0;
	l->create = (flags & DEST_LOCK_CREATE) != 0;
	if ((rc = dl_init(l, dest, self)) != 0 ||
	    (rc = dl_open_parent(l, false, dir_mode, errbuf, errlen)) != 0 ||
	    (rc = dl_canon(l, errbuf, errlen)) != 0)
		goto out;
	for (tries = 0; !stable; tries++) {
		if (tries == DL_TRIES) {
			(void)snprintf(errbuf, errlen, "the destination %.200s "
			    "changed while it was being locked (another run "
			    "converting or publishing it)", l->dest);
			rc = BM_ELOCKED;
			goto out;
		}
		dl_unlock(l);
		if ((rc = dl_kind(l, &kind, &inside, &snap)) != 0) {
			if (rc == BM_EIO)
				(void)snprintf(errbuf, errlen, "%.200s: %s",
				    l->dest, strerror(errno));
			goto out;
		}
		if ((rc = dl_refuse(l, kind, inside, snap, errbuf,
		    errlen)) != 0)
			goto out;
		if (l->pfd == -1 && l->create && !made) {
			/* Its parent made (and DEST, publish = file): again. */
			made = true;
			if ((rc = dl_open_parent(l, true, dir_mode, errbuf,
			    errlen)) != 0 || (rc = dl_canon(l, errbuf,
			    errlen)) != 0)
				goto out;
			continue;
		}
		if (kind == DL_MISSING && !l->set && l->create && !made) {
			/* publish = file makes DEST, then locks it. */
			made = true;
			if ((rc = store_make_dest(l->dest, dir_mode)) != 0) {
				(void)snprintf(errbuf, errlen, "%.200s: mkdir: "
				    "%s", l->dest, strerror(errno));
				goto out;
			}
			continue;
		}
		if (l->pfd == -1)
			break;	/* nothing there, nothing made: no lock */
		if ((rc = dl_lock(l, kind, errbuf, errlen)) != 0 ||
		    (rc = dl_stable(l, kind, &stable)) != 0)
			goto out;
	}
	*ret = l;
	l = NULL;
	rc = 0;
out:
	free(inside);
	dest_lock_free(l);
	return rc;
}

/*
 * Rewrite name in dirfd in place when it holds text but for its first
 * line (the next run of the same owner: only "pid N" differs): one
 * pwrite, and an ftruncate when the pid is shorter (meanwhile a reader
 * sees at most a tail of the last line, without a space: no field).  No
 * new inode, and no flush that ext4 starts for a rename over a file.
 * 1 done, 0 not that case (nothing written).
 */
static int
dl_rewrite(int dirfd, const char *name, const char *text, size_t len)
{
	struct stat	 st;
	char		 old[DL_RECORD_MAX];
	const char	*nl, *onl;
	size_t		 rest;
	ssize_t		 n;
	int		 fd, done = 0;

	if ((nl = strchr(text, '\n')) == NULL)
		return 0;
	rest = len - (size_t)(nl - text);
	if ((fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) == -1)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
	    st.st_size > 0 && (size_t)st.st_size <= sizeof(old) &&
	    (n = pread(fd, old, (size_t)st.st_size, 0)) == st.st_size &&
	    (onl = memchr(old, '\n', (size_t)n)) != NULL &&
	    (size_t)n - (size_t)(onl - old) == rest &&
	    memcmp(onl, nl, rest) == 0 &&
	    pwrite(fd, text, len, 0) == (ssize_t)len)
		done = (size_t)n <= len || ftruncate(fd, (off_t)len) == 0;
	(void)close(fd);
	return done;
}

/* Write record text into name in dirfd, by a rename of tmp over it. */
static int
dl_write(int dirfd, const char *tmp, const char *name, const char *text)
{
	size_t	 len = strlen(text);
	ssize_t	 n;
	int	 fd, err, rc = BM_EIO;

	if (dl_rewrite(dirfd, name, text, len))
		return 0;
	if ((fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC |
	    O_NOFOLLOW | O_CLOEXEC, 0644)) == -1)
		return BM_EIO;
	n = write(fd, text, len);
	err = errno;
	if (close(fd) == 0 && n == (ssize_t)len &&
	    renameat(dirfd, tmp, dirfd, name) == 0)
		rc = 0;
	else {
		if (n >= 0 && n != (ssize_t)len)
			err = EIO;
		(void)unlinkat(dirfd, tmp, 0);
		errno = err;
	}
	return rc;
}

/* See include/biomirror/destlock.h. */
int
dest_lock_record(struct dest_lock *l)
{
	struct stat	 st;
	char		 text[2 * PATH_MAX + 512], tmp[NAME_MAX + 8];
	int		 n;

	if (l == NULL || l->shared || (l->dfd == -1 && l->mfd == -1))
		return 0;
	n = snprintf(text, sizeof(text), "pid %ld\nmirror %s\n%s%s%s"
	    "state_dir %s\npublish %s\n", (long)getpid(), l->mirror,
	    l->config[0] != '\0' ? "config " : "", l->config,
	    l->config[0] != '\0' ? "\n" : "", l->state_dir,
	    l->set ? "set" : "file");
	if (n < 0 || (size_t)n >= sizeof(text)) {
		errno = ENAMETOOLONG;
		return BM_EIO;
	}
	if (l->mfd != -1) {
		if (dl_write(l->mfd, DL_OWNER_TMP, DL_OWNER, text) != 0)
			return BM_EIO;
		/* Converted: the plain tree's record (ours) is done with. */
		if (l->set && fstatat(l->pfd, l->name, &st,
		    AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) &&
		    unlinkat(l->pfd, l->beside, 0) == -1 && errno != ENOENT)
			return BM_EIO;
		return 0;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", l->beside) >=
	    sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return BM_EIO;
	}
	return dl_write(l->pfd, tmp, l->beside, text);
}

/* See include/biomirror/destlock.h. */
void
dest_lock_free(struct dest_lock *l)
{
	int	 err = errno;

	if (l == NULL)
		return;
	/* Made by this run and still empty: the store refused the tree. */
	if (l->made_meta && l->mfd != -1)
		(void)unlinkat(l->pfd, l->meta, AT_REMOVEDIR);
	dl_unlock(l);
	if (l->pfd != -1)
		(void)close(l->pfd);
	free(l->dest);
	free(l->real);
	free(l->parent);
	free(l->name);
	free(l->meta);
	free(l->beside);
	free(l);
	errno = err;
}
