/* store_sqlite_push: the pushes table in SQLite (store.h, "pushes to PACS"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/store_sqlite.h"

int store_push_insert_locked(sq_store *st, const char *id, const job_spec *spec, rc_err *err)
{
	sqlite3_stmt *q;
	int rc = sq_prepare(st, "INSERT INTO pushes (job, dest, ord, state, updated) VALUES (?,?,?,?,?)", &q,
			    "insert push", err);
	for (int i = 0; i < spec->out.npush && !rc; i++) {
		sqlite3_reset(q);
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, spec->out.push[i], -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 3, i);
		sqlite3_bind_int(q, 4, PUSH_PENDING);
		sqlite3_bind_double(q, 5, store_now());
		if (sqlite3_step(q) != SQLITE_DONE)
			rc = store_db_fail(st, err, "insert push");
	}
	sqlite3_finalize(q);
	return rc;
}

static int exec1(sq_store *st, const char *sql, const char *id, rc_err *err)
{
	sqlite3_stmt *q;
	int rc = sq_prepare(st, sql, &q, "pushes", err);
	if (rc)
		return rc;
	if (id)
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	return sq_step_done(st, q, "pushes", err);
}

int store_push_delete_locked(sq_store *st, const char *id, rc_err *err)
{
	return exec1(st, "DELETE FROM pushes WHERE job=?", id, err);
}

/* At start, a push cut short by a stop or a crash is tried again (a PACS
 * keeps one copy of an instance it receives twice), and pushes waiting for
 * a retry are tried now: a restart is when an operator has fixed the
 * destination; a push held for confirmation stays held.  Rows of deleted
 * jobs go. */
int store_push_recover_locked(sq_store *st, rc_err *err)
{
	int rc = exec1(st, "UPDATE pushes SET state=0, next_try=0 WHERE state=1 OR (state=0 AND next_try < "
			   PUSH_HELD_SQL ")", NULL, err);
	return rc ? rc : exec1(st, "DELETE FROM pushes WHERE job NOT IN (SELECT id FROM jobs)", NULL, err);
}

#define PUSH_COLS \
	"pushes.job, pushes.dest, pushes.state, pushes.attempts, pushes.sent, pushes.total, pushes.next_try," \
	" pushes.updated, pushes.error"

static void read_push(sqlite3_stmt *q, push_row *p)
{
	memset(p, 0, sizeof *p);
	snprintf(p->job, sizeof p->job, "%s", (const char *)sqlite3_column_text(q, 0));
	snprintf(p->dest, sizeof p->dest, "%s", (const char *)sqlite3_column_text(q, 1));
	p->state = (push_state)sqlite3_column_int(q, 2);
	p->attempts = sqlite3_column_int(q, 3);
	p->sent = sqlite3_column_int(q, 4);
	p->total = sqlite3_column_int(q, 5);
	p->next_try = sqlite3_column_double(q, 6);
	p->updated = sqlite3_column_double(q, 7);
	const unsigned char *e = sqlite3_column_text(q, 8);
	snprintf(p->error, sizeof p->error, "%s", e ? (const char *)e : "");
}

int sq_push_list(store *base, const char *id, push_row **rows, int *n, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	int rc = 0, cap = 0;
	*rows = NULL;
	*n = 0;
	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT " PUSH_COLS " FROM pushes WHERE job=? ORDER BY ord", -1, &q, NULL) !=
	    SQLITE_OK) {
		rc = store_db_fail(st, err, "list pushes");
		goto out;
	}
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	while (sqlite3_step(q) == SQLITE_ROW) {
		if (*n == cap) {
			push_row *r = realloc(*rows, (size_t)(cap = cap ? 2 * cap : 4) * sizeof *r);
			if (!r) {
				rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
				break;
			}
			*rows = r;
		}
		read_push(q, &(*rows)[(*n)++]);
	}
	sqlite3_finalize(q);
	if (rc) {
		free(*rows);
		*rows = NULL;
		*n = 0;
	}
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int sq_push_take(store *base, double now, push_row *out, double *next_due, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	int rc = RC_ENOTFOUND;
	if (next_due)
		*next_due = 0;
	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db,
			       "SELECT " PUSH_COLS " FROM pushes JOIN jobs ON jobs.id = pushes.job"
			       " WHERE pushes.state=? AND jobs.state=? ORDER BY pushes.next_try, jobs.seq, pushes.ord LIMIT 1",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = store_db_fail(st, err, "take push");
		goto out;
	}
	sqlite3_bind_int(q, 1, PUSH_PENDING);
	sqlite3_bind_int(q, 2, JOB_SUCCEEDED);
	int step = sqlite3_step(q);
	if (step != SQLITE_ROW && step != SQLITE_DONE)
		rc = store_db_fail(st, err, "take push");
	if (step == SQLITE_ROW) {
		read_push(q, out);
		if (out->next_try > now) {
			if (next_due)
				*next_due = out->next_try;
		} else {
			rc = 0;
		}
	}
	sqlite3_finalize(q);
	if (rc)
		goto out;
	if ((rc = sq_prepare(st, "UPDATE pushes SET state=?, updated=? WHERE job=? AND dest=?", &q, "take push", err)))
		goto out;
	sqlite3_bind_int(q, 1, PUSH_SENDING);
	sqlite3_bind_double(q, 2, now);
	sqlite3_bind_text(q, 3, out->job, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 4, out->dest, -1, SQLITE_STATIC);
	rc = sq_step_done(st, q, "take push", err);
	out->state = PUSH_SENDING;
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int sq_push_update(store *base, const push_row *p, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	pthread_mutex_lock(&st->lock);
	int rc = sq_prepare(st, "UPDATE pushes SET state=?, attempts=?, sent=?, total=?, next_try=?, updated=?, error=?"
			    " WHERE job=? AND dest=?", &q, "update push", err);
	if (rc)
		goto out;
	sqlite3_bind_int(q, 1, p->state);
	sqlite3_bind_int(q, 2, p->attempts);
	sqlite3_bind_int(q, 3, p->sent);
	sqlite3_bind_int(q, 4, p->total);
	sqlite3_bind_double(q, 5, p->next_try);
	sqlite3_bind_double(q, 6, store_now());
	sqlite3_bind_text(q, 7, p->error, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 8, p->job, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 9, p->dest, -1, SQLITE_STATIC);
	rc = sq_step_done(st, q, "update push", err);
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int sq_push_again(store *base, const char *id, int *n, rc_err *err)
{
	sq_store *st = SQ(base);
	sqlite3_stmt *q;
	int rc = 0;
	*n = 0;
	pthread_mutex_lock(&st->lock);
	if (sqlite3_prepare_v2(st->db, "SELECT COUNT(*) FROM pushes WHERE job=?", -1, &q, NULL) != SQLITE_OK) {
		rc = store_db_fail(st, err, "push again");
		goto out;
	}
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	int step = sqlite3_step(q);
	int total = step == SQLITE_ROW ? sqlite3_column_int(q, 0) : 0;
	sqlite3_finalize(q);
	if (step != SQLITE_ROW) {
		rc = store_db_fail(st, err, "push again");
		goto out;
	}
	if (!total) {
		rc = rc_fail(err, RC_ENOTFOUND, "output.push", "job %s names no destination in output.push", id);
		goto out;
	}
	if ((rc = sq_prepare(st, "UPDATE pushes SET state=?, attempts=0, sent=0, next_try=0, error='', updated=?"
			     " WHERE job=? AND state<>?", &q, "push again", err)))
		goto out;
	sqlite3_bind_int(q, 1, PUSH_PENDING);
	sqlite3_bind_double(q, 2, store_now());
	sqlite3_bind_text(q, 3, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, 4, PUSH_SENDING);
	if (!(rc = sq_step_done(st, q, "push again", err)))
		*n = sqlite3_changes(st->db);
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}
