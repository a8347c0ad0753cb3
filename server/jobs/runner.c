/*
 * runner: the queue's consumer (runner.h).
 *
 * One thread.  Loop: take the next queued job from the store (it becomes
 * running in the same transaction), fork + exec the worker with the job
 * directory and a pipe on fd 3, read its JSON lines while polling for cancel
 * and shutdown, reap it, and record the outcome.  Everything the HTTP
 * threads read (the live progress, the running id) is behind r->lock.
 */
#include "jobs/runner.h"
#include "pacs/pusher.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "jobs/app.h"
#include "jobs/supervisor.h"
#include "jobs/worker_end.h"
#include "base/log.h"
#include "worker_proto.h"
#include "util/rc_clock.h"

#define CANCEL_GRACE_S 10.0   /* SIGTERM -> SIGKILL: one iteration of a large job fits */
#define EXPIRE_EVERY_S 60.0
#define PROGRESS_EVERY_S 0.5  /* a shared store gets the live progress this often at most */
#define STREAM_POLL_MS 50     /* a shared store's streaming job: the bitmap is read this often */
/* A stream whose worker has back-projected every view it has and got no new
 * one for this long gives the runner to the queued jobs (docs/server.md):
 * long enough for a scanner's steady pace (views come every few ms to
 * 100 ms), short against stream_idle_s (300 s) that held the queue before. */
#define STREAM_YIELD_S 1.0

struct runner {
	app *a;
	runner_changed_fn *job_changed;
	pthread_t thread;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop, kicked;
	char current[37];        /* running job, "" when idle */
	char cancel_id[37];      /* cancel asked for this id */
	run_progress prog;
	double prog_wall;        /* monotonic time of the last progress line */
	atomic_llong heartbeat;  /* monotonic ms of the last loop */
	json_t *devices;         /* from the probe; under lock */
	int probed;
	pthread_t probe_thread;
	int probe_started;
	pid_t probe_pid;         /* under lock; 0 when none */
	/* the running job's shared memory (worker_proto.h), under lock */
	int live_fd;             /* its live volume; -1 when none */
	unsigned long live_gen;  /* preview lines seen */
	_Atomic uint32_t *stamp; /* streaming: one stamp per view; NULL when not streaming */
	uint8_t *stamped_first;  /* views share_memory stamped, not yet touched by runner_views */
	int nstamp;
	uint32_t next_stamp;     /* the last even stamp handed out */
	double last_view_at;     /* monotonic time a view was last stamped (streaming) */
	/* shared store: what the other nodes see of the running job */
	char *prog_json;         /* the last progress event, under lock; NULL = none */
	unsigned prog_seq;       /* bumped with prog_json */
	uint8_t *seen;           /* streaming: the bitmap at the last look, under lock */
	long long cleared_seen;  /* the row's views_cleared then */
};

int runner_new(app *a, runner_changed_fn *job_changed, runner **ret, rc_err *err)
{
	runner *r = calloc(1, sizeof *r);
	if (!r)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	r->a = a;
	r->job_changed = job_changed;
	r->live_fd = -1;
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_store(&r->heartbeat, (long long)(rc_now_s() * 1000));
	*ret = r;
	return 0;
}

void runner_free(runner *r)
{
	if (!r)
		return;
	json_decref(r->devices);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void runner_kick(runner *r)
{
	pthread_mutex_lock(&r->lock);
	r->kicked = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

void runner_cancel(runner *r, const char *id)
{
	pthread_mutex_lock(&r->lock);
	snprintf(r->cancel_id, sizeof r->cancel_id, "%s", id);
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

int runner_progress(runner *r, const char *id, run_progress *out)
{
	pthread_mutex_lock(&r->lock);
	int rc = strcmp(r->current, id) ? RC_ENOTFOUND : 0;
	if (!rc)
		*out = r->prog;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

int runner_healthy(runner *r)
{
	long long hb = atomic_load(&r->heartbeat);
	return rc_now_s() * 1000 - (double)hb < 10000;
}

void runner_current(runner *r, char id[37])
{
	pthread_mutex_lock(&r->lock);
	snprintf(id, 37, "%s", r->current);
	pthread_mutex_unlock(&r->lock);
}

int runner_busy(runner *r)
{
	pthread_mutex_lock(&r->lock);
	int b = r->current[0] != '\0';
	pthread_mutex_unlock(&r->lock);
	return b;
}

struct outcome {
	char err_code[32];
	char err_msg[512];
	char *report;        /* JSON text of the report line */
	int saw_error;
	int lines;
	int signal;          /* the signal the error line says stopped the worker */
};

static void handle_line(runner *r, const char *id, char *line, struct outcome *oc, double *last_elapsed)
{
	json_t *j = json_loads(line, 0, NULL);
	if (!j)
		return;
	oc->lines++;
	const char *type = json_string_value(json_object_get(j, "type"));
	if (type && !strcmp(type, "progress")) {
		run_progress p;
		p.iteration = (int)json_integer_value(json_object_get(j, "iteration"));
		p.of = (int)json_integer_value(json_object_get(j, "of"));
		json_t *res = json_object_get(j, "residual");
		p.residual = json_is_number(res) ? json_number_value(res) : NAN;
		p.elapsed_s = json_number_value(json_object_get(j, "elapsed_s"));
		p.eta_s = p.iteration > 0 && p.of >= p.iteration ? p.elapsed_s / p.iteration * (p.of - p.iteration) : NAN;
		const char *stopped = json_string_value(json_object_get(j, "stopped"));
		snprintf(p.stopped, sizeof p.stopped, "%s", stopped ? stopped : "");
		if (stopped)
			p.eta_s = 0.0;
		p.views_done = (int)json_integer_value(json_object_get(j, "views_done"));
		p.views_expected = (int)json_integer_value(json_object_get(j, "views_expected"));
		if (p.views_expected)
			p.eta_s = NAN; /* the scanner sets the pace */
		metrics_iteration(r->a->met, p.elapsed_s - *last_elapsed);
		*last_elapsed = p.elapsed_s;
		pthread_mutex_lock(&r->lock);
		r->prog = p;
		r->prog_wall = rc_now_s();
		pthread_mutex_unlock(&r->lock);
		json_t *ev = json_pack("{sisisosfso}", "iteration", p.iteration, "of", p.of,
				       "residual", isfinite(p.residual) ? json_real(p.residual) : json_null(),
				       "fraction", p.of ? (double)p.iteration / p.of : 0.0,
				       "eta_s", isfinite(p.eta_s) ? json_real(p.eta_s) : json_null());
		json_object_set_new(ev, "elapsed_s", json_real(p.elapsed_s));
		if (p.views_expected) {
			json_object_set_new(ev, "views_done", json_integer(p.views_done));
			json_object_set_new(ev, "views_expected", json_integer(p.views_expected));
			json_object_set_new(ev, "fraction", json_real((double)p.views_done / p.views_expected));
		}
		if (p.stopped[0])
			json_object_set_new(ev, "stopped", json_string(p.stopped));
		char *s = json_dumps(ev, JSON_COMPACT);
		if (s)
			hub_publish(r->a->hub, id, "progress", s);
		pthread_mutex_lock(&r->lock);
		free(r->prog_json);
		r->prog_json = s; /* for the other nodes (lease_tick) */
		r->prog_seq++;
		pthread_mutex_unlock(&r->lock);
		json_decref(ev);
	} else if (type && !strcmp(type, "preview")) {
		pthread_mutex_lock(&r->lock);
		unsigned long gen = ++r->live_gen;
		pthread_mutex_unlock(&r->lock);
		json_object_del(j, "type");
		json_object_set_new(j, "generation", json_integer((json_int_t)gen));
		char *s = json_dumps(j, JSON_COMPACT);
		if (s)
			hub_publish(r->a->hub, id, "preview", s);
		free(s);
	} else if (type && !strcmp(type, "report")) {
		json_object_del(j, "type");
		free(oc->report);
		oc->report = json_dumps(j, JSON_COMPACT);
	} else if (type && !strcmp(type, "error")) {
		oc->saw_error = 1;
		oc->signal = (int)json_integer_value(json_object_get(j, "signal"));
		const char *c = json_string_value(json_object_get(j, "code"));
		const char *f = json_string_value(json_object_get(j, "field"));
		const char *m = json_string_value(json_object_get(j, "message"));
		snprintf(oc->err_code, sizeof oc->err_code, "%s", c ? c : "internal_error");
		if (f && *f && m && !strstr(m, f))
			snprintf(oc->err_msg, sizeof oc->err_msg, "%s: %s", f, m);
		else
			snprintf(oc->err_msg, sizeof oc->err_msg, "%s", m ? m : "the worker failed");
	}
	json_decref(j);
}

/* Device busy time: the job's wall time for every device of its plan (the
 * plan runs all of them for the whole job); "cpu" when the worker sent none. */
static void busy_by_plan(app *a, const char *report, double secs)
{
	json_t *r = report ? json_loads(report, 0, NULL) : NULL;
	json_t *plan = r ? json_object_get(r, "plan") : NULL;
	size_t i, n = json_array_size(plan);
	for (i = 0; i < n; i++) {
		const char *name = json_string_value(json_object_get(json_array_get(plan, i), "name"));
		if (name)
			metrics_device_busy(a->met, name, secs);
	}
	if (!n)
		metrics_device_busy(a->met, "cpu", secs);
	json_decref(r);
}

/* Starts the job's worker (supervisor.h) on dir: its progress pipe is
 * fd 3; live_fd and stamp_fd (-1: none) are the memfds it gets as fds 4 and
 * 5 (worker_proto.h), both >= 10 (share_memory). */
static int spawn(runner *r, const char *dir, int live_fd, int stamp_fd, supervised *w, rc_err *err)
{
	const config *c = r->a->cfg;
	char threads[16], idle[32];
	snprintf(threads, sizeof threads, "%d", c->worker_threads);
	snprintf(idle, sizeof idle, "%.3f", c->stream_idle_s);
	/* --state-dir: fitted device models and cached system matrices live
	 * in the node's state directory, shared by its jobs */
	char *argv[16] = { (char *)c->worker, "--progress-fd", "3", "--threads", threads,
			   "--state-dir", r->a->state_dir };
	int n = 7;
	if (live_fd >= 0) {
		argv[n++] = "--live-fd";
		argv[n++] = "4";
	}
	if (stamp_fd >= 0) {
		argv[n++] = "--stream-fd";
		argv[n++] = "5";
		argv[n++] = "--stream-idle";
		argv[n++] = idle;
	}
	argv[n++] = (char *)dir;
	argv[n] = NULL;
	supervisor_spec spec = { .prog = c->worker, .argv = argv, .out_fd = 3,
				 .fds = { { live_fd, 4 }, { stamp_fd, 5 } }, .nfds = 2, .grace_s = CANCEL_GRACE_S };
	return supervisor_spawn(w, &spec, err);
}

/* The report keeps the last progress the job reached (the worker's report
 * has it; a worker that died before reporting did not send one) and the
 * worker's peak resident memory. */
static void with_last_progress(runner *r, struct outcome *oc, const struct rusage *ru)
{
	json_t *rep = oc->report ? json_loads(oc->report, 0, NULL) : NULL;
	if (!rep)
		rep = json_object();
	/* the worker's peak resident memory (Linux: ru_maxrss in KiB) */
	if (ru && ru->ru_maxrss > 0)
		json_object_set_new(rep, "peak_rss_mb", json_real(ru->ru_maxrss / 1024.0));
	if (!json_object_get(rep, "progress")) {
		pthread_mutex_lock(&r->lock);
		run_progress p = r->prog;
		pthread_mutex_unlock(&r->lock);
		json_object_set_new(rep, "progress", json_pack("{sisisoso}", "iteration", p.iteration, "of", p.of,
							      "residual", isfinite(p.residual) ? json_real(p.residual) : json_null(),
							      "elapsed_s", json_real(p.elapsed_s)));
	}
	free(oc->report);
	oc->report = json_dumps(rep, JSON_COMPACT);
	json_decref(rep);
}

#define FINISH_RETRY_S 1.0

/* Records the outcome; while the store cannot commit it (a full disk, an
 * I/O error) it tries again every FINISH_RETRY_S, so that the job does not
 * stay "running" with no worker behind it.  A daemon that stops meanwhile
 * leaves the row running: the next start re-queues it (store_recover). */
static int record_outcome(runner *r, const char *id, job_state final, const struct outcome *oc)
{
	rc_err err;
	for (int tries = 0;; tries++) {
		if (store_finish(r->a->st, id, final, oc->err_code, oc->err_msg, oc->report, &err) == 0) {
			if (tries)
				rlog(LOG_P_INFO, "store_recovered", "id=%s tries=%d", id, tries + 1);
			return 1;
		}
		if (err.code == RC_ESTATE) { /* not ours (any more): nothing to record */
			rlog(LOG_P_ERR, "store_error", "id=%s error=\"%s\"", id, rlog_q(err.msg));
			return 0;
		}
		if (!tries)
			rlog(LOG_P_ERR, "store_error", "id=%s error=\"%s\" (retrying every %.0f s)", id, rlog_q(err.msg),
			     FINISH_RETRY_S);
		pthread_mutex_lock(&r->lock);
		int stop = r->stop;
		pthread_mutex_unlock(&r->lock);
		if (stop)
			return 0;
		atomic_store(&r->heartbeat, (long long)(rc_now_s() * 1000));
		usleep((useconds_t)(FINISH_RETRY_S * 1e6));
	}
}

/* The job's shared memory for its worker (worker_proto.h): the live
 * volume, and for a streaming job that still misses views the stamps, with
 * every present view stamped.  The stamps are published before the store's
 * bitmap is read, so a view stored meanwhile is stamped by runner_views or
 * here, never by neither (and not by both: stamped_first).  Returns 0, 1 for
 * a streaming job whose stamps could not be made (it must not run: its
 * missing views would be zeros), or -1 (it runs without a live volume). */
static int share_memory(runner *r, const char *id, int *live_fd, int *stamp_fd)
{
	job_row row;
	rc_err err;
	*live_fd = *stamp_fd = -1;
	if (store_get(r->a->st, id, 0, &row, &err))
		return -1;
	int fd = memfd_create("recond-live", MFD_CLOEXEC), rc = -1;
	if (fd >= 0 && ftruncate(fd, (off_t)row.vol_bytes) == 0)
		*live_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (fd >= 0)
		close(fd);
	if (*live_fd < 0)
		goto out;
	pthread_mutex_lock(&r->lock);
	r->live_fd = *live_fd;
	r->live_gen = 0;
	pthread_mutex_unlock(&r->lock);
	rc = 0;
	if (!row.streaming || row.views_present >= row.views_expected)
		goto out;
	size_t bytes = sizeof(uint32_t) * (size_t)row.views_expected;
	fd = memfd_create("recond-views", MFD_CLOEXEC);
	if (fd >= 0 && ftruncate(fd, (off_t)bytes) == 0)
		*stamp_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (fd >= 0)
		close(fd);
	void *map = *stamp_fd >= 0 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *stamp_fd, 0) : MAP_FAILED;
	uint8_t *first = calloc((size_t)row.views_expected, 1);
	if (map == MAP_FAILED || !first) {
		if (map != MAP_FAILED)
			munmap(map, bytes);
		if (*stamp_fd >= 0)
			close(*stamp_fd);
		*stamp_fd = -1;
		free(first);
		rc = 1;
		goto out;
	}
	pthread_mutex_lock(&r->lock);
	r->stamp = map;
	r->stamped_first = first;
	r->nstamp = row.views_expected;
	r->last_view_at = rc_now_s();
	pthread_mutex_unlock(&r->lock);
	job_row_clear(&row);
	if (store_get(r->a->st, id, 1, &row, &err) == 0) {
		pthread_mutex_lock(&r->lock);
		for (int k = 0; k < r->nstamp; k++)
			if ((row.present[k >> 3] >> (k & 7)) & 1 && !atomic_load(&r->stamp[k])) {
				atomic_store(&r->stamp[k], r->next_stamp += 2);
				r->stamped_first[k] = 1;
			}
		/* a shared store: views stored through other nodes are seen by
		 * polling the bitmap from here on (stamp_from_store) */
		if (store_is_shared(r->a->st) && (r->seen = malloc(((size_t)r->nstamp + 7) / 8)))
			memcpy(r->seen, row.present, ((size_t)r->nstamp + 7) / 8);
		r->cleared_seen = row.views_cleared;
		pthread_mutex_unlock(&r->lock);
	}
out:
	job_row_clear(&row);
	return rc;
}

/* A paused stream whose last views arrived between the worker giving up and
 * the pause (they found the job running, so they did not queue it): queue it
 * now, as its last view would have. */
static void requeue_if_complete(runner *r, const char *id)
{
	job_row row;
	rc_err err;
	int changed = 0;
	if (store_get(r->a->st, id, 0, &row, &err))
		return;
	if (row.state == JOB_RECEIVING && row.views_present == row.views_expected &&
	    (row.autostart || row.stream == STREAM_ON) && store_start(r->a->st, id, &changed, &err) == 0 && changed)
		rlog(LOG_P_INFO, "job_queued", "id=%s reason=\"every view arrived as the stream paused\"", id);
	job_row_clear(&row); /* run_job returns to the loop, which takes it next */
}

static void unshare_memory(runner *r, int stamp_fd)
{
	pthread_mutex_lock(&r->lock);
	if (r->live_fd >= 0)
		close(r->live_fd);
	r->live_fd = -1;
	r->live_gen = 0;
	if (r->stamp)
		munmap((void *)r->stamp, sizeof(uint32_t) * (size_t)r->nstamp);
	r->stamp = NULL;
	free(r->stamped_first);
	r->stamped_first = NULL;
	r->nstamp = 0;
	free(r->seen);
	r->seen = NULL;
	free(r->prog_json);
	r->prog_json = NULL;
	pthread_mutex_unlock(&r->lock);
	if (stamp_fd >= 0)
		close(stamp_fd);
}

int runner_live_volume(runner *r, const char *id, int *fd, unsigned long *generation)
{
	int rc = RC_ENOTFOUND;
	*fd = -1;
	*generation = 0;
	pthread_mutex_lock(&r->lock);
	if (!strcmp(r->current, id) && r->live_fd >= 0) {
		*fd = fcntl(r->live_fd, F_DUPFD_CLOEXEC, 0);
		*generation = r->live_gen;
		rc = *fd >= 0 ? 0 : RC_EIO;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void runner_views(runner *r, const char *id, int first, int last, int set)
{
	pthread_mutex_lock(&r->lock);
	if (r->stamp && !strcmp(r->current, id))
		for (int k = first < 0 ? 0 : first; k < last && k < r->nstamp; k++) {
			uint32_t s = atomic_load(&r->stamp[k]);
			/* An upload clears its views before it writes them; a set
			 * with no clear since share_memory stamped the view is that
			 * stamp's own commit: stamping it again would look like a
			 * view stored twice. */
			int own = r->stamped_first[k];
			r->stamped_first[k] = 0;
			if (set && !own) {
				atomic_store(&r->stamp[k], r->next_stamp += 2);
				r->last_view_at = rc_now_s();
			}
			else if (!set && s && !(s & 1))
				atomic_store(&r->stamp[k], s | 1);
		}
	pthread_mutex_unlock(&r->lock);
}

/* A shared store's streaming job: views stored or cleared through any node
 * show in the row's bitmap; each change since the last look is stamped as
 * runner_views stamps a local one.  A view cleared and stored again between
 * two looks leaves the bitmap as it was: the row's count of cleared views
 * tells, and then every present view is stamped again, so that a worker
 * that used one finishes from the whole stack (stream.fallback). */
static void stamp_from_store(runner *r, const char *id)
{
	job_row row;
	if (store_get(r->a->st, id, 1, &row, NULL))
		return; /* the next look */
	pthread_mutex_lock(&r->lock);
	if (r->stamp && r->seen && row.present && row.views_expected == r->nstamp) {
		long long fell = 0;
		for (int k = 0; k < r->nstamp; k++) {
			int now = (row.present[k >> 3] >> (k & 7)) & 1, was = (r->seen[k >> 3] >> (k & 7)) & 1;
			uint32_t s = atomic_load(&r->stamp[k]);
			fell += was && !now;
			if (now && (!s || (s & 1))) {
				atomic_store(&r->stamp[k], r->next_stamp += 2);
				r->last_view_at = rc_now_s();
			}
			else if (!now && s && !(s & 1))
				atomic_store(&r->stamp[k], s | 1);
		}
		if (row.views_cleared - r->cleared_seen > fell) /* in doubt: the whole stack */
			for (int k = 0; k < r->nstamp; k++)
				if ((row.present[k >> 3] >> (k & 7)) & 1)
					atomic_store(&r->stamp[k], r->next_stamp += 2);
		memcpy(r->seen, row.present, ((size_t)r->nstamp + 7) / 8);
		r->cleared_seen = row.views_cleared;
	}
	pthread_mutex_unlock(&r->lock);
	job_row_clear(&row);
}

enum { LEASE_HELD = 0, LEASE_CANCEL, LEASE_LOST };

/* The part of the lease a node keeps its worker after its last renewal
 * when the store cannot be reached. */
#define LEASE_FENCE 0.8

struct lease {
	double renew_at, prog_at, stream_at;
	double held_at;       /* when the last renewal (or the take) began */
	unsigned prog_sent;
	int failing;
};

/* A shared store, while the worker runs: the lease renewed every lease_s /
 * 3 (a renewal also reads a cancel asked of another node), the live
 * progress written for the other nodes, a streaming job's bitmap read.  A
 * renewal the store cannot make now is tried again each second; one refused
 * (RC_ESTATE, RC_ENOTFOUND) means another node has the job. */
static int lease_tick(runner *r, const char *id, struct lease *ls)
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
		stamp_from_store(r, id);
		ls->stream_at = now + STREAM_POLL_MS / 1000.0;
	}
	return LEASE_HELD;
}

/* Whether the running job is a stream whose worker waits for views: it has
 * back-projected every view stamped so far and none came for
 * STREAM_YIELD_S. */
static int stream_waiting(runner *r)
{
	pthread_mutex_lock(&r->lock);
	int present = 0, waiting = r->stamp && rc_now_s() - r->last_view_at >= STREAM_YIELD_S;
	for (int k = 0; waiting && k < r->nstamp; k++) {
		uint32_t s = atomic_load(&r->stamp[k]);
		present += s && !(s & 1);
	}
	waiting = waiting && r->prog.views_done >= present;
	pthread_mutex_unlock(&r->lock);
	return waiting;
}

/* The worker's lines (supervisor_lines) and its reaping (supervisor_reap). */
struct line_ctx {
	runner *r;
	const char *id;
	struct outcome *oc;
	double last_elapsed;
};

static void on_line(void *ud, char *line)
{
	struct line_ctx *lc = ud;
	handle_line(lc->r, lc->id, line, lc->oc, &lc->last_elapsed);
}

struct reap_ctx {
	runner *r;
	const char *id;
};

/* A cancel or the daemon's stop asked while the worker is being reaped;
 * each turn is also the runner's heartbeat. */
static int reap_stop(void *ud)
{
	struct reap_ctx *rx = ud;
	pthread_mutex_lock(&rx->r->lock);
	int want = !strcmp(rx->r->cancel_id, rx->id) || rx->r->stop;
	pthread_mutex_unlock(&rx->r->lock);
	atomic_store(&rx->r->heartbeat, (long long)(rc_now_s() * 1000));
	return want;
}

static void run_job(runner *r, const char *id)
{
	app *a = r->a;
	char dir[4200], vol[4300];
	struct outcome oc;
	int succeeded = 0, live_fd = -1, stamp_fd = -1;
	memset(&oc, 0, sizeof oc);
	store_job_path(a->st, id, NULL, dir, sizeof dir);
	snprintf(vol, sizeof vol, "%s/volume.f32", dir);
	unlink(vol); /* a volume from an interrupted earlier run is not this run's */

	pthread_mutex_lock(&r->lock);
	snprintf(r->current, sizeof r->current, "%s", id);
	memset(&r->prog, 0, sizeof r->prog);
	r->prog.residual = r->prog.eta_s = NAN;
	pthread_mutex_unlock(&r->lock);
	r->job_changed(a, id);
	rc_err err;
	supervised w;
	double t0 = rc_now_s();
	if (share_memory(r, id, &live_fd, &stamp_fd) > 0) {
		/* without stamps its missing views would be reconstructed as
		 * zeros: back to receiving; its next view queues it again */
		rlog(LOG_P_ERR, "stream_paused", "id=%s error=\"no shared memory for the view stamps\"", id);
		if (store_stream_pause(a->st, id, &err))
			rlog(LOG_P_ERR, "store_error", "id=%s error=\"%s\"", id, rlog_q(err.msg));
		goto out;
	}
	if (spawn(r, dir, live_fd, stamp_fd, &w, &err)) {
		store_finish(a->st, id, JOB_FAILED, "internal_error", err.msg, NULL, NULL);
		rlog(LOG_P_ERR, "job_failed", "id=%s error=\"%s\"", id, rlog_q(err.msg));
		goto out;
	}
	rlog(LOG_P_INFO, "job_running", "id=%s node=%s pid=%d worker=%s", id, store_node(a->st), (int)w.pid,
	     a->cfg->worker);

	struct line_ctx lc = { r, id, &oc, 0 };
	int cancelled = 0, stopping = 0, yielding = 0, status = 0, lost = 0, remote_cancel = 0;
	double yield_check_at = t0 + STREAM_YIELD_S;
	int shared = store_is_shared(a->st);
	struct lease ls = { .renew_at = t0 + a->cfg->lease_s / 3, .prog_at = t0, .stream_at = t0, .held_at = t0 };
	pthread_mutex_lock(&r->lock);
	int poll_ms = shared && r->stamp ? STREAM_POLL_MS : 250;
	if (!shared || !r->stamp)
		ls.stream_at = 1e300; /* nothing streams, or this node sees every view itself */
	pthread_mutex_unlock(&r->lock);
	for (;;) {
		int n = supervisor_poll(&w, poll_ms);
		atomic_store(&r->heartbeat, (long long)(rc_now_s() * 1000));
		if (shared && !w.term_at) {
			int l = lease_tick(r, id, &ls);
			lost |= l == LEASE_LOST;
			remote_cancel |= l == LEASE_CANCEL;
		}
		pthread_mutex_lock(&r->lock);
		int want_cancel = !strcmp(r->cancel_id, id) || remote_cancel;
		int want_stop = r->stop || lost;
		pthread_mutex_unlock(&r->lock);
		if ((want_cancel || want_stop) && !w.term_at) {
			cancelled = want_cancel;
			stopping = want_stop;
			supervisor_term(&w);
		} else if (w.term_at) {
			supervisor_escalate(&w);
		} else if (rc_now_s() >= yield_check_at) {
			/* a stream that waits for its scanner must not hold the
			 * queue: it goes back to receiving and its next view
			 * queues it again (it restarts from the views it has) */
			int queued = stream_waiting(r) ? store_queue_depth(a->st) : 0;
			if (queued > 0) {
				rlog(LOG_P_INFO, "stream_yield", "id=%s queued=%d", id, queued);
				yielding = 1;
				supervisor_term(&w);
			}
			yield_check_at = rc_now_s() + STREAM_YIELD_S / 4;
		}
		if (n <= 0)
			continue;
		if (!supervisor_read(&w))
			break;
		supervisor_lines(&w, on_line, &lc);
	}
	/* EOF: the worker closed the pipe, normally by exiting.  Keep the
	 * SIGKILL deadline while waiting, for a worker that closed fd 3 and hangs. */
	struct rusage ru = { 0 };
	struct reap_ctx rx = { r, id };
	supervisor_reap(&w, reap_stop, &rx, &status, &ru);
	double secs = rc_now_s() - t0;
	busy_by_plan(a, oc.report, secs);
	if (lost) {
		/* another node has the job now: its files and its row are that
		 * node's to write (record nothing, leave volume.f32) */
		rlog(LOG_P_WARNING, "job_abandoned", "id=%s node=%s seconds=%.3f", id, store_node(a->st), secs);
		goto out;
	}

	worker_end we = { .status = status, .volume_ok = access(vol, R_OK) == 0, .cancel_asked = cancelled,
			  .stop_asked = stopping, .yield_asked = yielding, .saw_error = oc.saw_error, .lines = oc.lines, .signal = oc.signal };
	job_state final = worker_end_decide(&we, a->cfg->worker, oc.err_code, sizeof oc.err_code, oc.err_msg,
					sizeof oc.err_msg);
	if (final == JOB_RECEIVING) {
		if (store_stream_pause(a->st, id, &err) == 0) {
			rlog(LOG_P_INFO, "stream_paused", "id=%s seconds=%.3f reason=%s", id, rc_now_s() - t0,
			     yielding ? "yield" : "idle");
			requeue_if_complete(r, id);
			goto out;
		}
		/* the pause could not be recorded: the job cannot wait for views */
		final = JOB_FAILED;
		snprintf(oc.err_code, sizeof oc.err_code, "%s", rc_code_name(err.code));
		snprintf(oc.err_msg, sizeof oc.err_msg, "the stream's pause could not be recorded: %s", err.msg);
	}
	if (!strcmp(oc.err_code, "worker_crashed"))
		metrics_worker_crash(a->met);
	/* A volume.f32 exists only for a succeeded job (a cancel that raced the
	 * worker's last write, or a write whose directory fsync failed, leave
	 * one behind otherwise).  Removed once the outcome is this node's to
	 * record: on a shared spool a node that lost the job must not touch
	 * the volume of the node that has it (a crash in between leaves it to
	 * the recovery sweep, which removes the volume of a job that has not
	 * succeeded). */
	with_last_progress(r, &oc, &ru);
	if (record_outcome(r, id, final, &oc) && final != JOB_SUCCEEDED)
		unlink(vol);
	if (final != JOB_QUEUED)
		metrics_job_finished(a->met, final);
	succeeded = final == JOB_SUCCEEDED;
	if (final == JOB_FAILED)
		rlog(LOG_P_ERR, "job_failed", "id=%s seconds=%.3f code=%s error=\"%s\"", id, secs, oc.err_code, rlog_q(oc.err_msg));
	else
		rlog(LOG_P_INFO, final == JOB_QUEUED ? "job_requeued" : "job_finished", "id=%s state=%s seconds=%.3f",
		     id, job_state_name(final), secs);
out:
	unshare_memory(r, stamp_fd);
	pthread_mutex_lock(&r->lock);
	r->current[0] = '\0';
	if (!strcmp(r->cancel_id, id))
		r->cancel_id[0] = '\0';
	pthread_mutex_unlock(&r->lock);
	free(oc.report);
	r->job_changed(a, id);
	if (succeeded)
		pusher_kick(a->push);
}

void runner_engines(runner *r, char *buf, size_t n)
{
	json_t *devs = runner_devices(r);
	int cl = 0, cuda = 0;
	size_t i;
	json_t *d;
	json_array_foreach(devs, i, d) {
		const char *e = json_string_value(json_object_get(d, "engine"));
		cl |= e && !strcmp(e, "opencl");
		cuda |= e && !strcmp(e, "cuda");
	}
	json_decref(devs);
	snprintf(buf, n, "%s%s%s", cl ? "opencl," : "", cuda ? "cuda," : "", "cpu");
}

json_t *runner_devices(runner *r)
{
	pthread_mutex_lock(&r->lock);
	json_t *d = json_incref(r->devices);
	pthread_mutex_unlock(&r->lock);
	return d;
}

int runner_probed(runner *r)
{
	pthread_mutex_lock(&r->lock);
	int p = r->probed;
	pthread_mutex_unlock(&r->lock);
	return p;
}

#define PROBE_TIMEOUT_S 20.0 /* CUDA + OpenCL enumeration; /readyz waits for it */

/* Runs `worker --devices` and keeps its list.  Drivers are loaded only in
 * that child, never in the daemon. */
static void probe_devices(runner *r)
{
	json_t *devs = NULL;
	const char *prog = r->a->cfg->probe_worker[0] ? r->a->cfg->probe_worker : r->a->cfg->worker;
	char *argv[] = { (char *)prog, "--devices", NULL };
	supervisor_spec spec = { .prog = prog, .argv = argv, .out_fd = 1, .grace_s = 0 };
	supervised *s = malloc(sizeof *s); /* its buffer is the whole answer */
	if (s && supervisor_spawn(s, &spec, NULL) == 0) {
		pthread_mutex_lock(&r->lock);
		r->probe_pid = s->pid;
		pthread_mutex_unlock(&r->lock);
		double t0 = rc_now_s();
		while (s->used < sizeof s->out - 1 && rc_now_s() - t0 < PROBE_TIMEOUT_S) {
			if (supervisor_poll(s, 250) <= 0)
				continue;
			if (!supervisor_read(s))
				break;
		}
		supervisor_kill(s, NULL);
		pthread_mutex_lock(&r->lock);
		r->probe_pid = 0;
		pthread_mutex_unlock(&r->lock);
		json_t *j = json_loads(s->out, 0, NULL);
		if (json_is_array(json_object_get(j, "devices")))
			devs = json_incref(json_object_get(j, "devices"));
		json_decref(j);
	}
	free(s);
	if (devs)
		rlog(LOG_P_INFO, "devices_probed", "count=%zu", json_array_size(devs));
	else
		rlog(LOG_P_WARNING, "devices_probe_failed", "probe=%s (listing the CPU only)",
		     r->a->cfg->probe_worker[0] ? r->a->cfg->probe_worker : r->a->cfg->worker);
	pthread_mutex_lock(&r->lock);
	r->devices = devs;
	r->probed = 1;
	pthread_mutex_unlock(&r->lock);
}

static void *probe_main(void *arg)
{
	probe_devices(arg);
	return NULL;
}

static void *runner_main(void *arg)
{
	runner *r = arg;
	double last_expire = 0;
	int queue_failing = 0; /* logged once until the store answers again */
	for (;;) {
		atomic_store(&r->heartbeat, (long long)(rc_now_s() * 1000));
		pthread_mutex_lock(&r->lock);
		int stop = r->stop;
		r->kicked = 0;
		pthread_mutex_unlock(&r->lock);
		if (stop)
			break;
		if (rc_now_s() - last_expire > EXPIRE_EVERY_S) {
			int n = 0;
			rc_err err;
			if (store_expire(r->a->st, r->a->cfg->retention_s, &n, &err))
				rlog(LOG_P_ERR, "expire_failed", "error=\"%s\"", rlog_q(err.msg));
			else if (n)
				rlog(LOG_P_INFO, "jobs_expired", "count=%d retention_s=%.0f", n, r->a->cfg->retention_s);
			last_expire = rc_now_s();
		}
		char id[37];
		rc_err err;
		int rc;
		if (atomic_load(&r->a->recover_pending)) {
			/* the start's recovery failed (a full disk): no job runs
			 * before the running ones of the last life are re-queued */
			int requeued = 0, orphans = 0;
			rc = store_recover(r->a->st, &requeued, &orphans, &err);
			if (!rc) {
				atomic_store(&r->a->recover_pending, 0);
				rlog(LOG_P_INFO, "recovered", "requeued=%d orphans_removed=%d", requeued, orphans);
				continue;
			}
		} else if (store_is_shared(r->a->st)) {
			/* placement needs this node's devices: none taken before the probe */
			char engines[128];
			runner_engines(r, engines, sizeof engines);
			rc = !runner_probed(r) ? RC_ENOTFOUND
					       : store_take_next_on(r->a->st, store_node(r->a->st), r->a->cfg->lease_s,
								    engines, id, &err);
		} else {
			rc = store_take_next(r->a->st, id, &err);
		}
		if (rc == 0) {
			queue_failing = 0;
			run_job(r, id);
			continue;
		}
		if (rc != RC_ENOTFOUND && !queue_failing++)
			rlog(LOG_P_ERR, "queue_error", "error=\"%s\"", rlog_q(err.msg));
		else if (rc == RC_ENOTFOUND && queue_failing) {
			rlog(LOG_P_INFO, "queue_recovered", "tries=%d", queue_failing + 1);
			queue_failing = 0;
		}
		pthread_mutex_lock(&r->lock);
		if (!r->kicked && !r->stop) {
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_sec += 1;
			pthread_cond_timedwait(&r->cond, &r->lock, &dl);
		}
		pthread_mutex_unlock(&r->lock);
	}
	return NULL;
}

int runner_start(runner *r, rc_err *err)
{
	int e = pthread_create(&r->thread, NULL, runner_main, r);
	if (e)
		return rc_fail(err, RC_EINTERNAL, "", "cannot start the runner thread: %s", strerror(e));
	r->started = 1;
	/* Its own thread: a slow driver start delays /readyz, not the queue. */
	if (pthread_create(&r->probe_thread, NULL, probe_main, r) == 0)
		r->probe_started = 1;
	else
		r->probed = 1;
	return 0;
}

void runner_stop(runner *r)
{
	if (!r || !r->started)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	r->started = 0;
	if (r->probe_started) {
		pthread_mutex_lock(&r->lock);
		if (r->probe_pid > 0)
			kill(r->probe_pid, SIGKILL);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->probe_thread, NULL);
		r->probe_started = 0;
	}
}

