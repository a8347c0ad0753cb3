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

#include "app.h"

typedef struct pusher pusher;

int pusher_start(app *a, pusher **ret, rc_err *err);
/* Look at the table now (a job succeeded, or POST push). */
void pusher_kick(pusher *p);
/* Stops the thread (an attempt under way stops after its current
 * instance and is tried again at the next start) and frees p. */
void pusher_stop(pusher *p);

#endif
