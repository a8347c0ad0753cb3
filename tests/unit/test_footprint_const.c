/*
 * RC_FP_FOOTPRINT of a volume of one value (the row sums A(1) that SART,
 * SIRT and MLEM compute first) takes rc_fpf_const_col
 * (proj_footprint_col.h), a closed form per voxel column, on cone views.  Reference: linearity
 * through the tap path.  With u a varying volume (uniform in [0, 1)),
 * A(c 1) = A(c u) + A(c (1 - u)), and neither of those is constant, so the
 * right side is the column loops' taps.  They must agree to float rounding
 * (1e-5 of the largest value) on flat and curved cones and tilted matrices
 * (the per-voxel path, which the closed form does not touch), at every ratio the
 * pair serves, detectors clipping the footprints, on every ISA.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cpu/engine_cpu.h"
#include "projectors/proj_cpu.h"
#include "proj_testutil.h"
#include "tilt_case.h"

#define NV 9
static const char *const isas[3] = { "baseline", "avx2", "avx512" };
static const double D = 150, S = 300;
static const double RATIOS[] = { 0.5, 1, 1.25, 2, 2.6, 4 };
/* odd sizes, anisotropic, off-centre */
static const rc_volume_desc VOL = { 23, 20, 19, 1.0, 0.9, 1.1, 0.7, -0.4, 0.5 };

/* test_footprint's geometry: a detector a little smaller than the
 * volume's shadow, so that footprints are clipped at its edges. */
static rc_geom *make(rc_geom_type type, double ratio, rc_detector_shape shape)
{
	const double px = VOL.vx * (S / D) / ratio;
	rc_detector_desc det = { (int)(VOL.nx * VOL.vx * 2.4 / px) + 3, (int)(VOL.nz * VOL.vz * 2.2 / px) + 1, px, px,
				 0.7 * px, -0.4 * px, shape };
	rc_err err;
	rc_geom *g = tilt_case_geom(type, &VOL, &det, NV, 11, D, S, &err);
	if (!g)
		fail_msg("geometry: %s", err.msg);
	return g;
}

static void one_case(rc_geom_type type, rc_detector_shape shape, double ratio)
{
	rc_geom *g = make(type, ratio, shape);
	rc_engine *e = make_engine(g, 0);
	assert_true(e->footprint);
	const size_t nvox = rc_volume_count(&VOL), np = rc_geom_proj_count(g);
	const float c = 1.7f;
	float *one = falloc(nvox), *u = falloc(nvox), *w = falloc(nvox);
	float *a1 = falloc(np), *au = falloc(np), *aw = falloc(np);
	for (size_t i = 0; i < nvox; i++) {
		double r = urand();
		one[i] = c;
		u[i] = (float)(c * r);
		w[i] = (float)(c * (1.0 - r));
	}
	rc_err err;
	for (int k = 0; k < 3; k++) {
		if (rc_engine_cpu_set_isa(e, isas[k], &err))
			continue;
		assert_int_equal(rc_engine_forward(e, RC_FP_FOOTPRINT, one, a1, 0, NV, &err), 0);
		assert_int_equal(rc_engine_forward(e, RC_FP_FOOTPRINT, u, au, 0, NV, &err), 0);
		assert_int_equal(rc_engine_forward(e, RC_FP_FOOTPRINT, w, aw, 0, NV, &err), 0);
		double d = 0.0, m = 0.0;
		for (size_t i = 0; i < np; i++) {
			d = fmax(d, fabs((double)a1[i] - ((double)au[i] + aw[i])));
			m = fmax(m, fabs((double)a1[i]));
		}
		print_message("%s ratio %.2f, %s: A(c 1) against A(c u) + A(c (1 - u)): %.3g of the largest %.4g\n",
			      type == RC_GEOM_MATRICES ? "matrices" : shape == RC_DETECTOR_CURVED ? "curved cone" : "cone",
			      ratio, isas[k], d / m, m);
		assert_true(m > 0.0);
		assert_true(d <= 1e-5 * m);
	}
	free(one), free(u), free(w), free(a1), free(au), free(aw);
	rc_engine_free(e);
	rc_geom_free(g);
}

static void test_cone(void **s)
{
	(void)s;
	for (size_t i = 0; i < sizeof RATIOS / sizeof RATIOS[0]; i++)
		one_case(RC_GEOM_CONE, RC_DETECTOR_FLAT, RATIOS[i]);
}

static void test_curved(void **s)
{
	(void)s;
	for (size_t i = 0; i < sizeof RATIOS / sizeof RATIOS[0]; i++)
		one_case(RC_GEOM_CONE, RC_DETECTOR_CURVED, RATIOS[i]);
}

static void test_matrices(void **s)
{
	(void)s;
	one_case(RC_GEOM_MATRICES, RC_DETECTOR_FLAT, 1.25);
	one_case(RC_GEOM_MATRICES, RC_DETECTOR_FLAT, 2.6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cone),
		cmocka_unit_test(test_curved),
		cmocka_unit_test(test_matrices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
