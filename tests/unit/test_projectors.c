/*
 * CPU projectors (core/proj_*.c) through the CPU engine, each against a
 * reference that does not share its code:
 *  - RAYCAST of a voxelised ball against the closed-form chord 2 sqrt(r^2 -
 *    d^2) mu, rays built here from API.md (cone) or from the test's own
 *    tilted matrices (matrices); and against the analytic Shepp-Logan line
 *    integrals of core/phantom.h;
 *  - <A x, y> = <x, A^T y> for RAYCAST / MATCHED with random x, y;
 *  - VOXEL against a double-precision per-voxel loop written here (project
 *    with P, bilinear with zero outside, 1/w^2), on an odd-sized, offset,
 *    anisotropic volume, for the cone fast path and the general-matrix path,
 *    for every ISA path this CPU has and for view sub-ranges;
 *  - ROTATE against RAYCAST; view-range splits and 1 vs 3 threads.
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

#include "backend/cpu/engine_cpu.h"
#include "projectors/proj_cpu.h"
#include "geometry/phantom.h"

#define PROJ_TESTUTIL_SEED 88172645463325252ull
#include "proj_testutil.h"

#define NV 12 /* views */

/* the CPU engine's paths, rc_engine_cpu_set_isa names */
static const char *const isas[3] = { "baseline", "avx2", "avx512" };

/* --- geometries ------------------------------------------------------------ */

static const rc_volume_desc VOL_BALL = { 40, 40, 36, 0.8, 0.8, 0.8, 0, 0, 0 };
/* odd sizes spanning two back-projection tiles per axis, offsets,
 * anisotropic voxels */
static const rc_volume_desc VOL_ODD = { 37, 34, 33, 1.1, 0.9, 1.3, 1.3, -0.7, 0.9 };

static const double D = 150, S = 300;
static const rc_detector_desc DET = { 52, 44, 1.5, 1.5, 1.2, -0.9, RC_DETECTOR_FLAT };
static const double TILT_DEG = 12; /* matrices: gantry tilted about x */

static void angles(double *a, int n, double start)
{
	for (int k = 0; k < n; k++)
		a[k] = start + 360.0 * k / n;
}

/* Source, detector centre and axes of view k as API.md writes them, then
 * rotated by `tilt` about the x axis (0 for the plain cone). */
struct frame {
	double s[3], d[3], eu[3], ev[3], n[3];
};

static void rotx(double *v, double t)
{
	double y = v[1], z = v[2];
	v[1] = cos(t) * y - sin(t) * z;
	v[2] = sin(t) * y + cos(t) * z;
}

static void frame_of(double ang_deg, double tilt_deg, struct frame *f)
{
	double t = ang_deg * M_PI / 180, c = cos(t), s = sin(t);
	double sv[3] = { D * c, D * s, 0 }, dv[3] = { -(S - D) * c, -(S - D) * s, 0 };
	double eu[3] = { -s, c, 0 }, ev[3] = { 0, 0, 1 }, n[3] = { -c, -s, 0 };
	memcpy(f->s, sv, sizeof sv);
	memcpy(f->d, dv, sizeof dv);
	memcpy(f->eu, eu, sizeof eu);
	memcpy(f->ev, ev, sizeof ev);
	memcpy(f->n, n, sizeof n);
	double tt = tilt_deg * M_PI / 180;
	rotx(f->s, tt);
	rotx(f->d, tt);
	rotx(f->eu, tt);
	rotx(f->ev, tt);
	rotx(f->n, tt);
}

static void pixel_centre(const struct frame *f, int i, int j, double *p)
{
	double um = (i - (DET.nu - 1) / 2.0) * DET.du + DET.offset_u;
	double vm = (j - (DET.nv - 1) / 2.0) * DET.dv + DET.offset_v;
	for (int a = 0; a < 3; a++)
		p[a] = f->d[a] + um * f->eu[a] + vm * f->ev[a];
}

/* The 3x4 matrix of a (tilted) frame, built here from the pinhole model. */
static void matrix_of(const struct frame *f, double *P)
{
	double cu = (DET.nu - 1) / 2.0 - DET.offset_u / DET.du, cv = (DET.nv - 1) / 2.0 - DET.offset_v / DET.dv;
	for (int a = 0; a < 3; a++) {
		P[a] = S / DET.du * f->eu[a] + cu * f->n[a];
		P[4 + a] = S / DET.dv * f->ev[a] + cv * f->n[a];
		P[8 + a] = f->n[a];
	}
	for (int r = 0; r < 3; r++)
		P[4 * r + 3] = -(P[4 * r] * f->s[0] + P[4 * r + 1] * f->s[1] + P[4 * r + 2] * f->s[2]);
}

static rc_geom *make_geom_full(rc_geom_type type, const rc_volume_desc *vol, int nviews, const rc_detector_desc *det,
			       double tilt_deg)
{
	double ang[64], mats[64 * 12];
	angles(ang, nviews, 7);
	rc_geom_spec sp = { .type = type, .nviews = nviews, .det = *det, .source_isocenter_mm = D,
			    .source_detector_mm = S, .angles_deg = ang, .matrices = mats };
	for (int k = 0; k < nviews; k++) {
		struct frame f;
		frame_of(ang[k], tilt_deg, &f);
		matrix_of(&f, mats + 12 * k);
	}
	rc_geom *g = NULL;
	rc_err err;
	int rc = rc_geom_new(&sp, vol, NULL, &g, &err);
	if (rc)
		fail_msg("geometry: %s", err.msg);
	return g;
}

static rc_geom *make_geom(rc_geom_type type, const rc_volume_desc *vol, int nviews)
{
	return make_geom_full(type, vol, nviews, &DET, TILT_DEG);
}


/* --- ball: closed-form chords ---------------------------------------------- */

static const double BALL_C[3] = { 2.0, -3.0, 1.5 }, BALL_R = 9.0, BALL_MU = 0.02;

/* Mean density over each voxel from 6^3 sub-samples. */
static void voxelize_ball(const rc_volume_desc *v, float *vol)
{
	const int ss = 6;
	for (int z = 0; z < v->nz; z++)
		for (int y = 0; y < v->ny; y++)
			for (int x = 0; x < v->nx; x++) {
				int in = 0;
				for (int c = 0; c < ss * ss * ss; c++) {
					double p[3];
					rc_volume_voxel_pos(v, x + ((c % ss) + 0.5) / ss - 0.5,
							    y + ((c / ss % ss) + 0.5) / ss - 0.5,
							    z + ((c / ss / ss) + 0.5) / ss - 0.5, p);
					double r2 = 0;
					for (int a = 0; a < 3; a++)
						r2 += (p[a] - BALL_C[a]) * (p[a] - BALL_C[a]);
					in += r2 <= BALL_R * BALL_R;
				}
				vol[((size_t)z * v->ny + y) * v->nx + x] = (float)(BALL_MU * in / (ss * ss * ss));
			}
}

/* Chord through the ball of the line a -> b, times mu; *dist gets the
 * distance of the line from the centre. */
static double chord(const double *a, const double *b, double *dist)
{
	double d[3], w[3], dd = 0, wd = 0, ww = 0;
	for (int i = 0; i < 3; i++) {
		d[i] = b[i] - a[i];
		w[i] = BALL_C[i] - a[i];
		dd += d[i] * d[i];
		wd += w[i] * d[i];
		ww += w[i] * w[i];
	}
	double dist2 = ww - wd * wd / dd;
	*dist = sqrt(fmax(dist2, 0));
	return dist2 < BALL_R * BALL_R ? 2 * sqrt(BALL_R * BALL_R - dist2) * BALL_MU : 0;
}

/* Voxelising the ball and sampling it trilinearly blurs its surface over
 * about one voxel, which no projector can undo, so the check is in two
 * parts: rays within r/2 of the centre (which cross the surface at most 30
 * degrees off its normal) must match the chord within
 * interior_bound (relative, per ray), and all rays together within
 * l2_bound (relative L2, dominated by the blurred rim).  The blur also
 * lowers central chords by about sigma^2 / r^2 (0.2 % here), and their mean
 * relative error must stay under 0.5 %: a wrong step length or ray would
 * show as a bias.  Bounds are about 1.4 times what these sizes reach. */
static void ball_case(rc_geom_type type, rc_fp_kind kind, double interior_bound, double l2_bound)
{
	rc_geom *g = make_geom(type, &VOL_BALL, NV);
	rc_engine *e = make_engine(g, 0);
	float *vol = falloc(rc_volume_count(&VOL_BALL)), *proj = falloc(rc_geom_proj_count(g));
	voxelize_ball(&VOL_BALL, vol);
	rc_err err;
	assert_int_equal(rc_engine_forward(e, kind, vol, proj, 0, NV, &err), 0);
	double ang[NV], num = 0, den = 0, maxin = 0, bias = 0;
	int nin = 0;
	angles(ang, NV, 7);
	for (int k = 0; k < NV; k++) {
		struct frame f;
		frame_of(ang[k], type == RC_GEOM_MATRICES ? TILT_DEG : 0, &f);
		for (int j = 0; j < DET.nv; j++)
			for (int i = 0; i < DET.nu; i++) {
				double p[3], dist;
				pixel_centre(&f, i, j, p);
				double ref = chord(f.s, p, &dist), got = proj[((size_t)k * DET.nv + j) * DET.nu + i];
				num += (got - ref) * (got - ref);
				den += ref * ref;
				if (dist < BALL_R / 2) {
					maxin = fmax(maxin, fabs(got - ref) / ref);
					bias += (got - ref) / ref;
					nin++;
				}
			}
	}
	double rel = sqrt(num / den);
	bias /= nin > 0 ? nin : 1;
	print_message("ball %s %s: interior rays (%d) max relative error %.4g (bound %.3g), mean %.3g (bound 5e-3), "
		      "all rays relative L2 %.4g (bound %.3g)\n",
		      type == RC_GEOM_CONE ? "cone" : "matrices", kind == RC_FP_RAYCAST ? "raycast" : "rotate",
		      nin, maxin, interior_bound, bias, rel, l2_bound);
	assert_true(nin > 100);
	assert_true(maxin < interior_bound);
	assert_true(fabs(bias) < 5e-3);
	assert_true(rel < l2_bound);
	free(vol);
	free(proj);
	rc_engine_free(e);
	rc_geom_free(g);
}

static void test_ball_cone_raycast(void **s) { (void)s; ball_case(RC_GEOM_CONE, RC_FP_RAYCAST, 0.015, 0.05); }
static void test_ball_matrices_raycast(void **s) { (void)s; ball_case(RC_GEOM_MATRICES, RC_FP_RAYCAST, 0.015, 0.05); }
static void test_ball_cone_rotate(void **s) { (void)s; ball_case(RC_GEOM_CONE, RC_FP_ROTATE, 0.017, 0.06); }

/* --- Shepp-Logan: analytic line integrals ------------------------------------ */

/* The voxelised Shepp-Logan differs from the analytic one mostly at the
 * thin skull (0.4 mm for a 30 mm field), so the projection error is first
 * order in the voxel size: it must be under a bound at each size and halve
 * (ratio < 0.6) when the voxels halve.  A wrong geometry, step length or
 * interpolation leaves an error that does not shrink. */
static double shepp_logan_error(int n, double vs, rc_fp_kind kind)
{
	rc_volume_desc v = { n, n, n, vs, vs, vs, 0, 0, 0 };
	rc_geom *g = make_geom(RC_GEOM_CONE, &v, 6);
	rc_engine *e = make_engine(g, 0);
	rc_phantom *ph = NULL;
	rc_err err;
	assert_int_equal(rc_phantom_shepp_logan(30.0, &ph, &err), 0);
	size_t np = rc_geom_proj_count(g);
	float *vol = falloc(rc_volume_count(&v)), *proj = falloc(np), *ref = falloc(np);
	assert_int_equal(rc_phantom_voxelize(ph, &v, 4, 0, vol, &err), 0);
	assert_int_equal(rc_phantom_project(ph, g, 0, ref, &err), 0);
	assert_int_equal(rc_engine_forward(e, kind, vol, proj, 0, 6, &err), 0);
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
#if defined(__SANITIZE_ADDRESS__)
	const int n = 32; /* sanitizers: smaller, same field of view */
#else
	const int n = 48;
#endif
	/* measured at 48^3 / 96^3: raycast 0.112 / 0.056, rotate 0.126 / 0.066 */
	const double bc[2] = { 0.12, 0.135 }, bf[2] = { 0.06, 0.07 };
	for (int kind = 0; kind < 2; kind++) {
		double vs = 32.0 / n, scale = 48.0 / n;
		double coarse = shepp_logan_error(n, vs, (rc_fp_kind)kind);
		double fine = shepp_logan_error(2 * n, vs / 2, (rc_fp_kind)kind);
		print_message("Shepp-Logan %s vs analytic: %d^3 relative L2 %.4g (bound %.3g), %d^3 %.4g (bound %.3g), "
			      "ratio %.3f (bound 0.6)\n", kind == 0 ? "raycast" : "rotate", n, coarse, bc[kind] * scale,
			      2 * n, fine, bf[kind] * scale, fine / coarse);
		assert_true(coarse < bc[kind] * scale);
		assert_true(fine < bf[kind] * scale);
		assert_true(fine / coarse < 0.6);
	}
}

/* --- uniform volume: rays through the border ------------------------------ */

/* A volume of ones: the trilinear interpolant (zero outside) is a product of
 * 1-D tents, so its line integral along any ray is computed here by a fine
 * midpoint quadrature (0.01 mm) in double.  Rays that cross the border
 * voxels and leave through the support's edge are exactly where the samples
 * nearest the edge matter (a wrong floor there once cost a quarter sample). */
static double tent_sum(double p, int n)
{
	double f = floor(p), d = p - f;
	int i = (int)f;
	return (1 - d) * (i >= 0 && i < n) + d * (i + 1 >= 0 && i + 1 < n);
}

static void test_uniform_border(void **s)
{
	(void)s;
	rc_geom *g = make_geom(RC_GEOM_CONE, &VOL_ODD, NV);
	rc_engine *e = make_engine(g, 0);
	size_t nvox = rc_volume_count(&VOL_ODD), np = rc_geom_proj_count(g);
	float *vol = falloc(nvox), *proj = falloc(np);
	for (size_t i = 0; i < nvox; i++)
		vol[i] = 1.0f;
	rc_err err;
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, vol, proj, 0, NV, &err), 0);
	double x0[3], sp[3] = { VOL_ODD.vx, VOL_ODD.vy, VOL_ODD.vz };
	int n[3] = { VOL_ODD.nx, VOL_ODD.ny, VOL_ODD.nz };
	rc_volume_voxel_pos(&VOL_ODD, 0, 0, 0, x0);
	double ang[NV], worst = 0;
	angles(ang, NV, 7);
	int checked = 0;
	for (int k = 0; k < NV; k += 3)
		for (int j = 0; j < DET.nv; j += 7)
			for (int i = 0; i < DET.nu; i += 5) {
				struct frame f;
				double p[3], d[3], len = 0;
				frame_of(ang[k], 0, &f);
				pixel_centre(&f, i, j, p);
				for (int a = 0; a < 3; a++) {
					d[a] = p[a] - f.s[a];
					len += d[a] * d[a];
				}
				len = sqrt(len);
				double sum = 0, dt = 0.01;
				for (double t = 0.5 * dt; t < len; t += dt) {
					double v = 1;
					for (int a = 0; a < 3 && v > 0; a++)
						v *= tent_sum((f.s[a] + t * d[a] / len - x0[a]) / sp[a], n[a]);
					sum += v * dt;
				}
				double got = proj[((size_t)k * DET.nv + j) * DET.nu + i];
				worst = fmax(worst, fabs(got - sum));
				checked += sum > 0;
			}
	/* the midpoint rule on the tents' kinks and the last partial step: a
	 * small fraction of a step (measured 0.09 step; the wrong floor of the
	 * last sample gave 0.25 step) */
	double bound = 0.15 * 0.5 * fmin(VOL_ODD.vx, fmin(VOL_ODD.vy, VOL_ODD.vz)); /* 0.15 step */
	print_message("uniform volume, %d rays through it: max |raycast - quadrature| %.3g mm (bound %.3g)\n", checked,
		      worst, bound);
	assert_true(checked > 20);
	assert_true(worst < bound);
	free(vol);
	free(proj);
	rc_engine_free(e);
	rc_geom_free(g);
}

/* --- adjoint ------------------------------------------------------------------ */

/* The adjoint test, with both directions run on every ISA path this CPU
 * has: each must pass it, and all must give bit-identical projections and
 * back projections (the vectorised lanes compute the same positions and
 * weights as the scalar code, and the sums run in the same order). */
static void adjoint_case(rc_geom_type type)
{
	rc_geom *g = make_geom(type, &VOL_ODD, NV);
	rc_engine *e = make_engine(g, 0);
	size_t nvox = rc_volume_count(&VOL_ODD), np = rc_geom_proj_count(g);
	float *x = falloc(nvox), *ax = falloc(np), *ax0 = falloc(np), *y = falloc(np), *aty = falloc(nvox);
	for (size_t i = 0; i < nvox; i++)
		x[i] = (float)urand();
	for (size_t i = 0; i < np; i++)
		y[i] = (float)urand();
	float *aty0 = falloc(nvox);
	rc_err err;
	for (int k = 0; k < 3; k++) {
		if (rc_engine_cpu_set_isa(e, isas[k], &err))
			continue;
		assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, x, ax, 0, NV, &err), 0);
		assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, y, aty, 0, NV, &err), 0);
		double l = 0, r = 0;
		for (size_t i = 0; i < np; i++)
			l += (double)ax[i] * y[i];
		for (size_t i = 0; i < nvox; i++)
			r += (double)x[i] * aty[i];
		double gap = fabs(l - r) / fabs(l);
		print_message("adjoint %s, %s: <Ax,y> = %.9g, <x,A^T y> = %.9g, relative gap %.3g (bound 1e-5)\n",
			      type == RC_GEOM_CONE ? "cone" : "matrices", isas[k], l, r, gap);
		assert_true(l > 0);
		assert_true(gap < 1e-5);
		if (k == 0) {
			memcpy(ax0, ax, np * sizeof *ax);
			memcpy(aty0, aty, nvox * sizeof *aty);
		} else {
			assert_memory_equal(ax, ax0, np * sizeof *ax);
			assert_memory_equal(aty, aty0, nvox * sizeof *aty);
		}
	}
	free(x);
	free(ax);
	free(ax0);
	free(y);
	free(aty);
	free(aty0);
	rc_engine_free(e);
	rc_geom_free(g);
}

/* The forward ray caster without its zero-bordered copy (limit 0, as when
 * the copy is over its memory limit): the samples next to the volume's
 * edge take the checked path.  It must give the projections of the copy up
 * to float rounding (the edge samples' sums are formed in another order),
 * bit-identical on every ISA, and stay the transpose's adjoint. */
static void test_raycast_checked_path(void **s)
{
	(void)s;
	rc_geom *g = make_geom(RC_GEOM_MATRICES, &VOL_ODD, NV);
	size_t nvox = rc_volume_count(&VOL_ODD), np = rc_geom_proj_count(g);
	float *x = falloc(nvox), *pad = falloc(np), *chk = falloc(np), *chk0 = falloc(np);
	float *y = falloc(np), *aty = falloc(nvox);
	for (size_t i = 0; i < nvox; i++)
		x[i] = (float)urand();
	for (size_t i = 0; i < np; i++)
		y[i] = (float)urand();
	rc_err err;
	rc_engine *e = make_engine(g, 2);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, x, pad, 0, NV, &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, y, aty, 0, NV, &err), 0);
	rc_engine_free(e);
	setenv("RECOND_FPR_PAD_MAX_MB", "0", 1); /* read at the engine's first forward call */
	e = make_engine(g, 2);
	assert_int_equal(rc_engine_cpu_set_isa(e, isas[0], &err), 0);
	int rc = rc_engine_forward(e, RC_FP_RAYCAST, x, chk0, 0, NV, &err);
	unsetenv("RECOND_FPR_PAD_MAX_MB");
	assert_int_equal(rc, 0);
	double peak = 0, diff = 0;
	for (int k = 1; k < 3; k++) {
		if (rc_engine_cpu_set_isa(e, isas[k], &err))
			continue;
		assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, x, chk, 0, NV, &err), 0);
		assert_memory_equal(chk, chk0, np * sizeof *chk);
	}
	memcpy(chk, chk0, np * sizeof *chk);
	double l = 0, r = 0;
	for (size_t i = 0; i < np; i++) {
		peak = fmax(peak, fabs(pad[i]));
		diff = fmax(diff, fabs((double)chk[i] - pad[i]));
		l += (double)chk[i] * y[i];
	}
	for (size_t i = 0; i < nvox; i++)
		r += (double)x[i] * aty[i];
	print_message("ray casting, checked path vs zero-bordered copy: max difference %.3g of the peak (bound 5e-6); "
		      "adjoint gap %.3g (bound 1e-5)\n",
		      diff / peak, fabs(l - r) / fabs(l));
	assert_true(peak > 0 && diff > 0 && diff / peak < 5e-6);
	assert_true(fabs(l - r) / fabs(l) < 1e-5);
	rc_engine_free(e);
	free(x);
	free(pad);
	free(chk);
	free(chk0);
	free(y);
	free(aty);
	rc_geom_free(g);
}

static void test_adjoint_cone(void **s) { (void)s; adjoint_case(RC_GEOM_CONE); }
static void test_adjoint_matrices(void **s) { (void)s; adjoint_case(RC_GEOM_MATRICES); }

/* --- voxel back projection against a double reference ------------------------ */

static double pix(const float *img, const rc_detector_desc *d, int i, int j)
{
	return i < 0 || j < 0 || i >= d->nu || j >= d->nv ? 0.0 : img[(size_t)j * d->nu + i];
}

static void bp_reference(const rc_geom *g, const float *proj, int first, int last, double *out)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	size_t nvox = rc_volume_count(v);
	memset(out, 0, nvox * sizeof *out);
	for (int k = first; k < last; k++) {
		const double *P = rc_geom_view(g, k)->P;
		const float *img = proj + (size_t)k * d->nu * d->nv;
		for (int z = 0; z < v->nz; z++)
			for (int y = 0; y < v->ny; y++)
				for (int x = 0; x < v->nx; x++) {
					double X[3];
					rc_volume_voxel_pos(v, x, y, z, X);
					double h[3];
					for (int r = 0; r < 3; r++)
						h[r] = P[4 * r] * X[0] + P[4 * r + 1] * X[1] + P[4 * r + 2] * X[2] + P[4 * r + 3];
					if (h[2] <= 0)
						continue;
					double u = h[0] / h[2], vv = h[1] / h[2];
					int i0 = (int)floor(u), j0 = (int)floor(vv);
					double fu = u - i0, fv = vv - j0;
					double val = (1 - fv) * ((1 - fu) * pix(img, d, i0, j0) + fu * pix(img, d, i0 + 1, j0)) +
						     fv * ((1 - fu) * pix(img, d, i0, j0 + 1) + fu * pix(img, d, i0 + 1, j0 + 1));
					out[((size_t)z * v->ny + y) * v->nx + x] += val / (h[2] * h[2]);
				}
	}
}

/* max |got - ref| / max |ref| */
static double max_rel(const float *got, const double *ref, size_t n)
{
	double m = 0, e = 0;
	for (size_t i = 0; i < n; i++) {
		m = fmax(m, fabs(ref[i]));
		e = fmax(e, fabs(got[i] - ref[i]));
	}
	return m > 0 ? e / m : INFINITY;
}

/* Back projection of views [first, last) of proj on every ISA path this CPU
 * has, each against the double reference; the volume starts as NaN, so every
 * voxel must be written. */
static void bp_isas_check(const rc_geom *g, rc_engine *e, const float *proj, int first, int last, const char *what)
{
	size_t nvox = rc_volume_count(rc_geom_volume(g));
	float *vol = falloc(nvox);
	double *ref = calloc(nvox, sizeof *ref);
	assert_non_null(ref);
	bp_reference(g, proj, first, last, ref);
	rc_err err;
	int ran = 0;
	for (int i = 0; i < 3; i++) {
		if (rc_engine_cpu_set_isa(e, isas[i], &err)) {
			print_message("voxel BP: no %s path on this CPU (%s)\n", isas[i], err.msg);
			continue;
		}
		for (size_t q = 0; q < nvox; q++)
			vol[q] = NAN;
		assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, first, last, &err), 0);
		double ev = max_rel(vol, ref, nvox);
		print_message("voxel BP %s %s views [%d,%d): max error %.3g of the peak (bound 2e-5)\n", what, isas[i],
			      first, last, ev);
		assert_true(ev < 2e-5);
		ran++;
	}
	assert_true(ran >= 1);
	free(vol);
	free(ref);
}

/* bp_isas_check of random projections of g, all views. */
static void bp_isas_random(const rc_geom *g, int first, int last, const char *what)
{
	rc_engine *e = make_engine(g, 2);
	size_t np = rc_geom_proj_count(g);
	float *proj = falloc(np);
	for (size_t i = 0; i < np; i++)
		proj[i] = (float)urand();
	bp_isas_check(g, e, proj, first, last, what);
	free(proj);
	rc_engine_free(e);
}

static void voxel_case(rc_geom_type type)
{
	rc_geom *g = make_geom(type, &VOL_ODD, NV);
	/* the whole range and a sub-range that starts and ends mid-way */
	bp_isas_random(g, 0, NV, type == RC_GEOM_CONE ? "cone" : "matrices");
	bp_isas_random(g, 3, 10, type == RC_GEOM_CONE ? "cone" : "matrices");
	/* the tilted matrices must take the general path: P[2] != 0 */
	if (type == RC_GEOM_MATRICES)
		assert_true(fabs(rc_geom_view(g, 0)->P[2]) > 1e-3 || fabs(rc_geom_view(g, 0)->P[10]) > 1e-3);
	rc_geom_free(g);
}

static void test_voxel_cone(void **s) { (void)s; voxel_case(RC_GEOM_CONE); }

/* A detector whose sizes are multiples of neither 4 nor 32: the padded
 * images are built by 4 x 4 transposes in 32 x 32 blocks plus the leftover
 * rows and columns (proj_voxel.c pad_task). */
static void test_voxel_odd_detector(void **s)
{
	(void)s;
	const rc_detector_desc det = { 53, 47, 1.5, 1.5, 1.2, -0.9, RC_DETECTOR_FLAT };
	rc_geom *g = make_geom_full(RC_GEOM_CONE, &VOL_ODD, NV, &det, 0);
	bp_isas_random(g, 0, NV, "cone, 53 x 47 detector");
	rc_geom_free(g);
}
/* Pixels 40 times smaller than the voxels: a tile of 32 voxel columns
 * spans about 1280 detector columns, more than the 1024 bins of the
 * column sort (proj_voxel_tile.h col_order), which then sorts by pairs of
 * columns. */
static void test_voxel_wide_tile(void **s)
{
	(void)s;
	const rc_volume_desc vol = { 40, 40, 3, 1.0, 1.0, 1.0, 0.3, -0.2, 0.1 };
	const rc_detector_desc det = { 1800, 10, 0.05, 1.0, 0.7, -0.4, RC_DETECTOR_FLAT };
	rc_geom *g = make_geom_full(RC_GEOM_CONE, &vol, NV, &det, 0);
	bp_isas_random(g, 0, NV, "cone, 1800 x 10 detector of 0.05 mm pixels");
	rc_geom_free(g);
}
static void test_voxel_matrices(void **s) { (void)s; voxel_case(RC_GEOM_MATRICES); }

/* The largest relative change of w along a voxel column over the views: the
 * back projector runs a view along columns when it is at most 0.1 (half the
 * column's change over the smallest w, proj_voxel.c), else along rows. */
static double column_w_change(const rc_geom *g)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	double worst = 0;
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		const double *P = rc_geom_view(g, k)->P;
		double wmin = INFINITY;
		for (int c = 0; c < 8; c++) {
			double X[3];
			rc_volume_voxel_pos(v, c & 1 ? v->nx - 1 : 0, c & 2 ? v->ny - 1 : 0, c & 4 ? v->nz - 1 : 0, X);
			wmin = fmin(wmin, P[8] * X[0] + P[9] * X[1] + P[10] * X[2] + P[11]);
		}
		worst = fmax(worst, fabs(P[10]) * (v->nz - 1) * v->vz / 2 / wmin);
	}
	return worst;
}

/* The general paths: the 12 degree tilt of test_voxel_matrices runs along
 * voxel columns (w changes by a few % along one), a 50 degree tilt of a
 * tall volume along rows, a 1 degree tilt along columns through the
 * vector loops' windows. */
static void test_voxel_matrices_paths(void **s)
{
	(void)s;
	rc_geom *g = make_geom(RC_GEOM_MATRICES, &VOL_ODD, NV);
	double d = column_w_change(g);
	print_message("12 degree tilt: w changes by %.3f along a column (columns: <= 0.1)\n", d);
	assert_true(d > 0.01 && d <= 0.1);
	rc_geom_free(g);
	rc_volume_desc tall = VOL_ODD;
	tall.vz = 2.5;
	g = make_geom_full(RC_GEOM_MATRICES, &tall, NV, &DET, 50);
	d = column_w_change(g);
	print_message("50 degree tilt, tall volume: w changes by %.3f along a column (rows: > 0.1)\n", d);
	assert_true(d > 0.1);
	bp_isas_random(g, 0, NV, "matrices, 50 degree tilt (rows)");
	rc_geom_free(g);
	/* slight tilts (a C-arm's matrices): many chunks of 16 voxels read one
	 * pair of detector columns, through the vector loops' windows of 64
	 * (1.3 mm slices) and 128 rows (5 mm slices, 0.2 degrees: u moves by
	 * about 0.4 pixel per 16 voxels) */
	g = make_geom_full(RC_GEOM_MATRICES, &VOL_ODD, NV, &DET, 1);
	bp_isas_random(g, 0, NV, "matrices, 1 degree tilt, 1.3 mm slices");
	rc_geom_free(g);
	rc_volume_desc thick = { 21, 19, 16, 1.1, 0.9, 5.0, 0.4, -0.3, 0.7 };
	const rc_detector_desc tall_det = { 52, 120, 1.5, 1.5, 1.2, -0.9, RC_DETECTOR_FLAT }; /* all 16 slices on it */
	g = make_geom_full(RC_GEOM_MATRICES, &thick, NV, &tall_det, 0.2);
	bp_isas_random(g, 0, NV, "matrices, 0.2 degree tilt, 5 mm slices");
	rc_geom_free(g);
}

/* Every ISA path of the cone loop on every window the AVX-512 path picks:
 * slices of 0.4 to 9 mm put 0.5 to 12 detector rows between neighbouring
 * voxels of a column (16 voxels then span 2 to 8 vectors of 16 rows, or
 * more: the portable loop), and a detector whose v axis points down (-z,
 * given as matrices: still the cone path, with dv < 0).  Columns run past
 * the detector's top and bottom.  Last, a volume wide and shallow enough
 * for tiles of 64 rows (proj_voxel.c tile_rows) with a partial last one. */
static void test_voxel_cone_windows(void **s)
{
	(void)s;
	const double vz[] = { 0.4, 1.9, 2.6, 3.4, 4.2, 5.0, 5.8, 9.0 };
	/* 495 mm tall: 40 slices of 5.8 mm on it, columns of whole chunks */
	const rc_detector_desc tall = { 52, 330, 1.5, 1.5, 1.2, -0.9, RC_DETECTOR_FLAT };
	for (int i = 0; i < 8; i++) {
		int nz = (int)ceil(300 / vz[i]);
		rc_volume_desc v = { 21, 19, nz < 150 ? nz : 150, 1.1, 0.9, vz[i], 0.4, -0.3, 0.7 };
		rc_geom *g = make_geom_full(RC_GEOM_CONE, &v, NV, &tall, 0);
		char what[64];
		snprintf(what, sizeof what, "cone, %.1f mm slices (%.1f rows apart)", vz[i],
			 rc_geom_view(g, 0)->P[6] / rc_geom_view(g, 0)->P[11] * vz[i]);
		bp_isas_random(g, 0, NV, what);
		rc_geom_free(g);
	}
	/* v axis down: -z */
	double ang[NV], mats[NV * 12];
	angles(ang, NV, 7);
	for (int k = 0; k < NV; k++) {
		struct frame f;
		frame_of(ang[k], 0, &f);
		for (int a = 0; a < 3; a++)
			f.ev[a] = -f.ev[a];
		matrix_of(&f, mats + 12 * k);
	}
	rc_volume_desc v = { 21, 19, 40, 1.1, 0.9, 1.3, 0.4, -0.3, 0.7 };
	rc_geom_spec sp = { .type = RC_GEOM_MATRICES, .nviews = NV, .det = DET, .matrices = mats };
	rc_geom *g = NULL;
	rc_err err;
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), 0);
	assert_true(rc_geom_view(g, 0)->P[2] == 0 && rc_geom_view(g, 0)->P[10] == 0 && rc_geom_view(g, 0)->P[6] < 0);
	bp_isas_random(g, 0, NV, "cone, v axis down");
	rc_geom_free(g);
	rc_volume_desc wide = { 70, 130, 12, 0.5, 0.5, 1.3, 0.4, -0.3, 0.7 };
	g = make_geom(RC_GEOM_CONE, &wide, NV);
	bp_isas_random(g, 0, NV, "cone, 70 x 130 x 12 volume (tiles of 64 rows)");
	rc_geom_free(g);
}

/* More views than RC_BPV_BLOCK (two blocks: the sums kept across them). */
static void test_voxel_many_views(void **s)
{
	(void)s;
	rc_geom *g = make_geom(RC_GEOM_CONE, &VOL_ODD, 64);
	rc_engine *e = make_engine(g, 0);
	size_t nvox = rc_volume_count(&VOL_ODD), np = rc_geom_proj_count(g);
	float *proj = falloc(np), *vol = falloc(nvox);
	double *ref = calloc(nvox, sizeof *ref);
	assert_non_null(ref);
	for (size_t i = 0; i < np; i++)
		proj[i] = (float)urand();
	rc_err err;
	bp_reference(g, proj, 1, 64, ref);
	assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, proj, vol, 1, 64, &err), 0);
	double ev = max_rel(vol, ref, nvox);
	print_message("voxel BP 63 views: max error %.3g of the peak (bound 2e-5)\n", ev);
	assert_true(ev < 2e-5);
	/* the sums kept across the two blocks: 1 and 3 threads agree exactly */
	float *vol1 = falloc(nvox);
	rc_engine *e1 = make_engine(g, 1), *e3 = make_engine(g, 3);
	assert_int_equal(rc_engine_back(e1, RC_BP_VOXEL, proj, vol1, 1, 64, &err), 0);
	assert_int_equal(rc_engine_back(e3, RC_BP_VOXEL, proj, vol, 1, 64, &err), 0);
	assert_memory_equal(vol1, vol, nvox * sizeof *vol);
	/* without the memory for the kept sums (limit 0): written out per block */
	setenv("RECOND_BPV_TILES_MAX_MB", "0", 1);
	rc_engine *e0 = make_engine(g, 2);
	assert_int_equal(rc_engine_back(e0, RC_BP_VOXEL, proj, vol, 1, 64, &err), 0);
	unsetenv("RECOND_BPV_TILES_MAX_MB");
	ev = max_rel(vol, ref, nvox);
	print_message("voxel BP 63 views, sums written per block: max error %.3g of the peak (bound 2e-5)\n", ev);
	assert_true(ev < 2e-5);
	rc_engine_free(e0);
	free(vol1);
	rc_engine_free(e1);
	rc_engine_free(e3);
	free(proj);
	free(vol);
	free(ref);
	rc_engine_free(e);
	rc_geom_free(g);
}

/* --- ROTATE vs RAYCAST ------------------------------------------------------------ */

static void test_rotate_vs_raycast(void **s)
{
	(void)s;
	rc_geom *g = make_geom(RC_GEOM_CONE, &VOL_BALL, NV);
	rc_engine *e = make_engine(g, 0);
	size_t nvox = rc_volume_count(&VOL_BALL), np = rc_geom_proj_count(g);
	float *vol = falloc(nvox), *a = falloc(np), *b = falloc(np);
	/* a smooth object: a Gaussian blob off-centre plus a weaker wide one */
	for (int z = 0; z < VOL_BALL.nz; z++)
		for (int y = 0; y < VOL_BALL.ny; y++)
			for (int x = 0; x < VOL_BALL.nx; x++) {
				double p[3];
				rc_volume_voxel_pos(&VOL_BALL, x, y, z, p);
				double r1 = (p[0] - 3) * (p[0] - 3) + (p[1] + 2) * (p[1] + 2) + (p[2] - 1) * (p[2] - 1);
				double r2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
				vol[((size_t)z * VOL_BALL.ny + y) * VOL_BALL.nx + x] =
					(float)(0.02 * exp(-r1 / 18.0) + 0.01 * exp(-r2 / 60.0));
			}
	rc_err err;
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, vol, a, 0, NV, &err), 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_ROTATE, vol, b, 0, NV, &err), 0);
	double num = 0, den = 0;
	for (size_t i = 0; i < np; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)a[i] * a[i];
	}
	double rel = sqrt(num / den);
	print_message("rotate vs raycast (smooth object): relative L2 difference %.4g (bound 5e-3)\n", rel);
	assert_true(den > 0);
	assert_true(rel < 5e-3);
	free(vol);
	free(a);
	free(b);
	rc_engine_free(e);
	rc_geom_free(g);
}

/* --- splits and threads ------------------------------------------------------------ */

static void test_splits_and_threads(void **s)
{
	(void)s;
	rc_geom *g = make_geom(RC_GEOM_CONE, &VOL_ODD, NV);
	rc_engine *e1 = make_engine(g, 1), *e3 = make_engine(g, 3);
	size_t nvox = rc_volume_count(&VOL_ODD), np = rc_geom_proj_count(g);
	float *vol = falloc(nvox), *p1 = falloc(np), *p2 = falloc(np), *proj = falloc(np);
	float *v1 = falloc(nvox), *v2 = falloc(nvox), *va = falloc(nvox), *vb = falloc(nvox);
	for (size_t i = 0; i < nvox; i++)
		vol[i] = (float)urand();
	for (size_t i = 0; i < np; i++)
		proj[i] = (float)urand();
	rc_err err;
	for (int kind = 0; kind < 2; kind++) {
		/* forward: one call vs three ranges, 1 vs 3 threads: bit-identical */
		assert_int_equal(rc_engine_forward(e1, (rc_fp_kind)kind, vol, p1, 0, NV, &err), 0);
		assert_int_equal(rc_engine_forward(e3, (rc_fp_kind)kind, vol, p2, 0, 5, &err), 0);
		assert_int_equal(rc_engine_forward(e3, (rc_fp_kind)kind, vol, p2, 5, 6, &err), 0);
		assert_int_equal(rc_engine_forward(e3, (rc_fp_kind)kind, vol, p2, 6, NV, &err), 0);
		assert_memory_equal(p1, p2, np * sizeof(float));
	}
	for (int kind = 0; kind < 2; kind++) {
		/* back: 1 vs 3 threads bit-identical; a split sums to one call */
		assert_int_equal(rc_engine_back(e1, (rc_bp_kind)kind, proj, v1, 0, NV, &err), 0);
		assert_int_equal(rc_engine_back(e3, (rc_bp_kind)kind, proj, v2, 0, NV, &err), 0);
		assert_memory_equal(v1, v2, nvox * sizeof(float));
		assert_int_equal(rc_engine_back(e3, (rc_bp_kind)kind, proj, va, 0, 4, &err), 0);
		assert_int_equal(rc_engine_back(e3, (rc_bp_kind)kind, proj, vb, 4, NV, &err), 0);
		double m = 0, d = 0;
		for (size_t i = 0; i < nvox; i++) {
			m = fmax(m, fabs(v1[i]));
			d = fmax(d, fabs(v1[i] - (va[i] + vb[i])));
		}
		print_message("back %s: split [0,4)+[4,%d) vs one call: max difference %.3g of %.3g\n",
			      kind == 0 ? "voxel" : "matched", NV, d, m);
		assert_true(m > 0);
		/* regrouping a float sum of ~100 samples x 12 views per voxel: a
		 * few ulps of the peak (2^-23 = 1.2e-7) per term group */
		assert_true(d <= 5e-6 * m);
	}
	/* an empty range zeroes the volume */
	assert_int_equal(rc_engine_back(e3, RC_BP_VOXEL, proj, v1, 4, 4, &err), 0);
	assert_int_equal(rc_engine_back(e3, RC_BP_MATCHED, proj, v2, 4, 4, &err), 0);
	for (size_t i = 0; i < nvox; i++)
		assert_true(v1[i] == 0 && v2[i] == 0);
	free(vol);
	free(p1);
	free(p2);
	free(proj);
	free(v1);
	free(v2);
	free(va);
	free(vb);
	rc_engine_free(e1);
	rc_engine_free(e3);
	rc_geom_free(g);
}

/* Kept buffers (the voxel BP's tile sums, the ray caster's bordered copy)
 * share one budget per process: a reservation counts against every later
 * one until released. */
static void test_keep_budget(void **state)
{
	(void)state;
	setenv("RECOND_TEST_KEEP_MB", "1", 1);
	const size_t half = 512u << 10;
	assert_true(rc_proj_keep_reserve(half, "RECOND_TEST_KEEP_MB"));
	assert_true(rc_proj_keep_reserve(half, "RECOND_TEST_KEEP_MB"));
	assert_false(rc_proj_keep_reserve(1, "RECOND_TEST_KEEP_MB"));
	rc_proj_keep_release(half);
	assert_false(rc_proj_keep_reserve(half + 1, "RECOND_TEST_KEEP_MB"));
	assert_true(rc_proj_keep_reserve(half, "RECOND_TEST_KEEP_MB"));
	rc_proj_keep_release(half);
	rc_proj_keep_release(half);
	setenv("RECOND_TEST_KEEP_MB", "0", 1);
	assert_false(rc_proj_keep_reserve(1, "RECOND_TEST_KEEP_MB"));
	unsetenv("RECOND_TEST_KEEP_MB");
	/* without the variable: a quarter of memory, more than 1 MiB here */
	assert_true(rc_proj_keep_reserve(1u << 20, "RECOND_TEST_KEEP_MB"));
	rc_proj_keep_release(1u << 20);
	assert_false(rc_proj_keep_reserve(SIZE_MAX / 2, "RECOND_TEST_KEEP_MB"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ball_cone_raycast),
		cmocka_unit_test(test_ball_matrices_raycast),
		cmocka_unit_test(test_ball_cone_rotate),
		cmocka_unit_test(test_shepp_logan),
		cmocka_unit_test(test_uniform_border),
		cmocka_unit_test(test_adjoint_cone),
		cmocka_unit_test(test_adjoint_matrices),
		cmocka_unit_test(test_raycast_checked_path),
		cmocka_unit_test(test_voxel_cone),
		cmocka_unit_test(test_voxel_matrices),
		cmocka_unit_test(test_voxel_many_views),
		cmocka_unit_test(test_voxel_cone_windows),
		cmocka_unit_test(test_voxel_odd_detector),
		cmocka_unit_test(test_voxel_wide_tile),
		cmocka_unit_test(test_voxel_matrices_paths),
		cmocka_unit_test(test_rotate_vs_raycast),
		cmocka_unit_test(test_splits_and_threads),
		cmocka_unit_test(test_keep_budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
