/*
 * The transports' optional modules (module.h): where a module file is
 * looked for, its dlopen() and entry point, and its table, published
 * once.  A handle is never closed (libudt's threads, libcurl's global
 * state live in them).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "module.h"

/* The module's path into path (len bytes): the rule of module.h. */
static void
module_path(const struct xfer_module *m, char *path, size_t len)
{
	const char	*v;
	char		 exe[PATH_MAX], *slash;
	ssize_t		 n;

	v = getenv(m->env);
	if (v != NULL && v[0] != '\0') {
		(void)snprintf(path, len, "%s", v);
		return;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	slash = NULL;
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
	}
	if (slash == NULL) {
		/* no /proc: the bare name, dlopen's search path */
		(void)snprintf(path, len, "%s", m->file);
		return;
	}
	*slash = '\0';
	(void)snprintf(path, len, "%s/%s", exe, m->file);
	if (access(path, F_OK) == 0)
		return;
	(void)snprintf(path, len, "%s/../lib/biomirror/%s", exe, m->file);
}

/* dlopen() and the entry's table, under m->lock; NULL, why said. */
static const void *
module_open(struct xfer_module *m, char *errbuf, size_t errlen)
{
	const void	*(*entry)(void);
	const void	*t = NULL;
	char		 path[PATH_MAX + 64];
	const char	*why;
	void		*h, *sym;

	module_path(m, path, sizeof(path));
	if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL)
		why = dlerror();
	else if ((sym = dlsym(h, m->sym)) == NULL)
		why = dlerror();	/* h stays open: dlclose may hang */
	else {
		*(void **)&entry = sym;
		if ((t = entry()) == NULL)
			why = "its set-up failed";
		else if (*(const int *)t != m->abi) {
			why = "not this build's module (ABI mismatch)";
			t = NULL;
		} else
			return t;
	}
	/* dlerror() says "PATH: reason": the path once is enough */
	if (why != NULL && strncmp(why, path, strlen(path)) == 0 &&
	    strncmp(why + strlen(path), ": ", 2) == 0)
		why += strlen(path) + 2;
	if (errbuf != NULL && errlen > 0)
		(void)snprintf(errbuf, errlen, "%s module %s: %s", m->what, path,
		    why != NULL ? why : "cannot be loaded");
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
	if ((t = atomic_load_explicit(&m->table, memory_order_relaxed)) ==
	    NULL && (t = module_open(m, errbuf, errlen)) != NULL)
		atomic_store_explicit(&m->table, t, memory_order_release);
	(void)pthread_mutex_unlock(&m->lock);
	return t;
}

const void *
xfer_module_table(struct xfer_module *m)
{
	return atomic_load_explicit(&m->table, memory_order_acquire);
}
