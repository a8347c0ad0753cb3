/*
 * ray: the sampling rule shared by the ray-casting forward projector and its
 * exact adjoint, so that both visit the same points with the same weights.
 *
 * In continuous voxel indices of the whole volume the box is [-1, n] per
 * axis: the support of the trilinear interpolant with zero outside, so a
 * uniform volume integrates exactly (clipping at the voxel faces would lose
 * a quarter voxel at each face).  The ray x(t) = a + t*b, t in mm along the
 * unit world direction, enters at t_in and leaves at t_out; samples sit at
 * the midpoints t_k = t_in + (k + 1/2) * step for k < ceil((t_out - t_in) /
 * step), each standing for a length `step`.  This is the CPU and OpenCL
 * engines' definition (core/proj_raycast.c, kernels/opencl/fp_raycast.cl).
 */
#ifndef RC_RAY_CUH
#define RC_RAY_CUH

#include "backend/cuda/cuda_kernels.h"

struct rc_ray {
	float ax, ay, az;   /* origin, voxel index units */
	float bx, by, bz;   /* direction per mm, voxel index units */
	float t_in;
	int n;              /* samples */
};

__device__ __forceinline__ bool rc_clip_axis(float a, float b, float lo, float hi,
					     float *tmin, float *tmax)
{
	if (b == 0.0f)
		return a >= lo && a <= hi;
	float t0 = (lo - a) / b, t1 = (hi - a) / b;
	*tmin = fmaxf(*tmin, fminf(t0, t1));
	*tmax = fminf(*tmax, fmaxf(t0, t1));
	return true;
}

/* false when the ray misses the volume */
__device__ __forceinline__ bool rc_ray_setup(const rc_cuda_ray_view &v, const rc_cuda_ray_vol &rv,
					     int i, int j, rc_ray *r)
{
	const float fi = (float)i, fj = (float)j;
	float dx = v.M[0] * fi + v.M[1] * fj + v.M[2];
	float dy = v.M[3] * fi + v.M[4] * fj + v.M[5];
	float dz = v.M[6] * fi + v.M[7] * fj + v.M[8];
	/* world length of the index-space direction */
	float L = sqrtf((dx * rv.vox[0]) * (dx * rv.vox[0]) + (dy * rv.vox[1]) * (dy * rv.vox[1]) +
			(dz * rv.vox[2]) * (dz * rv.vox[2]));
	r->ax = v.a[0];
	r->ay = v.a[1];
	r->az = v.a[2];
	r->bx = dx / L;
	r->by = dy / L;
	r->bz = dz / L;
	float tmin = 0.0f, tmax = 3.0e38f;
	if (!rc_clip_axis(r->ax, r->bx, -1.0f, (float)rv.nx, &tmin, &tmax) ||
	    !rc_clip_axis(r->ay, r->by, -1.0f, (float)rv.ny, &tmin, &tmax) ||
	    !rc_clip_axis(r->az, r->bz, -1.0f, (float)rv.nz, &tmin, &tmax) || tmax <= tmin)
		return false;
	r->t_in = tmin;
	r->n = (int)ceilf((tmax - tmin) / rv.step);
	return r->n > 0;
}

/* Samples k in [*k0, *k1) whose z index may lie in [zlo, zhi) (a superset:
 * callers still check each sample); the whole range when zlo/zhi are open. */
__device__ __forceinline__ void rc_ray_zrange(const rc_ray &r, float step, float zlo, float zhi,
					      int *k0, int *k1)
{
	*k0 = 0;
	*k1 = r.n;
	if (r.bz == 0.0f)
		return;
	float t0 = (zlo - r.az) / r.bz, t1 = (zhi - r.az) / r.bz;
	float tlo = fminf(t0, t1), thi = fmaxf(t0, t1);
	float klo = floorf((tlo - r.t_in) / step - 0.5f) - 1.0f;
	float khi = ceilf((thi - r.t_in) / step - 0.5f) + 1.0f;
	if (klo > 0.0f)
		*k0 = klo > (float)r.n ? r.n : (int)klo;
	if (khi < (float)r.n)
		*k1 = khi < 0.0f ? 0 : (int)khi;
}

#endif
