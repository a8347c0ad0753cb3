/*
 * test_splat_device: the splat projector pair on the OpenCL engine (the
 * first OpenCL device: PoCL here) and on the CUDA engine (a GPU, or the
 * stand-in of tools/cuda-emu), against the CPU engine's
 * (core/projectors/proj_splat.c, itself checked against a double
 * precision reference in test_splat.c):
 *  - RC_FP_SPLAT and RC_BP_SPLAT of random data agree with the CPU
 *    engine's to 1e-5 (relative L2) on a cone geometry (the column path)
 *    and on tilted matrices (the general path), over view sub-ranges
 *    (other views untouched); on OpenCL both kernel variants (a work-item
 *    per view; per voxel column with atomic adds);
 *  - back_add (engine and resident backend) in parts equals s + back;
 *  - each device pair is matched: <A x, y> = <x, A^T y> to 1e-5 with
 *    random x, y, through the engine and through the resident backend;
 *  - every iterative algorithm with its defaults (SART, SIRT, CGLS, MLEM:
 *    FDK start, subsets, TV, stopping rules) on an analytic Shepp-Logan
 *    cone case whose voxels project under a pixel apart, so that auto
 *    picks the splat pair everywhere: the resident OpenCL and CUDA runs
 *    end within 1e-5 of the CPU engine's volume, in the same number of
 *    iterations (CUDA's FDK start with exact interpolation: with the
 *    texture hardware's 8-bit weights, its default, it moves the volume by
 *    ~1e-3);
 *  - where voxels project more than a pixel apart no device engine offers
 *    the pair and a forward splat is refused naming algorithm.projector.
 * The CUDA part prints "no CUDA device" and is skipped where neither a GPU
 * nor the stand-in runs; without OpenCL the OpenCL part is skipped.
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
#include "backend/cuda/engine_cuda.h"
#include "backend/exec.h"
#include "backend/opencl/engine_opencl.h"
#include "geometry/metrics.h"
#include "plan/resident.h"
#include "projectors/proj_cpu.h"
#include "ocl_testutil.h" /* PoCL's own leaks left out of LeakSanitizer's report */
#include "tilt_case.h"
#define SHEPP_CASE_PIXEL_VOXELS 1.75
#include "shepp_case.h"

#if defined(__SANITIZE_ADDRESS__) || defined(RC_TEST_SMALL)
#define SMALL 1
#define SHEPP_N 20
#define SHEPP_VIEWS 24
#else
#define SMALL 0
#define SHEPP_N 28
#define SHEPP_VIEWS 40
#endif
#define NV 10

/* test_splat.c's case: odd sizes, anisotropic, off-centre; voxels about
 * 0.7 pixel apart */
static const rc_volume_desc VOL = { 33, 30, 27, 0.55, 0.5, 0.6, 0.7, -0.4, 0.5 };
/* short voxels along z: columns under a quarter row apart (voxel by voxel) */
static const rc_volume_desc FLAT = { 21, 19, 40, 0.55, 0.5, 0.1, 0.7, -0.4, 0.5 };
static const rc_detector_desc DET = { 50, 42, 1.5, 1.5, 1.2, -0.9, RC_DETECTOR_FLAT };

enum { DEV_OPENCL, DEV_CUDA, DEV_COUNT };
static const char *const dev_name[DEV_COUNT] = { "opencl", "cuda" };
static int have[DEV_COUNT];

/* the cone, or its matrices with the object turned 12 degrees about x */
static rc_geom *make_geom(rc_geom_type type, const rc_volume_desc *v, const rc_detector_desc *det, double D,
			  double S)
{
	rc_err err;
	rc_geom *g = tilt_case_geom(type, v, det, NV, 7, D, S, &err);
	if (!g)
		fail_msg("geometry: %s", err.msg);
	return g;
}

/* the OpenCL engine's GPU variant (atomic adds) rather than the device's own */
static int ocl_gpu_variant;

static int open_dev(int dev, const rc_geom *g, rc_engine **e, rc_err *err)
{
	if (dev == DEV_OPENCL) {
		rc_opencl_options o;
		rc_opencl_options_default(&o);
		if (ocl_gpu_variant)
			o.variant = RC_OPENCL_VARIANT_GPU, o.images = 0;
		return rc_engine_opencl_new(g, &o, e, err);
	}
	return rc_engine_cuda_new(g, 0, e, err);
}

static uint64_t rng = 977;
static float urand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1u << 24));
}

static float *rand_vec(size_t n)
{
	float *a = malloc(n * sizeof *a);
	assert_non_null(a);
	for (size_t i = 0; i < n; i++)
		a[i] = urand();
	return a;
}

static double dotf(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* Forward and back of the device engine against the CPU engine's on g,
 * views [first, last); the adjoint gap of the device pair over all views. */
static void check_pair(int dev, const rc_geom *g, int first, int last, const char *what)
{
	rc_err err;
	rc_engine *cpu = NULL, *e = NULL;
	assert_int_equal(rc_engine_cpu_new(g, 0, &cpu, &err), 0);
	assert_int_equal(open_dev(dev, g, &e, &err), 0);
	assert_true(cpu->splat);
	assert_true(e->splat);
	const size_t nvox = rc_volume_count(rc_geom_volume(g)), np = rc_geom_proj_count(g);
	const size_t view = rc_geom_view_count(g);
	float *x = rand_vec(nvox), *y = rand_vec(np);
	float *pc = calloc(np, sizeof *pc), *pd = malloc(np * sizeof *pd);
	float *vc = malloc(nvox * sizeof *vc), *vd = malloc(nvox * sizeof *vd);
	assert_true(pc && pd && vc && vd);
	for (size_t i = 0; i < np; i++)
		pd[i] = -7.0f; /* views outside [first, last) must keep this */
	memcpy(pc, pd, np * sizeof *pc);
	assert_int_equal(rc_engine_forward(cpu, RC_FP_SPLAT, x, pc, first, last, &err), 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_SPLAT, x, pd, first, last, &err), 0);
	for (size_t i = 0; i < np; i++)
		if (i < (size_t)first * view || i >= (size_t)last * view)
			assert_true(pd[i] == -7.0f);
	double dfp = rc_metric_rel_error(pd + (size_t)first * view, pc + (size_t)first * view, NULL,
					 (size_t)(last - first) * view);
	assert_int_equal(rc_engine_back(cpu, RC_BP_SPLAT, y, vc, first, last, &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_SPLAT, y, vd, first, last, &err), 0);
	double dbp = rc_metric_rel_error(vd, vc, NULL, nvox);
	/* adding: s + back(first..mid) + back(mid..last) against s + back(first..last) */
	float *va = rand_vec(nvox), *want = malloc(nvox * sizeof *want);
	assert_non_null(want);
	for (size_t i = 0; i < nvox; i++)
		want[i] = va[i] + vd[i];
	int mid = (first + last) / 2;
	assert_int_equal(rc_engine_back_add(e, RC_BP_SPLAT, y, va, first, mid, &err), 0);
	assert_int_equal(rc_engine_back_add(e, RC_BP_SPLAT, y, va, mid, mid, &err), 0);
	assert_int_equal(rc_engine_back_add(e, RC_BP_SPLAT, y, va, mid, last, &err), 0);
	double dadd = rc_metric_rel_error(va, want, NULL, nvox);
	free(va), free(want);
	/* the adjoint gap over every view */
	assert_int_equal(rc_engine_forward(e, RC_FP_SPLAT, x, pd, 0, rc_geom_nviews(g), &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_SPLAT, y, vd, 0, rc_geom_nviews(g), &err), 0);
	double ax_y = dotf(pd, y, np), x_aty = dotf(x, vd, nvox);
	double gap = fabs(ax_y - x_aty) / fmax(fabs(ax_y), fabs(x_aty));
	print_message("%s (%s) %s views [%d, %d): forward vs cpu %.2e, back vs cpu %.2e; adjoint gap %.2e; "
		      "back_add in two halves vs back %.2e\n",
		      dev_name[dev], dev == DEV_OPENCL ? rc_engine_opencl_variant(e) : "engine", what, first, last, dfp, dbp, gap,
		      dadd);
	assert_true(dfp <= 1e-5);
	assert_true(dadd <= 1e-6);
	assert_true(dbp <= 1e-5);
	assert_true(gap <= 1e-5);
	free(x), free(y), free(pc), free(pd), free(vc), free(vd);
	rc_engine_free(e);
	rc_engine_free(cpu);
}

static void skip_unless(int dev)
{
	if (!have[dev]) {
		print_message("%s\n", dev == DEV_CUDA ? "no CUDA device" : "no OpenCL device");
		skip();
	}
}

static void pairs(int dev)
{
	skip_unless(dev);
	rc_geom *g = make_geom(RC_GEOM_CONE, &VOL, &DET, 150, 300);
	check_pair(dev, g, 0, NV, "cone");
	check_pair(dev, g, 2, 7, "cone");
	rc_geom_free(g);
	g = make_geom(RC_GEOM_CONE, &FLAT, &DET, 150, 300);
	check_pair(dev, g, 0, NV, "cone, voxels a sixth of a row apart");
	rc_geom_free(g);
	g = make_geom(RC_GEOM_MATRICES, &VOL, &DET, 150, 300);
	check_pair(dev, g, 0, NV, "tilted matrices");
	check_pair(dev, g, 3, 8, "tilted matrices");
	rc_geom_free(g);
}

/* both variants of the OpenCL kernels: a work-item per view (CPU) and per
 * voxel column with atomic adds (GPU) */
static void test_pairs_opencl(void **s)
{
	(void)s;
	pairs(DEV_OPENCL);
	ocl_gpu_variant = 1;
	pairs(DEV_OPENCL);
	ocl_gpu_variant = 0;
}
static void test_pairs_cuda(void **s) { (void)s; pairs(DEV_CUDA); }

/* The resident backends' pair (device vectors): the adjoint gap. */
static void resident_adjoint(int dev)
{
	skip_unless(dev);
	rc_geom *g = make_geom(RC_GEOM_CONE, &VOL, &DET, 150, 300);
	rc_err err;
	rc_engine *e = NULL;
	rc_backend *b = NULL;
	if (dev == DEV_OPENCL) {
		assert_int_equal(rc_engine_opencl_new(g, NULL, &e, &err), 0);
		assert_int_equal(rc_backend_opencl_new(e, &b, &err), 0);
	} else {
		assert_int_equal(rc_backend_cuda_new(g, NULL, 0, &b, &err), 0);
	}
	assert_true(b->caps & RC_BK_SPLAT);
	assert_int_equal(rc_bk_fp(b), RC_FP_SPLAT);
	const size_t nvox = rc_volume_count(rc_geom_volume(g)), np = rc_geom_proj_count(g);
	float *x = rand_vec(nvox), *y = rand_vec(np), *ax = malloc(np * sizeof *ax), *aty = malloc(nvox * sizeof *aty);
	assert_true(ax && aty);
	rc_vec *vx = NULL, *vp = NULL, *vy = NULL, *vv = NULL;
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_VOLUME, &vx, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_VOLUME, &vv, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &vp, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &vy, &err), 0);
	assert_int_equal(rc_bk_upload(b, vx, x, &err), 0);
	assert_int_equal(rc_bk_upload(b, vy, y, &err), 0);
	assert_int_equal(rc_bk_forward(b, RC_FP_SPLAT, vx, vp, 0, NV, &err), 0);
	assert_int_equal(rc_bk_back(b, RC_BP_SPLAT, vy, vv, 0, NV, &err), 0);
	assert_int_equal(rc_bk_download(b, vp, ax, &err), 0);
	assert_int_equal(rc_bk_download(b, vv, aty, &err), 0);
	double ax_y = dotf(ax, y, np), x_aty = dotf(x, aty, nvox);
	double gap = fabs(ax_y - x_aty) / fmax(fabs(ax_y), fabs(x_aty));
	/* adding on the device: x + back(0..4) + back(4..NV) against x + back(all) */
	assert_int_equal(rc_bk_back_add(b, RC_BP_SPLAT, vy, vx, 0, 4, &err), 0);
	assert_int_equal(rc_bk_back_add(b, RC_BP_SPLAT, vy, vx, 4, NV, &err), 0);
	float *sum = malloc(nvox * sizeof *sum);
	assert_non_null(sum);
	assert_int_equal(rc_bk_download(b, vx, sum, &err), 0);
	for (size_t i = 0; i < nvox; i++)
		aty[i] += x[i];
	double dadd = rc_metric_rel_error(sum, aty, NULL, nvox);
	free(sum);
	print_message("%s resident: adjoint gap %.2e, back_add in two parts vs back %.2e\n", dev_name[dev], gap, dadd);
	assert_true(gap <= 1e-5);
	assert_true(dadd <= 1e-6);
	rc_bk_vec_free(b, vx), rc_bk_vec_free(b, vv), rc_bk_vec_free(b, vp), rc_bk_vec_free(b, vy);
	rc_backend_free(b);
	rc_engine_free(e);
	free(x), free(y), free(ax), free(aty);
	rc_geom_free(g);
}

static void test_resident_opencl(void **s) { (void)s; resident_adjoint(DEV_OPENCL); }
static void test_resident_cuda(void **s) { (void)s; resident_adjoint(DEV_CUDA); }

/* --- every algorithm's defaults: cpu, opencl, cuda -------------------------- */

static shepp_case C;
static int case_ok;

typedef struct counter {
	int calls;
} counter;

static void on_progress(void *ud, const rc_progress *p)
{
	((counter *)ud)->calls = p->iteration;
}

static void run_defaults(rc_algo_name name)
{
	if (!case_ok)
		fail_msg("the Shepp-Logan case did not build");
	rc_algo_params p;
	rc_algo_params_default(&p, name);
	rc_err err;
	rc_engine *cpu = NULL, *ocl = NULL;
	rc_exec *x = NULL;
	assert_int_equal(rc_engine_cpu_new(C.g, 0, &cpu, &err), 0);
	assert_true(cpu->splat); /* auto picks the splat pair on this case */
	assert_int_equal(rc_exec_new(&cpu, 1, &x, &err), 0);
	float *ref = malloc(C.nvox * sizeof *ref), *got = malloc(C.nvox * sizeof *got);
	assert_true(ref && got);
	counter cc = { 0 }, cd = { 0 };
	rc_algo_hooks h = { .progress = on_progress, .ud = &cc };
	if (rc_algo_run(&p, x, C.proj, ref, &h, &err))
		fail_msg("cpu: %s", err.msg);
	double e_cpu = rc_metric_rel_error(ref, C.ref, C.mask, C.nvox);
	for (int dev = 0; dev < DEV_COUNT; dev++) {
		if (!have[dev]) {
			print_message("%s: %s\n", rc_algo_name_str(name),
				      dev == DEV_CUDA ? "no CUDA device" : "no OpenCL device");
			continue;
		}
		cd.calls = 0;
		h.ud = &cd;
		int rc;
		if (dev == DEV_OPENCL) {
			assert_int_equal(rc_engine_opencl_new(C.g, NULL, &ocl, &err), 0);
			assert_true(ocl->splat);
			rc = rc_opencl_run_algo(ocl, &p, C.proj, got, &h, &err);
			rc_engine_free(ocl);
			ocl = NULL;
		} else {
			/* FDK's start with exact interpolation: the hardware's
			 * 8-bit weights alone move the volume by ~1e-3 */
			rc_cuda_options o;
			rc_cuda_options_default(&o);
			o.bp_interp = RC_CUDA_INTERP_EXACT;
			rc = rc_cuda_run_algo(&p, C.g, &o, C.proj, got, &h, &err);
		}
		if (rc)
			fail_msg("%s: %s", dev_name[dev], err.msg);
		double d = rc_metric_rel_error(got, ref, NULL, C.nvox);
		print_message("%s defaults: %s vs cpu %.2e (%d / %d iterations; error vs truth %.4f, cpu %.4f)\n",
			      rc_algo_name_str(name), dev_name[dev], d, cd.calls, cc.calls,
			      rc_metric_rel_error(got, C.ref, C.mask, C.nvox), e_cpu);
		assert_int_equal(cd.calls, cc.calls);
		assert_true(d <= 1e-5);
	}
	free(ref), free(got);
	rc_exec_free(x);
	rc_engine_free(cpu);
}

static void test_sart(void **s) { (void)s; run_defaults(RC_ALGO_SART); }
static void test_sirt(void **s) { (void)s; run_defaults(RC_ALGO_SIRT); }
static void test_cgls(void **s) { (void)s; run_defaults(RC_ALGO_CGLS); }
static void test_mlem(void **s) { (void)s; run_defaults(RC_ALGO_MLEM); }

/* Voxels over a pixel apart: no device engine offers the pair. */
static void test_coarse_refused(void **s)
{
	(void)s;
	/* voxels of 1.2 mm on pixels of 1.5 mm at magnification 2 */
	static const rc_volume_desc coarse = { 20, 20, 16, 1.2, 1.2, 1.2, 0, 0, 0 };
	rc_geom *g = make_geom(RC_GEOM_CONE, &coarse, &DET, 150, 300);
	assert_false(rc_splat_suits(g));
	for (int dev = 0; dev < DEV_COUNT; dev++) {
		if (!have[dev])
			continue;
		rc_err err;
		rc_engine *e = NULL;
		assert_int_equal(open_dev(dev, g, &e, &err), 0);
		assert_false(e->splat);
		size_t nvox = rc_volume_count(rc_geom_volume(g)), np = rc_geom_proj_count(g);
		float *x = calloc(nvox, sizeof *x), *p = calloc(np, sizeof *p);
		assert_int_equal(rc_engine_forward(e, RC_FP_SPLAT, x, p, 0, NV, &err), RC_EUNSUPPORTED);
		assert_string_equal(err.field, "algorithm.projector");
		free(x), free(p);
		rc_engine_free(e);
	}
	rc_geom_free(g);
}

int main(void)
{
	rc_err err;
	rc_geom *g = make_geom(RC_GEOM_CONE, &VOL, &DET, 150, 300);
	rc_engine *e = NULL;
	have[DEV_OPENCL] = rc_engine_opencl_new(g, NULL, &e, &err) == 0;
	rc_engine_free(e);
	have[DEV_CUDA] = rc_engine_cuda_built() && rc_engine_cuda_count() > 0;
	rc_geom_free(g);
	if (!have[DEV_CUDA])
		printf("no CUDA device: the CUDA part is skipped\n");
	if (!have[DEV_OPENCL])
		printf("no OpenCL device: the OpenCL part is skipped\n");
	if (!have[DEV_OPENCL] && !have[DEV_CUDA])
		return 77;
	case_ok = shepp_case_new(SHEPP_N, SHEPP_VIEWS, SHEPP_N * 2.0, &C) == 0 && rc_splat_suits(C.g);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pairs_opencl),   cmocka_unit_test(test_pairs_cuda),
		cmocka_unit_test(test_resident_opencl), cmocka_unit_test(test_resident_cuda),
		cmocka_unit_test(test_sart),           cmocka_unit_test(test_sirt),
		cmocka_unit_test(test_cgls),           cmocka_unit_test(test_mlem),
		cmocka_unit_test(test_coarse_refused),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	shepp_case_free(&C);
	return rc;
}
