/*
 * algo_util: what the algorithms share (internal to core/): the run's
 * bookkeeping (clock, cancel flag, progress and iterate calls), parameter
 * checks with messages that name the field, and the ordered subsets.
 */
#ifndef RC_ALGO_UTIL_H
#define RC_ALGO_UTIL_H

#include <stddef.h>

#include "algo/algo.h"
#include "util/rc_clock.h"

/* Row sums below this fraction of the largest are rays that only graze the
 * volume grid (or miss it); dividing by them would amplify the residual of
 * a ray that carries almost no information about any voxel.  Column sums
 * that small belong to voxels almost no ray sees (SART, SIRT, MLEM). */
#define RC_ROWSUM_REL_EPS 1e-3
#define RC_COLSUM_REL_EPS 1e-6
/* OS-EM's per-subset column sums are kept in memory up to this size (unless
 * rc_algo_params.subset_cache_bytes says otherwise); beyond it each is
 * recomputed before its block.  SART keeps one slot unless
 * subset_cache_bytes is set (rc_sart_cache_all), written from the closed
 * form or recomputed (colsum.h). */
#define RC_SUBSET_CACHE_BYTES ((size_t)256 << 20)
/* CGLS with TV: iterations between restarts of the direction d as s (the
 * lagged weights change the operator each iteration: algo_cgls.c; the
 * out-of-core run, plan/ooc_iter.c, restarts alike). */
#define RC_CGLS_RESTART 5

/* ---- run bookkeeping ---------------------------------------------------- */

double rc_algo_now(void);
int rc_algo_cancelled(const rc_algo_hooks *h);
/* The progress call (stopped: the stop rule's reason, or NULL), then the
 * iterate call (its return value, or 0). */
int rc_algo_report(const rc_algo_hooks *h, rc_backend *b, const rc_vec *x, int iteration, int of,
		   double residual, double t0, const char *stopped);

/* ---- checkpoints (algo.h's rc_algo_state; algo_state.c) ------------------ */

/* 0 when r fits p's run on b (the method, the vectors' spaces, the
 * scalars' count, an iteration before the last), else RC_EINVAL. */
int rc_algo_resume_check(const rc_algo_params *p, const rc_backend *b, const rc_algo_state *r, rc_err *err);
/* hooks->checkpoint with s after queued work finished; 0 without one. */
int rc_algo_checkpoint(const rc_algo_hooks *h, rc_backend *b, rc_algo_state *s, rc_err *err);

/* ---- stopping rule -------------------------------------------------------- */

/* Thresholds on ||p - A x|| (0: that rule is off). */
typedef struct rc_stop {
	double tolerance;   /* stop_tolerance * ||p|| */
	double discrepancy; /* tau * noise */
	double stagnation;  /* stop_stagnation (a fraction of the last residual) */
	double last;        /* the last residual checked (0: none yet) */
} rc_stop;

/* From p's stop_* fields and the measured stack (host memory): ||p||, and
 * the noise given as noise_sigma or estimated (noise.h; an estimate that
 * fails for want of memory leaves the discrepancy rule off). */
void rc_stop_init(const rc_algo_params *p, const rc_geom *g, const float *proj, rc_stop *s);
/* "discrepancy", "tolerance", "stagnation" (the residual fell by less than
 * stagnation times the last one) or NULL (go on) for an iterate's
 * residual; remembers it for the next call. */
const char *rc_stop_check(rc_stop *s, double residual);

/* ---- total variation -------------------------------------------------------- */

/* The TV term of the penalised problem every iterative method solves when
 * algorithm.tv.weight = kappa > 0 (docs/algorithms.md):
 *
 *   SART, SIRT:  fixed point of  C B R (p - A x) = kappa * s * grad TV(x)
 *   MLEM:        EM steps alternating with that TV descent (the clamp at 0
 *                always follows)
 *   CGLS:        min 1/2 ||A x - p||^2 + kappa * s * a * TV(x)
 *
 * s = sum p / sum A 1 is the data's mean density along the rays (so the
 * term scales with the data: kappa is dimensionless, the fraction of the
 * mean density by which TV moves a voxel at an edge per unit of data
 * step) and a the mean of A^T A 1 (which puts CGLS's penalty on the scale
 * of its data term: A^T A is about a times SART's C B R A).  Per batch. */
typedef struct rc_tv {
	int on;
	double *scale; /* s per batch */
	float *step;   /* -kappa * s / steps per batch: one phase of the
	                  descent of SART, SIRT and MLEM (a phase per block) */
	int steps;     /* steps per phase: ceil(tv.steps / S) */
	float eps;     /* TV smoothing: RC_TV_EPS_REL * the largest s */
	float *host;   /* rc_bk_tv_apply's host copies, for a backend without
	                  its own tv_apply (NULL otherwise) */
} rc_tv;

/* From the measured stack and A 1 (a projection vector holding it);
 * nothing when p->tv_weight is 0. */
int rc_tv_new(const rc_algo_params *p, rc_backend *b, const rc_vec *meas, const rc_vec *a1, int S, rc_tv *t,
	      rc_err *err);
void rc_tv_free(rc_tv *t);
/* A TV phase of SART, SIRT and MLEM, run after each of the S blocks:
 * t->steps = ceil(tv.steps / S) steps x -= kappa s / t->steps *
 * grad TV(x) (g is scratch), then the clamp at 0 when nonneg. */
int rc_tv_descend(rc_backend *b, const rc_tv *t, rc_vec *x, rc_vec *g, int nonneg, rc_err *err);

/* Checks proj, vol, iterations >= 1, the TV and stop fields; with
 * check_lambda also 0 < lambda < 2; with check_subsets also
 * 0 <= subsets <= nviews (0: the default). */
int rc_algo_check(const rc_algo_params *p, rc_backend *b, const float *proj,
		  const float *vol, int check_lambda, int check_subsets, rc_err *err);

/* The matched pair the iterative algorithms run (algorithm.projector):
 * raycast: ray casting and its transpose; auto: the backend's (rc_bk_fp,
 * the splat pair where offered, else the footprint pair where offered);
 * splat, footprint: that pair, which rc_algo_check refuses on a backend
 * that does not offer it. */
static inline rc_fp_kind rc_algo_fp(const rc_algo_params *p, const rc_backend *b)
{
	return p->projector == RC_PROJECTOR_RAYCAST	? RC_FP_RAYCAST
	       : p->projector == RC_PROJECTOR_FOOTPRINT ? RC_FP_FOOTPRINT
							: rc_bk_fp(b);
}
static inline rc_bp_kind rc_algo_bp_matched(const rc_algo_params *p, const rc_backend *b)
{
	return p->projector == RC_PROJECTOR_RAYCAST	? RC_BP_MATCHED
	       : p->projector == RC_PROJECTOR_FOOTPRINT ? RC_BP_FOOTPRINT
							: rc_bk_bp_matched(b);
}

/* ---- ordered subsets ----------------------------------------------------- */

/* Subset b of S over n views: views [first, last), contiguous, sizes
 * differing by at most one. */
void rc_subset_range(int b, int S, int n, int *first, int *last);

/* Bit-reversed order of 0..S-1 (indices >= S of the enclosing power of two
 * skipped): 0, S/2, S/4, 3S/4, ... so that consecutive subsets are far
 * apart. */
void rc_subset_order(int S, int *order);

/* SART / OS-EM keep every subset's column sums when this holds: one subset,
 * or room within subset_cache_bytes (default: none for SART, whose one
 * slot takes a block's sums from their closed form or from a back
 * projection of 1/S of an iteration's cost; RC_SUBSET_CACHE_BYTES for
 * MLEM). */
int rc_sart_cache_all(const rc_algo_params *p, int S, size_t nvox);

/* ---- the algorithms (algo.h's rc_algo_run_on dispatches) ----------------- */

int rc_fdk_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
	       const rc_algo_hooks *hooks, rc_err *err);

/* FDK's filtering alone (weights, ramp, dbeta and K_k, as rc_fdk_run
 * filters) of views [k0, k1) of g, a cone or matrices geometry without a
 * displaced detector (RC_EUNSUPPORTED: those views are filtered on a
 * widened detector): proj and filt hold those views only, in the stack's
 * layout, view k0 first.  Back-projecting the whole filtered stack with
 * RC_BP_VOXEL is rc_fdk_run's result (core/plan/ooc.c filters once into a
 * scratch file, then back-projects slabs from it). */
int rc_fdk_filter_views(const rc_algo_params *p, const rc_geom *g, const float *proj, float *filt, int k0, int k1,
			const atomic_int *cancel, rc_err *err);
int rc_sart_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		const rc_algo_hooks *hooks, rc_err *err);
int rc_sirt_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		const rc_algo_hooks *hooks, rc_err *err);
int rc_cgls_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		const rc_algo_hooks *hooks, rc_err *err);
int rc_mlem_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		const rc_algo_hooks *hooks, rc_err *err);
/* SART (bp = RC_BP_VOXEL, S = subsets) and SIRT (rc_algo_bp_matched, S = 1):
 * x += lambda * B(R (p - A x)) * C per subset of views, R = 1 / A 1 and
 * C = 1 / B 1 restricted to the subset.  em: MLEM's OS-EM instead (bp =
 * rc_algo_bp_matched), x *= C * B(p / A x) per subset from a positive start. */
int rc_sart_core(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_bp_kind bp, int S, int em, rc_err *err);

#endif
