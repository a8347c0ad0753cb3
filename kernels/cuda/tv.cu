/*
 * tv: the total-variation operator out = D^T W(w) D d of
 * core/backend/tv_host.h on device vectors (the CUDA backend's tv_apply),
 * one thread per voxel of [z][y][x] volumes; kernels/opencl/tv.cl is the
 * same code for OpenCL.
 *
 * Each thread computes the four weights it needs (its own and its lower
 * neighbours' in x, y and z) from w: reads of w's neighbourhood instead of
 * a volume of weights.  Every float operation is tv_host.c's in its order,
 * with __fmul_rn / __fadd_rn where a product meets a sum so that nvcc does
 * not contract them into FMAs the host (-ffp-contract=off) does not have;
 * a border's missing difference is an exact 0 and a voxel without a lower
 * neighbour takes (c - c) times its own weight, as the host does.
 */
#include "backend/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

/* W(w) at voxel i = (ix, iy, iz): 1 / sqrt(|D w|^2 + eps^2) */
__device__ __forceinline__ float tv_weight(const float *w, size_t i, int ix, int iy, int iz, int nx, int ny, int nz,
					   int planar, float eps2)
{
	const size_t sy = (size_t)nx, sz = sy * (size_t)ny;
	const float c = w[i];
	const float dx = ix + 1 < nx ? w[i + 1] - c : 0.0f;
	const float dy = iy + 1 < ny ? w[i + sy] - c : 0.0f;
	const float dz = !planar && iz + 1 < nz ? w[i + sz] - c : 0.0f;
	const float s = __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)), __fmul_rn(dz, dz)), eps2);
	return 1.0f / sqrtf(s);
}

__global__ void __launch_bounds__(256)
rc_k_tv_apply(float *out, const float *w, const float *d, int nx, int ny, int nz, int planar, float eps2)
{
	const size_t sy = (size_t)nx, sz = sy * (size_t)ny, n = sz * (size_t)nz;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		const int ix = (int)(i % sy), iy = (int)(i / sy % (size_t)ny), iz = (int)(i / sz);
		const int zin = !planar && iz + 1 < nz, zlo = !planar && iz > 0;
		const float c = d[i];
		const float dx = ix + 1 < nx ? d[i + 1] - c : 0.0f;
		const float dy1 = iy + 1 < ny ? d[i + sy] : c, dz1 = zin ? d[i + sz] : c;
		const float dy0 = iy > 0 ? d[i - sy] : c, dz0 = zlo ? d[i - sz] : c;
		const float wc = tv_weight(w, i, ix, iy, iz, nx, ny, nz, planar, eps2);
		const float wy = iy > 0 ? tv_weight(w, i - sy, ix, iy - 1, iz, nx, ny, nz, planar, eps2) : wc;
		const float wz = zlo ? tv_weight(w, i - sz, ix, iy, iz - 1, nx, ny, nz, planar, eps2) : wc;
		float o = __fmul_rn(-((dx + (dy1 - c)) + (dz1 - c)), wc);
		if (ix > 0)
			o = __fadd_rn(o, __fmul_rn(c - d[i - 1],
						   tv_weight(w, i - 1, ix - 1, iy, iz, nx, ny, nz, planar, eps2)));
		o = __fadd_rn(o, __fmul_rn(c - dy0, wy));
		o = __fadd_rn(o, __fmul_rn(c - dz0, wz));
		out[i] = o;
	}
}

int rc_cuda_tv_apply(const float *w, const float *d, float *out, int nx, int ny, int nz, int planar, float eps,
		     cudaStream_t s)
{
	const size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
	size_t blocks = (n + 255) / 256;
	blocks = blocks > 65535 ? 65535 : blocks < 1 ? 1 : blocks;
	const float eps2 = eps * eps; /* tv_host.c's, rounded alike */
	rc_k_tv_apply<<<dim3((unsigned)blocks), dim3(256), 0, s>>>(out, w, d, nx, ny, nz, planar, eps2);
	return (int)cudaGetLastError();
}
