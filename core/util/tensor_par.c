/* tensor_par: see tensor_par.h. */
#include "util/tensor_par.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define RC_PAR_MAX_THREADS 256

struct par {
	int64_t n, chunk;
	rc_par_fn fn;
	void *ud;
	atomic_llong next;
	atomic_int rc;
};

struct worker {
	struct par *p;
	int id;
};

int rc_par_threads(int threads, int64_t n)
{
	if (threads <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		threads = c > 0 ? (int)c : 1;
	}
	if (threads > RC_PAR_MAX_THREADS)
		threads = RC_PAR_MAX_THREADS;
	if (n < threads)
		threads = n > 0 ? (int)n : 1;
	return threads;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct par *p = w->p;
	for (;;) {
		if (atomic_load(&p->rc))
			break;
		int64_t a = atomic_fetch_add(&p->next, p->chunk);
		if (a >= p->n)
			break;
		int64_t b = a + p->chunk < p->n ? a + p->chunk : p->n;
		for (int64_t i = a; i < b; i++) {
			int rc = p->fn(i, w->id, p->ud);
			if (rc) {
				int zero = 0;
				atomic_compare_exchange_strong(&p->rc, &zero, rc);
				return NULL;
			}
		}
	}
	return NULL;
}

int rc_par_for(int64_t n, int64_t chunk, int threads, rc_par_fn fn, void *ud)
{
	struct par p = { .n = n, .chunk = chunk > 0 ? chunk : 1, .fn = fn, .ud = ud };
	atomic_init(&p.next, 0);
	atomic_init(&p.rc, 0);
	int nt = rc_par_threads(threads, n);
	pthread_t tid[RC_PAR_MAX_THREADS];
	struct worker w[RC_PAR_MAX_THREADS];
	int started = 0;
	for (int i = 1; i < nt; i++) {
		w[i] = (struct worker){ &p, i };
		if (pthread_create(&tid[i], NULL, work, &w[i]))
			break; /* fewer threads still finish the loop */
		started = i;
	}
	w[0] = (struct worker){ &p, 0 };
	work(&w[0]);
	for (int i = 1; i <= started; i++)
		pthread_join(tid[i], NULL);
	return atomic_load(&p.rc);
}
