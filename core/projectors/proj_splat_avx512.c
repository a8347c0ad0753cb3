/* The splatting projector's column loop (proj_splat_col.h) compiled for
 * AVX512; called only when the CPU has it. */
#define RC_SPLAT_SUFFIX avx512
#include "projectors/proj_splat_col.h"
