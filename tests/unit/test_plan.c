/*
 * Unit tests of agent/plan/plan.c: the change rule of issue 2 and the safety
 * guards, against a real manifest and a real store in a mkdtemp dir.
 * Each scenario stages a listing as a run does (listing_append,
 * listing_resolve_times, listing_sort, manifest_stage), builds the plan,
 * and checks every action's op and why and the plan's counters.  A
 * small executor then carries the plan out the way sync.c and sched.c do
 * (store writes, manifest_commit with the same records), so that the next
 * plan starts from what a real run would have committed.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "biomirror/commit.h"
#include "biomirror/config.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/store.h"
#include "tap.h"

#define NS		1000000000LL
#define T0		1700000000LL	/* a listed mtime, seconds */
#define T_PLAIN		1600000000LL	/* Last-Modified when undated */
#define PLAIN_SIZE	10		/* bytes of an unsized file */
#define MB		(1024LL * 1024)

/* Setup steps that must work; a failure ends the test (exit 2). */
#define MUST(x) do {							\
	int must_rc_ = (x);						\
	if (must_rc_ != 0) {						\
		printf("Bail out! %s:%d: %s = %d\n", __FILE__,		\
		    __LINE__, #x, must_rc_);				\
		exit(2);						\
	}								\
} while (0)

static char	 root[] = "/tmp/test_plan.XXXXXX";
static int	 nfx;

struct fx {
	char		 dest[128];
	struct manifest	*m;
	struct store	*s;
};

/* One listed entry. */
struct spec {
	const char	*path;
	int		 type;		/* 'f' or 'd' */
	int64_t		 size;		/* exact bytes, -1 none */
	const char	*shown;		/* inexact size ("93M"), or NULL */
	int64_t		 mtime;		/* seconds, -1 no date */
};

static void
fx_open(struct fx *fx)
{
	char	 dir[64], db[128], err[256];

	memset(fx, 0, sizeof(*fx));
	(void)snprintf(dir, sizeof(dir), "%s/%d", root, ++nfx);
	MUST(mkdir(dir, 0700));
	(void)snprintf(db, sizeof(db), "%s/m.db", dir);
	(void)snprintf(fx->dest, sizeof(fx->dest), "%s/dest", dir);
	MUST(manifest_open(db, true, &fx->m, err, sizeof(err)));
	MUST(store_open(fx->dest, 0644, 0755, &fx->s));
}

static void
fx_close(struct fx *fx)
{
	store_close(fx->s);
	manifest_close(fx->m);
}

static void
local_path(const struct fx *fx, const char *rel, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/%s", fx->dest, rel) >= len)
		abort();
}

/* Stage the listing v[0..n) the way run_list() does. */
static void
stage(struct fx *fx, const struct spec *v, size_t n)
{
	struct listing	*l;
	struct entry	*e;
	struct tzspec	 tz;
	int64_t		 unit;
	char		*end;
	long		 num;
	size_t		 i;

	if ((l = listing_new(1000)) == NULL)
		abort();
	for (i = 0; i < n; i++) {
		MUST(listing_append(l, &e));
		if ((e->path = strdup(v[i].path)) == NULL)
			abort();
		e->type = (enum entry_type)v[i].type;
		if (v[i].shown != NULL) {
			num = strtol(v[i].shown, &end, 10);
			unit = *end == 'G' ? 1024 * MB : *end == 'M' ? MB :
			    1024;
			e->size = num * unit;
			e->size_min = e->size - unit / 2;
			e->size_max = e->size + unit / 2 - 1;
			e->size_exact = false;
			if ((e->size_display = strdup(v[i].shown)) == NULL)
				abort();
		} else if (v[i].size >= 0) {
			e->size = e->size_min = e->size_max = v[i].size;
			e->size_exact = true;
		}
		if (v[i].mtime >= 0) {
			e->mtime_wall = v[i].mtime;
			e->mtime_prec = MTIME_SECOND;
		}
	}
	MUST(tzspec_parse("UTC", &tz));
	MUST(listing_resolve_times(l, &tz));
	MUST(listing_sort(l));
	MUST(manifest_stage(fx->m, l));
	listing_free(l);
}

/* Stage v and build the plan; without_store passes store NULL. */
static struct plan *
mkplan(struct fx *fx, const struct spec *v, size_t n, bool do_delete,
    bool without_store)
{
	struct plan	*p = NULL;

	stage(fx, v, n);
	MUST(plan_build(fx->m, without_store ? NULL : fx->s, do_delete, NULL, &p));
	return p;
}

static const struct action *
find_act(const struct plan *p, const char *path)
{
	size_t	 i;

	for (i = 0; i < p->nacts; i++)
		if (strcmp(p->acts[i].path, path) == 0)
			return &p->acts[i];
	return NULL;
}

/* Check that path has exactly one action, with op and why. */
static const struct action *
is_act(const struct plan *p, const char *path, enum action_op op,
    const char *why, const char *tag)
{
	const struct action *a;
	size_t		 i, n = 0;

	for (i = 0; i < p->nacts; i++)
		if (strcmp(p->acts[i].path, path) == 0)
			n++;
	is_int(n, 1, "%s: one action for %s", tag, path);
	if ((a = find_act(p, path)) == NULL)
		return NULL;
	is_str(action_name(a->op), action_name(op), "%s: %s is %s", tag,
	    path, action_name(op));
	is_str(a->why, why, "%s: %s because \"%s\"", tag, path,
	    why ? why : "(none)");
	return a;
}

static void
no_act(const struct plan *p, const char *path, const char *tag)
{
	ok(find_act(p, path) == NULL, "%s: nothing to do for %s", tag, path);
}

/* "op path, op path, ..." in plan order. */
static const char *
plan_str(const struct plan *p)
{
	static char	 buf[4096];
	size_t		 i, len = 0;

	buf[0] = '\0';
	for (i = 0; i < p->nacts && len < sizeof(buf); i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s %s",
		    i ? ", " : "", action_name(p->acts[i].op),
		    p->acts[i].path);
	return buf;
}

static void
is_counts(const struct plan *p, int64_t listed, int64_t nfetch,
    int64_t ntouch, int64_t nmkdir, int64_t ndelete, int64_t nkeep,
    int64_t unchanged, const char *tag)
{
	is_int(p->listed, listed, "%s: listed", tag);
	is_int(p->nfetch, nfetch, "%s: nfetch", tag);
	is_int(p->ntouch, ntouch, "%s: ntouch", tag);
	is_int(p->nmkdir, nmkdir, "%s: nmkdir", tag);
	is_int(p->ndelete, ndelete, "%s: ndelete", tag);
	is_int(p->nkeep, nkeep, "%s: nkeep", tag);
	is_int(p->unchanged, unchanged, "%s: unchanged", tag);
	is_int(p->nacts, nfetch + ntouch + nmkdir + ndelete + nkeep,
	    "%s: nacts", tag);
}

/*
 * "Fetch" a file: upstream's exact size is the listed size when exact,
 * 1000 bytes under the shown value when inexact, PLAIN_SIZE when not
 * shown; its Last-Modified is the listed mtime or T_PLAIN.  The file is
 * written sparse (one byte at the end) and published with that mtime.
 */
static void
do_fetch(struct fx *fx, int64_t run, const struct action *a)
{
	struct store_commit_item it;
	struct store_file *f = NULL;
	struct commit_rec rec;
	char		 etag[PATH_MAX + 8];
	int64_t		 size, mtime;

	if (a->fs.listed.size < 0)
		size = PLAIN_SIZE;
	else if (a->fs.listed.size_exact)
		size = a->fs.listed.size;
	else
		size = a->fs.listed.size - 1000;
	mtime = a->fs.listed.prec != MTIME_UNKNOWN ? a->fs.listed.mtime : T_PLAIN * NS;
	MUST(store_file_open(fx->s, a->path, size, &f));
	if (size > 0)
		MUST(store_file_write(f, (uint64_t)size - 1, "x", 1));
	it.file = f;
	it.size = size;
	it.mtime = mtime;
	it.rc = 99;
	MUST(store_commit(fx->s, &it, 1));
	MUST(it.rc);
	(void)snprintf(etag, sizeof(etag), "\"etag-%s\"", a->path);
	commit_rec_action(&rec, a, COMMIT_FETCHED);
	rec.fs.upstream.size = size;
	rec.fs.upstream.mtime = mtime;
	rec.etag = etag;
	rec.fs.local.size = size;
	rec.fs.local.mtime = mtime;
	rec.bytes = size;
	MUST(manifest_commit(fx->m, run, &rec, 1));
}

/* Carry out a plan as sync.c and sched.c would (304 for conditionals). */
static void
execute(struct fx *fx, const struct plan *p)
{
	const struct action *a;
	struct commit_rec rec;
	int64_t		 run;
	size_t		 i;
	int		 rc;

	MUST(manifest_run_begin(fx->m, "sync", T0 * NS, &run));
	for (i = 0; i < p->nacts; i++) {
		a = &p->acts[i];
		switch (a->op) {
		case ACT_MKDIR:
			MUST(store_mkdirs(fx->s, a->path));
			memset(&rec, 0, sizeof(rec));
			rec.path = a->path;
			rec.op = COMMIT_MKDIR;
			rec.type = ENTRY_DIR;
			rec.fs.listed.size = -1;
			rec.fs.listed.mtime = a->fs.listed.mtime;
			rec.fs.listed.prec = a->fs.listed.prec;
			rec.fs.upstream.size = rec.fs.upstream.mtime = -1;
			rec.fs.local.size = rec.fs.local.mtime = -1;
			MUST(manifest_commit(fx->m, run, &rec, 1));
			break;
		case ACT_FETCH:
			do_fetch(fx, run, a);
			break;
		case ACT_COND_FETCH:
			commit_rec_action(&rec, a, COMMIT_NOT_MODIFIED);
			MUST(manifest_commit(fx->m, run, &rec, 1));
			break;
		case ACT_TOUCH:
			MUST(store_set_mtime(fx->s, a->path, action_local(a).mtime));
			commit_rec_action(&rec, a, COMMIT_TOUCHED);
			MUST(manifest_commit(fx->m, run, &rec, 1));
			break;
		case ACT_DELETE:
			rc = store_delete(fx->s, a->path);
			if (rc != BM_ENOENT)
				MUST(rc);
			memset(&rec, 0, sizeof(rec));
			rec.path = a->path;
			rec.op = COMMIT_DELETED;
			rec.type = a->type;
			MUST(manifest_commit(fx->m, run, &rec, 1));
			break;
		case ACT_ADOPT:		/* only with plan_opts.adopt */
			commit_rec_action(&rec, a, COMMIT_ADOPTED);
			MUST(manifest_commit(fx->m, run, &rec, 1));
			break;
		case ACT_KEEP:
		case ACT_CONFLICT:	/* reported by the run, nothing done */
		case ACT_SYMLINK:	/* none in these specs */
			break;
		}
	}
}

/* Plan and execute v: the state a completed run leaves. */
static void
sync_to(struct fx *fx, const struct spec *v, size_t n, bool do_delete)
{
	struct plan	*p;

	p = mkplan(fx, v, n, do_delete, false);
	execute(fx, p);
	plan_free(p);
}

static struct mirror_conf *
conf(const char *delete, const char *max_delete)
{
	struct mirror_conf *c;
	char		 err[256];

	if ((c = mirror_conf_new("t")) == NULL)
		abort();
	MUST(mirror_conf_set(c, "delete", delete, err, sizeof(err)));
	MUST(mirror_conf_set(c, "max_delete", max_delete, err, sizeof(err)));
	return c;
}

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* The tree of the change-rule scenarios, as first listed. */
static const struct spec tree0[] = {
	{ "a", 'd', -1, NULL, T0 },
	{ "a/b", 'd', -1, NULL, T0 },
	{ "a/b/deep", 'f', 300, NULL, T0 },
	{ "a/x", 'f', 100, NULL, T0 },
	{ "dirgone", 'd', -1, NULL, T0 },
	{ "drift", 'f', 30, NULL, T0 },
	{ "emptydir", 'd', -1, NULL, T0 },
	{ "inexact", 'f', -1, "93M", T0 },
	{ "lsize", 'f', 20, NULL, T0 },
	{ "missing", 'f', 10, NULL, T0 },
	{ "mtime", 'f', 700, NULL, T0 },
	{ "plain", 'f', -1, NULL, -1 },
	{ "plain-gone", 'f', -1, NULL, -1 },
	{ "same", 'f', 1000, NULL, T0 },
	{ "size", 'f', 500, NULL, T0 },
};

/* Same tree, next run: "size" grew, "mtime" is newer, the rest as before. */
static const struct spec tree1[] = {
	{ "a", 'd', -1, NULL, T0 },
	{ "a/b", 'd', -1, NULL, T0 },
	{ "a/b/deep", 'f', 300, NULL, T0 },
	{ "a/x", 'f', 100, NULL, T0 },
	{ "dirgone", 'd', -1, NULL, T0 },
	{ "drift", 'f', 30, NULL, T0 },
	{ "emptydir", 'd', -1, NULL, T0 },
	{ "inexact", 'f', -1, "93M", T0 },
	{ "lsize", 'f', 20, NULL, T0 },
	{ "missing", 'f', 10, NULL, T0 },
	{ "mtime", 'f', 700, NULL, T0 + 60 },
	{ "plain", 'f', -1, NULL, -1 },
	{ "plain-gone", 'f', -1, NULL, -1 },
	{ "same", 'f', 1000, NULL, T0 },
	{ "size", 'f', 600, NULL, T0 },
};

static void
test_change_rule(void)
{
	struct fx	 fx;
	struct plan	*p;
	const struct action *a;
	struct mirror_conf *c;
	struct timespec	 ts[2];
	char		 path[PATH_MAX], err[256];
	int64_t		 inexact_size = 93 * MB;

	fx_open(&fx);

	/* First run: everything is new. */
	p = mkplan(&fx, tree0, NELEM(tree0), false, false);
	is_str(plan_str(p), "mkdir a, mkdir a/b, mkdir dirgone, "
	    "mkdir emptydir, fetch a/b/deep, fetch a/x, fetch drift, "
	    "fetch inexact, fetch lsize, fetch missing, fetch mtime, "
	    "fetch plain, fetch plain-gone, fetch same, fetch size",
	    "new: mkdirs first, then fetches, in path order");
	is_counts(p, 15, 11, 0, 4, 0, 0, 0, "new");
	is_int(p->manifest_files, 0, "new: manifest held no files");
	is_int(p->fetch_bytes, 300 + 100 + 30 + inexact_size + 20 + 10 +
	    700 + 1000 + 500, "new: fetch_bytes sums the listed sizes");
	a = is_act(p, "a/x", ACT_FETCH, "new", "new");
	if (a != NULL) {
		is_int(a->fs.listed.size, 100, "new: a/x list_size");
		ok(a->fs.listed.size_exact, "new: a/x size exact");
		is_int(a->fs.listed.mtime, T0 * NS, "new: a/x list_mtime in ns");
		is_int(a->fs.listed.prec, MTIME_SECOND, "new: a/x list_prec");
		is_int(action_upstream(a).size, -1, "new: a/x up_size unknown");
		is_int(action_upstream(a).mtime, -1, "new: a/x up_mtime unknown");
		ok(action_etag(a) == NULL, "new: a/x no etag");
		is_int(action_local(a).size, -1, "new: a/x no local size");
		is_int(a->type, ENTRY_FILE, "new: a/x type file");
	}
	a = is_act(p, "plain", ACT_FETCH, "new", "new");
	if (a != NULL) {
		is_int(a->fs.listed.size, -1, "new: plain list_size unknown");
		is_int(action_bytes(a), -1, "new: plain bytes unknown");
	}
	a = is_act(p, "a/x", ACT_FETCH, "new", "new");
	if (a != NULL)
		is_int(action_bytes(a), 100, "new: a/x fetches 100 bytes");
	a = is_act(p, "a", ACT_MKDIR, "new", "new");
	if (a != NULL)
		is_int(a->type, ENTRY_DIR, "new: a type dir");
	execute(&fx, p);
	plan_free(p);

	/* Same listing, nothing touched locally. */
	p = mkplan(&fx, tree0, NELEM(tree0), false, false);
	is_str(plan_str(p), "check plain, check plain-gone",
	    "same: only the undated files are asked about");
	is_counts(p, 15, 2, 0, 0, 0, 0, 9, "same");
	is_int(p->manifest_files, 11, "same: manifest_files");
	is_int(p->fetch_bytes, 0,
	    "same: conditional fetches count no bytes (a 304 is free)");
	c = conf("no", "10%");
	is_int(plan_guard(p, c, 1, false, err, sizeof(err)), 0,
	    "same: an undated mirror bigger than the free space is not "
	    "refused");
	mirror_conf_free(c);
	no_act(p, "same", "same");
	no_act(p, "inexact", "same");
	no_act(p, "a", "same");
	no_act(p, "emptydir", "same");
	a = is_act(p, "plain", ACT_COND_FETCH, "no size or date", "same");
	if (a != NULL) {
		is_str(action_etag(a), "\"etag-plain\"", "same: plain carries etag");
		is_int(action_upstream(a).mtime, T_PLAIN * NS,
		    "same: plain carries up_mtime");
		is_int(action_upstream(a).size, PLAIN_SIZE, "same: plain carries up_size");
		is_int(a->fs.listed.size, -1, "same: plain list_size unknown");
		is_int(a->fs.listed.prec, MTIME_UNKNOWN, "same: plain no date");
	}
	plan_free(p);

	/* Local changes behind the manifest's back. */
	local_path(&fx, "missing", path, sizeof(path));
	MUST(unlink(path));
	local_path(&fx, "plain-gone", path, sizeof(path));
	MUST(unlink(path));
	local_path(&fx, "lsize", path, sizeof(path));
	MUST(truncate(path, 21));
	local_path(&fx, "dirgone", path, sizeof(path));
	MUST(rmdir(path));
	local_path(&fx, "drift", path, sizeof(path));
	ts[0].tv_sec = ts[1].tv_sec = T0 + 5;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	MUST(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW));

	p = mkplan(&fx, tree1, NELEM(tree1), false, false);
	is_str(plan_str(p), "mkdir dirgone, touch drift, fetch lsize, "
	    "fetch missing, fetch mtime, check plain, fetch plain-gone, "
	    "fetch size", "changes: the whole plan in order");
	is_counts(p, 15, 6, 1, 1, 0, 0, 4, "changes");
	is_int(p->fetch_bytes, 20 + 10 + 700 + PLAIN_SIZE + 600,
	    "changes: fetch_bytes (recorded size for plain-gone, none for "
	    "the conditional plain)");
	no_act(p, "same", "changes");
	no_act(p, "a/x", "changes");
	no_act(p, "a/b/deep", "changes");
	no_act(p, "inexact", "changes: \"93M\" still \"93M\"");
	no_act(p, "emptydir", "changes");
	is_act(p, "dirgone", ACT_MKDIR, "local missing", "changes");
	a = is_act(p, "size", ACT_FETCH, "changed", "changes");
	if (a != NULL) {
		is_int(a->fs.listed.size, 600, "changes: size list_size new");
		is_int(action_upstream(a).size, 500, "changes: size up_size recorded");
		is_int(action_local(a).size, 500, "changes: size local_size");
		is_str(action_etag(a), "\"etag-size\"", "changes: size etag");
	}
	a = is_act(p, "mtime", ACT_FETCH, "changed", "changes");
	if (a != NULL) {
		is_int(a->fs.listed.mtime, (T0 + 60) * NS,
		    "changes: mtime list_mtime new");
		is_int(action_upstream(a).mtime, T0 * NS, "changes: mtime up_mtime old");
	}
	is_act(p, "missing", ACT_FETCH, "local missing", "changes");
	is_act(p, "plain-gone", ACT_FETCH, "local missing", "changes");
	a = is_act(p, "lsize", ACT_FETCH, "local size differs", "changes");
	if (a != NULL)
		is_int(action_local(a).size, 20, "changes: lsize recorded size");
	a = is_act(p, "drift", ACT_TOUCH, "local mtime drifted", "changes");
	if (a != NULL)
		is_int(action_local(a).mtime, T0 * NS,
		    "changes: drift sets the committed mtime back");
	a = is_act(p, "plain", ACT_COND_FETCH, "no size or date", "changes");
	if (a != NULL) {
		is_str(action_etag(a), "\"etag-plain\"", "changes: plain etag");
		is_int(action_upstream(a).mtime, T_PLAIN * NS, "changes: plain up_mtime");
	}
	execute(&fx, p);
	plan_free(p);

	/* After the run the tree is current again. */
	p = mkplan(&fx, tree1, NELEM(tree1), false, false);
	is_str(plan_str(p), "check plain, check plain-gone",
	    "after: only the undated files are asked about");
	is_counts(p, 15, 2, 0, 0, 0, 0, 9, "after");
	plan_free(p);

	/* Without a destination every file is missing. */
	p = mkplan(&fx, tree1, NELEM(tree1), false, true);
	is_str(plan_str(p), "mkdir a, mkdir a/b, mkdir dirgone, "
	    "mkdir emptydir, fetch a/b/deep, fetch a/x, fetch drift, "
	    "fetch inexact, fetch lsize, fetch missing, fetch mtime, "
	    "fetch plain, fetch plain-gone, fetch same, fetch size",
	    "no store: every dir made, every file fetched");
	is_counts(p, 15, 11, 0, 4, 0, 0, 0, "no store");
	is_act(p, "same", ACT_FETCH, "local missing", "no store");
	is_act(p, "plain", ACT_FETCH, "local missing", "no store");
	is_act(p, "inexact", ACT_FETCH, "local missing", "no store");
	is_act(p, "a/b", ACT_MKDIR, "local missing", "no store");
	is_int(p->fetch_bytes, 300 + 100 + 30 + inexact_size + 20 + 10 +
	    700 + PLAIN_SIZE + PLAIN_SIZE + 1000 + 600,
	    "no store: fetch_bytes (recorded sizes for undated files)");
	plan_free(p);

	fx_close(&fx);
}

/* Inexact sizes are compared as shown. */
static void
test_inexact(void)
{
	static const struct spec v93[] = {
		{ "db.tar.gz", 'f', -1, "93M", T0 },
	}, v94[] = {
		{ "db.tar.gz", 'f', -1, "94M", T0 },
	}, vexact[] = {
		{ "db.tar.gz", 'f', 93 * MB, NULL, T0 },
	};
	struct fx	 fx;
	struct plan	*p;
	const struct action *a;

	fx_open(&fx);
	sync_to(&fx, v93, 1, false);
	p = mkplan(&fx, v93, 1, false, false);
	is_counts(p, 1, 0, 0, 0, 0, 0, 1, "93M again");
	plan_free(p);
	p = mkplan(&fx, v94, 1, false, false);
	a = is_act(p, "db.tar.gz", ACT_FETCH, "changed", "93M -> 94M");
	if (a != NULL)
		ok(!a->fs.listed.size_exact, "93M -> 94M: size inexact");
	is_counts(p, 1, 1, 0, 0, 0, 0, 0, "93M -> 94M");
	plan_free(p);
	p = mkplan(&fx, vexact, 1, false, false);
	is_act(p, "db.tar.gz", ACT_FETCH, "changed",
	    "93M -> exact 93M bytes (exactness changed)");
	plan_free(p);
	fx_close(&fx);
}

/* Gone upstream: deletes last, children first; keep without delete. */
static void
test_gone(void)
{
	static const struct spec before[] = {
		{ "keep", 'f', 5, NULL, T0 },
		{ "old", 'd', -1, NULL, T0 },
		{ "old/g", 'f', 7, NULL, T0 },
		{ "old/sub", 'd', -1, NULL, T0 },
		{ "old/sub/f", 'f', 9, NULL, T0 },
		{ "z", 'f', 11, NULL, T0 },
	}, after[] = {
		{ "keep", 'f', 5, NULL, T0 },
		{ "new", 'd', -1, NULL, T0 },
		{ "new/inner", 'd', -1, NULL, T0 },
		{ "new/inner/h", 'f', 13, NULL, T0 },
		{ "z", 'f', 11, NULL, T0 },
	};
	struct fx	 fx;
	struct plan	*p;
	const struct action *a;
	char		 path[PATH_MAX];
	struct stat	 st;

	fx_open(&fx);
	sync_to(&fx, before, NELEM(before), true);

	p = mkplan(&fx, after, NELEM(after), true, false);
	is_str(plan_str(p), "mkdir new, mkdir new/inner, fetch new/inner/h, "
	    "delete old/sub/f, delete old/sub, delete old/g, delete old",
	    "gone: mkdirs (parents first), fetches, deletes (children "
	    "first)");
	is_counts(p, 5, 1, 0, 2, 4, 0, 2, "gone");
	is_int(p->manifest_files, 4, "gone: manifest_files");
	is_int(p->fetch_bytes, 13, "gone: fetch_bytes");
	a = is_act(p, "old/g", ACT_DELETE, "gone upstream", "gone");
	if (a != NULL) {
		is_int(a->type, ENTRY_FILE, "gone: old/g recorded type");
		is_int(action_local(a).size, 7, "gone: old/g recorded local size");
	}
	a = is_act(p, "old/sub", ACT_DELETE, "gone upstream", "gone");
	if (a != NULL)
		is_int(a->type, ENTRY_DIR, "gone: old/sub recorded type");
	plan_free(p);

	p = mkplan(&fx, after, NELEM(after), false, false);
	is_str(plan_str(p), "mkdir new, mkdir new/inner, fetch new/inner/h, "
	    "keep old/sub/f, keep old/sub, keep old/g, keep old",
	    "kept: delete = no keeps them, still last");
	is_counts(p, 5, 1, 0, 2, 0, 4, 2, "kept");
	is_act(p, "old/g", ACT_KEEP, "gone upstream", "kept");
	plan_free(p);

	/* Carry out the deletes; the next plan is empty. */
	p = mkplan(&fx, after, NELEM(after), true, false);
	execute(&fx, p);
	plan_free(p);
	local_path(&fx, "old", path, sizeof(path));
	ok(lstat(path, &st) == -1, "gone: old removed by the executed plan");
	p = mkplan(&fx, after, NELEM(after), true, false);
	is_counts(p, 5, 0, 0, 0, 0, 0, 3, "gone done");
	is_int(p->manifest_files, 3, "gone done: manifest_files");
	plan_free(p);

	/* The executed mkdirs made the new tree. */
	local_path(&fx, "new/inner", path, sizeof(path));
	ok(stat(path, &st) == 0 && S_ISDIR(st.st_mode),
	    "gone: new/inner exists");
	fx_close(&fx);
}

/*
 * plan_opts.keep: beneath a directory the listing could not list (a
 * followed link the server refused), nothing is deleted; the rest is.
 */
static void
test_keep_unlisted(void)
{
	static const struct spec before[] = {
		{ "link", 'd', -1, NULL, T0 },
		{ "link/a", 'f', 3, NULL, T0 },
		{ "link/sub", 'd', -1, NULL, T0 },
		{ "link/sub/b", 'f', 4, NULL, T0 },
		{ "linkx", 'f', 5, NULL, T0 },
		{ "other", 'f', 6, NULL, T0 },
	}, after[] = {
		{ "link", 'd', -1, NULL, T0 },
	};
	struct fx	 fx;
	struct plan	*p = NULL;
	struct plan_opts po;
	struct listing	*keep;
	struct entry	*e;

	fx_open(&fx);
	sync_to(&fx, before, NELEM(before), true);
	keep = listing_new(16);
	MUST(listing_append(keep, &e));
	e->type = ENTRY_DIR;
	e->path = strdup("link");
	memset(&po, 0, sizeof(po));
	po.keep = keep;
	stage(&fx, after, NELEM(after));
	MUST(plan_build_opts(fx.m, fx.s, true, NULL, &po, &p));
	is_act(p, "link/a", ACT_KEEP, "not listed", "unlisted: link/a");
	is_act(p, "link/sub", ACT_KEEP, "not listed", "unlisted: link/sub");
	is_act(p, "link/sub/b", ACT_KEEP, "not listed", "unlisted: link/sub/b");
	is_act(p, "linkx", ACT_DELETE, "gone upstream",
	    "unlisted: a sibling sharing the prefix is deleted");
	is_act(p, "other", ACT_DELETE, "gone upstream", "unlisted: other");
	plan_free(p);
	listing_free(keep);
	fx_close(&fx);
}

/* Deep ordering with names that sort between parent and child. */
static void
test_order(void)
{
	static const struct spec before[] = {
		{ "d", 'd', -1, NULL, T0 },
		{ "d-x", 'd', -1, NULL, T0 },
		{ "d-x/f", 'f', 1, NULL, T0 },
		{ "d/e", 'd', -1, NULL, T0 },
		{ "d/e/f", 'f', 1, NULL, T0 },
		{ "d/e/g", 'd', -1, NULL, T0 },
		{ "d/e/g/h", 'f', 1, NULL, T0 },
		{ "d/f", 'f', 1, NULL, T0 },
		{ "top", 'f', 1, NULL, T0 },
	}, after[] = {
		{ "top", 'f', 1, NULL, T0 },
	};
	struct fx	 fx;
	struct plan	*p;
	size_t		 i, j;
	bool		 parents_first = true, children_first = true;
	const char	*x, *y;

	fx_open(&fx);
	p = mkplan(&fx, before, NELEM(before), true, false);
	is_str(plan_str(p), "mkdir d, mkdir d-x, mkdir d/e, mkdir d/e/g, "
	    "fetch d-x/f, fetch d/e/f, fetch d/e/g/h, fetch d/f, fetch top",
	    "order: mkdirs in path order");
	for (i = 0; i < p->nacts; i++)
		for (j = i + 1; j < p->nacts; j++) {
			x = p->acts[i].path;
			y = p->acts[j].path;
			if (p->acts[i].op == ACT_MKDIR &&
			    p->acts[j].op == ACT_MKDIR &&
			    strncmp(y, x, strlen(y)) == 0 &&
			    x[strlen(y)] == '/')
				parents_first = false;
		}
	ok(parents_first, "order: no mkdir before its parent's");
	execute(&fx, p);
	plan_free(p);

	p = mkplan(&fx, after, NELEM(after), true, false);
	is_str(plan_str(p), "delete d/f, delete d/e/g/h, delete d/e/g, "
	    "delete d/e/f, delete d/e, delete d-x/f, delete d-x, delete d",
	    "order: deletes children first");
	for (i = 0; i < p->nacts; i++)
		for (j = i + 1; j < p->nacts; j++) {
			x = p->acts[i].path;
			y = p->acts[j].path;
			if (strncmp(x, y, strlen(x)) == 0 &&
			    y[strlen(x)] == '/')
				children_first = false;
		}
	ok(children_first, "order: no delete before its children's");
	execute(&fx, p);
	plan_free(p);
	fx_close(&fx);
}

/* A fixture whose manifest holds n committed files f00, f01, ... */
static struct spec	 files_v[64];
static char		 files_names[64][24];

static const struct spec *
files(size_t n)
{
	size_t	 i;

	for (i = 0; i < n; i++) {
		(void)snprintf(files_names[i], sizeof(files_names[i]), "f%02zu",
		    i);
		files_v[i].path = files_names[i];
		files_v[i].type = 'f';
		files_v[i].size = 100;
		files_v[i].shown = NULL;
		files_v[i].mtime = T0;
	}
	return files_v;
}

/*
 * Seed a manifest with total files, list only the first kept of them, and
 * run the guard with delete and max_delete; returns its code.
 */
static int
guard_case_opts(size_t total, size_t kept, const char *delete,
    const char *max_delete, uint64_t free_bytes, bool allow_empty, char *err,
    size_t errlen, struct plan **ret)
{
	struct fx	 fx;
	struct mirror_conf *c;
	struct plan	*p;
	int		 rc;

	fx_open(&fx);
	c = conf(delete, max_delete);
	sync_to(&fx, files(total), total, true);
	p = mkplan(&fx, files(total), kept, c->delete, false);
	err[0] = '\0';
	rc = plan_guard(p, c, free_bytes, allow_empty, err, errlen);
	if (ret != NULL)
		*ret = p;
	else
		plan_free(p);
	mirror_conf_free(c);
	fx_close(&fx);
	return rc;
}

/* guard_case_opts() without --allow-empty. */
static int
guard_case(size_t total, size_t kept, const char *delete,
    const char *max_delete, uint64_t free_bytes, char *err, size_t errlen,
    struct plan **ret)
{
	return guard_case_opts(total, kept, delete, max_delete, free_bytes,
	    false, err, errlen, ret);
}

static void
test_guard(void)
{
	const struct action *a;
	struct fx	 fx;
	struct mirror_conf *c;
	struct plan	*p;
	char		 err[256];
	static const struct spec two[] = {
		{ "a", 'f', 100, NULL, T0 },
		{ "b", 'f', 200, NULL, T0 },
	}, big[] = {
		{ "big", 'f', 3145728, NULL, T0 },
	}, dirs[] = {
		{ "d", 'd', -1, NULL, T0 },
		{ "d/f", 'f', 100, NULL, T0 },
		{ "e", 'f', 100, NULL, T0 },
		{ "g", 'f', 100, NULL, T0 },
		{ "h", 'f', 100, NULL, T0 },
		{ "i", 'f', 100, NULL, T0 },
	};

	/* Empty listing where the manifest holds files. */
	is_int(guard_case(5, 0, "yes", "100%", UINT64_MAX, err, sizeof(err),
	    NULL), BM_ELIMIT, "guard: empty listing refused (delete = yes)");
	is_str(err, "upstream listing is empty but the manifest holds 5 "
	    "files: refusing (if upstream really was emptied, run with "
	    "--allow-empty)", "guard: empty listing reason names "
	    "--allow-empty");
	is_int(guard_case(5, 0, "no", "10%", UINT64_MAX, err, sizeof(err),
	    &p), BM_ELIMIT, "guard: empty listing refused (delete = no)");
	is_str(err, "upstream listing is empty but the manifest holds 5 "
	    "files: refusing (if upstream really was emptied, run with "
	    "--allow-empty)", "guard: empty listing reason (delete = no)");
	is_counts(p, 0, 0, 0, 0, 0, 5, 0, "guard: empty listing plan");
	plan_free(p);

	/* --allow-empty: the empty listing passes; max_delete still counts. */
	is_int(guard_case_opts(5, 0, "no", "10%", UINT64_MAX, true, err,
	    sizeof(err), NULL), 0, "guard: --allow-empty, delete = no: ok");
	is_str(err, "", "guard: --allow-empty, delete = no: no reason");
	is_int(guard_case_opts(5, 0, "yes", "100%", UINT64_MAX, true, err,
	    sizeof(err), &p), 0, "guard: --allow-empty, max_delete 100%%: ok");
	is_counts(p, 0, 0, 0, 0, 5, 0, 0, "guard: --allow-empty deletes 5");
	a = is_act(p, "f00", ACT_DELETE, "gone upstream", "allow-empty");
	if (a != NULL)
		is_int(action_bytes(a), 100, "guard: a delete frees 100 bytes");
	plan_free(p);
	is_int(guard_case_opts(20, 0, "yes", "10%", UINT64_MAX, true, err,
	    sizeof(err), NULL), BM_ELIMIT,
	    "guard: --allow-empty, max_delete 10%%: refused by max_delete");
	is_str(err, "max_delete: would delete 20 files, max_delete allows 2 "
	    "(10% of 20 files): refusing (--max-delete raises it for one run)",
	    "guard: --allow-empty, max_delete reason");

	/*
	 * A listing of directories only is empty too (break-it brk1 #7):
	 * refused even with max_delete 100%; --allow-empty lets it through.
	 */
	fx_open(&fx);
	c = conf("yes", "100%");
	sync_to(&fx, dirs, NELEM(dirs), true);
	p = mkplan(&fx, dirs, 1, true, false);
	is_int(p->listed, 1, "guard: only a directory listed");
	is_int(p->listed_files, 0, "guard: no file listed");
	is_int(plan_guard(p, c, UINT64_MAX, false, err, sizeof(err)),
	    BM_ELIMIT, "guard: a listing of directories only is refused");
	is_str(err, "upstream listing is empty (no files, 1 directories or "
	    "links) but the manifest holds 5 files: refusing (if upstream "
	    "really was emptied, run with --allow-empty)",
	    "guard: directories-only reason names --allow-empty");
	is_int(plan_guard(p, c, UINT64_MAX, true, err, sizeof(err)), 0,
	    "guard: directories only, --allow-empty: ok");
	plan_free(p);
	p = mkplan(&fx, dirs, 2, true, false);
	is_int(p->listed_files, 1, "guard: one file listed");
	is_int(plan_guard(p, c, UINT64_MAX, false, err, sizeof(err)), 0,
	    "guard: one file listed is no empty listing");
	plan_free(p);
	mirror_conf_free(c);
	fx_close(&fx);

	/* max_delete as a count. */
	is_int(guard_case(10, 6, "yes", "3", UINT64_MAX, err, sizeof(err),
	    NULL), BM_ELIMIT, "guard: 4 gone, max_delete 3: refused");
	is_str(err, "max_delete: would delete 4 files, max_delete allows 3: "
	    "refusing (--max-delete raises it for one run)",
	    "guard: max_delete count reason");
	is_int(guard_case(10, 7, "yes", "3", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: 3 gone, max_delete 3: ok");
	is_str(err, "", "guard: no reason when ok");
	is_int(guard_case(10, 6, "yes", "4", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: 4 gone, max_delete 4: ok");
	is_int(guard_case(10, 9, "yes", "0", UINT64_MAX, err, sizeof(err),
	    NULL), BM_ELIMIT, "guard: 1 gone, max_delete 0: refused");
	is_int(guard_case(10, 10, "yes", "0", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: none gone, max_delete 0: ok");

	/* max_delete as a percentage: rounded up, at least 1. */
	is_int(guard_case(5, 4, "yes", "10%", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: 10%% of 5 is 1: 1 gone ok");
	is_int(guard_case(5, 3, "yes", "10%", UINT64_MAX, err, sizeof(err),
	    NULL), BM_ELIMIT, "guard: 10%% of 5 is 1: 2 gone refused");
	is_str(err, "max_delete: would delete 2 files, max_delete allows 1 "
	    "(10% of 5 files): refusing (--max-delete raises it for one run)",
	    "guard: max_delete percentage reason");
	is_int(guard_case(11, 9, "yes", "10%", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: 10%% of 11 is 2: 2 gone ok");
	is_int(guard_case(11, 8, "yes", "10%", UINT64_MAX, err, sizeof(err),
	    NULL), BM_ELIMIT, "guard: 10%% of 11 is 2: 3 gone refused");
	is_str(err, "max_delete: would delete 3 files, max_delete allows 2 "
	    "(10% of 11 files): refusing (--max-delete raises it for one run)",
	    "guard: 10%% of 11 reason");
	is_int(guard_case(20, 18, "yes", "10%", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: 10%% of 20 is 2: 2 gone ok");
	is_int(guard_case(20, 17, "yes", "10%", UINT64_MAX, err, sizeof(err),
	    NULL), BM_ELIMIT, "guard: 10%% of 20 is 2: 3 gone refused");
	is_int(guard_case(5, 4, "yes", "1%", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: 1%% of 5 rounds up to 1: 1 gone ok");
	is_int(guard_case(5, 4, "yes", "0%", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: 0%% is still at least 1");
	is_int(guard_case(5, 1, "yes", "100%", UINT64_MAX, err, sizeof(err),
	    NULL), 0, "guard: 100%%: 4 of 5 gone ok");

	/* delete = no: shrinkage is never refused, nothing deleted. */
	is_int(guard_case(5, 1, "no", "1", UINT64_MAX, err, sizeof(err), &p),
	    0, "guard: delete = no, 4 of 5 gone: ok");
	is_counts(p, 1, 0, 0, 0, 0, 4, 1, "guard: delete = no plan");
	plan_free(p);

	/* Only files count against max_delete, not directories. */
	fx_open(&fx);
	c = conf("yes", "20%");
	sync_to(&fx, dirs, NELEM(dirs), true);
	p = mkplan(&fx, dirs + 2, NELEM(dirs) - 2, true, false);
	is_counts(p, 4, 0, 0, 0, 2, 0, 4, "guard: dir and file gone");
	is_int(plan_guard(p, c, UINT64_MAX, false, err, sizeof(err)), 0,
	    "guard: a gone dir does not count (1 file of 20%% of 5)");
	plan_free(p);
	mirror_conf_free(c);
	fx_close(&fx);

	/* Free space against the planned fetches. */
	fx_open(&fx);
	c = conf("no", "10%");
	p = mkplan(&fx, two, NELEM(two), false, false);
	is_int(p->fetch_bytes, 300, "guard: fetch_bytes 300");
	is_int(plan_guard(p, c, 299, false, err, sizeof(err)), BM_ELIMIT,
	    "guard: 299 bytes free: refused");
	is_str(err, "free space: would fetch 2 files, 300 B; 299 B free on "
	    "the destination: 1 B missing: refusing (free at least that much "
	    "on its file system, or fetch less with include/exclude, and run "
	    "again)", "guard: free space "
	    "reason");
	is_int(plan_guard(p, c, 300, false, err, sizeof(err)), 0,
	    "guard: 300 bytes free: ok");
	is_int(plan_guard(p, c, UINT64_MAX, false, err, sizeof(err)), 0,
	    "guard: UINT64_MAX free (unknown): ok");
	is_int(plan_guard(p, c, 0, false, err, sizeof(err)), BM_ELIMIT,
	    "guard: 0 bytes free: refused");
	a = is_act(p, "b", ACT_FETCH, "new", "free space");
	if (a != NULL)
		is_int(action_bytes(a), 200, "guard: b fetches 200 bytes");
	plan_free(p);
	p = mkplan(&fx, big, NELEM(big), false, false);
	is_int(plan_guard(p, c, 1048576, false, err, sizeof(err)), BM_ELIMIT,
	    "guard: 3 MiB to fetch, 1 MiB free: refused");
	is_str(err, "free space: would fetch 1 files, 3.0 MiB (3145728 "
	    "bytes); 1.0 MiB (1048576 bytes) free on the destination: 2.0 MiB "
	    "(2097152 bytes) missing: refusing (free at least that much on "
	    "its file system, or fetch less with include/exclude, and run "
	    "again)", "guard: how much is missing");
	plan_free(p);

	/* A first run of an empty upstream into an empty manifest is fine. */
	p = mkplan(&fx, two, 0, false, false);
	is_counts(p, 0, 0, 0, 0, 0, 0, 0, "guard: empty upstream, empty "
	    "manifest");
	is_int(plan_guard(p, c, 0, false, err, sizeof(err)), 0,
	    "guard: empty listing and empty manifest: ok");
	plan_free(p);
	mirror_conf_free(c);
	fx_close(&fx);
}

/* plan_space_dir() of dest (publish = set when set) is want. */
static void
is_space_dir(const char *dest, bool set, const char *want, const char *tag)
{
	struct mirror_conf *c;
	char		 err[256], got[PATH_MAX];

	if ((c = mirror_conf_new("t")) == NULL)
		abort();
	MUST(mirror_conf_set(c, "dest", dest, err, sizeof(err)));
	if (set)
		MUST(mirror_conf_set(c, "publish", "set", err, sizeof(err)));
	got[0] = '\0';
	is_int(plan_space_dir(c, got, sizeof(got)), 0, "%s: rc", tag);
	is_str(got, want, "%s", tag);
	mirror_conf_free(c);
}

/*
 * The free-space guard's file system when DEST is not there yet
 * (break-it brk1 #8): the nearest existing ancestor of DEST, with
 * publish = set of DEST.biomirror/snapshots.
 */
static void
test_space_dir(void)
{
	struct mirror_conf *c;
	struct fx	 fx;
	char		 sp[64], d[128], w[128], small[8], err[256];
	uint64_t	 avail = UINT64_MAX;
	int		 cwd;

	(void)snprintf(sp, sizeof(sp), "%s/sp", root);
	MUST(mkdir(sp, 0755));
	(void)snprintf(d, sizeof(d), "%s/new/a/b", sp);
	is_space_dir(d, false, sp, "space: missing DEST: nearest ancestor");
	(void)snprintf(d, sizeof(d), "%s/new//", sp);
	is_space_dir(d, false, sp, "space: trailing slashes");
	is_space_dir(sp, false, sp, "space: DEST there: DEST");
	(void)snprintf(d, sizeof(d), "%s/T", sp);
	is_space_dir(d, true, sp, "space: set, nothing there: DEST's parent");
	(void)snprintf(w, sizeof(w), "%s/T.biomirror", sp);
	MUST(mkdir(w, 0755));
	is_space_dir(d, true, w, "space: set: DEST.biomirror");
	MUST(mkdir(d, 0755));	/* a plain DEST is not where snapshots go */
	(void)snprintf(w, sizeof(w), "%s/T.biomirror/snapshots", sp);
	MUST(mkdir(w, 0755));
	(void)snprintf(d, sizeof(d), "%s/T/", sp);
	is_space_dir(d, true, w, "space: set: DEST.biomirror/snapshots");
	(void)snprintf(w, sizeof(w), "%s/file", sp);
	MUST(close(open(w, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)));
	(void)snprintf(d, sizeof(d), "%s/file/x/y", sp);
	is_space_dir(d, false, w, "space: past ENOTDIR");

	/* Relative paths end at ".". */
	if ((cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		tap_bail("open .");
	MUST(chdir(sp));
	is_space_dir("T.biomirror/x/y", false, "T.biomirror",
	    "space: relative DEST");
	is_space_dir("new", false, ".", "space: relative, nothing there");
	MUST(fchdir(cwd));
	(void)close(cwd);

	if ((c = mirror_conf_new("t")) == NULL)
		abort();
	(void)snprintf(d, sizeof(d), "%s/new/a/b", sp);
	MUST(mirror_conf_set(c, "dest", d, err, sizeof(err)));
	is_int(plan_space_dir(c, small, sizeof(small)), BM_ELIMIT,
	    "space: buffer too small");
	is_int(plan_free_space(c, NULL, &avail), 0, "space: no store: rc");
	ok(avail != UINT64_MAX, "space: no store: free bytes known");
	fx_open(&fx);
	avail = UINT64_MAX;
	is_int(plan_free_space(c, fx.s, &avail), 0, "space: store: rc");
	ok(avail != UINT64_MAX, "space: store: free bytes known");
	fx_close(&fx);
	mirror_conf_free(c);
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == -1 ? -1 : 0;
}

/* Remove the temp tree, also after a bail-out. */
static void
cleanup(void)
{
	(void)nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * The daylight-saving rule (plan_shifts): a directory whose changed files
 * all moved by the same whole hours, exact sizes unchanged, marks them
 * with the shift; any other change in that directory, a shift that is
 * not whole hours or differs between files, marks none.
 */
static void
test_shift(void)
{
	static const struct spec v0[] = {
		{ "d", 'd', -1, NULL, T0 },
		{ "d/a", 'f', 10, NULL, T0 },
		{ "d/b", 'f', 20, NULL, T0 + 100 },
		{ "e", 'd', -1, NULL, T0 },
		{ "e/c", 'f', 30, NULL, T0 },
		{ "f", 'd', -1, NULL, T0 },
		{ "f/m", 'f', 1, NULL, T0 },
		{ "f/n", 'f', 2, NULL, T0 },
		{ "g", 'd', -1, NULL, T0 },
		{ "g/p", 'f', 40, NULL, T0 },
		{ "g/q", 'f', 41, NULL, T0 },
		{ "h", 'd', -1, NULL, T0 },
		{ "h/r", 'f', 50, NULL, T0 },
		{ "top.txt", 'f', 5, NULL, T0 },
	}, v1[] = {
		{ "d", 'd', -1, NULL, T0 },
		{ "d/a", 'f', 10, NULL, T0 + 3600 },
		{ "d/b", 'f', 20, NULL, T0 + 100 + 3600 },
		{ "e", 'd', -1, NULL, T0 },
		{ "e/c", 'f', 30, NULL, T0 + 3600 },
		{ "e/x", 'f', 7, NULL, T0 },
		{ "f", 'd', -1, NULL, T0 },
		{ "f/m", 'f', 1, NULL, T0 + 3600 },
		{ "f/n", 'f', 2, NULL, T0 + 7200 },
		{ "g", 'd', -1, NULL, T0 },
		{ "g/p", 'f', 44, NULL, T0 + 3600 },
		{ "g/q", 'f', 41, NULL, T0 + 3600 },
		{ "h", 'd', -1, NULL, T0 },
		{ "h/r", 'f', 50, NULL, T0 - 7200 },
		{ "top.txt", 'f', 5, NULL, T0 + 1800 },
	};
	static const struct {
		const char	*path;
		int64_t		 shift;		/* s */
	} want[] = {
		{ "d/a", 3600 }, { "d/b", 3600 }, { "e/c", 3600 },
		{ "e/x", 0 }, { "f/m", 0 }, { "f/n", 0 }, { "g/p", 0 },
		{ "g/q", 0 }, { "h/r", -7200 }, { "top.txt", 0 },
	};
	struct fx	 fx;
	struct plan	*p;
	const struct action *a;
	size_t		 i;

	fx_open(&fx);
	sync_to(&fx, v0, sizeof(v0) / sizeof(v0[0]), false);
	p = mkplan(&fx, v1, sizeof(v1) / sizeof(v1[0]), false, false);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		a = find_act(p, want[i].path);
		ok(a != NULL && a->op == ACT_FETCH, "shift: %s fetched",
		    want[i].path);
		is_int(a != NULL ? action_shift(a) : -1, want[i].shift * NS,
		    "shift: %s moved %lld s", want[i].path,
		    (long long)want[i].shift);
	}
	is_int(p->nshifted, 4, "shift: 4 files marked");
	a = find_act(p, "d/a");
	if (a != NULL) {
		is_int(a->more != NULL ? a->more->was.mtime : -1, T0 * NS,
		    "shift: d/a was at T0");
		plan_keep(p, (struct action *)(uintptr_t)a, "kept");
		is_int(a->op, ACT_KEEP, "shift: plan_keep keeps d/a");
	}
	is_int(p->nfetch, 9, "shift: one fetch fewer after plan_keep");
	plan_free(p);
	fx_close(&fx);
}

/* One listed file with a time of precision prec (MTIME_UNKNOWN: none). */
struct pspec {
	const char	*path;
	int64_t		 size;		/* exact bytes, -1 none */
	int64_t		 wall;		/* seconds as listed (UTC) */
	enum mtime_prec	 prec;
};

/* Stage v[0..n) and build the plan, as mkplan() with precisions. */
static struct plan *
mkplan_prec(struct fx *fx, const struct pspec *v, size_t n)
{
	struct listing	*l;
	struct entry	*e;
	struct tzspec	 tz;
	struct plan	*p = NULL;
	size_t		 i;

	if ((l = listing_new(100)) == NULL)
		abort();
	for (i = 0; i < n; i++) {
		MUST(listing_append(l, &e));
		if ((e->path = strdup(v[i].path)) == NULL)
			abort();
		e->type = ENTRY_FILE;
		if (v[i].size >= 0) {
			e->size = e->size_min = e->size_max = v[i].size;
			e->size_exact = true;
		}
		e->mtime_wall = v[i].prec != MTIME_UNKNOWN ? v[i].wall : 0;
		e->mtime_prec = v[i].prec;
	}
	MUST(tzspec_parse("UTC", &tz));
	MUST(listing_resolve_times(l, &tz));
	MUST(listing_sort(l));
	MUST(manifest_stage(fx->m, l));
	listing_free(l);
	MUST(plan_build(fx->m, fx->s, false, NULL, &p));
	return p;
}

/*
 * Issue 22, the change rule at every precision: a time that changes
 * precision, not value, is unchanged (compared at the coarser one, both
 * ways); another day or minute is a change; a file without a listed
 * date (none, or unreadable) is checked conditionally however exact its
 * size, unless the size itself changed.
 */
static void
test_precision(void)
{
	/* A day a month before the runs (T0): no listed minute still open. */
	const int64_t	 day = (T0 - 30 * 86400) / 86400 * 86400;
	const struct pspec v0[] = {
		{ "daylater", 100, day + 10 * 3600, MTIME_MINUTE },
		{ "dayother", 100, day + 10 * 3600, MTIME_MINUTE },
		{ "minsec", 100, day + 10 * 3600, MTIME_MINUTE },
		{ "minsec2", 100, day + 10 * 3600, MTIME_MINUTE },
		{ "nodate", 100, 0, MTIME_UNKNOWN },
		{ "nodate2", 100, 0, MTIME_UNKNOWN },
		{ "same", 100, day + 10 * 3600, MTIME_MINUTE },
		{ "wasday", 100, day, MTIME_DAY },
		{ "wasday2", 100, day, MTIME_DAY },
		{ "wasdated", 100, day + 10 * 3600, MTIME_MINUTE },
	};
	const struct pspec v1[] = {
		/* "Jun  1 10:00" six months later: "Jun  1  2026" */
		{ "daylater", 100, day, MTIME_DAY },
		{ "dayother", 100, day + 86400, MTIME_DAY },
		{ "minsec", 100, day + 10 * 3600 + 59, MTIME_SECOND },
		{ "minsec2", 100, day + 10 * 3600 + 60, MTIME_SECOND },
		{ "nodate", 100, 0, MTIME_UNKNOWN },
		{ "nodate2", 200, 0, MTIME_UNKNOWN },
		{ "same", 100, day + 10 * 3600, MTIME_MINUTE },
		{ "wasday", 100, day + 86399, MTIME_SECOND },
		{ "wasday2", 100, day + 86400, MTIME_MINUTE },
		{ "wasdated", 100, 0, MTIME_UNKNOWN },
	};
	struct fx	 fx;
	struct plan	*p;
	const char	*tag = "precision";

	fx_open(&fx);
	p = mkplan_prec(&fx, v0, NELEM(v0));
	is_int(p->nfetch, (int64_t)NELEM(v0), "%s: first run fetches all",
	    tag);
	execute(&fx, p);
	plan_free(p);

	p = mkplan_prec(&fx, v1, NELEM(v1));
	no_act(p, "daylater", tag);
	is_act(p, "dayother", ACT_FETCH, "changed", tag);
	no_act(p, "minsec", tag);
	is_act(p, "minsec2", ACT_FETCH, "changed", tag);
	is_act(p, "nodate", ACT_COND_FETCH, "no listed date", tag);
	is_act(p, "nodate2", ACT_FETCH, "changed", tag);
	no_act(p, "same", tag);
	no_act(p, "wasday", tag);
	is_act(p, "wasday2", ACT_FETCH, "changed", tag);
	is_act(p, "wasdated", ACT_COND_FETCH, "no listed date", tag);
	is_int(p->unchanged, 4, "%s: 4 unchanged", tag);
	execute(&fx, p);
	plan_free(p);

	/* The same again: still unchanged, the undated still checked. */
	p = mkplan_prec(&fx, v1, NELEM(v1));
	is_str(plan_str(p), "check nodate, check nodate2, check wasdated",
	    "%s: again: only the undated are checked", tag);
	plan_free(p);
	fx_close(&fx);
}

int
main(void)
{
	if (mkdtemp(root) == NULL) {
		printf("Bail out! mkdtemp\n");
		return 2;
	}
	if (atexit(cleanup) != 0)
		abort();
	test_change_rule();
	test_inexact();
	test_precision();
	test_gone();
	test_keep_unlisted();
	test_order();
	test_guard();
	test_space_dir();
	test_shift();
	return done_testing();
}
