/*
 * app_push: the DICOM parts of the Job resource (api/openapi.yaml): the
 * pushes to PACS with their progress (every form of the job), and, for
 * GET /v1/jobs/{id} alone, the patient and study fields as given and the
 * series once written.  Patient fields are answered to whoever may read
 * the job, never logged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/app.h"
#include "base/log.h"
#include "pacs/dicom_series.h"
#include "spec.h"

void app_job_add_push(app *a, const job_row *r, json_t *j)
{
	push_row *p = NULL;
	int n = 0;
	store_push_list(a->st, r->id, &p, &n, NULL);
	json_t *arr = json_array();
	int pending = 0, failed = 0, held = 0;
	for (int i = 0; i < n; i++) {
		int h = p[i].state == PUSH_PENDING && p[i].next_try >= PUSH_HELD_TRY;
		const destination *d = destinations_find(a->cfg->dests, a->cfg->ndests, p[i].dest);
		json_array_append_new(
			arr, json_pack("{sssosssisisiso*so*}", "destination", p[i].dest, "kind",
				       d ? json_string(dest_kind_name(d->kind)) : json_null(), "state",
				       push_state_name(p[i].state), "instances_sent", p[i].sent, "instances", p[i].total,
				       "attempts", p[i].attempts, "error", p[i].error[0] ? json_string(p[i].error) : NULL,
				       "next_attempt", p[i].state == PUSH_PENDING && !h ? app_ts_json(p[i].next_try) : NULL));
		held += h;
		pending += (p[i].state == PUSH_PENDING && !h) || p[i].state == PUSH_SENDING;
		failed += p[i].state == PUSH_FAILED;
	}
	free(p);
	const char *delivery = !n			   ? NULL
			       : r->state != JOB_SUCCEEDED ? (JOB_BIT(r->state) & JOB_FINAL ? "not_sent" : "waiting")
			       : held			   ? "awaiting_confirmation"
			       : pending		   ? "sending"
			       : failed			   ? "send_failed"
							   : "sent";
	json_object_set_new(j, "push", arr);
	json_object_set_new(j, "delivery", delivery ? json_string(delivery) : json_null());
}

void app_job_add_dicom(app *a, const char *id, json_t *j)
{
	char path[4200];
	job_output out;
	job_dicom d;
	store_job_path(a->st, id, "spec.json", path, sizeof path);
	json_t *dj = json_object();
	if (!job_spec_load_output(path, &out, &d, NULL)) {
		const char *const keys[] = { "patient_id", "patient_name", "patient_birth_date", "patient_sex",
					     "accession_number", "study_instance_uid", "study_description",
					     "series_description", "referring_physician", "institution" };
		const char *const vals[] = { d.patient_id, d.patient_name, d.patient_birth_date, d.patient_sex,
					     d.accession_number, d.study_instance_uid, d.study_description,
					     d.series_description, d.referring_physician, d.institution };
		for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
			if (vals[i][0])
				json_object_set_new(dj, keys[i], json_string(vals[i]));
		json_object_set_new(j, "water_mu_per_mm", json_real(out.water_mu_per_mm));
	}
	json_object_set_new(j, "dicom", dj);
	dicom_series ser;
	if (dicom_series_read(a->st, id, &ser))
		json_object_set_new(j, "dicom_series", json_null());
	else
		json_object_set_new(j, "dicom_series",
				    json_pack("{sisIsfsfssss}", "instances", ser.instances, "clamped_voxels",
					      (json_int_t)ser.clamped, "window_center", ser.window_center, "window_width",
					      ser.window_width, "study_instance_uid", ser.study_uid, "series_instance_uid",
					      ser.series_uid));
}

void app_push_hold(app *a, const char *id, const char *report)
{
	if (!a->cfg->push_confirm_warnings || !report)
		return;
	json_t *rep = json_loads(report, 0, NULL);
	json_t *ws = rep ? json_object_get(rep, "warnings") : NULL;
	size_t nw = json_array_size(ws);
	char codes[256] = "";
	for (size_t i = 0, len = 0; i < nw && len < sizeof codes; i++)
		len += (size_t)snprintf(codes + len, sizeof codes - len, "%s%s", i ? ", " : "",
					json_string_value(json_object_get(json_array_get(ws, i), "code"))
						? json_string_value(json_object_get(json_array_get(ws, i), "code")) : "?");
	json_decref(rep);
	push_row *p = NULL;
	int n = 0;
	store_push_list(a->st, id, &p, &n, NULL);
	for (int i = 0; i < n; i++) {
		if (p[i].state != PUSH_PENDING)
			continue;
		if (!nw) {
			/* a run without warnings releases what an earlier run of the
			 * job (one whose outcome was not recorded) held */
			if (p[i].next_try < PUSH_HELD_TRY)
				continue;
			p[i].next_try = 0;
			p[i].error[0] = '\0';
		} else {
			p[i].next_try = PUSH_HELD_TRY;
			snprintf(p[i].error, sizeof p[i].error,
				 "held for confirmation: the job has warnings (%s); POST /v1/jobs/%s/push sends it", codes,
				 id);
		}
		rc_err err;
		if (store_push_update(a->st, &p[i], &err))
			rlog(LOG_P_ERR, "store_error", "id=%s error=\"%s\"", id, rlog_q(err.msg));
	}
	free(p);
	if (n && nw)
		rlog(LOG_P_INFO, "push_held", "id=%s warnings=\"%s\"", id, rlog_q(codes));
}
