/*
 * The pieces of regularisation and stopping, each against an independent
 * reference: the TV operator of tv_host.h against finite differences of
 * the TV value computed in double, its symmetry (<L a, b> = <a, L b>, the
 * adjoint test of a self-adjoint operator), its null space and the
 * planar case's independence of slices; the noise estimate of noise.h
 * against the variance of the noise actually added; and the backend's
 * view-ranged ratio (MLEM's per-subset p / A x) against a plain loop.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/algo.h"
#include "algo/noise.h"
#include "backend/backend.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/tv_host.h"
#include "geometry/geometry.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static double grand(void)
{
	double u = urand(), v = urand();
	return sqrt(-2.0 * log(u > 1e-300 ? u : 1e-300)) * cos(2.0 * M_PI * v);
}

/* A piecewise-smooth test volume: a ramp, a step and some noise. */
static void fill_volume(float *x, int nx, int ny, int nz)
{
	for (int z = 0; z < nz; z++)
		for (int y = 0; y < ny; y++)
			for (int i = 0; i < nx; i++)
				x[((size_t)z * ny + y) * nx + i] =
					(float)(0.05 * i + (y > ny / 2 ? 1.0 : 0.0) + 0.2 * urand());
}

static double dotd(const float *a, const float *b, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* D^T W(w) D d written from its definition in double: g = W(w) (D d) per
 * voxel and axis (forward differences, 0 across the far border and, planar,
 * in z), then out_i = sum over axes of g(i - e) - g(i). */
static void tv_reference(const rc_tv_shape *s, const float *w, const float *d, double eps, double *out)
{
	const int n[3] = { s->nx, s->ny, s->nz };
	const size_t st[3] = { 1, (size_t)s->nx, (size_t)s->nx * s->ny }, nv = st[2] * s->nz;
	double *g = calloc(3 * nv, sizeof *g);
	assert_non_null(g);
	for (int z = 0; z < s->nz; z++)
		for (int y = 0; y < s->ny; y++)
			for (int x = 0; x < s->nx; x++) {
				const int p[3] = { x, y, z };
				size_t i = z * st[2] + y * st[1] + x;
				double dw[3], dd[3], q = eps * eps;
				for (int a = 0; a < 3; a++) {
					int on = p[a] + 1 < n[a] && !(a == 2 && s->planar);
					dw[a] = on ? (double)w[i + st[a]] - w[i] : 0.0;
					dd[a] = on ? (double)d[i + st[a]] - d[i] : 0.0;
					q += dw[a] * dw[a];
				}
				for (int a = 0; a < 3; a++)
					g[3 * i + a] = dd[a] / sqrt(q);
			}
	for (int z = 0; z < s->nz; z++)
		for (int y = 0; y < s->ny; y++)
			for (int x = 0; x < s->nx; x++) {
				const int p[3] = { x, y, z };
				size_t i = z * st[2] + y * st[1] + x;
				double o = 0.0;
				for (int a = 0; a < 3; a++)
					o += (p[a] > 0 ? g[3 * (i - st[a]) + a] : 0.0) - g[3 * i + a];
				out[i] = o;
			}
	free(g);
}

/* rc_tv_apply (slice weights, peeled borders, threads) against the
 * definition, on shapes with every border case: one voxel wide on an axis,
 * odd sizes, planar stacks. */
static void test_tv_reference(void **state)
{
	(void)state;
	static const rc_tv_shape shapes[] = { { 17, 13, 9, 0 }, { 1, 12, 7, 0 }, { 15, 1, 6, 0 }, { 14, 11, 1, 0 },
					      { 2, 2, 2, 0 },  { 19, 10, 5, 1 }, { 1, 1, 4, 0 } };
	for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
		const rc_tv_shape *s = &shapes[k];
		size_t n = (size_t)s->nx * s->ny * s->nz;
		float *w = malloc(n * sizeof *w), *d = malloc(n * sizeof *d), *o = malloc(n * sizeof *o);
		double *ref = malloc(n * sizeof *ref), top = 0.0, worst = 0.0;
		assert_true(w && d && o && ref);
		fill_volume(w, s->nx, s->ny, s->nz);
		for (size_t i = 0; i < n; i++)
			d[i] = (float)grand();
		for (int threads = 1; threads <= 3; threads += 2) {
			assert_int_equal(rc_tv_apply(s, w, d, o, 0.05f, threads, NULL), 0);
			tv_reference(s, w, d, 0.05, ref);
			for (size_t i = 0; i < n; i++) {
				top = fmax(top, fabs(ref[i]));
				worst = fmax(worst, fabs(o[i] - ref[i]));
			}
		}
		print_message("tv %dx%dx%d%s: max |L d - reference| %.3g of %.3g\n", s->nx, s->ny, s->nz,
			      s->planar ? " planar" : "", worst, top);
		assert_true(top > 0.0);
		assert_true(worst <= 1e-5 * top);
		free(w);
		free(d);
		free(o);
		free(ref);
	}
}

/* grad TV(x) = L(x) x against central differences of TV in double. */
static void test_tv_gradient(void **state)
{
	(void)state;
	for (int planar = 0; planar < 2; planar++) {
		rc_tv_shape s = { .nx = 9, .ny = 8, .nz = 7, .planar = planar };
		size_t n = 9 * 8 * 7;
		float *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
		assert_non_null(x);
		assert_non_null(g);
		fill_volume(x, s.nx, s.ny, s.nz);
		const float eps = 0.3f;
		assert_int_equal(rc_tv_apply(&s, x, x, g, eps, 0, NULL), 0);
		double worst = 0.0;
		for (size_t i = 0; i < n; i += 7) {
			const float h = 4e-3f;
			float keep = x[i];
			x[i] = keep + h;
			double tp = rc_tv_value(&s, x, eps);
			x[i] = keep - h;
			double tm = rc_tv_value(&s, x, eps);
			x[i] = keep;
			double fd = (tp - tm) / (2.0 * ((double)(keep + h) - keep));
			double d = fabs(fd - g[i]) / (fabs(fd) > 0.1 ? fabs(fd) : 0.1);
			worst = d > worst ? d : worst;
		}
		print_message("%s TV gradient vs central differences: worst relative difference %.2g\n",
			      planar ? "2-D" : "3-D", worst);
		assert_true(worst < 5e-3);
		free(g);
		free(x);
	}
}

/* L(w) = D^T W(w) D is symmetric, annihilates constants, and in the
 * planar case does not couple slices. */
static void test_tv_operator(void **state)
{
	(void)state;
	for (int planar = 0; planar < 2; planar++) {
		rc_tv_shape s = { .nx = 11, .ny = 6, .nz = 5, .planar = planar };
		size_t n = 11 * 6 * 5;
		float *w = malloc(n * sizeof *w), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
		float *la = malloc(n * sizeof *la), *lb = malloc(n * sizeof *lb);
		assert_true(w && a && b && la && lb);
		fill_volume(w, s.nx, s.ny, s.nz);
		for (size_t i = 0; i < n; i++) {
			a[i] = (float)grand();
			b[i] = (float)grand();
		}
		assert_int_equal(rc_tv_apply(&s, w, a, la, 0.05f, 0, NULL), 0);
		assert_int_equal(rc_tv_apply(&s, w, b, lb, 0.05f, 0, NULL), 0);
		double ab = dotd(la, b, n), ba = dotd(a, lb, n);
		print_message("%s <L a, b> = %.9g, <a, L b> = %.9g\n", planar ? "2-D" : "3-D", ab, ba);
		assert_true(fabs(ab - ba) <= 1e-5 * fabs(ab));
		assert_true(dotd(la, a, n) > 0.0); /* positive semi-definite, and not 0 here */
		for (size_t i = 0; i < n; i++)
			a[i] = 3.5f;
		assert_int_equal(rc_tv_apply(&s, w, a, la, 0.05f, 0, NULL), 0);
		for (size_t i = 0; i < n; i++)
			assert_true(la[i] == 0.0f);
		/* a single slice of d: in 2-D nothing leaves it, in 3-D its
		 * neighbours see it */
		memset(a, 0, n * sizeof *a);
		size_t sl = (size_t)s.nx * s.ny;
		for (size_t i = 2 * sl; i < 3 * sl; i++)
			a[i] = (float)grand();
		assert_int_equal(rc_tv_apply(&s, w, a, la, 0.05f, 0, NULL), 0);
		double outside = 0.0;
		for (size_t i = 0; i < n; i++)
			if (i < 2 * sl || i >= 3 * sl)
				outside += fabs(la[i]);
		assert_true(planar ? outside == 0.0 : outside > 0.0);
		free(lb);
		free(la);
		free(b);
		free(a);
		free(w);
	}
}

/* Rows of a smooth signal with an edge, plus white noise whose standard
 * deviation differs from row to row: the estimate of the summed variance
 * lands within 15 % of what was added (the signal's own curvature adds a
 * little: the estimate errs high, which stops a run early rather than
 * late); without noise it is far below. */
static void test_noise_energy(void **state)
{
	(void)state;
	const int nu = 256, rows = 400;
	size_t n = (size_t)nu * rows;
	float *p = malloc(n * sizeof *p);
	assert_non_null(p);
	double added = 0.0;
	for (int r = 0; r < 2; r++) {
		added = 0.0;
		for (int j = 0; j < rows; j++) {
			double sigma = r ? 0.002 + 0.03 * j / rows : 0.0;
			for (int i = 0; i < nu; i++) {
				double t = (i - nu / 2.0) / (nu / 2.0);
				double v = t * t < 0.8 ? 3.0 * sqrt(0.8 - t * t) : 0.0; /* a disc's chord */
				v += i > nu / 3 && i < nu / 2 ? 0.5 : 0.0;           /* and a step */
				p[(size_t)j * nu + i] = (float)(v + sigma * grand());
			}
			added += nu * sigma * sigma;
		}
		double est = rc_noise_energy(p, n, nu, 0);
		/* the relative noise of the default TV weight (fourth
		 * differences): the same within 15 %, and on the noise-free
		 * rows below the second differences' estimate */
		double pp = 0.0;
		for (size_t i = 0; i < n; i++)
			pp += (double)p[i] * p[i];
		double rel = rc_noise_relative(p, n, nu, 0.0, 0), rel2 = sqrt(est / pp);
		print_message("noise energy: added %.4g, estimated %.4g; relative noise: added %.4g, estimated %.4g "
			      "(second differences %.4g)\n", added, est, sqrt(added / pp), rel, rel2);
		assert_true(fabs(rc_noise_relative(p, n, nu, 0.01, 0) - 0.01 * sqrt((double)n / pp)) <
			    1e-9 * sqrt((double)n / pp));
		if (r) {
			assert_true(fabs(est - added) < 0.15 * added);
			assert_true(fabs(rel - sqrt(added / pp)) < 0.15 * sqrt(added / pp));
		} else {
			assert_true(est < 1e-2); /* against about 38 added below */
			assert_true(rel < 0.5 * rel2);
		}
	}
	free(p);
}

/* The default TV weight (algo.h's rc_tv_weight): in proportion to the
 * relative noise between RC_TV_MIN_NOISE and RC_TV_REF_NOISE, the default
 * at and above it; a weight given, or FDK, as it is. */
static void test_tv_default_weight(void **state)
{
	(void)state;
	const int nu = 64, rows = 10;
	const size_t n = (size_t)nu * rows;
	float p[64 * 10];
	for (size_t i = 0; i < n; i++)
		p[i] = 2.0f; /* RMS 2: rel = sigma / 2 */
	rc_algo_params a;
	rc_algo_params_default(&a, RC_ALGO_SART);
	const double w = RC_TV_DEFAULT_WEIGHT;
	static const double sig[] = { 1e-6, 0.5 * RC_TV_MIN_NOISE, 2 * RC_TV_MIN_NOISE, 0.5 * RC_TV_REF_NOISE,
				      2 * RC_TV_REF_NOISE, 0.5 * RC_TV_REF_NOISE };
	for (int k = 0; k < 6; k++) {
		double rel = sig[k];
		double want = rel < RC_TV_MIN_NOISE ? RC_TV_MIN_NOISE : rel > RC_TV_REF_NOISE ? RC_TV_REF_NOISE : rel;
		a.noise_sigma = 2.0 * rel;
		a.tv_auto = k < 5;
		want = a.tv_auto ? w * want / RC_TV_REF_NOISE : w;
		assert_true(fabs(rc_tv_weight(&a, p, n, nu) - want) < 1e-12 * w);
	}
	/* estimated: noise-free constant rows read no noise, so the floor */
	a.tv_auto = 1;
	a.noise_sigma = 0.0;
	assert_true(fabs(rc_tv_weight(&a, p, n, nu) - w * RC_TV_MIN_NOISE / RC_TV_REF_NOISE) < 1e-12 * w);
	rc_algo_params_default(&a, RC_ALGO_FDK);
	assert_true(rc_tv_weight(&a, p, n, nu) == 0.0);
}

/* The ratio over a view range touches those views only and sums them. */
static void test_ratio_range(void **state)
{
	(void)state;
	double angles[12];
	for (int k = 0; k < 12; k++)
		angles[k] = 30.0 * k;
	rc_volume_desc vol = { .nx = 8, .ny = 8, .nz = 8, .vx = 1, .vy = 1, .vz = 1 };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = 12, .det = { .nu = 12, .nv = 10, .du = 1.5, .dv = 1.5 },
			    .source_isocenter_mm = 100, .source_detector_mm = 150, .angles_deg = angles };
	rc_geom *g = NULL;
	rc_err err;
	assert_int_equal(rc_geom_new(&sp, &vol, NULL, &g, &err), 0);
	rc_engine *e = NULL;
	rc_exec *x = NULL;
	rc_backend *b = NULL;
	assert_int_equal(rc_engine_cpu_new(g, 1, &e, &err), 0);
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	assert_int_equal(rc_backend_host_new(x, &b, &err), 0);
	size_t np = rc_geom_proj_count(g), view = rc_geom_view_count(g);
	float *y = malloc(np * sizeof *y), *p = malloc(np * sizeof *p), *out = malloc(np * sizeof *out);
	assert_true(y && p && out);
	for (size_t i = 0; i < np; i++) {
		y[i] = (float)(urand() < 0.1 ? 0.0 : 0.5 + urand());
		p[i] = (float)(urand() - 0.2);
	}
	rc_vec *vy = NULL, *vp = NULL;
	assert_int_equal(rc_bk_vec_from(b, RC_SPACE_PROJ, p, &vp, &err), 0);
	assert_int_equal(rc_bk_vec_new(b, RC_SPACE_PROJ, &vy, &err), 0);
	assert_int_equal(rc_bk_upload(b, vy, y, &err), 0);
	double s2 = -1.0;
	assert_int_equal(rc_bk_ratio(b, vy, vp, 1e-6f, 3, 7, &s2, &err), 0);
	assert_int_equal(rc_bk_download(b, vy, out, &err), 0);
	double want = 0.0;
	for (size_t i = 0; i < np; i++) {
		int in = i >= 3 * view && i < 7 * view;
		if (in) {
			double d = (double)p[i] - y[i];
			want += d * d;
			float r = y[i] > 1e-6f ? (p[i] > 0.0f ? p[i] : 0.0f) / y[i] : 0.0f;
			assert_true(out[i] == r);
		} else {
			assert_true(out[i] == y[i]);
		}
	}
	assert_true(fabs(s2 - want) <= 1e-6 * want);
	rc_bk_vec_free(b, vy);
	rc_bk_vec_free(b, vp);
	free(out);
	free(p);
	free(y);
	rc_backend_free(b);
	rc_exec_free(x);
	rc_engine_free(e);
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tv_reference),
		cmocka_unit_test(test_tv_gradient),
		cmocka_unit_test(test_tv_operator),
		cmocka_unit_test(test_noise_energy),
		cmocka_unit_test(test_tv_default_weight),
		cmocka_unit_test(test_ratio_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
