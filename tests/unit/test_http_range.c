/*
 * Tests of server/http/http_range.c, the Range header of volume downloads: the
 * table is its contract (http_range.h), one row per kind of header: the
 * three forms, clamping, the unsatisfiable ones (416), and everything that
 * must be ignored (200 with the whole body), including the malformed
 * numbers strtoull used to accept (a sign, blanks, "0--1") that the fuzzer
 * (tests/fuzz/fuzz_range.c) found.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "http/http_range.h"

static const struct row {
	const char *h;
	uint64_t total;
	int rc;
	uint64_t first, last; /* when rc == 1 */
} table[] = {
	/* the three forms */
	{ "bytes=3-9", 1024, 1, 3, 9 },
	{ "bytes=0-0", 1024, 1, 0, 0 },
	{ "bytes=1000-", 1024, 1, 1000, 1023 },
	{ "bytes=-2", 1024, 1, 1022, 1023 },
	{ "BYTES=3-9", 1024, 1, 3, 9 },                 /* range units are case-insensitive */
	/* clamped to the end */
	{ "bytes=1000-5000", 1024, 1, 1000, 1023 },
	{ "bytes=-5000", 1024, 1, 0, 1023 },
	{ "bytes=0-99999999999999999999999", 1024, 1, 0, 1023 },
	{ "bytes=-99999999999999999999999", 1024, 1, 0, 1023 },
	{ "bytes=0-18446744073709551615", 10, 1, 0, 9 },
	/* unsatisfiable: 416 */
	{ "bytes=1024-", 1024, -1, 0, 0 },
	{ "bytes=1024-2000", 1024, -1, 0, 0 },
	{ "bytes=99999999999999999999999-", 1024, -1, 0, 0 },
	{ "bytes=-0", 1024, -1, 0, 0 },
	{ "bytes=0-", 0, -1, 0, 0 },
	{ "bytes=-1", 0, -1, 0, 0 },
	/* no usable Range: the whole body */
	{ NULL, 1024, 0, 0, 0 },
	{ "", 1024, 0, 0, 0 },
	{ "bytes=", 1024, 0, 0, 0 },
	{ "bytes=-", 1024, 0, 0, 0 },
	{ "bytes=5", 1024, 0, 0, 0 },
	{ "bytes=9-3", 1024, 0, 0, 0 },
	{ "bytes=0-1,5-6", 1024, 0, 0, 0 },
	{ "bytes=0-1, 5-6", 1024, 0, 0, 0 },
	{ "items=0-1", 1024, 0, 0, 0 },
	{ "bytes =0-1", 1024, 0, 0, 0 },
	{ "bytes= 3-9", 1024, 0, 0, 0 },                /* strtoull skipped the blank */
	{ "bytes=+3-9", 1024, 0, 0, 0 },                /* ... and took the sign */
	{ "bytes=3-+9", 1024, 0, 0, 0 },
	{ "bytes=0--1", 1024, 0, 0, 0 },                /* "-1" wrapped to 2^64-1: the whole file */
	{ "bytes=--5", 1024, 0, 0, 0 },
	{ "bytes=- 5", 1024, 0, 0, 0 },
	{ "bytes=-+5", 1024, 0, 0, 0 },
	{ "bytes=3-9 ", 1024, 0, 0, 0 },
	{ "bytes=0x10-", 1024, 0, 0, 0 },
	{ "bytes=1-2-3", 1024, 0, 0, 0 },
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		const struct row *t = &table[i];
		uint64_t a = 77, b = 88;
		int rc = http_range_parse(t->h, t->total, &a, &b);
		if (rc != t->rc || (rc == 1 && (a != t->first || b != t->last)) || (rc != 1 && (a != 77 || b != 88)))
			print_error("\"%s\" of %llu: got %d [%llu, %llu], want %d [%llu, %llu]\n", t->h ? t->h : "(null)",
				    (unsigned long long)t->total, rc, (unsigned long long)a, (unsigned long long)b, t->rc,
				    (unsigned long long)t->first, (unsigned long long)t->last);
		assert_int_equal(rc, t->rc);
		if (rc == 1) {
			assert_int_equal(a, t->first);
			assert_int_equal(b, t->last);
		} else { /* outputs are set only on success */
			assert_int_equal(a, 77);
			assert_int_equal(b, 88);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
