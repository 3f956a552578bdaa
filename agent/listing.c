/*
 * The listing container and the rules every listed path obeys.
 *
 * A listing is a growable array of struct entry, capped at max_entries
 * fixed at creation (STYLE.md rule 31).  Entries own their strings.
 * Paths are decoded bytes, '/'-separated, relative, and are validated
 * with path_is_safe() before anything trusts them (rule 35): this module
 * rejects, it never repairs.  It also holds percent-encoding, the
 * include/exclude filter of DESIGN.md and the conversion of listed
 * wall-clock times to UTC (listing_timezone).
 */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"

#define NAME_MAX_BYTES	255
#define TMP_PREFIX_LEN	(sizeof(LISTING_TMP_PREFIX) - 1)
#define ZONEINFO_DIR	"/usr/share/zoneinfo/"

struct listing {
	struct entry	*v;		/* owned: entries [0, n) */
	size_t		 n;		/* entries in use */
	size_t		 cap;		/* allocated slots */
	size_t		 max;		/* hard cap on n (rule 31) */
	size_t		 peak;		/* largest n so far */
	size_t		 drained;	/* entries handed on and freed
					   (listing_drain): they count
					   against max */
};

/* The array listing_drain keeps for the next batch, at most (slots). */
#define LISTING_KEEP_CAP	65536

/* Empty listing capped at max_entries; NULL on out-of-memory. */
struct listing *
listing_new(size_t max_entries)
{
	struct listing	*l;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return NULL;
	l->max = max_entries;
	return l;
}

/* Free e's owned strings and zero it; NULL is a no-op. */
void
entry_clear(struct entry *e)
{
	if (e == NULL)
		return;
	free(e->path);
	free(e->href);
	free(e->size_display);
	free(e->target);
	free(e->unique);
	free(e->checksum);
	memset(e, 0, sizeof(*e));
}

/* Free l and every entry; NULL is a no-op. */
void
listing_free(struct listing *l)
{
	size_t	 i;

	if (l == NULL)
		return;
	for (i = 0; i < l->n; i++)
		entry_clear(&l->v[i]);
	free(l->v);
	free(l);
}

/* Number of entries in l (borrowed). */
size_t
listing_count(const struct listing *l)
{
	return l->n;
}

/* Borrowed entry i, NULL when out of range. */
const struct entry *
listing_get(const struct listing *l, size_t i)
{
	return i < l->n ? &l->v[i] : NULL;
}

/* Mutable borrowed entry i, NULL when out of range. */
struct entry *
listing_get_mut(struct listing *l, size_t i)
{
	return i < l->n ? &l->v[i] : NULL;
}

/*
 * Make room in l's array for need entries (need <= l->max): the capacity
 * doubles from 64, never past l->max.  Returns 0 or BM_ENOMEM.
 */
static int
listing_reserve(struct listing *l, size_t need)
{
	struct entry	*nv;
	size_t		 ncap;

	if (need <= l->cap)
		return 0;
	ncap = l->cap ? l->cap : 64;
	while (ncap < need && ncap <= SIZE_MAX / 2)
		ncap *= 2;
	if (ncap > l->max)
		ncap = l->max;
	if (ncap > SIZE_MAX / sizeof(*nv))
		return BM_ENOMEM;
	if ((nv = realloc(l->v, ncap * sizeof(*nv))) == NULL)
		return BM_ENOMEM;
	l->v = nv;
	l->cap = ncap;
	return 0;
}

/*
 * Append a blank entry (sizes -1, MTIME_UNKNOWN) and lend it via *ret.
 * Returns 0, BM_ENOMEM, or BM_ELIMIT at max_entries (rule 31).
 */
int
listing_append(struct listing *l, struct entry **ret)
{
	struct entry	*e;

	if (l->n >= l->max - (l->drained < l->max ? l->drained : l->max))
		return BM_ELIMIT;
	if (listing_reserve(l, l->n + 1) != 0)
		return BM_ENOMEM;
	e = &l->v[l->n++];
	if (l->n > l->peak)
		l->peak = l->n;
	memset(e, 0, sizeof(*e));
	e->size = ENTRY_SIZE_UNKNOWN;
	e->size_min = ENTRY_SIZE_UNKNOWN;
	e->size_max = ENTRY_SIZE_UNKNOWN;
	e->mtime_prec = MTIME_UNKNOWN;
	*ret = e;
	return 0;
}

/* See listing.h. */
int
listing_move_in(struct listing *l, struct entry *e)
{
	struct entry	*dst;
	int		 rc;

	if ((rc = listing_append(l, &dst)) != 0)
		return rc;
	*dst = *e;
	memset(e, 0, sizeof(*e));
	return 0;
}

/* *dst = a copy of s (NULL stays NULL); false when out of memory. */
static bool
dup_or_null(char **dst, const char *s)
{
	*dst = s != NULL ? strdup(s) : NULL;
	return s == NULL || *dst != NULL;
}

/* See listing.h. */
int
listing_entry_copy(struct entry *dst, const struct entry *src)
{
	*dst = *src;
	dst->path = dst->href = dst->size_display = dst->target =
	    dst->unique = dst->checksum = NULL;
	if (!dup_or_null(&dst->path, src->path) ||
	    !dup_or_null(&dst->checksum, src->checksum) ||
	    !dup_or_null(&dst->href, src->href) ||
	    !dup_or_null(&dst->size_display, src->size_display) ||
	    !dup_or_null(&dst->target, src->target) ||
	    !dup_or_null(&dst->unique, src->unique)) {
		entry_clear(dst);
		return BM_ENOMEM;
	}
	return 0;
}

/* Entries l can still take before listing_append gives BM_ELIMIT. */
size_t
listing_room(const struct listing *l)
{
	size_t	 used = l->n + l->drained;

	return used < l->max ? l->max - used : 0;
}

/*
 * Free every entry (a consumer took what it needs of them) and count
 * them as drained: the cap still counts them (listing_total).  A large
 * array is given back; a small one is kept for the next batch.
 */
void
listing_drain(struct listing *l)
{
	size_t	 i;

	for (i = 0; i < l->n; i++)
		entry_clear(&l->v[i]);
	l->drained += l->n;
	l->n = 0;
	if (l->cap > LISTING_KEEP_CAP) {
		free(l->v);
		l->v = NULL;
		l->cap = 0;
	}
}

/* Entries ever appended and kept: those held plus those drained. */
size_t
listing_total(const struct listing *l)
{
	return l->n + l->drained;
}

/*
 * Move every entry of src (in order, with the strings it owns) to the end
 * of dst, leaving src empty.  Returns 0, BM_ELIMIT (dst has no room for
 * all of them: nothing is moved) or BM_ENOMEM.
 */
int
listing_take(struct listing *dst, struct listing *src)
{
	if (src->n == 0)
		return 0;
	if (src->n > listing_room(dst))
		return BM_ELIMIT;
	if (listing_reserve(dst, dst->n + src->n) != 0)
		return BM_ENOMEM;
	memcpy(&dst->v[dst->n], src->v, src->n * sizeof(*src->v));
	dst->n += src->n;
	if (dst->n > dst->peak)
		dst->peak = dst->n;
	src->n = 0;
	return 0;
}

/*
 * The most entries l ever held: a parser appends an entry before it sees
 * that it is a duplicate and pops it, so this can exceed the count.
 */
size_t
listing_peak(const struct listing *l)
{
	return l->peak;
}

/* Drop and free the last entry, if any. */
void
listing_pop(struct listing *l)
{
	if (l->n == 0)
		return;
	entry_clear(&l->v[--l->n]);
}

static int
entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	const char	*px = x->path ? x->path : "";
	const char	*py = y->path ? y->path : "";
	size_t		 lx = strlen(px), ly = strlen(py);
	int		 c;

	c = memcmp(px, py, lx < ly ? lx : ly);
	if (c != 0)
		return c;
	return lx < ly ? -1 : lx > ly;
}

/* One pass of a bottom-up merge sort (stable) with run width w. */
static void
merge_pass(const struct entry *src, struct entry *dst, size_t n, size_t w)
{
	size_t	 lo, mid, hi, a, b, k;

	for (lo = 0; lo < n; lo += 2 * w) {
		mid = lo + w < n ? lo + w : n;
		hi = lo + 2 * w < n ? lo + 2 * w : n;
		a = lo;
		b = mid;
		k = lo;
		while (a < mid && b < hi) {
			if (entry_cmp(&src[b], &src[a]) < 0)
				dst[k++] = src[b++];
			else
				dst[k++] = src[a++];
		}
		while (a < mid)
			dst[k++] = src[a++];
		while (b < hi)
			dst[k++] = src[b++];
	}
}

/*
 * Sort by path bytes and drop duplicates keeping the first appended:
 * qsort(3) is not stable, so a merge sort keeps "first" meaningful.
 * *ret_dropped (may be NULL) gets how many were dropped.  Returns 0 or
 * BM_ENOMEM.
 */
int
listing_sort_count(struct listing *l, size_t *ret_dropped)
{
	struct entry	*tmp, *src, *dst, *sw;
	size_t		 i, j, w;

	if (ret_dropped != NULL)
		*ret_dropped = 0;
	if (l->n < 2)
		return 0;
	if ((tmp = malloc(l->n * sizeof(*tmp))) == NULL)
		return BM_ENOMEM;
	src = l->v;
	dst = tmp;
	for (w = 1; w < l->n; w *= 2) {
		merge_pass(src, dst, l->n, w);
		sw = src;
		src = dst;
		dst = sw;
	}
	if (src != l->v)
		memcpy(l->v, src, l->n * sizeof(*tmp));
	free(tmp);
	for (i = 1, j = 0; i < l->n; i++) {
		if (entry_cmp(&l->v[j], &l->v[i]) == 0) {
			entry_clear(&l->v[i]);
			continue;
		}
		if (++j != i) {
			l->v[j] = l->v[i];
			memset(&l->v[i], 0, sizeof(l->v[i]));
		}
	}
	if (ret_dropped != NULL)
		*ret_dropped = l->n - (j + 1);
	l->n = j + 1;
	return 0;
}

/* listing_sort_count() without the count. */
int
listing_sort(struct listing *l)
{
	return listing_sort_count(l, NULL);
}

/*
 * Index of the entry whose path is the len bytes at path in l, sorted
 * by listing_sort(); -1 when there is none.
 */
ssize_t
listing_find(const struct listing *l, const char *path, size_t len)
{
	size_t	 lo = 0, hi = l->n, mid, ml;
	int	 c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		ml = l->v[mid].path != NULL ? strlen(l->v[mid].path) : 0;
		c = memcmp(l->v[mid].path != NULL ? l->v[mid].path : "", path,
		    ml < len ? ml : len);
		if (c == 0)
			c = ml < len ? -1 : ml > len;
		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static bool
component_ok(const char *p, size_t len)
{
	size_t	 i;

	if (len == 0 || len > NAME_MAX_BYTES)
		return false;
	if (len == 1 && p[0] == '.')
		return false;
	if (len == 2 && p[0] == '.' && p[1] == '.')
		return false;
	/* The store's temp files: it would refuse or clean such a name. */
	if (len >= TMP_PREFIX_LEN &&
	    memcmp(p, LISTING_TMP_PREFIX, TMP_PREFIX_LEN) == 0)
		return false;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c < 0x20 || c == 0x7f || c == '/')
			return false;
	}
	return true;
}

/*
 * Rule 35: path (len bytes) must be relative, every component non-empty,
 * not "." or "..", not starting with LISTING_TMP_PREFIX (the store's temp
 * files), at most 255 bytes, free of NUL/control bytes, and the whole
 * shorter than PATH_MAX.  Rejects, never repairs.
 */
bool
path_is_safe(const char *path, size_t len)
{
	size_t	 start, i;

	if (path == NULL || len == 0 || len >= PATH_MAX || path[0] == '/')
		return false;
	start = 0;
	for (i = 0; i <= len; i++) {
		if (i == len || path[i] == '/') {
			if (!component_ok(path + start, i - start))
				return false;
			start = i + 1;
		}
	}
	return true;
}

/*
 * path_is_safe() for a single component (no '/'): a name starting with
 * ".biomirror-tmp." (LISTING_TMP_PREFIX) is refused too, so that listers
 * skip it and count it as hostile.
 */
bool
name_is_safe(const char *name, size_t len)
{
	if (name == NULL || len >= PATH_MAX)
		return false;
	return component_ok(name, len);
}

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * RFC 3986 2.1 percent-decoding, applied once; '+' is literal.  *ret is
 * malloc'd (caller frees).  BM_EINVAL on a bad escape or a NUL byte,
 * BM_ENOMEM.
 */
int
path_decode(const char *src, size_t len, char **ret, size_t *ret_len)
{
	char	*out;
	size_t	 i, k;
	int	 hi, lo, rc = BM_EINVAL;

	if ((out = malloc(len + 1)) == NULL)
		return BM_ENOMEM;
	for (i = 0, k = 0; i < len; i++) {
		if (src[i] == '\0')
			goto out;
		if (src[i] != '%') {
			out[k++] = src[i];
			continue;
		}
		if (i + 2 >= len)
			goto out;
		hi = hexval((unsigned char)src[i + 1]);
		lo = hexval((unsigned char)src[i + 2]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
			goto out;
		out[k++] = (char)(hi << 4 | lo);
		i += 2;
	}
	out[k] = '\0';
	*ret = out;
	out = NULL;
	if (ret_len != NULL)
		*ret_len = k;
	rc = 0;
out:
	free(out);
	return rc;
}

static bool
is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/*
 * Percent-encode all but RFC 3986 unreserved bytes and '/', uppercase
 * hex.  *ret is malloc'd (caller frees).  Returns 0 or BM_ENOMEM.
 */
int
path_encode(const char *path, size_t len, char **ret)
{
	static const char hex[] = "0123456789ABCDEF";
	char	*out;
	size_t	 i, k;

	if (len > (SIZE_MAX - 1) / 3)
		return BM_ENOMEM;
	if ((out = malloc(len * 3 + 1)) == NULL)
		return BM_ENOMEM;
	for (i = 0, k = 0; i < len; i++) {
		unsigned char c = (unsigned char)path[i];

		if (is_unreserved(c) || c == '/')
			out[k++] = (char)c;
		else {
			out[k++] = '%';
			out[k++] = hex[c >> 4];
			out[k++] = hex[c & 15];
		}
	}
	out[k] = '\0';
	*ret = out;
	return 0;
}

/*
 * Match one glob against a path: without '/' against the last component,
 * otherwise against the whole relative path.  A trailing '/' in the
 * pattern (directory marker) is ignored here.
 */
static bool
glob_match(const char *pat, const char *path)
{
	char		 buf[PATH_MAX];
	size_t		 plen = strlen(pat);
	const char	*base;

	if (plen > 0 && pat[plen - 1] == '/') {
		if (plen >= sizeof(buf))
			return false;
		memcpy(buf, pat, plen - 1);
		buf[plen - 1] = '\0';
		pat = buf;
		plen--;
	}
	if (memchr(pat, '/', plen) == NULL) {
		base = strrchr(path, '/');
		base = base ? base + 1 : path;
		return fnmatch(pat, base, 0) == 0;
	}
	return fnmatch(pat, path, FNM_PATHNAME) == 0;
}

/* DESIGN.md include/exclude: true when the file at path is taken. */
bool
filter_file(const struct filter *f, const char *path)
{
	size_t	 i;
	bool	 taken;

	if (f == NULL)
		return true;
	taken = f->ninclude == 0;
	for (i = 0; i < f->ninclude && !taken; i++)
		if (glob_match(f->include[i], path))
			taken = true;
	if (!taken)
		return false;
	for (i = 0; i < f->nexclude; i++) {
		size_t l = strlen(f->exclude[i]);

		/* An exclude ending in '/' names directories only. */
		if (l > 0 && f->exclude[i][l - 1] == '/')
			continue;
		if (glob_match(f->exclude[i], path))
			return false;
	}
	return true;
}

/* True unless an exclude ending in '/' matches the directory path. */
bool
filter_dir(const struct filter *f, const char *path)
{
	size_t	 i, l;

	if (f == NULL)
		return true;
	for (i = 0; i < f->nexclude; i++) {
		l = strlen(f->exclude[i]);
		if (l > 0 && f->exclude[i][l - 1] == '/' &&
		    glob_match(f->exclude[i], path))
			return false;
	}
	return true;
}

/* Parse "+HHMM", "-HH:MM", "+HH" into seconds east; false if malformed. */
static bool
parse_offset(const char *s, int32_t *ret)
{
	int	 sign, hh, mm = 0;
	size_t	 len = strlen(s);

	if (len < 3 || (s[0] != '+' && s[0] != '-'))
		return false;
	sign = s[0] == '-' ? -1 : 1;
	if (s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9')
		return false;
	hh = (s[1] - '0') * 10 + (s[2] - '0');
	s += 3;
	if (*s == ':')
		s++;
	if (*s != '\0') {
		if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' ||
		    s[2] != '\0')
			return false;
		mm = (s[0] - '0') * 10 + (s[1] - '0');
	}
	if (hh > 14 || mm > 59)
		return false;
	*ret = sign * (hh * 3600 + mm * 60);
	return true;
}

static bool
zone_name_ok(const char *s)
{
	char		 path[PATH_MAX];
	struct stat	 st;
	size_t		 i, len = strlen(s);
	int		 n;

	if (len == 0 || len >= sizeof(((struct tzspec *)0)->name) ||
	    s[0] == '/' || strstr(s, "..") != NULL)
		return false;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!(is_unreserved(c) || c == '/' || c == '+'))
			return false;
	}
	n = snprintf(path, sizeof(path), "%s%s", ZONEINFO_DIR, s);
	if (n < 0 || (size_t)n >= sizeof(path))
		return false;
	if (stat(path, &st) == -1 || !S_ISREG(st.st_mode))
		return false;
	return true;
}

/*
 * Parse a listing_timezone value: UTC/Z, +HHMM/-HH:MM, an IANA name that
 * exists under /usr/share/zoneinfo, or auto.  0 or BM_EINVAL.
 */
int
tzspec_parse(const char *s, struct tzspec *ret)
{
	struct tzspec	 tz;
	int32_t		 off;

	memset(&tz, 0, sizeof(tz));
	if (s == NULL)
		return BM_EINVAL;
	if (strcmp(s, "UTC") == 0 || strcmp(s, "Z") == 0 ||
	    strcmp(s, "utc") == 0 || strcmp(s, "GMT") == 0) {
		tz.kind = TZ_UTC;
	} else if (strcmp(s, "auto") == 0) {
		tz.kind = TZ_AUTO;
	} else if (s[0] == '+' || s[0] == '-') {
		if (!parse_offset(s, &off))
			return BM_EINVAL;
		tz.kind = TZ_FIXED;
		tz.offset = off;
	} else {
		if (!zone_name_ok(s))
			return BM_EINVAL;
		tz.kind = TZ_NAMED;
		memcpy(tz.name, s, strlen(s) + 1);
	}
	*ret = tz;
	return 0;
}

static int
named_to_utc(const char *name, int64_t wall, int64_t *ret)
{
	char		*old = NULL, *tzval = NULL;
	const char	*o;
	struct tm	 tm;
	time_t		 t = (time_t)wall, r;
	size_t		 nl = strlen(name);
	int		 rc = BM_EINVAL;

	if (gmtime_r(&t, &tm) == NULL)
		return BM_EINVAL;
	if ((o = getenv("TZ")) != NULL && (old = strdup(o)) == NULL)
		return BM_ENOMEM;
	if ((tzval = malloc(nl + 2)) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	tzval[0] = ':';
	memcpy(tzval + 1, name, nl + 1);
	if (setenv("TZ", tzval, 1) == -1) {
		rc = BM_ENOMEM;
		goto out;
	}
	tzset();
	tm.tm_isdst = -1;
	errno = 0;
	r = mktime(&tm);
	if (r == (time_t)-1 && errno != 0)
		goto restore;
	*ret = (int64_t)r;
	rc = 0;
restore:
	if (old != NULL)
		(void)setenv("TZ", old, 1);
	else
		(void)unsetenv("TZ");
	tzset();
out:
	free(old);
	free(tzval);
	return rc;
}

/*
 * Wall-clock seconds in tz to UTC seconds.  TZ_NAMED sets TZ in the
 * environment for the call (not thread-safe).  0 or BM_EINVAL.
 */
int
tzspec_to_utc(const struct tzspec *tz, int64_t wall, int64_t *ret)
{
	switch (tz->kind) {
	case TZ_UTC:
		*ret = wall;
		return 0;
	case TZ_FIXED:
		*ret = wall - tz->offset;
		return 0;
	case TZ_NAMED:
		return named_to_utc(tz->name, wall, ret);
	default:
		/* TZ_AUTO with no learned offset yet: nothing to go on. */
		return BM_EINVAL;
	}
}

/* Listed secs that fit int64 ns with two days to spare (a day's end). */
#define LISTED_SECS_MAX	(INT64_MAX / 1000000000LL - 2 * 86400LL)

/*
 * Set mtime (ns, UTC) of every entry with a known time: a stated zone
 * wins, else tz applies.  A time past what int64 ns holds (before 1678,
 * after 2262) becomes unknown.  Returns 0 or BM_EINVAL.
 */
int
listing_resolve_times(struct listing *l, const struct tzspec *tz)
{
	struct entry	*e;
	int64_t		 utc;
	__int128	 ns;
	size_t		 i;
	int		 rc;

	for (i = 0; i < l->n; i++) {
		e = &l->v[i];
		if (e->mtime_prec == MTIME_UNKNOWN)
			continue;
		if (e->zone_stated)
			utc = e->mtime_wall - e->zone_offset;
		else if ((rc = tzspec_to_utc(tz, e->mtime_wall, &utc)) != 0)
			return rc;
		/*
		 * Coarse times keep two days to spare (a day's end); a time
		 * to the second or finer only has to fit (bm:// lists any
		 * int64 ns, -2^63 too).
		 */
		ns = (__int128)utc * 1000000000 + e->mtime_nsec;
		if (ns < INT64_MIN || ns > INT64_MAX ||
		    (e->mtime_prec < MTIME_SECOND &&
		    (utc < -LISTED_SECS_MAX || utc > LISTED_SECS_MAX))) {
			e->mtime_prec = MTIME_UNKNOWN;
			e->mtime = 0;
			continue;
		}
		e->mtime = (int64_t)ns;
	}
	return 0;
}
