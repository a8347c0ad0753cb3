/*
 * proj_splat_col: the column loop of the splatting forward projector
 * (proj_splat.c), included once per ISA file with RC_SPLAT_SUFFIX naming
 * it, so the same C is compiled for baseline x86-64, AVX2 and AVX-512.
 *
 * A cone view's voxel column lands on one pair of padded detector columns
 * c0, c1 (weights w0, w1: proj_cpu.h's footprint) at padded rows
 * v_z = V0 + z S, with the footprint's weight rc_splat_hat(|v_z - j|, sv)
 * on row j.  Scattering each
 * voxel to its rows floor(v_z) and floor(v_z) + 1 chains every voxel on the
 * last one's store (about 9 cycles a voxel); here each detector row gathers
 * instead: row j gets sum_z a_z hat(|v_z - j|), from the at most
 * T = floor(2 / |S|) + 1 voxels z whose v_z is within a pixel of j, which
 * vectorises over the rows.  Only the real rows 1..nv are written: a voxel
 * whose v_z is off the back projector's range [0, nv + 1] has no weight on
 * them, so the back projector's clamps need no test here.
 */
#ifndef RC_PROJ_SPLAT_COL_H
#define RC_PROJ_SPLAT_COL_H

#include <math.h>
#include <stddef.h>

#include "projectors/proj_cpu.h"

/* Most voxels a detector row gathers from: |S| >= 2 / (RC_SPLAT_T - 1) */
#define RC_SPLAT_T 8

void rc_splat_col_baseline(const float *restrict a, int nz, double V0, double S, float sv, float w0, float w1,
			   float *restrict c0, float *restrict c1, int nv);
void rc_splat_col_avx2(const float *restrict a, int nz, double V0, double S, float sv, float w0, float w1,
		       float *restrict c0, float *restrict c1, int nv);
void rc_splat_col_avx512(const float *restrict a, int nz, double V0, double S, float sv, float w0, float w1,
			 float *restrict c0, float *restrict c1, int nv);

#endif

#ifdef RC_SPLAT_SUFFIX
#define RC_SPLAT_CAT2(a, b) a##_##b
#define RC_SPLAT_CAT(a, b) RC_SPLAT_CAT2(a, b)

/* Rows j0..j1 with T candidate voxels each (T a constant after inlining). */
static inline __attribute__((always_inline)) void RC_SPLAT_CAT(rows, RC_SPLAT_SUFFIX)(
	const float *restrict a, int nz, float V0, float S, float iS, float reach, float sv, float w0, float w1,
	float *restrict c0, float *restrict c1, int j0, int j1, const int T)
{
	for (int j = j0; j <= j1; j++) {
		float fj = (float)j;
		/* first z with v_z past j - 1 (S > 0) or j + 1 (S < 0): floor by
		 * truncation after an offset that keeps the argument positive
		 * (it is above -(reach + 1) for the rows in range) */
		float zlo = (fj - V0) * iS - reach + 64.0f;
		int zs = (int)zlo - 63;
		/* the distance from the row to voxel zs, one step S further per
		 * tap (rows_window below forms it the same way, so that the ISA
		 * paths agree to the rounding of their sums) */
		float d = V0 + (float)zs * S - fj, acc = 0.0f;
#pragma GCC unroll 8
		for (int t = 0; t < T; t++) {
			int z = zs + t;
			/* written as single selects, which GCC if-converts */
			int zc = z < 0 ? 0 : z;
			zc = zc < nz - 1 ? zc : nz - 1;
			float w = rc_splat_hat(fabsf(d), sv);
			w = z == zc ? w : 0.0f;
			acc += w * a[zc];
			d += S;
		}
		c0[j] += w0 * acc;
		c1[j] += w1 * acc;
	}
}

/* The window loops' scalar part for rows jb .. jb + lanes - 1: the first
 * tap's voxel of their ends (z_s is monotonic in the row), computed as the
 * lanes compute theirs; returns the window's first voxel (a window of
 * 2 lanes voxels inside the column) and sets *inside when every tap lies
 * in 0..nz-1, so that no voxel needs a mask. */
static inline int window_base(int jb, int lanes, float V0, float iS, float reach, int T, int nz, int *inside)
{
	const int za = (int)(((float)jb - V0) * iS - reach + 64.0f) - 63;
	const int zb = (int)(((float)jb + (float)(lanes - 1) - V0) * iS - reach + 64.0f) - 63;
	const int zmin = za < zb ? za : zb, zmax = za < zb ? zb : za;
	*inside = zmin >= 0 && zmax + T - 1 < nz;
	return zmin < 0 ? 0 : zmin > nz - 2 * lanes ? nz - 2 * lanes : zmin;
}

#ifdef __AVX512F__
#include <immintrin.h>

/* The rows loop for AVX-512 without gathers (GCC builds a gather of 16
 * floats from 16 scalar loads: about 6 cycles a row at 3 taps): 16 rows
 * read their voxels z_s(j) .. z_s(j) + T - 1 from a window of 32 voxels
 * held in two registers (one two-source permute per tap).  Voxels outside
 * 0..nz-1 get weight 0, as in the loop above.  Needs nz >= 32 and 16 rows'
 * taps within 32 voxels: rc_splat_col checks RC_SPLAT_WINDOW_FITS. */
#define RC_SPLAT_WINDOW_FITS(iS, T, nz) ((nz) >= 32 && 15.0f * fabsf(iS) + 2.0f + (float)(T) <= 32.0f)
/* (it never holds past 4 taps: T >= 5 means |1/S| >= 2, 15 |1/S| >= 30) */
static inline __attribute__((always_inline)) void rows_window(const float *restrict a, int nz, float V0, float S,
							      float iS, float reach, float sv, float w0, float w1,
							      float *restrict c0, float *restrict c1, int j0,
							      int j1, const int T)
{
	const __m512 lane = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512 vV0 = _mm512_set1_ps(V0), vS = _mm512_set1_ps(S), viS = _mm512_set1_ps(iS);
	const __m512 vsv = _mm512_set1_ps(sv), one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
	const __m512 vreach = _mm512_set1_ps(reach), c64 = _mm512_set1_ps(64.0f);
	const __m512i nzv = _mm512_set1_epi32(nz), ione = _mm512_set1_epi32(1);
	const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
	for (int jb = j0; jb <= j1; jb += 16) {
		const int n = j1 - jb + 1 < 16 ? j1 - jb + 1 : 16;
		const __mmask16 rows = (__mmask16)((1u << n) - 1u);
		const __m512 fj = _mm512_add_ps(_mm512_set1_ps((float)jb), lane);
		/* as the loop above: floor by truncation after an offset */
		__m512 zlo = _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(_mm512_sub_ps(fj, vV0), viS), vreach), c64);
		__m512i z = _mm512_sub_epi32(_mm512_cvttps_epi32(zlo), _mm512_set1_epi32(63));
		int inside;
		const int base = window_base(jb, 16, V0, iS, reach, T, nz, &inside);
		const __m512 lo = _mm512_loadu_ps(a + base), hi = _mm512_loadu_ps(a + base + 16);
		/* the permute reads the index's low 5 bits: a masked-off tap's
		 * index may be anything */
		__m512i idx = _mm512_sub_epi32(z, _mm512_set1_epi32(base));
		/* the distance from the row, one step S further per tap, as the
		 * loop above forms it */
		__m512 d = _mm512_sub_ps(_mm512_add_ps(vV0, _mm512_mul_ps(_mm512_cvtepi32_ps(z), vS)), fj);
		__m512 acc = zero;
		for (int t = 0; t < T; t++) {
			__m512 val = _mm512_permutex2var_ps(lo, idx, hi);
			__m512 r = _mm512_sub_ps(one, _mm512_mul_ps(_mm512_and_ps(d, absmask), vsv));
			__m512 w = _mm512_mul_ps(_mm512_max_ps(r, zero), vsv);
			if (!inside)
				w = _mm512_maskz_mov_ps(_mm512_cmpge_epi32_mask(z, _mm512_setzero_si512()) &
							       _mm512_cmplt_epi32_mask(z, nzv),
						       w);
			acc = _mm512_add_ps(acc, _mm512_mul_ps(w, val));
			d = _mm512_add_ps(d, vS);
			idx = _mm512_add_epi32(idx, ione);
			z = _mm512_add_epi32(z, ione);
		}
		__m512 o0 = _mm512_maskz_loadu_ps(rows, c0 + jb), o1 = _mm512_maskz_loadu_ps(rows, c1 + jb);
		_mm512_mask_storeu_ps(c0 + jb, rows, _mm512_add_ps(o0, _mm512_mul_ps(_mm512_set1_ps(w0), acc)));
		_mm512_mask_storeu_ps(c1 + jb, rows, _mm512_add_ps(o1, _mm512_mul_ps(_mm512_set1_ps(w1), acc)));
	}
}
#elif defined(__AVX2__)
#include <immintrin.h>

/* rows_window above on 8 lanes: 8 rows read their taps from a window of
 * 16 voxels in two registers.  AVX2 has no two-source permute: each tap
 * permutes both halves and blends them on idx > 7 (4 instructions for
 * the 8 scalar loads and inserts GCC builds).  Needs nz >= 16 and 8 rows'
 * taps within 16 voxels (paper 000's steps of 0.75 row: 7 |1/S| + 2 + 3 =
 * 14.3). */
#define RC_SPLAT_WINDOW_FITS(iS, T, nz) ((nz) >= 16 && 7.0f * fabsf(iS) + 2.0f + (float)(T) <= 16.0f)
static inline __attribute__((always_inline)) void rows_window(const float *restrict a, int nz, float V0, float S,
							      float iS, float reach, float sv, float w0, float w1,
							      float *restrict c0, float *restrict c1, int j0,
							      int j1, const int T)
{
	const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256i ilane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256 vV0 = _mm256_set1_ps(V0), vS = _mm256_set1_ps(S), viS = _mm256_set1_ps(iS);
	const __m256 vsv = _mm256_set1_ps(sv), one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
	const __m256 vreach = _mm256_set1_ps(reach), c64 = _mm256_set1_ps(64.0f);
	const __m256i nzv = _mm256_set1_epi32(nz), ione = _mm256_set1_epi32(1), seven = _mm256_set1_epi32(7);
	const __m256i mone = _mm256_set1_epi32(-1);
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	for (int jb = j0; jb <= j1; jb += 8) {
		const int n = j1 - jb + 1 < 8 ? j1 - jb + 1 : 8;
		const __m256i rows = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), ilane);
		const __m256 fj = _mm256_add_ps(_mm256_set1_ps((float)jb), lane);
		__m256 zlo = _mm256_add_ps(_mm256_sub_ps(_mm256_mul_ps(_mm256_sub_ps(fj, vV0), viS), vreach), c64);
		__m256i z = _mm256_sub_epi32(_mm256_cvttps_epi32(zlo), _mm256_set1_epi32(63));
		int inside;
		const int base = window_base(jb, 8, V0, iS, reach, T, nz, &inside);
		const __m256 lo = _mm256_loadu_ps(a + base), hi = _mm256_loadu_ps(a + base + 8);
		/* a masked-off tap's index may be anything: the permutes read
		 * its low 3 bits */
		__m256i idx = _mm256_sub_epi32(z, _mm256_set1_epi32(base));
		__m256 d = _mm256_sub_ps(_mm256_add_ps(vV0, _mm256_mul_ps(_mm256_cvtepi32_ps(z), vS)), fj);
		__m256 acc = zero;
		for (int t = 0; t < T; t++) {
			__m256 from_hi = _mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, seven));
			__m256 val = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
						      from_hi);
			__m256 r = _mm256_sub_ps(one, _mm256_mul_ps(_mm256_and_ps(d, absmask), vsv));
			__m256 w = _mm256_mul_ps(_mm256_max_ps(r, zero), vsv);
			if (!inside)
				w = _mm256_and_ps(w, _mm256_castsi256_ps(_mm256_and_si256(
							     _mm256_cmpgt_epi32(z, mone), _mm256_cmpgt_epi32(nzv, z))));
			acc = _mm256_add_ps(acc, _mm256_mul_ps(w, val));
			d = _mm256_add_ps(d, vS);
			idx = _mm256_add_epi32(idx, ione);
			z = _mm256_add_epi32(z, ione);
		}
		__m256 o0 = _mm256_maskload_ps(c0 + jb, rows), o1 = _mm256_maskload_ps(c1 + jb, rows);
		_mm256_maskstore_ps(c0 + jb, rows, _mm256_add_ps(o0, _mm256_mul_ps(_mm256_set1_ps(w0), acc)));
		_mm256_maskstore_ps(c1 + jb, rows, _mm256_add_ps(o1, _mm256_mul_ps(_mm256_set1_ps(w1), acc)));
	}
}
#endif

void RC_SPLAT_CAT(rc_splat_col, RC_SPLAT_SUFFIX)(const float *restrict a, int nz, double V0, double S, float sv,
						  float w0, float w1, float *restrict c0, float *restrict c1, int nv)
{
	double vlo = S > 0 ? V0 : V0 + (nz - 1) * S, vhi = S > 0 ? V0 + (nz - 1) * S : V0;
	int j0 = vlo < 1 ? 1 : (int)vlo;
	int j1 = vhi + 1 > nv ? nv : (int)(vhi + 1);
	if (j0 > j1)
		return;
	/* one division: T = floor(2 / |S|) + 1 voxels at most lie within a
	 * pixel of a row (2 |1/S| rounds to 2 / |S| or just below it, where
	 * the last of them has weight 0) */
	const double id = 1.0 / S;
	const float iS = (float)id, reach = (float)fabs(id);
	const int T = (int)(2.0 * fabs(id)) + 1;
#if defined(__AVX512F__) || defined(__AVX2__)
	if (T <= 4 && RC_SPLAT_WINDOW_FITS(iS, T <= 3 ? 3 : 4, nz)) {
		if (T <= 3)
			rows_window(a, nz, (float)V0, (float)S, iS, reach, sv, w0, w1, c0, c1, j0, j1, 3);
		else
			rows_window(a, nz, (float)V0, (float)S, iS, reach, sv, w0, w1, c0, c1, j0, j1, 4);
		return;
	}
#endif
	if (T <= 3)
		RC_SPLAT_CAT(rows, RC_SPLAT_SUFFIX)(a, nz, (float)V0, (float)S, iS, reach, sv, w0, w1, c0, c1, j0, j1, 3);
	else if (T <= 4)
		RC_SPLAT_CAT(rows, RC_SPLAT_SUFFIX)(a, nz, (float)V0, (float)S, iS, reach, sv, w0, w1, c0, c1, j0, j1, 4);
	else
		RC_SPLAT_CAT(rows, RC_SPLAT_SUFFIX)(a, nz, (float)V0, (float)S, iS, reach, sv, w0, w1, c0, c1, j0, j1,
						     RC_SPLAT_T);
}

#endif
