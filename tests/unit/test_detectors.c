/*
 * test_detectors: cone scans on scanner detectors (docs/geometry.md,
 * "Offset detectors" and "Cylindrical cone detectors"):
 *  - a displaced (offset, half-fan) flat detector: rc_fdk_displaced's
 *    decision and refusals, and FDK of exact Shepp-Logan projections whose
 *    error stays near the centred detector's (without the redundancy
 *    weight the side seen twice comes out doubled: the check can fail);
 *    SIRT runs on it;
 *  - a cylindrical detector (radius S about the source, axis z): the pixel
 *    centres and rays against the docs' formula computed here in double,
 *    the projection of points back to their pixels, the analytic ball's
 *    chord through every pixel, the ray-casting pair's adjoint test, its
 *    forward projection against analytic line integrals, FDK's and CGLS's
 *    errors, the engines' refusals, and the engine's back projection (the
 *    flat detector's voxel tiles with the cylinder's column set-up) against
 *    proj_cyl.c's plain one in double on every ISA the CPU has.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "geometry/metrics.h"
#include "geometry/phantom.h"
#include "plan/recon.h"
#include "projectors/proj_cpu.h"

#if defined(__SANITIZE_ADDRESS__)
#define N 24
#define NVIEWS 60
#else
#define N 40
#define NVIEWS 120
#endif
#define D_MM 400.0
#define S_MM 600.0

/* A cone scan of NVIEWS views over 360 degrees of an N^3 volume of 1 mm
 * voxels, nu x nv pixels of du x dv mm. */
static double D_mm = D_MM, S_mm = S_MM; /* the cylinder's recon test shortens them */

static int cone(rc_detector_shape shape, int nu, int nv, double du, double dv, double off_u, int nviews,
		double range_deg, rc_geom **g, rc_err *err)
{
	double *ang = malloc(sizeof(double) * (size_t)nviews);
	if (!ang)
		return -1;
	for (int k = 0; k < nviews; k++)
		ang[k] = range_deg * k / nviews;
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = nviews, .angles_deg = ang, .source_isocenter_mm = D_mm,
			    .source_detector_mm = S_mm };
	sp.det = (rc_detector_desc){ .nu = nu, .nv = nv, .du = du, .dv = dv, .offset_u = off_u, .shape = shape };
	rc_volume_desc v = { N, N, N, 1, 1, 1, 0, 0, 0 };
	int rc = rc_geom_new(&sp, &v, NULL, g, err);
	free(ang);
	return rc;
}

/* Shepp-Logan (0.94 N mm wide) projected exactly on g, its voxelised truth
 * and the central cylinder the error is taken over. */
struct data {
	float *proj, *ref;
	uint8_t *mask;
	size_t np, nvox;
};

static void data_new(const rc_geom *g, struct data *d)
{
	rc_err err;
	rc_phantom *ph;
	const rc_volume_desc *v = rc_geom_volume(g);
	d->np = rc_geom_proj_count(g);
	d->nvox = rc_volume_count(v);
	d->proj = malloc(d->np * sizeof(float));
	d->ref = malloc(d->nvox * sizeof(float));
	d->mask = malloc(d->nvox);
	assert_non_null(d->proj);
	assert_non_null(d->ref);
	assert_non_null(d->mask);
	assert_int_equal(rc_phantom_shepp_logan(0.94 * N, &ph, &err), 0);
	assert_int_equal(rc_phantom_project(ph, g, 0, d->proj, &err), 0);
	assert_int_equal(rc_phantom_voxelize(ph, v, 3, 0, d->ref, &err), 0);
	rc_mask_cylinder(v, 0.45 * N, 0.35 * N, d->mask);
	rc_phantom_free(ph);
}

static void data_free(struct data *d)
{
	free(d->proj);
	free(d->ref);
	free(d->mask);
}

/* p's algorithm on the CPU engine; the relative error over the mask. */
static double recon(const rc_geom *g, const struct data *d, const rc_algo_params *p, float *vol)
{
	rc_err err;
	rc_engine *e;
	rc_exec *x;
	assert_int_equal(rc_engine_cpu_new(g, 0, &e, &err), 0);
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	int rc = rc_algo_run(p, x, d->proj, vol, NULL, &err);
	if (rc)
		print_error("rc_algo_run: %s\n", err.msg);
	assert_int_equal(rc, 0);
	rc_exec_free(x);
	rc_engine_free(e);
	return rc_metric_rel_error(vol, d->ref, d->mask, d->nvox);
}

static double fdk_error(const rc_geom *g, const struct data *d, float *vol)
{
	rc_algo_params p;
	rc_algo_params_default(&p, RC_ALGO_FDK);
	return recon(g, d, &p, vol);
}

/* The full detector: 1.5 mm pixels covering the object (0.47 N mm) with
 * room, magnified S/D. */
#define DU 1.5
#define NU_FULL ((int)(1.3 * N * S_MM / D_MM / DU))
/* The displaced one: 70 % of its width, shifted so that it reaches as far
 * towards +e_u and covers the axis with 20 % of its width to spare
 * (narrower overlaps cost FDK more: 0.6 of the width, +35 % error). */
#define NU_HALF ((int)(0.7 * NU_FULL))
#define OFF_HALF ((NU_FULL - NU_HALF) * DU / 2)

static void test_displaced_decision(void **state)
{
	(void)state;
	rc_err err;
	rc_geom *g;
	int dir;
	double go;
	/* centred, and within RTK's 10 % of centred: no weighting */
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_FULL, 8, DU, DU, 0.0, 8, 360, &g, &err), 0);
	assert_int_equal(rc_fdk_displaced(g, RC_SCAN_FULL, &dir, &go, &err), 0);
	assert_int_equal(dir, 0);
	rc_geom_free(g);
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_FULL, 8, DU, DU, 0.04 * NU_FULL * DU, 8, 360, &g, &err), 0);
	assert_int_equal(rc_fdk_displaced(g, RC_SCAN_FULL, &dir, &go, &err), 0);
	assert_int_equal(dir, 0);
	rc_geom_free(g);
	/* a centred single column is no displaced detector (nor beside the axis) */
	assert_int_equal(cone(RC_DETECTOR_FLAT, 1, 8, DU, DU, 0.0, 8, 360, &g, &err), 0);
	assert_int_equal(rc_fdk_displaced(g, RC_SCAN_SHORT, &dir, &go, &err), 0);
	assert_int_equal(dir, 0);
	rc_geom_free(g);
	/* displaced both ways: the overlap's half angle is the inner edge's */
	for (int sgn = -1; sgn <= 1; sgn += 2) {
		assert_int_equal(cone(RC_DETECTOR_FLAT, NU_HALF, 8, DU, DU, sgn * OFF_HALF, 8, 360, &g, &err), 0);
		assert_int_equal(rc_fdk_displaced(g, RC_SCAN_FULL, &dir, &go, &err), 0);
		assert_int_equal(dir, sgn);
		double inner = (NU_HALF - 1) / 2.0 * DU - OFF_HALF;
		assert_true(fabs(go - atan(inner / S_MM)) < 1e-12);
		/* a short scan with it is refused, naming the field */
		assert_int_equal(rc_fdk_displaced(g, RC_SCAN_SHORT, &dir, &go, &err), RC_EUNSUPPORTED);
		assert_string_equal(err.field, "algorithm.scan");
		rc_geom_free(g);
	}
	/* views over 200 degrees: auto takes a short scan, which is refused */
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_HALF, 8, DU, DU, OFF_HALF, 100, 200, &g, &err), 0);
	assert_int_equal(rc_fdk_suits(g, RC_SCAN_AUTO, &err), RC_EUNSUPPORTED);
	assert_string_equal(err.field, "algorithm.scan");
	rc_geom_free(g);
	/* a detector beside the axis cannot be reconstructed by FDK */
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_HALF, 8, DU, DU, NU_HALF * DU * 0.6, 8, 360, &g, &err), 0);
	assert_int_equal(rc_fdk_displaced(g, RC_SCAN_FULL, &dir, &go, &err), RC_EUNSUPPORTED);
	assert_string_equal(err.field, "geometry.detector.offset_u_mm");
	rc_geom_free(g);
}

/* The cone's views as a matrices geometry (the same P, view by view). */
static int as_matrices(const rc_geom *cg, rc_geom **g, rc_err *err)
{
	int n = rc_geom_nviews(cg);
	double *m = malloc(sizeof(double) * 12 * (size_t)n);
	if (!m)
		return -1;
	for (int k = 0; k < n; k++)
		memcpy(m + 12 * k, rc_geom_view(cg, k)->P, sizeof(double) * 12);
	rc_geom_spec sp = { .type = RC_GEOM_MATRICES, .nviews = n, .matrices = m, .det = *rc_geom_detector(cg) };
	sp.det.offset_u = sp.det.offset_v = 0;
	int rc = rc_geom_new(&sp, rc_geom_volume(cg), NULL, g, err);
	free(m);
	return rc;
}

/* Matrices have no offset to weigh by: a displaced detector written as
 * matrices (RTK's per-view ProjectionOffsetX) is refused by FDK, naming
 * the matrices; the same views centred are not. */
static void test_displaced_matrices(void **state)
{
	(void)state;
	rc_err err;
	rc_geom *cg, *g;
	int dir;
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_FULL, 8, DU, DU, 0.04 * NU_FULL * DU, 8, 360, &cg, &err), 0);
	assert_int_equal(as_matrices(cg, &g, &err), 0);
	assert_int_equal(rc_fdk_displaced(g, RC_SCAN_FULL, &dir, NULL, &err), 0);
	rc_geom_free(g);
	rc_geom_free(cg);
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_HALF, 8, DU, DU, OFF_HALF, 8, 360, &cg, &err), 0);
	assert_int_equal(as_matrices(cg, &g, &err), 0);
	assert_int_equal(rc_fdk_displaced(g, RC_SCAN_FULL, &dir, NULL, &err), RC_EUNSUPPORTED);
	assert_string_equal(err.field, "geometry.matrices");
	rc_geom_free(g);
	rc_geom_free(cg);
}

static void test_displaced_fdk(void **state)
{
	(void)state;
	rc_err err;
	rc_geom *gc, *gd, *gm;
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_FULL, NU_FULL, DU, DU, 0.0, NVIEWS, 360, &gc, &err), 0);
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_HALF, NU_FULL, DU, DU, OFF_HALF, NVIEWS, 360, &gd, &err), 0);
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_HALF, NU_FULL, DU, DU, -OFF_HALF, NVIEWS, 360, &gm, &err), 0);
	struct data dc, dd, dm;
	data_new(gc, &dc);
	data_new(gd, &dd);
	data_new(gm, &dm);
	float *vol = malloc(dc.nvox * sizeof(float));
	double ec = fdk_error(gc, &dc, vol), ed = fdk_error(gd, &dd, vol), em = fdk_error(gm, &dm, vol);
	/* what the side seen twice would get without the weight: the
	 * detector's data, each ray counted as if its conjugate were there */
	rc_algo_params p;
	rc_algo_params_default(&p, RC_ALGO_SIRT);
	p.iterations = 30;
	double es = recon(gd, &dd, &p, vol);
	printf("FDK rel. error: centred %.4f, displaced +e_u %.4f, -e_u %.4f; SIRT 30 on displaced %.4f\n", ec, ed,
	       em, es);
	assert_true(ed < 1.05 * ec);
	assert_true(em < 1.05 * ec);
	assert_true(es < 0.5);
	free(vol);
	data_free(&dc);
	data_free(&dd);
	data_free(&dm);
	rc_geom_free(gc);
	rc_geom_free(gd);
	rc_geom_free(gm);
}

/* The same on a fan (one row per slice): FBP weighs it alike. */
static void test_displaced_fan(void **state)
{
	(void)state;
	rc_err err;
	double ang[NVIEWS];
	for (int k = 0; k < NVIEWS; k++)
		ang[k] = 360.0 * k / NVIEWS;
	rc_geom *g[2];
	for (int i = 0; i < 2; i++) {
		rc_geom_spec sp = { .type = RC_GEOM_FAN, .nviews = NVIEWS, .angles_deg = ang, .source_isocenter_mm = D_MM,
				    .source_detector_mm = S_MM };
		sp.det = (rc_detector_desc){ .nu = i ? NU_HALF : NU_FULL, .nv = 1, .du = DU, .offset_u = i ? -OFF_HALF : 0 };
		rc_volume_desc v = { N, N, 4, 1, 1, 1, 0, 0, 0 };
		assert_int_equal(rc_geom_new(&sp, &v, NULL, &g[i], &err), 0);
	}
	int dir;
	assert_int_equal(rc_fdk_displaced(g[1], RC_SCAN_FULL, &dir, NULL, &err), 0);
	assert_int_equal(dir, -1);
	struct data d[2];
	double e[2];
	for (int i = 0; i < 2; i++) {
		data_new(g[i], &d[i]);
		float *vol = malloc(d[i].nvox * sizeof(float));
		e[i] = fdk_error(g[i], &d[i], vol);
		free(vol);
	}
	printf("fan FBP rel. error: centred %.4f, displaced -e_u %.4f\n", e[0], e[1]);
	assert_true(e[1] < 1.05 * e[0]);
	for (int i = 0; i < 2; i++) {
		data_free(&d[i]);
		rc_geom_free(g[i]);
	}
}

/* Streaming FDK hands the views over in batches of 7, in reverse order. */
struct feed {
	int next, n;
};

static int feed_views(void *ud, double wait_s, int *list, int max, rc_err *err)
{
	(void)wait_s;
	(void)err;
	struct feed *f = ud;
	int got = 0;
	while (got < 7 && got < max && f->next < f->n)
		list[got++] = f->n - 1 - f->next++;
	return got;
}

/* A displaced detector's FDK streamed view by view equals the batch run
 * (the widened detector's views are filled as they arrive). */
static void test_displaced_stream(void **state)
{
	(void)state;
	rc_err err;
	rc_geom *g;
	assert_int_equal(cone(RC_DETECTOR_FLAT, NU_HALF, NU_FULL, DU, DU, OFF_HALF, 60, 360, &g, &err), 0);
	struct data d;
	data_new(g, &d);
	float *a = malloc(d.nvox * sizeof(float)), *b = malloc(d.nvox * sizeof(float));
	double ea = fdk_error(g, &d, a);
	rc_engine *e;
	rc_exec *x;
	assert_int_equal(rc_engine_cpu_new(g, 0, &e, &err), 0);
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	rc_algo_params p;
	rc_algo_params_default(&p, RC_ALGO_FDK);
	struct feed f = { 0, 60 };
	rc_algo_hooks h = { .views = feed_views, .ud = &f };
	assert_int_equal(rc_algo_run(&p, x, d.proj, b, &h, &err), 0);
	rc_exec_free(x);
	rc_engine_free(e);
	double worst = 0, peak = 0;
	for (size_t i = 0; i < d.nvox; i++) {
		worst = fmax(worst, fabs(a[i] - b[i]));
		peak = fmax(peak, fabs(a[i]));
	}
	printf("displaced FDK streamed vs batch: max diff %.1e of %.3g (error %.4f)\n", worst, peak, ea);
	assert_true(worst <= 1e-5 * peak);
	free(a);
	free(b);
	data_free(&d);
	rc_geom_free(g);
}

/* The docs' cylinder, in double: pixel (i, j) of view at angle t. */
static void cyl_pixel(double t, int nu, int nv, double du, double dv, double off_u, double i, double j, double p[3])
{
	double gam = ((i - (nu - 1) / 2.0) * du + off_u) / S_MM;
	double n[2] = { -cos(t), -sin(t) }, eu[2] = { -sin(t), cos(t) }, s[2] = { D_MM * cos(t), D_MM * sin(t) };
	p[0] = s[0] + S_MM * (cos(gam) * n[0] + sin(gam) * eu[0]);
	p[1] = s[1] + S_MM * (cos(gam) * n[1] + sin(gam) * eu[1]);
	p[2] = (j - (nv - 1) / 2.0) * dv;
}

static void test_cyl_geometry(void **state)
{
	(void)state;
	rc_err err;
	rc_geom *g;
	const int nu = 50, nv = 30, nviews = 7;
	const double du = 2.0, dv = 1.5, off = 3.3;
	assert_int_equal(cone(RC_DETECTOR_CURVED, nu, nv, du, dv, off, nviews, 360, &g, &err), 0);
	double worst_pos = 0, worst_dir = 0, worst_uv = 0;
	for (int k = 0; k < nviews; k++) {
		double t = 360.0 * k / nviews * M_PI / 180;
		for (int j = 0; j < nv; j += 7)
			for (int i = 0; i < nu; i += 3) {
				double want[3], got[3], o[3], dir[3];
				cyl_pixel(t, nu, nv, du, dv, off, i, j, want);
				assert_int_equal(rc_geom_pixel_pos(g, k, i, j, got), 0);
				rc_geom_ray(g, k, i, j, 0, o, dir);
				double len = 0;
				for (int a = 0; a < 3; a++) {
					worst_pos = fmax(worst_pos, fabs(got[a] - want[a]));
					len += (want[a] - o[a]) * (want[a] - o[a]);
				}
				len = sqrt(len);
				for (int a = 0; a < 3; a++)
					worst_dir = fmax(worst_dir, fabs(dir[a] - (want[a] - o[a]) / len));
				/* every point of the ray projects to (i, j) */
				double X[3], u, v, L;
				for (int a = 0; a < 3; a++)
					X[a] = o[a] + 0.6 * len * dir[a];
				rc_geom_cyl_project(g, k, X, &u, &v, &L);
				worst_uv = fmax(worst_uv, fmax(fabs(u - i), fabs(v - j)));
				assert_true(fabs(L - 0.6 * len * hypot(dir[0], dir[1])) < 1e-9);
			}
	}
	printf("cylinder: pixel centres off by %.1e mm, rays by %.1e, projections by %.1e pixel\n", worst_pos,
	       worst_dir, worst_uv);
	assert_true(worst_pos < 1e-9 && worst_dir < 1e-12 && worst_uv < 1e-9);
	rc_geom_free(g);

	/* the ball's chord through every pixel: 2 sqrt(r^2 - (D sin a)^2) mu,
	 * a the ray's angle to the central ray (cos a = S cos g / |(S, v)|) */
	const double c[3] = { 0, 0, 0 }, r = 12, mu = 0.02;
	rc_phantom *ph;
	assert_int_equal(rc_phantom_ball(c, r, mu, &ph, &err), 0);
	rc_geom *gf;
	assert_int_equal(cone(RC_DETECTOR_CURVED, nu, nv, du, dv, off, nviews, 360, &g, &err), 0);
	assert_int_equal(cone(RC_DETECTOR_FLAT, nu, nv, du, dv, off, nviews, 360, &gf, &err), 0);
	size_t np = rc_geom_proj_count(g);
	float *pc = malloc(np * sizeof(float)), *pf = malloc(np * sizeof(float));
	assert_int_equal(rc_phantom_project(ph, g, 0, pc, &err), 0);
	assert_int_equal(rc_phantom_project(ph, gf, 0, pf, &err), 0);
	double worst = 0, flat_off = 0;
	int hit = 0;
	for (int k = 0; k < nviews; k++)
		for (int j = 0; j < nv; j++)
			for (int i = 0; i < nu; i++) {
				double gam = ((i - (nu - 1) / 2.0) * du + off) / S_MM, vm = (j - (nv - 1) / 2.0) * dv;
				double ca = S_MM * cos(gam) / hypot(S_MM, vm), d = D_MM * sqrt(fmax(0, 1 - ca * ca));
				double want = d < r ? 2 * sqrt(r * r - d * d) * mu : 0;
				size_t at = rc_geom_row_offset(g, k, j) + (size_t)i;
				hit += want > 0;
				worst = fmax(worst, fabs(pc[at] - want));
				flat_off = fmax(flat_off, fabs(pf[at] - want));
			}
	printf("cylinder: %d pixels cross the ball; |projection - chord| at most %.1e (flat: %.3f)\n", hit, worst,
	       flat_off);
	assert_true(hit > nviews * 50);
	assert_true(worst < 1e-6);
	assert_true(flat_off > 1e-3);
	free(pc);
	free(pf);
	rc_phantom_free(ph);
	rc_geom_free(g);
	rc_geom_free(gf);
}

static unsigned lcg(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static void test_cyl_adjoint(void **state)
{
	(void)state;
	rc_err err;
	rc_geom *g;
	assert_int_equal(cone(RC_DETECTOR_CURVED, NU_FULL, NU_FULL, DU, DU, 2.1, 13, 360, &g, &err), 0);
	rc_engine *e;
	assert_int_equal(rc_engine_cpu_new(g, 0, &e, &err), 0);
	assert_false(e->splat);
	size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(rc_geom_volume(g));
	float *x = malloc(nvox * sizeof(float)), *y = malloc(np * sizeof(float));
	float *ax = malloc(np * sizeof(float)), *aty = malloc(nvox * sizeof(float));
	unsigned s = 7;
	for (size_t i = 0; i < nvox; i++)
		x[i] = (float)(lcg(&s) % 1000) / 1000.0f;
	for (size_t i = 0; i < np; i++)
		y[i] = (float)(lcg(&s) % 1000) / 1000.0f;
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, x, ax, 0, 13, &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, y, aty, 0, 13, &err), 0);
	double l = 0, r = 0;
	for (size_t i = 0; i < np; i++)
		l += (double)ax[i] * y[i];
	for (size_t i = 0; i < nvox; i++)
		r += (double)x[i] * aty[i];
	printf("cylinder adjoint: <Ax, y> %.9g, <x, A^T y> %.9g, rel. gap %.1e\n", l, r, fabs(l - r) / fabs(l));
	assert_true(l > 0 && fabs(l - r) <= 1e-5 * fabs(l));
	/* rotation and splatting assume a flat detector: refused */
	assert_int_equal(rc_engine_forward(e, RC_FP_ROTATE, x, ax, 0, 13, &err), RC_EUNSUPPORTED);
	assert_int_equal(rc_engine_forward(e, RC_FP_SPLAT, x, ax, 0, 13, &err), RC_EUNSUPPORTED);
	free(x);
	free(y);
	free(ax);
	free(aty);
	rc_engine_free(e);
	rc_geom_free(g);
}

/* The engine's cylinder back projection (rc_bp_voxel's tiles, float, on
 * every ISA the CPU has) against proj_cyl.c's plain one in double, on
 * random views, both detector offsets and a call starting mid-stack
 * (views over two blocks of RC_BPV_BLOCK and a part). */
static void test_cyl_voxel_isas(void **state)
{
	(void)state;
	rc_err err;
	rc_geom *g;
	const int nviews = 75, first = 3;
	double *ang = malloc(sizeof(double) * nviews);
	assert_non_null(ang);
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews;
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = nviews, .angles_deg = ang, .source_isocenter_mm = D_mm,
			    .source_detector_mm = S_mm };
	sp.det = (rc_detector_desc){ .nu = NU_FULL, .nv = NU_FULL - 7, .du = DU, .dv = 1.3 * DU, .offset_u = 2.1,
				     .offset_v = -3.4, .shape = RC_DETECTOR_CURVED };
	rc_volume_desc v = { N, N + 3, N - 5, 1, 1.1, 0.9, 0.7, -0.4, 1.3 };
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), 0);
	free(ang);
	rc_pool *pool;
	assert_int_equal(rc_pool_new(2, &pool, &err), 0);
	size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(rc_geom_volume(g));
	float *p = malloc(np * sizeof(float)), *ref = malloc(nvox * sizeof(float)), *got = malloc(nvox * sizeof(float));
	assert_non_null(p);
	assert_non_null(ref);
	assert_non_null(got);
	unsigned s = 11;
	for (size_t i = 0; i < np; i++)
		p[i] = (float)(lcg(&s) % 1000) / 1000.0f;
	assert_int_equal(rc_bp_cyl(g, pool, p, ref, first, nviews, &err), 0);
	double peak = 0;
	for (size_t i = 0; i < nvox; i++)
		peak = fabs(ref[i]) > peak ? fabs(ref[i]) : peak;
	assert_true(peak > 0);
	for (int isa = 0; isa < RC_ISA_COUNT; isa++) {
		if (!rc_cpu_isa_supported((rc_cpu_isa)isa))
			continue;
		rc_bpv *b;
		assert_int_equal(rc_bpv_new(g, 2, &b, &err), 0);
		rc_bp_voxel(b, pool, (rc_cpu_isa)isa, p, got, first, nviews, 0);
		double worst = 0;
		for (size_t i = 0; i < nvox; i++)
			worst = fabs(got[i] - ref[i]) > worst ? fabs(got[i] - ref[i]) : worst;
		printf("cylinder back projection, %s tiles vs plain double: max diff %.1e of %.3g\n",
		       rc_cpu_isa_name((rc_cpu_isa)isa), worst, peak);
		assert_true(worst <= 2e-5 * peak);
		rc_bpv_free(b);
	}
	free(p);
	free(ref);
	free(got);
	rc_pool_free(pool);
	rc_geom_free(g);
}

static void test_cyl_recon(void **state)
{
	(void)state;
	rc_err err;
	/* a wide fan (+-27 degrees on a 4N mm cylinder) where the shape matters */
	rc_geom *gc, *gf;
	D_mm = 2.0 * N;
	S_mm = 4.0 * N;
	const int nu = (int)(2.4 * N / DU), nv = (int)(2.2 * N / DU);
	assert_int_equal(cone(RC_DETECTOR_CURVED, nu, nv, DU, DU, 0.0, NVIEWS, 360, &gc, &err), 0);
	assert_int_equal(cone(RC_DETECTOR_FLAT, nu, nv, DU, DU, 0.0, NVIEWS, 360, &gf, &err), 0);
	D_mm = D_MM;
	S_mm = S_MM;
	struct data dc, df;
	data_new(gc, &dc);
	data_new(gf, &df);
	float *vol = malloc(dc.nvox * sizeof(float)), *p = malloc(dc.np * sizeof(float));
	/* the forward projection of the truth against the analytic data */
	/* (against analytic data, the voxelised truth's own error dominates:
	 * the flat detector's forward projection, against the flat data, is
	 * the yardstick) */
	float *pf = malloc(dc.np * sizeof(float));
	rc_engine *e, *ef_;
	assert_int_equal(rc_engine_cpu_new(gc, 0, &e, &err), 0);
	assert_int_equal(rc_engine_cpu_new(gf, 0, &ef_, &err), 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, dc.ref, p, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_forward(ef_, RC_FP_RAYCAST, df.ref, pf, 0, NVIEWS, &err), 0);
	rc_engine_free(e);
	rc_engine_free(ef_);
	double num = 0, den = 0, numf = 0, denf = 0;
	for (size_t i = 0; i < dc.np; i++) {
		num += (p[i] - dc.proj[i]) * (double)(p[i] - dc.proj[i]);
		numf += (pf[i] - df.proj[i]) * (double)(pf[i] - df.proj[i]);
		den += (double)dc.proj[i] * dc.proj[i];
		denf += (double)df.proj[i] * df.proj[i];
	}
	double fe = sqrt(num / den), fef = sqrt(numf / denf);
	free(pf);
	double ec = fdk_error(gc, &dc, vol), ef = fdk_error(gf, &df, vol);
	/* the curved data through the flat geometry: the mapping matters */
	double ex = fdk_error(gf, &dc, vol);
	rc_algo_params pc;
	rc_algo_params_default(&pc, RC_ALGO_CGLS);
	pc.iterations = 12;
	double eg = recon(gc, &dc, &pc, vol);
	rc_algo_params_default(&pc, RC_ALGO_SART);
	pc.iterations = 3;
	double esart = recon(gc, &dc, &pc, vol);
	printf("cylinder: forward vs analytic %.4f (flat: %.4f); FDK rel. error %.4f (flat %.4f, curved "
	       "data read as flat %.4f); CGLS 12 %.4f, SART 3 %.4f\n",
	       fe, fef, ec, ef, ex, eg, esart);
	assert_true(fe < 1.1 * fef);
	assert_true(ec < 1.1 * ef + 0.01);
	assert_true(ex > 1.1 * ec); /* 1.56 at N = 40, 1.12 at the sanitizers' 24 */
	assert_true(eg < 0.4 && esart < 0.4);
	free(vol);
	free(p);
	data_free(&dc);
	data_free(&df);
	rc_geom_free(gc);
	rc_geom_free(gf);
}

static void test_cyl_refusals(void **state)
{
	(void)state;
	rc_err err;
	rc_recon_spec s;
	rc_recon_spec_default(&s);
	s.geom.type = RC_GEOM_CONE;
	s.geom.det.shape = RC_DETECTOR_CURVED;
	s.vol = (rc_volume_desc){ N, N, N, 1, 1, 1, 0, 0, 0 };
	s.engine = RC_ENGINE_CPU;
	assert_int_equal(rc_recon_check(&s, &err), 0);
	s.engine = RC_ENGINE_AUTO;
	assert_int_equal(rc_recon_check(&s, &err), 0);
	static const rc_engine_choice others[] = { RC_ENGINE_OPENCL, RC_ENGINE_TRIGENEOUS };
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		s.engine = others[i];
		assert_int_equal(rc_recon_check(&s, &err), RC_EUNSUPPORTED);
		assert_string_equal(err.field, "execution.engine");
		assert_non_null(strstr(err.msg, "curved"));
	}
	s.engine = RC_ENGINE_AUTO;
	s.algo.projector = RC_PROJECTOR_SPLAT;
	assert_int_equal(rc_recon_check(&s, &err), RC_EUNSUPPORTED);
	assert_string_equal(err.field, "algorithm.projector");
	/* matrices and parallel stay flat */
	rc_geom *g;
	double ang[2] = { 0, 90 };
	rc_geom_spec sp = { .type = RC_GEOM_PARALLEL, .nviews = 2, .angles_deg = ang };
	sp.det = (rc_detector_desc){ .nu = 40, .nv = 1, .du = 1, .dv = 1, .shape = RC_DETECTOR_CURVED };
	rc_volume_desc v = { 8, 8, 1, 1, 1, 1, 0, 0, 0 };
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector.shape");
	/* a cylinder beyond 80 degrees of fan angle is refused, as the arc */
	assert_int_equal(cone(RC_DETECTOR_CURVED, 400, 8, 5, 1, 0, 8, 360, &g, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_displaced_decision), cmocka_unit_test(test_displaced_matrices),
		cmocka_unit_test(test_displaced_fdk),
		cmocka_unit_test(test_displaced_stream),   cmocka_unit_test(test_displaced_fan),
		cmocka_unit_test(test_cyl_geometry),	   cmocka_unit_test(test_cyl_adjoint),
		cmocka_unit_test(test_cyl_voxel_isas),
		cmocka_unit_test(test_cyl_recon),	   cmocka_unit_test(test_cyl_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
