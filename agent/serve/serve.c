/*
 * biomirror serve's listener (include/biomirror/serve.h): the exports
 * resolved and their secrets read once at start, one listening socket,
 * a thread per accepted connection (signals blocked in it, so that
 * SIGTERM reaches this thread's poll), caps on open connections
 * (max_clients * (max_connections + 1)) checked before a byte is read.
 * SIGTERM: the socket is closed, sessions end once nothing is in flight,
 * and after drain_timeout every connection left is cut (shutdown(2)).
 * The metrics file (Prometheus textfile, its own, never a sync's) is
 * rewritten after every session and at exit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "biomirror/error.h"
#include "biomirror/fileio.h"
#include "biomirror/log.h"
#include "biomirror/serve.h"
#include "biomirror/state.h"

#include "serve_int.h"

/* Read a secret file (config_read_secret(): checked as at config time). */
static int
sv_read_secret(const char *path, uint8_t **ret, size_t *ret_len)
{
	char	 why[512];
	int	 rc;

	if ((rc = config_read_secret(path, ret, ret_len, why,
	    sizeof(why))) != 0)
		log_warnx("serve: %s", rc == BM_ENOMEM ? "out of memory" :
		    why);
	return rc;
}

/* The manifest path of mirror name under dir into *ret (malloc'd). */
static int
sv_manifest_path(const char *dir, const char *name, char **ret)
{
	char	 path[PATH_MAX];

	if (state_manifest_path(dir, name, path, sizeof(path)) != 0)
		return BM_ELIMIT;
	if ((*ret = strdup(path)) == NULL)
		return BM_ENOMEM;
	return 0;
}

/* The config's exports as served: roots found, secrets read. */
static int
sv_exports(struct sv_server *srv)
{
	const struct config	*c = srv->conf;
	struct sv_export	*e;
	struct mirror_conf	*m;
	const char		*sf;
	struct stat		 st;
	size_t			 i;
	int			 rc;

	if ((srv->exports = calloc(c->nexports + 1, sizeof(*e))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < c->nexports; i++) {
		e = &srv->exports[srv->nexports++];
		e->conf = c->exports[i];
		if (e->conf->mirror != NULL) {
			m = config_find(c, e->conf->mirror);
			e->root = m->dest;
			e->set = m->publish == PUBLISH_SET;
			if (srv->state_dir != NULL && (rc = sv_manifest_path(
			    srv->state_dir, m->name, &e->manifest)) != 0)
				return rc;
			e->dg_failed[0] = -1;	/* no load failed yet */
		} else
			e->root = e->conf->path;
		if (!e->set && (stat(e->root, &st) == -1 ||
		    !S_ISDIR(st.st_mode))) {
			log_errx("serve: export %s: %s: not a directory",
			    e->conf->name, e->root);
			return BM_EINVAL;
		}
		sf = e->conf->secret_file != NULL ? e->conf->secret_file :
		    srv->sc->secret_file;
		if (sf != NULL && sv_read_secret(sf, &e->secret,
		    &e->secret_len) != 0)
			return BM_EINVAL;
	}
	return 0;
}

/* The listening socket on [serve] listen (or --listen). */
static int
sv_listen(struct sv_server *srv, const char *spec)
{
	struct sockaddr_storage	 ss;
	struct sockaddr_in	*s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6	*s6 = (struct sockaddr_in6 *)&ss;
	uint8_t			 addr[16];
	uint16_t		 port;
	int			 fam, fd, one = 1;
	socklen_t		 sl;

	if (parse_listen(spec, &fam, addr, &port) != 0) {
		log_errx("serve: listen %s: expected ADDR:PORT", spec);
		return BM_EINVAL;
	}
	memset(&ss, 0, sizeof(ss));
	if (fam == AF_INET) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, addr, 4);
		sl = sizeof(*s4);
	} else {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, addr, 16);
		sl = sizeof(*s6);
	}
	if ((fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ==
	    -1 || bind(fd, (struct sockaddr *)&ss, sl) == -1 ||
	    listen(fd, 128) == -1) {
		log_err("serve: listen %s", spec);
		if (fd != -1)
			(void)close(fd);
		return BM_ENET;
	}
	srv->lfd = fd;
	return 0;
}

/* Rewrite metrics_file (tmp + rename); a failure is logged, not fatal. */
void
sv_metrics(struct sv_server *srv)
{
	const char	*path = srv->sc->metrics_file;
	char		 tmp[4096];
	FILE		*fp;
	int		 n, bad;

	if (path == NULL)
		return;
	n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (n < 0 || (size_t)n >= sizeof(tmp) ||
	    (fp = fopen(tmp, "we")) == NULL) {
		log_warn("serve: metrics_file %s", path);
		return;
	}
	(void)pthread_mutex_lock(&srv->lock);
	fprintf(fp, "# HELP biomirror_serve_sessions_total Sessions "
	    "started.\n# TYPE biomirror_serve_sessions_total counter\n"
	    "biomirror_serve_sessions_total %llu\n"
	    "# HELP biomirror_serve_sessions Sessions open now.\n"
	    "# TYPE biomirror_serve_sessions gauge\n"
	    "biomirror_serve_sessions %zu\n"
	    "# HELP biomirror_serve_files_total Files and ranges served.\n"
	    "# TYPE biomirror_serve_files_total counter\n"
	    "biomirror_serve_files_total %llu\n"
	    "# HELP biomirror_serve_bytes_total Bytes of files served.\n"
	    "# TYPE biomirror_serve_bytes_total counter\n"
	    "biomirror_serve_bytes_total %llu\n"
	    "# HELP biomirror_serve_refused_total Requests refused.\n"
	    "# TYPE biomirror_serve_refused_total counter\n"
	    "biomirror_serve_refused_total %llu\n",
	    (unsigned long long)srv->m_sessions, srv->nsessions,
	    (unsigned long long)srv->m_files,
	    (unsigned long long)srv->m_bytes,
	    (unsigned long long)srv->m_refused);
	(void)pthread_mutex_unlock(&srv->lock);
	bad = ferror(fp);
	if (fclose(fp) != 0 || bad || rename(tmp, path) == -1) {
		log_warn("serve: metrics_file %s", path);
		(void)unlink(tmp);
	}
}

/* A connection's thread: its first frame says what it is. */
static void *
sv_conn_main(void *arg)
{
	struct sv_conn	*c = arg, **pp;
	struct sv_server *srv = c->srv;
	uint8_t		 buf[BMP_HDR_LEN + 256], type = 0;
	size_t		 len = 0;
	int		 rc;

	rc = sv_read_frame(c, buf, sizeof(buf), SV_HELLO_MS, &type, &len);
	atomic_store(&c->first, false);
	if (rc == BM_ELIMIT || rc == BM_EPROTO || (rc == 0 &&
	    type != BMP_HELLO && type != BMP_ATTACH)) {
		sv_refused(srv, c, "first frame is not HELLO or ATTACH%s",
		    rc == BM_ELIMIT ? " (too large, or too slow)" : "");
		(void)sv_send_error(c, 0, BMP_NO_INDEX, rc == BM_ELIMIT ?
		    BMP_E_LIMIT : BMP_E_PROTO, "expected HELLO or ATTACH");
	} else if (rc == 0 && type == BMP_HELLO)
		sv_session_run(c, buf + BMP_HDR_LEN, len);
	else if (rc == 0)
		sv_data_run(c, buf + BMP_HDR_LEN, len);
	(void)pthread_mutex_lock(&srv->lock);
	for (pp = &srv->conns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	srv->nconns--;
	(void)pthread_cond_broadcast(&srv->cond);
	(void)pthread_mutex_unlock(&srv->lock);
	(void)close(c->fd);
	free(c);
	return NULL;
}

/* The peer's address (v4-mapped v6 as v4) and "ADDR:PORT" text. */
static void
sv_peer(struct sv_conn *c, const struct sockaddr_storage *ss)
{
	const struct sockaddr_in  *s4 = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
	char		 a[INET6_ADDRSTRLEN];
	unsigned	 port;

	memset(c->addr, 0, sizeof(c->addr));
	if (ss->ss_family == AF_INET6 &&
	    !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		c->family = AF_INET6;
		memcpy(c->addr, &s6->sin6_addr, 16);
		port = ntohs(s6->sin6_port);
	} else if (ss->ss_family == AF_INET6) {
		c->family = AF_INET;
		memcpy(c->addr, (const uint8_t *)&s6->sin6_addr + 12, 4);
		port = ntohs(s6->sin6_port);
	} else {
		c->family = AF_INET;
		memcpy(c->addr, &s4->sin_addr, 4);
		port = ntohs(s4->sin_port);
	}
	if (inet_ntop(c->family, c->addr, a, sizeof(a)) == NULL)
		(void)snprintf(a, sizeof(a), "?");
	(void)snprintf(c->peer, sizeof(c->peer), c->family == AF_INET6 ?
	    "[%s]:%u" : "%s:%u", a, port);
}

/*
 * Whether some export may admit c: one without an allow list, or one
 * whose ranges hold c's address (checked again at HELLO, per export).
 */
static bool
sv_allowed_any(const struct sv_server *srv, const struct sv_conn *c)
{
	size_t	 i;

	for (i = 0; i < srv->nexports; i++)
		if (sv_allowed(&srv->exports[i], c))
			return true;
	return false;
}

/*
 * Accept one connection and start its thread, or refuse it before a
 * byte is read: an address no export allows, max_per_address from one
 * address, max_clients * (max_connections + 1) in all.
 */
static void
sv_accept(struct sv_server *srv)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sl = sizeof(ss);
	struct sv_conn		*c, *o;
	struct timeval		 tv;
	sigset_t		 all, old;
	pthread_attr_t		 at;
	pthread_t		 t;
	size_t			 same;
	bool			 full;
	int			 fd, one = 1;

	if ((fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl,
	    SOCK_CLOEXEC)) == -1)
		return;
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		(void)close(fd);
		return;
	}
	c->srv = srv;
	c->fd = fd;
	sv_peer(c, &ss);
	atomic_init(&c->first, true);
	tv.tv_sec = srv->sc->idle_timeout;
	tv.tv_usec = 0;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!sv_allowed_any(srv, c)) {
		sv_refused(srv, c, "address not in any export's allow list");
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_DENIED,
		    "address not allowed");
		goto out;
	}
	(void)pthread_mutex_lock(&srv->lock);
	for (o = srv->conns, same = 0; o != NULL; o = o->next)
		if (o->family == c->family &&
		    memcmp(o->addr, c->addr, sizeof(c->addr)) == 0)
			same++;
	full = srv->nconns >= srv->max_conns;
	if (!full && same < srv->max_per_addr) {
		c->next = srv->conns;
		srv->conns = c;
		srv->nconns++;
	}
	(void)pthread_mutex_unlock(&srv->lock);
	if (full || same >= srv->max_per_addr) {
		if (full)
			sv_refused(srv, c, "too many connections (%zu open)",
			    srv->max_conns);
		else
			sv_refused(srv, c, "too many connections from one "
			    "address (max_per_address %zu)",
			    srv->max_per_addr);
		(void)sv_send_error(c, 0, BMP_NO_INDEX, BMP_E_LIMIT,
		    "too many connections");
		goto out;
	}
	(void)sigfillset(&all);
	(void)pthread_sigmask(SIG_BLOCK, &all, &old);
	(void)pthread_attr_init(&at);
	(void)pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, sv_conn_main, c) != 0) {
		log_warnx("serve: %s: cannot start a thread", c->peer);
		(void)pthread_mutex_lock(&srv->lock);
		srv->conns = c->next;
		srv->nconns--;
		(void)pthread_mutex_unlock(&srv->lock);
	} else
		c = NULL;	/* the thread's */
	(void)pthread_attr_destroy(&at);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
out:
	if (c != NULL) {
		(void)close(fd);
		free(c);
	}
}

/* Wait at most ms for every connection to end; true when they did. */
static bool
sv_wait_conns(struct sv_server *srv, int64_t ms)
{
	struct timespec	 t0, dl;
	bool		 done;

	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	(void)pthread_mutex_lock(&srv->lock);
	while (srv->nconns > 0 && sv_ms_since(&t0) < ms) {
		(void)clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += SV_SLICE_MS * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&srv->cond, &srv->lock, &dl);
	}
	done = srv->nconns == 0;
	(void)pthread_mutex_unlock(&srv->lock);
	return done;
}

/*
 * SIGTERM: no new sessions, drain_timeout for transfers, then cut.
 * Returns false when a transfer was cut (an item in flight or queued
 * with a data connection), true otherwise.
 */
static bool
sv_drain(struct sv_server *srv, int sig)
{
	struct sv_conn		*c;
	struct sv_session	*s;
	bool			 inflight = false;

	(void)pthread_mutex_lock(&srv->lock);
	log_info("serve: %s: draining %zu session%s (at most %u s)",
	    strsignal(sig), srv->nsessions, srv->nsessions == 1 ? "" : "s",
	    srv->sc->drain_timeout);
	(void)pthread_mutex_unlock(&srv->lock);
	atomic_store(&srv->draining, true);
	(void)close(srv->lfd);
	srv->lfd = -1;
	if (sv_wait_conns(srv, (int64_t)srv->sc->drain_timeout * 1000))
		return true;
	atomic_store(&srv->cut, true);
	(void)pthread_mutex_lock(&srv->lock);
	log_warnx("serve: drain timeout: cutting %zu connection%s",
	    srv->nconns, srv->nconns == 1 ? "" : "s");
	for (c = srv->conns; c != NULL; c = c->next)
		(void)shutdown(c->fd, SHUT_RDWR);
	for (s = srv->sessions; s != NULL; s = s->next) {
		inflight = inflight || sv_busy(s);
		(void)pthread_cond_broadcast(&s->cond);
	}
	(void)pthread_mutex_unlock(&srv->lock);
	(void)sv_wait_conns(srv, INT64_MAX);
	return !inflight;
}

/* See include/biomirror/serve.h. */
int
serve_run(const struct config *c, const struct serve_opts *o,
    volatile sig_atomic_t *stop)
{
	struct sv_server *srv;
	struct sigaction sa;
	struct pollfd	 pfd;
	const char	*spec;
	size_t		 i;
	int		 status = 2;
	bool		 drained;

	if ((srv = calloc(1, sizeof(*srv))) == NULL)
		return 2;
	srv->conf = c;
	srv->sc = &c->serve;
	srv->lfd = -1;
	srv->state_dir = o->state_dir;
	srv->test_corrupt = getenv("BM_SERVE_TEST_CORRUPT");
	srv->test_stop = getenv("BM_SERVE_TEST_STOP");
	srv->max_conns = (size_t)c->serve.max_clients *
	    (c->serve.max_connections + 1);
	srv->max_per_addr = c->serve.max_per_address != 0 ?
	    c->serve.max_per_address : 2 * ((size_t)c->serve.max_connections +
	    1);
	srv->max_qbytes = c->serve.max_queued_bytes > SV_QUEUE_TOTAL ?
	    c->serve.max_queued_bytes : SV_QUEUE_TOTAL;
	(void)pthread_mutex_init(&srv->lock, NULL);
	(void)pthread_cond_init(&srv->cond, NULL);
	spec = o->listen != NULL ? o->listen : c->serve.listen != NULL ?
	    c->serve.listen : "0.0.0.0:7722";
	if (c->nexports == 0) {
		log_errx("serve: no exports (add an [export NAME] section, or "
		    "--export NAME=DIR)");
		goto out;
	}
	if (sv_exports(srv) != 0 || sv_listen(srv, spec) != 0)
		goto out;
	log_info("serve: listening on %s (%zu export%s, max_clients %u, "
	    "max_connections %u)", spec, srv->nexports, srv->nexports == 1 ?
	    "" : "s", c->serve.max_clients, c->serve.max_connections);
	sv_metrics(srv);
	/* Config is read once: SIGHUP does not stop serve (biomirror(1)). */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	(void)sigaction(SIGHUP, &sa, NULL);
	pfd.fd = srv->lfd;
	pfd.events = POLLIN;
	while (*stop == 0) {
		if (poll(&pfd, 1, 1000) > 0 && *stop == 0)
			sv_accept(srv);
	}
	drained = sv_drain(srv, *stop);
	log_info("serve: stopped%s", drained ? "" : " (transfers were cut)");
	sv_metrics(srv);
	status = drained ? 0 : 1;
out:
	if (srv->lfd != -1)
		(void)close(srv->lfd);
	for (i = 0; i < srv->nexports; i++) {
		if (srv->exports[i].secret != NULL)
			OPENSSL_cleanse(srv->exports[i].secret,
			    srv->exports[i].secret_len);
		free(srv->exports[i].secret);
		sv_digests_drop(&srv->exports[i]);
	}
	free(srv->exports);
	sv_hashed_free(srv);
	(void)pthread_mutex_destroy(&srv->lock);
	(void)pthread_cond_destroy(&srv->cond);
	free(srv);
	return status;
}
