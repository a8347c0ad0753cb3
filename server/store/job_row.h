/*
 * job_row: a job's row as the store reads it, its states and their names:
 * the vocabulary the store's calls (store.h) and its state machine
 * (store_machine.h) share, below both.
 */
#ifndef RC_JOB_ROW_H
#define RC_JOB_ROW_H

#include <stddef.h>
#include <stdint.h>

#include "util/rc_error.h"
#include "spec.h"

typedef enum job_state {
	JOB_CREATED = 0,
	JOB_RECEIVING,
	JOB_QUEUED,
	JOB_RUNNING,
	JOB_SUCCEEDED,
	JOB_FAILED,
	JOB_CANCELLED,
	JOB_NSTATES
} job_state;

#define JOB_BIT(s) (1u << (s))
#define JOB_UPLOADABLE (JOB_BIT(JOB_CREATED) | JOB_BIT(JOB_RECEIVING))
/* A streaming job also takes views while it waits in the queue and runs. */
#define JOB_STREAM_UPLOADABLE (JOB_UPLOADABLE | JOB_BIT(JOB_QUEUED) | JOB_BIT(JOB_RUNNING))
#define JOB_FINAL (JOB_BIT(JOB_SUCCEEDED) | JOB_BIT(JOB_FAILED) | JOB_BIT(JOB_CANCELLED))

const char *job_state_name(job_state s);
int job_state_parse(const char *s, job_state *ret);

typedef struct job_row {
	char id[37];
	job_state state;
	char label[4 * SPEC_LABEL_MAX + 1];
	int priority, autostart, cancel_requested;
	int stream;      /* the spec's execution.stream: STREAM_OFF, STREAM_AUTO, STREAM_ON */
	int streaming;   /* queued before its last view: it runs as views arrive */
	double created, updated, queued, started, finished; /* unix seconds; 0 = not yet */
	int views_expected, views_present;
	int nu, rows;
	uint64_t view_stride, row_stride;   /* floats */
	uint64_t view_bytes, proj_bytes, vol_bytes;
	char node[64];       /* the node that runs or ran it ("" = none yet) */
	double lease_until;  /* running under a lease until then; 0 = no lease */
	int attempts;        /* leases that expired while it ran */
	char engine[16];     /* the engine a node needs to take it ("" = any node; store_take_next_on) */
	long long views_cleared; /* views cleared so far (bits that went 1 -> 0): a streaming job's node
				  * polling the bitmap knows when it missed a view cleared and set again */
	char *progress;      /* live progress (JSON text) written by the node running it, owned; NULL = none */
	char *lease_log;     /* each expired lease ("node N lost its lease at T UTC; "), owned; NULL = none */
	char error_code[32];
	char error_message[512];
	char *summary;   /* JSON text, owned */
	char *report;    /* JSON text from the worker (plan, engine, ...), owned; NULL = none */
	uint8_t *present;/* bitmap of views_expected bits, owned; only with store_get(..., 1) */
	char owner[64];  /* the token name that created it; "-" without tokens; "" = created before
			  * owners were kept (schema 5 / 4): nobody's, only admin acts on it */
} job_row;

void job_row_clear(job_row *r);
/* Whether the job takes projection uploads in its state: created and
 * receiving, and a streaming job while it is queued or running and still
 * misses a view. */
int job_row_uploadable(const job_row *r);
/* The RC_ESTATE (and message) of an upload to a job that takes none. */
int job_row_upload_refused(const job_row *r, rc_err *err);

#endif
