/*
 * test_dd: the distance-driven system matrix against closed-form line
 * integrals of an ellipse phantom (bin-averaged), mass conservation of the
 * parallel projector, adjointness of the CPU A / A^T products, and the
 * on-disk cache (miss, hit, corrupt file).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "projectors/dd_matrix.h"
#include "tensor_phantom.h"

#if defined(__SANITIZE_ADDRESS__)
#define N_IMG 48
#define N_VIEWS 60
#else
#define N_IMG 128
#define N_VIEWS 180
#endif

static double rel_err(const float *a, const double *ref, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		double d = a[i] - ref[i];
		num += d * d;
		den += ref[i] * ref[i];
	}
	return sqrt(num / den);
}

/* DD(pixelised phantom) vs the analytic bin averages.  The two differ by
 * the pixelisation of the phantom's edges only; with 1 mm pixels and bins of
 * about a pixel this stays well under 1% (measured ~0.3-0.5%). */
static void check_analytic(rc_geom_type type, double offset)
{
	rc_geom *g;
	int nu = N_IMG + N_IMG / 2;
	assert_int_equal(tp_geom(type, N_IMG, 1.0, N_VIEWS, nu, 1, offset, &g), 0);
	rc_csr *m = NULL;
	rc_err err;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	assert_int_equal(m->rows, N_VIEWS * nu);
	assert_int_equal(m->cols, N_IMG * N_IMG);
	double scale = N_IMG / 128.0;
	float *img = malloc(sizeof(float) * N_IMG * N_IMG), *y = malloc(sizeof(float) * m->rows);
	double *ref = malloc(sizeof(double) * m->rows);
	tp_pixelize(rc_geom_volume(g), 8, scale, img);
	assert_int_equal(rc_csr_mul(m, img, y, 1, 0, &err), 0);
	for (int k = 0; k < N_VIEWS; k++)
		for (int u = 0; u < nu; u++)
			ref[k * nu + u] = tp_bin_integral(g, k, u, 16, scale);
	double e = rel_err(y, ref, (size_t)m->rows);
	printf("%s offset %.2f: relative L2 error of DD vs analytic %.4f%%\n",
	       type == RC_GEOM_FAN ? "fan" : "parallel", offset, 100 * e);
	assert_true(e < 0.01);
	/* the same matrix against a phantom rotated by 90 degrees must be far
	 * off: the comparison can fail */
	float *rot = malloc(sizeof(float) * N_IMG * N_IMG);
	for (int iy = 0; iy < N_IMG; iy++)
		for (int ix = 0; ix < N_IMG; ix++)
			rot[iy * N_IMG + ix] = img[ix * N_IMG + (N_IMG - 1 - iy)];
	assert_int_equal(rc_csr_mul(m, rot, y, 1, 0, &err), 0);
	assert_true(rel_err(y, ref, (size_t)m->rows) > 0.05);
	free(rot);
	free(img);
	free(y);
	free(ref);
	rc_csr_free(m);
	rc_geom_free(g);
}

static void test_analytic_fan(void **state)
{
	(void)state;
	check_analytic(RC_GEOM_FAN, 0);
	check_analytic(RC_GEOM_FAN, 7.3);
}

static void test_analytic_parallel(void **state)
{
	(void)state;
	check_analytic(RC_GEOM_PARALLEL, 0);
	check_analytic(RC_GEOM_PARALLEL, -3.1);
}

/* Parallel beam: every pixel's footprint over the bins integrates to its
 * area, so sum_u A[(k,u), p] = vx vy / du for every view and pixel. */
static void test_mass_parallel(void **state)
{
	(void)state;
	rc_geom *g;
	int n = 40, nu = 90;
	assert_int_equal(tp_geom(RC_GEOM_PARALLEL, n, 0.7, 24, nu, 1, 0, &g), 0);
	rc_csr *m = NULL;
	rc_err err;
	assert_int_equal(rc_dd_build(g, 2, &m, &err), 0);
	double du = rc_geom_detector(g)->du, want = 0.7 * 0.7 / du;
	double *sum = calloc((size_t)n * n, sizeof *sum);
	for (int k = 0; k < 24; k++) {
		memset(sum, 0, sizeof *sum * (size_t)n * n);
		for (int r = k * nu; r < (k + 1) * nu; r++)
			for (int64_t i = m->row_ptr[r]; i < m->row_ptr[r + 1]; i++)
				sum[m->col[i]] += m->val[i];
		for (int p = 0; p < n * n; p++)
			assert_float_equal(sum[p], want, want * 1e-5);
	}
	free(sum);
	rc_csr_free(m);
	rc_geom_free(g);
}

static unsigned lcg(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static void test_adjoint(void **state)
{
	(void)state;
	rc_geom *g;
	assert_int_equal(tp_geom(RC_GEOM_FAN, 50, 1.0, 36, 70, 1, 1.5, &g), 0);
	rc_csr *m = NULL, *t = NULL;
	rc_err err;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	assert_int_equal(rc_csr_transpose(m, &t, &err), 0);
	int nc = 3;
	float *x = malloc(sizeof(float) * m->cols * nc), *y = malloc(sizeof(float) * m->rows * nc);
	float *ax = malloc(sizeof(float) * m->rows * nc), *aty = malloc(sizeof(float) * m->cols * nc);
	unsigned s = 7;
	for (int i = 0; i < m->cols * nc; i++)
		x[i] = (float)(lcg(&s) % 1000) / 1000.0f - 0.3f;
	for (int i = 0; i < m->rows * nc; i++)
		y[i] = (float)(lcg(&s) % 1000) / 1000.0f - 0.6f;
	assert_int_equal(rc_csr_mul(m, x, ax, nc, 0, &err), 0);
	assert_int_equal(rc_csr_mul(t, y, aty, nc, 2, &err), 0);
	for (int c = 0; c < nc; c++) {
		double l = 0, r = 0, mag = 0;
		for (int i = 0; i < m->rows; i++) {
			l += (double)ax[i * nc + c] * y[i * nc + c];
			mag += fabs((double)ax[i * nc + c] * y[i * nc + c]);
		}
		for (int i = 0; i < m->cols; i++)
			r += (double)x[i * nc + c] * aty[i * nc + c];
		assert_true(fabs(l - r) <= 1e-5 * mag);
	}
	/* every ISA path of the row kernel (csr_row.h) gives the same bits,
	 * 32 slices (the width the vector paths are for) and a row range with
	 * a column range (a view subset) as the whole product's rows */
	const int wide = 32;
	float *xw = malloc(sizeof(float) * m->cols * wide), *yw[3];
	for (int i = 0; i < m->cols * wide; i++)
		xw[i] = (float)(lcg(&s) % 1000) / 1000.0f - 0.3f;
	static const char *isa[3] = { "baseline", "avx2", "avx512" };
	for (int p = 0; p < 3; p++) {
		setenv("RECOND_CPU_ISA", isa[p], 1);
		yw[p] = malloc(sizeof(float) * m->rows * wide);
		assert_int_equal(rc_csr_mul(m, xw, yw[p], wide, 0, &err), 0);
		assert_memory_equal(yw[p], yw[0], sizeof(float) * m->rows * wide);
	}
	unsetenv("RECOND_CPU_ISA");
	/* rows outside [100, 300) keep a sentinel the product never makes */
	float *yr = malloc(sizeof(float) * m->rows * wide);
	for (int i = 0; i < m->rows * wide; i++)
		yr[i] = -12345.0f;
	assert_int_equal(rc_csr_mul_range(m, xw, yr, wide, 0, 100, 300, 0, m->cols, &err), 0);
	assert_memory_equal(yr + 100 * wide, yw[0] + 100 * wide, sizeof(float) * 200 * wide);
	for (int i = 0; i < m->rows * wide; i++)
		if (i < 100 * wide || i >= 300 * wide)
			assert_true(yr[i] == -12345.0f);
	for (int p = 0; p < 3; p++)
		free(yw[p]);
	free(yr);
	free(xw);
	/* the transpose really is one: every entry found at its mirror */
	for (int r = 0; r < m->rows; r += 17)
		for (int64_t i = m->row_ptr[r]; i < m->row_ptr[r + 1]; i++) {
			int c = m->col[i], found = 0;
			for (int64_t j = t->row_ptr[c]; j < t->row_ptr[c + 1]; j++)
				if (t->col[j] == r) {
					found = 1;
					assert_true(t->val[j] == m->val[i]);
				}
			assert_true(found);
		}
	free(x);
	free(y);
	free(ax);
	free(aty);
	rc_csr_free(m);
	rc_csr_free(t);
	rc_geom_free(g);
}

static int same_csr(const rc_csr *a, const rc_csr *b)
{
	return a->rows == b->rows && a->cols == b->cols && a->nnz == b->nnz &&
	       !memcmp(a->row_ptr, b->row_ptr, sizeof *a->row_ptr * ((size_t)a->rows + 1)) &&
	       !memcmp(a->col, b->col, sizeof *a->col * (size_t)a->nnz) &&
	       !memcmp(a->val, b->val, sizeof *a->val * (size_t)a->nnz);
}

static void test_cache(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_dd_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sub[256];
	snprintf(sub, sizeof sub, "%s/matrices", dir);
	rc_geom *g, *g2;
	assert_int_equal(tp_geom(RC_GEOM_FAN, 32, 1.0, 20, 48, 1, 0, &g), 0);
	assert_int_equal(tp_geom(RC_GEOM_FAN, 32, 1.0, 20, 48, 1, 0.5, &g2), 0);
	assert_true(rc_dd_geom_hash(g) != rc_dd_geom_hash(g2));
	rc_csr *a = NULL, *b = NULL, *c = NULL;
	rc_err err;
	int hit = -1;
	assert_int_equal(rc_dd_cached(g, sub, 0, &a, &hit, &err), 0);
	assert_int_equal(hit, 0);
	assert_int_equal(rc_dd_cached(g, sub, 0, &b, &hit, &err), 0);
	assert_int_equal(hit, 1);
	assert_true(same_csr(a, b));
	rc_csr_free(b);
	/* another geometry is another file */
	assert_int_equal(rc_dd_cached(g2, sub, 0, &c, &hit, &err), 0);
	assert_int_equal(hit, 0);
	rc_csr_free(c);
	/* a truncated file is rebuilt, not trusted */
	char path[512];
	snprintf(path, sizeof path, "%s/dd-%016llx.bin", sub, (unsigned long long)rc_dd_geom_hash(g));
	assert_int_equal(truncate(path, 100), 0);
	assert_int_equal(rc_dd_cached(g, sub, 0, &b, &hit, &err), 0);
	assert_int_equal(hit, 0);
	assert_true(same_csr(a, b));
	rc_csr_free(b);
	assert_int_equal(rc_dd_cached(g, sub, 0, &b, &hit, &err), 0);
	assert_int_equal(hit, 1);
	rc_csr_free(b);
	rc_csr_free(a);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	rc_geom_free(g);
	rc_geom_free(g2);
}

static void test_not_2d(void **state)
{
	(void)state;
	double ang[4] = { 0, 90, 180, 270 };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = 4, .angles_deg = ang, .source_isocenter_mm = 500,
			    .source_detector_mm = 800, .det = { 32, 32, 1, 1, 0, 0 } };
	rc_volume_desc v = { 16, 16, 16, 1, 1, 1, 0, 0, 0 };
	rc_geom *g;
	rc_err err;
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), 0);
	rc_csr *m = NULL;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), RC_EUNSUPPORTED);
	assert_null(m);
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_analytic_fan),   cmocka_unit_test(test_analytic_parallel),
		cmocka_unit_test(test_mass_parallel),  cmocka_unit_test(test_adjoint),
		cmocka_unit_test(test_cache),          cmocka_unit_test(test_not_2d),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
