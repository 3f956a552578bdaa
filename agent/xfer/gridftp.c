/*
 * The "gridftp" transport (xfer_gridftp.h): up to max_connections control
 * sessions to the one upstream host, non-blocking, stacked on the next
 * transport (gx_*, at the end); docs/internals.md, "The gridftp
 * transport".  Invariant: a job is either queued, held by exactly one
 * session, or finished (with a slot in g->finished, reserved when it was
 * submitted) and reported once through the done callback.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/ftp_proto.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/udt_shim.h"
#include "biomirror/xfer_gridftp.h"
#include "xfer_int.h"

#define GS_INBUF	(2 * FTP_REPLY_MAX) /* control replies held at once */
#define GS_OUTBUF	4352		/* one command (a path of 4 KiB) */
#define GS_DATABUF	(256 * 1024)	/* one read of the data connection */
#define GS_STREAMS_MAX	64		/* data connections per session */
#define GS_RANGES_MAX	65536		/* byte ranges of one file held apart */
#define GS_UDT_TICK_MS	5		/* longest wait while UDT data flows
					   (gx_udt_wait) */

enum gs_state {
	GS_CONNECTING,		/* TCP connect in progress */
	GS_GREETING,		/* waiting for 220 */
	GS_LOGIN,		/* USER, PASS, TYPE, MODE, DCAU, OPTS, PORT */
	GS_IDLE,		/* ready for a job (set-up done, or paused
				   after PASS while the engine probes) */
	GS_CMD,			/* FEAT, MDTM or SIZE sent for the job */
	GS_RETR,		/* RETR or MLSD sent, no 1xx yet */
	GS_XFER,		/* 1xx seen: blocks and the final reply due */
	GS_DEAD			/* closed; freed by the next run */
};

/* Login steps, sent in this order. */
enum gs_step {
	ST_USER, ST_PASS, ST_NETSTACK, ST_TYPE, ST_MODE, ST_DCAU, ST_OPTS,
	ST_PORT, ST_DONE
};

/*
 * Per-job commands, sent in this order (those not needed are skipped);
 * a FEAT job is FEAT alone.
 */
enum gs_jstep { JS_FEAT, JS_MDTM, JS_SIZE, JS_RETR };

#define GS_FEAT_MAX	65536	/* bytes of FEAT reply kept, as libcurl's */

/*
 * One data connection of a session (the server opens up to the
 * session's parallelism), TCP or UDT, and its block parser.
 */
struct gchan {
	int		 fd;		/* TCP data connection, -1 if UDT */
	udt_sock	*u;		/* owned: UDT data connection, NULL if TCP */
	uint8_t		 hdr[GRIDFTP_HDRLEN];
	size_t		 hdrlen;
	uint64_t	 left;		/* payload bytes left in this block */
	uint64_t	 boff;		/* file offset of the next payload byte */
	bool		 payload;	/* this block's payload is file data */
	bool		 eod;		/* EOD seen in this transfer */
	bool		 close_after;	/* ... with CLOSE: the server closes it */
	bool		 parked;	/* EOD read and the next file's RETR
					   sent: unread (and out of the UDT
					   poll set) until that file starts */
	uint8_t		*stash;		/* owned: bytes read after this file's
					   EOD (the next file's), NULL none */
	size_t		 nstash;
};

/* Byte ranges of the file in hand, [a, b), sorted, apart. */
struct grange {
	uint64_t	 a, b;
};

struct gsess {
	struct gridftp	*g;
	enum gs_state	 state;
	enum gs_step	 step;
	enum gs_step	 batch_end;	/* login commands up to this step went
					   at once after PASS (ST_USER: none) */
	enum gs_jstep	 jstep;
	int		 ctl, lfd;	/* control, TCP listener; -1 none */
	udt_sock	*ul;		/* owned: UDT listener, NULL if none */
	bool		 udt;		/* data connections over UDT */
	unsigned	 par;		/* data connections asked for (OPTS) */
	struct gchan	*ch;		/* owned: nch data connections, room
					   for GS_STREAMS_MAX */
	size_t		 nch;
	size_t		 nclosed;	/* of this transfer's, closed after
					   their EOD (their slots stay taken
					   while a pjob waits) */
	bool		 ul_parked;	/* ul out of the UDT poll set: no
					   slot for a new connection yet */
	bool		 no_pipe;	/* the server closed a data connection
					   after a file: no more pipelining
					   (each new connection is then the
					   job in hand's alone) */
	char		 in[GS_INBUF];
	size_t		 inlen;
	char		 out[GS_OUTBUF];
	size_t		 outlen, outoff;
	struct xfer_job	*job;		/* borrowed: the job in hand */
	char		*path;		/* owned: the job's decoded path */
	struct xfer_job	*pjob;		/* borrowed: the next job, its RETR sent
					   behind job's (sess_pipe); NULL none */
	char		*ppath;		/* owned: pjob's decoded path */
	int64_t		 deadline;	/* monotonic ns: connect or stall */
	bool		 kick;		/* a pipelined job began: what was
					   read for it (stash, replies) is
					   due before the next poll */
	/* The transfer in progress. */
	bool		 eof, done_reply;
	uint64_t	 eods;		/* EOD count announced by EOF */
	uint64_t	 neod;		/* EODs seen */
	struct grange	*rg;		/* owned: ranges received (streams > 1) */
	size_t		 nrg, rgcap;
	uint64_t	 inorder;	/* one stream: the next offset due */
	struct gsess	*next;
};

struct gjob {
	struct xfer_job	*job;
	struct gjob	*next;
};

struct gridftp {
	struct xfer_opts opts;		/* copy; strings borrowed */
	char		 host[256];	/* the host:port jobs go to, "" unset */
	struct sockaddr_storage addr;	/* its address, once resolved */
	socklen_t	 addrlen;
	struct gsess	*sess;		/* owned: sessions */
	size_t		 nsess, cap;	/* live sessions, most allowed */
	size_t		 others;	/* the host's connections outside the
					   engine, at the last gridftp_run() */
	bool		 refused;	/* the server refused MODE E set-up, or
					   FEAT showed no GridFTP: no jobs */
	bool		 probing;	/* FEAT not judged yet: FEAT jobs only,
					   and sessions pause after PASS */
	bool		 logged_in;	/* a session of this engine logged in:
					   a 530 from now on is a limit */
	bool		 udt;		/* data over UDT (SITE SETNETSTACK udt);
					   false once the server refused it */
	bool		 udt_ok;	/* a session's SETNETSTACK udt was
					   accepted: PORT goes in the batch */
	bool		 udt_up;	/* udt_shim_startup() done */
	bool		 bufs_warned;	/* a short UDP buffer was logged */
	bool		 udt_moved;	/* UDT bytes read since the last wait */
	unsigned	 streams;	/* data connections per file asked for */
	udt_poll	*up;		/* owned: UDT sockets of all sessions */
	struct gjob	*qhead, *qtail;	/* owned: jobs not yet in a session */
	struct gjob	*back;		/* owned: jobs handed back, for the
					   transport below (sess_no_eret) */
	bool		 no_eret;	/* the server refused ERET P: ranges
					   go below */
	size_t		 active;	/* jobs queued or held */
	uint8_t		*buf;		/* owned: GS_DATABUF bytes */
	struct xfer_job	**finished;	/* jobs ended, to report; room for
					   every job submitted and not yet
					   reported */
	size_t		 nfinished, finished_cap;
};

static void	sess_fail(struct gsess *, int, enum xfer_class, const char *,
		    ...) __attribute__((format(printf, 4, 5)));
static void	sess_start(struct gsess *);
static void	sess_pipe(struct gsess *);
static void	gridftp_free(struct gridftp *);

int
gridftp_block_parse(const uint8_t p[GRIDFTP_HDRLEN], struct gridftp_block *ret)
{
	struct gridftp_block b;
	int		 i;

	b.desc = p[0];
	b.count = b.offset = 0;
	for (i = 0; i < 8; i++) {
		b.count = b.count << 8 | p[1 + i];
		b.offset = b.offset << 8 | p[9 + i];
	}
	if (b.desc & (GRIDFTP_D_ERRORS | GRIDFTP_D_EOR))
		return BM_EPROTO;
	if (b.count > (uint64_t)INT64_MAX || b.offset > (uint64_t)INT64_MAX)
		return BM_EPROTO;
	if ((b.desc & GRIDFTP_D_EOF) && b.offset == 0)
		return BM_EPROTO;
	*ret = b;
	return 0;
}

/* "ftp://host[:port]/path" -> host:port in g->host form, path start. */
static int
url_split(const char *url, char *host, size_t hlen, const char **ret_path)
{
	const char	*h, *slash;

	if (strncasecmp(url, "ftp://", 6) != 0)
		return BM_EINVAL;
	h = url + 6;
	if ((slash = strchr(h, '/')) == NULL || slash == h ||
	    (size_t)(slash - h) >= hlen || memchr(h, '@', (size_t)(slash -
	    h)) != NULL)
		return BM_EINVAL;
	memcpy(host, h, (size_t)(slash - h));
	host[slash - h] = '\0';
	*ret_path = slash + 1;
	return 0;
}

/*
 * The path an FTP command names for a URL path (RFC 1738 section 3.2.2:
 * relative to the login directory; a leading %2F makes it absolute),
 * percent-decoded (listing.h path_decode) to the bytes listed.  CR and
 * LF cannot be sent in a command (RFC 959 section 4.1.3): BM_EUNSAFE;
 * a NUL or a bad escape: BM_EINVAL.
 */
static int
path_of(const char *p, char **ret)
{
	char	*out;
	size_t	 n = strlen(p);
	int	 rc;

	if (n > GS_OUTBUF - 16)
		return BM_ELIMIT;
	if ((rc = path_decode(p, n, &out, &n)) != 0)
		return rc;
	if (memchr(out, '\r', n) != NULL || memchr(out, '\n', n) != NULL) {
		free(out);
		return BM_EUNSAFE;
	}
	*ret = out;
	return 0;
}

/* Is j the lister's FEAT? */
static bool
is_feat(const struct xfer_job *j)
{
	return j->kind == XFER_JOB_PROBE;
}

/* Does job qualify (see above)?  The first job taken fixes the host. */
static bool
gridftp_wants(const struct gridftp *g, const struct xfer_job *j)
{
	char		 host[sizeof(g->host)];
	const char	*path;
	bool		 feat = is_feat(j);

	/*
	 * While probing, FEAT only; after, MLSD listings and files, whole
	 * or a range (ERET P: a kept partial's rest).
	 */
	if (g->refused || feat != g->probing || (j->len == 0 ? j->off != 0 :
	    j->kind != XFER_JOB_FILE || g->no_eret) ||
	    j->kind == XFER_JOB_VALIDATE || (j->kind == XFER_JOB_PAGE &&
	    !j->ftp.mlsd) ||
	    j->if_modified_since >= 0 ||
	    g->opts.bwlimit != 0 || g->opts.ftp.tls == XFER_TLS_REQUIRE ||
	    g->opts.ftp.tls == XFER_TLS_TRY)
		return false;
	if (url_split(j->url, host, sizeof(host), &path) != 0)
		return false;
	return g->host[0] == '\0' || strcmp(host, g->host) == 0;
}

/*
 * Make an engine for jobs of one host, with the transport's options
 * (copied; strings borrowed for its lifetime) and at most
 * o->max_connections sessions; probe: it takes FEAT jobs only until
 * gridftp_settle().  Returns 0, BM_ENOMEM, or BM_ENET when UDT could not
 * start (the reason in errbuf, errlen bytes).
 */
static int
gridftp_new(const struct xfer_opts *o, bool probe, struct gridftp **ret,
    char *errbuf, size_t errlen)
{
	struct gridftp	*g;

	if ((g = calloc(1, sizeof(*g))) == NULL)
		return BM_ENOMEM;
	if ((g->buf = malloc(GS_DATABUF)) == NULL) {
		free(g);
		return BM_ENOMEM;
	}
	g->opts = *o;
	g->cap = o->max_connections ? o->max_connections : 4;
	g->probing = probe;
	g->streams = o->ftp.streams == 0 ? 1 : o->ftp.streams >
	    GS_STREAMS_MAX ? GS_STREAMS_MAX : o->ftp.streams;
	if (o->net == XFER_NET_UDT) {
		if (udt_shim_startup(errbuf, errlen) != 0) {
			gridftp_free(g);
			return BM_ENET;
		}
		g->udt_up = true;
		if (udt_poll_new(&g->up, errbuf, errlen) != 0) {
			gridftp_free(g);
			return BM_ENET;
		}
		g->udt = true;
	}
	*ret = g;
	return 0;
}

/* Resolve g->host once (blocking: one lookup per run, of the host the
 * listing already reached). */
static int
resolve(struct gridftp *g)
{
	struct addrinfo	 hints, *ai = NULL;
	char		 host[sizeof(g->host)], *port, *end;
	int		 rc;

	if (g->addrlen > 0)
		return 0;
	(void)snprintf(host, sizeof(host), "%s", g->host);
	port = NULL;
	if (host[0] == '[') {
		if ((end = strchr(host, ']')) == NULL)
			return BM_EINVAL;
		*end = '\0';
		if (end[1] == ':')
			port = end + 2;
		memmove(host, host + 1, strlen(host + 1) + 1);
	} else if ((end = strrchr(host, ':')) != NULL) {
		*end = '\0';
		port = end + 1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(host, port && *port ? port : "21", &hints,
	    &ai)) != 0 || ai == NULL)
		return BM_ENET;
	memcpy(&g->addr, ai->ai_addr, ai->ai_addrlen);
	g->addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static void
close_fd(int *fd)
{
	if (*fd != -1)
		(void)close(*fd);
	*fd = -1;
}

/*
 * End job with rc, its class and a message; reported at the end of
 * gridftp_run(), in the slot reserved by gridftp_submit().
 */
static void
job_vend(struct gridftp *g, struct xfer_job *job, int rc,
    enum xfer_class cls, const char *fmt, va_list ap)
{
	job->res.rc = rc;
	job->res.cls = cls;
	(void)vsnprintf(job->res.errmsg, sizeof(job->res.errmsg), fmt, ap);
	g->active--;
	g->finished[g->nfinished++] = job;
}

static void __attribute__((format(printf, 5, 6)))
job_end(struct gridftp *g, struct xfer_job *job, int rc, enum xfer_class cls,
    const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	job_vend(g, job, rc, cls, fmt, ap);
	va_end(ap);
}

/* The oldest queued job, taken off the queue; NULL when none. */
static struct xfer_job *
queue_pop(struct gridftp *g)
{
	struct gjob	*q = g->qhead;
	struct xfer_job	*job;

	if (q == NULL)
		return NULL;
	if ((g->qhead = q->next) == NULL)
		g->qtail = NULL;
	job = q->job;
	free(q);
	return job;
}

/*
 * Put job back at the front of the queue (a pipelined job whose session
 * closed before it began: another session sends it again, no try
 * counted); out of memory ends it as a retry.
 */
static void
queue_unpop(struct gridftp *g, struct xfer_job *job)
{
	struct gjob	*q;

	if ((q = calloc(1, sizeof(*q))) == NULL) {
		job_end(g, job, BM_ENOMEM, XFER_RETRY, "out of memory");
		return;
	}
	q->job = job;
	q->next = g->qhead;
	g->qhead = q;
	if (g->qtail == NULL)
		g->qtail = q;
}

/*
 * Close data connection c of s; it stays in s->ch, marked by fd -1 and
 * u NULL, until chan_sweep() (callers may be iterating s->ch).
 */
static void
chan_kill(struct gsess *s, struct gchan *c)
{
	free(c->stash);
	c->stash = NULL;
	c->nstash = 0;
	if (c->u != NULL) {
		udt_poll_del(s->g->up, c->u);
		udt_sock_close(c->u);
		c->u = NULL;
	}
	close_fd(&c->fd);
}

static bool
chan_live(const struct gchan *c)
{
	return c->fd != -1 || c->u != NULL;
}

/* Drop closed data connections from s->ch. */
static void
chan_sweep(struct gsess *s)
{
	size_t	 i, n = 0;

	for (i = 0; i < s->nch; i++)
		if (chan_live(&s->ch[i]))
			s->ch[n++] = s->ch[i];
	s->nch = n;
}

/*
 * Close s's sockets; its job, if any, must have been finished; a job
 * pipelined behind it goes back to the queue.
 */
static void
sess_close(struct gsess *s)
{
	size_t	 i;

	if (s->pjob != NULL)
		queue_unpop(s->g, s->pjob);
	s->pjob = NULL;
	free(s->ppath);
	s->ppath = NULL;
	close_fd(&s->ctl);
	close_fd(&s->lfd);
	for (i = 0; i < s->nch; i++)
		chan_kill(s, &s->ch[i]);
	s->nch = 0;
	free(s->ch);
	s->ch = NULL;
	if (s->ul != NULL) {
		udt_poll_del(s->g->up, s->ul);
		udt_sock_close(s->ul);
		s->ul = NULL;
	}
	free(s->rg);
	s->rg = NULL;
	s->nrg = s->rgcap = 0;
	free(s->path);
	s->path = NULL;
	s->job = NULL;
	if (s->state != GS_DEAD)
		s->g->nsess--;
	s->state = GS_DEAD;
}

/* End s's job (if any) with rc and class, and close s. */
static void
sess_fail(struct gsess *s, int rc, enum xfer_class cls, const char *fmt, ...)
{
	struct gridftp	*g = s->g;
	struct xfer_job	*job = s->job;
	va_list		 ap;

	/*
	 * A session that could not log in takes the oldest queued job
	 * down with it, so that a dead server ends in retries and failures
	 * instead of a queue that never moves; and fewer sessions from now
	 * on: the server refused one.
	 */
	if (job == NULL && s->state < GS_IDLE &&
	    (job = queue_pop(g)) != NULL && g->cap > 1 && g->nsess > 1)
		g->cap = g->nsess - 1;
	if (job != NULL) {
		va_start(ap, fmt);
		job_vend(g, job, rc, cls, fmt, ap);
		va_end(ap);
	}
	s->job = NULL;
	sess_close(s);
}

/*
 * Queue a command line (without CRLF) on s, after those not yet sent
 * (pipelined: the server answers them in order).  BM_ELIMIT when it
 * does not fit beside them; nothing is queued then.
 */
static int
sess_send(struct gsess *s, const char *fmt, ...)
{
	va_list	 ap;
	size_t	 room;
	int	 n;

	if (s->outoff > 0) {
		memmove(s->out, s->out + s->outoff, s->outlen - s->outoff);
		s->outlen -= s->outoff;
		s->outoff = 0;
	}
	room = sizeof(s->out) - s->outlen;
	if (room <= 2)
		return BM_ELIMIT;
	va_start(ap, fmt);
	n = vsnprintf(s->out + s->outlen, room - 2, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room - 2)
		return BM_ELIMIT;
	s->out[s->outlen + (size_t)n] = '\r';
	s->out[s->outlen + (size_t)n + 1] = '\n';
	s->outlen += (size_t)n + 2;
	return 0;
}

/* Write what is queued on the control connection. */
static int
sess_flush(struct gsess *s)
{
	ssize_t	 w;

	while (s->outoff < s->outlen) {
		w = send(s->ctl, s->out + s->outoff, s->outlen - s->outoff,
		    MSG_NOSIGNAL);
		if (w == -1) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return BM_ENET;
		}
		s->outoff += (size_t)w;
	}
	s->outlen = s->outoff = 0;
	return 0;
}

/*
 * tcp_congestion on a socket the engine made (fd -1: nothing to do); a
 * refusal is ignored, as in curl.c: sync.c checked the name first.
 */
static void
sock_congestion(const struct gridftp *g, int fd)
{
	if (fd != -1 && g->opts.tcp_congestion != NULL)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION,
		    g->opts.tcp_congestion, strlen(g->opts.tcp_congestion));
}

/* stall_timeout in seconds (60 where the options leave it 0). */
static unsigned
stall_s(const struct gridftp *g)
{
	return g->opts.stall_timeout ? g->opts.stall_timeout : 60;
}

static int64_t
stall_ns(const struct gridftp *g)
{
	return (int64_t)stall_s(g) * 1000000000;
}

#define UDT_PKT		1472		/* libudt's payload at MSS 1500 */
#define UDT_FC_BYTES	(25600ULL * 1500)	/* libudt's default window */
#define UDT_LAN_US	20000		/* RTT below: a LAN or loopback */

void
gridftp_udt_bufs(uint64_t rtt_us, unsigned streams, size_t sessions,
    uint64_t *ret_udt, uint64_t *ret_udp)
{
	uint64_t	 bdp, n, per;

	bdp = rtt_us > (256ULL << 20) / 125 ? 256ULL << 20 : rtt_us * 125;
	*ret_udp = bdp > UDT_FC_BYTES ? bdp : UDT_FC_BYTES;
	n = (uint64_t)(streams ? streams : 1) * (sessions ? sessions : 1);
	per = (bdp > 4ULL << 20 ? bdp : 4ULL << 20) / n;
	/*
	 * A libudt connection moves about its buffer every 0.12 s whatever
	 * the RTT (brk2, loopback): below UDT_LAN_US no bottleneck queue is
	 * worth sparing, and a file whose share was cut for sessions that
	 * went idle would crawl (13 s against 1 s for 48 MiB).
	 */
	if (per < (rtt_us < UDT_LAN_US ? 4ULL << 20 : 256ULL << 10))
		per = rtt_us < UDT_LAN_US ? 4ULL << 20 : 256ULL << 10;
	if (per > 25600ULL * UDT_PKT)
		per = 25600ULL * UDT_PKT;
	*ret_udt = per;
}

/*
 * The receive buffers of s's UDT listener into *want: udt_buffer for both,
 * or (0) gridftp_udt_bufs() from the control connection's RTT (TCP_INFO),
 * the streams per file and the sessions open.
 */
static void
udt_bufsize(const struct gsess *s, struct udt_bufs *want)
{
	struct tcp_info	 ti;
	socklen_t	 tl = sizeof(ti);
	uint64_t	 v = s->g->opts.udt_buffer, udt, udp;

	if (v != 0) {
		v = v > INT32_MAX ? INT32_MAX : v;
		want->udt_rcvbuf = want->udp_rcvbuf = (size_t)v;
		return;
	}
	if (getsockopt(s->ctl, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0)
		ti.tcpi_rtt = 0;
	gridftp_udt_bufs(ti.tcpi_rtt, s->g->streams, s->g->nsess, &udt,
	    &udp);
	want->udt_rcvbuf = (size_t)udt;
	want->udp_rcvbuf = udp > INT32_MAX ? INT32_MAX : (size_t)udp;
}

/*
 * A UDT listener at *ss (port 0; its address back in *ss): the server
 * connects its streams to it after SITE SETNETSTACK udt.  A UDP buffer
 * granted below the size asked is logged once per engine, naming the
 * sysctl that caps it.
 */
static int
udt_listen(struct gsess *s, struct sockaddr_storage *ss, socklen_t *sl)
{
	struct udt_bufs	 want, got;
	char		 err[256];
	int		 rc;

	memset(&want, 0, sizeof(want));
	udt_bufsize(s, &want);
	if ((rc = udt_sock_listen((struct sockaddr *)ss, *sl, &want, &s->ul,
	    &got, err, sizeof(err))) != 0)
		return rc;
	if (got.udp_rcvbuf < want.udp_rcvbuf && !s->g->bufs_warned) {
		s->g->bufs_warned = true;
		log_warnx("%s: UDT: UDP receive buffer %zu bytes, %zu asked "
		    "for (udt_buffer): raise net.core.rmem_max", s->g->host,
		    got.udp_rcvbuf, want.udp_rcvbuf);
	}
	*sl = sizeof(*ss);
	if ((rc = udt_sock_name(s->ul, (struct sockaddr *)ss, sl)) != 0 ||
	    (rc = udt_poll_add(s->g->up, s->ul)) != 0)
		return rc;
	return 0;
}

/* Open a listening socket beside the control connection's local address
 * and queue its PORT (IPv4) or EPRT (IPv6, RFC 2428) command. */
static int
sess_listen(struct gsess *s)
{
	struct sockaddr_storage ss;
	socklen_t	 sl = sizeof(ss);
	char		 a[INET6_ADDRSTRLEN];
	unsigned	 port;

	if (getsockname(s->ctl, (struct sockaddr *)&ss, &sl) == -1)
		return BM_ENET;
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = 0;
	else if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	else
		return BM_ENET;
	if (s->udt) {
		if (udt_listen(s, &ss, &sl) != 0)
			return BM_ENET;
	} else {
		s->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		/* The data connections accepted inherit tcp_congestion. */
		sock_congestion(s->g, s->lfd);
		if (s->lfd == -1 || bind(s->lfd, (struct sockaddr *)&ss,
		    sl) == -1 || listen(s->lfd, GS_STREAMS_MAX) == -1 ||
		    getsockname(s->lfd, (struct sockaddr *)&ss, &sl) == -1)
			return BM_ENET;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		uint32_t	 h = ntohl(in->sin_addr.s_addr);

		port = ntohs(in->sin_port);
		return sess_send(s, "PORT %u,%u,%u,%u,%u,%u", h >> 24,
		    (h >> 16) & 255, (h >> 8) & 255, h & 255, port >> 8,
		    port & 255);
	}
	port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	if (inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, a,
	    sizeof(a)) == NULL)
		return BM_ENET;
	return sess_send(s, "EPRT |2|%s|%u|", a, port);
}

/*
 * The server refused extended mode: take no more jobs, and end those
 * queued as retries (with no session, they would wait for nothing).
 */
static void
g_refuse(struct gridftp *g)
{
	struct xfer_job	*job;

	g->refused = true;
	while ((job = queue_pop(g)) != NULL)
		job_end(g, job, BM_ENET, XFER_RETRY, "MODE E refused by the "
		    "server: stream mode from now on");
}

/*
 * The set-up after PASS in one write (the server queues commands and
 * answers them in order: one round trip instead of six): SETNETSTACK,
 * TYPE, MODE, DCAU, OPTS, and PORT when the data connections' kind is
 * known (TCP, or UDT once a session's SETNETSTACK was accepted); else
 * PORT follows OPTS's reply.
 */
static int
sess_login_batch(struct gsess *s)
{
	struct gridftp	*g = s->g;
	int		 rc;

	if (!g->udt)
		s->step = ST_TYPE;
	s->par = g->streams;
	if ((g->udt && (rc = sess_send(s, "SITE SETNETSTACK udt")) != 0) ||
	    (rc = sess_send(s, "TYPE I")) != 0 ||
	    (rc = sess_send(s, "MODE E")) != 0 ||
	    (rc = sess_send(s, "DCAU N")) != 0 ||
	    (rc = sess_send(s, "OPTS RETR Parallelism=%u,%u,%u;", s->par,
	    s->par, s->par)) != 0)
		return rc;
	s->batch_end = ST_OPTS;
	if (!g->udt || g->udt_ok) {
		s->udt = g->udt;
		if ((rc = sess_listen(s)) != 0)
			return rc;
		s->batch_end = ST_PORT;
	}
	return 0;
}

/*
 * Send the next login command.  While the engine probes, s pauses after
 * PASS (idle with the set-up to finish: FEAT needs no more); the rest
 * goes at once (sess_login_batch), its replies then send nothing;
 * ST_DONE starts the job in hand, or makes s idle.
 */
static int
sess_login_next(struct gsess *s)
{
	const struct xfer_opts *o = &s->g->opts;

	if (s->step == ST_NETSTACK && s->job == NULL && s->g->probing) {
		s->state = GS_IDLE;
		return 0;
	}
	if (s->step > ST_NETSTACK && s->step <= s->batch_end)
		return 0;		/* a reply to the batch is due */
	switch (s->step) {
	case ST_USER:
		return sess_send(s, "USER %s", o->ftp.user ? o->ftp.user :
		    "anonymous");
	case ST_PASS:
		return sess_send(s, "PASS %s", o->ftp.password ?
		    o->ftp.password : "ftp@example.com");
	case ST_NETSTACK:
		return sess_login_batch(s);
	case ST_TYPE:
	case ST_MODE:
	case ST_DCAU:
	case ST_OPTS:
		return 0;		/* in the batch (above) */
	case ST_PORT:
		return sess_listen(s);
	case ST_DONE:
		break;
	}
	if (s->job != NULL)
		sess_start(s);		/* the job that resumed the set-up */
	else
		s->state = GS_IDLE;
	return 0;
}

/* Reply text for messages: the lines joined, codes kept, at most 200. */
static void
reply_text(const char *r, size_t n, char *buf, size_t len)
{
	size_t	 i, o = 0;

	for (i = 0; i < n && o + 1 < len; i++) {
		if (r[i] == '\r')
			continue;
		if (r[i] == '\n') {
			if (i + 1 < n && o + 3 < len) {
				buf[o++] = ' ';
				buf[o++] = '/';
				buf[o++] = ' ';
			}
			continue;
		}
		buf[o++] = (r[i] >= 32 && r[i] < 127) ? r[i] : '?';
	}
	buf[o] = '\0';
}

/* A new transfer on s's data connections. */
static void
sess_xfer_reset(struct gsess *s)
{
	struct gchan	*c;
	size_t		 i;

	for (i = 0; i < s->nch; i++) {
		c = &s->ch[i];
		c->hdrlen = 0;
		c->left = c->boff = 0;
		c->payload = c->eod = c->close_after = false;
		if (c->parked && c->u != NULL && udt_poll_add(s->g->up, c->u)
		    != 0)
			chan_kill(s, c);	/* read each pass all the same */
		c->parked = false;
	}
	s->nclosed = 0;
	/* Not polled, it is still accepted on each pass (sess_accept). */
	if (s->ul_parked)
		(void)udt_poll_add(s->g->up, s->ul);
	s->ul_parked = false;
	s->eof = s->done_reply = false;
	s->eods = s->neod = 0;
	s->nrg = 0;
	s->inorder = 0;
}

/* A whole file whose body the caller checks against an exact size. */
static bool
whole_exact(const struct xfer_job *j)
{
	return j->kind == XFER_JOB_FILE && j->len == 0 && j->size_checked;
}

/*
 * Does a whole file of exact listed size go without MDTM, its listed
 * time to the second taken for MDTM's (a resumable file: its validator)?
 * The server's MLSD modify= and MDTM are the same stat time to the
 * second (globus-gridftp-server); a change after the listing shows as
 * another size, or as another MDTM time when a kept partial continues.
 */
static bool
listed_time(const struct xfer_job *j)
{
	return whole_exact(j) && j->listed_sec;
}

/*
 * Take j's listed time for MDTM's when listed_time() allows it and the
 * caller does not keep it itself (mtime_listed); true when taken.
 */
static bool
listed_time_take(struct xfer_job *j)
{
	if (j->mtime_listed || !listed_time(j))
		return false;
	j->res.mtime = j->listed_secs;
	return true;
}

/*
 * Send the job's next command (MDTM, SIZE, RETR or ERET), skipping those
 * not needed.  A range (len > 0) always asks SIZE (sess_range_size) and
 * goes as GridFTP's partial retrieve, ERET P OFFSET LENGTH PATH, whose
 * block offsets count from OFFSET (docs/ftp.md).
 */
static int
sess_job_next(struct gsess *s)
{
	struct xfer_job	*j = s->job;

	/* A reply is due from now, whatever the session did before. */
	s->deadline = clock_mono_ns() + stall_ns(s->g);
	if (s->jstep == JS_FEAT && !is_feat(j))
		s->jstep = JS_MDTM;
	/* A listing (MLSD) is its command alone. */
	if (s->jstep == JS_MDTM && (j->mtime_listed ||
	    j->kind != XFER_JOB_FILE))
		s->jstep = JS_SIZE;
	if (s->jstep == JS_MDTM && listed_time_take(j))
		s->jstep = JS_SIZE;
	if (s->jstep == JS_SIZE && ((j->size_checked && j->len == 0) ||
	    j->kind != XFER_JOB_FILE))
		s->jstep = JS_RETR;
	switch (s->jstep) {
	case JS_FEAT:
		s->state = GS_CMD;
		return sess_send(s, "FEAT");
	case JS_MDTM:
		s->state = GS_CMD;
		return sess_send(s, "MDTM %s", s->path);
	case JS_SIZE:
		s->state = GS_CMD;
		return sess_send(s, "SIZE %s", s->path);
	case JS_RETR:
		break;
	}
	s->state = GS_RETR;
	sess_xfer_reset(s);
	if (j->kind == XFER_JOB_PAGE)
		/* RFC 3659 7.1: no argument lists the current directory. */
		return s->path[0] == '\0' ? sess_send(s, "MLSD") :
		    sess_send(s, "MLSD %s", s->path);
	if (j->len > 0)
		/* One byte more to the end: a file grown since SIZE shows. */
		return sess_send(s, "ERET P %llu %llu %s", (unsigned long long)
		    j->off, (unsigned long long)(j->len + j->to_end), s->path);
	return sess_send(s, "RETR %s", s->path);
}

/* Send the first command of the job in hand. */
static void
sess_start(struct gsess *s)
{
	int	 rc;

	s->jstep = JS_FEAT;
	if ((rc = sess_job_next(s)) != 0)
		sess_fail(s, rc, XFER_PERMANENT, "path too long for an FTP "
		    "command");
}

/* Give an idle session the next queued job. */
static void
sess_take(struct gsess *s)
{
	struct gridftp	*g = s->g;
	const char	*p;
	char		 host[sizeof(g->host)];
	int		 rc;

	while (s->state == GS_IDLE && (s->job = queue_pop(g)) != NULL) {
		if ((rc = url_split(s->job->url, host, sizeof(host), &p)) != 0 ||
		    (rc = path_of(p, &s->path)) != 0) {
			job_end(g, s->job, rc, XFER_PERMANENT, "%s", rc ==
			    BM_EUNSAFE ? "the name holds CR or LF, which no "
			    "FTP command can carry" :
			    "URL not usable for an FTP command");
			s->job = NULL;
			continue;
		}
		if (s->step == ST_DONE || is_feat(s->job)) {
			sess_start(s);
			if (s->state != GS_DEAD)
				sess_pipe(s);
			continue;
		}
		/* Paused after PASS (probing): finish the set-up first. */
		s->state = GS_LOGIN;
		s->deadline = clock_mono_ns() + stall_ns(g);
		if ((rc = sess_login_next(s)) != 0)
			sess_fail(s, rc, XFER_RETRY, "MODE E set-up: %s",
			    bm_strerror(rc));
	}
}

/* Is a session idle, or logging in with no job: one to take the next? */
static bool
sess_free_one(const struct gridftp *g)
{
	const struct gsess *t;

	for (t = g->sess; t != NULL; t = t->next)
		if (t->state != GS_DEAD && t->job == NULL)
			return true;
	return false;
}

/* May job go right behind another's RETR: a whole file, RETR alone? */
static bool
pipeable(const struct xfer_job *j)
{
	return whole_exact(j) && (j->mtime_listed || j->listed_sec);
}

/*
 * While s transfers a file, send the next queued job's RETR behind it
 * when that job needs no other command (pipeable): the server queues it
 * and starts it on the same data connections as soon as its 226 is out,
 * a round trip sooner than a RETR sent after the 226 came (GFD.20's
 * data-channel caching; globus-url-copy -pp).  One job deep, and only
 * when no other session is free or may open for it: a session of its
 * own carries it sooner (UDT: with its own congestion control).
 */
static void
sess_pipe(struct gsess *s)
{
	struct gridftp	*g = s->g;
	struct xfer_job	*j;
	const char	*p;
	char		 host[sizeof(g->host)], *path;

	if (s->pjob != NULL || s->no_pipe || g->nsess + g->others < g->cap ||
	    sess_free_one(g) || s->job == NULL ||
	    s->job->kind != XFER_JOB_FILE || (s->state != GS_RETR &&
	    s->state != GS_XFER) ||
	    g->qhead == NULL || !pipeable(j = g->qhead->job))
		return;
	/* A URL no command can carry is sess_take's to report. */
	if (url_split(j->url, host, sizeof(host), &p) != 0 || path_of(p,
	    &path) != 0)
		return;
	if (sess_send(s, "RETR %s", path) != 0) {
		free(path);		/* no room beside the queued: later */
		return;
	}
	(void)queue_pop(g);
	(void)listed_time_take(j);
	s->pjob = j;
	s->ppath = path;
}

/*
 * The job in hand has ended (job_end): the session goes on to the one
 * pipelined behind it (its replies are due next), or to the next queued.
 */
static void
sess_next(struct gsess *s)
{
	s->job = NULL;
	free(s->path);
	s->path = NULL;
	s->state = GS_IDLE;
	if (s->pjob != NULL) {
		s->job = s->pjob;
		s->path = s->ppath;
		s->pjob = NULL;
		s->ppath = NULL;
		s->jstep = JS_RETR;
		s->state = GS_RETR;
		s->deadline = clock_mono_ns() + stall_ns(s->g);
		s->kick = true;
		sess_xfer_reset(s);
		sess_pipe(s);
		return;
	}
	sess_take(s);
}

/* The job's final reply (226 after the data, or an error). */
static void
sess_job_done(struct gsess *s)
{
	struct xfer_job	*j = s->job;
	struct xfer_result *res = &j->res;
	size_t		 i;

	if (j->len == 0 && res->size >= 0 && (uint64_t)res->size !=
	    res->bytes) {
		sess_fail(s, BM_ECHECKSUM, XFER_RETRY, "got %llu bytes, SIZE "
		    "said %lld", (unsigned long long)res->bytes,
		    (long long)res->size);
		return;
	}
	if (j->len > 0 && res->bytes != j->len) {
		sess_fail(s, BM_ECHECKSUM, XFER_RETRY, "got %llu of the %llu "
		    "bytes asked for at offset %llu", (unsigned long long)
		    res->bytes, (unsigned long long)j->len,
		    (unsigned long long)j->off);
		return;
	}
	/* XXX: sched/report do not show it per file yet. */
	j->res.net = s->udt ? XFER_NET_UDT : XFER_NET_TCP;
	job_end(s->g, j, 0, XFER_OK, "%s", "");
	for (i = 0; i < s->nch; i++)
		if (s->ch[i].close_after) {
			chan_kill(s, &s->ch[i]); /* the server opens a new one */
			s->no_pipe = true;
		}
	sess_next(s);
}

/*
 * Whether the transfer in hand is complete: EOF seen, as many EODs as it
 * announced, no block part-read, and the final reply; then it ends.
 * EODs on every connection and the final reply without EOF: none can
 * come now (GFD.20 3.4.1: the sender sends EOF once, before or with its
 * last EOD).
 */
static void
sess_check_end(struct gsess *s)
{
	size_t	 i;
	bool	 all_eod = true;

	if (s->state == GS_DEAD || s->job == NULL || !s->done_reply)
		return;
	for (i = 0; i < s->nch; i++) {
		if (!chan_live(&s->ch[i]) && !s->ch[i].eod)
			continue;
		if (s->ch[i].left > 0 || s->ch[i].hdrlen > 0)
			return;
		if (!s->ch[i].eod)
			all_eod = false;
	}
	if (s->eof && s->neod >= s->eods)
		sess_job_done(s);
	else if (!s->eof && all_eod && s->neod > 0)
		sess_fail(s, BM_EPROTO, XFER_RETRY, "MODE E: end of data "
		    "without EOF");
}

/*
 * The server refused ERET P (no partial retrieve): ranges go to the
 * transport below from now on (stream mode, REST), said once, and this
 * job too, handed back unreported (gx_poll resubmits it below); the
 * session goes on.
 */
static void
sess_no_eret(struct gsess *s, const char *text)
{
	struct gridftp	*g = s->g;
	struct gjob	*q;

	if (!g->no_eret)
		log_warnx("%s: ERET P refused (%s): kept partials continue in "
		    "stream mode", g->host, text);
	g->no_eret = true;
	if ((q = calloc(1, sizeof(*q))) == NULL) {
		job_end(g, s->job, BM_ENOMEM, XFER_RETRY, "out of memory");
		sess_next(s);
		return;
	}
	q->job = s->job;
	q->next = g->back;
	g->back = q;
	g->active--;
	sess_next(s);
}

/*
 * A reply to a job command that is not success: class and message.  A
 * command refused before any transfer began (MDTM, SIZE, or RETR before
 * its 1xx) leaves the session as it was: it goes on with the next job;
 * after a 1xx the data connection's state is unknown: it is closed.
 */
static void
sess_job_refused(struct gsess *s, int code, const char *text)
{
	struct xfer_job	*j = s->job;
	int		 rc = BM_EPROTO;
	enum xfer_class	 cls = XFER_PERMANENT;

	j->res.status = code;	/* the reply, as libcurl's RESPONSE_CODE */
	/*
	 * 550, or GridFTP's 500 "... No such file or directory", is gone;
	 * 4xx (421 too many users, 425/426 data connection) is retried.
	 */
	if (code == 550 || (code == 500 &&
	    strstr(text, "No such file or directory") != NULL)) {
		rc = BM_ENOENT;
		cls = XFER_GONE;
	} else if (code >= 400 && code < 500) {
		rc = BM_ENET;
		cls = XFER_RETRY;
	} else if (s->jstep == JS_RETR && j->len > 0 && s->state == GS_RETR) {
		sess_no_eret(s, text);
		return;
	}
	if (s->state == GS_XFER || code == 421) {
		sess_fail(s, rc, cls, "%s", text);
		return;
	}
	job_end(s->g, j, rc, cls, "%s", text);
	sess_next(s);
}

/*
 * A range's SIZE: the range must lie in the file, and one that ends at
 * the listed end (to_end) must end where the file does; else upstream
 * changed, and the job ends before its ERET (the session goes on).
 * Returns false when it ended the job.
 */
static bool
sess_range_size(struct gsess *s)
{
	struct xfer_job	*j = s->job;
	uint64_t	 end = j->off + j->len;

	if (j->len == 0 || (j->to_end ? (uint64_t)j->res.size == end :
	    (uint64_t)j->res.size >= end))
		return true;
	job_end(s->g, j, BM_ECHANGED, XFER_CHANGED, "upstream changed: SIZE "
	    "%lld, the range asked for ends at %llu", (long long)j->res.size,
	    (unsigned long long)end);
	sess_next(s);
	return false;
}

/* Handle one complete reply. */
static void
sess_reply(struct gsess *s, int code, const char *r, size_t n)
{
	struct xfer_job	*j = s->job;
	char		 text[256];
	const char	*p;
	int		 rc;

	reply_text(r, n, text, sizeof(text));
	switch (s->state) {
	case GS_GREETING:
		if (code / 100 == 1)
			return;		/* 120: ready in a while */
		if (code != 220) {
			sess_fail(s, BM_ENET, XFER_RETRY, "login: %s", text);
			return;
		}
		s->state = GS_LOGIN;
		s->step = ST_USER;
		break;
	case GS_LOGIN:
		if (code == 530 && s->step <= ST_PASS &&
		    !ftp_530_is_limit(text, s->g->opts.ftp.user == NULL,
		    s->g->logged_in)) {
			/* A wrong login: no retry (ftp_530_is_limit). */
			sess_fail(s, BM_EPROTO, XFER_PERMANENT, "login refused: "
			    "%s", text);
			return;
		}
		if (s->step == ST_USER && code == 230)
			s->step = ST_PASS;	/* no password asked */
		else if (s->step == ST_USER && code != 331) {
			sess_fail(s, BM_ENET, XFER_RETRY, "login: %s", text);
			return;
		} else if (s->step == ST_PASS && code / 100 != 2) {
			sess_fail(s, BM_ENET, XFER_RETRY, "login: %s", text);
			return;
		} else if (s->step == ST_NETSTACK) {
			/* Refused (not whitelisted): TCP, said once. */
			if (code / 100 == 2) {
				s->udt = s->g->udt_ok = true;
			} else if (s->batch_end == ST_PORT) {
				/* Its PORT named a UDT listener. */
				sess_fail(s, BM_ENET, XFER_RETRY, "SITE "
				    "SETNETSTACK udt refused after another "
				    "session's was accepted: %s", text);
				return;
			} else if (s->g->udt) {
				s->g->udt = false;
				log_warnx("%s: SITE SETNETSTACK udt refused (%s): "
				    "data over TCP", s->g->host, text);
			}
		} else if (s->step != ST_USER && code / 100 != 2) {
			/*
			 * TYPE I, MODE E, DCAU N, OPTS or PORT refused: no
			 * extended mode with this server.  The queue goes
			 * back to the scheduler as retries, which libcurl
			 * then carries in stream mode (gridftp_wants).
			 */
			g_refuse(s->g);
			sess_fail(s, BM_ENET, XFER_RETRY, "MODE E set-up: %s: "
			    "stream mode from now on", text);
			return;
		}
		if (s->step == ST_PASS)
			s->g->logged_in = true;
		s->step++;
		break;
	case GS_CMD:
		if (s->jstep == JS_FEAT) {
			/*
			 * The reply is the job's body, as libcurl delivers
			 * it; a server that refuses FEAT for good (5xx) lists
			 * no features (so no GridFTP), which is no error; 4xx
			 * is transient (RFC 959 section 4.2): retried.
			 */
			if (code / 100 == 4) {
				sess_job_refused(s, code, text);
				return;
			}
			j->res.status = code;
			rc = j->res.bytes + n > GS_FEAT_MAX ? BM_ELIMIT :
			    j->sink(j->sink_arg, j->res.bytes,
			    (const uint8_t *)r, n);
			if (rc != 0) {
				sess_fail(s, rc, XFER_PERMANENT, "FEAT reply: "
				    "%s", bm_strerror(rc));
				return;
			}
			j->res.bytes += n;
			job_end(s->g, j, 0, XFER_OK, "%s", "");
			sess_next(s);
			return;
		}
		if (code / 100 != 2) {
			sess_job_refused(s, code, text);
			return;
		}
		p = r + 4;
		if (s->jstep == JS_MDTM) {
			int64_t	 t;
			int32_t	 ns;
			size_t	 len = 0;

			/* "213 time-val" (RFC 3659 section 3). */
			while (4 + len < n && p[len] != '\r' && p[len] != '\n')
				len++;
			if (ftp_time_val(p, len, &t, &ns) != 0) {
				sess_fail(s, BM_EPROTO, XFER_RETRY, "bad MDTM "
				    "reply: %s", text);
				return;
			}
			j->res.mtime = t;
		} else {
			char *end;

			errno = 0;
			j->res.size = (int64_t)strtoll(p, &end, 10);
			if (errno != 0 || end == p || j->res.size < 0) {
				sess_fail(s, BM_EPROTO, XFER_RETRY, "bad SIZE "
				    "reply: %s", text);
				return;
			}
			if (!sess_range_size(s))
				return;
		}
		s->jstep++;
		if ((rc = sess_job_next(s)) != 0)
			sess_fail(s, rc, XFER_PERMANENT, "path too long");
		return;
	case GS_RETR:
	case GS_XFER:
		j->res.status = code;
		if (code / 100 == 1) {
			s->state = GS_XFER;
			return;
		}
		if (code / 100 != 2) {
			sess_job_refused(s, code, text);
			return;
		}
		s->state = GS_XFER;
		s->done_reply = true;
		sess_check_end(s);
		return;
	default:
		/* A reply nobody asked for (421 on an idle session). */
		sess_fail(s, BM_ENET, XFER_RETRY, "%s", text);
		return;
	}
	if (s->state == GS_LOGIN && (rc = sess_login_next(s)) != 0) {
		sess_fail(s, rc, XFER_RETRY, "MODE E set-up: %s",
		    bm_strerror(rc));
		return;
	}
	if (s->state == GS_IDLE)
		sess_take(s);
}

/*
 * Handle every complete reply held, in order; those after the final
 * reply of a job with another pipelined behind it wait (they are the
 * next job's) until that job has its data and ends.
 */
static void
sess_parse_ctl(struct gsess *s)
{
	long	 n;
	int	 code;

	while (s->state != GS_DEAD && s->inlen > 0 && !(s->pjob != NULL &&
	    s->done_reply)) {
		if ((n = ftp_reply_end(s->in, s->inlen, &code)) < 0 &&
		    s->state == GS_CMD && s->jstep == JS_FEAT &&
		    s->inlen >= GS_INBUF / 2) {
			/*
			 * A FEAT reply longer than this engine holds
			 * (GS_INBUF / 2): the FEAT is retried in stream mode,
			 * where libcurl holds up to GS_FEAT_MAX, and so is
			 * the rest of the run, rather than fail every try of
			 * the listing.
			 */
			g_refuse(s->g);
			sess_fail(s, BM_EPROTO, XFER_RETRY, "FEAT reply longer "
			    "than %d bytes: stream mode from now on",
			    GS_INBUF / 2);
			return;
		}
		if (n < 0) {
			sess_fail(s, BM_EPROTO, XFER_RETRY, "bad reply on the "
			    "control connection");
			return;
		}
		if (n == 0)
			break;
		sess_reply(s, code, s->in, (size_t)n);
		if (s->state == GS_DEAD)
			return;
		memmove(s->in, s->in + n, s->inlen - (size_t)n);
		s->inlen -= (size_t)n;
	}
}

/* Read the control connection and handle every complete reply. */
static void
sess_read_ctl(struct gsess *s)
{
	ssize_t	 r;

	while (s->inlen < sizeof(s->in)) {
		r = recv(s->ctl, s->in + s->inlen, sizeof(s->in) - s->inlen, 0);
		if (r == 0 || (r == -1 && errno != EAGAIN && errno != EINTR)) {
			sess_fail(s, BM_ENET, XFER_RETRY, "control connection"
			    "%s%s", r == 0 ? " closed by the server" : ": ",
			    r == 0 ? "" : strerror(errno));
			return;
		}
		if (r == -1)
			break;
		if (s->state != GS_IDLE)
			s->deadline = clock_mono_ns() + stall_ns(s->g);
		s->inlen += (size_t)r;
		sess_parse_ctl(s);
		if (s->state == GS_DEAD)
			return;
	}
}

/* Is a the control connection's peer (the same IP)? */
static bool
same_peer(const struct gsess *s, const struct sockaddr_storage *a)
{
	struct sockaddr_storage b;
	socklen_t	 bl = sizeof(b);

	if (getpeername(s->ctl, (struct sockaddr *)&b, &bl) != 0 ||
	    a->ss_family != b.ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		    ((struct sockaddr_in *)&b)->sin_addr.s_addr;
	return a->ss_family == AF_INET6 && memcmp(
	    &((const struct sockaddr_in6 *)a)->sin6_addr,
	    &((struct sockaddr_in6 *)&b)->sin6_addr, 16) == 0;
}

/* A new data connection of s (fd or u), its parser reset. */
static void
chan_add(struct gsess *s, int fd, udt_sock *u)
{
	struct gchan	*c = &s->ch[s->nch++];

	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->u = u;
	if (u != NULL && udt_poll_add(s->g->up, u) != 0)
		chan_kill(s, c);	/* read each pass all the same */
}

/*
 * Room for another data connection?  While a job waits pipelined, the
 * slots of those closed after their EOD stay taken, and once the file
 * in hand has all its EODs there is none: a new connection then is the
 * next file's (the server opens it for the next RETR), and waits
 * unaccepted until the file in hand ends.  A server that opens fewer
 * than par connections for a file and more for the next one, before the
 * first's last EOD, is still mistaken for the file in hand: the next
 * file's blocks then overlap its own (range_add) or pass its size, and
 * the session fails (retry), never publishing mixed bytes.
 */
static bool
sess_room(const struct gsess *s)
{
	/* The file in hand has all its EODs: it takes no more. */
	if (s->pjob != NULL && s->eof && s->neod >= s->eods)
		return false;
	return s->nch + (s->pjob != NULL ? s->nclosed : 0) < s->par;
}

/*
 * Accept the server's data connections, from its address only, up to
 * the parallelism asked for: TCP on s->lfd, UDT on s->ul.  With a job
 * pipelined and no room, none (the UDT listener leaves the poll set
 * until sess_xfer_reset()).
 */
static void
sess_accept(struct gsess *s)
{
	struct sockaddr_storage a;
	socklen_t	 al = sizeof(a);
	udt_sock	*u;
	int		 fd;

	/* A connection closed in this pass leaves its slot now. */
	chan_sweep(s);
	if (s->pjob != NULL && !sess_room(s)) {
		if (s->ul != NULL && !s->ul_parked) {
			udt_poll_del(s->g->up, s->ul);
			s->ul_parked = true;
		}
		return;
	}
	while (s->lfd != -1 && (fd = accept4(s->lfd, (struct sockaddr *)&a,
	    &al, SOCK_NONBLOCK | SOCK_CLOEXEC)) != -1) {
		/* Not the server, or one too many: never read. */
		if (!same_peer(s, &a) || s->nch >= s->par)
			(void)close(fd);
		else
			chan_add(s, fd, NULL);
		al = sizeof(a);
	}
	while (s->ul != NULL && udt_sock_accept(s->ul, &u, (struct sockaddr *)
	    &a, &al, NULL, 0) == 0) {
		if (!same_peer(s, &a) || s->nch >= s->par)
			udt_sock_close(u);
		else
			chan_add(s, -1, u);
		al = sizeof(a);
	}
}

/*
 * Record [a, b) of the file as received (more than one stream: blocks
 * come in any order, but never twice).  0, BM_EPROTO for an overlap,
 * BM_ELIMIT past GS_RANGES_MAX ranges apart, BM_ENOMEM.
 */
static int
range_add(struct gsess *s, uint64_t a, uint64_t b)
{
	struct grange	*v;
	size_t		 lo = 0, hi = s->nrg, mid;

	while (lo < hi) {		/* first range ending after a */
		mid = (lo + hi) / 2;
		if (s->rg[mid].b <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->nrg && s->rg[lo].a < b)
		return BM_EPROTO;
	if (lo > 0 && s->rg[lo - 1].b == a) {
		s->rg[lo - 1].b = b;
		if (lo < s->nrg && s->rg[lo].a == b) {
			s->rg[lo - 1].b = s->rg[lo].b;
			memmove(&s->rg[lo], &s->rg[lo + 1], (s->nrg - lo - 1) *
			    sizeof(*s->rg));
			s->nrg--;
		}
		return 0;
	}
	if (lo < s->nrg && s->rg[lo].a == b) {
		s->rg[lo].a = a;
		return 0;
	}
	if (s->nrg == s->rgcap) {
		if (s->rgcap >= GS_RANGES_MAX)
			return BM_ELIMIT;
		if ((v = reallocarray(s->rg, s->rgcap ? s->rgcap * 2 : 64,
		    sizeof(*v))) == NULL)
			return BM_ENOMEM;
		s->rg = v;
		s->rgcap = s->rgcap ? s->rgcap * 2 : 64;
	}
	memmove(&s->rg[lo + 1], &s->rg[lo], (s->nrg - lo) * sizeof(*s->rg));
	s->rg[lo].a = a;
	s->rg[lo].b = b;
	s->nrg++;
	return 0;
}

/*
 * Test-only hook (tests/functional/t_82; never set in production): with
 * BM_GRIDFTP_TEST_STOP=N in the environment, the process stops itself
 * (SIGSTOP, every thread) once a file job has received N payload bytes,
 * once per process, so that a test can freeze the server while the
 * transfer is held mid-file, whatever the speed of loopback.
 */
static void
test_hook_stop(uint64_t bytes)
{
	static int	 state;		/* 0 unread, 1 armed, 2 off or done */
	static uint64_t	 at;
	const char	*v;

	if (state == 0) {
		v = getenv("BM_GRIDFTP_TEST_STOP");
		state = v != NULL && (at = strtoull(v, NULL, 10)) > 0 ? 1 : 2;
	}
	if (state != 1 || bytes < at)
		return;
	state = 2;
	log_info("gridftp: test hook: stopped after %" PRIu64 " bytes",
	    bytes);
	(void)raise(SIGSTOP);
}

/*
 * Deliver n payload bytes at p of connection c to the job's sink, at
 * their offset in the file.
 */
static int
sess_payload(struct gsess *s, struct gchan *c, const uint8_t *p, size_t n)
{
	struct xfer_job	*j = s->job;
	uint64_t	 b = j->res.bytes;
	int		 rc;

	if (j->len > 0 && j->to_end && c->boff + n > j->len) {
		sess_fail(s, BM_ECHANGED, XFER_CHANGED, "upstream is longer "
		    "than listed (more than %llu bytes from offset %llu)",
		    (unsigned long long)j->len, (unsigned long long)j->off);
		return BM_ECHANGED;
	}
	if (b + n < b || (j->max_size && b + n > j->max_size) ||
	    (j->len > 0 && c->boff + n > j->len) ||
	    (j->expect_size >= 0 && (b + n > (uint64_t)j->expect_size ||
	    c->boff + n > (uint64_t)j->expect_size))) {
		sess_fail(s, BM_ELIMIT, XFER_PERMANENT, "body larger than the "
		    "expected size");
		return BM_ELIMIT;
	}
	/* A range's block offsets count from its first byte (ERET P). */
	if ((rc = j->sink(j->sink_arg, j->off + c->boff, p, n)) != 0) {
		sess_fail(s, rc, rc == BM_ECHANGED ? XFER_CHANGED :
		    XFER_PERMANENT, "%s", bm_strerror(rc));
		return rc;
	}
	j->res.bytes += n;
	c->boff += n;
	c->left -= n;
	test_hook_stop(j->res.bytes);
	return 0;
}

/*
 * A payload block b over parallel data connections: out of file order
 * (res.scattered), each byte once, inside a whole file's listed size.
 * Past that size, or overlapping another block, some block's offset was
 * wrong and one already written may sit in the wrong place: the job
 * fails XFER_CHANGED, so that none of its bytes is kept for the next try
 * (more ranges apart than held: XFER_RETRY).  0, or -1 with s failed.
 */
static int
chan_parallel_block(struct gsess *s, const struct gridftp_block *b)
{
	struct xfer_job	*j = s->job;
	uint64_t	 end = b->offset + b->count;
	int		 rc;

	j->res.scattered = true;
	if (j->len == 0 && j->listed_exact && (end < b->offset ||
	    end > j->listed_size)) {
		sess_fail(s, BM_ECHANGED, XFER_CHANGED, "MODE E block at "
		    "offset %llu of %llu bytes: past the %llu bytes listed "
		    "(upstream changed, or its offsets are wrong: the bytes "
		    "held are dropped)", (unsigned long long)b->offset,
		    (unsigned long long)b->count,
		    (unsigned long long)j->listed_size);
		return -1;
	}
	if ((rc = end < b->offset ? BM_EPROTO : range_add(s, b->offset,
	    end)) != 0) {
		sess_fail(s, BM_EPROTO, rc == BM_ELIMIT ? XFER_RETRY :
		    XFER_CHANGED, "MODE E block at offset %llu: %s",
		    (unsigned long long)b->offset, rc == BM_ELIMIT ?
		    "too many ranges apart" : "bytes sent twice (its offsets "
		    "are not to be trusted: the bytes held are dropped)");
		return -1;
	}
	return 0;
}

/*
 * A block header of connection c: its offset checked (one stream: in
 * order, as it comes; more: no byte twice), EOF's EOD count against the
 * parallelism asked for.  0, or s failed.
 */
static int
chan_block(struct gsess *s, struct gchan *c, const struct gridftp_block *b)
{
	if (b->desc & GRIDFTP_D_EOF) {
		s->eof = true;
		s->eods = b->offset;
		if (s->eods > s->par) {
			sess_fail(s, BM_EPROTO, XFER_RETRY, "MODE E: %llu data "
			    "connections announced, %u asked for",
			    (unsigned long long)s->eods, s->par);
			return -1;
		}
		if (b->count > 0) {
			sess_fail(s, BM_EPROTO, XFER_RETRY, "MODE E: an EOF "
			    "block with data");
			return -1;
		}
	}
	c->payload = !(b->desc & GRIDFTP_D_RESTART);
	if (c->payload && b->count > 0 && !(b->desc & GRIDFTP_D_EOF)) {
		if (s->par <= 1 && b->offset != s->inorder) {
			/* One stream comes in order; a gap is no file. */
			sess_fail(s, BM_EPROTO, XFER_RETRY, "MODE E block at "
			    "offset %llu, expected %llu", (unsigned long long)
			    b->offset, (unsigned long long)s->inorder);
			return -1;
		}
		if (s->par > 1 && chan_parallel_block(s, b) != 0)
			return -1;
		c->boff = b->offset;
		s->inorder = b->offset + b->count;
	}
	c->left = b->count;
	if (b->desc & GRIDFTP_D_EOD) {
		c->eod = true;
		s->neod++;
		c->close_after = (b->desc & GRIDFTP_D_CLOSE) != 0;
	}
	return 0;
}

/* Parse n bytes of data connection c at p: headers and payload. */
static void
sess_data(struct gsess *s, struct gchan *c, const uint8_t *p, size_t n)
{
	struct gridftp_block b;
	size_t		 k;

	while (n > 0 && s->state != GS_DEAD) {
		if (s->job != NULL && s->pjob != NULL && c->eod && c->left ==
		    0 && c->stash == NULL) {
			/* The pipelined file's, read with this one's EOD. */
			if ((c->stash = malloc(n)) == NULL) {
				sess_fail(s, BM_ENOMEM, XFER_RETRY, "out of "
				    "memory");
				return;
			}
			memcpy(c->stash, p, n);
			c->nstash = n;
			break;
		}
		if (s->job == NULL || (c->eod && c->left == 0)) {
			sess_fail(s, BM_EPROTO, XFER_RETRY, "data after the "
			    "end of a file");
			return;
		}
		if (c->left > 0) {
			k = n < c->left ? n : (size_t)c->left;
			if (c->payload) {
				if (sess_payload(s, c, p, k) != 0)
					return;
			} else
				c->left -= k;
			p += k;
			n -= k;
			continue;
		}
		k = GRIDFTP_HDRLEN - c->hdrlen;
		if (k > n)
			k = n;
		memcpy(c->hdr + c->hdrlen, p, k);
		c->hdrlen += k;
		p += k;
		n -= k;
		if (c->hdrlen < GRIDFTP_HDRLEN)
			return;
		c->hdrlen = 0;
		if (gridftp_block_parse(c->hdr, &b) != 0) {
			sess_fail(s, BM_EPROTO, XFER_RETRY, "bad MODE E block "
			    "header (descriptor 0x%02x)", c->hdr[0]);
			return;
		}
		if (chan_block(s, c, &b) != 0)
			return;
	}
	sess_check_end(s);
}

/*
 * One read of data connection c: bytes (> 0), 0 when none are there, or
 * -1 when it closed ("closed") or failed ("failed: reason" in why).
 */
static long
chan_recv(struct gsess *s, struct gchan *c, char *why, size_t whylen)
{
	char	 err[128];
	ssize_t	 r;
	long	 n;

	if (c->u != NULL) {
		if ((n = udt_sock_recv(c->u, s->g->buf, GS_DATABUF, err,
		    sizeof(err))) >= 0) {
			if (n > 0)
				s->g->udt_moved = true;
			return n;
		}
		(void)snprintf(why, whylen, "failed: %s", err);
		return -1;
	}
	r = recv(c->fd, s->g->buf, GS_DATABUF, 0);
	if (r == -1 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0) {
		(void)snprintf(why, whylen, "%s%s", r == 0 ? "closed" :
		    "failed: ", r == 0 ? "" : strerror(errno));
		return -1;
	}
	return (long)r;
}

/*
 * Read data connection c while it has bytes.  During a transfer: its
 * blocks; a close after its EOD is the server's (CLOSE, or a connection
 * it does not keep); before it is a cut file.  Between transfers (idle,
 * logging in, MDTM or SIZE asked): bytes are no file; a close is the
 * server's choice (a new connection comes with the next RETR).
 */
static void
chan_read(struct gsess *s, struct gchan *c)
{
	char	 why[200];
	long	 r;
	bool	 xfer;

	while (s->state != GS_DEAD && chan_live(c)) {
		xfer = s->state == GS_XFER || s->state == GS_RETR;
		if (xfer && s->pjob != NULL && c->eod && c->left == 0 &&
		    c->hdrlen == 0) {
			/* The rest is the pipelined file's: it waits. */
			if (!c->parked && c->u != NULL)
				udt_poll_del(s->g->up, c->u);
			c->parked = true;
			return;
		}
		if (c->stash != NULL) {
			uint8_t	*p = c->stash;
			size_t	 n = c->nstash;

			c->stash = NULL;
			c->nstash = 0;
			if (!xfer)
				sess_fail(s, BM_EPROTO, XFER_RETRY, "data "
				    "between files");
			else
				sess_data(s, c, p, n);
			free(p);
			continue;
		}
		if ((r = chan_recv(s, c, why, sizeof(why))) == 0)
			return;
		if (r < 0) {
			if (xfer && c->eod && c->left == 0) {
				s->nclosed++;
				s->no_pipe = true;
			}
			if (!xfer || (c->eod && c->left == 0))
				chan_kill(s, c);
			else
				sess_fail(s, BM_ENET, XFER_RETRY, "data "
				    "connection %s before the end of the "
				    "file", why);
			return;
		}
		if (!xfer) {
			sess_fail(s, BM_EPROTO, XFER_RETRY, "data between "
			    "files");
			return;
		}
		s->deadline = clock_mono_ns() + stall_ns(s->g);
		sess_data(s, c, s->g->buf, (size_t)r);
	}
}

/* Start a new session (connect in progress). */
static int
sess_open(struct gridftp *g)
{
	struct gsess	*s;
	int		 rc;

	if ((rc = resolve(g)) != 0)
		return rc;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return BM_ENOMEM;
	if ((s->ch = calloc(g->streams, sizeof(*s->ch))) == NULL) {
		free(s);
		return BM_ENOMEM;
	}
	s->g = g;
	s->lfd = -1;
	s->par = g->streams;
	s->ctl = socket(g->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (s->ctl == -1) {
		free(s->ch);
		free(s);
		return BM_ENET;
	}
	sock_congestion(g, s->ctl);
	s->state = GS_CONNECTING;
	s->deadline = clock_mono_ns() + (int64_t)(g->opts.connect_timeout ?
	    g->opts.connect_timeout : 30) * 1000000000;
	s->next = g->sess;
	g->sess = s;
	g->nsess++;
	if (connect(s->ctl, (struct sockaddr *)&g->addr, g->addrlen) == -1 &&
	    errno != EINPROGRESS)
		sess_fail(s, BM_ENET, XFER_RETRY, "connect: %s",
		    strerror(errno));
	return 0;
}

/*
 * Queue job (borrowed until done; res already reset by the caller).
 * Returns 0, BM_ENOMEM, or BM_EINVAL for a URL it cannot take.
 */
static int
gridftp_submit(struct gridftp *g, struct xfer_job *job)
{
	struct gjob	*q;
	struct xfer_job	**v;
	const char	*p;
	char		 host[sizeof(g->host)];
	size_t		 n;

	if (url_split(job->url, host, sizeof(host), &p) != 0)
		return BM_EINVAL;
	/* Room to report it, whichever way it ends (job_vend). */
	if (g->active + g->nfinished == g->finished_cap) {
		n = g->finished_cap ? g->finished_cap * 2 : 16;
		if ((v = reallocarray(g->finished, n, sizeof(*v))) == NULL)
			return BM_ENOMEM;
		g->finished = v;
		g->finished_cap = n;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return BM_ENOMEM;
	if (g->host[0] == '\0')
		(void)snprintf(g->host, sizeof(g->host), "%s", host);
	q->job = job;
	if (g->qtail)
		g->qtail->next = q;
	else
		g->qhead = q;
	g->qtail = q;
	g->active++;
	return 0;
}

/*
 * Fill fds (room for max) with the sockets to poll and the events wanted;
 * returns how many.  *ret_timeout_ms is lowered to the next deadline.
 */
static size_t
gridftp_fds(struct gridftp *g, struct pollfd *fds, size_t max,
    int *ret_timeout_ms)
{
	struct gsess	*s;
	size_t		 n = 0, i;
	int64_t		 now = clock_mono_ns(), ms;

	for (s = g->sess; s != NULL; s = s->next) {
		if (s->state == GS_DEAD)
			continue;
		if (n < max) {
			fds[n].fd = s->ctl;
			fds[n].events = s->inlen < sizeof(s->in) ? POLLIN : 0;
			if (s->state == GS_CONNECTING || s->outoff < s->outlen)
				fds[n].events |= POLLOUT;
			fds[n++].revents = 0;
		}
		if (s->lfd != -1 && sess_room(s) && n < max) {
			fds[n].fd = s->lfd;
			fds[n].events = POLLIN;
			fds[n++].revents = 0;
		}
		for (i = 0; i < s->nch && n < max; i++)
			if (s->ch[i].fd != -1 && !s->ch[i].parked) {
				fds[n].fd = s->ch[i].fd;
				fds[n].events = POLLIN;
				fds[n++].revents = 0;
			}
		if (s->kick)
			*ret_timeout_ms = 0;	/* 64 passes were not enough */
		if (s->state == GS_IDLE)
			continue;
		ms = (s->deadline - now) / 1000000 + 1;
		if (ms < 0)
			ms = 0;
		if (ms < *ret_timeout_ms)
			*ret_timeout_ms = (int)ms;
	}
	return n;
}

/* One pass over session s. */
static void
sess_step(struct gsess *s, int64_t now)
{
	int	 err = 0, rc, pass;
	socklen_t el = sizeof(err);
	size_t	 i;

	if (s->state == GS_CONNECTING) {
		struct pollfd pf = { .fd = s->ctl, .events = POLLOUT };

		if (poll(&pf, 1, 0) == 1) {
			if (getsockopt(s->ctl, SOL_SOCKET, SO_ERROR, &err,
			    &el) == -1 || err != 0) {
				sess_fail(s, BM_ENET, XFER_RETRY, "connect: %s",
				    strerror(err ? err : errno));
				return;
			}
			s->state = GS_GREETING;
			s->deadline = now + stall_ns(s->g);
		}
	}
	if (s->state != GS_CONNECTING && s->state != GS_DEAD)
		sess_read_ctl(s);
	/*
	 * Again while a pipelined job began in the pass: its bytes already
	 * read (a stash) and its replies held in s->in raise no poll event.
	 */
	for (pass = 0; pass == 0 || (s->kick && pass < 64); pass++) {
		s->kick = false;
		if (s->state != GS_DEAD)
			sess_accept(s);
		for (i = 0; s->state != GS_DEAD && i < s->nch; i++)
			chan_read(s, &s->ch[i]);
		/* Replies held for a pipelined job that has now begun. */
		if (s->state != GS_DEAD && s->state != GS_CONNECTING)
			sess_parse_ctl(s);
		if (s->state != GS_DEAD)
			chan_sweep(s);
	}
	if (s->state != GS_DEAD && s->state != GS_CONNECTING &&
	    (rc = sess_flush(s)) != 0) {
		sess_fail(s, rc, XFER_RETRY, "control connection: %s",
		    strerror(errno));
		return;
	}
	if (s->state != GS_DEAD && s->state != GS_IDLE && now > s->deadline)
		sess_fail(s, BM_ENET, XFER_RETRY, s->state == GS_CONNECTING ?
		    "connect: timed out" : "stalled: no data for %u s",
		    stall_s(s->g));
}

/* Does a session hold UDT sockets (a listener or data connections)? */
static bool
gridftp_udt_busy(const struct gridftp *g)
{
	const struct gsess *s;

	for (s = g->sess; s != NULL; s = s->next)
		if (s->state != GS_DEAD && s->udt && (s->ul != NULL ||
		    s->nch > 0))
			return true;
	return false;
}

/* Sessions open or opening. */
static size_t
gridftp_sessions(const struct gridftp *g)
{
	return g->nsess;
}

/* Has poll(2) reported one of s's sockets (or is ready NULL)? */
static bool
sess_ready(const struct gsess *s, const struct pollfd *ready, size_t nready)
{
	size_t	 i, k;

	/* UDT sockets are no fds: a session with any is always stepped. */
	if (ready == NULL || s->udt || s->kick)
		return true;
	for (i = 0; i < nready; i++) {
		if (ready[i].revents == 0)
			continue;
		if (ready[i].fd == s->ctl || ready[i].fd == s->lfd)
			return true;
		for (k = 0; k < s->nch; k++)
			if (ready[i].fd == s->ch[k].fd)
				return true;
	}
	return false;
}

/*
 * Do all work that is possible without blocking (reads, writes, accepts,
 * connects, deadlines) and call done for each job that ended; *ret_n is
 * how many did.  others: connections the transport holds to the host
 * outside the engine (libcurl's transfers in flight): new sessions keep
 * sessions + others within max_connections, and idle sessions are closed
 * while others > 0 and no job waits.  ready: nready results of poll(2)
 * over gridftp_fds()'s list; only sessions with a reported socket (or a
 * deadline passed) do I/O; NULL steps every session.  Returns 0.
 */
static int
gridftp_run(struct gridftp *g, size_t others, const struct pollfd *ready,
    size_t nready, xfer_done_fn done, void *ctx, size_t *ret_n)
{
	struct gsess	*s, **pp;
	struct gjob	*q;
	size_t		 pending, nq;
	int64_t		 now = clock_mono_ns();
	int		 rc;

	*ret_n = 0;
	g->others = others;
	/*
	 * Idle sessions give their connections back while other transfers
	 * to the host run and no job waits here: max_connections is one
	 * budget for both.
	 */
	if (others > 0 && g->qhead == NULL)
		for (s = g->sess; s != NULL; s = s->next)
			if (s->state == GS_IDLE)
				sess_close(s);
	for (s = g->sess; s != NULL; s = s->next)
		if (s->state != GS_DEAD && (sess_ready(s, ready, nready) ||
		    (s->state != GS_IDLE && now > s->deadline)))
			sess_step(s, now);
	/* Idle sessions take queued jobs; more sessions while allowed. */
	for (s = g->sess; s != NULL && g->qhead != NULL; s = s->next)
		if (s->state == GS_IDLE || (s->pjob == NULL && (s->state ==
		    GS_RETR || s->state == GS_XFER))) {
			if (s->state == GS_IDLE)
				sess_take(s);
			else
				sess_pipe(s);
			if (s->state != GS_DEAD && (rc = sess_flush(s)) != 0)
				sess_fail(s, rc, XFER_RETRY, "control "
				    "connection: %s", strerror(errno));
		}
	/*
	 * A new session for each queued job that no session logging in
	 * will take, within the budget.
	 */
	for (s = g->sess, pending = 0; s != NULL; s = s->next)
		if (s->state < GS_IDLE && s->job == NULL)
			pending++;
	for (q = g->qhead, nq = 0; q != NULL; q = q->next)
		nq++;
	while (g->qhead != NULL && nq > pending &&
	    g->nsess + others < g->cap) {
		if ((rc = sess_open(g)) == 0)
			pending++;
		else {
			nq--;
			job_end(g, queue_pop(g), rc, rc == BM_ENOMEM ?
			    XFER_PERMANENT : XFER_RETRY, "%.100s: %s", g->host,
			    rc == BM_ENET ? "cannot resolve or reach the host" :
			    bm_strerror(rc));
		}
	}
	/* Free dead sessions. */
	for (pp = &g->sess; (s = *pp) != NULL;) {
		if (s->state == GS_DEAD) {
			*pp = s->next;
			free(s);
		} else
			pp = &s->next;
	}
	/* One at a time from the front: done may cancel another. */
	while (g->nfinished > 0) {
		struct xfer_job *j = g->finished[0];

		memmove(&g->finished[0], &g->finished[1], (g->nfinished - 1) *
		    sizeof(*g->finished));
		g->nfinished--;
		(void)snprintf(j->res.effective_url,
		    sizeof(j->res.effective_url), "%s", j->url);
		done(ctx, j);
		(*ret_n)++;
	}
	return 0;
}

/* Forget job without a done call (its session, if any, is closed). */
static bool
gridftp_cancel(struct gridftp *g, struct xfer_job *job)
{
	struct gjob	*q, *prev = NULL;
	struct gsess	*s;
	size_t		 i;

	for (q = g->qhead; q != NULL; prev = q, q = q->next)
		if (q->job == job) {
			if (prev)
				prev->next = q->next;
			else
				g->qhead = q->next;
			if (g->qtail == q)
				g->qtail = prev;
			free(q);
			g->active--;
			return true;
		}
	for (prev = NULL, q = g->back; q != NULL; prev = q, q = q->next)
		if (q->job == job) {
			if (prev)
				prev->next = q->next;
			else
				g->back = q->next;
			free(q);
			return true;
		}
	for (s = g->sess; s != NULL; s = s->next)
		if ((s->job == job || s->pjob == job) && s->state != GS_DEAD) {
			g->active--;
			if (s->job == job)
				s->job = NULL;	/* a pjob goes back (sess_close) */
			else {
				/*
				 * Its RETR is sent: the session cannot go on,
				 * and the job in hand is tried again.
				 */
				s->pjob = NULL;
				job_end(g, s->job, BM_ENET, XFER_RETRY, "%s",
				    "session closed: the job pipelined behind "
				    "it was cancelled");
				s->job = NULL;
			}
			sess_close(s);
			return true;
		}
	for (i = 0; i < g->nfinished; i++)
		if (g->finished[i] == job) {
			memmove(&g->finished[i], &g->finished[i + 1],
			    (g->nfinished - i - 1) * sizeof(*g->finished));
			g->nfinished--;
			return true;
		}
	return false;
}

/*
 * End a probe: on, FEAT showed GridFTP (DCAU) with MLSD, and the engine
 * takes listings and files from now on, the probing session first; off,
 * it takes no more jobs and its idle sessions close.  A no-op on an
 * engine that is not probing.
 */
static void
gridftp_settle(struct gridftp *g, bool on)
{
	struct gsess	*s;

	if (!g->probing)
		return;
	g->probing = false;
	if (on)
		return;
	g_refuse(g);
	for (s = g->sess; s != NULL; s = s->next)
		if (s->state == GS_IDLE)
			sess_close(s);
}

/* Jobs queued or running. */
static size_t
gridftp_active(const struct gridftp *g)
{
	return g->active;
}

/* Close every session and free g (no done calls).  NULL is a no-op. */
static void
gridftp_free(struct gridftp *g)
{
	struct gsess	*s;
	struct gjob	*q;

	if (g == NULL)
		return;
	while ((s = g->sess) != NULL) {
		g->sess = s->next;
		s->job = s->pjob = NULL;
		if (s->state != GS_DEAD)
			sess_close(s);
		free(s);
	}
	while ((q = g->qhead) != NULL) {
		g->qhead = q->next;
		free(q);
	}
	while ((q = g->back) != NULL) {
		g->back = q->next;
		free(q);
	}
	free(g->finished);
	free(g->buf);
	udt_poll_free(g->up);
	if (g->udt_up)
		udt_shim_cleanup();
	free(g);
}

/* The transport: the engine, and below it the one for all other jobs. */
struct gridftp_xfer {
	struct gridftp	*g;		/* owned: the MODE E engine */
	struct xfer	*below;		/* owned: stream mode (libcurl) */
};

/* Plain ftp:// with ftp_mode = extended, data over TCP or UDT. */
static bool
gx_handles(const char *url, const struct xfer_opts *o)
{
	return o->ftp.mode_e && strncasecmp(url, "ftp://", 6) == 0;
}

static void
gx_close(void *impl)
{
	struct gridftp_xfer *gx = impl;

	if (gx == NULL)
		return;
	gridftp_free(gx->g);
	xfer_free(gx->below);
	free(gx);
}

/* xfer_ops.open: the transport below, then a probing engine. */
static int
gx_open(const struct xfer_opts *o, const char *url, void **ret,
    char *errbuf, size_t errlen)
{
	struct xfer_opts bo;
	struct gridftp_xfer *gx;
	int		 rc;

	if ((gx = calloc(1, sizeof(*gx))) == NULL)
		return BM_ENOMEM;
	/* Stream mode, validators and resumes below: TCP (libcurl). */
	bo = *o;
	bo.net = XFER_NET_TCP;
	if ((rc = xfer_open_below(&xfer_gridftp_ops, url, &bo,
	    &gx->below, errbuf, errlen)) != 0 ||
	    (rc = gridftp_new(o, true, &gx->g, errbuf, errlen)) != 0) {
		gx_close(gx);
		return rc;
	}
	*ret = gx;
	return 0;
}

/*
 * xfer_ops.ready (check-config): what gx_open() sets up, the transport
 * below over TCP and, over XFER_NET_UDT, the UDT module (loaded, not
 * started: that is the run's, gridftp_new()).
 */
static int
gx_ready(const char *url, const struct xfer_opts *o, char *errbuf,
    size_t errlen)
{
	struct xfer_opts bo = *o;
	int		 rc;

	bo.net = XFER_NET_TCP;
	if ((rc = xfer_ready_below(&xfer_gridftp_ops, url, &bo, errbuf,
	    errlen)) != 0)
		return rc;
	return o->net == XFER_NET_UDT ? udt_shim_load(errbuf, errlen) : 0;
}

/* xfer_ops.submit: to the engine if it wants job, else below. */
static int
gx_submit(void *impl, struct xfer_job *job)
{
	struct gridftp_xfer *gx = impl;

	if (gridftp_wants(gx->g, job))
		return gridftp_submit(gx->g, job);
	return gx->below->ops->submit(gx->below->impl, job);
}

/*
 * Wait beside the poll of the transport below for the engine's UDT
 * sockets (no fds).  One readable now: no wait.  UDT bytes came since
 * the last wait (data flows): at most GS_UDT_TICK_MS, as the bytes pay
 * for the wakeups.  None came: the shim's wakeup fd, armed for the
 * poll's timeout, is added to w (room kept for it), and the loop sleeps
 * until UDT data, a socket or the timeout wakes it (the tick, if the fd
 * cannot be armed).  Returns the timeout to wait.
 */
static int
gx_udt_wait(struct gridftp *g, struct xfer_wait *w, int timeout_ms)
{
	udt_sock	*r[1];
	size_t		 nr = 0;
	int		 fd;
	bool		 moved = g->udt_moved;

	g->udt_moved = false;
	if (g->up == NULL || !gridftp_udt_busy(g))
		return timeout_ms;
	(void)udt_poll_wait(g->up, 0, r, 1, &nr, NULL, 0);
	if (nr > 0 || timeout_ms == 0)
		return 0;
	if (!moved && (fd = udt_poll_arm(g->up, timeout_ms, NULL, 0)) >= 0) {
		w->fds[w->nfds].fd = fd;
		w->fds[w->nfds].events = POLLIN;
		w->fds[w->nfds++].revents = 0;
		return timeout_ms;
	}
	return timeout_ms > GS_UDT_TICK_MS || timeout_ms < 0 ?
	    GS_UDT_TICK_MS : timeout_ms;
}

/*
 * Jobs the engine handed back (sess_no_eret) go to the transport below,
 * as if submitted there; one it refuses ends here, reported by done.
 */
static void
gx_hand_back(struct gridftp_xfer *gx, xfer_done_fn done, void *ctx)
{
	struct gjob	*q;
	struct xfer_job	*j;
	int		 rc;

	while ((q = gx->g->back) != NULL) {
		gx->g->back = q->next;
		j = q->job;
		free(q);
		if ((rc = xfer_submit(gx->below, j)) != 0) {
			j->res.rc = rc;
			j->res.cls = XFER_PERMANENT;
			(void)snprintf(j->res.errmsg, sizeof(j->res.errmsg),
			    "stream mode: %s", bm_strerror(rc));
			done(ctx, j);
		}
	}
}

/*
 * xfer_ops.poll: the engine's deadlines and queued jobs first, then the
 * transport below waits on its sockets and ours (not at all when the
 * engine just finished jobs: the caller starts the next ones), then the
 * engine's sockets that are ready (every session with UDT sockets).
 */
static int
gx_poll(void *impl, int timeout_ms, struct xfer_wait *wait,
    xfer_done_fn done, void *ctx)
{
	struct gridftp_xfer *gx = impl;
	struct pollfd	 pfd[XFER_WAIT_MAX];
	struct xfer_wait w;
	size_t		 gn = 0;
	int		 rc;

	(void)wait;	/* nothing is stacked on this one */
	(void)gridftp_run(gx->g, xfer_active(gx->below), pfd, 0, done, ctx,
	    &gn);
	gx_hand_back(gx, done, ctx);
	w.fds = pfd;
	/* One entry is kept for the UDT wakeup fd. */
	w.nfds = gridftp_fds(gx->g, pfd, XFER_WAIT_MAX - 1, &timeout_ms);
	timeout_ms = gx_udt_wait(gx->g, &w, gn > 0 ? 0 : timeout_ms);
	w.others = gridftp_sessions(gx->g);
	if ((rc = gx->below->ops->poll(gx->below->impl, timeout_ms, &w, done,
	    ctx)) != 0)
		return rc;
	(void)gridftp_run(gx->g, xfer_active(gx->below), pfd, w.nfds, done,
	    ctx, &gn);
	gx_hand_back(gx, done, ctx);
	return 0;
}

static void
gx_cancel(void *impl, struct xfer_job *job)
{
	struct gridftp_xfer *gx = impl;

	if (!gridftp_cancel(gx->g, job))
		xfer_cancel(gx->below, job);
}

static size_t
gx_active(const void *impl)
{
	const struct gridftp_xfer *gx = impl;

	return gridftp_active(gx->g) + xfer_active(gx->below);
}

/* The engine waits inside the poll of the transport below. */
static void
gx_wakeup(void *impl)
{
	struct gridftp_xfer *gx = impl;

	xfer_wakeup(gx->below);
}

/* xfer_ops.hint: MODE E settles the engine; the rest goes below. */
static void
gx_hint(void *impl, enum xfer_hint h, bool on)
{
	struct gridftp_xfer *gx = impl;

	if (h == XFER_HINT_MODE_E)
		gridftp_settle(gx->g, on);
	else
		xfer_hint(gx->below, h, on);
}

const struct xfer_ops xfer_gridftp_ops = {
	.name = "gridftp",
	.handles = gx_handles,
	.ready = gx_ready,
	.open = gx_open,
	.submit = gx_submit,
	.poll = gx_poll,
	.cancel = gx_cancel,
	.active = gx_active,
	.wakeup = gx_wakeup,
	.hint = gx_hint,
	.close = gx_close,
};
