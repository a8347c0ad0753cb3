/*
 * runner_lease: a shared store's running job (runner_impl.h, docs/server.md
 * "Clusters"): its lease renewed, its live progress written for the other
 * nodes, a stream's bitmap read.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "jobs/runner_impl.h"
#include "util/rc_clock.h"

/* The part of the lease a node keeps its worker after its last renewal
 * when the store cannot be reached. */
#define LEASE_FENCE 0.8

/* A shared store, while the worker runs: the lease renewed every lease_s /
 * 3 (a renewal also reads a cancel asked of another node), the live
 * progress written for the other nodes, a streaming job's bitmap read.  A
 * renewal the store cannot make now is tried again each second; one refused
 * (RC_ESTATE, RC_ENOTFOUND) means another node has the job. */
int runner_lease_tick(runner *r, const char *id, struct lease *ls)
{
	app *a = r->a;
	double now = rc_now_s();
	rc_err err;
	/* Cut off from the store (a network cut, a hung server): by our own
	 * clock the lease ends lease_s after the last renewal began, and
	 * another node may take the job then.  Stop before it can, allowing
	 * for a call that blocks as long as the store lets it. */
	double L = a->cfg->lease_s, fence = fmin(LEASE_FENCE * L, L - store_call_bound(a->st) - 0.5);
	if (ls->failing && now - ls->held_at > fence) {
		rlog(LOG_P_WARNING, "lease_lost", "id=%s node=%s error=\"no renewal for %.1f s: the lease may pass to "
		     "another node\"", id, store_node(a->st), now - ls->held_at);
		return LEASE_LOST;
	}
	if (now >= ls->renew_at) {
		int cancel = 0, rc = store_lease_renew(a->st, id, store_node(a->st), a->cfg->lease_s, &cancel, &err);
		if (rc == RC_ESTATE || rc == RC_ENOTFOUND) {
			rlog(LOG_P_WARNING, "lease_lost", "id=%s node=%s error=\"%s\"", id, store_node(a->st), rlog_q(err.msg));
			return LEASE_LOST;
		}
		if (!rc)
			ls->held_at = now;
		if (rc && rc_now_s() - ls->held_at > fence) {
			rlog(LOG_P_WARNING, "lease_lost", "id=%s node=%s error=\"no renewal for %.1f s: the lease may pass "
			     "to another node\"", id, store_node(a->st), rc_now_s() - ls->held_at);
			return LEASE_LOST;
		}
		if (rc && !ls->failing++)
			rlog(LOG_P_ERR, "lease_renew_failed", "id=%s node=%s error=\"%s\" (retrying every second)", id,
			     store_node(a->st), rlog_q(err.msg));
		else if (!rc && ls->failing) {
			rlog(LOG_P_INFO, "lease_renewed", "id=%s node=%s tries=%d", id, store_node(a->st), ls->failing + 1);
			ls->failing = 0;
		}
		ls->renew_at = now + (rc ? fmin(1.0, 0.1 * L) : L / 3);
		if (!rc && cancel)
			return LEASE_CANCEL;
	}
	if (now >= ls->prog_at) {
		char *text = NULL;
		pthread_mutex_lock(&r->lock);
		unsigned seq = r->prog_seq;
		if (seq != ls->prog_sent && r->prog_json)
			text = strdup(r->prog_json);
		pthread_mutex_unlock(&r->lock);
		if (text && store_progress(a->st, id, text, NULL) == 0)
			ls->prog_sent = seq;
		free(text);
		ls->prog_at = now + PROGRESS_EVERY_S;
	}
	if (now >= ls->stream_at) {
		runner_stamp_from_store(r, id);
		ls->stream_at = now + STREAM_POLL_MS / 1000.0;
	}
	return LEASE_HELD;
}
