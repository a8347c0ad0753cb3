/*
 * fbp_matrix: FBP's 2-D back projection of a fan or parallel geometry as a
 * sparse matrix M of one slice (fbp_matrix.c), in dd_matrix.h's shape:
 * rows are bins x views (view * nu + u), columns pixels (iy * nx + ix), and
 * M^T q equals rc_bp_plane(q) (proj_cpu.h) up to float rounding.  The
 * tensor engine runs FDK on a 2-D stack as that one product.
 */
#ifndef RC_FBP_MATRIX_H
#define RC_FBP_MATRIX_H

#include "projectors/dd_matrix.h"

/* Builds scale * M with `threads` threads (0 = one per online core);
 * RC_EUNSUPPORTED unless fan or parallel.  A fan's weights 1/w^2 are about
 * 1e-6 mm^-2, below fp16's normal range: scale D^2 brings them near 1 for
 * the BSR fp16 copy (the caller divides its data by the same). */
int rc_fbp_matrix_build(const rc_geom *g, double scale, int threads, rc_csr **ret, rc_err *err);

#endif
