/*
 * Tests of server/http/http_error.c, the one mapping from a domain error to an
 * HTTP answer: the table below is the contract of docs/api.md ("Errors"),
 * row for row.  Every rc_code from -1 down to RC_CODE_MIN has exactly one
 * row, a status in 400..599 and a stable name of its own; a code added to
 * rc_error.h without a name, a status or a row here fails.  Then the JSON
 * body: {"error": {"code", "message"[, "field"]}}.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "http/http_error.h"
#include "util/rc_error.h"

static const struct row {
	rc_code code;
	unsigned status;
	const char *name; /* the JSON error code: clients match on it, never change it */
} table[] = {
	{ RC_EINVAL, 400, "invalid_argument" },
	{ RC_ENOMEM, 503, "out_of_memory" },
	{ RC_ETOOBIG, 400, "too_big" },
	{ RC_EIO, 500, "io_error" },
	{ RC_EDEVICE, 500, "device_error" },
	{ RC_ECANCELLED, 409, "cancelled" },
	{ RC_EUNSUPPORTED, 422, "unsupported" },
	{ RC_ENOTFOUND, 404, "not_found" },
	{ RC_ESTATE, 409, "conflict" },
	{ RC_EINTERNAL, 500, "internal_error" },
	{ RC_EBADJSON, 400, "invalid_json" },
	{ RC_EBADID, 400, "invalid_id" },
	{ RC_EBODYTOOBIG, 413, "body_too_large" },
	{ RC_ENOSPACE, 507, "disk_full" },
	{ RC_EWRONGLEN, 422, "wrong_length" },
	{ RC_ENOLENGTH, 411, "length_required" },
	{ RC_EUNAUTH, 401, "unauthorized" },
	{ RC_EFORBIDDEN, 403, "forbidden" },
	{ RC_EMETHOD, 405, "method_not_allowed" },
	{ RC_EBADRANGE, 416, "range_not_satisfiable" },
	{ RC_EUNAVAIL, 503, "unavailable" },
};
#define NROWS (sizeof table / sizeof table[0])

/* Each row: the status and the name the table says. */
static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < NROWS; i++) {
		unsigned st = http_status_of(table[i].code);
		const char *name = rc_code_name(table[i].code);
		if (st != table[i].status || strcmp(name, table[i].name))
			print_error("code %d: status %u name %s, want %u %s\n", table[i].code, st, name,
				    table[i].status, table[i].name);
		assert_int_equal(st, table[i].status);
		assert_string_equal(name, table[i].name);
	}
}

/* Every code has one row, a client or server error status and a name that
 * no other code has; the numbers past RC_CODE_MIN are no codes. */
static void test_every_code(void **state)
{
	(void)state;
	assert_int_equal(NROWS, (size_t)-RC_CODE_MIN);
	for (int code = -1; code >= RC_CODE_MIN; code--) {
		int rows = 0;
		for (size_t i = 0; i < NROWS; i++)
			rows += (int)table[i].code == code;
		if (rows != 1)
			print_error("code %d (%s) has %d rows\n", code, rc_code_name(code), rows);
		assert_int_equal(rows, 1);
		unsigned st = http_status_of(code);
		assert_true(st >= 400 && st <= 599);
		const char *name = rc_code_name(code);
		assert_string_not_equal(name, "unknown_error");
		assert_string_not_equal(name, "ok");
		for (int other = code - 1; other >= RC_CODE_MIN; other--)
			assert_string_not_equal(name, rc_code_name(other));
	}
	/* RC_CODE_MIN is the last code: a new one must move it (and get a row). */
	assert_string_equal(rc_code_name(RC_CODE_MIN - 1), "unknown_error");
	assert_int_equal(http_status_of(RC_CODE_MIN - 1), 500);
	assert_int_equal(http_status_of(1), 500);
	/* An error answer for "no error" is a bug of the route. */
	assert_string_equal(rc_code_name(RC_OK), "ok");
	assert_int_equal(http_status_of(RC_OK), 500);
}

/* The numbers are stable (worker reports carry them): pin them. */
static void test_numbers_stable(void **state)
{
	(void)state;
	static const int want[] = { RC_EINVAL, RC_ENOMEM, RC_ETOOBIG, RC_EIO, RC_EDEVICE, RC_ECANCELLED,
				    RC_EUNSUPPORTED, RC_ENOTFOUND, RC_ESTATE, RC_EINTERNAL, RC_EBADJSON, RC_EBADID,
				    RC_EBODYTOOBIG, RC_ENOSPACE, RC_EWRONGLEN, RC_ENOLENGTH, RC_EUNAUTH,
				    RC_EFORBIDDEN, RC_EMETHOD, RC_EBADRANGE, RC_EUNAVAIL };
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		assert_int_equal(want[i], -(int)(i + 1));
}

/* The faults that are "too big" are told apart, each with one status. */
static void test_too_big_kinds(void **state)
{
	(void)state;
	assert_int_equal(http_status_of(RC_EBODYTOOBIG), 413); /* more bytes sent than allowed */
	assert_int_equal(http_status_of(RC_ETOOBIG), 400);     /* the spec asks for more than the limits */
	assert_int_equal(http_status_of(RC_ENOSPACE), 507);    /* the disk is full */
}

static void test_json_body(void **state)
{
	(void)state;
	rc_err e;
	rc_fail(&e, RC_EBODYTOOBIG, "Content-Length", "one view is %d bytes", 512);
	json_t *j = http_error_json(&e);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), 1);
	json_t *in = json_object_get(j, "error");
	assert_true(json_is_object(in));
	assert_int_equal(json_object_size(in), 3);
	assert_string_equal(json_string_value(json_object_get(in, "code")), "body_too_large");
	assert_string_equal(json_string_value(json_object_get(in, "field")), "Content-Length");
	assert_string_equal(json_string_value(json_object_get(in, "message")), "one view is 512 bytes");
	json_decref(j);

	/* No field: no "field" key. */
	rc_fail(&e, RC_EBADJSON, NULL, "not JSON");
	j = http_error_json(&e);
	in = json_object_get(j, "error");
	assert_int_equal(json_object_size(in), 2);
	assert_null(json_object_get(in, "field"));
	assert_string_equal(json_string_value(json_object_get(in, "code")), "invalid_json");
	json_decref(j);
}

/* Messages quote what clients sent: a path of any bytes, cut to a length,
 * maybe in the middle of a character.  The body is still JSON, with '?' for
 * each byte that is not UTF-8 (found by tests/fuzz/fuzz_upload.c: a 404 for
 * a path with such bytes had no body, and the client no answer). */
static void test_json_not_utf8(void **state)
{
	(void)state;
	static const struct {
		const char *msg, *want;
	} cases[] = {
		{ "no such endpoint: /v1/jobs/x/projections512\xf1\xf5", "no such endpoint: /v1/jobs/x/projections512??" },
		{ "cut: \xc3\xa9\xe2\x82", "cut: \xc3\xa9??" },           /* e-acute, then half a euro sign */
		{ "overlong \xc0\xaf, surrogate \xed\xa0\x80", "overlong ??, surrogate ???" },
		{ "past U+10FFFF \xf4\x90\x80\x80", "past U+10FFFF ????" },
		{ "fine \xf0\x9f\x99\x82 \xe2\x82\xac", "fine \xf0\x9f\x99\x82 \xe2\x82\xac" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		rc_err e;
		rc_fail(&e, RC_ENOTFOUND, "k\xff", "%s", cases[i].msg);
		json_t *j = http_error_json(&e);
		assert_non_null(j);
		json_t *in = json_object_get(j, "error");
		assert_string_equal(json_string_value(json_object_get(in, "message")), cases[i].want);
		assert_string_equal(json_string_value(json_object_get(in, "field")), "k?");
		char *text = json_dumps(j, JSON_COMPACT);
		assert_non_null(text);
		free(text);
		json_decref(j);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_every_code),
		cmocka_unit_test(test_numbers_stable),
		cmocka_unit_test(test_too_big_kinds),
		cmocka_unit_test(test_json_body),
		cmocka_unit_test(test_json_not_utf8),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
