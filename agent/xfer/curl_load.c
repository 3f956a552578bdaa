/*
 * The curl transport's loader (curl_int.h): the registry's row
 * xfer_curl_ops, whose calls go through the table of
 * libbiomirror-curl.so, dlopen()ed by the first open or inspect and never
 * closed.  Which URLs it takes is decided here, without the module.  The
 * module is $BM_CURL_MODULE when set, else found as module.h says.
 * Nothing here logs.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "biomirror/error.h"
#include "biomirror/ftp_proto.h"
#include "biomirror/xfer.h"
#include "curl_int.h"
#include "module.h"
#include "xfer_int.h"

/* The module; its table is read without a lock by every call. */
static struct xfer_module mod = XFER_MODULE_INIT("curl", CURL_MODULE_FILE,
    "BM_CURL_MODULE", CURL_MODULE_SYM, CURL_MODULE_ABI);

/* The module's transport, loaded once.  NULL with the reason in errbuf. */
static const struct xfer_ops *
mod_load(char *errbuf, size_t errlen)
{
	const struct curl_module *cm = xfer_module_load(&mod, errbuf, errlen);

	/* The ABI number checked, and the table's size: a stale module */
	if (cm != NULL && cm->ops_size != sizeof(struct xfer_ops)) {
		(void)snprintf(errbuf, errlen, "curl module: not this build's "
		    "module (its transport table is %zu bytes, not %zu)",
		    cm->ops_size, sizeof(struct xfer_ops));
		return NULL;
	}
	return cm != NULL ? cm->ops : NULL;
}

/* The transport once loaded: every call below after a successful open. */
static const struct xfer_ops *
mod_get(void)
{
	return ((const struct curl_module *)xfer_module_table(&mod))->ops;
}

/* Over TCP: http://, https://, ftp:// and ftps:// (explicit TLS). */
static bool
curl_handles(const char *url, const struct xfer_opts *o)
{
	return o->net == XFER_NET_TCP && (strncasecmp(url, "http://", 7) ==
	    0 || strncasecmp(url, "https://", 8) == 0 ||
	    strncasecmp(url, "ftp://", 6) == 0 || ftp_is_ftps(url));
}

/* Without the module, accepted unparsed (xfer.h): its open says why. */
static int
curl_inspect(const char *url, struct xfer_url_info *ret, char *errbuf,
    size_t errlen)
{
	const struct xfer_ops *m;
	char		 why[512];

	if ((m = mod_load(why, sizeof(why))) == NULL) {
		memset(ret, 0, sizeof(*ret));
		ret->host = true;
		return 0;
	}
	return m->inspect(url, ret, errbuf, errlen);
}

static int
curl_ready(const char *url, const struct xfer_opts *o, char *errbuf,
    size_t errlen)
{
	(void)url;
	(void)o;
	return mod_load(errbuf, errlen) != NULL ? 0 : BM_EINVAL;
}

static int
curl_open(const struct xfer_opts *o, const char *url, void **ret_impl,
    char *errbuf, size_t errlen)
{
	const struct xfer_ops *m;

	if ((m = mod_load(errbuf, errlen)) == NULL)
		return BM_EINVAL;
	return m->open(o, url, ret_impl, errbuf, errlen);
}

static int
curl_submit(void *impl, struct xfer_job *job)
{
	return mod_get()->submit(impl, job);
}

static int
curl_poll(void *impl, int timeout_ms, struct xfer_wait *wait,
    xfer_done_fn done, void *ctx)
{
	return mod_get()->poll(impl, timeout_ms, wait, done, ctx);
}

static void
curl_cancel(void *impl, struct xfer_job *job)
{
	mod_get()->cancel(impl, job);
}

static size_t
curl_active(const void *impl)
{
	return mod_get()->active(impl);
}

static void
curl_wakeup(void *impl)
{
	mod_get()->wakeup(impl);
}

static void
curl_hint(void *impl, enum xfer_hint h, bool on)
{
	mod_get()->hint(impl, h, on);
}

static void
curl_close(void *impl)
{
	mod_get()->close(impl);
}

const struct xfer_ops xfer_curl_ops = {
	.name = "curl",
	.handles = curl_handles,
	.inspect = curl_inspect,
	.ready = curl_ready,
	.open = curl_open,
	.submit = curl_submit,
	.poll = curl_poll,
	.cancel = curl_cancel,
	.active = curl_active,
	.wakeup = curl_wakeup,
	.hint = curl_hint,
	.close = curl_close,
};
