/*
 * Loading a transport's optional module (folder-private): a shared object
 * beside the binary that holds what only some runs need, dlopen()ed on
 * first use and never closed, so that a run that does not use it never
 * maps its libraries (libudt: libbiomirror-udt.so, udt_load.c; libcurl
 * and the TLS, LDAP, Kerberos and IDN stacks it pulls in:
 * libbiomirror-curl.so, curl_load.c).
 */
#ifndef BIOMIRROR_XFER_MODULE_H
#define BIOMIRROR_XFER_MODULE_H

#include <stddef.h>

/*
 * dlopen() module file and return its entry point sym in *ret_entry.
 * The file is $env when that is set and not empty, else file beside the
 * running binary (the build tree) when there, else
 * ../lib/biomirror/file from the binary's directory (make install:
 * $(PREFIX)/bin, $(PREFIX)/lib/biomirror; any PREFIX or DESTDIR).
 * Returns 0, or BM_EINVAL with "what module PATH: reason" in errbuf
 * (errlen bytes; what: "UDT", "curl").  Not locked: the caller loads
 * once, under its own lock.  Nothing here logs.
 */
int	xfer_module_open(const char *what, const char *file, const char *env,
	    const char *sym, void **ret_entry, char *errbuf, size_t errlen);

/* Write "what module PATH: why" into errbuf (a table the entry refused). */
void	xfer_module_refused(const char *what, const char *file,
	    const char *env, const char *why, char *errbuf, size_t errlen);

#endif
