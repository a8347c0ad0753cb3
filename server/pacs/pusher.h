/*
 * pusher: the daemon's thread that sends succeeded jobs' DICOM series to
 * their output.push destinations (docs/pacs.md).  Durable: what is to be
 * sent lives in the store's pushes table (store.h), so a push interrupted
 * by a stop or a crash is tried again at the next start.  A failed attempt
 * is retried after push_retry_s, doubling up to an hour, until
 * push_max_attempts; then the push is send_failed with the PACS's answer,
 * and the volume stays downloadable.  One push at a time.
 */
#ifndef RC_PUSHER_H
#define RC_PUSHER_H

#include "base/config.h"
#include "store/store.h"

typedef struct pusher pusher;

/* A push's row changed (progress, sent, failed): job_changed(ctx, job id)
 * publishes the job (the daemon passes app_job_changed), from the push
 * thread. */
typedef void pusher_changed_fn(void *ctx, const char *job);

/* Starts the thread over st's pushes table, sending to cfg's destinations
 * with its retry settings; st, cfg and ctx outlive the pusher. */
int pusher_start(store *st, const config *cfg, pusher_changed_fn *job_changed, void *ctx, pusher **ret,
		 rc_err *err);
/* Look at the table now (a job succeeded, or POST push). */
void pusher_kick(pusher *p);
/* Stops the thread (an attempt under way stops after its current
 * instance and is tried again at the next start) and frees p. */
void pusher_stop(pusher *p);

#endif
