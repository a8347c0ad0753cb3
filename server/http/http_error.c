/*
 * http_error: domain error -> HTTP status and JSON error body (http_error.h),
 * and the error answers (http_error_rc, http_fail) that every route uses.  The status table below is the only place in recond that chooses
 * an error status; the headers a status requires (WWW-Authenticate on 401)
 * are added here too, those that name route facts (Allow, Content-Range)
 * come from the route through http_error_rc_hdr.
 */
#include "http/http_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned http_status_of(int code)
{
	switch (code) {
	case RC_EINVAL: return 400;      /* fix the request */
	case RC_EBADJSON: return 400;
	case RC_EBADID: return 400;
	case RC_ETOOBIG: return 400;     /* the spec's sizes exceed a configured limit: a validation error */
	case RC_EUNAUTH: return 401;
	case RC_EFORBIDDEN: return 403;
	case RC_ENOTFOUND: return 404;
	case RC_EMETHOD: return 405;
	case RC_ESTATE: return 409;
	case RC_ECANCELLED: return 409;  /* the object's operation was cancelled under the request */
	case RC_ENOLENGTH: return 411;
	case RC_EBODYTOOBIG: return 413; /* the bytes sent are more than allowed */
	case RC_EBADRANGE: return 416;
	case RC_EWRONGLEN: return 422;
	case RC_EUNSUPPORTED: return 422; /* valid, but this server cannot run it */
	case RC_EIO: return 500;
	case RC_EDEVICE: return 500;
	case RC_EINTERNAL: return 500;
	case RC_ENOMEM: return 503;      /* transient: retry */
	case RC_EUNAVAIL: return 503;
	case RC_ENOSPACE: return 507;
	}
	return 500;
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF), 0 when there is none. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* in with every byte that starts no UTF-8 character replaced by '?', into
 * out (as large as in).  JSON strings are UTF-8, and messages quote what
 * clients sent (a path, a view index) cut to a length, maybe mid-character:
 * without this, jansson refuses the string and the client gets no answer. */
static const char *utf8_clean(const char *in, char *out, size_t n)
{
	size_t i = 0, o = 0;
	while (in[i] && o + 1 < n) {
		size_t k = utf8_len((const unsigned char *)in + i);
		if (k == 0) {
			out[o++] = '?';
			i++;
			continue;
		}
		if (o + k >= n)
			break;
		memcpy(out + o, in + i, k);
		o += k;
		i += k;
	}
	out[o] = '\0';
	return out;
}

json_t *http_error_json(const rc_err *e)
{
	char msg[sizeof e->msg], field[sizeof e->field];
	json_t *in = json_pack("{ssss}", "code", rc_code_name(e->code), "message", utf8_clean(e->msg, msg, sizeof msg));
	if (in && e->field[0])
		json_object_set_new(in, "field", json_string(utf8_clean(e->field, field, sizeof field)));
	return in ? json_pack("{so}", "error", in) : NULL;
}

enum MHD_Result http_error_rc_hdr(struct MHD_Connection *c, req *r, const rc_err *e, const char *hname,
				  const char *hval)
{
	json_t *j = http_error_json(e);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(s);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if (e->code == RC_EUNAUTH) /* RFC 9110 11.6.1: every 401 names its scheme */
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"recond\"");
	if (hname)
		MHD_add_response_header(resp, hname, hval);
	return http_answer(c, r, http_status_of(e->code), resp);
}

enum MHD_Result http_error_rc(struct MHD_Connection *c, req *r, const rc_err *e)
{
	return http_error_rc_hdr(c, r, e, NULL, NULL);
}

enum MHD_Result http_fail(struct MHD_Connection *c, req *r, rc_code code, const char *field, const char *fmt, ...)
{
	rc_err e = { .code = code };
	snprintf(e.field, sizeof e.field, "%s", field ? field : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof e.msg, fmt, ap);
	va_end(ap);
	return http_error_rc(c, r, &e);
}

int http_content_length(struct MHD_Connection *c, req *r, const char *why, unsigned long long *len,
			enum MHD_Result *ret)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (!cl) {
		*ret = http_fail(c, r, RC_ENOLENGTH, "", "uploads need a Content-Length header (no chunked transfer)%s",
				 why);
		return -1;
	}
	char *end;
	errno = 0;
	*len = strtoull(cl, &end, 10);
	if (*end || errno || cl[0] == '-') {
		*ret = http_fail(c, r, RC_EINVAL, "Content-Length", "Content-Length is not a number");
		return -1;
	}
	return 0;
}
