/*
 * rctl_sse: see rctl_sse.h.  Two growable buffers: `line` holds the line not
 * yet ended, `data` the joined data lines of the current event.  A '\r' ends
 * a line at once; a '\n' right after it is then skipped (pending_lf), so
 * "\r\n" split across two feeds still counts once.
 */
#include "rctl_sse.h"

#include <stdlib.h>
#include <string.h>

struct rctl_sse {
	rctl_event_fn fn;
	void *ctx;
	char *line;
	size_t line_len, line_cap;
	char *data;
	size_t data_len, data_cap;
	int has_data;
	char event[64];
	int pending_lf;
};

rctl_sse *rctl_sse_new(rctl_event_fn fn, void *ctx)
{
	rctl_sse *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->fn = fn;
	p->ctx = ctx;
	return p;
}

void rctl_sse_free(rctl_sse *p)
{
	if (!p)
		return;
	free(p->line);
	free(p->data);
	free(p);
}

/* Makes room for `need` bytes plus a NUL; fails past RCTL_SSE_MAX. */
static int reserve(char **buf, size_t *cap, size_t need)
{
	if (need + 1 > RCTL_SSE_MAX)
		return -1;
	if (need + 1 <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 256;
	while (ncap < need + 1)
		ncap *= 2;
	if (ncap > RCTL_SSE_MAX)
		ncap = RCTL_SSE_MAX;
	char *nb = realloc(*buf, ncap);
	if (!nb)
		return -1;
	*buf = nb;
	*cap = ncap;
	return 0;
}

static int dispatch(rctl_sse *p)
{
	int rc = 0;
	if (p->has_data) {
		p->data[p->data_len] = '\0';
		rc = p->fn(p->ctx, p->event[0] ? p->event : "message", p->data) ? 1 : 0;
	}
	p->data_len = 0;
	p->has_data = 0;
	p->event[0] = '\0';
	return rc;
}

/* One complete line (without its terminator) in p->line[0..line_len). */
static int process_line(rctl_sse *p)
{
	char *l = p->line;
	size_t n = p->line_len;
	if (n == 0)
		return dispatch(p);
	if (l[0] == ':')
		return 0;
	size_t fl = 0;
	while (fl < n && l[fl] != ':')
		fl++;
	const char *val = l + fl;
	size_t vl = 0;
	if (fl < n) {
		val = l + fl + 1;
		vl = n - fl - 1;
		if (vl > 0 && *val == ' ') {
			val++;
			vl--;
		}
	}
	if (fl == 4 && memcmp(l, "data", 4) == 0) {
		size_t need = p->data_len + (p->has_data ? 1 : 0) + vl;
		if (reserve(&p->data, &p->data_cap, need) < 0)
			return -1;
		if (p->has_data)
			p->data[p->data_len++] = '\n';
		memcpy(p->data + p->data_len, val, vl);
		p->data_len += vl;
		p->has_data = 1;
	} else if (fl == 5 && memcmp(l, "event", 5) == 0) {
		if (vl >= sizeof p->event)
			vl = sizeof p->event - 1;
		memcpy(p->event, val, vl);
		p->event[vl] = '\0';
	}
	return 0;
}

int rctl_sse_feed(rctl_sse *p, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		if (p->pending_lf) {
			p->pending_lf = 0;
			if (c == '\n')
				continue;
		}
		if (c == '\r' || c == '\n') {
			p->pending_lf = (c == '\r');
			int rc = process_line(p);
			p->line_len = 0;
			if (rc != 0)
				return rc;
			continue;
		}
		if (reserve(&p->line, &p->line_cap, p->line_len + 1) < 0)
			return -1;
		p->line[p->line_len++] = c;
	}
	return 0;
}
