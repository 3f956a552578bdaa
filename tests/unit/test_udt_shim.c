/*
 * Unit tests for the UDT shim (agent/xfer/udt_shim.cpp): each libudt 4.11
 * workaround of udt_shim.h, on a loopback UDT pair (and a peer in a child
 * process that dies without closing).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/udt_shim.h"

#include "tap.h"

static char	 err[256];

static struct sockaddr_in
loopback(unsigned port)
{
	struct sockaddr_in	 a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static unsigned
port_of(const udt_sock *s)
{
	struct sockaddr_in	 a;
	socklen_t		 l = sizeof(a);

	if (udt_sock_name(s, (struct sockaddr *)&a, &l) != 0)
		return 0;
	return ntohs(a.sin_port);
}

/* A listener on 127.0.0.1 and a connected pair: *ret_c, *ret_a. */
static udt_sock *
pair(udt_sock **ret_c, udt_sock **ret_a)
{
	struct sockaddr_in	 a = loopback(0), peer;
	socklen_t		 pl = sizeof(peer);
	udt_sock		*l, *c, *s = NULL;
	int			 i, rc = 1;

	if (udt_sock_listen((struct sockaddr *)&a, sizeof(a), NULL, &l, NULL,
	    err, sizeof(err)) != 0)
		tap_bail(err);
	a = loopback(port_of(l));
	if (udt_sock_connect((struct sockaddr *)&a, sizeof(a), &c, err,
	    sizeof(err)) != 0)
		tap_bail(err);
	for (i = 0; i < 200 && (rc = udt_sock_accept(l, &s,
	    (struct sockaddr *)&peer, &pl, err, sizeof(err))) == 1; i++)
		(void)usleep(5000);
	if (rc != 0)
		tap_bail("accept");
	*ret_c = c;
	*ret_a = s;
	return l;
}

/* Receive exactly n bytes from s (waiting through p), -1 on error. */
static long
recv_all(udt_poll *p, udt_sock *s, char *buf, size_t n)
{
	udt_sock	*r[4];
	size_t		 got = 0, nr;
	long		 k;
	int		 i;

	for (i = 0; got < n && i < 200; i++) {
		if (udt_poll_wait(p, 50, r, 4, &nr, err, sizeof(err)) != 0)
			return -1;
		if ((k = udt_sock_recv(s, buf + got, n - got, err,
		    sizeof(err))) < 0)
			return -1;
		got += (size_t)k;
	}
	return (long)got;
}

/* epoll: a timeout is 0 with empty sets; data makes the socket ready. */
static void
test_poll(void)
{
	udt_sock	*l, *c, *a, *r[4] = { NULL, NULL, NULL, NULL };
	udt_poll	*p;
	size_t		 n = 99;
	int64_t		 t0;
	int		 rc;

	l = pair(&c, &a);
	is_int(udt_sock_accept(l, &r[0], NULL, &(socklen_t){ 0 }, err,
	    sizeof(err)), 1, "accept with nothing pending: 1, not an error");
	if (udt_poll_new(&p, err, sizeof(err)) != 0 ||
	    udt_poll_add(p, a) != 0)
		tap_bail("poll");
	t0 = clock_mono_ns();
	rc = udt_poll_wait(p, 100, r, 4, &n, err, sizeof(err));
	is_int(rc, 0, "epoll timeout is no error (4.11: 6003): %s", err);
	is_int(n, 0, "epoll timeout: the ready count is set to 0");
	ok(clock_mono_ns() - t0 >= 90000000LL, "epoll waited its timeout");
	n = 99;
	is_int(udt_poll_wait(p, 0, r, 4, &n, err, sizeof(err)), 0,
	    "epoll with no wait: no error");
	is_int(n, 0, "epoll with no wait: empty set counted 0");
	if (udt_sock_send(c, "hello", 5, err, sizeof(err)) != 0)
		tap_bail(err);
	rc = udt_poll_wait(p, 2000, r, 4, &n, err, sizeof(err));
	ok(rc == 0 && n == 1 && r[0] == a, "epoll reports the readable socket");
	udt_poll_del(p, a);
	n = 99;
	is_int(udt_poll_wait(p, 10, r, 4, &n, err, sizeof(err)), 0,
	    "epoll of an empty set: no error");
	is_int(n, 0, "epoll of an empty set: count 0");
	udt_poll_free(p);
	udt_sock_close(c);
	udt_sock_close(a);
	udt_sock_close(l);
}

/* Is fd readable within ms (poll(2))? */
static bool
readable(int fd, int ms)
{
	struct pollfd	 pf = { .fd = fd, .events = POLLIN };

	return poll(&pf, 1, ms) == 1 && (pf.revents & POLLIN);
}

/*
 * The wakeup fd (udt_poll_arm): readable once a socket is (one signal,
 * the helper disarmed), dropped by the next arm, quiet when the arm's
 * time ends, readable for data there before the arm; udt_poll_free()
 * stops the helper in a wait.
 */
static void
test_arm(void)
{
	udt_sock	*l, *c, *a, *r[4];
	udt_poll	*p;
	uint64_t	 v = 0;
	char		 buf[16];
	size_t		 n;
	long		 k = 0;
	int		 fd, fd2, i;

	l = pair(&c, &a);
	if (udt_poll_new(&p, err, sizeof(err)) != 0 ||
	    udt_poll_add(p, a) != 0)
		tap_bail("poll");
	fd = udt_poll_arm(p, 10000, err, sizeof(err));
	ok(fd >= 0, "arm: a descriptor: %s", fd < 0 ? err : "");
	ok(!readable(fd, 0), "armed, no data: not readable");
	if (udt_sock_send(c, "hello", 5, err, sizeof(err)) != 0)
		tap_bail(err);
	ok(readable(fd, 5000), "data: the descriptor turns readable");
	if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		v = 0;
	ok(v == 1, "... signalled once (%llu)", (unsigned long long)v);
	is_int(recv_all(p, a, buf, 5), 5, "the data is there to read");
	fd2 = udt_poll_arm(p, 10000, err, sizeof(err));
	is_int(fd2, fd, "the same descriptor every arm");
	ok(!readable(fd, 0), "read out and armed again: not readable");
	fd2 = udt_poll_arm(p, 50, err, sizeof(err));
	ok(!readable(fd, 400), "an arm whose time ended: no wakeup");
	if (udt_sock_send(c, "again", 5, err, sizeof(err)) != 0)
		tap_bail(err);
	while (udt_poll_wait(p, 50, r, 4, &n, err, sizeof(err)) == 0 && n == 0)
		continue;
	(void)udt_poll_arm(p, 10000, err, sizeof(err));
	ok(readable(fd, 5000), "data there before the arm: readable");
	is_int(recv_all(p, a, buf, 5), 5, "... and read");
	/*
	 * 4.11's epoll does not report a close by the peer (no event until
	 * its garbage collector drops the socket): a caller's next wake
	 * (its poll's timeout) reads it.
	 */
	udt_sock_close(c);
	for (i = 0; i < 100 && (k = udt_sock_recv(a, buf, sizeof(buf), err,
	    sizeof(err))) == 0; i++)
		(void)readable(udt_poll_arm(p, 50, err, sizeof(err)), 100);
	ok(k < 0, "a connection closed by the peer: the read says so: %s",
	    err);
	udt_poll_del(p, a);
	(void)udt_poll_arm(p, -1, err, sizeof(err));
	udt_poll_free(p);	/* the helper waits: it must stop */
	ok(1, "poll_free with the helper in a wait returns");
	udt_sock_close(a);
	udt_sock_close(l);
}

/* recv + pwrite keeps the rest of the file (recvfile2 truncates it). */
static void
test_pwrite(void)
{
	udt_sock	*l, *c, *a;
	udt_poll	*p;
	char		 path[] = "/tmp/test_udt_shimXXXXXX", buf[128], big[64];
	long		 k = 0;
	int		 fd, i;

	l = pair(&c, &a);
	if ((fd = mkstemp(path)) == -1)
		tap_bail("mkstemp");
	(void)unlink(path);
	memset(buf, 'A', 100);
	if (write(fd, buf, 100) != 100)
		tap_bail("write");
	if (udt_sock_send(c, "0123456789", 10, err, sizeof(err)) != 0)
		tap_bail(err);
	if (udt_poll_new(&p, err, sizeof(err)) != 0 ||
	    udt_poll_add(p, a) != 0)
		tap_bail("poll");
	for (i = 0; i < 100 && k == 0; i++) {
		size_t	 n;

		(void)udt_poll_wait(p, 50, &a, 1, &n, err, sizeof(err));
		k = udt_sock_recv_pwrite(a, fd, 50, 10, big, sizeof(big), err,
		    sizeof(err));
	}
	is_int(k, 10, "recv_pwrite wrote the 10 bytes: %s", err);
	is_int(lseek(fd, 0, SEEK_END), 100, "the file keeps its 100 bytes");
	memset(buf, 0, sizeof(buf));
	ok(pread(fd, buf, 100, 0) == 100 && memcmp(buf + 50, "0123456789",
	    10) == 0 && buf[49] == 'A' && buf[60] == 'A',
	    "bytes land at the offset, the rest unchanged");
	(void)close(fd);
	udt_poll_free(p);
	udt_sock_close(c);
	udt_sock_close(a);
	udt_sock_close(l);
}

/* MAXBW as int64_t; nonblocking as a bool; close without linger. */
static void
test_opts(void)
{
	udt_sock	*l, *c, *a;
	static char	 bulk[32 << 20];
	char		 b[16];
	int64_t		 t0;

	l = pair(&c, &a);
	is_int(udt_sock_set_maxbw(c, INT64_C(1) << 33), 0, "set MAXBW 8 GiB/s");
	is_int(udt_sock_maxbw(c), INT64_C(1) << 33,
	    "MAXBW reads back as the int64_t set (above 32 bits)");
	is_int(udt_sock_set_maxbw(c, -1), 0, "MAXBW -1 (no cap)");
	is_int(udt_sock_maxbw(c), -1, "MAXBW reads back -1");
	is_int(udt_sock_set_nonblock(c, true), 0, "nonblocking on");
	t0 = clock_mono_ns();
	is_int(udt_sock_recv(c, b, sizeof(b), err, sizeof(err)), 0,
	    "nonblocking recv with nothing there returns 0");
	ok(clock_mono_ns() - t0 < 500000000LL, "... at once");
	ok(udt_sock_linger_off(c) && udt_sock_linger_off(a) &&
	    udt_sock_linger_off(l), "linger is off on every shim socket");
	/* Fill the send buffer (nobody reads a), then close blocking. */
	(void)udt_sock_send(c, bulk, sizeof(bulk), err, sizeof(err));
	(void)udt_sock_set_nonblock(c, false);
	t0 = clock_mono_ns();
	udt_sock_close(c);
	ok(clock_mono_ns() - t0 < 2000000000LL, "close with unsent data "
	    "returns at once (4.11 lingers up to 180 s): %lld ms",
	    (long long)((clock_mono_ns() - t0) / 1000000));
	udt_sock_close(a);
	udt_sock_close(l);
}

/* A UDP buffer above net.core.rmem_max is granted smaller, and said so. */
static void
test_bufs(void)
{
	struct sockaddr_in	 a = loopback(0);
	struct udt_bufs		 want, got;
	udt_sock		*l;
	unsigned long		 rmax = 0;
	FILE			*fp;

	if ((fp = fopen("/proc/sys/net/core/rmem_max", "re")) != NULL) {
		if (fscanf(fp, "%lu", &rmax) != 1)
			rmax = 0;
		(void)fclose(fp);
	}
	if (rmax == 0)
		tap_bail("net.core.rmem_max unreadable");
	memset(&want, 0, sizeof(want));
	want.udp_rcvbuf = rmax * 2;
	want.udp_sndbuf = 65536;
	want.udt_rcvbuf = 8 << 20;
	is_int(udt_sock_listen((struct sockaddr *)&a, sizeof(a), &want, &l,
	    &got, err, sizeof(err)), 0, "listen with big buffers: %s", err);
	ok(got.udp_rcvbuf < want.udp_rcvbuf, "UDP rcvbuf above rmem_max (%lu) "
	    "reported short: granted %zu of %zu", rmax, got.udp_rcvbuf,
	    want.udp_rcvbuf);
	ok(got.udp_sndbuf >= 65536, "UDP sndbuf within wmem_max granted: %zu",
	    got.udp_sndbuf);
	ok(got.udt_rcvbuf > 0, "UDT rcvbuf reported: %zu", got.udt_rcvbuf);
	udt_sock_close(l);
	want.udp_rcvbuf = 65536;
	(void)udt_sock_listen((struct sockaddr *)&a, sizeof(a), &want, &l, &got,
	    err, sizeof(err));
	ok(got.udp_rcvbuf >= 65536, "UDP rcvbuf within rmem_max granted: %zu",
	    got.udp_rcvbuf);
	udt_sock_close(l);
}

/*
 * A peer killed (no close packet): libudt still calls the socket
 * connected, reads give nothing, and the idle time shows the stall.
 */
static void
test_dead_peer(int pfd, pid_t child)
{
	struct sockaddr_in	 a = loopback(0), peer;
	socklen_t		 pl = sizeof(peer);
	udt_sock		*l, *s = NULL, *r;
	udt_poll		*p;
	char			 buf[16];
	unsigned		 port;
	size_t			 n;
	int			 i, rc = 1, st;

	if (udt_sock_listen((struct sockaddr *)&a, sizeof(a), NULL, &l, NULL,
	    err, sizeof(err)) != 0)
		tap_bail(err);
	port = port_of(l);
	if (write(pfd, &port, sizeof(port)) != (ssize_t)sizeof(port))
		tap_bail("pipe");
	for (i = 0; i < 400 && (rc = udt_sock_accept(l, &s,
	    (struct sockaddr *)&peer, &pl, err, sizeof(err))) == 1; i++)
		(void)usleep(5000);
	if (rc != 0 || udt_poll_new(&p, err, sizeof(err)) != 0 ||
	    udt_poll_add(p, s) != 0)
		tap_bail("accept from the child");
	is_int(recv_all(p, s, buf, 5), 5, "5 bytes from the child");
	(void)waitpid(child, &st, 0);
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the child was killed");
	ok(udt_sock_idle_ms(s) < 1000, "idle time after data is short");
	(void)udt_poll_wait(p, 400, &r, 1, &n, err, sizeof(err));
	is_int(udt_sock_recv(s, buf, sizeof(buf), err, sizeof(err)), 0,
	    "a read from the dead peer gives nothing (no error yet)");
	ok(udt_sock_connected(s), "libudt still calls it connected");
	ok(udt_sock_idle_ms(s) >= 400, "idle time shows the stall: %lld ms",
	    (long long)udt_sock_idle_ms(s));
	udt_poll_free(p);
	udt_sock_close(s);
	udt_sock_close(l);
}

/* The child: connect to the port the parent writes, send, die. */
/*
 * 4.11 reports a failed system call (here epoll_create with no fd left)
 * as "Unknown error: .": the shim names the errno instead.
 */
static void
test_syserr(void)
{
	struct rlimit	 old, low;
	udt_poll	*p = NULL;
	int		 fd, rc;

	if (getrlimit(RLIMIT_NOFILE, &old) == -1 ||
	    (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1)
		tap_bail("getrlimit");
	(void)close(fd);
	/* Every descriptor below fd is taken: the next one fails. */
	low = old;
	low.rlim_cur = (rlim_t)fd;
	if (setrlimit(RLIMIT_NOFILE, &low) == -1)
		tap_bail("setrlimit");
	err[0] = '\0';
	rc = udt_poll_new(&p, err, sizeof(err));
	(void)setrlimit(RLIMIT_NOFILE, &old);
	is_int(rc, BM_ENET, "poll_new without a descriptor left fails");
	is_str(err, "UDT epoll_create: Too many open files",
	    "... naming the errno, not 4.11's \"Unknown error: .\"");
	if (rc == 0)
		udt_poll_free(p);
}

static void __attribute__((noreturn))
child_main(int pfd)
{
	struct sockaddr_in	 a;
	unsigned		 port;
	udt_sock		*c;

	if (read(pfd, &port, sizeof(port)) != (ssize_t)sizeof(port))
		_exit(2);
	a = loopback(port);
	if (udt_shim_startup(err, sizeof(err)) != 0 ||
	    udt_sock_connect((struct sockaddr *)&a, sizeof(a), &c, err,
	    sizeof(err)) != 0 || udt_sock_send(c, "abcde", 5, err,
	    sizeof(err)) != 0)
		_exit(3);
	(void)usleep(200000);	/* the parent reads them first */
	(void)raise(SIGKILL);
	_exit(4);
}

/*
 * Without its module, startup fails with the path and dlerror's text,
 * and nothing else runs; the module is loaded only by a later startup.
 */
static void
test_no_module(void)
{
	struct sockaddr_in	 a = loopback(9);
	udt_sock		*c = NULL;
	udt_poll		*p = NULL;
	char			 good[4096];

	(void)snprintf(good, sizeof(good), "%s", getenv("BM_UDT_MODULE"));
	(void)setenv("BM_UDT_MODULE", "/nonexistent/libbiomirror-udt.so", 1);
	is_int(udt_shim_startup(err, sizeof(err)), BM_EINVAL,
	    "no module: startup fails");
	ok(strncmp(err, "UDT module /nonexistent/libbiomirror-udt.so: ",
	    45) == 0 && strstr(err, "No such file") != NULL,
	    "no module: the path and the reason: %s", err);
	is_int(udt_sock_connect((struct sockaddr *)&a, sizeof(a), &c, err,
	    sizeof(err)), BM_ENET, "no module: connect refused");
	is_int(udt_poll_new(&p, err, sizeof(err)), BM_ENET,
	    "no module: poll_new refused");
	udt_shim_cleanup();
	(void)setenv("BM_UDT_MODULE", good, 1);
}

int
main(void)
{
	int	 pp[2];
	pid_t	 child;

	/* The build tree's module (run from the top directory). */
	(void)setenv("BM_UDT_MODULE", "./libbiomirror-udt.so", 0);
	/* Fork before libudt starts its threads in this process. */
	if (pipe(pp) == -1 || (child = fork()) == -1)
		tap_bail("fork");
	if (child == 0) {
		(void)close(pp[1]);
		child_main(pp[0]);
	}
	(void)close(pp[0]);
	test_no_module();
	is_int(udt_shim_startup(err, sizeof(err)), 0, "startup: %s", err);
	test_dead_peer(pp[1], child);
	test_poll();
	test_arm();
	test_pwrite();
	test_opts();
	test_bufs();
	test_syserr();
	udt_shim_cleanup();
	return done_testing();
}
