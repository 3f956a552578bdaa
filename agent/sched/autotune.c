/*
 * concurrency = auto, streams = auto (see include/biomirror/autotune.h):
 * medians of the last TUNE_SAMPLES RTTs and body times per job, the
 * aggregate rate over windows of max(1 s, 8 RTT), a re-size with
 * tune_size() at each window's end.  What is measured, how streams step
 * and why SO_RCVBUF is never set: docs/internals.md, "Auto sizing".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "biomirror/autotune.h"
#include "biomirror/error.h"
#include "biomirror/log.h"
#include "biomirror/xfer.h"

#define NS		1000000000LL
#define TUNE_SAMPLES	64		/* measurements kept (ring) */
#define TUNE_RTT_MIN	4		/* RTT samples before sizing concurrency */
#define TUNE_RATE_BYTES	(256 * 1024)	/* smallest body that gives a rate */
#define TUNE_RATE_US	1000		/* ... and shortest body time */
#define TUNE_WINDOW_NS	NS		/* shortest measuring window */
#define RMEM_PATH	"/proc/sys/net/ipv4/tcp_rmem"

struct tune {
	struct tune_opts o;		/* copy; strings borrowed */
	uint64_t	 rmem_max;	/* tcp_rmem ceiling in bytes, 0 unknown */
	int64_t		 rtt[TUNE_SAMPLES]; /* ring of RTT samples, us */
	size_t		 nrtt;		/* samples taken (ring index mod) */
	double		 rate[TUNE_SAMPLES]; /* ring of per-connection rates */
	size_t		 nrate;
	bool		 multiplex;	/* a job came over HTTP/2 */
	uint64_t	 nlarge, nsmall, small_bytes; /* planned files */
	unsigned	 conc;		/* files in flight now */
	unsigned	 streams;	/* ranges per large file now */
	unsigned	 prev_streams;	/* before the last step, 0 none */
	double		 base_rate;	/* large-file rate before the last step */
	double		 path_rate;	/* best aggregate rate of a window */
	bool		 measured;	/* a window at the current streams was judged */
	unsigned	 skip;		/* windows not to judge (after a step) */
	bool		 streams_settled;
	bool		 conc_sized;	/* concurrency sized from a measured RTT */
	bool		 logged;	/* the settled choice was logged */
	int64_t		 log_rtt;	/* ... the RTT it was made from, us */
	double		 log_rate;	/* ... and the per-connection rate */
	int64_t		 win_start;	/* monotonic ns, 0 before the first tick */
	uint64_t	 win_bytes;	/* body bytes in this window */
	uint64_t	 win_split;	/* ... of files fetched in ranges */
};

static unsigned
clampu(uint64_t v, unsigned lo, unsigned hi)
{
	if (v < lo)
		return lo;
	if (v > hi)
		return hi;
	return (unsigned)v;
}

void
tune_size(const struct tune_in *in, struct tune_out *out)
{
	unsigned	 maxc = in->max_connections ? in->max_connections : 1;
	unsigned	 share, cur, next, capc;
	uint64_t	 users, need, memcap;
	double		 rate, mean, per, n;

	/* streams: a share of the connections per large file in flight. */
	users = in->nlarge < maxc ? in->nlarge : maxc;
	share = clampu(users ? maxc / users : maxc, 1, TUNE_MAX_STREAMS);
	cur = clampu(in->streams, 1, TUNE_MAX_STREAMS);
	out->streams_settled = false;
	if (!in->measured) {
		out->streams = cur < share ? cur : share;
		out->streams_settled = in->nlarge > 0 && cur >= share;
	} else if (in->prev_streams > 0 && in->gain <= TUNE_GAIN) {
		out->streams = in->prev_streams < share ? in->prev_streams :
		    share;
		out->streams_settled = true;
	} else {
		next = cur + (cur / 2 > 1 ? cur / 2 : 1);
		out->streams = next < share ? next : share;
		out->streams_settled = out->streams <= cur;
	}

	/* concurrency: Little's law over the small files. */
	capc = in->multiplex ? clampu((uint64_t)maxc * TUNE_H2_STREAMS, 1,
	    TUNE_MAX_CONC) : clampu(maxc, 1, TUNE_MAX_CONC);
	rate = in->conn_rate * (double)maxc;
	if (in->path_rate > rate)
		rate = in->path_rate;
	/* HTTP/2, no per-connection rate: fill one receive window. */
	if (in->multiplex && in->conn_rate <= 0 && in->rtt_us > 0 &&
	    in->rmem_max > 0 &&
	    (double)in->rmem_max * 1e6 / (double)in->rtt_us > rate)
		rate = (double)in->rmem_max * 1e6 / (double)in->rtt_us;
	if (in->rtt_us < 0 || rate <= 0 || in->nsmall == 0)
		need = maxc;
	else {
		mean = (double)in->small_bytes / (double)in->nsmall;
		if (mean < 1)
			mean = 1;
		per = (double)in->rtt_us / 1e6;
		if (in->conn_rate > 0)
			per += mean / in->conn_rate;
		n = rate / mean * per;
		if (n >= (double)TUNE_MAX_CONC)
			need = TUNE_MAX_CONC;
		else if ((double)(need = (uint64_t)n) < n)
			need++;		/* round up */
		/* Memory: small files in flight are held in memory. */
		memcap = TUNE_INFLIGHT_BYTES / ((uint64_t)mean + TUNE_REQ_BYTES);
		if (need > memcap)
			need = memcap;
	}
	/*
	 * Never below max_connections: a rate measured with fewer files in
	 * flight than connections would only shrink the next choice.
	 */
	if (need < maxc)
		need = maxc;
	/* Enough large files for their ranges to use every connection. */
	if (in->nlarge > 0 && out->streams > 0 &&
	    need < (maxc + out->streams - 1) / out->streams)
		need = (maxc + out->streams - 1) / out->streams;
	out->concurrency = clampu(need, 1, capc);
}

int
tune_parse_rmem(const char *text, uint64_t *max)
{
	unsigned long long a, b, c;
	char		 extra;

	if (text == NULL ||
	    sscanf(text, "%llu %llu %llu %c", &a, &b, &c, &extra) != 3 ||
	    c == 0)
		return BM_EINVAL;
	*max = c;
	return 0;
}

/* The third value of tcp_rmem, or 0 when it cannot be read. */
static uint64_t
read_rmem(const char *path)
{
	FILE		*fp;
	char		 buf[128];
	uint64_t	 max = 0;

	if ((fp = fopen(path, "re")) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), fp) == NULL ||
	    tune_parse_rmem(buf, &max) != 0)
		max = 0;
	(void)fclose(fp);
	return max;
}

int
tune_new(const struct tune_opts *o, struct tune **ret)
{
	struct tune	*t;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return BM_ENOMEM;
	t->o = *o;
	if (t->o.max_connections == 0)
		t->o.max_connections = 1;
	t->conc = clampu(o->concurrency, 1, TUNE_MAX_CONC);
	t->streams = clampu(o->streams, 1, TUNE_MAX_STREAMS);
	t->rmem_max = read_rmem(o->rmem_path ? o->rmem_path : RMEM_PATH);
	*ret = t;
	return 0;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t	 x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int
cmp_dbl(const void *a, const void *b)
{
	double	 x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int64_t
median_rtt(const struct tune *t)
{
	int64_t	 v[TUNE_SAMPLES];
	size_t	 n = t->nrtt < TUNE_SAMPLES ? t->nrtt : TUNE_SAMPLES;

	if (n == 0)
		return -1;
	memcpy(v, t->rtt, n * sizeof(v[0]));
	qsort(v, n, sizeof(v[0]), cmp_i64);
	return v[n / 2];
}

static double
median_rate(const struct tune *t)
{
	double	 v[TUNE_SAMPLES];
	size_t	 n = t->nrate < TUNE_SAMPLES ? t->nrate : TUNE_SAMPLES;

	if (n == 0)
		return 0;
	memcpy(v, t->rate, n * sizeof(v[0]));
	qsort(v, n, sizeof(v[0]), cmp_dbl);
	return v[n / 2];
}

/* Fill the sizing input from what was measured. */
static void
tune_input(const struct tune *t, struct tune_in *in)
{
	memset(in, 0, sizeof(*in));
	in->rtt_us = median_rtt(t);
	in->conn_rate = median_rate(t);
	in->path_rate = t->path_rate;
	in->max_connections = t->o.max_connections;
	in->multiplex = t->multiplex;
	in->rmem_max = t->rmem_max;
	in->nlarge = t->nlarge;
	in->nsmall = t->nsmall;
	in->small_bytes = t->small_bytes;
	in->streams = t->streams;
	in->prev_streams = t->prev_streams;
	in->measured = t->measured;
}

void
tune_plan(struct tune *t, int64_t size)
{
	struct tune_in	 in;
	struct tune_out	 out;

	if (size >= 0 && t->o.min_split > 0 &&
	    (uint64_t)size >= 2 * t->o.min_split)
		t->nlarge++;
	else {
		t->nsmall++;
		/* Unknown sizes count as small files of 64 KiB. */
		t->small_bytes += size >= 0 ? (uint64_t)size : 64 * 1024;
	}
	/*
	 * Before any measurement: the whole share, so that the planned large
	 * files use every connection from the start (one file of a run gets
	 * max_connections ranges, eight files one each).
	 */
	if (t->o.streams_auto && !t->measured) {
		tune_input(t, &in);
		in.streams = TUNE_MAX_STREAMS;
		tune_size(&in, &out);
		t->streams = out.streams;
		t->streams_settled = out.streams_settled;
	}
}

static bool
tune_settled(const struct tune *t)
{
	return (!t->o.streams_auto || t->streams_settled ||
	    t->nlarge == 0) && (!t->o.conc_auto || t->conc_sized);
}

/* Log the choice (once), with the receive-buffer check. */
static void
tune_log(struct tune *t, const char *how)
{
	int64_t		 rtt = median_rtt(t);
	double		 rate = median_rate(t), bdp;
	char		 r1[48], r2[48];

	if (t->logged)
		return;
	t->logged = true;
	t->log_rtt = rtt;
	t->log_rate = rate;
	if (rtt >= 0)
		(void)snprintf(r1, sizeof(r1), "RTT %.1f ms", rtt / 1000.0);
	else
		(void)snprintf(r1, sizeof(r1), "RTT unknown");
	if (rate > 0)
		(void)snprintf(r2, sizeof(r2), "%.1f MB/s per connection",
		    rate / 1e6);
	else
		(void)snprintf(r2, sizeof(r2), "rate per connection unknown");
	log_info("%s: auto: %s, %s: streams %u, concurrency %u%s",
	    t->o.name ? t->o.name : "", r1, r2, t->streams, t->conc, how);
	bdp = t->path_rate * (rtt > 0 ? (double)rtt : 0) / 1e6;
	if (t->rmem_max > 0 && bdp > (double)t->rmem_max)
		log_warnx("%s: auto: path bandwidth-delay product %.1f MB "
		    "exceeds the receive buffer ceiling %.1f MB "
		    "(net.ipv4.tcp_rmem): one connection cannot fill the "
		    "path; raise the sysctl's third value", t->o.name ?
		    t->o.name : "", bdp / 1e6, (double)t->rmem_max / 1e6);
}

/* Size concurrency (streams unchanged) from the measurements so far. */
static void
tune_conc(struct tune *t)
{
	struct tune_in	 in;
	struct tune_out	 out;

	if (!t->o.conc_auto || median_rtt(t) < 0)
		return;
	tune_input(t, &in);
	in.measured = false;	/* keep streams: only concurrency here */
	tune_size(&in, &out);
	t->conc = out.concurrency;
	t->conc_sized = true;
}

void
tune_job(struct tune *t, const struct xfer_job *job)
{
	const struct xfer_path *p = &job->res.path;

	if (t == NULL)
		return;
	if (p->multiplexed)
		t->multiplex = true;
	if (p->rtt_us > 0)
		t->rtt[t->nrtt++ % TUNE_SAMPLES] = p->rtt_us;
	if (job->res.cls == XFER_OK && job->res.bytes >= TUNE_RATE_BYTES &&
	    p->body_us >= TUNE_RATE_US)
		t->rate[t->nrate++ % TUNE_SAMPLES] =
		    (double)job->res.bytes * 1e6 / (double)p->body_us;
	/* Size concurrency as soon as a few round trips are known. */
	if (t->nrtt == TUNE_RTT_MIN && !t->conc_sized) {
		tune_conc(t);
		if (tune_settled(t))
			tune_log(t, "");
	}
}

void
tune_bytes(struct tune *t, uint64_t n, bool split)
{
	if (t == NULL)
		return;
	t->win_bytes += n;
	if (split)
		t->win_split += n;
}

void
tune_tick(struct tune *t, int64_t now_ns)
{
	struct tune_in	 in;
	struct tune_out	 out;
	int64_t		 rtt, win, dt;
	double		 rate, split;

	if (t == NULL)
		return;
	if (t->win_start == 0) {
		t->win_start = now_ns;
		return;
	}
	rtt = median_rtt(t);
	win = rtt > 0 && rtt * 8000 > TUNE_WINDOW_NS ? rtt * 8000 :
	    TUNE_WINDOW_NS;
	if ((dt = now_ns - t->win_start) < win)
		return;
	rate = (double)t->win_bytes * NS / (double)dt;
	split = (double)t->win_split * NS / (double)dt;
	if (rate > t->path_rate)
		t->path_rate = rate;
	t->win_start = now_ns;
	t->win_bytes = t->win_split = 0;
	if (t->o.streams_auto && !t->streams_settled && split > 0) {
		if (t->skip > 0)
			t->skip--;
		else {
			t->measured = true;
			tune_input(t, &in);
			in.gain = t->prev_streams > 0 && t->base_rate > 0 ?
			    split / t->base_rate : 0;
			tune_size(&in, &out);
			log_debug("%s: auto: %u streams: %.1f MB/s of large "
			    "files; next %u", t->o.name ? t->o.name : "",
			    t->streams, split / 1e6, out.streams);
			if (out.streams != t->streams) {
				t->prev_streams = out.streams_settled ? 0 :
				    t->streams;
				t->base_rate = split;
				t->streams = out.streams;
				t->skip = 1;
			}
			t->streams_settled = out.streams_settled;
		}
	}
	tune_conc(t);
	if (tune_settled(t))
		tune_log(t, "");
}

unsigned
tune_concurrency(const struct tune *t)
{
	return t->o.conc_auto ? t->conc : t->o.concurrency;
}

unsigned
tune_streams(const struct tune *t)
{
	return t->o.streams_auto ? t->streams : t->o.streams;
}

unsigned
tune_max_concurrency(const struct tune *t)
{
	if (!t->o.conc_auto)
		return t->o.concurrency;
	return clampu((uint64_t)t->o.max_connections * TUNE_H2_STREAMS,
	    t->o.concurrency, TUNE_MAX_CONC);
}

void
tune_finish(struct tune *t)
{
	if (t == NULL || t->logged)
		return;
	tune_conc(t);
	tune_log(t, tune_settled(t) ? "" : " (run ended before the choice "
	    "settled)");
}

void
tune_result(const struct tune *t, struct tune_result *r)
{
	r->concurrency = tune_concurrency(t);
	r->streams = tune_streams(t);
	/* The figures the logged choice was made from, as the log says. */
	r->rtt_us = t->logged ? t->log_rtt : median_rtt(t);
	r->conn_rate = t->logged ? t->log_rate : median_rate(t);
	r->path_rate = t->path_rate;
	r->settled = tune_settled(t);
}

void
tune_free(struct tune *t)
{
	free(t);
}
