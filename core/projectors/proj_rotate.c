/*
 * proj_rotate: paper 000's forward projector for circular (cone) geometries,
 * a rotation kernel followed by a projection kernel (§3.2).
 *
 * Rotation kernel: view k at angle t resamples the volume (bilinear in each
 * slice, zero outside; z is the rotation axis, so slices stay slices) onto a
 * grid of spacing h = min(vx, vy) aligned with a = (cos t, sin t) (towards
 * the source) and b = e_u = (-sin t, cos t), centred on the volume centre and
 * just large enough for the rotated support of the volume.  Approach B: the
 * result R[z][ib][ia] is written with a fastest, in memory order.
 *
 * Projection kernel: in that frame every ray of a cone view crosses the
 * planes a = const once (its direction has |d.a| >= cos of the half fan
 * angle), so its line integral is sum over planes of a bilinear sample in
 * (b, z) times h / |d.a|.  The kernel reads R across planes (the permuted
 * order); neighbouring rays read neighbouring (b, z), which the caches serve.
 *
 * Both kernels are split over the pool (rotation: one task per slice;
 * projection: one task per detector row).  The double resampling smooths a
 * little more than ray casting: docs/cpu-engine.md and the test give the
 * agreement with RC_FP_RAYCAST.
 */
#include "projectors/proj_cpu.h"

#include <math.h>
#include <stdlib.h>

struct rc_rotate {
	const rc_geom *g;
	double h;
	int nmax; /* grid points per in-plane axis at most */
	float *buf;
};

int rc_rotate_new(const rc_geom *g, rc_rotate **ret, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	rc_rotate *r = calloc(1, sizeof *r);
	if (!r)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the rotation projector");
	r->g = g;
	r->h = fmin(v->vx, v->vy);
	double hx = (v->nx + 1) * v->vx / 2, hy = (v->ny + 1) * v->vy / 2;
	r->nmax = 2 * (int)ceil(sqrt(hx * hx + hy * hy) / r->h) + 3;
	size_t n = (size_t)r->nmax * (size_t)r->nmax * (size_t)v->nz;
	r->buf = malloc(n * sizeof(float));
	if (!r->buf) {
		free(r);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the rotated volume (%zu MiB)",
			       n * sizeof(float) >> 20);
	}
	*ret = r;
	return 0;
}

void rc_rotate_free(rc_rotate *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}

struct rot_ctx {
	const rc_rotate *r;
	const rc_volume_desc *v;
	const float *vol;
	float *proj;
	int k;
	double ca, sa;   /* a = (ca, sa), b = (-sa, ca) */
	int na, nb;      /* grid size of this view */
};

/* Rotation kernel, slice z. */
static void rot_task(void *arg, long z, int worker)
{
	struct rot_ctx *c = arg;
	(void)worker;
	const rc_volume_desc *v = c->v;
	const float *sl = c->vol + (size_t)z * (size_t)v->nx * (size_t)v->ny;
	float *out = c->r->buf + (size_t)z * (size_t)c->na * (size_t)c->nb;
	double h = c->r->h;
	double ha = (c->na - 1) / 2.0, hb = (c->nb - 1) / 2.0;
	double cx = (v->nx - 1) / 2.0, cy = (v->ny - 1) / 2.0;
	/* voxel index of grid point (ia, ib): centre + (ia-ha) h a + (ib-hb) h b */
	double ax = h * c->ca / v->vx, ay = h * c->sa / v->vy;
	double bx = -h * c->sa / v->vx, by = h * c->ca / v->vy;
	for (int ib = 0; ib < c->nb; ib++) {
		double fx0 = cx + (ib - hb) * bx - ha * ax, fy0 = cy + (ib - hb) * by - ha * ay;
		float *o = out + (size_t)ib * (size_t)c->na;
		for (int ia = 0; ia < c->na; ia++) {
			float fx = (float)(fx0 + ia * ax), fy = (float)(fy0 + ia * ay);
			if (!(fx > -1.0f && fy > -1.0f && fx < (float)v->nx && fy < (float)v->ny)) {
				o[ia] = 0;
				continue;
			}
			int ix = (int)(fx + 1.0f) - 1, iy = (int)(fy + 1.0f) - 1; /* floor on (-1, n) */
			float gx = fx - (float)ix, gy = fy - (float)iy, s = 0;
			for (int c4 = 0; c4 < 4; c4++) {
				int x = ix + (c4 & 1), y = iy + (c4 >> 1);
				if ((unsigned)x >= (unsigned)v->nx || (unsigned)y >= (unsigned)v->ny)
					continue;
				s += (c4 & 1 ? gx : 1 - gx) * (c4 & 2 ? gy : 1 - gy) * sl[(size_t)y * v->nx + x];
			}
			o[ia] = s;
		}
	}
}

/* Projection kernel, detector row j. */
static void proj_task(void *arg, long j, int worker)
{
	struct rot_ctx *c = arg;
	(void)worker;
	const rc_geom *g = c->r->g;
	const rc_volume_desc *v = c->v;
	int nu = rc_geom_detector(g)->nu;
	float *row = c->proj + rc_geom_row_offset(g, c->k, (int)j);
	double h = c->r->h;
	double ha = (c->na - 1) / 2.0, hb = (c->nb - 1) / 2.0;
	double z0 = v->cz - (v->nz - 1) / 2.0 * v->vz;
	size_t plane = (size_t)c->na * (size_t)c->nb;
	for (int i = 0; i < nu; i++) {
		double o[3], d[3];
		rc_geom_ray(g, c->k, i, (double)j, 0, o, d);
		double oa = (o[0] - v->cx) * c->ca + (o[1] - v->cy) * c->sa;
		double ob = -(o[0] - v->cx) * c->sa + (o[1] - v->cy) * c->ca;
		double da = d[0] * c->ca + d[1] * c->sa, db = -d[0] * c->sa + d[1] * c->ca;
		/* at plane ia: t = ((ia - ha) h - oa) / da */
		double t0 = (-ha * h - oa) / da, dt = h / da;
		double fb0 = (ob + t0 * db) / h + hb, dfb = dt * db / h;
		double fz0 = (o[2] + t0 * d[2] - z0) / v->vz, dfz = dt * d[2] / v->vz;
		float sum = 0;
		for (int ia = 0; ia < c->na; ia++) {
			float fb = (float)(fb0 + ia * dfb), fz = (float)(fz0 + ia * dfz);
			if (!(fb > -1.0f && fz > -1.0f && fb < (float)c->nb && fz < (float)v->nz))
				continue;
			int ib = (int)(fb + 1.0f) - 1, iz = (int)(fz + 1.0f) - 1; /* floor on (-1, n) */
			float gb = fb - (float)ib, gz = fz - (float)iz;
			const float *p = c->r->buf + (size_t)ia;
			for (int c4 = 0; c4 < 4; c4++) {
				int b = ib + (c4 & 1), z = iz + (c4 >> 1);
				if ((unsigned)b >= (unsigned)c->nb || (unsigned)z >= (unsigned)v->nz)
					continue;
				sum += (c4 & 1 ? gb : 1 - gb) * (c4 & 2 ? gz : 1 - gz) *
				       p[(size_t)z * plane + (size_t)b * (size_t)c->na];
			}
		}
		row[i] = sum * (float)(h / fabs(da));
	}
}

void rc_fp_rotate(rc_rotate *r, rc_pool *pool, const float *vol, float *proj, int first, int last)
{
	const rc_volume_desc *v = rc_geom_volume(r->g);
	double hx = (v->nx + 1) * v->vx / 2, hy = (v->ny + 1) * v->vy / 2;
	for (int k = first; k < last; k++) {
		double t = rc_geom_view(r->g, k)->angle_rad;
		struct rot_ctx c = { .r = r, .v = v, .vol = vol, .proj = proj, .k = k,
				     .ca = cos(t), .sa = sin(t) };
		/* half extents of the rotated support along a and b */
		double ea = hx * fabs(c.ca) + hy * fabs(c.sa), eb = hx * fabs(c.sa) + hy * fabs(c.ca);
		c.na = 2 * (int)ceil(ea / r->h) + 3;
		c.nb = 2 * (int)ceil(eb / r->h) + 3;
		if (c.na > r->nmax)
			c.na = r->nmax;
		if (c.nb > r->nmax)
			c.nb = r->nmax;
		rc_pool_run(pool, v->nz, rot_task, &c);
		rc_pool_run(pool, rc_geom_detector(r->g)->nv, proj_task, &c);
	}
}
