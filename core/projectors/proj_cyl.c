/*
 * proj_cyl: the voxel-driven back projection of a cone geometry with a
 * cylindrical (curved) detector, RC_BP_VOXEL's on that geometry:
 *   f(x) = sum_k  p_k(u_k(x), v_k(x)) / L_k(x)^2,
 * bilinear in the detector with zero outside, (u, v) the cylinder's pixel
 * indices and L the distance from the source in the plane of rotation
 * (rc_geom_cyl_project): FDK's back projection for an equiangular detector
 * (algo_fdk.c) and SART's.  The ray-casting pair needs nothing of its own:
 * it reads every ray from rc_geom_ray, which knows the cylinder.
 *
 * One task per voxel row y (every slice), each summing its voxels in view
 * order: the result does not depend on the number of threads.  u and L
 * depend on a voxel's (x, y) only and v is linear in z along a column
 * (rc_geom_cyl_project), so the mapping is computed once per column and
 * view, and the views are transposed first (a copy of the views
 * back-projected) so that a column reads two contiguous detector columns.
 * Plain C in double: it serves the CPU engine, the only one that runs a
 * curved cone.
 */
#include "projectors/proj_cpu.h"

#include <math.h>
#include <stdlib.h>

struct cyl_job {
	const rc_geom *g;
	const float *proj;
	float *vol;
	int first, last;
	double *acc;  /* per worker: nx * nz sums, [ix][iz] */
	float *tr;    /* views first..last transposed, [k - first][u][v] */
};

/* View k transposed: a voxel column reads two contiguous detector columns. */
static void cyl_transpose(void *ctx, long task, int worker)
{
	(void)worker;
	const struct cyl_job *J = ctx;
	const rc_detector_desc *d = rc_geom_detector(J->g);
	int k = J->first + (int)task;
	const float *in = J->proj + rc_geom_row_offset(J->g, k, 0);
	float *out = J->tr + (size_t)task * (size_t)d->nu * (size_t)d->nv;
	for (int j = 0; j < d->nv; j++)
		for (int i = 0; i < d->nu; i++)
			out[(size_t)i * (size_t)d->nv + (size_t)j] = in[(size_t)j * (size_t)d->nu + (size_t)i];
}

/* One voxel row (iy) of every slice: per view, u and L of each voxel
 * column (x, y) once (they do not depend on z), then v linear in z down
 * the column; sums in double in acc until the last view. */
static void cyl_rows(void *ctx, long task, int worker)
{
	const struct cyl_job *J = ctx;
	const rc_geom *g = J->g;
	const rc_volume_desc *v = rc_geom_volume(g);
	int iy = (int)task;
	size_t n = (size_t)v->nz * (size_t)v->nx;
	double *acc = J->acc + (size_t)worker * n;
	for (size_t i = 0; i < n; i++)
		acc[i] = 0.0;
	const rc_detector_desc *d = rc_geom_detector(g);
	const double nvd = d->nv;
	const size_t nv = (size_t)d->nv;
	for (int k = J->first; k < J->last; k++) {
		const float *view = J->tr + (size_t)(k - J->first) * (size_t)d->nu * nv;
		for (int ix = 0; ix < v->nx; ix++) {
			double X[3], u, v0, L, v1;
			rc_volume_voxel_pos(v, ix, iy, 0, X);
			rc_geom_cyl_project(g, k, X, &u, &v0, &L);
			X[2] += v->vz;
			rc_geom_cyl_project(g, k, X, &u, &v1, &L);
			double fu0 = floor(u);
			if (!(fu0 >= -1 && fu0 < d->nu))
				continue;
			/* the column's two detector columns, a missing one weighted 0 */
			int i0 = (int)fu0, ia = i0 >= 0 ? i0 : i0 + 1, ib = i0 + 1 < d->nu ? i0 + 1 : i0;
			double a = u - fu0, wa = i0 >= 0 ? 1.0 - a : 0.0, wb = i0 + 1 < d->nu ? a : 0.0;
			const float *ca = view + (size_t)ia * nv, *cb = view + (size_t)ib * nv;
			double dvz = v1 - v0, w = 1.0 / (L * L);
			double *col = acc + (size_t)ix * (size_t)v->nz;
			for (int iz = 0; iz < v->nz; iz++) {
				/* floor by truncation above -1 (floor is a call without SSE4.1) */
				double vv = v0 + iz * dvz;
				if (!(vv >= -1.0 && vv < nvd))
					continue;
				int j = (int)(vv + 1.0) - 1;
				double b = vv - j, sum = 0.0;
				if (j >= 0)
					sum += (1.0 - b) * (wa * ca[j] + wb * cb[j]);
				if (j + 1 < d->nv)
					sum += b * (wa * ca[j + 1] + wb * cb[j + 1]);
				col[iz] += w * sum;
			}
		}
	}
	for (int iz = 0; iz < v->nz; iz++) {
		float *out = J->vol + ((size_t)iz * (size_t)v->ny + (size_t)iy) * (size_t)v->nx;
		for (int ix = 0; ix < v->nx; ix++)
			out[ix] = (float)acc[(size_t)ix * (size_t)v->nz + (size_t)iz];
	}
}

int rc_bp_cyl(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	int threads = rc_pool_threads(pool);
	double *acc = malloc(sizeof(double) * (size_t)threads * (size_t)v->nz * (size_t)v->nx);
	float *tr = malloc(sizeof(float) * (size_t)(last - first > 0 ? last - first : 1) * (size_t)d->nu * (size_t)d->nv);
	if (!acc || !tr) {
		free(acc);
		free(tr);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the cylinder back projection's sums and views");
	}
	struct cyl_job J = { g, proj, vol, first, last, acc, tr };
	rc_pool_run(pool, (long)(last - first), cyl_transpose, &J);
	rc_pool_run(pool, (long)v->ny, cyl_rows, &J);
	free(acc);
	free(tr);
	return 0;
}
