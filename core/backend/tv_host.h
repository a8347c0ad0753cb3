/*
 * tv_host: the total-variation operator on a host volume, the host's
 * implementation of the backend's tv_apply call (backend.h) and the
 * fallback every other backend runs on downloaded copies.
 *
 * TV is isotropic with forward differences D (zero across the far border)
 * and smoothed by eps so that it is differentiable where the image is flat:
 *
 *   TV(x) = sum_i sqrt(|D x|_i^2 + eps^2),   grad TV(x) = D^T W(x) D x,
 *   W(x)_i = 1 / sqrt(|D x|_i^2 + eps^2)
 *
 * in 3-D for a cone volume and in 2-D per slice (no difference along z)
 * for a fan or parallel stack, whose slices are independent problems.
 * rc_tv_apply computes D^T W(w) D d for any two volumes: with w = d it is
 * the gradient; with W frozen at w it is the linear operator that the
 * lagged-diffusivity iteration (CGLS with TV) solves with.
 */
#ifndef RC_TV_HOST_H
#define RC_TV_HOST_H

#include <stddef.h>

#include "util/rc_error.h"

typedef struct rc_tv_shape {
	int nx, ny, nz;
	int planar; /* 2-D TV per slice z */
} rc_tv_shape;

/* out = D^T W(w) D d over [z][y][x] volumes (out distinct from both).
 * Threads: 0 = all cores.  0, or RC_ENOMEM without room for two slices of
 * weights per thread. */
int rc_tv_apply(const rc_tv_shape *s, const float *w, const float *d, float *out, float eps, int threads,
		rc_err *err);

/* The same in the caller's scratch of rc_tv_scratch_floats(s, threads)
 * floats (two slices of weights per thread; its nx and ny only count), for
 * a caller that applies it many times (the out-of-core run's slabs). */
size_t rc_tv_scratch_floats(const rc_tv_shape *s, int threads);
void rc_tv_apply_in(const rc_tv_shape *s, const float *w, const float *d, float *out, float eps, int threads,
		    float *scratch);

/* TV(x) in double, for tests. */
double rc_tv_value(const rc_tv_shape *s, const float *x, double eps);

#endif
