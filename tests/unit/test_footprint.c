/*
 * The separable-footprint pair (core/projectors/proj_footprint.c):
 * RC_FP_FOOTPRINT and its adjoint RC_BP_FOOTPRINT through the CPU engine.
 *  - <A x, y> = <x, A^T y> to 1e-5 with random x, y, at ratios of
 *    projected voxel size to pixel size 0.5, 1, 1.25, 2, 2.6 and 4 (cone:
 *    the column path; tilted matrices: the per-voxel path), every ISA path,
 *    whose forward and back projections are the same bit for bit (the
 *    column loops' exact transpose: test_footprint_col);
 *  - the column path against the per-voxel path on the same cone views
 *    (the same model formed voxel by voxel in double: relative 1e-4), and
 *    1 against 2 threads (bit-identical);
 *  - against the analytic Shepp-Logan line integrals (core/phantom.h) next
 *    to ray casting on the same geometry, at ratios 1.25, 2 and 2.6: within
 *    ray casting's error (the bound test_splat uses: 1.05x);
 *  - the engine offers the pair on cone (flat and curved) and matrices
 *    geometries, rc_bk_fp picks it where the splat pair is not offered,
 *    and algorithm.projector "footprint" without it is refused;
 *    rc_recon_check refuses "footprint" on the OpenCL and CUDA engines;
 *  - on a cylindrical (curved) detector the same: the adjoint at every
 *    ratio, the column path against the per-voxel path, the analytic
 *    line integrals within ray casting's error (1.05x), a voxel's mass
 *    against V |grad u x grad v|; auto picking the pair where voxels
 *    project more than a pixel apart, ray casting's below (closer to the
 *    line integrals there: checked at ratio 0.5).
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
#include "backend/exec.h"
#include "geometry/phantom.h"
#include "plan/recon.h"
#include "projectors/proj_cpu.h"
#include "proj_testutil.h"
#include "tilt_case.h"
#include "util/threadpool.h"

#define NV 9
static const char *const isas[3] = { "baseline", "avx2", "avx512" };
static const double D = 150, S = 300; /* magnification 2 at the isocentre */

/* A cone (or tilted matrices) whose voxels of vs mm project ratio pixels
 * apart at the isocentre; off-centre, odd sizes, a detector a little
 * smaller than the volume's shadow so that footprints are clipped. */
static rc_geom *make_geom_shaped(rc_geom_type type, const rc_volume_desc *v, double ratio, rc_detector_shape shape)
{
	const double px = v->vx * (S / D) / ratio;
	rc_detector_desc det = { (int)(v->nx * v->vx * 2.4 / px) + 3, (int)(v->nz * v->vz * 2.2 / px) + 1, px, px,
				 0.7 * px, -0.4 * px, shape };
	rc_err err;
	rc_geom *g = tilt_case_geom(type, v, &det, NV, 11, D, S, &err);
	if (!g)
		fail_msg("geometry: %s", err.msg);
	return g;
}

static rc_geom *make_geom(rc_geom_type type, const rc_volume_desc *v, double ratio)
{
	return make_geom_shaped(type, v, ratio, RC_DETECTOR_FLAT);
}

/* The same cone on a cylindrical detector (du an arc length). */
static rc_geom *make_cyl(const rc_volume_desc *v, double ratio)
{
	return make_geom_shaped(RC_GEOM_CONE, v, ratio, RC_DETECTOR_CURVED);
}

static const double RATIOS[] = { 0.5, 1, 1.25, 2, 2.6, 4 };
#define NRATIOS (int)(sizeof RATIOS / sizeof RATIOS[0])
/* odd sizes, anisotropic, off-centre */
static const rc_volume_desc VOL = { 23, 20, 19, 1.0, 0.9, 1.1, 0.7, -0.4, 0.5 };

static void adjoint_case(rc_geom_type type, double ratio, int curved)
{
	rc_geom *g = curved ? make_cyl(&VOL, ratio) : make_geom(type, &VOL, ratio);
	rc_engine *e = make_engine(g, 0);
	assert_true(e->footprint);
	size_t nvox = rc_volume_count(&VOL), np = rc_geom_proj_count(g);
	float *x = falloc(nvox), *ax = falloc(np), *y = falloc(np), *aty = falloc(nvox);
	for (size_t i = 0; i < nvox; i++)
		x[i] = (float)urand();
	for (size_t i = 0; i < np; i++)
		y[i] = (float)urand();
	float *ax0 = falloc(np), *aty0 = falloc(nvox);
	rc_err err;
	for (int k = 0; k < 3; k++) {
		if (rc_engine_cpu_set_isa(e, isas[k], &err))
			continue;
		assert_int_equal(rc_engine_forward(e, RC_FP_FOOTPRINT, x, ax, 0, NV, &err), 0);
		/* every ISA path forms the same weights and sums in the same
		 * order: the same projections, bit for bit */
		if (k == 0)
			memcpy(ax0, ax, np * sizeof *ax);
		else
			assert_memory_equal(ax0, ax, np * sizeof *ax);
		assert_int_equal(rc_engine_back(e, RC_BP_FOOTPRINT, y, aty, 0, NV, &err), 0);
		/* and the back the same, bit for bit */
		if (k == 0)
			memcpy(aty0, aty, nvox * sizeof *aty);
		else
			assert_memory_equal(aty0, aty, nvox * sizeof *aty);
		double l = 0, r = 0;
		for (size_t i = 0; i < np; i++)
			l += (double)ax[i] * y[i];
		for (size_t i = 0; i < nvox; i++)
			r += (double)x[i] * aty[i];
		double gap = fabs(l - r) / fabs(l);
		print_message("footprint adjoint %s ratio %.2f (largest step %.2f px), %s: <Ax,y> = %.9g, "
			      "<x,A^T y> = %.9g, relative gap %.3g (bound 1e-5)\n",
			      curved ? "curved cone" : type == RC_GEOM_CONE ? "cone" : "matrices", ratio,
			      rc_splat_max_step(g), isas[k], l, r, gap);
		assert_true(l > 0);
		assert_true(gap < 1e-5);
	}
	free(x);
	free(ax);
	free(ax0);
	free(aty0);
	free(y);
	free(aty);
	rc_engine_free(e);
	rc_geom_free(g);
}

static void test_adjoint_cone(void **s)
{
	(void)s;
	for (int i = 0; i < NRATIOS; i++)
		adjoint_case(RC_GEOM_CONE, RATIOS[i], 0);
}

static void test_adjoint_curved(void **s)
{
	(void)s;
	for (int i = 0; i < NRATIOS; i++)
		adjoint_case(RC_GEOM_CONE, RATIOS[i], 1);
}

static void test_adjoint_matrices(void **s)
{
	(void)s;
	for (int i = 0; i < NRATIOS; i++)
		adjoint_case(RC_GEOM_MATRICES, RATIOS[i], 0);
}

/* The column path (cone views) against the per-voxel path on the same
 * views, forward and back; and 1 thread against 2. */
static void paths_case(double ratio, int curved)
{
	rc_geom *g = curved ? make_cyl(&VOL, ratio) : make_geom(RC_GEOM_CONE, &VOL, ratio);
	rc_pool *p1 = NULL, *p2 = NULL;
	rc_fpf *f1 = NULL, *f2 = NULL, *fg = NULL;
	rc_err err;
	assert_int_equal(rc_pool_new(1, &p1, &err), 0);
	assert_int_equal(rc_pool_new(2, &p2, &err), 0);
	assert_int_equal(rc_fpf_new(g, 1, &f1, &err), 0);
	assert_int_equal(rc_fpf_new(g, 2, &f2, &err), 0);
	assert_int_equal(rc_fpf_new(g, 2, &fg, &err), 0);
	rc_fpf_force_general(fg, 1);
	size_t nvox = rc_volume_count(&VOL), np = rc_geom_proj_count(g);
	float *x = falloc(nvox), *y = falloc(np), *a1 = falloc(np), *a2 = falloc(np), *ag = falloc(np);
	float *b1 = falloc(nvox), *b2 = falloc(nvox), *bg = falloc(nvox);
	for (size_t i = 0; i < nvox; i++)
		x[i] = (float)urand();
	for (size_t i = 0; i < np; i++)
		y[i] = (float)urand();
	rc_cpu_isa isa = rc_cpu_isa_best();
	assert_int_equal(rc_fp_footprint(f1, p1, isa, x, a1, 0, NV, &err), 0);
	assert_int_equal(rc_fp_footprint(f2, p2, isa, x, a2, 0, NV, &err), 0);
	assert_int_equal(rc_fp_footprint(fg, p2, isa, x, ag, 0, NV, &err), 0);
	assert_int_equal(rc_bp_footprint(f1, p1, isa, y, b1, 0, NV, &err), 0);
	assert_int_equal(rc_bp_footprint(f2, p2, isa, y, b2, 0, NV, &err), 0);
	assert_int_equal(rc_bp_footprint(fg, p2, isa, y, bg, 0, NV, &err), 0);
	assert_memory_equal(a1, a2, np * sizeof *a1);
	assert_memory_equal(b1, b2, nvox * sizeof *b1);
	double fmax_ = 0, fd = 0, bmax = 0, bd = 0;
	for (size_t i = 0; i < np; i++) {
		fmax_ = fmax(fmax_, fabs(ag[i]));
		fd = fmax(fd, fabs((double)a1[i] - ag[i]));
	}
	for (size_t i = 0; i < nvox; i++) {
		bmax = fmax(bmax, fabs(bg[i]));
		bd = fmax(bd, fabs((double)b1[i] - bg[i]));
	}
	print_message("footprint %s ratio %.2f, column vs per-voxel path: forward max diff %.3g of the peak, back %.3g "
		      "(bound 1e-4); 1 vs 2 threads identical\n",
		      curved ? "curved" : "flat", ratio, fd / fmax_, bd / bmax);
	assert_true(fmax_ > 0 && bmax > 0);
	assert_true(fd < 1e-4 * fmax_);
	assert_true(bd < 1e-4 * bmax);
	/* a view sub-range writes those views alone */
	memset(a2, 0, np * sizeof *a2);
	assert_int_equal(rc_fp_footprint(f2, p2, isa, x, a2, 3, 6, &err), 0);
	size_t vc = np / NV;
	for (size_t i = 0; i < np; i++)
		assert_true(i / vc >= 3 && i / vc < 6 ? a2[i] == a1[i] : a2[i] == 0.0f);
	free(x);
	free(y);
	free(a1);
	free(a2);
	free(ag);
	free(b1);
	free(b2);
	free(bg);
	rc_fpf_free(f1);
	rc_fpf_free(f2);
	rc_fpf_free(fg);
	rc_pool_free(p1);
	rc_pool_free(p2);
	rc_geom_free(g);
}

static void test_paths(void **s)
{
	(void)s;
	for (int i = 0; i < NRATIOS; i++) {
		paths_case(RATIOS[i], 0);
		paths_case(RATIOS[i], 1);
	}
}

/* Relative L2 error of kind's projection of the voxelised Shepp-Logan (n^3
 * voxels over a 30 mm field) against its analytic line integrals, voxels
 * projecting ratio pixels apart at the isocentre; *rows: the same of the
 * detector rows' sums (the mass each row receives: the blur of the
 * footprints cancels there, the gain does not). */
static double shepp_logan_error(int n, double ratio, rc_fp_kind kind, rc_detector_shape shape, double *rows)
{
	const double vs = 30.0 / n, px = vs * (S / D) / ratio;
	rc_volume_desc v = { n, n, n, vs, vs, vs, 0, 0, 0 };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = NV,
			    .det = { (int)(30 * 1.6 * (S / D) / px) + 1, (int)(30 * 1.3 * (S / D) / px) + 1, px, px, 0,
				     0, shape },
			    .source_isocenter_mm = D, .source_detector_mm = S };
	double ang[NV];
	for (int k = 0; k < NV; k++)
		ang[k] = 7 + 360.0 * k / NV;
	sp.angles_deg = ang;
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&sp, &v, NULL, &g, &err))
		fail_msg("geometry: %s", err.msg);
	rc_engine *e = make_engine(g, 0);
	assert_true(e->footprint);
	rc_phantom *ph = NULL;
	assert_int_equal(rc_phantom_shepp_logan(30.0, &ph, &err), 0);
	size_t np = rc_geom_proj_count(g);
	float *vol = falloc(rc_volume_count(&v)), *proj = falloc(np), *ref = falloc(np);
	assert_int_equal(rc_phantom_voxelize(ph, &v, 4, 0, vol, &err), 0);
	assert_int_equal(rc_phantom_project(ph, g, 0, ref, &err), 0);
	assert_int_equal(rc_engine_forward(e, kind, vol, proj, 0, NV, &err), 0);
	double num = 0, den = 0, rnum = 0, rden = 0;
	const int nu = sp.det.nu;
	for (size_t i = 0; i < np; i++) {
		num += ((double)proj[i] - ref[i]) * ((double)proj[i] - ref[i]);
		den += (double)ref[i] * ref[i];
	}
	for (size_t r = 0; r < np / (size_t)nu; r++) {
		double a = 0, b = 0;
		for (int i = 0; i < nu; i++) {
			a += proj[r * (size_t)nu + (size_t)i];
			b += ref[r * (size_t)nu + (size_t)i];
		}
		rnum += (a - b) * (a - b);
		rden += b * b;
	}
	*rows = sqrt(rnum / rden);
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
	static const double ratios[] = { 1.25, 2, 2.6 };
	for (int c = 0; c < 2; c++)
		for (int i = 0; i < 3; i++) {
			rc_detector_shape sh = c ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT;
			double fr, rr;
			double fp = shepp_logan_error(32, ratios[i], RC_FP_FOOTPRINT, sh, &fr);
			double rc = shepp_logan_error(32, ratios[i], RC_FP_RAYCAST, sh, &rr);
			print_message("Shepp-Logan 32^3, %s detector, ratio %.2f: footprint %.4f, ray casting %.4f "
				      "(bound 1.05x); row sums %.4f, %.4f\n",
				      c ? "curved" : "flat", ratios[i], fp, rc, fr, rr);
			assert_true(fp < 1.05 * rc);
		}
	/* below a pixel ray casting's pair is the closer (why auto runs it
	 * there on a curved cone, which has no splat pair) */
	for (int c = 0; c < 2; c++) {
		rc_detector_shape sh = c ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT;
		double fr, rr;
		double fp = shepp_logan_error(32, 0.5, RC_FP_FOOTPRINT, sh, &fr);
		double rc = shepp_logan_error(32, 0.5, RC_FP_RAYCAST, sh, &rr);
		print_message("Shepp-Logan 32^3, %s detector, ratio 0.50: footprint %.4f, ray casting %.4f\n",
			      c ? "curved" : "flat", fp, rc);
		assert_true(rc < fp);
	}
}

/* (u, v) of world point x in view k of g, either detector. */
static void project_any(const rc_geom *g, int k, const double *x, double *uv)
{
	double w;
	if (rc_geom_detector(g)->shape == RC_DETECTOR_CURVED)
		rc_geom_cyl_project(g, k, x, &uv[0], &uv[1], &w);
	else
		rc_view_project(rc_geom_view(g, k), x, &uv[0], &uv[1], &w);
}

/* The mass one voxel of density 1 puts on the detector, summed over the
 * pixels, against V |grad u x grad v| at its centre, the gradients by
 * central differences of the geometry's own projection (independent of
 * the pair's gain and 1/L^2 or 1/w^2): flat and curved, on a tall volume
 * (zeta = z / L up to 0.3 at the top slices, where the cylinder's
 * sqrt(1 + zeta^2) is 4 %), voxels at the centre, the top and the
 * corners, every view. */
static void test_voxel_mass(void **s)
{
	(void)s;
	const rc_volume_desc v = { 16, 14, 64, 1.0, 1.1, 0.9, 1.5, -1, 2 };
	static const int vox[][3] = { { 8, 7, 32 }, { 8, 7, 63 }, { 0, 0, 63 }, { 15, 13, 0 }, { 15, 0, 60 } };
	for (int c = 0; c < 2; c++) {
		const double px = 1.6;
		rc_detector_desc det = { 40, 100, px, px, 0.3, -0.2, c ? RC_DETECTOR_CURVED : RC_DETECTOR_FLAT };
		rc_err err;
		rc_geom *g = tilt_case_geom(RC_GEOM_CONE, &v, &det, NV, 11, D, S, &err);
		if (!g)
			fail_msg("geometry: %s", err.msg);
		rc_engine *e = make_engine(g, 0);
		assert_true(e->footprint);
		size_t nvox = rc_volume_count(&v), np = rc_geom_proj_count(g), pv = np / NV;
		float *x = falloc(nvox), *p = falloc(np);
		double worst = 0;
		for (size_t q = 0; q < sizeof vox / sizeof vox[0]; q++) {
			size_t at = ((size_t)vox[q][2] * (size_t)v.ny + (size_t)vox[q][1]) * (size_t)v.nx + (size_t)vox[q][0];
			memset(x, 0, nvox * sizeof *x);
			x[at] = 1.0f;
			assert_int_equal(rc_engine_forward(e, RC_FP_FOOTPRINT, x, p, 0, NV, &err), 0);
			double X[3];
			rc_volume_voxel_pos(&v, vox[q][0], vox[q][1], vox[q][2], X);
			for (int k = 0; k < NV; k++) {
				double grad[2][3];
				for (int a = 0; a < 3; a++) {
					const double h = 1e-3;
					double xp[3] = { X[0], X[1], X[2] }, xm[3] = { X[0], X[1], X[2] }, up[2], um[2];
					xp[a] += h;
					xm[a] -= h;
					project_any(g, k, xp, up);
					project_any(g, k, xm, um);
					grad[0][a] = (up[0] - um[0]) / (2 * h);
					grad[1][a] = (up[1] - um[1]) / (2 * h);
				}
				const double cx = grad[0][1] * grad[1][2] - grad[0][2] * grad[1][1];
				const double cy = grad[0][2] * grad[1][0] - grad[0][0] * grad[1][2];
				const double cz = grad[0][0] * grad[1][1] - grad[0][1] * grad[1][0];
				const double want = v.vx * v.vy * v.vz * sqrt(cx * cx + cy * cy + cz * cz);
				double got = 0;
				for (size_t i = 0; i < pv; i++)
					got += p[(size_t)k * pv + i];
				worst = fmax(worst, fabs(got - want) / want);
			}
		}
		print_message("footprint, one voxel's mass on the %s detector against V |grad u x grad v|: worst "
			      "relative difference %.3g (bound 5e-4)\n",
			      c ? "curved" : "flat", worst);
		assert_true(worst < 5e-4);
		free(x);
		free(p);
		rc_engine_free(e);
		rc_geom_free(g);
	}
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

/* auto runs the footprint pair where the splat pair is not offered, the
 * same as asking for it; raycast runs what an engine without the pair
 * runs under auto; "footprint" without the pair is refused. */
static void projector_param_case(int curved, double ratio, int auto_fp)
{
	rc_geom *g = curved ? make_cyl(&VOL, ratio) : make_geom(RC_GEOM_CONE, &VOL, ratio);
	rc_engine *with = make_engine(g, 0);
	setenv("RECOND_NO_FOOTPRINT", "1", 1);
	rc_engine *without = make_engine(g, 0);
	unsetenv("RECOND_NO_FOOTPRINT");
	assert_true(with->footprint && !with->splat);
	assert_int_equal(with->footprint_auto, auto_fp);
	assert_false(without->footprint || without->footprint_auto);
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
	assert_int_equal(cgls_with(with, RC_PROJECTOR_FOOTPRINT, p, b), 0);
	if (auto_fp) { /* auto ran the footprint pair */
		assert_memory_not_equal(a, c, nvox * sizeof *a);
		assert_memory_equal(b, c, nvox * sizeof *b);
	} else { /* auto ran ray casting's; "footprint" still runs */
		assert_memory_equal(a, c, nvox * sizeof *a);
		assert_memory_not_equal(b, c, nvox * sizeof *b);
	}
	assert_int_equal(cgls_with(without, RC_PROJECTOR_FOOTPRINT, p, c), RC_EUNSUPPORTED);
	assert_int_equal(rc_engine_forward(without, RC_FP_FOOTPRINT, x, p, 0, NV, &err), RC_EUNSUPPORTED);
	free(x);
	free(p);
	free(a);
	free(b);
	free(c);
	rc_engine_free(with);
	rc_engine_free(without);
	rc_geom_free(g);
}

static void test_projector_param(void **s)
{
	(void)s;
	projector_param_case(0, 2.0, 1);
	/* a curved cone: auto picks the pair where voxels project more than a
	 * pixel apart, as on a flat one; below (no splat pair there) ray
	 * casting's, which is closer to line integrals there (test_shepp_logan) */
	projector_param_case(1, 2.0, 1);
	projector_param_case(1, 0.5, 0);
	projector_param_case(1, 0.8, 0);
}

/* algorithm.projector "footprint" is the CPU engine's: rc_recon_check
 * refuses it (422, naming algorithm.projector) with another engine, and
 * takes it on a curved detector, whose engine offers it ("splat" stays
 * refused there). */
static void test_refusals(void **s)
{
	(void)s;
	rc_err err;
	rc_recon_spec r;
	rc_recon_spec_default(&r);
	r.geom.type = RC_GEOM_CONE;
	r.vol = (rc_volume_desc){ 16, 16, 16, 1, 1, 1, 0, 0, 0 };
	r.algo.name = RC_ALGO_CGLS;
	r.algo.projector = RC_PROJECTOR_FOOTPRINT;
	r.engine = RC_ENGINE_CPU;
	assert_int_equal(rc_recon_check(&r, &err), 0);
	r.engine = RC_ENGINE_AUTO;
	assert_int_equal(rc_recon_check(&r, &err), 0);
	static const rc_engine_choice others[] = { RC_ENGINE_OPENCL, RC_ENGINE_CUDA };
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		r.engine = others[i];
		assert_int_equal(rc_recon_check(&r, &err), RC_EUNSUPPORTED);
		assert_string_equal(err.field, "algorithm.projector");
		assert_non_null(strstr(err.msg, "footprint"));
	}
	/* (the tensor engine runs no cone at all: refused on execution.engine) */
	r.engine = RC_ENGINE_TENSOR;
	assert_int_equal(rc_recon_check(&r, &err), RC_EUNSUPPORTED);
	r.engine = RC_ENGINE_AUTO;
	r.geom.det.shape = RC_DETECTOR_CURVED;
	assert_int_equal(rc_recon_check(&r, &err), 0);
	r.algo.projector = RC_PROJECTOR_SPLAT;
	assert_int_equal(rc_recon_check(&r, &err), RC_EUNSUPPORTED);
	assert_string_equal(err.field, "algorithm.projector");
	/* the curved cone's engine offers the pair */
	double ang[4] = { 0, 90, 180, 270 };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = 4, .angles_deg = ang, .source_isocenter_mm = 150,
			    .source_detector_mm = 300 };
	sp.det = (rc_detector_desc){ .nu = 48, .nv = 40, .du = 1.5, .dv = 1.5, .shape = RC_DETECTOR_CURVED };
	rc_geom *g = NULL;
	assert_int_equal(rc_geom_new(&sp, &VOL, NULL, &g, &err), 0);
	rc_engine *e = make_engine(g, 0);
	assert_true(e->footprint);
	assert_true(rc_footprint_suits(g));
	assert_false(e->splat);
	/* 1 mm voxels magnified 2x on 1.5 mm pixels: 1.3 pixels apart and more */
	assert_true(rc_footprint_cyl_step(g) > 1.3);
	assert_true(e->footprint_auto);
	float *x = falloc(rc_volume_count(&VOL)), *p = falloc(rc_geom_proj_count(g));
	assert_int_equal(rc_engine_forward(e, RC_FP_FOOTPRINT, x, p, 0, 4, &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_FOOTPRINT, p, x, 0, 4, &err), 0);
	free(x);
	free(p);
	rc_engine_free(e);
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adjoint_cone), cmocka_unit_test(test_adjoint_matrices),
		cmocka_unit_test(test_adjoint_curved),  cmocka_unit_test(test_voxel_mass),
		cmocka_unit_test(test_paths),        cmocka_unit_test(test_shepp_logan),
		cmocka_unit_test(test_projector_param), cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
