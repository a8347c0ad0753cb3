/*
 * CGLS: conjugate gradients on the normal equations A^T A x = A^T p (paper
 * 001 Alg. 1) with A = RC_FP_RAYCAST and A^T = RC_BP_MATCHED, its exact
 * transpose (CG needs a symmetric A^T A; with an unmatched pair it stalls).
 *
 * Alg. 1 keeps the normal-equation residual s = A^T (p - A x) and forms
 * q = A^T A d.  The CGLS arrangement below produces the same iterates in
 * exact arithmetic but carries the data residual r = p - A x as well:
 *
 *   x = 0, r = p, s = A^T r, d = s, gamma = ||s||^2
 *   per iteration:  q = A d                       (forward projection)
 *                   alpha = gamma / ||q||^2       (= gamma / d^T A^T A d)
 *                   x += alpha d,  r -= alpha q
 *                   s = A^T r                     (back projection)
 *                   beta = ||s||^2 / gamma,  d = s + beta d
 *
 * so p^T A^T A p of Alg. 1 becomes ||A d||^2 (better conditioned in float),
 * and ||r|| = ||p - A x||, which CGLS minimises over a growing Krylov space,
 * is available each iteration without an extra projection: it is what the
 * progress call reports and it never rises.  The last iteration skips the
 * back projection it would only need for the next direction.
 *
 * Buffers, allocated once per run: r and q (projection stack each), s and
 * d (volume each).  algorithm.relaxation, subsets and nonnegative do not
 * apply (clamping would break the conjugacy) and are ignored.
 */
#include "algo_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int rc_cgls_run(const rc_algo_params *p, rc_exec *x, const float *proj,
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

	float *r = malloc(np * sizeof(float));
	float *q = malloc(np * sizeof(float));
	float *s = malloc(nvox * sizeof(float));
	float *d = malloc(nvox * sizeof(float));
	if (!r || !q || !s || !d) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the cgls buffers (%zu projection values, %zu voxels)",
			     np, nvox);
		goto out_free;
	}

	rc_vfill(vol, 0.0f, nvox);
	memcpy(r, proj, np * sizeof(float));
	if ((rc = rc_exec_back(x, RC_BP_MATCHED, r, s, 0, nviews, err)))
		goto out_free;
	memcpy(d, s, nvox * sizeof(float));
	double gamma = rc_vdot(s, s, nvox);
	double res = sqrt(rc_vdot(r, r, np));
	int converged = 0;

	for (int it = 1; it <= p->iterations; it++) {
		if (rc_algo_cancelled(hooks)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
			goto out_free;
		}
		/* gamma = 0: x already solves the normal equations; the remaining
		 * iterations would divide 0 by 0, so they only report. */
		if (!converged && gamma > 0.0) {
			if ((rc = rc_exec_forward(x, RC_FP_RAYCAST, d, q, 0, nviews, err)))
				goto out_free;
			double qq = rc_vdot(q, q, np);
			if (qq > 0.0) {
				float alpha = (float)(gamma / qq);
				rc_vaxpy(vol, alpha, d, nvox);
				rc_vaxpy(r, -alpha, q, np);
				res = sqrt(rc_vdot(r, r, np));
			} else {
				converged = 1; /* d in the null space of A: nothing to gain */
			}
		} else {
			converged = 1;
		}
		if (!converged && it < p->iterations) {
			if (rc_algo_cancelled(hooks)) {
				/* x and r form a complete iterate already */
				rc_algo_report(hooks, it, p->iterations, res, t0);
				rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it);
				goto out_free;
			}
			if ((rc = rc_exec_back(x, RC_BP_MATCHED, r, s, 0, nviews, err)))
				goto out_free;
			double gnew = rc_vdot(s, s, nvox);
			rc_vxpay(d, s, (float)(gnew / gamma), nvox);
			gamma = gnew;
		}
		rc_algo_report(hooks, it, p->iterations, res, t0);
	}

out_free:
	free(d);
	free(s);
	free(q);
	free(r);
	return rc;
}
