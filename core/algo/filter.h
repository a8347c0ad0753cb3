/*
 * filter: the ramp filter of filtered back projection, applied to detector
 * rows through FFTW (single precision).
 *
 * The kernel is the discrete ramp of Kak & Slaney (ch. 3, Eq. 61), sampled in
 * the spatial domain rather than |f| sampled in frequency (which has the
 * wrong DC term and a bias):
 *     h(0) = 1/4,  h(n odd) = -1/(pi^2 n^2),  h(n even, n != 0) = 0,
 * in units of the sample spacing: for samples of spacing T the filtered value
 * of Kak & Slaney, Q(nT) = T sum_k h_T(n - k) R(k) with h_T = h / T^2, is
 * rc_ramp_apply's output divided by T.  The caller multiplies by 1/T (FDK
 * folds it into one scale factor per view).
 *
 * Rows are zero-padded to N >= 2 nu (the next size FFTW does fast, 2^a 3^b
 * 5^c), so the circular convolution equals the linear one over every lag
 * |n| < nu that can occur: no wrap-around.  The kernel's spectrum is
 * multiplied by a window of the frequency x = f / (cutoff * f_Nyquist),
 * zero where x > 1:
 *     ram-lak      1
 *     shepp-logan  sin(pi x / 2) / (pi x / 2)
 *     hann         (1 + cos(pi x)) / 2
 *
 * Life cycle: rc_ramp_new plans the transforms once (FFTW's planner is not
 * thread-safe: filter.c serialises planning behind a mutex); each thread then
 * takes its own rc_ramp_work and calls rc_ramp_apply concurrently.
 */
#ifndef RC_FILTER_H
#define RC_FILTER_H

#include <stddef.h>

#include "algo/algo.h"
#include "util/rc_error.h"

typedef struct rc_ramp rc_ramp;
typedef struct rc_ramp_work rc_ramp_work;

/* A filter for rows of nu samples, applied `batch` rows at a time (e.g. the
 * nv rows of one view).  cutoff in (0, 1], fraction of Nyquist. */
int rc_ramp_new(int nu, int batch, rc_filter_window window, double cutoff,
		rc_ramp **ret, rc_err *err);
/* The same for an equiangular (curved) fan whose samples are arc radians
 * apart: the windowed kernel times (m arc / sin(m arc))^2 at lag m, Kak &
 * Slaney's g for equiangular rays; arc = 0 is rc_ramp_new.  nu * arc must
 * stay below pi. */
int rc_ramp_new_arc(int nu, int batch, rc_filter_window window, double cutoff, double arc,
		    rc_ramp **ret, rc_err *err);
void rc_ramp_free(rc_ramp *r);

/* The padded length N. */
int rc_ramp_length(const rc_ramp *r);
/* The windowed kernel spectrum at bin k in [0, N/2] (real: the kernel is
 * even), for tests. */
double rc_ramp_response(const rc_ramp *r, int k);

/* Per-thread scratch buffers. */
int rc_ramp_work_new(const rc_ramp *r, rc_ramp_work **ret, rc_err *err);
void rc_ramp_work_free(rc_ramp_work *w);

/* Filters nrows (<= batch) rows: input row b starts at in + b * in_stride,
 * output row b at out + b * out_stride, nu samples each (in == out with the
 * same stride filters in place).  Each input sample is first multiplied by
 * pre[b * nu + i] when pre is non-NULL (FDK's cosine and Parker weights),
 * each output by scale. */
void rc_ramp_apply(const rc_ramp *r, rc_ramp_work *w, const float *in, size_t in_stride,
		   float *out, size_t out_stride, int nrows, const float *pre, float scale);

#endif
