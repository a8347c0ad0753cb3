/*
 * tilt_case: a cone scan's matrices with the object turned about x, so
 * that P[2] and P[10] are not 0 (the projectors' general path, no longer
 * a cone view): the tests of projectors and algorithms that must take it.
 */
#ifndef RC_TEST_TILT_CASE_H
#define RC_TEST_TILT_CASE_H

#include <math.h>
#include <stdlib.h>

#include "geometry/geometry.h"

/* mats (12 per view): g's P with the object turned deg degrees about x,
 * P' = P [R 0; 0 1]. */
static inline void tilt_case_matrices(const rc_geom *g, double deg, double *mats)
{
	const double t = deg * M_PI / 180, c = cos(t), s = sin(t);
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		const double *P = rc_geom_view(g, k)->P;
		for (int r = 0; r < 3; r++) {
			double *o = mats + 12 * k + 4 * r;
			o[0] = P[4 * r];
			o[1] = c * P[4 * r + 1] + s * P[4 * r + 2];
			o[2] = -s * P[4 * r + 1] + c * P[4 * r + 2];
			o[3] = P[4 * r + 3];
		}
	}
}

/* A cone of nviews views at start_deg + 360 k / nviews degrees (source D
 * mm from the axis, detector S mm from the source), or with type
 * RC_GEOM_MATRICES that scan's matrices with the object turned 12 degrees
 * about x; NULL (err says why) on failure. */
static inline rc_geom *tilt_case_geom(rc_geom_type type, const rc_volume_desc *v, const rc_detector_desc *det,
				      int nviews, double start_deg, double D, double S, rc_err *err)
{
	double *ang = malloc((size_t)nviews * sizeof *ang), *mats = malloc((size_t)nviews * 12 * sizeof *mats);
	rc_geom *g = NULL;
	if (!ang || !mats) {
		rc_fail(err, RC_ENOMEM, "", "out of memory for the test geometry");
		goto out;
	}
	for (int k = 0; k < nviews; k++)
		ang[k] = start_deg + 360.0 * k / nviews;
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = nviews, .det = *det, .source_isocenter_mm = D,
			    .source_detector_mm = S, .angles_deg = ang };
	if (rc_geom_new(&sp, v, NULL, &g, err) || type == RC_GEOM_CONE)
		goto out;
	tilt_case_matrices(g, 12, mats);
	rc_geom_free(g);
	g = NULL;
	sp.type = RC_GEOM_MATRICES;
	sp.matrices = mats;
	(void)rc_geom_new(&sp, v, NULL, &g, err);
out:
	free(ang);
	free(mats);
	return g;
}

#endif
