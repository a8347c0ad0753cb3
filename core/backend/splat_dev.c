/* splat_dev: the device splat pairs' shared table (splat_dev.h). */
#include "backend/splat_dev.h"

#include <math.h>
#include <stdlib.h>

#include "projectors/proj_cpu.h"

int rc_dev_splat_suits(const rc_geom *g)
{
	return g && !rc_geom_is_2d(g) && rc_geom_detector(g)->shape != RC_DETECTOR_CURVED && rc_splat_suits(g) &&
	       !getenv("RECOND_NO_SPLAT");
}

double *rc_splat_dev_table(const rc_geom *g, size_t *n)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nk = rc_geom_nviews(g);
	*n = RC_SPLAT_DEV_HEAD + (size_t)nk * RC_SPLAT_DEV_VIEW;
	double *t = calloc(*n, sizeof *t);
	if (!t)
		return NULL;
	double o[3];
	rc_volume_voxel_pos(v, 0, 0, 0, o);
	t[0] = o[0], t[1] = o[1], t[2] = o[2], t[3] = v->vx, t[4] = v->vy, t[5] = v->vz;
	for (int k = 0; k < nk; k++) {
		double *r = t + RC_SPLAT_DEV_HEAD + (size_t)k * RC_SPLAT_DEV_VIEW;
		const double *P = rc_geom_view(g, k)->P;
		rc_splat_gain gn;
		rc_splat_gain_init(g, k, &gn);
		for (int i = 0; i < 12; i++)
			r[i] = P[i];
		for (int i = 0; i < 3; i++) {
			r[12 + i] = gn.c0[i];
			r[15 + i] = gn.cu[i];
			r[18 + i] = gn.cv[i];
		}
		r[21] = P[2] == 0 && P[10] == 0;
		r[22] = P[6] != 0 ? 1.0 / (fabs(P[6]) * v->vz) : 0.0;
	}
	return t;
}
