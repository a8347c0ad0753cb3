/*
 * http_jobs: POST /v1/jobs (create), GET /v1/jobs (list), GET, PATCH
 * (priority) and DELETE /v1/jobs/{id}, POST /v1/jobs/{id}/start and /cancel.  Cancel stops a job
 * that has not finished (409 once it has); DELETE removes a finished job and
 * its files (409 before: cancel it first), so neither has two meanings and a
 * 2xx DELETE always leaves the job gone.  The spec body is capped by its
 * declared length before it is read and again while it arrives (chunked
 * bodies), then parsed once by spec.c (which also gives the job's summary)
 * and checked by core's rc_recon_check (an engine runs the algorithm on the
 * geometry); nothing is stored unless both pass.  The job belongs to the
 * creating token; the routes that act on a job check it (http_owner.c)
 * before anything else, and every Job answer goes through http_job_phi.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "http/http_routes.h"
#include "jfield.h"
#include "http/jscan.h"
#include "algo/names.h"
#include "base/log.h"
#include "jobs/node.h"
#include "plan/recon.h"
#include "spec.h"

/* A PATCH body is {"priority": N}: a few bytes, whatever max_body says. */
#define PATCH_MAX_BODY 4096

/* Specs parsed at once: each parse may take ~64 bytes per value the scan
 * allows (jscan.h), some 80 MB for the largest legitimate spec; more
 * requests wait for a slot, up to PARSE_WAIT_S, then 503. */
#define PARSE_CONCURRENCY 2
#define PARSE_WAIT_S 10
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t parse_freed = PTHREAD_COND_INITIALIZER;
static int parses;

static int parse_enter(void)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += PARSE_WAIT_S;
	int rc = 0;
	pthread_mutex_lock(&parse_lock);
	while (parses >= PARSE_CONCURRENCY && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&parse_freed, &parse_lock, &until);
	int ok = parses < PARSE_CONCURRENCY;
	if (ok)
		parses++;
	pthread_mutex_unlock(&parse_lock);
	return ok ? 0 : -1;
}

static void parse_leave(void)
{
	pthread_mutex_lock(&parse_lock);
	parses--;
	pthread_cond_signal(&parse_freed);
	pthread_mutex_unlock(&parse_lock);
}

static uint64_t body_limit(const req *r)
{
	return r->rt == R_JOB ? PATCH_MAX_BODY : r->a->cfg->max_body;
}

enum MHD_Result http_jobs_create_begin(struct MHD_Connection *c, req *r)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > r->a->cfg->max_body)
		return http_fail(c, r, RC_EBODYTOOBIG, "", "the job spec is %.24s bytes; the limit is %llu", cl,
				 (unsigned long long)r->a->cfg->max_body);
	return MHD_YES;
}

enum MHD_Result http_jobs_create_body(req *r, const char *data, size_t len)
{
	if (r->body_too_big || r->body_len + len > body_limit(r)) {
		r->body_too_big = 1;
		return MHD_YES; /* keep draining; answer at the end */
	}
	if (r->body_len + len + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 4096;
		while (cap < r->body_len + len + 1)
			cap *= 2;
		char *nb = realloc(r->body, cap);
		if (!nb)
			return MHD_NO;
		r->body = nb;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, data, len);
	r->body_len += len;
	return MHD_YES;
}

/* The engines that run a spec here: those rc_recon_check accepts for its
 * algorithm and geometry, less a device engine (opencl, cuda) no node offers. */
struct offered {
	const rc_recon_spec *s;
	unsigned bits;
};

static int engine_would_run(int e, void *ud)
{
	const struct offered *o = ud;
	if ((e == RC_ENGINE_OPENCL || e == RC_ENGINE_CUDA) && !(o->bits & (1u << e)))
		return 0;
	rc_recon_spec t = *o->s;
	t.engine = (rc_engine_choice)e;
	rc_err ignored;
	return rc_recon_check(&t, &ignored) == 0;
}

/* execution.engine opencl or cuda runs only where a node has such a device:
 * without one now (this daemon's probe; with PostgreSQL any alive node's
 * devices, node_engines_offered) the job is refused (RC_EUNSUPPORTED, 422)
 * instead of failing when it runs or waiting for a node that may never
 * come; while this daemon's own probe has not answered and no other node
 * offers the device, RC_EUNAVAIL (503: retry).  auto, cpu, tensor and
 * trigeneous run on any node (CPU paths). */
static int engine_offered(app *a, const rc_recon_spec *s, rc_err *err)
{
	rc_engine_choice eng = s->engine;
	if (eng != RC_ENGINE_OPENCL && eng != RC_ENGINE_CUDA)
		return 0;
	struct offered o = { s, 0 };
	int probed;
	if (node_engines_offered(a, &o.bits, &probed, err))
		return err->code;
	if (o.bits & (1u << eng))
		return 0;
	if (!probed)
		return rc_fail(err, RC_EUNAVAIL, "", "this daemon is still probing its devices; retry shortly");
	char l[128];
	return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
		       "execution.engine \"%s\" needs %s device and no node of this daemon's store has one now: "
		       "use execution.engine %s",
		       rc_name_str(RC_NAMES_ENGINE, eng), eng == RC_ENGINE_CUDA ? "a CUDA" : "an OpenCL",
		       rc_names_join_if(RC_NAMES_ENGINE, engine_would_run, &o, l, sizeof l));
}

/* The summary (job_spec_summary's JSON, taken) with the job's memory plan
 * as memory_plan; NULL stays NULL. */
static char *with_memory_plan(char *summary, const rc_ooc_plan *p)
{
	json_t *j = summary ? json_loads(summary, 0, NULL) : NULL;
	if (!j)
		return summary;
	json_object_set_new(j, "memory_plan", job_plan_json(p));
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return summary;
	free(summary);
	return s;
}

enum MHD_Result http_jobs_create_end(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	if (r->body_too_big)
		return http_fail(c, r, RC_EBODYTOOBIG, "", "the job spec is longer than the limit of %llu bytes",
				 (unsigned long long)a->cfg->max_body);
	if (!r->body_len)
		return http_fail(c, r, RC_EBADJSON, "", "the body must be a JSON job spec (api/openapi.yaml JobSpec)");
	job_spec *spec = NULL;
	rc_err err;
	rc_err_clear(&err);
	if (jscan_check(r->body, r->body_len, &jscan_spec_limits, &err))
		return http_error_rc(c, r, &err);
	if (parse_enter())
		return http_fail(c, r, RC_EUNAVAIL, "", "too many job specs are being parsed; retry shortly");
	int prc = job_spec_parse(r->body, r->body_len, a->cfg->max_job_bytes, &spec, &err);
	parse_leave();
	if (prc)
		return http_error_rc(c, r, &err);
	/* A combination no engine runs (trigeneous on parallel, tensor
	 * on cone, ...) is refused now (RC_EUNSUPPORTED: 422 "unsupported",
	 * naming what runs), not accepted and failed by the worker later. */
	if (rc_recon_check(&spec->r, &err) || engine_offered(a, &spec->r, &err) ||
	    runner_mpi_offered(a->cfg, spec->ranks, &err)) {
		job_spec_free(spec);
		return http_error_rc(c, r, &err);
	}
	/* a job only names destinations the operator configured */
	for (int i = 0; i < spec->out.npush; i++)
		if (!destinations_find(a->cfg->dests, a->cfg->ndests, spec->out.push[i])) {
			char names[400] = "";
			for (int k = 0; k < a->cfg->ndests; k++)
				snprintf(names + strlen(names), sizeof names - strlen(names), "%s\"%s\"", k ? ", " : "",
					 a->cfg->dests[k].name);
			char field[32];
			snprintf(field, sizeof field, "output.push[%d]", i);
			rc_fail(&err, RC_EINVAL, field, "%s names \"%s\", which is not a configured destination; %s%s",
				field, spec->out.push[i], a->cfg->ndests ? "configured: " : "none is configured",
				names);
			job_spec_free(spec);
			return http_error_rc(c, r, &err);
		}
	/* The worker's predicted peak memory against the budget (--memory-limit,
	 * else the machine's less a reserve): a job over it runs FDK (or CGLS) in z-slabs
	 * out of core where those fit (spec.h, job_spec_plan); one that cannot fit at all
	 * is refused now, naming the memory it needs, not run into the OOM
	 * killer. */
	uint64_t machine = 0, budget = config_memory_budget(a->cfg, &machine);
	rc_ooc_plan mplan;
	if (job_spec_plan(spec, budget, a->cfg->memory_limit ? "the operator's --memory-limit"
							      : "the machine's memory less its reserve", &mplan, &err)) {
		job_spec_free(spec);
		return http_error_rc(c, r, &err);
	}
	/* ranks on this machine share its budget: the plan is one rank's */
	if (spec->ranks > 1 && budget && runner_mpi_local(a->cfg) &&
	    (double)mplan.predicted_bytes * spec->ranks > (double)budget) {
		rc_fail(&err, RC_EUNSUPPORTED, "execution.ranks",
			"the %d ranks run on this machine (the daemon has no --mpi-hosts or --mpi-hostfile) and together "
			"need about %llu bytes (%llu each); a job may take %llu bytes: ask for fewer ranks, or let the "
			"operator list the hosts to spread them over",
			spec->ranks, (unsigned long long)mplan.predicted_bytes * (unsigned long long)spec->ranks,
			(unsigned long long)mplan.predicted_bytes, (unsigned long long)budget);
		job_spec_free(spec);
		return http_error_rc(c, r, &err);
	}
	uuid_t u;
	char id[37];
	uuid_generate_random(u);
	uuid_unparse_lower(u, id);
	char *summary = with_memory_plan(job_spec_summary(spec), &mplan);
	int rc = store_create_owned(a->st, id, spec, r->body, r->body_len, summary ? summary : "{}", r->who, &err);
	free(summary);
	if (rc) {
		rlog(LOG_P_ERR, "job_create_failed", "error=\"%s\"", rlog_q(err.msg));
		job_spec_free(spec);
		return http_error_rc(c, r, &err);
	}
	/* No label: labels may name patients, and the log is no place for them. */
	rlog(LOG_P_INFO, "job_created", "id=%s views=%d bytes=%llu client=%s token=%s", id, spec->nviews,
	     (unsigned long long)spec->proj_bytes, r->client, r->who);
	job_spec_free(spec);
	snprintf(r->id, sizeof r->id, "%s", id);
	snprintf(r->path, sizeof r->path, "/v1/jobs/%s", id);
	app_job_changed(a, id);

	job_row row;
	if (store_get(a->st, id, 1, &row, &err))
		return http_error_rc(c, r, &err);
	json_t *j = app_job_json(a, &row);
	http_job_phi(r, row.owner, id, j);
	job_row_clear(&row);
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
	char loc[64];
	snprintf(loc, sizeof loc, "/v1/jobs/%s", id);
	MHD_add_response_header(resp, "Location", loc);
	MHD_add_response_header(resp, "Content-Type", "application/json");
	return http_answer(c, r, 201, resp);
}

/* api/openapi.yaml says the same: offset's maximum. */
#define JOBS_OFFSET_MAX 1000000000L

enum MHD_Result http_jobs_list(struct MHD_Connection *c, req *r)
{
	long limit = 100, offset = 0;
	int state = -1;
	const char *st = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "state");
	if (http_arg_int(c, "limit", 1, 1000, &limit))
		return http_fail(c, r, RC_EINVAL, "limit", "limit must be a whole number from 1 to 1000");
	if (http_arg_int(c, "offset", 0, JOBS_OFFSET_MAX, &offset))
		return http_fail(c, r, RC_EINVAL, "offset", "offset must be a whole number from 0 to %ld", JOBS_OFFSET_MAX);
	if (st) {
		job_state s;
		if (job_state_parse(st, &s))
			return http_fail(c, r, RC_EINVAL, "state",
					 "state must be one of created, receiving, queued, running, succeeded, failed, cancelled");
		state = (int)s;
	}
	job_row *rows = NULL;
	int n = 0, total = 0;
	rc_err err;
	if (store_list(r->a->st, state, (int)limit, (int)offset, &rows, &n, &total, &err))
		return http_error_rc(c, r, &err);
	json_t *arr = json_array();
	phi_ids shown = { .n = 0 };
	for (int i = 0; i < n; i++) {
		json_t *j = app_job_json(r->a, &rows[i]);
		if (http_job_show(r, rows[i].owner, j))
			http_phi_ids_add(r, &shown, rows[i].id);
		json_array_append_new(arr, j);
		job_row_clear(&rows[i]);
	}
	free(rows);
	http_phi_ids_add(r, &shown, NULL);
	return http_json(c, r, 200, json_pack("{sosisisi}", "jobs", arr, "total", total, "limit", (int)limit,
					      "offset", (int)offset));
}

enum MHD_Result http_jobs_get(struct MHD_Connection *c, req *r)
{
	job_row row;
	rc_err err;
	if (store_get(r->a->st, r->id, 1, &row, &err))
		return http_error_rc(c, r, &err);
	json_t *j = app_job_json(r->a, &row);
	app_job_add_dicom(r->a, r->id, j);
	http_job_phi(r, row.owner, r->id, j);
	job_row_clear(&row);
	return http_json(c, r, 200, j);
}

enum MHD_Result http_jobs_delete(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	rc_err err;
	job_state s;
	enum MHD_Result ret;
	if (http_owner_state(c, r, &s, &ret))
		return ret;
	if (!(JOB_BIT(s) & JOB_FINAL))
		return http_fail(c, r, RC_ESTATE, "state", "job %s is %s: DELETE removes finished jobs only; cancel it first "
				 "(POST /v1/jobs/%s/cancel)", r->id, job_state_name(s), r->id);
	if (r->role < ROLE_ADMIN)
		return http_fail(c, r, RC_EFORBIDDEN, "", "deleting a finished job and its data needs the admin role");
	if (store_delete(a->st, r->id, &err))
		return http_error_rc(c, r, &err);
	rlog(LOG_P_INFO, "job_deleted", "id=%s client=%s token=%s", r->id, r->client, r->who);
	hub_publish(a->hub, r->id, "deleted", "{}");
	return http_answer(c, r, 204, MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT));
}

enum MHD_Result http_jobs_cancel(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	job_state after;
	rc_err err;
	enum MHD_Result ret;
	if (http_owner_check(c, r, &ret))
		return ret;
	if (store_cancel(a->st, r->id, &after, &err))
		return http_error_rc(c, r, &err);
	if (after == JOB_RUNNING)
		runner_cancel(a->run, r->id);
	else
		rlog(LOG_P_INFO, "job_cancelled", "id=%s client=%s token=%s", r->id, r->client, r->who);
	app_job_changed(a, r->id);
	return http_job(c, r, after == JOB_RUNNING ? 202 : 200, r->id);
}

enum MHD_Result http_jobs_start(struct MHD_Connection *c, req *r)
{
	int changed = 0;
	rc_err err;
	enum MHD_Result ret;
	job_state state;
	if (http_owner_state(c, r, &state, &ret))
		return ret;
	/* counts: the flat and dark first (http_calib.c); a job past receiving
	 * is store_start's to answer (a cancelled one's files are gone) */
	const char *missing = NULL;
	if ((JOB_BIT(state) & JOB_UPLOADABLE) && http_input_missing(r->a, r->id, &missing, &err))
		return http_error_rc(c, r, &err);
	if (missing)
		return http_input_refuse(c, r, missing, "a job of counts starts once its fields are in");
	if (store_start(r->a->st, r->id, &changed, &err))
		return http_error_rc(c, r, &err);
	if (changed) {
		rlog(LOG_P_INFO, "job_queued", "id=%s", r->id);
		app_job_changed(r->a, r->id);
		runner_kick(r->a->run);
	}
	return http_job(c, r, changed ? 202 : 200, r->id);
}

/* PATCH: the body is capped like a spec's (http_jobs_create_body gathers it). */
enum MHD_Result http_jobs_patch_begin(struct MHD_Connection *c, req *r)
{
	enum MHD_Result ret;
	if (http_owner_check(c, r, &ret)) /* first, as on every route that acts on a job */
		return ret;
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > body_limit(r))
		return http_fail(c, r, RC_EBODYTOOBIG, "", "the body is %.24s bytes; the limit is %llu", cl,
				 (unsigned long long)body_limit(r));
	return MHD_YES;
}

/* The one change PATCH makes: {"priority": N}, N as at creation (spec.c:
 * an integer 0..9), while the job has not started.  Priority orders the
 * queue only, so a running or finished job has none left to change. */
enum MHD_Result http_jobs_patch_end(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	rc_err err;
	if (r->body_too_big)
		return http_fail(c, r, RC_EBODYTOOBIG, "", "the body is longer than the limit of %llu bytes",
				 (unsigned long long)body_limit(r));
	json_error_t jerr;
	json_t *root = r->body_len ? json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	if (!root)
		return http_fail(c, r, RC_EBADJSON, "", "the body must be a JSON object such as {\"priority\": 7}%s%s",
				 r->body_len ? ": " : "", r->body_len ? jerr.text : "");
	long long prio = 0;
	int rc = 0;
	const char *key;
	json_t *v;
	if (!json_is_object(root))
		rc = rc_fail(&err, RC_EBADJSON, "", "the body must be a JSON object such as {\"priority\": 7}");
	json_object_foreach(root, key, v) {
		if (!rc && strcmp(key, "priority"))
			rc = rc_fail(&err, RC_EINVAL, key, "%.64s cannot be changed: PATCH takes {\"priority\": N} only", key);
	}
	if (!rc)
		rc = jf_int(root, "", "priority", 1, 0, 9, &prio, &err);
	json_decref(root);
	if (rc)
		return http_error_rc(c, r, &err);
	job_state was;
	if (store_set_priority(a->st, r->id, (int)prio, &was, &err))
		return http_error_rc(c, r, &err);
	rlog(LOG_P_INFO, "job_priority", "id=%s priority=%lld state=%s client=%s token=%s", r->id, prio,
	     job_state_name(was), r->client, r->who);
	app_job_changed(a, r->id);
	return http_job(c, r, 200, r->id);
}
