/*
 * A transport's optional module (folder-private): a shared object beside
 * the binary that holds what only some runs need, dlopen()ed on first
 * use and never closed, so that a run that does not use it never maps
 * its libraries (libudt: libbiomirror-udt.so, udt_load.c; libcurl and
 * the TLS, LDAP, Kerberos and IDN stacks it pulls in:
 * libbiomirror-curl.so, curl_load.c).
 *
 * The module file is $env when that is set and not empty, else file
 * beside the running binary (the build tree) when there, else
 * ../lib/biomirror/file from the binary's directory (make install:
 * $(PREFIX)/bin, $(PREFIX)/lib/biomirror; any PREFIX or DESTDIR).  It
 * must be a regular file, not writable by group or others, owned by root
 * or this user; so must the directory it is found in beside the binary
 * or in ../lib/biomirror (not $env's: the user named the file), or
 * another user could plant a module there (a binary copied into /tmp).
 * Checked on the descriptor that is then loaded (module.c).  Its
 * entry point sym takes no argument and returns its table, whose first
 * member is an int ABI number, or NULL when its own set-up failed.
 */
#ifndef BIOMIRROR_XFER_MODULE_H
#define BIOMIRROR_XFER_MODULE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* One module: what to load, and its table once loaded. */
struct xfer_module {
	const char	*what;		/* "UDT", "curl": for messages */
	const char	*file;		/* "libbiomirror-udt.so" */
	const char	*env;		/* "BM_UDT_MODULE" */
	const char	*sym;		/* the entry point */
	int		 abi;		/* what the table's first int must be */
	pthread_mutex_t	 lock;		/* taken only while loading */
	const void *_Atomic table;	/* set once; a failed load is tried
					   again by the next call */
	char		*rejected;	/* owned, under lock: the message of a
					   module mapped but refused (entry,
					   set-up or ABI), said again by every
					   later call instead of another load
					   that would hold one more fd */
};

#define XFER_MODULE_INIT(what, file, env, sym, abi) \
	{ what, file, env, sym, abi, PTHREAD_MUTEX_INITIALIZER, NULL, NULL }

/*
 * m's table, loaded by the first call.  NULL with "what module PATH:
 * reason" in errbuf (errlen bytes) when the file, its entry point or its
 * ABI is not there, the file or its directory is not to be trusted (the
 * reason names the directory, the mode or the owner), or its set-up
 * failed.  Needs /proc (the binary's path; the load through
 * /proc/self/fd/N).  Nothing here logs.
 */
const void *xfer_module_load(struct xfer_module *m, char *errbuf,
	    size_t errlen);

/* m's table once loaded, else NULL: one atomic load, no lock. */
const void *xfer_module_table(struct xfer_module *m);

#endif
