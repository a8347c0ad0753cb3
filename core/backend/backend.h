/*
 * backend: what an algorithm sees of the hardware.  Every engine implements
 * it once (the host backend over rc_exec's engines and split, the resident
 * OpenCL and CUDA backends, the tensor backend); every algorithm (algo.h) is
 * written once against it, so a new engine gets every algorithm and a new
 * algorithm runs on every engine.  The shape is PETSc's Vec/Mat: a table of
 * function pointers per implementation behind an opaque handle, vectors
 * owned by the backend.
 *
 * Vectors.  A backend owns its vectors (rc_vec, opaque): volume-sized or
 * projection-sized, in whatever layout and memory the device wants.  Data
 * crosses to the host only through upload and download, which take the
 * host layouts of engine.h (projections [view][v][u], fan/parallel
 * [slice][view][u]; volumes [z][y][x]).  Between calls everything stays
 * where it is: a call is large (a whole subset of views, a whole volume) so
 * that a GPU backend launches kernels and reads back only the scalars an
 * algorithm branches on.
 *
 * View ranges.  forward and back take views [first, last) (a subset of
 * ordered subsets); the element-wise calls that take first/last restrict a
 * projection vector to those views and ignore them for a volume vector.
 * last < 0 means every view (RC_VIEWS_ALL).
 *
 * Batches.  A backend's vectors may hold nbatch independent problems that
 * share one operator: the slices of a fan or parallel stack (each slice is
 * its own least-squares problem; paper 001 runs 32 of them at once).  dot
 * returns one sum per batch and axpy / xpay take one coefficient per batch,
 * so CGLS keeps its step lengths per slice; the other element-wise calls
 * act on every element alike.  Cone and matrices geometries have one batch.
 *
 * Numbers.  The element-wise calls are those of the iterative algorithms
 * (algo.h) with their guards; sums are accumulated in double.  A backend
 * may run them in any order across elements but must keep each element's
 * float operations as written here, so that backends agree to rounding.
 *
 * Errors.  Every call returns 0 or a negative rc_code with err filled.
 * After a failure the vectors are still valid (free them as usual); their
 * contents are unspecified.
 */
#ifndef RC_BACKEND_H
#define RC_BACKEND_H

#include <stddef.h>

#include "backend/exec.h"
#include "backend/tv_host.h"

typedef struct rc_backend rc_backend;
typedef struct rc_vec rc_vec;

typedef enum rc_space { RC_SPACE_VOLUME = 0, RC_SPACE_PROJ = 1 } rc_space;

#define RC_VIEWS_ALL 0, -1

typedef struct rc_backend_ops {
	/* A new vector of the space; its contents are undefined. */
	int (*vec_new)(rc_backend *b, rc_space s, rc_vec **ret, rc_err *err);
	/* Optional (NULL: not offered): a vector over caller memory in the host
	 * layout, for backends whose vectors are host memory, so a large stack
	 * is not copied.  The memory must outlive the vector; a vector borrowed
	 * from const memory is only read (the algorithms never write their
	 * measured projections). */
	int (*vec_borrow)(rc_backend *b, rc_space s, float *host, rc_vec **ret, rc_err *err);
	void (*vec_free)(rc_backend *b, rc_vec *v);
	/* The whole vector from / to the host layout. */
	int (*upload)(rc_backend *b, rc_vec *dst, const float *src, rc_err *err);
	int (*download)(rc_backend *b, const rc_vec *src, float *dst, rc_err *err);
	/* Optional (NULL: upload the whole vector): views first..last of a
	 * projection vector from the same views of src, a whole stack in the
	 * host layout; cone and matrices geometries only (their views are
	 * contiguous).  A streaming FDK sends each group's views alone. */
	int (*upload_views)(rc_backend *b, rc_vec *dst, const float *src, int first, int last, rc_err *err);
	/* Optional (NULL: download the whole vector): views first..last of a
	 * projection vector into the same views of dst, a whole stack in the
	 * host layout; cone and matrices geometries only.  The split backend
	 * takes back a device's share of a forward projection so. */
	int (*download_views)(rc_backend *b, const rc_vec *src, float *dst, int first, int last, rc_err *err);

	/* proj[views first..last) = A_kind vol; other views of proj untouched. */
	int (*forward)(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj, int first,
		       int last, rc_err *err);
	/* vol = sum over views first..last of B_kind proj (overwritten). */
	int (*back)(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first,
		    int last, rc_err *err);
	/* Optional (NULL: rc_bk_back_add goes through a vector of its own):
	 * vol += sum over views first..last of B_kind proj, in place: a
	 * streaming FDK adds each group of views so, without a scratch volume. */
	int (*back_add)(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first,
			int last, rc_err *err);

	/* y = v (views first..last of a projection vector) */
	int (*fill)(rc_backend *b, rc_vec *y, float v, int first, int last, rc_err *err);
	/* y = x */
	int (*copy)(rc_backend *b, rc_vec *y, const rc_vec *x, rc_err *err);
	/* y += a[batch] * x */
	int (*axpy)(rc_backend *b, rc_vec *y, const float *a, const rc_vec *x, rc_err *err);
	/* y = x + a[batch] * y */
	int (*xpay)(rc_backend *b, rc_vec *y, const rc_vec *x, const float *a, rc_err *err);
	/* ret[batch] = sum x * y (double accumulator); y == NULL: sum x */
	int (*dot)(rc_backend *b, const rc_vec *x, const rc_vec *y, double *ret, rc_err *err);
	/* Guarded inverse: y = y > rel * max(y) && y > 0 ? 1 / y : 0 (max over
	 * the whole vector): the inverse of a row or column sum, zero where the
	 * sum is (nearly) zero. */
	int (*inv_guarded)(rc_backend *b, rc_vec *y, double rel, rc_err *err);
	/* Guarded ratio over views first..last: y = y > eps ? max(p, 0) / y : 0,
	 * *sum2 = sum (p - y)^2 taken before (MLEM's p / A x with its
	 * residual, per ordered subset). */
	int (*ratio)(rc_backend *b, rc_vec *y, const rc_vec *p, float eps, int first, int last, double *sum2,
		     rc_err *err);
	/* Weighted residual over views first..last: e = (p - e) * w (w NULL:
	 * weight 1), *sum2 = sum (p - e)^2 before the weighting. */
	int (*residual)(rc_backend *b, rc_vec *e, const rc_vec *p, const rc_vec *w, int first, int last,
			double *sum2, rc_err *err);
	/* v += lambda * u * c, then v = max(v, 0) when nonneg. */
	int (*update)(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, float lambda, int nonneg,
		      rc_err *err);
	/* v *= u * c */
	int (*mul)(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, rc_err *err);
	/* Optional (NULL: rc_bk_tv_apply runs tv_host.h on host copies):
	 * out = D^T W(w) D d, the total-variation operator of tv_host.h (3-D
	 * for a cone volume, 2-D per slice for a fan/parallel stack); w = d
	 * gives grad TV(d).  Volume vectors; out is distinct from w and d. */
	int (*tv_apply)(rc_backend *b, const rc_vec *w, const rc_vec *d, rc_vec *out, float eps, rc_err *err);

	/* Waits for queued work (progress reports after it are true); NULL: every
	 * call is synchronous. */
	int (*finish)(rc_backend *b, rc_err *err);
	void (*free)(rc_backend *b);
} rc_backend_ops;

/* What a backend's projections cost so far, per task (RC_TASK_FORWARD,
 * RC_TASK_BACK: exec.h): for job reports and the refit of the performance
 * models.  Backends that queue work wait for a projection before they stop
 * its clock. */
typedef struct rc_backend_stats {
	double seconds[RC_TASK_COUNT];
	long calls[RC_TASK_COUNT];
	long views[RC_TASK_COUNT];
} rc_backend_stats;

/* What a backend can do, as flags in rc_backend.caps: callers above the
 * backends ask these, never a backend's name. */
enum rc_backend_caps {
	/* Vectors are host memory in the host layouts: vec_borrow is offered,
	 * so the measured stack and the result are not copied. */
	RC_BK_HOST = 1u << 0,
	/* Vectors live in a device's memory between calls (the OpenCL and
	 * CUDA backends, the tensor backend on a GPU): upload and download
	 * cross a bus. */
	RC_BK_RESIDENT = 1u << 1,
	/* back(RC_BP_VOXEL) is FDK's voxel-driven back projection (paper 002
	 * Eq. 1), so FDK's volume can start an iterative run here
	 * (rc_algo_start).  Not on a matrix backend built for another
	 * operator. */
	RC_BK_FDK = 1u << 2,
	/* Projections are products with one stored system matrix (the tensor
	 * backend): every rc_fp_kind and rc_bp_kind is that matrix or its
	 * transpose. */
	RC_BK_MATRIX = 1u << 3,
	/* Projects RC_FP_SPLAT / RC_BP_SPLAT (rc_bk_fp). */
	RC_BK_SPLAT = 1u << 4,
	/* Fans each projection out over several devices (the trigeneous
	 * split: split.h, or an executor of several engines). */
	RC_BK_SPLIT = 1u << 5,
	/* Projects RC_FP_FOOTPRINT / RC_BP_FOOTPRINT (algorithm.projector
	 * "footprint"). */
	RC_BK_FOOTPRINT = 1u << 6,
	/* And projector auto takes them where no splat pair (rc_bk_fp). */
	RC_BK_FOOTPRINT_AUTO = 1u << 7,
};

/* Fields every backend fills; implementations embed this struct first. */
struct rc_backend {
	const rc_backend_ops *ops;
	const rc_geom *geom; /* borrowed */
	int nbatch;          /* independent problems per vector, >= 1 */
	char name[32];       /* for reports only: "cpu", "opencl", "cuda", "tensor", "trigeneous" */
	unsigned caps;       /* enum rc_backend_caps */
	rc_backend_stats stats;
	/* Set by whoever opened what the backend runs on (engines, an
	 * executor, a system matrix: plan/open.c), so that one
	 * rc_backend_free releases it all: called with owner after ops->free.
	 * NULL: the caller frees those itself. */
	void (*release)(void *owner);
	void *owner;
};
/* The forward projector of every iterative algorithm and its exact adjoint
 * on b: the splat pair where b offers it (the CPU engine on a geometry whose
 * voxels project at most a pixel apart: proj_splat.c), else ray casting and
 * its transpose; between them the footprint pair where b offers it to
 * auto (the CPU engine on a flat cone or matrices geometry, or a curved
 * cone whose voxels project more than a pixel apart: proj_footprint.c).
 * SART
 * back-projects with RC_BP_VOXEL either way. */
static inline rc_fp_kind rc_bk_fp(const rc_backend *b)
{
	return b->caps & RC_BK_SPLAT ? RC_FP_SPLAT : b->caps & RC_BK_FOOTPRINT_AUTO ? RC_FP_FOOTPRINT : RC_FP_RAYCAST;
}
static inline rc_bp_kind rc_bk_bp_matched(const rc_backend *b)
{
	return b->caps & RC_BK_SPLAT ? RC_BP_SPLAT : b->caps & RC_BK_FOOTPRINT_AUTO ? RC_BP_FOOTPRINT : RC_BP_MATCHED;
}

/* Normalises a view range as backend.h reads it: last < 0 or past the end
 * is every view to the end, first < 0 is 0, an inverted range is empty
 * (first == last).  Backends call it before they project or restrict. */
void rc_bk_views(const rc_backend *b, int *first, int *last);

/* The elements views [first, last) of a vector of space and n elements
 * cover in the host layout (geometry.h), as count runs of n floats from
 * off, stride apart: one run for a volume, a cone or matrices stack or a
 * whole 2-D stack, one per slice for a range of a 2-D stack.  For backends
 * that copy or fill view ranges run by run. */
typedef struct rc_bk_runs {
	size_t off, n, stride;
	int count;
} rc_bk_runs;
rc_bk_runs rc_bk_view_runs(const rc_backend *b, rc_space space, size_t n, int first, int last);

/* Adds one projection of views [first, last) that took seconds to b->stats. */
void rc_bk_count(rc_backend *b, rc_task task, int first, int last, double seconds);

/* ---- calls (checked wrappers, so algorithms read as formulas) ------------ */

static inline int rc_bk_vec_new(rc_backend *b, rc_space s, rc_vec **ret, rc_err *err)
{
	return b->ops->vec_new(b, s, ret, err);
}

/* A vector holding host data: borrowed where the backend can, else a new
 * vector uploaded from host. */
int rc_bk_vec_from(rc_backend *b, rc_space s, const float *host, rc_vec **ret, rc_err *err);
/* Views first..last of proj from host (a whole stack): upload_views where
 * the backend offers it and the views are contiguous, else the whole
 * vector (the other views then take host's too: the same for a caller whose
 * host stack holds every view it uploaded before, as FDK's does). */
int rc_bk_upload_views(rc_backend *b, rc_vec *proj, const float *host, int first, int last, rc_err *err);
/* A vector for a result that ends up in host: borrowed where the backend
 * can (rc_bk_download to host is then free), else new. */
int rc_bk_vec_for(rc_backend *b, rc_space s, float *host, rc_vec **ret, rc_err *err);
/* rc_bk_vec_for whose vector starts with host's contents (an iterate
 * started from a given volume). */
int rc_bk_vec_holding(rc_backend *b, rc_space s, float *host, rc_vec **ret, rc_err *err);

static inline void rc_bk_vec_free(rc_backend *b, rc_vec *v)
{
	if (v)
		b->ops->vec_free(b, v);
}

static inline int rc_bk_upload(rc_backend *b, rc_vec *dst, const float *src, rc_err *err)
{
	return b->ops->upload(b, dst, src, err);
}

static inline int rc_bk_download(rc_backend *b, const rc_vec *src, float *dst, rc_err *err)
{
	return b->ops->download(b, src, dst, err);
}

static inline int rc_bk_forward(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj,
				int first, int last, rc_err *err)
{
	return b->ops->forward(b, kind, vol, proj, first, last, err);
}

static inline int rc_bk_back(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol,
			     int first, int last, rc_err *err)
{
	return b->ops->back(b, kind, proj, vol, first, last, err);
}

/* vol += B_kind proj over views first..last: the backend's back_add, or
 * back into a vector of this call added with axpy where it has none. */
int rc_bk_back_add(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		   rc_err *err);

static inline int rc_bk_fill(rc_backend *b, rc_vec *y, float v, int first, int last, rc_err *err)
{
	return b->ops->fill(b, y, v, first, last, err);
}

static inline int rc_bk_copy(rc_backend *b, rc_vec *y, const rc_vec *x, rc_err *err)
{
	return b->ops->copy(b, y, x, err);
}

static inline int rc_bk_axpy(rc_backend *b, rc_vec *y, const float *a, const rc_vec *x, rc_err *err)
{
	return b->ops->axpy(b, y, a, x, err);
}

static inline int rc_bk_xpay(rc_backend *b, rc_vec *y, const rc_vec *x, const float *a, rc_err *err)
{
	return b->ops->xpay(b, y, x, a, err);
}

static inline int rc_bk_dot(rc_backend *b, const rc_vec *x, const rc_vec *y, double *ret, rc_err *err)
{
	return b->ops->dot(b, x, y, ret, err);
}

static inline int rc_bk_inv_guarded(rc_backend *b, rc_vec *y, double rel, rc_err *err)
{
	return b->ops->inv_guarded(b, y, rel, err);
}

static inline int rc_bk_ratio(rc_backend *b, rc_vec *y, const rc_vec *p, float eps, int first, int last,
			      double *sum2, rc_err *err)
{
	return b->ops->ratio(b, y, p, eps, first, last, sum2, err);
}

static inline int rc_bk_residual(rc_backend *b, rc_vec *e, const rc_vec *p, const rc_vec *w, int first,
				 int last, double *sum2, rc_err *err)
{
	return b->ops->residual(b, e, p, w, first, last, sum2, err);
}

static inline int rc_bk_update(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, float lambda,
			       int nonneg, rc_err *err)
{
	return b->ops->update(b, v, u, c, lambda, nonneg, err);
}

static inline int rc_bk_mul(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, rc_err *err)
{
	return b->ops->mul(b, v, u, c, err);
}

/* The backend's tv_apply, or tv_host.h's on host copies: in host (three
 * volumes of rc_volume_count floats, kept by the caller across calls) or,
 * when host is NULL, in buffers of this call. */
int rc_bk_tv_apply(rc_backend *b, const rc_vec *w, const rc_vec *d, rc_vec *out, float eps, float *host,
		   rc_err *err);
/* TV's smoothing eps relative to the data's mean density (algo_util.h):
 * differences below about this are smoothed quadratically, which keeps
 * the lagged-diffusivity operator of CGLS well conditioned (1e-3 needed
 * 2.5x the iterations for the same error; docs/algorithms.md). */
#define RC_TV_EPS_REL 2e-1
/* The shape tv_host.h sees for b's volume. */
rc_tv_shape rc_bk_tv_shape(const rc_backend *b);
static inline int rc_bk_finish(rc_backend *b, rc_err *err)
{
	return b->ops->finish ? b->ops->finish(b, err) : 0;
}

/* Frees b, then what its opener attached (rc_backend.release). */
static inline void rc_backend_free(rc_backend *b)
{
	if (!b)
		return;
	void (*release)(void *) = b->release;
	void *owner = b->owner;
	b->ops->free(b);
	if (release)
		release(owner);
}

/* Sum of a per-batch result of dot. */
double rc_bk_total(const rc_backend *b, const double *per_batch);

/* ---- the host backend --------------------------------------------------- */

/* Vectors in host memory (borrowable), element-wise steps on the calling
 * thread, projections through x: one engine or the planner's split over
 * several (exec.h, which also keeps each engine's times).  Borrows x; name
 * is the single engine's name, "trigeneous" for a split.  One batch: an
 * engine's 2-D projector need not keep the slices apart. */
int rc_backend_host_new(rc_exec *x, rc_backend **ret, rc_err *err);

#endif
