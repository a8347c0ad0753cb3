/* test_phantom: analytic line integrals against closed forms and against
 * brute-force numerical integration, voxelised mass against the analytic
 * volume, and whole projection stacks (every geometry type and the stack
 * layouts of API.md) against pixel positions computed here from API.md. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "geometry/phantom.h"

static double urand(unsigned *s, double lo, double hi)
{
	*s = *s * 1103515245u + 12345u;
	return lo + (hi - lo) * ((*s >> 8) & 0xffffff) / (double)0x1000000;
}

/* Midpoint rule of rc_phantom_value along o + t d, t in [t0, t1]: an
 * independent reference (it only uses the point membership test). */
static double numeric_integral(const rc_phantom *p, const double o[3], const double d[3],
			       double t0, double t1, int steps)
{
	double dn = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
	double h = (t1 - t0) / steps, sum = 0;
	for (int s = 0; s < steps; s++) {
		double t = t0 + (s + 0.5) * h, x[3] = { o[0] + t * d[0], o[1] + t * d[1], o[2] + t * d[2] };
		sum += rc_phantom_value(p, x);
	}
	return sum * h * dn;
}

static double dist_point_line(const double c[3], const double o[3], const double u[3])
{
	double w[3] = { c[0] - o[0], c[1] - o[1], c[2] - o[2] };
	double uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
	double t = (w[0] * u[0] + w[1] * u[1] + w[2] * u[2]) / uu;
	double r[3] = { w[0] - t * u[0], w[1] - t * u[1], w[2] - t * u[2] };
	return sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
}

static double ball_chord(double r, double d, double mu) { return d < r ? 2 * sqrt(r * r - d * d) * mu : 0; }

static void test_ball_closed_form(void **state)
{
	(void)state;
	const double c[3] = { 3, -7, 11 }, r = 20, mu = 0.02;
	rc_phantom *p;
	assert_int_equal(rc_phantom_ball(c, r, mu, &p, NULL), 0);
	unsigned seed = 1;
	for (int n = 0; n < 2000; n++) {
		/* origin ~1000 mm away as a CT source, aimed near the ball */
		double th = urand(&seed, 0, 2 * M_PI), ph = urand(&seed, -0.5, 0.5);
		double o[3] = { c[0] + 1000 * cos(th) * cos(ph), c[1] + 1000 * sin(th) * cos(ph), c[2] + 1000 * sin(ph) };
		double aim[3] = { c[0] + urand(&seed, -25, 25), c[1] + urand(&seed, -25, 25), c[2] + urand(&seed, -25, 25) };
		double d[3] = { aim[0] - o[0], aim[1] - o[1], aim[2] - o[2] };
		double want = ball_chord(r, dist_point_line(c, o, d), mu);
		/* to infinity, as a segment long enough, and as the whole line */
		assert_float_equal(rc_phantom_integral(p, o, d, 0, INFINITY), want, 1e-11);
		assert_float_equal(rc_phantom_integral(p, o, d, 0, 2.0), want, 1e-11);
		assert_float_equal(rc_phantom_integral(p, o, d, -INFINITY, INFINITY), want, 1e-11);
		/* the ray pointing away sees nothing */
		assert_float_equal(rc_phantom_integral(p, o, d, -INFINITY, 0), 0, 0);
	}
	/* a segment that stops at the centre gets exactly half of the diameter chord */
	double o[3] = { c[0] - 500, c[1], c[2] }, d[3] = { 500, 0, 0 };
	assert_float_equal(rc_phantom_integral(p, o, d, 0, 1), r * mu, 1e-12);
	/* a segment inside the ball: its own length */
	assert_float_equal(rc_phantom_integral(p, o, d, 0.99, 1.01), 10 * mu, 1e-12);
	/* tangent and outside */
	double o2[3] = { c[0] - 500, c[1] + r + 1e-9, c[2] };
	assert_float_equal(rc_phantom_integral(p, o2, d, -INFINITY, INFINITY), 0, 1e-12);
	/* mass 4/3 pi r^3 mu */
	assert_float_equal(rc_phantom_mass(p), 4.0 / 3.0 * M_PI * r * r * r * mu, 1e-9);
	rc_phantom_free(p);
}

static void test_rotation_direction(void **state)
{
	(void)state;
	/* long axis along x, rotated +90 deg about z: long along +y */
	rc_ellipsoid e = { { 0, 0, 0 }, { 10, 2, 3 }, 90, 1 };
	rc_phantom *p;
	assert_int_equal(rc_phantom_new(&e, 1, &p, NULL), 0);
	assert_float_equal(rc_phantom_value(p, (double[]){ 0, 8, 0 }), 1, 0);
	assert_float_equal(rc_phantom_value(p, (double[]){ 8, 0, 0 }), 0, 0);
	assert_float_equal(rc_phantom_value(p, (double[]){ 0, 0, 2.9 }), 1, 0);
	assert_float_equal(rc_phantom_value(p, (double[]){ 0, 0, 3.1 }), 0, 0);
	/* +30 deg: the point 8 mm along (cos 30, sin 30) is inside, its mirror image is not */
	rc_phantom_free(p);
	e.phi_deg = 30;
	assert_int_equal(rc_phantom_new(&e, 1, &p, NULL), 0);
	double c30 = cos(M_PI / 6), s30 = sin(M_PI / 6);
	assert_float_equal(rc_phantom_value(p, (double[]){ 8 * c30, 8 * s30, 0 }), 1, 0);
	assert_float_equal(rc_phantom_value(p, (double[]){ 8 * c30, -8 * s30, 0 }), 0, 0);
	/* line along the long axis: chord 2 * 10 */
	assert_float_equal(rc_phantom_integral(p, (double[]){ 0, 0, 0 }, (double[]){ c30, s30, 0 }, -INFINITY, INFINITY),
			   20, 1e-12);
	rc_phantom_free(p);
}

static void test_ellipsoids_vs_numeric(void **state)
{
	(void)state;
	rc_phantom *p;
	assert_int_equal(rc_phantom_shepp_logan(100, &p, NULL), 0);
	assert_int_equal(rc_phantom_count(p), 10);
	unsigned seed = 7;
#if defined(__SANITIZE_ADDRESS__)
	const int steps = 40000; /* the bound below scales with the step */
#else
	const int steps = 400000;
#endif
	int hits = 0;
	for (int n = 0; n < 40; n++) {
		double o[3] = { urand(&seed, -60, 60), urand(&seed, -60, 60), urand(&seed, -60, 60) };
		double b[3] = { urand(&seed, -30, 30), urand(&seed, -30, 30), urand(&seed, -30, 30) };
		double d[3] = { b[0] - o[0], b[1] - o[1], b[2] - o[2] };
		/* the ray from o through b, out to 3x that distance: leaves the phantom */
		double want = numeric_integral(p, o, d, 0, 3, steps);
		double got = rc_phantom_integral(p, o, d, 0, 3);
		/* midpoint error: at most one step of length per surface crossing
		 * (<= 20 crossings) times the largest density step */
		double step_mm = 3 * sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) / steps;
		assert_float_equal(got, want, 20 * step_mm * RC_PHANTOM_MU_UNIT + 1e-12);
		hits += fabs(want) > 0.1;
	}
	assert_true(hits > 20); /* the rays did cross the phantom */
	rc_phantom_free(p);
}

static void test_voxelized_mass(void **state)
{
	(void)state;
	rc_phantom *p;
	assert_int_equal(rc_phantom_shepp_logan(64, &p, NULL), 0);
	rc_volume_desc v = { 64, 64, 64, 1, 1, 1, 0, 0, 0 };
	float *vol = malloc(rc_volume_count(&v) * sizeof *vol);
	assert_non_null(vol);
	double errs[2];
	const int ks[2] = { 1, 4 };
	for (int t = 0; t < 2; t++) {
		assert_int_equal(rc_phantom_voxelize(p, &v, ks[t], 0, vol, NULL), 0);
		double sum = 0;
		for (size_t i = 0; i < rc_volume_count(&v); i++)
			sum += vol[i];
		errs[t] = fabs(sum - rc_phantom_mass(p)) / fabs(rc_phantom_mass(p));
	}
	print_message("voxelised mass error: k=1 %.2e, k=4 %.2e\n", errs[0], errs[1]);
	assert_true(errs[1] < 2e-3);
	/* a voxel well inside the brain holds the brain density exactly;
	 * voxel (32, 23, 32) sits at (0.5, -8.5, 0.5): inside ellipsoids 1 and 2 only */
	assert_float_equal(vol[(size_t)32 * 64 * 64 + 23 * 64 + 32], 0.2 * RC_PHANTOM_MU_UNIT, 1e-7);
	assert_float_equal(vol[0], 0, 0);
	/* a ball off the grid: supersampled mass converges to 4/3 pi r^3 mu */
	rc_phantom *b;
	assert_int_equal(rc_phantom_ball((double[]){ 3.3, -2.1, 1.7 }, 9.3, 0.5, &b, NULL), 0);
	assert_int_equal(rc_phantom_voxelize(b, &v, 8, 0, vol, NULL), 0);
	double sum = 0;
	for (size_t i = 0; i < rc_volume_count(&v); i++)
		sum += vol[i];
	assert_float_equal(sum, rc_phantom_mass(b), 2e-3 * rc_phantom_mass(b));
	/* invalid supersampling */
	rc_err err;
	assert_int_equal(rc_phantom_voxelize(b, &v, 0, 0, vol, &err), RC_EINVAL);
	rc_phantom_free(b);
	rc_phantom_free(p);
	free(vol);
}

/* API.md's pixel centre of a cone view, written out independently. */
static void api_pixel(double D, double S, const rc_detector_desc *det, double th_deg, double i, double j,
		      double src[3], double pix[3])
{
	double t = th_deg * M_PI / 180, ct = cos(t), st = sin(t);
	double um = (i - (det->nu - 1) / 2.0) * det->du + det->offset_u;
	double vm = (j - (det->nv - 1) / 2.0) * det->dv + det->offset_v;
	src[0] = D * ct;
	src[1] = D * st;
	src[2] = 0;
	pix[0] = -(S - D) * ct - um * st;
	pix[1] = -(S - D) * st + um * ct;
	pix[2] = vm;
}

static void test_cone_stack(void **state)
{
	(void)state;
	const double c[3] = { 4, -3, 2 }, r = 12, mu = 0.03;
	rc_phantom *p;
	assert_int_equal(rc_phantom_ball(c, r, mu, &p, NULL), 0);
	double ang[5] = { 0, 33, 90, 181, 300 };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = 5, .det = { 48, 40, 1.0, 1.25, 3.5, -2 },
			    .source_isocenter_mm = 500, .source_detector_mm = 800, .angles_deg = ang };
	rc_volume_desc v = { 32, 32, 32, 1, 1, 1, 0, 0, 0 };
	rc_geom *g;
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, NULL), 0);
	size_t n = rc_geom_proj_count(g);
	assert_int_equal(n, 5 * 48 * 40);
	float *proj = malloc(n * sizeof *proj);
	assert_int_equal(rc_phantom_project(p, g, 0, proj, NULL), 0);
	double maxv = 0;
	for (int k = 0; k < 5; k++)
		for (int j = 0; j < 40; j++)
			for (int i = 0; i < 48; i++) {
				double s[3], x[3];
				api_pixel(500, 800, &sp.det, ang[k], i, j, s, x);
				double d[3] = { x[0] - s[0], x[1] - s[1], x[2] - s[2] };
				double want = ball_chord(r, dist_point_line(c, s, d), mu);
				assert_float_equal(proj[((size_t)k * 40 + j) * 48 + i], want, 1e-6);
				maxv = fmax(maxv, want);
			}
	assert_true(maxv > 1.9 * r * mu);
	free(proj);
	rc_geom_free(g);
	rc_phantom_free(p);
}

static void test_2d_stacks(void **state)
{
	(void)state;
	/* a ball off-centre in z so every slice differs; the stack is [slice][view][u] */
	const double c[3] = { 5, -4, 3 }, r = 10, mu = 0.05;
	rc_phantom *p;
	assert_int_equal(rc_phantom_ball(c, r, mu, &p, NULL), 0);
	double ang[7] = { 0, 20, 45, 90, 135, 200, 333 };
	rc_volume_desc v = { 32, 32, 9, 1, 1, 2, 0, 0, 1 };
	const int nu = 50;
	for (int type = RC_GEOM_FAN; type <= RC_GEOM_PARALLEL; type++) {
		rc_geom_spec sp = { .type = (rc_geom_type)type, .nviews = 7, .det = { nu, 1, 0.9, 0, 1.3, 0 },
				    .source_isocenter_mm = 400, .source_detector_mm = 700, .angles_deg = ang };
		rc_geom *g;
		assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, NULL), 0);
		assert_int_equal(rc_geom_proj_count(g), (size_t)9 * 7 * nu);
		float *proj = malloc(rc_geom_proj_count(g) * sizeof *proj);
		assert_int_equal(rc_phantom_project(p, g, 0, proj, NULL), 0);
		int nonzero_slices = 0;
		for (int iz = 0; iz < 9; iz++) {
			double z = (iz - 4) * 2.0 + 1, dz = z - c[2];
			double rr = dz * dz < r * r ? sqrt(r * r - dz * dz) : 0; /* the ball's circle in this slice */
			double slice_sum = 0;
			for (int k = 0; k < 7; k++) {
				double t = ang[k] * M_PI / 180, ct = cos(t), st = sin(t);
				for (int i = 0; i < nu; i++) {
					double um = (i - (nu - 1) / 2.0) * 0.9 + 1.3, dist;
					if (type == RC_GEOM_PARALLEL) {
						/* the line through um e_u along -(ct, st): distance |c.e_u - um| */
						dist = fabs(-c[0] * st + c[1] * ct - um);
					} else {
						double s[3] = { 400 * ct, 400 * st, 0 };
						double x[3] = { -300 * ct - um * st, -300 * st + um * ct, 0 };
						double d[3] = { x[0] - s[0], x[1] - s[1], 0 };
						double cc[3] = { c[0], c[1], 0 };
						dist = dist_point_line(cc, s, d);
					}
					double want = ball_chord(rr, dist, mu);
					float got = proj[((size_t)iz * 7 + k) * nu + i];
					assert_float_equal(got, want, 1e-6);
					assert_int_equal(rc_geom_row_offset(g, k, iz), ((size_t)iz * 7 + k) * nu);
					slice_sum += want;
				}
			}
			nonzero_slices += slice_sum > 0;
		}
		assert_true(nonzero_slices >= 5 && nonzero_slices < 9);
		free(proj);
		rc_geom_free(g);
	}
	rc_phantom_free(p);
}

static void test_invalid(void **state)
{
	(void)state;
	rc_phantom *p = NULL;
	rc_err err;
	rc_ellipsoid e = { { 0, 0, 0 }, { 1, -1, 1 }, 0, 1 };
	assert_int_equal(rc_phantom_new(&e, 1, &p, &err), RC_EINVAL);
	assert_int_equal(rc_phantom_new(&e, 0, &p, &err), RC_EINVAL);
	e.a[1] = 1;
	e.mu = NAN;
	assert_int_equal(rc_phantom_new(&e, 1, &p, &err), RC_EINVAL);
	assert_int_equal(rc_phantom_shepp_logan(-1, &p, &err), RC_EINVAL);
	assert_null(p);
	rc_phantom_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ball_closed_form),
		cmocka_unit_test(test_rotation_direction),
		cmocka_unit_test(test_ellipsoids_vs_numeric),
		cmocka_unit_test(test_voxelized_mass),
		cmocka_unit_test(test_cone_stack),
		cmocka_unit_test(test_2d_stacks),
		cmocka_unit_test(test_invalid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
