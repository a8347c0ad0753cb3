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
 * from the source, in place of 1/w^2 (rc_plane_fbp_weight).  Every slice of a stack
 * shares A, so u and w are computed once per view and pixel row and applied
 * to every slice.
 *
 * Tasks are (slice, block of rows); each voxel is summed by one task in view
 * order, so the result does not depend on the number of threads.  Each view's
 * detector row is first copied into a zero-bordered buffer, so the inner loop
 * reads without a bounds test: u is clamped into [-1, nu], where the border
 * holds zeros.
 */
#include "projectors/proj_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/geometry.h"

/* rows per task: enough work per task (a few views x rows x nx) to amortise
 * the task hand-out, few enough that two cores balance on small volumes */
#define PLANE_ROWS 8

struct plane_job {
	const rc_geom *g;
	const float *proj;
	float *vol;
	int first, last;
	int blocks; /* row blocks per slice */
	float **pad; /* per worker: nu + 3 floats */
	float **acc; /* per worker: PLANE_ROWS * nx floats */
};

static void curved_rows(const struct plane_job *J, const float *pad, float *acc, int iz, int y0, int y1, int k);

static void plane_task(void *ud, long task, int worker)
{
	const struct plane_job *J = ud;
	const rc_geom *g = J->g;
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nu = rc_geom_detector(g)->nu, nx = v->nx;
	const int iz = (int)(task / J->blocks), y0 = (int)(task % J->blocks) * PLANE_ROWS;
	const int y1 = y0 + PLANE_ROWS < v->ny ? y0 + PLANE_ROWS : v->ny;
	const int fan = rc_geom_type_of(g) == RC_GEOM_FAN;
	const int curved = fan && rc_geom_detector(g)->shape == RC_DETECTOR_CURVED;
	float *pad = J->pad[worker], *acc = J->acc[worker];
	const float umax = (float)nu;
	memset(acc, 0, sizeof(float) * (size_t)(y1 - y0) * (size_t)nx);
	pad[0] = pad[nu + 1] = pad[nu + 2] = 0.0f;
	for (int k = J->first; k < J->last; k++) {
		const double *A = rc_geom_view(g, k)->A;
		memcpy(pad + 1, J->proj + rc_geom_row_offset(g, k, iz), sizeof(float) * (size_t)nu);
		if (curved) {
			curved_rows(J, pad, acc, iz, y0, y1, k);
			continue;
		}
		for (int iy = y0; iy < y1; iy++) {
			double X[3];
			rc_volume_voxel_pos(v, 0, iy, iz, X);
			/* A (x, y, 1) at the row's first voxel and its step along x */
			const float h0 = (float)(A[0] * X[0] + A[1] * X[1] + A[2]), dh0 = (float)(A[0] * v->vx);
			const float h1 = (float)(A[3] * X[0] + A[4] * X[1] + A[5]), dh1 = (float)(A[3] * v->vx);
			float *a = acc + (size_t)(iy - y0) * nx;
			for (int ix = 0; ix < nx; ix++) {
				float w = h1 + (float)ix * dh1;
				float iw = 1.0f / w;
				float u = (h0 + (float)ix * dh0) * iw;
				u = u < -1.0f ? -1.0f : u > umax ? umax : u;
				float fl = floorf(u), f = u - fl;
				int i = (int)fl + 1; /* pad index of pixel floor(u) */
				float val = pad[i] + f * (pad[i + 1] - pad[i]);
				a[ix] += fan ? val * iw * iw : val;
			}
		}
	}
	float *out = J->vol + ((size_t)iz * v->ny + y0) * nx;
	memcpy(out, acc, sizeof(float) * (size_t)(y1 - y0) * (size_t)nx);
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

/* A curved fan's task: u and the weight per voxel in double (an atan2 each,
 * shared by the slices); rare enough not to need plane_task's float path. */
static void curved_rows(const struct plane_job *J, const float *pad, float *acc, int iz, int y0, int y1, int k)
{
	const rc_geom *g = J->g;
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nu = rc_geom_detector(g)->nu, nx = v->nx;
	for (int iy = y0; iy < y1; iy++) {
		float *a = acc + (size_t)(iy - y0) * nx;
		for (int ix = 0; ix < nx; ix++) {
			double X[3], u;
			rc_volume_voxel_pos(v, ix, iy, iz, X);
			double wt = rc_plane_fbp_weight(g, k, X[0], X[1], &u);
			u = u < -1.0 ? -1.0 : u > nu ? nu : u;
			double fl = floor(u);
			int i = (int)fl + 1;
			float f = (float)(u - fl);
			a[ix] += (pad[i] + f * (pad[i + 1] - pad[i])) * (float)wt;
		}
	}
}

int rc_bp_plane(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const int threads = rc_pool_threads(pool), nu = rc_geom_detector(g)->nu;
	struct plane_job J = { g, proj, vol, first, last, (v->ny + PLANE_ROWS - 1) / PLANE_ROWS, NULL, NULL };
	int rc = 0;
	J.pad = calloc((size_t)threads, sizeof *J.pad);
	J.acc = calloc((size_t)threads, sizeof *J.acc);
	if (!J.pad || !J.acc) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the 2-D back projection");
		goto out;
	}
	for (int t = 0; t < threads; t++) {
		J.pad[t] = malloc(sizeof(float) * ((size_t)nu + 3));
		J.acc[t] = malloc(sizeof(float) * PLANE_ROWS * (size_t)v->nx);
		if (!J.pad[t] || !J.acc[t]) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the 2-D back projection");
			goto out;
		}
	}
	rc_pool_run(pool, (long)v->nz * J.blocks, plane_task, &J);
out:
	for (int t = 0; t < threads; t++) {
		if (J.pad)
			free(J.pad[t]);
		if (J.acc)
			free(J.acc[t]);
	}
	free(J.pad);
	free(J.acc);
	return rc;
}
