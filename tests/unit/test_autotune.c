/*
 * Unit tests of agent/sched/autotune.c: the sizing rule tune_size() (RTT,
 * per-connection and path rates, max_connections, HTTP/2, the planned
 * file sizes -> concurrency and streams), the tcp_rmem parser, and the
 * tuner fed with jobs by hand.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

#include "biomirror/autotune.h"
#include "biomirror/error.h"
#include "biomirror/xfer.h"

static struct tune_in
base(void)
{
	struct tune_in	 in;

	memset(&in, 0, sizeof(in));
	in.rtt_us = -1;
	in.max_connections = 8;
	in.streams = 4;
	return in;
}

static void
test_streams(void)
{
	struct tune_in	 in = base();
	struct tune_out	 out;

	in.nlarge = 1;
	tune_size(&in, &out);
	is_int(out.streams, 4, "one large file: start at streams");
	ok(!out.streams_settled, "room to grow: not settled");
	in.measured = true;
	tune_size(&in, &out);
	is_int(out.streams, 6, "first step: half again");
	in.streams = 6, in.prev_streams = 4, in.gain = 1.3;
	tune_size(&in, &out);
	is_int(out.streams, 8, "gain 30%%: step, capped at max_connections");
	ok(out.streams_settled == false, "a step was taken");
	in.streams = 8, in.prev_streams = 6, in.gain = 1.5;
	tune_size(&in, &out);
	is_int(out.streams, 8, "at max_connections: stays");
	ok(out.streams_settled, "at the cap: settled");
	in.streams = 6, in.prev_streams = 4, in.gain = 1.05;
	tune_size(&in, &out);
	is_int(out.streams, 4, "gain 5%%: back to the previous value");
	ok(out.streams_settled, "no gain: settled");

	in = base();
	in.nlarge = 2;
	in.max_connections = 2;
	tune_size(&in, &out);
	is_int(out.streams, 1, "two files, two connections: one stream each");
	ok(out.streams_settled, "nothing to grow");
	in = base();
	in.nlarge = 100;
	in.max_connections = 16;
	in.streams = 64;
	tune_size(&in, &out);
	is_int(out.streams, 1, "many large files: share 1 (16 in flight)");
	in = base();
	in.nlarge = 1;
	in.max_connections = 256;
	in.streams = 64;
	in.measured = true;
	tune_size(&in, &out);
	is_int(out.streams, 64, "never above the config bound 64");
	in = base();
	in.nlarge = 3;
	in.max_connections = 8;
	in.streams = 2;
	in.measured = true;
	tune_size(&in, &out);
	is_int(out.streams, 2, "share 8/3 = 2: no step");
	ok(out.streams_settled, "at the share: settled");
	ok(out.streams * 3 <= 8, "streams x large files within max_connections");
}

static void
test_concurrency(void)
{
	struct tune_in	 in = base();
	struct tune_out	 out;

	tune_size(&in, &out);
	is_int(out.concurrency, 8, "nothing measured: max_connections");
	/* 2,000 x 100 KB at 100 ms, 6.25 MB/s per connection, HTTP/1.1. */
	in.rtt_us = 100000;
	in.conn_rate = 6.25e6;
	in.nsmall = 2000;
	in.small_bytes = 2000 * 100000ULL;
	tune_size(&in, &out);
	is_int(out.concurrency, 8, "HTTP/1.1: capped at max_connections");
	in.multiplex = true;
	tune_size(&in, &out);
	/* rate 50 MB/s / 100 KB = 500 files/s x (0.1 + 0.016 s) = 58. */
	is_int(out.concurrency, 58, "HTTP/2: RTT x request rate (Little)");
	in.path_rate = 100e6;
	tune_size(&in, &out);
	is_int(out.concurrency, 116, "a faster path observed: more in flight");
	in.rtt_us = 10000000;
	tune_size(&in, &out);
	/* 32 MiB / (100,000 + 64 KiB) = 202 files of 100 KB in memory. */
	is_int(out.concurrency, 202, "memory bound: 32 MiB of small files");
	in.small_bytes = 2000 * 1000ULL;	/* 1 KB files */
	in.max_connections = 4;
	tune_size(&in, &out);
	is_int(out.concurrency, 400, "HTTP/2 cap: 100 streams x 4 connections");
	in.max_connections = 64;
	tune_size(&in, &out);
	/* 32 MiB / (1,000 + 64 KiB) = 504, below 100 x 64 and 1024. */
	is_int(out.concurrency, 504, "memory bound with 64 connections");
	in.small_bytes = 2000 * 100ULL;	/* 100-byte files */
	tune_size(&in, &out);
	/* 32 MiB / (100 + 64 KiB) = 511: 64 KiB per request bounds it. */
	is_int(out.concurrency, 511, "at most 511 requests in 32 MiB");
	ok(out.concurrency <= 1024, "never above the config bound 1024");
	in.max_connections = 8;
	in.small_bytes = 2000 * 100000000ULL;	/* 100 MB "small" files */
	tune_size(&in, &out);
	is_int(out.concurrency, 8, "memory bound, but never below max_connections");
	/* A slow path: fewer files suffice. */
	in = base();
	in.multiplex = true;
	in.rtt_us = 1000;
	in.conn_rate = 1e6;
	in.nsmall = 10;
	in.small_bytes = 10 * 1000000ULL;
	tune_size(&in, &out);
	/* 8 MB/s / 1 MB = 8 files/s x (0.001 + 1 s) = 8.008 -> 9. */
	is_int(out.concurrency, 9, "1 MB files at 1 MB/s: 9 in flight");
	/*
	 * HTTP/2, small files only (no body long enough for a rate): one
	 * receive window's worth of files; HTTP/1.1 stays at 8.
	 */
	in = base();
	in.rtt_us = 100000;
	in.rmem_max = 6291456;
	in.nsmall = 2000;
	in.small_bytes = 2000 * 102400ULL;
	in.path_rate = 7e6;
	tune_size(&in, &out);
	/* 7 MB/s / 102400 x 0.1 s = 6.8 -> 7, but never below 8. */
	is_int(out.concurrency, 8, "HTTP/1.1: never below max_connections");
	in.multiplex = true;
	tune_size(&in, &out);
	/* 6291456 / 0.1 s = 62.9 MB/s / 102400 = 614 files/s x 0.1 s = 62. */
	is_int(out.concurrency, 62, "HTTP/2, no rate: fill one receive window");
	in.rmem_max = 0;
	in.path_rate = 20e6;
	tune_size(&in, &out);
	/* 20 MB/s / 102400 x 0.1 s = 19.5 -> 20. */
	is_int(out.concurrency, 20, "tcp_rmem unknown: the measured path rate");
	in.rmem_max = 6291456;
	in.rtt_us = -1;
	tune_size(&in, &out);
	is_int(out.concurrency, 8, "RTT unknown: max_connections");
	/* Large files only: enough for their ranges to use 8 connections. */
	in = base();
	in.nlarge = 10;
	in.max_connections = 8;
	in.streams = 1;
	in.rtt_us = 50000;
	in.conn_rate = 1e7;
	tune_size(&in, &out);
	is_int(out.streams, 1, "ten large files: one stream each");
	is_int(out.concurrency, 8, "eight of them in flight");
}

static void
test_rmem(void)
{
	uint64_t	 max = 0;

	is_int(tune_parse_rmem("4096\t131072\t6291456\n", &max), 0,
	    "tcp_rmem parses");
	is_int(max, 6291456, "third value");
	is_int(tune_parse_rmem("4096 131072\n", &max), BM_EINVAL, "two values");
	is_int(tune_parse_rmem("4096 131072 x\n", &max), BM_EINVAL, "garbage");
	is_int(tune_parse_rmem("1 2 3 4\n", &max), BM_EINVAL, "four values");
	is_int(tune_parse_rmem("1 2 0\n", &max), BM_EINVAL, "zero ceiling");
}

static void
test_tuner(void)
{
	struct tune_opts o;
	struct tune	*t = NULL;
	struct tune_result r;
	struct xfer_job	 j;
	int		 i;

	memset(&o, 0, sizeof(o));
	o.name = "m";
	o.conc_auto = true;
	o.streams_auto = true;
	o.concurrency = 8;
	o.streams = 4;
	o.max_connections = 8;
	o.min_split = 16 << 20;
	o.rmem_path = "/nonexistent/tcp_rmem";
	is_int(tune_new(&o, &t), 0, "tune_new");
	tune_plan(t, 1LL << 30);
	tune_plan(t, 100000);
	/* One large file: its share is every connection, from the start. */
	is_int(tune_streams(t), 8, "starts at the share of max_connections");
	is_int(tune_concurrency(t), 8, "starts at the configured concurrency");
	memset(&j, 0, sizeof(j));
	j.res.cls = XFER_OK;
	j.res.bytes = 4 << 20;
	j.res.path.rtt_us = 20000;
	j.res.path.body_us = 400000;	/* 10.5 MB/s */
	for (i = 0; i < 5; i++)
		tune_job(t, &j);
	tune_result(t, &r);
	is_int(r.rtt_us, 20000, "median RTT");
	is_int((long long)r.conn_rate, 10485760, "median rate");
	is_int(r.concurrency, 8, "HTTP/1.1: max_connections");
	/* Windows: 1 s each; large-file rate 10 MB/s, then 20, then 30. */
	tune_tick(t, 1000000000LL);
	tune_bytes(t, 10000000, true);
	tune_tick(t, 2000000000LL);
	is_int(tune_streams(t), 8, "first measured window: at the share, stays");
	tune_bytes(t, 20000000, true);
	tune_tick(t, 3000000000LL);
	tune_bytes(t, 30000000, true);
	tune_tick(t, 4000000000LL);
	is_int(tune_streams(t), 8, "at max_connections: stays");
	tune_result(t, &r);
	ok(r.settled, "at max_connections: settled");
	is_int((long long)r.path_rate, 30000000, "best window rate");
	is_int(tune_max_concurrency(t), 800, "upper bound for batch sizing");
	tune_finish(t);
	tune_free(t);
	tune_free(NULL);

	/* Fixed values pass through. */
	o.conc_auto = o.streams_auto = false;
	o.concurrency = 3;
	o.streams = 2;
	is_int(tune_new(&o, &t), 0, "tune_new fixed");
	tune_plan(t, 1LL << 30);
	is_int(tune_concurrency(t), 3, "fixed concurrency");
	is_int(tune_streams(t), 2, "fixed streams");
	is_int(tune_max_concurrency(t), 3, "fixed bound");
	tune_free(t);
}

int
main(void)
{
	test_streams();
	test_concurrency();
	test_rmem();
	test_tuner();
	return done_testing();
}
