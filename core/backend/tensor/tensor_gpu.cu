/*
 * tensor_gpu: host side of the tensor path on CUDA (core/tensor_gpu.h):
 * upload of the BSR (and optionally the CSR for cuSPARSE and the geometry
 * for the on-the-fly kernels), the products by kind on device vectors, the
 * device vectors and element-wise kernels of the tensor backend
 * (backend_tensor.c), timing, and the symmetric single-slice forward
 * projection.  Every CUDA/cuSPARSE call is checked with a context
 * string; the first failure is reported in msg and the call returns
 * RC_EDEVICE (RC_ENOMEM for allocations).
 */
#include <cuda_runtime.h>
#include <cusparse.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <utility>
#include <vector>

extern "C" {
#include "projectors/bsr.h"
#include "backend/tensor/tensor_gpu.h"
#include "projectors/tensor_sym.h"
}
#include "backend/tensor/tensor_kernels.cuh"
#include "backend/cuda/cuda_kernels.h"

struct rc_tgpu {
	int dev;
	char name[256];
	double peak_gbs;
	cudaStream_t st;
	rc_dbsr a;
	int nc;
	int64_t neb;
	/* device allocations */
	__half *blocks;
	int *row_ptr, *col_idx, *tcol_ptr, *tblk, *blk_row;
	float *X, *Y, *scale;
	__half *Xh, *Yh;
	/* timing outputs (allocated on first use) */
	float *tx, *ty;
	/* the tensor backend's element-wise calls */
	int *row_view;   /* rows_pad */
	double *red;     /* nc: per-column sums, or one sum */
	double *coef;    /* nc */
	unsigned *umax;  /* one float's bits (a maximum >= 0) */
	/* cuSPARSE */
	int has_csr;
	int64_t csr_nnz;
	int *csr_rp, *csr_ci;
	float *csr_v;
	cusparseHandle_t sp;
	cusparseSpMatDescr_t spA;
	void *spbuf;
	size_t spbuf_size;
	/* on the fly */
	int has_geom;
	rc_dgeom g;
	double *gA;
	int *grperm, *gcperm;
};

#define CK(call, what)                                                                                         \
	do {                                                                                                   \
		cudaError_t e_ = (call);                                                                       \
		if (e_ != cudaSuccess) {                                                                       \
			snprintf(msg, msglen, "%s: %s", what, cudaGetErrorString(e_));                         \
			rc = e_ == cudaErrorMemoryAllocation ? RC_ENOMEM : RC_EDEVICE;                         \
			goto out;                                                                              \
		}                                                                                              \
	} while (0)

#define CKS(call, what)                                                                                        \
	do {                                                                                                   \
		cusparseStatus_t e_ = (call);                                                                  \
		if (e_ != CUSPARSE_STATUS_SUCCESS) {                                                           \
			snprintf(msg, msglen, "%s: %s", what, cusparseGetErrorString(e_));                     \
			rc = RC_EDEVICE;                                                                       \
			goto out;                                                                              \
		}                                                                                              \
	} while (0)

extern "C" int rc_tgpu_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError(); /* clear the sticky "no driver" error */
		return 0;
	}
	return n;
}

template <typename T>
static cudaError_t upload(T **dst, const T *src, size_t n)
{
	cudaError_t e = cudaMalloc((void **)dst, (n ? n : 1) * sizeof(T));
	if (e != cudaSuccess || !n)
		return e;
	return cudaMemcpy(*dst, src, n * sizeof(T), cudaMemcpyHostToDevice);
}

extern "C" void rc_tgpu_free(rc_tgpu *t)
{
	if (!t)
		return;
	void *ptrs[] = { t->blocks, t->row_ptr, t->col_idx, t->tcol_ptr, t->tblk, t->blk_row, t->X, t->Y,
			 t->scale, t->Xh, t->Yh, t->tx, t->ty, t->row_view, t->red, t->coef, t->umax,
			 t->csr_rp, t->csr_ci, t->csr_v, t->spbuf, t->gA, t->grperm, t->gcperm };
	for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
		if (ptrs[i])
			cudaFree(ptrs[i]);
	if (t->spA)
		cusparseDestroySpMat(t->spA);
	if (t->sp)
		cusparseDestroy(t->sp);
	if (t->st)
		cudaStreamDestroy(t->st);
	delete t;
}

/* The CSR renumbered into the BSR's ordered, padded index space. */
static void permute_csr(const rc_csr *m, const int32_t *rperm, const int32_t *cperm, int64_t rows_pad,
			std::vector<int> &rp, std::vector<int> &ci, std::vector<float> &v)
{
	std::vector<int32_t> irow(rows_pad, -1);
	for (int r = 0; r < m->rows; r++)
		irow[rperm ? rperm[r] : r] = r;
	rp.assign(rows_pad + 1, 0);
	ci.resize(m->nnz);
	v.resize(m->nnz);
	int64_t k = 0;
	std::vector<std::pair<int, float>> row;
	for (int64_t pr = 0; pr < rows_pad; pr++) {
		int32_t r = irow[pr];
		if (r >= 0) {
			row.clear();
			for (int64_t i = m->row_ptr[r]; i < m->row_ptr[r + 1]; i++)
				row.push_back({ cperm ? cperm[m->col[i]] : m->col[i], m->val[i] });
			std::sort(row.begin(), row.end(),
				  [](const std::pair<int, float> &x, const std::pair<int, float> &y) { return x.first < y.first; });
			for (auto &e : row) {
				ci[k] = e.first;
				v[k] = e.second;
				k++;
			}
		}
		rp[pr + 1] = (int)k;
	}
}

extern "C" int rc_tgpu_new(const rc_bsr *b, const rc_csr *csr, const int32_t *rperm, const int32_t *cperm,
			   const rc_tgpu_geom *geom, int ncols, rc_tgpu **ret, char *msg, size_t msglen)
{
	int rc = 0;
	rc_tgpu *t = new rc_tgpu();
	const rc_frag_info *fi = rc_frag_get(b->frag);
	int64_t rows_pad = rc_bsr_rows_pad(b), cols_pad = rc_bsr_cols_pad(b);
	std::vector<int> tmp;
	if (ncols < 32 || ncols % 32) {
		snprintf(msg, msglen, "the GPU path needs a multiple of 32 slices (got %d)", ncols);
		rc = RC_EINVAL;
		goto out;
	}
	CK(cudaGetDevice(&t->dev), "cudaGetDevice");
	{
		cudaDeviceProp p;
		CK(cudaGetDeviceProperties(&p, t->dev), "cudaGetDeviceProperties");
		snprintf(t->name, sizeof t->name, "%s", p.name);
		int clock_khz = 0, bus_bits = 0;
		cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, t->dev);
		cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, t->dev);
		t->peak_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8) / 1e9; /* DDR: two transfers per clock */
	}
	{
		/* everything this object will hold, checked against the free
		 * memory before the first allocation */
		double need = (double)b->neb * b->bm * b->bk * 2 + (double)(b->mb + b->nb + 2) * 4 + 3.0 * b->neb * 4 +
			      (double)ncols * (cols_pad * (4 + 2) + (rows_pad + 16) * 2 + rows_pad * 4) + (double)rows_pad * 4 +
			      (csr ? (double)csr->nnz * 8 + (double)rows_pad * 4 : 0) +
			      (geom ? (double)geom->nviews * geom->nu * 4 + (double)geom->nx * geom->ny * 4 : 0);
		size_t free_b = 0, total_b = 0;
		CK(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
		if (need > 0.9 * (double)free_b) {
			snprintf(msg, msglen, "the matrix and %d slices need %.2f GB on %s, %.2f GB are free", ncols, need / 1e9,
				 t->name, (double)free_b / 1e9);
			rc = RC_ETOOBIG;
			goto out;
		}
	}
	CK(cudaStreamCreate(&t->st), "cudaStreamCreate");
	t->nc = ncols;
	t->neb = b->neb;
	t->a.m = fi->m;
	t->a.n = fi->n;
	t->a.mb = b->mb;
	t->a.nb = b->nb;
	t->a.rows_pad = rows_pad;
	t->a.cols_pad = cols_pad;
	CK(upload(&t->blocks, (const __half *)b->blocks, (size_t)b->neb * b->bm * b->bk), "upload of the BSR blocks");
	tmp.assign(b->row_ptr, b->row_ptr + b->mb + 1);
	CK(upload(&t->row_ptr, tmp.data(), tmp.size()), "upload of the BSR row index");
	CK(upload(&t->col_idx, (const int *)b->col_idx, (size_t)b->neb), "upload of the BSR column index");
	tmp.assign(b->tcol_ptr, b->tcol_ptr + b->nb + 1);
	CK(upload(&t->tcol_ptr, tmp.data(), tmp.size()), "upload of the BSR block-column index");
	CK(upload(&t->tblk, (const int *)b->tblk, (size_t)b->neb), "upload of the BSR block-column list");
	CK(upload(&t->blk_row, (const int *)b->blk_row, (size_t)b->neb), "upload of the BSR block rows");
	t->a.blocks = t->blocks;
	t->a.row_ptr = t->row_ptr;
	t->a.col_idx = t->col_idx;
	t->a.tcol_ptr = t->tcol_ptr;
	t->a.tblk = t->tblk;
	t->a.blk_row = t->blk_row;
	CK(cudaMalloc((void **)&t->X, (size_t)(cols_pad * ncols) * sizeof(float)), "cudaMalloc X");
	CK(cudaMalloc((void **)&t->Y, (size_t)(rows_pad * ncols) * sizeof(float)), "cudaMalloc Y");
	CK(cudaMalloc((void **)&t->scale, (size_t)ncols * sizeof(float)), "cudaMalloc scale");
	CK(cudaMalloc((void **)&t->Xh, (size_t)(cols_pad * ncols) * sizeof(__half)), "cudaMalloc Xh");
	CK(cudaMalloc((void **)&t->Yh, (size_t)((rows_pad + 16) * ncols) * sizeof(__half)), "cudaMalloc Yh");
	CK(cudaMemset(t->Yh, 0, (size_t)((rows_pad + 16) * ncols) * sizeof(__half)), "cudaMemset Yh");
	CK(cudaMalloc((void **)&t->red, (size_t)ncols * sizeof(double)), "cudaMalloc sums");
	CK(cudaMalloc((void **)&t->coef, (size_t)ncols * sizeof(double)), "cudaMalloc coefficients");
	CK(cudaMalloc((void **)&t->umax, sizeof(unsigned)), "cudaMalloc maximum");
	if (csr) {
		std::vector<int> rp, ci;
		std::vector<float> v;
		permute_csr(csr, rperm, cperm, rows_pad, rp, ci, v);
		t->csr_nnz = csr->nnz;
		CK(upload(&t->csr_rp, rp.data(), rp.size()), "upload of the CSR row pointers");
		CK(upload(&t->csr_ci, ci.data(), ci.size()), "upload of the CSR columns");
		CK(upload(&t->csr_v, v.data(), v.size()), "upload of the CSR values");
		CKS(cusparseCreate(&t->sp), "cusparseCreate");
		CKS(cusparseSetStream(t->sp, t->st), "cusparseSetStream");
		CKS(cusparseCreateCsr(&t->spA, rows_pad, cols_pad, csr->nnz, t->csr_rp, t->csr_ci, t->csr_v,
				      CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F),
		    "cusparseCreateCsr");
		t->has_csr = 1;
	}
	if (geom) {
		CK(upload(&t->gA, geom->A, (size_t)geom->nviews * 6), "upload of the view matrices");
		if (rperm)
			CK(upload(&t->grperm, (const int *)rperm, (size_t)geom->nviews * geom->nu), "upload of the row order");
		if (cperm)
			CK(upload(&t->gcperm, (const int *)cperm, (size_t)geom->nx * geom->ny), "upload of the pixel order");
		t->g = rc_dgeom{ geom->nviews, geom->nu, geom->nx, geom->ny, geom->vx, geom->vy, geom->cx, geom->cy,
				 t->gA, t->grperm, t->gcperm };
		t->has_geom = 1;
	}
	*ret = t;
	t = NULL;
out:
	rc_tgpu_free(t);
	return rc;
}

extern "C" const char *rc_tgpu_device_name(const rc_tgpu *t) { return t->name; }
extern "C" double rc_tgpu_peak_gbs(const rc_tgpu *t) { return t->peak_gbs; }

extern "C" int64_t rc_tgpu_matrix_bytes(const rc_tgpu *t, rc_tgpu_kind kind)
{
	switch (kind) {
	case RC_TGPU_WMMA:
	case RC_TGPU_HALF2:
		return t->neb * t->a.m * 16 * 2 + ((int64_t)t->a.mb + 1) * 4 + t->neb * 4;
	case RC_TGPU_CUSPARSE:
		return t->has_csr ? t->csr_nnz * 8 + (t->a.rows_pad + 1) * 4 : 0;
	default:
		return 0;
	}
}

/* out = op(A) in with cuSPARSE (CSR, fp32), nc columns: the baseline of
 * both directions; one work buffer, grown to the larger of their needs. */
static int csr_spmm(rc_tgpu *t, cusparseOperation_t op, const float *in, int in_rows, float *out, int out_rows,
		    char *msg, size_t msglen)
{
	int rc = 0, nc = t->nc;
	const char *dir = op == CUSPARSE_OPERATION_TRANSPOSE ? " (transposed)" : "";
	char what[64];
	if (!t->has_csr) {
		snprintf(msg, msglen, "no CSR matrix was uploaded for the cuSPARSE product");
		return RC_EINVAL;
	}
	cusparseDnMatDescr_t din = NULL, dout = NULL;
	float one = 1, zero = 0;
	size_t need = 0;
	CKS(cusparseCreateDnMat(&din, in_rows, nc, nc, (void *)in, CUDA_R_32F, CUSPARSE_ORDER_ROW), "cusparseCreateDnMat");
	CKS(cusparseCreateDnMat(&dout, out_rows, nc, nc, out, CUDA_R_32F, CUSPARSE_ORDER_ROW), "cusparseCreateDnMat");
	snprintf(what, sizeof what, "cusparseSpMM_bufferSize%s", dir);
	CKS(cusparseSpMM_bufferSize(t->sp, op, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, t->spA, din, &zero, dout,
				    CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &need),
	    what);
	if (need > t->spbuf_size) {
		if (t->spbuf)
			cudaFree(t->spbuf);
		t->spbuf = NULL;
		t->spbuf_size = 0;
		CK(cudaMalloc(&t->spbuf, need), "cudaMalloc cuSPARSE buffer");
		t->spbuf_size = need;
	}
	snprintf(what, sizeof what, "cusparseSpMM%s", dir);
	CKS(cusparseSpMM(t->sp, op, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, t->spA, din, &zero, dout, CUDA_R_32F,
			 CUSPARSE_SPMM_ALG_DEFAULT, t->spbuf),
	    what);
out:
	if (din)
		cusparseDestroyDnMat(din);
	if (dout)
		cusparseDestroyDnMat(dout);
	return rc;
}

/* y = A x on device vectors. */
static int dev_fwd(rc_tgpu *t, rc_tgpu_kind kind, const float *x, float *y, char *msg, size_t msglen)
{
	int nc = t->nc;
	switch (kind) {
	case RC_TGPU_WMMA:
	case RC_TGPU_HALF2:
		rc_tk_colmax(x, t->a.cols_pad, nc, t->scale, t->st);
		rc_tk_to_half(x, t->a.cols_pad, nc, t->scale, t->Xh, t->a.n, t->a.cols_pad, t->st);
		if (kind == RC_TGPU_WMMA)
			rc_tk_wmma_fwd(&t->a, t->Xh, y, nc, t->st);
		else
			rc_tk_half2_fwd(&t->a, t->Xh, y, nc, t->st);
		rc_tk_scale_cols(y, t->a.rows_pad, nc, t->scale, t->st);
		break;
	case RC_TGPU_CUSPARSE:
		return csr_spmm(t, CUSPARSE_OPERATION_NON_TRANSPOSE, x, t->a.cols_pad, y, t->a.rows_pad, msg, msglen);
	case RC_TGPU_ONTHEFLY:
		if (!t->has_geom) {
			snprintf(msg, msglen, "no geometry was uploaded for the on-the-fly product");
			return RC_EINVAL;
		}
		cudaMemsetAsync(y, 0, (size_t)(t->a.rows_pad * nc) * sizeof(float), t->st);
		rc_tk_otf_fwd(&t->g, x, y, nc, t->st);
		break;
	default:
		snprintf(msg, msglen, "unknown product kind %d", (int)kind);
		return RC_EINVAL;
	}
	{
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess) {
			snprintf(msg, msglen, "forward product kernel launch: %s", cudaGetErrorString(e));
			return RC_EDEVICE;
		}
	}
	return 0;
}

/* x = A^T y on device vectors. */
static int dev_back(rc_tgpu *t, rc_tgpu_kind kind, const float *y, float *x, char *msg, size_t msglen)
{
	int nc = t->nc;
	switch (kind) {
	case RC_TGPU_WMMA:
	case RC_TGPU_HALF2:
		rc_tk_colmax(y, t->a.rows_pad, nc, t->scale, t->st);
		rc_tk_to_half(y, t->a.rows_pad, nc, t->scale, t->Yh, 16, t->a.rows_pad + 16, t->st);
		if (kind == RC_TGPU_WMMA)
			rc_tk_wmma_back(&t->a, t->Yh, x, nc, t->st);
		else
			rc_tk_half2_back(&t->a, t->Yh, x, nc, t->st);
		rc_tk_scale_cols(x, t->a.cols_pad, nc, t->scale, t->st);
		break;
	case RC_TGPU_CUSPARSE:
		return csr_spmm(t, CUSPARSE_OPERATION_TRANSPOSE, y, t->a.rows_pad, x, t->a.cols_pad, msg, msglen);
	case RC_TGPU_ONTHEFLY:
		if (!t->has_geom) {
			snprintf(msg, msglen, "no geometry was uploaded for the on-the-fly product");
			return RC_EINVAL;
		}
		cudaMemsetAsync(x, 0, (size_t)(t->a.cols_pad * nc) * sizeof(float), t->st);
		rc_tk_otf_back(&t->g, y, x, nc, t->st);
		break;
	default:
		snprintf(msg, msglen, "unknown product kind %d", (int)kind);
		return RC_EINVAL;
	}
	{
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess) {
			snprintf(msg, msglen, "back product kernel launch: %s", cudaGetErrorString(e));
			return RC_EDEVICE;
		}
	}
	return 0;
}

extern "C" int rc_tgpu_mul(rc_tgpu *t, rc_tgpu_kind kind, int transpose, const float *in, float *out, char *msg,
			   size_t msglen)
{
	int rc = 0, nc = t->nc;
	size_t nin = (size_t)((transpose ? t->a.rows_pad : t->a.cols_pad) * nc);
	size_t nout = (size_t)((transpose ? t->a.cols_pad : t->a.rows_pad) * nc);
	float *din = transpose ? t->Y : t->X, *dout = transpose ? t->X : t->Y;
	CK(cudaMemcpyAsync(din, in, nin * sizeof(float), cudaMemcpyHostToDevice, t->st), "copy of the product input");
	rc = transpose ? dev_back(t, kind, din, dout, msg, msglen) : dev_fwd(t, kind, din, dout, msg, msglen);
	if (rc)
		goto out;
	CK(cudaMemcpyAsync(out, dout, nout * sizeof(float), cudaMemcpyDeviceToHost, t->st), "copy of the product output");
	CK(cudaStreamSynchronize(t->st), "product");
out:
	return rc;
}

extern "C" int rc_tgpu_time(rc_tgpu *t, rc_tgpu_kind kind, int reps, double *ms_fwd, double *ms_back, char *msg,
			    size_t msglen)
{
	int rc = 0;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float ms = 0;
	if (reps < 1)
		reps = 1;
	rc_tk_fill_pattern(t->X, t->a.cols_pad * t->nc, t->st);
	rc_tk_fill_pattern(t->Y, t->a.rows_pad * t->nc, t->st);
	CK(cudaEventCreate(&e0), "cudaEventCreate");
	CK(cudaEventCreate(&e1), "cudaEventCreate");
	for (int dir = 0; dir < 2; dir++) {
		/* warm-up, then the timed repetitions; outputs go to their own
		 * vectors so the inputs stay as filled */
		float *out = dir ? t->tx : t->ty;
		if (!out) {
			size_t n = (size_t)((dir ? t->a.cols_pad : t->a.rows_pad) * t->nc);
			CK(cudaMalloc((void **)(dir ? &t->tx : &t->ty), n * sizeof(float)), "cudaMalloc timing output");
			out = dir ? t->tx : t->ty;
		}
		for (int r = 0; r <= reps; r++) {
			if (r == 1)
				CK(cudaEventRecord(e0, t->st), "cudaEventRecord");
			rc = dir ? dev_back(t, kind, t->Y, out, msg, msglen) : dev_fwd(t, kind, t->X, out, msg, msglen);
			if (rc)
				goto out;
		}
		CK(cudaEventRecord(e1, t->st), "cudaEventRecord");
		CK(cudaEventSynchronize(e1), "timed products");
		CK(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
		*(dir ? ms_back : ms_fwd) = ms / reps;
	}
out:
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	return rc;
}

/* ---- device vectors (the tensor backend); kernels in kernels/cuda/tensor_vec.cu */

/* The launch's error (kernels report at the next call otherwise). */
/* The launch error of a kernel: of the last launch (e = 0: read it here),
 * or the one a kernels/cuda launcher returned (cuda_kernels.h). */
static int launch_rc(int e, const char *what, char *msg, size_t msglen)
{
	if (e == cudaSuccess)
		e = cudaGetLastError();
	if (e == cudaSuccess)
		return 0;
	snprintf(msg, msglen, "%s kernel launch: %s", what, cudaGetErrorString((cudaError_t)e));
	return RC_EDEVICE;
}

static int launched(const char *what, char *msg, size_t msglen)
{
	return launch_rc(cudaSuccess, what, msg, msglen);
}

extern "C" int rc_tgpu_vec_fit(rc_tgpu *t, int nvol, int nproj, char *msg, size_t msglen)
{
	int rc = 0;
	size_t free_b = 0, total_b = 0;
	double need = 4.0 * t->nc * ((double)nvol * t->a.cols_pad + (double)nproj * t->a.rows_pad);
	CK(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
	if (need > 0.9 * (double)free_b) {
		snprintf(msg, msglen, "%d volume and %d projection vectors of %d slices need %.2f GB on %s, %.2f GB are free",
			 nvol, nproj, t->nc, need / 1e9, t->name, (double)free_b / 1e9);
		rc = RC_ETOOBIG;
	}
out:
	return rc;
}

extern "C" int rc_tgpu_vec_new(rc_tgpu *t, int64_t rows, float **ret, char *msg, size_t msglen)
{
	int rc = 0;
	float *v = NULL;
	CK(cudaMalloc((void **)&v, (size_t)(rows * t->nc) * sizeof(float)), "cudaMalloc vector");
	/* zeroed, as on the CPU path: padding rows and columns stay zero */
	CK(cudaMemsetAsync(v, 0, (size_t)(rows * t->nc) * sizeof(float), t->st), "cudaMemset vector");
	*ret = v;
	v = NULL;
out:
	if (v)
		cudaFree(v);
	return rc;
}

extern "C" void rc_tgpu_vec_free(rc_tgpu *t, float *v)
{
	if (v) {
		cudaStreamSynchronize(t->st);
		cudaFree(v);
	}
}

extern "C" int rc_tgpu_vec_upload(rc_tgpu *t, float *dst, const float *src, int64_t rows, char *msg, size_t msglen)
{
	int rc = 0;
	CK(cudaMemcpyAsync(dst, src, (size_t)(rows * t->nc) * sizeof(float), cudaMemcpyHostToDevice, t->st),
	   "upload of a vector");
	/* src is the caller's buffer, free to reuse on return */
	CK(cudaStreamSynchronize(t->st), "upload of a vector");
out:
	return rc;
}

extern "C" int rc_tgpu_vec_download(rc_tgpu *t, const float *src, float *dst, int64_t rows, char *msg,
				    size_t msglen)
{
	int rc = 0;
	CK(cudaMemcpyAsync(dst, src, (size_t)(rows * t->nc) * sizeof(float), cudaMemcpyDeviceToHost, t->st),
	   "download of a vector");
	CK(cudaStreamSynchronize(t->st), "download of a vector");
out:
	return rc;
}

extern "C" int rc_tgpu_set_row_views(rc_tgpu *t, const int32_t *row_view, char *msg, size_t msglen)
{
	int rc = 0;
	if (!t->row_view)
		CK(cudaMalloc((void **)&t->row_view, (size_t)t->a.rows_pad * sizeof(int)), "cudaMalloc row views");
	CK(cudaMemcpy(t->row_view, row_view, (size_t)t->a.rows_pad * sizeof(int), cudaMemcpyHostToDevice),
	   "upload of the row views");
out:
	return rc;
}

extern "C" int rc_tgpu_forward(rc_tgpu *t, rc_tgpu_kind kind, const float *x, float *y, char *msg, size_t msglen)
{
	return dev_fwd(t, kind, x, y, msg, msglen);
}

extern "C" int rc_tgpu_back(rc_tgpu *t, rc_tgpu_kind kind, const float *y, float *x, char *msg, size_t msglen)
{
	return dev_back(t, kind, y, x, msg, msglen);
}

static int need_views(const rc_tgpu *t, int first, char *msg, size_t msglen)
{
	if (first >= 0 && !t->row_view) {
		snprintf(msg, msglen, "a view range needs the row views (rc_tgpu_set_row_views)");
		return RC_EINVAL;
	}
	return 0;
}

/* The mask of views [first, last) for elementwise.cu's kernels, in *m;
 * NULL (every row) when first < 0. */
static const rc_cuda_views *views_of(const rc_tgpu *t, int first, int last, rc_cuda_views *m)
{
	if (first < 0)
		return NULL;
	*m = rc_cuda_views{ t->row_view, t->nc, first, last };
	return m;
}

extern "C" int rc_tgpu_vfill(rc_tgpu *t, float *y, int64_t rows, float v, int nreal, int first, int last,
			     char *msg, size_t msglen)
{
	int rc = need_views(t, first, msg, msglen);
	if (rc)
		return rc;
	int64_t n = rows * t->nc;
	rc_tk_vfill(y, n, t->nc, v, nreal, t->row_view, first, last, t->st);
	return launched("fill", msg, msglen);
}

extern "C" int rc_tgpu_vcopy(rc_tgpu *t, float *y, const float *x, int64_t rows, char *msg, size_t msglen)
{
	int rc = 0;
	CK(cudaMemcpyAsync(y, x, (size_t)(rows * t->nc) * sizeof(float), cudaMemcpyDeviceToDevice, t->st),
	   "copy of a vector");
out:
	return rc;
}

extern "C" int rc_tgpu_vcopy_views(rc_tgpu *t, float *y, const float *x, int first, int last, int zero_others,
				   char *msg, size_t msglen)
{
	int rc = need_views(t, first, msg, msglen);
	if (rc)
		return rc;
	int64_t n = t->a.rows_pad * t->nc;
	rc_tk_vcopy_views(y, x, n, t->nc, t->row_view, first, last, zero_others, t->st);
	return launched("copy of views", msg, msglen);
}

/* coef[c] = a[c] for c < nreal, 0 for the padding columns. */
static int put_coef(rc_tgpu *t, const float *a, int nreal, char *msg, size_t msglen)
{
	int rc = 0;
	std::vector<double> h((size_t)t->nc, 0.0);
	for (int c = 0; c < nreal && c < t->nc; c++)
		h[c] = a[c];
	CK(cudaMemcpyAsync(t->coef, h.data(), (size_t)t->nc * sizeof(double), cudaMemcpyHostToDevice, t->st),
	   "copy of the coefficients");
	/* h is freed on return: wait for the copy */
	CK(cudaStreamSynchronize(t->st), "copy of the coefficients");
out:
	return rc;
}

extern "C" int rc_tgpu_vaxpy(rc_tgpu *t, float *y, const float *a, const float *x, int64_t rows, int nreal,
			     char *msg, size_t msglen)
{
	int rc = put_coef(t, a, nreal, msg, msglen);
	if (rc)
		return rc;
	rc_tk_axpy_cols(y, x, t->coef, 1.0, rows, t->nc, t->st);
	return launched("axpy", msg, msglen);
}

extern "C" int rc_tgpu_vxpay(rc_tgpu *t, float *y, const float *x, const float *a, int64_t rows, int nreal,
			     char *msg, size_t msglen)
{
	int rc = put_coef(t, a, nreal, msg, msglen);
	if (rc)
		return rc;
	rc_tk_xpby_cols(y, x, t->coef, rows, t->nc, t->st);
	return launched("xpay", msg, msglen);
}

extern "C" int rc_tgpu_vdot(rc_tgpu *t, const float *x, const float *y, int64_t rows, int nreal, double *ret,
			    char *msg, size_t msglen)
{
	int rc = 0, nc = t->nc;
	std::vector<double> h((size_t)nc);
	CK(cudaMemsetAsync(t->red, 0, (size_t)nc * sizeof(double), t->st), "cudaMemset sums");
	if (y) {
		rc_tk_coldot(x, y, rows, nc, t->red, t->st);
	} else {
		rc_tk_colsum(x, rows, nc, t->red, t->st);
	}
	if ((rc = launched("dot", msg, msglen)))
		goto out;
	CK(cudaMemcpyAsync(h.data(), t->red, (size_t)nc * sizeof(double), cudaMemcpyDeviceToHost, t->st),
	   "copy of the sums");
	CK(cudaStreamSynchronize(t->st), "dot");
	for (int c = 0; c < nreal && c < nc; c++)
		ret[c] = h[c];
out:
	return rc;
}

extern "C" int rc_tgpu_vinv_guarded(rc_tgpu *t, float *y, int64_t rows, double rel, char *msg, size_t msglen)
{
	int rc = 0;
	int64_t n = rows * t->nc;
	CK(cudaMemsetAsync(t->umax, 0, sizeof(unsigned), t->st), "cudaMemset maximum");
	rc = launch_rc(rc_cuda_max(y, (size_t)n, t->umax, t->st), "maximum", msg, msglen);
	if (!rc)
		rc = launch_rc(rc_cuda_inv_guarded(y, (size_t)n, rel, t->umax, t->st), "guarded inverse", msg,
			       msglen);
out:
	return rc;
}

/* The one sum a kernel added into t->red[0] (e: its launch's error), read
 * back. */
static int read_sum(rc_tgpu *t, int e, double *sum, const char *what, char *msg, size_t msglen)
{
	int rc = launch_rc(e, what, msg, msglen);
	if (rc)
		return rc;
	CK(cudaMemcpyAsync(sum, t->red, sizeof(double), cudaMemcpyDeviceToHost, t->st), "copy of a sum");
	CK(cudaStreamSynchronize(t->st), what);
out:
	return rc;
}

extern "C" int rc_tgpu_vratio(rc_tgpu *t, float *y, const float *p, int first, int last, float eps, double *sum2,
			      char *msg, size_t msglen)
{
	int rc = need_views(t, first, msg, msglen);
	if (rc)
		return rc;
	int64_t n = t->a.rows_pad * t->nc;
	rc_cuda_views vw;
	CK(cudaMemsetAsync(t->red, 0, sizeof(double), t->st), "cudaMemset sum");
	rc = read_sum(t, rc_cuda_ratio(y, p, eps, (size_t)n, views_of(t, first, last, &vw), t->red, t->st), sum2,
		      "ratio", msg, msglen);
out:
	return rc;
}

extern "C" int rc_tgpu_vresidual(rc_tgpu *t, float *e, const float *p, const float *w, int first, int last,
				 double *sum2, char *msg, size_t msglen)
{
	int rc = need_views(t, first, msg, msglen);
	if (rc)
		return rc;
	int64_t n = t->a.rows_pad * t->nc;
	rc_cuda_views vw;
	CK(cudaMemsetAsync(t->red, 0, sizeof(double), t->st), "cudaMemset sum");
	rc = read_sum(t, rc_cuda_residual(p, e, w, (size_t)n, views_of(t, first, last, &vw), t->red, t->st), sum2,
		      "residual", msg, msglen);
out:
	return rc;
}

extern "C" int rc_tgpu_vupdate(rc_tgpu *t, float *v, const float *u, const float *c, int64_t rows, float lambda,
			       int nonneg, char *msg, size_t msglen)
{
	int64_t n = rows * t->nc;
	return launch_rc(rc_cuda_update(v, u, c, lambda, nonneg, (size_t)n, t->st), "update", msg, msglen);
}

extern "C" int rc_tgpu_vmul(rc_tgpu *t, float *v, const float *u, const float *c, int64_t rows, char *msg,
			    size_t msglen)
{
	int64_t n = rows * t->nc;
	return launch_rc(rc_cuda_mul(v, u, c, (size_t)n, t->st), "mul", msg, msglen);
}

extern "C" int rc_tgpu_sync(rc_tgpu *t, char *msg, size_t msglen)
{
	int rc = 0;
	CK(cudaStreamSynchronize(t->st), "tensor backend");
out:
	return rc;
}

extern "C" int rc_tgpu_sym_forward(const rc_sym *s, const float *img, float *proj, double *ms, char *msg,
				   size_t msglen)
{
	int rc = 0;
	const rc_bsr *b = s->b;
	int64_t rows_pad = rc_bsr_rows_pad(b), cols_pad = rc_bsr_cols_pad(b);
	int64_t npix = (int64_t)s->n * s->n;
	std::vector<int> tmp;
	rc_dbsr a;
	__half *blocks = NULL, *Xh = NULL;
	int *row_ptr = NULL, *col_idx = NULL, *src = NULL, *rowsrc = NULL;
	float *w0 = NULL, *dimg = NULL, *X = NULL, *Y = NULL, *dproj = NULL, *scale = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float t_ms = 0;
	if (b->frag != RC_FRAG_32_8_16) {
		snprintf(msg, msglen, "the symmetric projection runs the 32.8.16 fragment only");
		return RC_EINVAL;
	}
	CK(upload(&blocks, (const __half *)b->blocks, (size_t)b->neb * b->bm * b->bk), "upload of the sector blocks");
	tmp.assign(b->row_ptr, b->row_ptr + b->mb + 1);
	CK(upload(&row_ptr, tmp.data(), tmp.size()), "upload of the sector row index");
	CK(upload(&col_idx, (const int *)b->col_idx, (size_t)b->neb), "upload of the sector column index");
	CK(upload(&src, (const int *)s->src, (size_t)(8 * s->n0)), "upload of the symmetry pixel map");
	CK(upload(&rowsrc, (const int *)s->rowsrc, (size_t)(8 * s->rows)), "upload of the symmetry row map");
	CK(upload(&w0, s->w0, (size_t)s->n0), "upload of the sector weights");
	CK(upload(&dimg, img, (size_t)npix), "upload of the image");
	CK(cudaMalloc((void **)&X, (size_t)(cols_pad * 8) * sizeof(float)), "cudaMalloc X");
	CK(cudaMalloc((void **)&Xh, (size_t)(cols_pad * 8) * sizeof(__half)), "cudaMalloc Xh");
	CK(cudaMalloc((void **)&Y, (size_t)(rows_pad * 8) * sizeof(float)), "cudaMalloc Y");
	CK(cudaMalloc((void **)&scale, 8 * sizeof(float)), "cudaMalloc scale");
	CK(cudaMalloc((void **)&dproj, (size_t)s->rows * sizeof(float)), "cudaMalloc projection");
	a = rc_dbsr{ 32, 8, b->mb, b->nb, rows_pad, cols_pad, blocks, row_ptr, col_idx, NULL, NULL, NULL };
	CK(cudaEventCreate(&e0), "cudaEventCreate");
	CK(cudaEventCreate(&e1), "cudaEventCreate");
	CK(cudaEventRecord(e0, 0), "cudaEventRecord");
	rc_tk_sym_gather(dimg, src, w0, s->n0, cols_pad, X, 0);
	rc_tk_colmax(X, cols_pad, 8, scale, 0);
	rc_tk_to_half(X, cols_pad, 8, scale, Xh, 8, cols_pad, 0);
	rc_tk_wmma_fwd(&a, Xh, Y, 8, 0);
	rc_tk_scale_cols(Y, rows_pad, 8, scale, 0);
	rc_tk_sym_combine(Y, rowsrc, s->rows, dproj, 0);
	CK(cudaGetLastError(), "symmetric projection kernels");
	CK(cudaEventRecord(e1, 0), "cudaEventRecord");
	CK(cudaEventSynchronize(e1), "symmetric projection");
	CK(cudaEventElapsedTime(&t_ms, e0, e1), "cudaEventElapsedTime");
	if (ms)
		*ms = t_ms;
	CK(cudaMemcpy(proj, dproj, (size_t)s->rows * sizeof(float), cudaMemcpyDeviceToHost), "copy of the projection");
out:
	void *ptrs[] = { blocks, Xh, row_ptr, col_idx, src, rowsrc, w0, dimg, X, Y, dproj, scale };
	for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
		if (ptrs[i])
			cudaFree(ptrs[i]);
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	return rc;
}
