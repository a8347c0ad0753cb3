/*
 * http_misc: /v1/devices, /healthz, /readyz, /metrics.
 *
 * Devices: the list the worker's `--devices` probe printed at start (drivers
 * are loaded only in workers), with the ids of core's device registry; the
 * fitted models are read from STORE/models on every request (plain files, no
 * driver), so the refit of the job that just ended shows at once.  Before the
 * probe has answered: the host CPU alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_json.h"
#include "backend/cpu/engine_cpu.h"
#include "http_internal.h"
#include "algo/names.h"

enum MHD_Result misc_devices(struct MHD_Connection *c, req *r)
{
	const char *state = runner_busy(r->a->run) ? "busy" : "idle";
	char model_dir[1100];
	snprintf(model_dir, sizeof model_dir, "%s/models", r->a->cfg->store);
	json_t *probed = runner_devices(r->a->run);
	json_t *out = json_array();
	size_t i;
	json_t *d;
	json_array_foreach(probed, i, d) {
		json_t *copy = json_deep_copy(d);
		const char *id = json_string_value(json_object_get(copy, "device_id"));
		json_object_set_new(copy, "state", json_string(state));
		json_object_set_new(copy, "models", device_models_json(id ? model_dir : NULL, id));
		json_array_append_new(out, copy);
	}
	json_decref(probed);
	if (json_array_size(out) == 0) { /* not probed (yet): the host CPU */
		char id[128], name[160];
		rc_cpu_identity(id, sizeof id, name, sizeof name);
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		json_array_append_new(out, json_pack("{sssssssssssIsissso}", "name", name, "engine",
						     rc_name_str(RC_NAMES_ENGINE, RC_ENGINE_CPU), "type", "cpu",
						     "device_id", id, "hw_group", "host-cpu", "memory_bytes",
						     (json_int_t)pages * psz, "compute_units",
						     (int)sysconf(_SC_NPROCESSORS_ONLN), "state", state, "models",
						     device_models_json(model_dir, id)));
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
