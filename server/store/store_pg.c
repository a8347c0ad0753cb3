/*
 * store_pg: the job table in PostgreSQL, for many daemons on one database
 * and one shared spool (store.h, store_backend.h; the spool is
 * store_spool.c's).
 *
 * One connection behind the store's mutex (enough for one daemon's few
 * store calls; a pool can come later).  Where the SQLite store relies on its
 * single writer, this one takes row locks: every operation on a job reads
 * its row FOR UPDATE inside its transaction and writes what the state
 * machine (store_machine.h) decided, so two daemons decide on the same row
 * one after the other, each on the other's result; the queue is taken with
 * FOR UPDATE SKIP LOCKED, so two daemons never take the same job and neither
 * waits for the other.  Sequence
 * numbers (creation, queue order) are PostgreSQL sequences.  Lease times are
 * the database's clock, the one clock every daemon shares.
 *
 * A call that finds the connection lost fails with RC_EUNAVAIL; the next
 * call connects again.  Parameters travel as text, the bitmap as bytea in
 * hex.
 */
#include "store/store.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_backend.h"
#include "store/store_machine.h"
#include "util/rc_clock.h"

typedef struct pg_store {
	struct store base; /* first: a store * is a pg_store * */
	PGconn *conn;
	pthread_mutex_t lock;
	char *uri;
	double call_timeout_s; /* how long one statement may take (pg_run) */
} pg_store;

/* A statement that does not answer within this (a hung server, a network
 * cut that TCP has not noticed yet) drops the connection and fails
 * RC_EUNAVAIL: no call holds the store's mutex, or a lease, for longer.
 * Migrations, which may wait for another daemon's, get longer. */
#define PG_CALL_TIMEOUT_S 3.0
#define PG_MIGRATE_TIMEOUT_S 60.0

#define PG(st) ((pg_store *)(st))

/* The database's clock in unix seconds. */
#define PG_NOW "extract(epoch from clock_timestamp())::float8"

/* --- parameters as text */

#define PG_MAXP 24

typedef struct pgp {
	const char *v[PG_MAXP];
	char buf[PG_MAXP][32];
	int n;
} pgp;

static void p_str(pgp *p, const char *s) { p->v[p->n++] = s; }

static void p_int(pgp *p, long long x)
{
	snprintf(p->buf[p->n], sizeof p->buf[0], "%lld", x);
	p_str(p, p->buf[p->n]);
}

static void p_dbl(pgp *p, double x)
{
	snprintf(p->buf[p->n], sizeof p->buf[0], "%.17g", x);
	p_str(p, p->buf[p->n]);
}

/* --- errors and statements */

static void pg_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg; /* CREATE ... IF NOT EXISTS says "already exists": not news */
}

/* The failure of the last statement (res may be NULL): the connection lost,
 * or a conflict that a retry resolves, is RC_EUNAVAIL; a full disk
 * RC_ENOSPACE; anything else RC_EIO. */
static int pg_fail(pg_store *st, const PGresult *res, rc_err *err, const char *what)
{
	char msg[256];
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	snprintf(msg, sizeof msg, "%s", st->conn ? PQerrorMessage(st->conn) : "no connection");
	for (size_t n = strlen(msg); n && (msg[n - 1] == '\n' || msg[n - 1] == ' '); n--)
		msg[n - 1] = '\0';
	if (!st->conn || PQstatus(st->conn) != CONNECTION_OK || (state && (!strncmp(state, "08", 2) ||
	    !strncmp(state, "40", 2) || !strncmp(state, "57P", 3))))
		return rc_fail(err, RC_EUNAVAIL, "store", "the store is unavailable; retry (%s: %s)", what, msg);
	if (state && !strcmp(state, "53100"))
		return rc_fail(err, RC_ENOSPACE, "", "store: %s: %s", what, msg);
	return rc_fail(err, RC_EIO, "", "store: %s: %s", what, msg);
}

/* Runs sql with p's parameters, or without any (p NULL: several statements
 * may follow each other, as in a migration); *ret (may be NULL) gets the
 * result, to PQclear. */
/* PQexec / PQexecParams with a deadline: the last result (an error ends
 * the statements), or NULL when none came in time (the connection is then
 * dropped; pg_ensure makes a new one) or the connection failed. */
static PGresult *pg_exec_bounded(pg_store *st, const char *sql, const pgp *p)
{
	if (!st->conn || !(p ? PQsendQueryParams(st->conn, sql, p->n, NULL, p->v, NULL, NULL, 0)
			     : PQsendQuery(st->conn, sql)))
		return NULL;
	double until = rc_now_s() + st->call_timeout_s;
	PGresult *last = NULL, *r;
	for (;;) {
		while (!PQisBusy(st->conn)) {
			if (!(r = PQgetResult(st->conn)))
				return last;
			PQclear(last);
			last = r;
		}
		double left = until - rc_now_s();
		struct pollfd pfd = { .fd = PQsocket(st->conn), .events = POLLIN };
		int n = left > 0 ? poll(&pfd, 1, (int)(left * 1000) + 1) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || !PQconsumeInput(st->conn)) {
			PQclear(last);
			PQfinish(st->conn);
			st->conn = NULL;
			return NULL;
		}
	}
}

static int pg_run(pg_store *st, const char *what, const char *sql, const pgp *p, PGresult **ret, rc_err *err)
{
	PGresult *res = pg_exec_bounded(st, sql, p);
	ExecStatusType s = PQresultStatus(res);
	if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
		int rc = pg_fail(st, res, err, what);
		PQclear(res);
		return rc;
	}
	if (ret)
		*ret = res;
	else
		PQclear(res);
	return 0;
}

/* Rows a command changed. */
static int pg_changes(PGresult *res) { return atoi(PQcmdTuples(res)); }

static void pg_rollback(pg_store *st)
{
	if (st->conn && PQstatus(st->conn) == CONNECTION_OK && PQtransactionStatus(st->conn) != PQTRANS_IDLE)
		PQclear(pg_exec_bounded(st, "ROLLBACK", NULL));
}

/* Connects, or again after a loss (the call before failed RC_EUNAVAIL). */
static int pg_ensure(pg_store *st, rc_err *err)
{
	if (st->conn && PQstatus(st->conn) == CONNECTION_OK) {
		/* a call cut short (a bug, or a lost answer) leaves no transaction open */
		pg_rollback(st);
		return 0;
	}
	if (st->conn)
		PQreset(st->conn);
	else {
		/* the URI's own settings win over these defaults (they come later) */
		const char *const keys[] = { "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
					     "keepalives_count", "tcp_user_timeout", "fallback_application_name", "dbname",
					     NULL };
		const char *const vals[] = { "3", "1", "5", "2", "3", "5000", "recond", st->uri, NULL };
		st->conn = PQconnectdbParams(keys, vals, 1);
		if (st->conn)
			PQsetNoticeProcessor(st->conn, pg_notice, NULL);
	}
	if (!st->conn)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	if (PQstatus(st->conn) != CONNECTION_OK)
		return pg_fail(st, NULL, err, "connect");
	return 0;
}

/* --- schema */

/* migrations[v] takes a database from version v to v + 1. */
static const char *const migrations[] = {
	"CREATE SEQUENCE recond_job_seq;"
	"CREATE SEQUENCE recond_queue_seq;"
	"CREATE TABLE jobs ("
	" id text PRIMARY KEY, seq bigint NOT NULL DEFAULT nextval('recond_job_seq'), state int NOT NULL,"
	" label text NOT NULL DEFAULT '', priority int NOT NULL, autostart int NOT NULL,"
	" cancel_requested int NOT NULL DEFAULT 0,"
	" created float8 NOT NULL, updated float8 NOT NULL, queued float8 NOT NULL DEFAULT 0,"
	" started float8 NOT NULL DEFAULT 0, finished float8 NOT NULL DEFAULT 0,"
	" queue_seq bigint NOT NULL DEFAULT 0,"
	" views_expected int NOT NULL, views_present int NOT NULL DEFAULT 0,"
	" nu int NOT NULL, rows int NOT NULL, view_stride bigint NOT NULL, row_stride bigint NOT NULL,"
	" view_bytes bigint NOT NULL, proj_bytes bigint NOT NULL, vol_bytes bigint NOT NULL,"
	" error_code text NOT NULL DEFAULT '', error_message text NOT NULL DEFAULT '',"
	" summary text, report text, present bytea NOT NULL,"
	" node text NOT NULL DEFAULT '', lease_until float8 NOT NULL DEFAULT 0,"
	" attempts int NOT NULL DEFAULT 0, lease_log text NOT NULL DEFAULT '');"
	"CREATE INDEX jobs_queue ON jobs (state, priority DESC, queue_seq);"
	"CREATE INDEX jobs_seq ON jobs (seq);"
	"CREATE TABLE pushes ("
	" job text NOT NULL, dest text NOT NULL, ord int NOT NULL, state int NOT NULL,"
	" attempts int NOT NULL DEFAULT 0, sent int NOT NULL DEFAULT 0, total int NOT NULL DEFAULT 0,"
	" next_try float8 NOT NULL DEFAULT 0, updated float8 NOT NULL DEFAULT 0, error text NOT NULL DEFAULT '',"
	" node text NOT NULL DEFAULT '', PRIMARY KEY (job, dest));",
	/* version 2: streaming FDK */
	"ALTER TABLE jobs ADD COLUMN stream int NOT NULL DEFAULT 0;"
	"ALTER TABLE jobs ADD COLUMN streaming int NOT NULL DEFAULT 0;",
	/* version 3: clusters (placement, live progress, the bitmap's change
	 * counter, the nodes' heartbeats) */
	"ALTER TABLE jobs ADD COLUMN engine text NOT NULL DEFAULT '';"
	"ALTER TABLE jobs ADD COLUMN progress text;"
	"ALTER TABLE jobs ADD COLUMN views_cleared bigint NOT NULL DEFAULT 0;"
	"CREATE TABLE nodes (name text PRIMARY KEY, devices text NOT NULL DEFAULT '[]',"
	" running text NOT NULL DEFAULT '', heartbeat float8 NOT NULL, started float8 NOT NULL);",
	/* version 4: owners (store.h); a job from before has '' (nobody's) */
	"ALTER TABLE jobs ADD COLUMN owner text NOT NULL DEFAULT '';",
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

/* In one transaction under an advisory lock: daemons that start together
 * migrate one after the other, the later ones finding nothing to do. */
static int migrate(pg_store *st, rc_err *err)
{
	PGresult *res = NULL;
	int rc;
	if ((rc = pg_run(st, "schema", "BEGIN", NULL, NULL, err)) ||
	    (rc = pg_run(st, "schema", "SELECT pg_advisory_xact_lock(7450671212770747236)", NULL, NULL, err)) ||
	    (rc = pg_run(st, "schema", "CREATE TABLE IF NOT EXISTS recond_schema (version int NOT NULL)", NULL, NULL,
			 err)) ||
	    (rc = pg_run(st, "schema", "SELECT COALESCE(MAX(version), 0) FROM recond_schema", NULL, &res, err)))
		goto out_rollback;
	int v = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (v > SCHEMA_VERSION) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "store",
			     "the store's database has schema version %d, newer than this recond knows (%d):"
			     " run a newer recond on it", v, SCHEMA_VERSION);
		goto out_rollback;
	}
	if (v == SCHEMA_VERSION)
		return pg_run(st, "schema", "COMMIT", NULL, NULL, err);
	for (; v < SCHEMA_VERSION; v++)
		if ((rc = pg_run(st, "schema", migrations[v], NULL, NULL, err)))
			goto out_rollback;
	pgp p = { .n = 0 };
	p_int(&p, SCHEMA_VERSION);
	if ((rc = pg_run(st, "schema", "DELETE FROM recond_schema", NULL, NULL, err)) ||
	    (rc = pg_run(st, "schema", "INSERT INTO recond_schema VALUES ($1::int)", &p, NULL, err)) ||
	    (rc = pg_run(st, "schema", "COMMIT", NULL, NULL, err)))
		goto out_rollback;
	return 0;
out_rollback:
	pg_rollback(st);
	return rc;
}

static const struct store_ops pg_ops;

int store_pg_open(const char *where, store **ret, rc_err *err)
{
	pg_store *st = calloc(1, sizeof *st);
	int rc;
	if (!st)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	st->base.ops = &pg_ops;
	pthread_mutex_init(&st->lock, NULL);
	if (!(st->uri = strdup(where))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
		goto out_free;
	}
	st->call_timeout_s = PG_MIGRATE_TIMEOUT_S;
	if (!(rc = pg_ensure(st, err)))
		rc = migrate(st, err);
	st->call_timeout_s = PG_CALL_TIMEOUT_S;
	/* a call also reconnects: connect_timeout (3 s) on top */
	st->base.call_bound_s = PG_CALL_TIMEOUT_S + 3.0;
	if (rc)
		goto out_free;
	*ret = &st->base;
	return 0;
out_free:
	pg_ops.close(&st->base);
	return rc;
}

static void pg_close(store *base)
{
	pg_store *st = PG(base);
	PQfinish(st->conn);
	pthread_mutex_destroy(&st->lock);
	free(st->uri);
	free(st);
}

/* Every operation: the lock, a live connection, the body, then pg_leave
 * at its label out_unlock. */
#define PG_ENTER(st, err) \
	pthread_mutex_lock(&(st)->lock); \
	int rc = pg_ensure((st), (err)); \
	if (rc) \
		goto out_unlock

/* The end of every operation: the transaction a failure left open is rolled
 * back (nothing is sent when none is open), the lock released. */
static void pg_leave(pg_store *st)
{
	pg_rollback(st);
	pthread_mutex_unlock(&st->lock);
}

/* --- jobs */


static char *dup_col(const PGresult *res, int i, int c)
{
	return PQgetisnull(res, i, c) ? NULL : strdup(PQgetvalue(res, i, c));
}

static void read_row(const PGresult *res, int i, int with_bitmap, job_row *r)
{
#define V(c) PQgetvalue(res, i, (c))
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", V(0));
	r->state = (job_state)atoi(V(1));
	snprintf(r->label, sizeof r->label, "%s", V(2));
	r->priority = atoi(V(3));
	r->autostart = atoi(V(4));
	r->cancel_requested = atoi(V(5));
	r->created = strtod(V(6), NULL);
	r->updated = strtod(V(7), NULL);
	r->queued = strtod(V(8), NULL);
	r->started = strtod(V(9), NULL);
	r->finished = strtod(V(10), NULL);
	r->views_expected = atoi(V(11));
	r->views_present = atoi(V(12));
	r->nu = atoi(V(13));
	r->rows = atoi(V(14));
	r->view_stride = strtoull(V(15), NULL, 10);
	r->row_stride = strtoull(V(16), NULL, 10);
	r->view_bytes = strtoull(V(17), NULL, 10);
	r->proj_bytes = strtoull(V(18), NULL, 10);
	r->vol_bytes = strtoull(V(19), NULL, 10);
	snprintf(r->error_code, sizeof r->error_code, "%s", V(20));
	snprintf(r->error_message, sizeof r->error_message, "%s", V(21));
	r->summary = dup_col(res, i, 22);
	r->report = dup_col(res, i, 23);
	if (with_bitmap) {
		size_t n = 0;
		unsigned char *b = PQunescapeBytea((const unsigned char *)V(24), &n);
		r->present = calloc(1, n + 1);
		if (r->present && b && n)
			memcpy(r->present, b, n);
		PQfreemem(b);
	}
	snprintf(r->node, sizeof r->node, "%s", V(25));
	r->lease_until = strtod(V(26), NULL);
	r->attempts = atoi(V(27));
	r->stream = atoi(V(28));
	r->streaming = atoi(V(29));
	snprintf(r->engine, sizeof r->engine, "%s", V(30));
	r->views_cleared = strtoll(V(31), NULL, 10);
	r->progress = dup_col(res, i, 32);
	snprintf(r->owner, sizeof r->owner, "%s", V(33));
	r->lease_log = dup_col(res, i, 34);
#undef V
}

/* The row of id; lock: FOR UPDATE inside a transaction, and *clock (may be
 * NULL) the database's clock. */
static int get_row(pg_store *st, const char *id, int with_bitmap, int lock, job_row *out, double *clock, rc_err *err)
{
	PGresult *res = NULL;
	pgp p = { .n = 0 };
	p_str(&p, id);
	int rc = pg_run(st, "select",
			lock ? "SELECT " STORE_ROW_COLS ", " PG_NOW " FROM jobs WHERE id=$1 FOR UPDATE"
			     : "SELECT " STORE_ROW_COLS " FROM jobs WHERE id=$1",
			&p, &res, err);
	if (rc)
		return rc;
	if (PQntuples(res) == 1) {
		read_row(res, 0, with_bitmap, out);
		if (lock && clock)
			*clock = strtod(PQgetvalue(res, 0, STORE_ROW_NCOLS), NULL);
	} else {
		rc = rc_fail(err, RC_ENOTFOUND, "id", "no job with id %s", id);
	}
	PQclear(res);
	return rc;
}

static int pg_state_of(store *base, const char *id)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	int state = JOB_RUNNING; /* unsure: keep the files */
	pgp p = { .n = 0 };
	p_str(&p, id);
	pthread_mutex_lock(&st->lock);
	if (!pg_ensure(st, NULL) && !pg_run(st, "select", "SELECT state FROM jobs WHERE id=$1", &p, &res, NULL)) {
		state = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : -1;
		PQclear(res);
	}
	pthread_mutex_unlock(&st->lock);
	return state;
}

/* Only this node's running jobs: the others' run on. */
static char *hex_bytea(const uint8_t *b, size_t n)
{
	static const char hx[] = "0123456789abcdef";
	char *s = malloc(2 * n + 3);
	if (!s)
		return NULL;
	s[0] = '\\';
	s[1] = 'x';
	for (size_t i = 0; i < n; i++) {
		s[2 + 2 * i] = hx[b[i] >> 4];
		s[3 + 2 * i] = hx[b[i] & 15];
	}
	s[2 + 2 * n] = '\0';
	return s;
}

static int pg_insert(store *base, const char *id, const job_spec *spec, const char *summary, const char *owner,
		     rc_err *err)
{
	pg_store *st = PG(base);
	size_t nbits = ((size_t)spec->nviews + 7) / 8;
	uint8_t *bits = calloc(1, nbits);
	char *hex = bits ? hex_bytea(bits, nbits) : NULL;
	free(bits);
	if (!hex)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	double now = store_now();
	pgp p = { .n = 0 };
	p_str(&p, id);
	p_int(&p, JOB_CREATED);
	p_str(&p, spec->label);
	p_int(&p, spec->priority);
	p_int(&p, spec->autostart);
	p_dbl(&p, now);
	p_int(&p, spec->nviews);
	p_int(&p, spec->nu);
	p_int(&p, spec->rows);
	p_int(&p, (long long)spec->view_stride);
	p_int(&p, (long long)spec->row_stride);
	p_int(&p, (long long)spec->view_bytes);
	p_int(&p, (long long)spec->proj_bytes);
	p_int(&p, (long long)spec->vol_bytes);
	p_str(&p, summary);
	p_str(&p, hex);
	p_int(&p, spec->stream);
	p_str(&p, store_spec_engine(spec));
	p_str(&p, owner);
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "insert", "BEGIN", NULL, NULL, err)) ||
	    (rc = pg_run(st, "insert",
			 "INSERT INTO jobs (id, state, label, priority, autostart, created, updated, views_expected, nu,"
			 " rows, view_stride, row_stride, view_bytes, proj_bytes, vol_bytes, summary, present, stream, engine,"
			 " owner) VALUES ($1, $2::int, $3, $4::int, $5::int, $6::float8, $6::float8, $7::int, $8::int, $9::int,"
			 " $10::bigint, $11::bigint, $12::bigint, $13::bigint, $14::bigint, $15, $16::bytea, $17::int, $18,"
			 " $19)",
			 &p, NULL, err)))
		goto out_unlock;
	for (int i = 0; i < spec->out.npush; i++) {
		pgp q = { .n = 0 };
		p_str(&q, id);
		p_str(&q, spec->out.push[i]);
		p_int(&q, i);
		p_int(&q, PUSH_PENDING);
		p_dbl(&q, now);
		if ((rc = pg_run(st, "insert push",
				 "INSERT INTO pushes (job, dest, ord, state, updated) VALUES ($1, $2, $3::int, $4::int, $5::float8)",
				 &q, NULL, err)))
			goto out_unlock;
	}
	rc = pg_run(st, "insert", "COMMIT", NULL, NULL, err);
out_unlock:
	pg_leave(st);
	free(hex);
	return rc;
}

static int pg_get(store *base, const char *id, int with_bitmap, job_row *out, rc_err *err)
{
	pg_store *st = PG(base);
	PG_ENTER(st, err);
	rc = get_row(st, id, with_bitmap, 0, out, NULL, err);
out_unlock:
	pg_leave(st);
	return rc;
}

static int pg_list(store *base, int state, int limit, int offset, job_row **rows, int *n, int *total,
		   rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL, *cnt = NULL;
	pgp p = { .n = 0 }, q = { .n = 0 };
	p_int(&p, limit);
	p_int(&p, offset);
	if (state >= 0) {
		p_int(&p, state);
		p_int(&q, state);
	}
	PG_ENTER(st, err);
	/* one snapshot for the page and its total */
	if ((rc = pg_run(st, "list", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL, NULL, err)) ||
	    (rc = pg_run(st, "list",
			 state < 0 ? "SELECT " STORE_ROW_COLS " FROM jobs ORDER BY seq DESC LIMIT $1::int OFFSET $2::int"
				   : "SELECT " STORE_ROW_COLS " FROM jobs WHERE state=$3::int ORDER BY seq DESC"
				     " LIMIT $1::int OFFSET $2::int",
			 &p, &res, err)) ||
	    (rc = pg_run(st, "count",
			 state < 0 ? "SELECT COUNT(*) FROM jobs" : "SELECT COUNT(*) FROM jobs WHERE state=$1::int",
			 &q, &cnt, err)) ||
	    (rc = pg_run(st, "list", "COMMIT", NULL, NULL, err)))
		goto out_clear;
	int nt = PQntuples(res);
	job_row *out = calloc((size_t)(nt > 0 ? nt : 1), sizeof *out);
	if (!out) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
		goto out_clear;
	}
	for (int i = 0; i < nt; i++)
		read_row(res, i, 1, &out[i]); /* the bitmap: views_missing is part of every Job */
	*rows = out;
	*n = nt;
	*total = atoi(PQgetvalue(cnt, 0, 0));
out_clear:
	PQclear(res);
	PQclear(cnt);
out_unlock:
	pg_leave(st);
	return rc;
}

static int pg_counts(store *base, int *counts, rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "counts", "SELECT state, COUNT(*) FROM jobs GROUP BY state", NULL, &res, err)))
		goto out_unlock;
	for (int i = 0; i < PQntuples(res); i++) {
		int s = atoi(PQgetvalue(res, i, 0));
		if (s >= 0 && s < JOB_NSTATES)
			counts[s] = atoi(PQgetvalue(res, i, 1));
	}
	PQclear(res);
out_unlock:
	pg_leave(st);
	return rc;
}

/* --- the job's state machine (store_machine.h): read FOR UPDATE, decide, write */

/* c's columns into cur's row (inside the transaction that read it FOR
 * UPDATE), only while it is in the state and on the node the decision saw;
 * a removal takes its pushes along. */
static int write_change(pg_store *st, const job_row *cur, const sm_change *c, const char *what, rc_err *err)
{
	PGresult *res = NULL;
	pgp p = { .n = 0 };
	char *hex = NULL;
	if (c->remove) {
		p_str(&p, cur->id);
		int rc = pg_run(st, what, "DELETE FROM jobs WHERE id=$1", &p, NULL, err);
		return rc ? rc : pg_run(st, what, "DELETE FROM pushes WHERE job=$1", &p, NULL, err);
	}
	if (!c->cols)
		return 0;
	sm_col col[SM_MAX_COLS];
	int n = sm_change_columns(c, col), rc = 0;
	char sql[1024];
	if (sm_update_sql(col, n, c->requeue ? "nextval('recond_queue_seq')" : NULL, sql, sizeof sql))
		return rc_fail(err, RC_EIO, "", "store: %s: the statement is too long", what);
	for (int i = 0; i < n; i++) {
		switch (col[i].type) { /* untyped parameters: each takes its column's type */
		case 'i': p_int(&p, col[i].i); break;
		case 'd': p_dbl(&p, col[i].d); break;
		case 'b':
			if (!(hex = hex_bytea(col[i].b, col[i].n)))
				return rc_fail(err, RC_ENOMEM, "", "out of memory");
			p_str(&p, hex);
			break;
		default: p_str(&p, col[i].s); /* NULL: SQL NULL */
		}
	}
	p_str(&p, cur->id);
	p_int(&p, cur->state);
	p_str(&p, cur->node);
	if (!(rc = pg_run(st, what, sql, &p, &res, err)) && pg_changes(res) != 1)
		rc = sm_lost(cur, err);
	PQclear(res);
	free(hex);
	return rc;
}

/* op's decision on cur, written; *ans (may be NULL) its answer. */
static int decide_write(pg_store *st, store_op op, const job_row *cur, const sm_args *a, int *ans, rc_err *err)
{
	sm_change c;
	int rc = store_decide(op, cur, a, &c, err);
	if (!rc && !(rc = write_change(st, cur, &c, sm_op_name(op), err)) && ans)
		*ans = c.answer;
	sm_change_clear(&c);
	return rc;
}

/* BEGIN, the row FOR UPDATE (another daemon's decision on it waits for this
 * one's COMMIT) with the database's clock, the decision, the write, COMMIT. */
static int pg_apply(store *base, int op, const char *id, const sm_args *args, int *ret_answer, rc_err *err)
{
	pg_store *st = PG(base);
	job_row r = { .present = NULL };
	sm_args a = *args;
	sm_change c;
	PG_ENTER(st, err);
	if ((rc = pg_run(st, sm_op_name((store_op)op), "BEGIN", NULL, NULL, err)))
		goto out_unlock;
	rc = get_row(st, id, sm_needs_bitmap((store_op)op), 1, &r, &a.clock, err);
	if (rc == RC_ENOTFOUND)
		rc = store_decide((store_op)op, NULL, &a, &c, err);
	else if (!rc && !(rc = decide_write(st, (store_op)op, &r, &a, ret_answer, err)))
		rc = pg_run(st, sm_op_name((store_op)op), "COMMIT", NULL, NULL, err);
	job_row_clear(&r);
out_unlock:
	pg_leave(st);
	return rc;
}

/* Inside a transaction: op decided and written on each row sql selects
 * (ROW_COLS, FOR UPDATE) with p; *ret_n counts the answers. */
static int decide_rows(pg_store *st, store_op op, const char *sql, const pgp *p, const sm_args *a, int *ret_n,
		       rc_err *err)
{
	PGresult *res = NULL;
	int rc = pg_run(st, sm_op_name(op), sql, p, &res, err), total = 0;
	for (int i = 0; !rc && i < PQntuples(res); i++) {
		job_row r;
		int ans = 0;
		read_row(res, i, 0, &r);
		rc = decide_write(st, op, &r, a, &ans, err);
		total += ans;
		job_row_clear(&r);
	}
	PQclear(res);
	*ret_n = rc ? 0 : total;
	return rc;
}

/* Only this node's running jobs (and those of no node): the others' run on. */
static int pg_recover(store *base, int *requeued, rc_err *err)
{
	pg_store *st = PG(base);
	sm_args a = { .now = store_now() };
	pgp p = { .n = 0 };
	p_int(&p, JOB_RUNNING);
	p_str(&p, st->base.node);
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "recover", "BEGIN", NULL, NULL, err)) ||
	    (rc = decide_rows(st, SM_RECOVER, "SELECT " STORE_ROW_COLS " FROM jobs WHERE state=$1::int"
			      " AND node IN ($2, '') ORDER BY id FOR UPDATE", &p, &a, requeued, err)))
		goto out_unlock;
	pgp q = { .n = 0 };
	p_str(&q, st->base.node);
	p_int(&q, PUSH_PENDING);
	p_int(&q, PUSH_SENDING);
	/* a push cut short here is sent again (store_sqlite_push.c says why);
	 * the other nodes' sends go on */
	if ((rc = pg_run(st, "recover",
			 "UPDATE pushes SET state=$2::int, next_try=0, node=''"
			 " WHERE (state=$2::int AND next_try < " PUSH_HELD_SQL ")"
			 " OR (state=$3::int AND node IN ($1::text, ''))",
			 &q, NULL, err)) ||
	    (rc = pg_run(st, "recover", "DELETE FROM pushes WHERE job NOT IN (SELECT id FROM jobs)", NULL, NULL, err)))
		goto out_unlock;
	rc = pg_run(st, "recover", "COMMIT", NULL, NULL, err);
out_unlock:
	pg_leave(st);
	return rc;
}

/* Running jobs whose lease ended before the database's clock, locked in one
 * order (two daemons expiring together wait, never deadlock); the times
 * written are that clock's, one for all. */
static int pg_lease_expire(store *base, int max_attempts, int *ret_n, rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	sm_args a = { .max_attempts = max_attempts };
	pgp p = { .n = 0 };
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "lease expiry", "BEGIN", NULL, NULL, err)) ||
	    (rc = pg_run(st, "lease expiry", "SELECT " PG_NOW, NULL, &res, err)))
		goto out_unlock;
	a.now = a.clock = strtod(PQgetvalue(res, 0, 0), NULL);
	p_int(&p, JOB_RUNNING);
	p_str(&p, PQgetvalue(res, 0, 0));
	if (!(rc = decide_rows(st, SM_LEASE_EXPIRE, "SELECT " STORE_ROW_COLS " FROM jobs WHERE state=$1::int"
			       " AND lease_until > 0 AND lease_until < $2::float8 ORDER BY id FOR UPDATE",
			       &p, &a, ret_n, err)))
		rc = pg_run(st, "lease expiry", "COMMIT", NULL, NULL, err);
	PQclear(res);
out_unlock:
	pg_leave(st);
	return rc;
}

/* The queue's next job this node can run (placement: one that needs no
 * engine, or one of the node's), locked; rows another daemon is taking are
 * passed over, not waited for.  Then the decision to take it. */
static int pg_take_next(store *base, const char *node, double lease_s, const char *engines, char id[37],
			rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	sm_args a = { .node = node, .lease_s = lease_s, .now = store_now() };
	pgp p = { .n = 0 };
	p_int(&p, JOB_QUEUED);
	p_str(&p, engines); /* NULL: SQL NULL, any job */
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "take", "BEGIN", NULL, NULL, err)) ||
	    (rc = pg_run(st, "take",
			 "SELECT " STORE_ROW_COLS ", " PG_NOW " FROM jobs WHERE state=$1::int"
			 " AND ($2::text IS NULL OR engine='' OR engine = ANY(string_to_array($2::text, ',')))"
			 " ORDER BY priority DESC, queue_seq ASC LIMIT 1 FOR UPDATE SKIP LOCKED",
			 &p, &res, err)))
		goto out_unlock;
	if (PQntuples(res) != 1) {
		rc = rc_fail(err, RC_ENOTFOUND, "", "the queue is empty");
		goto out_clear;
	}
	job_row r;
	read_row(res, 0, 0, &r);
	a.id = r.id;
	a.clock = strtod(PQgetvalue(res, 0, STORE_ROW_NCOLS), NULL);
	if (!(rc = decide_write(st, SM_TAKE, &r, &a, NULL, err)) &&
	    !(rc = pg_run(st, "take", "COMMIT", NULL, NULL, err)))
		snprintf(id, 37, "%s", r.id);
	job_row_clear(&r);
out_clear:
	PQclear(res);
out_unlock:
	pg_leave(st);
	return rc;
}
static int pg_node_heartbeat(store *base, const char *devices, const char *running, double started, rc_err *err)
{
	pg_store *st = PG(base);
	pgp p = { .n = 0 };
	p_str(&p, st->base.node);
	p_str(&p, devices);
	p_str(&p, running);
	p_dbl(&p, started);
	PG_ENTER(st, err);
	/* the database's clock: every node's age is measured by the same one */
	rc = pg_run(st, "heartbeat",
		    "INSERT INTO nodes (name, devices, running, heartbeat, started) VALUES ($1, $2, $3, " PG_NOW ","
		    " $4::float8) ON CONFLICT (name) DO UPDATE SET devices=$2, running=$3, heartbeat=" PG_NOW ","
		    " started=$4::float8",
		    &p, NULL, err);
out_unlock:
	pg_leave(st);
	return rc;
}

static int pg_nodes_list(store *base, node_row **rows, int *n, rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "nodes",
			 "SELECT name, running, heartbeat, " PG_NOW " - heartbeat, started, devices FROM nodes ORDER BY name",
			 NULL, &res, err)))
		goto out_unlock;
	int nt = PQntuples(res);
	node_row *out = nt ? calloc((size_t)nt, sizeof *out) : NULL;
	if (nt && !out) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
		goto out_clear;
	}
	for (int i = 0; i < nt; i++) {
		snprintf(out[i].name, sizeof out[i].name, "%s", PQgetvalue(res, i, 0));
		snprintf(out[i].running, sizeof out[i].running, "%s", PQgetvalue(res, i, 1));
		out[i].heartbeat = strtod(PQgetvalue(res, i, 2), NULL);
		out[i].age_s = strtod(PQgetvalue(res, i, 3), NULL);
		out[i].started = strtod(PQgetvalue(res, i, 4), NULL);
		out[i].devices = dup_col(res, i, 5);
	}
	*rows = out;
	*n = nt;
out_clear:
	PQclear(res);
out_unlock:
	pg_leave(st);
	return rc;
}

static int pg_expired(store *base, double before, char (*ids)[37], int max, int *ret_n, rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	pgp p = { .n = 0 };
	p_int(&p, JOB_SUCCEEDED);
	p_int(&p, JOB_FAILED);
	p_int(&p, JOB_CANCELLED);
	p_dbl(&p, before);
	p_int(&p, max);
	*ret_n = 0;
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "expire",
			 "SELECT id FROM jobs WHERE state IN ($1::int, $2::int, $3::int) AND finished > 0"
			 " AND finished < $4::float8 LIMIT $5::int",
			 &p, &res, err)))
		goto out_unlock;
	int n = PQntuples(res);
	for (int i = 0; i < n && i < max; i++)
		snprintf(ids[i], 37, "%s", PQgetvalue(res, i, 0));
	*ret_n = n < max ? n : max;
	PQclear(res);
out_unlock:
	pg_leave(st);
	return rc;
}

/* --- pushes (store.h, "pushes to PACS"; the SQLite twin is store_sqlite_push.c) */

#define PUSH_COLS "job, dest, state, attempts, sent, total, next_try, updated, error"

static void read_push(const PGresult *res, int i, push_row *p)
{
#define V(c) PQgetvalue(res, i, (c))
	memset(p, 0, sizeof *p);
	snprintf(p->job, sizeof p->job, "%s", V(0));
	snprintf(p->dest, sizeof p->dest, "%s", V(1));
	p->state = (push_state)atoi(V(2));
	p->attempts = atoi(V(3));
	p->sent = atoi(V(4));
	p->total = atoi(V(5));
	p->next_try = strtod(V(6), NULL);
	p->updated = strtod(V(7), NULL);
	snprintf(p->error, sizeof p->error, "%s", V(8));
#undef V
}

static int pg_push_list(store *base, const char *id, push_row **rows, int *n, rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	pgp p = { .n = 0 };
	p_str(&p, id);
	*rows = NULL;
	*n = 0;
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "list pushes", "SELECT " PUSH_COLS " FROM pushes WHERE job=$1 ORDER BY ord", &p, &res,
			 err)))
		goto out_unlock;
	int nt = PQntuples(res);
	if (nt && !(*rows = calloc((size_t)nt, sizeof **rows)))
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
	for (int i = 0; i < nt && !rc; i++)
		read_push(res, i, &(*rows)[i]);
	if (!rc)
		*n = nt;
	PQclear(res);
out_unlock:
	pg_leave(st);
	return rc;
}

static int pg_push_take(store *base, double now, push_row *out, double *next_due, rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	pgp p = { .n = 0 };
	p_int(&p, PUSH_SENDING);
	p_dbl(&p, now);
	p_str(&p, st->base.node);
	p_int(&p, PUSH_PENDING);
	p_int(&p, JOB_SUCCEEDED);
	if (next_due)
		*next_due = 0;
	PG_ENTER(st, err);
	/* the earliest due push, passing over those another daemon is taking */
	if ((rc = pg_run(st, "take push",
			 "UPDATE pushes SET state=$1::int, updated=$2::float8, node=$3 WHERE state=$4::int AND (job, dest)="
			 " (SELECT p.job, p.dest FROM pushes p JOIN jobs j ON j.id=p.job"
			 " WHERE p.state=$4::int AND j.state=$5::int AND p.next_try <= $2::float8"
			 " ORDER BY p.next_try, j.seq, p.ord LIMIT 1 FOR UPDATE OF p SKIP LOCKED) RETURNING " PUSH_COLS,
			 &p, &res, err)))
		goto out_unlock;
	if (PQntuples(res) == 1) {
		read_push(res, 0, out);
		PQclear(res);
		goto out_unlock;
	}
	PQclear(res);
	pgp q = { .n = 0 };
	p_int(&q, PUSH_PENDING);
	p_int(&q, JOB_SUCCEEDED);
	if ((rc = pg_run(st, "take push",
			 "SELECT MIN(p.next_try) FROM pushes p JOIN jobs j ON j.id=p.job"
			 " WHERE p.state=$1::int AND j.state=$2::int",
			 &q, &res, err)))
		goto out_unlock;
	if (next_due && !PQgetisnull(res, 0, 0))
		*next_due = strtod(PQgetvalue(res, 0, 0), NULL);
	PQclear(res);
	rc = RC_ENOTFOUND;
out_unlock:
	pg_leave(st);
	return rc;
}

static int pg_push_update(store *base, const push_row *r, rc_err *err)
{
	pg_store *st = PG(base);
	pgp p = { .n = 0 };
	p_int(&p, r->state);
	p_int(&p, r->attempts);
	p_int(&p, r->sent);
	p_int(&p, r->total);
	p_dbl(&p, r->next_try);
	p_dbl(&p, store_now());
	p_str(&p, r->error);
	p_str(&p, r->job);
	p_str(&p, r->dest);
	PG_ENTER(st, err);
	rc = pg_run(st, "update push",
		    "UPDATE pushes SET state=$1::int, attempts=$2::int, sent=$3::int, total=$4::int, next_try=$5::float8,"
		    " updated=$6::float8, error=$7 WHERE job=$8 AND dest=$9",
		    &p, NULL, err);
out_unlock:
	pg_leave(st);
	return rc;
}

static int pg_push_again(store *base, const char *id, int *n, rc_err *err)
{
	pg_store *st = PG(base);
	PGresult *res = NULL;
	pgp p = { .n = 0 };
	p_str(&p, id);
	pgp q = { .n = 0 };
	p_int(&q, PUSH_PENDING);
	p_dbl(&q, store_now());
	p_str(&q, id);
	p_int(&q, PUSH_SENDING);
	*n = 0;
	PG_ENTER(st, err);
	if ((rc = pg_run(st, "push again", "SELECT COUNT(*) FROM pushes WHERE job=$1", &p, &res, err)))
		goto out_unlock;
	int total = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (!total) {
		rc = rc_fail(err, RC_ENOTFOUND, "output.push", "job %s names no destination in output.push", id);
		goto out_unlock;
	}
	if ((rc = pg_run(st, "push again",
			 "UPDATE pushes SET state=$1::int, attempts=0, sent=0, next_try=0, error='', updated=$2::float8"
			 " WHERE job=$3 AND state<>$4::int",
			 &q, &res, err)))
		goto out_unlock;
	*n = pg_changes(res);
	PQclear(res);
out_unlock:
	pg_leave(st);
	return rc;
}

static const struct store_ops pg_ops = {
	.name = "postgresql",
	.close = pg_close,
	.recover = pg_recover,
	.state_of = pg_state_of,
	.insert = pg_insert,
	.get = pg_get,
	.list = pg_list,
	.counts = pg_counts,
	.apply = pg_apply,
	.take_next = pg_take_next,
	.lease_expire = pg_lease_expire,
	.node_heartbeat = pg_node_heartbeat,
	.nodes_list = pg_nodes_list,
	.expired = pg_expired,
	.push_list = pg_push_list,
	.push_take = pg_push_take,
	.push_update = pg_push_update,
	.push_again = pg_push_again,
};
