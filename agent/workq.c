/*
 * The worker pool (see include/biomirror/workq.h).  One mutex guards two
 * singly linked FIFO lists, the queued tasks and the finished ones; a
 * condition variable wakes idle workers.  Invariant: every task is in
 * exactly one of queued, running (held by one worker), or finished,
 * until workq_collect() hands it back and frees its node.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "biomirror/error.h"
#include "biomirror/workq.h"

#define WORKQ_MAX_THREADS	64

struct workq_task {
	workq_fn	 fn;		/* the work */
	void		*arg;		/* borrowed: the caller's task */
	struct workq_task *next;
};

struct workq {
	pthread_mutex_t	 lock;
	pthread_cond_t	 cond;		/* signalled when a task is queued or on stop */
	pthread_cond_t	 dcond;		/* signalled when a task finishes */
	struct workq_task *qhead, *qtail; /* owned: queued tasks */
	struct workq_task *dhead, *dtail; /* owned: finished tasks */
	size_t		 pending;	/* pushed, not collected */
	bool		 stop;		/* workers exit when the queue is empty */
	workq_wake_fn	 wake;		/* may be NULL */
	void		*wake_arg;	/* borrowed */
	pthread_t	 threads[WORKQ_MAX_THREADS];
	unsigned	 nthreads;	/* started */
};

static void *
workq_main(void *arg)
{
	struct workq	*q = arg;
	struct workq_task *t;
	bool		 first;

	for (;;) {
		(void)pthread_mutex_lock(&q->lock);
		while (q->qhead == NULL && !q->stop)
			(void)pthread_cond_wait(&q->cond, &q->lock);
		if ((t = q->qhead) == NULL) {
			(void)pthread_mutex_unlock(&q->lock);
			return NULL;
		}
		if ((q->qhead = t->next) == NULL)
			q->qtail = NULL;
		(void)pthread_mutex_unlock(&q->lock);
		t->fn(t->arg);
		t->next = NULL;
		(void)pthread_mutex_lock(&q->lock);
		/*
		 * workq_collect takes the whole list: only a task that finds
		 * it empty needs to wake the owner (one wakeup, not one per
		 * task, when several finish before it looks).
		 */
		first = q->dhead == NULL;
		if (q->dtail)
			q->dtail->next = t;
		else
			q->dhead = t;
		q->dtail = t;
		(void)pthread_cond_signal(&q->dcond);
		(void)pthread_mutex_unlock(&q->lock);
		if (first && q->wake)
			q->wake(q->wake_arg);
	}
}

int
workq_new(unsigned nthreads, workq_wake_fn wake, void *wake_arg,
    struct workq **ret)
{
	struct workq	*q;

	if (nthreads < 1 || nthreads > WORKQ_MAX_THREADS)
		return BM_EINVAL;
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return BM_ENOMEM;
	if (pthread_mutex_init(&q->lock, NULL) != 0) {
		free(q);
		return BM_ENOMEM;
	}
	if (pthread_cond_init(&q->cond, NULL) != 0) {
		(void)pthread_mutex_destroy(&q->lock);
		free(q);
		return BM_ENOMEM;
	}
	if (pthread_cond_init(&q->dcond, NULL) != 0) {
		(void)pthread_cond_destroy(&q->cond);
		(void)pthread_mutex_destroy(&q->lock);
		free(q);
		return BM_ENOMEM;
	}
	q->wake = wake;
	q->wake_arg = wake_arg;
	while (q->nthreads < nthreads && pthread_create(
	    &q->threads[q->nthreads], NULL, workq_main, q) == 0)
		q->nthreads++;
	if (q->nthreads == 0) {
		workq_free(q);
		return BM_ENOMEM;
	}
	*ret = q;
	return 0;
}

int
workq_push(struct workq *q, workq_fn fn, void *arg)
{
	struct workq_task *t;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return BM_ENOMEM;
	t->fn = fn;
	t->arg = arg;
	(void)pthread_mutex_lock(&q->lock);
	if (q->qtail)
		q->qtail->next = t;
	else
		q->qhead = t;
	q->qtail = t;
	q->pending++;
	(void)pthread_cond_signal(&q->cond);
	(void)pthread_mutex_unlock(&q->lock);
	return 0;
}

size_t
workq_collect(struct workq *q, workq_done_fn done, void *ctx)
{
	struct workq_task *t, *next;
	size_t		 n = 0;

	(void)pthread_mutex_lock(&q->lock);
	t = q->dhead;
	q->dhead = q->dtail = NULL;
	for (next = t; next != NULL; next = next->next)
		q->pending--;	/* all taken: done() may push new tasks */
	(void)pthread_mutex_unlock(&q->lock);
	for (; t != NULL; t = next) {
		next = t->next;
		done(ctx, t->arg);
		free(t);
		n++;
	}
	return n;
}

size_t
workq_wait_any(struct workq *q, workq_done_fn done, void *ctx)
{
	if (q->pending == 0)
		return 0;
	(void)pthread_mutex_lock(&q->lock);
	while (q->dhead == NULL)
		(void)pthread_cond_wait(&q->dcond, &q->lock);
	(void)pthread_mutex_unlock(&q->lock);
	return workq_collect(q, done, ctx);
}

void
workq_wait(struct workq *q, workq_done_fn done, void *ctx)
{
	while (workq_wait_any(q, done, ctx) > 0)
		;
}

size_t
workq_pending(const struct workq *q)
{
	return q->pending;	/* only the loop thread changes it */
}

void
workq_free(struct workq *q)
{
	struct workq_task *t, *next;
	unsigned	 i;

	if (q == NULL)
		return;
	(void)pthread_mutex_lock(&q->lock);
	q->stop = true;
	(void)pthread_cond_broadcast(&q->cond);
	(void)pthread_mutex_unlock(&q->lock);
	for (i = 0; i < q->nthreads; i++)
		(void)pthread_join(q->threads[i], NULL);
	for (t = q->qhead; t != NULL; t = next) {
		next = t->next;
		free(t);
	}
	for (t = q->dhead; t != NULL; t = next) {
		next = t->next;
		free(t);
	}
	(void)pthread_cond_destroy(&q->dcond);
	(void)pthread_cond_destroy(&q->cond);
	(void)pthread_mutex_destroy(&q->lock);
	free(q);
}
