/* spec_dicom: output and dicom of the job spec (spec_dicom.h). */
#include "spec_dicom.h"

#include <stdio.h>
#include <string.h>

#include "jfield.h"

int spec_parse_output(const json_t *o, job_output *out, rc_err *err)
{
	static const char *const keys[] = { "water_mu_per_mm", "push", NULL };
	int rc;
	if ((rc = jf_check_keys(o, "output", keys, err)) ||
	    (rc = jf_num(o, "output", "water_mu_per_mm", 0, 0, 1, 10, &out->water_mu_per_mm, err)))
		return rc;
	json_t *p = json_object_get(o, "push");
	if (!p)
		return 0;
	if (!json_is_array(p) || json_array_size(p) > SPEC_PUSH_MAX)
		return rc_fail(err, RC_EINVAL, "output.push",
			       "output.push must be an array of at most %d destination names", SPEC_PUSH_MAX);
	for (size_t i = 0; i < json_array_size(p); i++) {
		json_t *v = json_array_get(p, i);
		char path[48];
		snprintf(path, sizeof path, "output.push[%zu]", i);
		if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > SPEC_DEST_NAME_MAX)
			return rc_fail(err, RC_EINVAL, path, "%s must be a destination name of 1 to %d characters "
				       "(GET /v1/destinations lists them)", path, SPEC_DEST_NAME_MAX);
		for (int j = 0; j < out->npush; j++)
			if (!strcmp(out->push[j], json_string_value(v)))
				return rc_fail(err, RC_EINVAL, path, "%s names \"%s\" twice", "output.push",
					       json_string_value(v));
		snprintf(out->push[out->npush++], sizeof out->push[0], "%s", json_string_value(v));
	}
	return 0;
}

enum vr { VR_LO, VR_SH, VR_PN };

/* A text value of VR vr: no control characters (PS3.5 6.1.2.1 allows ESC
 * only for ISO 2022, which we don't use), no backslash (the value
 * separator), at most max characters; PN: one component group (no '='),
 * at most five components. */
static int text_field(const json_t *o, const char *key, enum vr vr, char *dst, size_t n, rc_err *err)
{
	const size_t max = vr == VR_SH ? 16 : 64;
	const char *v = NULL;
	char path[48];
	snprintf(path, sizeof path, "dicom.%s", key);
	int rc = jf_str(o, "dicom", key, 0, n - 1, &v, err);
	if (rc || !v)
		return rc;
	int carets = 0;
	for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
		if (*c < 0x20 || *c == 0x7f || *c == '\\')
			return rc_fail(err, RC_EINVAL, path, "%s must not hold control characters or backslashes", path);
		if (vr == VR_PN && *c == '=')
			return rc_fail(err, RC_EINVAL, path,
				       "%s is one name: FAMILY^GIVEN^MIDDLE^PREFIX^SUFFIX, without '='", path);
		carets += *c == '^';
	}
	if (carets > 4)
		return rc_fail(err, RC_EINVAL, path, "%s has at most five '^'-separated components", path);
	if (jf_utf8_chars(v) > max)
		return rc_fail(err, RC_EINVAL, path, "%s must be at most %zu characters (DICOM %s)", path, max,
			       vr == VR_SH ? "SH" : vr == VR_PN ? "PN" : "LO");
	snprintf(dst, n, "%s", v);
	return 0;
}

static int date_field(const json_t *o, char *dst, rc_err *err)
{
	const char *v = NULL;
	int rc = jf_str(o, "dicom", "patient_birth_date", 0, 8, &v, err);
	if (rc || !v)
		return rc;
	int y = 0, m = 0, d = 0, ok = strlen(v) == 8 && strspn(v, "0123456789") == 8;
	if (ok && sscanf(v, "%4d%2d%2d", &y, &m, &d) == 3) {
		static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
		int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
		ok = y >= 1800 && y <= 2999 && m >= 1 && m <= 12 && d >= 1 && d <= mdays[m - 1] && (m != 2 || d < 29 || leap);
	}
	if (!ok)
		return rc_fail(err, RC_EINVAL, "dicom.patient_birth_date",
			       "dicom.patient_birth_date must be a real date written YYYYMMDD");
	snprintf(dst, 9, "%s", v);
	return 0;
}

int spec_uid_valid(const char *v, size_t maxlen)
{
	size_t len = strlen(v);
	int ok = len > 0 && len <= maxlen && v[0] != '.' && v[len - 1] != '.';
	for (size_t i = 0; ok && i < len; i++) {
		if (v[i] == '.')
			ok = v[i + 1] != '.';
		else if (v[i] < '0' || v[i] > '9')
			ok = 0;
		else if (v[i] == '0' && (i == 0 || v[i - 1] == '.') && i + 1 < len && v[i + 1] != '.')
			ok = 0;
	}
	return ok;
}

static int uid_field(const json_t *o, char *dst, rc_err *err)
{
	const char *v = NULL;
	int rc = jf_str(o, "dicom", "study_instance_uid", 0, 64, &v, err);
	if (rc || !v)
		return rc;
	if (!spec_uid_valid(v, 64))
		return rc_fail(err, RC_EINVAL, "dicom.study_instance_uid",
			       "dicom.study_instance_uid must be a DICOM UID: digits and dots, at most 64 characters, no "
			       "empty component, no leading zero");
	snprintf(dst, 65, "%s", v);
	return 0;
}

int spec_parse_dicom(const json_t *o, job_dicom *d, rc_err *err)
{
	static const char *const keys[] = { "patient_id", "patient_name", "patient_birth_date", "patient_sex",
					    "accession_number", "study_instance_uid", "study_description",
					    "series_description", "referring_physician", "institution", NULL };
	const char *sex = NULL;
	int rc;
	if ((rc = jf_check_keys(o, "dicom", keys, err)) ||
	    (rc = text_field(o, "patient_id", VR_LO, d->patient_id, sizeof d->patient_id, err)) ||
	    (rc = text_field(o, "patient_name", VR_PN, d->patient_name, sizeof d->patient_name, err)) ||
	    (rc = date_field(o, d->patient_birth_date, err)) ||
	    (rc = jf_str(o, "dicom", "patient_sex", 0, 1, &sex, err)) ||
	    (rc = text_field(o, "accession_number", VR_SH, d->accession_number, sizeof d->accession_number, err)) ||
	    (rc = uid_field(o, d->study_instance_uid, err)) ||
	    (rc = text_field(o, "study_description", VR_LO, d->study_description, sizeof d->study_description, err)) ||
	    (rc = text_field(o, "series_description", VR_LO, d->series_description, sizeof d->series_description, err)) ||
	    (rc = text_field(o, "referring_physician", VR_PN, d->referring_physician, sizeof d->referring_physician,
			     err)) ||
	    (rc = text_field(o, "institution", VR_LO, d->institution, sizeof d->institution, err)))
		return rc;
	if (sex) {
		if (strcmp(sex, "M") && strcmp(sex, "F") && strcmp(sex, "O"))
			return rc_fail(err, RC_EINVAL, "dicom.patient_sex", "dicom.patient_sex must be \"M\", \"F\" or \"O\"");
		snprintf(d->patient_sex, sizeof d->patient_sex, "%s", sex);
	}
	return 0;
}
