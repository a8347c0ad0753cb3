/*
 * Voxel-driven back projection (paper 002 Eq. 1, RabbitCT): every voxel
 * projects through each view's 3x4 matrix, reads the view bilinearly at
 * (u, v) and adds it with the weight 1/w^2.
 *
 * Layout of the work: a block of 32 x 8 threads covers 32 x 8 columns (x
 * fastest, so a warp's reads of one view are neighbouring texels: one
 * texture cache line set) and each thread walks RC_CUDA_BP_ZPT voxels in z,
 * keeping their sums in registers across all views of the batch (ASTRA
 * cone_bp.cu does the same with 8).  Along z the projected coordinates are
 * affine in iz, so the thread steps (u*w, v*w, w) by the matrix's third
 * column instead of recomputing them.  The views come as one layered 2-D
 * texture per batch; the matrices as a kernel parameter (constant bank).
 * Global memory is touched once per voxel and batch: the read-modify-write
 * of the partial sum.
 */
#include "backend/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

template <bool EXACT>
__device__ __forceinline__ float sample2(cudaTextureObject_t tex, float u, float v, int k)
{
	if (!EXACT)
		/* texel i covers [i, i+1) in texture coordinates; pixel centres
		 * are integers in ours */
		return tex2DLayered<float>(tex, u + 0.5f, v + 0.5f, k);
	float fu = floorf(u), fv = floorf(v);
	float au = u - fu, av = v - fv;
	float x0 = fu + 0.5f, y0 = fv + 0.5f;
	/* point filtering, border 0: the CPU engine's zero-padded bilinear */
	float p00 = tex2DLayered<float>(tex, x0, y0, k);
	float p10 = tex2DLayered<float>(tex, x0 + 1.0f, y0, k);
	float p01 = tex2DLayered<float>(tex, x0, y0 + 1.0f, k);
	float p11 = tex2DLayered<float>(tex, x0 + 1.0f, y0 + 1.0f, k);
	return (1.0f - av) * ((1.0f - au) * p00 + au * p10) + av * ((1.0f - au) * p01 + au * p11);
}

template <bool EXACT>
__global__ void __launch_bounds__(256)
rc_k_bp_voxel(cudaTextureObject_t tex, const rc_cuda_bp_batch b, float *__restrict__ vol,
	      int nx, int ny, int nz, int accumulate)
{
	const int ix = blockIdx.x * blockDim.x + threadIdx.x;
	const int iy = blockIdx.y * blockDim.y + threadIdx.y;
	const int iz0 = blockIdx.z * RC_CUDA_BP_ZPT;
	if (ix >= nx || iy >= ny)
		return;
	float acc[RC_CUDA_BP_ZPT];
#pragma unroll
	for (int j = 0; j < RC_CUDA_BP_ZPT; j++)
		acc[j] = 0.0f;
	const float fx = (float)ix, fy = (float)iy, fz = (float)iz0;
	for (int k = 0; k < b.n; k++) {
		const float *P = b.P[k];
		float uw = P[0] * fx + P[1] * fy + P[2] * fz + P[3];
		float vw = P[4] * fx + P[5] * fy + P[6] * fz + P[7];
		float w = P[8] * fx + P[9] * fy + P[10] * fz + P[11];
#pragma unroll
		for (int j = 0; j < RC_CUDA_BP_ZPT; j++) {
			const float rw = 1.0f / w;
			acc[j] += rw * rw * sample2<EXACT>(tex, uw * rw, vw * rw, k);
			uw += P[2];
			vw += P[6];
			w += P[10];
		}
	}
	const size_t plane = (size_t)nx * (size_t)ny;
	size_t idx = (size_t)iz0 * plane + (size_t)iy * nx + ix;
#pragma unroll
	for (int j = 0; j < RC_CUDA_BP_ZPT; j++) {
		if (iz0 + j < nz)
			vol[idx] = accumulate ? vol[idx] + acc[j] : acc[j];
		idx += plane;
	}
}

extern "C" int rc_cuda_launch_bp_voxel(cudaTextureObject_t tex, const rc_cuda_bp_batch *b,
				       float *vol, int nx, int ny, int nz, int accumulate,
				       int exact, cudaStream_t s)
{
	/* 32 x 8: a warp is one row of 32 x voxels; 8 rows give 256 threads,
	 * enough warps per SM to hide the texture latency (Zinsser and Keck,
	 * and ASTRA's 32 x 16 x 8 choice, tune around this). */
	dim3 block(32, 8, 1);
	dim3 grid((nx + 31) / 32, (ny + 7) / 8, (nz + RC_CUDA_BP_ZPT - 1) / RC_CUDA_BP_ZPT);
	if (exact)
		rc_k_bp_voxel<true><<<grid, block, 0, s>>>(tex, *b, vol, nx, ny, nz, accumulate);
	else
		rc_k_bp_voxel<false><<<grid, block, 0, s>>>(tex, *b, vol, nx, ny, nz, accumulate);
	return (int)cudaGetLastError();
}
