/* parfor: see parfor.h. */
#include "util/parfor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define PARFOR_MAX_THREADS 256

struct pf {
	int n;
	atomic_int next;
	void (*fn)(void *, int, int);
	void *ud;
};

struct pf_worker {
	struct pf *pf;
	int id;
};

static void *pf_run(void *arg)
{
	struct pf_worker *w = arg;
	struct pf *pf = w->pf;
	for (;;) {
		int i = atomic_fetch_add(&pf->next, 1);
		if (i >= pf->n)
			break;
		pf->fn(pf->ud, w->id, i);
	}
	return NULL;
}

int rc_parallel_threads(int threads)
{
	if (threads <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		threads = c > 0 ? (int)c : 1;
	}
	return threads > PARFOR_MAX_THREADS ? PARFOR_MAX_THREADS : threads;
}

int rc_parallel_for(int n, int threads, void (*fn)(void *ud, int worker, int i), void *ud)
{
	struct pf pf = { .n = n, .fn = fn, .ud = ud };
	atomic_init(&pf.next, 0);
	threads = rc_parallel_threads(threads);
	if (threads > n)
		threads = n > 0 ? n : 1;
	pthread_t th[PARFOR_MAX_THREADS];
	struct pf_worker w[PARFOR_MAX_THREADS];
	int started = 1;
	for (int t = 1; t < threads; t++) {
		w[t] = (struct pf_worker){ &pf, t };
		if (pthread_create(&th[t], NULL, pf_run, &w[t]) != 0)
			break;
		started++;
	}
	w[0] = (struct pf_worker){ &pf, 0 };
	pf_run(&w[0]);
	for (int t = 1; t < started; t++)
		pthread_join(th[t], NULL);
	return started;
}
