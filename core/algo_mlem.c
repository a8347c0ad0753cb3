/*
 * MLEM: x *= A^T( p / A x ) / A^T(1), with A = RC_FP_RAYCAST and
 * A^T = RC_BP_MATCHED, its exact transpose (the EM update and its monotone
 * likelihood rest on the transpose).
 *
 * Start: the constant x0 = sum(p+) / sum(A 1) (p+ = max(p, 0)), positive
 * wherever some ray sees the voxel, whose projections match the data in
 * total; MLEM can never move a voxel away from 0, so the start must be
 * positive.  Guards: negative data (noise on post-log values) counts as 0,
 * the ratio is 0 where A x is (nearly) 0 (a ray that misses the volume) and
 * voxels whose sensitivity A^T(1) is nearly 0 stay 0.  A ray whose A x is
 * tiny but positive is harmless: its contribution to x_i is
 * x_i a_ij p_j / (A x)_j <= p_j because (A x)_j >= a_ij x_i.
 *
 * Buffers, allocated once per run: the ratio (projection stack), the
 * inverse sensitivity and the update (volume each).  The reported residual
 * is ||p - A x|| of the iterate the iteration started from (measured in
 * passing, no extra projection).  relaxation and subsets are ignored; the
 * result is non-negative by construction.
 */
#include "algo_util.h"

#include <math.h>
#include <stdlib.h>

#define SENS_REL_EPS 1e-6

/* e = p+ / e where e > eps (else 0); returns sum (p - e)^2 first.  Scalar:
 * GCC does not if-convert the guarded division under -ftrapping-math; one
 * pass costs ~20 ms at paper 000's size, small beside the projections. */
static double ratio_block(float *restrict e, const float *restrict p, float eps, size_t n)
{
	double r2 = 0.0;
	for (size_t i = 0; i < n; i++) {
		float d = p[i] - e[i];
		r2 += (double)d * d;
		float pp = p[i] > 0.0f ? p[i] : 0.0f;
		e[i] = e[i] > eps ? pp / e[i] : 0.0f;
	}
	return r2;
}

int rc_mlem_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	int rc = rc_algo_check(p, x, proj, vol, 0, 0, err);
	if (rc)
		return rc;
	const rc_geom *g = rc_exec_geom(x);
	const int nviews = rc_geom_nviews(g);
	const size_t np = rc_geom_proj_count(g);
	const size_t nvox = rc_volume_count(rc_geom_volume(g));
	const double t0 = rc_algo_now();

	float *ratio = malloc(np * sizeof(float));
	float *sinv = malloc(nvox * sizeof(float));
	float *upd = malloc(nvox * sizeof(float));
	if (!ratio || !sinv || !upd) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the mlem buffers (%zu projection values, %zu voxels)",
			     np, nvox);
		goto out_free;
	}

	/* sensitivity 1 / A^T(1) */
	rc_vfill(ratio, 1.0f, np);
	if ((rc = rc_exec_back(x, RC_BP_MATCHED, ratio, sinv, 0, nviews, err)))
		goto out_free;
	rc_vinv_guarded(sinv, nvox, SENS_REL_EPS);

	/* x0 = sum(p+) / sum(A 1) */
	rc_vfill(upd, 1.0f, nvox);
	if ((rc = rc_exec_forward(x, RC_FP_RAYCAST, upd, ratio, 0, nviews, err)))
		goto out_free;
	double psum = 0.0, pmax = 0.0;
	for (size_t i = 0; i < np; i++) {
		if (proj[i] > 0.0f)
			psum += proj[i];
		pmax = proj[i] > pmax ? proj[i] : pmax;
	}
	double asum = rc_vsum(ratio, np);
	float x0 = asum > 0.0 && isfinite(psum / asum) ? (float)(psum / asum) : 0.0f;
	for (size_t i = 0; i < nvox; i++)
		vol[i] = sinv[i] > 0.0f ? x0 : 0.0f;
	/* A x below this is a ray the volume does not reach; it keeps p+/Ax
	 * below 1e20 so that no inf enters the back projection */
	const float eps = (float)(1e-20 * (pmax > 1.0 ? pmax : 1.0));

	for (int it = 1; it <= p->iterations; it++) {
		if (rc_algo_cancelled(hooks)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
			goto out_free;
		}
		if ((rc = rc_exec_forward(x, RC_FP_RAYCAST, vol, ratio, 0, nviews, err)))
			goto out_free;
		double r2 = ratio_block(ratio, proj, eps, np);
		if ((rc = rc_exec_back(x, RC_BP_MATCHED, ratio, upd, 0, nviews, err)))
			goto out_free;
		rc_vmul2(vol, upd, sinv, nvox);
		rc_algo_report(hooks, it, p->iterations, sqrt(r2), t0);
	}

out_free:
	free(upd);
	free(sinv);
	free(ratio);
	return rc;
}
