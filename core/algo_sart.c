/*
 * SART, paper 000 Eq. 1:
 *
 *   v_i += lambda * [ sum_j a_ij (p_j - sum_n a_nj v_n) / sum_n a_nj ] / sum_j a_ij
 *
 * i.e. v += lambda * C * B( R * (p - A v) ) with A = RC_FP_RAYCAST,
 * R = 1 / A(1) (the row sums: each ray's length through the volume grid),
 * B = RC_BP_VOXEL (the voxel-driven back projector with its 1/w^2 weight,
 * the one paper 000 and the FDK use) and C = 1 / B(1) (the column sums).
 * Because C comes from the same B as the numerator, any per-voxel scale of
 * B cancels: B need not be the exact transpose of A, which is why the fast
 * voxel-driven back projector is the right one here.  The sums are over all
 * views, one update per iteration, as the paper does.
 *
 * Ordered subsets (p->subsets = S > 1): the views are cut into S contiguous
 * blocks, visited in bit-reversed order so that consecutive updates come
 * from far-apart angles; each block has its own column sums C_s = 1 / B_s(1).
 * The C_s of all blocks are kept when they fit in SUBSET_CACHE_BYTES,
 * otherwise each one is recomputed before its block (one extra back
 * projection per block, no extra memory).
 *
 * SIRT (algo_sirt.c) runs this same loop with B = RC_BP_MATCHED, the exact
 * transpose of A, and one block.
 *
 * Buffers, allocated once per run: R and the residual (projection stack
 * each), the update, C (or C_s) and, with subsets, the previous iterate
 * (so that a cancel between blocks can restore the last complete iterate).
 * The reported residual is ||p - A v|| summed over the blocks of the
 * iteration, each block measured just before its update (with S = 1: the
 * residual of the iterate the iteration started from); it costs no extra
 * projection.
 */
#include "algo_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Row sums below this fraction of the largest are rays that only graze the
 * volume grid (or miss it); dividing by them would amplify the residual of
 * a ray that carries almost no information about any voxel.  Column sums
 * that small belong to voxels almost no ray sees. */
#define ROWSUM_REL_EPS 1e-3
#define COLSUM_REL_EPS 1e-6
/* Per-subset column sums kept in memory up to this size. */
#define SUBSET_CACHE_BYTES ((size_t)256 << 20)

static int colsum_inverse(rc_exec *x, rc_bp_kind bp, float *ones_proj, float *c,
			  size_t nvox, int first, int last, rc_err *err)
{
	int rc = rc_exec_back(x, bp, ones_proj, c, first, last, err);
	if (rc)
		return rc;
	rc_vinv_guarded(c, nvox, COLSUM_REL_EPS);
	return 0;
}

int rc_sart_core(const rc_algo_params *p, rc_exec *x, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_bp_kind bp, int S, rc_err *err)
{
	const rc_geom *g = rc_exec_geom(x);
	const int nviews = rc_geom_nviews(g);
	const size_t np = rc_geom_proj_count(g);
	const size_t nvox = rc_volume_count(rc_geom_volume(g));
	const float lambda = (float)p->relaxation;
	const int cache = S == 1 || (size_t)S <= SUBSET_CACHE_BYTES / (nvox * sizeof(float));
	const double t0 = rc_algo_now();
	int rc = 0;

	float *rinv = malloc(np * sizeof(float));
	float *res = malloc(np * sizeof(float));
	float *upd = malloc(nvox * sizeof(float));
	float *cinv = malloc((cache ? (size_t)S : 1) * nvox * sizeof(float));
	float *prev = S > 1 ? malloc(nvox * sizeof(float)) : NULL;
	int *order = malloc((size_t)S * sizeof(int));
	if (!rinv || !res || !upd || !cinv || (S > 1 && !prev) || !order) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the %s buffers (%zu projection values, %zu voxels)",
			     rc_algo_name_str(p->name), np, nvox);
		goto out_free;
	}
	rc_subset_order(S, order);

	/* R = 1 / A(1) over all views (a ray's sum does not depend on the block) */
	rc_vfill(upd, 1.0f, nvox);
	if ((rc = rc_exec_forward(x, RC_FP_RAYCAST, upd, rinv, 0, nviews, err)))
		goto out_free;
	rc_vinv_guarded(rinv, np, ROWSUM_REL_EPS);

	/* res holds ones while the column sums are built */
	rc_vfill(res, 1.0f, np);
	for (int b = 0; b < (cache ? S : 0); b++) {
		int f, l;
		rc_subset_range(b, S, nviews, &f, &l);
		if ((rc = colsum_inverse(x, bp, res, cinv + (size_t)b * nvox, nvox, f, l, err)))
			goto out_free;
	}

	rc_vfill(vol, 0.0f, nvox);
	for (int it = 1; it <= p->iterations; it++) {
		if (rc_algo_cancelled(hooks)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
			goto out_free;
		}
		if (prev)
			memcpy(prev, vol, nvox * sizeof(float));
		double r2 = 0.0;
		for (int k = 0; k < S; k++) {
			int b = order[k], f, l;
			rc_subset_range(b, S, nviews, &f, &l);
			const float *c = cinv + (cache ? (size_t)b * nvox : 0);
			if (k > 0 && rc_algo_cancelled(hooks)) {
				memcpy(vol, prev, nvox * sizeof(float));
				rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
				goto out_free;
			}
			rc_seg sg = rc_seg_views(g, f, l);
			if (!cache) {
				for (int j = 0; j < sg.n; j++)
					rc_vfill(res + sg.start + (size_t)j * sg.stride, 1.0f, sg.len);
				if ((rc = colsum_inverse(x, bp, res, cinv, nvox, f, l, err)))
					goto out_free_restore;
			}
			if ((rc = rc_exec_forward(x, RC_FP_RAYCAST, vol, res, f, l, err)))
				goto out_free_restore;
			r2 += rc_vresidual(&sg, res, proj, rinv);
			if ((rc = rc_exec_back(x, bp, res, upd, f, l, err)))
				goto out_free_restore;
			rc_vupdate(vol, upd, c, lambda, p->nonnegative, nvox);
		}
		rc_algo_report(hooks, it, p->iterations, sqrt(r2), t0);
	}
	goto out_free;

out_free_restore:
	/* an engine failed mid-iteration: leave the last complete iterate */
	if (prev)
		memcpy(vol, prev, nvox * sizeof(float));
out_free:
	free(order);
	free(prev);
	free(cinv);
	free(upd);
	free(res);
	free(rinv);
	return rc;
}

int rc_sart_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	int rc = rc_algo_check(p, x, proj, vol, 1, 1, err);
	if (rc)
		return rc;
	return rc_sart_core(p, x, proj, vol, hooks, RC_BP_VOXEL, p->subsets, err);
}
