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
 *  - a child whose projections fail with a device error is dropped and
 *    its views go to the others: the run still gives the host-only volume;
 *  - rc_backend_open on trigeneous with two devices (the CPU engine and
 *    PoCL, told apart by their hardware groups, with equal stored models)
 *    returns the split with the OpenCL backend resident, and its report
 *    shows both devices' views;
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
#include "plan/open.h"
#include "plan/recon.h"

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
		assert_true(d < 1e-5); /* measured 0.75-2e-6: OpenCL adds with atomics in any order */
		assert_true(rc_split_views(s, RC_TASK_FORWARD, 1) > 0 && rc_split_views(s, RC_TASK_BACK, 1) > 0);
		rc_backend_free(s);
	}
	rc_backend_free(h);
	free(proj);
	free(a);
	free(b);
}

/* The OpenCL backend with a forward that fails with RC_EDEVICE from its
 * second call on (a lost device). */
static rc_backend_ops flaky_ops;
static const rc_backend_ops *real_ops;
static int flaky_calls;

static int flaky_forward(rc_backend *b, rc_fp_kind k, const rc_vec *vol, rc_vec *proj, int first, int last,
			 rc_err *err)
{
	if (++flaky_calls >= 2)
		return rc_fail(err, RC_EDEVICE, "", "simulated device loss on call %d", flaky_calls);
	return real_ops->forward(b, k, vol, proj, first, last, err);
}

static void test_drop_failed_child(void **state)
{
	(void)state;
	size_t np = rc_geom_proj_count(G), nvox = rc_volume_count(rc_geom_volume(G));
	float *proj = malloc(np * sizeof *proj), *a = malloc(nvox * sizeof *a), *b = malloc(nvox * sizeof *b);
	assert_true(proj && a && b);
	rc_err err;
	struct result r = run_project(host(XCPU), RC_VIEWS_ALL);
	memcpy(proj, r.proj, np * sizeof *proj);
	result_free(&r);
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SIRT);
	p.iterations = 3;
	p.projector = RC_PROJECTOR_RAYCAST;
	rc_backend *h = host(XCPU);
	assert_int_equal(rc_algo_run_on(&p, h, proj, a, NULL, &err), 0);
	rc_backend_free(h);
	rc_backend *o = opencl();
	real_ops = o->ops;
	flaky_ops = *o->ops;
	flaky_ops.forward = flaky_forward;
	o->ops = &flaky_ops;
	flaky_calls = 0;
	rc_backend *s = split2(o, 12);
	assert_int_equal(rc_algo_run_on(&p, s, proj, b, NULL, &err), 0);
	double d = tu_rel_f_f(b, a, nvox);
	print_message("sirt with the OpenCL child lost at its 2nd forward projection: dropped (%s), vs host alone "
		      "%.2g\n",
		      rc_split_failure(s, 1)->msg, d);
	assert_int_equal(rc_split_alive(s, 1), 0);
	assert_int_equal(rc_split_failure(s, 1)->code, RC_EDEVICE);
	int v[2];
	rc_split_get(s, RC_TASK_BACK, v);
	assert_true(v[0] == NVIEWS && v[1] == 0);
	assert_true(d < 1e-5); /* measured 0.75-2e-6: OpenCL adds with atomics in any order */
	rc_backend_free(s);
	free(proj);
	free(a);
	free(b);
}

static void test_open_trigeneous(void **state)
{
	(void)state;
	rc_device all[RC_DEVICES_MAX], dev[2];
	int nall = 0, nocl = -1;
	rc_err err;
	assert_int_equal(rc_devices_enumerate(all, RC_DEVICES_MAX, &nall, &err), 0);
	for (int i = 0; i < nall; i++)
		if (all[i].kind == RC_DEVICE_OPENCL && nocl < 0)
			nocl = i;
	assert_true(nocl > 0);
	dev[0] = all[0];
	dev[1] = all[nocl];
	/* PoCL's CPU device shares the CPU engine's hardware: the planner would
	 * never give both work; here they count as two */
	snprintf(dev[1].hw_group, sizeof dev[1].hw_group, "test-second-device");
	char dir[] = "/tmp/test_split_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char shape[64];
	rc_shape_key(G, RC_BP_MATCHED, shape, sizeof shape);
	double w[6] = { 4, 8, 12, 16, 20, 24 }, t[6];
	for (int k = 0; k < 6; k++)
		t[k] = 1e-3 * w[k];
	for (int i = 0; i < 2; i++)
		for (int task = 0; task < RC_TASK_COUNT; task++)
			assert_int_equal(rc_models_add(dir, dev[i].device_id, shape, (rc_task)task, w, t, 6, 1, NULL, &err),
					 0);
	rc_recon_spec s;
	rc_recon_spec_default(&s);
	rc_algo_params_plain(&s.algo, RC_ALGO_SIRT);
	s.algo.iterations = 3;
	s.algo.projector = RC_PROJECTOR_RAYCAST;
	s.model_dir = dir;
	size_t np = rc_geom_proj_count(G), nvox = rc_volume_count(rc_geom_volume(G));
	float *proj = malloc(np * sizeof *proj), *a = malloc(nvox * sizeof *a), *b = malloc(nvox * sizeof *b);
	assert_true(proj && a && b);
	struct result r = run_project(host(XCPU), RC_VIEWS_ALL);
	memcpy(proj, r.proj, np * sizeof *proj);
	result_free(&r);
	rc_backend *h = host(XCPU), *bk = NULL;
	assert_int_equal(rc_algo_run_on(&s.algo, h, proj, a, NULL, &err), 0);
	rc_backend_free(h);
	if (rc_backend_open(RC_ENGINE_TRIGENEOUS, dev, 2, &s, G, &bk, &err))
		fail_msg("rc_backend_open: %s", err.msg);
	assert_true((bk->caps & RC_BK_SPLIT) && (bk->caps & RC_BK_HOST));
	assert_int_equal(rc_algo_run_on(&s.algo, bk, proj, b, NULL, &err), 0);
	rc_recon_report rep;
	memset(&rep, 0, sizeof rep);
	rc_backend_report(bk, 1, &rep);
	rc_backend_free(bk);
	double d = tu_rel_f_f(b, a, nvox);
	print_message("trigeneous through rc_backend_open: ran as \"%s\", %s %d + %s %d back views per call, vs host "
		      "alone %.2g\n",
		      rep.engine, rep.dev[0].name, rep.dev[0].views[RC_TASK_BACK], rep.dev[1].name,
		      rep.dev[1].views[RC_TASK_BACK], d);
	assert_string_equal(rep.engine, "trigeneous");
	assert_int_equal(rep.ndevices, 2);
	assert_true(rep.dev[0].views[RC_TASK_BACK] > 0 && rep.dev[1].views[RC_TASK_BACK] > 0);
	assert_true(rep.dev[1].measured_ms[RC_TASK_FORWARD] > 0);
	assert_true(d < 1e-5); /* measured 0.75-2e-6: OpenCL adds with atomics in any order */
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
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
		cmocka_unit_test(test_drop_failed_child),
		cmocka_unit_test(test_open_trigeneous),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
