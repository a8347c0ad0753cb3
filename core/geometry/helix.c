/*
 * helix: the Tam-Danielsson window and the checks of a helix (geometry.h).
 *
 * Source at angle t (radians), D from the axis, height z(t); lead h per
 * turn along the scan, sigma = +1 for angles that increase.  The helix
 * point a scan angle tau after the source lies, seen from it in the plane
 * of rotation, at fan angle gamma with tau = pi - 2 sigma gamma and at the
 * chord's distance 2 D cos gamma; it is h tau / 2 pi higher.  On a
 * cylindrical detector of radius S its row coordinate is S dz / L, on a
 * flat one S dz / (L cos gamma).  The turn before the source is the same
 * with tau = -(pi + 2 sigma gamma).  Those two curves bound the window.
 */
#include "geometry/geometry.h"

#include <math.h>

void rc_geom_helix_window(const rc_geom *g, int n, double gamma, double *lo, double *hi)
{
	double h = rc_geom_lead(g), D = rc_geom_sid(g), S = rc_geom_sdd(g);
	double sigma = rc_geom_pitch(g) == h ? 1.0 : -1.0, c = cos(gamma);
	double scale = S / (4 * M_PI * D * c);
	if (rc_geom_detector(g)->shape != RC_DETECTOR_CURVED)
		scale /= c;
	double after = scale * h * (n * M_PI - 2 * sigma * gamma), before = -scale * h * (n * M_PI + 2 * sigma * gamma);
	*lo = fmin(after, before);
	*hi = fmax(after, before);
}

int rc_geom_helix_check_spec(const rc_geom_spec *sp, rc_err *err)
{
	if (!isfinite(sp->pitch_mm))
		return rc_fail(err, RC_EINVAL, "geometry.pitch_mm", "geometry.pitch_mm must be a finite number (got %g)",
			       sp->pitch_mm);
	if (!isfinite(sp->z_start_mm))
		return rc_fail(err, RC_EINVAL, "geometry.z_start_mm",
			       "geometry.z_start_mm must be a finite number (got %g)", sp->z_start_mm);
	for (int k = 0; k < sp->nviews; k++)
		if (!isfinite(sp->z_start_mm + sp->pitch_mm * (sp->angles_deg[k] - sp->angles_deg[0]) / 360.0))
			return rc_fail(err, RC_EINVAL, "geometry.pitch_mm",
				       "geometry.pitch_mm (%g): the source height of view %d, z_start_mm + pitch_mm (angle - "
				       "first angle) / 360, is no finite number",
				       sp->pitch_mm, k);
	if (sp->pitch_mm == 0)
		return 0;
	double sign = sp->nviews > 1 && sp->angles_deg[1] < sp->angles_deg[0] ? -1.0 : 1.0;
	for (int k = 1; k < sp->nviews; k++)
		if (!(sign * (sp->angles_deg[k] - sp->angles_deg[k - 1]) > 0))
			return rc_fail(err, RC_EINVAL, "geometry.angles",
				       "geometry.angles: a helix (pitch_mm not 0) is one scan: each angle must continue "
				       "past the one before in the direction of views 0 and 1 (view %d does not)", k);
	return 0;
}

double rc_geom_helix_gamma_max(const rc_geom *g)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	double r = 0;
	for (int c = 0; c < 4; c++) {
		double x = v->cx + (c & 1 ? 0.5 : -0.5) * v->nx * v->vx, y = v->cy + (c & 2 ? 0.5 : -0.5) * v->ny * v->vy;
		r = fmax(r, hypot(x, y));
	}
	return asin(fmin(r / rc_geom_sid(g), 0.999));
}

double rc_geom_helix_margin(const rc_geom *g)
{
	double gm = rc_geom_helix_gamma_max(g), D = rc_geom_sid(g), S = rc_geom_sdd(g);
	double rmax = D * sin(gm);
	return fabs(rc_geom_pitch(g)) * (0.5 + gm / M_PI) + rc_geom_detector(g)->dv * (D + rmax) / S;
}

int rc_geom_helix_check(const rc_geom *g, rc_err *err)
{
	double pitch = rc_geom_pitch(g);
	if (pitch == 0)
		return 0;
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *v = rc_geom_volume(g);
	/* the window over the fan angles the volume needs (and the detector has) */
	double gm = rc_geom_helix_gamma_max(g);
	double g0 = fmax(-gm, rc_geom_column_gamma(g, 0)), g1 = fmin(gm, rc_geom_column_gamma(g, d->nu - 1));
	double wlo = 0, whi = 0;
	for (int i = 0; i <= 64; i++) {
		double lo, hi;
		rc_geom_helix_window(g, 1, g0 + (g1 - g0) * i / 64.0, &lo, &hi);
		wlo = fmin(wlo, lo);
		whi = fmax(whi, hi);
	}
	/* rows less one at each edge: the FDK's window edge is a row wide */
	double top = (d->nv - 1) / 2.0 * d->dv + d->offset_v - d->dv;
	double bottom = -(d->nv - 1) / 2.0 * d->dv + d->offset_v + d->dv;
	if (whi > top || wlo < bottom) {
		double lim = top > 0 && bottom < 0 ? fabs(pitch) * fmin(top / whi, bottom / wlo) : 0.0;
		return rc_fail(err, RC_EINVAL, "geometry.pitch_mm",
			       "geometry.pitch_mm (%g) exceeds %.3g mm, the largest this detector and volume support: "
			       "every voxel must be seen over half a turn plus its fan angle, within the detector's "
			       "rows less one at each edge (the Tam-Danielsson window spans %.2f to %.2f mm on the "
			       "detector, its rows %.2f to %.2f mm); use a smaller pitch or a taller detector",
			       pitch, lim, wlo, whi, bottom, top);
	}
	double zmin = INFINITY, zmax = -INFINITY;
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		zmin = fmin(zmin, rc_geom_view(g, k)->src[2]);
		zmax = fmax(zmax, rc_geom_view(g, k)->src[2]);
	}
	double m = rc_geom_helix_margin(g), lo = zmin + m, hi = zmax - m;
	double z0 = v->cz - (v->nz - 1) / 2.0 * v->vz, z1 = v->cz + (v->nz - 1) / 2.0 * v->vz;
	double tol = 1e-9 * (fabs(zmin) + fabs(zmax) + m);
	if (z0 < lo - tol || z1 > hi + tol)
		return rc_fail(err, RC_EINVAL, "volume",
			       "the volume's slices span z %.2f to %.2f mm, but the helix covers only z %.2f to %.2f mm "
			       "(its sources span %.2f to %.2f mm; each voxel must be seen over its whole PI interval, "
			       "%.2f mm of source travel either side): move volume.center_mm[2], make volume.nz "
			       "smaller or scan a longer helix (geometry.angles, z_start_mm)",
			       z0, z1, lo, hi, zmin, zmax, m);
	return 0;
}
