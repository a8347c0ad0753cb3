/*
 * SART's per-block column sums (core/algo/colsum.h): whichever way a run
 * takes (kept, closed form, recomputed), block s's C_s must be 1 / B_s(1)
 * of the back projector itself, here back-projected from ones over the
 * block's views and inverted in double.  The closed form is taken only
 * where it holds: cone views with the volume inside every view's detector;
 * a narrow detector or tilted matrices recompute.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/algo_util.h"
#include "algo/colsum.h"
#include "backend/backend.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "geometry/geometry.h"
#include "tilt_case.h"

#define NV 30
#define BLOCKS 6

static const rc_volume_desc VOL = { 24, 20, 18, 0.5, 0.5, 0.5, 0.3, -0.2, 0.4 };

typedef struct fixture {
	rc_geom *g;
	rc_engine *e;
	rc_exec *x;
	rc_backend *b;
} fixture;

/* A cone scan (nu pixels of 1 mm across), or its matrices with the object
 * turned 10 degrees about x (P[2], P[10] not 0). */
static void open_fixture(fixture *f, int nu, int tilted)
{
	double ang[NV], mats[NV * 12];
	for (int k = 0; k < NV; k++)
		ang[k] = 5 + 360.0 * k / NV;
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = NV,
			    .det = { .nu = nu, .nv = 50, .du = 1.0, .dv = 1.0 },
			    .source_isocenter_mm = 150, .source_detector_mm = 300, .angles_deg = ang };
	rc_err err;
	memset(f, 0, sizeof *f);
	assert_int_equal(rc_geom_new(&sp, &VOL, NULL, &f->g, &err), 0);
	if (tilted) {
		tilt_case_matrices(f->g, 10, mats);
		rc_geom_free(f->g);
		sp.type = RC_GEOM_MATRICES;
		sp.matrices = mats;
		assert_int_equal(rc_geom_new(&sp, &VOL, NULL, &f->g, &err), 0);
	}
	assert_int_equal(rc_engine_cpu_new(f->g, 2, &f->e, &err), 0);
	assert_int_equal(rc_exec_new(&f->e, 1, &f->x, &err), 0);
	assert_int_equal(rc_backend_host_new(f->x, &f->b, &err), 0);
}

static void close_fixture(fixture *f)
{
	rc_backend_free(f->b);
	rc_exec_free(f->x);
	rc_engine_free(f->e);
	rc_geom_free(f->g);
}

/* The largest relative difference of every block's C_s from 1 / B_s(1)
 * back-projected here (0 where B_s(1) is 0 or below the guard). */
static double worst_difference(fixture *f, rc_colsum *cs)
{
	const size_t nvox = rc_volume_count(&VOL), np = rc_geom_proj_count(f->g);
	float *ones = malloc(np * sizeof *ones), *bp = malloc(nvox * sizeof *bp), *got = malloc(nvox * sizeof *got);
	rc_vec *scratch = NULL;
	rc_err err;
	assert_true(ones && bp && got);
	assert_int_equal(rc_bk_vec_new(f->b, RC_SPACE_PROJ, &scratch, &err), 0);
	double worst = 0.0;
	for (int s = 0; s < BLOCKS; s++) {
		int first, last;
		rc_subset_range(s, BLOCKS, NV, &first, &last);
		for (size_t i = 0; i < np; i++)
			ones[i] = 1.0f;
		assert_int_equal(rc_engine_back(f->e, RC_BP_VOXEL, ones, bp, first, last, &err), 0);
		const rc_vec *c = NULL;
		assert_int_equal(rc_colsum_get(cs, s, scratch, &c, &err), 0);
		assert_int_equal(rc_bk_download(f->b, c, got, &err), 0);
		float mx = 0.0f;
		for (size_t i = 0; i < nvox; i++)
			mx = bp[i] > mx ? bp[i] : mx;
		assert_true(mx > 0.0f);
		for (size_t i = 0; i < nvox; i++) {
			double want = bp[i] > RC_COLSUM_REL_EPS * mx ? 1.0 / bp[i] : 0.0;
			double d = want > 0 ? fabs(got[i] - want) / want : fabs((double)got[i]);
			worst = d > worst ? d : worst;
		}
	}
	rc_bk_vec_free(f->b, scratch);
	free(ones);
	free(bp);
	free(got);
	return worst;
}

static void check_way(int nu, int tilted, int cache, rc_colsum_way want, const char *what)
{
	fixture f;
	open_fixture(&f, nu, tilted);
	rc_vec *ones = NULL;
	rc_colsum *cs = NULL;
	rc_err err;
	assert_int_equal(rc_bk_vec_new(f.b, RC_SPACE_PROJ, &ones, &err), 0);
	assert_int_equal(rc_colsum_new(f.b, RC_BP_VOXEL, BLOCKS, cache, ones, &cs, &err), 0);
	static const char *const ways[] = { "kept", "closed form", "recomputed" };
	double worst = worst_difference(&f, cs);
	print_message("%s: %s, largest relative difference from 1 / B_s(1) %.3g (bound %g, colsum.h)\n", what,
		      ways[rc_colsum_way_of(cs)], worst, RC_COLSUM_FORM_TOL);
	assert_int_equal(rc_colsum_way_of(cs), want);
	assert_true(worst < RC_COLSUM_FORM_TOL);
	rc_colsum_free(cs);
	rc_bk_vec_free(f.b, ones);
	close_fixture(&f);
}

static void test_closed_form(void **s)
{
	(void)s;
	check_way(60, 0, 0, RC_COLSUM_FORM, "cone, volume inside the detector");
}

static void test_truncated_recomputes(void **s)
{
	(void)s;
	check_way(16, 0, 0, RC_COLSUM_RECOMPUTED, "cone, detector narrower than the volume");
}

static void test_matrices_recompute(void **s)
{
	(void)s;
	check_way(60, 1, 0, RC_COLSUM_RECOMPUTED, "tilted matrices");
}

static void test_kept(void **s)
{
	(void)s;
	check_way(60, 0, 1, RC_COLSUM_KEPT, "cone, every block kept");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closed_form),
		cmocka_unit_test(test_truncated_recomputes),
		cmocka_unit_test(test_matrices_recompute),
		cmocka_unit_test(test_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
