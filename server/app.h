/*
 * app: the parts of the daemon that the HTTP handlers and the runner share.
 * Built once by main, read-only afterwards except through each part's own
 * functions (each is thread-safe).
 */
#ifndef RC_APP_H
#define RC_APP_H

#include <jansson.h>
#include <stdatomic.h>

#include "audit.h"
#include "auth.h"
#include "config.h"
#include "hub.h"
#include "prom.h"
#include "runner.h"
#include "store.h"

typedef struct app {
	config *cfg;
	store *st;
	hub *hub;
	metrics *met;
	auth *auth;
	audit *audit;
	runner *run;
	struct http *http;
	atomic_int stopping;
	double started;
} app;

struct http;

/* Opens the store (recovering it), the hub, metrics, tokens, audit log and
 * runner, then starts HTTP; *ret_port gets the bound port.  On failure
 * everything opened is closed again. */
int app_start(app *a, config *cfg, int *ret_port, rc_err *err);
/* Orderly stop: refuse new requests, stop the runner (its job is re-queued),
 * let requests in flight finish for up to grace_s, close everything. */
void app_stop(app *a, double grace_s);
/* Reloads the bearer tokens (SIGHUP). */
int app_reload_tokens(app *a, rc_err *err);

/* The Job resource of api/openapi.yaml for row r (live progress overlaid). */
json_t *app_job_json(app *a, const job_row *r);
/* Loads job id and publishes its state to the event streams. */
void app_job_changed(app *a, const char *id);

#endif
