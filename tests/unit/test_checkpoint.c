/*
 * Checkpoints of the iterative methods (algo.h's rc_algo_state): a run that
 * continues from the state a run saved after iteration m ends at the same
 * volume as the run that went on (relative difference <= 1e-5 on the CPU
 * engine, where both do the same float operations), for SART with ordered
 * subsets, SIRT, CGLS and MLEM, as textbook methods and with their defaults
 * (FDK's start, TV; the stopping rules off so that both runs do every
 * iteration), and from the state a cancel that stopped a projection saved.
 * A resumed run reports only the iterations after its state, and a changed
 * state changes the volume (the state is used); a state of another method
 * is refused (field "checkpoint").
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "algo/algo.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "shepp_case.h"
#include "util/rc_clock.h"
#include "util/threadpool.h"

#define N 16
#define NVIEWS 24
#define ITERS 6
#define SAVE_AT 3

static shepp_case F;

static int setup(void **state)
{
	(void)state;
	if (shepp_case_new(N, NVIEWS, 64.0, &F)) {
		shepp_case_free(&F);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	shepp_case_free(&F);
	return 0;
}

/* The state saved after iteration SAVE_AT (or the last one saved, with
 * keep_last), in host memory. */
typedef struct saved {
	rc_algo_state s;
	int calls, keep_last;
	int first_reported, reported; /* progress: the first iteration and how many */
	atomic_int *stop_at_save;       /* set (the pool's cancel flag) once SAVE_AT is saved */
} saved;

static void saved_free(saved *v)
{
	for (int i = 0; i < RC_STATE_MAX_VECS; i++) {
		free(v->s.host[i]);
		v->s.host[i] = NULL;
	}
	free(v->s.scal);
	v->s.scal = NULL;
}

static void on_progress(void *ud, const rc_progress *p)
{
	saved *v = ud;
	if (!v->reported++)
		v->first_reported = p->iteration;
}

static int on_checkpoint(void *ud, rc_backend *b, const rc_algo_state *st, rc_err *err)
{
	saved *v = ud;
	v->calls++;
	if (!v->keep_last && !v->stop_at_save)
		assert_int_equal(st->iteration, v->calls);
	if (!v->keep_last && st->iteration != SAVE_AT)
		return 0;
	saved_free(v);
	v->s = *st;
	for (int i = 0; i < st->nvec; i++) {
		size_t n = st->space[i] == RC_SPACE_VOLUME ? F.nvox : F.np;
		v->s.vec[i] = NULL;
		v->s.host[i] = malloc(n * sizeof(float));
		assert_non_null(v->s.host[i]);
		if (rc_bk_download(b, st->vec[i], v->s.host[i], err))
			return -1;
	}
	v->s.scal = malloc((size_t)st->nscal * sizeof(double));
	assert_non_null(v->s.scal);
	memcpy(v->s.scal, st->scal, (size_t)st->nscal * sizeof(double));
	if (v->stop_at_save)
		atomic_store(v->stop_at_save, 1);
	return 0;
}

static int run(const rc_algo_params *p, const rc_algo_hooks *h, float *vol, rc_err *err)
{
	rc_engine *e = NULL;
	rc_exec *x = NULL;
	assert_int_equal(rc_engine_cpu_new(F.g, 2, &e, err), 0);
	assert_int_equal(rc_exec_new(&e, 1, &x, err), 0);
	int rc = rc_algo_run(p, x, F.proj, vol, h, err);
	rc_exec_free(x);
	rc_engine_free(e);
	return rc;
}

static void params(rc_algo_params *p, rc_algo_name name, int plain)
{
	if (plain)
		rc_algo_params_plain(p, name);
	else
		rc_algo_params_default(p, name);
	p->iterations = ITERS;
	p->stop_stagnation = 0.0;
	p->stop_discrepancy = 0.0;
	if (name == RC_ALGO_SART && plain)
		p->subsets = NVIEWS / 6;
}

/* The run resumed from v's state reports only the iterations after it and
 * ends at full's volume; the relative difference. */
static double resumed(const rc_algo_params *p, saved *v, const float *full, float *again)
{
	saved w;
	memset(&w, 0, sizeof w);
	rc_err err;
	rc_algo_hooks r = { .resume = &v->s, .progress = on_progress, .ud = &w };
	assert_int_equal(run(p, &r, again, &err), 0);
	int from = v->s.iteration - (p->name == RC_ALGO_CGLS && v->s.scal[2] != 0.0);
	assert_int_equal(w.first_reported, from + 1);
	assert_int_equal(w.reported, ITERS - from);
	double d2 = 0.0, f2 = 0.0;
	for (size_t i = 0; i < F.nvox; i++) {
		d2 += ((double)again[i] - full[i]) * ((double)again[i] - full[i]);
		f2 += (double)full[i] * full[i];
	}
	assert_true(f2 > 0.0);
	return sqrt(d2 / f2);
}

static void check(rc_algo_name name, int plain)
{
	rc_algo_params p;
	params(&p, name, plain);
	float *full = malloc(F.nvox * sizeof(float)), *again = malloc(F.nvox * sizeof(float));
	assert_non_null(full);
	assert_non_null(again);
	saved v;
	memset(&v, 0, sizeof v);
	rc_err err;
	rc_algo_hooks h = { .checkpoint = on_checkpoint, .ud = &v };
	assert_int_equal(run(&p, &h, full, &err), 0);
	assert_int_equal(v.calls, ITERS - 1);
	assert_int_equal(v.s.iteration, SAVE_AT);

	double rel = resumed(&p, &v, full, again);
	print_message("%s (%s): resumed from iteration %d, relative difference %.3g\n", rc_algo_name_str(name),
		      plain ? "plain" : "defaults", SAVE_AT, rel);
	assert_true(rel <= 1e-5);

	/* the state is what the run continues from: another iterate, another
	 * volume (not a multiple of it: MLEM's update undoes a scale) */
	for (size_t i = 0; i < F.nvox; i += 2)
		v.s.host[0][i] *= 1.5f;
	assert_true(resumed(&p, &v, full, again) > 1e-3);

	/* another method's state does not fit */
	rc_algo_hooks r = { .resume = &v.s };
	rc_algo_params q = p;
	q.name = name == RC_ALGO_CGLS ? RC_ALGO_SIRT : RC_ALGO_CGLS;
	rc_err_clear(&err);
	assert_int_equal(run(&q, &r, again, &err), RC_EINVAL);
	assert_string_equal(err.field, "checkpoint");
	saved_free(&v);
	free(full);
	free(again);
}

/* A cancel that stops a projection (the pool's flag, threadpool.h: set
 * here once iteration SAVE_AT is saved, so the next iteration's first
 * projection stops) saves the state the run still holds, and the run
 * resumed from it ends at the uninterrupted run's volume. */
static void check_cancel(rc_algo_name name, int plain)
{
	rc_algo_params p;
	params(&p, name, plain);
	float *full = malloc(F.nvox * sizeof(float)), *again = malloc(F.nvox * sizeof(float));
	assert_non_null(full);
	assert_non_null(again);
	rc_err err;
	assert_int_equal(run(&p, NULL, full, &err), 0);
	static atomic_int flag;
	atomic_store(&flag, 0);
	rc_pool_watch_cancel(&flag);
	saved v;
	memset(&v, 0, sizeof v);
	v.keep_last = 1;
	v.stop_at_save = &flag;
	rc_algo_hooks h = { .checkpoint = on_checkpoint, .ud = &v };
	p.iterations = ITERS;
	/* the checkpoint hook sets the flag after iteration 1's save already:
	 * the run stops in iteration 2's first projection and saves again */
	rc_err_clear(&err);
	assert_int_equal(run(&p, &h, again, &err), RC_ECANCELLED);
	rc_pool_watch_cancel(NULL);
	assert_int_equal(v.calls, 2);
	assert_int_equal(v.s.iteration, 1);
	double rel = resumed(&p, &v, full, again);
	print_message("%s (%s): cancelled in iteration 2, resumed, relative difference %.3g\n", rc_algo_name_str(name),
		      plain ? "plain" : "defaults", rel);
	assert_true(rel <= 1e-5);
	saved_free(&v);
	free(full);
	free(again);
}

/* CGLS cancelled at any moment (a thread sets the flag after a delay; the
 * cancel may land in a forward or a back projection, where the state is
 * the iteration's update before its new direction): whatever state it
 * saved, the run resumed from it ends at the uninterrupted run's volume. */
struct delayed {
	atomic_int *flag;
	long us;
};

static void *set_later(void *arg)
{
	struct delayed *d = arg;
	usleep((useconds_t)d->us);
	atomic_store(d->flag, 1);
	return NULL;
}

static void test_cgls_cancel_anywhere(void **s)
{
	(void)s;
	rc_algo_params p;
	params(&p, RC_ALGO_CGLS, 1);
	p.iterations = ITERS;
	float *full = malloc(F.nvox * sizeof(float)), *again = malloc(F.nvox * sizeof(float));
	assert_non_null(full);
	assert_non_null(again);
	rc_err err;
	double t0 = rc_now_s();
	assert_int_equal(run(&p, NULL, full, &err), 0);
	double run_us = (rc_now_s() - t0) * 1e6;
	static atomic_int flag;
	int phases[2] = { 0, 0 };
	for (int k = 1; k <= 24; k++) {
		atomic_store(&flag, 0);
		rc_pool_watch_cancel(&flag);
		saved v;
		memset(&v, 0, sizeof v);
		v.keep_last = 1;
		rc_algo_hooks h = { .checkpoint = on_checkpoint, .ud = &v };
		struct delayed d = { &flag, (long)(run_us * k / 24.0) };
		pthread_t th;
		assert_int_equal(pthread_create(&th, NULL, set_later, &d), 0);
		int rc = run(&p, &h, again, &err);
		pthread_join(th, NULL);
		rc_pool_watch_cancel(NULL);
		if (rc == RC_ECANCELLED && v.s.scal) {
			phases[v.s.scal[2] != 0.0]++;
			assert_true(resumed(&p, &v, full, again) <= 1e-5);
		}
		saved_free(&v);
	}
	print_message("cgls cancelled at 24 moments: %d states after an iteration, %d within one, each resumed "
		      "to the same volume\n", phases[0], phases[1]);
	free(full);
	free(again);
}

static void test_sart(void **s) { (void)s; check(RC_ALGO_SART, 1); check(RC_ALGO_SART, 0); }
static void test_sirt(void **s) { (void)s; check(RC_ALGO_SIRT, 1); check(RC_ALGO_SIRT, 0); }
static void test_cgls(void **s) { (void)s; check(RC_ALGO_CGLS, 1); check(RC_ALGO_CGLS, 0); }
static void test_mlem(void **s) { (void)s; check(RC_ALGO_MLEM, 1); check(RC_ALGO_MLEM, 0); }

static void test_cancel(void **s)
{
	(void)s;
	for (int plain = 0; plain <= 1; plain++) {
		check_cancel(RC_ALGO_SART, plain);
		check_cancel(RC_ALGO_SIRT, plain);
		check_cancel(RC_ALGO_CGLS, plain);
		check_cancel(RC_ALGO_MLEM, plain);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sart),
		cmocka_unit_test(test_sirt),
		cmocka_unit_test(test_cgls),
		cmocka_unit_test(test_mlem),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_cgls_cancel_anywhere),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
