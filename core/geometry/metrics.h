/*
 * metrics: how far a reconstruction is from its reference, over an optional
 * mask, and the masks the tests use.
 *
 *   relative error  ||x - x0|| / ||x0||   (paper 001 Eq. 4, Frobenius norms)
 *   RMSE            sqrt(mean((x - x0)^2))
 *   PSNR            20 log10(peak / RMSE), peak = max |x0| unless given
 *
 * A mask is one byte per element (non-zero = counted); NULL counts every
 * element.  Sums run in double.  When nothing is counted (empty mask, n = 0)
 * or the reference is all zero for the relative error, the result is NaN: a
 * metric over nothing must never pass a test by accident.
 */
#ifndef RC_METRICS_H
#define RC_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "geometry/geometry.h"

double rc_metric_rel_error(const float *x, const float *x0, const uint8_t *mask, size_t n);
double rc_metric_rmse(const float *x, const float *x0, const uint8_t *mask, size_t n);
/* peak <= 0: the largest |x0| over the mask.  RMSE 0 gives +INFINITY. */
double rc_metric_psnr(const float *x, const float *x0, const uint8_t *mask, size_t n, double peak);

/* Masks over a volume [z][y][x] (rc_volume_count bytes); they return the
 * number of voxels set.  The cylinder is about the volume's z axis through
 * its centre, radius r mm, |z - cz| <= half_height mm; the box is
 * |x_a - c_a| <= half[a] mm.  A voxel counts when its centre is inside. */
size_t rc_mask_cylinder(const rc_volume_desc *vol, double r, double half_height, uint8_t *mask);
size_t rc_mask_box(const rc_volume_desc *vol, const double half[3], uint8_t *mask);

#endif
