/* tv_host: the total-variation operator on the host (tv_host.h). */
#include "backend/tv_host.h"

#include <math.h>

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

/* W(w) at voxel i */
static inline float weight(const rc_tv_shape *s, const float *w, size_t i, int ix, int iy, int iz, float eps2)
{
	float dx, dy, dz;
	diffs(s, w, i, ix, iy, iz, &dx, &dy, &dz);
	return 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + eps2);
}

typedef struct apply_job {
	const rc_tv_shape *s;
	const float *w, *d;
	float *out;
	float eps2;
} apply_job;

/* Voxel i enters its own term (through its three differences) and the
 * terms of its lower neighbours in x, y and z (through one each). */
static void apply_slice(void *ud, int worker, int iz)
{
	(void)worker;
	const apply_job *j = ud;
	const rc_tv_shape *s = j->s;
	const size_t sy = (size_t)s->nx, sz = sy * (size_t)s->ny;
	const float *d = j->d;
	for (int iy = 0; iy < s->ny; iy++) {
		size_t row = (size_t)iz * sz + (size_t)iy * sy;
		for (int ix = 0; ix < s->nx; ix++) {
			size_t i = row + (size_t)ix;
			float dx, dy, dz, o;
			diffs(s, d, i, ix, iy, iz, &dx, &dy, &dz);
			o = -(dx + dy + dz) * weight(s, j->w, i, ix, iy, iz, j->eps2);
			if (ix > 0)
				o += (d[i] - d[i - 1]) * weight(s, j->w, i - 1, ix - 1, iy, iz, j->eps2);
			if (iy > 0)
				o += (d[i] - d[i - sy]) * weight(s, j->w, i - sy, ix, iy - 1, iz, j->eps2);
			if (!s->planar && iz > 0)
				o += (d[i] - d[i - sz]) * weight(s, j->w, i - sz, ix, iy, iz - 1, j->eps2);
			j->out[i] = o;
		}
	}
}

void rc_tv_apply(const rc_tv_shape *s, const float *w, const float *d, float *out, float eps, int threads)
{
	apply_job j = { .s = s, .w = w, .d = d, .out = out, .eps2 = eps * eps };
	rc_parallel_for(s->nz, threads, apply_slice, &j);
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
