/*
 * store_sqlite: the job table in SQLite, one daemon (store.h,
 * store_backend.h; the spool is store_spool.c's).
 *
 * One connection, one mutex: every call takes the lock, runs its statements
 * (a transaction when there are several) and releases it.  The schema keeps
 * what the HTTP layer shows without opening files: sizes, the presence
 * bitmap, timestamps, the error and the worker's report as JSON text.
 * queue_seq orders the queue among equal priorities (first queued first).
 * An operation on a job reads its row, asks the state machine
 * (store_machine.h) and writes the change under the same lock: the single
 * writer needs no row lock.
 */
#include "store/store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "durable.h"
#include "base/log.h"
#include "store/store_machine.h"
#include "store/store_sqlite.h"

/* The connection's errors, statements and log: store_sqlite_db.c. */
#define db_fail store_db_fail
#define exec_sql sq_exec

/* Version 1: the tables as they were before the version table; a store made
 * then has them and no recond_schema (version 0 below). */
static const char schema_v1[] =
	"CREATE TABLE IF NOT EXISTS jobs ("
	" id TEXT PRIMARY KEY, seq INTEGER NOT NULL, state INTEGER NOT NULL,"
	" label TEXT NOT NULL DEFAULT '', priority INTEGER NOT NULL, autostart INTEGER NOT NULL,"
	" cancel_requested INTEGER NOT NULL DEFAULT 0,"
	" created REAL NOT NULL, updated REAL NOT NULL, queued REAL NOT NULL DEFAULT 0,"
	" started REAL NOT NULL DEFAULT 0, finished REAL NOT NULL DEFAULT 0,"
	" queue_seq INTEGER NOT NULL DEFAULT 0,"
	" views_expected INTEGER NOT NULL, views_present INTEGER NOT NULL DEFAULT 0,"
	" nu INTEGER NOT NULL, rows INTEGER NOT NULL, view_stride INTEGER NOT NULL, row_stride INTEGER NOT NULL,"
	" view_bytes INTEGER NOT NULL, proj_bytes INTEGER NOT NULL, vol_bytes INTEGER NOT NULL,"
	" error_code TEXT NOT NULL DEFAULT '', error_message TEXT NOT NULL DEFAULT '',"
	" summary TEXT, report TEXT, present BLOB NOT NULL);"
	"CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(state, priority, queue_seq);"
	"CREATE INDEX IF NOT EXISTS jobs_seq ON jobs(seq);"
	STORE_PUSH_SCHEMA;

/* Version 2: leases (store.h). */
static const char schema_v2[] =
	"ALTER TABLE jobs ADD COLUMN node TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE jobs ADD COLUMN lease_until REAL NOT NULL DEFAULT 0;"
	"ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE jobs ADD COLUMN lease_log TEXT NOT NULL DEFAULT '';";

/* Version 3: streaming FDK (stream, streaming); add_stream_columns adds
 * them, since a store of the first streaming build has them already
 * without a version table. */
static const char schema_v3[] = "";

/* Version 4: clusters (store.h): the engine a job needs, its live progress,
 * the bitmap's change counter, the nodes table; add_cluster_columns adds
 * the columns, since version 0 runs the versions before it on a store that
 * may have them (the stream columns' case). */
static const char schema_v4[] =
	"CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, devices TEXT NOT NULL DEFAULT '[]',"
	" running TEXT NOT NULL DEFAULT '', heartbeat REAL NOT NULL, started REAL NOT NULL);";

/* Version 5: owners (store.h): the token name that created a job; a job
 * from before has "" (nobody's: only admin acts on it).  add_owner_column
 * adds it, since version 0 runs every version on a store that may have it
 * (a store whose version table was lost). */
static const char schema_v5[] = "";

/* migrations[v] takes a store from version v to v + 1 */
static const char *const migrations[] = { schema_v1, schema_v2, schema_v3, schema_v4, schema_v5 };
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

static long long query_ll(sq_store *st, const char *sql)
{
	sqlite3_stmt *q;
	long long v = 0;
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return 0;
	if (sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return v;
}

static int add_stream_columns(sq_store *st, rc_err *err)
{
	if (query_ll(st, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='streaming'"))
		return 0;
	return exec_sql(st, "ALTER TABLE jobs ADD COLUMN stream INTEGER NOT NULL DEFAULT 0;"
			    "ALTER TABLE jobs ADD COLUMN streaming INTEGER NOT NULL DEFAULT 0;", err);
}

static int add_cluster_columns(sq_store *st, rc_err *err)
{
	if (query_ll(st, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='views_cleared'"))
		return 0;
	return exec_sql(st, "ALTER TABLE jobs ADD COLUMN engine TEXT NOT NULL DEFAULT '';"
			    "ALTER TABLE jobs ADD COLUMN progress TEXT;"
			    "ALTER TABLE jobs ADD COLUMN views_cleared INTEGER NOT NULL DEFAULT 0;", err);
}

/* Whether the store is at this recond's schema already: read only, so that
 * a daemon starts on a full disk (nothing to write, nothing written). */
static int schema_current(sq_store *st)
{
	return query_ll(st, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='recond_schema'") &&
	       query_ll(st, "SELECT COALESCE(MAX(version), 0) FROM recond_schema") == SCHEMA_VERSION &&
	       query_ll(st, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='streaming'") &&
	       query_ll(st, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='views_cleared'") &&
	       query_ll(st, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='owner'");
}

static int add_owner_column(sq_store *st, rc_err *err)
{
	if (query_ll(st, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='owner'"))
		return 0;
	return exec_sql(st, "ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';", err);
}

/* Creates or migrates the schema in one transaction (SQLite's DDL is
 * transactional: a crash leaves the old version whole); a store already at
 * this version is only read. */
static int migrate(sq_store *st, const char *path, rc_err *err)
{
	if (schema_current(st))
		return 0;
	int rc = exec_sql(st, "BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS recond_schema (version INTEGER NOT NULL);",
			  err);
	if (rc)
		return rc;
	int v = (int)query_ll(st, "SELECT COALESCE(MAX(version), 0) FROM recond_schema");
	if (v > SCHEMA_VERSION) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "store",
			     "the store %s has schema version %d, newer than this recond knows (%d):"
			     " run a newer recond on it", path, v, SCHEMA_VERSION);
		goto out_rollback;
	}
	for (; v < SCHEMA_VERSION; v++)
		if ((rc = exec_sql(st, migrations[v], err)))
			goto out_rollback;
	if ((rc = add_stream_columns(st, err)) || (rc = add_cluster_columns(st, err)) ||
	    (rc = add_owner_column(st, err)))
		goto out_rollback;
	if ((rc = exec_sql(st, "DELETE FROM recond_schema", err)))
		goto out_rollback;
	char sql[96];
	snprintf(sql, sizeof sql, "INSERT INTO recond_schema VALUES (%d); COMMIT", SCHEMA_VERSION);
	if ((rc = exec_sql(st, sql, err)))
		goto out_rollback;
	return 0;
out_rollback:
	exec_sql(st, "ROLLBACK", NULL);
	return rc;
}

static const struct store_ops sqlite_ops;

int store_sqlite_open(const char *dir, store **ret, rc_err *err)
{
	sq_store *st = calloc(1, sizeof *st);
	char path[4200];
	int rc;
	if (!st)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	st->base.ops = &sqlite_ops;
	pthread_mutex_init(&st->lock, NULL);
	if (store_pathf(path, sizeof path, "%s/recond.db", dir)) {
		rc = rc_fail(err, RC_EINVAL, "store", "the store's path is too long");
		goto out_free;
	}
	sq_log_setup();
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			    NULL) != SQLITE_OK) {
		rc = rc_fail(err, RC_EIO, "store", "cannot open %s: %s", path,
			     st->db ? sqlite3_errmsg(st->db) : "out of memory");
		goto out_free;
	}
	sqlite3_busy_timeout(st->db, 5000);
	if ((rc = exec_sql(st, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", err)) ||
	    (rc = migrate(st, path, err)))
		goto out_free;
	st->seq = query_ll(st, "SELECT COALESCE(MAX(seq),0) FROM jobs");
	st->queue_seq = query_ll(st, "SELECT COALESCE(MAX(queue_seq),0) FROM jobs");
	*ret = &st->base;
	return 0;
out_free:
	sqlite_ops.close(&st->base);
	return rc;
}

static void sq_close(store *base)
{
	sq_store *st = SQ(base);
	sqlite3_close(st->db);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* The state of job id, -1 when there is no such row.  When unsure (the
 * query fails) it says running: the files are kept. */
static int sq_state_of(store *base, const char *id)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	int state = -1;
	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT state FROM jobs WHERE id=?", -1, &q, NULL) != SQLITE_OK) {
		state = JOB_RUNNING;
		goto out;
	}
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int s = sqlite3_step(q);
	if (s == SQLITE_ROW)
		state = sqlite3_column_int(q, 0);
	else if (s != SQLITE_DONE)
		state = JOB_RUNNING;
	sqlite3_finalize(q);
out:
	pthread_mutex_unlock(&st->lock);
	return state;
}

static int sq_insert(store *base, const char *id, const job_spec *spec, const char *summary, const char *owner,
		     rc_err *err)
{
	sq_store *st = SQ(base);
	size_t nbits = ((size_t)spec->nviews + 7) / 8;
	uint8_t *bits = calloc(1, nbits);
	if (!bits)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	pthread_mutex_lock(&st->lock);
	sqlite3_stmt *q;
	int rc = 0;
	if ((rc = exec_sql(st, "BEGIN IMMEDIATE", err))) {
		/* nothing written */
	} else if ((rc = sq_prepare(st, "INSERT INTO jobs (id, seq, state, label, priority, autostart, created, updated,"
				    " views_expected, nu, rows, view_stride, row_stride, view_bytes, proj_bytes, vol_bytes,"
				    " summary, present, stream, engine, owner)"
				    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
				    &q, "insert", err))) {
		exec_sql(st, "ROLLBACK", NULL);
	} else {
		double now = store_now();
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 2, st->seq + 1);
		sqlite3_bind_int(q, 3, JOB_CREATED);
		sqlite3_bind_text(q, 4, spec->label, -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 5, spec->priority);
		sqlite3_bind_int(q, 6, spec->autostart);
		sqlite3_bind_double(q, 7, now);
		sqlite3_bind_double(q, 8, now);
		sqlite3_bind_int(q, 9, spec->nviews);
		sqlite3_bind_int(q, 10, spec->nu);
		sqlite3_bind_int(q, 11, spec->rows);
		sqlite3_bind_int64(q, 12, (sqlite3_int64)spec->view_stride);
		sqlite3_bind_int64(q, 13, (sqlite3_int64)spec->row_stride);
		sqlite3_bind_int64(q, 14, (sqlite3_int64)spec->view_bytes);
		sqlite3_bind_int64(q, 15, (sqlite3_int64)spec->proj_bytes);
		sqlite3_bind_int64(q, 16, (sqlite3_int64)spec->vol_bytes);
		sqlite3_bind_text(q, 17, summary, -1, SQLITE_STATIC);
		sqlite3_bind_blob(q, 18, bits, (int)nbits, SQLITE_STATIC);
		sqlite3_bind_int(q, 19, spec->stream);
		sqlite3_bind_text(q, 20, store_spec_engine(spec), -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 21, owner, -1, SQLITE_STATIC);
		rc = sq_step_done(st, q, "insert", err);
		if (!rc && spec->out.npush)
			rc = store_push_insert_locked(st, id, spec, err);
		if (!rc)
			rc = exec_sql(st, "COMMIT", err);
		if (rc)
			exec_sql(st, "ROLLBACK", NULL);
		else
			st->seq++;
	}
	pthread_mutex_unlock(&st->lock);
	free(bits);
	return rc;
}


static char *dup_col(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? strdup((const char *)t) : NULL;
}

static void read_row(sqlite3_stmt *q, int with_bitmap, job_row *r)
{
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", (const char *)sqlite3_column_text(q, 0));
	r->state = (job_state)sqlite3_column_int(q, 1);
	snprintf(r->label, sizeof r->label, "%s", (const char *)sqlite3_column_text(q, 2));
	r->priority = sqlite3_column_int(q, 3);
	r->autostart = sqlite3_column_int(q, 4);
	r->cancel_requested = sqlite3_column_int(q, 5);
	r->created = sqlite3_column_double(q, 6);
	r->updated = sqlite3_column_double(q, 7);
	r->queued = sqlite3_column_double(q, 8);
	r->started = sqlite3_column_double(q, 9);
	r->finished = sqlite3_column_double(q, 10);
	r->views_expected = sqlite3_column_int(q, 11);
	r->views_present = sqlite3_column_int(q, 12);
	r->nu = sqlite3_column_int(q, 13);
	r->rows = sqlite3_column_int(q, 14);
	r->view_stride = (uint64_t)sqlite3_column_int64(q, 15);
	r->row_stride = (uint64_t)sqlite3_column_int64(q, 16);
	r->view_bytes = (uint64_t)sqlite3_column_int64(q, 17);
	r->proj_bytes = (uint64_t)sqlite3_column_int64(q, 18);
	r->vol_bytes = (uint64_t)sqlite3_column_int64(q, 19);
	snprintf(r->error_code, sizeof r->error_code, "%s", (const char *)sqlite3_column_text(q, 20));
	snprintf(r->error_message, sizeof r->error_message, "%s", (const char *)sqlite3_column_text(q, 21));
	r->summary = dup_col(q, 22);
	r->report = dup_col(q, 23);
	if (with_bitmap) {
		int n = sqlite3_column_bytes(q, 24);
		r->present = calloc(1, (size_t)n + 1);
		if (r->present && n)
			memcpy(r->present, sqlite3_column_blob(q, 24), (size_t)n);
	}
	snprintf(r->node, sizeof r->node, "%s", (const char *)sqlite3_column_text(q, 25));
	r->lease_until = sqlite3_column_double(q, 26);
	r->attempts = sqlite3_column_int(q, 27);
	r->stream = sqlite3_column_int(q, 28);
	r->streaming = sqlite3_column_int(q, 29);
	snprintf(r->engine, sizeof r->engine, "%s", (const char *)sqlite3_column_text(q, 30));
	r->views_cleared = sqlite3_column_int64(q, 31);
	r->progress = dup_col(q, 32);
	snprintf(r->owner, sizeof r->owner, "%s", (const char *)sqlite3_column_text(q, 33));
	r->lease_log = dup_col(q, 34);
}

/* Caller holds the lock. */
static int get_locked(sq_store *st, const char *id, int with_bitmap, job_row *out, rc_err *err)
{
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(st->db, "SELECT " STORE_ROW_COLS " FROM jobs WHERE id=?", -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, err, "select");
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int s = sqlite3_step(q), rc = 0;
	if (s == SQLITE_ROW)
		read_row(q, with_bitmap, out);
	else if (s == SQLITE_DONE)
		rc = rc_fail(err, RC_ENOTFOUND, "id", "no job with id %s", id);
	else
		rc = db_fail(st, err, "select");
	sqlite3_finalize(q);
	return rc;
}

static int sq_get(store *base, const char *id, int with_bitmap, job_row *out, rc_err *err)
{
	sq_store *st = SQ(base);
	pthread_mutex_lock(&st->lock);
	int rc = get_locked(st, id, with_bitmap, out, err);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

static void free_rows(job_row *rows, int n)
{
	for (int i = 0; i < n; i++)
		job_row_clear(&rows[i]);
	free(rows);
}

static int sq_list(store *base, int state, int limit, int offset, job_row **rows, int *n,
		   int *total, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q = NULL;
	int rc = 0, cnt = 0;
	job_row *out = calloc((size_t)(limit > 0 ? limit : 1), sizeof *out);
	if (!out)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	pthread_mutex_lock(&st->lock);
	const char *sql = state < 0
		? "SELECT " STORE_ROW_COLS " FROM jobs ORDER BY seq DESC LIMIT ? OFFSET ?"
		: "SELECT " STORE_ROW_COLS " FROM jobs WHERE state=?3 ORDER BY seq DESC LIMIT ?1 OFFSET ?2";
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "list");
		goto out;
	}
	sqlite3_bind_int(q, 1, limit);
	sqlite3_bind_int(q, 2, offset);
	if (state >= 0)
		sqlite3_bind_int(q, 3, state);
	int s;
	while (cnt < limit && (s = sqlite3_step(q)) == SQLITE_ROW)
		read_row(q, 1, &out[cnt++]); /* the bitmap: views_missing is part of every Job */
	sqlite3_finalize(q);
	q = NULL;
	if (sqlite3_prepare_v2(st->db, state < 0 ? "SELECT COUNT(*) FROM jobs" : "SELECT COUNT(*) FROM jobs WHERE state=?",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "count");
		goto out;
	}
	if (state >= 0)
		sqlite3_bind_int(q, 1, state);
	*total = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int(q, 0) : 0;
out:
	sqlite3_finalize(q);
	pthread_mutex_unlock(&st->lock);
	if (rc) {
		free_rows(out, cnt);
		return rc;
	}
	*rows = out;
	*n = cnt;
	return 0;
}

static int sq_counts(store *base, int *counts, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	pthread_mutex_lock(&st->lock);
	int rc = 0;
	if (sqlite3_prepare_v2(st->db, "SELECT state, COUNT(*) FROM jobs GROUP BY state", -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "counts");
	} else {
		while (sqlite3_step(q) == SQLITE_ROW) {
			int s = sqlite3_column_int(q, 0);
			if (s >= 0 && s < JOB_NSTATES)
				counts[s] = sqlite3_column_int(q, 1);
		}
		sqlite3_finalize(q);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* --- the job's state machine (store_machine.h): read, decide, write */

/* Caller holds the lock: the row and its pushes together. */
static int delete_locked(sq_store *st, const char *id, rc_err *err)
{
	sqlite3_stmt *q;
	int rc = exec_sql(st, "BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	if (!(rc = sq_prepare(st, "DELETE FROM jobs WHERE id=?", &q, "delete", err))) {
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
		rc = sq_step_done(st, q, "delete", err);
	}
	if (!rc)
		rc = store_push_delete_locked(st, id, err);
	if (!rc)
		rc = exec_sql(st, "COMMIT", err);
	if (rc)
		exec_sql(st, "ROLLBACK", NULL);
	return rc;
}

/* Caller holds the lock: c's columns into cur's row, only while it is in
 * the state and on the node the decision saw. */
static int write_change(sq_store *st, const job_row *cur, const sm_change *c, const char *what, rc_err *err)
{
	if (c->remove)
		return delete_locked(st, cur->id, err);
	if (!c->cols)
		return 0;
	sm_col col[SM_MAX_COLS];
	int n = sm_change_columns(c, col);
	char sql[1024], seq[32];
	sqlite3_stmt *q;
	snprintf(seq, sizeof seq, "%lld", st->queue_seq + 1);
	if (sm_update_sql(col, n, c->requeue ? seq : NULL, sql, sizeof sql))
		return rc_fail(err, RC_EIO, "", "store: %s: the statement is too long", what);
	int rc = sq_prepare(st, sql, &q, what, err);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		switch (col[i].type) {
		case 'i': sqlite3_bind_int64(q, i + 1, col[i].i); break;
		case 'd': sqlite3_bind_double(q, i + 1, col[i].d); break;
		case 'b': sqlite3_bind_blob(q, i + 1, col[i].b, (int)col[i].n, SQLITE_STATIC); break;
		default:
			if (col[i].s)
				sqlite3_bind_text(q, i + 1, col[i].s, -1, SQLITE_STATIC);
			else
				sqlite3_bind_null(q, i + 1);
		}
	}
	sqlite3_bind_text(q, n + 1, cur->id, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, n + 2, cur->state);
	sqlite3_bind_text(q, n + 3, cur->node, -1, SQLITE_STATIC);
	if ((rc = sq_step_done(st, q, what, err)))
		return rc;
	if (sqlite3_changes(st->db) != 1)
		return sm_lost(cur, err);
	if (c->requeue)
		st->queue_seq++;
	return 0;
}

/* Caller holds the lock: op's decision on cur, written; *ans its answer. */
static int decide_write(sq_store *st, store_op op, const job_row *cur, const sm_args *a, int *ans, rc_err *err)
{
	sm_change c;
	int rc = store_decide(op, cur, a, &c, err);
	if (!rc && !(rc = write_change(st, cur, &c, sm_op_name(op), err)) && ans)
		*ans = c.answer;
	sm_change_clear(&c);
	return rc;
}

static int sq_apply(store *base, int op, const char *id, const sm_args *a, int *ret_answer, rc_err *err)
{
	sq_store *st = SQ(base);
	job_row r;
	pthread_mutex_lock(&st->lock);
	/* one writer (the mutex, one daemon): nothing moves the row between the
	 * read and the conditional write */
	int rc = get_locked(st, id, sm_needs_bitmap((store_op)op), &r, err);
	if (rc == RC_ENOTFOUND) {
		sm_change c;
		rc = store_decide((store_op)op, NULL, a, &c, err);
	} else if (!rc) {
		rc = decide_write(st, (store_op)op, &r, a, ret_answer, err);
		job_row_clear(&r);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* Caller holds the lock: the rows q selects (ROW_COLS), *rows to free with
 * free_rows. */
static int read_rows(sq_store *st, sqlite3_stmt *q, const char *what, job_row **rows, int *n, rc_err *err)
{
	job_row *out = NULL;
	int cnt = 0, cap = 0, rc = 0, s;
	while ((s = sqlite3_step(q)) == SQLITE_ROW) {
		if (cnt == cap) {
			job_row *g = realloc(out, sizeof *out * (size_t)(cap = cap ? 2 * cap : 8));
			if (!g) {
				rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
				break;
			}
			out = g;
		}
		read_row(q, 0, &out[cnt++]);
	}
	if (!rc && s != SQLITE_DONE)
		rc = db_fail(st, err, what);
	sqlite3_finalize(q);
	*rows = out;
	*n = cnt;
	return rc;
}

/* Caller holds the lock: op decided and written on each running job whose
 * lease ended before now (now > 0) or on every running job (now 0), in one
 * transaction (none when there is no such job: a full disk still starts);
 * *ret_n counts the answers. */
static int decide_running(sq_store *st, store_op op, const sm_args *a, double now, int *ret_n, rc_err *err)
{
	sqlite3_stmt *q;
	job_row *rows = NULL;
	int n = 0, total = 0;
	int rc = sq_prepare(st, now > 0 ? "SELECT " STORE_ROW_COLS " FROM jobs WHERE state=?1 AND lease_until>0"
					   " AND lease_until<?2 ORDER BY id"
					 : "SELECT " STORE_ROW_COLS " FROM jobs WHERE state=?1 ORDER BY id",
			    &q, sm_op_name(op), err);
	if (rc)
		return rc;
	sqlite3_bind_int(q, 1, JOB_RUNNING);
	if (now > 0)
		sqlite3_bind_double(q, 2, now);
	if ((rc = read_rows(st, q, sm_op_name(op), &rows, &n, err)) || !n)
		goto out;
	if ((rc = exec_sql(st, "BEGIN IMMEDIATE", err)))
		goto out;
	for (int i = 0; i < n && !rc; i++) {
		int ans = 0;
		rc = decide_write(st, op, &rows[i], a, &ans, err);
		total += ans;
	}
	if (!rc)
		rc = exec_sql(st, "COMMIT", err);
	if (rc)
		exec_sql(st, "ROLLBACK", NULL);
out:
	free_rows(rows, n);
	*ret_n = rc ? 0 : total;
	return rc;
}

static int sq_recover(store *base, int *requeued, rc_err *err)
{
	sq_store *st = SQ(base);
	sm_args a = { .now = store_now() };
	pthread_mutex_lock(&st->lock);
	int rc = decide_running(st, SM_RECOVER, &a, 0, requeued, err);
	if (!rc)
		rc = store_push_recover_locked(st, err);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

static int sq_lease_expire(store *base, int max_attempts, int *ret_n, rc_err *err)
{
	sq_store *st = SQ(base);
	sm_args a = { .max_attempts = max_attempts };
	a.now = a.clock = store_now();
	pthread_mutex_lock(&st->lock);
	int rc = decide_running(st, SM_LEASE_EXPIRE, &a, a.now, ret_n, err);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* The queue's next job this node can run (placement: one that needs no
 * engine, or one of the node's), then the decision to take it. */
static int sq_take_next(store *base, const char *node, double lease_s, const char *engines, char id[37],
			rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	job_row r;
	pthread_mutex_lock(&st->lock);
	int rc = sq_prepare(st, "SELECT id FROM jobs WHERE state=?1 AND (?2 IS NULL OR engine=''"
			    " OR instr(',' || ?2 || ',', ',' || engine || ',') > 0)"
			    " ORDER BY priority DESC, queue_seq ASC LIMIT 1", &q, "queue", err);
	if (rc)
		goto out;
	sqlite3_bind_int(q, 1, JOB_QUEUED);
	if (engines)
		sqlite3_bind_text(q, 2, engines, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(q, 2);
	if (sqlite3_step(q) != SQLITE_ROW) {
		sqlite3_finalize(q);
		rc = rc_fail(err, RC_ENOTFOUND, "", "the queue is empty");
		goto out;
	}
	snprintf(id, 37, "%s", (const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	if ((rc = get_locked(st, id, 0, &r, err)))
		goto out;
	sm_args a = { .id = id, .node = node, .lease_s = lease_s };
	a.now = a.clock = store_now();
	rc = decide_write(st, SM_TAKE, &r, &a, NULL, err);
	job_row_clear(&r);
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}
/* One daemon per SQLite store: its row replaces any other (a renamed node). */
static int sq_node_heartbeat(store *base, const char *devices, const char *running, double started, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	pthread_mutex_lock(&st->lock);
	/* a heartbeat lost in a crash is harmless: no fsync of the WAL every
	 * 2 s for it (the next FULL commit syncs it along); under the lock, so
	 * no other transaction runs with NORMAL */
	int rc = exec_sql(st, "PRAGMA synchronous=NORMAL; BEGIN IMMEDIATE", err);
	if (rc)
		goto out;
	if (!(rc = sq_prepare(st, "DELETE FROM nodes WHERE name<>?1", &q, "heartbeat", err))) {
		sqlite3_bind_text(q, 1, st->base.node, -1, SQLITE_STATIC);
		rc = sq_step_done(st, q, "heartbeat", err);
	}
	if (!rc && !(rc = sq_prepare(st, "INSERT INTO nodes (name, devices, running, heartbeat, started)"
				     " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(name) DO UPDATE SET devices=?2, running=?3,"
				     " heartbeat=?4, started=?5", &q, "heartbeat", err))) {
		sqlite3_bind_text(q, 1, st->base.node, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, devices, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 3, running, -1, SQLITE_STATIC);
		sqlite3_bind_double(q, 4, store_now());
		sqlite3_bind_double(q, 5, started);
		rc = sq_step_done(st, q, "heartbeat", err);
	}
	if (!rc)
		rc = exec_sql(st, "COMMIT", err);
	if (rc)
		exec_sql(st, "ROLLBACK", NULL);
out:
	exec_sql(st, "PRAGMA synchronous=FULL", NULL);
	pthread_mutex_unlock(&st->lock);
	return rc;
}

static int sq_nodes_list(store *base, node_row **rows, int *n, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	node_row *out = NULL;
	int cnt = 0, cap = 0, rc = 0;
	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT name, running, heartbeat, started, devices FROM nodes ORDER BY name", -1,
			       &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "nodes");
		goto out;
	}
	double now = store_now();
	while (!rc && sqlite3_step(q) == SQLITE_ROW) {
		if (cnt == cap) {
			node_row *g = realloc(out, sizeof *out * (size_t)(cap = cap ? 2 * cap : 4));
			if (!g) {
				rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
				break;
			}
			out = g;
		}
		node_row *r = &out[cnt++];
		memset(r, 0, sizeof *r);
		snprintf(r->name, sizeof r->name, "%s", (const char *)sqlite3_column_text(q, 0));
		snprintf(r->running, sizeof r->running, "%s", (const char *)sqlite3_column_text(q, 1));
		r->heartbeat = sqlite3_column_double(q, 2);
		r->age_s = now - r->heartbeat;
		r->started = sqlite3_column_double(q, 3);
		r->devices = dup_col(q, 4);
	}
	sqlite3_finalize(q);
out:
	pthread_mutex_unlock(&st->lock);
	if (rc) {
		for (int i = 0; i < cnt; i++)
			node_row_clear(&out[i]);
		free(out);
		return rc;
	}
	*rows = out;
	*n = cnt;
	return 0;
}

static int sq_expired(store *base, double before, char (*ids)[37], int max, int *ret_n, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	int n = 0, rc = 0;
	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT id FROM jobs WHERE state IN (?,?,?) AND finished > 0 AND finished < ? LIMIT ?",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "expire");
		goto out;
	}
	sqlite3_bind_int(q, 1, JOB_SUCCEEDED);
	sqlite3_bind_int(q, 2, JOB_FAILED);
	sqlite3_bind_int(q, 3, JOB_CANCELLED);
	sqlite3_bind_double(q, 4, before);
	sqlite3_bind_int(q, 5, max);
	while (n < max && sqlite3_step(q) == SQLITE_ROW)
		snprintf(ids[n++], 37, "%s", (const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
out:
	pthread_mutex_unlock(&st->lock);
	*ret_n = n;
	return rc;
}

static const struct store_ops sqlite_ops = {
	.name = "sqlite",
	.close = sq_close,
	.recover = sq_recover,
	.state_of = sq_state_of,
	.insert = sq_insert,
	.get = sq_get,
	.list = sq_list,
	.counts = sq_counts,
	.apply = sq_apply,
	.take_next = sq_take_next,
	.lease_expire = sq_lease_expire,
	.node_heartbeat = sq_node_heartbeat,
	.nodes_list = sq_nodes_list,
	.expired = sq_expired,
	.push_list = sq_push_list,
	.push_take = sq_push_take,
	.push_update = sq_push_update,
	.push_again = sq_push_again,
};
