/*
 * Framed socket I/O for biomirror serve: reads bounded in bytes (a frame
 * over the reader's cap is refused from its header, before its payload
 * is read) and in time (poll in slices, so that a drain's cut ends a
 * blocked read at once), writes with MSG_NOSIGNAL under SO_SNDTIMEO
 * (set at accept).  Refusals are logged here, once, in one form.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>

#include "biomirror/error.h"
#include "biomirror/log.h"

#include "serve_int.h"

/* Milliseconds since t (CLOCK_MONOTONIC). */
int64_t
sv_ms_since(const struct timespec *t)
{
	struct timespec	 now;

	(void)clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 +
	    (now.tv_nsec - t->tv_nsec) / 1000000;
}

/*
 * Whether a drain may end c's read now: a connection before its first
 * frame, or a session's control connection with nothing in flight (a
 * request read during a drain would be refused anyway).
 */
static bool
sv_drain_cuts(struct sv_conn *c)
{
	struct sv_server *srv = c->srv;
	bool		 cut;

	if (!atomic_load(&srv->draining))
		return false;
	if (atomic_load(&c->first))
		return true;
	(void)pthread_mutex_lock(&srv->lock);
	cut = c->ctl_of != NULL && !sv_busy(c->ctl_of);
	(void)pthread_mutex_unlock(&srv->lock);
	return cut;
}

/*
 * Wait at most ms for c to be readable.  Returns 1 readable (or closed),
 * 0 time is up, BM_EINTR when the server cuts connections (or a drain
 * ends an idle read: sv_drain_cuts).
 */
int
sv_wait(struct sv_conn *c, int ms)
{
	struct pollfd	 pfd = { c->fd, POLLIN, 0 };
	int		 n, step;

	while (ms >= 0) {
		if (atomic_load(&c->srv->cut) || sv_drain_cuts(c))
			return BM_EINTR;
		step = ms < SV_SLICE_MS ? ms : SV_SLICE_MS;
		n = poll(&pfd, 1, step);
		if (n > 0)
			return 1;
		if (n == -1 && errno != EINTR)
			return 1;	/* the read reports it */
		if (ms == 0)
			break;
		ms -= step;
	}
	return 0;
}

/*
 * Read exactly len bytes within ms.  Returns 0; BM_ENET on EOF or an
 * error; BM_ELIMIT when the time is up; BM_EINTR when cut.
 */
int
sv_read_full(struct sv_conn *c, void *buf, size_t len, int ms)
{
	struct timespec	 t0;
	uint8_t		*p = buf;
	ssize_t		 n;
	int64_t		 left;
	int		 w;

	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	while (len > 0) {
		if ((left = ms - sv_ms_since(&t0)) < 0)
			return BM_ELIMIT;
		if ((w = sv_wait(c, (int)left)) < 0)
			return w;
		if (w == 0)
			return BM_ELIMIT;
		n = recv(c->fd, p, len, 0);
		if (n == 0)
			return BM_ENET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return BM_ENET;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Read one frame into buf (cap bytes, at least BMP_HDR_LEN) within ms
 * for header and payload together: its payload lands at buf +
 * BMP_HDR_LEN.  Returns 0; BM_ELIMIT for a payload over cap -
 * BMP_HDR_LEN (nothing more read) or the time up; BM_EPROTO for an
 * unknown type; BM_ENET, BM_EINTR as sv_read_full.
 */
int
sv_read_frame(struct sv_conn *c, uint8_t *buf, size_t cap, int ms,
    uint8_t *ret_type, size_t *ret_len)
{
	struct timespec	 t0;
	int64_t		 left;
	size_t		 len;
	uint8_t		 type;
	int		 rc;

	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((rc = sv_read_full(c, buf, BMP_HDR_LEN, ms)) != 0)
		return rc;
	if ((rc = bmp_header(buf, cap - BMP_HDR_LEN, &type, &len)) != 0)
		return rc;
	if ((left = ms - sv_ms_since(&t0)) < 0)
		left = 0;
	if ((rc = sv_read_full(c, buf + BMP_HDR_LEN, len, (int)left)) != 0)
		return rc;
	*ret_type = type;
	*ret_len = len;
	return 0;
}

/*
 * Write all len bytes; more: more follows at once (MSG_MORE: one segment
 * with what comes next).  Returns 0 or BM_ENET (closed, timed out, cut).
 */
int
sv_write_more(struct sv_conn *c, const void *buf, size_t len, bool more)
{
	const uint8_t	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if (atomic_load(&c->srv->cut))
			return BM_ENET;
		n = send(c->fd, p, len, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return BM_ENET;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Write all len bytes.  Returns 0 or BM_ENET (closed, timed out, cut). */
int
sv_write(struct sv_conn *c, const void *buf, size_t len)
{
	return sv_write_more(c, buf, len, false);
}

/*
 * Send bytes [off, off+len) of the file fd with sendfile(2).  Returns 0;
 * BM_ECHANGED when the file ended early (it shrank); BM_ENET (the peer
 * gone, timed out, cut; or the file unreadable: the stream is broken).
 */
int
sv_sendfile(struct sv_conn *c, int fd, uint64_t off, uint64_t len)
{
	off_t	 o = (off_t)off;
	ssize_t	 n;

	while (len > 0) {
		if (atomic_load(&c->srv->cut))
			return BM_ENET;
		n = sendfile(c->fd, fd, &o, len < (1U << 30) ? (size_t)len :
		    (1U << 30));
		if (n == 0)
			return BM_ECHANGED;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return BM_ENET;
		}
		len -= (uint64_t)n;
	}
	return 0;
}

/* Send an ERROR frame (best effort: the peer may be gone). */
int
sv_send_error(struct sv_conn *c, uint32_t id, uint16_t index, uint16_t code,
    const char *msg)
{
	uint8_t		 buf[BMP_HDR_LEN + 600];
	struct bmp_error e;
	size_t		 n;

	e.id = id;
	e.index = index;
	e.code = code;
	e.msg.p = (const uint8_t *)msg;
	e.msg.len = strlen(msg);
	if (bmp_enc_error(&e, buf, sizeof(buf), &n) != 0)
		return BM_ELIMIT;
	return sv_write(c, buf, n);
}

/* Log a refusal of c's request ("CLIENT: refused: why") and count it. */
void
sv_refused(struct sv_server *srv, const struct sv_conn *c, const char *fmt,
    ...)
{
	char	 why[1024];
	va_list	 ap;

	va_start(ap, fmt);
	(void)vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warnx("serve: %s: refused: %s", c->peer, why);
	(void)pthread_mutex_lock(&srv->lock);
	srv->m_refused++;
	(void)pthread_mutex_unlock(&srv->lock);
}
