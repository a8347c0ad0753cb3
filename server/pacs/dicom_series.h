/*
 * dicom_series: a succeeded job's volume as a DICOM CT series, written once
 * into its spool directory ({job}/dicom/00001.dcm ... plus series.json) and
 * kept: every download and every push sends the same instances with the
 * same UIDs, so a PACS that receives the series twice keeps one copy.
 *
 * Pixels are Hounsfield units, HU = 1000 (mu - mu_w) / mu_w with mu_w the
 * job's output.water_mu_per_mm, rounded and clamped to int16 (the clamped
 * voxels are counted).  The window is the 0.5 and 99.5 percentiles of the
 * volume's HU.  Patient axes are the volume's world axes (docs/pacs.md).
 *
 * Written to {job}/dicom.tmp, fsynced, then renamed: a crash leaves either
 * no series or a whole one.  Threads: any; one series is written at a time.
 */
#ifndef RC_DICOM_SERIES_H
#define RC_DICOM_SERIES_H

#include <stddef.h>

#include "store/store.h"

typedef struct dicom_series {
	int instances;               /* one per z slice */
	long long clamped;           /* voxels outside int16 HU (or not finite) */
	double window_center, window_width;
	char study_uid[65], series_uid[65];
} dicom_series;

/* The series of job id (which has succeeded), written now if it is not yet
 * there; uid_root is the config's dicom.uid_root.  Errors: RC_ESTATE (the
 * job has not succeeded), RC_EIO, RC_ENOSPACE, those of job_spec_load. */
int dicom_series_ensure(store *st, const char *id, const char *uid_root, dicom_series *out, rc_err *err);

/* The series' description when it has been written (0), else -1. */
int dicom_series_read(store *st, const char *id, dicom_series *out);

/* The path of instance k (0-based) of job id's series. */
void dicom_series_file(store *st, const char *id, int k, char *buf, size_t n);

#endif
