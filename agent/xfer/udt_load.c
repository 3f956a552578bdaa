/*
 * The UDT shim's loader (udt_shim.h, udt_shim_int.h): the udt_shim.h API
 * for the C side, calling through the table of libbiomirror-udt.so,
 * dlopen()ed by the first udt_shim_startup() and never closed (libudt's
 * threads live in it).  The module is $BM_UDT_MODULE when set, else found
 * as module.h says.  Nothing here logs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/udt_shim.h"
#include "module.h"
#include "udt_shim_int.h"

/* The module; its table is read without a lock by every call. */
static struct xfer_module mod = XFER_MODULE_INIT("UDT", UDT_SHIM_MODULE_FILE,
    "BM_UDT_MODULE", UDT_SHIM_MODULE_SYM, UDT_SHIM_ABI);

/*
 * Load the module once (a failed load is tried again by the next
 * udt_shim_startup()).  Returns 0, or BM_EINVAL with "UDT module PATH:
 * reason" in errbuf (a missing file, a wrong table).
 */
static int
module_load(char *errbuf, size_t errlen)
{
	return xfer_module_load(&mod, errbuf, errlen) != NULL ? 0 : BM_EINVAL;
}

/* The table once loaded, or NULL: no lock. */
static const struct udt_shim_ops *
ops_get(void)
{
	return xfer_module_table(&mod);
}

/* A call before a successful udt_shim_startup(): BM_ENET, said so. */
static int
not_started(char *errbuf, size_t errlen)
{
	if (errbuf != NULL && errlen > 0)
		(void)snprintf(errbuf, errlen, "UDT not started");
	return BM_ENET;
}

int
udt_shim_startup(char *errbuf, size_t errlen)
{
	int	 rc;

	if ((rc = module_load(errbuf, errlen)) != 0)
		return rc;
	return ops_get()->startup(errbuf, errlen);
}

int
udt_shim_load(char *errbuf, size_t errlen)
{
	return module_load(errbuf, errlen);
}

void
udt_shim_cleanup(void)
{
	const struct udt_shim_ops *o = ops_get();

	if (o != NULL)
		o->cleanup();
}

int
udt_sock_listen(const struct sockaddr *sa, socklen_t salen,
    const struct udt_bufs *want, udt_sock **ret, struct udt_bufs *ret_got,
    char *errbuf, size_t errlen)
{
	const struct udt_shim_ops *o = ops_get();

	if (o == NULL)
		return not_started(errbuf, errlen);
	return o->sock_listen(sa, salen, want, ret, ret_got, errbuf, errlen);
}

/*
 * The calls below take a handle, which only the module makes: the table
 * is loaded by then.
 */
int
udt_sock_name(const udt_sock *s, struct sockaddr *ss, socklen_t *sslen)
{
	return ops_get()->sock_name(s, ss, sslen);
}

int
udt_sock_accept(udt_sock *l, udt_sock **ret, struct sockaddr *peer,
    socklen_t *peerlen, char *errbuf, size_t errlen)
{
	return ops_get()->sock_accept(l, ret, peer, peerlen, errbuf, errlen);
}

int
udt_sock_connect(const struct sockaddr *sa, socklen_t salen, udt_sock **ret,
    char *errbuf, size_t errlen)
{
	const struct udt_shim_ops *o = ops_get();

	if (o == NULL)
		return not_started(errbuf, errlen);
	return o->sock_connect(sa, salen, ret, errbuf, errlen);
}

long
udt_sock_recv(udt_sock *s, void *buf, size_t len, char *errbuf,
    size_t errlen)
{
	return ops_get()->sock_recv(s, buf, len, errbuf, errlen);
}

long
udt_sock_recv_pwrite(udt_sock *s, int fd, uint64_t off, size_t len,
    void *buf, size_t buflen, char *errbuf, size_t errlen)
{
	return ops_get()->sock_recv_pwrite(s, fd, off, len, buf, buflen,
	    errbuf, errlen);
}

int
udt_sock_send(udt_sock *s, const void *buf, size_t len, char *errbuf,
    size_t errlen)
{
	return ops_get()->sock_send(s, buf, len, errbuf, errlen);
}

int
udt_sock_set_maxbw(udt_sock *s, int64_t bps)
{
	return ops_get()->sock_set_maxbw(s, bps);
}

int64_t
udt_sock_maxbw(const udt_sock *s)
{
	return ops_get()->sock_maxbw(s);
}

int
udt_sock_set_nonblock(udt_sock *s, bool on)
{
	return ops_get()->sock_set_nonblock(s, on);
}

bool
udt_sock_linger_off(const udt_sock *s)
{
	return ops_get()->sock_linger_off(s);
}

int64_t
udt_sock_idle_ms(const udt_sock *s)
{
	return ops_get()->sock_idle_ms(s);
}

bool
udt_sock_connected(const udt_sock *s)
{
	return ops_get()->sock_connected(s);
}

void
udt_sock_close(udt_sock *s)
{
	if (s != NULL)
		ops_get()->sock_close(s);
}

int
udt_poll_new(udt_poll **ret, char *errbuf, size_t errlen)
{
	const struct udt_shim_ops *o = ops_get();

	if (o == NULL)
		return not_started(errbuf, errlen);
	return o->poll_new(ret, errbuf, errlen);
}

int
udt_poll_add(udt_poll *p, udt_sock *s)
{
	return ops_get()->poll_add(p, s);
}

void
udt_poll_del(udt_poll *p, udt_sock *s)
{
	ops_get()->poll_del(p, s);
}

int
udt_poll_wait(udt_poll *p, int timeout_ms, udt_sock **ready, size_t max,
    size_t *ret_n, char *errbuf, size_t errlen)
{
	return ops_get()->poll_wait(p, timeout_ms, ready, max, ret_n, errbuf,
	    errlen);
}

int
udt_poll_arm(udt_poll *p, int timeout_ms, char *errbuf, size_t errlen)
{
	return ops_get()->poll_arm(p, timeout_ms, errbuf, errlen);
}

void
udt_poll_free(udt_poll *p)
{
	if (p != NULL)
		ops_get()->poll_free(p);
}
