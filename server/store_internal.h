/*
 * store_internal: what store.c and store_push.c share (one connection, one
 * mutex; store.h).  Functions named _locked expect the caller to hold
 * st->lock and to be inside its transaction when it has one.
 */
#ifndef RC_STORE_INTERNAL_H
#define RC_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "spec.h"

/* store.h's opaque type (not included here: store.c includes this file) */
typedef struct store store;

struct store {
	sqlite3 *db;
	pthread_mutex_t lock;
	char dir[4096];
	long long seq;       /* last creation sequence number */
	long long queue_seq; /* last queue sequence number */
};

int store_db_fail(store *st, rc_err *err, const char *what);

/* One row per (job, destination) of output.push; a table of its own so that
 * stores made before it gain it with CREATE TABLE IF NOT EXISTS. */
#define STORE_PUSH_SCHEMA \
	"CREATE TABLE IF NOT EXISTS pushes (" \
	" job TEXT NOT NULL, dest TEXT NOT NULL, ord INTEGER NOT NULL, state INTEGER NOT NULL," \
	" attempts INTEGER NOT NULL DEFAULT 0, sent INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0," \
	" next_try REAL NOT NULL DEFAULT 0, updated REAL NOT NULL DEFAULT 0, error TEXT NOT NULL DEFAULT ''," \
	" PRIMARY KEY (job, dest));"

int store_push_insert_locked(store *st, const char *id, const job_spec *spec, rc_err *err);
int store_push_delete_locked(store *st, const char *id, rc_err *err);
int store_push_recover_locked(store *st, rc_err *err);

#endif
