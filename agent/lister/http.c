/*
 * The HTTP lister: reads directory index pages (nginx json/xml, HTML of
 * known generators) into listing entries and crawls a tree of them over
 * the shared crawl (crawl.h).  Invariants: names come from the href,
 * percent-decoded once, never from the link text; a page that is no index
 * is an error, never an empty directory; displayed sizes become byte
 * ranges; a redirect out of the source fails the page; a directory that
 * repeats an ancestor is a loop, not entered.  Formats and rules: see
 * docs/internals.md, "Reading index pages".
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>
#include <libxml/HTMLparser.h>
#include <libxml/parserInternals.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <openssl/evp.h>

#include "biomirror/crawl.h"
#include "biomirror/error.h"
#include "biomirror/list_http.h"
#include "biomirror/text.h"
#include "biomirror/workq.h"

#define ROW_TEXT_MAX	1024	/* bytes of row text looked at per link */
#define SIZE_SEARCH_MAX	(UINT64_C(1) << 50)	/* inversion range: 1 PiB */
#define KEY_LIMIT	(UINT64_C(1) << 60)
#define SCHEME_CHARS	"abcdefghijklmnopqrstuvwxyz" \
			"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-."
#define HREF_IGNORE	0	/* parent, self, sort or non-HTTP link */
#define HREF_CHILD	1	/* names a direct child */
#define HREF_HOSTILE	2	/* skipped and counted */

/*
 * Where a set of names is looked up to drop rows that repeat an href:
 * the entries out holds by index, those handed on (nameset_forget) by
 * a hash of the name, its low bit the type (1: directory).
 */
struct nameset {
	size_t		*slot;		/* owned: out index + 1, 0 when empty */
	size_t		 cap;		/* slots, a power of two */
	size_t		 n;		/* slots in use */
	uint64_t	*gone;		/* owned: hashes, 0 when empty */
	size_t		 gcap, gn;	/* as cap and n */
};

/* State of one list_http_parse() call. */
struct pctx {
	struct listing	*out;		/* borrowed: where entries go */
	const char	*prefix;	/* borrowed: dir path, "" = root */
	enum page_format fmt;		/* detected generator */
	char		*origin;	/* owned: "scheme://host", or NULL */
	char		*pagepath;	/* owned: decoded page path */
	size_t		 skipped;	/* hostile or invalid names skipped */
	struct nameset	 seen;		/* names seen on this page */
};

/* What a row says about its entry besides the name. */
struct rowinfo {
	bool		 has_time;	/* a date was read */
	int64_t		 wall;		/* seconds, read as if UTC */
	int32_t		 nsec;		/* fraction of a second */
	enum mtime_prec	 prec;		/* precision of wall */
	bool		 stated;	/* the row states the zone */
	int32_t		 off;		/* stated offset, seconds east */
	bool		 has_size;	/* size_min/size_max are known */
	int64_t		 size_min;	/* bytes */
	int64_t		 size_max;	/* bytes */
	bool		 has_exact;	/* an attribute gave the exact count */
	int64_t		 exact;		/* that count */
	char		*display;	/* owned: size as printed, or NULL */
	bool		 is_dir;	/* the row marks a directory (<dir>) */
};

const char *
page_format_name(enum page_format f)
{
	switch (f) {
	case PAGE_GENERIC:	return "generic";
	case PAGE_NGINX:	return "nginx";
	case PAGE_NGINX_JSON:	return "nginx-json";
	case PAGE_NGINX_XML:	return "nginx-xml";
	case PAGE_NGINX_FANCY:	return "nginx-fancyindex";
	case PAGE_APACHE_PRE:	return "apache-pre";
	case PAGE_APACHE_TABLE:	return "apache-table";
	case PAGE_APACHE_UL:	return "apache-ul";
	case PAGE_LIGHTTPD:	return "lighttpd";
	case PAGE_IIS:		return "iis";
	case PAGE_CADDY1:	return "caddy1";
	case PAGE_CADDY2:	return "caddy2";
	case PAGE_SNT:		return "snt";
	case PAGE_DOCKER:	return "docker";
	}
	return "unknown";
}

/* errbuf = "a: b", or "a" when b is empty; truncation is acceptable. */
static void
set_err(char *errbuf, size_t errlen, const char *a, const char *b)
{
	if (errbuf == NULL || errlen == 0)
		return;
	(void)snprintf(errbuf, errlen, "%s%s%s", a, *b ? ": " : "", b);
}

/* ---------------------------------------------------------------- */
/* Small text helpers. */

static bool
is_space_at(const char *s, size_t *ret_w)
{
	unsigned char c = (unsigned char)s[0];

	if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
	    c == '\v') {
		*ret_w = 1;
		return true;
	}
	/* U+00A0 (&nbsp;) as libxml2 hands it over, in UTF-8. */
	if (c == 0xc2 && (unsigned char)s[1] == 0xa0) {
		*ret_w = 2;
		return true;
	}
	return false;
}

/*
 * Copy s with runs of white space (including &nbsp;) collapsed to one
 * space and both ends trimmed, at most max bytes of input.  NULL on ENOMEM.
 */
static char *
normalize(const char *s, size_t max)
{
	char	*out;
	size_t	 i, k, w, len = strnlen(s, max);
	bool	 sp = false;

	if ((out = malloc(len + 1)) == NULL)
		return NULL;
	for (i = 0, k = 0; i < len; ) {
		if (is_space_at(s + i, &w) && i + w <= len) {
			sp = true;
			i += w;
			continue;
		}
		if (sp && k > 0)
			out[k++] = ' ';
		sp = false;
		out[k++] = s[i++];
	}
	out[k] = '\0';
	return out;
}

static const char *
skip_sp(const char *p)
{
	size_t	 w;

	while (*p != '\0' && is_space_at(p, &w))
		p += w;
	return p;
}

/* Read between mind and maxd decimal digits. */
static bool
get_num(const char **pp, int mind, int maxd, int *ret)
{
	const char	*p = *pp;
	int		 v = 0, n = 0;

	while (n < maxd && *p >= '0' && *p <= '9') {
		v = v * 10 + (*p - '0');
		p++;
		n++;
	}
	if (n < mind)
		return false;
	*pp = p;
	*ret = v;
	return true;
}

/* Month name, full or three letters, any case: 1-12, or 0. */
static int
get_month(const char **pp)
{
	static const char *const full[] = { "january", "february", "march",
	    "april", "may", "june", "july", "august", "september", "october",
	    "november", "december" };
	size_t	 i, l;

	for (i = 0; i < 12; i++) {
		l = strlen(full[i]);
		if (strncasecmp(*pp, full[i], l) == 0 &&
		    !isalpha((unsigned char)(*pp)[l])) {
			*pp += l;
			return (int)i + 1;
		}
	}
	for (i = 0; i < 12; i++) {
		if (strncasecmp(*pp, full[i], 3) == 0 &&
		    !isalpha((unsigned char)(*pp)[3])) {
			*pp += 3;
			return (int)i + 1;
		}
	}
	return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Hinnant). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t	 era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* A date being read. */
struct when {
	int		 y, mo, d, h, mi, s;
	int32_t		 nsec;
	enum mtime_prec	 prec;
	bool		 stated;
	int32_t		 off;
};

/* "HH:MM[:SS[.frac]]", then an optional AM/PM. */
static bool
get_clock(const char **pp, struct when *w, bool ampm)
{
	const char	*p = *pp;
	int		 n, i;

	if (!get_num(&p, 1, 2, &w->h) || *p++ != ':' ||
	    !get_num(&p, 2, 2, &w->mi))
		return false;
	w->prec = MTIME_MINUTE;
	if (p[0] == ':' && isdigit((unsigned char)p[1])) {
		p++;
		if (!get_num(&p, 2, 2, &w->s))
			return false;
		w->prec = MTIME_SECOND;
		if (p[0] == '.' && isdigit((unsigned char)p[1])) {
			p++;
			for (n = 0, i = 0; isdigit((unsigned char)*p); p++)
				if (i < 9) {
					n = n * 10 + (*p - '0');
					i++;
				}
			for (; i < 9; i++)
				n *= 10;
			w->nsec = n;
			w->prec = MTIME_NS;
		}
	}
	if (ampm) {
		const char *q = skip_sp(p);

		if ((q[0] == 'A' || q[0] == 'a' || q[0] == 'P' ||
		    q[0] == 'p') && (q[1] == 'M' || q[1] == 'm')) {
			if (w->h < 1 || w->h > 12)
				return false;
			w->h %= 12;
			if (q[0] == 'P' || q[0] == 'p')
				w->h += 12;
			p = q + 2;
		}
	}
	*pp = p;
	return true;
}

/* "Z", "+HH:MM", "+HHMM", "GMT", "UTC" right after a time. */
static void
get_zone(const char **pp, struct when *w)
{
	const char	*p = *pp, *q;
	int		 hh, mm = 0;

	if (*p == 'Z') {
		w->stated = true;
		*pp = p + 1;
		return;
	}
	if (*p == '+' || *p == '-') {
		q = p + 1;
		if (!get_num(&q, 2, 2, &hh))
			return;
		if (*q == ':')
			q++;
		if (!get_num(&q, 2, 2, &mm) || hh > 14 || mm > 59)
			return;
		w->stated = true;
		w->off = (hh * 3600 + mm * 60) * (*p == '-' ? -1 : 1);
		*pp = q;
		return;
	}
	q = skip_sp(p);
	if (strncmp(q, "GMT", 3) == 0 || strncmp(q, "UTC", 3) == 0) {
		w->stated = true;
		*pp = q + 3;
	}
}

/* Date starting with digits: DD-Mon-YYYY, YYYY-MM-DD, YYYY-Mon-DD, M/D/Y. */
static bool
get_numeric_date(const char **pp, struct when *w)
{
	const char	*p = *pp, *start = p;
	int		 a;

	if (!get_num(&p, 1, 4, &a))
		return false;
	if (p - start == 4 && *p == '-') {
		w->y = a;
		p++;
		if (isdigit((unsigned char)*p)) {
			if (!get_num(&p, 2, 2, &w->mo))
				return false;
		} else if ((w->mo = get_month(&p)) == 0)
			return false;
		if (*p++ != '-' || !get_num(&p, 2, 2, &w->d))
			return false;
	} else if (p - start <= 2 && *p == '-') {
		w->d = a;
		p++;
		if ((w->mo = get_month(&p)) == 0 || *p++ != '-' ||
		    !get_num(&p, 4, 4, &w->y))
			return false;
	} else if (p - start <= 2 && *p == '/') {
		w->mo = a;
		p++;
		if (!get_num(&p, 1, 2, &w->d) || *p++ != '/' ||
		    !get_num(&p, 4, 4, &w->y))
			return false;
	} else
		return false;
	*pp = p;
	return true;
}

/* Date starting with a weekday: RFC 1123 or IIS long date format. */
static bool
get_weekday_date(const char **pp, struct when *w)
{
	const char	*p = *pp;

	while (isalpha((unsigned char)*p))
		p++;
	if (p - *pp < 3 || *p++ != ',')
		return false;
	p = skip_sp(p);
	if (isdigit((unsigned char)*p)) {
		/* "Fri, 11 Jul 2014" */
		if (!get_num(&p, 1, 2, &w->d))
			return false;
		p = skip_sp(p);
		if ((w->mo = get_month(&p)) == 0)
			return false;
		p = skip_sp(p);
		if (!get_num(&p, 4, 4, &w->y))
			return false;
	} else {
		/* "Sunday, August 21, 2022" */
		if ((w->mo = get_month(&p)) == 0)
			return false;
		p = skip_sp(p);
		if (!get_num(&p, 1, 2, &w->d) || *p++ != ',')
			return false;
		p = skip_sp(p);
		if (!get_num(&p, 4, 4, &w->y))
			return false;
	}
	*pp = p;
	return true;
}

/*
 * Read a listed date and time at s.  Returns the bytes consumed (0 when s
 * does not start with a date this module knows) and fills ri's time; a
 * day its month does not have (30 Feb) is consumed, ri's time left unset.
 */
static size_t
parse_when(const char *s, struct rowinfo *ri)
{
	struct when	 w;
	const char	*p = s, *q;

	memset(&w, 0, sizeof(w));
	if (isdigit((unsigned char)*p)) {
		if (!get_numeric_date(&p, &w))
			return 0;
	} else if (isalpha((unsigned char)*p)) {
		if (!get_weekday_date(&p, &w))
			return 0;
	} else
		return 0;
	w.prec = MTIME_DAY;
	q = *p == 'T' ? p + 1 : skip_sp(p);
	if (isdigit((unsigned char)*q)) {
		if (!get_clock(&q, &w, true))
			return 0;
		p = q;
		get_zone(&p, &w);
	}
	if (w.mo < 1 || w.mo > 12 || w.d < 1 || w.d > 31 || w.h > 23 ||
	    w.mi > 59 || w.s > 60 || w.y < 1900 || w.y > 9999)
		return 0;
	/* A day the month does not have (30 Feb): read, but no date. */
	if (days_from_civil(w.y, w.mo, w.d) >= days_from_civil(w.y + (w.mo ==
	    12), w.mo % 12 + 1, 1))
		return (size_t)(p - s);
	ri->has_time = true;
	ri->wall = days_from_civil(w.y, w.mo, w.d) * 86400 + w.h * 3600 +
	    w.mi * 60 + w.s;
	ri->nsec = w.nsec;
	ri->prec = w.prec;
	ri->stated = w.stated;
	ri->off = w.off;
	return (size_t)(p - s);
}

/* ---------------------------------------------------------------- */
/* Sizes: the server formatters, forward, as monotonic keys. */

/*
 * A key orders displayed sizes: the shown value in tenths shifted by its
 * unit, times 8 plus the unit so "1024K" sorts below "1M".  Each
 * formatter maps a byte count to the key of what it prints.
 */
static uint64_t
mkkey(uint64_t tenths, unsigned u)
{
	return (tenths << (10 * u)) * 8 + u;
}

/* apr_strfsize() (apache/apr strings/apr_strings.c). */
static uint64_t
key_apache(uint64_t size)
{
	uint64_t	 remain;
	unsigned	 u = 0;

	if (size < 973)
		return mkkey(size * 10, 0);
	for (;;) {
		remain = size & 1023;
		size >>= 10;
		u++;
		if (size >= 973)
			continue;
		if (size < 9 || (size == 9 && remain < 973)) {
			if ((remain = (remain * 5 + 256) / 512) >= 10) {
				size++;
				remain = 0;
			}
			return mkkey(size * 10 + remain, u);
		}
		if (remain >= 512)
			size++;
		return mkkey(size * 10, u);
	}
}

/* ngx_http_autoindex_html() with autoindex_exact_size off. */
static uint64_t
key_nginx(uint64_t size)
{
	uint64_t	 n;
	const uint64_t	 g = UINT64_C(1) << 30, m = UINT64_C(1) << 20;

	if (size > g - 1) {
		n = size / g + (size % g > g / 2 - 1);
		return mkkey(n * 10, 3);
	}
	if (size > m - 1) {
		n = size / m + (size % m > m / 2 - 1);
		return mkkey(n * 10, 2);
	}
	if (size > 9999) {
		n = size / 1024 + (size % 1024 > 511);
		return mkkey(n * 10, 1);
	}
	return mkkey(size * 10, 0);
}

/* http_list_directory_sizefmt() (lighttpd1.4 mod_dirlisting.c). */
static uint64_t
key_lighttpd(uint64_t size)
{
	uint64_t	 remain;
	unsigned	 u = 0;

	if (size > 0 && size < 100)
		size += 99;
	do {
		remain = size & 1023;
		size >>= 10;
		u++;
	} while (size & ~UINT64_C(1023));
	remain /= 100;
	if (remain > 9)
		remain = 9;
	return mkkey(size * 10 + remain, u);
}

/* The byte range a formatter maps onto target; false if none. */
static bool
invert_key(uint64_t (*key)(uint64_t), uint64_t target, int64_t *ret_min,
    int64_t *ret_max)
{
	uint64_t	 lo, hi, mid, min;

	lo = 0;
	hi = SIZE_SEARCH_MAX;
	if (key(hi) < target)
		return false;
	while (lo < hi) {	/* first size with key >= target */
		mid = lo + (hi - lo) / 2;
		if (key(mid) >= target)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (key(lo) != target)
		return false;
	min = lo;
	hi = SIZE_SEARCH_MAX;
	while (lo < hi) {	/* last size with key <= target */
		mid = lo + (hi - lo + 1) / 2;
		if (key(mid) <= target)
			lo = mid;
		else
			hi = mid - 1;
	}
	*ret_min = (int64_t)min;
	*ret_max = (int64_t)lo;
	return true;
}

static int
unit_index(const char *p, size_t *ret_len)
{
	static const char units[] = "KMGTPE";
	const char	*u;
	size_t		 l = 0;

	if (*p == '\0' || *p == ' ') {
		*ret_len = 0;
		return 0;
	}
	if (strncmp(p, "bytes", 5) == 0)
		l = 5;
	else if (*p == 'B')
		l = 1;
	if (l > 0) {
		*ret_len = l;
		return (p[l] == '\0' || p[l] == ' ') ? 0 : -1;
	}
	if ((u = strchr(units, toupper((unsigned char)*p))) == NULL)
		return -1;
	l = 1;
	if (p[1] == 'i' && p[2] == 'B')
		l = 3;
	else if (p[1] == 'B')
		l = 2;
	if (p[l] != '\0' && p[l] != ' ')
		return -1;
	*ret_len = l;
	return (int)(u - units) + 1;
}

/* Range of a value rounded to its last shown digit (go-humanize style). */
static bool
invert_rounded(uint64_t digits, unsigned ndec, unsigned u, int64_t *ret_min,
    int64_t *ret_max)
{
	uint64_t	 base = UINT64_C(1) << (10 * u), div = 10, lo, hi;
	unsigned	 i;

	for (i = 0; i < ndec; i++)
		div *= 10;
	if (digits > (UINT64_C(1) << 20) || u > 4)
		return false;
	lo = digits * 10 >= 5 ? (digits * 10 - 5) * base : 0;
	hi = (digits * 10 + 5) * base;
	*ret_min = (int64_t)((lo + div - 1) / div);
	*ret_max = (int64_t)((hi + div - 1) / div) - 1;
	/* "182.9" bytes: no byte count is shown like that */
	return *ret_min <= *ret_max;
}

/*
 * Read a displayed size at s ("2.3K", " 17K", "2M", "2.0 KiB", "868 B",
 * "400", "-", "<dir>") and invert the formatter of fmt into a range.
 * Returns BM_ENOMEM or 0 (an unreadable size just stays unknown).
 */
static int
parse_size(const char *s, enum page_format fmt, struct rowinfo *ri)
{
	const char	*p = skip_sp(s), *start = p;
	uint64_t	 digits = 0, tenths;
	unsigned	 ndec = 0, nint = 0;
	size_t		 ul;
	int		 u;
	bool		 ok;

	if (strncasecmp(p, "<dir>", 5) == 0) {
		ri->is_dir = true;
		return 0;
	}
	if (*p == '-' || strncmp(p, "\xe2\x80\x94", 3) == 0) {
		if (ri->display == NULL && (ri->display =
		    strndup(p, *p == '-' ? 1 : 3)) == NULL)
			return BM_ENOMEM;
		return 0;
	}
	for (; isdigit((unsigned char)*p) && nint < 18; p++, nint++)
		digits = digits * 10 + (uint64_t)(*p - '0');
	if (nint == 0 || isdigit((unsigned char)*p))
		return 0;
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p) && ndec < 3; p++, ndec++)
			digits = digits * 10 + (uint64_t)(*p - '0');
		if (ndec == 0)
			return 0;
	}
	if (*p == ' ' && isalpha((unsigned char)p[1]))
		p++;
	if ((u = unit_index(p, &ul)) < 0)
		return 0;
	p += ul;
	free(ri->display);
	if ((ri->display = strndup(start, (size_t)(p - start))) == NULL)
		return BM_ENOMEM;
	if (u == 0 && ndec == 0) {
		ri->has_size = true;
		ri->size_min = ri->size_max = (int64_t)digits;
		return 0;
	}
	tenths = ndec == 0 ? digits * 10 : digits;
	if (ndec > 1 || tenths > (KEY_LIMIT >> (10 * (unsigned)u)) / 8)
		ok = false;
	else if (fmt == PAGE_APACHE_PRE || fmt == PAGE_APACHE_TABLE)
		ok = invert_key(key_apache, mkkey(tenths, (unsigned)u),
		    &ri->size_min, &ri->size_max);
	else if (fmt == PAGE_NGINX)
		ok = invert_key(key_nginx, mkkey(tenths, (unsigned)u),
		    &ri->size_min, &ri->size_max);
	else if (fmt == PAGE_LIGHTTPD)
		ok = invert_key(key_lighttpd, mkkey(tenths, (unsigned)u),
		    &ri->size_min, &ri->size_max);
	else
		ok = false;
	if (!ok && fmt != PAGE_APACHE_PRE && fmt != PAGE_APACHE_TABLE &&
	    fmt != PAGE_NGINX && fmt != PAGE_LIGHTTPD)
		ok = invert_rounded(digits, ndec, (unsigned)u, &ri->size_min,
		    &ri->size_max);
	ri->has_size = ok;
	return 0;
}

/* Read "date [size]" from one row of a <pre> index. */
static int
parse_row_text(const char *text, enum page_format fmt, struct rowinfo *ri)
{
	const char	*p = skip_sp(text);

	p += parse_when(p, ri);
	return parse_size(p, fmt, ri);
}

/* ---------------------------------------------------------------- */
/* DOM helpers. */

static bool
is_elem(const xmlNode *n, const char *name)
{
	return n != NULL && n->type == XML_ELEMENT_NODE &&
	    strcasecmp((const char *)n->name, name) == 0;
}

/* Attribute value, borrowed into a malloc'd copy via xmlGetProp. */
static char *
attr(const xmlNode *n, const char *name)
{
	xmlChar	*v;
	char	*s;

	if ((v = xmlGetProp(n, (const xmlChar *)name)) == NULL)
		return NULL;
	s = strdup((const char *)v);
	xmlFree(v);
	return s;
}

static bool
attr_is(const xmlNode *n, const char *name, const char *want)
{
	xmlChar	*v;
	bool	 r;

	if ((v = xmlGetProp(n, (const xmlChar *)name)) == NULL)
		return false;
	r = strcasecmp((const char *)v, want) == 0;
	xmlFree(v);
	return r;
}

static bool
has_attr(const xmlNode *n, const char *name)
{
	return xmlHasProp(n, (const xmlChar *)name) != NULL;
}

/* Normalized text content of n; NULL on ENOMEM. */
static char *
node_text(const xmlNode *n)
{
	xmlChar	*v;
	char	*s;

	if ((v = xmlNodeGetContent(n)) == NULL)
		return strdup("");
	s = normalize((const char *)v, ROW_TEXT_MAX * 16);
	xmlFree(v);
	return s;
}

/* Append text of n (a text node or an element's content) to buf. */
static void
buf_add(char *buf, size_t *len, const xmlNode *n)
{
	xmlChar	*v;
	size_t	 l;

	if ((v = xmlNodeGetContent(n)) == NULL)
		return;
	l = strlen((const char *)v);
	if (l > ROW_TEXT_MAX - 1 - *len)
		l = ROW_TEXT_MAX - 1 - *len;
	memcpy(buf + *len, v, l);
	*len += l;
	buf[*len] = '\0';
	xmlFree(v);
}

/* Text after link a up to the end of its line (<pre> indexes). */
static char *
text_after(const xmlNode *a)
{
	char		 buf[ROW_TEXT_MAX], *nl;
	size_t		 len = 0;
	const xmlNode	*n;

	buf[0] = '\0';
	for (n = a->next; n != NULL; n = n->next) {
		if (is_elem(n, "a") || is_elem(n, "br") || is_elem(n, "img"))
			break;
		if (n->type != XML_TEXT_NODE && n->type != XML_ELEMENT_NODE)
			continue;
		buf_add(buf, &len, n);
		if (strchr(buf, '\n') != NULL)
			break;
	}
	if ((nl = strchr(buf, '\n')) != NULL)
		*nl = '\0';
	return normalize(buf, sizeof(buf));
}

/* Text before link a back to the previous <br> or link (IIS). */
static char *
text_before(const xmlNode *a)
{
	char		 buf[ROW_TEXT_MAX];
	size_t		 len = 0;
	const xmlNode	*n, *start = a;

	buf[0] = '\0';
	for (n = a->prev; n != NULL; n = n->prev) {
		if (is_elem(n, "a") || is_elem(n, "br"))
			break;
		start = n;
	}
	for (n = start; n != NULL && n != a; n = n->next)
		if (n->type == XML_TEXT_NODE)
			buf_add(buf, &len, n);
	return normalize(buf, sizeof(buf));
}

static const xmlNode *
ancestor(const xmlNode *n, const char *name, const char *stop)
{
	for (n = n->parent; n != NULL && n->type == XML_ELEMENT_NODE;
	    n = n->parent) {
		if (is_elem(n, name))
			return n;
		if (stop != NULL && is_elem(n, stop))
			return NULL;
	}
	return NULL;
}

static bool
contains(const xmlNode *outer, const xmlNode *inner)
{
	for (; inner != NULL; inner = inner->parent)
		if (inner == outer)
			return true;
	return false;
}

/* First descendant element called name, depth first. */
static const xmlNode *
find_desc(const xmlNode *n, const char *name)
{
	const xmlNode	*c, *r;

	for (c = n->children; c != NULL; c = c->next) {
		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (is_elem(c, name))
			return c;
		if ((r = find_desc(c, name)) != NULL)
			return r;
	}
	return NULL;
}

/* An exact byte count from data-order/data-size/title="N bytes". */
static void
cell_exact(const xmlNode *td, struct rowinfo *ri)
{
	static const char *const names[] = { "data-size", "data-order",
	    "title" };
	char		*v, *end;
	long long	 n;
	size_t		 i;

	for (i = 0; i < 3 && !ri->has_exact; i++) {
		if ((v = attr(td, names[i])) == NULL)
			continue;
		errno = 0;
		n = strtoll(v, &end, 10);
		if (errno == 0 && end != v && n >= 0 && (i < 2 ?
		    *end == '\0' : strcmp(end, " bytes") == 0)) {
			ri->has_exact = true;
			ri->exact = n;
		}
		free(v);
	}
}

/* Read one table cell that does not hold the link. */
static int
read_cell(const xmlNode *td, enum page_format fmt, struct rowinfo *ri)
{
	const xmlNode	*t;
	char		*dt, *txt;
	int		 rc = 0;

	cell_exact(td, ri);
	if (!ri->has_time && (t = find_desc(td, "time")) != NULL &&
	    (dt = attr(t, "datetime")) != NULL) {
		(void)parse_when(dt, ri);
		free(dt);
		if (ri->has_time)
			return 0;
	}
	if ((txt = node_text(td)) == NULL)
		return BM_ENOMEM;
	if (!ri->has_time && parse_when(txt, ri) > 0)
		goto out;
	if (ri->display == NULL || !ri->has_size)
		rc = parse_size(txt, fmt, ri);
out:
	free(txt);
	return rc;
}

/* Read the other cells of the <tr> that holds link a. */
static int
read_row_cells(const xmlNode *a, enum page_format fmt, struct rowinfo *ri)
{
	const xmlNode	*tr, *td;
	int		 rc;

	if ((tr = ancestor(a, "tr", "table")) == NULL)
		return 0;
	for (td = tr->children; td != NULL; td = td->next) {
		if (!is_elem(td, "td") && !is_elem(td, "th"))
			continue;
		if (contains(td, a))
			continue;
		if ((rc = read_cell(td, fmt, ri)) != 0)
			return rc;
	}
	return 0;
}

/* ---------------------------------------------------------------- */
/* hrefs. */

static bool
ncase_prefix(const char *s, const char *pre, size_t len)
{
	return strncasecmp(s, pre, len) == 0;
}

/*
 * Split an absolute URL into a malloc'd origin "scheme://authority" and a
 * pointer to its path (or "" when it has none).  False if not absolute.
 */
static bool
split_url(const char *url, char **ret_origin, const char **ret_path)
{
	const char	*p = url, *q;

	if (!isalpha((unsigned char)*p))
		return false;
	while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' ||
	    *p == '.')
		p++;
	if (strncmp(p, "://", 3) != 0)
		return false;
	q = p + 3;
	q += strcspn(q, "/?#");
	if (ret_origin != NULL &&
	    (*ret_origin = strndup(url, (size_t)(q - url))) == NULL)
		return false;
	*ret_path = q;
	return true;
}

/* href is only "../" steps (a parent or grand-parent link). */
static bool
only_dotdots(const char *h)
{
	while (strncmp(h, "../", 3) == 0)
		h += 3;
	return strcmp(h, "..") == 0 || *h == '\0';
}

/*
 * Decide what href names, relative to the page.  Returns HREF_CHILD with
 * *ret_rel (malloc'd, decoded, relative to the page) for a candidate
 * child, HREF_IGNORE (parent/self/sort/fragment/non-HTTP links),
 * HREF_HOSTILE for an href to skip and count, or BM_ENOMEM.
 */
static int
href_rel(const struct pctx *pc, const char *href, char **ret_rel)
{
	char		*org = NULL, *dec = NULL;
	const char	*path, *h = href;
	size_t		 pl;
	int		 rc = HREF_HOSTILE;

	if (*h == '\0' || strpbrk(h, "?#") != NULL)
		return HREF_IGNORE;
	if (split_url(h, &org, &path) || strncmp(h, "//", 2) == 0) {
		if (org == NULL) {	/* scheme-relative "//host/path" */
			path = h + 2 + strcspn(h + 2, "/");
			if (pc->origin == NULL)
				goto out;
			pl = (size_t)(strstr(pc->origin, "//") - pc->origin);
			if (strlen(pc->origin) - pl != (size_t)(path - h) ||
			    !ncase_prefix(pc->origin + pl, h,
			    (size_t)(path - h)))
				goto out;
		} else if (pc->origin == NULL ||
		    strcasecmp(org, pc->origin) != 0)
			goto out;
		h = *path == '\0' ? "/" : path;
	} else if (isalpha((unsigned char)*h) && h[strspn(h, SCHEME_CHARS)] ==
	    ':') {
		rc = HREF_IGNORE;	/* javascript:, mailto:, ... */
		goto out;
	}
	if (*h == '/') {
		if (path_decode(h, strlen(h), &dec, NULL) != 0)
			goto out;
		pl = strlen(pc->pagepath);
		if (strncmp(dec, pc->pagepath, pl) == 0) {
			if ((*ret_rel = strdup(dec + pl)) == NULL)
				rc = BM_ENOMEM;
			else
				rc = HREF_CHILD;
		} else if (strncmp(pc->pagepath, dec, strlen(dec)) == 0)
			rc = HREF_IGNORE;	/* an ancestor of the page */
		goto out;
	}
	while (strncmp(h, "./", 2) == 0)
		h += 2;
	if (strcmp(h, ".") == 0 || only_dotdots(h)) {
		rc = HREF_IGNORE;
		goto out;
	}
	if (path_decode(h, strlen(h), ret_rel, NULL) != 0)
		goto out;
	rc = HREF_CHILD;
out:
	free(org);
	free(dec);
	return rc;
}

/*
 * Turn href into a child name: HREF_CHILD with *ret_name (malloc'd) and
 * *ret_dir, HREF_IGNORE, HREF_HOSTILE or BM_ENOMEM.
 */
static int
href_child(const struct pctx *pc, const char *href, char **ret_name,
    bool *ret_dir)
{
	char	*rel = NULL;
	size_t	 l;
	int	 rc;

	if ((rc = href_rel(pc, href, &rel)) != HREF_CHILD)
		return rc;
	l = strlen(rel);
	*ret_dir = false;
	if (l > 0 && rel[l - 1] == '/') {
		rel[--l] = '\0';
		*ret_dir = true;
	}
	if (l == 0 && !*ret_dir) {
		free(rel);
		return HREF_IGNORE;	/* the page itself */
	}
	if (!name_is_safe(rel, l)) {
		free(rel);
		return HREF_HOSTILE;
	}
	*ret_name = rel;
	return HREF_CHILD;
}

/* ---------------------------------------------------------------- */
/* Entries. */

/* FNV-1a of the NUL-terminated s. */
static uint64_t
fnv1a(const char *s)
{
	return text_fnv1a(s, strlen(s));
}

static int
nameset_grow(struct nameset *ns, const struct listing *out)
{
	size_t	*nv, ncap = ns->cap ? ns->cap * 2 : 64, i, j;

	if ((nv = calloc(ncap, sizeof(*nv))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < ns->cap; i++) {
		if (ns->slot[i] == 0)
			continue;
		j = fnv1a(listing_get(out, ns->slot[i] - 1)->path) &
		    (ncap - 1);
		while (nv[j] != 0)
			j = (j + 1) & (ncap - 1);
		nv[j] = ns->slot[i];
	}
	free(ns->slot);
	ns->slot = nv;
	ns->cap = ncap;
	return 0;
}

/* The hash of a handed-on entry: its path's, the low bit its type. */
static uint64_t
gone_hash(const struct entry *e)
{
	uint64_t	 h = fnv1a(e->path) & ~UINT64_C(1);

	h |= e->type == ENTRY_DIR;
	return h > 1 ? h : 2;	/* 0 marks an empty slot */
}

/* Put h into the gone set (no check for a repeat).  0 or BM_ENOMEM. */
static int
gone_put(struct nameset *ns, uint64_t h)
{
	uint64_t	*nv;
	size_t		 ncap, i, j;

	if ((ns->gn + 1) * 2 > ns->gcap) {
		ncap = ns->gcap ? ns->gcap * 2 : 1024;
		if ((nv = calloc(ncap, sizeof(*nv))) == NULL)
			return BM_ENOMEM;
		for (i = 0; i < ns->gcap; i++) {
			if (ns->gone[i] == 0)
				continue;
			j = (ns->gone[i] >> 1) & (ncap - 1);
			while (nv[j] != 0)
				j = (j + 1) & (ncap - 1);
			nv[j] = ns->gone[i];
		}
		free(ns->gone);
		ns->gone = nv;
		ns->gcap = ncap;
	}
	j = (h >> 1) & (ns->gcap - 1);
	while (ns->gone[j] != 0)
		j = (j + 1) & (ns->gcap - 1);
	ns->gone[j] = h;
	ns->gn++;
	return 0;
}

/*
 * A handed-on entry with e's path: 0 none, else its hash (the low bit
 * says whether it was a directory).  A 63-bit hash: two names that
 * collide are taken as one (at 2,000,000 names, about 1 page in 5
 * million).
 */
static uint64_t
gone_find(const struct nameset *ns, const struct entry *e)
{
	uint64_t	 h = gone_hash(e);
	size_t		 j;

	if (ns->gn == 0)
		return 0;
	for (j = (h >> 1) & (ns->gcap - 1); ns->gone[j] != 0;
	    j = (j + 1) & (ns->gcap - 1))
		if ((ns->gone[j] | 1) == (h | 1))
			return ns->gone[j];
	return 0;
}

/*
 * Move the names of out's entries into the gone set and empty the
 * index: out's entries are about to be handed on.  0 or BM_ENOMEM.
 */
static int
nameset_forget(struct nameset *ns, const struct listing *out)
{
	size_t	 i;
	int	 rc;

	for (i = 0; i < listing_count(out); i++)
		if ((rc = gone_put(ns, gone_hash(listing_get(out, i)))) != 0)
			return rc;
	if (ns->cap > 0)
		memset(ns->slot, 0, ns->cap * sizeof(*ns->slot));
	ns->n = 0;
	return 0;
}

/*
 * Record out entry idx.  Returns 0 when new, 1 with *ret_dup when its
 * path was already seen on this page, 2 with *ret_dup 1 for a handed-on
 * directory, 0 for a file (nothing left to merge into), or BM_ENOMEM.
 */
static int
nameset_add(struct nameset *ns, const struct listing *out, size_t idx,
    size_t *ret_dup)
{
	const char	*path = listing_get(out, idx)->path;
	uint64_t	 g;
	size_t		 j;
	int		 rc;

	if ((g = gone_find(ns, listing_get(out, idx))) != 0) {
		*ret_dup = g & 1;
		return 2;
	}
	if ((ns->n + 1) * 2 > ns->cap && (rc = nameset_grow(ns, out)) != 0)
		return rc;
	j = fnv1a(path) & (ns->cap - 1);
	while (ns->slot[j] != 0) {
		if (strcmp(listing_get(out, ns->slot[j] - 1)->path, path) ==
		    0) {
			*ret_dup = ns->slot[j] - 1;
			return 1;
		}
		j = (j + 1) & (ns->cap - 1);
	}
	ns->slot[j] = idx + 1;
	ns->n++;
	return 0;
}

/* Move what a row says into e (takes ri->display). */
static void
fill_entry(struct entry *e, struct rowinfo *ri)
{
	if (ri->has_time) {
		e->mtime_wall = ri->wall;
		e->mtime_nsec = ri->nsec;
		e->mtime_prec = ri->prec;
		e->zone_stated = ri->stated;
		e->zone_offset = ri->stated ? ri->off : 0;
	}
	if (ri->has_exact) {
		ri->has_size = true;
		ri->size_min = ri->size_max = ri->exact;
	}
	if (ri->has_size && e->type != ENTRY_DIR) {
		e->size_min = ri->size_min;
		e->size_max = ri->size_max;
		e->size_exact = ri->size_min == ri->size_max;
		e->size = ri->size_min + (ri->size_max - ri->size_min) / 2;
	}
	e->size_display = ri->display;
	ri->display = NULL;
}

/* A second row for a name already listed: keep what the first lacked. */
static void
merge_entry(struct entry *o, struct entry *e)
{
	char	*t;

	if (o->mtime_prec == MTIME_UNKNOWN && e->mtime_prec != MTIME_UNKNOWN) {
		o->mtime_wall = e->mtime_wall;
		o->mtime_nsec = e->mtime_nsec;
		o->mtime_prec = e->mtime_prec;
		o->zone_stated = e->zone_stated;
		o->zone_offset = e->zone_offset;
	}
	if (o->size_min < 0 && e->size_min >= 0) {
		o->size = e->size;
		o->size_min = e->size_min;
		o->size_max = e->size_max;
		o->size_exact = e->size_exact;
	}
	if (o->size_display == NULL && e->size_display != NULL) {
		t = o->size_display;
		o->size_display = e->size_display;
		e->size_display = t;
	}
}

/*
 * Append the entry for child name (decoded, safe) with row info ri.
 * Takes nothing; copies what it keeps.  0, BM_ENOMEM or BM_ELIMIT.
 */
static int
add_entry(struct pctx *pc, const char *name, bool is_dir, const char *href,
    struct rowinfo *ri)
{
	struct entry	*e;
	char		*path;
	size_t		 pl = strlen(pc->prefix), nl = strlen(name), idx, dup;
	int		 rc;

	if ((path = malloc(pl + 1 + nl + 1)) == NULL)
		return BM_ENOMEM;
	if (pl > 0) {
		memcpy(path, pc->prefix, pl);
		path[pl++] = '/';
	}
	memcpy(path + pl, name, nl + 1);
	if (!path_is_safe(path, pl + nl)) {
		free(path);
		pc->skipped++;
		return 0;
	}
	if ((rc = listing_append(pc->out, &e)) != 0) {
		free(path);
		return rc;
	}
	e->path = path;
	e->type = (is_dir || ri->is_dir) ? ENTRY_DIR : ENTRY_FILE;
	if (href != NULL && (e->href = strdup(href)) == NULL) {
		listing_pop(pc->out);
		return BM_ENOMEM;
	}
	fill_entry(e, ri);
	/*
	 * An HTML index's 0 is a hint (a growing log, a file the server
	 * could not stat): the size comes from the response, as for none
	 * (issue 22).  JSON and XML indexes state sizes as facts.
	 */
	if (pc->fmt != PAGE_NGINX_JSON && pc->fmt != PAGE_NGINX_XML &&
	    e->type == ENTRY_FILE && e->size_exact && e->size == 0) {
		e->size = e->size_min = e->size_max = ENTRY_SIZE_UNKNOWN;
		e->size_exact = false;
	}
	idx = listing_count(pc->out) - 1;
	if ((rc = nameset_add(&pc->seen, pc->out, idx, &dup)) < 0) {
		listing_pop(pc->out);
		return rc;
	}
	if (rc == 1) {
		/*
		 * "x" and "x/" on one page: the first is kept, as for any
		 * name listed twice, and the other is counted as skipped,
		 * so that the run says so.
		 */
		if (listing_get(pc->out, dup)->type != e->type)
			pc->skipped++;
		merge_entry(listing_get_mut(pc->out, dup), e);
		listing_pop(pc->out);
	} else if (rc == 2) {
		/* The first was handed on: nothing to merge into. */
		if ((dup == 1) != (e->type == ENTRY_DIR))
			pc->skipped++;
		listing_pop(pc->out);
	}
	return 0;
}

/* ---------------------------------------------------------------- */
/* HTML. */

/* Every <a href> of the document, in order. */
struct anchors {
	const xmlNode	**v;		/* owned array of borrowed nodes */
	size_t		 n;
	size_t		 cap;
};

/* Markers seen while walking the document (detect_format()). */
struct marks {
	bool	 snt, iis_parent, data_size, data_order, lighttpd, fancy;
	bool	 apache_table, pre_sort, pre_img, pre_br, ul_a, caddy;
};

static int
anchors_add(struct anchors *as, const xmlNode *n)
{
	const xmlNode	**nv;
	size_t		 ncap;

	if (as->n == as->cap) {
		ncap = as->cap ? as->cap * 2 : 64;
		if ((nv = reallocarray(as->v, ncap, sizeof(*nv))) == NULL)
			return BM_ENOMEM;
		as->v = nv;
		as->cap = ncap;
	}
	as->v[as->n++] = n;
	return 0;
}

static bool
text_has(const xmlNode *n, const char *needle)
{
	xmlChar	*v;
	bool	 r;

	if ((v = xmlNodeGetContent(n)) == NULL)
		return false;
	r = strstr((const char *)v, needle) != NULL;
	xmlFree(v);
	return r;
}

static void
mark_element(const xmlNode *n, struct marks *m)
{
	xmlChar	*h;

	if (is_elem(n, "meta") && attr_is(n, "name", "generator") &&
	    has_attr(n, "content")) {
		h = xmlGetProp(n, (const xmlChar *)"content");
		if (h != NULL && strstr((const char *)h, "SNT index") != NULL)
			m->snt = true;
		xmlFree(h);
	}
	if (has_attr(n, "data-size"))
		m->data_size = true;
	if (is_elem(n, "td") && has_attr(n, "data-order"))
		m->data_order = true;
	if (is_elem(n, "table") && attr_is(n, "id", "list"))
		m->fancy = true;
	if (is_elem(n, "table") && attr_is(n, "id", "indexlist"))
		m->apache_table = true;
	if (is_elem(n, "table") && attr_is(n, "summary", "Directory Listing"))
		m->lighttpd = true;
	if ((is_elem(n, "div") && attr_is(n, "class", "foot") &&
	    text_has(n, "lighttpd")))
		m->lighttpd = true;
	if ((is_elem(n, "footer") && text_has(n, "Caddy")))
		m->caddy = true;
	if (is_elem(n, "img") && ancestor(n, "pre", NULL) != NULL)
		m->pre_img = true;
	if (is_elem(n, "br") && ancestor(n, "pre", NULL) != NULL)
		m->pre_br = true;
}

static void
mark_anchor(const xmlNode *n, struct marks *m)
{
	xmlChar	*h;

	if (text_has(n, "[To Parent Directory]"))
		m->iis_parent = true;
	if (ancestor(n, "li", NULL) != NULL && ancestor(n, "ul", NULL) != NULL)
		m->ul_a = true;
	if ((h = xmlGetProp(n, (const xmlChar *)"href")) == NULL)
		return;
	if (strncmp((const char *)h, "?C=", 3) == 0) {
		if (ancestor(n, "pre", NULL) != NULL)
			m->pre_sort = true;
		if (ancestor(n, "table", NULL) != NULL)
			m->apache_table = true;
	}
	xmlFree(h);
}

/* Collect anchors and markers, iteratively (no recursion on hostile depth). */
static int
walk(const xmlNode *root, struct anchors *as, struct marks *m)
{
	const xmlNode	*n = root;
	int		 rc;

	while (n != NULL) {
		if (n->type == XML_ELEMENT_NODE) {
			mark_element(n, m);
			if (is_elem(n, "a") && has_attr(n, "href")) {
				mark_anchor(n, m);
				if ((rc = anchors_add(as, n)) != 0)
					return rc;
			}
		}
		if (n->children != NULL && n->type == XML_ELEMENT_NODE) {
			n = n->children;
			continue;
		}
		while (n != NULL && n->next == NULL) {
			n = n->parent;
			if (n == root || (n != NULL &&
			    n->type == XML_DOCUMENT_NODE))
				n = NULL;
			if (n == NULL)
				return 0;
		}
		if (n != NULL)
			n = n->next;
	}
	return 0;
}

static bool
title_docker(const xmlDoc *doc)
{
	const xmlNode	*t;
	char		*s;
	bool		 r = false;

	if ((t = find_desc((const xmlNode *)doc, "title")) == NULL)
		return false;
	if ((s = node_text(t)) == NULL)
		return false;
	r = strncmp(s, "Index of ", 9) == 0 && s[9] != '/' && s[9] != '\0';
	free(s);
	return r;
}

static bool
title_index_of(const xmlDoc *doc)
{
	const xmlNode	*t;
	char		*s;
	bool		 r;

	if ((t = find_desc((const xmlNode *)doc, "title")) == NULL)
		return false;
	if ((s = node_text(t)) == NULL)
		return false;
	r = strstr(s, "Index of ") != NULL;
	free(s);
	return r;
}

/* Decide between the <pre> formats by what the rows hold. */
static enum page_format
detect_pre(const xmlDoc *doc, const struct anchors *as, const struct marks *m)
{
	struct rowinfo	 ri;
	char		*t;
	size_t		 i;
	enum page_format f = PAGE_GENERIC;

	if (m->pre_sort || m->pre_img)
		return PAGE_APACHE_PRE;
	for (i = 0; i < as->n && f == PAGE_GENERIC; i++) {
		if (ancestor(as->v[i], "pre", NULL) == NULL)
			continue;
		if (m->pre_br) {
			if ((t = text_before(as->v[i])) == NULL)
				break;
			memset(&ri, 0, sizeof(ri));
			if (parse_when(t, &ri) > 0)
				f = PAGE_IIS;
			free(t);
			continue;
		}
		if ((t = text_after(as->v[i])) == NULL)
			break;
		if (isdigit((unsigned char)t[0]) && isdigit((unsigned char)t[1])
		    && t[2] == '-' && isalpha((unsigned char)t[3]))
			f = PAGE_NGINX;
		else if (strlen(t) > 4 && isdigit((unsigned char)t[0]) &&
		    t[4] == '-')
			f = PAGE_DOCKER;
		free(t);
	}
	if (f == PAGE_GENERIC && title_docker(doc))
		f = PAGE_DOCKER;
	return f;
}

static enum page_format
detect_format(const xmlDoc *doc, const struct anchors *as,
    const struct marks *m)
{
	bool	 has_pre;

	if (m->snt)
		return PAGE_SNT;
	if (m->iis_parent)
		return PAGE_IIS;
	if (m->data_size)
		return PAGE_CADDY2;
	if (m->data_order || m->caddy)
		return PAGE_CADDY1;
	if (m->lighttpd)
		return PAGE_LIGHTTPD;
	if (m->fancy)
		return PAGE_NGINX_FANCY;
	if (m->apache_table)
		return PAGE_APACHE_TABLE;
	has_pre = find_desc((const xmlNode *)doc, "pre") != NULL;
	if (has_pre) {
		enum page_format f = detect_pre(doc, as, m);

		if (f != PAGE_GENERIC)
			return f;
	}
	if (m->ul_a && title_index_of(doc))
		return PAGE_APACHE_UL;
	return PAGE_GENERIC;
}

/* Size and date for link a, from wherever its format keeps them. */
static int
read_row(const xmlNode *a, enum page_format fmt, struct rowinfo *ri)
{
	char	*t = NULL;
	int	 rc = 0;

	switch (fmt) {
	case PAGE_NGINX:
	case PAGE_APACHE_PRE:
	case PAGE_DOCKER:
		if ((t = text_after(a)) == NULL)
			return BM_ENOMEM;
		rc = parse_row_text(t, fmt, ri);
		break;
	case PAGE_IIS:
		if ((t = text_before(a)) == NULL)
			return BM_ENOMEM;
		rc = parse_row_text(t, fmt, ri);
		break;
	case PAGE_APACHE_TABLE:
	case PAGE_NGINX_FANCY:
	case PAGE_LIGHTTPD:
	case PAGE_CADDY1:
	case PAGE_CADDY2:
	case PAGE_SNT:
		rc = read_row_cells(a, fmt, ri);
		break;
	default:
		break;
	}
	free(t);
	return rc;
}

/* Link text is exactly name + "/" (docker's slash-less directories). */
static bool
text_says_dir(const xmlNode *a, const char *name)
{
	char	*t;
	size_t	 l = strlen(name);
	bool	 r;

	if ((t = node_text(a)) == NULL)
		return false;
	r = strncmp(t, name, l) == 0 && strcmp(t + l, "/") == 0;
	free(t);
	return r;
}

static int
html_anchor(struct pctx *pc, const xmlNode *a)
{
	struct rowinfo	 ri;
	char		*href, *name = NULL;
	bool		 is_dir = false;
	int		 rc;

	memset(&ri, 0, sizeof(ri));
	if ((href = attr(a, "href")) == NULL)
		return BM_ENOMEM;
	if ((rc = href_child(pc, href, &name, &is_dir)) != HREF_CHILD) {
		if (rc == HREF_HOSTILE)
			pc->skipped++;
		rc = rc < 0 ? rc : 0;
		goto out;
	}
	if (!is_dir && text_says_dir(a, name))
		is_dir = true;
	if ((rc = read_row(a, pc->fmt, &ri)) != 0)
		goto out;
	rc = add_entry(pc, name, is_dir, href, &ri);
out:
	free(ri.display);
	free(name);
	free(href);
	return rc;
}

/* ---------------------------------------------------------------- */
/* nginx JSON and XML. */

/* An entry named by a raw (not URL-encoded) name from JSON or XML. */
static int
add_raw(struct pctx *pc, const char *name, size_t nlen, bool is_dir,
    const char *mtime, int64_t size)
{
	struct rowinfo	 ri;
	char		 num[32];
	int		 rc;

	memset(&ri, 0, sizeof(ri));
	if (strlen(name) != nlen || !name_is_safe(name, nlen)) {
		pc->skipped++;
		return 0;
	}
	if (mtime != NULL)
		(void)parse_when(mtime, &ri);
	if (size >= 0 && !is_dir) {
		ri.has_exact = true;
		ri.exact = size;
		(void)snprintf(num, sizeof(num), "%lld", (long long)size);
		if ((ri.display = strdup(num)) == NULL)
			return BM_ENOMEM;
	}
	rc = add_entry(pc, name, is_dir, NULL, &ri);
	free(ri.display);
	return rc;
}

static int
xml_node(struct pctx *pc, const xmlNode *n)
{
	xmlChar		*name, *mt, *sz;
	char		*end;
	long long	 size = -1;
	bool		 dir = is_elem(n, "directory");
	int		 rc;

	if (!dir && !is_elem(n, "file"))
		return 0;
	if ((name = xmlNodeGetContent(n)) == NULL)
		return BM_ENOMEM;
	mt = xmlGetProp(n, (const xmlChar *)"mtime");
	sz = xmlGetProp(n, (const xmlChar *)"size");
	if (sz != NULL) {
		errno = 0;
		size = strtoll((const char *)sz, &end, 10);
		if (errno != 0 || *end != '\0' || end == (char *)sz)
			size = -1;
	}
	rc = add_raw(pc, (const char *)name, strlen((const char *)name), dir,
	    (const char *)mt, size);
	xmlFree(name);
	xmlFree(mt);
	xmlFree(sz);
	return rc;
}

/* ---------------------------------------------------------------- */

static const uint8_t *
skip_ws(const uint8_t *p, const uint8_t *end)
{
	if (end - p >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)
		p += 3;
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' ||
	    *p == '\n'))
		p++;
	return p;
}

/* charset=... of a Content-Type, malloc'd, or NULL. */
static char *
ct_charset(const char *ct)
{
	const char	*p;
	size_t		 l;

	if (ct == NULL || (p = strcasestr(ct, "charset=")) == NULL)
		return NULL;
	p += 8;
	if (*p == '"')
		p++;
	l = strcspn(p, "\"; \t");
	return l > 0 && l < 40 ? strndup(p, l) : NULL;
}

static int
pctx_init(struct pctx *pc, const char *page_url, const char *prefix,
    struct listing *out)
{
	const char	*path = "/";
	size_t		 l;
	char		*dec;

	memset(pc, 0, sizeof(*pc));
	pc->out = out;
	pc->prefix = prefix != NULL ? prefix : "";
	if (page_url != NULL && !split_url(page_url, &pc->origin, &path))
		return BM_EINVAL;
	if (*path == '\0')
		path = "/";
	l = strcspn(path, "?#");
	if (path_decode(path, l, &dec, &l) != 0) {
		if ((dec = strndup(path, l)) == NULL)
			return BM_ENOMEM;
	}
	/* Only the directory part counts: cut after the last '/'. */
	while (l > 0 && dec[l - 1] != '/')
		dec[--l] = '\0';
	pc->pagepath = dec;
	return 0;
}

/* ---------------------------------------------------------------- */
/*
 * Pages parsed as they arrive (list_http_push_*).  HTML goes to libxml2's
 * push parser; the tree it builds is pruned as rows complete: once
 * prune_bytes have come in, the format is decided from the tree so far,
 * the links whose rows can no longer change are read, and every node
 * before the last link read is freed (never a node the parser still
 * holds: the open elements and their last children).  nginx JSON is cut
 * into its array's elements, each read alone; nginx XML goes to the XML
 * push parser and the finished children of <list> are read and freed.
 */

#define PUSH_SNIFF_MAX	(64 * 1024)	/* leading bytes kept to pick a mode */
#define PUSH_XML_KEEP	(8 * 1024 * 1024) /* XML kept to re-read as HTML */
#define PUSH_ITEM_MAX	(1024 * 1024)	/* one JSON array element */
#define PUSH_CHUNK_MAX	(1 << 30)	/* bytes per libxml2 chunk call */
#define PUSH_PENDING_MAX (16 * 1024 * 1024) /* HTML libxml2 holds unparsed */
#define PUSH_FIX_LINKS	256		/* links seen before the first prune */

enum push_mode { PUSH_SNIFF = 0, PUSH_HTML, PUSH_JSON, PUSH_XML };

/* html_cut_short's markers, seen as bytes pass. */
struct cutscan {
	uint64_t	 tail;		/* the last 8 bytes, lower case */
	bool		 open;		/* "<html" seen */
	bool		 close;		/* "</html" seen */
	bool		 link;		/* "<a" + space after the last "</html" */
};

/* nginx's JSON array, cut into elements. */
struct jsplit {
	uint8_t		*buf;		/* owned: the element so far */
	size_t		 len, cap;
	int		 depth;		/* brackets open inside the element */
	bool		 started;	/* '[' seen */
	bool		 ended;		/* ']' seen */
	bool		 in_str, esc;	/* inside a string, after '\\' */
};

struct list_http_push {
	struct pctx	 pc;
	enum push_mode	 mode;
	char		*ctype;		/* owned: Content-Type, NULL if none */
	size_t		 n0;		/* out's count when the page began */
	size_t		 prune_bytes;	/* HTML bytes between prunes, 0: none */
	size_t		 since;		/* HTML bytes since the last prune */
	bool		 fixed;		/* fmt decided mid-page (pruned) */
	const xmlNode	*last;		/* borrowed: last link read, in the tree */
	uint8_t		*keep;		/* owned: sniffed bytes, or XML kept for
					   a re-read as HTML */
	size_t		 keeplen, keepcap;
	bool		 keep_lost;	/* XML outgrew PUSH_XML_KEEP */
	bool		 malformed;	/* XML refused: read as HTML */
	htmlParserCtxtPtr html;		/* owned, NULL */
	xmlParserCtxtPtr xml;		/* owned, NULL */
	struct cutscan	 cut;
	struct jsplit	 js;
	int		 rc;		/* first failure, sticky */
	char		 err[256];	/* its reason */
};

static void
push_fail(struct list_http_push *hp, int rc, const char *a, const char *b)
{
	if (hp->rc != 0)
		return;
	hp->rc = rc;
	set_err(hp->err, sizeof(hp->err), a, b);
}

static int
keep_add(struct list_http_push *hp, const uint8_t *data, size_t len)
{
	uint8_t	*nb;
	size_t	 ncap;

	if (len == 0)
		return 0;
	if (hp->keeplen + len > hp->keepcap) {
		ncap = hp->keepcap ? hp->keepcap : 4096;
		while (ncap < hp->keeplen + len)
			ncap *= 2;
		if ((nb = realloc(hp->keep, ncap)) == NULL)
			return BM_ENOMEM;
		hp->keep = nb;
		hp->keepcap = ncap;
	}
	memcpy(hp->keep + hp->keeplen, data, len);
	hp->keeplen += len;
	return 0;
}

static void
keep_drop(struct list_http_push *hp)
{
	free(hp->keep);
	hp->keep = NULL;
	hp->keeplen = hp->keepcap = 0;
}

/* s (at most 8 bytes) as the low bytes of a shift register. */
static uint64_t
tail_of(const char *s)
{
	uint64_t	 v = 0;

	for (; *s != '\0'; s++)
		v = v << 8 | (uint8_t)*s;
	return v;
}

/*
 * Pass bytes through the cut-short markers (cut_short's rule).  Each
 * marker begins with '<': while none is in the tail's last 5 bytes, the
 * bytes up to the next '<' cannot end one and are skipped (the tail
 * then holds none of them: it is 0, which no marker matches).
 */
static void
cut_feed(struct cutscan *cs, const uint8_t *p, size_t len)
{
	const uint64_t	 m2 = 0xffff, m5 = 0xffffffffffULL,
			 m6 = 0xffffffffffffULL;
	const uint64_t	 a = tail_of("<a"), open = tail_of("<html"),
			 close = tail_of("</html");
	const uint64_t	 lt5 = 0x3c3c3c3c3cULL, hi3 = 0xffffff0000000000ULL,
			 ones = 0x0101010101010101ULL,
			 highs = 0x8080808080808080ULL;
	const uint8_t	*lt;
	uint64_t	 v;
	size_t		 i;
	int		 c;

	for (i = 0; i < len; i++) {
		/* v has a zero byte where the tail's last 5 hold a '<'. */
		v = (cs->tail ^ lt5) | hi3;
		if (((v - ones) & ~v & highs) == 0) {
			cs->tail = 0;
			if ((lt = memchr(p + i, '<', len - i)) == NULL)
				return;
			i = (size_t)(lt - p);
		}
		c = tolower(p[i]);
		if ((c == ' ' || c == '\t' || c == '\n' || c == '\r') &&
		    cs->close && (cs->tail & m2) == a)
			cs->link = true;
		cs->tail = cs->tail << 8 | (uint8_t)c;
		if ((cs->tail & m6) == close) {
			cs->close = true;
			cs->link = false;
		} else if ((cs->tail & m5) == open)
			cs->open = true;
	}
}

/*
 * An HTML document cut short: it opens <html> but has no </html> after
 * its last link.  A server or proxy that closes the connection early (no
 * Content-Length), or sends complete chunked framing around half a page,
 * gives a body that parses as a smaller listing (libxml2's HTML parser
 * closes what is open at the end, as HTML allows), and the files past
 * the cut would be taken as gone upstream.  Every index format biomirror
 * knows (tests/fixtures/LISTINGS.md) ends with </html>; a page that
 * never opens <html> cannot be judged and is taken as it is.
 */
static bool
cut_short(const struct cutscan *cs)
{
	return cs->close ? cs->link : cs->open;
}

/* n is an element the parser has open (it may still get children). */
static bool
node_open(const struct list_http_push *hp, const xmlNode *n)
{
	const xmlNode	*o;

	for (o = hp->html->node; o != NULL; o = o->parent)
		if (o == n)
			return true;
	return false;
}

/* n can no longer change: closed, and not the last child of an open one. */
static bool
node_done(const struct list_http_push *hp, const xmlNode *n)
{
	return !node_open(hp, n) && (n->next != NULL ||
	    n->parent == NULL || !node_open(hp, n->parent));
}

/* What read_row reads for link a can no longer change. */
static bool
html_ready(const struct list_http_push *hp, const xmlNode *a)
{
	const xmlNode	*n, *tr;

	if (!node_done(hp, a))
		return false;
	switch (hp->pc.fmt) {
	case PAGE_NGINX:
	case PAGE_APACHE_PRE:
	case PAGE_DOCKER:
		for (n = a->next; n != NULL; n = n->next) {
			if (!node_done(hp, n))
				return false;
			if (is_elem(n, "a") || is_elem(n, "br") ||
			    is_elem(n, "img"))
				return true;
			if (n->type == XML_TEXT_NODE && n->content != NULL &&
			    strchr((const char *)n->content, '\n') != NULL)
				return true;
		}
		return a->parent == NULL || !node_open(hp, a->parent);
	case PAGE_APACHE_TABLE:
	case PAGE_NGINX_FANCY:
	case PAGE_LIGHTTPD:
	case PAGE_CADDY1:
	case PAGE_CADDY2:
	case PAGE_SNT:
		tr = ancestor(a, "tr", "table");
		return tr == NULL || node_done(hp, tr);
	default:
		return true;
	}
}

/*
 * Free what lies before link a (read) in document order: the earlier
 * siblings of a and of each of its ancestors below the root element.
 * Those are closed and never the last child of an open element, so the
 * parser holds none of them.  The root's siblings (the DTD) stay.
 */
static void
html_free_before(const xmlNode *a)
{
	xmlNode	*x, *p;

	if (a->parent == NULL || a->parent->type != XML_ELEMENT_NODE)
		return;
	while ((p = a->prev) != NULL) {
		xmlUnlinkNode(p);
		xmlFreeNode(p);
	}
	for (x = a->parent; x->parent != NULL &&
	    x->parent->type == XML_ELEMENT_NODE; x = x->parent) {
		while ((p = x->prev) != NULL) {
			xmlUnlinkNode(p);
			xmlFreeNode(p);
		}
	}
}

/*
 * Read the links of the tree so far: with final every one left, else
 * those html_ready and then free what lies before them.  The first
 * call that is not final fixes the format.  Returns 0 or a BM_E* code.
 */
static int
html_flush(struct list_http_push *hp, bool final)
{
	struct anchors	 as = { NULL, 0, 0 };
	struct marks	 m;
	htmlDocPtr	 doc = hp->html->myDoc;
	const xmlNode	*root, *read = NULL;
	size_t		 i = 0;
	int		 rc;

	memset(&m, 0, sizeof(m));
	if (doc == NULL || (root = xmlDocGetRootElement(doc)) == NULL) {
		if (final)
			push_fail(hp, BM_EPROTO, "not an HTML page", "");
		return hp->rc;
	}
	if ((rc = walk(root, &as, &m)) != 0)
		goto out;
	/* The format is fixed from the first PUSH_FIX_LINKS links or more. */
	if (!final && !hp->fixed && as.n < PUSH_FIX_LINKS) {
		rc = 0;
		goto out;
	}
	if (!hp->fixed)
		hp->pc.fmt = detect_format(doc, &as, &m);
	/*
	 * No known generator and not one link, not even to the parent: an
	 * error page, a truncated or garbage body, not an empty directory
	 * (every index generator links its parent or its sort orders, or
	 * titles the page "Index of").  Failing the page keeps a crawl from
	 * taking it as a directory that emptied.
	 */
	if (final && !hp->fixed && hp->pc.fmt == PAGE_GENERIC && as.n == 0 &&
	    !title_index_of(doc)) {
		push_fail(hp, BM_EPROTO, "not an index page", "no links");
		rc = BM_EPROTO;
		goto out;
	}
	hp->fixed = hp->fixed || !final;
	if (hp->last != NULL)
		while (i < as.n && as.v[i++] != hp->last)
			;
	for (; i < as.n; i++) {
		if (!final && !html_ready(hp, as.v[i]))
			break;
		if ((rc = html_anchor(&hp->pc, as.v[i])) != 0)
			goto out;
		read = as.v[i];
	}
	if (read != NULL) {
		hp->last = read;
		if (!final)
			html_free_before(read);
	}
	rc = 0;
out:
	free(as.v);
	return rc;
}

static int
html_start(struct list_http_push *hp)
{
	xmlCharEncodingHandlerPtr h;
	char		*cs = ct_charset(hp->ctype);

	hp->mode = PUSH_HTML;
	hp->html = htmlCreatePushParserCtxt(NULL, NULL, NULL, 0, NULL,
	    XML_CHAR_ENCODING_NONE);
	if (hp->html == NULL) {
		free(cs);
		return BM_ENOMEM;
	}
	(void)htmlCtxtUseOptions(hp->html, HTML_PARSE_RECOVER |
	    HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET);
	if (cs != NULL && (h = xmlFindCharEncodingHandler(cs)) != NULL)
		(void)xmlSwitchToEncoding(hp->html, h);
	free(cs);
	return 0;
}

/* Hand bytes to libxml2's HTML push parser, in pieces of PUSH_CHUNK_MAX. */
static void
html_chunk(struct list_http_push *hp, const uint8_t *p, size_t len)
{
	size_t	 n;

	while (len > 0) {
		n = len < PUSH_CHUNK_MAX ? len : PUSH_CHUNK_MAX;
		(void)htmlParseChunk(hp->html, (const char *)p, (int)n, 0);
		p += n;
		len -= n;
	}
}

/*
 * Refuse a page whose one tag, comment or text run outgrows
 * PUSH_PENDING_MAX: libxml2 holds it unparsed until it ends (a 200 MB
 * attribute peaked at 850 MB).  Returns hp->rc (BM_EPROTO then).
 */
static int
html_pending(struct list_http_push *hp)
{
	const xmlParserInput	*in = hp->html->input;

	if (in != NULL && in->cur != NULL && in->end != NULL &&
	    in->end - in->cur > PUSH_PENDING_MAX)
		push_fail(hp, BM_EPROTO, "index page", "a tag, comment or "
		    "text run of over 16 MiB");
	return hp->rc;
}

/*
 * HTML bytes.  libxml2 (2.9) misses an end tag of a raw-text element
 * split between two chunks ("</sty" + "le>": the rest of the page is
 * taken as style), so a chunk ends only after a '>': what follows the
 * last one waits in keep (up to PUSH_SNIFF_MAX, then goes anyway).
 */
static int
html_feed(struct list_http_push *hp, const uint8_t *p, size_t len)
{
	const uint8_t	*gt = NULL;
	size_t		 j, head;
	int		 rc;

	if (len == 0)
		return 0;
	for (j = len; j > 0 && gt == NULL; j--)
		if (p[j - 1] == '>')
			gt = p + j - 1;
	head = gt != NULL ? (size_t)(gt - p) + 1 : 0;
	if (head == 0 && hp->keeplen + len <= PUSH_SNIFF_MAX)
		return keep_add(hp, p, len);
	if (head == 0)
		head = len;
	if (hp->keeplen > 0) {
		if ((rc = keep_add(hp, p, head)) != 0)
			return rc;
		html_chunk(hp, hp->keep, hp->keeplen);
		hp->keeplen = 0;
	} else
		html_chunk(hp, p, head);
	hp->since += head;
	if ((rc = html_pending(hp)) != 0)
		return rc;
	if ((rc = keep_add(hp, p + head, len - head)) != 0)
		return rc;
	if (hp->prune_bytes > 0 && hp->since >= hp->prune_bytes) {
		hp->since = 0;
		return html_flush(hp, false);
	}
	return 0;
}

/* Start the HTML parser and feed it what keep holds. */
static int
html_restart(struct list_http_push *hp)
{
	uint8_t	*old = hp->keep;
	size_t	 n = hp->keeplen;
	int	 rc;

	hp->keep = NULL;
	hp->keeplen = hp->keepcap = 0;
	if ((rc = html_start(hp)) == 0)
		rc = html_feed(hp, old, n);
	free(old);
	return rc;
}

/* One element of nginx's JSON array. */
static int
json_item(struct pctx *pc, const uint8_t *p, size_t len, char *errbuf,
    size_t errlen)
{
	json_t		*v, *jn, *jt, *jm, *js;
	json_error_t	 jerr;
	const char	*type;
	int64_t		 size;
	int		 rc = 0;

	if ((v = json_loadb((const char *)p, len, 0, &jerr)) == NULL) {
		set_err(errbuf, errlen, "JSON listing", jerr.text);
		return BM_EPROTO;
	}
	jn = json_object_get(v, "name");
	jt = json_object_get(v, "type");
	jm = json_object_get(v, "mtime");
	js = json_object_get(v, "size");
	if (!json_is_string(jn) || !json_is_string(jt)) {
		pc->skipped++;
		goto out;
	}
	type = json_string_value(jt);
	if (strcmp(type, "file") != 0 && strcmp(type, "directory") != 0)
		goto out;	/* "other": sockets, fifos */
	size = json_is_integer(js) ? json_integer_value(js) : -1;
	rc = add_raw(pc, json_string_value(jn), json_string_length(jn),
	    strcmp(type, "directory") == 0, json_is_string(jm) ?
	    json_string_value(jm) : NULL, size);
out:
	json_decref(v);
	return rc;
}

static bool
json_ws(int c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Bytes of the JSON array: cut at its top-level commas and ']'. */
static int
json_feed(struct list_http_push *hp, const uint8_t *p, size_t len)
{
	struct jsplit	*js = &hp->js;
	size_t		 i;
	int		 c, rc;

	for (i = 0; i < len && hp->rc == 0; i++) {
		c = p[i];
		if (!js->started || js->ended) {
			if (json_ws(c))
				continue;
			if (js->ended || c != '[') {
				push_fail(hp, BM_EPROTO, "JSON listing",
				    js->ended ? "bytes after the array" :
				    "not an array");
				break;
			}
			js->started = true;
			continue;
		}
		if (js->in_str) {
			if (js->esc)
				js->esc = false;
			else if (c == '\\')
				js->esc = true;
			else if (c == '"')
				js->in_str = false;
		} else if (c == '"')
			js->in_str = true;
		else if (c == '{' || c == '[')
			js->depth++;
		else if ((c == '}' || c == ']') && js->depth > 0)
			js->depth--;
		else if ((c == ',' || c == ']') && js->depth == 0) {
			if (c == ']')
				js->ended = true;
			if (js->len > 0 || c == ',') {
				rc = json_item(&hp->pc, js->buf, js->len,
				    hp->err, sizeof(hp->err));
				if (rc != 0 && hp->rc == 0)
					hp->rc = rc;
			}
			js->len = 0;
			continue;
		}
		if (js->len == 0 && json_ws(c))
			continue;
		if (js->len == js->cap) {
			uint8_t	*nb;
			size_t	 ncap = js->cap ? js->cap * 2 : 256;

			if (ncap > PUSH_ITEM_MAX) {
				push_fail(hp, BM_EPROTO, "JSON listing",
				    "an element over 1 MiB");
				break;
			}
			if ((nb = realloc(js->buf, ncap)) == NULL)
				return BM_ENOMEM;
			js->buf = nb;
			js->cap = ncap;
		}
		js->buf[js->len++] = (uint8_t)c;
	}
	return hp->rc == BM_ENOMEM || hp->rc == BM_ELIMIT ? hp->rc : 0;
}

/* Read and free the finished children of <list> (all with final). */
static int
xml_flush(struct list_http_push *hp, bool final)
{
	xmlNode	*root, *n;
	int	 rc;

	if (hp->xml->myDoc == NULL ||
	    (root = xmlDocGetRootElement(hp->xml->myDoc)) == NULL)
		return 0;
	if (strcmp((const char *)root->name, "list") != 0)
		return 1;
	while ((n = root->children) != NULL && (final || n->next != NULL)) {
		if ((rc = xml_node(&hp->pc, n)) != 0)
			return rc;
		xmlUnlinkNode(n);
		xmlFreeNode(n);
	}
	return 0;
}

/* Drop what XML gave and read the page again as HTML (XML refused it). */
static int
xml_to_html(struct list_http_push *hp, bool malformed)
{
	while (listing_count(hp->pc.out) > hp->n0)
		listing_pop(hp->pc.out);
	free(hp->pc.seen.slot);
	free(hp->pc.seen.gone);
	memset(&hp->pc.seen, 0, sizeof(hp->pc.seen));
	hp->pc.skipped = 0;
	xmlFreeDoc(hp->xml->myDoc);
	hp->xml->myDoc = NULL;
	xmlFreeParserCtxt(hp->xml);
	hp->xml = NULL;
	hp->malformed = malformed;
	if (hp->keep_lost) {
		push_fail(hp, BM_EPROTO, "not an index page", malformed ?
		    "malformed XML" : "XML that is not an nginx <list>");
		return 0;
	}
	return html_restart(hp);
}

static int
xml_feed(struct list_http_push *hp, const uint8_t *p, size_t len, bool end)
{
	int	 rc;
	size_t	 n;

	if (!hp->keep_lost && len > 0) {
		if (hp->keeplen + len > PUSH_XML_KEEP) {
			keep_drop(hp);
			hp->keep_lost = true;
		} else if ((rc = keep_add(hp, p, len)) != 0)
			return rc;
	}
	do {
		n = len < PUSH_CHUNK_MAX ? len : PUSH_CHUNK_MAX;
		(void)xmlParseChunk(hp->xml, (const char *)p, (int)n,
		    end && n == len);
		if (n > 0)	/* p may be NULL for an empty last chunk */
			p += n;
		len -= n;
	} while (len > 0);
	if (!hp->xml->wellFormed)
		return xml_to_html(hp, true);
	if ((rc = xml_flush(hp, end)) == 1)
		return xml_to_html(hp, false);
	return rc;
}

/*
 * Pick the mode from Content-Type and the first bytes of the page,
 * data..data + len: hp->keep (what was kept so far) or, with nothing
 * kept, the caller's bytes, read without a copy.  Returns 0 with the
 * mode still PUSH_SNIFF while not yet known, or what the feed returns.
 */
static int
push_pick(struct list_http_push *hp, const uint8_t *data, size_t len,
    bool end)
{
	const uint8_t	*p, *e;
	const char	*ct = hp->ctype;
	uint8_t		*old = NULL;
	int		 rc;

	/* An empty page: nothing kept yet (NULL: no offset from it). */
	e = data != NULL ? data + len : NULL;
	p = skip_ws(data, e);
	if ((ct == NULL || strncasecmp(ct, "application/json", 16) != 0) &&
	    (ct == NULL || strcasestr(ct, "/xml") == NULL) && !end &&
	    len < PUSH_SNIFF_MAX && (p == e || (*p == 0xef &&
	    e - p < 3) || (*p == '<' && e - p < 5)))
		return 0;	/* not yet known */
	/* Each mode starts with nothing kept. */
	if (data != NULL && data == hp->keep) {
		old = hp->keep;
		hp->keep = NULL;
		hp->keeplen = hp->keepcap = 0;
	}
	if ((ct != NULL && strncasecmp(ct, "application/json", 16) == 0) ||
	    (p < e && *p == '[')) {
		hp->mode = PUSH_JSON;
		hp->pc.fmt = PAGE_NGINX_JSON;
		rc = json_feed(hp, data, len);
	} else if ((ct != NULL && strcasestr(ct, "/xml") != NULL) ||
	    (e - p >= 5 && memcmp(p, "<?xml", 5) == 0)) {
		hp->mode = PUSH_XML;
		hp->pc.fmt = PAGE_NGINX_XML;
		if ((hp->xml = xmlCreatePushParserCtxt(NULL, NULL, NULL, 0,
		    NULL)) == NULL)
			rc = BM_ENOMEM;
		else {
			(void)xmlCtxtUseOptions(hp->xml, XML_PARSE_NONET |
			    XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
			rc = xml_feed(hp, data, len, false);
		}
	} else if ((rc = html_start(hp)) == 0)
		rc = html_feed(hp, data, len);
	free(old);
	return rc;
}

/*
 * A page being parsed as it arrives: like list_http_parse (same
 * arguments, borrowed for the parser's life), with content_type's copy,
 * and the tree pruned every prune_bytes of HTML (0: only at the end).
 * Returns 0 or BM_ENOMEM.  Free with list_http_push_free().
 */
int
list_http_push_new(const char *content_type, const char *page_url,
    const char *prefix, struct listing *out, size_t prune_bytes,
    struct list_http_push **ret)
{
	struct list_http_push *hp;
	int		 rc;

	if ((hp = calloc(1, sizeof(*hp))) == NULL)
		return BM_ENOMEM;
	hp->n0 = listing_count(out);
	hp->prune_bytes = prune_bytes;
	if (content_type != NULL && content_type[0] != '\0' &&
	    (hp->ctype = strdup(content_type)) == NULL) {
		free(hp);
		return BM_ENOMEM;
	}
	if ((rc = pctx_init(&hp->pc, page_url, prefix, out)) != 0) {
		set_err(hp->err, sizeof(hp->err), page_url ? page_url : "",
		    "bad page URL");
		hp->rc = rc == BM_EINVAL ? BM_EPROTO : rc;
	}
	*ret = hp;
	return 0;
}

/*
 * The next len bytes of the page (borrowed).  Returns 0, or BM_ENOMEM or
 * BM_ELIMIT (out is full): the page is lost.  Other failures wait for
 * list_http_push_end().
 */
int
list_http_push_feed(struct list_http_push *hp, const uint8_t *data,
    size_t len)
{
	int	 rc = 0;

	if (hp->rc != 0)
		return hp->rc == BM_ENOMEM || hp->rc == BM_ELIMIT ? hp->rc : 0;
	cut_feed(&hp->cut, data, len);
	switch (hp->mode) {
	case PUSH_SNIFF:
		if (hp->keeplen == 0) {
			rc = push_pick(hp, data, len, false);
			if (rc == 0 && hp->mode == PUSH_SNIFF)
				rc = keep_add(hp, data, len);
		} else if ((rc = keep_add(hp, data, len)) == 0)
			rc = push_pick(hp, hp->keep, hp->keeplen, false);
		break;
	case PUSH_HTML:
		rc = html_feed(hp, data, len);
		break;
	case PUSH_JSON:
		rc = json_feed(hp, data, len);
		break;
	case PUSH_XML:
		rc = xml_feed(hp, data, len, false);
		break;
	}
	if (rc != 0 && hp->rc == 0)
		hp->rc = rc;
	return rc == BM_ENOMEM || rc == BM_ELIMIT ? rc : 0;
}

/*
 * True when every entry in out is final: no later row merges into it
 * and only the page's failure takes it back (an XML page is read again
 * as HTML until PUSH_XML_KEEP is passed).
 */
bool
list_http_push_firm(const struct list_http_push *hp)
{
	return hp->rc == 0 && (hp->mode == PUSH_HTML ||
	    hp->mode == PUSH_JSON || (hp->mode == PUSH_XML && hp->keep_lost));
}

/*
 * The entries in out are handed on (list_http_push_firm): their names
 * are kept as hashes, to drop a later row that repeats one; the caller
 * then empties out.  Returns 0 or BM_ENOMEM.
 */
int
list_http_push_forget(struct list_http_push *hp)
{
	int	 rc;

	if ((rc = nameset_forget(&hp->pc.seen, hp->pc.out)) != 0)
		return rc;
	hp->n0 = 0;
	return 0;
}

/* The end of the page: the rest of list_http_parse's work. */
static int
push_finish(struct list_http_push *hp)
{
	int	 rc;

	if (hp->mode == PUSH_SNIFF &&
	    (rc = push_pick(hp, hp->keep, hp->keeplen, true)) != 0)
		return rc;
	if (hp->rc != 0)
		return hp->rc;
	if (hp->mode == PUSH_XML && (rc = xml_feed(hp, NULL, 0, true)) != 0)
		return rc;
	if (hp->rc != 0 || hp->mode == PUSH_XML)
		return hp->rc;
	if (hp->mode == PUSH_JSON) {
		if (!hp->js.ended)
			push_fail(hp, BM_EPROTO, "JSON listing",
			    hp->js.started ? "the array is not closed" :
			    "not an array");
		return hp->rc;
	}
	if (!hp->malformed && cut_short(&hp->cut)) {
		push_fail(hp, BM_EPROTO, "incomplete index page",
		    "the HTML ends before its </html> (cut short in transit?)");
		return hp->rc;
	}
	html_chunk(hp, hp->keep, hp->keeplen);
	hp->keeplen = 0;
	(void)htmlParseChunk(hp->html, NULL, 0, 1);
	if ((rc = html_flush(hp, true)) != 0 && hp->rc == 0)
		hp->rc = rc;
	/*
	 * XML that libxml2 refused (nginx writes a name's control
	 * characters into its XML autoindex as they are, which XML 1.0 does
	 * not allow) and no HTML in it either: say so, not "no links".
	 */
	if (hp->rc == BM_EPROTO && hp->malformed)
		set_err(hp->err, sizeof(hp->err), "not an index page",
		    "malformed XML");
	return hp->rc;
}

/*
 * End the page: its last entries go to out.  Returns what
 * list_http_parse returns, with *ret_format and *ret_skipped (may be
 * NULL) and the reason in errbuf; on failure every entry of the page is
 * taken back out of out.
 */
int
list_http_push_end(struct list_http_push *hp, enum page_format *ret_format,
    size_t *ret_skipped, char *errbuf, size_t errlen)
{
	int	 rc = push_finish(hp);

	if (rc != 0) {
		while (listing_count(hp->pc.out) > hp->n0)
			listing_pop(hp->pc.out);
		if (errbuf != NULL && errlen > 0)
			(void)snprintf(errbuf, errlen, "%s", hp->err);
	} else {
		if (ret_format != NULL)
			*ret_format = hp->pc.fmt;
		if (ret_skipped != NULL)
			*ret_skipped = hp->pc.skipped;
	}
	return rc;
}

/* Free hp (entries already in out stay).  NULL is a no-op. */
void
list_http_push_free(struct list_http_push *hp)
{
	if (hp == NULL)
		return;
	if (hp->html != NULL) {
		xmlFreeDoc(hp->html->myDoc);
		htmlFreeParserCtxt(hp->html);
	}
	if (hp->xml != NULL) {
		xmlFreeDoc(hp->xml->myDoc);
		xmlFreeParserCtxt(hp->xml);
	}
	free(hp->keep);
	free(hp->js.buf);
	free(hp->ctype);
	free(hp->pc.seen.slot);
	free(hp->pc.seen.gone);
	free(hp->pc.origin);
	free(hp->pc.pagepath);
	free(hp);
}

/*
 * Parse one index page into out (see list_http.h): the whole body fed
 * to a push parser at once.  Follows nginx/Apache/lighttpd/IIS/Caddy
 * index formats as documented in tests/fixtures/LISTINGS.md, RFC 3986
 * for hrefs.
 */
int
list_http_parse(const uint8_t *body, size_t len, const char *content_type,
    const char *page_url, const char *prefix, struct listing *out,
    enum page_format *ret_format, size_t *ret_skipped, char *errbuf,
    size_t errlen)
{
	struct list_http_push *hp;
	int		 rc;

	if (errbuf != NULL && errlen > 0)
		errbuf[0] = '\0';
	if ((rc = list_http_push_new(content_type, page_url, prefix, out, 0,
	    &hp)) != 0)
		return rc;
	(void)list_http_push_feed(hp, body, len);
	rc = list_http_push_end(hp, ret_format, ret_skipped, errbuf, errlen);
	list_http_push_free(hp);
	return rc;
}

/* ---------------------------------------------------------------- */
/* The crawl (crawl.h): how the HTTP lister reads a batch of pages. */

struct http_crawl {
	const char	*source;	/* borrowed: source URL */
	const struct crawl_opts *opts;	/* borrowed */
	struct workq	*pool;		/* owned: parser threads (crawl_pool) */
	unsigned	 npool;		/* threads in pool */
	bool		 no_pool;	/* parse inline: one CPU, or no thread */
	size_t		 max_entries;	/* entries per directory */
};

/* url is the source or below it, on the same origin. */
static bool
url_under(const char *base, const char *url)
{
	char		*ob = NULL, *ou = NULL;
	const char	*pb, *pu;
	bool		 r = false;

	if (!split_url(base, &ob, &pb) || !split_url(url, &ou, &pu))
		goto out;
	r = strcasecmp(ob, ou) == 0 && strncmp(pu, pb, strlen(pb)) == 0;
out:
	free(ob);
	free(ou);
	return r;
}

static const char *
base_name(const char *path)
{
	const char	*s = strrchr(path, '/');

	return s != NULL ? s + 1 : path;
}

/*
 * A directory's key for the loop check, summed as its entries come: a
 * hash of each entry's (name, type, size, time) (FNV-1a of the name, the
 * fields folded in by splitmix64's mixer), spread over four 64-bit lanes
 * and added up lane by lane, so that it does not depend on
 * the order of the rows and a huge page need not be held to be keyed.  A
 * key only ever meets its own ancestors' keys: a collision can cost a
 * server its own subtree, no one else's.
 */
struct sigsum {
	uint64_t	 lane[4];
	size_t		 n;		/* entries added */
};

static void
sigsum_free(struct sigsum *ss)
{
	memset(ss, 0, sizeof(*ss));
}

/* Add entry e.  0 (it cannot fail; an int for its callers). */
static int
sigsum_add(struct sigsum *ss, const struct entry *e)
{
	uint64_t	 h1, h2;

	/* The name, then each field folded in through the mixer. */
	h1 = fnv1a(base_name(e->path));
	h1 = text_mix64(h1 ^ (uint64_t)e->size_min);
	h1 = text_mix64(h1 ^ (uint64_t)e->size_max);
	h1 = text_mix64(h1 ^ (uint64_t)e->mtime_wall);
	h1 = text_mix64(h1 ^ ((uint64_t)e->type << 8 |
	    (uint64_t)e->mtime_prec));
	h2 = text_mix64(h1 ^ TEXT_GOLDEN64);
	ss->lane[0] += h1;
	ss->lane[1] += h2;
	ss->lane[2] += text_mix64(h2 ^ UINT64_C(0x6a09e667f3bcc908));
	ss->lane[3] += text_mix64(h1 + h2);
	ss->n++;
	return 0;
}

/* The key in hex into sig (65 bytes): the SHA-256 of the sums and count. */
static int
sigsum_hex(const struct sigsum *ss, char *sig)
{
	unsigned char	 in[40], md[32];
	uint64_t	 v;
	size_t		 i, k;

	for (i = 0; i < 5; i++) {
		v = i < 4 ? ss->lane[i] : (uint64_t)ss->n;
		for (k = 0; k < 8; k++)
			in[i * 8 + k] = (unsigned char)(v >> (56 - 8 * k));
	}
	if (EVP_Digest(in, sizeof(in), md, NULL, EVP_sha256(), NULL) != 1)
		return BM_ENOMEM;
	for (i = 0; i < sizeof(md); i++)
		(void)snprintf(sig + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/*
 * The page URL hrefs resolve against, or NULL when the page failed: then
 * *ret_rc and why (whylen bytes) say how.  No side effect, so that it can
 * be asked before the page is handed to a parser thread.
 */
static const char *
page_check(const struct http_crawl *c, const struct http_page *pg,
    int *ret_rc, char *why, size_t whylen)
{
	if (pg->rc != 0) {
		*ret_rc = pg->rc;
		(void)snprintf(why, whylen, "%s", pg->errmsg[0] ? pg->errmsg :
		    bm_strerror(pg->rc));
		return NULL;
	}
	if (pg->status != 200) {
		*ret_rc = (pg->status == 404 || pg->status == 410) ?
		    BM_ENOENT : BM_EHTTP;
		(void)snprintf(why, whylen, "HTTP status %ld", pg->status);
		return NULL;
	}
	if (pg->effective_url != NULL &&
	    strcmp(pg->effective_url, pg->url) != 0) {
		if (!url_under(c->source, pg->effective_url)) {
			*ret_rc = BM_EPROTO;
			(void)snprintf(why, whylen,
			    "redirected outside the source");
			return NULL;
		}
		if (pg->effective_url[strlen(pg->effective_url) - 1] == '/')
			return pg->effective_url;
	}
	return pg->url;
}

/*
 * A page as it arrives: kept whole up to STREAM_AFTER bytes (then parsed
 * as the pages of a batch are, on the pool), else parsed as it comes in
 * on the fetching thread, into l.  Entries, not bytes, are what a large
 * directory costs: l is capped at max_entries, and with a drain its
 * entries are handed on every STREAM_HAND once they are final and the
 * page can be no ancestor's loop (docs/internals.md, "Reading index
 * pages").
 */
#define STREAM_AFTER	(1024 * 1024)	/* bytes of a page kept whole */
#define STREAM_PRUNE	(256 * 1024)	/* HTML between prunes of its tree */
#define STREAM_HAND	8192		/* entries of a page handed on at once */

struct hstream {
	struct page_stream ops;		/* the page's stream (arg: this) */
	const char	*url;		/* borrowed: the page's URL */
	const char	*prefix;	/* borrowed: the directory's path */
	size_t		 cap;		/* entries the page may list */
	size_t		 max_entries;	/* the directory cap (max_entries) */
	struct listing	*l;		/* owned: the streamed page's entries */
	struct list_http_push *push;	/* owned, NULL: still kept whole */
	uint8_t		*buf;		/* owned: the page kept whole */
	size_t		 len, bufcap;
	int		 rc;		/* BM_ENOMEM or BM_ELIMIT: lost */
	struct crawl	*cr;		/* borrowed: the crawl */
	size_t		 d;		/* the page's directory */
	bool		 hand;		/* entries may be handed on as read */
	size_t		 bound;		/* most entries an ancestor's key
					   covers: a page with more is no
					   loop, and is handed on */
	size_t		 handed;	/* entries handed on by this try */
	struct sigsum	 sum;		/* the key of those */
	struct listing	*dirs;		/* owned: the directories of those,
					   queued once the page is read */
};

/* Forget this try of the page (what it handed on stays handed on). */
static void
hstream_reset(struct hstream *hs)
{
	sigsum_free(&hs->sum);
	listing_free(hs->dirs);
	hs->dirs = NULL;
	hs->handed = 0;
	list_http_push_free(hs->push);
	hs->push = NULL;
	listing_free(hs->l);
	hs->l = NULL;
	free(hs->buf);
	hs->buf = NULL;
	hs->len = hs->bufcap = 0;
	hs->rc = 0;
}

/* Take back what the page handed on (it failed, or starts again). */
static int
hstream_retract(struct hstream *hs)
{
	if (hs->handed == 0)
		return 0;
	hs->handed = 0;
	return crawl_retract(hs->cr, hs->d);
}

static int
hstream_begin(void *arg)
{
	struct hstream	*hs = arg;
	int		 rc = hstream_retract(hs);

	hstream_reset(hs);
	return rc;
}

/*
 * Hand the page's entries read so far on: files to the crawl's output
 * (then to its drain), directories aside until the page is read, each
 * into the page's key.  Returns 0 or a BM_E* code (the page is lost).
 */
static int
hstream_hand(struct hstream *hs)
{
	struct entry	*e;
	size_t		 i;
	int		 rc;

	if (hs->dirs == NULL && (hs->dirs = listing_new(hs->cap)) == NULL)
		return BM_ENOMEM;
	if ((rc = list_http_push_forget(hs->push)) != 0)
		return rc;
	for (i = 0; i < listing_count(hs->l); i++) {
		e = listing_get_mut(hs->l, i);
		if ((rc = sigsum_add(&hs->sum, e)) != 0)
			return rc;
		hs->handed++;
		rc = e->type == ENTRY_DIR ? listing_move_in(hs->dirs, e) :
		    crawl_take(hs->cr, hs->d, e);
		if (rc != 0)
			return rc;
	}
	listing_drain(hs->l);
	return crawl_flush(hs->cr);
}

/* Past STREAM_AFTER: a push parser takes what was kept, then the rest. */
static int
hstream_push(struct hstream *hs, const char *ctype)
{
	int	 rc;

	if ((hs->l = listing_new(hs->cap)) == NULL)
		return BM_ENOMEM;
	if ((rc = list_http_push_new(ctype, hs->url, hs->prefix, hs->l,
	    STREAM_PRUNE, &hs->push)) != 0)
		return rc;
	rc = list_http_push_feed(hs->push, hs->buf, hs->len);
	free(hs->buf);
	hs->buf = NULL;
	hs->len = hs->bufcap = 0;
	return rc;
}

static int
hstream_feed(void *arg, const char *ctype, const uint8_t *data, size_t len)
{
	struct hstream	*hs = arg;
	uint8_t		*nb;
	size_t		 ncap;
	int		 rc;

	if (hs->push == NULL && hs->len + len > STREAM_AFTER &&
	    (rc = hstream_push(hs, ctype)) != 0)
		return hs->rc = rc;
	if (hs->push != NULL) {
		if ((rc = list_http_push_feed(hs->push, data, len)) == 0 &&
		    hs->hand && listing_count(hs->l) >= STREAM_HAND &&
		    hs->handed + listing_count(hs->l) > hs->bound &&
		    list_http_push_firm(hs->push))
			rc = hstream_hand(hs);
		return hs->rc = rc;
	}
	if (hs->len + len > hs->bufcap) {
		ncap = hs->bufcap ? hs->bufcap : 16384;
		while (ncap < hs->len + len)
			ncap *= 2;
		if ((nb = realloc(hs->buf, ncap)) == NULL)
			return hs->rc = BM_ENOMEM;
		hs->buf = nb;
		hs->bufcap = ncap;
	}
	memcpy(hs->buf + hs->len, data, len);
	hs->len += len;
	return 0;
}

/*
 * A page that listed more than max_entries: its reason, naming the key;
 * true when the page's cap was max_entries (not the mirror's room).
 */
static bool
page_too_many(const struct hstream *hs, char *why, size_t whylen)
{
	if (hs->cap != hs->max_entries)
		return false;
	(void)snprintf(why, whylen, "more than %zu entries in one directory "
	    "(max_entries)", hs->cap);
	return true;
}

/*
 * One fetched page of a batch and what parsing it gave: its entries in a
 * listing of its own (parsed on a worker of the crawl's pool, or inline),
 * taken into the crawl's listing in page order by crawl_page.
 */
struct ppage {
	const struct http_page *pg;	/* borrowed */
	struct hstream	*hs;		/* borrowed: pg's stream */
	const char	*base;		/* borrowed: page_check's URL, NULL: failed */
	const char	*prefix;	/* borrowed: the directory's relative path */
	struct listing	*l;		/* owned: the page's entries */
	size_t		 skipped;	/* hostile names list_http_parse skipped */
	int		 rc;		/* page_check's failure (base NULL), else
					   list_http_parse's result */
	bool		 done;		/* parsed (or nothing to parse) */
	bool		 pooled;	/* parsed on a pool thread */
	bool		 parsed;	/* streamed: parsed as it came in */
	char		 err[256];	/* the reason for rc */
};

/* Parse one page into pp->l (a workq task; touches nothing shared). */
static void
ppage_parse(void *arg)
{
	struct ppage	*pp = arg;
	const struct http_page *pg = pp->pg;
	const uint8_t	*body = pp->hs->buf != NULL ? pp->hs->buf : pg->body;
	size_t		 len = pp->hs->buf != NULL ? pp->hs->len : pg->len;

	if (pp->parsed)
		return;
	pp->err[0] = '\0';
	pp->rc = list_http_parse(body, len, pg->content_type, pp->base,
	    pp->prefix, pp->l, NULL, &pp->skipped, pp->err, sizeof(pp->err));
	if (pp->rc == BM_ELIMIT)
		(void)page_too_many(pp->hs, pp->err, sizeof(pp->err));
}

/* workq_done_fn: a parsed page is back on the crawl's thread. */
static void
ppage_done(void *ctx, void *arg)
{
	(void)ctx;
	((struct ppage *)arg)->done = true;
}

/* Replace *p by a copy made on this thread.  0 or BM_ENOMEM. */
static int
rehome_str(char **p)
{
	char	*q;

	if (*p == NULL)
		return 0;
	if ((q = strdup(*p)) == NULL)
		return BM_ENOMEM;
	free(*p);
	*p = q;
	return 0;
}

/*
 * Copy the strings of a page parsed on a pool thread into allocations of
 * this thread, before they join the crawl's listing.  glibc gives each
 * thread an arena of its own and malloc_trim(3) does not shrink the top
 * of a thread's arena, so strings left there would keep their pages
 * resident after the listing is freed (tree C: about 10 MB).
 * Returns 0 or BM_ENOMEM.
 */
static int
rehome(struct listing *l)
{
	struct entry	*e;
	size_t		 i;

	for (i = 0; i < listing_count(l); i++) {
		e = listing_get_mut(l, i);
		if (rehome_str(&e->path) != 0 || rehome_str(&e->href) != 0 ||
		    rehome_str(&e->size_display) != 0 ||
		    rehome_str(&e->target) != 0 ||
		    rehome_str(&e->unique) != 0)
			return BM_ENOMEM;
	}
	return 0;
}

/*
 * Page pp of directory d failed (rc, why): noted, and what it handed on
 * taken back.  Returns 0 or the retract's code.
 */
static int
crawl_lost(struct crawl *cr, struct ppage *pp, int rc, const char *why)
{
	crawl_fail(cr, pp->pg->url, rc, why);
	return hstream_retract(pp->hs);
}

/*
 * Take the parsed page of directory d into the crawl's listing, unless
 * its entries repeat an ancestor's (a server-side symlink loop): what
 * the page handed on as it was read (pp->hs: its key, its directories),
 * then the rest.
 */
static int
crawl_page(struct crawl *cr, size_t d, struct ppage *pp)
{
	struct hstream	*hs = pp->hs;
	struct sigsum	*ss = &hs->sum;
	char		 sig[65];
	size_t		 i;
	int		 rc;

	if (pp->base == NULL)
		return crawl_lost(cr, pp, pp->rc, pp->err);
	/*
	 * Parsed straight into the crawl's listing, the page would have
	 * failed once its entries, duplicates not yet dropped included,
	 * outgrew the room: so it does here.
	 */
	if ((rc = pp->rc) == 0 &&
	    listing_peak(pp->l) > listing_room(crawl_out(cr)))
		rc = BM_ELIMIT;
	if (rc == 0 && pp->pooled)
		rc = rehome(pp->l);
	if (rc == BM_EPROTO)
		return crawl_lost(cr, pp, rc, pp->err[0] ? pp->err :
		    "unreadable index");
	/* max_entries: this directory fails, the crawl goes on. */
	if (rc == BM_ELIMIT && pp->err[0] != '\0')
		return crawl_lost(cr, pp, rc, pp->err);
	if (rc != 0) {
		(void)crawl_lost(cr, pp, rc, bm_strerror(rc));
		return rc;
	}
	crawl_stats(cr)->skipped += pp->skipped;
	for (i = 0; i < listing_count(pp->l); i++)
		if ((rc = sigsum_add(ss, listing_get(pp->l, i))) != 0)
			return rc;
	if ((rc = sigsum_hex(ss, sig)) != 0)
		return rc;
	if ((crawl_dir(cr, d)->key = strdup(sig)) == NULL)
		return BM_ENOMEM;
	crawl_dir(cr, d)->nkey = ss->n;
	if (crawl_ancestor(cr, crawl_dir(cr, d)->parent, NULL, sig)) {
		/*
		 * A server-side symlink loop: this directory adds nothing
		 * (one handed on had more entries than any ancestor: none).
		 */
		crawl_stats(cr)->loops++;
		return hstream_retract(hs);
	}
	hs->handed = 0;		/* kept now, whatever comes */
	for (i = 0; rc == 0 && hs->dirs != NULL &&
	    i < listing_count(hs->dirs); i++)
		rc = crawl_take(cr, d, listing_get_mut(hs->dirs, i));
	for (i = 0; rc == 0 && i < listing_count(pp->l); i++)
		rc = crawl_take(cr, d, listing_get_mut(pp->l, i));
	return rc;
}

/*
 * The crawl's parser pool: one worker per online CPU (at most
 * CRAWL_PARSERS), started at the first batch of two or more pages; NULL
 * on a single CPU or when no thread can be had (pages are then parsed
 * inline, one after another).
 */
#define CRAWL_PARSERS	4
#define CRAWL_AHEAD	2	/* pages handed out per worker ahead of the merge */

static struct workq *
crawl_pool(struct http_crawl *c)
{
	long	 ncpu;

	if (c->pool != NULL || c->no_pool)
		return c->pool;
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > CRAWL_PARSERS)
		ncpu = CRAWL_PARSERS;
	/* Once, before any thread parses (libxml2, jansson's hash seed). */
	xmlInitParser();
	json_object_seed(0);
	if (ncpu < 2 || workq_new((unsigned)ncpu, NULL, NULL,
	    &c->pool) != 0) {
		c->pool = NULL;
		c->no_pool = true;
	} else
		c->npool = (unsigned)ncpu;
	return c->pool;
}

/*
 * Parse the fetched pages pps[0..n) and take them into the crawl in page
 * order: on the pool, at most CRAWL_AHEAD pages per worker ahead of the
 * page being taken (so that only a few parsed pages are held at once),
 * else inline.  Every page handed out is back before this returns.
 */
static int
crawl_parse(struct http_crawl *c, struct crawl *cr, size_t first,
    struct ppage *pps, size_t n)
{
	struct workq	*q = n > 1 ? crawl_pool(c) : NULL;
	size_t		 i, next = 0, ahead;
	int		 rc = 0;

	ahead = q != NULL ? (size_t)c->npool * CRAWL_AHEAD : 0;
	for (i = 0; i < n && rc == 0; i++) {
		for (; q != NULL && next < n && next <= i + ahead; next++) {
			if (pps[next].l != NULL && !pps[next].parsed &&
			    workq_push(q, ppage_parse, &pps[next]) == 0) {
				pps[next].pooled = true;
				continue;
			}
			/* Nothing to parse, or no memory to queue it. */
			if (pps[next].l != NULL)
				ppage_parse(&pps[next]);
			pps[next].done = true;
		}
		if (q == NULL && pps[i].l != NULL)
			ppage_parse(&pps[i]);
		while (q != NULL && !pps[i].done)
			(void)workq_wait_any(q, ppage_done, NULL);
		rc = crawl_page(cr, first + i, &pps[i]);
		listing_free(pps[i].l);
		pps[i].l = NULL;
	}
	if (q != NULL)
		workq_wait(q, ppage_done, NULL);
	return rc;
}

/* crawl_ops.prepare: each page streams into an hstream. */
static int
http_prepare(void *arg, struct crawl *cr, size_t first,
    struct http_page *pages, size_t n)
{
	struct http_crawl *c = arg;
	struct hstream	*hs;
	size_t		 i, k, room = listing_room(crawl_out(cr));

	for (i = 0; i < n; i++) {
		if ((hs = calloc(1, sizeof(*hs))) == NULL)
			return BM_ENOMEM;
		hs->cr = cr;
		hs->d = first + i;
		hs->hand = crawl_streams(cr);
		for (k = crawl_dir(cr, hs->d)->parent; k != CRAWL_ROOT;
		    k = crawl_dir(cr, k)->parent)
			if (crawl_dir(cr, k)->nkey > hs->bound)
				hs->bound = crawl_dir(cr, k)->nkey;
		hs->ops.begin = hstream_begin;
		hs->ops.feed = hstream_feed;
		hs->ops.arg = hs;
		hs->url = pages[i].url;
		hs->prefix = crawl_dir(cr, first + i)->prefix;
		hs->max_entries = c->max_entries;
		hs->cap = c->max_entries > 0 && c->max_entries < room ?
		    c->max_entries : room;
		pages[i].stream = &hs->ops;
	}
	return 0;
}

/* crawl_ops.release: the pages' hstreams. */
static void
http_release(void *arg, struct http_page *pages, size_t n)
{
	struct hstream	*hs;
	size_t		 i;

	(void)arg;
	for (i = 0; i < n; i++) {
		if (pages[i].stream == NULL)
			continue;
		hs = pages[i].stream->arg;
		hstream_reset(hs);
		free(hs);
		pages[i].stream = NULL;
	}
}

/*
 * Check page pp; a streamed one is finished here (its entries move to
 * pp->l), one kept whole gets an empty pp->l for crawl_parse.
 */
static int
ppage_setup(struct http_crawl *c, struct ppage *pp)
{
	struct hstream	*hs = pp->hs;

	if (hs->rc == BM_ELIMIT && page_too_many(hs, pp->err,
	    sizeof(pp->err))) {
		pp->rc = BM_ELIMIT;
		pp->base = NULL;
		return 0;
	}
	pp->base = page_check(c, pp->pg, &pp->rc, pp->err, sizeof(pp->err));
	if (pp->base == NULL)
		return 0;
	if (hs->push == NULL)
		return (pp->l = listing_new(hs->cap)) == NULL ? BM_ENOMEM : 0;
	/* Streamed: its hrefs were read against the URL asked for. */
	pp->parsed = pp->done = true;
	pp->l = hs->l;
	hs->l = NULL;
	if (strcmp(pp->base, pp->pg->url) != 0) {
		pp->rc = BM_EPROTO;
		(void)snprintf(pp->err, sizeof(pp->err), "redirected to %s: a "
		    "page this large is read as it arrives, against its own "
		    "URL", pp->base);
		return 0;
	}
	pp->rc = list_http_push_end(hs->push, NULL, &pp->skipped, pp->err,
	    sizeof(pp->err));
	if (pp->rc == BM_ELIMIT)
		(void)page_too_many(hs, pp->err, sizeof(pp->err));
	return 0;
}

/* crawl_ops.read: check and parse the pages of dirs [first, first + n). */
static int
http_read(void *arg, struct crawl *cr, size_t first, struct http_page *pages,
    size_t n)
{
	struct http_crawl *c = arg;
	struct ppage	*pps;
	size_t		 i;
	int		 rc = BM_ENOMEM;

	if ((pps = calloc(n, sizeof(*pps))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < n; i++) {
		pps[i].pg = &pages[i];
		pps[i].hs = pages[i].stream->arg;
		pps[i].prefix = crawl_dir(cr, first + i)->prefix;
		if ((rc = ppage_setup(c, &pps[i])) != 0)
			goto out;
	}
	rc = crawl_parse(c, cr, first, pps, n);
out:
	for (i = 0; i < n; i++)
		listing_free(pps[i].l);
	free(pps);
	return rc;
}

static const struct crawl_ops http_crawl_ops = {
	.read = http_read,
	.prepare = http_prepare,
	.release = http_release,
};

/*
 * Crawl the index tree under source_url (see list_http.h): breadth first,
 * opts->batch pages per fetch call, never past opts->max_depth (0 lists
 * only the source page).  Borrowed arguments; entries appended to out.
 * Returns 0 when complete, the first page failure's BM_E* code, BM_ELIMIT
 * when a directory lay past max_depth, or BM_ENOMEM.
 */
int
list_http_crawl(const char *source_url, const struct crawl_opts *opts,
    http_fetch_fn fetch, void *ctx, struct listing *out, char *errbuf,
    size_t errlen)
{
	struct http_crawl c;
	struct crawl_params p;
	struct crawl	*cr = NULL;
	const char	*spath;
	int		 rc;

	memset(&c, 0, sizeof(c));
	c.source = source_url;
	c.opts = opts;
	c.max_entries = opts->max_entries;
	if (errbuf != NULL && errlen > 0)
		errbuf[0] = '\0';
	if (!split_url(source_url, NULL, &spath) ||
	    source_url[strlen(source_url) - 1] != '/') {
		set_err(errbuf, errlen, source_url,
		    "source URL must be absolute and end in '/'");
		return BM_EINVAL;
	}
	crawl_params_init(&p, source_url, opts->filter, opts->max_depth,
	    opts->batch, fetch, ctx, out, errbuf, errlen);
	p.shallow = opts->shallow;
	p.drain = opts->drain;
	p.drain_ctx = opts->drain_ctx;
	p.retract = opts->retract;
	if ((rc = crawl_new(&p, &cr)) != 0)
		return rc;
	rc = crawl_run(cr, &http_crawl_ops, &c);
	if (opts->ret_loops != NULL)
		*opts->ret_loops = crawl_stats(cr)->loops;
	if (opts->ret_skipped != NULL)
		*opts->ret_skipped = crawl_stats(cr)->skipped;
	workq_free(c.pool);
	crawl_free(cr);
	return rc;
}

/* lister_ops.list: the crawl with the run's settings. */
static int
http_list(const struct lister_run *lr, struct listing *out,
    struct lister_stats *ret, char *errbuf, size_t errlen)
{
	struct crawl_opts co;

	memset(&co, 0, sizeof(co));
	co.filter = lr->filter;
	co.max_depth = lr->max_depth;
	co.shallow = lr->shallow;
	co.max_entries = lr->max_entries;
	co.batch = (size_t)lr->connections * 2;
	co.drain = lr->drain;
	co.drain_ctx = lr->ctx;
	co.retract = lr->retract;
	co.ret_skipped = &ret->skipped;
	co.ret_loops = &ret->loops;
	return list_http_crawl(lr->source, &co, lr->fetch, lr->ctx, out,
	    errbuf, errlen);
}

static const char *const http_schemes[] = { "http", "https", NULL };

const struct lister_ops lister_http_ops = {
	.name = "http",
	.schemes = http_schemes,
	.connections = 8,
	.unit = "links",
	.zone = LISTER_ZONE_LISTING,
	.list = http_list,
};
