/* ooc_subsets: out-of-core SART and OS-EM, algo_sart.c's rc_sart_core with
 * S blocks of views, x read and written once per block (ooc_iter.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/colsum.h"
#include "backend/elementwise_ops.h"
#include "plan/ooc_iter.h"
#include "plan/ooc_iter_run.h"
#include "util/rc_clock.h"

/* Slab m's slot: nzs + 2 slices, the slab's from the second (a slice of
 * TV's halo each side) */
static float *slot_of(const ooc_run *R, int m)
{
	return R->slot + (size_t)(m % (R->T + 1)) * R->plane * (size_t)(R->nzs + 2);
}

/* B_s(1) of views f..l on slab i into dst */
static int ones_back(ooc_run *R, int i, int f, int l, float *dst, rc_err *err)
{
	int z0, z1, r0 = R->r0[i], r1 = R->r1[i];
	ooc_slab_z(R, i, &z0, &z1);
	size_t nr = (size_t)(r1 - r0) * R->nu;
	if (r1 <= r0) {
		memset(dst, 0, sizeof(float) * R->plane * (size_t)(z1 - z0));
		return 0;
	}
	for (size_t j = 0; j < nr * (size_t)(l - f); j++)
		R->rows[j] = 1.0f;
	return ooc_slab_project(R, 1, z0, z1, r0, r1, f, l, dst, R->rows, err);
}

/* The way the in-memory run takes block blk's C_s = 1 / B_s(1) (colsum.h):
 * SART's from the closed form where it holds (not kept: rc_sart_cache_all;
 * every view covers the volume: rc_colsum_form_may_hold; block 0's B_0(1)
 * is kappa times its sums of 1/w^2 at every voxel), else back-projected
 * (kept or recomputed in memory: the same sums), back-projected now per
 * slab for each block's largest sum (a back projection of ones per
 * block: an iteration's, once) and, where rc_ooc_iter_colsum_kept (OS-EM,
 * one-block SART, S small), written at blk V of vscr to be read back per
 * slab, else back-projected again per slab; inverted against that sum.
 * In memory: a slice of sums, S maxima. */
static int colsum_setup(ooc_run *R, rc_err *err)
{
	int cand = rc_ooc_iter_form_may(R->s, R->g);
	R->form = 0;
	for (int blk = 0; blk < R->S; blk++) {
		int f, l, ok = cand && blk == 0, rc;
		rc_subset_range(blk, R->S, R->nviews, &f, &l);
		if (ok)
			rc_colsum_block_sums(R->g, R->S, 0, R->fsums);
		float mx = 0.0f;
		for (int i = 0; i < R->slabs; i++) {
			int z0, z1;
			ooc_slab_z(R, i, &z0, &z1);
			size_t n = R->plane * (size_t)(z1 - z0);
			if ((rc = ooc_cancelled(R, err)) || (rc = ones_back(R, i, f, l, R->a, err)) ||
			    (R->keep && (rc = ooc_wr(R->vscr, R->a, sizeof(float) * n,
						     (uint64_t)blk * R->V + sizeof(float) * R->plane * (size_t)z0, err))))
				return rc;
			if (ok && i == 0)
				R->kappa = R->a[0] / R->fsums[0];
			for (size_t j = 0; j < n; j++)
				mx = rc_ew_max(mx, R->a[j]);
			ok = ok && rc_colsum_form_fits(R->a, n, R->fsums, R->plane, R->kappa);
		}
		R->cmax[blk] = mx;
		if (ok) {
			R->form = 1;
			return 0;
		}
	}
	return 0;
}

/* C_s of block blk (views f..l) on slab i into dst: the closed form's
 * slice (R->fmap) repeated, or B_s(1) (kept in vscr, or back-projected
 * again) inverted as rc_vinv_guarded does over the whole volume */
static int colsum_slab(ooc_run *R, int i, int f, int l, int blk, float *dst, rc_err *err)
{
	int z0, z1, rc;
	ooc_slab_z(R, i, &z0, &z1);
	size_t n = R->plane * (size_t)(z1 - z0);
	if (R->form) {
		for (int z = z0; z < z1; z++)
			memcpy(dst + (size_t)(z - z0) * R->plane, R->fmap, sizeof(float) * R->plane);
		return 0;
	}
	if ((rc = R->keep ? ooc_rd(R->vscr, dst, sizeof(float) * n,
				   (uint64_t)blk * R->V + sizeof(float) * R->plane * (size_t)z0, err)
			  : ones_back(R, i, f, l, dst, err)))
		return rc;
	float eps = (float)(RC_COLSUM_REL_EPS * R->cmax[blk]);
	for (size_t j = 0; j < n; j++)
		dst[j] = rc_ew_inv_guarded(dst[j], eps);
	return 0;
}

/* Slab i of x into its slot, updated with block blk's (views f..l)
 * residual in R->chunk: SART's x += lambda C B(res) (clamped with
 * nonnegative), EM's x *= C B(p / A x) */
static int update_slab(ooc_run *R, int xfd, int i, int f, int l, int blk, rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	int z0, z1, r0 = R->r0[i], r1 = R->r1[i], rc;
	ooc_slab_z(R, i, &z0, &z1);
	size_t n = R->plane * (size_t)(z1 - z0), nr = (size_t)(r1 - r0) * R->nu;
	float *x = slot_of(R, i) + R->plane;
	if ((rc = ooc_cancelled(R, err)) ||
	    (rc = ooc_rd(xfd, x, sizeof(float) * n, sizeof(float) * R->plane * (size_t)z0, err)))
		return rc;
	if (r1 > r0) {
		for (int k = f; k < l; k++)
			memcpy(R->rows + (size_t)(k - f) * nr, R->chunk + (size_t)(k - f) * R->view + (size_t)r0 * R->nu,
			       sizeof(float) * nr);
		if ((rc = ooc_slab_project(R, 1, z0, z1, r0, r1, f, l, R->b, R->rows, err)))
			return rc;
	} else {
		memset(R->b, 0, sizeof(float) * n);
	}
	if ((rc = colsum_slab(R, i, f, l, blk, R->a, err)))
		return rc;
	for (size_t j = 0; j < n; j++)
		x[j] = R->em ? rc_ew_mul(x[j], R->b[j], R->a[j])
			     : rc_ew_update(x[j], R->b[j], R->a[j], (float)a->relaxation, a->nonnegative);
	return 0;
}

/* TV step k (1..T) of the block's phase (rc_tv_descend) on slab m, in its
 * slot: its halo the slice below at step k - 1 (carried from the slab
 * below, stepped already) and the slice above at step k - 1 (the slab
 * above, in its slot); the clamp with the last step where nonneg. */
static void tv_step_slab(ooc_run *R, int m, int k, int nonneg)
{
	int z0, z1;
	ooc_slab_z(R, m, &z0, &z1);
	const int nzm = z1 - z0, lo = m > 0, hi = m + 1 < R->slabs;
	float *sl = slot_of(R, m), *carry = R->carries + (size_t)(k - 1) * R->plane;
	if (lo)
		memcpy(sl, carry, sizeof(float) * R->plane);
	if (hi)
		memcpy(sl + (size_t)(nzm + 1) * R->plane, slot_of(R, m + 1) + R->plane, sizeof(float) * R->plane);
	/* carry: the slab above's step k takes this slab's last slice as it
	 * was before this step */
	ooc_tv_step(R, sl + (lo ? 0 : R->plane), nzm + lo + hi, lo, nzm, carry, k == R->T && nonneg);
}

/* One block's pass over the volume, x's only read and write: slab j read
 * and updated, then TV's steps k = 1..T on slab j - k (each needs the slab
 * above at step k - 1: a wavefront, T + 1 slabs in flight), then slab j - T
 * written and, where nf >= 0, projected onto the next block's views nf..nl
 * into R->next (A x is a sum over slabs). */
static int subset_pass(ooc_run *R, int xfd, int f, int l, int blk, int nf, int nl, rc_err *err)
{
	const int nonneg = R->s->algo.nonnegative || R->em;
	int rc;
	if (nf >= 0)
		memset(R->next, 0, sizeof(float) * R->view * (size_t)(nl - nf));
	for (int j = 0; j < R->slabs + R->T; j++) {
		if (j < R->slabs && (rc = update_slab(R, xfd, j, f, l, blk, err)))
			return rc;
		for (int k = 1; k <= R->T; k++)
			if (j - k >= 0 && j - k < R->slabs)
				tv_step_slab(R, j - k, k, nonneg);
		int m = j - R->T, z0, z1;
		if (m < 0 || m >= R->slabs)
			continue;
		ooc_slab_z(R, m, &z0, &z1);
		float *x = slot_of(R, m) + R->plane;
		if ((rc = ooc_wr(xfd, x, sizeof(float) * R->plane * (size_t)(z1 - z0), sizeof(float) * R->plane * (size_t)z0,
			     err)) ||
		    (nf >= 0 && (rc = ooc_fp_add(R, x, m, nf, nl, R->next, err))))
			return rc;
	}
	return 0;
}

/* SART and OS-EM (rc_sart_core with S > 1 blocks, or SART's one): per
 * block in rc_subset_order's order, its residual (R = 1 / A 1 over all
 * views at 0 of pscr; EM's ratio) from A x of its views, held in memory,
 * then subset_pass: x's one pass per block, which forms the next block's
 * A x on the way.  The first block's A x: none from a zero start, formed
 * in the floor's pass from EM's or a nonnegative start, else a pass of
 * its own, once. */
int ooc_iterate_subsets(ooc_run *R, int stack, int xfd, int pscr, const rc_algo_hooks *hooks, rc_recon_report *rep,
			   rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	const double t0 = rc_now_s();
	rc_initial start;
	int f, l, done;
	rc_subset_order(R->S, R->order);
	rc_subset_range(R->order[0], R->S, R->nviews, &f, &l);
	int rc = ooc_em_start(R, stack, xfd, pscr, hooks, &start, R->chunk, f, l, &done, err);
	if (rc || (rc = colsum_setup(R, err)))
		return rc;
	R->T = R->tv_on ? R->tv_steps : 0;
	/* the first block's A x: formed already unless from an FDK start not floored */
	for (int i = 0; !done && i < R->slabs; i++) {
		int z0, z1;
		ooc_slab_z(R, i, &z0, &z1);
		if ((rc = ooc_cancelled(R, err)) ||
		    (rc = ooc_rd(xfd, R->a, sizeof(float) * R->plane * (size_t)(z1 - z0), sizeof(float) * R->plane * (size_t)z0,
			     err)) ||
		    (rc = ooc_fp_add(R, R->a, i, f, l, R->chunk, err)))
			return rc;
	}
	for (int it = 1; it <= a->iterations; it++) {
		if ((rc = ooc_cancelled(R, err)))
			return rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
		double r2 = 0.0;
		for (int k = 0; k < R->S; k++) {
			int blk = R->order[k], nf = -1, nl = -1;
			rc_subset_range(blk, R->S, R->nviews, &f, &l);
			if (k + 1 < R->S || it < a->iterations)
				rc_subset_range(R->order[(k + 1) % R->S], R->S, R->nviews, &nf, &nl);
			if (R->form) {
				rc_colsum_block_sums(R->g, R->S, blk, R->fsums);
				rc_colsum_form_map(R->fsums, R->plane, R->kappa, R->fmap);
			}
			if ((rc = ooc_sirt_residual(R, f, l, &r2, err)) || (rc = subset_pass(R, xfd, f, l, blk, nf, nl, err)))
				return rc;
			float *t = R->chunk;
			R->chunk = R->next;
			R->next = t;
		}
		if (ooc_iteration_end(R, hooks, it, sqrt(r2), t0, rep))
			break;
	}
	return 0;
}
