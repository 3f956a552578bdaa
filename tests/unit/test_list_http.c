/*
 * Unit tests for agent/lister/http.c.  Every HTML/JSON/XML index fixture in
 * tests/fixtures is parsed and every entry compared with the expected
 * list: the *.expected.tsv sidecars (read at run time; run from the repo
 * root as ./tests/unit/test_list_http) or, for the samples without one
 * (nginx json/xml, IIS), the rows written below from LISTINGS.md.  Then
 * hostile hrefs (the store's temp-file prefix among them), percent-decoding,
 * empty index pages versus pages that are no index at all, and
 * list_http_crawl() against a fake fetch callback serving in-memory pages.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "biomirror/error.h"
#include "biomirror/list_http.h"
#include "biomirror/listing.h"

#include "tap.h"

#define FIX	"tests/fixtures/"

/* One expected entry. */
struct exp_row {
	const char	*name;		/* decoded name (path under the page) */
	char		 type;		/* 'f' or 'd' */
	long long	 exact;		/* exact bytes, -1 when not exact */
	const char	*mtime;		/* "YYYY-MM-DD HH:MM[:SS]" as listed, NULL unknown */
	const char	*display;	/* size text, NULL: not checked */
	long long	 min, max;	/* byte range, -1 when not given */
	int		 stated;	/* 1 when the page states the zone */
	int		 offset;	/* stated offset, seconds east */
	const char	*href;		/* raw href, NULL: not checked */
};

/* nginx json/xml: sample 5's entries (LISTINGS.md 8/9), seconds ":00". */
static const struct {
	const char	*name;
	char		 type;
	long long	 size;
	const char	*mtime;
} mp_rows[] = {
	{ "archive", 'd', -1, "2015-10-09 16:12:00" },
	{ "mib", 'd', -1, "2013-11-29 20:20:00" },
	{ "presentation", 'd', -1, "2013-09-26 05:15:00" },
	{ "snapshot", 'd', -1, "2023-02-10 17:42:00" },
	{ "monitoring-plugins-2.0.tar.gz", 'f', 2610000, "2014-07-11 23:17:00" },
	{ "monitoring-plugins-2.0.tar.gz.sha1", 'f', 72, "2014-07-11 23:17:00" },
	{ "monitoring-plugins-2.1.1.tar.gz", 'f', 2612331, "2014-12-02 07:46:00" },
	{ "monitoring-plugins-2.1.1.tar.gz.sha1", 'f', 74, "2014-12-02 07:46:00" },
	{ "monitoring-plugins-2.1.2.tar.gz", 'f', 2613060, "2015-10-16 17:40:00" },
	{ "monitoring-plugins-2.1.2.tar.gz.sha1", 'f', 74, "2015-10-16 17:40:00" },
	{ "monitoring-plugins-2.1.tar.gz", 'f', 2611940, "2014-10-15 20:32:00" },
	{ "monitoring-plugins-2.1.tar.gz.sha1", 'f', 72, "2014-10-15 20:32:00" },
	{ "monitoring-plugins-2.2.tar.gz", 'f', 2461548, "2016-11-29 16:49:00" },
	{ "monitoring-plugins-2.2.tar.gz.sha1", 'f', 72, "2016-11-29 16:49:00" },
	{ "monitoring-plugins-2.3.1.tar.gz", 'f', 2529669, "2021-04-11 17:07:00" },
	{ "monitoring-plugins-2.3.1.tar.gz.sha1", 'f', 74, "2021-04-11 17:07:00" },
	{ "monitoring-plugins-2.3.2.tar.gz", 'f', 2766966, "2022-10-19 20:58:00" },
	{ "monitoring-plugins-2.3.2.tar.gz.sha1", 'f', 74, "2022-10-19 20:58:00" },
	{ "monitoring-plugins-2.3.3.tar.gz", 'f', 2620192, "2023-02-01 21:53:00" },
	{ "monitoring-plugins-2.3.3.tar.gz.sha1", 'f', 74, "2023-02-01 21:53:00" },
	{ "monitoring-plugins-2.3.tar.gz", 'f', 2528556, "2020-12-10 05:50:00" },
	{ "monitoring-plugins-2.3.tar.gz.sha1", 'f', 72, "2020-12-10 05:50:00" },
	{ "timestamp", 'f', 11, "2023-07-20 10:46:00" },
	{ "a \"quoted\" & <odd> name\\x.txt", 'f', 17, "2023-02-01 21:53:00" },
};

/* IIS samples 17-19 (LISTINGS.md table): server-local, zone not stated. */
static const struct exp_row iis_digi[] = {
	{ "lr54-0.0.0.1.bin", 'f', 22643547, "2016-03-14 09:48", "22643547",
	    22643547, 22643547, 0, 0,
	    "/support/firmware/branded/sieH7/latest/lr54-0.0.0.1.bin" },
	{ "lr54-0.0.0.2.bin", 'f', 22643905, "2016-03-16 08:05", "22643905",
	    22643905, 22643905, 0, 0, NULL },
	{ "lr54-1.2.3.4.bin", 'f', 22643907, "2016-03-16 10:23", "22643907",
	    22643907, 22643907, 0, 0, NULL },
};
static const struct exp_row iis_ilga[] = {
	{ "001001000A01000R.html", 'f', 2450, "2023-04-14 23:00", "2450",
	    2450, 2450, 0, 0, NULL },
	{ "00100100ZZ9996aaR.html", 'f', 6400, "2025-11-08 00:00", "6400",
	    6400, 6400, 0, 0, NULL },
};
static const struct exp_row iis_nemweb[] = {
	{ "PUBLIC_ROOFTOP_PV_ACTUAL_MEASUREMENT_20230101000000_0000000396168830.zip",
	    'f', 1684350, "2022-08-21 01:02", "1684350", 1684350, 1684350,
	    0, 0, NULL },
};

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

static long long
num_or(const char *s, long long dflt)
{
	char		*end;
	long long	 v;

	if (s == NULL || *s == '\0')
		return dflt;
	v = strtoll(s, &end, 10);
	return *end == '\0' ? v : dflt;
}

/*
 * Turn a tsv mtime into the listed form and the zone: "2016-04-04T15:36:49Z"
 * -> "2016-04-04 15:36:49", stated, 0; "...+02:00" -> stated, 7200.
 */
static char *
tsv_mtime(char *m, int *stated, int *offset)
{
	size_t	 l;

	*stated = 0;
	*offset = 0;
	if (m[0] < '0' || m[0] > '9')
		return NULL;
	if (strlen(m) > 10 && m[10] == 'T') {
		m[10] = ' ';
		*stated = 1;
		l = strlen(m);
		if (m[l - 1] == 'Z')
			m[l - 1] = '\0';
		else if (l > 6 && (m[l - 6] == '+' || m[l - 6] == '-')) {
			*offset = ((m[l - 5] - '0') * 10 + (m[l - 4] - '0')) *
			    3600 + ((m[l - 2] - '0') * 10 + (m[l - 1] - '0')) *
			    60;
			if (m[l - 6] == '-')
				*offset = -*offset;
			m[l - 6] = '\0';
		}
	}
	return m;
}

/* Read a sidecar; rows point into *ret_buf, which the caller frees. */
static size_t
read_tsv(const char *path, struct exp_row *rows, size_t max, char **ret_buf)
{
	char	*buf, *line, *next, *col[9], empty[1] = "";
	size_t	 len, n = 0, i;

	if ((*ret_buf = buf = slurp(path, &len)) == NULL)
		return 0;
	for (line = buf; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (*line == '#' || *line == '\0' || n == max)
			continue;
		for (i = 0; i < 9; i++) {
			col[i] = line;
			if (line != NULL && (line = strchr(line, '\t')) != NULL)
				*line++ = '\0';
			if (col[i] == NULL)
				col[i] = empty;
		}
		rows[n].name = col[0];
		rows[n].type = col[1][0];
		rows[n].exact = num_or(col[2], -1);
		rows[n].display = strcmp(col[3], "(none)") == 0 ? NULL : col[3];
		rows[n].min = num_or(col[4], -1);
		rows[n].max = num_or(col[5], -1);
		rows[n].mtime = tsv_mtime(col[6], &rows[n].stated,
		    &rows[n].offset);
		rows[n].href = col[8];
		n++;
	}
	return n;
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

static void
fmt_mtime(const struct entry *e, char *buf, size_t len)
{
	time_t		 t = (time_t)e->mtime_wall;
	struct tm	 tm;

	gmtime_r(&t, &tm);
	if (e->mtime_prec == MTIME_SECOND)
		strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	else if (e->mtime_prec == MTIME_MINUTE)
		strftime(buf, len, "%Y-%m-%d %H:%M", &tm);
	else if (e->mtime_prec == MTIME_DAY)
		strftime(buf, len, "%Y-%m-%d", &tm);
	else
		snprintf(buf, len, "prec %d", (int)e->mtime_prec);
}

/*
 * Compare one entry.  tol: allowed difference of size_min/size_max
 * (docker's "2.0 KiB": its rounding rule is not known, LISTINGS.md 15).
 */
static void
check_row(const char *fx, const struct listing *l, const struct exp_row *x,
    int tol)
{
	const struct entry	*e = find(l, x->name);
	char			 buf[64];

	if (!ok(e != NULL, "%s: entry %s present", fx, x->name))
		return;
	is_int(e->type, x->type, "%s: %s type", fx, x->name);
	if (x->exact == 0 && x->type == 'f') {
		/* An HTML index's 0 is a hint: size unknown (issue 22). */
		ok(!e->size_exact && e->size == -1 && e->size_min == -1 &&
		    e->size_max == -1, "%s: %s listed 0: size unknown", fx,
		    x->name);
		is_str(e->size_display, x->display, "%s: %s size_display",
		    fx, x->name);
		return;
	}
	if (x->exact >= 0) {
		ok(e->size_exact, "%s: %s size exact", fx, x->name);
		is_int(e->size, x->exact, "%s: %s size", fx, x->name);
	} else
		ok(!e->size_exact, "%s: %s size not exact", fx, x->name);
	if (x->min >= 0) {
		ok(e->size_min >= x->min - tol && e->size_min <= x->min + tol,
		    "%s: %s size_min %lld ~ %lld", fx, x->name,
		    (long long)e->size_min, x->min);
		ok(e->size_max >= x->max - tol && e->size_max <= x->max + tol,
		    "%s: %s size_max %lld ~ %lld", fx, x->name,
		    (long long)e->size_max, x->max);
	} else if (x->type == 'd' || x->display == NULL)
		ok(e->size_min == -1 && e->size_max == -1,
		    "%s: %s size unknown", fx, x->name);
	if (x->type == 'f' && x->display != NULL)
		is_str(e->size_display, x->display, "%s: %s size_display",
		    fx, x->name);
	else if (x->type == 'f')
		ok(e->size_display == NULL, "%s: %s no size_display", fx,
		    x->name);
	else	/* a dir's dash: the sidecars write "-" for Caddy's &mdash; */
		ok(e->size_display == NULL ||
		    strcmp(e->size_display, "-") == 0 ||
		    strcmp(e->size_display, "\xe2\x80\x94") == 0,
		    "%s: %s dir size_display", fx, x->name);
	if (x->mtime == NULL)
		is_int(e->mtime_prec, MTIME_UNKNOWN, "%s: %s mtime unknown",
		    fx, x->name);
	else {
		fmt_mtime(e, buf, sizeof(buf));
		is_str(buf, x->mtime, "%s: %s mtime", fx, x->name);
	}
	is_int(e->zone_stated, x->stated, "%s: %s zone stated", fx, x->name);
	if (x->stated)
		is_int(e->zone_offset, x->offset, "%s: %s zone offset", fx,
		    x->name);
	if (x->href != NULL && *x->href != '\0')
		is_str(e->href, x->href, "%s: %s href", fx, x->name);
}

static struct listing *
parse_file(const char *file, const char *ct, const char *url,
    enum page_format *fmt, size_t *skipped)
{
	struct listing	*l = listing_new(10000);
	char		 path[256], err[256] = "";
	char		*body;
	size_t		 len;
	int		 rc;

	snprintf(path, sizeof(path), FIX "%s", file);
	if ((body = slurp(path, &len)) == NULL) {
		ok(0, "%s: read fixture", file);
		return l;
	}
	rc = list_http_parse((const uint8_t *)body, len, ct, url, "", l, fmt,
	    skipped, err, sizeof(err));
	is_int(rc, 0, "%s: parse (%s)", file, err);
	free(body);
	return l;
}

static const struct {
	const char	*file;		/* fixture */
	const char	*url;		/* page URL it was served at */
	enum page_format fmt;		/* detected format */
	int		 tol;		/* size range tolerance, bytes */
} html_fixtures[] = {
	{ "apache-htmltable-rclone-fixture", "http://example.org/~user/pub/",
	    PAGE_APACHE_TABLE, 0 },
	{ "apache-fancy-pre-mysql-repo",
	    "http://repo.mysql.com/232905/apt/ubuntu/pool/mysql-tools/m/",
	    PAGE_APACHE_PRE, 0 },
	{ "apache-htmltable-winehq", "https://dl.winehq.org/wine-builds/",
	    PAGE_APACHE_TABLE, 0 },
	{ "apache-plain-ul-debian", "http://deb.debian.org/debian/",
	    PAGE_APACHE_UL, 0 },
	{ "nginx-autoindex-monitoring-plugins",
	    "https://www.monitoring-plugins.org/monitoring-plugins/",
	    PAGE_NGINX, 0 },
	{ "nginx-autoindex-proxmox-truncated", "http://download.proxmox.com"
	    "/debian/ceph-quincy/dists/bookworm/main/binary-amd64/",
	    PAGE_NGINX, 0 },
	{ "nginx-autoindex-inexact-synthetic",
	    "https://www.monitoring-plugins.org/monitoring-plugins/",
	    PAGE_NGINX, 0 },
	{ "nginx-fancyindex-lysator-openbsd",
	    "https://ftp.lysator.liu.se/pub/OpenBSD/", PAGE_NGINX_FANCY, 0 },
	{ "lighttpd-dirlisting-buildroot-acl",
	    "http://sources.buildroot.net/acl/", PAGE_LIGHTTPD, 0 },
	{ "caddy-v1-rclone-fixture", "http://localhost:8080/", PAGE_CADDY1,
	    0 },
	{ "caddy-v2-sdumirror-ubuntu",
	    "https://mirrors.sdu.edu.cn/ubuntu/1710048427/ubuntu/",
	    PAGE_CADDY2, 0 },
	{ "snt-utwente-debian", "https://ftp.snt.utwente.nl/debian/",
	    PAGE_SNT, 0 },
	/* "2.0 KiB": rounding rule unknown (LISTINGS.md 15): +-1 byte. */
	{ "docker-download-centos", "https://download.docker.com/linux/centos/",
	    PAGE_DOCKER, 1 },
	{ "docker-download-armv7l",
	    "https://download.docker.com/linux/centos/7/armv7l/", PAGE_DOCKER,
	    0 },
};

/*
 * Every sample with a sidecar.  Where the sidecar says "server-local?"
 * (docker, fancyindex) the zone is simply not stated by the page: that is
 * certain and is what is asserted; the clock itself is not.
 */
static void
test_tsv_fixtures(void)
{
	static struct exp_row	 rows[200];
	struct listing		*l;
	enum page_format	 fmt = PAGE_GENERIC;
	char			 path[256], html[128], *buf = NULL;
	size_t			 n, i, f;

	for (f = 0; f < sizeof(html_fixtures) / sizeof(html_fixtures[0]);
	    f++) {
		snprintf(path, sizeof(path), FIX "%s.expected.tsv",
		    html_fixtures[f].file);
		snprintf(html, sizeof(html), "%s.html", html_fixtures[f].file);
		n = read_tsv(path, rows, 200, &buf);
		ok(n > 0, "%s: sidecar read", path);
		l = parse_file(html, "text/html", html_fixtures[f].url, &fmt,
		    NULL);
		is_str(page_format_name(fmt),
		    page_format_name(html_fixtures[f].fmt), "%s: format",
		    html);
		is_int(listing_count(l), n, "%s: entry count", html);
		for (i = 0; i < n; i++)
			check_row(html, l, &rows[i], html_fixtures[f].tol);
		listing_free(l);
		free(buf);
	}
}

static void
check_mp(const char *fx, const struct listing *l)
{
	struct exp_row	 x;
	char		 num[32];
	size_t		 i, n = sizeof(mp_rows) / sizeof(mp_rows[0]);

	is_int(listing_count(l), n, "%s: entry count", fx);
	for (i = 0; i < n; i++) {
		memset(&x, 0, sizeof(x));
		x.name = mp_rows[i].name;
		x.type = mp_rows[i].type;
		x.exact = mp_rows[i].size;
		x.min = x.max = mp_rows[i].size;
		x.mtime = mp_rows[i].mtime;
		snprintf(num, sizeof(num), "%lld", mp_rows[i].size);
		x.display = mp_rows[i].size >= 0 ? num : NULL;
		x.stated = 1;	/* RFC 1123 "GMT" / ISO "Z" */
		check_row(fx, l, &x, 0);
	}
}

static void
test_json_xml(void)
{
	struct listing		*l;
	enum page_format	 fmt = PAGE_GENERIC;
	const char		*url =
	    "https://www.monitoring-plugins.org/monitoring-plugins/";

	l = parse_file("nginx-autoindex-format-json-synthetic.json",
	    "application/json", url, &fmt, NULL);
	is_int(fmt, PAGE_NGINX_JSON, "json: format");
	check_mp("json", l);
	listing_free(l);
	/* Detected by the body when the type is unhelpful. */
	l = parse_file("nginx-autoindex-format-json-synthetic.json",
	    "text/plain", url, &fmt, NULL);
	is_int(fmt, PAGE_NGINX_JSON, "json by body: format");
	check_mp("json by body", l);
	listing_free(l);

	l = parse_file("nginx-autoindex-format-xml-synthetic.xml",
	    "text/xml", url, &fmt, NULL);
	is_int(fmt, PAGE_NGINX_XML, "xml: format");
	check_mp("xml", l);
	listing_free(l);
	l = parse_file("nginx-autoindex-format-xml-synthetic.xml", NULL, url,
	    &fmt, NULL);
	is_int(fmt, PAGE_NGINX_XML, "xml by body: format");
	check_mp("xml by body", l);
	listing_free(l);

	/*
	 * nginx's XML autoindex writes a control character of a name as it
	 * is, which XML 1.0 forbids: the page fails, and says why.
	 */
	{
		static const char bad[] = "<?xml version=\"1.0\"?>\n<list>\n"
		    "<file mtime=\"2020-01-01T10:00:00Z\" size=\"1\">a\001b"
		    "</file>\n<file mtime=\"2020-01-01T10:00:00Z\" size=\"1\">"
		    "ok</file>\n</list>\n";
		char	 err[256];

		l = listing_new(100);
		is_int(list_http_parse((const uint8_t *)bad, sizeof(bad) - 1,
		    "text/xml", url, "", l, NULL, NULL, err, sizeof(err)),
		    BM_EPROTO, "xml with a control character: BM_EPROTO");
		is_str(err, "not an index page: malformed XML",
		    "xml with a control character: reason");
		is_int(listing_count(l), 0, "xml with a control character: "
		    "nothing appended");
		listing_free(l);
	}
}

static void
check_iis(const char *file, const char *url, const struct exp_row *rows,
    size_t n)
{
	struct listing		*l;
	enum page_format	 fmt = PAGE_GENERIC;
	size_t			 i;

	l = parse_file(file, "text/html", url, &fmt, NULL);
	is_int(fmt, PAGE_IIS, "%s: format", file);
	is_int(listing_count(l), n, "%s: entry count", file);
	for (i = 0; i < n; i++)
		check_row(file, l, &rows[i], 0);
	listing_free(l);
}

static void
test_iis(void)
{
	check_iis("iis-dirbrowse-digi-ftp1.html",
	    "http://ftp1.digi.com/support/firmware/branded/sieH7/latest/",
	    iis_digi, 3);
	check_iis("iis-dirbrowse-ilga-jcar.html",
	    "https://www.ilga.gov/ftp/JCAR/AdminCode/001/", iis_ilga, 2);
	check_iis("iis-dirbrowse-nemweb-longdate.html",
	    "https://nemweb.com.au/Reports/Current/ROOFTOP_PV/ACTUAL/",
	    iis_nemweb, 1);
}

/* Spot checks LISTINGS.md calls out, beyond the sidecar columns. */
static void
test_specials(void)
{
	struct listing		*l;
	const struct entry	*e;
	enum page_format	 fmt;
	size_t			 skipped = 99;

	l = parse_file("nginx-autoindex-monitoring-plugins.html", NULL,
	    "https://www.monitoring-plugins.org/monitoring-plugins/", &fmt,
	    &skipped);
	is_int(skipped, 0, "nginx: nothing hostile skipped");
	listing_free(l);

	l = parse_file("apache-plain-ul-debian.html", NULL,
	    "http://deb.debian.org/debian/", &fmt, NULL);
	e = find(l, "README");
	ok(e != NULL && e->size == -1 && e->mtime_prec == MTIME_UNKNOWN,
	    "ul: no size, no date (not 0, not 1970)");
	listing_free(l);

	l = parse_file("caddy-v1-rclone-fixture.html", NULL,
	    "http://localhost:8080/", &fmt, NULL);
	e = find(l, "v1.36-22-g06ea13a-ssh-agent\xce\xb2");
	ok(e != NULL && e->type == ENTRY_DIR, "caddy1: UTF-8 name decoded");
	listing_free(l);

	/* Apache IconsAreLinks: icon link then name link, one entry. */
	l = listing_new(100);
	{
		const char *page = "<html><head><title>Index of /p</title>"
		    "</head><body><pre><a href=\"?C=N;O=D\">Name</a>\n<hr>"
		    "<a href=\"x.gz\"><img src=\"/i.gif\" alt=\"[ ]\"></a> "
		    "<a href=\"x.gz\">x.gz</a>  2017-08-01 11:41  2.3K  \n"
		    "<a href=\"d/\"><img src=\"/i.gif\" alt=\"[DIR]\"></a> "
		    "<a href=\"d/\">d/</a>  2017-08-01 11:42    -   \n"
		    "</pre></body></html>";

		is_int(list_http_parse((const uint8_t *)page, strlen(page),
		    NULL, "http://h/p/", "", l, &fmt, NULL, NULL, 0), 0,
		    "icons: parse");
		is_int(fmt, PAGE_APACHE_PRE, "icons: apache pre");
		is_int(listing_count(l), 2, "icons: one entry per row");
		e = find(l, "x.gz");
		ok(e != NULL && e->size_min == 2304 && e->size_max == 2406 &&
		    e->mtime_prec == MTIME_MINUTE, "icons: data merged");
	}
	listing_free(l);

	/* IIS <dir> rows. */
	l = listing_new(100);
	{
		const char *page = "<html><body><pre><A HREF=\"/\">"
		    "[To Parent Directory]</A><br><br> 1/2/2020 3:04 PM "
		    "&lt;dir&gt; <A HREF=\"/x/sub\">sub</A><br></pre>"
		    "</body></html>";

		is_int(list_http_parse((const uint8_t *)page, strlen(page),
		    NULL, "http://h/x/", "", l, &fmt, NULL, NULL, 0), 0,
		    "iis dir: parse");
		e = listing_count(l) == 1 ? listing_get(l, 0) : NULL;
		ok(e != NULL && e->type == ENTRY_DIR &&
		    strcmp(e->path, "sub") == 0, "iis: <dir> is a directory");
	}
	listing_free(l);

	/*
	 * "182.9" bytes: no byte count rounds to that, so the size stays
	 * unknown, never a range with min > max (found by
	 * tests/fuzz/fuzz_list_http).
	 */
	l = listing_new(100);
	{
		const char *page = "<pre><br>2-Nov-20231:182.9<a href=m";

		is_int(list_http_parse((const uint8_t *)page, strlen(page),
		    NULL, "http://h/p/", "", l, &fmt, NULL, NULL, 0), 0,
		    "fractional bytes: parse");
		e = find(l, "m");
		ok(e != NULL && e->size == -1 && e->size_min == -1 &&
		    e->size_max == -1 && !e->size_exact,
		    "fractional bytes: size unknown");
	}
	listing_free(l);

	/* A prefix is prepended to every path. */
	l = listing_new(100);
	{
		const char *page = "<html><body><pre><a href=\"../\">../</a>\n"
		    "<a href=\"x.txt\">x.txt</a>  01-Jan-2020 00:00  5\n"
		    "</pre></body></html>";

		is_int(list_http_parse((const uint8_t *)page, strlen(page),
		    NULL, "http://h/a/b/", "a/b", l, &fmt, NULL, NULL, 0), 0,
		    "prefix parse");
		is_int(listing_count(l), 1, "prefix count");
		if (listing_count(l) == 1)
			is_str(listing_get(l, 0)->path, "a/b/x.txt",
			    "prefix + name");
	}
	listing_free(l);
}

static void
test_hostile(void)
{
	struct listing		*l = listing_new(100);
	enum page_format	 fmt;
	size_t			 skipped = 0;
	char			 page[4096], longname[300];
	const struct entry	*e;

	memset(longname, 'a', 256);
	longname[256] = '\0';
	snprintf(page, sizeof(page),
	    "<html><head><title>Index of /d/</title></head><body><ul>"
	    "<li><a href=\"../\">up</a></li>"
	    "<li><a href=\"?C=N;O=D\">sort</a></li>"
	    "<li><a href=\"#top\">frag</a></li>"
	    "<li><a href=\"javascript:void(0)\">js</a></li>"
	    "<li><a href=\"/\">root</a></li>"
	    /* hostile: each is skipped and counted */
	    "<li><a href=\"../x\">1</a></li>"
	    "<li><a href=\"/etc/x\">2</a></li>"
	    "<li><a href=\"a/../../x\">3</a></li>"
	    "<li><a href=\"%%2e%%2e\">4</a></li>"
	    "<li><a href=\"%%2E%%2E/\">5</a></li>"
	    "<li><a href=\"x%%00y\">6</a></li>"
	    "<li><a href=\"http://other.host/d/x\">7</a></li>"
	    "<li><a href=\"%%01ctl\">8</a></li>"
	    "<li><a href=\"%s\">9</a></li>"
	    "<li><a href=\"a/b\">10</a></li>"
	    "<li><a href=\"bad%%zz\">11</a></li>"
	    "<li><a href=\"%%2e\">12</a></li>"
	    /* good */
	    "<li><a href=\"good\">good</a></li>"
	    "<li><a href=\"%%2525\">pct</a></li>"
	    "<li><a href=\"a+b\">plus</a></li>"
	    "<li><a href=\"sub/\">sub/</a></li>"
	    "<li><a href=\"http://EXAMPLE.org/d/abs\">abs</a></li>"
	    "<li><a href=\"/d/rooted\">rooted</a></li>"
	    "<li><a href=\"./dot\">dot</a></li>"
	    "<li><a href=\"good\">again</a></li>"
	    "</ul></body></html>", longname);
	is_int(list_http_parse((const uint8_t *)page, strlen(page), NULL,
	    "http://example.org/d/", "", l, &fmt, &skipped, NULL, 0), 0,
	    "hostile page parses");
	is_int(skipped, 12, "12 hostile hrefs skipped and counted");
	is_int(listing_count(l), 7, "7 good entries (dup dropped)");
	ok(find(l, "good") != NULL, "good kept");
	ok(find(l, "%25") != NULL, "%%2525 decoded once to %%25");
	ok(find(l, "a+b") != NULL, "+ stays +");
	e = find(l, "sub");
	ok(e != NULL && e->type == ENTRY_DIR, "sub/ is a directory");
	ok(find(l, "abs") != NULL, "absolute URL under the page kept");
	ok(find(l, "rooted") != NULL, "absolute path under the page kept");
	ok(find(l, "dot") != NULL, "./dot kept");
	ok(find(l, "..") == NULL && find(l, "x") == NULL, "nothing escaped");
	listing_free(l);

	/* JSON names with '/' or control bytes are skipped too. */
	l = listing_new(100);
	{
		const char *js = "[{\"name\":\"../x\",\"type\":\"file\"},"
		    "{\"name\":\"a\\u0001\",\"type\":\"file\"},"
		    "{\"name\":\"s\",\"type\":\"other\"},"
		    "{\"name\":\"ok\",\"type\":\"file\",\"size\":3}]";

		skipped = 0;
		is_int(list_http_parse((const uint8_t *)js, strlen(js), NULL,
		    "http://h/", "", l, &fmt, &skipped, NULL, 0), 0,
		    "hostile json parses");
		is_int(skipped, 2, "json: 2 hostile names skipped");
		is_int(listing_count(l), 1, "json: one good entry");
	}
	listing_free(l);

	/* Not a listing at all. */
	l = listing_new(100);
	is_int(list_http_parse((const uint8_t *)"[1,", 3, "application/json",
	    "http://h/", "", l, &fmt, NULL, NULL, 0), BM_EPROTO,
	    "bad json -> BM_EPROTO");
	listing_free(l);

	/* The cap holds. */
	l = listing_new(2);
	{
		const char *p3 = "<pre><a href=\"a\">a</a>\n<a href=\"b\">b</a>"
		    "\n<a href=\"c\">c</a>\n</pre>";

		is_int(list_http_parse((const uint8_t *)p3, strlen(p3), NULL,
		    "http://h/", "", l, &fmt, NULL, NULL, 0), BM_ELIMIT,
		    "max_entries -> BM_ELIMIT");
	}
	listing_free(l);
}

/* The store's temp-file prefix is a hostile name in every format. */
static void
test_tmp_prefix(void)
{
	static const char html[] = "<html><head><title>Index of /d/</title>"
	    "</head><body><h1>Index of /d/</h1><hr><pre>"
	    "<a href=\"../\">../</a>\n"
	    "<a href=\".biomirror-tmp.0a1b2c3d\">.biomirror-tmp.0a1b2c3d</a>"
	    "  01-Jan-2020 10:00   5\n"
	    "<a href=\".biomirror-tmp.x/\">.biomirror-tmp.x/</a>"
	    "  01-Jan-2020 10:00   -\n"
	    "<a href=\"%2ebiomirror-tmp.y\">%2ebiomirror-tmp.y</a>"
	    "  01-Jan-2020 10:00   5\n"
	    "<a href=\".biomirror-tmpz\">.biomirror-tmpz</a>"
	    "  01-Jan-2020 10:00   5\n"
	    "</pre><hr></body></html>";
	static const char js[] = "[{\"name\":\".biomirror-tmp.1\","
	    "\"type\":\"file\",\"size\":1},"
	    "{\"name\":\"ok\",\"type\":\"file\",\"size\":3}]";
	struct listing	*l = listing_new(100);
	size_t		 skipped = 0;

	is_int(list_http_parse((const uint8_t *)html, strlen(html),
	    "text/html", "http://h/d/", "", l, NULL, &skipped, NULL, 0), 0,
	    "tmp prefix: page parses");
	is_int(skipped, 3, "tmp prefix: 3 names skipped as hostile");
	is_int(listing_count(l), 1, "tmp prefix: only the near miss kept");
	ok(find(l, ".biomirror-tmpz") != NULL, "tmp prefix: near miss kept");
	listing_free(l);

	l = listing_new(100);
	skipped = 0;
	is_int(list_http_parse((const uint8_t *)js, strlen(js), NULL,
	    "http://h/d/", "", l, NULL, &skipped, NULL, 0), 0,
	    "tmp prefix: json parses");
	is_int(skipped, 1, "tmp prefix: json name skipped as hostile");
	is_int(listing_count(l), 1, "tmp prefix: json keeps ok");
	listing_free(l);
}

/* nginx autoindex of an empty directory (1.22, default settings). */
static const char empty_nginx[] =
    "<html>\r\n"
    "<head><title>Index of /pub/empty/</title></head>\r\n"
    "<body>\r\n"
    "<h1>Index of /pub/empty/</h1><hr><pre><a href=\"../\">../</a>\r\n"
    "</pre><hr></body>\r\n"
    "</html>\r\n";

/* Apache 2.4 mod_autoindex FancyIndexing of an empty directory. */
static const char empty_apache[] =
    "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final//EN\">\n"
    "<html>\n"
    " <head>\n"
    "  <title>Index of /pub/empty</title>\n"
    " </head>\n"
    " <body>\n"
    "<h1>Index of /pub/empty</h1>\n"
    "<pre><img src=\"/icons/blank.gif\" alt=\"Icon \"> "
    "<a href=\"?C=N;O=D\">Name</a>                    "
    "<a href=\"?C=M;O=A\">Last modified</a>      "
    "<a href=\"?C=S;O=A\">Size</a>  "
    "<a href=\"?C=D;O=A\">Description</a><hr>"
    "<img src=\"/icons/back.gif\" alt=\"[PARENTDIR]\"> "
    "<a href=\"/pub/\">Parent Directory</a>"
    "                             -   \n"
    "<hr></pre>\n"
    "<address>Apache/2.4.62 (Debian) Server at h.example Port 80"
    "</address>\n"
    "</body></html>\n";

/* Apache without FancyIndexing: a plain <ul>, only the parent in it. */
static const char empty_apache_ul[] =
    "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final//EN\">\n"
    "<html>\n <head>\n  <title>Index of /pub/empty</title>\n </head>\n"
    " <body>\n<h1>Index of /pub/empty</h1>\n"
    "<ul><li><a href=\"/pub/\"> Parent Directory</a></li>\n"
    "</ul>\n</body></html>\n";

/*
 * A listed 0 (issue 22): a hint in an HTML index (nginx, Apache), the
 * size then unknown and shown as "0"; a fact in nginx JSON and XML.
 */
static void
test_zero(void)
{
	static const char *html =
	    "<html><head><title>Index of /d/</title></head><body>"
	    "<h1>Index of /d/</h1><hr><pre><a href=\"../\">../</a>\n"
	    "<a href=\"grow.log\">grow.log</a>"
	    "                                           01-Jun-2026 10:00"
	    "                   0\n"
	    "<a href=\"one.txt\">one.txt</a>"
	    "                                            01-Jun-2026 10:00"
	    "                   1\n"
	    "</pre><hr></body></html>\n";
	static const char *feb30 =
	    "<html><head><title>Index of /d/</title></head><body>"
	    "<h1>Index of /d/</h1><hr><pre><a href=\"../\">../</a>\n"
	    "<a href=\"feb30.txt\">feb30.txt</a>"
	    "                                          30-Feb-2026 10:00"
	    "                   5\n"
	    "<a href=\"leap.txt\">leap.txt</a>"
	    "                                           29-Feb-2024 10:00"
	    "                   5\n"
	    "<a href=\"one.txt\">one.txt</a>"
	    "                                            01-Jun-2026 10:00"
	    "                   1\n"
	    "</pre><hr></body></html>\n";
	static const char *json =
	    "[{ \"name\":\"grow.log\", \"type\":\"file\", "
	    "\"mtime\":\"Mon, 01 Jun 2026 10:00:00 GMT\", \"size\":0 }]";
	static const char *xml = "<?xml version=\"1.0\"?>\n<list>"
	    "<file mtime=\"2026-06-01T10:00:00Z\" size=\"0\">grow.log</file>"
	    "</list>\n";
	struct listing	*l;
	const struct entry *e;
	enum page_format fmt;
	char		 err[256] = "";

	l = listing_new(10);
	is_int(list_http_parse((const uint8_t *)html, strlen(html),
	    "text/html", "http://h/d/", "", l, &fmt, NULL, err, sizeof(err)),
	    0, "zero html: parsed (%s)", err);
	is_str(page_format_name(fmt), "nginx", "zero html: nginx page");
	e = find(l, "grow.log");
	ok(e != NULL && e->size == -1 && !e->size_exact && e->size_min == -1,
	    "zero html: a listed 0 is a hint (size unknown)");
	is_str(e ? e->size_display : NULL, "0", "zero html: shown as 0");
	e = find(l, "one.txt");
	ok(e != NULL && e->size == 1 && e->size_exact, "zero html: 1 exact");
	listing_free(l);
	/* A day the month does not have: kept, with no date (not 2 Mar). */
	l = listing_new(10);
	is_int(list_http_parse((const uint8_t *)feb30, strlen(feb30),
	    "text/html", "http://h/d/", "", l, NULL, NULL, err, sizeof(err)),
	    0, "feb30 html: parsed (%s)", err);
	e = find(l, "feb30.txt");
	ok(e != NULL && e->mtime_prec == MTIME_UNKNOWN && e->size == 5 &&
	    e->size_exact, "feb30 html: 30-Feb-2026 is no date; size kept");
	e = find(l, "leap.txt");
	ok(e != NULL && e->mtime_prec == MTIME_MINUTE,
	    "feb30 html: 29-Feb-2024 is a date");
	listing_free(l);
	l = listing_new(10);
	is_int(list_http_parse((const uint8_t *)json, strlen(json),
	    "application/json", "http://h/d/", "", l, NULL, NULL, err,
	    sizeof(err)), 0, "zero json: parsed");
	e = find(l, "grow.log");
	ok(e != NULL && e->size == 0 && e->size_exact,
	    "zero json: size 0 exact (a fact)");
	listing_free(l);
	l = listing_new(10);
	is_int(list_http_parse((const uint8_t *)xml, strlen(xml),
	    "text/xml", "http://h/d/", "", l, NULL, NULL, err, sizeof(err)),
	    0, "zero xml: parsed");
	e = find(l, "grow.log");
	ok(e != NULL && e->size == 0 && e->size_exact,
	    "zero xml: size 0 exact (a fact)");
	listing_free(l);
}

/* Parse body (len bytes) as text/html at http://h/pub/empty/. */
static int
parse_page(const char *body, size_t len, struct listing *l, char *err,
    size_t errlen)
{
	err[0] = '\0';
	return list_http_parse((const uint8_t *)body, len,
	    "text/html; charset=utf-8", "http://h/pub/empty/", "pub/empty", l,
	    NULL, NULL, err, errlen);
}

/* An empty index is 0 entries; a page with no links at all is an error. */
/*
 * Every HTML fixture cut short (at 90% of its bytes: at a line end, and
 * in the middle of a line), as a proxy or a server that closes the
 * connection early would deliver it: refused as incomplete, never a
 * smaller listing (its missing files would be taken as gone upstream).
 */
static void
test_cut_pages(void)
{
	struct listing	*l;
	char		 path[256], err[256];
	char		*body;
	size_t		 len, cut, f, k;
	int		 rc;

	for (f = 0; f < sizeof(html_fixtures) / sizeof(html_fixtures[0]);
	    f++) {
		snprintf(path, sizeof(path), FIX "%s.html",
		    html_fixtures[f].file);
		if ((body = slurp(path, &len)) == NULL) {
			ok(0, "%s: read fixture", path);
			continue;
		}
		for (k = 0; k < 2; k++) {
			cut = len * 9 / 10;
			while (k == 0 && cut > 0 && body[cut - 1] != '\n')
				cut--;
			while (k == 1 && cut > 0 && (body[cut - 1] == '\n' ||
			    body[cut] == '\n'))
				cut--;
			l = listing_new(10000);
			err[0] = '\0';
			rc = list_http_parse((const uint8_t *)body, cut,
			    "text/html", html_fixtures[f].url, "", l, NULL,
			    NULL, err, sizeof(err));
			is_int(rc, BM_EPROTO, "%s cut at %zu of %zu (%s): "
			    "refused", html_fixtures[f].file, cut, len,
			    k ? "mid-line" : "line end");
			ok(strstr(err, "incomplete index page") != NULL,
			    "%s cut: message (%s)", html_fixtures[f].file, err);
			is_int(listing_count(l), 0, "%s cut: no entries",
			    html_fixtures[f].file);
			listing_free(l);
		}
		free(body);
	}
}

/* "x" and "x/" on one page: the first kept, the other counted skipped. */
static void
test_file_and_dir(void)
{
	static const char page[] = "<html><body><pre>"
	    "<a href=\"dup\">dup</a>\n<a href=\"dup/\">dup/</a>\n"
	    "<a href=\"x/\">x/</a>\n<a href=\"x\">x</a>\n"
	    "<a href=\"same\">same</a>\n<a href=\"same\">same</a>\n"
	    "</pre></body></html>";
	struct listing	*l = listing_new(100);
	char		 err[256] = "";
	size_t		 skipped = 0;

	is_int(list_http_parse((const uint8_t *)page, strlen(page),
	    "text/html", "http://h/", "", l, NULL, &skipped, err,
	    sizeof(err)), 0, "file and directory of one name: rc 0 (%s)", err);
	is_int(listing_count(l), 3, "file and directory: one entry each name");
	ok(find(l, "dup") != NULL && find(l, "dup")->type == ENTRY_FILE,
	    "dup: the first (a file) kept");
	ok(find(l, "x") != NULL && find(l, "x")->type == ENTRY_DIR,
	    "x: the first (a directory) kept");
	is_int(skipped, 2, "file and directory: the other two counted "
	    "skipped (a name listed twice alike is not)");
	listing_free(l);
}

static void
test_not_index(void)
{
	static const char *const junk[] = {
		"",
		" \r\n\t\n",
		"<html><body><p>Service temporarily unavailable</p></body>"
		"</html>",
		"<!DOCTYPE html><html><head><title>Welcome</title></head>"
		"<body></body></html>",
		"Forbidden\n",
	};
	struct listing	*l;
	char		 err[256], rnd[3000];
	uint32_t	 x = 12345;
	size_t		 i;

	l = listing_new(100);
	is_int(parse_page(empty_nginx, strlen(empty_nginx), l, err,
	    sizeof(err)), 0, "empty nginx autoindex: rc 0 (%s)", err);
	is_int(listing_count(l), 0, "empty nginx autoindex: 0 entries");
	is_int(parse_page(empty_apache, strlen(empty_apache), l, err,
	    sizeof(err)), 0, "empty Apache FancyIndex: rc 0 (%s)", err);
	is_int(listing_count(l), 0, "empty Apache FancyIndex: 0 entries");
	is_int(parse_page(empty_apache_ul, strlen(empty_apache_ul), l, err,
	    sizeof(err)), 0, "empty Apache <ul> index: rc 0 (%s)", err);
	is_int(listing_count(l), 0, "empty Apache <ul> index: 0 entries");
	/* Titled as an index but without even a parent link: still one. */
	is_int(parse_page("<title>Index of /</title><h1>Index of /</h1>",
	    44, l, err, sizeof(err)), 0, "\"Index of\" without links: rc 0");

	for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		is_int(parse_page(junk[i], strlen(junk[i]), l, err,
		    sizeof(err)), BM_EPROTO, "junk page %zu: BM_EPROTO", i);
		ok(strncmp(err, "not an ", 7) == 0, "junk page %zu: %s", i,
		    err);
	}
	/* 3000 random bytes served as text/html with status 200. */
	for (i = 0; i < sizeof(rnd); i++) {
		x = x * 1103515245u + 12345u;
		rnd[i] = (char)(x >> 16);
	}
	is_int(parse_page(rnd, sizeof(rnd), l, err, sizeof(err)), BM_EPROTO,
	    "3000 random bytes: BM_EPROTO");
	is_str(err, "not an index page: no links", "random bytes: reason");
	is_int(listing_count(l), 0, "nothing appended");
	listing_free(l);
}

/* In-memory web server for list_http_crawl(). */
struct fake_page {
	const char	*url;
	long		 status;	/* 0: transport failure */
	const char	*body;
	const char	*effective;	/* NULL: no redirect */
};

struct fake {
	const struct fake_page *pages;
	size_t		 n;
	size_t		 calls;		/* fetch callback calls */
	size_t		 fetched;	/* pages asked for */
	size_t		 max_batch;	/* largest batch seen */
	size_t		 fail_call;	/* this call (1-based) fails; 0: none */
};

static int
fake_fetch(void *ctx, struct http_page *pages, size_t n)
{
	struct fake	*f = ctx;
	size_t		 i, j;

	f->calls++;
	if (f->fail_call != 0 && f->calls == f->fail_call)
		return BM_ENET;
	f->fetched += n;
	if (n > f->max_batch)
		f->max_batch = n;
	for (i = 0; i < n; i++) {
		pages[i].status = 404;
		pages[i].body = (uint8_t *)strdup("not found");
		pages[i].len = 9;
		for (j = 0; j < f->n; j++) {
			if (strcmp(f->pages[j].url, pages[i].url) != 0)
				continue;
			free(pages[i].body);
			pages[i].body = NULL;
			pages[i].len = 0;
			if (f->pages[j].status == 0) {
				pages[i].rc = BM_ENET;
				pages[i].status = 0;
				snprintf(pages[i].errmsg,
				    sizeof(pages[i].errmsg), "connection reset");
				break;
			}
			pages[i].status = f->pages[j].status;
			pages[i].body = (uint8_t *)strdup(f->pages[j].body);
			pages[i].len = strlen(f->pages[j].body);
			pages[i].content_type = strdup("text/html");
			if (f->pages[j].effective != NULL)
				pages[i].effective_url =
				    strdup(f->pages[j].effective);
			break;
		}
	}
	return 0;
}

#define ROOT_PAGE "<html><head><title>Index of /src/</title></head><body>" \
	"<h1>Index of /src/</h1><hr><pre><a href=\"../\">../</a>\n"	\
	"<a href=\"a/\">a/</a>   01-Jan-2020 10:00   -\n"			\
	"<a href=\"b/\">b/</a>   01-Jan-2020 10:00   -\n"			\
	"<a href=\"f1\">f1</a>   02-Jan-2020 11:00   123\n"			\
	"</pre><hr></body></html>"

static const struct fake_page tree[] = {
	{ "http://h/src/", 200, ROOT_PAGE, NULL },
	{ "http://h/src/a/", 200, "<pre><a href=\"../\">../</a>\n"
	    "<a href=\"a%201\">a 1</a>   03-Jan-2020 12:00   7\n"
	    "<a href=\"c/\">c/</a>   01-Jan-2020 10:00   -\n</pre>", NULL },
	{ "http://h/src/a/c/", 200, "<pre><a href=\"../\">../</a>\n"
	    "<a href=\"deep\">deep</a>   04-Jan-2020 13:00   9\n</pre>",
	    NULL },
	/* b/ is a symlink to its parent: same entries as /src/. */
	{ "http://h/src/b/", 200, ROOT_PAGE, NULL },
};

static int
crawl(const struct fake_page *pages, size_t n, unsigned depth,
    const struct filter *flt, size_t batch, struct fake *f,
    struct listing *l, size_t *loops, char *err, size_t errlen)
{
	struct crawl_opts	 o;

	memset(&o, 0, sizeof(o));
	memset(f, 0, sizeof(*f));
	f->pages = pages;
	f->n = n;
	o.filter = flt;
	o.max_depth = depth;
	o.max_entries = 0;
	o.batch = batch;
	o.ret_loops = loops;
	return list_http_crawl("http://h/src/", &o, fake_fetch, f, l, err,
	    errlen);
}

static void
test_crawl(void)
{
	struct listing		*l;
	struct fake		 f;
	const struct entry	*e;
	char			 err[256];
	size_t			 loops = 99;
	const char		*exc[] = { "c/" };
	struct filter		 flt = { NULL, 0, exc, 1 };
	struct fake_page	 bad[4];

	/* 3-level tree with a symlink loop at b/. */
	l = listing_new(1000);
	is_int(crawl(tree, 4, 10, NULL, 2, &f, l, &loops, err, sizeof(err)),
	    0, "crawl: complete");
	is_int(listing_count(l), 6, "crawl: 6 entries");
	ok(find(l, "a") && find(l, "b") && find(l, "f1") &&
	    find(l, "a/a 1") && find(l, "a/c") && find(l, "a/c/deep"),
	    "crawl: every level listed");
	e = find(l, "a/c");
	ok(e != NULL && e->type == ENTRY_DIR, "crawl: dirs are entries");
	e = find(l, "f1");
	ok(e != NULL && e->size == 123 && e->size_exact, "crawl: sizes kept");
	ok(find(l, "b/a") == NULL && find(l, "b/f1") == NULL,
	    "crawl: loop directory adds nothing");
	is_int(loops, 1, "crawl: one loop detected");
	is_int(f.fetched, 4, "crawl: 4 pages fetched (loop not descended)");
	ok(f.max_batch <= 2, "crawl: batches of at most 2");
	listing_free(l);

	/* Depth limit: a/c is listed as a directory but not entered. */
	l = listing_new(1000);
	is_int(crawl(tree, 4, 1, NULL, 8, &f, l, NULL, err, sizeof(err)),
	    BM_ELIMIT, "depth 1: BM_ELIMIT (incomplete)");
	ok(find(l, "a/c") != NULL && find(l, "a/c/deep") == NULL,
	    "depth 1: a/c not descended");
	listing_free(l);

	/* Filter: exclude "c/" keeps the crawl out of a/c. */
	l = listing_new(1000);
	is_int(crawl(tree, 4, 10, &flt, 1, &f, l, NULL, err, sizeof(err)), 0,
	    "filter: complete");
	ok(find(l, "a/c") == NULL && find(l, "a/c/deep") == NULL,
	    "filter: excluded dir neither listed nor entered");
	is_int(f.fetched, 3, "filter: a/c/ never fetched");
	is_int(f.max_batch, 1, "filter: batch 1");
	listing_free(l);

	/* A failing page: 404 -> BM_ENOENT, the rest still listed. */
	memcpy(bad, tree, sizeof(bad));
	bad[2].status = 404;
	l = listing_new(1000);
	is_int(crawl(bad, 4, 10, NULL, 4, &f, l, NULL, err, sizeof(err)),
	    BM_ENOENT, "404: BM_ENOENT");
	ok(strncmp(err, "http://h/src/a/c/: ", 19) == 0, "404: errbuf %s",
	    err);
	ok(find(l, "a/a 1") != NULL, "404: other pages still listed");
	listing_free(l);

	bad[2].status = 500;
	l = listing_new(1000);
	is_int(crawl(bad, 4, 10, NULL, 4, &f, l, NULL, err, sizeof(err)),
	    BM_EHTTP, "500: BM_EHTTP");
	listing_free(l);

	bad[2].status = 0;
	l = listing_new(1000);
	is_int(crawl(bad, 4, 10, NULL, 4, &f, l, NULL, err, sizeof(err)),
	    BM_ENET, "transport: BM_ENET");
	listing_free(l);

	/* Redirect off the source fails that page. */
	memcpy(bad, tree, sizeof(bad));
	bad[1].effective = "http://evil.example/a/";
	l = listing_new(1000);
	is_int(crawl(bad, 4, 10, NULL, 4, &f, l, NULL, err, sizeof(err)),
	    BM_EPROTO, "redirect elsewhere: BM_EPROTO");
	ok(find(l, "a/a 1") == NULL, "redirect elsewhere: not listed");
	listing_free(l);

	/* Redirect within the source is followed. */
	bad[1].effective = "http://h/src/a/";
	l = listing_new(1000);
	is_int(crawl(bad, 4, 10, NULL, 4, &f, l, NULL, err, sizeof(err)), 0,
	    "redirect inside: ok");
	listing_free(l);

	/* A junk page under the source fails the crawl, not empties a dir. */
	memcpy(bad, tree, sizeof(bad));
	bad[2].body = "<html><body>Gateway busy</body></html>";
	l = listing_new(1000);
	is_int(crawl(bad, 4, 10, NULL, 4, &f, l, NULL, err, sizeof(err)),
	    BM_EPROTO, "junk page: BM_EPROTO (listing failed)");
	is_str(err, "http://h/src/a/c/: not an index page: no links",
	    "junk page: errbuf");
	ok(find(l, "a/a 1") != NULL, "junk page: other pages still listed");
	listing_free(l);

	/* The root page failing. */
	l = listing_new(1000);
	is_int(crawl(tree, 0, 10, NULL, 4, &f, l, NULL, err, sizeof(err)),
	    BM_ENOENT, "root 404: BM_ENOENT");
	is_int(listing_count(l), 0, "root 404: empty");
	listing_free(l);
}

/*
 * A wide tree (a root of WIDE directories of 30 files each) crawled with
 * one page per fetch (parsed inline) and with every directory in one batch
 * (parsed on the crawl's parser threads when there are two CPUs or more):
 * the same entries in the same order, the same first failure, the same
 * entry cap.
 */
#define WIDE	40
static char	*wide_bodies[WIDE + 1];
static char	 wide_urls[WIDE + 1][32];

static void
wide_tree(struct fake_page *pg)
{
	char	*b;
	size_t	 cap = 8192, len;
	int	 d, i;

	for (d = 0; d <= WIDE; d++) {
		if (wide_bodies[d] == NULL && (wide_bodies[d] = malloc(cap)) == NULL)
			abort();
		b = wide_bodies[d];
		len = (size_t)snprintf(b, cap, "<html><head><title>Index of "
		    "x</title></head><body><pre><a href=\"../\">../</a>\n");
		for (i = 0; i < (d == 0 ? WIDE : 30); i++)
			len += (size_t)snprintf(b + len, cap - len, d == 0 ?
			    "<a href=\"d%02d/\">d%02d/</a> 01-Jan-2020 10:00 -\n" :
			    "<a href=\"f%02d\">f%02d</a> 02-Jan-2020 11:%02d 1%02d\n",
			    i, i, i, i);
		(void)snprintf(b + len, cap - len, "</pre></body></html>");
		if (d == 0)
			(void)snprintf(wide_urls[d], sizeof(wide_urls[d]),
			    "http://h/src/");
		else
			(void)snprintf(wide_urls[d], sizeof(wide_urls[d]),
			    "http://h/src/d%02d/", d - 1);
		pg[d].url = wide_urls[d];
		pg[d].status = 200;
		pg[d].body = b;
		pg[d].effective = NULL;
	}
}

static void	wide_cmp(struct listing *, struct listing *, int, int,
		    const char *, const char *, int, const char *,
		    const char *);

/*
 * Crawl pg with batch 1, with batch WIDE and with batches of 8: all give
 * the same.
 */
static void
wide_same(const struct fake_page *pg, size_t max, int want_rc,
    const char *want_err, const char *what)
{
	struct listing	*l1 = listing_new(max), *l2 = listing_new(max);
	struct fake	 f;
	char		 e1[256], e2[256];
	int		 r1, r2;

	r1 = crawl(pg, WIDE + 1, 10, NULL, 1, &f, l1, NULL, e1, sizeof(e1));
	is_int(f.max_batch, 1, "%s: batch 1", what);
	r2 = crawl(pg, WIDE + 1, 10, NULL, WIDE, &f, l2, NULL, e2, sizeof(e2));
	is_int(f.max_batch, WIDE, "%s: batch of %d pages", what, WIDE);
	wide_cmp(l1, l2, r1, r2, e1, e2, want_rc, want_err, what);
	listing_free(l2);
	/* Batches of 8: several pooled batches in a row. */
	l2 = listing_new(max);
	r2 = crawl(pg, WIDE + 1, 10, NULL, 8, &f, l2, NULL, e2, sizeof(e2));
	is_int(f.max_batch, 8, "%s: batches of 8", what);
	ok(f.calls <= 1 + WIDE / 8, "%s: no more fetches than batches (%zu)",
	    what, f.calls);
	wide_cmp(l1, l2, r1, r2, e1, e2, want_rc, want_err, what);
	listing_free(l1);
	listing_free(l2);
}

/* The two crawls' results are the same and as wanted. */
static void
wide_cmp(struct listing *l1, struct listing *l2, int r1, int r2,
    const char *e1, const char *e2, int want_rc, const char *want_err,
    const char *what)
{
	size_t		 i, n;
	bool		 same = true;

	is_int(r1, want_rc, "%s: one page per batch: rc", what);
	is_int(r2, want_rc, "%s: batched: rc", what);
	is_str(e1, want_err, "%s: one page per batch: first failure", what);
	is_str(e2, want_err, "%s: batched: the same first failure", what);
	n = listing_count(l1);
	is_int(listing_count(l2), n, "%s: the same count (%zu)", what, n);
	for (i = 0; i < n && i < listing_count(l2); i++)
		if (strcmp(listing_get(l1, i)->path,
		    listing_get(l2, i)->path) != 0 ||
		    listing_get(l1, i)->size != listing_get(l2, i)->size ||
		    listing_get(l1, i)->mtime_wall !=
		    listing_get(l2, i)->mtime_wall)
			same = false;
	ok(same, "%s: the same entries in the same order", what);
}

static void
test_crawl_wide(void)
{
	struct fake_page pg[WIDE + 1];
	struct listing	*l;
	struct fake	 f;
	char		 err[256];
	int		 d;

	wide_tree(pg);
	l = listing_new(100000);
	is_int(crawl(pg, WIDE + 1, 10, NULL, WIDE, &f, l, NULL, err,
	    sizeof(err)), 0, "wide: complete");
	is_int(listing_count(l), WIDE + WIDE * 30, "wide: every entry");
	ok(strcmp(listing_get(l, WIDE)->path, "d00/f00") == 0 &&
	    strcmp(listing_get(l, WIDE + WIDE * 30 - 1)->path,
	    "d39/f29") == 0, "wide: pages taken in page order");
	listing_free(l);

	wide_same(pg, 100000, 0, "", "wide");
	/* Failures on pages 7 (404), 12 (junk) and 30 (reset). */
	pg[8].status = 404;
	pg[13].body = "<html><body>Gateway busy</body></html>";
	pg[31].status = 0;
	wide_same(pg, 100000, BM_ENOENT,
	    "http://h/src/d07/: HTTP status 404", "wide, three bad pages");
	wide_tree(pg);
	/* The cap is reached on the 11th directory's page. */
	wide_same(pg, WIDE + 10 * 30 + 5, BM_ELIMIT,
	    "http://h/src/d10/: limit exceeded", "wide, entry cap");
	/*
	 * The entry cap counts a duplicate link the parser appended before
	 * dropping it, whatever the batch: b/ lists g1, g2 and g1 again, 3
	 * entries at most, with room for 2 left (cap 6).
	 */
	{
		static const struct fake_page dup[] = {
			{ "http://h/src/", 200, "<pre><a href=\"a/\">a/</a> "
			    "01-Jan-2020 10:00 -\n<a href=\"b/\">b/</a> "
			    "01-Jan-2020 10:00 -\n</pre>", NULL },
			{ "http://h/src/a/", 200, "<pre><a href=\"f1\">f1</a> "
			    "01-Jan-2020 10:00 1\n<a href=\"f2\">f2</a> "
			    "01-Jan-2020 10:00 2\n</pre>", NULL },
			{ "http://h/src/b/", 200, "<pre><a href=\"g1\">g1</a> "
			    "01-Jan-2020 10:00 1\n<a href=\"g2\">g2</a> "
			    "01-Jan-2020 10:00 2\n<a href=\"g1\">g1</a> "
			    "01-Jan-2020 10:00 1\n</pre>", NULL },
		};
		size_t	 batches[] = { 1, 2, 8 }, b;

		for (b = 0; b < 3; b++) {
			l = listing_new(6);
			is_int(crawl(dup, 3, 10, NULL, batches[b], &f, l, NULL,
			    err, sizeof(err)), BM_ELIMIT,
			    "cap with a duplicate, batch %zu: BM_ELIMIT",
			    batches[b]);
			is_str(err, "http://h/src/b/: limit exceeded",
			    "cap with a duplicate, batch %zu: errbuf",
			    batches[b]);
			is_int(listing_count(l), 4,
			    "cap with a duplicate, batch %zu: root and a/",
			    batches[b]);
			listing_free(l);
		}
	}

	/*
	 * The 4th fetch call fails (dirs d16..d23, in batches of 8): what
	 * came before is taken, in order, and the failure is the crawl's.
	 */
	l = listing_new(100000);
	memset(&f, 0, sizeof(f));
	f.pages = pg;
	f.n = WIDE + 1;
	f.fail_call = 4;
	{
		struct crawl_opts o;

		memset(&o, 0, sizeof(o));
		o.max_depth = 10;
		o.max_entries = 0;
		o.batch = 8;
		is_int(list_http_crawl("http://h/src/", &o, fake_fetch, &f, l,
		    err, sizeof(err)), BM_ENET, "wide, 4th fetch fails: rc");
	}
	is_str(err, "http://h/src/d16/: fetch failed",
	    "wide, 4th fetch fails: errbuf");
	is_int(listing_count(l), WIDE + 16 * 30,
	    "wide, 4th fetch fails: root and two batches taken");
	ok(listing_count(l) == WIDE + 16 * 30 &&
	    strcmp(listing_get(l, WIDE + 16 * 30 - 1)->path, "d15/f29") == 0,
	    "wide, 4th fetch fails: in page order");
	listing_free(l);
	for (d = 0; d <= WIDE; d++) {
		free(wide_bodies[d]);
		wide_bodies[d] = NULL;
	}
}

/* A drain that moves every batch into a listing of its own. */
struct drained {
	struct listing	*all;		/* the entries, in the order drained */
	size_t		 calls;		/* drain calls */
	size_t		 most;		/* the largest batch */
};

static int
drain_into(void *ctx, struct listing *l)
{
	struct drained	*d = ctx;
	struct entry	*e;
	size_t		 i;

	d->calls++;
	if (listing_count(l) > d->most)
		d->most = listing_count(l);
	for (i = 0; i < listing_count(l); i++)
		if (listing_append(d->all, &e) != 0 ||
		    listing_entry_copy(e, listing_get(l, i)) != 0)
			return BM_ENOMEM;
	listing_drain(l);
	return 0;
}

/*
 * With a drain (issue 22) the crawl hands its entries on after each
 * batch, and within a page of more than a few thousand: the drained
 * entries are the listing a crawl without one makes, in its order.
 */
static void
test_crawl_drain(void)
{
	struct fake_page pg[WIDE + 1], big[1];
	struct crawl_opts o;
	struct drained	 d;
	struct listing	*l1 = listing_new(100000), *l2 = listing_new(100000);
	struct fake	 f;
	char		 e1[256], e2[256], *b;
	size_t		 cap = 20000 * 64, len, i;
	int		 r1, r2;

	wide_tree(pg);
	memset(&d, 0, sizeof(d));
	d.all = listing_new(100000);
	r1 = crawl(pg, WIDE + 1, 10, NULL, 8, &f, l1, NULL, e1, sizeof(e1));
	memset(&o, 0, sizeof(o));
	memset(&f, 0, sizeof(f));
	f.pages = pg;
	f.n = WIDE + 1;
	o.max_depth = 10;
	o.batch = 8;
	o.drain = drain_into;
	o.drain_ctx = &d;
	r2 = list_http_crawl("http://h/src/", &o, fake_fetch, &f, l2, e2,
	    sizeof(e2));
	ok(d.calls >= 1 + WIDE / 8, "drain: called per batch (%zu)", d.calls);
	is_int(listing_count(l2), 0, "drain: nothing left in out");
	is_int(listing_total(l2), listing_count(l1), "drain: all counted");
	wide_cmp(l1, d.all, r1, r2, e1, e2, 0, "", "drain");
	listing_free(l1);
	listing_free(l2);
	listing_free(d.all);

	/* One page of 20,000 files: handed on in pieces. */
	if ((b = malloc(cap)) == NULL)
		abort();
	len = (size_t)snprintf(b, cap, "<pre><a href=\"../\">../</a>\n");
	for (i = 0; i < 20000; i++)
		len += (size_t)snprintf(b + len, cap - len, "<a href=\"f%05zu\">"
		    "f%05zu</a> 02-Jan-2020 11:00 1\n", i, i);
	(void)snprintf(b + len, cap - len, "</pre>");
	big[0].url = "http://h/src/";
	big[0].status = 200;
	big[0].body = b;
	big[0].effective = NULL;
	l1 = listing_new(100000);
	l2 = listing_new(100000);
	memset(&d, 0, sizeof(d));
	d.all = listing_new(100000);
	r1 = crawl(big, 1, 10, NULL, 8, &f, l1, NULL, e1, sizeof(e1));
	memset(&f, 0, sizeof(f));
	f.pages = big;
	f.n = 1;
	r2 = list_http_crawl("http://h/src/", &o, fake_fetch, &f, l2, e2,
	    sizeof(e2));
	is_int(listing_count(l1), 20000, "big page: 20,000 entries");
	ok(d.calls >= 3, "big page: drained in pieces (%zu)", d.calls);
	ok(d.most <= 8192, "big page: at most 8,192 held (%zu)", d.most);
	wide_cmp(l1, d.all, r1, r2, e1, e2, 0, "", "big page drained");
	listing_free(l1);
	listing_free(l2);
	listing_free(d.all);
	free(b);
	for (i = 0; i <= WIDE; i++) {
		free(wide_bodies[i]);
		wide_bodies[i] = NULL;
	}
}

/*
 * A fetch that streams each page (http_page.stream) in 64 KiB pieces,
 * as the run's does, noting what the drain took meanwhile; the drain
 * and retract keep the drained entries in all.
 */
struct hand {
	struct fake	 f;
	struct listing	*all;		/* drained, not retracted */
	bool		 in_fetch;
	size_t		 during;	/* entries drained inside a fetch */
	size_t		 retracts;
	char		 last[64];	/* the last prefix retracted */
};

static int
hand_fetch(void *ctx, struct http_page *pages, size_t n)
{
	struct hand	*h = ctx;
	size_t		 i, off, k;
	int		 rc;

	if ((rc = fake_fetch(&h->f, pages, n)) != 0)
		return rc;
	h->in_fetch = true;
	for (i = 0; i < n; i++) {
		if (pages[i].stream == NULL || pages[i].status != 200)
			continue;
		(void)pages[i].stream->begin(pages[i].stream->arg);
		for (off = 0; off < pages[i].len; off += k) {
			k = pages[i].len - off < 65536 ? pages[i].len - off :
			    65536;
			if ((rc = pages[i].stream->feed(pages[i].stream->arg,
			    "text/html", pages[i].body + off, k)) != 0) {
				pages[i].rc = rc;
				break;
			}
		}
		free(pages[i].body);
		pages[i].body = NULL;
	}
	h->in_fetch = false;
	return 0;
}

static int
hand_drain(void *ctx, struct listing *l)
{
	struct hand	*h = ctx;
	struct entry	*e;
	size_t		 i;

	if (h->in_fetch)
		h->during += listing_count(l);
	for (i = 0; i < listing_count(l); i++)
		if (listing_append(h->all, &e) != 0 ||
		    listing_entry_copy(e, listing_get(l, i)) != 0)
			return BM_ENOMEM;
	listing_drain(l);
	return 0;
}

/* Drop the drained direct children of prefix from all. */
static int
hand_retract(void *ctx, const char *prefix)
{
	struct hand	*h = ctx;
	struct listing	*keep = listing_new(1000000);
	const char	*p;
	struct entry	*e;
	size_t		 i, pl = strlen(prefix);

	h->retracts++;
	(void)snprintf(h->last, sizeof(h->last), "%s", prefix);
	for (i = 0; i < listing_count(h->all); i++) {
		p = listing_get(h->all, i)->path;
		if ((pl == 0 ? strchr(p, '/') == NULL :
		    strncmp(p, prefix, pl) == 0 && p[pl] == '/' &&
		    strchr(p + pl + 1, '/') == NULL))
			continue;
		if (listing_append(keep, &e) != 0 ||
		    listing_entry_copy(e, listing_get(h->all, i)) != 0)
			return BM_ENOMEM;
	}
	listing_free(h->all);
	h->all = keep;
	return 0;
}

/* A page of n files f000000.. under big/, with extra rows, whole or cut. */
static char *
hand_page(size_t n, const char *extra, bool cut)
{
	size_t	 cap = n * 64 + 4096, len, i;
	char	*b = malloc(cap);

	if (b == NULL)
		abort();
	len = (size_t)snprintf(b, cap, "<html><body><pre>"
	    "<a href=\"../\">../</a>\n");
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(b + len, cap - len, "<a href=\"f%06zu\">"
		    "f%06zu</a> 02-Jan-2020 11:00 1\n", i, i);
	len += (size_t)snprintf(b + len, cap - len, "%s", extra);
	if (!cut)
		(void)snprintf(b + len, cap - len, "</pre></body></html>\n");
	return b;
}

/* Crawl root (big/) and big/ (body) with the hand fetch. */
static int
hand_crawl(struct hand *h, const char *body, size_t max_entries,
    struct listing *out, size_t *ret_skipped, char *err, size_t errlen)
{
	static struct fake_page pg[2] = {
		{ "http://h/src/", 200, "<html><body><pre><a href=\"../\">../"
		    "</a>\n<a href=\"big/\">big/</a> 02-Jan-2020 11:00 -\n"
		    "</pre></body></html>\n", NULL },
		{ "http://h/src/big/", 200, NULL, NULL },
	};
	struct crawl_opts o;

	pg[1].body = body;
	memset(h, 0, sizeof(*h));
	h->f.pages = pg;
	h->f.n = 2;
	h->all = listing_new(1000000);
	memset(&o, 0, sizeof(o));
	o.max_depth = 10;
	o.max_entries = max_entries;
	o.batch = 4;
	o.drain = hand_drain;
	o.retract = hand_retract;
	o.drain_ctx = h;
	o.ret_skipped = ret_skipped;
	return list_http_crawl("http://h/src/", &o, hand_fetch, h, out, err,
	    errlen);
}

/*
 * A page larger than STREAM_AFTER (1 MiB) is handed on as it is read
 * (issue 22): its entries reach the drain during the fetch; a name
 * repeated past a hand-off is still dropped (as a directory: counted,
 * not entered); a page that then fails (cut short, max_entries) takes
 * what it handed on back (retract).
 */
static void
test_crawl_hand(void)
{
	struct hand	 h;
	struct listing	*out;
	char		 err[256], *b;
	size_t		 skipped = 0, i, bad = 0;
	int		 rc;

	/* 40,000 rows (about 1.9 MB), f000001 again as a file and a dir. */
	b = hand_page(40000, "<a href=\"f000002\">f000002</a> 03-Jan-2020 "
	    "11:00 7\n<a href=\"f000001/\">f000001/</a> 03-Jan-2020 11:00 -\n",
	    false);
	out = listing_new(1000000);
	rc = hand_crawl(&h, b, 0, out, &skipped, err, sizeof(err));
	is_int(rc, 0, "hand: complete (%s)", err);
	ok(h.during >= 32768, "hand: entries drained while the page came "
	    "in (%zu)", h.during);
	is_int(listing_count(h.all), 40001, "hand: big/ and its 40,000 files");
	is_int(h.f.fetched, 2, "hand: f000001/ (a file's name) not entered");
	is_int(skipped, 1, "hand: the file listed again as a dir counted");
	is_int(h.retracts, 0, "hand: nothing retracted");
	for (i = 1; i < listing_count(h.all); i++)
		if (listing_get(h.all, i)->type != ENTRY_FILE ||
		    listing_get(h.all, i)->size != 1)
			bad++;
	is_int(bad, 0, "hand: the first rows kept (files, size 1)");
	listing_free(h.all);
	listing_free(out);
	free(b);

	/* Cut short: entries handed on, then taken back. */
	b = hand_page(40000, "", true);
	out = listing_new(1000000);
	rc = hand_crawl(&h, b, 0, out, NULL, err, sizeof(err));
	is_int(rc, BM_EPROTO, "hand, cut short: BM_EPROTO");
	ok(strstr(err, "http://h/src/big/: incomplete index page") == err,
	    "hand, cut short: the page named (%s)", err);
	ok(h.during >= 32768, "hand, cut short: handed on first (%zu)",
	    h.during);
	is_int(h.retracts, 1, "hand, cut short: retracted once");
	is_str(h.last, "big", "hand, cut short: big/ retracted");
	is_int(listing_count(h.all), 1, "hand, cut short: only big/ left");
	listing_free(h.all);
	listing_free(out);
	free(b);

	/* max_entries 30,000: the directory fails, what it handed on too. */
	b = hand_page(40000, "", false);
	out = listing_new(1000000);
	rc = hand_crawl(&h, b, 30000, out, NULL, err, sizeof(err));
	is_int(rc, BM_ELIMIT, "hand, max_entries: BM_ELIMIT");
	is_str(err, "http://h/src/big/: more than 30000 entries in one "
	    "directory (max_entries)", "hand, max_entries: named");
	ok(h.during > 0, "hand, max_entries: handed on first (%zu)",
	    h.during);
	is_int(h.retracts, 1, "hand, max_entries: retracted");
	is_int(listing_count(h.all), 1, "hand, max_entries: only big/ left");
	listing_free(h.all);
	listing_free(out);
	free(b);
}

/* docker-style directories without '/' are crawled with one. */
static void
test_crawl_docker(void)
{
	static const struct fake_page dk[] = {
		{ "http://h/src/", 200, "<html><head><title>Index of linux/"
		    "</title></head><body><pre><a href=\"../\">../</a>\n"
		    "<a href=\"nightly\">nightly/</a>   2020-01-21 07:38  -\n"
		    "</pre></body></html>", NULL },
		{ "http://h/src/nightly/", 200, "<pre><a href=\"x.rpm\">x.rpm"
		    "</a>   2020-01-21 07:38:00 1.0 KiB\n</pre>", NULL },
	};
	struct listing	*l = listing_new(100);
	struct fake	 f;
	char		 err[256];

	is_int(crawl(dk, 2, 5, NULL, 4, &f, l, NULL, err, sizeof(err)), 0,
	    "docker crawl");
	ok(find(l, "nightly/x.rpm") != NULL, "docker: nightly/ descended");
	listing_free(l);
}

/* ---------------------------------------------------------------- */
/* Pages parsed as they arrive (list_http_push_*). */

/* Entries a and b hold the same fields, in the same order. */
static bool
same_listing(const struct listing *a, const struct listing *b, char *why,
    size_t whylen)
{
	const struct entry *x, *y;
	size_t		 i;

	if (listing_count(a) != listing_count(b)) {
		snprintf(why, whylen, "%zu entries, not %zu",
		    listing_count(b), listing_count(a));
		return false;
	}
	for (i = 0; i < listing_count(a); i++) {
		x = listing_get(a, i);
		y = listing_get(b, i);
		if (strcmp(x->path, y->path) != 0 || x->type != y->type ||
		    x->size != y->size || x->size_exact != y->size_exact ||
		    x->size_min != y->size_min || x->size_max != y->size_max ||
		    x->mtime_wall != y->mtime_wall ||
		    x->mtime_nsec != y->mtime_nsec ||
		    x->mtime_prec != y->mtime_prec ||
		    x->zone_stated != y->zone_stated ||
		    x->zone_offset != y->zone_offset ||
		    (x->href == NULL) != (y->href == NULL) ||
		    (x->href != NULL && strcmp(x->href, y->href) != 0) ||
		    (x->size_display == NULL) != (y->size_display == NULL) ||
		    (x->size_display != NULL && strcmp(x->size_display,
		    y->size_display) != 0)) {
			snprintf(why, whylen, "entry %zu (%s) differs", i,
			    x->path);
			return false;
		}
	}
	return true;
}

/*
 * body fed in pieces: cuts[0..ncuts) are the offsets where a piece ends
 * (ascending); prune as list_http_push_new takes it.
 */
static int
push_pieces(const char *body, size_t len, const char *ct, const char *url,
    const size_t *cuts, size_t ncuts, size_t prune, struct listing *l,
    enum page_format *fmt, char *err, size_t errlen)
{
	struct list_http_push *hp;
	size_t		 i, at = 0;
	int		 rc;

	if ((rc = list_http_push_new(ct, url, "", l, prune, &hp)) != 0)
		return rc;
	for (i = 0; i <= ncuts; i++) {
		size_t	 to = i < ncuts ? cuts[i] : len;

		if ((rc = list_http_push_feed(hp, (const uint8_t *)body + at,
		    to - at)) != 0)
			break;
		at = to;
	}
	if (rc == 0)
		rc = list_http_push_end(hp, fmt, NULL, err, errlen);
	list_http_push_free(hp);
	return rc;
}

/* The whole-page parse of body (list_http_parse), to compare against. */
struct whole {
	struct listing	*l;
	enum page_format fmt;
	int		 rc;
	char		 err[256];
};

static void
whole_parse(const char *body, size_t len, const char *ct, const char *url,
    struct whole *w)
{
	w->l = listing_new(1000000);
	w->fmt = PAGE_GENERIC;
	w->err[0] = '\0';
	w->rc = list_http_parse((const uint8_t *)body, len, ct, url, "", w->l,
	    &w->fmt, NULL, w->err, sizeof(w->err));
}

/* Pieces split at cuts parse as w (the whole page) did; 1 when same. */
static bool
split_same(const char *name, const struct whole *w, const char *body,
    size_t len, const char *ct, const char *url, const size_t *cuts,
    size_t ncuts, size_t prune, char *why, size_t whylen)
{
	struct listing	*b = listing_new(1000000);
	enum page_format fb = PAGE_GENERIC;
	char		 eb[256] = "";
	int		 rb;
	bool		 r;

	rb = push_pieces(body, len, ct, url, cuts, ncuts, prune, b, &fb, eb,
	    sizeof(eb));
	if (w->rc != rb || w->fmt != fb || (rb != 0 && strcmp(w->err,
	    eb) != 0)) {
		snprintf(why, whylen, "%s: rc %d/%d format %s/%s err '%s'/'%s'",
		    name, w->rc, rb, page_format_name(w->fmt),
		    page_format_name(fb), w->err, eb);
		r = false;
	} else
		r = same_listing(w->l, b, why, whylen);
	listing_free(b);
	return r;
}

/* Every fixture page split in two at every byte: the same entries. */
static void
test_push_every_byte(void)
{
	static const struct {
		const char	*file, *ct, *url;
	} pages[] = {
		{ "apache-fancy-pre-mysql-repo.html", "text/html", "http://h/d/" },
		{ "apache-htmltable-rclone-fixture.html", "text/html",
		    "http://example.org/~user/pub/" },
		{ "apache-htmltable-winehq.html", "text/html", "http://h/d/" },
		{ "apache-plain-ul-debian.html", "text/html", "http://h/d/" },
		{ "caddy-v1-rclone-fixture.html", NULL, "http://localhost:8080/" },
		{ "caddy-v2-sdumirror-ubuntu.html", "text/html; charset=utf-8",
		    "http://h/d/" },
		{ "docker-download-armv7l.html", "text/html", "http://h/d/" },
		{ "docker-download-centos.html", "text/html", "http://h/d/" },
		{ "iis-dirbrowse-digi-ftp1.html", "text/html", "http://h/d/" },
		{ "iis-dirbrowse-ilga-jcar.html", "text/html", "http://h/d/" },
		{ "iis-dirbrowse-nemweb-longdate.html", "text/html",
		    "http://h/d/" },
		{ "lighttpd-dirlisting-buildroot-acl.html", "text/html",
		    "http://h/d/" },
		{ "nginx-autoindex-inexact-synthetic.html", "text/html",
		    "http://h/d/" },
		{ "nginx-autoindex-monitoring-plugins.html", "text/html",
		    "http://h/d/" },
		{ "nginx-autoindex-proxmox-truncated.html", "text/html",
		    "http://h/d/" },
		{ "nginx-fancyindex-lysator-openbsd.html", "text/html",
		    "http://h/d/" },
		{ "snt-utwente-debian.html", "text/html", "http://h/d/" },
		{ "nginx-autoindex-format-json-synthetic.json", NULL,
		    "http://h/d/" },
		{ "nginx-autoindex-format-json-synthetic.json",
		    "application/json", "http://h/d/" },
		{ "nginx-autoindex-format-xml-synthetic.xml", NULL,
		    "http://h/d/" },
		{ "nginx-autoindex-format-xml-synthetic.xml", "text/xml",
		    "http://h/d/" },
	};
	struct whole	 w;
	char		 path[256], why[512];
	char		*body;
	size_t		 f, len, k;
	bool		 all;

	for (f = 0; f < sizeof(pages) / sizeof(pages[0]); f++) {
		snprintf(path, sizeof(path), FIX "%s", pages[f].file);
		if ((body = slurp(path, &len)) == NULL) {
			ok(0, "%s: read fixture", pages[f].file);
			continue;
		}
		why[0] = '\0';
		whole_parse(body, len, pages[f].ct, pages[f].url, &w);
		for (k = 0, all = true; k <= len && all; k++)
			all = split_same(pages[f].file, &w, body, len,
			    pages[f].ct, pages[f].url, &k, 1, 0, why,
			    sizeof(why));
		listing_free(w.l);
		ok(all, "%s (%s): split at each of %zu bytes parses as the "
		    "whole page%s%s", pages[f].file, pages[f].ct ? pages[f].ct :
		    "no type", len, all ? "" : ": ", all ? "" : why);
		free(body);
	}
}

/* A generated page of n rows in a row format (fmt: "nginx", "table"). */
static char *
gen_page(const char *fmt, size_t n, size_t *ret_len)
{
	FILE		*fp;
	char		*buf = NULL;
	size_t		 len = 0, i;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		return NULL;
	if (strcmp(fmt, "nginx") == 0) {
		fprintf(fp, "<html>\r\n<head><title>Index of /d/</title></head>"
		    "\r\n<body>\r\n<h1>Index of /d/</h1><hr><pre>"
		    "<a href=\"../\">../</a>\r\n");
		for (i = 0; i < n; i++)
			fprintf(fp, "<a href=\"f%07zu%s\">f%07zu%s</a>%*s"
			    "02-Dec-2026 00:%02zu %19zu\r\n", i, i % 7 ? "" :
			    "/", i, i % 7 ? "" : "/", 40, "", i % 60,
			    i % 7 ? i * 3 : 0);
		fprintf(fp, "</pre><hr></body>\r\n</html>\r\n");
	} else {
		fprintf(fp, "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final"
		    "//EN\">\n<html>\n <head>\n  <title>Index of /d</title>\n"
		    " </head>\n <body>\n<h1>Index of /d</h1>\n  <table>\n"
		    "   <tr><th><a href=\"?C=N;O=D\">Name</a></th><th><a "
		    "href=\"?C=M;O=A\">Last modified</a></th><th><a href=\""
		    "?C=S;O=A\">Size</a></th></tr>\n");
		for (i = 0; i < n; i++)
			fprintf(fp, "<tr><td><a href=\"f%07zu.gz\">f%07zu.gz"
			    "</a></td><td align=\"right\">2026-12-02 10:%02zu  "
			    "</td><td align=\"right\">%zuK</td></tr>\n", i, i,
			    i % 60, i % 900 + 1);
		fprintf(fp, "</table>\n<address>Apache Server</address>\n"
		    "</body></html>\n");
	}
	fclose(fp);
	*ret_len = len;
	return buf;
}

/*
 * Large generated pages fed in small pieces of varying size and pruned
 * every 4 KiB: the same entries as the whole page (never pruned); and a
 * few fixtures too.
 */
static void
test_push_prune(void)
{
	static const char *const fmts[] = { "nginx", "table" };
	static const char *const fix[] = {
		"nginx-autoindex-monitoring-plugins.html",
		"apache-htmltable-winehq.html", "snt-utwente-debian.html",
		"iis-dirbrowse-nemweb-longdate.html",
		"nginx-autoindex-format-json-synthetic.json",
		"nginx-autoindex-format-xml-synthetic.xml",
	};
	struct listing	*l;
	struct whole	 w;
	char		 why[512], path[256];
	char		*body;
	size_t		*cuts, ncuts, len, f, at, step;
	enum page_format fmt;
	int		 rc;

	for (f = 0; f < 2 + sizeof(fix) / sizeof(fix[0]); f++) {
		if (f < 2)
			body = gen_page(fmts[f], 20000, &len);
		else {
			snprintf(path, sizeof(path), FIX "%s", fix[f - 2]);
			body = slurp(path, &len);
		}
		if (body == NULL || (cuts = calloc(len + 1,
		    sizeof(*cuts))) == NULL) {
			ok(0, "prune %zu: setup", f);
			free(body);
			continue;
		}
		for (at = 0, ncuts = 0, step = 1; at + step < len;
		    step = step % 97 + 1)
			cuts[ncuts++] = (at += step);
		why[0] = '\0';
		whole_parse(body, len, NULL, "http://h/d/", &w);
		ok(split_same(f < 2 ? fmts[f] : fix[f - 2], &w, body, len, NULL,
		    "http://h/d/", cuts, ncuts, f < 2 ? 4096 : 512, why,
		    sizeof(why)), "%s: fed in %zu pieces, pruned: as the whole "
		    "page%s%s", f < 2 ? fmts[f] : fix[f - 2], ncuts + 1,
		    why[0] ? ": " : "", why);
		listing_free(w.l);
		free(cuts);
		free(body);
	}
	/* The generated pages are what they claim. */
	body = gen_page("nginx", 20000, &len);
	l = listing_new(100000);
	rc = list_http_parse((const uint8_t *)body, len, NULL, "http://h/d/",
	    "", l, &fmt, NULL, why, sizeof(why));
	ok(rc == 0 && fmt == PAGE_NGINX && listing_count(l) == 20000,
	    "generated nginx page: 20000 entries, nginx");
	listing_free(l);
	free(body);
	/* max_entries: one more entry than out takes is BM_ELIMIT. */
	body = gen_page("table", 3000, &len);
	l = listing_new(2999);
	is_int(list_http_parse((const uint8_t *)body, len, NULL,
	    "http://h/d/", "", l, NULL, NULL, why, sizeof(why)), BM_ELIMIT,
	    "3000 rows into room for 2999: BM_ELIMIT");
	is_int((int)listing_count(l), 0, "  and nothing kept");
	listing_free(l);
	free(body);
}

/*
 * One tag, comment or text run of n bytes of 'A', fed in 64 KiB pieces
 * between head and tail: libxml2 holds it unparsed until it ends, so
 * past 16 MiB the page is refused (BM_EPROTO, named in err).
 */
static int
push_huge(const char *head, size_t n, const char *tail, struct listing *l,
    char *err, size_t errlen)
{
	static char	 run[65536];
	struct list_http_push *hp;
	size_t		 k;
	int		 rc;

	memset(run, 'A', sizeof(run));
	if ((rc = list_http_push_new("text/html", "http://h/d/", "", l, 0,
	    &hp)) != 0)
		return rc;
	rc = list_http_push_feed(hp, (const uint8_t *)head, strlen(head));
	for (k = 0; rc == 0 && k < n; k += sizeof(run))
		rc = list_http_push_feed(hp, (const uint8_t *)run,
		    n - k < sizeof(run) ? n - k : sizeof(run));
	if (rc == 0)
		rc = list_http_push_feed(hp, (const uint8_t *)tail,
		    strlen(tail));
	if (rc == 0)
		rc = list_http_push_end(hp, NULL, NULL, err, errlen);
	list_http_push_free(hp);
	return rc;
}

static void
test_push_huge_token(void)
{
	static const char *const heads[] = {
		"<html><body><pre><a href=\"../\">../</a>\n<a href=\"",
		"<html><body><pre><a href=\"../\">../</a>\n<a href=\"x\" "
		    "title=\"",
		"<html><body><pre><a href=\"../\">../</a>\n<!-- ",
		"<html><body><pre><a href=\"../\">../</a>\n",
	};
	static const char *const tails[] = {
		"\">huge</a> 01-Jan-2026 00:00 3\n",
		"\">x</a> 01-Jan-2026 00:00 3\n",
		" -->\n",
		"\n",
	};
	static const char *const names[] = { "href", "title", "comment",
	    "text" };
	const char	*end = "<a href=\"y.txt\">y.txt</a> 01-Jan-2026 00:00 3\n"
			    "</pre></body></html>\n";
	char		 tail[256], err[256];
	struct listing	*l;
	size_t		 i;
	int		 rc;

	for (i = 0; i < 4; i++) {
		(void)snprintf(tail, sizeof(tail), "%s%s", tails[i], end);
		l = listing_new(100);
		err[0] = '\0';
		rc = push_huge(heads[i], 20 << 20, tail, l, err, sizeof(err));
		is_int(rc, BM_EPROTO, "a 20 MiB %s: the page is refused",
		    names[i]);
		ok(strstr(err, "over 16 MiB") != NULL, "%s: says why: %s",
		    names[i], err);
		is_int((long long)listing_count(l), 0, "%s: no entries kept",
		    names[i]);
		listing_free(l);
	}
	/* 4 MiB is well under the cap: the page is read. */
	l = listing_new(100);
	(void)snprintf(tail, sizeof(tail), "%s%s", tails[1], end);
	rc = push_huge(heads[1], 4 << 20, tail, l, err, sizeof(err));
	is_int(rc, 0, "a 4 MiB title: read (%s)", rc != 0 ? err : "");
	is_int((long long)listing_count(l), 2, "4 MiB title: both files");
	listing_free(l);
}

int
main(void)
{
	test_tsv_fixtures();
	test_json_xml();
	test_zero();
	test_iis();
	test_specials();
	test_hostile();
	test_tmp_prefix();
	test_not_index();
	test_cut_pages();
	test_file_and_dir();
	test_crawl();
	test_crawl_wide();
	test_crawl_drain();
	test_crawl_hand();
	test_crawl_docker();
	test_push_every_byte();
	test_push_prune();
	test_push_huge_token();
	return done_testing();
}
