/*
 * tests/bench/wan/wanmodel.h: the link model of the WAN emulator
 * (wanlink.c), kept apart from the TUN plumbing so that it can be unit
 * tested without namespaces (tests/unit/test_wanlink.c).
 *
 * One struct wl_path models one direction of the link.  Every packet that
 * enters it goes, in this order, through
 *   1. random loss: Bernoulli with probability loss, or a Gilbert-Elliott
 *      two-state chain (the state moves first, good->bad with ge_p and
 *      bad->good with ge_r, then the packet is lost with ge_loss_bad or
 *      ge_loss_good of the new state; mean burst length 1/ge_r, mean loss
 *      ge_p/(ge_p+ge_r) * ge_loss_bad with the defaults);
 *   2. the bottleneck: a FIFO drained at rate_bps (serialisation timing:
 *      a packet of L bytes occupies the link for L*8/rate seconds after the
 *      previous one left), bounded by limit_bytes of backlog (tail drop);
 *   3. a fixed one-way delay after it leaves the bottleneck.
 * wl_admit returns the absolute time at which the packet leaves the far end.
 * Those times never decrease, so a plain FIFO of packets in admission order
 * is also in delivery order.  Times are CLOCK_MONOTONIC nanoseconds.
 * Loss and delay follow the same order as Linux netem + tbf on one
 * interface (netem applies loss at enqueue).
 */
#ifndef BIOMIRROR_WANMODEL_H
#define BIOMIRROR_WANMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* splitmix64: small, seedable, good enough for loss decisions. */
struct wl_rng {
	uint64_t	s;		/* state */
};

struct wl_params {
	uint64_t	delay_ns;	/* one-way delay after the bottleneck */
	uint64_t	rate_bps;	/* bottleneck in bit/s; 0 = unlimited */
	uint64_t	limit_bytes;	/* backlog bound; 0 = unbounded */
	double		loss;		/* Bernoulli loss probability, 0..1 */
	double		ge_p;		/* GE good->bad per packet; 0 = no GE */
	double		ge_r;		/* GE bad->good per packet */
	double		ge_loss_bad;	/* loss probability in the bad state */
	double		ge_loss_good;	/* loss probability in the good state */
};

enum wl_verdict {
	WL_PASS,			/* queued: delivered at *ret_due */
	WL_LOSS,			/* random loss */
	WL_TAILDROP			/* the bottleneck queue was full */
};

struct wl_path {
	struct wl_params p;		/* settings (copied) */
	struct wl_rng	rng;		/* per-direction random stream */
	bool		bad;		/* Gilbert-Elliott state */
	uint64_t	free_at;	/* when the bottleneck has sent all */
	uint64_t	n_in;		/* packets offered */
	uint64_t	n_pass;		/* packets queued for delivery */
	uint64_t	n_loss;		/* random losses */
	uint64_t	n_drop;		/* tail drops */
	uint64_t	bytes_pass;	/* bytes queued for delivery */
};

static inline uint64_t
wl_rand(struct wl_rng *r)
{
	uint64_t z;

	z = (r->s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1), 53 bits. */
static inline double
wl_unif(struct wl_rng *r)
{
	return (double)(wl_rand(r) >> 11) * (1.0 / 9007199254740992.0);
}

/*
 * Set up w with params p (copied) and a seed; the queue starts empty.
 */
static inline void
wl_path_init(struct wl_path *w, const struct wl_params *p, uint64_t seed)
{
	*w = (struct wl_path){ .p = *p, .rng = { seed } };
}

/* Whether the next packet is lost (advances the GE chain). */
static inline bool
wl_lost(struct wl_path *w)
{
	double pl;

	if (w->p.ge_p > 0) {
		if (w->bad) {
			if (wl_unif(&w->rng) < w->p.ge_r)
				w->bad = false;
		} else if (wl_unif(&w->rng) < w->p.ge_p)
			w->bad = true;
		pl = w->bad ? w->p.ge_loss_bad : w->p.ge_loss_good;
		if (pl > 0 && wl_unif(&w->rng) < pl)
			return true;
	}
	return w->p.loss > 0 && wl_unif(&w->rng) < w->p.loss;
}

/*
 * Bytes still waiting for the bottleneck at time now (0 without a rate).
 */
static inline uint64_t
wl_backlog(const struct wl_path *w, uint64_t now)
{
	if (w->p.rate_bps == 0 || w->free_at <= now)
		return 0;
	return (uint64_t)((double)(w->free_at - now) *
	    (double)w->p.rate_bps / 8e9);
}

/*
 * Offer a packet of len bytes arriving at now (ns).  On WL_PASS writes the
 * time it leaves the far end of the link to *ret_due; on loss or tail drop
 * leaves *ret_due alone and counts the packet.
 */
static inline enum wl_verdict
wl_admit(struct wl_path *w, uint64_t now, size_t len, uint64_t *ret_due)
{
	uint64_t start, tx;

	w->n_in++;
	if (wl_lost(w)) {
		w->n_loss++;
		return WL_LOSS;
	}
	if (w->p.rate_bps == 0) {
		*ret_due = now + w->p.delay_ns;
	} else {
		if (w->p.limit_bytes > 0 &&
		    wl_backlog(w, now) + len > w->p.limit_bytes) {
			w->n_drop++;
			return WL_TAILDROP;
		}
		start = w->free_at > now ? w->free_at : now;
		tx = (uint64_t)((double)len * 8e9 / (double)w->p.rate_bps);
		w->free_at = start + tx;
		*ret_due = w->free_at + w->p.delay_ns;
	}
	w->n_pass++;
	w->bytes_pass += len;
	return WL_PASS;
}

#endif
