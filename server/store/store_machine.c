/*
 * store_machine: the job's state machine (store_machine.h).  One function
 * per operation behind store_decide's table; each reads the row and the
 * arguments and fills a change, never touching a database.  The messages
 * are the ones the HTTP layer shows (docs/api.md), so a refusal reads the
 * same whichever backend holds the job.
 */
#include "store_machine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const op_names[SM_NOPS] = {
	[SM_VIEWS_SET] = "update views", [SM_VIEWS_CLEAR] = "update views", [SM_START] = "start",
	[SM_TAKE] = "take", [SM_RENEW] = "renew", [SM_PROGRESS] = "progress", [SM_FINISH] = "finish",
	[SM_CANCEL] = "cancel", [SM_STREAM_PAUSE] = "stream pause", [SM_PRIORITY] = "priority",
	[SM_DELETE] = "delete", [SM_LEASE_EXPIRE] = "lease expiry", [SM_RECOVER] = "recover",
};

const char *sm_op_name(store_op op)
{
	return (unsigned)op < SM_NOPS ? op_names[op] : "?";
}

void sm_change_clear(sm_change *c)
{
	if (!c)
		return;
	free(c->own_present);
	free(c->own_log);
	free(c->own_msg);
	memset(c, 0, sizeof *c);
}

int sm_needs_bitmap(store_op op)
{
	return op == SM_VIEWS_SET || op == SM_VIEWS_CLEAR;
}

int sm_lost(const job_row *cur, rc_err *err)
{
	return rc_fail(err, RC_ESTATE, "state", "job %s is not %s any more", cur->id, job_state_name(cur->state));
}

/* --- refusals (their messages are the API's) */

/* A finish or progress of job id by node, which does not run it (any more). */
static int not_held(const char *id, const char *node, rc_err *err)
{
	return rc_fail(err, RC_ESTATE, "state", "job %s is not running on node %s", id, node);
}

static int not_paused(const char *id, const char *node, rc_err *err)
{
	return rc_fail(err, RC_ESTATE, "state", "job %s is not running on node %s any more", id, node);
}

static int held_by(const job_row *r, const char *node)
{
	return r->state == JOB_RUNNING && node && !strcmp(r->node, node);
}

/* The end of a cancelled job: asked now, or acknowledged before a restart or an expiry. */
static void cancelled(sm_change *c, double now)
{
	c->cols |= SM_COL_STATE | SM_COL_UPDATED | SM_COL_FINISHED | SM_COL_ERROR;
	c->state = JOB_CANCELLED;
	c->updated = c->finished = now;
	c->error_code = "cancelled";
	c->error_message = "cancelled by request";
}

/* Off its node, to state: the run it had is over (started, node and lease
 * cleared). */
static void off_node(sm_change *c, job_state state, double now)
{
	c->cols |= SM_COL_STATE | SM_COL_UPDATED | SM_COL_STARTED | SM_COL_NODE | SM_COL_LEASE;
	c->state = state;
	c->updated = now;
	c->started = 0;
	c->node = "";
	c->lease_until = 0;
}

/* --- one decision per operation: cur is never NULL here */

static int popcount_bits(const uint8_t *b, int nbits)
{
	int n = 0;
	for (int i = 0; i < nbits; i++)
		n += (b[i >> 3] >> (i & 7)) & 1;
	return n;
}

/* Views [first, last) set or cleared: the bitmap, the count, and the state
 * that follows (created -> receiving; queued when complete with autostart,
 * or with its first views for a streaming FDK job). */
static int decide_views(const job_row *r, const sm_args *a, int set, sm_change *c, rc_err *err)
{
	if (!job_row_uploadable(r))
		return job_row_upload_refused(r, err);
	if (a->first < 0 || a->last > r->views_expected || a->first >= a->last)
		return rc_fail(err, RC_EINVAL, "k", "views [%d, %d) are outside 0..%d", a->first, a->last,
			       r->views_expected - 1);
	size_t n = ((size_t)r->views_expected + 7) / 8;
	uint8_t *bits = calloc(1, n + 1);
	if (!bits)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	if (r->present)
		memcpy(bits, r->present, n);
	int changed = 0;
	long long cleared = r->views_cleared;
	for (int k = a->first; k < a->last; k++) {
		int was = (bits[k >> 3] >> (k & 7)) & 1;
		changed |= was != set;
		cleared += was && !set;
		if (set)
			bits[k >> 3] |= (uint8_t)(1u << (k & 7));
		else
			bits[k >> 3] &= (uint8_t)~(1u << (k & 7));
	}
	c->answer = (int)r->state;
	if (!set && !changed) { /* none of them is present: nothing to commit */
		free(bits);
		return 0;
	}
	c->own_present = bits;
	c->present = bits;
	c->present_n = n;
	c->views_present = popcount_bits(bits, r->views_expected);
	c->views_cleared = cleared;
	c->streaming = r->streaming;
	job_state ns = r->state;
	if (set && ns == JOB_CREATED)
		ns = JOB_RECEIVING;
	int waiting = ns == JOB_RECEIVING; /* not queued yet (a streaming job may be) */
	if (waiting && set && r->autostart && c->views_present == r->views_expected) {
		ns = JOB_QUEUED;
	} else if (waiting && set && (r->stream == STREAM_ON || (r->stream == STREAM_AUTO && r->autostart))) {
		ns = JOB_QUEUED; /* a streaming FDK job runs from its first views on */
		c->streaming = 1;
	}
	c->cols = SM_COL_PRESENT | SM_COL_STATE | SM_COL_UPDATED | SM_COL_STREAMING | SM_COL_CLEARED;
	c->state = ns;
	c->updated = a->now;
	if (ns == JOB_QUEUED && r->state != JOB_QUEUED) {
		c->cols |= SM_COL_QUEUED;
		c->queued = a->now;
		c->requeue = 1;
	}
	c->answer = (int)ns;
	return 0;
}

/* Queued when every view is present; already queued or running: nothing. */
static int decide_start(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (r->state == JOB_QUEUED || r->state == JOB_RUNNING)
		return 0;
	if (!(JOB_BIT(r->state) & JOB_UPLOADABLE))
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s and cannot be started", r->id,
			       job_state_name(r->state));
	if (r->views_present != r->views_expected)
		return rc_fail(err, RC_ESTATE, "views",
			       "job %s has %d of %d views; upload the missing %d before starting it", r->id,
			       r->views_present, r->views_expected, r->views_expected - r->views_present);
	c->cols = SM_COL_STATE | SM_COL_UPDATED | SM_COL_QUEUED;
	c->state = JOB_QUEUED;
	c->updated = c->queued = a->now;
	c->requeue = 1;
	c->answer = 1;
	return 0;
}

/* The queued job the backend chose runs on a->node, under a lease of
 * lease_s (> 0) by the lease clock. */
static int decide_take(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (r->state != JOB_QUEUED)
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s, not queued", r->id, job_state_name(r->state));
	c->cols = SM_COL_STATE | SM_COL_UPDATED | SM_COL_STARTED | SM_COL_CANCEL | SM_COL_NODE | SM_COL_LEASE |
		  SM_COL_PROGRESS;
	c->state = JOB_RUNNING;
	c->updated = c->started = a->now;
	c->cancel_requested = 0;
	c->node = a->node;
	c->lease_until = a->lease_s > 0 ? a->clock + a->lease_s : 0;
	c->progress = NULL;
	return 0;
}

/* Only the node that holds the lease renews it; the answer carries the
 * row's cancel_requested (a cancel asked of another node). */
static int decide_renew(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (r->state != JOB_RUNNING)
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s: the lease of node %s is lost", r->id,
			       job_state_name(r->state), a->node);
	if (strcmp(r->node, a->node) || !(r->lease_until > 0))
		return rc_fail(err, RC_ESTATE, "node", "job %s runs on node %s%s: the lease of node %s is lost", r->id,
			       r->node[0] ? r->node : "(none)", r->lease_until > 0 ? "" : " without a lease", a->node);
	c->cols = SM_COL_LEASE;
	c->lease_until = a->clock + a->lease_s;
	c->answer = r->cancel_requested;
	return 0;
}

static int decide_progress(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (!held_by(r, a->node))
		return not_held(r->id, a->node, err);
	c->cols = SM_COL_PROGRESS;
	c->progress = a->progress;
	return 0;
}

/* running -> a->state, only by the node that holds it: one whose lease
 * expired meanwhile records nothing over the node that took it next. */
static int decide_finish(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (!held_by(r, a->node))
		return not_held(r->id, a->node, err);
	if (a->state == JOB_QUEUED) { /* the daemon stops: the job runs again later */
		off_node(c, JOB_QUEUED, a->now);
		c->cols |= SM_COL_CANCEL | SM_COL_PROGRESS;
		c->cancel_requested = 0;
		c->progress = NULL;
		return 0;
	}
	c->cols = SM_COL_STATE | SM_COL_UPDATED | SM_COL_FINISHED | SM_COL_ERROR | SM_COL_LEASE;
	c->state = (job_state)a->state;
	c->updated = a->now;
	c->lease_until = 0;
	c->finished = a->now;
	c->error_code = a->err_code ? a->err_code : "";
	c->error_message = a->err_msg ? a->err_msg : "";
	if (a->report) { /* none: the report kept */
		c->cols |= SM_COL_REPORT;
		c->report = a->report;
	}
	return 0;
}

/* created, receiving, queued -> cancelled; running -> cancel_requested
 * (the running node stops its worker); finished: refused. */
static int decide_cancel(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (JOB_BIT(r->state) & JOB_FINAL)
		return rc_fail(err, RC_ESTATE, "state",
			       "job %s is already %s; there is nothing to cancel (DELETE removes it)", r->id,
			       job_state_name(r->state));
	if (r->state == JOB_RUNNING) {
		c->cols = SM_COL_CANCEL | SM_COL_UPDATED;
		c->cancel_requested = 1;
		c->updated = a->now;
		c->answer = JOB_RUNNING;
		return 0;
	}
	cancelled(c, a->now);
	c->answer = JOB_CANCELLED;
	return 0;
}

/* running on this node -> receiving, no longer streaming. */
static int decide_stream_pause(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (!held_by(r, a->node))
		return not_paused(r->id, a->node, err);
	off_node(c, JOB_RECEIVING, a->now);
	c->cols |= SM_COL_STREAMING;
	c->streaming = 0;
	return 0;
}

static int decide_priority(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (!(JOB_BIT(r->state) & (JOB_UPLOADABLE | JOB_BIT(JOB_QUEUED))))
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s: the priority orders the queue, so it changes only "
			       "before the job runs (created, receiving or queued)", r->id, job_state_name(r->state));
	c->cols = SM_COL_PRIORITY | SM_COL_UPDATED;
	c->priority = a->priority;
	c->updated = a->now;
	c->answer = (int)r->state;
	return 0;
}

static int decide_delete(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	(void)a;
	if (!(JOB_BIT(r->state) & JOB_FINAL))
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s; cancel it first", r->id, job_state_name(r->state));
	c->remove = 1;
	return 0;
}

/* log + "node N lost its lease at YYYY-MM-DD HH:MM:SS UTC; " (the lease's
 * end, whole seconds, as SQL's datetime and to_char write it). */
static char *lease_entry(const job_row *r)
{
	char when[32] = "?";
	time_t t = (time_t)r->lease_until;
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
	const char *log = r->lease_log ? r->lease_log : "";
	size_t n = strlen(log) + strlen(r->node) + 64;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "%snode %s lost its lease at %s UTC; ", log, r->node, when);
	return s;
}

/* A running job whose lease passed: cancelled when its cancel was
 * acknowledged, failed (lease_expired, each expiry in the message) at the
 * max_attempts-th expiry, else back to the front of its priority (its
 * queue_seq kept) with attempts + 1. */
static int decide_lease_expire(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (r->state != JOB_RUNNING || !(r->lease_until > 0) || !(r->lease_until < a->clock))
		return rc_fail(err, RC_ESTATE, "state", "job %s is not running under an expired lease", r->id);
	if (!(c->own_log = lease_entry(r)))
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	c->cols = SM_COL_STATE | SM_COL_UPDATED | SM_COL_LEASE | SM_COL_LEASE_LOG;
	c->lease_log = c->own_log;
	c->lease_until = 0;
	c->answer = 1; /* counted, whatever the outcome */
	if (r->cancel_requested) { /* an acknowledged cancel holds, as at a restart */
		cancelled(c, a->clock);
		return 0;
	}
	c->cols |= SM_COL_ATTEMPTS;
	c->attempts = r->attempts + 1;
	c->updated = a->clock;
	if (c->attempts >= a->max_attempts) {
		size_t n = strlen(c->own_log) + 64;
		if (!(c->own_msg = malloc(n))) {
			sm_change_clear(c);
			return rc_fail(err, RC_ENOMEM, "", "out of memory");
		}
		snprintf(c->own_msg, n, "its lease expired %d times, the most allowed: %s", c->attempts, c->own_log);
		c->cols |= SM_COL_FINISHED | SM_COL_ERROR;
		c->state = JOB_FAILED;
		c->finished = a->clock;
		c->error_code = "lease_expired";
		c->error_message = c->own_msg;
		return 0;
	}
	off_node(c, JOB_QUEUED, a->clock);
	return 0;
}

/* A job found running at start: its run was cut short.  Cancelled when its
 * cancel was acknowledged (202), else back to the front of its priority. */
static int decide_recover(const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	if (r->state != JOB_RUNNING)
		return rc_fail(err, RC_ESTATE, "state", "job %s is %s, not running", r->id, job_state_name(r->state));
	c->lease_until = 0;
	if (r->cancel_requested) {
		cancelled(c, a->now);
		c->cols |= SM_COL_LEASE;
		return 0;
	}
	off_node(c, JOB_QUEUED, a->now);
	c->cols |= SM_COL_CANCEL;
	c->cancel_requested = 0;
	c->answer = 1;
	return 0;
}

/* No row: finish, progress and a pause say the node does not run the job
 * (as a conditional UPDATE that matched nothing did); the rest, not found. */
static int decide_absent(store_op op, const sm_args *a, rc_err *err)
{
	switch (op) {
	case SM_FINISH:
	case SM_PROGRESS:
		return not_held(a->id, a->node, err);
	case SM_STREAM_PAUSE:
		return not_paused(a->id, a->node, err);
	default:
		return rc_fail(err, RC_ENOTFOUND, "id", "no job with id %s", a->id);
	}
}

int store_decide(store_op op, const job_row *cur, const sm_args *a, sm_change *out, rc_err *err)
{
	memset(out, 0, sizeof *out);
	if (!cur)
		return decide_absent(op, a, err);
	int rc;
	switch (op) {
	case SM_VIEWS_SET: rc = decide_views(cur, a, 1, out, err); break;
	case SM_VIEWS_CLEAR: rc = decide_views(cur, a, 0, out, err); break;
	case SM_START: rc = decide_start(cur, a, out, err); break;
	case SM_TAKE: rc = decide_take(cur, a, out, err); break;
	case SM_RENEW: rc = decide_renew(cur, a, out, err); break;
	case SM_PROGRESS: rc = decide_progress(cur, a, out, err); break;
	case SM_FINISH: rc = decide_finish(cur, a, out, err); break;
	case SM_CANCEL: rc = decide_cancel(cur, a, out, err); break;
	case SM_STREAM_PAUSE: rc = decide_stream_pause(cur, a, out, err); break;
	case SM_PRIORITY: rc = decide_priority(cur, a, out, err); break;
	case SM_DELETE: rc = decide_delete(cur, a, out, err); break;
	case SM_LEASE_EXPIRE: rc = decide_lease_expire(cur, a, out, err); break;
	case SM_RECOVER: rc = decide_recover(cur, a, out, err); break;
	default: rc = rc_fail(err, RC_EINVAL, "", "unknown store operation %d", (int)op); break;
	}
	if (rc)
		sm_change_clear(out);
	return rc;
}

int sm_change_columns(const sm_change *c, sm_col out[SM_MAX_COLS])
{
	int n = 0;
#define COL_I(bit, nm, v) if (c->cols & (bit)) out[n++] = (sm_col){ .name = (nm), .type = 'i', .i = (v) }
#define COL_D(bit, nm, v) if (c->cols & (bit)) out[n++] = (sm_col){ .name = (nm), .type = 'd', .d = (v) }
#define COL_T(bit, nm, v) if (c->cols & (bit)) out[n++] = (sm_col){ .name = (nm), .type = 't', .s = (v) }
	COL_I(SM_COL_STATE, "state", c->state);
	COL_D(SM_COL_UPDATED, "updated", c->updated);
	COL_D(SM_COL_QUEUED, "queued", c->queued);
	COL_D(SM_COL_STARTED, "started", c->started);
	COL_D(SM_COL_FINISHED, "finished", c->finished);
	COL_I(SM_COL_PRIORITY, "priority", c->priority);
	COL_I(SM_COL_CANCEL, "cancel_requested", c->cancel_requested);
	if (c->cols & SM_COL_PRESENT)
		out[n++] = (sm_col){ .name = "present", .type = 'b', .b = c->present, .n = c->present_n };
	COL_I(SM_COL_PRESENT, "views_present", c->views_present);
	COL_I(SM_COL_STREAMING, "streaming", c->streaming);
	COL_I(SM_COL_CLEARED, "views_cleared", c->views_cleared);
	COL_T(SM_COL_NODE, "node", c->node);
	COL_D(SM_COL_LEASE, "lease_until", c->lease_until);
	COL_I(SM_COL_ATTEMPTS, "attempts", c->attempts);
	COL_T(SM_COL_LEASE_LOG, "lease_log", c->lease_log);
	COL_T(SM_COL_ERROR, "error_code", c->error_code);
	COL_T(SM_COL_ERROR, "error_message", c->error_message);
	COL_T(SM_COL_REPORT, "report", c->report);
	COL_T(SM_COL_PROGRESS, "progress", c->progress);
#undef COL_I
#undef COL_D
#undef COL_T
	return n;
}

int sm_update_sql(const sm_col *col, int n, const char *queue_expr, char *buf, size_t size)
{
	size_t len = (size_t)snprintf(buf, size, "UPDATE jobs SET ");
	for (int i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s=$%d", i ? ", " : "", col[i].name, i + 1);
	if (queue_expr && len < size)
		len += (size_t)snprintf(buf + len, size - len, ", queue_seq=%s", queue_expr);
	if (len < size)
		len += (size_t)snprintf(buf + len, size - len, " WHERE id=$%d AND state=$%d AND node=$%d", n + 1, n + 2,
					n + 3);
	return len < size ? 0 : -1;
}
