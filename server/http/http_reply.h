/*
 * http_reply: the floor of the HTTP layer that every other file of http/
 * stands on: the request context kept in MHD's con_cls (req), and the
 * answers.  Every answer goes through http_answer so its status reaches the
 * metrics and the audit log; every error answer through http_error_rc
 * (http_error.h), whose status is the code's.
 *
 * Inside http/, calls go one way: http.c (the MHD instance and the router)
 * calls the routes (http_routes.h), the routes call http_owner.c,
 * http_error.c and this file, and none of them calls back up into http.c.
 */
#ifndef RC_HTTP_REPLY_H
#define RC_HTTP_REPLY_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdint.h>

#include "jobs/app.h"

typedef enum route {
	R_NONE = 0,
	R_HEALTHZ, R_READYZ, R_METRICS, R_DEVICES,
	R_NODES,         /* /v1/nodes */
	R_GEOMETRY,      /* /v1/jobs/{id}/geometry */
	R_JOBS,          /* /v1/jobs */
	R_JOB,           /* /v1/jobs/{id} */
	R_PROJ,          /* /v1/jobs/{id}/projections */
	R_VIEW,          /* /v1/jobs/{id}/projections/{k} */
	R_START, R_EVENTS, R_VOLUME,
	R_DESTINATIONS,  /* /v1/destinations */
	R_PUSH,          /* /v1/jobs/{id}/push */
	R_CANCEL,        /* /v1/jobs/{id}/cancel */
	R_PREVIEW,       /* /v1/jobs/{id}/preview */
	R_CALIB,         /* /v1/jobs/{id}/flat, /dark, /bad-pixels (k: spec_input.h's input_field) */
	R_WWW,           /* /, /ui/...: the operator page (http_www.c) */
} route;

struct upload;
struct calib;

typedef struct req {
	app *a;
	struct preview_cache *previews; /* the router's cache of rendered previews (http_preview.c) */
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
	/* flat, dark or bad-pixel upload (http_calib.c) */
	struct calib *cal;
} req;

enum MHD_Result http_answer(struct MHD_Connection *c, req *r, unsigned status, struct MHD_Response *resp);
enum MHD_Result http_json(struct MHD_Connection *c, req *r, unsigned status, json_t *j);
/* A whole-number query parameter: absent keeps *out (0); present it must be
 * digits only (no sign, blank or empty value, which strtol would take), from
 * lo to hi, else -1 and the route answers 400 naming it. */
int http_arg_int(struct MHD_Connection *c, const char *name, long lo, long hi, long *out);
/* Whether the request's If-None-Match names etag (quotes included) or is
 * "*": RFC 9110 13.1.2's weak comparison, so W/"x" matches "x". */
int http_etag_matches(struct MHD_Connection *c, const char *etag);
#endif
