/* The counts row (counts_row.h) compiled for AVX-512; called only when the
 * CPU has it. */
#include "util/counts.h"

#define RC_COUNTS_SUFFIX avx512
#include "util/counts_row.h"
