/*
 * http_sse: GET /v1/jobs/{id}/events, server-sent events.
 *
 * The stream starts with a "state" event (the whole job), then relays the
 * hub's events for this job: "state" per change, "progress" per iteration.
 * The reader callback blocks on the hub (this connection has its own thread)
 * for up to KEEPALIVE_MS and sends a ": keep-alive" comment when nothing
 * happened, which also keeps proxies and MHD's idle timeout from closing it.
 * It ends after the state event of a final state (and, for a job that
 * pushes to a PACS, once no push is pending or sending), on "deleted", and at
 * shutdown.  The hub position is taken before the initial state is read, so
 * no change between the two is lost (at worst one is sent twice).
 *
 * A shared store (PostgreSQL, a cluster): the hub has only this node's
 * events, so the stream also reads the job's row every POLL_MS and sends a
 * "state" event when its state (or delivery) changed and a "progress" event
 * when the progress the running node wrote into the row changed: another
 * node's events arrive within POLL_MS plus that node's own period (0.5 s,
 * runner.c).  SQLite (one node) never polls.
 *
 * Patient fields: whether the stream's token sees them is decided once, at
 * the start (http_sees_phi; the owner never changes), and audited then;
 * without them every "state" event is the redacted Job (app_job_redact).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_routes.h"
#include "util/rc_clock.h"

#define KEEPALIVE_MS 15000
#define POLL_MS 500

struct sse {
	app *a;
	char id[37];
	unsigned long long seq;
	char *pending;      /* formatted text not yet sent */
	size_t pend_len, pend_off;
	int done;           /* end after the pending text */
	int poll;           /* a shared store: read the row every POLL_MS */
	char seen[48];      /* the state and delivery last sent ("state/delivery") */
	char *seen_prog;    /* the progress last sent (as in the row), or NULL */
	double quiet_since; /* monotonic time of the last text (keep-alives) */
	int phi;            /* the token sees the job's patient fields */
};

/* The Job j as a state event's text for this stream (owned; NULL when out
 * of memory). */
static char *state_text(const struct sse *e, json_t *j)
{
	if (!e->phi)
		app_job_redact(j);
	return json_dumps(j, JSON_COMPACT);
}

/* "state/delivery" of a Job's JSON, the part whose change is a state event. */
static void state_key(const json_t *j, char *key, size_t n)
{
	const char *s = json_string_value(json_object_get(j, "state"));
	const char *d = json_string_value(json_object_get(j, "delivery"));
	snprintf(key, n, "%s/%s", s ? s : "", d ? d : "");
}

static void seen_progress(struct sse *e, const char *data)
{
	free(e->seen_prog);
	e->seen_prog = data ? strdup(data) : NULL;
}

/* The job (as JSON) has nothing more to report: a final state, and no push
 * to a PACS still to send (docs/pacs.md: the pushes' progress follows the
 * job's success on the same stream). */
static int job_done(const json_t *j)
{
	const char *s = json_string_value(json_object_get(j, "state"));
	const char *d = json_string_value(json_object_get(j, "delivery"));
	int fin = s && (!strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled"));
	return fin && !(d && (!strcmp(d, "waiting") || !strcmp(d, "sending")));
}

static int final_state(const char *data)
{
	json_t *j = json_loads(data, 0, NULL);
	int fin = j && job_done(j);
	json_decref(j);
	return fin;
}

static void set_pending(struct sse *e, const char *ev, const char *data)
{
	free(e->pending);
	e->pending = NULL;
	e->pend_len = e->pend_off = 0;
	size_t n = strlen(data) + strlen(ev) + 32;
	e->pending = malloc(n);
	if (!e->pending)
		return;
	if (ev[0] == ':')
		e->pend_len = (size_t)snprintf(e->pending, n, "%s\n\n", ev);
	else
		e->pend_len = (size_t)snprintf(e->pending, n, "event: %s\ndata: %s\n\n", ev, data);
}

/* The hub's state event data (the whole Job) as the pending event, without
 * the patient fields; nothing is sent when it cannot be redacted. */
static void redact_pending(struct sse *e, const char *data)
{
	json_t *j = json_loads(data, 0, NULL);
	char *s = j ? state_text(e, j) : NULL;
	json_decref(j);
	if (s) {
		set_pending(e, "state", s);
	} else {
		free(e->pending);
		e->pending = NULL;
		e->pend_len = e->pend_off = 0;
	}
	free(s);
}

/* The current job as a state event; 0 or -1 when the job is gone. */
static int state_event(struct sse *e)
{
	job_row row;
	if (store_get(e->a->st, e->id, 1, &row, NULL)) {
		set_pending(e, "deleted", "{}");
		e->done = 1;
		return -1;
	}
	json_t *j = app_job_json(e->a, &row);
	e->done = job_done(j);
	state_key(j, e->seen, sizeof e->seen);
	job_row_clear(&row);
	char *s = state_text(e, j);
	json_decref(j);
	set_pending(e, "state", s ? s : "{}");
	free(s);
	return 0;
}

/* A shared store: what changed in the row since the last text, as the
 * pending event; nothing pending when nothing did. */
static void poll_row(struct sse *e)
{
	job_row row;
	rc_err err;
	int rc = store_get(e->a->st, e->id, 1, &row, &err);
	if (rc == RC_ENOTFOUND) {
		set_pending(e, "deleted", "{}");
		e->done = 1;
		return;
	}
	if (rc)
		return; /* the store is away: keep-alives until it is back */
	json_t *j = app_job_json(e->a, &row);
	char key[48];
	state_key(j, key, sizeof key);
	if (strcmp(key, e->seen)) {
		char *s = state_text(e, j);
		set_pending(e, "state", s ? s : "{}");
		free(s);
		snprintf(e->seen, sizeof e->seen, "%s", key);
		e->done = job_done(j);
	} else if (row.state == JOB_RUNNING && row.progress && (!e->seen_prog || strcmp(row.progress, e->seen_prog))) {
		set_pending(e, "progress", row.progress);
		seen_progress(e, row.progress);
	}
	json_decref(j);
	job_row_clear(&row);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct sse *e = cls;
	while (!e->pending || e->pend_off == e->pend_len) {
		if (e->done || atomic_load(&e->a->stopping))
			return MHD_CONTENT_READER_END_OF_STREAM;
		char ev[32], *data = NULL;
		int rc = hub_next(e->a->hub, e->id, &e->seq, e->poll ? POLL_MS : KEEPALIVE_MS, ev, &data);
		if (rc == 0) {
			set_pending(e, ev, data);
			if (!e->phi && !strcmp(ev, "state"))
				redact_pending(e, data);
			if (!strcmp(ev, "deleted") || (!strcmp(ev, "state") && final_state(data)))
				e->done = 1;
			if (e->poll && !strcmp(ev, "progress"))
				seen_progress(e, data); /* the row gets the same text: not twice */
			if (e->poll && !strcmp(ev, "state")) {
				json_t *j = json_loads(data, 0, NULL);
				if (j)
					state_key(j, e->seen, sizeof e->seen);
				json_decref(j);
			}
			free(data);
		} else if (rc == RC_ENOTFOUND && e->poll) {
			free(e->pending);
			e->pending = NULL;
			e->pend_len = e->pend_off = 0;
			poll_row(e);
			if (!e->pending && rc_now_s() - e->quiet_since >= KEEPALIVE_MS / 1000.0)
				set_pending(e, ": keep-alive", "");
			if (!e->pending)
				continue;
		} else if (rc == RC_ENOTFOUND) {
			set_pending(e, ": keep-alive", "");
		} else if (rc == RC_ETOOBIG) {
			state_event(e); /* fell behind the ring: resend the whole state */
		} else {
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (!e->pending)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		e->quiet_since = rc_now_s();
	}
	size_t n = e->pend_len - e->pend_off;
	if (n > max)
		n = max;
	memcpy(buf, e->pending + e->pend_off, n);
	e->pend_off += n;
	return (ssize_t)n;
}

static void sse_free(void *cls)
{
	struct sse *e = cls;
	free(e->pending);
	free(e->seen_prog);
	free(e);
}

enum MHD_Result http_sse_events(struct MHD_Connection *c, req *r)
{
	struct sse *e = calloc(1, sizeof *e);
	if (!e)
		return MHD_NO;
	e->a = r->a;
	snprintf(e->id, sizeof e->id, "%s", r->id);
	e->seq = hub_head(r->a->hub);
	e->poll = store_is_shared(r->a->st);
	e->quiet_since = rc_now_s();
	job_row row;
	rc_err err;
	if (store_get(r->a->st, r->id, 0, &row, &err)) {
		free(e);
		return http_error_rc(c, r, &err);
	}
	e->phi = http_sees_phi(r, row.owner);
	if (e->phi)
		audit_phi(r->a->audit, r->client, r->who, r->method, r->path, r->id);
	job_row_clear(&row);
	state_event(e);
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, e, sse_free);
	if (!resp) {
		sse_free(e);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return http_answer(c, r, 200, resp);
}
