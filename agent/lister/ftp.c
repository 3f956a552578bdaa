/*
 * The FTP lister (see include/biomirror/list_ftp.h).  Parsers work on
 * bytes, line by line, splitting only on LF (a CR before it is dropped):
 * names are whatever bytes the server sent, so no decoding step can cut
 * or change them.  Every line is judged on its own; a line the parsers
 * do not understand is counted and skipped, never fatal.  Formats:
 * MLSD per RFC 3659 section 7; LIST in the Unix "ls -l" layout (the
 * date columns "Mon DD HH:MM" / "Mon DD YYYY", or "DD. Mon ...", with
 * month names of common server locales, anchor the parse, so
 * owner/group/link-count columns may be missing or odd), the DOS/IIS
 * layout and the OS/2 one.  A date that does not exist keeps its entry
 * with an unknown time; a LIST size of 0 is a hint (issue 22).  The
 * crawl asks FEAT once (RFC 2389) and uses MLSD when MLST is advertised,
 * LIST otherwise.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <stdint.h>

#include "biomirror/clock.h"
#include "biomirror/crawl.h"
#include "biomirror/error.h"
#include "biomirror/ftp_proto.h"
#include "biomirror/list_ftp.h"
#include "biomirror/lister.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/text.h"

#define DAY_SECONDS	86400
#define MAX_LINE	8192		/* longer lines are skipped (rule 31) */
#define MAX_TOKENS	16
#define MAX_LINKS	(1 << 22)	/* symlinks kept to follow (rule 31) */

/* A parsed line before it becomes an entry. */
struct ftp_line {
	const char	*name;		/* borrowed: name bytes */
	size_t		 namelen;
	const char	*target;	/* borrowed: symlink target, NULL if none */
	size_t		 targetlen;
	enum entry_type	 target_type;	/* the target's type, 0 if not stated */
	const char	*unique;	/* borrowed: MLSD unique, NULL if none */
	size_t		 uniquelen;
	const char	*sizetext;	/* borrowed: size column as listed */
	size_t		 sizetextlen;
	enum entry_type	 type;
	int64_t		 size, size_min, size_max;
	bool		 size_exact;
	int64_t		 wall;		/* listed time, seconds as if UTC */
	int32_t		 nsec;
	enum mtime_prec	 prec;
	bool		 utc;		/* MLSD: the time is UTC */
	bool		 cdir;		/* MLSD: the listed directory itself */
	bool		 datebad;	/* a date was listed that does not exist:
					   kept with an unknown time */
	const char	*why;		/* static: why a LINE_BAD line is bad */
};

/* Result of judging one line. */
enum line_kind {
	LINE_ENTRY,		/* an entry */
	LINE_QUIET,		/* always skipped: blank, "total", ".", "..", cdir */
	LINE_BAD,		/* not understood (counted) */
};

/*
 * Month names as servers print them: English, then the abbreviations of
 * the common server locales (glibc's abmon, and the forms FileZilla's
 * parser knows), in UTF-8 and in Latin-1.  Compared without ASCII case,
 * after a trailing '.' or ',' is dropped ("janv.", "Okt.", "Jan.,").
 */
static const struct month_name {
	const char	*name;		/* static: lower case, no trailing dot */
	int		 mon;		/* 1..12 */
} month_names[] = {
	{ "jan", 1 }, { "feb", 2 }, { "mar", 3 }, { "apr", 4 },
	{ "may", 5 }, { "jun", 6 }, { "jul", 7 }, { "aug", 8 },
	{ "sep", 9 }, { "oct", 10 }, { "nov", 11 }, { "dec", 12 },
	{ "june", 6 }, { "july", 7 }, { "sept", 9 },
	/* German, Austrian */
	{ "m\xc3\xa4r", 3 }, { "m\xe4r", 3 }, { "m\xc3\xa4rz", 3 },
	{ "m\xe4rz", 3 }, { "mrz", 3 }, { "mai", 5 }, { "juni", 6 },
	{ "juli", 7 }, { "okt", 10 }, { "dez", 12 }, { "j\xc3\xa4n", 1 },
	{ "j\xe4n", 1 },
	/* French */
	{ "janv", 1 }, { "f\xc3\xa9v", 2 }, { "f\xe9v", 2 },
	{ "f\xc3\xa9vr", 2 }, { "f\xe9vr", 2 }, { "fevr", 2 }, { "fev", 2 },
	{ "mars", 3 }, { "avr", 4 }, { "avril", 4 }, { "juin", 6 },
	{ "juil", 7 }, { "ao\xc3\xbbt", 8 }, { "ao\xfbt", 8 }, { "aout", 8 },
	{ "d\xc3\xa9" "c", 12 }, { "d\xe9" "c", 12 },
	/* Spanish, Italian, Portuguese */
	{ "ene", 1 }, { "abr", 4 }, { "ago", 8 }, { "dic", 12 },
	{ "gen", 1 }, { "mag", 5 }, { "giu", 6 }, { "lug", 7 }, { "set", 9 },
	{ "ott", 10 }, { "out", 10 }, { "dez", 12 },
	/* Dutch, Scandinavian */
	{ "mrt", 3 }, { "mei", 5 }, { "maj", 5 }, { "des", 12 },
	/* Polish */
	{ "sty", 1 }, { "lut", 2 }, { "kwi", 4 }, { "cze", 6 }, { "lip", 7 },
	{ "sie", 8 }, { "wrz", 9 }, { "pa\xc5\xba", 10 }, { "lis", 11 },
	{ "gru", 12 },
	/* Finnish */
	{ "tammi", 1 }, { "helmi", 2 }, { "maalis", 3 }, { "huhti", 4 },
	{ "touko", 5 }, { "kes\xc3\xa4", 6 }, { "hein\xc3\xa4", 7 },
	{ "elo", 8 }, { "syys", 9 }, { "loka", 10 }, { "marras", 11 },
	{ "joulu", 12 },
	/* Russian (UTF-8) */
	{ "\xd1\x8f\xd0\xbd\xd0\xb2", 1 }, { "\xd1\x84\xd0\xb5\xd0\xb2", 2 },
	{ "\xd0\xbc\xd0\xb0\xd1\x80", 3 }, { "\xd0\xb0\xd0\xbf\xd1\x80", 4 },
	{ "\xd0\xbc\xd0\xb0\xd0\xb9", 5 }, { "\xd0\xbc\xd0\xb0\xd1\x8f", 5 },
	{ "\xd0\xb8\xd1\x8e\xd0\xbd", 6 }, { "\xd0\xb8\xd1\x8e\xd0\xbb", 7 },
	{ "\xd0\xb0\xd0\xb2\xd0\xb3", 8 }, { "\xd1\x81\xd0\xb5\xd0\xbd", 9 },
	{ "\xd0\xbe\xd0\xba\xd1\x82", 10 }, { "\xd0\xbd\xd0\xbe\xd1\x8f", 11 },
	{ "\xd0\xb4\xd0\xb5\xd0\xba", 12 },
};

/*
 * The time of a date listed without a year (FileZilla's rule, which is
 * how ls(1) chooses between "HH:MM" and "YYYY": within six months of
 * now): the year that puts it no more than one day after now_wall, by
 * its place in the calendar.  -1 when the date does not exist in that
 * year (Feb 29 outside a leap year, Feb 30): unknown, never a guess.
 */
static int64_t
infer_year(int mon, int day, int hour, int min, int64_t now_wall)
{
	struct tm	 tm;
	time_t		 soon = (time_t)(now_wall + DAY_SECONDS);
	int64_t		 k, ksoon;

	if (gmtime_r(&soon, &tm) == NULL)
		return -1;
	k = (((int64_t)mon * 32 + day) * 24 + hour) * 60 + min;
	ksoon = (((int64_t)tm.tm_mon + 1) * 32 + tm.tm_mday) * 24 * 60 +
	    tm.tm_hour * 60 + tm.tm_min;
	return ftp_wall_time(tm.tm_year + 1900 - (k > ksoon), mon, day, hour,
	    min, 0);
}

/*
 * Month 1..12 of a month name (month_names), or of "N月"/"N월" (CJK
 * locales), 0 if none.
 */
static int
month_of(const char *p, size_t n)
{
	size_t	 i;
	int64_t	 v;

	if (n > 1 && (p[n - 1] == '.' || p[n - 1] == ','))
		n--;
	if (n > 1 && p[n - 1] == '.')
		n--;
	for (i = 0; i < sizeof(month_names) / sizeof(month_names[0]); i++)
		if (strlen(month_names[i].name) == n &&
		    strncasecmp(p, month_names[i].name, n) == 0)
			return month_names[i].mon;
	if (n == 4 || n == 5) {
		if ((memcmp(p + n - 3, "\xe6\x9c\x88", 3) == 0 ||
		    memcmp(p + n - 3, "\xec\x9b\x94", 3) == 0) &&
		    (v = ftp_digits(p, n - 3)) >= 1 && v <= 12)
			return (int)v;
	}
	return 0;
}

/*
 * A size column: exact digits, or a human size "10.3k" (inexact: the
 * range a truncating formatter stands for, powers of 1024).  Overflow
 * leaves the size unknown.  Returns false when it is no size at all.
 */
static bool
parse_size(const char *p, size_t n, struct ftp_line *fl)
{
	const char	*units = "kmgtp";
	const char	*u;
	double		 v, step = 1, mult = 1;
	size_t		 i, dot = n;
	int64_t		 x;

	fl->sizetext = p;
	fl->sizetextlen = n;
	/* an earlier size fact of the same MLSD line may have set it */
	fl->size_exact = false;
	if (n > 0 && ftp_digits(p, n) >= 0) {
		fl->size = fl->size_min = fl->size_max = ftp_digits(p, n);
		fl->size_exact = true;
		return true;
	}
	if (n > 0 && n <= 25 && strspn(p, "0123456789") == n) {
		fl->size = fl->size_min = fl->size_max = -1;	/* overflow */
		return true;
	}
	if (n < 2 || (u = strchr(units, tolower((unsigned char)p[n - 1]))) ==
	    NULL || *u == '\0')
		return false;
	for (i = 0; i < n - 1; i++)
		if (p[i] == '.' && dot == n)
			dot = i;
		else if (!isdigit((unsigned char)p[i]))
			return false;
	/* at most 18 fraction digits, so that they fit an int64_t */
	if (dot == 0 || dot == n - 2 || (dot < n && n - 2 - dot > 18))
		return false;
	for (i = 0; i <= (size_t)(u - units); i++)
		mult *= 1024;
	for (i = dot + 1; i < n - 1; i++)
		step /= 10;
	if ((x = ftp_digits(p, dot < n - 1 ? dot : n - 1)) < 0)
		return false;
	v = (double)x;
	for (i = dot + 1, x = 0; i < n - 1; i++)
		x = x * 10 + (p[i] - '0');
	v += (double)x * step;
	/* "999999999999999999p": past int64_t, as digits that overflow */
	if ((v + step) * mult + 1.0 >= 9223372036854775808.0) {
		fl->size = fl->size_min = fl->size_max = -1;
		return true;
	}
	fl->size_min = (int64_t)(v * mult + 0.999999);
	fl->size_max = (int64_t)((v + step) * mult + 0.999999) - 1;
	fl->size = fl->size_min + (fl->size_max - fl->size_min) / 2;
	fl->size_exact = false;
	/* "1.0808k": no byte count truncates to that, so it says nothing */
	if (fl->size_min > fl->size_max)
		fl->size = fl->size_min = fl->size_max = -1;
	return true;
}

/* Split line into whitespace tokens; returns the count (at most max). */
static size_t
tokens(const char *line, size_t len, const char **tok, size_t *tlen,
    size_t max)
{
	size_t	 i = 0, n = 0, s;

	while (n < max) {
		while (i < len && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i >= len)
			break;
		s = i;
		while (i < len && line[i] != ' ' && line[i] != '\t')
			i++;
		tok[n] = line + s;
		tlen[n++] = i - s;
	}
	return n;
}

/* "HH:MM" (H one or two digits): fills hour and minute. */
static bool
parse_hhmm(const char *p, size_t n, int *hour, int *min)
{
	const char	*c = memchr(p, ':', n);
	int64_t		 h, m;

	if (c == NULL || (h = ftp_digits(p, (size_t)(c - p))) < 0 ||
	    c - p > 2 || (m = ftp_digits(c + 1, n - (size_t)(c - p) - 1)) < 0 ||
	    n - (size_t)(c - p) - 1 != 2 || h > 23 || m > 59)
		return false;
	*hour = (int)h;
	*min = (int)m;
	return true;
}

/* The file type of a Unix mode string, 0 when it is none. */
static int
unix_mode_type(const char *p, size_t n)
{
	size_t	 i;

	if (n < 10 || n > 11 || strchr("-dlbcps", p[0]) == NULL)
		return 0;
	for (i = 1; i < 10; i++)
		if (strchr("rwxsStTlL-", p[i]) == NULL)
			return 0;
	if (n == 11 && strchr("+@.", p[10]) == NULL)
		return 0;
	return p[0];
}

/* The name (and symlink target) that follows the date columns. */
static enum line_kind
unix_name(const char *rest, size_t n, int mode, struct ftp_line *fl)
{
	const char	*arrow = NULL;
	size_t		 i;

	if (n < 2 || rest[0] != ' ')
		return LINE_BAD;
	rest++;
	n--;
	if (mode == 'l') {
		for (i = 0; i + 4 <= n; i++)
			if (memcmp(rest + i, " -> ", 4) == 0) {
				arrow = rest + i;
				break;
			}
		if (arrow != NULL) {
			fl->target = arrow + 4;
			fl->targetlen = n - (size_t)(arrow - rest) - 4;
			n = (size_t)(arrow - rest);
		}
	}
	fl->name = rest;
	fl->namelen = n;
	if (mode == '-')
		fl->type = ENTRY_FILE;
	else if (mode == 'd')
		fl->type = ENTRY_DIR;
	else if (mode == 'l') {
		fl->type = ENTRY_SYMLINK;
		fl->size = fl->size_min = fl->size_max = -1;
		fl->size_exact = false;
	} else
		return LINE_QUIET;	/* devices, pipes, sockets: not mirrored */
	return n == 0 ? LINE_BAD : LINE_ENTRY;
}

/*
 * The time column of a Unix line ("HH:MM", year inferred, or "YYYY") for
 * month mon, day day.  False when it is neither.  A date that does not
 * exist (Feb 30; Feb 29 outside a leap year) leaves the time unknown and
 * sets fl->datebad: the entry is kept, and checked by MDTM.
 */
static bool
unix_when(const char *p, size_t n, int mon, int day, int64_t now_wall,
    struct ftp_line *fl)
{
	int64_t		 year;
	int		 hour, min;

	if (parse_hhmm(p, n, &hour, &min)) {
		fl->wall = infer_year(mon, day, hour, min, now_wall);
		fl->prec = MTIME_MINUTE;
	} else if (n == 4 && (year = ftp_digits(p, 4)) >= 1900) {
		fl->wall = ftp_wall_time((int)year, mon, day, 0, 0, 0);
		fl->prec = MTIME_DAY;
	} else
		return false;	/* "209": never guessed */
	if (fl->wall < 0) {
		fl->wall = 0;
		fl->prec = MTIME_UNKNOWN;
		fl->datebad = true;
	}
	return true;
}

/* "DD" or "DD." (1..31), -1 if not. */
static int64_t
unix_day(const char *p, size_t n)
{
	int64_t	 d;

	if (n > 1 && p[n - 1] == '.')
		n--;
	if (n > 2 || (d = ftp_digits(p, n)) < 1 || d > 31)
		return -1;
	return d;
}

/*
 * One Unix "ls -l" line, anchored on the first "size Mon DD HH:MM|YYYY"
 * or, as some locales print it, "size DD[.] Mon[.][,] HH:MM|YYYY".
 */
static enum line_kind
parse_unix(const char *line, size_t len, int64_t now_wall,
    struct ftp_line *fl)
{
	const char	*tok[MAX_TOKENS];
	size_t		 tlen[MAX_TOKENS], nt, m, t;
	int64_t		 day;
	int		 mode, mon;

	fl->why = "not a listing line (no Unix mode, no DOS date)";
	if ((nt = tokens(line, len, tok, tlen, MAX_TOKENS)) < 5)
		return LINE_BAD;
	if ((mode = unix_mode_type(tok[0], tlen[0])) == 0)
		return LINE_BAD;
	fl->why = "no size and date columns (size Mon DD HH:MM|YYYY)";
	for (m = 2; m + 1 < nt; m++) {
		if ((mon = month_of(tok[m], tlen[m])) == 0)
			continue;
		fl->datebad = false;
		if (m + 2 < nt && (day = unix_day(tok[m + 1], tlen[m + 1])) >
		    0 && tlen[m + 1] <= 2 &&
		    parse_size(tok[m - 1], tlen[m - 1], fl) &&
		    unix_when(tok[m + 2], tlen[m + 2], mon, (int)day, now_wall,
		    fl))
			t = m + 2;
		else if (m >= 3 && (day = unix_day(tok[m - 1], tlen[m - 1])) >
		    0 && parse_size(tok[m - 2], tlen[m - 2], fl) &&
		    unix_when(tok[m + 1], tlen[m + 1], mon, (int)day, now_wall,
		    fl))
			t = m + 1;
		else
			continue;
		fl->why = "no name after the date";
		return unix_name(tok[t] + tlen[t],
		    len - (size_t)(tok[t] + tlen[t] - line), mode, fl);
	}
	return LINE_BAD;
}

/* A DOS size with thousands separators ("9,730"): exact. */
static bool
dos_size(const char *p, size_t n, struct ftp_line *fl)
{
	int64_t	 v = 0;
	size_t	 i, digits = 0;

	for (i = 0; i < n; i++) {
		if (p[i] == ',' && i > 0 && (n - i - 1) % 4 == 3)
			continue;
		if (!isdigit((unsigned char)p[i]) || ++digits > 18)
			return false;
		v = v * 10 + (p[i] - '0');
	}
	if (digits == 0)
		return false;
	fl->size = fl->size_min = fl->size_max = v;
	fl->size_exact = true;
	fl->sizetext = p;
	fl->sizetextlen = n;
	return true;
}

/* One DOS/IIS line: "MM-DD-YY[YY]  HH:MM[AM|PM]  <DIR>|size name". */
static enum line_kind
parse_dos(const char *line, size_t len, struct ftp_line *fl)
{
	const char	*tok[4];
	size_t		 tlen[4], n, ampm = 0;
	int64_t		 mo, d, y;
	int		 hour, min;
	const char	*name;

	if (tokens(line, len, tok, tlen, 4) < 4 || (tlen[0] != 8 &&
	    tlen[0] != 10))
		return LINE_BAD;
	if (tlen[0] == 10 && tok[0][4] == '-' && tok[0][7] == '-') {
		/* ISO "YYYY-MM-DD" (IIS with a long-year setting) */
		y = ftp_digits(tok[0], 4);
		mo = ftp_digits(tok[0] + 5, 2);
		d = ftp_digits(tok[0] + 8, 2);
	} else if (tok[0][2] == '-' && tok[0][5] == '-') {
		mo = ftp_digits(tok[0], 2);
		d = ftp_digits(tok[0] + 3, 2);
		y = ftp_digits(tok[0] + 6, tlen[0] - 6);
		if (tlen[0] == 8 && y >= 0)
			y += y < 70 ? 2000 : 1900;
	} else
		return LINE_BAD;
	if (y < 0 || mo < 0 || d < 0)
		return LINE_BAD;
	n = tlen[1];
	if (n > 2 && (strncasecmp(tok[1] + n - 2, "AM", 2) == 0 ||
	    strncasecmp(tok[1] + n - 2, "PM", 2) == 0))
		ampm = 2;
	if (!parse_hhmm(tok[1], n - ampm, &hour, &min))
		return LINE_BAD;
	if (ampm) {
		if (hour < 1 || hour > 12)
			return LINE_BAD;
		hour %= 12;
		if (toupper((unsigned char)tok[1][n - 2]) == 'P')
			hour += 12;
	}
	if ((fl->wall = ftp_wall_time((int)y, (int)mo, (int)d, hour, min,
	    0)) < 0)
		return LINE_BAD;
	fl->prec = MTIME_MINUTE;
	if (tlen[2] == 5 && memcmp(tok[2], "<DIR>", 5) == 0)
		fl->type = ENTRY_DIR;
	else if (parse_size(tok[2], tlen[2], fl) ||
	    dos_size(tok[2], tlen[2], fl))
		fl->type = ENTRY_FILE;
	else
		return LINE_BAD;
	name = tok[3];
	fl->name = name;
	fl->namelen = len - (size_t)(name - line);
	return LINE_ENTRY;
}

/*
 * One OS/2 line: "size [attributes] [DIR] MM-DD-YY[Y] HH:MM name", the
 * year in two digits or, after 1999, in three counted from 1900
 * ("04-23-103" is 2003).  Attributes are letters of "RHSA".
 */
static enum line_kind
parse_os2(const char *line, size_t len, struct ftp_line *fl)
{
	const char	*tok[6];
	size_t		 tlen[6], nt, i, d;
	int64_t		 mo, day, y, size;
	int		 hour, min;
	bool		 dir = false;

	fl->why = "not a listing line (no Unix mode, no DOS or OS/2 date)";
	if ((nt = tokens(line, len, tok, tlen, 6)) < 4 ||
	    (size = ftp_digits(tok[0], tlen[0])) < 0)
		return LINE_BAD;
	for (d = 1; d < nt; d++) {
		if (tlen[d] == 3 && memcmp(tok[d], "DIR", 3) == 0) {
			dir = true;
			continue;
		}
		for (i = 0; i < tlen[d] && tok[d][i] != '\0' &&
		    strchr("RHSA", tok[d][i]) != NULL; i++)
			;
		if (i < tlen[d] || tlen[d] > 4)
			break;
	}
	if (d + 2 >= nt || (tlen[d] != 8 && tlen[d] != 9) ||
	    tok[d][2] != '-' || tok[d][5] != '-')
		return LINE_BAD;
	mo = ftp_digits(tok[d], 2);
	day = ftp_digits(tok[d] + 3, 2);
	if ((y = ftp_digits(tok[d] + 6, tlen[d] - 6)) >= 0)
		y += tlen[d] == 9 || y >= 70 ? 1900 : 2000;
	if (mo < 0 || day < 0 || y < 0 || !parse_hhmm(tok[d + 1],
	    tlen[d + 1], &hour, &min))
		return LINE_BAD;
	if ((fl->wall = ftp_wall_time((int)y, (int)mo, (int)day, hour, min,
	    0)) < 0) {
		fl->wall = 0;
		fl->datebad = true;
	} else
		fl->prec = MTIME_MINUTE;
	fl->type = dir ? ENTRY_DIR : ENTRY_FILE;
	if (!dir) {
		fl->size = fl->size_min = fl->size_max = size;
		fl->size_exact = true;
		fl->sizetext = tok[0];
		fl->sizetextlen = tlen[0];
	}
	i = (size_t)(tok[d + 1] + tlen[d + 1] - line);
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	fl->why = "no name after the date";
	if (i == len)
		return LINE_BAD;
	fl->name = line + i;
	fl->namelen = len - i;
	return LINE_ENTRY;
}

/* The MLSD type fact's value (RFC 3659 7.5.1, errata 1500). */
static enum line_kind
mlsd_type(const char *v, size_t n, struct ftp_line *fl)
{
	if (n == 4 && strncasecmp(v, "file", 4) == 0)
		fl->type = ENTRY_FILE;
	else if (n == 3 && strncasecmp(v, "dir", 3) == 0)
		fl->type = ENTRY_DIR;
	else if (n == 4 && strncasecmp(v, "cdir", 4) == 0)
		fl->cdir = true;
	else if (n == 4 && strncasecmp(v, "pdir", 4) == 0)
		return LINE_QUIET;
	else if (n >= 14 && strncasecmp(v, "OS.unix=slink:", 14) == 0) {
		fl->type = ENTRY_SYMLINK;
		if (n > 14) {
			fl->target = v + 14;
			fl->targetlen = n - 14;
		}
	} else if ((n == 15 && strncasecmp(v, "OS.unix=symlink", 15) == 0) ||
	    (n == 13 && strncasecmp(v, "OS.unix=slink", 13) == 0))
		fl->type = ENTRY_SYMLINK;
	else if (n > 16 && strncasecmp(v, "OS.unix=symlink:", 16) == 0) {
		fl->type = ENTRY_SYMLINK;
		fl->target = v + 16;
		fl->targetlen = n - 16;
	} else
		return LINE_QUIET;	/* devices and other OS types */
	return LINE_ENTRY;
}

/* modify=YYYYMMDDHHMMSS[.sss] (RFC 3659 section 2.3), UTC. */
static bool
mlsd_time(const char *v, size_t n, struct ftp_line *fl)
{
	if (ftp_time_val(v, n, &fl->wall, &fl->nsec) != 0)
		return false;
	fl->prec = n > 14 ? MTIME_NS : MTIME_SECOND;
	fl->utc = true;
	return true;
}

/* One MLSD line: "fact=value;...; name" (RFC 3659 section 7.2). */
static enum line_kind
parse_mlsd(const char *line, size_t len, struct ftp_line *fl)
{
	const char	*sep = NULL, *p, *e, *eq, *end, *slink = NULL;
	enum line_kind	 k = LINE_ENTRY;
	size_t		 i, slinklen = 0;

	for (i = 0; i + 1 < len; i++)
		if (line[i] == ';' && line[i + 1] == ' ') {
			sep = line + i;
			break;
		}
	fl->why = "no facts (no \"; \" before the name)";
	if (sep == NULL)
		return LINE_BAD;
	fl->why = "a fact without '='";
	fl->type = ENTRY_FILE;
	for (p = line; p < sep; p = e + 1) {
		if ((e = memchr(p, ';', (size_t)(sep - p))) == NULL)
			e = sep;
		if ((eq = memchr(p, '=', (size_t)(e - p))) == NULL)
			return LINE_BAD;
		end = e;
		if (eq - p == 4 && strncasecmp(p, "type", 4) == 0) {
			if ((k = mlsd_type(eq + 1, (size_t)(end - eq - 1),
			    fl)) != LINE_ENTRY)
				return k;
		} else if (eq - p == 4 && strncasecmp(p, "size", 4) == 0) {
			if (!parse_size(eq + 1, (size_t)(end - eq - 1), fl) ||
			    !fl->size_exact)
				fl->size = fl->size_min = fl->size_max = -1;
		} else if (eq - p == 6 && strncasecmp(p, "modify", 6) == 0) {
			if (!mlsd_time(eq + 1, (size_t)(end - eq - 1), fl))
				fl->prec = MTIME_UNKNOWN;
		} else if (eq - p == 6 && strncasecmp(p, "unique", 6) == 0) {
			fl->unique = eq + 1;
			fl->uniquelen = (size_t)(end - eq - 1);
		} else if (eq - p == 10 && strncasecmp(p, "UNIX.slink", 10) == 0 &&
		    end > eq + 1) {
			/* GridFTP: type= is the target's, this is the link */
			slink = eq + 1;
			slinklen = (size_t)(end - eq - 1);
		}
	}
	if (slink != NULL && !fl->cdir) {
		if (fl->type == ENTRY_FILE || fl->type == ENTRY_DIR)
			fl->target_type = fl->type;
		fl->type = ENTRY_SYMLINK;
		fl->target = slink;
		fl->targetlen = slinklen;
	}
	if (fl->cdir)
		return LINE_QUIET;
	if (fl->type != ENTRY_FILE) {
		fl->size = fl->size_min = fl->size_max = -1;
		fl->size_exact = false;
	}
	fl->sizetext = NULL;
	fl->name = sep + 2;
	fl->namelen = len - (size_t)(sep + 2 - line);
	fl->why = "no name after the facts";
	return fl->namelen == 0 ? LINE_BAD : LINE_ENTRY;
}

/* Judge one line (no line end) in the given dialect. */
static enum line_kind
parse_line(const char *line, size_t len, bool mlsd, int64_t now_wall,
    struct ftp_line *fl)
{
	enum line_kind	 k;
	size_t		 i;

	memset(fl, 0, sizeof(*fl));
	fl->size = fl->size_min = fl->size_max = -1;
	for (i = 0; i < len && (line[i] == ' ' || line[i] == '\t'); i++)
		;
	if (i == len)
		return LINE_QUIET;
	fl->why = "longer than 8192 bytes";
	if (len > MAX_LINE)
		return LINE_BAD;
	if (mlsd)
		return parse_mlsd(line, len, fl);
	if (len > 6 && strncmp(line, "total ", 6) == 0)
		return LINE_QUIET;
	if (isdigit((unsigned char)line[i])) {
		if ((k = parse_dos(line, len, fl)) == LINE_BAD) {
			memset(fl, 0, sizeof(*fl));
			fl->size = fl->size_min = fl->size_max = -1;
			k = parse_os2(line, len, fl);
		}
	} else
		k = parse_unix(line, len, now_wall, fl);
	/*
	 * A listed 0 in LIST is a hint (a growing log, a file the server
	 * could not stat): the size comes from SIZE and the body, as for
	 * no size (issue 22).  MLSD's size= is a fact.
	 */
	if (k == LINE_ENTRY && fl->type == ENTRY_FILE && fl->size_exact &&
	    fl->size == 0) {
		fl->size = fl->size_min = fl->size_max = -1;
		fl->size_exact = false;
	}
	return k;
}

/* Copy n bytes of p into a fresh NUL-terminated string, NULL on ENOMEM. */
static char *
dup_n(const char *p, size_t n)
{
	char	*s;

	if ((s = malloc(n + 1)) == NULL)
		return NULL;
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/*
 * Append the entry of a parsed line.  Returns 0, 1 when its name is unsafe
 * (skipped), BM_ENOMEM or BM_ELIMIT.
 */
static int
add_entry(const struct ftp_line *fl, const char *prefix, struct listing *out)
{
	struct entry	*e;
	size_t		 plen = strlen(prefix);
	int		 rc;

	if ((fl->namelen == 1 && fl->name[0] == '.') ||
	    (fl->namelen == 2 && memcmp(fl->name, "..", 2) == 0))
		return 0;
	if (!name_is_safe(fl->name, fl->namelen) ||
	    memchr(fl->name, '\0', fl->namelen) != NULL)
		return 1;
	if ((rc = listing_append(out, &e)) != 0)
		return rc;
	if ((e->path = malloc(plen + 1 + fl->namelen + 1)) == NULL)
		goto nomem;
	if (plen > 0) {
		memcpy(e->path, prefix, plen);
		e->path[plen++] = '/';
	}
	memcpy(e->path + plen, fl->name, fl->namelen);
	e->path[plen + fl->namelen] = '\0';
	if ((e->href = dup_n(fl->name, fl->namelen)) == NULL)
		goto nomem;
	e->type = fl->type;
	e->size = fl->size;
	e->size_exact = fl->size_exact;
	e->size_min = fl->size_min;
	e->size_max = fl->size_max;
	if (fl->sizetext != NULL && fl->type == ENTRY_FILE &&
	    (e->size_display = dup_n(fl->sizetext, fl->sizetextlen)) == NULL)
		goto nomem;
	e->mtime_prec = fl->prec;
	e->mtime_wall = fl->wall;
	e->mtime_nsec = fl->nsec;
	e->zone_stated = fl->utc;
	if (fl->target != NULL && fl->targetlen > 0 &&
	    (e->target = dup_n(fl->target, fl->targetlen)) == NULL)
		goto nomem;
	e->target_type = fl->target_type;
	if (fl->unique != NULL && fl->uniquelen > 0 &&
	    (e->unique = dup_n(fl->unique, fl->uniquelen)) == NULL)
		goto nomem;
	return 0;
nomem:
	listing_pop(out);
	return BM_ENOMEM;
}

/*
 * At -v: "url: list: line N skipped: why: the line" (escaped, cut to
 * 160 bytes), or kept with an unknown time when its date does not exist.
 */
static void
log_line(const char *url, size_t lineno, const char *p, size_t n,
    const char *why, bool kept)
{
	char	 raw[161], esc[4 * sizeof(raw)];

	if (url == NULL || log_verbosity() < 1)
		return;
	if (n >= sizeof(raw))
		n = sizeof(raw) - 1;
	memcpy(raw, p, n);
	raw[n] = '\0';
	text_term_escape(raw, esc, sizeof(esc));
	log_info("%s: list: line %zu %s: %s: %s", url, lineno, kept ?
	    "kept with an unknown time" : "skipped", why, esc);
}

/*
 * list_ftp_parse(), and the unique= of the MLSD cdir line (the directory
 * listed) into *ret_cdir (malloc'd, NULL if none; may be NULL); lines
 * not understood are counted in *ret_unread (may be NULL: then in
 * *ret_skipped), unsafe names in *ret_skipped; with url (NULL: quiet),
 * each is named at -v (log_line), numbered from line0 + 1.
 */
static int
parse_reply(const uint8_t *body, size_t len, bool mlsd, int64_t now_wall,
    const char *prefix, struct listing *out, size_t *ret_skipped,
    size_t *ret_unread, char **ret_cdir, const char *url, size_t line0)
{
	const char	*p = (const char *)body, *end = p + len, *nl;
	struct ftp_line	 fl;
	size_t		 skipped = 0, unread = 0, n, lineno = line0;
	int		 rc = 0;

	while (p < end) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		n = (size_t)(nl - p);
		if (n > 0 && p[n - 1] == '\r')
			n--;
		lineno++;
		switch (parse_line(p, n, mlsd, now_wall, &fl)) {
		case LINE_QUIET:
			if (fl.cdir && fl.unique != NULL && ret_cdir != NULL &&
			    *ret_cdir == NULL && (*ret_cdir = dup_n(fl.unique,
			    fl.uniquelen)) == NULL) {
				rc = BM_ENOMEM;
				goto out;
			}
			break;
		case LINE_ENTRY:
			if ((rc = add_entry(&fl, prefix, out)) < 0)
				goto out;
			if (rc == 1) {
				skipped++;
				log_line(url, lineno, p, n, "unsafe name",
				    false);
			} else if (fl.datebad)
				log_line(url, lineno, p, n, "no such date",
				    true);
			rc = 0;
			break;
		case LINE_BAD:
			unread++;
			log_line(url, lineno, p, n, fl.why != NULL ? fl.why :
			    "not understood", false);
			break;
		}
		p = nl + 1;
	}
out:
	if (ret_unread != NULL)
		*ret_unread = unread;
	else
		skipped += unread;
	if (ret_skipped != NULL)
		*ret_skipped = skipped;
	return rc;
}

int
list_ftp_parse(const uint8_t *body, size_t len, bool mlsd, int64_t now_wall,
    const char *prefix, struct listing *out, size_t *ret_skipped)
{
	return parse_reply(body, len, mlsd, now_wall, prefix, out,
	    ret_skipped, NULL, NULL, NULL, 0);
}

const char *
list_ftp_line_why(const uint8_t *line, size_t len, bool mlsd,
    int64_t now_wall)
{
	struct ftp_line	 fl;

	switch (parse_line((const char *)line, len, mlsd, now_wall, &fl)) {
	case LINE_BAD:
		return fl.why != NULL ? fl.why : "not understood";
	case LINE_ENTRY:
		if (!(fl.namelen == 1 && fl.name[0] == '.') &&
		    !(fl.namelen == 2 && memcmp(fl.name, "..", 2) == 0) &&
		    (!name_is_safe(fl.name, fl.namelen) ||
		    memchr(fl.name, '\0', fl.namelen) != NULL))
			return "unsafe name";
		return NULL;
	default:
		return NULL;
	}
}

bool
list_ftp_feat_mlst(const uint8_t *body, size_t len)
{
	return list_ftp_feat_has(body, len, "MLST");
}

bool
list_ftp_feat_has(const uint8_t *body, size_t len, const char *name)
{
	const char	*p = (const char *)body, *end = p + len, *nl;
	bool		 in = false;
	size_t		 n, k = strlen(name);

	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		n = (size_t)(nl - p);
		if (n >= 4 && memcmp(p, "211", 3) == 0) {
			in = p[3] == '-';
			continue;
		}
		/* Feature lines start with one space (RFC 2389 3.2). */
		if (in && n >= k + 1 && p[0] == ' ' &&
		    strncasecmp(p + 1, name, k) == 0 &&
		    (n == k + 1 || p[k + 1] == ' ' || p[k + 1] == '\r'))
			return true;
	}
	return false;
}

/* One path of the real tree (follow_symlinks), for link resolution. */
struct ftp_real {
	const char	*path;		/* borrowed: the entry's path */
	size_t		 idx;		/* index in out, or in links if link */
	bool		 link;		/* a symlink (in links), else in out */
};

/* The FTP side of a crawl (crawl.h holds the queue and the counts). */
struct ftp_crawl {
	const char	*source;	/* borrowed: source URL, ends in '/' */
	const struct ftp_crawl_opts *opts; /* borrowed */
	struct crawl	*cr;		/* owned: the shared crawl */
	struct listing	*out;		/* borrowed: the crawl's output */
	struct listing	*links;		/* owned: symlinks to follow, NULL
					   unless opts->follow */
	size_t		*linkdir;	/* owned: dirs index of each link */
	size_t		 caplinkdir;
	size_t		 nextlink;	/* links [0, nextlink) followed */
	struct ftp_real	*reals;		/* owned: sorted real tree, built once
					   the real tree is listed */
	size_t		 nreals;
	bool		 mlsd;		/* MLSD, else LIST */
	bool		 gridftp;	/* FEAT listed DCAU */
	char		*root_abs;	/* owned: the source's absolute path
					   upstream (a "%2F" URL path, RFC
					   1738), no trailing '/'; NULL if
					   the URL is relative to the login */
};

/* Keep a symlink for follow_symlinks, listed in dirs[di]. */
static int
crawl_link_add(struct ftp_crawl *c, struct entry *e, size_t di)
{
	size_t		*nv, n = listing_count(c->links);
	int		 rc;

	if (n == c->caplinkdir) {
		c->caplinkdir = c->caplinkdir ? c->caplinkdir * 2 : 64;
		if ((nv = reallocarray(c->linkdir, c->caplinkdir,
		    sizeof(*nv))) == NULL)
			return BM_ENOMEM;
		c->linkdir = nv;
	}
	if ((rc = listing_move_in(c->links, e)) != 0)
		return rc;
	c->linkdir[n] = di;
	return 0;
}

/*
 * The source's absolute path upstream when its URL path starts with
 * "%2F" (RFC 1738 section 3.2.2: the path is then absolute), decoded,
 * without a trailing '/' ("" for "/"); NULL when the path is relative
 * to the login directory, or on ENOMEM (then links just stay absolute).
 */
static char *
source_root_abs(const char *source)
{
	const char	*p = strstr(source, "://");
	char		*out = NULL;
	size_t		 n;

	if (p == NULL || (p = strchr(p + 3, '/')) == NULL)
		return NULL;
	p++;
	if (strncasecmp(p, "%2F", 3) != 0)
		return NULL;
	if (path_decode(p, strlen(p), &out, &n) != 0)
		return NULL;
	while (n > 0 && out[n - 1] == '/')
		out[--n] = '\0';
	return out;
}

/*
 * A GridFTP symlink target (UNIX.slink: always the resolved absolute
 * path) inside the source made relative to
 * the link's real directory dir ("" for the root), the way a relative
 * link would have been listed; so the store's and the follower's inside
 * checks see where it leads.  NULL when it is not absolute, lies outside
 * the source, or the source's absolute path is unknown, or on ENOMEM.
 */
static char *
target_rel(const struct ftp_crawl *c, const char *dir, const char *target)
{
	size_t	 n, depth = 0;
	char	*out = NULL;
	const char *rest, *p;

	/*
	 * Only GridFTP's: its targets are paths of the FTP name space.  A
	 * LIST line shows the link as written on the server's disk, where
	 * an absolute path need not be the FTP path (a chroot).
	 */
	if (!c->gridftp || c->root_abs == NULL || target == NULL ||
	    target[0] != '/')
		return NULL;
	n = strlen(c->root_abs);
	if (strncmp(target, c->root_abs, n) != 0 ||
	    (target[n] != '/' && target[n] != '\0'))
		return NULL;
	for (rest = target + n; *rest == '/'; rest++)
		;
	if (dir[0] != '\0')
		for (depth = 1, p = dir; (p = strchr(p, '/')) != NULL; p++)
			depth++;
	/* "../" per level of dir, then the rest: "a/b" from "x/y" is "../../a/b". */
	if ((out = malloc(depth * 3 + strlen(rest) + 2)) == NULL)
		return NULL;
	for (n = 0; depth > 0; depth--) {
		memcpy(out + n, "../", 3);
		n += 3;
	}
	if (rest[0] != '\0')
		memcpy(out + n, rest, strlen(rest) + 1);
	else if (n > 0)
		out[n - 1] = '\0';	/* the root itself: "..", "../.." */
	else
		memcpy(out, ".", 2);
	return out;
}

/*
 * Take one parsed entry of dirs[di] (crawl_take): a symlink is kept
 * aside when links are followed, its GridFTP target made relative.
 */
static int
ftp_take(struct ftp_crawl *c, struct entry *e, size_t di)
{
	char	*real;

	if (e->type == ENTRY_SYMLINK && (real = target_rel(c,
	    crawl_real(c->cr, di), e->target)) != NULL) {
		free(e->target);
		e->target = real;
	}
	if (e->type == ENTRY_SYMLINK && c->links != NULL)
		return crawl_link_add(c, e, di);
	return crawl_take(c->cr, di, e);
}

/*
 * Whether e, the one entry of an MLSD reply for the directory URL url
 * (ending in '/'), is a file named as the last segment of url (compared
 * percent-encoded, as the URL was made): the server listed that path as
 * a file.
 */
static bool
mlsd_lists_itself(const struct entry *e, const char *url)
{
	const char	*name, *end, *seg;
	char		*enc;
	size_t		 n;
	bool		 same;

	if (e->type != ENTRY_FILE)
		return false;
	name = strrchr(e->path, '/');
	name = name != NULL ? name + 1 : e->path;
	n = strlen(url);
	if (n < 2 || url[n - 1] != '/')
		return false;
	end = url + n - 1;
	for (seg = end; seg > url && seg[-1] != '/'; seg--)
		;
	if (path_encode(name, strlen(name), &enc) != 0)
		return false;
	same = strlen(enc) == (size_t)(end - seg) &&
	    memcmp(enc, seg, (size_t)(end - seg)) == 0;
	free(enc);
	return same;
}

/*
 * A reply as it arrives: kept whole up to STREAM_AFTER bytes, then its
 * complete lines are parsed as they come in (into l) and only the line
 * in progress is kept: a directory costs its entries, not its bytes.
 */
#define STREAM_AFTER	(1024 * 1024)	/* bytes of a reply kept whole */
#define STREAM_LINE_MAX	(1024 * 1024)	/* one line of a streamed reply */

struct fstream {
	struct page_stream ops;		/* the page's stream (arg: this) */
	const struct ftp_crawl *c;	/* borrowed */
	const char	*prefix;	/* borrowed: the directory's path */
	uint8_t		*buf;		/* owned: the reply, or the line in
					   progress once streamed */
	size_t		 len, cap;
	struct listing	*l;		/* owned: entries of lines parsed,
					   NULL: not streamed */
	char		*cdir;		/* owned: MLSD cdir unique=, NULL */
	size_t		 skipped;	/* lines skipped so far: unsafe names */
	size_t		 unread;	/* lines not understood so far */
	size_t		 lines;		/* lines parsed so far */
	const char	*url;		/* borrowed: the reply's URL, for -v */
	int		 last;		/* the last byte of the reply */
	int		 rc;		/* first failure of a parse */
};

static int
fstream_begin(void *arg)
{
	struct fstream	*fs = arg;

	free(fs->buf);
	fs->buf = NULL;
	fs->len = fs->cap = 0;
	listing_free(fs->l);
	fs->l = NULL;
	free(fs->cdir);
	fs->cdir = NULL;
	fs->skipped = fs->unread = fs->lines = 0;
	fs->last = '\n';
	fs->rc = 0;
	return 0;
}

/* Parse the complete lines of fs->buf into fs->l; keep the rest. */
static int
fstream_lines(struct fstream *fs)
{
	const uint8_t	*nl = NULL;
	size_t		 n, i, skipped = 0, unread = 0;
	int		 rc;

	for (n = fs->len; n > 0 && nl == NULL; n--)
		if (fs->buf[n - 1] == '\n')
			nl = fs->buf + n - 1;
	if (nl == NULL)
		return fs->len > STREAM_LINE_MAX ? BM_EPROTO : 0;
	n = (size_t)(nl - fs->buf) + 1;
	rc = parse_reply(fs->buf, n, fs->c->mlsd, fs->c->opts->now_wall,
	    fs->prefix, fs->l, &skipped, &unread, &fs->cdir, fs->url,
	    fs->lines);
	fs->skipped += skipped;
	fs->unread += unread;
	for (i = 0; i < n; i++)
		fs->lines += fs->buf[i] == '\n';
	memmove(fs->buf, fs->buf + n, fs->len - n);
	fs->len -= n;
	return rc;
}

static int
fstream_feed(void *arg, const char *ctype, const uint8_t *data, size_t len)
{
	struct fstream	*fs = arg;
	const struct ftp_crawl_opts *o = fs->c->opts;
	uint8_t		*nb;
	size_t		 ncap;
	int		 rc;

	(void)ctype;
	if (len == 0)
		return 0;
	fs->last = data[len - 1];
	if (fs->rc != 0)
		return fs->rc == BM_ENOMEM ? fs->rc : 0;
	if (fs->len + len > fs->cap) {
		ncap = fs->cap ? fs->cap : 16384;
		while (ncap < fs->len + len)
			ncap *= 2;
		if ((nb = realloc(fs->buf, ncap)) == NULL)
			return fs->rc = BM_ENOMEM;
		fs->buf = nb;
		fs->cap = ncap;
	}
	memcpy(fs->buf + fs->len, data, len);
	fs->len += len;
	if (fs->l == NULL && fs->len <= STREAM_AFTER)
		return 0;
	if (fs->l == NULL && (fs->l = listing_new(o->max_entries > 0 ?
	    o->max_entries : SIZE_MAX)) == NULL)
		return fs->rc = BM_ENOMEM;
	if ((rc = fstream_lines(fs)) != 0)
		fs->rc = rc;
	/* Past max_entries the rest of the reply is not wanted. */
	return rc == BM_ENOMEM || rc == BM_ELIMIT ? rc : 0;
}

/*
 * A reply lost while it streamed in: BM_ELIMIT, more than max_entries
 * (the key named), or BM_EPROTO, a line too long.  Noted on the crawl.
 */
static void
ftp_too_many(struct ftp_crawl *c, const char *url, int rc, char *why,
    size_t whylen)
{
	if (rc == BM_ELIMIT)
		(void)snprintf(why, whylen, "more than %zu entries in one "
		    "directory (max_entries)", c->opts->max_entries);
	else
		(void)snprintf(why, whylen, "a line of over %d bytes",
		    STREAM_LINE_MAX);
	crawl_fail(c->cr, url, rc, why);
}

/* crawl_ops.prepare: each reply streams into an fstream. */
static int
ftp_prepare(void *arg, struct crawl *cr, size_t first, struct http_page *pg,
    size_t n)
{
	struct ftp_crawl *c = arg;
	struct fstream	*fs;
	size_t		 i;

	for (i = 0; i < n; i++) {
		if ((fs = calloc(1, sizeof(*fs))) == NULL)
			return BM_ENOMEM;
		fs->ops.begin = fstream_begin;
		fs->ops.feed = fstream_feed;
		fs->ops.arg = fs;
		fs->c = c;
		fs->prefix = crawl_dir(cr, first + i)->prefix;
		fs->url = pg[i].url;
		fs->last = '\n';
		pg[i].stream = &fs->ops;
	}
	return 0;
}

/* crawl_ops.release: the replies' fstreams. */
static void
ftp_release(void *arg, struct http_page *pg, size_t n)
{
	struct fstream	*fs;
	size_t		 i;

	(void)arg;
	for (i = 0; i < n; i++) {
		if (pg[i].stream == NULL)
			continue;
		fs = pg[i].stream->arg;
		(void)fstream_begin(fs);
		free(fs);
		pg[i].stream = NULL;
	}
}

/*
 * Parse one directory's reply and take its entries.  With MLSD, the
 * reply's cdir line must carry the unique= its parent listed for it:
 * else the server listed another directory (one that mangles names in
 * commands may fall back to its parent), and nothing of it is taken.
 * A name the reply lists twice is taken once, as its first line says
 * (as listing_sort() and the HTTP lister keep the first): a file "x"
 * and a directory "x" in one reply would else give a file with
 * entries beneath it, and the directory would be listed as well.
 */
static int
crawl_reply(struct ftp_crawl *c, size_t di, const struct http_page *pg,
    const char *url)
{
	const struct crawl_dir *d = crawl_dir(c->cr, di); /* until ftp_take() */
	struct fstream	*fs = pg->stream != NULL ? pg->stream->arg : NULL;
	struct listing	*tmp = NULL;
	const uint8_t	*body = pg->body;
	char		*cdir = NULL, why[128];
	size_t		 i, len = pg->len, skipped = 0, unread = 0;
	int		 rc = 0, last;

	if (fs != NULL && (fs->buf != NULL || fs->l != NULL)) {
		body = fs->buf;
		len = fs->len;
	}
	last = fs != NULL && fs->l != NULL ? fs->last : len > 0 ?
	    body[len - 1] : '\n';
	/*
	 * Every line of a LIST or MLSD reply ends in CRLF (RFC 959 4.1.3,
	 * RFC 3659 7.2): one that stops in the middle of a line was cut
	 * short (its 226 notwithstanding), and its last name is a piece of
	 * one.  The listing is incomplete: nothing of it is taken.
	 */
	if (last != '\n') {
		crawl_fail(c->cr, url, BM_EPROTO, "the listing stops in the "
		    "middle of a line (no CRLF after its last line): cut "
		    "short");
		return 0;
	}
	if (fs != NULL && fs->l != NULL) {
		/* Streamed: the lines before the last were parsed already. */
		tmp = fs->l;
		fs->l = NULL;
		cdir = fs->cdir;
		fs->cdir = NULL;
		crawl_stats(c->cr)->skipped += fs->skipped;
		crawl_stats(c->cr)->unread += fs->unread;
		rc = fs->rc;
	} else if ((tmp = listing_new(c->opts->max_entries > 0 ?
	    c->opts->max_entries : SIZE_MAX)) == NULL)
		return BM_ENOMEM;
	if (rc == 0) {
		rc = parse_reply(body, len, c->mlsd, c->opts->now_wall,
		    d->prefix, tmp, &skipped, &unread, &cdir, url,
		    fs != NULL ? fs->lines : 0);
		crawl_stats(c->cr)->skipped += skipped;
		crawl_stats(c->cr)->unread += unread;
	}
	if ((rc == BM_ELIMIT && c->opts->max_entries > 0) ||
	    rc == BM_EPROTO) {
		ftp_too_many(c, url, rc, why, sizeof(why));
		listing_free(tmp);
		free(cdir);
		return 0;
	}
	if (rc == 0 && c->mlsd && cdir == NULL && listing_count(tmp) == 1 &&
	    mlsd_lists_itself(listing_get(tmp, 0), url)) {
		/*
		 * MLSD of a file (GridFTP in MODE E names the path; the
		 * source, or a directory replaced upstream by a file) lists
		 * that file alone, under its own name, with no cdir line:
		 * not the directory's contents.
		 */
		crawl_fail(c->cr, url, BM_EPROTO, "not a directory: MLSD "
		    "listed the path itself (one file of the same name, no "
		    "cdir line)");
		listing_free(tmp);
		return 0;
	}
	if (rc == 0 && d->key != NULL && cdir != NULL &&
	    strcmp(d->key, cdir) != 0) {
		crawl_fail(c->cr, url, BM_EPROTO, "the server listed another "
		    "directory (MLSD cdir unique= differs from the one listed "
		    "for it)");
		listing_free(tmp);
		free(cdir);
		return 0;
	}
	if (d->key == NULL && cdir != NULL)
		crawl_dir(c->cr, di)->key = cdir;	/* for the loop check */
	else
		free(cdir);
	if (rc == 0)
		rc = listing_sort(tmp);
	for (i = 0; rc == 0 && i < listing_count(tmp); i++)
		rc = ftp_take(c, listing_get_mut(tmp, i), di);
	listing_free(tmp);
	return rc;
}

/*
 * Note dirs[di], reached through a followed link, as refused by the
 * server (opts->unlisted): its path, and the reason in size_display.
 */
static int
unlisted_add(struct ftp_crawl *c, size_t di, const struct http_page *pg)
{
	struct entry	*e;
	int		 rc;

	if ((rc = listing_append(c->opts->unlisted, &e)) != 0)
		return rc;
	e->type = ENTRY_DIR;
	if ((e->path = strdup(crawl_dir(c->cr, di)->prefix)) == NULL ||
	    (e->size_display = strdup(pg->errmsg[0] ? pg->errmsg :
	    bm_strerror(pg->rc))) == NULL) {
		listing_pop(c->opts->unlisted);
		return BM_ENOMEM;
	}
	return 0;
}

/* crawl_ops.read: the replies for dirs [first, first + n). */
static int
ftp_read(void *arg, struct crawl *cr, size_t first, struct http_page *pg,
    size_t n)
{
	struct ftp_crawl *c = arg;
	struct fstream	*fs;
	char		 why[128];
	size_t		 i;
	int		 rc;

	for (i = 0; i < n; i++) {
		fs = pg[i].stream != NULL ? pg[i].stream->arg : NULL;
		if (fs != NULL && (fs->rc == BM_ELIMIT || fs->rc == BM_EPROTO)) {
			ftp_too_many(c, pg[i].url, fs->rc, why, sizeof(why));
			continue;
		}
		if (pg[i].rc != 0 && c->opts->unlisted != NULL &&
		    crawl_dir(cr, first + i)->via_link && pg[i].status >= 500 &&
		    pg[i].status < 600) {
			/* A followed link the server will not serve. */
			if ((rc = unlisted_add(c, first + i, &pg[i])) != 0)
				return rc;
			continue;
		}
		if (pg[i].rc != 0) {
			crawl_fail(cr, pg[i].url, pg[i].rc, pg[i].errmsg[0] ?
			    pg[i].errmsg : bm_strerror(pg[i].rc));
			continue;
		}
		if ((rc = crawl_reply(c, first + i, &pg[i], pg[i].url)) != 0)
			return rc;
	}
	return 0;
}

/* Ask FEAT once: MLSD when the server advertises MLST. */
static int
crawl_feat(struct ftp_crawl *c, http_fetch_fn fetch, void *ctx)
{
	struct http_page pg;
	int		 rc;

	memset(&pg, 0, sizeof(pg));
	pg.url = c->source;
	pg.command = "FEAT";
	if ((rc = fetch(ctx, &pg, 1)) != 0)
		goto out;
	if (pg.rc != 0) {
		crawl_fail(c->cr, c->source, pg.rc, pg.errmsg[0] ? pg.errmsg :
		    bm_strerror(pg.rc));
		rc = pg.rc;
		goto out;
	}
	c->mlsd = list_ftp_feat_mlst(pg.body, pg.len);
	c->gridftp = list_ftp_feat_has(pg.body, pg.len, "DCAU");
	if (c->opts->on_feat != NULL)
		c->opts->on_feat(c->opts->feat_arg, c->mlsd, c->gridftp);
out:
	free(pg.body);
	free(pg.content_type);
	free(pg.effective_url);
	return rc;
}

#define MAX_LINK_HOPS	40	/* links resolved per target (Linux's limit) */

/* What a followed link's target is. */
enum link_kind {
	LINK_FILE,		/* a listed file */
	LINK_DIR,		/* a listed directory (or the root) */
	LINK_OUTSIDE,		/* outside the source tree */
	LINK_MISSING,		/* inside, but not listed */
};

static int
real_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ftp_real *)a)->path,
	    ((const struct ftp_real *)b)->path);
}

/*
 * Index the real tree: everything listed so far (no link has been
 * followed yet, so every path is a real one) and the links found in it.
 */
static int
reals_build(struct ftp_crawl *c)
{
	size_t	 no = listing_count(c->out), nl = listing_count(c->links), i;

	if ((c->reals = calloc(no + nl + 1, sizeof(*c->reals))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < no; i++) {
		c->reals[c->nreals].path = listing_get(c->out, i)->path;
		c->reals[c->nreals++].idx = i;
	}
	for (i = 0; i < nl; i++) {
		c->reals[c->nreals].path = listing_get(c->links, i)->path;
		c->reals[c->nreals].link = true;
		c->reals[c->nreals++].idx = i;
	}
	qsort(c->reals, c->nreals, sizeof(*c->reals), real_cmp);
	return 0;
}

static const struct ftp_real *
reals_find(const struct ftp_crawl *c, const char *path)
{
	struct ftp_real	 key;

	memset(&key, 0, sizeof(key));
	key.path = path;
	return bsearch(&key, c->reals, c->nreals, sizeof(*c->reals),
	    real_cmp);
}

/*
 * Step cur (a real path, malloc'd, "" for the root) through one
 * component of n bytes; *kind and *r tell what cur now is.  A link met on
 * the way is replaced by its target: *rest becomes target + "/" + *rest.
 */
static int
link_step(const struct ftp_crawl *c, char **cur, const char *comp, size_t n,
    char **rest, unsigned *hops, enum link_kind *kind,
    const struct ftp_real **r)
{
	const struct entry *l;
	char		*s, *slash;

	if (*kind == LINK_FILE) {	/* "file/x": ENOTDIR */
		*kind = LINK_MISSING;
		return 0;
	}
	if (n == 2 && memcmp(comp, "..", 2) == 0) {
		if ((*cur)[0] == '\0') {
			*kind = LINK_OUTSIDE;
			return 0;
		}
		if ((slash = strrchr(*cur, '/')) != NULL)
			*slash = '\0';
		else
			(*cur)[0] = '\0';
		*kind = LINK_DIR;
		*r = (*cur)[0] ? reals_find(c, *cur) : NULL;
		return 0;
	}
	if (asprintf(&s, "%s%s%.*s", *cur, (*cur)[0] ? "/" : "", (int)n,
	    comp) == -1)
		return BM_ENOMEM;
	free(*cur);
	*cur = s;
	if ((*r = reals_find(c, *cur)) == NULL) {
		*kind = LINK_MISSING;
		return 0;
	}
	if (!(*r)->link) {
		*kind = listing_get(c->out, (*r)->idx)->type == ENTRY_DIR ?
		    LINK_DIR : LINK_FILE;
		return 0;
	}
	l = listing_get(c->links, (*r)->idx);
	if (++*hops > MAX_LINK_HOPS || l->target == NULL) {
		*kind = LINK_MISSING;
		return 0;
	}
	if (l->target[0] == '/') {
		*kind = LINK_OUTSIDE;
		return 0;
	}
	if (asprintf(&s, "%s/%s", l->target, *rest) == -1)
		return BM_ENOMEM;
	free(*rest);
	*rest = s;
	if ((slash = strrchr(*cur, '/')) != NULL)	/* the link's dir */
		*slash = '\0';
	else
		(*cur)[0] = '\0';
	*kind = LINK_DIR;
	return 0;
}

/*
 * Resolve a link's target against the real path of its directory,
 * lexically, the way the server's file system would (each component in
 * turn, links met on the way replaced by their targets).  On success
 * *ret_kind is set, and for LINK_FILE/LINK_DIR *ret_real (malloc'd) is
 * the real path and *ret_idx the target's index in out (SIZE_MAX for the
 * root).  Returns 0 or BM_ENOMEM.
 */
static int
link_resolve(const struct ftp_crawl *c, const char *dir, const char *target,
    enum link_kind *ret_kind, char **ret_real, size_t *ret_idx)
{
	const struct ftp_real *r = NULL;
	enum link_kind	 kind = LINK_DIR;
	char		*cur = NULL, *rest = NULL, *comp, *p, *s;
	unsigned	 hops = 0;
	size_t		 n;
	int		 rc = BM_ENOMEM;

	if (target == NULL || target[0] == '/') {
		*ret_kind = LINK_OUTSIDE;
		return 0;
	}
	if ((cur = strdup(dir)) == NULL || (rest = strdup(target)) == NULL)
		goto out;
	while (kind == LINK_DIR || kind == LINK_FILE) {
		for (p = rest; *p == '/'; p++)
			;
		if (*p == '\0')
			break;
		n = strcspn(p, "/");
		if ((comp = strndup(p, n)) == NULL)
			goto out;
		if ((s = strdup(p + n)) == NULL) {	/* what follows */
			free(comp);
			goto out;
		}
		free(rest);
		rest = s;
		if (n == 1 && comp[0] == '.') {
			free(comp);
			continue;
		}
		rc = link_step(c, &cur, comp, n, &rest, &hops, &kind, &r);
		free(comp);
		if (rc != 0)
			goto out;
		rc = BM_ENOMEM;
	}
	*ret_kind = kind;
	if (kind == LINK_FILE || kind == LINK_DIR) {
		*ret_idx = r != NULL && !r->link ? r->idx : SIZE_MAX;
		*ret_real = cur;
		cur = NULL;
	}
	rc = 0;
out:
	free(cur);
	free(rest);
	return rc;
}
/*
 * Append the entry that stands for a followed link at its own path: type
 * as given, with the listed size and time of out[idx] (nothing known when
 * idx is SIZE_MAX).
 */
static int
link_entry(struct ftp_crawl *c, const struct entry *l, enum entry_type type,
    size_t idx)
{
	struct entry	*dst, want;
	int		 rc;

	if ((rc = listing_append(c->out, &dst)) != 0)
		return rc;
	/* The link's names and type; out[idx]'s size, time and size text. */
	want = idx == SIZE_MAX ? *dst : *listing_get(c->out, idx);
	want.type = type;
	want.path = l->path;
	want.href = l->href;
	want.target = want.unique = NULL;
	want.target_type = 0;
	want.mtime = 0;
	if (listing_entry_copy(dst, &want) != 0) {
		listing_pop(c->out);
		return BM_ENOMEM;
	}
	return 0;
}

/*
 * follow_symlinks: links[li] becomes a file or a directory to list at
 * its own path, or is dropped as a loop or a dangling link.  A link
 * whose target lies outside the tree (or is absolute, as GridFTP's
 * UNIX.slink always is) is a file, unless the listing states that its
 * target is a directory: then it is listed at its own path too, what
 * the server serves there, with its unique= (the target's) checked
 * against its ancestors' for a loop.
 */
static int
link_follow(struct ftp_crawl *c, size_t li)
{
	const struct filter *f = c->opts->filter;
	const struct entry *l = listing_get(c->links, li);
	enum link_kind	 kind;
	size_t		 di = c->linkdir[li], idx = SIZE_MAX;
	char		*real = NULL;
	int		 rc;

	if ((rc = link_resolve(c, crawl_real(c->cr, di), l->target, &kind,
	    &real, &idx)) != 0)
		return rc;
	if (kind == LINK_OUTSIDE && l->target_type == ENTRY_DIR) {
		if ((real = strdup(l->path)) == NULL)
			return BM_ENOMEM;
		kind = LINK_DIR;
	}
	switch (kind) {
	case LINK_MISSING:
		crawl_stats(c->cr)->dangling++;
		break;
	case LINK_OUTSIDE:
	case LINK_FILE:
		if (filter_file(f, l->path))
			rc = link_entry(c, l, ENTRY_FILE, idx);
		break;
	case LINK_DIR:
		if (!filter_dir(f, l->path))
			break;
		/* A target that is the link's own directory or an ancestor. */
		if (crawl_ancestor(c->cr, di, real, l->unique))
			crawl_stats(c->cr)->loops++;
		else if (!crawl_depth_ok(c->cr, di))
			;
		else if ((rc = link_entry(c, l, ENTRY_DIR, idx)) == 0)
			rc = crawl_push(c->cr, di, l->path, real, NULL, true);
		break;
	}
	free(real);
	return rc;
}

/*
 * crawl_ops.more: the real tree is listed; follow the links found since
 * the last call (what they lead to is queued).
 */
static int
ftp_more(void *arg, struct crawl *cr, bool *ret_again)
{
	struct ftp_crawl *c = arg;
	int		 rc;

	(void)cr;
	if (c->links == NULL || c->nextlink == listing_count(c->links))
		return 0;
	if (c->reals == NULL && (rc = reals_build(c)) != 0)
		return rc;
	for (; c->nextlink < listing_count(c->links); c->nextlink++)
		if ((rc = link_follow(c, c->nextlink)) != 0)
			return rc;
	*ret_again = true;
	return 0;
}

static const struct crawl_ops ftp_crawl_ops = {
	.read = ftp_read,
	.more = ftp_more,
	.prepare = ftp_prepare,
	.release = ftp_release,
};

int
list_ftp_crawl(const char *source_url, const struct ftp_crawl_opts *opts,
    http_fetch_fn fetch, void *ctx, struct listing *out, char *errbuf,
    size_t errlen)
{
	struct ftp_crawl c;
	struct crawl_params p;
	struct crawl_stats *st;
	int		 rc;

	memset(&c, 0, sizeof(c));
	c.source = source_url;
	c.opts = opts;
	c.out = out;
	crawl_params_init(&p, source_url, opts->filter, opts->max_depth,
	    opts->batch, fetch, ctx, out, errbuf, errlen);
	p.shallow = opts->shallow;
	if (!opts->follow) {
		p.drain = opts->drain;
		p.drain_ctx = opts->drain_ctx;
	}
	if ((rc = crawl_new(&p, &c.cr)) != 0)
		return rc;
	if (source_url[0] == '\0' ||
	    source_url[strlen(source_url) - 1] != '/') {
		crawl_fail(c.cr, source_url, BM_EINVAL,
		    "source URL must end in '/'");
		rc = BM_EINVAL;
		goto out;
	}
	c.root_abs = source_root_abs(source_url);
	if ((rc = crawl_feat(&c, fetch, ctx)) != 0)
		goto out;
	if (opts->follow && (c.links = listing_new(MAX_LINKS)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	/* MLSD when FEAT lists MLST, else LIST (crawl_feat). */
	crawl_set_command(c.cr, c.mlsd ? "MLSD" : "LIST");
	/* The real tree first, then the links, then what they lead to. */
	rc = crawl_run(c.cr, &ftp_crawl_ops, &c);
out:
	st = crawl_stats(c.cr);
	if (opts->ret_mlsd != NULL)
		*opts->ret_mlsd = c.mlsd;
	if (opts->ret_gridftp != NULL)
		*opts->ret_gridftp = c.gridftp;
	if (opts->ret_loops != NULL)
		*opts->ret_loops = st->loops;
	if (opts->ret_skipped != NULL)
		*opts->ret_skipped = st->skipped + (opts->ret_unread == NULL ?
		    st->unread : 0);
	if (opts->ret_unread != NULL)
		*opts->ret_unread = st->unread;
	if (opts->ret_dangling != NULL)
		*opts->ret_dangling = st->dangling;
	listing_free(c.links);
	free(c.linkdir);
	free(c.reals);
	free(c.root_abs);
	crawl_free(c.cr);
	return rc;
}

/*
 * The server's clock as wall time (seconds read as if UTC) in the zone
 * tz, for the year of LIST dates that show none.
 */
static int64_t
ftp_now_wall(const struct tzspec *tz)
{
	int64_t	 now = clock_real_ns() / 1000000000LL, utc;

	if (tzspec_to_utc(tz, now, &utc) != 0)
		return now;
	return now + (now - utc);
}

/*
 * ftp_crawl_opts.on_feat: TYPE I before each file on GridFTP, and with
 * ftp_mode = extended its MLSD listings and whole files in MODE E from
 * the first listing on (the listing's sessions then carry the files).
 */
static void
ftp_feat(void *arg, bool mlsd, bool gridftp)
{
	const struct lister_run *lr = arg;

	if (lr->hint != NULL)
		lr->hint(lr->ctx, LISTER_HINT_GRIDFTP, gridftp);
	if (!lr->mode_e)
		return;
	if (gridftp && !mlsd)
		log_warnx("%s: ftp_mode = extended: the server offers no MLSD: "
		    "stream mode", lr->name);
	else if (gridftp)
		log_debug("%s: listings and files in GridFTP extended block "
		    "mode (MODE E)", lr->name);
	if (lr->hint != NULL)
		lr->hint(lr->ctx, LISTER_HINT_MODE_E, gridftp && mlsd);
}

/* lister_ops.list: FEAT, then MLSD or LIST, with the run's settings. */
static int
ftp_list(const struct lister_run *lr, struct listing *out,
    struct lister_stats *ret, char *errbuf, size_t errlen)
{
	struct lister_run run = *lr;
	struct ftp_crawl_opts fo;
	bool		 mlsd = false, gridftp = true;
	size_t		 dangling = 0;
	int		 rc;

	memset(&fo, 0, sizeof(fo));
	fo.filter = lr->filter;
	fo.max_depth = lr->max_depth;
	fo.shallow = lr->shallow;
	fo.batch = lr->connections;
	fo.max_entries = lr->max_entries;
	fo.now_wall = ftp_now_wall(lr->tz);
	fo.ret_mlsd = &mlsd;
	fo.ret_gridftp = &gridftp;
	fo.ret_loops = &ret->loops;
	fo.ret_skipped = &ret->skipped;
	fo.ret_unread = &ret->unread;
	fo.follow = lr->follow;
	fo.drain = lr->drain;
	fo.drain_ctx = lr->ctx;
	fo.ret_dangling = &dangling;
	fo.unlisted = lr->follow ? lr->unlisted : NULL;
	fo.on_feat = ftp_feat;
	fo.feat_arg = &run;
	rc = list_ftp_crawl(lr->source, &fo, lr->fetch, lr->ctx, out, errbuf,
	    errlen);
	log_debug("%s: list: %s%s", lr->name, mlsd ? "MLSD" : "LIST",
	    gridftp ? ", TYPE I before each file (GridFTP)" : "");
	if (lr->mode_e && !gridftp && rc == 0)
		log_warnx("%s: ftp_mode = extended: the server does not speak "
		    "GridFTP (FEAT lists no DCAU): stream mode", lr->name);
	if (dangling > 0)
		log_warnx("%s: list: %zu symlinks not followed: their target "
		    "is not in the listing (dangling, or excluded)", lr->name,
		    dangling);
	return rc;
}

static const char *const ftp_schemes[] = { "ftp", "ftps", NULL };

const struct lister_ops lister_ftp_ops = {
	.name = "ftp",
	.schemes = ftp_schemes,
	.connections = 4,
	.unit = "entries",
	.zone = LISTER_ZONE_FTP,
	.list = ftp_list,
};
