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
/* SART's per-subset column sums are kept in memory up to this size (unless
 * rc_algo_params.subset_cache_bytes says otherwise); beyond it each is
 * recomputed before its block. */
#define RC_SUBSET_CACHE_BYTES ((size_t)256 << 20)

/* ---- run bookkeeping ---------------------------------------------------- */

double rc_algo_now(void);
int rc_algo_cancelled(const rc_algo_hooks *h);
/* The progress call, then the iterate call (its return value, or 0). */
int rc_algo_report(const rc_algo_hooks *h, rc_backend *b, const rc_vec *x, int iteration, int of,
		   double residual, double t0);

/* Checks proj, vol, iterations >= 1; with check_lambda also
 * 0 < lambda < 2; with check_subsets also 1 <= subsets <= nviews. */
int rc_algo_check(const rc_algo_params *p, rc_backend *b, const float *proj,
		  const float *vol, int check_lambda, int check_subsets, rc_err *err);

/* ---- ordered subsets ----------------------------------------------------- */

/* Subset b of S over n views: views [first, last), contiguous, sizes
 * differing by at most one. */
void rc_subset_range(int b, int S, int n, int *first, int *last);

/* Bit-reversed order of 0..S-1 (indices >= S of the enclosing power of two
 * skipped): 0, S/2, S/4, 3S/4, ... so that consecutive subsets are far
 * apart. */
void rc_subset_order(int S, int *order);

/* SART keeps every subset's column sums when this holds. */
int rc_sart_cache_all(const rc_algo_params *p, int S, size_t nvox);

/* ---- the algorithms (algo.h's rc_algo_run_on dispatches) ----------------- */

int rc_fdk_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
	       const rc_algo_hooks *hooks, rc_err *err);
int rc_sart_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		const rc_algo_hooks *hooks, rc_err *err);
int rc_sirt_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		const rc_algo_hooks *hooks, rc_err *err);
int rc_cgls_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		const rc_algo_hooks *hooks, rc_err *err);
int rc_mlem_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		const rc_algo_hooks *hooks, rc_err *err);
/* SART (bp = RC_BP_VOXEL, S = subsets) and SIRT (RC_BP_MATCHED, S = 1):
 * x += lambda * B(R (p - A x)) * C per subset of views, R = 1 / A 1 and
 * C = 1 / B 1 restricted to the subset. */
int rc_sart_core(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_bp_kind bp, int S, rc_err *err);

#endif
