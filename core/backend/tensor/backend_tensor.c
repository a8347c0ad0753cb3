/*
 * backend_tensor: the tensor path (paper 001) as a backend (backend.h), so
 * that every algorithm of algo.h runs on the distance-driven system matrix
 * of a fan or parallel geometry.
 *
 * Vectors are the tensor path's [row][ncols] arrays (tensor.h): row r of a
 * projection vector is the ordered, padded index rperm[view * nu + u], row
 * c of a volume vector the ordered pixel cperm[iy * nx + ix], and the ncols
 * columns are the slices side by side (ncols = nz on the CPU, a multiple of
 * 32 on the GPU).  upload gathers the host layouts ([slice][view][u],
 * [z][y][x]) into that order with padding rows and columns zero; download
 * scatters back.  On the CPU the arrays are host memory; on the GPU
 * (m->gpu) device memory, with tensor_gpu.h's vector calls.
 *
 * Products: forward = A x (BSR fp16 when the matrix is mixed, CSR fp32
 * otherwise), back = A^T y for every rc_bp_kind: the DD pair is matched, so
 * SART's voxel-driven back projection and the matched one are one product
 * here.
 *
 * View subsets (SART's ordered subsets).  The matrix is one operator over
 * all views, so a subset [first, last) is cut from the whole product: a
 * per-row view index (row -> natural row -> view; -1 for a padding row)
 * selects the subset's rows.  forward computes the full A x into a scratch
 * vector and copies the subset's rows into the output (other rows stay
 * untouched); back masks the input to the subset's rows in the scratch
 * vector, then A^T of that.  So a subset costs a full product there: SART
 * with S subsets does S times the work of one full iteration's products.
 * The CPU's fp32 CSR (precision fp32, the default) is in natural order
 * instead, where a subset is a row range of A and a column range of A^T:
 * its products cost the subset's share (rc_csr_mul_range).
 *
 * Batches: the nz real slices.  dot returns one sum per slice (padding
 * columns ignored), axpy / xpay take one coefficient per slice.  Padding
 * columns and padding rows stay zero: upload writes zeros there, fill writes
 * 0 to padding columns and never touches padding rows (they are in no
 * view), and every other call maps zeros to zeros.
 *
 * Element-wise calls on the CPU are vec_host.c's loops over whole vectors
 * where the layout allows (copy, inv_guarded, ratio, update, mul) and over
 * runs of consecutive rows of the range (fill, residual); the per-column
 * calls (dot, axpy, xpay) have small loops of their own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/elementwise_ops.h"
#include "projectors/bsr.h"
#include "projectors/bsr_cpu.h"
#include "projectors/dd_matrix.h"
#include "projectors/proj_cpu.h"
#include "util/tensor_par.h"
#include "util/rc_clock.h"
#include "backend/tensor/backend_tensor.h"
#include "backend/tensor/tensor_gpu.h"
#include "backend/vec_host.h"

struct rc_vec {
	rc_space space;
	int64_t rows; /* rows_pad or cols_pad */
	float *p;     /* rows * nc floats: host (CPU path) or device memory */
};

typedef struct tbk {
	rc_backend base;
	rc_tensor_mat m;
	int nv, nu, nz, nc;
	int64_t rows, cols; /* natural rows (views * bins) and pixels */
	int32_t *row_view;  /* rows_pad */
	rc_vec *scratch;    /* projection-sized, for view subsets; on first use */
	float *vscale;      /* fbp_start: per ordered pixel, FBP's view weights over A^T's; on first use */
	float *stage;       /* GPU: host staging for upload / download */
	char msg[256];
} tbk;

static int on_gpu(const tbk *t)
{
#ifdef RC_HAVE_CUDA
	return t->m.gpu != NULL;
#else
	(void)t;
	return 0;
#endif
}

#ifdef RC_HAVE_CUDA

/* A tensor_gpu.h return code as an rc_err. */
static int gpu_rc(tbk *t, int rc, rc_err *err)
{
	return rc ? rc_fail(err, rc, "execution.engine", "tensor engine, GPU: %s", t->msg) : 0;
}
#endif

static size_t vec_len(const tbk *t, const rc_vec *v)
{
	return (size_t)v->rows * (size_t)t->nc;
}

/* ---- vectors ------------------------------------------------------------ */

static int vec_new(rc_backend *b, rc_space s, rc_vec **ret, rc_err *err)
{
	tbk *t = (tbk *)b;
	rc_vec *v = calloc(1, sizeof *v);
	if (!v)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a vector");
	v->space = s;
	v->rows = s == RC_SPACE_VOLUME ? t->m.cols_pad : t->m.rows_pad;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t)) {
		int rc = rc_tgpu_vec_new(t->m.gpu, v->rows, &v->p, t->msg, sizeof t->msg);
		if (rc) {
			free(v);
			return gpu_rc(t, rc, err);
		}
		*ret = v;
		return 0;
	}
#endif
	/* zeroed: the padding rows and columns must hold zeros from the start
	 * (a fill over views never writes padding rows, and a full-range
	 * product reads them, multiplied by the blocks' zero entries) */
	/* on 64-byte lines: a 32-slice row (128 bytes) is then two cache
	 * lines, not three, for the products' loads */
	size_t bytes = (vec_len(t, v) * sizeof(float) + 63) / 64 * 64;
	v->p = aligned_alloc(64, bytes ? bytes : 64);
	if (v->p)
		memset(v->p, 0, bytes);
	if (!v->p) {
		free(v);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a %s vector of %d slices",
			       s == RC_SPACE_VOLUME ? "volume" : "projection", t->nc);
	}
	*ret = v;
	return 0;
}

static void vec_free(rc_backend *b, rc_vec *v)
{
	tbk *t = (tbk *)b;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t)) {
		rc_tgpu_vec_free(t->m.gpu, v->p);
		free(v);
		return;
	}
#endif
	(void)t;
	free(v->p);
	free(v);
}

/* host [z][n natural] <-> X[perm(i)][z].  Each item is a block of
 * RC_TBK_XBLOCK entries i (the order within a block below).
 * Slices outermost instead touched every line of X nz times (a pass over
 * X per slice, 0.1-0.2 s per volume at 256^2 x 32 on one thread: the TV
 * operator's host round trips and the FDK start made it a fifth of a
 * default CGLS job).  Same values to the bit. */
#define RC_TBK_XBLOCK 4096

struct xfer_ud {
	const tbk *t;
	const int32_t *perm;
	int64_t n;
	double div; /* 0 or 1: none */
	const float *src;
	float *X, *dst;
};

/* gather: an entry's run of nc slices written whole.  scatter: tiles of
 * RC_TBK_XTILE entries, since its nz write streams lie n floats apart (a
 * power of two at 256^2: one cache set), so each slice's part of the tile
 * is written whole while the tile's X rows stay in cache (measured: the
 * entry-by-entry order took 2.5x as long for scatter, the tiles 2.4x as
 * long for gather). */
#define RC_TBK_XTILE 256

static int gather_block(int64_t item, int worker, void *ud)
{
	(void)worker;
	const struct xfer_ud *u = ud;
	int nc = u->t->nc, nz = u->t->nz;
	int64_t n = u->n, i0 = item * RC_TBK_XBLOCK, i1 = i0 + RC_TBK_XBLOCK < n ? i0 + RC_TBK_XBLOCK : n;
	int scaled = u->div != 0.0 && u->div != 1.0;
	for (int64_t i = i0; i < i1; i++) {
		float *x = u->X + (u->perm ? (int64_t)u->perm[i] : i) * nc;
		const float *s = u->src + i;
		for (int z = 0; z < nz; z++)
			x[z] = scaled ? (float)(s[(int64_t)z * n] / u->div) : s[(int64_t)z * n];
		for (int z = nz; z < nc; z++)
			x[z] = 0.0f;
	}
	return 0;
}

static int scatter_block(int64_t item, int worker, void *ud)
{
	(void)worker;
	const struct xfer_ud *u = ud;
	int nc = u->t->nc, nz = u->t->nz;
	int64_t n = u->n, i0 = item * RC_TBK_XBLOCK, i1 = i0 + RC_TBK_XBLOCK < n ? i0 + RC_TBK_XBLOCK : n;
	int scaled = u->div != 0.0 && u->div != 1.0;
	for (int64_t j0 = i0; j0 < i1; j0 += RC_TBK_XTILE) {
		int64_t j1 = j0 + RC_TBK_XTILE < i1 ? j0 + RC_TBK_XTILE : i1;
		for (int z = 0; z < nz; z++) {
			float *d = u->dst + (int64_t)z * n;
			for (int64_t i = j0; i < j1; i++) {
				float x = u->X[(u->perm ? (int64_t)u->perm[i] : i) * nc + z];
				d[i] = scaled ? (float)(x * u->div) : x;
			}
		}
	}
	return 0;
}

static struct xfer_ud xfer_of(const tbk *t, const rc_vec *v)
{
	int vol = v->space == RC_SPACE_VOLUME;
	return (struct xfer_ud){ .t = t,
				 .perm = vol ? t->m.cperm : t->m.rperm,
				 .n = vol ? t->cols : t->rows,
				 .div = vol ? 0.0 : t->m.proj_div };
}

/* host [z][n natural] -> X[perm(i)][z], padding rows and columns zero */
static void gather(const tbk *t, const rc_vec *v, const float *src, float *X)
{
	struct xfer_ud u = xfer_of(t, v);
	u.src = src;
	u.X = X;
	/* the padding rows (no perm(i) lands there); the entries' own rows,
	 * padding columns included, are written whole by the blocks */
	int64_t len = vec_len(t, v) / t->nc;
	if (len > u.n && !u.perm)
		memset(X + u.n * t->nc, 0, (size_t)(len - u.n) * (size_t)t->nc * sizeof *X); /* the tail only */
	else if (len > u.n)
		memset(X, 0, vec_len(t, v) * sizeof *X); /* a permutation spreads them */
	rc_par_for((u.n + RC_TBK_XBLOCK - 1) / RC_TBK_XBLOCK, 1, t->m.threads, gather_block, &u);
}

static void scatter(const tbk *t, const rc_vec *v, const float *X, float *dst)
{
	struct xfer_ud u = xfer_of(t, v);
	u.X = (float *)X;
	u.dst = dst;
	rc_par_for((u.n + RC_TBK_XBLOCK - 1) / RC_TBK_XBLOCK, 1, t->m.threads, scatter_block, &u);
}

/* The GPU path's host staging buffer, as large as the larger vector. */
static int stage(tbk *t, rc_err *err)
{
	if (t->stage)
		return 0;
	int64_t r = t->m.rows_pad > t->m.cols_pad ? t->m.rows_pad : t->m.cols_pad;
	t->stage = malloc((size_t)r * (size_t)t->nc * sizeof(float));
	return t->stage ? 0 : rc_fail(err, RC_ENOMEM, "", "out of memory for the upload buffer");
}

static int upload(rc_backend *b, rc_vec *dst, const float *src, rc_err *err)
{
	tbk *t = (tbk *)b;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t)) {
		int rc = stage(t, err);
		if (rc)
			return rc;
		gather(t, dst, src, t->stage);
		return gpu_rc(t, rc_tgpu_vec_upload(t->m.gpu, dst->p, t->stage, dst->rows, t->msg, sizeof t->msg), err);
	}
#endif
	(void)stage;
	(void)err;
	gather(t, dst, src, dst->p);
	return 0;
}

static int download(rc_backend *b, const rc_vec *src, float *dst, rc_err *err)
{
	tbk *t = (tbk *)b;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t)) {
		int rc = stage(t, err);
		if (!rc)
			rc = gpu_rc(t, rc_tgpu_vec_download(t->m.gpu, src->p, t->stage, src->rows, t->msg, sizeof t->msg),
				    err);
		if (!rc)
			scatter(t, src, t->stage, dst);
		return rc;
	}
#endif
	(void)err;
	scatter(t, src, src->p, dst);
	return 0;
}

/* ---- view ranges -------------------------------------------------------- */

/* rc_bk_views (backend.h); 0 when the range holds no view. */
static int views_of(tbk *t, int *first, int *last)
{
	rc_bk_views(&t->base, first, last);
	return *first < *last;
}

static int row_in(const tbk *t, int64_t r, int first, int last)
{
	int v = t->row_view[r];
	return v >= first && v < last;
}

/* Calls f(t, r0, r1, ud) for every maximal run of rows [r0, r1) of views
 * [first, last). */
static void for_runs(const tbk *t, int first, int last, void (*f)(const tbk *, int64_t, int64_t, void *), void *ud)
{
	int64_t n = t->m.rows_pad;
	for (int64_t r = 0; r < n;) {
		if (!row_in(t, r, first, last)) {
			r++;
			continue;
		}
		int64_t r0 = r;
		while (r < n && row_in(t, r, first, last))
			r++;
		f(t, r0, r, ud);
	}
}

struct copy_ud {
	float *dst;
	const float *src;
};

static void run_copy(const tbk *t, int64_t r0, int64_t r1, void *ud)
{
	struct copy_ud *c = ud;
	size_t o = (size_t)r0 * (size_t)t->nc;
	memcpy(c->dst + o, c->src + o, (size_t)(r1 - r0) * (size_t)t->nc * sizeof(float));
}

/* ---- products ----------------------------------------------------------- */

static int scratch(tbk *t, rc_err *err)
{
	return t->scratch ? 0 : vec_new(&t->base, RC_SPACE_PROJ, &t->scratch, err);
}

/* The CPU products, timed into the backend's stats (backend.h) as products
 * of every view: a subset's product is a whole one. */
static int mul_fwd(tbk *t, const float *x, float *y, rc_err *err)
{
	double t0 = rc_now_s();
	int rc;
	if (t->m.cpu) {
		rc = rc_bsr_cpu_mul(t->m.cpu, 0, x, y, t->nc, t->m.threads);
		if (rc)
			rc = rc_fail(err, rc, "", "the tensor engine's forward product failed (code %d)", rc);
	} else if (t->m.bsr) {
		rc = rc_bsr_mul(t->m.bsr, x, y, t->nc, t->m.threads);
		if (rc)
			rc = rc_fail(err, rc, "", "the tensor engine's forward product failed (code %d)", rc);
	} else {
		rc = rc_csr_mul(t->m.csr, x, y, t->nc, t->m.threads, err);
	}
	rc_bk_count(&t->base, RC_TASK_FORWARD, 0, t->nv, rc_now_s() - t0);
	return rc;
}

static int mul_back(tbk *t, const float *y, float *x, rc_err *err)
{
	double t0 = rc_now_s();
	int rc;
	if (t->m.cpu) {
		rc = rc_bsr_cpu_mul(t->m.cpu, 1, y, x, t->nc, t->m.threads);
		if (rc)
			rc = rc_fail(err, rc, "", "the tensor engine's back product failed (code %d)", rc);
	} else if (t->m.bsr) {
		rc = rc_bsr_mul_t(t->m.bsr, y, x, t->nc, t->m.threads);
		if (rc)
			rc = rc_fail(err, rc, "", "the tensor engine's back product failed (code %d)", rc);
	} else {
		rc = rc_csr_mul(t->m.csr_t, y, x, t->nc, t->m.threads, err);
	}
	rc_bk_count(&t->base, RC_TASK_BACK, 0, t->nv, rc_now_s() - t0);
	return rc;
}

/* The CPU's fp32 CSR in natural order (rows view * nu + u): a view subset
 * is a row range of A and a column range of A^T, so its product costs the
 * subset's share (rc_csr_mul_range), not a whole one. */
static int csr_natural(const tbk *t)
{
	return !t->m.gpu && !t->m.bsr && t->m.csr && !t->m.rperm && !t->m.cperm;
}

static int csr_range(tbk *t, int back, const float *in, float *out, int first, int last, rc_err *err)
{
	double t0 = rc_now_s();
	int64_t r0 = (int64_t)first * t->nu, r1 = (int64_t)last * t->nu;
	int rc = back ? rc_csr_mul_range(t->m.csr_t, in, out, t->nc, t->m.threads, 0, t->cols, (int32_t)r0,
					 (int32_t)r1, err)
		      : rc_csr_mul_range(t->m.csr, in, out, t->nc, t->m.threads, r0, r1, 0, (int32_t)t->cols, err);
	rc_bk_count(&t->base, back ? RC_TASK_BACK : RC_TASK_FORWARD, first, last, rc_now_s() - t0);
	return rc;
}

static int forward(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj, int first, int last,
		   rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)kind;
	if (!views_of(t, &first, &last))
		return 0;
	int all = first == 0 && last == t->nv;
	if (!all && csr_natural(t))
		return csr_range(t, 0, vol->p, proj->p, first, last, err);
	int rc = all ? 0 : scratch(t, err);
	if (rc)
		return rc;
	float *out = all ? proj->p : t->scratch->p;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t)) {
		rc = rc_tgpu_forward(t->m.gpu, (rc_tgpu_kind)t->m.gpu_kind, vol->p, out, t->msg, sizeof t->msg);
		if (!rc && !all)
			rc = rc_tgpu_vcopy_views(t->m.gpu, proj->p, out, first, last, 0, t->msg, sizeof t->msg);
		return gpu_rc(t, rc, err);
	}
#endif
	/* the whole product, then the subset's rows: a full product per subset */
	if ((rc = mul_fwd(t, vol->p, out, err)))
		return rc;
	if (!all) {
		struct copy_ud c = { proj->p, out };
		for_runs(t, first, last, run_copy, &c);
	}
	return 0;
}

/* FBP's back projection from A^T (an iterative job's FDK start without a
 * second matrix).  Per pixel and view, FBP weighs the filtered value at
 * the pixel's u by 1/w^2 (a flat fan; proj_plane.c, rc_plane_fbp_weight),
 * A^T by the DD row weights' sum, about pixel area / (bin width at depth
 * w), so the two differ by a factor linear in the depth, which opposite
 * views of a circular scan cancel to first order.  The scale per pixel is
 * the ratio of the two sums over the views (FBP's over the views whose
 * detector the pixel's centre falls on, A^T's its row sum of A^T): exact
 * for a constant filtered stack, within (r / D)^2 otherwise. */
struct vscale_ud {
	tbk *t;
	float *vscale;  /* cols_pad, by matrix row */
	double *scratch; /* 3 nx per worker: a row's x, y and sums */
};

/* Row r's sum of A^T (a pixel's weights over every ray). */
static double at_row_sum(const tbk *t, int64_t r)
{
	double sum = 0;
	if (t->m.cpu) {
		const rc_spm16 *a = &t->m.cpu->at;
		for (int64_t i = a->ptr[r]; i < a->ptr[r + 1]; i++)
			sum += rc_f16_to_f32(a->val[i]);
	} else {
		const rc_csr *a = t->m.csr_t;
		for (int64_t i = a->row_ptr[r]; i < a->row_ptr[r + 1]; i++)
			sum += a->val[i];
	}
	return sum;
}

/* FBP's weight sum of a row of pixels, sw[ix].  A flat fan's and a
 * parallel stack's weights are rc_plane_fbp_weight's (rc_geom_plane_u's u
 * and depth, 1/w^2 or 1) inlined, views outermost so the pixels' loop
 * vectorises, each pixel's sum still in view order: the same doubles, a
 * fifth of the time (the calls were about an eighth of a default CGLS job
 * at 256^2 x 360).  A curved fan calls it as before. */
static void vscale_sums(const tbk *t, int64_t iy, double *X0, double *X1, double *sw)
{
	const rc_volume_desc *v = rc_geom_volume(t->m.g);
	const rc_geom *g = t->m.g;
	int fan = rc_geom_type_of(g) == RC_GEOM_FAN;
	int curved = fan && rc_geom_detector(g)->shape == RC_DETECTOR_CURVED;
	const double umin = -0.5, umax = t->nu - 0.5;
	for (int ix = 0; ix < v->nx; ix++) {
		double X[3];
		rc_volume_voxel_pos(v, ix, (int)iy, 0, X);
		X0[ix] = X[0];
		X1[ix] = X[1];
		sw[ix] = 0;
	}
	for (int k = 0; k < t->nv; k++) {
		if (curved) {
			for (int ix = 0; ix < v->nx; ix++) {
				double uu, w = rc_plane_fbp_weight(g, k, X0[ix], X1[ix], &uu);
				if (uu >= umin && uu <= umax)
					sw[ix] += w;
			}
			continue;
		}
		const double *A = rc_geom_view(g, k)->A;
		for (int ix = 0; ix < v->nx; ix++) {
			double ww = A[3] * X0[ix] + A[4] * X1[ix] + A[5];
			double uu = (A[0] * X0[ix] + A[1] * X1[ix] + A[2]) / ww;
			double w = fan ? 1.0 / (ww * ww) : 1.0;
			sw[ix] += uu >= umin && uu <= umax ? w : 0.0;
		}
	}
}

static int vscale_row(int64_t iy, int worker, void *ud)
{
	struct vscale_ud *u = ud;
	tbk *t = u->t;
	const rc_volume_desc *v = rc_geom_volume(t->m.g);
	double *X0 = u->scratch + 3 * (size_t)v->nx * (size_t)worker, *X1 = X0 + v->nx, *sw = X1 + v->nx;
	vscale_sums(t, iy, X0, X1, sw);
	for (int ix = 0; ix < v->nx; ix++) {
		int64_t p = iy * v->nx + ix;
		int64_t r = t->m.cperm ? (int64_t)t->m.cperm[p] : p;
		double rowsum = at_row_sum(t, r);
		u->vscale[r] = rowsum > 0 ? (float)(sw[ix] / rowsum) : 0.0f;
	}
	return 0;
}

/* t->vscale; rows in parallel. */
static int vscale_make(tbk *t, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(t->m.g);
	int nt = rc_par_threads(t->m.threads, v->ny);
	struct vscale_ud u = { t, calloc((size_t)t->m.cols_pad, sizeof(float)),
			       malloc(3 * (size_t)v->nx * (size_t)nt * sizeof(double)) };
	if (!u.vscale || !u.scratch) {
		free(u.vscale);
		free(u.scratch);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the FDK start's weights");
	}
	rc_par_for(v->ny, 1, t->m.threads, vscale_row, &u); /* its rows do not fail */
	free(u.scratch);
	t->vscale = u.vscale;
	return 0;
}

static int back(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		rc_err *err)
{
	tbk *t = (tbk *)b;
	if (kind == RC_BP_VOXEL && t->m.fbp_start && !on_gpu(t)) {
		/* FBP's back projection (the FDK start): A^T, scaled per pixel */
		int rc = back(b, RC_BP_MATCHED, proj, vol, first, last, err);
		if (!rc && !t->vscale)
			rc = vscale_make(t, err);
		if (rc)
			return rc;
		for (int64_t r = 0; r < t->m.cols_pad; r++)
			for (int s = 0; s < t->nz; s++)
				vol->p[r * t->nc + s] *= t->vscale[r];
		return 0;
	}
	/* the DD pair is matched: otherwise voxel and matched are both A^T */
	if (!views_of(t, &first, &last)) {
		/* no view: the empty sum */
#ifdef RC_HAVE_CUDA
		if (on_gpu(t))
			return gpu_rc(t, rc_tgpu_vfill(t->m.gpu, vol->p, vol->rows, 0.0f, t->nz, -1, 0, t->msg, sizeof t->msg),
				      err);
#endif
		memset(vol->p, 0, vec_len(t, vol) * sizeof(float));
		return 0;
	}
	int all = first == 0 && last == t->nv;
	if (!all && csr_natural(t))
		return csr_range(t, 1, proj->p, vol->p, first, last, err);
	int rc = all ? 0 : scratch(t, err);
	if (rc)
		return rc;
	const float *in = all ? proj->p : t->scratch->p;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t)) {
		if (!all)
			rc = rc_tgpu_vcopy_views(t->m.gpu, t->scratch->p, proj->p, first, last, 1, t->msg, sizeof t->msg);
		if (!rc)
			rc = rc_tgpu_back(t->m.gpu, (rc_tgpu_kind)t->m.gpu_kind, in, vol->p, t->msg, sizeof t->msg);
		return gpu_rc(t, rc, err);
	}
#endif
	if (!all) {
		/* the input masked to the subset's rows, then the whole A^T */
		memset(t->scratch->p, 0, vec_len(t, t->scratch) * sizeof(float));
		struct copy_ud c = { t->scratch->p, proj->p };
		for_runs(t, first, last, run_copy, &c);
	}
	return mul_back(t, in, vol->p, err);
}

/* ---- element-wise ------------------------------------------------------- */

struct fill_ud {
	float *y;
	float v;
};

static void run_fill(const tbk *t, int64_t r0, int64_t r1, void *ud)
{
	struct fill_ud *f = ud;
	int nc = t->nc, nz = t->nz;
	if (nc == nz) {
		rc_vfill(f->y + (size_t)r0 * nc, f->v, (size_t)(r1 - r0) * nc);
		return;
	}
	for (int64_t r = r0; r < r1; r++)
		for (int c = 0; c < nc; c++)
			f->y[r * nc + c] = c < nz ? f->v : 0.0f;
}

static int fill(rc_backend *b, rc_vec *y, float v, int first, int last, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
	int vol = y->space == RC_SPACE_VOLUME;
	if (!vol && !views_of(t, &first, &last))
		return 0;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vfill(t->m.gpu, y->p, y->rows, v, t->nz, vol ? -1 : first, last, t->msg,
					       sizeof t->msg),
			      err);
#endif
	struct fill_ud f = { y->p, v };
	if (vol)
		run_fill(t, 0, y->rows, &f);
	else
		for_runs(t, first, last, run_fill, &f);
	return 0;
}

static int copy(rc_backend *b, rc_vec *y, const rc_vec *x, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vcopy(t->m.gpu, y->p, x->p, y->rows, t->msg, sizeof t->msg), err);
#endif
	memcpy(y->p, x->p, vec_len(t, y) * sizeof(float));
	return 0;
}

static int axpy(rc_backend *b, rc_vec *y, const float *a, const rc_vec *x, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vaxpy(t->m.gpu, y->p, a, x->p, y->rows, t->nz, t->msg, sizeof t->msg), err);
#endif
	int nc = t->nc, nz = t->nz;
	if (nc == 1) {
		rc_vaxpy(y->p, a[0], x->p, (size_t)y->rows);
		return 0;
	}
	for (int64_t r = 0; r < y->rows; r++) {
		float *yr = y->p + r * nc;
		const float *xr = x->p + r * nc;
		for (int c = 0; c < nz; c++)
			yr[c] = rc_ew_axpy(yr[c], a[c], xr[c]);
	}
	return 0;
}

static int xpay(rc_backend *b, rc_vec *y, const rc_vec *x, const float *a, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vxpay(t->m.gpu, y->p, x->p, a, y->rows, t->nz, t->msg, sizeof t->msg), err);
#endif
	int nc = t->nc, nz = t->nz;
	if (nc == 1) {
		rc_vxpay(y->p, x->p, a[0], (size_t)y->rows);
		return 0;
	}
	for (int64_t r = 0; r < y->rows; r++) {
		float *yr = y->p + r * nc;
		const float *xr = x->p + r * nc;
		for (int c = 0; c < nz; c++)
			yr[c] = rc_ew_xpay(xr[c], a[c], yr[c]);
	}
	return 0;
}

static int dot(rc_backend *b, const rc_vec *x, const rc_vec *y, double *ret, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vdot(t->m.gpu, x->p, y ? y->p : NULL, x->rows, t->nz, ret, t->msg, sizeof t->msg),
			      err);
#endif
	int nc = t->nc, nz = t->nz;
	if (nc == 1) {
		ret[0] = y ? rc_vdot(x->p, y->p, (size_t)x->rows) : rc_vsum(x->p, (size_t)x->rows);
		return 0;
	}
	for (int c = 0; c < nz; c++)
		ret[c] = 0.0;
	for (int64_t r = 0; r < x->rows; r++) {
		const float *xr = x->p + r * nc;
		if (y) {
			const float *yr = y->p + r * nc;
			for (int c = 0; c < nz; c++)
				ret[c] += (double)xr[c] * yr[c];
		} else {
			for (int c = 0; c < nz; c++)
				ret[c] += xr[c];
		}
	}
	return 0;
}

static int inv_guarded(rc_backend *b, rc_vec *y, double rel, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vinv_guarded(t->m.gpu, y->p, y->rows, rel, t->msg, sizeof t->msg), err);
#endif
	rc_vinv_guarded(y->p, vec_len(t, y), rel);
	return 0;
}

struct ratio_ud {
	float *y;
	const float *p;
	float eps;
	double sum2;
};

static void run_ratio(const tbk *t, int64_t r0, int64_t r1, void *ud)
{
	struct ratio_ud *r = ud;
	size_t o = (size_t)r0 * (size_t)t->nc;
	r->sum2 += rc_vratio(r->y + o, r->p + o, r->eps, (size_t)(r1 - r0) * (size_t)t->nc);
}

static int ratio(rc_backend *b, rc_vec *y, const rc_vec *p, float eps, int first, int last, double *sum2,
		 rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
	*sum2 = 0.0;
	if (!views_of(t, &first, &last))
		return 0;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vratio(t->m.gpu, y->p, p->p, first, last, eps, sum2, t->msg, sizeof t->msg),
			      err);
#endif
	struct ratio_ud r = { y->p, p->p, eps, 0.0 };
	for_runs(t, first, last, run_ratio, &r);
	*sum2 = r.sum2;
	return 0;
}

struct res_ud {
	float *e;
	const float *p, *w;
	double sum2;
};

static void run_residual(const tbk *t, int64_t r0, int64_t r1, void *ud)
{
	struct res_ud *r = ud;
	rc_seg s = { .start = (size_t)r0 * (size_t)t->nc, .len = (size_t)(r1 - r0) * (size_t)t->nc, .stride = 0, .n = 1 };
	r->sum2 += rc_vresidual(&s, r->e, r->p, r->w);
}

static int residual(rc_backend *b, rc_vec *e, const rc_vec *p, const rc_vec *w, int first, int last,
		    double *sum2, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
	*sum2 = 0.0;
	if (!views_of(t, &first, &last))
		return 0;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vresidual(t->m.gpu, e->p, p->p, w ? w->p : NULL, first, last, sum2, t->msg,
						   sizeof t->msg),
			      err);
#endif
	struct res_ud r = { e->p, p->p, w ? w->p : NULL, 0.0 };
	for_runs(t, first, last, run_residual, &r);
	*sum2 = r.sum2;
	return 0;
}

static int update(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, float lambda, int nonneg,
		  rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vupdate(t->m.gpu, v->p, u->p, c->p, v->rows, lambda, nonneg, t->msg, sizeof t->msg),
			      err);
#endif
	rc_vupdate(v->p, u->p, c->p, lambda, nonneg, vec_len(t, v));
	return 0;
}

static int mul(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_vmul(t->m.gpu, v->p, u->p, c->p, v->rows, t->msg, sizeof t->msg), err);
#endif
	rc_vmul2(v->p, u->p, c->p, vec_len(t, v));
	return 0;
}

static int finish(rc_backend *b, rc_err *err)
{
	tbk *t = (tbk *)b;
	(void)err;
#ifdef RC_HAVE_CUDA
	if (on_gpu(t))
		return gpu_rc(t, rc_tgpu_sync(t->m.gpu, t->msg, sizeof t->msg), err);
#endif
	(void)t;
	return 0;
}

static void tensor_free(rc_backend *b)
{
	tbk *t = (tbk *)b;
	if (t->scratch)
		vec_free(b, t->scratch);
	free(t->row_view);
	free(t->stage);
	free(t->vscale);
	free(t);
}

void rc_backend_tensor_time(rc_backend *b, double *ms_forward, double *ms_back)
{
	*ms_forward = *ms_back = 0;
#ifdef RC_HAVE_CUDA
	tbk *t = (tbk *)b;
	if (on_gpu(t))
		rc_tgpu_time(t->m.gpu, (rc_tgpu_kind)t->m.gpu_kind, 1, ms_forward, ms_back, t->msg, sizeof t->msg);
#else
	(void)b;
#endif
}

static const rc_backend_ops tensor_ops = {
	.vec_new = vec_new,
	.vec_free = vec_free,
	.upload = upload,
	.download = download,
	.forward = forward,
	.back = back,
	.fill = fill,
	.copy = copy,
	.axpy = axpy,
	.xpay = xpay,
	.dot = dot,
	.inv_guarded = inv_guarded,
	.ratio = ratio,
	.residual = residual,
	.update = update,
	.mul = mul,
	.finish = finish,
	.free = tensor_free,
};

int rc_backend_tensor_new(const rc_tensor_mat *m, rc_backend **ret, rc_err *err)
{
	if (!m || !m->g || !rc_geom_is_2d(m->g))
		return rc_fail(err, RC_EINVAL, "", "the tensor backend needs a fan or parallel geometry");
	const rc_volume_desc *v = rc_geom_volume(m->g);
	int gpu = 0;
#ifdef RC_HAVE_CUDA
	gpu = m->gpu != NULL;
#endif
	if (!gpu && !m->cpu && !m->bsr && (!m->csr || !m->csr_t))
		return rc_fail(err, RC_EINVAL, "", "the tensor backend needs a BSR matrix or a CSR matrix and its transpose");
	if (m->ncols < v->nz)
		return rc_fail(err, RC_EINVAL, "", "the tensor backend needs at least %d columns (got %d)", v->nz, m->ncols);
	tbk *t = calloc(1, sizeof *t);
	if (!t)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the tensor backend");
	t->m = *m;
	t->nv = rc_geom_nviews(m->g);
	t->nu = rc_geom_detector(m->g)->nu;
	t->nz = v->nz;
	t->nc = m->ncols;
	t->rows = (int64_t)t->nv * t->nu;
	t->cols = (int64_t)v->nx * v->ny;
	t->base.ops = &tensor_ops;
	t->base.geom = m->g;
	t->base.nbatch = v->nz;
	snprintf(t->base.name, sizeof t->base.name, "tensor");
	t->base.caps = RC_BK_MATRIX | (gpu ? RC_BK_RESIDENT : 0u) |
		       (m->fbp_start && !gpu && (m->cpu || m->csr_t) ? RC_BK_FDK : 0u);
	if (m->rows_pad < t->rows || m->cols_pad < t->cols) {
		free(t);
		return rc_fail(err, RC_EINVAL, "", "the tensor backend's padded sizes are smaller than the matrix");
	}
	t->row_view = malloc((size_t)m->rows_pad * sizeof *t->row_view);
	if (!t->row_view) {
		free(t);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the row views");
	}
	for (int64_t r = 0; r < m->rows_pad; r++)
		t->row_view[r] = -1;
	for (int64_t r = 0; r < t->rows; r++)
		t->row_view[m->rperm ? (int64_t)m->rperm[r] : r] = (int32_t)(r / t->nu);
#ifdef RC_HAVE_CUDA
	if (gpu) {
		int rc = rc_tgpu_set_row_views(m->gpu, t->row_view, t->msg, sizeof t->msg);
		if (rc) {
			rc = gpu_rc(t, rc, err);
			tensor_free(&t->base);
			return rc;
		}
	}
#endif
	*ret = &t->base;
	return 0;
}
