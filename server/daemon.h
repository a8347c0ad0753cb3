/*
 * daemon: the daemon's life cycle: opens and starts its parts (app.h) in
 * order, stops them in the reverse order.  Shared by main_recond.c and the
 * HTTP unit tests, so the tests run the daemon as it runs.  It sits above
 * every part it starts (store, hub, metrics, auth, audit, runner, http), so
 * none of them needs to know it.
 */
#ifndef RC_DAEMON_H
#define RC_DAEMON_H

#include "jobs/app.h"

/* Opens the store (recovering it), the hub, metrics, tokens, audit log and
 * runner, then starts HTTP; *ret_port gets the bound port.  On failure
 * everything opened is closed again. */
int daemon_start(app *a, config *cfg, int *ret_port, rc_err *err);
/* Orderly stop: refuse new requests, stop the runner (its job is re-queued),
 * let requests in flight finish for up to grace_s, close everything. */
void daemon_stop(app *a, double grace_s);
/* Reloads the bearer tokens (SIGHUP). */
int daemon_reload_tokens(app *a, rc_err *err);

#endif
