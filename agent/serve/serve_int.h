/*
 * biomirror serve's private header (agent/serve/ only).  One thread per
 * connection: a connection's first frame makes it a control connection
 * (HELLO: session.c) or a data connection (ATTACH: data.c).  Everything
 * shared (the session list, each session's item queue, counters) is
 * under the server's one mutex; each session's control connection has
 * its own write lock, since data threads report item errors on it.
 */
#ifndef BIOMIRROR_SERVE_INT_H
#define BIOMIRROR_SERVE_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "biomirror/bmproto.h"
#include "biomirror/config.h"

#define SV_QUEUE_MAX	65536		/* GET items queued per session */
#define SV_ITEM_COST	64		/* bytes an item costs beyond its wire
					   bytes (max_queued_bytes) */
#define SV_QUEUE_TOTAL	(64ULL << 20)	/* queued bytes of all sessions (or
					   max_queued_bytes, if larger) */
#define SV_BUF		(256 * 1024)	/* bytes read per pread of a file */
#define SV_DIGEST_FRAME	(BMP_HDR_LEN + 39) /* a DIGEST frame's bytes */
#define SV_HELLO_MS	10000		/* first frame of a connection */
#define SV_SLICE_MS	250		/* poll slice: drain, cut, idle checks */
#define SV_SECRET_MAX	4096		/* bytes of a secret file */
#define SV_HASHED_SLOTS	65536		/* file versions hashed as served
					   that the server keeps (72 B each) */
#define SV_HASHED_SETTLE_NS 1000000000LL /* their ctime that much older
					   than the read (digests.c) */
#define SV_WHOLE_SLOTS	1024		/* a session's paths served whole
					   with a known digest, remembered
					   (8 KiB), in buckets of */
#define SV_WHOLE_WAYS	4		/* paths, the newest kept */

/* An export as served. */
struct sv_export {
	const struct export_conf *conf;	/* borrowed: the section */
	const char	*root;		/* borrowed: path, or the mirror's dest */
	bool		 set;		/* a publish = set mirror: pin snapshots */
	uint8_t		*secret;	/* owned: NULL = anonymous */
	size_t		 secret_len;
	char		*manifest;	/* owned: a served mirror's manifest
					   path (its digests), NULL none */
	struct sv_digests *dg;		/* the table loaded last (one
					   reference; under srv->lock), NULL */
	int64_t		 dg_failed[4];	/* the manifest's stamp when a load
					   last failed (not tried again,
					   nor logged, until it changes) */
};

struct sv_digests;
struct sv_hashed;

struct sv_session;

/* One accepted TCP connection and its thread. */
struct sv_conn {
	struct sv_server *srv;		/* borrowed */
	int		 fd;		/* owned socket */
	int		 family;	/* AF_INET or AF_INET6 (v4-mapped: 4) */
	uint8_t		 addr[16];	/* peer address */
	char		 peer[64];	/* "ADDR:PORT" for log lines */
	struct sv_session *sess;	/* borrowed: a data connection's */
	struct sv_session *ctl_of;	/* borrowed: the session this is the
					   control connection of, NULL */
	atomic_bool	 first;		/* its first frame not yet read */
	struct sv_conn	*next;		/* server's list */
};

/* A GET request: its items count down to GET_END. */
struct sv_get {
	uint32_t	 id;
	uint16_t	 n;		/* items */
	uint16_t	 done, failed;	/* ended so far */
};

/* One queued item. */
struct sv_item {
	struct sv_get	*get;		/* owned by the last item to end */
	uint16_t	 index;
	char		*path;		/* owned, NUL-terminated, checked */
	uint64_t	 off, len;
	size_t		 cost;		/* bytes counted in qbytes */
	struct sv_item	*next;
};

struct sv_session {
	struct sv_server *srv;		/* borrowed */
	struct sv_conn	*ctl;		/* borrowed: control connection */
	const struct sv_export *exp;	/* borrowed */
	int		 root;		/* owned dir fd (holds a set's lock) */
	int64_t		 snapshot;	/* pinned snapshot id, -1 none */
	uint16_t	 version;	/* negotiated */
	uint8_t		 token[BMP_KEY_LEN];
	uint8_t		 key[BMP_KEY_LEN]; /* session key (keyed only) */
	bool		 keyed;		/* export has a secret */
	uint32_t	 features;	/* negotiated BMP_F_* */
	struct sv_digests *dg;		/* a reference: the export's recorded
					   digests, NULL none */
	pthread_mutex_t	 wlock;		/* writes on ctl->fd */
	pthread_cond_t	 cond;		/* queue or closing changed */
	struct sv_item	*head, *tail;	/* owned queue */
	size_t		 queued;	/* items in the queue */
	uint64_t	 qbytes;	/* their cost (SV_ITEM_COST) */
	size_t		 inflight;	/* items being sent */
	size_t		 ndata;		/* attached data connections */
	bool		 closing;	/* data threads must leave */
	bool		 listed;	/* on the server's list (sv_start) */
	struct timespec	 last;		/* last activity (monotonic) */
	uint64_t	 files, bytes, failed; /* served, for the session line */
	uint64_t	 whole[SV_WHOLE_SLOTS]; /* under srv->lock: FNV-1a of
					   the paths served whole with a
					   known digest (sv_asked_again) */
	struct sv_session *next;	/* server's list */
};

struct sv_server {
	const struct config *conf;	/* borrowed */
	const struct serve_conf *sc;	/* borrowed: &conf->serve */
	struct sv_export *exports;	/* owned */
	size_t		 nexports;
	int		 lfd;		/* listening socket */
	pthread_mutex_t	 lock;		/* everything below */
	pthread_cond_t	 cond;		/* a connection or session ended */
	struct sv_conn	*conns;		/* every open connection */
	size_t		 nconns;
	size_t		 max_conns;	/* open connections at once */
	size_t		 max_per_addr;	/* of them from one address */
	uint64_t	 qbytes;	/* every session's qbytes */
	uint64_t	 max_qbytes;	/* all sessions' queued bytes */
	struct sv_session *sessions;	/* sessions with a token */
	size_t		 nsessions;	/* sessions counted against max_clients */
	atomic_bool	 draining;	/* SIGTERM: no new sessions */
	atomic_bool	 cut;		/* drain timeout: end every transfer */
	uint64_t	 m_sessions, m_files, m_bytes, m_refused;
	struct sv_hashed *_Atomic hashed; /* owned: digests hashed as
					   served (digests.c), NULL until the
					   first; set once, under lock */
	/*
	 * Test-only hooks (tests/functional/t_89, t_90; never set in
	 * production): the environment's BM_SERVE_TEST_CORRUPT=PATH flips
	 * one byte of the first item of PATH served (after it was hashed:
	 * the digest no longer matches); BM_SERVE_TEST_STOP=PATH stops the
	 * server (SIGSTOP) when the middle byte of PATH is next to be sent
	 * (what came before was sent whole).  Once per process each.
	 */
	const char	*state_dir;	/* borrowed: manifests of mirrors */
	const char	*test_corrupt;	/* borrowed (environ), NULL: off */
	const char	*test_stop;	/* borrowed (environ), NULL: off */
	atomic_bool	 test_corrupted, test_stopped;
};

/* io.c: framed I/O on a connection, bounded in time and size. */
int	sv_wait(struct sv_conn *c, int ms);
int	sv_read_full(struct sv_conn *c, void *buf, size_t len, int ms);
int	sv_read_frame(struct sv_conn *c, uint8_t *buf, size_t cap, int ms,
	    uint8_t *ret_type, size_t *ret_len);
int	sv_write(struct sv_conn *c, const void *buf, size_t len);
int	sv_write_more(struct sv_conn *c, const void *buf, size_t len,
	    bool more);
int	sv_sendfile(struct sv_conn *c, int fd, uint64_t off, uint64_t len);
int	sv_send_error(struct sv_conn *c, uint32_t id, uint16_t index,
	    uint16_t code, const char *msg);
void	sv_refused(struct sv_server *srv, const struct sv_conn *c,
	    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int64_t	sv_ms_since(const struct timespec *t);

/* tree.c: paths beneath an export's root. */
int	sv_open_beneath(int root, const char *path, int flags, int *ret_fd);
int	sv_list(struct sv_session *s, uint32_t id, const char *path,
	    uint64_t *ret_count);
int	sv_open_root(const struct sv_export *e, int *ret_fd,
	    int64_t *ret_snap);
uint16_t sv_wire_error(int rc);

/*
 * digests.c: the digests the server knows, a served mirror's recorded
 * ones (sv_digests_get) and those hashed as served (sv_hashed_note).
 */
struct sv_digests *sv_digests_get(struct sv_server *srv,
	    const struct sv_export *e);
void	sv_digests_put(struct sv_server *srv, struct sv_digests *t);
bool	sv_digest_of(const struct sv_session *s, const char *path,
	    const struct stat *st, uint8_t d[BMP_DIGEST_LEN]);
void	sv_hashed_note(struct sv_server *srv, int fd,
	    const struct stat *before, int64_t start_ns,
	    const uint8_t d[BMP_DIGEST_LEN]);
void	sv_hashed_free(struct sv_server *srv);
void	sv_hashed_forget(struct sv_server *srv, const struct stat *st);
void	sv_digests_drop(struct sv_export *e);

/* session.c: whether c may use export e (its allow ranges). */
bool	sv_allowed(const struct sv_export *e, const struct sv_conn *c);
/* Under srv->lock: whether s has an item in flight (or one to send). */
bool	sv_busy(const struct sv_session *s);

/* session.c, data.c: a connection's thread after its first frame. */
void	sv_session_run(struct sv_conn *c, const uint8_t *p, size_t len);
void	sv_data_run(struct sv_conn *c, const uint8_t *p, size_t len);

/* serve.c */
void	sv_metrics(struct sv_server *srv);

#endif
