/*
 * test_algos_noisy_footprint on a cylindrical (curved) detector: the same
 * coarse grid (pixels of 0.75 voxel, arc lengths), on which the CPU engine
 * runs the iterative algorithms on the footprint pair's curved set-up
 * (proj_footprint.c) and FDK on the cylinder's back projection
 * (proj_cyl.c): the same assertions, the defaults against FDK on the same
 * noisy data (exact line integrals through the cylinder's pixels).
 */
#define SHEPP_CASE_PIXEL_VOXELS 0.75
#define SHEPP_CASE_DETECTOR_PIXELS(n) ((n) * 5 / 2)
#define SHEPP_CASE_SHAPE RC_DETECTOR_CURVED
#define RC_NOISY_FOOTPRINT 1
#define RC_NOISY_PHOTONS 5e4
#include "test_algos_noisy.c"
