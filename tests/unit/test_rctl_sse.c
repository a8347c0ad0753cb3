/*
 * Tests of reconctl's event-stream parser and id check (clients/rctl_sse.c,
 * clients/rctl_job.c): every way a stream may be split into pieces must give
 * the same events, and what the WHATWG format says about fields holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../clients/rctl_job.h"
#include "../../clients/rctl_sse.h"

typedef struct rec {
	char log[4096];
	int n;
	int stop_after; /* 0 = never */
} rec;

static int on_event(void *ctx, const char *event, const char *data)
{
	rec *r = ctx;
	size_t len = strlen(r->log);
	snprintf(r->log + len, sizeof r->log - len, "<%s|%s>", event, data);
	r->n++;
	return r->stop_after && r->n >= r->stop_after;
}

static const char stream[] =
	": keep-alive\r\n"
	"event: state\r\n"
	"data: {\"state\":\"running\"}\r\n"
	"\r\n"
	"data:first\n"
	"data: second\n"
	"id: 7\n"
	"retry: 100\n"
	"\n"
	"event: progress\r"
	"data: {\"iteration\":2}\r"
	"\r"
	"event: lonely\n"
	"\n"
	"data\n"
	"\n";

static const char expect[] =
	"<state|{\"state\":\"running\"}>"
	"<message|first\nsecond>"
	"<progress|{\"iteration\":2}>"
	"<message|>";

/* The whole stream at once, then in every split into two pieces, then byte by byte. */
static void test_splits(void **state)
{
	(void)state;
	size_t n = strlen(stream);
	for (size_t cut = 0; cut <= n; cut++) {
		rec r = { 0 };
		rctl_sse *p = rctl_sse_new(on_event, &r);
		assert_non_null(p);
		assert_int_equal(rctl_sse_feed(p, stream, cut), 0);
		assert_int_equal(rctl_sse_feed(p, stream + cut, n - cut), 0);
		assert_string_equal(r.log, expect);
		rctl_sse_free(p);
	}
	rec r = { 0 };
	rctl_sse *p = rctl_sse_new(on_event, &r);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rctl_sse_feed(p, stream + i, 1), 0);
	assert_string_equal(r.log, expect);
	rctl_sse_free(p);
}

static void test_stop_and_unfinished(void **state)
{
	(void)state;
	rec r = { .stop_after = 1 };
	rctl_sse *p = rctl_sse_new(on_event, &r);
	assert_int_equal(rctl_sse_feed(p, "data: a\n\ndata: b\n\n", 18), 1);
	assert_int_equal(r.n, 1);
	rctl_sse_free(p);

	rec q = { 0 };
	p = rctl_sse_new(on_event, &q);
	/* No blank line yet: nothing is dispatched. */
	assert_int_equal(rctl_sse_feed(p, "data: a\n", 8), 0);
	assert_int_equal(q.n, 0);
	rctl_sse_free(p);
	rctl_sse_free(NULL);
}

static void test_cap(void **state)
{
	(void)state;
	rec r = { 0 };
	rctl_sse *p = rctl_sse_new(on_event, &r);
	size_t n = RCTL_SSE_MAX + 16;
	char *big = malloc(n);
	assert_non_null(big);
	memset(big, 'x', n);
	assert_int_equal(rctl_sse_feed(p, big, n), -1);
	free(big);
	rctl_sse_free(p);
}

static void test_valid_id(void **state)
{
	(void)state;
	static const struct { const char *id; int ok; } cases[] = {
		{ "0d6c9e4a-1111-2222-3333-444455556666", 1 },
		{ "0D6C9E4A-ABCD-ef01-3333-444455556666", 1 },
		{ "0d6c9e4a-1111-2222-3333-44445555666", 0 },
		{ "0d6c9e4a-1111-2222-3333-4444555566667", 0 },
		{ "0d6c9e4a11111-2222-3333-444455556666", 0 },
		{ "0d6c9e4g-1111-2222-3333-444455556666", 0 },
		{ "../../../etc/passwd-0000-000000000000", 0 },
		{ "", 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		assert_int_equal(rctl_valid_id(cases[i].id), cases[i].ok);
	assert_int_equal(rctl_valid_id(NULL), 0);
}

static void test_job_view(void **state)
{
	(void)state;
	json_t *j = json_loads("{\"id\":\"x\",\"state\":\"running\","
			       "\"progress\":{\"iteration\":3,\"of\":12,\"eta_s\":4.5}}", 0, NULL);
	rctl_job_view v;
	rctl_job_view_of(j, &v);
	assert_string_equal(v.state, "running");
	assert_int_equal(v.iteration, 3);
	assert_int_equal(v.of, 12);
	assert_true(v.fraction > 0.2499 && v.fraction < 0.2501);
	json_decref(j);
	j = json_loads("{\"state\":\"failed\",\"error\":{\"code\":\"x\",\"message\":\"boom\"}}", 0, NULL);
	rctl_job_view_of(j, &v);
	assert_string_equal(v.error, "boom");
	assert_int_equal(rctl_state_exit(v.state), 4);
	assert_true(rctl_state_terminal("cancelled"));
	assert_false(rctl_state_terminal("queued"));
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_splits),
		cmocka_unit_test(test_stop_and_unfinished),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_valid_id),
		cmocka_unit_test(test_job_view),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
