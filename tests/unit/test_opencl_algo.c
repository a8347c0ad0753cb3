/*
 * test_opencl_algo: the resident OpenCL runs (engine_opencl.h,
 * rc_opencl_run_algo) and their element-wise kernels (opencl_ew.h,
 * kernels/opencl/elementwise.cl) on the first OpenCL device (PoCL here).
 *
 *  - each element-wise kernel against a double precision loop of its
 *    definition (algo_util.h), on lengths that are no multiple of the
 *    work-group size, with offsets, and on arrays longer than one
 *    reduction's grid;
 *  - whole SART (also ordered subsets), SIRT and CGLS runs against the same
 *    algorithms over the native CPU engine (rc_algo_run): the volumes agree
 *    to 1e-4 and both end under test_algos_cpu.c's error bounds on the same
 *    analytic Shepp-Logan case (32^3 from 60 views; 24^3 from 30 under
 *    ASan); the residual of every iteration agrees too;
 *  - against rc_algo_run over the same OpenCL engine (host element-wise,
 *    the same projector kernels; SART with subsets, CGLS and nonnegative
 *    SART, to keep the binary short): only float rounding of the
 *    element-wise steps differs;
 *  - cancel from the progress call stops after that iteration with its
 *    iterate in vol; parameter errors name their field.
 * Skips (77) without OpenCL.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "algo/algo.h"
#include "backend/cpu/engine_cpu.h"
#include "plan/resident.h"
#include "backend/opencl/engine_opencl.h"
#include "backend/opencl/engine_opencl_impl.h"
#include "backend/exec.h"
#include "geometry/geometry.h"
#include "geometry/metrics.h"
#include "ocl_testutil.h"
#include "backend/opencl/opencl_ew.h"
#include "geometry/phantom.h"
#include "shepp_case.h"
#include "util/rc_clock.h"

#if defined(__SANITIZE_ADDRESS__)
#define N 24
#define NVIEWS 30
#define ITERS 4
#define ASAN 1
#else
#define N 32
#define NVIEWS 60
#define ITERS 10
#define ASAN 0
#endif
#define FOV_MM 64.0
#define TEST_CACHE "/tmp/recond-test-ocl-cache"

typedef struct fixture {
	shepp_case c;    /* the test problem */
	rc_engine *ocl;  /* default variant (PoCL: the CPU variant) */
	rc_engine *cpu;
	rc_exec *xcpu, *xocl;
} fixture;

static fixture F;

static int setup(void **state)
{
	(void)state;
	if (shepp_case_new(N, NVIEWS, FOV_MM, &F.c)) {
		shepp_case_free(&F.c);
		return -1;
	}
	int nd = F.c.nd;
	rc_err err;
	rc_opencl_options o;
	rc_opencl_options_default(&o);
	o.cache_dir = TEST_CACHE;
	if (rc_engine_opencl_new(F.c.g, &o, &F.ocl, &err)) {
		fprintf(stderr, "rc_engine_opencl_new: %s\n", err.msg);
		return -1;
	}
	/* the CPU engine without the footprint pair, which it would run on
	 * this geometry (voxels 1.05 pixel apart): the OpenCL engine's pair,
	 * ray casting's, on both */
	setenv("RECOND_NO_FOOTPRINT", "1", 1);
	int erc = rc_engine_cpu_new(F.c.g, 0, &F.cpu, &err);
	unsetenv("RECOND_NO_FOOTPRINT");
	if (erc || rc_exec_new(&F.cpu, 1, &F.xcpu, &err) || rc_exec_new(&F.ocl, 1, &F.xocl, &err)) {
		fprintf(stderr, "engines: %s\n", err.msg);
		return -1;
	}
	printf("OpenCL engine variant %s; %d^3 from %d views of %dx%d\n", rc_engine_opencl_variant(F.ocl), N,
	       NVIEWS, nd, nd);
	return 0;
}

static void teardown(void)
{
	rc_exec_free(F.xocl);
	rc_exec_free(F.xcpu);
	rc_engine_free(F.cpu);
	rc_engine_free(F.ocl);
	shepp_case_free(&F.c);
}

/* ---- element-wise kernels ------------------------------------------------ */

static uint64_t rng = 12345;
static double urand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* n values in [-1, 1) (or [0, 1) when positive) */
static float *rand_vec(size_t n, int positive)
{
	float *a = malloc((n ? n : 1) * sizeof *a);
	assert_non_null(a);
	for (size_t i = 0; i < n; i++)
		a[i] = (float)(positive ? urand() : 2 * urand() - 1);
	return a;
}

typedef struct dev {
	rc_ocl_handles h;
	rc_ocl_ew *w;
	cl_mem m[4];
} dev;

static void dev_open(dev *d, size_t n)
{
	rc_err err;
	memset(d, 0, sizeof *d);
	assert_int_equal(rc_ocl_engine_handles(F.ocl, &d->h), 0);
	if (rc_ocl_ew_new(F.ocl, &d->w, &err))
		fail_msg("rc_ocl_ew_new: %s", err.msg);
	for (int i = 0; i < 4; i++) {
		cl_int e;
		d->m[i] = clCreateBuffer(d->h.ctx, CL_MEM_READ_WRITE, (n ? n : 1) * sizeof(float), NULL, &e);
		assert_int_equal(e, CL_SUCCESS);
	}
}

static void dev_close(dev *d)
{
	for (int i = 0; i < 4; i++)
		clReleaseMemObject(d->m[i]);
	rc_ocl_ew_free(d->w);
}

static void put(dev *d, int i, const float *a, size_t n)
{
	rc_err err;
	if (n)
		assert_int_equal(rc_ocl_ew_write(d->w, d->m[i], a, n, &err), 0);
}

static void get(dev *d, int i, float *a, size_t n)
{
	rc_err err;
	if (n)
		assert_int_equal(rc_ocl_ew_read(d->w, d->m[i], a, n, &err), 0);
}

/* |got - want| <= tol * scale per element; returns the worst ratio */
static double worst(const float *got, const double *want, const double *scale, size_t n)
{
	double w = 0;
	for (size_t i = 0; i < n; i++) {
		double s = scale ? scale[i] : fabs(want[i]);
		double e = fabs(got[i] - want[i]) / (s > 1e-30 ? s : 1e-30);
		if (!(e <= w))
			w = e;
	}
	return w;
}

/* lengths: empty, tiny, no multiple of a work-group, more than one
 * reduction's grid of groups */
static const size_t lengths[] = { 0, 7, 1000, 300007 };
#define NLEN (sizeof lengths / sizeof lengths[0])

static void test_ew_update(void **s)
{
	(void)s;
	for (size_t li = 0; li < NLEN; li++)
		for (int nonneg = 0; nonneg < 2; nonneg++) {
			size_t n = lengths[li], coff = 5;
			float *v = rand_vec(n, 0), *u = rand_vec(n, 0), *c = rand_vec(n + coff, 1);
			float *got = malloc((n ? n : 1) * sizeof *got);
			double *want = malloc((n ? n : 1) * sizeof *want), *sc = malloc((n ? n : 1) * sizeof *sc);
			const float lambda = 0.7f;
			dev d;
			dev_open(&d, n + coff);
			put(&d, 0, v, n);
			put(&d, 1, u, n);
			put(&d, 2, c, n + coff);
			rc_err err;
			assert_int_equal(rc_ocl_ew_update(d.w, d.m[0], d.m[1], d.m[2], coff, lambda, nonneg, n, &err), 0);
			get(&d, 0, got, n);
			for (size_t i = 0; i < n; i++) {
				double t = (double)lambda * u[i] * c[coff + i];
				want[i] = v[i] + t;
				if (nonneg && want[i] < 0)
					want[i] = 0;
				sc[i] = fabs(v[i]) + fabs(t);
			}
			double wr = worst(got, want, sc, n);
			if (nonneg)
				for (size_t i = 0; i < n; i++)
					assert_true(got[i] >= 0.0f);
			print_message("update n=%zu nonneg=%d: worst %.2g (units of |v|+|lambda u c|)\n", n, nonneg, wr);
			assert_true(wr < 2e-7);
			dev_close(&d);
			free(v), free(u), free(c), free(got), free(want), free(sc);
		}
}

static void test_ew_axpy_xpay(void **s)
{
	(void)s;
	for (size_t li = 0; li < NLEN; li++)
		for (int xpay = 0; xpay < 2; xpay++) {
			size_t n = lengths[li];
			float *y = rand_vec(n, 0), *x = rand_vec(n, 0), *got = malloc((n ? n : 1) * sizeof *got);
			double *want = malloc((n ? n : 1) * sizeof *want), *sc = malloc((n ? n : 1) * sizeof *sc);
			const float a = -1.3f;
			dev d;
			dev_open(&d, n);
			put(&d, 0, y, n);
			put(&d, 1, x, n);
			rc_err err;
			int rc = xpay ? rc_ocl_ew_xpay(d.w, d.m[0], d.m[1], a, n, &err)
				      : rc_ocl_ew_axpy(d.w, d.m[0], a, d.m[1], n, &err);
			assert_int_equal(rc, 0);
			get(&d, 0, got, n);
			for (size_t i = 0; i < n; i++) {
				want[i] = xpay ? x[i] + (double)a * y[i] : y[i] + (double)a * x[i];
				sc[i] = xpay ? fabs(x[i]) + fabs(a * y[i]) : fabs(y[i]) + fabs(a * x[i]);
			}
			double wr = worst(got, want, sc, n);
			print_message("%s n=%zu: worst %.2g\n", xpay ? "xpay" : "axpy", n, wr);
			assert_true(wr < 2e-7);
			dev_close(&d);
			free(y), free(x), free(got), free(want), free(sc);
		}
}

static void test_ew_inv_guarded(void **s)
{
	(void)s;
	for (size_t li = 0; li < NLEN; li++) {
		size_t n = lengths[li];
		const double rel = 1e-3;
		float *a = rand_vec(n, 1), *got = malloc((n ? n : 1) * sizeof *got);
		double *want = malloc((n ? n : 1) * sizeof *want);
		tu_guard_cases(a, n);
		double mx = 0;
		for (size_t i = 0; i < n; i++)
			mx = a[i] > mx ? a[i] : mx;
		for (size_t i = 0; i < n; i++)
			want[i] = a[i] > rel * mx && a[i] > 0 ? 1.0 / a[i] : 0.0;
		dev d;
		dev_open(&d, n);
		put(&d, 0, a, n);
		rc_err err;
		assert_int_equal(rc_ocl_ew_inv_guarded(d.w, d.m[0], n, rel, &err), 0);
		get(&d, 0, got, n);
		size_t zeros = 0;
		for (size_t i = 0; i < n; i++) {
			/* the guard's side is exact unless a value sits on eps itself */
			if (fabs(a[i] - rel * mx) > 1e-6 * mx)
				assert_true((got[i] == 0.0f) == (want[i] == 0.0));
			zeros += want[i] == 0.0;
		}
		double wr = worst(got, want, NULL, n);
		print_message("inv_guarded n=%zu: %zu guarded to 0, worst %.2g\n", n, zeros, wr);
		if (n > 100)
			assert_true(zeros > n / 10);
		assert_true(wr < 4e-7);
		dev_close(&d);
		free(a), free(got), free(want);
	}
}

static void test_ew_dot(void **s)
{
	(void)s;
	for (size_t li = 0; li < NLEN; li++) {
		size_t n = lengths[li];
		float *a = rand_vec(n, 0), *b = rand_vec(n, 0);
		double want = 0, scale = 0;
		for (size_t i = 0; i < n; i++) {
			want += (double)a[i] * b[i];
			scale += fabs((double)a[i] * b[i]);
		}
		dev d;
		dev_open(&d, n);
		put(&d, 0, a, n);
		put(&d, 1, b, n);
		rc_err err;
		double got = -1;
		assert_int_equal(rc_ocl_ew_dot(d.w, d.m[0], d.m[1], n, &got, &err), 0);
		double e = fabs(got - want) / (scale > 0 ? scale : 1);
		print_message("dot n=%zu: %.17g vs %.17g (error %.2g of sum |ab|)\n", n, got, want, e);
		assert_true(e < (d.h.fp64 ? 1e-12 : 1e-5));
		dev_close(&d);
		free(a), free(b);
	}
}

/* ratio (MLEM), mul2, sum and the unweighted residual against double
 * evaluations of vec_host.c's loops; ratio's zeros (y <= eps) are exact */
static void test_ew_ratio_mul_sum(void **s)
{
	(void)s;
	for (size_t li = 0; li < NLEN; li++) {
		size_t n = lengths[li];
		float *y = rand_vec(n, 1), *p = rand_vec(n, 0), *u = rand_vec(n, 0), *c = rand_vec(n, 1);
		float *got = malloc(n * sizeof *got);
		const float eps = 0.3f;
		double s2 = 0, sum = 0, ssc = 0, wr = 0, wm = 0;
		dev d;
		dev_open(&d, n);
		put(&d, 0, y, n);
		put(&d, 1, p, n);
		put(&d, 2, u, n);
		put(&d, 3, c, n);
		rc_err err;
		double gs2 = -1, gsum = -1;
		assert_int_equal(rc_ocl_ew_sum(d.w, d.m[1], n, &gsum, &err), 0);
		assert_int_equal(rc_ocl_ew_ratio(d.w, d.m[0], d.m[1], eps, 0, n, &gs2, &err), 0);
		get(&d, 0, got, n);
		for (size_t i = 0; i < n; i++) {
			float dd = p[i] - y[i]; /* in float, as the kernels and vec_host.c */
			s2 += (double)dd * dd;
			sum += p[i];
			ssc += fabs(p[i]);
			double want = y[i] > eps ? (p[i] > 0 ? p[i] : 0.0) / y[i] : 0.0;
			if (y[i] <= eps)
				assert_true(got[i] == 0.0f);
			wr = fmax(wr, fabs(got[i] - want) / fmax(fabs(want), 1e-30));
		}
		assert_int_equal(rc_ocl_ew_mul2(d.w, d.m[2], d.m[3], d.m[1], n, &err), 0);
		get(&d, 2, got, n);
		for (size_t i = 0; i < n; i++) {
			double want = (double)u[i] * c[i] * p[i];
			wm = fmax(wm, fabs(got[i] - want) / fmax(fabs(want), 1e-30));
		}
		/* unweighted residual: e = p - e over all of it */
		put(&d, 0, y, n);
		assert_int_equal(rc_ocl_ew_residual(d.w, d.m[0], d.m[1], NULL, 0, n, &gs2, &err), 0);
		get(&d, 0, got, n);
		double wres = 0;
		for (size_t i = 0; i < n; i++)
			wres = fmax(wres, fabs(got[i] - ((double)p[i] - y[i])) / (fabs(p[i]) + fabs(y[i]) + 1e-30));
		double es = fabs(gs2 - s2) / (s2 > 0 ? s2 : 1), esum = fabs(gsum - sum) / (ssc > 0 ? ssc : 1);
		print_message("n=%zu: ratio worst %.2g, mul2 worst %.2g, residual worst %.2g (sum of squares %.2g), "
			      "sum %.2g\n", n, wr, wm, wres, es, esum);
		/* 2.5 ulp for OpenCL's float division (elementwise.cl) */
		assert_true(wr < 4e-7);
		assert_true(wm < 2.5e-7);
		assert_true(wres < 1.2e-7);
		assert_true(es < (d.h.fp64 ? 1e-12 : 1e-5));
		assert_true(esum < (d.h.fp64 ? 1e-12 : 1e-5));
		dev_close(&d);
		free(y), free(p), free(u), free(c), free(got);
	}
}

/* residual over [off, off+n) of a longer array: the rest stays as it was */
static void test_ew_residual(void **s)
{
	(void)s;
	for (size_t li = 0; li < NLEN; li++) {
		size_t n = lengths[li], off = 333, tot = off + n + 41;
		float *e = rand_vec(tot, 0), *p = rand_vec(tot, 0), *w = rand_vec(tot, 1);
		float *got = malloc(tot * sizeof *got);
		double *want = malloc(tot * sizeof *want), *sc = malloc(tot * sizeof *sc), s2 = 0;
		for (size_t i = 0; i < tot; i++) {
			int in = i >= off && i < off + n;
			double dd = (double)p[i] - e[i];
			want[i] = in ? dd * w[i] : e[i];
			sc[i] = in ? (fabs(p[i]) + fabs(e[i])) * w[i] : fabs(e[i]);
			if (in)
				s2 += dd * dd;
		}
		dev d;
		dev_open(&d, tot);
		put(&d, 0, e, tot);
		put(&d, 1, p, tot);
		put(&d, 2, w, tot);
		rc_err err;
		double gs2 = -1;
		assert_int_equal(rc_ocl_ew_residual(d.w, d.m[0], d.m[1], d.m[2], off, n, &gs2, &err), 0);
		get(&d, 0, got, tot);
		double wr = worst(got, want, sc, tot);
		double es = fabs(gs2 - s2) / (s2 > 0 ? s2 : 1);
		print_message("residual n=%zu: values worst %.2g, sum %.17g vs %.17g (%.2g)\n", n, wr, gs2, s2, es);
		for (size_t i = 0; i < tot; i++)
			if (i < off || i >= off + n)
				assert_true(got[i] == e[i]);
		assert_true(wr < 2e-7);
		assert_true(es < (d.h.fp64 ? 1e-7 : 1e-5)); /* d = p - e is rounded to float first */
		if (n == 0)
			assert_true(gs2 == 0.0);
		dev_close(&d);
		free(e), free(p), free(w), free(got), free(want), free(sc);
	}
}

/* ---- whole runs ------------------------------------------------------------ */

#define MAX_IT 64

typedef struct trace {
	int calls;
	double res[MAX_IT + 1];
	atomic_int cancel;
	int cancel_at;
} trace;

static void on_progress(void *ud, const rc_progress *p)
{
	trace *t = ud;
	t->calls++;
	assert_int_equal(p->iteration, t->calls);
	if (p->iteration <= MAX_IT)
		t->res[p->iteration] = p->residual;
	if (p->iteration == t->cancel_at)
		atomic_store(&t->cancel, 1);
}

enum { ON_CPU, ON_OCL_HOST, ON_OCL_RESIDENT };

/* FDK of this case reaches 0.256 (32^3 from 60 views) and 0.306 under ASan
 * (24^3 from 30 views), on the CPU engine and resident alike; zeros give 1,
 * a wrong scale or a missing filter well over these. */
#define FDK_BOUND 0.30
#define FDK_BOUND_ASAN 0.36

/* one run; returns its rc, *sec its wall time */
static int run_on(int where, const rc_algo_params *p, float *vol, trace *t, int cancel_at, double *sec)
{
	memset(t, 0, sizeof *t);
	atomic_init(&t->cancel, 0);
	t->cancel_at = cancel_at;
	if (cancel_at < 0)
		atomic_store(&t->cancel, 1);
	rc_algo_hooks h = { .progress = on_progress, .ud = t, .cancel = &t->cancel };
	rc_err err;
	rc_err_clear(&err);
	double t0 = rc_now_s();
	int rc = where == ON_CPU        ? rc_algo_run(p, F.xcpu, F.c.proj, vol, &h, &err)
		 : where == ON_OCL_HOST ? rc_algo_run(p, F.xocl, F.c.proj, vol, &h, &err)
					: rc_opencl_run_algo(F.ocl, p, F.c.proj, vol, &h, &err);
	if (sec)
		*sec = rc_now_s() - t0;
	if (rc && rc != RC_ECANCELLED)
		print_error("run: %s\n", err.msg);
	return rc;
}

/* The resident run, the CPU engine and (with_host) the OpenCL engine with
 * host element-wise steps: same volumes, same residuals, error under bound. */
static void compare(rc_algo_name name, int iters, int subsets, int with_host, double bound, double bound_asan)
{
	rc_algo_params p;
	rc_algo_params_plain(&p, name);
	p.iterations = iters;
	p.subsets = subsets;
	float *a = malloc(F.c.nvox * sizeof(float)), *b = malloc(F.c.nvox * sizeof(float));
	float *c = malloc(F.c.nvox * sizeof(float));
	assert_true(a && b && c);
	trace ta, tb, tc;
	double sa, sb, sc = 0;
	assert_int_equal(run_on(ON_OCL_RESIDENT, &p, a, &ta, 0, &sa), 0);
	assert_int_equal(run_on(ON_CPU, &p, b, &tb, 0, &sb), 0);
	if (with_host)
		assert_int_equal(run_on(ON_OCL_HOST, &p, c, &tc, 0, &sc), 0);
	else
		memcpy(c, a, F.c.nvox * sizeof(float));
	assert_int_equal(ta.calls, iters);
	double d_cpu = rc_metric_rel_error(a, b, NULL, F.c.nvox);
	double d_host = rc_metric_rel_error(a, c, NULL, F.c.nvox);
	double ea = rc_metric_rel_error(a, F.c.ref, F.c.mask, F.c.nvox);
	double eb = rc_metric_rel_error(b, F.c.ref, F.c.mask, F.c.nvox);
	double worst_res = 0;
	for (int k = 1; k <= iters; k++)
		worst_res = fmax(worst_res, fabs(ta.res[k] - tb.res[k]) / tb.res[k]);
	double bound_ = ASAN ? bound_asan : bound;
	print_message("%s (%d subsets, %d it.): resident vs cpu %.2g, vs opencl+host %.2g; residuals %.2g; "
		      "error %.4f (cpu %.4f, bound %.3f); %.0f / %.0f / %.0f ms per iteration "
		      "(resident / cpu / opencl+host)\n",
		      rc_algo_name_str(name), subsets, iters, d_cpu, d_host, worst_res, ea, eb, bound_, 1e3 * sa / iters,
		      1e3 * sb / iters, 1e3 * sc / iters);
	assert_true(d_cpu < 1e-4);
	assert_true(d_host < 1e-5);
	assert_true(worst_res < 1e-4);
	assert_true(ea < bound_);
	assert_true(eb < bound_);
	free(a), free(b), free(c);
}

/* bounds of test_algos_cpu.c (the same case) */
static void test_sart(void **s) { (void)s; compare(RC_ALGO_SART, ITERS, 1, 0, 0.43, 0.54); }
static void test_sart_subsets(void **s) { (void)s; compare(RC_ALGO_SART, 3, NVIEWS / 6, 1, 0.28, 0.32); }
static void test_sirt(void **s) { (void)s; compare(RC_ALGO_SIRT, ITERS, 1, 0, 0.43, 0.54); }
static void test_cgls(void **s) { (void)s; compare(RC_ALGO_CGLS, ITERS < 5 ? ITERS : 5, 1, 1, 0.31, 0.33); }
static void test_mlem(void **s) { (void)s; compare(RC_ALGO_MLEM, ITERS, 1, 0, 0.28, 0.42); }
static void test_fdk(void **s) { (void)s; compare(RC_ALGO_FDK, 1, 1, 1, FDK_BOUND, FDK_BOUND_ASAN); }

/* nonnegativity is applied on the device as on the host */
static void test_sart_nonnegative(void **s)
{
	(void)s;
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.iterations = 2;
	p.subsets = 4;
	p.relaxation = 1.5;
	p.nonnegative = 1;
	float *a = malloc(F.c.nvox * sizeof(float)), *b = malloc(F.c.nvox * sizeof(float));
	trace t;
	assert_int_equal(run_on(ON_OCL_RESIDENT, &p, a, &t, 0, NULL), 0);
	assert_int_equal(run_on(ON_OCL_HOST, &p, b, &t, 0, NULL), 0);
	size_t zeros = 0;
	for (size_t i = 0; i < F.c.nvox; i++) {
		assert_true(a[i] >= 0.0f);
		zeros += a[i] == 0.0f;
	}
	double d = rc_metric_rel_error(a, b, NULL, F.c.nvox);
	print_message("nonnegative SART: %zu voxels clamped, vs opencl+host %.2g\n", zeros, d);
	assert_true(zeros > 0);
	assert_true(d < 1e-5);
	free(a), free(b);
}

/* SART with subsets whose column sums do not all fit the cache: each
 * subset's are recomputed before its update (algo_sart.c does the same);
 * the iterates are those of the cached run. */
static void test_sart_subsets_uncached(void **s)
{
	(void)s;
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.iterations = 1;
	p.subsets = 5;
	float *a = malloc(F.c.nvox * sizeof(float)), *b = malloc(F.c.nvox * sizeof(float));
	trace t;
	rc_err err;
	/* room for all 5: kept (SART's default recomputes them) */
	p.subset_cache_bytes = 8 * F.c.nvox * sizeof(float);
	assert_int_equal(run_on(ON_OCL_RESIDENT, &p, a, &t, 0, NULL), 0);
	/* room for fewer than 5 volumes: every subset recomputes */
	p.subset_cache_bytes = 4 * F.c.nvox * sizeof(float);
	assert_int_equal(rc_opencl_run_algo(F.ocl, &p, F.c.proj, b, NULL, &err), 0);
	double d = rc_metric_rel_error(b, a, NULL, F.c.nvox);
	print_message("SART 5 subsets, column sums recomputed per subset vs kept: %.2g\n", d);
	assert_true(d < 1e-6);
	double e = rc_metric_rel_error(b, F.c.ref, F.c.mask, F.c.nvox);
	assert_true(e < 0.7); /* it did reconstruct (0 gives 1) */
	free(a), free(b);
}

/* Cancel set in iteration k's progress call: RC_ECANCELLED, k progress
 * calls, vol = the iterate of an uncancelled k-iteration run; set before
 * the start: no iteration, vol = 0. */
static void test_cancel(void **s)
{
	(void)s;
	static const struct {
		int n, subsets, at;
	} cases[] = { { RC_ALGO_SART, 1, 1 }, { RC_ALGO_SART, 5, 2 }, { RC_ALGO_CGLS, 1, 1 } };
	float *a = malloc(F.c.nvox * sizeof(float)), *b = malloc(F.c.nvox * sizeof(float));
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		rc_algo_params p;
		const int at = cases[i].at;
		rc_algo_params_plain(&p, (rc_algo_name)cases[i].n);
		p.subsets = cases[i].subsets;
		p.iterations = at;
		trace t;
		assert_int_equal(run_on(ON_OCL_RESIDENT, &p, b, &t, 0, NULL), 0);
		p.iterations = 50;
		assert_int_equal(run_on(ON_OCL_RESIDENT, &p, a, &t, at, NULL), RC_ECANCELLED);
		assert_int_equal(t.calls, at);
		double d = rc_metric_rel_error(a, b, NULL, F.c.nvox);
		print_message("%s/%d cancelled at %d vs %d iterations: %.2g\n", rc_algo_name_str(p.name), p.subsets, at,
			      at, d);
		assert_true(d < 1e-5); /* CGLS: the matched back projection's atomics add in any order */
		assert_int_equal(run_on(ON_OCL_RESIDENT, &p, a, &t, -1, NULL), RC_ECANCELLED);
		assert_int_equal(t.calls, 0);
		for (size_t k = 0; k < F.c.nvox; k++)
			assert_true(a[k] == 0.0f);
	}
	free(a), free(b);
}

/* The GPU variant with images (PoCL has images): the resident run copies
 * its device buffers into the engine's images before each projection; it
 * agrees with the host path on that engine and with the CPU variant. */
static void test_images_variant(void **s)
{
	(void)s;
	rc_opencl_options o;
	rc_opencl_options_default(&o);
	o.variant = RC_OPENCL_VARIANT_GPU;
	o.images = 1;
	o.cache_dir = TEST_CACHE;
	rc_engine *e = NULL;
	rc_exec *x = NULL;
	rc_err err;
	int rc = rc_engine_opencl_new(F.c.g, &o, &e, &err);
	if (rc == RC_EUNSUPPORTED) {
		print_message("images unsupported on this device (%s): not run\n", err.msg);
		return;
	}
	assert_int_equal(rc, 0);
	assert_string_equal(rc_engine_opencl_variant(e), "gpu+images");
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.iterations = 2;
	p.subsets = 4;
	float *a = malloc(F.c.nvox * sizeof(float)), *b = malloc(F.c.nvox * sizeof(float));
	float *c = malloc(F.c.nvox * sizeof(float));
	assert_int_equal(rc_opencl_run_algo(e, &p, F.c.proj, a, NULL, &err), 0);
	assert_int_equal(rc_algo_run(&p, x, F.c.proj, b, NULL, &err), 0);
	trace t;
	assert_int_equal(run_on(ON_OCL_RESIDENT, &p, c, &t, 0, NULL), 0);
	double dh = rc_metric_rel_error(a, b, NULL, F.c.nvox), dv = rc_metric_rel_error(a, c, NULL, F.c.nvox);
	print_message("gpu+images SART (4 subsets, 2 it.): vs its host path %.2g, vs the cpu variant %.2g\n", dh, dv);
	assert_true(dh < 1e-5);
	assert_true(dv < 1e-4);
	free(a), free(b), free(c);
	rc_exec_free(x);
	rc_engine_free(e);
}

static void test_params(void **s)
{
	(void)s;
	float *v = malloc(F.c.nvox * sizeof(float));
	rc_algo_params p;
	rc_err err;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.relaxation = 2.0;
	assert_int_equal(rc_opencl_run_algo(F.ocl, &p, F.c.proj, v, NULL, &err), RC_EINVAL);
	assert_string_equal(err.field, "algorithm.relaxation");
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.subsets = NVIEWS + 1;
	assert_int_equal(rc_opencl_run_algo(F.ocl, &p, F.c.proj, v, NULL, &err), RC_EINVAL);
	assert_string_equal(err.field, "algorithm.subsets");
	rc_algo_params_plain(&p, RC_ALGO_CGLS);
	p.iterations = 0;
	assert_int_equal(rc_opencl_run_algo(F.ocl, &p, F.c.proj, v, NULL, &err), RC_EINVAL);
	assert_string_equal(err.field, "algorithm.iterations");
	rc_algo_params_plain(&p, RC_ALGO_MLEM);
	assert_int_equal(rc_opencl_algo_supported(&p, F.c.g), 1);
	rc_algo_params_plain(&p, RC_ALGO_SART);
	assert_int_equal(rc_opencl_algo_supported(&p, F.c.g), 1);
	assert_int_equal(rc_opencl_run_algo(F.cpu, &p, F.c.proj, v, NULL, &err), RC_EINVAL);
	free(v);
}

int main(void)
{
	tu_need_opencl();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ew_update),    cmocka_unit_test(test_ew_axpy_xpay),
		cmocka_unit_test(test_ew_inv_guarded), cmocka_unit_test(test_ew_dot),
		cmocka_unit_test(test_ew_residual),  cmocka_unit_test(test_sart),
		cmocka_unit_test(test_sart_subsets), cmocka_unit_test(test_sirt),
		cmocka_unit_test(test_cgls),         cmocka_unit_test(test_mlem),
		cmocka_unit_test(test_fdk),          cmocka_unit_test(test_ew_ratio_mul_sum),
		cmocka_unit_test(test_sart_nonnegative),
		cmocka_unit_test(test_sart_subsets_uncached),
		cmocka_unit_test(test_cancel),       cmocka_unit_test(test_images_variant),
		cmocka_unit_test(test_params),
	};
	if (setup(NULL)) {
		fprintf(stderr, "test set-up failed (geometry, phantom or engines)\n");
		return 1;
	}
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	teardown();
	return rc;
}
