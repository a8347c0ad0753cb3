/*
 * morton: the pseudo-Morton ordering of paper 001 (Alg. 2) for the rows and
 * the columns of the system matrix, and the matching permutation of images
 * and sinograms.
 *
 * A 2-D index (a, b) (a the fast coordinate of the natural order: x of an
 * image, u of a sinogram; b the slow one: y, view) is mapped so that each run
 * of bx*by new indices is one bx x by tile, each run of (bx*by)^2 one tile of
 * tiles, and the tiles of tiles follow each other with b fastest, as Alg. 2
 * writes it (W there is the extent along b).  Alg. 2 assumes extents that are
 * multiples of bx^2 and by^2; for other extents the keys are computed on the
 * padded grid and ranked, so the result is always a permutation of
 * [0, na*nb) and equals Alg. 2 exactly when no padding was needed.
 *
 * perm[natural] = ordered (NULL stands for the identity).  Vectors move with rc_perm_apply (natural ->
 * ordered) and rc_perm_unapply (ordered -> natural), ncols values per index.
 */
#ifndef RC_MORTON_H
#define RC_MORTON_H

#include <stdint.h>

#include "util/rc_error.h"

/* Alg. 2 verbatim: bx, by powers of two, W = extent along b (a multiple of
 * by^2). */
int64_t rc_morton_alg2(int a, int b, int bx, int by, int W);

/* *ret (malloc'd, na*nb entries): the ordering permutation.  bx, by must be
 * powers of two; bx = by = 1 degenerates to column stacking (b fastest), the
 * order Alg. 2 gives its tiles of tiles. */
int rc_morton_perm(int na, int nb, int bx, int by, int32_t **ret, rc_err *err);

/* out[perm[i]*ncols + j] = in[i*ncols + j] for i < n; out holds nout >= n
 * rows (rows n..nout-1 of out are zeroed: the padding of BSR). */
void rc_perm_apply(const int32_t *perm, int64_t n, int64_t nout, int ncols, const float *in, float *out);
/* out[i*ncols + j] = in[perm[i]*ncols + j]. */
void rc_perm_unapply(const int32_t *perm, int64_t n, int ncols, const float *in, float *out);

#endif
