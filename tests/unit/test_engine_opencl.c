/*
 * test_engine_opencl: the OpenCL kernels (every variant, on the first
 * OpenCL device: PoCL here) against double precision references of their
 * definitions, against the analytic projection of a ball, against the native
 * CPU engine, and the engine's caches.  Skips (77) without OpenCL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/engine_cpu.h"
#include "ocl_testutil.h"

#define NVOL 24
#define NU 40
#define NV 32
#define NVIEWS 20
/* Program binaries survive between runs here (PoCL builds take seconds);
 * the cache test itself uses a fresh directory. */
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

static rc_engine *open_variant(rc_opencl_variant var, int images, const char *cache)
{
	rc_opencl_options o;
	rc_opencl_options_default(&o);
	o.variant = var;
	o.images = images;
	o.cache_dir = cache;
	rc_engine *e = NULL;
	rc_err err;
	int rc = rc_engine_opencl_new(geom, &o, &e, &err);
	if (rc == RC_EUNSUPPORTED && images == 1) {
		printf("  (images unsupported on this device: %s)\n", err.msg);
		return NULL;
	}
	if (rc)
		fail_msg("rc_engine_opencl_new: %s", err.msg);
	return e;
}

static float *random_proj(unsigned seed)
{
	size_t n = rc_geom_proj_count(geom);
	float *p = malloc(n * sizeof *p);
	srand(seed);
	for (size_t i = 0; i < n; i++)
		p[i] = (float)rand() / (float)RAND_MAX;
	return p;
}

static float *ball_vol(void)
{
	const rc_volume_desc *v = rc_geom_volume(geom);
	float *f = malloc(rc_volume_count(v) * sizeof *f);
	double c[3] = { 1.0, -1.5, 0.5 };
	tu_ball(v, c, 9.0, 0.02f, f);
	/* a second, smaller ball makes the image non-symmetric */
	float *g = malloc(rc_volume_count(v) * sizeof *g);
	double c2[3] = { -6.0, 4.0, -3.0 };
	tu_ball(v, c2, 3.0, 0.05f, g);
	for (size_t i = 0; i < rc_volume_count(v); i++)
		f[i] += g[i];
	free(g);
	return f;
}

static void check_variant(rc_opencl_variant var, int images)
{
	rc_engine *e = open_variant(var, images, TEST_CACHE);
	if (!e)
		return;
	printf("  variant %s\n", rc_engine_opencl_variant(e));
	const rc_volume_desc *v = rc_geom_volume(geom);
	size_t nvox = rc_volume_count(v), np = rc_geom_proj_count(geom);
	rc_err err;

	float *proj = random_proj(11);
	float *vol = malloc(nvox * sizeof *vol);
	double *ref = malloc((nvox > np ? nvox : np) * sizeof *ref);
	assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, 0, NVIEWS, &err), 0);
	tu_ref_bp(geom, proj, ref, 0, NVIEWS);
	double d = tu_rel_f_d(vol, ref, nvox);
	printf("  bp_voxel relative L2 difference to the double reference: %.3g\n", d);
	assert_true(d < 1e-5);

	/* a sub-range of views */
	assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, 5, 13, &err), 0);
	tu_ref_bp(geom, proj, ref, 5, 13);
	assert_true(tu_rel_f_d(vol, ref, nvox) < 1e-5);

	float *f = ball_vol();
	float *out = malloc(np * sizeof *out);
	for (size_t i = 0; i < np; i++)
		out[i] = -7.0f;
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, f, out, 3, 17, &err), 0);
	tu_ref_fp(geom, f, ref, 3, 17);
	size_t vs = rc_geom_view_count(geom);
	d = tu_rel_f_d(out + 3 * vs, ref + 3 * vs, 14 * vs);
	printf("  fp_raycast relative L2 difference to the double reference: %.3g\n", d);
	assert_true(d < 1e-5);
	/* views outside the range are untouched */
	for (size_t i = 0; i < 3 * vs; i++)
		assert_true(out[i] == -7.0f);
	for (size_t i = 17 * vs; i < np; i++)
		assert_true(out[i] == -7.0f);

	/* the matched back projector: the transpose, scattered with atomics */
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, proj, vol, 2, 19, &err), 0);
	tu_ref_bpm(geom, proj, ref, 2, 19);
	d = tu_rel_f_d(vol, ref, nvox);
	printf("  bp_matched relative L2 difference to the double reference: %.3g\n", d);
	assert_true(d < 1e-5);
	/* adjoint identity <A f, p> = <f, A^T p> with the engine's own pair */
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, f, out, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, proj, vol, 0, NVIEWS, &err), 0);
	double lhs = 0, rhs = 0;
	for (size_t i = 0; i < np; i++)
		lhs += (double)out[i] * proj[i];
	for (size_t i = 0; i < nvox; i++)
		rhs += (double)f[i] * vol[i];
	printf("  adjoint identity: <Af,p> = %.9g, <f,A^T p> = %.9g\n", lhs, rhs);
	assert_true(fabs(lhs - rhs) <= 1e-5 * fabs(lhs));

	assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, 0, NVIEWS + 1, &err), RC_EINVAL);

	free(f);
	free(out);
	free(proj);
	free(vol);
	free(ref);
	rc_engine_free(e);
}

static void variant_cpu(void **state) { (void)state; check_variant(RC_OPENCL_VARIANT_CPU, 0); }
static void variant_gpu_buffers(void **state) { (void)state; check_variant(RC_OPENCL_VARIANT_GPU, 0); }
static void variant_gpu_images(void **state) { (void)state; check_variant(RC_OPENCL_VARIANT_GPU, 1); }

/* The analytic line integral through a uniform ball, an independent check
 * of the ray geometry (the discretised ball differs by its staircase). */
static void forward_matches_analytic_ball(void **state)
{
	(void)state;
	rc_engine *e = open_variant(RC_OPENCL_VARIANT_AUTO, -1, TEST_CACHE);
	const rc_volume_desc *v = rc_geom_volume(geom);
	float *f = malloc(rc_volume_count(v) * sizeof *f);
	double c[3] = { 1.0, -1.5, 0.5 }, r = 9.0, mu = 0.02;
	tu_ball(v, c, r, (float)mu, f);
	float *out = calloc(rc_geom_proj_count(geom), sizeof *out);
	rc_err err;
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, f, out, 0, NVIEWS, &err), 0);
	double num = 0, den = 0;
	for (int k = 0; k < NVIEWS; k += 3)
		for (int j = 0; j < NV; j++)
			for (int i = 0; i < NU; i++) {
				double s[3], dir[3], sc[3];
				rc_geom_ray(geom, k, i, j, 0, s, dir);
				for (int a = 0; a < 3; a++)
					sc[a] = c[a] - s[a];
				double tc = sc[0] * dir[0] + sc[1] * dir[1] + sc[2] * dir[2];
				double d2 = sc[0] * sc[0] + sc[1] * sc[1] + sc[2] * sc[2] - tc * tc;
				/* rays near the rim see the voxel staircase, not the sphere */
				if (d2 > 0.7 * 0.7 * r * r)
					continue;
				double chord = 2.0 * sqrt(r * r - d2) * mu;
				double got = out[((size_t)k * NV + j) * NU + i];
				num += (got - chord) * (got - chord);
				den += chord * chord;
			}
	double rel = sqrt(num / den);
	printf("  raycast of a ball vs its analytic chords: %.3g\n", rel);
	assert_true(rel < 0.03);
	free(f);
	free(out);
	rc_engine_free(e);
}

/* Paper 000's rotation + projection forward projector: the analytic chords
 * of a ball, and closeness to ray casting (the double resampling smooths a
 * little more). */
static void rotate_projector(void **state)
{
	(void)state;
	rc_engine *e = open_variant(RC_OPENCL_VARIANT_AUTO, -1, TEST_CACHE);
	const rc_volume_desc *v = rc_geom_volume(geom);
	float *f = malloc(rc_volume_count(v) * sizeof *f);
	double c[3] = { 1.0, -1.5, 0.5 }, r = 9.0, mu = 0.02;
	tu_ball(v, c, r, (float)mu, f);
	size_t np = rc_geom_proj_count(geom);
	float *rot = calloc(np, sizeof *rot), *ray = calloc(np, sizeof *ray);
	rc_err err;
	assert_int_equal(rc_engine_forward(e, RC_FP_ROTATE, f, rot, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, f, ray, 0, NVIEWS, &err), 0);
	double num = 0, den = 0;
	for (int k = 0; k < NVIEWS; k++)
		for (int j = 0; j < NV; j++)
			for (int i = 0; i < NU; i++) {
				double s[3], dir[3], sc[3];
				rc_geom_ray(geom, k, i, j, 0, s, dir);
				for (int a = 0; a < 3; a++)
					sc[a] = c[a] - s[a];
				double tc = sc[0] * dir[0] + sc[1] * dir[1] + sc[2] * dir[2];
				double d2 = sc[0] * sc[0] + sc[1] * sc[1] + sc[2] * sc[2] - tc * tc;
				if (d2 > 0.7 * 0.7 * r * r)
					continue;
				double chord = 2.0 * sqrt(r * r - d2) * mu;
				double got = rot[((size_t)k * NV + j) * NU + i];
				num += (got - chord) * (got - chord);
				den += chord * chord;
			}
	double rel = sqrt(num / den), vs = tu_rel_f_f(rot, ray, np);
	printf("  rotate vs analytic chords: %.3g, rotate vs raycast: %.3g\n", rel, vs);
	assert_true(rel < 0.03);
	assert_true(vs < 0.05);
	free(f);
	free(rot);
	free(ray);
	rc_engine_free(e);
}

/* Programs come from the binary cache the second time; work-group sizes
 * found by the search are stored and loaded again. */
static void caches(void **state)
{
	(void)state;
	char dir[] = "/tmp/recond-ocl-cacheXXXXXX";
	assert_non_null(mkdtemp(dir));
	rc_engine *e = open_variant(RC_OPENCL_VARIANT_AUTO, -1, dir);
	assert_int_equal(rc_engine_opencl_from_cache(e), 0);
	rc_err err;
	assert_int_equal(rc_engine_opencl_tune(e, &err), 0);
	size_t wb[3], wf[3];
	rc_engine_opencl_wg(e, "bp", wb);
	rc_engine_opencl_wg(e, "fp", wf);
	printf("  work-groups: bp %zux%zux%zu, fp %zux%zux%zu\n", wb[0], wb[1], wb[2], wf[0], wf[1], wf[2]);
	/* results do not depend on the work-group size */
	float *proj = random_proj(5);
	size_t nvox = rc_volume_count(rc_geom_volume(geom));
	float *vol = malloc(nvox * sizeof *vol);
	double *ref = malloc(nvox * sizeof *ref);
	assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, 0, NVIEWS, &err), 0);
	tu_ref_bp(geom, proj, ref, 0, NVIEWS);
	assert_true(tu_rel_f_d(vol, ref, nvox) < 1e-5);
	rc_engine_free(e);

	e = open_variant(RC_OPENCL_VARIANT_AUTO, -1, dir);
	assert_int_equal(rc_engine_opencl_from_cache(e), 1);
	size_t wb2[3], wf2[3];
	rc_engine_opencl_wg(e, "bp", wb2);
	rc_engine_opencl_wg(e, "fp", wf2);
	assert_memory_equal(wb, wb2, sizeof wb);
	assert_memory_equal(wf, wf2, sizeof wf);
	assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, 0, NVIEWS, &err), 0);
	assert_true(tu_rel_f_d(vol, ref, nvox) < 1e-5);
	rc_engine_free(e);
	free(proj);
	free(vol);
	free(ref);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* The bar: OpenCL and the native CPU engine agree within 1e-4. */
static void agrees_with_cpu_engine(void **state)
{
	(void)state;
	rc_engine *cpu = NULL;
	rc_err err;
	int rc = rc_engine_cpu_new(geom, 0, &cpu, &err);
	assert_int_equal(rc, 0);
	rc_engine *e = open_variant(RC_OPENCL_VARIANT_AUTO, -1, TEST_CACHE);
	double worst = 0; /* every comparison is printed before the verdict */
	size_t nvox = rc_volume_count(rc_geom_volume(geom)), np = rc_geom_proj_count(geom);
	float *proj = random_proj(3), *a = malloc(nvox * sizeof *a), *b = malloc(nvox * sizeof *b);
	assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, a, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_back(cpu, RC_BP_VOXEL, proj, b, 0, NVIEWS, &err), 0);
	double d = tu_rel_f_f(a, b, nvox);
	printf("  back projection, OpenCL vs cpu engine: %.3g\n", d);
	worst = fmax(worst, d);
	float *f = ball_vol(), *pa = calloc(np, sizeof *pa), *pb = calloc(np, sizeof *pb);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, f, pa, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_forward(cpu, RC_FP_RAYCAST, f, pb, 0, NVIEWS, &err), 0);
	d = tu_rel_f_f(pa, pb, np);
	/* when they disagree, say which one left the definition */
	double *ref = malloc((np > nvox ? np : nvox) * sizeof *ref);
	tu_ref_fp(geom, f, ref, 0, NVIEWS);
	double ro = tu_rel_f_d(pa, ref, np), rcpu = tu_rel_f_d(pb, ref, np);
	printf("  forward projection, OpenCL vs cpu engine: %.3g (vs the double reference: OpenCL %.3g, cpu %.3g)\n",
	       d, ro, rcpu);
	/* both engines must meet the definition; the reference says which one left it */
	assert_true(ro < 1e-5);
	assert_true(rcpu < 1e-4);
	worst = fmax(worst, d);
	assert_int_equal(rc_engine_forward(e, RC_FP_ROTATE, f, pa, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_forward(cpu, RC_FP_ROTATE, f, pb, 0, NVIEWS, &err), 0);
	d = tu_rel_f_f(pa, pb, np);
	printf("  rotation forward projection, OpenCL vs cpu engine: %.3g\n", d);
	worst = fmax(worst, d);
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, proj, a, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_back(cpu, RC_BP_MATCHED, proj, b, 0, NVIEWS, &err), 0);
	d = tu_rel_f_f(a, b, nvox);
	tu_ref_bpm(geom, proj, ref, 0, NVIEWS);
	ro = tu_rel_f_d(a, ref, nvox);
	rcpu = tu_rel_f_d(b, ref, nvox);
	printf("  matched back projection, OpenCL vs cpu engine: %.3g (vs the double reference: OpenCL %.3g, cpu %.3g)\n",
	       d, ro, rcpu);
	free(ref);
	assert_true(ro < 1e-5);
	assert_true(rcpu < 1e-4);
	worst = fmax(worst, d);
	free(proj);
	free(a);
	free(b);
	free(f);
	free(pa);
	free(pb);
	rc_engine_free(e);
	rc_engine_free(cpu);
	assert_true(worst < 1e-4);
}

static void device_listing(void **state)
{
	(void)state;
	rc_opencl_device d[RC_OPENCL_MAX_DEVICES];
	int n = 0;
	assert_int_equal(rc_opencl_devices(d, RC_OPENCL_MAX_DEVICES, &n, NULL), 0);
	assert_true(n >= 1);
	for (int i = 0; i < n; i++) {
		printf("  %d.%d %s (%s) id=%s group=%s\n", d[i].platform, d[i].device, d[i].name,
		       d[i].is_cpu ? "cpu" : d[i].is_gpu ? "gpu" : "other", d[i].device_id, d[i].hw_group);
		assert_true(d[i].name[0] && d[i].device_id[0] && d[i].hw_group[0]);
		if (d[i].is_cpu)
			assert_string_equal(d[i].hw_group, "host-cpu");
	}
}

int main(void)
{
	tu_need_opencl();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(device_listing),
		cmocka_unit_test(variant_cpu),
		cmocka_unit_test(variant_gpu_buffers),
		cmocka_unit_test(variant_gpu_images),
		cmocka_unit_test(forward_matches_analytic_ball),
		cmocka_unit_test(rotate_projector),
		cmocka_unit_test(caches),
		cmocka_unit_test(agrees_with_cpu_engine),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
