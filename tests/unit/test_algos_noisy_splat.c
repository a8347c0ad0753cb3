/*
 * test_algos_noisy on a detector of 1.75-voxel pixels (voxels at most ~0.9
 * pixel apart), so that the CPU engine runs the iterative algorithms on the
 * splat pair (proj_splat.c), the path paper 000's geometry takes: the same
 * assertions, the defaults against FDK on the same noisy data.
 */
#define SHEPP_CASE_PIXEL_VOXELS 1.75
#define RC_NOISY_SPLAT 1
#include "test_algos_noisy.c"
