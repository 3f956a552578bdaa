/*
 * The transport seam (DESIGN.md): a transport takes jobs "fetch bytes
 * [off, off+len) of this upstream URL into this sink" and reports each
 * job's end with the response metadata (size, mtime, ETag) or an error
 * class.  The scheduler above does not know which protocol carries a job.
 * Only transports touch sockets.  This build has one transport: libcurl's
 * multi interface over HTTP/HTTPS and FTP/FTPS (agent/xfer_curl.c), with
 * GridFTP's extended block mode for MLSD listings and whole files beside
 * it when asked for (agent/xfer_gridftp.c, ftp_mode = extended).
 *
 * FTP (an ftp:// URL; ftps:// sources are given as ftp:// with ftp_tls
 * set, i.e. explicit AUTH TLS, RFC 4217): a file job is SIZE + MDTM +
 * RETR, a ranged one REST + RETR of len bytes (RFC 3659 section 5);
 * res.status is the last FTP reply code, res.mtime the MDTM time,
 * res.size the SIZE reply (whole-file jobs), res.total -1.  A server that
 * refuses REST ends a ranged job with res.ignored_range set, as a 200 to
 * a Range does.  A directory URL with ftp_command "MLSD" or "LIST"
 * delivers the listing; "FEAT" delivers the server's reply lines (the
 * FEAT reply among them) to the sink, without a data connection.
 *
 * A validator job (xfer_job.validate) asks for a file's validators,
 * not its body: over HTTP a GET of its first byte (Range: bytes=0-0; RFC
 * 9110 section 14.2: a 206 with Content-Range's total size, ETag and
 * Last-Modified; a 200 is read no further than its headers), over FTP
 * MDTM + SIZE without RETR (RFC 3659 sections 3 and 4).  It ends XFER_OK
 * with res.etag, res.mtime and res.size (Content-Range total, Content-
 * Length of a 200, or the SIZE reply; -1 unknown) filled in; the sink is
 * never called.  The scheduler sends one after the last range of a file
 * fetched in ranges, to see that upstream did not change while they ran.
 */
#ifndef BIOMIRROR_XFER_H
#define BIOMIRROR_XFER_H

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
 * A ranged job (len > 0) asks for bytes [off, off+len) with Range (RFC
 * 9110 section 14).  A 206 whose Content-Range does not start at off and
 * end at off+len-1 is refused before a byte is written (BM_EPROTO,
 * res.ignored_range: the scheduler then fetches the file in one stream).  A 200
 * (the server ignored Range) is never written at a range's offset: with
 * accept_full and off 0 it is taken as the whole file (res.full), else the
 * job ends with res.ignored_range set (BM_EPROTO, XFER_PERMANENT).  With
 * if_range set, a 200 means the validator no longer matches (RFC 9110
 * section 13.1.5): the job ends XFER_CHANGED (BM_ECHANGED), nothing
 * written.  ETag and Last-Modified (res.etag, res.mtime) are filled in
 * before the first byte reaches the sink.
 *
 * Sink: receives len bytes that belong at byte offset off of the file.
 * Returns 0 or a BM_E* code, which aborts the job (the job's rc is then
 * that code and its class XFER_PERMANENT, or XFER_CHANGED for
 * BM_ECHANGED).
 */
typedef int (*xfer_sink_fn)(void *arg, uint64_t off, const void *buf,
    size_t len);

/*
 * What one job measured of the network path (for concurrency/streams =
 * auto, agent/autotune.c).  rtt_us: the connection's smoothed round-trip
 * time from the kernel (TCP_INFO tcpi_rtt, tcp(7)) when the socket is
 * still open, else the TCP handshake time of a new connection
 * (CURLINFO_CONNECT_TIME_T minus CURLINFO_NAMELOOKUP_TIME_T), else the
 * time from the request to its first response byte
 * (CURLINFO_STARTTRANSFER_TIME_T minus CURLINFO_PRETRANSFER_TIME_T, one
 * round trip plus the server's time); -1 when none is known.  body_us:
 * microseconds from the first response byte to the last (the job's
 * bytes divided by it is the connection's rate), -1 unknown.
 */
struct xfer_path {
	int64_t		 rtt_us;	/* round-trip time, microseconds, -1 unknown */
	int64_t		 body_us;	/* body transfer time, microseconds, -1 unknown */
	bool		 multiplexed;	/* carried on an HTTP/2 connection */
};

struct xfer_result {
	int		 rc;		/* 0 or BM_E* */
	enum xfer_class	 cls;
	long		 status;	/* HTTP status of the final response, 0 if none */
	int64_t		 size;		/* total size from Content-Length/-Range, -1 unknown */
	int64_t		 mtime;		/* Last-Modified, seconds since epoch, -1 unknown */
	char		 etag[256];	/* ETag as sent (quotes kept), "" if none */
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
	char		 errmsg[256];	/* reason when rc != 0 */
	struct xfer_path path;		/* what the job measured of the path */
};

struct xfer_job {
	const char	*url;		/* borrowed: absolute URL; ftps:// is
					   explicit TLS (AUTH TLS) on the FTP
					   port */
	uint64_t	 off;		/* first byte wanted */
	uint64_t	 len;		/* bytes wanted, 0 = to the end (whole file) */
	bool		 accept_full;	/* with off 0: take a 200 as the whole file */
	int64_t		 expect_size;	/* exact size expected, -1 unknown; more is refused */
	uint64_t	 max_size;	/* hard cap on body bytes (rule 31), 0 = none */
	bool		 to_end;	/* a range ending at the listed end of the
					   file: over FTP it asks for the rest of
					   the file (REST off, RETR to the end),
					   so that a file longer than listed
					   shows as more than len bytes (upstream
					   changed) instead of a silent cut */
	bool		 in_memory;	/* the sink holds the body in memory (a
					   small file): libcurl gets a small
					   receive buffer */
	bool		 size_checked;	/* whole file: the caller checks the body
					   length against an exact listed size,
					   so FTP sends no SIZE before RETR */
	bool		 mtime_listed;	/* the caller has the mtime to the second
					   from the listing (MLSD modify=), so FTP
					   sends no MDTM; res.mtime stays -1 */
	const char	*if_none_match;	/* borrowed ETag for If-None-Match, NULL if none */
	const char	*if_range;	/* borrowed strong ETag or HTTP-date for
					   If-Range on a ranged job, NULL if none:
					   a 200 then means upstream changed */
	int64_t		 if_modified_since; /* seconds, -1 for none */
	bool		 no_redirect;	/* report 3xx (res.location), do not follow */
	bool		 validate;	/* validators only (HTTP: byte 0; FTP
					   MDTM + SIZE): see the file comment;
					   off, len and sink unused */
	const char	*ftp_command;	/* borrowed: FTP "FEAT", "MLSD" or "LIST"
					   for a directory URL; NULL for a file */
	xfer_sink_fn	 sink;		/* where body bytes go */
	void		*sink_arg;	/* borrowed: the sink's state */
	void		*owner;		/* borrowed: the scheduler's record */
	struct xfer_result res;		/* filled in when the job ends */
};

struct xfer_opts {
	unsigned	 max_connections; /* per host, shared by all jobs */
	unsigned	 connect_timeout; /* seconds */
	unsigned	 stall_timeout;	/* seconds without a byte */
	const char	*user_agent;	/* borrowed */
	const char	*ca_file;	/* borrowed, NULL = system trust */
	uint64_t	 bwlimit;	/* bytes per second for all jobs together, 0 = none */
	int		 ftp_tls;	/* XFER_TLS_NONE, _TRY or _REQUIRE (FTP) */
	bool		 ftp_active;	/* FTP: active mode (PORT/EPRT) */
	const char	*user;		/* borrowed: FTP login, NULL = anonymous */
	const char	*password;	/* borrowed: FTP password, NULL if none */
	const char	*tcp_congestion; /* borrowed: TCP_CONGESTION (tcp(7))
					   of every socket the transport
					   makes, NULL = the kernel's default;
					   check it first with
					   xfer_tcp_congestion_check() */
	bool		 ftp_gridftp;	/* FTP: the server is GridFTP (FEAT
					   lists DCAU): TYPE I before every
					   file's data connection (it fixes a
					   data connection's type when it
					   opens; else libcurl's own TYPE, once
					   per control connection), and a file
					   named by its whole path, no CWD (it
					   trims a leading space and expands a
					   leading '~' of an argument) */
};
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

/* Called for each finished job (from inside xfer_poll). */
typedef void (*xfer_done_fn)(void *ctx, struct xfer_job *job);

/*
 * Make a libcurl transport (one multi handle).  curl_global_init must
 * have been called by main().  Returns 0, BM_ENOMEM or BM_EINVAL.
 */
int	xfer_curl_new(const struct xfer_opts *o, struct xfer **ret);
/*
 * Start job (borrowed until its done callback ran).  Returns 0 or
 * BM_ENOMEM.
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
/*
 * Change xfer_opts.ftp_gridftp for jobs submitted from now on (the FTP
 * lister learns from FEAT whether the server is GridFTP).
 */
void	xfer_set_ftp_gridftp(struct xfer *x, bool on);
/* GridFTP extended block mode (ftp_mode = extended), in three steps. */
enum xfer_mode_e {
	XFER_MODE_E_PROBE,	/* before the listing: FEAT goes through the
				   engine (xfer_gridftp.h), whose session
				   then goes on in MODE E if ... */
	XFER_MODE_E_ON,		/* ... FEAT showed GridFTP with MLSD: MLSD
				   and whole-file FTP jobs in MODE E */
	XFER_MODE_E_OFF		/* ... it did not: stream mode (libcurl) */
};
/*
 * Set x's extended block mode: PROBE makes the engine (before any FTP
 * job); ON and OFF settle it after FEAT (no-ops without a probe, or once
 * settled).  Returns 0, or BM_ENOMEM (PROBE only: stream mode stays).
 */
int	xfer_set_ftp_mode_e(struct xfer *x, enum xfer_mode_e m);
/* Jobs in flight. */
size_t	xfer_active(const struct xfer *x);
/*
 * Make a blocked xfer_poll() return at once.  Thread-safe (libcurl's
 * curl_multi_wakeup); for worker threads that finished a task.
 */
void	xfer_wakeup(struct xfer *x);
/* Cancel everything and free the transport.  NULL is a no-op. */
void	xfer_free(struct xfer *x);

#endif
