/*
 * jfield: typed, range-checked reads of members of a jansson object, each
 * failure a message that names the field by its JSON path
 * ("geometry.detector.nu must be an integer from 1 to 65536 (got 0)").
 *
 * Every getter takes the object, the path prefix of the object ("" for the
 * root), the key, whether the key is required, and where to store the value;
 * a missing optional key leaves *out untouched (so callers preset defaults).
 * jf_check_keys rejects members that are not in the allowed list, which
 * catches misspelt options that would otherwise be silently ignored.
 */
#ifndef RC_JFIELD_H
#define RC_JFIELD_H

#include <jansson.h>
#include <stddef.h>

#include "util/rc_error.h"

/* Writes "prefix.key" (or "key" for an empty prefix) into buf. */
void jf_path(char *buf, size_t n, const char *prefix, const char *key);

int jf_check_keys(const json_t *obj, const char *prefix, const char *const *allowed, rc_err *err);

int jf_int(const json_t *obj, const char *prefix, const char *key, int required,
	   long long min, long long max, long long *out, rc_err *err);
/* Finite number in [min, max]; excl_min makes the lower bound exclusive. */
int jf_num(const json_t *obj, const char *prefix, const char *key, int required,
	   double min, int excl_min, double max, double *out, rc_err *err);
int jf_bool(const json_t *obj, const char *prefix, const char *key, int required,
	    int *out, rc_err *err);
/* Characters (UTF-8 code points) of s, a string jansson has read (so its
 * encoding is valid): what JSON Schema's maxLength counts. */
size_t jf_utf8_chars(const char *s);
/* String of at most maxlen bytes; *out borrows the JSON's storage. */
int jf_str(const json_t *obj, const char *prefix, const char *key, int required,
	   size_t maxlen, const char **out, rc_err *err);
/* Object member (or NULL when optional and missing). */
int jf_obj(const json_t *obj, const char *prefix, const char *key, int required,
	   json_t **out, rc_err *err);
/* Checks that v (named by path) is a finite number in [min, max]. */
int jf_num_value(const json_t *v, const char *path, double min, int excl_min,
		 double max, double *out, rc_err *err);

#endif
