/*
 * SART, paper 000 Eq. 1:
 *
 *   v_i += lambda * [ sum_j a_ij (p_j - sum_n a_nj v_n) / sum_n a_nj ] / sum_j a_ij
 *
 * i.e. v += lambda * C * B( R * (p - A v) ) with A = rc_algo_fp (splatting
 * or ray casting: backend.h),
 * R = 1 / A(1) (the row sums: each ray's length through the volume grid),
 * B = RC_BP_VOXEL (the voxel-driven back projector with its 1/w^2 weight,
 * the one paper 000 and the FDK use; on a fan or parallel stack the
 * matched transpose instead: rc_sart_run says why) and C = 1 / B(1) (the
 * column sums).
 * Because C comes from the same B as the numerator, any per-voxel scale of
 * B cancels: B need not be the exact transpose of A, which is why the fast
 * voxel-driven back projector is the right one here.  The sums are over all
 * views, one update per iteration, as the paper does.
 *
 * Ordered subsets (p->subsets = S > 1): the views are cut into S contiguous
 * blocks, visited in bit-reversed order so that consecutive updates come
 * from far-apart angles; each block has its own column sums C_s = 1 / B_s(1)
 * (colsum.h: kept for every block, written from their closed form, or
 * recomputed before each block).
 *
 * SIRT (algo_sirt.c) runs this same loop with B = rc_algo_bp_matched, the exact
 * transpose of A, and one block; MLEM (algo_mlem.c) runs it as OS-EM: the
 * multiplicative update x *= C_s A_s^T(p / A_s x) per block, no R.
 *
 * Regularisation: with nonnegative the update clamps at 0; with TV a TV
 * phase follows each block (algo_util.h's rc_tv_descend, kappa * s per
 * phase): a block's update moves x about as far as a whole-set update, so
 * each gets a whole-set update's share of TV and the fixed point is the
 * same for any S.  (One phase per iteration with S times the step, as
 * before, returned an iterate displaced by S blocks' worth of TV: its end
 * point grew with S, docs/algorithms.md.)  The stopping rule is checked
 * after each iteration on its residual.
 *
 * Vectors, allocated once per run on the backend: the measured stack, R
 * and the residual (projection-sized each), the iterate, the update, C (or
 * C_s) and, with subsets, the previous iterate (so that a cancel or a
 * device failure between blocks can restore the last complete iterate).
 * The reported residual is ||p - A v|| summed over the blocks of the
 * iteration, each block measured just before its update (with S = 1: the
 * residual of the iterate the iteration started from); it costs no extra
 * projection.  From `initial: zero` the first block's A v is x0 A(1), no
 * projection (block_forward).
 */
#include "algo/algo_util.h"
#include "algo/colsum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* MLEM's start: the constant sum(p+) / sum(A 1) (the projections then
 * match the data in total; EM cannot move a voxel away from 0), and the
 * ratio's guard: A x below 1e-20 max(1, max p) is a ray the volume does not
 * reach; it keeps p+/Ax below 1e20 so that no inf enters the back
 * projection. */
static int em_start(rc_backend *b, const float *proj, const rc_vec *a1, float *x0, float *eps, rc_err *err)
{
	size_t np = rc_geom_proj_count(b->geom);
	double *sums = malloc((size_t)b->nbatch * sizeof *sums), psum = 0.0, pmax = 0.0;
	int rc;
	if (!sums)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d batches", b->nbatch);
	if (!(rc = rc_bk_dot(b, a1, NULL, sums, err))) {
		for (size_t i = 0; i < np; i++) {
			if (proj[i] > 0.0f)
				psum += proj[i];
			pmax = proj[i] > pmax ? proj[i] : pmax;
		}
		double asum = rc_bk_total(b, sums);
		*x0 = asum > 0.0 && isfinite(psum / asum) ? (float)(psum / asum) : 0.0f;
		*eps = (float)(1e-20 * (pmax > 1.0 ? pmax : 1.0));
	}
	free(sums);
	return rc;
}

/* The forward projection A_s x of a block into res.  While x is still the
 * constant start x0 (from `initial: zero`: x0 = 0, MLEM's x0 > 0; only the
 * first block of the first iteration sees it) that is x0 A(1), and A(1) is
 * at hand (a1 holds it for EM; SART and SIRT start from 0): a fill, or a
 * scale of a1, instead of a projection.  For x0 = 0 the result is the
 * projection's to the bit (every sum of zeros is 0); for x0 > 0 it differs
 * from A(x0 1) by the float rounding of the sums (x0 times each sum rather
 * than the sum of x0 times each weight). */
static int block_forward(const rc_algo_params *p, rc_backend *b, const rc_vec *x, rc_vec *res, const rc_vec *a1,
			 int at_start, float x0, int f, int l, rc_err *err)
{
	if (!at_start)
		return rc_bk_forward(b, rc_algo_fp(p, b), x, res, f, l, err);
	int rc = rc_bk_fill(b, res, 0.0f, RC_VIEWS_ALL, err);
	if (rc || x0 == 0.0f)
		return rc;
	float *a = malloc((size_t)b->nbatch * sizeof *a);
	if (!a)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d batches", b->nbatch);
	for (int k = 0; k < b->nbatch; k++)
		a[k] = x0;
	rc = rc_bk_axpy(b, res, a, a1, err);
	free(a);
	return rc;
}

int rc_sart_core(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_bp_kind bp, int S, int em, rc_err *err)
{
	const rc_geom *g = b->geom;
	const int nviews = rc_geom_nviews(g);
	const float lambda = (float)p->relaxation;
	const int cache = rc_sart_cache_all(p, S, rc_volume_count(rc_geom_volume(g)));
	const double t0 = rc_now_s();
	rc_initial start = RC_INITIAL_GIVEN;
	const rc_algo_state *rs = hooks ? hooks->resume : NULL;
	/* a resumed run starts from its checkpoint's iterate, unclamped */
	int rc = rs ? rc_algo_resume_check(p, b, rs, err) : rc_algo_start(p, b, proj, vol, hooks, &start, err);
	int it_done = rs ? rs->iteration : 0, restore = 0;
	if (rs && !rc)
		memcpy(vol, rs->host[0], rc_volume_count(rc_geom_volume(g)) * sizeof *vol);
	rc_stop stop;
	rc_tv tv = { 0 };
	float x0 = 0.0f, eps = 0.0f;
	rc_vec *meas = NULL, *rinv = NULL, *res = NULL, *x = NULL, *upd = NULL, *prev = NULL;
	rc_colsum *cs = NULL;
	int *order = malloc((size_t)S * sizeof *order);
	if (!order) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %d subsets", S);
		goto out_free;
	}
	if (rc)
		goto out_free;
	if ((rc = rc_bk_vec_from(b, RC_SPACE_PROJ, proj, &meas, err)) ||
	    (rc = rc_bk_vec_new(b, RC_SPACE_PROJ, &rinv, err)) || (rc = rc_bk_vec_new(b, RC_SPACE_PROJ, &res, err)) ||
	    (rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &upd, err)) ||
	    (S > 1 && (rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &prev, err))))
		goto out_free;
	rc_subset_order(S, order);

	/* R = 1 / A(1) over all views (a ray's sum does not depend on the
	 * block); EM needs A(1) only for its start */
	if ((rc = rc_bk_fill(b, upd, 1.0f, RC_VIEWS_ALL, err)) ||
	    (rc = rc_bk_forward(b, rc_algo_fp(p, b), upd, rinv, 0, nviews, err)) ||
	    (rc = rc_tv_new(p, b, meas, rinv, S, &tv, err)) ||
	    (em && (rc = em_start(b, proj, rinv, &x0, &eps, err))) ||
	    (!em && (rc = rc_bk_inv_guarded(b, rinv, RC_ROWSUM_REL_EPS, err))))
		goto out_free;
	/* res is the column sums' scratch until a block's forward projection */
	if ((rc = rc_colsum_new(b, bp, S, cache, res, &cs, err)))
		goto out_free;

	if (start != RC_INITIAL_ZERO) {
		/* vol holds the start (rc_algo_start): clamped at 0 where the
		 * iterates are; EM cannot move a voxel off 0, so its start is
		 * at least RC_EM_START_FLOOR of the constant start */
		size_t nvox = rc_volume_count(rc_geom_volume(g));
		const float lo = em ? (float)(RC_EM_START_FLOOR * x0) : 0.0f;
		if ((em || p->nonnegative) && !rs)
			for (size_t i = 0; i < nvox; i++)
				vol[i] = vol[i] > lo ? vol[i] : lo;
		if ((rc = rc_bk_vec_holding(b, RC_SPACE_VOLUME, vol, &x, err)))
			goto out_free;
	} else if ((rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, vol, &x, err)) ||
		   (rc = rc_bk_fill(b, x, x0, RC_VIEWS_ALL, err)))
		goto out_free;
	rc_stop_init(p, g, proj, &stop);
	if (rs)
		stop.last = rs->scal[0];
	for (int it = it_done + 1; it <= p->iterations; it++) {
		if (rc_algo_cancelled(hooks)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it_done);
			goto out_download;
		}
		if (prev && (rc = rc_bk_copy(b, prev, x, err)))
			goto out_download;
		restore = prev != NULL;
		double r2 = 0.0;
		/* x is still the constant start (block_forward); a resumed run's
		 * start stays RC_INITIAL_GIVEN */
		const int at_start = start == RC_INITIAL_ZERO && it == 1;
		for (int k = 0; k < S; k++) {
			int blk = order[k], f, l;
			rc_subset_range(blk, S, nviews, &f, &l);
			const rc_vec *c;
			double s2;
			if (k > 0 && rc_algo_cancelled(hooks)) {
				rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it_done);
				goto out_download;
			}
			if ((rc = rc_colsum_get(cs, blk, res, &c, err)) ||
			    (rc = block_forward(p, b, x, res, rinv, at_start && k == 0, x0, f, l, err)) ||
			    (em && (rc = rc_bk_ratio(b, res, meas, eps, f, l, &s2, err))) ||
			    (!em && (rc = rc_bk_residual(b, res, meas, rinv, f, l, &s2, err))) ||
			    (rc = rc_bk_back(b, bp, res, upd, f, l, err)) ||
			    (em && (rc = rc_bk_mul(b, x, upd, c, err))) ||
			    (!em && (rc = rc_bk_update(b, x, upd, c, lambda, p->nonnegative, err))))
				goto out_download;
			r2 += s2;
			/* the block's TV phase (upd is free) */
			if ((rc = rc_tv_descend(b, &tv, x, upd, p->nonnegative || em, err)))
				goto out_download;
		}
		if ((rc = rc_bk_finish(b, err)))
			goto out_download;
		restore = 0;
		it_done = it;
		const char *why = rc_stop_check(&stop, sqrt(r2));
		if ((rc = rc_algo_report(hooks, b, x, it, p->iterations, sqrt(r2), t0, why)) || why)
			goto out_download;
		rc_algo_state st = { .name = p->name, .iteration = it, .nvec = 1, .vec = { x }, .nscal = 1,
				     .scal = &stop.last };
		if (it < p->iterations && (rc = rc_algo_checkpoint(hooks, b, &st, err)))
			goto out_download;
	}

out_download:
	/* the last complete iterate (a host backend's x is vol itself, so the
	 * restore also leaves it there after a failure); vol is written only
	 * after a clean run or a cancel (algo.h) */
	if (restore) {
		rc_err e2;
		int crc = rc_bk_copy(b, x, prev, &e2);
		if (crc && rc == RC_ECANCELLED) {
			rc = crc;
			if (err)
				*err = e2;
		}
	}
	/* cancelled (SIGTERM): x is the last whole iteration's again, kept as
	 * the run's checkpoint */
	if (rc == RC_ECANCELLED && x && it_done >= 1 && it_done < p->iterations) {
		rc_algo_state st = { .name = p->name, .iteration = it_done, .nvec = 1, .vec = { x }, .nscal = 1,
				     .scal = &stop.last };
		rc_err e2;
		rc_algo_checkpoint(hooks, b, &st, &e2);
	}
	if (!rc || rc == RC_ECANCELLED) {
		int drc = rc_bk_download(b, x, vol, err);
		if (drc)
			rc = drc;
	}
out_free:
	rc_colsum_free(cs);
	rc_bk_vec_free(b, prev);
	rc_bk_vec_free(b, upd);
	rc_bk_vec_free(b, x);
	rc_bk_vec_free(b, res);
	rc_bk_vec_free(b, rinv);
	rc_bk_vec_free(b, meas);
	free(order);
	rc_tv_free(&tv);
	return rc;
}

int rc_sart_run(const rc_algo_params *p, rc_backend *b, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	int rc = rc_algo_check(p, b, proj, vol, 1, 1, err);
	if (rc)
		return rc;
	/* A fan or parallel stack back-projects with the transpose of A: on
	 * such a stack RC_BP_VOXEL is FBP's back projection (proj_plane.c,
	 * bp_plane.cl), weighted by 1/w^2 per view and voxel, which C = 1/B(1)
	 * does not cancel (it is not a per-voxel scale), and the tensor
	 * backend, which ran every 2-D SART so far, answers every kind with its
	 * A^T: with the matched transpose SART is the same method on every
	 * engine that runs 2-D stacks (Andersen and Kak's form, C A^T R, whose
	 * iteration converges for 0 < lambda < 2). */
	rc_bp_kind bp = rc_geom_is_2d(b->geom) ? rc_bk_bp_matched(b) : RC_BP_VOXEL;
	return rc_sart_core(p, b, proj, vol, hooks, bp, rc_algo_subsets(p, rc_geom_nviews(b->geom)), 0, err);
}
