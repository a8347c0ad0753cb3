/* ooc_iter: out-of-core CGLS, SIRT and MLEM in z-slabs and chunks of views, the
 * run and the passes SART's and OS-EM's share (ooc_iter.h, ooc_iter_run.h;
 * their blocks: ooc_subsets.c; the plan: ooc_iter_plan.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo_util.h"
#include "algo/noise.h"
#include "backend/elementwise_ops.h"
#include "backend/tv_host.h"
#include "plan/extend.h"
#include "plan/memory.h"
#include "plan/ooc_iter.h"
#include "plan/ooc_iter_run.h"
#include "plan/open.h"
#include "util/rc_clock.h"
#include "util/rc_io.h"

/* ---- files -------------------------------------------------------------- */

int ooc_rd(int fd, void *dst, size_t want, uint64_t off, rc_err *err)
{
	ssize_t r = rc_io_read_full(fd, dst, want, (off_t)off);
	if (r < 0)
		return rc_fail(err, RC_EIO, "", "cannot read a scratch or stack file: %s", strerror(errno));
	/* past the end of a sparse file just truncated: zeros */
	memset((char *)dst + r, 0, want - (size_t)r);
	return 0;
}

int ooc_wr(int fd, const void *src, size_t len, uint64_t off, rc_err *err)
{
	if (rc_io_write_full(fd, src, len, (off_t)off))
		return rc_fail(err, RC_EIO, "", "cannot write a scratch or volume file: %s", strerror(errno));
	return 0;
}

/* ---- one run (ooc_iter_run.h) ------------------------------------------ */

int ooc_cancelled(const ooc_run *R, rc_err *err)
{
	if (R->cancel && atomic_load(R->cancel))
		return rc_fail(err, RC_ECANCELLED, "", "cancelled");
	return 0;
}

/* Slab z0..z1 of views k0..k1 onto (back 0) or from (back 1) rows r0..r1:
 * vol (nx ny (z1-z0)) <-> rows ((k1-k0) (r1-r0) nu), the output overwritten. */
int ooc_slab_project(const ooc_run *R, int back, int z0, int z1, int r0, int r1, int k0, int k1, float *vol,
			float *rows, rc_err *err)
{
	rc_recon_spec sub;
	double *owned = NULL;
	rc_geom *g = NULL;
	rc_backend *b = NULL;
	rc_vec *vv = NULL, *vp = NULL;
	int rc = rc_ooc_sub_spec(R->s, z0, z1, r0, r1, &sub, &owned, err);
	if (rc)
		return rc;
	sub.geom.nviews = k1 - k0;
	if (sub.geom.type == RC_GEOM_MATRICES)
		sub.geom.matrices += 12 * (size_t)k0;
	else
		sub.geom.angles_deg += k0;
	sub.limits.part = 1; /* views that see none of the slab are fine */
	sub.algo.projector = R->pair;
	sub.residual = 0;
	if ((rc = rc_geom_new(&sub.geom, &sub.vol, &sub.limits, &g, err)) ||
	    (rc = rc_backend_open(sub.engine, NULL, 0, &sub, g, &b, err)))
		goto out;
	rc_fp_kind fk = rc_algo_fp(&sub.algo, b);
	if (fk == RC_FP_RAYCAST) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			     "out of core, a slab's backend offers no voxel-driven pair");
		goto out;
	}
	if (back) {
		if (!(rc = rc_bk_vec_from(b, RC_SPACE_PROJ, rows, &vp, err)) &&
		    !(rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, vol, &vv, err)) &&
		    !(rc = rc_bk_back(b, R->bpvox ? RC_BP_VOXEL : rc_algo_bp_matched(&sub.algo, b), vp, vv, 0, k1 - k0,
				      err)))
			rc = rc_bk_download(b, vv, vol, err);
	} else {
		if (!(rc = rc_bk_vec_from(b, RC_SPACE_VOLUME, vol, &vv, err)) &&
		    !(rc = rc_bk_vec_for(b, RC_SPACE_PROJ, rows, &vp, err)) &&
		    !(rc = rc_bk_forward(b, fk, vv, vp, 0, k1 - k0, err)))
			rc = rc_bk_download(b, vp, rows, err);
	}
out:
	if (b) {
		rc_bk_vec_free(b, vv);
		rc_bk_vec_free(b, vp);
	}
	rc_backend_free(b);
	rc_geom_free(g);
	free(owned);
	return rc;
}

static void chunk_views(const ooc_run *R, int c, int *k0, int *k1)
{
	*k0 = c * R->nk;
	*k1 = *k0 + R->nk < R->nviews ? *k0 + R->nk : R->nviews;
}

void ooc_slab_z(const ooc_run *R, int i, int *z0, int *z1)
{
	*z0 = i * R->nzs;
	*z1 = *z0 + R->nzs < R->nz ? *z0 + R->nzs : R->nz;
}

/* Slab i's (vol) projection onto views k0..k1 added to buf (whole views,
 * view k0 first) */
int ooc_fp_add(ooc_run *R, float *vol, int i, int k0, int k1, float *buf, rc_err *err)
{
	int z0, z1, r0 = R->r0[i], r1 = R->r1[i], rc;
	ooc_slab_z(R, i, &z0, &z1);
	if (r1 <= r0)
		return 0;
	if ((rc = ooc_slab_project(R, 0, z0, z1, r0, r1, k0, k1, vol, R->rows, err)))
		return rc;
	size_t n = (size_t)(r1 - r0) * R->nu;
	for (size_t k = 0; k < (size_t)(k1 - k0); k++) {
		float *q = buf + k * R->view + (size_t)r0 * R->nu;
		const float *f = R->rows + k * n;
		for (size_t j = 0; j < n; j++)
			q[j] += f[j];
	}
	return 0;
}

/* dst (proj at dst_off) = A (volume vfd at v_off; vfd < 0: ones); *qq =
 * ||A v||^2; sirt: each chunk A x made SIRT's weighted residual
 * rinv (p - A x) before it is written, *qq then ||p - A x||^2. */
int ooc_forward(ooc_run *R, int vfd, uint64_t v_off, int dst, uint64_t dst_off, int sirt, double *qq, rc_err *err)
{
	*qq = 0;
	R->fsum = 0;
	for (int c = 0; c < R->chunks; c++) {
		int k0, k1, rc;
		chunk_views(R, c, &k0, &k1);
		size_t nk = (size_t)(k1 - k0);
		memset(R->chunk, 0, sizeof(float) * R->view * nk);
		for (int i = 0; i < R->slabs; i++) {
			int z0, z1;
			ooc_slab_z(R, i, &z0, &z1);
			if (R->r1[i] <= R->r0[i])
				continue;
			if (vfd < 0)
				for (size_t j = 0; j < R->plane * (size_t)(z1 - z0); j++)
					R->a[j] = 1.0f;
			if ((rc = ooc_cancelled(R, err)) ||
			    (vfd >= 0 && (rc = ooc_rd(vfd, R->a, sizeof(float) * R->plane * (size_t)(z1 - z0),
						  v_off + sizeof(float) * R->plane * (size_t)z0, err))) ||
			    (rc = ooc_fp_add(R, R->a, i, k0, k1, R->chunk, err)))
				return rc;
		}
		if (sirt && (rc = ooc_sirt_residual(R, k0, k1, qq, err)))
			return rc;
		for (size_t j = 0; j < R->view * nk && !sirt; j++) {
			*qq += (double)R->chunk[j] * R->chunk[j];
			R->fsum += R->chunk[j];
		}
		if ((rc = ooc_wr(dst, R->chunk, sizeof(float) * R->view * nk, dst_off + sizeof(float) * R->view * (size_t)k0,
			     err)))
			return rc;
	}
	return 0;
}

static int sirt_update(ooc_run *R, int z0, int z1, int xfd, rc_err *err);

/* volume dst (at dst_off) = A^T (proj pfd at p_off; pfd < 0: ones); *ss =
 * its ||.||^2; sirt: SIRT's update of x (dst) with it instead. */
static int tv_slab(ooc_run *R, int wfd, uint64_t woff, int dfd, uint64_t doff, int z0, int z1, const float **t,
		   const float **d, rc_err *err);

static int backward(ooc_run *R, int pfd, uint64_t p_off, int dst, uint64_t dst_off, int sirt, double *ss, rc_err *err)
{
	*ss = 0;
	for (int i = 0; i < R->slabs; i++) {
		int z0, z1, r0 = R->r0[i], r1 = R->r1[i], rc;
		ooc_slab_z(R, i, &z0, &z1);
		size_t n = R->plane * (size_t)(z1 - z0), nr = (size_t)(r1 - r0) * R->nu;
		memset(R->b, 0, sizeof(float) * n);
		for (int c = 0; c < R->chunks && r1 > r0; c++) {
			int k0, k1;
			chunk_views(R, c, &k0, &k1);
			if ((rc = ooc_cancelled(R, err)))
				return rc;
			if (pfd < 0)
				for (size_t j = 0; j < nr * (size_t)(k1 - k0); j++)
					R->rows[j] = 1.0f;
			for (int k = k0; k < k1 && pfd >= 0; k++)
				if ((rc = ooc_rd(pfd, R->rows + (size_t)(k - k0) * nr, sizeof(float) * nr,
					     p_off + sizeof(float) * ((size_t)k * R->view + (size_t)r0 * R->nu), err)))
					return rc;
			if ((rc = ooc_slab_project(R, 1, z0, z1, r0, r1, k0, k1, R->a, R->rows, err)))
				return rc;
			for (size_t j = 0; j < n; j++)
				R->b[j] += R->a[j];
		}
		if (sirt) {
			if ((rc = sirt_update(R, z0, z1, dst, err)))
				return rc;
			continue;
		}
		if (R->tvx) { /* s = A^T r - beta_tv grad TV(x) */
			const float *t, *x;
			if ((rc = tv_slab(R, R->xfd, 0, R->xfd, 0, z0, z1, &t, &x, err)))
				return rc;
			for (size_t j = 0; j < n; j++)
				R->b[j] = rc_ew_axpy(R->b[j], R->tvneg, t[j]);
		}
		for (size_t j = 0; j < n; j++) {
			*ss += (double)R->b[j] * R->b[j];
		}
		if ((rc = ooc_wr(dst, R->b, sizeof(float) * n, dst_off + sizeof(float) * R->plane * (size_t)z0, err)))
			return rc;
	}
	return 0;
}

/* Streamed y = y + a x over n floats of files (yfd, yoff) and (xfd, xoff),
 * in pieces of len floats in bufs ybuf and xbuf; xpay: y = x + a y.
 * *yy = ||y||^2 after (may be NULL). */
static int stream_axpy(int yfd, uint64_t yoff, int xfd, uint64_t xoff, uint64_t n, size_t len, float a, int xpay,
		       float *ybuf, float *xbuf, double *yy, rc_err *err)
{
	if (yy)
		*yy = 0;
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		int rc;
		if ((rc = ooc_rd(yfd, ybuf, sizeof(float) * m, yoff + 4 * i, err)) ||
		    (rc = ooc_rd(xfd, xbuf, sizeof(float) * m, xoff + 4 * i, err)))
			return rc;
		for (size_t j = 0; j < m; j++) {
			ybuf[j] = xpay ? xbuf[j] + a * ybuf[j] : ybuf[j] + a * xbuf[j];
			if (yy)
				*yy += (double)ybuf[j] * ybuf[j];
		}
		if ((rc = ooc_wr(yfd, ybuf, sizeof(float) * m, yoff + 4 * i, err)))
			return rc;
	}
	return 0;
}

/* Streamed copy of n floats, non-finite values as 0; *yy its ||.||^2. */
static int stream_copy(int dfd, uint64_t doff, int sfd, uint64_t soff, uint64_t n, size_t len, float *buf,
		       double *yy, rc_err *err)
{
	*yy = 0;
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		int rc;
		if ((rc = ooc_rd(sfd, buf, sizeof(float) * m, soff + 4 * i, err)))
			return rc;
		for (size_t j = 0; j < m; j++) {
			if (!isfinite(buf[j]))
				buf[j] = 0.0f;
			*yy += (double)buf[j] * buf[j];
		}
		if ((rc = ooc_wr(dfd, buf, sizeof(float) * m, doff + 4 * i, err)))
			return rc;
	}
	return 0;
}

/* The out-of-core FDK start into xfd (ooc.h) under the plan's budget (none:
 * the iterations' slabs), its filtered stack in pscr's first stack. */
static int fdk_start(ooc_run *R, int stack, int xfd, int pscr, rc_err *err)
{
	rc_recon_spec f = *R->s;
	rc_algo_params_default(&f.algo, RC_ALGO_FDK);
	f.algo.scan = R->s->algo.scan;
	rc_ooc_plan fp;
	float *slab = NULL;
	int rc = rc_ooc_plan_fdk(&f, R->g, R->budget, &fp, err);
	if (rc)
		return rc;
	if (!R->budget) {
		fp.slab_nz = R->nzs;
		fp.filter_chunk = rc_ooc_filters_once(R->g) ? R->nk : 0;
	}
	if (fp.filter_chunk > 0 && (rc = rc_ooc_filter(&f, R->g, stack, pscr, fp.filter_chunk, R->cancel, err)))
		return rc;
	if (!(slab = malloc(sizeof(float) * R->plane * (size_t)fp.slab_nz)))
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a slab of %d slices", fp.slab_nz);
	rc_algo_hooks h = { .cancel = R->cancel };
	for (int z0 = 0; z0 < R->nz && !rc; z0 += fp.slab_nz) {
		int z1 = z0 + fp.slab_nz < R->nz ? z0 + fp.slab_nz : R->nz;
		rc_recon_report rep;
		if (!(rc = ooc_cancelled(R, err)) &&
		    !(rc = rc_ooc_fdk_slab(&f, R->g, fp.filter_chunk > 0 ? pscr : stack, fp.filter_chunk > 0, z0, z1,
					   slab, &h, &rep, err)))
			rc = ooc_wr(xfd, slab, sizeof(float) * R->plane * (size_t)(z1 - z0),
				sizeof(float) * R->plane * (size_t)z0, err);
	}
	free(slab);
	return rc;
}

const char *ooc_iteration_end(ooc_run *R, const rc_algo_hooks *hooks, int it, double res, double t0,
			      rc_recon_report *rep)
{
	rep->iterations_done = it;
	const char *why = rc_stop_check(&R->stop, res);
	if (hooks && hooks->progress) {
		rc_progress pr = { .iteration = it, .of = R->s->algo.iterations, .residual = res,
				   .elapsed_s = rc_now_s() - t0, .stopped = why };
		hooks->progress(hooks->ud, &pr);
	}
	return why;
}

/* x clamped at lo (fill: set to lo), slab by slab; ax: the floored
 * slabs' projection onto views k0..k1 added there (the pass read them) */
int ooc_floor_x(ooc_run *R, int xfd, float lo, int fill, float *ax, int k0, int k1, rc_err *err)
{
	for (int i = 0; i < R->slabs; i++) {
		int z0, z1, rc;
		ooc_slab_z(R, i, &z0, &z1);
		size_t n = R->plane * (size_t)(z1 - z0);
		uint64_t off = sizeof(float) * R->plane * (size_t)z0;
		/* the start's floor (ax) cancellable per slab, as its own pass was;
		 * CGLS's last clamp not, as in memory */
		if ((ax && (rc = ooc_cancelled(R, err))) || (rc = ooc_rd(xfd, R->a, sizeof(float) * n, off, err)))
			return rc;
		for (size_t j = 0; j < n; j++)
			R->a[j] = !fill && R->a[j] > lo ? R->a[j] : lo;
		if ((rc = ooc_wr(xfd, R->a, sizeof(float) * n, off, err)) ||
		    (ax && (rc = ooc_fp_add(R, R->a, i, k0, k1, ax, err))))
			return rc;
	}
	return 0;
}

/* ---- TV (algo_util.h's rc_tv; tv_host.h's operator) ------------------ */

/* The slices a..b of volume file fd (at off) into buf; slice a from carry
 * instead where carry is given (x's slice already overwritten in place). */
static int read_slices(ooc_run *R, int fd, uint64_t off, int a, int b, const float *carry, float *buf, rc_err *err)
{
	int from = a;
	if (carry) {
		memcpy(buf, carry, sizeof(float) * R->plane);
		from = a + 1;
	}
	return from < b ? ooc_rd(fd, buf + (size_t)(from - a) * R->plane, sizeof(float) * R->plane * (size_t)(b - from),
			     off + sizeof(float) * R->plane * (size_t)from, err)
			: 0;
}

/* *t = D^T W(w) D d over slab z0..z1 (w and d volume files; d the same as
 * w: the gradient), *d the slab of d: the operator over the slab and a
 * slice of halo each side, whose values inside the slab are the whole
 * volume's (the stencil reaches one slice each way: tv_host.c). */
static int tv_slab(ooc_run *R, int wfd, uint64_t woff, int dfd, uint64_t doff, int z0, int z1, const float **t,
		   const float **d, rc_err *err)
{
	int a = z0 > 0 ? z0 - 1 : 0, b = z1 < R->nz ? z1 + 1 : R->nz, rc;
	int same = wfd == dfd && woff == doff;
	rc_tv_shape sh = { .nx = R->s->vol.nx, .ny = R->s->vol.ny, .nz = b - a, .planar = 0 };
	if ((rc = read_slices(R, wfd, woff, a, b, NULL, R->tw, err)) ||
	    (!same && (rc = read_slices(R, dfd, doff, a, b, NULL, R->td, err))))
		return rc;
	rc_tv_apply_in(&sh, R->tw, same ? R->tw : R->td, R->to, R->tv_eps, R->s->threads, R->tvs);
	*t = R->to + (size_t)(z0 - a) * R->plane;
	*d = (same ? R->tw : R->td) + (size_t)(z0 - a) * R->plane;
	return 0;
}

/* d^T L(x) d (x in xfd, d at doff of vscr), slab by slab */
static int tv_dot(ooc_run *R, int xfd, int vscr, uint64_t doff, double *dld, rc_err *err)
{
	*dld = 0;
	for (int i = 0; i < R->slabs; i++) {
		int z0, z1, rc;
		const float *t, *d;
		ooc_slab_z(R, i, &z0, &z1);
		if ((rc = ooc_cancelled(R, err)) || (rc = tv_slab(R, xfd, 0, vscr, doff, z0, z1, &t, &d, err)))
			return rc;
		for (size_t j = 0; j < R->plane * (size_t)(z1 - z0); j++)
			*dld += (double)d[j] * t[j];
	}
	return 0;
}

/* One step of rc_tv_descend on w (nzw slices: the slab's nzm from slice
 * lo, its halo around): x -= s grad TV(x) on the slab's slices, the
 * slab's last slice as it was before the step saved into carry (the next
 * slab's lower halo); clamp: at 0, as the last step's where nonnegative. */
void ooc_tv_step(ooc_run *R, float *w, int nzw, int lo, int nzm, float *carry, int clamp)
{
	rc_tv_shape sh = { .nx = R->s->vol.nx, .ny = R->s->vol.ny, .nz = nzw, .planar = 0 };
	rc_tv_apply_in(&sh, w, w, R->to, R->tv_eps, R->s->threads, R->tvs);
	float *x = w + (size_t)lo * R->plane;
	const float *g = R->to + (size_t)lo * R->plane;
	size_t n = R->plane * (size_t)nzm;
	memcpy(carry, x + (size_t)(nzm - 1) * R->plane, sizeof(float) * R->plane);
	for (size_t j = 0; j < n; j++) {
		x[j] = rc_ew_axpy(x[j], R->tv_step, g[j]);
		if (clamp) /* the clamp is update with lambda 0, as rc_tv_descend's */
			x[j] = rc_ew_update(x[j], g[j], g[j], 0.0f, 1);
	}
}

/* rc_tv_descend on x (xfd) in place: R->tv_steps passes of x -= kappa s /
 * steps grad TV(x), slab after slab, each slab's lower halo the slice the
 * slab below had before its update (carry); the clamp at 0 with the last. */
static int tv_descend(ooc_run *R, int xfd, int nonneg, rc_err *err)
{
	for (int k = 0; k < R->tv_steps; k++)
		for (int i = 0; i < R->slabs; i++) {
			int z0, z1, rc, last = k == R->tv_steps - 1;
			ooc_slab_z(R, i, &z0, &z1);
			int a = z0 > 0 ? z0 - 1 : 0, b = z1 < R->nz ? z1 + 1 : R->nz;
			size_t n = R->plane * (size_t)(z1 - z0);
			if ((rc = ooc_cancelled(R, err)) ||
			    (rc = read_slices(R, xfd, 0, a, b, a < z0 ? R->carry : NULL, R->tw, err)))
				return rc;
			ooc_tv_step(R, R->tw, b - a, z0 - a, z1 - z0, R->carry, last && nonneg);
			if ((rc = ooc_wr(xfd, R->tw + (size_t)(z0 - a) * R->plane, sizeof(float) * n,
					 sizeof(float) * R->plane * (size_t)z0, err)))
				return rc;
		}
	return 0;
}

/* TV's scale from sum p and sum A 1 (rc_tv_new's, over R->S blocks of views):
 * on, eps and SIRT's step */
void ooc_tv_init(ooc_run *R, double a1sum)
{
	double m = a1sum > 0.0 ? R->psum / a1sum : 0.0, scale = isfinite(m) && m > 0.0 ? m : 0.0;
	R->tv_steps = rc_ooc_iter_tv_steps(R->s); /* a phase per block of views; the slots are sized by it */
	R->tv_step = (float)(-R->tv_weight * scale / R->tv_steps);
	R->tv_scale = scale;
	R->tv_eps = (float)(RC_TV_EPS_REL * scale);
	R->tv_on = scale > 0.0;
}

/* What the in-memory run takes from the whole stack, read in pieces of
 * whole blocks of RC_NOISE_ROWS_PER_ITEM rows (so that the noise estimates
 * are the whole stack's, noise.h), non-finite values as 0: the stop rules'
 * thresholds (rc_stop_init's: ||p||, the noise energy), sum p and the TV
 * weight (rc_tv_weight's relative noise), MLEM's sum p+ and max p.  Called
 * after the start (its FDK plans against the whole budget, and this pass
 * fills the chunk); no pass where nothing needs one (cgls: the tolerance's
 * ||p|| is its copy r = p's, iterate). */
int ooc_stack_stats(ooc_run *R, int cgls, rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	const int nu = (int)R->nu;
	const uint64_t n = R->P / 4;
	const int e2 = a->stop_discrepancy > 0.0 && !(a->noise_sigma > 0.0);
	const int e4 = a->tv_auto && a->tv_weight > 0.0 && !(a->noise_sigma > 0.0);
	const int pass = e2 || a->tv_weight > 0.0 || R->em || (!cgls && a->stop_tolerance > 0.0);
	size_t rows = R->view / R->nu * (size_t)R->nk / RC_NOISE_ROWS_PER_ITEM * RC_NOISE_ROWS_PER_ITEM;
	float *buf = R->chunk, *own = NULL;
	double pp = 0.0, psum = 0.0, ppos = 0.0, pmax = 0.0, en2 = 0.0, en4 = 0.0;
	int rc = 0, oom = 0;
	if (pass && !rows) { /* a chunk of fewer rows than a block: a block of its own */
		rows = RC_NOISE_ROWS_PER_ITEM;
		if (!(buf = own = malloc(sizeof(float) * rows * R->nu)))
			return rc_fail(err, RC_ENOMEM, "", "out of memory for %zu rows of the stack", rows);
	}
	const uint64_t len = (uint64_t)rows * R->nu;
	for (uint64_t i = 0; pass && i < n && !rc; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : (size_t)len;
		if ((rc = ooc_cancelled(R, err)) || (rc = ooc_rd(R->stack, buf, sizeof(float) * m, 4 * i, err)))
			break;
		for (size_t j = 0; j < m; j++) {
			if (!isfinite(buf[j]))
				buf[j] = 0.0f;
			pp += (double)buf[j] * buf[j];
			psum += buf[j];
			if (buf[j] > 0.0f) /* em_start's */
				ppos += buf[j];
			pmax = buf[j] > pmax ? buf[j] : pmax;
		}
		if (e2 && rc_noise_energy_add(buf, m, nu, 2, R->s->threads, &en2))
			oom = 1;
		if (e4 && rc_noise_energy_add(buf, m, nu, 4, R->s->threads, &en4))
			oom = 1;
	}
	free(own);
	if (rc)
		return rc;
	/* rc_stop_init's thresholds */
	R->stop = (rc_stop){ .stagnation = a->stop_stagnation };
	if (a->stop_tolerance > 0.0)
		R->stop.tolerance = a->stop_tolerance * sqrt(pp);
	if (a->stop_discrepancy > 0.0) {
		double e = a->noise_sigma > 0.0 ? a->noise_sigma * a->noise_sigma * (double)n : oom ? -1.0 : en2;
		R->stop.discrepancy = e > 0.0 ? a->stop_discrepancy * sqrt(e) : 0.0;
	}
	R->psum = psum;
	R->ppos = ppos;
	R->pmax = pmax;
	/* rc_tv_weight's: rc_noise_relative's sqrt(e / pp) */
	R->tv_weight = a->tv_weight;
	if (a->tv_auto && a->tv_weight > 0.0) {
		double e = a->noise_sigma > 0.0 ? a->noise_sigma * a->noise_sigma * (double)n : oom ? -1.0 : en4;
		double rel = e < 0.0 ? -1.0 : pp > 0.0 ? sqrt(e / pp) : 0.0;
		R->tv_weight = rc_tv_weight_rel(a, rel);
	}
	return 0;
}

/* x0 into xfd: 0 (the file truncated to its size reads zeros) or FDK's
 * (algorithm.initial fdk, or auto where the in-memory run takes it:
 * rc_algo_start); *start says which. */
int ooc_start_x(ooc_run *R, int stack, int xfd, int pscr, const rc_algo_hooks *hooks, rc_initial *start, rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	int rc;
	*start = a->initial;
	if (*start == RC_INITIAL_AUTO)
		*start = !rc_fdk_suits(R->g, a->scan, NULL) ? RC_INITIAL_FDK : RC_INITIAL_ZERO;
	if (*start == RC_INITIAL_GIVEN)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.initial", "out of core, the start is zero or fdk");
	if (ftruncate(xfd, 0) || ftruncate(xfd, (off_t)R->V))
		return rc_fail(err, RC_EIO, "", "cannot size the volume file: %s", strerror(errno));
	if (*start == RC_INITIAL_FDK) {
		if (hooks && hooks->phase)
			hooks->phase(hooks->ud, RC_PHASE_FDK_START);
		if ((rc = fdk_start(R, stack, xfd, pscr, err)))
			return rc;
		if (hooks && hooks->phase)
			hooks->phase(hooks->ud, RC_PHASE_ITERATING);
	}
	return 0;
}

/* n floats of fd from off replaced by their guarded inverse (the
 * backend's inv_guarded: 1 / v where v > rel * max, else 0), two passes */
int ooc_inv_guarded(ooc_run *R, int fd, uint64_t off, uint64_t n, double rel, rc_err *err)
{
	size_t len = R->plane * (size_t)R->nzs;
	float mx = 0.0f;
	int rc;
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		if ((rc = ooc_rd(fd, R->a, sizeof(float) * m, off + 4 * i, err)))
			return rc;
		for (size_t j = 0; j < m; j++)
			mx = rc_ew_max(mx, R->a[j]);
	}
	float eps = (float)(rel * mx);
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		if ((rc = ooc_rd(fd, R->a, sizeof(float) * m, off + 4 * i, err)))
			return rc;
		for (size_t j = 0; j < m; j++)
			R->a[j] = rc_ew_inv_guarded(R->a[j], eps);
		if ((rc = ooc_wr(fd, R->a, sizeof(float) * m, off + 4 * i, err)))
			return rc;
	}
	return 0;
}

/* SIRT: views k0..k1 of A x in R->chunk become rinv (p - A x) (algo_sart.c's
 * residual; p's non-finite values as 0); *r2 += ||p - A x||^2 there */
int ooc_sirt_residual(ooc_run *R, int k0, int k1, double *r2, rc_err *err)
{
	uint64_t n = (uint64_t)R->view * (uint64_t)(k1 - k0), off = 4 * (uint64_t)R->view * (uint64_t)k0;
	size_t len = R->plane * (size_t)R->nzs;
	int rc;
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		if ((rc = ooc_rd(R->stack, R->a, sizeof(float) * m, off + 4 * i, err)) ||
		    (!R->em && (rc = ooc_rd(R->pscr, R->b, sizeof(float) * m, off + 4 * i, err))))
			return rc;
		float *e = R->chunk + i;
		for (size_t j = 0; j < m; j++) {
			float p = isfinite(R->a[j]) ? R->a[j] : 0.0f, d = rc_ew_residual(p, e[j]);
			*r2 += (double)d * d;
			/* MLEM: the ratio p / A x instead (vec_host.c's rc_vratio) */
			e[j] = R->em ? rc_ew_ratio(e[j], p, R->em_eps) : rc_ew_weigh(d, R->b[j]);
		}
	}
	return 0;
}

/* The start SIRT, MLEM, SART and OS-EM share: x0 (ooc_start_x), the stack's
 * pass, A 1 into pscr at 0 (R's, EM's start, TV's scale), TV's scale; the
 * start clamped at 0 where nonnegative; MLEM's (algo_sart.c's em_start)
 * the constant x0 = sum p+ / sum A 1, or at least RC_EM_START_FLOOR of
 * it; then (not EM) rinv = 1 / A 1 guarded in place.  ax (SART's, OS-EM's
 * first block's A x, views k0..k1): zeroed, and formed where x is floored
 * (*ax_done 1) or zero (*ax_done 1: nothing to add). */
int ooc_em_start(ooc_run *R, int stack, int xfd, int pscr, const rc_algo_hooks *hooks, rc_initial *start,
		 float *ax, int k0, int k1, int *ax_done, rc_err *err)
{
	double none;
	int rc = ooc_start_x(R, stack, xfd, pscr, hooks, start, err);
	if (rc || (rc = ooc_stack_stats(R, 0, err)) || (rc = ooc_forward(R, -1, 0, pscr, 0, 0, &none, err)))
		return rc;
	if (R->tv_weight > 0.0)
		ooc_tv_init(R, R->fsum);
	float x0 = R->fsum > 0.0 && isfinite(R->ppos / R->fsum) ? (float)(R->ppos / R->fsum) : 0.0f;
	R->em_eps = (float)(1e-20 * (R->pmax > 1.0 ? R->pmax : 1.0));
	/* the stack's pass and ooc_forward used the chunk: ax is free now */
	if (ax)
		memset(ax, 0, sizeof(float) * R->view * (size_t)(k1 - k0));
	int floor = R->em || (*start != RC_INITIAL_ZERO && R->s->algo.nonnegative);
	if (ax_done)
		*ax_done = floor || *start == RC_INITIAL_ZERO;
	if (R->em)
		rc = ooc_floor_x(R, xfd, *start != RC_INITIAL_ZERO ? (float)(RC_EM_START_FLOOR * x0) : x0,
				 *start == RC_INITIAL_ZERO, ax, k0, k1, err);
	else if (floor)
		rc = ooc_floor_x(R, xfd, 0.0f, 0, ax, k0, k1, err);
	if (rc || R->em)
		return rc;
	return ooc_inv_guarded(R, pscr, 0, R->P / 4, RC_ROWSUM_REL_EPS, err);
}

/* SIRT: x's slab z0..z1 += lambda C (A^T e) (R->b), clamped with nonnegative */
static int sirt_update(ooc_run *R, int z0, int z1, int xfd, rc_err *err)
{
	size_t n = R->plane * (size_t)(z1 - z0);
	uint64_t off = sizeof(float) * R->plane * (size_t)z0;
	const rc_algo_params *a = &R->s->algo;
	int rc;
	if ((rc = ooc_rd(R->vscr, R->a, sizeof(float) * n, off, err)) || (rc = ooc_rd(xfd, R->c, sizeof(float) * n, off, err)))
		return rc;
	for (size_t j = 0; j < n; j++)
		R->c[j] = R->em ? rc_ew_mul(R->c[j], R->b[j], R->a[j]) /* x *= C A^T (p / A x) */
				: rc_ew_update(R->c[j], R->b[j], R->a[j], (float)a->relaxation, a->nonnegative);
	return ooc_wr(xfd, R->c, sizeof(float) * n, off, err);
}

/* SIRT (algo_sirt.c): x += lambda C A^T (rinv (p - A x)), rinv = 1 / A 1
 * and C = 1 / A^T 1 guarded as the backend guards them; scratch: C at 0 of
 * vscr, rinv at 0 and the weighted residual at P of pscr.  Per iteration
 * a forward pass (the residual formed per chunk of views) and a back
 * projection pass that updates x slab by slab. */
static int iterate_sirt(ooc_run *R, int stack, int xfd, int vscr, int pscr, const rc_algo_hooks *hooks,
			rc_recon_report *rep, rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	const double t0 = rc_now_s();
	double r2, none;
	rc_initial start;
	int rc = ooc_em_start(R, stack, xfd, pscr, hooks, &start, NULL, 0, 0, NULL, err);
	if (rc || (rc = backward(R, -1, 0, vscr, 0, 0, &none, err)) ||
	    (rc = ooc_inv_guarded(R, vscr, 0, R->V / 4, RC_COLSUM_REL_EPS, err)))
		return rc;
	for (int it = 1; it <= a->iterations; it++) {
		if ((rc = ooc_cancelled(R, err)))
			return rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
		r2 = 0;
		if ((rc = ooc_forward(R, xfd, 0, pscr, R->P, 1, &r2, err)) ||
		    (rc = backward(R, pscr, R->P, xfd, 0, 1, &none, err)) ||
		    (R->tv_on && (rc = tv_descend(R, xfd, a->nonnegative || R->em, err))))
			return rc;
		if (ooc_iteration_end(R, hooks, it, sqrt(r2), t0, rep))
			break;
	}
	return 0;
}

static int iterate(ooc_run *R, int stack, int xfd, int vscr, int pscr, const rc_algo_hooks *hooks, rc_recon_report *rep,
		   rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	const double t0 = rc_now_s();
	/* scratch: d at 0 and s at V of vscr; q at 0 and r at P of pscr */
	const uint64_t D = 0, S = R->V, Q = 0, Rr = R->P;
	const uint64_t nvox = R->V / 4, nproj = R->P / 4;
	/* the vector passes stream both spaces in pieces of a slab, in a and b */
	size_t slen = R->plane * (size_t)R->nzs;
	double pp, rr, qq, gamma, gnew, curv = 0.0;
	rc_initial start;
	int rc = ooc_start_x(R, stack, xfd, pscr, hooks, &start, err);
	if (rc || (rc = ooc_stack_stats(R, 1, err)))
		return rc;
	/* r = p (- A x0); ||p|| the tolerance's (rc_stop_init's) */
	if ((rc = stream_copy(pscr, Rr, stack, 0, nproj, slen, R->a, &pp, err)))
		return rc;
	rr = pp;
	if (a->stop_tolerance > 0.0)
		R->stop.tolerance = a->stop_tolerance * sqrt(pp);
	if (start == RC_INITIAL_FDK && ((rc = ooc_forward(R, xfd, 0, pscr, Q, 0, &qq, err)) ||
					(rc = stream_axpy(pscr, Rr, pscr, Q, nproj, slen, -1.0f, 0, R->a, R->b, &rr,
							  err))))
		return rc;
	/* TV (algo_cgls.c): beta_tv = kappa s a, s = sum p / sum A 1 and a the
	 * mean of A^T A 1, whose sum is ||A 1||^2 (A^T A's transpose pair: no
	 * back projection, as in memory): a forward pass of ones into q */
	if (R->tv_weight > 0.0) {
		if ((rc = ooc_forward(R, -1, 0, pscr, Q, 0, &qq, err)))
			return rc;
		ooc_tv_init(R, R->fsum);
		R->tvneg = R->tv_on ? (float)(-R->tv_weight * R->tv_scale * qq / (double)nvox) : 0.0f;
	}
	/* s = A^T r (- beta_tv grad TV(x0)), d = s, gamma = ||s||^2 */
	R->tvx = R->tv_on && start != RC_INITIAL_ZERO;
	if ((rc = backward(R, pscr, Rr, vscr, S, 0, &gamma, err)) ||
	    (rc = stream_copy(vscr, D, vscr, S, nvox, slen, R->a, &gnew, err)))
		return rc;
	R->tvx = R->tv_on;
	double res = sqrt(rr);
	int active = 1, it;
	for (it = 1; it <= a->iterations; it++) {
		if ((rc = ooc_cancelled(R, err)))
			return rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
		active = active && gamma > 0.0;
		if (active) {
			double dld = 0.0;
			if ((rc = ooc_forward(R, vscr, D, pscr, Q, 0, &qq, err)) ||
			    (R->tv_on && (rc = tv_dot(R, xfd, vscr, D, &dld, err))))
				return rc;
			/* TV's curvature along d adds to ||A d||^2 */
			curv = qq - (R->tv_on ? R->tvneg * dld : 0.0);
			active = curv > 0.0;
		}
		if (active) {
			float alpha = (float)(gamma / curv);
			if ((rc = stream_axpy(pscr, Rr, pscr, Q, nproj, slen, -alpha, 0, R->a, R->b, &rr, err)) ||
			    (rc = stream_axpy(xfd, 0, vscr, D, nvox, slen, alpha, 0, R->a, R->b, NULL, err)))
				return rc;
			res = sqrt(rr);
		}
		if (active && it < a->iterations) {
			if ((rc = backward(R, pscr, Rr, vscr, S, 0, &gnew, err)))
				return rc;
			/* with TV, d restarts as s every RC_CGLS_RESTART iterations */
			int restart = R->tv_on && it % RC_CGLS_RESTART == 0;
			if (restart)
				active = gnew > 0.0;
			float beta = active && !restart ? (float)(gnew / gamma) : 0.0f;
			/* d = s + beta d */
			if ((rc = stream_axpy(vscr, D, vscr, S, nvox, slen, beta, 1, R->a, R->b, NULL, err)))
				return rc;
			if (active)
				gamma = gnew;
		}
		if (ooc_iteration_end(R, hooks, it, res, t0, rep))
			break;
	}
	if (a->nonnegative && (rc = ooc_floor_x(R, xfd, 0.0f, 0, NULL, 0, 0, err)))
		return rc;
	rep->relative_residual = a->nonnegative || !(pp > 0) ? NAN : res / sqrt(pp);
	return 0;
}

/* What the extended run would need in core (memory.h's prediction of the
 * extended volume). */
static uint64_t extended_need(const rc_recon_spec *s, const rc_extent *e)
{
	rc_recon_spec x = *s;
	x.vol = e->run;
	x.algo.extend = RC_EXTEND_OFF;
	return rc_plan_memory(&x, 0);
}

int rc_ooc_iter(const rc_recon_spec *s, const rc_geom *g, int stack, int xfd, int vscr, int pscr,
		const rc_ooc_plan *p, const rc_algo_hooks *hooks, rc_recon_report *rep, rc_err *err)
{
	double t0 = rc_now_s();
	memset(rep, 0, sizeof *rep);
	rep->relative_residual = NAN;
	const char *why = rc_ooc_iter_refusal(s, g);
	if (why)
		return rc_fail(err, RC_EUNSUPPORTED, "volume", "%s", why);
	ooc_run R = { .s = s, .g = g, .pair = rc_ooc_iter_pair(s, g), .cancel = hooks ? hooks->cancel : NULL };
	R.budget = p->budget_bytes;
	R.stack = stack;
	R.pscr = pscr;
	R.vscr = vscr;
	R.keep = rc_ooc_iter_colsum_kept(s);
	R.nz = s->vol.nz;
	R.nzs = p->slab_nz > 0 && p->slab_nz < R.nz ? p->slab_nz : R.nz;
	R.slabs = (R.nz + R.nzs - 1) / R.nzs;
	R.nviews = s->geom.nviews;
	R.chunks = p->chunks > 0 && p->chunks < R.nviews ? p->chunks : 1;
	/* SART and OS-EM: a block of views at a time (the plan's chunks are the blocks) */
	const int subs = rc_ooc_iter_subsets(s);
	R.S = subs ? subs : 1;
	R.bpvox = s->algo.name == RC_ALGO_SART; /* rc_sart_run's on a cone or matrices stack */
	if (subs)
		R.chunks = R.S;
	R.nk = (R.nviews + R.chunks - 1) / R.chunks;
	R.chunks = (R.nviews + R.nk - 1) / R.nk;
	R.nu = (size_t)s->geom.det.nu;
	R.view = R.nu * (size_t)s->geom.det.nv;
	R.plane = (size_t)s->vol.nx * (size_t)s->vol.ny;
	R.V = 4 * (uint64_t)R.plane * (uint64_t)R.nz;
	R.P = 4 * (uint64_t)R.view * (uint64_t)R.nviews;
	int most = 0, rc = 0;
	R.r0 = calloc((size_t)R.slabs, sizeof(int));
	R.r1 = calloc((size_t)R.slabs, sizeof(int));
	if (R.r0 && R.r1)
		for (int i = 0; i < R.slabs; i++) {
			int z0, z1;
			ooc_slab_z(&R, i, &z0, &z1);
			rc_ooc_slab_rows(g, z0, z1, &R.r0[i], &R.r1[i]);
			most = R.r1[i] - R.r0[i] > most ? R.r1[i] - R.r0[i] : most;
		}
	size_t slab = R.plane * (size_t)R.nzs, chunk = R.view * (size_t)R.nk;
	R.chunk = malloc(sizeof(float) * chunk);
	R.rows = malloc(sizeof(float) * (size_t)(most > 0 ? most : 1) * R.nu * (size_t)R.nk);
	R.a = malloc(sizeof(float) * slab);
	R.b = malloc(sizeof(float) * slab);
	/* SIRT and MLEM: one loop (algo_sart.c's); SART and OS-EM its blocks */
	int sirt = !subs && (s->algo.name == RC_ALGO_SIRT || s->algo.name == RC_ALGO_MLEM);
	R.em = s->algo.name == RC_ALGO_MLEM;
	R.c = sirt ? malloc(sizeof(float) * slab) : NULL;
	/* TV: slabs with a slice of halo each side (CGLS: w and d apart), SIRT's carried slice */
	int tv = s->algo.tv_weight > 0.0;
	size_t hslab = R.plane * (size_t)(R.nzs + 2 < R.nz ? R.nzs + 2 : R.nz);
	R.tw = tv && !subs ? malloc(sizeof(float) * hslab) : NULL;
	R.to = tv ? malloc(sizeof(float) * hslab) : NULL;
	R.td = tv && !sirt && !subs ? malloc(sizeof(float) * hslab) : NULL;
	R.carry = tv && sirt ? malloc(sizeof(float) * R.plane) : NULL;
	rc_tv_shape tsh = { .nx = s->vol.nx, .ny = s->vol.ny, .nz = 1 };
	R.tvs = tv ? malloc(sizeof(float) * rc_tv_scratch_floats(&tsh, s->threads)) : NULL;
	R.xfd = xfd;
	/* SART and OS-EM: the next block's A x, T + 1 slabs in flight with
	 * their halo and T carried slices (T: TV's steps per block), the
	 * blocks' order and column sums' maxima, a slice of closed-form sums */
	int tmax = subs ? rc_ooc_iter_tv_steps(s) : 0;
	if (subs) {
		R.next = malloc(sizeof(float) * chunk);
		R.order = malloc(sizeof(int) * (size_t)R.S);
		R.cmax = malloc(sizeof(float) * (size_t)R.S);
		R.slot = malloc(sizeof(float) * (size_t)(tmax + 1) * R.plane * (size_t)(R.nzs + 2));
	}
	int form = rc_ooc_iter_form_may(s, g);
	R.fmap = form ? malloc(sizeof(float) * R.plane) : NULL;
	R.fsums = form ? malloc(sizeof(double) * R.plane) : NULL;
	R.carries = tmax > 0 ? malloc(sizeof(float) * (size_t)tmax * R.plane) : NULL;
	if (!R.r0 || !R.r1 || !R.chunk || !R.rows || !R.a || !R.b || (sirt && !R.c) ||
	    (tv && (!R.to || !R.tvs || (!subs && !R.tw) || (!sirt && !subs && !R.td) || (sirt && !R.carry))) ||
	    (subs && (!R.next || !R.order || !R.cmax || !R.slot)) || (form && (!R.fmap || !R.fsums)) ||
	    (tmax > 0 && !R.carries)) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a slab of %d slices and a chunk of %d views", R.nzs,
			     R.nk);
		goto out;
	}
	snprintf(rep->projector, sizeof rep->projector, "%s",
		 R.pair == RC_PROJECTOR_FOOTPRINT ? "footprint" : "splat");
	snprintf(rep->engine, sizeof rep->engine, "cpu");
	/* the long object (extend.h): out of core only where the run is not extended */
	rc_extent ext;
	if (s->extent)
		ext = *s->extent;
	else if ((rc = rc_extent_decide_file(s, g, stack, &ext, err)))
		goto out;
	rep->run_nz = ext.run.nz;
	rep->run_z0 = ext.z0;
	rep->mass_beyond = ext.mass_beyond;
	if (ext.run.nz != s->vol.nz) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "algorithm.extend",
			     "out of core, the iterative methods run the asked volume only, and algorithm.extend \"%s\" extends "
			     "it from %d to %d slices (%s; the extended run needs about %llu bytes in core): ask "
			     "algorithm.extend \"off\" (the mass beyond then lands in the end slices), a volume that "
			     "holds the object, or a --memory-limit that fits it",
			     s->algo.extend == RC_EXTEND_ON ? "on" : "auto", s->vol.nz, ext.run.nz,
			     ext.mass_beyond > 0 ? "the data show mass beyond it" : "no ray tells whether mass lies beyond it",
			     (unsigned long long)extended_need(s, &ext));
		goto out;
	}
	rc = subs   ? ooc_iterate_subsets(&R, stack, xfd, pscr, hooks, rep, err)
	     : sirt ? iterate_sirt(&R, stack, xfd, vscr, pscr, hooks, rep, err)
		    : iterate(&R, stack, xfd, vscr, pscr, hooks, rep, err);
out:
	free(R.r0);
	free(R.r1);
	free(R.chunk);
	free(R.rows);
	free(R.a);
	free(R.b);
	free(R.c);
	free(R.tw);
	free(R.to);
	free(R.td);
	free(R.carry);
	free(R.tvs);
	free(R.next);
	free(R.order);
	free(R.cmax);
	free(R.fmap);
	free(R.fsums);
	free(R.slot);
	free(R.carries);
	rep->tv_weight = R.tv_weight;
	rep->seconds = rc_now_s() - t0;
	return rc;
}
