/*
 * The footprint pair's column loops (core/projectors/proj_footprint_col.h)
 * are each other's exact transpose: on one voxel column the forward's
 * weight of every (voxel m, row k) pair, read from rc_fpf_fwd_col_* on
 * the unit vector e_m, equals bit for bit the back's, read from
 * rc_fpf_bwd_col_* on e_k, on every ISA path this CPU runs (and the
 * paths equal each other).  The columns put a voxel's edge within a few
 * ulps of a row's edge, where a first index computed by rounding can
 * leave out a pair the other side keeps: a column where it did
 * (S = 0.879588107, B = 498.663483: the forward dropped (590, 1019), the
 * back kept it) and a sweep of such columns at S from 0.15 to 6.5, both
 * directions of v.
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

#include "projectors/proj_cpu.h"
#include "projectors/proj_footprint_col.h"

typedef void (*fwd_fn)(const float *restrict, const rc_fpf_col *, const float *restrict, int, float *restrict, int,
		       float *restrict);
typedef void (*bwd_fn)(float *restrict, const rc_fpf_col *, const float *restrict, int, const float *restrict, int,
		       float *restrict);
static const fwd_fn fwds[RC_ISA_COUNT] = { rc_fpf_fwd_col_baseline, rc_fpf_fwd_col_avx2, rc_fpf_fwd_col_avx512 };
static const bwd_fn bwds[RC_ISA_COUNT] = { rc_fpf_bwd_col_baseline, rc_fpf_bwd_col_avx2, rc_fpf_bwd_col_avx512 };

/* A column with lower edge B and voxel height S (pixel units) over a
 * detector column of nv rows; 0 when it misses it (rc_fpf_col_init's
 * clipping, from B directly). */
static int col_at(rc_fpf_col *c, double B, double S, int nz, int rev, int nv)
{
	/* rc_fpf_col_init's B is V0 (+ (nz - 1) dv when rev) - S / 2: give
	 * it the V0 that lands on B, then set B itself (the loops read B) */
	if (!rc_fpf_col_init(c, rev ? B + 0.5 * S + (nz - 1) * S : B + 0.5 * S, rev ? -S : S, nz, nv))
		return 0;
	c->B = B;
	c->S = S;
	double top = B + nz * S;
	c->k0 = B <= -0.5 ? 0 : (int)(B + 0.5);
	c->k1 = top >= nv - 0.5 ? nv - 1 : (int)(top + 0.5);
	return c->k0 <= c->k1;
}

/* The column's matrix both ways on ISA isa: fa[k * nz + m] from the
 * forward on e_m, ba[k * nz + m] from the back on e_k.  Stored voxel
 * index m (rev: z = nz - 1 - m is applied by the loops themselves). */
static void both_ways(int isa, const rc_fpf_col *c, int nv, float *fa, float *ba)
{
	const int nz = c->nz;
	const float one = 1.0f;
	float *x = calloc((size_t)nz, sizeof *x), *img = calloc((size_t)nv, sizeof *img);
	float *t = calloc((size_t)nv + (size_t)nz + 16, sizeof *t), *acc = calloc((size_t)nz, sizeof *acc);
	assert_non_null(x);
	assert_non_null(img);
	assert_non_null(t);
	assert_non_null(acc);
	for (int m = 0; m < nz; m++) {
		x[m] = 1.0f;
		memset(img, 0, (size_t)nv * sizeof *img);
		fwds[isa](x, c, &one, 1, img, nv, t);
		for (int k = 0; k < nv; k++)
			fa[(size_t)k * nz + m] = img[k];
		x[m] = 0.0f;
	}
	memset(img, 0, (size_t)nv * sizeof *img);
	for (int k = 0; k < nv; k++) {
		img[k] = 1.0f;
		memset(acc, 0, (size_t)nz * sizeof *acc);
		bwds[isa](acc, c, &one, 1, img, nv, t);
		for (int m = 0; m < nz; m++)
			ba[(size_t)k * nz + m] = acc[m];
		img[k] = 0.0f;
	}
	free(x);
	free(img);
	free(t);
	free(acc);
}

/* Every pair's weight the same float both ways on every ISA path, and
 * the same on each path; returns the pairs with a weight. */
static long check_column(const rc_fpf_col *c, int nv)
{
	const size_t n = (size_t)nv * (size_t)c->nz;
	float *fa = malloc(n * sizeof *fa), *ba = malloc(n * sizeof *ba), *f0 = malloc(n * sizeof *f0);
	assert_non_null(fa);
	assert_non_null(ba);
	assert_non_null(f0);
	long pairs = 0;
	for (int isa = 0; isa < RC_ISA_COUNT; isa++) {
		if (!rc_cpu_isa_supported((rc_cpu_isa)isa))
			continue;
		both_ways(isa, c, nv, fa, ba);
		for (size_t i = 0; i < n; i++)
			if (memcmp(fa + i, ba + i, sizeof *fa)) {
				fail_msg("%s: S %.9g B %.9g nz %d rev %d: pair (m %zu, k %zu) forward %.9g, back %.9g",
					 rc_cpu_isa_name((rc_cpu_isa)isa), c->S, c->B, c->nz, c->rev, i % (size_t)c->nz,
					 i / (size_t)c->nz, fa[i], ba[i]);
			}
		if (isa == 0) {
			memcpy(f0, fa, n * sizeof *fa);
			for (size_t i = 0; i < n; i++)
				pairs += fa[i] != 0.0f;
		} else {
			assert_memory_equal(f0, fa, n * sizeof *fa);
		}
	}
	free(fa);
	free(ba);
	free(f0);
	return pairs;
}

static void test_dropped_pair_column(void **s)
{
	(void)s;
	rc_fpf_col c;
	assert_true(col_at(&c, 498.663483, 0.879588107, 600, 0, 1030));
	long pairs = check_column(&c, 1030);
	print_message("the column of the dropped pair (S 0.879588107, B 498.663483): %ld pairs, the same both ways\n", pairs);
	assert_true(pairs > 600);
}

/* Columns whose voxel edge m sits within +-4 ulps (of B) of row edge
 * k - 1/2: B = k - 1/2 - m S, stepped by ulps. */
static void test_edge_sweep(void **s)
{
	(void)s;
	const int nz = 40, nv = 300;
	uint64_t st = 0x9e3779b97f4a7c15u;
	long cols = 0, pairs = 0;
	for (int i = 0; i < 160; i++) {
		st = st * 6364136223846793005u + 1442695040888963407u;
		const double u = (double)(st >> 11) / 9007199254740992.0;
		const float S = (float)(0.15 + 6.35 * u);
		const int m = 1 + (int)((st >> 7) % (nz - 1)), k = 40 + (int)((st >> 17) % 60);
		float B = (float)(k - 0.5) - (float)m * S;
		for (int d = -4; d <= 4; d++) {
			float b = B;
			for (int j = 0; j < (d < 0 ? -d : d); j++)
				b = nextafterf(b, d < 0 ? -INFINITY : INFINITY);
			rc_fpf_col c;
			if (!col_at(&c, b, S, nz, (i + d) & 1, nv))
				continue;
			pairs += check_column(&c, nv);
			cols++;
		}
	}
	print_message("edge sweep: %ld columns, %ld pairs, the same both ways on every ISA path\n", cols, pairs);
	assert_true(cols > 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dropped_pair_column),
		cmocka_unit_test(test_edge_sweep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
