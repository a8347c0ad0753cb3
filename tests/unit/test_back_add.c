/*
 * test_back_add: the accumulating back projection (backend.h's back_add,
 * engine.h's back_add) on every backend this machine runs: the host
 * backend over the CPU engine, over the OpenCL engine (PoCL) and over an
 * executor of both (partial volumes), the resident OpenCL backend, and the
 * split backend over a host home and a resident OpenCL child; cone
 * (RC_BP_VOXEL, RC_BP_MATCHED and RC_BP_SPLAT) and fan (RC_BP_VOXEL, FBP's) geometries.
 * Each adds views [0, a) then [a, n) onto a random volume s; that must
 * equal s + back(0..n) of the same backend, and s + the double-precision
 * reference (ocl_testutil.h) for the cone's voxel back projection.  An
 * empty range adds nothing.  An executor whose second (or first) engine
 * fails during back_add drops it and reruns the call without adding any
 * share twice.  Then streaming FDK on the resident OpenCL
 * backend (its groups added on the device, no scratch volume) equals the
 * batch FDK of the same backend.  The CUDA backend has the same check in
 * test_engine_cuda.c (stand-in).
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
#include "backend/backend.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "backend/opencl/engine_opencl.h"
#include "backend/split.h"
#include "geometry/metrics.h"
#include "ocl_testutil.h"

#define NVIEWS 72 /* more than RC_BPV_BLOCK per call: the CPU keeps its sums in tiles */

enum { HOST_CPU, HOST_OCL, HOST_BOTH, OCL_RESIDENT, SPLIT, NKINDS };
static const char *const kind_names[NKINDS] = { "host(cpu)", "host(opencl engine)", "host(cpu+opencl exec)",
						"opencl resident", "split(host cpu + opencl)" };

typedef struct opened {
	rc_engine *cpu, *ocl, *cpu2;
	rc_exec *x;
	rc_backend *b;
} opened;

static void open_kind(const rc_geom *g, int kind, opened *o)
{
	rc_err err;
	rc_opencl_options oo;
	rc_opencl_options_default(&oo);
	memset(o, 0, sizeof *o);
	assert_int_equal(rc_engine_cpu_new(g, 2, &o->cpu, &err), 0);
	if (kind != HOST_CPU && rc_engine_opencl_new(g, &oo, &o->ocl, &err))
		fail_msg("OpenCL engine: %s", err.msg);
	int views[2] = { NVIEWS / 3, NVIEWS - NVIEWS / 3 };
	switch (kind) {
	case HOST_CPU:
	case HOST_OCL:
		assert_int_equal(rc_exec_new(kind == HOST_CPU ? &o->cpu : &o->ocl, 1, &o->x, &err), 0);
		assert_int_equal(rc_backend_host_new(o->x, &o->b, &err), 0);
		break;
	case HOST_BOTH: {
		rc_engine *e[2] = { o->cpu, o->ocl };
		assert_int_equal(rc_exec_new(e, 2, &o->x, &err), 0);
		assert_int_equal(rc_exec_set_split(o->x, RC_TASK_BACK, views, &err), 0);
		assert_int_equal(rc_backend_host_new(o->x, &o->b, &err), 0);
		break;
	}
	case OCL_RESIDENT:
		assert_int_equal(rc_backend_opencl_new(o->ocl, &o->b, &err), 0);
		break;
	case SPLIT: {
		rc_backend *c[2] = { NULL, NULL };
		assert_int_equal(rc_exec_new(&o->cpu, 1, &o->x, &err), 0);
		assert_int_equal(rc_backend_host_new(o->x, &c[0], &err), 0);
		assert_int_equal(rc_backend_opencl_new(o->ocl, &c[1], &err), 0);
		assert_int_equal(rc_backend_split_new(c, 2, &o->b, &err), 0);
		assert_int_equal(rc_split_set(o->b, RC_TASK_BACK, views, &err), 0);
		break;
	}
	}
}

static void close_kind(opened *o)
{
	rc_backend_free(o->b);
	rc_exec_free(o->x);
	rc_engine_free(o->ocl);
	rc_engine_free(o->cpu);
}

static float rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((*s >> 40) & 0xffffff) / (float)(1 << 24);
}

/* s + back(a) + back(b) against s + back(a u b) on one backend (and the
 * double reference when ref is given); returns the relative L2 gap. */
static double add_case(const rc_geom *g, int kind, rc_bp_kind bp, const double *ref)
{
	size_t nvox = rc_volume_count(rc_geom_volume(g)), np = rc_geom_proj_count(g);
	float *p = malloc(np * sizeof *p), *s = malloc(nvox * sizeof *s), *got = malloc(nvox * sizeof *got),
	      *want = malloc(nvox * sizeof *want);
	assert_true(p && s && got && want);
	uint64_t seed = 7;
	for (size_t i = 0; i < np; i++)
		p[i] = rnd(&seed);
	for (size_t i = 0; i < nvox; i++)
		s[i] = rnd(&seed) - 0.5f;
	opened o;
	open_kind(g, kind, &o);
	rc_backend *b = o.b;
	rc_err err;
	rc_vec *vp = NULL, *v = NULL;
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &vp, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_VOLUME, &v, &err), 0);
	assert_int_equal(rc_bk_upload(b, vp, p, &err), 0);
	assert_int_equal(rc_bk_back(b, bp, vp, v, RC_VIEWS_ALL, &err), 0);
	assert_int_equal(rc_bk_download(b, v, want, &err), 0);
	for (size_t i = 0; i < nvox; i++)
		want[i] += s[i];
	assert_int_equal(rc_bk_upload(b, v, s, &err), 0);
	int a = NVIEWS / 2 - 1;
	if (rc_bk_back_add(b, bp, vp, v, 0, a, &err) || rc_bk_back_add(b, bp, vp, v, a, a, &err) ||
	    rc_bk_back_add(b, bp, vp, v, a, NVIEWS, &err))
		fail_msg("%s: back_add: %s", kind_names[kind], err.msg);
	assert_int_equal(rc_bk_download(b, v, got, &err), 0);
	double gap = rc_metric_rel_error(got, want, NULL, nvox);
	if (ref) {
		double *r = malloc(nvox * sizeof *r);
		assert_non_null(r);
		for (size_t i = 0; i < nvox; i++)
			r[i] = ref[i] + s[i];
		double e = tu_rel_f_d(got, r, nvox);
		print_message("  %-26s vs the double reference %.2g\n", kind_names[kind], e);
		assert_true(e < 1e-4);
		free(r);
	}
	rc_bk_vec_free(b, v);
	rc_bk_vec_free(b, vp);
	close_kind(&o);
	free(p), free(s), free(got), free(want);
	return gap;
}

static void test_cone(void **state)
{
	(void)state;
	rc_geom *g = tu_cone(14, 24, 20, NVIEWS);
	assert_non_null(g);
	size_t nvox = rc_volume_count(rc_geom_volume(g)), np = rc_geom_proj_count(g);
	/* the reference of RC_BP_VOXEL over the same random views */
	float *p = malloc(np * sizeof *p);
	double *ref = malloc(nvox * sizeof *ref);
	assert_true(p && ref);
	uint64_t seed = 7;
	for (size_t i = 0; i < np; i++)
		p[i] = rnd(&seed);
	tu_ref_bp(g, p, ref, 0, NVIEWS);
	for (int kind = 0; kind < NKINDS; kind++)
		for (int bp = RC_BP_VOXEL; bp <= RC_BP_MATCHED; bp++) {
			double gap = add_case(g, kind, (rc_bp_kind)bp, bp == RC_BP_VOXEL ? ref : NULL);
			print_message("cone %-7s %-26s s + back(a) + back(b) vs s + back(a u b): %.2g\n",
				      bp == RC_BP_VOXEL ? "voxel" : "matched", kind_names[kind], gap);
			assert_true(gap < 1e-6);
		}
	/* the splat pair's gather, which on the devices adds from its first
	 * chunk when asked to (kernels' accumulate flag); on finer voxels,
	 * which project less than a pixel apart */
	rc_geom *fine = tu_cone(24, 24, 20, NVIEWS);
	assert_non_null(fine);
	for (int kind = 0; kind < NKINDS; kind++) {
		double gap = add_case(fine, kind, RC_BP_SPLAT, NULL);
		print_message("cone splat   %-26s s + back(a) + back(b) vs s + back(a u b): %.2g\n", kind_names[kind],
			      gap);
		assert_true(gap < 1e-6);
	}
	rc_geom_free(fine);
	/* the CPU engine's footprint back projection, which starts from a
	 * zeroed volume: it adds through a volume of the call */
	double gap = add_case(g, HOST_CPU, RC_BP_FOOTPRINT, NULL);
	print_message("cone footprint %-26s s + back(a) + back(b) vs s + back(a u b): %.2g\n", kind_names[HOST_CPU],
		      gap);
	assert_true(gap < 1e-6);
	free(p), free(ref);
	rc_geom_free(g);
}

static void test_fan(void **state)
{
	(void)state;
	double ang[NVIEWS];
	for (int k = 0; k < NVIEWS; k++)
		ang[k] = 360.0 * k / NVIEWS + 1.5;
	rc_geom_spec s = { .type = RC_GEOM_FAN, .nviews = NVIEWS, .det = { 40, 1, 1.0, 1.0, 0.35, 0 },
			   .source_isocenter_mm = 200, .source_detector_mm = 300, .angles_deg = ang };
	rc_volume_desc v = { .nx = 20, .ny = 18, .nz = 3, .vx = 1.2, .vy = 1.2, .vz = 1.0 };
	rc_geom *g = NULL;
	rc_err err;
	assert_int_equal(rc_geom_new(&s, &v, NULL, &g, &err), 0);
	/* the resident OpenCL backend and the split over it project cone and
	 * matrices geometries only */
	for (int kind = HOST_CPU; kind <= HOST_BOTH; kind++) {
		double gap = add_case(g, kind, RC_BP_VOXEL, NULL);
		print_message("fan  voxel   %-26s s + back(a) + back(b) vs s + back(a u b): %.2g\n", kind_names[kind],
			      gap);
		assert_true(gap < 1e-6);
	}
	rc_geom_free(g);
}

/* --- a device lost during back_add: the rerun adds nothing twice ------------- */

/* An engine over another that fails with RC_EDEVICE from its first call. */
typedef struct dead_engine {
	rc_engine base;
	rc_engine *inner;
	int calls;
} dead_engine;

static int dead_fwd(rc_engine *e, rc_fp_kind k, const float *vol, float *proj, int a, int b, rc_err *err)
{
	(void)k, (void)vol, (void)proj, (void)a, (void)b;
	((dead_engine *)e)->calls++;
	return rc_fail(err, RC_EDEVICE, "", "simulated device loss");
}

static int dead_back(rc_engine *e, rc_bp_kind k, const float *proj, float *vol, int a, int b, rc_err *err)
{
	(void)k, (void)proj, (void)vol, (void)a, (void)b;
	((dead_engine *)e)->calls++;
	return rc_fail(err, RC_EDEVICE, "", "simulated device loss");
}

static void dead_free(rc_engine *e) { free(e); }

static const rc_engine_ops dead_ops = { .forward = dead_fwd, .back = dead_back, .free = dead_free,
					.back_add = dead_back };

static void test_rerun(void **state)
{
	(void)state;
	rc_geom *g = tu_cone(14, 24, 20, NVIEWS);
	assert_non_null(g);
	size_t nvox = rc_volume_count(rc_geom_volume(g)), np = rc_geom_proj_count(g);
	float *p = malloc(np * sizeof *p), *s = malloc(nvox * sizeof *s), *got = malloc(nvox * sizeof *got),
	      *want = malloc(nvox * sizeof *want);
	assert_true(p && s && got && want);
	uint64_t seed = 11;
	for (size_t i = 0; i < np; i++)
		p[i] = rnd(&seed);
	for (size_t i = 0; i < nvox; i++)
		s[i] = rnd(&seed) - 0.5f;
	rc_err err;
	rc_engine *cpu = NULL;
	assert_int_equal(rc_engine_cpu_new(g, 2, &cpu, &err), 0);
	assert_int_equal(rc_engine_back(cpu, RC_BP_VOXEL, p, want, 0, NVIEWS, &err), 0);
	for (size_t i = 0; i < nvox; i++)
		want[i] += s[i];
	for (int first_dead = 0; first_dead < 2; first_dead++) {
		dead_engine *d = calloc(1, sizeof *d);
		assert_non_null(d);
		d->base = *cpu;
		d->base.ops = &dead_ops;
		rc_engine *e[2] = { first_dead ? &d->base : cpu, first_dead ? cpu : &d->base };
		int views[2] = { NVIEWS / 2, NVIEWS - NVIEWS / 2 };
		rc_exec *x = NULL;
		assert_int_equal(rc_exec_new(e, 2, &x, &err), 0);
		assert_int_equal(rc_exec_set_split(x, RC_TASK_BACK, views, &err), 0);
		memcpy(got, s, nvox * sizeof *got);
		assert_int_equal(rc_exec_back_add(x, RC_BP_VOXEL, p, got, 0, NVIEWS, &err), 0);
		double gap = rc_metric_rel_error(got, want, NULL, nvox);
		print_message("exec back_add with the %s engine lost mid-call: %d failed call(s), alive %d/%d, "
			      "vs s + back(all) %.2g\n", first_dead ? "first" : "second", d->calls,
			      rc_exec_alive(x, 0), rc_exec_alive(x, 1), gap);
		assert_true(d->calls >= 1 && !rc_exec_alive(x, first_dead ? 0 : 1));
		assert_true(gap < 1e-6);
		rc_exec_free(x);
		free(d);
	}
	rc_engine_free(cpu);
	free(p), free(s), free(got), free(want);
	rc_geom_free(g);
}

/* --- streaming FDK on the resident OpenCL backend ---------------------------- */

struct feed {
	int next, n;
};

static int feed_views(void *ud, double wait_s, int *list, int max, rc_err *err)
{
	struct feed *f = ud;
	(void)wait_s;
	(void)err;
	int c = 0;
	/* views in a scrambled order, three per call */
	while (c < 3 && c < max && f->next < f->n) {
		list[c++] = (f->next * 5) % f->n; /* 5 and 28 coprime */
		f->next++;
	}
	return c;
}

static void test_stream_fdk(void **state)
{
	(void)state;
	rc_geom *g = tu_cone(14, 24, 20, 28);
	assert_non_null(g);
	size_t nvox = rc_volume_count(rc_geom_volume(g)), np = rc_geom_proj_count(g);
	float *p = malloc(np * sizeof *p), *batch = malloc(nvox * sizeof *batch), *streamed = malloc(nvox * sizeof *streamed);
	assert_true(p && batch && streamed);
	const rc_volume_desc *vd = rc_geom_volume(g);
	float *f = malloc(nvox * sizeof *f);
	double *pd = malloc(np * sizeof *pd);
	assert_true(f && pd);
	double c[3] = { 1.0, -0.5, 0.5 };
	memset(f, 0, nvox * sizeof *f);
	tu_ball(vd, c, 9.0, 0.02f, f);
	tu_ref_fp(g, f, pd, 0, 28);
	for (size_t i = 0; i < np; i++)
		p[i] = (float)pd[i];
	rc_engine *ocl = NULL;
	rc_backend *b = NULL;
	rc_opencl_options oo;
	rc_opencl_options_default(&oo);
	rc_err err;
	assert_int_equal(rc_engine_opencl_new(g, &oo, &ocl, &err), 0);
	assert_int_equal(rc_backend_opencl_new(ocl, &b, &err), 0);
	rc_algo_params a;
	rc_algo_params_default(&a, RC_ALGO_FDK);
	assert_int_equal(rc_algo_run_on(&a, b, p, batch, NULL, &err), 0);
	struct feed fd = { .n = 28 };
	rc_algo_hooks h = { .views = feed_views, .ud = &fd };
	if (rc_algo_run_on(&a, b, p, streamed, &h, &err))
		fail_msg("streaming FDK: %s", err.msg);
	double gap = rc_metric_rel_error(streamed, batch, NULL, nvox);
	print_message("streaming FDK on the resident OpenCL backend vs its batch run: %.2g (calls: %ld back)\n", gap,
		      b->stats.calls[RC_TASK_BACK]);
	assert_true(gap < 1e-5);
	rc_backend_free(b);
	rc_engine_free(ocl);
	free(p), free(batch), free(streamed), free(f), free(pd);
	rc_geom_free(g);
}

int main(void)
{
	tu_need_opencl();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cone),
		cmocka_unit_test(test_fan),
		cmocka_unit_test(test_rerun),
		cmocka_unit_test(test_stream_fdk),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
