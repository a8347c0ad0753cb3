/*
 * SIRT: x += lambda * C * A^T( R * (p - A x) ), R = 1 / A(1), C = 1 / A^T(1),
 * with A = rc_algo_fp and A^T = rc_algo_bp_matched, its exact transpose.
 *
 * The loop is SART's (algo_sart.c, rc_sart_core) with one block of views;
 * what differs from SART as implemented here is the back projector only.
 * SART uses the paper's voxel-driven back projector, which is faster but
 * not A's transpose; SIRT uses the transpose, so for 0 < lambda < 2 it is
 * the textbook simultaneous method that converges to the R-weighted least
 * squares solution (minimising ||p - A x||_R in the C^-1 norm), at the cost
 * of the slower matched back projection.  algorithm.subsets is ignored.
 */
#include "algo/algo_util.h"

int rc_sirt_run(const rc_algo_params *p, rc_backend *b, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	int rc = rc_algo_check(p, b, proj, vol, 1, 0, err);
	if (rc)
		return rc;
	return rc_sart_core(p, b, proj, vol, hooks, rc_algo_bp_matched(p, b), 1, 0, err);
}
