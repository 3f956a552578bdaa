/*
 * Unit tests for agent/digest.c: EVP digests against known vectors
 * (RFC 1321 appendix A.5, FIPS 180-2 appendix B.1), digest_fd over a
 * file in steps, the text form, and the sidecar parser: every line form
 * (NCBI "HEX  NAME", binary "HEX *NAME", "HEX NAME", a bare digest, BSD
 * tagged), CRLF, names with spaces, and hostile lines (bad hex, wrong
 * length, traversal and absolute names, NUL, escaped names) that must be
 * ignored; then sidecar sets: directory joins, first-added wins, the
 * subject of "X.md5".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#include "biomirror/digest.h"
#include "biomirror/error.h"

#define MD5_ABC	"900150983cd24fb0d6963f7d28e17f72"
#define SHA_ABC	"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define MD5_EMPTY "d41d8cd98f00b204e9800998ecf8427e"

static void
text_of(struct digest *d, enum digest_alg alg, char buf[DIGEST_TEXT_MAX])
{
	struct digest_value v;

	buf[0] = '\0';
	if (digest_final(d, alg, &v) == 0)
		(void)digest_to_text(&v, buf, DIGEST_TEXT_MAX);
}

static void
test_vectors(void)
{
	struct digest	*d = NULL;
	struct digest_value v, w;
	char		 buf[DIGEST_TEXT_MAX];

	is_int(digest_new(DIGEST_BIT(DIGEST_MD5) | DIGEST_BIT(DIGEST_SHA256),
	    &d), 0, "digest_new md5+sha256");
	is_int(digest_update(d, "a", 1), 0, "update 1");
	is_int(digest_update(d, "bc", 2), 0, "update 2");
	is_int((long long)digest_bytes(d), 3, "3 bytes fed");
	text_of(d, DIGEST_MD5, buf);
	is_str(buf, "md5:" MD5_ABC, "md5(abc) (RFC 1321)");
	text_of(d, DIGEST_SHA256, buf);
	is_str(buf, "sha256:" SHA_ABC, "sha256(abc) (FIPS 180-2)");
	is_int(digest_update(d, "x", 1), BM_EINVAL, "no update after final");
	digest_free(d);

	d = NULL;
	is_int(digest_new(DIGEST_BIT(DIGEST_MD5), &d), 0, "md5 only");
	is_int(digest_final(d, DIGEST_SHA256, &v), BM_EINVAL,
	    "sha256 not asked for");
	text_of(d, DIGEST_MD5, buf);
	is_str(buf, "md5:" MD5_EMPTY, "md5 of nothing");
	digest_free(d);
	is_int(digest_new(0, &d), BM_EINVAL, "no algorithm");
	is_int(digest_new(1U << 7, &d), BM_EINVAL, "unknown algorithm");

	is_int(digest_from_text("sha256:" SHA_ABC, &v), 0, "from text");
	is_int(digest_from_text("sha256:" SHA_ABC, &w), 0, "from text again");
	ok(digest_equal(&v, &w), "equal");
	w.md[31] ^= 1;
	ok(!digest_equal(&v, &w), "one bit differs");
	is_int(digest_from_text("md5:" SHA_ABC, &v), BM_EINVAL,
	    "md5 with 64 digits");
	is_int(digest_from_text("crc:00", &v), BM_EINVAL, "unknown name");
	is_int(digest_from_text(MD5_ABC, &v), BM_EINVAL, "no name");
	is_int(digest_from_text("md5:" MD5_EMPTY, &v), 0, "md5 text");
	is_int(digest_to_text(&v, buf, 10), BM_ELIMIT, "small buffer");
}

static void
test_fd(void)
{
	char		 path[] = "/tmp/bm-digest-XXXXXX", buf[DIGEST_TEXT_MAX];
	struct digest	*d = NULL, *e = NULL;
	uint8_t		*data;
	uint64_t	 n = 0;
	size_t		 len = 3 * 1024 * 1024 + 17, i;
	int		 fd;

	if ((data = malloc(len)) == NULL || (fd = mkstemp(path)) == -1) {
		ok(0, "temp file");
		free(data);
		return;
	}
	for (i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 7 + (i >> 13));
	ok(write(fd, data, len) == (ssize_t)len, "write test file");
	(void)digest_new(DIGEST_BIT(DIGEST_SHA256), &d);
	(void)digest_new(DIGEST_BIT(DIGEST_SHA256), &e);
	/* In two steps, as a growing prefix is hashed. */
	is_int(digest_fd(d, fd, 0, 1000001, &n), 0, "prefix");
	is_int((long long)n, 1000001, "prefix bytes");
	is_int(digest_fd(d, fd, 1000001, UINT64_MAX, &n), 0, "rest");
	is_int((long long)n, (long long)(len - 1000001), "rest bytes");
	(void)digest_update(e, data, len);
	{
		char other[DIGEST_TEXT_MAX];
		text_of(d, DIGEST_SHA256, buf);
		text_of(e, DIGEST_SHA256, other);
		is_str(buf, other, "pread steps == one update");
	}
	digest_free(d);
	d = NULL;
	(void)digest_new(DIGEST_BIT(DIGEST_MD5), &d);
	is_int(digest_fd(d, fd, 0, len + 5, &n), BM_EIO,
	    "file shorter than asked: BM_EIO");
	digest_free(d);
	digest_free(e);
	(void)close(fd);
	(void)unlink(path);
	free(data);
}

/* Parse one line; name_out gets the name or "(none)"; returns the rc. */
static int
parse(const char *line, enum digest_alg alg, char *name_out, size_t nlen,
    char *hex_out)
{
	struct digest_value v;
	char		*name = NULL, t[DIGEST_TEXT_MAX];
	int		 rc;

	name_out[0] = hex_out[0] = '\0';
	rc = sidecar_parse_line(line, strlen(line), alg, &v, &name);
	if (rc == 0) {
		(void)snprintf(name_out, nlen, "%s", name ? name : "(none)");
		(void)digest_to_text(&v, t, sizeof(t));
		(void)snprintf(hex_out, 80, "%s", strchr(t, ':') + 1);
		free(name);
	}
	return rc;
}

static void
test_lines(void)
{
	char	 n[256], h[80];

	is_int(parse(MD5_ABC "  nr.00.tar.gz\n", DIGEST_MD5, n, sizeof(n),
	    h), 0, "NCBI form");
	is_str(n, "nr.00.tar.gz", "NCBI name");
	is_str(h, MD5_ABC, "NCBI digest");
	is_int(parse(MD5_ABC " *bin.dat", DIGEST_MD5, n, sizeof(n), h), 0,
	    "binary mode");
	is_str(n, "bin.dat", "binary name without '*'");
	is_int(parse(MD5_ABC " one.txt", DIGEST_MD5, n, sizeof(n), h), 0,
	    "one space");
	is_str(n, "one.txt", "one-space name");
	is_int(parse("900150983CD24FB0D6963F7D28E17F72  UP.TXT\r\n", DIGEST_MD5,
	    n, sizeof(n), h), 0, "upper-case hex, CRLF");
	is_str(n, "UP.TXT", "CR stripped from the name");
	is_str(h, MD5_ABC, "upper-case hex decoded");
	is_int(parse(MD5_ABC "\r\n", DIGEST_MD5, n, sizeof(n), h), 0,
	    "bare digest");
	is_str(n, "(none)", "bare digest has no name");
	is_int(parse(MD5_ABC "  name with  spaces.gz", DIGEST_MD5, n,
	    sizeof(n), h), 0, "name with spaces");
	is_str(n, "name with  spaces.gz", "spaces kept");
	is_int(parse(MD5_ABC "  ./sub/x.gz", DIGEST_MD5, n, sizeof(n), h), 0,
	    "./ and a subdirectory");
	is_str(n, "sub/x.gz", "./ dropped");
	is_int(parse("MD5 (tag ged.gz) = " MD5_ABC, DIGEST_MD5, n, sizeof(n),
	    h), 0, "BSD tagged");
	is_str(n, "tag ged.gz", "tagged name");
	is_int(parse("SHA256 (s.gz) = " SHA_ABC "\r\n", DIGEST_SHA256, n,
	    sizeof(n), h), 0, "tagged sha256");
	is_int(parse(SHA_ABC "  s.gz", DIGEST_SHA256, n, sizeof(n), h), 0,
	    "sha256 form");
	is_str(h, SHA_ABC, "sha256 digest");

	/* Not entries. */
	is_int(parse("", DIGEST_MD5, n, sizeof(n), h), BM_ENOENT, "empty");
	is_int(parse("\r\n", DIGEST_MD5, n, sizeof(n), h), BM_ENOENT, "CRLF");
	is_int(parse("# comment", DIGEST_MD5, n, sizeof(n), h), BM_ENOENT,
	    "comment");
	is_int(parse("\\" MD5_ABC "  a\\nb", DIGEST_MD5, n, sizeof(n), h),
	    BM_ENOENT, "escaped name ignored");
	/* Hostile or malformed. */
	is_int(parse("900150983cd24fb0d6963f7d28e17fZZ  x", DIGEST_MD5, n,
	    sizeof(n), h), BM_EINVAL, "bad hex");
	is_int(parse("900150983cd24fb0d6963f7d28e17f7  x", DIGEST_MD5, n,
	    sizeof(n), h), BM_EINVAL, "31 digits");
	is_int(parse(SHA_ABC "  x", DIGEST_MD5, n, sizeof(n), h), BM_EINVAL,
	    "sha256 length in an md5 file");
	is_int(parse(MD5_ABC "  x", DIGEST_SHA256, n, sizeof(n), h),
	    BM_EINVAL, "md5 length in a sha256 file");
	is_int(parse(MD5_ABC "  ../../etc/passwd", DIGEST_MD5, n, sizeof(n),
	    h), BM_EINVAL, "traversal");
	is_int(parse(MD5_ABC "  a/../../b", DIGEST_MD5, n, sizeof(n), h),
	    BM_EINVAL, "traversal inside");
	is_int(parse(MD5_ABC "  /etc/passwd", DIGEST_MD5, n, sizeof(n), h),
	    BM_EINVAL, "absolute");
	is_int(parse(MD5_ABC "  a//b", DIGEST_MD5, n, sizeof(n), h),
	    BM_EINVAL, "empty component");
	is_int(parse(MD5_ABC "  ", DIGEST_MD5, n, sizeof(n), h), BM_EINVAL,
	    "separator but no name");
	is_int(parse(MD5_ABC "  a\tb", DIGEST_MD5, n, sizeof(n), h),
	    BM_EINVAL, "control byte in name");
	is_int(parse("MD5 (x) = " SHA_ABC, DIGEST_MD5, n, sizeof(n), h),
	    BM_EINVAL, "tagged, wrong length");
	is_int(parse("MD5 (../x) = " MD5_ABC, DIGEST_MD5, n, sizeof(n), h),
	    BM_EINVAL, "tagged traversal");
	{
		struct digest_value v;
		char *name = NULL;
		const char nul[] = MD5_ABC "  a\0b";

		is_int(sidecar_parse_line(nul, sizeof(nul) - 1, DIGEST_MD5, &v,
		    &name), BM_EINVAL, "NUL in a line");
	}
}

static void
test_names(void)
{
	enum digest_alg	 a = DIGEST__N;

	ok(sidecar_name("nr.00.tar.gz.md5", &a) && a == DIGEST_MD5, "X.md5");
	ok(sidecar_name("x.sha256", &a) && a == DIGEST_SHA256, "X.sha256");
	ok(sidecar_name("MD5SUMS", &a) && a == DIGEST_MD5, "MD5SUMS");
	ok(sidecar_name("SHA256SUMS", &a) && a == DIGEST_SHA256, "SHA256SUMS");
	ok(sidecar_name("md5sum.txt", &a) && a == DIGEST_MD5, "md5sum.txt");
	ok(!sidecar_name(".md5", NULL), "bare .md5 is not one");
	ok(!sidecar_name("x.md5.gz", NULL), "x.md5.gz is not one");
	ok(!sidecar_name("md5sums", NULL), "case matters");
}

static void
test_set(void)
{
	struct sidecar_set *s = sidecar_set_new(100);
	struct sidecar_sum sum;
	char		 buf[DIGEST_TEXT_MAX];
	size_t		 n = 0, bad = 0;
	const char	 list[] =
	    MD5_ABC "  a.gz\r\n"
	    MD5_EMPTY " *sub/b.gz\r\n"
	    "# md5sum output\n"
	    "zz  bad.gz\n"
	    MD5_ABC "  ../escape\n"
	    MD5_ABC "\n"
	    MD5_ABC "  MD5SUMS\n"		/* names the list itself */
	    MD5_EMPTY "  x.gz";		/* no final newline */
	const char	 own[] = MD5_EMPTY "  a.gz\n";
	const char	 bare[] = MD5_ABC "\n";

	ok(s != NULL, "set");
	/* Per-file sidecars first: they win over the list. */
	is_int(sidecar_set_add(s, "db/a.gz.md5", own, strlen(own), &n, &bad), 0,
	    "add db/a.gz.md5");
	is_int((long long)n, 1, "one entry");
	is_int(sidecar_set_add(s, "db/c.gz.md5", bare, strlen(bare), &n,
	    &bad), 0, "bare digest file");
	is_int(sidecar_set_add(s, "db/MD5SUMS", list, strlen(list), &n, &bad),
	    0, "add db/MD5SUMS");
	is_int((long long)n, 3, "three good entries");
	is_int((long long)bad, 3, "bad hex, traversal, bare digest in a list");
	is_int(sidecar_set_add(s, "db/data.gz", list, 4, NULL, NULL),
	    BM_EINVAL, "not a sidecar name");
	is_int((long long)sidecar_set_count(s), 5, "5 entries");

	ok(sidecar_set_find(s, "db/a.gz", &sum) && sum.has[DIGEST_MD5],
	    "db/a.gz found");
	(void)digest_to_text(&sum.v[DIGEST_MD5], buf, sizeof(buf));
	is_str(buf, "md5:" MD5_EMPTY, "per-file sidecar added first wins");
	is_str(sum.from[DIGEST_MD5], "db/a.gz.md5", "from the per-file one");
	ok(!sum.has[DIGEST_SHA256], "no sha256");
	ok(sidecar_set_find(s, "db/sub/b.gz", &sum), "subdirectory joined");
	ok(sidecar_set_find(s, "db/c.gz", &sum), "bare digest covers db/c.gz");
	(void)digest_to_text(&sum.v[DIGEST_MD5], buf, sizeof(buf));
	is_str(buf, "md5:" MD5_ABC, "bare digest value");
	ok(sidecar_set_find(s, "db/x.gz", &sum), "last line without newline");
	ok(!sidecar_set_find(s, "a.gz", &sum), "top a.gz not covered");
	ok(!sidecar_set_find(s, "escape", &sum), "traversal not added");
	ok(!sidecar_set_find(s, "db/bad.gz", &sum), "bad hex not added");
	ok(!sidecar_set_find(s, "db/MD5SUMS", &sum),
	    "a line naming the sidecar itself not added");
	is_int(sidecar_set_add(s, "SHA256SUMS", SHA_ABC "  db/a.gz\n",
	    strlen(SHA_ABC) + 9, &n, NULL), 0, "top SHA256SUMS");
	ok(sidecar_set_find(s, "db/a.gz", &sum) && sum.has[DIGEST_MD5] &&
	    sum.has[DIGEST_SHA256], "both algorithms for db/a.gz");
	{
		char	 t[SIDECAR_TEXT_MAX];
		struct sidecar_sum none;

		is_int(sidecar_sum_text(&sum, t, sizeof(t)), 0, "sum text");
		is_str(t, "md5:" MD5_EMPTY " sha256:" SHA_ABC,
		    "sum text: both, algorithm order");
		is_int(sidecar_sum_text(&sum, t, 40), BM_ELIMIT,
		    "sum text: short buffer");
		memset(&none, 0, sizeof(none));
		is_int(sidecar_sum_text(&none, t, sizeof(t)), 0,
		    "sum text: none");
		is_str(t, "", "sum text: none is empty");
	}
	sidecar_set_free(s);

	s = sidecar_set_new(1);
	is_int(sidecar_set_add(s, "MD5SUMS", list, strlen(list), NULL, NULL),
	    BM_ELIMIT, "cap on entries");
	sidecar_set_free(s);
	sidecar_set_free(NULL);
}

static int
count_conflict(void *ctx, const char *sidecar, const char *path)
{
	char	*out = ctx;
	size_t	 n = strlen(out);

	(void)snprintf(out + n, 256 - n, "%s:%s;", sidecar, path);
	return 0;
}

/* Duplicate lines: same digest is fine, two digests are a conflict. */
static void
test_conflict(void)
{
	struct sidecar_set *s = sidecar_set_new(100);
	struct sidecar_sum sum;
	char		 seen[256] = "";
	const char	 list[] =
	    MD5_ABC "  a.gz\n" MD5_EMPTY "  a.gz\n"
	    MD5_ABC "  b.gz\n" MD5_ABC "  b.gz\n";
	const char	 own[] = MD5_EMPTY "  c.gz\n";
	const char	 other[] = MD5_ABC "  c.gz\n";

	is_int(sidecar_set_add(s, "c.gz.md5", own, strlen(own), NULL, NULL),
	    0, "per-file sidecar");
	is_int(sidecar_set_add(s, "MD5SUMS", list, strlen(list), NULL, NULL),
	    0, "list with duplicates");
	is_int(sidecar_set_add(s, "md5sum.txt", other, strlen(other), NULL,
	    NULL), 0, "second list");
	ok(sidecar_set_find(s, "a.gz", &sum) && sum.conflict[DIGEST_MD5],
	    "two digests for a.gz: conflict");
	ok(sidecar_set_find(s, "b.gz", &sum) && !sum.conflict[DIGEST_MD5],
	    "the same digest twice: no conflict");
	ok(sidecar_set_find(s, "c.gz", &sum) && !sum.conflict[DIGEST_MD5] &&
	    strcmp(sum.from[DIGEST_MD5], "c.gz.md5") == 0,
	    "another sidecar disagreeing: the first added wins");
	is_int(sidecar_set_conflicts(s, count_conflict, seen), 0, "walk");
	is_str(seen, "MD5SUMS:a.gz;", "one conflict reported");
	sidecar_set_free(s);
}

/* sidecar_set_put: a listing's digest, after the sidecars (they win). */
static void
test_put(void)
{
	struct sidecar_set *s = sidecar_set_new(3);
	struct sidecar_sum sum;
	struct digest_value v, w;
	const char	 own[] = MD5_ABC "  a.gz\n";

	memset(&v, 0, sizeof(v));
	v.alg = DIGEST_MD5;
	v.md[0] = 0x01;
	is_int(sidecar_set_add(s, "a.gz.md5", own, strlen(own), NULL, NULL),
	    0, "sidecar first");
	is_int(sidecar_set_put(s, "a.gz", &v, "the listing"), 0, "put a.gz");
	is_int(sidecar_set_put(s, "b.gz", &v, "the listing"), 0, "put b.gz");
	ok(sidecar_set_find(s, "a.gz", &sum) && !sum.conflict[DIGEST_MD5] &&
	    strcmp(sum.from[DIGEST_MD5], "a.gz.md5") == 0,
	    "the sidecar file wins over the listing");
	ok(sidecar_set_find(s, "b.gz", &sum) &&
	    digest_equal(&sum.v[DIGEST_MD5], &v) &&
	    strcmp(sum.from[DIGEST_MD5], "the listing") == 0,
	    "the listing's digest, named for messages");
	w = v;
	is_int(sidecar_set_put(s, "c.gz", &w, "the listing"), BM_ELIMIT,
	    "past max entries");
	sidecar_set_free(s);
}

int
main(void)
{
	test_vectors();
	test_fd();
	test_lines();
	test_names();
	test_set();
	test_conflict();
	test_put();
	return done_testing();
}
