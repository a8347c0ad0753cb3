/*
 * store: store.h's functions over the open backend's operations
 * (store_backend.h).  What does not depend on the backend lives here: the
 * names of states, the order of spool files and rows in create, delete and
 * expiry.  The backends call its decisions on a row; it calls them only
 * through their ops, and store_open.c, above both, opens one.
 */
#include "store/store.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store_backend.h"
#include "store/store_machine.h"

static const char *const push_names[PUSH_NSTATES] = { "pending", "sending", "sent", "send_failed" };

const char *push_state_name(push_state s)
{
	return (unsigned)s < PUSH_NSTATES ? push_names[s] : "unknown";
}

double store_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void node_row_clear(node_row *r)
{
	if (!r)
		return;
	free(r->devices);
	memset(r, 0, sizeof *r);
}

const char *store_spec_engine(const job_spec *spec)
{
	/* auto and cpu run on every node (each has a CPU), and so do tensor (its
	 * CPU path where there is no CUDA device) and trigeneous (whatever the
	 * node has, its CPU alone included): only these two need a device */
	rc_engine_choice e = spec->r.engine;
	return e == RC_ENGINE_OPENCL || e == RC_ENGINE_CUDA ? rc_name_str(RC_NAMES_ENGINE, e) : "";
}

void store_close(store *st)
{
	if (!st)
		return;
	pthread_cond_destroy(&st->holds_cond);
	pthread_mutex_destroy(&st->holds_lock);
	st->ops->close(st);
}

struct store_hold {
	struct store_hold *next;
	char id[37];
	int n;
};

int store_files_hold(store *st, const char *id, rc_err *err)
{
	struct store_hold *h;
	pthread_mutex_lock(&st->holds_lock);
	for (h = st->holds; h && strcmp(h->id, id); h = h->next)
		;
	if (!h && (h = calloc(1, sizeof *h))) {
		snprintf(h->id, sizeof h->id, "%s", id);
		h->next = st->holds;
		st->holds = h;
	}
	if (h)
		h->n++;
	pthread_mutex_unlock(&st->holds_lock);
	return h ? 0 : rc_fail(err, RC_ENOMEM, "", "out of memory");
}

void store_files_release(store *st, const char *id)
{
	pthread_mutex_lock(&st->holds_lock);
	for (struct store_hold **p = &st->holds; *p; p = &(*p)->next)
		if (!strcmp((*p)->id, id)) {
			struct store_hold *h = *p;
			if (--h->n == 0) {
				*p = h->next;
				free(h);
				pthread_cond_broadcast(&st->holds_cond);
			}
			break;
		}
	pthread_mutex_unlock(&st->holds_lock);
}

/* The files of a job whose row is gone: removed once no writer holds them
 * (a writer that takes its hold from now on finds no row and writes none). */
static void remove_files(store *st, const char *id)
{
	pthread_mutex_lock(&st->holds_lock);
	for (;;) {
		struct store_hold *h;
		for (h = st->holds; h && strcmp(h->id, id); h = h->next)
			;
		if (!h)
			break;
		pthread_cond_wait(&st->holds_cond, &st->holds_lock);
	}
	pthread_mutex_unlock(&st->holds_lock);
	store_spool_remove(st->dir, id);
}

const char *store_dir(const store *st) { return st->dir; }
const char *store_node(const store *st) { return st->node; }
double store_call_bound(const store *st) { return st->call_bound_s; }
const char *store_backend_name(const store *st) { return st->ops->name; }

void store_job_path(const store *st, const char *id, const char *name, char *buf, size_t n)
{
	if (name)
		snprintf(buf, n, "%s/jobs/%s/%s", st->dir, id, name);
	else
		snprintf(buf, n, "%s/jobs/%s", st->dir, id);
}

static int recover(store *st, int serving, int *requeued, int *orphans, rc_err *err)
{
	int nre = 0, norph = 0;
	int rc = st->ops->recover(st, &nre, err);
	/* A shared spool (PostgreSQL), or this daemon once it serves, may hold
	 * a job between its files and its row (a create in flight): only
	 * directories older than a create can take are swept then. */
	if (!rc)
		norph = store_spool_sweep(st, serving || store_is_shared(st) ? STORE_ORPHAN_AGE_S : 0);
	if (requeued)
		*requeued = nre;
	if (orphans)
		*orphans = norph;
	return rc;
}

int store_recover(store *st, int *requeued, int *orphans, rc_err *err)
{
	return recover(st, 0, requeued, orphans, err);
}

int store_recover_serving(store *st, int *requeued, int *orphans, rc_err *err)
{
	return recover(st, 1, requeued, orphans, err);
}

int store_create(store *st, const char *id, const job_spec *spec, const char *spec_json,
		 size_t spec_len, const char *summary, rc_err *err)
{
	return store_create_owned(st, id, spec, spec_json, spec_len, summary, "", err);
}

int store_create_owned(store *st, const char *id, const job_spec *spec, const char *spec_json,
		       size_t spec_len, const char *summary, const char *owner, rc_err *err)
{
	int rc = store_spool_create(st->dir, id, spec, spec_json, spec_len, err);
	if (rc)
		return rc;
	if ((rc = st->ops->insert(st, id, spec, summary, owner, err)))
		store_spool_remove(st->dir, id);
	return rc;
}

int store_get(store *st, const char *id, int with_bitmap, job_row *out, rc_err *err)
{
	return st->ops->get(st, id, with_bitmap, out, err);
}

int store_list(store *st, int state, int limit, int offset, job_row **rows, int *n,
	       int *total, rc_err *err)
{
	return st->ops->list(st, state, limit, offset, rows, n, total, err);
}

int store_counts(store *st, int counts[JOB_NSTATES], rc_err *err)
{
	memset(counts, 0, sizeof(int) * JOB_NSTATES);
	return st->ops->counts(st, counts, err);
}

int store_queue_depth(store *st)
{
	int c[JOB_NSTATES];
	if (store_counts(st, c, NULL))
		return 0;
	return c[JOB_QUEUED];
}

/* op on job id's row through the backend (store_machine.h): the times are
 * this daemon's clock, the acting node this daemon unless a says another. */
static int apply(store *st, store_op op, const char *id, sm_args *a, int *ret_answer, rc_err *err)
{
	int ans = 0;
	a->id = id;
	a->now = a->clock = store_now();
	if (!a->node)
		a->node = st->node;
	int rc = st->ops->apply(st, op, id, a, &ans, err);
	if (!rc && ret_answer)
		*ret_answer = ans;
	return rc;
}

int store_views_clear(store *st, const char *id, int first, int last, rc_err *err)
{
	sm_args a = { .first = first, .last = last };
	return apply(st, SM_VIEWS_CLEAR, id, &a, NULL, err);
}

int store_views_set(store *st, const char *id, int first, int last, job_state *ret_state, rc_err *err)
{
	int s = 0;
	sm_args a = { .first = first, .last = last };
	int rc = apply(st, SM_VIEWS_SET, id, &a, &s, err);
	if (!rc && ret_state)
		*ret_state = (job_state)s;
	return rc;
}

int store_start(store *st, const char *id, int *ret_changed, rc_err *err)
{
	sm_args a = { .id = id };
	*ret_changed = 0;
	return apply(st, SM_START, id, &a, ret_changed, err);
}

int store_take_next(store *st, char id[37], rc_err *err)
{
	return st->ops->take_next(st, st->node, 0, NULL, id, err);
}

int store_take_next_lease(store *st, const char *node, double lease_s, char id[37], rc_err *err)
{
	return store_take_next_on(st, node, lease_s, NULL, id, err);
}

int store_take_next_on(store *st, const char *node, double lease_s, const char *engines, char id[37],
		       rc_err *err)
{
	if (!node || !node[0] || strlen(node) >= STORE_NODE_MAX)
		return rc_fail(err, RC_EINVAL, "node", "a lease needs a node name of 1 to %d bytes", STORE_NODE_MAX - 1);
	if (!(lease_s > 0))
		return rc_fail(err, RC_EINVAL, "lease_s", "a lease lasts more than 0 s");
	return st->ops->take_next(st, node, lease_s, engines, id, err);
}

int store_lease_renew(store *st, const char *id, const char *node, double lease_s, int *ret_cancel,
		      rc_err *err)
{
	int cancel = 0;
	if (!node || !node[0] || !(lease_s > 0))
		return rc_fail(err, RC_EINVAL, "lease_s", "a lease needs a node name and more than 0 s");
	sm_args a = { .node = node, .lease_s = lease_s };
	int rc = apply(st, SM_RENEW, id, &a, &cancel, err);
	if (ret_cancel)
		*ret_cancel = rc ? 0 : cancel;
	return rc;
}

int store_progress(store *st, const char *id, const char *progress, rc_err *err)
{
	sm_args a = { .progress = progress };
	return apply(st, SM_PROGRESS, id, &a, NULL, err);
}

int store_node_heartbeat(store *st, const char *devices, const char *running, double started, rc_err *err)
{
	return st->ops->node_heartbeat(st, devices && devices[0] ? devices : "[]", running ? running : "", started,
				       err);
}

int store_nodes_list(store *st, node_row **rows, int *n, rc_err *err)
{
	*rows = NULL;
	*n = 0;
	return st->ops->nodes_list(st, rows, n, err);
}

int store_is_shared(const store *st)
{
	return strcmp(st->ops->name, "sqlite") != 0;
}

int store_lease_expire(store *st, int max_attempts, int *ret_n, rc_err *err)
{
	int n = 0;
	if (max_attempts < 1)
		return rc_fail(err, RC_EINVAL, "max_attempts", "max_attempts is at least 1");
	int rc = st->ops->lease_expire(st, max_attempts, &n, err);
	if (ret_n)
		*ret_n = rc ? 0 : n;
	return rc;
}

int store_stream_pause(store *st, const char *id, rc_err *err)
{
	sm_args a = { .id = id };
	return apply(st, SM_STREAM_PAUSE, id, &a, NULL, err);
}

int store_set_priority(store *st, const char *id, int priority, job_state *ret_state, rc_err *err)
{
	int s = 0;
	if (priority < 0 || priority > 9)
		return rc_fail(err, RC_EINVAL, "priority", "priority must be an integer from 0 to 9 (got %d)", priority);
	sm_args a = { .priority = priority };
	int rc = apply(st, SM_PRIORITY, id, &a, &s, err);
	if (!rc && ret_state)
		*ret_state = (job_state)s;
	return rc;
}

int store_cancel(store *st, const char *id, job_state *ret_state, rc_err *err)
{
	int s = 0;
	sm_args a = { .id = id };
	int rc = apply(st, SM_CANCEL, id, &a, &s, err);
	if (!rc)
		*ret_state = (job_state)s;
	return rc;
}

int store_finish(store *st, const char *id, job_state state, const char *err_code,
		 const char *err_msg, const char *report, rc_err *err)
{
	sm_args a = { .state = state, .err_code = err_code, .err_msg = err_msg, .report = report };
	return apply(st, SM_FINISH, id, &a, NULL, err);
}

int store_delete(store *st, const char *id, rc_err *err)
{
	sm_args a = { .id = id };
	int rc = apply(st, SM_DELETE, id, &a, NULL, err);
	/* The row is gone first: a crash here leaves an orphan directory that
	 * store_recover removes, never a row without its files. */
	if (!rc)
		remove_files(st, id);
	return rc;
}

int store_expire(store *st, double retention_s, int *ret_n, rc_err *err)
{
	char ids[64][37];
	int n = 0, total = 0, rc;
	double before = store_now() - retention_s;
	for (;;) {
		if ((rc = st->ops->expired(st, before, ids, 64, &n, err)))
			break;
		for (int i = 0; i < n && !rc; i++) {
			sm_args a = { .id = ids[i] };
			rc = apply(st, SM_DELETE, ids[i], &a, NULL, err);
			/* gone meanwhile (another daemon's expiry): not an error */
			if (rc == RC_ENOTFOUND)
				rc = 0;
			else if (!rc)
				total++;
			if (!rc)
				remove_files(st, ids[i]);
		}
		if (rc || n < 64)
			break;
	}
	if (ret_n)
		*ret_n = total;
	return rc;
}

int store_push_list(store *st, const char *id, push_row **rows, int *n, rc_err *err)
{
	return st->ops->push_list(st, id, rows, n, err);
}

int store_push_take(store *st, double now, push_row *out, double *next_due, rc_err *err)
{
	return st->ops->push_take(st, now, out, next_due, err);
}

int store_push_update(store *st, const push_row *p, rc_err *err)
{
	return st->ops->push_update(st, p, err);
}

int store_push_again(store *st, const char *id, int *n, rc_err *err)
{
	return st->ops->push_again(st, id, n, err);
}
