/* volume_format: NIfTI-1 and MetaImage headers (volume_format.h). */
#include "http/volume_format.h"

#include <nifti1_io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rc_error.h"

static void origin(const rc_volume_desc *v, double o[3])
{
	o[0] = -0.5 * (v->nx - 1) * v->vx + v->cx;
	o[1] = -0.5 * (v->ny - 1) * v->vy + v->cy;
	o[2] = -0.5 * (v->nz - 1) * v->vz + v->cz;
}

int volume_nifti_header(const rc_volume_desc *v, unsigned char **hdr, size_t *len)
{
	int dims[8] = { 3, v->nx, v->ny, v->nz, 1, 1, 1, 1 };
	nifti_image *nim = nifti_make_new_nim(dims, NIFTI_TYPE_FLOAT32, 0);
	if (!nim)
		return RC_ENOMEM;
	double o[3];
	origin(v, o);
	nim->dx = nim->pixdim[1] = (float)v->vx;
	nim->dy = nim->pixdim[2] = (float)v->vy;
	nim->dz = nim->pixdim[3] = (float)v->vz;
	nim->xyz_units = NIFTI_UNITS_MM;
	nim->nifti_type = NIFTI_FTYPE_NIFTI1_1;
	mat44 m;
	memset(&m, 0, sizeof m);
	m.m[0][0] = (float)v->vx;
	m.m[1][1] = (float)v->vy;
	m.m[2][2] = (float)v->vz;
	m.m[0][3] = (float)o[0];
	m.m[1][3] = (float)o[1];
	m.m[2][3] = (float)o[2];
	m.m[3][3] = 1;
	nim->sform_code = NIFTI_XFORM_SCANNER_ANAT;
	nim->sto_xyz = m;
	nim->qform_code = NIFTI_XFORM_SCANNER_ANAT;
	nim->qto_xyz = m;
	float qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac;
	nifti_mat44_to_quatern(m, &qb, &qc, &qd, &qx, &qy, &qz, &dx, &dy, &dz, &qfac);
	nim->quatern_b = qb;
	nim->quatern_c = qc;
	nim->quatern_d = qd;
	nim->qoffset_x = qx;
	nim->qoffset_y = qy;
	nim->qoffset_z = qz;
	nim->qfac = qfac;
	snprintf(nim->descrip, sizeof nim->descrip, "recond reconstruction");
	nifti_set_iname_offset(nim);
	struct nifti_1_header h = nifti_convert_nim2nhdr(nim);
	nifti_image_free(nim);
	/* Single file: 348-byte header, 4-byte extension flag (none), data at 352. */
	h.vox_offset = 352;
	memcpy(h.magic, "n+1\0", 4);
	unsigned char *b = calloc(1, 352);
	if (!b)
		return RC_ENOMEM;
	memcpy(b, &h, sizeof h);
	*hdr = b;
	*len = 352;
	return 0;
}

int volume_mha_header(const rc_volume_desc *v, unsigned char **hdr, size_t *len)
{
	double o[3];
	origin(v, o);
	char *b = malloc(1024);
	if (!b)
		return RC_ENOMEM;
	int n = snprintf(b, 1024,
			 "ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
			 "CompressedData = False\nTransformMatrix = 1 0 0 0 1 0 0 0 1\n"
			 "Offset = %.17g %.17g %.17g\nCenterOfRotation = 0 0 0\n"
			 "ElementSpacing = %.17g %.17g %.17g\nDimSize = %d %d %d\n"
			 "ElementType = MET_FLOAT\nElementDataFile = LOCAL\n",
			 o[0], o[1], o[2], v->vx, v->vy, v->vz, v->nx, v->ny, v->nz);
	*hdr = (unsigned char *)b;
	*len = (size_t)n;
	return 0;
}
