/*
 * bsr_cpu_avx512: the AVX-512 products of bsr_cpu.h (compiled with the
 * AVX-512 flags; called only where the CPU has them).
 *
 * One row at a time: its nc sums stay in registers while the row's
 * non-zeros stream by; 16 fp16 values are converted per vcvtph2ps and
 * spilled to a 64-byte buffer whose lanes are broadcast from L1.  With 32
 * slices a non-zero costs two FMAs with the x row as memory operands; two
 * sets of sums (even and odd non-zeros) give four independent FMA chains,
 * enough to cover the FMA latency at one 512-bit FMA per cycle (Zen 4 and
 * Skylake-X both issue one or two per cycle with latency 4).
 */
#include <immintrin.h>

#include "projectors/bsr_cpu.h"

static void rows32(const rc_spm16 *m, const float *in, float *out, int64_t r0, int64_t r1)
{
	float w[16] __attribute__((aligned(64)));
	for (int64_t r = r0; r < r1; r++) {
		__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
		__m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
		int64_t i = m->ptr[r], e = m->ptr[r + 1];
		while (i < e) {
			int n = e - i < 16 ? (int)(e - i) : 16;
			/* the arrays have RC_SPM16_PAD entries past the last row */
			_mm512_store_ps(w, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(m->val + i))));
			const uint32_t *ix = m->idx + i;
			int j = 0;
			for (; j + 2 <= n; j += 2) {
				const float *x0 = in + (size_t)ix[j] * 32, *x1 = in + (size_t)ix[j + 1] * 32;
				__m512 s0 = _mm512_set1_ps(w[j]), s1 = _mm512_set1_ps(w[j + 1]);
				a0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0), a0);
				a1 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0 + 16), a1);
				b0 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(x1), b0);
				b1 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(x1 + 16), b1);
			}
			if (j < n) {
				const float *x0 = in + (size_t)ix[j] * 32;
				__m512 s0 = _mm512_set1_ps(w[j]);
				a0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0), a0);
				a1 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0 + 16), a1);
			}
			i += n;
		}
		_mm512_storeu_ps(out + r * 32, _mm512_add_ps(a0, b0));
		_mm512_storeu_ps(out + r * 32 + 16, _mm512_add_ps(a1, b1));
	}
}

/* Any nc: 16 slices at a time (the last masked), the row's non-zeros walked
 * once per group of 16. */
static void rows_any(const rc_spm16 *m, const float *in, float *out, int nc, int64_t r0, int64_t r1)
{
	float w[16] __attribute__((aligned(64)));
	for (int64_t r = r0; r < r1; r++) {
		int64_t b = m->ptr[r], e = m->ptr[r + 1];
		for (int c0 = 0; c0 < nc; c0 += 16) {
			__mmask16 k = nc - c0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nc - c0)) - 1);
			__m512 a0 = _mm512_setzero_ps(), b0 = _mm512_setzero_ps();
			for (int64_t i = b; i < e;) {
				int n = e - i < 16 ? (int)(e - i) : 16;
				_mm512_store_ps(w, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(m->val + i))));
				const uint32_t *ix = m->idx + i;
				int j = 0;
				for (; j + 2 <= n; j += 2) {
					const float *x0 = in + (size_t)ix[j] * nc + c0, *x1 = in + (size_t)ix[j + 1] * nc + c0;
					a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), _mm512_maskz_loadu_ps(k, x0), a0);
					b0 = _mm512_fmadd_ps(_mm512_set1_ps(w[j + 1]), _mm512_maskz_loadu_ps(k, x1), b0);
				}
				if (j < n)
					a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[j]),
							     _mm512_maskz_loadu_ps(k, in + (size_t)ix[j] * nc + c0), a0);
				i += n;
			}
			_mm512_mask_storeu_ps(out + r * nc + c0, k, _mm512_add_ps(a0, b0));
		}
	}
}

void rc_spm16_rows_avx512(const rc_spm16 *m, const float *in, float *out, int nc, int64_t r0, int64_t r1)
{
	if (nc == 32)
		rows32(m, in, out, r0, r1);
	else
		rows_any(m, in, out, nc, r0, r1);
}

/* Peak FMA rate: 8 independent 512-bit FMA chains (latency 4 x up to two
 * per cycle), iters times; returns the flops done. */
double rc_fma_loop_avx512(long iters)
{
	__m512 a[8], m = _mm512_set1_ps(1.0000001f), d = _mm512_set1_ps(1e-7f);
	for (int k = 0; k < 8; k++)
		a[k] = _mm512_set1_ps((float)k);
	for (long i = 0; i < iters; i++) {
		for (int k = 0; k < 8; k++)
			a[k] = _mm512_fmadd_ps(a[k], m, d);
		__asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]),
				 "+v"(a[6]), "+v"(a[7]));
	}
	float s[16];
	__m512 t = a[0];
	for (int k = 1; k < 8; k++)
		t = _mm512_add_ps(t, a[k]);
	_mm512_storeu_ps(s, t);
	volatile float sink = s[0];
	(void)sink;
	return (double)iters * 8 * 16 * 2;
}
