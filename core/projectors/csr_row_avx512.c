/* The fp32 CSR row kernel (csr_row.h) compiled for AVX-512; called only
 * when the CPU has it. */
#define RC_CSR_SUFFIX avx512
#include "projectors/csr_row.h"
