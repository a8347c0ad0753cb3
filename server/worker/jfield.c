/* jfield: typed member reads with messages naming the field (jfield.h). */
#include "jfield.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void jf_path(char *buf, size_t n, const char *prefix, const char *key)
{
	if (prefix && *prefix)
		snprintf(buf, n, "%s.%s", prefix, key);
	else
		snprintf(buf, n, "%s", key);
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "unknown";
}

int jf_check_keys(const json_t *obj, const char *prefix, const char *const *allowed, rc_err *err)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v) {
		int ok = 0;
		for (const char *const *a = allowed; *a; a++)
			if (strcmp(*a, key) == 0) {
				ok = 1;
				break;
			}
		if (!ok) {
			char path[RC_ERR_FIELD_MAX];
			jf_path(path, sizeof path, prefix, key);
			return rc_fail(err, RC_EINVAL, path, "%s is not a known option; remove it or check its spelling", path);
		}
	}
	return 0;
}

/* Looks key up; 1 = found (*v set), 0 = missing and optional, < 0 = error. */
static int lookup(const json_t *obj, const char *prefix, const char *key, int required,
		  json_t **v, char *path, size_t n, rc_err *err)
{
	jf_path(path, n, prefix, key);
	*v = json_object_get(obj, key);
	if (*v)
		return 1;
	if (required)
		return rc_fail(err, RC_EINVAL, path, "%s is required", path);
	return 0;
}

int jf_int(const json_t *obj, const char *prefix, const char *key, int required,
	   long long min, long long max, long long *out, rc_err *err)
{
	char path[RC_ERR_FIELD_MAX];
	json_t *v;
	int rc = lookup(obj, prefix, key, required, &v, path, sizeof path, err);
	if (rc <= 0)
		return rc;
	if (!json_is_integer(v))
		return rc_fail(err, RC_EINVAL, path, "%s must be an integer from %lld to %lld (got %s)",
			       path, min, max, type_name(v));
	long long x = json_integer_value(v);
	if (x < min || x > max)
		return rc_fail(err, RC_EINVAL, path, "%s must be an integer from %lld to %lld (got %lld)",
			       path, min, max, x);
	*out = x;
	return 0;
}

int jf_num_value(const json_t *v, const char *path, double min, int excl_min,
		 double max, double *out, rc_err *err)
{
	const char *lo = excl_min ? "greater than" : "at least";
	if (!json_is_number(v))
		return rc_fail(err, RC_EINVAL, path, "%s must be a finite number %s %g and at most %g (got %s)",
			       path, lo, min, max, type_name(v));
	double x = json_number_value(v);
	if (!isfinite(x) || x < min || (excl_min && x == min) || x > max)
		return rc_fail(err, RC_EINVAL, path, "%s must be a finite number %s %g and at most %g (got %g)",
			       path, lo, min, max, x);
	*out = x;
	return 0;
}

int jf_num(const json_t *obj, const char *prefix, const char *key, int required,
	   double min, int excl_min, double max, double *out, rc_err *err)
{
	char path[RC_ERR_FIELD_MAX];
	json_t *v;
	int rc = lookup(obj, prefix, key, required, &v, path, sizeof path, err);
	if (rc <= 0)
		return rc;
	return jf_num_value(v, path, min, excl_min, max, out, err);
}

int jf_bool(const json_t *obj, const char *prefix, const char *key, int required,
	    int *out, rc_err *err)
{
	char path[RC_ERR_FIELD_MAX];
	json_t *v;
	int rc = lookup(obj, prefix, key, required, &v, path, sizeof path, err);
	if (rc <= 0)
		return rc;
	if (!json_is_boolean(v))
		return rc_fail(err, RC_EINVAL, path, "%s must be true or false (got %s)", path, type_name(v));
	*out = json_is_true(v);
	return 0;
}

int jf_str(const json_t *obj, const char *prefix, const char *key, int required,
	   size_t maxlen, const char **out, rc_err *err)
{
	char path[RC_ERR_FIELD_MAX];
	json_t *v;
	int rc = lookup(obj, prefix, key, required, &v, path, sizeof path, err);
	if (rc <= 0)
		return rc;
	if (!json_is_string(v))
		return rc_fail(err, RC_EINVAL, path, "%s must be a string (got %s)", path, type_name(v));
	if (json_string_length(v) > maxlen || strlen(json_string_value(v)) != json_string_length(v))
		return rc_fail(err, RC_EINVAL, path, "%s must be a string of at most %zu bytes without NUL characters",
			       path, maxlen);
	*out = json_string_value(v);
	return 0;
}

size_t jf_utf8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

int jf_obj(const json_t *obj, const char *prefix, const char *key, int required,
	   json_t **out, rc_err *err)
{
	char path[RC_ERR_FIELD_MAX];
	json_t *v;
	*out = NULL;
	int rc = lookup(obj, prefix, key, required, &v, path, sizeof path, err);
	if (rc <= 0)
		return rc;
	if (!json_is_object(v))
		return rc_fail(err, RC_EINVAL, path, "%s must be an object (got %s)", path, type_name(v));
	*out = v;
	return 0;
}
