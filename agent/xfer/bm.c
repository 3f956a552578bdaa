/*
 * The "bm" transport (xfer.h; docs/protocol.md, "The client"):
 * bm://HOST[:PORT]/EXPORT/ sources served by `biomirror serve`, one
 * session per transport, jobs pipelined as GET items; a byte reaches the
 * sink checked, or (a big file asked whole) marked res.unchecked for the
 * scheduler to check.  How it works: docs/internals.md, "The bm transport".
 * Invariant: a job is active (in x->jobs) or finished (in x->fin,
 * reported once through the done callback at the end of a poll, unless
 * cancelled first).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "biomirror/bmproto.h"
#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/xfer.h"
#include "xfer_int.h"

#define BX_CHUNK	(4u << 20)	/* bytes of one item of a sized job */
#define BX_BUDGET	(64u << 20)	/* bytes asked for, not yet delivered */
#define BX_ITEM_MAX	(64u << 20)	/* one item of a job of unknown size */
#define BX_ITEMS_MAX	4096		/* items asked for, not yet ended */
#define BX_CONNS_MAX	64		/* data connections */
#define BX_RBUF		(256 * 1024)	/* one read of a data connection */
#define BX_FRAME	(BMP_HDR_LEN + BMP_FRAME_MAX)
#define BX_WBUF		(4 * BX_FRAME)	/* control requests not yet sent */
#define NS		1000000000LL
#define BX_RTT_NS	(50 * 1000000LL) /* TCP_INFO asked at most this often */
#define BX_HOST_MAX	128		/* a host's bytes, its NUL included */

struct bx_job;

/* One GET item: asked for, being received, held (verified) or ended. */
struct bx_item {
	struct bx_job	*bj;		/* borrowed: NULL once its job ended
					   (its bytes are then discarded) */
	struct bx_get	*g;		/* borrowed: its GET, NULL before it is
					   sent and after the GET was freed
					   while the item was held */
	uint16_t	 index;		/* in its GET */
	uint64_t	 off, len;	/* asked for; len 0: to the end */
	uint8_t		*buf;		/* owned unless borrowed: the bytes,
					   NULL if none */
	bool		 borrowed;	/* buf is its job's job->mem: never
					   freed here, never written once the
					   job ended */
	uint64_t	 blen;		/* FILE's byte count */
	bool		 receiving;	/* a data connection fills buf */
	bool		 held;		/* verified, waiting for its turn */
	bool		 ended;		/* done with (counted in its GET) */
	struct bx_item	*jnext;		/* the job's items, in file order */
	struct bx_item	*qnext;		/* not yet sent */
};

/*
 * One GET request: its items (owned), freed when all of them ended; an
 * item then still held for its job becomes the job's.
 */
struct bx_get {
	uint32_t	 id;
	uint16_t	 n, ended;
	struct bx_item	*items[BMP_GET_MAX]; /* owned */
	struct bx_get	*next;
};

/* Let go of an item's bytes: freed, unless its job's (borrowed). */
static void
bx_item_unbuf(struct bx_item *it)
{
	if (!it->borrowed)
		free(it->buf);
	it->buf = NULL;
	it->borrowed = false;
}

/* A submitted job. */
struct bx_job {
	struct xfer_job	*job;		/* borrowed */
	char		*path;		/* owned: path in the export */
	uint64_t	 want;		/* next byte to ask for */
	uint64_t	 end;		/* end of the bytes wanted (sized) */
	bool		 sized;		/* end known: items of BX_CHUNK */
	bool		 digested;	/* a whole file over BX_CHUNK whose
					   listing states a digest */
	bool		 big;		/* a whole file over BX_CHUNK (of a
					   listed exact size): XFER_BIG */
	bool		 stream;	/* one item, its bytes to the sink as
					   they come, checked at its end */
	bool		 asked;		/* every item asked for */
	uint64_t	 delivered;	/* next byte due to the sink */
	unsigned	 out;		/* items asked for, not ended */
	struct bx_item	*items, *tail;	/* borrowed: in file order */
	int64_t		 size, mtime;	/* the served file's (first FILE) */
	uint32_t	 list_id;	/* a page: its LIST, 0 before sent */
	uint64_t	 entries;	/* a page: ENTRY frames received */
	int64_t		 t_first;	/* monotonic ns of the first byte */
	bool		 finished;	/* in x->fin */
	struct bx_job	*next;
};

enum bx_dstate { DC_HDR, DC_BODY, DC_DIGEST };

/* One data connection. */
struct bx_conn {
	int		 fd;		/* owned */
	uint8_t		*rbuf;		/* owned: BX_RBUF bytes */
	size_t		 rlen;		/* bytes in rbuf */
	enum bx_dstate	 st;
	struct bx_item	*cur;		/* borrowed: item being received */
	struct bmp_file	 f;		/* its header */
	struct bmp_hash	*h;		/* owned: its digest so far */
	uint64_t	 left;		/* raw bytes still to come */
	uint64_t	 got;		/* raw bytes received */
};

struct bx {
	struct xfer_opts o;		/* copy; strings borrowed */
	char		*prefix;	/* owned: "bm://HOST:PORT/EXPORT/" as
					   in the source */
	char		 host[BX_HOST_MAX], port[8];
	char		 exp[BMP_NAME_MAX + 1]; /* export name */
	char		 where[200];	/* "bm://HOST:PORT/EXPORT" for errors */
	int		 efd;		/* owned: eventfd of wakeup */
	/* the session */
	int		 ctl;		/* owned, -1: none */
	uint8_t		 token[BMP_KEY_LEN], key[BMP_KEY_LEN];
	bool		 keyed;
	uint8_t		*crbuf;		/* owned: control frames read */
	size_t		 crlen;
	uint8_t		*wbuf;		/* owned: requests to send */
	size_t		 wlen;
	struct bx_conn	 conns[BX_CONNS_MAX];
	unsigned	 nconns;
	unsigned	 want_conns;	/* data connections to attach */
	bool		 attached;	/* they were (bx_attach_all) */
	unsigned	 max_queued;	/* the server's cap on queued items */
	uint32_t	 next_id;
	int64_t		 last_rx;	/* monotonic ns of the last byte */
	int64_t		 rtt_us;	/* data connection 0's RTT (TCP_INFO) */
	int64_t		 rtt_at;	/* monotonic ns it was asked, 0: never */
	int64_t		 retry_at;	/* no new session before, ns */
	/* the jobs */
	struct bx_job	*jobs;		/* owned: active */
	struct bx_job	*fin, *fin_tail; /* owned: finished, not reported */
	size_t		 active;	/* jobs not reported or cancelled */
	struct bx_get	*gets;		/* owned: GETs with items not ended */
	struct bx_item	*q, *qtail;	/* items not yet sent (owned by
					   their job until sent) */
	size_t		 nout;		/* items sent, not ended */
	uint64_t	 budget;	/* bytes asked for, not delivered */
	char		**dig;		/* owned: paths (owned) of files over
					   BX_CHUNK listed with a digest */
	size_t		 ndig, adig;
	bool		 dig_sorted;	/* dig is in strcmp order */
};

static void	bx_job_end(struct bx *, struct bx_job *, enum xfer_class, int,
		    const char *, ...) __attribute__((format(printf, 5, 6)));

/*
 * The n bytes at p as a port (RFC 3986 section 3.2.3: decimal digits,
 * leading zeros allowed; none: the default) into *ret.  0 or BM_EINVAL.
 */
static int
bx_port(const char *p, size_t n, unsigned long *ret)
{
	unsigned long	 v = 0;
	size_t		 i;

	if (n == 0) {
		*ret = BMP_PORT;
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return BM_EINVAL;
		if ((v = v * 10 + (unsigned long)(p[i] - '0')) > 65535)
			return BM_EINVAL;
	}
	*ret = v;
	return 0;
}

/* Split "bm://HOST[:PORT]/EXPORT/..." into x.  Returns 0 or BM_EINVAL. */
static int
bx_parse(struct bx *x, const char *url)
{
	const char	*h, *slash, *e, *colon, *hend;
	char		*name = NULL, *zone;
	size_t		 nlen;
	unsigned long	 port;
	int		 rc = BM_EINVAL;

	if (strncasecmp(url, "bm://", 5) != 0)
		goto out;
	h = url + 5;
	if ((slash = strchr(h, '/')) == NULL || slash == h)
		goto out;
	if (*h == '[') {
		if ((hend = memchr(h, ']', (size_t)(slash - h))) == NULL)
			goto out;
		colon = hend + 1 < slash && hend[1] == ':' ? hend + 1 : NULL;
		h++;
	} else {
		colon = memchr(h, ':', (size_t)(slash - h));
		hend = colon != NULL ? colon : slash;
	}
	if (hend == h || (size_t)(hend - h) >= sizeof(x->host))
		goto out;
	(void)snprintf(x->host, sizeof(x->host), "%.*s", (int)(hend - h), h);
	/* An IPv6 zone is written "%25" in a URL (RFC 6874 section 2). */
	if (h[-1] == '[' && (zone = strstr(x->host, "%25")) != NULL)
		memmove(zone + 1, zone + 3, strlen(zone + 3) + 1);
	if (bx_port(colon != NULL ? colon + 1 : slash, colon != NULL ?
	    (size_t)(slash - colon - 1) : 0, &port) != 0)
		goto out;
	(void)snprintf(x->port, sizeof(x->port), "%lu", port);
	e = slash + 1;
	if ((slash = strchr(e, '/')) == NULL || slash == e)
		goto out;
	if ((rc = path_decode(e, (size_t)(slash - e), &name, &nlen)) != 0)
		goto out;
	rc = BM_EINVAL;
	if (nlen == 0 || nlen > BMP_NAME_MAX || !name_is_safe(name, nlen))
		goto out;
	memcpy(x->exp, name, nlen + 1);
	if ((x->prefix = strndup(url, (size_t)(slash + 1 - url))) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	(void)snprintf(x->where, sizeof(x->where), "%.*s",
	    (int)(slash - url > 199 ? 199 : slash - url), url);
	rc = 0;
out:
	free(name);
	return rc;
}

/*
 * The path in the export that url names (a page's trailing '/' dropped;
 * "" the export's root) into *ret (malloc'd).  Returns 0, BM_ENOMEM or
 * BM_EINVAL (another source, or not a clean path).
 */
static int
bx_url_path(const struct bx *x, const char *url, bool dir, char **ret)
{
	size_t	 plen = strlen(x->prefix), n;
	char	*p = NULL;
	int	 rc;

	if (strncasecmp(url, x->prefix, 5) != 0 ||
	    strncmp(url + 5, x->prefix + 5, plen - 5) != 0)
		return BM_EINVAL;
	if ((rc = path_decode(url + plen, strlen(url + plen), &p, &n)) != 0)
		return rc;
	if (dir && n > 0 && p[n - 1] == '/')
		p[--n] = '\0';
	if ((n > 0 || !dir) && !path_is_safe(p, n)) {
		free(p);
		return BM_EINVAL;
	}
	*ret = p;
	return 0;
}

/* Wait for fd to be ready for events until deadline (monotonic ns). */
static int
bx_wait(int fd, short events, int64_t deadline)
{
	struct pollfd	 p;
	int64_t		 left;
	int		 n;

	for (;;) {
		left = (deadline - clock_mono_ns()) / 1000000;
		if (left <= 0)
			return BM_ENET;
		p.fd = fd;
		p.events = events;
		p.revents = 0;
		n = poll(&p, 1, left > 1000 ? 1000 : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return BM_ENET;
	}
}

/* Send all of buf (n bytes) on fd by deadline. */
static int
bx_send_all(int fd, const void *buf, size_t n, int64_t deadline)
{
	const uint8_t	*p = buf;
	ssize_t		 k;

	while (n > 0) {
		k = send(fd, p, n, MSG_NOSIGNAL);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
		} else if (k < 0 && errno != EAGAIN && errno != EINTR)
			return BM_ENET;
		else if (bx_wait(fd, POLLOUT, deadline) != 0)
			return BM_ENET;
	}
	return 0;
}

/* Read exactly n bytes from fd by deadline. */
static int
bx_recv_all(int fd, void *buf, size_t n, int64_t deadline)
{
	uint8_t	*p = buf;
	ssize_t	 k;

	while (n > 0) {
		k = recv(fd, p, n, 0);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
		} else if (k == 0)
			return BM_ENET;
		else if (errno != EAGAIN && errno != EINTR)
			return BM_ENET;
		else if (bx_wait(fd, POLLIN, deadline) != 0)
			return BM_ENET;
	}
	return 0;
}

/* One frame from fd by deadline into buf (BX_FRAME bytes). */
static int
bx_recv_frame(int fd, uint8_t *buf, int64_t deadline, uint8_t *ret_type,
    size_t *ret_len)
{
	int	 rc;

	if ((rc = bx_recv_all(fd, buf, BMP_HDR_LEN, deadline)) != 0 ||
	    (rc = bmp_header(buf, BMP_FRAME_MAX, ret_type, ret_len)) != 0)
		return rc;
	return bx_recv_all(fd, buf + BMP_HDR_LEN, *ret_len, deadline);
}

/*
 * The server's reason for error code with message msg (cut to max bytes)
 * into buf (len bytes): "CODE (MSG)"; the code's text alone when msg is
 * empty or repeats it; msg alone for BMP_E_INVAL, whose text is generic
 * ("not a regular file or range past its end" for "not a directory").
 */
static void
bx_reason(char *buf, size_t len, unsigned code, const struct bmp_str *msg,
    size_t max)
{
	const char	*t = bmp_strerror(code);
	int		 n = (int)(msg->len > max ? max : msg->len);

	if (n == 0 || msg->p == NULL ||
	    (strlen(t) == (size_t)n && memcmp(t, msg->p, (size_t)n) == 0))
		(void)snprintf(buf, len, "%s", t);
	else if (code == BMP_E_INVAL)
		(void)snprintf(buf, len, "%.*s", n, (const char *)msg->p);
	else
		(void)snprintf(buf, len, "%s (%.*s)", t, n,
		    (const char *)msg->p);
}

/* "the server refused: REASON (MSG)" of an ERROR payload into err. */
static void
bx_refusal(const uint8_t *p, size_t len, const char *what, char *err,
    size_t errlen)
{
	struct bmp_error e;
	char		 why[256];

	if (bmp_dec_error(p, len, &e) != 0) {
		(void)snprintf(err, errlen, "%s: a malformed ERROR", what);
		return;
	}
	bx_reason(why, sizeof(why), e.code, &e.msg, 200);
	(void)snprintf(err, errlen, "%s: the server refused: %s", what, why);
}

/* A refusal's class: a retry cannot fix a wrong secret or export. */
static enum xfer_class
bx_refusal_class(const uint8_t *p, size_t len)
{
	struct bmp_error e;

	if (bmp_dec_error(p, len, &e) != 0)
		return XFER_RETRY;
	return e.code == BMP_E_LIMIT || e.code == BMP_E_SHUTDOWN ||
	    e.code == BMP_E_TIMEOUT || e.code == BMP_E_IO ? XFER_RETRY :
	    XFER_PERMANENT;
}

/* A TCP connection to the server by deadline, non-blocking, in *ret_fd. */
static int
bx_dial(struct bx *x, int64_t deadline, int *ret_fd, char *err,
    size_t errlen)
{
	struct addrinfo	 hints, *res = NULL, *ai;
	socklen_t	 sl;
	int		 fd = -1, one = 1, e = 0, gai, rc = BM_ENET;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((gai = getaddrinfo(x->host, x->port, &hints, &res)) != 0) {
		(void)snprintf(err, errlen, "%s: %s", x->host,
		    gai_strerror(gai));
		return BM_ENET;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if ((fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol)) == -1) {
			e = errno;
			continue;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		if (x->o.tcp_congestion != NULL)
			(void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION,
			    x->o.tcp_congestion, strlen(x->o.tcp_congestion));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
		    (errno == EINPROGRESS && bx_wait(fd, POLLOUT,
		    deadline) == 0)) {
			sl = sizeof(e);
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) == 0 &&
			    e == 0) {
				rc = 0;
				break;
			}
		} else
			e = errno == EINPROGRESS ? ETIMEDOUT : errno;
		(void)close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (rc != 0)
		(void)snprintf(err, errlen, "%s: connect: %s", x->where,
		    strerror(e != 0 ? e : ETIMEDOUT));
	*ret_fd = fd;
	return rc;
}

/*
 * The handshake on the control connection (docs/protocol.md): HELLO,
 * WELCOME, AUTH when asked (only with a secret; with one, the server
 * must ask and prove it knows it), SESSION.  Returns 0, or BM_ENET /
 * BM_EPROTO (*cls: retry or permanent) with the reason in err.
 */
static int
bx_hello(struct bx *x, uint8_t *buf, int64_t deadline, struct bmp_session *s,
    enum xfer_class *cls, char *err, size_t errlen)
{
	struct bmp_hello h;
	struct bmp_welcome w;
	struct bmp_auth	 a;
	uint8_t		 proof[BMP_DIGEST_LEN], type;
	size_t		 n;
	int		 rc;

	*cls = XFER_RETRY;
	memset(&h, 0, sizeof(h));
	h.version = BMP_VERSION;
	h.features = BMP_F_ALL;
	h.export.p = (const uint8_t *)x->exp;
	h.export.len = strlen(x->exp);
	if ((rc = bmp_enc_hello(&h, buf, BX_FRAME, &n)) != 0 ||
	    (rc = bx_send_all(x->ctl, buf, n, deadline)) != 0 ||
	    (rc = bx_recv_frame(x->ctl, buf, deadline, &type, &n)) != 0) {
		(void)snprintf(err, errlen, "%s: handshake: %s", x->where,
		    rc == BM_ENET ? "no answer (connection lost or timed out)" :
		    bm_strerror(rc));
		return rc;
	}
	if (type == BMP_ERROR) {
		bx_refusal(buf + BMP_HDR_LEN, n, x->where, err, errlen);
		*cls = bx_refusal_class(buf + BMP_HDR_LEN, n);
		return BM_EPROTO;
	}
	*cls = XFER_PERMANENT;
	if (type != BMP_WELCOME || bmp_dec_welcome(buf + BMP_HDR_LEN, n,
	    &w) != 0 || w.version < 1 || w.version > BMP_VERSION) {
		(void)snprintf(err, errlen, "%s: handshake: not a biomirror "
		    "server of protocol version 1", x->where);
		return BM_EPROTO;
	}
	if (w.auth && x->o.bm_secret == NULL) {
		(void)snprintf(err, errlen, "%s: the export needs a secret "
		    "(the mirror's secret_file)", x->where);
		return BM_EPROTO;
	}
	if (!w.auth && x->o.bm_secret != NULL) {
		(void)snprintf(err, errlen, "%s: the server did not ask for "
		    "the secret (secret_file is set): refused, as its bytes "
		    "could not be trusted", x->where);
		return BM_EPROTO;
	}
	if (w.auth) {
		if (RAND_bytes(a.nonce, sizeof(a.nonce)) != 1 ||
		    bmp_auth_mac(x->o.bm_secret, x->o.bm_secret_len, 'c',
		    w.challenge, a.nonce, x->exp, strlen(x->exp), a.mac) != 0 ||
		    bmp_auth_mac(x->o.bm_secret, x->o.bm_secret_len, 's',
		    w.challenge, a.nonce, x->exp, strlen(x->exp), proof) != 0 ||
		    bmp_auth_mac(x->o.bm_secret, x->o.bm_secret_len, 'k',
		    w.challenge, a.nonce, NULL, 0, x->key) != 0) {
			(void)snprintf(err, errlen, "%s: HMAC: OpenSSL failed",
			    x->where);
			return BM_EIO;
		}
		if ((rc = bmp_enc_auth(&a, buf, BX_FRAME, &n)) != 0 ||
		    (rc = bx_send_all(x->ctl, buf, n, deadline)) != 0) {
			*cls = XFER_RETRY;
			(void)snprintf(err, errlen, "%s: handshake: %s",
			    x->where, bm_strerror(rc));
			return rc;
		}
	}
	if ((rc = bx_recv_frame(x->ctl, buf, deadline, &type, &n)) != 0) {
		*cls = XFER_RETRY;
		(void)snprintf(err, errlen, "%s: handshake: %s", x->where,
		    rc == BM_ENET ? "no answer (connection lost or timed out)" :
		    bm_strerror(rc));
		return rc;
	}
	if (type == BMP_ERROR) {
		bx_refusal(buf + BMP_HDR_LEN, n, x->where, err, errlen);
		*cls = bx_refusal_class(buf + BMP_HDR_LEN, n);
		return BM_EPROTO;
	}
	if (type != BMP_SESSION || bmp_dec_session(buf + BMP_HDR_LEN, n,
	    s) != 0) {
		(void)snprintf(err, errlen, "%s: handshake: SESSION expected",
		    x->where);
		return BM_EPROTO;
	}
	if (w.auth && CRYPTO_memcmp(proof, s->proof, sizeof(proof)) != 0) {
		(void)snprintf(err, errlen, "%s: the server's proof of the "
		    "secret is wrong: refused", x->where);
		return BM_EPROTO;
	}
	x->keyed = w.auth;
	memcpy(x->token, s->token, BMP_KEY_LEN);
	return 0;
}

/* Attach one more data connection.  Returns 0 or BM_E* (err says why). */
static int
bx_attach(struct bx *x, uint8_t *buf, int64_t deadline, char *err,
    size_t errlen)
{
	struct bx_conn	*c = &x->conns[x->nconns];
	struct bmp_attach a;
	uint8_t		 type;
	size_t		 n;
	int		 fd = -1, rc;

	if ((rc = bx_dial(x, deadline, &fd, err, errlen)) != 0)
		return rc;
	a.version = BMP_VERSION;
	memcpy(a.token, x->token, BMP_KEY_LEN);
	if ((rc = bmp_enc_attach(&a, buf, BX_FRAME, &n)) != 0 ||
	    (rc = bx_send_all(fd, buf, n, deadline)) != 0 ||
	    (rc = bx_recv_frame(fd, buf, deadline, &type, &n)) != 0) {
		(void)snprintf(err, errlen, "%s: data connection: %s", x->where,
		    bm_strerror(rc));
		goto out;
	}
	if (type == BMP_ERROR) {
		bx_refusal(buf + BMP_HDR_LEN, n, "data connection", err,
		    errlen);
		rc = BM_EPROTO;
		goto out;
	}
	if (type != BMP_ATTACHED || n != 0) {
		(void)snprintf(err, errlen, "%s: data connection: ATTACHED "
		    "expected", x->where);
		rc = BM_EPROTO;
		goto out;
	}
	memset(c, 0, sizeof(*c));
	if ((c->rbuf = malloc(BX_RBUF)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	c->fd = fd;
	fd = -1;
	x->nconns++;
	rc = 0;
out:
	if (fd != -1)
		(void)close(fd);
	return rc;
}

/* How many data connections a session gets. */
static unsigned
bx_want_conns(const struct bx *x, unsigned server_max)
{
	unsigned n = x->o.max_connections > 0 ? x->o.max_connections : 4;

	if (server_max > 0 && n > server_max)
		n = server_max;
	return n > BX_CONNS_MAX ? BX_CONNS_MAX : n < 1 ? 1 : n;
}

/* Close a data connection (index i), the last one taking its place. */
static void
bx_conn_close(struct bx *x, unsigned i)
{
	struct bx_conn	*c = &x->conns[i];

	if (c->cur != NULL)
		c->cur->receiving = false;
	(void)close(c->fd);
	free(c->rbuf);
	bmp_hash_free(c->h);
	x->conns[i] = x->conns[--x->nconns];
	memset(&x->conns[x->nconns], 0, sizeof(x->conns[0]));
}

/* Free a GET and its items. */
static void
bx_get_free(struct bx_get *g)
{
	uint16_t i;

	for (i = 0; i < g->n; i++) {
		if (g->items[i]->held) {
			g->items[i]->g = NULL;	/* its job's now */
			continue;
		}
		bx_item_unbuf(g->items[i]);
		free(g->items[i]);
	}
	free(g);
}

/*
 * Drop the session: every connection closed, every GET forgotten, every
 * active job ended with cls and the reason why; no new session for a
 * second when it ended jobs (the scheduler backs off on its own).
 */
static void
bx_drop(struct bx *x, enum xfer_class cls, int rc, const char *why)
{
	struct bx_get	*g;
	struct bx_item	*it;
	bool		 had = x->jobs != NULL;

	while (x->nconns > 0)
		bx_conn_close(x, x->nconns - 1);
	x->attached = false;
	if (x->ctl != -1)
		(void)close(x->ctl);
	x->ctl = -1;
	x->crlen = x->wlen = 0;
	while (x->jobs != NULL)
		bx_job_end(x, x->jobs, cls, rc, "%s", why);
	while ((g = x->gets) != NULL) {
		x->gets = g->next;
		bx_get_free(g);
	}
	while ((it = x->q) != NULL) {	/* none left: their jobs ended */
		x->q = it->qnext;
		bx_item_unbuf(it);
		free(it);
	}
	x->qtail = NULL;
	x->nout = 0;
	x->budget = 0;
	explicit_bzero(x->key, sizeof(x->key));
	if (had)
		x->retry_at = clock_mono_ns() + NS;
}

/* True when a job needs data connections (a LIST needs none). */
static bool
bx_has_files(const struct bx *x)
{
	const struct bx_job	*bj;

	for (bj = x->jobs; bj != NULL; bj = bj->next)
		if (bj->job->kind != XFER_JOB_PAGE)
			return true;
	return false;
}

/* When a session's set-up must be done by: connect_timeout from now. */
static int64_t
bx_deadline(const struct bx *x)
{
	return clock_mono_ns() + (int64_t)(x->o.connect_timeout > 0 ?
	    x->o.connect_timeout : 60) * NS;
}

/*
 * Attach the session's data connections, once a job needs them (a run
 * that changes nothing lists and attaches none).  Returns 0; on failure
 * every active job ends (retry), with the reason.
 */
static int
bx_attach_all(struct bx *x)
{
	uint8_t		*buf;
	char		 err[320] = "";
	int64_t		 deadline;
	int		 rc = BM_ENOMEM;

	deadline = bx_deadline(x);
	if ((buf = malloc(BX_FRAME)) == NULL) {
		(void)snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	while (x->nconns < x->want_conns) {
		if ((rc = bx_attach(x, buf, deadline, err, sizeof(err))) == 0)
			continue;
		if (x->nconns == 0)
			goto out;
		log_warnx("%s: %s: going on with %u data connection%s",
		    x->where, err, x->nconns, x->nconns == 1 ? "" : "s");
		break;
	}
	x->attached = true;
	log_debug("%s: session up: %u data connection%s%s", x->where,
	    x->nconns, x->nconns == 1 ? "" : "s", x->keyed ?
	    ", authenticated" : "");
	x->last_rx = clock_mono_ns();
	rc = 0;
out:
	free(buf);
	if (rc != 0)
		bx_drop(x, XFER_RETRY, rc == BM_ENOMEM ? BM_ENOMEM : BM_ENET,
		    err);
	return rc;
}

/*
 * Open the session (its data connections: bx_attach_all).  Returns 0; on
 * failure every active job ends (retry or permanent, with the reason).
 */
static int
bx_session(struct bx *x)
{
	struct bmp_session s;
	enum xfer_class	 cls = XFER_RETRY;
	uint8_t		*buf;
	char		 err[320] = "";
	int64_t		 deadline;
	int		 rc = BM_ENOMEM;

	deadline = bx_deadline(x);
	if ((buf = malloc(BX_FRAME)) == NULL) {
		(void)snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	if ((rc = bx_dial(x, deadline, &x->ctl, err, sizeof(err))) != 0 ||
	    (rc = bx_hello(x, buf, deadline, &s, &cls, err,
	    sizeof(err))) != 0)
		goto out;
	x->max_queued = s.max_queued;
	x->want_conns = bx_want_conns(x, s.max_connections);
	x->last_rx = clock_mono_ns();
	rc = 0;
out:
	free(buf);
	if (rc != 0)
		bx_drop(x, cls, rc == BM_ENOMEM ? BM_ENOMEM : cls ==
		    XFER_PERMANENT ? BM_EPROTO : BM_ENET, err);
	return rc;
}

/*
 * The validators of bj's file (its first FILE header) and the SHA-256
 * the listing stated for it: in the result before the first byte
 * reaches the sink, which checks them against those of the bytes an
 * earlier try or run holds (resume): a kept partial is continued only
 * when the listed digest is still the same (or still none).
 */
static void
bx_validators(struct bx_job *bj)
{
	struct xfer_result *res = &bj->job->res;

	res->net = XFER_NET_TCP;
	res->mtime = -1;
	if (bj->size >= 0) {
		(void)snprintf(res->etag, sizeof(res->etag),
		    "\"bm-%lld-%lld%s%s\"", (long long)bj->size,
		    (long long)bj->mtime, bj->job->listed_sha256[0] ? "-" : "",
		    bj->job->listed_sha256);
		if (bj->job->len > 0)
			res->total = bj->size;
		else
			res->size = bj->size;
	}
	if (bj->job->len > 0) {
		res->range_start = (int64_t)bj->job->off;
		res->range_end = (int64_t)(bj->job->off + bj->job->len) - 1;
	}
}

/* The result fields every job end fills in. */
static void
bx_result(struct bx *x, struct bx_job *bj)
{
	struct xfer_result *res = &bj->job->res;
	struct tcp_info	 ti;
	socklen_t	 sl = sizeof(ti);
	int64_t		 now = clock_mono_ns();

	bx_validators(bj);
	(void)snprintf(res->effective_url, sizeof(res->effective_url), "%s",
	    bj->job->url);
	/* The kernel's smoothed RTT, asked again at most every BX_RTT_NS. */
	if (x->nconns > 0 && (x->rtt_at == 0 || now - x->rtt_at >= BX_RTT_NS) &&
	    getsockopt(x->conns[0].fd, IPPROTO_TCP, TCP_INFO, &ti, &sl) == 0) {
		x->rtt_us = ti.tcpi_rtt;
		x->rtt_at = now;
	}
	if (x->nconns > 0 && x->rtt_at != 0)
		res->path.rtt_us = x->rtt_us;
	if (bj->t_first > 0)
		res->path.body_us = (now - bj->t_first) / 1000;
}

/*
 * End bj (class cls, rc, the reason): its items left to be discarded,
 * the job queued for its done callback.  Idempotent.
 */
static void
bx_job_end(struct bx *x, struct bx_job *bj, enum xfer_class cls, int rc,
    const char *fmt, ...)
{
	struct xfer_result *res = &bj->job->res;
	struct bx_item	*it, *next, **pp;
	struct bx_job	**jp;
	va_list		 ap;

	if (bj->finished)
		return;
	bj->finished = true;
	res->cls = cls;
	res->rc = cls == XFER_OK ? 0 : rc;
	if (cls != XFER_OK && fmt != NULL) {
		va_start(ap, fmt);
		(void)vsnprintf(res->errmsg, sizeof(res->errmsg), fmt, ap);
		va_end(ap);
	}
	bx_result(x, bj);
	for (it = bj->items; it != NULL; it = next) {
		next = it->jnext;
		x->budget -= it->blen;
		it->bj = NULL;
		it->jnext = NULL;
		if (it->index == UINT16_MAX)
			continue;	/* not sent: freed below */
		if (!it->receiving)
			bx_item_unbuf(it);
		if (it->held) {
			it->held = false;
			if (it->g == NULL)
				free(it);	/* ended, its GET gone */
		}
	}
	bj->items = bj->tail = NULL;
	/* Items not yet sent are dropped from the queue. */
	for (pp = &x->q; *pp != NULL; ) {
		if ((*pp)->bj == NULL) {
			it = *pp;
			*pp = it->qnext;
			x->nout--;
			free(it);
		} else
			pp = &(*pp)->qnext;
	}
	x->qtail = NULL;
	for (it = x->q; it != NULL; it = it->qnext)
		x->qtail = it;
	for (jp = &x->jobs; *jp != NULL; jp = &(*jp)->next)
		if (*jp == bj) {
			*jp = bj->next;
			break;
		}
	bj->next = NULL;
	if (x->fin_tail != NULL)
		x->fin_tail->next = bj;
	else
		x->fin = bj;
	x->fin_tail = bj;
}

/* An item is done with: counted in its GET, which is freed at its last. */
static void
bx_item_ended(struct bx *x, struct bx_get *g, struct bx_item *it)
{
	struct bx_get	**gp;

	if (it->ended)
		return;
	it->ended = true;
	if (it->bj != NULL)
		it->bj->out--;
	x->nout--;
	if (++g->ended < g->n)
		return;
	for (gp = &x->gets; *gp != NULL; gp = &(*gp)->next)
		if (*gp == g) {
			*gp = g->next;
			break;
		}
	bx_get_free(g);
}

/* Hand bj's verified items to the sink in file order; end it when done. */
static void
bx_deliver(struct bx *x, struct bx_job *bj)
{
	struct xfer_job	*j = bj->job;
	struct bx_item	*it;
	int		 rc;

	while ((it = bj->items) != NULL && it->held) {
		bj->items = it->jnext;
		if (bj->items == NULL)
			bj->tail = NULL;
		it->held = false;
		it->bj = NULL;
		it->jnext = NULL;
		x->budget -= it->blen;
		rc = 0;
		if (it->blen > 0 && j->kind != XFER_JOB_VALIDATE)
			rc = j->sink(j->sink_arg, it->off, it->buf,
			    (size_t)it->blen);
		if (rc == 0 && j->kind != XFER_JOB_VALIDATE)
			j->res.bytes += it->blen;
		if (!bj->stream)
			bj->delivered = it->off + it->blen;
		bx_item_unbuf(it);
		if (it->g == NULL)
			free(it);	/* ended, its GET gone */
		if (rc != 0) {
			bx_job_end(x, bj, rc == BM_ECHANGED ? XFER_CHANGED :
			    XFER_PERMANENT, rc, "%s: %s", bj->path,
			    j->res.errmsg[0] ? j->res.errmsg : bm_strerror(rc));
			return;
		}
	}
	if (bj->asked && bj->out == 0 && bj->items == NULL)
		bx_job_end(x, bj, XFER_OK, 0, NULL);
}

/* Find the item (id, index) among the GETs; NULL if unknown. */
static struct bx_item *
bx_find(struct bx *x, uint32_t id, uint16_t index, struct bx_get **ret_g)
{
	struct bx_get	*g;

	for (g = x->gets; g != NULL; g = g->next)
		if (g->id == id) {
			if (index >= g->n || g->items[index]->ended)
				return NULL;
			*ret_g = g;
			return g->items[index];
		}
	return NULL;
}

/* An item's job failed on the server (ERROR code, message msg). */
static void
bx_item_error(struct bx *x, struct bx_item *it, unsigned code,
    const struct bmp_str *msg)
{
	struct bx_job	*bj = it->bj;
	enum xfer_class	 cls;
	char		 why[256];
	int		 rc;

	if (bj == NULL)
		return;
	switch (code) {
	case BMP_E_NOENT:
		cls = XFER_GONE;
		rc = BM_ENOENT;
		break;
	case BMP_E_INVAL:	/* shorter than listed, or no longer a file */
		cls = XFER_CHANGED;
		rc = BM_ECHANGED;
		break;
	case BMP_E_IO:
	case BMP_E_LIMIT:
	case BMP_E_SHUTDOWN:
	case BMP_E_TIMEOUT:
		cls = XFER_RETRY;
		rc = BM_ENET;
		break;
	case BMP_E_UNSAFE:
		cls = XFER_PERMANENT;
		rc = BM_EUNSAFE;
		break;
	default:
		cls = XFER_PERMANENT;
		rc = BM_EPROTO;
		break;
	}
	bx_reason(why, sizeof(why), code, msg, 160);
	bx_job_end(x, bj, cls, rc, "the server: %s", why);
}

static int
bx_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Note that file dir/name (dir: a LIST's path) was listed with a digest:
 * a whole-file job of it goes as one item (bx_refill).  Out of memory it
 * is not noted (its job then goes in items of BX_CHUNK).
 */
static void
bx_note_digested(struct bx *x, const char *dir, const struct bmp_str *name)
{
	char	*p, **d;

	if (x->ndig == x->adig) {
		if ((d = reallocarray(x->dig, x->adig ? 2 * x->adig : 64,
		    sizeof(*d))) == NULL)
			return;
		x->dig = d;
		x->adig = x->adig ? 2 * x->adig : 64;
	}
	if (asprintf(&p, "%s%s%.*s", dir, dir[0] ? "/" : "", (int)name->len,
	    (const char *)name->p) < 0)
		return;
	x->dig[x->ndig++] = p;
	x->dig_sorted = false;
}

/* Was path noted by bx_note_digested? */
static bool
bx_is_digested(struct bx *x, const char *path)
{
	if (x->ndig == 0)
		return false;
	if (!x->dig_sorted) {
		qsort(x->dig, x->ndig, sizeof(*x->dig), bx_strcmp);
		x->dig_sorted = true;
	}
	return bsearch(&path, x->dig, x->ndig, sizeof(*x->dig),
	    bx_strcmp) != NULL;
}

/* The job of a LIST request id, NULL if none is active. */
static struct bx_job *
bx_list_job(struct bx *x, uint32_t id)
{
	struct bx_job	*bj;

	for (bj = x->jobs; bj != NULL; bj = bj->next)
		if (bj->job->kind == XFER_JOB_PAGE && bj->list_id == id)
			return bj;
	return NULL;
}

/*
 * One frame from the control connection (type, payload p, len bytes;
 * frame the whole frame).  Returns 0, or BM_EPROTO / BM_ENET with the
 * session to be dropped (why says so).
 */
static int
bx_ctl_frame(struct bx *x, uint8_t type, const uint8_t *frame,
    const uint8_t *p, size_t len, char *why, size_t wl)
{
	struct bmp_entry e;
	struct bmp_error er;
	char		 reason[256];
	struct bx_job	*bj;
	struct bx_get	*g = NULL;
	struct bx_item	*it;
	uint64_t	 count;
	uint32_t	 id;
	uint16_t	 i, d, f;
	bool		 last;
	int		 rc;

	switch (type) {
	case BMP_ENTRY:
		if (bmp_dec_entry(p, len, &id, &e) != 0)
			break;
		if ((bj = bx_list_job(x, id)) == NULL)
			return 0;
		if (bj->t_first == 0)
			bj->t_first = clock_mono_ns();
		if (bj->job->max_size > 0 && bj->job->res.bytes + BMP_HDR_LEN +
		    len > bj->job->max_size) {
			bx_job_end(x, bj, XFER_PERMANENT, BM_ELIMIT, "listing "
			    "over %llu bytes", (unsigned long long)
			    bj->job->max_size);
			return 0;
		}
		if ((rc = bj->job->sink(bj->job->sink_arg, bj->job->res.bytes,
		    frame, BMP_HDR_LEN + len)) != 0) {
			bx_job_end(x, bj, XFER_PERMANENT, rc, "listing: %s",
			    bm_strerror(rc));
			return 0;
		}
		bj->job->res.bytes += BMP_HDR_LEN + len;
		bj->entries++;
		if (e.type == BMP_T_FILE && e.digest_kind == BMP_D_SHA256 &&
		    e.size > BX_CHUNK)
			bx_note_digested(x, bj->path, &e.path);
		return 0;
	case BMP_LIST_END:
		if (bmp_dec_list_end(p, len, &id, &count) != 0)
			break;
		if ((bj = bx_list_job(x, id)) == NULL)
			return 0;
		if (count != bj->entries)
			bx_job_end(x, bj, XFER_RETRY, BM_EPROTO, "listing: %llu "
			    "entries announced, %llu received",
			    (unsigned long long)count,
			    (unsigned long long)bj->entries);
		else
			bx_job_end(x, bj, XFER_OK, 0, NULL);
		return 0;
	case BMP_GET_END:
		if (bmp_dec_get_end(p, len, &id, &d, &f) != 0)
			break;
		return 0;
	case BMP_ERROR:
		if (bmp_dec_error(p, len, &er) != 0)
			break;
		if (er.id == 0) {
			bx_refusal(p, len, x->where, why, wl);
			return BM_ENET;
		}
		if (er.index == BMP_NO_INDEX) {
			if ((bj = bx_list_job(x, er.id)) != NULL) {
				bx_reason(reason, sizeof(reason), er.code, &er.msg,
				    160);
				bx_job_end(x, bj, er.code == BMP_E_NOENT ?
				    XFER_GONE : bx_refusal_class(p, len),
				    er.code == BMP_E_NOENT ? BM_ENOENT :
				    BM_EPROTO, "LIST: the server: %s", reason);
				return 0;
			}
			/* A whole GET refused: each item as refused. */
			for (g = x->gets; g != NULL && g->id != er.id;
			    g = g->next)
				;
			for (i = 0; g != NULL && i < g->n; i++) {
				it = g->items[i];
				if (it->ended || it->receiving)
					continue;
				bx_item_error(x, it, er.code, &er.msg);
				last = g->ended + 1 == g->n;
				bx_item_ended(x, g, it);
				if (last)
					break;	/* g is freed */
			}
			return 0;
		}
		if ((it = bx_find(x, er.id, er.index, &g)) == NULL ||
		    it->receiving)
			return 0;
		bx_item_error(x, it, er.code, &er.msg);
		bx_item_ended(x, g, it);
		return 0;
	default:
		break;
	}
	(void)snprintf(why, wl, "%s: a malformed or unexpected frame (type "
	    "%u) on the control connection", x->where, (unsigned)type);
	return BM_EPROTO;
}

/* Read what the control connection has; frames to bx_ctl_frame. */
static int
bx_ctl_read(struct bx *x, char *why, size_t wl)
{
	size_t	 off = 0, plen;
	uint8_t	 type;
	ssize_t	 n;
	int	 rc = 0;

	n = recv(x->ctl, x->crbuf + x->crlen, BX_FRAME * 2 - x->crlen, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		(void)snprintf(why, wl, "%s: the control connection was lost",
		    x->where);
		return BM_ENET;
	}
	if (n < 0)
		return 0;
	x->crlen += (size_t)n;
	x->last_rx = clock_mono_ns();
	while (rc == 0 && x->crlen - off >= BMP_HDR_LEN) {
		if ((rc = bmp_header(x->crbuf + off, BMP_FRAME_MAX, &type,
		    &plen)) != 0) {
			(void)snprintf(why, wl, "%s: a malformed frame on the "
			    "control connection", x->where);
			return BM_EPROTO;
		}
		if (x->crlen - off < BMP_HDR_LEN + plen)
			break;
		rc = bx_ctl_frame(x, type, x->crbuf + off, x->crbuf + off +
		    BMP_HDR_LEN, plen, why, wl);
		off += BMP_HDR_LEN + plen;
	}
	memmove(x->crbuf, x->crbuf + off, x->crlen - off);
	x->crlen -= off;
	return rc;
}

/*
 * A FILE header on data connection c: find its item, check it against
 * its job (the same file as the job's other items, the size it was
 * listed with), make room for its bytes.  An item whose job ended (or
 * ends here) is read and discarded.  Returns 0 or BM_EPROTO.
 */
static int
bx_file(struct bx *x, struct bx_conn *c, const uint8_t *p, size_t len,
    char *why, size_t wl)
{
	struct bx_get	*g;
	struct bx_item	*it;
	struct bx_job	*bj;
	uint64_t	 cap;

	if (bmp_dec_file(p, len, &c->f) != 0 ||
	    (it = bx_find(x, c->f.id, c->f.index, &g)) == NULL ||
	    it->receiving || c->f.off != it->off || (it->len > 0 &&
	    c->f.len != it->len)) {
		(void)snprintf(why, wl, "%s: a FILE header of no item asked "
		    "for", x->where);
		return BM_EPROTO;
	}
	c->cur = it;
	c->left = c->f.len;
	c->got = 0;
	c->st = c->left > 0 ? DC_BODY : DC_DIGEST;
	it->receiving = true;
	if ((c->h = bmp_hash_new(x->keyed ? x->key : NULL, &c->f)) == NULL) {
		(void)snprintf(why, wl, "out of memory");
		return BM_ENOMEM;
	}
	if ((bj = it->bj) == NULL)
		return 0;
	if (bj->t_first == 0)
		bj->t_first = clock_mono_ns();
	if (bj->size < 0) {
		bj->size = (int64_t)c->f.size;
		bj->mtime = c->f.mtime_ns;
		bx_validators(bj);
	} else if (bj->size != (int64_t)c->f.size ||
	    bj->mtime != c->f.mtime_ns) {
		bx_job_end(x, bj, XFER_CHANGED, BM_ECHANGED, "upstream changed "
		    "during the transfer (size or mtime)");
		return 0;
	}
	/* A session after a reconnect may serve a newer snapshot. */
	if (bj->job->listed_ns && c->f.mtime_ns != bj->job->listed_mtime) {
		bx_job_end(x, bj, XFER_CHANGED, BM_ECHANGED, "upstream changed "
		    "since the listing (its mtime differs)");
		return 0;
	}
	if ((bj->job->listed_exact && bj->job->len == 0 &&
	    c->f.size != bj->job->listed_size) || (bj->job->len > 0 &&
	    bj->job->to_end && c->f.size != bj->job->off + bj->job->len)) {
		bx_job_end(x, bj, XFER_CHANGED, BM_ECHANGED, "upstream changed: "
		    "the server has %llu bytes, the listing said %llu",
		    (unsigned long long)c->f.size, (unsigned long long)
		    (bj->job->len > 0 ? bj->job->off + bj->job->len :
		    bj->job->listed_size));
		return 0;
	}
	cap = bj->sized ? BX_CHUNK : BX_ITEM_MAX;
	if (bj->job->max_size > 0 && c->f.off + c->f.len > bj->job->max_size) {
		bx_job_end(x, bj, XFER_PERMANENT, BM_ELIMIT, "over %llu bytes",
		    (unsigned long long)bj->job->max_size);
		return 0;
	}
	if (bj->stream) {
		bj->job->res.unchecked = true;
		return 0;	/* its bytes go to the sink as they come */
	}
	if (c->f.len > cap) {
		bx_job_end(x, bj, XFER_PERMANENT, BM_ELIMIT, "an item of %llu "
		    "bytes: more than %llu held at once",
		    (unsigned long long)c->f.len, (unsigned long long)cap);
		return 0;
	}
	if (!bj->sized) {
		it->blen = c->f.len;	/* counted from now on */
		x->budget += c->f.len;
	}
	/* The whole body into the sink's own buffer: no copy (job->mem). */
	if (c->f.len > 0 && bj->job->mem != NULL && c->f.off == 0 &&
	    c->f.len == bj->job->mem_cap && c->f.size == c->f.len) {
		it->buf = bj->job->mem;
		it->borrowed = true;
		return 0;
	}
	if (c->f.len > 0 && (it->buf = malloc((size_t)c->f.len)) == NULL) {
		bx_job_end(x, bj, XFER_PERMANENT, BM_ENOMEM, "out of memory");
		return 0;
	}
	return 0;
}

/*
 * Raw bytes of c's item (n bytes at p): hashed, then copied to its
 * buffer; or, for a streamed job, written to the sink at once and not
 * hashed here (the scheduler does, in its workers: res.unchecked).
 */
static int
bx_body(struct bx *x, struct bx_conn *c, const uint8_t *p, size_t n,
    bool in_place)
{
	struct bx_item	*it = c->cur;
	struct bx_job	*bj = it->bj;
	int		 rc;

	if ((bj == NULL || !bj->stream) && bmp_hash_update(c->h, p, n) != 0)
		return BM_EIO;
	if (bj != NULL && bj->stream) {
		if ((rc = bj->job->sink(bj->job->sink_arg, c->f.off + c->got, p,
		    n)) == 0)
			bj->job->res.bytes += n;
		else
			bx_job_end(x, bj, rc == BM_ECHANGED ? XFER_CHANGED :
			    XFER_PERMANENT, rc, "%s: %s", bj->path,
			    bj->job->res.errmsg[0] ? bj->job->res.errmsg :
			    bm_strerror(rc));
	} else if (!in_place && bj != NULL && it->buf != NULL)
		memcpy(it->buf + c->got, p, n);
	c->got += n;
	c->left -= n;
	if (c->left == 0)
		c->st = DC_DIGEST;
	return 0;
}

/* The DIGEST of c's item: compare, then hold or fail its bytes. */
static int
bx_digest(struct bx *x, struct bx_conn *c, const uint8_t *p, size_t len,
    char *why, size_t wl)
{
	struct bmp_digest d;
	struct bx_item	*it = c->cur;
	struct bx_get	*g = NULL;
	struct bx_job	*bj;
	uint8_t		 want[BMP_DIGEST_LEN], kind;
	unsigned	 i;
	bool		 ok;

	if (bmp_dec_digest(p, len, &d) != 0 || d.id != c->f.id ||
	    d.index != c->f.index || bmp_hash_final(c->h, want, &kind) != 0 ||
	    bx_find(x, d.id, d.index, &g) != it) {
		(void)snprintf(why, wl, "%s: a DIGEST of no item received",
		    x->where);
		return BM_EPROTO;
	}
	bmp_hash_free(c->h);
	c->h = NULL;
	c->cur = NULL;
	c->st = DC_HDR;
	it->receiving = false;
	ok = d.kind == kind && CRYPTO_memcmp(d.digest, want, sizeof(want)) == 0;
	if (it->bj != NULL && it->bj->stream)
		ok = d.kind == BMP_D_SHA256;	/* checked by the scheduler */
	if ((bj = it->bj) == NULL) {
		bx_item_unbuf(it);
		bx_item_ended(x, g, it);
		return 0;
	}
	if (!ok) {
		log_warnx("%s: %s: bytes [%llu, %llu): the %s does not match "
		    "the server's: discarded", x->where, bj->path,
		    (unsigned long long)c->f.off, (unsigned long long)(c->f.off +
		    c->f.len), x->keyed ? "HMAC-SHA-256" : "SHA-256");
		/* Streamed: the bytes are in the temp file, to be dropped. */
		bx_job_end(x, bj, bj->stream ? XFER_CHANGED : XFER_RETRY,
		    BM_ECHECKSUM, "bytes [%llu, %llu): "
		    "the %s does not match the server's: fetched again",
		    (unsigned long long)c->f.off, (unsigned long long)(c->f.off +
		    c->f.len), x->keyed ? "HMAC-SHA-256" : "SHA-256");
		bx_item_ended(x, g, it);	/* after: it is freed here */
		return 0;
	}
	if (bj->stream) {
		/* The server's SHA-256 of the whole file, for the scheduler. */
		(void)snprintf(bj->job->res.sha256, sizeof(bj->job->res.sha256),
		    "sha256:");
		for (i = 0; i < BMP_DIGEST_LEN; i++)
			(void)snprintf(bj->job->res.sha256 + 7 + 2 * i, 3,
			    "%02x", d.digest[i]);
	}
	if (bj->stream)
		bj->delivered = it->off + c->f.len;
	it->held = true;
	bx_item_ended(x, g, it);	/* a held item outlives its GET */
	bx_deliver(x, bj);
	return 0;
}

/*
 * Read what data connection c has and act on it.  Returns 0, or a BM_E*
 * code with the connection to be closed (why says why).
 */
static int
bx_data_read(struct bx *x, struct bx_conn *c, char *why, size_t wl)
{
	struct bx_item	*it = c->cur;
	size_t		 off = 0, plen, k;
	uint8_t		 type;
	ssize_t		 n;
	int		 rc = 0;

	/* A body in a buffer of its own: read straight into it. */
	if (c->st == DC_BODY && c->rlen == 0 && it != NULL && it->bj != NULL &&
	    it->buf != NULL) {
		n = recv(c->fd, it->buf + c->got, c->left > SIZE_MAX ? SIZE_MAX :
		    (size_t)c->left, 0);
		if (n > 0) {
			x->last_rx = clock_mono_ns();
			return bx_body(x, c, it->buf + c->got, (size_t)n,
			    true);
		}
	} else
		n = recv(c->fd, c->rbuf + c->rlen, BX_RBUF - c->rlen, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		(void)snprintf(why, wl, "%s: a data connection was lost%s",
		    x->where, c->cur != NULL ? " in the middle of a file" : "");
		return BM_ENET;
	}
	if (n < 0)
		return 0;
	c->rlen += (size_t)n;
	x->last_rx = clock_mono_ns();
	while (rc == 0 && off < c->rlen) {
		if (c->st == DC_BODY) {
			k = c->rlen - off;
			if (k > c->left)
				k = (size_t)c->left;
			rc = bx_body(x, c, c->rbuf + off, k, false);
			off += k;
			continue;
		}
		if (c->rlen - off < BMP_HDR_LEN)
			break;
		if ((rc = bmp_header(c->rbuf + off, BMP_FRAME_MAX, &type,
		    &plen)) != 0) {
			(void)snprintf(why, wl, "%s: a malformed frame on a "
			    "data connection", x->where);
			break;
		}
		if (c->rlen - off < BMP_HDR_LEN + plen)
			break;
		if (c->st == DC_HDR && type == BMP_FILE)
			rc = bx_file(x, c, c->rbuf + off + BMP_HDR_LEN, plen,
			    why, wl);
		else if (c->st == DC_DIGEST && type == BMP_DIGEST)
			rc = bx_digest(x, c, c->rbuf + off + BMP_HDR_LEN, plen,
			    why, wl);
		else if (type == BMP_ERROR) {
			bx_refusal(c->rbuf + off + BMP_HDR_LEN, plen,
			    "data connection", why, wl);
			rc = BM_ENET;
		} else {
			(void)snprintf(why, wl, "%s: an unexpected frame (type "
			    "%u) on a data connection", x->where,
			    (unsigned)type);
			rc = BM_EPROTO;
		}
		off += BMP_HDR_LEN + plen;
	}
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
	return rc;
}

/* A data connection ended: its item's job is retried, the rest go on. */
static void
bx_conn_lost(struct bx *x, unsigned i, const char *why)
{
	struct bx_conn	*c = &x->conns[i];
	struct bx_item	*it = c->cur;
	struct bx_get	*g;

	if (it != NULL && bx_find(x, c->f.id, c->f.index, &g) == it) {
		if (it->bj != NULL)
			bx_job_end(x, it->bj, XFER_RETRY, BM_ENET, "%s", why);
		it->receiving = false;
		bx_item_unbuf(it);
		bx_item_ended(x, g, it);
	}
	c->cur = NULL;
	bx_conn_close(x, i);
}

/* Queue the next items of every job with room, within the budgets. */
static void
bx_refill(struct bx *x)
{
	struct bx_job	*bj;
	struct bx_item	*it;
	unsigned	 window = x->nconns > 1 ? x->nconns : 2;
	uint64_t	 n;
	size_t		 cap = x->max_queued > 0 && x->max_queued <
	    BX_ITEMS_MAX ? x->max_queued : BX_ITEMS_MAX;
	for (bj = x->jobs; bj != NULL; bj = bj->next) {
		if (bj->job->kind == XFER_JOB_PAGE)
			continue;
		while (!bj->asked && bj->out < window && x->nout < cap &&
		    (x->budget == 0 || x->budget + BX_CHUNK <= BX_BUDGET)) {
			if ((it = calloc(1, sizeof(*it))) == NULL)
				return;	/* tried again at the next poll */
			it->bj = bj;
			it->index = UINT16_MAX;	/* not yet sent */
			it->off = bj->want;
			if (bj->job->kind == XFER_JOB_VALIDATE) {
				it->len = bj->sized && bj->end > 0 ? 1 : 0;
				bj->asked = true;
			} else if (!x->keyed && (bj->digested || (bj->big &&
			    bj->want == 0 && bj->job->big_left > 1 &&
			    bj->job->big_left >= x->nconns))) {
				/*
				 * One item: by sendfile(2) with the recorded
				 * digest, or hashed by the server as read
				 * while other big files keep the other
				 * connections busy.  Hashed once, by the
				 * scheduler (res.unchecked).
				 */
				it->len = bj->end;
				bj->want = bj->end;
				bj->asked = bj->stream = true;
			} else if (bj->sized) {
				n = bj->end - bj->want;
				it->len = n > BX_CHUNK ? BX_CHUNK : n;
				bj->want += it->len;
				/* len 0 asks for the rest: a file of 0 */
				bj->asked = bj->want >= bj->end;
			} else {
				it->len = 0;
				bj->asked = true;
			}
			it->blen = bj->sized && !bj->stream ? it->len : 0;
			x->budget += it->blen;
			bj->out++;
			x->nout++;
			if (bj->tail != NULL)
				bj->tail->jnext = it;
			else
				bj->items = it;
			bj->tail = it;
			if (x->qtail != NULL)
				x->qtail->qnext = it;
			else
				x->q = it;
			x->qtail = it;
		}
	}
}

/* Pack queued items and unsent LISTs into requests in x->wbuf. */
static int
bx_pack(struct bx *x)
{
	struct bmp_wr	 w;
	struct bmp_item	 bi;
	struct bx_item	*it;
	struct bx_get	*g;
	struct bx_job	*bj;
	size_t		 n;
	int		 rc;

	for (bj = x->jobs; bj != NULL; bj = bj->next) {
		if (bj->job->kind != XFER_JOB_PAGE || bj->list_id != 0)
			continue;
		if (BX_WBUF - x->wlen < BX_FRAME)
			return 0;
		bj->list_id = ++x->next_id;
		if ((rc = bmp_enc_list(bj->list_id, bj->path, strlen(bj->path),
		    x->wbuf + x->wlen, BX_WBUF - x->wlen, &n)) != 0) {
			bx_job_end(x, bj, XFER_PERMANENT, rc, "LIST: %s",
			    bm_strerror(rc));
			return 0;	/* x->jobs changed: next poll */
		}
		x->wlen += n;
	}
	while (x->q != NULL && BX_WBUF - x->wlen >= BX_FRAME) {
		if ((g = calloc(1, sizeof(*g))) == NULL)
			return BM_ENOMEM;
		g->id = ++x->next_id;
		bmp_get_begin(&w, x->wbuf + x->wlen, BX_WBUF - x->wlen, g->id);
		while ((it = x->q) != NULL && g->n < BMP_GET_MAX) {
			bi.path.p = (const uint8_t *)it->bj->path;
			bi.path.len = strlen(it->bj->path);
			bi.off = it->off;
			bi.len = it->len;
			if (bmp_get_add(&w, &bi) != 0)
				break;
			x->q = it->qnext;
			it->qnext = NULL;
			it->index = g->n;
			it->g = g;
			g->items[g->n++] = it;
		}
		if (x->q == NULL)
			x->qtail = NULL;
		if (g->n == 0 || (rc = bmp_get_end(&w, &n)) != 0) {
			free(g);
			return BM_EPROTO;	/* a path over the frame */
		}
		x->wlen += n;
		g->next = x->gets;
		x->gets = g;
	}
	return 0;
}

/* Send what x->wbuf holds, as far as the socket takes it. */
static int
bx_flush(struct bx *x, char *why, size_t wl)
{
	ssize_t	 n;

	while (x->wlen > 0) {
		n = send(x->ctl, x->wbuf, x->wlen, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0) {
			(void)snprintf(why, wl, "%s: the control connection "
			    "was lost", x->where);
			return BM_ENET;
		}
		memmove(x->wbuf, x->wbuf + n, x->wlen - (size_t)n);
		x->wlen -= (size_t)n;
	}
	return 0;
}

static bool
bx_handles(const char *url, const struct xfer_opts *o)
{
	(void)o;	/* net udt: config.c refuses it first */
	return strncasecmp(url, "bm://", 5) == 0;
}

/*
 * Why the segments of a bm:// path (p, n bytes, percent-decoded) are not
 * a path bx_url_path() takes: each one a safe name (name_is_safe), the
 * whole under PATH_MAX.  A static reason, or NULL.
 */
static const char *
bx_segments_bad(const char *p, size_t n)
{
	const char	*e;
	size_t		 k;

	if (n >= PATH_MAX)
		return "Bad path: too long";
	for (;;) {
		e = memchr(p, '/', n);
		k = e != NULL ? (size_t)(e - p) : n;
		if (k == 0)
			return "Bad path: an empty segment";
		if (!name_is_safe(p, k))
			return "Bad path: a segment that is '.' or '..', over "
			    "255 bytes, holds a control byte or starts with "
			    LISTING_TMP_PREFIX;
		if (e == NULL)
			return NULL;
		p = e + 1;
		n -= k + 1;
	}
}

/*
 * Why the path of bm:// url (borrowed; up to a query or fragment, which
 * the config check refuses itself) is one the run refuses: the export
 * segment must decode (RFC 3986 section 2.1 once, no %00) to a safe name
 * of at most BMP_NAME_MAX bytes (bx_parse()), the rest, once decoded and
 * without its trailing '/', must be empty or a safe relative path (the
 * source's LIST, bx_url_path()).  *ret is a static reason, or NULL when
 * the path is fine or has no export segment (config.c says "no export").
 * Returns 0 or BM_ENOMEM.
 */
static int
bx_path_bad(const char *url, const char **ret)
{
	const char	*p, *e, *end;
	char		*d = NULL;
	size_t		 n;
	int		 rc;

	*ret = NULL;
	p = url + 5 + strcspn(url + 5, "/?#");
	if (*p != '/')
		return 0;
	p++;
	end = p + strcspn(p, "?#");
	if ((e = memchr(p, '/', (size_t)(end - p))) == NULL)
		e = end;
	if (e == p)
		return 0;
	if ((rc = path_decode(p, (size_t)(e - p), &d, &n)) == BM_ENOMEM)
		return rc;
	if (rc != 0)
		*ret = "Bad path: a percent-escape that is not %XX, or %00";
	else if (n > BMP_NAME_MAX || !name_is_safe(d, n))
		*ret = "Bad export name";
	free(d);
	d = NULL;
	if (*ret != NULL || e == end || ++e == end)
		return 0;
	if ((rc = path_decode(e, (size_t)(end - e), &d, &n)) == BM_ENOMEM)
		return rc;
	if (rc != 0)
		*ret = "Bad path: a percent-escape that is not %XX, or %00";
	else if (n > 1 && d[n - 1] == '/')
		n--;	/* "/" alone is an empty segment: kept */
	if (rc == 0 && n > 0)
		*ret = bx_segments_bad(d, n);
	free(d);
	return 0;
}

/*
 * The table's inspect (xfer.h): the authority of bm://HOST[:PORT]/...
 * as bx_parse() reads it (RFC 3986 section 3.2: a user before '@', an
 * IPv6 literal in brackets, with a zone, a decimal port), whether a
 * query or a fragment follows, and no space or control byte anywhere;
 * then the path as the run reads it (bx_path_bad()).  Messages as
 * libcurl's URL parser gives them.
 */
static int
bx_inspect(const char *url, struct xfer_url_info *ret, char *errbuf,
    size_t errlen)
{
	const char	*a = url + 5, *end, *at, *h, *colon = NULL, *p;
	unsigned long	 port;
	size_t		 n, hl;
	int		 rc;

	memset(ret, 0, sizeof(*ret));
	end = a + strcspn(a, "/?#");
	ret->query = strpbrk(a, "?#") != NULL;
	for (at = NULL, p = a; p < end; p++)
		if (*p == '@')
			at = p;
	ret->userinfo = at != NULL;
	h = at != NULL ? at + 1 : a;
	ret->host = h < end;
	for (p = a; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
			ret->bad = p < end ? "Bad hostname" : "Bad path";
			return 0;
		}
	if (!ret->host)
		return 0;
	if (*h == '[') {
		/* an address, then a zone id after '%' (RFC 6874: "%25") */
		p = memchr(h, ']', (size_t)(end - h));
		n = p == NULL ? 0 : strspn(h + 1, "0123456789abcdefABCDEF:.");
		if (p == NULL || n == 0 || (h + 1 + n != p &&
		    (h[1 + n] != '%' || strspn(h + 1 + n, "abcdefghijklmnop"
		    "qrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-%") !=
		    (size_t)(p - h - 1 - n))) || (p + 1 < end && p[1] != ':')) {
			ret->bad = "Bad IPv6 address";
			return 0;
		}
		colon = p + 1 < end ? p + 1 : NULL;
		hl = (size_t)(p - h - 1);	/* without the brackets */
	} else {
		for (p = h; p < end && *p != ':'; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' &&
			    *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			    *p == '-' || *p == '.' || *p == '_' ||
			    (unsigned char)*p >= 0x80)) {
				ret->bad = "Bad hostname";
				return 0;
			}
		if (p == h) {
			ret->host = false;
			return 0;
		}
		colon = p < end ? p : NULL;
		hl = (size_t)(p - h);
	}
	if (hl >= BX_HOST_MAX) {	/* bx_parse() holds less */
		ret->bad = "Bad hostname: over 127 bytes";
		return 0;
	}
	if (colon != NULL && bx_port(colon + 1, (size_t)(end - colon - 1),
	    &port) != 0) {
		ret->bad = "Port number was not a decimal number between 0 "
		    "and 65535";
		return 0;
	}
	if ((rc = bx_path_bad(url, &ret->bad)) != 0)
		(void)snprintf(errbuf, errlen, "%s", bm_strerror(rc));
	return rc;
}

static void	bx_close(void *impl);

static int
bx_open(const struct xfer_opts *o, const char *url, void **ret_impl,
    char *errbuf, size_t errlen)
{
	struct bx	*x;
	const char	*bad;
	int		 rc = BM_ENOMEM;

	if (o->net != XFER_NET_TCP) {
		(void)snprintf(errbuf, errlen, "bm:// over UDT is not "
		    "supported by this build yet");
		return BM_EINVAL;
	}
	/* The config check's rule (bx_inspect), should a URL skip it. */
	if ((rc = bx_path_bad(url, &bad)) != 0)
		return rc;
	if (bad != NULL) {
		(void)snprintf(errbuf, errlen, "bad URL (%s)", bad);
		return BM_EINVAL;
	}
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return BM_ENOMEM;
	x->o = *o;
	x->ctl = -1;
	x->efd = -1;
	if ((rc = bx_parse(x, url)) != 0)
		goto out;
	rc = BM_ENOMEM;
	if ((x->crbuf = malloc(2 * BX_FRAME)) == NULL ||
	    (x->wbuf = malloc(BX_WBUF)) == NULL)
		goto out;
	if ((x->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1) {
		(void)snprintf(errbuf, errlen, "eventfd: %s", strerror(errno));
		rc = BM_EIO;
		goto out;
	}
	*ret_impl = x;
	x = NULL;
	rc = 0;
out:
	bx_close(x);
	return rc;
}

static int
bx_submit(void *impl, struct xfer_job *job)
{
	struct bx	*x = impl;
	struct bx_job	*bj, **jp;
	int		 rc;

	if (job->kind == XFER_JOB_PROBE)
		return BM_EINVAL;
	if ((bj = calloc(1, sizeof(*bj))) == NULL)
		return BM_ENOMEM;
	if ((rc = bx_url_path(x, job->url, job->kind == XFER_JOB_PAGE,
	    &bj->path)) != 0) {
		free(bj);
		return rc;
	}
	bj->job = job;
	bj->size = bj->mtime = -1;
	if (job->kind == XFER_JOB_FILE && job->len > 0) {
		bj->sized = true;
		bj->want = job->off;
		bj->end = job->off + job->len;
	} else if (job->listed_exact) {
		bj->sized = true;
		bj->want = job->off;
		bj->end = job->listed_size > job->off ? job->listed_size :
		    job->off;
	}
	bj->delivered = bj->want;
	bj->big = job->kind == XFER_JOB_FILE && job->off == 0 &&
	    job->len == 0 && job->listed_exact && job->listed_size > XFER_BIG;
	bj->digested = bj->big && bx_is_digested(x, bj->path);
	for (jp = &x->jobs; *jp != NULL; jp = &(*jp)->next)
		;
	*jp = bj;
	x->active++;
	return 0;
}

/* Report the finished jobs (done may submit or cancel others). */
static void
bx_report(struct bx *x, xfer_done_fn done, void *ctx)
{
	struct bx_job	*bj;
	struct xfer_job	*j;

	while ((bj = x->fin) != NULL) {
		if ((x->fin = bj->next) == NULL)
			x->fin_tail = NULL;
		j = bj->job;
		free(bj->path);
		free(bj);
		x->active--;
		done(ctx, j);
	}
}

/* Is anything asked of the server and not yet answered? */
static bool
bx_waiting(const struct bx *x)
{
	const struct bx_job *bj;

	if (x->nout > 0)
		return true;
	for (bj = x->jobs; bj != NULL; bj = bj->next)
		if (bj->job->kind == XFER_JOB_PAGE && bj->list_id != 0)
			return true;
	return false;
}

static int
bx_poll(void *impl, int timeout_ms, struct xfer_wait *wait, xfer_done_fn done,
    void *ctx)
{
	struct bx	*x = impl;
	struct pollfd	 pf[BX_CONNS_MAX + 2];
	char		 why[320] = "";
	int64_t		 now = clock_mono_ns(), stall;
	unsigned	 i, k;
	uint64_t	 ev;
	int		 n, rc = 0, ms = timeout_ms;

	(void)wait;
	if (x->ctl == -1 && x->jobs != NULL && now >= x->retry_at)
		(void)bx_session(x);
	if (x->ctl != -1 && !x->attached && bx_has_files(x))
		(void)bx_attach_all(x);
	if (x->ctl != -1) {
		if (!bx_waiting(x))
			x->last_rx = now;
		bx_refill(x);
		if ((rc = bx_pack(x)) != 0 || (rc = bx_flush(x, why,
		    sizeof(why))) != 0) {
			if (why[0] == '\0')
				(void)snprintf(why, sizeof(why), "%s: %s",
				    x->where, bm_strerror(rc));
			bx_drop(x, rc == BM_ENOMEM ? XFER_PERMANENT : XFER_RETRY,
			    rc, why);
			goto out;
		}
	}
	if (x->fin != NULL)
		ms = 0;
	else if (x->ctl == -1 && x->jobs != NULL) {
		stall = (x->retry_at - now) / 1000000 + 1;
		if (ms < 0 || ms > stall)
			ms = (int)stall;
	}
	pf[0].fd = x->efd;
	pf[0].events = POLLIN;
	pf[0].revents = 0;
	n = 1;
	if (x->ctl != -1) {
		pf[n].fd = x->ctl;
		pf[n].events = POLLIN | (x->wlen > 0 ? POLLOUT : 0);
		pf[n++].revents = 0;
		for (i = 0; i < x->nconns; i++, n++) {
			pf[n].fd = x->conns[i].fd;
			pf[n].events = POLLIN;
			pf[n].revents = 0;
		}
		stall = (x->last_rx + (int64_t)(x->o.stall_timeout > 0 ?
		    x->o.stall_timeout : 120) * NS - now) / 1000000 + 1;
		if (bx_waiting(x) && (ms < 0 || ms > stall))
			ms = stall > 0 ? (int)stall : 0;
	}
	if (poll(pf, (nfds_t)n, ms) < 0 && errno != EINTR) {
		rc = BM_ENET;
		goto out;
	}
	if ((pf[0].revents & POLLIN) && read(x->efd, &ev, sizeof(ev)) < 0)
		ev = 0;	/* nothing to take: another poll took it */
	if (x->ctl == -1)
		goto out;
	if ((pf[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
	    (rc = bx_ctl_read(x, why, sizeof(why))) != 0) {
		bx_drop(x, XFER_RETRY, rc == BM_EPROTO ? BM_EPROTO : BM_ENET,
		    why);
		rc = 0;
		goto out;
	}
	if ((pf[1].revents & POLLOUT) && bx_flush(x, why, sizeof(why)) != 0) {
		bx_drop(x, XFER_RETRY, BM_ENET, why);
		goto out;
	}
	/* Backwards: bx_conn_close moves the last connection into i. */
	for (k = x->nconns; k > 0; k--) {
		i = k - 1;
		if (!(pf[2 + i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if ((rc = bx_data_read(x, &x->conns[i], why,
		    sizeof(why))) == 0)
			continue;
		if (rc == BM_EPROTO || rc == BM_ENOMEM) {
			bx_drop(x, XFER_RETRY, rc, why);
			rc = 0;
			goto out;
		}
		rc = 0;
		bx_conn_lost(x, i, why);
	}
	if (x->attached && x->nconns == 0) {
		bx_drop(x, XFER_RETRY, BM_ENET, why[0] ? why :
		    "every data connection was lost");
		goto out;
	}
	now = clock_mono_ns();
	if (bx_waiting(x) && now - x->last_rx >= (int64_t)(x->o.stall_timeout >
	    0 ? x->o.stall_timeout : 120) * NS) {
		(void)snprintf(why, sizeof(why), "%s: no data for %u s "
		    "(stall_timeout): the session is dropped", x->where,
		    x->o.stall_timeout > 0 ? x->o.stall_timeout : 120);
		log_warnx("%s", why);
		bx_drop(x, XFER_RETRY, BM_ENET, why);
	}
out:
	bx_report(x, done, ctx);
	return rc;
}

static void
bx_cancel(void *impl, struct xfer_job *job)
{
	struct bx	*x = impl;
	struct bx_job	*bj, **pp;

	for (bj = x->jobs; bj != NULL; bj = bj->next)
		if (bj->job == job) {
			bx_job_end(x, bj, XFER_PERMANENT, BM_EINTR, "cancelled");
			break;
		}
	/* Ended: take it off the queue of those to report. */
	for (pp = &x->fin; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->job == job) {
			bj = *pp;
			*pp = bj->next;
			free(bj->path);
			free(bj);
			x->active--;
			break;
		}
	x->fin_tail = NULL;
	for (bj = x->fin; bj != NULL; bj = bj->next)
		x->fin_tail = bj;
}

static size_t
bx_active(const void *impl)
{
	const struct bx *x = impl;

	return x->active;
}

static void
bx_wakeup(void *impl)
{
	struct bx	*x = impl;
	uint64_t	 one = 1;

	if (write(x->efd, &one, sizeof(one)) < 0)
		one = 0;	/* the counter is full: a wakeup is due anyway */
}

static void
bx_hint(void *impl, enum xfer_hint h, bool on)
{
	(void)impl;
	(void)h;
	(void)on;
}

static void
bx_close(void *impl)
{
	struct bx	*x = impl;
	struct bx_job	*bj;
	uint8_t		 buf[BMP_HDR_LEN];
	size_t		 n;

	if (x == NULL)
		return;
	if (x->ctl != -1 && bmp_enc_empty(BMP_BYE, buf, sizeof(buf), &n) == 0)
		(void)send(x->ctl, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	bx_drop(x, XFER_PERMANENT, BM_EINTR, "closed");
	while ((bj = x->fin) != NULL) {
		x->fin = bj->next;
		free(bj->path);
		free(bj);
	}
	if (x->efd != -1)
		(void)close(x->efd);
	while (x->ndig > 0)
		free(x->dig[--x->ndig]);
	free(x->dig);
	free(x->prefix);
	free(x->crbuf);
	free(x->wbuf);
	free(x);
}

const struct xfer_ops xfer_bm_ops = {
	.name = "bm",
	.handles = bx_handles,
	.inspect = bx_inspect,
	.open = bx_open,
	.submit = bx_submit,
	.poll = bx_poll,
	.cancel = bx_cancel,
	.active = bx_active,
	.wakeup = bx_wakeup,
	.hint = bx_hint,
	.close = bx_close,
};
