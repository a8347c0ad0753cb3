/* test_geometry: the matrices of every geometry type against points projected
 * here with API.md's formulas (written out independently: source, detector
 * centre, e_u, e_v and a ray-plane intersection), the matrices type fed with
 * cone matrices, rays through pixel centres, the stack layout, and every
 * invalid geometry rejected with a message that names its field. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "geometry/geometry.h"
#include "geometry/phantom.h"

static double urand(unsigned *s, double lo, double hi)
{
	*s = *s * 1103515245u + 12345u;
	return lo + (hi - lo) * ((*s >> 8) & 0xffffff) / (double)0x1000000;
}

static double dot(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

/* API.md, cone view at theta: source, detector centre and axes. */
struct frame {
	double s[3], d[3], eu[3], ev[3];
};

static struct frame api_frame(double D, double S, double th_deg)
{
	double t = th_deg * M_PI / 180, c = cos(t), s = sin(t);
	return (struct frame){ { D * c, D * s, 0 }, { -(S - D) * c, -(S - D) * s, 0 }, { -s, c, 0 }, { 0, 0, 1 } };
}

/* Continuous pixel indices of world point X: intersect the line s -> X with
 * the detector plane through d, normal to d - s. */
static void api_project(const struct frame *f, const rc_detector_desc *det, const double X[3],
			double *i, double *j, double *depth)
{
	double n[3] = { f->d[0] - f->s[0], f->d[1] - f->s[1], f->d[2] - f->s[2] };
	double nn = sqrt(dot(n, n));
	for (int a = 0; a < 3; a++)
		n[a] /= nn;
	double r[3] = { X[0] - f->s[0], X[1] - f->s[1], X[2] - f->s[2] };
	double ds[3] = { f->d[0] - f->s[0], f->d[1] - f->s[1], f->d[2] - f->s[2] };
	double t = dot(ds, n) / dot(r, n);
	double hit[3] = { f->s[0] + t * r[0] - f->d[0], f->s[1] + t * r[1] - f->d[1], f->s[2] + t * r[2] - f->d[2] };
	*i = (dot(hit, f->eu) - det->offset_u) / det->du + (det->nu - 1) / 2.0;
	*j = (dot(hit, f->ev) - det->offset_v) / det->dv + (det->nv - 1) / 2.0;
	*depth = dot(r, n);
}

static void api_pixel(const struct frame *f, const rc_detector_desc *det, double i, double j, double pos[3])
{
	double um = (i - (det->nu - 1) / 2.0) * det->du + det->offset_u;
	double vm = (j - (det->nv - 1) / 2.0) * det->dv + det->offset_v;
	for (int a = 0; a < 3; a++)
		pos[a] = f->d[a] + um * f->eu[a] + vm * f->ev[a];
}

static double line_dist(const double o[3], const double dir[3], const double p[3])
{
	double w[3] = { p[0] - o[0], p[1] - o[1], p[2] - o[2] };
	double t = dot(w, dir) / dot(dir, dir);
	double r[3] = { w[0] - t * dir[0], w[1] - t * dir[1], w[2] - t * dir[2] };
	return sqrt(dot(r, r));
}

struct cone_case {
	double D, S;
	rc_detector_desc det;
	double start, step;
	rc_volume_desc vol;
};

static const struct cone_case cone_cases[] = {
	{ 1000, 1500, { 256, 200, 1.0, 1.0, 0, 0, RC_DETECTOR_FLAT }, 0, 1.7142857, { 128, 128, 128, 0.5, 0.5, 0.5, 0, 0, 0 } },
	{ 750, 1200, { 97, 64, 0.8, 1.3, 12.5, -7.25, RC_DETECTOR_FLAT }, 17, 23.5, { 40, 30, 20, 1.1, 0.9, 1.7, 2, -3, 5 } },
	{ 300, 310, { 64, 65, 0.05, 0.07, 0.3, 0.1, RC_DETECTOR_FLAT }, -90, 37, { 16, 16, 16, 0.1, 0.1, 0.1, 0, 0, 0 } },
	{ 500, 900, { 48, 32, 2.0, 0.5, -20, 3, RC_DETECTOR_FLAT }, 181, -11, { 24, 24, 24, 1, 1, 1, 0, 0, 0 } },
};

static double *angles(double start, double step, int n)
{
	double *a = malloc((size_t)n * sizeof *a);
	for (int k = 0; k < n; k++)
		a[k] = start + k * step;
	return a;
}

static void test_cone_matrices(void **state)
{
	(void)state;
	unsigned seed = 3;
	for (size_t c = 0; c < sizeof cone_cases / sizeof cone_cases[0]; c++) {
		const struct cone_case *cc = &cone_cases[c];
		const int nv = 12;
		double *ang = angles(cc->start, cc->step, nv);
		rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = nv, .det = cc->det,
				    .source_isocenter_mm = cc->D, .source_detector_mm = cc->S, .angles_deg = ang };
		rc_geom *g;
		rc_err err;
		assert_int_equal(rc_geom_new(&sp, &cc->vol, NULL, &g, &err), 0);
		assert_int_equal(rc_geom_nviews(g), nv);
		assert_int_equal(rc_geom_view_count(g), (size_t)cc->det.nu * cc->det.nv);
		assert_int_equal(rc_geom_proj_count(g), (size_t)nv * cc->det.nu * cc->det.nv);
		assert_int_equal(rc_geom_row_offset(g, 3, 5), ((size_t)3 * cc->det.nv + 5) * cc->det.nu);
		assert_float_equal(rc_geom_sid(g), cc->D, 0);
		assert_float_equal(rc_geom_sdd(g), cc->S, 0);
		double ext = fmax(cc->vol.nx * cc->vol.vx, fmax(cc->vol.ny * cc->vol.vy, cc->vol.nz * cc->vol.vz));
		for (int k = 0; k < nv; k++) {
			struct frame f = api_frame(cc->D, cc->S, ang[k]);
			const rc_view *vw = rc_geom_view(g, k);
			for (int a = 0; a < 3; a++)
				assert_float_equal(vw->src[a], f.s[a], 1e-9 * cc->D);
			/* normalisation: third row a unit vector */
			assert_float_equal(dot(&vw->P[8], &vw->P[8]), 1.0, 1e-12);
			for (int n = 0; n < 50; n++) {
				double X[3] = { urand(&seed, -ext, ext) / 2 + cc->vol.cx, urand(&seed, -ext, ext) / 2 + cc->vol.cy,
						urand(&seed, -ext, ext) / 2 + cc->vol.cz };
				double wi, wj, wd, u, v, w;
				api_project(&f, &cc->det, X, &wi, &wj, &wd);
				rc_view_project(vw, X, &u, &v, &w);
				assert_float_equal(u, wi, 1e-8);
				assert_float_equal(v, wj, 1e-8);
				assert_float_equal(w, wd, 1e-9 * cc->D); /* w is the depth in mm */
			}
			/* pixel centres project to integer indices, and rc_geom_pixel_pos is API.md's */
			for (int n = 0; n < 10; n++) {
				int i = (int)urand(&seed, 0, cc->det.nu), j = (int)urand(&seed, 0, cc->det.nv);
				double want[3], got[3], u, v, w;
				api_pixel(&f, &cc->det, i, j, want);
				assert_int_equal(rc_geom_pixel_pos(g, k, i, j, got), 0);
				for (int a = 0; a < 3; a++)
					assert_float_equal(got[a], want[a], 1e-9 * cc->S);
				rc_view_project(vw, want, &u, &v, &w);
				assert_float_equal(u, i, 1e-8);
				assert_float_equal(v, j, 1e-8);
				assert_float_equal(w, cc->S, 1e-9 * cc->S);
				/* the ray of pixel (i, j) starts at the source and passes through its centre */
				double o[3], dir[3];
				rc_geom_ray(g, k, i, j, 0, o, dir);
				assert_float_equal(dot(dir, dir), 1.0, 1e-12);
				for (int a = 0; a < 3; a++)
					assert_float_equal(o[a], f.s[a], 1e-9 * cc->D);
				assert_true(line_dist(o, dir, want) < 1e-8 * cc->S);
				double to[3] = { want[0] - o[0], want[1] - o[1], want[2] - o[2] };
				assert_true(dot(to, dir) > 0);
			}
		}
		rc_geom_free(g);
		free(ang);
	}
}

/* Cone matrices fed back as a matrices spec, each multiplied by a different
 * factor (negative too): the same normalised P, sources and projections. */
static void test_matrices_round_trip(void **state)
{
	(void)state;
	const struct cone_case *cc = &cone_cases[1];
	const int nv = 9;
	double *ang = angles(cc->start, cc->step, nv);
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = nv, .det = cc->det,
			    .source_isocenter_mm = cc->D, .source_detector_mm = cc->S, .angles_deg = ang };
	rc_geom *g, *gm;
	assert_int_equal(rc_geom_new(&sp, &cc->vol, NULL, &g, NULL), 0);
	double *m = malloc((size_t)nv * 12 * sizeof *m);
	for (int k = 0; k < nv; k++) {
		double f = (k % 2 ? -1.0 : 1.0) * (0.01 + 3.7 * k);
		for (int i = 0; i < 12; i++)
			m[12 * k + i] = f * rc_geom_view(g, k)->P[i];
	}
	rc_geom_spec ms = { .type = RC_GEOM_MATRICES, .nviews = nv, .det = { cc->det.nu, cc->det.nv, 0, 0, 0, 0 },
			    .matrices = m };
	rc_err err;
	assert_int_equal(rc_geom_new(&ms, &cc->vol, NULL, &gm, &err), 0);
	assert_int_equal(rc_geom_type_of(gm), RC_GEOM_MATRICES);
	assert_int_equal(rc_geom_proj_count(gm), rc_geom_proj_count(g));
	for (int k = 0; k < nv; k++) {
		const rc_view *a = rc_geom_view(g, k), *b = rc_geom_view(gm, k);
		for (int i = 0; i < 12; i++)
			assert_float_equal(b->P[i], a->P[i], 1e-9 * (1 + fabs(a->P[i])));
		for (int i = 0; i < 3; i++)
			assert_float_equal(b->src[i], a->src[i], 1e-7);
		assert_float_equal(b->angle_rad, atan2(sin(a->angle_rad), cos(a->angle_rad)), 1e-9);
		/* rays of the same pixel agree */
		double o1[3], d1[3], o2[3], d2[3];
		rc_geom_ray(g, k, 3.25, 17.5, 0, o1, d1);
		rc_geom_ray(gm, k, 3.25, 17.5, 0, o2, d2);
		for (int i = 0; i < 3; i++) {
			assert_float_equal(o2[i], o1[i], 1e-7);
			assert_float_equal(d2[i], d1[i], 1e-10);
		}
	}
	double pos[3];
	assert_int_equal(rc_geom_pixel_pos(gm, 0, 0, 0, pos), RC_EUNSUPPORTED);
	/* analytic projections of a ball inside the volume: identical stacks */
	rc_phantom *p;
	assert_int_equal(rc_phantom_ball((double[]){ 3, -4, 6 }, 7, 0.04, &p, NULL), 0);
	float *a = malloc(rc_geom_proj_count(g) * sizeof *a), *b = malloc(rc_geom_proj_count(g) * sizeof *b);
	assert_int_equal(rc_phantom_project(p, g, 0, a, NULL), 0);
	assert_int_equal(rc_phantom_project(p, gm, 0, b, NULL), 0);
	double maxa = 0;
	for (size_t i = 0; i < rc_geom_proj_count(g); i++) {
		assert_float_equal(b[i], a[i], 1e-5);
		maxa = fmax(maxa, a[i]);
	}
	assert_true(maxa > 0.5);
	free(a);
	free(b);
	rc_phantom_free(p);
	rc_geom_free(gm);
	rc_geom_free(g);
	free(m);
	free(ang);
}

static void test_fan_parallel(void **state)
{
	(void)state;
	unsigned seed = 11;
	const double D = 600, S = 1000;
	rc_volume_desc vol = { 50, 40, 6, 0.8, 0.9, 2.5, 1.5, -2, 3 };
	for (int type = RC_GEOM_FAN; type <= RC_GEOM_PARALLEL; type++) {
		const int nv = 10;
		double *ang = angles(-33, 41.5, nv);
		rc_geom_spec sp = { .type = (rc_geom_type)type, .nviews = nv, .det = { 81, 0, 0.7, 0, -3.3, 0 },
				    .source_isocenter_mm = D, .source_detector_mm = S, .angles_deg = ang };
		rc_geom *g;
		rc_err err;
		assert_int_equal(rc_geom_new(&sp, &vol, NULL, &g, &err), 0);
		assert_true(rc_geom_is_2d(g));
		assert_int_equal(rc_geom_view_count(g), (size_t)81 * 6);
		assert_int_equal(rc_geom_proj_count(g), (size_t)81 * 6 * nv);
		/* [slice][view][u] */
		assert_int_equal(rc_geom_view_stride(g), 81);
		assert_int_equal(rc_geom_row_stride(g), (size_t)81 * nv);
		assert_int_equal(rc_geom_row_offset(g, 4, 2), ((size_t)2 * nv + 4) * 81);
		for (int k = 0; k < nv; k++) {
			const rc_view *vw = rc_geom_view(g, k);
			struct frame f = api_frame(D, S, ang[k]);
			rc_detector_desc det = sp.det;
			det.nv = 1;
			det.dv = 1;
			for (int n = 0; n < 40; n++) {
				double X[3] = { urand(&seed, -20, 20) + vol.cx, urand(&seed, -18, 18) + vol.cy, 0 };
				double A0 = vw->A[0] * X[0] + vw->A[1] * X[1] + vw->A[2];
				double w = vw->A[3] * X[0] + vw->A[4] * X[1] + vw->A[5];
				double wi, wj, wd;
				if (type == RC_GEOM_FAN) {
					api_project(&f, &det, X, &wi, &wj, &wd);
					assert_float_equal(w, wd, 1e-9 * D);
				} else {
					wi = (dot(X, f.eu) - det.offset_u) / det.du + (det.nu - 1) / 2.0;
					assert_float_equal(w, 1.0, 0);
				}
				assert_float_equal(A0 / w, wi, 1e-8);
			}
			/* the ray of pixel i in slice iz passes through that pixel's point in the slice plane */
			for (int n = 0; n < 10; n++) {
				double i = urand(&seed, 0, 80);
				int iz = (int)urand(&seed, 0, 6);
				double z = (iz - 2.5) * 2.5 + 3, o[3], dir[3];
				rc_geom_ray(g, k, i, 0, iz, o, dir);
				assert_float_equal(dot(dir, dir), 1.0, 1e-12);
				assert_float_equal(o[2], z, 1e-12);
				assert_float_equal(dir[2], 0, 0);
				double um = (i - 40) * 0.7 - 3.3;
				if (type == RC_GEOM_FAN) {
					double pix[3] = { f.d[0] + um * f.eu[0], f.d[1] + um * f.eu[1], z };
					assert_float_equal(o[0], f.s[0], 1e-9 * D);
					assert_float_equal(o[1], f.s[1], 1e-9 * D);
					assert_true(line_dist(o, dir, pix) < 1e-8 * S);
					double to[3] = { pix[0] - o[0], pix[1] - o[1], 0 };
					assert_true(dot(to, dir) > 0);
				} else {
					double pt[3] = { um * f.eu[0], um * f.eu[1], z };
					double want_dir[3] = { -f.s[0] / D, -f.s[1] / D, 0 };
					assert_true(line_dist(o, dir, pt) < 1e-9);
					for (int a = 0; a < 3; a++)
						assert_float_equal(dir[a], want_dir[a], 1e-12);
					/* the origin lies behind the whole volume */
					double back[3] = { vol.cx - o[0], vol.cy - o[1], 0 };
					assert_true(dot(back, dir) > 40);
				}
			}
		}
		rc_geom_free(g);
		free(ang);
	}
}

/* --- invalid geometries -------------------------------------------------- */

struct setup {
	rc_geom_spec sp;
	rc_volume_desc vol;
	rc_limits lim;
	double ang[8];
	double mat[8 * 12];
};

static void base_cone(struct setup *s)
{
	memset(s, 0, sizeof *s);
	for (int k = 0; k < 8; k++)
		s->ang[k] = 45.0 * k;
	s->sp = (rc_geom_spec){ .type = RC_GEOM_CONE, .nviews = 8, .det = { 64, 48, 1.0, 1.0, 0, 0 },
				.source_isocenter_mm = 1000, .source_detector_mm = 1500, .angles_deg = s->ang };
	s->vol = (rc_volume_desc){ 32, 32, 32, 1, 1, 1, 0, 0, 0 };
}

static void base_matrices(struct setup *s)
{
	base_cone(s);
	rc_geom *g;
	assert_int_equal(rc_geom_new(&s->sp, &s->vol, NULL, &g, NULL), 0);
	for (int k = 0; k < 8; k++)
		memcpy(&s->mat[12 * k], rc_geom_view(g, k)->P, 12 * sizeof(double));
	rc_geom_free(g);
	s->sp.type = RC_GEOM_MATRICES;
	s->sp.angles_deg = NULL;
	s->sp.matrices = s->mat;
}

static void base_fan(struct setup *s)
{
	base_cone(s);
	s->sp.type = RC_GEOM_FAN;
	s->sp.det.nv = 0;
}

static void base_parallel(struct setup *s)
{
	base_fan(s);
	s->sp.type = RC_GEOM_PARALLEL;
}

struct bad {
	const char *what;
	void (*base)(struct setup *);
	int code;
	const char *field;
	void (*mutate)(struct setup *);
};

/* Mutators: one statement each, named by what they break. */
#define M(name, stmt) static void name(struct setup *s) { stmt; }
M(type_bad, s->sp.type = (rc_geom_type)17)
M(views_zero, s->sp.nviews = 0)
M(views_neg, s->sp.nviews = -3)
M(views_huge, s->sp.nviews = 2000000)
M(nx_zero, s->vol.nx = 0)
M(ny_neg, s->vol.ny = -1)
M(nz_big, s->vol.nz = 65537)
M(vx_zero, s->vol.vx = 0)
M(vy_neg, s->vol.vy = -0.5)
M(vz_nan, s->vol.vz = NAN)
M(vx_inf, s->vol.vx = INFINITY)
M(cx_nan, s->vol.cx = NAN)
M(cy_inf, s->vol.cy = -INFINITY)
M(cz_nan, s->vol.cz = NAN)
M(nu_zero, s->sp.det.nu = 0)
M(nu_big, s->sp.det.nu = 70000)
M(nv_neg, s->sp.det.nv = -2)
M(du_zero, s->sp.det.du = 0)
M(du_neg, s->sp.det.du = -1)
M(du_nan, s->sp.det.du = NAN)
M(dv_inf, s->sp.det.dv = INFINITY)
M(dv_zero, s->sp.det.dv = 0)
M(offu_nan, s->sp.det.offset_u = NAN)
M(offu_inf, s->sp.det.offset_u = INFINITY)
M(offv_nan, s->sp.det.offset_v = NAN)
M(offv_inf, s->sp.det.offset_v = -INFINITY)
M(offu_huge, s->sp.det.offset_u = 1e5)
M(offv_huge, s->sp.det.offset_v = -1e5)
M(D_zero, s->sp.source_isocenter_mm = 0)
M(D_neg, s->sp.source_isocenter_mm = -5)
M(D_nan, s->sp.source_isocenter_mm = NAN)
M(D_inf, s->sp.source_isocenter_mm = INFINITY)
M(S_zero, s->sp.source_detector_mm = 0)
M(S_neg, s->sp.source_detector_mm = -1500)
M(S_nan, s->sp.source_detector_mm = NAN)
M(S_inf, s->sp.source_detector_mm = INFINITY)
M(S_eq_D, s->sp.source_detector_mm = 1000)
M(S_lt_D, s->sp.source_detector_mm = 900)
M(source_inside, { s->sp.source_isocenter_mm = 10; s->sp.source_detector_mm = 2000; })
M(detector_cuts, { s->sp.source_isocenter_mm = 100; s->sp.source_detector_mm = 110; })
M(angle_nan, s->ang[3] = NAN)
M(angle_inf, s->ang[7] = INFINITY)
M(angles_null, s->sp.angles_deg = NULL)
M(matrices_null, s->sp.matrices = NULL)
M(matrix_nan, s->mat[12 * 2 + 5] = NAN)
M(matrix_inf, s->mat[12 * 7 + 11] = -INFINITY)
M(matrix_singular, { for (int i = 0; i < 12; i++) s->mat[12 * 4 + i] = i < 4 ? 1 : 0; })
M(matrix_zero_row, { s->mat[12 * 1 + 8] = s->mat[12 * 1 + 9] = s->mat[12 * 1 + 10] = 0; })
M(matrix_source_inside, { s->mat[12 * 3 + 3] = s->mat[12 * 3 + 7] = s->mat[12 * 3 + 11] = 0; })
M(matrix_sees_none, { for (int i = 0; i < 4; i++) s->mat[12 * 5 + i] += 1e6 * s->mat[12 * 5 + 8 + i]; })
M(cap_exceeded, s->lim.max_bytes = 100000)
M(cap_barely, s->lim.max_bytes = 4ull * (32 * 32 * 32 + 8 * 64 * 48) - 1)
M(huge_stack_capped, { s->sp.det.nu = 65536; s->sp.det.nv = 65536; s->sp.det.du = s->sp.det.dv = 0.01;
	s->lim.max_bytes = 1ull << 36; })
M(fan_source_inside, { s->sp.source_isocenter_mm = 15; s->sp.source_detector_mm = 2000; })
M(fan_slices_cap, { s->vol.nz = 4096; s->lim.max_bytes = 4ull * (32 * 32 * 4096 + 8 * 64 * 4095); })
/* found by tests/fuzz/fuzz_geometry.c: a detector whose pixel scale S/du
 * vanishes next to its half-width in pixels had no inverse in doubles, and
 * its rays had direction 0/0 */
M(detector_too_wide, { s->sp.det.nu = 65536; s->sp.det.du = 1e6; })
M(pixels_huge, s->sp.det.du = s->sp.det.dv = 1e300)
M(pixels_subnormal, s->sp.det.du = 4.9406564584124654e-324)
M(detector_extent_inf, s->sp.det.du = 1e307)
M(volume_extent_inf, s->vol.vy = 1e307)
M(matrix_source_inf, { for (int i = 0; i < 7; i++) s->mat[12 * 3 + i] *= i == 3 ? 1 : 1e-6; s->mat[12 * 3 + 3] = 1e307; })
M(matrix_row_overflow, { s->mat[12 * 6 + 8] = 1e300; s->mat[12 * 6 + 9] = 1e300; })
M(fan_pixels_huge, { s->sp.det.du = 1e300; s->sp.source_isocenter_mm = 1e-300; s->sp.source_detector_mm = 500;
	s->vol.cx = 360; })
#undef M

static const struct bad bad_cases[] = {
	{ "type", base_cone, RC_EINVAL, "geometry.type", type_bad },
	{ "zero views", base_cone, RC_EINVAL, "geometry.angles.count", views_zero },
	{ "negative views", base_cone, RC_EINVAL, "geometry.angles.count", views_neg },
	{ "too many views", base_cone, RC_EINVAL, "geometry.angles.count", views_huge },
	{ "zero matrices", base_matrices, RC_EINVAL, "geometry.matrices", views_zero },
	{ "nx 0", base_cone, RC_EINVAL, "volume.nx", nx_zero },
	{ "ny -1", base_cone, RC_EINVAL, "volume.ny", ny_neg },
	{ "nz 65537", base_cone, RC_EINVAL, "volume.nz", nz_big },
	{ "vx 0", base_cone, RC_EINVAL, "volume.voxel_mm", vx_zero },
	{ "vy < 0", base_cone, RC_EINVAL, "volume.voxel_mm", vy_neg },
	{ "vz NaN", base_cone, RC_EINVAL, "volume.voxel_mm", vz_nan },
	{ "vx inf", base_cone, RC_EINVAL, "volume.voxel_mm", vx_inf },
	{ "cx NaN", base_cone, RC_EINVAL, "volume.center_mm[0]", cx_nan },
	{ "cy -inf", base_cone, RC_EINVAL, "volume.center_mm[1]", cy_inf },
	{ "cz NaN", base_cone, RC_EINVAL, "volume.center_mm[2]", cz_nan },
	{ "nu 0", base_cone, RC_EINVAL, "geometry.detector.nu", nu_zero },
	{ "nu 70000", base_cone, RC_EINVAL, "geometry.detector.nu", nu_big },
	{ "nv -2", base_cone, RC_EINVAL, "geometry.detector.nv", nv_neg },
	{ "matrices nv -2", base_matrices, RC_EINVAL, "geometry.detector.nv", nv_neg },
	{ "fan nu 0", base_fan, RC_EINVAL, "geometry.detector.nu", nu_zero },
	{ "du 0", base_cone, RC_EINVAL, "geometry.detector.du_mm", du_zero },
	{ "du < 0", base_cone, RC_EINVAL, "geometry.detector.du_mm", du_neg },
	{ "du NaN", base_cone, RC_EINVAL, "geometry.detector.du_mm", du_nan },
	{ "dv inf", base_cone, RC_EINVAL, "geometry.detector.dv_mm", dv_inf },
	{ "dv 0", base_cone, RC_EINVAL, "geometry.detector.dv_mm", dv_zero },
	{ "parallel du NaN", base_parallel, RC_EINVAL, "geometry.detector.du_mm", du_nan },
	{ "offset_u NaN", base_cone, RC_EINVAL, "geometry.detector.offset_u_mm", offu_nan },
	{ "offset_u inf", base_cone, RC_EINVAL, "geometry.detector.offset_u_mm", offu_inf },
	{ "offset_v NaN", base_cone, RC_EINVAL, "geometry.detector.offset_v_mm", offv_nan },
	{ "offset_v -inf", base_cone, RC_EINVAL, "geometry.detector.offset_v_mm", offv_inf },
	{ "fan offset_u NaN", base_fan, RC_EINVAL, "geometry.detector.offset_u_mm", offu_nan },
	{ "huge offset_u", base_cone, RC_EINVAL, "geometry.detector", offu_huge },
	{ "huge offset_v", base_cone, RC_EINVAL, "geometry.detector", offv_huge },
	{ "fan huge offset_u", base_fan, RC_EINVAL, "geometry.detector", offu_huge },
	{ "parallel huge offset_u", base_parallel, RC_EINVAL, "geometry.detector", offu_huge },
	{ "D 0", base_cone, RC_EINVAL, "geometry.source_isocenter_mm", D_zero },
	{ "D < 0", base_cone, RC_EINVAL, "geometry.source_isocenter_mm", D_neg },
	{ "D NaN", base_cone, RC_EINVAL, "geometry.source_isocenter_mm", D_nan },
	{ "D inf", base_cone, RC_EINVAL, "geometry.source_isocenter_mm", D_inf },
	{ "fan D NaN", base_fan, RC_EINVAL, "geometry.source_isocenter_mm", D_nan },
	{ "S 0", base_cone, RC_EINVAL, "geometry.source_detector_mm", S_zero },
	{ "S < 0", base_cone, RC_EINVAL, "geometry.source_detector_mm", S_neg },
	{ "S NaN", base_cone, RC_EINVAL, "geometry.source_detector_mm", S_nan },
	{ "S inf", base_cone, RC_EINVAL, "geometry.source_detector_mm", S_inf },
	{ "S == D", base_cone, RC_EINVAL, "geometry.source_detector_mm", S_eq_D },
	{ "S < D", base_cone, RC_EINVAL, "geometry.source_detector_mm", S_lt_D },
	{ "fan S < D", base_fan, RC_EINVAL, "geometry.source_detector_mm", S_lt_D },
	{ "source inside", base_cone, RC_EINVAL, "geometry.source_isocenter_mm", source_inside },
	{ "detector cuts volume", base_cone, RC_EINVAL, "geometry.source_detector_mm", detector_cuts },
	{ "fan source inside", base_fan, RC_EINVAL, "geometry.source_isocenter_mm", fan_source_inside },
	{ "angle NaN", base_cone, RC_EINVAL, "geometry.angles", angle_nan },
	{ "angle inf", base_cone, RC_EINVAL, "geometry.angles", angle_inf },
	{ "fan angle NaN", base_fan, RC_EINVAL, "geometry.angles", angle_nan },
	{ "parallel angle inf", base_parallel, RC_EINVAL, "geometry.angles", angle_inf },
	{ "no angles", base_cone, RC_EINVAL, "geometry.angles", angles_null },
	{ "no matrices", base_matrices, RC_EINVAL, "geometry.matrices", matrices_null },
	{ "matrix NaN", base_matrices, RC_EINVAL, "geometry.matrices", matrix_nan },
	{ "matrix inf", base_matrices, RC_EINVAL, "geometry.matrices", matrix_inf },
	{ "matrix singular", base_matrices, RC_EINVAL, "geometry.matrices", matrix_singular },
	{ "matrix zero third row", base_matrices, RC_EINVAL, "geometry.matrices", matrix_zero_row },
	{ "matrix source inside", base_matrices, RC_EINVAL, "geometry.matrices", matrix_source_inside },
	{ "matrix sees none", base_matrices, RC_EINVAL, "geometry.matrices", matrix_sees_none },
	{ "over the cap", base_cone, RC_ETOOBIG, "volume", cap_exceeded },
	{ "one byte over the cap", base_cone, RC_ETOOBIG, "volume", cap_barely },
	{ "128 GiB stack capped at 64 GiB", base_cone, RC_ETOOBIG, "volume", huge_stack_capped },
	{ "fan slices over the cap", base_fan, RC_ETOOBIG, "volume", fan_slices_cap },
	{ "detector numerically singular (65536 pixels of 1 km)", base_cone, RC_EINVAL, "geometry.detector",
	  detector_too_wide },
	{ "detector numerically singular (pixels of 1e300 mm)", base_cone, RC_EINVAL, "geometry.detector", pixels_huge },
	{ "fan detector numerically singular", base_fan, RC_EINVAL, "geometry.detector", fan_pixels_huge },
	{ "parallel pixels of 5e-324 mm", base_parallel, RC_EINVAL, "geometry.detector.du_mm", pixels_subnormal },
	{ "fan pixels of 5e-324 mm", base_fan, RC_EINVAL, "geometry.detector", pixels_subnormal },
	{ "cone pixels of 5e-324 mm", base_cone, RC_EINVAL, "geometry.detector", pixels_subnormal },
	{ "parallel detector wider than a double", base_parallel, RC_EINVAL, "geometry.detector", detector_extent_inf },
	{ "volume larger than a double", base_cone, RC_EINVAL, "volume.voxel_mm", volume_extent_inf },
	{ "matrix source past a double", base_matrices, RC_EINVAL, "geometry.matrices", matrix_source_inf },
	{ "matrix third row's norm past a double", base_matrices, RC_EINVAL, "geometry.matrices", matrix_row_overflow },
};

static void test_invalid_table(void **state)
{
	(void)state;
	for (size_t c = 0; c < sizeof bad_cases / sizeof bad_cases[0]; c++) {
		const struct bad *b = &bad_cases[c];
		struct setup s;
		b->base(&s);
		/* the base is valid */
		rc_geom *g = NULL;
		rc_err err;
		rc_err_clear(&err);
		int rc = rc_geom_new(&s.sp, &s.vol, &s.lim, &g, &err);
		if (rc)
			fail_msg("case '%s': its base geometry was rejected: %s", b->what, err.msg);
		rc_geom_free(g);
		g = NULL;
		b->mutate(&s);
		rc_err_clear(&err);
		rc = rc_geom_new(&s.sp, &s.vol, &s.lim, &g, &err);
		if (rc != b->code || strcmp(err.field, b->field) != 0)
			fail_msg("case '%s': got rc %d field '%s' (%s), want rc %d field '%s'", b->what, rc, err.field,
				 err.msg, b->code, b->field);
		assert_null(g);
		assert_int_equal(err.code, b->code);
		/* the message names the field: its last component appears in it */
		const char *leaf = strrchr(b->field, '.');
		leaf = leaf ? leaf + 1 : b->field;
		char name[64];
		snprintf(name, sizeof name, "%s", leaf);
		char *br = strchr(name, '[');
		if (br)
			*br = 0;
		if (!strstr(err.msg, name))
			fail_msg("case '%s': message '%s' does not name '%s'", b->what, err.msg, name);
	}
}

static void test_exact_cap_and_counts(void **state)
{
	(void)state;
	struct setup s;
	base_cone(&s);
	/* exactly at the cap is fine */
	s.lim.max_bytes = 4ull * (32 * 32 * 32 + 8 * 64 * 48);
	rc_geom *g;
	assert_int_equal(rc_geom_new(&s.sp, &s.vol, &s.lim, &g, NULL), 0);
	rc_geom_free(g);
	/* the largest detector: element counts far beyond 2^32 are exact */
	s.sp.det = (rc_detector_desc){ 65536, 65536, 0.01, 0.01, 0, 0, RC_DETECTOR_FLAT };
	s.lim.max_bytes = 0;
	assert_int_equal(rc_geom_new(&s.sp, &s.vol, NULL, &g, NULL), 0);
	assert_int_equal(rc_geom_proj_count(g), (size_t)8 << 32);
	assert_int_equal(rc_geom_row_offset(g, 7, 65535), (size_t)7 * 65536 * 65536 + (size_t)65535 * 65536);
	rc_geom_free(g);
	rc_geom_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cone_matrices),
		cmocka_unit_test(test_matrices_round_trip),
		cmocka_unit_test(test_fan_parallel),
		cmocka_unit_test(test_invalid_table),
		cmocka_unit_test(test_exact_cap_and_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
