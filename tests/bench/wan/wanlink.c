/*
 * tests/bench/wan/wanlink.c: a user-space wide-area link between two
 * network namespaces, for kernels without the netem qdisc.
 *
 * It creates one TUN device (IFF_TUN, no packet info) inside each of two
 * named namespaces (ip netns, /run/netns/NAME) and forwards IP packets
 * between them through the model of wanmodel.h, one struct wl_path per
 * direction: a->b and b->a.  The devices live as long as this process:
 * when it exits, for any reason, the kernel removes them.  It configures
 * nothing: the caller (netns.sh) adds the addresses and brings the links
 * up once both devices exist.
 *
 * One thread, one ppoll loop: read every packet that is ready on either
 * device (up to a batch), admit it into the other direction's FIFO (a ring
 * of MTU-sized slots; a full ring drops the packet and counts it), then
 * write out every packet whose due time has come, then sleep until the
 * next due time.  Timer slack is set to 1 ns so that delays are kept to
 * tens of microseconds.  SIGINT/SIGTERM end the loop; the counters of both
 * directions go to stderr at exit and on SIGUSR1.
 *
 *	wanlink -a NS_A -b NS_B [-d DEV] [options]
 *
 * Build: cc -O2 -o wanlink wanlink.c (netns.sh does this).  Needs
 * CAP_SYS_ADMIN (setns) and CAP_NET_ADMIN (TUNSETIFF).
 */
#include <sys/ioctl.h>
#include <sys/prctl.h>

#include <linux/if.h>
#include <linux/if_tun.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wanmodel.h"

#define WL_BATCH	64		/* packets read per device per wakeup */

/* One direction's FIFO of admitted packets, in delivery order. */
struct wl_ring {
	uint8_t		*buf;		/* nslots * slot bytes, owned */
	uint32_t	*len;		/* packet length per slot, owned */
	uint64_t	*due;		/* delivery time per slot, owned */
	size_t		 nslots;	/* capacity in packets */
	size_t		 slot;		/* bytes per slot (the MTU) */
	size_t		 head;		/* next to deliver */
	size_t		 count;		/* packets queued */
	uint64_t	 n_full;	/* packets dropped: ring full */
	uint64_t	 n_werr;	/* packets the out device refused */
};

struct wl_opts {
	const char	*ns_a;		/* namespace of device a */
	const char	*ns_b;		/* namespace of device b */
	const char	*dev;		/* device name in both namespaces */
	size_t		 mtu;		/* bytes */
	size_t		 slots;		/* ring capacity per direction */
	uint64_t	 seed;		/* RNG seed */
	int		 loss_dirs;	/* bit 0: a->b, bit 1: b->a */
	struct wl_params p;		/* link model */
};

static volatile sig_atomic_t wl_stop, wl_dump;

static void
wl_on_signal(int sig)
{
	if (sig == SIGUSR1)
		wl_dump = 1;
	else
		wl_stop = 1;
}

static uint64_t
wl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void
usage(void)
{
	fprintf(stderr,
"usage: wanlink -a NS_A -b NS_B [-d DEV] [--delay MS] [--rate MBIT]\n"
"               [--limit BYTES] [--loss PCT | --ge P,R[,LB[,LG]]]\n"
"               [--loss-dir both|ab|ba] [--mtu N] [--slots N] [--seed N]\n"
"  --delay MS     one-way delay in each direction (RTT = 2 x MS), may be\n"
"                 fractional (default 0)\n"
"  --rate MBIT    bottleneck in each direction, Mbit/s (default 0: none)\n"
"  --limit BYTES  bottleneck queue, tail drop (default one BDP: rate x 2 x\n"
"                 delay, at least 64 KiB)\n"
"  --loss PCT     Bernoulli loss in percent\n"
"  --ge P,R[,LB[,LG]]  Gilbert-Elliott loss: P(good->bad), P(bad->good)\n"
"                 in percent, loss in bad (default 100) and good (0) state\n"
"  --loss-dir     which directions lose packets (default both)\n");
}

/* Parse "P,R[,LB[,LG]]" percentages into p's GE fields. */
static int
parse_ge(const char *s, struct wl_params *p)
{
	double v[4] = { 0, 0, 100, 0 };
	int n;

	n = sscanf(s, "%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3]);
	if (n < 2 || v[0] <= 0 || v[0] > 100 || v[1] <= 0 || v[1] > 100 ||
	    v[2] < 0 || v[2] > 100 || v[3] < 0 || v[3] > 100)
		return -1;
	p->ge_p = v[0] / 100;
	p->ge_r = v[1] / 100;
	p->ge_loss_bad = v[2] / 100;
	p->ge_loss_good = v[3] / 100;
	return 0;
}

static int
parse_num(const char *s, double lo, double hi, double *ret)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*ret = v;
	return 0;
}

static int
parse_opts(int argc, char *argv[], struct wl_opts *o)
{
	static const struct option lo[] = {
		{ "delay", required_argument, NULL, 'D' },
		{ "rate", required_argument, NULL, 'R' },
		{ "limit", required_argument, NULL, 'L' },
		{ "loss", required_argument, NULL, 'l' },
		{ "ge", required_argument, NULL, 'g' },
		{ "loss-dir", required_argument, NULL, 'x' },
		{ "mtu", required_argument, NULL, 'm' },
		{ "slots", required_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 }
	};
	double v;
	int c, limit_set = 0;

	while ((c = getopt_long(argc, argv, "a:b:d:", lo, NULL)) != -1) {
		v = 0;
		switch (c) {
		case 'a': o->ns_a = optarg; break;
		case 'b': o->ns_b = optarg; break;
		case 'd': o->dev = optarg; break;
		case 'D':
			if (parse_num(optarg, 0, 10000, &v) == -1)
				return -1;
			o->p.delay_ns = (uint64_t)(v * 1e6);
			break;
		case 'R':
			if (parse_num(optarg, 0, 1e6, &v) == -1)
				return -1;
			o->p.rate_bps = (uint64_t)(v * 1e6);
			break;
		case 'L':
			if (parse_num(optarg, 0, 1e10, &v) == -1)
				return -1;
			o->p.limit_bytes = (uint64_t)v;
			limit_set = 1;
			break;
		case 'l':
			if (parse_num(optarg, 0, 100, &v) == -1)
				return -1;
			o->p.loss = v / 100;
			break;
		case 'g':
			if (parse_ge(optarg, &o->p) == -1)
				return -1;
			break;
		case 'x':
			if (strcmp(optarg, "both") == 0)
				o->loss_dirs = 3;
			else if (strcmp(optarg, "ab") == 0)
				o->loss_dirs = 1;
			else if (strcmp(optarg, "ba") == 0)
				o->loss_dirs = 2;
			else
				return -1;
			break;
		case 'm':
			if (parse_num(optarg, 576, 65535, &v) == -1)
				return -1;
			o->mtu = (size_t)v;
			break;
		case 's':
			if (parse_num(optarg, 16, 1 << 22, &v) == -1)
				return -1;
			o->slots = (size_t)v;
			break;
		case 'S':
			if (parse_num(optarg, 0, 1e18, &v) == -1)
				return -1;
			o->seed = (uint64_t)v;
			break;
		default:
			return -1;
		}
	}
	if (optind != argc || o->ns_a == NULL || o->ns_b == NULL ||
	    strlen(o->dev) >= IFNAMSIZ)
		return -1;
	if (!limit_set && o->p.rate_bps > 0) {
		o->p.limit_bytes = (uint64_t)((double)o->p.rate_bps / 8 *
		    2 * (double)o->p.delay_ns / 1e9);
		if (o->p.limit_bytes < 65536)
			o->p.limit_bytes = 65536;
	}
	return 0;
}

/*
 * Create TUN device dev inside namespace ns (by name, /run/netns/ns) and
 * return its non-blocking fd; the calling thread returns to its own
 * namespace.  -1 and a message on failure.
 */
static int
tun_open_in(const char *ns, const char *dev)
{
	char path[256];
	struct ifreq ifr;
	int self, nsfd, fd = -1;

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	if ((self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) == -1 ||
	    (nsfd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		fprintf(stderr, "wanlink: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (setns(nsfd, CLONE_NEWNET) == -1) {
		fprintf(stderr, "wanlink: setns %s: %s\n", ns, strerror(errno));
		goto out;
	}
	if ((fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)) ==
	    -1) {
		fprintf(stderr, "wanlink: /dev/net/tun: %s\n", strerror(errno));
		goto back;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	if (ioctl(fd, TUNSETIFF, &ifr) == -1) {
		fprintf(stderr, "wanlink: TUNSETIFF %s in %s: %s\n", dev, ns,
		    strerror(errno));
		close(fd);
		fd = -1;
	}
back:
	if (setns(self, CLONE_NEWNET) == -1) {
		fprintf(stderr, "wanlink: setns back: %s\n", strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
out:
	close(nsfd);
	close(self);
	return fd;
}

static int
ring_init(struct wl_ring *r, size_t nslots, size_t slot)
{
	memset(r, 0, sizeof(*r));
	r->nslots = nslots;
	r->slot = slot;
	r->buf = malloc(nslots * slot);
	r->len = calloc(nslots, sizeof(*r->len));
	r->due = calloc(nslots, sizeof(*r->due));
	return r->buf && r->len && r->due ? 0 : -1;
}

static void
ring_free(struct wl_ring *r)
{
	free(r->buf);
	free(r->len);
	free(r->due);
}

/*
 * Read up to WL_BATCH packets from fd into ring r through model w.
 */
static void
pump_in(int fd, struct wl_path *w, struct wl_ring *r)
{
	size_t i, tail;
	ssize_t n;
	uint64_t due;
	static uint8_t scratch[65536];
	uint8_t *dst;

	for (i = 0; i < WL_BATCH; i++) {
		tail = (r->head + r->count) % r->nslots;
		dst = r->count < r->nslots ? r->buf + tail * r->slot : scratch;
		n = read(fd, dst, r->slot);
		if (n <= 0)
			return;
		if (dst == scratch) {
			r->n_full++;
			continue;
		}
		if (wl_admit(w, wl_now(), (size_t)n, &due) != WL_PASS)
			continue;
		r->len[tail] = (uint32_t)n;
		r->due[tail] = due;
		r->count++;
	}
}

/* Write every packet of r that is due at now to fd. */
static void
pump_out(int fd, struct wl_ring *r, uint64_t now)
{
	while (r->count > 0 && r->due[r->head] <= now) {
		if (write(fd, r->buf + r->head * r->slot, r->len[r->head]) < 0)
			r->n_werr++;
		r->head = (r->head + 1) % r->nslots;
		r->count--;
	}
}

static void
dump(const char *name, const struct wl_path *w, const struct wl_ring *r)
{
	fprintf(stderr, "wanlink %s: in %" PRIu64 " pass %" PRIu64
	    " loss %" PRIu64 " taildrop %" PRIu64 " ringfull %" PRIu64
	    " werr %" PRIu64 " bytes %" PRIu64 " queued %zu\n", name,
	    w->n_in, w->n_pass, w->n_loss, w->n_drop, r->n_full, r->n_werr,
	    w->bytes_pass, r->count);
}

static void
run(int fd[2], struct wl_path w[2], struct wl_ring r[2])
{
	struct pollfd pfd[2];
	struct timespec ts, *tsp;
	uint64_t now, next;
	int i;

	pfd[0] = (struct pollfd){ .fd = fd[0], .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = fd[1], .events = POLLIN };
	while (!wl_stop) {
		now = wl_now();
		/* r[0] carries a->b: read from fd[0], written to fd[1]. */
		pump_out(fd[1], &r[0], now);
		pump_out(fd[0], &r[1], now);
		next = UINT64_MAX;
		for (i = 0; i < 2; i++)
			if (r[i].count > 0 && r[i].due[r[i].head] < next)
				next = r[i].due[r[i].head];
		tsp = NULL;
		if (next != UINT64_MAX) {
			next = next > now ? next - now : 0;
			ts.tv_sec = (time_t)(next / 1000000000ULL);
			ts.tv_nsec = (long)(next % 1000000000ULL);
			tsp = &ts;
		}
		if (ppoll(pfd, 2, tsp, NULL) > 0) {
			if (pfd[0].revents & POLLIN)
				pump_in(fd[0], &w[0], &r[0]);
			if (pfd[1].revents & POLLIN)
				pump_in(fd[1], &w[1], &r[1]);
		}
		if (wl_dump) {
			wl_dump = 0;
			dump("a->b", &w[0], &r[0]);
			dump("b->a", &w[1], &r[1]);
		}
	}
}

int
main(int argc, char *argv[])
{
	struct wl_opts o = { .dev = "bmwan0", .mtu = 1500, .slots = 32768,
	    .seed = 1, .loss_dirs = 3 };
	struct wl_params pl;
	struct wl_path w[2];
	struct wl_ring r[2];
	struct sigaction sa;
	int fd[2], i;

	if (parse_opts(argc, argv, &o) == -1) {
		usage();
		return 2;
	}
	if ((fd[0] = tun_open_in(o.ns_a, o.dev)) == -1 ||
	    (fd[1] = tun_open_in(o.ns_b, o.dev)) == -1)
		return 1;
	for (i = 0; i < 2; i++) {
		pl = o.p;
		if ((o.loss_dirs & (1 << i)) == 0)
			pl.loss = pl.ge_p = 0;
		wl_path_init(&w[i], &pl, o.seed * 2 + (uint64_t)i);
		if (ring_init(&r[i], o.slots, o.mtu) == -1) {
			fprintf(stderr, "wanlink: out of memory\n");
			return 1;
		}
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = wl_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	fprintf(stderr, "wanlink: %s <-> %s dev %s delay %.3f ms rate %.1f "
	    "Mbit/s limit %" PRIu64 " B loss %.4f%% ge %.4f%%/%.4f%% dirs %d\n",
	    o.ns_a, o.ns_b, o.dev, (double)o.p.delay_ns / 1e6,
	    (double)o.p.rate_bps / 1e6, o.p.limit_bytes, o.p.loss * 100,
	    o.p.ge_p * 100, o.p.ge_r * 100, o.loss_dirs);
	run(fd, w, r);
	dump("a->b", &w[0], &r[0]);
	dump("b->a", &w[1], &r[1]);
	for (i = 0; i < 2; i++) {
		ring_free(&r[i]);
		close(fd[i]);
	}
	return 0;
}
