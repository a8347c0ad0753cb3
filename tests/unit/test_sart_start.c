/*
 * rc_sart_core's first block from `initial: zero` (algo_sart.c's
 * block_forward): while the iterate is still the constant start x0, its
 * forward projection is taken as x0 A(1) (a fill with 0 for SART and SIRT,
 * a scale of the row sums for MLEM / OS-EM) instead of being projected.
 * The reference is the projected path itself: the same run from
 * `initial: given` holding that constant, whose first block projects it.
 * SART and SIRT (x0 = 0) must match it to the bit; MLEM and OS-EM (x0 > 0)
 * to the float rounding of x0 times a sum against a sum of x0 times each
 * weight (1e-5 relative here), and x0 is recomputed here from the
 * projector's A(1) in double.  Both pairs the CPU engine runs iteratively
 * on this case are checked: the footprint pair and ray casting's.
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

#include "algo/algo.h"
#include "backend/backend.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "geometry/geometry.h"
#include "shepp_case.h"

#define N 20
#define NVIEWS 24
#define FOV_MM 64.0

static shepp_case F;

static int setup(void **state)
{
	(void)state;
	if (shepp_case_new(N, NVIEWS, FOV_MM, &F)) {
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

typedef struct rig {
	rc_engine *e;
	rc_exec *x;
} rig;

static void rig_open(rig *r)
{
	rc_err err;
	assert_int_equal(rc_engine_cpu_new(F.g, 2, &r->e, &err), 0);
	assert_int_equal(rc_exec_new(&r->e, 1, &r->x, &err), 0);
}

static void rig_close(rig *r)
{
	rc_exec_free(r->x);
	rc_engine_free(r->e);
}

/* p's run from vol's start (initial as p says; vol is overwritten). */
static void run(const rc_algo_params *p, float *vol)
{
	rig r;
	rc_err err;
	rig_open(&r);
	rc_err_clear(&err);
	int rc = rc_algo_run(p, r.x, F.proj, vol, NULL, &err);
	if (rc)
		print_error("rc_algo_run: %s\n", err.msg);
	assert_int_equal(rc, 0);
	rig_close(&r);
}

/* MLEM's constant start sum(p+) / sum(A 1) with fp's A, in double. */
static float em_constant(rc_fp_kind fp)
{
	rig r;
	rc_backend *b = NULL;
	rc_vec *ones = NULL, *a1 = NULL;
	rc_err err;
	float *host = malloc(F.np * sizeof *host);
	assert_non_null(host);
	rig_open(&r);
	assert_int_equal(rc_backend_host_new(r.x, &b, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_VOLUME, &ones, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &a1, &err), 0);
	assert_int_equal(rc_bk_fill(b, ones, 1.0f, RC_VIEWS_ALL, &err), 0);
	assert_int_equal(rc_bk_forward(b, fp, ones, a1, RC_VIEWS_ALL, &err), 0);
	assert_int_equal(rc_bk_download(b, a1, host, &err), 0);
	double psum = 0.0, asum = 0.0;
	for (size_t i = 0; i < F.np; i++) {
		psum += F.proj[i] > 0.0f ? F.proj[i] : 0.0f;
		asum += host[i];
	}
	rc_bk_vec_free(b, a1);
	rc_bk_vec_free(b, ones);
	rc_backend_free(b);
	rig_close(&r);
	free(host);
	assert_true(asum > 0.0);
	return (float)(psum / asum);
}

/* The largest difference over the largest value. */
static double rel_diff(const float *a, const float *b, size_t n)
{
	double d = 0.0, m = 0.0;
	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	return m > 0.0 ? d / m : d;
}

/* name with S subsets and projector pr from zero against from the
 * constant start given, after its iterations; bitwise where that constant
 * is 0.  One iteration is checked too: MLEM's next iteration would undo
 * a wrong scale of the first block's A x (its update is invariant to a
 * scale of x), so a start projected to c x0 A(1) shows only there. */
static void compare_its(rc_algo_name name, int S, rc_projector pr, rc_fp_kind fp, int its)
{
	rc_algo_params p;
	rc_algo_params_plain(&p, name);
	p.iterations = its;
	p.subsets = S;
	p.projector = pr;
	float *zero = malloc(F.nvox * sizeof *zero), *given = malloc(F.nvox * sizeof *given);
	assert_true(zero && given);
	p.initial = RC_INITIAL_ZERO;
	run(&p, zero);
	const float x0 = name == RC_ALGO_MLEM ? em_constant(fp) : 0.0f;
	for (size_t i = 0; i < F.nvox; i++)
		given[i] = x0;
	p.initial = RC_INITIAL_GIVEN;
	run(&p, given);
	double d = rel_diff(zero, given, F.nvox), m = 0.0;
	for (size_t i = 0; i < F.nvox; i++)
		m = fmax(m, fabs(zero[i]));
	print_message("%s, %d subsets, %s, %d iterations: from zero against projected start %.3g relative (x0 %g, "
		      "max %g)\n", rc_algo_name_str(name), S, pr == RC_PROJECTOR_RAYCAST ? "raycast" : "footprint", its,
		      d, x0, m);
	assert_true(m > 0.0);
	if (x0 == 0.0f)
		assert_memory_equal(zero, given, F.nvox * sizeof *zero);
	else
		assert_true(d <= 1e-5);
	free(zero);
	free(given);
}

static void compare(rc_algo_name name, int S, rc_projector pr, rc_fp_kind fp)
{
	compare_its(name, S, pr, fp, 1);
	compare_its(name, S, pr, fp, 2);
}

static void test_sirt(void **s)
{
	(void)s;
	compare(RC_ALGO_SIRT, 1, RC_PROJECTOR_FOOTPRINT, RC_FP_FOOTPRINT);
	compare(RC_ALGO_SIRT, 1, RC_PROJECTOR_RAYCAST, RC_FP_RAYCAST);
}

static void test_sart(void **s)
{
	(void)s;
	compare(RC_ALGO_SART, 1, RC_PROJECTOR_FOOTPRINT, RC_FP_FOOTPRINT);
	compare(RC_ALGO_SART, 4, RC_PROJECTOR_FOOTPRINT, RC_FP_FOOTPRINT);
}

static void test_mlem(void **s)
{
	(void)s;
	compare(RC_ALGO_MLEM, 1, RC_PROJECTOR_FOOTPRINT, RC_FP_FOOTPRINT);
	compare(RC_ALGO_MLEM, 4, RC_PROJECTOR_FOOTPRINT, RC_FP_FOOTPRINT);
	compare(RC_ALGO_MLEM, 1, RC_PROJECTOR_RAYCAST, RC_FP_RAYCAST);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sirt),
		cmocka_unit_test(test_sart),
		cmocka_unit_test(test_mlem),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
