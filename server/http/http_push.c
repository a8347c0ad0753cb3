/*
 * http_push: GET /v1/destinations (the configured PACS: names, kinds and
 * addresses, never credentials) and POST /v1/jobs/{id}/push (send the
 * series again to every destination the job names, e.g. after
 * send_failed, or after the PACS lost it).
 */
#include <stdio.h>

#include "http/http_routes.h"
#include "base/log.h"
#include "pacs/pusher.h"

enum MHD_Result http_push_destinations(struct MHD_Connection *c, req *r)
{
	const config *cfg = r->a->cfg;
	json_t *d = destinations_json(cfg->dests, cfg->ndests);
	if (!d)
		return MHD_NO;
	return http_json(c, r, 200, json_pack("{so}", "destinations", d));
}

enum MHD_Result http_push_post(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	rc_err err;
	job_state st;
	enum MHD_Result ret;
	if (http_owner_state(c, r, &st, &ret))
		return ret;
	if (st != JOB_SUCCEEDED)
		return http_fail(c, r, RC_ESTATE, "state", "job %s is %s; its series can be pushed once it has succeeded",
				 r->id, job_state_name(st));
	int n = 0;
	if (store_push_again(a->st, r->id, &n, &err)) {
		if (err.code == RC_ENOTFOUND) /* the job exists: a request the job can't take */
			err.code = RC_ESTATE;
		return http_error_rc(c, r, &err);
	}
	rlog(LOG_P_INFO, "push_requested", "id=%s destinations=%d client=%s token=%s", r->id, n, r->client, r->who);
	pusher_kick(a->push);
	app_job_changed(a, r->id);
	return http_job(c, r, 202, r->id);
}
