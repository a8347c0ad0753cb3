/* checks: warnings about a job's geometry and data (checks.h). */
#include "plan/checks.h"

#include "util/parfor.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rc_warn_add(rc_warnings *ws, const char *code, const char *fmt, ...)
{
	if (!ws || ws->n >= RC_WARN_MAX)
		return;
	rc_warning *w = &ws->w[ws->n++];
	w->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->message, sizeof w->message, fmt, ap);
	va_end(ap);
}

static int is_2d(const rc_geom *g)
{
	return rc_geom_is_2d(g);
}

/* The pitch of the detector in the plane of the rotation axis: du D/S for
 * a source, du for parallel rays; 0 where unknown (matrices). */
static double magnified_pitch(const rc_geom *g)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	switch (rc_geom_type_of(g)) {
	case RC_GEOM_CONE:
	case RC_GEOM_HELIX:
	case RC_GEOM_FAN:
		return rc_geom_sdd(g) > 0 ? d->du * rc_geom_sid(g) / rc_geom_sdd(g) : 0;
	case RC_GEOM_PARALLEL:
		return d->du;
	default:
		return 0;
	}
}

/* Whether view k's detector sees the point x (mm). */
static int sees(const rc_geom *g, int k, const double x[3])
{
	const rc_detector_desc *d = rc_geom_detector(g);
	double u, v, w;
	if (is_2d(g)) {
		u = rc_geom_plane_u(g, k, x[0], x[1], &w);
		return w > 0 && u >= -0.5 && u <= d->nu - 0.5;
	}
	if (d->shape == RC_DETECTOR_CURVED)
		rc_geom_cyl_project(g, k, x, &u, &v, &w);
	else
		rc_view_project(rc_geom_view(g, k), x, &u, &v, &w);
	/* a helix's views see a point only near its height: rc_geom_new checked
	 * its z coverage, this its fan */
	if (rc_geom_type_of(g) == RC_GEOM_HELIX)
		v = 0;
	return w > 0 && u >= -0.5 && u <= d->nu - 0.5 && v >= -0.5 && v <= d->nv - 0.5;
}

#define FOV_GRID 12
#define FOV_MAX_VIEWS 360

/* The view nearest to view k's angle plus 180 degrees, within two steps of
 * the sampled views; -1 where there is none (a short scan's ends).  A ray
 * measured from the opposite side is the same line (fan and cone: nearly),
 * so a displaced detector that sees a point from one side only still
 * measures it: it is not outside the field of view. */
static int opposite_view(const rc_geom *g, int k, int step)
{
	int nviews = rc_geom_nviews(g), best = -1;
	double want = rc_geom_view(g, k)->angle_rad + M_PI, dbest = 1e300;
	for (int j = 0; j < nviews; j += step) {
		double dj = fabs(remainder(rc_geom_view(g, j)->angle_rad - want, 2 * M_PI));
		if (dj < dbest)
			dbest = dj, best = j;
	}
	double tol = 2.0 * 2 * M_PI * step / (nviews > 0 ? nviews : 1);
	return dbest <= tol ? best : -1;
}

static void check_fov(const rc_geom *g, rc_warnings *ws)
{
	const rc_volume_desc *vol = rc_geom_volume(g);
	int n[3] = { vol->nx < FOV_GRID ? vol->nx : FOV_GRID, vol->ny < FOV_GRID ? vol->ny : FOV_GRID,
		     vol->nz < FOV_GRID ? vol->nz : FOV_GRID };
	int nviews = rc_geom_nviews(g), step = nviews > FOV_MAX_VIEWS ? (nviews + FOV_MAX_VIEWS - 1) / FOV_MAX_VIEWS : 1;
	long total = 0, partial = 0, none = 0;
	int nopp = (nviews + step - 1) / step, *opp = malloc(sizeof(int) * (size_t)(nopp > 0 ? nopp : 1));
	if (!opp)
		return; /* a check, not the job: out of memory skips it */
	for (int k = 0; k < nviews; k += step)
		opp[k / step] = opposite_view(g, k, step);
	for (int a = 0; a < n[2]; a++)
		for (int b = 0; b < n[1]; b++)
			for (int c = 0; c < n[0]; c++) {
				double x[3];
				/* cell centres of a coarse grid over the voxel centres */
				rc_volume_voxel_pos(vol, (c + 0.5) * vol->nx / n[0] - 0.5, (b + 0.5) * vol->ny / n[1] - 0.5,
						    (a + 0.5) * vol->nz / n[2] - 0.5, x);
				int seen = 0, views = 0;
				for (int k = 0; k < nviews; k += step, views++)
					seen += sees(g, k, x) || (opp[k / step] >= 0 && sees(g, opp[k / step], x));
				total++;
				partial += seen < views;
				none += seen == 0;
			}
	free(opp);
	double fp = (double)partial / (double)total, fn = (double)none / (double)total;
	if (fp > RC_CHECK_FOV_PARTIAL)
		rc_warn_add(ws, RC_WARN_FOV,
			    "%.0f %% of the volume lies outside the detector in some views (%.0f %% in every view): "
			    "that part cannot be reconstructed; check the volume's size and voxel size against the "
			    "detector's (both in mm) or make the volume smaller",
			    100 * fp, 100 * fn);
}

void rc_check_geometry(const rc_geom *g, rc_warnings *ws)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *vol = rc_geom_volume(g);
	rc_geom_type t = rc_geom_type_of(g);
	double width = d->nu * d->du, height = is_2d(g) ? 0 : d->nv * d->dv;
	if (width < RC_CHECK_MIN_DETECTOR_MM || (d->nv > 1 && height > 0 && height < RC_CHECK_MIN_DETECTOR_MM))
		rc_warn_add(ws, RC_WARN_DETECTOR_UNITS,
			    "the detector is %.3g x %.3g mm: du_mm and dv_mm are millimetres (a pitch in cm is 10x too "
			    "small)",
			    width, height);
	double mp = magnified_pitch(g), vx = vol->vx > vol->vy ? vol->vx : vol->vy;
	if (mp > 0 && (vx > RC_CHECK_VOXEL_RATIO * mp || vx * RC_CHECK_VOXEL_RATIO < mp))
		rc_warn_add(ws, RC_WARN_VOXEL_UNITS,
			    "the voxel size (%.4g mm) is %.3gx the detector pitch at the rotation axis (%.4g mm); "
			    "usually they are within a factor of %.0f: check volume.voxel_mm and detector du_mm "
			    "(both millimetres)",
			    vx, vx / mp, mp, RC_CHECK_VOXEL_RATIO);
	int nviews = rc_geom_nviews(g);
	if (t != RC_GEOM_MATRICES && nviews > RC_CHECK_RADIANS_VIEWS) {
		double amax = 0;
		for (int k = 0; k < nviews; k++) {
			double a = fabs(rc_geom_view(g, k)->angle_rad) * 180.0 / M_PI;
			amax = a > amax ? a : amax;
		}
		if (amax <= 2 * M_PI + 1e-6)
			rc_warn_add(ws, RC_WARN_ANGLES_RADIANS,
				    "all %d angles lie within %.4g degrees: geometry.angles_deg are degrees; angles in "
				    "radians cover only %.4g degrees",
				    nviews, amax, amax);
	}
	check_fov(g, ws);
}

/* ---- data ------------------------------------------------------------- */

/* sqrt(sum over views and i of (s[k][i] - mean_k s[k][i])^2) / sqrt(views
 * sum over i of mean^2): how much the profiles s[k] (n values) change
 * from view to view, relative to their mean. */
static double variation(const double *s, int nviews, int n)
{
	double num = 0, den = 0;
	for (int i = 0; i < n; i++) {
		double m = 0;
		for (int k = 0; k < nviews; k++)
			m += s[(size_t)k * n + i];
		m /= nviews;
		for (int k = 0; k < nviews; k++) {
			double d = s[(size_t)k * n + i] - m;
			num += d * d;
		}
		den += nviews * m * m;
	}
	return den > 0 ? sqrt(num / den) : 0;
}

static int cmp_f(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static double median_of(float *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof *v, cmp_f);
	return v[n / 2];
}

#define SAMPLE_MAX (1u << 18) /* values for the medians: plenty, and cheap to sort */

/* One pass over the stack, a view per task (rc_parallel_for): everything a
 * view gives lands in that view's slots, so the result does not depend on
 * the threads. */
struct scan {
	const rc_geom *g;
	const float *proj;
	float *wproj;
	int nu, rows, check_lo, check_hi;
	size_t row_every;       /* rows (k * rows + j) sampled: those divisible by it */
	float *vals, *d2;       /* nu slots per sampled row; NAN = no sample */
	double *rsum, *csum;    /* per view: row and column sums (cone), or NULL */
	long long *nonfinite;   /* per view */
	double *sum2, *finite;  /* per view */
	unsigned char *flags;   /* per view: 1 lit, 2 truncated, 4 bright edges */
};

static void scan_view(void *ud, int worker, int k)
{
	(void)worker;
	struct scan *c = ud;
	int nu = c->nu;
	double peak = 0, lo = 0, hi = 0, sum2 = 0, finite = 0;
	long long nf = 0;
	for (int j = 0; j < c->rows; j++) {
		size_t off = rc_geom_row_offset(c->g, k, j), row = (size_t)k * c->rows + j;
		const float *r = c->proj + off;
		float *w = c->wproj ? c->wproj + off : NULL;
		double rs = 0;
		for (int i = 0; i < nu; i++) {
			float x = r[i];
			if (!isfinite(x)) {
				nf++;
				if (w)
					w[i] = 0;
				continue;
			}
			rs += x;
			sum2 += (double)x * x;
			finite++;
			peak = x > peak ? x : peak;
			if (c->csum)
				c->csum[(size_t)k * nu + i] += x;
		}
		if (c->rsum)
			c->rsum[(size_t)k * c->rows + j] = rs;
		lo += isfinite(r[0]) ? r[0] : 0;
		hi += isfinite(r[nu - 1]) ? r[nu - 1] : 0;
		if (c->vals && row % c->row_every == 0) {
			float *v = c->vals + row / c->row_every * nu, *d = c->d2 + row / c->row_every * nu;
			for (int i = 0; i < nu; i++) {
				v[i] = isfinite(r[i]) ? r[i] : NAN;
				d[i] = i > 0 && i + 1 < nu ? fabsf(r[i - 1] - 2 * r[i] + r[i + 1]) : NAN;
			}
		}
	}
	lo /= c->rows;
	hi /= c->rows;
	unsigned char f = 0;
	if (peak > 0) {
		double edge = c->check_lo && c->check_hi ? (lo > hi ? lo : hi) : c->check_lo ? lo : hi;
		f = 1 | (edge > RC_CHECK_EDGE_FRACTION * peak ? 2 : 0) | ((lo < hi ? lo : hi) >= 0.9 * peak ? 4 : 0);
	}
	c->flags[k] = f;
	c->nonfinite[k] = nf;
	c->sum2[k] = sum2;
	c->finite[k] = finite;
}

/* The finite entries of v (n of them) moved to its front: how many. */
static size_t compact(float *v, size_t n)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]))
			v[m++] = v[i];
	return m;
}

void rc_check_data(const rc_geom *g, const float *proj, float *wproj, int threads, rc_data_stats *st,
		   rc_warnings *ws)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	int nu = d->nu, nviews = rc_geom_nviews(g);
	int rows = (int)(rc_geom_view_count(g) / (size_t)nu);
	memset(st, 0, sizeof *st);
	st->first_non_finite_view = -1;
	size_t rows_total = (size_t)nviews * (size_t)rows;
	struct scan c = { .g = g, .proj = proj, .wproj = wproj, .nu = nu, .rows = rows,
			  .row_every = rows_total * (size_t)nu / SAMPLE_MAX + 1 };
	/* an offset detector's inner edge sees the middle of the object by design */
	double shift = d->offset_u / (nu * d->du);
	c.check_lo = shift < 0.25;
	c.check_hi = shift > -0.25;
	size_t slots = (rows_total / c.row_every + 1) * (size_t)nu;
	c.vals = malloc(slots * sizeof(float));
	c.d2 = malloc(slots * sizeof(float));
	/* row and column sums per view (cone: rows along the rotation axis) */
	if (rc_geom_type_of(g) == RC_GEOM_CONE && rows > 1 && nu > 1) {
		c.rsum = calloc(rows_total, sizeof(double));
		c.csum = calloc((size_t)nviews * (size_t)nu, sizeof(double));
	}
	c.nonfinite = calloc((size_t)nviews, sizeof *c.nonfinite);
	c.sum2 = calloc((size_t)nviews, sizeof *c.sum2);
	c.finite = calloc((size_t)nviews, sizeof *c.finite);
	c.flags = calloc((size_t)nviews, 1);
	if (!c.vals || !c.d2) { /* the statistics need no sample to be right; the median does */
		free(c.vals);
		free(c.d2);
		c.vals = c.d2 = NULL;
	}
	if (!c.rsum || !c.csum) {
		free(c.rsum);
		free(c.csum);
		c.rsum = c.csum = NULL;
	}
	int ok = c.nonfinite && c.sum2 && c.finite && c.flags;
	if (!ok)
		goto out; /* out of memory: no data warnings */
	for (int i = 0; c.vals && i < (int)slots; i++)
		c.vals[i] = c.d2[i] = NAN;
	rc_parallel_for(nviews, threads, scan_view, &c);

	double sum2 = 0, finite = 0;
	long lit = 0, truncated = 0, bright = 0;
	for (int k = 0; k < nviews; k++) {
		if (c.nonfinite[k] && st->first_non_finite_view < 0)
			st->first_non_finite_view = k;
		st->non_finite += c.nonfinite[k];
		sum2 += c.sum2[k];
		finite += c.finite[k];
		lit += c.flags[k] & 1;
		truncated += (c.flags[k] & 2) != 0;
		bright += (c.flags[k] & 4) != 0;
	}
	st->rms = finite > 0 ? sqrt(sum2 / finite) : 0;
	if (c.vals) {
		st->median = median_of(c.vals, compact(c.vals, slots));
		/* white noise of sigma gives second differences of sigma sqrt(6);
		 * 1.4826 median|.| is a standard deviation robust to edges */
		st->noise_sigma = 1.4826 * median_of(c.d2, compact(c.d2, slots)) / sqrt(6.0);
	}
	st->truncated_views = lit ? (double)truncated / (double)lit : 0;
	st->bright_edge_views = lit ? (double)bright / (double)lit : 0;
	if (c.rsum) {
		st->row_variation = variation(c.rsum, nviews, rows);
		st->col_variation = variation(c.csum, nviews, nu);
	}
out:
	free(c.vals);
	free(c.d2);
	free(c.rsum);
	free(c.csum);
	free(c.nonfinite);
	free(c.sum2);
	free(c.finite);
	free(c.flags);
	if (!ok)
		return;

	if (st->non_finite)
		rc_warn_add(ws, RC_WARN_NON_FINITE,
			    "%lld projection values are NaN or infinite (the first in view %d)%s: check the conversion "
			    "to line integrals (log of 0 or of a negative count)",
			    st->non_finite, st->first_non_finite_view, wproj ? "; they were taken as 0" : "");
	int pre_log = st->median > RC_CHECK_PRE_LOG_MEDIAN || st->bright_edge_views > 0.5;
	if (pre_log)
		rc_warn_add(ws, RC_WARN_PRE_LOG,
			    "the projections look like detector intensities, not line integrals: median %.4g, and %.0f "
			    "%% of views are as bright at the detector's edges (air) as anywhere; send -ln(I/I0) "
			    "(docs/api.md, \"Warnings\")",
			    st->median, 100 * st->bright_edge_views);
	else if (st->row_variation > RC_CHECK_AXIS_RATIO * st->col_variation &&
		 st->row_variation > RC_CHECK_AXIS_MIN)
		rc_warn_add(ws, RC_WARN_TRANSPOSED,
			    "the detector rows' sums change from view to view (by %.3g) more than its columns' (%.3g): "
			    "the rotation axis runs along the rows, so the detector looks transposed; the stack is "
			    "[view][row v][column u] with u fastest and rows along the rotation axis (docs/api.md)",
			    st->row_variation, st->col_variation);
	if (!pre_log && st->truncated_views > RC_CHECK_EDGE_VIEWS)
		rc_warn_add(ws, RC_WARN_TRUNCATED,
			    "in %.0f %% of views the line integrals at the detector's edge are above %.0f %% of the "
			    "view's peak: the object is wider than the detector (truncated), which FDK shows as a "
			    "bright rim and cupping",
			    100 * st->truncated_views, 100 * RC_CHECK_EDGE_FRACTION);
}

void rc_check_residual(double rel, const rc_data_stats *st, rc_warnings *ws)
{
	if (!isfinite(rel))
		return;
	double noise = st && st->rms > 0 ? st->noise_sigma / st->rms : 0;
	double limit = RC_CHECK_RESIDUAL_NOISE * noise;
	if (limit < RC_CHECK_RESIDUAL_FLOOR)
		limit = RC_CHECK_RESIDUAL_FLOOR;
	if (rel > limit)
		rc_warn_add(ws, RC_WARN_RESIDUAL,
			    "the relative residual ||p - Ax|| / ||p|| is %.3g, above the %.3g that the data's noise "
			    "(%.3g of its rms) explains: the data does not fit the geometry (or an iterative job "
			    "stopped far from converged); check the angles, the detector's orientation (rows and "
			    "columns, row 0 at the lowest z) and its offsets",
			    rel, limit, noise);
}
