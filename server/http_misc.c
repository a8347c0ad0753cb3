/*
 * http_misc: /v1/devices, /healthz, /readyz, /metrics.
 *
 * Devices: the CPU engine is always there; the engines of other builds
 * (OpenCL, CUDA) are listed by the worker's report per job.  A device
 * registry in core/ (issue 4) will replace this list; until then the CPU is
 * described from the host (cores, memory, model name).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_internal.h"

static void cpu_model(char *buf, size_t n)
{
	snprintf(buf, n, "cpu");
	FILE *f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "model name", 10)) {
			char *p = strchr(line, ':');
			if (p) {
				p++;
				while (*p == ' ')
					p++;
				p[strcspn(p, "\n")] = '\0';
				snprintf(buf, n, "%s", p);
			}
			break;
		}
	}
	fclose(f);
}

enum MHD_Result misc_devices(struct MHD_Connection *c, req *r)
{
	const char *state = runner_busy(r->a->run) ? "busy" : "idle";
	json_t *probed = runner_devices(r->a->run);
	json_t *out = json_array();
	size_t i;
	json_t *d;
	json_array_foreach(probed, i, d) {
		json_t *copy = json_deep_copy(d);
		json_object_set_new(copy, "state", json_string(state));
		json_object_set_new(copy, "model", json_null());
		json_array_append_new(out, copy);
	}
	json_decref(probed);
	if (json_array_size(out) == 0) { /* not probed (yet): the host CPU */
		char model[256];
		cpu_model(model, sizeof model);
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		json_array_append_new(out, json_pack("{sssssssIsisssn}", "name", model, "engine", "cpu", "device_id",
						     "cpu:0", "memory_bytes", (json_int_t)pages * psz, "compute_units",
						     (int)sysconf(_SC_NPROCESSORS_ONLN), "state", state, "model"));
	}
	return http_json(c, r, 200, json_pack("{so}", "devices", out));
}

enum MHD_Result misc_health(struct MHD_Connection *c, req *r, int ready)
{
	if (!ready)
		return http_json(c, r, 200, json_pack("{ssss}", "status", "ok", "version", "1.0.0"));
	int counts[JOB_NSTATES];
	int store_ok = store_counts(r->a->st, counts, NULL) == 0;
	int runner_ok = runner_healthy(r->a->run);
	int probed = runner_probed(r->a->run);
	json_t *devs = runner_devices(r->a->run);
	int ndev = devs ? (int)json_array_size(devs) : 1;
	json_decref(devs);
	int ok = store_ok && runner_ok && probed && !atomic_load(&r->a->stopping);
	return http_json(c, r, ok ? 200 : 503, json_pack("{sssssssiss}", "status", ok ? "ready" : "not_ready",
							 "store", store_ok ? "ok" : "error", "runner",
							 runner_ok ? "ok" : "stalled", "devices", probed ? ndev : 0, "version", "1.0.0"));
}

enum MHD_Result misc_metrics(struct MHD_Connection *c, req *r)
{
	char *text = metrics_render(r->a->met, r->a->st);
	if (!text)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
	return http_answer(c, r, 200, resp);
}
