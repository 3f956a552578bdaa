/*
 * Unit tests of agent/sched/resume.c: ranges merge and gaps, validator checks,
 * the If-Range value (strong ETag, else an HTTP-date), records and drops,
 * and resume_prepare(): rows kept only for files fetched again with the
 * same listed size and mtime, other rows dropped, other temp files
 * removed, kept ones left alone; more ranges held than a row holds.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "biomirror/error.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/resume.h"
#include "biomirror/store.h"
#include "tap.h"

#define NS	1000000000LL
#define MB	(1024 * 1024)

static void
test_ranges(void)
{
	struct resume_file *rf;
	uint64_t	 g[8];
	size_t		 n;

	rf = resume_file_new(NULL, "f", 10 * MB, 5 * NS);
	ok(rf != NULL, "new");
	is_int(resume_file_covered(rf), 0, "nothing held");
	n = resume_file_gaps(rf, g, 4);
	is_int(n, 1, "one gap: the whole file");
	is_int(g[1], 10 * MB, "gap end");
	is_int(resume_file_add(rf, 0, 100), 0, "add 0-100");
	is_int(resume_file_add(rf, 100, 50), 0, "add 100-150 (touching)");
	is_int(resume_file_add(rf, 1000, 10), 0, "add 1000-1010");
	is_int(resume_file_add(rf, 120, 10), 0, "add inside");
	is_int(resume_file_covered(rf), 160, "covered counts each byte once");
	n = resume_file_gaps(rf, g, 4);
	is_int(n, 2, "two gaps");
	is_int(g[0], 150, "gap 1 start");
	is_int(g[1], 1000, "gap 1 end");
	is_int(g[2], 1010, "gap 2 start");
	is_int(g[3], 10 * MB, "gap 2 end");
	is_int(resume_file_add(rf, 140, 900), 0, "add across both");
	is_int(resume_file_covered(rf), 1040, "merged");
	n = resume_file_gaps(rf, g, 4);
	is_int(n, 1, "one gap left");
	is_int(g[0], 1040, "it starts at 1040");
	is_int(resume_file_gaps(rf, g, 0), 1, "more gaps than room: max + 1");
	ok(!resume_file_usable(rf), "no validator yet: not usable");
	resume_file_free(rf);
}

static void
test_validators(void)
{
	struct resume_file *rf;
	struct partial_rec pr;
	char		 err[256];

	rf = resume_file_new(NULL, "f", 10 * MB, 5 * NS);
	is_int(resume_file_check(rf, "\"a\"", 1700000000, 10 * MB, err,
	    sizeof(err)), 0, "first response sets the validators");
	(void)resume_file_add(rf, 0, MB);
	ok(resume_file_usable(rf), "usable with a strong ETag");
	is_str(resume_file_if_range(rf), "\"a\"", "If-Range is the ETag");
	is_int(resume_file_check(rf, "\"a\"", 1700000000, -1, err,
	    sizeof(err)), 0, "same validators: fine");
	is_int(resume_file_check(rf, "\"b\"", 1700000000, -1, err,
	    sizeof(err)), BM_ECHANGED, "another ETag: changed");
	ok(strstr(err, "changed between ranges") != NULL, "reason: %s", err);
	is_int(resume_file_check(rf, "\"a\"", 1700000000, 5, err,
	    sizeof(err)), BM_ECHANGED, "another total size: changed");
	ok(resume_file_due(rf, 0), "due: bytes not recorded");
	ok(!resume_file_due(rf, 2 * MB), "not due below min_new");
	ok(resume_file_record(rf, ".biomirror-tmp.00000001", &pr), "record");
	is_int(pr.nranges, 1, "one range");
	is_int(pr.up_mtime, 1700000000 * NS, "up_mtime in ns");
	is_str(pr.etag, "\"a\"", "etag");
	resume_file_recorded(rf, true);
	ok(resume_file_in_manifest(rf), "in the manifest");
	ok(!resume_file_due(rf, 0), "nothing new: not due");
	resume_file_reset(rf);
	ok(!resume_file_in_manifest(rf), "reset: row to drop");
	ok(resume_file_due(rf, 0), "a drop is due");
	ok(resume_file_record(rf, NULL, &pr), "drop record");
	ok(pr.tmpname == NULL, "a drop has no tmpname");
	resume_file_recorded(rf, true);
	ok(!resume_file_due(rf, 0), "dropped: nothing due");
	ok(!resume_file_record(rf, NULL, &pr), "nothing to write");
	resume_file_free(rf);

	/* A weak ETag is no validator for If-Range: the date is used. */
	rf = resume_file_new(NULL, "f", 10 * MB, 5 * NS);
	(void)resume_file_check(rf, "W/\"w\"", 1700000000, -1, err,
	    sizeof(err));
	(void)resume_file_add(rf, 0, 10);
	is_str(resume_file_if_range(rf), "Tue, 14 Nov 2023 22:13:20 GMT",
	    "If-Range is an HTTP-date");
	resume_file_free(rf);
	rf = resume_file_new(NULL, "f", 10 * MB, 5 * NS);
	(void)resume_file_check(rf, "", -1, -1, err, sizeof(err));
	(void)resume_file_add(rf, 0, 10);
	ok(!resume_file_usable(rf), "no validator at all: not usable");
	ok(!resume_file_due(rf, 0), "and never recorded");
	resume_file_free(rf);
}

/* A temp file name ".biomirror-tmp.XXXXXXXX" of len bytes in dir. */
static void
make_tmp(const char *dir, const char *name, size_t len)
{
	char	 p[600];
	int	 fd;

	(void)snprintf(p, sizeof(p), "%s/%s", dir, name);
	if ((fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600)) == -1 ||
	    ftruncate(fd, (off_t)len) == -1)
		perror(p);
	if (fd != -1)
		(void)close(fd);
}

static bool
exists(const char *dir, const char *name)
{
	char		 p[600];
	struct stat	 st;

	(void)snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

static void
test_prepare(const char *dir)
{
	char			 dest[512], db[512], err[600];
	struct manifest		*m = NULL;
	struct store		*s = NULL;
	struct resume_set	*rs = NULL;
	struct resume_file	*rf;
	struct store_file	*sf = NULL;
	struct partial_rec	 pr[3];
	struct action		 acts[3];
	const uint64_t		 r[] = { 0, MB };
	char			 pa[] = "a.bin", pb[] = "b.bin", pz[] = "z.bin";
	size_t			 kept = 0, removed = 0;
	int			 rc;

	(void)snprintf(dest, sizeof(dest), "%s/dest", dir);
	(void)snprintf(db, sizeof(db), "%s/m.db", dir);
	is_int(store_open(dest, 0644, 0755, &s), 0, "store");
	is_int(manifest_open(db, true, &m, err, sizeof(err)), 0, "manifest");
	(void)mkdir(dest, 0755);
	make_tmp(dest, ".biomirror-tmp.0000000a", MB);	/* kept */
	make_tmp(dest, ".biomirror-tmp.0000000b", MB);	/* listing changed */
	make_tmp(dest, ".biomirror-tmp.0000000c", 10);	/* no row */
	memset(pr, 0, sizeof(pr));
	pr[0].path = "a.bin";
	pr[0].tmpname = ".biomirror-tmp.0000000a";
	pr[0].size = 4 * MB;
	pr[0].list_mtime = 5 * NS;
	pr[0].up_mtime = 6 * NS;
	pr[0].etag = "\"x\"";
	pr[0].ranges = r;
	pr[0].nranges = 1;
	pr[1] = pr[0];
	pr[1].path = "b.bin";
	pr[1].tmpname = ".biomirror-tmp.0000000b";
	pr[2] = pr[0];
	pr[2].path = "c.bin";	/* not fetched any more */
	pr[2].tmpname = ".biomirror-tmp.0000000d";
	is_int(manifest_partials_put(m, 1, pr, 3), 0, "rows");
	memset(acts, 0, sizeof(acts));
	acts[0].path = pa;
	acts[0].op = ACT_FETCH;
	acts[0].fs.listed.size = 4 * MB;
	acts[0].fs.listed.size_exact = true;
	acts[0].fs.listed.mtime = 5 * NS;
	acts[1] = acts[0];
	acts[1].path = pb;
	acts[1].fs.listed.mtime = 9 * NS;	/* changed since */
	acts[2] = acts[0];
	acts[2].path = pz;
	rc = resume_prepare(m, s, acts, 3, &rs, &kept, &removed);
	is_int(rc, 0, "prepare");
	is_int(kept, 1, "one row kept");
	is_int(removed, 2, "two temp files removed");
	ok(exists(dest, ".biomirror-tmp.0000000a"), "kept temp file stays");
	ok(!exists(dest, ".biomirror-tmp.0000000b"), "changed one removed");
	ok(!exists(dest, ".biomirror-tmp.0000000c"), "unknown one removed");

	rf = resume_file_new(rs, "a.bin", 4 * MB, 5 * NS);
	is_str(resume_file_tmpname(rf), ".biomirror-tmp.0000000a",
	    "the kept row is found");
	is_int(resume_file_covered(rf), MB, "its ranges");
	ok(resume_file_usable(rf), "usable");
	is_int(store_file_resume(s, "a.bin", resume_file_tmpname(rf), 4 * MB,
	    &sf), 0, "reopen the temp file");
	ok(resume_file_reopened(rf, true, store_file_length(sf)),
	    "long enough: ranges kept");
	store_file_abort(sf);
	sf = NULL;
	resume_file_free(rf);
	rf = resume_file_new(rs, "b.bin", 4 * MB, 9 * NS);
	ok(resume_file_tmpname(rf) == NULL, "dropped row: nothing to resume");
	resume_file_free(rf);
	is_int(store_file_resume(s, "a.bin", "../x", 4 * MB, &sf), BM_EUNSAFE,
	    "a bad temp name is refused");
	is_int(store_file_resume(s, "a.bin", ".biomirror-tmp.0000000f",
	    4 * MB, &sf), BM_ENOENT, "a missing temp file");
	resume_set_free(rs);
	manifest_close(m);
	store_close(s);
}

/*
 * bm:// validators name the listed digest: a kept row is continued only
 * under the same one (or none then and now); other ETags are left alone.
 */
static void
test_same_digest(const char *dir)
{
	char			 dest[512], db[512], err[600];
	struct manifest		*m = NULL;
	struct store		*s = NULL;
	struct resume_set	*rs = NULL;
	struct resume_file	*rf;
	struct partial_rec	 pr[4];
	struct action		 acts[4];
	const uint64_t		 r[] = { 0, MB };
	const char		*etags[] = { "\"bm-4194304-5000000000-sha256:ab\"",
	    "\"bm-4194304-5000000000\"", "\"bm-4194304--5000000000-sha256:ab\"",
	    "\"x-sha256:ab\"" };
	char			 paths[4][8], tmps[4][40];
	size_t			 kept = 0, removed = 0, i;
	struct {
		size_t		 row;
		const char	*digest;
		bool		 same;
	} c[] = {
		{ 0, "sha256:ab", true }, { 0, "sha256:cd", false },
		{ 0, "", false }, { 1, "", true }, { 1, "sha256:ab", false },
		{ 2, "sha256:ab", true }, { 2, "sha256:a", false },
		{ 3, "", true }, { 3, "sha256:cd", true },
	};

	(void)snprintf(dest, sizeof(dest), "%s/dest2", dir);
	(void)snprintf(db, sizeof(db), "%s/m2.db", dir);
	is_int(store_open(dest, 0644, 0755, &s), 0, "store");
	is_int(manifest_open(db, true, &m, err, sizeof(err)), 0, "manifest");
	(void)mkdir(dest, 0755);
	memset(pr, 0, sizeof(pr));
	memset(acts, 0, sizeof(acts));
	for (i = 0; i < 4; i++) {
		(void)snprintf(paths[i], sizeof(paths[i]), "%zu.bin", i);
		(void)snprintf(tmps[i], sizeof(tmps[i]),
		    ".biomirror-tmp.0000001%zu", i);
		make_tmp(dest, tmps[i], MB);
		pr[i].path = paths[i];
		pr[i].tmpname = tmps[i];
		pr[i].size = 4 * MB;
		pr[i].list_mtime = 5 * NS;
		pr[i].up_mtime = -1;
		pr[i].etag = etags[i];
		pr[i].ranges = r;
		pr[i].nranges = 1;
		acts[i].path = paths[i];
		acts[i].op = ACT_FETCH;
		acts[i].fs.listed.size = 4 * MB;
		acts[i].fs.listed.size_exact = true;
		acts[i].fs.listed.mtime = 5 * NS;
	}
	is_int(manifest_partials_put(m, 1, pr, 4), 0, "rows");
	is_int(resume_prepare(m, s, acts, 4, &rs, &kept, &removed), 0,
	    "prepare");
	is_int(kept, 4, "all kept");
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		rf = resume_file_new(rs, paths[c[i].row], 4 * MB, 5 * NS);
		ok(rf != NULL && resume_file_covered(rf) == MB, "row %zu held",
		    c[i].row);
		ok(resume_file_same_digest(rf, c[i].digest) == c[i].same,
		    "%s listed %s: %s", etags[c[i].row], c[i].digest[0] ?
		    c[i].digest : "none", c[i].same ? "continued" : "dropped");
		is_int(resume_file_covered(rf), c[i].same ? MB : 0,
		    "ranges after the check");
		resume_file_free(rf);
	}
	rf = resume_file_new(NULL, "n.bin", 4 * MB, 5 * NS);
	ok(resume_file_same_digest(rf, "sha256:ab"), "nothing held: true");
	resume_file_free(rf);
	resume_set_free(rs);
	manifest_close(m);
	store_close(s);
}

#define MANY	300		/* disjoint ranges, more than a row holds */
#define BLK	(64 * 1024)

/* Length of test range i (all differ, all < BLK, no two touch). */
static uint64_t
many_len(size_t i)
{
	return 1 + (uint64_t)((i * 7919) % MANY) * 100;
}

static int
u64_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x > y ? -1 : x < y;
}

/* Fill every gap of rf; true when each add succeeded. */
static bool
fill_gaps(struct resume_file *rf)
{
	static uint64_t	 g[2 * (MANY + 2)];
	size_t		 n, i;
	bool		 good = true;

	n = resume_file_gaps(rf, g, MANY + 2);
	for (i = 0; i < n && i < MANY + 2; i++)
		if (resume_file_add(rf, g[2 * i], g[2 * i + 1] - g[2 * i]) != 0)
			good = false;
	return good;
}

/*
 * A 4-stream MODE E transfer whose streams drift apart holds hundreds of
 * ranges apart: none is refused, the file completes when the gaps fill,
 * and the row records at most RESUME_MAX_RANGES of them, all held bytes
 * (the largest), from which a later run continues.
 */
static void
test_many_ranges(const char *dir)
{
	char			 dest[512], db[512], err[600];
	const char		*tmp = ".biomirror-tmp.00000020";
	const uint64_t		 size = (uint64_t)MANY * BLK + BLK;
	struct manifest		*m = NULL;
	struct store		*s = NULL;
	struct resume_set	*rs = NULL;
	struct resume_file	*rf, *rf2;
	struct partial_rec	 pr;
	struct action		 act;
	uint64_t		 lens[MANY], held = 0, want = 0, got = 0, k;
	char			 path[] = "many.bin";
	size_t			 i, fails = 0, bad = 0, kept, removed;

	rf = resume_file_new(NULL, path, (int64_t)size, 5 * NS);
	is_int(resume_file_check(rf, "\"m\"", 1700000000, -1, err,
	    sizeof(err)), 0, "validators");
	for (i = 0; i < MANY; i++) {
		lens[i] = many_len(i);
		held += lens[i];
		if (resume_file_add(rf, (uint64_t)i * BLK + 7, lens[i]) != 0)
			fails++;
	}
	is_int(fails, 0, "%d disjoint ranges all taken", MANY);
	is_int(resume_file_covered(rf), held, "covered counts them all");
	qsort(lens, MANY, sizeof(*lens), u64_desc);
	for (i = 0; i < RESUME_MAX_RANGES; i++)
		want += lens[i];
	ok(resume_file_record(rf, tmp, &pr), "a record");
	ok(pr.nranges == RESUME_MAX_RANGES, "the row holds %zu ranges",
	    pr.nranges);
	for (i = 0; i < pr.nranges && i <= RESUME_MAX_RANGES; i++) {
		k = pr.ranges[2 * i] / BLK;
		if (pr.ranges[2 * i] != k * BLK + 7 || k >= MANY ||
		    pr.ranges[2 * i + 1] - pr.ranges[2 * i] != many_len(k) ||
		    (i > 0 && pr.ranges[2 * i] <= pr.ranges[2 * i - 1]))
			bad++;
		got += pr.ranges[2 * i + 1] - pr.ranges[2 * i];
	}
	is_int(bad, 0, "each recorded range is a held one, in order");
	is_int(got, want, "the largest ones: %llu of %llu bytes held",
	    (unsigned long long)got, (unsigned long long)held);
	resume_file_recorded(rf, true);
	ok(!resume_file_due(rf, 0), "recorded: no record due until more");
	(void)resume_file_add(rf, 3, 1);
	ok(resume_file_due(rf, 0), "one more byte: due");

	(void)snprintf(dest, sizeof(dest), "%s/dest3", dir);
	(void)snprintf(db, sizeof(db), "%s/m3.db", dir);
	is_int(store_open(dest, 0644, 0755, &s), 0, "store");
	is_int(manifest_open(db, true, &m, err, sizeof(err)), 0, "manifest");
	(void)mkdir(dest, 0755);
	make_tmp(dest, tmp, (size_t)size);
	is_int(manifest_partials_put(m, 1, &pr, 1), 0, "the row is written");
	memset(&act, 0, sizeof(act));
	act.path = path;
	act.op = ACT_FETCH;
	act.fs.listed.size = (int64_t)size;
	act.fs.listed.size_exact = true;
	act.fs.listed.mtime = 5 * NS;
	is_int(resume_prepare(m, s, &act, 1, &rs, &kept, &removed), 0,
	    "prepare");
	is_int(kept, 1, "the row is kept");
	rf2 = resume_file_new(rs, path, (int64_t)size, 5 * NS);
	ok(rf2 != NULL && resume_file_reopened(rf2, true, size),
	    "a later run reopens it");
	is_int(resume_file_covered(rf2), want, "it holds the recorded bytes");
	ok(resume_file_usable(rf2), "usable");
	ok(fill_gaps(rf2), "the later run fills its gaps");
	is_int(resume_file_covered(rf2), size, "and completes");
	resume_file_free(rf2);

	ok(fill_gaps(rf), "this run fills its gaps");
	is_int(resume_file_covered(rf), size, "the file completes");
	is_int(resume_file_gaps(rf, NULL, 0), 0, "no gap left");
	resume_file_free(rf);
	resume_set_free(rs);
	manifest_close(m);
	store_close(s);
}

int
main(void)
{
	char	 dir[] = "/tmp/test_resume.XXXXXX";
	char	 cmd[600];

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_ranges();
	test_validators();
	test_prepare(dir);
	test_same_digest(dir);
	test_many_ranges(dir);
	if ((size_t)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) <
	    sizeof(cmd))
		if (system(cmd) != 0)
			printf("# could not remove %s\n", dir);
	return done_testing();
}
