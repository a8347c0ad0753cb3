/*
 * tensor_gpu: the CUDA side of the tensor path (kernels/cuda/tensor_*.cu),
 * seen from C.  Declared always, defined only in a build with nvcc
 * (RC_HAVE_CUDA, from mk/cuda.mk); C callers test RC_HAVE_CUDA first.
 *
 * An rc_tgpu holds on one device: the BSR fp16 blocks with their row and
 * column indices (A^T is read from the same blocks), optionally the CSR fp32
 * matrix (cuSPARSE baseline) and the per-view geometry (on-the-fly
 * distance-driven baseline), and work vectors for ncols slices.  Products
 * run on device-resident vectors; the tensor backend (backend_tensor.c)
 * keeps an algorithm's vectors on the device through the vector calls
 * below, so every algorithm of algo.h runs there.
 *
 * Products by kind:
 *   WMMA      tensor cores, fp16 in, fp32 accumulate, the BSR's fragment
 *             (forward with M.N.K as named; A^T with 16.16.16 fragments on
 *             the transposed blocks, see tensor_wmma.cu)
 *   HALF2     CUDA cores, the same blocks, half2 products, fp32 sums
 *   CUSPARSE  cusparseSpMM on the CSR fp32 matrix
 *   ONTHEFLY  distance-driven weights computed in the kernel, no matrix
 * Every call returns 0 or a negative rc_code with a message in msg.
 */
#ifndef RC_TENSOR_GPU_H
#define RC_TENSOR_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rc_bsr;
struct rc_csr;

typedef enum rc_tgpu_kind {
	RC_TGPU_WMMA = 0,
	RC_TGPU_HALF2,
	RC_TGPU_CUSPARSE,
	RC_TGPU_ONTHEFLY,
	RC_TGPU_KIND_COUNT
} rc_tgpu_kind;

/* Geometry for the on-the-fly kernel: per view the 2x3 matrix A of
 * geometry.h and the pixel grid.  Flat detectors only: the kernel takes
 * bin edges at e +- 1/2 of A, not at rc_geom_line_u of a curved fan; only
 * the tensor bench and test_tensor_gpu build it (jobs use the matrix). */
typedef struct rc_tgpu_geom {
	int nviews, nu, nx, ny;
	double vx, vy, cx, cy;
	const double *A;        /* nviews * 6 */
} rc_tgpu_geom;

typedef struct rc_tgpu rc_tgpu;

/* Number of CUDA devices (0 when no driver or device). */
int rc_tgpu_device_count(void);

/* Uploads b (required), csr and geom (may be NULL: those kinds are then
 * unavailable); rperm/cperm (natural -> ordered, as given to rc_bsr_build,
 * NULL = identity) put the CSR and the on-the-fly products into the BSR's
 * ordered index space.  Vectors for ncols slices, a multiple of 32. */
int rc_tgpu_new(const struct rc_bsr *b, const struct rc_csr *csr, const int32_t *rperm, const int32_t *cperm,
		const rc_tgpu_geom *geom, int ncols, rc_tgpu **ret, char *msg, size_t msglen);
void rc_tgpu_free(rc_tgpu *t);
const char *rc_tgpu_device_name(const rc_tgpu *t);
/* Bytes the device holds for kind's matrix (Table 5). */
int64_t rc_tgpu_matrix_bytes(const rc_tgpu *t, rc_tgpu_kind kind);
/* Peak device memory bandwidth in GB/s from the device properties. */
double rc_tgpu_peak_gbs(const rc_tgpu *t);

/* Host-to-host products (for tests): X[cols_pad][ncols], Y[rows_pad][ncols]. */
int rc_tgpu_mul(rc_tgpu *t, rc_tgpu_kind kind, int transpose, const float *in, float *out,
		char *msg, size_t msglen);

/* Mean milliseconds of one forward and one back product on device-resident
 * vectors over reps repetitions (after one warm-up). */
int rc_tgpu_time(rc_tgpu *t, rc_tgpu_kind kind, int reps, double *ms_fwd, double *ms_back,
		 char *msg, size_t msglen);

/* ---- device vectors (the tensor backend, backend_tensor.c) ---------------
 *
 * A device vector is rows x ncols floats, [row][ncols] in the BSR's ordered,
 * padded index space (rows = rows_pad for projections, cols_pad for
 * volumes).  Columns < nreal are slices, the others padding: the per-column
 * calls leave padding columns at 0 and dot ignores them.  View ranges use
 * the row -> view map of rc_tgpu_set_row_views (-1: a padding row, in no
 * view); first < 0 means every row.  Calls are queued on the object's stream;
 * those that return scalars (dot, ratio, residual) and download wait for it.
 * Element-wise float operations are those of vec_host.c. */

/* RC_ETOOBIG (message in msg) unless nvol volume-sized and nproj
 * projection-sized vectors fit in the device's free memory. */
int rc_tgpu_vec_fit(rc_tgpu *t, int nvol, int nproj, char *msg, size_t msglen);
int rc_tgpu_vec_new(rc_tgpu *t, int64_t rows, float **ret, char *msg, size_t msglen);
void rc_tgpu_vec_free(rc_tgpu *t, float *v);
int rc_tgpu_vec_upload(rc_tgpu *t, float *dst, const float *src, int64_t rows, char *msg, size_t msglen);
int rc_tgpu_vec_download(rc_tgpu *t, const float *src, float *dst, int64_t rows, char *msg, size_t msglen);
/* row_view[rows_pad]: the view of each ordered projection row, -1 padding. */
int rc_tgpu_set_row_views(rc_tgpu *t, const int32_t *row_view, char *msg, size_t msglen);
/* y = A x, x = A^T y on device vectors (kind as rc_tgpu_mul). */
int rc_tgpu_forward(rc_tgpu *t, rc_tgpu_kind kind, const float *x, float *y, char *msg, size_t msglen);
int rc_tgpu_back(rc_tgpu *t, rc_tgpu_kind kind, const float *y, float *x, char *msg, size_t msglen);
/* y = v (rows of views first..last; real columns v, padding columns 0) */
int rc_tgpu_vfill(rc_tgpu *t, float *y, int64_t rows, float v, int nreal, int first, int last, char *msg,
		  size_t msglen);
int rc_tgpu_vcopy(rc_tgpu *t, float *y, const float *x, int64_t rows, char *msg, size_t msglen);
/* Projection vectors: y = x on the rows of views first..last; the other
 * rows keep y (zero_others 0) or become 0 (zero_others 1). */
int rc_tgpu_vcopy_views(rc_tgpu *t, float *y, const float *x, int first, int last, int zero_others, char *msg,
			size_t msglen);
/* y += a[c] x, y = x + a[c] y (a: nreal host floats, one per slice) */
int rc_tgpu_vaxpy(rc_tgpu *t, float *y, const float *a, const float *x, int64_t rows, int nreal, char *msg,
		  size_t msglen);
int rc_tgpu_vxpay(rc_tgpu *t, float *y, const float *x, const float *a, int64_t rows, int nreal, char *msg,
		  size_t msglen);
/* ret[c] = sum x y over rows (y NULL: sum x), c < nreal, in double */
int rc_tgpu_vdot(rc_tgpu *t, const float *x, const float *y, int64_t rows, int nreal, double *ret, char *msg,
		 size_t msglen);
/* y = y > rel max(y) && y > 0 ? 1 / y : 0 */
int rc_tgpu_vinv_guarded(rc_tgpu *t, float *y, int64_t rows, double rel, char *msg, size_t msglen);
/* y = y > eps ? max(p, 0) / y : 0, *sum2 = sum (p - y)^2 before */
int rc_tgpu_vratio(rc_tgpu *t, float *y, const float *p, int first, int last, float eps, double *sum2, char *msg,
		   size_t msglen);
/* Projection vectors, rows of views first..last: e = (p - e) w (w NULL: 1),
 * *sum2 = sum (p - e)^2 before */
int rc_tgpu_vresidual(rc_tgpu *t, float *e, const float *p, const float *w, int first, int last, double *sum2,
		      char *msg, size_t msglen);
/* v += lambda u c, then max(v, 0) when nonneg; v *= u c */
int rc_tgpu_vupdate(rc_tgpu *t, float *v, const float *u, const float *c, int64_t rows, float lambda, int nonneg,
		    char *msg, size_t msglen);
int rc_tgpu_vmul(rc_tgpu *t, float *v, const float *u, const float *c, int64_t rows, char *msg, size_t msglen);
/* Waits for the queued work. */
int rc_tgpu_sync(rc_tgpu *t, char *msg, size_t msglen);

/* Single-slice forward projection through the 8 symmetries (paper 001
 * §3.4) with 32.8.16 fragments: s holds the sector matrix (tensor_sym.h)
 * as BSR 32.8.16; img[ny][nx] in, proj[nviews][nu] out. */
struct rc_sym;
int rc_tgpu_sym_forward(const struct rc_sym *s, const float *img, float *proj, double *ms,
			char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif

#endif
