/* The splatting projector's column loop (proj_splat_col.h) compiled for
 * AVX2; called only when the CPU has it. */
#define RC_SPLAT_SUFFIX avx2
#include "projectors/proj_splat_col.h"
