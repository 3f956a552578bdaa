/*
 * Unit tests for agent/listing.c: the container and its cap, sorting and
 * de-duplication, path validation (hostile names), percent-coding, the
 * include/exclude filter and time-zone resolution.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/error.h"
#include "biomirror/listing.h"

#include "tap.h"

static int
add(struct listing *l, const char *path, enum entry_type t)
{
	struct entry	*e;
	int		 rc;

	if ((rc = listing_append(l, &e)) != 0)
		return rc;
	if ((e->path = strdup(path)) == NULL)
		return BM_ENOMEM;
	e->type = t;
	return 0;
}

static void
test_container(void)
{
	struct listing		*l;
	const struct entry	*e;
	struct entry		*m;
	size_t			 i;

	l = listing_new(3);
	ok(l != NULL, "listing_new");
	is_int(listing_count(l), 0, "empty");
	is_int(listing_append(l, &m), 0, "append");
	is_int(m->size, -1, "fresh size unknown");
	is_int(m->size_min, -1, "fresh size_min unknown");
	is_int(m->size_max, -1, "fresh size_max unknown");
	is_int(m->mtime_prec, MTIME_UNKNOWN, "fresh mtime unknown");
	ok(m->path == NULL && m->href == NULL, "fresh strings NULL");
	m->path = strdup("b");
	is_int(add(l, "a", ENTRY_FILE), 0, "append 2");
	is_int(add(l, "b", ENTRY_DIR), 0, "append 3 (dup path)");
	is_int(add(l, "c", ENTRY_FILE), BM_ELIMIT, "cap -> BM_ELIMIT");
	is_int(listing_count(l), 3, "count at cap");
	is_int(listing_sort(l), 0, "sort");
	is_int(listing_count(l), 2, "duplicate dropped");
	e = listing_get(l, 0);
	is_str(e->path, "a", "sorted first");
	e = listing_get(l, 1);
	is_str(e->path, "b", "sorted second");
	is_int(e->type, 0, "first 'b' kept (type unset, not ENTRY_DIR)");
	ok(listing_get(l, 2) == NULL, "out of range -> NULL");
	listing_pop(l);
	is_int(listing_count(l), 1, "pop");
	listing_free(l);
	listing_free(NULL);

	/* memcmp order: bytes >= 0x80 sort after ASCII, "a" < "a/b" < "ab". */
	l = listing_new(100);
	add(l, "\xc3\xa9", ENTRY_FILE);
	add(l, "ab", ENTRY_FILE);
	add(l, "a/b", ENTRY_FILE);
	add(l, "a", ENTRY_DIR);
	add(l, "Z", ENTRY_FILE);
	for (i = 0; i < 60; i++)
		add(l, "zz", ENTRY_FILE);
	is_int(listing_sort_count(l, &i), 0, "sort 65");
	is_int(i, 59, "59 of the 60 dropped, counted");
	is_int(listing_count(l), 6, "60 dups collapse");
	is_int(listing_find(l, "a/b", 3), 2, "find a/b");
	is_int(listing_find(l, "a/bc", 1), 1, "find a (len 1)");
	is_int(listing_find(l, "zz", 2), 4, "find zz");
	is_int(listing_find(l, "z", 1), -1, "find z: none");
	is_int(listing_find(l, "Y", 1), -1, "find before the first");
	is_str(listing_get(l, 0)->path, "Z", "memcmp 0");
	is_str(listing_get(l, 1)->path, "a", "memcmp 1");
	is_str(listing_get(l, 2)->path, "a/b", "memcmp 2");
	is_str(listing_get(l, 3)->path, "ab", "memcmp 3");
	is_str(listing_get(l, 4)->path, "zz", "memcmp 4");
	is_str(listing_get(l, 5)->path, "\xc3\xa9", "memcmp 5");
	listing_free(l);
}

/* listing_room and listing_take: moved in order, the cap kept whole. */
static void
test_take(void)
{
	struct listing	*dst = listing_new(100), *src = listing_new(100);
	char		 name[16];
	int		 i;

	is_int(listing_room(dst), 100, "room of an empty listing");
	add(dst, "first", ENTRY_FILE);
	for (i = 0; i < 70; i++) {	/* past dst's first capacity of 64 */
		snprintf(name, sizeof(name), "p%02d", i);
		add(src, name, ENTRY_FILE);
	}
	is_int(listing_take(dst, src), 0, "take 70");
	is_int(listing_count(dst), 71, "dst has 71");
	is_int(listing_count(src), 0, "src emptied");
	is_int(listing_room(dst), 29, "room 29");
	is_str(listing_get(dst, 0)->path, "first", "dst's own entry first");
	is_str(listing_get(dst, 1)->path, "p00", "taken in order (1)");
	is_str(listing_get(dst, 70)->path, "p69", "taken in order (70)");
	is_int(listing_take(dst, src), 0, "take from an empty listing");
	for (i = 0; i < 30; i++)
		add(src, "q", ENTRY_FILE);
	is_int(listing_take(dst, src), BM_ELIMIT, "30 into room 29: BM_ELIMIT");
	is_int(listing_count(dst), 71, "nothing moved");
	is_int(listing_count(src), 30, "src kept its entries");
	listing_pop(src);
	is_int(listing_take(dst, src), 0, "29 into room 29");
	is_int(listing_room(dst), 0, "full");
	is_str(listing_get(dst, 99)->path, "q", "last taken");
	listing_free(src);	/* its moved strings belong to dst now */
	listing_free(dst);
}

static bool
safe(const char *p)
{
	return path_is_safe(p, strlen(p));
}

static void
test_copy(void)
{
	struct listing	*l = listing_new(1);
	struct entry	 src, dst, e;

	memset(&src, 0, sizeof(src));
	src.path = strdup("d/l");
	src.href = strdup("l");
	src.type = ENTRY_SYMLINK;
	src.size = 5;
	src.size_exact = true;
	src.size_min = src.size_max = 5;
	src.size_display = strdup("5");
	src.mtime_wall = 1000;
	src.mtime_nsec = 7;
	src.mtime_prec = MTIME_NS;
	src.zone_stated = true;
	src.zone_offset = 3600;
	src.mtime = 42;
	src.target = strdup("../t");
	src.target_type = ENTRY_DIR;
	src.unique = strdup("u1");
	if (l == NULL || src.path == NULL || src.href == NULL ||
	    src.size_display == NULL || src.target == NULL || src.unique == NULL)
		tap_bail("setup");
	is_int(listing_entry_copy(&dst, &src), 0, "entry copy");
	ok(dst.path != src.path && strcmp(dst.path, "d/l") == 0 &&
	    dst.href != src.href && strcmp(dst.href, "l") == 0 &&
	    dst.size_display != src.size_display &&
	    strcmp(dst.size_display, "5") == 0 && dst.target != src.target &&
	    strcmp(dst.target, "../t") == 0 && dst.unique != src.unique &&
	    strcmp(dst.unique, "u1") == 0, "... every string its own");
	ok(dst.type == ENTRY_SYMLINK && dst.size == 5 && dst.size_exact &&
	    dst.size_min == 5 && dst.size_max == 5 && dst.mtime_wall == 1000 &&
	    dst.mtime_nsec == 7 && dst.mtime_prec == MTIME_NS &&
	    dst.zone_stated && dst.zone_offset == 3600 && dst.mtime == 42 &&
	    dst.target_type == ENTRY_DIR, "... every other field the same");
	entry_clear(&dst);
	memset(&e, 0, sizeof(e));
	is_int(listing_entry_copy(&dst, &e), 0, "an entry with no strings");
	ok(dst.path == NULL && dst.href == NULL && dst.unique == NULL,
	    "... copies none");
	is_int(listing_move_in(l, &src), 0, "move in");
	ok(src.path == NULL && src.unique == NULL && src.size == 0 &&
	    listing_count(l) == 1 &&
	    strcmp(listing_get(l, 0)->path, "d/l") == 0 &&
	    strcmp(listing_get(l, 0)->unique, "u1") == 0,
	    "... the entry moved, its source zeroed");
	e.path = strdup("x");
	is_int(listing_move_in(l, &e), BM_ELIMIT, "move into a full listing");
	ok(e.path != NULL && strcmp(e.path, "x") == 0, "... leaves it as it was");
	entry_clear(&e);
	listing_free(l);
}

static void
test_paths(void)
{
	char	 big[PATH_MAX + 10];
	size_t	 i;

	ok(safe("a"), "a safe");
	ok(safe("a/b/c.txt"), "a/b/c.txt safe");
	ok(safe("..a/b..c/.d"), "dots inside names safe");
	ok(safe("caf\xc3\xa9 x+y"), "utf-8, space, plus safe");
	ok(!safe(""), "empty");
	ok(!safe("/etc/passwd"), "absolute");
	ok(!safe("."), ".");
	ok(!safe(".."), "..");
	ok(!safe("a/../../x"), "a/../../x");
	ok(!safe("a/./b"), "a/./b");
	ok(!safe("a//b"), "empty component");
	ok(!safe("a/"), "trailing slash");
	ok(!safe("a\nb"), "newline");
	ok(!safe("a\x01"), "0x01");
	ok(!safe("a\x1f"), "0x1f");
	ok(!safe("a\x7f"), "0x7f");
	ok(!path_is_safe("a\0b", 3), "embedded NUL");
	memset(big, 'x', 256);
	big[256] = '\0';
	ok(!safe(big), "component of 256 bytes");
	big[255] = '\0';
	ok(safe(big), "component of 255 bytes");
	for (i = 0; i < PATH_MAX; i++)
		big[i] = (i % 100 == 99) ? '/' : 'x';
	big[PATH_MAX - 1] = 'x';
	big[PATH_MAX] = '\0';
	ok(!safe(big), "total PATH_MAX");
	big[PATH_MAX - 2] = '\0';
	ok(safe(big), "total PATH_MAX-2");
	ok(name_is_safe("x.iso", 5), "name ok");
	ok(!name_is_safe("a/b", 3), "name with slash");
	ok(!name_is_safe("..", 2), "name ..");
	ok(!name_is_safe("", 0), "name empty");
	/* The store's temp-file prefix is never a listed name. */
	ok(!name_is_safe(".biomirror-tmp.0a1b2c3d", 23), "temp-file name");
	ok(!name_is_safe(".biomirror-tmp.", 15), "bare temp prefix");
	ok(!safe("a/.biomirror-tmp.x/b"), "temp-file component");
	ok(name_is_safe(".biomirror-tmp", 14), "prefix without its dot");
	ok(name_is_safe("x.biomirror-tmp.y", 17), "prefix not at start");
	ok(safe("a/.biomirror-tmpx"), "near miss in a path");
}

static void
test_coding(void)
{
	char	*s = NULL;
	size_t	 n = 0;

	is_int(path_decode("a%20b+c", 7, &s, &n), 0, "decode");
	is_str(s, "a b+c", "space decoded, plus kept");
	is_int(n, 5, "decoded length");
	free(s);
	is_int(path_decode("%2525", 5, &s, NULL), 0, "decode %%2525");
	is_str(s, "%25", "decoded once");
	free(s);
	is_int(path_decode("%C3%a9", 6, &s, NULL), 0, "decode mixed case");
	is_str(s, "\xc3\xa9", "utf-8 bytes");
	free(s);
	s = NULL;
	is_int(path_decode("a%2", 3, &s, NULL), BM_EINVAL, "short escape");
	is_int(path_decode("a%", 2, &s, NULL), BM_EINVAL, "bare %%");
	is_int(path_decode("%zz", 3, &s, NULL), BM_EINVAL, "non-hex");
	is_int(path_decode("a%00b", 5, &s, NULL), BM_EINVAL, "decoded NUL");
	ok(s == NULL, "no output on error");
	is_int(path_decode("", 0, &s, &n), 0, "empty ok");
	is_int(n, 0, "empty len");
	free(s);

	is_int(path_encode("a b/c%d~e-f_g.h+", 16, &s), 0, "encode");
	is_str(s, "a%20b/c%25d~e-f_g.h%2B", "encoded");
	free(s);
	is_int(path_encode("\xc3\xa9", 2, &s), 0, "encode utf-8");
	is_str(s, "%C3%A9", "uppercase hex");
	free(s);
}

static void
test_filter(void)
{
	const char	*inc[] = { "*.tar.gz", "docs/*.txt" };
	const char	*exc[] = { "*-rc*", "tmp/", "old*/" };
	struct filter	 f = { inc, 2, exc, 3 };
	struct filter	 none = { NULL, 0, NULL, 0 };
	struct filter	 exonly = { NULL, 0, exc, 3 };

	ok(filter_file(NULL, "x"), "NULL filter takes all");
	ok(filter_file(&none, "a/b"), "empty filter takes all");
	ok(filter_file(&f, "a/b/x.tar.gz"), "basename include");
	ok(!filter_file(&f, "a/b/x.zip"), "not included");
	ok(filter_file(&f, "docs/r.txt"), "path include");
	ok(!filter_file(&f, "a/docs/r.txt"), "path include anchored");
	ok(!filter_file(&f, "x-rc1.tar.gz"), "excluded");
	ok(filter_file(&exonly, "tmp"), "dir-only exclude ignores files");
	ok(!filter_file(&exonly, "a-rc2"), "exclude without include");
	ok(filter_dir(&f, "a"), "dir taken");
	ok(!filter_dir(&f, "tmp"), "dir excluded by tmp/");
	ok(!filter_dir(&f, "x/tmp"), "nested dir excluded by tmp/");
	ok(!filter_dir(&f, "old2"), "dir excluded by glob/");
	ok(filter_dir(&f, "v1-rc1"), "file exclude does not skip dir");
	ok(filter_dir(NULL, "tmp"), "NULL filter descends");
}

static void
test_tz(void)
{
	struct tzspec	 tz;
	struct listing	*l;
	struct entry	*e;
	int64_t		 r = 0;

	is_int(tzspec_parse("UTC", &tz), 0, "UTC");
	is_int(tz.kind, TZ_UTC, "UTC kind");
	is_int(tzspec_parse("Z", &tz), 0, "Z");
	is_int(tz.kind, TZ_UTC, "Z kind");
	is_int(tzspec_parse("+0100", &tz), 0, "+0100");
	is_int(tz.kind, TZ_FIXED, "fixed");
	is_int(tz.offset, 3600, "+0100 offset");
	is_int(tzspec_parse("-05:30", &tz), 0, "-05:30");
	is_int(tz.offset, -19800, "-05:30 offset");
	is_int(tzspec_parse("auto", &tz), 0, "auto");
	is_int(tz.kind, TZ_AUTO, "auto kind");
	is_int(tzspec_parse("+01x0", &tz), BM_EINVAL, "bad offset");
	is_int(tzspec_parse("+2500", &tz), BM_EINVAL, "offset too big");
	is_int(tzspec_parse("Mars/Olympus", &tz), BM_EINVAL, "unknown zone");
	is_int(tzspec_parse("../etc/passwd", &tz), BM_EINVAL, "dotdot zone");
	is_int(tzspec_parse("/etc/localtime", &tz), BM_EINVAL, "abs zone");
	is_int(tzspec_parse("", &tz), BM_EINVAL, "empty zone");

	is_int(tzspec_parse("-05:30", &tz), 0, "fixed again");
	/* 2024-01-01 00:00 wall at -05:30 is 05:30 UTC. */
	is_int(tzspec_to_utc(&tz, 1704067200, &r), 0, "fixed to utc");
	is_int(r, 1704067200 + 19800, "fixed arithmetic");
	tz.kind = TZ_AUTO;
	is_int(tzspec_to_utc(&tz, 0, &r), BM_EINVAL, "auto unresolved");

	if (tzspec_parse("Europe/London", &tz) == 0) {
		/* 2024-07-01 12:00 BST = 11:00 UTC; 2024-01-01 12:00 GMT. */
		is_int(tzspec_to_utc(&tz, 1719835200, &r), 0, "named summer");
		is_int(r, 1719835200 - 3600, "BST is +1");
		is_int(tzspec_to_utc(&tz, 1704110400, &r), 0, "named winter");
		is_int(r, 1704110400, "GMT is +0");
		ok(getenv("TZ") == NULL || strcmp(getenv("TZ"),
		    ":Europe/London") != 0, "TZ restored");
	} else
		ok(0, "Europe/London missing from /usr/share/zoneinfo");

	l = listing_new(10);
	listing_append(l, &e);
	e->mtime_wall = 1000;
	e->mtime_nsec = 5;
	e->mtime_prec = MTIME_NS;
	e->zone_stated = true;
	e->zone_offset = 7200;
	listing_append(l, &e);
	e->mtime_wall = 1000;
	e->mtime_prec = MTIME_MINUTE;
	listing_append(l, &e);
	e->mtime_wall = 1000;
	e->mtime = 42;
	/* 2263-01-01, past int64 ns (UB before), 1600-01-01, 2262-01-01. */
	listing_append(l, &e);
	e->mtime_wall = 9246211200LL;
	e->mtime_prec = MTIME_SECOND;
	listing_append(l, &e);
	e->mtime_wall = -11676096000LL;
	e->mtime_prec = MTIME_DAY;
	listing_append(l, &e);
	e->mtime_wall = 9214646400LL;
	e->mtime_prec = MTIME_SECOND;
	tzspec_parse("+0100", &tz);
	is_int(listing_resolve_times(l, &tz), 0, "resolve");
	is_int(listing_get(l, 0)->mtime, (1000LL - 7200) * 1000000000LL + 5,
	    "stated zone wins");
	is_int(listing_get(l, 1)->mtime, (1000LL - 3600) * 1000000000LL,
	    "tz applies");
	is_int(listing_get(l, 2)->mtime, 42, "unknown untouched");
	is_int(listing_get(l, 3)->mtime_prec, MTIME_UNKNOWN,
	    "year 2263 is past int64 ns: unknown");
	is_int(listing_get(l, 3)->mtime, 0, "year 2263: mtime 0");
	is_int(listing_get(l, 4)->mtime_prec, MTIME_UNKNOWN,
	    "year 1600 is before int64 ns: unknown");
	is_int(listing_get(l, 5)->mtime, (9214646400LL - 3600) * 1000000000LL,
	    "year 2262 still fits");
	listing_free(l);
}

int
main(void)
{
	test_take();
	test_container();
	test_copy();
	test_paths();
	test_coding();
	test_filter();
	test_tz();
	return done_testing();
}
