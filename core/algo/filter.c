/*
 * filter: ramp filtering of detector rows through FFTW (filter.h).
 *
 * The kernel's spectrum H is computed once, in double precision, as the DFT
 * of the circularly placed spatial kernel h(n), n in (-N/2, N/2], times the
 * window; because h is real and even, H is real.  A batch of rows is then one
 * r2c transform (howmany = batch), a multiplication by H/N (FFTW's
 * transforms are unnormalised) and one c2r transform.  Threads share the
 * plans through FFTW's new-array execute functions, which are thread-safe;
 * each thread's buffers come from fftwf_malloc so they have the alignment
 * the plans were made for.
 */
#include "algo/filter.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/names.h"

struct rc_ramp {
	int nu, batch, n;    /* row length, rows per call, padded length */
	float *H;            /* n/2 + 1 spectrum values, including 1/n */
	fftwf_plan fwd, inv;
};

struct rc_ramp_work {
	float *real;          /* batch * n */
	fftwf_complex *spec;  /* batch * (n/2 + 1) */
};

/* FFTW's planner (and plan destruction) must not run concurrently. */
static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER;

/* Smallest even n >= m whose only prime factors are 2, 3, 5, 7. */
static int fft_size(int m)
{
	for (int n = m + (m & 1);; n += 2) {
		int r = n;
		for (int p = 2; p <= 7; p++)
			while (r % p == 0)
				r /= p;
		if (r == 1)
			return n;
	}
}

static double window_at(rc_filter_window w, double x)
{
	if (x > 1.0)
		return 0.0;
	switch (w) {
	case RC_WINDOW_RAM_LAK:
		return 1.0;
	case RC_WINDOW_SHEPP_LOGAN:
		return x == 0 ? 1.0 : sin(M_PI * x / 2) / (M_PI * x / 2);
	case RC_WINDOW_HANN:
		return 0.5 * (1.0 + cos(M_PI * x));
	}
	return 1.0;
}

/* The windowed kernel's spectrum (times 1/n) into r->H.  arc > 0: the
 * equiangular fan's kernel, the windowed ramp times (m arc / sin(m arc))^2
 * at lag m (Kak & Slaney Eq. 3.177's g), applied in the spatial domain
 * between a backward and a forward transform; lags |m| >= nu never meet a
 * sample (rows are padded to n >= 2 nu) and keep the ramp's value. */
static int kernel_spectrum(rc_ramp *r, rc_filter_window window, double cutoff, double arc, rc_err *err)
{
	const int n = r->n, nh = n / 2 + 1;
	double *h = fftw_malloc(sizeof(double) * (size_t)n);
	fftw_complex *Hc = fftw_malloc(sizeof(fftw_complex) * (size_t)nh);
	fftw_plan p = NULL, q = NULL;
	int rc = 0;
	if (!h || !Hc) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a ramp filter of length %d", n);
		goto out;
	}
	pthread_mutex_lock(&planner_lock);
	p = fftw_plan_dft_r2c_1d(n, h, Hc, FFTW_ESTIMATE);
	q = arc > 0 ? fftw_plan_dft_c2r_1d(n, Hc, h, FFTW_ESTIMATE) : NULL;
	pthread_mutex_unlock(&planner_lock);
	if (!p || (arc > 0 && !q)) {
		rc = rc_fail(err, RC_EINTERNAL, "", "FFTW could not plan a transform of length %d", n);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		int m = i <= n / 2 ? i : i - n; /* circular lag */
		h[i] = m == 0 ? 0.25 : (m & 1) ? -1.0 / (M_PI * M_PI * (double)m * (double)m) : 0.0;
	}
	fftw_execute(p);
	for (int k = 0; k < nh; k++) {
		double x = (double)k / (double)(n / 2) / cutoff;
		Hc[k][0] *= window_at(window, x) / n;
		Hc[k][1] = 0.0; /* h is even: its spectrum is real */
	}
	if (arc > 0) {
		fftw_execute(q); /* h = the windowed kernel (c2r destroys Hc) */
		for (int i = 1; i < n; i++) {
			int m = i <= n / 2 ? i : i - n;
			if (abs(m) < r->nu) {
				double a = m * arc;
				h[i] *= (a / sin(a)) * (a / sin(a));
			}
		}
		fftw_execute(p);
		for (int k = 0; k < nh; k++)
			Hc[k][0] /= n;
	}
	for (int k = 0; k < nh; k++)
		r->H[k] = (float)Hc[k][0];
out:
	pthread_mutex_lock(&planner_lock);
	if (p)
		fftw_destroy_plan(p);
	if (q)
		fftw_destroy_plan(q);
	pthread_mutex_unlock(&planner_lock);
	fftw_free(h);
	fftw_free(Hc);
	return rc;
}

int rc_ramp_new(int nu, int batch, rc_filter_window window, double cutoff,
		rc_ramp **ret, rc_err *err)
{
	return rc_ramp_new_arc(nu, batch, window, cutoff, 0.0, ret, err);
}

int rc_ramp_new_arc(int nu, int batch, rc_filter_window window, double cutoff, double arc,
		    rc_ramp **ret, rc_err *err)
{
	int rc;
	if (!(arc >= 0 && arc * nu < M_PI))
		return rc_fail(err, RC_EINVAL, "geometry.detector",
			       "a curved detector's fan must span less than 180 degrees (%d pixels of %g rad)", nu, arc);
	if (nu < 1 || nu > (1 << 24) || batch < 1)
		return rc_fail(err, RC_EINVAL, "geometry.detector.nu", "a ramp filter needs rows of 1 to 2^24 samples (got %d)", nu);
	if (!(cutoff > 0 && cutoff <= 1))
		return rc_fail(err, RC_EINVAL, "algorithm.cutoff", "algorithm.cutoff must be in (0, 1] (got %g)", cutoff);
	if (!rc_name_str(RC_NAMES_WINDOW, (int)window)) {
		char got[16];
		snprintf(got, sizeof got, "%d", (int)window);
		return rc_name_fail(err, RC_NAMES_WINDOW, "algorithm.window", got);
	}
	rc_ramp *r = calloc(1, sizeof *r);
	if (!r)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a ramp filter");
	r->nu = nu;
	r->batch = batch;
	r->n = fft_size(2 * nu);
	const int n = r->n, nh = n / 2 + 1;
	rc_ramp_work *w = NULL;
	r->H = malloc(sizeof(float) * (size_t)nh);
	if (!r->H) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a ramp filter of length %d", n);
		goto out_free;
	}
	if ((rc = kernel_spectrum(r, window, cutoff, arc, err)))
		goto out_free;
	if ((rc = rc_ramp_work_new(r, &w, err)))
		goto out_free;
	pthread_mutex_lock(&planner_lock);
	r->fwd = fftwf_plan_many_dft_r2c(1, &r->n, batch, w->real, NULL, 1, n, w->spec, NULL, 1, nh, FFTW_ESTIMATE);
	r->inv = fftwf_plan_many_dft_c2r(1, &r->n, batch, w->spec, NULL, 1, nh, w->real, NULL, 1, n, FFTW_ESTIMATE);
	pthread_mutex_unlock(&planner_lock);
	rc_ramp_work_free(w);
	if (!r->fwd || !r->inv) {
		rc = rc_fail(err, RC_EINTERNAL, "", "FFTW could not plan %d transforms of length %d", batch, n);
		goto out_free;
	}
	*ret = r;
	return 0;
out_free:
	rc_ramp_free(r);
	return rc;
}

void rc_ramp_free(rc_ramp *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&planner_lock);
	if (r->fwd)
		fftwf_destroy_plan(r->fwd);
	if (r->inv)
		fftwf_destroy_plan(r->inv);
	pthread_mutex_unlock(&planner_lock);
	free(r->H);
	free(r);
}

int rc_ramp_length(const rc_ramp *r) { return r->n; }

double rc_ramp_response(const rc_ramp *r, int k) { return (double)r->H[k] * r->n; }

int rc_ramp_work_new(const rc_ramp *r, rc_ramp_work **ret, rc_err *err)
{
	rc_ramp_work *w = calloc(1, sizeof *w);
	if (!w)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for filter buffers");
	w->real = fftwf_malloc(sizeof(float) * (size_t)r->batch * (size_t)r->n);
	w->spec = fftwf_malloc(sizeof(fftwf_complex) * (size_t)r->batch * (size_t)(r->n / 2 + 1));
	if (!w->real || !w->spec) {
		rc_ramp_work_free(w);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for filter buffers of %d rows of %d", r->batch, r->n);
	}
	*ret = w;
	return 0;
}

void rc_ramp_work_free(rc_ramp_work *w)
{
	if (!w)
		return;
	fftwf_free(w->real);
	fftwf_free(w->spec);
	free(w);
}

void rc_ramp_apply(const rc_ramp *r, rc_ramp_work *w, const float *in, size_t in_stride,
		   float *out, size_t out_stride, int nrows, const float *pre, float scale)
{
	const int nu = r->nu, n = r->n, nh = n / 2 + 1;
	/* unused rows of the batch are zero: the plan always transforms `batch` rows */
	for (int b = 0; b < r->batch; b++) {
		float *dst = w->real + (size_t)b * n;
		if (b < nrows) {
			const float *src = in + (size_t)b * in_stride;
			if (pre) {
				const float *pw = pre + (size_t)b * nu;
				for (int i = 0; i < nu; i++)
					dst[i] = src[i] * pw[i];
			} else {
				memcpy(dst, src, sizeof(float) * (size_t)nu);
			}
			memset(dst + nu, 0, sizeof(float) * (size_t)(n - nu));
		} else {
			memset(dst, 0, sizeof(float) * (size_t)n);
		}
	}
	fftwf_execute_dft_r2c(r->fwd, w->real, w->spec);
	for (int b = 0; b < nrows; b++) {
		fftwf_complex *s = w->spec + (size_t)b * nh;
		for (int k = 0; k < nh; k++) {
			s[k][0] *= r->H[k];
			s[k][1] *= r->H[k];
		}
	}
	fftwf_execute_dft_c2r(r->inv, w->spec, w->real);
	for (int b = 0; b < nrows; b++) {
		const float *src = w->real + (size_t)b * n;
		float *dst = out + (size_t)b * out_stride;
		for (int i = 0; i < nu; i++)
			dst[i] = src[i] * scale;
	}
}
