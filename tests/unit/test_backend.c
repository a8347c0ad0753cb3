/*
 * test_backend: the backend contract (backend.h) on the host backend (CPU
 * engine) and the OpenCL backend (PoCL), the ones this machine runs; the
 * CUDA backend has the same checks in test_engine_cuda.c (emulator).
 *
 *  - forward / back over RC_VIEWS_ALL equal the explicit range 0..n, and a
 *    forward over a subset, or an upload of a range of views, leaves the
 *    other views untouched;
 *  - the defaults (ordered subsets, TV, the clamp, the stop rule) and
 *    MLEM's OS-EM give the same volume on both: the OpenCL backend runs
 *    the TV operator through rc_bk_tv_apply's host copies and the ratio
 *    over each subset's views in its own kernel;
 *  - algo.h's promises on a device backend: a cancel between SART's subsets
 *    leaves the last complete iterate (the one a 1-iteration run gives), a
 *    device failure injected mid-iteration comes back as that error, and
 *    the run frees what it allocated (ASan build).
 *
 * Faults are injected by wrapping the backend's ops table: a copy whose
 * forward counts calls, raises the cancel flag or fails at call N.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/algo.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/opencl/engine_opencl.h"
#include "backend/vec_host.h"
#include "backend/exec.h"
#include "geometry/metrics.h"
#include "ocl_testutil.h"
#include "shepp_case.h"

#ifdef RC_TEST_SMALL
#define N 16
#define NVIEWS 24
#else
#define N 24
#define NVIEWS 40
#endif

static shepp_case C;
static rc_engine *CPU, *OCL;
static rc_exec *XCPU;

typedef struct fault {
	rc_backend_ops ops;            /* the wrapped table */
	const rc_backend_ops *inner;   /* the backend's own */
	int calls, cancel_at, fail_at; /* forward calls so far; 0 = never */
	atomic_int cancel;
} fault;

static fault F;

static int fault_forward(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj, int first, int last,
			 rc_err *err)
{
	F.calls++;
	if (F.calls == F.cancel_at)
		atomic_store(&F.cancel, 1);
	if (F.calls == F.fail_at)
		return rc_fail(err, RC_EDEVICE, "", "injected device failure at forward call %d", F.calls);
	return F.inner->forward(b, kind, vol, proj, first, last, err);
}

/* Wraps b's ops; undo with unwrap before freeing b. */
static void wrap(rc_backend *b, int cancel_at, int fail_at)
{
	F.inner = b->ops;
	F.ops = *b->ops;
	F.ops.forward = fault_forward;
	F.calls = 0;
	F.cancel_at = cancel_at;
	F.fail_at = fail_at;
	atomic_init(&F.cancel, 0);
	b->ops = &F.ops;
}

static void unwrap(rc_backend *b)
{
	b->ops = F.inner;
}

enum { ON_HOST, ON_OPENCL, NBACKENDS };
static const char *const names[NBACKENDS] = { "host", "opencl" };

static rc_backend *open_backend(int which)
{
	rc_backend *b = NULL;
	rc_err err;
	int rc = which == ON_HOST ? rc_backend_host_new(XCPU, &b, &err) : rc_backend_opencl_new(OCL, &b, &err);
	if (rc)
		print_error("%s backend: %s\n", names[which], err.msg);
	assert_int_equal(rc, 0);
	return b;
}

/* The host's guarded inverse (SSE by hand) against the plain loop in
 * double: zeros, negatives, a NaN, values under the guard, every length
 * around the vector width. */
static void test_host_inv_guarded(void **s)
{
	(void)s;
	static const size_t lengths[] = { 0, 1, 3, 4, 5, 7, 8, 9, 1000, 4099 };
	for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
		size_t n = lengths[li];
		float *a = malloc((n ? n : 1) * sizeof *a);
		double *want = malloc((n ? n : 1) * sizeof *want);
		assert_true(a && want);
		for (size_t i = 0; i < n; i++)
			a[i] = (float)(1.0 + (double)((i * 7919) % 101) / 10.0);
		tu_guard_cases(a, n);
		if (n > 6)
			a[6] = NAN;
		double mx = 0;
		for (size_t i = 0; i < n; i++)
			mx = a[i] > mx ? a[i] : mx;
		for (size_t i = 0; i < n; i++)
			want[i] = a[i] > (float)(1e-3 * mx) && a[i] > 0 ? 1.0 / a[i] : 0.0;
		rc_vinv_guarded(a, n, 1e-3);
		for (size_t i = 0; i < n; i++)
			assert_true(fabs(a[i] - want[i]) <= 1e-7 * fabs(want[i]));
		free(a);
		free(want);
	}
}

static void test_full_range(void **s)
{
	(void)s;
	for (int which = 0; which < NBACKENDS; which++) {
		rc_backend *b = open_backend(which);
		rc_err err;
		rc_vec *v = NULL, *p = NULL, *q = NULL, *w = NULL;
		float *a = malloc(C.np * sizeof(float)), *c = malloc(C.np * sizeof(float));
		float *va = malloc(C.nvox * sizeof(float)), *vc = malloc(C.nvox * sizeof(float));
		assert_true(a && c && va && vc);
		assert_int_equal(rc_bk_vec_new(b, RC_SPACE_VOLUME, &v, &err), 0);
		assert_int_equal(rc_bk_vec_new(b, RC_SPACE_VOLUME, &w, &err), 0);
		assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &p, &err), 0);
		assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &q, &err), 0);
		assert_int_equal(rc_bk_upload(b, v, C.ref, &err), 0);
		assert_int_equal(rc_bk_forward(b, RC_FP_RAYCAST, v, p, RC_VIEWS_ALL, &err), 0);
		assert_int_equal(rc_bk_forward(b, RC_FP_RAYCAST, v, q, 0, NVIEWS, &err), 0);
		assert_int_equal(rc_bk_download(b, p, a, &err), 0);
		assert_int_equal(rc_bk_download(b, q, c, &err), 0);
		assert_memory_equal(a, c, C.np * sizeof(float));
		/* a subset leaves the other views as they were */
		assert_int_equal(rc_bk_fill(b, q, -7.0f, RC_VIEWS_ALL, &err), 0);
		assert_int_equal(rc_bk_forward(b, RC_FP_RAYCAST, v, q, 5, 9, &err), 0);
		assert_int_equal(rc_bk_download(b, q, c, &err), 0);
		size_t view = C.np / NVIEWS;
		for (size_t i = 0; i < C.np; i++) {
			int in = i >= 5 * view && i < 9 * view;
			if (in ? c[i] != a[i] : c[i] != -7.0f)
				fail_msg("%s: forward over views 5..9 wrote element %zu wrongly", names[which], i);
		}
		/* rc_bk_upload_views writes views 5..9 alone (a streaming FDK's
		 * groups): the others keep what the vector held */
		assert_int_equal(rc_bk_fill(b, q, -7.0f, RC_VIEWS_ALL, &err), 0);
		assert_int_equal(rc_bk_upload_views(b, q, a, 5, 9, &err), 0);
		assert_int_equal(rc_bk_download(b, q, c, &err), 0);
		if (b->ops->upload_views)
			for (size_t i = 0; i < C.np; i++) {
				int in = i >= 5 * view && i < 9 * view;
				if (in ? c[i] != a[i] : c[i] != -7.0f)
					fail_msg("%s: upload of views 5..9 wrote element %zu wrongly", names[which], i);
			}
		else /* the whole vector */
			assert_memory_equal(a, c, C.np * sizeof(float));
		for (int kind = RC_BP_VOXEL; kind <= RC_BP_MATCHED; kind++) {
			assert_int_equal(rc_bk_back(b, (rc_bp_kind)kind, p, v, RC_VIEWS_ALL, &err), 0);
			assert_int_equal(rc_bk_back(b, (rc_bp_kind)kind, p, w, 0, NVIEWS, &err), 0);
			assert_int_equal(rc_bk_download(b, v, va, &err), 0);
			assert_int_equal(rc_bk_download(b, w, vc, &err), 0);
			/* the matched back projection adds with atomics in any order */
			assert_true(rc_metric_rel_error(va, vc, NULL, C.nvox) < 1e-6);
		}
		print_message("%s: RC_VIEWS_ALL equals 0..%d for forward and both back projectors; "
			      "stats %ld forward, %ld back calls\n", names[which], NVIEWS, b->stats.calls[RC_TASK_FORWARD],
			      b->stats.calls[RC_TASK_BACK]);
		assert_true(b->stats.calls[RC_TASK_FORWARD] == 3 && b->stats.views[RC_TASK_FORWARD] == 2 * NVIEWS + 4);
		rc_bk_vec_free(b, v);
		rc_bk_vec_free(b, w);
		rc_bk_vec_free(b, p);
		rc_bk_vec_free(b, q);
		rc_backend_free(b);
		free(a), free(c), free(va), free(vc);
	}
}

/* SART with 4 subsets: forward calls are 1 (row sums) + 4 per iteration. */
static void test_defaults_agree(void **s)
{
	(void)s;
	static const rc_algo_name algos[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	float *v[NBACKENDS];
	for (int k = 0; k < NBACKENDS; k++) {
		v[k] = malloc(C.nvox * sizeof(float));
		assert_non_null(v[k]);
	}
	for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
		rc_algo_params p;
		rc_algo_params_default(&p, algos[a]);
		p.iterations = 3;
		/* the pair both backends run (auto: the CPU engine's footprint
		 * pair on this geometry, whose voxels project 1.05 pixel apart) */
		p.projector = RC_PROJECTOR_RAYCAST;
		if (algos[a] == RC_ALGO_MLEM)
			p.subsets = 4;
		for (int k = 0; k < NBACKENDS; k++) {
			rc_backend *b = open_backend(k);
			rc_err err;
			assert_int_equal(rc_algo_run_on(&p, b, C.proj, v[k], NULL, &err), 0);
			rc_backend_free(b);
		}
		double d = rc_metric_rel_error(v[ON_OPENCL], v[ON_HOST], NULL, C.nvox);
		double e = rc_metric_rel_error(v[ON_HOST], C.ref, C.mask, C.nvox);
		print_message("%s defaults: opencl vs host %.2g (error %.4f)\n", rc_algo_name_str(algos[a]), d, e);
		assert_true(d < 1e-4);
	}
	for (int k = 0; k < NBACKENDS; k++)
		free(v[k]);
}

static void test_cancel_between_subsets(void **s)
{
	(void)s;
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.subsets = 4;
	p.iterations = 1;
	float *one = malloc(C.nvox * sizeof(float)), *got = malloc(C.nvox * sizeof(float));
	assert_true(one && got);
	rc_err err;
	for (int which = 0; which < NBACKENDS; which++) {
		rc_backend *b = open_backend(which);
		assert_int_equal(rc_algo_run_on(&p, b, C.proj, one, NULL, &err), 0);
		p.iterations = 3;
		/* raised in the 3rd subset of iteration 2, seen before the 4th
		 * (forwards: the row sums, iteration 1's blocks but its first,
		 * whose zero start is not projected, then 3) */
		wrap(b, 1 + 3 + 3, 0);
		rc_algo_hooks h = { .cancel = &F.cancel };
		int rc = rc_algo_run_on(&p, b, C.proj, got, &h, &err);
		unwrap(b);
		double d = rc_metric_rel_error(got, one, NULL, C.nvox);
		print_message("%s: cancelled in iteration 2 between subsets: %s; vs the 1-iteration volume %.2g\n",
			      names[which], err.msg, d);
		assert_int_equal(rc, RC_ECANCELLED);
		assert_true(d < 1e-6);
		p.iterations = 1;
		rc_backend_free(b);
	}
	free(one), free(got);
}

static void test_injected_failure(void **s)
{
	(void)s;
	static const rc_algo_name algos[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	float *v = malloc(C.nvox * sizeof(float));
	assert_non_null(v);
	for (int which = 0; which < NBACKENDS; which++)
		for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
			rc_algo_params p;
			rc_algo_params_plain(&p, algos[a]);
			p.iterations = 4;
			p.subsets = algos[a] == RC_ALGO_SART ? 3 : 1;
			rc_backend *b = open_backend(which);
			rc_err err;
			/* inside iteration 2 or 3 of every algorithm */
			wrap(b, 0, 3);
			int rc = rc_algo_run_on(&p, b, C.proj, v, NULL, &err);
			unwrap(b);
			assert_int_equal(rc, RC_EDEVICE);
			assert_non_null(strstr(err.msg, "injected"));
			rc_backend_free(b);
		}
	print_message("an injected failure at the 3rd forward projection comes back as RC_EDEVICE from sart, "
		      "sirt, cgls and mlem on both backends\n");
	free(v);
}

static int setup(void **s)
{
	(void)s;
	rc_err err;
	rc_opencl_options o;
	if (shepp_case_new(N, NVIEWS, 32.0, &C) || rc_engine_cpu_new(C.g, 0, &CPU, &err) ||
	    rc_exec_new(&CPU, 1, &XCPU, &err))
		return -1;
	rc_opencl_options_default(&o);
	if (rc_engine_opencl_new(C.g, &o, &OCL, &err)) {
		fprintf(stderr, "rc_engine_opencl_new: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **s)
{
	(void)s;
	rc_exec_free(XCPU);
	rc_engine_free(CPU);
	rc_engine_free(OCL);
	shepp_case_free(&C);
	return 0;
}

int main(void)
{
	tu_need_opencl();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_inv_guarded),
		cmocka_unit_test(test_full_range),
		cmocka_unit_test(test_defaults_agree),
		cmocka_unit_test(test_cancel_between_subsets),
		cmocka_unit_test(test_injected_failure),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
