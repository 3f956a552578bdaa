/*
 * The transports' optional modules (module.h): where a module file is
 * looked for, the checks it passes before it is loaded, its dlopen() and
 * entry point, and its table, published once.  Invariant: what is loaded
 * is the file that was checked: it is opened once, checked by fstat() of
 * that descriptor (and the directory it was found in, opened first, by
 * its own), and dlopen()ed through /proc/self/fd/N, never by its name
 * again.  A handle is never closed (libudt's threads, libcurl's global
 * state live in them), nor the descriptor it was loaded through: the
 * dynamic linker knows the module by the name /proc/self/fd/N, and a
 * later dlopen() of that name (another module's descriptor reusing N)
 * would be given this one.
 */
#include <sys/stat.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "module.h"

/*
 * May st (the module file, or with dir set the directory it was found
 * in) be trusted: no write by group or others, owned by root or this
 * user?  False with why (len bytes) said.
 */
static bool
module_trusted(const struct stat *st, const char *dir, char *why,
    size_t len)
{
	unsigned	 me = (unsigned)geteuid();
	char		 what[PATH_MAX + 16] = "";

	if (dir != NULL)
		(void)snprintf(what, sizeof(what), "directory %s: ", dir);
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0) {
		(void)snprintf(why, len, "%smode %04o: writable by group or "
		    "others%s: refused%s", what, (unsigned)(st->st_mode &
		    07777), dir != NULL ? ", who could plant a module there" :
		    "", dir != NULL ? "" : " (chmod go-w it)");
		return false;
	}
	if (st->st_uid != 0 && (unsigned)st->st_uid != me) {
		(void)snprintf(why, len, "%sowned by uid %u, not root or this "
		    "user (uid %u): refused", what, (unsigned)st->st_uid, me);
		return false;
	}
	return true;
}

/*
 * Open file in dir (NULL: file is a path of its own, $env), the module
 * whose name path gives: the descriptor (O_RDONLY, O_CLOEXEC) of a
 * regular file that module_trusted() passed, as did dir.  -1 with why
 * (len bytes) said, and *ret_missing set when there is no such file.
 */
static int
module_at(const char *dir, const char *file, char *why, size_t len,
    bool *ret_missing)
{
	struct stat	 dst, st;
	int		 dfd = AT_FDCWD, fd = -1, e;

	*ret_missing = false;
	if (dir != NULL && (dfd = open(dir, O_PATH | O_DIRECTORY |
	    O_CLOEXEC)) == -1) {
		e = errno;
		*ret_missing = e == ENOENT;
		(void)snprintf(why, len, "cannot open shared object file: %s",
		    strerror(e));
		return -1;
	}
	/* O_NONBLOCK: a FIFO planted there does not hang the open. */
	if ((fd = openat(dfd, file, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) ==
	    -1) {
		e = errno;
		*ret_missing = e == ENOENT;
		/* As dlopen() said it when it opened the file by name. */
		(void)snprintf(why, len, "cannot open shared object file: %s",
		    strerror(e));
		goto out;
	}
	if (dir != NULL && fstat(dfd, &dst) == -1) {
		(void)snprintf(why, len, "directory %s: fstat: %s", dir,
		    strerror(errno));
		goto bad;
	}
	if (dir != NULL && !module_trusted(&dst, dir, why, len))
		goto bad;
	if (fstat(fd, &st) == -1) {
		(void)snprintf(why, len, "fstat: %s", strerror(errno));
		goto bad;
	}
	if (!S_ISREG(st.st_mode)) {
		(void)snprintf(why, len, "not a regular file");
		goto bad;
	}
	if (module_trusted(&st, NULL, why, len))
		goto out;
bad:
	(void)close(fd);
	fd = -1;
out:
	if (dfd != AT_FDCWD)
		(void)close(dfd);
	return fd;
}

/*
 * The module file, checked and open, by the rule of module.h; path (len
 * bytes) names it for messages.  Its descriptor, or -1 with why (whylen
 * bytes) said.
 */
static int
module_find(const struct xfer_module *m, char *path, size_t len,
    char *why, size_t whylen)
{
	const char	*v;
	char		 exe[PATH_MAX], dir[PATH_MAX + 32], *slash = NULL;
	ssize_t		 n;
	bool		 missing;
	int		 fd, e;

	v = getenv(m->env);
	if (v != NULL && v[0] != '\0') {
		(void)snprintf(path, len, "%s", v);
		return module_at(NULL, v, why, whylen, &missing);
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	e = errno;
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
	}
	if (slash == NULL) {
		(void)snprintf(path, len, "%s", m->file);
		(void)snprintf(why, whylen, "/proc/self/exe: %s: the binary's "
		    "directory is unknown", n == -1 ? strerror(e) :
		    "not a path");
		return -1;
	}
	*slash = '\0';
	(void)snprintf(path, len, "%s/%s", exe, m->file);
	if ((fd = module_at(exe, m->file, why, whylen, &missing)) != -1 ||
	    !missing)
		return fd;
	(void)snprintf(dir, sizeof(dir), "%s/../lib/biomirror", exe);
	(void)snprintf(path, len, "%s/%s", dir, m->file);
	return module_at(dir, m->file, why, whylen, &missing);
}

/* dlopen() and the entry's table, under m->lock; NULL, why said. */
static const void *
module_open(struct xfer_module *m, char *errbuf, size_t errlen)
{
	const void	*(*entry)(void);
	const void	*t = NULL;
	char		 path[PATH_MAX + 64], fdpath[64];
	char		 buf[PATH_MAX + 256], msg[sizeof(path) + sizeof(buf) + 16];
	const char	*why = buf;
	void		*h, *sym;
	size_t		 n;
	int		 fd;
	bool		 mapped = false;

	if ((fd = module_find(m, path, sizeof(path), buf, sizeof(buf))) ==
	    -1)
		goto fail;
	(void)snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	if (access(fdpath, F_OK) != 0) {
		why = "/proc is not mounted (a module is loaded through "
		    "/proc/self/fd)";
		(void)close(fd);
	} else if ((h = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		why = dlerror();
		(void)close(fd);
	} else if ((mapped = true, sym = dlsym(h, m->sym)) == NULL)
		why = dlerror();	/* h, fd stay open: dlclose may hang */
	else {
		*(void **)&entry = sym;
		if ((t = entry()) == NULL)
			why = "its set-up failed";
		else if (*(const int *)t != m->abi) {
			why = "not this build's module (ABI mismatch)";
			t = NULL;
		} else
			return t;	/* fd stays open: see above */
	}
	/*
	 * dlerror() says "/proc/self/fd/N: reason" (N of the first load
	 * of that file, if it was loaded before): the path says it.
	 */
	if (why != NULL && strncmp(why, "/proc/self/fd/", 14) == 0 &&
	    (n = strspn(why + 14, "0123456789")) > 0 &&
	    strncmp(why + 14 + n, ": ", 2) == 0)
		why += 14 + n + 2;
fail:
	(void)snprintf(msg, sizeof(msg), "%s module %s: %s", m->what, path,
	    why != NULL ? why : "cannot be loaded");
	if (errbuf != NULL && errlen > 0)
		(void)snprintf(errbuf, errlen, "%s", msg);
	if (mapped)
		m->rejected = strdup(msg);	/* NULL: tried again */
	return NULL;
}

const void *
xfer_module_load(struct xfer_module *m, char *errbuf, size_t errlen)
{
	const void	*t;

	if ((t = atomic_load_explicit(&m->table, memory_order_acquire)) !=
	    NULL)
		return t;
	(void)pthread_mutex_lock(&m->lock);
	if ((t = atomic_load_explicit(&m->table, memory_order_relaxed)) !=
	    NULL)
		;
	else if (m->rejected != NULL) {
		if (errbuf != NULL && errlen > 0)
			(void)snprintf(errbuf, errlen, "%s", m->rejected);
	} else if ((t = module_open(m, errbuf, errlen)) != NULL)
		atomic_store_explicit(&m->table, t, memory_order_release);
	(void)pthread_mutex_unlock(&m->lock);
	return t;
}

const void *
xfer_module_table(struct xfer_module *m)
{
	return atomic_load_explicit(&m->table, memory_order_acquire);
}
