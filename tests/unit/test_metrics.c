/* test_metrics: the error measures and masks on inputs whose answers were
 * worked out by hand (a harness that computes a metric is itself tested). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "geometry/metrics.h"

static const float x0[4] = { 1, 2, 3, 4 };
static const float x1[4] = { 1, 2, 3, 5 };

static void test_all_elements(void **state)
{
	(void)state;
	/* ||x - x0|| = 1, ||x0|| = sqrt(1 + 4 + 9 + 16) = sqrt(30) */
	assert_float_equal(rc_metric_rel_error(x1, x0, NULL, 4), 1.0 / sqrt(30.0), 1e-12);
	/* mean squared difference 1/4 */
	assert_float_equal(rc_metric_rmse(x1, x0, NULL, 4), 0.5, 1e-12);
	/* peak 4, RMSE 0.5: 20 log10(8) */
	assert_float_equal(rc_metric_psnr(x1, x0, NULL, 4, 0), 18.061799739838872, 1e-9);
	/* explicit peak 10: 20 log10(20) */
	assert_float_equal(rc_metric_psnr(x1, x0, NULL, 4, 10), 26.020599913279625, 1e-9);
	assert_float_equal(rc_metric_rel_error(x0, x0, NULL, 4), 0.0, 0);
	assert_true(isinf(rc_metric_psnr(x0, x0, NULL, 4, 0)));
}

static void test_masked(void **state)
{
	(void)state;
	const uint8_t first3[4] = { 1, 1, 1, 0 }, last[4] = { 0, 0, 0, 1 }, mixed[4] = { 0, 1, 0, 7 };
	assert_float_equal(rc_metric_rel_error(x1, x0, first3, 4), 0.0, 0);
	assert_float_equal(rc_metric_rmse(x1, x0, first3, 4), 0.0, 0);
	assert_float_equal(rc_metric_rel_error(x1, x0, last, 4), 0.25, 1e-12);
	assert_float_equal(rc_metric_rmse(x1, x0, last, 4), 1.0, 1e-12);
	/* peak over the mask is 4: 20 log10(4) */
	assert_float_equal(rc_metric_psnr(x1, x0, last, 4, 0), 12.041199826559248, 1e-9);
	/* elements 1 and 3: ||d|| = 1, ||x0|| = sqrt(4 + 16), RMSE sqrt(1/2) */
	assert_float_equal(rc_metric_rel_error(x1, x0, mixed, 4), 1.0 / sqrt(20.0), 1e-12);
	assert_float_equal(rc_metric_rmse(x1, x0, mixed, 4), sqrt(0.5), 1e-12);
}

static void test_nothing_counted_is_nan(void **state)
{
	(void)state;
	const uint8_t none[4] = { 0 };
	const float zero[4] = { 0 };
	assert_true(isnan(rc_metric_rel_error(x1, x0, none, 4)));
	assert_true(isnan(rc_metric_rmse(x1, x0, none, 4)));
	assert_true(isnan(rc_metric_psnr(x1, x0, none, 4, 0)));
	assert_true(isnan(rc_metric_rel_error(x1, zero, NULL, 4)));
	assert_true(isnan(rc_metric_rmse(x1, x0, NULL, 0)));
}

static void test_masks(void **state)
{
	(void)state;
	/* 4 x 4 x 3 voxels of 1 x 1 x 2 mm: centres x, y in {-1.5, -0.5, 0.5, 1.5}, z in {-2, 0, 2} */
	rc_volume_desc v = { 4, 4, 3, 1, 1, 2, 0, 0, 0 };
	uint8_t m[48];
	/* r = 1: only the four (+-0.5, +-0.5) columns, 3 slices */
	assert_int_equal(rc_mask_cylinder(&v, 1.0, 10, m), 12);
	/* r = 1.6: also (0.5, 1.5) and its 7 mirror images (0.25 + 2.25 <= 2.56) */
	assert_int_equal(rc_mask_cylinder(&v, 1.6, 10, m), 36);
	/* height 1: the middle slice only */
	assert_int_equal(rc_mask_cylinder(&v, 1.6, 1.0, m), 12);
	assert_int_equal(m[0], 0);
	assert_int_equal(m[16 + 5], 1); /* iz 1, iy 1, ix 1: (-0.5, -0.5, 0) */
	assert_int_equal(m[16 + 0], 0); /* (-1.5, -1.5, 0) */
	double half[3] = { 1, 0.5, 10 };
	assert_int_equal(rc_mask_box(&v, half, m), 12);
	half[0] = 2;
	half[2] = 0;
	assert_int_equal(rc_mask_box(&v, half, m), 8);
	/* an off-centre volume: the mask follows its centre */
	rc_volume_desc w = v;
	w.cx = 100;
	assert_int_equal(rc_mask_cylinder(&w, 1.0, 10, m), 12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_elements),
		cmocka_unit_test(test_masked),
		cmocka_unit_test(test_nothing_counted_is_nan),
		cmocka_unit_test(test_masks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
