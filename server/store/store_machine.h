/*
 * store_machine: the job's state machine, written once for every backend.
 *
 * Invariants: a decision is a pure function of (operation, the job's row as
 * the transaction read it, the operation's arguments): no database, no
 * clock (the caller passes its times), no logging.  It says whether the
 * operation may happen in the row's state and answers with
 *   - an error (RC_ESTATE, RC_EINVAL, RC_ENOTFOUND, ... with the message the
 *     client sees): nothing is written;
 *   - or a change: the columns to write and their new values (possibly none:
 *     a start of a job already queued), whether the row is removed, whether
 *     it takes a new place in the queue, and the caller's answer.
 *
 * Life cycle of one operation in a backend (store_sqlite.c, store_pg.c):
 *   begin (PostgreSQL: BEGIN; SQLite: the store's mutex, one writer);
 *   read the row (PostgreSQL: FOR UPDATE), or find none;
 *   store_decide(op, row or NULL, args, &change, err);
 *   write the change conditionally: UPDATE ... SET <sm_change_columns>
 *     WHERE id=? AND state=<read> AND node=<read> (or DELETE), one row or
 *     sm_lost's RC_ESTATE;
 *   commit; sm_change_clear.
 * Operations over many rows (take the next queued job, expire leases,
 * recover at start) choose their rows in SQL, then decide and write each as
 * above.  Selections stay in the backends; decisions live here.
 */
#ifndef RC_STORE_MACHINE_H
#define RC_STORE_MACHINE_H

#include <stddef.h>
#include <stdint.h>

#include "job_row.h"

typedef enum store_op {
	SM_VIEWS_SET = 0, /* views [first, last) stored and fsynced (store_views_set) */
	SM_VIEWS_CLEAR,   /* views [first, last) about to be overwritten (store_views_clear) */
	SM_START,         /* POST start */
	SM_TAKE,          /* node takes the queued job the backend chose (store_take_next*) */
	SM_RENEW,         /* node renews its lease (store_lease_renew) */
	SM_PROGRESS,      /* node records live progress (store_progress) */
	SM_FINISH,        /* node records the outcome (store_finish) */
	SM_CANCEL,
	SM_STREAM_PAUSE,  /* a streaming job whose views stopped coming */
	SM_PRIORITY,      /* PATCH priority */
	SM_DELETE,        /* DELETE, and each job store_expire removes */
	SM_LEASE_EXPIRE,  /* a running job whose lease passed (store_lease_expire) */
	SM_RECOVER,       /* a running job found at start (store_recover) */
	SM_NOPS
} store_op;

/* The operation's name in store errors ("store: NAME: ..."). */
const char *sm_op_name(store_op op);

/* The arguments; each operation reads its own. */
typedef struct sm_args {
	const char *id;       /* the job (for messages when there is no row) */
	double now;           /* the time recorded in updated, queued, started, finished */
	double clock;         /* the lease clock (PostgreSQL: the database's); take, renew, expiry */
	const char *node;     /* the acting node: take, renew, progress, finish, stream pause */
	int first, last;      /* views */
	int priority;         /* PATCH */
	int state;            /* finish: succeeded, failed, cancelled, or queued (the daemon stops) */
	const char *err_code, *err_msg, *report; /* finish (NULL: "", "", the report kept) */
	const char *progress; /* progress (JSON text) */
	double lease_s;       /* take (0: no lease), renew */
	int max_attempts;     /* lease expiry */
} sm_args;

/* The columns a change writes. */
enum {
	SM_COL_STATE = 1u << 0,
	SM_COL_UPDATED = 1u << 1,
	SM_COL_QUEUED = 1u << 2,
	SM_COL_STARTED = 1u << 3,
	SM_COL_FINISHED = 1u << 4,
	SM_COL_PRIORITY = 1u << 5,
	SM_COL_CANCEL = 1u << 6,      /* cancel_requested */
	SM_COL_PRESENT = 1u << 7,     /* present and views_present */
	SM_COL_STREAMING = 1u << 8,
	SM_COL_CLEARED = 1u << 9,     /* views_cleared */
	SM_COL_NODE = 1u << 10,
	SM_COL_LEASE = 1u << 11,      /* lease_until */
	SM_COL_ATTEMPTS = 1u << 12,
	SM_COL_LEASE_LOG = 1u << 13,
	SM_COL_ERROR = 1u << 14,      /* error_code and error_message */
	SM_COL_REPORT = 1u << 15,
	SM_COL_PROGRESS = 1u << 16,
};
#define SM_MAX_COLS 20

typedef struct sm_change {
	unsigned cols;   /* SM_COL_*: what to write; 0 with remove 0: nothing */
	int remove;      /* delete the row and its pushes */
	int requeue;     /* a new queue_seq: the back of its priority (the backend's sequence) */
	int answer;      /* views: the new state; start: whether it was queued now; cancel,
			  * priority: the state after; renew: cancel_requested; recover: 1 when
			  * re-queued */
	/* the new values of the columns in cols */
	job_state state;
	double updated, queued, started, finished, lease_until;
	int priority, cancel_requested, streaming, attempts, views_present;
	long long views_cleared;
	const char *node, *error_code, *error_message, *report, *progress, *lease_log; /* NULL: SQL NULL */
	const uint8_t *present;
	size_t present_n;
	/* owned: sm_change_clear frees them */
	uint8_t *own_present;
	char *own_log, *own_msg;
} sm_change;

void sm_change_clear(sm_change *c);

/* Whether op decides on the presence bitmap (the row is read with it). */
int sm_needs_bitmap(store_op op);

/* The decision of op on cur, the row the transaction read (NULL: there is
 * none).  0 with *out set (clear it with sm_change_clear), or the error for
 * the caller, with *out empty. */
int store_decide(store_op op, const job_row *cur, const sm_args *a, sm_change *out, rc_err *err);

/* The RC_ESTATE of a conditional write that found the row changed since it
 * was read (a backend's safety net; the row lock or the mutex prevents it). */
int sm_lost(const job_row *cur, rc_err *err);

/* One column of a change, for the backends' UPDATE: type 'i' (integer), 'd'
 * (double), 't' (text; s NULL: SQL NULL), 'b' (blob b, n bytes). */
typedef struct sm_col {
	const char *name;
	char type;
	long long i;
	double d;
	const char *s;
	const uint8_t *b;
	size_t n;
} sm_col;

/* c's columns in a fixed order; returns how many (at most SM_MAX_COLS). */
int sm_change_columns(const sm_change *c, sm_col out[SM_MAX_COLS]);

/* The conditional write of n columns col (sm_change_columns) into buf:
 * "UPDATE jobs SET col1=$1, ..., coln=$n[, queue_seq=queue_expr] WHERE
 * id=$n+1 AND state=$n+2 AND node=$n+3" (the row as read; queue_expr NULL:
 * the place in the queue kept).  $N parameters are PostgreSQL's, and SQLite
 * numbers such named parameters in the order they first appear.  -1 when
 * size is too small. */
int sm_update_sql(const sm_col *col, int n, const char *queue_expr, char *buf, size_t size);

/* The columns a backend reads into a job_row, in read_row's order. */
#define STORE_ROW_COLS "id, state, label, priority, autostart, cancel_requested, created, updated, queued," \
	" started, finished, views_expected, views_present, nu, rows, view_stride, row_stride," \
	" view_bytes, proj_bytes, vol_bytes, error_code, error_message, summary, report, present," \
	" node, lease_until, attempts, stream, streaming, engine, views_cleared, progress, owner, lease_log"
#define STORE_ROW_NCOLS 35

#endif
