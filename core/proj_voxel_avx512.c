/* The voxel back projector's tile loops compiled for AVX-512 (F, VL, DQ, BW)
 * (proj_voxel_tile.h); called only when the CPU has them. */
/* The Makefile tunes for "generic", for which GCC 12 emulates gathers with
 * scalar loads; a gather is one instruction on every CPU with this ISA and
 * measured faster here (docs/cpu-engine.md), so tune this file for it. */
#pragma GCC target("tune=skylake-avx512,prefer-vector-width=512")
#define RC_BPV_TILE rc_bpv_tile_avx512
#define RC_BPV_SUFFIX avx512
#include "proj_voxel_tile.h"
