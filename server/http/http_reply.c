/* http_reply: answers (http_reply.h). */
#include "http/http_reply.h"

#include <stdlib.h>
#include <string.h>

enum MHD_Result http_answer(struct MHD_Connection *c, req *r, unsigned status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	if (!MHD_get_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL)) /* the page's files: no-cache */
		MHD_add_response_header(resp, "Cache-Control", "no-store");
	enum MHD_Result ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	r->answered = 1;
	r->status = status;
	return ret;
}

enum MHD_Result http_json(struct MHD_Connection *c, req *r, unsigned status, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return MHD_NO;
	size_t n = strlen(s);
	s[n] = '\0';
	struct MHD_Response *resp = MHD_create_response_from_buffer(n, s, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(s);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	return http_answer(c, r, status, resp);
}

int http_arg_int(struct MHD_Connection *c, const char *name, long lo, long hi, long *out)
{
	const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	char *end;
	if (!s)
		return 0;
	if (!*s || strspn(s, "0123456789") != strlen(s))
		return -1;
	long v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int http_etag_matches(struct MHD_Connection *c, const char *etag)
{
	const char *p = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
	size_t n = strlen(etag);
	while (p && *p) {
		p += strspn(p, " \t,");
		if (*p == '*')
			return 1;
		if (!strncmp(p, "W/", 2))
			p += 2;
		if (*p != '"') {
			p += strcspn(p, ",");
			continue;
		}
		const char *end = strchr(p + 1, '"');
		if (!end)
			return 0;
		if ((size_t)(end + 1 - p) == n && !memcmp(p, etag, n))
			return 1;
		p = end + 1;
	}
	return 0;
}
