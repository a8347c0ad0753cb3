/*
 * proj_footprint: RC_FP_FOOTPRINT and its exact transpose RC_BP_FOOTPRINT,
 * the separable-footprint pair (SF-TR: Long, Fessler and Balter 2010) that
 * the iterative algorithms run where voxels project more than a pixel
 * apart (the splat pair's hats stop overlapping there: proj_splat.c).
 *
 * The model.  A voxel of density x adds to the detector, in sum over its
 * pixels, x V |c(u, v)| / w^2 (proj_splat.c derives it: the voxel's volume
 * times the Jacobian of its projection, in pixel units; g = V |c| is
 * evaluated at the pixel, a diagonal gain G as in the splat pair).  That
 * mass is spread over the pixels by a separable footprint:
 *   - along u a trapezoid: the four corners of the voxel's (x, y) square
 *     projected to u, sorted t0 <= t1 <= t2 <= t3, rising on [t0, t1],
 *     flat on [t1, t2], falling on [t2, t3] (exact for a parallel ray
 *     set, the SF-TR approximation of a cone), integrated over each
 *     pixel [j - 1/2, j + 1/2] and divided by its area;
 *   - along v a rectangle: the voxel's two z faces projected at the
 *     voxel's centre, integrated over each row and divided by its width.
 * Integrating the footprint over the pixel (rather than sampling it) keeps
 * the model right at every ratio of projected voxel size to pixel size:
 * below a pixel a voxel lands on one or two pixels with the overlap's
 * share, above it spreads over the pixels its shadow covers.
 *
 * Work.  On a cone view (P[2] = P[10] = 0) u and w are constant along a
 * voxel column and the axial rectangles of its voxels tile the detector
 * column, so each column is one trapezoid set-up (four divisions) and the
 * column loops of proj_footprint_col.h: a 1-D distance-driven pass along v
 * and an outer product with the u weights.  Any other view (matrices,
 * helix) takes the per-voxel path: the trapezoid and the rectangle of each
 * voxel from its own corners, the outer product of the two.
 *
 * A cylindrical (curved) cone detector (rc_geom_cyl_project) is served by
 * the same column loops: u is the fan angle times S / du, a function of
 * the column's (x, y) alone, so the trapezoid's corners are the four
 * (x, y) corners' fan angles (atan of side / depth, which keeps their
 * order, so they are sorted before the atan); v = S (z - z_src) / (L dv)
 * is linear in z down a column (L its distance from the source in the
 * plane of rotation), so its rectangles tile the detector column as on a
 * flat cone.  Its Jacobian |grad u x grad v| is S^2 sqrt(1 + zeta^2) /
 * (du dv L^2), zeta = (z - z_src) / L a function of the row alone: so 1/L^2
 * takes the place of 1/w^2 and the gain g = V S^2 sqrt(1 + zeta^2) /
 * (du dv) is one value per detector row, the same on every view.  The
 * source height is read per view (a helix's shifts it).
 * The forward runs a view per task into a transposed image of the
 * worker's (v fastest), then scales by g into the view; the back builds
 * gained transposed copies of a block of views, then runs a row of voxel
 * columns per task over the block's views in order.  Both sides compute
 * the weights with the same functions, so A^T is the transpose of A up to
 * the order of float sums, and neither depends on the thread count.
 */
#include "projectors/proj_atan.h"
#include "projectors/proj_cpu.h"
#include "projectors/proj_footprint_col.h"

#include <stdlib.h>
#include <string.h>

/* The back projection's block of gained, transposed views (bytes at most;
 * at least one view). */
#define RC_FPF_BLOCK_BYTES ((size_t)64 << 20)
/* The back projection's tasks: tiles of RC_FPF_TILE^2 voxel columns
 * (core/plan/memory.h's RC_MEM_FPF_TILE_COLS, its sums per thread). */
#define RC_FPF_TILE 8

/* A column's set-up on a cone view (flat or curved): the trapezoid's
 * corners t (sorted, pixels), trap_fill's scale s and the rise's and
 * fall's 1 / (2 width), its pixels a..b, and rc_fpf_col_init's V0 and dv;
 * ok = 0 where it misses the detector or a corner lies behind the source.
 * set_many computes a row's columns (forward) or a tile row's (back)
 * in one loop without branches before any is used: one column's set-up is
 * a chain of divisions (the corners, then 1/w, the scale and the widths),
 * and alone between two column passes its latency was exposed; in a loop
 * of independent items the next items' divisions overlap it. */
struct fpf_cs {
	double t[4], s, i1, i3, V0, dv;
	int a, b, ok;
};
typedef struct fpf_cs fpf_cs;

struct rc_fpf {
	const rc_geom *g;
	int threads, nu, nv, nz;
	size_t view_floats; /* nu * nv */
	float *img;         /* forward: one transposed view per worker */
	float *scratch;     /* per worker: wu (nu), wv / t (nv + nz: the column loops'), column (nz) */
	size_t scratch_floats;
	float *blk;         /* back: blk_views gained transposed views */
	int blk_views;
	rc_zfast zf;        /* forward: the volume z-fastest (none: columns read strided) */
	float *zw;          /* world z of every slice */
	double *xw, *yw;    /* world x, y of every voxel column (x, y of the volume's) */
	struct fpf_cs *cs;  /* per worker: cs_items column set-ups (set_many: a row's, a tile row's) */
	float *tacc;        /* back: per worker a tile's column sums (RC_FPF_TILE^2 nz) */
	int cs_items;
	unsigned char *cone; /* per view: the column path (set_cone_views) */
	int general;        /* every view by the per-voxel path (tests) */
	double hx, hy, vz;  /* half a voxel in x and y; its height */
	/* a curved cone: per view cos, sin of the angle and the source (5
	 * doubles); u = atan(side / depth) su + cu, v = (z - z_src) sv / L + cv;
	 * the gain of each detector row */
	double *cylv, su, cu, sv, cv;
	int cyl;
	float *cylg;
};

static int is_curved_cone(const rc_geom *g)
{
	return rc_geom_type_is_cone(rc_geom_type_of(g)) && rc_geom_detector(g)->shape == RC_DETECTOR_CURVED;
}

/* (depth, side) of in-plane point (x, y) in a curved cone's view cv
 * (rc_geom_cyl_project's). */
static inline void cyl_plane(const double *cv, double x, double y, double *depth, double *side)
{
	const double px = x - cv[2], py = y - cv[3];
	*depth = -cv[0] * px - cv[1] * py;
	*side = -cv[1] * px + cv[0] * py;
}

/* A curved cone: every (x, y) corner of the volume's box in front of every
 * source (depth > 0), as a flat cone's test asks of w. */
static int cyl_suits(const rc_geom *g)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const double ex = 0.5 * v->nx * v->vx, ey = 0.5 * v->ny * v->vy;
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		const rc_view *vw = rc_geom_view(g, k);
		const double cv[4] = { cos(vw->angle_rad), sin(vw->angle_rad), vw->src[0], vw->src[1] };
		for (int q = 0; q < 4; q++) {
			double depth, side;
			cyl_plane(cv, v->cx + (q & 1 ? ex : -ex), v->cy + (q & 2 ? ey : -ey), &depth, &side);
			if (!(depth > 0))
				return 0;
		}
	}
	return 1;
}

int rc_footprint_suits(const rc_geom *g)
{
	if (is_curved_cone(g))
		return cyl_suits(g);
	/* rc_splat_max_step: infinite off flat cone / matrices geometries and
	 * where a voxel lies behind a source */
	return isfinite(rc_splat_max_step(g));
}

/* The larger pixel step of a voxel of sizes s centred at X in view k of a
 * curved cone, along each axis. */
static double cyl_step_at(const rc_geom *g, int k, const double X[3], const double s[3])
{
	double worst = 0;
	for (int i = 0; i < 3; i++) {
		double a[3] = { X[0], X[1], X[2] }, b[3] = { X[0], X[1], X[2] }, ua, va, ub, vb, L;
		a[i] -= 0.5 * s[i];
		b[i] += 0.5 * s[i];
		rc_geom_cyl_project(g, k, a, &ua, &va, &L);
		rc_geom_cyl_project(g, k, b, &ub, &vb, &L);
		worst = fmax(worst, fmax(fabs(ub - ua), fabs(vb - va)));
	}
	return worst;
}

static double clampd(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The largest step over the box's corners and, per view, the voxels of
 * the box nearest the source in the plane (L is not linear: its least
 * value may lie on a face, not at a corner), at both z ends. */
double rc_footprint_cyl_step(const rc_geom *g)
{
	if (!is_curved_cone(g))
		return INFINITY;
	const rc_volume_desc *v = rc_geom_volume(g);
	const double s[3] = { v->vx, v->vy, v->vz };
	double lo[3], hi[3], worst = 0;
	rc_volume_voxel_pos(v, 0, 0, 0, lo);
	rc_volume_voxel_pos(v, v->nx - 1, v->ny - 1, v->nz - 1, hi);
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		const rc_view *vw = rc_geom_view(g, k);
		for (int c = 0; c < 10; c++) {
			double X[3];
			if (c < 8) {
				X[0] = c & 1 ? hi[0] : lo[0], X[1] = c & 2 ? hi[1] : lo[1], X[2] = c & 4 ? hi[2] : lo[2];
			} else {
				X[0] = clampd(vw->src[0], fmin(lo[0], hi[0]), fmax(lo[0], hi[0]));
				X[1] = clampd(vw->src[1], fmin(lo[1], hi[1]), fmax(lo[1], hi[1]));
				X[2] = c == 8 ? lo[2] : hi[2];
			}
			worst = fmax(worst, cyl_step_at(g, k, X, s));
		}
	}
	return worst;
}

int rc_footprint_auto_suits(const rc_geom *g)
{
	return !is_curved_cone(g) || rc_footprint_cyl_step(g) > RC_SPLAT_MAX_STEP;
}

/* A curved cone's per-view table and per-row gain; 0 or -1 (memory). */
static int cyl_init(rc_fpf *f)
{
	const rc_geom *g = f->g;
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *v = rc_geom_volume(g);
	const int n = rc_geom_nviews(g);
	const double S = rc_geom_sdd(g), V = v->vx * v->vy * v->vz;
	f->cylv = malloc((size_t)n * 5 * sizeof(double));
	f->cylg = malloc((size_t)d->nv * sizeof(float));
	if (!f->cylv || !f->cylg)
		return -1;
	for (int k = 0; k < n; k++) {
		const rc_view *vw = rc_geom_view(g, k);
		double *c = f->cylv + 5 * (size_t)k;
		c[0] = cos(vw->angle_rad);
		c[1] = sin(vw->angle_rad);
		c[2] = vw->src[0];
		c[3] = vw->src[1];
		c[4] = vw->src[2];
	}
	f->su = S / d->du;
	f->cu = (d->nu - 1) / 2.0 - d->offset_u / d->du;
	f->sv = S / d->dv;
	f->cv = (d->nv - 1) / 2.0 - d->offset_v / d->dv;
	for (int j = 0; j < d->nv; j++) {
		const double zeta = ((j - (d->nv - 1) / 2.0) * d->dv + d->offset_v) / S;
		f->cylg[j] = (float)(V * S * S * sqrt(1.0 + zeta * zeta) / (d->du * d->dv));
	}
	f->cyl = 1;
	return 0;
}

/* Which views take the column path (P[2] = P[10] = 0), once: the back
 * projection asks per column and view, and reading P there missed the
 * cache (each view's matrices are a few lines apart). */
static void set_cone_views(rc_fpf *f)
{
	for (int k = 0; k < rc_geom_nviews(f->g); k++) {
		const double *P = rc_geom_view(f->g, k)->P;
		f->cone[k] = !f->general && P[2] == 0 && P[10] == 0;
	}
}

int rc_fpf_new(const rc_geom *g, int threads, rc_fpf **ret, rc_err *err)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *v = rc_geom_volume(g);
	if (!rc_footprint_suits(g))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "the footprint pair needs a cone or matrices geometry with the volume in front of every source");
	rc_fpf *f = calloc(1, sizeof *f);
	if (!f)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the footprint projector");
	f->g = g;
	f->threads = threads;
	f->nu = d->nu;
	f->nv = d->nv;
	f->nz = v->nz;
	f->hx = 0.5 * v->vx;
	f->hy = 0.5 * v->vy;
	f->vz = v->vz;
	f->view_floats = (size_t)d->nu * (size_t)d->nv;
	f->scratch_floats = (size_t)d->nu + (size_t)d->nv + 2 * (size_t)v->nz + 16;
	f->scratch = malloc((size_t)threads * f->scratch_floats * sizeof(float));
	f->zw = rc_volume_z_table(v);
	/* a row's columns (forward) or a tile row's (back) */
	f->cs_items = v->nx > RC_FPF_TILE ? v->nx : RC_FPF_TILE;
	f->cs = malloc((size_t)threads * (size_t)f->cs_items * sizeof *f->cs);
	f->tacc = malloc((size_t)threads * RC_FPF_TILE * RC_FPF_TILE * (size_t)v->nz * sizeof(float));
	f->xw = malloc((size_t)v->nx * sizeof *f->xw);
	f->yw = malloc((size_t)v->ny * sizeof *f->yw);
	f->cone = malloc((size_t)rc_geom_nviews(g));
	if (!f->scratch || !f->zw || !f->cs || !f->xw || !f->yw || !f->cone || !f->tacc || (is_curved_cone(g) && cyl_init(f))) {
		rc_fpf_free(f);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the footprint projector");
	}
	for (int ix = 0; ix < v->nx; ix++) {
		double X[3];
		rc_volume_voxel_pos(v, ix, 0, 0, X);
		f->xw[ix] = X[0];
	}
	for (int iy = 0; iy < v->ny; iy++) {
		double X[3];
		rc_volume_voxel_pos(v, 0, iy, 0, X);
		f->yw[iy] = X[1];
	}
	set_cone_views(f);
	*ret = f;
	return 0;
}

void rc_fpf_free(rc_fpf *f)
{
	if (!f)
		return;
	free(f->img);
	free(f->scratch);
	free(f->blk);
	rc_zfast_release(&f->zf);
	free(f->zw);
	free(f->cylv);
	free(f->cylg);
	free(f->cs);
	free(f->xw);
	free(f->yw);
	free(f->cone);
	free(f->tacc);
	free(f);
}

void rc_fpf_force_general(rc_fpf *f, int on)
{
	f->general = on;
	set_cone_views(f);
}

/* ---- the footprints ------------------------------------------------------ */

/* Sorted by min / max (minsd / maxsd: no branches to mispredict, the
 * corners' order changes from column to column). */
static inline void sort4(double *t)
{
#define RC_FPF_MM(a, b)                                                                                       \
	{                                                                                                     \
		const double lo_ = t[a] < t[b] ? t[a] : t[b], hi_ = t[a] < t[b] ? t[b] : t[a];                \
		t[a] = lo_;                                                                                   \
		t[b] = hi_;                                                                                   \
	}
	RC_FPF_MM(0, 1) RC_FPF_MM(2, 3) RC_FPF_MM(0, 2) RC_FPF_MM(1, 3) RC_FPF_MM(1, 2)
#undef RC_FPF_MM
}

/* The u weights of a trapezoid with corners t (sorted), each pixel's
 * integral over the area times scale: wu[0..n-1] on pixels *ja..; n = 0
 * when it misses the detector.  The integral from t0 to s is the three
 * pieces' at s clamped into each, branch-free (rise (r - t0)^2 / (2 (t1 -
 * t0)), flat, fall d - d^2 / (2 (t3 - t2)) with d = s - t2: each exactly 0
 * below its piece, a degenerate piece's 0 by its zero width). */

/* cs's s, i1, i3, a, b from its sorted t, and ok cleared where the
 * trapezoid misses the detector; no branches. */
static inline void trap_prep(fpf_cs *cs, int nu, double scale)
{
	const double *t = cs->t;
	const double total = 0.5 * (t[3] + t[2] - t[1] - t[0]);
	cs->ok &= (total > 0) & (t[3] > -0.5) & (t[0] < nu - 0.5);
	/* floor by truncation: both arguments are positive here (clamped:
	 * the conversion of a value out of int's range is undefined) */
	const double t0 = cs->ok ? t[0] : 0.0, t3 = cs->ok ? t[3] : 0.0;
	cs->a = t0 <= -0.5 ? 0 : (int)(t0 + 0.5);
	cs->b = t3 >= nu - 0.5 ? nu - 1 : (int)(t3 + 0.5);
	cs->s = scale / total;
	cs->i1 = t[1] > t[0] ? 0.5 / (t[1] - t[0]) : 0.0;
	cs->i3 = t[3] > t[2] ? 0.5 / (t[3] - t[2]) : 0.0;
}

/* The u weights of cs's trapezoid (ok), each pixel's integral over the
 * area times scale: wu[0..n-1] on pixels cs->a..; returns n.  The integral
 * from t0 to s is the three pieces' at s clamped into each, branch-free
 * (rise (r - t0)^2 / (2 (t1 - t0)), flat, fall d - d^2 / (2 (t3 - t2))
 * with d = s - t2: each exactly 0 below its piece, a degenerate piece's 0
 * by its zero width); fill is proj_footprint_col.h's loop of an ISA (the
 * same floats on each). */
typedef void (*trap_fill_fn)(const double *, double, double, double, int, int, float *restrict);

static inline int trap_fill(trap_fill_fn fill, const fpf_cs *cs, float *wu)
{
	fill(cs->t, cs->i1, cs->i3, cs->s, cs->a, cs->b - cs->a + 1, wu);
	return cs->b - cs->a + 1;
}

/* The u weights of a trapezoid with corners t (sorted) times scale, on
 * pixels *ja..; 0 when it misses the detector (the per-voxel path). */
static int trap_weights(const double *t, int nu, double scale, float *wu, int *ja)
{
	fpf_cs cs = { .t = { t[0], t[1], t[2], t[3] }, .ok = 1 };
	trap_prep(&cs, nu, scale);
	if (!cs.ok)
		return 0;
	*ja = cs.a;
	return trap_fill(rc_fpf_trap_fill_baseline, &cs, wu);
}

/* The v weights of a rectangle [lo, hi] (lo < hi): each row's overlap over
 * the width, on rows *ka..; 0 when it misses the detector. */
static int rect_weights(double lo, double hi, int nv, float *wv, int *ka)
{
	if (!(hi > lo) || hi <= -0.5 || lo >= nv - 0.5)
		return 0;
	const int a = lo <= -0.5 ? 0 : (int)floor(lo + 0.5);
	const int b = hi >= nv - 0.5 ? nv - 1 : (int)floor(hi + 0.5);
	const double is = 1.0 / (hi - lo);
	for (int k = a; k <= b; k++) {
		double x0 = lo > k - 0.5 ? lo : k - 0.5, x1 = hi < k + 0.5 ? hi : k + 0.5;
		wv[k - a] = x1 > x0 ? (float)((x1 - x0) * is) : 0.0f;
	}
	*ka = a;
	return b - a + 1;
}

/* The set-up of the voxel column at (x, y) mm on a flat cone view P: the
 * u weights' trapezoid (1/w^2 folded into the scale) and the axial
 * set-up. */
static inline void cone_item(const rc_fpf *f, const double *P, double x, double y, fpf_cs *cs)
{
	const double hx = f->hx, hy = f->hy;
	const double nu_ = P[0] * x + P[1] * y + P[3], w = P[8] * x + P[9] * y + P[11];
	/* the four corners, then one test of their depths */
	double wq[4];
	for (int q = 0; q < 4; q++) {
		const double sx = q & 1 ? hx : -hx, sy = q & 2 ? hy : -hy;
		wq[q] = w + P[8] * sx + P[9] * sy;
		cs->t[q] = (nu_ + P[0] * sx + P[1] * sy) / wq[q];
	}
	const double w01 = wq[0] < wq[1] ? wq[0] : wq[1], w23 = wq[2] < wq[3] ? wq[2] : wq[3];
	cs->ok = (w01 < w23 ? w01 : w23) > 0;
	sort4(cs->t);
	const double iw = 1.0 / w;
	trap_prep(cs, f->nu, iw * iw);
	cs->V0 = (P[4] * x + P[5] * y + P[6] * f->zw[0] + P[7]) * iw;
	cs->dv = P[6] * f->vz * iw;
}

/* A curved cone's trapezoid along u: the fan angles of the four (x, y)
 * corners of the column at (x, y) in view cv, sorted, in pixel units, and
 * the column centre's L; 0 when a corner is not in front of the source
 * (computed all the same: no branches). */
static inline int cyl_trapezoid(const rc_fpf *f, const double *cv, double x, double y, double *t, double *L)
{
	const double hx = f->hx, hy = f->hy;
	double depth, side, dq[4];
	cyl_plane(cv, x, y, &depth, &side);
	for (int q = 0; q < 4; q++) {
		const double sx = q & 1 ? hx : -hx, sy = q & 2 ? hy : -hy;
		dq[q] = depth - cv[0] * sx - cv[1] * sy;
		t[q] = (side - cv[1] * sx + cv[0] * sy) / dq[q];
	}
	const double d01 = dq[0] < dq[1] ? dq[0] : dq[1], d23 = dq[2] < dq[3] ? dq[2] : dq[3];
	/* atan keeps the order of the tangents */
	sort4(t);
	for (int q = 0; q < 4; q++)
		t[q] = rc_atan_bf(t[q]) * f->su + f->cu;
	*L = sqrt(depth * depth + side * side);
	return (d01 < d23 ? d01 : d23) > 0;
}

/* cone_item on a curved cone's view k: 1/L^2 for 1/w^2, v from the
 * column's L and the view's source height. */
static inline void cyl_item(const rc_fpf *f, int k, double x, double y, fpf_cs *cs)
{
	const double *cv = f->cylv + 5 * (size_t)k;
	double L;
	cs->ok = cyl_trapezoid(f, cv, x, y, cs->t, &L);
	const double iL = 1.0 / L;
	trap_prep(cs, f->nu, iL * iL);
	cs->V0 = (f->zw[0] - cv[4]) * f->sv * iL + f->cv;
	cs->dv = f->sv * f->vz * iL;
}

/* The set-ups of n items of cone views: item i is view k0 + i dk at
 * (xs[i], y) (xs NULL: at (x, y)).  One loop without branches (above). */
static void set_many(const rc_fpf *f, int n, int k0, int dk, const double *xs, double x, double y, fpf_cs *cs)
{
	if (f->cyl) {
		for (int i = 0; i < n; i++)
			cyl_item(f, k0 + i * dk, xs ? xs[i] : x, y, cs + i);
		return;
	}
	for (int i = 0; i < n; i++)
		cone_item(f, rc_geom_view(f->g, k0 + i * dk)->P, xs ? xs[i] : x, y, cs + i);
}

/* Item cs's u weights into wu (*nwu of them from pixel *ja) and axial
 * set-up c; 0 when it misses the detector. */
static inline int use_item(const rc_fpf *f, trap_fill_fn fill, const fpf_cs *cs, float *wu, int *ja, int *nwu,
			   rc_fpf_col *c)
{
	if (!cs->ok)
		return 0;
	*nwu = trap_fill(fill, cs, wu);
	*ja = cs->a;
	return rc_fpf_col_init(c, cs->V0, cs->dv, f->nz, f->nv);
}

/* voxel_footprint on a curved cone's view k: the column's trapezoid and
 * the voxel's two z faces at its L. */
static int cyl_voxel(const rc_fpf *f, int k, const double *X, float *wu, int *ja, int *nwu, float *wv, int *ka,
		     int *nwv)
{
	const double *cv = f->cylv + 5 * (size_t)k;
	double t[4], L;
	if (!cyl_trapezoid(f, cv, X[0], X[1], t, &L))
		return 0;
	const double iL = 1.0 / L, hz = 0.5 * f->vz;
	if (!(*nwu = trap_weights(t, f->nu, iL * iL, wu, ja)))
		return 0;
	const double va = (X[2] - hz - cv[4]) * f->sv * iL + f->cv, vb = (X[2] + hz - cv[4]) * f->sv * iL + f->cv;
	*nwv = rect_weights(va, vb, f->nv, wv, ka);
	return *nwv > 0;
}

/* A voxel's footprint on any view: u weights (1/w^2 folded in) and v
 * weights; 0 when it misses the detector or lies behind the source. */
static int voxel_footprint(const rc_fpf *f, const double *P, const double *X, float *wu, int *ja, int *nwu,
			   float *wv, int *ka, int *nwv)
{
	const rc_volume_desc *v = rc_geom_volume(f->g);
	const double hx = 0.5 * v->vx, hy = 0.5 * v->vy, hz = 0.5 * v->vz;
	const double nu_ = P[0] * X[0] + P[1] * X[1] + P[2] * X[2] + P[3];
	const double nv_ = P[4] * X[0] + P[5] * X[1] + P[6] * X[2] + P[7];
	const double w = P[8] * X[0] + P[9] * X[1] + P[10] * X[2] + P[11];
	double t[4];
	for (int q = 0; q < 4; q++) {
		double sx = q & 1 ? hx : -hx, sy = q & 2 ? hy : -hy;
		double wq = w + P[8] * sx + P[9] * sy;
		if (!(wq > 0))
			return 0;
		t[q] = (nu_ + P[0] * sx + P[1] * sy) / wq;
	}
	const double wa = w - P[10] * hz, wb = w + P[10] * hz;
	if (!(wa > 0) || !(wb > 0))
		return 0;
	double va = (nv_ - P[6] * hz) / wa, vb = (nv_ + P[6] * hz) / wb;
	sort4(t);
	if (!(*nwu = trap_weights(t, f->nu, 1.0 / (w * w), wu, ja)))
		return 0;
	*nwv = rect_weights(va < vb ? va : vb, va < vb ? vb : va, f->nv, wv, ka);
	return *nwv > 0;
}

/* ---- forward -------------------------------------------------------------- */

typedef void (*fwd_col_fn)(const float *restrict, const rc_fpf_col *, const float *restrict, int, float *restrict,
			   int, float *restrict);
typedef void (*const_col_fn)(float, const rc_fpf_col *, const float *restrict, int, float *restrict, int,
			     float *restrict);
typedef void (*bwd_col_fn)(float *restrict, const rc_fpf_col *, const float *restrict, int, const float *restrict,
			   int, float *restrict);

struct fpf_ctx {
	rc_fpf *f;
	fwd_col_fn fwd;
	const_col_fn konst_col;
	bwd_col_fn bwd;
	trap_fill_fn fill;
	const float *vol;
	const float *xt; /* vol z-fastest, or NULL */
	int konst;       /* vol is konst_v everywhere (konst_col) */
	float konst_v;
	float *volw;
	const float *proj;
	float *projw;
	int first, nblk;
};

static float *worker_scratch(const rc_fpf *f, int worker) { return f->scratch + (size_t)worker * f->scratch_floats; }

/* The gain of pixels i0 .. i0 + m - 1 of row j: the splat pair's on a flat
 * detector, the row's on a curved one. */
static void gain_line(const rc_fpf *f, const rc_splat_gain *gn, int i0, int j, int m, float *gain)
{
	if (!f->cyl) {
		rc_splat_gain_line(gn, i0, j, 0, m, gain);
		return;
	}
	for (int i = 0; i < m; i++)
		gain[i] = f->cylg[j];
}

static int view_is_cone(const rc_fpf *f, int k) { return f->cone[k]; }

static void fwd_task(void *arg, long t, int worker)
{
	const struct fpf_ctx *c = arg;
	const rc_fpf *f = c->f;
	const rc_volume_desc *v = rc_geom_volume(f->g);
	const int k = c->first + (int)t, nv = f->nv;
	const double *P = rc_geom_view(f->g, k)->P;
	float *img = f->img + (size_t)worker * f->view_floats;
	float *wu = worker_scratch(f, worker), *wv = wu + f->nu, *col = wv + f->nv + f->nz;
	const size_t plane = (size_t)v->nx * (size_t)v->ny;
	const int cone = view_is_cone(f, k);
	fpf_cs *cs = f->cs + (size_t)worker * (size_t)f->cs_items;
	memset(img, 0, f->view_floats * sizeof(float));
	for (int iy = 0; iy < v->ny; iy++) {
		if (cone)
			set_many(f, v->nx, k, 0, f->xw, 0.0, f->yw[iy], cs);
		for (int ix = 0; ix < v->nx; ix++) {
			const size_t at = (size_t)iy * (size_t)v->nx + (size_t)ix;
			if (cone) {
				rc_fpf_col cc;
				int ja, nwu;
				if (!use_item(f, c->fill, cs + ix, wu, &ja, &nwu, &cc))
					continue;
				if (c->konst) {
					c->konst_col(c->konst_v, &cc, wu, nwu, img + (size_t)ja * (size_t)nv, nv, wv);
					continue;
				}
				const float *a = c->xt ? c->xt + at * (size_t)v->nz : col;
				/* the column after next: the z-fastest copy streams
				 * from memory, a column per pass too far apart for the
				 * hardware's prefetch (its first loads missed) */
				if (c->xt && ix + 2 < v->nx)
					for (int z = 0; z < v->nz; z += 16)
						__builtin_prefetch(a + 2 * (size_t)v->nz + z);
				for (int z = 0; !c->xt && z < v->nz; z++)
					col[z] = c->vol[at + (size_t)z * plane];
				c->fwd(a, &cc, wu, nwu, img + (size_t)ja * (size_t)nv, nv, wv);
				continue;
			}
			double X[3] = { f->xw[ix], f->yw[iy], 0.0 };
			for (int z = 0; z < v->nz; z++) {
				const float x = c->vol[at + (size_t)z * plane];
				int ja, nwu, ka, nwv;
				X[2] = f->zw[z];
				if (x == 0.0f || !(f->cyl ? cyl_voxel(f, k, X, wu, &ja, &nwu, wv, &ka, &nwv)
								: voxel_footprint(f, P, X, wu, &ja, &nwu, wv, &ka, &nwv)))
					continue;
				for (int j = 0; j < nwu; j++) {
					float *o = img + (size_t)(ja + j) * (size_t)nv + ka;
					const float s = x * wu[j];
					for (int q = 0; q < nwv; q++)
						o[q] += s * wv[q];
				}
			}
		}
	}
	rc_splat_gain gn;
	float gain[RC_SPLAT_GAIN_CHUNK];
	rc_splat_gain_init(f->g, k, &gn);
	for (int j = 0; j < nv; j++) {
		float *out = c->projw + rc_geom_row_offset(f->g, k, j);
		const float *in = img + j;
		for (int i0 = 0; i0 < f->nu; i0 += RC_SPLAT_GAIN_CHUNK) {
			int m = f->nu - i0 < RC_SPLAT_GAIN_CHUNK ? f->nu - i0 : RC_SPLAT_GAIN_CHUNK;
			gain_line(f, &gn, i0, j, m, gain);
			for (int i = 0; i < m; i++)
				out[i0 + i] = in[(size_t)(i0 + i) * (size_t)nv] * gain[i];
		}
	}
}

static const fwd_col_fn fwd_fns[RC_ISA_COUNT] = { rc_fpf_fwd_col_baseline, rc_fpf_fwd_col_avx2,
						  rc_fpf_fwd_col_avx512 };
static const const_col_fn const_fns[RC_ISA_COUNT] = { rc_fpf_const_col_baseline, rc_fpf_const_col_avx2,
						      rc_fpf_const_col_avx512 };
static const bwd_col_fn bwd_fns[RC_ISA_COUNT] = { rc_fpf_bwd_col_baseline, rc_fpf_bwd_col_avx2,
						  rc_fpf_bwd_col_avx512 };
static const trap_fill_fn fill_fns[RC_ISA_COUNT] = { rc_fpf_trap_fill_baseline, rc_fpf_trap_fill_avx2,
						     rc_fpf_trap_fill_avx512 };

int rc_fp_footprint(rc_fpf *f, rc_pool *pool, rc_cpu_isa isa, const float *vol, float *proj, int first, int last,
		    rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(f->g);
	if (last <= first)
		return 0;
	if (!f->img) {
		f->img = malloc((size_t)f->threads * f->view_floats * sizeof(float));
		if (!f->img)
			return rc_fail(err, RC_ENOMEM, "", "out of memory for the footprint projector's images (%zu MiB)",
				       ((size_t)f->threads * f->view_floats * sizeof(float)) >> 20);
	}
	struct fpf_ctx c = { .f = f, .vol = vol, .projw = proj, .first = first,
			     .fwd = fwd_fns[rc_cpu_isa_supported(isa) ? isa : RC_ISA_BASELINE],
			     .konst_col = const_fns[rc_cpu_isa_supported(isa) ? isa : RC_ISA_BASELINE],
			     .fill = fill_fns[rc_cpu_isa_supported(isa) ? isa : RC_ISA_BASELINE] };
	/* a volume of one value (one compare pass, which a varying volume
	 * leaves at its first change) takes rc_fpf_const_col on cone views */
	int any_cone = 0;
	for (int k = first; k < last && !any_cone; k++)
		any_cone = view_is_cone(f, k);
	const size_t nvox = rc_volume_count(v);
	c.konst = any_cone; /* read on the cone views' path only */
	c.konst_v = vol[0];
	for (size_t i = 1; i < nvox && c.konst; i++)
		c.konst = vol[i] == c.konst_v;
	/* only the cone views' column path reads the z-fastest copy */
	c.xt = any_cone && !c.konst ? rc_zfast_fill(&f->zf, v, vol, pool) : NULL;
	rc_pool_run(pool, last - first, fwd_task, &c);
	return 0;
}

/* ---- back ----------------------------------------------------------------- */

/* View first + t of the block into blk, transposed and times the gain. */
static void gain_task(void *arg, long t, int worker)
{
	const struct fpf_ctx *c = arg;
	const rc_fpf *f = c->f;
	const int k = c->first + (int)t, nv = f->nv;
	float *dst = f->blk + (size_t)t * f->view_floats;
	float gain[RC_SPLAT_GAIN_CHUNK];
	rc_splat_gain gn;
	(void)worker;
	rc_splat_gain_init(f->g, k, &gn);
	for (int j = 0; j < nv; j++) {
		const float *in = c->proj + rc_geom_row_offset(f->g, k, j);
		for (int i0 = 0; i0 < f->nu; i0 += RC_SPLAT_GAIN_CHUNK) {
			int m = f->nu - i0 < RC_SPLAT_GAIN_CHUNK ? f->nu - i0 : RC_SPLAT_GAIN_CHUNK;
			gain_line(f, &gn, i0, j, m, gain);
			for (int i = 0; i < m; i++)
				dst[(size_t)(i0 + i) * (size_t)nv + (size_t)j] = in[i0 + i] * gain[i];
		}
	}
}

/* Tile t of RC_FPF_TILE x RC_FPF_TILE voxel columns over the block's views,
 * in view order, views outer: a view's strips under the tile's columns
 * (about 2.3 r RC_FPF_TILE + 3 image columns of the at most r + 1.5 each
 * column reads) stay in L1 / L2 between neighbouring columns, where a row
 * of columns per task read every view's whole image once per row (the
 * block from L3, about 40 % of the back's time at ratio 1.25).  Each
 * column's sum still runs over the views in order: the same floats. */
static void bwd_task(void *arg, long tile, int worker)
{
	const struct fpf_ctx *c = arg;
	const rc_fpf *f = c->f;
	const rc_volume_desc *v = rc_geom_volume(f->g);
	const int nv = f->nv, nz = v->nz, tx = (v->nx + RC_FPF_TILE - 1) / RC_FPF_TILE;
	const int ix0 = (int)(tile % tx) * RC_FPF_TILE, iy0 = (int)(tile / tx) * RC_FPF_TILE;
	const int mx = v->nx - ix0 < RC_FPF_TILE ? v->nx - ix0 : RC_FPF_TILE;
	const int my = v->ny - iy0 < RC_FPF_TILE ? v->ny - iy0 : RC_FPF_TILE;
	float *wu = worker_scratch(f, worker), *wv = wu + f->nu;
	float *acc = f->tacc + (size_t)worker * RC_FPF_TILE * RC_FPF_TILE * (size_t)nz;
	fpf_cs *cs = f->cs + (size_t)worker * (size_t)f->cs_items;
	const size_t plane = (size_t)v->nx * (size_t)v->ny;
	memset(acc, 0, (size_t)mx * (size_t)my * (size_t)nz * sizeof(float));
	for (int t = 0; t < c->nblk; t++) {
		const int k = c->first + t;
		const float *img = f->blk + (size_t)t * f->view_floats;
		const int cone = view_is_cone(f, k);
		const double *P = rc_geom_view(f->g, k)->P;
		for (int jy = 0; jy < my; jy++) {
			/* the set-ups of the tile row's columns on this view */
			if (cone)
				set_many(f, mx, k, 0, f->xw + ix0, 0.0, f->yw[iy0 + jy], cs);
			for (int jx = 0; jx < mx; jx++) {
				float *a = acc + ((size_t)jy * (size_t)mx + (size_t)jx) * (size_t)nz;
				if (cone) {
					rc_fpf_col cc;
					int ja, nwu;
					if (use_item(f, c->fill, cs + jx, wu, &ja, &nwu, &cc))
						c->bwd(a, &cc, wu, nwu, img + (size_t)ja * (size_t)nv, nv, wv);
					continue;
				}
				double X[3] = { f->xw[ix0 + jx], f->yw[iy0 + jy], 0.0 };
				for (int z = 0; z < nz; z++) {
					int ja, nwu, ka, nwv;
					X[2] = f->zw[z];
					if (!(f->cyl ? cyl_voxel(f, k, X, wu, &ja, &nwu, wv, &ka, &nwv)
						     : voxel_footprint(f, P, X, wu, &ja, &nwu, wv, &ka, &nwv)))
						continue;
					float s = 0.0f;
					for (int j = 0; j < nwu; j++) {
						const float *o = img + (size_t)(ja + j) * (size_t)nv + ka;
						float r = 0.0f;
						for (int q = 0; q < nwv; q++)
							r += o[q] * wv[q];
						s += wu[j] * r;
					}
					a[z] += s;
				}
			}
		}
	}
	for (int jy = 0; jy < my; jy++)
		for (int jx = 0; jx < mx; jx++) {
			const size_t at = (size_t)(iy0 + jy) * (size_t)v->nx + (size_t)(ix0 + jx);
			const float *a = acc + ((size_t)jy * (size_t)mx + (size_t)jx) * (size_t)nz;
			for (int z = 0; z < nz; z++)
				c->volw[at + (size_t)z * plane] += a[z];
		}
}

int rc_bp_footprint(rc_fpf *f, rc_pool *pool, rc_cpu_isa isa, const float *proj, float *vol, int first, int last,
		    rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(f->g);
	memset(vol, 0, rc_volume_count(v) * sizeof(float));
	if (last <= first)
		return 0;
	if (!f->blk) {
		size_t per = f->view_floats * sizeof(float);
		int n = (int)(RC_FPF_BLOCK_BYTES / per);
		n = n < 1 ? 1 : n > rc_geom_nviews(f->g) ? rc_geom_nviews(f->g) : n;
		f->blk = malloc((size_t)n * per);
		if (!f->blk)
			return rc_fail(err, RC_ENOMEM, "", "out of memory for the footprint back projector's views (%zu MiB)",
				       ((size_t)n * per) >> 20);
		f->blk_views = n;
	}
	struct fpf_ctx c = { .f = f, .proj = proj, .volw = vol,
			     .bwd = bwd_fns[rc_cpu_isa_supported(isa) ? isa : RC_ISA_BASELINE],
			     .fill = fill_fns[rc_cpu_isa_supported(isa) ? isa : RC_ISA_BASELINE] };
	for (int b0 = first; b0 < last; b0 += f->blk_views) {
		c.first = b0;
		c.nblk = last - b0 < f->blk_views ? last - b0 : f->blk_views;
		rc_pool_run(pool, c.nblk, gain_task, &c);
		rc_pool_run(pool, (long)((v->nx + RC_FPF_TILE - 1) / RC_FPF_TILE) * ((v->ny + RC_FPF_TILE - 1) / RC_FPF_TILE),
			    bwd_task, &c);
	}
	return 0;
}

#define RC_FPF_SUFFIX baseline
#include "projectors/proj_footprint_col.h"
