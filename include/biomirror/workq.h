/*
 * A small pool of worker threads for blocking work that must stay off the
 * event-loop thread (creating temp files; later, hashing).  Tasks are
 * pushed by the loop thread, run on a worker, and collected back on the
 * loop thread by workq_collect(), in completion order.  A worker that
 * finishes a task while none is waiting to be collected calls the wake
 * function (thread-safe; the transport's wakeup) so that a loop blocked
 * in poll returns at once; later ones until the next workq_collect() do
 * not (it takes them all).
 */
#ifndef BIOMIRROR_WORKQ_H
#define BIOMIRROR_WORKQ_H

#include <stddef.h>

struct workq;

/* Work run on a worker thread; arg is the task's (borrowed). */
typedef void (*workq_fn)(void *arg);
/* Called on a worker thread after a task (see above; thread-safe). */
typedef void (*workq_wake_fn)(void *wake_arg);
/* Called on the loop thread for each finished task (workq_collect). */
typedef void (*workq_done_fn)(void *ctx, void *arg);

/*
 * Start nthreads (1..64) workers.  wake (may be NULL) is called with
 * wake_arg after a task that finds no finished task waiting.  Returns 0, BM_EINVAL or BM_ENOMEM (no
 * thread left running).
 */
int	workq_new(unsigned nthreads, workq_wake_fn wake, void *wake_arg,
	    struct workq **ret);
/*
 * Queue fn(arg) (arg borrowed until it comes back through
 * workq_collect).  Returns 0 or BM_ENOMEM.
 */
int	workq_push(struct workq *q, workq_fn fn, void *arg);
/* Hand every finished task to done(ctx, arg); returns how many. */
size_t	workq_collect(struct workq *q, workq_done_fn done, void *ctx);
/*
 * Block until at least one pushed task has finished, then hand every
 * finished one to done(ctx, arg) (loop thread only).  Returns how many;
 * 0 at once when no task is pending.
 */
size_t	workq_wait_any(struct workq *q, workq_done_fn done, void *ctx);
/*
 * Block until every pushed task has finished and been handed to
 * done(ctx, arg) (loop thread only; tasks pushed by done are waited for
 * too).
 */
void	workq_wait(struct workq *q, workq_done_fn done, void *ctx);
/* Tasks pushed and not yet collected. */
size_t	workq_pending(const struct workq *q);
/*
 * Wait for queued and running tasks to finish (they are not collected),
 * stop the workers and free the pool.  NULL is a no-op.
 */
void	workq_free(struct workq *q);

#endif
