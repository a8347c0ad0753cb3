/*
 * tensor_vec: the tensor backend's element-wise kernels on device vectors
 * ([row][nc], nc slices side by side) and the pattern the product timing
 * fills its inputs with; host code in core/backend/tensor/tensor_gpu.cu
 * launches them through core/backend/tensor/tensor_kernels.cuh.
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
 * Grid-stride loops over rows * nc elements, 256 threads per block; sums in
 * double, one atomicAdd per block.  The float operations are vec_host.c's,
 * with __fmul_rn / __fadd_rn where contraction to an FMA would change the
 * rounding.  Per-column dot, axpy and xpay are the old device CG's kernels
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

/* The block's partial sums added into *out (blockDim.x == VT). */
__device__ static void block_add(double s, double *out)
{
	__shared__ double part[VT];
	part[threadIdx.x] = s;
	__syncthreads();
	for (int w = VT / 2; w > 0; w /= 2) {
		if (threadIdx.x < w)
			part[threadIdx.x] += part[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicAdd(out, part[0]);
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

/* *umax = bits of max(0, max y): for floats >= 0 the bit patterns order as
 * the values. */
static __global__ void k_vmax(const float *y, int64_t n, unsigned *umax)
{
	__shared__ float part[VT];
	float m = 0.0f;
	VLOOP(i, n)
	m = y[i] > m ? y[i] : m;
	part[threadIdx.x] = m;
	__syncthreads();
	for (int w = VT / 2; w > 0; w /= 2) {
		if (threadIdx.x < w && part[threadIdx.x + w] > part[threadIdx.x])
			part[threadIdx.x] = part[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicMax(umax, __float_as_uint(part[0]));
}

static __global__ void k_vinv(float *y, int64_t n, double rel, const unsigned *umax)
{
	float eps = (float)(rel * (double)__uint_as_float(*umax));
	VLOOP(i, n)
	y[i] = y[i] > eps && y[i] > 0.0f ? 1.0f / y[i] : 0.0f;
}

static __global__ void k_vratio(float *e, const float *p, int64_t n, int nc, const int *rv, int first, int last,
				float eps, double *out)
{
	double s = 0;
	VLOOP(i, n)
	if (in_views(rv, i / nc, first, last)) {
		float d = __fsub_rn(p[i], e[i]);
		s += (double)d * d;
		float pp = p[i] > 0.0f ? p[i] : 0.0f;
		e[i] = e[i] > eps ? pp / e[i] : 0.0f;
	}
	block_add(s, out);
}

static __global__ void k_vresidual(float *e, const float *p, const float *w, int64_t n, int nc, const int *rv, int first,
			    int last, double *out)
{
	double s = 0;
	VLOOP(i, n)
	if (in_views(rv, i / nc, first, last)) {
		float d = __fsub_rn(p[i], e[i]);
		s += (double)d * d;
		e[i] = w ? __fmul_rn(d, w[i]) : d;
	}
	block_add(s, out);
}

static __global__ void k_vupdate(float *v, const float *u, const float *c, int64_t n, float lambda, int nonneg)
{
	VLOOP(i, n)
	{
		float x = __fadd_rn(v[i], __fmul_rn(__fmul_rn(lambda, u[i]), c[i]));
		v[i] = nonneg ? (x > 0.0f ? x : 0.0f) : x;
	}
}

static __global__ void k_vmul(float *v, const float *u, const float *c, int64_t n)
{
	VLOOP(i, n)
	v[i] = __fmul_rn(v[i], __fmul_rn(u[i], c[i]));
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

void rc_tk_vinv_guarded(float *y, int64_t n, double rel, unsigned *umax, cudaStream_t st)
{
	k_vmax<<<vgrid(n), VT, 0, st>>>(y, n, umax);
	k_vinv<<<vgrid(n), VT, 0, st>>>(y, n, rel, umax);
}

void rc_tk_vratio(float *e, const float *p, int64_t n, int nc, const int *rv, int first, int last, float eps,
		  double *out, cudaStream_t st)
{
	k_vratio<<<vgrid(n), VT, 0, st>>>(e, p, n, nc, rv, first, last, eps, out);
}

void rc_tk_vresidual(float *e, const float *p, const float *w, int64_t n, int nc, const int *rv, int first,
		     int last, double *out, cudaStream_t st)
{
	k_vresidual<<<vgrid(n), VT, 0, st>>>(e, p, w, n, nc, rv, first, last, out);
}

void rc_tk_vupdate(float *v, const float *u, const float *c, int64_t n, float lambda, int nonneg, cudaStream_t st)
{
	k_vupdate<<<vgrid(n), VT, 0, st>>>(v, u, c, n, lambda, nonneg);
}

void rc_tk_vmul(float *v, const float *u, const float *c, int64_t n, cudaStream_t st)
{
	k_vmul<<<vgrid(n), VT, 0, st>>>(v, u, c, n);
}
