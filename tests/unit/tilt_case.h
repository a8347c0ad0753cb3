/*
 * tilt_case: a cone scan's matrices with the object turned about x, so
 * that P[2] and P[10] are not 0 (the projectors' general path, no longer
 * a cone view): the tests of projectors and algorithms that must take it.
 */
#ifndef RC_TEST_TILT_CASE_H
#define RC_TEST_TILT_CASE_H

#include <math.h>

#include "geometry/geometry.h"

/* mats (12 per view): g's P with the object turned deg degrees about x,
 * P' = P [R 0; 0 1]. */
static void tilt_case_matrices(const rc_geom *g, double deg, double *mats)
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

#endif
