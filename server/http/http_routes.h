/*
 * http_routes: the routes that http.c's router calls, each named for its
 * file (http_jobs_*, http_upload_*, http_download_*, ...).  A route answers
 * with http_reply.h, http_error.h and http_owner.h and never calls the
 * router back.
 */
#ifndef RC_HTTP_ROUTES_H
#define RC_HTTP_ROUTES_H

#include "http/http_error.h"
#include "http/http_owner.h"
#include "http/http_reply.h"
#include "jobs/runner.h"

/* http_jobs.c (first call: no body yet) */
enum MHD_Result http_jobs_create_begin(struct MHD_Connection *c, req *r);
enum MHD_Result http_jobs_create_body(req *r, const char *data, size_t len);
enum MHD_Result http_jobs_create_end(struct MHD_Connection *c, req *r);
enum MHD_Result http_jobs_list(struct MHD_Connection *c, req *r);
enum MHD_Result http_jobs_get(struct MHD_Connection *c, req *r);
enum MHD_Result http_jobs_delete(struct MHD_Connection *c, req *r);
enum MHD_Result http_jobs_cancel(struct MHD_Connection *c, req *r);
enum MHD_Result http_jobs_start(struct MHD_Connection *c, req *r);
/* PATCH /v1/jobs/{id} {"priority": N}: the body is gathered by
 * http_jobs_create_body under the same cap. */
enum MHD_Result http_jobs_patch_begin(struct MHD_Connection *c, req *r);
enum MHD_Result http_jobs_patch_end(struct MHD_Connection *c, req *r);

/* http_upload.c */
enum MHD_Result http_upload_begin(struct MHD_Connection *c, req *r);
/* Counts every body byte itself: MHD_NO (close) once far more than the
 * views hold has arrived; the 413 for fewer comes from http_upload_end. */
enum MHD_Result http_upload_data(req *r, const char *data, size_t len);
enum MHD_Result http_upload_end(struct MHD_Connection *c, req *r);
void http_upload_free(req *r);

/* http_calib.c: PUT /v1/jobs/{id}/flat, /dark, /bad-pixels (field: an
 * input_field of spec_input.h); the body is gathered, checked and stored
 * durably before the 200. */
enum MHD_Result http_calib_begin(struct MHD_Connection *c, req *r, int field);
enum MHD_Result http_calib_data(req *r, const char *data, size_t len);
enum MHD_Result http_calib_end(struct MHD_Connection *c, req *r);
void http_calib_free(req *r);
/* The first field the job's input names "uploaded" that has not been
 * ("flat", "dark", "bad-pixels") in *missing, NULL when none; an error
 * reading the stored spec. */
int http_input_missing(app *a, const char *id, const char **missing, rc_err *err);
/* 409 naming the missing field; why: what waits for it. */
enum MHD_Result http_input_refuse(struct MHD_Connection *c, req *r, const char *missing, const char *why);

/* http_download.c */
enum MHD_Result http_download_volume(struct MHD_Connection *c, req *r);
/* format=dicom (http_dicom.c): the series as a ZIP, or multipart/related
 * when the client's Accept asks for it (DICOMweb WADO-RS). */
enum MHD_Result http_dicom_volume(struct MHD_Connection *c, req *r);
/* http_push.c: GET /v1/destinations, POST /v1/jobs/{id}/push */
enum MHD_Result http_push_destinations(struct MHD_Connection *c, req *r);
enum MHD_Result http_push_post(struct MHD_Connection *c, req *r);
/* http_sse.c: GET /v1/jobs/{id}/events */
enum MHD_Result http_sse_events(struct MHD_Connection *c, req *r);
/* GET /v1/jobs/{id}/preview (http_preview.c): one slice as a PNG. */
enum MHD_Result http_preview_get(struct MHD_Connection *c, req *r);
/* GET /v1/jobs/{id}/geometry?format=rtk (http_geometry.c): RTK's geometry XML. */
enum MHD_Result http_geometry_get(struct MHD_Connection *c, req *r);
/* http_misc.c: /v1/devices, /v1/nodes, /healthz, /readyz, /metrics */
enum MHD_Result http_misc_devices(struct MHD_Connection *c, req *r);
enum MHD_Result http_misc_nodes(struct MHD_Connection *c, req *r);
enum MHD_Result http_misc_health(struct MHD_Connection *c, req *r, int ready);
enum MHD_Result http_misc_metrics(struct MHD_Connection *c, req *r);
/* The operator page and its files (http_www.c, www.h). */
enum MHD_Result http_www_get(struct MHD_Connection *c, req *r);

#endif
