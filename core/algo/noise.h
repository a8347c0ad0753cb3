/*
 * noise: how much of a projection stack is noise, for the discrepancy
 * stopping rule (algo.h: an iterative run stops once ||p - A x|| falls to
 * the noise level; fitting further fits the noise).
 *
 * The estimate needs nothing but the data.  Along a detector row the
 * second difference p[i-1] - 2 p[i] + p[i+1] of white noise of variance
 * s^2 has variance 6 s^2, while that of the object's smooth line integrals
 * is small; the median of its square is 0.4549 (the median of chi^2 with
 * one degree of freedom) times 6 s^2 and is not moved by the few large
 * values at edges.  Post-log noise is not white across the stack (a ray
 * through more material counts fewer photons and is noisier), so the
 * estimate is taken per row and the rows' variances are summed.  The
 * object's own curvature adds a little (test_regularise: +11 % on rows of
 * a disc with a step), so the estimate errs high and a discrepancy stop
 * comes early rather than late.
 *
 * rc_noise_relative, for the default TV weight (algo.h's rc_tv_weight),
 * takes fourth differences (1 -4 6 -4 1, variance 70 s^2) instead: they
 * leave a smooth object's curvature out far better (on exact 2-D fan data
 * 0.00007 where second differences read 0.0016), which matters where no
 * noise is there to dominate it.
 */
#ifndef RC_NOISE_H
#define RC_NOISE_H

#include <stddef.h>

/* Estimated sum of the noise variances of the n values of p, read as rows
 * of nu contiguous values (a partial last row is skipped; rows shorter than
 * 8 values give no estimate and return 0).  Threads: 0 = all cores. */
double rc_noise_energy(const float *p, size_t n, int nu, int threads);

/* The noise's RMS relative to the data's, sqrt(noise energy / sum p^2):
 * from sigma (the per-value standard deviation) when > 0, else estimated
 * (rc_noise_energy).  0 for data of zeros, -1 when out of memory. */
double rc_noise_relative(const float *p, size_t n, int nu, double sigma, int threads);

/* Pieces of a stack (out of core, core/plan/ooc_iter.c): the noise energy
 * of orders 2 (rc_noise_energy's) or 4 (rc_noise_relative's) of the n
 * values of p added to *total, each block of RC_NOISE_ROWS_PER_ITEM rows
 * in turn; pieces of whole blocks (the last may be short), given in
 * order from *total 0, sum to the whole stack's estimate exactly.
 * 0, or -1 when out of memory. */
#define RC_NOISE_ROWS_PER_ITEM 64
int rc_noise_energy_add(const float *p, size_t n, int nu, int order, int threads, double *total);

#endif
