/*
 * colsum: the inverse column sums C_s = 1 / B_s(1) of SART's and OS-EM's
 * blocks of views (algo_sart.c), internal to core/algo.
 *
 * Three ways to have them, chosen once per run:
 *  - kept: every block's C_s computed at the start (cache: one block, or
 *    room within rc_sart_cache_all's cap): S volume-sized vectors;
 *  - closed form: for the voxel-driven back projector on a host backend
 *    when every view is a cone view (w fixed along a voxel column) and the
 *    detector covers the whole volume on every view.  B's weight is then
 *    1/w^2 per view and voxel, so B_s(1) = sum over the block of
 *    1/w_k(x, y)^2: one float per voxel column and block, written into the
 *    one volume-sized slot before each block (a copy of 4 bytes a voxel,
 *    where recomputing is a back projection of the block's views and a
 *    pass to invert it).  Coverage is checked on every view (the volume's
 *    corner voxels project inside the detector, so every voxel does) and
 *    the weights are measured: the first block's B_0(1) is back-projected
 *    once and must equal kappa * sum_k 1/w_k^2 over its views at every
 *    voxel within RC_COLSUM_FORM_TOL;
 *  - recomputed: one slot, back-projected and inverted before each block.
 * Every way gives the same C_s within RC_COLSUM_FORM_TOL (test_colsum).
 */
#ifndef RC_ALGO_COLSUM_H
#define RC_ALGO_COLSUM_H

#include "backend/backend.h"

/* The largest relative difference between the back-projected B(1) and
 * the closed form for which the closed form is used */
#define RC_COLSUM_FORM_TOL 1e-4

typedef enum { RC_COLSUM_KEPT, RC_COLSUM_FORM, RC_COLSUM_RECOMPUTED } rc_colsum_way;

typedef struct rc_colsum rc_colsum;

/* The column sums of back projector bp over S blocks (rc_subset_range)
 * of b's views; ones is a projection-sized scratch vector (its content is
 * overwritten, here and by every rc_colsum_get). */
int rc_colsum_new(rc_backend *b, rc_bp_kind bp, int S, int cache, rc_vec *ones, rc_colsum **ret, rc_err *err);
/* C_s of block blk, valid until the next call. */
int rc_colsum_get(rc_colsum *c, int blk, rc_vec *ones, const rc_vec **ret, rc_err *err);
/* The closed form's parts, for a run that mirrors this choice without the
 * whole volume (core/plan/ooc_subsets.c): every view a cone view whose
 * detector holds the volume's corners (the weights still to be measured),
 * and block blk's sums over its views of 1/w^2 per voxel column (nx * ny
 * doubles; C_s = 1 / (kappa * sums), kappa = B_0(1) / sums of block 0 at
 * voxel 0). */
int rc_colsum_form_may_hold(const rc_geom *g);
void rc_colsum_block_sums(const rc_geom *g, int S, int blk, double *sums);
/* Whether the back-projected B_0(1) (b1: n voxels from a slice's start)
 * is kappa * sums (per voxel column: nxy of them) within
 * RC_COLSUM_FORM_TOL at every voxel, kappa positive and finite */
int rc_colsum_form_fits(const float *b1, size_t n, const double *sums, size_t nxy, double kappa);
/* dst[i] = 1 / (kappa * sums[i]): the closed form's C_s, n values */
void rc_colsum_form_map(const double *sums, size_t n, double kappa, float *dst);
rc_colsum_way rc_colsum_way_of(const rc_colsum *c);
void rc_colsum_free(rc_colsum *c);

#endif
