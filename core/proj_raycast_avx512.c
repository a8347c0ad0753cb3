/* The forward ray caster's group loop compiled for AVX-512 (F, VL, DQ, BW)
 * (proj_raycast_group.h); called only when the CPU has them. */
#pragma GCC target("prefer-vector-width=512")
#define RC_FPR_GROUP rc_fpr_group_avx512
#define RC_BPM_GROUP rc_bpm_group_avx512
#include "proj_raycast_group.h"
