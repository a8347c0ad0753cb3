/*
 * tensor_vec: the tensor backend's steps that know its device vectors'
 * layout ([row][nc], nc slices side by side): the fill that leaves the
 * padding slices 0, the copy of a view range, the per-slice sums; and the
 * pattern the product timing fills its inputs with.  Host code in
 * core/backend/tensor/tensor_gpu.cu launches them through
 * core/backend/tensor/tensor_kernels.cuh.  The element-wise steps whose
 * formulas do not depend on the layout (update, mul, the guarded inverse,
 * ratio, residual) are the CUDA backend's kernels in elementwise.cu.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend/tensor/tensor_kernels.cuh"

static __global__ void k_fill_pattern(float *v, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		v[i] = 0.5f + 0.25f * (float)((i * 2654435761u) % 1024) / 1024.0f;
}

/*
 * Grid-stride loops over rows * nc elements, 256 threads per block.
 * Per-column dot, axpy and xpay are the old device CG's kernels
 * (rc_tk_coldot, rc_tk_axpy_cols, rc_tk_xpby_cols in tensor_wmma.cu). */

#define VT 256

static unsigned vgrid(int64_t n)
{
	int64_t g = (n + VT - 1) / VT;
	return (unsigned)(g < 1 ? 1 : (g > 4096 ? 4096 : g));
}

#define VLOOP(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* Row r is in views [first, last) (first < 0: every row). */
__device__ static inline bool in_views(const int *rv, int64_t r, int first, int last)
{
	if (first < 0)
		return true;
	int v = rv[r];
	return v >= first && v < last;
}

static __global__ void k_vfill(float *y, int64_t n, int nc, float v, int nreal, const int *rv, int first, int last)
{
	VLOOP(i, n)
	if (in_views(rv, i / nc, first, last))
		y[i] = (int)(i % nc) < nreal ? v : 0.0f;
}

static __global__ void k_vcopy_views(float *y, const float *x, int64_t n, int nc, const int *rv, int first, int last,
			      int zero_others)
{
	VLOOP(i, n)
	{
		if (in_views(rv, i / nc, first, last))
			y[i] = x[i];
		else if (zero_others)
			y[i] = 0.0f;
	}
}

/* k_coldot without the second factor: out[c] += sum_rows a[., c]. */
static __global__ void k_colsum(const float *a, int64_t rows, int nc, double *out)
{
	__shared__ double part[8][32];
	int c = blockIdx.y * 32 + threadIdx.x;
	double s = 0;
	if (c < nc)
		for (int64_t r = blockIdx.x * 8 + threadIdx.y; r < rows; r += (int64_t)gridDim.x * 8)
			s += (double)a[r * nc + c];
	part[threadIdx.y][threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.y == 0 && c < nc) {
		for (int l = 1; l < 8; l++)
			s += part[l][threadIdx.x];
		atomicAdd(&out[c], s);
	}
}

/* ---- launchers (core/backend/tensor/tensor_kernels.cuh) ------------------ */

void rc_tk_fill_pattern(float *v, int64_t n, cudaStream_t st)
{
	k_fill_pattern<<<1024, 256, 0, st>>>(v, n);
}

void rc_tk_vfill(float *y, int64_t n, int nc, float v, int nreal, const int *rv, int first, int last,
		 cudaStream_t st)
{
	k_vfill<<<vgrid(n), VT, 0, st>>>(y, n, nc, v, nreal, rv, first, last);
}

void rc_tk_vcopy_views(float *y, const float *x, int64_t n, int nc, const int *rv, int first, int last,
		       int zero_others, cudaStream_t st)
{
	k_vcopy_views<<<vgrid(n), VT, 0, st>>>(y, x, n, nc, rv, first, last, zero_others);
}

void rc_tk_colsum(const float *a, int64_t rows, int nc, double *out, cudaStream_t st)
{
	int64_t gx = (rows + 8 * 64 - 1) / (8 * 64);
	dim3 grid((unsigned)(gx < 1 ? 1 : (gx > 4096 ? 4096 : gx)), (nc + 31) / 32), block(32, 8);
	k_colsum<<<grid, block, 0, st>>>(a, rows, nc, out);
}
