/* The counts row (counts_row.h) compiled for AVX2; called only when the
 * CPU has it. */
#include "util/counts.h"

#define RC_COUNTS_SUFFIX avx2
#include "util/counts_row.h"
