/*
 * csr_row: the row kernel of the fp32 CSR products (dd_matrix.c's
 * rc_csr_mul_range), y[0..nc) = sum over the row's entries of val * X[col],
 * included once per ISA file with RC_CSR_SUFFIX naming it, so the same C is
 * compiled for baseline x86-64, AVX2 and AVX-512 (the slice loop vectorises
 * to the register width; each y[j] sums in entry order on every path, so
 * the paths agree bit for bit).
 */
#ifndef RC_CSR_ROW_H
#define RC_CSR_ROW_H

#include <stdint.h>

void rc_csr_row_baseline(const int32_t *restrict col, const float *restrict val, int64_t n, const float *restrict X,
			 int nc, float *restrict y);
void rc_csr_row_avx2(const int32_t *restrict col, const float *restrict val, int64_t n, const float *restrict X,
		     int nc, float *restrict y);
void rc_csr_row_avx512(const int32_t *restrict col, const float *restrict val, int64_t n, const float *restrict X,
		       int nc, float *restrict y);

#endif

#ifdef RC_CSR_SUFFIX
#define RC_CSR_CAT2(a, b) a##_##b
#define RC_CSR_CAT(a, b) RC_CSR_CAT2(a, b)

void RC_CSR_CAT(rc_csr_row, RC_CSR_SUFFIX)(const int32_t *restrict col, const float *restrict val, int64_t n,
					    const float *restrict X, int nc, float *restrict y)
{
	for (int j = 0; j < nc; j++)
		y[j] = 0;
	for (int64_t e = 0; e < n; e++) {
		const float a = val[e], *restrict x = X + (int64_t)col[e] * nc;
		for (int j = 0; j < nc; j++)
			y[j] += a * x[j];
	}
}
#endif
