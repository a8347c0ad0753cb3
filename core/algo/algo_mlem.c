/*
 * MLEM: x *= A^T( p / A x ) / A^T(1), with A = RC_FP_RAYCAST and
 * A^T = RC_BP_MATCHED, its exact transpose (the EM update and its monotone
 * likelihood rest on the transpose).
 *
 * Start: the constant x0 = sum(p+) / sum(A 1) (p+ = max(p, 0)), whose
 * projections match the data in total; MLEM can never move a voxel away
 * from 0, so the start must be positive.  Voxels whose sensitivity is
 * below the guard start at x0 too; the first update multiplies them by
 * their inverse sensitivity 0.  Until then they add their (at most 1e-6 of
 * the largest) column sums to A x: nothing where no ray sees them.  Guards: negative data (noise on post-log values) counts as 0,
 * the ratio is 0 where A x is (nearly) 0 (a ray that misses the volume) and
 * voxels whose sensitivity A^T(1) is nearly 0 stay 0.  A ray whose A x is
 * tiny but positive is harmless: its contribution to x_i is
 * x_i a_ij p_j / (A x)_j <= p_j because (A x)_j >= a_ij x_i.
 *
 * Vectors, allocated once per run: the measured stack and the ratio
 * (projection-sized), the iterate, the inverse sensitivity and the update
 * (volume-sized).  The reported residual
 * is ||p - A x|| of the iterate the iteration started from (measured in
 * passing, no extra projection).  relaxation and subsets are ignored; the
 * result is non-negative by construction.
 */
#include "algo/algo_util.h"

#include <math.h>
#include <stdlib.h>

#define SENS_REL_EPS 1e-6

int rc_mlem_run(const rc_algo_params *p, rc_backend *b, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	int rc = rc_algo_check(p, b, proj, vol, 0, 0, err);
	if (rc)
		return rc;
	const rc_geom *g = b->geom;
	const int nviews = rc_geom_nviews(g);
	const size_t np = rc_geom_proj_count(g);
	const double t0 = rc_now_s();
	int it_done = 0;
	rc_vec *meas = NULL, *ratio = NULL, *x = NULL, *sinv = NULL, *upd = NULL;
	double *sums = malloc((size_t)b->nbatch * sizeof *sums);
	if (!sums) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %d batches", b->nbatch);
		goto out_free;
	}
	if ((rc = rc_bk_vec_from(b, RC_SPACE_PROJ, proj, &meas, err)) ||
	    (rc = rc_bk_vec_new(b, RC_SPACE_PROJ, &ratio, err)) ||
	    (rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, vol, &x, err)) ||
	    (rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &sinv, err)) || (rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &upd, err)))
		goto out_free;

	/* sensitivity 1 / A^T(1) */
	if ((rc = rc_bk_fill(b, ratio, 1.0f, RC_VIEWS_ALL, err)) ||
	    (rc = rc_bk_back(b, RC_BP_MATCHED, ratio, sinv, 0, nviews, err)) ||
	    (rc = rc_bk_inv_guarded(b, sinv, SENS_REL_EPS, err)))
		goto out_free;

	/* x0 = sum(p+) / sum(A 1) */
	if ((rc = rc_bk_fill(b, upd, 1.0f, RC_VIEWS_ALL, err)) ||
	    (rc = rc_bk_forward(b, RC_FP_RAYCAST, upd, ratio, 0, nviews, err)) ||
	    (rc = rc_bk_dot(b, ratio, NULL, sums, err)))
		goto out_free;
	double psum = 0.0, pmax = 0.0;
	for (size_t i = 0; i < np; i++) {
		if (proj[i] > 0.0f)
			psum += proj[i];
		pmax = proj[i] > pmax ? proj[i] : pmax;
	}
	double asum = rc_bk_total(b, sums);
	float x0 = asum > 0.0 && isfinite(psum / asum) ? (float)(psum / asum) : 0.0f;
	if ((rc = rc_bk_fill(b, x, x0, RC_VIEWS_ALL, err)))
		goto out_free;
	/* A x below this is a ray the volume does not reach; it keeps p+/Ax
	 * below 1e20 so that no inf enters the back projection */
	const float eps = (float)(1e-20 * (pmax > 1.0 ? pmax : 1.0));

	for (int it = 1; it <= p->iterations; it++) {
		double r2;
		if (rc_algo_cancelled(hooks)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it_done);
			break;
		}
		if ((rc = rc_bk_forward(b, RC_FP_RAYCAST, x, ratio, 0, nviews, err)) ||
		    (rc = rc_bk_ratio(b, ratio, meas, eps, &r2, err)) ||
		    (rc = rc_bk_back(b, RC_BP_MATCHED, ratio, upd, 0, nviews, err)) ||
		    (rc = rc_bk_mul(b, x, upd, sinv, err)) || (rc = rc_bk_finish(b, err)))
			break;
		it_done = it;
		if ((rc = rc_algo_report(hooks, b, x, it, p->iterations, sqrt(r2), t0)))
			break;
	}
	/* vol is written after a clean run or a cancel (algo.h) */
	if (!rc || rc == RC_ECANCELLED) {
		int drc = rc_bk_download(b, x, vol, err);
		if (drc)
			rc = drc;
	}
out_free:
	rc_bk_vec_free(b, upd);
	rc_bk_vec_free(b, sinv);
	rc_bk_vec_free(b, x);
	rc_bk_vec_free(b, ratio);
	rc_bk_vec_free(b, meas);
	free(sums);
	return rc;
}
