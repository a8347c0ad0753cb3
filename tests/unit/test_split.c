/*
 * test_split: the split backend (split.h) over the host backend (the CPU
 * engine) and the OpenCL backend on PoCL, whose vectors stay in its
 * device's memory.
 *
 *  - every view on one child gives that child's own projections exactly
 *    (the home: the host backend's; the other: the OpenCL backend's, whose
 *    matched back projection adds with atomics, so to 1e-6), so the split
 *    adds nothing but the moves;
 *  - a half-and-half split of forward and back projection, whole and over
 *    a subset, gives the host-only projections within the engines' float
 *    rounding (back: partial volumes added in child order);
 *  - SIRT, CGLS and SART with subsets run on the split give the host-only
 *    volume within that rounding;
 *  - a host child reads and writes the split's memory in place (the host
 *    backend over the OpenCL engine as the second child);
 *  - refusals: a home without host vectors, a split that does not cover
 *    the views.
 * Skips (77) without OpenCL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/algo.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "backend/opencl/engine_opencl.h"
#include "backend/split.h"
#include "ocl_testutil.h"

#define NVOL 20
#define NU 32
#define NV 28
#define NVIEWS 24

static rc_geom *G;
static rc_engine *CPU, *OCL;
static rc_exec *XCPU, *XOCL;
static float *BALL;

static int setup(void **state)
{
	(void)state;
	rc_err err;
	rc_opencl_options o;
	G = tu_cone(NVOL, NU, NV, NVIEWS);
	if (!G || rc_engine_cpu_new(G, 0, &CPU, &err) || rc_exec_new(&CPU, 1, &XCPU, &err))
		return -1;
	rc_opencl_options_default(&o);
	o.images = 0;
	if (rc_engine_opencl_new(G, &o, &OCL, &err) || rc_exec_new(&OCL, 1, &XOCL, &err)) {
		fprintf(stderr, "rc_engine_opencl_new: %s\n", err.msg);
		return -1;
	}
	const rc_volume_desc *v = rc_geom_volume(G);
	BALL = calloc(rc_volume_count(v), sizeof *BALL);
	double c[3] = { 1.5, -2.0, 0.5 };
	tu_ball(v, c, 6.0, 0.02f, BALL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(BALL);
	rc_exec_free(XOCL);
	rc_exec_free(XCPU);
	rc_engine_free(OCL);
	rc_engine_free(CPU);
	rc_geom_free(G);
	return 0;
}

static rc_backend *host(rc_exec *x)
{
	rc_backend *b = NULL;
	rc_err err;
	assert_int_equal(rc_backend_host_new(x, &b, &err), 0);
	return b;
}

static rc_backend *opencl(void)
{
	rc_backend *b = NULL;
	rc_err err;
	if (rc_backend_opencl_new(OCL, &b, &err))
		fail_msg("rc_backend_opencl_new: %s", err.msg);
	assert_true(b->caps & RC_BK_RESIDENT);
	return b;
}

/* A split of the host backend and `other` with views[0], views[1] of both
 * tasks. */
static rc_backend *split2(rc_backend *other, int v0)
{
	rc_backend *c[2] = { host(XCPU), other }, *s = NULL;
	rc_err err;
	int views[2] = { v0, NVIEWS - v0 };
	assert_int_equal(rc_backend_split_new(c, 2, &s, &err), 0);
	assert_true((s->caps & RC_BK_SPLIT) && (s->caps & RC_BK_HOST) && !(s->caps & RC_BK_SPLAT));
	assert_int_equal(rc_split_set(s, RC_TASK_FORWARD, views, &err), 0);
	assert_int_equal(rc_split_set(s, RC_TASK_BACK, views, &err), 0);
	return s;
}

/* Forward of BALL over views [first, last) and its matched back projection
 * on b into proj and vol (host layouts). */
static void project(rc_backend *b, int first, int last, float *proj, float *vol)
{
	rc_vec *pv = NULL, *vv = NULL;
	rc_err err;
	size_t np = rc_geom_proj_count(G);
	memset(proj, 0, np * sizeof *proj);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_VOLUME, &vv, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &pv, &err), 0);
	assert_int_equal(rc_bk_upload(b, vv, BALL, &err), 0);
	assert_int_equal(rc_bk_upload(b, pv, proj, &err), 0);
	assert_int_equal(rc_bk_forward(b, RC_FP_RAYCAST, vv, pv, first, last, &err), 0);
	assert_int_equal(rc_bk_back(b, RC_BP_MATCHED, pv, vv, first, last, &err), 0);
	assert_int_equal(rc_bk_download(b, pv, proj, &err), 0);
	assert_int_equal(rc_bk_download(b, vv, vol, &err), 0);
	rc_bk_vec_free(b, pv);
	rc_bk_vec_free(b, vv);
}

struct result {
	float *proj, *vol;
};

static struct result run_project(rc_backend *b, int first, int last)
{
	struct result r = { malloc(rc_geom_proj_count(G) * sizeof(float)),
			    malloc(rc_volume_count(rc_geom_volume(G)) * sizeof(float)) };
	assert_non_null(r.proj);
	assert_non_null(r.vol);
	project(b, first, last, r.proj, r.vol);
	rc_backend_free(b);
	return r;
}

static void result_free(struct result *r)
{
	free(r->proj);
	free(r->vol);
}

static void test_one_child_is_that_child(void **state)
{
	(void)state;
	size_t np = rc_geom_proj_count(G), nvox = rc_volume_count(rc_geom_volume(G));
	struct result h = run_project(host(XCPU), RC_VIEWS_ALL), o = run_project(opencl(), RC_VIEWS_ALL);
	struct result sh = run_project(split2(opencl(), NVIEWS), RC_VIEWS_ALL);
	struct result so = run_project(split2(opencl(), 0), RC_VIEWS_ALL);
	assert_memory_equal(sh.proj, h.proj, np * sizeof(float));
	assert_memory_equal(sh.vol, h.vol, nvox * sizeof(float));
	assert_memory_equal(so.proj, o.proj, np * sizeof(float));
	/* the OpenCL matched back projection adds with atomics, in any order */
	double d = tu_rel_f_f(so.vol, o.vol, nvox);
	assert_true(d < 1e-6);
	print_message("every view on one child: that child's projections, bit for bit (OpenCL's back "
		      "projection %.2g: its atomics add in any order)\n", d);
	result_free(&h);
	result_free(&o);
	result_free(&sh);
	result_free(&so);
}

static void test_half_and_half(void **state)
{
	(void)state;
	size_t np = rc_geom_proj_count(G), nvox = rc_volume_count(rc_geom_volume(G));
	static const int ranges[][2] = { { 0, NVIEWS }, { 5, 17 } };
	for (int r = 0; r < 2; r++) {
		int a = ranges[r][0], b = ranges[r][1];
		struct result h = run_project(host(XCPU), a, b);
		struct result s = run_project(split2(opencl(), NVIEWS / 2), a, b);
		struct result sx = run_project(split2(host(XOCL), NVIEWS / 2), a, b);
		double dp = tu_rel_f_f(s.proj, h.proj, np), dv = tu_rel_f_f(s.vol, h.vol, nvox);
		double xp = tu_rel_f_f(sx.proj, s.proj, np), xv = tu_rel_f_f(sx.vol, s.vol, nvox);
		print_message("views %d..%d, host + opencl vs host: forward %.2g, back %.2g; "
			      "opencl backend vs opencl engine as the second child: %.2g, %.2g\n",
			      a, b, dp, dv, xp, xv);
		assert_true(dp < 1e-5 && dv < 1e-5);
		assert_true(xp < 1e-6 && xv < 1e-6);
		/* views outside the range stay as they were (zero) */
		for (int k = 0; k < NVIEWS; k++)
			if (k < a || k >= b)
				for (int i = 0; i < NU * NV; i++)
					assert_true(s.proj[(size_t)k * NU * NV + i] == 0.0f);
		result_free(&h);
		result_free(&s);
		result_free(&sx);
	}
}

static void test_algorithms(void **state)
{
	(void)state;
	static const rc_algo_name names[] = { RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_SART };
	size_t np = rc_geom_proj_count(G), nvox = rc_volume_count(rc_geom_volume(G));
	float *proj = malloc(np * sizeof *proj), *a = malloc(nvox * sizeof *a), *b = malloc(nvox * sizeof *b);
	assert_true(proj && a && b);
	rc_err err;
	rc_backend *h = host(XCPU);
	rc_vec *vv = NULL, *pv = NULL;
	assert_int_equal(rc_bk_vec_from(h, RC_SPACE_VOLUME, BALL, &vv, &err), 0);
	assert_int_equal(rc_bk_vec_for(h, RC_SPACE_PROJ, proj, &pv, &err), 0);
	assert_int_equal(rc_bk_forward(h, RC_FP_RAYCAST, vv, pv, RC_VIEWS_ALL, &err), 0);
	assert_int_equal(rc_bk_download(h, pv, proj, &err), 0);
	rc_bk_vec_free(h, vv);
	rc_bk_vec_free(h, pv);
	for (int k = 0; k < 3; k++) {
		rc_algo_params p;
		rc_algo_params_plain(&p, names[k]);
		p.iterations = 4;
		p.projector = RC_PROJECTOR_RAYCAST; /* the pair both children run */
		if (names[k] == RC_ALGO_SART)
			p.subsets = 4;
		assert_int_equal(rc_algo_run_on(&p, h, proj, a, NULL, &err), 0);
		rc_backend *s = split2(opencl(), 10);
		assert_int_equal(rc_algo_run_on(&p, s, proj, b, NULL, &err), 0);
		double d = tu_rel_f_f(b, a, nvox);
		print_message("%s, 4 iterations: host + opencl (10 + 14 views) vs host alone %.2g; opencl shares %ld "
			      "forward and %ld back views\n",
			      rc_algo_name_str(names[k]), d, rc_split_views(s, RC_TASK_FORWARD, 1),
			      rc_split_views(s, RC_TASK_BACK, 1));
		assert_true(d < 1e-4);
		assert_true(rc_split_views(s, RC_TASK_FORWARD, 1) > 0 && rc_split_views(s, RC_TASK_BACK, 1) > 0);
		rc_backend_free(s);
	}
	rc_backend_free(h);
	free(proj);
	free(a);
	free(b);
}

static void test_refusals(void **state)
{
	(void)state;
	rc_err err;
	rc_backend *c[2] = { opencl(), host(XCPU) }, *s = NULL;
	assert_int_equal(rc_backend_split_new(c, 2, &s, &err), RC_EINVAL);
	assert_int_equal(rc_backend_split_new(c, 0, &s, &err), RC_EINVAL);
	rc_backend_free(c[0]);
	s = split2(c[1], 12);
	int bad[2] = { 12, 11 }, neg[2] = { -1, NVIEWS + 1 };
	assert_int_equal(rc_split_set(s, RC_TASK_FORWARD, bad, &err), RC_EINVAL);
	assert_int_equal(rc_split_set(s, RC_TASK_BACK, neg, &err), RC_EINVAL);
	rc_backend_free(s);
}

int main(void)
{
	tu_need_opencl();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_child_is_that_child),
		cmocka_unit_test(test_half_and_half),
		cmocka_unit_test(test_algorithms),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
