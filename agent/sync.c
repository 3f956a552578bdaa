/*
 * One run of one mirror (see include/biomirror/sync.h).  The order of
 * steps is the safety argument: nothing is changed before the listing is
 * staged and the guards passed; deletes happen only after a complete
 * listing and after every fetch; directory mtimes are set last, deepest
 * first, so that creating their contents does not disturb them.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "biomirror/clock.h"
#include "biomirror/config.h"
#include "biomirror/error.h"
#include "biomirror/list_ftp.h"
#include "biomirror/list_http.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/report.h"
#include "biomirror/sched.h"
#include "biomirror/state.h"
#include "biomirror/store.h"
#include "biomirror/sync.h"
#include "biomirror/xfer.h"

#define NS			1000000000LL
#define MAX_LISTING		(20 * 1000 * 1000)	/* entries per mirror */
#define MAX_PAGE_BYTES		(64 * 1024 * 1024)	/* one index page */
#define MAX_DEPTH		64			/* directory levels */

/* A listed directory and its mtime, set after its contents changed. */
struct dir_mtime {
	char		*path;		/* owned */
	int64_t		 mtime;		/* ns */
};

struct run {
	const struct sync_opts *o;	/* borrowed */
	const struct mirror_conf *c;	/* borrowed */
	struct mirror_result *res;	/* borrowed */
	struct manifest	*m;		/* owned */
	struct store	*s;		/* owned, NULL in a dry run without dest */
	struct xfer	*x;		/* owned */
	struct listing	*l;		/* owned */
	struct plan	*p;		/* owned */
	int64_t		 run;		/* manifest run id, 0 in a dry run */
	struct filter	 filter;	/* include/exclude (strings borrowed) */
	struct dir_mtime *dirs;		/* owned: listed directories, path order */
	size_t		 ndirs;
	bool		 complete;	/* the listing is complete */
	char		*source;	/* owned: source URL as libcurl takes it
					   (ftps:// becomes ftp:// + AUTH TLS) */
	char		*password;	/* owned: FTP password (password_file),
					   NULL if none; wiped when freed */
	char		 err[512];	/* first fatal reason */
};

/* Memory sink of one index page, capped at MAX_PAGE_BYTES. */
struct page_buf {
	uint8_t		*buf;		/* owned */
	size_t		 len, cap;
};

static int
sink_page(void *arg, uint64_t off, const void *data, size_t len)
{
	struct page_buf	*b = arg;
	uint8_t		*nb;
	size_t		 ncap;

	if (off != b->len)
		return BM_EPROTO;
	if (b->len + len > MAX_PAGE_BYTES)
		return BM_ELIMIT;
	if (b->len + len + 1 > b->cap) {
		ncap = b->cap ? b->cap : 65536;
		while (ncap < b->len + len + 1)
			ncap *= 2;
		if ((nb = realloc(b->buf, ncap)) == NULL)
			return BM_ENOMEM;
		b->buf = nb;
		b->cap = ncap;
	}
	memcpy(b->buf + b->len, data, len);
	b->len += len;
	return 0;
}

/* One index page being fetched, with its retries and redirects. */
struct page_try {
	struct xfer_job	 job;		/* the transport job */
	struct page_buf	 buf;		/* the body */
	char		*url;		/* owned: URL of the current try */
	const char	*command;	/* borrowed: FTP command, NULL for HTTP */
	unsigned	 attempts;	/* tries made */
	unsigned	 hops;		/* redirects followed */
	bool		 running;	/* job submitted, not finished */
	bool		 done;		/* final result reached */
	int64_t		 not_before;	/* monotonic ns of the next try */
};

#define MAX_PAGE_HOPS	5

static void
page_done(void *ctx, struct xfer_job *job)
{
	struct page_try	*t = job->owner;

	(void)ctx;
	t->running = false;
}

static int
page_submit(struct run *r, struct page_try *t)
{
	free(t->buf.buf);
	memset(&t->buf, 0, sizeof(t->buf));
	memset(&t->job, 0, sizeof(t->job));
	t->job.url = t->url;
	t->job.expect_size = -1;
	t->job.max_size = MAX_PAGE_BYTES;
	t->job.if_modified_since = -1;
	t->job.no_redirect = true;
	t->job.ftp_command = t->command;
	t->job.sink = sink_page;
	t->job.sink_arg = &t->buf;
	t->job.owner = t;
	t->attempts++;
	t->running = true;
	return xfer_submit(r->x, &t->job);
}

/*
 * Why a listing page's redirect to loc is not followed, or NULL when it
 * is: only the same directory with a trailing '/' added (what servers
 * answer for "dir") is followed.  Anywhere else inside the source is an
 * alias whose entries would be listed under the wrong path; outside the
 * source is never requested.
 */
static const char *
page_redirect_bad(struct run *r, const struct page_try *t, const char *loc)
{
	size_t	 n = strlen(t->url);

	if (t->hops >= MAX_PAGE_HOPS)
		return "too many redirects";
	if (strncmp(loc, r->c->source, strlen(r->c->source)) != 0)
		return "outside the source: not followed";
	if (strcmp(loc, t->url) == 0)
		return "a redirect loop";
	if (strncmp(loc, t->url, n) == 0 && strcmp(loc + n, "/") == 0)
		return NULL;
	return "another directory of the source (an alias): not listed; "
	    "exclude it to mirror the rest";
}

/*
 * A finished try: follow a redirect that stays under the source (never
 * to another host or above the source: the request is not made), retry
 * what is retryable after a backoff, else the result is final.
 */
static int
page_next(struct run *r, struct page_try *t)
{
	struct xfer_result *res = &t->job.res;
	const char	*why;
	char		*u;

	if (res->status >= 300 && res->status < 400 && res->location[0]) {
		if ((why = page_redirect_bad(r, t, res->location)) != NULL) {
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "redirected to %.150s: %.90s", res->location, why);
			res->rc = BM_EPROTO;
			t->done = true;
			return 0;
		}
		if ((u = strdup(res->location)) == NULL)
			return BM_ENOMEM;
		free(t->url);
		t->url = u;
		t->hops++;
		t->attempts = 0;
		return page_submit(r, t);
	}
	if (res->cls == XFER_RETRY && t->attempts <= r->c->retries) {
		log_info("%s: list: %s (retry %u of %u)", t->job.url,
		    res->errmsg, t->attempts, r->c->retries);
		t->not_before = clock_mono_ns() + sched_backoff_ns(t->attempts,
		    res->retry_after);
		return 0;
	}
	t->done = true;
	return 0;
}

/* Copy a final result into the crawler's page (body moved). */
static int
page_result(struct page_try *t, struct http_page *pg)
{
	struct xfer_result *res = &t->job.res;

	pg->status = res->status;
	pg->rc = res->rc;
	if (res->rc == 0 && res->cls != XFER_OK)
		pg->rc = BM_EHTTP;
	/* Every failed page is named (the run reports the first). */
	if (pg->rc != 0)
		log_warnx("%s: list: %s", t->url, res->errmsg);
	(void)snprintf(pg->errmsg, sizeof(pg->errmsg), "%s", res->errmsg);
	if (res->content_type[0] &&
	    (pg->content_type = strdup(res->content_type)) == NULL)
		return BM_ENOMEM;
	if ((pg->effective_url = strdup(res->effective_url[0] ?
	    res->effective_url : t->url)) == NULL)
		return BM_ENOMEM;
	pg->body = t->buf.buf;
	pg->len = t->buf.len;
	t->buf.buf = NULL;
	return 0;
}

/* http_fetch_fn for the crawler: all pages of a batch at once. */
static int
fetch_pages(void *ctx, struct http_page *pages, size_t n)
{
	struct run	*r = ctx;
	struct page_try	*t;
	size_t		 i, left;
	int64_t		 now;
	int		 rc = BM_ENOMEM;

	if ((t = calloc(n, sizeof(*t))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < n; i++) {
		t[i].command = pages[i].command;
		if ((t[i].url = strdup(pages[i].url)) == NULL ||
		    (rc = page_submit(r, &t[i])) != 0)
			goto out;
	}
	for (;;) {
		if (*r->o->stop) {
			rc = BM_EINTR;
			goto out;
		}
		if ((rc = xfer_poll(r->x, 100, page_done, NULL)) != 0)
			goto out;
		now = clock_mono_ns();
		for (i = 0, left = 0; i < n; i++) {
			if (!t[i].done && !t[i].running) {
				if (t[i].not_before == 0)
					rc = page_next(r, &t[i]);
				else if (t[i].not_before <= now) {
					t[i].not_before = 0;
					rc = page_submit(r, &t[i]);
				}
				if (rc != 0)
					goto out;
			}
			if (!t[i].done)
				left++;
		}
		if (left == 0)
			break;
	}
	for (i = 0; i < n; i++)
		if ((rc = page_result(&t[i], &pages[i])) != 0)
			goto out;
	rc = 0;
out:
	for (i = 0; i < n; i++) {
		if (t[i].running)
			xfer_cancel(r->x, &t[i].job);
		free(t[i].buf.buf);
		free(t[i].url);
	}
	free(t);
	return rc;
}

/*
 * The server's clock as wall time (seconds read as if UTC) in the
 * ftp_timezone, for the year of LIST dates that show none.
 */
static int64_t
ftp_now_wall(const struct tzspec *tz)
{
	int64_t	 now = clock_real_ns() / NS, utc;

	if (tzspec_to_utc(tz, now, &utc) != 0)
		return now;
	return now + (now - utc);
}

/* The FTP crawl: the same fetch callback, FEAT then MLSD or LIST. */
static int
run_list_ftp(struct run *r, size_t *ret_skipped, size_t *ret_loops)
{
	struct ftp_crawl_opts fo;
	bool		 mlsd = false;
	int		 rc;

	memset(&fo, 0, sizeof(fo));
	fo.filter = &r->filter;
	fo.max_depth = MAX_DEPTH;
	fo.batch = r->c->max_connections ? r->c->max_connections : 4;
	fo.now_wall = ftp_now_wall(&r->c->ftp_tz);
	fo.ret_mlsd = &mlsd;
	fo.ret_loops = ret_loops;
	fo.ret_skipped = ret_skipped;
	rc = list_ftp_crawl(r->source, &fo, fetch_pages, r, r->l, r->err,
	    sizeof(r->err));
	log_debug("%s: list: %s", r->c->name, mlsd ? "MLSD" : "LIST");
	return rc;
}

static int
run_list(struct run *r)
{
	struct crawl_opts co;
	size_t		 skipped = 0, loops = 0;
	int		 rc;

	r->filter.include = (const char *const *)r->c->include;
	r->filter.ninclude = r->c->ninclude;
	r->filter.exclude = (const char *const *)r->c->exclude;
	r->filter.nexclude = r->c->nexclude;
	memset(&co, 0, sizeof(co));
	co.filter = &r->filter;
	co.max_depth = MAX_DEPTH;
	co.max_page_bytes = MAX_PAGE_BYTES;
	co.batch = r->c->max_connections ? r->c->max_connections * 2 : 16;
	if ((r->l = listing_new(MAX_LISTING)) == NULL)
		return BM_ENOMEM;
	co.ret_skipped = &skipped;
	co.ret_loops = &loops;
	if (mirror_is_ftp(r->c))
		rc = run_list_ftp(r, &skipped, &loops);
	else
		rc = list_http_crawl(r->c->source, &co, fetch_pages, r, r->l,
		    r->err, sizeof(r->err));
	r->complete = rc == 0;
	if (skipped > 0)
		log_info("%s: list: %zu links skipped (unsafe names, or "
		    "outside the source)", r->c->name, skipped);
	if (loops > 0)
		log_warnx("%s: list: %zu directories not entered: their "
		    "entries repeat an ancestor's (a server-side symlink loop)",
		    r->c->name, loops);
	if (rc == BM_ENOMEM || rc == BM_EINTR)
		return rc;
	if (rc != 0) {
		log_errx("%s: list: %s", r->c->name, r->err);
		(void)result_add_error(r->res, "", "list", r->err);
	}
	if ((rc = listing_resolve_times(r->l, mirror_is_ftp(r->c) ?
	    &r->c->ftp_tz : &r->c->listing_tz)) != 0)
		return rc;
	if ((rc = listing_sort(r->l)) != 0)
		return rc;
	r->res->listed = (int64_t)listing_count(r->l);
	if ((rc = manifest_stage(r->m, r->l)) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: stage: %s",
		    manifest_errmsg(r->m));
		return BM_EDB;
	}
	return 0;
}

static void
print_plan(const struct run *r, FILE *fp)
{
	const struct action *a;
	size_t		 i;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op == ACT_KEEP)
			continue;
		if (a->op == ACT_FETCH || a->op == ACT_COND_FETCH) {
			if (a->list_size >= 0)
				fprintf(fp, "%-6s %s (%s, %s%lld bytes)\n",
				    action_name(a->op), a->path, a->why,
				    a->list_size_exact ? "" : "about ",
				    (long long)a->list_size);
			else
				fprintf(fp, "%-6s %s (%s)\n",
				    action_name(a->op), a->path, a->why);
		} else
			fprintf(fp, "%-6s %s (%s)\n", action_name(a->op),
			    a->path, a->why);
	}
}

/* Create listed directories that are missing and record them. */
static int
run_mkdirs(struct run *r)
{
	struct commit_rec rec;
	const struct action *a;
	size_t		 i;
	int		 rc;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op != ACT_MKDIR)
			continue;
		memset(&rec, 0, sizeof(rec));
		rec.path = a->path;
		rec.type = ENTRY_DIR;
		rec.list_size = -1;
		rec.list_mtime = a->list_mtime;
		rec.list_prec = a->list_prec;
		rec.up_size = rec.up_mtime = -1;
		rec.local_size = rec.local_mtime = -1;
		if ((rc = store_mkdirs(r->s, a->path)) != 0) {
			rec.op = COMMIT_FAILED;
			rec.reason = bm_strerror(rc);
			log_warnx("%s: mkdir: %s", a->path, rec.reason);
			(void)result_add_error(r->res, a->path, "mkdir",
			    rec.reason);
			r->res->failed++;
		} else
			rec.op = COMMIT_MKDIR;
		if ((rc = manifest_commit(r->m, r->run, &rec, 1)) != 0)
			return BM_EDB;
	}
	return 0;
}

/*
 * Upstream symlinks (FTP): recreated when the target stays inside the
 * mirror; one pointing outside (or with an unknown target) is recorded
 * in the manifest and not created.  The link gets the listed mtime.
 */
static int
run_symlinks(struct run *r)
{
	struct commit_rec rec;
	const struct action *a;
	size_t		 i;
	int		 rc;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op != ACT_SYMLINK)
			continue;
		memset(&rec, 0, sizeof(rec));
		rec.path = a->path;
		rec.type = ENTRY_SYMLINK;
		rec.target = a->target;
		rec.list_size = -1;
		rec.list_mtime = a->list_mtime;
		rec.list_prec = a->list_prec;
		rec.up_size = rec.up_mtime = -1;
		rec.local_size = rec.local_mtime = -1;
		rec.op = COMMIT_SYMLINK;
		if (a->target == NULL || !store_link_inside(a->path,
		    a->target))
			log_info("%s -> %s: symlink target outside the mirror: "
			    "recorded, not created", a->path, a->target ?
			    a->target : "(unknown)");
		else if ((rc = store_symlink(r->s, a->path, a->target)) != 0) {
			rec.op = COMMIT_FAILED;
			rec.reason = rc == BM_EIO ? strerror(errno) :
			    rc == BM_EUNSAFE ? "a directory is in the way" :
			    bm_strerror(rc);
			log_warnx("%s: symlink: %s", a->path, rec.reason);
			(void)result_add_error(r->res, a->path, "symlink",
			    rec.reason);
			r->res->failed++;
		} else if (a->list_prec != MTIME_UNKNOWN &&
		    store_set_mtime(r->s, a->path, a->list_mtime) == 0)
			rec.local_mtime = a->list_mtime;
		if (manifest_commit(r->m, r->run, &rec, 1) != 0)
			return BM_EDB;
	}
	return 0;
}

/* Type changes left alone (delete = no) are failures that say why. */
static void
run_conflicts(struct run *r)
{
	const struct action *a;
	size_t		 i;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op != ACT_CONFLICT)
			continue;
		log_warnx("%s: %s", a->path, a->why);
		(void)result_add_error(r->res, a->path, "conflict", a->why);
		r->res->failed++;
	}
}

/* The deletes of one phase: PHASE_CLEAR (type changes) or PHASE_DELETE. */
static int
run_deletes(struct run *r, enum action_phase phase)
{
	struct commit_rec rec;
	const struct action *a;
	size_t		 i;
	int		 rc;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op != ACT_DELETE || a->phase != phase)
			continue;
		memset(&rec, 0, sizeof(rec));
		rec.path = a->path;
		rec.type = a->type;
		rc = store_delete(r->s, a->path);
		if (rc != 0 && rc != BM_ENOENT) {
			rec.op = COMMIT_FAILED;
			rec.reason = rc == BM_EIO && errno == ENOTEMPTY ?
			    "directory not empty: it holds files that are not "
			    "from upstream (kept)" : rc == BM_EIO ?
			    strerror(errno) : bm_strerror(rc);
			log_warnx("%s: delete: %s", a->path, rec.reason);
			(void)result_add_error(r->res, a->path, "delete",
			    rec.reason);
			r->res->failed++;
		} else {
			rec.op = COMMIT_DELETED;
			if (a->type == ENTRY_FILE)
				r->res->deleted++;
		}
		if (manifest_commit(r->m, r->run, &rec, 1) != 0)
			return BM_EDB;
	}
	return 0;
}

/* Directory mtimes, deepest first, after everything inside changed. */
static void
run_dir_mtimes(struct run *r)
{
	size_t	 i;

	for (i = r->ndirs; i-- > 0;)
		(void)store_set_mtime(r->s, r->dirs[i].path, r->dirs[i].mtime);
}

/*
 * Keep what the rest of the run needs from the listing (directories with
 * a known mtime) and free the rest: on a 100,000-entry listing that is
 * most of the run's memory.
 */
static int
run_drop_listing(struct run *r)
{
	const struct entry *e;
	size_t		 i, n = 0;

	for (i = 0; i < listing_count(r->l); i++) {
		e = listing_get(r->l, i);
		if (e->type == ENTRY_DIR && e->mtime_prec != MTIME_UNKNOWN)
			n++;
	}
	if (n > 0 && (r->dirs = calloc(n, sizeof(*r->dirs))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < listing_count(r->l); i++) {
		e = listing_get(r->l, i);
		if (e->type != ENTRY_DIR || e->mtime_prec == MTIME_UNKNOWN)
			continue;
		if ((r->dirs[r->ndirs].path = strdup(e->path)) == NULL)
			return BM_ENOMEM;
		r->dirs[r->ndirs++].mtime = e->mtime;
	}
	listing_free(r->l);
	r->l = NULL;
	return 0;
}

/* True when directory a is b or lies inside it (both canonical). */
static bool
path_within(const char *a, const char *b)
{
	size_t	 n = strlen(b);

	return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/' ||
	    (n == 1 && b[0] == '/'));
}

/*
 * The state directory and the destination must not overlap: upstream
 * could otherwise overwrite the manifest, and a delete could remove it.
 * Compared after resolving symlinks (realpath), so aliases are caught.
 */
static int
run_check_overlap(struct run *r)
{
	char	 st[PATH_MAX], de[PATH_MAX];

	if (realpath(r->o->state_dir, st) == NULL ||
	    realpath(store_path(r->s), de) == NULL)
		return 0;	/* both exist by now; nothing to compare if not */
	if (path_within(st, de) || path_within(de, st)) {
		(void)snprintf(r->err, sizeof(r->err), "the state directory "
		    "%.200s and the destination %.200s overlap", st, de);
		return BM_EINVAL;
	}
	return 0;
}

/*
 * The source URL libcurl is given (an ftps:// source is explicit TLS on
 * the FTP port: ftp:// with AUTH TLS required; libcurl's ftps:// would be
 * implicit TLS), and the FTP password from password_file (its first line).
 */
static int
run_ftp_source(struct run *r)
{
	FILE	*fp;
	char	 line[512];
	size_t	 n;
	int	 err;

	if (strncasecmp(r->c->source, "ftps://", 7) == 0) {
		if (asprintf(&r->source, "ftp://%s", r->c->source + 7) == -1) {
			r->source = NULL;
			return BM_ENOMEM;
		}
	} else if ((r->source = strdup(r->c->source)) == NULL)
		return BM_ENOMEM;
	if (r->c->password_file == NULL)
		return 0;
	if ((fp = fopen(r->c->password_file, "re")) == NULL) {
		err = errno;
		(void)snprintf(r->err, sizeof(r->err), "password_file %s: %s",
		    r->c->password_file, strerror(err));
		return BM_EINVAL;
	}
	if (fgets(line, sizeof(line), fp) == NULL)
		line[0] = '\0';
	(void)fclose(fp);
	n = strcspn(line, "\r\n");
	line[n] = '\0';
	r->password = strdup(line);
	explicit_bzero(line, sizeof(line));
	return r->password == NULL ? BM_ENOMEM : 0;
}

static int
run_open(struct run *r)
{
	char		 path[4096];
	struct xfer_opts xo;
	struct stat	 st;
	int		 rc;

	if ((rc = state_manifest_path(r->o->state_dir, r->o->key, path,
	    sizeof(path))) != 0)
		return rc;
	if ((rc = manifest_open(path, true, &r->m, r->err,
	    sizeof(r->err))) != 0)
		return rc == BM_ENOMEM ? rc : BM_EDB;
	if (!r->o->dry_run || stat(r->c->dest, &st) == 0) {
		if ((rc = store_open(r->c->dest, r->c->file_mode,
		    r->c->dir_mode, &r->s)) != 0) {
			(void)snprintf(r->err, sizeof(r->err), "%s: %s",
			    r->c->dest, rc == BM_EIO ? strerror(errno) :
			    bm_strerror(rc));
			/* An unusable destination is a config error: exit 2. */
			return BM_EINVAL;
		}
	}
	if (r->s != NULL && (rc = run_check_overlap(r)) != 0)
		return rc;
	if ((rc = run_ftp_source(r)) != 0)
		return rc;
	memset(&xo, 0, sizeof(xo));
	xo.max_connections = r->c->max_connections ? r->c->max_connections :
	    mirror_is_ftp(r->c) ? 4 : 8;
	xo.ftp_tls = r->c->ftp_tls == FTP_TLS_REQUIRE ||
	    strncasecmp(r->c->source, "ftps://", 7) == 0 ? XFER_TLS_REQUIRE :
	    r->c->ftp_tls == FTP_TLS_TRY ? XFER_TLS_TRY : XFER_TLS_NONE;
	xo.ftp_active = r->c->ftp_active;
	xo.user = r->c->user;
	xo.password = r->password;
	xo.connect_timeout = r->c->timeout;
	xo.stall_timeout = r->c->stall_timeout;
	xo.user_agent = r->c->user_agent ? r->c->user_agent : r->o->user_agent;
	xo.ca_file = r->c->ca_file;
	xo.bwlimit = r->c->bwlimit;
	return xfer_curl_new(&xo, &r->x);
}

/*
 * Files per batch commit: a finished file keeps two descriptors (its temp
 * file and its directory) until its batch is published, so the batch
 * stays well inside the open-file limit; at most 1024 files, as fewer
 * syncfs calls are what makes a run of many small files fast.
 */
static size_t
batch_files(void)
{
	struct rlimit	 rl;
	rlim_t		 n = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = rl.rlim_cur > 256 ? (rl.rlim_cur - 256) / 3 : 16;
	if (n > 1024)
		n = 1024;
	if (n < 16)
		n = 16;
	return (size_t)n;
}

static int
run_execute(struct run *r)
{
	struct sched_opts so;
	size_t		 ntemps = 0;
	int		 rc;

	if (store_clean_temps(r->s, &ntemps) == 0 && ntemps > 0)
		log_info("%s: removed %zu temp files of an earlier run",
		    r->c->name, ntemps);
	run_conflicts(r);
	if ((rc = run_deletes(r, PHASE_CLEAR)) != 0 ||
	    (rc = run_mkdirs(r)) != 0 || (rc = run_symlinks(r)) != 0)
		return rc;
	memset(&so, 0, sizeof(so));
	so.source_url = r->source;
	so.name = r->c->name;
	so.concurrency = r->c->concurrency;
	so.streams = r->c->streams;
	so.min_split = r->c->min_split;
	so.progress = r->o->progress;
	so.retries = r->c->retries;
	so.run = r->run;
	so.batch_files = batch_files();
	so.batch_bytes = 256ULL * 1024 * 1024;
	so.batch_ms = 5000;
	so.stop = r->o->stop;
	rc = sched_run(&so, r->x, r->s, r->m, r->p->acts, r->p->nacts, r->res);
	if (rc == BM_ENOSPC)
		(void)snprintf(r->err, sizeof(r->err), "%s: no space left on "
		    "device: stopped", r->c->dest);
	if (rc != 0)
		return rc;
	if ((rc = run_deletes(r, PHASE_DELETE)) != 0)
		return rc;
	run_dir_mtimes(r);
	return 0;
}

/* The status word and exit code from how the run went. */
static void
run_status(struct run *r, int rc)
{
	struct mirror_result *res = r->res;

	if (rc == BM_ELIMIT) {
		res->status = "refused";
		res->exit_code = 4;
	} else if (rc == BM_EDB || rc == BM_EINVAL) {
		res->status = "failed";
		res->exit_code = 2;
	} else if (rc == BM_EINTR) {
		res->status = "partial";
		res->exit_code = 1;
	} else if (rc != 0) {
		res->status = "failed";
		res->exit_code = 1;
	} else if (!r->complete) {
		res->status = res->fetched > 0 ? "partial" : "failed";
		res->exit_code = 3;
	} else if (res->failed > 0) {
		res->status = "partial";
		res->exit_code = 1;
	} else {
		res->status = "ok";
		res->exit_code = 0;
	}
}

static void
run_record(struct run *r, int64_t start)
{
	struct run_record rec;

	if (r->m == NULL || r->run == 0)
		return;
	memset(&rec, 0, sizeof(rec));
	rec.id = r->run;
	rec.start_ns = start;
	rec.end_ns = clock_real_ns();
	(void)snprintf(rec.status, sizeof(rec.status), "%s", r->res->status);
	rec.listed = r->res->listed;
	rec.fetched = r->res->fetched;
	rec.touched = r->res->touched;
	rec.deleted = r->res->deleted;
	rec.failed = r->res->failed;
	rec.bytes = (int64_t)r->res->bytes;
	(void)snprintf(rec.error, sizeof(rec.error), "%.255s", r->err);
	if (rec.error[0] == '\0' && r->res->nerrors > 0)
		(void)snprintf(rec.error, sizeof(rec.error), "%.100s: %.20s: %.120s",
		    r->res->errors[0].path, r->res->errors[0].op,
		    r->res->errors[0].reason);
	if (manifest_run_end(r->m, &rec) != 0)
		log_warnx("%s: manifest: run end: %s", r->c->name,
		    manifest_errmsg(r->m));
}

static int
run_body(struct run *r)
{
	uint64_t	 avail = UINT64_MAX;
	int		 rc;

	if ((rc = run_open(r)) != 0)
		return rc;
	if (!r->o->dry_run && (rc = manifest_run_begin(r->m, "sync",
	    clock_real_ns(), &r->run)) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
		return BM_EDB;
	}
	if ((rc = run_list(r)) != 0)
		return rc;
	if (!r->complete && listing_count(r->l) == 0)
		return 0;	/* exit 3: nothing listed, nothing done */
	if ((rc = plan_build(r->m, r->s, r->c->delete && r->complete,
	    &r->filter, &r->p)) != 0) {
		if (rc == BM_EDB)
			(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
			    manifest_errmsg(r->m));
		return rc;
	}
	if ((rc = run_drop_listing(r)) != 0)
		return rc;
	if (r->s != NULL)
		(void)store_free_space(r->s, &avail);
	/*
	 * An incomplete listing plans no deletes (what it lacks is kept,
	 * and plan_guard counts only planned deletes), so the part that
	 * did list is fetched and the run ends with exit 3.
	 */
	if ((rc = plan_guard(r->p, r->c, avail, r->err,
	    sizeof(r->err))) != 0) {
		log_errx("%s: %s", r->c->name, r->err);
		return rc;
	}
	if (r->o->dry_run) {
		if (r->o->plan_out)
			print_plan(r, r->o->plan_out);
		r->res->fetched = r->p->nfetch;
		r->res->touched = r->p->ntouch;
		r->res->deleted = r->p->ndelete;
		r->res->bytes = r->p->fetch_bytes;
		return 0;
	}
	if ((rc = run_execute(r)) != 0)
		return rc;
	if (manifest_mark_seen(r->m, r->run) != 0)
		log_warnx("%s: manifest: %s", r->c->name, manifest_errmsg(r->m));
	return 0;
}

int
sync_mirror(const struct sync_opts *o, const struct mirror_conf *c,
    struct mirror_result **ret)
{
	struct run	 r;
	struct timespec	 t0, t1;
	int64_t		 start = clock_real_ns();
	long		 holder = 0;
	size_t		 i;
	int		 lockfd = -1, rc;

	memset(&r, 0, sizeof(r));
	r.o = o;
	r.c = c;
	if ((r.res = result_new(c->name)) == NULL)
		return BM_ENOMEM;
	r.res->dry_run = o->dry_run;
	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((rc = state_prepare(o->state_dir)) != 0) {
		(void)snprintf(r.err, sizeof(r.err), "%s: mkdir: %s",
		    o->state_dir, strerror(errno));
		rc = BM_EINVAL;
		goto done;
	}
	if ((rc = state_lock(o->state_dir, o->key, &lockfd, &holder)) != 0) {
		if (rc == BM_ELOCKED) {
			(void)snprintf(r.err, sizeof(r.err), "another run "
			    "holds the lock (pid %ld)", holder);
			log_warnx("%s: %s", c->name, r.err);
			r.res->status = "locked";
			r.res->exit_code = 75;
			(void)result_add_error(r.res, "", "lock", r.err);
			*ret = r.res;
			return 0;
		}
		(void)snprintf(r.err, sizeof(r.err), "%s/locks: %s",
		    o->state_dir, strerror(errno));
		rc = BM_EINVAL;
		goto done;
	}
	rc = run_body(&r);
done:
	run_status(&r, rc);
	if (rc != 0 && r.err[0]) {
		if (rc != BM_ELIMIT)
			log_errx("%s: %s", c->name, r.err);
		if (r.res->nerrors == 0 || rc != BM_ELIMIT)
			(void)result_add_error(r.res, "", rc == BM_ELIMIT ?
			    "guard" : "run", r.err);
	}
	(void)clock_gettime(CLOCK_MONOTONIC, &t1);
	r.res->seconds = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	r.res->run = r.run;
	run_record(&r, start);
	plan_free(r.p);
	listing_free(r.l);
	for (i = 0; i < r.ndirs; i++)
		free(r.dirs[i].path);
	free(r.dirs);
	xfer_free(r.x);
	free(r.source);
	if (r.password != NULL)
		explicit_bzero(r.password, strlen(r.password));
	free(r.password);
	store_close(r.s);
	manifest_close(r.m);
	state_unlock(lockfd);
	*ret = r.res;
	return 0;
}
