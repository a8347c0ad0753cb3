/*
 * The PACS commands: push (POST /v1/jobs/{id}/push: send the job's DICOM
 * series again to every destination of its output.push) and destinations
 * (GET /v1/destinations).  Like the small commands of rctl_cmd_info.c, each is
 * one request; --json prints the server's answer as it came.  The lines that
 * show a job's delivery and pushes are shared with status.
 */
#include "rctl_cmd.h"

#include <string.h>

#include "rctl_job.h"

void rctl_print_delivery(json_t *job)
{
	json_t *pushes = json_object_get(job, "push"), *p;
	const char *delivery = json_string_value(json_object_get(job, "delivery"));
	json_t *series = json_object_get(job, "dicom_series");
	size_t i;
	if (json_is_object(series))
		printf("dicom:    %lld instances, series %s\n",
		       (long long)json_integer_value(json_object_get(series, "instances")),
		       rctl_str_or(series, "series_instance_uid", "?"));
	if (!delivery && json_array_size(pushes) == 0)
		return; /* the job names no destination */
	printf("delivery: %s\n", delivery ? delivery : "-");
	json_array_foreach(pushes, i, p) {
		const char *err = json_string_value(json_object_get(p, "error"));
		const char *next = json_string_value(json_object_get(p, "next_attempt"));
		long long total = (long long)json_integer_value(json_object_get(p, "instances"));
		long long attempts = (long long)json_integer_value(json_object_get(p, "attempts"));
		char of[32] = "?"; /* "instances" is 0 until the first attempt: unknown then */
		if (total > 0)
			snprintf(of, sizeof of, "%lld", total);
		printf("push:     %-16s %-8s %-12s %lld/%s instances, %lld attempt%s",
		       rctl_str_or(p, "destination", "?"), rctl_str_or(p, "kind", "-"), rctl_str_or(p, "state", "?"),
		       (long long)json_integer_value(json_object_get(p, "instances_sent")), of,
		       attempts, attempts == 1 ? "" : "s");
		if (next)
			printf(", next %s", next);
		if (err)
			printf(": %s", err);
		putchar('\n');
	}
}

int rctl_cmd_push(rctl_conn *c, const rctl_args *a)
{
	char path[128];
	json_t *j = NULL;
	rctl_fail f;
	snprintf(path, sizeof path, "/v1/jobs/%s/push", a->pos[0]);
	if (rctl_request(c, "POST", path, NULL, &j, &f) < 0) {
		rctl_fail_print(&f);
		return rctl_fail_exit(&f);
	}
	if (a->json) {
		rctl_print_json(j);
	} else {
		printf("id:       %s\n", rctl_str_or(j, "id", a->pos[0]));
		rctl_print_delivery(j);
	}
	json_decref(j);
	return RCTL_EXIT_OK;
}

int rctl_cmd_destinations(rctl_conn *c, const rctl_args *a)
{
	json_t *j = NULL, *d;
	rctl_fail f;
	size_t i;
	if (rctl_request(c, "GET", "/v1/destinations", NULL, &j, &f) < 0) {
		rctl_fail_print(&f);
		return rctl_fail_exit(&f);
	}
	if (a->json) {
		rctl_print_json(j);
		json_decref(j);
		return RCTL_EXIT_OK;
	}
	printf("%-16s  %-8s  %-40s  %s\n", "NAME", "KIND", "ADDRESS", "DETAILS");
	json_array_foreach(rctl_list_items(j, "destinations"), i, d) {
		char addr[512], details[160] = "";
		const char *kind = rctl_str_or(d, "kind", "-");
		if (!strcmp(kind, "c-store")) {
			snprintf(addr, sizeof addr, "%s:%lld", rctl_str_or(d, "host", "?"),
				 (long long)json_integer_value(json_object_get(d, "port")));
			snprintf(details, sizeof details, "called_ae=%s calling_ae=%s",
				 rctl_str_or(d, "called_ae", "-"), rctl_str_or(d, "calling_ae", "-"));
		} else {
			snprintf(addr, sizeof addr, "%s", rctl_str_or(d, "url", "-"));
			if (json_is_true(json_object_get(d, "authenticated")))
				snprintf(details, sizeof details, "authenticated");
		}
		printf("%-16s  %-8s  %-40s  %s\n", rctl_str_or(d, "name", "-"), kind, addr, details);
	}
	json_decref(j);
	return RCTL_EXIT_OK;
}
