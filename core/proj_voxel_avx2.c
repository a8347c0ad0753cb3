/* The voxel back projector's tile loops compiled for AVX2 + FMA
 * (proj_voxel_tile.h); called only when the CPU has them.  Tuned for
 * "generic", for which GCC emulates gathers with scalar loads: on the Xeon
 * measured (docs/cpu-engine.md) that ran the cone loop twice as fast as
 * vgatherdps. */
#define RC_BPV_TILE rc_bpv_tile_avx2
#define RC_BPV_SUFFIX avx2
#include "proj_voxel_tile.h"
