/*
 * phantom: analytic test objects made of ellipsoids, so that no projector or
 * algorithm is ever checked against itself.
 *
 * An object is a sum of ellipsoids, each of constant density mu (1/mm, may be
 * negative: the modified Shepp-Logan subtracts), centre c (mm), semi-axes a
 * (mm) along the ellipsoid's own x, y, z, rotated by phi about the world z
 * axis.  Everything the tests need follows exactly from that description:
 *  - the density at a point (rc_phantom_value),
 *  - the line integral along any ray or segment (rc_phantom_integral): the
 *    exact chord length through each ellipsoid times its density,
 *  - a whole projection stack for any rc_geom (rc_phantom_project),
 *  - a voxelisation with k^3 sub-samples per voxel (rc_phantom_voxelize),
 *  - the total mass, sum of mu * 4/3 pi a b c (rc_phantom_mass).
 *
 * Attenuation scale: the Shepp-Logan densities are dimensionless (skull 1,
 * brain 0.2 in the modified version); rc_phantom_shepp_logan multiplies them
 * by RC_PHANTOM_MU_UNIT = 0.1/mm so that brain matter is water-like
 * (0.02/mm, water at about 70 keV is 0.019/mm) and the skull 0.1/mm.
 *
 * Life cycle: one of the constructors, then rc_phantom_free (NULL is fine).
 * A phantom is read-only after construction and may be shared by threads.
 */
#ifndef RC_PHANTOM_H
#define RC_PHANTOM_H

#include <stddef.h>

#include "geometry/geometry.h"
#include "util/rc_error.h"

#define RC_PHANTOM_MU_UNIT 0.1    /* 1/mm per Shepp-Logan density unit */
#define RC_PHANTOM_MAX_ELLIPSOIDS 1024

typedef struct rc_ellipsoid {
	double c[3];    /* centre, mm */
	double a[3];    /* semi-axes along the rotated x, y and z, mm (> 0) */
	double phi_deg; /* rotation about z, counter-clockwise seen from +z */
	double mu;      /* density added inside, 1/mm */
} rc_ellipsoid;

typedef struct rc_phantom rc_phantom;

/* Any set of 1..RC_PHANTOM_MAX_ELLIPSOIDS ellipsoids (copied). */
int rc_phantom_new(const rc_ellipsoid *e, int n, rc_phantom **ret, rc_err *err);

/* The 3-D modified Shepp-Logan phantom (Kak & Slaney's ellipsoids with
 * Toft's higher-contrast densities; the two ventricles rotate about z only)
 * defined on [-1, 1]^3 and scaled so that this cube is fov_mm wide, centred
 * at the origin; densities times RC_PHANTOM_MU_UNIT. */
int rc_phantom_shepp_logan(double fov_mm, rc_phantom **ret, rc_err *err);

/* One ball of radius r mm and density mu 1/mm centred at c. */
int rc_phantom_ball(const double c[3], double r, double mu, rc_phantom **ret, rc_err *err);

void rc_phantom_free(rc_phantom *p);

int rc_phantom_count(const rc_phantom *p);

/* Density (1/mm) at point x (mm); points on a surface count as inside. */
double rc_phantom_value(const rc_phantom *p, const double x[3]);

/* Integral of the density along o + t*d for t in [t0, t1] (mm x 1/mm);
 * d need not be unit (the result is in world length), t0/t1 may be
 * -INFINITY/INFINITY.  A segment from a to b is o = a, d = b - a, [0, 1]. */
double rc_phantom_integral(const rc_phantom *p, const double o[3], const double d[3],
			   double t0, double t1);

/* Integral over the volume: sum of mu * 4/3 pi a0 a1 a2 (mm^3 / mm). */
double rc_phantom_mass(const rc_phantom *p);

/* Fills vol (rc_volume_count floats, [z][y][x]) with the mean density over
 * each voxel estimated from k x k x k regularly spaced sub-samples (k in
 * 1..16).  threads: 0 = all cores. */
int rc_phantom_voxelize(const rc_phantom *p, const rc_volume_desc *vol, int k,
			int threads, float *out, rc_err *err);

/* Fills proj (rc_geom_proj_count floats, in the layout of geometry.h) with
 * the exact line integrals of every pixel:
 *   cone:      the segment from the source to the pixel centre (API.md);
 *   matrices:  the ray from the source through the pixel, to infinity (no
 *              detector distance is known);
 *   fan:       the segment from the source to the pixel centre on the
 *              detector line at source_detector_mm (flat) or on the arc of
 *              that radius about the source (curved), in the slice's plane;
 *   parallel:  the whole line through the pixel in the slice's plane.
 * threads: 0 = all cores. */
int rc_phantom_project(const rc_phantom *p, const rc_geom *g, int threads,
		       float *proj, rc_err *err);

#endif
