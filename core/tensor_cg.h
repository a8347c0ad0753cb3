/*
 * tensor_cg: conjugate gradients on the normal equations (paper 001 Alg. 1)
 * for many slices at once, fp32 vectors, over any pair of products.
 *
 * Written in the CGLS arrangement: Alg. 1's p^T (A^T A p) is ||A p||^2 and
 * the sinogram residual s = b - A x is updated alongside, so every iteration
 * costs one A and one A^T product (as Alg. 1) and yields ||A x - b||.  Each
 * column (slice) is its own least-squares problem with its own alpha and
 * beta; an all-zero column (a padding slice) stays zero.
 *
 * Vectors are [index][ncols] (see bsr.h); x starts at 0.
 */
#ifndef RC_TENSOR_CG_H
#define RC_TENSOR_CG_H

#include <stdatomic.h>
#include <stdint.h>

#include "rc_error.h"

typedef struct rc_cg_ops {
	int64_t n, m; /* rows of x (image) and of b (sinogram) */
	int ncols;
	int (*fwd)(void *ud, const float *x, float *y);  /* y = A x */
	int (*back)(void *ud, const float *y, float *x); /* x = A^T y */
	void *ud;
} rc_cg_ops;

typedef struct rc_cg_iter {
	int iteration;      /* 1-based, just finished */
	int of;
	double residual;    /* ||b - A x||_F over all slices */
	double rel_residual;/* residual / ||b||_F */
	double rel_change;  /* ||x_k - x_{k-1}||_F / ||x_k||_F */
	double error;       /* ||x - x_ref||_F / ||x_ref||_F, -1 without x_ref */
} rc_cg_iter;

typedef struct rc_cg_opts {
	int iterations;
	const float *x_ref;          /* may be NULL */
	const atomic_int *cancel;    /* may be NULL */
	/* after every iteration; a non-zero return stops with that code */
	int (*iter)(void *ud, const rc_cg_iter *it);
	void *ud;
} rc_cg_opts;

/* x (n * ncols floats) = the CGLS iterate after opts->iterations steps.
 * RC_ECANCELLED when cancel was seen (x = last complete iterate). */
int rc_cgls(const rc_cg_ops *ops, const float *b, float *x, const rc_cg_opts *opts,
	    int *ret_done, rc_err *err);

#endif
