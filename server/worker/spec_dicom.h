/*
 * spec_dicom: the job spec's "output" and "dicom" objects (job_output and
 * job_dicom, members of spec.h's job_spec), kept apart from the
 * reconstruction's fields because they only matter once the volume leaves
 * the daemon.
 */
#ifndef RC_SPEC_DICOM_H
#define RC_SPEC_DICOM_H

#include <jansson.h>
#include <stddef.h>

#include "util/rc_error.h"

#define SPEC_PUSH_MAX 8        /* destinations one job may name */
#define SPEC_DEST_NAME_MAX 32
#define SPEC_WATER_MU_DEFAULT 0.0192 /* 1/mm: water near 70 keV, the HU scale's default */

/* output: how the volume leaves besides the raw download (docs/pacs.md). */
typedef struct job_output {
	double water_mu_per_mm;   /* HU = 1000 (mu - mu_w) / mu_w */
	int npush;
	char push[SPEC_PUSH_MAX][SPEC_DEST_NAME_MAX + 1]; /* configured destination names */
} job_output;

/* dicom: patient and study fields of the DICOM series, each checked against
 * its VR (characters, not bytes; UTF-8 is written as ISO_IR 192).  Patient
 * data: never logged or audited.  "" = not given. */
typedef struct job_dicom {
	char patient_id[4 * 64 + 1];          /* LO */
	char patient_name[4 * 64 + 1];        /* PN, one component group */
	char patient_birth_date[9];           /* DA: YYYYMMDD */
	char patient_sex[2];                  /* CS: M, F or O */
	char accession_number[4 * 16 + 1];    /* SH */
	char study_instance_uid[65];          /* UI; "" = made by the daemon */
	char study_description[4 * 64 + 1];   /* LO */
	char series_description[4 * 64 + 1]; /* LO */
	char referring_physician[4 * 64 + 1]; /* PN */
	char institution[4 * 64 + 1];         /* LO */
} job_dicom;

/* Parse the objects into *out / *d (preset by the caller: output's
 * water_mu_per_mm default, d zeroed). */
int spec_parse_output(const json_t *o, job_output *out, rc_err *err);
int spec_parse_dicom(const json_t *o, job_dicom *d, rc_err *err);

/* A DICOM UID (PS3.5 9.1) of at most maxlen characters: digits and dots,
 * no empty component, no leading zero in a component of several digits. */
int spec_uid_valid(const char *v, size_t maxlen);

#endif
