/*
 * store_backend: what the store's backends share (store.h is the contract).
 *
 * store.c keeps store.h's functions and calls the open store's table of
 * operations; store_sqlite.c (SQLite, one machine) and store_pg.c
 * (PostgreSQL, many daemons on one database and a shared spool) each fill
 * one.  Every backend struct begins with struct store, so a store * is the
 * backend's own struct.  The spool directory {dir}/jobs/{id}/ is the same for
 * both and handled once, in store_spool.c.  Every decision on a job's state
 * is store_machine.c's (store_decide): a backend reads the row in its
 * transaction, asks the decision, and writes the change it gets.
 *
 * Not including store.h keeps the modules free of cycles (store.c includes
 * this file): the rows are named by their struct tags.
 */
#ifndef RC_STORE_BACKEND_H
#define RC_STORE_BACKEND_H

#include <pthread.h>
#include <stddef.h>

#include "util/rc_error.h"
#include "spec.h"

typedef struct store store;
struct job_row;
struct push_row;
struct node_row;
struct sm_args;

#define STORE_NODE_MAX 64
/* A spool directory without a row younger than this may be another daemon's
 * create in progress (a shared spool): the sweep leaves it. */
#define STORE_ORPHAN_AGE_S 600.0

struct store {
	const struct store_ops *ops;
	char dir[4096];             /* the spool: {dir}/jobs/{id}/ */
	char node[STORE_NODE_MAX];  /* this daemon's name in leases */
	double call_bound_s;        /* the longest one store call may block (0: unbounded, local) */
	/* store_files_hold: the jobs whose directories a writer holds */
	pthread_mutex_t holds_lock;
	pthread_cond_t holds_cond;
	struct store_hold *holds;
};

/* One per backend; the arguments are store.h's (states as int).  The store
 * layer checks nothing itself: each operation keeps store.h's contract. */
struct store_ops {
	const char *name;
	void (*close)(store *st);
	/* rows only (SM_RECOVER on each running job; PostgreSQL: this node's):
	 * the spool sweep is store_spool_sweep, after this */
	int (*recover)(store *st, int *requeued, rc_err *err);
	/* the state of job id, -1 when there is no such row; when unsure, a
	 * state that keeps the files (JOB_RUNNING) */
	int (*state_of)(store *st, const char *id);
	/* the row (the spool files are already made) */
	int (*insert)(store *st, const char *id, const job_spec *spec, const char *summary, const char *owner,
		      rc_err *err);
	int (*get)(store *st, const char *id, int with_bitmap, struct job_row *out, rc_err *err);
	int (*list)(store *st, int state, int limit, int offset, struct job_row **rows, int *n, int *total,
		    rc_err *err);
	int (*counts)(store *st, int *counts, rc_err *err);
	/* op (store_machine.h's store_op) on job id's row, in one transaction:
	 * read it (PostgreSQL: FOR UPDATE; the bitmap when sm_needs_bitmap),
	 * store_decide with a (a->clock: PostgreSQL puts the database's clock
	 * there), write the change conditionally; *ret_answer gets its answer */
	int (*apply)(store *st, int op, const char *id, const struct sm_args *a, int *ret_answer, rc_err *err);
	/* SM_TAKE on the queue's next job; engines: store_take_next_on's (NULL = any job) */
	int (*take_next)(store *st, const char *node, double lease_s, const char *engines, char id[37], rc_err *err);
	/* SM_LEASE_EXPIRE on each running job whose lease passed */
	int (*lease_expire)(store *st, int max_attempts, int *ret_n, rc_err *err);
	int (*node_heartbeat)(store *st, const char *devices, const char *running, double started, rc_err *err);
	int (*nodes_list)(store *st, struct node_row **rows, int *n, rc_err *err);
	/* up to n ids of finished jobs whose finish is older than before */
	int (*expired)(store *st, double before, char (*ids)[37], int n, int *ret_n, rc_err *err);
	int (*push_list)(store *st, const char *id, struct push_row **rows, int *n, rc_err *err);
	int (*push_take)(store *st, double now, struct push_row *out, double *next_due, rc_err *err);
	int (*push_update)(store *st, const struct push_row *p, rc_err *err);
	int (*push_again)(store *st, const char *id, int *n, rc_err *err);
};

/* where is the database's directory (recond.db); st->dir and node are set
 * by the caller. */
int store_sqlite_open(const char *where, store **ret, rc_err *err);
/* where is a postgresql:// URI. */
int store_pg_open(const char *where, store **ret, rc_err *err);

/* The spool (store_spool.c): the same files for every backend. */

/* snprintf for paths: -1 when the result would not fit (never a cut path). */
int store_pathf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* {dir}/jobs, made with its parents. */
int store_spool_init(const char *dir, rc_err *err);
/* {dir}/jobs/{id}/: spec.json, projections.f32 preallocated to its final
 * size, both fsynced with the directories; removed again on a failure. */
int store_spool_create(const char *dir, const char *id, const job_spec *spec, const char *spec_json,
		       size_t spec_len, rc_err *err);
/* Removes {dir}/jobs/{id} and fsyncs {dir}/jobs (best effort: a leftover is
 * an orphan that the next sweep removes). */
void store_spool_remove(const char *dir, const char *id);
/* Removes spool directories without a row (when older than min_age_s: on a
 * shared spool another daemon may be between its files and its row), the
 * temporaries of writes cut short and the volume.f32 of a job that has not
 * succeeded, sparing running jobs (another daemon's worker may be writing).
 * Returns how many it removed. */
int store_spool_sweep(store *st, double min_age_s);

#endif
