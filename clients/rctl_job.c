/* rctl_job: see rctl_job.h. */
#include "rctl_job.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "rctl_http.h"

static double num_or(json_t *j, double dflt)
{
	return json_is_number(j) ? json_number_value(j) : dflt;
}

void rctl_job_view_of(json_t *j, rctl_job_view *v)
{
	memset(v, 0, sizeof *v);
	v->fraction = -1;
	v->iteration = v->of = -1;
	v->eta_s = -1;
	if (!json_is_object(j))
		return;
	v->id = json_string_value(json_object_get(j, "id"));
	v->state = json_string_value(json_object_get(j, "state"));
	v->label = json_string_value(json_object_get(j, "label"));
	json_t *e = json_object_get(j, "error");
	v->error = json_is_string(e) ? json_string_value(e)
				     : json_string_value(json_object_get(e, "message"));
	/* Progress fields sit in "progress" in a job and may sit at the top of an event. */
	json_t *p = json_object_get(j, "progress");
	if (!json_is_object(p))
		p = j;
	v->fraction = num_or(json_object_get(p, "fraction"), -1);
	v->iteration = (long)num_or(json_object_get(p, "iteration"), -1);
	v->of = (long)num_or(json_object_get(p, "iterations"), -1);
	v->stopped = json_string_value(json_object_get(p, "stopped"));
	v->phase = json_string_value(json_object_get(p, "phase"));
	v->views_done = (long)num_or(json_object_get(p, "views_done"), 0);
	v->views_expected = (long)num_or(json_object_get(p, "views_expected"), 0);
	if (v->of < 0) /* a server older than "iterations" */
		v->of = (long)num_or(json_object_get(p, "of"), -1);
	v->eta_s = num_or(json_object_get(p, "eta_s"), -1);
	if (v->fraction < 0 && v->iteration >= 0 && v->of > 0)
		v->fraction = (double)v->iteration / (double)v->of;
}

int rctl_state_terminal(const char *s)
{
	return s && (!strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled"));
}

int rctl_state_exit(const char *s)
{
	if (s && !strcmp(s, "failed"))
		return RCTL_EXIT_FAILED;
	if (s && !strcmp(s, "cancelled"))
		return RCTL_EXIT_CANCELLED;
	return RCTL_EXIT_OK;
}

void rctl_job_progress_text(const rctl_job_view *v, char *buf, size_t n)
{
	size_t len = 0;
	buf[0] = '\0';
#define ADD(...) do { if (len < n) len += (size_t)snprintf(buf + len, n - len, __VA_ARGS__); } while (0)
	ADD("%s", v->state ? v->state : "?");
	if (v->views_expected > 0)
		ADD(", streaming: view %ld/%ld back-projected", v->views_done, v->views_expected);
	else if (v->phase && !strcmp(v->phase, "fdk_start"))
		ADD(", computing the FDK start");
	else if (v->phase && !strcmp(v->phase, "building_matrix"))
		ADD(", building the system matrix");
	else if (v->phase && !strcmp(v->phase, "loading_matrix"))
		ADD(", loading the system matrix");
	else if (v->iteration >= 0 && v->of > 0)
		ADD(", iteration %ld of %ld", v->iteration, v->of);
	if (v->stopped) {
		static const char *const why[][2] = { { "stagnation", "the residual stopped falling" },
						      { "tolerance", "the residual fell below the tolerance" },
						      { "discrepancy", "the residual reached the noise level" } };
		ADD(", stopped: %s", v->stopped);
		for (size_t i = 0; i < sizeof why / sizeof why[0]; i++)
			if (!strcmp(v->stopped, why[i][0]))
				ADD(" (%s)", why[i][1]);
	}
	if (v->eta_s >= 0 && !rctl_state_terminal(v->state))
		ADD(", ETA %.0f s", v->eta_s);
#undef ADD
}

int rctl_valid_id(const char *id)
{
	static const int dash[] = { 8, 13, 18, 23 };
	if (!id || strlen(id) != 36)
		return 0;
	for (int i = 0, d = 0; i < 36; i++) {
		if (d < 4 && i == dash[d]) {
			if (id[i] != '-')
				return 0;
			d++;
		} else if (!isxdigit((unsigned char)id[i])) {
			return 0;
		}
	}
	return 1;
}

json_t *rctl_list_items(json_t *body, const char *key)
{
	if (json_is_array(body))
		return body;
	json_t *a = json_object_get(body, key);
	return json_is_array(a) ? a : NULL;
}

const char *rctl_str_or(json_t *j, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? s : dflt;
}

void rctl_print_warnings(json_t *job, FILE *out)
{
	json_t *res = json_object_get(job, "result"), *w;
	json_t *rr = json_object_get(res, "relative_residual"), *nr = json_object_get(res, "noise_relative");
	size_t i;
	if (json_is_number(rr)) {
		fprintf(out, "residual: %.3g relative", json_number_value(rr));
		if (json_is_number(nr))
			fprintf(out, " (noise %.3g)", json_number_value(nr));
		fputc('\n', out);
	}
	json_array_foreach(json_object_get(job, "warnings"), i, w)
		fprintf(out, "warning:  %s: %s\n", rctl_str_or(w, "code", "?"), rctl_str_or(w, "message", ""));
}
