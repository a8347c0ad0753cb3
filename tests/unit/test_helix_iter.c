/*
 * The iterative methods on a helix (pitch factor 1, flat detector), with
 * the CPU engine's matched pair on the per-view helical matrices: exact
 * line integrals of the 3-D modified Shepp-Logan phantom (phantom.h, not
 * our projector) turned into Poisson counts, then each method's defaults
 * (initial auto: the helical FDK's volume, algo_fdk_helix.c) against the
 * helical FDK on the same data.  Asserted: every default SART, SIRT, CGLS
 * and MLEM ends below the helical FDK's error over the central cylinder,
 * as on circular scans (test_algos_noisy.c), and each started from FDK
 * (its first iterate is no worse than FDK's volume by more than noise).
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
#include "backend/exec.h"
#include "geometry/metrics.h"
#include "helix_case.h"
#include "proj_testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define NXY 24
#define NZ 20
#define VIEWS_TURN 60
#else
#define NXY 32
#define NZ 32
#define VIEWS_TURN 90
#endif
#define PHOTONS 1e5

static rc_volume_desc VOL = { .nx = NXY, .ny = NXY, .nz = NZ, .vx = 1, .vy = 1, .vz = 1 };
static rc_geom *G;
static rc_engine *E;
static rc_exec *X;
static float *PROJ, *REF;
static uint8_t *MASK;

static double unif(void) { return urand(); }

/* PTRS (Hoermann 1993), as test_algos_noisy.c */
static long poisson(double lam)
{
	double slam = sqrt(lam), loglam = log(lam), b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
	double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2.0);
	for (;;) {
		double u = unif() - 0.5, v = unif(), us = 0.5 - fabs(u);
		long k = (long)floor((2.0 * a / us + b) * u + lam + 0.43);
		if (us >= 0.07 && v <= vr)
			return k;
		if (k < 0 || (us < 0.013 && v > us))
			continue;
		if (log(v) + log(inv_alpha) - log(a / (us * us) + b) <= -lam + k * loglam - lgamma(k + 1.0))
			return k;
	}
}

static int setup(void **state)
{
	(void)state;
	rc_err err;
	double *ang = NULL;
	rc_phantom *ph = NULL;
	if (hx_geom(1.0, VIEWS_TURN, RC_DETECTOR_FLAT, &VOL, &ang, &G, &err))
		return -1;
	free(ang);
	/* the phantom within the volume: its z extent 0.9 of the fov's half */
	if (rc_phantom_shepp_logan(NXY - 4, &ph, &err))
		return -1;
	size_t np = rc_geom_proj_count(G), nv = rc_volume_count(&VOL);
	PROJ = malloc(np * sizeof(float));
	REF = malloc(nv * sizeof(float));
	MASK = calloc(nv, 1);
	if (!PROJ || !REF || !MASK || rc_phantom_project(ph, G, 0, PROJ, &err) ||
	    rc_phantom_voxelize(ph, &VOL, 3, 0, REF, &err))
		return -1;
	rc_phantom_free(ph);
	for (size_t i = 0; i < np; i++) {
		long k = poisson(PHOTONS * exp(-(double)PROJ[i]));
		PROJ[i] = (float)-log((k > 0 ? (double)k : 0.5) / PHOTONS);
	}
	double r = 0.45 * (NXY - 4);
	for (int z = 0; z < NZ; z++)
		for (int y = 0; y < NXY; y++)
			for (int x = 0; x < NXY; x++) {
				double px = x - (NXY - 1) / 2.0, py = y - (NXY - 1) / 2.0;
				MASK[((size_t)z * NXY + y) * NXY + x] = px * px + py * py < r * r;
			}
	if (rc_engine_cpu_new(G, 0, &E, &err) || rc_exec_new(&E, 1, &X, &err))
		return -1;
	print_message("helix of %d views, pair: %s\n", rc_geom_nviews(G),
		      E->splat ? "splat" : E->footprint ? "footprint" : "ray casting");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rc_exec_free(X);
	rc_engine_free(E);
	rc_geom_free(G);
	free(PROJ);
	free(REF);
	free(MASK);
	return 0;
}

static double run(rc_algo_name name, rc_initial initial, int iterations)
{
	rc_algo_params p;
	rc_algo_params_default(&p, name);
	if (name != RC_ALGO_FDK)
		p.initial = initial;
	if (iterations > 0)
		p.iterations = iterations;
	size_t nv = rc_volume_count(&VOL);
	float *vol = malloc(nv * sizeof *vol);
	assert_non_null(vol);
	rc_err err;
	rc_err_clear(&err);
	int rc = rc_algo_run(&p, X, PROJ, vol, NULL, &err);
	if (rc)
		print_error("%s: %s\n", rc_algo_name_str(name), err.msg);
	assert_int_equal(rc, 0);
	for (size_t i = 0; i < nv; i++)
		assert_true(isfinite(vol[i]));
	double e = rc_metric_rel_error(vol, REF, MASK, nv);
	free(vol);
	return e;
}

static void test_defaults_beat_helical_fdk(void **state)
{
	(void)state;
	double fdk = run(RC_ALGO_FDK, RC_INITIAL_AUTO, 0);
	double sart = run(RC_ALGO_SART, RC_INITIAL_AUTO, 0), sirt = run(RC_ALGO_SIRT, RC_INITIAL_AUTO, 0);
	double cgls = run(RC_ALGO_CGLS, RC_INITIAL_AUTO, 0), mlem = run(RC_ALGO_MLEM, RC_INITIAL_AUTO, 0);
	print_message("helix %dx%dx%d, %g photons: helical FDK %.4f, SART %.4f, SIRT %.4f, CGLS %.4f, MLEM %.4f\n",
		      NXY, NXY, NZ, PHOTONS, fdk, sart, sirt, cgls, mlem);
	assert_true(sart < fdk);
	assert_true(sirt < fdk);
	assert_true(cgls < fdk);
	assert_true(mlem < fdk);
}

/* initial auto is the helical FDK: one CGLS iteration from it stays near
 * FDK's error, far below one from zero */
static void test_auto_starts_from_fdk(void **state)
{
	(void)state;
	double fdk = run(RC_ALGO_FDK, RC_INITIAL_AUTO, 0);
	double from_auto = run(RC_ALGO_SIRT, RC_INITIAL_AUTO, 1), from_fdk = run(RC_ALGO_SIRT, RC_INITIAL_FDK, 1);
	double from_zero = run(RC_ALGO_SIRT, RC_INITIAL_ZERO, 1);
	print_message("one SIRT iteration: from auto %.4f, from fdk %.4f, from zero %.4f (FDK %.4f)\n", from_auto,
		      from_fdk, from_zero, fdk);
	assert_true(from_auto == from_fdk);
	assert_true(from_auto < 0.5 * from_zero);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_beat_helical_fdk),
		cmocka_unit_test(test_auto_starts_from_fdk),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
