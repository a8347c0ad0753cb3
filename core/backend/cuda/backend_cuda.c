/*
 * backend_cuda: the backend (backend.h) whose vectors live in one GPU's
 * memory, and the resident run of resident.h (rc_cuda_run_algo) that
 * runs the shared algorithms (algo_*.c) on it.
 *
 * Vectors are cudaMalloc'd float arrays in the host layouts (volume
 * [z][y][x], projections [view][v][u]); they cross to the host only in
 * upload and download.  forward and back are the CUDA engine's projector
 * calls (engine_cuda_impl.h) on device pointers with the whole volume in
 * one slab: forward copies the volume vector into the context's 3-D
 * texture and ray-casts the views into the projection vector; RC_BP_VOXEL
 * streams the views from the projection vector through the layered
 * textures, RC_BP_MATCHED scatters from it.  The element-wise calls are
 * kernels (elementwise.cu) that do vec_host.c's float operations per
 * element; the scalars an algorithm branches on (dot products, residual
 * and ratio sums) are read back, everything else stays on the device.
 * All work is queued in order on the context's kernel stream (ks); a call
 * that returns a scalar, download and finish wait for it, and so does every
 * projection, so that b->stats (backend.h) holds its own time.
 *
 * Interpolation: the backend does not know the algorithm, so its caller
 * chooses through rc_cuda_options, with the engine's meaning of AUTO:
 *   fp_interp  RC_FP_RAYCAST: HW only when HW is asked for; AUTO and EXACT
 *              are EXACT (RC_BP_MATCHED is then its exact transpose)
 *   bp_interp  RC_BP_VOXEL and RC_FP_ROTATE: EXACT only when asked for;
 *              AUTO and HW are HW
 * rc_cuda_run_algo (resident.c) resolves AUTO per algorithm: the
 * forward projection of SART is HW (its voxel back projector is no
 * transpose anyway), SIRT, CGLS and MLEM always get EXACT (the matched pair
 * must be transposes of each other).
 *
 * Fan and parallel stacks: the CUDA engine's 2-D kernels (plane.cu:
 * Joseph's forward projection, its exact transpose, FBP's back projection)
 * on the vectors themselves, with the views' tables on the device; no
 * textures, no slabs, one batch as on the host backend over the same
 * engine.  A view range of a 2-D stack ([slice][view][u]) is one run per
 * slice: the element-wise calls on a range run once per slice.
 *
 * Memory: rc_backend_cuda_new plans the projector context (volume texture,
 * two batches of layered textures) after setting aside the bytes of the
 * vectors the caller will allocate, and refuses with RC_ETOOBIG, before
 * allocating anything, when the volume would not fit in one slab.  A vector
 * that cannot be allocated later is also RC_ETOOBIG: every algorithm
 * allocates its vectors before its first iteration (algo.h), so the caller
 * can still run the job elsewhere.
 */
#include "backend/cuda/engine_cuda.h"

#include <stdint.h>

#ifdef RC_HAVE_CUDA
#include "backend/cuda/cuda_splat.h"
#include "backend/cuda/engine_cuda_impl.h"
#include "projectors/proj_cpu.h"
#include "backend/splat_dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rc_vec {
	float *d;
	size_t n;
	rc_space space;
};

/* Projections timed between two waits; more fold the times early. */
#define PENDING_MAX 64

typedef struct cuda_bk {
	rc_backend base;
	cu_ctx c;
	int exact_fp; /* RC_FP_RAYCAST with point fetches and fp32 weights */
	int exact_bp; /* RC_BP_VOXEL and RC_FP_ROTATE likewise */
	cu_splat *sp; /* the splat pair where the geometry suits it (RC_BK_SPLAT) */
	size_t nvox, nproj, view;
	int nviews;
	/* a fan or parallel stack: plane.cu's kernels, the views' matrices
	 * and rays on the device */
	int plane;
	float *ppv, *prays;
	rc_cuda_plane pg;
	void *scratch;  /* device: the double of a sum, then the max's bits */
	double *dsum;
	unsigned *dmax;
	/* projections timed by a pair of events on the kernel stream each, read
	 * at the next point where the run waits anyway (sync_ks) */
	cudaEvent_t ev[PENDING_MAX][2];
	int nev;        /* pairs created */
	struct pending {
		rc_task task;
		int first, last;
	} pend[PENDING_MAX];
	int npend;      /* pairs recorded, not yet read */
} cuda_bk;

#define BK(b) ((cuda_bk *)(b))

/* Every call first makes the backend's device current: a hook between two
 * calls may have used another device on this thread (cheap when it is
 * current already). */
#define BIND(k)                                                  \
	do {                                                     \
		int brc_ = cu_ctx_bind(&(k)->c, err);            \
		if (brc_)                                        \
			return brc_;                             \
	} while (0)

/* ---- vectors ---------------------------------------------------------- */

static int vec_new(rc_backend *b, rc_space s, rc_vec **ret, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	size_t n = s == RC_SPACE_VOLUME ? k->nvox : k->nproj;
	rc_vec *v = calloc(1, sizeof *v);
	if (!v)
		return rc_fail(err, RC_ENOMEM, "", "out of host memory for a vector handle");
	cudaError_t ce = cudaMalloc((void **)&v->d, n * sizeof(float));
	if (ce != cudaSuccess) {
		free(v);
		cu_release(ce);
		return rc_fail(err, ce == cudaErrorMemoryAllocation ? RC_ETOOBIG : RC_EDEVICE, "volume",
			       "CUDA: no device memory for a %s vector (%.1f MiB): %s; run the job through the "
			       "CUDA engine, which works in slabs",
			       s == RC_SPACE_VOLUME ? "volume" : "projection", (double)n * sizeof(float) / 1048576.0,
			       cudaGetErrorName(ce));
	}
	v->n = n;
	v->space = s;
	*ret = v;
	return 0;
}

static void vec_free(rc_backend *b, rc_vec *v)
{
	cu_release(cudaSetDevice(BK(b)->c.ordinal));
	cu_release(cudaFree(v->d));
	free(v);
}

/* The pending projections' times into b->stats (their events are done:
 * the kernel stream was drained, or the last one is waited for here). */
static int fold_times(cuda_bk *k, rc_err *err)
{
	int rc = 0;
	for (int i = 0; i < k->npend; i++) {
		float ms = 0.0f;
		CU_CHECK(cudaEventSynchronize(k->ev[i][1]), "cudaEventSynchronize(projection)");
		CU_CHECK(cudaEventElapsedTime(&ms, k->ev[i][0], k->ev[i][1]), "cudaEventElapsedTime(projection)");
		rc_bk_count(&k->base, k->pend[i].task, k->pend[i].first, k->pend[i].last, 1e-3 * ms);
	}
out:
	k->npend = 0;
	return rc;
}

/* The kernel stream drained; ctx names the call for the error.  Every wait
 * of the backend goes through here, so the projection times are read here. */
static int sync_ks(cuda_bk *k, const char *ctx, rc_err *err)
{
	cudaError_t ce = cudaStreamSynchronize(k->c.ks);
	if (ce != cudaSuccess)
		return cu_fail(err, ce, ctx);
	return fold_times(k, err);
}

/* The copies go on ks (a non-blocking stream: cudaMemcpy on the legacy
 * stream would not wait for the kernels queued there) and are waited for,
 * since the host memory is the caller's again when the call returns. */
static int upload(rc_backend *b, rc_vec *dst, const float *src, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	CU_CHECK(cudaMemcpyAsync(dst->d, src, dst->n * sizeof(float), cudaMemcpyHostToDevice, k->c.ks),
		 "cudaMemcpyAsync(vector upload)");
	rc = sync_ks(k, "cudaStreamSynchronize(vector upload)", err);
out:
	return rc;
}

static int upload_views(rc_backend *b, rc_vec *dst, const float *src, int first, int last, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	rc_bk_runs r = rc_bk_view_runs(&k->base, dst->space, dst->n, first, last);
	for (int j = 0; j < r.count; j++) {
		size_t off = r.off + (size_t)j * r.stride;
		CU_CHECK(cudaMemcpyAsync(dst->d + off, src + off, r.n * sizeof(float), cudaMemcpyHostToDevice, k->c.ks),
			 "cudaMemcpyAsync(views upload)");
	}
	rc = sync_ks(k, "cudaStreamSynchronize(views upload)", err);
out:
	return rc;
}

static int download(rc_backend *b, const rc_vec *src, float *dst, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	CU_CHECK(cudaMemcpyAsync(dst, src->d, src->n * sizeof(float), cudaMemcpyDeviceToHost, k->c.ks),
		 "cudaMemcpyAsync(vector download)");
	rc = sync_ks(k, "cudaStreamSynchronize(vector download)", err);
out:
	return rc;
}

/* ---- projections -------------------------------------------------------- */

#define LAUNCH_CHECK(call, what) CU_CHECK((cudaError_t)(call), what)

/* A projection's time (b->stats, backend.h) without waiting for it: an
 * event before and one after it on the kernel stream, read by sync_ks. */
static int timer_start(cuda_bk *k, rc_err *err)
{
	int rc = 0;
	if (k->npend == PENDING_MAX && (rc = sync_ks(k, "cudaStreamSynchronize(projection times)", err)))
		return rc;
	if (k->npend == k->nev) {
		CU_CHECK(cudaEventCreate(&k->ev[k->nev][0]), "cudaEventCreate(projection time)");
		if (cudaEventCreate(&k->ev[k->nev][1]) != cudaSuccess) {
			cu_release(cudaEventDestroy(k->ev[k->nev][0]));
			return rc_fail(err, RC_EDEVICE, "", "cudaEventCreate(projection time) failed");
		}
		k->nev++;
	}
	CU_CHECK(cudaEventRecord(k->ev[k->npend][0], k->c.ks), "cudaEventRecord(projection start)");
out:
	return rc;
}

static int timer_stop(cuda_bk *k, rc_task task, int first, int last, rc_err *err)
{
	int rc = 0;
	CU_CHECK(cudaEventRecord(k->ev[k->npend][1], k->c.ks), "cudaEventRecord(projection end)");
	k->pend[k->npend++] = (struct pending){ .task = task, .first = first, .last = last };
out:
	return rc;
}

static int forward(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj, int first, int last,
		   rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	cu_ctx *c = &k->c;
	int rc;
	if (kind != RC_FP_RAYCAST && kind != RC_FP_ROTATE && kind != RC_FP_SPLAT)
		return rc_fail(err, RC_EINVAL, "", "unknown forward projector %d", (int)kind);
	rc_bk_views(&k->base, &first, &last);
	if (first == last)
		return 0;
	if (k->plane) {
		if (kind != RC_FP_RAYCAST)
			return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
				       "the CUDA engine forward-projects fan and parallel stacks by ray casting (Joseph)");
		if ((rc = timer_start(k, err)))
			return rc;
		cudaError_t ce = (cudaError_t)rc_cuda_launch_fp_plane(vol->d, k->prays, proj->d, &k->pg, first, last,
								      c->ks);
		if (ce != cudaSuccess)
			return cu_fail(err, ce, "launch of fp_plane");
		return timer_stop(k, RC_TASK_FORWARD, first, last, err);
	}
	if (kind == RC_FP_SPLAT) {
		if ((rc = timer_start(k, err)) || (rc = cu_splat_fp(k->sp, vol->d, proj->d, first, last, c->ks, err)))
			return rc;
		return timer_stop(k, RC_TASK_FORWARD, first, last, err);
	}
	if (kind == RC_FP_ROTATE && !c->drot && (rc = cu_ctx_add_rot(c, err)))
		return rc;
	if ((rc = timer_start(k, err)) || (rc = cu_upload_slab(c, vol->d, 0, c->nz, err)))
		return rc;
	float *out = proj->d + (size_t)first * k->view;
	if (kind == RC_FP_ROTATE)
		rc = cu_fp_rotate(c, out, first, last, k->exact_bp, err);
	else
		rc = cu_fp_ray(c, 0, c->nz, out, first, last, 0, k->exact_fp, err);
	return rc ? rc : timer_stop(k, RC_TASK_FORWARD, first, last, err);
}

static int back(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	cu_ctx *c = &k->c;
	int rc = 0;
	if (kind != RC_BP_VOXEL && kind != RC_BP_MATCHED && kind != RC_BP_SPLAT)
		return rc_fail(err, RC_EINVAL, "", "unknown back projector %d", (int)kind);
	rc_bk_views(&k->base, &first, &last);
	if ((rc = timer_start(k, err)))
		return rc;
	if (k->plane && kind == RC_BP_SPLAT) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			     "the CUDA engine back-projects fan and parallel stacks by FBP's or Joseph's transpose");
	} else if (k->plane) {
		/* RC_CUDA_MAX_BATCH views per launch, as the engine */
		if (first == last && !c->bp_add)
			CU_CHECK(cudaMemsetAsync(vol->d, 0, vol->n * sizeof(float), c->ks), "cudaMemsetAsync(volume)");
		for (int v0 = first; v0 < last; v0 += RC_CUDA_MAX_BATCH) {
			int v1 = v0 + RC_CUDA_MAX_BATCH < last ? v0 + RC_CUDA_MAX_BATCH : last;
			LAUNCH_CHECK(rc_cuda_launch_bp_plane(proj->d, k->ppv, k->prays, vol->d, &k->pg, v0, v1,
							     c->bp_add || v0 > first,
							     kind == RC_BP_MATCHED, c->ks),
				     kind == RC_BP_MATCHED ? "launch of bp_plane_t" : "launch of bp_plane");
		}
	} else if (kind == RC_BP_SPLAT) {
		rc = cu_splat_bp(k->sp, proj->d, vol->d, first, last, c->bp_add, c->ks, err);
	} else if (kind == RC_BP_VOXEL) {
		rc = cu_bp_voxel(c, proj->d, vol->d, 0, c->nz, first, last, k->exact_bp, err);
	} else {
		if (!c->bp_add)
			CU_CHECK(cudaMemsetAsync(vol->d, 0, vol->n * sizeof(float), c->ks), "cudaMemsetAsync(volume)");
		if (first < last)
			rc = cu_bp_matched(c, proj->d + (size_t)first * k->view, vol->d, 0, c->nz, first, last, err);
	}
	if (!rc)
		rc = timer_stop(k, RC_TASK_BACK, first, last, err);
out:
	return rc;
}

/* vol += the back projection: both projectors add to what dvol holds */
static int back_add(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		    rc_err *err)
{
	cuda_bk *k = BK(b);
	k->c.bp_add = 1;
	int rc = back(b, kind, proj, vol, first, last, err);
	k->c.bp_add = 0;
	return rc;
}

/* ---- element-wise ------------------------------------------------------- */

#define LAUNCHED(call, what) CU_CHECK((cudaError_t)(call), "launch of " what)

/* *ret = the device sum, read back; zeroed again before the next use. */
static int read_sum(cuda_bk *k, double *ret, rc_err *err)
{
	int rc = 0;
	double h = 0.0;
	CU_CHECK(cudaMemcpyAsync(&h, k->dsum, sizeof h, cudaMemcpyDeviceToHost, k->c.ks),
		 "cudaMemcpyAsync(sum -> host)");
	if ((rc = sync_ks(k, "cudaStreamSynchronize(sum)", err)))
		goto out;
	*ret = h;
out:
	return rc;
}

static int zero_sum(cuda_bk *k, rc_err *err)
{
	int rc = 0;
	CU_CHECK(cudaMemsetAsync(k->dsum, 0, sizeof(double), k->c.ks), "cudaMemsetAsync(sum)");
out:
	return rc;
}

static int fill(rc_backend *b, rc_vec *y, float v, int first, int last, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	rc_bk_runs r = rc_bk_view_runs(&k->base, y->space, y->n, first, last);
	for (int j = 0; j < r.count && r.n; j++)
		LAUNCHED(rc_cuda_fill(y->d + r.off + (size_t)j * r.stride, v, r.n, k->c.ks), "fill");
out:
	return rc;
}

static int copy(rc_backend *b, rc_vec *y, const rc_vec *x, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	CU_CHECK(cudaMemcpyAsync(y->d, x->d, y->n * sizeof(float), cudaMemcpyDeviceToDevice, k->c.ks),
		 "cudaMemcpyAsync(vector copy)");
out:
	return rc;
}

/* nbatch is 1 (cone and matrices geometries): a[0] is the coefficient */
static int axpy(rc_backend *b, rc_vec *y, const float *a, const rc_vec *x, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	LAUNCHED(rc_cuda_axpy(y->d, a[0], x->d, y->n, k->c.ks), "axpy");
out:
	return rc;
}

static int xpay(rc_backend *b, rc_vec *y, const rc_vec *x, const float *a, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	LAUNCHED(rc_cuda_xpay(y->d, x->d, a[0], y->n, k->c.ks), "xpay");
out:
	return rc;
}

static int dot(rc_backend *b, const rc_vec *x, const rc_vec *y, double *ret, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = zero_sum(k, err);
	if (rc)
		return rc;
	LAUNCHED(rc_cuda_dot(x->d, y ? y->d : NULL, x->n, k->dsum, k->c.ks), "dot");
	rc = read_sum(k, &ret[0], err);
out:
	return rc;
}

/* On the device: the maximum into dmax, then the guarded inverse reading
 * it; nothing crosses to the host. */
static int inv_guarded(rc_backend *b, rc_vec *y, double rel, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	CU_CHECK(cudaMemsetAsync(k->dmax, 0, sizeof(unsigned), k->c.ks), "cudaMemsetAsync(max)");
	LAUNCHED(rc_cuda_max(y->d, y->n, k->dmax, k->c.ks), "max");
	LAUNCHED(rc_cuda_inv_guarded(y->d, y->n, rel, k->dmax, k->c.ks), "guarded inverse");
out:
	return rc;
}

static int ratio(rc_backend *b, rc_vec *y, const rc_vec *p, float eps, int first, int last, double *sum2,
		 rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	rc_bk_runs r = rc_bk_view_runs(&k->base, y->space, y->n, first, last);
	if (!r.n) {
		*sum2 = 0.0;
		return 0;
	}
	/* the runs of a 2-D range add into one device sum */
	int rc = zero_sum(k, err);
	if (rc)
		return rc;
	for (int j = 0; j < r.count; j++) {
		size_t o = r.off + (size_t)j * r.stride;
		LAUNCHED(rc_cuda_ratio(y->d + o, p->d + o, eps, r.n, NULL, k->dsum, k->c.ks), "ratio");
	}
	rc = read_sum(k, sum2, err);
out:
	return rc;
}

static int residual(rc_backend *b, rc_vec *e, const rc_vec *p, const rc_vec *w, int first, int last,
		    double *sum2, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	rc_bk_runs r = rc_bk_view_runs(&k->base, e->space, e->n, first, last);
	if (!r.n) {
		*sum2 = 0.0;
		return 0;
	}
	int rc = zero_sum(k, err);
	if (rc)
		return rc;
	for (int j = 0; j < r.count; j++) {
		size_t o = r.off + (size_t)j * r.stride;
		LAUNCHED(rc_cuda_residual(p->d + o, e->d + o, w ? w->d + o : NULL, r.n, NULL, k->dsum, k->c.ks),
			 "residual");
	}
	rc = read_sum(k, sum2, err);
out:
	return rc;
}

static int update(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, float lambda, int nonneg,
		  rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	LAUNCHED(rc_cuda_update(v->d, u->d, c->d, lambda, nonneg, v->n, k->c.ks), "update");
out:
	return rc;
}

static int mul(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	LAUNCHED(rc_cuda_mul(v->d, u->d, c->d, v->n, k->c.ks), "mul");
out:
	return rc;
}

/* tv_host.h's operator on the device (kernels/cuda/tv.cu) */
static int tv_apply(rc_backend *b, const rc_vec *w, const rc_vec *d, rc_vec *out, float eps, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	int rc = 0;
	rc_tv_shape s = rc_bk_tv_shape(b);
	LAUNCHED(rc_cuda_tv_apply(w->d, d->d, out->d, s.nx, s.ny, s.nz, s.planar, eps, k->c.ks), "tv_apply");
out:
	return rc;
}

static int finish(rc_backend *b, rc_err *err)
{
	cuda_bk *k = BK(b);
	BIND(k);
	return sync_ks(k, "cudaStreamSynchronize(finish)", err);
}

static void bk_free(rc_backend *b)
{
	cuda_bk *k = BK(b);
	if (!k)
		return;
	cu_release(cudaSetDevice(k->c.ordinal));
	for (int i = 0; i < k->nev; i++) {
		cu_release(cudaEventDestroy(k->ev[i][0]));
		cu_release(cudaEventDestroy(k->ev[i][1]));
	}
	cu_release(cudaFree(k->scratch));
	cu_release(cudaFree(k->ppv));
	cu_release(cudaFree(k->prays));
	cu_splat_free(k->sp);
	cu_ctx_release(&k->c);
	free(k);
}

static const rc_backend_ops cuda_ops = {
	.vec_new = vec_new,
	.vec_borrow = NULL, /* device memory cannot borrow the caller's */
	.vec_free = vec_free,
	.upload = upload,
	.upload_views = upload_views,
	.download = download,
	.forward = forward,
	.back = back,
	.back_add = back_add,
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
	.tv_apply = tv_apply,
	.finish = finish,
	.free = bk_free,
};

/* Device bytes of the projector context besides the vectors: the volume's
 * 3-D texture, two layered textures of RC_CUDA_MAX_BATCH views, the scalars. */
static uint64_t ctx_bytes(const rc_geom *g)
{
	return (uint64_t)rc_volume_count(rc_geom_volume(g)) * sizeof(float) +
	       2 * (uint64_t)RC_CUDA_MAX_BATCH * rc_geom_view_count(g) * sizeof(float) + 64;
}

/* The 2-D state of k (a fan or parallel stack on ordinal): the streams of
 * a context without textures (cu_ctx_init with nothing needed), the views'
 * matrices and rays (rc_plane_view, rc_plane_rays) on the device.  After
 * checking that they and the vectors (reserve) fit the free memory. */
static int plane_init(cuda_bk *k, const rc_geom *g, const rc_cuda_options *o, uint64_t reserve, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nk = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu;
	const size_t nv = (size_t)nk * RC_CUDA_PLANE_FLOATS, nr = (size_t)nk * nu * RC_CUDA_PLANE_RAY_FLOATS;
	uint64_t budget;
	int rc = cu_budget(o->ordinal, o, &budget, err);
	if (rc)
		return rc;
	if (reserve + (nv + nr) * sizeof(float) > budget)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the CUDA backend needs %.1f MiB for the stack's vectors and %.1f MiB are free; run "
			       "the job through the CUDA engine", (double)(reserve + (nv + nr) * sizeof(float)) / 1048576.0,
			       (double)budget / 1048576.0);
	cu_plan none;
	memset(&none, 0, sizeof none);
	if ((rc = cu_ctx_init(&k->c, g, o, 0, &none, err)))
		return rc;
	float *h = malloc((nv > nr ? nv : nr) * sizeof(float));
	if (!h)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d views' rays", nk);
	for (int i = 0; i < nk; i++)
		rc_plane_view(g, i, h + (size_t)i * RC_CUDA_PLANE_FLOATS);
	CU_CHECK(cudaMalloc((void **)&k->ppv, nv * sizeof(float)), "cudaMalloc(in-plane view matrices)");
	CU_CHECK(cudaMemcpy(k->ppv, h, nv * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy(in-plane view matrices)");
	rc_plane_rays(g, h);
	CU_CHECK(cudaMalloc((void **)&k->prays, nr * sizeof(float)), "cudaMalloc(rays)");
	CU_CHECK(cudaMemcpy(k->prays, h, nr * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy(rays)");
	k->pg = (rc_cuda_plane){ v->nx, v->ny, v->nz, nu, nk, rc_geom_type_of(g) == RC_GEOM_FAN, 0, 0.0f, 0.0f };
	k->pg.curved = rc_plane_arc(g, &k->pg.cu, &k->pg.sdu);
	k->plane = 1;
out:
	free(h);
	return rc; /* on failure the caller frees what is set (bk_free) */
}

int rc_backend_cuda_new(const rc_geom *g, const rc_cuda_options *o, uint64_t reserve, rc_backend **ret,
			rc_err *err)
{
	rc_cuda_options def;
	if (!o) {
		rc_cuda_options_default(&def);
		o = &def;
	}
	if (!g || !ret)
		return rc_fail(err, RC_EINVAL, "", "the CUDA backend needs a geometry");
	if (!rc_geom_is_2d(g) && !cu_geom_ok(g, err))
		return err ? err->code : RC_EUNSUPPORTED;
	if (o->ordinal < 0 || o->ordinal >= rc_engine_cuda_count())
		return rc_fail(err, RC_ENOTFOUND, "execution.engine", "no CUDA device %d on this machine",
			       o->ordinal);
	cuda_bk *k = NULL;
	int rc;
	if (rc_geom_is_2d(g)) {
		if (!(k = calloc(1, sizeof *k)))
			return rc_fail(err, RC_ENOMEM, "", "out of memory for the CUDA backend");
		if ((rc = plane_init(k, g, o, reserve, err))) {
			bk_free(&k->base);
			return rc;
		}
		goto scalars;
	}
	uint64_t budget;
	cu_plan plan;
	const int need = CU_NEED_VOLTEX | CU_NEED_BATCH;
	rc = cu_budget(o->ordinal, o, &budget, err);
	if (rc)
		return rc;
	/* planned before anything is allocated; the vectors' bytes set aside */
	if ((rc = cu_make_plan(g, o, need, budget, reserve, &plan, err)))
		return rc;
	if (plan.nslabs > 1)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the CUDA backend needs the whole volume on the GPU: %.1f MiB of vectors and "
			       "%.1f MiB of textures, %.1f MiB are free; run the job through the CUDA engine, "
			       "which works in slabs",
			       (double)reserve / 1048576.0, (double)ctx_bytes(g) / 1048576.0,
			       (double)budget / 1048576.0);
	if (!(k = calloc(1, sizeof *k)))
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the CUDA backend");
	if ((rc = cu_ctx_init(&k->c, g, o, need, &plan, err))) {
		free(k);
		return rc;
	}
scalars:;
	cudaError_t ce = cudaMalloc(&k->scratch, 16);
	if (ce != cudaSuccess) {
		rc = cu_fail(err, ce, "cudaMalloc(backend scalars)");
		bk_free(&k->base);
		return rc;
	}
	/* the matched pair of the iterative algorithms where voxels project at
	 * most a pixel apart, as on the CPU engine */
	if (rc_dev_splat_suits(g)) {
		/* its table and gain buffer are not in the memory plan: where they
		 * do not fit, the backend runs ray casting's pair instead */
		rc_err e1;
		if (cu_splat_new(g, &k->sp, &e1)) {
			k->sp = NULL;
			fprintf(stderr, "cuda: the splat pair is off (ray casting's pair runs): %s\n", e1.msg);
		}
	}
	k->dsum = (double *)k->scratch;
	k->dmax = (unsigned *)((char *)k->scratch + sizeof(double));
	k->base.ops = &cuda_ops;
	k->base.geom = g;
	k->base.nbatch = 1;
	snprintf(k->base.name, sizeof k->base.name, "cuda");
	k->base.caps = RC_BK_RESIDENT | RC_BK_FDK | (k->sp ? RC_BK_SPLAT : 0u);
	k->exact_fp = o->fp_interp != RC_CUDA_INTERP_HW;
	k->exact_bp = o->bp_interp == RC_CUDA_INTERP_EXACT;
	k->nvox = rc_volume_count(rc_geom_volume(g));
	k->nproj = rc_geom_proj_count(g);
	k->view = rc_geom_view_count(g);
	k->nviews = rc_geom_nviews(g);
	*ret = &k->base;
	return 0;
}

#else /* !RC_HAVE_CUDA: engine_cuda.c answers the rc_cuda_* calls */


int rc_backend_cuda_new(const rc_geom *g, const rc_cuda_options *o, uint64_t reserve, rc_backend **ret,
			rc_err *err)
{
	(void)g; (void)o; (void)reserve; (void)ret;
	return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
		       "this build of recond has no CUDA support (nvcc was not found at build time); "
		       "choose execution.engine \"cpu\" or \"opencl\", or rebuild with the CUDA toolkit");
}

#endif /* RC_HAVE_CUDA */
