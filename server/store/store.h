/*
 * store: the durable job table and the spool directory {dir}/jobs/{id}/ with
 * spec.json, projections.f32 (preallocated to its final size at creation)
 * and volume.f32 (written by the worker).
 *
 * Backends (store_backend.h): the table lives in SQLite ({dir}/recond.db,
 * WAL, synchronous=FULL; one daemon; the default) or in PostgreSQL (many
 * daemons on one database and one shared spool directory).  Both keep the
 * same contract below; a version table (recond_schema) is created and
 * migrated at open, and a database newer than this binary is refused.
 *
 * Durability contract: every function that changes state returns 0 only once
 * the change is on disk: files and their directory fsynced before the row
 * that refers to them is committed.  The per-view presence record is a bitmap
 * in the job row; a view's bit is set only after its bytes were fsynced, and
 * cleared (committed) before an acknowledged view is overwritten, so after any
 * crash every bit that is set describes bytes that are on disk.
 *
 * Threads: one connection behind the store's mutex; any thread may call.
 * PostgreSQL: a lost connection fails the call with RC_EUNAVAIL ("retry";
 * HTTP 503) and is opened again by the next call.
 * Life cycle: store_open (creates the schema and directories), store_recover
 * once at start, store_close.
 */
#ifndef RC_STORE_H
#define RC_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "util/rc_error.h"
#include "spec.h"

#include "job_row.h"

typedef struct store store;

/* Opens the store at where: a postgresql:// or postgres:// URI (libpq's
 * syntax; spool is then required, the directory every daemon of the database
 * shares) or else a directory (SQLite's recond.db, and the spool unless
 * spool says otherwise).  node names this daemon in leases (NULL or "": the
 * host name).  A schema newer than this binary knows is RC_EUNSUPPORTED; a
 * database that cannot be reached RC_EUNAVAIL. */
int store_open2(const char *where, const char *spool, const char *node, store **ret, rc_err *err);
/* store_open2(dir, NULL, NULL, ...): the SQLite store in dir. */
int store_open(const char *dir, store **ret, rc_err *err);
void store_close(store *st);
/* Whether where names a PostgreSQL database. */
int store_is_pg(const char *where);
/* The spool directory, this daemon's node name, "sqlite" or "postgresql". */
const char *store_dir(const store *st);
const char *store_node(const store *st);
/* The longest one call may block (a shared store bounds each statement and
 * reconnect); 0 for the local SQLite store. */
double store_call_bound(const store *st);
const char *store_backend_name(const store *st);
/* {dir}/jobs/{id}[/name] into buf. */
void store_job_path(const store *st, const char *id, const char *name, char *buf, size_t n);

/* Re-queues running jobs (a running job whose cancel was acknowledged is
 * cancelled instead; PostgreSQL: only this node's), removes spool
 * directories without a row (PostgreSQL: only those older than ten minutes,
 * as another daemon may be creating one), the
 * temporaries of interrupted writes and the volume.f32 of a job that has not
 * succeeded (an interrupted run's; *orphans counts all three).  Counts may
 * be NULL. */
int store_recover(store *st, int *requeued, int *orphans, rc_err *err);
/* store_recover while the daemon serves (a start whose recovery failed on a
 * full disk retries it from the runner): creates may be in flight, so the
 * sweep spares directories without a row younger than a create can take,
 * as on a shared spool. */
int store_recover_serving(store *st, int *requeued, int *orphans, rc_err *err);

/* Creates the spool directory (spec.json, preallocated projections.f32) and
 * the row, in state created.  summary is JSON text kept with the row. */
int store_create(store *st, const char *id, const job_spec *spec, const char *spec_json,
		 size_t spec_len, const char *summary, rc_err *err);
/* store_create with the job's owner (the token name, job_row.owner); owner
 * never changes afterwards.  store_create's owner is "". */
int store_create_owned(store *st, const char *id, const job_spec *spec, const char *spec_json,
		       size_t spec_len, const char *summary, const char *owner, rc_err *err);

/* Loads a job (RC_ENOTFOUND when there is none). */
int store_get(store *st, const char *id, int with_bitmap, job_row *out, rc_err *err);

/* Newest first; state < 0 = all.  *rows is an array of *n rows (free each
 * with job_row_clear, then free the array). */
int store_list(store *st, int state, int limit, int offset, job_row **rows, int *n,
	       int *total, rc_err *err);

/* Counts of jobs by state. */
int store_counts(store *st, int counts[JOB_NSTATES], rc_err *err);

/* Marks views [first, last) absent (before they are overwritten); commits
 * nothing when none of them is present.  Call it after the upload holds its
 * views (http_upload.c), so that the decision sees every view set before.
 * Fails with RC_ESTATE when the job is not in an uploadable state. */
int store_views_clear(store *st, const char *id, int first, int last, rc_err *err);
/* Marks views [first, last) present after their bytes were fsynced; the job
 * goes created -> receiving, and to queued when every view is present and
 * autostart is set.  A streaming FDK job (stream on, or auto with autostart)
 * is queued with its first views instead, marked streaming: it keeps taking
 * views while it is queued and runs.  RC_ESTATE when the job is no longer
 * uploadable.
 * *ret_state (may be NULL) gets the new state. */
int store_views_set(store *st, const char *id, int first, int last, job_state *ret_state, rc_err *err);

/* POST start: queued when every view is present.  RC_ESTATE with a message
 * otherwise; *ret_changed says whether the state changed. */
int store_start(store *st, const char *id, int *ret_changed, rc_err *err);

/* The next job to run (priority, then first queued); moves it to running
 * on this node, with no lease.  Returns RC_ENOTFOUND when the queue is
 * empty.  PostgreSQL: daemons never take the same job (SKIP LOCKED). */
int store_take_next(store *st, char id[37], rc_err *err);

/* Leases: a job taken with a lease runs on node until lease_until (the
 * database's clock for PostgreSQL), renewed by the node while its worker
 * runs.  A running job whose lease passed (its node was killed or cut off)
 * is given up by store_lease_expire, which any daemon may call.  Nothing in
 * the runner uses them yet.
 *
 * store_take_next with a lease of lease_s (> 0) seconds for node. */
int store_take_next_lease(store *st, const char *node, double lease_s, char id[37], rc_err *err);
/* Placement: store_take_next_lease that takes only a job this node can run:
 * one that needs no engine (engine "") or one whose engine is in engines, a
 * comma-separated list ("opencl,cuda,tensor"; "" = none; NULL = any job).
 * Passed-over jobs keep their place for the nodes that can run them. */
int store_take_next_on(store *st, const char *node, double lease_s, const char *engines, char id[37],
		       rc_err *err);
/* The engine a node needs for spec (opencl, cuda, tensor, trigeneous), ""
 * for auto and cpu: kept in the row at creation. */
const char *store_spec_engine(const job_spec *spec);
/* Extends the lease of running job id held by node to now + lease_s;
 * RC_ESTATE when the job is not running on node any more (its lease was
 * given up: the worker should stop), RC_ENOTFOUND when it is gone.
 * *ret_cancel (may be NULL) gets the row's cancel_requested: a cancel asked
 * of another node reaches the running one at its next renewal. */
int store_lease_renew(store *st, const char *id, const char *node, double lease_s, int *ret_cancel,
		      rc_err *err);
/* The running job's live progress (JSON text), for the other nodes' GET and
 * event streams; written only while this node (store_node) runs it, else
 * RC_ESTATE. */
int store_progress(store *st, const char *id, const char *progress, rc_err *err);
/* Running jobs whose lease passed: queued again (at the front of their
 * priority) with attempts + 1, or, at the max_attempts-th expiry, failed with
 * the code lease_expired and each expiry (node, time) in the message; a job
 * whose cancel was acknowledged is cancelled.  *ret_n (may be NULL) counts
 * them.  Jobs taken without a lease never expire. */
int store_lease_expire(store *st, int max_attempts, int *ret_n, rc_err *err);
int store_queue_depth(store *st);

/* Cancel: created/receiving/queued -> cancelled; running -> cancel_requested.
 * *ret_state gets the state after the call.  RC_ESTATE when the job has
 * already finished (succeeded, failed, cancelled): nothing changes. */
int store_cancel(store *st, const char *id, job_state *ret_state, rc_err *err);

/* running -> state (succeeded, failed, cancelled, or queued when the daemon
 * stops), with the error and the worker's report (both may be NULL).  Only
 * while this node (store_node) holds the job: RC_ESTATE when it is not
 * running or runs elsewhere (its lease expired and another node took it). */
int store_finish(store *st, const char *id, job_state state, const char *err_code,
		 const char *err_msg, const char *report, rc_err *err);

/* A streaming job whose views stopped coming: running -> receiving, no
 * longer streaming (the next view queues it again, or it runs as a batch
 * once complete).  RC_ESTATE when it is not running on this node
 * (store_node). */
int store_stream_pause(store *st, const char *id, rc_err *err);

/* Removes a finished job: row first, then its files, once no writer holds
 * them (store_files_hold).  RC_ESTATE when the job has not finished. */
int store_delete(store *st, const char *id, rc_err *err);

/* A writer of files into job id's directory after the job finished (its
 * DICOM series) holds them: a delete or an expiry that removes the row
 * meanwhile waits for store_files_release before it removes the directory,
 * so nothing written survives the delete.  Take the hold, then check that
 * the row is still there (a writer that finds it gone writes nothing); every
 * hold is released once.  Holds nest (several writers of one job). */
int store_files_hold(store *st, const char *id, rc_err *err);
void store_files_release(store *st, const char *id);

/* Deletes finished jobs whose finish time is older than now - retention_s;
 * ids of deleted jobs are not reported, only the count. */
int store_expire(store *st, double retention_s, int *ret_n, rc_err *err);

double store_now(void);

/* PATCH: sets the priority (0..9, as at creation) of a job that has not
 * started (created, receiving, queued); a queued job keeps its place in the
 * order it was queued within its new priority (store_take_next).  *ret_state
 * (may be NULL) gets the job's state.  RC_ESTATE naming the state when it is
 * running or finished: nothing changes. */
int store_set_priority(store *st, const char *id, int priority, job_state *ret_state, rc_err *err);

/* --- nodes: each daemon's row, upserted every few seconds (its heartbeat) */
typedef struct node_row {
	char name[64];
	char running[37];   /* the job it runs, "" = none */
	double heartbeat;   /* unix seconds (PostgreSQL: the database's clock) */
	double age_s;       /* seconds since the heartbeat, by the same clock */
	double started;     /* when the daemon started */
	char *devices;      /* JSON array text, owned */
} node_row;

void node_row_clear(node_row *r);
/* Upserts this node's row (store_node): its devices (JSON array text), the
 * job it runs ("" or NULL = none), its start time, the heartbeat now.
 * SQLite keeps one row: this daemon's. */
int store_node_heartbeat(store *st, const char *devices, const char *running, double started, rc_err *err);
/* Every node's row, by name (*rows malloc'd, NULL when none; clear each with
 * node_row_clear, then free). */
int store_nodes_list(store *st, node_row **rows, int *n, rc_err *err);
/* Whether several daemons may share the store (PostgreSQL). */
int store_is_shared(const store *st);

/* --- pushes to PACS (store_sqlite_push.c, store_pg.c): one row per (job, destination) of the
 * job's output.push, made with the job.  pending (waiting for the job to
 * succeed, or for its next try) -> sending -> sent, or back to pending with
 * the error and a later next_try, or send_failed after the last attempt. */
typedef enum push_state { PUSH_PENDING = 0, PUSH_SENDING, PUSH_SENT, PUSH_FAILED, PUSH_NSTATES } push_state;
/* next_try of a pending push held for an operator's confirmation (a job
 * with warnings under dicom.push_confirm_warnings): never due by itself,
 * kept across restarts; store_push_again (POST push) releases it. */
#define PUSH_HELD_TRY 1e15
#define PUSH_HELD_SQL "1e15"
const char *push_state_name(push_state s);

typedef struct push_row {
	char job[37];
	char dest[33];
	push_state state;
	int attempts, sent, total;
	double next_try, updated;
	char error[512];
} push_row;

/* The job's pushes in output.push order (*rows malloc'd; NULL when none). */
int store_push_list(store *st, const char *id, push_row **rows, int *n, rc_err *err);
/* The pending push whose job has succeeded and whose next_try has come,
 * earliest first, moved to sending.  RC_ENOTFOUND when none is due; then
 * *next_due (may be NULL) is the earliest later next_try, or 0. */
int store_push_take(store *st, double now, push_row *out, double *next_due, rc_err *err);
/* Records progress or the outcome of the push (job, dest): state, counts,
 * attempts, next_try and error ("" = none).  A push whose job was deleted
 * meanwhile is not an error. */
int store_push_update(store *st, const push_row *p, rc_err *err);
/* POST push: every push of the job that is not sending goes back to pending
 * with no attempts, due now.  *n counts them; RC_ENOTFOUND when the job
 * names no destination. */
int store_push_again(store *st, const char *id, int *n, rc_err *err);

#endif
