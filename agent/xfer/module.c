/*
 * The transports' optional modules (module.h): where a module file is
 * looked for, and its dlopen() and entry point.  The caller keeps the
 * table the entry returns; a handle is never closed (libudt's threads,
 * libcurl's global state live in them).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "biomirror/error.h"
#include "module.h"

/* The module's path into path (len bytes): the rule of module.h. */
static void
module_path(const char *file, const char *env, char *path, size_t len)
{
	const char	*v;
	char		 exe[PATH_MAX], *slash;
	ssize_t		 n;

	v = getenv(env);
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
		(void)snprintf(path, len, "%s", file);
		return;
	}
	*slash = '\0';
	(void)snprintf(path, len, "%s/%s", exe, file);
	if (access(path, F_OK) == 0)
		return;
	(void)snprintf(path, len, "%s/../lib/biomirror/%s", exe, file);
}

void
xfer_module_refused(const char *what, const char *file, const char *env,
    const char *why, char *errbuf, size_t errlen)
{
	char	 path[PATH_MAX + 64];

	module_path(file, env, path, sizeof(path));
	if (errbuf != NULL && errlen > 0)
		(void)snprintf(errbuf, errlen, "%s module %s: %s", what, path,
		    why != NULL ? why : "cannot be loaded");
}

int
xfer_module_open(const char *what, const char *file, const char *env,
    const char *sym, void **ret_entry, char *errbuf, size_t errlen)
{
	char		 path[PATH_MAX + 64];
	const char	*why;
	void		*h, *entry;

	module_path(file, env, path, sizeof(path));
	if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		why = dlerror();
		/* dlerror() says "PATH: reason": the path once is enough */
		if (why != NULL && strncmp(why, path, strlen(path)) == 0 &&
		    strncmp(why + strlen(path), ": ", 2) == 0)
			why += strlen(path) + 2;
		goto fail;
	}
	if ((entry = dlsym(h, sym)) == NULL) {
		why = dlerror();
		goto fail;	/* h stays open: harmless, dlclose may hang */
	}
	*ret_entry = entry;
	return 0;
fail:
	if (errbuf != NULL && errlen > 0)
		(void)snprintf(errbuf, errlen, "%s module %s: %s", what, path,
		    why != NULL ? why : "cannot be loaded");
	return BM_EINVAL;
}
