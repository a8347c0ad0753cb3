/*
 * threadpool: workers sleep on a condition variable until the generation
 * number changes, then pull task indices from an atomic counter until it runs
 * past ntasks; the last worker to finish wakes the caller.  The caller pulls
 * tasks as worker 0 meanwhile, so nothing is created per call.
 */
#include "util/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct rc_pool {
	int threads;
	pthread_t *tid;
	pthread_mutex_t mu;
	pthread_cond_t wake;  /* workers: a new generation or stop */
	pthread_cond_t done;  /* caller: every worker finished the generation */
	unsigned long gen;
	int stop;
	int busy;             /* workers still inside the current generation */
	/* the current job, written under mu before gen changes */
	rc_pool_fn fn;
	void *ctx;
	long ntasks;
	atomic_long next;
	atomic_int interruptible; /* rc_pool_interruptible */
};

/* The process's cancel flag (rc_pool_watch_cancel) */
static _Atomic(const atomic_int *) watched;

void rc_pool_watch_cancel(const atomic_int *flag) { atomic_store(&watched, flag); }

int rc_pool_cancel_seen(void)
{
	const atomic_int *f = atomic_load(&watched);
	return f && atomic_load(f) != 0;
}

void rc_pool_interruptible(rc_pool *p, int on) { atomic_store(&p->interruptible, on); }

static int interrupted(rc_pool *p)
{
	return atomic_load_explicit(&p->interruptible, memory_order_relaxed) && rc_pool_cancel_seen();
}

struct worker_arg {
	rc_pool *p;
	int id;
};

static void drain(rc_pool *p, int id)
{
	for (;;) {
		long t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
		if (t >= p->ntasks || interrupted(p))
			return;
		p->fn(p->ctx, t, id);
	}
}

static void *worker_main(void *arg)
{
	struct worker_arg wa = *(struct worker_arg *)arg;
	rc_pool *p = wa.p;
	free(arg);
	unsigned long seen = 0;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && p->gen == seen)
			pthread_cond_wait(&p->wake, &p->mu);
		if (p->stop)
			break;
		seen = p->gen;
		pthread_mutex_unlock(&p->mu);
		drain(p, wa.id);
		pthread_mutex_lock(&p->mu);
		if (--p->busy == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int rc_pool_online_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

int rc_pool_new(int threads, rc_pool **ret, rc_err *err)
{
	int rc = 0;
	if (threads == 0)
		threads = rc_pool_online_cores();
	if (threads < 1 || threads > 1024)
		return rc_fail(err, RC_EINVAL, "execution.threads",
			       "execution.threads must be 0 (one per core) or 1 to 1024 (got %d)", threads);
	rc_pool *p = calloc(1, sizeof *p);
	if (!p)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a thread pool");
	p->threads = threads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	atomic_init(&p->next, 0);
	atomic_init(&p->interruptible, 0);
	p->tid = calloc((size_t)threads, sizeof *p->tid);
	if (!p->tid) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a thread pool");
		goto out_free;
	}
	for (int i = 1; i < threads; i++) {
		struct worker_arg *wa = malloc(sizeof *wa);
		if (!wa || (wa->p = p, wa->id = i, pthread_create(&p->tid[i], NULL, worker_main, wa))) {
			free(wa);
			p->threads = i; /* rc_pool_free joins the ones started */
			rc = rc_fail(err, RC_ENOMEM, "", "cannot start thread %d of %d for the thread pool", i, threads);
			goto out_free;
		}
	}
	*ret = p;
	return 0;
out_free:
	rc_pool_free(p);
	return rc;
}

void rc_pool_free(rc_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	if (p->tid)
		for (int i = 1; i < p->threads; i++)
			pthread_join(p->tid[i], NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->mu);
	free(p->tid);
	free(p);
}

int rc_pool_threads(const rc_pool *p) { return p->threads; }

void rc_pool_run(rc_pool *p, long ntasks, rc_pool_fn fn, void *ctx)
{
	if (ntasks <= 0)
		return;
	if (p->threads == 1 || ntasks == 1) {
		for (long t = 0; t < ntasks && !interrupted(p); t++)
			fn(ctx, t, 0);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->ctx = ctx;
	p->ntasks = ntasks;
	atomic_store(&p->next, 0);
	p->busy = p->threads - 1;
	p->gen++;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	drain(p, 0);
	pthread_mutex_lock(&p->mu);
	while (p->busy > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
