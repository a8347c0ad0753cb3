/*
 * threadpool: a fixed set of pthreads that runs parallel-for loops.
 *
 * Created once per engine; rc_pool_run hands out task indices 0..n-1 through
 * one atomic counter, so uneven tasks balance themselves, and the calling
 * thread works too (a pool of 1 thread starts no thread at all).  Tasks must
 * write disjoint outputs: which worker runs which task is not fixed, so a
 * result that must not depend on the thread count has to be a function of the
 * task index alone (the projectors are built that way).
 *
 * One rc_pool_run at a time per pool (an engine is not called concurrently);
 * it returns when every task has finished.
 */
#ifndef RC_THREADPOOL_H
#define RC_THREADPOOL_H

#include <stdatomic.h>

#include "util/rc_error.h"

typedef struct rc_pool rc_pool;

/* fn(ctx, task, worker): worker in 0..threads-1 names the thread, for
 * per-thread scratch memory. */
typedef void (*rc_pool_fn)(void *ctx, long task, int worker);

/* threads: 1..1024; 0 = one per online core. */
int rc_pool_new(int threads, rc_pool **ret, rc_err *err);
void rc_pool_free(rc_pool *p);
int rc_pool_threads(const rc_pool *p);

/* Runs fn for every task in 0..ntasks-1 across the pool and waits. */
void rc_pool_run(rc_pool *p, long ntasks, rc_pool_fn fn, void *ctx);

/* Cancelling a projection.  The process names one cancel flag (the
 * worker's SIGTERM flag; NULL: none, the default); a pool marked
 * interruptible stops handing out tasks once that flag is set, so a long
 * projection ends within one task of a cancel rather than at its end (the
 * tasks skipped leave their outputs unspecified: only a caller that then
 * returns RC_ECANCELLED marks a pool so, the CPU engine around a
 * projection).  rc_pool_cancel_seen: the flag is set. */
void rc_pool_watch_cancel(const atomic_int *flag);
int rc_pool_cancel_seen(void);
void rc_pool_interruptible(rc_pool *p, int on);

/* Online cores (at least 1). */
int rc_pool_online_cores(void);

#endif
