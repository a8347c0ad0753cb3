/*
 * tensor_kernels: the contract between the tensor backend's host code
 * (core/backend/tensor/tensor_gpu.cu) and its kernels (kernels/cuda/
 * tensor_wmma.cu, tensor_otf.cu, tensor_vec.cu): every launcher only
 * launches on stream st, the caller checks cudaGetLastError.
 *
 * Device vector layouts (all vectors hold nc slices, nc a multiple of 32):
 *  - fp32 vectors: plain [row][nc], as on the host.
 *  - fp16 copies made for the products, tiled so that every fragment load is
 *    32-byte aligned and has a leading dimension that is a multiple of 8:
 *      forward input  Xh: [nc/N][cols_pad][N]        (N = fragment's n)
 *      backward input Yh: [nc/16][rows_pad + 16][16] (16 zero rows per tile
 *                          for the 8-row blocks' padded loads)
 *    Each column is divided by its max |value| (scale[c]) on the way in and
 *    multiplied back on the way out, so fp16's range never clips a vector.
 */
#ifndef RC_TENSOR_KERNELS_CUH
#define RC_TENSOR_KERNELS_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* Device copy of the BSR (indices as int: rc_bsr_build caps NEB < 2^31). */
struct rc_dbsr {
	int m, n;              /* fragment M (block rows) and N (slices) */
	int mb, nb;
	int64_t rows_pad, cols_pad;
	const __half *blocks;
	const int *row_ptr, *col_idx;   /* mb + 1, neb */
	const int *tcol_ptr, *tblk, *blk_row; /* nb + 1, neb, neb */
};

/* scale[c] = max |v[., c]| over rows (1 where the column is zero). */
void rc_tk_colmax(const float *v, int64_t rows, int nc, float *scale, cudaStream_t st);
/* out tile layout (see above) from v / scale. */
void rc_tk_to_half(const float *v, int64_t rows, int nc, const float *scale, __half *out,
		   int tw, int64_t rows_alloc, cudaStream_t st);
void rc_tk_scale_cols(float *v, int64_t rows, int nc, const float *scale, cudaStream_t st);

/* y = A x (WMMA, the BSR's fragment); x as Xh tiles, y fp32 plain. */
void rc_tk_wmma_fwd(const rc_dbsr *a, const __half *xh, float *y, int nc, cudaStream_t st);
/* x = A^T y (WMMA 16.16.16 on transposed blocks); y as Yh tiles. */
void rc_tk_wmma_back(const rc_dbsr *a, const __half *yh, float *x, int nc, cudaStream_t st);
/* The same products on CUDA cores with half2 arithmetic. */
void rc_tk_half2_fwd(const rc_dbsr *a, const __half *xh, float *y, int nc, cudaStream_t st);
void rc_tk_half2_back(const rc_dbsr *a, const __half *yh, float *x, int nc, cudaStream_t st);

/* On-the-fly distance-driven products (tensor_otf.cu): A is nviews x 6
 * doubles; rperm/cperm map natural rows/pixels to the ordered index space of
 * x and y.  fwd overwrites every ordered row it owns (the caller zeroes y
 * first for padding rows); back accumulates into x (caller zeroes it). */
struct rc_dgeom {
	int nviews, nu, nx, ny;
	double vx, vy, cx, cy;
	const double *A;
	const int *rperm, *cperm;
};
void rc_tk_otf_fwd(const rc_dgeom *g, const float *x, float *y, int nc, cudaStream_t st);
void rc_tk_otf_back(const rc_dgeom *g, const float *y, float *x, int nc, cudaStream_t st);

/* CG helpers: out[c] += sum_rows a[., c] * b[., c] (out zeroed by caller). */
void rc_tk_coldot(const float *a, const float *b, int64_t rows, int nc, double *out, cudaStream_t st);
/* y[., c] += sign * coef[c] * x[., c] */
void rc_tk_axpy_cols(float *y, const float *x, const double *coef, double sign, int64_t rows, int nc,
		     cudaStream_t st);
/* p[., c] = r[., c] + coef[c] * p[., c] */
void rc_tk_xpby_cols(float *p, const float *r, const double *coef, int64_t rows, int nc, cudaStream_t st);

/* Symmetric single-slice forward: X[j][s] = w0[j] img[src[s n0 + j]],
 * then proj[r] = sum_s Y[rowsrc[s rows + r]][s] (nc = 8). */
void rc_tk_sym_gather(const float *img, const int *src, const float *w0, int64_t n0, int64_t cols_pad,
		      float *X, cudaStream_t st);
void rc_tk_sym_combine(const float *Y, const int *rowsrc, int64_t rows, float *proj, cudaStream_t st);

/* ---- the tensor backend's element-wise steps (tensor_vec.cu) -------------
 * On [row][nc] vectors of n = rows * nc elements; rv: each row's view,
 * and a step restricted to views [first, last) touches the rows whose view
 * is in it (first < 0: every row); sums add into *out (zeroed by the
 * caller). */
void rc_tk_fill_pattern(float *v, int64_t n, cudaStream_t st);
/* y = v in the real columns (c < nreal), 0 in the padding ones */
void rc_tk_vfill(float *y, int64_t n, int nc, float v, int nreal, const int *rv, int first, int last,
		 cudaStream_t st);
/* y = x in views [first, last); elsewhere 0 when zero_others, else untouched */
void rc_tk_vcopy_views(float *y, const float *x, int64_t n, int nc, const int *rv, int first, int last,
		       int zero_others, cudaStream_t st);
/* out[c] += sum_rows a[., c] */
void rc_tk_colsum(const float *a, int64_t rows, int nc, double *out, cudaStream_t st);
/* update, mul, the guarded inverse, ratio and residual are the CUDA
 * backend's (core/backend/cuda/cuda_kernels.h, kernels/cuda/elementwise.cu),
 * with an rc_cuda_views mask of the row views for a view range. */

#endif
