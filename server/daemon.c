/*
 * daemon: starting and stopping the daemon's parts in order (daemon.h).
 * main and the HTTP unit tests share this, so the tests run the daemon as it
 * runs.
 */
#include "daemon.h"

#include <errno.h>
#include <string.h>

#include "http.h"
#include "log.h"
#include "pusher.h"
#include "runner.h"

static void close_parts(app *a)
{
	pusher_stop(a->push);
	a->push = NULL;
	runner_stop(a->run);
	runner_free(a->run);
	audit_close(a->audit);
	auth_free(a->auth);
	metrics_free(a->met);
	hub_free(a->hub);
	store_close(a->st);
	a->run = NULL;
	a->audit = NULL;
	a->auth = NULL;
	a->met = NULL;
	a->hub = NULL;
	a->st = NULL;
}

int daemon_start(app *a, config *cfg, int *ret_port, rc_err *err)
{
	memset(a, 0, sizeof *a);
	a->cfg = cfg;
	a->started = store_now();
	int requeued = 0, orphans = 0, rc;
	if ((rc = store_open(cfg->store, &a->st, err)) || (rc = store_recover(a->st, &requeued, &orphans, err)))
		goto fail;
	rlog(LOG_P_INFO, "store_open", "store=%s requeued=%d orphans_removed=%d", cfg->store, requeued, orphans);
	if (hub_new(&a->hub) || metrics_new(&a->met) || auth_new(&a->auth)) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
		goto fail;
	}
	if ((rc = auth_load(a->auth, cfg->tokens, err)))
		goto fail;
	if (cfg->audit_log[0] && audit_open(cfg->audit_log, &a->audit))
		rlog(LOG_P_WARNING, "audit_unavailable", "path=%s error=\"%s\"", cfg->audit_log, strerror(errno));
	if ((rc = runner_new(a, &a->run, err)) || (rc = runner_start(a->run, err)) ||
	    (rc = pusher_start(a, &a->push, err)))
		goto fail;
	if ((rc = http_start(a, &a->http, ret_port, err)))
		goto fail;
	return 0;
fail:
	close_parts(a);
	return rc;
}

void daemon_stop(app *a, double grace_s)
{
	atomic_store(&a->stopping, 1);
	if (a->hub)
		hub_shutdown(a->hub);
	runner_stop(a->run);
	http_stop(a->http, grace_s); /* before the pusher goes: a handler may kick it */
	a->http = NULL;
	close_parts(a);
}

int daemon_reload_tokens(app *a, rc_err *err)
{
	json_t *t = NULL;
	int rc = config_reload_tokens(a->cfg, &t, err);
	if (!rc)
		rc = auth_load(a->auth, t, err);
	json_decref(t);
	return rc;
}
