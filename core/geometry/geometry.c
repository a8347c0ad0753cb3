/*
 * geometry: validation and the per-view matrices (geometry.h).
 *
 * Cone, view k at angle t, D = source-isocentre, S = source-detector:
 *   s = D (cos t, sin t, 0), n = -(cos t, sin t, 0) (source towards detector),
 *   d = s + S n, e_u = (-sin t, cos t, 0), e_v = (0, 0, 1).
 * A point X projects along s->X onto the detector plane at depth S:
 *   w = (X - s).n,  u_mm = S (X - s).e_u / w,  v_mm = S (X - s).e_v / w,
 * and pixel i = (u_mm - offset_u)/du + (nu-1)/2 (likewise j).  Multiplying by
 * w gives rows linear in X:
 *   row_u = (S/du) e_u + c_u n,   c_u = (nu-1)/2 - offset_u/du
 *   row_v = (S/dv) e_v + c_v n,   c_v = (nv-1)/2 - offset_v/dv
 *   row_w = n,  each with the constant -row.s.
 * Fan is the same in the (x, y) plane; parallel replaces the perspective by
 * u_mm = X.e_u with w = 1.  Client matrices are scaled so row_w has unit
 * norm and w > 0 at the volume centre.
 *
 * A curved fan (an arc of radius S about the source) keeps the flat A of
 * the same du and offset_u: its depth row is the same, and a ray at fan
 * angle gamma is the flat line of index (S tan gamma - offset_u)/du + c_u,
 * so line-based code (the distance-driven rows) needs only that index
 * (rc_geom_line_u); its pixel index is the angle's (rc_geom_plane_u).
 */
#include "geometry/geometry.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rc_geom {
	rc_geom_type type;
	int nviews;
	rc_detector_desc det;
	rc_volume_desc vol;
	double sid, sdd;
	double pitch, lead; /* helix (geometry.h), else 0 */
	rc_view *views;
};

static int finite_pos(double x) { return isfinite(x) && x > 0; }

static int check_volume(const rc_volume_desc *v, rc_err *err)
{
	const int n[3] = { v->nx, v->ny, v->nz };
	const double s[3] = { v->vx, v->vy, v->vz };
	const double c[3] = { v->cx, v->cy, v->cz };
	static const char *nn[3] = { "volume.nx", "volume.ny", "volume.nz" };
	static const char *cn[3] = { "volume.center_mm[0]", "volume.center_mm[1]", "volume.center_mm[2]" };
	for (int a = 0; a < 3; a++) {
		if (n[a] < 1 || n[a] > 65536)
			return rc_fail(err, RC_EINVAL, nn[a], "%s must be an integer from 1 to 65536 (got %d)", nn[a], n[a]);
		if (!finite_pos(s[a]))
			return rc_fail(err, RC_EINVAL, "volume.voxel_mm",
				       "volume.voxel_mm[%d] must be a positive finite number of millimetres (got %g)", a, s[a]);
		if (!isfinite(c[a]))
			return rc_fail(err, RC_EINVAL, cn[a], "%s must be a finite number (got %g)", cn[a], c[a]);
		/* the geometry adds a few extents (a parallel ray starts beyond both
		 * in-plane ones, doubled): finite with room to spare */
		if (!isfinite(8 * (n[a] * s[a] + fabs(c[a]))))
			return rc_fail(err, RC_EINVAL, "volume.voxel_mm",
				       "volume.voxel_mm[%d] (%g) times %s (%d) is no finite number of millimetres", a, s[a],
				       nn[a], n[a]);
	}
	return 0;
}

static int check_detector(const rc_geom_spec *sp, rc_err *err)
{
	const rc_detector_desc *d = &sp->det;
	int is2d = sp->type == RC_GEOM_FAN || sp->type == RC_GEOM_PARALLEL;
	if (d->shape != RC_DETECTOR_FLAT && d->shape != RC_DETECTOR_CURVED)
		return rc_fail(err, RC_EINVAL, "geometry.detector.shape",
			       "geometry.detector.shape %d is no detector shape (flat or curved)", (int)d->shape);
	if (d->shape == RC_DETECTOR_CURVED && sp->type != RC_GEOM_FAN && !rc_geom_type_is_cone(sp->type))
		return rc_fail(err, RC_EINVAL, "geometry.detector.shape",
			       "geometry.detector.shape \"curved\" applies to fan, cone and helix geometries only; other types "
			       "have a flat detector");
	if (d->nu < 1 || d->nu > 65536)
		return rc_fail(err, RC_EINVAL, "geometry.detector.nu",
			       "geometry.detector.nu must be an integer from 1 to 65536 (got %d)", d->nu);
	if (!is2d && (d->nv < 1 || d->nv > 65536))
		return rc_fail(err, RC_EINVAL, "geometry.detector.nv",
			       "geometry.detector.nv must be an integer from 1 to 65536 (got %d)", d->nv);
	if (sp->type == RC_GEOM_MATRICES)
		return 0; /* spacing and offsets are inside the matrices */
	if (!finite_pos(d->du))
		return rc_fail(err, RC_EINVAL, "geometry.detector.du_mm",
			       "geometry.detector.du_mm must be a positive finite number (got %g)", d->du);
	if (!is2d && !finite_pos(d->dv))
		return rc_fail(err, RC_EINVAL, "geometry.detector.dv_mm",
			       "geometry.detector.dv_mm must be a positive finite number (got %g)", d->dv);
	if (!isfinite(d->offset_u))
		return rc_fail(err, RC_EINVAL, "geometry.detector.offset_u_mm",
			       "geometry.detector.offset_u_mm must be a finite number (got %g)", d->offset_u);
	if (!is2d && !isfinite(d->offset_v))
		return rc_fail(err, RC_EINVAL, "geometry.detector.offset_v_mm",
			       "geometry.detector.offset_v_mm must be a finite number (got %g)", d->offset_v);
	/* pixel positions and ray origins are in mm: the extent must be a number */
	if (!isfinite(8 * (d->nu * d->du + fabs(d->offset_u))) ||
	    (!is2d && !isfinite(8 * (d->nv * d->dv + fabs(d->offset_v)))))
		return rc_fail(err, RC_EINVAL, "geometry.detector",
			       "geometry.detector: its extent (%d x %g mm, %d x %g mm, offsets %g and %g mm) is no finite "
			       "number of millimetres", d->nu, d->du, d->nv, d->dv, d->offset_u, d->offset_v);
	return 0;
}

/* A curved fan's pixel edges must stay within RC_CURVED_MAX_DEG of the
 * central ray: rays at 90 degrees and beyond never meet the tangent flat
 * detector of A (rc_geom_line_u) and would leave the source sideways. */
static int check_curved(const rc_geom_spec *sp, rc_err *err)
{
	const rc_detector_desc *d = &sp->det;
	if (d->shape != RC_DETECTOR_CURVED)
		return 0;
	double half = (d->nu * d->du / 2 + fabs(d->offset_u)) / sp->source_detector_mm;
	double lim = RC_CURVED_MAX_DEG * (M_PI / 180.0);
	if (!(half <= lim))
		return rc_fail(err, RC_EINVAL, "geometry.detector",
			       "geometry.detector: a curved detector must lie within %g degrees of its central ray; its pixels "
			       "(%d of %g mm, offset %g mm, on an arc of radius %g mm) reach %.1f degrees: use fewer or "
			       "smaller pixels or a smaller offset_u_mm",
			       RC_CURVED_MAX_DEG, d->nu, d->du, d->offset_u, sp->source_detector_mm, half * (180.0 / M_PI));
	return 0;
}

static int check_sizes(const rc_geom_spec *sp, const rc_volume_desc *v,
		       const rc_limits *lim, rc_err *err)
{
	/* Products in 128-bit-safe steps: each factor is <= 65536 or nviews. */
	unsigned __int128 nvox = (unsigned __int128)v->nx * (unsigned)v->ny * (unsigned)v->nz;
	int nv = (sp->type == RC_GEOM_FAN || sp->type == RC_GEOM_PARALLEL) ? v->nz : sp->det.nv;
	unsigned __int128 npix = (unsigned __int128)(unsigned)sp->nviews * (unsigned)sp->det.nu * (unsigned)nv;
	unsigned __int128 bytes = 4 * (nvox + npix);
	if (4 * nvox > SIZE_MAX / 4 || 4 * npix > SIZE_MAX / 4)
		return rc_fail(err, RC_ETOOBIG, "volume", "the volume or projection buffers overflow this machine's address space");
	if (lim && lim->max_bytes && bytes > lim->max_bytes)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the job needs %.1f MiB for projections and volume, over the configured cap of %.1f MiB",
			       (double)bytes / 1048576.0, (double)lim->max_bytes / 1048576.0);
	return 0;
}

static double dot3(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static int invert3(const double *m, double *inv)
{
	double c00 = m[4] * m[8] - m[5] * m[7], c01 = m[5] * m[6] - m[3] * m[8], c02 = m[3] * m[7] - m[4] * m[6];
	double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
	double scale = fabs(m[0]) + fabs(m[1]) + fabs(m[2]) + fabs(m[3]) + fabs(m[4]) + fabs(m[5]) +
		       fabs(m[6]) + fabs(m[7]) + fabs(m[8]);
	if (!isfinite(det) || fabs(det) <= 1e-12 * scale * scale * scale)
		return -1;
	double id = 1.0 / det;
	inv[0] = c00 * id;
	inv[1] = (m[2] * m[7] - m[1] * m[8]) * id;
	inv[2] = (m[1] * m[5] - m[2] * m[4]) * id;
	inv[3] = c01 * id;
	inv[4] = (m[0] * m[8] - m[2] * m[6]) * id;
	inv[5] = (m[2] * m[3] - m[0] * m[5]) * id;
	inv[6] = c02 * id;
	inv[7] = (m[1] * m[6] - m[0] * m[7]) * id;
	inv[8] = (m[0] * m[4] - m[1] * m[3]) * id;
	return 0;
}

/* Source of a 3x4 matrix: its null vector, -M^-1 p4. */
static void matrix_source(const double *P, const double *Minv, double *src)
{
	double p4[3] = { P[3], P[7], P[11] };
	for (int r = 0; r < 3; r++)
		src[r] = -(Minv[3 * r] * p4[0] + Minv[3 * r + 1] * p4[1] + Minv[3 * r + 2] * p4[2]);
}

static int build_cone(rc_geom *g, const rc_geom_spec *sp, int k, rc_err *err)
{
	rc_view *vw = &g->views[k];
	const rc_detector_desc *d = &sp->det;
	double t = sp->angles_deg[k] * (M_PI / 180.0);
	double D = sp->source_isocenter_mm, S = sp->source_detector_mm;
	double ct = cos(t), st = sin(t);
	/* a helix's view is the cone's translated by its source height */
	double z = sp->type == RC_GEOM_HELIX
			   ? sp->z_start_mm + sp->pitch_mm * (sp->angles_deg[k] - sp->angles_deg[0]) / 360.0
			   : 0.0;
	double s[3] = { D * ct, D * st, z }, n[3] = { -ct, -st, 0 };
	double eu[3] = { -st, ct, 0 }, ev[3] = { 0, 0, 1 };
	double cu = (d->nu - 1) / 2.0 - d->offset_u / d->du;
	double cv = (d->nv - 1) / 2.0 - d->offset_v / d->dv;
	double ru[3], rv[3];
	for (int a = 0; a < 3; a++) {
		ru[a] = S / d->du * eu[a] + cu * n[a];
		rv[a] = S / d->dv * ev[a] + cv * n[a];
	}
	double *P = vw->P;
	for (int a = 0; a < 3; a++) {
		P[a] = ru[a];
		P[4 + a] = rv[a];
		P[8 + a] = n[a];
	}
	P[3] = -dot3(ru, s);
	P[7] = -dot3(rv, s);
	P[11] = -dot3(n, s);
	/* a helix's height times the pixel scale S/dv can overflow (a cone's
	 * pixel sizes are checked apart, naming geometry.detector) */
	if (sp->type == RC_GEOM_HELIX && (!isfinite(P[3]) || !isfinite(P[7]) || !isfinite(P[11])))
		return rc_fail(err, RC_EINVAL, "geometry.z_start_mm",
			       "view %d: the source's height %g mm (z_start_mm + pitch_mm (angle - first angle) / 360) "
			       "is too large for the detector's scale: its projection matrix is no finite number",
			       k, z);
	double M[9] = { P[0], P[1], P[2], P[4], P[5], P[6], P[8], P[9], P[10] };
	/* e_u, e_v, n are orthogonal, so M is invertible in exact arithmetic;
	 * numerically not when the pixel scale S/du (or S/dv) vanishes next to
	 * the centre offset c_u (or c_v): then the rows are parallel to n in
	 * doubles, and without an inverse every ray direction would be 0/0. */
	if (invert3(M, vw->Minv))
		return rc_fail(err, RC_EINVAL, "geometry.detector",
			       "view %d: the projection is numerically singular: the detector (%d x %d pixels of %g x %g "
			       "mm, offset by (%g, %g) mm) is far too large for its distance of %g mm from the source",
			       k, d->nu, d->nv, d->du, d->dv, d->offset_u, d->offset_v, S);
	memcpy(vw->src, s, sizeof s);
	vw->angle_rad = t;
	return 0;
}

static int build_2d(rc_geom *g, const rc_geom_spec *sp, int k, rc_err *err)
{
	rc_view *vw = &g->views[k];
	const rc_detector_desc *d = &sp->det;
	double t = sp->angles_deg[k] * (M_PI / 180.0);
	double ct = cos(t), st = sin(t);
	double cu = (d->nu - 1) / 2.0 - d->offset_u / d->du;
	vw->angle_rad = t;
	if (sp->type == RC_GEOM_FAN) {
		double D = sp->source_isocenter_mm, S = sp->source_detector_mm;
		/* rows over (x, y, 1): u*w = (S/du) e_u.(X-s) + c_u w, w = n.(X-s) = n.X + D */
		double ru0 = S / d->du * -st + cu * -ct, ru1 = S / d->du * ct + cu * -st;
		vw->A[0] = ru0;
		vw->A[1] = ru1;
		vw->A[2] = -(ru0 * D * ct + ru1 * D * st);
		vw->A[3] = -ct;
		vw->A[4] = -st;
		vw->A[5] = D;
		vw->src[0] = D * ct;
		vw->src[1] = D * st;
		vw->src[2] = 0;
		/* det [A0 A1; A3 A4] = S/du exactly; in doubles it vanishes, and with
		 * it every ray's direction, when S/du is negligible next to c_u (as
		 * the cone's 3x3 in build_cone) */
		double det = ru0 * vw->A[4] - ru1 * vw->A[3], scale = fabs(ru0) + fabs(ru1) + fabs(ct) + fabs(st);
		if (!isfinite(det) || fabs(det) <= 1e-12 * scale * scale)
			return rc_fail(err, RC_EINVAL, "geometry.detector",
				       "view %d: the projection is numerically singular: the detector (%d pixels of %g mm, "
				       "offset by %g mm) is far too large for its distance of %g mm from the source",
				       k, d->nu, d->du, d->offset_u, S);
	} else {
		/* 1/du overflows for a subnormal du (JSON carries 5e-324) */
		if (!isfinite(1.0 / d->du) || !isfinite(cu))
			return rc_fail(err, RC_EINVAL, "geometry.detector.du_mm",
				       "geometry.detector.du_mm (%g) is too small: 1/du_mm or offset_u_mm/du_mm overflows",
				       d->du);
		vw->A[0] = -st / d->du;
		vw->A[1] = ct / d->du;
		vw->A[2] = cu;
		vw->A[3] = 0;
		vw->A[4] = 0;
		vw->A[5] = 1;
		vw->dir[0] = -ct;
		vw->dir[1] = -st;
		vw->dir[2] = 0;
	}
	return 0;
}

static int build_matrix(rc_geom *g, const rc_geom_spec *sp, int k, rc_err *err)
{
	rc_view *vw = &g->views[k];
	const double *in = sp->matrices + 12 * (size_t)k;
	for (int i = 0; i < 12; i++)
		if (!isfinite(in[i]))
			return rc_fail(err, RC_EINVAL, "geometry.matrices",
				       "geometry.matrices[%d][%d] must be a finite number", k, i);
	double M[9] = { in[0], in[1], in[2], in[4], in[5], in[6], in[8], in[9], in[10] };
	double Minv[9];
	if (invert3(M, Minv))
		return rc_fail(err, RC_EINVAL, "geometry.matrices",
			       "geometry.matrices[%d]: the left 3x3 block is singular, so it is no projection", k);
	double norm = sqrt(in[8] * in[8] + in[9] * in[9] + in[10] * in[10]);
	if (!(norm > 0))
		return rc_fail(err, RC_EINVAL, "geometry.matrices", "geometry.matrices[%d]: the third row is zero", k);
	/* w > 0 at the volume centre after scaling */
	const rc_volume_desc *v = &g->vol;
	double wc = in[8] * v->cx + in[9] * v->cy + in[10] * v->cz + in[11];
	double scale = (wc < 0 ? -1.0 : 1.0) / norm;
	for (int i = 0; i < 12; i++)
		vw->P[i] = in[i] * scale;
	for (int i = 0; i < 9; i++)
		Minv[i] /= scale;
	memcpy(vw->Minv, Minv, sizeof Minv);
	matrix_source(vw->P, vw->Minv, vw->src);
	vw->angle_rad = atan2(vw->src[1], vw->src[0]);
	/* finite numbers in, but their squares or the source can overflow */
	int finite = 1;
	for (int i = 0; i < 12; i++)
		finite &= isfinite(vw->P[i]) && (i >= 9 || isfinite(vw->Minv[i])) && (i >= 3 || isfinite(vw->src[i]));
	if (!finite)
		return rc_fail(err, RC_EINVAL, "geometry.matrices",
			       "geometry.matrices[%d]: its numbers are too large: the normalised matrix, its inverse "
			       "or its source is no finite number", k);
	return 0;
}

/* The source must be outside the volume box; for cone/fan the detector
 * plane must lie beyond it; every view must see part of the volume. */
static int check_views(const rc_geom *g, rc_err *err)
{
	const rc_volume_desc *v = &g->vol;
	double lo[3], hi[3];
	const double n[3] = { v->nx, v->ny, v->nz }, s[3] = { v->vx, v->vy, v->vz }, c[3] = { v->cx, v->cy, v->cz };
	for (int a = 0; a < 3; a++) {
		lo[a] = c[a] - n[a] * s[a] / 2;
		hi[a] = c[a] + n[a] * s[a] / 2;
	}
	int is2d = g->type == RC_GEOM_FAN || g->type == RC_GEOM_PARALLEL;
	double umax = g->det.nu - 0.5, vmax = is2d ? 0.5 : g->det.nv - 0.5;
	for (int k = 0; k < g->nviews; k++) {
		const rc_view *vw = &g->views[k];
		if (g->type != RC_GEOM_PARALLEL) {
			int inside = vw->src[0] >= lo[0] && vw->src[0] <= hi[0] && vw->src[1] >= lo[1] &&
				     vw->src[1] <= hi[1] && (is2d || (vw->src[2] >= lo[2] && vw->src[2] <= hi[2]));
			if (inside && g->type == RC_GEOM_MATRICES)
				return rc_fail(err, RC_EINVAL, "geometry.matrices",
					       "geometry.matrices[%d]: its source (%.1f, %.1f, %.1f) mm lies inside the volume; "
					       "check the matrix or make the volume smaller", k, vw->src[0], vw->src[1], vw->src[2]);
			if (inside)
				return rc_fail(err, RC_EINVAL, "geometry.source_isocenter_mm",
					       "view %d: the source (%.1f, %.1f, %.1f) mm lies inside the volume; move it out "
					       "(larger source_isocenter_mm) or make the volume smaller", k, vw->src[0], vw->src[1], vw->src[2]);
		}
		double umin_seen = INFINITY, umax_seen = -INFINITY, vmin_seen = INFINITY, vmax_seen = -INFINITY;
		int behind = 0;
		for (int corner = 0; corner < 8; corner++) {
			double X[3] = { corner & 1 ? hi[0] : lo[0], corner & 2 ? hi[1] : lo[1], corner & 4 ? hi[2] : lo[2] };
			double u, vv, w;
			if (is2d) {
				u = rc_geom_plane_u(g, k, X[0], X[1], &w);
				vv = 0;
			} else if (g->det.shape == RC_DETECTOR_CURVED) {
				rc_geom_cyl_project(g, k, X, &u, &vv, &w);
			} else {
				rc_view_project(vw, X, &u, &vv, &w);
			}
			if (w <= 0) {
				behind = 1;
				continue;
			}
			if (g->det.shape == RC_DETECTOR_CURVED) {
				/* the arc is at distance S from the source, the box's
				 * farthest point from it one of its corners */
				double r = hypot(X[0] - vw->src[0], X[1] - vw->src[1]);
				if (r >= g->sdd)
					return rc_fail(err, RC_EINVAL, "geometry.source_detector_mm",
						       "view %d: the curved detector cuts the volume; source_detector_mm (%g) "
						       "must exceed the distance from the source to the farthest volume corner "
						       "(%.1f mm)", k, g->sdd, r);
			} else if ((rc_geom_type_is_cone(g->type) || g->type == RC_GEOM_FAN) && w >= g->sdd)
				return rc_fail(err, RC_EINVAL, "geometry.source_detector_mm",
					       "view %d: the detector plane cuts the volume; source_detector_mm (%g) must exceed "
					       "the depth of the farthest volume corner (%.1f mm)", k, g->sdd, w);
			umin_seen = fmin(umin_seen, u);
			umax_seen = fmax(umax_seen, u);
			vmin_seen = fmin(vmin_seen, vv);
			vmax_seen = fmax(vmax_seen, vv);
		}
		if (behind || g->type == RC_GEOM_HELIX)
			continue; /* the box straddles the source plane: it is seen; a helix's views
				     beyond the volume's ends see none of it (helix.c checks coverage) */
		if (umax_seen < -0.5 || umin_seen > umax || vmax_seen < -0.5 || vmin_seen > vmax) {
			const char *f = g->type == RC_GEOM_MATRICES ? "geometry.matrices" : "geometry.detector";
			return rc_fail(err, RC_EINVAL, f,
				       "view %d: the detector sees none of the volume (it projects to u %.1f..%.1f, v %.1f..%.1f "
				       "pixels, the detector spans -0.5..%.1f, -0.5..%.1f); check %s (offsets, sizes) and the volume centre",
				       k, umin_seen, umax_seen, vmin_seen, vmax_seen, umax, vmax, f);
		}
	}
	return 0;
}

int rc_geom_new(const rc_geom_spec *sp, const rc_volume_desc *vol,
		const rc_limits *lim, rc_geom **ret, rc_err *err)
{
	int rc;
	if (!sp || !vol || !ret)
		return rc_fail(err, RC_EINVAL, "", "rc_geom_new needs a spec, a volume and a result pointer");
	if (sp->type < RC_GEOM_CONE || sp->type > RC_GEOM_HELIX)
		return rc_fail(err, RC_EINVAL, "geometry.type",
			       "geometry.type must be cone, helix, matrices, fan or parallel");
	if (sp->nviews < 1 || sp->nviews > 1000000) {
		const char *f = sp->type == RC_GEOM_MATRICES ? "geometry.matrices" : "geometry.angles.count";
		return rc_fail(err, RC_EINVAL, f, "%s must give 1 to 1000000 views (got %d)", f, sp->nviews);
	}
	if ((rc = check_volume(vol, err)) || (rc = check_detector(sp, err)) || (rc = check_sizes(sp, vol, lim, err)))
		return rc;
	if (rc_geom_type_is_cone(sp->type) || sp->type == RC_GEOM_FAN) {
		if (!finite_pos(sp->source_isocenter_mm))
			return rc_fail(err, RC_EINVAL, "geometry.source_isocenter_mm",
				       "geometry.source_isocenter_mm must be a positive finite number (got %g)", sp->source_isocenter_mm);
		if (!finite_pos(sp->source_detector_mm))
			return rc_fail(err, RC_EINVAL, "geometry.source_detector_mm",
				       "geometry.source_detector_mm must be a positive finite number (got %g)", sp->source_detector_mm);
		if (sp->source_detector_mm <= sp->source_isocenter_mm)
			return rc_fail(err, RC_EINVAL, "geometry.source_detector_mm",
				       "geometry.source_detector_mm (%g) must exceed source_isocenter_mm (%g): the detector lies beyond the axis",
				       sp->source_detector_mm, sp->source_isocenter_mm);
		if ((rc = check_curved(sp, err)))
			return rc;
	}
	if (sp->type == RC_GEOM_MATRICES) {
		if (!sp->matrices)
			return rc_fail(err, RC_EINVAL, "geometry.matrices", "geometry.matrices is required for type matrices");
	} else {
		if (!sp->angles_deg)
			return rc_fail(err, RC_EINVAL, "geometry.angles",
				       "geometry.angles is required for type cone, helix, fan and parallel");
		for (int k = 0; k < sp->nviews; k++)
			if (!isfinite(sp->angles_deg[k]))
				return rc_fail(err, RC_EINVAL, "geometry.angles", "geometry.angles: the angle of view %d must be a finite number of degrees (got %g)", k, sp->angles_deg[k]);
	}

	rc_geom *g = calloc(1, sizeof *g);
	if (!g)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the geometry");
	g->views = calloc((size_t)sp->nviews, sizeof *g->views);
	if (!g->views) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %d views", sp->nviews);
		goto out_free;
	}
	g->type = sp->type;
	g->nviews = sp->nviews;
	g->det = sp->det;
	if (rc_geom_is_2d(g)) {
		g->det.nv = 1;
		g->det.dv = vol->vz;
		g->det.offset_v = 0;
	}
	g->vol = *vol;
	g->sid = sp->source_isocenter_mm;
	g->sdd = sp->source_detector_mm;
	if (sp->type == RC_GEOM_HELIX && (rc = rc_geom_helix_check_spec(sp, err)))
		goto out_free;
	if (sp->type == RC_GEOM_HELIX) {
		g->pitch = sp->pitch_mm;
		g->lead = sp->nviews > 1 && sp->angles_deg[sp->nviews - 1] < sp->angles_deg[0] ? -g->pitch : g->pitch;
	}
	for (int k = 0; k < sp->nviews; k++) {
		switch (sp->type) {
		case RC_GEOM_CONE:
		case RC_GEOM_HELIX:
			if ((rc = build_cone(g, sp, k, err)))
				goto out_free;
			break;
		case RC_GEOM_FAN:
		case RC_GEOM_PARALLEL:
			if ((rc = build_2d(g, sp, k, err)))
				goto out_free;
			break;
		case RC_GEOM_MATRICES:
			if ((rc = build_matrix(g, sp, k, err)))
				goto out_free;
			break;
		}
	}
	if (sp->type == RC_GEOM_MATRICES) {
		double sum = 0;
		for (int k = 0; k < sp->nviews; k++) {
			double p[3] = { g->views[k].src[0] - vol->cx, g->views[k].src[1] - vol->cy, 0 };
			sum += sqrt(dot3(p, p));
		}
		g->sid = sum / sp->nviews;
		g->sdd = 0;
	}
	/* a part of a checked box: its source and detector checks hold for
	 * every part, and a view may miss a part (its voxels get 0 there) */
	if ((!(lim && lim->part) && (rc = check_views(g, err))) ||
	    (g->type == RC_GEOM_HELIX && (rc = rc_geom_helix_check(g, err))))
		goto out_free;
	*ret = g;
	return 0;
out_free:
	rc_geom_free(g);
	return rc;
}

void rc_geom_free(rc_geom *g)
{
	if (!g)
		return;
	free(g->views);
	free(g);
}

rc_geom_type rc_geom_type_of(const rc_geom *g) { return g->type; }
int rc_geom_nviews(const rc_geom *g) { return g->nviews; }
const rc_view *rc_geom_view(const rc_geom *g, int k) { return &g->views[k]; }
const rc_detector_desc *rc_geom_detector(const rc_geom *g) { return &g->det; }
const rc_volume_desc *rc_geom_volume(const rc_geom *g) { return &g->vol; }
double rc_geom_sid(const rc_geom *g) { return g->sid; }
double rc_geom_sdd(const rc_geom *g) { return g->sdd; }
double rc_geom_pitch(const rc_geom *g) { return g->pitch; }
double rc_geom_lead(const rc_geom *g) { return g->lead; }

int rc_geom_slab(const rc_geom *g, int first, int last, const rc_volume_desc *vol, int row0, int nrows,
		 rc_geom **ret, rc_err *err)
{
	if ((!rc_geom_type_is_cone(g->type) && g->type != RC_GEOM_MATRICES) || first < 0 || last > g->nviews || first >= last || row0 < 0 || nrows < 1 ||
	    row0 + nrows > g->det.nv)
		return rc_fail(err, RC_EINVAL, "", "rc_geom_slab needs a cone, helix or matrices, views in 0..%d and rows in 0..%d",
			       g->nviews, g->det.nv);
	rc_geom *s = calloc(1, sizeof *s);
	if (!s || !(s->views = malloc(sizeof *s->views * (size_t)(last - first)))) {
		free(s);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a slab's %d views", last - first);
	}
	rc_view *views = s->views;
	*s = *g;
	s->views = views;
	s->nviews = last - first;
	s->vol = *vol;
	memcpy(s->views, g->views + first, sizeof *s->views * (size_t)(last - first));
	if (row0 != 0 || nrows != g->det.nv) {
		/* v' = v - row0: P's v row less row0 times its depth row; the ray
		 * of (u, v') is Minv (u, v' + row0, 1) */
		s->det.nv = nrows;
		s->det.offset_v = g->det.offset_v + (row0 + (nrows - 1) / 2.0 - (g->det.nv - 1) / 2.0) * g->det.dv;
		for (int k = 0; k < s->nviews; k++) {
			rc_view *vw = &s->views[k];
			for (int a = 0; a < 4; a++)
				vw->P[4 + a] -= row0 * vw->P[8 + a];
			for (int r = 0; r < 3; r++)
				vw->Minv[3 * r + 2] += row0 * vw->Minv[3 * r + 1];
		}
	}
	*ret = s;
	return 0;
}
int rc_geom_is_2d(const rc_geom *g) { return g->type == RC_GEOM_FAN || g->type == RC_GEOM_PARALLEL; }

size_t rc_geom_view_count(const rc_geom *g)
{
	return (size_t)g->det.nu * (size_t)(rc_geom_is_2d(g) ? g->vol.nz : g->det.nv);
}

size_t rc_geom_proj_count(const rc_geom *g) { return (size_t)g->nviews * rc_geom_view_count(g); }

size_t rc_geom_view_stride(const rc_geom *g)
{
	return rc_geom_is_2d(g) ? (size_t)g->det.nu : rc_geom_view_count(g);
}

size_t rc_geom_row_stride(const rc_geom *g)
{
	return rc_geom_is_2d(g) ? (size_t)g->nviews * (size_t)g->det.nu : (size_t)g->det.nu;
}

size_t rc_geom_row_offset(const rc_geom *g, int k, int j)
{
	return (size_t)k * rc_geom_view_stride(g) + (size_t)j * rc_geom_row_stride(g);
}

size_t rc_volume_count(const rc_volume_desc *v) { return (size_t)v->nx * (size_t)v->ny * (size_t)v->nz; }

void rc_volume_voxel_pos(const rc_volume_desc *v, double ix, double iy, double iz, double pos[3])
{
	pos[0] = (ix - (v->nx - 1) / 2.0) * v->vx + v->cx;
	pos[1] = (iy - (v->ny - 1) / 2.0) * v->vy + v->cy;
	pos[2] = (iz - (v->nz - 1) / 2.0) * v->vz + v->cz;
}

int rc_geom_pixel_pos(const rc_geom *g, int k, double i, double j, double pos[3])
{
	if (!rc_geom_type_is_cone(g->type))
		return RC_EUNSUPPORTED;
	const rc_view *vw = &g->views[k];
	double t = vw->angle_rad, ct = cos(t), st = sin(t);
	double um = (i - (g->det.nu - 1) / 2.0) * g->det.du + g->det.offset_u;
	double vm = (j - (g->det.nv - 1) / 2.0) * g->det.dv + g->det.offset_v;
	if (g->det.shape == RC_DETECTOR_CURVED) {
		/* on the cylinder: S cos(gamma) n + S sin(gamma) e_u from the source */
		double gam = um / g->sdd, a = g->sdd * cos(gam), b = g->sdd * sin(gam);
		pos[0] = vw->src[0] - a * ct - b * st;
		pos[1] = vw->src[1] - a * st + b * ct;
		pos[2] = vm + vw->src[2];
		return 0;
	}
	double dc = -(g->sdd - g->sid);
	pos[0] = dc * ct + um * -st;
	pos[1] = dc * st + um * ct;
	pos[2] = vm + vw->src[2];
	return 0;
}

void rc_geom_ray(const rc_geom *g, int k, double i, double j, int iz, double origin[3], double dir[3])
{
	const rc_view *vw = &g->views[k];
	const rc_volume_desc *v = &g->vol;
	if (rc_geom_type_is_cone(g->type) && g->det.shape == RC_DETECTOR_CURVED) {
		/* to the pixel centre on the cylinder (rc_geom_pixel_pos) */
		double pc[3];
		rc_geom_pixel_pos(g, k, i, j, pc);
		for (int r = 0; r < 3; r++)
			dir[r] = pc[r] - vw->src[r];
		memcpy(origin, vw->src, 3 * sizeof(double));
	} else if (rc_geom_type_is_cone(g->type) || g->type == RC_GEOM_MATRICES) {
		double uvw[3] = { i, j, 1 };
		for (int r = 0; r < 3; r++)
			dir[r] = dot3(&vw->Minv[3 * r], uvw);
		memcpy(origin, vw->src, 3 * sizeof(double));
	} else {
		double z = (iz - (v->nz - 1) / 2.0) * v->vz + v->cz;
		const double *A = vw->A;
		/* point on the ray: solve A (x, y, 1) = (i w, w) for the pixel line */
		if (g->type == RC_GEOM_FAN && g->det.shape == RC_DETECTOR_CURVED) {
			/* cos(gamma) n + sin(gamma) e_u, n = (A3, A4), e_u = (A4, -A3) */
			double gam = rc_geom_fan_angle(g, i), cg = cos(gam), sg = sin(gam);
			origin[0] = vw->src[0];
			origin[1] = vw->src[1];
			origin[2] = z;
			dir[0] = cg * A[3] + sg * A[4];
			dir[1] = cg * A[4] - sg * A[3];
			dir[2] = 0;
		} else if (g->type == RC_GEOM_FAN) {
			origin[0] = vw->src[0];
			origin[1] = vw->src[1];
			origin[2] = z;
			/* direction d with (A0 - i A3) d.x + (A1 - i A4) d.y = 0, pointing away from the source */
			double a = A[0] - i * A[3], b = A[1] - i * A[4];
			dir[0] = -b;
			dir[1] = a;
			dir[2] = 0;
			if (dir[0] * A[3] + dir[1] * A[4] < 0) {
				dir[0] = -dir[0];
				dir[1] = -dir[1];
			}
		} else {
			/* pixel line: A0 x + A1 y + A2 = i; start far behind along -dir */
			double eu0 = A[0] * g->det.du, eu1 = A[1] * g->det.du; /* e_u */
			double um = (i - A[2]) * g->det.du;
			double R = 2.0 * (fabs(v->cx) + fabs(v->cy) + v->nx * v->vx + v->ny * v->vy) + 1.0;
			origin[0] = um * eu0 - R * vw->dir[0];
			origin[1] = um * eu1 - R * vw->dir[1];
			origin[2] = z;
			memcpy(dir, vw->dir, 3 * sizeof(double));
		}
	}
	double nrm = sqrt(dot3(dir, dir));
	for (int r = 0; r < 3; r++)
		dir[r] /= nrm;
}

int rc_geom_widen(const rc_geom *g, int nu, double offset_u, rc_geom **ret, rc_err *err)
{
	if (g->type != RC_GEOM_CONE && g->type != RC_GEOM_FAN && (g->type != RC_GEOM_HELIX || g->pitch != 0))
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "only cone and fan detectors (and a helix of pitch 0) can be widened");
	double *ang = malloc(sizeof(double) * (size_t)g->nviews);
	if (!ang)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d angles", g->nviews);
	for (int k = 0; k < g->nviews; k++)
		ang[k] = g->views[k].angle_rad * (180.0 / M_PI);
	rc_geom_spec sp = { .type = g->type, .nviews = g->nviews, .det = g->det, .source_isocenter_mm = g->sid,
			    .source_detector_mm = g->sdd, .angles_deg = ang, .z_start_mm = g->views[0].src[2] };
	sp.det.nu = nu;
	sp.det.offset_u = offset_u;
	int rc = rc_geom_new(&sp, &g->vol, NULL, ret, err);
	free(ang);
	return rc;
}

void rc_geom_cyl_project(const rc_geom *g, int k, const double x[3], double *u, double *v, double *L)
{
	const rc_view *vw = &g->views[k];
	const rc_detector_desc *d = &g->det;
	double t = vw->angle_rad, ct = cos(t), st = sin(t);
	double px = x[0] - vw->src[0], py = x[1] - vw->src[1];
	double depth = -ct * px - st * py, side = -st * px + ct * py, l = hypot(depth, side);
	*L = l;
	*u = (atan2(side, depth) * g->sdd - d->offset_u) / d->du + (d->nu - 1) / 2.0;
	*v = (g->sdd * (x[2] - vw->src[2]) / l - d->offset_v) / d->dv + (d->nv - 1) / 2.0;
}

double rc_geom_column_gamma(const rc_geom *g, double i)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	double um = (i - (d->nu - 1) / 2.0) * d->du + d->offset_u, S = rc_geom_sdd(g);
	return d->shape == RC_DETECTOR_CURVED ? um / S : atan(um / S);
}

double rc_geom_fan_angle(const rc_geom *g, double e)
{
	const rc_detector_desc *d = &g->det;
	return ((e - (d->nu - 1) / 2.0) * d->du + d->offset_u) / g->sdd;
}

double rc_geom_line_u(const rc_geom *g, double e)
{
	const rc_detector_desc *d = &g->det;
	if (g->type != RC_GEOM_FAN || d->shape != RC_DETECTOR_CURVED)
		return e;
	return (g->sdd * tan(rc_geom_fan_angle(g, e)) - d->offset_u) / d->du + (d->nu - 1) / 2.0;
}

double rc_geom_plane_u(const rc_geom *g, int k, double x, double y, double *w)
{
	const double *A = g->views[k].A;
	const rc_detector_desc *d = &g->det;
	if (g->type == RC_GEOM_FAN && d->shape == RC_DETECTOR_CURVED) {
		/* n = (A3, A4) and e_u = (A4, -A3) (build_2d), X - s from the source */
		const double *s = g->views[k].src;
		double px = x - s[0], py = y - s[1];
		double depth = A[3] * px + A[4] * py, side = A[4] * px - A[3] * py;
		*w = depth;
		return atan2(side, depth) * g->sdd / d->du - d->offset_u / d->du + (d->nu - 1) / 2.0;
	}
	double ww = A[3] * x + A[4] * y + A[5];
	*w = ww;
	return (A[0] * x + A[1] * y + A[2]) / ww;
}
