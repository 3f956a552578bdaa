/*
 * The UDT shim (agent/xfer/udt_shim.cpp): a C interface to Debian's udt4
 * (libudt-dev 4.11), the only C++ in the project.  Opaque handles; no C++
 * exception crosses it; it never logs: calls return 0 or a BM_E* code and
 * fill errbuf (errlen bytes; may be NULL).  UDT handles are not file
 * descriptors: wait on them with udt_poll_*.  Thread-safety: libudt's;
 * one handle, one thread.  The 4.11 faults it works around: see
 * docs/internals.md, "UDT 4.11's faults and the shim".
 */
#ifndef BIOMIRROR_UDT_SHIM_H
#define BIOMIRROR_UDT_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One UDT socket (listener or connection). */
typedef struct udt_sock udt_sock;
/* A set of UDT sockets to wait on (UDT's epoll). */
typedef struct udt_poll udt_poll;

/* Buffer sizes asked for (0 = libudt's default) and granted, bytes. */
struct udt_bufs {
	size_t		 udt_rcvbuf;	/* UDT receive buffer (UDT_RCVBUF) */
	size_t		 udp_rcvbuf;	/* UDP socket receive buffer */
	size_t		 udp_sndbuf;	/* UDP socket send buffer */
};

/*
 * Start libudt (its garbage-collector thread); pair with
 * udt_shim_cleanup().  Returns 0 or BM_ENET.
 */
int	udt_shim_startup(char *errbuf, size_t errlen);
/* Stop libudt once every handle is closed. */
void	udt_shim_cleanup(void);
/*
 * Load what udt_shim_startup() needs (the module libbiomirror-udt.so)
 * without starting libudt: check-config.  Returns 0, or BM_EINVAL with
 * "UDT module PATH: reason" in errbuf.
 */
int	udt_shim_load(char *errbuf, size_t errlen);

/*
 * A non-blocking UDT listener (SOCK_STREAM, not rendezvous) on a UDP
 * socket bound to sa (port 0: any), with the buffers of want (NULL: the
 * defaults).  *ret_got holds the sizes granted (the kernel's SO_RCVBUF /
 * SO_SNDBUF, halved as socket(7) says; UDT's buffer as set): a UDP size
 * below the one asked is net.core.rmem_max / wmem_max at work.  Returns
 * 0, BM_ENOMEM or BM_ENET.
 */
int	udt_sock_listen(const struct sockaddr *sa, socklen_t salen,
	    const struct udt_bufs *want, udt_sock **ret,
	    struct udt_bufs *ret_got, char *errbuf, size_t errlen);
/* The local address of s into ss (*sslen in/out).  0 or BM_ENET. */
int	udt_sock_name(const udt_sock *s, struct sockaddr *ss,
	    socklen_t *sslen);
/*
 * Take a pending connection of listener l (non-blocking, linger off)
 * and its peer address.  Returns 0; 1 when none is pending; BM_ENOMEM or
 * BM_ENET.
 */
int	udt_sock_accept(udt_sock *l, udt_sock **ret, struct sockaddr *peer,
	    socklen_t *peerlen, char *errbuf, size_t errlen);
/*
 * A blocking connection to sa (for peers and tests; linger off).
 * Returns 0, BM_ENOMEM or BM_ENET.
 */
int	udt_sock_connect(const struct sockaddr *sa, socklen_t salen,
	    udt_sock **ret, char *errbuf, size_t errlen);
/*
 * Receive at most len bytes into buf.  Returns the count (> 0), 0 when
 * nothing is there (non-blocking), or BM_ENET when the connection is
 * broken or closed (the reason in errbuf).
 */
long	udt_sock_recv(udt_sock *s, void *buf, size_t len, char *errbuf,
	    size_t errlen);
/*
 * recvfile2's job without its truncation: receive at most len bytes
 * (through buf, buflen bytes) and pwrite(2) them at off of fd (borrowed;
 * never truncated or moved).  Returns the bytes written, 0 when nothing
 * is there, BM_ENET or BM_EIO.
 */
long	udt_sock_recv_pwrite(udt_sock *s, int fd, uint64_t off, size_t len,
	    void *buf, size_t buflen, char *errbuf, size_t errlen);
/*
 * Send all len bytes of buf (blocking socket; for peers and tests).
 * Returns 0 or BM_ENET.
 */
int	udt_sock_send(udt_sock *s, const void *buf, size_t len, char *errbuf,
	    size_t errlen);
/* UDT_MAXBW, bytes per second (-1: no cap), as the int64_t UDT reads. */
int	udt_sock_set_maxbw(udt_sock *s, int64_t bps);
/* The UDT_MAXBW value in force. */
int64_t	udt_sock_maxbw(const udt_sock *s);
/* UDT_SNDSYN and UDT_RCVSYN (C++ bools) off when on.  0 or BM_ENET. */
int	udt_sock_set_nonblock(udt_sock *s, bool on);
/* Whether UDT_LINGER is off (it should be on every shim socket). */
bool	udt_sock_linger_off(const udt_sock *s);
/* Milliseconds since s last received a byte (or was made). */
int64_t	udt_sock_idle_ms(const udt_sock *s);
/* Whether libudt still calls s connected (it takes ~47 s to notice). */
bool	udt_sock_connected(const udt_sock *s);
/* Close s at once (no linger) and free it.  NULL is a no-op. */
void	udt_sock_close(udt_sock *s);

/* A new wait set.  Returns 0, BM_ENOMEM or BM_ENET. */
int	udt_poll_new(udt_poll **ret, char *errbuf, size_t errlen);
/*
 * Wait for s (borrowed while in p) to be readable (or broken: a read then
 * says so).  Returns 0, BM_ENOMEM or BM_ENET.
 */
int	udt_poll_add(udt_poll *p, udt_sock *s);
/* Stop waiting for s; a no-op for a socket not in p. */
void	udt_poll_del(udt_poll *p, udt_sock *s);
/*
 * Wait up to timeout_ms (0: no wait) for sockets of p to be readable;
 * their handles go to ready (room for max), *ret_n their count, 0 after
 * a timeout (never an error).  Returns 0 or BM_ENET.
 */
int	udt_poll_wait(udt_poll *p, int timeout_ms, udt_sock **ready,
	    size_t max, size_t *ret_n, char *errbuf, size_t errlen);
/*
 * Arm p's wakeup descriptor for poll(2) beside other fds: it turns
 * readable (POLLIN) once a socket of p is readable or broken, within
 * timeout_ms (-1: no end), and stays so until the next arm, which drops
 * it.  A helper thread (started by the first arm, every signal blocked)
 * waits in UDT's epoll for it, so the caller needs no wakeup ticks.
 * Returns the descriptor (owned by p, the same every time), or BM_ENOMEM
 * or BM_ENET (the helper cannot start, or its last wait failed).
 */
int	udt_poll_arm(udt_poll *p, int timeout_ms, char *errbuf,
	    size_t errlen);
/* Free p (its sockets stay open; the helper stopped).  NULL is a no-op. */
void	udt_poll_free(udt_poll *p);

#ifdef __cplusplus
}
#endif

#endif
