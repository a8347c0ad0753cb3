/*
 * job_json: the Job resource (api/openapi.yaml) from a store row, the
 * worker's report (JSON text kept in the row) and the runner's live
 * progress.  Also publishes state changes to the event hub.
 */
#include "jobs/app.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "algo/names.h"
#include "jobs/runner.h"

static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *missing_ranges(const job_row *r, int *truncated)
{
	json_t *a = json_array();
	*truncated = 0;
	if (!r->present)
		return a;
	int k = 0;
	while (k < r->views_expected) {
		if ((r->present[k >> 3] >> (k & 7)) & 1) {
			k++;
			continue;
		}
		int first = k;
		while (k < r->views_expected && !((r->present[k >> 3] >> (k & 7)) & 1))
			k++;
		if (json_array_size(a) == 64) {
			*truncated = 1;
			break;
		}
		json_array_append_new(a, json_pack("[ii]", first, k - 1));
	}
	return a;
}

/* Why an ended job stopped before its iterations: the worker's stop rule,
 * else "cancelled" or "failed" by its state; null when all ran. */
static json_t *stopped_json(const job_row *r, json_t *rp)
{
	json_t *st = rp ? json_object_get(rp, "stopped") : NULL;
	if (json_is_string(st))
		return json_incref(st);
	if (r->state == JOB_CANCELLED)
		return json_string("cancelled");
	if (r->state == JOB_FAILED)
		return json_string("failed");
	return json_null();
}

/* The phase of a job no worker runs now (docs/api.md, "Progress"). */
static const char *idle_phase(const job_row *r)
{
	switch (r->state) {
	case JOB_SUCCEEDED:
	case JOB_FAILED:
	case JOB_CANCELLED:
		return "done";
	default:
		return "pending";
	}
}

/* The job's progress object, one vocabulary from the worker to every
 * reader: iteration (done), iterations (asked; "of" is its older name),
 * stopped (why it ended before them, null otherwise), phase.  Live from
 * this node's runner, from the row while another node runs it, else from
 * the report the run left. */
static json_t *progress_json(app *a, const job_row *r, json_t *summary, json_t *report)
{
	int asked = (int)json_integer_value(json_object_get(summary, "iterations"));
	json_t *prog = json_object();
	run_progress live;
	/* running on another node: the progress it last wrote into the row */
	json_t *remote = r->state == JOB_RUNNING && r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	if (r->state == JOB_RUNNING && a && a->run && runner_progress(a->run, r->id, &live) == 0) {
		int of = live.of ? live.of : asked;
		json_object_set_new(prog, "iteration", json_integer(live.iteration));
		json_object_set_new(prog, "of", json_integer(of));
		json_object_set_new(prog, "residual", num_or_null(live.residual));
		json_object_set_new(prog, "fraction", json_real(of ? (double)live.iteration / of : 0.0));
		json_object_set_new(prog, "eta_s", num_or_null(live.eta_s));
		json_object_set_new(prog, "elapsed_s", num_or_null(live.elapsed_s));
		json_object_set_new(prog, "stopped", live.stopped[0] ? json_string(live.stopped) : json_null());
		json_object_set_new(prog, "phase", json_string(live.phase[0] ? live.phase : "preparing"));
		if (isfinite(live.phase_fraction))
			json_object_set_new(prog, "phase_fraction", json_real(live.phase_fraction));
		if (live.views_expected) {
			json_object_set_new(prog, "views_done", json_integer(live.views_done));
			json_object_set_new(prog, "views_expected", json_integer(live.views_expected));
			json_object_set_new(prog, "fraction", json_real((double)live.views_done / live.views_expected));
		}
		if (isfinite(live.final_z_mm)) {
			json_object_set_new(prog, "final_slices", json_integer(live.final_slices));
			json_object_set_new(prog, "final_z_mm", json_real(live.final_z_mm));
		}
	} else if (json_is_object(remote) && json_is_integer(json_object_get(remote, "iteration"))) {
		json_object_update(prog, remote);
		if (!json_object_get(prog, "of") || !json_integer_value(json_object_get(prog, "of")))
			json_object_set_new(prog, "of", json_integer(asked));
		if (!json_is_string(json_object_get(prog, "phase")))
			json_object_set_new(prog, "phase", json_string("preparing"));
		if (!json_is_string(json_object_get(prog, "stopped")))
			json_object_set_new(prog, "stopped", json_null());
	} else {
		json_t *rp = report ? json_object_get(report, "progress") : NULL;
		int it = rp ? (int)json_integer_value(json_object_get(rp, "iteration")) : 0;
		int rof = rp ? (int)json_integer_value(json_object_get(rp, "of")) : 0;
		if (rof <= 0)
			rof = asked; /* ended before its first line (e.g. cancelled in its FDK start) */
		json_object_set_new(prog, "iteration", json_integer(it));
		json_object_set_new(prog, "of", json_integer(rof));
		json_object_set_new(prog, "residual", rp && json_is_number(json_object_get(rp, "residual"))
				    ? json_real(json_number_value(json_object_get(rp, "residual"))) : json_null());
		double frac = r->state == JOB_SUCCEEDED ? 1.0 : rof ? (double)it / rof : 0.0;
		json_object_set_new(prog, "fraction", json_real(frac > 1 ? 1 : frac));
		json_object_set_new(prog, "eta_s", r->state == JOB_SUCCEEDED ? json_real(0) : json_null());
		json_t *el = rp ? json_object_get(rp, "elapsed_s") : NULL;
		json_object_set_new(prog, "elapsed_s", json_is_number(el) ? json_incref(el) : json_null());
		json_object_set_new(prog, "stopped", stopped_json(r, rp));
		json_object_set_new(prog, "phase", json_string(idle_phase(r)));
	}
	json_object_set(prog, "iterations", json_object_get(prog, "of"));
	json_decref(remote);
	return prog;
}

json_t *app_job_json(app *a, const job_row *r)
{
	char base[64], buf[128];
	snprintf(base, sizeof base, "/v1/jobs/%s", r->id);
	json_t *j = json_object();
	json_object_set_new(j, "id", json_string(r->id));
	json_object_set_new(j, "state", json_string(job_state_name(r->state)));
	json_object_set_new(j, "label", json_string(r->label));
	/* "" in the row: created before owners were kept (nobody's) */
	json_object_set_new(j, "owner", r->owner[0] ? json_string(r->owner) : json_null());
	json_object_set_new(j, "phi_redacted", json_false());
	json_object_set_new(j, "priority", json_integer(r->priority));
	json_object_set_new(j, "autostart", json_boolean(r->autostart));
	json_object_set_new(j, "cancel_requested", json_boolean(r->cancel_requested));
	json_object_set_new(j, "created", app_ts_json(r->created));
	json_object_set_new(j, "updated", app_ts_json(r->updated));
	json_object_set_new(j, "views_expected", json_integer(r->views_expected));
	json_object_set_new(j, "views_present", json_integer(r->views_present));
	int trunc;
	json_object_set_new(j, "views_missing", missing_ranges(r, &trunc));
	json_object_set_new(j, "views_missing_truncated", json_boolean(trunc));
	json_object_set_new(j, "view_bytes", json_integer((json_int_t)r->view_bytes));
	json_object_set_new(j, "projection_bytes", json_integer((json_int_t)r->proj_bytes));
	json_object_set_new(j, "volume_bytes", json_integer((json_int_t)r->vol_bytes));
	json_t *summary = r->summary ? json_loads(r->summary, 0, NULL) : NULL;
	json_object_set_new(j, "summary", summary ? summary : json_object());

	json_t *report = r->report ? json_loads(r->report, 0, NULL) : NULL;
	json_t *prog = progress_json(a, r, json_object_get(j, "summary"), report);
	json_object_set_new(j, "progress", prog);
	json_object_set_new(j, "node", r->node[0] ? json_string(r->node) : json_null());
	json_object_set_new(j, "attempts", json_integer(r->attempts));

	json_object_set_new(j, "engine", report && json_object_get(report, "engine")
			    ? json_incref(json_object_get(report, "engine")) : json_null());
	json_object_set_new(j, "projector", report && json_is_string(json_object_get(report, "projector"))
			    ? json_incref(json_object_get(report, "projector")) : json_null());
	/* the TV weight that ran (the default follows the data's noise) */
	json_object_set_new(j, "tv_weight", report && json_is_number(json_object_get(report, "tv_weight"))
			    ? json_incref(json_object_get(report, "tv_weight")) : json_null());
	/* the long object: the extended volume an iterative run reconstructed */
	json_object_set_new(j, "extend", report && json_is_object(json_object_get(report, "extend"))
			    ? json_incref(json_object_get(report, "extend")) : json_null());
	/* the iteration a checkpoint let the last run continue from */
	json_t *rfi = report ? json_object_get(report, "resumed_from_iteration") : NULL;
	json_object_set_new(j, "resumed_from_iteration", json_is_integer(rfi) ? json_incref(rfi) : json_null());
	json_object_set_new(j, "plan", report && json_is_array(json_object_get(report, "plan"))
			    ? json_incref(json_object_get(report, "plan")) : json_array());
	json_object_set_new(j, "matrix", report && json_is_object(json_object_get(report, "matrix"))
			    ? json_incref(json_object_get(report, "matrix")) : json_null());
	/* streaming FDK: what was asked, whether it streams, how it went */
	static const char *const modes[] = { "off", "auto", "on" };
	json_t *rs = report ? json_object_get(report, "stream") : NULL;
	json_t *fb = rs ? json_object_get(rs, "fallback") : NULL;
	json_object_set_new(j, "stream", json_pack("{sssbsoso}", "mode", modes[r->stream >= 0 && r->stream <= 2 ? r->stream : 0],
						   "active", r->streaming,
						   "views_streamed", rs && json_is_integer(json_object_get(rs, "views_streamed"))
						   ? json_incref(json_object_get(rs, "views_streamed")) : json_null(),
						   "fallback", json_is_string(fb) ? json_incref(fb) : json_null()));
	/* what the worker's checks found (core/plan/checks.h) and how well
	 * the result explains the data; [] and null before it reported */
	json_t *ws = report ? json_object_get(report, "warnings") : NULL;
	json_t *sum = json_object_get(j, "summary"), *gw = json_object_get(sum, "warnings");
	if (!json_is_array(ws)) /* not run yet: the geometry's, found at creation (job_spec_summary) */
		ws = gw;
	json_object_set_new(j, "warnings", json_is_array(ws) ? json_incref(ws) : json_array());
	json_object_del(sum, "warnings"); /* the summary is the spec in short */
	json_t *res = report ? json_object_get(report, "result") : NULL;
	json_object_set_new(j, "result", json_is_object(res) ? json_incref(res) : json_null());
	/* what the projections were: a job of counts reports its clamped pixels */
	json_object_set_new(j, "input", report && json_is_object(json_object_get(report, "input"))
			    ? json_incref(json_object_get(report, "input")) : json_null());
	/* the memory plan that ran (the worker's), else the one made at creation */
	json_t *mp = report ? json_object_get(report, "memory_plan") : NULL;
	if (!json_is_object(mp))
		mp = json_object_get(json_object_get(j, "summary"), "memory_plan");
	json_object_set_new(j, "memory_plan", json_is_object(mp) ? json_incref(mp) : json_null());
	/* a job across MPI ranks: each rank's host, pid and seconds, and
	 * whether an iterative run's ranks ended with the same volume */
	json_t *rk = report ? json_object_get(report, "ranks") : NULL;
	json_object_set_new(j, "ranks", json_is_array(rk) ? json_incref(rk) : json_null());
	json_t *ri = report ? json_object_get(report, "ranks_identical") : NULL;
	json_object_set_new(j, "ranks_identical", json_is_boolean(ri) ? json_incref(ri) : json_null());
	json_object_set_new(j, "peak_rss_mb", report && json_is_number(json_object_get(report, "peak_rss_mb"))
			    ? json_incref(json_object_get(report, "peak_rss_mb")) : json_null());

	json_t *t = json_object();
	json_object_set_new(t, "created", app_ts_json(r->created));
	json_object_set_new(t, "queued", app_ts_json(r->queued));
	json_object_set_new(t, "started", app_ts_json(r->started));
	json_object_set_new(t, "finished", app_ts_json(r->finished));
	json_object_set_new(t, "wait_s", r->queued > 0 && r->started > 0 ? json_real(r->started - r->queued) : json_null());
	json_object_set_new(t, "run_s", r->started > 0 && r->finished > 0 ? json_real(r->finished - r->started) : json_null());
	json_object_set_new(t, "recon_s", report && json_is_number(json_object_get(report, "seconds"))
			    ? json_incref(json_object_get(report, "seconds")) : json_null());
	json_object_set_new(j, "timings", t);

	if (r->state == JOB_FAILED || (r->state == JOB_CANCELLED && r->error_code[0]))
		json_object_set_new(j, "error", json_pack("{ssss}", "code", r->error_code[0] ? r->error_code : "internal_error",
							  "message", r->error_message));
	else
		json_object_set_new(j, "error", json_null());

	json_t *links = json_object();
	json_object_set_new(links, "self", json_string(base));
	snprintf(buf, sizeof buf, "%s/projections", base);
	json_object_set_new(links, "projections", json_string(buf));
	snprintf(buf, sizeof buf, "%s/events", base);
	json_object_set_new(links, "events", json_string(buf));
	snprintf(buf, sizeof buf, "%s/start", base);
	json_object_set_new(links, "start", json_string(buf));
	snprintf(buf, sizeof buf, "%s/cancel", base);
	json_object_set_new(links, "cancel", json_string(buf));
	json_t *vol = json_object();
	for (int i = 0; i < rc_names_count(RC_NAMES_FORMAT); i++) {
		const char *f = rc_names_at(RC_NAMES_FORMAT, i, NULL, NULL);
		snprintf(buf, sizeof buf, "%s/volume?format=%s", base, f);
		json_object_set_new(vol, f, json_string(buf));
	}
	json_object_set_new(links, "volume", vol);
	snprintf(buf, sizeof buf, "%s/push", base);
	json_object_set_new(links, "push", json_string(buf));
	json_object_set_new(j, "links", links);
	app_job_add_push(a, r, j);
	json_decref(report);
	return j;
}

void app_job_redact(json_t *j)
{
	/* the label may name the patient (spec.c); dicom holds the patient and
	 * study fields as given.  dicom_series stays: counts, windows and UIDs
	 * name the series, not the patient (docs/server.md). */
	json_object_set_new(j, "label", json_string(""));
	json_object_del(j, "dicom");
	json_object_set_new(j, "phi_redacted", json_true());
}

void app_job_changed(app *a, const char *id)
{
	job_row r;
	if (store_get(a->st, id, 1, &r, NULL)) {
		hub_publish(a->hub, id, "deleted", "{}");
		return;
	}
	json_t *j = app_job_json(a, &r);
	char *s = json_dumps(j, JSON_COMPACT);
	if (s)
		hub_publish(a->hub, id, "state", s);
	free(s);
	json_decref(j);
	job_row_clear(&r);
}
