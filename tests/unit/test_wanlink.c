/*
 * Unit tests of the WAN emulator's link model (tests/bench/wan/wanmodel.h,
 * used by tests/bench/wan/wanlink.c): delay, serialisation at the
 * bottleneck rate, tail drop at the queue bound, Bernoulli loss and
 * Gilbert-Elliott bursts.  Pure arithmetic on a seeded RNG, no namespaces
 * and no clock: the statistical checks are deterministic for the seed and
 * use bounds of several standard deviations all the same.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../bench/wan/wanmodel.h"
#include "tap.h"

#define MS	1000000ULL		/* ns */

/* |x|, without libm (the unit tests do not link it). */
static double
dabs(double x)
{
	return x < 0 ? -x : x;
}

static void
test_delay(void)
{
	struct wl_params p = { .delay_ns = 50 * MS };
	struct wl_path w;
	uint64_t due = 0;

	wl_path_init(&w, &p, 1);
	is_int(wl_admit(&w, 1000, 1500, &due), WL_PASS, "no rate: pass");
	is_int(due, 1000 + 50 * MS, "no rate: due = arrival + delay");
	is_int(wl_admit(&w, 1000, 1500, &due), WL_PASS, "no rate: no queue");
	is_int(due, 1000 + 50 * MS, "no rate: same arrival, same due");
	is_int(wl_backlog(&w, 1000), 0, "no rate: no backlog");
}

static void
test_rate(void)
{
	/* 10 Mbit/s: 1250 bytes take exactly 1 ms. */
	struct wl_params p = { .delay_ns = 5 * MS, .rate_bps = 10000000,
	    .limit_bytes = 5000 };
	struct wl_path w;
	uint64_t due = 0;
	int i, v;

	wl_path_init(&w, &p, 1);
	for (i = 1; i <= 4; i++) {
		v = wl_admit(&w, 0, 1250, &due);
		is_int(v, WL_PASS, "burst packet %d fits the queue", i);
		is_int(due, (uint64_t)i * MS + 5 * MS,
		    "packet %d leaves after %d ms of serialisation + delay",
		    i, i);
	}
	is_int(wl_backlog(&w, 0), 5000, "backlog 5000 bytes at t=0");
	due = 7;
	is_int(wl_admit(&w, 0, 1250, &due), WL_TAILDROP,
	    "fifth packet: tail drop");
	is_int(due, 7, "tail drop leaves due alone");
	is_int(wl_backlog(&w, 1 * MS), 3750, "one packet sent after 1 ms");
	is_int(wl_admit(&w, 1 * MS, 1250, &due), WL_PASS,
	    "room again after 1 ms");
	is_int(due, 5 * MS + 5 * MS, "queued behind the other four");
	is_int(wl_admit(&w, 20 * MS, 1250, &due), WL_PASS, "idle link");
	is_int(due, 21 * MS + 5 * MS, "idle link: no queueing delay");
	is_int(w.n_in, 7, "7 offered");
	is_int(w.n_pass, 6, "6 passed");
	is_int(w.n_drop, 1, "1 tail drop");
	is_int(w.bytes_pass, 6 * 1250, "bytes passed");
}

static void
test_bernoulli(void)
{
	struct wl_params p = { .loss = 0.01 };
	struct wl_path w;
	uint64_t due;
	const int n = 1000000;
	double sd;
	int i, lost = 0;

	wl_path_init(&w, &p, 42);
	for (i = 0; i < n; i++)
		if (wl_admit(&w, 0, 100, &due) == WL_LOSS)
			lost++;
	sd = 99.5;	/* sqrt(n * 0.01 * 0.99) */
	ok(dabs(lost - n * 0.01) <= 4 * sd,
	    "Bernoulli 1%%: %d of %d lost (expect %d +- %.0f)", lost, n,
	    (int)(n * 0.01), 4 * sd);
	is_int(w.n_loss, lost, "losses counted");

	p.loss = 0;
	wl_path_init(&w, &p, 42);
	for (i = lost = 0; i < 10000; i++)
		lost += wl_admit(&w, 0, 100, &due) == WL_LOSS;
	is_int(lost, 0, "loss 0: nothing lost");
	p.loss = 1;
	wl_path_init(&w, &p, 42);
	for (i = lost = 0; i < 10000; i++)
		lost += wl_admit(&w, 0, 100, &due) == WL_LOSS;
	is_int(lost, 10000, "loss 100%%: everything lost");
}

static void
test_gilbert_elliott(void)
{
	/* P(good->bad) 1%, P(bad->good) 20%: loss 1/21, bursts of 5. */
	struct wl_params p = { .ge_p = 0.01, .ge_r = 0.2, .ge_loss_bad = 1 };
	struct wl_path w;
	uint64_t due;
	const int n = 1000000;
	double rate, burst;
	int i, lost = 0, runs = 0;
	bool prev = false, l;

	wl_path_init(&w, &p, 7);
	for (i = 0; i < n; i++) {
		l = wl_admit(&w, 0, 100, &due) == WL_LOSS;
		if (l && !prev)
			runs++;
		lost += l;
		prev = l;
	}
	rate = (double)lost / n;
	burst = runs ? (double)lost / runs : 0;
	ok(dabs(rate - 1.0 / 21) < 0.1 / 21,
	    "GE loss rate %.4f (expect %.4f +- 10%%)", rate, 1.0 / 21);
	ok(dabs(burst - 5) < 0.5, "GE mean burst %.2f (expect 5 +- 0.5)",
	    burst);

	/* Same seed, same sequence: runs are reproducible. */
	wl_path_init(&w, &p, 7);
	for (i = runs = 0; i < n; i++)
		runs += wl_admit(&w, 0, 100, &due) == WL_LOSS;
	is_int(runs, lost, "same seed: same losses");
}

int
main(void)
{
	test_delay();
	test_rate();
	test_bernoulli();
	test_gilbert_elliott();
	return done_testing();
}
