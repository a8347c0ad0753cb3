/*
 * proj_raycast: ray casting with trilinear sampling (paper 002 Alg. 2) and its
 * exact transpose.
 *
 * Both directions share ray_setup and sample_at's expressions (the lane
 * loops repeat them), so the transpose visits the same sample points with
 * the same weights, up to float rounding where the forward works in the
 * shifted indices of its zero-bordered copy (the positions are rounded
 * once more; measured adjoint gap 2e-9):
 *   forward   p(ray) = step * sum_m sum_corners w_c(m) f[c]
 *   matched   f[c]  += step * p(ray) * w_c(m)        for every (ray, m, c).
 * Coordinates are continuous voxel indices (voxel centres at integers); the
 * trilinear interpolant with zero outside is non-zero on (-1, n) per axis,
 * so rays are clipped to that box.  Sample m sits at b + m*d (midpoints of
 * steps of rc_raycast_step_mm from the entry point), computed directly rather
 * than incrementally so that a slab of the transpose can start at any m.
 *
 * Parallel split: forward, one task per (view, detector row); transpose, one
 * task per z slab of the volume: each slab replays every ray but keeps only
 * the samples that touch its slices and scatters only into them.  Every
 * voxel is therefore summed by one task, in an order fixed by the rays
 * (view, row, group of 16 columns, chunk of 16 samples, ray, sample; see
 * RC_BPM_GROUP) whatever the number of threads: no races, no partial
 * volumes, and results identical for 1 or N threads.  Detector rows/columns
 * whose rays cannot meet a slab are skipped by projecting the slab's
 * corners.
 */
#include "projectors/proj_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct box {
	int n[3];
	double x0[3]; /* world position of voxel index 0 */
	double s[3];
};

struct ray {
	float b[3], d[3];
	int n;
};

double rc_raycast_step_mm(const rc_volume_desc *v)
{
	return 0.5 * fmin(v->vx, fmin(v->vy, v->vz));
}

static void box_of(const rc_volume_desc *v, struct box *bx)
{
	bx->n[0] = v->nx;
	bx->n[1] = v->ny;
	bx->n[2] = v->nz;
	rc_volume_voxel_pos(v, 0, 0, 0, bx->x0);
	bx->s[0] = v->vx;
	bx->s[1] = v->vy;
	bx->s[2] = v->vz;
}

/* Ray (k, i, j) clipped to the support; sample m at b + m d in voxel
 * indices plus shift (0, or RC_FPR_PAD for the zero-bordered copy). */
static int ray_setup(const rc_geom *g, const struct box *bx, double step, int k, int i, int j, double shift,
		     struct ray *r)
{
	double o[3], dir[3], oi[3], di[3];
	double tmin = 0, tmax = INFINITY; /* the ray starts at the source */
	rc_geom_ray(g, k, i, j, 0, o, dir);
	for (int a = 0; a < 3; a++) {
		oi[a] = (o[a] - bx->x0[a]) / bx->s[a];
		di[a] = dir[a] / bx->s[a];
		if (fabs(di[a]) < 1e-12) {
			if (oi[a] <= -1 || oi[a] >= bx->n[a])
				return r->n = 0;
			continue;
		}
		double t1 = (-1 - oi[a]) / di[a], t2 = (bx->n[a] - oi[a]) / di[a];
		if (t1 > t2) {
			double t = t1;
			t1 = t2;
			t2 = t;
		}
		/* t1, t2 are finite here: plain compares, not libm's fmin/fmax
		 * calls (their NaN rules cost a call per ray and axis) */
		tmin = t1 > tmin ? t1 : tmin;
		tmax = t2 < tmax ? t2 : tmax;
	}
	if (!(tmax > tmin))
		return r->n = 0;
	double ns = ceil((tmax - tmin) / step);
	r->n = (int)ns;
	for (int a = 0; a < 3; a++) {
		r->b[a] = (float)(oi[a] + shift + (tmin + 0.5 * step) * di[a]);
		r->d[a] = (float)(step * di[a]);
	}
	return r->n;
}

/* Corner indices and trilinear weights of sample m; returns 1 when all eight
 * corners lie inside the volume (no checks needed). */
struct tri {
	int ix, iy, iz;
	float fx, fy, fz;
};

static inline int sample_at(const struct ray *r, int m, const int *n, struct tri *t)
{
	float mf = (float)m;
	float px = r->b[0] + mf * r->d[0];
	float py = r->b[1] + mf * r->d[1];
	float pz = r->b[2] + mf * r->d[2];
	/* floor by truncation, exact for p > -2: samples lie inside the support
	 * box (-1, n) except the last, which may reach half a step (at most half
	 * a voxel) past it; floorf without SSE4.1 costs a dozen instructions */
	t->ix = (int)(px + 2.0f) - 2;
	t->iy = (int)(py + 2.0f) - 2;
	t->iz = (int)(pz + 2.0f) - 2;
	t->fx = px - (float)t->ix;
	t->fy = py - (float)t->iy;
	t->fz = pz - (float)t->iz;
	return (unsigned)t->ix < (unsigned)(n[0] - 1) && (unsigned)t->iy < (unsigned)(n[1] - 1) &&
	       (unsigned)t->iz < (unsigned)(n[2] - 1);
}

/* The eight corners of a sample next to the support's edge, each tested:
 * out of line, so that the inner loops keep their registers.  Without
 * branches (which corners are in varies from sample to sample, and the
 * mispredictions made this a fifth of the forward's time at 128^3): every
 * corner reads an index clamped into the volume, and a corner outside adds
 * +0, which leaves the sum as skipping it would (the sum starts at +0, so
 * it is never -0). */
static __attribute__((noinline)) float gather8_edge(const float *vol, const int *n, const struct tri *t)
{
	const size_t sy = (size_t)n[0], sz = (size_t)n[0] * (size_t)n[1];
	const int i0[3] = { t->ix, t->iy, t->iz };
	int in[3][2];
	size_t at[3][2]; /* offsets of the two corners along each axis */
	for (int a = 0; a < 3; a++)
		for (int k = 0; k < 2; k++) {
			int i = i0[a] + k;
			in[a][k] = (unsigned)i < (unsigned)n[a];
			at[a][k] = (size_t)(in[a][k] ? i : 0) * (a == 0 ? 1 : a == 1 ? sy : sz);
		}
	const float wx[2] = { 1 - t->fx, t->fx }, wy[2] = { 1 - t->fy, t->fy }, wz[2] = { 1 - t->fz, t->fz };
	float sum = 0;
	for (int c = 0; c < 8; c++) {
		int x = c & 1, y = (c >> 1) & 1, z = c >> 2;
		float w = wx[x] * wy[y] * wz[z];
		float v = w * vol[at[2][z] + at[1][y] + at[0][x]];
		sum += in[0][x] & in[1][y] & in[2][z] ? v : 0.0f;
	}
	return sum;
}

static inline float gather8(const float *vol, const int *n, const struct tri *t, int inside)
{
	if (!inside)
		return gather8_edge(vol, n, t);
	size_t sx = 1, sy = (size_t)n[0], sz = (size_t)n[0] * (size_t)n[1];
	float gx = 1 - t->fx, gy = 1 - t->fy, gz = 1 - t->fz;
	const float *p = vol + (size_t)t->iz * sz + (size_t)t->iy * sy + (size_t)t->ix;
	float c00 = gx * p[0] + t->fx * p[sx];
	float c01 = gx * p[sy] + t->fx * p[sy + sx];
	float c10 = gx * p[sz] + t->fx * p[sz + sx];
	float c11 = gx * p[sz + sy] + t->fx * p[sz + sy + sx];
	return gz * (gy * c00 + t->fy * c01) + t->fz * (gy * c10 + t->fy * c11);
}

/* Scatter v into the corners of sample (ix, iy, iz) + (fx, fy, fz) that lie
 * in the volume and in the slices [z0, z1): the samples next to the
 * volume's or the slab's edge (out of line: rare, and the inner loop keeps
 * its registers).  The weights are the same products as the inner loop's. */
__attribute__((noinline)) void rc_bpm_scatter_edge(float *vol, const int *n, int ix, int iy, int iz, float fx,
						   float fy, float fz, float v, int z0, int z1)
{
	size_t sy = (size_t)n[0], sz = (size_t)n[0] * (size_t)n[1];
	float gx = 1 - fx, gy = 1 - fy, gz = 1 - fz;
	for (int c = 0; c < 8; c++) {
		int x = ix + (c & 1), y = iy + ((c >> 1) & 1), z = iz + (c >> 2);
		if (z < z0 || z >= z1 || (unsigned)x >= (unsigned)n[0] || (unsigned)y >= (unsigned)n[1])
			continue;
		float w = (c & 1 ? fx : gx) * ((c & 4 ? fz : gz) * (c & 2 ? fy : gy) * v);
		vol[(size_t)z * sz + (size_t)y * sy + (size_t)x] += w;
	}
}

/* Detector pixel range [i0, i1) x [j0, j1) of view k whose rays can meet the
 * index box lo..hi (corners projected; w > 0 makes the image of the box the
 * hull of the corner images).  Falls back to the whole detector. */
static void pixel_range(const rc_geom *g, const struct box *bx, int k, const double *lo,
			const double *hi, int *i0, int *i1, int *j0, int *j1)
{
	const rc_detector_desc *det = rc_geom_detector(g);
	double umin = INFINITY, umax = -INFINITY, vmin = INFINITY, vmax = -INFINITY;
	*i0 = 0;
	*i1 = det->nu;
	*j0 = 0;
	*j1 = det->nv;
	/* a cylinder's image of a box is not the hull of its corners' */
	if (det->shape == RC_DETECTOR_CURVED)
		return;
	for (int c = 0; c < 8; c++) {
		double X[3], u, v, w;
		for (int a = 0; a < 3; a++)
			X[a] = bx->x0[a] + bx->s[a] * ((c >> a) & 1 ? hi[a] : lo[a]);
		rc_view_project(rc_geom_view(g, k), X, &u, &v, &w);
		if (!(w > 0))
			return;
		umin = fmin(umin, u);
		umax = fmax(umax, u);
		vmin = fmin(vmin, v);
		vmax = fmax(vmax, v);
	}
	*i0 = (int)fmax(0, floor(umin) - 1);
	*i1 = (int)fmin(det->nu, ceil(umax) + 2);
	*j0 = (int)fmax(0, floor(vmin) - 1);
	*j1 = (int)fmin(det->nv, ceil(vmax) + 2);
	if (*i1 < *i0)
		*i1 = *i0;
	if (*j1 < *j0)
		*j1 = *j0;
}

/* --- forward ------------------------------------------------------------- */

#define RC_FPR_GROUP rc_fpr_group_baseline
#define RC_BPM_GROUP rc_bpm_group_baseline
#include "projectors/proj_raycast_group.h"

/* The zero-bordered copy: voxel (x, y, z) at (x, y, z) + RC_FPR_PAD.  The
 * samples of a ray lie in the support (-1, n) but the last, which may reach
 * half a voxel past it; with two voxels of zeros on every side each sample's
 * eight corners lie in the copy, so no sample needs a test. */
#define RC_FPR_PAD 2

struct rc_fpr {
	const rc_geom *g;
	int np[3];   /* the copy's dimensions, n + 2 RC_FPR_PAD */
	float *pad;  /* allocated zeroed at the first call that uses it */
	size_t pad_bytes; /* reserved for pad (rc_proj_keep_reserve) */
	int no_pad;  /* over the limit, too large for 32-bit indices, or not allocated */
};

struct fp_ctx {
	const rc_geom *g;
	struct box bx;
	double step;
	const float *vol;   /* the volume, or its zero-bordered copy */
	const int *nvol;    /* its dimensions */
	double shift;       /* 0, or RC_FPR_PAD with the copy */
	float *proj;
	int first, nv, nu;
	void (*group)(const float *, int, int, struct rc_fpr_group *); /* NULL: scalar only */
};

int rc_fpr_new(const rc_geom *g, rc_fpr **ret, rc_err *err)
{
	rc_fpr *f = calloc(1, sizeof *f);
	if (!f)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the ray caster");
	const rc_volume_desc *v = rc_geom_volume(g);
	f->g = g;
	f->np[0] = v->nx + 2 * RC_FPR_PAD;
	f->np[1] = v->ny + 2 * RC_FPR_PAD;
	f->np[2] = v->nz + 2 * RC_FPR_PAD;
	*ret = f;
	return 0;
}

void rc_fpr_free(rc_fpr *f)
{
	if (!f)
		return;
	if (f->pad)
		rc_proj_keep_release(f->pad_bytes);
	free(f->pad);
	free(f);
}

/* The whole ray as the run, when its first and last samples have all
 * their corners in the zero-bordered copy (the coordinates are monotone
 * along the ray, so then every sample has); else none, and the checked
 * path takes it (it should not happen: the border holds them). */
static void whole_run(const struct ray *r, const int *n, int *ma, int *mb)
{
	struct tri t;
	int ok = r->n > 0 && sample_at(r, 0, n, &t) && sample_at(r, r->n - 1, n, &t);
	*ma = 0;
	*mb = ok ? r->n : 0;
}

/* The run [ma, mb) of samples of ray r whose eight corners all lie inside
 * the volume.  Each coordinate b + m d is monotone in m (float rounding is
 * monotone), so the inside samples form one run; its ends are estimated in
 * double and then settled with sample_at's own test.  An estimate that is
 * off only moves samples between the run and the checked head or tail. */
static void inside_run(const struct ray *r, const int *n, int *ma, int *mb)
{
	double lo = 0, hi = r->n;
	struct tri t;
	for (int a = 0; a < 3; a++) {
		if (fabsf(r->d[a]) < 1e-12f) {
			if (!(r->b[a] >= 0 && r->b[a] < n[a] - 1))
				hi = 0;
			continue;
		}
		double t1 = (0 - r->b[a]) / r->d[a], t2 = (n[a] - 1 - r->b[a]) / r->d[a];
		lo = fmax(lo, fmin(t1, t2));
		hi = fmin(hi, fmax(t1, t2));
	}
	*ma = *mb = 0;
	if (!(hi > lo))
		return;
	int a = (int)fmax(0, floor(lo) - 2), b;
	int stop = (int)fmin(r->n, ceil(hi) + 3);
	while (a < stop && !sample_at(r, a, n, &t))
		a++;
	if (a >= stop)
		return;
	b = (int)fmax(a + 1, fmin(r->n, ceil(hi) + 2));
	while (b > a && !sample_at(r, b - 1, n, &t))
		b--;
	*ma = a;
	*mb = b;
}

/* Sum of samples [m0, m1) of ray r, each checked (the head and tail). */
static float ray_part(const float *vol, const int *n, const struct ray *r, int m0, int m1, float sum)
{
	for (int m = m0; m < m1; m++) {
		struct tri t;
		int in = sample_at(r, m, n, &t);
		sum += gather8(vol, n, &t, in);
	}
	return sum;
}

/* One task: one detector row of one view, RC_FPR_LANES rays at a time: the
 * checked heads, the runs in the vectorised group loop, the checked tails,
 * so that each ray adds its samples in order, as one scalar loop would. */
static void fp_task(void *arg, long task, int worker)
{
	struct fp_ctx *c = arg;
	(void)worker;
	int k = c->first + (int)(task / c->nv), j = (int)(task % c->nv);
	float *row = c->proj + rc_geom_row_offset(c->g, k, j);
	const int *n = c->nvol;
	float step = (float)c->step;
	/* pixels whose rays cannot meet the support (-1, n) get 0 without a
	 * ray set-up (most of the detector in paper 000's case) */
	const double lo[3] = { -1, -1, -1 }, hi[3] = { c->bx.n[0], c->bx.n[1], c->bx.n[2] };
	int ia, ib, ja, jb;
	pixel_range(c->g, &c->bx, k, lo, hi, &ia, &ib, &ja, &jb);
	ia = ia < 0 ? 0 : ia > c->nu ? c->nu : ia;
	ib = ib < ia ? ia : ib > c->nu ? c->nu : ib;
	if (j < ja || j >= jb)
		ib = ia;
	memset(row, 0, (size_t)ia * sizeof *row);
	memset(row + ib, 0, (size_t)(c->nu - ib) * sizeof *row);
	for (int i0 = ia; i0 < ib; i0 += RC_FPR_LANES) {
		struct rc_fpr_group G;
		struct ray r[RC_FPR_LANES];
		int nl = ib - i0 < RC_FPR_LANES ? ib - i0 : RC_FPR_LANES;
		for (int l = 0; l < RC_FPR_LANES; l++) {
			r[l].n = 0;
			if (l < nl)
				ray_setup(c->g, &c->bx, c->step, k, i0 + l, j, c->shift, &r[l]);
			int ma = 0, mb = 0;
			if (r[l].n && c->group && c->shift)
				whole_run(&r[l], n, &ma, &mb);
			else if (r[l].n && c->group)
				inside_run(&r[l], n, &ma, &mb);
			G.sum[l] = ray_part(c->vol, n, &r[l], 0, mb > ma ? ma : r[l].n, 0.0f);
			G.ma[l] = ma;
			G.mb[l] = mb;
			for (int a = 0; a < 3; a++) { /* lanes with no run sit at voxel 0 */
				G.b[a][l] = mb > ma ? r[l].b[a] : 0.0f;
				G.d[a][l] = mb > ma ? r[l].d[a] : 0.0f;
			}
		}
		if (c->group)
			c->group(c->vol, n[0], n[1], &G);
		for (int l = 0; l < nl; l++) {
			float sum = G.mb[l] > G.ma[l] ? ray_part(c->vol, n, &r[l], G.mb[l], r[l].n, G.sum[l]) : G.sum[l];
			row[i0 + l] = sum * step;
		}
	}
}

struct copy_ctx {
	const rc_fpr *f;
	const float *vol;
};

/* Slice z of the volume into the copy's interior (the border stays 0). */
static void copy_task(void *arg, long z, int worker)
{
	const struct copy_ctx *c = arg;
	(void)worker;
	const int *np = c->f->np, nx = np[0] - 2 * RC_FPR_PAD, ny = np[1] - 2 * RC_FPR_PAD;
	for (int y = 0; y < ny; y++)
		memcpy(c->f->pad + (((size_t)z + RC_FPR_PAD) * (size_t)np[1] + (size_t)y + RC_FPR_PAD) * (size_t)np[0] +
			       RC_FPR_PAD,
		       c->vol + ((size_t)z * (size_t)ny + (size_t)y) * (size_t)nx, (size_t)nx * sizeof(float));
}

/* The zero-bordered copy of vol, or NULL for the checked path: when the
 * copy is over the memory limit of kept buffers (rc_proj_keep_reserve,
 * RECOND_FPR_PAD_MAX_MB) or when the detector has fewer pixels than the
 * volume's cross-section (a copy per call would then cost about as much as
 * the call's samples).  The choice depends on the geometry, not on the
 * call, so that any split of the views gives the same projections. */
static const float *padded_copy(rc_fpr *f, rc_pool *pool, const float *vol)
{
	const rc_volume_desc *v = rc_geom_volume(f->g);
	const rc_detector_desc *d = rc_geom_detector(f->g);
	if ((double)d->nu * d->nv < (double)v->nx * v->ny)
		f->no_pad = 1;
	if (!f->pad && !f->no_pad) {
		size_t count = (size_t)f->np[0] * (size_t)f->np[1] * (size_t)f->np[2];
		size_t bytes = count * sizeof(float);
		if ((long long)count < RC_FPR_MAX_VOXELS && rc_proj_keep_reserve(bytes, "RECOND_FPR_PAD_MAX_MB")) {
			f->pad = calloc(count, sizeof(float));
			if (f->pad)
				f->pad_bytes = bytes;
			else
				rc_proj_keep_release(bytes);
		}
		f->no_pad = !f->pad;
	}
	if (!f->pad)
		return NULL;
	struct copy_ctx cc = { .f = f, .vol = vol };
	rc_pool_run(pool, v->nz, copy_task, &cc);
	return f->pad;
}

void rc_fp_raycast(rc_fpr *f, rc_pool *pool, rc_cpu_isa isa, const float *vol, float *proj, int first, int last)
{
	static void (*const groups[RC_ISA_COUNT])(const float *, int, int, struct rc_fpr_group *) = {
		rc_fpr_group_baseline, rc_fpr_group_avx2, rc_fpr_group_avx512
	};
	const rc_geom *g = f->g;
	struct fp_ctx c = { .g = g, .vol = vol, .proj = proj, .first = first };
	box_of(rc_geom_volume(g), &c.bx);
	c.nvol = c.bx.n;
	c.step = rc_raycast_step_mm(rc_geom_volume(g));
	c.nu = rc_geom_detector(g)->nu;
	c.nv = rc_geom_detector(g)->nv;
	if (!rc_cpu_isa_supported(isa))
		isa = RC_ISA_BASELINE;
	if ((long long)c.bx.n[0] * c.bx.n[1] * c.bx.n[2] < RC_FPR_MAX_VOXELS) {
		c.group = groups[isa];
		const float *pad = padded_copy(f, pool, vol);
		if (pad) {
			c.vol = pad;
			c.nvol = f->np;
			c.shift = RC_FPR_PAD;
		}
	}
	rc_pool_run(pool, (long)(last - first) * c.nv, fp_task, &c);
}

/* --- transpose ------------------------------------------------------------ */

struct bp_ctx {
	const rc_geom *g;
	struct box bx;
	double step;
	const float *proj;
	float *vol;
	int first, last, slab;
	void (*group)(float *, const struct rc_bpm_group *);
};

/* Lane q of G: ray (k, i, j) if it may reach the slab [z0, z1), else no samples. */
static void bp_lane(const struct bp_ctx *c, const float *row, int k, int i, int j, int q, struct rc_bpm_group *G)
{
	struct ray r;
	float v = row[i] * (float)c->step;
	G->m0[q] = G->m1[q] = 0;
	if (v == 0 || !ray_setup(c->g, &c->bx, c->step, k, i, j, 0, &r))
		return;
	int m0 = 0, m1 = r.n, z0 = G->z0, z1 = G->z1;
	if (fabsf(r.d[2]) > 1e-12f) {
		/* samples with floor(z) in [z0-1, z1-1], with a margin of 2 for rounding */
		double ma = (z0 - 1 - r.b[2]) / r.d[2], mb = (z1 - r.b[2]) / r.d[2];
		if (ma > mb) {
			double t = ma;
			ma = mb;
			mb = t;
		}
		/* finite (|d| > 1e-12) but maybe far outside int: clamped to
		 * [0, n] before the conversion */
		double fa = floor(ma) - 2, fb = ceil(mb) + 3;
		m0 = fa <= 0 ? 0 : fa < r.n ? (int)fa : r.n;
		m1 = fb <= 0 ? 0 : fb < r.n ? (int)fb : r.n;
	} else if (r.b[2] < z0 - 2 || r.b[2] > z1 + 1) {
		return;
	}
	for (int a = 0; a < 3; a++) {
		G->b[a][q] = r.b[a];
		G->d[a][q] = r.d[a];
	}
	G->v[q] = v;
	G->m0[q] = m0;
	G->m1[q] = m1;
}

static void bp_task(void *arg, long task, int worker)
{
	struct bp_ctx *c = arg;
	(void)worker;
	const int *n = c->bx.n;
	struct rc_bpm_group G = { .n = { n[0], n[1], n[2] } };
	G.z0 = (int)task * c->slab;
	G.z1 = G.z0 + c->slab < n[2] ? G.z0 + c->slab : n[2];
	size_t sz = (size_t)n[0] * (size_t)n[1];
	memset(c->vol + (size_t)G.z0 * sz, 0, (size_t)(G.z1 - G.z0) * sz * sizeof(float));
	/* samples with floor(z) in [z0-1, z1-1] touch the slab */
	double lo[3] = { -1, -1, G.z0 - 1 }, hi[3] = { n[0], n[1], G.z1 };
	for (int k = c->first; k < c->last; k++) {
		int i0, i1, j0, j1;
		pixel_range(c->g, &c->bx, k, lo, hi, &i0, &i1, &j0, &j1);
		for (int j = j0; j < j1; j++) {
			const float *row = c->proj + rc_geom_row_offset(c->g, k, j);
			/* groups of columns aligned to RC_BPM_RAYS whatever the slab's
			 * pixel range: the order of the sums does not depend on it */
			for (int ig = i0 - i0 % RC_BPM_RAYS; ig < i1; ig += RC_BPM_RAYS) {
				for (int q = 0; q < RC_BPM_RAYS; q++) {
					if (ig + q >= i0 && ig + q < i1)
						bp_lane(c, row, k, ig + q, j, q, &G);
					else
						G.m0[q] = G.m1[q] = 0;
				}
				c->group(c->vol, &G);
			}
		}
	}
}

void rc_bp_matched(const rc_geom *g, rc_pool *pool, rc_cpu_isa isa, const float *proj, float *vol,
		   int first, int last)
{
	static void (*const groups[RC_ISA_COUNT])(float *, const struct rc_bpm_group *) = {
		rc_bpm_group_baseline, rc_bpm_group_avx2, rc_bpm_group_avx512
	};
	struct bp_ctx c = { .g = g, .proj = proj, .vol = vol, .first = first, .last = last };
	if (!rc_cpu_isa_supported(isa))
		isa = RC_ISA_BASELINE;
	c.group = groups[isa];
	box_of(rc_geom_volume(g), &c.bx);
	c.step = rc_raycast_step_mm(rc_geom_volume(g));
	/* Slabs: enough tasks to balance the pool; each replays every ray's
	 * setup, so not many more than that.  The result does not depend on it. */
	int nz = c.bx.n[2], want = 4 * rc_pool_threads(pool);
	c.slab = (nz + want - 1) / want;
	if (c.slab < 2)
		c.slab = 2;
	long nslabs = (nz + c.slab - 1) / c.slab;
	rc_pool_run(pool, nslabs, bp_task, &c);
}
