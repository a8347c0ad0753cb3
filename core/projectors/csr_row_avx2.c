/* The fp32 CSR row kernel (csr_row.h) compiled for AVX2; called only when
 * the CPU has it. */
#define RC_CSR_SUFFIX avx2
#include "projectors/csr_row.h"
