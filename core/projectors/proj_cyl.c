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
 * One task per (slice, row) of voxels, each summing its voxels in view
 * order: the result does not depend on the number of threads.  Plain C in
 * double for the mapping (an atan2 and a division per voxel and view): it
 * serves the CPU engine, the only one that runs a curved cone.
 */
#include "projectors/proj_cpu.h"

#include <math.h>

struct cyl_job {
	const rc_geom *g;
	const float *proj;
	float *vol;
	int first, last;
};

/* Bilinear sample of view k at (u, v), zero outside the detector. */
static double sample(const rc_geom *g, const float *proj, int k, double u, double v)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	double fu = floor(u), fv = floor(v);
	if (!(fu >= -1 && fu < d->nu && fv >= -1 && fv < d->nv))
		return 0.0;
	int i0 = (int)fu, j0 = (int)fv;
	double a = u - fu, b = v - fv, s = 0.0;
	const float *base = proj + rc_geom_row_offset(g, k, 0);
	for (int dj = 0; dj < 2; dj++) {
		int j = j0 + dj;
		if (j < 0 || j >= d->nv)
			continue;
		double wj = dj ? b : 1.0 - b;
		for (int di = 0; di < 2; di++) {
			int i = i0 + di;
			if (i < 0 || i >= d->nu)
				continue;
			s += wj * (di ? a : 1.0 - a) * base[(size_t)j * (size_t)d->nu + (size_t)i];
		}
	}
	return s;
}

static void cyl_row(void *ctx, long task, int worker)
{
	(void)worker;
	const struct cyl_job *J = ctx;
	const rc_volume_desc *v = rc_geom_volume(J->g);
	int iz = (int)(task / v->ny), iy = (int)(task % v->ny);
	float *out = J->vol + ((size_t)iz * (size_t)v->ny + (size_t)iy) * (size_t)v->nx;
	for (int ix = 0; ix < v->nx; ix++) {
		double X[3], sum = 0.0;
		rc_volume_voxel_pos(v, ix, iy, iz, X);
		for (int k = J->first; k < J->last; k++) {
			double u, vv, L;
			rc_geom_cyl_project(J->g, k, X, &u, &vv, &L);
			sum += sample(J->g, J->proj, k, u, vv) / (L * L);
		}
		out[ix] = (float)sum;
	}
}

void rc_bp_cyl(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	struct cyl_job J = { g, proj, vol, first, last };
	rc_pool_run(pool, (long)v->nz * v->ny, cyl_row, &J);
}
