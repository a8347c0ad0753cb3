/*
 * The helix geometry (geometry.h, helix.c) and the helical FDK
 * (algo_fdk_helix.c) against references independent of recond's
 * projectors: pitch 0 is the circular cone bit for bit; the
 * Tam-Danielsson window is where the helix's own turns project; the
 * analytic projection of the phantom on the helix is the line integral
 * along rays this test builds from the spec's formula; the CPU engine's
 * forward projectors come within bounds of those integrals and its pairs
 * are adjoint; the helical FDK's error over the whole long volume at pitch
 * factors 0.5, 1 and 1.5 is at most 1.25x the circular FDK's error in its
 * own exact central slab, on the same phantom (helix_case.h).
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
#include "algo/fdk_helix.h"
#include "backend/exec.h"
#include "geometry/metrics.h"
#include "helix_case.h"
#include "util/rc_clock.h"
#include "proj_testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define VIEWS_TURN 90
#define NZ 24
#else
#define VIEWS_TURN 180
#define NZ 40
#endif

static const rc_volume_desc VOL = { .nx = 36, .ny = 36, .nz = NZ, .vx = 1, .vy = 1, .vz = 1 };

static rc_geom *geom_n(double pf, int npi, rc_detector_shape shape, const rc_volume_desc *vol)
{
	double *ang = NULL;
	rc_geom *g = NULL;
	rc_err err;
	if (hx_geom_n(pf, npi, VIEWS_TURN, shape, vol, &ang, &g, &err))
		fail_msg("helix %g: %s", pf, err.msg);
	free(ang);
	return g;
}

static rc_geom *geom(double pf, rc_detector_shape shape, const rc_volume_desc *vol)
{
	return geom_n(pf, 1, shape, vol);
}

static void test_pitch0_is_cone(void **s)
{
	(void)s;
	rc_volume_desc vol = VOL;
	vol.nz = 8;
	double ang[120];
	for (int k = 0; k < 120; k++)
		ang[k] = 3.0 * k;
	for (int c = 0; c < 2; c++) {
		rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = 120, .source_isocenter_mm = HX_D,
				    .source_detector_mm = HX_S, .angles_deg = ang };
		sp.det = (rc_detector_desc){ .nu = HX_NU, .nv = HX_NV, .du = 1, .dv = 1,
					     .shape = c ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT };
		rc_geom *gc = NULL, *gh = NULL;
		rc_err err;
		assert_int_equal(rc_geom_new(&sp, &vol, NULL, &gc, &err), 0);
		sp.type = RC_GEOM_HELIX; /* pitch_mm 0, z_start_mm 0 */
		assert_int_equal(rc_geom_new(&sp, &vol, NULL, &gh, &err), 0);
		for (int k = 0; k < 120; k++)
			assert_memory_equal(rc_geom_view(gc, k), rc_geom_view(gh, k), sizeof(rc_view));
		/* the same FDK volume, bit for bit */
		rc_phantom *ph = NULL;
		assert_int_equal(hx_phantom(&ph, &err), 0);
		size_t np = rc_geom_proj_count(gc), nv = rc_volume_count(&vol);
		float *proj = falloc(np), *a = falloc(nv), *b = falloc(nv);
		assert_int_equal(rc_phantom_project(ph, gc, 0, proj, &err), 0);
		rc_geom *gs[2] = { gc, gh };
		float *out[2] = { a, b };
		for (int i = 0; i < 2; i++) {
			rc_engine *e = make_engine(gs[i], 0);
			rc_exec *x = NULL;
			rc_algo_params p;
			rc_algo_params_default(&p, RC_ALGO_FDK);
			assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
			assert_int_equal(rc_algo_run(&p, x, proj, out[i], NULL, &err), 0);
			rc_exec_free(x);
			rc_engine_free(e);
		}
		assert_memory_equal(a, b, nv * sizeof(float));
		free(proj);
		free(a);
		free(b);
		rc_phantom_free(ph);
		rc_geom_free(gc);
		rc_geom_free(gh);
	}
}

/* The window's edges are the projections of the helix's turns after and
 * before the source (the next ones for the 3-PI window), computed here
 * from the spec's formula. */
static void test_window_edges(void **s)
{
	(void)s;
	for (int c = 0; c < 2; c++)
		for (int dir = -1; dir <= 1; dir += 2) {
			rc_detector_shape shape = c ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT;
			double ang[600], pitch = dir * 7.0;
			for (int k = 0; k < 600; k++)
				ang[k] = -dir * 2.0 * k; /* angles decreasing for dir 1: lead -7 mm */
			rc_geom_spec sp = { .type = RC_GEOM_HELIX, .nviews = 600, .source_isocenter_mm = HX_D,
					    .source_detector_mm = HX_S, .angles_deg = ang, .pitch_mm = pitch,
					    .z_start_mm = -5 };
			sp.det = (rc_detector_desc){ .nu = HX_NU, .nv = HX_NV, .du = 1, .dv = 1, .shape = shape };
			rc_volume_desc vol = { .nx = 8, .ny = 8, .nz = 1, .vx = 1, .vy = 1, .vz = 1,
					       .cz = -5 + pitch * (ang[300] - ang[0]) / 360.0 };
			rc_geom *g = NULL;
			rc_err err;
			int rc = rc_geom_new(&sp, &vol, NULL, &g, &err);
			if (rc)
				fail_msg("%s", err.msg);
			int k = 300;
			double t = ang[k] * M_PI / 180, z = -5 + pitch * (ang[k] - ang[0]) / 360;
			double sigma = ang[1] > ang[0] ? 1 : -1, lead = pitch * sigma;
			for (int npi = 1; npi <= 3; npi += 2)
			for (int side = -1; side <= 1; side += 2)
				for (double tau = (npi - 1) * M_PI + 0.3; tau < (npi + 1) * M_PI - 0.3; tau += 0.1) {
					double ta = t + side * sigma * tau;
					double x[3] = { HX_D * cos(ta), HX_D * sin(ta), z + side * lead * tau / (2 * M_PI) };
					double u, v, w;
					if (shape == RC_DETECTOR_CURVED)
						rc_geom_cyl_project(g, k, x, &u, &v, &w);
					else
						rc_view_project(rc_geom_view(g, k), x, &u, &v, &w);
					double um = u - (HX_NU - 1) / 2.0, vm = v - (HX_NV - 1) / 2.0;
					double gamma = shape == RC_DETECTOR_CURVED ? um / HX_S : atan(um / HX_S);
					if (fabs(gamma) > 0.05)
						continue; /* beyond the detector: no matter */
					double lo, hi;
					rc_geom_helix_window(g, npi, gamma, &lo, &hi);
					double edge = side * lead > 0 ? hi : lo;
					assert_true(fabs(vm - edge) < 1e-6 * (1 + fabs(edge)));
				}
			rc_geom_free(g);
		}
}

static void expect_field(const rc_geom_spec *sp, const rc_volume_desc *vol, const char *field)
{
	rc_geom *g = NULL;
	rc_err err;
	rc_err_clear(&err);
	int rc = rc_geom_new(sp, vol, NULL, &g, &err);
	if (!rc)
		fail_msg("accepted; expected a refusal naming %s", field);
	print_message("refused (%s): %s\n", err.field, err.msg);
	assert_string_equal(err.field, field);
	assert_null(g);
}

static void test_refusals(void **s)
{
	(void)s;
	double *ang = NULL;
	rc_geom *g = NULL;
	rc_err err;
	assert_int_equal(hx_geom(1.0, 90, RC_DETECTOR_FLAT, &VOL, &ang, &g, &err), 0);
	rc_geom_spec sp = { .type = RC_GEOM_HELIX, .nviews = rc_geom_nviews(g), .source_isocenter_mm = HX_D,
			    .source_detector_mm = HX_S, .angles_deg = ang, .pitch_mm = rc_geom_pitch(g),
			    .z_start_mm = rc_geom_view(g, 0)->src[2], .det = *rc_geom_detector(g) };
	rc_geom_free(g);
	/* the pitch: the window must fit the detector (factor 1.9 > ~1.7) */
	rc_geom_spec big = sp;
	big.pitch_mm = 1.9 * HX_H_ISO;
	expect_field(&big, &VOL, "geometry.pitch_mm");
	/* a volume beyond the covered range, at either end */
	rc_volume_desc vol = VOL;
	vol.cz = 3;
	expect_field(&sp, &vol, "volume");
	vol.cz = -3;
	expect_field(&sp, &vol, "volume");
	vol = VOL;
	vol.nz += 6;
	expect_field(&sp, &vol, "volume");
	/* one scan: the angles keep their direction */
	double a2 = ang[2];
	ang[2] = ang[1];
	expect_field(&sp, &VOL, "geometry.angles");
	ang[2] = a2;
	rc_geom_spec bad = sp;
	bad.pitch_mm = NAN;
	expect_field(&bad, &VOL, "geometry.pitch_mm");
	/* heights whose matrices overflow (the fuzzer's find) */
	bad = sp;
	bad.z_start_mm = 1e307;
	expect_field(&bad, &VOL, "geometry.z_start_mm");
	bad = sp;
	bad.pitch_mm = 1e308;
	expect_field(&bad, &VOL, "geometry.pitch_mm");
	/* a displaced detector: iterative methods only */
	rc_geom_spec off = sp;
	off.det.offset_u = 30;
	assert_int_equal(rc_geom_new(&off, &VOL, NULL, &g, &err), 0);
	rc_err_clear(&err);
	assert_int_not_equal(rc_fdk_suits(g, RC_SCAN_AUTO, &err), 0);
	assert_string_equal(err.field, "geometry.detector.offset_u_mm");
	rc_geom_free(g);
	free(ang);
}

/* The ray of pixel (i, j) of view k from the spec alone. */
static void spec_ray(double pf, double z0, const double *ang, int k, rc_detector_shape shape, int i, int j, double o[3],
		     double d[3])
{
	double t = ang[k] * M_PI / 180, ct = cos(t), st = sin(t);
	double um = i - (HX_NU - 1) / 2.0, vm = j - (HX_NV - 1) / 2.0, z = z0 + pf * HX_H_ISO * (ang[k] - ang[0]) / 360;
	o[0] = HX_D * ct, o[1] = HX_D * st, o[2] = z;
	double a = HX_S, b = um;
	if (shape == RC_DETECTOR_CURVED)
		a = HX_S * cos(um / HX_S), b = HX_S * sin(um / HX_S);
	/* n = -(ct, st, 0), e_u = (-st, ct, 0) */
	d[0] = -a * ct - b * st;
	d[1] = -a * st + b * ct;
	d[2] = vm;
}

static void test_analytic_rays(void **s)
{
	(void)s;
	rc_phantom *ph = NULL;
	rc_err err;
	assert_int_equal(hx_phantom(&ph, &err), 0);
	for (int c = 0; c < 2; c++) {
		rc_detector_shape shape = c ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT;
		double *ang = NULL;
		rc_geom *g = NULL;
		assert_int_equal(hx_geom(1.0, VIEWS_TURN, shape, &VOL, &ang, &g, &err), 0);
		float *proj = falloc(rc_geom_proj_count(g));
		assert_int_equal(rc_phantom_project(ph, g, 0, proj, &err), 0);
		double worst = 0, z0 = rc_geom_view(g, 0)->src[2];
		for (int k = 0; k < rc_geom_nviews(g); k += 7)
			for (int j = 0; j < HX_NV; j += 5)
				for (int i = 0; i < HX_NU; i += 3) {
					double o[3], d[3];
					spec_ray(1.0, z0, ang, k, shape, i, j, o, d);
					double ref = rc_phantom_integral(ph, o, d, 0, 1);
					double got = proj[rc_geom_row_offset(g, k, j) + (size_t)i];
					worst = fmax(worst, fabs(got - ref));
				}
		print_message("%s helix: analytic stack vs the spec's rays: max |diff| %.3g\n", c ? "curved" : "flat", worst);
		assert_true(worst < 1e-4);
		free(proj);
		free(ang);
		rc_geom_free(g);
	}
	rc_phantom_free(ph);
}

/* rel. error of the engine's forward projection of the voxelised phantom
 * against the analytic stack (views seeing the volume's middle, rows whose
 * rays stay inside the volume's z range) */
static double fp_error(rc_engine *e, rc_fp_kind kind, const float *vox, const float *ref)
{
	const rc_geom *g = e->geom;
	size_t np = rc_geom_proj_count(g);
	float *out = falloc(np);
	rc_err err;
	int rc = rc_engine_forward(e, kind, vox, out, 0, rc_geom_nviews(g), &err);
	if (rc)
		fail_msg("%s", err.msg);
	const rc_volume_desc *v = rc_geom_volume(g);
	double zlo = v->cz - 0.3 * v->nz * v->vz, zhi = v->cz + 0.3 * v->nz * v->vz, num = 0, den = 0;
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		double zs = rc_geom_view(g, k)->src[2];
		if (zs < zlo || zs > zhi)
			continue;
		for (int j = 3; j < HX_NV - 3; j++)
			for (int i = 0; i < HX_NU; i++) {
				size_t o = rc_geom_row_offset(g, k, j) + (size_t)i;
				num += (out[o] - ref[o]) * (double)(out[o] - ref[o]);
				den += ref[o] * (double)ref[o];
			}
	}
	free(out);
	return sqrt(num / den);
}

/* A phantom inside the volume (smooth enough for the bounds to be the
 * projectors', not the voxelisation's): a few ellipsoids. */
static int inner_phantom(double scale, rc_phantom **p, rc_err *err)
{
	rc_ellipsoid e[] = {
		{ .c = { 0, 0, 0 }, .a = { 14, 12, 15 }, .mu = 0.02 },
		{ .c = { 4, -3, 4 }, .a = { 5, 4, 6 }, .phi_deg = 30, .mu = 0.02 },
		{ .c = { -5, 5, -5 }, .a = { 3, 4, 3 }, .mu = -0.01 },
	};
	for (int i = 0; i < 3; i++)
		for (int a = 0; a < 3; a++)
			e[i].c[a] *= scale, e[i].a[a] *= scale;
	return rc_phantom_new(e, 3, p, err);
}

/* voxels of 0.4 mm project at most 0.83 pixel apart: the splat pair */
static const rc_volume_desc FINE = { .nx = 48, .ny = 48, .nz = 40, .vx = 0.4, .vy = 0.4, .vz = 0.4 };

static void test_projectors_analytic(void **s)
{
	(void)s;
	rc_err err;
	for (int c = 0; c < 3; c++) {
		/* flat, curved, flat on the fine voxels */
		const rc_volume_desc *V = c == 2 ? &FINE : &VOL;
		rc_phantom *ph = NULL;
		assert_int_equal(inner_phantom(V->vx, &ph, &err), 0);
		size_t nvox = rc_volume_count(V);
		float *vox = falloc(nvox);
		assert_int_equal(rc_phantom_voxelize(ph, V, 3, 0, vox, &err), 0);
		rc_detector_shape shape = c == 1 ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT;
		double econe = 0, escone = 0, efcone = 0;
		for (int helix = 0; helix < 2; helix++) {
			rc_geom *g = geom(helix ? 1.0 : 0.0, shape, V);
			float *ref = falloc(rc_geom_proj_count(g));
			assert_int_equal(rc_phantom_project(ph, g, 0, ref, &err), 0);
			rc_engine *e = make_engine(g, 0);
			double er = fp_error(e, RC_FP_RAYCAST, vox, ref);
			double es = e->splat ? fp_error(e, RC_FP_SPLAT, vox, ref) : -1;
			double ef = e->footprint ? fp_error(e, RC_FP_FOOTPRINT, vox, ref) : -1;
			print_message("%s %s, %g mm voxels: vs analytic: raycast %.4f, splat %.4f, footprint %.4f (-1: not "
				      "offered)\n",
				      c == 1 ? "curved" : "flat", helix ? "helix" : "cone", V->vx, er, es, ef);
			if (!helix)
				econe = er, escone = es, efcone = ef;
			/* the bounds: absolute, and near the circle's (its views
			 * see other parts of the phantom: not the same rays) */
			assert_true(er < 0.04);
			if (helix)
				assert_true(er < 1.35 * econe);
			/* the pairs the circle gets, the helix gets */
			assert_int_equal(es >= 0, c == 2);
			assert_true(ef >= 0); /* flat and curved */
			if (es >= 0)
				assert_true(es < 0.04 && (!helix || es < 1.35 * escone));
			if (ef >= 0)
				assert_true(ef < 0.04 && (!helix || ef < 1.35 * efcone));
			rc_engine_free(e);
			free(ref);
			rc_geom_free(g);
		}
		free(vox);
		rc_phantom_free(ph);
	}
}

static double dotf(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

static void adjoint(rc_engine *e, rc_fp_kind fk, rc_bp_kind bk, const char *name)
{
	const rc_geom *g = e->geom;
	size_t np = rc_geom_proj_count(g), nv = rc_volume_count(rc_geom_volume(g));
	float *x = falloc(nv), *y = falloc(np), *ax = falloc(np), *aty = falloc(nv);
	for (size_t i = 0; i < nv; i++)
		x[i] = (float)urand();
	for (size_t i = 0; i < np; i++)
		y[i] = (float)urand();
	rc_err err;
	assert_int_equal(rc_engine_forward(e, fk, x, ax, 0, rc_geom_nviews(g), &err), 0);
	assert_int_equal(rc_engine_back(e, bk, y, aty, 0, rc_geom_nviews(g), &err), 0);
	double l = dotf(ax, y, np), r = dotf(x, aty, nv), gap = fabs(l - r) / fabs(l);
	print_message("adjoint %s: <Ax,y> %.9g, <x,A^T y> %.9g, gap %.2e\n", name, l, r, gap);
	assert_true(gap <= 1e-5);
	free(x);
	free(y);
	free(ax);
	free(aty);
}

static void test_adjoint(void **s)
{
	(void)s;
	for (int c = 0; c < 3; c++) {
		rc_volume_desc vol = c == 2 ? FINE : VOL;
		vol.nz = 16;
		rc_geom *g = geom(1.2, c == 1 ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT, &vol);
		rc_engine *e = make_engine(g, 0);
		adjoint(e, RC_FP_RAYCAST, RC_BP_MATCHED, c == 1 ? "curved raycast" : "flat raycast");
		if (c == 2) {
			assert_true(e->splat);
			adjoint(e, RC_FP_SPLAT, RC_BP_SPLAT, "flat splat");
		}
		if (c < 2) { /* the curved pair reads each view's source height */
			assert_true(e->footprint);
			adjoint(e, RC_FP_FOOTPRINT, RC_BP_FOOTPRINT, c == 1 ? "curved footprint" : "flat footprint");
		}
		rc_engine_free(e);
		rc_geom_free(g);
	}
}

/* FDK of the long phantom's exact stack on g; relative error over the
 * central cylinder of slices iz0..iz1-1. */
static double fdk_error(const rc_geom *g, const rc_phantom *ph, const float *truth, const uint8_t *mask, int iz0,
			int iz1, double *secs)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	size_t plane = (size_t)v->nx * v->ny, nv = rc_volume_count(v);
	float *proj = falloc(rc_geom_proj_count(g)), *vol = falloc(nv);
	rc_err err;
	assert_int_equal(rc_phantom_project(ph, g, 0, proj, &err), 0);
	rc_engine *e = make_engine(g, 0);
	rc_exec *x = NULL;
	rc_algo_params p;
	rc_algo_params_default(&p, RC_ALGO_FDK);
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	double t0 = rc_now_s();
	int rc = rc_algo_run(&p, x, proj, vol, NULL, &err);
	*secs = rc_now_s() - t0;
	if (rc)
		fail_msg("%s", err.msg);
	double r = rc_metric_rel_error(vol + iz0 * plane, truth + iz0 * plane, mask + iz0 * plane,
				       (size_t)(iz1 - iz0) * plane);
	rc_exec_free(x);
	rc_engine_free(e);
	free(proj);
	free(vol);
	return r;
}

static void test_fdk_targets(void **s)
{
	(void)s;
	rc_phantom *ph = NULL;
	rc_err err;
	assert_int_equal(hx_phantom(&ph, &err), 0);
	size_t nv = rc_volume_count(&VOL), plane = (size_t)VOL.nx * VOL.ny;
	float *truth = falloc(nv);
	uint8_t *mask = calloc(nv, 1);
	assert_non_null(mask);
	assert_int_equal(rc_phantom_voxelize(ph, &VOL, 3, 0, truth, &err), 0);
	for (int z = 0; z < VOL.nz; z++)
		for (int y = 0; y < VOL.ny; y++)
			for (int x = 0; x < VOL.nx; x++) {
				double px = x - (VOL.nx - 1) / 2.0, py = y - (VOL.ny - 1) / 2.0;
				mask[(size_t)z * plane + (size_t)y * VOL.nx + x] = px * px + py * py < 15.0 * 15.0;
			}
	for (int c = 0; c < 2; c++) {
		rc_detector_shape shape = c ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT;
		double tc, th;
		rc_geom *gc = geom(0, shape, &VOL);
		/* the circular scan's exact slab: the 4 slices about its plane */
		double ecirc = fdk_error(gc, ph, truth, mask, VOL.nz / 2 - 2, VOL.nz / 2 + 2, &tc);
		rc_geom_free(gc);
		for (int i = 0; i < 4; i++) {
			/* 0.5, 1, 1.5 over the Tam-Danielsson window's range, then
			 * 0.5 over the 3-PI window's (a longer scan) */
			double pf = i < 3 ? 0.5 * (i + 1) : 0.5;
			rc_geom *g = geom_n(pf, i < 3 ? 1 : 3, shape, &VOL);
			int npi = rc_fdk_helix_npi(g);
			assert_int_equal(npi, i < 3 ? 1 : 3);
			double eh = fdk_error(g, ph, truth, mask, 0, VOL.nz, &th);
			print_message("%s: pitch factor %.1f (%d views, %d-PI window): helical FDK %.4f over all %d slices, "
				      "circular %.4f in its central 4 (ratio %.3f); %.2f s (circular %.2f s)\n",
				      c ? "curved" : "flat", pf, rc_geom_nviews(g), npi, eh, VOL.nz, ecirc, eh / ecirc, th, tc);
			assert_true(eh <= 1.25 * ecirc);
			rc_geom_free(g);
		}
	}
	free(truth);
	free(mask);
	rc_phantom_free(ph);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pitch0_is_cone),   cmocka_unit_test(test_window_edges),
		cmocka_unit_test(test_refusals),         cmocka_unit_test(test_analytic_rays),
		cmocka_unit_test(test_projectors_analytic), cmocka_unit_test(test_adjoint),
		cmocka_unit_test(test_fdk_targets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
