/* extend: the z reach of the rays through the asked volume, and whether the
 * data show mass there (extend.h). */
#include "plan/extend.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/rc_io.h"

/* columns sampled per detector row, and rows per view at most: the
 * reach's extremes come from the rows at the edges of the volume's shadow
 * (all rows up to this many) and vary slowly along a row */
#define EXT_COLUMNS 33
#define EXT_ROWS 512
/* the memory prediction's coarser scan of a non-cone geometry */
#define BOUND_VIEWS 720
#define BOUND_ROWS 48
#define BOUND_PAD 2

/* The segment of ray o + t d (t >= 0) inside the column [x0, x1] x [y0,
 * y1]: 0 where it misses, else 1 and its z at both ends. */
static int column_segment(const double o[3], const double d[3], const double lo[2], const double hi[2],
			  double *za, double *zb)
{
	double t0 = 0.0, t1 = INFINITY;
	for (int a = 0; a < 2; a++) {
		if (fabs(d[a]) < 1e-300) {
			if (o[a] < lo[a] || o[a] > hi[a])
				return 0;
			continue;
		}
		double ta = (lo[a] - o[a]) / d[a], tb = (hi[a] - o[a]) / d[a];
		if (ta > tb) {
			double t = ta;
			ta = tb;
			tb = t;
		}
		t0 = fmax(t0, ta);
		t1 = fmin(t1, tb);
	}
	if (!(t1 > t0) || !isfinite(t1))
		return 0;
	*za = o[2] + t0 * d[2];
	*zb = o[2] + t1 * d[2];
	return 1;
}

/* Slices of vz beyond an edge by dz (>= 0) mm, the last one partly. */
static int slices_beyond(double dz, double vz)
{
	if (!(dz > 1e-6 * vz))
		return 0;
	double n = ceil(dz / vz - 1e-9);
	return n > 65536 ? 65536 : (int)n;
}

/* A side's slices within RC_EXTEND_MAX_SIDE times the asked nz. */
static int cap_side(int n, int nz)
{
	double most = RC_EXTEND_MAX_SIDE * nz;
	return n > most ? (int)most : n;
}

/* What the sampled rays found: the reach of those through the asked
 * volume, the data each kind carries. */
struct reach {
	const rc_geom *g;
	const float *proj;
	int fd;     /* >= 0: the stack's file instead of proj, a sampled row read at a time into row */
	float *row;
	float *view; /* fd's: every row sampled, a whole view read at once (view_k's) */
	int view_k;
	int bad;    /* errno of a read that failed */
	double lo[2], hi[2], Z0, Z1;
	double zmin, zmax, sum_in, sum_out;
	long long n_in, n_out;
};

/* The rays of row j of view k at cols columns: their reach where they
 * cross the asked volume, their data; 1 when one crossed.  *a, *b: the z
 * range of every ray of the row inside the column (*hit 0: none there). */
static int sample_row(struct reach *r, int k, int j, int cols, double *a, double *b, int *hit)
{
	int nu = rc_geom_detector(r->g)->nu, crossed = 0;
	*hit = 0;
	*a = INFINITY;
	*b = -INFINITY;
	const float *data = r->proj ? r->proj + rc_geom_row_offset(r->g, k, j) : NULL;
	if (r->view && !r->bad) {
		/* its rows contiguous (cone, matrices): one read per view */
		size_t n = (size_t)nu * (size_t)rc_geom_detector(r->g)->nv;
		if (r->view_k != k) {
			ssize_t got = rc_io_read_full(r->fd, r->view, sizeof(float) * n,
						      (off_t)(sizeof(float) * rc_geom_row_offset(r->g, k, 0)));
			if (got != (ssize_t)(sizeof(float) * n))
				r->bad = got < 0 ? errno : EIO;
			for (size_t i = 0; i < n; i++)
				r->view[i] = isfinite(r->view[i]) ? r->view[i] : 0.0f;
			r->view_k = k;
		}
		data = r->bad ? NULL : r->view + (size_t)j * (size_t)nu;
	} else if (r->fd >= 0 && !r->bad) {
		/* non-finite values as 0, as the in-memory run reads them (checks.h) */
		ssize_t got = rc_io_read_full(r->fd, r->row, sizeof(float) * (size_t)nu,
					      (off_t)(sizeof(float) * rc_geom_row_offset(r->g, k, j)));
		if (got != (ssize_t)(sizeof(float) * (size_t)nu))
			r->bad = got < 0 ? errno : EIO;
		for (int i = 0; i < nu; i++)
			r->row[i] = isfinite(r->row[i]) ? r->row[i] : 0.0f;
		data = r->bad ? NULL : r->row;
	}
	for (int c = 0; c < cols; c++) {
		int i = cols > 1 ? (int)lround((double)c * (nu - 1) / (cols - 1)) : 0;
		double o[3], d[3], za, zb;
		rc_geom_ray(r->g, k, i, j, 0, o, d);
		if (!column_segment(o, d, r->lo, r->hi, &za, &zb))
			continue;
		double lo = fmin(za, zb), hi = fmax(za, zb);
		*hit = 1;
		*a = fmin(*a, lo);
		*b = fmax(*b, hi);
		float p = data ? data[i] : 0.0f;
		if (hi > r->Z0 && lo < r->Z1) { /* through the asked volume */
			crossed = 1;
			r->zmin = fmin(r->zmin, lo);
			r->zmax = fmax(r->zmax, hi);
			if (isfinite(p))
				r->sum_in += p, r->n_in++;
		} else if (isfinite(p)) {
			r->sum_out += p, r->n_out++;
		}
	}
	return crossed;
}

/* Which rays a scan samples: every vstep-th view (the last always), rows
 * at most, cols per row; pad: where a sampled row crosses the asked
 * volume and its sampled neighbour does not, the neighbour's range counts
 * too (the rows between them, not sampled, lie within the two). */
struct sampling {
	int vstep, rows, cols, pad;
};

static void scan(struct reach *r, const struct sampling *sp)
{
	const rc_detector_desc *det = rc_geom_detector(r->g);
	int nviews = rc_geom_nviews(r->g);
	int cols = det->nu < sp->cols ? det->nu : sp->cols;
	int rstep = (det->nv + sp->rows - 1) / sp->rows;
	/* rows skipped between two sampled ones may cross the slab: where the
	 * crossing changes, both rows' reach counts (the rows between lie
	 * between their rays) */
	int pad = sp->pad || rstep > 1;
	for (int k = 0; k < nviews; k = k + sp->vstep < nviews || k == nviews - 1 ? k + sp->vstep : nviews - 1) {
		double pa = 0, pb = 0;
		int pcross = -1, phit = 0;
		for (int j = 0;; j = j + rstep < det->nv ? j + rstep : det->nv - 1) {
			double a, b;
			int hit, cross = sample_row(r, k, j, cols, &a, &b, &hit);
			if (pad && hit && phit && pcross >= 0 && cross != pcross) {
				r->zmin = fmin(r->zmin, fmin(a, pa));
				r->zmax = fmax(r->zmax, fmax(b, pb));
			}
			pa = a, pb = b, pcross = cross, phit = hit;
			if (j == det->nv - 1)
				break;
		}
		if (k == nviews - 1)
			break;
	}
}

static void reach_init(struct reach *r, const rc_geom *g, const float *proj)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	memset(r, 0, sizeof *r);
	r->g = g;
	r->proj = proj;
	r->fd = -1;
	r->lo[0] = v->cx - 0.5 * v->nx * v->vx, r->hi[0] = v->cx + 0.5 * v->nx * v->vx;
	r->lo[1] = v->cy - 0.5 * v->ny * v->vy, r->hi[1] = v->cy + 0.5 * v->ny * v->vy;
	r->Z0 = r->zmin = v->cz - 0.5 * v->nz * v->vz;
	r->Z1 = r->zmax = v->cz + 0.5 * v->nz * v->vz;
}

/* rc_extent_plan from proj or, fd >= 0, the stack's file (1 when a read
 * failed, errno in *bad) */
static int plan(const rc_geom *g, const float *proj, int fd, rc_extend mode, rc_extent *e, int *bad)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	memset(e, 0, sizeof *e);
	e->run = *v;
	e->mass_beyond = -1;
	*bad = 0;
	if (rc_geom_is_2d(g) || mode == RC_EXTEND_OFF)
		return 0;
	struct reach r;
	reach_init(&r, g, proj);
	const rc_detector_desc *det = rc_geom_detector(g);
	if (fd >= 0) {
		/* nv <= EXT_ROWS: every row sampled, a view per read (at most a
		 * chunk of the out-of-core run's, not yet touched then) */
		r.fd = fd;
		r.view_k = -1;
		if (det->nv <= EXT_ROWS ? !(r.view = malloc(sizeof(float) * (size_t)det->nu * (size_t)det->nv))
					: !(r.row = malloc(sizeof(float) * (size_t)det->nu))) {
			*bad = ENOMEM;
			return 1;
		}
	}
	const struct sampling every = { 1, EXT_ROWS, EXT_COLUMNS, 0 };
	scan(&r, &every);
	free(r.row);
	free(r.view);
	if (r.bad) {
		*bad = r.bad;
		return 1;
	}
	double Z0 = r.Z0, Z1 = r.Z1, zmin = r.zmin, zmax = r.zmax;
	if ((proj || fd >= 0) && r.n_out > 0)
		e->mass_beyond = r.sum_out / (double)r.n_out >
				 RC_EXTEND_MASS_FRACTION * fmax(r.sum_in / (double)(r.n_in ? r.n_in : 1), 0.0);
	e->below = slices_beyond(Z0 - zmin, v->vz);
	e->above = slices_beyond(zmax - Z1, v->vz);
	if ((!e->below && !e->above) || (mode == RC_EXTEND_AUTO && e->mass_beyond == 0))
		return 0;
	/* at most the asked nz each side (RC_EXTEND_MAX_SIDE), and the
	 * geometry's limit on nz (rc_geom_new): the slabs beyond cut evenly */
	int below = cap_side(e->below, v->nz), above = cap_side(e->above, v->nz);
	while ((long long)v->nz + below + above > 65536) {
		if (below >= above)
			below--;
		else
			above--;
	}
	e->run.nz = v->nz + below + above;
	e->run.cz = v->cz + 0.5 * (above - below) * v->vz;
	e->z0 = below;
	return 0;
}

void rc_extent_plan(const rc_geom *g, const float *proj, rc_extend mode, rc_extent *e)
{
	int bad;
	plan(g, proj, -1, mode, e, &bad);
}

static int decide(const rc_recon_spec *s, const rc_geom *ga, const float *proj, int fd, rc_extent *e, rc_err *err)
{
	memset(e, 0, sizeof *e);
	e->run = s->vol;
	e->mass_beyond = -1;
	if (s->algo.name == RC_ALGO_FDK)
		return 0;
	int bad;
	if (plan(ga, proj, fd, s->algo.extend, e, &bad)) /* 2-D and off: the asked volume */
		return rc_fail(err, bad == ENOMEM ? RC_ENOMEM : RC_EIO, "",
			       "cannot read the stack's rows for the long object's verdict: %s", strerror(bad));
	rc_geom *gx = NULL;
	if (e->run.nz != s->vol.nz && rc_geom_new(&s->geom, &e->run, NULL, &gx, NULL)) {
		e->run = s->vol;
		e->z0 = 0;
	}
	rc_geom_free(gx);
	return 0;
}

void rc_extent_decide(const rc_recon_spec *s, const rc_geom *ga, const float *proj, rc_extent *e)
{
	decide(s, ga, proj, -1, e, NULL);
}

int rc_extent_decide_file(const rc_recon_spec *s, const rc_geom *ga, int fd, rc_extent *e, rc_err *err)
{
	return decide(s, ga, NULL, fd, e, err);
}

int rc_extent_of(const rc_recon_spec *s, const float *proj, rc_extent *e, rc_err *err)
{
	memset(e, 0, sizeof *e);
	e->run = s->vol;
	e->mass_beyond = -1;
	if (s->algo.name == RC_ALGO_FDK || s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL ||
	    s->algo.extend == RC_EXTEND_OFF)
		return 0;
	rc_geom *g = NULL;
	int rc = rc_geom_new(&s->geom, &s->vol, &s->limits, &g, err);
	if (!rc)
		rc_extent_decide(s, g, proj, e);
	rc_geom_free(g);
	return rc;
}

/* The cone's bound (extend.h): the rays from a source at distance D, z 0,
 * through the column of x-y radius R reach (D + R) / (D - R) of a z edge
 * beyond the source's plane, and no higher than the detector's top row
 * seen from the column's far side. */
static int cone_bound(const rc_recon_spec *s)
{
	const rc_volume_desc *v = &s->vol;
	const rc_geom_spec *g = &s->geom;
	double ex = fabs(v->cx) + 0.5 * v->nx * v->vx, ey = fabs(v->cy) + 0.5 * v->ny * v->vy;
	double R = sqrt(ex * ex + ey * ey), D = g->source_isocenter_mm, S = g->source_detector_mm;
	if (!(D > R) || !(S > 0) || !(v->vz > 0))
		return v->nz;
	double f = (D + R) / (D - R);
	double top = (0.5 * g->det.nv * g->det.dv + fabs(g->det.offset_v)) * (D + R) / S;
	double Z0 = v->cz - 0.5 * v->nz * v->vz, Z1 = v->cz + 0.5 * v->nz * v->vz;
	double zmax = fmax(Z1, fmin(fmax(Z1 * f, Z1 / f), top));
	double zmin = fmin(Z0, fmax(fmin(Z0 * f, Z0 / f), -top));
	long long n = (long long)v->nz + cap_side(slices_beyond(Z0 - zmin, v->vz), v->nz) +
		      cap_side(slices_beyond(zmax - Z1, v->vz), v->nz);
	return n > 65536 ? 65536 : (int)n;
}

int rc_extent_bound_nz(const rc_recon_spec *s)
{
	if (s->algo.name == RC_ALGO_FDK || s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL ||
	    s->algo.extend == RC_EXTEND_OFF || s->vol.nz < 1)
		return s->vol.nz;
	if (s->geom.type == RC_GEOM_CONE)
		return cone_bound(s);
	if (!s->geom.matrices && !s->geom.angles_deg)
		return s->vol.nz;
	rc_geom *g = NULL;
	if (rc_geom_new(&s->geom, &s->vol, NULL, &g, NULL))
		return s->vol.nz;
	/* at job creation: a coarser scan than the run's (at most
	 * BOUND_VIEWS views, BOUND_ROWS rows, 9 columns: tens of ms), padded
	 * by the rows beside the last crossing ones and BOUND_PAD slices */
	struct reach r;
	reach_init(&r, g, NULL);
	int nviews = rc_geom_nviews(g);
	const struct sampling coarse = { (nviews + BOUND_VIEWS - 1) / BOUND_VIEWS, BOUND_ROWS, 9, 1 };
	scan(&r, &coarse);
	rc_geom_free(g);
	int below = slices_beyond(r.Z0 - r.zmin, s->vol.vz), above = slices_beyond(r.zmax - r.Z1, s->vol.vz);
	below = below ? cap_side(below + BOUND_PAD, s->vol.nz) : 0;
	above = above ? cap_side(above + BOUND_PAD, s->vol.nz) : 0;
	long long n = (long long)s->vol.nz + below + above;
	return n > 65536 ? 65536 : (int)n;
}
