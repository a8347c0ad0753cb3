/*
 * dicom_dcmtk: what recond asks of DCMTK (a C++ library) behind a C API:
 * write one CT Image Storage instance, make UIDs, and send files to a DIMSE
 * C-STORE peer.  The only C++ in the daemon (dicom_dcmtk.cc); everything
 * else (which slice, which values, which UIDs) is decided in C by the
 * caller (dicom_series.c), so this file only maps fields to attributes.
 */
#ifndef RC_DICOM_DCMTK_H
#define RC_DICOM_DCMTK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "util/rc_error.h"

/* Patient and study fields, already validated by the spec parser (VR
 * lengths, no control characters or backslashes, UTF-8: the instances say
 * ISO_IR 192).  NULL or "" writes the attribute empty (type 2). */
typedef struct rc_dcm_patient {
	const char *patient_id, *patient_name, *patient_birth_date, *patient_sex;
	const char *accession_number, *study_description, *series_description;
	const char *referring_physician, *institution;
} rc_dcm_patient;

/* One axial CT slice: 16-bit signed stored values, HU = value * slope +
 * intercept.  Strings may be NULL where noted. */
typedef struct rc_dcm_ct_slice {
	const rc_dcm_patient *patient;
	const char *study_uid, *series_uid, *sop_uid, *frame_uid;
	const char *date, *time;            /* YYYYMMDD, HHMMSS: study, series, content */
	const char *study_id;               /* SH, may be NULL */
	int series_number, instance_number;
	int rows, cols;
	double pixel_spacing[2];            /* mm between rows (y), between columns (x) */
	double slice_thickness;             /* mm; also SpacingBetweenSlices */
	double position[3];                 /* ImagePositionPatient of the first pixel, mm */
	double orientation[6];              /* ImageOrientationPatient: row then column direction */
	double slice_location;              /* mm */
	double window_center, window_width; /* HU */
	double rescale_slope, rescale_intercept;
	const char *convolution_kernel;     /* SH, e.g. "RAM-LAK"; may be NULL */
	const char *derivation;             /* LO-sized text, e.g. "recond fdk ram-lak" (DerivationDescription) */
	const char *software;               /* SoftwareVersions, e.g. "recond 0.x" */
	const char *image_comments;         /* ImageComments (LT, at most 10240 characters): the job's
					       warnings; NULL or "" = none */
	const int16_t *pixels;              /* rows * cols, row-major (x fastest) */
} rc_dcm_ct_slice;

/* Writes s as a DICOM Part 10 file (CT Image Storage, explicit VR little
 * endian) at path.  RC_EIO (cannot write), RC_EINVAL (a value DCMTK refuses). */
int rc_dcm_write_ct(const rc_dcm_ct_slice *s, const char *path, rc_err *err);

/* A new globally unique UID under root ("" = DCMTK's own root) into out
 * (n >= 65).  RC_EINVAL when root leaves no room (root over 40 characters). */
int rc_dcm_uid(const char *root, char *out, size_t n, rc_err *err);

/* A DIMSE association to a C-STORE SCP (CT Image Storage, explicit and
 * implicit VR little endian proposed).  timeout_s bounds connecting and each
 * answer.  Errors: RC_EIO with the peer's or the network's reason. */
typedef struct rc_dcm_cstore rc_dcm_cstore;
int rc_dcm_cstore_open(const char *host, int port, const char *called_ae, const char *calling_ae,
		       int timeout_s, rc_dcm_cstore **ret, rc_err *err);
/* Sends the file at path; 0 only when the peer answered success (0x0000)
 * or a warning (0xB000, 0xB007, 0xB006); else RC_EIO naming the status. */
int rc_dcm_cstore_send(rc_dcm_cstore *c, const char *path, rc_err *err);
/* Releases the association (aborts it when release fails) and frees c. */
void rc_dcm_cstore_close(rc_dcm_cstore *c);

#ifdef __cplusplus
}
#endif

#endif
