/*
 * Tests of server/http/jscan.c, the pre-scan that bounds a JSON body's parse: a
 * table of bodies against small limits (depth, objects, arrays, values),
 * strings that hide brackets and quotes, and the spec limits against the
 * largest legitimate spec (SPEC_MAX_VIEWS matrices) and the amplifier that
 * motivated it ({"zz":[{},{},...]}).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/jscan.h"
#include "spec.h"

static const jscan_limits small = { .max_depth = 3, .max_objects = 2, .max_arrays = 2, .max_values = 8 };

static const struct row {
	const char *body;
	int ok;
} table[] = {
	{ "{}", 1 },
	{ "{\"a\": [1, 2, 3]}", 1 },
	{ "[[[]]]", 0 },                                  /* 3 arrays */
	{ "[{\"a\": {\"b\": 1}}]", 1 },                  /* depth 3 */
	{ "[{\"a\": {\"b\": [1]}}]", 0 },                /* depth 4 */
	{ "[{}, {}, {}]", 0 },                            /* 3 objects */
	{ "[1, 2, 3, 4, 5, 6, 7]", 1 },                   /* 8 values with the array */
	{ "[1, 2, 3, 4, 5, 6, 7, 8]", 0 },
	{ "[true, false, null, -1.5e3, \"x\", 0]", 1 },
	{ "[\"[[[[{{{{\", \"\\\"[[[[\", \"\\\\\"]", 1 },   /* brackets and quotes in strings */
	{ "   ", 1 },
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		rc_err err;
		int rc = jscan_check(table[i].body, strlen(table[i].body), &small, &err);
		if ((rc == 0) != table[i].ok)
			fail_msg("%s: expected %s, got %d", table[i].body, table[i].ok ? "ok" : "refused", rc);
		if (rc)
			assert_int_equal(rc, RC_ETOOBIG);
	}
}

/* Appends n copies of piece, separated by commas, inside prefix..suffix. */
static char *repeat(const char *prefix, const char *piece, size_t n, const char *suffix, size_t *len)
{
	size_t pl = strlen(piece);
	char *b = malloc(strlen(prefix) + n * (pl + 1) + strlen(suffix) + 1);
	assert_non_null(b);
	char *p = b + sprintf(b, "%s", prefix);
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? "," : "", piece);
	p += sprintf(p, "%s", suffix);
	*len = (size_t)(p - b);
	return b;
}

static void test_spec_limits(void **state)
{
	(void)state;
	rc_err err;
	size_t len;
	char *b = repeat("{\"label\": \"m\", \"geometry\": {\"type\": \"matrices\", \"matrices\": [",
			 "[1.5,0,0,0,0,1,0,0,0,0,1,1000]", SPEC_MAX_VIEWS, "]}}", &len);
	assert_int_equal(jscan_check(b, len, &jscan_spec_limits, &err), 0);
	free(b);
	b = repeat("{\"zz\": [", "{}", 100000, "]}", &len);
	assert_int_equal(jscan_check(b, len, &jscan_spec_limits, &err), RC_ETOOBIG);
	free(b);
	b = repeat("[", "[]", SPEC_MAX_VIEWS + 300, "]", &len);
	assert_int_equal(jscan_check(b, len, &jscan_spec_limits, &err), RC_ETOOBIG);
	free(b);
	b = repeat("[", "0", 14 * (size_t)SPEC_MAX_VIEWS, "]", &len);
	assert_int_equal(jscan_check(b, len, &jscan_spec_limits, &err), RC_ETOOBIG);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_spec_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
