/*
 * http_internal: what the route files (http_jobs.c, http_upload.c,
 * http_download.c, http_sse.c, http_misc.c) share with http.c: the request
 * context kept in MHD's con_cls and the answer helpers.  Every answer goes
 * through http_answer so its status reaches the metrics and the audit log;
 * every error answer through http_error_rc, whose status is the code's.
 */
#ifndef RC_HTTP_INTERNAL_H
#define RC_HTTP_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdint.h>

#include "jobs/app.h"
#include "jobs/runner.h"

typedef enum route {
	R_NONE = 0,
	R_HEALTHZ, R_READYZ, R_METRICS, R_DEVICES,
	R_NODES,         /* /v1/nodes */
	R_JOBS,          /* /v1/jobs */
	R_JOB,           /* /v1/jobs/{id} */
	R_PROJ,          /* /v1/jobs/{id}/projections */
	R_VIEW,          /* /v1/jobs/{id}/projections/{k} */
	R_START, R_EVENTS, R_VOLUME,
	R_DESTINATIONS,  /* /v1/destinations */
	R_PUSH,          /* /v1/jobs/{id}/push */
	R_CANCEL,        /* /v1/jobs/{id}/cancel */
	R_PREVIEW,       /* /v1/jobs/{id}/preview */
	R_WWW,           /* /, /ui/...: the operator page (http_www.c) */
} route;

struct upload;

typedef struct req {
	app *a;
	struct http *http; /* its daemon (the preview cache) */
	route rt;
	char method[8];
	char path[256];
	char id[37];
	int k;
	auth_role role;
	int phi;         /* the token sees every job's patient fields (http_owner.c) */
	char who[64];
	char client[64];
	int audit;
	int answered;
	int deferred;      /* no body: routed and answered on the last call (http.c) */
	unsigned status;
	/* JSON body (POST /v1/jobs, PATCH /v1/jobs/{id}) */
	char *body;
	size_t body_len, body_cap;
	int body_too_big;
	/* projection upload */
	struct upload *up;
} req;

enum MHD_Result http_answer(struct MHD_Connection *c, req *r, unsigned status, struct MHD_Response *resp);
enum MHD_Result http_json(struct MHD_Connection *c, req *r, unsigned status, json_t *j);
/* Error answers (http_error.c).  The status comes from e->code alone
 * (http_status_of), never from the route: a route says what went wrong. */
enum MHD_Result http_error_rc(struct MHD_Connection *c, req *r, const rc_err *e);
/* The same with one more header that only the route knows (Allow on 405,
 * Content-Range on 416). */
enum MHD_Result http_error_rc_hdr(struct MHD_Connection *c, req *r, const rc_err *e, const char *hname,
				  const char *hval);
/* Builds the rc_err (as rc_fail does) and answers it. */
enum MHD_Result http_fail(struct MHD_Connection *c, req *r, rc_code code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* A whole-number query parameter: absent keeps *out (0); present it must be
 * digits only (no sign, blank or empty value, which strtol would take), from
 * lo to hi, else -1 and the route answers 400 naming it. */
int http_arg_int(struct MHD_Connection *c, const char *name, long lo, long hi, long *out);
/* Whether the request's If-None-Match names etag (quotes included) or is
 * "*": RFC 9110 13.1.2's weak comparison, so W/"x" matches "x". */
int http_etag_matches(struct MHD_Connection *c, const char *etag);
/* The job as JSON (200) or the error of loading it; patient fields as
 * http_job_phi decides. */
enum MHD_Result http_job(struct MHD_Connection *c, req *r, unsigned status, const char *id);

/* Owners and patient fields (http_owner.c, docs/server.md).  Whether r's
 * token may act on a job of owner (admin: every job; submit: its own). */
int http_may_act(const req *r, const char *owner);
/* Whether r's token sees the patient fields of a job of owner (phi, or
 * its own job). */
int http_sees_phi(const req *r, const char *owner);
/* The 403 of a token acting on a job that is not its own. */
enum MHD_Result http_refuse_act(struct MHD_Connection *c, req *r, const char *owner);
/* Loads job r->id and returns 0 when r may act on it; else -1 with the
 * answer queued in *ret (403, or the error of loading it). */
int http_owner_check(struct MHD_Connection *c, req *r, enum MHD_Result *ret);
/* Redacts the Job j of a job of owner (app_job_redact) when r may not see
 * its patient fields and returns 0; else returns 1 (the caller audits it). */
int http_job_show(const req *r, const char *owner, json_t *j);
/* http_job_show, and the audit line of the read of job id's patient fields
 * when they are shown. */
int http_job_phi(req *r, const char *owner, const char *id, json_t *j);
/* A list's audit of the jobs shown with patient fields: a line per
 * PHI_IDS_PER_LINE ids (an audit line stays short), the rest at the end. */
#define PHI_IDS_PER_LINE 25
typedef struct phi_ids {
	char ids[PHI_IDS_PER_LINE * 37];
	int n;
} phi_ids;
/* Adds id (NULL: writes what is left). */
void http_phi_ids_add(req *r, phi_ids *b, const char *id);

/* Routes (first call: no body yet). */
enum MHD_Result jobs_create_begin(struct MHD_Connection *c, req *r);
enum MHD_Result jobs_create_body(req *r, const char *data, size_t len);
enum MHD_Result jobs_create_end(struct MHD_Connection *c, req *r);
enum MHD_Result jobs_list(struct MHD_Connection *c, req *r);
enum MHD_Result jobs_get(struct MHD_Connection *c, req *r);
enum MHD_Result jobs_delete(struct MHD_Connection *c, req *r);
enum MHD_Result jobs_cancel(struct MHD_Connection *c, req *r);
enum MHD_Result jobs_start(struct MHD_Connection *c, req *r);
/* PATCH /v1/jobs/{id} {"priority": N}: the body is gathered by
 * jobs_create_body under the same cap. */
enum MHD_Result jobs_patch_begin(struct MHD_Connection *c, req *r);
enum MHD_Result jobs_patch_end(struct MHD_Connection *c, req *r);

enum MHD_Result upload_begin(struct MHD_Connection *c, req *r);
/* Counts every body byte itself: MHD_NO (close) once far more than the
 * views hold has arrived; the 413 for fewer comes from upload_end. */
enum MHD_Result upload_data(req *r, const char *data, size_t len);
enum MHD_Result upload_end(struct MHD_Connection *c, req *r);
void upload_free(req *r);

enum MHD_Result volume_get(struct MHD_Connection *c, req *r);
/* format=dicom (http_dicom.c): the series as a ZIP, or multipart/related
 * when the client's Accept asks for it (DICOMweb WADO-RS). */
enum MHD_Result volume_get_dicom(struct MHD_Connection *c, req *r);
enum MHD_Result push_destinations(struct MHD_Connection *c, req *r);
enum MHD_Result push_again(struct MHD_Connection *c, req *r);
enum MHD_Result events_get(struct MHD_Connection *c, req *r);
/* GET /v1/jobs/{id}/preview (http_preview.c): one slice as a PNG. */
enum MHD_Result preview_get(struct MHD_Connection *c, req *r);
/* The daemon's cache of rendered previews (http.c owns it). */
struct preview_cache *http_previews(struct http *h);
enum MHD_Result misc_devices(struct MHD_Connection *c, req *r);
enum MHD_Result misc_nodes(struct MHD_Connection *c, req *r);
enum MHD_Result misc_health(struct MHD_Connection *c, req *r, int ready);
enum MHD_Result misc_metrics(struct MHD_Connection *c, req *r);
/* The operator page and its files (http_www.c, www.h). */
enum MHD_Result www_get(struct MHD_Connection *c, req *r);

#endif
