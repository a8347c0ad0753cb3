#include "util/rc_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int rc_fail(rc_err *err, rc_code code, const char *field, const char *fmt, ...)
{
	if (!err)
		return code;
	err->code = code;
	snprintf(err->field, sizeof err->field, "%s", field ? field : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	return code;
}

void rc_err_clear(rc_err *err)
{
	if (!err)
		return;
	err->code = RC_OK;
	err->field[0] = '\0';
	err->msg[0] = '\0';
}

const char *rc_code_name(int code)
{
	switch (code) {
	case RC_OK: return "ok";
	case RC_EINVAL: return "invalid_argument";
	case RC_ENOMEM: return "out_of_memory";
	case RC_ETOOBIG: return "too_big";
	case RC_EIO: return "io_error";
	case RC_EDEVICE: return "device_error";
	case RC_ECANCELLED: return "cancelled";
	case RC_EUNSUPPORTED: return "unsupported";
	case RC_ENOTFOUND: return "not_found";
	case RC_ESTATE: return "conflict";
	case RC_EINTERNAL: return "internal_error";
	case RC_EBADJSON: return "invalid_json";
	case RC_EBADID: return "invalid_id";
	case RC_EBODYTOOBIG: return "body_too_large";
	case RC_ENOSPACE: return "disk_full";
	case RC_EWRONGLEN: return "wrong_length";
	case RC_ENOLENGTH: return "length_required";
	case RC_EUNAUTH: return "unauthorized";
	case RC_EFORBIDDEN: return "forbidden";
	case RC_EMETHOD: return "method_not_allowed";
	case RC_EBADRANGE: return "range_not_satisfiable";
	case RC_EUNAVAIL: return "unavailable";
	}
	return "unknown_error";
}
