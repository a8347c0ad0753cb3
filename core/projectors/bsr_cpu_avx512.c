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

/* Read the weights just stored to the buffer p (n elements) back from
 * memory.  Without it GCC keeps the stored vector in a register and makes
 * each broadcast of a weight a vpermd with an index vector built by mov +
 * vpbroadcastd (objdump -d of this file, GCC 12 -O3): two vector ALU
 * operations per non-zero that compete with the FMAs for the FP pipes
 * (on Zen 4 vpermd and the FMAs share a pipe).  Through the opaque
 * pointer the broadcast is a vbroadcastss from memory: a load, no vector
 * ALU work. */
#define W_FROM_MEMORY(p, n) __asm__("" : "+r"(p) : "m"(*(const __typeof__(*(p))(*)[n])(p)))

/* fp32 input; four independent pairs of sums (2.04-2.10 CPU-ns per
 * non-zero x 32 slices at 256^2 against 2.13-2.20 with two, bench-tensor-
 * spmm on the Zen 4 of docs/tensor.md) */
static void rows32(const rc_spm16 *m, const float *in, float *out, int64_t r0, int64_t r1)
{
	float w[16] __attribute__((aligned(64)));
	for (int64_t r = r0; r < r1; r++) {
		__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
		__m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
		__m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
		__m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
		int64_t i = m->ptr[r], e = m->ptr[r + 1];
		while (i < e) {
			int n = e - i < 16 ? (int)(e - i) : 16;
			/* the arrays have RC_SPM16_PAD entries past the last row */
			_mm512_store_ps(w, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(m->val + i))));
			const float *wm = w;
			W_FROM_MEMORY(wm, 16);
			const uint32_t *ix = m->idx + i;
			int j = 0;
			/* four chains of two FMAs: not over the row's end, where a
			 * zero weight times an inf in the input would be a NaN */
			for (; j + 4 <= n; j += 4) {
				const float *x0 = in + (size_t)ix[j] * 32, *x1 = in + (size_t)ix[j + 1] * 32;
				const float *x2 = in + (size_t)ix[j + 2] * 32, *x3 = in + (size_t)ix[j + 3] * 32;
				__m512 s0 = _mm512_set1_ps(wm[j]), s1 = _mm512_set1_ps(wm[j + 1]);
				__m512 s2 = _mm512_set1_ps(wm[j + 2]), s3 = _mm512_set1_ps(wm[j + 3]);
				a0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0), a0);
				a1 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0 + 16), a1);
				b0 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(x1), b0);
				b1 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(x1 + 16), b1);
				c0 = _mm512_fmadd_ps(s2, _mm512_loadu_ps(x2), c0);
				c1 = _mm512_fmadd_ps(s2, _mm512_loadu_ps(x2 + 16), c1);
				d0 = _mm512_fmadd_ps(s3, _mm512_loadu_ps(x3), d0);
				d1 = _mm512_fmadd_ps(s3, _mm512_loadu_ps(x3 + 16), d1);
			}
			for (; j < n; j++) {
				const float *x0 = in + (size_t)ix[j] * 32;
				__m512 s0 = _mm512_set1_ps(wm[j]);
				a0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0), a0);
				a1 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0 + 16), a1);
			}
			i += n;
		}
		a0 = _mm512_add_ps(_mm512_add_ps(a0, b0), _mm512_add_ps(c0, d0));
		a1 = _mm512_add_ps(_mm512_add_ps(a1, b1), _mm512_add_ps(c1, d1));
		_mm512_storeu_ps(out + r * 32, a0);
		_mm512_storeu_ps(out + r * 32 + 16, a1);
	}
}

/* The rest of row r (rc_spm16 as rows32) added to the sums a0, a1. */
static inline void rest32(const rc_spm16 *m, const float *in, int64_t r, __m512 *pa0, __m512 *pa1)
{
	float w[16] __attribute__((aligned(64)));
	__m512 a0 = *pa0, a1 = *pa1;
	__m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
	int64_t i = m->ptr[r], e = m->ptr[r + 1];
	while (i < e) {
		int n = e - i < 16 ? (int)(e - i) : 16;
		_mm512_store_ps(w, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(m->val + i))));
		const float *wm = w;
		W_FROM_MEMORY(wm, 16);
		const uint32_t *ix = m->idx + i;
		int j = 0;
		for (; j + 2 <= n; j += 2) {
			const float *x0 = in + (size_t)ix[j] * 32, *x1 = in + (size_t)ix[j + 1] * 32;
			__m512 s0 = _mm512_set1_ps(wm[j]), s1 = _mm512_set1_ps(wm[j + 1]);
			a0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0), a0);
			a1 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0 + 16), a1);
			b0 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(x1), b0);
			b1 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(x1 + 16), b1);
		}
		if (j < n) {
			const float *x0 = in + (size_t)ix[j] * 32;
			__m512 s0 = _mm512_set1_ps(wm[j]);
			a0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0), a0);
			a1 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(x0 + 16), a1);
		}
		i += n;
	}
	*pa0 = _mm512_add_ps(a0, b0);
	*pa1 = _mm512_add_ps(a1, b1);
}

/* The shared entries of pair q (rc_spm16p) added to the sums of its two
 * rows (a: row 2q, b: row 2q + 1): each input row loaded once (two zmm)
 * for four FMAs, two entries at a time (eight chains). */
static inline void pair32(const rc_spm16p *m, const float *in, int64_t q, __m512 *pa0, __m512 *pa1, __m512 *pb0,
			  __m512 *pb1)
{
	float w[32] __attribute__((aligned(64)));
	__m512 a0 = *pa0, a1 = *pa1, b0 = *pb0, b1 = *pb1;
	__m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
	__m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
	int64_t i = m->sptr[q], e = m->sptr[q + 1];
	while (i < e) {
		int n = e - i < 16 ? (int)(e - i) : 16;
		/* 16 pairs of fp16 = (row 2q, row 2q + 1) x 16 entries */
		__m512i h = _mm512_loadu_si512((const void *)(m->sval + i));
		_mm512_store_ps(w, _mm512_cvtph_ps(_mm512_castsi512_si256(h)));
		_mm512_store_ps(w + 16, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)));
		const float *wm = w;
		W_FROM_MEMORY(wm, 32);
		const uint32_t *ix = m->sidx + i;
		int j = 0;
		for (; j + 2 <= n; j += 2) {
			const float *x0 = in + (size_t)ix[j] * 32, *x1 = in + (size_t)ix[j + 1] * 32;
			__m512 u0 = _mm512_loadu_ps(x0), u1 = _mm512_loadu_ps(x0 + 16);
			__m512 v0 = _mm512_loadu_ps(x1), v1 = _mm512_loadu_ps(x1 + 16);
			__m512 sa = _mm512_set1_ps(wm[2 * j]), sb = _mm512_set1_ps(wm[2 * j + 1]);
			__m512 ta = _mm512_set1_ps(wm[2 * j + 2]), tb = _mm512_set1_ps(wm[2 * j + 3]);
			a0 = _mm512_fmadd_ps(sa, u0, a0);
			a1 = _mm512_fmadd_ps(sa, u1, a1);
			b0 = _mm512_fmadd_ps(sb, u0, b0);
			b1 = _mm512_fmadd_ps(sb, u1, b1);
			c0 = _mm512_fmadd_ps(ta, v0, c0);
			c1 = _mm512_fmadd_ps(ta, v1, c1);
			d0 = _mm512_fmadd_ps(tb, v0, d0);
			d1 = _mm512_fmadd_ps(tb, v1, d1);
		}
		if (j < n) {
			const float *x0 = in + (size_t)ix[j] * 32;
			__m512 u0 = _mm512_loadu_ps(x0), u1 = _mm512_loadu_ps(x0 + 16);
			__m512 sa = _mm512_set1_ps(wm[2 * j]), sb = _mm512_set1_ps(wm[2 * j + 1]);
			a0 = _mm512_fmadd_ps(sa, u0, a0);
			a1 = _mm512_fmadd_ps(sa, u1, a1);
			b0 = _mm512_fmadd_ps(sb, u0, b0);
			b1 = _mm512_fmadd_ps(sb, u1, b1);
		}
		i += n;
	}
	*pa0 = _mm512_add_ps(a0, c0);
	*pa1 = _mm512_add_ps(a1, c1);
	*pb0 = _mm512_add_ps(b0, d0);
	*pb1 = _mm512_add_ps(b1, d1);
}

/* Row groups (rc_spm16p), fp32 input.  Group 4: the entries all four rows
 * have, each input row loaded once for eight FMAs (eight chains), then
 * each pair's shared entries (pair32), then each row's own (rest32).
 * Group 2: pair32 and rest32. */
void rc_spm16p_rows32_avx512(const rc_spm16p *m, const float *in, float *out, int64_t r0, int64_t r1)
{
	float w[64] __attribute__((aligned(64)));
	int k = m->group;
	for (int64_t g = r0 / k; g < r1 / k; g++) {
		__m512 s[4][2];
		for (int r = 0; r < 4; r++)
			s[r][0] = s[r][1] = _mm512_setzero_ps();
		if (k == 4) {
			__m512 a0 = s[0][0], a1 = s[0][1], b0 = s[1][0], b1 = s[1][1];
			__m512 c0 = s[2][0], c1 = s[2][1], d0 = s[3][0], d1 = s[3][1];
			int64_t i = m->qptr[g], e = m->qptr[g + 1];
			while (i < e) {
				int n = e - i < 16 ? (int)(e - i) : 16;
				/* 16 x 4 fp16 = (rows 4g .. 4g + 3) x 16 entries */
				for (int v = 0; v < 4; v++)
					_mm512_store_ps(w + 16 * v, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(m->qval + i + 4 * v))));
				const float *wm = w;
				W_FROM_MEMORY(wm, 64);
				const uint32_t *ix = m->qidx + i;
				for (int j = 0; j < n; j++) {
					const float *x0 = in + (size_t)ix[j] * 32;
					__m512 u0 = _mm512_loadu_ps(x0), u1 = _mm512_loadu_ps(x0 + 16);
					__m512 sa = _mm512_set1_ps(wm[4 * j]), sb = _mm512_set1_ps(wm[4 * j + 1]);
					__m512 sc = _mm512_set1_ps(wm[4 * j + 2]), sd = _mm512_set1_ps(wm[4 * j + 3]);
					a0 = _mm512_fmadd_ps(sa, u0, a0);
					a1 = _mm512_fmadd_ps(sa, u1, a1);
					b0 = _mm512_fmadd_ps(sb, u0, b0);
					b1 = _mm512_fmadd_ps(sb, u1, b1);
					c0 = _mm512_fmadd_ps(sc, u0, c0);
					c1 = _mm512_fmadd_ps(sc, u1, c1);
					d0 = _mm512_fmadd_ps(sd, u0, d0);
					d1 = _mm512_fmadd_ps(sd, u1, d1);
				}
				i += n;
			}
			s[0][0] = a0, s[0][1] = a1, s[1][0] = b0, s[1][1] = b1;
			s[2][0] = c0, s[2][1] = c1, s[3][0] = d0, s[3][1] = d1;
		}
		for (int h = 0; h < k / 2; h++)
			pair32(m, in, g * k / 2 + h, &s[2 * h][0], &s[2 * h][1], &s[2 * h + 1][0], &s[2 * h + 1][1]);
		for (int r = 0; r < k; r++) {
			rest32(&m->rest, in, g * k + r, &s[r][0], &s[r][1]);
			_mm512_storeu_ps(out + (g * k + r) * 32, s[r][0]);
			_mm512_storeu_ps(out + (g * k + r) * 32 + 16, s[r][1]);
		}
	}
}

/* X in fp16 (32 slices = 64 bytes a row, each slice divided by its largest
 * |value|, as the GPU's WMMA path does), sums scaled back by sc at the
 * store.  Half the bytes of fp32 rows: on the Zen 4 measured (bench-tensor-
 * spmm, 256^2) 1.87 against 2.3-2.5 CPU-ns per non-zero x 32 slices, since
 * the fp32 kernel is bound by its two 64-byte loads per non-zero (L1 / L2),
 * not by its FMAs; vcvtph2ps runs beside the FMAs. */
static void rows32h(const rc_spm16 *m, const uint16_t *in, const float *sc, float *out, int64_t r0, int64_t r1)
{
	float w[16] __attribute__((aligned(64)));
	__m512 sc0 = _mm512_loadu_ps(sc), sc1 = _mm512_loadu_ps(sc + 16);
	for (int64_t r = r0; r < r1; r++) {
		__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
		__m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
		int64_t i = m->ptr[r], e = m->ptr[r + 1];
		while (i < e) {
			int n = e - i < 16 ? (int)(e - i) : 16;
			_mm512_store_ps(w, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(m->val + i))));
			const float *wm = w;
			W_FROM_MEMORY(wm, 16);
			const uint32_t *ix = m->idx + i;
			int j = 0;
			for (; j + 2 <= n; j += 2) {
				const uint16_t *x0 = in + (size_t)ix[j] * 32, *x1 = in + (size_t)ix[j + 1] * 32;
				__m512 s0 = _mm512_set1_ps(wm[j]), s1 = _mm512_set1_ps(wm[j + 1]);
				a0 = _mm512_fmadd_ps(s0, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x0)), a0);
				a1 = _mm512_fmadd_ps(s0, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x0 + 16))), a1);
				b0 = _mm512_fmadd_ps(s1, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x1)), b0);
				b1 = _mm512_fmadd_ps(s1, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x1 + 16))), b1);
			}
			if (j < n) {
				const uint16_t *x0 = in + (size_t)ix[j] * 32;
				__m512 s0 = _mm512_set1_ps(wm[j]);
				a0 = _mm512_fmadd_ps(s0, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x0)), a0);
				a1 = _mm512_fmadd_ps(s0, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x0 + 16))), a1);
			}
			i += n;
		}
		_mm512_storeu_ps(out + r * 32, _mm512_mul_ps(sc0, _mm512_add_ps(a0, b0)));
		_mm512_storeu_ps(out + r * 32 + 16, _mm512_mul_ps(sc1, _mm512_add_ps(a1, b1)));
	}
}

void rc_spm16_rows32h_avx512(const rc_spm16 *m, const uint16_t *in, const float *sc, float *out, int64_t r0, int64_t r1)
{
	rows32h(m, in, sc, out, r0, r1);
}

void rc_absmax32_avx512(const float *in, int64_t r0, int64_t r1, float mx[32])
{
	/* max_ps drops a NaN in one of the two orders: NaN and inf are
	 * flagged apart (not less than inf, unordered) and reported as inf */
	const __m512 inf = _mm512_set1_ps(__builtin_inff());
	__m512 m0 = _mm512_loadu_ps(mx), m1 = _mm512_loadu_ps(mx + 16);
	__mmask16 bad0 = 0, bad1 = 0;
	for (int64_t r = r0; r < r1; r++) {
		__m512 v0 = _mm512_abs_ps(_mm512_loadu_ps(in + r * 32)), v1 = _mm512_abs_ps(_mm512_loadu_ps(in + r * 32 + 16));
		bad0 |= _mm512_cmp_ps_mask(v0, inf, _CMP_NLT_UQ);
		bad1 |= _mm512_cmp_ps_mask(v1, inf, _CMP_NLT_UQ);
		m0 = _mm512_max_ps(m0, v0);
		m1 = _mm512_max_ps(m1, v1);
	}
	_mm512_storeu_ps(mx, _mm512_mask_mov_ps(m0, bad0, inf));
	_mm512_storeu_ps(mx + 16, _mm512_mask_mov_ps(m1, bad1, inf));
}

void rc_to_f16_32_avx512(const float *in, const float inv[32], uint16_t *out, int64_t r0, int64_t r1)
{
	__m512 i0 = _mm512_loadu_ps(inv), i1 = _mm512_loadu_ps(inv + 16);
	for (int64_t r = r0; r < r1; r++) {
		__m256i h0 = _mm512_cvtps_ph(_mm512_mul_ps(i0, _mm512_loadu_ps(in + r * 32)), _MM_FROUND_TO_NEAREST_INT);
		__m256i h1 = _mm512_cvtps_ph(_mm512_mul_ps(i1, _mm512_loadu_ps(in + r * 32 + 16)), _MM_FROUND_TO_NEAREST_INT);
		_mm256_storeu_si256((__m256i *)(out + r * 32), h0);
		_mm256_storeu_si256((__m256i *)(out + r * 32 + 16), h1);
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
				const float *wm = w;
				W_FROM_MEMORY(wm, 16);
				const uint32_t *ix = m->idx + i;
				int j = 0;
				for (; j + 2 <= n; j += 2) {
					const float *x0 = in + (size_t)ix[j] * nc + c0, *x1 = in + (size_t)ix[j + 1] * nc + c0;
					a0 = _mm512_fmadd_ps(_mm512_set1_ps(wm[j]), _mm512_maskz_loadu_ps(k, x0), a0);
					b0 = _mm512_fmadd_ps(_mm512_set1_ps(wm[j + 1]), _mm512_maskz_loadu_ps(k, x1), b0);
				}
				if (j < n)
					a0 = _mm512_fmadd_ps(_mm512_set1_ps(wm[j]),
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

/* ---- AVX512_BF16 (Zen 4, Cooper Lake, Sapphire Rapids) ---------------------
 *
 * vdpbf16ps adds two bf16 products to each fp32 lane: one instruction takes
 * two non-zeros of a row for 16 slices, half the FMAs and half the input
 * bytes of rows32.  The input rows are bf16 (32 slices = 64 bytes, slices
 * in order); two rows x1, x2 are interleaved word by word (unpacklo/hi per
 * 128-bit lane) so each dword holds (x1[s], x2[s]) against the broadcast
 * pair (w1, w2).  unpacklo yields slices 8k..8k+3 in lane k, unpackhi
 * 8k+4..8k+7; the sums are put back in slice order at the store.  The fp16
 * weights are rounded to bf16 (8 significant bits instead of 11): A and A^T
 * use the same rounded values, so the products stay an adjoint pair. */
#define BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))

BF16_TARGET void rc_to_bf16_32_avx512(const float *in, uint16_t *out, int64_t r0, int64_t r1)
{
	for (int64_t r = r0; r < r1; r++) {
		__m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + r * 32 + 16), _mm512_loadu_ps(in + r * 32));
		_mm512_storeu_si512((void *)(out + r * 32), (__m512i)h);
	}
}

/* The non-zeros of row r added to the sums lo, hi (dword k of lane l of
 * lo: slice 8 l + k, of hi: slice 8 l + 4 + k; see rows32b's store). */
BF16_TARGET static inline void rest32b(const rc_spm16 *m, const uint16_t *in, int64_t r, __m512 *plo, __m512 *phi)
{
	uint32_t wp[8] __attribute__((aligned(32)));
	__m512 l0 = *plo, h0 = *phi;
	__m512 l1 = _mm512_setzero_ps(), h1 = _mm512_setzero_ps();
	int64_t i = m->ptr[r], e = m->ptr[r + 1];
	while (i < e) {
		int n = e - i < 16 ? (int)(e - i) : 16;
		/* weights past the row's end are zeroed: the odd one out is
		 * paired with a zero weight (and a valid row index: the
		 * arrays are padded) */
		__m512 w = _mm512_maskz_mov_ps((__mmask16)((1u << n) - 1),
					       _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(m->val + i))));
		_mm256_store_si256((__m256i *)wp, (__m256i)_mm512_cvtneps_pbh(w));
		const uint32_t *wpm = wp;
		W_FROM_MEMORY(wpm, 8);
		const uint32_t *ix = m->idx + i;
		int j = 0;
		for (; j + 4 <= n + 1; j += 4) {
			__m512i xa = _mm512_loadu_si512(in + (size_t)ix[j] * 32);
			__m512i xb = _mm512_loadu_si512(in + (size_t)ix[j + 1] * 32);
			__m512i xc = _mm512_loadu_si512(in + (size_t)ix[j + 2] * 32);
			__m512i xd = _mm512_loadu_si512(in + (size_t)ix[j + 3] * 32);
			__m512bh p0 = (__m512bh)_mm512_set1_epi32((int)wpm[j / 2]);
			__m512bh p1 = (__m512bh)_mm512_set1_epi32((int)wpm[j / 2 + 1]);
			l0 = _mm512_dpbf16_ps(l0, (__m512bh)_mm512_unpacklo_epi16(xa, xb), p0);
			h0 = _mm512_dpbf16_ps(h0, (__m512bh)_mm512_unpackhi_epi16(xa, xb), p0);
			l1 = _mm512_dpbf16_ps(l1, (__m512bh)_mm512_unpacklo_epi16(xc, xd), p1);
			h1 = _mm512_dpbf16_ps(h1, (__m512bh)_mm512_unpackhi_epi16(xc, xd), p1);
		}
		if (j < n) {
			__m512i xa = _mm512_loadu_si512(in + (size_t)ix[j] * 32);
			__m512i xb = _mm512_loadu_si512(in + (size_t)ix[j + 1] * 32);
			__m512bh p0 = (__m512bh)_mm512_set1_epi32((int)wpm[j / 2]);
			l0 = _mm512_dpbf16_ps(l0, (__m512bh)_mm512_unpacklo_epi16(xa, xb), p0);
			h0 = _mm512_dpbf16_ps(h0, (__m512bh)_mm512_unpackhi_epi16(xa, xb), p0);
		}
		i += n;
	}
	*plo = _mm512_add_ps(l0, l1);
	*phi = _mm512_add_ps(h0, h1);
}

/* output slice p of the first 16 from (lo, hi) dwords: lane k = p / 8 */
#define BF16_PERM0 _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23)
#define BF16_PERM1 _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31)

BF16_TARGET void rc_spm16_rows32b_avx512(const rc_spm16 *m, const uint16_t *in, float *out, int64_t r0, int64_t r1)
{
	const __m512i perm0 = BF16_PERM0, perm1 = BF16_PERM1;
	for (int64_t r = r0; r < r1; r++) {
		__m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
		rest32b(m, in, r, &lo, &hi);
		_mm512_storeu_ps(out + r * 32, _mm512_permutex2var_ps(lo, perm0, hi));
		_mm512_storeu_ps(out + r * 32 + 16, _mm512_permutex2var_ps(lo, perm1, hi));
	}
}

/* Entries [i, e) that all G rows of a group share (G = 4: the quads, 2: a
 * pair): idx, and G fp16 weights per entry (row 0 first).  Two entries at
 * a time: their input rows loaded and interleaved once (two loads, two
 * unpacks) for 2 G vdpbf16ps.  Weights per 32 / G entries: the G x 32 / G
 * fp16 to bf16, then vpermw so dword (jp, r) = (w[2 jp][r], w[2 jp + 1][r])
 * is the pair of row r for entries 2 jp, 2 jp + 1; weights past e zeroed
 * (their input rows are valid: the arrays are padded). */
BF16_TARGET static inline void shared32b(int G, const uint32_t *idx, const uint16_t *val, int64_t i, int64_t e,
					 const uint16_t *in, __m512 *lo, __m512 *hi)
{
	uint32_t wp[16] __attribute__((aligned(64)));
	/* vpermw index: word 2 d + h of the result = word (2 jp + h) G + r of
	 * the weights, d = jp G + r */
	uint16_t pidx[32];
	for (int d = 0; d < 16; d++)
		for (int h = 0; h < 2; h++)
			pidx[2 * d + h] = (uint16_t)((2 * (d / G) + h) * G + d % G);
	const __m512i perm = _mm512_loadu_si512(pidx);
	__m512 L[4], H[4];
	for (int r = 0; r < G; r++) {
		L[r] = lo[r];
		H[r] = hi[r];
	}
	const int E = 32 / G;
	while (i < e) {
		int n = e - i < E ? (int)(e - i) : E, nv = n * G;
		__mmask16 k0 = nv >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nv) - 1);
		__mmask16 k1 = nv >= 32 ? (__mmask16)0xffff : nv > 16 ? (__mmask16)((1u << (nv - 16)) - 1) : 0;
		__m256i v0 = _mm256_loadu_si256((const __m256i *)(val + i * G));
		__m256i v1 = _mm256_loadu_si256((const __m256i *)(val + i * G + 16));
		__m512 w0 = _mm512_maskz_mov_ps(k0, _mm512_cvtph_ps(v0)), w1 = _mm512_maskz_mov_ps(k1, _mm512_cvtph_ps(v1));
		__m512i b = (__m512i)_mm512_cvtne2ps_pbh(w1, w0);
		_mm512_store_si512((void *)wp, _mm512_permutexvar_epi16(perm, b));
		const uint32_t *wpm = wp;
		W_FROM_MEMORY(wpm, 16);
		const uint32_t *ix = idx + i;
		for (int j = 0; j < n; j += 2) {
			__m512i xa = _mm512_loadu_si512(in + (size_t)ix[j] * 32);
			__m512i xb = _mm512_loadu_si512(in + (size_t)ix[j + 1] * 32);
			__m512bh ul = (__m512bh)_mm512_unpacklo_epi16(xa, xb), uh = (__m512bh)_mm512_unpackhi_epi16(xa, xb);
			for (int r = 0; r < G; r++) {
				__m512bh p = (__m512bh)_mm512_set1_epi32((int)wpm[(j / 2) * G + r]);
				L[r] = _mm512_dpbf16_ps(L[r], ul, p);
				H[r] = _mm512_dpbf16_ps(H[r], uh, p);
			}
		}
		i += n;
	}
	for (int r = 0; r < G; r++) {
		lo[r] = L[r];
		hi[r] = H[r];
	}
}

/* Row groups (rc_spm16p) with bf16 input and weights: as rows32b, the
 * quads' and pairs' shared entries through shared32b. */
BF16_TARGET void rc_spm16p_rows32b_avx512(const rc_spm16p *m, const uint16_t *in, float *out, int64_t r0, int64_t r1)
{
	const __m512i perm0 = BF16_PERM0, perm1 = BF16_PERM1;
	int k = m->group;
	for (int64_t g = r0 / k; g < r1 / k; g++) {
		__m512 lo[4], hi[4];
		for (int r = 0; r < 4; r++)
			lo[r] = hi[r] = _mm512_setzero_ps();
		if (k == 4)
			shared32b(4, m->qidx, (const uint16_t *)m->qval, m->qptr[g], m->qptr[g + 1], in, lo, hi);
		for (int h = 0; h < k / 2; h++) {
			int64_t q = g * k / 2 + h;
			shared32b(2, m->sidx, (const uint16_t *)m->sval, m->sptr[q], m->sptr[q + 1], in, lo + 2 * h, hi + 2 * h);
		}
		for (int r = 0; r < k; r++) {
			rest32b(&m->rest, in, g * k + r, &lo[r], &hi[r]);
			_mm512_storeu_ps(out + (g * k + r) * 32, _mm512_permutex2var_ps(lo[r], perm0, hi[r]));
			_mm512_storeu_ps(out + (g * k + r) * 32 + 16, _mm512_permutex2var_ps(lo[r], perm1, hi[r]));
		}
	}
}

/* Peak vdpbf16ps rate, as rc_fma_loop_avx512: returns the flops done (two
 * multiply-adds per fp32 lane per instruction). */
BF16_TARGET double rc_dpbf16_loop_avx512(long iters)
{
	__m512 a[8];
	__m512bh m = (__m512bh)_mm512_set1_epi32(0x3f803f80), d = (__m512bh)_mm512_set1_epi32(0x33d633d6);
	for (int k = 0; k < 8; k++)
		a[k] = _mm512_set1_ps((float)k);
	for (long i = 0; i < iters; i++) {
		for (int k = 0; k < 8; k++)
			a[k] = _mm512_dpbf16_ps(a[k], m, d);
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
	return (double)iters * 8 * 16 * 4;
}
