/*
 * http_geometry: GET /v1/jobs/{id}/geometry?format=rtk, the job's geometry
 * as RTK's geometry XML (job_spec_rtk_xml in server/worker/spec.c), read
 * from the stored spec through spec.c's parser as every other reader of a
 * spec.  format is optional; rtk is its one value.
 */
#include <stdlib.h>
#include <string.h>

#include "http/http_routes.h"
#include "spec.h"

enum MHD_Result http_geometry_get(struct MHD_Connection *c, req *r)
{
	app *a = r->a;
	const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
	if (fmt && strcmp(fmt, "rtk"))
		return http_fail(c, r, RC_EINVAL, "format",
				 "format must be \"rtk\" (RTK's geometry XML), the one format of a job's geometry "
				 "(got \"%.32s\")", fmt);
	job_row row;
	rc_err err;
	if (store_get(a->st, r->id, 0, &row, &err))
		return http_error_rc(c, r, &err);
	job_row_clear(&row);
	char path[4200];
	store_job_path(a->st, r->id, "spec.json", path, sizeof path);
	job_spec *s = NULL;
	char *xml = NULL;
	size_t len = 0;
	int rc = job_spec_load(path, &s, &err);
	if (!rc)
		rc = job_spec_rtk_xml(s, &xml, &len, &err);
	job_spec_free(s);
	if (rc)
		return http_error_rc(c, r, &err);
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, xml, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(xml);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/xml");
	return http_answer(c, r, 200, resp);
}
