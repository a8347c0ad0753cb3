/*
 * tensor_wmma: the BSR products of paper 001 on tensor cores (WMMA, fp16 in,
 * fp32 accumulate) and on CUDA cores with half2 arithmetic, plus the small
 * vector kernels of the tensor path (layouts: tensor_kernels.cuh).
 *
 * Forward, fragment M.N.16: one warp per (block row, batch of N slices)
 * walks the block row; per block, A tile = the M x 16 block (row-major,
 * ld 16), B tile = 16 rows x N slices of Xh, accumulated in registers, then
 * one store.  No atomics: a block row belongs to one warp.
 *
 * Backward reads the same blocks transposed: one warp per (block column,
 * 16 slices) walks the block column index (tcol_ptr/tblk).  Loading a
 * row-major block as a col_major matrix_a gives its transpose for free; the
 * 16 x M tile A^T is split into M/16 k-steps of 16.16.16.  8-row blocks
 * (8.32.16) are staged into shared memory as 16 x 16 with 8 zero rows, and
 * the matching 16 rows of Yh read 8 real rows plus 8 that meet those zeros
 * (finite values, so the products are exactly zero).  WMMA offers no
 * m16n8k16 / k8 shape, so 32.8.16 and 8.32.16 run their transposed product
 * at 16.16.16 (docs/tensor.md).
 */
#include <mma.h>

#include "backend/tensor/tensor_kernels.cuh"
#include "backend/elementwise_ops.h"

using namespace nvcuda;

#define WARPS_PER_BLOCK 4

/* ---- vector kernels ------------------------------------------------------ */

/* Block (32 slices, 8 row lanes) as k_coldot: per-thread maxima over a
 * stride of rows, reduced in shared memory, one atomic per slice and block
 * (an atomic per element would serialise on the ncols addresses). */
__global__ void k_colmax(const float *v, int64_t rows, int nc, float *scale)
{
	__shared__ float part[8][32];
	int c = blockIdx.y * 32 + threadIdx.x;
	float m = 0;
	if (c < nc)
		for (int64_t r = blockIdx.x * 8 + threadIdx.y; r < rows; r += (int64_t)gridDim.x * 8)
			m = fmaxf(m, fabsf(v[r * nc + c]));
	part[threadIdx.y][threadIdx.x] = m;
	__syncthreads();
	if (threadIdx.y == 0 && c < nc) {
		for (int l = 1; l < 8; l++)
			m = fmaxf(m, part[l][threadIdx.x]);
		/* non-negative floats order like their bit patterns */
		atomicMax((int *)&scale[c], __float_as_int(m));
	}
}

__global__ void k_fix_scale(float *scale, int nc)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c < nc && !(scale[c] > 0 && isfinite(scale[c])))
		scale[c] = 1.0f;
}

static int grid_for(int64_t n, int threads)
{
	int64_t g = (n + threads - 1) / threads;
	return (int)(g > 65535 * 32 ? 65535 * 32 : (g < 1 ? 1 : g));
}

void rc_tk_colmax(const float *v, int64_t rows, int nc, float *scale, cudaStream_t st)
{
	cudaMemsetAsync(scale, 0, (size_t)nc * sizeof(float), st);
	int64_t gx = (rows + 8 * 64 - 1) / (8 * 64);
	dim3 grid((unsigned)(gx < 1 ? 1 : (gx > 4096 ? 4096 : gx)), (nc + 31) / 32), block(32, 8);
	k_colmax<<<grid, block, 0, st>>>(v, rows, nc, scale);
	k_fix_scale<<<(nc + 127) / 128, 128, 0, st>>>(scale, nc);
}

__global__ void k_to_half(const float *v, int64_t rows, int nc, const float *scale, __half *out, int tw,
			  int64_t rows_alloc)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * nc;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t r = i / nc;
		int c = (int)(i % nc);
		out[((int64_t)(c / tw) * rows_alloc + r) * tw + c % tw] = __float2half_rn(v[i] / scale[c]);
	}
}

void rc_tk_to_half(const float *v, int64_t rows, int nc, const float *scale, __half *out, int tw,
		   int64_t rows_alloc, cudaStream_t st)
{
	k_to_half<<<grid_for(rows * nc, 256), 256, 0, st>>>(v, rows, nc, scale, out, tw, rows_alloc);
}

__global__ void k_scale_cols(float *v, int64_t n, int nc, const float *scale)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		v[i] *= scale[i % nc];
}

void rc_tk_scale_cols(float *v, int64_t rows, int nc, const float *scale, cudaStream_t st)
{
	k_scale_cols<<<grid_for(rows * nc, 256), 256, 0, st>>>(v, rows * nc, nc, scale);
}

/* ---- WMMA ------------------------------------------------------------------ */

/* Blocks in flight per warp: the loop is bound by the stream of blocks from
 * memory, and one dependent load -> mma chain per warp leaves the memory
 * system idle between blocks; FWD_UNROLL independent loads are issued
 * before their mma (the fragment arrays are indexed by unrolled constants
 * only, so they stay in registers). */
#define FWD_UNROLL 4

template <int M, int N>
__global__ void k_wmma_fwd(rc_dbsr a, const __half *xh, float *y, int nc)
{
	int warp = (int)((blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32);
	int nbatch = nc / N;
	int br = warp / nbatch, bt = warp % nbatch;
	if (br >= a.mb)
		return; /* the whole warp leaves together */
	wmma::fragment<wmma::matrix_a, M, N, 16, __half, wmma::row_major> fa[FWD_UNROLL];
	wmma::fragment<wmma::matrix_b, M, N, 16, __half, wmma::row_major> fb[FWD_UNROLL];
	wmma::fragment<wmma::accumulator, M, N, 16, float> acc;
	wmma::fill_fragment(acc, 0.0f);
	const __half *xt = xh + (int64_t)bt * a.cols_pad * N;
	int i = a.row_ptr[br], end = a.row_ptr[br + 1];
	for (; i + FWD_UNROLL <= end; i += FWD_UNROLL) {
#pragma unroll
		for (int u = 0; u < FWD_UNROLL; u++) {
			wmma::load_matrix_sync(fa[u], a.blocks + (int64_t)(i + u) * M * 16, 16);
			wmma::load_matrix_sync(fb[u], xt + (int64_t)a.col_idx[i + u] * 16 * N, N);
		}
#pragma unroll
		for (int u = 0; u < FWD_UNROLL; u++)
			wmma::mma_sync(acc, fa[u], fb[u], acc);
	}
	for (; i < end; i++) {
		wmma::load_matrix_sync(fa[0], a.blocks + (int64_t)i * M * 16, 16);
		wmma::load_matrix_sync(fb[0], xt + (int64_t)a.col_idx[i] * 16 * N, N);
		wmma::mma_sync(acc, fa[0], fb[0], acc);
	}
	wmma::store_matrix_sync(y + (int64_t)br * M * nc + bt * N, acc, nc, wmma::mem_row_major);
}

template <int M>
__global__ void k_wmma_back(rc_dbsr a, const __half *yh, float *x, int nc)
{
	__shared__ __align__(32) __half stage[WARPS_PER_BLOCK][16 * 16];
	int lane = threadIdx.x % 32, wib = threadIdx.x / 32;
	int warp = (int)((blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32);
	int nbatch = nc / 16;
	int bc = warp / nbatch, bt = warp % nbatch;
	if (M == 8) /* rows 8..15 of the stage stay zero */
		for (int e = 128 + lane; e < 256; e += 32)
			stage[wib][e] = __float2half(0.0f);
	if (bc >= a.nb)
		return;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	wmma::fill_fragment(acc, 0.0f);
	const __half *yt = yh + (int64_t)bt * (a.rows_pad + 16) * 16;
	for (int j = a.tcol_ptr[bc]; j < a.tcol_ptr[bc + 1]; j++) {
		int i = a.tblk[j], br = a.blk_row[i];
		const __half *blk = a.blocks + (int64_t)i * M * 16;
		if (M == 8) {
			for (int e = lane; e < 128; e += 32)
				stage[wib][e] = blk[e];
			__syncwarp();
			wmma::load_matrix_sync(fa, stage[wib], 16);
			wmma::load_matrix_sync(fb, yt + (int64_t)br * 8 * 16, 16);
			wmma::mma_sync(acc, fa, fb, acc);
			__syncwarp(); /* the stage is rewritten next round */
		} else {
			for (int s = 0; s < M / 16; s++) {
				wmma::load_matrix_sync(fa, blk + s * 256, 16);
				wmma::load_matrix_sync(fb, yt + ((int64_t)br * M + s * 16) * 16, 16);
				wmma::mma_sync(acc, fa, fb, acc);
			}
		}
	}
	wmma::store_matrix_sync(x + (int64_t)bc * 16 * nc + bt * 16, acc, nc, wmma::mem_row_major);
}

static int warp_grid(int64_t warps)
{
	return (int)((warps + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK);
}

void rc_tk_wmma_fwd(const rc_dbsr *a, const __half *xh, float *y, int nc, cudaStream_t st)
{
	int g = warp_grid((int64_t)a->mb * (nc / a->n));
	if (a->m == 16)
		k_wmma_fwd<16, 16><<<g, 32 * WARPS_PER_BLOCK, 0, st>>>(*a, xh, y, nc);
	else if (a->m == 32)
		k_wmma_fwd<32, 8><<<g, 32 * WARPS_PER_BLOCK, 0, st>>>(*a, xh, y, nc);
	else
		k_wmma_fwd<8, 32><<<g, 32 * WARPS_PER_BLOCK, 0, st>>>(*a, xh, y, nc);
}

void rc_tk_wmma_back(const rc_dbsr *a, const __half *yh, float *x, int nc, cudaStream_t st)
{
	int g = warp_grid((int64_t)a->nb * (nc / 16));
	if (a->m == 16)
		k_wmma_back<16><<<g, 32 * WARPS_PER_BLOCK, 0, st>>>(*a, yh, x, nc);
	else if (a->m == 32)
		k_wmma_back<32><<<g, 32 * WARPS_PER_BLOCK, 0, st>>>(*a, yh, x, nc);
	else
		k_wmma_back<8><<<g, 32 * WARPS_PER_BLOCK, 0, st>>>(*a, yh, x, nc);
}

/* ---- half2 on CUDA cores ---------------------------------------------------- */

/* Block (16 pairs of slices, M rows) per (block row, 32 slices): each thread
 * one row and two slices; the 16 products of a block in half2, the sums
 * over blocks in fp32 (mixed precision, as the paper's half2 baseline). */
__global__ void k_half2_fwd(rc_dbsr a, const __half *xh, float *y, int nc)
{
	int br = blockIdx.x, r = threadIdx.y;
	int c = (blockIdx.y * 16 + threadIdx.x) * 2;
	if (c >= nc)
		return;
	int n = a.n;
	const __half *xt = xh + (int64_t)(c / n) * a.cols_pad * n + c % n;
	float2 acc = make_float2(0.f, 0.f);
	for (int i = a.row_ptr[br]; i < a.row_ptr[br + 1]; i++) {
		const __half *blk = a.blocks + ((int64_t)i * a.m + r) * 16;
		const __half *xb = xt + (int64_t)a.col_idx[i] * 16 * n;
		__half2 h = __float2half2_rn(0.f);
		for (int k = 0; k < 16; k++)
			h = __hfma2(__half2half2(blk[k]), *(const __half2 *)(xb + (int64_t)k * n), h);
		float2 f = __half22float2(h);
		acc.x += f.x;
		acc.y += f.y;
	}
	float *yr = y + ((int64_t)br * a.m + r) * nc + c;
	yr[0] = acc.x;
	yr[1] = acc.y;
}

__global__ void k_half2_back(rc_dbsr a, const __half *yh, float *x, int nc)
{
	int bc = blockIdx.x, k = threadIdx.y;
	int c = (blockIdx.y * 16 + threadIdx.x) * 2;
	if (c >= nc)
		return;
	const __half *yt = yh + (int64_t)(c / 16) * (a.rows_pad + 16) * 16 + c % 16;
	float2 acc = make_float2(0.f, 0.f);
	for (int j = a.tcol_ptr[bc]; j < a.tcol_ptr[bc + 1]; j++) {
		int i = a.tblk[j], br = a.blk_row[i];
		const __half *blk = a.blocks + (int64_t)i * a.m * 16 + k;
		for (int r0 = 0; r0 < a.m; r0 += 16) {
			__half2 h = __float2half2_rn(0.f);
			int rn = a.m - r0 < 16 ? a.m - r0 : 16;
			for (int r = r0; r < r0 + rn; r++)
				h = __hfma2(__half2half2(blk[r * 16]),
					    *(const __half2 *)(yt + ((int64_t)br * a.m + r) * 16), h);
			float2 f = __half22float2(h);
			acc.x += f.x;
			acc.y += f.y;
		}
	}
	float *xr = x + ((int64_t)bc * 16 + k) * nc + c;
	xr[0] = acc.x;
	xr[1] = acc.y;
}

void rc_tk_half2_fwd(const rc_dbsr *a, const __half *xh, float *y, int nc, cudaStream_t st)
{
	dim3 grid(a->mb, (nc / 2 + 15) / 16), block(16, a->m);
	k_half2_fwd<<<grid, block, 0, st>>>(*a, xh, y, nc);
}

void rc_tk_half2_back(const rc_dbsr *a, const __half *yh, float *x, int nc, cudaStream_t st)
{
	dim3 grid(a->nb, (nc / 2 + 15) / 16), block(16, 16);
	k_half2_back<<<grid, block, 0, st>>>(*a, yh, x, nc);
}

/* ---- CG helpers -------------------------------------------------------------- */

/* Block (32 slices, 8 row lanes): each thread sums one slice over a stride
 * of rows in double, the 8 lanes meet in shared memory, one atomic per
 * slice and block. */
__global__ void k_coldot(const float *a, const float *b, int64_t rows, int nc, double *out)
{
	__shared__ double part[8][32];
	int c = blockIdx.y * 32 + threadIdx.x;
	double s = 0;
	if (c < nc)
		for (int64_t r = blockIdx.x * 8 + threadIdx.y; r < rows; r += (int64_t)gridDim.x * 8)
			s += (double)a[r * nc + c] * (double)b[r * nc + c];
	part[threadIdx.y][threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.y == 0 && c < nc) {
		for (int l = 1; l < 8; l++)
			s += part[l][threadIdx.x];
		atomicAdd(&out[c], s);
	}
}

void rc_tk_coldot(const float *a, const float *b, int64_t rows, int nc, double *out, cudaStream_t st)
{
	int64_t gx = (rows + 8 * 64 - 1) / (8 * 64);
	dim3 grid((unsigned)(gx < 1 ? 1 : (gx > 4096 ? 4096 : gx)), (nc + 31) / 32), block(32, 8);
	k_coldot<<<grid, block, 0, st>>>(a, b, rows, nc, out);
}

__global__ void k_axpy_cols(float *y, const float *x, const double *coef, double sign, int64_t n, int nc)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		y[i] = rc_ew_axpy(y[i], (float)(sign * coef[i % nc]), x[i]);
}

void rc_tk_axpy_cols(float *y, const float *x, const double *coef, double sign, int64_t rows, int nc,
		     cudaStream_t st)
{
	k_axpy_cols<<<grid_for(rows * nc, 256), 256, 0, st>>>(y, x, coef, sign, rows * nc, nc);
}

__global__ void k_xpby_cols(float *p, const float *r, const double *coef, int64_t n, int nc)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		p[i] = rc_ew_xpay(r[i], (float)coef[i % nc], p[i]);
}

void rc_tk_xpby_cols(float *p, const float *r, const double *coef, int64_t rows, int nc, cudaStream_t st)
{
	k_xpby_cols<<<grid_for(rows * nc, 256), 256, 0, st>>>(p, r, coef, rows * nc, nc);
}

/* ---- symmetric single-slice forward ---------------------------------------- */

__global__ void k_sym_gather(const float *img, const int *src, const float *w0, int64_t n0, int64_t cols_pad,
			     float *X)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < cols_pad * 8;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t j = i / 8;
		int s = (int)(i % 8);
		X[i] = j < n0 ? w0[j] * img[src[(int64_t)s * n0 + j]] : 0.0f;
	}
}

void rc_tk_sym_gather(const float *img, const int *src, const float *w0, int64_t n0, int64_t cols_pad,
		      float *X, cudaStream_t st)
{
	k_sym_gather<<<grid_for(cols_pad * 8, 256), 256, 0, st>>>(img, src, w0, n0, cols_pad, X);
}

__global__ void k_sym_combine(const float *Y, const int *rowsrc, int64_t rows, float *proj)
{
	for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
		float s = 0;
		for (int t = 0; t < 8; t++)
			s += Y[(int64_t)rowsrc[t * rows + r] * 8 + t];
		proj[r] = s;
	}
}

void rc_tk_sym_combine(const float *Y, const int *rowsrc, int64_t rows, float *proj, cudaStream_t st)
{
	k_sym_combine<<<grid_for(rows, 256), 256, 0, st>>>(Y, rowsrc, rows, proj);
}
