/*
 * tensor_phantom: an ellipse phantom with closed-form line integrals for the
 * tensor-path tests (test_dd, test_tensor_cg, test_tensor_gpu).  Header-only:
 * each test binary is one translation unit.
 *
 * Line integral of ellipse (centre c, semi-axes a, b, rotation phi, density
 * rho) along the line o + t d (|d| = 1): in the ellipse frame scaled to the
 * unit circle the line is o' + t d', |o' + t d'|^2 = 1 has roots t1, t2 and
 * the chord is |t2 - t1| = sqrt(disc) / |d'|^2, so the integral is
 * rho * sqrt(B^2 - 4 A C) / A with A = |d'|^2, B = 2 o'.d', C = |o'|^2 - 1.
 */
#ifndef TENSOR_PHANTOM_H
#define TENSOR_PHANTOM_H

#include <math.h>

#include "geometry/geometry.h"

typedef struct tp_ellipse {
	double cx, cy, a, b, phi_deg, rho;
} tp_ellipse;

/* In mm for a 128 mm field of view; scaled by fov/128. */
static const tp_ellipse tp_shapes[] = {
	{ 0, 0, 55, 45, 0, 0.020 },    { 0, -2, 50, 40, 0, -0.004 }, { 15, 5, 10, 20, 30, 0.006 },
	{ -18, 8, 12, 8, -20, 0.008 }, { 0, 25, 6, 6, 0, 0.010 },    { 5, -22, 4, 9, 60, 0.012 },
};
#define TP_NSHAPES (int)(sizeof tp_shapes / sizeof tp_shapes[0])

static inline double tp_ellipse_integral(const tp_ellipse *e, double s, const double o[2], const double d[2])
{
	double ph = e->phi_deg * M_PI / 180, c = cos(ph), sn = sin(ph);
	double ox = o[0] - e->cx * s, oy = o[1] - e->cy * s;
	double px = (c * ox + sn * oy) / (e->a * s), py = (-sn * ox + c * oy) / (e->b * s);
	double dx = (c * d[0] + sn * d[1]) / (e->a * s), dy = (-sn * d[0] + c * d[1]) / (e->b * s);
	double A = dx * dx + dy * dy, B = 2 * (px * dx + py * dy), C = px * px + py * py - 1;
	double disc = B * B - 4 * A * C;
	return disc > 0 ? e->rho * sqrt(disc) / A : 0;
}

/* Bin-averaged line integral of the phantom for bin u of view k (sub
 * sub-rays across the bin); the volume centre is the phantom centre. */
static inline double tp_bin_integral(const rc_geom *g, int k, int u, int sub, double scale)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	double sum = 0;
	for (int q = 0; q < sub; q++) {
		double e = u - 0.5 + (q + 0.5) / sub, org[3], dir[3];
		rc_geom_ray(g, k, e, 0, 0, org, dir);
		double n = hypot(dir[0], dir[1]);
		double o[2] = { org[0] - v->cx, org[1] - v->cy }, d[2] = { dir[0] / n, dir[1] / n };
		for (int i = 0; i < TP_NSHAPES; i++)
			sum += tp_ellipse_integral(&tp_shapes[i], scale, o, d);
	}
	return sum / sub;
}

/* Pixel values: area fraction of each ellipse from sub x sub samples. */
static inline void tp_pixelize(const rc_volume_desc *v, int sub, double scale, float *img)
{
	for (int iy = 0; iy < v->ny; iy++)
		for (int ix = 0; ix < v->nx; ix++) {
			double acc = 0;
			for (int sy = 0; sy < sub; sy++)
				for (int sx = 0; sx < sub; sx++) {
					double x = (ix - (v->nx - 1) / 2.0 + (sx + 0.5) / sub - 0.5) * v->vx;
					double y = (iy - (v->ny - 1) / 2.0 + (sy + 0.5) / sub - 0.5) * v->vy;
					for (int i = 0; i < TP_NSHAPES; i++) {
						const tp_ellipse *e = &tp_shapes[i];
						double ph = e->phi_deg * M_PI / 180, c = cos(ph), sn = sin(ph);
						double ox = x - e->cx * scale, oy = y - e->cy * scale;
						double px = (c * ox + sn * oy) / (e->a * scale), py = (-sn * ox + c * oy) / (e->b * scale);
						if (px * px + py * py <= 1)
							acc += e->rho;
					}
				}
			img[iy * v->nx + ix] = (float)(acc / (sub * sub));
		}
}

/* A fan or parallel geometry whose detector sees the whole n x n image of
 * pixel `px` mm from every angle over 360 degrees. */
static inline int tp_geom(rc_geom_type type, int n, double px, int nviews, int nu, int nz, double offset_u,
			  rc_geom **ret)
{
	double ang[4096];
	if (nviews > 4096)
		return -1;
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews + 0.3; /* off the axes: no view is exactly axis-aligned */
	double R = n * px * sqrt(2) / 2 + 2 * px;
	rc_geom_spec sp = { .type = type, .nviews = nviews, .angles_deg = ang };
	double D = 3 * R, S = 5 * R;
	sp.source_isocenter_mm = D;
	sp.source_detector_mm = S;
	double half = type == RC_GEOM_FAN ? S * tan(asin(R / D)) : R;
	sp.det.nu = nu;
	sp.det.nv = 1;
	sp.det.du = 2 * (half + fabs(offset_u)) / nu;
	sp.det.offset_u = offset_u;
	rc_volume_desc v = { n, n, nz, px, px, px, 0, 0, 0 };
	rc_err err;
	return rc_geom_new(&sp, &v, NULL, ret, &err);
}

#endif
