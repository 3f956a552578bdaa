/*
 * tests/bench/tcpcc.c: LD_PRELOAD library that sets the TCP congestion
 * control of every TCP socket a process creates, for the benchmark's
 * servers (tests/bench/wan.sh): on a pull the server is the sender, and
 * its congestion control governs the rate.  The per-namespace default
 * (net.ipv4.tcp_congestion_control) cannot be changed on this machine, but
 * TCP_CONGESTION per socket can (tcp(7); root may pick any algorithm listed
 * in net.ipv4.tcp_available_congestion_control).
 *
 *	BM_TCP_CC=cubic LD_PRELOAD=.../tcpcc.so nginx ...
 *
 * socket() is wrapped: after the real call, an AF_INET/AF_INET6
 * SOCK_STREAM socket gets setsockopt(IPPROTO_TCP, TCP_CONGESTION, name).
 * listen() is wrapped too, for listeners a process inherited rather than
 * created.  Accepted sockets inherit the algorithm from their listener
 * (the kernel keeps a setsockopt choice in tcp_ca_openreq_child), so
 * nothing else needs hooking.  The name is read once, at load, because
 * servers such as nginx clear the environment of their workers.  A
 * failure leaves the socket as it is and is appended once per process to
 * the file named by BM_TCP_CC_LOG, if set: never to stderr, which a
 * server may have pointed at a client's socket (vsftpd does).  Without
 * CAP_NET_ADMIN the kernel only accepts the algorithms listed in
 * net.ipv4.tcp_allowed_congestion_control, so sockets that a server
 * creates after dropping privileges (vsftpd's PASV listener, an anonymous
 * GridFTP session) may keep the default; wan.sh also sets the algorithm
 * on the server namespace's route (ip route ... congctl), which covers
 * those, and records what `ss -ti` shows for every cell.
 * Unset or empty BM_TCP_CC: the library does nothing.
 *
 * Build: cc -O2 -shared -fPIC -o tcpcc.so tcpcc.c -ldl
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tcpcc_name[32];		/* algorithm, "" = do nothing */
static char tcpcc_log[256];		/* BM_TCP_CC_LOG, "" = none */
static int tcpcc_warned;		/* a failure was reported */
static int (*real_socket)(int, int, int);
static int (*real_listen)(int, int);

static void tcpcc_init(void) __attribute__((constructor));

static void
tcpcc_init(void)
{
	const char *s = getenv("BM_TCP_CC");

	if (s != NULL && strlen(s) < sizeof(tcpcc_name))
		snprintf(tcpcc_name, sizeof(tcpcc_name), "%s", s);
	s = getenv("BM_TCP_CC_LOG");
	if (s != NULL && strlen(s) < sizeof(tcpcc_log))
		snprintf(tcpcc_log, sizeof(tcpcc_log), "%s", s);
	real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	real_listen = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
}

static void
tcpcc_apply(int fd)
{
	int saved = errno, lfd, n;
	char msg[160];

	if (tcpcc_name[0] == '\0')
		return;
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, tcpcc_name,
	    (socklen_t)strlen(tcpcc_name)) == -1 && !tcpcc_warned) {
		tcpcc_warned = 1;
		n = snprintf(msg, sizeof(msg), "tcpcc: pid %ld uid %ld: "
		    "TCP_CONGESTION %s: %s\n", (long)getpid(), (long)getuid(),
		    tcpcc_name, strerror(errno));
		if (tcpcc_log[0] != '\0' && n > 0 &&
		    (lfd = open(tcpcc_log, O_WRONLY | O_APPEND | O_CREAT |
		    O_CLOEXEC, 0666)) != -1) {
			if (write(lfd, msg, (size_t)n) < 0)
				tcpcc_warned = 1;
			close(lfd);
		}
	}
	errno = saved;
}

int socket(int, int, int);
int listen(int, int);

int
socket(int domain, int type, int protocol)
{
	int fd;

	if (real_socket == NULL)
		tcpcc_init();
	fd = real_socket(domain, type, protocol);
	if (fd >= 0 && (domain == AF_INET || domain == AF_INET6) &&
	    (type & 0xf) == SOCK_STREAM &&
	    (protocol == 0 || protocol == IPPROTO_TCP))
		tcpcc_apply(fd);
	return fd;
}

int
listen(int fd, int backlog)
{
	char cur[32];
	socklen_t len = sizeof(cur);

	if (real_listen == NULL)
		tcpcc_init();
	/* Only TCP sockets answer TCP_CONGESTION; leave others alone. */
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cur, &len) == 0 &&
	    strncmp(cur, tcpcc_name, sizeof(cur)) != 0)
		tcpcc_apply(fd);
	return real_listen(fd, backlog);
}
