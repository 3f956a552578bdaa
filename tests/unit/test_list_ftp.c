/*
 * Unit tests for agent/lister/ftp.c.  Every FTP fixture in tests/fixtures
 * (copied from the shared listings, LISTINGS.md samples 23-31) is parsed
 * and its entries compared with LISTINGS.md and the *.expected.tsv
 * sidecars (read at run time; run from the repo root).  Then LIST year
 * inference around New Year and Feb 29, a server that lists local time
 * in a non-UTC zone (ftp_timezone), FEAT replies, and list_ftp_crawl()
 * against a fake fetch callback (FEAT, MLSD, a unique= loop, a failed
 * directory).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "biomirror/error.h"
#include "biomirror/ftp_proto.h"
#include "biomirror/list_ftp.h"
#include "biomirror/listing.h"

#include "tap.h"

#define FIX	"tests/fixtures/"

static char *
slurp(const char *path, size_t *ret_len)
{
	FILE	*f;
	char	*buf = NULL;
	long	 n;

	if ((f = fopen(path, "rbe")) == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = '\0';
		*ret_len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* Seconds of "YYYY-MM-DD[ HH:MM[:SS]]" read as UTC. */
static int64_t
ts(const char *s)
{
	struct tm	 tm;
	int		 y, mo, d, h = 0, mi = 0, se = 0;

	if (sscanf(s, "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &se) < 3)
		return -2;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	return (int64_t)timegm(&tm);
}

/* Parse a fixture file into a fresh listing (sorted when sort). */
static struct listing *
parse_fix(const char *name, bool mlsd, const char *now, size_t *ret_skipped)
{
	struct listing	*l = listing_new(100000);
	char		 path[256];
	char		*body;
	size_t		 len;
	int		 rc;

	(void)snprintf(path, sizeof(path), FIX "%s", name);
	if ((body = slurp(path, &len)) == NULL) {
		ok(0, "%s: readable", path);
		return l;
	}
	rc = list_ftp_parse((const uint8_t *)body, len, mlsd, ts(now), "",
	    l, ret_skipped);
	is_int(rc, 0, "%s: parsed", name);
	free(body);
	return l;
}

/*
 * A fake server's reply: a malloc'd copy of body, or BM_ENOENT in
 * pg->rc when body is NULL (no such directory).  0 or BM_ENOMEM.
 */
static int
page_body(struct http_page *pg, const char *body)
{
	if (body == NULL) {
		pg->rc = BM_ENOENT;
		return 0;
	}
	pg->len = strlen(body);
	if ((pg->body = malloc(pg->len)) == NULL)
		return BM_ENOMEM;
	memcpy(pg->body, body, pg->len);
	return 0;
}

static const struct entry *
find(const struct listing *l, const char *path)
{
	size_t	 i;

	for (i = 0; i < listing_count(l); i++)
		if (strcmp(listing_get(l, i)->path, path) == 0)
			return listing_get(l, i);
	return NULL;
}

/* One expected entry: type, exact size (-1: not exact), time, prec. */
static void
check(const struct listing *l, const char *fx, const char *name, char type,
    long long size, const char *mtime, enum mtime_prec prec,
    const char *target)
{
	const struct entry *e = find(l, name);

	if (!ok(e != NULL, "%s: '%s' listed", fx, name))
		return;
	is_int(e->type, type, "%s: %s type", fx, name);
	if (size >= 0) {
		is_int(e->size, size, "%s: %s size", fx, name);
		ok(e->size_exact, "%s: %s size exact", fx, name);
	}
	if (mtime != NULL) {
		is_int(e->mtime_wall, ts(mtime), "%s: %s mtime %s", fx, name,
		    mtime);
		is_int(e->mtime_prec, prec, "%s: %s precision", fx, name);
	}
	if (type == 'l')
		is_str(e->target, target, "%s: %s target", fx, name);
}

static void
test_classic(void)
{
	const char	*fx = "ftp-list-unix-curl-classic.txt";
	struct listing	*l;
	size_t		 sk = 9;

	/* now 2000-03-01: "May 29" and "Oct 30" are in 1999. */
	l = parse_fix(fx, false, "2000-03-01 12:00", &sk);
	is_int(listing_count(l), 8, "%s: 8 entries (total, ., .. skipped)",
	    fx);
	is_int(sk, 0, "%s: nothing counted as bad", fx);
	check(l, fx, "curl-releases", 'd', -1, "1996-05-02", MTIME_DAY, NULL);
	check(l, fx, "README", 'f', 35, "1996-07-16", MTIME_DAY, NULL);
	check(l, fx, "bin", 'l', -1, "1999-12-09", MTIME_DAY, "usr/bin");
	check(l, fx, "dev", 'd', -1, "1997-10-01", MTIME_DAY, NULL);
	check(l, fx, "download.html", 'd', -1, "1999-05-29 16:04",
	    MTIME_MINUTE, NULL);
	check(l, fx, "etc", 'd', -1, "1995-11-30", MTIME_DAY, NULL);
	check(l, fx, "pub", 'd', -1, "1999-10-30 14:33", MTIME_MINUTE, NULL);
	check(l, fx, "usr", 'd', -1, "1997-10-01", MTIME_DAY, NULL);
	ok(!find(l, "bin")->zone_stated, "%s: LIST zone not stated", fx);
	listing_free(l);
}

/* A listed 0 in LIST is a hint: size unknown, shown as "0" (issue 22). */
static void
zero_hint(const struct listing *l, const char *fx, const char *name)
{
	const struct entry *e = find(l, name);

	ok(e != NULL && e->size == -1 && !e->size_exact &&
	    e->size_min == -1 && e->size_max == -1, "%s: %s listed 0: size "
	    "unknown (a hint)", fx, name);
	is_str(e ? e->size_display : NULL, "0", "%s: %s shown as 0", fx,
	    name);
}

static void
test_wildcard(void)
{
	const char	*fx = "ftp-list-unix-curl-wildcard.txt";
	struct listing	*l;
	size_t		 sk;

	l = parse_fix(fx, false, "2010-04-28 00:00", &sk);
	is_int(listing_count(l), 12, "%s: 12 entries", fx);
	is_int(sk, 0, "%s: no bad lines", fx);
	check(l, fx, "chmod1", 'f', 38, "2010-01-11 10:00", MTIME_MINUTE,
	    NULL);
	check(l, fx, "chmod2", 'f', 38, "2010-02-01 08:00", MTIME_MINUTE,
	    NULL);
	check(l, fx, "chmod3", 'f', 38, NULL, 0, NULL);
	check(l, fx, "chmod4", 'd', -1, "2009-05-04 04:31", MTIME_MINUTE,
	    NULL);
	check(l, fx, "chmod5", 'd', -1, NULL, 0, NULL);
	check(l, fx, "empty_file.dat", 'f', -1, "2010-04-27 11:01",
	    MTIME_MINUTE, NULL);
	zero_hint(l, fx, "empty_file.dat");
	check(l, fx, "file.txt", 'f', 35, NULL, 0, NULL);
	check(l, fx, "someothertext.txt", 'f', 47, NULL, 0, NULL);
	check(l, fx, "link", 'l', -1, "2010-01-06 04:42", MTIME_MINUTE,
	    "file.txt");
	check(l, fx, "link_absolute", 'l', -1, NULL, 0, "/data/ftp/file.txt");
	check(l, fx, ".NeXT", 'd', -1, "2010-01-23 02:05", MTIME_MINUTE, NULL);
	check(l, fx, "weirddir.txt", 'd', -1, NULL, 0, NULL);
	listing_free(l);
}

static void
test_dos(void)
{
	const char	*fx = "ftp-list-dos-curl-wildcard.txt";
	struct listing	*l;
	size_t		 sk;

	l = parse_fix(fx, false, "2026-01-01 00:00", &sk);
	is_int(listing_count(l), 10, "%s: 10 entries", fx);
	is_int(sk, 0, "%s: no bad lines", fx);
	check(l, fx, "chmod1", 'f', 38, "2010-01-11 10:00", MTIME_MINUTE,
	    NULL);
	check(l, fx, "chmod4", 'd', -1, "2010-05-04 04:31", MTIME_MINUTE,
	    NULL);
	check(l, fx, "chmod5", 'd', -1, NULL, 0, NULL);
	check(l, fx, "empty_file.dat", 'f', -1, "2010-04-27 11:01",
	    MTIME_MINUTE, NULL);
	zero_hint(l, fx, "empty_file.dat");
	check(l, fx, "file.txt", 'f', 35, NULL, 0, NULL);
	check(l, fx, "someothertext.txt", 'f', 47, NULL, 0, NULL);
	check(l, fx, ".NeXT", 'd', -1, "2005-01-23 02:05", MTIME_MINUTE, NULL);
	check(l, fx, "weirddir.txt", 'd', -1, NULL, 0, NULL);
	listing_free(l);
}

static void
test_humansize(void)
{
	const char	*fx = "ftp-list-unix-humansize-lftp41.txt";
	const struct entry *e;
	struct listing	*l;
	size_t		 sk;

	l = parse_fix(fx, false, "2012-06-01 00:00", &sk);
	is_int(listing_count(l), 6, "%s: 6 entries", fx);
	check(l, fx, "conf_global.dist.php", 'f', 527, "2012-05-09 23:20",
	    MTIME_MINUTE, NULL);
	check(l, fx, "constants.php", 'f', 42, NULL, 0, NULL);
	check(l, fx, "cache", 'd', -1, NULL, 0, NULL);
	if ((e = find(l, "conf_global.php")) != NULL) {
		ok(!e->size_exact, "%s: 1.1k is not exact", fx);
		is_int(e->size_min, 1127, "%s: 1.1k min", fx);
		is_int(e->size_max, 1228, "%s: 1.1k max", fx);
		is_str(e->size_display, "1.1k", "%s: 1.1k shown", fx);
	} else
		ok(0, "%s: conf_global.php listed", fx);
	if ((e = find(l, "dav.php")) != NULL)
		ok(!e->size_exact && e->size_min == 10548 &&
		    e->size_max == 10649, "%s: 10.3k is 10548-10649", fx);
	else
		ok(0, "%s: dav.php listed", fx);
	listing_free(l);
}

/* ftp-list-unix-mixed-jlaffaye.expected.tsv, rule A, now 2017-03-10 23:00. */
static void
test_jlaffaye(void)
{
	const char	*fx = "ftp-list-unix-mixed-jlaffaye.txt";
	struct listing	*l;
	char		*tsv, *line, *save = NULL, *f[8], *p;
	size_t		 sk = 0, len, nf, rows = 0;
	const struct entry *e;
	char		 name[128];

	l = parse_fix(fx, false, "2017-03-10 23:00", &sk);
	is_int(listing_count(l), 19, "%s: 19 entries", fx);
	/* NetWare, "209", type 'Z', garbage; "total 1" and blank are quiet. */
	is_int(sk, 4, "%s: 4 lines rejected, none fatal", fx);
	if ((tsv = slurp(FIX "ftp-list-unix-mixed-jlaffaye.expected.tsv",
	    &len)) == NULL) {
		ok(0, "expected.tsv readable");
		listing_free(l);
		return;
	}
	for (line = strtok_r(tsv, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#')
			continue;
		for (nf = 0, p = line; nf < 8; nf++) {
			f[nf] = p;
			if ((p = strchr(p, '\t')) == NULL) {
				nf++;
				break;
			}
			*p++ = '\0';
		}
		if (nf < 6 || strcmp(f[1], "(reject)") == 0)
			continue;
		rows++;
		(void)snprintf(name, sizeof(name), "%s", f[1]);
		if (name[0] == '\'') {
			memmove(name, name + 1, strlen(name));
			name[strlen(name) - 1] = '\0';
		}
		if (!ok((e = find(l, name)) != NULL, "%s: '%s' listed", fx,
		    name))
			continue;
		is_int(e->type, f[3][0], "%s: %s type", fx, name);
		if (f[3][0] == 'f' && strlen(f[2]) < 19)
			is_int(e->size, strtoll(f[2], NULL, 10),
			    "%s: %s size", fx, name);
		else if (f[3][0] == 'f')
			ok(e->size == -1 && !e->size_exact,
			    "%s: %s 2^64-1 is unknown, no overflow", fx, name);
		is_int(e->mtime_wall, ts(f[4]), "%s: %s mtime %s (rule A)",
		    fx, name, f[4]);
		is_int(e->mtime_prec, strlen(f[4]) > 10 ? MTIME_MINUTE :
		    MTIME_DAY, "%s: %s precision", fx, name);
	}
	is_int(rows, 19, "%s: every expected row checked", fx);
	e = find(l, "R-3.4.0.pkg");
	is_str(e ? e->target : NULL, "el-capitan/base/R-3.4.0.pkg",
	    "%s: symlink target", fx);
	free(tsv);
	listing_free(l);
}

/* The Unix and DOS entries of the FileZilla dialect zoo; the rest skip. */
static void
test_exotic(void)
{
	const char	*fx = "ftp-list-exotic-filezilla.txt";
	struct listing	*l;
	size_t		 sk = 0;
	const struct entry *e;

	l = parse_fix(fx, false, "2026-06-01 00:00", &sk);
	ok(listing_count(l) > 0 && sk > 0, "%s: some parsed, rest skipped "
	    "(%zu, %zu)", fx, listing_count(l), sk);
	check(l, fx, "01-unix-std dir", 'd', -1, "1994-04-08", MTIME_DAY,
	    NULL);
	check(l, fx, "03-unix-nogroup dir", 'd', -1, "1994-04-08", MTIME_DAY,
	    NULL);
	check(l, fx, "04-unix-std link", 'l', -1, "2026-01-25 00:17",
	    MTIME_MINUTE, "usr/bin");
	check(l, fx, "11-netpresenz file", 'f', 1392298, "1995-11-22",
	    MTIME_DAY, NULL);
	check(l, fx, "12-netpresenz dir", 'd', -1, "1996-05-10", MTIME_DAY,
	    NULL);
	check(l, fx, "13-unix-domain file", 'f', 531, "2026-01-29 03:26",
	    MTIME_MINUTE, NULL);
	check(l, fx, "16-dos-dateambiguous dir", 'd', -1, "2000-04-27 12:09",
	    MTIME_MINUTE, NULL);
	check(l, fx, "17-dos-dateambiguous file", 'f', 589,
	    "2000-04-06 15:47", MTIME_MINUTE, NULL);
	check(l, fx, "18-dos-longyear dir", 'd', -1, "2002-09-02 18:48",
	    MTIME_MINUTE, NULL);
	check(l, fx, "19-dos-longyear file", 'f', 9730, "2002-09-02 19:06",
	    MTIME_MINUTE, NULL);
	/* OS/2 (3-digit years since 1900) and day-first dates (issue 22). */
	check(l, fx, "24-os2 file", 'f', 36611, "2003-04-23 10:57",
	    MTIME_MINUTE, NULL);
	check(l, fx, "25-os2 file", 'f', 1123, "1999-07-14 12:37",
	    MTIME_MINUTE, NULL);
	check(l, fx, "26-os2 dir", 'd', -1, "2003-02-11 16:15", MTIME_MINUTE,
	    NULL);
	check(l, fx, "27-os2 dir", 'd', -1, "2000-10-05 23:38", MTIME_MINUTE,
	    NULL);
	check(l, fx, "28-datetest-ger dir", 'd', -1, "2025-07-26 20:10",
	    MTIME_MINUTE, NULL);
	check(l, fx, "29-datetest-ger file", 'f', 2235, "2003-10-02",
	    MTIME_DAY, NULL);
	check(l, fx, "52-swapped-daymonth dir", 'd', -1, "2004-10-01",
	    MTIME_DAY, NULL);
	check(l, fx, "59-localized-date-dir", 'd', -1, "2026-01-30 12:40",
	    MTIME_MINUTE, NULL);
	if ((e = find(l, "08-unix-namedsize file")) != NULL)
		ok(!e->size_exact && e->size_min <= 34304 &&
		    e->size_max >= 34304, "%s: 33.5k inexact", fx);
	else
		ok(0, "%s: 08-unix-namedsize file listed", fx);
	listing_free(l);
}

static void
test_mlsd(void)
{
	const char	*fx, *body;
	struct listing	*l;
	const struct entry *e;
	size_t		 sk;

	fx = "ftp-mlsd-proftpd-jlaffaye.txt";
	l = parse_fix(fx, true, "2026-01-01", &sk);
	is_int(listing_sort(l), 0, "%s: sorted", fx);
	is_int(listing_count(l), 3, "%s: cdir/pdir skipped, duplicate once",
	    fx);
	is_int(sk, 0, "%s: nothing bad", fx);
	check(l, fx, "movies", 'd', -1, "2015-08-06 23:58:17", MTIME_SECOND,
	    NULL);
	check(l, fx, "_upload", 'd', -1, "2015-08-14 17:29:49", MTIME_SECOND,
	    NULL);
	check(l, fx, "welcome.msg", 'f', 951, "2015-08-13 17:52:50",
	    MTIME_SECOND, NULL);
	e = find(l, "movies");
	ok(e && e->zone_stated && e->zone_offset == 0, "%s: MLSD is UTC", fx);
	is_str(e ? e->unique : NULL, "1B20F360U4", "%s: unique kept", fx);
	listing_free(l);

	fx = "ftp-mlsd-malformed-php.txt";
	l = parse_fix(fx, true, "2026-01-01", &sk);
	is_int(listing_count(l), 2, "%s: 2 entries", fx);
	is_int(sk, 3, "%s: 3 broken lines skipped, not fatal", fx);
	check(l, fx, "foobar", 'f', 4729, "2017-01-26 12:12:25", MTIME_SECOND,
	    NULL);
	e = find(l, "path;name");
	ok(e && e->type == ENTRY_FILE && e->size == -1 &&
	    e->mtime_prec == MTIME_UNKNOWN, "%s: 'path;name' without facts "
	    "we know", fx);
	listing_free(l);

	fx = "ftp-mlsd-edge-synthetic.txt";
	l = parse_fix(fx, true, "2026-01-01", &sk);
	is_int(listing_count(l), 8, "%s: 8 entries", fx);
	check(l, fx, "leap-day-fraction.bin", 'f', 1048576,
	    "2024-02-29 23:59:59", MTIME_NS, NULL);
	e = find(l, "leap-day-fraction.bin");
	is_int(e ? e->mtime_nsec : -1, 123000000, "%s: .123 s", fx);
	check(l, fx, "epoch-zero.dat", 'f', 0, "1970-01-01 00:00:00",
	    MTIME_SECOND, NULL);
	check(l, fx, "current", 'l', -1, "2024-01-01 12:00:00", MTIME_SECOND,
	    "/pub/data/release-42");
	check(l, fx, "latest", 'l', -1, NULL, 0, NULL);
	e = find(l, "latest");
	is_str(e ? e->unique : NULL, "801U1FE8E6", "%s: latest unique", fx);
	check(l, fx, "sub dir with spaces", 'd', -1, NULL, 0, NULL);
	check(l, fx, " leading-space.txt", 'f', 12, NULL, 0, NULL);
	check(l, fx, "semi;colon;name.txt", 'f', 5, NULL, 0, NULL);
	check(l, fx, "caf\xc3\xa9-utf8.txt", 'f', 7, NULL, 0, NULL);
	listing_free(l);

	/* GridFTP gives a symlink its target's type plus UNIX.slink. */
	l = listing_new(10);
	fx = "gridftp slink";
	body = "Type=file;Size=3;Modify=20240101000000;"
	    "UNIX.slink=/srv/up/a.txt;Unique=1-2; ln\r\n"
	    "Type=dir;UNIX.slink=sub;Unique=1-3; dl\r\n";
	is_int(list_ftp_parse((const uint8_t *)body, strlen(body), true, 0,
	    "", l, NULL), 0, "%s: parsed", fx);
	check(l, fx, "ln", 'l', -1, NULL, 0, "/srv/up/a.txt");
	check(l, fx, "dl", 'l', -1, NULL, 0, "sub");
	listing_free(l);
}

/* Parse one LIST line with now and return its wall time (-1: none). */
static int64_t
one_line(const char *line, const char *now)
{
	struct listing	*l = listing_new(10);
	int64_t		 t = -1;

	if (list_ftp_parse((const uint8_t *)line, strlen(line), false,
	    ts(now), "", l, NULL) == 0 && listing_count(l) == 1)
		t = listing_get(l, 0)->mtime_wall;
	listing_free(l);
	return t;
}

/* line is kept, with an unknown time and its exact size, at now. */
static void
unknown_date(const char *line, const char *now)
{
	struct listing	*l = listing_new(10);
	const struct entry *e;
	size_t		 sk = 9;

	is_int(list_ftp_parse((const uint8_t *)line, strlen(line), false,
	    ts(now), "", l, &sk), 0, "parsed: %s", line);
	e = listing_count(l) == 1 ? listing_get(l, 0) : NULL;
	ok(e != NULL && sk == 0 && e->mtime_prec == MTIME_UNKNOWN &&
	    e->size == (strncmp(line, "36611", 5) == 0 ? 36611 : 1) &&
	    e->size_exact && strcmp(e->path, "x") == 0, "kept with an unknown "
	    "date at %s: %.*s", now, (int)strcspn(line, "\r"), line);
	listing_free(l);
}

static void
test_years(void)
{
	const char *f = "-rw-r--r-- 1 ftp ftp 1 ";

	char	 b[128];

#define YEAR(date, now, want) do {					\
	(void)snprintf(b, sizeof(b), "%s%s x\r\n", f, date);		\
	is_int(one_line(b, now), ts(want), "'%s' at %s is %s", date, now, \
	    want);							\
} while (0)
	/* New Year: up to one day ahead is this coming year. */
	YEAR("Jan  1 00:10", "2024-12-31 23:30", "2025-01-01 00:10");
	YEAR("Dec 31 23:50", "2025-01-01 00:30", "2024-12-31 23:50");
	YEAR("Jan  2 12:00", "2024-12-31 23:30", "2024-01-02 12:00");
	YEAR("Jan  1 23:00", "2024-12-31 23:30", "2025-01-01 23:00");
	YEAR("Mar 10 12:00", "2024-03-10 11:00", "2024-03-10 12:00");
	YEAR("Mar 12 12:00", "2024-03-10 11:00", "2023-03-12 12:00");
	/*
	 * Feb 29 only exists in leap years: in another, a year-less Feb 29
	 * has no date (not the last leap year's, which ls would show with
	 * its year), and is kept with an unknown time (issue 22).
	 */
	YEAR("Feb 29 10:00", "2024-03-01 00:00", "2024-02-29 10:00");
	YEAR("Feb 29 10:00", "2028-08-10 00:00", "2028-02-29 10:00");
#undef YEAR
	unknown_date("-rw-r--r-- 1 ftp ftp 1 Feb 29 10:00 x\r\n",
	    "2025-03-01 00:00");
	unknown_date("-rw-r--r-- 1 ftp ftp 1 Feb 29 10:00 x\r\n",
	    "2027-01-01 00:00");
	unknown_date("-rw-r--r-- 1 ftp ftp 1 Feb 30 10:00 x\r\n",
	    "2025-01-01 00:00");
	unknown_date("-rw-r--r-- 1 ftp ftp 1 Feb 29  2025 x\r\n",
	    "2025-06-01 00:00");
	unknown_date("-rw-r--r-- 1 ftp ftp 1 Apr 31  2020 x\r\n",
	    "2025-06-01 00:00");
	unknown_date("36611      A    02-30-103  10:57  x\r\n",
	    "2025-06-01 00:00");
}

/*
 * Month names of server locales (issue 22): "Mon DD YYYY" in each,
 * UTF-8 and Latin-1, with and without the locale's trailing dot.
 */
static void
test_months(void)
{
	static const struct {
		const char	*name;
		int		 mon;
	} mo[] = {
		{ "M\xc3\xa4r", 3 }, { "M\xe4r", 3 }, { "Mrz", 3 },
		{ "Mai", 5 }, { "Okt", 10 }, { "Dez", 12 }, { "Okt.", 10 },
		{ "janv.", 1 }, { "f\xc3\xa9vr.", 2 }, { "mars", 3 },
		{ "avr.", 4 }, { "mai", 5 }, { "juin", 6 }, { "juil.", 7 },
		{ "ao\xc3\xbbt", 8 }, { "sept.", 9 }, { "oct.", 10 },
		{ "nov.", 11 }, { "d\xc3\xa9" "c.", 12 },
		{ "ene", 1 }, { "abr", 4 }, { "ago", 8 }, { "dic", 12 },
		{ "gen", 1 }, { "mag", 5 }, { "giu", 6 }, { "lug", 7 },
		{ "set", 9 }, { "ott", 10 }, { "mrt", 3 }, { "mei", 5 },
		{ "out", 10 }, { "maj", 5 }, { "des", 12 }, { "JAN", 1 },
		{ "\xd0\xbc\xd0\xb0\xd1\x80", 3 }, { "10\xe6\x9c\x88", 10 },
		{ "3\xec\x9b\x94", 3 },
	};
	struct listing	*l;
	char		 line[128], want[16];
	size_t		 i;

	for (i = 0; i < sizeof(mo) / sizeof(mo[0]); i++) {
		(void)snprintf(line, sizeof(line),
		    "-rw-r--r-- 1 ftp ftp 7 %s  5  2020 m\r\n", mo[i].name);
		(void)snprintf(want, sizeof(want), "2020-%02d-05", mo[i].mon);
		l = listing_new(4);
		(void)list_ftp_parse((const uint8_t *)line, strlen(line),
		    false, ts("2026-06-01"), "", l, NULL);
		check(l, mo[i].name, "m", 'f', 7, want, MTIME_DAY, NULL);
		listing_free(l);
	}
	/* Not a month: the line says why it is skipped. */
	l = listing_new(4);
	(void)snprintf(line, sizeof(line),
	    "-rw-r--r-- 1 ftp ftp 7 Foo  5  2020 m\r\n");
	is_int(list_ftp_parse((const uint8_t *)line, strlen(line), false,
	    ts("2026-06-01"), "", l, NULL), 0, "Foo: parsed");
	is_int(listing_count(l), 0, "Foo is no month: skipped");
	listing_free(l);
}

/* Why a line is skipped (list_ftp_line_why), and what is kept. */
static void
test_why(void)
{
	static const struct {
		const char	*line;
		bool		 mlsd;
		const char	*why;	/* NULL: an entry */
	} w[] = {
		{ "-rw-r--r-- 1 ftp ftp 7 Foo  5  2020 m", false,
		  "no size and date columns (size Mon DD HH:MM|YYYY)" },
		{ "-rw-r--r-- 1 ftp ftp 7 Jun  5  209 m", false,
		  "no size and date columns (size Mon DD HH:MM|YYYY)" },
		{ "hello world, this is no listing", false,
		  "not a listing line (no Unix mode, no DOS date)" },
		{ "12 34 56 78", false,
		  "not a listing line (no Unix mode, no DOS or OS/2 date)" },
		{ "-rw-r--r-- 1 ftp ftp 7 Jun  5  2020 ..", false, NULL },
		{ "-rw-r--r-- 1 ftp ftp 7 Jun  5  2020 a\x01b", false,
		  "unsafe name" },
		{ "-rw-r--r-- 1 ftp ftp 7 Feb 30  2020 m", false, NULL },
		{ "36611      A    04-23-103  10:57  m", false, NULL },
		{ "36611      A    04-23-103  10:57", false,
		  "not a listing line (no Unix mode, no DOS or OS/2 date)" },
		{ "type=file;size=3 m", true,
		  "no facts (no \"; \" before the name)" },
		{ "type=file;size; m", true, "a fact without '='" },
		{ "type=file;size=0; m", true, NULL },
	};
	const char	*got;
	size_t		 i;

	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		got = list_ftp_line_why((const uint8_t *)w[i].line,
		    strlen(w[i].line), w[i].mlsd, ts("2026-06-01"));
		is_str(got, w[i].why, "why: %s", w[i].line);
	}
}

/* A listed 0: a hint in LIST (Unix, DOS, OS/2), a fact in MLSD. */
static void
test_zero(void)
{
	const char	*list = "-rw-r--r-- 1 ftp ftp 0 Jun  1  2026 a.log\r\n"
	    "06-01-26  10:00AM                    0 b.log\r\n"
	    "    0      A    06-01-126  10:00  c.log\r\n"
	    "-rw-r--r-- 1 ftp ftp 00 Jun  1  2026 d.log\r\n";
	const char	*mlsd = "type=file;size=0;modify=20260601000000; e\r\n";
	struct listing	*l = listing_new(10);
	const char	*fx = "zero";

	is_int(list_ftp_parse((const uint8_t *)list, strlen(list), false,
	    ts("2026-07-01"), "", l, NULL), 0, "%s: LIST parsed", fx);
	zero_hint(l, fx, "a.log");
	zero_hint(l, fx, "b.log");
	zero_hint(l, fx, "c.log");
	ok(find(l, "d.log") != NULL && find(l, "d.log")->size == -1,
	    "%s: 00 is 0 too", fx);
	check(l, fx, "c.log", 'f', -1, "2026-06-01 10:00", MTIME_MINUTE, NULL);
	is_int(list_ftp_parse((const uint8_t *)mlsd, strlen(mlsd), true,
	    ts("2026-07-01"), "", l, NULL), 0, "%s: MLSD parsed", fx);
	check(l, fx, "e", 'f', 0, "2026-06-01 00:00:00", MTIME_SECOND, NULL);
	listing_free(l);
}

/* A server listing local time: ftp_timezone resolves it; MLSD is UTC. */
static void
test_zone(void)
{
	const char	*list = "-rw-r--r-- 1 ftp ftp 5 Jul 10 14:00 a\r\n"
	    "-rw-r--r-- 1 ftp ftp 5 Jan 10  2024 b\r\n";
	const char	*mlsd = "type=file;size=5;modify=20240710120000; c\r\n";
	struct listing	*l = listing_new(10);
	struct tzspec	 tz;
	const struct entry *e;

	is_int(list_ftp_parse((const uint8_t *)list, strlen(list), false,
	    ts("2024-08-01"), "d", l, NULL), 0, "zone: LIST parsed");
	is_int(list_ftp_parse((const uint8_t *)mlsd, strlen(mlsd), true,
	    ts("2024-08-01"), "d", l, NULL), 0, "zone: MLSD parsed");
	is_int(tzspec_parse("Europe/Berlin", &tz), 0, "Europe/Berlin");
	is_int(listing_resolve_times(l, &tz), 0, "times resolved");
	e = find(l, "d/a");
	is_int(e ? e->mtime / 1000000000 : 0, ts("2024-07-10 12:00"),
	    "14:00 CEST is 12:00 UTC");
	e = find(l, "d/b");
	is_int(e ? e->mtime / 1000000000 : 0, ts("2024-01-09 23:00"),
	    "Jan 10 2024 00:00 CET is Jan 9 23:00 UTC");
	e = find(l, "d/c");
	is_int(e ? e->mtime / 1000000000 : 0, ts("2024-07-10 12:00"),
	    "MLSD modify= stays UTC");
	listing_free(l);
}

/*
 * A repeated size fact whose last value is bad or overflows leaves the
 * size unknown, not "exact -1" (found by tests/fuzz/fuzz_list_ftp).
 */
static void
test_size_twice(void)
{
	const char	*mlsd = "size=1;size=; t\r\n"
	    "type=file;size=7;size=99999999999999999999; u\r\n"
	    "type=file;size=x;size=3; v\r\n";
	struct listing	*l = listing_new(10);
	const struct entry *e;

	is_int(list_ftp_parse((const uint8_t *)mlsd, strlen(mlsd), true,
	    ts("2024-08-01"), "", l, NULL), 0, "size twice: parsed");
	e = find(l, "t");
	ok(e != NULL && e->size == -1 && !e->size_exact &&
	    e->size_min == -1 && e->size_max == -1,
	    "size=1;size=: size unknown, not exact");
	e = find(l, "u");
	ok(e != NULL && e->size == -1 && !e->size_exact,
	    "size=7;size=<overflow>: size unknown, not exact");
	e = find(l, "v");
	ok(e != NULL && e->size == 3 && e->size_exact,
	    "size=x;size=3: the last valid size is exact");
	listing_free(l);
}

/*
 * A human size past int64_t ("999999999999999999m") is an unknown size,
 * like digits that overflow, not an out-of-range double conversion; so
 * is one that no byte count truncates to ("1.0808k": min > max); more
 * than 18 fraction digits are no size (they overflowed).  All found by
 * tests/fuzz/fuzz_list_ftp.
 */
static void
test_size_huge(void)
{
	const char	*list =
	    "-rw-r--r-- 1 ftp ftp 999999999999999999m Jan 10  2024 a\r\n"
	    "-rw-r--r-- 1 ftp ftp 8191.9p Jan 10  2024 b\r\n"
	    "-rw-r--r-- 1 ftp ftp 8p Jan 10  2024 c\r\n"
	    "-rw-r--r-- 1 ftp ftp 1.0808k May  9  2024 d\r\n"
	    "-rw-r--r-- 1 ftp ftp 1.77777777777777777777k May  9  2024 e\r\n"
	    "-rw-r--r-- 1 ftp ftp 1.500000000000000000k May  9  2024 f\r\n"
	    "-rw-r--r-- 1 ftp ftp 6.2083p May  9  2024 g\r\n";
	struct listing	*l = listing_new(10);
	const struct entry *e;

	is_int(list_ftp_parse((const uint8_t *)list, strlen(list), false,
	    ts("2024-08-01"), "", l, NULL), 0, "huge human sizes: parsed");
	e = find(l, "a");
	ok(e != NULL && e->size == -1 && e->size_min == -1 &&
	    e->size_max == -1 && !e->size_exact, "999999999999999999m: unknown");
	e = find(l, "b");
	ok(e != NULL && e->size == -1 && !e->size_exact, "8191.9p: unknown");
	e = find(l, "d");
	ok(e != NULL && e->size == -1 && e->size_min == -1 &&
	    e->size_max == -1, "1.0808k (no byte count): unknown");
	ok(find(l, "e") == NULL, "20 fraction digits: no size, line skipped");
	e = find(l, "f");
	ok(e != NULL && e->type == ENTRY_FILE,
	    "18 fraction digits: still a size column, the line is listed");
	e = find(l, "g");
	ok(e != NULL && e->size_min > 0 && e->size_min <= e->size &&
	    e->size <= e->size_max, "6.2083p: midpoint without overflow");
	e = find(l, "c");
	ok(e != NULL && e->size_min == 9007199254740992LL &&
	    e->size_max == 10133099161583615LL && !e->size_exact,
	    "8p: the range of a truncated 8p");
	listing_free(l);
}

static void
test_feat(void)
{
	const char *grid = "220 GridFTP Server ready.\r\n"
	    "211-Extensions supported\r\n SIZE\r\n MDTM\r\n"
	    " MLST Type*;Size*;Modify*;Perm*;Charset;UNIX.mode*;Unique*;\r\n"
	    " REST STREAM\r\n211 End.\r\n";
	const char *vs = "220 (vsFTPd 3.0.3)\r\n211-Features:\r\n EPRT\r\n"
	    " EPSV\r\n MDTM\r\n PASV\r\n REST STREAM\r\n SIZE\r\n TVFS\r\n"
	    "211 End\r\n";
	const char *fake = "220 we MLST nothing\r\n 211 MLST\r\n";
	/* globus-gridftp-server 13.24's reply, as received. */
	const char *gt = "211-Extensions supported\r\n"
	    " CKSM MD5:10;ADLER32:10;SHA1:10;SHA256:11;SHA512:12;\r\n"
	    " DSI file-13.24\r\n STORATTR\r\n HTTP\r\n DCSC P,D\r\n"
	    " MFMT\r\n WHOAMI\r\n AUTHZ_ASSERT\r\n MLSR\r\n MLSC\r\n"
	    " UTF8\r\n LANG EN\r\n DCAU\r\n PARALLEL\r\n SIZE\r\n"
	    " MLST Type*;Size*;Modify*;Perm*;Charset;UNIX.mode*;\r\n"
	    " ERET\r\n ESTO\r\n SPAS\r\n SPOR\r\n REST STREAM\r\n"
	    " MDTM\r\n PASV AllowDelayed;\r\n211 End.\r\n";
	const char *dcaux = "211-x\r\n DCAUX\r\n DCA\r\n211 End\r\n";

	ok(list_ftp_feat_mlst((const uint8_t *)grid, strlen(grid)),
	    "FEAT with MLST: MLSD");
	ok(!list_ftp_feat_mlst((const uint8_t *)vs, strlen(vs)),
	    "vsftpd FEAT: LIST");
	ok(!list_ftp_feat_mlst((const uint8_t *)fake, strlen(fake)),
	    "MLST outside the 211 block does not count");
	ok(list_ftp_feat_has((const uint8_t *)gt, strlen(gt), "DCAU"),
	    "globus-gridftp-server lists DCAU: GridFTP");
	ok(list_ftp_feat_mlst((const uint8_t *)gt, strlen(gt)),
	    "globus-gridftp-server: MLSD");
	ok(!list_ftp_feat_has((const uint8_t *)vs, strlen(vs), "DCAU"),
	    "vsftpd: not GridFTP");
	ok(list_ftp_feat_has((const uint8_t *)vs, strlen(vs), "rest"),
	    "a feature with parameters, any case");
	ok(!list_ftp_feat_has((const uint8_t *)dcaux, strlen(dcaux), "DCAU"),
	    "DCAUX and DCA are not DCAU");
}

/* The fake server of the crawl test. */
struct fake {
	unsigned	 calls;
	char		 cmds[16][8];	/* commands seen */
	char		 urls[16][128];
};

static int
fake_fetch(void *ctx, struct http_page *pages, size_t n)
{
	struct fake	*f = ctx;
	const char	*body;
	size_t		 i;

	for (i = 0; i < n; i++) {
		if (f->calls < 16) {
			(void)snprintf(f->cmds[f->calls], 8, "%s",
			    pages[i].command);
			(void)snprintf(f->urls[f->calls], 128, "%s",
			    pages[i].url);
		}
		f->calls++;
		if (strcmp(pages[i].command, "FEAT") == 0)
			body = "211-Features\r\n MLST type*;size*;\r\n211 E\r\n";
		else if (strcmp(pages[i].url, "ftp://h/%2Fpub/") == 0)
			body = "type=dir;unique=U1;modify=20240101000000; a\r\n"
			    "type=dir;unique=U1;modify=20240101000000; alias\r\n"
			    "type=dir;unique=U2; bad\r\n"
			    "type=dir;unique=U3; w\r\n"
			    "type=file;size=3;modify=20240101000000; x.txt\r\n"
			    "type=file;size=3; skip.tmp\r\n";
		else if (strcmp(pages[i].url, "ftp://h/%2Fpub/a/") == 0)
			body = "type=cdir;unique=U1; .\r\n"
			    "type=file;size=9;modify=20240101000000; y\r\n";
		else if (strcmp(pages[i].url, "ftp://h/%2Fpub/w/") == 0)
			/* a server that listed the root instead */
			body = "type=cdir;unique=U0; .\r\n"
			    "type=file;size=9;modify=20240101000000; z\r\n";
		else {
			pages[i].rc = BM_ENOENT;
			(void)snprintf(pages[i].errmsg,
			    sizeof(pages[i].errmsg), "550 nope");
			continue;
		}
		if (page_body(&pages[i], body) != 0)
			return BM_ENOMEM;
	}
	return 0;
}

static void
test_crawl(void)
{
	const char *const excl[] = { "*.tmp" };
	struct filter	 flt = { NULL, 0, excl, 1 };
	struct ftp_crawl_opts o;
	struct fake	 f;
	struct listing	*l = listing_new(100);
	size_t		 loops = 0, skipped = 0;
	bool		 mlsd = false;
	char		 err[256];
	int		 rc;

	memset(&f, 0, sizeof(f));
	memset(&o, 0, sizeof(o));
	o.filter = &flt;
	o.max_depth = 8;
	o.batch = 4;
	o.ret_mlsd = &mlsd;
	o.ret_loops = &loops;
	o.ret_skipped = &skipped;
	rc = list_ftp_crawl("ftp://h/%2Fpub/", &o, fake_fetch, &f, l, err,
	    sizeof(err));
	is_int(rc, BM_ENOENT, "crawl: a failed directory makes it incomplete");
	is_str(err, "ftp://h/%2Fpub/bad/: 550 nope", "crawl: failure named");
	is_int(f.calls, 5, "crawl: FEAT + 4 directories listed");
	ok(mlsd, "crawl: MLSD chosen from FEAT");
	is_str(f.cmds[0], "FEAT", "crawl: FEAT first");
	is_str(f.cmds[1], "MLSD", "crawl: then MLSD");
	is_int(loops, 1, "crawl: the alias with the same unique= not entered");
	is_int(listing_sort(l), 0, "crawl: sorted");
	ok(find(l, "a") && find(l, "a/y") && find(l, "x.txt") &&
	    find(l, "bad") && find(l, "w") && !find(l, "w/z") &&
	    !find(l, "alias") && !find(l, "skip.tmp"),
	    "crawl: a, a/y, bad, w, x.txt; nothing from the wrong directory "
	    "listed for w, no alias, no excluded file");
	is_int(listing_count(l), 5, "crawl: 5 entries");
	memset(&f, 0, sizeof(f));
	listing_free(l);
	l = listing_new(100);
	o.filter = NULL;
	o.batch = 1;
	(void)list_ftp_crawl("ftp://h/%2Fpub/", &o, fake_fetch, &f, l, err,
	    sizeof(err));
	ok(find(l, "w") && !find(l, "w/z"), "crawl: cdir check, one at a "
	    "time");
	memset(&f, 0, sizeof(f));
	listing_free(l);
	l = listing_new(100);
	(void)list_ftp_crawl("ftp://h/%2Fpub/w/", &o, fake_fetch, &f, l, err,
	    sizeof(err));
	ok(find(l, "z") != NULL, "crawl: the root's cdir is not checked");
	listing_free(l);
}

/* A LIST server with symlinks, for follow_symlinks. */
static int
link_fetch(void *ctx, struct http_page *pages, size_t n)
{
	unsigned	*calls = ctx;
	const char	*body;
	size_t		 i;

	for (i = 0; i < n; i++) {
		(*calls)++;
		if (strcmp(pages[i].command, "FEAT") == 0)
			body = "211-Features:\r\n SIZE\r\n211 End\r\n";
		else if (strcmp(pages[i].url, "ftp://h/") == 0)
			body = "-rw-r--r-- 1 0 0 5 Jan 02 2020 a.txt\r\n"
			    "drwxr-xr-x 2 0 0 4096 Jan 02 2020 sub\r\n"
			    "lrwxrwxrwx 1 0 0 5 Jan 02 2020 flink -> a.txt\r\n"
			    "lrwxrwxrwx 1 0 0 3 Jan 02 2020 dlink -> sub\r\n"
			    "lrwxrwxrwx 1 0 0 4 Jan 02 2020 out -> ../x\r\n"
			    "lrwxrwxrwx 1 0 0 4 Jan 02 2020 abs -> /etc/x\r\n"
			    "lrwxrwxrwx 1 0 0 7 Jan 02 2020 dang -> nothere\r\n"
			    "lrwxrwxrwx 1 0 0 5 Jan 02 2020 chain -> ./flink\r\n";
		else if (strcmp(pages[i].url, "ftp://h/sub/") == 0 ||
		    strcmp(pages[i].url, "ftp://h/dlink/") == 0)
			body = "-rw-r--r-- 1 0 0 7 Jan 03 2020 b.txt\r\n"
			    "lrwxrwxrwx 1 0 0 2 Jan 02 2020 loop -> ..\r\n"
			    "lrwxrwxrwx 1 0 0 6 Jan 02 2020 up -> ../sub/\r\n"
			    "lrwxrwxrwx 1 0 0 8 Jan 02 2020 f -> ../a.txt\r\n";
		else
			body = NULL;
		if (page_body(&pages[i], body) != 0)
			return BM_ENOMEM;
	}
	return 0;
}

static void
test_follow(void)
{
	struct ftp_crawl_opts o;
	const struct entry *e;
	struct listing	*l = listing_new(100);
	size_t		 loops = 0, dangling = 0;
	unsigned	 calls = 0;
	char		 err[256];
	int		 rc;

	memset(&o, 0, sizeof(o));
	o.max_depth = 8;
	o.batch = 2;
	o.follow = true;
	o.ret_loops = &loops;
	o.ret_dangling = &dangling;
	rc = list_ftp_crawl("ftp://h/", &o, link_fetch, &calls, l, err,
	    sizeof(err));
	is_int(rc, 0, "follow: complete");
	is_int(calls, 4, "follow: FEAT, the root, sub, dlink listed");
	is_int(loops, 4, "follow: sub/loop, sub/up, dlink/loop, dlink/up "
	    "are loops");
	is_int(dangling, 1, "follow: dang is dangling");
	is_int(listing_sort(l), 0, "follow: sorted");
	is_int(listing_count(l), 11, "follow: 11 entries");
	ok((e = find(l, "flink")) != NULL && e->type == ENTRY_FILE &&
	    e->size == 5 && e->mtime_prec == MTIME_DAY,
	    "follow: flink is a file with a.txt's size and date");
	ok((e = find(l, "chain")) != NULL && e->type == ENTRY_FILE &&
	    e->size == 5, "follow: a link to a link to a file");
	ok((e = find(l, "dlink")) != NULL && e->type == ENTRY_DIR,
	    "follow: dlink is a directory");
	ok((e = find(l, "dlink/b.txt")) != NULL && e->size == 7 &&
	    find(l, "dlink/f") != NULL && find(l, "sub/f") != NULL &&
	    find(l, "sub/b.txt") != NULL,
	    "follow: dlink listed as sub; f in both is a file");
	ok(!find(l, "dang") && !find(l, "sub/loop") && !find(l, "dlink/up"),
	    "follow: loops and dangling links dropped");
	ok((e = find(l, "out")) != NULL && e->type == ENTRY_FILE &&
	    e->size == -1 && e->mtime_prec == MTIME_UNKNOWN &&
	    (e = find(l, "abs")) != NULL && e->type == ENTRY_FILE,
	    "follow: targets outside the tree are files of unknown size");
	listing_free(l);
	l = listing_new(100);
	o.follow = false;
	calls = 0;
	rc = list_ftp_crawl("ftp://h/", &o, link_fetch, &calls, l, err,
	    sizeof(err));
	ok(rc == 0 && calls == 3 && (e = find(l, "dlink")) != NULL &&
	    e->type == ENTRY_SYMLINK, "no follow: links stay links");
	listing_free(l);
}

/* A server whose root lists names twice, as a file and a directory. */
static int
dup_fetch(void *ctx, struct http_page *pages, size_t n)
{
	unsigned	*calls = ctx;
	const char	*body;
	size_t		 i;

	for (i = 0; i < n; i++) {
		(*calls)++;
		if (strcmp(pages[i].command, "FEAT") == 0)
			body = "211-Features\r\n MLST type*;size*;\r\n211 E\r\n";
		else if (strcmp(pages[i].url, "ftp://h/") == 0)
			body = "type=file;size=5; x\r\n"
			    "type=dir; x\r\n"
			    "type=OS.unix=slink:y; x\r\n"
			    "type=dir; d\r\n"
			    "type=file;size=7; d\r\n"
			    "type=file;size=1; f\r\n"
			    "type=file;size=2; f\r\n";
		else if (strcmp(pages[i].url, "ftp://h/d/") == 0)
			body = "type=file;size=3; in\r\n";
		else
			body = NULL;	/* x/ must not be listed: x is a file */
		if (page_body(&pages[i], body) != 0)
			return BM_ENOMEM;
	}
	return 0;
}

static void
test_dup(void)
{
	struct ftp_crawl_opts o;
	const struct entry *e;
	struct listing	*l;
	unsigned	 calls = 0;
	char		 err[256];
	int		 follow;

	for (follow = 0; follow < 2; follow++) {
		l = listing_new(100);
		calls = 0;
		memset(&o, 0, sizeof(o));
		o.max_depth = 8;
		o.batch = 4;
		o.follow = follow;
		is_int(list_ftp_crawl("ftp://h/", &o, dup_fetch, &calls, l,
		    err, sizeof(err)), 0, "dup: complete");
		is_int(calls, 3, "dup: FEAT, the root and d listed, not x");
		is_int(listing_sort(l), 0, "dup: sorted");
		is_int(listing_count(l), 4, "dup: x, d, d/in, f");
		ok((e = find(l, "x")) != NULL && e->type == ENTRY_FILE &&
		    e->size == 5, "dup: x is the file its first line says");
		ok((e = find(l, "d")) != NULL && e->type == ENTRY_DIR &&
		    find(l, "d/in") != NULL, "dup: d is the directory first "
		    "listed");
		ok((e = find(l, "f")) != NULL && e->size == 1,
		    "dup: f has the size its first line says");
		listing_free(l);
	}
}

/*
 * globus-gridftp-server's MLSD: a symlink carries its target's type,
 * size and unique= plus UNIX.slink, the target as an absolute path.
 */
static int
gslink_fetch(void *ctx, struct http_page *pages, size_t n)
{
	unsigned	*calls = ctx;
	const char	*body;
	size_t		 i;

	for (i = 0; i < n; i++) {
		(*calls)++;
		if (strcmp(pages[i].command, "FEAT") == 0)
			body = "211-Features\r\n MLST Type*;Size*;\r\n"
			    " DCAU\r\n211 E\r\n";
		else if (strcmp(pages[i].url, "ftp://h/") == 0)
			body = "Type=cdir;Unique=R; .\r\n"
			    "Type=file;Size=2;Unique=A; a.txt\r\n"
			    "Type=dir;Unique=S; sub\r\n"
			    "Type=dir;Unique=S;UNIX.slink=/srv/tree/sub; dl\r\n"
			    "Type=dir;Unique=O;UNIX.slink=/srv/other; od\r\n"
			    "Type=file;Size=2;Unique=A;"
			    "UNIX.slink=/srv/tree/a.txt; fl\r\n";
		else if (strcmp(pages[i].url, "ftp://h/sub/") == 0 ||
		    strcmp(pages[i].url, "ftp://h/dl/") == 0)
			body = "Type=cdir;Unique=S; .\r\n"
			    "Type=file;Size=3;Unique=B; b.txt\r\n"
			    "Type=dir;Unique=R;UNIX.slink=/srv/tree; loop\r\n";
		else if (strcmp(pages[i].url, "ftp://h/od/") == 0)
			body = "Type=cdir;Unique=O; .\r\n"
			    "Type=file;Size=4;Unique=X; x.txt\r\n";
		else
			body = NULL;
		if (page_body(&pages[i], body) != 0)
			return BM_ENOMEM;
	}
	return 0;
}

static void
test_follow_gridftp(void)
{
	struct ftp_crawl_opts o;
	const struct entry *e;
	struct listing	*l = listing_new(100);
	size_t		 loops = 0, dangling = 0;
	unsigned	 calls = 0;
	char		 err[256];

	memset(&o, 0, sizeof(o));
	o.max_depth = 8;
	o.batch = 2;
	o.follow = true;
	o.ret_loops = &loops;
	o.ret_dangling = &dangling;
	is_int(list_ftp_crawl("ftp://h/", &o, gslink_fetch, &calls, l, err,
	    sizeof(err)), 0, "gridftp follow: complete");
	is_int(calls, 5, "gridftp follow: FEAT, the root, sub, dl, od listed");
	is_int(loops, 2, "gridftp follow: sub/loop and dl/loop are loops");
	is_int(listing_sort(l), 0, "gridftp follow: sorted");
	ok((e = find(l, "dl")) != NULL && e->type == ENTRY_DIR &&
	    find(l, "dl/b.txt") != NULL, "gridftp follow: an absolute link to "
	    "a directory is a directory, listed");
	ok((e = find(l, "od")) != NULL && e->type == ENTRY_DIR &&
	    find(l, "od/x.txt") != NULL, "gridftp follow: so is one to a "
	    "directory outside the tree");
	ok((e = find(l, "fl")) != NULL && e->type == ENTRY_FILE,
	    "gridftp follow: an absolute link to a file is a file");
	ok(!find(l, "sub/loop") && !find(l, "dl/loop"),
	    "gridftp follow: no loop entry");
	is_int(listing_count(l), 8, "gridftp follow: 8 entries");
	listing_free(l);
}

/* A GridFTP-like MLSD server whose links name absolute resolved paths. */
static int
abs_fetch(void *ctx, struct http_page *pages, size_t n)
{
	const char	*body;
	size_t		 i;

	(void)ctx;
	for (i = 0; i < n; i++) {
		if (strcmp(pages[i].command, "FEAT") == 0)
			body = "211-Features\r\n MLST type*;size*;\r\n DCAU\r\n"
			    "211 E\r\n";
		else if (strcmp(pages[i].url, "ftp://h/%2Fsrv/m/") == 0)
			body = "Type=cdir;Unique=R; /srv/m\r\n"
			    "Type=dir;Unique=D;Modify=20240101000000; data\r\n"
			    "Type=file;Size=3;Modify=20240101000000;"
			    "UNIX.slink=/srv/m/data/f1.txt; link-file\r\n"
			    "Type=dir;Modify=20240101000000;"
			    "UNIX.slink=/srv/m/data; link-dir\r\n"
			    "Type=file;Size=3;Modify=20240101000000;"
			    "UNIX.slink=/srv/other/x; out\r\n"
			    "Type=file;Size=3;Modify=20240101000000;"
			    "UNIX.slink=/srv/mm/x; near\r\n";
		else if (strcmp(pages[i].url, "ftp://h/%2Fsrv/m/data/") == 0)
			body = "Type=cdir;Unique=D; /srv/m/data\r\n"
			    "Type=file;Size=3;Modify=20240101000000; f1.txt\r\n"
			    "Type=dir;Modify=20240101000000;"
			    "UNIX.slink=/srv/m; up\r\n";
		else
			body = NULL;
		if (page_body(&pages[i], body) != 0)
			return BM_ENOMEM;
	}
	return 0;
}

/*
 * GridFTP's UNIX.slink is the resolved absolute path: one inside the
 * "%2F" source becomes relative to the link's directory (so the store
 * recreates it); one outside, or beside with a longer name, stays.
 */
static void
test_abs_targets(void)
{
	struct ftp_crawl_opts o;
	struct listing	*l = listing_new(100);
	const struct entry *e;
	char		 err[256];

	memset(&o, 0, sizeof(o));
	o.max_depth = 8;
	o.batch = 4;
	is_int(list_ftp_crawl("ftp://h/%2Fsrv/m/", &o, abs_fetch, NULL, l,
	    err, sizeof(err)), 0, "abs targets: crawl");
	e = find(l, "link-file");
	is_str(e != NULL ? e->target : NULL, "data/f1.txt",
	    "abs targets: a file link inside, relative");
	e = find(l, "link-dir");
	is_str(e != NULL ? e->target : NULL, "data",
	    "abs targets: a directory link inside, relative");
	e = find(l, "data/up");
	is_str(e != NULL ? e->target : NULL, "..",
	    "abs targets: a link to the root from below, '..'");
	e = find(l, "out");
	is_str(e != NULL ? e->target : NULL, "/srv/other/x",
	    "abs targets: outside, kept absolute");
	e = find(l, "near");
	is_str(e != NULL ? e->target : NULL, "/srv/mm/x",
	    "abs targets: /srv/mm is not inside /srv/m");
	listing_free(l);
	l = listing_new(100);
	(void)list_ftp_crawl("ftp://h/srv/m/", &o, abs_fetch, NULL, l, err,
	    sizeof(err));
	ok(find(l, "link-file") == NULL, "abs targets: a relative URL path "
	    "is another directory (nothing listed here)");
	listing_free(l);
}

/* ftp_digits: what the LIST parsers and MDTM/MLSD times read numbers with. */
static void
test_digits(void)
{
	is_int((int)ftp_digits("2024", 4), 2024, "digits: 2024");
	is_int((int)ftp_digits("0712x", 2), 7, "digits: the first 2 of 0712x");
	ok(ftp_digits("123456789012345678", 18) == 123456789012345678LL,
	    "digits: 18 of them");
	is_int((int)ftp_digits("1234567890123456789", 19), -1, "digits: 19: no");
	is_int((int)ftp_digits("12", 0), -1, "digits: none: no");
	is_int((int)ftp_digits("1a", 2), -1, "digits: a letter: no");
	is_int((int)ftp_digits("-1", 2), -1, "digits: a sign: no");
	is_int((int)ftp_digits(" 1", 2), -1, "digits: a space: no");
}

int
main(void)
{
	test_digits();
	test_classic();
	test_wildcard();
	test_dos();
	test_humansize();
	test_jlaffaye();
	test_exotic();
	test_months();
	test_why();
	test_zero();
	test_mlsd();
	test_years();
	test_zone();
	test_size_twice();
	test_dup();
	test_follow_gridftp();
	test_size_huge();
	test_feat();
	test_crawl();
	test_abs_targets();
	test_follow();
	return done_testing();
}
