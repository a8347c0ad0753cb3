/*
 * rc_error: the error codes and messages of every recond function.
 *
 * Contract: a function that can fail returns 0 or a negative rc_code and, on
 * failure, fills the caller's rc_err (when non-NULL) with the code, the field
 * the problem is about (a JSON-path-like name such as "geometry.detector.nu",
 * or "" when none applies) and a sentence that says what to fix.  core/ never
 * logs and never exits; server/ maps codes to HTTP statuses (server/http_error.c).
 * The numeric values are stable: they appear in worker reports.
 */
#ifndef RC_ERROR_H
#define RC_ERROR_H

typedef enum rc_code {
	RC_OK = 0,
	RC_EINVAL = -1,       /* invalid input: the client's mistake */
	RC_ENOMEM = -2,       /* an allocation failed */
	RC_ETOOBIG = -3,      /* a size beyond a configured cap or that overflows */
	RC_EIO = -4,          /* file or pipe error */
	RC_EDEVICE = -5,      /* a device or driver failed */
	RC_ECANCELLED = -6,   /* the cancel flag was seen */
	RC_EUNSUPPORTED = -7, /* valid, but not available here (engine not built, ...) */
	RC_ENOTFOUND = -8,    /* no such object */
	RC_ESTATE = -9,       /* not allowed in the object's current state */
	RC_EINTERNAL = -10,   /* a bug: an invariant broke */
	/* Faults of a request that only the daemon meets (server/http_error.c
	 * gives each its HTTP status; docs/api.md has the table). */
	RC_EBADJSON = -11,    /* the body is not JSON, or not a JSON object */
	RC_EBADID = -12,      /* a job id in the path is not a canonical UUID */
	RC_EBODYTOOBIG = -13, /* a request body or upload longer than allowed */
	RC_ENOSPACE = -14,    /* no space left on the store's disk */
	RC_EWRONGLEN = -15,   /* an upload shorter than the spec says */
	RC_ENOLENGTH = -16,   /* an upload without Content-Length */
	RC_EUNAUTH = -17,     /* no bearer token, or an unknown one */
	RC_EFORBIDDEN = -18,  /* the token's role does not allow this */
	RC_EMETHOD = -19,     /* the method is not allowed on this path */
	RC_EBADRANGE = -20,   /* a Range that starts past the end */
	RC_EUNAVAIL = -21,    /* shutting down, or too busy: retry later */
} rc_code;

/* The lowest code: codes run from -1 down to it.  Move it when adding one. */
#define RC_CODE_MIN RC_EUNAVAIL

#define RC_ERR_FIELD_MAX 96
#define RC_ERR_MSG_MAX 320

typedef struct rc_err {
	rc_code code;
	char field[RC_ERR_FIELD_MAX];
	char msg[RC_ERR_MSG_MAX];
} rc_err;

/* Records code, field (may be NULL) and a printf-style message in err (may
 * be NULL) and returns code, so that `return rc_fail(err, ...)` reads well. */
int rc_fail(rc_err *err, rc_code code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Clears err to RC_OK with empty strings. */
void rc_err_clear(rc_err *err);

/* Stable snake_case name of a code ("invalid_argument"), for JSON errors;
 * "unknown_error" for a number that is no code. */
const char *rc_code_name(int code);

#endif
