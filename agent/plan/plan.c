/*
 * The planner.  It turns manifest_diff() rows into actions.  The change
 * rule (issue 2): fetch a file when it is new, when its listed size, mtime
 * or type differ from what the manifest recorded from upstream (inexact
 * values compared as shown), or when the local file is missing or no
 * longer matches what was committed; when only the local mtime drifted,
 * set it back; a listing without size or date gets a conditional GET.
 * Issue 22: a file listed without a date (or with one that could not be
 * read) is asked for conditionally whatever its size says, and listed
 * times are compared at the coarser of the two precisions (manifest.c).
 * Deletes come last, children before parents, and only when asked for.
 */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/config.h"
#include "biomirror/error.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/report.h"
#include "biomirror/store.h"

struct plan_ctx {
	struct plan	*p;		/* borrowed: the plan being built */
	struct store	*s;		/* borrowed, NULL if no destination yet */
	bool		 do_delete;
	const struct filter *filter;	/* borrowed, NULL for none */
	char		**clear;	/* owned: paths whose type changed upstream */
	size_t		 nclear;
	const struct plan_opts *po;	/* borrowed, NULL for none */
};

const char *
action_name(enum action_op op)
{
	switch (op) {
	case ACT_MKDIR:		return "mkdir";
	case ACT_FETCH:		return "fetch";
	case ACT_COND_FETCH:	return "check";
	case ACT_TOUCH:		return "touch";
	case ACT_DELETE:	return "delete";
	case ACT_KEEP:		return "keep";
	case ACT_CONFLICT:	return "conflict";
	case ACT_ADOPT:		return "adopt";
	case ACT_SYMLINK:	return "symlink";
	}
	return "?";
}

int64_t
action_bytes(const struct action *a)
{
	switch (a->op) {
	case ACT_FETCH:
	case ACT_COND_FETCH:
		if (a->fs.listed.size > 0)
			return a->fs.listed.size;
		if (action_upstream(a).size > 0)
			return action_upstream(a).size;
		return a->fs.listed.size == 0 ? 0 : -1;
	case ACT_DELETE:
		return a->type == ENTRY_FILE && action_local(a).size > 0 ?
		    action_local(a).size : 0;
	default:
		return 0;
	}
}

struct action_more *
action_more(struct action *a)
{
	if (a->more != NULL)
		return a->more;
	if ((a->more = calloc(1, sizeof(*a->more))) == NULL)
		return NULL;
	a->more->upstream.size = a->more->upstream.mtime = -1;
	a->more->local.size = a->more->local.mtime = -1;
	return a->more;
}

void
action_more_free(struct action *a)
{
	if (a->more == NULL)
		return;
	free(a->more->etag);
	free(a->more->target);
	free(a->more->got);
	free(a->more);
	a->more = NULL;
}

/* A block of the plan's packed path strings (struct plan strs). */
struct plan_strs {
	struct plan_strs *next;		/* owned: the block filled before */
	size_t		 used;		/* bytes of buf handed out */
	size_t		 cap;		/* bytes of buf */
	char		 buf[];
};

#define PLAN_STRS_BLOCK	(1024 * 1024)

/*
 * A copy of the n bytes at s, NUL-terminated, in p's string blocks (freed
 * with the plan, never one by one).  NULL on out-of-memory.
 */
static char *
plan_strndup(struct plan *p, const char *s, size_t n)
{
	struct plan_strs *b = p->strs;
	char		*r;

	if (b == NULL || b->cap - b->used < n + 1) {
		size_t	 cap = n + 1 > PLAN_STRS_BLOCK ? n + 1 : PLAN_STRS_BLOCK;

		if ((b = malloc(sizeof(*b) + cap)) == NULL)
			return NULL;
		b->next = p->strs;
		b->used = 0;
		b->cap = cap;
		p->strs = b;
	}
	r = b->buf + b->used;
	memcpy(r, s, n);
	r[n] = '\0';
	b->used += n + 1;
	return r;
}

static int
plan_add(struct plan *p, const struct diff_row *row, enum action_op op,
    const char *why)
{
	struct action	*a, *v;
	struct action_more *m;
	bool		 changed = strcmp(why, "changed") == 0;
	size_t		 ncap;

	if (p->nacts == p->cap) {
		ncap = p->cap ? p->cap * 2 : 256;
		if ((v = reallocarray(p->acts, ncap, sizeof(*v))) == NULL)
			return BM_ENOMEM;
		p->acts = v;
		p->cap = ncap;
	}
	a = &p->acts[p->nacts];
	memset(a, 0, sizeof(*a));
	if ((a->path = plan_strndup(p, row->path, row->pathlen)) == NULL)
		return BM_ENOMEM;
	a->op = op;
	a->phase = op == ACT_MKDIR ? PHASE_MKDIR : (op == ACT_DELETE ||
	    op == ACT_KEEP) ? PHASE_DELETE : PHASE_XFER;
	a->type = row->type;
	a->why = why;
	a->fs.listed = row->fs.listed;
	p->nacts++;
	/* Counted in the plan first: plan_free() frees what it holds. */
	if (row->etag != NULL || changed ||
	    row->fs.upstream.size != -1 || row->fs.upstream.mtime != -1 ||
	    row->fs.local.size != -1 || row->fs.local.mtime != -1) {
		if ((m = action_more(a)) == NULL)
			return BM_ENOMEM;
		m->upstream = row->fs.upstream;
		m->local = row->fs.local;
		if (row->etag != NULL && (m->etag = strdup(row->etag)) == NULL)
			return BM_ENOMEM;
		if (changed)
			m->was = row->rec_listed;
	}
	switch (op) {
	case ACT_MKDIR:
		p->nmkdir++;
		break;
	case ACT_FETCH:
	case ACT_COND_FETCH:
		p->nfetch++;
		/* A 304 costs a round trip, not the size. */
		if (op == ACT_FETCH && action_bytes(a) > 0)
			p->fetch_bytes += (uint64_t)action_bytes(a);
		break;
	case ACT_TOUCH:
		p->ntouch++;
		break;
	case ACT_DELETE:
		p->ndelete++;
		break;
	case ACT_KEEP:
		p->nkeep++;
		break;
	case ACT_CONFLICT:
		p->nconflict++;
		break;
	case ACT_ADOPT:
		p->nadopt++;
		break;
	case ACT_SYMLINK:
		break;
	}
	return 0;
}

/* Why a path of another type in the way stays (plan_clear()). */
#define CLEAR_WHY(up, local) {						\
	"upstream has a " up " here; the local " local " stays "	\
	    "(delete = yes replaces it)",				\
	"upstream has a " up " here; the local " local " is not the "	\
	    "one biomirror committed: it stays, not replaced" }

static const char *const clear_why[3][4][2] = {
	/* upstream has a directory: local file, directory, symlink, other */
	{ CLEAR_WHY("directory", "file"), { NULL, NULL },
	  CLEAR_WHY("directory", "symlink"),
	  CLEAR_WHY("directory", "special file") },
	/* upstream has a file */
	{ { NULL, NULL }, CLEAR_WHY("file", "directory"),
	  CLEAR_WHY("file", "symlink"), CLEAR_WHY("file", "special file") },
	/* upstream has a symlink */
	{ CLEAR_WHY("symlink", "file"), CLEAR_WHY("symlink", "directory"),
	  { NULL, NULL }, CLEAR_WHY("symlink", "special file") },
};

/*
 * Something of another type (local: 'f', 'd', 'l' or '?') is in the way
 * of row's path locally.  It is deleted first (PHASE_CLEAR; a
 * directory's recorded contents follow it into the clearing phase in
 * plan_build()) only with do_delete, and only when it is what biomirror
 * committed there and upstream changed that type (the executor also
 * checks a file's size and mtime, run_not_committed() in sync.c): then
 * 0 is returned.  Anything else in the way (an admin's or another
 * tool's file, directory or link, untracked or put in place of a
 * committed path) is never deleted: an ACT_CONFLICT says why and 1 is
 * returned (the caller plans nothing else for the path).  <0 on error.
 */
static int
plan_clear(struct plan_ctx *c, const struct diff_row *row, int local)
{
	struct diff_row	 r = *row;
	char		**v;
	int		 rc, li;
	bool		 ours;

	ours = row->recorded && row->rec_type != row->type &&
	    local == (int)row->rec_type;
	if (!c->do_delete || !ours) {
		li = local == 'f' ? 0 : local == 'd' ? 1 : local == 'l' ? 2 : 3;
		rc = plan_add(c->p, row, ACT_CONFLICT, clear_why[row->type ==
		    ENTRY_DIR ? 0 : row->type == ENTRY_FILE ? 1 : 2][li]
		    [ours ? 0 : 1]);
		return rc == 0 ? 1 : rc;
	}
	/*
	 * Only a local directory (upstream now a file or a symlink) has
	 * contents to clear.
	 */
	if (local == 'd') {
		v = reallocarray(c->clear, c->nclear + 1, sizeof(*v));
		if (v == NULL)
			return BM_ENOMEM;
		c->clear = v;
		if ((c->clear[c->nclear] = strndup(row->path,
		    row->pathlen)) == NULL)
			return BM_ENOMEM;
		c->nclear++;
	}
	r.type = row->rec_type;
	r.etag = NULL;
	if ((rc = plan_add(c->p, &r, ACT_DELETE,
	    "type changed upstream")) != 0)
		return rc;
	c->p->acts[c->p->nacts - 1].phase = PHASE_CLEAR;
	c->p->acts[c->p->nacts - 1].replace = true;
	return 0;
}

/* True when path lies under one of the paths being cleared. */
static bool
plan_under_clear(const struct plan_ctx *c, const char *path)
{
	size_t	 i, n;

	for (i = 0; i < c->nclear; i++) {
		n = strlen(c->clear[i]);
		if (strncmp(path, c->clear[i], n) == 0 && path[n] == '/')
			return true;
	}
	return false;
}

/* True when path lies under the path of an ACT_CONFLICT action. */
static bool
plan_under_conflict(const struct plan *p, const char *path)
{
	size_t	 i, n;

	if (p->nconflict == 0)
		return false;
	for (i = 0; i < p->nacts; i++) {
		if (p->acts[i].op != ACT_CONFLICT)
			continue;
		n = strlen(p->acts[i].path);
		if (strncmp(path, p->acts[i].path, n) == 0 && path[n] == '/')
			return true;
	}
	return false;
}

/* Turn a planned action into nothing (kept as it is), fixing the counts. */
static void
plan_skip(struct plan *p, struct action *a)
{
	plan_keep(p, a, "beneath a conflict");
}

void
plan_keep(struct plan *p, struct action *a, const char *why)
{
	switch (a->op) {
	case ACT_MKDIR:
		p->nmkdir--;
		break;
	case ACT_FETCH:
	case ACT_COND_FETCH:
		p->nfetch--;
		if (a->op == ACT_FETCH && action_bytes(a) > 0)
			p->fetch_bytes -= (uint64_t)action_bytes(a);
		break;
	case ACT_TOUCH:
		p->ntouch--;
		break;
	case ACT_DELETE:
		p->ndelete--;
		break;
	case ACT_SYMLINK:
		break;
	default:
		return;
	}
	a->op = ACT_KEEP;
	a->why = why;
	p->nkeep++;
}

#define HOUR_NS		(3600LL * 1000000000LL)

/* The shift of a "changed" file, if it is one the rule may take; else 0. */
static int64_t
act_shift(const struct action *a)
{
	const struct listed_state *n = &a->fs.listed, *o;
	int64_t		 d;

	if (a->more == NULL)
		return 0;
	o = &a->more->was;
	/* Times 1678..2262 apart do not fit a difference: not a shift. */
	if ((n->mtime >= o->mtime ? (uint64_t)n->mtime - (uint64_t)o->mtime :
	    (uint64_t)o->mtime - (uint64_t)n->mtime) > (uint64_t)(14 * HOUR_NS))
		return 0;
	d = n->mtime - o->mtime;
	if (a->op != ACT_FETCH || a->type != ENTRY_FILE ||
	    strcmp(a->why, "changed") != 0 || !n->size_exact ||
	    !o->size_exact || n->size != o->size || n->prec != o->prec ||
	    (n->prec != MTIME_MINUTE && n->prec != MTIME_SECOND &&
	    n->prec != MTIME_NS) || d == 0 || d % HOUR_NS != 0 ||
	    d > 14 * HOUR_NS || d < -14 * HOUR_NS)
		return 0;
	return d;
}

/* Length of the directory part of path ("a/b" of "a/b/c"; 0 at the top). */
static size_t
dir_len(const char *path)
{
	const char	*s = strrchr(path, '/');

	return s != NULL ? (size_t)(s - path) : 0;
}

static int
act_dir_cmp(const void *x, const void *y)
{
	const struct action *a = *(const struct action *const *)x;
	const struct action *b = *(const struct action *const *)y;
	size_t		 la = dir_len(a->path), lb = dir_len(b->path);
	int		 c = memcmp(a->path, b->path, la < lb ? la : lb);

	if (c != 0)
		return c;
	return la < lb ? -1 : la > lb;
}

int
plan_shifts(struct plan *p, size_t *ret_marked)
{
	struct action	**v = NULL;
	size_t		 i, j, k, n = 0, marked = 0;
	int64_t		 d;

	*ret_marked = 0;
	for (i = 0; i < p->nacts; i++)
		if (p->acts[i].op == ACT_FETCH &&
		    strcmp(p->acts[i].why, "changed") == 0)
			n++;
	if (n == 0)
		return 0;
	if ((v = calloc(n, sizeof(*v))) == NULL)
		return BM_ENOMEM;
	for (i = 0, n = 0; i < p->nacts; i++)
		if (p->acts[i].op == ACT_FETCH &&
		    strcmp(p->acts[i].why, "changed") == 0)
			v[n++] = &p->acts[i];
	qsort(v, n, sizeof(*v), act_dir_cmp);
	for (i = 0; i < n; i = j) {
		d = act_shift(v[i]);
		for (j = i + 1; j < n && act_dir_cmp(&v[i], &v[j]) == 0; j++)
			if (act_shift(v[j]) != d)
				d = 0;
		for (k = i; d != 0 && k < j; k++, marked++)
			v[k]->more->shift = d;	/* "changed": has more */
	}
	free(v);
	*ret_marked = marked;
	return 0;
}

/* True when the filter takes path (and every directory above it). */
static bool
plan_taken(const struct filter *f, const char *path, enum entry_type type)
{
	char	*dir, *slash;
	bool	 ok = true;

	if (f == NULL)
		return true;
	if ((dir = strdup(path)) == NULL)
		return true;	/* out of memory: keep is the safe answer */
	for (slash = strchr(dir, '/'); ok && slash != NULL;
	    slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		ok = filter_dir(f, dir);
		*slash = '/';
	}
	free(dir);
	if (!ok)
		return false;
	return type == ENTRY_DIR ? filter_dir(f, path) : filter_file(f, path);
}

/* A listed directory: create it when it is missing locally. */
static int
plan_dir(struct plan_ctx *c, const struct diff_row *row)
{
	struct local_stat st;
	int		 rc;

	if (c->s != NULL) {
		rc = store_stat(c->s, row->path, &st);
		if (rc == 0 && st.type == 'd')
			return row->kind == DIFF_NEW ? plan_add(c->p, row,
			    ACT_MKDIR, "new") : 0;
		if (rc == 0 && (rc = plan_clear(c, row, st.type)) != 0)
			return rc < 0 ? rc : 0;
	}
	return plan_add(c->p, row, ACT_MKDIR,
	    row->kind == DIFF_NEW ? "new" : "local missing");
}

/* A listed file the listing says is unchanged: check the local copy. */
static int
plan_local(struct plan_ctx *c, const struct diff_row *row,
    enum action_op same_op)
{
	struct local_stat st;
	int		 rc;

	if (c->s == NULL || (rc = store_stat(c->s, row->path, &st)) ==
	    BM_ENOENT)
		return plan_add(c->p, row, ACT_FETCH, "local missing");
	if (rc != 0 || st.type != 'f') {
		if (rc == 0 && (rc = plan_clear(c, row, st.type)) != 0)
			return rc < 0 ? rc : 0;
		return plan_add(c->p, row, ACT_FETCH, "local not a file");
	}
	if (st.size != row->fs.local.size)
		return plan_add(c->p, row, ACT_FETCH, "local size differs");
	if (c->po != NULL && c->po->check != NULL &&
	    c->po->check(c->po->check_ctx, row))
		return plan_add(c->p, row, ACT_FETCH, "local content differs");
	if (st.mtime != row->fs.local.mtime && same_op != ACT_COND_FETCH)
		return plan_add(c->p, row, ACT_TOUCH, "local mtime drifted");
	if (same_op == ACT_COND_FETCH) {
		if ((rc = plan_add(c->p, row, ACT_COND_FETCH,
		    row->fs.listed.prec != MTIME_UNKNOWN ?
		    "recorded before its listed minute ended" :
		    row->fs.listed.size >= 0 ? "no listed date" :
		    "no size or date")) != 0)
			return rc;
		/* A 304 keeps the content: the mtime is set back then. */
		c->p->acts[c->p->nacts - 1].touch =
		    st.mtime != row->fs.local.mtime;
		return 0;
	}
	c->p->unchanged++;
	return 0;
}

/* ns of one unit of a listed mtime's precision (0: not comparable). */
static int64_t
prec_unit(enum mtime_prec prec)
{
	switch (prec) {
	case MTIME_DAY:		return 86400LL * 1000000000;
	case MTIME_MINUTE:	return 60LL * 1000000000;
	case MTIME_SECOND:	return 1000000000LL;
	case MTIME_NS:		return 1;
	default:		return 0;
	}
}

/*
 * resync --adopt: a new row whose local file already has the listed
 * exact size and the listed mtime (compared at the listing's precision),
 * and, with a check function (--checksum), content that matches its
 * published digests, is recorded as it is.  Returns 1 when adopted, 0
 * when not (plan it as usual), <0 on error.
 */
static int
plan_adopt(struct plan_ctx *c, const struct diff_row *row)
{
	struct local_stat st;
	struct action_more *m;
	int64_t		 unit = prec_unit(row->fs.listed.prec), lt;
	int		 rc;

	if (c->s == NULL || !row->fs.listed.size_exact ||
	    row->fs.listed.size < 0 || unit == 0 ||
	    store_stat(c->s, row->path, &st) != 0 ||
	    st.type != 'f' || st.size != row->fs.listed.size)
		return 0;
	lt = st.mtime - (st.mtime % unit + unit) % unit;
	if (lt != row->fs.listed.mtime -
	    (row->fs.listed.mtime % unit + unit) % unit)
		return 0;
	/* resync --checksum --adopt: the content must match too. */
	if (c->po->check != NULL && c->po->check(c->po->check_ctx, row))
		return 0;
	if ((rc = plan_add(c->p, row, ACT_ADOPT, "local copy matches")) != 0)
		return rc;
	if ((m = action_more(&c->p->acts[c->p->nacts - 1])) == NULL)
		return BM_ENOMEM;
	m->local.size = st.size;
	m->local.mtime = st.mtime;
	return 1;
}

/*
 * An upstream symlink (FTP, bm://): recreated when new or changed, or
 * when the local one is missing; an unchanged one that is there needs
 * nothing.  Whether its target stays inside the mirror is the executor's
 * call (store_link_inside()): one outside is recorded, not created, and
 * so planned again only when it changes upstream.  A local file,
 * directory or special file in its way (upstream replaced what
 * biomirror committed there by this link) is cleared first as one in a
 * file's way is (plan_clear()): else a conflict, never replaced.
 */
static int
plan_link(struct plan_ctx *c, const struct diff_row *row)
{
	struct local_stat st;
	struct action	*a;
	int		 rc, local = 0;
	bool		 there;

	if (c->s != NULL && store_stat(c->s, row->path, &st) == 0)
		local = st.type;
	/*
	 * One that is never created (target outside the mirror, or not
	 * known) and is unchanged needs nothing either: it was recorded.
	 */
	there = local == 'l' || row->target == NULL ||
	    !store_link_inside(row->path, row->target);
	if ((row->kind == DIFF_SAME || row->kind == DIFF_UNKNOWN) && there) {
		c->p->unchanged++;
		return 0;
	}
	if (local != 0 && local != 'l' && (rc = plan_clear(c, row, local)) !=
	    0)
		return rc < 0 ? rc : 0;
	if ((rc = plan_add(c->p, row, ACT_SYMLINK, row->kind == DIFF_NEW ?
	    "new" : row->kind == DIFF_CHANGED ? "changed" : "local missing"))
	    != 0)
		return rc;
	a = &c->p->acts[c->p->nacts - 1];
	if (row->target != NULL && (action_more(a) == NULL ||
	    (a->more->target = strdup(row->target)) == NULL))
		return BM_ENOMEM;
	return 0;
}

/* True when path is, or lies beneath, a directory po->keep names. */
static bool
plan_unlisted(const struct plan_ctx *c, const char *path)
{
	const struct entry *e;
	size_t		 i, n;

	for (i = 0; c->po != NULL && c->po->keep != NULL &&
	    i < listing_count(c->po->keep); i++) {
		e = listing_get(c->po->keep, i);
		n = strlen(e->path);
		if (strncmp(path, e->path, n) == 0 && (path[n] == '\0' ||
		    path[n] == '/' || n == 0))
			return true;
	}
	return false;
}

static int
plan_row(void *arg, const struct diff_row *row)
{
	struct plan_ctx	*c = arg;
	struct local_stat st;
	int		 rc;

	if (row->kind == DIFF_GONE) {
		if (!plan_taken(c->filter, row->path, row->type))
			return plan_add(c->p, row, ACT_KEEP, "excluded");
		if (plan_unlisted(c, row->path))
			return plan_add(c->p, row, ACT_KEEP, "not listed");
		return plan_add(c->p, row,
		    c->do_delete ? ACT_DELETE : ACT_KEEP, "gone upstream");
	}
	c->p->listed++;
	if (row->type == ENTRY_DIR)
		return plan_dir(c, row);
	if (row->type == ENTRY_SYMLINK)
		return plan_link(c, row);
	if (row->type != ENTRY_FILE)
		return 0;
	c->p->listed_files++;
	if (row->kind == DIFF_NEW && c->po != NULL && c->po->adopt &&
	    (rc = plan_adopt(c, row)) != 0)
		return rc < 0 ? rc : 0;
	switch (row->kind) {
	case DIFF_NEW:
	case DIFF_CHANGED:
		/* Something else (a directory) in the way goes first. */
		if (c->s != NULL && store_stat(c->s, row->path, &st) == 0 &&
		    st.type != 'f' && (rc = plan_clear(c, row, st.type)) != 0)
			return rc < 0 ? rc : 0;
		return plan_add(c->p, row, ACT_FETCH,
		    row->kind == DIFF_NEW ? "new" : "changed");
	case DIFF_UNKNOWN:
		return plan_local(c, row, ACT_COND_FETCH);
	default:
		return plan_local(c, row, ACT_TOUCH);
	}
}

static int
act_cmp_order(const void *a, const void *b)
{
	const struct action *x = a, *y = b;

	if (x->phase != y->phase)
		return (int)x->phase - (int)y->phase;
	/* Deletes deepest first: reverse path order puts children first. */
	if (x->phase == PHASE_CLEAR || x->phase == PHASE_DELETE)
		return -strcmp(x->path, y->path);
	return strcmp(x->path, y->path);
}

int
plan_build(struct manifest *m, struct store *s, bool do_delete,
    const struct filter *filter, struct plan **ret)
{
	return plan_build_opts(m, s, do_delete, filter, NULL, ret);
}

int
plan_build_opts(struct manifest *m, struct store *s, bool do_delete,
    const struct filter *filter, const struct plan_opts *po,
    struct plan **ret)
{
	struct plan_ctx	 c;
	struct plan	*p;
	size_t		 i;
	int		 rc;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return BM_ENOMEM;
	memset(&c, 0, sizeof(c));
	c.p = p;
	c.s = s;
	c.do_delete = do_delete;
	c.filter = filter;
	c.po = po;
	if ((rc = manifest_file_count(m, &p->manifest_files)) != 0)
		goto out;
	if ((rc = manifest_diff(m, plan_row, &c)) != 0)
		goto out;
	/* Nothing is tried beneath a conflict: it says why already. */
	for (i = 0; i < p->nacts; i++)
		if (p->acts[i].op != ACT_CONFLICT && plan_under_conflict(p,
		    p->acts[i].path))
			plan_skip(p, &p->acts[i]);
	/* The recorded contents of a directory that became a file go first. */
	for (i = 0; i < p->nacts; i++)
		if (p->acts[i].op == ACT_DELETE &&
		    p->acts[i].phase == PHASE_DELETE &&
		    plan_under_clear(&c, p->acts[i].path))
			p->acts[i].phase = PHASE_CLEAR;
	/* Paths come in memcmp order, so parents already precede children. */
	if (p->nacts > 1)
		qsort(p->acts, p->nacts, sizeof(*p->acts), act_cmp_order);
	if ((rc = plan_shifts(p, &p->nshifted)) != 0)
		goto out;
	*ret = p;
	p = NULL;
	rc = 0;
out:
	for (i = 0; i < c.nclear; i++)
		free(c.clear[i]);
	free(c.clear);
	plan_free(p);
	return rc;
}

int
plan_add_refetch(struct plan *p, const struct file_row *row, const char *why)
{
	struct diff_row	 r;

	memset(&r, 0, sizeof(r));
	r.path = row->path;
	r.pathlen = row->pathlen;
	r.kind = DIFF_SAME;
	r.type = r.rec_type = row->type;
	r.recorded = true;
	r.fs = row->fs;
	r.etag = row->etag;
	r.checksum = row->checksum;
	return plan_add(p, &r, ACT_FETCH, why);
}

void
plan_free(struct plan *p)
{
	struct plan_strs *b;
	size_t	 i;

	if (p == NULL)
		return;
	for (i = 0; i < p->nacts; i++)
		action_more_free(&p->acts[i]);
	free(p->acts);
	while ((b = p->strs) != NULL) {
		p->strs = b->next;
		free(b);
	}
	free(p);
}

/*
 * "3.0 MiB (3145728 bytes)" into buf: the guard messages say how much in
 * a form a person reads and one a script compares.
 */
static void
guard_bytes(uint64_t b, char *buf, size_t len)
{
	char	 hb[32];

	report_human_bytes(b, hb, sizeof(hb));
	if (b < 1024)
		(void)snprintf(buf, len, "%s", hb);
	else
		(void)snprintf(buf, len, "%s (%llu bytes)", hb,
		    (unsigned long long)b);
}

int
plan_guard(const struct plan *p, const struct mirror_conf *c,
    uint64_t free_bytes, bool allow_empty, char *errbuf, size_t errlen)
{
	char		 need[64], have[64], miss[64];
	uint64_t	 limit;
	int64_t		 gone_files = 0;
	size_t		 i;

	/*
	 * Only planned deletes of files gone upstream count (not a file
	 * replaced by a directory of the same name): with delete = no, or after an
	 * incomplete listing (plan_build was told not to delete), gone
	 * files are kept and the run goes on (exit 3 for the latter).
	 */
	for (i = 0; i < p->nacts; i++)
		if (p->acts[i].op == ACT_DELETE && !p->acts[i].replace &&
		    p->acts[i].type == ENTRY_FILE)
			gone_files++;
	/* Directories alone are no content: that listing is empty too. */
	if (p->listed_files == 0 && p->manifest_files > 0 && !allow_empty) {
		if (p->listed > 0)
			(void)snprintf(need, sizeof(need), " (no files, "
			    "%lld directories or links)", (long long)p->listed);
		else
			need[0] = '\0';
		(void)snprintf(errbuf, errlen, "upstream listing is empty%s "
		    "but the manifest holds %lld files: refusing (if "
		    "upstream really was emptied, run with --allow-empty)",
		    need, (long long)p->manifest_files);
		return BM_ELIMIT;
	}
	if (c->max_delete_pct) {
		limit = ((uint64_t)p->manifest_files * c->max_delete + 99) / 100;
		if (limit < 1)
			limit = 1;
	} else
		limit = c->max_delete;
	if (c->delete && (uint64_t)gone_files > limit) {
		if (c->max_delete_pct)
			(void)snprintf(need, sizeof(need), " (%llu%% of %lld "
			    "files)", (unsigned long long)c->max_delete,
			    (long long)p->manifest_files);
		else
			need[0] = '\0';
		(void)snprintf(errbuf, errlen, "max_delete: would delete "
		    "%lld files, max_delete allows %llu%s: refusing "
		    "(--max-delete raises it for one run)",
		    (long long)gone_files, (unsigned long long)limit, need);
		return BM_ELIMIT;
	}
	if (free_bytes != UINT64_MAX && p->fetch_bytes > free_bytes) {
		guard_bytes(p->fetch_bytes, need, sizeof(need));
		guard_bytes(free_bytes, have, sizeof(have));
		guard_bytes(p->fetch_bytes - free_bytes, miss, sizeof(miss));
		(void)snprintf(errbuf, errlen, "free space: would fetch %lld "
		    "files, %s; %s free on %s: %s missing: refusing (free at "
		    "least that much on its file system, or fetch less with "
		    "include/exclude, and run again)",
		    (long long)p->nfetch, need, have, c->dest != NULL ?
		    c->dest : "the destination", miss);
		return BM_ELIMIT;
	}
	return 0;
}

/* See include/biomirror/plan.h.  Sandbox: stat of DEST and its ancestors. */
int
plan_space_dir(const struct mirror_conf *c, char *buf, size_t len)
{
	struct stat	 st;
	char		*slash;
	size_t		 n;

	if (c->dest == NULL || c->dest[0] == '\0')
		return BM_EINVAL;
	n = strlen(c->dest);
	while (n > 1 && c->dest[n - 1] == '/')
		n--;
	if ((size_t)snprintf(buf, len, "%.*s%s", (int)n, c->dest,
	    c->publish == PUBLISH_SET ? ".biomirror/snapshots" : "") >= len)
		return BM_ELIMIT;
	/* Drop one component at a time until the path is there. */
	while (stat(buf, &st) == -1) {
		if (errno != ENOENT && errno != ENOTDIR)
			return BM_EIO;
		if ((slash = strrchr(buf, '/')) == NULL) {
			if (strcmp(buf, ".") == 0)
				return BM_EIO;
			(void)snprintf(buf, len, ".");
		} else if (slash == buf) {
			if (buf[1] == '\0')
				return BM_EIO;
			buf[1] = '\0';
		} else
			*slash = '\0';
	}
	return 0;
}

/* See include/biomirror/plan.h. */
int
plan_free_space(const struct mirror_conf *c, struct store *s, uint64_t *ret)
{
	struct statvfs	 sv;
	char		 dir[PATH_MAX];
	int		 rc;

	/* publish = set writes into DEST.biomirror, not where DEST is. */
	if (s != NULL && c->publish != PUBLISH_SET)
		return store_free_space(s, ret);
	if ((rc = plan_space_dir(c, dir, sizeof(dir))) != 0)
		return rc;
	if (statvfs(dir, &sv) == -1)
		return BM_EIO;
	*ret = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
	return 0;
}
