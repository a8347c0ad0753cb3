/*
 * MLEM: x *= A^T( p / A x ) / A^T(1), with A = rc_algo_fp and
 * A^T = rc_algo_bp_matched, its exact transpose (the EM update and its monotone
 * likelihood rest on the transpose), run as OS-EM (Hudson & Larkin 1994)
 * by SART's loop (algo_sart.c, rc_sart_core with em): per block s of the
 * ordered subsets x *= A_s^T( p / A_s x ) / A_s^T(1), the blocks and their
 * order as SART's.  The default (algorithm.subsets 0) is 1, the classic
 * whole-set MLEM: on post-log CT data that our discrete model cannot fit
 * exactly (any real scan), OS-EM reaches the fit of that mismatch, which
 * EM's 1 / A x weighting amplifies, within a few iterations (measured on
 * analytic projections, docs/algorithms.md), so it is there for whoever
 * asks for it, not the default.
 *
 * Start: the constant x0 = sum(p+) / sum(A 1) (p+ = max(p, 0)), whose
 * projections match the data in total; EM can never move a voxel away
 * from 0, so the start must be positive.  Guards: negative data (noise on
 * post-log values) counts as 0, the ratio is 0 where A x is (nearly) 0 (a
 * ray that misses the volume) and voxels whose sensitivity A_s^T(1) is
 * below 1e-6 of the largest (RC_COLSUM_REL_EPS) get 0.  A ray whose A x is
 * tiny but positive is harmless: its contribution to x_i is
 * x_i a_ij p_j / (A x)_j <= p_j because (A x)_j >= a_ij x_i.
 *
 * The reported residual is ||p - A x||, each block measured just before
 * its update (no extra projection).  relaxation is ignored; the result is
 * non-negative by construction, and the TV phase (algo_util.h) clamps at 0
 * after its steps whatever algorithm.nonnegative says.
 */
#include "algo/algo_util.h"

int rc_mlem_run(const rc_algo_params *p, rc_backend *b, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	int rc = rc_algo_check(p, b, proj, vol, 0, 1, err);
	if (rc)
		return rc;
	return rc_sart_core(p, b, proj, vol, hooks, rc_algo_bp_matched(p, b), rc_algo_subsets(p, rc_geom_nviews(b->geom)), 1,
			    err);
}
