/* The separable-footprint pair's column loops (proj_footprint_col.h) compiled
 * for AVX-512; called only when the CPU has it. */
#define RC_FPF_SUFFIX avx512
#include "projectors/proj_footprint_col.h"
