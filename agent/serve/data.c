/*
 * A data connection (docs/protocol.md "Data connections"): ATTACH with a
 * session's token from the control connection's address, then items off
 * the session's queue, back to back: FILE header, the raw bytes (read
 * with pread and hashed as they are read, or by sendfile(2) when the
 * server knows the whole file's digest: digests.c), DIGEST (SHA-256, or
 * HMAC-SHA-256 with the session key).  An item that cannot be served
 * (gone, not a regular file, a range past its end, a path leaving the
 * export) is reported on the control connection and the stream goes on.
 * A file that shrinks while it is sent ends the connection: the promised
 * byte count cannot be kept.  One log line per item.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/log.h"
#include "biomirror/text.h"

#include "serve_int.h"

/* The session whose token is t, or NULL; under srv->lock. */
static struct sv_session *
sv_find_token(struct sv_server *srv, const uint8_t *t)
{
	struct sv_session *s;

	for (s = srv->sessions; s != NULL; s = s->next)
		if (CRYPTO_memcmp(s->token, t, BMP_KEY_LEN) == 0)
			return s;
	return NULL;
}

/*
 * ATTACH's checks: a live session's token, the same address as its
 * control connection, fewer than max_connections attached.  Returns the
 * session (ndata counted) or NULL (refused, logged, ERROR sent).
 */
static struct sv_session *
sv_attach(struct sv_conn *c, const uint8_t *p, size_t len)
{
	struct sv_server	*srv = c->srv;
	struct sv_session	*s;
	struct bmp_attach	 a;
	const char		*why = NULL;
	uint16_t		 code = BMP_E_DENIED;
	char			 owner[64] = "";

	if (bmp_dec_attach(p, len, &a) != 0) {
		sv_refused(srv, c, "malformed ATTACH");
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_PROTO,
		    "malformed ATTACH");
		return NULL;
	}
	(void)pthread_mutex_lock(&srv->lock);
	if ((s = sv_find_token(srv, a.token)) == NULL || s->closing)
		why = "data connection with an unknown session token";
	else if (s->ctl->family != c->family ||
	    memcmp(s->ctl->addr, c->addr, sizeof(c->addr)) != 0) {
		why = "data connection from another address than its "
		    "session's";
		(void)snprintf(owner, sizeof(owner), "%s", s->ctl->peer);
	} else if (s->ndata >= srv->sc->max_connections) {
		why = "too many data connections for one session";
		code = BMP_E_LIMIT;
	} else {
		s->ndata++;
		c->sess = s;
	}
	(void)pthread_mutex_unlock(&srv->lock);
	if (why != NULL) {
		sv_refused(srv, c, "%s%s%s", why, owner[0] ? ", " : "", owner);
		(void)sv_send_error(c, 0, BMP_NO_INDEX, code, why);
		return NULL;
	}
	return s;
}

/* The item's end: counts, GET_END after its GET's last item. */
static void
sv_item_end(struct sv_session *s, struct sv_item *q, bool ok, uint64_t bytes)
{
	struct sv_get	*g = q->get;
	uint8_t		 buf[BMP_HDR_LEN + 16];
	size_t		 n;
	bool		 last;

	(void)pthread_mutex_lock(&s->srv->lock);
	if (ok) {
		g->done++;
		s->files++;
		s->bytes += bytes;
		s->srv->m_files++;
		s->srv->m_bytes += bytes;
	} else {
		g->failed++;
		s->failed++;
	}
	s->inflight--;
	(void)clock_gettime(CLOCK_MONOTONIC, &s->last);
	last = g->done + g->failed == g->n;
	(void)pthread_mutex_unlock(&s->srv->lock);
	if (last && bmp_enc_get_end(g->id, g->done, g->failed, buf,
	    sizeof(buf), &n) == 0) {
		(void)pthread_mutex_lock(&s->wlock);
		(void)sv_write(s->ctl, buf, n);
		(void)pthread_mutex_unlock(&s->wlock);
	}
	if (last)
		free(g);
	free(q->path);
	free(q);
}

/* Report item q failed with rc on the control connection. */
static void
sv_item_fail(struct sv_session *s, struct sv_item *q, int rc)
{
	if (rc == BM_EUNSAFE)
		sv_refused(s->srv, s->ctl, "export %s: GET of %s: leaves the "
		    "export", s->exp->conf->name, q->path);
	else
		log_info("serve: %s: export %s: %s: %s", s->ctl->peer,
		    s->exp->conf->name, q->path, bm_strerror(rc));
	(void)pthread_mutex_lock(&s->wlock);
	(void)sv_send_error(s->ctl, q->get->id, q->index, sv_wire_error(rc),
	    rc == BM_EINVAL ? "not a regular file or range past its end" :
	    bm_strerror(rc));
	(void)pthread_mutex_unlock(&s->wlock);
}

/* Whether a test hook (serve_int.h) names path; claims it once. */
static bool
sv_test_hook(const char *want, atomic_bool *done, const char *path)
{
	bool	 no = false;

	return want != NULL && strcmp(want, path) == 0 &&
	    atomic_compare_exchange_strong(done, &no, true);
}

/*
 * Header, bytes [off, off+len) of fd (st: as opened), digest.  known:
 * the digest the server knows of the whole file (sv_digest_of; NULL:
 * hash as read).  An item that fits in buf goes in one write; a larger
 * one with a known digest by sendfile(2), and a larger whole file
 * hashed here for an anonymous session is noted for the next time
 * (sv_hashed_note; a small one is cheaper to hash again than to list
 * with a digest that every client's run then checks).
 */
static int
sv_stream(struct sv_conn *c, struct sv_session *s, int fd,
    const struct stat *st, const struct bmp_file *f, const char *path,
    const uint8_t *known, uint8_t *buf)
{
	struct sv_server *srv = s->srv;
	struct bmp_digest d;
	struct bmp_hash	*h = NULL;
	uint64_t	 left = f->len, off = f->off;
	ssize_t		 n;
	size_t		 hl, at, dl;
	int		 rc;
	uint64_t	 mid;
	int64_t		 start_ns = 0;
	bool		 flip, halt, note;

	flip = f->len > 0 && sv_test_hook(srv->test_corrupt,
	    &srv->test_corrupted, path);
	mid = f->size / 2;
	halt = f->off < mid && mid <= f->off + f->len &&
	    sv_test_hook(srv->test_stop, &srv->test_stopped, path);
	d.id = f->id;
	d.index = f->index;
	note = known == NULL && !s->keyed && f->off == 0 && f->len == f->size;
	if (note)
		start_ns = clock_real_ns();
	if (known != NULL) {
		d.kind = BMP_D_SHA256;
		memcpy(d.digest, known, sizeof(d.digest));
	} else if ((h = bmp_hash_new(s->keyed ? s->key : NULL, f)) == NULL)
		return BM_ENOMEM;
	if ((rc = bmp_enc_file(f, buf, SV_BUF, &hl)) != 0)
		goto out;
	if (!halt && f->len <= SV_BUF - hl - SV_DIGEST_FRAME) {
		/* Small: header, bytes and digest gathered, one write. */
		for (at = hl; left > 0; at += (size_t)n, left -= (uint64_t)n,
		    off += (uint64_t)n)
			if ((n = pread(fd, buf + at, (size_t)left,
			    (off_t)off)) <= 0) {
				rc = n == 0 ? BM_ECHANGED : BM_EIO;
				goto out;
			}
		if (h != NULL && ((rc = bmp_hash_update(h, buf + hl,
		    (size_t)f->len)) != 0 || (rc = bmp_hash_final(h, d.digest,
		    &d.kind)) != 0))
			goto out;
		if (flip) {
			buf[hl + (size_t)f->len / 2] ^= 0x01;
			log_warnx("serve: test hook: one byte of %s flipped",
			    path);
		}
		if ((rc = bmp_enc_digest(&d, buf + at, SV_BUF - at, &dl)) == 0)
			rc = sv_write(c, buf, at + dl);
		goto out;
	}
	if ((rc = sv_write_more(c, buf, hl, true)) != 0)
		goto out;
	if (known != NULL && !flip && !halt) {
		rc = sv_sendfile(c, fd, off, left);
		left = 0;
		if (rc != 0)
			goto out;
	}
	while (left > 0) {
		n = pread(fd, buf, left < SV_BUF ? (size_t)left : SV_BUF,
		    (off_t)off);
		if (n <= 0) {
			rc = n == 0 ? BM_ECHANGED : BM_EIO;
			goto out;
		}
		if (halt && off + (uint64_t)n >= mid)
			n = (ssize_t)(mid - off);	/* up to the middle */
		if (h != NULL && (rc = bmp_hash_update(h, buf,
		    (size_t)n)) != 0)
			goto out;
		if (flip) {
			buf[(size_t)n / 2] ^= 0x01;
			flip = false;
			log_warnx("serve: test hook: one byte of %s flipped",
			    path);
		}
		if ((rc = sv_write_more(c, buf, (size_t)n, left >
		    (uint64_t)n)) != 0)
			goto out;
		if (halt && off + (uint64_t)n >= mid) {
			halt = false;
			log_warnx("serve: test hook: stopped in %s", path);
			(void)raise(SIGSTOP);
		}
		off += (uint64_t)n;
		left -= (uint64_t)n;
	}
	if (h != NULL && (rc = bmp_hash_final(h, d.digest, &d.kind)) != 0)
		goto out;
	if (note)
		sv_hashed_note(srv, fd, st, start_ns, d.digest);
	if ((rc = bmp_enc_digest(&d, buf, SV_BUF, &hl)) == 0)
		rc = sv_write(c, buf, hl);
out:
	bmp_hash_free(h);
	return rc;
}

/*
 * Has session s had path whole with a known digest before (and note it
 * now)?  A client asks for a whole file again in one session after its
 * DIGEST did not match (or its connection was cut): the digest the
 * server trusted may be stale (a write the kernel did not stamp, through
 * a shared mmap), so the file is then hashed as read, and what the
 * hashed table held of it is dropped: the next LIST lists the new one.
 */
static bool
sv_asked_again(struct sv_session *s, const char *path)
{
	uint64_t	 h = text_fnv1a(path, strlen(path)), k = h | 1;
	uint64_t	*b = &s->whole[(h >> 1) % (SV_WHOLE_SLOTS /
			    SV_WHOLE_WAYS) * SV_WHOLE_WAYS];
	bool		 again = false;
	unsigned	 i;

	/* Its bucket's ways, newest first: found, or put first. */
	(void)pthread_mutex_lock(&s->srv->lock);
	for (i = 0; i < SV_WHOLE_WAYS && !again; i++)
		again = b[i] == k;
	if (!again) {
		memmove(b + 1, b, (SV_WHOLE_WAYS - 1) * sizeof(*b));
		b[0] = k;
	}
	(void)pthread_mutex_unlock(&s->srv->lock);
	return again;
}

/*
 * Serve item q.  Returns 0 (sent, or failed and reported: the stream
 * goes on) or BM_ENET/BM_ECHANGED/BM_EIO mid-stream (the connection ends).
 */
static int
sv_serve_item(struct sv_conn *c, struct sv_session *s, struct sv_item *q,
    uint8_t *buf)
{
	struct bmp_file	 f;
	struct stat	 st;
	struct timespec	 t0;
	uint8_t		 known[BMP_DIGEST_LEN];
	bool		 whole;
	int		 fd = -1, rc;

	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((rc = sv_open_beneath(s->root, q->path, O_RDONLY | O_NONBLOCK,
	    &fd)) == 0 && (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)))
		rc = BM_EINVAL;
	if (rc == 0 && (q->off > (uint64_t)st.st_size || (q->len > 0 &&
	    q->len > (uint64_t)st.st_size - q->off)))
		rc = BM_EINVAL;
	if (rc != 0) {
		if (fd != -1)
			(void)close(fd);
		sv_item_fail(s, q, rc);
		sv_item_end(s, q, false, 0);
		return 0;
	}
	f.id = q->get->id;
	f.index = q->index;
	f.off = q->off;
	f.len = q->len > 0 ? q->len : (uint64_t)st.st_size - q->off;
	f.size = (uint64_t)st.st_size;
	f.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL +
	    st.st_mtim.tv_nsec;
	/* A whole file whose digest the server knows (anonymous only). */
	whole = f.off == 0 && f.len == f.size && !s->keyed &&
	    sv_digest_of(s, q->path, &st, known);
	if (whole && sv_asked_again(s, q->path)) {
		whole = false;
		sv_hashed_forget(s->srv, &st);
		log_info("serve: %s: export %s: %s asked for again: hashed as "
		    "read, not sent with the digest known", s->ctl->peer,
		    s->exp->conf->name, q->path);
	}
	rc = sv_stream(c, s, fd, &st, &f, q->path, whole ? known : NULL, buf);
	(void)close(fd);
	if (rc == 0 && (q->off > 0 || q->len > 0))
		log_info("serve: %s: export %s: %s [%llu+%llu]: %llu bytes, "
		    "%.3f s", s->ctl->peer, s->exp->conf->name, q->path,
		    (unsigned long long)f.off, (unsigned long long)f.len,
		    (unsigned long long)f.len, (double)sv_ms_since(&t0) / 1e3);
	else if (rc == 0)
		log_info("serve: %s: export %s: %s: %llu bytes, %.3f s",
		    s->ctl->peer, s->exp->conf->name, q->path,
		    (unsigned long long)f.len, (double)sv_ms_since(&t0) / 1e3);
	else
		log_warnx("serve: %s: export %s: %s: cut after the header: %s",
		    c->peer, s->exp->conf->name, q->path, bm_strerror(rc));
	sv_item_end(s, q, rc == 0, f.len);
	return rc;
}

/* The next item for this connection, NULL when the session ends. */
static struct sv_item *
sv_next_item(struct sv_session *s)
{
	struct sv_server *srv = s->srv;
	struct sv_item	*q = NULL;

	(void)pthread_mutex_lock(&srv->lock);
	while (s->head == NULL && !s->closing && !atomic_load(&srv->cut))
		(void)pthread_cond_wait(&s->cond, &srv->lock);
	if (!s->closing && !atomic_load(&srv->cut) && (q = s->head) != NULL) {
		s->head = q->next;
		if (s->head == NULL)
			s->tail = NULL;
		s->queued--;
		s->qbytes -= q->cost;
		srv->qbytes -= q->cost;
		s->inflight++;
		q->next = NULL;
	}
	(void)pthread_mutex_unlock(&srv->lock);
	return q;
}

/*
 * The thread of a connection whose first frame (payload p, len bytes)
 * was ATTACH.  Returns when the session ends or the stream breaks; c is
 * the caller's.
 */
void
sv_data_run(struct sv_conn *c, const uint8_t *p, size_t len)
{
	struct sv_session	*s;
	struct sv_item		*q;
	uint8_t			*buf = NULL;
	size_t			 n;

	if ((s = sv_attach(c, p, len)) == NULL)
		return;
	if ((buf = malloc(SV_BUF)) != NULL &&
	    bmp_enc_empty(BMP_ATTACHED, buf, SV_BUF, &n) == 0 &&
	    sv_write(c, buf, n) == 0) {
		while ((q = sv_next_item(s)) != NULL)
			if (sv_serve_item(c, s, q, buf) != 0)
				break;
	}
	free(buf);
	(void)pthread_mutex_lock(&c->srv->lock);
	s->ndata--;
	c->sess = NULL;
	(void)pthread_cond_broadcast(&c->srv->cond);
	(void)pthread_mutex_unlock(&c->srv->lock);
}
