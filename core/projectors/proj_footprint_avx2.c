/* The separable-footprint pair's column loops (proj_footprint_col.h) compiled
 * for AVX2; called only when the CPU has it. */
#define RC_FPF_SUFFIX avx2
#include "projectors/proj_footprint_col.h"
