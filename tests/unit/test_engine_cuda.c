/*
 * CUDA engine tests.  Without a device: "no CUDA device", exit 77.
 *
 * References, independent of the GPU code:
 *  - a double-precision loop implementation in this file of each projector's
 *    definition (engine.h, cuda_kernels.h): voxel back projection with
 *    zero-padded bilinear reads and 1/w^2, ray casting with the midpoint
 *    sample rule of kernels/cuda/ray.cuh, and that ray caster's transpose;
 *  - the CPU engine, when this build has it (same definitions, other code);
 *  - analytic line integrals of the Shepp-Logan phantom (phantom.h).
 * The exact-interpolation kernels must agree with the references within
 * 1e-4 (relative L2); the hardware-filtered ones within 2e-3, the size of
 * the texture unit's 8-bit interpolation weights (engine_cuda.h).
 *
 * The CUDA backend (backend_cuda.c): each element-wise call against the
 * host backend's (vec_host.c) on the same data, element for element
 * identical, sums within 1e-5; then the resident runs (rc_cuda_run_algo:
 * the shared algorithms over that backend) of FDK, SART (with and without
 * subsets), SIRT, CGLS and MLEM against rc_algo_run over the CUDA engine
 * and over the CPU engine, cancel, and the refusal of a job too big.
 *
 * Fan (flat and curved) and parallel stacks (plane.cu): FBP's back
 * projection, Joseph's forward projection and its transpose against the
 * CPU engine's (the C references proj_plane.c and proj_joseph.c, which
 * test_opencl_plane checks against double precision and analytic line
 * integrals) within 1e-5, on all views and on a range, the adjoint test,
 * and a CGLS run over the CUDA engine against the same run over the CPU
 * engine.
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
#include "plan/resident.h"
#include "backend/cuda/engine_cuda.h"
#include "backend/exec.h"
#include "geometry/metrics.h"
#include "geometry/phantom.h"

#if defined(__SANITIZE_ADDRESS__) || defined(RC_TEST_SMALL)
#define NVOX 20
#define NVIEWS 24
#else
#define NVOX 40
#define NVIEWS 60
#endif

#define TOL_EXACT 1e-4
#define TOL_HW 2e-3

static rc_geom *G;
static float *VOL;  /* voxelised phantom */
static float *PROJ; /* its analytic projections */
static float *BALL, *BALL_PROJ; /* a ball off the axis: smooth enough that ray
				   casting on 40^3 is within a few % */
static size_t NV, NP;

/* ---- references ------------------------------------------------------- */

static double proj_at(const float *p, const rc_detector_desc *d, int k, int i, int j)
{
	if (i < 0 || j < 0 || i >= d->nu || j >= d->nv)
		return 0.0;
	return p[((size_t)k * d->nv + j) * d->nu + i];
}

static void ref_bp_voxel(const float *proj, double *out)
{
	const rc_volume_desc *v = rc_geom_volume(G);
	const rc_detector_desc *d = rc_geom_detector(G);
	for (int iz = 0; iz < v->nz; iz++)
		for (int iy = 0; iy < v->ny; iy++)
			for (int ix = 0; ix < v->nx; ix++) {
				double x[3], s = 0;
				rc_volume_voxel_pos(v, ix, iy, iz, x);
				for (int k = 0; k < rc_geom_nviews(G); k++) {
					double u, vv, w;
					rc_view_project(rc_geom_view(G, k), x, &u, &vv, &w);
					int i0 = (int)floor(u), j0 = (int)floor(vv);
					double au = u - i0, av = vv - j0;
					double b = (1 - av) * ((1 - au) * proj_at(proj, d, k, i0, j0) +
							       au * proj_at(proj, d, k, i0 + 1, j0)) +
						   av * ((1 - au) * proj_at(proj, d, k, i0, j0 + 1) +
							 au * proj_at(proj, d, k, i0 + 1, j0 + 1));
					s += b / (w * w);
				}
				out[((size_t)iz * v->ny + iy) * v->nx + ix] = s;
			}
}

/* The ray of pixel (i, j) of view k in voxel index space (ray.cuh). */
typedef struct ray {
	double a[3], b[3], t0, step;
	int n;
} ray;

static int ref_ray(int k, int i, int j, ray *r)
{
	const rc_volume_desc *v = rc_geom_volume(G);
	const rc_view *vw = rc_geom_view(G, k);
	double o[3], vox[3] = {v->vx, v->vy, v->vz};
	int n[3] = {v->nx, v->ny, v->nz};
	rc_volume_voxel_pos(v, 0, 0, 0, o);
	double d[3], L = 0;
	for (int a = 0; a < 3; a++) {
		d[a] = vw->Minv[3 * a] * i + vw->Minv[3 * a + 1] * j + vw->Minv[3 * a + 2];
		L += d[a] * d[a];
	}
	L = sqrt(L);
	double tmin = 0, tmax = INFINITY;
	for (int a = 0; a < 3; a++) {
		r->a[a] = (vw->src[a] - o[a]) / vox[a];
		r->b[a] = d[a] / L / vox[a];
		if (r->b[a] == 0) {
			if (r->a[a] < -1 || r->a[a] > n[a])
				return 0;
			continue;
		}
		double t1 = (-1 - r->a[a]) / r->b[a], t2 = (n[a] - r->a[a]) / r->b[a];
		tmin = fmax(tmin, fmin(t1, t2));
		tmax = fmin(tmax, fmax(t1, t2));
	}
	if (tmax <= tmin)
		return 0;
	r->step = 0.5 * fmin(v->vx, fmin(v->vy, v->vz));
	r->t0 = tmin;
	r->n = (int)ceil((tmax - tmin) / r->step); /* the trilinear support, as core/proj_raycast.c */
	return r->n > 0;
}

/* trilinear weights of point x: corners c[8][3], weights w[8] */
static void tri(const double x[3], int c[8][3], double w[8])
{
	int f[3];
	double al[3];
	for (int a = 0; a < 3; a++) {
		f[a] = (int)floor(x[a]);
		al[a] = x[a] - f[a];
	}
	for (int m = 0; m < 8; m++) {
		w[m] = 1;
		for (int a = 0; a < 3; a++) {
			int hi = (m >> a) & 1;
			c[m][a] = f[a] + hi;
			w[m] *= hi ? al[a] : 1 - al[a];
		}
	}
}

static int inside(const int c[3])
{
	const rc_volume_desc *v = rc_geom_volume(G);
	return c[0] >= 0 && c[1] >= 0 && c[2] >= 0 && c[0] < v->nx && c[1] < v->ny && c[2] < v->nz;
}

static size_t vidx(const int c[3])
{
	const rc_volume_desc *v = rc_geom_volume(G);
	return ((size_t)c[2] * v->ny + c[1]) * v->nx + c[0];
}

static void ref_fp_ray(const float *vol, double *out)
{
	const rc_detector_desc *d = rc_geom_detector(G);
	for (int k = 0; k < rc_geom_nviews(G); k++)
		for (int j = 0; j < d->nv; j++)
			for (int i = 0; i < d->nu; i++) {
				ray r;
				double s = 0;
				if (ref_ray(k, i, j, &r))
					for (int m = 0; m < r.n; m++) {
						double t = r.t0 + (m + 0.5) * r.step, x[3], w[8];
						int c[8][3];
						for (int a = 0; a < 3; a++)
							x[a] = r.a[a] + t * r.b[a];
						tri(x, c, w);
						for (int q = 0; q < 8; q++)
							if (inside(c[q]))
								s += w[q] * vol[vidx(c[q])];
					}
				out[((size_t)k * d->nv + j) * d->nu + i] = s * (r.n > 0 ? r.step : 0);
			}
}

static void ref_bp_matched(const float *proj, double *out)
{
	const rc_detector_desc *d = rc_geom_detector(G);
	memset(out, 0, NV * sizeof(double));
	for (int k = 0; k < rc_geom_nviews(G); k++)
		for (int j = 0; j < d->nv; j++)
			for (int i = 0; i < d->nu; i++) {
				ray r;
				if (!ref_ray(k, i, j, &r))
					continue;
				double val = proj[((size_t)k * d->nv + j) * d->nu + i] * r.step;
				for (int m = 0; m < r.n; m++) {
					double t = r.t0 + (m + 0.5) * r.step, x[3], w[8];
					int c[8][3];
					for (int a = 0; a < 3; a++)
						x[a] = r.a[a] + t * r.b[a];
					tri(x, c, w);
					for (int q = 0; q < 8; q++)
						if (inside(c[q]))
							out[vidx(c[q])] += w[q] * val;
				}
			}
}

static double rel_diff(const float *a, const double *ref, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += (a[i] - ref[i]) * (a[i] - ref[i]);
		den += ref[i] * ref[i];
	}
	return den > 0 ? sqrt(num / den) : NAN;
}

static double rel_diff_f(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return den > 0 ? sqrt(num / den) : NAN;
}

/* ---- fixtures ---------------------------------------------------------- */

static int setup(void **state)
{
	(void)state;
	static double angles[NVIEWS];
	for (int k = 0; k < NVIEWS; k++)
		angles[k] = 360.0 * k / NVIEWS;
	rc_geom_spec s;
	memset(&s, 0, sizeof s);
	s.type = RC_GEOM_CONE;
	s.nviews = NVIEWS;
	/* magnification 2; the detector sees the whole volume from every angle */
	s.source_isocenter_mm = 3.0 * NVOX;
	s.source_detector_mm = 6.0 * NVOX;
	s.det.nu = (int)(2.6 * NVOX);
	s.det.nv = (int)(2.2 * NVOX);
	s.det.du = 1.5;
	s.det.dv = 1.5;
	s.det.offset_u = 0.3; /* off-centre: catches a flipped or shifted axis */
	s.angles_deg = angles;
	rc_volume_desc v = {NVOX, NVOX, NVOX, 1.0, 1.0, 1.0, 0, 0, 0};
	rc_err err;
	if (rc_geom_new(&s, &v, NULL, &G, &err)) {
		fprintf(stderr, "geometry: %s\n", err.msg);
		return -1;
	}
	NV = rc_volume_count(&v);
	NP = rc_geom_proj_count(G);
	VOL = malloc(NV * sizeof(float));
	PROJ = malloc(NP * sizeof(float));
	rc_phantom *ph = NULL;
	if (!VOL || !PROJ || rc_phantom_shepp_logan(0.9 * NVOX, &ph, &err) ||
	    rc_phantom_voxelize(ph, &v, 2, 0, VOL, &err) || rc_phantom_project(ph, G, 0, PROJ, &err)) {
		rc_phantom_free(ph);
		return -1;
	}
	rc_phantom_free(ph);
	ph = NULL;
	const double c[3] = {0.08 * NVOX, -0.05 * NVOX, 0.03 * NVOX};
	BALL = malloc(NV * sizeof(float));
	BALL_PROJ = malloc(NP * sizeof(float));
	if (!BALL || !BALL_PROJ || rc_phantom_ball(c, 0.25 * NVOX, 0.02, &ph, &err) ||
	    rc_phantom_voxelize(ph, &v, 4, 0, BALL, &err) || rc_phantom_project(ph, G, 0, BALL_PROJ, &err)) {
		rc_phantom_free(ph);
		return -1;
	}
	rc_phantom_free(ph);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(VOL);
	free(PROJ);
	free(BALL);
	free(BALL_PROJ);
	rc_geom_free(G);
	return 0;
}

static rc_engine *gpu(rc_cuda_interp fp, rc_cuda_interp bp, uint64_t budget, int vpl)
{
	rc_cuda_options o;
	rc_cuda_options_default(&o);
	o.fp_interp = fp;
	o.bp_interp = bp;
	o.mem_budget = budget;
	if (vpl)
		o.views_per_launch = vpl;
	rc_engine *e = NULL;
	rc_err err;
	int rc = rc_engine_cuda_new_opts(G, &o, &e, &err);
	if (rc)
		fprintf(stderr, "cuda engine: %s\n", err.msg);
	assert_int_equal(rc, 0);
	return e;
}

/* ---- kernels against the double reference ------------------------------ */

static void test_bp_voxel(void **state)
{
	(void)state;
	double *ref = malloc(NV * sizeof(double));
	float *out = malloc(NV * sizeof(float));
	assert_non_null(ref);
	assert_non_null(out);
	ref_bp_voxel(PROJ, ref);
	rc_err err;
	for (int hw = 0; hw < 2; hw++) {
		rc_engine *e = gpu(RC_CUDA_INTERP_EXACT, hw ? RC_CUDA_INTERP_HW : RC_CUDA_INTERP_EXACT, 0, 0);
		assert_int_equal(rc_engine_back(e, RC_BP_VOXEL, PROJ, out, 0, NVIEWS, &err), 0);
		double d = rel_diff(out, ref, NV);
		printf("bp voxel %s: rel diff %.3g\n", hw ? "hw" : "exact", d);
		assert_true(d < (hw ? TOL_HW : TOL_EXACT));
		rc_engine_free(e);
	}
	free(ref);
	free(out);
}

static void test_fp_ray(void **state)
{
	(void)state;
	double *ref = malloc(NP * sizeof(double));
	float *out = malloc(NP * sizeof(float));
	assert_non_null(ref);
	assert_non_null(out);
	ref_fp_ray(VOL, ref);
	rc_err err;
	for (int hw = 0; hw < 2; hw++) {
		rc_engine *e = gpu(hw ? RC_CUDA_INTERP_HW : RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 0, 0);
		assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, VOL, out, 0, NVIEWS, &err), 0);
		double d = rel_diff(out, ref, NP);
		printf("fp raycast %s: rel diff %.3g\n", hw ? "hw" : "exact", d);
		assert_true(d < (hw ? TOL_HW : TOL_EXACT));
		rc_engine_free(e);
	}
	free(ref);
	free(out);
}

static void test_bp_matched(void **state)
{
	(void)state;
	double *ref = malloc(NV * sizeof(double));
	float *out = malloc(NV * sizeof(float));
	assert_non_null(ref);
	assert_non_null(out);
	ref_bp_matched(PROJ, ref);
	rc_err err;
	rc_engine *e = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 0, 0);
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, PROJ, out, 0, NVIEWS, &err), 0);
	double d = rel_diff(out, ref, NV);
	printf("bp matched: rel diff %.3g\n", d);
	assert_true(d < TOL_EXACT);
	rc_engine_free(e);
	free(ref);
	free(out);
}

/* <A x, y> = <x, A^T y> for the GPU pair itself. */
static void test_adjoint(void **state)
{
	(void)state;
	float *ax = malloc(NP * sizeof(float)), *aty = malloc(NV * sizeof(float));
	assert_non_null(ax);
	assert_non_null(aty);
	rc_err err;
	rc_engine *e = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 0, 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, VOL, ax, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_back(e, RC_BP_MATCHED, PROJ, aty, 0, NVIEWS, &err), 0);
	double l = 0, r = 0;
	for (size_t i = 0; i < NP; i++)
		l += (double)ax[i] * PROJ[i];
	for (size_t i = 0; i < NV; i++)
		r += (double)VOL[i] * aty[i];
	printf("adjoint: <Ax,y> %.9g <x,Aty> %.9g\n", l, r);
	assert_true(fabs(l - r) < TOL_EXACT * fabs(l));
	rc_engine_free(e);
	free(ax);
	free(aty);
}

/* Sub-ranges: views [first, last) only, the others untouched (engine.h). */
static void test_view_ranges(void **state)
{
	(void)state;
	float *all = malloc(NP * sizeof(float)), *part = malloc(NP * sizeof(float));
	float *va = malloc(NV * sizeof(float)), *vb = malloc(NV * sizeof(float)), *vc = malloc(NV * sizeof(float));
	assert_true(all && part && va && vb && vc);
	rc_err err;
	rc_engine *e = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 0, 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, VOL, all, 0, NVIEWS, &err), 0);
	for (size_t i = 0; i < NP; i++)
		part[i] = -7.0f;
	const int f = NVIEWS / 3, l = NVIEWS - 5;
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, VOL, part, f, l, &err), 0);
	const size_t view = rc_geom_view_count(G);
	for (size_t i = 0; i < NP; i++) {
		int k = (int)(i / view);
		if (k >= f && k < l)
			assert_true(part[i] == all[i]);
		else
			assert_true(part[i] == -7.0f);
	}
	/* back projections of two ranges add up to the whole */
	for (int kind = 0; kind < 2; kind++) {
		assert_int_equal(rc_engine_back(e, (rc_bp_kind)kind, PROJ, va, 0, NVIEWS, &err), 0);
		assert_int_equal(rc_engine_back(e, (rc_bp_kind)kind, PROJ, vb, 0, f, &err), 0);
		assert_int_equal(rc_engine_back(e, (rc_bp_kind)kind, PROJ, vc, f, NVIEWS, &err), 0);
		for (size_t i = 0; i < NV; i++)
			vb[i] += vc[i];
		double d = rel_diff_f(vb, va, NV);
		printf("bp kind %d split in two ranges: rel diff %.3g\n", kind, d);
		assert_true(d < 1e-5);
	}
	rc_engine_free(e);
	free(all);
	free(part);
	free(va);
	free(vb);
	free(vc);
}

/* Rotation + projection approximates the same line integrals as ray casting:
 * against the analytic projections of a ball it must be about as accurate
 * (the reference ray caster of this file reaches 4.3% on it at 40^3, most
 * of it the voxelised edge). */
static void test_fp_rotate(void **state)
{
	(void)state;
	float *rot = malloc(NP * sizeof(float)), *ray = malloc(NP * sizeof(float));
	assert_non_null(rot);
	assert_non_null(ray);
	rc_err err;
	rc_engine *e = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 0, 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_ROTATE, BALL, rot, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_forward(e, RC_FP_RAYCAST, BALL, ray, 0, NVIEWS, &err), 0);
	double er = rel_diff_f(rot, BALL_PROJ, NP), ey = rel_diff_f(ray, BALL_PROJ, NP);
	printf("fp rotate vs analytic %.4f, raycast vs analytic %.4f\n", er, ey);
	assert_true(er < 1.5 * ey + 1e-3);
	assert_true(ey < 0.1);
	rc_engine_free(e);
	free(rot);
	free(ray);
}

/* ---- the CPU engine, when built --------------------------------------- */

static void test_against_cpu(void **state)
{
	(void)state;
	rc_engine *cpu = NULL;
	rc_err err;
	assert_int_equal(rc_engine_cpu_new(G, 0, &cpu, &err), 0); /* every build has it */
	rc_engine *e = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 0, 0);
	float *a = malloc(NP * sizeof(float)), *b = malloc(NP * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	static const rc_fp_kind fk[] = {RC_FP_RAYCAST, RC_FP_ROTATE};
	for (int i = 0; i < 2; i++) {
		assert_int_equal(rc_engine_forward(e, fk[i], VOL, a, 0, NVIEWS, &err), 0);
		assert_int_equal(rc_engine_forward(cpu, fk[i], VOL, b, 0, NVIEWS, &err), 0);
		double d = rel_diff_f(a, b, NP);
		printf("forward %d: gpu vs cpu %.3g\n", (int)fk[i], d);
		assert_true(d < TOL_EXACT);
	}
	static const rc_bp_kind bk[] = {RC_BP_VOXEL, RC_BP_MATCHED};
	for (int i = 0; i < 2; i++) {
		assert_int_equal(rc_engine_back(e, bk[i], PROJ, a, 0, NVIEWS, &err), 0);
		assert_int_equal(rc_engine_back(cpu, bk[i], PROJ, b, 0, NVIEWS, &err), 0);
		double d = rel_diff_f(a, b, NV);
		printf("back %d: gpu vs cpu %.3g\n", (int)bk[i], d);
		assert_true(d < TOL_EXACT);
	}
	free(a);
	free(b);
	rc_engine_free(e);
	rc_engine_free(cpu);
}

/* ---- memory: slabs and refusal ------------------------------------------ */

static uint64_t slab_budget(void)
{
	/* With one view per launch the engine needs 2 batch views + 1 chunk
	 * view + the volume twice (accumulator and texture): 3 views + 2 V.
	 * 3 views + 1.5 V leaves out the whole volume and fits two halves
	 * (3 views + V (1 + 2/nz)) for nz >= 4. */
	const uint64_t view_b = rc_geom_view_count(G) * sizeof(float);
	return 3 * view_b + 3 * NV * sizeof(float) / 2;
}

static void test_slabs(void **state)
{
	(void)state;
	rc_err err;
	rc_engine *whole = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 0, 0);
	rc_engine *sl = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, slab_budget(), 1);
	float *a = malloc(NP * sizeof(float)), *b = malloc(NP * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(rc_engine_forward(whole, RC_FP_RAYCAST, VOL, a, 0, NVIEWS, &err), 0);
	assert_int_equal(rc_engine_forward(sl, RC_FP_RAYCAST, VOL, b, 0, NVIEWS, &err), 0);
	printf("forward in %d slabs: rel diff %.3g\n", rc_engine_cuda_last_slabs(sl), rel_diff_f(b, a, NP));
	assert_true(rc_engine_cuda_last_slabs(sl) > 1);
	assert_true(rel_diff_f(b, a, NP) < 1e-5);
	for (int kind = 0; kind < 2; kind++) {
		assert_int_equal(rc_engine_back(whole, (rc_bp_kind)kind, PROJ, a, 0, NVIEWS, &err), 0);
		assert_int_equal(rc_engine_back(sl, (rc_bp_kind)kind, PROJ, b, 0, NVIEWS, &err), 0);
		double d = rel_diff_f(b, a, NV);
		printf("back %d in %d slabs: rel diff %.3g\n", kind, rc_engine_cuda_last_slabs(sl), d);
		assert_true(rc_engine_cuda_last_slabs(sl) > 1);
		assert_true(d < 1e-5);
	}
	/* RC_FP_ROTATE needs the whole volume: refused with a message, no crash */
	int rc = rc_engine_forward(sl, RC_FP_ROTATE, VOL, b, 0, NVIEWS, &err);
	assert_int_equal(rc, RC_ETOOBIG);
	assert_non_null(strstr(err.msg, "slabs"));
	/* a budget below one plane: refused before anything runs */
	rc_engine *tiny = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 1024, 1);
	rc = rc_engine_back(tiny, RC_BP_VOXEL, PROJ, b, 0, NVIEWS, &err);
	assert_int_equal(rc, RC_ETOOBIG);
	assert_non_null(strstr(err.msg, "MiB"));
	rc_engine_free(tiny);
	free(a);
	free(b);
	rc_engine_free(whole);
	rc_engine_free(sl);
}

/* ---- whole runs ---------------------------------------------------------- */

typedef struct trace {
	double res[64];
	int last;
	atomic_int *stop;
	int stop_after;
} trace;

static void on_progress(void *ud, const rc_progress *p)
{
	trace *t = ud;
	if (p->iteration < 64)
		t->res[p->iteration] = p->residual;
	t->last = p->iteration;
	if (t->stop && p->iteration == t->stop_after)
		atomic_store(t->stop, 1);
}

static double vol_error(const float *x)
{
	uint8_t *mask = malloc(NV);
	assert_non_null(mask);
	rc_mask_cylinder(rc_geom_volume(G), 0.35 * NVOX, 0.35 * NVOX, mask);
	double e = rc_metric_rel_error(x, VOL, mask, NV);
	free(mask);
	return e;
}

static rc_cuda_options exact_opts(void)
{
	rc_cuda_options o;
	rc_cuda_options_default(&o);
	o.fp_interp = RC_CUDA_INTERP_EXACT;
	o.bp_interp = RC_CUDA_INTERP_EXACT;
	return o;
}

/* rc_algo_run of p over one engine: the CUDA engine (EXACT) or the CPU
 * engine. */
static void engine_run(const rc_algo_params *p, int cuda, float *vol)
{
	rc_err err;
	rc_engine *e = NULL;
	if (cuda)
		e = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, 0, 0);
	else {
		/* without the footprint pair, so that both engines run ray
		 * casting's pair on this coarse geometry */
		setenv("RECOND_NO_FOOTPRINT", "1", 1);
		assert_int_equal(rc_engine_cpu_new(G, 0, &e, &err), 0);
		unsetenv("RECOND_NO_FOOTPRINT");
	}
	rc_exec *x = NULL;
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	int rc = rc_algo_run(p, x, PROJ, vol, NULL, &err);
	if (rc)
		fprintf(stderr, "%s engine %s: %s\n", cuda ? "cuda" : "cpu", rc_algo_name_str(p->name), err.msg);
	assert_int_equal(rc, 0);
	rc_exec_free(x);
	rc_engine_free(e);
}

/* The resident run (the CUDA backend under the shared algorithm) equals the
 * same algorithm on the host backend over the CUDA engine and over the CPU
 * engine; its error falls, and CGLS's residual never rises. */
static void run_pair(rc_algo_name name, int iterations, int subsets)
{
	rc_algo_params p;
	rc_algo_params_plain(&p, name);
	p.iterations = iterations;
	p.subsets = subsets;
	if (name == RC_ALGO_SART)
		p.relaxation = 0.5;
	float *res = malloc(NV * sizeof(float)), *eng = malloc(NV * sizeof(float));
	assert_non_null(res);
	assert_non_null(eng);
	trace t;
	memset(&t, 0, sizeof t);
	rc_algo_hooks h = {.progress = on_progress, .ud = &t};
	rc_err err;
	rc_cuda_options o = exact_opts();
	int rc = rc_cuda_run_algo(&p, G, &o, PROJ, res, &h, &err);
	if (rc)
		fprintf(stderr, "resident %s: %s\n", rc_algo_name_str(name), err.msg);
	assert_int_equal(rc, 0);
	assert_int_equal(t.last, iterations);
	if (name == RC_ALGO_CGLS)
		for (int i = 2; i <= iterations; i++)
			assert_true(t.res[i] <= t.res[i - 1] * (1 + 1e-6));
	else
		assert_true(t.res[iterations] < t.res[1]);

	engine_run(&p, 1, eng);
	double d = rel_diff_f(res, eng, NV);
	double er = vol_error(res);
	printf("%s (%d subsets): resident vs engine path %.3g, error vs phantom %.4f (residual %.4g -> %.4g)\n",
	       rc_algo_name_str(name), subsets, d, er, t.res[1], t.res[iterations]);
	assert_true(d < 1e-3);
	assert_true(er < 0.6);

	engine_run(&p, 0, eng);
	double dc = rel_diff_f(res, eng, NV);
	printf("%s: resident GPU vs CPU engine %.3g\n", rc_algo_name_str(name), dc);
	assert_true(dc < 1e-3);
	free(res);
	free(eng);
}

static void test_sart(void **state)
{
	(void)state;
	run_pair(RC_ALGO_SART, 8, 1);
}

static void test_sart_subsets(void **state)
{
	(void)state;
	run_pair(RC_ALGO_SART, 4, 4);
}

static void test_sirt(void **state)
{
	(void)state;
	run_pair(RC_ALGO_SIRT, 8, 1);
}

static void test_cgls(void **state)
{
	(void)state;
	run_pair(RC_ALGO_CGLS, 8, 1);
}

static void test_mlem(void **state)
{
	(void)state;
	run_pair(RC_ALGO_MLEM, 8, 1);
}

/* FDK resident (the filter on the host, the filtered stack uploaded once,
 * the back projection from device memory): the same volume as through the
 * CUDA engine and on the CPU engine. */
static void test_fdk(void **state)
{
	(void)state;
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_FDK);
	float *a = malloc(NV * sizeof(float)), *b = malloc(NV * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	rc_err err;
	rc_cuda_options o = exact_opts();
	int rc = rc_cuda_run_algo(&p, G, &o, PROJ, a, NULL, &err);
	if (rc)
		fprintf(stderr, "resident fdk: %s\n", err.msg);
	assert_int_equal(rc, 0);
	double er = vol_error(a);
	printf("fdk resident: error vs phantom %.4f\n", er);
	assert_true(er < 0.6);
	engine_run(&p, 1, b);
	double d = rel_diff_f(a, b, NV);
	printf("fdk: resident vs engine path %.3g\n", d);
	assert_true(d < TOL_EXACT);
	engine_run(&p, 0, b);
	d = rel_diff_f(a, b, NV);
	printf("fdk: resident GPU vs CPU engine %.3g\n", d);
	assert_true(d < TOL_EXACT);
	free(a);
	free(b);
}

/* The default options (AUTO: SART's forward projection and the voxel back
 * projection with hardware filtering) reach the same volumes within the
 * hardware weights' rounding. */
static void test_auto_interp(void **state)
{
	(void)state;
	static const rc_algo_name names[] = {RC_ALGO_SART, RC_ALGO_FDK};
	float *a = malloc(NV * sizeof(float)), *b = malloc(NV * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	for (int i = 0; i < 2; i++) {
		rc_algo_params p;
		rc_algo_params_plain(&p, names[i]);
		if (names[i] == RC_ALGO_SART) {
			p.iterations = 8; /* run_pair's: below 0.6 at 40^3 too */
			p.relaxation = 0.5;
		}
		rc_err err;
		assert_int_equal(rc_cuda_run_algo(&p, G, NULL, PROJ, a, NULL, &err), 0);
		engine_run(&p, 0, b);
		double d = rel_diff_f(a, b, NV);
		printf("%s with AUTO interpolation vs CPU engine %.3g, error vs phantom %.4f\n",
		       rc_algo_name_str(names[i]), d, vol_error(a));
		assert_true(d < 10 * TOL_HW);
		assert_true(vol_error(a) < 0.6);
	}
	free(a);
	free(b);
}

/* ---- the backend's calls, one by one, against the host backend ------------- */

static float lcg(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)(*s >> 8) / 16777216.0f; /* [0, 1) */
}

/* Values in [-1, 2) with exact zeros and tiny values among them, so the
 * guards of inv_guarded and ratio are crossed. */
static void test_data(float *x, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		float r = lcg(&seed);
		x[i] = 3.0f * r - 1.0f;
		if (i % 17 == 3)
			x[i] = 0.0f;
		if (i % 29 == 5)
			x[i] = 1e-7f * r;
	}
}

enum { NVEC = 6 }; /* three volume vectors, three projection vectors */

typedef struct bpair {
	rc_backend *b[2]; /* cuda, host */
	rc_vec *v[2][NVEC];
	float *h[2];      /* downloads */
	rc_engine *cpu;
	rc_exec *x;
} bpair;

static rc_space space_of(int i)
{
	return i < 3 ? RC_SPACE_VOLUME : RC_SPACE_PROJ;
}

static size_t count_of(int i)
{
	return i < 3 ? NV : NP;
}

static void bpair_open(bpair *bp)
{
	rc_err err;
	memset(bp, 0, sizeof *bp);
	rc_cuda_options o = exact_opts();
	assert_int_equal(rc_backend_cuda_new(G, &o, 0, &bp->b[0], &err), 0);
	assert_string_equal(bp->b[0]->name, "cuda");
	assert_int_equal(bp->b[0]->nbatch, 1);
	/* ray casting's pair on both: the CPU engine would take its footprint
	 * pair on this coarse geometry */
	setenv("RECOND_NO_FOOTPRINT", "1", 1);
	assert_int_equal(rc_engine_cpu_new(G, 0, &bp->cpu, &err), 0);
	unsetenv("RECOND_NO_FOOTPRINT");
	assert_int_equal(rc_exec_new(&bp->cpu, 1, &bp->x, &err), 0);
	assert_int_equal(rc_backend_host_new(bp->x, &bp->b[1], &err), 0);
	float *data = malloc(NP * sizeof(float));
	assert_non_null(data);
	for (int k = 0; k < 2; k++) {
		bp->h[k] = malloc(NP * sizeof(float));
		assert_non_null(bp->h[k]);
		for (int i = 0; i < NVEC; i++) {
			assert_int_equal(rc_bk_vec_new(bp->b[k], space_of(i), &bp->v[k][i], &err), 0);
			test_data(data, count_of(i), 1000u + (uint32_t)i);
			assert_int_equal(rc_bk_upload(bp->b[k], bp->v[k][i], data, &err), 0);
		}
	}
	free(data);
}

static void bpair_close(bpair *bp)
{
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < NVEC; i++)
			rc_bk_vec_free(bp->b[k], bp->v[k][i]);
		rc_backend_free(bp->b[k]);
		free(bp->h[k]);
	}
	rc_exec_free(bp->x);
	rc_engine_free(bp->cpu);
}

/* Vector i on both backends: element by element identical (tol 0), or
 * within tol relative L2 (projections). */
static void bpair_check(bpair *bp, int i, double tol, const char *what)
{
	rc_err err;
	const size_t n = count_of(i);
	for (int k = 0; k < 2; k++)
		assert_int_equal(rc_bk_download(bp->b[k], bp->v[k][i], bp->h[k], &err), 0);
	size_t diff = 0;
	for (size_t j = 0; j < n; j++)
		diff += memcmp(&bp->h[0][j], &bp->h[1][j], sizeof(float)) != 0;
	double d = rel_diff_f(bp->h[0], bp->h[1], n);
	printf("backend %-22s %zu of %zu elements differ, rel diff %.3g\n", what, diff, n, d);
	if (tol == 0)
		assert_true(diff == 0);
	else
		assert_true(d < tol);
}

static void bpair_sums(const double s[2], const char *what)
{
	double d = fabs(s[0] - s[1]) / fmax(fabs(s[1]), 1e-300);
	printf("backend %-22s cuda %.12g host %.12g (rel %.3g)\n", what, s[0], s[1], d);
	/* the host adds float lanes of 256 terms into a double */
	assert_true(d < 1e-5);
}

static void test_backend_ops(void **state)
{
	(void)state;
	rc_err err;
	bpair bp;
	bpair_open(&bp);
	const int f = NVIEWS / 3, l = NVIEWS - 5;
	const float a = 0.37f, neg = -1.25f;
	double s[2], s2[2];
	enum { A, B, C, P, Q, W };
	for (int k = 0; k < 2; k++) {
		rc_backend *b = bp.b[k];
		rc_vec **v = bp.v[k];
		assert_int_equal(rc_bk_fill(b, v[P], 2.5f, f, l, &err), 0);
		assert_int_equal(rc_bk_fill(b, v[Q], -3.0f, 0, -1, &err), 0);
	}
	bpair_check(&bp, P, 0, "fill views [f, l)");
	bpair_check(&bp, Q, 0, "fill all views");
	{
		/* an upload of views [f, l) alone (a streaming FDK's group) */
		float *h = malloc(NP * sizeof(float));
		size_t view = NP / NVIEWS;
		assert_non_null(h);
		assert_int_equal(rc_bk_upload_views(bp.b[0], bp.v[0][Q], PROJ, f, l, &err), 0);
		assert_int_equal(rc_bk_download(bp.b[0], bp.v[0][Q], h, &err), 0);
		for (size_t i = 0; i < NP; i++)
			if (i >= (size_t)f * view && i < (size_t)l * view ? h[i] != PROJ[i] : h[i] != -3.0f)
				fail_msg("upload of views [%d, %d) wrote element %zu wrongly", f, l, i);
		assert_int_equal(rc_bk_fill(bp.b[0], bp.v[0][Q], -3.0f, 0, -1, &err), 0);
		free(h);
	}
	for (int k = 0; k < 2; k++) {
		rc_backend *b = bp.b[k];
		rc_vec **v = bp.v[k];
		assert_int_equal(rc_bk_copy(b, v[Q], v[W], &err), 0);
		assert_int_equal(rc_bk_axpy(b, v[A], &a, v[B], &err), 0);
		assert_int_equal(rc_bk_xpay(b, v[C], v[B], &neg, &err), 0);
	}
	bpair_check(&bp, Q, 0, "copy");
	bpair_check(&bp, A, 0, "axpy");
	bpair_check(&bp, C, 0, "xpay");
	for (int k = 0; k < 2; k++) {
		assert_int_equal(rc_bk_dot(bp.b[k], bp.v[k][A], bp.v[k][C], &s[k], &err), 0);
		assert_int_equal(rc_bk_dot(bp.b[k], bp.v[k][P], NULL, &s2[k], &err), 0);
	}
	bpair_sums(s, "dot");
	bpair_sums(s2, "sum (dot, y NULL)");
	for (int k = 0; k < 2; k++) {
		assert_int_equal(rc_bk_update(bp.b[k], bp.v[k][A], bp.v[k][B], bp.v[k][C], 0.7f, 0, &err), 0);
		assert_int_equal(rc_bk_update(bp.b[k], bp.v[k][C], bp.v[k][A], bp.v[k][B], 1.3f, 1, &err), 0);
		assert_int_equal(rc_bk_mul(bp.b[k], bp.v[k][B], bp.v[k][A], bp.v[k][C], &err), 0);
	}
	bpair_check(&bp, A, 0, "update");
	bpair_check(&bp, C, 0, "update, nonneg");
	bpair_check(&bp, B, 0, "mul");
	for (int k = 0; k < 2; k++) {
		assert_int_equal(rc_bk_inv_guarded(bp.b[k], bp.v[k][W], 1e-3, &err), 0);
		assert_int_equal(rc_bk_inv_guarded(bp.b[k], bp.v[k][A], 1e-6, &err), 0);
	}
	bpair_check(&bp, W, 0, "inv_guarded (proj)");
	bpair_check(&bp, A, 0, "inv_guarded (volume)");
	for (int k = 0; k < 2; k++)
		assert_int_equal(rc_bk_residual(bp.b[k], bp.v[k][Q], bp.v[k][P], bp.v[k][W], f, l, &s[k], &err), 0);
	bpair_check(&bp, Q, 0, "residual, weighted");
	bpair_sums(s, "residual sum");
	for (int k = 0; k < 2; k++)
		assert_int_equal(rc_bk_residual(bp.b[k], bp.v[k][P], bp.v[k][W], NULL, 0, -1, &s[k], &err), 0);
	bpair_check(&bp, P, 0, "residual, plain");
	bpair_sums(s, "residual sum, plain");
	for (int k = 0; k < 2; k++)
		assert_int_equal(rc_bk_ratio(bp.b[k], bp.v[k][Q], bp.v[k][P], 1e-6f, RC_VIEWS_ALL, &s[k], &err), 0);
	bpair_check(&bp, Q, 0, "ratio");
	bpair_sums(s, "ratio sum");

	/* projections: views [f, l) only (the others keep their values), the
	 * back projections of a range */
	float *ph = malloc(NP * sizeof(float));
	assert_non_null(ph);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(rc_bk_upload(bp.b[k], bp.v[k][A], VOL, &err), 0);
		assert_int_equal(rc_bk_upload(bp.b[k], bp.v[k][P], PROJ, &err), 0);
		assert_int_equal(rc_bk_fill(bp.b[k], bp.v[k][Q], -7.0f, 0, -1, &err), 0);
		assert_int_equal(rc_bk_forward(bp.b[k], RC_FP_RAYCAST, bp.v[k][A], bp.v[k][Q], f, l, &err), 0);
	}
	bpair_check(&bp, Q, TOL_EXACT, "forward [f, l)");
	assert_int_equal(rc_bk_download(bp.b[0], bp.v[0][Q], ph, &err), 0);
	const size_t view = rc_geom_view_count(G);
	for (size_t j = 0; j < NP; j++)
		if ((int)(j / view) < f || (int)(j / view) >= l)
			assert_true(ph[j] == -7.0f);
	free(ph);
	for (int kind = 0; kind < 2; kind++) {
		for (int k = 0; k < 2; k++)
			assert_int_equal(rc_bk_back(bp.b[k], (rc_bp_kind)kind, bp.v[k][P], bp.v[k][B], f, l, &err), 0);
		bpair_check(&bp, B, TOL_EXACT, kind ? "back matched [f, l)" : "back voxel [f, l)");
	}
	assert_int_equal(rc_bk_finish(bp.b[0], &err), 0);
	/* every projection counted with its views (backend.h, rc_backend_stats) */
	const rc_backend_stats *st = &bp.b[0]->stats;
	printf("backend stats: forward %ld calls %ld views %.3g s, back %ld calls %ld views %.3g s\n",
	       st->calls[RC_TASK_FORWARD], st->views[RC_TASK_FORWARD], st->seconds[RC_TASK_FORWARD],
	       st->calls[RC_TASK_BACK], st->views[RC_TASK_BACK], st->seconds[RC_TASK_BACK]);
	assert_int_equal(st->calls[RC_TASK_FORWARD], 1);
	assert_int_equal(st->views[RC_TASK_FORWARD], l - f);
	assert_int_equal(st->calls[RC_TASK_BACK], 2);
	assert_int_equal(st->views[RC_TASK_BACK], 2 * (l - f));
	assert_true(st->seconds[RC_TASK_FORWARD] > 0 && st->seconds[RC_TASK_BACK] > 0);
	bpair_close(&bp);
}

/* Cancel after iteration 2 leaves the 2-iteration result; too little memory
 * is refused with a message, and the slab engine still runs the job. */
static void test_cancel_and_too_big(void **state)
{
	(void)state;
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.iterations = 5;
	p.subsets = 3;
	float *a = malloc(NV * sizeof(float)), *b = malloc(NV * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	atomic_int stop = 0;
	trace t;
	memset(&t, 0, sizeof t);
	t.stop = &stop;
	t.stop_after = 2;
	rc_algo_hooks h = {.progress = on_progress, .ud = &t, .cancel = &stop};
	rc_err err;
	rc_cuda_options o;
	rc_cuda_options_default(&o);
	o.fp_interp = RC_CUDA_INTERP_EXACT;
	o.bp_interp = RC_CUDA_INTERP_EXACT;
	assert_int_equal(rc_cuda_run_algo(&p, G, &o, PROJ, a, &h, &err), RC_ECANCELLED);
	assert_int_equal(t.last, 2);
	p.iterations = 2;
	assert_int_equal(rc_cuda_run_algo(&p, G, &o, PROJ, b, NULL, &err), 0);
	assert_true(rel_diff_f(a, b, NV) < 1e-6);

	o.mem_budget = slab_budget();
	o.views_per_launch = 1;
	int rc = rc_cuda_run_algo(&p, G, &o, PROJ, a, NULL, &err);
	printf("resident with %llu bytes: %s\n", (unsigned long long)o.mem_budget, err.msg);
	assert_int_equal(rc, RC_ETOOBIG);
	rc_engine *e = NULL;
	assert_int_equal(rc_engine_cuda_new_opts(G, &o, &e, &err), 0);
	rc_exec *x = NULL;
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	assert_int_equal(rc_algo_run(&p, x, PROJ, a, NULL, &err), 0);
	assert_true(rc_engine_cuda_last_slabs(e) > 1);
	double d = rel_diff_f(a, b, NV);
	printf("sart in slabs vs resident: %.3g\n", d);
	assert_true(d < 1e-3);
	rc_exec_free(x);
	rc_engine_free(e);
	free(a);
	free(b);
}

static void test_device_info(void **state)
{
	(void)state;
	rc_cuda_device_info info;
	rc_err err;
	assert_int_equal(rc_engine_cuda_info(0, &info, &err), 0);
	printf("device 0: %s, %s, %.1f GiB, cc %d.%d, %d SMs\n", info.name, info.device_id,
	       info.total_bytes / 1073741824.0, info.cc_major, info.cc_minor, info.multiprocessors);
	assert_true(info.total_bytes > 0);
	assert_true(info.free_bytes <= info.total_bytes);
	assert_int_equal(strncmp(info.device_id, "cuda:GPU-", 9), 0);
	assert_int_equal(rc_engine_cuda_info(rc_engine_cuda_count(), &info, &err), RC_ENOTFOUND);
}

#ifdef RC_HAVE_CUDA
#include "backend/cuda/engine_cuda_impl.h"

/* ---- the memory plan: host logic, runs without a device ------------------ */

static void check_plan(const cu_plan *p, uint64_t budget, int nz)
{
	assert_true(p->bytes <= budget);
	assert_true(p->zs >= 1 && p->nslabs >= 1);
	assert_true((int64_t)p->zs * p->nslabs >= nz);
	assert_true((int64_t)p->zs * (p->nslabs - 1) < nz);
	assert_true(p->batch >= 1 && p->batch <= RC_CUDA_MAX_BATCH);
}

static void test_plan(void **state)
{
	(void)state;
	rc_cuda_options o;
	rc_cuda_options_default(&o);
	const int all = CU_NEED_VOL | CU_NEED_VOLTEX | CU_NEED_BATCH | CU_NEED_PROJ;
	cu_plan p;
	rc_err err;
	/* plenty: whole volume, every view in one chunk, full batches */
	assert_int_equal(cu_make_plan(G, &o, all, (uint64_t)1 << 40, 0, &p, &err), 0);
	check_plan(&p, (uint64_t)1 << 40, NVOX);
	assert_int_equal(p.nslabs, 1);
	assert_int_equal(p.chunk, NVIEWS);
	assert_int_equal(p.batch, RC_CUDA_MAX_BATCH);
	/* the test's slab budget: two slabs or more, within the budget */
	o.views_per_launch = 1;
	assert_int_equal(cu_make_plan(G, &o, all, slab_budget(), 0, &p, &err), 0);
	check_plan(&p, slab_budget(), NVOX);
	assert_true(p.nslabs >= 2);
	assert_true(p.chunk >= 1);
	/* shrinking budgets: slabs get thinner, never over budget, then refused */
	int prev = NVOX + 1;
	for (uint64_t b = slab_budget(); b > 0; b = b * 3 / 4) {
		int rc = cu_make_plan(G, &o, all, b, 0, &p, &err);
		if (rc) {
			assert_int_equal(rc, RC_ETOOBIG);
			assert_non_null(strstr(err.msg, "MiB"));
			break;
		}
		check_plan(&p, b, NVOX);
		assert_true(p.zs <= prev);
		prev = p.zs;
	}
	/* reserved bytes (the resident algorithms' own buffers) count */
	assert_int_equal(cu_make_plan(G, &o, CU_NEED_VOLTEX, slab_budget(), slab_budget(), &p, &err),
			 RC_ETOOBIG);
	/* the rotated grid needs the whole volume: refused rather than sliced */
	assert_int_equal(cu_make_plan(G, &o, CU_NEED_ROT | CU_NEED_VOLTEX, slab_budget() / 4, 0, &p, &err),
			 RC_ETOOBIG);
}
#endif

/* ---- fan and parallel stacks ------------------------------------------- */

static double rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return sqrt(num / den);
}

static double dot_fd(const float *a, const float *b, size_t n)
{
	double r = 0;
	for (size_t i = 0; i < n; i++)
		r += (double)a[i] * b[i];
	return r;
}

static void test_plane(void **state)
{
	(void)state;
	/* a flat fan, parallel and a curved (equiangular) fan */
	static const rc_geom_type types[3] = { RC_GEOM_FAN, RC_GEOM_PARALLEL, RC_GEOM_FAN };
	static const char *const name[3] = { "fan", "parallel", "curved" };
	double ang[NVIEWS];
	for (int k = 0; k < NVIEWS; k++)
		ang[k] = 360.0 * k / NVIEWS + 1.5;
	const rc_volume_desc v = { NVOX, NVOX + 2, 2, 1.0, 0.9, 1.0, 0.4, -0.3, 0 };
	for (int t = 0; t < 3; t++) {
		rc_geom_spec sp = { .type = types[t], .nviews = NVIEWS, .det = { 2 * NVOX, 1, 1.0, 1.0, 0.35, 0 },
				    .source_isocenter_mm = 200, .source_detector_mm = 300, .angles_deg = ang };
		if (t == 2) {
			/* a wide fan (+-23 degrees at NVOX 20, +-46 at 40), the
			 * source 60 mm from the axis, the arc 100 mm from it */
			sp.det = (rc_detector_desc){ 2 * NVOX, 1, 2.0, 1.0, 0.35, 0, RC_DETECTOR_CURVED };
			sp.source_isocenter_mm = 60;
			sp.source_detector_mm = 100;
		}
		rc_geom *g = NULL;
		rc_err err;
		assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), 0);
		size_t np = rc_geom_proj_count(g), nv = rc_volume_count(&v);
		float *x = malloc(nv * sizeof(float)), *y = malloc(np * sizeof(float));
		float *pc = malloc(np * sizeof(float)), *pg = malloc(np * sizeof(float));
		float *bc = malloc(nv * sizeof(float)), *bg = malloc(nv * sizeof(float));
		uint32_t seed = 7;
		for (size_t i = 0; i < nv; i++)
			x[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f;
		for (size_t i = 0; i < np; i++)
			y[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f;
		rc_engine *cu = NULL, *cpu = NULL;
		assert_int_equal(rc_engine_cuda_new(g, 0, &cu, &err), 0);
		assert_int_equal(rc_engine_cpu_new(g, 0, &cpu, &err), 0);
		static const int ranges[2][2] = { { 0, NVIEWS }, { 5, NVIEWS - 7 } };
		for (int r = 0; r < 2; r++) {
			int f = ranges[r][0], l = ranges[r][1];
			/* FBP's back projection */
			assert_int_equal(rc_engine_back(cu, RC_BP_VOXEL, y, bg, f, l, &err), 0);
			assert_int_equal(rc_engine_back(cpu, RC_BP_VOXEL, y, bc, f, l, &err), 0);
			double d_voxel = rel_l2(bg, bc, nv);
			/* the Joseph pair; pc/pg zero outside views f..l */
			memset(pc, 0, np * sizeof(float));
			memset(pg, 0, np * sizeof(float));
			assert_int_equal(rc_engine_forward(cu, RC_FP_RAYCAST, x, pg, f, l, &err), 0);
			assert_int_equal(rc_engine_forward(cpu, RC_FP_RAYCAST, x, pc, f, l, &err), 0);
			double d_fwd = rel_l2(pg, pc, np);
			assert_int_equal(rc_engine_back(cu, RC_BP_MATCHED, y, bg, f, l, &err), 0);
			assert_int_equal(rc_engine_back(cpu, RC_BP_MATCHED, y, bc, f, l, &err), 0);
			double d_back = rel_l2(bg, bc, nv);
			double lhs = dot_fd(pg, y, np), rhs = dot_fd(x, bg, nv), gap = fabs(lhs - rhs) / fabs(lhs);
			print_message("%s views %d..%d: CUDA vs CPU engine: FBP back %.2e, forward %.2e, matched back "
				      "%.2e; adjoint gap %.2e\n",
				      name[t], f, l, d_voxel, d_fwd, d_back, gap);
			assert_true(d_voxel <= 1e-5 && d_fwd <= 1e-5 && d_back <= 1e-5 && gap <= 1e-5);
		}
		assert_int_equal(rc_engine_forward(cu, RC_FP_ROTATE, x, pg, 0, NVIEWS, &err), RC_EUNSUPPORTED);
		/* an algorithm over each engine: CGLS's iterates agree */
		rc_phantom *ph = NULL;
		rc_ellipsoid el = { { 0.5, -0.5, 0 }, { 7, 7, 1000 }, 0, 0.02 };
		assert_int_equal(rc_phantom_new(&el, 1, &ph, &err), 0);
		assert_int_equal(rc_phantom_project(ph, g, 0, pc, &err), 0);
		rc_phantom_free(ph);
		rc_algo_params a;
		rc_algo_params_plain(&a, RC_ALGO_CGLS);
		a.iterations = 5;
		rc_exec *xc = NULL, *xg = NULL;
		assert_int_equal(rc_exec_new(&cpu, 1, &xc, &err), 0);
		assert_int_equal(rc_exec_new(&cu, 1, &xg, &err), 0);
		assert_int_equal(rc_algo_run(&a, xc, pc, bc, NULL, &err), 0);
		assert_int_equal(rc_algo_run(&a, xg, pc, bg, NULL, &err), 0);
		double d_cgls = rel_l2(bg, bc, nv);
		print_message("%s CGLS 5 iterations, CUDA vs CPU engine %.2e\n", name[t], d_cgls);
		assert_true(d_cgls <= 1e-4);
		rc_exec_free(xc);
		rc_exec_free(xg);
		rc_engine_free(cu);
		rc_engine_free(cpu);
		rc_geom_free(g);
		free(x);
		free(y);
		free(pc);
		free(pg);
		free(bc);
		free(bg);
	}
}

/* ---- TV on the device, accumulating back projection ----------------------- */
#ifdef RC_HAVE_CUDA /* the launcher and the device buffers of test_tv */

/* tv_host.h's operator on the CUDA backend (kernels/cuda/tv.cu) against the
 * host backend's (tv_host.c) on the same random volumes, eps from 1e-6 to
 * 10, w != d and w == d; then the launcher alone on planar and
 * single-voxel-sided shapes.  Max |cuda - host| / max |host| <= 1e-5. */
static double max_rel(const float *a, const float *b, size_t n)
{
	double peak = 0, diff = 0;
	for (size_t i = 0; i < n; i++) {
		peak = fmax(peak, fabs(b[i]));
		diff = fmax(diff, fabs((double)a[i] - b[i]));
	}
	return peak > 0 ? diff / peak : diff;
}

static void test_tv(void **state)
{
	(void)state;
	rc_err err;
	bpair bp;
	bpair_open(&bp);
	static const float epss[] = { 1e-6f, 0.2f, 10.0f };
	double worst = 0;
	for (size_t e = 0; e < sizeof epss / sizeof epss[0]; e++)
		for (int same = 0; same < 2; same++) {
			for (int k = 0; k < 2; k++) {
				rc_vec *const *v = bp.v[k];
				assert_int_equal(bp.b[k]->ops->tv_apply(bp.b[k], v[0], same ? v[0] : v[1], v[2], epss[e],
									&err),
						 0);
				assert_int_equal(rc_bk_download(bp.b[k], v[2], bp.h[k], &err), 0);
			}
			worst = fmax(worst, max_rel(bp.h[0], bp.h[1], NV));
		}
	printf("tv_apply: cuda backend vs host, worst max |cuda - host| / max |host| %.3g\n", worst);
	assert_true(worst <= 1e-5);
	bpair_close(&bp);

	static const rc_tv_shape shapes[] = { { 13, 11, 5, 1 }, { 1, 9, 4, 0 }, { 9, 1, 4, 0 }, { 7, 6, 1, 0 } };
	uint32_t seed = 7;
	worst = 0;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		const rc_tv_shape *sh = &shapes[i];
		size_t n = (size_t)sh->nx * sh->ny * sh->nz, bytes = n * sizeof(float);
		float *w = malloc(bytes), *d = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
		float *dw = NULL, *dd = NULL, *dout = NULL;
		assert_true(w && d && want && got);
		test_data(w, n, seed++);
		test_data(d, n, seed++);
		assert_int_equal(cudaMalloc((void **)&dw, bytes), cudaSuccess);
		assert_int_equal(cudaMalloc((void **)&dd, bytes), cudaSuccess);
		assert_int_equal(cudaMalloc((void **)&dout, bytes), cudaSuccess);
		assert_int_equal(cudaMemcpy(dw, w, bytes, cudaMemcpyHostToDevice), cudaSuccess);
		assert_int_equal(cudaMemcpy(dd, d, bytes, cudaMemcpyHostToDevice), cudaSuccess);
		assert_int_equal(rc_tv_apply(sh, w, d, want, 0.05f, 0, &err), 0);
		assert_int_equal(rc_cuda_tv_apply(dw, dd, dout, sh->nx, sh->ny, sh->nz, sh->planar, 0.05f, 0), 0);
		assert_int_equal(cudaMemcpy(got, dout, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
		worst = fmax(worst, max_rel(got, want, n));
		cudaFree(dw), cudaFree(dd), cudaFree(dout);
		free(w), free(d), free(want), free(got);
	}
	printf("tv launcher on planar and single-voxel-sided shapes: worst %.3g\n", worst);
	assert_true(worst <= 1e-5);
}

/* s + back(a) + back(b) = s + back(a u b): the CUDA backend (voxel and
 * matched) and the CUDA engine's host path (in slabs and whole). */
static void test_back_add(void **state)
{
	(void)state;
	rc_err err;
	rc_cuda_options o = exact_opts();
	rc_backend *b = NULL;
	assert_int_equal(rc_backend_cuda_new(G, &o, 0, &b, &err), 0);
	float *s = malloc(NV * sizeof(float)), *got = malloc(NV * sizeof(float)), *want = malloc(NV * sizeof(float));
	assert_true(s && got && want);
	test_data(s, NV, 77u);
	rc_vec *p = NULL, *v = NULL;
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &p, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_VOLUME, &v, &err), 0);
	assert_int_equal(rc_bk_upload(b, p, BALL_PROJ, &err), 0);
	const int a = NVIEWS / 2 + 1;
	for (int kind = RC_BP_VOXEL; kind <= RC_BP_MATCHED; kind++) {
		assert_int_equal(rc_bk_back(b, (rc_bp_kind)kind, p, v, RC_VIEWS_ALL, &err), 0);
		assert_int_equal(rc_bk_download(b, v, want, &err), 0);
		for (size_t i = 0; i < NV; i++)
			want[i] += s[i];
		assert_int_equal(rc_bk_upload(b, v, s, &err), 0);
		assert_int_equal(rc_bk_back_add(b, (rc_bp_kind)kind, p, v, 0, a, &err), 0);
		assert_int_equal(rc_bk_back_add(b, (rc_bp_kind)kind, p, v, a, a, &err), 0);
		assert_int_equal(rc_bk_back_add(b, (rc_bp_kind)kind, p, v, a, NVIEWS, &err), 0);
		assert_int_equal(rc_bk_download(b, v, got, &err), 0);
		double d = rel_diff_f(got, want, NV);
		printf("back_add (%s): cuda backend s + back(a) + back(b) vs s + back(a u b) %.3g\n",
		       kind == RC_BP_VOXEL ? "voxel" : "matched", d);
		assert_true(d < 1e-6);
	}
	rc_bk_vec_free(b, v);
	rc_bk_vec_free(b, p);
	rc_backend_free(b);
	for (int slabs = 0; slabs < 2; slabs++) {
		rc_engine *e = gpu(RC_CUDA_INTERP_EXACT, RC_CUDA_INTERP_EXACT, slabs ? slab_budget() : 0, slabs);
		for (int kind = RC_BP_VOXEL; kind <= RC_BP_MATCHED; kind++) {
			assert_int_equal(rc_engine_back(e, (rc_bp_kind)kind, BALL_PROJ, want, 0, NVIEWS, &err), 0);
			for (size_t i = 0; i < NV; i++)
				want[i] += s[i];
			memcpy(got, s, NV * sizeof(float));
			assert_int_equal(rc_engine_back_add(e, (rc_bp_kind)kind, BALL_PROJ, got, 0, a, &err), 0);
			assert_int_equal(rc_engine_back_add(e, (rc_bp_kind)kind, BALL_PROJ, got, a, NVIEWS, &err), 0);
			double d = rel_diff_f(got, want, NV);
			printf("back_add (%s): cuda engine%s %.3g\n", kind == RC_BP_VOXEL ? "voxel" : "matched",
			       slabs ? " in slabs" : "", d);
			assert_true(d < 1e-6);
		}
		rc_engine_free(e);
	}
	free(s), free(got), free(want);
}

/* Streaming FDK on the CUDA backend (its groups added on the device)
 * equals the batch FDK on it. */
struct feed {
	int next, n;
};

static int feed_views(void *ud, double wait_s, int *list, int max, rc_err *err)
{
	struct feed *f = ud;
	(void)wait_s;
	(void)err;
	int c = 0;
	while (c < 4 && c < max && f->next < f->n) {
		list[c++] = f->n - 1 - f->next; /* last view first */
		f->next++;
	}
	return c;
}

static void test_stream_fdk(void **state)
{
	(void)state;
	rc_err err;
	rc_cuda_options o = exact_opts();
	rc_backend *b = NULL;
	assert_int_equal(rc_backend_cuda_new(G, &o, 0, &b, &err), 0);
	float *batch = malloc(NV * sizeof(float)), *streamed = malloc(NV * sizeof(float));
	assert_true(batch && streamed);
	rc_algo_params p;
	rc_algo_params_default(&p, RC_ALGO_FDK);
	assert_int_equal(rc_algo_run_on(&p, b, PROJ, batch, NULL, &err), 0);
	struct feed f = { .n = NVIEWS };
	rc_algo_hooks h = { .views = feed_views, .ud = &f };
	assert_int_equal(rc_algo_run_on(&p, b, PROJ, streamed, &h, &err), 0);
	double d = rel_diff_f(streamed, batch, NV);
	printf("streaming FDK on the cuda backend vs its batch run %.3g\n", d);
	assert_true(d < 1e-5);
	free(batch), free(streamed);
	rc_backend_free(b);
}

/* The algorithms' defaults (TV on) on the CUDA backend and on the host
 * backend over the CPU engine agree to <= 1e-5 where the projectors are
 * the same definitions in fp32 (EXACT interpolation). */
static void test_defaults_tv(void **state)
{
	(void)state;
	static const rc_algo_name algos[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	float *vc = malloc(NV * sizeof(float)), *vh = malloc(NV * sizeof(float));
	assert_true(vc && vh);
	for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
		rc_algo_params p;
		rc_algo_params_default(&p, algos[a]);
		assert_true(p.tv_weight > 0);
		p.iterations = 2;
		bpair bp;
		bpair_open(&bp);
		rc_err err;
		assert_int_equal(rc_algo_run_on(&p, bp.b[0], PROJ, vc, NULL, &err), 0);
		assert_int_equal(rc_algo_run_on(&p, bp.b[1], PROJ, vh, NULL, &err), 0);
		bpair_close(&bp);
		double d = rel_diff_f(vc, vh, NV);
		printf("%s defaults (TV on): cuda backend vs host backend %.3g\n", rc_algo_name_str(algos[a]), d);
		assert_true(d <= 1e-5);
	}
	free(vc), free(vh);
}
#endif

int main(void)
{
#ifdef RC_HAVE_CUDA
	/* the plan is host code: checked on every machine that builds CUDA */
	const struct CMUnitTest host_tests[] = {cmocka_unit_test(test_plan)};
	if (cmocka_run_group_tests_name("host", host_tests, setup, teardown))
		return 1;
#endif
	if (!rc_engine_cuda_built() || rc_engine_cuda_count() < 1) {
		printf("no CUDA device\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_info),
		cmocka_unit_test(test_bp_voxel),
		cmocka_unit_test(test_fp_ray),
		cmocka_unit_test(test_bp_matched),
		cmocka_unit_test(test_adjoint),
		cmocka_unit_test(test_view_ranges),
		cmocka_unit_test(test_fp_rotate),
		cmocka_unit_test(test_against_cpu),
		cmocka_unit_test(test_slabs),
		cmocka_unit_test(test_backend_ops),
		cmocka_unit_test(test_sart),
		cmocka_unit_test(test_sart_subsets),
		cmocka_unit_test(test_sirt),
		cmocka_unit_test(test_cgls),
		cmocka_unit_test(test_mlem),
		cmocka_unit_test(test_fdk),
		cmocka_unit_test(test_auto_interp),
		cmocka_unit_test(test_cancel_and_too_big),
		cmocka_unit_test(test_plane),
#ifdef RC_HAVE_CUDA
		cmocka_unit_test(test_tv),
		cmocka_unit_test(test_back_add),
		cmocka_unit_test(test_stream_fdk),
		cmocka_unit_test(test_defaults_tv),
#endif
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
