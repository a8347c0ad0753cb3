/*
 * proj_joseph: the matched pair of the iterative algorithms on a fan or
 * parallel stack, the reference in C of kernels/opencl/bp_plane.cl's
 * fp_plane and bp_plane_t (the same float operations in the same order,
 * both without contraction).
 *
 * Forward (RC_FP_RAYCAST on 2-D): Joseph's method in a slice.  The ray of
 * detector pixel u (an integer: pixel centres) of view k is the line
 *   (c0 - u c1) + (d0x - u d1x) i + (d0y - u d1y) j = 0
 * in voxel indices (i, j), from (u w, w) = A (x, y, 1) (rc_plane_view's
 * floats), for fan and parallel alike.  It is sampled once per column i
 * when it runs closer to the x axis (|b| >= |a| for a i + b j + c = 0),
 * else once per row j; each sample interpolates linearly across the two
 * voxels it falls between (zero outside the grid) and weighs by the ray's
 * length per column (row) in mm, so a volume in 1/mm gives line integrals.
 *
 * A curved (equiangular) fan: pixel iu's ray is the line through the
 * source at its fan angle, which is the line of A's flat (tangent)
 * detector at rc_geom_line_u(iu); rc_plane_rays puts that line in the
 * table, so the forward needs nothing else.
 *
 * Back (RC_BP_MATCHED on 2-D): the exact transpose, written as a gather so
 * that no two tasks write one voxel (no atomics on the device either):
 * for each voxel and view, the rays that can weigh it cross the segment
 * through the voxel centre one voxel up and down (column-sampled rays) or
 * left and right (row-sampled ones); their pixels lie between the
 * projections of those segments' ends (on the arc for a curved fan:
 * rc_plane_arc), and each such pixel's weight is
 * computed with the forward's own expression from the same ray (the table
 * of rc_plane_rays, made once per call here and once per engine on the
 * devices), so a pixel the footprint includes in excess adds exactly zero.
 */
#include "projectors/proj_cpu.h"

#include <math.h>
#include <stdlib.h>

#include "geometry/geometry.h"

void rc_plane_view(const rc_geom *g, int k, float o[RC_PLANE_FLOATS])
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const double *A = rc_geom_view(g, k)->A;
	double X[3];
	rc_volume_voxel_pos(v, 0, 0, 0, X);
	for (int r = 0; r < 2; r++) {
		o[3 * r] = (float)(A[3 * r] * X[0] + A[3 * r + 1] * X[1] + A[3 * r + 2]);
		o[3 * r + 1] = (float)(A[3 * r] * v->vx);
		o[3 * r + 2] = (float)(A[3 * r + 1] * v->vy);
	}
}

int rc_plane_arc(const rc_geom *g, float *cu, float *sdu)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	*cu = *sdu = 0.0f;
	if (rc_geom_type_of(g) != RC_GEOM_FAN || d->shape != RC_DETECTOR_CURVED)
		return 0;
	*cu = (float)((d->nu - 1) / 2.0 - d->offset_u / d->du);
	*sdu = (float)(rc_geom_sdd(g) / d->du);
	return 1;
}

void rc_plane_rays(const rc_geom *g, float *rays)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nu = rc_geom_detector(g)->nu, nk = rc_geom_nviews(g);
	const float vx = (float)v->vx, vy = (float)v->vy;
	for (int k = 0; k < nk; k++) {
		float V[RC_PLANE_FLOATS];
		rc_plane_view(g, k, V);
		for (int iu = 0; iu < nu; iu++) {
			float *r = rays + ((size_t)k * nu + iu) * RC_PLANE_RAY_FLOATS;
			/* the pixel's line on A's flat detector: iu itself when flat */
			float u = (float)rc_geom_line_u(g, iu);
			float a = V[1] - u * V[4], b = V[2] - u * V[5], c = V[0] - u * V[3];
			int percol = fabsf(b) >= fabsf(a);
			float s = percol ? a / b : b / a;
			float h = percol ? vx : vy, o = percol ? vy : vx;
			r[0] = a;
			r[1] = b;
			r[2] = c;
			r[3] = sqrtf(h * h + (o * s) * (o * s));
		}
	}
}

/* The ray of pixel iu: the line a i + b j + c = 0, whether it is sampled
 * per column, and its length per sample in mm (rc_plane_rays). */
typedef struct plane_ray {
	float a, b, c, ds;
	int percol;
} plane_ray;

static inline plane_ray ray_get(const float *rays, int k, int nu, int iu)
{
	const float *p = rays + ((size_t)k * nu + iu) * RC_PLANE_RAY_FLOATS;
	plane_ray r = { p[0], p[1], p[2], p[3], fabsf(p[1]) >= fabsf(p[0]) };
	return r;
}

/* Where the ray crosses column i (row j for a row-sampled ray), in rows
 * (columns). */
static inline float ray_at(const plane_ray *r, int idx)
{
	return r->percol ? -(r->a * (float)idx + r->c) / r->b : -(r->b * (float)idx + r->c) / r->a;
}

/* Samples [lo, hi] of the n along the ray that can fall within a voxel of
 * the m across it: a bound in double with two samples to spare (each
 * sample is still tested), so the forward never skips a sample the gather
 * counts. */
static void ray_span(const plane_ray *r, int n, int m, int *lo, int *hi)
{
	double p = r->percol ? r->a : r->b, q = r->percol ? r->b : r->a;
	*lo = 0;
	*hi = n - 1;
	if (p == 0.0)
		return;
	double e0 = -(q * -1.0 + r->c) / p, e1 = -(q * (double)m + r->c) / p;
	double a = fmin(e0, e1) - 2.0, b = fmax(e0, e1) + 2.0;
	if (a > *lo)
		*lo = a > n ? n : (int)a;
	if (b < *hi)
		*hi = b < -1 ? -1 : (int)b;
}

struct joseph_job {
	const rc_geom *g;
	const float *in;
	float *out;
	int first, last;
	float *views; /* RC_PLANE_FLOATS per view */
	float *rays;  /* RC_PLANE_RAY_FLOATS per view and pixel */
	int blocks;
	int curved;   /* rc_plane_arc: the pixel search maps through the arc */
	float cu, sdu;
};

static void fp_task(void *ud, long task, int worker)
{
	(void)worker;
	const struct joseph_job *J = ud;
	const rc_volume_desc *v = rc_geom_volume(J->g);
	const int nu = rc_geom_detector(J->g)->nu, nk = J->last - J->first;
	const int z = (int)(task / nk), k = J->first + (int)(task % nk);
	const float *slice = J->in + (size_t)z * v->ny * v->nx;
	float *out = J->out + rc_geom_row_offset(J->g, k, z);
	for (int iu = 0; iu < nu; iu++) {
		plane_ray r = ray_get(J->rays, k, nu, iu);
		const int n = r.percol ? v->nx : v->ny, m = r.percol ? v->ny : v->nx;
		int lo, hi;
		ray_span(&r, n, m, &lo, &hi);
		float sum = 0.0f;
		for (int s = lo; s <= hi; s++) {
			float t = ray_at(&r, s);
			float fl = floorf(t);
			if (fl < -1.0f || fl >= (float)m)
				continue;
			int c0 = (int)fl;
			for (int c = c0; c <= c0 + 1; c++) {
				if (c < 0 || c >= m)
					continue;
				float wgt = 1.0f - fabsf(t - (float)c);
				sum += wgt * (r.percol ? slice[(size_t)c * v->nx + s] : slice[(size_t)s * v->nx + c]);
			}
		}
		out[iu] = sum * r.ds;
	}
}

/* The detector position of voxel index point (p, q) in view V. */
static inline float u_of(const float *V, float p, float q)
{
	return (V[0] + V[1] * p + V[2] * q) / (V[3] + V[4] * p + V[5] * q);
}

/* The tangent of the fan angle of voxel index point (p, q) of a curved
 * fan (rc_plane_arc): side / depth.  The arc index atan(t) sdu + cu is
 * monotone in it (depth > 0) and along a line that misses the source, so
 * the pixels between the arc indices of a segment's ends are those whose
 * rays cross it, and only the extreme tangents need an atan. */
static inline float tan_arc(const float *V, float p, float q, float cu, float sdu)
{
	float h = V[0] + V[1] * p + V[2] * q, w = V[3] + V[4] * p + V[5] * q;
	return (h - cu * w) / (sdu * w);
}

static void bp_task(void *ud, long task, int worker)
{
	(void)worker;
	const struct joseph_job *J = ud;
	const rc_volume_desc *v = rc_geom_volume(J->g);
	const int nu = rc_geom_detector(J->g)->nu, nviews = rc_geom_nviews(J->g);
	const int z = (int)(task / J->blocks), j0 = (int)(task % J->blocks) * 8;
	const int j1 = j0 + 8 < v->ny ? j0 + 8 : v->ny;
	const float *proj = J->in + (size_t)z * nviews * nu;
	for (int j = j0; j < j1; j++)
		for (int i = 0; i < v->nx; i++) {
			float acc = 0.0f;
			for (int k = J->first; k < J->last; k++) {
				const float *V = J->views + (size_t)k * RC_PLANE_FLOATS;
				const float *row = proj + (size_t)k * nu;
				float fi = (float)i, fj = (float)j;
				float e[4];
				if (J->curved) {
					e[0] = tan_arc(V, fi, fj - 1.0f, J->cu, J->sdu);
					e[1] = tan_arc(V, fi, fj + 1.0f, J->cu, J->sdu);
					e[2] = tan_arc(V, fi - 1.0f, fj, J->cu, J->sdu);
					e[3] = tan_arc(V, fi + 1.0f, fj, J->cu, J->sdu);
				} else {
					e[0] = u_of(V, fi, fj - 1.0f);
					e[1] = u_of(V, fi, fj + 1.0f);
					e[2] = u_of(V, fi - 1.0f, fj);
					e[3] = u_of(V, fi + 1.0f, fj);
				}
				float umin = fminf(fminf(e[0], e[1]), fminf(e[2], e[3]));
				float umax = fmaxf(fmaxf(e[0], e[1]), fmaxf(e[2], e[3]));
				if (J->curved) {
					umin = atanf(umin) * J->sdu + J->cu;
					umax = atanf(umax) * J->sdu + J->cu;
				}
				if (!(umax >= 0.0f && umin <= (float)(nu - 1)))
					continue;
				int lo = umin <= 0.0f ? 0 : (int)floorf(umin);
				int hi = umax >= (float)(nu - 1) ? nu - 1 : (int)ceilf(umax);
				for (int iu = lo; iu <= hi; iu++) {
					plane_ray r = ray_get(J->rays, k, nu, iu);
					float d = r.percol ? fabsf(ray_at(&r, i) - fj) : fabsf(ray_at(&r, j) - fi);
					if (d < 1.0f)
						acc += (1.0f - d) * r.ds * row[iu];
				}
			}
			J->out[((size_t)z * v->ny + j) * v->nx + i] = acc;
		}
}

static int joseph_run(const rc_geom *g, rc_pool *pool, const float *in, float *out, int first, int last,
		      int back, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nviews = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu;
	struct joseph_job J = { g, in, out, first, last, NULL, NULL, (v->ny + 7) / 8, 0, 0.0f, 0.0f };
	J.curved = rc_plane_arc(g, &J.cu, &J.sdu);
	J.views = malloc((size_t)nviews * RC_PLANE_FLOATS * sizeof(float));
	J.rays = malloc((size_t)nviews * nu * RC_PLANE_RAY_FLOATS * sizeof(float));
	if (!J.views || !J.rays) {
		free(J.views);
		free(J.rays);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d views' rays", nviews);
	}
	for (int k = 0; k < nviews; k++)
		rc_plane_view(g, k, J.views + (size_t)k * RC_PLANE_FLOATS);
	rc_plane_rays(g, J.rays);
	if (back)
		rc_pool_run(pool, (long)v->nz * J.blocks, bp_task, &J);
	else if (last > first)
		rc_pool_run(pool, (long)v->nz * (last - first), fp_task, &J);
	free(J.views);
	free(J.rays);
	return 0;
}

int rc_fp_plane(const rc_geom *g, rc_pool *pool, const float *vol, float *proj, int first, int last, rc_err *err)
{
	return joseph_run(g, pool, vol, proj, first, last, 0, err);
}

int rc_bp_plane_matched(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last,
			rc_err *err)
{
	return joseph_run(g, pool, proj, vol, first, last, 1, err);
}
