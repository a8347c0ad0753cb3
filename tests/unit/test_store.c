/*
 * Tests of server/store/store.c and its backends: the job life cycle through the
 * store (views, autostart, start, queue order, cancel, finish, delete,
 * expiry) and recovery after a crash (running jobs re-queued, partial
 * uploads kept with their presence record, orphan spool directories
 * removed), the pushes to PACS (made with the job, due once it succeeds,
 * earliest retry first, back to pending at a restart unless held for
 * confirmation, gone with the job), leases (renewal, expiry back to the
 * queue, the cap on attempts), two daemons on one queue, and the refusal of
 * a schema newer than the binary.
 *
 * One set of tests, two groups: SQLite always, PostgreSQL when
 * RECOND_TEST_PG holds a connection URI (tests/integration/test_store_pg.sh
 * starts a private cluster and sets it).  Each PostgreSQL test starts from
 * an empty database: its tables are dropped first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "spec.h"
#include "store/store.h"

static const char *spec_json(int prio, int autostart)
{
	static char buf[1024];
	snprintf(buf, sizeof buf,
		 "{\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 1000, \"source_detector_mm\": 1500,"
		 " \"angles\": {\"start_deg\": 0, \"step_deg\": 30, \"count\": 12},"
		 " \"detector\": {\"nu\": 16, \"nv\": 8, \"du_mm\": 1, \"dv_mm\": 1}},"
		 " \"volume\": {\"nx\": 8, \"ny\": 8, \"nz\": 4, \"voxel_mm\": 1},"
		 " \"algorithm\": {\"name\": \"sirt\"}, \"priority\": %d, \"autostart\": %s}",
		 prio, autostart ? "true" : "false");
	return buf;
}

static char dir[256];
static const char *pg_uri; /* the PostgreSQL group's database; NULL: SQLite */

static void quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg; /* "table does not exist, skipping" */
}

/* Runs sql on the group's database, outside any store. */
static void db_exec(const char *sql)
{
	if (pg_uri) {
		PGconn *c = PQconnectdb(pg_uri);
		assert_int_equal(PQstatus(c), CONNECTION_OK);
		PQsetNoticeProcessor(c, quiet, NULL);
		PGresult *r = PQexec(c, sql);
		int s = PQresultStatus(r);
		if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
			fail_msg("%s: %s", sql, PQerrorMessage(c));
		PQclear(r);
		PQfinish(c);
	} else {
		char path[300];
		sqlite3 *db;
		snprintf(path, sizeof path, "%s/recond.db", dir);
		assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
		char *msg = NULL;
		if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
			fail_msg("%s: %s", sql, msg ? msg : "?");
		sqlite3_close(db);
	}
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/test_store.XXXXXX");
	assert_non_null(mkdtemp(dir));
	if (pg_uri)
		db_exec("DROP TABLE IF EXISTS jobs, pushes, nodes, recond_schema;"
			" DROP SEQUENCE IF EXISTS recond_job_seq, recond_queue_seq");
	return 0;
}

/* store_open2 of this group's store, as the daemon named node opens it. */
static int open_as(const char *node, store **st, rc_err *err)
{
	return pg_uri ? store_open2(pg_uri, dir, node, st, err) : store_open2(dir, NULL, node, st, err);
}

static store *open_node(const char *node)
{
	store *st = NULL;
	rc_err err;
	int rc = open_as(node, &st, &err);
	if (rc)
		fail_msg("store_open2: %s", err.msg);
	return st;
}

static store *open_store(void) { return open_node("node-a"); }

static int group_sqlite(void **state)
{
	(void)state;
	pg_uri = NULL;
	return 0;
}

static int group_pg(void **state)
{
	(void)state;
	pg_uri = getenv("RECOND_TEST_PG");
	return 0;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	nanosleep(&ts, NULL);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void create(store *st, const char *id, int prio, int autostart)
{
	job_spec *s = NULL;
	rc_err err;
	const char *j = spec_json(prio, autostart);
	assert_int_equal(job_spec_parse(j, strlen(j), 0, &s, &err), 0);
	assert_int_equal(store_create(st, id, s, j, strlen(j), "{}", &err), 0);
	job_spec_free(s);
}

static job_state state_of(store *st, const char *id)
{
	job_row r;
	assert_int_equal(store_get(st, id, 0, &r, NULL), 0);
	job_state s = r.state;
	job_row_clear(&r);
	return s;
}

#define ID1 "11111111-1111-4111-8111-111111111111"
#define ID2 "22222222-2222-4222-8222-222222222222"
#define ID3 "33333333-3333-4333-8333-333333333333"

static void test_lifecycle(void **state)
{
	(void)state;
	store *st = NULL;
	rc_err err;
	st = open_store();
	create(st, ID1, 5, 0);
	char path[512];
	struct stat sb;
	store_job_path(st, ID1, "projections.f32", path, sizeof path);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal((long)sb.st_size, 12 * 16 * 8 * 4); /* preallocated */

	job_row r;
	assert_int_equal(store_get(st, ID1, 1, &r, &err), 0);
	assert_int_equal(r.state, JOB_CREATED);
	assert_int_equal(r.views_expected, 12);
	assert_true(r.view_bytes == 16 * 8 * 4);
	job_row_clear(&r);

	int changed;
	assert_int_equal(store_start(st, ID1, &changed, &err), RC_ESTATE); /* no views yet */
	job_state ns;
	assert_int_equal(store_views_set(st, ID1, 3, 4, &ns, &err), 0);
	assert_int_equal(ns, JOB_RECEIVING);
	assert_int_equal(store_views_set(st, ID1, 12, 13, &ns, &err), RC_EINVAL);
	assert_int_equal(store_views_set(st, ID1, 0, 12, &ns, &err), 0);
	assert_int_equal(ns, JOB_RECEIVING); /* no autostart */
	assert_int_equal(store_views_clear(st, ID1, 5, 6, &err), 0);
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	double updated = r.updated;
	job_row_clear(&r);
	assert_int_equal(store_views_clear(st, ID1, 5, 6, &err), 0); /* absent already: nothing committed */
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	assert_true(r.updated == updated);
	assert_int_equal(r.views_present, 11);
	job_row_clear(&r);
	assert_int_equal(store_start(st, ID1, &changed, &err), RC_ESTATE); /* view 5 missing */
	assert_non_null(strstr(err.msg, "missing 1"));
	assert_int_equal(store_views_set(st, ID1, 5, 6, &ns, &err), 0);
	assert_int_equal(store_start(st, ID1, &changed, &err), 0);
	assert_int_equal(changed, 1);
	assert_int_equal(state_of(st, ID1), JOB_QUEUED);
	assert_int_equal(store_views_set(st, ID1, 0, 1, &ns, &err), RC_ESTATE); /* queued: no uploads */

	/* Queue order: priority first, then first queued. */
	create(st, ID2, 5, 1);
	create(st, ID3, 9, 1);
	assert_int_equal(store_views_set(st, ID2, 0, 12, &ns, &err), 0);
	assert_int_equal(ns, JOB_QUEUED); /* autostart */
	assert_int_equal(store_views_set(st, ID3, 0, 12, &ns, &err), 0);
	assert_int_equal(store_queue_depth(st), 3);
	char id[37];
	assert_int_equal(store_take_next(st, id, &err), 0);
	assert_string_equal(id, ID3);
	assert_int_equal(store_take_next(st, id, &err), 0);
	assert_string_equal(id, ID1);

	/* Cancel: a running job only gets the request; a queued one is cancelled. */
	assert_int_equal(store_cancel(st, ID1, &ns, &err), 0);
	assert_int_equal(ns, JOB_RUNNING);
	assert_int_equal(store_cancel(st, ID2, &ns, &err), 0);
	assert_int_equal(ns, JOB_CANCELLED);
	assert_int_equal(store_take_next(st, id, &err), RC_ENOTFOUND);

	assert_int_equal(store_finish(st, ID1, JOB_CANCELLED, "cancelled", "by request", NULL, &err), 0);
	assert_int_equal(store_finish(st, ID3, JOB_SUCCEEDED, NULL, NULL, "{\"engine\":\"cpu\"}", &err), 0);
	assert_int_equal(store_get(st, ID3, 0, &r, &err), 0);
	assert_string_equal(r.report, "{\"engine\":\"cpu\"}");
	assert_true(r.finished >= r.started && r.started > 0);
	job_row_clear(&r);
	/* A finished job has nothing to cancel: RC_ESTATE, nothing changes. */
	assert_int_equal(store_cancel(st, ID3, &ns, &err), RC_ESTATE);
	assert_int_equal(store_cancel(st, ID1, &ns, &err), RC_ESTATE);
	assert_int_equal(store_get(st, ID3, 0, &r, &err), 0);
	assert_int_equal(r.state, JOB_SUCCEEDED);
	job_row_clear(&r);

	/* Delete removes row and files; unfinished jobs cannot be deleted. */
	create(st, "44444444-4444-4444-8444-444444444444", 5, 0);
	assert_int_equal(store_delete(st, "44444444-4444-4444-8444-444444444444", &err), RC_ESTATE);
	assert_int_equal(store_delete(st, ID3, &err), 0);
	assert_int_equal(store_get(st, ID3, 0, &r, &err), RC_ENOTFOUND);
	store_job_path(st, ID3, NULL, path, sizeof path);
	assert_int_not_equal(stat(path, &sb), 0);

	/* Expiry: finished jobs older than the retention go. */
	int n;
	assert_int_equal(store_expire(st, 3600, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_expire(st, -1, &n, &err), 0);
	assert_int_equal(n, 2); /* ID1, ID2 */
	job_row *rows;
	int cnt, total;
	assert_int_equal(store_list(st, -1, 10, 0, &rows, &cnt, &total, &err), 0);
	assert_int_equal(total, 1);
	for (int i = 0; i < cnt; i++)
		job_row_clear(&rows[i]);
	free(rows);
	store_close(st);
}

static void test_recovery(void **state)
{
	(void)state;
	store *st = NULL;
	rc_err err;
	job_state ns;
	char id[37];
	st = open_store();
	create(st, ID1, 5, 1);
	create(st, ID2, 5, 0);
	assert_int_equal(store_views_set(st, ID1, 0, 12, &ns, &err), 0);
	assert_int_equal(store_take_next(st, id, &err), 0); /* ID1 running when "the daemon dies" */
	assert_int_equal(store_views_set(st, ID2, 2, 5, &ns, &err), 0);
	assert_int_equal(store_views_set(st, ID2, 9, 10, &ns, &err), 0);
	/* ID3 running too, its cancel acknowledged (202) before "the daemon dies" */
	create(st, ID3, 9, 1);
	assert_int_equal(store_views_set(st, ID3, 0, 12, &ns, &err), 0);
	assert_int_equal(store_take_next(st, id, &err), 0);
	assert_string_equal(id, ID3);
	assert_int_equal(store_cancel(st, ID3, &ns, &err), 0);
	assert_int_equal(ns, JOB_RUNNING);
	store_close(st); /* no orderly shutdown: the rows stay as they were */

	/* An orphan: a spool directory whose create never committed. */
	char orphan[512];
	snprintf(orphan, sizeof orphan, "%s/jobs/55555555-5555-4555-8555-555555555555", dir);
	assert_int_equal(mkdir(orphan, 0750), 0);
	/* an hour old: on a shared spool (PostgreSQL) a younger one may be
	 * another daemon's create in progress, and is left */
	struct timeval old[2];
	gettimeofday(&old[0], NULL);
	old[0].tv_sec -= 3600;
	old[1] = old[0];
	assert_int_equal(utimes(orphan, old), 0);
	/* A temporary left by a volume write cut short in a live job. */
	char tmpf[512];
	snprintf(tmpf, sizeof tmpf, "%s/jobs/%s/.volume.f32.tmp", dir, ID1);
	FILE *tf = fopen(tmpf, "w");
	assert_non_null(tf);
	fclose(tf);
	/* A volume its worker finished as the daemon died: the re-queued job runs afresh. */
	char stale[512];
	snprintf(stale, sizeof stale, "%s/jobs/%s/volume.f32", dir, ID1);
	tf = fopen(stale, "w");
	assert_non_null(tf);
	fclose(tf);

	st = open_store();
	int requeued, orphans;
	assert_int_equal(store_recover(st, &requeued, &orphans, &err), 0);
	assert_int_equal(requeued, 1);
	struct stat sb;
	assert_int_not_equal(stat(orphan, &sb), 0);
	if (store_is_shared(st)) {
		/* a shared spool sweeps finished jobs only: another node may take
		 * the re-queued one at once (its runner clears volume.f32 first) */
		assert_int_equal(orphans, 1);
		assert_int_equal(stat(tmpf, &sb), 0);
		unlink(tmpf);
		unlink(stale);
	} else {
		assert_int_equal(orphans, 3);
		assert_int_not_equal(stat(tmpf, &sb), 0);
		assert_int_not_equal(stat(stale, &sb), 0);
	}
	assert_int_equal(state_of(st, ID1), JOB_QUEUED);
	assert_int_equal(state_of(st, ID3), JOB_CANCELLED); /* the acknowledged cancel holds */
	/* The recovery run while the daemon serves (after a start on a full
	 * disk) leaves a young directory without a row: a create in flight. */
	char young[512];
	snprintf(young, sizeof young, "%s/jobs/66666666-6666-4666-8666-666666666666", dir);
	assert_int_equal(mkdir(young, 0750), 0);
	assert_int_equal(store_recover_serving(st, NULL, NULL, &err), 0);
	assert_int_equal(stat(young, &sb), 0);
	assert_int_equal(utimes(young, old), 0); /* an hour old: a create that died */
	assert_int_equal(store_recover_serving(st, NULL, NULL, &err), 0);
	assert_int_not_equal(stat(young, &sb), 0);
	job_row r;
	assert_int_equal(store_get(st, ID2, 1, &r, &err), 0);
	assert_int_equal(r.state, JOB_RECEIVING);
	assert_int_equal(r.views_present, 4);
	for (int k = 0; k < 12; k++)
		assert_int_equal((r.present[k >> 3] >> (k & 7)) & 1, (k >= 2 && k < 5) || k == 9);
	job_row_clear(&r);
	assert_int_equal(store_take_next(st, id, &err), 0);
	assert_string_equal(id, ID1);
	store_close(st);
}

/* A streaming FDK job: queued with its first view, takes views while queued
 * and running, finishes; paused back to receiving when its views stop; a
 * whole stack with stream auto queues as a batch. */
static void create_fdk(store *st, const char *id, const char *stream)
{
	char j[1024];
	snprintf(j, sizeof j,
		 "{\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 1000, \"source_detector_mm\": 1500,"
		 " \"angles\": {\"start_deg\": 0, \"step_deg\": 30, \"count\": 12},"
		 " \"detector\": {\"nu\": 16, \"nv\": 8, \"du_mm\": 1, \"dv_mm\": 1}},"
		 " \"volume\": {\"nx\": 8, \"ny\": 8, \"nz\": 4, \"voxel_mm\": 1},"
		 " \"algorithm\": {\"name\": \"fdk\"}, \"autostart\": true, \"execution\": {%s}}", stream);
	job_spec *s = NULL;
	rc_err err;
	assert_int_equal(job_spec_parse(j, strlen(j), 0, &s, &err), 0);
	assert_int_equal(store_create(st, id, s, j, strlen(j), "{}", &err), 0);
	job_spec_free(s);
}

static void test_streaming(void **state)
{
	(void)state;
	store *st;
	rc_err err;
	job_state ns;
	job_row r;
	char id[37];
	st = open_store();
	create_fdk(st, "00000000-0000-4000-8000-0000000000a1", "\"stream\": true");
	assert_int_equal(store_views_set(st, "00000000-0000-4000-8000-0000000000a1", 3, 4, &ns, &err), 0);
	assert_int_equal(ns, JOB_QUEUED);
	assert_int_equal(store_get(st, "00000000-0000-4000-8000-0000000000a1", 0, &r, &err), 0);
	assert_int_equal(r.stream, STREAM_ON);
	assert_int_equal(r.streaming, 1);
	assert_true(job_row_uploadable(&r));
	job_row_clear(&r);
	assert_int_equal(store_take_next(st, id, &err), 0);
	assert_string_equal(id, "00000000-0000-4000-8000-0000000000a1");
	/* running: views still come, and may be stored again */
	assert_int_equal(store_views_set(st, id, 0, 3, &ns, &err), 0);
	assert_int_equal(ns, JOB_RUNNING);
	assert_int_equal(store_views_clear(st, id, 1, 2, &err), 0);
	assert_int_equal(store_views_set(st, id, 1, 2, &ns, &err), 0);
	/* the views stop coming: back to receiving, no longer streaming */
	assert_int_equal(store_stream_pause(st, id, &err), 0);
	assert_int_equal(store_get(st, id, 0, &r, &err), 0);
	assert_int_equal(r.state, JOB_RECEIVING);
	assert_int_equal(r.streaming, 0);
	assert_int_equal(r.views_present, 4);
	job_row_clear(&r);
	assert_int_equal(store_stream_pause(st, id, &err), RC_ESTATE);
	/* the next view queues it again, streaming */
	assert_int_equal(store_views_set(st, id, 4, 5, &ns, &err), 0);
	assert_int_equal(ns, JOB_QUEUED);
	assert_int_equal(store_take_next(st, id, &err), 0);
	assert_int_equal(store_views_set(st, id, 5, 12, &ns, &err), 0);
	assert_int_equal(ns, JOB_RUNNING);
	assert_int_equal(store_finish(st, id, JOB_SUCCEEDED, NULL, NULL, NULL, &err), 0);
	assert_int_equal(store_get(st, id, 0, &r, &err), 0);
	assert_false(job_row_uploadable(&r));
	job_row_clear(&r);
	assert_int_equal(store_views_set(st, id, 0, 1, &ns, &err), RC_ESTATE);
	/* stream auto and a whole stack: a batch job */
	create_fdk(st, "00000000-0000-4000-8000-0000000000a2", "");
	assert_int_equal(store_views_set(st, "00000000-0000-4000-8000-0000000000a2", 0, 12, &ns, &err), 0);
	assert_int_equal(ns, JOB_QUEUED);
	assert_int_equal(store_get(st, "00000000-0000-4000-8000-0000000000a2", 0, &r, &err), 0);
	assert_int_equal(r.stream, STREAM_AUTO);
	assert_int_equal(r.streaming, 0);
	job_row_clear(&r);
	/* stream off: views one by one wait for the last */
	create_fdk(st, "00000000-0000-4000-8000-0000000000a3", "\"stream\": false");
	assert_int_equal(store_views_set(st, "00000000-0000-4000-8000-0000000000a3", 0, 1, &ns, &err), 0);
	assert_int_equal(ns, JOB_RECEIVING);
	/* priority: before the job runs only */
	assert_int_equal(store_set_priority(st, "00000000-0000-4000-8000-0000000000a3", 9, &ns, &err), 0);
	assert_int_equal(ns, JOB_RECEIVING);
	assert_int_equal(store_set_priority(st, "00000000-0000-4000-8000-0000000000a3", 10, &ns, &err), RC_EINVAL);
	assert_int_equal(store_set_priority(st, "00000000-0000-4000-8000-0000000000a1", 1, &ns, &err), RC_ESTATE);
	assert_int_equal(store_set_priority(st, "00000000-0000-4000-8000-0000000000ff", 1, &ns, &err), RC_ENOTFOUND);
	assert_int_equal(store_get(st, "00000000-0000-4000-8000-0000000000a3", 0, &r, &err), 0);
	assert_int_equal(r.priority, 9);
	job_row_clear(&r);
	store_close(st);
}

/* A job that pushes to two destinations. */
static void create_pushing(store *st, const char *id)
{
	char j[1200];
	const char *base = spec_json(5, 1);
	snprintf(j, sizeof j, "%.*s, \"output\": {\"push\": [\"a\", \"b\"]}}", (int)strlen(base) - 1, base);
	job_spec *s = NULL;
	rc_err err;
	assert_int_equal(job_spec_parse(j, strlen(j), 0, &s, &err), 0);
	assert_int_equal(s->out.npush, 2);
	assert_int_equal(store_create(st, id, s, j, strlen(j), "{}", &err), 0);
	job_spec_free(s);
}

static void run_to(store *st, const char *id, job_state final)
{
	char got[37];
	rc_err err;
	assert_int_equal(store_views_set(st, id, 0, 12, NULL, &err), 0);
	assert_int_equal(store_take_next(st, got, &err), 0);
	assert_string_equal(got, id);
	assert_int_equal(store_finish(st, id, final, NULL, NULL, NULL, &err), 0);
}

static void test_pushes(void **state)
{
	(void)state;
	store *st;
	rc_err err;
	push_row p, *rows;
	int n;
	double due;
	st = open_store();
	create_pushing(st, ID1);
	create(st, ID2, 5, 1); /* no pushes */
	assert_int_equal(store_push_list(st, ID1, &rows, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].dest, "a");
	assert_string_equal(rows[1].dest, "b");
	assert_int_equal(rows[0].state, PUSH_PENDING);
	free(rows);
	assert_int_equal(store_push_list(st, ID2, &rows, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_push_again(st, ID2, &n, &err), RC_ENOTFOUND);

	/* nothing is due before the job succeeds */
	assert_int_equal(store_push_take(st, store_now(), &p, &due, &err), RC_ENOTFOUND);
	run_to(st, ID1, JOB_SUCCEEDED);
	assert_int_equal(store_push_take(st, store_now(), &p, &due, &err), 0);
	assert_string_equal(p.job, ID1);
	assert_string_equal(p.dest, "a");
	assert_int_equal(p.state, PUSH_SENDING);
	/* a failed attempt waits; the other destination goes first */
	p.state = PUSH_PENDING;
	p.attempts = 1;
	p.next_try = store_now() + 100;
	snprintf(p.error, sizeof p.error, "refused");
	assert_int_equal(store_push_update(st, &p, &err), 0);
	push_row q;
	assert_int_equal(store_push_take(st, store_now(), &q, &due, &err), 0);
	assert_string_equal(q.dest, "b");
	q.state = PUSH_SENT;
	q.sent = q.total = 4;
	assert_int_equal(store_push_update(st, &q, &err), 0);
	assert_int_equal(store_push_take(st, store_now(), &q, &due, &err), RC_ENOTFOUND);
	assert_true(due > store_now() + 90); /* "a" is due in 100 s */
	assert_int_equal(store_push_list(st, ID1, &rows, &n, &err), 0);
	assert_int_equal(rows[0].attempts, 1);
	assert_string_equal(rows[0].error, "refused");
	assert_int_equal(rows[1].state, PUSH_SENT);
	assert_int_equal(rows[1].sent, 4);
	free(rows);

	/* a restart tries the waiting push now */
	store_close(st);
	st = open_store();
	assert_int_equal(store_recover(st, NULL, NULL, &err), 0);
	assert_int_equal(store_push_take(st, store_now(), &p, &due, &err), 0);
	assert_string_equal(p.dest, "a");
	/* POST push: all but the one being sent go back to pending, attempts anew */
	assert_int_equal(store_push_again(st, ID1, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_push_list(st, ID1, &rows, &n, &err), 0);
	assert_int_equal(rows[0].state, PUSH_SENDING);
	assert_int_equal(rows[1].state, PUSH_PENDING);
	assert_int_equal(rows[1].attempts, 0);
	free(rows);
	/* deleting the job removes its pushes */
	assert_int_equal(store_delete(st, ID1, &err), 0);
	assert_int_equal(store_push_list(st, ID1, &rows, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_push_take(st, store_now(), &p, &due, &err), RC_ENOTFOUND);
	store_close(st);
}

/* Pushes held for an operator's confirmation (PUSH_HELD_TRY, a job with
 * warnings under dicom.push_confirm_warnings): never due, still held after
 * a restart's recovery, sent once POST push releases them. */
static void test_pushes_held(void **state)
{
	(void)state;
	store *st = open_store();
	rc_err err;
	push_row p, *rows;
	int n;
	double due;
	create_pushing(st, ID1);
	assert_int_equal(store_push_list(st, ID1, &rows, &n, &err), 0);
	assert_int_equal(n, 2);
	for (int i = 0; i < n; i++) {
		rows[i].next_try = PUSH_HELD_TRY;
		snprintf(rows[i].error, sizeof rows[i].error, "held for confirmation");
		assert_int_equal(store_push_update(st, &rows[i], &err), 0);
	}
	free(rows);
	run_to(st, ID1, JOB_SUCCEEDED);
	assert_int_equal(store_push_take(st, store_now(), &p, &due, &err), RC_ENOTFOUND);
	store_close(st);
	st = open_store();
	assert_int_equal(store_recover(st, NULL, NULL, &err), 0);
	assert_int_equal(store_push_take(st, store_now(), &p, &due, &err), RC_ENOTFOUND);
	assert_int_equal(store_push_list(st, ID1, &rows, &n, &err), 0);
	assert_true(rows[0].next_try >= PUSH_HELD_TRY && rows[1].next_try >= PUSH_HELD_TRY);
	assert_string_equal(rows[0].error, "held for confirmation");
	free(rows);
	assert_int_equal(store_push_again(st, ID1, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(store_push_take(st, store_now(), &p, &due, &err), 0);
	assert_string_equal(p.dest, "a");
	assert_string_equal(p.error, "");
	store_close(st);
}

static void test_leases(void **state)
{
	(void)state;
	store *st = open_store();
	rc_err err;
	job_row r;
	char id[37];
	int n;
	create(st, ID1, 5, 1);
	assert_int_equal(store_views_set(st, ID1, 0, 12, NULL, &err), 0);
	assert_int_equal(store_take_next_lease(st, "node-a", 0, id, &err), RC_EINVAL);
	assert_int_equal(store_lease_expire(st, 0, &n, &err), RC_EINVAL);

	/* held and renewed by its node only */
	assert_int_equal(store_take_next_lease(st, "node-a", 0.3, id, &err), 0);
	assert_string_equal(id, ID1);
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	assert_int_equal(r.state, JOB_RUNNING);
	assert_string_equal(r.node, "node-a");
	assert_true(r.lease_until > 0);
	job_row_clear(&r);
	assert_int_equal(store_lease_renew(st, ID1, "node-b", 0.3, NULL, &err), RC_ESTATE);
	assert_non_null(strstr(err.msg, "node-a"));
	assert_int_equal(store_lease_renew(st, ID1, "node-a", 0.3, NULL, &err), 0);
	assert_int_equal(store_lease_renew(st, ID2, "node-a", 0.3, NULL, &err), RC_ENOTFOUND);
	assert_int_equal(store_lease_expire(st, 3, &n, &err), 0);
	assert_int_equal(n, 0);

	/* a job taken without a lease never expires */
	create(st, ID2, 1, 1);
	assert_int_equal(store_views_set(st, ID2, 0, 12, NULL, &err), 0);
	assert_int_equal(store_take_next(st, id, &err), 0);
	assert_string_equal(id, ID2);

	/* expired: queued again, counted; the old node's renewal is refused */
	sleep_s(0.5);
	assert_int_equal(store_lease_expire(st, 3, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	assert_int_equal(r.state, JOB_QUEUED);
	assert_int_equal(r.attempts, 1);
	assert_string_equal(r.node, "");
	job_row_clear(&r);
	assert_int_equal(state_of(st, ID2), JOB_RUNNING);
	assert_int_equal(store_lease_renew(st, ID1, "node-a", 0.3, NULL, &err), RC_ESTATE);
	assert_int_equal(store_finish(st, ID1, JOB_SUCCEEDED, NULL, NULL, NULL, &err), RC_ESTATE);

	/* two more expiries reach the cap: failed, with each node named */
	assert_int_equal(store_take_next_lease(st, "node-b", 0.05, id, &err), 0);
	assert_string_equal(id, ID1);
	sleep_s(0.2);
	assert_int_equal(store_lease_expire(st, 3, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_take_next_lease(st, "node-c", 0.05, id, &err), 0);
	assert_string_equal(id, ID1);
	sleep_s(0.2);
	assert_int_equal(store_lease_expire(st, 3, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	assert_int_equal(r.state, JOB_FAILED);
	assert_int_equal(r.attempts, 3);
	assert_string_equal(r.error_code, "lease_expired");
	assert_non_null(strstr(r.error_message, "3 times"));
	assert_non_null(strstr(r.error_message, "node node-a lost its lease"));
	assert_non_null(strstr(r.error_message, "node node-b"));
	assert_non_null(strstr(r.error_message, "node node-c"));
	assert_true(r.finished > 0);
	job_row_clear(&r);

	/* an acknowledged cancel holds when the lease expires */
	create(st, ID3, 5, 1);
	assert_int_equal(store_views_set(st, ID3, 0, 12, NULL, &err), 0);
	assert_int_equal(store_take_next_lease(st, "node-a", 0.05, id, &err), 0);
	assert_string_equal(id, ID3);
	job_state ns;
	assert_int_equal(store_cancel(st, ID3, &ns, &err), 0);
	assert_int_equal(ns, JOB_RUNNING);
	sleep_s(0.2);
	assert_int_equal(store_lease_expire(st, 3, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(state_of(st, ID3), JOB_CANCELLED);
	assert_int_equal(state_of(st, ID2), JOB_RUNNING);
	store_close(st);
}

/* Two daemons on one queue never take the same job. */
static void test_two_nodes(void **state)
{
	(void)state;
	store *a = open_node("node-a"), *b = open_node("node-b");
	rc_err err;
	char ida[37], idb[37], idc[37];
	create(a, ID1, 5, 1);
	create(b, ID2, 5, 1);
	assert_int_equal(store_views_set(a, ID1, 0, 12, NULL, &err), 0);
	assert_int_equal(store_views_set(b, ID2, 0, 12, NULL, &err), 0);
	assert_int_equal(store_take_next_lease(a, "node-a", 60, ida, &err), 0);
	assert_int_equal(store_take_next_lease(b, "node-b", 60, idb, &err), 0);
	assert_string_not_equal(ida, idb);
	/* first queued first; SQLite's queue sequence is counted per process
	 * (it serves one daemon), so only PostgreSQL's order holds here */
	if (pg_uri)
		assert_string_equal(ida, ID1);
	assert_int_equal(store_take_next(a, idc, &err), RC_ENOTFOUND);
	/* b restarts: only its own job goes back to the queue */
	store_close(b);
	b = open_node("node-b");
	int requeued;
	assert_int_equal(store_recover(b, &requeued, NULL, &err), 0);
	if (pg_uri) {
		assert_int_equal(requeued, 1);
		assert_int_equal(state_of(b, ID1), JOB_RUNNING);
	} else {
		assert_int_equal(requeued, 2); /* SQLite: one daemon, every running job is its own */
	}
	assert_int_equal(state_of(b, ID2), JOB_QUEUED);
	store_close(a);
	store_close(b);
}

/* A job spec with execution.engine (placement). */
static void create_engine(store *st, const char *id, int prio, const char *engine)
{
	char j[1200];
	job_spec *s = NULL;
	rc_err err;
	const char *base = spec_json(prio, 1);
	snprintf(j, sizeof j, "%.*s, \"execution\": {\"engine\": \"%s\"}}", (int)strlen(base) - 1, base, engine);
	if (job_spec_parse(j, strlen(j), 0, &s, &err))
		fail_msg("%s: %s", j, err.msg);
	assert_int_equal(store_create(st, id, s, j, strlen(j), "{}", &err), 0);
	job_spec_free(s);
}

/* Only the node that holds a job records its end or its progress. */
static void test_finish_node(void **state)
{
	(void)state;
	store *a = open_node("node-a"), *b = open_node("node-b");
	rc_err err;
	job_row r;
	char id[37];
	create(a, ID1, 5, 1);
	assert_int_equal(store_views_set(a, ID1, 0, 12, NULL, &err), 0);
	assert_int_equal(store_take_next_lease(b, "node-b", 60, id, &err), 0);
	assert_string_equal(id, ID1);
	assert_int_equal(store_finish(a, ID1, JOB_SUCCEEDED, NULL, NULL, NULL, &err), RC_ESTATE);
	assert_non_null(strstr(err.msg, "node-a"));
	assert_int_equal(store_finish(a, ID1, JOB_QUEUED, NULL, NULL, NULL, &err), RC_ESTATE);
	assert_int_equal(store_progress(a, ID1, "{\"iteration\":1}", &err), RC_ESTATE);
	assert_int_equal(state_of(a, ID1), JOB_RUNNING);

	/* the live progress round trip, cleared when the job is taken again */
	const char *prog = "{\"iteration\":3,\"of\":10,\"residual\":0.5,\"fraction\":0.3}";
	assert_int_equal(store_progress(b, ID1, prog, &err), 0);
	assert_int_equal(store_get(a, ID1, 0, &r, &err), 0);
	assert_non_null(r.progress);
	assert_string_equal(r.progress, prog);
	assert_string_equal(r.node, "node-b");
	job_row_clear(&r);
	assert_int_equal(store_finish(b, ID1, JOB_QUEUED, NULL, NULL, NULL, &err), 0);
	assert_int_equal(store_get(a, ID1, 0, &r, &err), 0);
	assert_null(r.progress);
	job_row_clear(&r);
	assert_int_equal(store_take_next_lease(b, "node-b", 60, id, &err), 0);
	assert_int_equal(store_finish(b, ID1, JOB_SUCCEEDED, NULL, NULL, "{}", &err), 0);
	assert_int_equal(state_of(a, ID1), JOB_SUCCEEDED);

	/* a renewal reads a cancel asked through another node */
	int cancel = -1;
	create(a, ID2, 5, 1);
	assert_int_equal(store_views_set(a, ID2, 0, 12, NULL, &err), 0);
	assert_int_equal(store_take_next_lease(b, "node-b", 60, id, &err), 0);
	assert_int_equal(store_lease_renew(b, ID2, "node-b", 60, &cancel, &err), 0);
	assert_int_equal(cancel, 0);
	job_state ns;
	assert_int_equal(store_cancel(a, ID2, &ns, &err), 0);
	assert_int_equal(ns, JOB_RUNNING);
	assert_int_equal(store_lease_renew(b, ID2, "node-b", 60, &cancel, &err), 0);
	assert_int_equal(cancel, 1);

	/* views cleared are counted (a streaming job's node polls the bitmap) */
	create(a, ID3, 5, 0);
	assert_int_equal(store_views_set(a, ID3, 0, 6, NULL, &err), 0);
	assert_int_equal(store_views_clear(b, ID3, 2, 8, &err), 0);
	assert_int_equal(store_views_clear(b, ID3, 2, 8, &err), 0); /* nothing present: nothing counted */
	assert_int_equal(store_get(a, ID3, 0, &r, &err), 0);
	assert_int_equal(r.views_cleared, 4);
	assert_int_equal(r.views_present, 2);
	job_row_clear(&r);
	store_close(a);
	store_close(b);
}

/* Each node's heartbeat row; SQLite keeps the one daemon's. */
static void test_nodes(void **state)
{
	(void)state;
	store *a = open_node("node-a"), *b = open_node("node-b");
	rc_err err;
	node_row *rows = NULL;
	int n = -1;
	assert_int_equal(store_nodes_list(a, &rows, &n, &err), 0);
	assert_int_equal(n, 0);
	double t0 = store_now();
	assert_int_equal(store_node_heartbeat(a, "[{\"engine\":\"cpu\"}]", ID1, t0 - 5, &err), 0);
	assert_int_equal(store_node_heartbeat(a, "[{\"engine\":\"cpu\"}]", "", t0 - 5, &err), 0);
	assert_int_equal(store_node_heartbeat(b, NULL, ID2, t0, &err), 0);
	assert_int_equal(store_nodes_list(a, &rows, &n, &err), 0);
	if (pg_uri) {
		assert_int_equal(n, 2);
		assert_string_equal(rows[0].name, "node-a");
		assert_string_equal(rows[0].running, "");
		assert_string_equal(rows[0].devices, "[{\"engine\":\"cpu\"}]");
		assert_true(fabs(rows[0].started - (t0 - 5)) < 1e-3);
		assert_string_equal(rows[1].name, "node-b");
		assert_string_equal(rows[1].running, ID2);
		assert_string_equal(rows[1].devices, "[]");
	} else {
		assert_int_equal(n, 1); /* one daemon: the last one's row */
		assert_string_equal(rows[0].name, "node-b");
	}
	for (int i = 0; i < n; i++) {
		assert_true(rows[i].age_s > -1 && rows[i].age_s < 5);
		assert_true(rows[i].heartbeat > t0 - 60);
		node_row_clear(&rows[i]);
	}
	free(rows);
	store_close(a);
	store_close(b);
}

/* Placement: a job that names an engine goes only to a node that has it. */
static void test_placement(void **state)
{
	(void)state;
	store *st = open_store();
	rc_err err;
	job_row r;
	char id[37];
	create_engine(st, ID1, 9, "opencl");
	create_engine(st, ID2, 1, "cpu");
	create_engine(st, ID3, 5, "auto");
	assert_int_equal(store_views_set(st, ID1, 0, 12, NULL, &err), 0);
	assert_int_equal(store_views_set(st, ID2, 0, 12, NULL, &err), 0);
	assert_int_equal(store_views_set(st, ID3, 0, 12, NULL, &err), 0);
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	assert_string_equal(r.engine, "opencl");
	job_row_clear(&r);
	assert_int_equal(store_get(st, ID2, 0, &r, &err), 0);
	assert_string_equal(r.engine, "");
	job_row_clear(&r);
	/* a CPU-only node passes over the OpenCL job, highest priority first */
	assert_int_equal(store_take_next_on(st, "node-a", 60, "cpu", id, &err), 0);
	assert_string_equal(id, ID3);
	assert_int_equal(store_take_next_on(st, "node-a", 60, "", id, &err), 0);
	assert_string_equal(id, ID2);
	assert_int_equal(store_take_next_on(st, "node-a", 60, "cpu", id, &err), RC_ENOTFOUND);
	assert_int_equal(state_of(st, ID1), JOB_QUEUED);
	assert_int_equal(store_take_next_on(st, "node-a", 60, "cuda,opencl", id, &err), 0);
	assert_string_equal(id, ID1);
	store_close(st);
}

/* A database newer than the binary is refused at open, with a reason. */
static void test_schema_version(void **state)
{
	(void)state;
	store *st = open_store();
	create(st, ID1, 5, 0);
	store_close(st);
	db_exec("UPDATE recond_schema SET version = 99");
	rc_err err;
	st = NULL;
	assert_int_equal(open_as("node-a", &st, &err), RC_EUNSUPPORTED);
	assert_null(st);
	assert_non_null(strstr(err.msg, "schema version 99"));
	assert_non_null(strstr(err.msg, "newer"));
}

/* SQLite: a store made before the version table (and leases) is migrated
 * and keeps its jobs. */
static void test_sqlite_migration(void **state)
{
	(void)state;
	if (pg_uri)
		skip();
	store *st = open_store();
	create(st, ID1, 5, 0);
	store_close(st);
	db_exec("DROP TABLE recond_schema; ALTER TABLE jobs DROP COLUMN node; ALTER TABLE jobs DROP COLUMN lease_until;"
		" ALTER TABLE jobs DROP COLUMN attempts; ALTER TABLE jobs DROP COLUMN lease_log;");
	st = open_store();
	job_row r;
	rc_err err;
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	assert_int_equal(r.state, JOB_CREATED);
	assert_int_equal(r.attempts, 0);
	job_row_clear(&r);
	store_close(st);
}

/* Owners: kept with the job; a store of the schema before owners (SQLite 4,
 * PostgreSQL 3) is migrated, its jobs read as nobody's ("") and stay
 * usable, and new jobs get their owner. */
static void test_owner_migration(void **state)
{
	(void)state;
	store *st = open_store();
	job_spec *s = NULL;
	rc_err err;
	job_row r;
	const char *j = spec_json(5, 0);
	assert_int_equal(job_spec_parse(j, strlen(j), 0, &s, &err), 0);
	assert_int_equal(store_create_owned(st, ID1, s, j, strlen(j), "{}", "alice", &err), 0);
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	assert_string_equal(r.owner, "alice");
	job_row_clear(&r);
	store_close(st);
	db_exec(pg_uri ? "ALTER TABLE jobs DROP COLUMN owner; UPDATE recond_schema SET version = 3"
		       : "ALTER TABLE jobs DROP COLUMN owner; UPDATE recond_schema SET version = 4");
	st = open_store();
	assert_int_equal(store_get(st, ID1, 0, &r, &err), 0);
	assert_string_equal(r.owner, "");
	assert_int_equal(r.state, JOB_CREATED);
	job_row_clear(&r);
	assert_int_equal(store_create_owned(st, ID2, s, j, strlen(j), "{}", "bob", &err), 0);
	job_row *rows = NULL;
	int n = 0, total = 0;
	assert_int_equal(store_list(st, -1, 10, 0, &rows, &n, &total, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].owner, "bob"); /* newest first */
	assert_string_equal(rows[1].owner, "");
	for (int i = 0; i < n; i++)
		job_row_clear(&rows[i]);
	free(rows);
	job_state after;
	assert_int_equal(store_cancel(st, ID1, &after, &err), 0);
	assert_int_equal(after, JOB_CANCELLED);
	job_spec_free(s);
	store_close(st);
}

/* PostgreSQL: a lost connection fails one call with RC_EUNAVAIL (503) and
 * the next call connects again. */
static void test_pg_reconnect(void **state)
{
	(void)state;
	if (!pg_uri)
		skip();
	store *st = open_store();
	rc_err err;
	int counts[JOB_NSTATES];
	create(st, ID1, 5, 0);
	db_exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
		" WHERE application_name = 'recond' AND pid <> pg_backend_pid()");
	assert_int_equal(store_counts(st, counts, &err), RC_EUNAVAIL);
	assert_non_null(strstr(err.msg, "retry"));
	assert_int_equal(store_counts(st, counts, &err), 0);
	assert_int_equal(counts[JOB_CREATED], 1);
	assert_int_equal(state_of(st, ID1), JOB_CREATED);
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recovery, setup, teardown),
		cmocka_unit_test_setup_teardown(test_streaming, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pushes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pushes_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_leases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_nodes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_finish_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nodes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_placement, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schema_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_migration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_migration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pg_reconnect, setup, teardown),
	};
	int failed = cmocka_run_group_tests_name("sqlite", tests, group_sqlite, NULL);
	if (getenv("RECOND_TEST_PG") && getenv("RECOND_TEST_PG")[0])
		failed += cmocka_run_group_tests_name("postgresql", tests, group_pg, NULL);
	else
		printf("postgresql: not run (RECOND_TEST_PG is not set; tests/integration/test_store_pg.sh sets it)\n");
	return failed;
}
