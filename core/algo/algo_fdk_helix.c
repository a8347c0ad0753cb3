/*
 * algo_fdk_helix: FDK on a helix (fdk_helix.h), the Tam-Danielsson
 * window form of helical FDK (docs/fdk.md has the argument and the cost).
 *
 * Every view is weighted, ramp-filtered along its detector rows and scaled
 * as the circular FDK's (algo_fdk.c's q = dbeta K h * (c w p)), with one
 * difference: the redundancy weight w is not a full scan's 1/2 but the
 * Tam-Danielsson window (rc_geom_helix_window), 1 between the projections
 * of the helix turns before and after the source and 0 beyond, its edges
 * smoothed over RC_HELIX_EDGE_ROWS rows either side (sin^2) so that the
 * ramp filter does not turn a cut row into streaks.  A point is seen
 * through the window exactly over its PI interval, on which every line
 * through it in the plane of rotation is measured once: the weight that
 * a short scan's Parker weight gives a circular one, here without a
 * per-voxel normalisation, so the back projection is the circular one's
 * (RC_BP_VOXEL, 1/w^2 or a cylinder's 1/L^2).  The window is the same on
 * every view (it depends on the fan angle and the lead only): one weight
 * table.
 *
 * Slabs.  The volume is reconstructed in slabs of slices along z (eight
 * times the window's z reach high), in the
 * order of the scan; a slab takes the views whose window can reach it
 * (sources within the window's z reach of the slab, the window's largest
 * row times (D + R) / S), filtered once each: the filtered views are kept
 * in one buffer that slides along the scan (views no longer needed are
 * dropped from its front, new ones filtered onto its end), so memory is
 * the views of one slab, not of the scan.  Each slab is back-projected by
 * the CPU engine on a geometry of that slab and those views
 * (rc_geom_slab: the same matrices), writing its slices of the volume.
 *
 * Streaming (hooks->views).  The views arrive one by one, in any order, into
 * proj; a slab waits until every view of its [k0, k1) has arrived, then is
 * filtered and back-projected exactly as in a batch run (its slabs are
 * thinner, below, but the views a thinner slab leaves out add only zeros
 * to its voxels: the streamed volume is the batch one).  Slabs go in the
 * scan's order, so the volume is final behind the source: after each slab
 * the run reports how far (final_slices, final_z_mm) and shows the volume
 * (iterate), its slabs not yet reached zero.
 */
#include "algo/fdk_helix.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_util.h"
#include "algo/filter.h"
#include "backend/cpu/engine_cpu.h"
#include "util/parfor.h"

struct hx {
	const rc_geom *g;
	const float *proj;
	size_t view_n;   /* floats per view */
	int row0, nrows; /* the rows the window reaches: all the views keep */
	size_t keep_n;   /* floats per kept view (nrows * nu) */
	float *filt;     /* views first..first+held-1, filtered */
	int first, held;
	const int *todo; /* views to filter in this round */
	rc_ramp *ramp;
	rc_ramp_work **work;
	float *pre;      /* cosine times window, per pixel (every view alike) */
	double *scale;   /* dbeta_k K per view */
	const atomic_int *cancel;
};

int rc_fdk_helix_suits(const rc_geom *g, rc_err *err)
{
	int dir = 0, rc = rc_fdk_displaced(g, RC_SCAN_FULL, &dir, NULL, err);
	if (rc)
		return rc;
	if (dir)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.detector.offset_u_mm",
			       "fdk on a helix needs a detector centred on the axis (offset_u_mm %g mm displaces it): "
			       "a displaced detector does not see every voxel over its PI interval; use an "
			       "iterative algorithm",
			       rc_geom_detector(g)->offset_u);
	return 0;
}

static double smooth_step(double x) /* 0 below 0, 1 above 1, sin^2 between */
{
	if (x <= 0)
		return 0;
	if (x >= 1)
		return 1;
	double s = sin(M_PI / 2 * x);
	return s * s;
}

int rc_fdk_helix_npi(const rc_geom *g)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *v = rc_geom_volume(g);
	double gm = rc_geom_helix_gamma_max(g), D = rc_geom_sid(g), S = rc_geom_sdd(g), R = D * sin(gm);
	double top = (d->nv - 1) / 2.0 * d->dv + d->offset_v - d->dv;
	double bottom = -(d->nv - 1) / 2.0 * d->dv + d->offset_v + d->dv;
	double zmin = INFINITY, zmax = -INFINITY;
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		zmin = fmin(zmin, rc_geom_view(g, k)->src[2]);
		zmax = fmax(zmax, rc_geom_view(g, k)->src[2]);
	}
	double z0 = v->cz - (v->nz - 1) / 2.0 * v->vz, z1 = v->cz + (v->nz - 1) / 2.0 * v->vz;
	for (int n = 5; n > 1; n -= 2) {
		int fits = 1;
		for (int i = 0; i <= 64 && fits; i++) {
			double lo, hi;
			rc_geom_helix_window(g, n, -gm + 2 * gm * i / 64.0, &lo, &hi);
			fits = hi <= top && lo >= bottom;
		}
		double m = fabs(rc_geom_pitch(g)) * (n / 2.0 + gm / M_PI) + d->dv * (D + R) / S;
		if (fits && z0 >= zmin + m && z1 <= zmax - m)
			return n;
	}
	return 1;
}

/* pre: the cosine weight times the smoothed n-PI window over n, pixel (i, j). */
static void window_table(const rc_geom *g, int npi, float *pre)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	double S = rc_geom_sdd(g), e = RC_HELIX_EDGE_ROWS * d->dv;
	for (int i = 0; i < d->nu; i++) {
		double um = (i - (d->nu - 1) / 2.0) * d->du + d->offset_u;
		int curved = d->shape == RC_DETECTOR_CURVED;
		double gamma = rc_geom_column_gamma(g, i), lo, hi;
		rc_geom_helix_window(g, npi, gamma, &lo, &hi);
		for (int j = 0; j < d->nv; j++) {
			double vm = (j - (d->nv - 1) / 2.0) * d->dv + d->offset_v;
			double c = curved ? cos(gamma) * S / sqrt(S * S + vm * vm) : S / sqrt(S * S + um * um + vm * vm);
			double w = smooth_step((vm - lo + e) / (2 * e)) * smooth_step((hi + e - vm) / (2 * e));
			pre[(size_t)j * d->nu + i] = (float)(c * w / npi);
		}
	}
}

static void filter_one(void *ud, int worker, int i)
{
	struct hx *h = ud;
	if (h->cancel && atomic_load(h->cancel))
		return;
	int k = h->todo[i];
	const rc_detector_desc *d = rc_geom_detector(h->g);
	size_t r0 = (size_t)h->row0 * (size_t)d->nu;
	rc_ramp_apply(h->ramp, h->work[worker], h->proj + (size_t)k * h->view_n + r0, (size_t)d->nu,
		      h->filt + (size_t)(k - h->first) * h->keep_n, (size_t)d->nu, h->nrows, h->pre + r0,
		      (float)h->scale[k]);
}

/* Views k0..k1-1 whose window reaches slices iz0..iz1-1: sources within
 * reach of the slab's z (the sources' z is monotone along the scan). */
static void slab_views(const rc_geom *g, int iz0, int iz1, double reach, int *k0, int *k1)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	double za = v->cz + (iz0 - (v->nz - 1) / 2.0) * v->vz - reach;
	double zb = v->cz + (iz1 - 1 - (v->nz - 1) / 2.0) * v->vz + reach;
	int n = rc_geom_nviews(g), a = n, b = 0;
	for (int k = 0; k < n; k++) {
		double z = rc_geom_view(g, k)->src[2];
		if (z >= za && z <= zb) {
			a = k < a ? k : a;
			b = k + 1;
		}
	}
	*k0 = a;
	*k1 = b > a ? b : a;
}

/* a stream reports the views coming in at most this often (and after
 * every slab) */
#define HX_STREAM_SAY_S 0.25

/* A stream's state: the views arrived so far. */
struct hx_stream {
	const rc_algo_hooks *h;
	unsigned char *arrived;
	int *list, given, n, up, nfinal;
	int told; /* views in at the last progress */
	const rc_volume_desc *v;
	double t0, said; /* when the last progress went out */
};

/* Progress of a stream: views in, slices final (up: from iz 0). */
static void stream_report(struct hx_stream *st, int done)
{
	if (!st->h->progress)
		return;
	const rc_volume_desc *v = st->v;
	double zlo = v->cz - v->nz / 2.0 * v->vz;
	st->said = rc_now_s();
	st->told = st->given;
	rc_progress pr = { .iteration = done, .of = 1, .elapsed_s = st->said - st->t0, .views_done = st->given,
			   .views_of = st->n, .zfinal = 1, .final_slices = st->nfinal,
			   .final_z_mm = st->up ? zlo + st->nfinal * v->vz : zlo + (v->nz - st->nfinal) * v->vz };
	st->h->progress(st->h->ud, &pr);
}

/* Waits until views k0..k1-1 have all arrived (every view: 0, n). */
static int await_views(struct hx_stream *st, int k0, int k1, rc_err *err)
{
	for (;;) {
		int k = k0;
		while (k < k1 && st->arrived[k])
			k++;
		if (k == k1 || st->given == st->n)
			return 0;
		if (rc_algo_cancelled(st->h))
			return rc_fail(err, RC_ECANCELLED, "", "the reconstruction was cancelled");
		int got = st->h->views(st->h->ud, 1.0, st->list, st->n - st->given, err);
		if (got < 0)
			return got;
		for (int i = 0; i < got; i++) {
			int v = st->list[i];
			if (v < 0 || v >= st->n || st->arrived[v])
				return rc_fail(err, RC_EINTERNAL, "", "streamed view %d is not a new view of the job", v);
			st->arrived[v] = 1;
		}
		st->given += got;
		/* the views coming in, at most every HX_STREAM_SAY_S; and once a
		 * wait for more ends empty, so the last views in are not left
		 * unsaid while the upload pauses */
		if ((got && rc_now_s() - st->said >= HX_STREAM_SAY_S) || (!got && st->given != st->told))
			stream_report(st, 0);
	}
}

int rc_fdk_helix_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		     const rc_algo_hooks *hooks, rc_fdk_helix_stats *stats, rc_err *err)
{
	double t0 = rc_now_s();
	const rc_geom *g = b->geom;
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *v = rc_geom_volume(g);
	const int n = rc_geom_nviews(g);
	struct hx h = { .g = g, .proj = proj, .view_n = (size_t)d->nu * (size_t)d->nv,
			.cancel = hooks ? hooks->cancel : NULL };
	int nwork = rc_parallel_threads(0), rc, *todo = NULL;
	rc_vec *vv = NULL;
	struct hx_stream st = { .h = hooks, .n = n, .v = v, .t0 = t0, .said = t0 };
	if (stats)
		memset(stats, 0, sizeof *stats);
	if ((rc = rc_fdk_helix_suits(g, err)))
		return rc;
	if (n < 2)
		return rc_fail(err, RC_EINVAL, "geometry.angles", "fdk needs at least 2 views (got %d)", n);
	/* the window's z reach from a source: its largest row at the far side */
	int npi = rc_fdk_helix_npi(g);
	double gm = rc_geom_helix_gamma_max(g), R = rc_geom_sid(g) * sin(gm), wmax = 0;
	for (int i = 0; i <= 32; i++) {
		double lo, hi;
		rc_geom_helix_window(g, npi, -gm + 2 * gm * i / 32.0, &lo, &hi);
		wmax = fmax(wmax, fmax(-lo, hi));
	}
	double reach = (wmax + RC_HELIX_EDGE_ROWS * d->dv) * (rc_geom_sid(g) + R) / rc_geom_sdd(g) + 0.5 * v->vz;
	/* the rows the window and its edge reach (and one for the bilinear
	 * sample): the rest weigh 0, are neither filtered nor kept, and the
	 * slab's detector is these rows, so a voxel column's back projection
	 * runs over the window's height only */
	double rlo = ((-wmax - RC_HELIX_EDGE_ROWS * d->dv) - d->offset_v) / d->dv + (d->nv - 1) / 2.0;
	double rhi = ((wmax + RC_HELIX_EDGE_ROWS * d->dv) - d->offset_v) / d->dv + (d->nv - 1) / 2.0;
	h.row0 = (int)floor(rlo) - 1;
	h.row0 = h.row0 < 0 ? 0 : h.row0;
	int row1 = (int)ceil(rhi) + 1;
	row1 = row1 > d->nv - 1 ? d->nv - 1 : row1;
	h.nrows = row1 - h.row0 + 1;
	h.keep_n = (size_t)h.nrows * (size_t)d->nu;
	/* slabs eight times the window's reach high (fewer where that holds
	 * too many views, below): each view of a slab sets
	 * up every voxel column once (its u and depth) for the window's height
	 * of voxels, and a slab's views are (2 reach + T) / T times those its
	 * voxels need (bench-helix, CPU time per voxel at pitch factor 1:
	 * 0.64 us at 2 reaches, 0.56 at 4, 0.48 at 8 and 16); at least enough
	 * voxels per view that the back projection outweighs copying the view */
	int min_nzs = (int)((4 * h.keep_n + (size_t)v->nx * v->ny - 1) / ((size_t)v->nx * v->ny));
	int nzs = 1, nslabs = 1, cap = 0;
	/* thinner (down to two reaches) where a slab's filtered views would
	 * exceed RC_HELIX_SLAB_BYTES and a quarter of the stack; a stream's
	 * are two reaches, so that a slab is final soon after its last view
	 * (the cost: 0.64 us a voxel against 0.48) */
	for (int f = hooks && hooks->views ? 2 : 8; f >= 2; f /= 2) {
		nzs = (int)ceil(f * reach / v->vz);
		nzs = nzs < min_nzs ? min_nzs : nzs;
		nzs = nzs < 1 ? 1 : nzs > v->nz ? v->nz : nzs;
		nslabs = (v->nz + nzs - 1) / nzs;
		cap = 0;
		for (int s = 0; s < nslabs; s++) {
			int k0, k1;
			slab_views(g, s * nzs, s * nzs + nzs < v->nz ? s * nzs + nzs : v->nz, reach, &k0, &k1);
			cap = k1 - k0 > cap ? k1 - k0 : cap;
		}
		double held = (double)cap * h.keep_n * sizeof(float), stack = (double)n * h.view_n * sizeof(float);
		if (held <= RC_HELIX_SLAB_BYTES || held <= stack / 4)
			break;
	}
	/* the scan's order: slabs along the sources' z */
	int up = rc_geom_view(g, n - 1)->src[2] >= rc_geom_view(g, 0)->src[2];
	st.up = up;
	h.scale = malloc(sizeof(double) * (size_t)n);
	h.pre = malloc(sizeof(float) * h.view_n);
	h.filt = malloc(sizeof(float) * h.keep_n * (size_t)(cap > 0 ? cap : 1));
	h.work = calloc((size_t)nwork, sizeof *h.work);
	todo = malloc(sizeof(int) * (size_t)(cap > 0 ? cap : 1));
	if (hooks && hooks->views) {
		st.arrived = calloc((size_t)n, 1);
		st.list = malloc(sizeof(int) * (size_t)n);
	}
	if (!h.scale || !h.pre || !h.filt || !h.work || !todo || (hooks && hooks->views && (!st.arrived || !st.list))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the helical FDK's %d filtered views (%zu MiB)", cap,
			     (h.keep_n * (size_t)cap * sizeof(float)) >> 20);
		goto out;
	}
	double arc = d->shape == RC_DETECTOR_CURVED ? d->du / rc_geom_sdd(g) : 0.0;
	if ((rc = rc_ramp_new_arc(d->nu, h.nrows, p->window, p->cutoff, arc, &h.ramp, err)))
		goto out;
	for (int t = 0; t < nwork; t++)
		if ((rc = rc_ramp_work_new(h.ramp, &h.work[t], err)))
			goto out;
	window_table(g, npi, h.pre);
	if (stats) {
		stats->npi = npi;
		stats->view_bytes = h.keep_n * sizeof(float);
	}
	/* dbeta: the arc between the midpoints to a view's neighbours (the
	 * angles are monotone: helix.c) */
	double K = rc_geom_sid(g) * rc_geom_sdd(g) / d->du;
	for (int k = 0; k < n; k++) {
		double a = rc_geom_view(g, k > 0 ? k - 1 : 0)->angle_rad, c = rc_geom_view(g, k)->angle_rad;
		double e = rc_geom_view(g, k < n - 1 ? k + 1 : n - 1)->angle_rad;
		double lo = k > 0 ? 0.5 * (a + c) : c - 0.5 * (e - c), hi = k < n - 1 ? 0.5 * (c + e) : c + 0.5 * (c - a);
		h.scale[k] = fabs(hi - lo) * K;
	}
	h.todo = todo;
	h.first = 0;
	h.held = 0;
	size_t plane = (size_t)v->nx * v->ny;
	/* a stream shows the volume as its slabs finish: the rest is zero */
	if (st.arrived) {
		memset(vol, 0, sizeof(float) * rc_volume_count(v));
		if ((rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, vol, &vv, err)))
			goto out;
	}
	for (int si = 0; si < nslabs && !rc; si++) {
		int s = up ? si : nslabs - 1 - si;
		int iz0 = s * nzs, iz1 = iz0 + nzs < v->nz ? iz0 + nzs : v->nz, k0, k1;
		if (rc_algo_cancelled(hooks)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "the reconstruction was cancelled");
			break;
		}
		slab_views(g, iz0, iz1, reach, &k0, &k1);
		if (st.arrived && (rc = await_views(&st, k0, k1, err)))
			break;
		if (k1 <= k0) { /* helix.c's coverage makes this unreachable */
			memset(vol + (size_t)iz0 * plane, 0, sizeof(float) * plane * (size_t)(iz1 - iz0));
			st.nfinal += iz1 - iz0;
			continue;
		}
		/* slide: keep the held views this slab needs, filter the rest */
		int keep_a = k0 > h.first ? k0 : h.first, keep_b = h.first + h.held < k1 ? h.first + h.held : k1;
		if (keep_b > keep_a && keep_a > k0)
			keep_b = keep_a; /* the slab starts before the held ones: refilter (does not occur in scan order) */
		if (keep_b > keep_a)
			memmove(h.filt, h.filt + (size_t)(keep_a - h.first) * h.keep_n,
				sizeof(float) * h.keep_n * (size_t)(keep_b - keep_a));
		int nt = 0;
		h.first = k0;
		h.held = k1 - k0;
		for (int k = k0; k < k1; k++)
			if (!(keep_b > keep_a && k >= keep_a && k < keep_b))
				todo[nt++] = k;
		rc_parallel_for(nt, nwork, filter_one, &h);
		if (rc_algo_cancelled(hooks)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "the reconstruction was cancelled");
			break;
		}
		rc_volume_desc sv = *v;
		sv.nz = iz1 - iz0;
		sv.cz = v->cz + ((iz0 + iz1 - 1) / 2.0 - (v->nz - 1) / 2.0) * v->vz;
		rc_geom *gs = NULL;
		rc_engine *e = NULL;
		if (!(rc = rc_geom_slab(g, k0, k1, &sv, h.row0, h.nrows, &gs, err)) &&
		    !(rc = rc_engine_cpu_new(gs, 0, &e, err)))
			rc = rc_engine_back(e, RC_BP_VOXEL, h.filt, vol + (size_t)iz0 * plane, 0, k1 - k0, err);
		rc_engine_free(e);
		rc_geom_free(gs);
		if (stats) {
			/* the pairs of a view and a voxel whose height (at the axis)
			 * projects within the kept rows: the back projection's work */
			double zr = 0.5 * h.nrows * d->dv * rc_geom_sid(g) / rc_geom_sdd(g);
			for (int k = k0; k < k1; k++)
				for (int iz = iz0; iz < iz1; iz++) {
					double z = v->cz + (iz - (v->nz - 1) / 2.0) * v->vz - rc_geom_view(g, k)->src[2];
					stats->voxel_views += fabs(z) <= zr ? (double)plane : 0.0;
				}
			stats->max_views = k1 - k0 > stats->max_views ? k1 - k0 : stats->max_views;
			stats->slabs++;
		}
		/* streaming: this slab is final; show it (the last slab after
		 * every view is in, below) */
		st.nfinal += iz1 - iz0;
		if (st.arrived && !rc && si < nslabs - 1) {
			stream_report(&st, 0);
			if (hooks->iterate && (rc = hooks->iterate(hooks->ud, b, vv, 0)))
				break;
		}
	}
	if (rc)
		goto out;
	if (st.arrived) {
		/* the volume is final; the job still takes every view */
		stream_report(&st, 0);
		if ((rc = await_views(&st, 0, n, err)))
			goto out;
		stream_report(&st, 1);
		rc = hooks->iterate ? hooks->iterate(hooks->ud, b, vv, 1) : 0;
		goto out;
	}
	/* FDK is one pass: iteration 1 of 1 */
	if ((rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, vol, &vv, err)))
		goto out;
	rc = rc_algo_report(hooks, b, vv, 1, 1, 0.0, t0, NULL);
out:
	rc_bk_vec_free(b, vv);
	for (int t = 0; h.work && t < nwork; t++)
		rc_ramp_work_free(h.work[t]);
	free(h.work);
	rc_ramp_free(h.ramp);
	free(h.filt);
	free(h.pre);
	free(h.scale);
	free(todo);
	free(st.arrived);
	free(st.list);
	return rc;
}
