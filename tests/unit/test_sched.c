/*
 * Unit tests for agent/sched/sched.c, driven against a fake transport (a
 * struct xfer_ops of this file) over a real store and manifest in a temp
 * directory: files in ranges and their end check, a range answered with
 * the whole file, retries, an upstream that changed between the ranges
 * and the check, a failed range cancelling the others, a stop abandoning
 * what is in flight, and every file ending once.  The fake serves files
 * from memory; it ends at most per_poll jobs per poll (0: all), and its
 * books prove the transport contract from the scheduler's side: every
 * submitted job ends once, by its done call or by a cancel, never both.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "biomirror/clock.h"
#include "biomirror/digest.h"
#include "biomirror/error.h"
#include "biomirror/listing.h"
#include "biomirror/log.h"
#include "biomirror/manifest.h"
#include "biomirror/plan.h"
#include "biomirror/report.h"
#include "biomirror/sched.h"
#include "biomirror/store.h"
#include "biomirror/xfer.h"

#include "tap.h"

#define SRC	"http://fake.invalid/"
#define NS	1000000000LL
#define FK_MAX	256
#define FK_MTIME 1700000000	/* every file's Last-Modified, seconds */

struct fk_file {
	char		 path[32];
	uint8_t		*data;		/* owned */
	size_t		 len;
	char		 etag[32];
};

/* The fake transport's state: its files, a script, and its books. */
struct fake {
	int		 wake[2];	/* pipe: xfer_wakeup() writes */
	struct xfer_job	*q[FK_MAX];	/* jobs submitted, not ended */
	size_t		 nq;
	struct fk_file	 files[8];
	size_t		 nfiles;
	unsigned	 per_poll;	/* jobs ended per poll, 0 = all */
	unsigned	 fail_n;	/* the first fail_n bodies: retry */
	const char	*gone_path;	/* a range of it at gone_off: 404 */
	uint64_t	 gone_off;
	bool		 ignore_range;	/* every range answered 200 whole */
	const char	*change_path;	/* its next check: a new ETag */
	volatile sig_atomic_t *stop;	/* set once stop_after jobs ended */
	unsigned	 stop_after;
	unsigned	 refuse_at;	/* that submit (1-based) is refused */
	const char	*udt_path;	/* its bodies come "over UDT" (res.net) */
	const char	*scatter_path;	/* its whole body: a piece per poll,
					   the second half first (res.scattered) */
	unsigned	 scatter_next;	/* pieces delivered */
	const char	*odd_path;	/* its whole bodies come in odd_order */
	int		 odd_order;	/* ODD_SWAP, ODD_REDO */
	/* books */
	unsigned	 submits, refused, ends, cancels, stray_cancels;
	unsigned	 ranges, whole, validates, not_modified;
	size_t		 max_active;
};

static struct fk_file *
fk_find(struct fake *fk, const char *url)
{
	size_t	 i;

	if (strncmp(url, SRC, strlen(SRC)) != 0)
		return NULL;
	for (i = 0; i < fk->nfiles; i++)
		if (strcmp(url + strlen(SRC), fk->files[i].path) == 0)
			return &fk->files[i];
	return NULL;
}

static bool
fk_handles(const char *url, const struct xfer_opts *o)
{
	(void)o;
	return strncmp(url, SRC, strlen(SRC)) == 0;
}

static int
fk_open(const struct xfer_opts *o, const char *url, void **ret,
    char *errbuf, size_t errlen)
{
	struct fake	*fk;

	(void)o;
	(void)url;
	(void)errbuf;
	(void)errlen;
	if ((fk = calloc(1, sizeof(*fk))) == NULL)
		return BM_ENOMEM;
	if (pipe2(fk->wake, O_CLOEXEC | O_NONBLOCK) == -1) {
		free(fk);
		return BM_EIO;
	}
	*ret = fk;
	return 0;
}

static int
fk_submit(void *impl, struct xfer_job *job)
{
	struct fake	*fk = impl;

	if (fk->nq == FK_MAX ||
	    fk->submits + fk->refused + 1 == fk->refuse_at) {
		fk->refused++;
		return BM_ENOMEM;
	}
	fk->q[fk->nq++] = job;
	fk->submits++;
	if (fk->nq > fk->max_active)
		fk->max_active = fk->nq;
	return 0;
}

/* Take job out of the queue; false when it is not there. */
static bool
fk_unqueue(struct fake *fk, const struct xfer_job *job)
{
	size_t	 i;

	for (i = 0; i < fk->nq; i++)
		if (fk->q[i] == job) {
			memmove(&fk->q[i], &fk->q[i + 1],
			    (fk->nq - i - 1) * sizeof(fk->q[0]));
			fk->nq--;
			return true;
		}
	return false;
}

/* Deliver data[off, off+len) to job's sink in pieces, as a wire would. */
static void
fk_body(struct xfer_job *job, const uint8_t *data, uint64_t off,
    uint64_t len)
{
	struct xfer_result *res = &job->res;
	uint64_t	 n, done;
	int		 rc;

	for (done = 0; done < len; done += n) {
		n = len - done > 1000 ? 1000 : len - done;
		if ((rc = job->sink(job->sink_arg, off + done, data + off +
		    done, (size_t)n)) != 0) {
			res->rc = rc;
			res->cls = rc == BM_ECHANGED ? XFER_CHANGED :
			    XFER_PERMANENT;
			(void)snprintf(res->errmsg, sizeof(res->errmsg), "%s",
			    bm_strerror(rc));
			return;
		}
		res->bytes += n;
	}
	res->cls = XFER_OK;
}

#define ODD_SWAP	1	/* bytes [2000, 3000) before [1000, 2000) */
#define ODD_REDO	2	/* every byte wrong first, then right */
#define ODD_SKIPREDO	3	/* [0, 1000) wrong, [2000, 3000), then
				   [0, 3000) right and the rest */

/*
 * A whole body out of the order a wire keeps (the scheduler's digest
 * follows the writes of a body in order, and must not be fooled by
 * others): ODD_SWAP, or ODD_REDO (written twice, counted once).
 */
static void
fk_body_odd(struct fake *fk, struct xfer_job *job, const struct fk_file *f)
{
	uint8_t	*bad;
	size_t	 i;

	if (fk->odd_order == ODD_SWAP && f->len > 3000) {
		if (job->sink(job->sink_arg, 0, f->data, 1000) != 0 ||
		    job->sink(job->sink_arg, 2000, f->data + 2000, 1000) != 0 ||
		    job->sink(job->sink_arg, 1000, f->data + 1000, 1000) != 0)
			tap_bail("fake: sink refused");
		job->res.bytes = 3000;
		fk_body(job, f->data, 3000, f->len - 3000);
		return;
	}
	if ((bad = malloc(f->len)) == NULL)
		tap_bail("out of memory");
	for (i = 0; i < f->len; i++)
		bad[i] = (uint8_t)~f->data[i];
	if (fk->odd_order == ODD_SKIPREDO && f->len > 3000) {
		if (job->sink(job->sink_arg, 0, bad, 1000) != 0 ||
		    job->sink(job->sink_arg, 2000, f->data + 2000, 1000) != 0 ||
		    job->sink(job->sink_arg, 0, f->data, 3000) != 0)
			tap_bail("fake: sink refused");
		free(bad);
		job->res.bytes = 3000;
		fk_body(job, f->data, 3000, f->len - 3000);
		return;
	}
	fk_body(job, bad, 0, f->len);
	free(bad);
	job->res.bytes = 0;
	fk_body(job, f->data, 0, f->len);
}

/* Answer one job as an HTTP server holding fk's files would. */
static void
fk_serve(struct fake *fk, struct xfer_job *job)
{
	struct xfer_result *res = &job->res;
	struct fk_file	*f = fk_find(fk, job->url);

	if (f == NULL) {
		res->status = 404;
		res->rc = BM_ENOENT;
		res->cls = XFER_GONE;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "HTTP 404");
		return;
	}
	if (job->kind == XFER_JOB_VALIDATE) {
		fk->validates++;
		if (fk->change_path != NULL &&
		    strcmp(f->path, fk->change_path) == 0) {
			/* Rewritten in place, same size, after the ranges. */
			(void)snprintf(f->etag, sizeof(f->etag), "\"v2\"");
			fk->change_path = NULL;
		}
		res->status = 206;
		(void)snprintf(res->etag, sizeof(res->etag), "%s", f->etag);
		res->mtime = FK_MTIME;
		res->size = (int64_t)f->len;
		res->cls = XFER_OK;
		return;
	}
	if (fk->fail_n > 0) {
		fk->fail_n--;
		res->rc = BM_ENET;
		res->cls = XFER_RETRY;
		(void)snprintf(res->errmsg, sizeof(res->errmsg),
		    "fake: connection reset");
		return;
	}
	if (job->if_none_match != NULL && strcmp(job->if_none_match,
	    f->etag) == 0) {
		fk->not_modified++;
		res->status = 304;
		res->cls = XFER_NOT_MODIFIED;
		return;
	}
	(void)snprintf(res->etag, sizeof(res->etag), "%s", f->etag);
	res->mtime = FK_MTIME;
	if (fk->udt_path != NULL && strcmp(f->path, fk->udt_path) == 0)
		res->net = XFER_NET_UDT;
	if (job->len == 0 || fk->ignore_range) {
		res->status = 200;
		res->size = (int64_t)f->len;
		if (job->len > 0 && !(job->accept_full && job->off == 0)) {
			res->rc = BM_EPROTO;
			res->cls = XFER_PERMANENT;
			res->ignored_range = true;
			(void)snprintf(res->errmsg, sizeof(res->errmsg),
			    "the server ignored Range");
			return;
		}
		res->full = job->len > 0;
		fk->whole++;
		if (fk->odd_path != NULL && strcmp(f->path, fk->odd_path) == 0)
			fk_body_odd(fk, job, f);
		else
			fk_body(job, f->data, 0, f->len);
		return;
	}
	fk->ranges++;
	if (fk->gone_path != NULL && strcmp(f->path, fk->gone_path) == 0 &&
	    job->off == fk->gone_off) {
		res->status = 404;
		res->rc = BM_ENOENT;
		res->cls = XFER_GONE;
		(void)snprintf(res->errmsg, sizeof(res->errmsg), "HTTP 404");
		return;
	}
	res->status = 206;
	res->size = (int64_t)job->len;
	res->range_start = (int64_t)job->off;
	res->range_end = (int64_t)(job->off + job->len - 1);
	res->total = (int64_t)f->len;
	fk_body(job, f->data, job->off, job->len);
}

#define SCATTER_PIECE	(1024 * 1024)

/*
 * One piece of the scattered body of job (fk->scatter_path, whole): the
 * pieces of the second half, then those of the first, as parallel data
 * connections may deliver them.  True when the job ended with it.
 */
static bool
fk_scatter_step(struct fake *fk, struct xfer_job *job)
{
	struct xfer_result *res = &job->res;
	const struct fk_file *f = fk_find(fk, job->url);
	unsigned	 n, half, k;
	uint64_t	 off, len;

	n = (unsigned)((f->len + SCATTER_PIECE - 1) / SCATTER_PIECE);
	half = n / 2;
	k = fk->scatter_next < n - half ? half + fk->scatter_next :
	    fk->scatter_next - (n - half);
	off = (uint64_t)k * SCATTER_PIECE;
	len = f->len - off < SCATTER_PIECE ? f->len - off : SCATTER_PIECE;
	if (fk->scatter_next == 0) {
		res->scattered = true;
		res->status = 200;
		res->size = (int64_t)f->len;
		res->mtime = FK_MTIME;
		(void)snprintf(res->etag, sizeof(res->etag), "%s", f->etag);
	}
	if (job->sink(job->sink_arg, off, f->data + off, (size_t)len) != 0)
		tap_bail("fake: sink refused a scattered piece");
	res->bytes += len;
	if (++fk->scatter_next < n)
		return false;
	fk->whole++;
	res->cls = XFER_OK;
	return true;
}

/*
 * End queued jobs (per_poll at most), first in first out; a done call
 * may cancel or submit others, so the queue is read afresh each time.
 * With none queued, wait for a wakeup or the timeout.
 */
static int
fk_poll(void *impl, int timeout_ms, struct xfer_wait *wait,
    xfer_done_fn done, void *ctx)
{
	struct fake	*fk = impl;
	struct pollfd	 pfd;
	struct xfer_job	*job;
	unsigned	 n = 0;
	size_t		 i;
	char		 buf[64];

	(void)wait;
	if (fk->nq == 0) {
		pfd.fd = fk->wake[0];
		pfd.events = POLLIN;
		(void)poll(&pfd, 1, timeout_ms);
	}
	for (i = 0; i < fk->nq && fk->scatter_path != NULL; i++) {
		job = fk->q[i];
		if (job->len != 0 || strcmp(job->url + strlen(SRC),
		    fk->scatter_path) != 0)
			continue;
		if (fk_scatter_step(fk, job)) {
			(void)fk_unqueue(fk, job);
			fk->ends++;
			done(ctx, job);
		}
		break;
	}
	while (fk->nq > 0 && (fk->per_poll == 0 || n < fk->per_poll)) {
		for (i = 0; i < fk->nq && fk->scatter_path != NULL &&
		    strcmp(fk->q[i]->url + strlen(SRC), fk->scatter_path) ==
		    0; i++)
			;
		if (i == fk->nq)
			break;		/* only the scattered one */
		job = fk->q[i];
		(void)fk_unqueue(fk, job);
		fk_serve(fk, job);
		fk->ends++;
		n++;
		done(ctx, job);
		if (fk->stop != NULL && fk->ends == fk->stop_after)
			*fk->stop = 1;
	}
	while (read(fk->wake[0], buf, sizeof(buf)) > 0)
		;
	return 0;
}

static void
fk_cancel(void *impl, struct xfer_job *job)
{
	struct fake	*fk = impl;

	if (fk_unqueue(fk, job))
		fk->cancels++;
	else
		fk->stray_cancels++;
}

static size_t
fk_active(const void *impl)
{
	const struct fake *fk = impl;

	return fk->nq;
}

static void
fk_wakeup(void *impl)
{
	struct fake	*fk = impl;
	ssize_t		 n = write(fk->wake[1], "", 1);

	(void)n;	/* a full pipe wakes the poll as well */
}

static void
fk_hint(void *impl, enum xfer_hint h, bool on)
{
	(void)impl;
	(void)h;
	(void)on;
}

static void
fk_close(void *impl)
{
	struct fake	*fk = impl;
	size_t		 i;

	if (fk == NULL)
		return;
	for (i = 0; i < fk->nfiles; i++)
		free(fk->files[i].data);
	(void)close(fk->wake[0]);
	(void)close(fk->wake[1]);
	free(fk);
}

static const struct xfer_ops fake_ops = {
	.name = "fake",
	.handles = fk_handles,
	.open = fk_open,
	.submit = fk_submit,
	.poll = fk_poll,
	.cancel = fk_cancel,
	.active = fk_active,
	.wakeup = fk_wakeup,
	.hint = fk_hint,
	.close = fk_close,
};

/* ---- one scheduler run over a temp destination ---- */

struct tcase {
	char		 base[64];	/* mkdtemp directory */
	char		 dest[96];
	struct store	*s;
	struct manifest	*m;
	int64_t		 run;
	struct xfer	*x;
	struct fake	*fk;		/* x's state */
	struct action	 acts[8];
	size_t		 nacts;
	struct sched_opts o;
	struct mirror_result *res;
	volatile sig_atomic_t stop;
};

static void
tc_init(struct tcase *c, unsigned retries)
{
	struct xfer_opts xo;
	char		 db[128], err[256];

	memset(c, 0, sizeof(*c));
	(void)snprintf(c->base, sizeof(c->base), "/tmp/bm_sched.XXXXXX");
	if (mkdtemp(c->base) == NULL)
		tap_bail("mkdtemp");
	(void)snprintf(c->dest, sizeof(c->dest), "%s/dest", c->base);
	(void)snprintf(db, sizeof(db), "%s/m.db", c->base);
	memset(&xo, 0, sizeof(xo));
	if (mkdir(c->dest, 0755) != 0 ||
	    store_open(c->dest, 0644, 0755, &c->s) != 0 ||
	    manifest_open(db, true, &c->m, err, sizeof(err)) != 0 ||
	    manifest_run_begin(c->m, "sync", clock_real_ns(), &c->run) != 0 ||
	    xfer_open_ops(&fake_ops, SRC, &xo, &c->x, NULL, 0) != 0 ||
	    (c->res = result_new("t")) == NULL)
		tap_bail("set-up");
	c->fk = c->x->impl;
	c->o.source_url = SRC;
	c->o.name = "t";
	c->o.concurrency = 4;
	c->o.streams = 4;
	c->o.min_split = 1024;
	c->o.retries = retries;
	c->o.run = c->run;
	c->o.batch_files = 100;
	c->o.batch_bytes = 1ULL << 30;
	c->o.batch_ms = 1000;
	c->o.stop = &c->stop;
	c->o.pass = SCHED_PASS_ALL;
}

/* Upstream file path of len bytes (a pattern of its own) and its fetch. */
static void
tc_file(struct tcase *c, const char *path, size_t len)
{
	struct fk_file	*f = &c->fk->files[c->fk->nfiles++];
	struct action	*a = &c->acts[c->nacts++];
	size_t		 i;

	(void)snprintf(f->path, sizeof(f->path), "%s", path);
	if ((f->data = malloc(len ? len : 1)) == NULL ||
	    (a->path = strdup(path)) == NULL)
		tap_bail("out of memory");
	for (i = 0; i < len; i++)
		f->data[i] = (uint8_t)(i * 7 + path[0]);
	f->len = len;
	(void)snprintf(f->etag, sizeof(f->etag), "\"v1\"");
	a->op = ACT_FETCH;
	a->type = ENTRY_FILE;
	a->why = "new";
	a->fs.listed.size = (int64_t)len;
	a->fs.listed.size_exact = true;
	a->fs.listed.mtime = FK_MTIME * NS;
	a->fs.listed.prec = MTIME_SECOND;
	/* upstream and local unknown: no action_more */
}

static int
tc_run(struct tcase *c)
{
	return sched_run(&c->o, c->x, c->s, c->m, c->acts, c->nacts, c->res);
}

/* Does dest/path hold exactly the fake's bytes of path? */
static bool
tc_same(const struct tcase *c, const char *path)
{
	char		 p[160];
	uint8_t		 buf[65536];
	const struct fk_file *f = NULL;
	ssize_t		 n;
	size_t		 i;
	int		 fd;

	for (i = 0; i < c->fk->nfiles; i++)
		if (strcmp(c->fk->files[i].path, path) == 0)
			f = &c->fk->files[i];
	(void)snprintf(p, sizeof(p), "%s/%s", c->dest, path);
	if (f == NULL || (fd = open(p, O_RDONLY | O_CLOEXEC)) == -1)
		return false;
	for (i = 0; (n = read(fd, buf, sizeof(buf))) > 0; i += (size_t)n)
		if ((size_t)n > f->len - i || memcmp(buf, f->data + i,
		    (size_t)n) != 0)
			break;
	(void)close(fd);
	return n == 0 && i == f->len;
}

/* Entries in dest (temp files included), -1 when it cannot be read. */
static int
tc_dest_entries(const struct tcase *c)
{
	char	 cmd[160];
	FILE	*fp;
	int	 n = 0, ch;

	(void)snprintf(cmd, sizeof(cmd), "ls -A '%s'", c->dest);
	if ((fp = popen(cmd, "r")) == NULL)
		return -1;
	while ((ch = fgetc(fp)) != EOF)
		n += ch == '\n';
	(void)pclose(fp);
	return n;
}

struct rows {
	int		 n;
	const char	*path;		/* the row to look for */
	bool		 found;		/* path has a row */
	char		 etag[32];	/* ... with this ETag */
	char		 checksum[80];	/* ... and this checksum, "" none */
};

static int
row_cb(void *ctx, const struct file_row *r)
{
	struct rows	*w = ctx;

	w->n++;
	if (w->path != NULL && strlen(w->path) == r->pathlen &&
	    memcmp(w->path, r->path, r->pathlen) == 0) {
		w->found = true;
		(void)snprintf(w->etag, sizeof(w->etag), "%s",
		    r->etag ? r->etag : "");
		(void)snprintf(w->checksum, sizeof(w->checksum), "%s",
		    r->checksum ? r->checksum : "");
	}
	return 0;
}

/* Walk the committed rows into *w, looking for path.  0 or -1. */
static int
tc_find(struct tcase *c, const char *path, struct rows *w)
{
	memset(w, 0, sizeof(*w));
	w->path = path;
	return manifest_ls(c->m, "", row_cb, w) != 0 ? -1 : 0;
}

/*
 * Committed manifest rows; *etag gets path's ETag when path is given
 * ("-" when path has no row).
 */
static int
tc_rows(struct tcase *c, const char *path, char *etag, size_t len)
{
	struct rows	 w;

	if (tc_find(c, path, &w) != 0)
		return -1;
	if (etag != NULL)
		(void)snprintf(etag, len, "%s", w.found ? w.etag : "-");
	return w.n;
}

/* The books every run must balance: each job ended once. */
static void
tc_books(const struct tcase *c, const char *what)
{
	const struct fake *fk = c->fk;

	is_int(fk->nq, 0, "%s: no job left in the transport", what);
	is_int(fk->submits, fk->ends + fk->cancels, "%s: every job ended "
	    "once (done or cancel)", what);
	is_int(fk->stray_cancels, 0, "%s: no cancel of a job not in flight",
	    what);
}

static void
tc_free(struct tcase *c)
{
	char	 cmd[96];
	size_t	 i;

	for (i = 0; i < c->nacts; i++)
		free(c->acts[i].path);
	result_free(c->res);
	xfer_free(c->x);
	manifest_close(c->m);
	store_close(c->s);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->base);
	if (system(cmd) != 0)
		printf("# %s failed\n", cmd);
}

/* ---- the cases ---- */

/*
 * A file of 8 KiB with streams 4 and min_split 1 KiB goes in 4 ranges of
 * 2 KiB, then one end check; a small file goes whole.
 */
static void
test_ranges(void)
{
	struct tcase	 c;
	char		 etag[32];

	tc_init(&c, 0);
	tc_file(&c, "big.bin", 8192);
	tc_file(&c, "small.txt", 100);
	is_int(tc_run(&c), 0, "ranges: run");
	is_int(c.res->fetched, 2, "ranges: both files fetched");
	is_int(c.res->failed, 0, "ranges: none failed");
	is_int(c.fk->ranges, 4, "ranges: 4 ranges of the large file");
	is_int(c.fk->whole, 1, "ranges: the small file in one stream");
	is_int(c.fk->validates, 1, "ranges: one end check after the ranges");
	ok(tc_same(&c, "big.bin"), "ranges: the ranges make the file");
	ok(tc_same(&c, "small.txt"), "ranges: the small file as served");
	is_int(tc_rows(&c, "big.bin", etag, sizeof(etag)), 2,
	    "ranges: two manifest rows");
	is_str(etag, "\"v1\"", "ranges: the ETag recorded");
	is_int(tc_dest_entries(&c), 2, "ranges: no temp file left");
	tc_books(&c, "ranges");
	tc_free(&c);
}

/* manifest_event_fn: "path net;" of each fetched event into ctx. */
static int
net_cb(void *ctx, const struct event_row *e)
{
	char	*out = ctx;
	size_t	 n = strlen(out);

	if (strcmp(e->op, "fetched") == 0)
		(void)snprintf(out + n, 256 - n, "%s %s;", e->path,
		    e->net ? e->net : "-");
	return 0;
}

/*
 * The transport each file came over: counted per transport in the
 * result (files, bytes, time in flight) and recorded with its event.
 */
static void
test_nets(void)
{
	struct tcase	 c;
	char		 out[256];

	tc_init(&c, 0);
	tc_file(&c, "big.bin", 8192);
	tc_file(&c, "small.txt", 100);
	tc_file(&c, "u.dat", 300);
	c.fk->udt_path = "u.dat";
	is_int(tc_run(&c), 0, "nets: run");
	is_int(c.res->fetched, 3, "nets: all fetched");
	is_int(c.res->nets[REPORT_NET_TCP].files, 2, "nets: two over tcp");
	is_int(c.res->nets[REPORT_NET_TCP].bytes, 8292, "nets: their bytes");
	is_int(c.res->nets[REPORT_NET_UDT].files, 1, "nets: one over udt");
	is_int(c.res->nets[REPORT_NET_UDT].bytes, 300, "nets: its bytes");
	ok(c.res->nets[REPORT_NET_TCP].seconds >= 0 &&
	    c.res->nets[REPORT_NET_UDT].seconds >= 0, "nets: times");
	out[0] = '\0';
	is_int(manifest_events(c.m, c.run, net_cb, out), 0, "nets: events");
	/* In commit order, which the end of the ranges decides. */
	ok(strlen(out) == strlen("big.bin tcp;small.txt tcp;u.dat udt;") &&
	    strstr(out, "big.bin tcp;") != NULL &&
	    strstr(out, "small.txt tcp;") != NULL &&
	    strstr(out, "u.dat udt;") != NULL,
	    "nets: each event names its transport: %s", out);
	tc_books(&c, "nets");
	tc_free(&c);
}

/* A server that ignores Range: range 0 takes the whole file, no check. */
static void
test_ignored_range(void)
{
	struct tcase	 c;

	tc_init(&c, 0);
	tc_file(&c, "big.bin", 8192);
	c.fk->ignore_range = true;
	is_int(tc_run(&c), 0, "ignored Range: run");
	is_int(c.res->fetched, 1, "ignored Range: fetched");
	is_int(c.fk->whole, 1, "ignored Range: one whole body written");
	is_int(c.fk->validates, 0, "ignored Range: one response, no check");
	ok(tc_same(&c, "big.bin"), "ignored Range: the file as served");
	tc_books(&c, "ignored Range");
	tc_free(&c);
}

/* The recorded checksum of path (verify = checksum), "" when none. */
static void
tc_checksum(struct tcase *c, const char *path, char *out, size_t len)
{
	struct rows	 w;

	if (tc_find(c, path, &w) != 0)
		w.checksum[0] = '\0';
	(void)snprintf(out, len, "%s", w.checksum);
}

/* "sha256:HEX" of the fake's bytes of path. */
static void
fk_sha256(const struct tcase *c, const char *path, char *out, size_t len)
{
	struct digest	*d;
	struct digest_value v;
	size_t		 i;

	out[0] = '\0';
	for (i = 0; i < c->fk->nfiles; i++)
		if (strcmp(c->fk->files[i].path, path) == 0 &&
		    digest_new(DIGEST_BIT(DIGEST_SHA256), &d) == 0) {
			if (digest_update(d, c->fk->files[i].data,
			    c->fk->files[i].len) == 0 &&
			    digest_final(d, DIGEST_SHA256, &v) == 0)
				(void)digest_to_text(&v, out, len);
			digest_free(d);
		}
}

/*
 * verify = checksum over one stream: the digest follows the body's
 * writes as they land (store_file_tap), not read back; writes out of
 * order, or a body written twice, fall back to reading the temp file.
 * Each way, the recorded SHA-256 is that of the file as served.
 */
static void
test_digest_follows(void)
{
	static const struct {
		const char	*what;
		int		 order;
	} ways[] = {
		{ "in order", 0 },
		{ "out of order", ODD_SWAP },
		{ "written twice", ODD_REDO },
		{ "out of order, then below", ODD_SKIPREDO },
	};
	struct tcase	 c;
	char		 got[80], want[80];
	size_t		 k;

	for (k = 0; k < sizeof(ways) / sizeof(ways[0]); k++) {
		tc_init(&c, 0);
		c.o.streams = 1;
		c.o.record_digest = true;
		/* Over SCHED_MEM_MAX: a temp file, not memory. */
		tc_file(&c, "big.bin", 300 * 1024 + 17);
		tc_file(&c, "other.bin", 280 * 1024);
		tc_file(&c, "small.bin", 5000);	/* in memory, written whole */
		if (ways[k].order != 0) {
			c.fk->odd_path = "big.bin";
			c.fk->odd_order = ways[k].order;
		}
		is_int(tc_run(&c), 0, "digest follows, %s: run", ways[k].what);
		is_int(c.res->fetched, 3, "digest follows, %s: fetched",
		    ways[k].what);
		ok(tc_same(&c, "big.bin") && tc_same(&c, "other.bin"),
		    "digest follows, %s: the files as served", ways[k].what);
		tc_checksum(&c, "big.bin", got, sizeof(got));
		fk_sha256(&c, "big.bin", want, sizeof(want));
		ok(want[0] != '\0', "digest follows: a SHA-256 to compare");
		is_str(got, want, "digest follows, %s: the SHA-256 recorded",
		    ways[k].what);
		tc_checksum(&c, "other.bin", got, sizeof(got));
		fk_sha256(&c, "other.bin", want, sizeof(want));
		is_str(got, want, "digest follows, %s: the other file's",
		    ways[k].what);
		tc_checksum(&c, "small.bin", got, sizeof(got));
		fk_sha256(&c, "small.bin", want, sizeof(want));
		is_str(got, want, "digest follows, %s: the small file's, hashed "
		    "from memory", ways[k].what);
		tc_books(&c, "digest follows");
		tc_free(&c);
	}
}

/*
 * A body that comes out of file order over one job (res.scattered, as
 * GridFTP's parallel MODE E connections deliver it) is hashed only once
 * every byte is in: the bytes delivered so far are no prefix, and
 * hashing them would read holes.
 */
static void
test_digest_scattered(void)
{
	struct tcase	 c;
	char		 got[80], want[80];

	tc_init(&c, 0);
	c.o.streams = 1;
	c.o.record_digest = true;
	tc_file(&c, "scattered.bin", 20 * 1024 * 1024 + 5);
	c.fk->scatter_path = "scattered.bin";
	is_int(tc_run(&c), 0, "scattered: run");
	is_int(c.res->fetched, 1, "scattered: fetched");
	ok(c.fk->scatter_next == 21, "scattered: in 21 pieces, one a poll");
	ok(tc_same(&c, "scattered.bin"), "scattered: the file as served");
	tc_checksum(&c, "scattered.bin", got, sizeof(got));
	fk_sha256(&c, "scattered.bin", want, sizeof(want));
	is_str(got, want, "scattered: the SHA-256 recorded is the file's");
	tc_books(&c, "scattered");
	tc_free(&c);
}

/* A transient failure is retried (after a backoff), up to retries. */
static void
test_retries(void)
{
	struct tcase	 c;

	tc_init(&c, 0);
	tc_file(&c, "a.txt", 100);
	c.fk->fail_n = 1;
	is_int(tc_run(&c), 0, "retries 0: run");
	is_int(c.res->failed, 1, "retries 0: the file failed");
	is_int(c.fk->submits, 1, "retries 0: one try");
	ok(c.res->nerrors == 1 && strcmp(c.res->errors[0].reason,
	    "fake: connection reset") == 0, "retries 0: the transport's "
	    "reason reported");
	is_int(tc_dest_entries(&c), 0, "retries 0: nothing published");
	is_int(tc_rows(&c, NULL, NULL, 0), 0, "retries 0: no manifest row");
	tc_books(&c, "retries 0");
	tc_free(&c);

	tc_init(&c, 1);
	tc_file(&c, "a.txt", 100);
	c.fk->fail_n = 1;
	is_int(tc_run(&c), 0, "retries 1: run");
	is_int(c.res->fetched, 1, "retries 1: fetched on the second try");
	is_int(c.res->failed, 0, "retries 1: not failed");
	is_int(c.fk->submits, 2, "retries 1: two tries");
	ok(tc_same(&c, "a.txt"), "retries 1: the file as served");
	tc_books(&c, "retries 1");
	tc_free(&c);
}

/*
 * The end check shows a new ETag (a same-size rewrite after the ranges
 * started): never published; the retry fetches and records the new one.
 */
static void
test_changed(void)
{
	struct tcase	 c;
	char		 etag[32];

	tc_init(&c, 0);
	tc_file(&c, "big.bin", 8192);
	c.fk->change_path = "big.bin";
	is_int(tc_run(&c), 0, "changed: run");
	is_int(c.res->failed, 1, "changed: failed without retries");
	ok(c.res->nerrors == 1 && strstr(c.res->errors[0].reason,
	    "upstream changed during the transfer (ETag now \"v2\"") != NULL,
	    "changed: the reason names the new ETag");
	is_int(tc_dest_entries(&c), 0, "changed: nothing published, no temp "
	    "file left");
	tc_books(&c, "changed");
	tc_free(&c);

	tc_init(&c, 1);
	tc_file(&c, "big.bin", 8192);
	c.fk->change_path = "big.bin";
	is_int(tc_run(&c), 0, "changed, retry: run");
	is_int(c.res->fetched, 1, "changed, retry: fetched on the retry");
	is_int(c.fk->ranges, 8, "changed, retry: two tries in 4 ranges");
	is_int(c.fk->validates, 2, "changed, retry: two end checks");
	is_int(tc_rows(&c, "big.bin", etag, sizeof(etag)), 1,
	    "changed, retry: one manifest row");
	is_str(etag, "\"v2\"", "changed, retry: the new ETag recorded");
	tc_books(&c, "changed, retry");
	tc_free(&c);
}

/* A range that fails for good cancels the ranges still in flight. */
static void
test_cancel(void)
{
	struct tcase	 c;

	tc_init(&c, 3);
	tc_file(&c, "big.bin", 8192);
	c.fk->per_poll = 1;
	c.fk->gone_path = "big.bin";
	c.fk->gone_off = 2048;
	is_int(tc_run(&c), 0, "cancel: run");
	is_int(c.res->failed, 1, "cancel: the file failed (gone: no retry)");
	ok(c.res->nerrors == 1 && strcmp(c.res->errors[0].op, "vanished") ==
	    0, "cancel: reported as vanished upstream");
	is_int(c.fk->ends, 2, "cancel: two ranges ended");
	is_int(c.fk->cancels, 2, "cancel: the other two were cancelled");
	is_int(tc_dest_entries(&c), 0, "cancel: nothing published");
	tc_books(&c, "cancel");
	tc_free(&c);

	/* A refused submit: the ranges already submitted are cancelled. */
	tc_init(&c, 0);
	tc_file(&c, "big.bin", 8192);
	c.fk->refuse_at = 3;
	is_int(tc_run(&c), BM_ENOMEM, "refused submit: the run fails");
	is_int(c.fk->submits, 2, "refused submit: two ranges were submitted");
	is_int(c.fk->cancels, 2, "refused submit: both cancelled");
	is_int(tc_dest_entries(&c), 0, "refused submit: no temp file left");
	tc_books(&c, "refused submit");
	tc_free(&c);

	/* A stop abandons the files in flight; the run says so. */
	tc_init(&c, 0);
	tc_file(&c, "big.bin", 8192);
	tc_file(&c, "cig.bin", 8192);
	c.fk->per_poll = 1;
	c.fk->stop = &c.stop;
	c.fk->stop_after = 1;
	is_int(tc_run(&c), BM_EINTR, "stop: the run is interrupted");
	is_int(c.res->fetched, 0, "stop: nothing fetched");
	ok(c.fk->cancels > 0, "stop: jobs in flight cancelled");
	is_int(tc_rows(&c, NULL, NULL, 0), 0, "stop: no manifest row");
	is_int(tc_dest_entries(&c), 0, "stop: no temp file left");
	tc_books(&c, "stop");
	tc_free(&c);
}

/*
 * Files of every fate in one run, their jobs ended one per poll: each
 * file ends exactly once (fetched, not modified or failed), and only
 * the fetched ones are published and recorded.
 */
static void
test_finish_once(void)
{
	struct tcase	 c;
	char		 etag[32];

	tc_init(&c, 1);
	tc_file(&c, "a.bin", 8192);	/* ranges */
	tc_file(&c, "b.txt", 10);
	tc_file(&c, "c.txt", 0);	/* empty */
	tc_file(&c, "d.bin", 8192);	/* a range gone */
	tc_file(&c, "e.txt", 50);	/* conditional: not modified */
	c.acts[4].op = ACT_COND_FETCH;
	if (action_more(&c.acts[4]) == NULL ||
	    (c.acts[4].more->etag = strdup("\"v1\"")) == NULL)
		tap_bail("out of memory");
	c.fk->per_poll = 1;
	c.fk->fail_n = 1;		/* the first job fails once */
	c.fk->gone_path = "d.bin";
	c.fk->gone_off = 6144;
	is_int(tc_run(&c), 0, "finish once: run");
	action_more_free(&c.acts[4]);
	is_int(c.res->fetched, 3, "finish once: three fetched");
	is_int(c.res->failed, 1, "finish once: one failed");
	is_int(c.fk->not_modified, 1, "finish once: one not modified");
	ok(tc_same(&c, "a.bin") && tc_same(&c, "b.txt") &&
	    tc_same(&c, "c.txt"), "finish once: the fetched files as served");
	is_int(tc_dest_entries(&c), 3, "finish once: only they in dest");
	is_int(tc_rows(&c, "d.bin", etag, sizeof(etag)), 4, "finish once: a "
	    "manifest row per file fetched or not modified");
	is_str(etag, "-", "finish once: none for the failed file");
	ok(c.fk->max_active <= 4 * 4 + 4, "finish once: at most concurrency "
	    "files of streams ranges (and checks) in flight");
	tc_books(&c, "finish once");
	tc_free(&c);
}

int
main(void)
{
	log_init(true, -1);
	test_ranges();
	test_nets();
	test_ignored_range();
	test_retries();
	test_changed();
	test_cancel();
	test_finish_once();
	test_digest_follows();
	test_digest_scattered();
	return done_testing();
}
