/*
 * fuzz_sse: reconctl's event-stream parser (clients/rctl_sse.c).  The same
 * stream is fed twice, in two different splits into pieces, and must give
 * the same events, the same stop and the same failure: the parser's promise
 * that pieces do not matter (tests/unit/test_rctl_sse.c checks it on one
 * stream).  Every event's name is short and holds no line end; its data
 * holds no '\r' (a line end inside data is the '\n' that joins data lines).
 *
 * Input: byte 0 = how often the rest repeats (1 + byte 0 % 4 times: lines
 * and events that span copies), byte 1 = the size of the pieces of the second feed (1..64),
 * byte 2 = stop after that many events (0 = never); the rest is the stream.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../clients/rctl_sse.h"

#define LOG_MAX (1u << 20)

typedef struct rec {
	char *log;
	size_t len, cap;
	int n, stop_after;
} rec;

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_sse: %s\n", what);
	abort();
}

static void append(rec *r, const char *s, size_t n)
{
	if (r->len + n + 1 > LOG_MAX) /* both runs cut at the same place */
		n = LOG_MAX - 1 - r->len;
	if (r->len + n + 1 > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		while (cap < r->len + n + 1)
			cap *= 2;
		char *nb = realloc(r->log, cap);
		if (!nb)
			fail("out of memory");
		r->log = nb;
		r->cap = cap;
	}
	memcpy(r->log + r->len, s, n);
	r->len += n;
	r->log[r->len] = '\0';
}

static int on_event(void *ctx, const char *event, const char *data)
{
	rec *r = ctx;
	size_t en = strlen(event), dn = strlen(data);
	if (en == 0 || en >= 64 || strpbrk(event, "\r\n"))
		fail("event name empty, too long or with a line end");
	if (memchr(data, '\r', dn))
		fail("event data with a '\\r'");
	if (dn >= RCTL_SSE_MAX)
		fail("event data over the cap");
	append(r, "<", 1);
	append(r, event, en);
	append(r, "|", 1);
	append(r, data, dn);
	append(r, ">", 1);
	r->n++;
	return r->stop_after && r->n >= r->stop_after;
}

/* Feeds reps copies of body, each copy cut into pieces of `piece` bytes
 * (0 = the copy whole); returns the first nonzero rc of a feed, or 0. */
static int run(rec *r, const char *body, size_t n, size_t reps, size_t piece)
{
	rctl_sse *p = rctl_sse_new(on_event, r);
	if (!p)
		fail("rctl_sse_new");
	int rc = 0;
	for (size_t k = 0; k < reps && !rc; k++) {
		size_t step = piece ? piece : n;
		for (size_t at = 0; at < n && !rc; at += step)
			rc = rctl_sse_feed(p, body + at, n - at < step ? n - at : step);
		if (n == 0)
			rc = rctl_sse_feed(p, body, 0);
	}
	rctl_sse_free(p);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	const char *body = (const char *)data + 3;
	size_t n = size - 3;
	/* Not up to the 1 MiB cap: a pass over 1 MiB costs a second with
	 * libFuzzer's comparison hooks on every byte; test_rctl_sse's test_cap
	 * covers it. */
	size_t reps = 1 + data[0] % 4;
	size_t piece = 1 + data[1] % 64;
	rec a = { .stop_after = data[2] }, b = { .stop_after = data[2] };
	int ra = run(&a, body, n, reps, 0);
	int rb = run(&b, body, n, reps, piece);
	if (ra != rb || a.n != b.n || a.len != b.len || (a.len && memcmp(a.log, b.log, a.len))) {
		fprintf(stderr, "fuzz_sse: whole copies gave rc %d, %d events; pieces of %zu gave rc %d, %d events\n", ra,
			a.n, piece, rb, b.n);
		fail("the split changed the events");
	}
	if (ra < -1 || ra > 1)
		fail("rctl_sse_feed returned something else than -1, 0 or 1");
	if (ra == 1 && !(a.stop_after && a.n == a.stop_after))
		fail("stopped without being asked to");
	free(a.log);
	free(b.log);
	return 0;
}
