/*
 * One run of one mirror (see include/biomirror/sync.h).  The order of
 * steps is the safety argument: nothing is changed before the listing is
 * staged and the guards passed; deletes happen only after a complete
 * listing and after every fetch; directory mtimes are set last, deepest
 * first, so that creating their contents does not disturb them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "biomirror/autotune.h"
#include "biomirror/clock.h"
#include "biomirror/commit.h"
#include "biomirror/config.h"
#include "biomirror/destlock.h"
#include "biomirror/digest.h"
#include "biomirror/error.h"
#include "biomirror/fileio.h"
#include "biomirror/hook.h"
#include "biomirror/lister.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/metrics.h"
#include "biomirror/plan.h"
#include "biomirror/report.h"
#include "biomirror/resume.h"
#include "biomirror/sched.h"
#include "biomirror/state.h"
#include "biomirror/store.h"
#include "biomirror/sync.h"
#include "biomirror/xfer.h"
#include "biomirror/zone.h"

#define NS			1000000000LL
#define MAX_LISTING		(200 * 1000 * 1000)	/* entries per mirror */
#define MAX_PAGE_BYTES		(64 * 1024 * 1024)	/* one index page */
#define MAX_DEPTH		64			/* directory levels */
#define MAX_SIDECAR_BYTES	(64 * 1024 * 1024)	/* one sidecar file */

/* A listed directory and its mtime, set after its contents changed. */
struct dir_mtime {
	char		*path;		/* owned */
	int64_t		 mtime;		/* ns */
};

/* A digest the listing states (a bm:// server's recorded SHA-256). */
struct run_lsum {
	char		*path;		/* owned */
	struct digest_value v;
};

struct run {
	const struct sync_opts *o;	/* borrowed */
	char		 page_err[1024]; /* the first failed page logged:
					   "URL: reason" (sync_list) */
	size_t		 page_why;	/* offset of its reason */
	const struct mirror_conf *c;	/* borrowed */
	const struct lister_ops *lister; /* borrowed: the source's (run_open) */
	struct mirror_result *res;	/* borrowed */
	struct manifest	*m;		/* owned */
	struct store	*s;		/* owned, NULL in a dry run without dest */
	struct dest_lock *dl;		/* owned: the destination's lock, NULL
					   until run_claim_dest */
	struct xfer	*x;		/* owned */
	struct listing	*l;		/* owned: the entries not yet staged
					   (run_drain stages them in batches) */
	struct listing	*zcand;		/* owned: the files zone_check may ask
					   (zone_keep), NULL until run_list */
	int		 drain_rc;	/* why run_drain stopped the crawl, 0 */
	struct plan	*p;		/* owned */
	int64_t		 run;		/* manifest run id, 0 in a dry run */
	struct filter	 filter;	/* include/exclude (strings borrowed) */
	struct dir_mtime *dirs;		/* owned: listed directories, path order */
	size_t		 ndirs;
	char		**sidecars;	/* owned: listed sidecar files (verify != size) */
	size_t		 nsidecars;
	const char	**unloaded;	/* owned array of borrowed sidecars[]
					   entries the last run_load_sums()
					   left out (not fetched this run,
					   unreadable): what they cover is
					   unchecked (run_unchecked) */
	size_t		 nunloaded;
	struct sidecar_set *sums;	/* owned: local sidecars' digests (--checksum), or NULL */
	struct run_lsum	*lsums;		/* owned: digests the listing states
					   (run_keep_lsums), NULL none */
	size_t		 nlsums;
	char		**noted;	/* owned: "sidecar\npath" keys already
					   warned about this run (run_note_once) */
	size_t		 nnoted;
	bool		 complete;	/* the listing is complete */
	struct listing	*unlisted;	/* owned, NULL: directories inside
					   followed links the server refused to
					   list (kept, not deleted beneath) */
	struct run_digest *digests;	/* owned: resync --checksum's digests
					   to record (run_queue_digest) */
	size_t		 ndigests;
	size_t		 digests_cap;	/* slots allocated in digests */
	int		 digests_rc;	/* first error queueing them, 0 if none */
	char		*password;	/* owned: FTP password (password_file),
					   NULL if none; wiped when freed */
	char		*secret;	/* owned: bm:// secret (secret_file),
					   NULL if none; wiped when freed */
	size_t		 secret_len;
	struct zone_state zs;		/* the zone of the listed times
					   (zone_start, zone_check) */
	int64_t		 start_ns;	/* wall clock at the run's start */
	int		 state_fault;	/* BM_ECORRUPT: the manifest is
					   damaged; BM_ENOSPC: the state
					   directory is full; 0 */
	bool		 checking;	/* the manifest's check runs beside
					   the listing (run_join_check) */
	bool		 owner_due;	/* run_record_owner once it is joined */
	char		 err[1024];	/* first fatal reason (recorded whole:
					   run_record.error is as large) */
};

/* A digest resync --checksum records for a file that had none. */
struct run_digest {
	char		*path;		/* owned: relative path */
	char		 sum[DIGEST_TEXT_MAX]; /* "sha256:HEX" */
};

/*
 * Sink of one index page: to its lister's stream as it arrives, else
 * into memory, capped at MAX_PAGE_BYTES.
 */
struct page_buf {
	uint8_t		*buf;		/* owned */
	size_t		 len, cap;
	const struct page_stream *st;	/* borrowed, NULL: buffered */
	const char	*ctype;		/* borrowed: the job's Content-Type */
	int		 st_rc;		/* the stream's refusal, 0 if none */
};

static int
sink_page(void *arg, uint64_t off, const void *data, size_t len)
{
	struct page_buf	*b = arg;
	uint8_t		*nb;
	size_t		 ncap;

	if (off != b->len)
		return BM_EPROTO;
	if (b->st != NULL) {
		b->len += len;
		return b->st_rc = b->st->feed(b->st->arg, b->ctype, data, len);
	}
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
	const struct page_stream *st;	/* borrowed: the page's, NULL */
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
	int	 rc;

	free(t->buf.buf);
	memset(&t->buf, 0, sizeof(t->buf));
	memset(&t->job, 0, sizeof(t->job));
	if (t->st != NULL && (rc = t->st->begin(t->st->arg)) != 0)
		return rc;
	t->buf.st = t->st;
	t->buf.ctype = t->job.res.content_type;
	t->job.url = t->url;
	t->job.expect_size = -1;
	/* A streamed page is capped in entries by its lister (max_entries). */
	t->job.max_size = t->st != NULL ? 0 : MAX_PAGE_BYTES;
	t->job.if_modified_since = -1;
	t->job.no_redirect = true;
	t->job.kind = t->command != NULL && strcmp(t->command, "FEAT") == 0 ?
	    XFER_JOB_PROBE : XFER_JOB_PAGE;
	t->job.ftp.mlsd = t->command != NULL && strcmp(t->command, "MLSD") == 0;
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
page_result(struct run *r, struct page_try *t, struct http_page *pg)
{
	struct xfer_result *res = &t->job.res;

	pg->status = res->status;
	pg->rc = res->rc;
	if (res->rc == 0 && res->cls != XFER_OK)
		pg->rc = BM_EHTTP;
	/*
	 * Every failed page is named (the run reports the first); one its
	 * lister refused as it streamed in (max_entries) the lister names.
	 */
	if (pg->rc != 0 && t->buf.st_rc == 0) {
		log_warnx("%s: list: %s", t->url, res->errmsg);
		if (r->page_err[0] == '\0') {
			(void)snprintf(r->page_err, sizeof(r->page_err),
			    "%s: %s", t->url, res->errmsg);
			r->page_why = strlen(r->page_err) - strlen(res->errmsg);
		}
	}
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
		t[i].st = pages[i].stream;
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
		if ((rc = page_result(r, &t[i], &pages[i])) != 0)
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

/* lister_run.hint: what the lister learned goes to the transport. */
static void
run_hint(void *ctx, enum lister_hint h, bool on)
{
	struct run	*r = ctx;

	xfer_hint(r->x, h == LISTER_HINT_GRIDFTP ? XFER_HINT_GRIDFTP :
	    XFER_HINT_MODE_E, on);
}

/*
 * Each directory of a followed link that the server refused to list
 * (list_ftp.h: unlisted) is a failure of this run (exit 1), named with
 * the server's reply; the plan keeps what lies beneath it (plan_opts
 * keep), so the rest of the tree, deletes included, goes on.
 */
static void
run_unlisted(struct run *r)
{
	const struct entry *e;
	char		 why[320];
	size_t		 i;

	for (i = 0; r->unlisted != NULL && i < listing_count(r->unlisted);
	    i++) {
		e = listing_get(r->unlisted, i);
		(void)snprintf(why, sizeof(why), "followed symlink: the server "
		    "refused to list it (%.200s): nothing beneath it fetched "
		    "or deleted", e->size_display ? e->size_display : "");
		log_warnx("%s: %s: %s", r->c->name, e->path, why);
		(void)result_add_error(r->res, e->path, "list", why);
		r->res->failed++;
	}
}

/* The per-host connection cap: max_connections, or the lister's default. */
static unsigned
run_connections(const struct run *r)
{
	return r->c->max_connections ? r->c->max_connections :
	    r->lister->connections;
}

/*
 * The zone of the listed times: the key the lister's table names, as
 * zone_start() and zone_check() made it (auto: the offset learnt).
 */
static const struct tzspec *
run_zone(const struct run *r)
{
	return &r->zs.zone;
}

/* sched_opts fix_mtime: an MDTM in local time read in the zone. */
static int64_t
run_fix_mtime(void *ctx, int64_t s)
{
	const struct run *r = ctx;

	return zone_fix_mtime(&r->zs, s);
}

/* What the listing skipped or did not enter, for the run's log. */
static void
run_list_stats(const struct run *r, const struct lister_stats *st)
{
	/* list URL: its mirror is named "list", so say the URL */
	const char	*who = r->o->command != NULL &&
	    strcmp(r->o->command, "list") == 0 ? r->c->source : r->c->name;

	if (st->skipped > 0)
		log_info("%s: list: %zu %s skipped (unsafe names, outside "
		    "the source, or a name listed both as a file and as a "
		    "directory: the first kept)", who, st->skipped,
		    r->lister->unit);
	if (st->unread > 0)
		log_info("%s: list: %zu listing line%s not understood, skipped "
		    "(-v names each)", who, st->unread,
		    st->unread == 1 ? "" : "s");
	if (st->dups > 0)
		log_warnx("%s: list: %zu %s skipped: a name listed again (or "
		    "as a file and as a directory): the first kept", who,
		    st->dups, r->lister->unit);
	if (st->beneath > 0)
		log_warnx("%s: list: %zu %s skipped: below a file or a symlink "
		    "of the listing", who, st->beneath, r->lister->unit);
	if (st->loops > 0)
		log_warnx("%s: list: %zu directories not entered: their "
		    "entries repeat an ancestor's (a server-side symlink loop)",
		    who, st->loops);
}

/*
 * Stage a batch of the listing, its times resolved in the run's zone,
 * and free it (listing_drain).  0, BM_EINVAL (a time the zone cannot
 * convert) or BM_EDB (r->err says why).
 */
static int
run_stage_batch(struct run *r, struct listing *l)
{
	int	 rc;

	if ((rc = listing_resolve_times(l, run_zone(r))) != 0)
		return rc;
	if (manifest_stage_add(r->m, l) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: stage: %s",
		    manifest_errmsg(r->m));
		return BM_EDB;
	}
	listing_drain(l);
	return 0;
}

/*
 * lister_run.drain: each batch of the crawl is staged as it comes, so no
 * run holds its whole listing (issue 22); the files zone_check may ask
 * are kept aside.  Not used under auto zones: the times are resolved
 * once the zone is learnt, at the end.
 */
static int
run_drain(void *ctx, struct listing *l)
{
	struct run	*r = ctx;
	int		 rc;

	if ((rc = zone_keep(r->zcand, l)) != 0 ||
	    (rc = run_stage_batch(r, l)) != 0)
		r->drain_rc = rc;
	return rc;
}

/*
 * lister_run.retract: a page that failed after handing on some of its
 * entries takes them back out of staging.
 */
static int
run_retract(void *ctx, const char *prefix)
{
	struct run	*r = ctx;
	int		 rc;

	if ((rc = manifest_stage_drop(r->m, prefix)) == BM_EDB)
		(void)snprintf(r->err, sizeof(r->err), "manifest: stage: %s",
		    manifest_errmsg(r->m));
	if (rc != 0)
		r->drain_rc = rc;
	return rc;
}

/* The lister_run of this run's listing. */
static void
run_lister_run(struct run *r, struct lister_run *lr)
{
	memset(lr, 0, sizeof(*lr));
	lr->name = r->c->name;
	lr->source = r->c->source;
	lr->filter = &r->filter;
	lr->tz = run_zone(r);
	lr->max_depth = MAX_DEPTH;
	lr->max_entries = r->c->max_entries;
	lr->connections = run_connections(r);
	lr->follow = r->c->follow_symlinks;
	lr->mode_e = r->c->ftp_mode_e;
	lr->fetch = fetch_pages;
	lr->ctx = r;
	lr->hint = run_hint;
	lr->unlisted = r->unlisted;
	lr->drain = r->zs.conf->kind == TZ_AUTO ? NULL : run_drain;
	lr->retract = lr->drain != NULL ? run_retract : NULL;
}

/*
 * List upstream into the staging table: batches as the crawl hands them
 * on (run_drain), then the rest once the zone is checked.  Duplicates
 * are dropped by the staging table (the first kept, as listing_sort
 * does), so res->listed counts what it holds.
 */
static int
run_list(struct run *r)
{
	struct lister_run lr;
	struct lister_stats st;
	int		 rc;

	r->filter.include = (const char *const *)r->c->include;
	r->filter.ninclude = r->c->ninclude;
	r->filter.exclude = (const char *const *)r->c->exclude;
	r->filter.nexclude = r->c->nexclude;
	if ((r->l = listing_new(MAX_LISTING)) == NULL ||
	    (r->zcand = listing_new(MAX_LISTING)) == NULL)
		return BM_ENOMEM;
	if (r->c->follow_symlinks &&
	    (r->unlisted = listing_new(MAX_LISTING)) == NULL)
		return BM_ENOMEM;
	r->zs.mirror = r->c->name;
	r->zs.source = r->c->source;
	r->zs.conf = r->lister->zone == LISTER_ZONE_FTP ? &r->c->ftp_tz :
	    &r->c->listing_tz;
	r->zs.ftp = r->lister->zone == LISTER_ZONE_FTP;
	r->zs.record = !r->o->dry_run;
	if ((rc = zone_start(&r->zs, r->m)) != 0 ||
	    manifest_stage_begin(r->m) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
		return BM_EDB;
	}
	memset(&st, 0, sizeof(st));
	run_lister_run(r, &lr);
	rc = r->lister->list(&lr, r->l, &st, r->err, sizeof(r->err));
	if (r->drain_rc != 0)
		return r->drain_rc;
	run_unlisted(r);
	r->complete = rc == 0;
	run_list_stats(r, &st);
	if (rc == BM_EINTR)
		r->err[0] = '\0';	/* the fetch it cut short: run_status says why */
	if (rc == BM_ENOMEM || rc == BM_EINTR)
		return rc;
	if (rc != 0) {
		log_errx("%s: list: %s", r->c->name, r->err);
		(void)result_add_error(r->res, "", "list", r->err);
	}
	if ((rc = zone_keep(r->zcand, r->l)) != 0)
		return rc;
	if (listing_total(r->l) > 0 && (rc = zone_check(&r->zs, r->x, r->m,
	    r->zcand, r->o->stop)) != 0) {
		if (rc == BM_EDB)
			(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
			    manifest_errmsg(r->m));
		return rc;
	}
	if ((rc = run_stage_batch(r, r->l)) != 0)
		return rc;
	if (manifest_staged_count(r->m, &r->res->listed) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: stage: %s",
		    manifest_errmsg(r->m));
		return BM_EDB;
	}
	return 0;
}

/*
 * The listed sidecar that covers the data file at path (verify is not
 * size): its own "X.md5" (".sha256", ...), else the nearest list
 * (MD5SUMS, ...) in its directory or above; NULL if none.  Borrowed.
 */
static bool	is_sidecar(const char *);
static bool	sidecar_is_list(const char *);

static const char *
run_sidecar_of(const struct run *r, const char *path)
{
	const char	*p, *base, *best = NULL;
	size_t		 i, n = strlen(path), bestlen = 0;

	if (r->c->verify == VERIFY_SIZE || is_sidecar(path))
		return NULL;
	for (i = 0; i < r->nsidecars; i++) {
		p = r->sidecars[i];
		base = strrchr(p, '/');
		base = base ? base + 1 : p;
		if (!sidecar_is_list(base)) {
			if (strncmp(p, path, n) == 0 && p[n] == '.' &&
			    strchr(p + n, '/') == NULL)
				return p;
		} else if (strncmp(path, p, (size_t)(base - p)) == 0 &&
		    (best == NULL || (size_t)(base - p) > bestlen)) {
			best = p;
			bestlen = (size_t)(base - p);
		}
	}
	return best;
}

/*
 * A plan's actions to fp, each with its reason and the bytes it moves
 * ("about" when the size is a listing's rounded figure) and the sidecar
 * it is checked against; then, for a refused one, the guard that
 * refused it (guard, NULL if none).
 */
static void
print_plan(const struct run *r, FILE *fp, const char *guard)
{
	const struct action *a;
	const char	*sc;
	char		 by[PATH_MAX + 32];
	int64_t		 b;
	size_t		 i;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op == ACT_KEEP)
			continue;
		b = action_bytes(a);
		by[0] = '\0';
		if (a->op == ACT_FETCH || a->op == ACT_COND_FETCH) {
			sc = run_sidecar_of(r, a->path);
			if (sc != NULL)
				(void)snprintf(by, sizeof(by), "; checked "
				    "against %s", sc);
		}
		if (b >= 0 && (a->op == ACT_FETCH || a->op == ACT_COND_FETCH ||
		    (a->op == ACT_DELETE && a->type == ENTRY_FILE)))
			fprintf(fp, "%-6s %s (%s, %s%lld bytes%s)\n",
			    action_name(a->op), a->path, a->why,
			    a->op != ACT_DELETE && a->fs.listed.size == b &&
			    !a->fs.listed.size_exact ? "about " : "",
			    (long long)b, by);
		else if (by[0] != '\0')
			fprintf(fp, "%-6s %s (%s%s)\n", action_name(a->op),
			    a->path, a->why, by);
		else
			fprintf(fp, "%-6s %s (%s)\n", action_name(a->op),
			    a->path, a->why);
	}
	if (guard != NULL)
		fprintf(fp, "%s\n", guard);
}

/* A dry run's result: what a sync would count, and its actions. */
static int
run_plan_result(struct run *r)
{
	const struct action *a;
	size_t		 i;
	int		 rc;

	r->res->fetched = r->p->nfetch;
	r->res->touched = r->p->ntouch;
	r->res->bytes = r->p->fetch_bytes;
	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		/* Files, as a sync counts them (run_deletes). */
		if (a->op == ACT_DELETE && a->type == ENTRY_FILE)
			r->res->deleted++;
		if (a->op == ACT_COND_FETCH)
			r->res->checks++;
		else if (a->op == ACT_FETCH && action_bytes(a) < 0)
			r->res->unsized++;
		if (r->o->actions && a->op != ACT_KEEP &&
		    (rc = result_add_action(r->res, a->path,
		    action_name(a->op), action_bytes(a), a->why)) != 0)
			return rc;
	}
	return 0;
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
		commit_rec_entry(&rec, a, ENTRY_DIR, COMMIT_MKDIR);
		if ((rc = store_mkdirs(r->s, a->path)) != 0) {
			rec.op = COMMIT_FAILED;
			rec.reason = bm_strerror(rc);
			log_warnx("%s: mkdir: %s", a->path, rec.reason);
			(void)result_add_error(r->res, a->path, "mkdir",
			    rec.reason);
			r->res->failed++;
		}
		if ((rc = commit_results(r->m, r->run, &rec, 1)) != 0)
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
		commit_rec_entry(&rec, a, ENTRY_SYMLINK, COMMIT_SYMLINK);
		rec.target = action_target(a);
		if (rec.target == NULL || !store_link_inside(a->path,
		    rec.target))
			log_info("%s -> %s: symlink target outside the mirror: "
			    "recorded, not created", a->path, rec.target ?
			    rec.target : "(unknown)");
		else if ((rc = store_symlink(r->s, a->path, rec.target)) != 0) {
			rec.op = COMMIT_FAILED;
			rec.reason = rc == BM_EIO ? strerror(errno) :
			    rc == BM_EUNSAFE ? "a directory is in the way" :
			    bm_strerror(rc);
			log_warnx("%s: symlink: %s", a->path, rec.reason);
			(void)result_add_error(r->res, a->path, "symlink",
			    rec.reason);
			r->res->failed++;
		} else if (a->fs.listed.prec != MTIME_UNKNOWN &&
		    store_set_mtime(r->s, a->path, a->fs.listed.mtime) == 0)
			rec.fs.local.mtime = a->fs.listed.mtime;
		if (commit_results(r->m, r->run, &rec, 1) != 0)
			return BM_EDB;
	}
	return 0;
}

/*
 * Paths with something of another type in the way that stays (plan.c
 * plan_clear(): delete = no, or not what biomirror committed there) are
 * failures that say why, recorded as events of the run (history).
 * Returns 0 or BM_EDB.
 */
static int
run_conflicts(struct run *r)
{
	struct commit_rec rec;
	const struct action *a;
	size_t		 i;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op != ACT_CONFLICT)
			continue;
		log_warnx("%s: %s", a->path, a->why);
		(void)result_add_error(r->res, a->path, "conflict", a->why);
		r->res->failed++;
		commit_rec_path(&rec, a->path, a->type, COMMIT_FAILED);
		rec.reason = a->why;
		if (commit_results(r->m, r->run, &rec, 1) != 0)
			return BM_EDB;
	}
	return 0;
}

/*
 * Whether the path of a delete (gone upstream, or its type changed
 * upstream: a->replace) is still what was committed there; if not (a
 * file of another size or mtime: an edit; a path that is no longer of
 * the type committed: a file, directory or symlink replaced by an
 * admin's or another tool's), why it is kept, in buf; NULL to delete it.
 */
static const char *
run_not_committed(struct run *r, const struct action *a, char *buf,
    size_t len)
{
	struct local_stat st;
	struct local_state was = action_local(a);
	const char	*what, *event;
	int		 want;

	switch (a->type) {
	case ENTRY_FILE:
		want = 'f';
		what = "file";
		break;
	case ENTRY_DIR:
		want = 'd';
		what = "directory";
		break;
	case ENTRY_SYMLINK:
		want = 'l';
		what = "symlink";
		break;
	default:
		return NULL;
	}
	if (store_stat(r->s, a->path, &st) != 0)
		return NULL;
	event = a->replace ? "its type changed upstream" : "gone upstream";
	if (st.type != want)
		(void)snprintf(buf, len, "%s, but the local path is no longer "
		    "the %s committed: kept, no longer tracked", event, what);
	else if (want == 'f' && was.size >= 0 && st.size != was.size)
		(void)snprintf(buf, len, "%s, but the local file is not the "
		    "one committed (%lld bytes, committed %lld): kept, no "
		    "longer tracked", event, (long long)st.size,
		    (long long)was.size);
	else if (want == 'f' && was.mtime >= 0 && st.mtime != was.mtime)
		(void)snprintf(buf, len, "%s, but the local file is not the "
		    "one committed (its mtime changed since): kept, no "
		    "longer tracked", event);
	else
		return NULL;
	return buf;
}

/* True when path lies beneath directory dir. */
static bool
path_beneath(const char *path, const char *dir)
{
	size_t	 n = strlen(dir);

	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/*
 * The deletes of one phase: PHASE_CLEAR (type changes) or PHASE_DELETE.
 * A path gone upstream is deleted only while it is still what was
 * committed (run_not_committed); else it is kept and released.  So is a
 * directory gone upstream that still holds what is not from upstream
 * (files released above, an admin's): reported once, not every run.  A
 * directory that is not empty because a delete beneath it failed this
 * run (that row stays) fails too, and stays tracked: the next run
 * deletes both.
 */
static int
run_deletes(struct run *r, enum action_phase phase)
{
	struct commit_rec rec;
	const struct action *a;
	char		 why[160];
	size_t		 i, j, *failed = NULL, nfailed = 0, *nv;
	int		 rc, ret = BM_EDB;
	bool		 notempty, busy;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op != ACT_DELETE || a->phase != phase)
			continue;
		commit_rec_path(&rec, a->path, a->type, COMMIT_RELEASED);
		if ((rec.reason = run_not_committed(r, a, why,
		    sizeof(why))) != NULL) {
			log_warnx("%s: delete: %s", a->path, rec.reason);
			(void)result_add_error(r->res, a->path, "delete",
			    rec.reason);
			r->res->failed++;
			if (commit_results(r->m, r->run, &rec, 1) != 0)
				goto out;
			continue;
		}
		rc = store_delete(r->s, a->path);
		notempty = rc == BM_EIO && errno == ENOTEMPTY;
		/* Children come first (act_cmp_order): their failures known. */
		for (j = 0, busy = false; notempty && j < nfailed && !busy; j++)
			busy = path_beneath(r->p->acts[failed[j]].path, a->path);
		if (notempty && !busy && phase == PHASE_DELETE) {
			rec.op = COMMIT_RELEASED;
			rec.reason = "gone upstream, but the directory holds "
			    "files that are not from upstream: kept, no "
			    "longer tracked";
			log_warnx("%s: delete: %s", a->path, rec.reason);
			(void)result_add_error(r->res, a->path, "delete",
			    rec.reason);
			r->res->failed++;
		} else if (rc != 0 && rc != BM_ENOENT) {
			rec.op = COMMIT_FAILED;
			rec.reason = busy ? "directory not empty: a path "
			    "beneath it could not be deleted (kept)" :
			    notempty ? "directory not empty: it holds files "
			    "that are not from upstream (kept)" : rc == BM_EIO ?
			    strerror(errno) : bm_strerror(rc);
			log_warnx("%s: delete: %s", a->path, rec.reason);
			(void)result_add_error(r->res, a->path, "delete",
			    rec.reason);
			r->res->failed++;
			if ((nv = reallocarray(failed, nfailed + 1,
			    sizeof(*failed))) == NULL) {
				ret = BM_ENOMEM;
				goto out;
			}
			failed = nv;
			failed[nfailed++] = i;
		} else {
			rec.op = COMMIT_DELETED;
			if (a->type == ENTRY_FILE)
				r->res->deleted++;
		}
		if (commit_results(r->m, r->run, &rec, 1) != 0)
			goto out;
	}
	ret = 0;
out:
	free(failed);
	return ret;
}

/* Directory mtimes, deepest first, after everything inside changed. */
static void
run_dir_mtimes(struct run *r)
{
	size_t	 i;

	for (i = r->ndirs; i-- > 0;)
		(void)store_set_dir_mtime(r->s, r->dirs[i].path,
		    r->dirs[i].mtime);
}

/* True when the last component of path is a sidecar checksum file. */
static bool
is_sidecar(const char *path)
{
	const char	*base = strrchr(path, '/');

	return sidecar_name(base ? base + 1 : path, NULL);
}

/* What run_drop_listing collects from the staged rows. */
struct run_keep {
	struct run	*r;		/* borrowed */
	bool		 sums;		/* sidecars and listed digests too */
	size_t		 capdirs, capsc, caplsums; /* slots allocated */
};

/* Grow *v (elem bytes each) to hold n + 1 elements.  0 or BM_ENOMEM. */
static int
run_grow(void **v, size_t *cap, size_t n, size_t elem)
{
	void	*nv;
	size_t	 ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 64;
	if ((nv = reallocarray(*v, ncap, elem)) == NULL)
		return BM_ENOMEM;
	memset((char *)nv + *cap * elem, 0, (ncap - *cap) * elem);
	*v = nv;
	*cap = ncap;
	return 0;
}

/*
 * manifest_staged_walk: a listed directory with a known mtime (its mtime
 * is set last, run_dir_mtimes), a listed sidecar file and a digest the
 * listing states (verify = sidecar | checksum, and resync --checksum).
 */
static int
run_keep_row(void *ctx, const struct staged_row *sr)
{
	struct run_keep	*k = ctx;
	struct run	*r = k->r;
	struct digest_value v;
	void		*p;

	if (sr->type == ENTRY_DIR) {
		p = r->dirs;
		if (run_grow(&p, &k->capdirs, r->ndirs, sizeof(*r->dirs)) != 0)
			return BM_ENOMEM;
		r->dirs = p;
		if ((r->dirs[r->ndirs].path = strndup(sr->path,
		    sr->pathlen)) == NULL)
			return BM_ENOMEM;
		r->dirs[r->ndirs++].mtime = sr->mtime;
		return 0;
	}
	if (!k->sums)
		return 0;
	if (is_sidecar(sr->path)) {
		p = r->sidecars;
		if (run_grow(&p, &k->capsc, r->nsidecars,
		    sizeof(*r->sidecars)) != 0)
			return BM_ENOMEM;
		r->sidecars = p;
		if ((r->sidecars[r->nsidecars] = strndup(sr->path,
		    sr->pathlen)) == NULL)
			return BM_ENOMEM;
		r->nsidecars++;
	}
	if (sr->checksum != NULL && digest_from_text(sr->checksum, &v) == 0) {
		p = r->lsums;
		if (run_grow(&p, &k->caplsums, r->nlsums,
		    sizeof(*r->lsums)) != 0)
			return BM_ENOMEM;
		r->lsums = p;
		r->lsums[r->nlsums].v = v;
		if ((r->lsums[r->nlsums].path = strndup(sr->path,
		    sr->pathlen)) == NULL)
			return BM_ENOMEM;
		r->nlsums++;
	}
	return 0;
}

/*
 * Keep what the rest of the run needs from the staged listing
 * (directories with a known mtime; with verify or --checksum the
 * sidecars and listed digests) and free what is left of the listing.
 * 0, BM_ENOMEM or BM_EDB.
 */
static int
run_drop_listing(struct run *r)
{
	struct run_keep	 k;
	int		 rc;

	listing_free(r->l);
	r->l = NULL;
	listing_free(r->zcand);
	r->zcand = NULL;
	memset(&k, 0, sizeof(k));
	k.r = r;
	k.sums = r->c->verify != VERIFY_SIZE || r->o->checksum;
	if ((rc = manifest_staged_walk(r->m, k.sums, run_keep_row, &k)) != 0) {
		if (rc == BM_EDB)
			(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
			    manifest_errmsg(r->m));
		return rc;
	}
	/*
	 * Much of what was freed lies in the arenas of the crawl's parser
	 * threads, which the plan's allocations on this thread do not
	 * reuse: hand it back to the kernel (malloc_trim(3), glibc).
	 */
	(void)malloc_trim(0);
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
 * publish = set: neither DEST nor DEST.biomirror beside it (the
 * snapshots) may overlap the state directory; checked before
 * store_open_set() moves anything, after resolving symlinks.
 */
static int
run_set_check_overlap(struct run *r)
{
	char	 st[PATH_MAX], path[PATH_MAX], rp[PATH_MAX];
	size_t	 len = strlen(r->c->dest);
	int	 i;

	if (realpath(r->o->state_dir, st) == NULL)
		return 0;
	while (len > 1 && r->c->dest[len - 1] == '/')
		len--;
	for (i = 0; i < 2; i++) {
		if ((size_t)snprintf(path, sizeof(path), "%.*s%s", (int)len,
		    r->c->dest, i ? ".biomirror" : "") >= sizeof(path) ||
		    realpath(path, rp) == NULL)
			continue;
		if (path_within(st, rp) || path_within(rp, st)) {
			(void)snprintf(r->err, sizeof(r->err), "the state "
			    "directory %.200s and the %s %.200s overlap", st,
			    i ? "snapshot directory" : "destination", rp);
			return BM_EINVAL;
		}
	}
	return 0;
}

/*
 * The id of the newest run of this mirror other than self (0: none, as
 * in a dry run) into *ret, -1 when there is none: an unpublished snapshot
 * is continued only when that run left it (store_open_set).
 */
static int
run_set_prev(struct manifest *m, int64_t self, int64_t *ret)
{
	struct run_record *runs = NULL;
	size_t		 i, n = 0;
	int		 rc;

	*ret = -1;
	if ((rc = manifest_runs(m, 2, &runs, &n)) != 0)
		return rc;
	for (i = 0; i < n; i++)
		if (runs[i].id != self) {
			*ret = runs[i].id;
			break;
		}
	free(runs);
	return 0;
}

/*
 * The destination could not be opened (store_open, store_open_set; why:
 * the store's own message or ""): r->err says why, and the result is
 * BM_ENOMEM or BM_EINVAL (exit 2: an unusable destination is a config
 * error).
 */
static int
run_store_failed(struct run *r, int rc, const char *why)
{
	if (why != NULL && why[0] != '\0')
		(void)snprintf(r->err, sizeof(r->err), "%s", why);
	else
		(void)snprintf(r->err, sizeof(r->err), "%s: %s", r->c->dest,
		    rc == BM_EIO ? strerror(errno) : bm_strerror(rc));
	return rc == BM_ENOMEM ? rc : BM_EINVAL;
}

/*
 * Check the destination's kind and lock it (dest_lock_take: one lock
 * per destination whatever the state directory or config file): shared
 * for a read-only run, which makes nothing.  Returns 0, BM_ELOCKED (exit
 * 75, the holder named in r->err), BM_EINVAL (exit 2: refused, the owner
 * named; or an unusable destination) or BM_ENOMEM.
 */
static int
run_claim_dest(struct run *r, bool readonly)
{
	struct dest_who	 who;
	char		 why[sizeof(r->err)];
	int		 rc;

	who.mirror = r->o->key;
	who.config = r->o->config_file;
	who.state_dir = r->o->state_dir;
	who.set = r->c->publish == PUBLISH_SET;
	rc = dest_lock_take(r->c->dest, &who, readonly ? DEST_LOCK_SHARED :
	    DEST_LOCK_CREATE, r->c->dir_mode, &r->dl, why, sizeof(why));
	if (rc == 0 || rc == BM_ENOMEM)
		return rc;
	(void)snprintf(r->err, sizeof(r->err), "%s", why[0] != '\0' ? why :
	    bm_strerror(rc));
	return rc == BM_ELOCKED ? rc : BM_EINVAL;
}

/*
 * Once the store opened the tree: the destination's owner record names
 * this run.  Not fatal: without it a refused run names no owner.
 */
static void
run_record_owner(struct run *r)
{
	int	 err;

	if (dest_lock_record(r->dl) == 0)
		return;
	err = errno;
	if (err == EACCES || err == EROFS || err == EPERM)
		log_debug("%s: no owner record beside %s: %s", r->c->name,
		    r->c->dest, strerror(err));
	else
		log_warnx("%s: owner record of %s: %s", r->c->name,
		    r->c->dest, strerror(err));
}

/*
 * publish = set: open the destination (store_open_set), once the run id
 * that names a new snapshot is known; read-only in a dry run.
 */
static int
run_set_open(struct run *r)
{
	struct store_set_info info;
	char	 why[256];
	int64_t	 prev;
	int	 rc;

	if ((rc = run_set_check_overlap(r)) != 0)
		return rc;
	if ((rc = run_set_prev(r->m, r->o->dry_run ? 0 : r->run,
	    &prev)) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
		return rc == BM_ENOMEM ? rc : BM_EDB;
	}
	rc = store_open_set(r->c->dest, r->c->file_mode, r->c->dir_mode,
	    r->o->dry_run ? 0 : r->run, prev, &r->s, why, sizeof(why));
	store_set_get_info(r->s, &info);
	if (rc == 0 && info.discarded >= 0)
		log_warnx("%s: unpublished snapshot %lld %s: the run before "
		    "this one (%lld) did not leave it, so the manifest no "
		    "longer describes it; starting again from the published "
		    "one", r->c->name, (long long)info.discarded,
		    r->o->dry_run ? "ignored" : "discarded", (long long)prev);
	if (rc != 0)
		return run_store_failed(r, rc, why);
	if (!r->o->dry_run)
		run_record_owner(r);
	return 0;
}

/* True when the plan changes anything (or reports a conflict). */
static bool
plan_has_work(const struct plan *p)
{
	return p->nfetch + p->ntouch + p->nmkdir + p->ndelete +
	    p->nconflict > 0;
}

/*
 * publish = set, after the transfers: publish the working snapshot when
 * the run is complete and error-free and something differs from the
 * published snapshot; else keep it for the next run (it holds what the
 * manifest recorded) or drop it when it holds nothing new.
 */
static int run_pre_publish(struct run *);

static int
run_set_finish(struct run *r, int rc)
{
	int64_t		 id = 0;
	struct store_set_info si;
	size_t		 n = 0;
	int		 prc;

	if (rc != 0 || !r->complete || r->res->failed > 0 || *r->o->stop) {
		if (store_set_pending(r->s))
			log_warnx("%s: snapshot not published (the run did "
			    "not complete): %s still shows the previous one; "
			    "the next run continues this one", r->c->name,
			    r->c->dest);
		return rc;
	}
	if (!store_set_pending(r->s)) {
		(void)store_set_discard(r->s);
		log_info("%s: no change: nothing to publish", r->c->name);
		return 0;
	}
	if ((prc = run_pre_publish(r)) != 0)
		return prc;
	if ((prc = store_set_publish(r->s, &id)) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "%s: publish: %s",
		    r->c->dest, prc == BM_EUNSAFE ? "something other than "
		    "its snapshot symlink is in the way: not replaced" :
		    prc == BM_EIO ? strerror(errno) : bm_strerror(prc));
		return BM_EIO;
	}
	log_info("%s: published snapshot %lld", r->c->name, (long long)id);
	if ((prc = store_set_prune(r->s, &n)) != 0)
		log_warnx("%s: removing old snapshots: %s", r->c->dest,
		    prc == BM_EIO ? strerror(errno) : bm_strerror(prc));
	else if (n > 0)
		log_info("%s: removed %zu old snapshots", r->c->name, n);
	store_set_get_info(r->s, &si);
	if (si.held > 0)
		log_info("%s: kept %zu old snapshot%s that a serve session "
		    "holds (removed by a later run)", r->c->name, si.held,
		    si.held == 1 ? "" : "s");
	return 0;
}

/*
 * The state directory and the destination must not overlap: upstream
 * could otherwise overwrite the manifest, and a delete could remove it;
 * nor may the state directory lie in DEST.biomirror (publish = set's
 * snapshots, a name kept for every mirror, as config_load() keeps it).
 * Compared after resolving symlinks (fileio_path_resolve(): the longest
 * existing prefix of each), so aliases are caught, and checked before
 * either is written to.  Returns 0, BM_EINVAL (why in r->err) or
 * BM_ENOMEM.
 */
static int
run_check_overlap(struct run *r)
{
	char	*st, *de, *dl = NULL, *set = NULL;
	int	 rc = 0;

	st = fileio_path_resolve(r->o->state_dir);
	de = fileio_path_resolve(r->c->dest);
	/*
	 * DEST.biomirror lies beside DEST as written: with publish = set
	 * DEST is a symlink into it, so it is not named after the resolved
	 * DEST (a snapshot) but resolved itself.
	 */
	if ((dl = malloc(strlen(r->c->dest) + sizeof(".biomirror") + 1)) !=
	    NULL) {
		memcpy(dl, r->c->dest, strlen(r->c->dest) + 1);
		fileio_path_canon(dl);
		memcpy(dl + strlen(dl), ".biomirror", sizeof(".biomirror"));
	}
	if (st == NULL || de == NULL || dl == NULL ||
	    (set = fileio_path_resolve(dl)) == NULL) {
		rc = BM_ENOMEM;
	} else if (path_within(st, de) || path_within(de, st)) {
		(void)snprintf(r->err, sizeof(r->err), "the state directory "
		    "%.200s and the destination %.200s overlap", st, de);
		rc = BM_EINVAL;
	} else if (path_within(st, set)) {
		/* DEST.biomirror is publish = set's, kept for every mirror. */
		(void)snprintf(r->err, sizeof(r->err), "the state directory "
		    "%.200s is inside the snapshot directory %.200s (kept for "
		    "publish = set)", st, set);
		rc = BM_EINVAL;
	}
	free(st);
	free(de);
	free(dl);
	free(set);
	return rc;
}

/*
 * The FTP password from password_file (its first line).  The source URL
 * goes to the crawler and the transport as configured: an ftps:// source
 * is explicit TLS on the FTP port, which the transport asks libcurl for
 * (agent/xfer/curl.c), so every log line and report names ftps://.
 */
static int
run_ftp_source(struct run *r)
{
	FILE	*fp;
	char	 line[512];
	size_t	 n;
	int	 err, c;

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
	n = strcspn(line, "\r\n");
	/*
	 * A longer line would be cut short, and the login fail unexplained;
	 * one of 511 bytes has only its line end (LF, or CRLF) left.
	 */
	if (line[n] == '\0' && n == sizeof(line) - 1 &&
	    (c = fgetc(fp)) != EOF && c != '\n' && c != '\r') {
		(void)fclose(fp);
		explicit_bzero(line, sizeof(line));
		(void)snprintf(r->err, sizeof(r->err), "password_file %s: the "
		    "first line is longer than %zu bytes", r->c->password_file,
		    sizeof(line) - 1);
		return BM_EINVAL;
	}
	(void)fclose(fp);
	line[n] = '\0';
	r->password = strdup(line);
	explicit_bzero(line, sizeof(line));
	return r->password == NULL ? BM_ENOMEM : 0;
}

/*
 * The bm:// export's secret from secret_file: its bytes, trailing
 * newlines removed, checked as at config time (config_read_secret(): a
 * regular file, not a symlink, mode 0600 or stricter, not empty).
 */
static int
run_bm_secret(struct run *r)
{
	uint8_t	*sec = NULL;
	int	 rc;

	if (r->c->secret_file == NULL)
		return 0;
	rc = config_read_secret(r->c->secret_file, &sec, &r->secret_len,
	    r->err, sizeof(r->err));
	r->secret = (char *)sec;
	return rc;
}

/*
 * tcp_congestion: what biomirror itself sends (requests; on a pull the
 * upstream server sends the data, and its own congestion control governs
 * that).  A name this kernel does not have or does not allow is not
 * fatal: the run warns and keeps the kernel's default.
 */
static void
run_tcp_congestion(struct run *r, struct xfer_opts *xo)
{
	char	 why[320], dflt[64];

	if (r->c->tcp_congestion[0] == '\0')
		return;
	if (xfer_tcp_congestion_check(r->c->tcp_congestion, why,
	    sizeof(why)) != 0) {
		xfer_tcp_congestion_default(dflt, sizeof(dflt));
		log_warnx("%s: tcp_congestion = %s: %s: the kernel's default "
		    "(%s) is used", r->c->name, r->c->tcp_congestion, why,
		    dflt);
		return;
	}
	xo->tcp_congestion = r->c->tcp_congestion;
	log_debug("%s: tcp_congestion %s on biomirror's sockets", r->c->name,
	    r->c->tcp_congestion);
}

/*
 * resync --adopt on a damaged manifest (r->err says how): move it aside
 * (kept, with its -wal and -shm) and start a new one, which the plan's
 * adoptions fill from the files in the destination; its runs are
 * numbered on from the old one's, when that can be read.  A dry run
 * plans against an empty manifest in memory and changes nothing.
 * Returns as manifest_open(); r->err says why on failure.
 */
static int
run_rebuild(struct run *r, const char *path)
{
	char	 kept[PATH_MAX];
	int64_t	 last = 0;
	bool	 known;
	int	 rc;

	if (r->o->dry_run) {
		log_warnx("%s: %s: a dry run of the rebuild: what resync "
		    "--adopt would adopt and fetch with a new manifest (the "
		    "damaged one stays as it is)", r->c->name, r->err);
		return manifest_open_scratch(&r->m, r->err, sizeof(r->err));
	}
	log_warnx("%s: %s: moving the damaged manifest aside and rebuilding "
	    "it from the files in %s", r->c->name, r->err, r->c->dest);
	known = manifest_peek_last_run(path, &last) == 0;
	if ((rc = manifest_set_aside(path, kept, sizeof(kept), r->err,
	    sizeof(r->err))) != 0)
		return rc;
	if (known && last > 0)
		log_info("%s: the damaged manifest is kept as %s, with the "
		    "history of runs 1 to %lld; new runs are numbered from "
		    "%lld", r->c->name, kept, (long long)last,
		    (long long)last + 1);
	else
		log_info("%s: the damaged manifest is kept as %s, with %s run "
		    "history; new runs are numbered from 1", r->c->name, kept,
		    known ? "its (empty)" : "what can be read of its");
	if ((r->res->kept_manifest = strdup(kept)) == NULL)
		return BM_ENOMEM;
	r->err[0] = '\0';
	if ((rc = manifest_open(path, true, &r->m, r->err,
	    sizeof(r->err))) == 0)
		manifest_run_ids_from(r->m, last + 1);
	return rc;
}

static int run_open_xfer(struct run *);

static int
run_open(struct run *r)
{
	char		 path[4096];
	struct stat	 st;
	int		 rc;

	if ((r->lister = lister_find(r->c->source)) == NULL) {
		(void)snprintf(r->err, sizeof(r->err), "%s: no lister for its "
		    "scheme", r->c->source);
		return BM_EINVAL;
	}
	if ((rc = state_manifest_path(r->o->state_dir, r->o->key, path,
	    sizeof(path))) != 0)
		return rc;
	/*
	 * A destination that is there but no directory (nor a symlink to
	 * one) is a config error (exit 2) found before the manifest is
	 * made: a refused run leaves no state behind.  publish = set judges
	 * its DEST itself (store_open_set: what it may replace).
	 */
	if (r->c->publish != PUBLISH_SET && stat(r->c->dest, &st) == 0 &&
	    !S_ISDIR(st.st_mode)) {
		(void)snprintf(r->err, sizeof(r->err), "%s: %s", r->c->dest,
		    strerror(ENOTDIR));
		return BM_EINVAL;
	}
	/* Refused, or locked by another run: before the manifest is made. */
	if ((rc = run_claim_dest(r, r->o->dry_run)) != 0)
		return rc;
	/*
	 * A dry run never migrates (reading commands leave the file).  A
	 * plain sync into a DEST that is there checks the manifest beside
	 * the listing (run_join_check: before the plan acts on the mirror).
	 */
	r->checking = !r->o->dry_run && !r->o->adopt && r->c->publish !=
	    PUBLISH_SET && stat(r->c->dest, &st) == 0;
	rc = r->o->dry_run ? manifest_open_as_is(path, true, &r->m, r->err,
	    sizeof(r->err)) : r->checking ? manifest_open_run(path, true,
	    &r->m, r->err, sizeof(r->err)) : manifest_open(path, true, &r->m,
	    r->err, sizeof(r->err));
	/*
	 * resync --adopt looks at every path (a stamped file's open looks
	 * at the first one only): what it finds damaged it rebuilds.
	 */
	if (rc == 0 && r->o->adopt && !r->o->dry_run &&
	    manifest_check_paths_all(r->m) == BM_ECORRUPT) {
		(void)snprintf(r->err, sizeof(r->err), "%s",
		    manifest_errmsg(r->m));
		manifest_close(r->m);
		r->m = NULL;
		rc = BM_ECORRUPT;
	}
	if (rc == BM_ECORRUPT && r->o->adopt)
		rc = run_rebuild(r, path);
	if (rc == 0 && manifest_warning(r->m)[0] != '\0')
		log_warnx("%s: %s", r->c->name, manifest_warning(r->m));
	if (rc != 0) {
		if (rc == BM_ECORRUPT || rc == BM_ENOSPC)
			r->state_fault = rc;
		return rc == BM_ENOMEM ? rc : BM_EDB;
	}
	if (r->c->publish == PUBLISH_SET)
		;	/* run_set_open, once the run id is known */
	else if (!r->o->dry_run || stat(r->c->dest, &st) == 0) {
		if ((rc = store_open(r->c->dest, r->c->file_mode,
		    r->c->dir_mode, &r->s)) != 0)
			return run_store_failed(r, rc, NULL);
		/* Checking: once the manifest is known sound. */
		if (r->checking)
			r->owner_due = true;
		else if (!r->o->dry_run)
			run_record_owner(r);
	}
	return run_open_xfer(r);
}

/*
 * The run's transport for its source (xfer_open), with the FTP password
 * and bm:// secret read first.  Returns 0, or a BM_E* code with why in
 * r->err.
 */
static int
run_open_xfer(struct run *r)
{
	char		 why[256];
	struct xfer_opts xo;
	int		 rc;

	if ((rc = run_ftp_source(r)) != 0 || (rc = run_bm_secret(r)) != 0)
		return rc;
	memset(&xo, 0, sizeof(xo));
	xo.max_connections = run_connections(r);
	xo.net = r->c->transport == TRANSPORT_UDT ? XFER_NET_UDT :
	    XFER_NET_TCP;
	xo.ftp.tls = r->c->ftp_tls == FTP_TLS_REQUIRE ||
	    strncasecmp(r->c->source, "ftps://", 7) == 0 ? XFER_TLS_REQUIRE :
	    r->c->ftp_tls == FTP_TLS_TRY ? XFER_TLS_TRY : XFER_TLS_NONE;
	xo.ftp.active = r->c->ftp_active;
	xo.ftp.gridftp = true;	/* until FEAT says otherwise */
	xo.ftp.mode_e = r->c->ftp_mode_e;
	xo.ftp.streams = r->c->streams;
	xo.udt_buffer = r->c->udt_buffer;
	xo.ftp.user = r->c->user;
	xo.ftp.password = r->password;
	xo.bm_secret = (const uint8_t *)r->secret;
	xo.bm_secret_len = r->secret_len;
	xo.connect_timeout = r->c->timeout;
	xo.stall_timeout = r->c->stall_timeout;
	xo.user_agent = r->c->user_agent ? r->c->user_agent : r->o->user_agent;
	xo.ca_file = r->c->ca_file;
	xo.bwlimit = r->c->bwlimit;
	run_tcp_congestion(r, &xo);
	if ((rc = xfer_open(r->c->source, &xo, &r->x, why, sizeof(why))) != 0)
		(void)snprintf(r->err, sizeof(r->err), "%s: open the %s "
		    "transport: %s", r->c->source, xo.net == XFER_NET_UDT ?
		    "udt" : "tcp", why);
	return rc;
}

/*
 * Files per batch commit: a finished file keeps two descriptors (its temp
 * file and its directory) until its batch is published, and two batches
 * can be open at once (one filling, one with the committer), so a batch
 * stays well inside a quarter of the open-file limit; at most 1024 files, as fewer
 * syncfs calls are what makes a run of many small files fast.
 */
static size_t
batch_files(void)
{
	struct rlimit	 rl;
	rlim_t		 n = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = rl.rlim_cur > 256 ? (rl.rlim_cur - 256) / 5 : 16;
	if (n > 1024)
		n = 1024;
	if (n < 16)
		n = 16;
	return (size_t)n;
}

static const char *run_local_differs(struct run *, const char *,
	    const char *, bool *, char *);

/*
 * resync --adopt: record the local files that match the listing (with
 * verify = checksum, with their SHA-256).
 */
static int
run_adopts(struct run *r)
{
	struct commit_rec rec;
	const struct action *a;
	const char	*why;
	char		 sha[DIGEST_TEXT_MAX];
	size_t		 i;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op != ACT_ADOPT)
			continue;
		/* verify = checksum: record the adopted content's SHA-256. */
		sha[0] = '\0';
		if (r->c->verify == VERIFY_CHECKSUM && (why =
		    run_local_differs(r, a->path, NULL, NULL, sha)) != NULL) {
			log_warnx("%s: local content %s: not adopted",
			    a->path, why);
			continue;
		}
		commit_rec_action(&rec, a, COMMIT_ADOPTED);
		rec.checksum = sha[0] ? sha : NULL;
		rec.type = ENTRY_FILE;
		rec.etag = NULL;
		rec.fs.upstream.size = a->fs.listed.size;
		/*
		 * The copy's mtime, which mirrors keep as upstream's: a
		 * conditional GET of it (its listed minute had not ended)
		 * gets a 304 rather than the whole file.
		 */
		rec.fs.upstream.mtime = action_local(a).mtime;
		/* XXX: one transaction per file; adopting is a one-off. */
		if (commit_results(r->m, r->run, &rec, 1) != 0) {
			(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
			    manifest_errmsg(r->m));
			return BM_EDB;
		}
		r->res->adopted++;
	}
	if (r->res->adopted > 0)
		log_info("%s: adopted %lld local files without fetching them",
		    r->c->name, (long long)r->res->adopted);
	return 0;
}

/* A per-directory list ("MD5SUMS", "md5sum.txt", ...), not "X.md5". */
static bool
sidecar_is_list(const char *base)
{
	return strcmp(base, "MD5SUMS") == 0 ||
	    strcmp(base, "SHA256SUMS") == 0 ||
	    strcmp(base, "md5sum.txt") == 0 ||
	    strcmp(base, "sha256sum.txt") == 0;
}

/* True when this run failed to fetch path (it is in the error list). */
static bool
run_failed_path(const struct run *r, const char *path)
{
	size_t	 i;

	for (i = 0; i < r->res->nerrors; i++)
		if (strcmp(r->res->errors[i].path, path) == 0)
			return true;
	return false;
}

/* Read the local sidecar file path into *ret (malloc'd) of *ret_len bytes. */
static int
run_read_sidecar(struct run *r, const char *path, char **ret, size_t *ret_len)
{
	struct local_stat st;
	int		 fd = -1, rc;

	if ((rc = store_open_read(r->s, path, &fd, &st)) != 0)
		return rc;
	rc = fileio_read_all(fd, MAX_SIDECAR_BYTES, ret, ret_len);
	(void)close(fd);
	return rc;
}

/*
 * True the first time this run asks about (sidecar, path): the sidecar
 * files are read up to three times a run (resync --checksum's plan, the
 * data pass, verify --repair), and each finding is logged once.  On
 * out-of-memory it answers true (a repeated line beats a lost one).
 */
static bool
run_note_once(struct run *r, const char *sidecar, const char *path)
{
	char	**v, *key;
	size_t	 i;

	if (asprintf(&key, "%s\n%s", sidecar, path) < 0)
		return true;
	for (i = 0; i < r->nnoted; i++)
		if (strcmp(r->noted[i], key) == 0) {
			free(key);
			return false;
		}
	if ((v = reallocarray(r->noted, r->nnoted + 1, sizeof(*v))) == NULL) {
		free(key);
		return true;
	}
	r->noted = v;
	r->noted[r->nnoted++] = key;
	return true;
}

/* sidecar_conflict_fn: warn (once a run) of a path given two digests. */
static int
run_note_conflict(void *ctx, const char *sidecar, const char *path)
{
	if (run_note_once(ctx, sidecar, path))
		log_warnx("%s: sidecar: conflicting digests for %s: treated "
		    "as a mismatch", sidecar, path);
	return 0;
}

/* Free what run_note_once() kept. */
static void
run_notes_free(struct run *r)
{
	size_t	 i;

	for (i = 0; i < r->nnoted; i++)
		free(r->noted[i]);
	free(r->noted);
	r->noted = NULL;
	r->nnoted = 0;
}

/*
 * The digests the listing itself states (a bm:// server's recorded
 * SHA-256) into set, after the sidecars: a sidecar file wins.  0,
 * BM_ELIMIT or BM_ENOMEM.
 */
static int
run_listed_sums(struct run *r, struct sidecar_set *set)
{
	size_t		 i;
	int		 rc;

	for (i = 0; i < r->nlsums; i++)
		if ((rc = sidecar_set_put(set, r->lsums[i].path, &r->lsums[i].v,
		    "the upstream's listing")) != 0)
			return rc;
	return 0;
}

/*
 * The published digests: every listed sidecar file as it is on disk now
 * (after the sidecar pass fetched the changed ones), per-file sidecars
 * ("X.md5") before lists ("MD5SUMS"), so that the more specific one wins.
 * A sidecar this run failed to fetch is left out (its old copy may not
 * match new data; the failure is reported already), as is one that
 * cannot be read: unless quiet, both go into r->unloaded.  quiet: nothing
 * is logged (the copies before this run fetches them: run_recheck; one
 * not there yet is left out).
 */
static int
run_load_sums(struct run *r, bool quiet, struct sidecar_set **ret)
{
	struct sidecar_set *set;
	char		*text;
	size_t		 i, len, bad, pass;
	const char	*p, *base;
	int		 rc = 0;

	if ((set = sidecar_set_new(MAX_LISTING)) == NULL)
		return BM_ENOMEM;
	if (!quiet) {
		free(r->unloaded);
		r->nunloaded = 0;
		if ((r->unloaded = calloc(r->nsidecars + 1,
		    sizeof(*r->unloaded))) == NULL) {
			sidecar_set_free(set);
			return BM_ENOMEM;
		}
	}
	for (pass = 0; pass < 2 && rc != BM_ENOMEM; pass++)
		for (i = 0; i < r->nsidecars; i++) {
			p = r->sidecars[i];
			base = strrchr(p, '/');
			base = base ? base + 1 : p;
			/* Pass 0: "X.md5", "X.sha256"; pass 1: the lists. */
			if (sidecar_is_list(base) != (pass == 1))
				continue;
			if (run_failed_path(r, p)) {
				if (!quiet)
					r->unloaded[r->nunloaded++] = p;
				continue;
			}
			if ((rc = run_read_sidecar(r, p, &text, &len)) != 0) {
				if (!quiet) {
					log_warnx("%s: sidecar: %s", p,
					    bm_strerror(rc));
					r->unloaded[r->nunloaded++] = p;
				}
				continue;
			}
			bad = 0;
			rc = sidecar_set_add(set, p, text, len, NULL, &bad);
			free(text);
			if (quiet)
				;
			else if (rc != 0) {
				log_warnx("%s: sidecar: %s", p, bm_strerror(rc));
				r->unloaded[r->nunloaded++] = p;
			}
			else if (bad > 0 && run_note_once(r, p, ""))
				log_info("%s: sidecar: %zu lines ignored "
				    "(malformed, or unsafe names)", p, bad);
		}
	if (rc != BM_ENOMEM)
		rc = run_listed_sums(r, set);
	if (rc != BM_ENOMEM && !quiet)
		rc = sidecar_set_conflicts(set, run_note_conflict, r);
	if (rc == BM_ENOMEM) {
		sidecar_set_free(set);
		return rc;
	}
	log_debug("%s: %zu published digests", r->c->name,
	    sidecar_set_count(set));
	*ret = set;
	return 0;
}

/*
 * sched_opts unchecked: true when path's content cannot be checked
 * against its sidecar this run: verify = size, or a listed sidecar that
 * may cover it (its "X.md5", or a list in its directory or above) was
 * left out of the published digests (r->unloaded).  Sidecars themselves
 * are never checked: false.
 */
static bool
run_unchecked(void *ctx, const char *path)
{
	const struct run *r = ctx;
	const char	*p, *base;
	size_t		 i, n = strlen(path);

	if (is_sidecar(path))
		return false;
	if (r->c->verify == VERIFY_SIZE)
		return true;
	for (i = 0; i < r->nunloaded; i++) {
		p = r->unloaded[i];
		base = strrchr(p, '/');
		base = base ? base + 1 : p;
		if (sidecar_is_list(base) ?
		    strncmp(path, p, (size_t)(base - p)) == 0 :
		    strncmp(p, path, n) == 0 && p[n] == '.' &&
		    strchr(p + n, '/') == NULL)
			return true;
	}
	return false;
}

/* A file whose upstream body kept failing its sidecar (manifest_mismatches). */
struct mism {
	char		*path;		/* owned */
	struct listed_state listed;	/* listed when it failed */
	int64_t		 run;
	char		*want, *got;	/* owned */
};

/* What run_recheck() works with. */
struct recheck {
	struct run	*r;
	struct sidecar_set *old;	/* borrowed: the sidecars before this
					   run fetched them, NULL: none fetched */
	struct sidecar_set *sums;	/* borrowed: the sidecars now */
	size_t		 nsorted;	/* the plan's sorted actions */
	const char	**paths;	/* owned: their paths (borrowed), sorted */
	struct mism	*mm;		/* owned, path order */
	size_t		 nmm;
	struct commit_rec *recs;	/* owned: SIDECAR and FAILED records */
	char		**strs;		/* owned: recs[i]'s path and text */
	size_t		 nrecs, cap;
};

/* manifest_mismatch_fn: keep a copy of each row. */
static int
recheck_mism(void *ctx, const struct mismatch_rec *m)
{
	struct recheck	*rc = ctx;
	struct mism	*v, *e;

	if ((v = reallocarray(rc->mm, rc->nmm + 1, sizeof(*v))) == NULL)
		return BM_ENOMEM;
	rc->mm = v;
	e = &v[rc->nmm];
	memset(e, 0, sizeof(*e));
	e->listed = m->fs.listed;
	e->run = m->run;
	rc->nmm++;
	if ((e->path = strdup(m->path)) == NULL ||
	    (e->want = strdup(m->want)) == NULL ||
	    (e->got = strdup(m->got)) == NULL)
		return BM_ENOMEM;
	return 0;
}

/* The mismatch recorded for path, or NULL. */
static const struct mism *
recheck_find_mism(const struct recheck *rc, const char *path)
{
	size_t	 lo = 0, hi = rc->nmm, mid;
	int	 c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if ((c = strcmp(rc->mm[mid].path, path)) == 0)
			return &rc->mm[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int
str_ptr_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * True when the plan has an action for path (fetched, touched, gone,
 * kept, in conflict): the re-check leaves it to the plan.
 */
static bool
recheck_planned(const struct recheck *rc, const char *path)
{
	return bsearch(&path, rc->paths, rc->nsorted, sizeof(*rc->paths),
	    str_ptr_cmp) != NULL;
}

/* Queue a record of op for path: SIDECAR (text) or FAILED (text: why). */
static int
recheck_queue(struct recheck *rc, const char *path, enum commit_op op,
    const char *text)
{
	struct commit_rec *v;
	char		**sv;
	size_t		 cap;

	if (rc->nrecs == rc->cap) {
		cap = rc->cap ? 2 * rc->cap : 16;
		if ((v = reallocarray(rc->recs, cap, sizeof(*v))) == NULL)
			return BM_ENOMEM;
		rc->recs = v;
		if ((sv = reallocarray(rc->strs, 2 * cap, sizeof(*sv))) ==
		    NULL)
			return BM_ENOMEM;
		rc->strs = sv;
		rc->cap = cap;
	}
	v = &rc->recs[rc->nrecs];
	commit_rec_path(v, NULL, ENTRY_FILE, op);
	rc->strs[2 * rc->nrecs] = strdup(path);
	rc->strs[2 * rc->nrecs + 1] = strdup(text);
	rc->nrecs++;
	if (rc->strs[2 * rc->nrecs - 2] == NULL ||
	    rc->strs[2 * rc->nrecs - 1] == NULL)
		return BM_ENOMEM;
	v->path = rc->strs[2 * rc->nrecs - 2];
	if (op == COMMIT_SIDECAR)
		v->sidecar = rc->strs[2 * rc->nrecs - 1];
	else
		v->reason = rc->strs[2 * rc->nrecs - 1];
	return 0;
}

/*
 * A file whose upstream body failed its sidecar before (m) and whose
 * listing (size, mtime: the values given) and published digests (now)
 * have not changed since: true after it is failed again without a
 * request (exit 1).  A listing that does not show both size and mtime
 * cannot tell: false (it is fetched).
 */
static bool
recheck_known_bad(struct recheck *rc, const struct mism *m,
    const char *path, const struct listed_state *l, const char *now,
    int *ret)
{
	char	 why[400];

	*ret = 0;
	if (m == NULL || strcmp(m->want, now) != 0 ||
	    m->listed.size != l->size ||
	    m->listed.size_exact != l->size_exact ||
	    m->listed.mtime != l->mtime || m->listed.prec != l->prec ||
	    l->prec == MTIME_UNKNOWN || l->size < 0)
		return false;
	(void)snprintf(why, sizeof(why), "checksum mismatch: upstream's copy "
	    "still fails its sidecar (it says %.150s, run %lld got %.75s): "
	    "not fetched again until upstream's file or sidecar changes",
	    m->want, (long long)m->run, m->got);
	log_warnx("%s: %s: %s", rc->r->c->name, path, why);
	(void)result_add_error(rc->r->res, path, "fetch", why);
	rc->r->res->failed++;
	*ret = recheck_queue(rc, path, COMMIT_FAILED, why);
	return true;
}

/*
 * sum gives one file two digests: it cannot vouch for the local copy,
 * and no body fetched could match it: true after the file is failed
 * (exit 1), neither hashed nor fetched.
 */
static bool
recheck_conflict(struct recheck *rc, const char *path,
    const struct sidecar_sum *sum, int *ret)
{
	char	 why[200];
	int	 i;

	*ret = 0;
	for (i = 0; i < DIGEST__N && !sum->conflict[i]; i++)
		;
	if (i == DIGEST__N)
		return false;
	(void)snprintf(why, sizeof(why), "checksum mismatch: %.60s gives "
	    "conflicting %s digests: the local copy cannot be checked",
	    sum->from[i], digest_alg_name((enum digest_alg)i));
	log_warnx("%s: %s: %s", rc->r->c->name, path, why);
	(void)result_add_error(rc->r->res, path, "fetch", why);
	rc->r->res->failed++;
	*ret = recheck_queue(rc, path, COMMIT_FAILED, why);
	return true;
}

/* The digests row's content last matched, NULL: hash it (recheck_row). */
static const char *
recheck_was(const struct recheck *rc, const struct file_row *row,
    const char *now, char *was, size_t len)
{
	struct sidecar_sum os;

	if (row->sidecar != NULL)
		return strcmp(row->sidecar, MANIFEST_SIDECAR_UNCHECKED) == 0 ?
		    NULL : row->sidecar;
	if (rc->old == NULL)
		return now;	/* no sidecar fetched: nothing new */
	if (sidecar_set_find(rc->old, row->path, &os) &&
	    sidecar_sum_text(&os, was, len) == 0)
		return was;
	return NULL;
}

/*
 * manifest_file_fn of run_recheck(): a committed data file that nothing
 * fetches this run is hashed when its published digests now are not the
 * ones it last matched (the recorded ones; for a row recorded before
 * biomirror kept them, those of the sidecars before this run fetched
 * them), or when it was committed unchecked and can be checked now (one
 * no line covers is recorded as such): a match is recorded, a mismatch
 * fetches it again.  A file given conflicting digests fails.
 */
static int
recheck_row(void *ctx, const struct file_row *row)
{
	struct recheck	*rc = ctx;
	struct run	*r = rc->r;
	struct sidecar_sum sum;
	struct sidecar_set *keep;
	char		 now[SIDECAR_TEXT_MAX], was[SIDECAR_TEXT_MAX];
	const char	*rec, *why, *what;
	int		 ret;
	bool		 unchecked;

	if (row->type != ENTRY_FILE || is_sidecar(row->path) ||
	    recheck_planned(rc, row->path))
		return 0;
	unchecked = row->sidecar != NULL &&
	    strcmp(row->sidecar, MANIFEST_SIDECAR_UNCHECKED) == 0;
	if (unchecked && run_unchecked(r, row->path))
		return 0;	/* its sidecar is missing again */
	if (!sidecar_set_find(rc->sums, row->path, &sum))
		return unchecked ? recheck_queue(rc, row->path, COMMIT_SIDECAR,
		    "") : 0;
	if (sidecar_sum_text(&sum, now, sizeof(now)) != 0)
		return 0;
	if (recheck_conflict(rc, row->path, &sum, &ret) || (!unchecked &&
	    recheck_known_bad(rc, recheck_find_mism(rc, row->path), row->path,
	    &row->fs.listed, now, &ret)))
		return ret;
	rec = recheck_was(rc, row, now, was, sizeof(was));
	if (rec != NULL && strcmp(rec, now) == 0)
		return 0;
	what = unchecked ? "committed without a sidecar check" :
	    "its sidecar's digest changed";
	keep = r->sums;
	r->sums = rc->sums;
	why = run_local_differs(r, row->path, row->checksum, NULL, NULL);
	r->sums = keep;
	if (why == NULL) {
		log_info("%s: %s: %s: the local copy matches", r->c->name,
		    row->path, what);
		return recheck_queue(rc, row->path, COMMIT_SIDECAR, now);
	}
	/* Upstream's copy is known to fail too: not fetched again. */
	if (unchecked && recheck_known_bad(rc, recheck_find_mism(rc,
	    row->path), row->path, &row->fs.listed, now, &ret))
		return ret != 0 ? ret : recheck_queue(rc, row->path,
		    COMMIT_SIDECAR, "");
	log_warnx("%s: %s: %s: local content %s: fetching it again",
	    r->c->name, row->path, what, why);
	if ((ret = plan_add_refetch(r->p, row, "differs from its sidecar")) !=
	    0)
		return ret;
	return recheck_queue(rc, row->path, COMMIT_SIDECAR, "");
}

/*
 * After the sidecar pass, before the data pass (verify = sidecar |
 * checksum): a planned fetch of a file whose upstream body failed its
 * sidecar before, with neither its listing nor its published digests
 * changed since, is not made (the file fails again, exit 1); a committed
 * file whose published digests changed is re-checked (recheck_row).
 * old: the sidecars before this run fetched them (NULL: none fetched),
 * sums: as they are now.  Returns 0, BM_ENOMEM or BM_EDB (r->err set).
 */
static int
run_recheck(struct run *r, struct sidecar_set *old, struct sidecar_set *sums)
{
	struct recheck	 rc;
	struct sidecar_sum sum;
	struct action	*a;
	char		 now[SIDECAR_TEXT_MAX];
	size_t		 i;
	int		 ret;

	if (sidecar_set_count(sums) == 0)
		return 0;
	memset(&rc, 0, sizeof(rc));
	rc.r = r;
	rc.old = old;
	rc.sums = sums;
	rc.nsorted = r->p->nacts;
	ret = BM_ENOMEM;
	if ((rc.paths = calloc(rc.nsorted ? rc.nsorted : 1,
	    sizeof(*rc.paths))) == NULL)
		goto out;
	for (i = 0; i < rc.nsorted; i++)
		rc.paths[i] = r->p->acts[i].path;
	qsort(rc.paths, rc.nsorted, sizeof(*rc.paths), str_ptr_cmp);
	if ((ret = manifest_mismatches(r->m, recheck_mism, &rc)) != 0)
		goto out;
	for (i = 0; i < rc.nsorted && rc.nmm > 0; i++) {
		a = &r->p->acts[i];
		if ((a->op != ACT_FETCH && a->op != ACT_COND_FETCH) ||
		    is_sidecar(a->path) ||
		    !sidecar_set_find(sums, a->path, &sum) ||
		    sidecar_sum_text(&sum, now, sizeof(now)) != 0)
			continue;
		if (recheck_known_bad(&rc, recheck_find_mism(&rc, a->path),
		    a->path, &a->fs.listed, now, &ret)) {
			a->op = ACT_KEEP;	/* not fetched */
			a->why = "fails its sidecar";
		}
		if (ret != 0)
			goto out;
	}
	if ((ret = manifest_ls(r->m, "", recheck_row, &rc)) != 0)
		goto out;
	if (rc.nrecs > 0)
		ret = commit_results(r->m, r->run, rc.recs, rc.nrecs);
out:
	if (ret == BM_EDB)
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
	for (i = 0; i < rc.nmm; i++) {
		free(rc.mm[i].path);
		free(rc.mm[i].want);
		free(rc.mm[i].got);
	}
	free(rc.mm);
	free(rc.paths);
	for (i = 0; i < 2 * rc.nrecs; i++)
		free(rc.strs[i]);
	free(rc.strs);
	free(rc.recs);
	return ret;
}

/* True when the plan fetches a sidecar file. */
static bool
run_fetches_sidecar(const struct run *r)
{
	size_t	 i;

	for (i = 0; i < r->p->nacts; i++)
		if ((r->p->acts[i].op == ACT_FETCH ||
		    r->p->acts[i].op == ACT_COND_FETCH) &&
		    is_sidecar(r->p->acts[i].path))
			return true;
	return false;
}

/*
 * manifest_file_fn: a conditional fetch (a 304 when it is as this run
 * fetched it) of the committed sidecar row, into a plan.
 */
static int
parked_sidecar(void *ctx, const struct file_row *row)
{
	struct plan	*p = ctx;
	int		 rc;

	if (row->type != ENTRY_FILE)
		return 0;
	if ((rc = plan_add_refetch(p, row, "a file it covers failed it")) == 0)
		p->acts[p->nacts - 1].op = ACT_COND_FETCH;
	return rc;
}

/*
 * Files parked by the data pass (sched.h park_mismatch: their body
 * failed its sidecar): the sidecars that gave their digests are asked
 * for again, conditionally (one rewritten upstream after this run
 * fetched it comes again), then
 * the files, once, against the digests the sidecars say now (or, when a
 * sidecar could not be fetched again, as before): the same body again
 * ends the file (a mismatch record), another one is retried as usual.
 * *sums is replaced by the new digests.
 */
static int
run_parked(struct run *r, struct sched_opts *so, struct sidecar_set **sums)
{
	struct plan	*sp;
	struct sidecar_sum sum;
	struct sidecar_set *ns = NULL;
	int64_t		 failed = r->res->failed;
	size_t		 i, j;
	int		 k, rc = BM_ENOMEM;

	if ((sp = calloc(1, sizeof(*sp))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < r->p->nacts; i++) {
		if (!r->p->acts[i].parked ||
		    !sidecar_set_find(*sums, r->p->acts[i].path, &sum))
			continue;
		for (k = 0; k < DIGEST__N; k++) {
			if (!sum.has[k])
				continue;
			for (j = 0; j < sp->nacts; j++)
				if (strcmp(sp->acts[j].path, sum.from[k]) == 0)
					break;
			if (j == sp->nacts && (rc = manifest_ls(r->m,
			    sum.from[k], parked_sidecar, sp)) != 0)
				goto out;
		}
	}
	so->pass = SCHED_PASS_ALL;
	so->sums = NULL;
	so->park_mismatch = false;
	if ((rc = sched_run(so, r->x, r->s, r->m, sp->acts, sp->nacts,
	    r->res)) != 0)
		goto out;
	if (r->res->failed == failed) {
		if ((rc = run_load_sums(r, false, &ns)) != 0)
			goto out;
		sidecar_set_free(*sums);
		*sums = ns;
	}
	so->pass = SCHED_PASS_PARKED;
	so->sums = *sums;
	so->retries = r->c->retries - 1;	/* one try was made */
	rc = sched_run(so, r->x, r->s, r->m, r->p->acts, r->p->nacts, r->res);
	so->retries = r->c->retries;
	for (i = 0; i < r->p->nacts; i++)
		r->p->acts[i].parked = false;	/* tried again */
out:
	plan_free(sp);
	return rc;
}

/*
 * Parked files that the run did not try again (it stopped, or failed):
 * each is a failure of the run.
 */
static int
run_fail_parked(struct run *r)
{
	struct commit_rec rec;
	struct action	*a;
	char		 why[200];
	size_t		 i;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (!a->parked)
			continue;
		a->parked = false;
		(void)snprintf(why, sizeof(why), "checksum mismatch: got %.75s; "
		    "not tried again (the run stopped)",
		    action_got(a) ? action_got(a) : "?");
		(void)result_add_error(r->res, a->path, "fetch", why);
		r->res->failed++;
		commit_rec_path(&rec, a->path, ENTRY_FILE, COMMIT_FAILED);
		rec.reason = why;
		if (commit_results(r->m, r->run, &rec, 1) != 0)
			return BM_EDB;
	}
	return 0;
}

/*
 * The fetches: in one pass with verify = size; else sidecar files first,
 * then the files whose published digests changed re-checked
 * (run_recheck), then the data checked against what the sidecars say
 * (and, with verify = checksum, every fetched file's SHA-256 recorded);
 * a file whose body fails them gets one more try after its sidecar is
 * fetched again (run_parked).
 */
static int
run_transfers(struct run *r, struct sched_opts *so)
{
	struct sidecar_set *old = NULL, *sums = NULL;
	size_t		 i;
	int		 rc, frc;
	bool		 parked = false;

	if (r->c->verify == VERIFY_SIZE)
		return sched_run(so, r->x, r->s, r->m, r->p->acts, r->p->nacts,
		    r->res);
	/* The sidecars as they are before this run fetches them. */
	if (run_fetches_sidecar(r) && (rc = run_load_sums(r, true,
	    &old)) != 0)
		return rc;
	so->pass = SCHED_PASS_SIDECARS;
	so->sidecar_gone_warns = !r->c->verify_set;
	so->record_digest = r->c->verify == VERIFY_CHECKSUM;
	if ((rc = sched_run(so, r->x, r->s, r->m, r->p->acts, r->p->nacts,
	    r->res)) != 0)
		goto out;
	if ((rc = run_load_sums(r, false, &sums)) != 0 ||
	    (rc = run_recheck(r, old, sums)) != 0)
		goto out;
	so->pass = SCHED_PASS_DATA;
	so->sums = sums;
	so->park_mismatch = r->c->retries > 0;
	rc = sched_run(so, r->x, r->s, r->m, r->p->acts, r->p->nacts, r->res);
	for (i = 0; i < r->p->nacts && !parked; i++)
		parked = r->p->acts[i].parked;
	if (rc == 0 && parked && !*r->o->stop)
		rc = run_parked(r, so, &sums);
out:
	if ((frc = run_fail_parked(r)) != 0 && rc == 0)
		rc = frc;
	so->sums = NULL;
	sidecar_set_free(old);
	sidecar_set_free(sums);
	return rc;
}

/*
 * Temp files of earlier runs: those whose ranges are recorded and whose
 * file is fetched again unchanged are kept to be continued (*ret), all
 * others are removed.
 */
static int
run_resume_prepare(struct run *r, struct resume_set **ret)
{
	size_t		 kept = 0, ntemps = 0;
	int		 rc;

	if ((rc = resume_prepare(r->m, r->s, r->p->acts, r->p->nacts, ret,
	    &kept, &ntemps)) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    rc == BM_ENOMEM ? bm_strerror(rc) : manifest_errmsg(r->m));
		return rc == BM_ENOMEM ? rc : BM_EDB;
	}
	if (ntemps > 0)
		log_info("%s: removed %zu temp files of an earlier run",
		    r->c->name, ntemps);
	if (kept > 0)
		log_info("%s: %zu partly fetched files of an earlier run to "
		    "continue", r->c->name, kept);
	return 0;
}

/*
 * concurrency = auto or streams = auto: a tuner for the run's transfers
 * (*ret, NULL when both are fixed).  Returns 0 or BM_ENOMEM.
 */
static int
run_tune_new(struct run *r, struct tune **ret)
{
	struct tune_opts to;

	*ret = NULL;
	if (!r->c->concurrency_auto && !r->c->streams_auto)
		return 0;
	memset(&to, 0, sizeof(to));
	to.name = r->c->name;
	to.conc_auto = r->c->concurrency_auto;
	to.streams_auto = r->c->streams_auto;
	to.concurrency = r->c->concurrency;
	to.streams = r->c->streams;
	to.max_connections = run_connections(r); /* the transport's budget */
	to.min_split = r->c->min_split;
	return tune_new(&to, ret);
}

/* The transfers ended: log and report what the tuner chose, free it. */
static void
run_tune_end(struct run *r, struct tune *t)
{
	struct tune_result tr;

	if (t == NULL)
		return;
	tune_finish(t);
	tune_result(t, &tr);
	r->res->tuned = true;
	r->res->tuned_concurrency = tr.concurrency;
	r->res->tuned_streams = tr.streams;
	r->res->tuned_rtt_ms = tr.rtt_us < 0 ? -1 : tr.rtt_us / 1000.0;
	r->res->tuned_conn_rate = tr.conn_rate;
	tune_free(t);
}

/*
 * The run's progress line: the files and bytes the whole plan fetches,
 * one total over the scheduler's passes.  NULL on out-of-memory.
 */
static struct progress *
run_progress_new(const struct run *r)
{
	const struct action *a;
	uint64_t	 bytes = 0;
	int64_t		 files = 0;
	size_t		 i;

	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (a->op != ACT_FETCH && a->op != ACT_COND_FETCH)
			continue;
		files++;
		if (a->op == ACT_FETCH && a->fs.listed.size > 0)
			bytes += (uint64_t)a->fs.listed.size;
	}
	return progress_new(r->c->name, files, bytes, r->o->progress);
}

static int
run_execute(struct run *r)
{
	struct sched_opts so;
	struct resume_set *rs = NULL;
	int		 rc;

	if ((rc = run_resume_prepare(r, &rs)) != 0)
		return rc;
	if ((rc = run_conflicts(r)) != 0 ||
	    (rc = run_deletes(r, PHASE_CLEAR)) != 0 ||
	    (rc = run_mkdirs(r)) != 0 || (rc = run_adopts(r)) != 0 ||
	    (rc = run_symlinks(r)) != 0) {
		resume_set_free(rs);
		return rc;
	}
	memset(&so, 0, sizeof(so));
	so.source_url = r->c->source;
	so.name = r->c->name;
	so.concurrency = r->c->concurrency;
	/*
	 * MODE E: whole files, the streams are the engine's (Parallelism).
	 * bm://: whole files too; the transport spreads a file's ranges over
	 * its data connections, or asks for it whole when the listing states
	 * its digest (sent by sendfile, hashed once here).
	 */
	so.streams = r->c->ftp_mode_e || strncasecmp(r->c->source, "bm://",
	    5) == 0 ? 1 : r->c->streams;
	so.min_split = r->c->min_split;
	so.progress = r->o->progress;
	if ((so.line = run_progress_new(r)) == NULL) {
		resume_set_free(rs);
		return BM_ENOMEM;
	}
	so.retries = r->c->retries;
	so.run = r->run;
	so.batch_files = batch_files();
	so.batch_bytes = 256ULL * 1024 * 1024;
	so.batch_ms = 5000;
	so.stop = r->o->stop;
	so.unchecked = run_unchecked;
	so.unchecked_ctx = r;
	if (r->zs.mdtm_local) {
		so.fix_mtime = run_fix_mtime;
		so.fix_mtime_ctx = r;
	}
	so.resume = rs;
	if ((rc = run_tune_new(r, &so.tune)) == 0) {
		rc = run_transfers(r, &so);
		run_tune_end(r, so.tune);
	}
	progress_free(so.line);
	resume_set_free(rs);
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

/* The name of the signal a stop flag holds (main.c stores its number). */
static const char *
stop_signal_name(int sig)
{
	switch (sig) {
	case SIGTERM:
		return "SIGTERM";
	case SIGINT:
		return "SIGINT";
	case SIGHUP:
		return "SIGHUP";
	default:
		return "a signal";
	}
}

/*
 * The status word and exit code from how the run went (README "Exit
 * status"): a run stopped by a signal is "interrupted", exit 1, with the
 * signal named in r->err (the run record's error and a reported error).
 */
static void
run_status(struct run *r, int rc)
{
	struct mirror_result *res = r->res;

	if (rc == BM_ELIMIT) {
		res->status = "refused";
		res->exit_code = 4;
	} else if (rc == BM_ELOCKED) {
		res->status = "locked";
		res->exit_code = 75;
	} else if (rc == BM_EDB || rc == BM_EINVAL || rc == BM_ECORRUPT) {
		res->status = "failed";
		res->exit_code = 2;
	} else if (rc == BM_EINTR) {
		/* What was committed stays; the reason goes in the record. */
		res->status = "interrupted";
		res->exit_code = 1;
		if (r->err[0] == '\0')
			(void)snprintf(r->err, sizeof(r->err), "stopped by %s",
			    stop_signal_name(*r->o->stop));
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

/* The transports that carried files (res) into rec->nets. */
static void
run_record_nets(const struct mirror_result *res, struct run_record *rec)
{
	const struct report_net_use *u;
	struct run_net	*n;
	unsigned	 i;

	for (i = 0; i < REPORT_NETS && rec->nnets < RUN_NETS_MAX; i++) {
		u = &res->nets[i];
		if (u->files == 0)
			continue;
		n = &rec->nets[rec->nnets++];
		(void)snprintf(n->net, sizeof(n->net), "%s", report_net_name(i));
		n->files = u->files;
		n->bytes = (int64_t)u->bytes;
		n->ns = (int64_t)(u->seconds * 1e9);
	}
}

/* Record the run's end (and fill *recp for run_after()). */
static void
run_record(struct run *r, int64_t start, struct run_record *recp)
{
	struct run_record rec;

	memset(recp, 0, sizeof(*recp));
	recp->start_ns = start;
	recp->end_ns = clock_real_ns();
	if (r->m == NULL || r->run == 0)
		return;
	memset(&rec, 0, sizeof(rec));
	rec.id = r->run;
	rec.start_ns = start;
	rec.end_ns = recp->end_ns;
	(void)snprintf(rec.status, sizeof(rec.status), "%s", r->res->status);
	rec.listed = r->res->listed;
	rec.fetched = r->res->fetched;
	rec.touched = r->res->touched;
	rec.deleted = r->res->deleted;
	rec.failed = r->res->failed;
	rec.bytes = (int64_t)r->res->bytes;
	(void)snprintf(rec.error, sizeof(rec.error), "%s", r->err);
	/* The whole reason: a mismatch's names both digests. */
	if (rec.error[0] == '\0' && r->res->nerrors > 0)
		(void)snprintf(rec.error, sizeof(rec.error), "%s: %s: %s",
		    r->res->errors[0].path, r->res->errors[0].op,
		    r->res->errors[0].reason);
	run_record_nets(r->res, &rec);
	if (manifest_run_end(r->m, &rec) != 0)
		log_warnx("%s: manifest: run end: %s", r->c->name,
		    manifest_errmsg(r->m));
	*recp = rec;
}

/* Format "NAME=VALUE" into a malloc'd string (NULL on ENOMEM). */
static char *
env_pair(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static char *
env_pair(const char *name, const char *fmt, ...)
{
	va_list	 ap;
	char	*v = NULL, *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&v, fmt, ap) == -1)
		v = NULL;
	va_end(ap);
	if (v != NULL && asprintf(&s, "%s=%s", name, v) == -1)
		s = NULL;
	free(v);
	return s;
}

#define HOOK_NENV	14

/*
 * The hook's BIOMIRROR_* variables (biomirror.conf(5)) into env (room for
 * HOOK_NENV + 1, zeroed), BIOMIRROR_STATUS status; returns how many were
 * set, NULL ones included (out of memory).
 */
static size_t
post_sync_env(const struct run *r, const struct run_record *rec,
    const char *status, char **env)
{
	const struct mirror_result *res = r->res;
	char		 cwd[PATH_MAX];
	size_t		 n = 0;

	/* Both paths absolute: pre_publish runs in the staged snapshot. */
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		cwd[0] = '\0';
	env[n++] = env_pair("BIOMIRROR_MIRROR", "%s", r->o->label != NULL ?
	    r->o->label : r->c->name);
	env[n++] = env_pair("BIOMIRROR_SOURCE", "%s", r->c->source);
	env[n++] = env_pair("BIOMIRROR_DEST", "%s%s%s", r->c->dest[0] == '/' ?
	    "" : cwd, r->c->dest[0] != '/' && cwd[0] ? "/" : "", r->c->dest);
	env[n++] = env_pair("BIOMIRROR_STATE_DIR", "%s%s%s",
	    r->o->state_dir[0] == '/' ? "" : cwd, r->o->state_dir[0] != '/' &&
	    cwd[0] ? "/" : "", r->o->state_dir);
	env[n++] = env_pair("BIOMIRROR_RUN_ID", "%lld", (long long)r->run);
	env[n++] = env_pair("BIOMIRROR_STATUS", "%s", status);
	env[n++] = env_pair("BIOMIRROR_FILES_LISTED", "%lld",
	    (long long)res->listed);
	env[n++] = env_pair("BIOMIRROR_FILES_FETCHED", "%lld",
	    (long long)res->fetched);
	env[n++] = env_pair("BIOMIRROR_FILES_TOUCHED", "%lld",
	    (long long)res->touched);
	env[n++] = env_pair("BIOMIRROR_FILES_DELETED", "%lld",
	    (long long)res->deleted);
	env[n++] = env_pair("BIOMIRROR_BYTES_FETCHED", "%llu",
	    (unsigned long long)res->bytes);
	env[n++] = env_pair("BIOMIRROR_SECONDS", "%.3f", res->seconds);
	env[n++] = env_pair("BIOMIRROR_START", "%lld",
	    (long long)(rec->start_ns / NS));
	env[n++] = env_pair("BIOMIRROR_END", "%lld",
	    (long long)(rec->end_ns / NS));
	return n;
}

/* What pre_publish's check changed in the staged snapshot. */
struct pre_check {
	struct run	*r;		/* borrowed */
	struct commit_rec *recs;	/* owned: a release per removed file */
	char		**paths;	/* owned: their paths */
	size_t		 nrecs, cap;
	size_t		 created, restored, removed;
	int		 rc;		/* BM_ENOMEM while queueing, else 0 */
};

#define PRE_REFETCH	"pre_publish changed it: removed from the staged " \
			"snapshot, fetched again by the next run"

/* store_check_fn: say each path in the log; queue the removed ones. */
static void
pre_publish_seen(void *ctx, const char *path, enum store_check what)
{
	struct pre_check *pc = ctx;
	struct commit_rec *nr;
	char		**np, *p;
	size_t		 cap;

	if (what == STORE_CHECK_CREATED) {
		pc->created++;
		log_warnx("%s: pre_publish: %s: made by the check: removed",
		    pc->r->c->name, path);
		return;
	}
	if (what == STORE_CHECK_RESTORED) {
		pc->restored++;
		log_warnx("%s: pre_publish: %s: changed by the check: restored "
		    "from the published copy", pc->r->c->name, path);
		return;
	}
	if (what == STORE_CHECK_DIR) {
		log_warnx("%s: pre_publish: %s: directory removed or replaced "
		    "by the check: made again", pc->r->c->name, path);
		return;
	}
	pc->removed++;
	if (what == STORE_CHECK_INPLACE)
		log_warnx("%s: pre_publish: %s: changed in place by the check: "
		    "%s; the published snapshot shares the file and serves "
		    "the changed one until then", pc->r->c->name, path,
		    PRE_REFETCH);
	else
		log_warnx("%s: pre_publish: %s: changed by the check (no "
		    "unchanged published copy): %s", pc->r->c->name, path,
		    PRE_REFETCH);
	(void)result_add_error(pc->r->res, path, "pre_publish", PRE_REFETCH);
	if (pc->nrecs == pc->cap) {
		cap = pc->cap ? pc->cap * 2 : 16;
		if ((nr = reallocarray(pc->recs, cap, sizeof(*nr))) == NULL) {
			pc->rc = BM_ENOMEM;
			return;
		}
		pc->recs = nr;
		if ((np = reallocarray(pc->paths, cap, sizeof(*np))) == NULL) {
			pc->rc = BM_ENOMEM;
			return;
		}
		pc->paths = np;
		pc->cap = cap;
	}
	if ((p = strdup(path)) == NULL) {
		pc->rc = BM_ENOMEM;
		return;
	}
	pc->paths[pc->nrecs] = p;
	commit_rec_path(&pc->recs[pc->nrecs], p, ENTRY_FILE, COMMIT_RELEASED);
	pc->recs[pc->nrecs].reason = PRE_REFETCH;
	pc->nrecs++;
}

/*
 * pre_publish: run the check in the staged snapshot (its directory,
 * BIOMIRROR_SNAPSHOT; post_sync's variables, time limit and logging),
 * then undo what it changed there (store_set_check).  Returns 0 when it
 * exited 0 and changed no staged file: the snapshot may be published.
 * Else the reason is in r->err and BM_EIO (the run fails, exit 1; the
 * snapshot stays unpublished, for the next run to continue), BM_EINTR
 * (stopped by a signal) or BM_ENOMEM.
 */
static int
run_pre_publish(struct run *r)
{
	struct pre_check pc;
	struct store_scan *before = NULL;
	struct run_record rec;
	char		*env[HOOK_NENV + 2], dir[PATH_MAX], cwd[PATH_MAX];
	char		 why[300], tag[160];
	size_t		 i, n = 0;
	int		 rc, crc, st = -1;

	if (r->c->pre_publish == NULL)
		return 0;
	memset(&pc, 0, sizeof(pc));
	pc.r = r;
	memset(env, 0, sizeof(env));
	memset(&rec, 0, sizeof(rec));
	rec.start_ns = r->start_ns;
	rec.end_ns = clock_real_ns();
	rc = BM_EIO;
	if (store_set_working_path(r->s, dir, sizeof(dir)) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "pre_publish: the "
		    "staged snapshot's path is too long");
		goto out;
	}
	if ((crc = store_set_stage_scan(r->s, &before)) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "pre_publish: %.600s: "
		    "scan: %s", dir, crc == BM_EIO ? strerror(errno) :
		    bm_strerror(crc));
		rc = crc == BM_ENOMEM ? crc : BM_EIO;
		goto out;
	}
	if (dir[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL)
		cwd[0] = '\0';
	n = post_sync_env(r, &rec, "ok", env);
	env[n++] = env_pair("BIOMIRROR_SNAPSHOT", "%s%s%s", cwd,
	    cwd[0] ? "/" : "", dir);
	for (i = 0; i < n; i++)
		if (env[i] == NULL) {
			rc = BM_ENOMEM;
			goto out;
		}
	log_info("%s: pre_publish: %s (in %s)", r->c->name, r->c->pre_publish,
	    dir);
	(void)snprintf(tag, sizeof(tag), "%s: pre_publish", r->c->name);
	rc = hook_run_log(tag, r->c->pre_publish, dir, env, r->o->stop,
	    r->c->hook_timeout, &st, why, sizeof(why));
	/* Whatever it did, the staged snapshot is put back as it was. */
	if ((crc = store_set_check(r->s, before, pre_publish_seen, &pc)) != 0 ||
	    pc.rc != 0) {
		if (crc == 0)
			crc = pc.rc;
		(void)snprintf(r->err, sizeof(r->err), "pre_publish: %.600s: "
		    "undoing the check's changes: %s", dir, crc == BM_EIO ?
		    strerror(errno) : bm_strerror(crc));
		rc = crc == BM_ENOMEM ? crc : BM_EIO;
		goto out;
	}
	if (pc.nrecs > 0 && commit_results(r->m, r->run, pc.recs,
	    pc.nrecs) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
		rc = BM_EDB;
		goto out;
	}
	if (pc.created > 0)
		log_warnx("%s: pre_publish: removed %zu entr%s the check made "
		    "in the staged snapshot", r->c->name, pc.created,
		    pc.created == 1 ? "y" : "ies");
	if (rc == BM_EINTR) {
		(void)snprintf(r->err, sizeof(r->err), "pre_publish: stopped "
		    "by %s: %.200s: snapshot not published",
		    stop_signal_name(*r->o->stop), why);
		goto out;
	}
	if (rc != 0) {
		/* Timed out (BM_ELIMIT) or could not run: a failed check. */
		(void)snprintf(r->err, sizeof(r->err), "pre_publish: %.200s: "
		    "snapshot not published", why);
		rc = BM_EIO;
		goto out;
	}
	if (st != 0) {
		(void)snprintf(r->err, sizeof(r->err), "pre_publish: %s %d: "
		    "snapshot not published", st > 128 ? "killed by signal" :
		    "exited with status", st > 128 ? st - 128 : st);
		rc = BM_EIO;
		goto out;
	}
	if (pc.restored + pc.removed > 0) {
		(void)snprintf(r->err, sizeof(r->err), "pre_publish: the check "
		    "changed %zu staged file%s (restored %zu from the published "
		    "snapshot, removed %zu: fetched again by the next run): "
		    "snapshot not published", pc.restored + pc.removed,
		    pc.restored + pc.removed == 1 ? "" : "s", pc.restored,
		    pc.removed);
		rc = BM_EIO;
		goto out;
	}
	log_info("%s: pre_publish: exited with status 0", r->c->name);
	rc = 0;
out:
	for (i = 0; i < n; i++)
		free(env[i]);
	for (i = 0; i < pc.nrecs; i++)
		free(pc.paths[i]);
	free(pc.paths);
	free(pc.recs);
	store_scan_free(before);
	return rc;
}

/*
 * post_sync: after a run that ended "ok" and changed something (files
 * fetched, touched or deleted), run the hook with the run's figures in
 * BIOMIRROR_* variables (biomirror.conf(5)), before the run lock is
 * released.  A failing, stopped or timed-out hook and the exit status:
 * docs/internals.md, "When post_sync runs".
 */
static void
run_post_sync(struct run *r, struct run_record *rec)
{
	char		*env[HOOK_NENV + 1], why[300], sent[160];
	const struct mirror_result *res = r->res;
	size_t		 i, n = 0;
	int		 st = -1, rc;

	if (r->c->post_sync == NULL || r->o->dry_run ||
	    strcmp(res->status, "ok") != 0 || res->exit_code != 0 ||
	    res->fetched + res->touched + res->deleted == 0)
		return;
	memset(env, 0, sizeof(env));
	n = post_sync_env(r, rec, res->status, env);
	for (i = 0; i < n; i++)
		if (env[i] == NULL) {
			log_errx("%s: post_sync: out of memory", r->c->name);
			goto out;
		}
	if (*r->o->stop) {
		/* Asked to stop before it began: not started at all. */
		rc = BM_EINTR;
		(void)snprintf(why, sizeof(why), "not run: stopped by %s",
		    stop_signal_name(*r->o->stop));
		log_errx("%s: post_sync: %s", r->c->name, why);
	} else {
		log_info("%s: post_sync: %s", r->c->name, r->c->post_sync);
		(void)snprintf(sent, sizeof(sent), "%s: post_sync",
		    r->c->name);
		rc = hook_run_log(sent, r->c->post_sync, NULL, env, r->o->stop,
		    r->c->hook_timeout, &st, why, sizeof(why));
	}
	r->res->post_sync_status = st;
	if ((rc == BM_EINTR || rc == BM_ELIMIT) && st >= 0) {
		/*
		 * Stopped or timed out: why, what was done (hook_run_log()),
		 * then how it ended.
		 */
		if (rc == BM_EINTR)
			(void)snprintf(sent, sizeof(sent), "stopped by %s: "
			    "%.99s", stop_signal_name(*r->o->stop), why);
		else
			(void)snprintf(sent, sizeof(sent), "%.99s", why);
		(void)snprintf(why, sizeof(why), "%s; it %s %d", sent,
		    st > 128 ? "was killed by signal" : "exited with status",
		    st > 128 ? st - 128 : st);
		log_errx("%s: post_sync: %s", r->c->name, why);
	} else if (rc != 0 && rc != BM_EINTR) {
		r->res->post_sync_status = 127;
		log_errx("%s: post_sync: %s", r->c->name, why);
	} else if (rc == 0 && st != 0) {
		(void)snprintf(why, sizeof(why), st > 128 ? "killed by signal "
		    "%d" : "exited with status %d", st > 128 ? st - 128 : st);
		log_errx("%s: post_sync: %s", r->c->name, why);
	} else if (rc == 0) {
		log_info("%s: post_sync: exited with status 0", r->c->name);
		goto out;
	}
	/*
	 * Stopped by a signal (before or while it ran): the mirror is
	 * complete (the run stays "ok"), but the agent was interrupted: exit
	 * 1 (README "Exit status").
	 */
	if (rc == BM_EINTR || *r->o->stop)
		r->res->exit_code = 1;	/* also a stop during a timeout's grace */
	(void)result_add_error(r->res, "", "post_sync", why);
	if (r->m != NULL && rec->id != 0) {
		(void)snprintf(rec->error, sizeof(rec->error), "post_sync: "
		    "%.200s", why);
		if (manifest_run_end(r->m, rec) != 0)
			log_warnx("%s: manifest: run end: %s", r->c->name,
			    manifest_errmsg(r->m));
	}
out:
	for (i = 0; i < n; i++)
		free(env[i]);
}

/*
 * metrics_file: this run's gauges, after every run that was not a plan.
 * Samples of mirrors no longer in the config are dropped from the file.
 */
static void
run_metrics(struct run *r, const struct run_record *rec)
{
	struct metrics_run mr;
	struct run_record ok;
	const struct config *conf = r->o->conf;
	const char	**names = NULL;
	char		 why[PATH_MAX + 128];
	size_t		 i;
	int		 rc;

	if (r->c->metrics_file == NULL || r->o->dry_run)
		return;
	memset(&mr, 0, sizeof(mr));
	if (conf != NULL && conf->nmirrors > 0 &&
	    (names = calloc(conf->nmirrors, sizeof(*names))) != NULL) {
		for (i = 0; i < conf->nmirrors; i++)
			names[i] = conf->mirrors[i]->name;
		mr.mirrors = names;
		mr.nmirrors = conf->nmirrors;
	}	/* else (no config, ENOMEM): keep every mirror's samples */
	mr.mirror = r->c->name;
	mr.end_ns = rec->end_ns;
	mr.seconds = r->res->seconds;
	mr.ok = strcmp(r->res->status, "ok") == 0;
	mr.exit_code = r->res->exit_code;
	mr.listed = r->res->listed;
	mr.fetched = r->res->fetched;
	mr.touched = r->res->touched;
	mr.deleted = r->res->deleted;
	mr.failed = r->res->failed;
	mr.bytes = r->res->bytes;
	mr.last_success_ns = -1;	/* unknown: keep the file's value */
	if (r->m != NULL) {
		if ((rc = manifest_last_success(r->m, &ok)) == 0)
			mr.last_success_ns = ok.end_ns;
		else if (rc == BM_ENOENT)
			mr.last_success_ns = 0;
	}
	if ((rc = metrics_write(r->c->metrics_file, &mr, why,
	    sizeof(why))) != 0)
		log_errx("%s: metrics_file: %s", r->c->name, rc == BM_ENOMEM ?
		    bm_strerror(rc) : why);
	free(names);
}

/*
 * Hash the local file path and compare it with checksum (its recorded
 * "ALG:HEX", may be NULL) and the published digests in r->sums.  Returns
 * NULL when it matches or there is nothing to compare with, else why it
 * differs (static text).  *ret_compared (may be NULL) is set to whether
 * any digest was there to compare with.  When ret_sha (DIGEST_TEXT_MAX
 * bytes, may be NULL) is given, the file's "sha256:HEX" is written there
 * on a match (hashed even with nothing to compare), else "".
 */
static const char *
run_local_differs(struct run *r, const char *path, const char *checksum,
    bool *ret_compared, char *ret_sha)
{
	struct sidecar_sum sum;
	struct digest_value rec, v;
	struct digest	*d = NULL;
	unsigned	 algs = 0;
	bool		 have_rec;
	const char	*why = "cannot be read";
	int		 i, fd = -1;

	memset(&sum, 0, sizeof(sum));
	if (ret_sha != NULL)
		ret_sha[0] = '\0';
	have_rec = checksum != NULL && digest_from_text(checksum, &rec) == 0;
	if (r->sums != NULL)
		(void)sidecar_set_find(r->sums, path, &sum);
	if (have_rec)
		algs |= DIGEST_BIT(rec.alg);
	for (i = 0; i < DIGEST__N; i++)
		if (sum.has[i])
			algs |= DIGEST_BIT(i);
	if (ret_compared != NULL)
		*ret_compared = algs != 0;
	for (i = 0; i < DIGEST__N; i++)
		if (sum.conflict[i])
			return "has conflicting digests in its sidecar";
	if (ret_sha != NULL)
		algs |= DIGEST_BIT(DIGEST_SHA256);
	if (algs == 0)
		return NULL;	/* nothing to compare with: size and mtime it is */
	if (digest_new(algs, &d) != 0 ||
	    store_open_read(r->s, path, &fd, NULL) != 0 ||
	    digest_fd(d, fd, 0, UINT64_MAX, NULL) != 0)
		goto out;
	why = "differs from its recorded checksum";
	if (have_rec && (digest_final(d, rec.alg, &v) != 0 ||
	    !digest_equal(&v, &rec)))
		goto out;
	why = "differs from its sidecar checksum";
	for (i = 0; i < DIGEST__N; i++)
		if (sum.has[i] && (digest_final(d, (enum digest_alg)i,
		    &v) != 0 || !digest_equal(&v, &sum.v[i])))
			goto out;
	why = "cannot be hashed";
	if (ret_sha != NULL && (digest_final(d, DIGEST_SHA256, &v) != 0 ||
	    digest_to_text(&v, ret_sha, DIGEST_TEXT_MAX) != 0))
		goto out;
	why = NULL;
out:
	if (fd != -1)
		(void)close(fd);
	digest_free(d);
	return why;
}

/*
 * resync --checksum with verify = checksum: true when row is a committed
 * file without a recorded digest whose listing is unchanged (DIFF_SAME)
 * and whose local file still has the committed size and mtime, so that
 * its SHA-256, once hashed (and compared with its sidecar's digests, if
 * any), is recorded for it.  Not in a dry run.
 */
static bool
run_wants_digest(struct run *r, const struct diff_row *row)
{
	struct local_stat st;

	return r->c->verify == VERIFY_CHECKSUM && !r->o->dry_run &&
	    row->kind == DIFF_SAME && row->recorded &&
	    row->type == ENTRY_FILE && row->checksum == NULL &&
	    store_stat(r->s, row->path, &st) == 0 && st.type == 'f' &&
	    st.size == row->fs.local.size && st.mtime == row->fs.local.mtime;
}

/* Queue path's digest sha ("sha256:HEX") for run_record_digests(). */
static int
run_queue_digest(struct run *r, const char *path, const char *sha)
{
	struct run_digest *v = r->digests;
	size_t		 cap;

	if (r->ndigests == r->digests_cap) {
		cap = r->digests_cap ? 2 * r->digests_cap : 64;
		if ((v = reallocarray(r->digests, cap, sizeof(*v))) == NULL)
			return BM_ENOMEM;
		r->digests = v;
		r->digests_cap = cap;
	}
	if ((v[r->ndigests].path = strdup(path)) == NULL)
		return BM_ENOMEM;
	(void)snprintf(v[r->ndigests].sum, sizeof(v->sum), "%s", sha);
	r->ndigests++;
	return 0;
}

static void
run_digests_free(struct run *r)
{
	size_t	 i;

	for (i = 0; i < r->ndigests; i++)
		free(r->digests[i].path);
	free(r->digests);
	r->digests = NULL;
	r->ndigests = 0;
	r->digests_cap = 0;
}

/*
 * plan_check_fn of resync --checksum: true (fetch it again) when the
 * local file of row differs from its recorded or published digest.  A
 * file that matches and has no recorded digest while it should
 * (run_wants_digest()) gets its SHA-256 queued for recording; one that
 * differs from its sidecar is fetched again instead, so a corrupt copy's
 * digest is never recorded.
 */
static bool
run_check_local(void *ctx, const struct diff_row *row)
{
	struct run	*r = ctx;
	char		 sha[DIGEST_TEXT_MAX];
	const char	*why;
	bool		 want = run_wants_digest(r, row);
	int		 rc;

	if ((why = run_local_differs(r, row->path, row->checksum, NULL,
	    want ? sha : NULL)) == NULL) {
		/*
		 * Still the committed size and mtime once hashed: a file
		 * written meanwhile may have given other bytes to the hash.
		 */
		if (want && run_wants_digest(r, row) && (rc =
		    run_queue_digest(r, row->path, sha)) != 0 &&
		    r->digests_rc == 0)
			r->digests_rc = rc;
		return false;
	}
	log_warnx("%s: local content %s: fetching it again", row->path, why);
	return true;
}

/*
 * Record the digests resync --checksum queued (one transaction): files
 * committed before verify = checksum was set, or adopted without it.
 */
static int
run_record_digests(struct run *r)
{
	struct commit_rec *recs;
	size_t		 i;
	int		 rc = 0;

	if (r->ndigests == 0)
		return 0;
	if ((recs = calloc(r->ndigests, sizeof(*recs))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < r->ndigests; i++) {
		commit_rec_path(&recs[i], r->digests[i].path, ENTRY_FILE,
		    COMMIT_DIGEST);
		recs[i].checksum = r->digests[i].sum;
	}
	if (commit_results(r->m, r->run, recs, r->ndigests) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
		rc = BM_EDB;
		goto out;
	}
	r->res->digest_recorded = (int64_t)r->ndigests;
	log_info("%s: recorded the SHA-256 of %zu files that had no recorded "
	    "digest", r->c->name, r->ndigests);
	run_digests_free(r);
out:
	free(recs);
	return rc;
}

/* The intents (manifest_intent) of a killed run that were carried out. */
struct intents {
	struct run	*r;
	struct commit_rec *v;		/* owned; paths borrowed from paths */
	char		**paths;	/* owned: v[i].path */
	size_t		 n, cap;
	size_t		 rows;		/* intents found, renamed or not */
};

static int
intent_seen(void *ctx, const struct commit_rec *c)
{
	struct intents	*in = ctx;
	struct local_stat st;
	struct commit_rec *nv;
	char		**np;
	size_t		 cap;

	in->rows++;
	if (store_stat(in->r->s, c->path, &st) != 0 || st.type != 'f' ||
	    st.size != c->fs.local.size || st.mtime != c->fs.local.mtime)
		return 0;	/* not renamed: its temp file is a left-over */
	if (in->n == in->cap) {
		cap = in->cap ? 2 * in->cap : 64;
		if ((nv = reallocarray(in->v, cap, sizeof(*nv))) == NULL)
			return BM_ENOMEM;
		in->v = nv;
		if ((np = reallocarray(in->paths, cap, sizeof(*np))) == NULL)
			return BM_ENOMEM;
		in->paths = np;
		in->cap = cap;
	}
	in->v[in->n] = *c;
	if ((in->paths[in->n] = strdup(c->path)) == NULL)
		return BM_ENOMEM;
	in->v[in->n].path = in->paths[in->n];
	in->v[in->n++].reason = "published by an earlier run that was "
	    "stopped before it recorded it";
	return 0;
}

/*
 * A run killed after a batch's renames and before its manifest
 * transaction left intents (manifest_intent): each file that is there
 * with the size and mtime the intent names is biomirror's, and is
 * recorded as adopted, so that the plan replaces or deletes it like any
 * file biomirror committed (not "kept, not the one committed").  The
 * others were never renamed.  Every intent is then dropped (no write when
 * there is none: a run that changes nothing writes only its run record).
 * Returns 0, BM_ENOMEM or BM_EDB (r->err set).
 */
static int
run_intents(struct run *r)
{
	struct intents	 in;
	size_t		 i;
	int		 rc;

	if (r->s == NULL || r->o->dry_run)
		return 0;
	memset(&in, 0, sizeof(in));
	in.r = r;
	rc = manifest_intents(r->m, intent_seen, &in);
	if (rc == 0 && in.n > 0 && (rc = commit_results(r->m, r->run, in.v,
	    in.n)) == 0)
		log_info("%s: %zu files published by an earlier run that was "
		    "stopped before it recorded them: recorded now",
		    r->c->name, in.n);
	if (rc == 0 && in.rows > 0)
		rc = manifest_intents_clear(r->m);
	if (rc == BM_EDB)
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
	for (i = 0; i < in.n; i++)
		free(in.paths[i]);
	free(in.paths);
	free(in.v);
	return rc;
}

/* True when the plan has an action for path (a run with no work: few). */
static bool
run_planned(const struct run *r, const char *path)
{
	size_t	 i;

	for (i = 0; i < r->p->nacts; i++)
		if (strcmp(r->p->acts[i].path, path) == 0)
			return true;
	return false;
}

/* manifest_file_fn: 1 at a row run_recheck() would hash. */
static int
set_unchecked(void *ctx, const struct file_row *row)
{
	return run_planned(ctx, row->path) ? 0 : 1;
}

/* manifest_mismatch_fn: 1 at a mismatch run_recheck() would report. */
static int
set_mismatch(void *ctx, const struct mismatch_rec *m)
{
	return run_planned(ctx, m->path) ? 0 : 1;
}

/*
 * publish = set: *ret is whether the run needs a working snapshot: the
 * plan changes something, an unpublished one is left, or (verify =
 * sidecar | checksum, sidecars listed) run_recheck has work the plan
 * leaves to it: a file committed unchecked to hash, or a known mismatch
 * to report again (exit 1 while it lasts).  0 or BM_EDB (r->err set).
 */
static int
run_set_needed(struct run *r, bool *ret)
{
	int	 rc;

	*ret = plan_has_work(r->p) || store_set_pending(r->s);
	if (*ret || r->c->verify == VERIFY_SIZE || r->nsidecars == 0)
		return 0;
	if ((rc = manifest_ls_unchecked(r->m, set_unchecked, r)) == 0)
		rc = manifest_mismatches(r->m, set_mismatch, r);
	*ret = rc == 1;
	if (rc != 0 && rc != 1) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
		return BM_EDB;
	}
	return 0;
}

static int
path_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * An include-only mirror: drop the mkdir of each directory that no
 * fetch, touch, symlink or adoption of the plan lies under (its includes
 * leave it empty).  Returns 0 or BM_ENOMEM.
 */
static int
plan_drop_empty_dirs(struct plan *p)
{
	const char	**v;
	struct action	*a;
	size_t		 i, j, n = 0, lo, hi, mid, len;
	bool		 used;

	if ((v = calloc(p->nacts + 1, sizeof(*v))) == NULL)
		return BM_ENOMEM;
	for (i = 0; i < p->nacts; i++)
		if (p->acts[i].op == ACT_FETCH ||
		    p->acts[i].op == ACT_COND_FETCH ||
		    p->acts[i].op == ACT_TOUCH || p->acts[i].op == ACT_ADOPT ||
		    p->acts[i].op == ACT_SYMLINK)
			v[n++] = p->acts[i].path;
	qsort(v, n, sizeof(*v), path_cmp);
	for (i = j = 0; i < p->nacts; i++) {
		a = &p->acts[i];
		used = a->op != ACT_MKDIR;
		len = strlen(a->path);
		/* The first path after "DIR/" in order: under DIR if any is. */
		for (lo = 0, hi = n; !used && lo < hi; ) {
			mid = lo + (hi - lo) / 2;
			if (strncmp(v[mid], a->path, len) < 0 ||
			    (strncmp(v[mid], a->path, len) == 0 &&
			    strcmp(v[mid] + len, "/") < 0))
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!used && lo < n && strncmp(v[lo], a->path, len) == 0 &&
		    v[lo][len] == '/')
			used = true;
		if (used) {
			p->acts[j++] = *a;
			continue;
		}
		action_more_free(a);	/* its path stays in the plan's blocks */
		p->nmkdir--;
	}
	p->nacts = j;
	free(v);
	return 0;
}

/* True when paths a and b are in the same directory. */
static bool
same_dir(const char *a, const char *b)
{
	const char	*sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	size_t		 la = sa ? (size_t)(sa - a) : 0;
	size_t		 lb = sb ? (size_t)(sb - b) : 0;

	return la == lb && memcmp(a, b, la) == 0;
}

/*
 * The daylight-saving rule (plan_shifts): for each directory whose
 * changed files all moved by the same whole hours, ask one of them
 * (MDTM, or the first byte's Last-Modified) whether it changed since it
 * was fetched; if not, every one of them is recorded with its new
 * listing (not modified) and not fetched.  0, BM_ENOMEM, BM_EINTR or
 * BM_EDB.
 */
static int
run_shifts(struct run *r)
{
	struct commit_rec *recs = NULL;
	struct action	*a, *b, *ask;
	bool		*seen = NULL;
	int64_t		 up, shift;
	size_t		 i, j, n;
	int		 rc = 0, warned = 0;

	if (r->p->nshifted == 0)
		return 0;
	if ((seen = calloc(r->p->nacts, sizeof(*seen))) == NULL ||
	    (recs = calloc(r->p->nshifted, sizeof(*recs))) == NULL) {
		rc = BM_ENOMEM;
		goto out;
	}
	for (i = 0; i < r->p->nacts; i++) {
		a = &r->p->acts[i];
		if (seen[i] || (shift = action_shift(a)) == 0 ||
		    a->op != ACT_FETCH)
			continue;
		for (ask = NULL, j = i; j < r->p->nacts; j++) {
			b = &r->p->acts[j];
			if (action_shift(b) == shift && b->op == ACT_FETCH &&
			    same_dir(a->path, b->path) && ask == NULL &&
			    action_upstream(b).mtime >= 0)
				ask = b;
		}
		up = -1;
		if (ask != NULL && (rc = zone_ask_mtime(&r->zs, r->x,
		    ask->path, r->o->stop, &up)) != 0)
			goto out;
		for (n = 0, j = i; j < r->p->nacts; j++) {
			b = &r->p->acts[j];
			if (seen[j] || action_shift(b) != shift ||
			    b->op != ACT_FETCH || !same_dir(a->path, b->path))
				continue;
			seen[j] = true;
			/*
			 * Unchanged: the same MDTM as fetched; or, from a
			 * server whose MDTM is local time too, one that
			 * moved with its listing (its zone moved).
			 */
			if (ask == NULL || up < 0 ||
			    (up != action_upstream(ask).mtime / NS &&
			    !(r->zs.mdtm_local && up ==
			    (action_upstream(ask).mtime + shift) / NS)))
				continue;
			commit_rec_action(&recs[n++], b, COMMIT_NOT_MODIFIED);
			plan_keep(r->p, b, "listed time moved, unchanged "
			    "upstream");
		}
		if (n == 0) {
			log_info("%s: %s: listed %+lld h off with the same "
			    "sizes, but changed upstream (%s): fetched",
			    r->c->name, a->path, (long long)(shift / NS / 3600),
			    ask != NULL ? ask->path : "no time to ask");
			continue;
		}
		log_info("%s: %s: %zu file%s of its directory listed %+lld h "
		    "off with the same sizes, unchanged upstream (asked %s): "
		    "a zone shift (daylight saving?), recorded, nothing "
		    "fetched", r->c->name, a->path, n, n == 1 ? "" : "s",
		    (long long)(shift / NS / 3600), ask->path);
		if (up != action_upstream(ask).mtime / NS && !warned++)
			log_warnx("%s: zone: %s's MDTM (local time) moved with "
			    "its listing: its zone is no longer ftp_timezone's "
			    "(new files get mtimes %+lld h off until it is "
			    "set to the server's)", r->c->name, r->zs.host,
			    (long long)(shift / NS / 3600));
		if (!r->o->dry_run &&
		    commit_results(r->m, r->run, recs, n) != 0) {
			(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
			    manifest_errmsg(r->m));
			rc = BM_EDB;
			goto out;
		}
	}
out:
	free(seen);
	free(recs);
	return rc;
}

/* The plan, with resync's options (--checksum, --adopt). */
static int
run_plan(struct run *r)
{
	struct plan_opts po;
	int		 rc;

	memset(&po, 0, sizeof(po));
	po.adopt = r->o->adopt;
	po.keep = r->unlisted;
	if (r->o->checksum && r->s != NULL) {
		/* The sidecars are kept (run_drop_listing). */
		if ((rc = run_load_sums(r, false, &r->sums)) != 0)
			return rc;
		po.check = run_check_local;
		po.check_ctx = r;
	}
	if ((rc = plan_build_opts(r->m, r->s, r->c->delete && r->complete,
	    &r->filter, &po, &r->p)) != 0)
		return rc;
	if (r->c->ninclude > 0 && (rc = plan_drop_empty_dirs(r->p)) != 0)
		return rc;
	return r->digests_rc;
}

/*
 * The manifest's check that ran beside the listing (manifest_open_run):
 * joined before the plan acts on the mirror, and by run_fault() on every
 * way out.  Damaged: the manifest is closed at once (what this run wrote
 * went only to its -wal, removed), and the run ends as one whose open
 * found the damage.  0 or BM_ECORRUPT/BM_EDB with r->err.
 */
static int
run_join_check(struct run *r)
{
	int	 rc;

	if (!r->checking || r->m == NULL)
		return 0;
	r->checking = false;
	if ((rc = manifest_check_join(r->m)) == 0) {
		if (r->owner_due)
			run_record_owner(r);
		return 0;
	}
	(void)snprintf(r->err, sizeof(r->err), "%s", manifest_errmsg(r->m));
	if (manifest_fault(r->m) != 0)
		r->state_fault = manifest_fault(r->m);
	manifest_close(r->m);
	r->m = NULL;
	r->run = 0;
	return rc;
}

static int
run_body(struct run *r)
{
	uint64_t	 avail = UINT64_MAX;
	int		 rc, grc;
	bool		 none, work;

	if ((rc = run_open(r)) != 0)
		return rc;
	if (!r->o->dry_run && (rc = manifest_run_begin(r->m,
	    r->o->command ? r->o->command : "sync",
	    r->start_ns, &r->run)) != 0) {
		(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
		    manifest_errmsg(r->m));
		return BM_EDB;
	}
	if (r->c->publish == PUBLISH_SET && (rc = run_set_open(r)) != 0)
		return rc;
	if ((rc = run_intents(r)) != 0)
		return rc;
	/*
	 * The planner stats every listed file: warm the destination's
	 * inodes while upstream is listed, and stop once the plan is built.
	 */
	if (r->s != NULL)
		(void)store_prefetch_start(r->s);
	rc = run_list(r);
	if ((grc = run_join_check(r)) != 0)
		rc = grc;
	/* Nothing listed (exit 3): nothing is done. */
	none = rc == 0 && !r->complete && r->res->listed == 0;
	if (rc == 0 && !none) {
		/* The listing is staged: free it before the plan is built. */
		if ((rc = run_drop_listing(r)) == 0 &&
		    (rc = run_plan(r)) == BM_EDB)
			(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
			    manifest_errmsg(r->m));
		if (rc == 0)
			rc = run_shifts(r);
	}
	if (r->s != NULL)
		(void)store_prefetch_stop(r->s, false, NULL);
	if (rc != 0 || none)
		return rc;
	/* A missing DEST: the free space of its nearest existing ancestor. */
	(void)plan_free_space(r->c, r->s, &avail);
	/*
	 * An incomplete listing plans no deletes (what it lacks is kept,
	 * and plan_guard counts only planned deletes), so the part that
	 * did list is fetched and the run ends with exit 3; nor is it
	 * judged empty when it listed only directories.
	 */
	if ((grc = plan_guard(r->p, r->c, avail, r->o->allow_empty ||
	    !r->complete, r->err,
	    sizeof(r->err))) != 0)
		log_errx("%s: %s", r->c->name, r->err);
	/*
	 * resync reports what it found before repairing it; a refused
	 * plan still shows what the run would do, then why it may not.
	 */
	if (r->o->plan_out && (r->o->dry_run || (r->o->command &&
	    strcmp(r->o->command, "resync") == 0)))
		print_plan(r, r->o->plan_out, grc != 0 ? r->err : NULL);
	if (r->o->dry_run && (rc = run_plan_result(r)) != 0)
		return rc;
	if (grc != 0 || r->o->dry_run)
		return grc;
	if ((rc = run_record_digests(r)) != 0)
		return rc;
	if (r->c->publish != PUBLISH_SET)
		rc = run_execute(r);
	else if ((rc = run_set_needed(r, &work)) != 0)
		return rc;
	else if (work) {
		/* The working snapshot: links to the published one. */
		if ((rc = store_set_begin(r->s)) != 0)
			(void)snprintf(r->err, sizeof(r->err), "%s: new "
			    "snapshot: %s", r->c->dest, rc == BM_EIO ?
			    strerror(errno) : bm_strerror(rc));
		else
			rc = run_execute(r);
		rc = run_set_finish(r, rc);
	} else {
		/* resync --adopt: the published snapshot holds those files. */
		rc = run_adopts(r);
		log_info("%s: no change: nothing to publish", r->c->name);
	}
	return rc;
}

/* ' ' and the shell's special characters: a word that needs quotes. */
static bool
shell_unsafe(const char *s)
{
	return s[0] == '\0' || s[strcspn(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~")] !=
	    '\0';
}

/* Append " WORD" to buf (len bytes, used *n), single-quoted if need be. */
static void
cmd_word(char *buf, size_t len, size_t *n, const char *w)
{
	const char	*p;

	if (*n + 2 >= len)
		return;
	buf[(*n)++] = ' ';
	if (!shell_unsafe(w)) {
		*n += (size_t)snprintf(buf + *n, len - *n, "%.*s",
		    (int)(len - *n - 1), w);
		return;
	}
	buf[(*n)++] = '\'';
	for (p = w; *p != '\0' && *n + 5 < len; p++) {
		if (*p == '\'') {
			memcpy(buf + *n, "'\\''", 4);
			*n += 4;
		} else
			buf[(*n)++] = *p;
	}
	buf[(*n)++] = '\'';
	buf[*n] = '\0';
}

void
sync_fault_msg(int fault, const char *why, const struct config *conf,
    const char *state_dir, const char *name, const char *source,
    const char *dest, char *buf, size_t len)
{
	const struct mirror_conf *m = NULL;
	char		 cmd[2048], dflt[PATH_MAX];
	const char	*sd = NULL;
	size_t		 n = 0;

	if (len == 0)
		return;
	if (fault == BM_ENOSPC) {
		(void)snprintf(buf, len, "the state directory %s is full (%s): "
		    "%s; free space on its file system (it holds the "
		    "manifests, locks and run history) and run again",
		    state_dir, why, source != NULL ? "nothing was synced or "
		    "recorded" : "the run stopped (the next run records what "
		    "this one could not)");
		return;
	}
	(void)snprintf(cmd, sizeof(cmd), "biomirror");
	n = strlen(cmd);
	if (conf != NULL && conf->path != NULL) {
		cmd_word(cmd, sizeof(cmd), &n, "-c");
		cmd_word(cmd, sizeof(cmd), &n, conf->path);
		sd = conf->state_dir;
	}
	if (sd == NULL && state_default_dir(dflt, sizeof(dflt)) == 0)
		sd = dflt;
	if (sd == NULL || strcmp(sd, state_dir) != 0) {
		cmd_word(cmd, sizeof(cmd), &n, "--state-dir");
		cmd_word(cmd, sizeof(cmd), &n, state_dir);
	}
	cmd_word(cmd, sizeof(cmd), &n, "resync");
	if (conf != NULL)
		m = config_find(conf, name);
	if (m == NULL && strncmp(name, "adhoc-", 6) == 0) {
		/* An ad-hoc mirror is named by its source and dest. */
		cmd_word(cmd, sizeof(cmd), &n, "--source");
		cmd_word(cmd, sizeof(cmd), &n, source ? source : "URL");
		cmd_word(cmd, sizeof(cmd), &n, "--dest");
		cmd_word(cmd, sizeof(cmd), &n, dest ? dest : "DIR");
	} else
		cmd_word(cmd, sizeof(cmd), &n, name);
	cmd_word(cmd, sizeof(cmd), &n, "--adopt");
	(void)snprintf(buf, len, "%s; the manifest is damaged: rebuild it "
	    "from the files in the mirror, without fetching them again, with: "
	    "%s (the damaged file is kept as %s.db.corrupt-TIMESTAMP)", why,
	    cmd, name);
}

/*
 * The state directory (dir) could not be prepared or locked (op; errno
 * e): r->err says so, and a full disk is a state fault (run_fault).  A
 * read-only file system says what to do there and then.
 */
static void
run_state_failed(struct run *r, int e, const char *dir, const char *op)
{
	char	 what[sizeof(r->err) / 2];
	bool	 full = e == ENOSPC || e == EDQUOT;

	/* A full disk's message names the directory already. */
	if (strcmp(op, "lock") == 0)
		(void)snprintf(what, sizeof(what), "%s%slocks/%s.lock: %s",
		    full || e == EROFS ? "" : dir, full || e == EROFS ? "" :
		    "/", r->o->key, strerror(e));
	else
		(void)snprintf(what, sizeof(what), "%s%s%s: %s", e == EROFS ?
		    "" : dir, e == EROFS ? "" : ": ", op, strerror(e));
	if (e == EROFS)
		(void)snprintf(r->err, sizeof(r->err), "the state directory "
		    "%s is on a read-only file system (%s): nothing was synced "
		    "or recorded; remount it read-write, or set state_dir (or "
		    "--state-dir) to a writable directory, and run again", dir,
		    what);
	else
		(void)snprintf(r->err, sizeof(r->err), "%s", what);
	if (full)
		r->state_fault = BM_ENOSPC;
}

/*
 * A run that failed (rc) on its manifest or state directory: a damaged
 * manifest or a full state disk (r->state_fault, or what the manifest's
 * failures said) gets r->err rewritten to say what to do.  Returns the
 * run's code: BM_ECORRUPT or BM_EDB for those (exit 2), else rc.
 */
static int
run_fault(struct run *r, int rc)
{
	char	 why[sizeof(r->err)];
	bool	 began;
	int	 jrc;

	/* A damaged manifest is why, whatever failed on the way. */
	if ((jrc = run_join_check(r)) != 0)
		rc = jrc;
	began = r->run > 0 && r->state_fault == 0;
	if ((rc == BM_EDB || rc == BM_ECORRUPT) && r->state_fault == 0 &&
	    r->m != NULL)
		r->state_fault = manifest_fault(r->m);
	if (rc == 0 || r->state_fault == 0)
		return rc;
	/* The scheduler logged a failed commit itself; r->err is empty. */
	(void)snprintf(why, sizeof(why), "%s", r->err[0] != '\0' || r->m ==
	    NULL ? r->err : manifest_errmsg(r->m));
	/* A full disk: source NULL says the run began (and stopped). */
	sync_fault_msg(r->state_fault, why, r->o->conf, r->o->state_dir,
	    r->o->key, began && r->state_fault == BM_ENOSPC ? NULL :
	    r->c->source, r->c->dest, r->err, sizeof(r->err));
	return r->state_fault == BM_ECORRUPT ? BM_ECORRUPT : BM_EDB;
}

int
sync_mirror(const struct sync_opts *o, const struct mirror_conf *c,
    struct mirror_result **ret)
{
	struct run	 r;
	struct run_record rec;
	struct timespec	 t0, t1;
	int64_t		 start = clock_real_ns();
	long		 holder = 0;
	size_t		 i;
	int		 lockfd = -1, rc;

	memset(&r, 0, sizeof(r));
	r.o = o;
	r.c = c;
	r.start_ns = start;
	if ((r.res = result_new(c->name)) == NULL)
		return BM_ENOMEM;
	r.res->dry_run = o->dry_run;
	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Before anything is made in either: a refused run leaves nothing. */
	if ((rc = run_check_overlap(&r)) != 0)
		goto done;
	if ((rc = state_prepare(o->state_dir)) != 0) {
		run_state_failed(&r, errno, o->state_dir, "mkdir");
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
		run_state_failed(&r, errno, o->state_dir, "lock");
		rc = BM_EINVAL;
		goto done;
	}
	rc = run_body(&r);
done:
	rc = run_fault(&r, rc);
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
	run_record(&r, start, &rec);
	plan_free(r.p);
	listing_free(r.l);
	listing_free(r.zcand);
	listing_free(r.unlisted);
	for (i = 0; i < r.ndirs; i++)
		free(r.dirs[i].path);
	free(r.dirs);
	for (i = 0; i < r.nsidecars; i++)
		free(r.sidecars[i]);
	free(r.sidecars);
	for (i = 0; i < r.nlsums; i++)
		free(r.lsums[i].path);
	free(r.lsums);
	free(r.unloaded);
	sidecar_set_free(r.sums);
	run_digests_free(&r);
	run_notes_free(&r);
	xfer_free(r.x);
	/* publish = set: a working snapshot holding nothing new goes. */
	if (r.s != NULL && !o->dry_run && c->publish == PUBLISH_SET &&
	    !store_set_pending(r.s))
		(void)store_set_discard(r.s);
	if (r.password != NULL)
		explicit_bzero(r.password, strlen(r.password));
	free(r.password);
	if (r.secret != NULL)
		explicit_bzero(r.secret, r.secret_len);
	free(r.secret);
	store_close(r.s);
	/* Connections and the tree closed; the manifest and lock still held. */
	run_post_sync(&r, &rec);
	run_metrics(&r, &rec);
	manifest_close(r.m);
	dest_lock_free(r.dl);
	state_unlock(lockfd);
	*ret = r.res;
	return 0;
}

/* manifest_file_fn: collect the committed sidecar files. */
static int
verify_sidecars(void *ctx, const struct file_row *row)
{
	struct run	*r = ctx;
	char		**v;

	if (row->type != ENTRY_FILE || !is_sidecar(row->path))
		return 0;
	if ((v = reallocarray(r->sidecars, r->nsidecars + 1,
	    sizeof(*v))) == NULL)
		return BM_ENOMEM;
	r->sidecars = v;
	if ((v[r->nsidecars] = strdup(row->path)) == NULL)
		return BM_ENOMEM;
	r->nsidecars++;
	return 0;
}

/* manifest_file_fn: check one committed file against the disk. */
static int
verify_file(void *ctx, const struct file_row *row)
{
	struct run	*r = ctx;
	struct local_stat st;
	const char	*why = NULL;
	bool		 compared = false;
	int		 fd = -1, rc = BM_ENOENT;

	if (row->type != ENTRY_FILE)
		return 0;
	if (*r->o->stop)
		return BM_EINTR;
	r->res->listed++;
	if (r->s == NULL)
		why = "missing";	/* no tree at all: nothing was made */
	else if ((rc = store_open_read(r->s, row->path, &fd, &st)) != 0)
		why = rc == BM_ENOENT ? "missing" : bm_strerror(rc);
	else if (st.size != row->fs.local.size)
		why = "size differs from what was committed";
	else if ((why = run_local_differs(r, row->path, row->checksum,
	    &compared, NULL)) == NULL && !compared &&
	    row->fs.local.mtime >= 0 && st.mtime != row->fs.local.mtime)
		/* Nothing to hash against: size and mtime are the check. */
		why = "mtime differs from what was committed";
	if (fd != -1)
		(void)close(fd);
	if (compared)
		r->res->digest_checked++;
	else if (rc == 0)
		r->res->size_only++;
	if (why == NULL)
		return 0;
	log_warnx("%s: verify: %s", row->path, why);
	r->res->failed++;
	return result_add_error(r->res, row->path, "verify", why);
}

/*
 * The tree verify checks, never made (verify changes nothing): with
 * publish = set the one the manifest describes, read-only
 * (store_open_set): the unpublished snapshot the newest run left, else
 * the published one; with publish = file DEST itself.  r->s stays NULL
 * when there is no tree yet (every file is then missing).
 */
static int
verify_open_tree(struct run *r)
{
	struct store_set_info info;
	struct stat	 st;
	char		 why[256] = "";
	int64_t		 newest;
	int		 rc;

	if ((rc = run_claim_dest(r, true)) != 0)
		return rc;
	if (r->c->publish == PUBLISH_SET) {
		if ((rc = run_set_prev(r->m, 0, &newest)) != 0) {
			(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
			    manifest_errmsg(r->m));
			return rc == BM_ENOMEM ? rc : BM_EDB;
		}
		rc = store_open_set(r->c->dest, r->c->file_mode,
		    r->c->dir_mode, 0, newest, &r->s, why, sizeof(why));
	} else if (stat(r->c->dest, &st) == -1 && errno == ENOENT)
		rc = 0;
	else
		rc = store_open(r->c->dest, r->c->file_mode, r->c->dir_mode,
		    &r->s);
	if (rc != 0)
		return run_store_failed(r, rc, why);
	store_set_get_info(r->s, &info);
	if (r->s == NULL)
		log_info("%s: verify: %s does not exist (nothing published "
		    "yet)", r->c->name, r->c->dest);
	else if (r->c->publish != PUBLISH_SET)
		;
	else if (info.working >= 0)
		log_info("%s: verify: checking unpublished snapshot %lld, "
		    "which the manifest describes (%s still shows %s)",
		    r->c->name, (long long)info.working, r->c->dest,
		    info.published >= 0 ? "the published one" : "nothing");
	else if (info.published >= 0)
		log_info("%s: verify: checking published snapshot %lld",
		    r->c->name, (long long)info.published);
	else
		log_info("%s: verify: checking %s (not converted to "
		    "snapshots yet)", r->c->name, r->c->dest);
	return 0;
}

/* verify's steps once the mirror is locked. */
static int
verify_body(struct run *r)
{
	char	 path[4096];
	int	 rc;

	if ((rc = state_manifest_path(r->o->state_dir, r->o->key, path,
	    sizeof(path))) != 0)
		return rc;
	if ((rc = manifest_open(path, false, &r->m, r->err,
	    sizeof(r->err))) != 0) {
		if (rc == BM_ENOENT)
			(void)snprintf(r->err, sizeof(r->err), "no manifest "
			    "yet (never synced)");
		if (rc == BM_ECORRUPT || rc == BM_ENOSPC)
			r->state_fault = rc;
		return rc == BM_ENOMEM ? rc : BM_EDB;
	}
	if (manifest_warning(r->m)[0] != '\0')
		log_warnx("%s: %s", r->c->name, manifest_warning(r->m));
	if ((rc = verify_open_tree(r)) != 0)
		return rc;
	if ((r->s != NULL &&
	    ((rc = manifest_ls(r->m, "", verify_sidecars, r)) != 0 ||
	    (rc = run_load_sums(r, false, &r->sums)) != 0)) ||
	    (rc = manifest_ls(r->m, "", verify_file, r)) != 0) {
		if (rc == BM_EDB)
			(void)snprintf(r->err, sizeof(r->err), "manifest: %s",
			    manifest_errmsg(r->m));
		return rc;
	}
	r->complete = true;
	return 0;
}

int
sync_verify(const struct sync_opts *o, const struct mirror_conf *c,
    struct mirror_result **ret)
{
	struct run	 r;
	struct stat	 st;
	char		 path[4096];
	long		 holder = 0;
	size_t		 i;
	int		 lockfd = -1, rc;

	memset(&r, 0, sizeof(r));
	r.o = o;
	r.c = c;
	if ((r.res = result_new(c->name)) == NULL)
		return BM_ENOMEM;
	r.res->verify = true;
	if (state_manifest_path(o->state_dir, o->key, path, sizeof(path)) ==
	    0 && stat(path, &st) == -1 && errno == ENOENT) {
		/* Nothing to check against: say so, not "locks: ENOENT". */
		(void)snprintf(r.err, sizeof(r.err), "never synced: no "
		    "manifest %.300s (run sync first)", path);
		rc = BM_EINVAL;
	} else if ((rc = state_lock(o->state_dir, o->key, &lockfd,
	    &holder)) != 0) {
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
		run_state_failed(&r, errno, o->state_dir, "lock");
		rc = BM_EINVAL;
	} else
		rc = verify_body(&r);
	rc = run_fault(&r, rc);
	run_status(&r, rc);
	if (rc != 0 && r.err[0]) {
		log_errx("%s: %s", c->name, r.err);
		(void)result_add_error(r.res, "", "verify", r.err);
	}
	for (i = 0; i < r.nsidecars; i++)
		free(r.sidecars[i]);
	free(r.sidecars);
	for (i = 0; i < r.nlsums; i++)
		free(r.lsums[i].path);
	free(r.lsums);
	free(r.unloaded);
	sidecar_set_free(r.sums);
	run_digests_free(&r);
	run_notes_free(&r);
	store_close(r.s);
	manifest_close(r.m);
	dest_lock_free(r.dl);
	state_unlock(lockfd);
	*ret = r.res;
	return rc == BM_ENOMEM ? rc : 0;
}

int
sync_list(const struct sync_opts *o, const struct mirror_conf *c,
    bool recursive, struct listing **ret, bool *logged, char *errbuf,
    size_t errlen)
{
	struct run	 r;
	struct lister_run lr;
	struct lister_stats st;
	int		 rc = BM_ENOMEM, trc;

	*ret = NULL;
	*logged = false;
	memset(&r, 0, sizeof(r));
	r.o = o;
	r.c = c;
	if ((r.res = result_new(c->name)) == NULL ||
	    (r.l = listing_new(MAX_LISTING)) == NULL)
		goto out;
	if ((r.lister = lister_find(c->source)) == NULL) {
		(void)snprintf(r.err, sizeof(r.err), "%s: no lister for its "
		    "scheme", c->source);
		rc = BM_EINVAL;
		goto out;
	}
	if ((rc = run_open_xfer(&r)) != 0)
		goto out;
	r.filter.include = (const char *const *)c->include;
	r.filter.ninclude = c->ninclude;
	r.filter.exclude = (const char *const *)c->exclude;
	r.filter.nexclude = c->nexclude;
	memset(&lr, 0, sizeof(lr));
	memset(&st, 0, sizeof(st));
	lr.name = c->name;
	lr.source = c->source;
	lr.filter = &r.filter;
	lr.tz = run_zone(&r);
	lr.max_depth = recursive ? MAX_DEPTH : 0;
	lr.shallow = !recursive;
	lr.max_entries = c->max_entries;
	lr.connections = run_connections(&r);
	lr.fetch = fetch_pages;
	lr.ctx = &r;
	lr.hint = run_hint;
	rc = r.lister->list(&lr, r.l, &st, r.err, sizeof(r.err));
	run_list_stats(&r, &st);
	if (rc == BM_ENOMEM || rc == BM_EINTR)
		goto out;
	if ((trc = listing_resolve_times(r.l, run_zone(&r))) != 0 ||
	    (trc = listing_sort(r.l)) != 0) {
		rc = trc;
		goto out;
	}
	*ret = r.l;
	r.l = NULL;
out:
	if (rc == BM_EINTR)
		(void)snprintf(r.err, sizeof(r.err), "stopped by %s",
		    stop_signal_name(*o->stop));
	else if (rc != 0 && r.err[0] == '\0')
		(void)snprintf(r.err, sizeof(r.err), "%s", bm_strerror(rc));
	(void)snprintf(errbuf, errlen, "%s", r.err);
	/* the lister's error names the page, or is its reason alone */
	*logged = rc != 0 && r.page_err[0] != '\0' &&
	    (strcmp(r.err, r.page_err) == 0 ||
	    strcmp(r.err, r.page_err + r.page_why) == 0);
	xfer_free(r.x);
	listing_free(r.l);
	if (r.password != NULL)
		explicit_bzero(r.password, strlen(r.password));
	free(r.password);
	if (r.secret != NULL)
		explicit_bzero(r.secret, r.secret_len);
	free(r.secret);
	result_free(r.res);
	return rc;
}
