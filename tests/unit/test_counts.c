/*
 * Tests of core/util/counts.c against a double-precision reference written
 * out here: p = -ln((I - dark) / (flat - dark)) per pixel for uint16 and
 * float32 counts with a per-pixel gain and dark field, the clamping (and
 * its count) where I <= dark, where the ratio is NaN or where flat <= dark,
 * the bad-pixel interpolation along u and (a whole row bad) along v, the
 * averaging of several images, and the refusal of a flat at or below the
 * dark field everywhere.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/counts.h"
#include "util/counts_row.h"

#define ROWS 5
#define NU 7
#define N (ROWS * NU)

static void fields(float *flat, float *dark)
{
	for (int p = 0; p < N; p++) {
		flat[p] = 40000.0f + 150.0f * (float)(p % 11) - 90.0f * (float)(p / NU);
		dark[p] = 100.0f + (float)(p % 5);
	}
}

static double ref(double I, double flat, double dark)
{
	double r = (I - dark) / (flat - dark);
	if (!(r >= RC_COUNTS_RATIO_MIN))
		r = RC_COUNTS_RATIO_MIN;
	return -log(r);
}

static void test_u16_against_double(void **state)
{
	(void)state;
	float flat[N], dark[N], out[ROWS * 9];
	uint16_t I[ROWS * 8];
	fields(flat, dark);
	double want[N];
	for (int j = 0; j < ROWS; j++)
		for (int i = 0; i < NU; i++) {
			int p = j * NU + i;
			double li = 0.05 * (double)(i + 2 * j); /* a line integral of 0 .. 0.8 */
			uint16_t v = (uint16_t)lround(dark[p] + (flat[p] - dark[p]) * exp(-li));
			I[j * 8 + i] = v; /* a source row stride of 8 samples */
			want[p] = ref(v, flat[p], dark[p]);
		}
	rc_counts *c = NULL;
	rc_err err;
	assert_int_equal(rc_counts_new(RC_COUNTS_U16, ROWS, NU, flat, dark, NULL, &c, &err), 0);
	assert_int_equal(rc_counts_image(c, I, 8, out, 9), 0);
	for (int j = 0; j < ROWS; j++)
		for (int i = 0; i < NU; i++)
			assert_true(fabs(out[j * 9 + i] - want[j * NU + i]) < 2e-6);
	rc_counts_free(c);
}

static void test_f32_clamps(void **state)
{
	(void)state;
	float flat[N], dark[N], I[N], out[N];
	fields(flat, dark);
	for (int p = 0; p < N; p++)
		I[p] = dark[p] + 0.5f * (flat[p] - dark[p]);
	I[3] = dark[3];          /* nothing got through: clamped */
	I[4] = dark[4] - 50.0f;  /* below the dark: clamped */
	I[5] = NAN;              /* clamped */
	flat[9] = dark[9];       /* dead: interpolated, counted */
	rc_counts *c = NULL;
	rc_err err;
	assert_int_equal(rc_counts_new(RC_COUNTS_F32, ROWS, NU, flat, dark, NULL, &c, &err), 0);
	assert_int_equal(rc_counts_dead(c), 1);
	assert_int_equal(rc_counts_image(c, I, NU, out, NU), 4);
	double floor_p = -log(RC_COUNTS_RATIO_MIN);
	assert_true(fabs(out[3] - floor_p) < 1e-4 && fabs(out[4] - floor_p) < 1e-4 && fabs(out[5] - floor_p) < 1e-4);
	assert_true(fabs(out[9] - log(2.0)) < 1e-6); /* its neighbours are ln 2 */
	for (int p = 10; p < N; p++)
		assert_true(fabs(out[p] - ref(I[p], flat[p], dark[p])) < 1e-6);
	rc_counts_free(c);
}

static void test_bad_pixels(void **state)
{
	(void)state;
	float flat[N], dark[N], I[N], out[N];
	uint8_t bad[N] = { 0 };
	fields(flat, dark);
	double p_of[N];
	for (int p = 0; p < N; p++) {
		int j = p / NU, i = p % NU;
		p_of[p] = 0.1 * i + 0.3 * j; /* linear in u and v: interpolation is exact */
		I[p] = (float)(dark[p] + (flat[p] - dark[p]) * exp(-p_of[p]));
	}
	bad[0 * NU + 2] = bad[0 * NU + 3] = 1; /* two in a row: between u = 1 and u = 4 */
	bad[1 * NU + 6] = 1;                   /* at the edge: copies u = 5 */
	for (int i = 0; i < NU; i++)
		bad[3 * NU + i] = 1;           /* a whole row: mean of rows 2 and 4 */
	I[0 * NU + 2] = 0;                     /* garbage under bad pixels */
	I[3 * NU + 1] = 1e9f;
	rc_counts *c = NULL;
	rc_err err;
	assert_int_equal(rc_counts_new(RC_COUNTS_F32, ROWS, NU, flat, dark, bad, &c, &err), 0);
	(void)rc_counts_image(c, I, NU, out, NU);
	for (int p = 0; p < N; p++) {
		int i = p % NU;
		double want = p == 1 * NU + 6 ? p_of[1 * NU + 5] : p_of[p];
		(void)i;
		assert_true(fabs(out[p] - want) < 2e-5);
	}
	rc_counts_free(c);
}

static void test_refused_and_average(void **state)
{
	(void)state;
	float flat[N], dark[N];
	fields(flat, dark);
	for (int p = 0; p < N; p++)
		flat[p] = dark[p] - 1.0f;
	rc_counts *c = NULL;
	rc_err err;
	assert_int_equal(rc_counts_new(RC_COUNTS_U16, ROWS, NU, flat, dark, NULL, &c, &err), RC_EINVAL);
	assert_string_equal(err.field, "input.flat");
	assert_null(c);

	uint16_t img[3 * 4] = { 1, 2, 3, 65535, 3, 4, 5, 65535, 5, 6, 8, 65534 };
	float avg[4];
	rc_counts_average(RC_COUNTS_U16, img, 3, 4, avg);
	assert_true(avg[0] == 3.0f && avg[1] == 4.0f && fabs(avg[2] - 16.0 / 3) < 1e-5 && fabs(avg[3] - 65534.666667) < 1e-2);
	float fimg[2 * 2] = { 1.5f, -2.0f, 2.5f, 4.0f };
	rc_counts_average(RC_COUNTS_F32, fimg, 2, 2, avg);
	assert_true(avg[0] == 2.0f && avg[1] == 1.0f);
	assert_int_equal(rc_counts_sample_bytes(RC_COUNTS_U16), 2);
	assert_int_equal(rc_counts_sample_bytes(RC_COUNTS_F32), 4);
}

/* The baseline, AVX2 and AVX-512 rows (counts_row.h) agree bit for bit
 * (no contraction: -ffp-contract=off), on clamped and dead pixels too. */
static void test_isa_paths_agree(void **state)
{
	(void)state;
	enum { W = 1000 };
	static uint16_t su[W];
	static float sf[W], dk[W], sc[W], d0[W], d1[W];
	uint32_t x = 12345;
	for (int i = 0; i < W; i++) {
		x = x * 1103515245u + 12345u;
		su[i] = (uint16_t)(x >> 16);
		sf[i] = (float)(x >> 8) * 1e-3f - 100.0f;
		dk[i] = (float)(i % 300);
		sc[i] = i % 97 == 0 ? 0.0f : 1.0f / (40000.0f + (float)i);
	}
	uint64_t n0 = rc_counts_row_u16_baseline(su, dk, sc, d0, W), n1;
	assert_true(n0 > 0);
#if defined(__x86_64__) && defined(__GNUC__)
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		n1 = rc_counts_row_u16_avx2(su, dk, sc, d1, W);
		assert_true(n1 == n0 && !memcmp(d0, d1, sizeof d0));
		n0 = rc_counts_row_f32_baseline(sf, dk, sc, d0, W);
		n1 = rc_counts_row_f32_avx2(sf, dk, sc, d1, W);
		assert_true(n1 == n0 && !memcmp(d0, d1, sizeof d0));
	}
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")) {
		n0 = rc_counts_row_u16_baseline(su, dk, sc, d0, W);
		n1 = rc_counts_row_u16_avx512(su, dk, sc, d1, W);
		assert_true(n1 == n0 && !memcmp(d0, d1, sizeof d0));
		n0 = rc_counts_row_f32_baseline(sf, dk, sc, d0, W);
		n1 = rc_counts_row_f32_avx512(sf, dk, sc, d1, W);
		assert_true(n1 == n0 && !memcmp(d0, d1, sizeof d0));
	}
#endif
	/* the fast log against libm's, over the whole clamped range */
	for (int i = 0; i < W; i++) {
		float r = (float)exp(-13.8 + 27.6 * i / (W - 1));
		float s = 1.0f, got;
		rc_counts_row_f32_baseline(&r, &(float){ 0.0f }, &s, &got, 1);
		assert_true(fabs(got + log(r)) < 2e-6 * (1 + fabs(log(r))));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u16_against_double),
		cmocka_unit_test(test_f32_clamps),
		cmocka_unit_test(test_bad_pixels),
		cmocka_unit_test(test_refused_and_average),
		cmocka_unit_test(test_isa_paths_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
