/*
 * app: the parts of the daemon that the HTTP handlers and the runner share.
 * Built once by daemon_start (daemon.h), read-only afterwards except through
 * each part's own functions (each is thread-safe).
 *
 * The runner and the HTTP layer are only named here (struct runner, struct
 * http): they include app.h, so app.h does not include them, and the
 * parts that start them (daemon.c) sit above all three.  It is on the jobs
 * floor (docs/architecture.md): the floors under it (base, store, pacs,
 * live) never include it; their parts take what they use (the pusher: the
 * store, the configuration and a callback).
 */
#ifndef RC_APP_H
#define RC_APP_H

#include <jansson.h>
#include <stdatomic.h>

#include "base/audit.h"
#include "base/auth.h"
#include "base/config.h"
#include "live/hub.h"
#include "live/metrics_prom.h"
#include "store/store.h"

typedef struct app {
	config *cfg;
	store *st;
	hub *hub;
	metrics *met;
	auth *auth;
	audit *audit;
	struct runner *run;
	struct http *http;
	struct pusher *push;
	struct node_thread *node;  /* heartbeat and lease expiry (node.h) */
	atomic_int stopping;
	/* store_recover could not write at start (a full disk): the runner
	 * tries again before it takes a job (runner.c) */
	atomic_int recover_pending;
	double started;
	/* this node's own state (device models, matrices cache, audit log):
	 * the spool with SQLite, SPOOL/nodes/NAME with PostgreSQL */
	char state_dir[4200];
} app;

/* A unix time as the API's date-time (UTC, milliseconds); null for t <= 0. */
json_t *app_ts_json(double t);
/* The Job resource of api/openapi.yaml for row r (live progress overlaid). */
json_t *app_job_json(app *a, const job_row *r);
/* Adds "push" (the pushes to PACS) and "delivery" to the Job j (app_push.c). */
void app_job_add_push(app *a, const job_row *r, json_t *j);
/* Before a job that succeeded with warnings (its worker's report, JSON
 * text) is recorded: under dicom.push_confirm_warnings its pending pushes
 * are held (PUSH_HELD_TRY) until POST /v1/jobs/{id}/push confirms them;
 * held before the job is succeeded, so the pusher never sees them due.
 * A run without warnings releases what an earlier run of the job held
 * (one whose outcome was not recorded: a lost lease, a restart). */
void app_push_hold(app *a, const char *id, const char *report);
/* Adds "dicom" (patient and study fields), "water_mu_per_mm" and
 * "dicom_series" (once written) to the Job j of GET /v1/jobs/{id}. */
void app_job_add_dicom(app *a, const char *id, json_t *j);
/* Removes the patient fields from the Job j (label "", no dicom) and sets
 * phi_redacted (a token without phi, docs/server.md). */
void app_job_redact(json_t *j);
/* Loads job id and publishes its state to the event streams. */
void app_job_changed(app *a, const char *id);

#endif
