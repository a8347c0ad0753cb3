/*
 * algo_fdk: Feldkamp-Davis-Kress reconstruction (algo.h), for cone,
 * matrices (circular-like scans), fan and parallel geometries.
 *
 * Each view is weighted, ramp-filtered along its detector rows and scaled
 * into a filtered stack (views in parallel, FFTW plans made once per run),
 * then the whole stack is back-projected once with RC_BP_VOXEL, which is
 * paper 002 Eq. 1: vol = sum_k (1/w^2) bilinear(q_k, u, v), w = depth in mm.
 * The filtered value of pixel (i, j) of view k is (docs/fdk.md derives it)
 *
 *   q = dbeta_k * K_k * sum_m h(i - m) [ c(m, j) * s_k(m, j) * p(m, j) ]
 *
 * with h the unit discrete ramp (filter.h), c the cosine weight
 * S / sqrt(S^2 + u^2 + v^2), s_k = 1/2 for a full scan or Parker's weight
 * for a short scan, dbeta_k the angle each view stands for, and
 * K = D S / du (cone, fan; D = source-axis, S = source-detector, du the pixel
 * pitch), K = 1 / du (parallel), K = D_k f_u (matrices: D_k the source's
 * distance from the axis through the volume centre, f_u the focal length in
 * pixels read off the matrix).  Then the back projection's 1/w^2 turns the
 * sum into Feldkamp's (1/2) int D^2/U^2 Q dbeta and the result is in 1/mm.
 * A curved (equiangular) fan is Kak & Slaney's equiangular FBP in the same
 * form: c = cos(gamma) with gamma = u / S (u the arc length), h times
 * (m a / sin(m a))^2 with a = du / S (rc_ramp_new_arc), the same K = D / a,
 * and a back projection weighted by 1/L^2, L the distance from the source.
 * A cone with a cylindrical detector (radius S about the source, axis
 * along z) is its cone-beam form: c = cos(gamma) S / sqrt(S^2 + v^2), the
 * same kernel along the arc, and a back projection through the cylinder
 * weighted by 1/L^2, L the distance from the source in the plane of
 * rotation (proj_cyl.c's column set-up of the voxel tiles).
 *
 * Streaming (hooks->views): each view is filtered as it arrives, exactly as
 * above, and the filtered views are back-projected in groups straight onto
 * the sum (rc_bk_back_add: no scratch volume, no pass to add one); the angles, dbeta and Parker's
 * weights come from the geometry, which holds every view's angle from the
 * start, so a short scan streams too.  Only the order of the float sums
 * differs from the batch run.
 *
 * A displaced (offset, half-fan) detector of a cone or fan scan sees part
 * of the field of view from one side only: over a full scan each line
 * inside the central overlap |gamma| < gamma_o is measured twice (the ray
 * at gamma and its conjugate at -gamma), outside it once.  Wang's weight
 * (Med. Phys. 29, 2002), as RTK's DisplacedDetectorImageFilter applies it,
 * replaces the full scan's 1/2 by
 *   s(gamma) = (1 + sin(pi/2 gamma / gamma_o)) / 2   inside the overlap,
 *   1 on the wider side beyond it, 0 on the narrower side,
 * mirrored when the detector is displaced towards -e_u; s(gamma) +
 * s(-gamma) = 1 on every line.  gamma_o is the fan angle of the nearer
 * outermost pixel centre (the detector's inner edge seen from the axis).
 * As RTK pads its views, the views of a displaced detector are filtered
 * on the detector widened to be symmetric about the central ray (zeros
 * on the missing side, FDK on rc_geom_widen's geometry): the ramp spreads
 * the weighted data beyond the inner edge, and the voxels that project
 * there must get it (without, the error grew from 0.21 to 0.23 in
 * test_rtk_detectors).  Their back projection then runs on the CPU
 * engine's host backend of the widened geometry, whatever the job's.
 * As in RTK a detector whose two edges are within 10 % of its width of
 * symmetric is taken as centred; one that does not see the axis cannot
 * be reconstructed (rc_fdk_displaced).  A displaced detector on a short
 * scan is refused: Parker's and Wang's weights do not combine into a
 * weight whose conjugate rays sum to one.
 *
 * Parker weights (Parker 1982) use the ray's fan angle gamma in the plane
 * of rotation, the view's angle beta along the scan from its start, and
 * Delta = (range - pi) / 2 from the angular range the views cover, so that
 * every pair of rays along one line gets weights that add up to 1.
 */
#include "algo/algo_util.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "algo/fdk_helix.h"
#include "algo/filter.h"
#include "backend/cpu/engine_cpu.h"
#include "util/parfor.h"

struct fdk {
	const rc_geom *g;
	rc_geom_type type;
	const rc_detector_desc *det;
	int nviews, nrows, nu;
	const float *proj;
	float *filt;
	size_t base;    /* proj and filt start at this offset of the stack (rc_fdk_filter_views) */
	rc_ramp *ramp;
	int nwork;
	rc_ramp_work **work;
	float **pre;    /* per worker: a view's weights (cosine, Parker) */
	float *pre_all; /* the weights when every view has the same (no Parker, no matrices) */
	double *beta;   /* along the scan from the start of the range, rad */
	double *dbeta;  /* angle each view stands for, rad */
	double *theta;  /* source angle about the axis, rad (unwrapped) */
	double sigma;   /* +1: angles increase along the scan, -1: decrease */
	double delta;   /* Parker's half range beyond pi */
	int short_scan;
	int displaced;  /* +1, -1: Wang's weight towards +e_u or -e_u; 0: none */
	double gamma_o; /* its overlap's half fan angle, rad */
	/* a displaced detector's views are copied into the widened one's
	 * (g above): src the job's stack on geometry g0, its rows at pixel
	 * shift of the widened rows in padded (zero elsewhere) */
	const rc_geom *g0;
	const float *src;
	float *padded;
	int shift;
	double ax, ay;  /* the rotation axis (x, y) */
	const atomic_int *cancel;
	atomic_int stopped;
};

/* Parker's weight of the ray (beta, gamma) of a scan over [0, pi + 2 delta];
 * gamma is signed so that the ray (beta, gamma) and (beta + pi + 2 gamma,
 * -gamma) are the same line. */
static double parker(double beta, double gamma, double delta)
{
	const double eps = 1e-9;
	if (delta <= eps)
		return beta >= 0 && beta <= M_PI ? 1.0 : 0.0;
	/* rays beyond the covered fan are clamped to its edge: data is missing there */
	if (gamma > delta - eps)
		gamma = delta - eps;
	if (gamma < -delta + eps)
		gamma = -delta + eps;
	if (beta < 0)
		return 0.0;
	if (beta < 2 * (delta - gamma)) {
		double s = sin(M_PI / 4 * beta / (delta - gamma));
		return s * s;
	}
	if (beta <= M_PI - 2 * gamma)
		return 1.0;
	if (beta <= M_PI + 2 * delta) {
		double s = sin(M_PI / 4 * (M_PI + 2 * delta - beta) / (delta + gamma));
		return s * s;
	}
	return 0.0;
}

static double wrap_pi(double a)
{
	a = fmod(a, 2 * M_PI);
	if (a > M_PI)
		a -= 2 * M_PI;
	if (a <= -M_PI)
		a += 2 * M_PI;
	return a;
}

/* Matrices carry no detector offset to weigh by, but a scan imported with
 * per-view offsets (RTK's ProjectionOffsetX, a half-fan CBCT) is still
 * displaced: where the ray through the volume's centre meets the detector
 * off its middle by more than RTK's 10 % of the width in some view, FDK's
 * plain weights would halve what one side alone sees.  Refused rather than
 * reconstructed wrong. */
static int matrices_displaced(const rc_geom *g, rc_err *err)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *vol = rc_geom_volume(g);
	double c[3] = { vol->cx, vol->cy, vol->cz };
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		double u, v, w;
		rc_view_project(rc_geom_view(g, k), c, &u, &v, &w);
		double lo = -0.5 - u, hi = d->nu - 0.5 - u;
		if (!(fabs(lo + hi) <= 0.1 * (hi - lo)))
			return rc_fail(err, RC_EUNSUPPORTED, "geometry.matrices",
				       "fdk on a matrices geometry needs a detector centred on the volume; in view %d the "
				       "volume's centre projects to column %.1f of %d (a displaced, half-fan detector, "
				       "which fdk weighs on a cone geometry only): use an iterative algorithm, or a cone "
				       "geometry with detector.offset_u_mm",
				       k, u, d->nu);
	}
	return 0;
}

int rc_fdk_displaced(const rc_geom *g, rc_scan_mode scan, int *dir, double *gamma_o, rc_err *err)
{
	rc_geom_type t = rc_geom_type_of(g);
	*dir = 0;
	if (gamma_o)
		*gamma_o = 0;
	if (t == RC_GEOM_MATRICES)
		return matrices_displaced(g, err);
	if (!rc_geom_type_is_cone(t) && t != RC_GEOM_FAN)
		return 0;
	const rc_detector_desc *d = rc_geom_detector(g);
	double lo = rc_geom_column_gamma(g, 0), hi = rc_geom_column_gamma(g, d->nu - 1);
	if (lo > 0 || hi < 0)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.detector.offset_u_mm",
			       "fdk needs a detector that sees the rotation axis; offset_u_mm %g mm moves all of it to "
			       "one side (its pixel centres span %.2f to %.2f degrees of fan angle); use an "
			       "iterative algorithm",
			       d->offset_u, lo * 180 / M_PI, hi * 180 / M_PI);
	/* RTK's rule: within 10 % of the width of centred is centred (<=: a
	 * centred single column, lo = hi = 0, too) */
	if (fabs(lo + hi) <= 0.1 * fabs(hi - lo))
		return 0;
	if (scan == RC_SCAN_SHORT)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.scan",
			       "fdk with a displaced detector (offset_u_mm %g mm) needs a full 360-degree scan; a short "
			       "scan's Parker weights do not combine with the displaced detector's: use algorithm.scan "
			       "\"full\" with views all round, or an iterative algorithm",
			       d->offset_u);
	*dir = lo + hi > 0 ? 1 : -1;
	if (gamma_o)
		*gamma_o = fmin(-lo, hi);
	return 0;
}

/* Wang's weight (the header comment) of fan angle gamma. */
static double displaced_weight(const struct fdk *f, double gamma)
{
	double x = f->displaced * gamma;
	if (x <= -f->gamma_o)
		return 0.0;
	if (x >= f->gamma_o)
		return 1.0;
	return 0.5 * (1.0 + sin(M_PI / 2 * x / f->gamma_o));
}

/* Source angles, their order along the scan, the angle each view stands
 * for and the scan mode. */
static int fdk_angles(struct fdk *f, const rc_algo_params *p, rc_err *err)
{
	const int n = f->nviews;
	if (n < 2)
		return rc_fail(err, RC_EINVAL, "geometry.angles", "fdk needs at least 2 views (got %d)", n);
	for (int k = 0; k < n; k++) {
		const rc_view *vw = rc_geom_view(f->g, k);
		double t = f->type == RC_GEOM_MATRICES ? atan2(vw->src[1] - f->ay, vw->src[0] - f->ax) : vw->angle_rad;
		f->theta[k] = k == 0 ? t : f->theta[k - 1] + wrap_pi(t - f->theta[k - 1]);
	}
	f->sigma = f->theta[1] > f->theta[0] ? 1.0 : -1.0;
	for (int k = 1; k < n; k++)
		if (!(f->sigma * (f->theta[k] - f->theta[k - 1]) > 0))
			return rc_fail(err, RC_EUNSUPPORTED, "geometry.angles",
				       "fdk needs the views in scan order, each angle past the one before "
				       "(view %d does not continue the direction of views 0 and 1)", k);
	/* view k stands for the arc between the midpoints to its neighbours */
	double b0 = f->sigma * f->theta[0] - 0.5 * f->sigma * (f->theta[1] - f->theta[0]);
	for (int k = 0; k < n; k++) {
		double t = f->sigma * f->theta[k];
		double lo = k == 0 ? t - 0.5 * f->sigma * (f->theta[1] - f->theta[0])
				   : 0.5 * (t + f->sigma * f->theta[k - 1]);
		double hi = k == n - 1 ? t + 0.5 * f->sigma * (f->theta[n - 1] - f->theta[n - 2])
				       : 0.5 * (t + f->sigma * f->theta[k + 1]);
		f->dbeta[k] = hi - lo;
		f->beta[k] = t - b0;
	}
	double range = 0; /* the arc all views stand for */
	for (int k = 0; k < n; k++)
		range += f->dbeta[k];
	double mean_step = range / n;
	switch (p->scan) {
	case RC_SCAN_FULL: f->short_scan = 0; break;
	case RC_SCAN_SHORT: f->short_scan = 1; break;
	case RC_SCAN_AUTO: f->short_scan = range < 2 * M_PI - 0.5 * mean_step; break;
	default: return rc_fail(err, RC_EINVAL, "algorithm.scan", "algorithm.scan must be auto, full or short");
	}
	if (f->short_scan) {
		f->delta = (range - M_PI) / 2;
		if (f->delta < -0.5 * mean_step)
			return rc_fail(err, RC_EINVAL, "geometry.angles",
				       "a short scan needs views over at least 180 degrees plus the fan angle (they cover %.1f)",
				       range * 180 / M_PI);
		f->delta = fmax(f->delta, 0.0);
	}
	return 0;
}

/* Cosine weight and signed fan angle of pixel (i, j) of view k (the angle
 * only for a short scan's Parker weights: an atan per pixel and view was a
 * tenth of paper 000's FDK). */
static void pixel_weights(const struct fdk *f, int k, int i, int j, double *cosw, double *gamma)
{
	const rc_detector_desc *d = f->det;
	*cosw = 1.0;
	*gamma = 0.0;
	switch (f->type) {
	case RC_GEOM_CONE:
	case RC_GEOM_HELIX: /* pitch 0 here: algo_fdk_helix.c has the others */
	case RC_GEOM_FAN: {
		double S = rc_geom_sdd(f->g);
		double um = (i - (d->nu - 1) / 2.0) * d->du + d->offset_u;
		double vm = rc_geom_type_is_cone(f->type) ? (j - (d->nv - 1) / 2.0) * d->dv + d->offset_v : 0.0;
		if (d->shape == RC_DETECTOR_CURVED) {
			/* an arc (a cylinder for cone): um is the arc length, the
			 * ray's angle um / S, its cosine to the central ray
			 * cos(gamma) S / sqrt(S^2 + v^2) */
			*gamma = um / S;
			*cosw = cos(*gamma) * S / sqrt(S * S + vm * vm);
			break;
		}
		*cosw = S / sqrt(S * S + um * um + vm * vm);
		/* e_u is the counter-clockwise tangent: gamma > 0 toward it */
		if (f->short_scan)
			*gamma = atan(um / S);
		break;
	}
	case RC_GEOM_PARALLEL:
		break;
	case RC_GEOM_MATRICES: {
		const rc_view *vw = rc_geom_view(f->g, k);
		const double *M = vw->Minv;
		double dir[3];
		for (int r = 0; r < 3; r++)
			dir[r] = M[3 * r] * i + M[3 * r + 1] * j + M[3 * r + 2];
		/* n . dir = 1 with |n| = 1: the cosine to the principal ray is 1/|dir| */
		*cosw = 1.0 / sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
		if (f->short_scan) {
			double t = f->theta[k], cx = -cos(t), cy = -sin(t), tx = -sin(t), ty = cos(t);
			*gamma = atan2(dir[0] * tx + dir[1] * ty, dir[0] * cx + dir[1] * cy);
		}
		break;
	}
	}
	/* Parker's conjugate rule (beta + pi + 2 gamma, -gamma) holds for the
	 * clockwise fan angle of a counter-clockwise scan; mirror otherwise. */
	*gamma = -f->sigma * *gamma;
}

/* K_k of the header comment. */
static double view_scale(const struct fdk *f, int k)
{
	switch (f->type) {
	case RC_GEOM_CONE:
	case RC_GEOM_HELIX:
	case RC_GEOM_FAN:
		return rc_geom_sid(f->g) * rc_geom_sdd(f->g) / f->det->du;
	case RC_GEOM_PARALLEL:
		return 1.0 / f->det->du;
	case RC_GEOM_MATRICES: {
		const rc_view *vw = rc_geom_view(f->g, k);
		const double *P = vw->P;
		double cu = P[0] * P[8] + P[1] * P[9] + P[2] * P[10];
		double fx = P[0] - cu * P[8], fy = P[1] - cu * P[9], fz = P[2] - cu * P[10];
		double fu = sqrt(fx * fx + fy * fy + fz * fz);
		double D = hypot(vw->src[0] - f->ax, vw->src[1] - f->ay);
		return D * fu;
	}
	}
	return 0;
}

/* pre = the weights of view k's pixels: cosine times Parker (or the 1/2
 * of a full scan's double coverage). */
static void view_weights(const struct fdk *f, int k, float *pre)
{
	for (int j = 0; j < f->nrows; j++) {
		for (int i = 0; i < f->nu; i++) {
			double c, gamma;
			pixel_weights(f, k, i, j, &c, &gamma);
			double s = f->short_scan ? parker(f->beta[k], gamma, f->delta)
				   : f->displaced ? displaced_weight(f, rc_geom_column_gamma(f->g, i))
				   : 0.5;
			pre[(size_t)j * f->nu + i] = (float)(c * s);
		}
	}
}

static void filter_view(void *ud, int worker, int k)
{
	struct fdk *f = ud;
	if (atomic_load(&f->stopped) || (f->cancel && atomic_load(f->cancel))) {
		atomic_store(&f->stopped, 1);
		return;
	}
	float *pre = f->pre_all;
	if (!pre)
		view_weights(f, k, pre = f->pre[worker]);
	if (f->src) {
		int nu0 = rc_geom_detector(f->g0)->nu;
		for (int j = 0; j < f->nrows; j++)
			memcpy(f->padded + rc_geom_row_offset(f->g, k, j) + f->shift, f->src + rc_geom_row_offset(f->g0, k, j),
			       sizeof(float) * (size_t)nu0);
	}
	size_t off = rc_geom_row_offset(f->g, k, 0) - f->base, stride = rc_geom_row_stride(f->g);
	rc_ramp_apply(f->ramp, f->work[worker], f->proj + off, stride, f->filt + off, stride, f->nrows, pre,
		      (float)(f->dbeta[k] * view_scale(f, k)));
}

/* Detector rows must run perpendicular to the rotation axis for the
 * filter to run along them. */
static int check_matrices(const struct fdk *f, rc_err *err)
{
	for (int k = 0; k < f->nviews; k++) {
		const double *P = rc_geom_view(f->g, k)->P;
		double cu = P[0] * P[8] + P[1] * P[9] + P[2] * P[10];
		double fx = P[0] - cu * P[8], fy = P[1] - cu * P[9], fz = P[2] - cu * P[10];
		double fu = sqrt(fx * fx + fy * fy + fz * fz);
		if (!(fu > 0) || fabs(fz) > 0.02 * fu || fabs(P[10]) > 0.2)
			return rc_fail(err, RC_EUNSUPPORTED, "geometry.matrices",
				       "fdk needs a circular-like scan: in geometry.matrices[%d] the detector rows are not "
				       "perpendicular to the z axis or the detector is tilted; use an iterative algorithm", k);
		const rc_view *vw = rc_geom_view(f->g, k);
		if (!(hypot(vw->src[0] - f->ax, vw->src[1] - f->ay) > 0))
			return rc_fail(err, RC_EUNSUPPORTED, "geometry.matrices",
				       "fdk needs sources off the rotation axis (geometry.matrices[%d])", k);
	}
	return 0;
}

struct fdk_list {
	struct fdk *f;
	const int *k;
};

static void filter_listed(void *ud, int worker, int i)
{
	struct fdk_list *l = ud;
	filter_view(l->f, worker, l->k[i]);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Views back-projected per group: about 16 MB of volume per view, so that a
 * small volume shows each view at once and a large one is not re-read per
 * view (a group costs a back projection that reads and writes the volume
 * once). */
static int stream_group(const rc_volume_desc *v)
{
	double mb = 4.0 * (double)rc_volume_count(v) / (1 << 20);
	int g = (int)ceil(mb / 16);
	return g < 1 ? 1 : g > 32 ? 32 : g;
}

/* a view waits at most this long for its group: longer where a group costs
 * a device round trip */
#define STREAM_LATENCY_S 0.25
#define STREAM_LATENCY_DEVICE_S 1.0

/* Back-projects the pending views (sorted into runs of consecutive views)
 * onto vv. */
static int stream_flush(rc_backend *b, rc_vec *vf, rc_vec *vv, const float *filt, int *pend, int npend, rc_err *err)
{
	int rc = 0;
	qsort(pend, (size_t)npend, sizeof *pend, cmp_int);
	for (int i = 0; i < npend && !rc;) {
		int j = i + 1;
		while (j < npend && pend[j] == pend[j - 1] + 1)
			j++;
		/* a device backend gets the run's filtered views (a host one
		 * reads them where they were filtered) */
		if (!b->ops->vec_borrow)
			rc = rc_bk_upload_views(b, vf, filt, pend[i], pend[j - 1] + 1, err);
		if (!rc)
			rc = rc_bk_back_add(b, RC_BP_VOXEL, vf, vv, pend[i], pend[j - 1] + 1, err);
		i = j;
	}
	return rc;
}

static int fdk_stream(struct fdk *f, rc_backend *b, float *vol, const rc_algo_hooks *h, double t0, rc_err *err)
{
	const int n = f->nviews;
	const rc_volume_desc *v = rc_geom_volume(f->g);
	int group = stream_group(v), given = 0, npend = 0, rc;
	/* A device backend uploads each group's views and launches a back
	 * projection over the whole volume per run of views: groups of at
	 * least 1/32 of the views keep those launches few. */
	double latency = b->ops->vec_borrow ? STREAM_LATENCY_S : STREAM_LATENCY_DEVICE_S;
	if (!b->ops->vec_borrow && group < (n + 31) / 32)
		group = (n + 31) / 32;
	int *list = malloc(sizeof(int) * (size_t)n), *pend = malloc(sizeof(int) * (size_t)n);
	rc_vec *vf = NULL, *vv = NULL;
	double oldest = 0;
	if (!list || !pend) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the streaming FDK's view lists");
		goto out;
	}
	if ((rc = rc_bk_vec_from(b, RC_SPACE_PROJ, f->filt, &vf, err)) ||
	    (rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, vol, &vv, err)) || (rc = rc_bk_fill(b, vv, 0.0f, RC_VIEWS_ALL, err)))
		goto out;
	while (given < n || npend > 0) {
		if (f->cancel && atomic_load(f->cancel)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "the reconstruction was cancelled");
			goto out;
		}
		if (given < n) {
			double wait = npend ? fmax(0.0, oldest + latency - rc_now_s()) : 1.0;
			int got = h->views(h->ud, wait, list, n - given, err);
			if (got < 0) {
				rc = got;
				goto out;
			}
			for (int i = 0; i < got; i++)
				if (list[i] < 0 || list[i] >= n) {
					rc = rc_fail(err, RC_EINTERNAL, "", "streamed view %d is not a view of the job", list[i]);
					goto out;
				}
			struct fdk_list l = { f, list };
			rc_parallel_for(got, f->nwork, filter_listed, &l);
			if (got && !npend)
				oldest = rc_now_s();
			memcpy(pend + npend, list, sizeof(int) * (size_t)got);
			npend += got;
			given += got;
		}
		if (!npend || (npend < group && given < n && rc_now_s() - oldest < latency))
			continue;
		if ((rc = stream_flush(b, vf, vv, f->filt, pend, npend, err)))
			goto out;
		int done = given;
		npend = 0;
		if (given == n)
			break;
		/* the partial sum reaches the host through iterate (the worker's
		 * live volume), not here: once per preview, not per group */
		if (h->progress) {
			rc_progress pr = { .iteration = 0, .of = 1, .residual = 0.0, .elapsed_s = rc_now_s() - t0,
					   .views_done = done, .views_of = n };
			h->progress(h->ud, &pr);
		}
		if (h->iterate && (rc = h->iterate(h->ud, b, vv, 0)))
			goto out;
	}
	if ((rc = rc_bk_download(b, vv, vol, err)))
		goto out;
	if (h->progress) {
		rc_progress pr = { .iteration = 1, .of = 1, .residual = 0.0, .elapsed_s = rc_now_s() - t0,
				   .views_done = n, .views_of = n };
		h->progress(h->ud, &pr);
	}
	rc = h->iterate ? h->iterate(h->ud, b, vv, 1) : 0;
out:
	rc_bk_vec_free(b, vv);
	rc_bk_vec_free(b, vf);
	free(pend);
	free(list);
	return rc;
}

static void fdk_free(struct fdk *f)
{
	for (int t = 0; t < f->nwork; t++) {
		if (f->work)
			rc_ramp_work_free(f->work[t]);
		if (f->pre)
			free(f->pre[t]);
	}
	free(f->work);
	free(f->pre);
	free(f->pre_all);
	rc_ramp_free(f->ramp);
	free(f->filt);
	free(f->beta);
	free(f->dbeta);
	free(f->theta);
}

/* What filtering needs, on f's geometry (f->g, g0 set): angles, weights,
 * the ramp and its per-thread work, and the filtered stack of nfilt floats
 * (zeroed where a stream fills it view by view; 0: the caller's).  The
 * caller frees with fdk_free whatever it got. */
static int fdk_prepare(struct fdk *f, const rc_algo_params *p, size_t nfilt, int zeroed, rc_err *err)
{
	const rc_geom *g = f->g;
	const rc_volume_desc *v = rc_geom_volume(g);
	int rc;
	f->nu = f->det->nu;
	f->nrows = rc_geom_is_2d(g) ? v->nz : f->det->nv;
	if (f->type == RC_GEOM_MATRICES) {
		f->ax = v->cx;
		f->ay = v->cy;
		if ((rc = check_matrices(f, err)))
			return rc;
	}
	f->beta = malloc(sizeof(double) * (size_t)f->nviews);
	f->dbeta = malloc(sizeof(double) * (size_t)f->nviews);
	f->theta = malloc(sizeof(double) * (size_t)f->nviews);
	/* streaming back-projects only views it filtered; calloc keeps the
	 * others (and a device's upload of them) defined */
	if (nfilt)
		f->filt = zeroed ? calloc(nfilt, sizeof(float)) : malloc(sizeof(float) * nfilt);
	f->nwork = rc_parallel_threads(0);
	f->work = calloc((size_t)f->nwork, sizeof *f->work);
	f->pre = calloc((size_t)f->nwork, sizeof *f->pre);
	if (!f->beta || !f->dbeta || !f->theta || (nfilt && !f->filt) || !f->work || !f->pre)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the filtered projections (%zu floats)", nfilt);
	/* a curved fan's kernel is the equiangular one (filter.h) */
	double arc = f->det->shape == RC_DETECTOR_CURVED ? f->det->du / rc_geom_sdd(g) : 0.0;
	if ((rc = rc_ramp_new_arc(f->nu, f->nrows, p->window, p->cutoff, arc, &f->ramp, err)))
		return rc;
	if ((rc = fdk_angles(f, p, err)) ||
	    (rc = rc_fdk_displaced(f->g0 ? f->g0 : g, f->short_scan ? RC_SCAN_SHORT : RC_SCAN_FULL, &f->displaced,
				   &f->gamma_o, err)))
		return rc;
	/* a full circular scan weighs every view alike: one table for all */
	int shared = !f->short_scan && f->type != RC_GEOM_MATRICES;
	if (shared && !(f->pre_all = malloc(sizeof(float) * (size_t)f->nu * (size_t)f->nrows)))
		return rc_fail(err, RC_ENOMEM, "", "out of memory for FDK weights");
	if (shared)
		view_weights(f, 0, f->pre_all);
	for (int t = 0; t < f->nwork; t++) {
		if ((rc = rc_ramp_work_new(f->ramp, &f->work[t], err)))
			return rc;
		if (!shared && !(f->pre[t] = malloc(sizeof(float) * (size_t)f->nu * (size_t)f->nrows)))
			return rc_fail(err, RC_ENOMEM, "", "out of memory for FDK weights");
	}
	return 0;
}

struct fdk_range {
	struct fdk *f;
	int k0;
};

static void filter_ranged(void *ud, int worker, int i)
{
	struct fdk_range *r = ud;
	filter_view(r->f, worker, r->k0 + i);
}

int rc_fdk_filter_views(const rc_algo_params *p, const rc_geom *g, const float *proj, float *filt, int k0, int k1,
			const atomic_int *cancel, rc_err *err)
{
	struct fdk f = { .g = g, .type = rc_geom_type_of(g), .det = rc_geom_detector(g), .nviews = rc_geom_nviews(g),
			 .proj = proj, .filt = NULL, .cancel = cancel };
	atomic_init(&f.stopped, 0);
	int rc = 0, dir = 0;
	if (rc_geom_is_2d(g) || k0 < 0 || k1 > f.nviews || k1 <= k0)
		return rc_fail(err, RC_EINVAL, "", "rc_fdk_filter_views filters views of a cone or matrices geometry "
			       "(views %d..%d of %d)", k0, k1, f.nviews);
	if ((rc = rc_fdk_displaced(g, RC_SCAN_FULL, &dir, NULL, err)))
		return rc;
	if (dir)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.detector.offset_u_mm",
			       "a displaced detector's views are filtered on the widened detector: not view by view");
	if (!(rc = fdk_prepare(&f, p, 0, 0, err))) {
		f.filt = filt;
		f.base = rc_geom_row_offset(g, k0, 0);
		struct fdk_range r = { &f, k0 };
		rc_parallel_for(k1 - k0, f.nwork, filter_ranged, &r);
		if (atomic_load(&f.stopped) || (cancel && atomic_load(cancel)))
			rc = rc_fail(err, RC_ECANCELLED, "", "the reconstruction was cancelled");
	}
	f.filt = NULL; /* the caller's */
	fdk_free(&f);
	return rc;
}

int rc_fdk_suits(const rc_geom *g, rc_scan_mode scan, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	struct fdk f = { .g = g, .type = rc_geom_type_of(g), .det = rc_geom_detector(g), .nviews = rc_geom_nviews(g),
			 .ax = v->cx, .ay = v->cy };
	if (f.type == RC_GEOM_HELIX && rc_geom_pitch(g) != 0)
		return rc_fdk_helix_suits(g, err);
	rc_algo_params p;
	rc_algo_params_default(&p, RC_ALGO_FDK);
	p.scan = scan;
	int rc = f.type == RC_GEOM_MATRICES ? check_matrices(&f, err) : 0;
	if (rc)
		return rc;
	f.beta = malloc(sizeof(double) * (size_t)f.nviews);
	f.dbeta = malloc(sizeof(double) * (size_t)f.nviews);
	f.theta = malloc(sizeof(double) * (size_t)f.nviews);
	rc = f.beta && f.dbeta && f.theta ? fdk_angles(&f, &p, err)
					  : rc_fail(err, RC_ENOMEM, "", "out of memory for %d views", f.nviews);
	if (!rc)
		rc = rc_fdk_displaced(g, f.short_scan ? RC_SCAN_SHORT : RC_SCAN_FULL, &f.displaced, NULL, err);
	free(f.beta);
	free(f.dbeta);
	free(f.theta);
	return rc;
}

int rc_fdk_run(const rc_algo_params *p, rc_backend *b, const float *proj,
	       float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	double t0 = rc_now_s();
	const rc_geom *g = b->geom;
	rc_vec *vf = NULL, *vv = NULL;
	struct fdk f = { .g = g, .type = rc_geom_type_of(g), .det = rc_geom_detector(g), .nviews = rc_geom_nviews(g),
			 .proj = proj, .cancel = hooks ? hooks->cancel : NULL };
	const rc_volume_desc *v = rc_geom_volume(g);
	rc_geom *gw = NULL;
	rc_engine *ew = NULL;
	rc_exec *xw = NULL;
	rc_backend *bw = NULL;
	int rc = 0, dir = 0;
	atomic_init(&f.stopped, 0);
	/* a helix of nonzero pitch: the Tam-Danielsson window, slab by slab
	 * (pitch 0 is the circular cone, bit for bit: on below) */
	if (f.type == RC_GEOM_HELIX && rc_geom_pitch(g) != 0) {
		return rc_fdk_helix_run(p, b, proj, vol, hooks, NULL, err);
	}
	/* a displaced detector: filtered and back-projected on the widened one */
	if ((rc = rc_fdk_displaced(g, RC_SCAN_FULL, &dir, NULL, err)))
		return rc;
	if (dir) {
		const rc_detector_desc *d = f.det;
		int pad = (int)ceil(2.0 * fabs(d->offset_u) / d->du - 1e-9);
		double off = d->offset_u - dir * pad * d->du / 2;
		if ((rc = rc_geom_widen(g, d->nu + pad, off, &gw, err)) || (rc = rc_engine_cpu_new(gw, 0, &ew, err)) ||
		    (rc = rc_exec_new(&ew, 1, &xw, err)) || (rc = rc_backend_host_new(xw, &bw, err)))
			goto out;
		f.g0 = g;
		f.src = proj;
		f.shift = dir > 0 ? pad : 0;
		f.g = g = gw;
		f.det = rc_geom_detector(gw);
		f.proj = f.padded = calloc(rc_geom_proj_count(gw), sizeof(float));
		if (!f.padded) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the widened detector's views");
			goto out;
		}
		b = bw;
	}
	if ((rc = fdk_prepare(&f, p, rc_geom_proj_count(g), hooks && hooks->views, err)))
		goto out;
	if (hooks && hooks->views) {
		rc = fdk_stream(&f, b, vol, hooks, t0, err);
		goto out;
	}
	rc_parallel_for(f.nviews, f.nwork, filter_view, &f);
	if (atomic_load(&f.stopped) || (f.cancel && atomic_load(f.cancel))) {
		rc = rc_fail(err, RC_ECANCELLED, "", "the reconstruction was cancelled");
		goto out_zero;
	}
	/* the filtered stack is uploaded once (a host backend borrows it) */
	if ((rc = rc_bk_vec_from(b, RC_SPACE_PROJ, f.filt, &vf, err)) ||
	    (rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, vol, &vv, err)) ||
	    (rc = rc_bk_back(b, RC_BP_VOXEL, vf, vv, 0, f.nviews, err)) || (rc = rc_bk_download(b, vv, vol, err)))
		goto out;
	/* FDK is one pass: iteration 1 of 1; it computes no residual */
	rc = rc_algo_report(hooks, b, vv, 1, 1, 0.0, t0, NULL);
	goto out;
out_zero:
	memset(vol, 0, sizeof(float) * rc_volume_count(v));
out:
	rc_bk_vec_free(b, vv);
	rc_bk_vec_free(b, vf);
	fdk_free(&f);
	free(f.padded);
	rc_backend_free(bw);
	rc_exec_free(xw);
	rc_engine_free(ew);
	rc_geom_free(gw);
	return rc;
}
