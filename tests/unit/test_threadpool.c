/*
 * threadpool: every task runs exactly once, on a worker index inside the
 * pool, for pools of 1..4 threads and task counts around the thread count;
 * the pool is reused for many runs (no per-call threads) and frees cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/threadpool.h"

struct ctx {
	atomic_int *hits;
	int threads;
	atomic_int bad_worker;
	atomic_int used[8];
};

static void count_task(void *arg, long task, int worker)
{
	struct ctx *c = arg;
	atomic_fetch_add(&c->hits[task], 1);
	if (worker < 0 || worker >= c->threads)
		atomic_store(&c->bad_worker, 1);
	else
		atomic_store(&c->used[worker], 1);
	/* uneven work so that workers interleave */
	volatile double x = 0;
	for (long i = 0; i < (task % 7) * 2000; i++)
		x += (double)i;
}

static void test_every_task_once(void **s)
{
	(void)s;
	for (int threads = 1; threads <= 4; threads++) {
		rc_pool *p = NULL;
		rc_err err;
		assert_int_equal(rc_pool_new(threads, &p, &err), 0);
		assert_int_equal(rc_pool_threads(p), threads);
		const long counts[] = { 0, 1, 2, 3, 5, 64, 1000 };
		for (int round = 0; round < 20; round++) {
			for (size_t q = 0; q < sizeof counts / sizeof counts[0]; q++) {
				long n = counts[q];
				struct ctx c = { .threads = threads };
				c.hits = calloc((size_t)n + 1, sizeof *c.hits);
				assert_non_null(c.hits);
				rc_pool_run(p, n, count_task, &c);
				for (long t = 0; t < n; t++)
					assert_int_equal(atomic_load(&c.hits[t]), 1);
				assert_int_equal(atomic_load(&c.hits[n]), 0);
				assert_int_equal(atomic_load(&c.bad_worker), 0);
				free(c.hits);
			}
		}
		rc_pool_free(p);
	}
}

/* The task that sets the process's cancel flag (rc_pool_watch_cancel) */
struct stopper {
	atomic_int *flag, ran;
	long at;
};

static void stop_task(void *arg, long task, int worker)
{
	(void)worker;
	struct stopper *c = arg;
	atomic_fetch_add(&c->ran, 1);
	if (task == c->at)
		atomic_store(c->flag, 1);
}

/* An interruptible pool hands out no task once the watched flag is set
 * (each thread finishes the one it holds); a pool not marked so, or with
 * no flag watched, runs every task. */
static void test_interruptible(void **s)
{
	(void)s;
	static atomic_int flag;
	for (int threads = 1; threads <= 3; threads++) {
		rc_pool *p = NULL;
		rc_err err;
		assert_int_equal(rc_pool_new(threads, &p, &err), 0);
		for (int mode = 0; mode < 3; mode++) {
			atomic_store(&flag, 0);
			rc_pool_watch_cancel(mode == 2 ? NULL : &flag);
			rc_pool_interruptible(p, mode != 1);
			struct stopper c = { .flag = &flag, .at = 10 };
			atomic_init(&c.ran, 0);
			rc_pool_run(p, 100000, stop_task, &c);
			int ran = atomic_load(&c.ran);
			if (mode == 0) {
				assert_true(ran >= 11 && ran <= 11 + 2 * threads);
				assert_true(rc_pool_cancel_seen());
			} else {
				assert_int_equal(ran, 100000);
			}
		}
		rc_pool_watch_cancel(NULL);
		rc_pool_interruptible(p, 0);
		assert_false(rc_pool_cancel_seen());
		rc_pool_free(p);
	}
}

static void test_zero_is_all_cores(void **s)
{
	(void)s;
	rc_pool *p = NULL;
	rc_err err;
	assert_int_equal(rc_pool_new(0, &p, &err), 0);
	assert_int_equal(rc_pool_threads(p), rc_pool_online_cores());
	rc_pool_free(p);
	rc_pool_free(NULL);
}

static void test_rejects_bad_counts(void **s)
{
	(void)s;
	rc_pool *p = NULL;
	rc_err err;
	assert_int_equal(rc_pool_new(-1, &p, &err), RC_EINVAL);
	assert_string_equal(err.field, "execution.threads");
	assert_int_equal(rc_pool_new(5000, &p, &err), RC_EINVAL);
	assert_null(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_task_once),
		cmocka_unit_test(test_interruptible),
		cmocka_unit_test(test_zero_is_all_cores),
		cmocka_unit_test(test_rejects_bad_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
