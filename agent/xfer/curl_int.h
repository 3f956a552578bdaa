/*
 * The curl module's table (folder-private): libbiomirror-curl.so, built
 * from curl.c (with agent/error.c and agent/proto/ftp.c), exports only
 * xfer_curl_module(); the loader (curl_load.c) dlopen()s it when a curl
 * transport is first opened or a URL first inspected by it, so that a
 * run that uses neither (bm://, serve, status) never maps libcurl and
 * the TLS, LDAP, Kerberos and IDN libraries it pulls in.  Bump
 * CURL_MODULE_ABI when the table, xfer.h or this file changes.
 */
#ifndef BIOMIRROR_CURL_INT_H
#define BIOMIRROR_CURL_INT_H

#include "biomirror/xfer.h"

#define CURL_MODULE_ABI		2
#define CURL_MODULE_SYM		"xfer_curl_module"
#define CURL_MODULE_FILE	"libbiomirror-curl.so"

struct curl_module {
	int			 abi;	/* CURL_MODULE_ABI of the module */
	size_t			 ops_size; /* its sizeof(struct xfer_ops) */
	const struct xfer_ops	*ops;	/* the transport, handles NULL */
};

/*
 * The module's one export: its table (static), libcurl's global state
 * set up by the first call; NULL when curl_global_init failed.
 */
const struct curl_module *xfer_curl_module(void);

#endif
