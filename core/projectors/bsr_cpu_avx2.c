/*
 * bsr_cpu_avx2: the AVX2 products of bsr_cpu.h, for x86-64 CPUs without
 * AVX-512 (compiled with the AVX2 flags; the fp16 weights need F16C, which
 * every AVX2 CPU has and which rc_bsr_cpu_build checks).  The same scheme as
 * bsr_cpu_avx512.c: a row's sums in registers, 8 fp16 weights per
 * vcvtph2ps, the input rows as FMA memory operands; 32 slices = four ymm per
 * row, two sets of sums (even and odd non-zeros) for eight FMA chains.
 */
#include <immintrin.h>

#include "projectors/bsr_cpu.h"

#define F16C_TARGET __attribute__((target("f16c,avx2,fma")))

F16C_TARGET static void rows32(const rc_spm16 *m, const float *in, float *out, int64_t r0, int64_t r1)
{
	float w[8] __attribute__((aligned(32)));
	for (int64_t r = r0; r < r1; r++) {
		__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
		__m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps(), b2 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
		int64_t i = m->ptr[r], e = m->ptr[r + 1];
		while (i < e) {
			int n = e - i < 8 ? (int)(e - i) : 8;
			/* the arrays have RC_SPM16_PAD entries past the last row */
			_mm256_store_ps(w, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(m->val + i))));
			const uint32_t *ix = m->idx + i;
			int j = 0;
			for (; j + 2 <= n; j += 2) {
				const float *x0 = in + (size_t)ix[j] * 32, *x1 = in + (size_t)ix[j + 1] * 32;
				__m256 s0 = _mm256_broadcast_ss(&w[j]), s1 = _mm256_broadcast_ss(&w[j + 1]);
				a0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(x0), a0);
				a1 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(x0 + 8), a1);
				a2 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(x0 + 16), a2);
				a3 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(x0 + 24), a3);
				b0 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(x1), b0);
				b1 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(x1 + 8), b1);
				b2 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(x1 + 16), b2);
				b3 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(x1 + 24), b3);
			}
			if (j < n) {
				const float *x0 = in + (size_t)ix[j] * 32;
				__m256 s0 = _mm256_broadcast_ss(&w[j]);
				a0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(x0), a0);
				a1 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(x0 + 8), a1);
				a2 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(x0 + 16), a2);
				a3 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(x0 + 24), a3);
			}
			i += n;
		}
		_mm256_storeu_ps(out + r * 32, _mm256_add_ps(a0, b0));
		_mm256_storeu_ps(out + r * 32 + 8, _mm256_add_ps(a1, b1));
		_mm256_storeu_ps(out + r * 32 + 16, _mm256_add_ps(a2, b2));
		_mm256_storeu_ps(out + r * 32 + 24, _mm256_add_ps(a3, b3));
	}
}

/* Any nc: 8 slices at a time (the last through a load / store mask), the
 * row's non-zeros walked once per group of 8. */
F16C_TARGET static void rows_any(const rc_spm16 *m, const float *in, float *out, int nc, int64_t r0, int64_t r1)
{
	float w[8] __attribute__((aligned(32)));
	for (int64_t r = r0; r < r1; r++) {
		int64_t b = m->ptr[r], e = m->ptr[r + 1];
		for (int c0 = 0; c0 < nc; c0 += 8) {
			int left = nc - c0 < 8 ? nc - c0 : 8;
			__m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
			__m256 a0 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps();
			for (int64_t i = b; i < e;) {
				int n = e - i < 8 ? (int)(e - i) : 8;
				_mm256_store_ps(w, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(m->val + i))));
				const uint32_t *ix = m->idx + i;
				int j = 0;
				for (; j + 2 <= n; j += 2) {
					a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(&w[j]),
							     _mm256_maskload_ps(in + (size_t)ix[j] * nc + c0, k), a0);
					b0 = _mm256_fmadd_ps(_mm256_broadcast_ss(&w[j + 1]),
							     _mm256_maskload_ps(in + (size_t)ix[j + 1] * nc + c0, k), b0);
				}
				if (j < n)
					a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(&w[j]),
							     _mm256_maskload_ps(in + (size_t)ix[j] * nc + c0, k), a0);
				i += n;
			}
			_mm256_maskstore_ps(out + r * nc + c0, k, _mm256_add_ps(a0, b0));
		}
	}
}

void rc_spm16_rows_avx2(const rc_spm16 *m, const float *in, float *out, int nc, int64_t r0, int64_t r1)
{
	if (nc == 32)
		rows32(m, in, out, r0, r1);
	else
		rows_any(m, in, out, nc, r0, r1);
}
