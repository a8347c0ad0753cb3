/*
 * test_plane_resident: fan and parallel stacks resident on the OpenCL and
 * CUDA devices (resident.h: the stack and the volume stay on the device
 * across iterations).  For a flat fan, parallel and a curved fan, every
 * algorithm (SART and OS-EM with ordered subsets, so that view ranges of
 * a [slice][view][u] stack run per slice; SIRT, CGLS, FBP) run on the
 * device's resident backend equals the same run on the host backend over
 * the same device's engine (an upload and a download per projection call)
 * to 1e-5 in relative L2, and the iterative runs reduce the error against
 * the phantom they were projected from.
 *
 * OpenCL: the first device (PoCL here); skipped without one.  CUDA: device
 * 0, on a GPU or on the stand-in (tools/cuda-emu/build.sh links this
 * file); skipped with "no CUDA device" where neither runs.
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
#include "backend/cuda/engine_cuda.h"
#include "backend/exec.h"
#include "backend/opencl/engine_opencl.h"
#include "geometry/geometry.h"
#include "geometry/metrics.h"
#include "geometry/phantom.h"
#include "plan/resident.h"

#define NX 24
#define NZ 3
#define NU 48
#define NVIEWS 60
#define TEST_CACHE "/tmp/recond-test-ocl-cache"

#define NCASES 3
#define CURVED 2
static const rc_geom_type types[NCASES] = { RC_GEOM_FAN, RC_GEOM_PARALLEL, RC_GEOM_FAN };
static const char *const type_name[NCASES] = { "fan", "parallel", "curved" };
static const rc_volume_desc vol_desc = { NX, NX + 2, NZ, 1.0, 0.9, 1.0, 0.4, -0.3, 0 };

static rc_geom *geom_of(int c)
{
	double ang[NVIEWS];
	for (int k = 0; k < NVIEWS; k++)
		ang[k] = 360.0 * k / NVIEWS + 1.5;
	rc_geom_spec s = { .type = types[c], .nviews = NVIEWS, .det = { NU, 1, 0.8, 1.0, 0.35, 0 },
			   .source_isocenter_mm = 200, .source_detector_mm = 300, .angles_deg = ang };
	if (c == CURVED) {
		s.det = (rc_detector_desc){ NU, 1, 1.0, 1.0, 0.35, 0, RC_DETECTOR_CURVED };
		s.source_isocenter_mm = 40;
		s.source_detector_mm = 70;
	}
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s, &vol_desc, NULL, &g, &err))
		fail_msg("geometry: %s", err.msg);
	return g;
}

/* A disk with a denser off-centre disk inside (every slice alike but for
 * a scale per slice, so that a slice mix-up shows), projected
 * analytically; truth the voxelised phantom. */
static void make_data(const rc_geom *g, float *proj, float *truth)
{
	rc_ellipsoid e[2] = { { { 0.5, -0.5, 0 }, { 9, 9, 1000 }, 0, 0.02 }, { { 3, 2, 0 }, { 3, 3, 1000 }, 0, 0.01 } };
	rc_phantom *p = NULL;
	assert_int_equal(rc_phantom_new(e, 2, &p, NULL), 0);
	assert_int_equal(rc_phantom_project(p, g, 0, proj, NULL), 0);
	assert_int_equal(rc_phantom_voxelize(p, &vol_desc, 2, 0, truth, NULL), 0);
	rc_phantom_free(p);
	size_t row = rc_geom_row_stride(g), plane = (size_t)NX * (NX + 2);
	for (int z = 1; z < NZ; z++) {
		for (size_t i = 0; i < row; i++)
			proj[z * row + i] *= 1.0f + 0.5f * z;
		for (size_t i = 0; i < plane; i++)
			truth[z * plane + i] *= 1.0f + 0.5f * z;
	}
}

struct algo_case {
	const char *name;
	rc_algo_name a;
	int subsets;
};
static const struct algo_case algos[] = {
	{ "sart", RC_ALGO_SART, 6 }, { "os-em", RC_ALGO_MLEM, 4 }, { "sirt", RC_ALGO_SIRT, 1 },
	{ "cgls", RC_ALGO_CGLS, 1 }, { "fbp", RC_ALGO_FDK, 1 },
};
#define NALGOS (sizeof algos / sizeof algos[0])

enum dev { DEV_OPENCL, DEV_CUDA };

static rc_engine *engine_open(enum dev d, const rc_geom *g)
{
	rc_engine *e = NULL;
	rc_err err;
	int rc;
	if (d == DEV_OPENCL) {
		rc_opencl_options o;
		rc_opencl_options_default(&o);
		o.cache_dir = TEST_CACHE;
		rc = rc_engine_opencl_new(g, &o, &e, &err);
	} else {
		rc = rc_engine_cuda_new(g, 0, &e, &err);
	}
	if (rc)
		fail_msg("engine: %s", err.msg);
	return e;
}

/* The resident run of p on d (resident.h) */
static int run_resident(enum dev d, rc_engine *e, const rc_geom *g, const rc_algo_params *p, const float *proj,
			float *vol, rc_err *err)
{
	if (d == DEV_OPENCL)
		return rc_opencl_run_algo(e, p, proj, vol, NULL, err);
	return rc_cuda_run_algo(p, g, NULL, proj, vol, NULL, err);
}

static void check_device(enum dev d)
{
	const char *dn = d == DEV_OPENCL ? "opencl" : "cuda";
	for (int c = 0; c < NCASES; c++) {
		rc_geom *g = geom_of(c);
		size_t np = rc_geom_proj_count(g), nv = rc_volume_count(&vol_desc);
		float *proj = malloc(np * sizeof(float)), *truth = malloc(nv * sizeof(float));
		float *vh = malloc(nv * sizeof(float)), *vr = malloc(nv * sizeof(float));
		assert_non_null(proj);
		assert_non_null(truth);
		assert_non_null(vh);
		assert_non_null(vr);
		make_data(g, proj, truth);
		rc_engine *e = engine_open(d, g);
		rc_exec *x = NULL;
		rc_backend *hb = NULL;
		rc_err err;
		assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
		assert_int_equal(rc_backend_host_new(x, &hb, &err), 0);
		for (size_t i = 0; i < NALGOS; i++) {
			rc_algo_params p;
			rc_algo_params_plain(&p, algos[i].a);
			p.iterations = algos[i].a == RC_ALGO_FDK ? 1 : 4;
			p.subsets = algos[i].subsets;
			if (run_resident(d, e, g, &p, proj, vr, &err))
				fail_msg("%s %s resident: %s", type_name[c], algos[i].name, err.msg);
			if (rc_algo_run_on(&p, hb, proj, vh, NULL, &err))
				fail_msg("%s %s host: %s", type_name[c], algos[i].name, err.msg);
			double diff = rc_metric_rel_error(vr, vh, NULL, nv);
			double eh = rc_metric_rel_error(vh, truth, NULL, nv);
			print_message("%-6s %-8s %-5s resident vs host %.2e, error vs phantom %.4f\n", dn, type_name[c],
				      algos[i].name, diff, eh);
			assert_true(diff <= 1e-5);
			/* the runs reconstruct: FBP of this small fan is rough,
			 * four iterations already well under the zero image's 1 */
			assert_true(eh < (algos[i].a == RC_ALGO_FDK ? 0.8 : 0.6));
		}
		/* the run is resident: the device backend takes the 2-D stack
		 * (before, RC_EUNSUPPORTED sent it to the host backend) */
		rc_algo_params p;
		rc_algo_params_plain(&p, RC_ALGO_CGLS);
		if (d == DEV_OPENCL) {
			assert_int_equal(rc_opencl_run_fits(e, &p, &err), 0);
		} else {
			rc_backend *b = NULL;
			assert_int_equal(rc_cuda_resident_open(&p, g, NULL, &b, &err), 0);
			assert_true(b->caps & RC_BK_RESIDENT);
			rc_backend_free(b);
		}
		rc_backend_free(hb);
		rc_exec_free(x);
		rc_engine_free(e);
		rc_geom_free(g);
		free(proj);
		free(truth);
		free(vh);
		free(vr);
	}
}

static void test_opencl(void **state)
{
	(void)state;
	rc_opencl_device dv[RC_OPENCL_MAX_DEVICES];
	int n = 0;
	rc_err err;
	if (rc_opencl_devices(dv, RC_OPENCL_MAX_DEVICES, &n, &err) || n == 0) {
		print_message("no OpenCL platform or device found: the OpenCL part skipped\n");
		skip();
	}
	check_device(DEV_OPENCL);
}

static void test_cuda(void **state)
{
	(void)state;
	if (!rc_engine_cuda_built() || rc_engine_cuda_count() < 1) {
		print_message("no CUDA device: the CUDA part skipped\n");
		skip();
	}
	check_device(DEV_CUDA);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opencl),
		cmocka_unit_test(test_cuda),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
