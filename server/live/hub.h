/*
 * hub: the event bus between whoever changes a job (HTTP handlers, the
 * runner) and the server-sent-event streams that watch it.
 *
 * Publishers append (job id, event name, JSON data) to a ring of the last
 * HUB_RING events with a global sequence number and wake every waiter.  A
 * reader keeps the last sequence it saw and asks for the next event of its
 * job; if the ring has moved past it, hub_next says so (RC_ETOOBIG) and the
 * reader re-sends the whole job state, which is always a correct catch-up.
 */
#ifndef RC_HUB_H
#define RC_HUB_H

#include <stddef.h>

#include "util/rc_error.h"

#define HUB_RING 1024

typedef struct hub hub;

int hub_new(hub **ret);
void hub_free(hub *h);

void hub_publish(hub *h, const char *id, const char *event, const char *data);
/* Wakes every waiter and makes hub_next return RC_ECANCELLED from now on. */
void hub_shutdown(hub *h);
/* Sequence number of the newest event (start point for a new reader). */
unsigned long long hub_head(hub *h);

/* Waits up to timeout_ms for an event of job id after *seq.  Returns 0 with
 * the event copied (event name into ev, malloc'd data into *data) and *seq
 * advanced; RC_ENOTFOUND on timeout; RC_ETOOBIG when events were lost;
 * RC_ECANCELLED after hub_shutdown. */
int hub_next(hub *h, const char *id, unsigned long long *seq, int timeout_ms,
	     char ev[32], char **data);

#endif
