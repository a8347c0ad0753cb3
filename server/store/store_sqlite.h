/*
 * store_sqlite: what store_sqlite.c and store_sqlite_push.c share (one
 * connection, one mutex; store.h), and the connection's helpers under both
 * (store_sqlite_db.c).  Functions named _locked expect the
 * caller to hold st->lock and to be inside its transaction when it has one.
 */
#ifndef RC_STORE_SQLITE_H
#define RC_STORE_SQLITE_H

#include <pthread.h>
#include <sqlite3.h>

#include "spec.h"
#include "store/store_backend.h"

typedef struct sq_store {
	struct store base; /* first: a store * is a sq_store * */
	sqlite3 *db;
	pthread_mutex_t lock;
	long long seq;       /* last creation sequence number */
	long long queue_seq; /* last queue sequence number */
} sq_store;

#define SQ(st) ((sq_store *)(st))

/* store_sqlite_db.c: SQLite's log to ours (with the errno of a failed
 * write), once, before the first open. */
void sq_log_setup(void);
/* The connection's last error as an rc_err of what: RC_ENOSPACE for a full
 * disk, RC_EIO else; returns the code. */
int store_db_fail(sq_store *st, rc_err *err, const char *what);
/* sqlite3_exec of sql (no rows): 0, or the error with sql as its what. */
int sq_exec(sq_store *st, const char *sql, rc_err *err);
/* sqlite3_prepare_v2 of sql into *q: 0, or store_db_fail's error of what. */
int sq_prepare(sq_store *st, const char *sql, sqlite3_stmt **q, const char *what, rc_err *err);
/* Steps q (a statement that returns no row) to its end and finalizes it: 0,
 * or store_db_fail's error of what.  sqlite3_changes still counts its rows. */
int sq_step_done(sq_store *st, sqlite3_stmt *q, const char *what, rc_err *err);

/* One row per (job, destination) of output.push; a table of its own so that
 * stores made before it gain it with CREATE TABLE IF NOT EXISTS. */
#define STORE_PUSH_SCHEMA \
	"CREATE TABLE IF NOT EXISTS pushes (" \
	" job TEXT NOT NULL, dest TEXT NOT NULL, ord INTEGER NOT NULL, state INTEGER NOT NULL," \
	" attempts INTEGER NOT NULL DEFAULT 0, sent INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0," \
	" next_try REAL NOT NULL DEFAULT 0, updated REAL NOT NULL DEFAULT 0, error TEXT NOT NULL DEFAULT ''," \
	" PRIMARY KEY (job, dest));"

int store_push_insert_locked(sq_store *st, const char *id, const job_spec *spec, rc_err *err);
int store_push_delete_locked(sq_store *st, const char *id, rc_err *err);
int store_push_recover_locked(sq_store *st, rc_err *err);

/* store_backend.h's push operations */
int sq_push_list(store *base, const char *id, struct push_row **rows, int *n, rc_err *err);
int sq_push_take(store *base, double now, struct push_row *out, double *next_due, rc_err *err);
int sq_push_update(store *base, const struct push_row *p, rc_err *err);
int sq_push_again(store *base, const char *id, int *n, rc_err *err);

#endif
