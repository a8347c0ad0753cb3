/*
 * http_error: the one mapping from a domain error (core/rc_error.h) to an
 * HTTP answer.  The status depends on the code alone, so the same fault
 * leaves with the same status from every route; the body is always
 * {"error": {"code": rc_code_name(code), "message": msg[, "field": field]}}.
 * Routes never choose an error status: they fill an rc_err and answer it
 * with http_error_rc or http_fail (below), which use these two.
 * docs/api.md lists the table; tests/unit/test_http_error.c checks it.
 */
#ifndef RC_HTTP_ERROR_H
#define RC_HTTP_ERROR_H

#include <jansson.h>

#include "http/http_reply.h"
#include "util/rc_error.h"

/* The HTTP status of an error code (400..599).  A number that is no code,
 * and RC_OK (an error answer without an error is a bug), give 500. */
unsigned http_status_of(int code);

/* The error body of e as a new JSON object: code is rc_code_name(e->code),
 * message e->msg, field e->field when it is not empty, each with any byte
 * that is not UTF-8 replaced by '?' (messages quote what clients sent).
 * NULL when out of memory. */
json_t *http_error_json(const rc_err *e);

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

/* An upload's Content-Length: 0 with *len set, or -1 with the error
 * answered (411 without the header, saying why the length must come
 * first; 400 when it is not a number) and *ret its result. */
int http_content_length(struct MHD_Connection *c, req *r, const char *why, unsigned long long *len,
			enum MHD_Result *ret);

#endif
