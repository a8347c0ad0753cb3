/*
 * algo_util: what the iterative algorithms share (internal to core/).
 *
 *  - run bookkeeping: the clock, the cancel flag, the progress call;
 *  - parameter checks with messages that name the field;
 *  - element-wise steps over volumes and over view ranges of the projection
 *    stack.  A view range [first, last) of a cone stack is one contiguous
 *    block; of a fan/parallel stack ([slice][view][u]) it is one block per
 *    slice, so every projection-domain step walks rc_seg blocks.
 *
 * The element-wise loops are plain restrict-qualified loops that GCC
 * vectorises at -O3; sums are taken in float lanes over short blocks and
 * added in double, so they vectorise without -ffast-math and stay accurate
 * for the 1e7-element stacks of paper 000's case.  They run on the calling
 * thread: at 128^3 from 210 views one pass over the stack costs ~10 ms,
 * against ~1 s for a projection (docs/algorithms.md), so threading them is
 * not worth the pool.
 */
#ifndef RC_ALGO_UTIL_H
#define RC_ALGO_UTIL_H

#include <stddef.h>

#include "algo.h"

/* ---- run bookkeeping ---------------------------------------------------- */

double rc_algo_now(void);
int rc_algo_cancelled(const rc_algo_hooks *h);
void rc_algo_report(const rc_algo_hooks *h, int iteration, int of,
		    double residual, double t0);

/* Checks proj, vol, iterations >= 1; with lambda != NULL also 0 < lambda < 2;
 * with subsets != NULL also 1 <= subsets <= nviews. */
int rc_algo_check(const rc_algo_params *p, rc_exec *x, const float *proj,
		  const float *vol, int check_lambda, int check_subsets, rc_err *err);

/* ---- ordered subsets ----------------------------------------------------- */

/* Subset b of S over n views: views [first, last), contiguous, sizes
 * differing by at most one. */
void rc_subset_range(int b, int S, int n, int *first, int *last);

/* Bit-reversed order of 0..S-1 (indices >= S of the enclosing power of two
 * skipped): 0, S/2, S/4, 3S/4, ... so that consecutive subsets are far
 * apart.  Shared by the host SART and the resident CUDA and OpenCL runs. */
void rc_subset_order(int S, int *order);

/* ---- view ranges of the projection stack -------------------------------- */

/* Views [first, last) occupy n blocks of len elements starting at
 * start + i * stride, i < n. */
typedef struct rc_seg {
	size_t start, len, stride;
	int n;
} rc_seg;

rc_seg rc_seg_views(const rc_geom *g, int first, int last);

/* ---- element-wise steps -------------------------------------------------- */

void rc_vfill(float *a, float v, size_t n);
double rc_vsum(const float *a, size_t n);
double rc_vdot(const float *a, const float *b, size_t n);
/* y += a * x */
void rc_vaxpy(float *restrict y, float a, const float *restrict x, size_t n);
/* y = x + a * y */
void rc_vxpay(float *restrict y, const float *restrict x, float a, size_t n);
/* a[i] = a[i] > eps ? 1 / a[i] : 0 with eps = rel * max(a): the inverse of a
 * row or column sum, zero where the sum is (nearly) zero so that rays that
 * miss the volume and voxels no ray sees get no update. */
void rc_vinv_guarded(float *a, size_t n, double rel);
/* v += lambda * u * c, then max(v, 0) when nonneg. */
void rc_vupdate(float *restrict v, const float *restrict u, const float *restrict c,
		float lambda, int nonneg, size_t n);
/* v *= u * c */
void rc_vmul2(float *restrict v, const float *restrict u, const float *restrict c, size_t n);

/* Over views [first, last) given as s: e = (p - e) * w; returns the sum of
 * (p - e)^2 before the weighting (w may be NULL: weight 1). */
double rc_vresidual(const rc_seg *s, float *restrict e, const float *restrict p,
		    const float *restrict w);

/* ---- the normalised update shared by SART and SIRT (algo_sart.c) -------- */

/* x += lambda * B(R (p - A x)) * C, per subset of views; R = 1 / A 1 and
 * C = 1 / B 1 restricted to the subset; A = RC_FP_RAYCAST, B = bp. */
int rc_sart_core(const rc_algo_params *p, rc_exec *x, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_bp_kind bp, int subsets, rc_err *err);

#endif
