/*
 * Element-wise steps of the resident algorithms (engine_cuda_algo.c) and
 * the one reduction they need, a dot product.  Grid-stride loops with a
 * grid sized from the element count (at most 4 waves of 1024 blocks): these
 * kernels are pure bandwidth, one pass each.  The dot product reduces in
 * double within a block (warp shuffles) and adds one double per block with
 * atomicAdd, so SART's residual and CGLS's alpha/beta keep fp64 sums like
 * the CPU algorithms (algo_util.c).
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

/* block sum of a double into *out (one atomicAdd per block) */
__device__ __forceinline__ void block_add(double v, double *out)
{
#ifdef RC_CUDA_EMU
	/* tools/cuda-emu runs threads one after the other: no shuffles */
	atomicAdd(out, v);
#else
	__shared__ double warp_sum[32];
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, off);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0)
		warp_sum[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < (int)(blockDim.x >> 5) ? warp_sum[lane] : 0.0;
		for (int off = 16; off > 0; off >>= 1)
			v += __shfl_down_sync(0xffffffffu, v, off);
		if (lane == 0)
			atomicAdd(out, v);
	}
#endif
}

__global__ void __launch_bounds__(256)
rc_k_residual(const float *b, float *e, const float *w, size_t n, double *sum2)
{
	double s = 0.0;
	FOR_EACH(i, n)
	{
		const float r = b[i] - e[i];
		s += (double)r * (double)r;
		e[i] = r * w[i];
	}
	block_add(s, sum2);
}

__global__ void rc_k_update(float *x, const float *u, const float *c, float lambda, int nonneg,
			    size_t n)
{
	FOR_EACH(i, n)
	{
		const float v = x[i] + lambda * u[i] * c[i];
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

__global__ void __launch_bounds__(256) rc_k_dot(const float *x, const float *y, size_t n, double *out)
{
	double s = 0.0;
	FOR_EACH(i, n) s += (double)x[i] * (double)y[i];
	block_add(s, out);
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

int rc_cuda_residual(const float *b, float *e, const float *w, size_t n, double *sum2,
		     cudaStream_t s)
{
	LAUNCH(rc_k_residual, n, s, b, e, w, n, sum2);
}

int rc_cuda_update(float *x, const float *u, const float *c, float lambda, int nonneg, size_t n,
		   cudaStream_t s)
{
	LAUNCH(rc_k_update, n, s, x, u, c, lambda, nonneg, n);
}

int rc_cuda_axpy(float *y, float a, const float *x, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_axpy, n, s, y, a, x, n);
}

int rc_cuda_xpby(float *p, const float *s_, float beta, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_xpby, n, s, p, s_, beta, n);
}

int rc_cuda_dot(const float *x, const float *y, size_t n, double *out, cudaStream_t s)
{
	LAUNCH(rc_k_dot, n, s, x, y, n, out);
}

}
