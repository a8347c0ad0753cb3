/*
 * vec_host: the element-wise loops of the iterative algorithms over host
 * float arrays; the host and tensor backends (backend.h) run their vector
 * calls with them.
 *
 * The per-element formulas are core/backend/elementwise_ops.h's, which the
 * OpenCL and CUDA kernels share, so every backend rounds alike.
 *
 * They are plain restrict-qualified loops that GCC vectorises at -O3; sums
 * are taken in float lanes over short blocks and added in double, so they
 * vectorise without -ffast-math and stay accurate for the 1e7-element
 * stacks of paper 000's case.  They run on the calling thread: at 128^3
 * from 210 views one pass over the stack costs ~10 ms, against ~1 s for a
 * projection (docs/algorithms.md), so threading them is not worth the pool.
 *
 * A view range [first, last) of a cone stack is one contiguous block; of a
 * fan/parallel stack ([slice][view][u]) it is one block per slice, so the
 * projection-domain steps walk rc_seg blocks.
 */
#ifndef RC_VEC_HOST_H
#define RC_VEC_HOST_H

#include <stddef.h>

#include "geometry/geometry.h"

/* Views [first, last) occupy n blocks of len elements starting at
 * start + i * stride, i < n. */
typedef struct rc_seg {
	size_t start, len, stride;
	int n;
} rc_seg;

rc_seg rc_seg_views(const rc_geom *g, int first, int last);

void rc_vfill(float *a, float v, size_t n);
double rc_vsum(const float *a, size_t n);
double rc_vdot(const float *a, const float *b, size_t n);
/* y += a * x */
void rc_vaxpy(float *restrict y, float a, const float *restrict x, size_t n);
/* y = x + a * y */
void rc_vxpay(float *restrict y, const float *restrict x, float a, size_t n);
/* a[i] = a[i] > eps && a[i] > 0 ? 1 / a[i] : 0 with eps = rel * max(a). */
void rc_vinv_guarded(float *a, size_t n, double rel);
/* v += lambda * u * c, then max(v, 0) when nonneg. */
void rc_vupdate(float *restrict v, const float *restrict u, const float *restrict c,
		float lambda, int nonneg, size_t n);
/* v *= u * c */
void rc_vmul2(float *restrict v, const float *restrict u, const float *restrict c, size_t n);
/* e = e > eps ? max(p, 0) / e : 0; returns sum (p - e)^2 taken before.
 * Scalar: the sum is added in double in element order, which GCC does not
 * vectorise without -ffast-math; one pass costs ~20 ms at paper 000's size. */
double rc_vratio(float *restrict e, const float *restrict p, float eps, size_t n);
/* Over views [first, last) given as s: e = (p - e) * w; returns the sum of
 * (p - e)^2 before the weighting (w may be NULL: weight 1). */
double rc_vresidual(const rc_seg *s, float *restrict e, const float *restrict p,
		    const float *restrict w);

#endif
