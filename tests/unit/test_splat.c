/*
 * The splat pair (core/projectors/proj_splat.c): RC_FP_SPLAT and its
 * adjoint RC_BP_SPLAT through the CPU engine, each against a reference that
 * does not share its code:
 *  - RC_FP_SPLAT against a double-precision loop written here: every voxel
 *    projected with the view's P, its value / w^2 spread over the four
 *    pixels around it (zero outside the detector), on a cone view with the
 *    hat weights (1 - |d| / s) / s along u and along v, s the voxel's
 *    projected step (the larger of x and y on u, z on v, from P's
 *    derivatives here; 1 where over a pixel), on other views bilinearly,
 *    each pixel times
 *    V |grad u x grad v| formed from P's rows here; cone (the column path)
 *    and tilted matrices (the general path), every ISA path, 1 and 2
 *    threads (bit-identical), view sub-ranges;
 *  - <A x, y> = <x, A^T y> to 1e-5 with random x, y;
 *  - against the analytic Shepp-Logan line integrals (core/phantom.h), next
 *    to ray casting on the same geometry: the error must shrink with the
 *    voxels and stay within 1.05x ray casting's (the hat footprint measures
 *    0.97-0.99x; bilinear weights on cone views measured 1.13-1.21x);
 *  - where voxels project more than a pixel apart the engine does not offer
 *    the pair (splat = 0) and refuses RC_FP_SPLAT with RC_EUNSUPPORTED;
 *  - algorithm.projector: raycast on an engine with the pair runs what auto
 *    runs without it and without the footprint pair (bit for bit), auto
 *    runs the splat pair, splat without the pair is refused.
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
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "geometry/phantom.h"
#include "projectors/proj_cpu.h"
#include "proj_testutil.h"
#include "tilt_case.h"

#define NV 10
static const char *const isas[3] = { "baseline", "avx2", "avx512" };

/* odd sizes, anisotropic, off-centre; voxels about 0.7 pixel apart */
static const rc_volume_desc VOL = { 33, 30, 27, 0.55, 0.5, 0.6, 0.7, -0.4, 0.5 };
/* columns of 32 voxels or more, which the AVX-512 column loop reads from a
 * window of 32 voxels (proj_splat_col.h): z steps of about 0.8, 0.6 and
 * 0.4 pixel (3 and 4 taps in the window, 5 or more in the gathering
 * loop), and columns longer than the detector is high */
#define NTALL 4
static const rc_volume_desc TALL[NTALL] = { { 33, 30, 40, 0.55, 0.5, 0.6, 0.7, -0.4, 0.5 },
					    { 21, 23, 44, 0.55, 0.5, 0.45, 0.7, -0.4, 0.5 },
					    { 21, 19, 64, 0.55, 0.5, 0.3, 0.7, -0.4, 0.5 },
					    { 17, 19, 80, 0.55, 0.5, 0.6, 0.7, -0.4, 0.5 } };
static const rc_detector_desc DET = { 50, 42, 1.5, 1.5, 1.2, -0.9, RC_DETECTOR_FLAT };
static const double D = 150, S = 300;

/* the cone, or its matrices with the object turned 12 degrees about x */
static rc_geom *make_geom(rc_geom_type type, const rc_volume_desc *v, const rc_detector_desc *det)
{
	rc_err err;
	rc_geom *g = tilt_case_geom(type, v, det, NV, 7, D, S, &err);
	if (!g)
		fail_msg("geometry: %s", err.msg);
	return g;
}

/* The model in double, views [first, last) of out (the rest untouched). */
static void splat_reference(const rc_geom *g, const float *vol, int first, int last, double *out)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	const size_t vc = (size_t)d->nu * (size_t)d->nv;
	for (int k = first; k < last; k++) {
		const double *P = rc_geom_view(g, k)->P;
		double *img = out + (size_t)k * vc;
		memset(img, 0, vc * sizeof *img);
		for (int iz = 0; iz < v->nz; iz++)
			for (int iy = 0; iy < v->ny; iy++)
				for (int ix = 0; ix < v->nx; ix++) {
					double X[3] = { (ix - (v->nx - 1) / 2.0) * v->vx + v->cx,
							(iy - (v->ny - 1) / 2.0) * v->vy + v->cy,
							(iz - (v->nz - 1) / 2.0) * v->vz + v->cz };
					double w = P[8] * X[0] + P[9] * X[1] + P[10] * X[2] + P[11];
					if (!(w > 0))
						continue;
					double u = (P[0] * X[0] + P[1] * X[1] + P[2] * X[2] + P[3]) / w;
					double vv = (P[4] * X[0] + P[5] * X[1] + P[6] * X[2] + P[7]) / w;
					double a = vol[((size_t)iz * v->ny + iy) * v->nx + ix] / (w * w);
					int i0 = (int)floor(u), j0 = (int)floor(vv);
					/* projected steps: du/dx vx, du/dy vy, dv/dz vz */
					double su = 1, sv = 1;
					if (P[2] == 0 && P[10] == 0) {
						su = fmax(fabs(P[0] - u * P[8]) * v->vx, fabs(P[1] - u * P[9]) * v->vy) / w;
						sv = fabs(P[6]) * v->vz / w;
						su = su < 1 ? su : 1;
						sv = sv < 1 ? sv : 1;
					}
					for (int dj = 0; dj < 2; dj++)
						for (int di = 0; di < 2; di++) {
							int i = i0 + di, j = j0 + dj;
							if (i < 0 || i >= d->nu || j < 0 || j >= d->nv)
								continue;
							double hu = fmax(0, 1 - fabs(u - i) / su) / su;
							double hv = fmax(0, 1 - fabs(vv - j) / sv) / sv;
							img[(size_t)j * d->nu + i] += a * hu * hv;
						}
				}
		const double V = v->vx * v->vy * v->vz;
		for (int j = 0; j < d->nv; j++)
			for (int i = 0; i < d->nu; i++) {
				double gu[3], gv[3];
				for (int c = 0; c < 3; c++) {
					gu[c] = P[c] - i * P[8 + c];
					gv[c] = P[4 + c] - j * P[8 + c];
				}
				double cx = gu[1] * gv[2] - gu[2] * gv[1], cy = gu[2] * gv[0] - gu[0] * gv[2],
				       cz = gu[0] * gv[1] - gu[1] * gv[0];
				img[(size_t)j * d->nu + i] *= V * sqrt(cx * cx + cy * cy + cz * cz);
			}
	}
}

static void reference_case(rc_geom_type type, const rc_volume_desc *vol)
{
	rc_geom *g = make_geom(type, vol, &DET);
	rc_engine *e1 = make_engine(g, 1), *e2 = make_engine(g, 2);
	assert_true(e1->splat && e2->splat);
	size_t nvox = rc_volume_count(vol), np = rc_geom_proj_count(g);
	float *x = falloc(nvox), *p = falloc(np), *p0 = falloc(np), *p2 = falloc(np);
	double *ref = calloc(np, sizeof *ref);
	assert_non_null(ref);
	for (size_t i = 0; i < nvox; i++)
		x[i] = (float)urand();
	splat_reference(g, x, 0, NV, ref);
	double peak = 0;
	for (size_t i = 0; i < np; i++)
		peak = fmax(peak, fabs(ref[i]));
	rc_err err;
	for (int k = 0; k < 3; k++) {
		if (rc_engine_cpu_set_isa(e1, isas[k], &err))
			continue;
		assert_int_equal(rc_engine_cpu_set_isa(e2, isas[k], &err), 0);
		assert_int_equal(rc_engine_forward(e1, RC_FP_SPLAT, x, p, 0, NV, &err), 0);
		double worst = 0;
		for (size_t i = 0; i < np; i++)
			worst = fmax(worst, fabs(p[i] - ref[i]));
		print_message("splat %s %dx%dx%d, %s: max |A x - reference| %.3g of the peak %.4g (bound 2e-5)\n",
			      type == RC_GEOM_CONE ? "cone" : "matrices", vol->nx, vol->ny, vol->nz, isas[k],
			      worst / peak, peak);
		assert_true(peak > 0);
		assert_true(worst < 2e-5 * peak);
		/* two threads: the same bits; a sub-range: its views only */
		assert_int_equal(rc_engine_forward(e2, RC_FP_SPLAT, x, p2, 0, NV, &err), 0);
		assert_memory_equal(p, p2, np * sizeof *p);
		memset(p2, 0, np * sizeof *p2);
		assert_int_equal(rc_engine_forward(e2, RC_FP_SPLAT, x, p2, 3, 7, &err), 0);
		size_t vc = rc_geom_view_count(g);
		for (size_t i = 0; i < np; i++)
			assert_true(i / vc >= 3 && i / vc < 7 ? p2[i] == p[i] : p2[i] == 0);
		if (k == 0)
			memcpy(p0, p, np * sizeof *p);
		else /* the ISA paths agree to rounding (their sums run in another order) */
			for (size_t i = 0; i < np; i++)
				assert_true(fabs(p[i] - p0[i]) <= 1e-6 * peak);
	}
	free(x);
	free(p);
	free(p0);
	free(p2);
	free(ref);
	rc_engine_free(e1);
	rc_engine_free(e2);
	rc_geom_free(g);
}

/* A volume of one value (SART's row sums A 1) takes proj_splat.c's closed
 * form per column: against the same double model. */
static void constant_case(const rc_volume_desc *vol)
{
	rc_geom *g = make_geom(RC_GEOM_CONE, vol, &DET);
	rc_engine *e = make_engine(g, 2);
	size_t nvox = rc_volume_count(vol), np = rc_geom_proj_count(g);
	float *x = falloc(nvox), *p = falloc(np);
	double *ref = calloc(np, sizeof *ref);
	assert_non_null(ref);
	for (size_t i = 0; i < nvox; i++)
		x[i] = 0.7f;
	splat_reference(g, x, 0, NV, ref);
	double peak = 0, worst = 0;
	rc_err err;
	assert_int_equal(rc_engine_forward(e, RC_FP_SPLAT, x, p, 0, NV, &err), 0);
	for (size_t i = 0; i < np; i++) {
		peak = fmax(peak, fabs(ref[i]));
		worst = fmax(worst, fabs(p[i] - ref[i]));
	}
	print_message("splat cone %dx%dx%d, constant volume: max |A x - reference| %.3g of the peak %.4g "
		      "(bound 2e-5)\n",
		      vol->nx, vol->ny, vol->nz, worst / peak, peak);
	assert_true(peak > 0);
	assert_true(worst < 2e-5 * peak);
	free(x);
	free(p);
	free(ref);
	rc_engine_free(e);
	rc_geom_free(g);
}

static void test_reference_cone(void **s)
{
	(void)s;
	reference_case(RC_GEOM_CONE, &VOL);
	constant_case(&VOL);
	for (int i = 0; i < NTALL; i++) {
		reference_case(RC_GEOM_CONE, &TALL[i]);
		constant_case(&TALL[i]);
	}
}
static void test_reference_matrices(void **s) { (void)s; reference_case(RC_GEOM_MATRICES, &VOL); }

static void adjoint_case(rc_geom_type type, const rc_volume_desc *vol)
{
	rc_geom *g = make_geom(type, vol, &DET);
	rc_engine *e = make_engine(g, 0);
	size_t nvox = rc_volume_count(vol), np = rc_geom_proj_count(g);
	float *x = falloc(nvox), *ax = falloc(np), *y = falloc(np), *aty = falloc(nvox);
	for (size_t i = 0; i < nvox; i++)
		x[i] = (float)urand();
	for (size_t i = 0; i < np; i++)
		y[i] = (float)urand();
	rc_err err;
	for (int k = 0; k < 3; k++) {
		if (rc_engine_cpu_set_isa(e, isas[k], &err))
			continue;
		assert_int_equal(rc_engine_forward(e, RC_FP_SPLAT, x, ax, 0, NV, &err), 0);
		assert_int_equal(rc_engine_back(e, RC_BP_SPLAT, y, aty, 0, NV, &err), 0);
		double l = 0, r = 0;
		for (size_t i = 0; i < np; i++)
			l += (double)ax[i] * y[i];
		for (size_t i = 0; i < nvox; i++)
			r += (double)x[i] * aty[i];
		double gap = fabs(l - r) / fabs(l);
		print_message("splat adjoint %s %dx%dx%d, %s: <Ax,y> = %.9g, <x,A^T y> = %.9g, relative gap %.3g "
			      "(bound 1e-5)\n",
			      type == RC_GEOM_CONE ? "cone" : "matrices", vol->nx, vol->ny, vol->nz, isas[k], l, r,
			      gap);
		assert_true(l > 0);
		assert_true(gap < 1e-5);
	}
	free(x);
	free(ax);
	free(y);
	free(aty);
	rc_engine_free(e);
	rc_geom_free(g);
}

static void test_adjoint_cone(void **s)
{
	(void)s;
	adjoint_case(RC_GEOM_CONE, &VOL);
	for (int i = 0; i < NTALL; i++)
		adjoint_case(RC_GEOM_CONE, &TALL[i]);
}
static void test_adjoint_matrices(void **s) { (void)s; adjoint_case(RC_GEOM_MATRICES, &VOL); }

/* Relative L2 error of kind's projection of the voxelised Shepp-Logan
 * against its analytic line integrals, n^3 voxels over a 30 mm field, on a
 * detector whose pixels are 1.4 voxel steps at the isocentre. */
static double shepp_logan_error(int n, rc_fp_kind kind)
{
	const double vs = 30.0 / n;
	rc_volume_desc v = { n, n, n, vs, vs, vs, 0, 0, 0 };
	rc_detector_desc det = { (int)(1.1 * n), (int)(0.9 * n), 1.4 * 2 * vs, 1.4 * 2 * vs, 0, 0, RC_DETECTOR_FLAT };
	rc_geom *g = make_geom(RC_GEOM_CONE, &v, &det);
	rc_engine *e = make_engine(g, 0);
	assert_true(e->splat);
	rc_phantom *ph = NULL;
	rc_err err;
	assert_int_equal(rc_phantom_shepp_logan(30.0, &ph, &err), 0);
	size_t np = rc_geom_proj_count(g);
	float *vol = falloc(rc_volume_count(&v)), *proj = falloc(np), *ref = falloc(np);
	assert_int_equal(rc_phantom_voxelize(ph, &v, 4, 0, vol, &err), 0);
	assert_int_equal(rc_phantom_project(ph, g, 0, ref, &err), 0);
	assert_int_equal(rc_engine_forward(e, kind, vol, proj, 0, NV, &err), 0);
	double num = 0, den = 0;
	for (size_t i = 0; i < np; i++) {
		num += ((double)proj[i] - ref[i]) * ((double)proj[i] - ref[i]);
		den += (double)ref[i] * ref[i];
	}
	rc_phantom_free(ph);
	free(vol);
	free(proj);
	free(ref);
	rc_engine_free(e);
	rc_geom_free(g);
	return sqrt(num / den);
}

static void test_shepp_logan(void **s)
{
	(void)s;
	double sp[2], rc[2];
	const int sizes[2] = { 24, 48 };
	for (int i = 0; i < 2; i++) {
		sp[i] = shepp_logan_error(sizes[i], RC_FP_SPLAT);
		rc[i] = shepp_logan_error(sizes[i], RC_FP_RAYCAST);
		print_message("Shepp-Logan %d^3: splat %.4f, ray casting %.4f (bound 1.05x)\n", sizes[i], sp[i], rc[i]);
		assert_true(sp[i] < 1.05 * rc[i]);
	}
	assert_true(sp[1] < 0.7 * sp[0]);
}

/* Voxels 0.8 mm at magnification up to 2.2 on 1.5 mm pixels: more than a
 * pixel apart, so no splat pair. */
static void test_refused_when_coarse(void **s)
{
	(void)s;
	const rc_volume_desc coarse = { 40, 40, 36, 0.8, 0.8, 0.8, 0, 0, 0 };
	rc_geom *g = make_geom(RC_GEOM_CONE, &coarse, &DET);
	rc_engine *e = make_engine(g, 0);
	print_message("coarse: largest projected voxel step %.3f pixels\n", rc_splat_max_step(g));
	assert_true(rc_splat_max_step(g) > RC_SPLAT_MAX_STEP);
	assert_false(e->splat);
	float *x = falloc(rc_volume_count(&coarse)), *p = falloc(rc_geom_proj_count(g));
	rc_err err;
	assert_int_equal(rc_engine_forward(e, RC_FP_SPLAT, x, p, 0, NV, &err), RC_EUNSUPPORTED);
	assert_int_equal(rc_engine_back(e, RC_BP_SPLAT, p, x, 0, NV, &err), RC_EUNSUPPORTED);
	free(x);
	free(p);
	rc_engine_free(e);
	rc_geom_free(g);
	/* and the fine volume is offered it */
	g = make_geom(RC_GEOM_CONE, &VOL, &DET);
	print_message("fine: largest projected voxel step %.3f pixels\n", rc_splat_max_step(g));
	assert_true(rc_splat_suits(g));
	rc_geom_free(g);
}

/* CGLS, 3 iterations, with projector pj on engine e; returns rc. */
static int cgls_with(rc_engine *e, rc_projector pj, const float *proj, float *vol)
{
	rc_exec *x = NULL;
	rc_err err;
	if (rc_exec_new(&e, 1, &x, &err))
		fail_msg("exec: %s", err.msg);
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_CGLS);
	p.iterations = 3;
	p.projector = pj;
	int rc = rc_algo_run(&p, x, proj, vol, NULL, &err);
	if (rc)
		print_message("cgls (projector %d): %s\n", (int)pj, err.msg);
	rc_exec_free(x);
	return rc;
}

static void test_projector_param(void **s)
{
	(void)s;
	rc_geom *g = make_geom(RC_GEOM_CONE, &VOL, &DET);
	rc_engine *with = make_engine(g, 0);
	/* without either voxel-driven pair: auto is ray casting there */
	setenv("RECOND_NO_SPLAT", "1", 1);
	setenv("RECOND_NO_FOOTPRINT", "1", 1);
	rc_engine *without = make_engine(g, 0);
	unsetenv("RECOND_NO_SPLAT");
	unsetenv("RECOND_NO_FOOTPRINT");
	assert_true(with->splat);
	assert_false(without->splat);
	size_t nvox = rc_volume_count(&VOL), np = rc_geom_proj_count(g);
	float *x = falloc(nvox), *p = falloc(np), *a = falloc(nvox), *b = falloc(nvox), *c = falloc(nvox);
	for (size_t i = 0; i < nvox; i++)
		x[i] = (float)urand();
	rc_err err;
	assert_int_equal(rc_engine_forward(without, RC_FP_RAYCAST, x, p, 0, NV, &err), 0);
	assert_int_equal(cgls_with(with, RC_PROJECTOR_RAYCAST, p, a), 0);
	assert_int_equal(cgls_with(without, RC_PROJECTOR_AUTO, p, b), 0);
	assert_memory_equal(a, b, nvox * sizeof *a);
	assert_int_equal(cgls_with(with, RC_PROJECTOR_AUTO, p, c), 0);
	assert_memory_not_equal(a, c, nvox * sizeof *a);
	assert_int_equal(cgls_with(without, RC_PROJECTOR_SPLAT, p, c), RC_EUNSUPPORTED);
	free(x);
	free(p);
	free(a);
	free(b);
	free(c);
	rc_engine_free(with);
	rc_engine_free(without);
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference_cone),   cmocka_unit_test(test_reference_matrices),
		cmocka_unit_test(test_adjoint_cone),     cmocka_unit_test(test_adjoint_matrices),
		cmocka_unit_test(test_shepp_logan),      cmocka_unit_test(test_refused_when_coarse),
		cmocka_unit_test(test_projector_param),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
