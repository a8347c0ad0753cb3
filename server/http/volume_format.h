/*
 * volume_format: the headers that turn the raw float32 volume into a
 * NIfTI-1 single file (.nii, through libnifti's nifti1_io) or a MetaImage
 * (.mha).  Both put the header in front of the same bytes, so a download
 * streams the header from memory and then the spool file, and a Range
 * request works across both.
 *
 * World coordinates: voxel (i, j, k) sits at ((i - (nx-1)/2) vx + cx, ...)
 * (API.md); NIfTI's qform/sform (scanner code) and MetaImage's Offset +
 * ElementSpacing say exactly that, recond's x, y, z taken as NIfTI's RAS axes.
 */
#ifndef RC_VOLUME_FORMAT_H
#define RC_VOLUME_FORMAT_H

#include <stddef.h>

#include "geometry/geometry.h"

/* Fills a malloc'd header into *hdr (length *len).  Returns 0 or RC_ENOMEM. */
int volume_nifti_header(const rc_volume_desc *v, unsigned char **hdr, size_t *len);
int volume_mha_header(const rc_volume_desc *v, unsigned char **hdr, size_t *len);

#endif
