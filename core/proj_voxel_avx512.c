/* The voxel back projector's tile loops compiled for AVX-512 (F, VL, DQ, BW)
 * (proj_voxel_tile.h); called only when the CPU has them. */
#define RC_BPV_TILE rc_bpv_tile_avx512
#define RC_BPV_SUFFIX avx512
#include "proj_voxel_tile.h"
