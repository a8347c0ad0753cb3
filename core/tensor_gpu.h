/*
 * tensor_gpu: the CUDA side of the tensor path (kernels/cuda/tensor_*.cu),
 * seen from C.  Declared always, defined only in a build with nvcc
 * (RC_HAVE_CUDA, from mk/cuda.mk); C callers test RC_HAVE_CUDA first.
 *
 * An rc_tgpu holds on one device: the BSR fp16 blocks with their row and
 * column indices (A^T is read from the same blocks), optionally the CSR fp32
 * matrix (cuSPARSE baseline) and the per-view geometry (on-the-fly
 * distance-driven baseline), and work vectors for ncols slices.  Products
 * and CG run on device-resident vectors; the host calls copy in and out.
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
 * geometry.h and the pixel grid. */
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

/* CGLS (tensor_cg.h's algorithm) on the device: b[rows_pad][ncols] in,
 * x[cols_pad][ncols] out.  iter(ud, it, residual, rel_change) after every
 * iteration; a non-zero return stops the run with that code. */
typedef int (*rc_tgpu_iter_fn)(void *ud, int iteration, double residual, double rel_change);
int rc_tgpu_cgls(rc_tgpu *t, rc_tgpu_kind kind, const float *b, float *x, int iterations,
		 rc_tgpu_iter_fn iter, void *ud, int *ret_done, char *msg, size_t msglen);

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
