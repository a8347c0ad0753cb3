/*
 * runner: the queue's consumer (runner.h).
 *
 * One thread.  Loop: take the next queued job from the store (it becomes
 * running in the same transaction), start the worker with the job
 * directory and a pipe on fd 3 (supervisor.h), read its JSON lines while
 * polling for cancel and shutdown, reap it, and record the outcome.
 * Everything the HTTP threads read (the live progress, the running id) is
 * behind r->lock.  The job's shared memory, the lease and the device probe
 * are runner_shm.c, runner_lease.c and runner_probe.c (runner_impl.h).
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
#include "jobs/runner_impl.h"
#include "jobs/supervisor.h"
#include "jobs/worker_end.h"
#include "base/log.h"
#include "worker_proto.h"
#include "util/rc_clock.h"

#define CANCEL_GRACE_S 10.0   /* SIGTERM -> SIGKILL: a GPU engine's projection under way and the checkpoint written at the SIGTERM fit */
#define EXPIRE_EVERY_S 60.0
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
	int phase_line = type && !strcmp(type, "phase");
	if (type && (!strcmp(type, "progress") || phase_line)) {
		run_progress p;
		p.iteration = (int)json_integer_value(json_object_get(j, "iteration"));
		p.of = (int)json_integer_value(json_object_get(j, "iterations"));
		if (!p.of)
			p.of = (int)json_integer_value(json_object_get(j, "of"));
		const char *phase = json_string_value(json_object_get(j, "phase"));
		snprintf(p.phase, sizeof p.phase, "%s", phase ? phase : "");
		json_t *pf = json_object_get(j, "phase_fraction");
		p.phase_fraction = json_is_number(pf) ? json_number_value(pf) : NAN;
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
		json_t *fz = json_object_get(j, "final_z_mm");
		p.final_z_mm = json_is_number(fz) ? json_number_value(fz) : NAN;
		p.final_slices = (int)json_integer_value(json_object_get(j, "final_slices"));
		/* phase lines repeat the counts: only an iteration's line is timed */
		if (isfinite(p.elapsed_s) && p.elapsed_s > *last_elapsed) {
			metrics_iteration(r->a->met, p.elapsed_s - *last_elapsed);
			*last_elapsed = p.elapsed_s;
		}
		pthread_mutex_lock(&r->lock);
		r->prog = p;
		r->prog_wall = rc_now_s();
		pthread_mutex_unlock(&r->lock);
		json_t *ev = json_pack("{sisisosfso}", "iteration", p.iteration, "of", p.of,
				       "residual", isfinite(p.residual) ? json_real(p.residual) : json_null(),
				       "fraction", p.of ? (double)p.iteration / p.of : 0.0,
				       "eta_s", isfinite(p.eta_s) ? json_real(p.eta_s) : json_null());
		json_object_set_new(ev, "elapsed_s", isfinite(p.elapsed_s) ? json_real(p.elapsed_s) : json_null());
		json_object_set_new(ev, "iterations", json_integer(p.of));
		json_object_set_new(ev, "phase", json_string(p.phase[0] ? p.phase : "preparing"));
		json_object_set_new(ev, "stopped", p.stopped[0] ? json_string(p.stopped) : json_null());
		if (isfinite(p.phase_fraction))
			json_object_set_new(ev, "phase_fraction", json_real(p.phase_fraction));
		if (p.views_expected) {
			json_object_set_new(ev, "views_done", json_integer(p.views_done));
			json_object_set_new(ev, "views_expected", json_integer(p.views_expected));
			json_object_set_new(ev, "fraction", json_real((double)p.views_done / p.views_expected));
		}
		if (isfinite(p.final_z_mm)) {
			json_object_set_new(ev, "final_slices", json_integer(p.final_slices));
			json_object_set_new(ev, "final_z_mm", json_real(p.final_z_mm));
		}
		char *s = json_dumps(ev, JSON_COMPACT);
		/* a phase change is a state event (the job, its progress's phase
		 * new): progress events stay one per iteration */
		if (phase_line)
			r->job_changed(r->a, id);
		else if (s)
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
	char threads[16], idle[32], mcache[32];
	snprintf(threads, sizeof threads, "%d", c->worker_threads);
	snprintf(mcache, sizeof mcache, "%llu",
		 (unsigned long long)(c->matrix_cache_bytes > INT64_MAX ? INT64_MAX : c->matrix_cache_bytes));
	snprintf(idle, sizeof idle, "%.3f", c->stream_idle_s);
	/* --state-dir: fitted device models and cached system matrices live
	 * in the node's state directory, shared by its jobs; the matrices
	 * under matrix_cache_bytes */
	char *argv[22] = { (char *)c->worker, "--progress-fd", "3", "--threads", threads,
			   "--state-dir", r->a->state_dir, "--matrix-cache-bytes", mcache };
	int n = 9;
	/* the worker plans within the budget the job was accepted under
	 * (spec.h job_spec_plan: in core, FDK in z-slabs, or CGLS in z-slabs and chunks of views) */
	char budget[32];
	uint64_t mb = config_memory_budget(c, NULL);
	if (mb) {
		snprintf(budget, sizeof budget, "%llu", (unsigned long long)mb);
		argv[n++] = "--memory-limit";
		argv[n++] = budget;
	}
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
		json_object_set_new(rep, "progress", json_pack("{sisisisosososs}", "iteration", p.iteration, "of", p.of,
							      "iterations", p.of,
							      "residual", isfinite(p.residual) ? json_real(p.residual) : json_null(),
							      "elapsed_s", isfinite(p.elapsed_s) ? json_real(p.elapsed_s) : json_null(),
							      "stopped", p.stopped[0] ? json_string(p.stopped) : json_null(),
							      "phase", p.phase[0] ? p.phase : "preparing"));
		/* a streamed helix: how far the volume was final (all of it) */
		if (isfinite(p.final_z_mm)) {
			json_t *pr = json_object_get(rep, "progress");
			json_object_set_new(pr, "final_slices", json_integer(p.final_slices));
			json_object_set_new(pr, "final_z_mm", json_real(p.final_z_mm));
		}
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
	int cancel, stop; /* asked while reaping */
};

/* A cancel or the daemon's stop asked while the worker is being reaped;
 * each turn is also the runner's heartbeat. */
static int reap_stop(void *ud)
{
	struct reap_ctx *rx = ud;
	pthread_mutex_lock(&rx->r->lock);
	int cancel = !strcmp(rx->r->cancel_id, rx->id), want = cancel || rx->r->stop;
	rx->cancel |= cancel; /* the outcome's: a SIGTERM sent here is the daemon's own */
	rx->stop |= rx->r->stop;
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
	r->prog.phase_fraction = NAN;
	r->prog.residual = r->prog.eta_s = r->prog.final_z_mm = NAN;
	pthread_mutex_unlock(&r->lock);
	r->job_changed(a, id);
	rc_err err;
	supervised w;
	double t0 = rc_now_s();
	if (runner_share_memory(r, id, &live_fd, &stamp_fd) > 0) {
		/* without stamps its missing views would be reconstructed as
		 * zeros: back to receiving; its next view queues it again */
		rlog(LOG_P_ERR, "stream_paused", "id=%s error=\"no shared memory for the view stamps\"", id);
		if (store_stream_pause(a->st, id, &err))
			rlog(LOG_P_ERR, "store_error", "id=%s error=\"%s\"", id, rlog_q(err.msg));
		goto out;
	}
	/* execution.ranks > 1: under mpirun (runner_mpi.c) */
	int ranks = runner_mpi_ranks(dir);
	if (runner_mpi_offered(a->cfg, ranks, &err)) {
		store_finish(a->st, id, JOB_FAILED, "unsupported", err.msg, NULL, NULL);
		rlog(LOG_P_ERR, "job_failed", "id=%s error=\"%s\"", id, rlog_q(err.msg));
		goto out;
	}
	if (ranks > 1 ? runner_mpi_spawn(r, dir, ranks, &w, &err) : spawn(r, dir, live_fd, stamp_fd, &w, &err)) {
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
			int l = runner_lease_tick(r, id, &ls);
			lost |= l == LEASE_LOST;
			remote_cancel |= l == LEASE_CANCEL;
		}
		pthread_mutex_lock(&r->lock);
		int want_cancel = !strcmp(r->cancel_id, id) || remote_cancel;
		int want_stop = r->stop || lost;
		pthread_mutex_unlock(&r->lock);
		/* recorded even after a SIGTERM already went (a yield's): the
		 * outcome must be the cancel or the stop, not the yield's */
		cancelled |= want_cancel;
		stopping |= want_stop;
		if ((want_cancel || want_stop) && !w.term_at) {
			supervisor_term(&w);
		} else if (w.term_at) {
			supervisor_escalate(&w);
		} else if (rc_now_s() >= yield_check_at) {
			/* a stream that waits for its scanner must not hold the
			 * queue: it goes back to receiving and its next view
			 * queues it again (it restarts from the views it has) */
			int queued = runner_stream_waiting(r) ? store_queue_depth(a->st) : 0;
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
	struct reap_ctx rx = { r, id, 0, 0 };
	supervisor_reap(&w, reap_stop, &rx, &status, &ru);
	cancelled |= rx.cancel;
	stopping |= rx.stop;
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
	/* a job across ranks: the rank that ended it, as mpirun saw it
	 * (rank 0's own error line, when it wrote one, says more) */
	if (ranks > 1 && final == JOB_FAILED && !oc.saw_error)
		runner_mpi_blame(dir, ranks, oc.err_msg, sizeof oc.err_msg);
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
	if (final == JOB_SUCCEEDED)
		app_push_hold(a, id, oc.report);
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
	runner_unshare_memory(r, stamp_fd);
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
			rc = store_recover_serving(r->a->st, &requeued, &orphans, &err);
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
	return runner_probe_start(r);
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
	runner_probe_stop(r);
}

