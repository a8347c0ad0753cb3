/*
 * helix_case: the helix geometries and the long phantom of the helix
 * tests (include after <cmocka.h>): a helix (or, pitch 0, the circular
 * cone) of D = 400, S = 800 mm on a 96 x 24 detector of 1 mm pixels
 * (12 mm high at the axis), long enough that a volume of nz slices of 1 mm
 * about z = 0 lies within its covered range (hx_geom_n: over its n-PI
 * intervals); and a Defrise-like stack of
 * thin discs with low-contrast blobs in a long body that extends beyond
 * every volume.
 */
#ifndef RC_TEST_HELIX_CASE_H
#define RC_TEST_HELIX_CASE_H

#include <math.h>
#include <stdlib.h>

#include "geometry/geometry.h"
#include "geometry/phantom.h"

#define HX_D 400.0
#define HX_S 800.0
#define HX_NU 96
#define HX_NV 24
#define HX_H_ISO (HX_NV * 1.0 * HX_D / HX_S) /* detector height at the axis */

/* A helix of pitch factor pf (pitch = pf times the height at the axis),
 * views_turn views per turn, over the z range that covers vol (with a
 * view of margin), or a circular cone (pf 0) of one turn.  *angles is the
 * caller's to free. */
static inline int hx_geom_n(double pf, int npi, int views_turn, rc_detector_shape shape, const rc_volume_desc *vol,
			    double **angles, rc_geom **g, rc_err *err)
{
	rc_geom_spec sp = { .type = pf > 0 ? RC_GEOM_HELIX : RC_GEOM_CONE, .source_isocenter_mm = HX_D,
			    .source_detector_mm = HX_S };
	sp.det = (rc_detector_desc){ .nu = HX_NU, .nv = HX_NV, .du = 1.0, .dv = 1.0, .shape = shape };
	double pitch = pf * HX_H_ISO, step = 360.0 / views_turn;
	int n = views_turn;
	if (pf > 0) {
		/* the margin helix.c asks for, from a probe of the same helix */
		double R = 0;
		for (int c = 0; c < 4; c++)
			R = fmax(R, hypot(vol->cx + (c & 1 ? 0.5 : -0.5) * vol->nx * vol->vx,
					  vol->cy + (c & 2 ? 0.5 : -0.5) * vol->ny * vol->vy));
		double gm = asin(R / HX_D), m = pitch * (0.5 * npi + gm / M_PI) + 1.0 * (HX_D + R) / HX_S;
		double z0 = vol->cz - (vol->nz - 1) / 2.0 * vol->vz - m - pitch / views_turn;
		double z1 = vol->cz + (vol->nz - 1) / 2.0 * vol->vz + m + pitch / views_turn;
		n = (int)ceil((z1 - z0) / pitch * views_turn) + 1;
		sp.z_start_mm = z0;
		sp.pitch_mm = pitch;
	}
	*angles = malloc(sizeof(double) * (size_t)n);
	if (!*angles)
		return -1;
	for (int k = 0; k < n; k++)
		(*angles)[k] = 10.0 + k * step;
	sp.nviews = n;
	sp.angles_deg = *angles;
	return rc_geom_new(&sp, vol, NULL, g, err);
}

/* hx_geom_n over the range the Tam-Danielsson window needs (npi 1). */
static inline int hx_geom(double pf, int views_turn, rc_detector_shape shape, const rc_volume_desc *vol, double **angles,
			  rc_geom **g, rc_err *err)
{
	return hx_geom_n(pf, 1, views_turn, shape, vol, angles, g, err);
}

/* The long phantom: a body (mu 0.2, radius 16 mm, 140 mm long), discs of
 * radius 12 mm and 2 mm thickness every 4 mm along z (mu +0.4: Defrise's
 * stack) and low-contrast blobs (+0.02, radius 2.5 mm). */
static inline int hx_phantom(rc_phantom **p, rc_err *err)
{
	rc_ellipsoid e[40];
	int n = 0;
	e[n++] = (rc_ellipsoid){ .c = { 0, 0, 0 }, .a = { 16, 16, 70 }, .mu = 0.2 };
	for (int i = -8; i <= 8; i++)
		e[n++] = (rc_ellipsoid){ .c = { 0, 0, 4.0 * i }, .a = { 12, 12, 1.0 }, .mu = 0.4 };
	static const double blobs[][3] = { { 6, 3, 2 }, { -5, 7, -6 }, { 3, -8, 9 }, { -8, -4, -13 }, { 9, 0, 15 },
					   { 0, 9, -17 } };
	for (int i = 0; i < 6; i++)
		e[n++] = (rc_ellipsoid){ .c = { blobs[i][0], blobs[i][1], blobs[i][2] }, .a = { 2.5, 2.5, 2.5 },
					 .mu = 0.02 };
	return rc_phantom_new(e, n, p, err);
}

#endif
