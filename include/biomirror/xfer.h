/*
 * The transport seam (DESIGN.md): a transport takes jobs "fetch bytes
 * [off, off+len) of this upstream URL into this sink" and reports each
 * job's end with the response metadata (size, mtime, ETag) or an error
 * class.  The scheduler sees only struct xfer and the calls below, which
 * go through the transport's table (struct xfer_ops); xfer_open() picks
 * the transport for a source.  Only transports touch sockets.  The
 * transports: docs/internals.md, "The transports (`xfer.h`)"; FTP file
 * jobs: docs/ftp.md, "FTP file jobs".
 */
#ifndef BIOMIRROR_XFER_H
#define BIOMIRROR_XFER_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a job ended, as far as the scheduler cares. */
enum xfer_class {
	XFER_OK = 0,		/* all bytes delivered to the sink */
	XFER_NOT_MODIFIED,	/* 304 to a conditional request */
	XFER_RETRY,		/* transient: connection error, 5xx, 429, stall */
	XFER_PERMANENT,		/* 4xx, bad reply, sink refused the bytes */
	XFER_GONE,		/* 404 or 410 */
	XFER_CHANGED,		/* upstream changed during the transfer */
};

/*
 * A ranged job (len > 0) asks for bytes [off, off+len) with Range; a 206
 * of another range, or a 200 not taken as the whole file, is refused
 * before a byte is written (res.ignored_range).  ETag and Last-Modified
 * are filled in before the first byte.  Sink: len bytes at byte offset
 * off of the file; returns 0 or a BM_E* code, which aborts the job
 * (XFER_PERMANENT, XFER_CHANGED for BM_ECHANGED).  See docs/internals.md,
 * "Ranged jobs and sinks".
 */
typedef int (*xfer_sink_fn)(void *arg, uint64_t off, const void *buf,
    size_t len);

/*
 * What one job measured of the network path (for concurrency/streams =
 * auto, agent/sched/autotune.c); where rtt_us comes from:
 * docs/internals.md, "Auto sizing".  body_us: microseconds from the first
 * response byte to the last (the job's bytes divided by it is the
 * connection's rate).  Both -1 when unknown.
 */
struct xfer_path {
	int64_t		 rtt_us;	/* round-trip time, microseconds, -1 unknown */
	int64_t		 body_us;	/* body transfer time, microseconds, -1 unknown */
	bool		 multiplexed;	/* carried on an HTTP/2 connection */
};

/* Which network carries the data (the transport key). */
enum xfer_net {
	XFER_NET_TCP = 0,
	XFER_NET_UDT,		/* the gridftp transport's data connections
				   (SITE SETNETSTACK udt) */
};

struct xfer_result {
	int		 rc;		/* 0 or BM_E* */
	enum xfer_net	 net;		/* what carried the body (tcp unless
					   the transport says udt) */
	enum xfer_class	 cls;
	long		 status;	/* HTTP status of the final response, 0 if none */
	int64_t		 size;		/* total size from Content-Length/-Range, -1 unknown */
	int64_t		 mtime;		/* Last-Modified, seconds since epoch, -1 unknown */
	char		 etag[256];	/* ETag as sent (quotes kept), "" if none */
	bool		 weak;		/* mtime not before the response's Date
					   second: mtime and ETag may not show a
					   change later in that second */
	char		 content_type[128]; /* Content-Type, "" if none */
	char		 effective_url[2048]; /* URL after redirects */
	char		 location[2048]; /* redirect target not followed, "" if none */
	uint64_t	 bytes;		/* body bytes delivered to the sink */
	long		 retry_after;	/* Retry-After in seconds, -1 if none */
	int64_t		 range_start;	/* Content-Range first byte, -1 if none */
	int64_t		 range_end;	/* Content-Range last byte, -1 if none */
	int64_t		 total;		/* Content-Range total size, -1 if none */
	bool		 full;		/* a ranged request got the whole file (200) */
	bool		 ignored_range;	/* Range not honoured (a 200, or a wrong
					   Content-Range): nothing written */
	bool		 scattered;	/* set before the first byte: bytes
					   reach the sink out of file order
					   (GridFTP MODE E over parallel data
					   connections), so bytes is no
					   contiguous prefix before the job
					   ended */
	char		 errmsg[256];	/* reason when rc != 0 */
	struct xfer_path path;		/* what the job measured of the path */
	bool		 unchecked;	/* set before the first byte: the
					   transport does not check the bytes
					   it hands the sink (bm: a whole file
					   in one item); the caller must hash
					   them and compare with sha256 before
					   it publishes them, and keep a failed
					   try's bytes only if a published
					   digest of the whole file checks them */
	char		 sha256[80];	/* with unchecked: "sha256:HEX" the
					   server sent for the whole body, when
					   the job ended well; "" else */
};

/* What a job asks for. */
enum xfer_kind {
	XFER_JOB_FILE = 0,	/* a file's bytes: whole (len 0) or a range */
	XFER_JOB_PAGE,		/* a listing page: over HTTP a GET of the
				   index page; over FTP the directory URL's
				   listing (ftp.mlsd: MLSD, else LIST) */
	XFER_JOB_VALIDATE,	/* a file's validators, not its body: over
				   HTTP a GET of byte 0 (RFC 9110 14.2: a
				   206's Content-Range total, ETag,
				   Last-Modified; a 200 read no further than
				   its headers), over FTP MDTM + SIZE, no RETR
				   (RFC 3659 sections 3, 4); ends XFER_OK with
				   res.etag, res.mtime, res.size (-1 unknown);
				   off, len and sink unused */
	XFER_JOB_PROBE,		/* what the server offers: over FTP the FEAT
				   reply lines (RFC 2389) to the sink, no data
				   connection */
};

struct xfer_job {
	enum xfer_kind	 kind;		/* what is asked for */
	const char	*url;		/* borrowed: absolute URL; ftps:// is
					   explicit TLS (AUTH TLS) on the FTP
					   port */
	uint64_t	 off;		/* first byte wanted */
	uint64_t	 len;		/* bytes wanted, 0 = to the end (whole file) */
	bool		 accept_full;	/* with off 0: take a 200 as the whole file */
	int64_t		 expect_size;	/* exact size expected, -1 unknown; more is refused */
	uint64_t	 max_size;	/* hard cap on body bytes (rule 31), 0 = none */
	bool		 to_end;	/* a range ending at the listed end
					   of the file: a transport that can
					   asks for the rest of the file (FTP:
					   REST off, RETR to the end), so that
					   a file longer than listed shows as
					   more than len bytes (upstream
					   changed), not a silent cut */
	bool		 in_memory;	/* the sink holds the body in memory (a
					   small file): a small receive buffer */
	uint8_t		*mem;		/* borrowed, NULL if none: with
					   in_memory, the sink's buffer of
					   mem_cap bytes for the whole body,
					   valid until the job is reported or
					   cancelled.  A transport may receive
					   the whole body into it and hand the
					   sink that same pointer (offset 0),
					   which it then does not copy; it
					   writes there no more once the job
					   ended */
	size_t		 mem_cap;	/* bytes at mem, 0 with no mem */
	bool		 size_checked;	/* whole file: the caller checks the body
					   length against an exact listed size
					   (FTP then sends no SIZE) */
	bool		 mtime_listed;	/* the caller has the mtime to the second
					   from the listing (FTP then sends no
					   MDTM; res.mtime stays -1) */
	const char	*if_none_match;	/* borrowed ETag for If-None-Match, NULL if none */
	const char	*if_range;	/* borrowed strong ETag or HTTP-date for
					   If-Range on a ranged job, NULL if none:
					   a 200 then means upstream changed */
	int64_t		 if_modified_since; /* seconds, -1 for none */
	bool		 no_redirect;	/* report 3xx (res.location), do not follow */
	struct {
		bool	 mlsd;		/* an XFER_JOB_PAGE: MLSD, not LIST */
	} ftp;				/* FTP only */
	bool		 listed_exact;	/* listed_size is the listing's exact
					   byte count of the file (bm splits a
					   job into items by it) */
	uint64_t	 listed_size;	/* bytes, when listed_exact */
	size_t		 big_left;	/* big files (listed over XFER_BIG
					   bytes) of the run not yet fetched,
					   this one included, when submitted:
					   bm asks a big file whole when there
					   are two or more and at least as
					   many as its data connections */
	bool		 listed_ns;	/* listed_mtime is the listing's mtime to
					   the ns (bm: every FILE header must
					   agree, else upstream changed) */
	int64_t		 listed_mtime;	/* ns, when listed_ns */
	bool		 listed_sec;	/* listed_secs is the listing's mtime to
					   the second or finer (GridFTP: a
					   resumable whole file then sends no
					   MDTM and reports it as res.mtime) */
	int64_t		 listed_secs;	/* seconds, when listed_sec */
	char		 listed_sha256[80]; /* "sha256:HEX" the listing (or a
					   sidecar) states, "" none: bm puts it
					   in its validator, so that a kept
					   partial of another content is
					   dropped */
	xfer_sink_fn	 sink;		/* where body bytes go */
	void		*sink_arg;	/* borrowed: the sink's state */
	void		*owner;		/* borrowed: the scheduler's record */
	struct xfer_result res;		/* filled in when the job ends */
};

/* FTP's options (ftp:// and ftps:// sources). */
struct xfer_ftp_opts {
	int		 tls;		/* XFER_TLS_NONE, _TRY or _REQUIRE */
	bool		 active;	/* active mode (PORT/EPRT) */
	const char	*user;		/* borrowed: login, NULL = anonymous */
	const char	*password;	/* borrowed: password, NULL if none */
	bool		 gridftp;	/* the server is GridFTP (FEAT lists
					   DCAU; XFER_HINT_GRIDFTP changes it):
					   TYPE I before every file's data
					   connection (it fixes a data
					   connection's type when it opens),
					   and a file named by its whole path,
					   no CWD (it trims a leading space and
					   expands a leading '~' of an
					   argument) */
	bool		 mode_e;	/* ftp_mode = extended: GridFTP's MODE E
					   for MLSD listings and whole files
					   (the "gridftp" transport) */
	unsigned	 streams;	/* MODE E data connections per file
					   (OPTS RETR Parallelism), 0 = 1 */
};

struct xfer_opts {
	enum xfer_net	 net;		/* the transport key */
	unsigned	 max_connections; /* per host, shared by all jobs */
	unsigned	 connect_timeout; /* seconds */
	unsigned	 stall_timeout;	/* seconds without a byte */
	const char	*user_agent;	/* borrowed */
	const char	*ca_file;	/* borrowed, NULL = system trust */
	uint64_t	 bwlimit;	/* bytes per second for all jobs together, 0 = none */
	const char	*tcp_congestion; /* borrowed: TCP_CONGESTION (tcp(7))
					   of every socket the transport
					   makes, NULL = the kernel's default;
					   check it first with
					   xfer_tcp_congestion_check() */
	uint64_t	 udt_buffer;	/* UDT and UDP receive buffer bytes
					   with net UDT, 0 = sized by the
					   transport */
	struct xfer_ftp_opts ftp;	/* FTP only */
	const uint8_t	*bm_secret;	/* borrowed: bm:// secret_file's bytes
					   (trailing newline removed), NULL =
					   anonymous */
	size_t		 bm_secret_len;
};
/* A file over this many bytes is big: worth several connections. */
#define XFER_BIG		(4u << 20)

#define XFER_TLS_NONE		0
#define XFER_TLS_TRY		1
#define XFER_TLS_REQUIRE	2

struct xfer;

/*
 * Whether this kernel lets biomirror's sockets use the TCP congestion
 * control name (tcp_congestion; the TCP_CONGESTION socket option of
 * tcp(7)), tried on a TCP socket that is never connected (as root this
 * may load the algorithm's module).  Returns 0; BM_EINVAL with the
 * reason in errbuf when the kernel has no such algorithm or does not
 * allow it for this user (the reason quotes the sysctl listing the
 * names it offers); BM_ENET when no socket could be made.
 */
int	xfer_tcp_congestion_check(const char *name, char *errbuf,
	    size_t errlen);
/*
 * The kernel's default TCP congestion control (net.ipv4.
 * tcp_congestion_control, tcp(7)) into buf (len bytes), "unknown" when
 * it cannot be read.
 */
void	xfer_tcp_congestion_default(char *buf, size_t len);

/* What the URL parser of the transport that takes it makes of a URL. */
struct xfer_url_info {
	bool		 host;		/* it names a host */
	const char	*bad;		/* static: why it was refused,
					   NULL = parsed (or no host) */
	bool		 query;		/* a query or a fragment */
	bool		 userinfo;	/* a user or a password */
};

/*
 * Parse url (borrowed) as the transport that takes it over TCP will, into
 * *ret (the config check of source).  A transport whose module cannot
 * be loaded accepts it unparsed: status, ls and history of a mirror need
 * no transport (xfer_ready says what is missing; its open fails).
 * Returns 0, or BM_ENOMEM or BM_EINVAL (no transport takes it) with the
 * reason in errbuf (errlen bytes).
 */
int	xfer_url_inspect(const char *url, struct xfer_url_info *ret,
	    char *errbuf, size_t errlen);

/*
 * Whether the transport xfer_open() picks for url (borrowed) over o, and
 * those it stacks on, can be set up in this process (check-config): the
 * curl module loads for HTTP and FTP, the UDT module too over
 * XFER_NET_UDT (loaded, not started).  Returns 0, or BM_EINVAL with
 * "curl module PATH: reason" or "UDT module PATH: reason" in errbuf (or
 * why no transport takes url over o).
 */
int	xfer_ready(const char *url, const struct xfer_opts *o, char *errbuf,
	    size_t errlen);

/* Called for each finished job (from inside xfer_poll). */
typedef void (*xfer_done_fn)(void *ctx, struct xfer_job *job);

/* What a lister learned of the server, for the jobs from now on. */
enum xfer_hint {
	XFER_HINT_GRIDFTP,	/* on: FEAT listed DCAU (see
				   xfer_ftp_opts.gridftp) */
	XFER_HINT_MODE_E,	/* on: FEAT showed GridFTP with MLSD: MLSD and
				   whole-file jobs in MODE E; off: stream mode */
};

/* What a stacked transport hands the one below (agent/xfer/xfer_int.h). */
struct xfer_wait;

/*
 * A transport's table.  impl is what open made.  Calls as the public
 * ones below, which call through it; hint may ignore what it does not
 * use; poll's wait is NULL unless a transport is stacked on this one.
 */
struct xfer_ops {
	const char	*name;		/* "curl", "gridftp" */
	bool		(*handles)(const char *url,
			    const struct xfer_opts *o);
	/* xfer_url_inspect's parse; NULL: the next row that handles it */
	int		(*inspect)(const char *url,
			    struct xfer_url_info *ret, char *errbuf,
			    size_t errlen);
	/*
	 * xfer_ready's check over o (its modules load, and a stacked
	 * one's below); NULL: always ready
	 */
	int		(*ready)(const char *url, const struct xfer_opts *o,
			    char *errbuf, size_t errlen);
	int		(*open)(const struct xfer_opts *o, const char *url,
			    void **ret_impl, char *errbuf, size_t errlen);
	int		(*submit)(void *impl, struct xfer_job *job);
	int		(*poll)(void *impl, int timeout_ms,
			    struct xfer_wait *wait, xfer_done_fn done,
			    void *ctx);
	void		(*cancel)(void *impl, struct xfer_job *job);
	size_t		(*active)(const void *impl);
	void		(*wakeup)(void *impl);
	void		(*hint)(void *impl, enum xfer_hint h, bool on);
	void		(*close)(void *impl);
};

/* A transport: its table and its state. */
struct xfer {
	const struct xfer_ops *ops;	/* borrowed: static table */
	void		*impl;		/* owned: the transport's state */
};

/*
 * Open the first transport of the registry that handles url (the
 * source) with o (copied; strings borrowed for the transport's life).
 * Returns 0, BM_ENOMEM, BM_EINVAL when no transport takes url over
 * o->net or its module cannot be loaded (curl, UDT), or BM_ENET when the
 * transport could not start (UDT); the reason is in errbuf (errlen
 * bytes) on every failure.
 */
int	xfer_open(const char *url, const struct xfer_opts *o,
	    struct xfer **ret, char *errbuf, size_t errlen);
/*
 * True when a transport of the registry takes url (borrowed) over o (the
 * config check: o need hold no more than net).
 */
bool	xfer_handles(const char *url, const struct xfer_opts *o);
/* Open the transport of table ops (tests: a fake transport). */
int	xfer_open_ops(const struct xfer_ops *ops, const char *url,
	    const struct xfer_opts *o, struct xfer **ret, char *errbuf,
	    size_t errlen);
/*
 * Start job (borrowed until its done callback ran); job->res is reset
 * first.  Returns 0, BM_ENOMEM, or BM_EINVAL for a URL x cannot take.
 */
int	xfer_submit(struct xfer *x, struct xfer_job *job);
/*
 * Drive transfers for at most timeout_ms milliseconds, calling done for
 * every job that ended.  Returns 0 or BM_ENET when the engine failed.
 */
int	xfer_poll(struct xfer *x, int timeout_ms, xfer_done_fn done,
	    void *ctx);
/* Cancel job (no done callback follows); a no-op for unknown jobs. */
void	xfer_cancel(struct xfer *x, struct xfer_job *job);
/* Jobs in flight. */
size_t	xfer_active(const struct xfer *x);
/*
 * Make a blocked xfer_poll() return at once.  Thread-safe; for worker
 * threads that finished a task.
 */
void	xfer_wakeup(struct xfer *x);
/* Tell x what a lister learned (enum xfer_hint); ignored if unused. */
void	xfer_hint(struct xfer *x, enum xfer_hint h, bool on);
/* Cancel everything and free the transport.  NULL is a no-op. */
void	xfer_free(struct xfer *x);

#endif
