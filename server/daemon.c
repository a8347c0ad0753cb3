/*
 * daemon: starting and stopping the daemon's parts in order (daemon.h).
 * main and the HTTP unit tests share this, so the tests run the daemon as it
 * runs.
 */
#include "daemon.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "http/http.h"
#include "base/log.h"
#include "jobs/node.h"
#include "pacs/pusher.h"
#include "jobs/runner.h"
#include "projectors/matrix_cache.h"

static void close_parts(app *a)
{
	node_stop(a->node);
	a->node = NULL;
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

/* The cached system matrices under matrix_cache_bytes from the start (a
 * lowered bound, crashed writers' temporary files): jobs keep it after
 * each write (projectors/matrix_cache.h). */
static void prune_matrices(const char *state, uint64_t bound)
{
	char dir[4200];
	int64_t left = 0;
	snprintf(dir, sizeof dir, "%.4000s/matrices", state);
	if (rc_mcache_prune(dir, bound > INT64_MAX ? INT64_MAX : (int64_t)bound, 0, &left))
		rlog(LOG_P_WARNING, "matrix_cache_unreadable", "dir=%s error=\"%s\"", dir, strerror(errno));
	else
		rlog(LOG_P_INFO, "matrix_cache", "dir=%s bytes=%lld bound=%llu", dir, (long long)left,
		     (unsigned long long)bound);
}

/* The node's own files: beside the jobs with SQLite (one daemon, as before
 * clusters), SPOOL/nodes/NAME with PostgreSQL, so that nodes with other
 * devices keep their models and caches apart on the shared spool. */
static int state_dir(app *a, rc_err *err)
{
	const char *spool = store_dir(a->st);
	if (!store_is_shared(a->st)) {
		snprintf(a->state_dir, sizeof a->state_dir, "%s", spool);
		return 0;
	}
	char nodes[4200];
	snprintf(nodes, sizeof nodes, "%.4000s/nodes", spool);
	snprintf(a->state_dir, sizeof a->state_dir, "%.4000s/nodes/%.64s", spool, store_node(a->st));
	if ((mkdir(nodes, 0750) && errno != EEXIST) || (mkdir(a->state_dir, 0750) && errno != EEXIST))
		return rc_fail(err, RC_EIO, "spool", "cannot create %s: %s", a->state_dir, strerror(errno));
	return 0;
}

/* The pusher's view of a push's progress: the job's event (app.h). */
static void push_changed(void *ctx, const char *id)
{
	app_job_changed(ctx, id);
}

int daemon_start(app *a, config *cfg, int *ret_port, rc_err *err)
{
	memset(a, 0, sizeof *a);
	a->cfg = cfg;
	a->started = store_now();
	int requeued = 0, orphans = 0, rc;
	char masked[1024];
	config_mask_uri(cfg->store, masked, sizeof masked);
	if ((rc = store_open2(cfg->store, cfg->spool[0] ? cfg->spool : NULL, cfg->node, &a->st, err)))
		goto fail;
	if ((rc = store_recover(a->st, &requeued, &orphans, err)) == RC_ENOSPACE || rc == RC_EIO) {
		/* A full store disk must not keep the daemon down: it serves reads
		 * and answers 507 to writes, and the runner recovers (and only
		 * then takes jobs) once the store takes writes again. */
		rlog(LOG_P_ERR, "recover_failed", "error=\"%s\" (serving; the queue waits, recovery retried every second)",
		     err->msg);
		atomic_store(&a->recover_pending, 1);
		rc = 0;
	}
	if (rc || (rc = state_dir(a, err)))
		goto fail;
	if (!cfg->audit_log[0])
		snprintf(cfg->audit_log, sizeof cfg->audit_log, "%.1000s/audit.log", a->state_dir);
	prune_matrices(a->state_dir, cfg->matrix_cache_bytes);
	rlog(LOG_P_INFO, "store_open", "store=%s backend=%s spool=%s node=%s state_dir=%s requeued=%d orphans_removed=%d",
	     masked, store_backend_name(a->st), store_dir(a->st), store_node(a->st), a->state_dir, requeued, orphans);
	if (hub_new(&a->hub) || metrics_new(&a->met) || auth_new(&a->auth)) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory");
		goto fail;
	}
	if ((rc = auth_load(a->auth, cfg->tokens, err)))
		goto fail;
	if (cfg->audit_log[0] && audit_open(cfg->audit_log, &a->audit))
		rlog(LOG_P_WARNING, "audit_unavailable", "path=%s error=\"%s\"", cfg->audit_log, strerror(errno));
	if ((rc = runner_new(a, app_job_changed, &a->run, err)) || (rc = runner_start(a->run, err)) ||
	    (rc = pusher_start(a->st, a->cfg, push_changed, a, &a->push, err)) || (rc = node_start(a, &a->node, err)))
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
	/* Start-up refuses a network listener without tokens; a reload must not
	 * reach that state by another road, so it never goes from some tokens to
	 * none (a restart without tokens is the one way, and loopback only). */
	if (!rc && json_array_size(t) == 0 && auth_count(a->auth) > 0)
		rc = rc_fail(err, RC_EINVAL, "tokens",
			     "the reloaded tokens list is empty; a reload never switches authentication off "
			     "(restart recond without tokens to do that, on a loopback address only)");
	if (!rc)
		rc = auth_load(a->auth, t, err);
	json_decref(t);
	return rc;
}
