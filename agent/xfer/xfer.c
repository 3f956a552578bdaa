/*
 * The transport registry and the calls through a transport's table
 * (xfer.h): one row per transport, tried in order; a stacked transport
 * (gridftp) comes before the one it hands the rest to (curl).  Also the
 * TCP congestion checks that every transport's sockets share.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "biomirror/error.h"
#include "biomirror/log.h"
#include "biomirror/xfer.h"
#include "xfer_int.h"

static const struct xfer_ops *const xfer_registry[] = {
	&xfer_bm_ops,
	&xfer_gridftp_ops,
	&xfer_curl_ops,
};
#define XFER_NREGISTRY	(sizeof(xfer_registry) / sizeof(xfer_registry[0]))

int
xfer_open_ops(const struct xfer_ops *ops, const char *url,
    const struct xfer_opts *o, struct xfer **ret, char *errbuf,
    size_t errlen)
{
	struct xfer	*x;
	int		 rc;

	if (errlen > 0)
		errbuf[0] = '\0';
	if ((x = calloc(1, sizeof(*x))) == NULL) {
		(void)snprintf(errbuf, errlen, "%s", bm_strerror(BM_ENOMEM));
		return BM_ENOMEM;
	}
	x->ops = ops;
	if ((rc = ops->open(o, url, &x->impl, errbuf, errlen)) != 0) {
		if (errlen > 0 && errbuf[0] == '\0')
			(void)snprintf(errbuf, errlen, "%s", bm_strerror(rc));
		free(x);
		return rc;
	}
	*ret = x;
	return 0;
}

/* The first row from index i on that handles url, or NULL. */
static const struct xfer_ops *
registry_find(size_t i, const char *url, const struct xfer_opts *o)
{
	for (; i < XFER_NREGISTRY; i++)
		if (xfer_registry[i]->handles(url, o))
			return xfer_registry[i];
	return NULL;
}

/* No transport of the registry carries url over o->net. */
static int
no_transport(const struct xfer_opts *o, char *errbuf, size_t errlen)
{
	(void)snprintf(errbuf, errlen, "no transport of this build carries "
	    "it over %s", o->net == XFER_NET_UDT ? "udt" : "tcp");
	return BM_EINVAL;
}

bool
xfer_handles(const char *url, const struct xfer_opts *o)
{
	return registry_find(0, url, o) != NULL;
}

int
xfer_url_inspect(const char *url, struct xfer_url_info *ret, char *errbuf,
    size_t errlen)
{
	struct xfer_opts o;
	size_t		 i;

	memset(&o, 0, sizeof(o));
	o.net = XFER_NET_TCP;
	for (i = 0; i < XFER_NREGISTRY; i++)
		if (xfer_registry[i]->inspect != NULL &&
		    xfer_registry[i]->handles(url, &o))
			return xfer_registry[i]->inspect(url, ret, errbuf,
			    errlen);
	return no_transport(&o, errbuf, errlen);
}

/* ops's ready for url over o (ops NULL: no transport takes it). */
static int
ops_ready(const struct xfer_ops *ops, const char *url,
    const struct xfer_opts *o, char *errbuf, size_t errlen)
{
	if (ops == NULL)
		return no_transport(o, errbuf, errlen);
	return ops->ready != NULL ? ops->ready(url, o, errbuf, errlen) : 0;
}

int
xfer_ready(const char *url, const struct xfer_opts *o, char *errbuf,
    size_t errlen)
{
	return ops_ready(registry_find(0, url, o), url, o, errbuf, errlen);
}

int
xfer_open(const char *url, const struct xfer_opts *o, struct xfer **ret,
    char *errbuf, size_t errlen)
{
	const struct xfer_ops *ops = registry_find(0, url, o);

	return ops == NULL ? no_transport(o, errbuf, errlen) :
	    xfer_open_ops(ops, url, o, ret, errbuf, errlen);
}

/* The first row after above that handles url over o, or NULL. */
static const struct xfer_ops *
registry_below(const struct xfer_ops *above, const char *url,
    const struct xfer_opts *o)
{
	size_t	 i;

	for (i = 0; i < XFER_NREGISTRY; i++)
		if (xfer_registry[i] == above)
			return registry_find(i + 1, url, o);
	return NULL;
}

int
xfer_open_below(const struct xfer_ops *above, const char *url,
    const struct xfer_opts *o, struct xfer **ret, char *errbuf,
    size_t errlen)
{
	const struct xfer_ops *ops = registry_below(above, url, o);

	return ops == NULL ? no_transport(o, errbuf, errlen) :
	    xfer_open_ops(ops, url, o, ret, errbuf, errlen);
}

int
xfer_ready_below(const struct xfer_ops *above, const char *url,
    const struct xfer_opts *o, char *errbuf, size_t errlen)
{
	return ops_ready(registry_below(above, url, o), url, o, errbuf,
	    errlen);
}

int
xfer_submit(struct xfer *x, struct xfer_job *job)
{
	memset(&job->res, 0, sizeof(job->res));
	job->res.size = -1;
	job->res.mtime = -1;
	job->res.retry_after = -1;
	job->res.range_start = job->res.range_end = job->res.total = -1;
	job->res.path.rtt_us = job->res.path.body_us = -1;
	/* -vv: every request, whatever carries it. */
	if (job->len > 0)
		log_debug("request: %s bytes %llu-%llu", job->url,
		    (unsigned long long)job->off,
		    (unsigned long long)(job->off + job->len - 1));
	else
		log_debug("request: %s%s", job->url, job->kind ==
		    XFER_JOB_VALIDATE ? " (validators)" : "");
	return x->ops->submit(x->impl, job);
}

int
xfer_poll(struct xfer *x, int timeout_ms, xfer_done_fn done, void *ctx)
{
	return x->ops->poll(x->impl, timeout_ms, NULL, done, ctx);
}

void
xfer_cancel(struct xfer *x, struct xfer_job *job)
{
	x->ops->cancel(x->impl, job);
}

size_t
xfer_active(const struct xfer *x)
{
	return x->ops->active(x->impl);
}

void
xfer_wakeup(struct xfer *x)
{
	x->ops->wakeup(x->impl);
}

void
xfer_hint(struct xfer *x, enum xfer_hint h, bool on)
{
	x->ops->hint(x->impl, h, on);
}

void
xfer_free(struct xfer *x)
{
	if (x == NULL)
		return;
	x->ops->close(x->impl);
	free(x);
}

/*
 * The first line of /proc/sys/net/ipv4/KEY, without its newline, into
 * buf (len bytes); returns its length, 0 when it cannot be read.
 */
static size_t
sysctl_line(const char *key, char *buf, size_t len)
{
	char	 path[96];
	FILE	*fp;
	size_t	 n = 0;

	buf[0] = '\0';
	(void)snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", key);
	if ((fp = fopen(path, "re")) != NULL) {
		if (fgets(buf, (int)len, fp) == NULL)
			buf[0] = '\0';
		(void)fclose(fp);
	}
	n = strcspn(buf, "\n");
	buf[n] = '\0';
	return n;
}

int
xfer_tcp_congestion_check(const char *name, char *errbuf, size_t errlen)
{
	const char	*key;
	char		 list[256];
	int		 fd, e;
	size_t		 n;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		(void)snprintf(errbuf, errlen, "socket: %s", strerror(errno));
		return BM_ENET;
	}
	e = setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, strlen(name)) ==
	    0 ? 0 : errno;
	(void)close(fd);
	if (e == 0)
		return 0;
	if (e != EPERM && e != ENOENT) {
		(void)snprintf(errbuf, errlen, "setsockopt TCP_CONGESTION: %s",
		    strerror(e));
		return BM_EINVAL;
	}
	/* tcp(7): the algorithms this kernel has, and those any user may set. */
	key = e == EPERM ? "tcp_allowed_congestion_control" :
	    "tcp_available_congestion_control";
	n = sysctl_line(key, list, sizeof(list));
	(void)snprintf(errbuf, errlen, "%s (net.ipv4.%s: %s)", e == EPERM ?
	    "not allowed for this user" : "this kernel has no such algorithm",
	    key, n > 0 ? list : "unknown");
	return BM_EINVAL;
}

void
xfer_tcp_congestion_default(char *buf, size_t len)
{
	if (sysctl_line("tcp_congestion_control", buf, len) == 0)
		(void)snprintf(buf, len, "unknown");
}
