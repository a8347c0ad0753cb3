#include "rc_error.h"

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
	}
	return "unknown_error";
}
