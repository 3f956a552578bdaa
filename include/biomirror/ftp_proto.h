/*
 * FTP protocol helpers shared by the FTP lister and the FTP transports:
 * reply framing (RFC 959 section 4.2), RFC 3659 time-vals (MDTM, MLSD
 * modify=) and the judgement of a 530 to a login.  Pure functions: no
 * sockets, no state, no logging.
 */
#ifndef BIOMIRROR_FTP_PROTO_H
#define BIOMIRROR_FTP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes a reply may take before its end is found (ftp_reply_end). */
#define FTP_REPLY_MAX	4096

/* Whether url is ftps:// (explicit TLS on the FTP port, RFC 4217). */
bool	ftp_is_ftps(const char *url);

/*
 * Whether the n bytes at line (no NUL needed) open a reply line: three
 * digits, the first 1-5, then ' ' (last line) or '-' (more follow).
 */
bool	ftp_reply_start(const char *line, size_t n);

/*
 * Find the end of the first complete FTP reply in buf[0..len) ("ddd
 * text" or "ddd-text" ... "ddd text", lines ending in CRLF or LF).
 * Returns its length in bytes with *ret_code set, 0 when more bytes are
 * needed, or -1 for a line that is no reply, or for no end within
 * FTP_REPLY_MAX bytes.
 */
long	ftp_reply_end(const char *buf, size_t len, int *ret_code);

/*
 * Whether a 530 reply to USER or PASS (text: the reply, its lines joined,
 * a C string) is a server's limit, to be retried later, rather than a
 * refused login: text matches lftp's ftp:retry-530 expression (lftp(1)),
 * or for an anonymous login its ftp:retry-530-anonymous ("Login
 * incorrect"), or logged_in: this run already logged in with the same
 * credentials, so a refusal now is a limit on sessions.
 */
bool	ftp_530_is_limit(const char *text, bool anonymous, bool logged_in);

/* The n decimal digits at p (1 to 18, no sign), -1 for anything else. */
int64_t	ftp_digits(const char *p, size_t n);
/*
 * Seconds since the epoch of a calendar time read as UTC (timegm), or -1
 * for a date or time that does not exist (Feb 30, 25:00).
 */
int64_t	ftp_wall_time(int year, int mon, int day, int hour, int min,
	    int sec);

/*
 * An RFC 3659 time-val (section 2.3: "YYYYMMDDHHMMSS[.sss]", UTC), the
 * form of MLSD's modify= fact and of the MDTM reply: the n bytes at v
 * (borrowed, no NUL needed) to whole seconds in *ret_secs and
 * nanoseconds of the fraction (0 without one) in *ret_nsec.  Returns 0,
 * or BM_EINVAL for another form or a date that does not exist.
 */
int	ftp_time_val(const char *v, size_t n, int64_t *ret_secs,
	    int32_t *ret_nsec);

#endif
