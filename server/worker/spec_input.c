/*
 * spec_input: the "input" object (spec_input.h).
 */
#include "spec_input.h"

#include <math.h>
#include <string.h>

#include "jfield.h"

#define COUNT_MAX 1e30 /* float32's range, roughly: a count beyond is a typo */

/* flat or dark: a number in [min, COUNT_MAX] or "uploaded" */
static int parse_field(const json_t *o, const char *key, double min, int excl, int *uploaded, double *v, rc_err *err)
{
	json_t *x = json_object_get(o, key);
	char path[32];
	jf_path(path, sizeof path, "input", key);
	if (json_is_string(x)) {
		if (strcmp(json_string_value(x), "uploaded"))
			return rc_fail(err, RC_EINVAL, path, "%s must be a number or \"uploaded\" (got \"%.32s\")", path,
				       json_string_value(x));
		*uploaded = 1;
		return 0;
	}
	if (x && !json_is_number(x))
		return rc_fail(err, RC_EINVAL, path, "%s must be a number or \"uploaded\"", path);
	return jf_num(o, "input", key, 0, min, excl, COUNT_MAX, v, err);
}

int spec_parse_input(const json_t *o, job_input *in, rc_err *err)
{
	static const char *const keys[] = { "kind", "dtype", "flat", "dark", "bad_pixels", NULL };
	const char *kind = "line_integrals", *dtype = "uint16", *bad = NULL;
	int rc;
	memset(in, 0, sizeof *in);
	in->dtype = RC_COUNTS_F32;
	if (!o)
		return 0;
	if ((rc = jf_check_keys(o, "input", keys, err)) || (rc = jf_str(o, "input", "kind", 0, 32, &kind, err)))
		return rc;
	if (!strcmp(kind, "line_integrals")) {
		for (int i = 1; keys[i]; i++)
			if (json_object_get(o, keys[i])) {
				char path[32];
				jf_path(path, sizeof path, "input", keys[i]);
				return rc_fail(err, RC_EINVAL, path,
					       "%s applies to input.kind \"intensity\" (line integrals are float32, "
					       "already -ln(I/I0))", path);
			}
		return 0;
	}
	if (strcmp(kind, "intensity"))
		return rc_fail(err, RC_EINVAL, "input.kind",
			       "input.kind must be \"line_integrals\" or \"intensity\" (got \"%.32s\")", kind);
	in->intensity = 1;
	if ((rc = jf_str(o, "input", "dtype", 0, 16, &dtype, err)))
		return rc;
	if (!strcmp(dtype, "uint16"))
		in->dtype = RC_COUNTS_U16;
	else if (!strcmp(dtype, "float32"))
		in->dtype = RC_COUNTS_F32;
	else
		return rc_fail(err, RC_EINVAL, "input.dtype", "input.dtype must be \"uint16\" or \"float32\" (got \"%.16s\")",
			       dtype);
	if (!json_object_get(o, "flat"))
		return rc_fail(err, RC_EINVAL, "input.flat",
			       "input.flat is required for intensity input: the open-beam (air) counts, a number "
			       "or \"uploaded\" (PUT /v1/jobs/{id}/flat)");
	if ((rc = parse_field(o, "flat", 0, 1, &in->uploaded[INPUT_FLAT], &in->flat, err)) ||
	    (rc = parse_field(o, "dark", 0, 0, &in->uploaded[INPUT_DARK], &in->dark, err)))
		return rc;
	if (!in->uploaded[INPUT_FLAT] && !in->uploaded[INPUT_DARK] && !(in->flat > in->dark))
		return rc_fail(err, RC_EINVAL, "input.flat", "input.flat (%g) must be greater than input.dark (%g)",
			       in->flat, in->dark);
	if ((rc = jf_str(o, "input", "bad_pixels", 0, 16, &bad, err)))
		return rc;
	if (bad && strcmp(bad, "uploaded"))
		return rc_fail(err, RC_EINVAL, "input.bad_pixels",
			       "input.bad_pixels must be \"uploaded\" (PUT /v1/jobs/{id}/bad-pixels) or absent (got \"%.16s\")",
			       bad);
	in->uploaded[INPUT_BAD] = bad != NULL;
	return 0;
}

unsigned spec_input_sample_bytes(const job_input *in)
{
	return in->intensity ? (unsigned)rc_counts_sample_bytes(in->dtype) : 4u;
}

const char *input_field_route(input_field f)
{
	return f == INPUT_FLAT ? "flat" : f == INPUT_DARK ? "dark" : "bad-pixels";
}

const char *input_field_file(input_field f)
{
	return f == INPUT_FLAT ? INPUT_FLAT_FILE : f == INPUT_DARK ? INPUT_DARK_FILE : INPUT_BAD_FILE;
}
