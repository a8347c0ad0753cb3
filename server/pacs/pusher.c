/* pusher: sends series to PACS, durably, with retries (pusher.h). */
#include "pacs/pusher.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pacs/dicom_series.h"
#include "base/log.h"
#include "pacs/push_send.h"

#define IDLE_CHECK_S 30.0   /* looks at the table at least this often */
#define PUBLISH_EVERY_S 0.5 /* progress events at most this often */
#define RETRY_MAX_S 3600.0

struct pusher {
	store *st;
	const config *cfg;
	pusher_changed_fn *job_changed;
	void *ctx;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int kicked, stop, started;
};

typedef struct attempt {
	pusher *p;
	push_row *row;
	double last_publish;
} attempt;

static int stopping(pusher *p)
{
	pthread_mutex_lock(&p->lock);
	int stop = p->stop;
	pthread_mutex_unlock(&p->lock);
	return stop;
}

/* sent < 0: only "stop?" (asked during a transfer). */
static int on_progress(void *ud, int sent)
{
	attempt *t = ud;
	if (sent < 0)
		return stopping(t->p);
	t->row->sent = sent;
	double now = store_now();
	if (now - t->last_publish >= PUBLISH_EVERY_S || sent == t->row->total) {
		store_push_update(t->p->st, t->row, NULL);
		t->p->job_changed(t->p->ctx, t->row->job);
		t->last_publish = now;
	}
	/* the last instance is in: finish the attempt even when stopping */
	return sent == t->row->total ? 0 : stopping(t->p);
}

static void run_one(pusher *p, push_row *row)
{
	rc_err err;
	rc_err_clear(&err);
	const destination *d = destinations_find(p->cfg->dests, p->cfg->ndests, row->dest);
	dicom_series s;
	int rc;
	if (!d)
		rc = rc_fail(&err, RC_ENOTFOUND, "", "destination \"%s\" is no longer configured", row->dest);
	else
		rc = dicom_series_ensure(p->st, row->job, p->cfg->uid_root, &s, &err);
	if (!rc) {
		row->total = s.instances;
		row->sent = 0;
		store_push_update(p->st, row, NULL);
		p->job_changed(p->ctx, row->job);
		rlog(LOG_P_INFO, "push_started", "id=%s destination=%s kind=%s instances=%d attempt=%d", row->job,
		     row->dest, dest_kind_name(d->kind), s.instances, row->attempts + 1);
		attempt t = { p, row, store_now() };
		rc = push_send(p->st, row->job, s.instances, d, on_progress, &t, &err);
	}
	if (rc == RC_ECANCELLED) { /* the daemon stops: not an attempt */
		row->state = PUSH_PENDING;
		row->next_try = 0;
		store_push_update(p->st, row, NULL);
		return;
	}
	row->attempts++;
	if (!rc) {
		row->state = PUSH_SENT;
		row->error[0] = '\0';
		row->next_try = 0;
		rlog(LOG_P_INFO, "push_sent", "id=%s destination=%s instances=%d", row->job, row->dest, row->total);
	} else {
		snprintf(row->error, sizeof row->error, "%s", err.msg);
		if (row->attempts >= p->cfg->push_max_attempts || rc == RC_ENOTFOUND || rc == RC_ESTATE) {
			row->state = PUSH_FAILED;
			row->next_try = 0;
		} else {
			double wait = p->cfg->push_retry_s * pow(2.0, row->attempts - 1);
			row->state = PUSH_PENDING;
			row->next_try = store_now() + (wait < RETRY_MAX_S ? wait : RETRY_MAX_S);
		}
		rlog(LOG_P_WARNING, row->state == PUSH_FAILED ? "push_failed" : "push_retry",
		     "id=%s destination=%s attempt=%d error=\"%s\"", row->job, row->dest, row->attempts, rlog_q(err.msg));
	}
	store_push_update(p->st, row, NULL);
	p->job_changed(p->ctx, row->job);
}

static void *loop(void *arg)
{
	pusher *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->lock);
		int stop = p->stop;
		p->kicked = 0;
		pthread_mutex_unlock(&p->lock);
		if (stop)
			break;
		push_row row;
		double due = 0, now = store_now();
		rc_err err;
		int rc = store_push_take(p->st, now, &row, &due, &err);
		if (!rc) {
			run_one(p, &row);
			continue;
		}
		if (rc != RC_ENOTFOUND)
			rlog(LOG_P_ERR, "store_error", "error=\"%s\" (while looking for pushes)", rlog_q(err.msg));
		double wait = due > now ? due - now : IDLE_CHECK_S;
		if (wait > IDLE_CHECK_S)
			wait = IDLE_CHECK_S;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		double end = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec + wait;
		until.tv_sec = (time_t)end;
		until.tv_nsec = (long)((end - (double)until.tv_sec) * 1e9);
		pthread_mutex_lock(&p->lock);
		while (!p->kicked && !p->stop && pthread_cond_timedwait(&p->wake, &p->lock, &until) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&p->lock);
	}
	return NULL;
}

int pusher_start(store *st, const config *cfg, pusher_changed_fn *job_changed, void *ctx, pusher **ret,
		 rc_err *err)
{
	pusher *p = calloc(1, sizeof *p);
	if (!p)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	p->st = st;
	p->cfg = cfg;
	p->job_changed = job_changed;
	p->ctx = ctx;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	if (pthread_create(&p->thread, NULL, loop, p)) {
		pusher_stop(p);
		return rc_fail(err, RC_ENOMEM, "", "cannot start the push thread");
	}
	p->started = 1;
	*ret = p;
	return 0;
}

void pusher_kick(pusher *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->kicked = 1;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
}

void pusher_stop(pusher *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	if (p->started)
		pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
