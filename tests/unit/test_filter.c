/* test_filter: the FFT ramp filter against a direct double-precision
 * convolution with Kak & Slaney's kernel, the filtered projection of a disc
 * against its closed form, the windows against naive DFTs, and the batch,
 * stride, pre-weight and scale plumbing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "algo/filter.h"

static double urand(unsigned *s, double lo, double hi)
{
	*s = *s * 1103515245u + 12345u;
	return lo + (hi - lo) * ((*s >> 8) & 0xffffff) / (double)0x1000000;
}

static double kernel(int m)
{
	if (m == 0)
		return 0.25;
	return (m & 1) ? -1.0 / (M_PI * M_PI * (double)m * (double)m) : 0.0;
}

/* y[i] = sum_k h(i - k) x[k]: the linear convolution, written directly */
static void direct(const double *x, int nu, double *y)
{
	for (int i = 0; i < nu; i++) {
		double s = 0;
		for (int k = 0; k < nu; k++)
			s += kernel(i - k) * x[k];
		y[i] = s;
	}
}

static void test_matches_direct_convolution(void **state)
{
	(void)state;
	const int sizes[] = { 1, 2, 37, 64, 100, 257 };
	unsigned seed = 5;
	for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
		int nu = sizes[c];
		rc_ramp *r;
		rc_ramp_work *w;
		assert_int_equal(rc_ramp_new(nu, 1, RC_WINDOW_RAM_LAK, 1.0, &r, NULL), 0);
		assert_true(rc_ramp_length(r) >= 2 * nu);
		assert_int_equal(rc_ramp_work_new(r, &w, NULL), 0);
		double *x = malloc(sizeof(double) * nu), *y = malloc(sizeof(double) * nu);
		float *row = malloc(sizeof(float) * nu);
		for (int i = 0; i < nu; i++) {
			row[i] = (float)urand(&seed, -1, 1);
			x[i] = row[i];
		}
		direct(x, nu, y);
		rc_ramp_apply(r, w, row, (size_t)nu, row, (size_t)nu, 1, NULL, 1.0f);
		for (int i = 0; i < nu; i++)
			assert_float_equal(row[i], y[i], 2e-6 * sqrt(nu));
		free(x);
		free(y);
		free(row);
		rc_ramp_work_free(w);
		rc_ramp_free(r);
	}
}

/* The equiangular kernel (ram-lak): rc_ramp_new_arc's output against the
 * direct convolution with h(m) (m a / sin(m a))^2, written here; and a
 * flat kernel differs from it by more than the bound (the test can fail). */
static void test_arc_kernel(void **state)
{
	(void)state;
	const int nu = 301;
	const double arc = 2.8 / nu; /* a fan of 160 degrees */
	unsigned seed = 11;
	rc_ramp *r, *flat;
	rc_ramp_work *w, *wf;
	assert_int_equal(rc_ramp_new_arc(nu, 1, RC_WINDOW_RAM_LAK, 1.0, arc, &r, NULL), 0);
	assert_int_equal(rc_ramp_new(nu, 1, RC_WINDOW_RAM_LAK, 1.0, &flat, NULL), 0);
	assert_int_equal(rc_ramp_work_new(r, &w, NULL), 0);
	assert_int_equal(rc_ramp_work_new(flat, &wf, NULL), 0);
	float *row = malloc(sizeof(float) * nu), *rowf = malloc(sizeof(float) * nu);
	double *x = malloc(sizeof(double) * nu);
	for (int i = 0; i < nu; i++)
		x[i] = row[i] = rowf[i] = (float)urand(&seed, 0, 1);
	rc_ramp_apply(r, w, row, (size_t)nu, row, (size_t)nu, 1, NULL, 1.0f);
	rc_ramp_apply(flat, wf, rowf, (size_t)nu, rowf, (size_t)nu, 1, NULL, 1.0f);
	double worst = 0, worst_flat = 0;
	for (int i = 0; i < nu; i++) {
		double y = 0;
		for (int k = 0; k < nu; k++) {
			int m = i - k;
			double c = m ? (m * arc) / sin(m * arc) : 1.0;
			y += kernel(m) * c * c * x[k];
		}
		worst = fmax(worst, fabs(row[i] - y));
		worst_flat = fmax(worst_flat, fabs(rowf[i] - y));
	}
	print_message("equiangular kernel: worst difference %.2e (flat kernel %.2e)\n", worst, worst_flat);
	assert_true(worst < 2e-6 * sqrt(nu));
	assert_true(worst_flat > 10 * 2e-6 * sqrt(nu));
	/* a fan of 180 degrees or more has no such kernel */
	rc_err err;
	rc_ramp *bad = NULL;
	assert_int_equal(rc_ramp_new_arc(nu, 1, RC_WINDOW_RAM_LAK, 1.0, M_PI / nu, &bad, &err), RC_EINVAL);
	assert_null(bad);
	free(x);
	free(row);
	free(rowf);
	rc_ramp_work_free(w);
	rc_ramp_work_free(wf);
	rc_ramp_free(r);
	rc_ramp_free(flat);
}

/* The parallel projection of a unit disc of density 1, p(s) = 2 sqrt(1 - s^2),
 * ramp-filtered (|omega| in cycles) is 1/pi inside and
 * (1/pi)(1 - |s| / sqrt(s^2 - 1)) outside: back projecting it over pi
 * gives 1 inside.  Checks the 1/T scaling convention of filter.h. */
static void test_disc_projection(void **state)
{
	(void)state;
	const double T = 0.004;
	const int nu = 1001; /* s from -2 to 2 */
	rc_ramp *r;
	rc_ramp_work *w;
	assert_int_equal(rc_ramp_new(nu, 1, RC_WINDOW_RAM_LAK, 1.0, &r, NULL), 0);
	assert_int_equal(rc_ramp_work_new(r, &w, NULL), 0);
	float *row = malloc(sizeof(float) * nu);
	for (int i = 0; i < nu; i++) {
		double s = (i - (nu - 1) / 2) * T;
		row[i] = fabs(s) < 1 ? (float)(2 * sqrt(1 - s * s)) : 0.0f;
	}
	rc_ramp_apply(r, w, row, (size_t)nu, row, (size_t)nu, 1, NULL, (float)(1.0 / T));
	double worst_in = 0, worst_out = 0;
	for (int i = 0; i < nu; i++) {
		double s = fabs((i - (nu - 1) / 2) * T);
		if (s < 0.9)
			worst_in = fmax(worst_in, fabs(row[i] - 1 / M_PI));
		else if (s > 1.2 && s < 1.8)
			worst_out = fmax(worst_out, fabs(row[i] - (1 - s / sqrt(s * s - 1)) / M_PI));
	}
	print_message("disc: worst error inside %.2e, outside %.2e (values ~0.32, ~-0.1)\n", worst_in, worst_out);
	assert_true(worst_in < 3e-3);
	assert_true(worst_out < 3e-3);
	free(row);
	rc_ramp_work_free(w);
	rc_ramp_free(r);
}

static double window(rc_filter_window win, double x)
{
	if (x > 1)
		return 0;
	if (win == RC_WINDOW_SHEPP_LOGAN)
		return x == 0 ? 1 : sin(M_PI * x / 2) / (M_PI * x / 2);
	if (win == RC_WINDOW_HANN)
		return 0.5 + 0.5 * cos(M_PI * x);
	return 1;
}

static void test_windows(void **state)
{
	(void)state;
	const int nu = 40;
	const rc_filter_window wins[3] = { RC_WINDOW_RAM_LAK, RC_WINDOW_SHEPP_LOGAN, RC_WINDOW_HANN };
	const double cutoffs[3] = { 1.0, 0.5, 0.8 };
	for (int a = 0; a < 3; a++) {
		for (int b = 0; b < 3; b++) {
			rc_ramp *r;
			rc_ramp_work *w;
			assert_int_equal(rc_ramp_new(nu, 1, wins[a], cutoffs[b], &r, NULL), 0);
			assert_int_equal(rc_ramp_work_new(r, &w, NULL), 0);
			const int n = rc_ramp_length(r);
			/* spectrum: naive DFT of the circularly placed kernel times the window */
			double *H = malloc(sizeof(double) * (n / 2 + 1));
			for (int k = 0; k <= n / 2; k++) {
				double s = 0;
				for (int i = 0; i < n; i++) {
					int m = i <= n / 2 ? i : i - n;
					s += kernel(m) * cos(2 * M_PI * k * i / n);
				}
				H[k] = s * window(wins[a], (double)k / (n / 2) / cutoffs[b]);
				assert_float_equal(rc_ramp_response(r, k), H[k], 1e-6);
				/* the discrete ramp is |f| (cycles per sample) to within its truncation */
				if (a == 0 && b == 0)
					assert_float_equal(H[k], (double)k / n, 0.5 / n);
			}
			assert_float_equal(H[0], 2.0 / (M_PI * M_PI * n), 0.3 / n); /* the kernel tail beyond N/2: DC is not 0 */
			/* impulse response of rc_ramp_apply: the naive inverse DFT of H */
			float *row = calloc(nu, sizeof(float));
			row[0] = 1;
			rc_ramp_apply(r, w, row, (size_t)nu, row, (size_t)nu, 1, NULL, 1.0f);
			for (int m = 0; m < nu; m++) {
				double y = H[0];
				for (int k = 1; k < n / 2; k++)
					y += 2 * H[k] * cos(2 * M_PI * k * m / n);
				y += H[n / 2] * cos(M_PI * m);
				y /= n;
				assert_float_equal(row[m], y, 1e-6);
			}
			free(row);
			free(H);
			rc_ramp_work_free(w);
			rc_ramp_free(r);
		}
	}
}

static void test_batch_stride_weights(void **state)
{
	(void)state;
	const int nu = 33, batch = 6, nrows = 4;
	const size_t stride = 50;
	unsigned seed = 9;
	rc_ramp *r;
	rc_ramp_work *w;
	assert_int_equal(rc_ramp_new(nu, batch, RC_WINDOW_RAM_LAK, 1.0, &r, NULL), 0);
	assert_int_equal(rc_ramp_work_new(r, &w, NULL), 0);
	float *buf = malloc(sizeof(float) * stride * batch), *orig = malloc(sizeof(float) * stride * batch);
	float *pre = malloc(sizeof(float) * nu * batch);
	for (size_t i = 0; i < stride * batch; i++)
		buf[i] = orig[i] = (float)urand(&seed, -1, 1);
	for (int i = 0; i < nu * batch; i++)
		pre[i] = (float)urand(&seed, 0.5, 1.5);
	rc_ramp_apply(r, w, buf, stride, buf, stride, nrows, pre, 2.5f);
	double x[33], y[33];
	for (int b = 0; b < batch; b++) {
		for (int i = 0; i < nu; i++)
			x[i] = (double)orig[b * stride + i] * pre[b * nu + i];
		direct(x, nu, y);
		for (int i = 0; i < (int)stride; i++) {
			float got = buf[b * stride + i];
			if (b < nrows && i < nu)
				assert_float_equal(got, 2.5 * y[i], 1e-5);
			else
				assert_float_equal(got, orig[b * stride + i], 0); /* untouched */
		}
	}
	free(buf);
	free(orig);
	free(pre);
	rc_ramp_work_free(w);
	rc_ramp_free(r);
}

static void test_invalid(void **state)
{
	(void)state;
	rc_ramp *r = NULL;
	rc_err err;
	assert_int_equal(rc_ramp_new(10, 1, RC_WINDOW_HANN, 0.0, &r, &err), RC_EINVAL);
	assert_string_equal(err.field, "algorithm.cutoff");
	assert_int_equal(rc_ramp_new(10, 1, RC_WINDOW_HANN, 1.5, &r, &err), RC_EINVAL);
	assert_int_equal(rc_ramp_new(10, 1, RC_WINDOW_HANN, NAN, &r, &err), RC_EINVAL);
	assert_int_equal(rc_ramp_new(10, 1, (rc_filter_window)9, 1.0, &r, &err), RC_EINVAL);
	assert_int_equal(rc_ramp_new(0, 1, RC_WINDOW_HANN, 1.0, &r, &err), RC_EINVAL);
	assert_null(r);
	rc_ramp_free(NULL);
	rc_ramp_work_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches_direct_convolution),
		cmocka_unit_test(test_arc_kernel),
		cmocka_unit_test(test_disc_projection),
		cmocka_unit_test(test_windows),
		cmocka_unit_test(test_batch_stride_weights),
		cmocka_unit_test(test_invalid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
