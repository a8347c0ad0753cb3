/*
 * The small commands: list, status, cancel, priority, delete, devices.  Each is one
 * request; --json prints the server's answer as it came, otherwise a short
 * table or summary.
 */
#include "rctl_cmd.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "rctl_job.h"

int rctl_show_progress(const rctl_args *a)
{
	return !a->quiet && !a->json && isatty(STDERR_FILENO);
}

void rctl_print_json(json_t *j)
{
	char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	printf("%s\n", s ? s : "null");
	free(s);
}

/* One request whose answer is printed as JSON or handed to a printer. */
static int simple(rctl_conn *c, const rctl_args *a, const char *method,
		  const char *path, void (*print)(json_t *))
{
	json_t *j = NULL;
	rctl_fail f;
	if (rctl_request(c, method, path, NULL, &j, &f) < 0) {
		rctl_fail_print(&f);
		return rctl_fail_exit(&f);
	}
	if (a->json)
		rctl_print_json(j);
	else
		print(j);
	json_decref(j);
	return RCTL_EXIT_OK;
}

static void print_list(json_t *body)
{
	json_t *items = rctl_list_items(body, "jobs"), *j;
	size_t i;
	printf("%-36s  %-10s  %-24s  %s\n", "ID", "STATE", "PROGRESS", "LABEL");
	json_array_foreach(items, i, j) {
		rctl_job_view v;
		char prog[64] = "";
		rctl_job_view_of(j, &v);
		if (v.iteration >= 0 && v.of > 0)
			snprintf(prog, sizeof prog, "%ld/%ld", v.iteration, v.of);
		else if (v.fraction >= 0)
			snprintf(prog, sizeof prog, "%.0f%%", v.fraction * 100);
		printf("%-36s  %-10s  %-24s  %s\n", v.id ? v.id : "?", v.state ? v.state : "?",
		       prog, v.label ? v.label : "");
	}
}

int rctl_cmd_list(rctl_conn *c, const rctl_args *a)
{
	char path[256] = "/v1/jobs";
	char *sep = "?";
	if (a->state) {
		char *esc = curl_easy_escape(NULL, a->state, 0);
		if (!esc)
			return RCTL_EXIT_SERVER;
		snprintf(path + strlen(path), sizeof path - strlen(path), "%sstate=%s", sep, esc);
		curl_free(esc);
		sep = "&";
	}
	if (a->limit > 0)
		snprintf(path + strlen(path), sizeof path - strlen(path), "%slimit=%ld", sep, a->limit);
	return simple(c, a, "GET", path, print_list);
}

static void print_status(json_t *j)
{
	rctl_job_view v;
	char text[160];
	rctl_job_view_of(j, &v);
	rctl_job_progress_text(&v, text, sizeof text);
	printf("id:       %s\n", v.id ? v.id : "?");
	if (v.label)
		printf("label:    %s\n", v.label);
	printf("state:    %s\n", text);
	if (v.error)
		printf("error:    %s\n", v.error);
	rctl_print_warnings(j, stdout);
	rctl_print_delivery(j);
}

int rctl_cmd_status(rctl_conn *c, const rctl_args *a)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/jobs/%s", a->pos[0]);
	return simple(c, a, "GET", path, print_status);
}

/* cancel never deletes: a job that has already ended (409) is left as it is. */
int rctl_cmd_cancel(rctl_conn *c, const rctl_args *a)
{
	char path[128];
	json_t *j = NULL;
	rctl_fail f;
	rctl_job_view v;
	snprintf(path, sizeof path, "/v1/jobs/%s/cancel", a->pos[0]);
	if (rctl_request(c, "POST", path, NULL, &j, &f) < 0) {
		if (f.status != 409)
			goto out_fail;
		snprintf(path, sizeof path, "/v1/jobs/%s", a->pos[0]);
		if (rctl_request(c, "GET", path, NULL, &j, &f) < 0)
			goto out_fail;
		rctl_job_view_of(j, &v);
		fprintf(stderr, "reconctl: job %s already %s; nothing to cancel (delete removes it)\n",
			a->pos[0], v.state ? v.state : "ended");
		if (a->json)
			rctl_print_json(j);
		else
			printf("%s %s\n", a->pos[0], v.state ? v.state : "ended");
		json_decref(j);
		return RCTL_EXIT_OK;
	}
	if (a->json) {
		rctl_print_json(j);
	} else {
		/* A running job answers 202 and stops within one iteration. */
		rctl_job_view_of(j, &v);
		int pending = json_is_true(json_object_get(j, "cancel_requested")) &&
			      !(v.state && !strcmp(v.state, "cancelled"));
		printf("%s %s\n", a->pos[0], pending ? "cancelling" : v.state ? v.state : "cancelled");
	}
	json_decref(j);
	return RCTL_EXIT_OK;
out_fail:
	json_decref(j);
	rctl_fail_print(&f);
	return rctl_fail_exit(&f);
}

/* priority N (0..9, as in a spec) reorders the queue: PATCH /v1/jobs/{id}.
 * A job that runs or has finished is refused (409, exit 2) and stays as it
 * is; N out of range is a usage error, checked before any request. */
int rctl_cmd_priority(rctl_conn *c, const rctl_args *a)
{
	char path[128], body[48], *end;
	json_t *j = NULL;
	rctl_fail f;
	long prio = strtol(a->pos[1], &end, 10);
	if (!*a->pos[1] || *end || strspn(a->pos[1], "0123456789") != strlen(a->pos[1]) || prio > 9) {
		fprintf(stderr, "reconctl: the priority must be a whole number from 0 to 9 (got '%s')\n", a->pos[1]);
		return RCTL_EXIT_USAGE;
	}
	snprintf(path, sizeof path, "/v1/jobs/%s", a->pos[0]);
	snprintf(body, sizeof body, "{\"priority\": %ld}", prio);
	if (rctl_request(c, "PATCH", path, body, &j, &f) < 0) {
		rctl_fail_print(&f);
		return rctl_fail_exit(&f);
	}
	if (a->json) {
		rctl_print_json(j);
	} else {
		rctl_job_view v;
		rctl_job_view_of(j, &v);
		printf("%s priority %ld %s\n", a->pos[0], prio, v.state ? v.state : "");
	}
	json_decref(j);
	return RCTL_EXIT_OK;
}

/* delete removes a finished job; one that has not finished is refused (409)
 * and stays as it is: cancel it first. */
int rctl_cmd_delete(rctl_conn *c, const rctl_args *a)
{
	char path[128];
	rctl_fail f;
	snprintf(path, sizeof path, "/v1/jobs/%s", a->pos[0]);
	if (rctl_request(c, "DELETE", path, NULL, NULL, &f) < 0) {
		rctl_fail_print(&f);
		if (f.status == 409)
			fprintf(stderr, "reconctl: the job has not finished: reconctl cancel %s, then delete it\n",
				a->pos[0]);
		return rctl_fail_exit(&f);
	}
	if (a->json)
		rctl_print_json(NULL); /* 204: no body */
	else
		printf("%s deleted\n", a->pos[0]);
	return RCTL_EXIT_OK;
}

static void print_devices(json_t *body)
{
	json_t *items = rctl_list_items(body, "devices"), *d;
	size_t i;
	printf("%-32s  %-8s  %-12s  %10s  %s\n", "NAME", "ENGINE", "STATE", "MEMORY MB", "DEVICE ID");
	json_array_foreach(items, i, d) {
		json_t *mem = json_object_get(d, "memory_bytes");
		if (!mem)
			mem = json_object_get(d, "memory");
		char mb[32] = "-";
		if (json_is_number(mem))
			snprintf(mb, sizeof mb, "%.0f", json_number_value(mem) / 1048576.0);
		printf("%-32s  %-8s  %-12s  %10s  %s\n", rctl_str_or(d, "name", "-"),
		       rctl_str_or(d, "engine", "-"), rctl_str_or(d, "state", "-"), mb, rctl_str_or(d, "device_id", "-"));
		/* its fitted models, one line each: T = a * views + b ms */
		json_t *m;
		size_t k;
		json_array_foreach(json_object_get(d, "models"), k, m) {
			json_t *a = json_object_get(m, "a"), *b = json_object_get(m, "b");
			if (json_is_number(a) && json_is_number(b))
				printf("    model %s %-7s  %.4g ms/view %c %.4g ms  (%lld samples, %s)\n", rctl_str_or(m, "shape", "-"),
				       rctl_str_or(m, "task", "-"), json_number_value(a), json_number_value(b) < 0 ? '-' : '+',
				       fabs(json_number_value(b)),
				       (long long)json_integer_value(json_object_get(m, "samples")), rctl_str_or(m, "updated", "-"));
			else
				printf("    model %s %-7s  not fitted yet  (%lld samples)\n", rctl_str_or(m, "shape", "-"),
				       rctl_str_or(m, "task", "-"), (long long)json_integer_value(json_object_get(m, "samples")));
		}
	}
}

int rctl_cmd_devices(rctl_conn *c, const rctl_args *a)
{
	return simple(c, a, "GET", "/v1/devices", print_devices);
}

/* One line per node: a cluster's daemons (one with SQLite). */
static void print_nodes(json_t *body)
{
	json_t *items = rctl_list_items(body, "nodes"), *n;
	size_t i;
	printf("%-24s  %-5s  %-36s  %-24s  %s\n", "NODE", "ALIVE", "RUNNING", "HEARTBEAT", "ENGINES");
	json_array_foreach(items, i, n) {
		char engines[128] = "";
		json_t *d;
		size_t k;
		json_array_foreach(json_object_get(n, "devices"), k, d) {
			const char *e = rctl_str_or(d, "engine", "?");
			if (!strstr(engines, e) && strlen(engines) + strlen(e) + 2 < sizeof engines)
				snprintf(engines + strlen(engines), sizeof engines - strlen(engines), "%s%s", engines[0] ? "," : "",
					 e);
		}
		printf("%-24s  %-5s  %-36s  %-24s  %s\n", rctl_str_or(n, "name", "-"),
		       json_is_true(json_object_get(n, "alive")) ? "yes" : "no", rctl_str_or(n, "running", "-"),
		       rctl_str_or(n, "heartbeat", "-"), engines[0] ? engines : "-");
	}
}

int rctl_cmd_nodes(rctl_conn *c, const rctl_args *a)
{
	return simple(c, a, "GET", "/v1/nodes", print_nodes);
}
