/*
 * http_misc: /v1/devices, /healthz, /readyz, /metrics.
 *
 * Devices: the list the worker's `--devices` probe printed at start (drivers
 * are loaded only in workers), with the ids of core's device registry; the
 * fitted models are read from STATE/models (app.h's state_dir) on every request (plain files, no
 * driver), so the refit of the job that just ended shows at once.  Before the
 * probe has answered: the host CPU alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http_routes.h"
#include "jobs/node.h"

enum MHD_Result http_misc_devices(struct MHD_Connection *c, req *r)
{
	return http_json(c, r, 200, json_pack("{so}", "devices", node_devices_json(r->a)));
}

/* GET /v1/nodes: every node's row; alive by the store's clock (node.h). */
enum MHD_Result http_misc_nodes(struct MHD_Connection *c, req *r)
{
	node_row *rows = NULL;
	int n = 0;
	rc_err err;
	if (store_nodes_list(r->a->st, &rows, &n, &err))
		return http_error_rc(c, r, &err);
	json_t *out = json_array();
	for (int i = 0; i < n; i++) {
		json_t *devs = rows[i].devices ? json_loads(rows[i].devices, 0, NULL) : NULL;
		if (!json_is_array(devs)) {
			json_decref(devs);
			devs = json_array();
		}
		json_array_append_new(out, json_pack("{sssosososbso}", "name", rows[i].name, "devices", devs, "running",
						     rows[i].running[0] ? json_string(rows[i].running) : json_null(),
						     "heartbeat", app_ts_json(rows[i].heartbeat), "alive",
						     rows[i].age_s < NODE_ALIVE_S, "started", app_ts_json(rows[i].started)));
		node_row_clear(&rows[i]);
	}
	free(rows);
	return http_json(c, r, 200, json_pack("{so}", "nodes", out));
}

enum MHD_Result http_misc_health(struct MHD_Connection *c, req *r, int ready)
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

enum MHD_Result http_misc_metrics(struct MHD_Connection *c, req *r)
{
	char *text = metrics_render(r->a->met, r->a->st);
	if (!text)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
	return http_answer(c, r, 200, resp);
}
