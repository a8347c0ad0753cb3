/*
 * Element-wise steps of the resident algorithms (engine_cuda_algo.c) and
 * the one reduction they need, a dot product.  Grid-stride loops with a
 * grid sized from the element count (at most 4 waves of 1024 blocks): these
 * kernels are pure bandwidth, one pass each.  The dot product reduces in
 * double within a block (warp shuffles) and adds one double per block with
 * atomicAdd, so SART's residual and CGLS's alpha/beta keep fp64 sums like
 * the CPU algorithms.
 */
#include "cuda_kernels.h"

#include <cuda_runtime.h>

#define FOR_EACH(i, n) \
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
	     i += (size_t)gridDim.x * blockDim.x)

static dim3 grid_for(size_t n)
{
	size_t blocks = (n + 255) / 256;
	if (blocks > 4096)
		blocks = 4096;
	if (blocks < 1)
		blocks = 1;
	return dim3((unsigned)blocks);
}

__global__ void rc_k_fill(float *x, float v, size_t n)
{
	FOR_EACH(i, n) x[i] = v;
}

__global__ void rc_k_sub(const float *b, const float *ax, float *r, size_t n)
{
	FOR_EACH(i, n) r[i] = b[i] - ax[i];
}

__global__ void rc_k_div_or_zero(float *r, const float *norm, float eps, size_t n)
{
	FOR_EACH(i, n) r[i] = norm[i] > eps ? r[i] / norm[i] : 0.0f;
}

__global__ void rc_k_update_norm(float *x, const float *upd, const float *norm, float lambda,
				 float eps, int nonneg, size_t n)
{
	FOR_EACH(i, n)
	{
		float v = x[i];
		if (norm[i] > eps)
			v += lambda * upd[i] / norm[i];
		x[i] = nonneg ? fmaxf(v, 0.0f) : v;
	}
}

__global__ void rc_k_axpy(float *y, float a, const float *x, size_t n)
{
	FOR_EACH(i, n) y[i] += a * x[i];
}

__global__ void rc_k_xpby(float *p, const float *s, float beta, size_t n)
{
	FOR_EACH(i, n) p[i] = s[i] + beta * p[i];
}

__global__ void rc_k_ratio(const float *b, const float *ax, float *r, float eps, size_t n)
{
	FOR_EACH(i, n) r[i] = ax[i] > eps ? b[i] / ax[i] : 0.0f;
}

__global__ void rc_k_mul_update(float *x, const float *upd, const float *norm, float eps, size_t n)
{
	FOR_EACH(i, n)
	{
		if (norm[i] > eps)
			x[i] *= upd[i] / norm[i];
	}
}

__global__ void __launch_bounds__(256) rc_k_dot(const float *x, const float *y, size_t n, double *out)
{
	__shared__ double warp_sum[8];
	double s = 0.0;
	FOR_EACH(i, n) s += (double)x[i] * (double)y[i];
	for (int off = 16; off > 0; off >>= 1)
		s += __shfl_down_sync(0xffffffffu, s, off);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0)
		warp_sum[warp] = s;
	__syncthreads();
	if (warp == 0) {
		s = lane < (int)(blockDim.x >> 5) ? warp_sum[lane] : 0.0;
		for (int off = 16; off > 0; off >>= 1)
			s += __shfl_down_sync(0xffffffffu, s, off);
		if (lane == 0)
			atomicAdd(out, s);
	}
}

#define LAUNCH(kernel, n, s, ...)                                              \
	do {                                                                   \
		kernel<<<grid_for(n), 256, 0, s>>>(__VA_ARGS__);               \
		return (int)cudaGetLastError();                                \
	} while (0)

extern "C" {

int rc_cuda_fill(float *x, float v, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_fill, n, s, x, v, n);
}

int rc_cuda_sub(const float *b, const float *ax, float *r, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_sub, n, s, b, ax, r, n);
}

int rc_cuda_div_or_zero(float *r, const float *norm, float eps, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_div_or_zero, n, s, r, norm, eps, n);
}

int rc_cuda_update_norm(float *x, const float *upd, const float *norm, float lambda, float eps,
			int nonneg, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_update_norm, n, s, x, upd, norm, lambda, eps, nonneg, n);
}

int rc_cuda_axpy(float *y, float a, const float *x, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_axpy, n, s, y, a, x, n);
}

int rc_cuda_xpby(float *p, const float *s_, float beta, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_xpby, n, s, p, s_, beta, n);
}

int rc_cuda_ratio(const float *b, const float *ax, float *r, float eps, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_ratio, n, s, b, ax, r, eps, n);
}

int rc_cuda_mul_update(float *x, const float *upd, const float *norm, float eps, size_t n,
		       cudaStream_t s)
{
	LAUNCH(rc_k_mul_update, n, s, x, upd, norm, eps, n);
}

int rc_cuda_dot(const float *x, const float *y, size_t n, double *out, cudaStream_t s)
{
	LAUNCH(rc_k_dot, n, s, x, y, n, out);
}

}
