/*
 * test_trigeneous: one job split across devices.  A split gives the volume
 * of a single device; a device that fails mid-job is dropped, the job is
 * re-planned on the others and still gives that volume; recon's trigeneous
 * mode calibrates, stores and lists models and reports its plan.  The two
 * "devices" are two OpenCL engines on PoCL (CPU and GPU variants), so the
 * test does not depend on other engines.  Skips (77) without OpenCL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo.h"
#include "plan/devices.h"
#include "backend/exec.h"
#include "ocl_testutil.h"
#include "plan/plan.h"
#include "plan/recon.h"
#include "backend/cpu/engine_cpu.h"

#define NVOL 20
#define NU 32
#define NV 28
#define NVIEWS 24
#define TEST_CACHE "/tmp/recond-test-ocl-cache"

static rc_geom *geom;

static int setup(void **state)
{
	(void)state;
	geom = tu_cone(NVOL, NU, NV, NVIEWS);
	return geom ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	rc_geom_free(geom);
	return 0;
}

static rc_engine *ocl(rc_opencl_variant var)
{
	rc_opencl_options o;
	rc_opencl_options_default(&o);
	o.variant = var;
	o.images = 0;
	o.cache_dir = TEST_CACHE;
	rc_engine *e = NULL;
	rc_err err;
	if (rc_engine_opencl_new(geom, &o, &e, &err))
		fail_msg("rc_engine_opencl_new: %s", err.msg);
	return e;
}

/* An engine that forwards to another and fails with RC_EDEVICE from its
 * fail_at-th call on (every call after that fails too: a dead device). */
typedef struct flaky {
	rc_engine base;
	rc_engine *inner;
	int calls, fail_at;
} flaky;

static int flaky_fwd(rc_engine *e, rc_fp_kind k, const float *vol, float *proj, int a, int b, rc_err *err)
{
	flaky *f = (flaky *)e;
	if (++f->calls >= f->fail_at)
		return rc_fail(err, RC_EDEVICE, "", "simulated device loss on call %d", f->calls);
	return rc_engine_forward(f->inner, k, vol, proj, a, b, err);
}

static int flaky_back(rc_engine *e, rc_bp_kind k, const float *proj, float *vol, int a, int b, rc_err *err)
{
	flaky *f = (flaky *)e;
	if (++f->calls >= f->fail_at)
		return rc_fail(err, RC_EDEVICE, "", "simulated device loss on call %d", f->calls);
	return rc_engine_back(f->inner, k, proj, vol, a, b, err);
}

static void flaky_free(rc_engine *e)
{
	flaky *f = (flaky *)e;
	rc_engine_free(f->inner);
	free(f);
}

static const rc_engine_ops flaky_ops = { .forward = flaky_fwd, .back = flaky_back, .free = flaky_free };

static rc_engine *flaky_new(rc_engine *inner, int fail_at)
{
	flaky *f = calloc(1, sizeof *f);
	f->base = *inner;
	f->base.ops = &flaky_ops;
	snprintf(f->base.hw_group, sizeof f->base.hw_group, "flaky");
	f->inner = inner;
	f->fail_at = fail_at;
	return &f->base;
}

static float *ball_projections(void)
{
	const rc_volume_desc *v = rc_geom_volume(geom);
	float *f = malloc(rc_volume_count(v) * sizeof *f);
	double c[3] = { 1.0, -1.0, 0.5 };
	tu_ball(v, c, 8.0, 0.02f, f);
	double *p = malloc(rc_geom_proj_count(geom) * sizeof *p);
	tu_ref_fp(geom, f, p, 0, NVIEWS);
	float *pf = malloc(rc_geom_proj_count(geom) * sizeof *pf);
	for (size_t i = 0; i < rc_geom_proj_count(geom); i++)
		pf[i] = (float)p[i];
	free(p);
	free(f);
	return pf;
}

static float *sart(rc_engine **e, int n, const int *split, int *alive_after, rc_exec_replan_fn fn, void *ud)
{
	rc_exec *x = NULL;
	rc_err err;
	assert_int_equal(rc_exec_new(e, n, &x, &err), 0);
	if (split) {
		assert_int_equal(rc_exec_set_split(x, RC_TASK_FORWARD, split, &err), 0);
		assert_int_equal(rc_exec_set_split(x, RC_TASK_BACK, split, &err), 0);
	}
	if (fn)
		rc_exec_set_replan(x, fn, ud);
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.iterations = 3;
	float *proj = ball_projections();
	float *vol = malloc(rc_volume_count(rc_geom_volume(geom)) * sizeof *vol);
	int rc = rc_algo_run(&p, x, proj, vol, NULL, &err);
	if (rc)
		fail_msg("SART: %s", err.msg);
	for (int i = 0; alive_after && i < n; i++)
		alive_after[i] = rc_exec_alive(x, i);
	if (alive_after && !alive_after[0])
		printf("  engine 0 dropped: %s\n", rc_exec_failure(x, 0)->msg);
	rc_exec_free(x);
	free(proj);
	return vol;
}

/* Split back and forward projections equal one device's. */
static void split_equals_single(void **state)
{
	(void)state;
	rc_engine *e[2] = { ocl(RC_OPENCL_VARIANT_CPU), ocl(RC_OPENCL_VARIANT_GPU) };
	size_t nvox = rc_volume_count(rc_geom_volume(geom)), np = rc_geom_proj_count(geom);
	float *proj = ball_projections(), *one = malloc(nvox * sizeof *one), *two = malloc(nvox * sizeof *two);
	rc_exec *x1 = NULL, *x2 = NULL;
	rc_err err;
	assert_int_equal(rc_exec_new(e, 1, &x1, &err), 0);
	assert_int_equal(rc_exec_new(e, 2, &x2, &err), 0);
	int split[2] = { 9, 15 };
	assert_int_equal(rc_exec_set_split(x2, RC_TASK_BACK, split, &err), 0);
	assert_int_equal(rc_exec_set_split(x2, RC_TASK_FORWARD, split, &err), 0);
	assert_int_equal(rc_exec_back(x1, RC_BP_VOXEL, proj, one, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_exec_back(x2, RC_BP_VOXEL, proj, two, 0, NVIEWS, &err), 0);
	double d = tu_rel_f_f(two, one, nvox);
	printf("  back projection, split (9, 15) vs one device: %.3g\n", d);
	assert_true(d < 1e-6);
	assert_int_equal(rc_exec_last_views(x2, RC_TASK_BACK, 0), 9);
	assert_int_equal(rc_exec_last_views(x2, RC_TASK_BACK, 1), 15);
	float *p1 = calloc(np, sizeof *p1), *p2 = calloc(np, sizeof *p2);
	assert_int_equal(rc_exec_forward(x1, RC_FP_RAYCAST, one, p1, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_exec_forward(x2, RC_FP_RAYCAST, one, p2, 0, NVIEWS, &err), 0);
	d = tu_rel_f_f(p2, p1, np);
	printf("  forward projection, split vs one device: %.3g\n", d);
	assert_true(d < 1e-6);
	rc_exec_free(x1);
	rc_exec_free(x2);
	free(proj);
	free(one);
	free(two);
	free(p1);
	free(p2);
	rc_engine_free(e[0]);
	rc_engine_free(e[1]);
}

/* A whole SART run split across two devices equals the run on one. */
static void sart_split_equals_single(void **state)
{
	(void)state;
	rc_engine *e[2] = { ocl(RC_OPENCL_VARIANT_CPU), ocl(RC_OPENCL_VARIANT_GPU) };
	size_t nvox = rc_volume_count(rc_geom_volume(geom));
	float *one = sart(e, 1, NULL, NULL, NULL, NULL);
	int split[2] = { 10, 14 };
	float *two = sart(e, 2, split, NULL, NULL, NULL);
	double d = tu_rel_f_f(two, one, nvox);
	printf("  SART (3 iterations), split vs one device: %.3g\n", d);
	assert_true(d < 1e-5);
	free(one);
	free(two);
	rc_engine_free(e[0]);
	rc_engine_free(e[1]);
}

struct replan_probe {
	int called, failed;
	rc_model m[2];
};

/* What recon.c does: re-run the planner over the engines still alive. */
static int test_replan(void *ud, rc_exec *x, int failed, rc_err *err)
{
	struct replan_probe *p = ud;
	p->called++;
	p->failed = failed;
	rc_model m[2] = { p->m[0], p->m[1] };
	for (int i = 0; i < 2; i++)
		if (!rc_exec_alive(x, i))
			m[i].valid = 0;
	rc_plan plan;
	int rc = rc_plan_split(m, NULL, 2, NVIEWS, 0, &plan, err);
	for (int t = 0; !rc && t < RC_TASK_COUNT; t++)
		rc = rc_exec_set_split(x, (rc_task)t, plan.views, err);
	return rc;
}

/* Engine 0 dies on its 4th call (second iteration): dropped, re-planned,
 * and the job ends with the single-device volume. */
static void failed_device_is_dropped(void **state)
{
	(void)state;
	size_t nvox = rc_volume_count(rc_geom_volume(geom));
	rc_engine *solo = ocl(RC_OPENCL_VARIANT_GPU);
	float *ref = sart(&solo, 1, NULL, NULL, NULL, NULL);
	rc_engine_free(solo);

	for (int with_hook = 0; with_hook < 2; with_hook++) {
		rc_engine *e[2] = { flaky_new(ocl(RC_OPENCL_VARIANT_CPU), 4), ocl(RC_OPENCL_VARIANT_GPU) };
		struct replan_probe probe = { .m = { { .a = 0.01, .b = 0.0, .valid = 1 },
						     { .a = 0.02, .b = 0.0, .valid = 1 } } };
		int split[2] = { 12, 12 }, alive[2];
		float *got = sart(e, 2, split, alive, with_hook ? test_replan : NULL, &probe);
		assert_int_equal(alive[0], 0);
		assert_int_equal(alive[1], 1);
		if (with_hook) {
			assert_int_equal(probe.called, 1);
			assert_int_equal(probe.failed, 0);
		}
		double d = tu_rel_f_f(got, ref, nvox);
		printf("  SART with engine 0 lost mid-job (%s re-plan) vs one device: %.3g\n",
		       with_hook ? "planner" : "default", d);
		assert_true(d < 1e-5);
		free(got);
		rc_engine_free(e[0]);
		rc_engine_free(e[1]);
	}
	/* both engines dead: the job fails with the device's error */
	rc_engine *e[2] = { flaky_new(ocl(RC_OPENCL_VARIANT_CPU), 2), flaky_new(ocl(RC_OPENCL_VARIANT_GPU), 2) };
	rc_exec *x = NULL;
	rc_err err;
	assert_int_equal(rc_exec_new(e, 2, &x, &err), 0);
	int split[2] = { 12, 12 };
	assert_int_equal(rc_exec_set_split(x, RC_TASK_BACK, split, &err), 0);
	float *proj = ball_projections(), *vol = malloc(nvox * sizeof *vol);
	assert_int_equal(rc_exec_back(x, RC_BP_VOXEL, proj, vol, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_exec_back(x, RC_BP_VOXEL, proj, vol, 0, NVIEWS, &err), RC_EDEVICE);
	assert_non_null(strstr(err.msg, "simulated device loss"));
	/* a dropped engine cannot be given views again */
	rc_exec_free(x);
	free(proj);
	free(vol);
	free(ref);
	rc_engine_free(e[0]);
	rc_engine_free(e[1]);
}

static void model_store_roundtrip(void **state)
{
	(void)state;
	char dir[] = "/tmp/recond-modelsXXXXXX";
	assert_non_null(mkdtemp(dir));
	double w[6] = { 5, 10, 15, 20, 30, 40 }, t[6];
	for (int i = 0; i < 6; i++)
		t[i] = 0.002 * w[i] + 0.01;
	rc_model m, l[RC_TASK_COUNT];
	rc_err err;
	assert_int_equal(rc_models_add(dir, "opencl:test dev/1", "cone-1x1x1-1x1-voxel", RC_TASK_BACK, w, t, 6, 1, &m, &err), 0);
	assert_true(m.valid && fabs(m.a - 0.002) < 1e-9);
	assert_int_equal(rc_models_load(dir, "opencl:test dev/1", "cone-1x1x1-1x1-voxel", l, &err), 0);
	assert_false(l[RC_TASK_FORWARD].valid);
	assert_true(l[RC_TASK_BACK].valid && fabs(l[RC_TASK_BACK].b - 0.01) < 1e-9);
	/* a job measured the device slower at W = 40: the refit follows */
	double w1 = 40, t1 = 0.002 * 40 + 0.01 + 0.02;
	assert_int_equal(rc_models_add(dir, "opencl:test dev/1", "cone-1x1x1-1x1-voxel", RC_TASK_BACK, &w1, &t1, 1, 0, &m, &err), 0);
	assert_true(rc_model_predict(&m, 40) > 0.002 * 40 + 0.01);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* recon: trigeneous calibrates, reports the plan, stores models that
 * rc_devices_list shows; opencl alone gives the same volume. */
static void recon_trigeneous(void **state)
{
	(void)state;
	char dir[] = "/tmp/recond-reconXXXXXX";
	assert_non_null(mkdtemp(dir));
	const rc_volume_desc *v = rc_geom_volume(geom);
	const rc_detector_desc *det = rc_geom_detector(geom);
	double ang[NVIEWS];
	for (int k = 0; k < NVIEWS; k++)
		ang[k] = 360.0 * k / NVIEWS + 3.0;
	rc_recon_spec s;
	rc_recon_spec_default(&s);
	s.geom = (rc_geom_spec){ .type = RC_GEOM_CONE, .nviews = NVIEWS, .det = *det, .source_isocenter_mm = 300,
				 .source_detector_mm = 500, .angles_deg = ang };
	s.vol = *v;
	s.algo.iterations = 2;
	/* the pair every engine runs: alone, the CPU engine would run its
	 * footprint pair on this geometry, the plan over two engines ray
	 * casting's */
	s.algo.projector = RC_PROJECTOR_RAYCAST;
	s.model_dir = dir;
	float *proj = ball_projections();
	size_t nvox = rc_volume_count(v);
	float *a = malloc(nvox * sizeof *a), *b = malloc(nvox * sizeof *b);
	rc_recon_report rep;
	rc_err err;
	s.engine = RC_ENGINE_TRIGENEOUS;
	if (rc_recon_run(&s, proj, a, NULL, &rep, &err))
		fail_msg("trigeneous: %s", err.msg);
	printf("  trigeneous ran as \"%s\" on %d device(s)\n", rep.engine, rep.ndevices);
	int sum[RC_TASK_COUNT] = { 0, 0 }, predicted = 0;
	for (int i = 0; i < rep.ndevices; i++) {
		printf("    %-8s %s: views fp %d bp %d, predicted %.2f/%.2f ms, measured %.2f/%.2f ms\n",
		       rep.dev[i].name, rep.dev[i].device_id, rep.dev[i].views[0], rep.dev[i].views[1],
		       rep.dev[i].predicted_ms[0], rep.dev[i].predicted_ms[1], rep.dev[i].measured_ms[0],
		       rep.dev[i].measured_ms[1]);
		for (int t = 0; t < RC_TASK_COUNT; t++)
			sum[t] += rep.dev[i].views[t];
		predicted += rep.dev[i].predicted_ms[0] > 0;
	}
	assert_int_equal(sum[0], NVIEWS);
	assert_int_equal(sum[1], NVIEWS);

	rc_device_listing l[RC_DEVICES_MAX];
	int n = 0;
	assert_int_equal(rc_devices_list(dir, l, RC_DEVICES_MAX, &n, &err), 0);
	int with_models = 0;
	for (int i = 0; i < n; i++)
		for (int m = 0; m < l[i].nmodels; m++) {
			printf("    model %s %s: fp a=%.3g b=%.3g, bp a=%.3g b=%.3g\n", l[i].dev.device_id,
			       l[i].models[m].shape, l[i].models[m].model[0].a, l[i].models[m].model[0].b,
			       l[i].models[m].model[1].a, l[i].models[m].model[1].b);
			with_models += l[i].models[m].model[0].valid && l[i].models[m].model[1].valid;
		}
	/* calibration on a loaded machine may fail to fit; then the device
	 * runs unplanned, and says so by having no prediction */
	if (with_models)
		assert_true(predicted >= 1);
	else
		printf("  (calibration gave no model on this run: no prediction to check)\n");

	/* the plan's result equals the device it chose run alone (engines of
	 * different kinds are compared by test_engine_opencl, not here) */
	char ran[16];
	snprintf(ran, sizeof ran, "%s", rep.engine);
	double d;
	if (strcmp(ran, "trigeneous")) {
		int ev = -1;
		assert_int_equal(rc_name_parse(RC_NAMES_ENGINE, ran, &ev), 0);
		s.engine = (rc_engine_choice)ev;
		assert_int_equal(rc_recon_run(&s, proj, b, NULL, &rep, &err), 0);
		d = tu_rel_f_f(a, b, nvox);
		printf("  trigeneous vs %s alone: %.3g\n", ran, d);
		assert_true(d < 1e-6);
	}
	s.engine = RC_ENGINE_OPENCL;
	assert_int_equal(rc_recon_run(&s, proj, b, NULL, &rep, &err), 0);
	assert_string_equal(rep.engine, "opencl");
	assert_int_equal(rep.dev[0].views[0], NVIEWS);
	d = tu_rel_f_f(a, b, nvox);
	printf("  trigeneous vs opencl alone: %.3g\n", d);
	assert_true(d < (strcmp(ran, "opencl") ? 1e-4 : 1e-6)); /* engines agree to float rounding */

	/* auto reads the stored models (no calibration) and runs what they favour */
	s.engine = RC_ENGINE_AUTO;
	assert_int_equal(rc_recon_run(&s, proj, b, NULL, &rep, &err), 0);
	printf("  auto with stored models ran as \"%s\" on %d device(s)\n", rep.engine, rep.ndevices);
	int vsum = 0;
	for (int i = 0; i < rep.ndevices; i++)
		vsum += rep.dev[i].views[RC_TASK_BACK];
	assert_int_equal(vsum, NVIEWS);
	d = tu_rel_f_f(b, a, nvox);
	printf("  auto (%s) vs trigeneous (%s): %.3g\n", rep.engine, ran, d);
	assert_true(d < (strcmp(rep.engine, ran) ? 1e-4 : 1e-6));

	s.engine = (rc_engine_choice)99; /* no engine: the spec parser never gives it */
	assert_int_equal(rc_recon_run(&s, proj, b, NULL, &rep, &err), RC_EINVAL);
	assert_string_equal(err.field, "execution.engine");
	free(proj);
	free(a);
	free(b);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* A fan stack split over two kinds of engine: views 0..9 on the CPU engine
 * and the rest on the OpenCL engine (their 2-D pairs: proj_joseph.c and
 * bp_plane.cl), SART and FBP, against the CPU engine alone; then recon's
 * trigeneous on the same fan (calibrated, planned), against cpu alone.  A
 * split view range of a [slice][view][u] stack is not contiguous: each
 * engine indexes through the strides (geometry.h). */
static void split_2d(void **state)
{
	(void)state;
	enum { N = 24, NZ = 3, NUF = 40, NVF = 30 };
	double ang[NVF];
	for (int k = 0; k < NVF; k++)
		ang[k] = 360.0 * k / NVF;
	rc_volume_desc v = { N, N, NZ, 1.0, 1.0, 1.0, 0, 0, 0 };
	rc_geom_spec sp = { .type = RC_GEOM_FAN, .nviews = NVF, .det = { NUF, 1, 1.5, 1.0, 0, 0, RC_DETECTOR_FLAT },
			    .source_isocenter_mm = 60, .source_detector_mm = 120, .angles_deg = ang };
	rc_geom *g = NULL;
	rc_err err;
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), 0);
	size_t nvox = rc_volume_count(&v), np = rc_geom_proj_count(g);
	float *proj = malloc(np * sizeof *proj), *a = malloc(nvox * sizeof *a), *b = malloc(nvox * sizeof *b);
	/* projections of a ball made by the CPU engine's forward projection */
	float *ball = malloc(nvox * sizeof *ball);
	double c[3] = { 2.0, -1.0, 0.0 };
	tu_ball(&v, c, 7.0, 0.02f, ball);
	rc_engine *cpu = NULL;
	assert_int_equal(rc_engine_cpu_new(g, 0, &cpu, &err), 0);
	assert_int_equal(rc_engine_forward(cpu, RC_FP_RAYCAST, ball, proj, 0, NVF, &err), 0);
	static const rc_algo_name names[] = { RC_ALGO_SART, RC_ALGO_FDK };
	for (int i = 0; i < 2; i++) {
		rc_algo_params p;
		rc_algo_params_plain(&p, names[i]);
		if (names[i] != RC_ALGO_FDK)
			p.iterations = 3;
		rc_engine *one[1] = { NULL };
		assert_int_equal(rc_engine_cpu_new(g, 0, &one[0], &err), 0);
		rc_exec *x = NULL;
		assert_int_equal(rc_exec_new(one, 1, &x, &err), 0);
		assert_int_equal(rc_algo_run(&p, x, proj, a, NULL, &err), 0);
		rc_exec_free(x);
		rc_engine_free(one[0]);
		rc_engine *two[2] = { NULL, NULL };
		assert_int_equal(rc_engine_cpu_new(g, 0, &two[0], &err), 0);
		rc_opencl_options o;
		rc_opencl_options_default(&o);
		o.cache_dir = TEST_CACHE;
		if (rc_engine_opencl_new(g, &o, &two[1], &err))
			fail_msg("rc_engine_opencl_new on a fan: %s", err.msg);
		const int split[2] = { 10, NVF - 10 };
		assert_int_equal(rc_exec_new(two, 2, &x, &err), 0);
		assert_int_equal(rc_exec_set_split(x, RC_TASK_FORWARD, split, &err), 0);
		assert_int_equal(rc_exec_set_split(x, RC_TASK_BACK, split, &err), 0);
		assert_int_equal(rc_algo_run(&p, x, proj, b, NULL, &err), 0);
		double d = tu_rel_f_f(a, b, nvox);
		printf("  fan %s split 10 + %d views over cpu + opencl vs cpu alone: %.3g\n", rc_algo_name_str(names[i]),
		       NVF - 10, d);
		assert_true(d < 1e-5);
		rc_exec_free(x);
		rc_engine_free(two[0]);
		rc_engine_free(two[1]);
	}
	/* recon: trigeneous plans the fan over what opens, cpu alone runs the
	 * CPU engine for fdk (the iterative algorithms would go to the tensor
	 * backend there) */
	char dir[] = "/tmp/recond-recon2dXXXXXX";
	assert_non_null(mkdtemp(dir));
	rc_recon_spec s;
	rc_recon_spec_default(&s);
	s.geom = sp;
	s.vol = v;
	rc_algo_params_plain(&s.algo, RC_ALGO_FDK);
	s.model_dir = dir;
	rc_recon_report rep;
	s.engine = RC_ENGINE_TRIGENEOUS;
	if (rc_recon_run(&s, proj, a, NULL, &rep, &err))
		fail_msg("trigeneous on a fan: %s", err.msg);
	int sum = 0;
	for (int i = 0; i < rep.ndevices; i++)
		sum += rep.dev[i].views[RC_TASK_BACK];
	printf("  fan fdk trigeneous ran as \"%s\" on %d device(s)\n", rep.engine, rep.ndevices);
	assert_int_equal(sum, NVF);
	s.engine = RC_ENGINE_CPU;
	assert_int_equal(rc_recon_run(&s, proj, b, NULL, &rep, &err), 0);
	double d = tu_rel_f_f(a, b, nvox);
	printf("  fan fdk trigeneous vs cpu alone: %.3g\n", d);
	assert_true(d < 1e-5);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	rc_engine_free(cpu);
	rc_geom_free(g);
	free(ball);
	free(proj);
	free(a);
	free(b);
}

int main(void)
{
	tu_need_opencl();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(split_equals_single),
		cmocka_unit_test(sart_split_equals_single),
		cmocka_unit_test(failed_device_is_dropped),
		cmocka_unit_test(model_store_roundtrip),
		cmocka_unit_test(recon_trigeneous),
		cmocka_unit_test(split_2d),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
