/*
 * The curl transport's loader (curl_int.h): the registry's row
 * xfer_curl_ops, whose calls go through the table of
 * libbiomirror-curl.so, dlopen()ed by the first open or inspect and never
 * closed.  Which URLs it takes is decided here, without the module.  The
 * module is $BM_CURL_MODULE when set, else found as module.h says.
 * Nothing here logs.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "biomirror/error.h"
#include "biomirror/ftp_proto.h"
#include "biomirror/xfer.h"
#include "curl_int.h"
#include "module.h"
#include "xfer_int.h"

#define MOD_WHAT	"curl"
#define MOD_ENV		"BM_CURL_MODULE"

/*
 * The module's transport, set once under mod_lock (which only loading
 * takes) and read without a lock; a failed load is tried again.
 */
static pthread_mutex_t		 mod_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct xfer_ops *_Atomic mod;

/* The module's table, loaded once.  NULL with the reason in errbuf. */
static const struct xfer_ops *
mod_load(char *errbuf, size_t errlen)
{
	const struct curl_module *(*entry)(void);
	const struct curl_module *cm;
	const struct xfer_ops *ops;
	void		*sym;

	if ((ops = atomic_load_explicit(&mod, memory_order_acquire)) != NULL)
		return ops;
	(void)pthread_mutex_lock(&mod_lock);
	if ((ops = atomic_load_explicit(&mod, memory_order_relaxed)) != NULL)
		goto out;
	if (xfer_module_open(MOD_WHAT, CURL_MODULE_FILE, MOD_ENV,
	    CURL_MODULE_SYM, &sym, errbuf, errlen) != 0)
		goto out;
	*(void **)&entry = sym;
	if ((cm = entry()) == NULL || cm->abi != CURL_MODULE_ABI ||
	    cm->ops == NULL) {
		xfer_module_refused(MOD_WHAT, CURL_MODULE_FILE, MOD_ENV,
		    cm == NULL ? "curl_global_init failed" :
		    "not this build's module (ABI mismatch)", errbuf, errlen);
		goto out;
	}
	ops = cm->ops;
	atomic_store_explicit(&mod, ops, memory_order_release);
out:
	(void)pthread_mutex_unlock(&mod_lock);
	return ops;
}

/* The table once loaded: every call below after a successful open. */
static const struct xfer_ops *
mod_get(void)
{
	return atomic_load_explicit(&mod, memory_order_acquire);
}

/* Over TCP: http://, https://, ftp:// and ftps:// (explicit TLS). */
static bool
curl_handles(const char *url, const struct xfer_opts *o)
{
	return o->net == XFER_NET_TCP && (strncasecmp(url, "http://", 7) ==
	    0 || strncasecmp(url, "https://", 8) == 0 ||
	    strncasecmp(url, "ftp://", 6) == 0 || ftp_is_ftps(url));
}

static int
curl_inspect(const char *url, struct xfer_url_info *ret, char *errbuf,
    size_t errlen)
{
	const struct xfer_ops *m;

	if ((m = mod_load(errbuf, errlen)) == NULL)
		return BM_EINVAL;
	return m->inspect(url, ret, errbuf, errlen);
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
	.open = curl_open,
	.submit = curl_submit,
	.poll = curl_poll,
	.cancel = curl_cancel,
	.active = curl_active,
	.wakeup = curl_wakeup,
	.hint = curl_hint,
	.close = curl_close,
};
