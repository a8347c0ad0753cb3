/*
 * phantom: ellipsoid objects, exact line integrals, voxelisation and whole
 * projection stacks (phantom.h).
 *
 * Each ellipsoid is kept with the map to its unit-sphere frame,
 * q = R(-phi) (x - c) / a.  A line o + t d becomes q0 + t qd there; it meets
 * the sphere where |q0 + t qd| <= 1.  With tm = -(q0.qd)/(qd.qd), the closest
 * point qm = q0 + tm qd and A = qd.qd, the chord is the t interval
 * tm +- sqrt((1 - |qm|^2) / A); clipping it to [t0, t1] and multiplying by
 * |d| gives its length in mm.  Computing |qm| directly rather than the
 * discriminant B^2 - AC avoids cancellation when the origin is far away (the
 * source sits ~1000 mm from an object of a few tens of mm).
 */
#include "geometry/phantom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/parfor.h"

struct ell {
	rc_ellipsoid e;
	double cs, sn;   /* cos, sin of phi */
	double ia[3];    /* 1 / semi-axes */
	double half[3];  /* half-widths of the axis-aligned bounding box */
};

struct rc_phantom {
	int n;
	struct ell *ell;
};

int rc_phantom_new(const rc_ellipsoid *e, int n, rc_phantom **ret, rc_err *err)
{
	if (!e || n < 1 || n > RC_PHANTOM_MAX_ELLIPSOIDS)
		return rc_fail(err, RC_EINVAL, "phantom", "a phantom needs 1 to %d ellipsoids (got %d)",
			       RC_PHANTOM_MAX_ELLIPSOIDS, n);
	for (int i = 0; i < n; i++) {
		int ok = isfinite(e[i].phi_deg) && isfinite(e[i].mu);
		for (int a = 0; a < 3; a++)
			ok = ok && isfinite(e[i].c[a]) && isfinite(e[i].a[a]) && e[i].a[a] > 0;
		if (!ok)
			return rc_fail(err, RC_EINVAL, "phantom",
				       "ellipsoid %d needs finite numbers and positive semi-axes", i);
	}
	rc_phantom *p = calloc(1, sizeof *p);
	if (!p)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a phantom");
	p->ell = calloc((size_t)n, sizeof *p->ell);
	if (!p->ell) {
		free(p);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d ellipsoids", n);
	}
	p->n = n;
	for (int i = 0; i < n; i++) {
		struct ell *q = &p->ell[i];
		q->e = e[i];
		double phi = e[i].phi_deg * (M_PI / 180.0);
		q->cs = cos(phi);
		q->sn = sin(phi);
		for (int a = 0; a < 3; a++)
			q->ia[a] = 1.0 / e[i].a[a];
		/* the rotated ellipse's extreme x is sqrt((a0 cos)^2 + (a1 sin)^2) */
		q->half[0] = hypot(e[i].a[0] * q->cs, e[i].a[1] * q->sn);
		q->half[1] = hypot(e[i].a[0] * q->sn, e[i].a[1] * q->cs);
		q->half[2] = e[i].a[2];
	}
	*ret = p;
	return 0;
}

/* Modified Shepp-Logan in 3-D: centre, semi-axes, phi (deg), density. */
static const double shepp_logan[10][8] = {
	{ 0, 0, 0, 0.6900, 0.920, 0.810, 0, 1.0 },
	{ 0, -0.0184, 0, 0.6624, 0.874, 0.780, 0, -0.8 },
	{ 0.22, 0, 0, 0.1100, 0.310, 0.220, -18, -0.2 },
	{ -0.22, 0, 0, 0.1600, 0.410, 0.280, 18, -0.2 },
	{ 0, 0.35, -0.15, 0.2100, 0.250, 0.410, 0, 0.1 },
	{ 0, 0.1, 0.25, 0.0460, 0.046, 0.050, 0, 0.1 },
	{ 0, -0.1, 0.25, 0.0460, 0.046, 0.050, 0, 0.1 },
	{ -0.08, -0.605, 0, 0.0460, 0.023, 0.050, 0, 0.1 },
	{ 0, -0.606, 0, 0.0230, 0.023, 0.020, 0, 0.1 },
	{ 0.06, -0.605, 0, 0.0230, 0.046, 0.020, 0, 0.1 },
};

int rc_phantom_shepp_logan(double fov_mm, rc_phantom **ret, rc_err *err)
{
	if (!(isfinite(fov_mm) && fov_mm > 0))
		return rc_fail(err, RC_EINVAL, "phantom.fov_mm", "the phantom's field of view must be a positive finite number of mm (got %g)", fov_mm);
	rc_ellipsoid e[10];
	double s = fov_mm / 2;
	for (int i = 0; i < 10; i++) {
		const double *r = shepp_logan[i];
		e[i] = (rc_ellipsoid){ { r[0] * s, r[1] * s, r[2] * s }, { r[3] * s, r[4] * s, r[5] * s },
				       r[6], r[7] * RC_PHANTOM_MU_UNIT };
	}
	return rc_phantom_new(e, 10, ret, err);
}

int rc_phantom_ball(const double c[3], double r, double mu, rc_phantom **ret, rc_err *err)
{
	rc_ellipsoid e = { { c[0], c[1], c[2] }, { r, r, r }, 0, mu };
	return rc_phantom_new(&e, 1, ret, err);
}

void rc_phantom_free(rc_phantom *p)
{
	if (!p)
		return;
	free(p->ell);
	free(p);
}

int rc_phantom_count(const rc_phantom *p) { return p->n; }

/* x in the ellipsoid's unit-sphere frame (a direction when is_dir). */
static void to_unit(const struct ell *q, const double x[3], int is_dir, double out[3])
{
	double dx = x[0] - (is_dir ? 0 : q->e.c[0]);
	double dy = x[1] - (is_dir ? 0 : q->e.c[1]);
	double dz = x[2] - (is_dir ? 0 : q->e.c[2]);
	out[0] = (q->cs * dx + q->sn * dy) * q->ia[0];
	out[1] = (-q->sn * dx + q->cs * dy) * q->ia[1];
	out[2] = dz * q->ia[2];
}

double rc_phantom_value(const rc_phantom *p, const double x[3])
{
	double sum = 0;
	for (int i = 0; i < p->n; i++) {
		double q[3];
		to_unit(&p->ell[i], x, 0, q);
		if (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] <= 1.0)
			sum += p->ell[i].e.mu;
	}
	return sum;
}

double rc_phantom_integral(const rc_phantom *p, const double o[3], const double d[3],
			   double t0, double t1)
{
	double dn = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
	if (!(dn > 0) || !(t1 > t0))
		return 0;
	double sum = 0;
	for (int i = 0; i < p->n; i++) {
		double q0[3], qd[3];
		to_unit(&p->ell[i], o, 0, q0);
		to_unit(&p->ell[i], d, 1, qd);
		double A = qd[0] * qd[0] + qd[1] * qd[1] + qd[2] * qd[2];
		double tm = -(q0[0] * qd[0] + q0[1] * qd[1] + q0[2] * qd[2]) / A;
		double m[3] = { q0[0] + tm * qd[0], q0[1] + tm * qd[1], q0[2] + tm * qd[2] };
		double r2 = m[0] * m[0] + m[1] * m[1] + m[2] * m[2];
		if (r2 >= 1.0)
			continue;
		double h = sqrt((1.0 - r2) / A);
		double lo = fmax(tm - h, t0), hi = fmin(tm + h, t1);
		if (hi > lo)
			sum += p->ell[i].e.mu * (hi - lo);
	}
	return sum * dn;
}

double rc_phantom_mass(const rc_phantom *p)
{
	double m = 0;
	for (int i = 0; i < p->n; i++) {
		const rc_ellipsoid *e = &p->ell[i].e;
		m += e->mu * (4.0 / 3.0) * M_PI * e->a[0] * e->a[1] * e->a[2];
	}
	return m;
}

/* --- voxelisation ------------------------------------------------------- */

struct vox_job {
	const rc_phantom *p;
	const rc_volume_desc *vol;
	int k;
	float *out;
};

/* Voxel index range [lo, hi] whose extent (index +- 0.5) meets [c - h, c + h]
 * along one axis of n voxels of size s, centre offset c0. */
static void index_range(double c, double h, int n, double s, double c0, int *lo, int *hi)
{
	double f0 = (c - h - c0) / s + (n - 1) / 2.0, f1 = (c + h - c0) / s + (n - 1) / 2.0;
	double l = ceil(f0 - 0.5), u = floor(f1 + 0.5);
	*lo = l < 0 ? 0 : (l > n ? n : (int)l);
	*hi = u > n - 1 ? n - 1 : (u < -1 ? -1 : (int)u);
}

static void vox_slice(void *ud, int worker, int iz)
{
	(void)worker;
	const struct vox_job *J = ud;
	const rc_volume_desc *v = J->vol;
	const int k = J->k;
	float *slice = J->out + (size_t)iz * (size_t)v->nx * (size_t)v->ny;
	memset(slice, 0, (size_t)v->nx * (size_t)v->ny * sizeof *slice);
	const double w = 1.0 / ((double)k * k * k);
	for (int e = 0; e < J->p->n; e++) {
		const struct ell *q = &J->p->ell[e];
		int x0, x1, y0, y1, z0, z1;
		index_range(q->e.c[2], q->half[2], v->nz, v->vz, v->cz, &z0, &z1);
		if (iz < z0 || iz > z1)
			continue;
		index_range(q->e.c[0], q->half[0], v->nx, v->vx, v->cx, &x0, &x1);
		index_range(q->e.c[1], q->half[1], v->ny, v->vy, v->cy, &y0, &y1);
		for (int iy = y0; iy <= y1; iy++) {
			for (int ix = x0; ix <= x1; ix++) {
				int inside = 0;
				for (int sz = 0; sz < k; sz++)
					for (int sy = 0; sy < k; sy++)
						for (int sx = 0; sx < k; sx++) {
							double x[3], qq[3];
							rc_volume_voxel_pos(v, ix + (sx + 0.5) / k - 0.5, iy + (sy + 0.5) / k - 0.5,
									    iz + (sz + 0.5) / k - 0.5, x);
							to_unit(q, x, 0, qq);
							inside += qq[0] * qq[0] + qq[1] * qq[1] + qq[2] * qq[2] <= 1.0;
						}
				if (inside)
					slice[(size_t)iy * (size_t)v->nx + (size_t)ix] += (float)(q->e.mu * inside * w);
			}
		}
	}
}

int rc_phantom_voxelize(const rc_phantom *p, const rc_volume_desc *vol, int k,
			int threads, float *out, rc_err *err)
{
	if (k < 1 || k > 16)
		return rc_fail(err, RC_EINVAL, "phantom.supersampling", "supersampling must be 1 to 16 per axis (got %d)", k);
	if (vol->nx < 1 || vol->ny < 1 || vol->nz < 1 || !(vol->vx > 0 && vol->vy > 0 && vol->vz > 0))
		return rc_fail(err, RC_EINVAL, "volume", "the volume needs positive sizes and spacings");
	struct vox_job J = { p, vol, k, out };
	rc_parallel_for(vol->nz, threads, vox_slice, &J);
	return 0;
}

/* --- projection stacks -------------------------------------------------- */

struct proj_job {
	const rc_phantom *p;
	const rc_geom *g;
	float *proj;
};

static void proj_view(void *ud, int worker, int k)
{
	(void)worker;
	const struct proj_job *J = ud;
	const rc_geom *g = J->g;
	const rc_detector_desc *det = rc_geom_detector(g);
	const rc_view *vw = rc_geom_view(g, k);
	int nrows = rc_geom_is_2d(g) ? rc_geom_volume(g)->nz : det->nv;
	switch (rc_geom_type_of(g)) {
	case RC_GEOM_CONE:
	case RC_GEOM_HELIX: {
		/* the pixel centre is affine in (i, j): p00 + i du_vec + j dv_vec */
		double p00[3], p10[3], p01[3], du[3], dv[3];
		rc_geom_pixel_pos(g, k, 0, 0, p00);
		rc_geom_pixel_pos(g, k, 1, 0, p10);
		rc_geom_pixel_pos(g, k, 0, 1, p01);
		for (int a = 0; a < 3; a++) {
			du[a] = p10[a] - p00[a];
			dv[a] = p01[a] - p00[a];
		}
		for (int j = 0; j < nrows; j++) {
			float *row = J->proj + rc_geom_row_offset(g, k, j);
			for (int i = 0; i < det->nu; i++) {
				double d[3];
				if (det->shape == RC_DETECTOR_CURVED) {
					/* on the cylinder the centres are not affine in i */
					rc_geom_pixel_pos(g, k, i, j, d);
					for (int a = 0; a < 3; a++)
						d[a] -= vw->src[a];
				} else {
					for (int a = 0; a < 3; a++)
						d[a] = p00[a] + i * du[a] + j * dv[a] - vw->src[a];
				}
				row[i] = (float)rc_phantom_integral(J->p, vw->src, d, 0.0, 1.0);
			}
		}
		break;
	}
	case RC_GEOM_MATRICES:
	case RC_GEOM_FAN:
	case RC_GEOM_PARALLEL:
		for (int j = 0; j < nrows; j++) {
			float *row = J->proj + rc_geom_row_offset(g, k, j);
			int is2d = rc_geom_is_2d(g);
			for (int i = 0; i < det->nu; i++) {
				double o[3], d[3], t0 = 0, t1 = INFINITY;
				rc_geom_ray(g, k, i, is2d ? 0 : j, is2d ? j : 0, o, d);
				if (rc_geom_type_of(g) == RC_GEOM_FAN && det->shape == RC_DETECTOR_CURVED) {
					/* the arc is S from the source along every (unit) ray */
					t1 = rc_geom_sdd(g);
				} else if (rc_geom_type_of(g) == RC_GEOM_FAN) {
					/* the detector line is at depth S along n = (A3, A4) */
					t1 = rc_geom_sdd(g) / (d[0] * vw->A[3] + d[1] * vw->A[4]);
				} else if (rc_geom_type_of(g) == RC_GEOM_PARALLEL) {
					t0 = -INFINITY;
				}
				row[i] = (float)rc_phantom_integral(J->p, o, d, t0, t1);
			}
		}
		break;
	}
}

int rc_phantom_project(const rc_phantom *p, const rc_geom *g, int threads,
		       float *proj, rc_err *err)
{
	if (!p || !g || !proj)
		return rc_fail(err, RC_EINVAL, "", "rc_phantom_project needs a phantom, a geometry and a buffer");
	struct proj_job J = { p, g, proj };
	rc_parallel_for(rc_geom_nviews(g), threads, proj_view, &J);
	return 0;
}
