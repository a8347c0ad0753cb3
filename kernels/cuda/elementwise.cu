/*
 * The CUDA vector kernels: the element-wise steps of the CUDA backend
 * (core/backend/cuda/backend_cuda.c) and of the tensor backend's device
 * vectors (core/backend/tensor/tensor_gpu.cu), and the reductions they
 * need: sums and dot products in double, the largest element for the
 * guarded inverse.  Grid-stride loops with a grid sized from the element
 * count (at most 4096 blocks of 256): these kernels are pure bandwidth, one
 * pass each.  Residual and ratio take an optional view mask (rc_cuda_views,
 * the tensor backend's [row][slice] stacks), a template argument so that
 * the unmasked kernels carry no test.
 *
 * Numbers.  Each element's formula is core/backend/elementwise_ops.h's,
 * the one core/backend/vec_host.c and elementwise.cl use, with __fmul_rn /
 * __fadd_rn where a product meets a sum, so that nvcc does not contract
 * them into an FMA the host loops (gcc, -ffp-contract=off) do not have: the
 * backends then agree to the last bit element by element.  Sums differ in
 * order only: the host adds float lanes of 256 terms into a double, these
 * kernels add every term in double within a block (warp shuffles) and one
 * double per block with atomicAdd.
 */
#include "backend/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

#include "backend/elementwise_ops.h"

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

/* block maximum of a float >= 0 into *out (its bits; one atomicMax per
 * block).  Non-negative floats order as their bit patterns do. */
__device__ __forceinline__ void block_max(float v, unsigned *out)
{
#ifdef RC_CUDA_EMU
	atomicMax(out, __float_as_uint(v));
#else
	__shared__ float warp_max[32];
	for (int off = 16; off > 0; off >>= 1)
		v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0)
		warp_max[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < (int)(blockDim.x >> 5) ? warp_max[lane] : 0.0f;
		for (int off = 16; off > 0; off >>= 1)
			v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
		if (lane == 0)
			atomicMax(out, __float_as_uint(v));
	}
#endif
}

__global__ void rc_k_fill(float *x, float v, size_t n)
{
	FOR_EACH(i, n) x[i] = v;
}

/* Element i is in the step: always without a mask; with one, when its
 * row's view is in [first, last). */
template <bool VIEWS> __device__ __forceinline__ bool in_views(const rc_cuda_views &m, size_t i)
{
	if (!VIEWS)
		return true;
	const int v = m.rv[i / (size_t)m.nc];
	return v >= m.first && v < m.last;
}

/* rc_vresidual: d = p - e, sum d^2, e = d * w (w NULL: e = d) */
template <bool VIEWS>
__global__ void __launch_bounds__(256)
rc_k_residual(const float *p, float *e, const float *w, size_t n, rc_cuda_views m, double *sum2)
{
	double s = 0.0;
	FOR_EACH(i, n)
	{
		if (!in_views<VIEWS>(m, i))
			continue;
		const float d = rc_ew_residual(p[i], e[i]);
		s += (double)d * (double)d;
		e[i] = w ? rc_ew_weigh(d, w[i]) : d;
	}
	block_add(s, sum2);
}

/* rc_vupdate: v += lambda * u * c ((lambda * u) * c), then max(v, 0) */
__global__ void rc_k_update(float *v, const float *u, const float *c, float lambda, int nonneg,
			    size_t n)
{
	FOR_EACH(i, n) v[i] = rc_ew_update(v[i], u[i], c[i], lambda, nonneg);
}

/* rc_vmul2: v *= u * c, i.e. v * (u * c) */
__global__ void rc_k_mul(float *v, const float *u, const float *c, size_t n)
{
	FOR_EACH(i, n) v[i] = rc_ew_mul(v[i], u[i], c[i]);
}

/* rc_vaxpy: y += a * x */
__global__ void rc_k_axpy(float *y, float a, const float *x, size_t n)
{
	FOR_EACH(i, n) y[i] = rc_ew_axpy(y[i], a, x[i]);
}

/* rc_vxpay: y = x + a * y */
__global__ void rc_k_xpay(float *y, const float *x, float a, size_t n)
{
	FOR_EACH(i, n) y[i] = rc_ew_xpay(x[i], a, y[i]);
}

/* rc_vdot / rc_vsum (y NULL) */
__global__ void __launch_bounds__(256) rc_k_dot(const float *x, const float *y, size_t n, double *out)
{
	double s = 0.0;
	if (y) {
		FOR_EACH(i, n) s += (double)x[i] * (double)y[i];
	} else {
		FOR_EACH(i, n) s += (double)x[i];
	}
	block_add(s, out);
}

/* rc_vinv_guarded, first pass: max(0, max x); NaN is never larger */
__global__ void __launch_bounds__(256) rc_k_max(const float *x, size_t n, unsigned *out)
{
	float m = 0.0f;
	FOR_EACH(i, n) m = rc_ew_max(m, x[i]);
	block_max(m, out);
}

/* rc_vinv_guarded, second pass: eps = (float)(rel * max) */
__global__ void rc_k_inv_guarded(float *x, size_t n, double rel, const unsigned *mx)
{
	const float eps = (float)(rel * (double)__uint_as_float(*mx));
	FOR_EACH(i, n) x[i] = rc_ew_inv_guarded(x[i], eps);
}

/* rc_vratio: d = p - e, sum d^2, e = e > eps ? max(p, 0) / e : 0 */
template <bool VIEWS>
__global__ void __launch_bounds__(256)
rc_k_ratio(float *e, const float *p, float eps, size_t n, rc_cuda_views m, double *sum2)
{
	double s = 0.0;
	FOR_EACH(i, n)
	{
		if (!in_views<VIEWS>(m, i))
			continue;
		const float d = rc_ew_residual(p[i], e[i]);
		s += (double)d * (double)d;
		e[i] = rc_ew_ratio(e[i], p[i], eps);
	}
	block_add(s, sum2);
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

int rc_cuda_residual(const float *p, float *e, const float *w, size_t n, const rc_cuda_views *views,
		     double *sum2, cudaStream_t s)
{
	if (views)
		LAUNCH(rc_k_residual<true>, n, s, p, e, w, n, *views, sum2);
	LAUNCH(rc_k_residual<false>, n, s, p, e, w, n, rc_cuda_views(), sum2);
}

int rc_cuda_update(float *v, const float *u, const float *c, float lambda, int nonneg, size_t n,
		   cudaStream_t s)
{
	LAUNCH(rc_k_update, n, s, v, u, c, lambda, nonneg, n);
}

int rc_cuda_mul(float *v, const float *u, const float *c, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_mul, n, s, v, u, c, n);
}

int rc_cuda_axpy(float *y, float a, const float *x, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_axpy, n, s, y, a, x, n);
}

int rc_cuda_xpay(float *y, const float *x, float a, size_t n, cudaStream_t s)
{
	LAUNCH(rc_k_xpay, n, s, y, x, a, n);
}

int rc_cuda_dot(const float *x, const float *y, size_t n, double *out, cudaStream_t s)
{
	LAUNCH(rc_k_dot, n, s, x, y, n, out);
}

int rc_cuda_max(const float *x, size_t n, unsigned *out, cudaStream_t s)
{
	LAUNCH(rc_k_max, n, s, x, n, out);
}

int rc_cuda_inv_guarded(float *x, size_t n, double rel, const unsigned *mx, cudaStream_t s)
{
	LAUNCH(rc_k_inv_guarded, n, s, x, n, rel, mx);
}

int rc_cuda_ratio(float *e, const float *p, float eps, size_t n, const rc_cuda_views *views, double *sum2,
		  cudaStream_t s)
{
	if (views)
		LAUNCH(rc_k_ratio<true>, n, s, e, p, eps, n, *views, sum2);
	LAUNCH(rc_k_ratio<false>, n, s, e, p, eps, n, rc_cuda_views(), sum2);
}

}
