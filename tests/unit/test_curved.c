/*
 * test_curved: the curved (equiangular) fan detector, geometry.detector.shape
 * "curved" (docs/geometry.md, "Curved fan detectors").
 *
 * Every reference here is computed in this file from the formulas of the
 * docs, in double, not through the code under test: pixel i of view k is
 * centred at s + S (cos g_i n + sin g_i e_u), g_i = ((i - (nu-1)/2) du +
 * offset_u) / S.  Checked: rc_geom_plane_u maps points on those rays to
 * u = i (and the flat and parallel formulas likewise); rc_geom_ray points
 * along them; rc_geom_new's refusals; the analytic phantom's curved
 * projection of a centred ball is the chord 2 sqrt(r^2 - (D sin g)^2) mu;
 * the curved distance-driven matrix is adjoint to its transpose and matches
 * bin-averaged line integrals, while the flat matrix does not (the shape
 * matters); the symmetric (8-fold) product equals the full one on a curved
 * fan; the cache key tells the shapes apart; and the flat matrix is bit for
 * bit the one of the commit before curved detectors existed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/phantom.h"
#include "projectors/dd_matrix.h"
#include "projectors/tensor_sym.h"
#include "tensor_phantom.h"

#if defined(__SANITIZE_ADDRESS__)
#define N_IMG 64
#define N_VIEWS 64
#else
#define N_IMG 96
#define N_VIEWS 120
#endif

/* A fan geometry of nviews views at angles 360 k / nviews + a0 over an
 * n x n image of 1 mm pixels, nz slices of 1 mm. */
static int fan(rc_detector_shape shape, int n, int nz, int nviews, double a0, double D, double S, int nu, double du,
	       double offset, rc_geom **g, rc_err *err)
{
	double ang[1024];
	if (nviews > 1024)
		return -1;
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews + a0;
	rc_geom_spec sp = { .type = RC_GEOM_FAN, .nviews = nviews, .angles_deg = ang, .source_isocenter_mm = D,
			    .source_detector_mm = S };
	sp.det.nu = nu;
	sp.det.nv = 1;
	sp.det.du = du;
	sp.det.offset_u = offset;
	sp.det.shape = shape;
	rc_volume_desc v = { n, n, nz, 1, 1, 1, 0, 0, 0 };
	return rc_geom_new(&sp, &v, NULL, g, err);
}

/* The docs' frame of view k: source s, central direction n, e_u. */
struct frame {
	double s[2], n[2], eu[2];
};

static struct frame frame_of(double angle_deg, double D)
{
	double t = angle_deg * M_PI / 180, c = cos(t), sn = sin(t);
	return (struct frame){ { D * c, D * sn }, { -c, -sn }, { -sn, c } };
}

static double gamma_of(double e, int nu, double du, double offset, double S)
{
	return ((e - (nu - 1) / 2.0) * du + offset) / S;
}

/* The test geometry: D 100, S 180, 64 pixels of 3.375 mm (a fan of about
 * +-34 degrees) offset by 5.1 mm, 7 views, a 32 x 32 image. */
#define T_D 100.0
#define T_S 180.0
#define T_NU 64
#define T_DU 3.375
#define T_OFF 5.1
#define T_VIEWS 7
#define T_A0 13.7

static void test_plane_u_pixel_centres(void **state)
{
	(void)state;
	rc_geom *g;
	rc_err err;
	assert_int_equal(fan(RC_DETECTOR_CURVED, 32, 1, T_VIEWS, T_A0, T_D, T_S, T_NU, T_DU, T_OFF, &g, &err), 0);
	double worst_u = 0, worst_dir = 0;
	for (int k = 0; k < T_VIEWS; k++) {
		struct frame f = frame_of(360.0 * k / T_VIEWS + T_A0, T_D);
		for (int i = 0; i < T_NU; i++) {
			double gm = gamma_of(i, T_NU, T_DU, T_OFF, T_S), cg = cos(gm), sg = sin(gm);
			double P[2] = { f.s[0] + T_S * (cg * f.n[0] + sg * f.eu[0]), f.s[1] + T_S * (cg * f.n[1] + sg * f.eu[1]) };
			for (double t = 0.35; t < 1.0; t += 0.25) {
				double X[2] = { f.s[0] + t * (P[0] - f.s[0]), f.s[1] + t * (P[1] - f.s[1]) }, w;
				double u = rc_geom_plane_u(g, k, X[0], X[1], &w);
				worst_u = fmax(worst_u, fabs(u - i));
				assert_true(fabs(w - t * T_S * cg) < 1e-9 * T_S);
			}
			double o[3], d[3];
			rc_geom_ray(g, k, i, 0, 0, o, d);
			assert_true(fabs(o[0] - f.s[0]) < 1e-9 && fabs(o[1] - f.s[1]) < 1e-9 && o[2] == 0);
			worst_dir = fmax(worst_dir, hypot(d[0] - (P[0] - f.s[0]) / T_S, d[1] - (P[1] - f.s[1]) / T_S));
		}
	}
	printf("curved: |u - i| on the pixel rays at most %.1e, ray directions off by at most %.1e\n", worst_u,
	       worst_dir);
	assert_true(worst_u < 1e-9);
	assert_true(worst_dir < 1e-12);
	/* near the central ray the curved index agrees with the flat one */
	rc_geom *gf;
	assert_int_equal(fan(RC_DETECTOR_FLAT, 32, 1, T_VIEWS, T_A0, T_D, T_S, T_NU, T_DU, 0, &gf, &err), 0);
	rc_geom *gc;
	assert_int_equal(fan(RC_DETECTOR_CURVED, 32, 1, T_VIEWS, T_A0, T_D, T_S, T_NU, T_DU, 0, &gc, &err), 0);
	struct frame f = frame_of(T_A0, T_D);
	for (double a = -0.01; a <= 0.01; a += 0.005) {
		double X[2] = { f.s[0] + 120 * (cos(a) * f.n[0] + sin(a) * f.eu[0]),
				f.s[1] + 120 * (cos(a) * f.n[1] + sin(a) * f.eu[1]) }, wf, wc;
		double uf = rc_geom_plane_u(gf, 0, X[0], X[1], &wf), uc = rc_geom_plane_u(gc, 0, X[0], X[1], &wc);
		assert_true(fabs(uf - uc) < 1e-3);
		assert_true(fabs(wf - wc) < 1e-9);
	}
	/* far from it they differ: at 30 degrees, S tan g vs S g is 1.7 pixels */
	double a = 30 * M_PI / 180, X[2] = { f.s[0] + 120 * (cos(a) * f.n[0] + sin(a) * f.eu[0]),
					       f.s[1] + 120 * (cos(a) * f.n[1] + sin(a) * f.eu[1]) }, w;
	double du_f = rc_geom_plane_u(gf, 0, X[0], X[1], &w) - rc_geom_plane_u(gc, 0, X[0], X[1], &w);
	assert_true(fabs(du_f - T_S * (tan(a) - a) / T_DU) < 1e-9);
	rc_geom_free(gf);
	rc_geom_free(gc);
	rc_geom_free(g);
}

/* The flat fan and the parallel geometry through the same function: points
 * on the segment to the flat pixel centre s + S n + u_mm e_u (API.md), and
 * on the parallel ray through u_mm e_u. */
static void test_plane_u_flat_and_parallel(void **state)
{
	(void)state;
	rc_geom *g, *gp;
	rc_err err;
	assert_int_equal(fan(RC_DETECTOR_FLAT, 32, 1, T_VIEWS, T_A0, T_D, T_S, T_NU, 1.7, T_OFF, &g, &err), 0);
	double ang[T_VIEWS];
	for (int k = 0; k < T_VIEWS; k++)
		ang[k] = 360.0 * k / T_VIEWS + T_A0;
	rc_geom_spec sp = { .type = RC_GEOM_PARALLEL, .nviews = T_VIEWS, .angles_deg = ang };
	sp.det.nu = T_NU;
	sp.det.nv = 1;
	sp.det.du = 0.9;
	sp.det.offset_u = -2.2;
	rc_volume_desc v = { 32, 32, 1, 1, 1, 1, 0, 0, 0 };
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &gp, &err), 0);
	for (int k = 0; k < T_VIEWS; k++) {
		struct frame f = frame_of(ang[k], T_D);
		for (int i = 0; i < T_NU; i++) {
			double um = (i - (T_NU - 1) / 2.0) * 1.7 + T_OFF;
			double P[2] = { f.s[0] + T_S * f.n[0] + um * f.eu[0], f.s[1] + T_S * f.n[1] + um * f.eu[1] }, w;
			double X[2] = { f.s[0] + 0.6 * (P[0] - f.s[0]), f.s[1] + 0.6 * (P[1] - f.s[1]) };
			assert_true(fabs(rc_geom_plane_u(g, k, X[0], X[1], &w) - i) < 1e-9);
			assert_true(fabs(w - 0.6 * T_S) < 1e-9);
			double up = (i - (T_NU - 1) / 2.0) * 0.9 - 2.2;
			double Y[2] = { up * f.eu[0] + 7.5 * f.n[0], up * f.eu[1] + 7.5 * f.n[1] };
			assert_true(fabs(rc_geom_plane_u(gp, k, Y[0], Y[1], &w) - i) < 1e-9);
			assert_true(w == 1);
		}
	}
	rc_geom_free(g);
	rc_geom_free(gp);
}

static void test_refusals(void **state)
{
	(void)state;
	rc_geom *g = NULL;
	rc_err err;
	double ang[2] = { 0, 90 }, mat[24] = { 0 };
	rc_volume_desc v = { 16, 16, 4, 1, 1, 1, 0, 0, 0 };
	/* (a cone takes a cylindrical detector: test_detectors.c) */
	const rc_geom_type other[] = { RC_GEOM_PARALLEL, RC_GEOM_MATRICES };
	for (int t = 0; t < 2; t++) {
		rc_geom_spec sp = { .type = other[t], .nviews = 2, .angles_deg = ang, .matrices = mat,
				    .source_isocenter_mm = 100, .source_detector_mm = 200 };
		sp.det = (rc_detector_desc){ 32, 8, 1, 1, 0, 0, RC_DETECTOR_CURVED };
		rc_err_clear(&err);
		assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), RC_EINVAL);
		assert_string_equal(err.field, "geometry.detector.shape");
		assert_non_null(strstr(err.msg, "fan"));
	}
	rc_geom_spec sp = { .type = RC_GEOM_FAN, .nviews = 2, .angles_deg = ang, .source_isocenter_mm = 100,
			    .source_detector_mm = 200 };
	sp.det = (rc_detector_desc){ 32, 1, 1, 1, 0, 0, (rc_detector_shape)7 };
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector.shape");
	/* the fan's edges within 80 degrees: 556 pixels of 1 mm on an arc of
	 * 200 mm reach 79.6 degrees, 560 80.2 */
	sp.det = (rc_detector_desc){ 556, 1, 1, 1, 0, 0, RC_DETECTOR_CURVED };
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), 0);
	rc_geom_free(g);
	sp.det.nu = 560;
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector");
	assert_non_null(strstr(err.msg, "80 degrees"));
	sp.det.nu = 400; /* 57.3 degrees, plus an offset of 80 mm: 80.2 */
	sp.det.offset_u = -80;
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector");
	/* the arc cuts a 64 x 64 image whose far corner is 132 mm deep (in front
	 * of a flat detector at 134) but 135.8 mm from the source */
	rc_volume_desc big = { 64, 64, 1, 1, 1, 1, 0, 0, 0 };
	double one[1] = { 0 };
	rc_geom_spec sc = { .type = RC_GEOM_FAN, .nviews = 1, .angles_deg = one, .source_isocenter_mm = 100,
			    .source_detector_mm = 134 };
	sc.det = (rc_detector_desc){ 120, 1, 1, 1, 0, 0, RC_DETECTOR_FLAT };
	assert_int_equal(rc_geom_new(&sc, &big, NULL, &g, &err), 0);
	rc_geom_free(g);
	sc.det.shape = RC_DETECTOR_CURVED;
	assert_int_equal(rc_geom_new(&sc, &big, NULL, &g, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.source_detector_mm");
	assert_non_null(strstr(err.msg, "curved"));
	/* a curved detector that sees none of the volume (offset far to one side) */
	sc.source_detector_mm = 300;
	sc.det = (rc_detector_desc){ 10, 1, 1, 1, 350, 0, RC_DETECTOR_CURVED };
	assert_int_equal(rc_geom_new(&sc, &big, NULL, &g, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector");
}

/* A ball of radius r at the origin cut by the slice z = 0: the ray at fan
 * angle g passes D |sin g| from the centre. */
static void test_phantom_ball(void **state)
{
	(void)state;
	const double c[3] = { 0, 0, 0 }, r = 14, mu = 0.02;
	rc_phantom *p;
	rc_err err;
	assert_int_equal(rc_phantom_ball(c, r, mu, &p, &err), 0);
	rc_geom *g, *gf;
	assert_int_equal(fan(RC_DETECTOR_CURVED, 32, 1, T_VIEWS, T_A0, T_D, T_S, T_NU, T_DU, T_OFF, &g, &err), 0);
	assert_int_equal(fan(RC_DETECTOR_FLAT, 32, 1, T_VIEWS, T_A0, T_D, T_S, T_NU, T_DU, T_OFF, &gf, &err), 0);
	size_t n = rc_geom_proj_count(g);
	float *pc = malloc(n * sizeof *pc), *pf = malloc(n * sizeof *pf);
	assert_int_equal(rc_phantom_project(p, g, 2, pc, &err), 0);
	assert_int_equal(rc_phantom_project(p, gf, 2, pf, &err), 0);
	double worst = 0, flat_off = 0;
	int hit = 0;
	for (int k = 0; k < T_VIEWS; k++)
		for (int i = 0; i < T_NU; i++) {
			double d = T_D * fabs(sin(gamma_of(i, T_NU, T_DU, T_OFF, T_S)));
			double want = d < r ? 2 * sqrt(r * r - d * d) * mu : 0;
			float got = pc[rc_geom_row_offset(g, k, 0) + (size_t)i];
			hit += want > 0;
			worst = fmax(worst, fabs(got - want));
			flat_off = fmax(flat_off, fabs(pf[rc_geom_row_offset(gf, k, 0) + (size_t)i] - want));
		}
	printf("curved phantom: %d pixels cross the ball; |projection - chord| at most %.1e (flat data: %.3f)\n",
	       hit, worst, flat_off);
	assert_true(hit >= T_VIEWS * 8);
	assert_true(worst < 1e-6);
	assert_true(flat_off > 1e-3); /* the flat detector's pixels are elsewhere: the check can fail */
	free(pc);
	free(pf);
	rc_geom_free(g);
	rc_geom_free(gf);
	rc_phantom_free(p);
}

/* The wide fan of the matrix tests: D = 1.5 R, S = 2.5 R for the image's
 * circumradius R (the image fills +-42 degrees), the arc +-45 degrees. */
static int wide(rc_detector_shape shape, int n, int nviews, double a0, int nu, rc_geom **g)
{
	double R = n * sqrt(2) / 2 + 2, S = 2.5 * R;
	rc_err err;
	return fan(shape, n, 1, nviews, a0, 1.5 * R, S, nu, 2 * S * (M_PI / 4) / nu, 0, g, &err);
}

/* Bin-averaged line integral of tensor_phantom's ellipses over bin u of
 * view k of a curved fan, from the docs' ray formula (16 sub-rays). */
static double curved_bin(int n, int nviews, double a0, int nu, int k, int u)
{
	double R = n * sqrt(2) / 2 + 2, D = 1.5 * R, S = 2.5 * R, du = 2 * S * (M_PI / 4) / nu;
	struct frame f = frame_of(360.0 * k / nviews + a0, D);
	double sum = 0;
	for (int q = 0; q < 16; q++) {
		double gm = gamma_of(u - 0.5 + (q + 0.5) / 16, nu, du, 0, S);
		double d[2] = { cos(gm) * f.n[0] + sin(gm) * f.eu[0], cos(gm) * f.n[1] + sin(gm) * f.eu[1] };
		for (int i = 0; i < TP_NSHAPES; i++)
			sum += tp_ellipse_integral(&tp_shapes[i], n / 128.0, f.s, d);
	}
	return sum / 16;
}

static double rel_err(const float *a, const double *ref, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += (a[i] - ref[i]) * (a[i] - ref[i]);
		den += ref[i] * ref[i];
	}
	return sqrt(num / den);
}

static void test_dd_analytic(void **state)
{
	(void)state;
	int n = N_IMG, nu = N_IMG + N_IMG / 2;
	rc_geom *g, *gf;
	assert_int_equal(wide(RC_DETECTOR_CURVED, n, N_VIEWS, 0.3, nu, &g), 0);
	assert_int_equal(wide(RC_DETECTOR_FLAT, n, N_VIEWS, 0.3, nu, &gf), 0);
	rc_csr *m = NULL, *mf = NULL;
	rc_err err;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	assert_int_equal(rc_dd_build(gf, 0, &mf, &err), 0);
	float *img = malloc(sizeof(float) * n * n), *y = malloc(sizeof(float) * m->rows);
	double *ref = malloc(sizeof(double) * m->rows);
	tp_pixelize(rc_geom_volume(g), 8, n / 128.0, img);
	for (int k = 0; k < N_VIEWS; k++)
		for (int u = 0; u < nu; u++)
			ref[k * nu + u] = curved_bin(n, N_VIEWS, 0.3, nu, k, u);
	assert_int_equal(rc_csr_mul(m, img, y, 1, 0, &err), 0);
	double e = rel_err(y, ref, (size_t)m->rows);
	assert_int_equal(rc_csr_mul(mf, img, y, 1, 0, &err), 0);
	double ef = rel_err(y, ref, (size_t)m->rows);
	printf("curved DD %dx%d, %d views, %d bins: relative L2 vs analytic %.4f%%; the flat matrix on curved data "
	       "%.1f%%\n", n, n, N_VIEWS, nu, 100 * e, 100 * ef);
	assert_true(e < 0.01);
	assert_true(ef > 0.05);
	free(img);
	free(y);
	free(ref);
	rc_csr_free(m);
	rc_csr_free(mf);
	rc_geom_free(g);
	rc_geom_free(gf);
}

static unsigned lcg(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static void test_dd_adjoint(void **state)
{
	(void)state;
	rc_geom *g;
	assert_int_equal(wide(RC_DETECTOR_CURVED, 40, 36, 0.3, 70, &g), 0);
	rc_csr *m = NULL, *t = NULL;
	rc_err err;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	assert_int_equal(rc_csr_transpose(m, &t, &err), 0);
	float *x = malloc(sizeof(float) * m->cols), *y = malloc(sizeof(float) * m->rows);
	float *ax = malloc(sizeof(float) * m->rows), *aty = malloc(sizeof(float) * m->cols);
	unsigned s = 11;
	for (int i = 0; i < m->cols; i++)
		x[i] = (float)(lcg(&s) % 1000) / 1000.0f - 0.3f;
	for (int i = 0; i < m->rows; i++)
		y[i] = (float)(lcg(&s) % 1000) / 1000.0f - 0.6f;
	assert_int_equal(rc_csr_mul(m, x, ax, 1, 0, &err), 0);
	assert_int_equal(rc_csr_mul(t, y, aty, 1, 2, &err), 0);
	double l = 0, r = 0, mag = 0;
	for (int i = 0; i < m->rows; i++) {
		l += (double)ax[i] * y[i];
		mag += fabs((double)ax[i] * y[i]);
	}
	for (int i = 0; i < m->cols; i++)
		r += (double)x[i] * aty[i];
	printf("curved DD adjoint: <Ax,y> %.6f <x,A^T y> %.6f (|difference| / sum |terms| %.1e)\n", l, r,
	       fabs(l - r) / mag);
	assert_true(fabs(l - r) <= 1e-5 * mag);
	free(x);
	free(y);
	free(ax);
	free(aty);
	rc_csr_free(m);
	rc_csr_free(t);
	rc_geom_free(g);
}

/* tensor_sym's 8-fold product on a curved fan equals the full matrix's. */
static void test_symmetric(void **state)
{
	(void)state;
	int n = 32, nviews = 64;
	rc_geom *g;
	assert_int_equal(wide(RC_DETECTOR_CURVED, n, nviews, 0, 49, &g), 0);
	rc_sym *s = NULL;
	rc_err err;
	assert_int_equal(rc_sym_new(g, 0, &s, &err), 0);
	rc_csr *m = NULL;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	float *img = malloc(sizeof(float) * n * n), *full = malloc(sizeof(float) * m->rows),
	      *sym = malloc(sizeof(float) * m->rows);
	for (int i = 0; i < n * n; i++)
		img[i] = (float)((i * 37) % 101) / 100.0f + (float)(i % n) / n;
	assert_int_equal(rc_csr_mul(m, img, full, 1, 0, &err), 0);
	assert_int_equal(rc_sym_forward_cpu(s, img, sym, 0, &err), 0);
	double num = 0, den = 0;
	for (int r = 0; r < m->rows; r++) {
		num += (double)(sym[r] - full[r]) * (sym[r] - full[r]);
		den += (double)full[r] * full[r];
	}
	printf("curved fan %dx%d, %d views: symmetric vs full projection, relative L2 %.2e\n", n, n, nviews,
	       sqrt(num / den));
	assert_true(sqrt(num / den) < 1e-3);
	free(img);
	free(full);
	free(sym);
	rc_csr_free(m);
	rc_sym_free(s);
	rc_geom_free(g);
}

static void test_cache_key(void **state)
{
	(void)state;
	rc_geom *g, *gf;
	assert_int_equal(wide(RC_DETECTOR_CURVED, 24, 12, 0.3, 40, &g), 0);
	assert_int_equal(wide(RC_DETECTOR_FLAT, 24, 12, 0.3, 40, &gf), 0);
	/* the same view matrices (geometry.h), other matrices: other keys */
	assert_memory_equal(rc_geom_view(g, 5)->A, rc_geom_view(gf, 5)->A, sizeof rc_geom_view(g, 5)->A);
	assert_true(rc_dd_geom_hash(g) != rc_dd_geom_hash(gf));
	rc_geom_free(g);
	rc_geom_free(gf);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* The flat matrices' FNV-1a over row_ptr, col and val, as commit 4b4bd61
 * (before curved detectors) built them (its dd_matrix.c and geometry.c
 * compiled with this checksum, release and ASan flags alike). */
static void test_flat_unchanged(void **state)
{
	(void)state;
	const struct {
		rc_geom_type t;
		double off;
		long long nnz;
		uint64_t hash;
	} c[] = {
		{ RC_GEOM_FAN, 0, 107228, 0x07eca69ba4789b43ULL },
		{ RC_GEOM_FAN, 2.3, 105184, 0xb8440e53552a1b75ULL },
		{ RC_GEOM_PARALLEL, -1.1, 107348, 0x284c58d2760d0803ULL },
	};
	for (int i = 0; i < 3; i++) {
		rc_geom *g;
		rc_csr *m;
		rc_err err;
		assert_int_equal(tp_geom(c[i].t, 40, 1.0, 36, 60, 1, c[i].off, &g), 0);
		assert_int_equal(rc_dd_build(g, 2, &m, &err), 0);
		uint64_t h = 1469598103934665603ULL;
		h = fnv(h, m->row_ptr, sizeof *m->row_ptr * ((size_t)m->rows + 1));
		h = fnv(h, m->col, sizeof *m->col * (size_t)m->nnz);
		h = fnv(h, m->val, sizeof *m->val * (size_t)m->nnz);
		assert_int_equal(m->nnz, c[i].nnz);
		assert_true(h == c[i].hash);
		rc_csr_free(m);
		rc_geom_free(g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plane_u_pixel_centres), cmocka_unit_test(test_plane_u_flat_and_parallel),
		cmocka_unit_test(test_refusals),	      cmocka_unit_test(test_phantom_ball),
		cmocka_unit_test(test_dd_analytic),	      cmocka_unit_test(test_dd_adjoint),
		cmocka_unit_test(test_symmetric),	      cmocka_unit_test(test_cache_key),
		cmocka_unit_test(test_flat_unchanged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
