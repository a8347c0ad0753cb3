/*
 * test_algos_noisy on a coarse grid: pixels of 0.75 voxel (voxels project
 * about 2 pixels apart at the isocentre, up to ~2.1 at the volume's edge),
 * on a detector of 2.5 n pixels that covers the volume's shadow, so that
 * the CPU engine runs the iterative algorithms on the footprint pair
 * (proj_footprint.c): the same assertions, the defaults against FDK on the
 * same noisy data.  Half test_algos_noisy's photons: its pixels are
 * smaller, and at 1e5 the relative noise (0.0086) fell below
 * RC_TV_REF_NOISE, the noise the default TV weight was chosen at.  The
 * 2-D cases are test_algos_noisy's alone.
 */
#define SHEPP_CASE_PIXEL_VOXELS 0.75
#define SHEPP_CASE_DETECTOR_PIXELS(n) ((n) * 5 / 2)
#define RC_NOISY_FOOTPRINT 1
#define RC_NOISY_PHOTONS 5e4
#include "test_algos_noisy.c"
