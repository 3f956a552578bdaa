/*
 * FTP protocol helpers (ftp_proto.h): reply framing, RFC 3659 times and
 * the 530 rule, used by agent/lister/ftp.c, agent/xfer/curl.c and
 * agent/xfer/gridftp.c.  No state, no logging.
 */
#include <regex.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "biomirror/error.h"
#include "biomirror/ftp_proto.h"

/* Length of the line at buf (through its LF), 0 if incomplete. */
static size_t
line_len(const char *buf, size_t len)
{
	const char	*nl = memchr(buf, '\n', len);

	return nl == NULL ? 0 : (size_t)(nl - buf) + 1;
}

static bool
is_code(const char *p, size_t n)
{
	return n >= 4 && p[0] >= '1' && p[0] <= '5' && p[1] >= '0' &&
	    p[1] <= '9' && p[2] >= '0' && p[2] <= '9';
}

/* The reply code of a line that is_code() accepted. */
static int
code_of(const char *p)
{
	return (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
}

bool
ftp_reply_start(const char *line, size_t n)
{
	return is_code(line, n) && (line[3] == ' ' || line[3] == '-');
}

long
ftp_reply_end(const char *buf, size_t len, int *ret_code)
{
	size_t	 n, off;

	if ((n = line_len(buf, len)) == 0)
		return len > FTP_REPLY_MAX ? -1 : 0;
	if (!is_code(buf, n) || (buf[3] != ' ' && buf[3] != '-' &&
	    buf[3] != '\r' && buf[3] != '\n'))
		return -1;
	if (buf[3] != '-') {
		*ret_code = code_of(buf);
		return (long)n;
	}
	/* Multi-line: ends with a line of the same code and a space. */
	for (off = n; off < len; off += n) {
		if ((n = line_len(buf + off, len - off)) == 0)
			break;
		if (n >= 4 && memcmp(buf + off, buf, 3) == 0 &&
		    (buf[off + 3] == ' ' || buf[off + 3] == '\r' ||
		    buf[off + 3] == '\n')) {
			*ret_code = code_of(buf);
			return (long)(off + n);
		}
	}
	return len > FTP_REPLY_MAX ? -1 : 0;
}

bool
ftp_530_is_limit(const char *text, bool anonymous, bool logged_in)
{
	static const char *const pats[2] = {
		"too many|overloaded|try (again |back )?later|is restricted "
		"to|maximum number|number of connect|only.*session.*allowed|"
		"more connection|already connected|simultaneous login",
		"login incorrect",
	};
	regex_t	 re;
	bool	 hit = false;
	int	 i;

	if (logged_in)
		return true;
	for (i = 0; i < (anonymous ? 2 : 1) && !hit; i++) {
		/* Only on a 530: a compile per call costs nothing here. */
		if (regcomp(&re, pats[i], REG_EXTENDED | REG_ICASE |
		    REG_NOSUB) != 0)
			return true;	/* unsure: keep the old retry */
		hit = regexec(&re, text, 0, NULL, 0) == 0;
		regfree(&re);
	}
	return hit;
}

int64_t
ftp_wall_time(int year, int mon, int day, int hour, int min, int sec)
{
	struct tm	 tm;
	time_t		 t;

	if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour < 0 ||
	    hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 60)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (tm.tm_mday != day || tm.tm_mon != mon - 1)
		return -1;
	return (int64_t)t;
}

/* See ftp_proto.h. */
int64_t
ftp_digits(const char *p, size_t n)
{
	int64_t	 v = 0;
	size_t	 i;

	if (n == 0 || n > 18)
		return -1;
	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

int
ftp_time_val(const char *v, size_t n, int64_t *ret_secs, int32_t *ret_nsec)
{
	int64_t	 t;
	size_t	 i;
	int32_t	 ns = 0, scale = 100000000;

	if (n < 14 || ftp_digits(v, 14) < 0 || (n > 14 && (v[14] != '.' ||
	    n == 15 || n > 24 || ftp_digits(v + 15, n - 15) < 0)))
		return BM_EINVAL;
	t = ftp_wall_time((int)ftp_digits(v, 4), (int)ftp_digits(v + 4, 2),
	    (int)ftp_digits(v + 6, 2), (int)ftp_digits(v + 8, 2),
	    (int)ftp_digits(v + 10, 2), (int)ftp_digits(v + 12, 2));
	if (t < 0)
		return BM_EINVAL;
	for (i = 15; i < n; i++, scale /= 10)
		ns += (v[i] - '0') * scale;
	*ret_secs = t;
	*ret_nsec = ns;
	return 0;
}

/* An ftps:// URL: explicit TLS on the FTP port (README "ftp_tls"). */
bool
ftp_is_ftps(const char *url)
{
	return strncasecmp(url, "ftps://", 7) == 0;
}
