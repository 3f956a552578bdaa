/*
 * tests/bench/udtperf.cpp: LD_PRELOAD library for the WAN benchmark
 * (tests/bench/wan.sh): samples UDT::perfmon of every UDT socket the
 * process sends or receives on, about once a second, and at close.  It
 * wraps UDT::recv, UDT::send and UDT::close of libudt (biomirror's shim
 * and the gridftp server's UDT driver both call them) and appends one
 * line per sample to $BM_UDT_PERF_LOG (nothing without it).  The figures
 * are those of the interval since the last sample (perfmon clears them),
 * and the instant ones (sending period, windows, RTT).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <udt/udt.h>

namespace {

typedef int (*recv_fn)(UDTSOCKET, char *, int, int);
typedef int (*send_fn)(UDTSOCKET, const char *, int, int);
typedef int (*close_fn)(UDTSOCKET);

pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
FILE *out;
bool tried;
const int NSOCK = 256;
struct slot { UDTSOCKET u; double last; } slots[NSOCK];

double now_s()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Write one perfmon line for u (mu held). */
void emit(UDTSOCKET u, const char *why)
{
	UDT::TRACEINFO p;

	if (!tried) {
		const char *path = getenv("BM_UDT_PERF_LOG");
		tried = true;
		if (path && *path)
			out = fopen(path, "a");
		if (out)
			setvbuf(out, NULL, _IOLBF, 0);
	}
	if (!out || UDT::perfmon(u, &p, true) == UDT::ERROR)
		return;
	fprintf(out, "%s pid=%d u=%d t_ms=%lld recv=%lld rcv_loss=%d sent_nak=%d "
	    "recv_mbps=%.1f sent=%lld snd_loss=%d retrans=%d send_mbps=%.1f "
	    "snd_busy_us=%lld snd_period_us=%.2f flow_win=%d cwnd=%d flight=%d "
	    "rtt_ms=%.1f bw_mbps=%.1f avail_sndbuf=%d avail_rcvbuf=%d "
	    "recv_total=%lld rcv_loss_total=%d sent_total=%lld retrans_total=%d\n",
	    why, (int)getpid(), u, (long long)p.msTimeStamp,
	    (long long)p.pktRecv, p.pktRcvLoss, p.pktSentNAK, p.mbpsRecvRate,
	    (long long)p.pktSent, p.pktSndLoss, p.pktRetrans, p.mbpsSendRate,
	    (long long)p.usSndDuration, p.usPktSndPeriod, p.pktFlowWindow,
	    p.pktCongestionWindow, p.pktFlightSize, p.msRTT, p.mbpsBandwidth,
	    p.byteAvailSndBuf, p.byteAvailRcvBuf, (long long)p.pktRecvTotal,
	    p.pktRcvLossTotal, (long long)p.pktSentTotal, p.pktRetransTotal);
}

/* A sample of u if its last one is a second old. */
void tick(UDTSOCKET u)
{
	double t = now_s();
	int i, free_i = -1;

	pthread_mutex_lock(&mu);
	for (i = 0; i < NSOCK; i++) {
		if (slots[i].u == u && slots[i].last > 0)
			break;
		if (free_i < 0 && slots[i].last == 0)
			free_i = i;
	}
	if (i == NSOCK && free_i >= 0) {
		slots[free_i].u = u;
		slots[free_i].last = t;
		emit(u, "open");	/* clears the counters: intervals from here */
	} else if (i < NSOCK && t - slots[i].last >= 1.0) {
		slots[i].last = t;
		emit(u, "tick");
	}
	pthread_mutex_unlock(&mu);
}

} // namespace

int UDT::recv(UDTSOCKET u, char *buf, int len, int flags)
{
	static recv_fn real = (recv_fn)dlsym(RTLD_NEXT, "_ZN3UDT4recvEiPcii");
	int n = real(u, buf, len, flags);

	if (n > 0)
		tick(u);
	return n;
}

int UDT::send(UDTSOCKET u, const char *buf, int len, int flags)
{
	static send_fn real = (send_fn)dlsym(RTLD_NEXT, "_ZN3UDT4sendEiPKcii");
	int n = real(u, buf, len, flags);

	if (n > 0)
		tick(u);
	return n;
}

int UDT::close(UDTSOCKET u)
{
	static close_fn real = (close_fn)dlsym(RTLD_NEXT, "_ZN3UDT5closeEi");
	int i;

	pthread_mutex_lock(&mu);
	for (i = 0; i < NSOCK; i++)
		if (slots[i].u == u && slots[i].last > 0) {
			emit(u, "close");
			slots[i].last = 0;
		}
	pthread_mutex_unlock(&mu);
	return real(u);
}
