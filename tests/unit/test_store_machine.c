/*
 * Tests of store_decide (server/store_machine.c), the job's state machine
 * both store backends run inside their transactions: no database.
 *
 * test_matrix: every operation on a row in every state: refused (with which
 * code and message) or allowed, and then which state is written and what
 * the caller gets.  The row: views 4 of 4 present, no autostart, no stream;
 * a running row runs on node n1 under a lease that passed.  The other tests
 * cover what the matrix's row does not: autostart and streaming uploads,
 * ranges, other nodes, the attempts' cap, acknowledged cancels, missing
 * rows, and the columns a change writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store/store_machine.h"

#define LEASE_END 1700000000.0 /* 2023-11-14 22:13:20 UTC */
#define NOW (LEASE_END + 100)

enum { REFUSED = -2, KEPT = -1 }; /* want_state: refused; allowed, state not written */
enum { NONE = 0, WRITE, REMOVE }; /* what is written */

struct cell {
	int want_state; /* the state written, KEPT, or REFUSED */
	int write;      /* NONE, WRITE (columns), REMOVE (the row) */
	int answer;
	int code;       /* the error when refused */
	const char *msg;/* in the error's message when refused */
};

#define OK_TO(s, ans) { (s), WRITE, (ans), 0, NULL }
#define OK_KEEP(ans) { KEPT, WRITE, (ans), 0, NULL }
#define OK_NOTHING(ans) { KEPT, NONE, (ans), 0, NULL }
#define NO(m) { REFUSED, NONE, 0, RC_ESTATE, (m) }

/* by state: created, receiving, queued, running, succeeded, failed, cancelled */
static const struct op_case {
	const char *name;
	store_op op;
	struct cell by_state[JOB_NSTATES];
} matrix[] = {
	{ "views set", SM_VIEWS_SET,
	  { OK_TO(JOB_RECEIVING, JOB_RECEIVING), OK_TO(JOB_RECEIVING, JOB_RECEIVING),
	    NO("job J is queued and no longer accepts projections"),
	    NO("job J is running and no longer accepts projections"),
	    NO("job J is succeeded and no longer accepts projections"),
	    NO("job J is failed and no longer accepts projections"),
	    NO("job J is cancelled and no longer accepts projections") } },
	{ "views clear", SM_VIEWS_CLEAR,
	  { OK_TO(JOB_CREATED, JOB_CREATED), OK_TO(JOB_RECEIVING, JOB_RECEIVING), NO("no longer accepts projections"),
	    NO("no longer accepts projections"), NO("no longer accepts projections"),
	    NO("no longer accepts projections"), NO("no longer accepts projections") } },
	{ "start", SM_START,
	  { OK_TO(JOB_QUEUED, 1), OK_TO(JOB_QUEUED, 1), OK_NOTHING(0), OK_NOTHING(0),
	    NO("job J is succeeded and cannot be started"), NO("job J is failed and cannot be started"),
	    NO("job J is cancelled and cannot be started") } },
	{ "take", SM_TAKE,
	  { NO("job J is created, not queued"), NO("not queued"), OK_TO(JOB_RUNNING, 0), NO("not queued"),
	    NO("not queued"), NO("not queued"), NO("not queued") } },
	{ "renew", SM_RENEW,
	  { NO("job J is created: the lease of node n1 is lost"), NO("the lease of node n1 is lost"),
	    NO("the lease of node n1 is lost"), OK_KEEP(0), NO("job J is succeeded: the lease of node n1 is lost"),
	    NO("the lease of node n1 is lost"), NO("the lease of node n1 is lost") } },
	{ "progress", SM_PROGRESS,
	  { NO("job J is not running on node n1"), NO("not running on node n1"), NO("not running on node n1"),
	    OK_KEEP(0), NO("not running on node n1"), NO("not running on node n1"),
	    NO("not running on node n1") } },
	{ "finish", SM_FINISH,
	  { NO("job J is not running on node n1"), NO("not running on node n1"), NO("not running on node n1"),
	    OK_TO(JOB_SUCCEEDED, 0), NO("not running on node n1"), NO("not running on node n1"),
	    NO("not running on node n1") } },
	{ "cancel", SM_CANCEL,
	  { OK_TO(JOB_CANCELLED, JOB_CANCELLED), OK_TO(JOB_CANCELLED, JOB_CANCELLED),
	    OK_TO(JOB_CANCELLED, JOB_CANCELLED), OK_KEEP(JOB_RUNNING),
	    NO("job J is already succeeded; there is nothing to cancel (DELETE removes it)"),
	    NO("job J is already failed; there is nothing to cancel (DELETE removes it)"),
	    NO("job J is already cancelled; there is nothing to cancel (DELETE removes it)") } },
	{ "stream pause", SM_STREAM_PAUSE,
	  { NO("job J is not running on node n1 any more"), NO("any more"), NO("any more"),
	    OK_TO(JOB_RECEIVING, 0), NO("any more"), NO("any more"), NO("any more") } },
	{ "priority", SM_PRIORITY,
	  { OK_KEEP(JOB_CREATED), OK_KEEP(JOB_RECEIVING), OK_KEEP(JOB_QUEUED),
	    NO("job J is running: the priority orders the queue, so it changes only before the job runs "
	       "(created, receiving or queued)"),
	    NO("job J is succeeded: the priority orders the queue"), NO("job J is failed: the priority"),
	    NO("job J is cancelled: the priority") } },
	{ "delete", SM_DELETE,
	  { NO("job J is created; cancel it first"), NO("job J is receiving; cancel it first"),
	    NO("job J is queued; cancel it first"), NO("job J is running; cancel it first"),
	    { KEPT, REMOVE, 0, 0, NULL }, { KEPT, REMOVE, 0, 0, NULL }, { KEPT, REMOVE, 0, 0, NULL } } },
	{ "lease expiry", SM_LEASE_EXPIRE,
	  { NO("not running under an expired lease"), NO("expired lease"), NO("expired lease"),
	    OK_TO(JOB_QUEUED, 1), NO("expired lease"), NO("expired lease"), NO("expired lease") } },
	{ "recover", SM_RECOVER,
	  { NO("job J is created, not running"), NO("not running"), NO("not running"), OK_TO(JOB_QUEUED, 1),
	    NO("not running"), NO("not running"), NO("not running") } },
};

static uint8_t full[1] = { 0x0f };

static job_row row_in(job_state s)
{
	job_row r;
	memset(&r, 0, sizeof r);
	snprintf(r.id, sizeof r.id, "J");
	r.state = s;
	r.priority = 5;
	r.views_expected = r.views_present = 4;
	r.present = full;
	if (s == JOB_RUNNING) {
		snprintf(r.node, sizeof r.node, "n1");
		r.lease_until = LEASE_END;
	}
	return r;
}

static sm_args args(void)
{
	return (sm_args){ .id = "J", .now = NOW, .clock = NOW, .node = "n1", .first = 0, .last = 1, .priority = 7,
			  .state = JOB_SUCCEEDED, .lease_s = 10, .max_attempts = 3, .progress = "{}" };
}

static void test_matrix(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof matrix / sizeof matrix[0]; i++) {
		for (int s = 0; s < JOB_NSTATES; s++) {
			const struct cell *want = &matrix[i].by_state[s];
			job_row r = row_in((job_state)s);
			sm_args a = args();
			sm_change c;
			rc_err err = { 0 };
			int rc = store_decide(matrix[i].op, &r, &a, &c, &err);
			print_message("%s on %s\n", matrix[i].name, job_state_name((job_state)s));
			if (want->want_state == REFUSED) {
				assert_int_equal(rc, want->code);
				assert_non_null(strstr(err.msg, want->msg));
				assert_int_equal(c.cols, 0);
				assert_int_equal(c.remove, 0);
				continue;
			}
			assert_int_equal(rc, 0);
			assert_int_equal(c.answer, want->answer);
			assert_int_equal(c.remove, want->write == REMOVE);
			assert_int_equal(c.cols != 0, want->write == WRITE);
			if (want->want_state == KEPT)
				assert_false(c.cols & SM_COL_STATE);
			else {
				assert_true(c.cols & SM_COL_STATE);
				assert_int_equal(c.state, want->want_state);
			}
			if (c.cols & SM_COL_UPDATED)
				assert_true(c.updated == NOW);
			sm_change_clear(&c);
		}
	}
}

/* No row: not found, but a finish, progress or pause is "not running on
 * this node" (what a conditional UPDATE that matched nothing said). */
static void test_absent(void **state)
{
	(void)state;
	for (int op = 0; op < SM_NOPS; op++) {
		sm_args a = args();
		sm_change c;
		rc_err err = { 0 };
		int rc = store_decide((store_op)op, NULL, &a, &c, &err);
		if (op == SM_FINISH || op == SM_PROGRESS || op == SM_STREAM_PAUSE) {
			assert_int_equal(rc, RC_ESTATE);
			assert_non_null(strstr(err.msg, "job J is not running on node n1"));
		} else {
			assert_int_equal(rc, RC_ENOTFOUND);
			assert_string_equal(err.msg, "no job with id J");
		}
		assert_int_equal(c.cols, 0);
	}
}

static int decide(store_op op, const job_row *r, const sm_args *a, sm_change *c, rc_err *err)
{
	memset(err, 0, sizeof *err);
	return store_decide(op, r, a, c, err);
}

static void test_views(void **state)
{
	(void)state;
	uint8_t none[1] = { 0 }, some[1] = { 0x07 };
	job_row r = row_in(JOB_CREATED);
	sm_args a = args();
	sm_change c;
	rc_err err;
	r.views_present = 0;
	r.present = none;

	/* a clear of absent views writes nothing */
	assert_int_equal(decide(SM_VIEWS_CLEAR, &r, &a, &c, &err), 0);
	assert_int_equal(c.cols, 0);
	/* outside the job */
	a.last = 5;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), RC_EINVAL);
	assert_string_equal(err.msg, "views [0, 5) are outside 0..3");
	a.first = 2, a.last = 2;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), RC_EINVAL);

	/* the last view with autostart: queued, with a new place in the queue */
	r.state = JOB_RECEIVING;
	r.views_present = 3;
	r.present = some;
	r.autostart = 1;
	a.first = 3, a.last = 4;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_QUEUED);
	assert_int_equal(c.answer, JOB_QUEUED);
	assert_int_equal(c.views_present, 4);
	assert_int_equal(c.present[0], 0x0f);
	assert_int_equal(some[0], 0x07); /* the row read is not touched */
	assert_true(c.requeue && (c.cols & SM_COL_QUEUED) && c.queued == NOW);
	sm_change_clear(&c);
	/* without autostart it waits for POST start */
	r.autostart = 0;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_RECEIVING);
	assert_false(c.requeue);
	sm_change_clear(&c);
	/* clearing a present view counts in views_cleared */
	r.views_cleared = 5;
	a.first = 0, a.last = 2;
	assert_int_equal(decide(SM_VIEWS_CLEAR, &r, &a, &c, &err), 0);
	assert_int_equal(c.views_cleared, 7);
	assert_int_equal(c.views_present, 1);
	assert_int_equal(c.present[0], 0x04);
	sm_change_clear(&c);

	/* a streaming FDK job queues with its first view, and takes views while queued
	 * and running until it has them all */
	r = row_in(JOB_CREATED);
	r.views_present = 0;
	r.present = none;
	r.stream = STREAM_ON;
	a.first = 0, a.last = 1;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_QUEUED);
	assert_int_equal(c.streaming, 1);
	assert_true(c.requeue);
	sm_change_clear(&c);
	r.state = JOB_RUNNING;
	r.streaming = 1;
	r.views_present = 3;
	r.present = some;
	a.first = 3, a.last = 4;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_RUNNING);
	assert_false(c.requeue);
	sm_change_clear(&c);
	r.views_present = 4;
	r.present = full;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), RC_ESTATE);
	assert_string_equal(err.msg, "job J is running with every view: its volume is made from the views it has, so "
				     "it takes no more uploads");
	/* stream auto needs autostart */
	r = row_in(JOB_CREATED);
	r.views_present = 0;
	r.present = none;
	r.stream = STREAM_AUTO;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_RECEIVING);
	sm_change_clear(&c);
	r.autostart = 1;
	assert_int_equal(decide(SM_VIEWS_SET, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_QUEUED);
	assert_int_equal(c.streaming, 1);
	sm_change_clear(&c);
}

static void test_start_missing(void **state)
{
	(void)state;
	job_row r = row_in(JOB_RECEIVING);
	sm_args a = args();
	sm_change c;
	rc_err err;
	r.views_present = 1;
	assert_int_equal(decide(SM_START, &r, &a, &c, &err), RC_ESTATE);
	assert_string_equal(err.msg, "job J has 1 of 4 views; upload the missing 3 before starting it");
	assert_string_equal(err.field, "views");
}

/* Another node, no lease, a cancel asked of another node. */
static void test_nodes(void **state)
{
	(void)state;
	job_row r = row_in(JOB_RUNNING);
	sm_args a = args();
	sm_change c;
	rc_err err;
	a.node = "n2";
	assert_int_equal(decide(SM_RENEW, &r, &a, &c, &err), RC_ESTATE);
	assert_string_equal(err.msg, "job J runs on node n1: the lease of node n2 is lost");
	assert_int_equal(decide(SM_FINISH, &r, &a, &c, &err), RC_ESTATE);
	assert_string_equal(err.msg, "job J is not running on node n2");
	assert_int_equal(decide(SM_PROGRESS, &r, &a, &c, &err), RC_ESTATE);
	assert_int_equal(decide(SM_STREAM_PAUSE, &r, &a, &c, &err), RC_ESTATE);
	/* a cancel works from any node */
	assert_int_equal(decide(SM_CANCEL, &r, &a, &c, &err), 0);
	assert_int_equal(c.cancel_requested, 1);
	sm_change_clear(&c);

	a.node = "n1";
	r.lease_until = 0; /* taken without a lease: nothing to renew */
	assert_int_equal(decide(SM_RENEW, &r, &a, &c, &err), RC_ESTATE);
	assert_string_equal(err.msg, "job J runs on node n1 without a lease: the lease of node n1 is lost");
	assert_int_equal(decide(SM_LEASE_EXPIRE, &r, &a, &c, &err), RC_ESTATE); /* never expires */
	r.lease_until = LEASE_END;
	r.cancel_requested = 1;
	assert_int_equal(decide(SM_RENEW, &r, &a, &c, &err), 0);
	assert_int_equal(c.answer, 1);
	assert_true(c.lease_until == NOW + 10);
	assert_int_equal(c.cols, SM_COL_LEASE);
	sm_change_clear(&c);
	/* a lease not passed yet */
	a.clock = LEASE_END - 1;
	assert_int_equal(decide(SM_LEASE_EXPIRE, &r, &a, &c, &err), RC_ESTATE);
}

static void test_take(void **state)
{
	(void)state;
	job_row r = row_in(JOB_QUEUED);
	sm_args a = args();
	sm_change c;
	rc_err err;
	r.cancel_requested = 1;
	assert_int_equal(decide(SM_TAKE, &r, &a, &c, &err), 0);
	assert_string_equal(c.node, "n1");
	assert_true(c.lease_until == NOW + 10 && c.started == NOW);
	assert_int_equal(c.cancel_requested, 0);
	assert_null(c.progress);
	sm_change_clear(&c);
	a.lease_s = 0; /* store_take_next: no lease */
	assert_int_equal(decide(SM_TAKE, &r, &a, &c, &err), 0);
	assert_true(c.lease_until == 0);
	sm_change_clear(&c);
}

static void test_finish(void **state)
{
	(void)state;
	job_row r = row_in(JOB_RUNNING);
	sm_args a = args();
	sm_change c;
	rc_err err;
	a.state = JOB_FAILED;
	a.err_code = "worker_crashed";
	a.err_msg = "boom";
	assert_int_equal(decide(SM_FINISH, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_FAILED);
	assert_string_equal(c.error_code, "worker_crashed");
	assert_string_equal(c.error_message, "boom");
	assert_false(c.cols & SM_COL_REPORT); /* no report: the one there is kept */
	assert_true(c.finished == NOW && c.lease_until == 0);
	sm_change_clear(&c);
	a.report = "{\"plan\": 1}";
	a.err_code = a.err_msg = NULL;
	a.state = JOB_SUCCEEDED;
	assert_int_equal(decide(SM_FINISH, &r, &a, &c, &err), 0);
	assert_string_equal(c.error_code, "");
	assert_string_equal(c.report, "{\"plan\": 1}");
	sm_change_clear(&c);
	/* the daemon stops: back to the queue, off the node */
	a.state = JOB_QUEUED;
	assert_int_equal(decide(SM_FINISH, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_QUEUED);
	assert_string_equal(c.node, "");
	assert_true((c.cols & SM_COL_PROGRESS) && !c.progress);
	assert_false(c.cols & (SM_COL_FINISHED | SM_COL_ERROR));
	sm_change_clear(&c);
}

/* Expiries: back to the queue, then failed at the cap with each node named;
 * an acknowledged cancel holds; a restart cancels or re-queues likewise. */
static void test_expiry(void **state)
{
	(void)state;
	job_row r = row_in(JOB_RUNNING);
	sm_args a = args();
	sm_change c;
	rc_err err;
	assert_int_equal(decide(SM_LEASE_EXPIRE, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_QUEUED);
	assert_int_equal(c.attempts, 1);
	assert_string_equal(c.node, "");
	assert_false(c.requeue); /* the front of its priority: its place kept */
	assert_string_equal(c.lease_log, "node n1 lost its lease at 2023-11-14 22:13:20 UTC; ");
	sm_change_clear(&c);

	char log[] = "node n0 lost its lease at 2023-11-14 22:00:00 UTC; ";
	r.lease_log = log;
	r.attempts = 2;
	assert_int_equal(decide(SM_LEASE_EXPIRE, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_FAILED);
	assert_int_equal(c.attempts, 3);
	assert_string_equal(c.error_code, "lease_expired");
	assert_string_equal(c.error_message, "its lease expired 3 times, the most allowed: node n0 lost its lease at "
					     "2023-11-14 22:00:00 UTC; node n1 lost its lease at 2023-11-14 22:13:20 UTC; ");
	assert_true(c.finished == NOW);
	assert_string_equal(c.lease_log, "node n0 lost its lease at 2023-11-14 22:00:00 UTC; node n1 lost its lease "
					 "at 2023-11-14 22:13:20 UTC; ");
	sm_change_clear(&c);

	r.cancel_requested = 1;
	assert_int_equal(decide(SM_LEASE_EXPIRE, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_CANCELLED);
	assert_false(c.cols & SM_COL_ATTEMPTS);
	assert_string_equal(c.error_message, "cancelled by request");
	assert_int_equal(c.answer, 1);
	sm_change_clear(&c);

	assert_int_equal(decide(SM_RECOVER, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_CANCELLED);
	assert_int_equal(c.answer, 0); /* not counted as re-queued */
	assert_true(c.lease_until == 0 && (c.cols & SM_COL_LEASE));
	sm_change_clear(&c);
	r.cancel_requested = 0;
	assert_int_equal(decide(SM_RECOVER, &r, &a, &c, &err), 0);
	assert_int_equal(c.state, JOB_QUEUED);
	assert_true(c.started == 0 && !c.requeue);
	sm_change_clear(&c);
}

/* The columns of a change, in order, with their types. */
static void test_columns(void **state)
{
	(void)state;
	job_row r = row_in(JOB_QUEUED);
	sm_args a = args();
	sm_change c;
	rc_err err;
	sm_col col[SM_MAX_COLS];
	assert_int_equal(decide(SM_CANCEL, &r, &a, &c, &err), 0);
	int n = sm_change_columns(&c, col);
	const char *names[] = { "state", "updated", "finished", "error_code", "error_message" };
	const char types[] = "iddtt";
	assert_int_equal(n, 5);
	for (int i = 0; i < n; i++) {
		assert_string_equal(col[i].name, names[i]);
		assert_int_equal(col[i].type, types[i]);
	}
	assert_int_equal(col[0].i, JOB_CANCELLED);
	assert_string_equal(col[4].s, "cancelled by request");
	/* the conditional write: the row as read, the queue place when asked */
	char sql[256];
	assert_int_equal(sm_update_sql(col, n, NULL, sql, sizeof sql), 0);
	assert_string_equal(sql, "UPDATE jobs SET state=$1, updated=$2, finished=$3, error_code=$4, error_message=$5"
				 " WHERE id=$6 AND state=$7 AND node=$8");
	assert_int_equal(sm_update_sql(col, 1, "nextval('q')", sql, sizeof sql), 0);
	assert_string_equal(sql, "UPDATE jobs SET state=$1, queue_seq=nextval('q') WHERE id=$2 AND state=$3 AND node=$4");
	assert_int_equal(sm_update_sql(col, n, NULL, sql, 40), -1);
	sm_change_clear(&c);

	/* every column at once fits */
	memset(&c, 0, sizeof c);
	c.cols = ~0u;
	assert_true(sm_change_columns(&c, col) <= SM_MAX_COLS);

	/* views: the bitmap as a blob and the count */
	r = row_in(JOB_RECEIVING);
	assert_int_equal(decide(SM_VIEWS_CLEAR, &r, &a, &c, &err), 0);
	n = sm_change_columns(&c, col);
	int blob = 0;
	for (int i = 0; i < n; i++)
		if (!strcmp(col[i].name, "present")) {
			blob = 1;
			assert_int_equal(col[i].type, 'b');
			assert_int_equal(col[i].n, 1);
			assert_int_equal(col[i].b[0], 0x0e);
		}
	assert_true(blob);
	sm_change_clear(&c);
	sm_change_clear(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matrix),     cmocka_unit_test(test_absent), cmocka_unit_test(test_views),
		cmocka_unit_test(test_start_missing), cmocka_unit_test(test_nodes), cmocka_unit_test(test_take),
		cmocka_unit_test(test_finish),     cmocka_unit_test(test_expiry), cmocka_unit_test(test_columns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
