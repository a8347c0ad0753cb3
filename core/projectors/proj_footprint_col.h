/*
 * proj_footprint_col: the column loops of the separable-footprint pair
 * (proj_footprint.c), included once per ISA file with RC_FPF_SUFFIX naming
 * them, so the same C is compiled for baseline x86-64, AVX2 and AVX-512
 * (the row loops below vectorise; the rest is the same code on each path).
 *
 * On a cone view (P[2] = P[10] = 0) a voxel column has one depth w and one
 * u footprint (the trapezoid of proj_footprint.c, weights wu on detector
 * columns ja .. ja + nwu - 1, 1/w^2 folded in), and its voxels' axial
 * rectangles tile the detector column: voxel m (in increasing v) covers
 * [B + m S, B + (m + 1) S] in pixel units (S = |dv/dz| vz > 0), row k
 * covers [k - 1/2, k + 1/2], and the weight of the pair (m, k) is their
 * overlap over S.  So the column's contribution is one 1-D
 * distance-driven pass along v (about nz + rows steps) and one outer
 * product with wu, and its transpose the same steps in reverse order:
 *     forward  t_k = sum_m a_m ov(m, k) / S,  img[j][k] += wu_j t_k
 *     back     t_k = sum_j wu_j img[j][k],    a_m += sum_k ov(m, k) / S t_k
 * Both sides take the overlaps from rc_fpf_ov below, so the weights are
 * the same floats, and both meet the same pairs (fwd_rows' first index):
 * the pair is the exact transpose, up to the order of the float sums.
 * The forward reads per row the at most floor(1/S) + 2 voxels a row
 * meets, the back per voxel the at most floor(S) + 2 rows it meets,
 * branch-free, so that both loops vectorise (a voxel-by-voxel
 * walk that advanced the row on a branch ran at about 20 ns a voxel-view,
 * its branches mispredicted).
 */
#ifndef RC_PROJ_FOOTPRINT_COL_H
#define RC_PROJ_FOOTPRINT_COL_H

#include <math.h>
#include <stddef.h>

/* A column's axial set-up: rectangles from B, S each (pixel units); rev:
 * the volume's z runs against v (voxel m is z = nz - 1 - m); rows k0..k1
 * (clipped to the detector) are the ones it touches. */
typedef struct rc_fpf_col {
	double B, S;
	int nz, rev, k0, k1;
} rc_fpf_col;

/* Returns 0 when the column misses the detector's rows 0..nv-1. */
static inline int rc_fpf_col_init(rc_fpf_col *c, double V0, double dv, int nz, int nv)
{
	c->nz = nz;
	c->rev = dv < 0;
	c->S = fabs(dv);
	/* lower edge of the lowest voxel (v_z = V0 + z dv at the centres) */
	c->B = V0 + (c->rev ? (nz - 1) * dv : 0.0) - 0.5 * c->S;
	double top = c->B + nz * c->S;
	if (!(c->S > 0) || top <= -0.5 || c->B >= nv - 0.5)
		return 0;
	/* floor by truncation: both arguments are positive here */
	c->k0 = c->B <= -0.5 ? 0 : (int)(c->B + 0.5);
	c->k1 = top >= nv - 0.5 ? nv - 1 : (int)(top + 0.5);
	return c->k0 <= c->k1;
}

void rc_fpf_fwd_col_baseline(const float *restrict a, const rc_fpf_col *c, const float *restrict wu, int nwu,
			     float *restrict img, int nv, float *restrict t);
void rc_fpf_fwd_col_avx2(const float *restrict a, const rc_fpf_col *c, const float *restrict wu, int nwu,
			 float *restrict img, int nv, float *restrict t);
void rc_fpf_fwd_col_avx512(const float *restrict a, const rc_fpf_col *c, const float *restrict wu, int nwu,
			   float *restrict img, int nv, float *restrict t);
/* The u weights of a sorted trapezoid t (proj_footprint.c's trap_fill):
 * wu[i], i = 0 .. n - 1, the integral over pixel a + i times s, the
 * integral up to edge e being (r^2 i1 + (clamp(e, t1, t2) - t1)) + d (1 -
 * d i3) with r = clamp(e, t0, t1) - t0, d = clamp(e, t2, t3) - t2.  Every
 * ISA computes the same double expressions, so the weights are the same
 * floats on each. */
void rc_fpf_trap_fill_baseline(const double *t, double i1, double i3, double s, int a, int n, float *restrict wu);
void rc_fpf_trap_fill_avx2(const double *t, double i1, double i3, double s, int a, int n, float *restrict wu);
void rc_fpf_trap_fill_avx512(const double *t, double i1, double i3, double s, int a, int n, float *restrict wu);

/* The forward of a column whose voxels all hold x (proj_footprint.c's
 * volume of one value: SART's, SIRT's and MLEM's row sums A(1)): a row's
 * sum over its voxels' overlaps is its overlap with the column's whole
 * span [B, B + nz S] over S (the voxels' rectangles tile it), one
 * expression a row instead of its taps; the outer product with wu is the
 * forward's.  Equal to rc_fpf_fwd_col of that column up to the float
 * rounding of the sums and of the voxel edges (test_footprint_const). */
void rc_fpf_const_col_baseline(float x, const rc_fpf_col *c, const float *restrict wu, int nwu, float *restrict img,
			       int nv, float *restrict t);
void rc_fpf_const_col_avx2(float x, const rc_fpf_col *c, const float *restrict wu, int nwu, float *restrict img,
			   int nv, float *restrict t);
void rc_fpf_const_col_avx512(float x, const rc_fpf_col *c, const float *restrict wu, int nwu, float *restrict img,
			     int nv, float *restrict t);

void rc_fpf_bwd_col_baseline(float *restrict acc, const rc_fpf_col *c, const float *restrict wu, int nwu,
			     const float *restrict img, int nv, float *restrict t);
void rc_fpf_bwd_col_avx2(float *restrict acc, const rc_fpf_col *c, const float *restrict wu, int nwu,
			 const float *restrict img, int nv, float *restrict t);
void rc_fpf_bwd_col_avx512(float *restrict acc, const rc_fpf_col *c, const float *restrict wu, int nwu,
			   const float *restrict img, int nv, float *restrict t);

#endif

#ifdef RC_FPF_SUFFIX
#define RC_FPF_CAT2(a, b) a##_##b
#define RC_FPF_CAT(a, b) RC_FPF_CAT2(a, b)

/* rc_fpf_span: the overlap of [lo, hi] with row k's pixel [k - 1/2,
 * k + 1/2], times scale.  rc_fpf_ov: the overlap of voxel m's rectangle
 * [B + m S, B + (m + 1) S] with row k's pixel, over S: one expression in float that the
 * forward (over rows) and the back (over voxels) both evaluate, so that
 * their weights are the same floats.  Branch-free (selects, which GCC
 * if-converts), for vectorising. */
static inline __attribute__((always_inline)) float rc_fpf_span(float lo, float hi, int k, float scale)
{
	const float kl = (float)k - 0.5f, kh = (float)k + 0.5f;
	const float a = lo > kl ? lo : kl, b = hi < kh ? hi : kh;
	const float d = b - a;
	return (d > 0.0f ? d : 0.0f) * scale;
}

static inline __attribute__((always_inline)) float rc_fpf_ov(float Bf, float Sf, float iSf, int m, int k)
{
	return rc_fpf_span(Bf + (float)m * Sf, Bf + (float)(m + 1) * Sf, k, iSf);
}

/* floor(x) without a library call (baseline x86-64 has no round
 * instruction): truncate, then step down where that rounded up. */
static inline __attribute__((always_inline)) int rc_fpf_floor(float x)
{
	const int i = (int)x;
	return (float)i > x ? i - 1 : i;
}

/* Rows k0..k0+n-1 of the forward's 1-D pass, T taps a row (a constant
 * after inlining, so that the row loop vectorises). */
static inline __attribute__((always_inline)) void RC_FPF_CAT(fwd_rows, RC_FPF_SUFFIX)(
	const float *restrict x, int nz, float Bf, float Sf, float iSf, int k0, int n, float *restrict tt, const int T)
{
	for (int i = 0; i < n; i++) {
		const int k = k0 + i;
		int m0 = rc_fpf_floor(((float)k - 0.5f - Bf) * iSf);
		/* the multiply by 1/S can round the index one voxel too high:
		 * step back where voxel m0's lower edge (rc_fpf_ov's float) is
		 * above the row's, so that the voxel below, which the back
		 * (exact at its low end) meets, is read here too */
		m0 -= Bf + (float)m0 * Sf > (float)k - 0.5f;
		float acc = 0.0f;
#pragma GCC unroll 8
		for (int q = 0; q < T; q++) {
			const int m = m0 + q;
			int mc = m < 0 ? 0 : m;
			mc = mc < nz - 1 ? mc : nz - 1;
			float w = rc_fpf_ov(Bf, Sf, iSf, m, k);
			w = m == mc ? w : 0.0f;
			acc += w * x[mc];
		}
		tt[i] = acc;
	}
}

/* Voxels 0..nz-1 of the back's 1-D pass, R taps a voxel. */
static inline __attribute__((always_inline)) void RC_FPF_CAT(bwd_vox, RC_FPF_SUFFIX)(
	const float *restrict t, int nz, float Bf, float Sf, float iSf, int k0, int k1, float *restrict cm, const int R)
{
	for (int m = 0; m < nz; m++) {
		const int kb = rc_fpf_floor(Bf + (float)m * Sf + 0.5f);
		float s = 0.0f;
#pragma GCC unroll 8
		for (int q = 0; q < R; q++) {
			const int k = kb + q;
			int kc = k < k0 ? k0 : k;
			kc = kc < k1 ? kc : k1;
			float w = rc_fpf_ov(Bf, Sf, iSf, m, k);
			w = k == kc ? w : 0.0f;
			s += w * t[kc];
		}
		cm[m] = s;
	}
}

#ifdef __AVX512F__
#include "projectors/proj_avx512_pick.h"

/* The two passes above on 16 lanes with the hardware gather (GCC builds
 * a gather of 16 floats from 16 scalar loads and inserts, which took most
 * of the pair's time); the same float operations in the same order, so
 * the sums are the scalar loop's. */
static inline __attribute__((always_inline)) __m512 ov16(__m512 Bf, __m512 Sf, __m512 iSf, __m512i m, __m512 kf)
{
	const __m512 half = _mm512_set1_ps(0.5f), zero = _mm512_setzero_ps();
	const __m512 lo = _mm512_add_ps(Bf, _mm512_mul_ps(_mm512_cvtepi32_ps(m), Sf));
	const __m512 hi = _mm512_add_ps(Bf, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(m, _mm512_set1_epi32(1))), Sf));
	const __m512 a = _mm512_max_ps(lo, _mm512_sub_ps(kf, half)), b = _mm512_min_ps(hi, _mm512_add_ps(kf, half));
	return _mm512_mul_ps(_mm512_max_ps(_mm512_sub_ps(b, a), zero), iSf);
}

/* floor(x), rc_fpf_floor's value, by one conversion rounding down (the
 * truncate, compare and step took three more operations on the taps'
 * dependency chain) */
static inline __attribute__((always_inline)) __m512i floor16(__m512 x)
{
	return _mm512_cvt_roundps_epi32(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}

/* A chunk's taps read entries of a short array (the column's voxels, the
 * row sums) whose indices span a few dozen: the hardware gather loads 16
 * floats one by one (about 30 % of the pair's time at ratio 1.25), where
 * the window of W = 32 or 64 entries from the chunk's first index, loaded
 * once (2 or 4 contiguous loads, masked to 0 at and beyond lim only near
 * the array's end), serves every tap by register permutes
 * (rc_avx512_pick).  The values read are the gather's, so the
 * sums are the same floats.  W = 0: the gather, for wider spans. */
static inline __attribute__((always_inline)) void win_load(__m512 *w, const float *p, int wb, int lim, const int W)
{
	if (wb + W <= lim) {
		for (int r = 0; r < W / 16; r++)
			w[r] = _mm512_loadu_ps(p + wb + 16 * r);
		return;
	}
	for (int r = 0; r < W / 16; r++) {
		int cnt = lim - wb - 16 * r;
		cnt = cnt < 0 ? 0 : cnt > 16 ? 16 : cnt;
		w[r] = _mm512_maskz_loadu_ps((__mmask16)((1u << cnt) - 1u), p + wb + (cnt ? 16 * r : 0));
	}
}

/* The window's width for indices from lo (the chunk's least, clamped into
 * the array) to hi (its greatest tap): 32, 64, or 0 (the gather). */
static inline __attribute__((always_inline)) int win_width(int lo, int hi)
{
	return hi - lo < 32 ? 32 : hi - lo < 64 ? 64 : 0;
}

/* T taps of a chunk of 16: acc += ov p[m], m from m up (read where in
 * [mlo, mhi] and the lane is live), W as above; fix holds the lanes'
 * fixed index: the forward's m are voxels against rows fix, the back's
 * rows against voxels fix. */
static inline __attribute__((always_inline)) __m512 taps16(const float *restrict p, int wb, int lim, __m512i m,
							   __m512i mlo, __m512i mhi, __mmask16 live, int T, const int W,
							   __m512 Bf, __m512 Sf, __m512 iSf, __m512i fix, const int fwd)
{
	__m512 w[4], acc = _mm512_setzero_ps();
	const __m512i one = _mm512_set1_epi32(1), wbv = _mm512_set1_epi32(wb);
	const __m512 kf = _mm512_cvtepi32_ps(fix);
	if (W)
		win_load(w, p, wb, lim, W);
	for (int q = 0; q < T; q++) {
		const __mmask16 in = _mm512_mask_cmpge_epi32_mask(live, m, mlo) & _mm512_cmple_epi32_mask(m, mhi);
		const __m512 v = W ? _mm512_maskz_mov_ps(in, rc_avx512_pick(W / 16, w, _mm512_sub_epi32(m, wbv)))
				   : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, m, p, 4);
		/* forward: m a voxel, kf the rows; back: m a row, kf the voxels */
		const __m512 o = fwd ? ov16(Bf, Sf, iSf, m, kf) : ov16(Bf, Sf, iSf, fix, _mm512_cvtepi32_ps(m));
		acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_mov_ps(in, o), v));
		m = _mm512_add_epi32(m, one);
	}
	return acc;
}

/* taps16 at the window's width for indices wb .. hi (win_width): one
 * copy of the loop per width, each with its W a constant. */
static inline __attribute__((always_inline)) __m512 taps16_win(const float *restrict p, int wb, int hi, int lim,
							       __m512i m, __m512i mlo, __m512i mhi, __mmask16 live,
							       int T, __m512 Bf, __m512 Sf, __m512 iSf, __m512i fix,
							       const int fwd)
{
	const int W = win_width(wb, hi);
	if (W == 32)
		return taps16(p, wb, lim, m, mlo, mhi, live, T, 32, Bf, Sf, iSf, fix, fwd);
	if (W == 64)
		return taps16(p, wb, lim, m, mlo, mhi, live, T, 64, Bf, Sf, iSf, fix, fwd);
	return taps16(p, wb, lim, m, mlo, mhi, live, T, 0, Bf, Sf, iSf, fix, fwd);
}

static inline __attribute__((always_inline)) void fwd_rows16(const float *restrict x, int nz, float B, float S,
							     float iS, int k0, int n, float *restrict tt, const int T)
{
	const __m512 Bf = _mm512_set1_ps(B), Sf = _mm512_set1_ps(S), iSf = _mm512_set1_ps(iS);
	const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512i zero = _mm512_setzero_si512(), top = _mm512_set1_epi32(nz - 1);
	for (int i = 0; i < n; i += 16) {
		const __mmask16 rows = (__mmask16)(n - i >= 16 ? 0xffffu : (1u << (n - i)) - 1u);
		const __m512i k = _mm512_add_epi32(_mm512_set1_epi32(k0 + i), lane);
		const __m512 kf = _mm512_cvtepi32_ps(k);
		const __m512 kl = _mm512_sub_ps(kf, _mm512_set1_ps(0.5f));
		__m512i m = floor16(_mm512_mul_ps(_mm512_sub_ps(kl, Bf), iSf));
		/* one voxel back where the index rounded high (fwd_rows') */
		m = _mm512_mask_sub_epi32(m,
					  _mm512_cmp_ps_mask(_mm512_add_ps(Bf, _mm512_mul_ps(_mm512_cvtepi32_ps(m), Sf)), kl,
							     _CMP_GT_OQ),
					  m, _mm512_set1_epi32(1));
		/* m rises with the lane (a floor of a rising value); its first
		 * and last lanes in scalar, the same float operations (so the
		 * same values), which the loads' addresses need without waiting
		 * on the vector */
		int wb = rc_fpf_floor(((float)(k0 + i) - 0.5f - B) * iS);
		wb -= B + (float)wb * S > (float)(k0 + i) - 0.5f;
		/* ml may be one high (a window one wider at most) */
		const int ml = rc_fpf_floor(((float)(k0 + i + 15) - 0.5f - B) * iS);
		wb = wb < 0 ? 0 : wb > nz ? nz : wb;
		const __m512 acc = taps16_win(x, wb, ml + T - 1, nz, m, zero, top, rows, T, Bf, Sf, iSf, k, 1);
		_mm512_mask_storeu_ps(tt + i, rows, acc);
	}
}

static inline __attribute__((always_inline)) void bwd_vox16(const float *restrict t, int nz, float B, float S,
							    float iS, int k0, int k1, float *restrict cm, const int R)
{
	const __m512 Bf = _mm512_set1_ps(B), Sf = _mm512_set1_ps(S), iSf = _mm512_set1_ps(iS);
	const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512i lo = _mm512_set1_epi32(k0), hi = _mm512_set1_epi32(k1);
	for (int m0 = 0; m0 < nz; m0 += 16) {
		const __mmask16 vox = (__mmask16)(nz - m0 >= 16 ? 0xffffu : (1u << (nz - m0)) - 1u);
		const __m512i m = _mm512_add_epi32(_mm512_set1_epi32(m0), lane);
		const __m512 mf = _mm512_cvtepi32_ps(m);
		const __m512 edge = _mm512_add_ps(_mm512_add_ps(Bf, _mm512_mul_ps(mf, Sf)), _mm512_set1_ps(0.5f));
		const __m512i k = floor16(edge);
		/* the first and last lanes in scalar, as in fwd_rows16 */
		int wb = rc_fpf_floor(B + (float)m0 * S + 0.5f);
		const int kl = rc_fpf_floor(B + (float)(m0 + 15) * S + 0.5f);
		wb = wb < k0 ? k0 : wb > k1 + 1 ? k1 + 1 : wb;
		const __m512 s = taps16_win(t, wb, kl + R - 1, k1 + 1, k, lo, hi, vox, R, Bf, Sf, iSf, m, 0);
		_mm512_mask_storeu_ps(cm + m0, vox, s);
	}
}
#define fwd_rows_vec fwd_rows16
#define bwd_vox_vec bwd_vox16

/* The trapezoid's integral up to the 8 edges e (trap_fill's expression,
 * the same operations in the same order). */
static inline __attribute__((always_inline)) __m512d trap_cum8(__m512d e, const double *t, __m512d i1, __m512d i3)
{
	const __m512d t0 = _mm512_set1_pd(t[0]), t1 = _mm512_set1_pd(t[1]), t2 = _mm512_set1_pd(t[2]),
		      t3 = _mm512_set1_pd(t[3]);
	/* clamp(x, lo, hi) = x < lo ? lo : x, then x > hi ? hi : x: max, then min */
	const __m512d r = _mm512_sub_pd(_mm512_min_pd(t1, _mm512_max_pd(t0, e)), t0);
	const __m512d d = _mm512_sub_pd(_mm512_min_pd(t3, _mm512_max_pd(t2, e)), t2);
	const __m512d f = _mm512_sub_pd(_mm512_min_pd(t2, _mm512_max_pd(t1, e)), t1);
	const __m512d rise = _mm512_add_pd(_mm512_mul_pd(_mm512_mul_pd(r, r), i1), f);
	const __m512d fall = _mm512_mul_pd(d, _mm512_sub_pd(_mm512_set1_pd(1.0), _mm512_mul_pd(d, i3)));
	return _mm512_add_pd(rise, fall);
}
#endif

void RC_FPF_CAT(rc_fpf_trap_fill, RC_FPF_SUFFIX)(const double *t, double i1, double i3, double s, int a, int n,
						  float *restrict wu)
{
#ifdef __AVX512F__
	/* 8 pixels a step: the integral at their lower and upper edges, no
	 * loop-carried sum and no branch on n within a step (the scalar
	 * loop's exit, 3-6 pixels at ratios 1-4, mispredicted) */
	const __m512d lane = _mm512_setr_pd(0, 1, 2, 3, 4, 5, 6, 7), one = _mm512_set1_pd(1.0);
	const __m512d vi1 = _mm512_set1_pd(i1), vi3 = _mm512_set1_pd(i3), vs = _mm512_set1_pd(s);
	for (int i = 0; i < n; i += 8) {
		const __mmask8 m = (__mmask8)(n - i >= 8 ? 0xffu : (1u << (n - i)) - 1u);
		/* edge a + i + l - 1/2: the same double as the scalar loop's j + 0.5 */
		const __m512d lo = _mm512_add_pd(_mm512_add_pd(_mm512_set1_pd((double)(a + i)), lane),
						 _mm512_set1_pd(-0.5));
		const __m512d hi = _mm512_add_pd(lo, one);
		const __m512d w = _mm512_mul_pd(_mm512_sub_pd(trap_cum8(hi, t, vi1, vi3), trap_cum8(lo, t, vi1, vi3)), vs);
		_mm256_mask_storeu_ps(wu + i, m, _mm512_cvtpd_ps(w));
	}
#else
	double prev = 0.0;
	for (int j = a - 1; j < a + n; j++) {
		const double e = j + 0.5;
		const double r = (e < t[0] ? t[0] : e > t[1] ? t[1] : e) - t[0];
		const double d = (e < t[2] ? t[2] : e > t[3] ? t[3] : e) - t[2];
		const double f = (e < t[1] ? t[1] : e > t[2] ? t[2] : e) - t[1];
		const double cur = r * r * i1 + f + d * (1.0 - d * i3);
		if (j >= a)
			wu[j - a] = (float)((cur - prev) * s);
		prev = cur;
	}
#endif
}

void RC_FPF_CAT(rc_fpf_fwd_col, RC_FPF_SUFFIX)(const float *restrict a, const rc_fpf_col *c,
						const float *restrict wu, int nwu, float *restrict img, int nv,
						float *restrict t)
{
	const int k0 = c->k0, n = c->k1 - c->k0 + 1, nz = c->nz;
	const float Bf = (float)c->B, Sf = (float)c->S, iSf = (float)(1.0 / c->S);
	/* voxels a row meets: from the one holding its lower edge over
	 * floor(1/S) + 1 more (a row is shorter than floor(1/S) + 1 voxels);
	 * that first index is exact (fwd_rows steps it back where it rounded
	 * high), so no slack tap (it was a third of the taps at S > 1) */
	const int T = (int)(1.0 / c->S) + 2;
	const float *restrict x = a;
	float *restrict xr = t + nv; /* the column in increasing v */
	if (c->rev) {
		for (int m = 0; m < nz; m++)
			xr[m] = a[nz - 1 - m];
		x = xr;
	}
	float *restrict tt = t + k0;
#ifdef fwd_rows_vec
	if (T <= 2)
		fwd_rows_vec(x, nz, Bf, Sf, iSf, k0, n, tt, 2);
	else if (T <= 3)
		fwd_rows_vec(x, nz, Bf, Sf, iSf, k0, n, tt, 3);
	else if (T <= 4)
		fwd_rows_vec(x, nz, Bf, Sf, iSf, k0, n, tt, 4);
	else
		fwd_rows_vec(x, nz, Bf, Sf, iSf, k0, n, tt, T);
	if (1)
		;
	else
#endif
	if (T <= 2)
		RC_FPF_CAT(fwd_rows, RC_FPF_SUFFIX)(x, nz, Bf, Sf, iSf, k0, n, tt, 2);
	else if (T <= 3)
		RC_FPF_CAT(fwd_rows, RC_FPF_SUFFIX)(x, nz, Bf, Sf, iSf, k0, n, tt, 3);
	else if (T <= 4)
		RC_FPF_CAT(fwd_rows, RC_FPF_SUFFIX)(x, nz, Bf, Sf, iSf, k0, n, tt, 4);
	else if (T <= 5)
		RC_FPF_CAT(fwd_rows, RC_FPF_SUFFIX)(x, nz, Bf, Sf, iSf, k0, n, tt, 5);
	else
		RC_FPF_CAT(fwd_rows, RC_FPF_SUFFIX)(x, nz, Bf, Sf, iSf, k0, n, tt, T);
	for (int j = 0; j < nwu; j++) {
		float *restrict col = img + (size_t)j * (size_t)nv + k0;
		const float wj = wu[j];
		for (int i = 0; i < n; i++)
			col[i] += wj * tt[i];
	}
}

void RC_FPF_CAT(rc_fpf_const_col, RC_FPF_SUFFIX)(float x, const rc_fpf_col *c, const float *restrict wu, int nwu,
						  float *restrict img, int nv, float *restrict t)
{
	const int k0 = c->k0, n = c->k1 - c->k0 + 1;
	const float lo = (float)c->B, hi = (float)(c->B + c->nz * c->S), xs = (float)(x / c->S);
	float *restrict tt = t + k0;
	for (int i = 0; i < n; i++)
		tt[i] = rc_fpf_span(lo, hi, k0 + i, xs);
	for (int j = 0; j < nwu; j++) {
		float *restrict col = img + (size_t)j * (size_t)nv + k0;
		const float wj = wu[j];
		for (int i = 0; i < n; i++)
			col[i] += wj * tt[i];
	}
}

void RC_FPF_CAT(rc_fpf_bwd_col, RC_FPF_SUFFIX)(float *restrict acc, const rc_fpf_col *c, const float *restrict wu,
						int nwu, const float *restrict img, int nv, float *restrict t)
{
	const int k0 = c->k0, k1 = c->k1, n = k1 - k0 + 1, nz = c->nz;
	const float Bf = (float)c->B, Sf = (float)c->S, iSf = (float)(1.0 / c->S);
	/* rows a voxel meets: from the one holding its lower edge over
	 * floor(S) + 1 more (no slack tap, as in the forward) */
	const int R = (int)c->S + 2;
	float *restrict tt = t + k0;
#ifdef __AVX512F__
	/* 16 rows at a time, summed over the columns in a register and
	 * stored once, not read and written per column (the same sums in the
	 * same order) */
	for (int i = 0; i < n; i += 16) {
		const __mmask16 rows = (__mmask16)(n - i >= 16 ? 0xffffu : (1u << (n - i)) - 1u);
		__m512 s = _mm512_setzero_ps();
		for (int j = 0; j < nwu; j++)
			s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(wu[j]),
							   _mm512_maskz_loadu_ps(rows, img + (size_t)j * (size_t)nv + k0 + i)));
		_mm512_mask_storeu_ps(tt + i, rows, s);
	}
#else
	for (int i = 0; i < n; i++)
		tt[i] = 0.0f;
	for (int j = 0; j < nwu; j++) {
		const float *restrict col = img + (size_t)j * (size_t)nv + k0;
		const float wj = wu[j];
		for (int i = 0; i < n; i++)
			tt[i] += wj * col[i];
	}
#endif
	float *restrict cm = t + nv; /* the column's sums in increasing v */
#ifdef bwd_vox_vec
	if (R <= 2)
		bwd_vox_vec(t, nz, Bf, Sf, iSf, k0, k1, cm, 2);
	else if (R <= 3)
		bwd_vox_vec(t, nz, Bf, Sf, iSf, k0, k1, cm, 3);
	else if (R <= 4)
		bwd_vox_vec(t, nz, Bf, Sf, iSf, k0, k1, cm, 4);
	else
		bwd_vox_vec(t, nz, Bf, Sf, iSf, k0, k1, cm, R);
	if (1)
		;
	else
#endif
	if (R <= 2)
		RC_FPF_CAT(bwd_vox, RC_FPF_SUFFIX)(t, nz, Bf, Sf, iSf, k0, k1, cm, 2);
	else if (R <= 3)
		RC_FPF_CAT(bwd_vox, RC_FPF_SUFFIX)(t, nz, Bf, Sf, iSf, k0, k1, cm, 3);
	else if (R <= 4)
		RC_FPF_CAT(bwd_vox, RC_FPF_SUFFIX)(t, nz, Bf, Sf, iSf, k0, k1, cm, 4);
	else if (R <= 5)
		RC_FPF_CAT(bwd_vox, RC_FPF_SUFFIX)(t, nz, Bf, Sf, iSf, k0, k1, cm, 5);
	else if (R <= 6)
		RC_FPF_CAT(bwd_vox, RC_FPF_SUFFIX)(t, nz, Bf, Sf, iSf, k0, k1, cm, 6);
	else
		RC_FPF_CAT(bwd_vox, RC_FPF_SUFFIX)(t, nz, Bf, Sf, iSf, k0, k1, cm, R);
	if (c->rev)
		for (int m = 0; m < nz; m++)
			acc[nz - 1 - m] += cm[m];
	else
		for (int m = 0; m < nz; m++)
			acc[m] += cm[m];
}

#endif
