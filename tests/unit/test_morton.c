/*
 * test_morton: the pseudo-Morton ordering is a permutation for any extents,
 * equals paper 001 Alg. 2 where Alg. 2 applies, groups bx x by tiles and
 * tiles of tiles as the paper describes, and moves vectors there and back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "projectors/morton.h"

static void check_perm(int na, int nb, int bx, int by)
{
	int32_t *p = NULL;
	rc_err err;
	assert_int_equal(rc_morton_perm(na, nb, bx, by, &p, &err), 0);
	int n = na * nb;
	char *seen = calloc((size_t)n, 1);
	for (int i = 0; i < n; i++) {
		assert_true(p[i] >= 0 && p[i] < n);
		assert_int_equal(seen[p[i]], 0);
		seen[p[i]] = 1;
	}
	free(seen);
	free(p);
}

static void test_is_permutation(void **state)
{
	(void)state;
	static const int ext[][2] = { { 1, 1 }, { 3, 5 }, { 16, 4 }, { 17, 5 }, { 128, 128 }, { 100, 37 },
				      { 512, 720 }, { 45, 720 }, { 7, 1000 } };
	for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
		check_perm(ext[i][0], ext[i][1], 4, 2);
		check_perm(ext[i][0], ext[i][1], 2, 2);
		check_perm(ext[i][0], ext[i][1], 8, 1);
	}
}

/* Where no padding is needed the ranked permutation is Alg. 2 itself. */
static void test_equals_alg2(void **state)
{
	(void)state;
	int32_t *p = NULL;
	rc_err err;
	int na = 64, nb = 24;
	assert_int_equal(rc_morton_perm(na, nb, 4, 2, &p, &err), 0);
	for (int b = 0; b < nb; b++)
		for (int a = 0; a < na; a++)
			assert_int_equal(p[b * na + a], rc_morton_alg2(a, b, 4, 2, nb));
	free(p);
}

/* The structure the ordering is for, checked from the coordinates rather
 * than from the formula: every run of 8 new indices is one 4 x 2 tile, every
 * run of 64 one 16 x 4 tile of tiles. */
static void test_tiles(void **state)
{
	(void)state;
	int na = 48, nb = 12, n = na * nb;
	int32_t *p = NULL;
	rc_err err;
	assert_int_equal(rc_morton_perm(na, nb, 4, 2, &p, &err), 0);
	int *ia = malloc(sizeof(int) * n), *ib = malloc(sizeof(int) * n);
	for (int b = 0; b < nb; b++)
		for (int a = 0; a < na; a++) {
			ia[p[b * na + a]] = a;
			ib[p[b * na + a]] = b;
		}
	for (int run = 8; run <= 64; run *= 8) {
		int ta = run == 8 ? 4 : 16, tb = run == 8 ? 2 : 4;
		for (int s = 0; s < n; s += run)
			for (int i = s; i < s + run; i++) {
				assert_int_equal(ia[i] / ta, ia[s] / ta);
				assert_int_equal(ib[i] / tb, ib[s] / tb);
			}
	}
	free(ia);
	free(ib);
	free(p);
}

static void test_identity_and_errors(void **state)
{
	(void)state;
	int32_t *p = NULL;
	rc_err err;
	assert_int_equal(rc_morton_perm(10, 7, 1, 1, &p, &err), 0);
	for (int b = 0; b < 7; b++)
		for (int a = 0; a < 10; a++)
			assert_int_equal(p[b * 10 + a], a * 7 + b);
	free(p);
	p = NULL;
	assert_int_equal(rc_morton_perm(10, 7, 3, 2, &p, &err), RC_EINVAL);
	assert_null(p);
	assert_int_equal(rc_morton_perm(0, 7, 4, 2, &p, &err), RC_EINVAL);
}

static void test_apply_roundtrip(void **state)
{
	(void)state;
	int na = 21, nb = 13, n = na * nb, nc = 3, nout = n + 11;
	int32_t *p = NULL;
	rc_err err;
	assert_int_equal(rc_morton_perm(na, nb, 4, 2, &p, &err), 0);
	float *in = malloc(sizeof(float) * n * nc), *mid = malloc(sizeof(float) * nout * nc),
	      *back = malloc(sizeof(float) * n * nc);
	for (int i = 0; i < n * nc; i++)
		in[i] = (float)i + 0.5f;
	for (int i = 0; i < nout * nc; i++)
		mid[i] = -1;
	rc_perm_apply(p, n, nout, nc, in, mid);
	for (int i = 0; i < n; i++)
		for (int c = 0; c < nc; c++)
			assert_true(mid[p[i] * nc + c] == in[i * nc + c]);
	for (int i = n * nc; i < nout * nc; i++)
		assert_true(mid[i] == 0);
	rc_perm_unapply(p, n, nc, mid, back);
	assert_memory_equal(in, back, sizeof(float) * n * nc);
	free(in);
	free(mid);
	free(back);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_is_permutation), cmocka_unit_test(test_equals_alg2),
		cmocka_unit_test(test_tiles),          cmocka_unit_test(test_identity_and_errors),
		cmocka_unit_test(test_apply_roundtrip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
