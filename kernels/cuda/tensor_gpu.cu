/*
 * tensor_gpu: host side of the tensor path on CUDA (core/tensor_gpu.h):
 * upload of the BSR (and optionally the CSR for cuSPARSE and the geometry
 * for the on-the-fly kernels), the products by kind on device vectors, CGLS
 * with every vector resident, timing, and the symmetric single-slice
 * forward projection.  Every CUDA/cuSPARSE call is checked with a context
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
#include "bsr.h"
#include "tensor_gpu.h"
#include "tensor_sym.h"
}
#include "tensor_kernels.cuh"

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
	/* CG */
	float *cx, *cr, *cp, *cs, *ct;
	double *dots; /* 5 * nc */
	double *coef; /* 2 * nc */
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
			 t->scale, t->Xh, t->Yh, t->cx, t->cr, t->cp, t->cs, t->ct, t->dots, t->coef,
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
			      (double)ncols * (cols_pad * (4 + 2 + 3 * 4) + (rows_pad + 16) * 2 + rows_pad * (4 + 2 * 4)) +
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

__global__ void k_fill_pattern(float *v, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		v[i] = 0.5f + 0.25f * (float)((i * 2654435761u) % 1024) / 1024.0f;
}

extern "C" int rc_tgpu_time(rc_tgpu *t, rc_tgpu_kind kind, int reps, double *ms_fwd, double *ms_back, char *msg,
			    size_t msglen)
{
	int rc = 0;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float ms = 0;
	if (reps < 1)
		reps = 1;
	k_fill_pattern<<<1024, 256, 0, t->st>>>(t->X, t->a.cols_pad * t->nc);
	k_fill_pattern<<<1024, 256, 0, t->st>>>(t->Y, t->a.rows_pad * t->nc);
	CK(cudaEventCreate(&e0), "cudaEventCreate");
	CK(cudaEventCreate(&e1), "cudaEventCreate");
	for (int dir = 0; dir < 2; dir++) {
		/* warm-up, then the timed repetitions; outputs go to the CG
		 * scratch vectors so the inputs stay as filled */
		float *out = dir ? t->cx : t->ct;
		if (!out) {
			size_t n = (size_t)((dir ? t->a.cols_pad : t->a.rows_pad) * t->nc);
			CK(cudaMalloc((void **)(dir ? &t->cx : &t->ct), n * sizeof(float)), "cudaMalloc timing output");
			out = dir ? t->cx : t->ct;
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

extern "C" int rc_tgpu_cgls(rc_tgpu *t, rc_tgpu_kind kind, const float *b, float *x, int iterations,
			    rc_tgpu_iter_fn iter, void *ud, int *ret_done, char *msg, size_t msglen)
{
	int rc = 0, nc = t->nc, done = 0;
	int64_t n = t->a.cols_pad, m = t->a.rows_pad;
	size_t nb = (size_t)(n * nc), mbn = (size_t)(m * nc);
	std::vector<double> h(5 * (size_t)nc), hc(2 * (size_t)nc);
	double *d_phi, *d_phi2, *d_tt, *d_pp, *d_x2;
	if (!t->cx)
		CK(cudaMalloc((void **)&t->cx, nb * sizeof(float)), "cudaMalloc CG x");
	if (!t->ct)
		CK(cudaMalloc((void **)&t->ct, mbn * sizeof(float)), "cudaMalloc CG t");
	if (!t->cr)
		CK(cudaMalloc((void **)&t->cr, nb * sizeof(float)), "cudaMalloc CG r");
	if (!t->cp)
		CK(cudaMalloc((void **)&t->cp, nb * sizeof(float)), "cudaMalloc CG p");
	if (!t->cs)
		CK(cudaMalloc((void **)&t->cs, mbn * sizeof(float)), "cudaMalloc CG s");
	if (!t->dots)
		CK(cudaMalloc((void **)&t->dots, 5 * (size_t)nc * sizeof(double)), "cudaMalloc CG dots");
	if (!t->coef)
		CK(cudaMalloc((void **)&t->coef, 2 * (size_t)nc * sizeof(double)), "cudaMalloc CG coefficients");
	d_phi = t->dots;
	d_phi2 = t->dots + nc;
	d_tt = t->dots + 2 * nc;
	d_pp = t->dots + 3 * nc;
	d_x2 = t->dots + 4 * nc;
	CK(cudaMemcpyAsync(t->cs, b, mbn * sizeof(float), cudaMemcpyHostToDevice, t->st), "copy of the sinograms");
	CK(cudaMemsetAsync(t->cx, 0, nb * sizeof(float), t->st), "cudaMemset x");
	rc = dev_back(t, kind, t->cs, t->cr, msg, msglen);
	if (rc)
		goto out;
	CK(cudaMemcpyAsync(t->cp, t->cr, nb * sizeof(float), cudaMemcpyDeviceToDevice, t->st), "copy r to p");
	CK(cudaMemsetAsync(t->dots, 0, 5 * (size_t)nc * sizeof(double), t->st), "cudaMemset dots");
	rc_tk_coldot(t->cr, t->cr, n, nc, d_phi, t->st);
	for (int it = 1; it <= iterations; it++) {
		rc = dev_fwd(t, kind, t->cp, t->ct, msg, msglen);
		if (rc)
			goto out;
		CK(cudaMemsetAsync(d_phi2, 0, 4 * (size_t)nc * sizeof(double), t->st), "cudaMemset dots");
		rc_tk_coldot(t->ct, t->ct, m, nc, d_tt, t->st);
		rc_tk_coldot(t->cp, t->cp, n, nc, d_pp, t->st);
		CK(cudaMemcpyAsync(h.data(), t->dots, 5 * (size_t)nc * sizeof(double), cudaMemcpyDeviceToHost, t->st),
		   "copy of the CG dots");
		CK(cudaStreamSynchronize(t->st), "CG step");
		double dx2 = 0;
		for (int c = 0; c < nc; c++) {
			double phi = h[c], tt = h[2 * nc + c], pp = h[3 * nc + c];
			hc[c] = tt > 0 ? phi / tt : 0; /* alpha */
			dx2 += hc[c] * hc[c] * pp;
		}
		CK(cudaMemcpyAsync(t->coef, hc.data(), (size_t)nc * sizeof(double), cudaMemcpyHostToDevice, t->st),
		   "copy of alpha");
		rc_tk_axpy_cols(t->cx, t->cp, t->coef, 1.0, n, nc, t->st);
		rc_tk_axpy_cols(t->cs, t->ct, t->coef, -1.0, m, nc, t->st);
		rc = dev_back(t, kind, t->cs, t->cr, msg, msglen);
		if (rc)
			goto out;
		rc_tk_coldot(t->cr, t->cr, n, nc, d_phi2, t->st);
		rc_tk_coldot(t->cx, t->cx, n, nc, d_x2, t->st);
		/* ||s||^2 into the tt slot, free now */
		CK(cudaMemsetAsync(d_tt, 0, (size_t)nc * sizeof(double), t->st), "cudaMemset dots");
		rc_tk_coldot(t->cs, t->cs, m, nc, d_tt, t->st);
		CK(cudaMemcpyAsync(h.data(), t->dots, 5 * (size_t)nc * sizeof(double), cudaMemcpyDeviceToHost, t->st),
		   "copy of the CG dots");
		CK(cudaStreamSynchronize(t->st), "CG step");
		double s2 = 0, x2 = 0;
		for (int c = 0; c < nc; c++) {
			double phi = h[c], phi2 = h[nc + c];
			hc[nc + c] = phi > 0 ? phi2 / phi : 0; /* beta */
			s2 += h[2 * nc + c];
			x2 += h[4 * nc + c];
		}
		CK(cudaMemcpyAsync(t->coef + nc, hc.data() + nc, (size_t)nc * sizeof(double), cudaMemcpyHostToDevice,
				   t->st),
		   "copy of beta");
		rc_tk_xpby_cols(t->cp, t->cr, t->coef + nc, n, nc, t->st);
		CK(cudaMemcpyAsync(d_phi, d_phi2, (size_t)nc * sizeof(double), cudaMemcpyDeviceToDevice, t->st),
		   "phi update");
		done = it;
		if (iter) {
			rc = iter(ud, it, sqrt(s2), x2 > 0 ? sqrt(dx2 / x2) : 0);
			if (rc)
				break;
		}
	}
	CK(cudaMemcpyAsync(x, t->cx, nb * sizeof(float), cudaMemcpyDeviceToHost, t->st), "copy of the volume");
	CK(cudaStreamSynchronize(t->st), "CG");
out:
	if (ret_done)
		*ret_done = done;
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
