/*
 * test_checks: the warnings of core/plan/checks.c, each both ways: a sound
 * cone scan of an analytic ball (rc_phantom_project, exact line integrals)
 * gives none, and each mistake gives its code: the pitch or the voxel size
 * in cm, angles in radians, a detector a few mm wide, a volume much larger
 * than the field of view, the data as intensities (1e4 exp(-p)), NaN and
 * inf (counted and zeroed), a ball wider than the detector (truncated), and
 * a detector read transposed (row sums that change over views), and a
 * relative residual above the floor or above 3x the estimated noise.  The
 * noise estimate itself is checked on white noise of known sigma.
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

#include "geometry/phantom.h"
#include "plan/checks.h"

#define NV 72

struct scan {
	double angles[NV];
	rc_geom_spec sp;
	rc_volume_desc vol;
};

/* 72 views over 360 degrees, D 200, S 400, 48x48 pixels of 1.5 mm (0.75 at
 * the axis), 32^3 voxels of 0.75 mm: the field of view covers the volume */
static void sound(struct scan *s)
{
	memset(s, 0, sizeof *s);
	for (int k = 0; k < NV; k++)
		s->angles[k] = 360.0 * k / NV;
	s->sp = (rc_geom_spec){ .type = RC_GEOM_CONE, .nviews = NV,
				.det = { .nu = 48, .nv = 48, .du = 1.5, .dv = 1.5 },
				.source_isocenter_mm = 200, .source_detector_mm = 400, .angles_deg = s->angles };
	s->vol = (rc_volume_desc){ 32, 32, 32, 0.75, 0.75, 0.75, 0, 0, 0 };
}

static int has(const rc_warnings *ws, const char *code)
{
	for (int i = 0; i < ws->n; i++)
		if (!strcmp(ws->w[i].code, code))
			return 1;
	return 0;
}

static void geom_warnings(const struct scan *s, rc_warnings *ws)
{
	rc_geom *g = NULL;
	rc_err err;
	assert_int_equal(rc_geom_new(&s->sp, &s->vol, NULL, &g, &err), 0);
	memset(ws, 0, sizeof *ws);
	rc_check_geometry(g, ws);
	for (int i = 0; i < ws->n; i++)
		printf("  %s: %s\n", ws->w[i].code, ws->w[i].message);
	rc_geom_free(g);
}

static void test_geometry_sound(void **state)
{
	(void)state;
	struct scan s;
	rc_warnings ws;
	sound(&s);
	geom_warnings(&s, &ws);
	assert_int_equal(ws.n, 0);
	/* a displaced (half-fan) detector: 32 pixels from -4 to 44 mm (-2 to
	 * 22 at the axis) see the volume's far side only in the opposite
	 * views, which measure the same lines: inside the field of view */
	s.sp.det.nu = 32;
	s.sp.det.offset_u = 20;
	geom_warnings(&s, &ws);
	assert_int_equal(ws.n, 0);
	/* shifted past the axis: the middle of the volume is never seen */
	s.sp.det.offset_u = 40; /* 16 to 64 mm (8 to 32 at the axis): the axis is never seen */
	geom_warnings(&s, &ws);
	assert_true(has(&ws, RC_WARN_FOV));
	/* a cylindrical detector of the sound scan */
	sound(&s);
	s.sp.det.shape = RC_DETECTOR_CURVED;
	geom_warnings(&s, &ws);
	assert_int_equal(ws.n, 0);
}

static void test_geometry_mistakes(void **state)
{
	(void)state;
	struct scan s;
	rc_warnings ws;
	sound(&s); /* pixel pitch in cm */
	s.sp.det.du = s.sp.det.dv = 0.15;
	geom_warnings(&s, &ws);
	assert_true(has(&ws, RC_WARN_VOXEL_UNITS));
	assert_true(has(&ws, RC_WARN_FOV));
	sound(&s); /* voxel size in cm */
	s.vol.vx = s.vol.vy = s.vol.vz = 0.075;
	geom_warnings(&s, &ws);
	assert_true(has(&ws, RC_WARN_VOXEL_UNITS));
	assert_false(has(&ws, RC_WARN_FOV));
	sound(&s); /* a detector 4.8 mm wide (both in cm) */
	s.sp.det.du = s.sp.det.dv = 0.1;
	s.vol.vx = s.vol.vy = s.vol.vz = 0.05;
	geom_warnings(&s, &ws);
	assert_true(has(&ws, RC_WARN_DETECTOR_UNITS));
	assert_false(has(&ws, RC_WARN_VOXEL_UNITS));
	sound(&s); /* radians */
	for (int k = 0; k < NV; k++)
		s.angles[k] = 2 * M_PI * k / NV;
	geom_warnings(&s, &ws);
	assert_true(has(&ws, RC_WARN_ANGLES_RADIANS));
	assert_int_equal(ws.n, 1);
	sound(&s); /* 20 views over 6 degrees are not enough to say */
	s.sp.nviews = 20;
	for (int k = 0; k < 20; k++)
		s.angles[k] = 0.3 * k;
	geom_warnings(&s, &ws);
	assert_false(has(&ws, RC_WARN_ANGLES_RADIANS));
	sound(&s); /* a volume twice the field of view */
	s.vol.nx = s.vol.ny = 64;
	geom_warnings(&s, &ws);
	assert_true(has(&ws, RC_WARN_FOV));
	assert_false(has(&ws, RC_WARN_VOXEL_UNITS));
}

/* The ball's exact projections on s (radius r mm). */
static float *ball_stack(const struct scan *s, double r, rc_geom **g)
{
	rc_err err;
	rc_phantom *ph = NULL;
	double c[3] = { 2, -1, 0 };
	assert_int_equal(rc_geom_new(&s->sp, &s->vol, NULL, g, &err), 0);
	assert_int_equal(rc_phantom_ball(c, r, 0.02, &ph, &err), 0);
	float *p = malloc(rc_geom_proj_count(*g) * sizeof *p);
	assert_non_null(p);
	assert_int_equal(rc_phantom_project(ph, *g, 1, p, &err), 0);
	rc_phantom_free(ph);
	return p;
}

static void test_data(void **state)
{
	(void)state;
	struct scan s;
	rc_geom *g = NULL;
	rc_warnings ws = { 0 };
	rc_data_stats st;
	sound(&s);
	float *p = ball_stack(&s, 10, &g);
	size_t n = rc_geom_proj_count(g);
	rc_check_data(g, p, NULL, 0, &st, &ws);
	assert_int_equal(ws.n, 0);
	assert_int_equal(st.non_finite, 0);
	assert_true(st.median < 1);
	/* residuals: exact data has no noise, the floor decides */
	rc_check_residual(0.05, &st, &ws);
	assert_int_equal(ws.n, 0);
	rc_check_residual(1.5 * RC_CHECK_RESIDUAL_FLOOR, &st, &ws);
	assert_true(has(&ws, RC_WARN_RESIDUAL));

	/* NaN and inf: counted, the first view named, zeroed when asked */
	float *w = malloc(n * sizeof *w);
	memcpy(w, p, n * sizeof *w);
	size_t view = rc_geom_view_stride(g);
	w[7 * view + 3] = NAN;
	w[9 * view + 100] = INFINITY;
	w[9 * view + 101] = -INFINITY;
	memset(&ws, 0, sizeof ws);
	rc_check_data(g, w, NULL, 0, &st, &ws);
	assert_int_equal(st.non_finite, 3);
	assert_int_equal(st.first_non_finite_view, 7);
	assert_true(has(&ws, RC_WARN_NON_FINITE));
	assert_true(isnan(w[7 * view + 3]));
	memset(&ws, 0, sizeof ws);
	rc_check_data(g, w, w, 0, &st, &ws);
	assert_int_equal(st.non_finite, 3);
	assert_true(w[7 * view + 3] == 0 && w[9 * view + 100] == 0 && w[9 * view + 101] == 0);
	assert_int_equal(ws.n, 1);

	/* intensities: 1e4 exp(-p), and normalised exp(-p) (median near 1,
	 * caught by the bright edges) */
	for (double i0 = 1e4; i0 >= 1; i0 /= 1e4) {
		for (size_t i = 0; i < n; i++)
			w[i] = (float)(i0 * exp(-p[i]));
		memset(&ws, 0, sizeof ws);
		rc_check_data(g, w, NULL, 0, &st, &ws);
		assert_true(has(&ws, RC_WARN_PRE_LOG));
		assert_false(has(&ws, RC_WARN_TRUNCATED));
	}

	/* the detector read transposed (each view's rows and columns
	 * swapped): the rows' sums vary over views, the columns' do not */
	int nu = s.sp.det.nu;
	for (int k = 0; k < NV; k++)
		for (int j = 0; j < nu; j++)
			for (int i = 0; i < nu; i++)
				w[k * view + (size_t)i * nu + j] = p[k * view + (size_t)j * nu + i];
	memset(&ws, 0, sizeof ws);
	rc_check_data(g, w, NULL, 0, &st, &ws);
	printf("  transposed: rows vary %.4f, columns %.4f\n", st.row_variation, st.col_variation);
	assert_true(has(&ws, RC_WARN_TRANSPOSED));
	rc_check_data(g, p, NULL, 0, &st, &ws);
	printf("  as sent: rows vary %.4f, columns %.4f\n", st.row_variation, st.col_variation);
	assert_true(st.row_variation < st.col_variation);

	/* white noise of sigma 0.01 on top: the estimate finds it (within
	 * 20 %), and a residual at the noise level is not a warning */
	unsigned seed = 1;
	for (size_t i = 0; i < n; i++) {
		double u1 = ((seed = seed * 1103515245u + 12345u) >> 8 & 0xffffff) / (double)0x1000000 + 1e-9;
		double u2 = ((seed = seed * 1103515245u + 12345u) >> 8 & 0xffffff) / (double)0x1000000;
		w[i] = p[i] + (float)(0.01 * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
	}
	memset(&ws, 0, sizeof ws);
	rc_check_data(g, w, NULL, 0, &st, &ws);
	printf("  noise sigma %.5f (0.01), rms %.4f\n", st.noise_sigma, st.rms);
	assert_true(fabs(st.noise_sigma - 0.01) < 0.002);
	double noise_rel = st.noise_sigma / st.rms;
	rc_check_residual(noise_rel > RC_CHECK_RESIDUAL_FLOOR ? noise_rel : 0.05, &st, &ws);
	assert_false(has(&ws, RC_WARN_RESIDUAL));
	free(w);
	free(p);
	rc_geom_free(g);

	/* a ball wider than the detector sees (field of view ~ 18 mm radius) */
	p = ball_stack(&s, 24, &g);
	memset(&ws, 0, sizeof ws);
	rc_check_data(g, p, NULL, 0, &st, &ws);
	assert_true(has(&ws, RC_WARN_TRUNCATED));
	assert_false(has(&ws, RC_WARN_PRE_LOG));
	free(p);
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry_sound),
		cmocka_unit_test(test_geometry_mistakes),
		cmocka_unit_test(test_data),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
