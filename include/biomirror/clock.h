/*
 * Clock readings in nanoseconds, shared by every module that times or
 * stamps something (one definition instead of one per file).
 */
#ifndef BIOMIRROR_CLOCK_H
#define BIOMIRROR_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* A struct timespec (a stat(2) time, a clock reading) in ns. */
static inline int64_t
clock_ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

/* CLOCK_MONOTONIC in ns: for durations, timeouts and backoff. */
static inline int64_t
clock_mono_ns(void)
{
	struct timespec	 ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return clock_ts_ns(&ts);
}

/* CLOCK_REALTIME in ns since the epoch: for records and mtimes. */
static inline int64_t
clock_real_ns(void)
{
	struct timespec	 ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return clock_ts_ns(&ts);
}

/*
 * Upstream secs since the epoch (MDTM, Last-Modified) in ns; -1 (not
 * known) when negative or past what int64 ns holds (year 2262).
 */
static inline int64_t
clock_secs_ns(int64_t secs)
{
	if (secs < 0 || secs > INT64_MAX / 1000000000LL - 1)
		return -1;
	return secs * 1000000000LL;
}

/*
 * secs since the epoch as ISO 8601 UTC, "2024-01-02T03:04:05Z" (21 bytes
 * with the NUL), into buf of len bytes; "-" when secs is negative or past
 * what gmtime_r(3) can show.
 */
static inline void
clock_fmt_utc(int64_t secs, char *buf, size_t len)
{
	struct tm	 tm;
	time_t		 t = (time_t)secs;

	if (secs < 0 || gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		(void)snprintf(buf, len, "-");
}

#endif
