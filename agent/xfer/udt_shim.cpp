/*
 * The UDT shim (udt_shim.h): extern "C" entry points over libudt 4.11.
 * Every entry point catches every exception (libudt throws
 * CUDTException inside and std::bad_alloc from its sets) and turns it
 * into a BM_E* code; nothing here logs.  A handle owns one UDTSOCKET; a
 * listener also names the UDP socket it handed to UDT::bind2 (UDT owns
 * and closes it), so that the kernel's granted buffer sizes can be read.
 * Built as the module libbiomirror-udt.so (udt_shim_int.h), loaded by
 * udt_load.c only when UDT is used.
 */
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <set>

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <udt/udt.h>

#include "biomirror/error.h"
#include "biomirror/udt_shim.h"
#include "udt_shim_int.h"

struct udt_sock {
	UDTSOCKET	 u;		/* owned */
	int		 udpfd;		/* borrowed by UDT: a listener's UDP
					   socket, -1 if none */
	int64_t		 last_ns;	/* monotonic: last byte received */
};

/*
 * The wakeup (udt_poll_arm): a helper thread, started by the first arm,
 * waits in UDT's epoll while armed and then writes evfd.  mu guards
 * armed, until_ns, stop and failed; socks is the caller's thread's only.
 */
struct udt_poll {
	int		 eid;		/* owned: UDT epoll id */
	std::map<UDTSOCKET, udt_sock *> socks; /* borrowed handles */
	int		 evfd;		/* owned: eventfd, -1 before the
					   first arm */
	pthread_t	 th;		/* the helper, when th_up */
	bool		 th_up;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;		/* armed or stop set */
	bool		 armed;		/* the helper is to wait */
	int64_t		 until_ns;	/* monotonic end of the arm, -1 none */
	bool		 stop;		/* udt_poll_free() */
	bool		 failed;	/* the helper's epoll_wait failed */
};

static int64_t
mono_ns(void)
{
	struct timespec	 ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * "what: libudt's last error" into errbuf; returns rc.  A system call's
 * failure that 4.11 files as an unknown error (code -1000) reads
 * "Unknown error: ." (its GNU strerror_r use drops the text): the
 * errno it left is named instead.
 */
static int
fail(int rc, char *errbuf, size_t errlen, const char *what)
{
	int	 saved = errno;

	if (errbuf == NULL || errlen == 0)
		return rc;
	if (UDT::getlasterror_code() < 0 && saved != 0)
		(void)snprintf(errbuf, errlen, "%s: %s", what,
		    strerror(saved));
	else
		(void)snprintf(errbuf, errlen, "%s: %s", what,
		    UDT::getlasterror_desc());
	return rc;
}

static int
fail_msg(int rc, char *errbuf, size_t errlen, const char *msg)
{
	if (errbuf != NULL && errlen > 0)
		(void)snprintf(errbuf, errlen, "%s", msg);
	return rc;
}

/* Linger off (4.11's default waits up to 180 s in close). */
static void
linger_off(UDTSOCKET u)
{
	struct linger	 l;

	l.l_onoff = 0;
	l.l_linger = 0;
	(void)UDT::setsockopt(u, 0, UDT_LINGER, &l, sizeof(l));
}

static udt_sock *
sock_wrap(UDTSOCKET u, int udpfd)
{
	udt_sock	*s = new (std::nothrow) udt_sock;

	if (s == NULL)
		return NULL;
	s->u = u;
	s->udpfd = udpfd;
	s->last_ns = mono_ns();
	return s;
}

extern "C" int
udt_shim_startup(char *errbuf, size_t errlen)
{
	try {
		if (UDT::startup() == UDT::ERROR)
			return fail(BM_ENET, errbuf, errlen, "UDT startup");
		return 0;
	} catch (...) {
		return fail_msg(BM_ENET, errbuf, errlen, "UDT startup failed");
	}
}

extern "C" void
udt_shim_cleanup(void)
{
	try {
		(void)UDT::cleanup();
	} catch (...) {
		/* nothing to report: the process goes on without UDT */
	}
}

/* The kernel's buffer size of fd for opt, halved (socket(7)). */
static size_t
granted(int fd, int opt)
{
	int		 v = 0;
	socklen_t	 l = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, opt, &v, &l) == -1 || v < 0)
		return 0;
	return (size_t)v / 2;
}

/* The UDP socket for a listener, bound to sa; -1 with errno set. */
static int
udp_socket(const struct sockaddr *sa, socklen_t salen)
{
	int	 fd, e;

	fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (bind(fd, sa, salen) == -1) {
		e = errno;
		(void)close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Apply want's sizes to u before it binds (0: libudt's default). */
static void
set_bufs(UDTSOCKET u, const struct udt_bufs *want)
{
	int	 v;

	if (want == NULL)
		return;
	if (want->udt_rcvbuf > 0 && want->udt_rcvbuf <= INT32_MAX) {
		v = (int)want->udt_rcvbuf;
		(void)UDT::setsockopt(u, 0, UDT_RCVBUF, &v, sizeof(v));
	}
	if (want->udp_rcvbuf > 0 && want->udp_rcvbuf <= INT32_MAX) {
		v = (int)want->udp_rcvbuf;
		(void)UDT::setsockopt(u, 0, UDP_RCVBUF, &v, sizeof(v));
	}
	if (want->udp_sndbuf > 0 && want->udp_sndbuf <= INT32_MAX) {
		v = (int)want->udp_sndbuf;
		(void)UDT::setsockopt(u, 0, UDP_SNDBUF, &v, sizeof(v));
	}
}

static int
sock_listen(const struct sockaddr *sa, socklen_t salen,
    const struct udt_bufs *want, udt_sock **ret, struct udt_bufs *ret_got,
    char *errbuf, size_t errlen)
{
	UDTSOCKET	 u;
	udt_sock	*s;
	int		 fd, v = 0, l = sizeof(v);
	bool		 no = false;

	u = UDT::socket(sa->sa_family, SOCK_STREAM, 0);
	if (u == UDT::INVALID_SOCK)
		return fail(BM_ENET, errbuf, errlen, "UDT socket");
	linger_off(u);
	(void)UDT::setsockopt(u, 0, UDT_RCVSYN, &no, sizeof(no));
	(void)UDT::setsockopt(u, 0, UDT_SNDSYN, &no, sizeof(no));
	set_bufs(u, want);
	if ((fd = udp_socket(sa, salen)) == -1) {
		(void)UDT::close(u);
		if (errbuf != NULL && errlen > 0)
			(void)snprintf(errbuf, errlen, "UDP socket: %s",
			    strerror(errno));
		return BM_ENET;
	}
	/* UDT owns fd from here, and sets want's sizes on it. */
	if (UDT::bind2(u, fd) == UDT::ERROR) {
		(void)close(fd);
		(void)UDT::close(u);
		return fail(BM_ENET, errbuf, errlen, "UDT bind");
	}
	if (UDT::listen(u, 64) == UDT::ERROR) {
		(void)UDT::close(u);
		return fail(BM_ENET, errbuf, errlen, "UDT listen");
	}
	if ((s = sock_wrap(u, fd)) == NULL) {
		(void)UDT::close(u);
		return fail_msg(BM_ENOMEM, errbuf, errlen, "out of memory");
	}
	if (ret_got != NULL) {
		ret_got->udp_rcvbuf = granted(fd, SO_RCVBUF);
		ret_got->udp_sndbuf = granted(fd, SO_SNDBUF);
		ret_got->udt_rcvbuf = UDT::getsockopt(u, 0, UDT_RCVBUF, &v,
		    &l) == 0 && v > 0 ? (size_t)v : 0;
	}
	*ret = s;
	return 0;
}

extern "C" int
udt_sock_listen(const struct sockaddr *sa, socklen_t salen,
    const struct udt_bufs *want, udt_sock **ret, struct udt_bufs *ret_got,
    char *errbuf, size_t errlen)
{
	try {
		return sock_listen(sa, salen, want, ret, ret_got, errbuf,
		    errlen);
	} catch (...) {
		return fail_msg(BM_ENET, errbuf, errlen, "UDT listen failed");
	}
}

extern "C" int
udt_sock_name(const udt_sock *s, struct sockaddr *ss, socklen_t *sslen)
{
	int	 l = (int)*sslen;

	try {
		if (UDT::getsockname(s->u, ss, &l) == UDT::ERROR)
			return BM_ENET;
		*sslen = (socklen_t)l;
		return 0;
	} catch (...) {
		return BM_ENET;
	}
}

extern "C" int
udt_sock_accept(udt_sock *l, udt_sock **ret, struct sockaddr *peer,
    socklen_t *peerlen, char *errbuf, size_t errlen)
{
	UDTSOCKET	 u;
	udt_sock	*s;
	int		 pl = (int)*peerlen;
	bool		 no = false;

	try {
		u = UDT::accept(l->u, peer, &pl);
		if (u == UDT::INVALID_SOCK) {
			if (UDT::getlasterror_code() ==
			    CUDTException::EASYNCRCV)
				return 1;
			return fail(BM_ENET, errbuf, errlen, "UDT accept");
		}
		linger_off(u);
		(void)UDT::setsockopt(u, 0, UDT_RCVSYN, &no, sizeof(no));
		(void)UDT::setsockopt(u, 0, UDT_SNDSYN, &no, sizeof(no));
		if ((s = sock_wrap(u, -1)) == NULL) {
			(void)UDT::close(u);
			return fail_msg(BM_ENOMEM, errbuf, errlen,
			    "out of memory");
		}
		*peerlen = (socklen_t)pl;
		*ret = s;
		return 0;
	} catch (...) {
		return fail_msg(BM_ENET, errbuf, errlen, "UDT accept failed");
	}
}

extern "C" int
udt_sock_connect(const struct sockaddr *sa, socklen_t salen, udt_sock **ret,
    char *errbuf, size_t errlen)
{
	UDTSOCKET	 u;
	udt_sock	*s;

	try {
		u = UDT::socket(sa->sa_family, SOCK_STREAM, 0);
		if (u == UDT::INVALID_SOCK)
			return fail(BM_ENET, errbuf, errlen, "UDT socket");
		linger_off(u);
		if (UDT::connect(u, sa, (int)salen) == UDT::ERROR) {
			(void)fail(BM_ENET, errbuf, errlen, "UDT connect");
			(void)UDT::close(u);
			return BM_ENET;
		}
		if ((s = sock_wrap(u, -1)) == NULL) {
			(void)UDT::close(u);
			return fail_msg(BM_ENOMEM, errbuf, errlen,
			    "out of memory");
		}
		*ret = s;
		return 0;
	} catch (...) {
		return fail_msg(BM_ENET, errbuf, errlen, "UDT connect failed");
	}
}

extern "C" long
udt_sock_recv(udt_sock *s, void *buf, size_t len, char *errbuf,
    size_t errlen)
{
	int	 n;

	try {
		if (len > INT32_MAX)
			len = INT32_MAX;
		n = UDT::recv(s->u, (char *)buf, (int)len, 0);
		if (n == UDT::ERROR) {
			if (UDT::getlasterror_code() ==
			    CUDTException::EASYNCRCV)
				return 0;
			return fail(BM_ENET, errbuf, errlen, "UDT recv");
		}
		if (n == 0)
			return fail_msg(BM_ENET, errbuf, errlen,
			    "UDT recv: connection closed");
		s->last_ns = mono_ns();
		return n;
	} catch (...) {
		return fail_msg(BM_ENET, errbuf, errlen, "UDT recv failed");
	}
}

extern "C" long
udt_sock_recv_pwrite(udt_sock *s, int fd, uint64_t off, size_t len,
    void *buf, size_t buflen, char *errbuf, size_t errlen)
{
	long	 n;
	ssize_t	 w;
	size_t	 done = 0;

	if (len > buflen)
		len = buflen;
	if ((n = udt_sock_recv(s, buf, len, errbuf, errlen)) <= 0)
		return n;
	while (done < (size_t)n) {
		w = pwrite(fd, (const char *)buf + done, (size_t)n - done,
		    (off_t)(off + done));
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (errbuf != NULL && errlen > 0)
				(void)snprintf(errbuf, errlen, "pwrite: %s",
				    w == 0 ? "no progress" : strerror(errno));
			return BM_EIO;
		}
		done += (size_t)w;
	}
	return n;
}

extern "C" int
udt_sock_send(udt_sock *s, const void *buf, size_t len, char *errbuf,
    size_t errlen)
{
	const char	*p = (const char *)buf;
	int		 n, k;

	try {
		while (len > 0) {
			k = len > (1 << 20) ? (1 << 20) : (int)len;
			if ((n = UDT::send(s->u, p, k, 0)) == UDT::ERROR)
				return fail(BM_ENET, errbuf, errlen,
				    "UDT send");
			p += n;
			len -= (size_t)n;
		}
		return 0;
	} catch (...) {
		return fail_msg(BM_ENET, errbuf, errlen, "UDT send failed");
	}
}

extern "C" int
udt_sock_set_maxbw(udt_sock *s, int64_t bps)
{
	try {
		/* 4.11 reads 8 bytes, whatever optlen says. */
		return UDT::setsockopt(s->u, 0, UDT_MAXBW, &bps,
		    sizeof(bps)) == UDT::ERROR ? BM_ENET : 0;
	} catch (...) {
		return BM_ENET;
	}
}

extern "C" int64_t
udt_sock_maxbw(const udt_sock *s)
{
	int64_t	 v = 0;
	int	 l = sizeof(v);

	try {
		if (UDT::getsockopt(s->u, 0, UDT_MAXBW, &v, &l) == UDT::ERROR)
			return 0;
		return v;
	} catch (...) {
		return 0;
	}
}

extern "C" int
udt_sock_set_nonblock(udt_sock *s, bool on)
{
	bool	 syn = !on;	/* a C++ bool: 4.11 reads one byte */

	try {
		if (UDT::setsockopt(s->u, 0, UDT_RCVSYN, &syn,
		    sizeof(syn)) == UDT::ERROR ||
		    UDT::setsockopt(s->u, 0, UDT_SNDSYN, &syn,
		    sizeof(syn)) == UDT::ERROR)
			return BM_ENET;
		return 0;
	} catch (...) {
		return BM_ENET;
	}
}

extern "C" bool
udt_sock_linger_off(const udt_sock *s)
{
	struct linger	 l;
	int		 n = sizeof(l);

	try {
		memset(&l, 0, sizeof(l));
		return UDT::getsockopt(s->u, 0, UDT_LINGER, &l, &n) == 0 &&
		    l.l_onoff == 0;
	} catch (...) {
		return false;
	}
}

extern "C" int64_t
udt_sock_idle_ms(const udt_sock *s)
{
	return (mono_ns() - s->last_ns) / 1000000;
}

extern "C" bool
udt_sock_connected(const udt_sock *s)
{
	try {
		return UDT::getsockstate(s->u) == CONNECTED;
	} catch (...) {
		return false;
	}
}

extern "C" void
udt_sock_close(udt_sock *s)
{
	if (s == NULL)
		return;
	try {
		linger_off(s->u);
		(void)UDT::close(s->u);
	} catch (...) {
		/* the handle goes anyway */
	}
	delete s;
}

extern "C" int
udt_poll_new(udt_poll **ret, char *errbuf, size_t errlen)
{
	udt_poll	*p;

	try {
		if ((p = new (std::nothrow) udt_poll) == NULL)
			return fail_msg(BM_ENOMEM, errbuf, errlen,
			    "out of memory");
		p->evfd = -1;
		p->th_up = p->armed = p->stop = p->failed = false;
		p->until_ns = -1;
		(void)pthread_mutex_init(&p->mu, NULL);
		(void)pthread_cond_init(&p->cv, NULL);
		if ((p->eid = UDT::epoll_create()) < 0) {
			(void)pthread_mutex_destroy(&p->mu);
			(void)pthread_cond_destroy(&p->cv);
			delete p;
			return fail(BM_ENET, errbuf, errlen,
			    "UDT epoll_create");
		}
		*ret = p;
		return 0;
	} catch (...) {
		return fail_msg(BM_ENET, errbuf, errlen, "UDT epoll failed");
	}
}

extern "C" int
udt_poll_add(udt_poll *p, udt_sock *s)
{
	int	 ev = UDT_EPOLL_IN | UDT_EPOLL_ERR;

	try {
		p->socks[s->u] = s;
		if (UDT::epoll_add_usock(p->eid, s->u, &ev) == UDT::ERROR) {
			p->socks.erase(s->u);
			return BM_ENET;
		}
		return 0;
	} catch (const std::bad_alloc &) {
		return BM_ENOMEM;
	} catch (...) {
		return BM_ENET;
	}
}

extern "C" void
udt_poll_del(udt_poll *p, udt_sock *s)
{
	try {
		if (p->socks.erase(s->u) > 0)
			(void)UDT::epoll_remove_usock(p->eid, s->u);
	} catch (...) {
		/* not in the set any more either way */
	}
}

static int
poll_wait(udt_poll *p, int timeout_ms, udt_sock **ready, size_t max,
    size_t *ret_n, char *errbuf, size_t errlen)
{
	std::set<UDTSOCKET> rd;
	std::set<UDTSOCKET>::const_iterator it;
	std::map<UDTSOCKET, udt_sock *>::const_iterator m;
	size_t		 n = 0;

	*ret_n = 0;
	if (p->socks.empty())
		return 0;
	/* Broken sockets come in the read set, as a read reports them. */
	if (UDT::epoll_wait(p->eid, &rd, NULL, timeout_ms) < 0) {
		if (UDT::getlasterror_code() == CUDTException::ETIMEOUT)
			return 0;	/* 4.11: a timeout is error 6003 */
		return fail(BM_ENET, errbuf, errlen, "UDT epoll_wait");
	}
	for (it = rd.begin(); it != rd.end() && n < max; ++it)
		if ((m = p->socks.find(*it)) != p->socks.end())
			ready[n++] = m->second;
	*ret_n = n;
	return 0;
}

extern "C" int
udt_poll_wait(udt_poll *p, int timeout_ms, udt_sock **ready, size_t max,
    size_t *ret_n, char *errbuf, size_t errlen)
{
	try {
		return poll_wait(p, timeout_ms, ready, max, ret_n, errbuf,
		    errlen);
	} catch (const std::bad_alloc &) {
		*ret_n = 0;
		return fail_msg(BM_ENOMEM, errbuf, errlen, "out of memory");
	} catch (...) {
		*ret_n = 0;
		return fail_msg(BM_ENET, errbuf, errlen,
		    "UDT epoll_wait failed");
	}
}

/*
 * The helper of udt_poll_arm(): while armed, wait in UDT's epoll in
 * slices of at most 1 s (4.11 refuses an endless wait on an empty set as
 * a deadlock); a readable socket (or a failed wait) disarms and writes
 * evfd; the end of the arm's time disarms it quietly.  udt_poll_free()
 * stops it: stop set, and the epoll id released under a wait.
 */
static void *
poll_helper(void *arg)
{
	udt_poll	*p = (udt_poll *)arg;
	std::set<UDTSOCKET> rd;
	uint64_t	 one = 1;
	int64_t		 ms;
	int		 n;
	bool		 timeout;

	(void)pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->armed && !p->stop)
			(void)pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		ms = p->until_ns < 0 ? 1000 : (p->until_ns - mono_ns()) /
		    1000000;
		if (ms <= 0) {
			p->armed = false;
			continue;
		}
		(void)pthread_mutex_unlock(&p->mu);
		try {
			n = UDT::epoll_wait(p->eid, &rd, NULL, ms > 1000 ?
			    1000 : ms);
			timeout = n < 0 && UDT::getlasterror_code() ==
			    CUDTException::ETIMEOUT;
		} catch (...) {
			n = -1;
			timeout = false;
		}
		(void)pthread_mutex_lock(&p->mu);
		if (p->stop || !p->armed || n == 0 || timeout)
			continue;
		p->armed = false;
		p->failed = n < 0;
		while (write(p->evfd, &one, sizeof(one)) == -1 &&
		    errno == EINTR)
			continue;
	}
	(void)pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Start p's helper with every signal blocked (they are the caller's). */
static int
helper_start(udt_poll *p, char *errbuf, size_t errlen)
{
	sigset_t	 all, old;
	int		 rc;

	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&p->th, NULL, poll_helper, p);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		if (errbuf != NULL && errlen > 0)
			(void)snprintf(errbuf, errlen, "UDT wakeup thread: %s",
			    strerror(rc));
		return rc == EAGAIN ? BM_ENOMEM : BM_ENET;
	}
	p->th_up = true;
	return 0;
}

extern "C" int
udt_poll_arm(udt_poll *p, int timeout_ms, char *errbuf, size_t errlen)
{
	uint64_t	 v;
	int		 rc;
	bool		 failed;

	if (p->evfd == -1 && (p->evfd = eventfd(0, EFD_NONBLOCK |
	    EFD_CLOEXEC)) == -1) {
		if (errbuf != NULL && errlen > 0)
			(void)snprintf(errbuf, errlen, "eventfd: %s",
			    strerror(errno));
		return errno == ENOMEM ? BM_ENOMEM : BM_ENET;
	}
	if (!p->th_up && (rc = helper_start(p, errbuf, errlen)) != 0)
		return rc;
	/* A wakeup already taken (or not needed) is dropped. */
	while (read(p->evfd, &v, sizeof(v)) == -1 && errno == EINTR)
		continue;
	(void)pthread_mutex_lock(&p->mu);
	failed = p->failed;
	p->failed = false;
	if (!failed) {
		p->armed = true;
		p->until_ns = timeout_ms < 0 ? -1 : mono_ns() +
		    (int64_t)timeout_ms * 1000000;
		(void)pthread_cond_signal(&p->cv);
	}
	(void)pthread_mutex_unlock(&p->mu);
	if (failed)
		return fail_msg(BM_ENET, errbuf, errlen,
		    "UDT epoll_wait failed (wakeup thread)");
	return p->evfd;
}

extern "C" void
udt_poll_free(udt_poll *p)
{
	if (p == NULL)
		return;
	(void)pthread_mutex_lock(&p->mu);
	p->stop = true;
	(void)pthread_cond_signal(&p->cv);
	(void)pthread_mutex_unlock(&p->mu);
	try {
		/* A wait in the helper fails within 10 ms (4.11's tick). */
		(void)UDT::epoll_release(p->eid);
	} catch (...) {
		/* the id is gone with libudt's cleanup */
	}
	if (p->th_up)
		(void)pthread_join(p->th, NULL);
	if (p->evfd != -1)
		(void)close(p->evfd);
	(void)pthread_mutex_destroy(&p->mu);
	(void)pthread_cond_destroy(&p->cv);
	delete p;
}

/* The module's table (udt_shim_int.h): its only exported symbol. */
static const struct udt_shim_ops shim_ops = {
	UDT_SHIM_ABI,
	udt_shim_startup,
	udt_shim_cleanup,
	udt_sock_listen,
	udt_sock_name,
	udt_sock_accept,
	udt_sock_connect,
	udt_sock_recv,
	udt_sock_recv_pwrite,
	udt_sock_send,
	udt_sock_set_maxbw,
	udt_sock_maxbw,
	udt_sock_set_nonblock,
	udt_sock_linger_off,
	udt_sock_idle_ms,
	udt_sock_connected,
	udt_sock_close,
	udt_poll_new,
	udt_poll_add,
	udt_poll_del,
	udt_poll_wait,
	udt_poll_arm,
	udt_poll_free,
};

extern "C" __attribute__((visibility("default"))) const struct udt_shim_ops *
udt_shim_module(void)
{
	return &shim_ops;
}
