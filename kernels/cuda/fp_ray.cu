/*
 * Ray-casting forward projection with trilinear sampling (paper 002 Alg. 2)
 * and its exact adjoint.
 *
 * Forward: one thread per detector pixel (u fastest: neighbouring threads
 * march neighbouring rays, so the 3-D texture cache serves a warp from a few
 * lines), views of a batch along grid z.  The volume is a 3-D texture of the
 * slab: hardware trilinear filtering (one fetch per sample) or, for the
 * exact variant, eight point fetches combined in fp32.  With z-slabs a
 * sample belongs to the slab that holds floor(z) (clamped to the volume),
 * the slab's texture carries one halo plane above, and the per-slab sums add
 * up to exactly the whole-volume result.
 *
 * Adjoint: the same rays, the same samples (ray.cuh), each scattering
 * value * step * trilinear weight to its eight voxels with atomicAdd; with
 * slabs every slab takes the weights of the voxels it owns.
 */
#include "ray.cuh"

#include <cuda_runtime.h>

template <bool EXACT>
__device__ __forceinline__ float sample3(cudaTextureObject_t tex, float x, float y, float z)
{
	if (!EXACT)
		return tex3D<float>(tex, x + 0.5f, y + 0.5f, z + 0.5f);
	float fx = floorf(x), fy = floorf(y), fz = floorf(z);
	float ax = x - fx, ay = y - fy, az = z - fz;
	float x0 = fx + 0.5f, y0 = fy + 0.5f, z0 = fz + 0.5f;
	float c000 = tex3D<float>(tex, x0, y0, z0);
	float c100 = tex3D<float>(tex, x0 + 1.0f, y0, z0);
	float c010 = tex3D<float>(tex, x0, y0 + 1.0f, z0);
	float c110 = tex3D<float>(tex, x0 + 1.0f, y0 + 1.0f, z0);
	float c001 = tex3D<float>(tex, x0, y0, z0 + 1.0f);
	float c101 = tex3D<float>(tex, x0 + 1.0f, y0, z0 + 1.0f);
	float c011 = tex3D<float>(tex, x0, y0 + 1.0f, z0 + 1.0f);
	float c111 = tex3D<float>(tex, x0 + 1.0f, y0 + 1.0f, z0 + 1.0f);
	float c00 = (1.0f - ax) * c000 + ax * c100;
	float c10 = (1.0f - ax) * c010 + ax * c110;
	float c01 = (1.0f - ax) * c001 + ax * c101;
	float c11 = (1.0f - ax) * c011 + ax * c111;
	float c0 = (1.0f - ay) * c00 + ay * c10;
	float c1 = (1.0f - ay) * c01 + ay * c11;
	return (1.0f - az) * c0 + az * c1;
}

template <bool EXACT, bool SLAB>
__global__ void __launch_bounds__(256)
rc_k_fp_ray(cudaTextureObject_t tex, const rc_cuda_ray_batch b, const rc_cuda_ray_vol rv,
	    float *__restrict__ proj, int accumulate)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	const int j = blockIdx.y * blockDim.y + threadIdx.y;
	const int k = blockIdx.z;
	if (i >= rv.nu || j >= rv.nv)
		return;
	float sum = 0.0f;
	rc_ray r;
	if (rc_ray_setup(b.v[k], rv, i, j, &r)) {
		int k0 = 0, k1 = r.n;
		if (SLAB)
			rc_ray_zrange(r, rv.step, rv.z0 == 0 ? -1.0e30f : (float)rv.z0,
				      rv.z1 == rv.nz ? 1.0e30f : (float)rv.z1, &k0, &k1);
		const float tz = (float)rv.tz0;
		/* unrolled so that several independent fetches are in flight */
#pragma unroll 4
		for (int s = k0; s < k1; s++) {
			const float t = r.t_in + ((float)s + 0.5f) * rv.step;
			const float x = r.ax + t * r.bx, y = r.ay + t * r.by, z = r.az + t * r.bz;
			if (SLAB) {
				int oz = (int)floorf(z);
				oz = oz < 0 ? 0 : (oz >= rv.nz ? rv.nz - 1 : oz);
				if (oz < rv.z0 || oz >= rv.z1)
					continue;
			}
			sum += sample3<EXACT>(tex, x, y, z - tz);
		}
		sum *= rv.step;
	}
	const size_t idx = ((size_t)k * rv.nv + j) * rv.nu + i;
	proj[idx] = accumulate ? proj[idx] + sum : sum;
}

extern "C" int rc_cuda_launch_fp_ray(cudaTextureObject_t tex, const rc_cuda_ray_batch *b,
				     const rc_cuda_ray_vol *rv, float *proj, int accumulate,
				     int exact, cudaStream_t s)
{
	dim3 block(32, 8, 1);
	dim3 grid((rv->nu + 31) / 32, (rv->nv + 7) / 8, b->n);
	const bool slab = rv->z0 != 0 || rv->z1 != rv->nz;
	if (exact && slab)
		rc_k_fp_ray<true, true><<<grid, block, 0, s>>>(tex, *b, *rv, proj, accumulate);
	else if (exact)
		rc_k_fp_ray<true, false><<<grid, block, 0, s>>>(tex, *b, *rv, proj, accumulate);
	else if (slab)
		rc_k_fp_ray<false, true><<<grid, block, 0, s>>>(tex, *b, *rv, proj, accumulate);
	else
		rc_k_fp_ray<false, false><<<grid, block, 0, s>>>(tex, *b, *rv, proj, accumulate);
	return (int)cudaGetLastError();
}

__device__ __forceinline__ void scatter1(float *vol, const rc_cuda_ray_vol &rv, int x, int y, int z,
					 float w)
{
	if (x < 0 || x >= rv.nx || y < 0 || y >= rv.ny || z < rv.z0 || z >= rv.z1 || w == 0.0f)
		return;
	atomicAdd(vol + ((size_t)(z - rv.z0) * rv.ny + y) * rv.nx + x, w);
}

__global__ void __launch_bounds__(256)
rc_k_bp_matched(const float *__restrict__ proj, const rc_cuda_ray_batch b, const rc_cuda_ray_vol rv,
		float *vol)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	const int j = blockIdx.y * blockDim.y + threadIdx.y;
	const int k = blockIdx.z;
	if (i >= rv.nu || j >= rv.nv)
		return;
	const float val = proj[((size_t)k * rv.nv + j) * rv.nu + i] * rv.step;
	rc_ray r;
	if (val == 0.0f || !rc_ray_setup(b.v[k], rv, i, j, &r))
		return;
	int k0, k1;
	/* samples whose footprint (floor(z), floor(z)+1) meets [z0, z1) */
	rc_ray_zrange(r, rv.step, rv.z0 == 0 ? -1.0e30f : (float)(rv.z0 - 1),
		      rv.z1 == rv.nz ? 1.0e30f : (float)rv.z1, &k0, &k1);
	for (int s = k0; s < k1; s++) {
		const float t = r.t_in + ((float)s + 0.5f) * rv.step;
		const float x = r.ax + t * r.bx, y = r.ay + t * r.by, z = r.az + t * r.bz;
		const float fx = floorf(x), fy = floorf(y), fz = floorf(z);
		const float ax = x - fx, ay = y - fy, az = z - fz;
		const int x0 = (int)fx, y0 = (int)fy, z0 = (int)fz;
		if (z0 + 1 < rv.z0 || z0 >= rv.z1)
			continue;
		scatter1(vol, rv, x0, y0, z0, val * (1.0f - ax) * (1.0f - ay) * (1.0f - az));
		scatter1(vol, rv, x0 + 1, y0, z0, val * ax * (1.0f - ay) * (1.0f - az));
		scatter1(vol, rv, x0, y0 + 1, z0, val * (1.0f - ax) * ay * (1.0f - az));
		scatter1(vol, rv, x0 + 1, y0 + 1, z0, val * ax * ay * (1.0f - az));
		scatter1(vol, rv, x0, y0, z0 + 1, val * (1.0f - ax) * (1.0f - ay) * az);
		scatter1(vol, rv, x0 + 1, y0, z0 + 1, val * ax * (1.0f - ay) * az);
		scatter1(vol, rv, x0, y0 + 1, z0 + 1, val * (1.0f - ax) * ay * az);
		scatter1(vol, rv, x0 + 1, y0 + 1, z0 + 1, val * ax * ay * az);
	}
}

extern "C" int rc_cuda_launch_bp_matched(const float *proj, const rc_cuda_ray_batch *b,
					 const rc_cuda_ray_vol *rv, float *vol, cudaStream_t s)
{
	dim3 block(32, 8, 1);
	dim3 grid((rv->nu + 31) / 32, (rv->nv + 7) / 8, b->n);
	rc_k_bp_matched<<<grid, block, 0, s>>>(proj, *b, *rv, vol);
	return (int)cudaGetLastError();
}
