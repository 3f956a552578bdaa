/*
 * Clock readings in nanoseconds, shared by every module that times or
 * stamps something (one definition instead of one per file).
 */
#ifndef BIOMIRROR_CLOCK_H
#define BIOMIRROR_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: for durations, timeouts and backoff. */
static inline int64_t
clock_mono_ns(void)
{
	struct timespec	 ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CLOCK_REALTIME in ns since the epoch: for records and mtimes. */
static inline int64_t
clock_real_ns(void)
{
	struct timespec	 ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
