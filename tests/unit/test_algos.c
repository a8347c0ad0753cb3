/*
 * Iterative algorithms (SART, SIRT, CGLS, MLEM) against a mock engine whose
 * projector is an explicit sparse-random matrix A stored densely: forward is
 * A x, RC_BP_MATCHED is exactly A^T, RC_BP_VOXEL is diag(c) A^T with a
 * random per-voxel scale c (an unmatched back projector, as the real
 * voxel-driven one is).  The data are b = A x_true, so every algorithm must
 * approach x_true; the bounds below are what a correct implementation
 * reaches on this system, and a broken normalisation (a missing row or
 * column sum, a wrong step length) misses them by orders of magnitude.
 * Some rows of A are zero (rays that miss the volume) and one column is
 * zero (a voxel no ray sees; x_true is 0 there) to exercise the guards.
 *
 * Geometries: a small cone (views are contiguous blocks of the stack) and
 * a fan (views are strided, [slice][view][u]); the mock indexes rows
 * through rc_geom_row_offset exactly as a real engine must.
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

#include "algo/algo.h"
#include "algo/algo_util.h"
#include "algo/names.h"
#include "backend/exec.h"
#include "geometry/geometry.h"

/* ---- the mock engine ---------------------------------------------------- */

typedef struct mock_engine {
	rc_engine base;
	const float *A;      /* M x N, row r = stack index r */
	const float *scale;  /* per-voxel scale of RC_BP_VOXEL */
	size_t M, N;
	int fwd_views;       /* views forward-projected so far */
	int back_views;
	/* set *cancel to 1 at the start of forward call number cancel_at_fwd */
	atomic_int *cancel;
	int cancel_at_fwd, fwd_calls;
} mock_engine;

/* Calls fn(row offset) for the nu-long rows of views [first, last). */
#define FOR_ROWS(g, first, last, off, body)                                    \
	do {                                                                   \
		int nrows_ = rc_geom_is_2d(g) ? rc_geom_volume(g)->nz           \
					      : rc_geom_detector(g)->nv;        \
		for (int k_ = (first); k_ < (last); k_++)                     \
			for (int j_ = 0; j_ < nrows_; j_++) {                  \
				size_t off = rc_geom_row_offset(g, k_, j_);    \
				body                                           \
			}                                                      \
	} while (0)

static int mock_forward(rc_engine *e, rc_fp_kind kind, const float *vol,
			float *proj, int first, int last, rc_err *err)
{
	mock_engine *m = (mock_engine *)e;
	(void)kind; (void)err;
	if (m->cancel && ++m->fwd_calls == m->cancel_at_fwd)
		atomic_store(m->cancel, 1);
	int nu = rc_geom_detector(e->geom)->nu;
	FOR_ROWS(e->geom, first, last, off, {
		for (int i = 0; i < nu; i++) {
			const float *a = m->A + (off + (size_t)i) * m->N;
			double s = 0.0;
			for (size_t n = 0; n < m->N; n++)
				s += (double)a[n] * vol[n];
			proj[off + (size_t)i] = (float)s;
		}
	});
	m->fwd_views += last - first;
	return 0;
}

static int mock_back(rc_engine *e, rc_bp_kind kind, const float *proj,
		     float *vol, int first, int last, rc_err *err)
{
	mock_engine *m = (mock_engine *)e;
	(void)err;
	double *acc = calloc(m->N, sizeof *acc);
	assert_non_null(acc);
	int nu = rc_geom_detector(e->geom)->nu;
	FOR_ROWS(e->geom, first, last, off, {
		for (int i = 0; i < nu; i++) {
			const float *a = m->A + (off + (size_t)i) * m->N;
			double pv = proj[off + (size_t)i];
			for (size_t n = 0; n < m->N; n++)
				acc[n] += a[n] * pv;
		}
	});
	for (size_t n = 0; n < m->N; n++)
		vol[n] = (float)(kind == RC_BP_VOXEL ? acc[n] * m->scale[n] : acc[n]);
	free(acc);
	m->back_views += last - first;
	return 0;
}

static void mock_free(rc_engine *e) { free(e); }

static const rc_engine_ops mock_ops = { .forward = mock_forward, .back = mock_back, .free = mock_free };

/* ---- a problem: geometry, A, x_true, b ------------------------------------ */

typedef struct problem {
	rc_geom *g;
	float *A, *scale, *xtrue, *b;
	size_t M, N;
} problem;

static uint64_t rng_state;
static double urand(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng_state >> 11) / 9007199254740992.0;
}

#define ROW_NNZ 12

/* b = A x_true */
static void problem_project(problem *P)
{
	for (size_t r = 0; r < P->M; r++) {
		double s = 0.0;
		for (size_t n = 0; n < P->N; n++)
			s += (double)P->A[r * P->N + n] * P->xtrue[n];
		P->b[r] = (float)s;
	}
}

/* The arc problem_init's views cover (degrees): 360, or less for a scan
 * that FDK refuses (test_initial). */
static double problem_arc_deg = 360.0;

static void problem_init(problem *P, int fan)
{
	static double angles[64];
	rc_volume_desc vol = { .nx = 6, .ny = 6, .nz = 6, .vx = 1, .vy = 1, .vz = 1 };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = 20,
			    .det = { .nu = 8, .nv = 6, .du = 2, .dv = 2 },
			    .source_isocenter_mm = 100, .source_detector_mm = 150,
			    .angles_deg = angles };
	if (fan) {
		vol = (rc_volume_desc){ .nx = 8, .ny = 8, .nz = 3, .vx = 1, .vy = 1, .vz = 1 };
		sp.type = RC_GEOM_FAN;
		sp.nviews = 30;
		sp.det = (rc_detector_desc){ .nu = 16, .nv = 1, .du = 1, .dv = 1 };
	}
	for (int k = 0; k < sp.nviews; k++)
		angles[k] = problem_arc_deg * k / sp.nviews;
	rc_err err;
	assert_int_equal(rc_geom_new(&sp, &vol, NULL, &P->g, &err), 0);
	P->M = rc_geom_proj_count(P->g);
	P->N = rc_volume_count(&vol);
	P->A = calloc(P->M * P->N, sizeof(float));
	P->scale = malloc(P->N * sizeof(float));
	P->xtrue = malloc(P->N * sizeof(float));
	P->b = malloc(P->M * sizeof(float));
	assert_true(P->A && P->scale && P->xtrue && P->b);
	rng_state = fan ? 7 : 3;
	for (size_t r = 0; r < P->M; r++) {
		if (r % 17 == 5)
			continue; /* a ray that misses the volume */
		for (int t = 0; t < ROW_NNZ; t++) {
			size_t n = 1 + (size_t)(urand() * (double)(P->N - 1)); /* column 0 stays empty */
			P->A[r * P->N + n] += (float)(0.5 + urand());
		}
	}
	for (size_t n = 0; n < P->N; n++) {
		P->scale[n] = (float)(0.5 + 1.5 * urand());
		P->xtrue[n] = n == 0 ? 0.0f : (float)(0.2 + urand());
	}
	problem_project(P);
}

static void problem_fini(problem *P)
{
	free(P->A);
	free(P->scale);
	free(P->xtrue);
	free(P->b);
	rc_geom_free(P->g);
}

static mock_engine *mock_new(const problem *P)
{
	mock_engine *m = calloc(1, sizeof *m);
	assert_non_null(m);
	m->base.ops = &mock_ops;
	m->base.geom = P->g;
	strcpy(m->base.name, "mock");
	m->A = P->A;
	m->scale = P->scale;
	m->M = P->M;
	m->N = P->N;
	return m;
}

static double rel_error(const float *x, const float *x0, size_t n)
{
	double d = 0.0, r = 0.0;
	for (size_t i = 0; i < n; i++) {
		d += ((double)x[i] - x0[i]) * ((double)x[i] - x0[i]);
		r += (double)x0[i] * x0[i];
	}
	return sqrt(d / r);
}

/* ---- progress recording -------------------------------------------------- */

#define MAX_IT 400

typedef struct trace {
	const float *vol, *xtrue;
	size_t n;
	int calls;
	int last_iteration;
	double err[MAX_IT + 1];
	double res[MAX_IT + 1];
	double true_res[MAX_IT + 1]; /* ||b - A vol||, with truth_problem set */
	double min_vol;       /* smallest voxel seen at any progress call */
	int all_finite;
	atomic_int cancel;
	int cancel_at;        /* set the flag in the progress call of this iteration */
	char stopped[16];     /* the stop reason of the last progress call */
	int stopped_calls;    /* progress calls that carried one */
} trace;

/* When set, the progress call also computes the true residual. */
static const problem *truth_problem;

static void on_progress(void *ud, const rc_progress *p)
{
	trace *t = ud;
	t->calls++;
	assert_int_equal(p->iteration, t->last_iteration + 1);
	t->last_iteration = p->iteration;
	assert_true(p->iteration <= MAX_IT);
	assert_true(p->elapsed_s >= 0.0);
	t->err[p->iteration] = rel_error(t->vol, t->xtrue, t->n);
	t->res[p->iteration] = p->residual;
	if (p->stopped) {
		snprintf(t->stopped, sizeof t->stopped, "%s", p->stopped);
		t->stopped_calls++;
	}
	for (size_t i = 0; i < t->n; i++) {
		if (!isfinite(t->vol[i]))
			t->all_finite = 0;
		if (t->vol[i] < t->min_vol)
			t->min_vol = t->vol[i];
	}
	if (truth_problem) {
		const problem *P = truth_problem;
		double r2 = 0.0;
		for (size_t r = 0; r < P->M; r++) {
			double a = 0.0;
			for (size_t n = 0; n < P->N; n++)
				a += (double)P->A[r * P->N + n] * t->vol[n];
			r2 += (P->b[r] - a) * (P->b[r] - a);
		}
		t->true_res[p->iteration] = sqrt(r2);
	}
	if (t->cancel_at == p->iteration)
		atomic_store(&t->cancel, 1);
}

static void trace_init(trace *t, const float *vol, const problem *P)
{
	memset(t, 0, sizeof *t);
	t->vol = vol;
	t->xtrue = P->xtrue;
	t->n = P->N;
	t->min_vol = INFINITY;
	t->all_finite = 1;
	atomic_init(&t->cancel, 0);
}

/* Runs p on P with engines mock engines (split views evenly) and records. */
static int run(const problem *P, const rc_algo_params *p, int engines, float *vol,
	       trace *t, mock_engine **ret_m)
{
	mock_engine *m[2] = { mock_new(P), engines > 1 ? mock_new(P) : NULL };
	rc_engine *e[2] = { &m[0]->base, m[1] ? &m[1]->base : NULL };
	rc_exec *x;
	rc_err err;
	assert_int_equal(rc_exec_new(e, engines, &x, &err), 0);
	if (engines > 1) {
		int nv = rc_geom_nviews(P->g);
		int split[2] = { nv / 2 - 3, nv - (nv / 2 - 3) }; /* deliberately uneven */
		assert_int_equal(rc_exec_set_split(x, RC_TASK_FORWARD, split, &err), 0);
		assert_int_equal(rc_exec_set_split(x, RC_TASK_BACK, split, &err), 0);
	}
	trace_init(t, vol, P);
	rc_algo_hooks h = { .progress = on_progress, .ud = t, .cancel = &t->cancel };
	if (ret_m) {
		*ret_m = m[0];
		m[0]->cancel = &t->cancel;
	}
	rc_err_clear(&err);
	int rc = rc_algo_run(p, x, P->b, vol, &h, &err);
	if (rc && rc != RC_ECANCELLED)
		print_error("rc_algo_run: %s (%s)\n", err.msg, err.field);
	if (rc == RC_ECANCELLED)
		assert_int_equal(err.code, RC_ECANCELLED);
	if (ret_m) {
		/* the caller reads the counters; keep the engine alive until here */
		static mock_engine snapshot;
		snapshot = *m[0];
		*ret_m = &snapshot;
	}
	rc_exec_free(x);
	rc_engine_free(e[0]);
	rc_engine_free(e[1]);
	return rc;
}

static float *vol_new(const problem *P)
{
	float *v = malloc(P->N * sizeof(float));
	assert_non_null(v);
	/* garbage in: every algorithm must overwrite vol */
	for (size_t i = 0; i < P->N; i++)
		v[i] = 1e6f;
	return v;
}

/* ---- convergence --------------------------------------------------------- */

/* The error must fall at each of the first `falls` iterations and end below
 * `bound` after `iters`. */
static void check_converges(rc_algo_name name, int fan, int iters, int falls,
			    double bound, const char *label)
{
	problem P;
	problem_init(&P, fan);
	rc_algo_params p;
	rc_algo_params_plain(&p, name);
	p.iterations = iters;
	float *vol = vol_new(&P);
	trace t;
	assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
	assert_int_equal(t.calls, iters);
	assert_true(t.all_finite);
	print_message("%-5s %s: error %.3g after 1, %.3g after %d, %.3g after %d iterations (bound %.3g)\n",
		      label, fan ? "fan " : "cone", t.err[1], t.err[falls], falls, t.err[iters], iters, bound);
	for (int k = 2; k <= falls; k++)
		assert_true(t.err[k] < t.err[k - 1]);
	assert_true(t.err[iters] < bound);
	free(vol);
	problem_fini(&P);
}

static void test_sart_converges(void **s)
{
	(void)s;
	check_converges(RC_ALGO_SART, 0, 200, 10, 1e-3, "sart");
	check_converges(RC_ALGO_SART, 1, 200, 10, 1e-3, "sart");
}

static void test_sirt_converges(void **s)
{
	(void)s;
	check_converges(RC_ALGO_SIRT, 0, 200, 10, 1e-3, "sirt");
	check_converges(RC_ALGO_SIRT, 1, 200, 10, 1e-3, "sirt");
}

static void test_cgls_converges(void **s)
{
	(void)s;
	check_converges(RC_ALGO_CGLS, 0, 60, 10, 1e-5, "cgls");
	check_converges(RC_ALGO_CGLS, 1, 60, 10, 1e-5, "cgls");
}

static void test_mlem_converges(void **s)
{
	(void)s;
	check_converges(RC_ALGO_MLEM, 0, 300, 10, 1e-3, "mlem");
	check_converges(RC_ALGO_MLEM, 1, 300, 10, 1e-3, "mlem");
}

/* ||b - A x|| reported by CGLS never rises, starting from ||b||, on
 * consistent and on noisy (inconsistent) data; it agrees with the true
 * residual of each iterate, computed here in double from A, which never
 * rises either.  20 iterations (consistent) and 12 (noisy): beyond them the
 * residual changes by less than float rounding of the residual vector
 * (1e-8 relative) and only jitters: the consistent system is solved to
 * float precision, the noisy one reached its least-squares residual. */
static void test_cgls_residual_never_rises(void **s)
{
	(void)s;
	for (int c = 0; c < 4; c++) {
		int fan = c & 1, noisy = c >> 1;
		problem P;
		problem_init(&P, fan);
		if (noisy)
			for (size_t r = 0; r < P.M; r++)
				P.b[r] += (float)(2.0 * (urand() - 0.5));
		rc_algo_params p;
		rc_algo_params_plain(&p, RC_ALGO_CGLS);
		p.iterations = noisy ? 12 : 20;
		float *vol = vol_new(&P);
		trace t;
		truth_problem = &P;
		assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
		truth_problem = NULL;
		double b2 = 0.0;
		for (size_t r = 0; r < P.M; r++)
			b2 += (double)P.b[r] * P.b[r];
		t.res[0] = t.true_res[0] = sqrt(b2);
		for (int k = 1; k <= p.iterations; k++) {
			assert_true(t.res[k] <= t.res[k - 1]);
			assert_true(t.true_res[k] <= t.true_res[k - 1]);
			assert_true(fabs(t.res[k] - t.true_res[k]) <= 1e-5 * t.res[0]);
		}
		print_message("cgls %s %s: residual %.4g -> %.4g after %d (true %.4g)\n", fan ? "fan " : "cone",
			      noisy ? "noisy" : "exact", t.res[0], t.res[p.iterations], p.iterations,
			      t.true_res[p.iterations]);
		assert_true(t.res[p.iterations] < (noisy ? 0.2 : 1e-4) * t.res[0]);
		free(vol);
		problem_fini(&P);
	}
}

/* SART's column sums come from its own back projector, so a per-voxel scale
 * of that projector cancels: SART over diag(c) A^T equals SIRT over A^T.
 * Fails if the column sums are taken from the wrong projector or missing. */
static void test_sart_invariant_to_backprojector_scale(void **s)
{
	(void)s;
	problem P;
	problem_init(&P, 0);
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.iterations = 15;
	p.relaxation = 0.8;
	float *a = vol_new(&P), *b = vol_new(&P);
	trace t;
	assert_int_equal(run(&P, &p, 1, a, &t, NULL), 0);
	p.name = RC_ALGO_SIRT;
	assert_int_equal(run(&P, &p, 1, b, &t, NULL), 0);
	double d = rel_error(a, b, P.N);
	print_message("sart(diag(c) A^T) vs sirt(A^T): %.3g\n", d);
	assert_true(d < 1e-5);
	free(a);
	free(b);
	problem_fini(&P);
}

/* Ordered subsets, SART's and MLEM's (OS-EM): every view is projected once
 * per iteration but the first block of the first, whose start from zero
 * is not projected (set-up: one forward of ones; OS-EM's column sums: one
 * back projection of ones per subset, kept; SART's: recomputed before each
 * block, one more back projection of its views, unless subset_cache_bytes
 * keeps them, with the same iterates; on the cone SART first tries their
 * closed form, one back projection of the first block's views, which the
 * mock's weights fail, colsum.h) and 3 iterations get much further
 * than the whole-set update; then
 * SART with every view its own subset still converges, and OS-EM
 * converges, non-negative throughout. */
static void test_subsets(void **s)
{
	(void)s;
	static const rc_algo_name names[] = { RC_ALGO_SART, RC_ALGO_MLEM };
	for (int a = 0; a < 2; a++)
		for (int fan = 0; fan < 2; fan++) {
			problem P;
			problem_init(&P, fan);
			int nv = rc_geom_nviews(P.g);
			rc_algo_params p;
			rc_algo_params_plain(&p, names[a]);
			p.iterations = 3;
			float *vol = vol_new(&P);
			trace t;
			mock_engine *m;
			assert_int_equal(run(&P, &p, 1, vol, &t, &m), 0);
			double e1 = t.err[3];
			/* the row sums, then every iteration's views but the first
			 * block's of the first (its start projects to x0 A(1)) */
			assert_int_equal(m->fwd_views, nv * p.iterations);
			assert_int_equal(m->back_views, nv * (1 + p.iterations));
			p.subsets = 5;
			assert_int_equal(run(&P, &p, 1, vol, &t, &m), 0);
			int f0, l0;
			rc_subset_range(0, p.subsets, nv, &f0, &l0);
			assert_int_equal(m->fwd_views, nv * (1 + p.iterations) - (l0 - f0));
			const int sart = names[a] == RC_ALGO_SART;
			assert_int_equal(m->back_views, sart ? nv * 2 * p.iterations + (fan ? 0 : nv / p.subsets)
							     : nv * (1 + p.iterations));
			if (sart) {
				float *kept = vol_new(&P);
				trace t2;
				p.subset_cache_bytes = 64u << 20;
				assert_int_equal(run(&P, &p, 1, kept, &t2, &m), 0);
				assert_int_equal(m->back_views, nv * (1 + p.iterations));
				assert_true(rel_error(kept, vol, P.N) < 1e-6);
				p.subset_cache_bytes = 0;
				free(kept);
			}
			print_message("%s %s: error after 3 iterations: %.3g (1 subset), %.3g (5 subsets)\n",
				      rc_algo_name_str(names[a]), fan ? "fan " : "cone", e1, t.err[3]);
			assert_true(t.err[3] < 0.8 * e1);
			if (names[a] == RC_ALGO_SART) {
				p.subsets = nv;
				p.iterations = 20;
			} else {
				p.iterations = 40;
			}
			assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
			if (names[a] == RC_ALGO_SART)
				assert_true(t.err[20] < t.err[1]);
			else
				assert_true(t.err[40] < 0.05 && t.min_vol >= 0.0f);
			assert_true(t.all_finite);
			free(vol);
			problem_fini(&P);
		}
}

/* The stopping rule (algo.h): a residual that meets the discrepancy or the
 * tolerance ends the run after that iteration, says which in the progress
 * call, and leaves that iterate in vol; a rule that is never met changes
 * nothing. */
static void test_stop_rule(void **s)
{
	(void)s;
	problem P;
	problem_init(&P, 0);
	static const rc_algo_name names[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	float *vol = vol_new(&P);
	for (int i = 0; i < 4; i++) {
		rc_algo_params p;
		rc_algo_params_plain(&p, names[i]);
		p.iterations = 30;
		trace t;
		assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
		assert_int_equal(t.calls, 30);
		assert_int_equal(t.stopped_calls, 0);
		/* the residual after 5 iterations as the noise level: the run must
		 * stop at the first iteration whose residual is at or below it */
		double target = t.res[5];
		int want = 1;
		while (t.res[want] > target)
			want++;
		p.stop_discrepancy = 1.0;
		p.noise_sigma = target * (1.0 + 1e-9) / sqrt((double)P.M);
		assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
		print_message("%s: discrepancy %.4g met after %d iterations\n", rc_algo_name_str(names[i]), target,
			      t.calls);
		assert_int_equal(t.calls, want);
		assert_int_equal(t.stopped_calls, 1);
		assert_string_equal(t.stopped, "discrepancy");
		/* the same through the tolerance, relative to ||p|| */
		double pn = 0.0;
		for (size_t r = 0; r < P.M; r++)
			pn += (double)P.b[r] * P.b[r];
		p.stop_discrepancy = 0.0;
		p.stop_tolerance = target * (1.0 + 1e-9) / sqrt(pn);
		assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
		assert_int_equal(t.calls, want);
		assert_string_equal(t.stopped, "tolerance");
		/* stagnation: the first iteration whose residual fell by less than
		 * the fraction s of the one before (s from the free run's 5th fall) */
		rc_algo_params_plain(&p, names[i]);
		p.iterations = 30;
		assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
		double res[31];
		memcpy(res, t.res, sizeof res);
		p.stop_stagnation = (res[5] - res[6]) / res[5] * (1.0 + 1e-6);
		want = 2;
		while (want < 30 && !(res[want - 1] - res[want] < p.stop_stagnation * res[want - 1]))
			want++;
		assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
		print_message("%s: stagnation %.3g met after %d iterations\n", rc_algo_name_str(names[i]),
			      p.stop_stagnation, t.calls);
		assert_true(want < 30);
		assert_int_equal(t.calls, want);
		assert_string_equal(t.stopped, "stagnation");
	}
	free(vol);
	problem_fini(&P);
}

/* With noisy data the unconstrained result goes negative somewhere; with
 * nonnegative = 1 no iterate ever does.  MLEM is positive by construction. */
static void test_nonnegative(void **s)
{
	(void)s;
	problem P;
	problem_init(&P, 0);
	for (size_t n = 1; n < P.N; n += 3)
		P.xtrue[n] = 0.0f; /* many zeros: noise pushes them below 0 */
	problem_project(&P);
	for (size_t r = 0; r < P.M; r++)
		P.b[r] += (float)(3.0 * (urand() - 0.5));
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.iterations = 30;
	float *vol = vol_new(&P);
	trace t;
	assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
	assert_true(t.min_vol < 0.0);
	p.nonnegative = 1;
	assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
	assert_true(t.min_vol >= 0.0);
	p.subsets = 4;
	assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
	assert_true(t.min_vol >= 0.0);
	p.name = RC_ALGO_MLEM;
	assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
	assert_true(t.min_vol >= 0.0);
	assert_true(t.all_finite);
	free(vol);
	problem_fini(&P);
}

/* ---- the start (algorithm.initial) ---------------------------------------- */

/* "fdk": the run starts from rc_fdk_run's volume of the same data (one SART
 * iteration with a relaxation of 1e-6 stays there; from 0 it does not),
 * MLEM from it raised to its floor; "given": vol is the start (CGLS from
 * the exact solution of exact data stays there); "auto" is "fdk" on that
 * full circle and "zero" on a 90-degree arc, which FDK refuses (and "fdk"
 * with it).  The defaults: every method from "auto" with the stagnation
 * stop; the plain methods from 0 without it. */
static void test_initial(void **s)
{
	(void)s;
	problem P;
	problem_init(&P, 0);
	trace t;
	rc_algo_params p;
	rc_algo_params_default(&p, RC_ALGO_FDK);
	float *vf = vol_new(&P), *v = vol_new(&P);
	assert_int_equal(run(&P, &p, 1, vf, &t, NULL), 0);
	double peak = 0.0;
	for (size_t i = 0; i < P.N; i++)
		peak = fmax(peak, fabs(vf[i]));
	assert_true(peak > 0.0);
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.iterations = 1;
	p.relaxation = 1e-6;
	static const rc_initial starts[] = { RC_INITIAL_ZERO, RC_INITIAL_FDK, RC_INITIAL_AUTO };
	for (int k = 0; k < 3; k++) {
		p.initial = starts[k];
		assert_int_equal(run(&P, &p, 1, v, &t, NULL), 0);
		double worst = 0.0;
		for (size_t i = 0; i < P.N; i++)
			worst = fmax(worst, fabs(v[i] - vf[i]));
		print_message("SART (relaxation 1e-6, 1 it.) from %s: max |x - FDK| %.3g of FDK's peak\n",
			      rc_name_str(RC_NAMES_INITIAL, (int)starts[k]), worst / peak);
		assert_true(k ? worst < 1e-4 * peak : worst > 0.5 * peak);
	}
	/* a 90-degree arc: FDK refuses it, "auto" starts from 0 */
	problem A;
	problem_arc_deg = 90.0;
	problem_init(&A, 0);
	problem_arc_deg = 360.0;
	rc_err err;
	assert_int_equal(rc_fdk_suits(A.g, RC_SCAN_AUTO, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.angles");
	assert_int_equal(rc_fdk_suits(P.g, RC_SCAN_AUTO, NULL), 0);
	float *va = vol_new(&A), *vz = vol_new(&A);
	p.initial = RC_INITIAL_FDK;
	assert_int_equal(run(&A, &p, 1, va, &t, NULL), RC_EINVAL);
	p.initial = RC_INITIAL_AUTO;
	assert_int_equal(run(&A, &p, 1, va, &t, NULL), 0);
	p.initial = RC_INITIAL_ZERO;
	assert_int_equal(run(&A, &p, 1, vz, &t, NULL), 0);
	assert_memory_equal(va, vz, A.N * sizeof *va);
	free(va);
	free(vz);
	problem_fini(&A);
	/* MLEM from FDK (negative voxels raised to the floor): finite and
	 * non-negative */
	rc_algo_params_plain(&p, RC_ALGO_MLEM);
	p.iterations = 1;
	p.initial = RC_INITIAL_FDK;
	assert_int_equal(run(&P, &p, 1, v, &t, NULL), 0);
	assert_true(t.all_finite);
	assert_true(t.min_vol >= 0.0);
	/* given: CGLS from the exact solution of exact data */
	rc_algo_params_plain(&p, RC_ALGO_CGLS);
	p.iterations = 2;
	p.initial = RC_INITIAL_GIVEN;
	memcpy(v, P.xtrue, P.N * sizeof *v);
	assert_int_equal(run(&P, &p, 1, v, &t, NULL), 0);
	double eg = rel_error(v, P.xtrue, P.N);
	p.initial = RC_INITIAL_ZERO;
	assert_int_equal(run(&P, &p, 1, v, &t, NULL), 0);
	double ez = rel_error(v, P.xtrue, P.N);
	print_message("CGLS (2 it.) from the solution: error %.3g; from 0: %.3g\n", eg, ez);
	assert_true(eg < 1e-4 && ez > 0.05);
	/* the defaults */
	static const rc_algo_name names[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	for (int i = 0; i < 4; i++) {
		rc_algo_params_default(&p, names[i]);
		assert_int_equal(p.initial, RC_INITIAL_AUTO);
		double stag = names[i] == RC_ALGO_MLEM ? RC_MLEM_DEFAULT_STAGNATION : RC_DEFAULT_STAGNATION;
		assert_true(p.stop_stagnation == stag);
		rc_algo_params_plain(&p, names[i]);
		assert_int_equal(p.initial, RC_INITIAL_ZERO);
		assert_true(p.stop_stagnation == 0.0);
	}
	free(v);
	free(vf);
	problem_fini(&P);
}

/* ---- phases ----------------------------------------------------------------- */

/* The phase hook (algo.h): "fdk_start" then "iterating" around an FDK
 * start, both before the first iteration's progress; nothing from a zero
 * start; the phase the cancel flag interrupted is the start's. */
struct phases {
	char seen[8][16];
	int n, progress_at[8]; /* progress calls before each phase call */
	int progress;
	atomic_int cancel;
	int cancel_in_start;
};

static void ph_phase(void *ud, const char *phase)
{
	struct phases *f = ud;
	if (f->n < 8) {
		snprintf(f->seen[f->n], sizeof f->seen[0], "%s", phase);
		f->progress_at[f->n++] = f->progress;
	}
	if (f->cancel_in_start && !strcmp(phase, RC_PHASE_FDK_START))
		atomic_store(&f->cancel, 1);
}

static void ph_progress(void *ud, const rc_progress *p)
{
	(void)p;
	((struct phases *)ud)->progress++;
}

static void test_phases(void **s)
{
	(void)s;
	problem P;
	problem_init(&P, 0);
	float *v = vol_new(&P);
	mock_engine *m = mock_new(&P);
	rc_engine *e = &m->base;
	rc_exec *x;
	rc_err err;
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	static const rc_algo_name names[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	for (int i = 0; i < 4; i++) {
		rc_algo_params p;
		rc_algo_params_plain(&p, names[i]);
		p.iterations = 2;
		p.initial = RC_INITIAL_FDK;
		struct phases f = { .n = 0 };
		rc_algo_hooks h = { .progress = ph_progress, .ud = &f, .cancel = &f.cancel, .phase = ph_phase };
		assert_int_equal(rc_algo_run(&p, x, P.b, v, &h, &err), 0);
		assert_int_equal(f.n, 2);
		assert_string_equal(f.seen[0], RC_PHASE_FDK_START);
		assert_string_equal(f.seen[1], RC_PHASE_ITERATING);
		assert_int_equal(f.progress_at[1], 0);
		assert_int_equal(f.progress, 2);
		/* from zero: no phase call */
		p.initial = RC_INITIAL_ZERO;
		struct phases z = { .n = 0 };
		h.ud = &z;
		h.cancel = &z.cancel;
		assert_int_equal(rc_algo_run(&p, x, P.b, v, &h, &err), 0);
		assert_int_equal(z.n, 0);
		/* cancelled in the start: no "iterating", no iteration */
		p.initial = RC_INITIAL_FDK;
		struct phases c = { .n = 0, .cancel_in_start = 1 };
		h.ud = &c;
		h.cancel = &c.cancel;
		assert_int_equal(rc_algo_run(&p, x, P.b, v, &h, &err), RC_ECANCELLED);
		assert_int_equal(c.n, 1);
		assert_int_equal(c.progress, 0);
	}
	rc_exec_free(x);
	rc_engine_free(e);
	free(v);
	problem_fini(&P);
}

/* ---- cancel -------------------------------------------------------------- */

/* The flag set in the progress call of iteration 3 stops the run before
 * iteration 4 and vol is exactly the 3-iteration result. */
static void test_cancel_from_progress(void **s)
{
	(void)s;
	static const rc_algo_name names[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	problem P;
	problem_init(&P, 0);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		for (int subsets = 1; subsets <= 4; subsets += 3) {
			if (subsets > 1 && names[i] != RC_ALGO_SART)
				continue;
			rc_algo_params p;
			rc_algo_params_plain(&p, names[i]);
			p.subsets = subsets;
			p.iterations = 3;
			float *ref = vol_new(&P), *vol = vol_new(&P);
			trace t;
			assert_int_equal(run(&P, &p, 1, ref, &t, NULL), 0);
			p.iterations = 10;
			trace_init(&t, vol, &P);
			t.cancel_at = 3;
			mock_engine *m = mock_new(&P);
			rc_engine *e = &m->base;
			rc_exec *x;
			rc_err err;
			assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
			rc_algo_hooks h = { .progress = on_progress, .ud = &t, .cancel = &t.cancel };
			t.cancel_at = 3;
			assert_int_equal(rc_algo_run(&p, x, P.b, vol, &h, &err), RC_ECANCELLED);
			assert_int_equal(err.code, RC_ECANCELLED);
			assert_int_equal(t.calls, 3);
			assert_memory_equal(vol, ref, P.N * sizeof(float));
			rc_exec_free(x);
			rc_engine_free(e);
			free(ref);
			free(vol);
		}
	}
	problem_fini(&P);
}

/* A flag raised between ordered subsets (here: during the forward
 * projection of the second subset of iteration 2) stops the run within that
 * iteration and restores the last complete iterate, iteration 1's. */
static void test_cancel_between_subsets(void **s)
{
	(void)s;
	problem P;
	problem_init(&P, 1);
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.subsets = 4;
	p.iterations = 1;
	float *ref = vol_new(&P), *vol = vol_new(&P);
	trace t;
	assert_int_equal(run(&P, &p, 1, ref, &t, NULL), 0);

	p.iterations = 5;
	mock_engine *m = mock_new(&P);
	rc_engine *e = &m->base;
	rc_exec *x;
	rc_err err;
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	trace_init(&t, vol, &P);
	m->cancel = &t.cancel;
	/* forward calls: 1 (row sums), 4 (iteration 1), then iteration 2's second */
	m->cancel_at_fwd = 1 + 4 + 2;
	rc_algo_hooks h = { .progress = on_progress, .ud = &t, .cancel = &t.cancel };
	assert_int_equal(rc_algo_run(&p, x, P.b, vol, &h, &err), RC_ECANCELLED);
	assert_int_equal(t.calls, 1);
	assert_true(m->fwd_calls <= 1 + 4 + 4);
	assert_memory_equal(vol, ref, P.N * sizeof(float));
	rc_exec_free(x);
	rc_engine_free(e);
	free(ref);
	free(vol);
	problem_fini(&P);
}

/* ---- device split -------------------------------------------------------- */

/* Two engines with an uneven split give one engine's volume within float
 * rounding (the back projections are summed in a different grouping). */
static void test_exec_split(void **s)
{
	(void)s;
	static const rc_algo_name names[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	for (int fan = 0; fan < 2; fan++) {
		problem P;
		problem_init(&P, fan);
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
			rc_algo_params p;
			rc_algo_params_plain(&p, names[i]);
			p.iterations = 10;
			p.subsets = names[i] == RC_ALGO_SART ? 3 : 1;
			float *a = vol_new(&P), *b = vol_new(&P);
			trace t;
			assert_int_equal(run(&P, &p, 1, a, &t, NULL), 0);
			assert_int_equal(run(&P, &p, 2, b, &t, NULL), 0);
			double d = rel_error(b, a, P.N);
			print_message("%s %s: 2 engines vs 1: %.3g\n", rc_algo_name_str(names[i]),
				      fan ? "fan " : "cone", d);
			assert_true(d < 1e-5);
			free(a);
			free(b);
		}
		problem_fini(&P);
	}
}

/* ---- parameters ---------------------------------------------------------- */

static void test_invalid_params(void **s)
{
	(void)s;
	problem P;
	problem_init(&P, 0);
	mock_engine *m = mock_new(&P);
	rc_engine *e = &m->base;
	rc_exec *x;
	rc_err err;
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	float *vol = vol_new(&P);
	static const struct {
		rc_algo_name name;
		int iterations;
		double relaxation;
		int subsets;
		const char *field;
	} bad[] = {
		{ RC_ALGO_SART, 0, 1.0, 1, "algorithm.iterations" },
		{ RC_ALGO_CGLS, -1, 1.0, 1, "algorithm.iterations" },
		{ RC_ALGO_MLEM, 0, 1.0, 1, "algorithm.iterations" },
		{ RC_ALGO_SART, 5, 0.0, 1, "algorithm.relaxation" },
		{ RC_ALGO_SART, 5, 2.0, 1, "algorithm.relaxation" },
		{ RC_ALGO_SIRT, 5, -0.5, 1, "algorithm.relaxation" },
		{ RC_ALGO_SART, 5, NAN, 1, "algorithm.relaxation" },
		{ RC_ALGO_SART, 5, 1.0, -1, "algorithm.subsets" },
		{ RC_ALGO_SART, 5, 1.0, 21, "algorithm.subsets" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		rc_algo_params p;
		rc_algo_params_plain(&p, bad[i].name);
		p.iterations = bad[i].iterations;
		p.relaxation = bad[i].relaxation;
		p.subsets = bad[i].subsets;
		rc_err_clear(&err);
		assert_int_equal(rc_algo_run(&p, x, P.b, vol, NULL, &err), RC_EINVAL);
		assert_string_equal(err.field, bad[i].field);
		assert_true(strlen(err.msg) > 10);
	}
	/* the TV and stop fields, each algorithm */
	static const rc_algo_name iters[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	for (size_t i = 0; i < 4; i++)
		for (int k = 0; k < 5; k++) {
			rc_algo_params p;
			rc_algo_params_plain(&p, iters[i]);
			p.iterations = 2;
			const char *field = k < 2 ? "algorithm.tv.weight" : "algorithm.stop";
			if (k == 0)
				p.tv_weight = -0.1;
			else if (k == 1)
				p.tv_weight = NAN, p.tv_steps = 3;
			else if (k == 2)
				p.stop_tolerance = 1.0;
			else if (k == 3)
				p.stop_discrepancy = -1.0;
			else
				p.noise_sigma = INFINITY;
			rc_err_clear(&err);
			assert_int_equal(rc_algo_run(&p, x, P.b, vol, NULL, &err), RC_EINVAL);
			assert_string_equal(err.field, field);
		}
	/* the same calls straight to the algorithm on a backend (not through
	 * rc_algo_run_on's own checks) */
	rc_backend *bk = NULL;
	assert_int_equal(rc_backend_host_new(x, &bk, &err), 0);
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_SART);
	p.relaxation = 3.0;
	assert_int_equal(rc_sart_run(&p, bk, P.b, vol, NULL, &err), RC_EINVAL);
	p.relaxation = 1.0;
	p.iterations = 0;
	assert_int_equal(rc_cgls_run(&p, bk, P.b, vol, NULL, &err), RC_EINVAL);
	assert_int_equal(rc_mlem_run(&p, bk, P.b, vol, NULL, &err), RC_EINVAL);
	assert_int_equal(rc_sirt_run(&p, bk, P.b, vol, NULL, &err), RC_EINVAL);
	assert_int_equal(rc_sart_run(&p, NULL, P.b, vol, NULL, &err), RC_EINVAL);
	/* no hooks at all is fine */
	p.iterations = 2;
	assert_int_equal(rc_sart_run(&p, bk, P.b, vol, NULL, &err), 0);
	rc_backend_free(bk);
	free(vol);
	rc_exec_free(x);
	rc_engine_free(e);
	problem_fini(&P);
}

/* Zero data: every algorithm returns a zero volume, no NaN (0/0 guards). */
static void test_zero_data(void **s)
{
	(void)s;
	static const rc_algo_name names[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	problem P;
	problem_init(&P, 0);
	memset(P.b, 0, P.M * sizeof(float));
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		rc_algo_params p;
		rc_algo_params_plain(&p, names[i]);
		p.iterations = 3;
		float *vol = vol_new(&P);
		trace t;
		assert_int_equal(run(&P, &p, 1, vol, &t, NULL), 0);
		assert_int_equal(t.calls, 3);
		for (size_t n = 0; n < P.N; n++)
			assert_true(vol[n] == 0.0f);
		free(vol);
	}
	problem_fini(&P);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sart_converges),
		cmocka_unit_test(test_sirt_converges),
		cmocka_unit_test(test_cgls_converges),
		cmocka_unit_test(test_mlem_converges),
		cmocka_unit_test(test_cgls_residual_never_rises),
		cmocka_unit_test(test_sart_invariant_to_backprojector_scale),
		cmocka_unit_test(test_subsets),
		cmocka_unit_test(test_stop_rule),
		cmocka_unit_test(test_nonnegative),
		cmocka_unit_test(test_initial),
		cmocka_unit_test(test_phases),
		cmocka_unit_test(test_cancel_from_progress),
		cmocka_unit_test(test_cancel_between_subsets),
		cmocka_unit_test(test_exec_split),
		cmocka_unit_test(test_invalid_params),
		cmocka_unit_test(test_zero_data),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
