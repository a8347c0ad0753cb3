/*
 * worker_end: how a job's worker ended, as the runner saw it, and the one
 * pure function that turns that into the job's final state and error
 * (tests/unit/test_worker_end.c checks it, table-driven).
 */
#ifndef RC_WORKER_END_H
#define RC_WORKER_END_H

#include <stddef.h>

#include "store/store.h"

/* How a worker ended, as the runner saw it. */
typedef struct worker_end {
	int status;       /* wait(2) status */
	int volume_ok;    /* volume.f32 is in place */
	int cancel_asked; /* the daemon stopped it for a cancel (a user's, or one asked of another node) */
	int stop_asked;   /* the daemon stopped it for its own stop or a lost lease */
	int yield_asked;  /* the daemon stopped a stream waiting for views: other jobs are queued */
	int saw_error;    /* it wrote an error line (code and message already in *code, *msg) */
	int lines;        /* lines it wrote */
	int signal;       /* the signal it said stopped it (its error line's "signal"), 0 = none */
} worker_end;

/* The job's state after its worker ended, and for cancelled or failed the
 * error's code and message (written to code, msg; kept as the worker wrote
 * them when it reported its own error).  Pure: no store, no logging.
 * JOB_RECEIVING = a stream that paused (its views stopped coming, or it
 * yielded the runner to queued jobs while it waited for views), JOB_QUEUED
 * = back to the queue (the daemon stops).  Only a stop the daemon asked for
 * is a cancel: a worker that a signal from outside the daemon ended (kill,
 * the OOM killer, a SIGTERM that it caught and stopped on) failed. */
job_state worker_end_decide(const worker_end *w, const char *worker, char *code, size_t ncode, char *msg, size_t nmsg);

#endif
