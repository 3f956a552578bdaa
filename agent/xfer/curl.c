/*
 * The "curl" transport (xfer.h): HTTP, HTTPS, FTP and FTPS jobs on one
 * libcurl multi handle (STYLE.md rules 20, 38, 39); how it uses libcurl:
 * docs/internals.md, "The curl transport".  Built as the module
 * libbiomirror-curl.so (curl_int.h), reached through the registry's row
 * in curl_load.c.  Invariant: a job is either in the multi handle with a
 * record, or finished and reported exactly once through the done
 * callback.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "biomirror/clock.h"
#include "biomirror/error.h"
#include "biomirror/ftp_proto.h"
#include "biomirror/xfer.h"
#include "curl_int.h"
#include "xfer_int.h"

struct curl_rec {
	struct curl_xfer *x;		/* borrowed: the transport */
	CURL		*easy;		/* owned */
	struct xfer_job	*job;		/* borrowed */
	struct curl_slist *headers;	/* owned: request headers */
	char		 errbuf[CURL_ERROR_SIZE]; /* libcurl's reason */
	int		 sink_rc;	/* first error the sink returned */
	long		 status;	/* status line seen last (redirects reset) */
	bool		 refused;	/* body not for the sink (error status) */
	bool		 paused;	/* paused by the rate limit */
	bool		 ftp;		/* an ftp:// or ftps:// job */
	bool		 desync;	/* stopped: bytes waited on the reused
					   connection before the request */
	char		 ftp_refusal[200]; /* FTP: the last 4xx/5xx reply,
					   its lines joined by " / ", or "" */
	bool		 ftp_multi;	/* FTP: inside a multi-line reply */
	bool		 ftp_refusing;	/* FTP: ... that is a refusal */
	bool		 ftp_greeted;	/* FTP: a reply code was seen (the
					   first one is the greeting, 220 or a
					   refusal) */
	bool		 ftp_refused_hello; /* FTP: the greeting was a 421 */
	char		 ftp_unreadable[120]; /* FTP: a 2xx reply that says the
					   listed directory could not be read
					   (vsftpd), or "" */
	int64_t		 date;		/* HTTP: Date of the last response,
					   secs, 0 if none */
	struct curl_rec	*next, *prev;	/* list of records in flight */
};

/*
 * Easy handles of finished transfers are kept (curl_easy_reset) for the
 * next ones: a mirror of many small files would otherwise allocate and
 * free a handle and its 256 KiB receive buffer per file.
 */
#define XFER_SPARE	64

/* Connection sockets libcurl made, kept for the check before a request. */
#define XFER_SOCKS		1024

struct curl_xfer {
	CURLM		*multi;		/* owned */
	CURL		*spare[XFER_SPARE]; /* owned: reset handles to reuse */
	size_t		 nspare;
	struct xfer_opts opts;		/* copy; strings borrowed */
	struct curl_rec	*head;		/* owned: records in flight */
	size_t		 active;	/* records in flight */
	double		 tokens;	/* rate limit: bytes that may arrive now */
	int64_t		 refill_ns;	/* monotonic time of the last refill */
	size_t		 npaused;	/* records paused by the rate limit */
	size_t		 others;	/* connections a transport stacked on
					   this one holds to the host
					   (struct xfer_wait) */
	long		 host_cap;	/* CURLMOPT_MAX_HOST_CONNECTIONS now */
	long		 conn_limit;	/* connections the server took before
					   it refused one with 421 (FTP), 0
					   while none was refused */
	bool		 ftp_logged_in;	/* an FTP login of this run was taken
					   (230): a later 530 is a limit */
	int		 socks[XFER_SOCKS]; /* descriptors of connections libcurl
					   made (sockopt_cb); closed ones are
					   dropped as they are found */
	size_t		 nsocks;
	bool		 fd_high;	/* libcurl made a socket at or above
					   FD_SETSIZE: curl_multi_fdset()
					   cannot see every socket */
};

static int	multi_new(struct curl_xfer *);
static void	host_cap(struct curl_xfer *);

/*
 * Connections this run may open to the server in all (libcurl's and a
 * stacked transport's together): max_connections, lowered by 421
 * greetings.
 */
static long
host_limit(const struct curl_xfer *x)
{
	long	 mc = x->opts.max_connections ? x->opts.max_connections : 8;

	return x->conn_limit > 0 && x->conn_limit < mc ? x->conn_limit : mc;
}

/*
 * The run-wide rate limit (bwlimit) is a token bucket shared by every
 * transfer: the write callback pauses a transfer when the bucket is empty
 * (CURL_WRITEFUNC_PAUSE; libcurl delivers the same bytes again after
 * curl_easy_pause(CURLPAUSE_CONT)), and curl_poll() resumes paused
 * transfers as tokens come back.  The bucket holds at most 1/10 s of
 * bytes (at least 64 KiB), so bursts stay small.
 */
static void
bucket_refill(struct curl_xfer *x)
{
	int64_t	 now = clock_mono_ns();
	double	 cap = (double)x->opts.bwlimit / 10;

	if (cap < 65536)
		cap = 65536;
	x->tokens += (double)(now - x->refill_ns) / 1e9 *
	    (double)x->opts.bwlimit;
	if (x->tokens > cap)
		x->tokens = cap;
	x->refill_ns = now;
}

static void
rec_unlink(struct curl_xfer *x, struct curl_rec *r)
{
	if (r->paused)
		x->npaused--;
	if (r->prev)
		r->prev->next = r->next;
	else
		x->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	x->active--;
}

static void
rec_free(struct curl_xfer *x, struct curl_rec *r)
{
	if (r == NULL)
		return;
	if (r->easy) {
		(void)curl_multi_remove_handle(x->multi, r->easy);
		if (x->nspare < XFER_SPARE) {
			curl_easy_reset(r->easy);
			x->spare[x->nspare++] = r->easy;
		} else
			curl_easy_cleanup(r->easy);
	}
	curl_slist_free_all(r->headers);
	free(r);
}

/* Copy a header value (after "Name:"), trimmed, into dst of dlen bytes. */
static void
header_value(const char *p, size_t n, char *dst, size_t dlen)
{
	size_t	 len;

	while (n > 0 && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == '\n' ||
	    p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	len = n < dlen - 1 ? n : dlen - 1;
	memcpy(dst, p, len);
	dst[len] = '\0';
}

static bool
header_is(const char *buf, size_t n, const char *name, size_t *ret_off)
{
	size_t	 nl = strlen(name);

	if (n <= nl || buf[nl] != ':' || strncasecmp(buf, name, nl) != 0)
		return false;
	*ret_off = nl + 1;
	return true;
}

/*
 * The FTP command a job sends instead of RETR: FEAT for a probe, MLSD or
 * LIST for a listing page, NULL for a file or validator job.
 */
static const char *
ftp_command(const struct xfer_job *j)
{
	if (j->kind == XFER_JOB_PROBE)
		return "FEAT";
	if (j->kind == XFER_JOB_PAGE)
		return j->ftp.mlsd ? "MLSD" : "LIST";
	return NULL;
}

/*
 * Note one FTP reply line libcurl saw (buf: n bytes, no C string): the
 * last reply, when it is a refusal (4xx or 5xx, RFC 959 section 4.2:
 * "ddd-" opens a multi-line reply, "ddd " ends it), is kept in
 * r->ftp_refusal, its lines joined by " / "; any other reply clears it,
 * so that an earlier refusal libcurl went past (MDTM or EPSV not
 * understood) is never taken for the RETR's.
 */
static void
ftp_reply_line(struct curl_rec *r, const char *buf, size_t n)
{
	size_t	 len, have;
	bool	 code = ftp_reply_start(buf, n);

	for (len = 0; len < n && buf[len] != '\r' && buf[len] != '\n'; len++)
		;
	if (!r->ftp_multi) {
		if (!code)
			return;
		/*
		 * A 421 as the first reply this job sees on a new control
		 * connection is a refusal to serve it (a limit), not a
		 * timeout later on (vsftpd's "421 Data timeout").  A job on
		 * a reused connection sees no greeting: its first reply is
		 * that of its first command, never a 421 of this kind.
		 */
		if (!r->ftp_greeted) {
			r->ftp_greeted = true;
			r->ftp_refused_hello = strncmp(buf, "421", 3) == 0;
		}
		if (strncmp(buf, "230", 3) == 0)
			r->x->ftp_logged_in = true;	/* RFC 959: logged in */
		/*
		 * vsftpd answers LIST of a directory it cannot open
		 * (permissions changed, or gone since CWD) with an empty
		 * listing and "226 Transfer done (but failed to open
		 * directory)." (vsftpd 3.0 ls.c): never an empty directory.
		 */
		if (buf[0] == '2' && memmem(buf, len, "failed to open "
		    "directory", 24) != NULL)
			(void)snprintf(r->ftp_unreadable,
			    sizeof(r->ftp_unreadable), "%.*s", (int)len, buf);
		r->ftp_multi = buf[3] == '-';
		r->ftp_refusing = buf[0] == '4' || buf[0] == '5';
		r->ftp_refusal[0] = '\0';
		if (r->ftp_refusing)
			(void)snprintf(r->ftp_refusal, sizeof(r->ftp_refusal),
			    "%.*s", (int)len, buf);
		return;
	}
	if (code && buf[3] == ' ')
		r->ftp_multi = false;
	have = strlen(r->ftp_refusal);
	if (r->ftp_refusing && len > 0 && have + 4 < sizeof(r->ftp_refusal))
		(void)snprintf(r->ftp_refusal + have, sizeof(r->ftp_refusal) -
		    have, " / %.*s", (int)len, buf);
}

static size_t
header_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	struct curl_rec	*r = arg;
	struct xfer_result *res = &r->job->res;
	size_t		 n = size * nitems, off;
	char		 tmp[32];
	char		*end;
	long		 v;

	if (r->ftp) {
		/*
		 * FTP server replies: the last refusal (4xx or 5xx, RFC 959
		 * section 4.2), and for FEAT every line (sink), in order.
		 */
		ftp_reply_line(r, buf, n);
		if (r->job->kind != XFER_JOB_PROBE)
			return n;
		if (res->bytes + n > 65536 || r->job->sink(r->job->sink_arg,
		    res->bytes, buf, n) != 0)
			return 0;
		res->bytes += n;
		return n;
	}
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		/* A new response (after a redirect or 100): forget the last. */
		res->etag[0] = '\0';
		res->mtime = -1;
		r->date = 0;
		res->content_type[0] = '\0';
		res->retry_after = -1;
		res->range_start = res->range_end = res->total = -1;
		return n;
	}
	if (header_is(buf, n, "Content-Range", &off)) {
		char	 cr[96];
		long long a, b, t;

		/* "bytes A-B/T" (RFC 9110 section 14.4); T may be "*". */
		header_value(buf + off, n - off, cr, sizeof(cr));
		if (sscanf(cr, "bytes %lld-%lld/%lld", &a, &b, &t) == 3 &&
		    a >= 0 && b >= a && t > b) {
			res->range_start = a;
			res->range_end = b;
			res->total = t;
		} else if (sscanf(cr, "bytes %lld-%lld/*", &a, &b) == 2 &&
		    a >= 0 && b >= a) {
			res->range_start = a;
			res->range_end = b;
		}
		return n;
	}
	if (header_is(buf, n, "ETag", &off))
		header_value(buf + off, n - off, res->etag, sizeof(res->etag));
	else if (header_is(buf, n, "Last-Modified", &off)) {
		/* Known before the body, for the sink (resume validators). */
		char	 lm[64];
		time_t	 t;

		header_value(buf + off, n - off, lm, sizeof(lm));
		if ((t = curl_getdate(lm, NULL)) >= 0)
			res->mtime = (int64_t)t;
	}
	else if (header_is(buf, n, "Date", &off)) {
		char	 dt[64];
		time_t	 t;

		header_value(buf + off, n - off, dt, sizeof(dt));
		if ((t = curl_getdate(dt, NULL)) > 0)
			r->date = (int64_t)t;
	}
	else if (header_is(buf, n, "Content-Type", &off))
		header_value(buf + off, n - off, res->content_type,
		    sizeof(res->content_type));
	else if (header_is(buf, n, "Retry-After", &off)) {
		header_value(buf + off, n - off, tmp, sizeof(tmp));
		errno = 0;
		v = strtol(tmp, &end, 10);
		if (errno == 0 && end != tmp && *end == '\0' && v >= 0)
			res->retry_after = v;
		else {
			/* An HTTP-date (RFC 9110 section 10.2.3). */
			time_t t = curl_getdate(tmp, NULL);
			if (t > 0) {
				time_t now = time(NULL);
				res->retry_after = t > now ? (long)(t - now) : 0;
			}
		}
	}
	return n;
}

/*
 * Judge the status of the response whose body starts now (rule 39): error
 * pages are read and dropped; a range must come back as exactly the
 * range asked for.  Returns 0 or the BM_E* code that aborts the job.
 */
static int
check_status(struct curl_rec *r, long status)
{
	struct xfer_job	*j = r->job;
	struct xfer_result *res = &j->res;

	if (j->len == 0) {
		if (status != 200)
			r->refused = true;
		return 0;
	}
	if (status == 206) {
		if (res->range_start != (int64_t)j->off ||
		    res->range_end != (int64_t)(j->off + j->len - 1)) {
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "asked for bytes %llu-%llu, got Content-Range "
			    "%lld-%lld", (unsigned long long)j->off,
			    (unsigned long long)(j->off + j->len - 1),
			    (long long)res->range_start,
			    (long long)res->range_end);
			/* Never written at a wrong offset; retried whole. */
			res->ignored_range = true;
			return BM_EPROTO;
		}
		return 0;
	}
	if (status == 200 && j->if_range != NULL) {
		/* RFC 9110 section 13.1.5: the validator no longer matches. */
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "upstream "
		    "changed since the bytes held were fetched (If-Range "
		    "answered 200): starting over");
		return BM_ECHANGED;
	}
	if (status == 200) {
		if (j->off == 0 && j->accept_full) {
			res->full = true;
			return 0;
		}
		res->ignored_range = true;
		(void)snprintf(res->errmsg, sizeof(res->errmsg),
		    "the server ignored Range (200 for bytes %llu-%llu)",
		    (unsigned long long)j->off,
		    (unsigned long long)(j->off + j->len - 1));
		return BM_EPROTO;
	}
	if (status == 416) {
		/* The range lies past the end: the file is not as listed. */
		res->ignored_range = true;
		(void)snprintf(res->errmsg, sizeof(res->errmsg),
		    "416 for bytes %llu-%llu", (unsigned long long)j->off,
		    (unsigned long long)(j->off + j->len - 1));
		return BM_EPROTO;
	}
	r->refused = true;
	return 0;
}

static size_t
write_cb(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct curl_rec	*r = arg;
	struct xfer_job	*j = r->job;
	size_t		 n = size * nmemb;
	long		 status = 0;
	int		 rc;

	if (j->kind == XFER_JOB_VALIDATE) {
		/*
		 * Over FTP no body was asked for: libcurl writes what MDTM and
		 * SIZE said as header lines ("Last-Modified: ...") here,
		 * dropped (more than 64 KiB at once is no such thing).  Over
		 * HTTP the one byte asked for is dropped; a longer body (a 200
		 * or an error page) is not read, since the headers are all the
		 * check needs: the transfer ends, and classify() judges the
		 * status.  res.bytes stays 0.
		 */
		if (r->ftp)
			return n > 65536 ? 0 : n;
		if (n > 1) {
			r->refused = true;
			return 0;
		}
		return n;
	}
	if (r->status == 0 && r->ftp) {
		curl_off_t ft = -1;

		r->status = 150;	/* REST was accepted, or this is no range */
		/*
		 * MDTM was answered before RETR: its time is known at the
		 * first byte, for the sink (resume validators), as
		 * Last-Modified is over HTTP (CURLINFO_FILETIME_T may be read
		 * from a callback).
		 */
		if (curl_easy_getinfo(r->easy, CURLINFO_FILETIME_T, &ft) ==
		    CURLE_OK && ft >= 0)
			j->res.mtime = (int64_t)ft;
	}
	if (r->status == 0) {
		(void)curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE,
		    &status);
		r->status = status;
		if ((rc = check_status(r, status)) != 0) {
			r->sink_rc = rc;
			return 0;
		}
	}
	if (r->refused) {
		/* Error pages are read and dropped, within a small cap. */
		if (j->res.bytes + n > 1024 * 1024)
			return 0;
		j->res.bytes += n;
		return n;
	}
	if (r->x->opts.bwlimit) {
		bucket_refill(r->x);
		if (r->x->tokens <= 0) {
			r->paused = true;
			r->x->npaused++;
			return CURL_WRITEFUNC_PAUSE;
		}
		r->x->tokens -= (double)n;
	}
	if (r->ftp && j->len > 0 && j->to_end && j->res.bytes + n > j->len) {
		/* The rest of the file is longer than listed. */
		r->sink_rc = BM_ECHANGED;
		(void)snprintf(j->res.errmsg, sizeof(j->res.errmsg),
		    "upstream is longer than listed (more than %llu bytes "
		    "from offset %llu)", (unsigned long long)j->len,
		    (unsigned long long)j->off);
		return 0;
	}
	if (j->res.bytes + n < j->res.bytes ||
	    (j->max_size && j->res.bytes + n > j->max_size) ||
	    (j->len > 0 && !j->res.full && j->res.bytes + n > j->len) ||
	    (j->expect_size >= 0 && j->res.bytes + n >
	    (uint64_t)j->expect_size)) {
		r->sink_rc = BM_ELIMIT;
		return 0;
	}
	rc = j->sink(j->sink_arg, j->off + j->res.bytes, buf, n);
	if (rc != 0) {
		r->sink_rc = rc;
		return 0;
	}
	j->res.bytes += n;
	return n;
}

/* xfer_ops.open: a multi handle; o copied, its strings borrowed. */
static int
curl_open(const struct xfer_opts *o, const char *url, void **ret,
    char *errbuf, size_t errlen)
{
	struct curl_xfer	*x;

	(void)url;
	(void)errbuf;	/* out of memory is its only failure */
	(void)errlen;
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return BM_ENOMEM;
	x->opts = *o;
	x->refill_ns = clock_mono_ns();
	if (multi_new(x) != 0) {
		free(x);
		return BM_ENOMEM;
	}
	*ret = x;
	return 0;
}

/*
 * The URL libcurl is given: the job's, except that an ftps:// URL (explicit
 * TLS, AUTH TLS on the FTP port, RFC 4217) goes as ftp:// with TLS required
 * (setup_ftp()), since libcurl's ftps:// is implicit TLS (port 990).  The
 * job's URL is what every log line and report shows.  libcurl copies it.
 */
static int
setup_url(struct curl_rec *r)
{
	char	*url;

	if (!r->ftp || !ftp_is_ftps(r->job->url)) {
		(void)curl_easy_setopt(r->easy, CURLOPT_URL, r->job->url);
		return 0;
	}
	if (asprintf(&url, "ftp://%s", r->job->url + 7) == -1)
		return BM_ENOMEM;
	(void)curl_easy_setopt(r->easy, CURLOPT_URL, url);
	free(url);
	return 0;
}

/*
 * FTP options: explicit TLS (AUTH TLS, RFC 4217) per ftp_tls, login,
 * passive (EPSV, then PASV) unless ftp_active, one CWD to the file's
 * directory (a GridFTP server's files: none, the whole path in RETR;
 * libcurl keeps RFC 1738's reading: relative to the login directory, %2F
 * makes it absolute), MDTM for the exact mtime, SIZE only
 * when the listing gave no exact size or for a range.  A listing page
 * sends MLSD or LIST instead of RETR; a probe's FEAT goes as a quote
 * command on a control connection without any transfer.
 */
static int
setup_ftp(struct curl_xfer *x, struct curl_rec *r)
{
	struct xfer_job	*j = r->job;
	CURL		*e = r->easy;
	struct curl_slist *l;
	const char	*cmd = ftp_command(j);

	(void)curl_easy_setopt(e, CURLOPT_USE_SSL, (long)(x->opts.ftp.tls ==
	    XFER_TLS_REQUIRE || ftp_is_ftps(j->url) ? CURLUSESSL_ALL :
	    x->opts.ftp.tls == XFER_TLS_TRY ? CURLUSESSL_TRY :
	    CURLUSESSL_NONE));
	(void)curl_easy_setopt(e, CURLOPT_FTPSSLAUTH, (long)CURLFTPAUTH_TLS);
	if (x->opts.ftp.user != NULL)
		(void)curl_easy_setopt(e, CURLOPT_USERNAME, x->opts.ftp.user);
	if (x->opts.ftp.password != NULL)
		(void)curl_easy_setopt(e, CURLOPT_PASSWORD,
		    x->opts.ftp.password);
	if (x->opts.ftp.active)
		(void)curl_easy_setopt(e, CURLOPT_FTPPORT, "-");
	/*
	 * A file on a GridFTP server goes by its whole path (no CWD): the
	 * server trims a leading space of a command's argument and expands
	 * a leading '~', so "RETR  name" or "RETR ~name" after CWD would
	 * name another file.  Listings keep one CWD to their directory.
	 */
	(void)curl_easy_setopt(e, CURLOPT_FTP_FILEMETHOD, (long)(cmd == NULL &&
	    x->opts.ftp.gridftp ? CURLFTPMETHOD_NOCWD :
	    CURLFTPMETHOD_SINGLECWD));
	(void)curl_easy_setopt(e, CURLOPT_SERVER_RESPONSE_TIMEOUT,
	    (long)x->opts.stall_timeout);
	if (cmd == NULL) {
		/*
		 * TYPE I before the data connection is set up, not only after
		 * EPSV where libcurl sends it: GridFTP fixes a data
		 * connection's type when it opens it, and sends a file in
		 * ASCII (LF as CRLF) after a listing on the same connection.
		 * Other servers apply TYPE to the next transfer (RFC 959
		 * 3.1.1): one round trip per file saved.
		 */
		if (x->opts.ftp.gridftp) {
			if ((l = curl_slist_append(r->headers, "TYPE I")) ==
			    NULL)
				return BM_ENOMEM;
			r->headers = l;
			(void)curl_easy_setopt(e, CURLOPT_QUOTE, r->headers);
		}
		/*
		 * A whole file whose exact size the listing gave: no SIZE
		 * round trip before RETR (libcurl skips it when told to
		 * ignore the length; the scheduler checks the length).
		 */
		if (j->size_checked && j->len == 0 && j->off == 0)
			(void)curl_easy_setopt(e,
			    CURLOPT_IGNORE_CONTENT_LENGTH, 1L);
		/* Nor MDTM when the listing gave the time to the second. */
		if (j->mtime_listed && j->kind != XFER_JOB_VALIDATE)
			(void)curl_easy_setopt(e, CURLOPT_FILETIME, 0L);
		return 0;
	}
	(void)curl_easy_setopt(e, CURLOPT_FILETIME, 0L);
	if (j->kind == XFER_JOB_PROBE) {
		if ((l = curl_slist_append(r->headers, "FEAT")) == NULL)
			return BM_ENOMEM;
		r->headers = l;
		(void)curl_easy_setopt(e, CURLOPT_QUOTE, r->headers);
		(void)curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		return 0;
	}
	(void)curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, cmd);
	return 0;
}

/*
 * CURLOPT_SOCKOPTFUNCTION: every socket libcurl makes (connections, an
 * active-mode listener, the data connections it accepts) gets
 * tcp_congestion, and one at or above FD_SETSIZE marks the transport
 * as one curl_multi_fdset() cannot see whole.  A refused setsockopt is
 * not an error: sync.c tried the name on a socket of its own first
 * (xfer_tcp_congestion_check()).
 */
static int
sockopt_cb(void *arg, curl_socket_t fd, curlsocktype purpose)
{
	struct curl_xfer	*x = arg;

	size_t		 i;

	if (fd >= FD_SETSIZE)
		x->fd_high = true;
	if (purpose == CURLSOCKTYPE_IPCXN) {
		for (i = 0; i < x->nsocks && x->socks[i] != (int)fd; i++)
			;
		if (i == x->nsocks && x->nsocks < XFER_SOCKS)
			x->socks[x->nsocks++] = (int)fd;
	}
	if (x->opts.tcp_congestion != NULL)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION,
		    x->opts.tcp_congestion, strlen(x->opts.tcp_congestion));
	return CURL_SOCKOPT_OK;
}

/* The port of a socket address (IPv4 or IPv6), -1 for another family. */
static int
sa_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return -1;
}

/*
 * The descriptor of the connection from local_port to port (libcurl's
 * CURLINFO_ACTIVESOCKET is not set yet before a request), or -1.  A
 * remembered descriptor that is no socket any more is forgotten.
 */
static int
sock_of(struct curl_xfer *x, int local_port, int port)
{
	struct sockaddr_storage ss;
	socklen_t	 sl;
	size_t		 i;

	for (i = 0; i < x->nsocks;) {
		sl = sizeof(ss);
		if (getsockname(x->socks[i], (struct sockaddr *)&ss,
		    &sl) == -1) {
			x->socks[i] = x->socks[--x->nsocks];
			continue;
		}
		if (sa_port(&ss) == local_port) {
			sl = sizeof(ss);
			if (getpeername(x->socks[i], (struct sockaddr *)&ss,
			    &sl) == 0 && sa_port(&ss) == port)
				return x->socks[i];
		}
		i++;
	}
	return -1;
}

/*
 * CURLOPT_PREREQFUNCTION, plain http:// (HTTP/1.x) only: before a request
 * goes out on a reused connection nothing may be waiting there, else the
 * transfer is stopped (libcurl closes the connection) and retried on a
 * new one; EOF is left to libcurl.  Why: docs/internals.md, "The curl
 * transport".
 */
static int
prereq_cb(void *arg, char *ip, char *local_ip, int port, int local_port)
{
	struct curl_rec	*r = arg;
	char		*scheme = NULL, c;
	int		 fd;

	(void)ip;
	(void)local_ip;
	/* The URL now: a redirect may have gone to https. */
	if (curl_easy_getinfo(r->easy, CURLINFO_SCHEME, &scheme) != CURLE_OK ||
	    scheme == NULL || strcasecmp(scheme, "http") != 0 ||
	    (fd = sock_of(r->x, local_port, port)) == -1)
		return CURL_PREREQFUNC_OK;
	if (recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
		r->desync = true;
		return CURL_PREREQFUNC_ABORT;
	}
	return CURL_PREREQFUNC_OK;
}

static int
setup_easy(struct curl_xfer *x, struct curl_rec *r)
{
	struct xfer_job	*j = r->job;
	CURL		*e = r->easy;
	char		 range[64], hdr[320];
	struct curl_slist *l;
	int		 rc;

	if ((rc = setup_url(r)) != 0)
		return rc;
	(void)curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	(void)curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	(void)curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	(void)curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, r->ftp ? "ftp" :
	    "http,https");
	(void)curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	(void)curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION,
	    j->no_redirect ? 0L : 1L);
	(void)curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
	(void)curl_easy_setopt(e, CURLOPT_FILETIME, 1L);
	(void)curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	(void)curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
	(void)curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, x);
	if (!r->ftp) {
		(void)curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, prereq_cb);
		(void)curl_easy_setopt(e, CURLOPT_PREREQDATA, r);
	}
	/*
	 * Fewer, larger writes for big bodies; a body the sink holds in
	 * memory (a small file) gets libcurl's default 16 KiB, as hundreds of
	 * them may be in flight over HTTP/2.
	 */
	(void)curl_easy_setopt(e, CURLOPT_BUFFERSIZE, j->in_memory ?
	    16L * 1024 : 256L * 1024);
	(void)curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
	    (long)CURL_HTTP_VERSION_2TLS);
	(void)curl_easy_setopt(e, CURLOPT_USERAGENT, x->opts.user_agent);
	(void)curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT,
	    (long)x->opts.connect_timeout);
	(void)curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	(void)curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
	    (long)x->opts.stall_timeout);
	if (x->opts.ca_file)
		(void)curl_easy_setopt(e, CURLOPT_CAINFO, x->opts.ca_file);
	if (j->max_size)
		(void)curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE,
		    (curl_off_t)j->max_size);
	(void)curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	(void)curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	(void)curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	(void)curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	if (r->ftp && (rc = setup_ftp(x, r)) != 0)
		return rc;
	/*
	 * Validators only.  FTP: no body; libcurl then sends MDTM (with
	 * CURLOPT_FILETIME), SIZE and REST 0, and no RETR.  HTTP: the first
	 * byte, as a range like those just fetched (a server that refuses
	 * or mangles HEAD answers it as it answered them).
	 */
	if (j->kind == XFER_JOB_VALIDATE && r->ftp)
		(void)curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	else if (j->kind == XFER_JOB_VALIDATE)
		(void)curl_easy_setopt(e, CURLOPT_RANGE, "0-0");
	if (j->len > 0 && r->ftp && j->to_end) {
		(void)snprintf(range, sizeof(range), "%llu-",
		    (unsigned long long)j->off);
		(void)curl_easy_setopt(e, CURLOPT_RANGE, range);
	} else if (j->len > 0) {
		(void)snprintf(range, sizeof(range), "%llu-%llu",
		    (unsigned long long)j->off,
		    (unsigned long long)(j->off + j->len - 1));
		(void)curl_easy_setopt(e, CURLOPT_RANGE, range);
	}
	if (j->if_modified_since >= 0) {
		(void)curl_easy_setopt(e, CURLOPT_TIMECONDITION,
		    (long)CURL_TIMECOND_IFMODSINCE);
		(void)curl_easy_setopt(e, CURLOPT_TIMEVALUE_LARGE,
		    (curl_off_t)j->if_modified_since);
	}
	/*
	 * HTTP validators only: over FTP, r->headers is the quote list
	 * (setup_ftp), and what a resumed range continues is checked against
	 * the MDTM time at its first byte (the scheduler's resume check).
	 */
	if (r->ftp)
		return 0;
	if (j->if_none_match && j->if_none_match[0]) {
		if ((size_t)snprintf(hdr, sizeof(hdr), "If-None-Match: %s",
		    j->if_none_match) >= sizeof(hdr))
			return BM_ELIMIT;
		if ((l = curl_slist_append(r->headers, hdr)) == NULL)
			return BM_ENOMEM;
		r->headers = l;
		(void)curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	}
	if (j->if_range && j->if_range[0] && j->len > 0) {
		if ((size_t)snprintf(hdr, sizeof(hdr), "If-Range: %s",
		    j->if_range) >= sizeof(hdr))
			return BM_ELIMIT;
		if ((l = curl_slist_append(r->headers, hdr)) == NULL)
			return BM_ENOMEM;
		r->headers = l;
		(void)curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	}
	return 0;
}

/* xfer_ops.submit: an easy handle in the multi (res reset by xfer.c). */
static int
curl_submit(void *impl, struct xfer_job *job)
{
	struct curl_xfer *x = impl;
	struct curl_rec	*r;
	int		 rc = BM_ENOMEM;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return BM_ENOMEM;
	r->job = job;
	r->x = x;
	r->ftp = strncasecmp(job->url, "ftp://", 6) == 0 ||
	    ftp_is_ftps(job->url);
	if (x->nspare > 0)
		r->easy = x->spare[--x->nspare];
	else if ((r->easy = curl_easy_init()) == NULL)
		goto fail;
	if ((rc = setup_easy(x, r)) != 0)
		goto fail;
	if (curl_multi_add_handle(x->multi, r->easy) != CURLM_OK) {
		rc = BM_ENOMEM;
		goto fail;
	}
	r->next = x->head;
	if (x->head)
		x->head->prev = r;
	x->head = r;
	x->active++;
	return 0;
fail:
	if (r->easy)
		curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->headers);
	free(r);
	return rc;
}

/* True when url (no trailing '/') ended up at url + "/" after redirects. */
static bool
url_became_dir(const char *url, const char *eff)
{
	size_t	 n = strlen(url);

	return eff != NULL && n > 0 && url[n - 1] != '/' &&
	    strncmp(eff, url, n) == 0 && strcmp(eff + n, "/") == 0;
}

/*
 * An FTP job's result.  550 (no such file) is gone; a refused REST or a
 * REST past the end is an ignored range (the scheduler goes to one
 * stream); 421 and a 530 that is a limit (ftp_530_is_limit: too many
 * connections or users) and broken connections are retried with backoff,
 * a 530 that is a wrong login is not; a
 * body of another length than SIZE said, or a range cut short, is
 * retried, never published.  A conditional RETR whose MDTM is not newer
 * (libcurl skips the RETR: CURLINFO_CONDITION_UNMET) is not modified,
 * like HTTP 304: never an empty file.  A validator job (MDTM + SIZE, no
 * RETR) has no body to measure against SIZE.
 */
static void
classify_ftp(struct curl_rec *r, CURLcode cc, curl_off_t cl)
{
	struct xfer_job	*j = r->job;
	struct xfer_result *res = &j->res;
	long		 unmet = 0, n;

	res->total = -1;
	if (j->len > 0 || ftp_command(j) != NULL)
		res->size = -1;
	if (cc == CURLE_OK && j->if_modified_since >= 0 &&
	    curl_easy_getinfo(r->easy, CURLINFO_CONDITION_UNMET,
	    &unmet) == CURLE_OK && unmet) {
		res->rc = 0;
		res->cls = XFER_NOT_MODIFIED;
		res->size = -1;
		return;
	}
	if (cc != CURLE_OK && r->ftp_refused_hello &&
	    strncmp(r->ftp_refusal, "421", 3) == 0) {
		/*
		 * 421 (RFC 959 4.2: service not available), as a greeting
		 * the server's limit of connections from one address or of
		 * users (vsftpd's max_per_ip, max_clients); libcurl calls
		 * it a timeout.  The connections it took stay the most this
		 * run opens to it, one fewer per refusal, at least one, so
		 * the refused jobs queue instead of knocking again.
		 */
		if ((n = host_limit(r->x)) > 1) {
			r->x->conn_limit = n - 1;
			host_cap(r->x);
		}
		n = host_limit(r->x);
		res->rc = BM_ENET;
		res->cls = XFER_RETRY;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "%s (now at "
		    "most %ld connection%s)", r->ftp_refusal, n,
		    n == 1 ? "" : "s");
		return;
	}
	if (cc != CURLE_OK) {
		res->rc = BM_ENET;
		res->cls = XFER_RETRY;
		switch (cc) {
		case CURLE_REMOTE_FILE_NOT_FOUND:
			res->rc = BM_ENOENT;
			res->cls = XFER_GONE;
			break;
		case CURLE_FTP_COULDNT_USE_REST:
		case CURLE_BAD_DOWNLOAD_RESUME:
			res->rc = BM_EPROTO;
			res->cls = XFER_PERMANENT;
			res->ignored_range = j->len > 0;
			break;
		case CURLE_FILESIZE_EXCEEDED:
			res->rc = BM_ELIMIT;
			res->cls = XFER_PERMANENT;
			break;
		case CURLE_REMOTE_ACCESS_DENIED:
			/*
			 * A CWD refused ("Server denied you to change to the
			 * given directory"): the server's words.
			 */
			res->cls = XFER_PERMANENT;
			if (r->ftp_refusal[0] == '\0')
				break;
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "directory refused: %s", r->ftp_refusal);
			return;
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
		case CURLE_USE_SSL_FAILED:
		case CURLE_PEER_FAILED_VERIFICATION:
			res->cls = XFER_PERMANENT;
			break;
		case CURLE_FTP_COULDNT_RETR_FILE:
			/*
			 * RETR refused with another code than 550: 5xx is a
			 * permanent refusal (RFC 959 section 4.2), GridFTP's
			 * "500 ... No such file or directory" a gone file (as
			 * agent/xfer/gridftp.c judges it); 4xx is retried.
			 */
			if (r->ftp_refusal[0] != '5')
				break;
			res->rc = BM_EPROTO;
			res->cls = XFER_PERMANENT;
			if (strstr(r->ftp_refusal, "No such file or directory")) {
				res->rc = BM_ENOENT;
				res->cls = XFER_GONE;
			}
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "RETR: %s", r->ftp_refusal);
			return;
		case CURLE_LOGIN_DENIED:
			/*
			 * 530 after USER/PASS: a server's limit on users or
			 * sessions is retried, within one connection fewer
			 * once this run had logged in (as for a 421
			 * greeting); a wrong login is not (ftp_530_is_limit).
			 * The server's words, not libcurl's "Access denied:
			 * 530".
			 */
			if (r->ftp_refusal[0] == '\0')
				break;
			if (!ftp_530_is_limit(r->ftp_refusal,
			    r->x->opts.ftp.user == NULL, r->x->ftp_logged_in)) {
				res->rc = BM_EPROTO;
				res->cls = XFER_PERMANENT;
				(void)snprintf(res->errmsg, sizeof(res->errmsg),
				    "login refused: %s", r->ftp_refusal);
				return;
			}
			if (r->x->ftp_logged_in &&
			    (n = host_limit(r->x)) > 1) {
				r->x->conn_limit = n - 1;
				host_cap(r->x);
			}
			n = host_limit(r->x);
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "login refused: %.160s (a limit: retried, at most %ld "
			    "connection%s)", r->ftp_refusal, n,
			    n == 1 ? "" : "s");
			return;
		default:
			break;	/* 421, 530, 425/426, resets: retried */
		}
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "%s",
		    r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc));
		return;
	}
	if (ftp_command(j) != NULL && r->ftp_unreadable[0] != '\0') {
		/* A listing that did not happen: exit 3, no deletes. */
		res->rc = BM_EPROTO;
		res->cls = XFER_PERMANENT;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "%s: the "
		    "server could not read the directory: %s",
		    ftp_command(j), r->ftp_unreadable);
		return;
	}
	if (j->kind != XFER_JOB_VALIDATE && ((j->len > 0 &&
	    res->bytes != j->len) ||
	    (j->len == 0 && ftp_command(j) == NULL && cl >= 0 &&
	    (uint64_t)cl != res->bytes))) {
		res->rc = BM_ECHECKSUM;
		res->cls = XFER_RETRY;
		(void)snprintf(res->errmsg, sizeof(res->errmsg),
		    "got %llu bytes, expected %lld", (unsigned long long)
		    res->bytes, j->len > 0 ? (long long)j->len : (long long)cl);
		return;
	}
	res->cls = XFER_OK;
}

/*
 * What the finished transfer measured of the path (struct xfer_path in
 * xfer.h): the RTT is the least of the kernel's estimates for its
 * connection (tcp(7) TCP_INFO: tcpi_rtt, from the few segments this end
 * sends, which a delayed ACK or a TLS handshake inflates, and
 * tcpi_rcv_rtt, the receiver's own estimate; the connection stays open
 * in libcurl's pool after the transfer) and the request-to-first-byte
 * time, else libcurl's handshake time; the body time.
 */
static void
measure_path(struct curl_rec *r)
{
	struct xfer_path *p = &r->job->res.path;
	struct tcp_info	 ti;
	socklen_t	 tl = sizeof(ti);
	curl_socket_t	 fd = CURL_SOCKET_BAD;
	curl_off_t	 dns = 0, conn = 0, pre = 0, start = 0, total = 0;
	long		 ver = 0;

	p->rtt_us = p->body_us = -1;
	(void)curl_easy_getinfo(r->easy, CURLINFO_NAMELOOKUP_TIME_T, &dns);
	(void)curl_easy_getinfo(r->easy, CURLINFO_CONNECT_TIME_T, &conn);
	(void)curl_easy_getinfo(r->easy, CURLINFO_PRETRANSFER_TIME_T, &pre);
	(void)curl_easy_getinfo(r->easy, CURLINFO_STARTTRANSFER_TIME_T,
	    &start);
	(void)curl_easy_getinfo(r->easy, CURLINFO_TOTAL_TIME_T, &total);
	(void)curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &ver);
	p->multiplexed = ver >= CURL_HTTP_VERSION_2_0;
	memset(&ti, 0, sizeof(ti));
	if (curl_easy_getinfo(r->easy, CURLINFO_ACTIVESOCKET, &fd) ==
	    CURLE_OK && fd != CURL_SOCKET_BAD &&
	    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) {
		if (ti.tcpi_rtt > 0)
			p->rtt_us = ti.tcpi_rtt;
		if (ti.tcpi_rcv_rtt > 0 &&
		    (p->rtt_us < 0 || ti.tcpi_rcv_rtt < p->rtt_us))
			p->rtt_us = ti.tcpi_rcv_rtt;
	}
	if (p->rtt_us < 0 && conn > dns && dns >= 0)
		p->rtt_us = conn - dns;
	if (start > pre && pre > 0 && (p->rtt_us < 0 || start - pre < p->rtt_us))
		p->rtt_us = start - pre;
	if (start > 0 && total >= start && r->job->res.bytes > 0)
		p->body_us = total - start;
}

/* Map a finished transfer to its result (rc, class, metadata). */
static void
classify(struct curl_rec *r, CURLcode cc)
{
	struct xfer_result *res = &r->job->res;
	long		 status = 0;
	curl_off_t	 cl = -1, ft = -1;
	char		*eff = NULL, *loc = NULL;

	measure_path(r);
	if (r->desync) {
		res->rc = BM_EPROTO;
		res->cls = XFER_RETRY;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "bytes waited "
		    "on the reused connection before the request (a response "
		    "ran past its Content-Length): retried on a new one");
		return;
	}
	(void)curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	(void)curl_easy_getinfo(r->easy, CURLINFO_REDIRECT_URL, &loc);
	if (loc)
		(void)snprintf(res->location, sizeof(res->location), "%s", loc);
	(void)curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
	    &cl);
	(void)curl_easy_getinfo(r->easy, CURLINFO_FILETIME_T, &ft);
	(void)curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &eff);
	res->status = status;
	res->size = cl;
	if (ft >= 0)
		res->mtime = ft;
	/*
	 * A Last-Modified not before the Date's second is weak (RFC 7232
	 * section 2.2.2): the file may change again within that second and
	 * keep its Last-Modified (and nginx's ETag, made of it).
	 */
	res->weak = !r->ftp && r->date > 0 && res->mtime >= r->date;
	/* FTP has no redirects: its URL is the job's (ftps:// kept). */
	if (eff)
		(void)snprintf(res->effective_url, sizeof(res->effective_url),
		    "%s", r->ftp ? r->job->url : eff);
	if (r->ftp && r->sink_rc == 0) {
		classify_ftp(r, cc, cl);
		return;
	}
	if (r->sink_rc != 0) {
		res->rc = r->sink_rc;
		res->cls = r->sink_rc == BM_ECHANGED ? XFER_CHANGED :
		    XFER_PERMANENT;
		if (res->errmsg[0] == '\0')
			(void)snprintf(res->errmsg, sizeof(res->errmsg), "%s",
			    r->sink_rc == BM_ELIMIT ?
			    "body larger than the expected size" :
			    bm_strerror(r->sink_rc));
		return;
	}
	if (cc != CURLE_OK && !(r->refused && cc == CURLE_WRITE_ERROR)) {
		res->rc = BM_ENET;
		switch (cc) {
		case CURLE_FILESIZE_EXCEEDED:
			res->rc = BM_ELIMIT;
			/* FALLTHROUGH */
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
		case CURLE_TOO_MANY_REDIRECTS:
		case CURLE_PEER_FAILED_VERIFICATION:
			res->cls = XFER_PERMANENT;
			break;
		default:
			res->cls = XFER_RETRY;
			break;
		}
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "%s",
		    r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc));
		return;
	}
	if (r->job->len > 0 && status == 416) {
		/* No body reached check_status(): same judgement. */
		res->rc = BM_EPROTO;
		res->cls = XFER_PERMANENT;
		res->ignored_range = true;
		(void)snprintf(res->errmsg, sizeof(res->errmsg),
		    "416 for a range: the file is not as listed");
		return;
	}
	if (r->job->len > 0 && status == 200 && !res->full) {
		/* An empty 200 to a range never reached check_status(). */
		res->rc = BM_EPROTO;
		res->cls = XFER_PERMANENT;
		res->ignored_range = true;
		(void)snprintf(res->errmsg, sizeof(res->errmsg),
		    "the server ignored Range");
		return;
	}
	if (status == 200 && url_became_dir(r->job->url, eff)) {
		/* "dir" answered by a redirect to "dir/": not a file. */
		res->rc = BM_EPROTO;
		res->cls = XFER_PERMANENT;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "a directory "
		    "upstream (redirected to its index page), listed without "
		    "a trailing '/': not mirrored");
		return;
	}
	if ((status == 200 || status == 206) &&
	    r->job->kind == XFER_JOB_VALIDATE) {
		/* The size: Content-Range's total, or a 200's length. */
		if (status == 206)
			res->size = res->total;
		res->cls = XFER_OK;
		return;
	}
	if (status == 200 || (status == 206 && r->job->len > 0)) {
		if (cl >= 0 && (uint64_t)cl != res->bytes) {
			res->rc = BM_ECHECKSUM;
			res->cls = XFER_RETRY;
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "got %llu bytes, Content-Length %lld",
			    (unsigned long long)res->bytes, (long long)cl);
			return;
		}
		res->cls = XFER_OK;
		return;
	}
	res->rc = BM_EHTTP;
	(void)snprintf(res->errmsg, sizeof(res->errmsg), "HTTP %ld", status);
	if (status == 304) {
		res->rc = 0;
		res->cls = XFER_NOT_MODIFIED;
		res->errmsg[0] = '\0';
	} else if (status == 404 || status == 410) {
		res->rc = BM_ENOENT;
		res->cls = XFER_GONE;
	} else if (status == 408 || status == 429 || status >= 500)
		res->cls = XFER_RETRY;
	else
		res->cls = XFER_PERMANENT;
}

/*
 * Drive libcurl once and report every finished job: *ret_n is how many,
 * *ret_running how many transfers libcurl still runs.
 */
static int
xfer_drain(struct curl_xfer *x, xfer_done_fn done, void *ctx, size_t *ret_n,
    int *ret_running)
{
	struct curl_rec	*r;
	struct xfer_job	*job;
	CURLMsg		*msg;
	int		 left;

	*ret_n = 0;
	if (curl_multi_perform(x->multi, ret_running) != CURLM_OK)
		return BM_ENET;
	while ((msg = curl_multi_info_read(x->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		r = NULL;
		(void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
		    (char **)&r);
		if (r == NULL)
			continue;
		classify(r, msg->data.result);
		job = r->job;
		rec_unlink(x, r);
		rec_free(x, r);
		done(ctx, job);
		(*ret_n)++;
	}
	return 0;
}

/*
 * Whether libcurl has a socket to wait on (curl_multi_fdset(3): maxfd is
 * -1 when none).  That call leaves out sockets at or above FD_SETSIZE,
 * so once libcurl made one (sockopt_cb) the answer is always yes, and a
 * stop as described in curl_poll() lasts until the next event or the
 * poll's timeout, as it did before this check.
 */
static bool
curl_waits_on_socket(struct curl_xfer *x)
{
	fd_set	rd, wr, ex;
	int	maxfd = -1;

	if (x->fd_high)
		return true;
	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_ZERO(&ex);
	if (curl_multi_fdset(x->multi, &rd, &wr, &ex, &maxfd) != CURLM_OK)
		return true;
	return maxfd >= 0;
}

/*
 * xfer_ops.poll.  wait (a transport stacked on this one, NULL if none):
 * its connections leave libcurl fewer of max_connections, and its
 * sockets wait beside libcurl's.
 */
static int
curl_poll(void *impl, int timeout_ms, struct xfer_wait *wait,
    xfer_done_fn done, void *ctx)
{
	struct curl_xfer *x = impl;
	struct curl_rec	*r;
	struct curl_waitfd wfd[XFER_WAIT_MAX];
	size_t		 n, nfd = 0, i;
	int		 rc, running;

	if (x->npaused > 0) {
		bucket_refill(x);
		for (r = x->head; r != NULL && x->tokens > 0; r = r->next)
			if (r->paused) {
				r->paused = false;
				x->npaused--;
				(void)curl_easy_pause(r->easy, CURLPAUSE_CONT);
			}
		if (x->npaused > 0 && timeout_ms > 10)
			timeout_ms = 10;
	}
	if (wait != NULL) {
		x->others = wait->others;
		host_cap(x);
		nfd = wait->nfds < XFER_WAIT_MAX ? wait->nfds : XFER_WAIT_MAX;
		for (i = 0; i < wait->nfds; i++)
			wait->fds[i].revents = 0;
	}
	/*
	 * Work first, then wait: data that arrived since the last call is
	 * handled at once, and a call that finished jobs returns without
	 * sleeping, so that the caller can start the next ones.
	 */
	if ((rc = xfer_drain(x, done, ctx, &n, &running)) != 0)
		return rc;
	if (n > 0)
		return 0;
	if (x->npaused == 0 && running > 0 && !curl_waits_on_socket(x)) {
		/*
		 * libcurl 7.88's FTP can stop a transfer where it has no
		 * socket to wait on and no timer due (after the reply to
		 * EPSV, before it opens the data connection): the poll
		 * below would sleep the whole timeout, 100 ms per listed
		 * directory or fetched file (seen with strace against
		 * vsftpd).  Drive it once more; if it still waits on
		 * nothing, wait at most 1 ms.
		 */
		if ((rc = xfer_drain(x, done, ctx, &n, &running)) != 0)
			return rc;
		if (n > 0)
			return 0;
		if (running > 0 && !curl_waits_on_socket(x) && timeout_ms > 1)
			timeout_ms = 1;
	}
	/* With nothing in flight this just sleeps (a retry is due later). */
	for (i = 0; i < nfd; i++) {
		wfd[i].fd = wait->fds[i].fd;
		wfd[i].events = (short)((wait->fds[i].events & POLLIN ?
		    CURL_WAIT_POLLIN : 0) | (wait->fds[i].events & POLLOUT ?
		    CURL_WAIT_POLLOUT : 0));
		wfd[i].revents = 0;
	}
	if (curl_multi_poll(x->multi, nfd ? wfd : NULL, (unsigned)nfd,
	    timeout_ms, NULL) != CURLM_OK)
		return BM_ENET;
	for (i = 0; i < nfd; i++)
		wait->fds[i].revents = wfd[i].revents;
	return xfer_drain(x, done, ctx, &n, &running);
}

/* xfer_ops.cancel: drop job's easy handle, no done call. */
static void
curl_cancel(void *impl, struct xfer_job *job)
{
	struct curl_xfer *x = impl;
	struct curl_rec	*r;

	for (r = x->head; r != NULL; r = r->next)
		if (r->job == job) {
			rec_unlink(x, r);
			rec_free(x, r);
			return;
		}
}

/* xfer_ops.hint: GridFTP's TYPE I and whole paths (xfer_ftp_opts). */
static void
curl_hint(void *impl, enum xfer_hint h, bool on)
{
	struct curl_xfer *x = impl;

	if (h == XFER_HINT_GRIDFTP)
		x->opts.ftp.gridftp = on;
}

/* A new multi handle with the transport's options (none in flight). */
static int
multi_new(struct curl_xfer *x)
{
	long	 mc = x->opts.max_connections ? x->opts.max_connections : 8;

	if ((x->multi = curl_multi_init()) == NULL)
		return BM_ENOMEM;
	(void)curl_multi_setopt(x->multi, CURLMOPT_MAX_HOST_CONNECTIONS, mc);
	(void)curl_multi_setopt(x->multi, CURLMOPT_PIPELINING,
	    CURLPIPE_MULTIPLEX);
	(void)curl_multi_setopt(x->multi, CURLMOPT_MAXCONNECTS, mc * 2);
	x->host_cap = mc;
	return 0;
}

/*
 * libcurl may open what a stacked transport leaves of max_connections
 * (at least one, so that ranges and resume checks never wait forever).
 */
static void
host_cap(struct curl_xfer *x)
{
	long	 mc = host_limit(x);
	long	 n = (long)x->others;

	mc = mc > n ? mc - n : 1;
	if (mc != x->host_cap) {
		(void)curl_multi_setopt(x->multi,
		    CURLMOPT_MAX_HOST_CONNECTIONS, mc);
		x->host_cap = mc;
	}
}

static void
curl_wakeup(void *impl)
{
	struct curl_xfer *x = impl;

	(void)curl_multi_wakeup(x->multi);
}

static size_t
curl_active(const void *impl)
{
	const struct curl_xfer *x = impl;

	return x->active;
}

static void
curl_close(void *impl)
{
	struct curl_xfer *x = impl;
	struct curl_rec	*r, *next;

	if (x == NULL)
		return;
	for (r = x->head; r != NULL; r = next) {
		next = r->next;
		rec_free(x, r);
	}
	while (x->nspare > 0)
		curl_easy_cleanup(x->spare[--x->nspare]);
	curl_multi_cleanup(x->multi);
	free(x);
}

/* The table's inspect (xfer.h): the URL as libcurl parses it. */
static int
curl_inspect(const char *url, struct xfer_url_info *ret, char *errbuf,
    size_t errlen)
{
	struct xfer_url_info info;
	CURLU		*u;
	CURLUcode	 uc;
	char		*part = NULL;

	memset(&info, 0, sizeof(info));
	if ((u = curl_url()) == NULL) {
		(void)snprintf(errbuf, errlen, "%s", bm_strerror(BM_ENOMEM));
		return BM_ENOMEM;
	}
	/* Any scheme: the registries judged it (bm:// is not libcurl's). */
	uc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
	info.host = uc != CURLUE_NO_HOST;
	if (uc != CURLUE_OK && uc != CURLUE_NO_HOST)
		info.bad = curl_url_strerror(uc);
	if (uc == CURLUE_OK) {
		info.query = curl_url_get(u, CURLUPART_QUERY, &part, 0) !=
		    CURLUE_NO_QUERY || curl_url_get(u, CURLUPART_FRAGMENT,
		    &part, 0) != CURLUE_NO_FRAGMENT;
		curl_free(part);
		part = NULL;
		info.userinfo = curl_url_get(u, CURLUPART_USER, &part, 0) !=
		    CURLUE_NO_USER || curl_url_get(u, CURLUPART_PASSWORD,
		    &part, 0) != CURLUE_NO_PASSWORD;
		curl_free(part);
	}
	curl_url_cleanup(u);
	*ret = info;
	return 0;
}

/*
 * The table, without handles: which URLs this transport takes is the
 * loader's (curl_load.c), so that asking does not load the module.
 */
static const struct xfer_ops curl_ops = {
	.name = "curl",
	.inspect = curl_inspect,
	.open = curl_open,
	.submit = curl_submit,
	.poll = curl_poll,
	.cancel = curl_cancel,
	.active = curl_active,
	.wakeup = curl_wakeup,
	.hint = curl_hint,
	.close = curl_close,
};

static const struct curl_module curl_module = { CURL_MODULE_ABI,
    sizeof(struct xfer_ops), &curl_ops };
static pthread_once_t	curl_once = PTHREAD_ONCE_INIT;
static bool		curl_ready;

/* libcurl's global state, once (never cleaned up: the module stays). */
static void
curl_init_once(void)
{
	curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

/* The module's one export (curl_int.h). */
__attribute__((visibility("default"))) const struct curl_module *
xfer_curl_module(void)
{
	(void)pthread_once(&curl_once, curl_init_once);
	return curl_ready ? &curl_module : NULL;
}
