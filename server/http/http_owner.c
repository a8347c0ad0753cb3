/*
 * http_owner: who may act on a job and who sees its patient fields
 * (docs/server.md, "Owners and patient fields").
 *
 * A job belongs to the token that created it (job_row.owner).  Acting on
 * a job (upload, start, cancel, PATCH, DELETE, push) needs admin, or
 * submit and being its owner.  Everyone who may read sees every job; its
 * patient fields (label, dicom) only a token with phi, or the owner (it
 * sent them).  Each answer that shows them is a line in the audit log
 * naming the token and the job, written before the answer.  Without tokens
 * (loopback mode) the request is admin with phi, as before owners.
 */
#include <string.h>

#include "http/http_owner.h"

/* A job from before owners ("") or from loopback mode ("-") is nobody's:
 * no token is named "" or "-" (auth_load refuses "-"). */
static int owns(const req *r, const char *owner)
{
	return owner[0] && strcmp(owner, "-") && !strcmp(owner, r->who);
}

int http_may_act(const req *r, const char *owner)
{
	return r->role >= ROLE_ADMIN || (r->role >= ROLE_SUBMIT && owns(r, owner));
}

int http_sees_phi(const req *r, const char *owner)
{
	return r->phi || (r->role >= ROLE_SUBMIT && owns(r, owner));
}

enum MHD_Result http_refuse_act(struct MHD_Connection *c, req *r, const char *owner)
{
	return http_fail(c, r, RC_EFORBIDDEN, "", "job %s belongs to %s%s%s; the token \"%s\" (role %s) acts only on "
			 "the jobs it created (admin acts on all)", r->id, owner[0] ? "the token \"" : "no token",
			 owner[0] ? owner : " (created before owners were kept)", owner[0] ? "\"" : "", r->who,
			 auth_role_name(r->role));
}

int http_owner_state(struct MHD_Connection *c, req *r, job_state *state, enum MHD_Result *ret)
{
	job_row row;
	rc_err err;
	if (store_get(r->a->st, r->id, 0, &row, &err)) {
		*ret = http_error_rc(c, r, &err);
		return -1;
	}
	int ok = http_may_act(r, row.owner);
	if (!ok)
		*ret = http_refuse_act(c, r, row.owner);
	if (state)
		*state = row.state;
	job_row_clear(&row);
	return ok ? 0 : -1;
}

int http_owner_check(struct MHD_Connection *c, req *r, enum MHD_Result *ret)
{
	if (r->role >= ROLE_ADMIN)
		return 0; /* admin acts on every job: the route reads the row itself */
	return http_owner_state(c, r, NULL, ret);
}

int http_job_show(const req *r, const char *owner, json_t *j)
{
	if (http_sees_phi(r, owner))
		return 1;
	app_job_redact(j);
	return 0;
}

int http_job_phi(req *r, const char *owner, const char *id, json_t *j)
{
	if (!http_job_show(r, owner, j))
		return 0;
	audit_phi(r->a->audit, r->client, r->who, r->method, r->path, id);
	return 1;
}

void http_phi_ids_add(req *r, phi_ids *b, const char *id)
{
	if (id) { /* n ids take 37 n - 1 characters */
		size_t at = b->n ? 37 * (size_t)b->n - 1 : 0;
		snprintf(b->ids + at, sizeof b->ids - at, "%s%.36s", b->n ? "," : "", id);
		b->n++;
	}
	if (b->n && (!id || b->n == PHI_IDS_PER_LINE)) {
		audit_phi(r->a->audit, r->client, r->who, r->method, r->path, b->ids);
		b->n = 0;
	}
}

enum MHD_Result http_job(struct MHD_Connection *c, req *r, unsigned status, const char *id)
{
	job_row row;
	rc_err err;
	if (store_get(r->a->st, id, 1, &row, &err))
		return http_error_rc(c, r, &err);
	json_t *j = app_job_json(r->a, &row);
	http_job_phi(r, row.owner, id, j);
	job_row_clear(&row);
	return http_json(c, r, status, j);
}
