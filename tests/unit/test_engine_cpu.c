/*
 * engine_cpu: the engine.h contract of the CPU engine - identity fields,
 * refusals with their messages (fan/parallel, ROTATE on matrices, bad view
 * ranges, unknown ISA), forward writing only its views, back overwriting,
 * and a two-engine rc_exec split equal to one engine.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"

static const rc_volume_desc VOL = { 16, 14, 12, 1, 1, 1, 0, 0, 0 };

static rc_geom *geom_shape(rc_geom_type t, int nviews, rc_detector_shape shape)
{
	double ang[32], mats[32 * 12];
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews;
	rc_geom_spec sp = { .type = t, .nviews = nviews, .det = { 24, 20, 1.2, 1.2, 0, 0 },
			    .source_isocenter_mm = 100, .source_detector_mm = 200, .angles_deg = ang,
			    .matrices = mats };
	if (t == RC_GEOM_MATRICES) {
		/* matrices of the same cone, built by a cone geometry */
		rc_geom_spec c = sp;
		c.type = RC_GEOM_CONE;
		rc_geom *g = NULL;
		assert_int_equal(rc_geom_new(&c, &VOL, NULL, &g, NULL), 0);
		for (int k = 0; k < nviews; k++)
			memcpy(mats + 12 * k, rc_geom_view(g, k)->P, 12 * sizeof(double));
		rc_geom_free(g);
	}
	if (t == RC_GEOM_FAN || t == RC_GEOM_PARALLEL)
		sp.det.nv = 1;
	sp.det.shape = shape;
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&sp, &VOL, NULL, &g, &err))
		fail_msg("geometry: %s", err.msg);
	return g;
}

static rc_geom *geom(rc_geom_type t, int nviews)
{
	return geom_shape(t, nviews, RC_DETECTOR_FLAT);
}

static void test_identity(void **s)
{
	(void)s;
	rc_geom *g = geom(RC_GEOM_CONE, 8);
	rc_engine *e = NULL;
	assert_int_equal(rc_engine_cpu_new(g, 2, &e, NULL), 0);
	assert_string_equal(e->name, "cpu");
	assert_true(strncmp(e->device_id, "cpu", 3) == 0);
	assert_true(e->hw_group[0] != 0);
	assert_ptr_equal(e->geom, g);
	assert_int_equal(rc_engine_cpu_threads(e), 2);
	const char *isa = rc_engine_cpu_isa();
	assert_true(!strcmp(isa, "baseline") || !strcmp(isa, "avx2") || !strcmp(isa, "avx512"));
	rc_err err;
	assert_int_equal(rc_engine_cpu_set_isa(e, "baseline", &err), 0);
	assert_int_equal(rc_engine_cpu_set_isa(e, "sse9", &err), RC_EINVAL);
	rc_engine_free(e);
	rc_engine_free(NULL);
	rc_geom_free(g);
}

static void test_refusals(void **s)
{
	(void)s;
	float vol[16 * 14 * 12], proj[8 * 24 * 20];
	rc_err err;
	rc_engine *e = NULL;
	memset(vol, 0, sizeof vol);
	memset(proj, 0, sizeof proj);
	/* a fan or parallel stack: FBP's back projection and the Joseph pair
	 * (test_opencl_plane checks their values), not rotation or splatting */
	for (int t = RC_GEOM_FAN; t <= RC_GEOM_PARALLEL; t++) {
		rc_geom *g = geom((rc_geom_type)t, 8);
		assert_int_equal(rc_engine_cpu_new(g, 1, &e, &err), 0);
		assert_int_equal(e->splat, 0);
		assert_int_equal(rc_engine_forward(e, RC_FP_ROTATE, vol, proj, 0, 8, &err), RC_EUNSUPPORTED);
		assert_string_equal(err.field, "geometry.type");
		assert_non_null(strstr(err.msg, "fan and parallel"));
		assert_int_equal(rc_engine_back(e, RC_BP_SPLAT, proj, vol, 0, 8, &err), RC_EUNSUPPORTED);
		assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, vol, proj, 0, 8, &err), 0);
		assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, 0, 8, &err), 0);
		assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, proj, vol, 0, 8, &err), 0);
		rc_engine_free(e);
		rc_geom_free(g);
	}
	/* a curved fan: FBP's back projection and the Joseph pair follow the
	 * arc (test_opencl_plane checks their values) */
	rc_geom *g = geom_shape(RC_GEOM_FAN, 8, RC_DETECTOR_CURVED);
	assert_int_equal(rc_engine_cpu_new(g, 1, &e, &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, 0, 8, &err), 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, vol, proj, 0, 8, &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, proj, vol, 0, 8, &err), 0);
	rc_engine_free(e);
	rc_geom_free(g);
	g = geom(RC_GEOM_MATRICES, 8);
	assert_int_equal(rc_engine_cpu_new(g, 1, &e, &err), 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_ROTATE, vol, proj, 0, 8, &err), RC_EUNSUPPORTED);
	assert_non_null(strstr(err.msg, "cone"));
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, vol, proj, -1, 8, &err), RC_EINVAL);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, vol, proj, 0, 9, &err), RC_EINVAL);
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, proj, vol, 5, 4, &err), RC_EINVAL);
	rc_engine_free(e);
	rc_geom_free(g);
	assert_int_equal(rc_engine_cpu_new(NULL, 1, &e, &err), RC_EINVAL);
}

static void test_forward_only_its_views(void **s)
{
	(void)s;
	rc_geom *g = geom(RC_GEOM_CONE, 8);
	rc_engine *e = NULL;
	assert_int_equal(rc_engine_cpu_new(g, 0, &e, NULL), 0);
	size_t nvox = rc_volume_count(&VOL), nview = rc_geom_view_count(g), np = rc_geom_proj_count(g);
	float *vol = calloc(nvox, sizeof(float)), *proj = malloc(np * sizeof(float));
	assert_non_null(vol);
	assert_non_null(proj);
	for (size_t i = 0; i < nvox; i++)
		vol[i] = 0.01f;
	for (int kind = 0; kind < 2; kind++) {
		for (size_t i = 0; i < np; i++)
			proj[i] = -7.0f;
		assert_int_equal(rc_engine_forward(e, (rc_fp_kind)kind, vol, proj, 2, 5, NULL), 0);
		for (size_t i = 0; i < np; i++) {
			int k = (int)(i / nview);
			if (k < 2 || k >= 5)
				assert_true(proj[i] == -7.0f);
			else
				assert_true(proj[i] >= 0.0f);
		}
		float peak = 0;
		for (size_t i = 2 * nview; i < 5 * nview; i++)
			peak = fmaxf(peak, proj[i]);
		assert_true(peak > 0.1f); /* 0.01/mm over >= 12 mm */
	}
	free(vol);
	free(proj);
	rc_engine_free(e);
	rc_geom_free(g);
}

static void test_exec_split(void **s)
{
	(void)s;
	rc_geom *g = geom(RC_GEOM_CONE, 8);
	rc_engine *e[2] = { NULL, NULL };
	assert_int_equal(rc_engine_cpu_new(g, 1, &e[0], NULL), 0);
	assert_int_equal(rc_engine_cpu_new(g, 1, &e[1], NULL), 0);
	rc_exec *one = NULL, *two = NULL;
	assert_int_equal(rc_exec_new(e, 1, &one, NULL), 0);
	assert_int_equal(rc_exec_new(e, 2, &two, NULL), 0);
	int split[2] = { 3, 5 };
	assert_int_equal(rc_exec_set_split(two, RC_TASK_BACK, split, NULL), 0);
	assert_int_equal(rc_exec_set_split(two, RC_TASK_FORWARD, split, NULL), 0);
	size_t nvox = rc_volume_count(&VOL), np = rc_geom_proj_count(g);
	float *proj = malloc(np * sizeof(float)), *p2 = malloc(np * sizeof(float));
	float *v1 = malloc(nvox * sizeof(float)), *v2 = malloc(nvox * sizeof(float));
	assert_true(proj && p2 && v1 && v2);
	for (size_t i = 0; i < np; i++)
		proj[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
	for (int kind = 0; kind < 2; kind++) {
		assert_int_equal(rc_exec_back(one, (rc_bp_kind)kind, proj, v1, 0, 8, NULL), 0);
		assert_int_equal(rc_exec_back(two, (rc_bp_kind)kind, proj, v2, 0, 8, NULL), 0);
		float m = 0, d = 0;
		for (size_t i = 0; i < nvox; i++) {
			m = fmaxf(m, fabsf(v1[i]));
			d = fmaxf(d, fabsf(v1[i] - v2[i]));
		}
		assert_true(m > 0);
		/* the same sums regrouped at the split: float rounding only */
		assert_true(d <= 5e-6f * m);
		assert_int_equal(rc_exec_forward(one, (rc_fp_kind)kind, v1, proj, 0, 8, NULL), 0);
		assert_int_equal(rc_exec_forward(two, (rc_fp_kind)kind, v1, p2, 0, 8, NULL), 0);
		assert_memory_equal(proj, p2, np * sizeof(float));
	}
	free(proj);
	free(p2);
	free(v1);
	free(v2);
	rc_exec_free(one);
	rc_exec_free(two);
	rc_engine_free(e[0]);
	rc_engine_free(e[1]);
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_forward_only_its_views),
		cmocka_unit_test(test_exec_split),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
