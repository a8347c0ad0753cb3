/*
 * rctl_sse: an incremental parser of a text/event-stream body (the WHATWG
 * "server-sent events" format) for reconctl's `watch`.
 *
 * Bytes arrive in whatever pieces the network delivers; the parser keeps the
 * unfinished line and the fields of the event being read.  An event is
 * dispatched at its blank line: "event:" names it ("message" when absent),
 * "data:" lines are joined with '\n', ":" comment lines (keep-alives) and
 * unknown fields are ignored, "\n", "\r\n" and "\r" all end a line.
 *
 * Invariants: no line or event may exceed RCTL_SSE_MAX bytes (a server that
 * sends more is broken or hostile; the parser fails rather than grow).
 * Life cycle: rctl_sse_new, rctl_sse_feed as often as needed, rctl_sse_free
 * (NULL is fine).
 */
#ifndef RCTL_SSE_H
#define RCTL_SSE_H

#include <stddef.h>

#define RCTL_SSE_MAX (1u << 20)

/* Called once per complete event; a nonzero return stops the stream. */
typedef int (*rctl_event_fn)(void *ctx, const char *event, const char *data);

typedef struct rctl_sse rctl_sse;

rctl_sse *rctl_sse_new(rctl_event_fn fn, void *ctx);
void rctl_sse_free(rctl_sse *p);

/* Returns 0 when all of buf was consumed, 1 when the callback asked to stop
 * (the rest of buf is dropped), -1 when a line or event exceeds the cap or
 * memory ran out. */
int rctl_sse_feed(rctl_sse *p, const char *buf, size_t n);

#endif
