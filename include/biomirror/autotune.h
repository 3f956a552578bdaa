/*
 * concurrency = auto and streams = auto (DESIGN.md key table; issue 7,
 * "the client's levers"): size files in flight and ranges per large file
 * from what the first transfers measured of the path (struct xfer_path:
 * round-trip time, per-connection rate) so that the bandwidth-delay
 * product is covered within max_connections.  tune_size() is the pure
 * sizing rule; struct tune collects the measurements of one mirror run
 * (across the scheduler's passes), applies the rule at the end of each
 * measuring window and logs the choice once it settles.  How it works is
 * described for users in docs/performance.md.
 */
#ifndef BIOMIRROR_AUTOTUNE_H
#define BIOMIRROR_AUTOTUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct xfer_job;

#define TUNE_GAIN	1.10	/* a streams step is kept when the aggregate
				   rate rose by more than this factor */
#define TUNE_MAX_STREAMS 64	/* the config's upper bound for streams */
#define TUNE_MAX_CONC	1024	/* the config's upper bound for concurrency */
#define TUNE_INFLIGHT_BYTES (32ULL * 1024 * 1024) /* memory for the small
				   files in flight (bodies are held in memory
				   until written) */
#define TUNE_REQ_BYTES	(64 * 1024) /* per request beyond its body:
				   receive buffer, HTTP/2 stream state */
#define TUNE_H2_STREAMS	100	/* requests per HTTP/2 connection (libcurl's
				   default CURLMOPT_MAX_CONCURRENT_STREAMS) */

/* What tune_size() decides from. */
struct tune_in {
	int64_t		 rtt_us;	/* path round-trip time, microseconds, -1 unknown */
	double		 conn_rate;	/* bytes/s one connection carries, 0 unknown */
	double		 path_rate;	/* best aggregate bytes/s seen, 0 unknown */
	unsigned	 max_connections; /* per host, >= 1 */
	bool		 multiplex;	/* HTTP/2: many requests per connection */
	uint64_t	 rmem_max;	/* receive buffer ceiling per connection,
					   bytes (tcp_rmem), 0 unknown */
	uint64_t	 nlarge;	/* planned files big enough to split */
	uint64_t	 nsmall;	/* other planned files */
	uint64_t	 small_bytes;	/* bytes of the small files (exact or listed) */
	unsigned	 streams;	/* streams in use now, >= 1 */
	unsigned	 prev_streams;	/* streams before the last step, 0 if none */
	bool		 measured;	/* a window at the current streams was
					   measured: take (or judge) a step */
	double		 gain;		/* aggregate rate of large files after the
					   last step / before it; 0 if not measured */
};

struct tune_out {
	unsigned	 concurrency;	/* files in flight, 1..TUNE_MAX_CONC */
	unsigned	 streams;	/* ranges per large file, 1..TUNE_MAX_STREAMS */
	bool		 streams_settled; /* no further streams step to try */
};

/*
 * The sizing rule (pure): streams per large file within a share of
 * max_connections, stepped up while the aggregate rate gains more than
 * TUNE_GAIN; files in flight by Little's law from RTT and rates, between
 * max_connections and the HTTP/1.1, HTTP/2 and TUNE_INFLIGHT_BYTES caps.
 * The rule in full: see docs/internals.md, "Auto sizing".
 */
void	tune_size(const struct tune_in *in, struct tune_out *out);

/*
 * Parse the text of /proc/sys/net/ipv4/tcp_rmem ("min default max",
 * bytes; tcp(7)) into *max.  Returns 0 or BM_EINVAL.
 */
int	tune_parse_rmem(const char *text, uint64_t *max);

struct tune;

struct tune_opts {
	const char	*name;		/* borrowed: mirror name for log lines */
	bool		 conc_auto;	/* concurrency = auto */
	bool		 streams_auto;	/* streams = auto */
	unsigned	 concurrency;	/* configured (or starting) value */
	unsigned	 streams;	/* configured (or starting) value */
	unsigned	 max_connections; /* per host, >= 1 */
	uint64_t	 min_split;	/* bytes: files of 2 x min_split are large */
	const char	*rmem_path;	/* borrowed: tcp_rmem file, NULL for
					   /proc/sys/net/ipv4/tcp_rmem */
};

/* The values chosen and what they were chosen from (tune_result()). */
struct tune_result {
	unsigned	 concurrency;	/* files in flight now */
	unsigned	 streams;	/* ranges per large file now */
	int64_t		 rtt_us;	/* median RTT the logged choice was made
					   from (else the run's), -1 unknown */
	double		 conn_rate;	/* median bytes/s per connection, likewise,
					   0 unknown */
	double		 path_rate;	/* best aggregate bytes/s, 0 unknown */
	bool		 settled;	/* the choice settled during the run */
};

/*
 * Make a tuner for one mirror run (*ret, free with tune_free()).
 * Returns 0 or BM_ENOMEM.
 */
int	tune_new(const struct tune_opts *o, struct tune **ret);
/* A file the scheduler will fetch: size bytes (-1 unknown). */
void	tune_plan(struct tune *t, int64_t size);
/* A job ended: take its path measurement (job borrowed). */
void	tune_job(struct tune *t, const struct xfer_job *job);
/* n body bytes arrived, for a file fetched in ranges when split. */
void	tune_bytes(struct tune *t, uint64_t n, bool split);
/*
 * Called from the scheduler's loop with the monotonic time: at the end
 * of each measuring window (1 s, or 8 RTT when longer) re-size and, once
 * the choice settles, log it at info level (and warn when the path's
 * bandwidth-delay product exceeds the tcp_rmem ceiling).
 */
void	tune_tick(struct tune *t, int64_t now_ns);
/* Files in flight to keep now. */
unsigned tune_concurrency(const struct tune *t);
/* Ranges for a large file started now. */
unsigned tune_streams(const struct tune *t);
/* The most files in flight the tuner may ever ask for. */
unsigned tune_max_concurrency(const struct tune *t);
/* The run ended: log the choice if it was not logged yet. */
void	tune_finish(struct tune *t);
/* The current choice (*r). */
void	tune_result(const struct tune *t, struct tune_result *r);
/* Free t.  NULL is a no-op. */
void	tune_free(struct tune *t);

#endif
