/* The forward ray caster's group loop compiled for AVX2 + FMA
 * (proj_raycast_group.h); called only when the CPU has them. */
#define RC_FPR_GROUP rc_fpr_group_avx2
#define RC_BPM_GROUP rc_bpm_group_avx2
#include "proj_raycast_group.h"
