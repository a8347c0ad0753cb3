/*
 * proj_plane: voxel-driven back projection of a fan or parallel stack, the
 * 2-D form of paper 002 Eq. 1 that FBP (algo_fdk.c) runs on these
 * geometries:
 *
 *   f(x, y, z) = sum_k  p_k,z(u_k(x, y)) / w_k(x, y)^2,
 *
 * linear in u with zero outside the detector, w the depth in mm (1 for
 * parallel) and u the continuous pixel index, both from the view's in-plane
 * matrix A (geometry.h): (u w, w) = A (x, y, 1).  A curved (equiangular)
 * fan takes u from the angle (rc_geom_plane_u) and 1/L^2, L the distance
 * from the source, in place of 1/w^2 (rc_plane_fbp_weight).
 *
 * Every slice of a stack shares A, so a task (a block of pixel rows and a
 * block of slices) computes each view's tap, fraction and weight once per
 * pixel and applies them to each of its slices: the per-slice loop is two
 * loads and a multiply-add per voxel.
 * Each voxel is summed by one task in view order, so the result does not
 * depend on the number of threads.  Each slice's detector row is copied
 * into a zero-bordered buffer first, so the taps need no bounds test: u is
 * clamped into [-1, nu], where the border holds zeros.
 */
#include "projectors/proj_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/geometry.h"

/* A task: PLANE_ROWS pixel rows of PLANE_SLICES slices.  The taps of a view
 * (rows x nx) are computed once per task and used by its slices, so larger
 * slice blocks amortise them better; the accumulators (slices x rows x nx
 * floats, 256 KB at 512 pixels) stay in L2. */
#define PLANE_ROWS 8
#define PLANE_SLICES 16

struct plane_job {
	const rc_geom *g;
	const float *proj;
	float *vol;
	int first, last;
	int yblocks, zblocks;
	float **scratch; /* per worker: pad, taps and sums (plane_scratch) */
	int accumulate;  /* vol += sums */
};

/* Floats of a worker's scratch: the padded row (nu + 3), the taps' fraction,
 * weight and index (3 x rows x nx; the int32 index in float-sized slots)
 * and the sums (slices x rows x nx). */
static size_t plane_scratch(int nu, int nx)
{
	return (size_t)nu + 3 + (size_t)(3 + PLANE_SLICES) * PLANE_ROWS * (size_t)nx;
}

double rc_plane_fbp_weight(const rc_geom *g, int k, double x, double y, double *u)
{
	double w;
	*u = rc_geom_plane_u(g, k, x, y, &w);
	if (rc_geom_type_of(g) != RC_GEOM_FAN)
		return 1.0;
	if (rc_geom_detector(g)->shape != RC_DETECTOR_CURVED)
		return 1.0 / (w * w);
	/* equiangular FBP weighs by the distance L from the source, not the
	 * depth: 1 / L^2 = cos^2(gamma) / w^2 (Kak & Slaney Eq. 3.179) */
	double c = cos(rc_geom_fan_angle(g, *u));
	return c * c / (w * w);
}

/* Row iy's taps in view k: the pad index of pixel floor(u) (u clamped
 * into [-1, nu]; floor without a libm call, u + 1 >= 0), the fraction and
 * the weight.  A flat detector's u and w are linear fractions along the
 * row, in float (a loop that vectorises); a curved fan's come from the
 * angle, in double. */
static void flat_taps(const rc_geom *g, int k, int iy, int nu, int fan, int32_t *tap, float *frac, float *wt)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const double *A = rc_geom_view(g, k)->A;
	double X[3];
	rc_volume_voxel_pos(v, 0, iy, 0, X);
	const float h0 = (float)(A[0] * X[0] + A[1] * X[1] + A[2]), dh0 = (float)(A[0] * v->vx);
	const float h1 = (float)(A[3] * X[0] + A[4] * X[1] + A[5]), dh1 = (float)(A[3] * v->vx);
	const float umax = (float)nu;
	for (int ix = 0; ix < v->nx; ix++) {
		float w = h1 + (float)ix * dh1, iw = 1.0f / w;
		float u = (h0 + (float)ix * dh0) * iw;
		u = u < -1.0f ? -1.0f : u > umax ? umax : u;
		int i = (int)(u + 1.0f);
		tap[ix] = i;
		frac[ix] = u + 1.0f - (float)i;
		wt[ix] = fan ? iw * iw : 1.0f;
	}
}

static void curved_taps(const rc_geom *g, int k, int iy, int nu, int32_t *tap, float *frac, float *wt)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	for (int ix = 0; ix < v->nx; ix++) {
		double X[3], u;
		rc_volume_voxel_pos(v, ix, iy, 0, X);
		double w = rc_plane_fbp_weight(g, k, X[0], X[1], &u);
		u = u < -1.0 ? -1.0 : u > nu ? nu : u;
		int i = (int)(u + 1.0);
		tap[ix] = i;
		frac[ix] = (float)(u + 1.0 - i);
		wt[ix] = (float)w;
	}
}

static void plane_task(void *ud, long task, int worker)
{
	const struct plane_job *J = ud;
	const rc_geom *g = J->g;
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nu = rc_geom_detector(g)->nu, nx = v->nx;
	const int zb = (int)(task / J->yblocks), y0 = (int)(task % J->yblocks) * PLANE_ROWS;
	const int y1 = y0 + PLANE_ROWS < v->ny ? y0 + PLANE_ROWS : v->ny;
	const int z0 = zb * PLANE_SLICES, z1 = z0 + PLANE_SLICES < v->nz ? z0 + PLANE_SLICES : v->nz;
	const int fan = rc_geom_type_of(g) == RC_GEOM_FAN;
	const int curved = fan && rc_geom_detector(g)->shape == RC_DETECTOR_CURVED;
	const size_t npix = (size_t)(y1 - y0) * nx;
	float *pad = J->scratch[worker], *frac = pad + nu + 3, *wt = frac + npix, *acc = wt + npix;
	int32_t *tap = (int32_t *)(acc + (size_t)PLANE_SLICES * npix);
	memset(acc, 0, sizeof(float) * (size_t)(z1 - z0) * npix);
	pad[0] = pad[nu + 1] = pad[nu + 2] = 0.0f;
	for (int k = J->first; k < J->last; k++) {
		for (int iy = y0; iy < y1; iy++) {
			size_t p0 = (size_t)(iy - y0) * nx;
			if (curved)
				curved_taps(g, k, iy, nu, tap + p0, frac + p0, wt + p0);
			else
				flat_taps(g, k, iy, nu, fan, tap + p0, frac + p0, wt + p0);
		}
		for (int iz = z0; iz < z1; iz++) {
			memcpy(pad + 1, J->proj + rc_geom_row_offset(g, k, iz), sizeof(float) * (size_t)nu);
			float *a = acc + (size_t)(iz - z0) * npix;
			for (size_t p = 0; p < npix; p++) {
				const float *q = pad + tap[p];
				a[p] += (q[0] + frac[p] * (q[1] - q[0])) * wt[p];
			}
		}
	}
	for (int iz = z0; iz < z1; iz++)
		for (int iy = y0; iy < y1; iy++) {
			float *out = J->vol + ((size_t)iz * v->ny + iy) * nx;
			const float *a = acc + (size_t)(iz - z0) * npix + (size_t)(iy - y0) * nx;
			if (!J->accumulate) {
				memcpy(out, a, sizeof(float) * (size_t)nx);
				continue;
			}
			for (int ix = 0; ix < nx; ix++)
				out[ix] += a[ix];
		}
}

int rc_bp_plane(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last, rc_err *err)
{
	return rc_bp_plane_acc(g, pool, proj, vol, first, last, 0, err);
}

int rc_bp_plane_acc(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last,
		    int accumulate, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const int threads = rc_pool_threads(pool), nu = rc_geom_detector(g)->nu;
	struct plane_job J = { g, proj, vol, first, last, (v->ny + PLANE_ROWS - 1) / PLANE_ROWS,
			       (v->nz + PLANE_SLICES - 1) / PLANE_SLICES, NULL, accumulate };
	const size_t floats = plane_scratch(nu, v->nx);
	int rc = 0;
	J.scratch = calloc((size_t)threads, sizeof *J.scratch);
	if (!J.scratch) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the 2-D back projection");
		goto out;
	}
	for (int t = 0; t < threads; t++)
		if (!(J.scratch[t] = malloc(sizeof(float) * floats))) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the 2-D back projection (%zu floats per thread)",
				     floats);
			goto out;
		}
	rc_pool_run(pool, (long)J.zblocks * J.yblocks, plane_task, &J);
out:
	for (int t = 0; J.scratch && t < threads; t++)
		free(J.scratch[t]);
	free(J.scratch);
	return rc;
}
