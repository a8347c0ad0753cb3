/*
 * http_owner: who acts on a job (its owner, admin) and who sees its
 * patient fields (phi, its owner): the redaction and the audit line of each
 * read (docs/server.md, "Owners and patient fields"); and the Job answered
 * as its reader may see it (http_job).
 */
#ifndef RC_HTTP_OWNER_H
#define RC_HTTP_OWNER_H

#include "http/http_error.h"
#include "http/http_reply.h"

/* The job as JSON (200) or the error of loading it; patient fields as
 * http_job_phi decides. */
enum MHD_Result http_job(struct MHD_Connection *c, req *r, unsigned status, const char *id);

/* Whether r's
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
/* The same for any role, and the job's state in *state (may be NULL): for
 * routes that decide on the state themselves (DELETE, push). */
int http_owner_state(struct MHD_Connection *c, req *r, job_state *state, enum MHD_Result *ret);
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

#endif
