/* tv_host: the total-variation operator on the host (tv_host.h). */
#include "backend/tv_host.h"

#include <math.h>
#include <stdlib.h>

#include "util/parfor.h"

/* Forward differences at (ix, iy, iz), zero across the far border (and in
 * z for a planar stack). */
static inline void diffs(const rc_tv_shape *s, const float *x, size_t i, int ix, int iy, int iz, float *dx,
			 float *dy, float *dz)
{
	const size_t sy = (size_t)s->nx, sz = sy * (size_t)s->ny;
	float c = x[i];
	*dx = ix + 1 < s->nx ? x[i + 1] - c : 0.0f;
	*dy = iy + 1 < s->ny ? x[i + sy] - c : 0.0f;
	*dz = !s->planar && iz + 1 < s->nz ? x[i + sz] - c : 0.0f;
}

typedef struct apply_job {
	const rc_tv_shape *s;
	const float *w, *d;
	float *out;
	float eps2;
	float *scratch; /* two slices of weights per worker */
} apply_job;

/* W(w) over slice iz into ws, row by row with the borders' zero
 * differences taken out of the inner loop, so that it vectorises (this file
 * is compiled without math-errno: Makefile). */
static void slice_weights(const rc_tv_shape *s, const float *w, int iz, float eps2, float *restrict ws)
{
	const size_t sy = (size_t)s->nx, sz = sy * (size_t)s->ny;
	const int nx = s->nx, zin = !s->planar && iz + 1 < s->nz;
	for (int iy = 0; iy < s->ny; iy++) {
		const float *r = w + (size_t)iz * sz + (size_t)iy * sy;
		const float *ry = iy + 1 < s->ny ? r + sy : r, *rz = zin ? r + sz : r;
		float *o = ws + (size_t)iy * sy;
		for (int ix = 0; ix < nx - 1; ix++) {
			float dx = r[ix + 1] - r[ix], dy = ry[ix] - r[ix], dz = rz[ix] - r[ix];
			o[ix] = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + eps2);
		}
		float dy = ry[nx - 1] - r[nx - 1], dz = rz[nx - 1] - r[nx - 1];
		o[nx - 1] = 1.0f / sqrtf(0.0f + dy * dy + dz * dz + eps2);
	}
}

/* One voxel's value of the operator with the row's neighbours (apply_slice):
 * its own term, then its lower neighbours' in x, y and z. */
static inline float row_term(const float *d, const float *dy1, const float *dz1, const float *dy0, const float *dz0,
			     const float *w, const float *wy, const float *wz, int ix, int nx)
{
	float c = d[ix];
	float dx = ix + 1 < nx ? d[ix + 1] - c : 0.0f;
	float o = -(dx + (dy1[ix] - c) + (dz1[ix] - c)) * w[ix];
	if (ix > 0)
		o += (c - d[ix - 1]) * w[ix - 1];
	o += (c - dy0[ix]) * wy[ix];
	o += (c - dz0[ix]) * wz[ix];
	return o;
}

/* Voxel i enters its own term (through its three differences) and the
 * terms of its lower neighbours in x, y and z (through one each).  The
 * weights of slice iz and iz - 1 are computed once per slice (each was
 * computed four times per voxel before: 4.4x slower at 128^3). */
static void apply_slice(void *ud, int worker, int iz)
{
	const apply_job *j = ud;
	const rc_tv_shape *s = j->s;
	const size_t sy = (size_t)s->nx, sz = sy * (size_t)s->ny;
	const int nx = s->nx, zin = !s->planar && iz + 1 < s->nz, zlo = !s->planar && iz > 0;
	float *W = j->scratch + (size_t)worker * 2 * sz, *Wz = W + sz;
	slice_weights(s, j->w, iz, j->eps2, W);
	if (zlo)
		slice_weights(s, j->w, iz - 1, j->eps2, Wz);
	for (int iy = 0; iy < s->ny; iy++) {
		const size_t row = (size_t)iz * sz + (size_t)iy * sy;
		const float *d = j->d + row, *dy1 = iy + 1 < s->ny ? d + sy : d, *dz1 = zin ? d + sz : d;
		const float *dy0 = iy > 0 ? d - sy : d, *dz0 = zlo ? d - sz : d;
		const float *w = W + (size_t)iy * sy, *wy = iy > 0 ? w - sy : w, *wz = Wz + (size_t)iy * sy;
		float *out = j->out + row;
		/* dy0 == d (iy = 0) and dz0 == d (no lower slice) make those
		 * terms exactly 0, whatever the weight they are multiplied by */
		if (!zlo)
			wz = w;
		/* the first and last voxel of the row take the border's tests; the
		 * rest is one branch-free loop that vectorises */
		for (int ix = 0; ix < nx; ix += nx > 1 ? nx - 1 : 1)
			out[ix] = row_term(d, dy1, dz1, dy0, dz0, w, wy, wz, ix, nx);
		for (int ix = 1; ix < nx - 1; ix++) {
			float c = d[ix];
			float o = -((d[ix + 1] - c) + (dy1[ix] - c) + (dz1[ix] - c)) * w[ix];
			o += (c - d[ix - 1]) * w[ix - 1];
			o += (c - dy0[ix]) * wy[ix];
			o += (c - dz0[ix]) * wz[ix];
			out[ix] = o;
		}
	}
}

size_t rc_tv_scratch_floats(const rc_tv_shape *s, int threads)
{
	return (size_t)rc_parallel_threads(threads) * 2 * (size_t)s->nx * (size_t)s->ny;
}

void rc_tv_apply_in(const rc_tv_shape *s, const float *w, const float *d, float *out, float eps, int threads,
		    float *scratch)
{
	apply_job j = { .s = s, .w = w, .d = d, .out = out, .eps2 = eps * eps, .scratch = scratch };
	rc_parallel_for(s->nz, rc_parallel_threads(threads), apply_slice, &j);
}

int rc_tv_apply(const rc_tv_shape *s, const float *w, const float *d, float *out, float eps, int threads,
		rc_err *err)
{
	const size_t n = rc_tv_scratch_floats(s, threads);
	float *scratch = malloc(n * sizeof(float));
	if (!scratch)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the TV operator's weights (%zu KiB)",
			       (n * sizeof(float)) >> 10);
	rc_tv_apply_in(s, w, d, out, eps, threads, scratch);
	free(scratch);
	return 0;
}

double rc_tv_value(const rc_tv_shape *s, const float *x, double eps)
{
	double tv = 0.0;
	const size_t sy = (size_t)s->nx, sz = sy * (size_t)s->ny;
	for (int iz = 0; iz < s->nz; iz++)
		for (int iy = 0; iy < s->ny; iy++)
			for (int ix = 0; ix < s->nx; ix++) {
				float dx, dy, dz;
				diffs(s, x, (size_t)iz * sz + (size_t)iy * sy + (size_t)ix, ix, iy, iz, &dx, &dy,
				      &dz);
				tv += sqrt((double)dx * dx + (double)dy * dy + (double)dz * dz + eps * eps);
			}
	return tv;
}
