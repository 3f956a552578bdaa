/*
 * A control connection (docs/protocol.md): HELLO -> WELCOME [-> AUTH] ->
 * SESSION, then LIST, GET and BYE requests until the client leaves, the
 * session idles past idle_timeout, or a drain finds it with nothing in
 * flight.  The session's root fd is opened once, after authentication,
 * and serves the whole session (for a publish = set mirror, the snapshot
 * live then, held against the sync's prune).  GET items are checked here
 * and queued for the data connections (data.c); a queue over
 * SV_QUEUE_MAX items refuses the request.  One log line per session.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"

#include "serve_int.h"

/* Whether c's address lies in one of e's allow ranges (none: anyone). */
bool
sv_allowed(const struct sv_export *e, const struct sv_conn *c)
{
	size_t	 i;

	if (e->conf->nallow == 0)
		return true;
	for (i = 0; i < e->conf->nallow; i++)
		if (net_range_match(&e->conf->allow[i], c->family, c->addr))
			return true;
	return false;
}

/* A client's bytes for a log line: printable ASCII, others as \\xHH. */
static void
sv_printable(char *out, size_t cap, const uint8_t *p, size_t len)
{
	size_t	 i, o = 0;

	for (i = 0; i < len && o + 5 <= cap; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			out[o++] = (char)p[i];
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x",
			    p[i]);
	}
	out[o < cap ? o : cap - 1] = '\0';
}

static const struct sv_export *
sv_find_export(const struct sv_server *srv, const struct bmp_str *name)
{
	size_t	 i;

	for (i = 0; i < srv->nexports; i++)
		if (strlen(srv->exports[i].conf->name) == name->len &&
		    memcmp(srv->exports[i].conf->name, name->p, name->len) == 0)
			return &srv->exports[i];
	return NULL;
}

/*
 * HELLO's checks: the export, its allow list, the drain, max_clients (a
 * slot is taken: the caller gives it back).  Returns the export or NULL
 * (refused, logged, ERROR sent).
 */
static const struct sv_export *
sv_admit(struct sv_conn *c, const struct bmp_hello *h)
{
	struct sv_server	*srv = c->srv;
	const struct sv_export	*e;
	char			 name[4 * BMP_NAME_MAX + 1];
	bool			 full;

	if ((e = sv_find_export(srv, &h->export)) == NULL) {
		sv_printable(name, sizeof(name), h->export.p, h->export.len);
		sv_refused(srv, c, "no export '%s'", name);
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_NOEXPORT,
		    "no such export");
		return NULL;
	}
	(void)snprintf(name, sizeof(name), "%s", e->conf->name);
	if (!sv_allowed(e, c)) {
		sv_refused(srv, c, "export %s: address not in its allow list",
		    name);
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_DENIED,
		    "address not allowed");
		return NULL;
	}
	if (atomic_load(&srv->draining)) {
		sv_refused(srv, c, "export %s: server shutting down", name);
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_SHUTDOWN,
		    "server shutting down");
		return NULL;
	}
	(void)pthread_mutex_lock(&srv->lock);
	full = srv->nsessions >= srv->sc->max_clients;
	if (!full)
		srv->nsessions++;
	(void)pthread_mutex_unlock(&srv->lock);
	if (full) {
		sv_refused(srv, c, "export %s: too many clients (max_clients "
		    "%u)", name, srv->sc->max_clients);
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_LIMIT,
		    "too many clients");
		return NULL;
	}
	return e;
}

/*
 * WELCOME, and with a secret the challenge/response: fills s->key and
 * the server's proof for SESSION.
 * Returns 0 or an error (refused and logged here).
 */
static int
sv_handshake(struct sv_session *s, const struct bmp_hello *h, uint8_t *buf,
    uint8_t proof[BMP_DIGEST_LEN])
{
	struct sv_conn		*c = s->ctl;
	const struct sv_export	*e = s->exp;
	struct bmp_welcome	 w;
	struct bmp_auth		 a;
	uint8_t			 mac[BMP_DIGEST_LEN], type;
	size_t			 n;
	int			 rc;

	memset(&w, 0, sizeof(w));
	w.version = s->version;
	w.features = h->features & BMP_F_ALL;
	s->features = w.features;
	w.auth = e->secret != NULL;
	if (w.auth && RAND_bytes(w.challenge, BMP_KEY_LEN) != 1)
		return BM_EIO;
	if ((rc = bmp_enc_welcome(&w, buf, BMP_HDR_LEN + BMP_FRAME_MAX,
	    &n)) != 0 || (rc = sv_write(c, buf, n)) != 0 || !w.auth)
		return rc;
	rc = sv_read_frame(c, buf, BMP_HDR_LEN + BMP_FRAME_MAX, SV_HELLO_MS,
	    &type, &n);
	if (rc == 0 && (type != BMP_AUTH ||
	    bmp_dec_auth(buf + BMP_HDR_LEN, n, &a) != 0))
		rc = BM_EPROTO;
	if (rc == 0 && bmp_auth_mac(e->secret, e->secret_len, 'c',
	    w.challenge, a.nonce, e->conf->name, strlen(e->conf->name),
	    mac) != 0)
		rc = BM_EIO;
	if (rc == 0 && CRYPTO_memcmp(mac, a.mac, sizeof(mac)) != 0) {
		sv_refused(s->srv, c, "export %s: wrong secret",
		    e->conf->name);
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_DENIED,
		    "authentication failed");
		return BM_EPROTO;
	}
	if (rc == 0 && (bmp_auth_mac(e->secret, e->secret_len, 'k',
	    w.challenge, a.nonce, NULL, 0, s->key) != 0 ||
	    bmp_auth_mac(e->secret, e->secret_len, 's', w.challenge, a.nonce,
	    e->conf->name, strlen(e->conf->name), mac) != 0))
		rc = BM_EIO;
	if (rc != 0) {
		sv_refused(s->srv, c, "export %s: authentication: %s",
		    e->conf->name, bm_strerror(rc));
		return rc;
	}
	s->keyed = true;
	memcpy(proof, mac, sizeof(mac));
	return 0;
}

/* The root, the token, SESSION; the session joins the server's list. */
static int
sv_start(struct sv_session *s, const uint8_t *proof, uint8_t *buf)
{
	struct sv_server	*srv = s->srv;
	struct bmp_session	 m;
	size_t			 n;
	int			 rc;

	if ((rc = sv_open_root(s->exp, &s->root, &s->snapshot)) != 0) {
		log_warnx("serve: %s: export %s: %s: %s", s->ctl->peer,
		    s->exp->conf->name, s->exp->root, rc == BM_EINVAL ?
		    "nothing published yet" : bm_strerror(rc));
		(void)sv_send_error(s->ctl, 0, BMP_NO_INDEX, BMP_E_IO,
		    "export unavailable");
		return rc;
	}
	if (RAND_bytes(s->token, BMP_KEY_LEN) != 1)
		return BM_EIO;
	s->dg = sv_digests_get(srv, s->exp);
	memset(&m, 0, sizeof(m));
	memcpy(m.token, s->token, BMP_KEY_LEN);
	if (s->keyed)
		memcpy(m.proof, proof, BMP_DIGEST_LEN);
	m.max_connections = (uint16_t)srv->sc->max_connections;
	m.max_queued = SV_QUEUE_MAX;
	m.idle_timeout = srv->sc->idle_timeout;
	m.snapshot = s->snapshot;
	if ((rc = bmp_enc_session(&m, buf, BMP_HDR_LEN + BMP_FRAME_MAX,
	    &n)) != 0)
		return rc;
	(void)pthread_mutex_lock(&srv->lock);
	s->next = srv->sessions;
	srv->sessions = s;
	s->listed = true;
	srv->m_sessions++;
	(void)pthread_mutex_unlock(&srv->lock);
	/* Logged before the client can act on SESSION. */
	log_info("serve: %s: export %s: session started (version %u%s)",
	    s->ctl->peer, s->exp->conf->name, s->version, s->keyed ?
	    ", authenticated" : "");
	if (s->snapshot >= 0)
		log_info("serve: %s: export %s: serving snapshot %lld",
		    s->ctl->peer, s->exp->conf->name, (long long)s->snapshot);
	return sv_write(s->ctl, buf, n);
}

/* Send a frame on the control connection under its write lock. */
static int
sv_ctl_send(struct sv_session *s, const uint8_t *buf, size_t n)
{
	int	 rc;

	(void)pthread_mutex_lock(&s->wlock);
	rc = sv_write(s->ctl, buf, n);
	(void)pthread_mutex_unlock(&s->wlock);
	return rc;
}

static int
sv_ctl_error(struct sv_session *s, uint32_t id, uint16_t index,
    uint16_t code, const char *msg)
{
	int	 rc;

	(void)pthread_mutex_lock(&s->wlock);
	rc = sv_send_error(s->ctl, id, index, code, msg);
	(void)pthread_mutex_unlock(&s->wlock);
	return rc;
}

/* LIST: the entries, then LIST_END or ERROR. */
static int
sv_do_list(struct sv_session *s, const uint8_t *p, size_t len, uint8_t *buf)
{
	char		 path[BMP_STR_MAX + 1];
	struct bmp_str	 ps;
	uint64_t	 count = 0;
	uint32_t	 id;
	size_t		 n;
	int		 rc;

	if (bmp_dec_list(p, len, &id, &ps) != 0)
		return BM_EPROTO;
	(void)snprintf(path, sizeof(path), "%.*s", (int)ps.len,
	    (const char *)ps.p);
	if (strlen(path) != ps.len)
		rc = BM_EUNSAFE;	/* a NUL inside */
	else
		rc = sv_list(s, id, path, &count);
	if (rc == BM_ENET)
		return rc;
	if (rc == BM_EUNSAFE)
		sv_refused(s->srv, s->ctl, "export %s: LIST of an unsafe "
		    "path", s->exp->conf->name);
	if (rc != 0)
		return sv_ctl_error(s, id, BMP_NO_INDEX, sv_wire_error(rc),
		    rc == BM_EINVAL ? "not a directory" : bm_strerror(rc));
	log_info("serve: %s: export %s: listed /%s: %llu entries",
	    s->ctl->peer, s->exp->conf->name, path, (unsigned long long)count);
	if ((rc = bmp_enc_list_end(id, count, buf, BMP_HDR_LEN + 64, &n)) != 0)
		return rc;
	return sv_ctl_send(s, buf, n);
}

/* One item of a GET: checked, then queued (or failed at once). */
static int
sv_item_new(struct sv_get *g, uint16_t index,
    const struct bmp_item *it, struct sv_item **ret)
{
	struct sv_item	*q;

	*ret = NULL;
	if (memchr(it->path.p, '\0', it->path.len) != NULL ||
	    !path_is_safe((const char *)it->path.p, it->path.len))
		return BM_EUNSAFE;
	if ((q = calloc(1, sizeof(*q))) == NULL ||
	    (q->path = strndup((const char *)it->path.p, it->path.len)) ==
	    NULL) {
		free(q);
		return BM_ENOMEM;
	}
	q->get = g;
	q->index = index;
	q->off = it->off;
	q->len = it->len;
	q->cost = SV_ITEM_COST + 18 + it->path.len;	/* its wire bytes too */
	*ret = q;
	return 0;
}

/* GET: every item queued for the data connections, or refused. */
static int
sv_do_get(struct sv_session *s, const uint8_t *p, size_t len, uint8_t *buf)
{
	struct sv_server *srv = s->srv;
	struct sv_item	*head = NULL, **tail = &head, *q;
	struct bmp_rd	 r;
	struct bmp_item	 it;
	struct sv_get	*g;
	const char	*why = NULL;
	uint64_t	 cost, qb = 0;
	uint32_t	 id;
	uint16_t	 n, i;
	size_t		 nq = 0, fl;
	int		 rc;

	if (bmp_dec_get(p, len, &id, &n, &r) != 0)
		return BM_EPROTO;
	/* Its cost once queued: wire bytes plus SV_ITEM_COST an item. */
	cost = (uint64_t)len - 6 + (uint64_t)n * SV_ITEM_COST;
	(void)pthread_mutex_lock(&srv->lock);
	if (s->queued + n > SV_QUEUE_MAX)
		why = "items";
	else if (s->qbytes + cost > srv->sc->max_queued_bytes)
		why = "bytes";
	else if (srv->qbytes + cost > srv->max_qbytes)
		why = "bytes of all sessions";
	(void)pthread_mutex_unlock(&srv->lock);
	if (why != NULL) {
		sv_refused(srv, s->ctl, "export %s: GET %u: too many %s queued "
		    "(%d items, max_queued_bytes %llu a session, %llu in all)",
		    s->exp->conf->name, id, why, SV_QUEUE_MAX,
		    (unsigned long long)srv->sc->max_queued_bytes,
		    (unsigned long long)srv->max_qbytes);
		return sv_ctl_error(s, id, BMP_NO_INDEX, BMP_E_LIMIT,
		    "too much queued");
	}
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return BM_ENOMEM;
	g->id = id;
	g->n = n;
	for (i = 0, rc = 0; i < n && rc == 0; i++) {
		if ((rc = bmp_dec_item(&r, &it)) != 0)
			break;
		rc = sv_item_new(g, i, &it, &q);
		if (rc == BM_EUNSAFE) {
			sv_refused(s->srv, s->ctl, "export %s: GET %u: unsafe "
			    "path '%.*s'", s->exp->conf->name, id,
			    (int)(it.path.len > 200 ? 200 : it.path.len),
			    (const char *)it.path.p);
			g->failed++;
			rc = sv_ctl_error(s, id, i, BMP_E_UNSAFE,
			    "path outside the export");
			continue;
		}
		if (rc == 0) {
			*tail = q;
			tail = &q->next;
			nq++;
			qb += q->cost;
		}
	}
	if (rc == 0 && bmp_rd_end(&r) != 0)
		rc = BM_EPROTO;
	if (rc != 0) {
		while ((q = head) != NULL) {
			head = q->next;
			free(q->path);
			free(q);
		}
		free(g);
		return rc;
	}
	if (nq == 0) {
		rc = bmp_enc_get_end(id, 0, g->failed, buf, BMP_HDR_LEN + 64,
		    &fl);
		free(g);
		return rc != 0 ? rc : sv_ctl_send(s, buf, fl);
	}
	(void)pthread_mutex_lock(&s->srv->lock);
	if (s->tail != NULL)
		s->tail->next = head;
	else
		s->head = head;
	for (q = head; q->next != NULL; q = q->next)
		continue;
	s->tail = q;
	s->queued += nq;
	s->qbytes += qb;
	srv->qbytes += qb;
	(void)pthread_cond_broadcast(&s->cond);
	(void)pthread_mutex_unlock(&s->srv->lock);
	return 0;
}

/* See serve_int.h. */
bool
sv_busy(const struct sv_session *s)
{
	/* Queued items wait for a data connection: idle without one. */
	return (s->queued > 0 && s->ndata > 0) || s->inflight > 0;
}

/*
 * Whether the session should end for want of activity or for a drain
 * (logged, ERROR sent).  Called between frames.
 */
static bool
sv_should_end(struct sv_session *s)
{
	struct sv_server *srv = s->srv;
	bool		 idle, busy;
	int64_t		 ms;

	(void)pthread_mutex_lock(&srv->lock);
	busy = sv_busy(s);
	ms = sv_ms_since(&s->last);
	(void)pthread_mutex_unlock(&srv->lock);
	idle = !busy && ms >= (int64_t)srv->sc->idle_timeout * 1000;
	if (idle) {
		log_warnx("serve: %s: export %s: idle timeout (%u s): session "
		    "closed", s->ctl->peer, s->exp->conf->name,
		    srv->sc->idle_timeout);
		(void)sv_ctl_error(s, 0, BMP_NO_INDEX, BMP_E_TIMEOUT,
		    "idle timeout");
		return true;
	}
	if (!busy && atomic_load(&srv->draining)) {
		(void)sv_ctl_error(s, 0, BMP_NO_INDEX, BMP_E_SHUTDOWN,
		    "server shutting down");
		return true;
	}
	return false;
}

/* Read and dispatch requests until the session ends. */
static void
sv_loop(struct sv_session *s, uint8_t *buf)
{
	struct sv_server *srv = s->srv;
	uint8_t		 type;
	size_t		 len;
	int		 rc, w;

	for (;;) {
		if (sv_should_end(s))
			return;
		if ((w = sv_wait(s->ctl, SV_SLICE_MS)) < 0)
			return;
		if (w == 0)
			continue;
		rc = sv_read_frame(s->ctl, buf, BMP_HDR_LEN + BMP_FRAME_MAX,
		    (int)srv->sc->idle_timeout * 1000, &type, &len);
		if (rc == BM_ELIMIT) {
			sv_refused(srv, s->ctl, "export %s: frame over %d "
			    "bytes or too slow", s->exp->conf->name,
			    BMP_FRAME_MAX);
			(void)sv_ctl_error(s, 0, BMP_NO_INDEX, BMP_E_LIMIT,
			    "frame too large or too slow");
			return;
		}
		if (rc == BM_EPROTO) {	/* a type this version does not know */
			sv_refused(srv, s->ctl, "export %s: unknown frame "
			    "type %u", s->exp->conf->name, buf[4]);
			(void)sv_ctl_error(s, 0, BMP_NO_INDEX, BMP_E_PROTO,
			    "unknown frame type");
			return;
		}
		if (rc != 0)
			return;		/* gone, cut */
		(void)pthread_mutex_lock(&srv->lock);
		(void)clock_gettime(CLOCK_MONOTONIC, &s->last);
		(void)pthread_mutex_unlock(&srv->lock);
		if (type == BMP_BYE)
			return;
		if (atomic_load(&srv->draining) && (type == BMP_LIST ||
		    type == BMP_GET)) {
			(void)sv_ctl_error(s, 0, BMP_NO_INDEX, BMP_E_SHUTDOWN,
			    "server shutting down");
			continue;
		}
		if (type == BMP_LIST)
			rc = sv_do_list(s, buf + BMP_HDR_LEN, len, buf);
		else if (type == BMP_GET)
			rc = sv_do_get(s, buf + BMP_HDR_LEN, len, buf);
		else
			rc = BM_EPROTO;
		if (rc == BM_EPROTO) {
			sv_refused(srv, s->ctl, "export %s: malformed or "
			    "unexpected frame (type %u)", s->exp->conf->name,
			    type);
			(void)sv_ctl_error(s, 0, BMP_NO_INDEX, BMP_E_PROTO,
			    "malformed or unexpected frame");
		}
		if (rc != 0)
			return;
	}
}

/* Take the session off the list, stop its data connections, wait. */
static void
sv_session_end(struct sv_session *s)
{
	struct sv_server *srv = s->srv;
	struct sv_session **pp;
	struct sv_conn	*c;
	struct sv_item	*q;

	(void)pthread_mutex_lock(&srv->lock);
	for (pp = &srv->sessions; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	s->closing = true;
	(void)pthread_cond_broadcast(&s->cond);
	for (c = srv->conns; c != NULL; c = c->next)
		if (c->sess == s)
			(void)shutdown(c->fd, SHUT_RDWR);
	while (s->ndata > 0)
		(void)pthread_cond_wait(&srv->cond, &srv->lock);
	while ((q = s->head) != NULL) {
		s->head = q->next;
		srv->qbytes -= q->cost;
		if (q->next == NULL || q->next->get != q->get)
			free(q->get);	/* the last queued item of its GET */
		free(q->path);
		free(q);
	}
	srv->nsessions--;
	(void)pthread_cond_broadcast(&srv->cond);
	(void)pthread_mutex_unlock(&srv->lock);
}

/*
 * The thread of a control connection whose first frame (payload p, len
 * bytes) was HELLO.  Returns when the session is over; c is the caller's.
 */
void
sv_session_run(struct sv_conn *c, const uint8_t *p, size_t len)
{
	struct sv_session	*s = NULL;
	struct bmp_hello	 h;
	uint8_t			*buf = NULL, proof[BMP_DIGEST_LEN];
	struct timespec		 t0;
	bool			 counted = false, started = false;
	int			 rc;

	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	if (bmp_dec_hello(p, len, &h) != 0) {
		sv_refused(c->srv, c, "malformed HELLO");
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_PROTO,
		    "malformed HELLO");
		goto out;
	}
	if ((buf = malloc(BMP_HDR_LEN + BMP_FRAME_MAX)) == NULL ||
	    (s = calloc(1, sizeof(*s))) == NULL)
		goto out;
	s->srv = c->srv;
	s->ctl = c;
	s->root = -1;
	s->snapshot = -1;
	s->last = t0;
	s->version = h.version < BMP_VERSION ? h.version : BMP_VERSION;
	(void)pthread_mutex_init(&s->wlock, NULL);
	(void)pthread_cond_init(&s->cond, NULL);
	(void)pthread_mutex_lock(&c->srv->lock);
	c->ctl_of = s;		/* a drain may cut its idle reads */
	(void)pthread_mutex_unlock(&c->srv->lock);
	if ((s->exp = sv_admit(c, &h)) == NULL)
		goto out;
	counted = true;
	if (sv_handshake(s, &h, buf, proof) != 0)
		goto out;
	rc = sv_start(s, proof, buf);
	started = s->listed;
	if (rc == 0)
		sv_loop(s, buf);
out:
	if (started) {
		sv_session_end(s);
		log_info("serve: %s: export %s: session ended: %llu files, "
		    "%llu bytes, %llu failed, %.3f s", c->peer,
		    s->exp->conf->name, (unsigned long long)s->files,
		    (unsigned long long)s->bytes,
		    (unsigned long long)s->failed,
		    (double)sv_ms_since(&t0) / 1000.0);
		sv_metrics(c->srv);
	} else if (counted) {
		(void)pthread_mutex_lock(&c->srv->lock);
		c->srv->nsessions--;
		(void)pthread_cond_broadcast(&c->srv->cond);
		(void)pthread_mutex_unlock(&c->srv->lock);
	}
	if (s != NULL) {
		(void)pthread_mutex_lock(&c->srv->lock);
		c->ctl_of = NULL;
		(void)pthread_mutex_unlock(&c->srv->lock);
		if (s->root != -1)
			(void)close(s->root);
		sv_digests_put(c->srv, s->dg);
		OPENSSL_cleanse(s->key, sizeof(s->key));
		(void)pthread_mutex_destroy(&s->wlock);
		(void)pthread_cond_destroy(&s->cond);
		free(s);
	}
	free(buf);
}
