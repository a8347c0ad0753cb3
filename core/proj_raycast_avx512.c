/* The ray caster's group loops compiled for AVX-512 (F, VL, DQ, BW)
 * (proj_raycast_group.h); called only when the CPU has them.
 *
 * The forward loop is written out here (proj_raycast_pairs.h).  Compiled
 * from the portable C, each of a sample's eight corner loads became 16
 * scalar loads and inserts per vector, with each lane's index extracted
 * again for every corner: about 34 instructions per ray and sample, and
 * 1.5-1.9x slower than this loop. */
#pragma GCC target("prefer-vector-width=512")
#include <immintrin.h>
#include <stdint.h>

#define RC_BPM_GROUP rc_bpm_group_avx512
#include "proj_raycast_group.h"
#include "proj_raycast_pairs.h"

/* gx a + fx b per lane, a and b the two floats of each lane's pair: the
 * pairs of lanes 0-7 in z0, of 8-15 in z1 */
static inline __m512 lerp_pairs(__m512 z0, __m512 z1, __m512 gx, __m512 fx)
{
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
	__m512 a = _mm512_permutex2var_ps(z0, even, z1), b = _mm512_permutex2var_ps(z0, odd, z1);
	return _mm512_add_ps(_mm512_mul_ps(gx, a), _mm512_mul_ps(fx, b));
}

/* Lanes 0-7 or 8-15 of x[0 .. 4) (two lanes' pairs each) in one vector */
static inline __m512 pairs8(const __m128 *x)
{
	__m256 lo = _mm256_insertf128_ps(_mm256_castps128_ps256(x[0]), x[1], 1);
	__m256 hi = _mm256_insertf128_ps(_mm256_castps128_ps256(x[2]), x[3], 1);
	return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

void rc_fpr_group_avx512(const float *restrict vol, int nx, int ny, struct rc_fpr_group *restrict G)
{
	_Static_assert(RC_FPR_LANES == 16, "one vector of lanes");
	int m0 = G->ma[0], m1 = G->mb[0];
	for (int l = 1; l < RC_FPR_LANES; l++) {
		m0 = G->ma[l] < m0 ? G->ma[l] : m0;
		m1 = G->mb[l] > m1 ? G->mb[l] : m1;
	}
	const int sy = nx, sz = nx * ny;
	const float *const row[4] = { vol, vol + sy, vol + sz, vol + sz + sy }; /* a cell's (y, z) rows */
	const __m512 bx = _mm512_loadu_ps(G->b[0]), by = _mm512_loadu_ps(G->b[1]), bz = _mm512_loadu_ps(G->b[2]);
	const __m512 dx = _mm512_loadu_ps(G->d[0]), dy = _mm512_loadu_ps(G->d[1]), dz = _mm512_loadu_ps(G->d[2]);
	const __m512i ma = _mm512_loadu_si512(G->ma), mb = _mm512_loadu_si512(G->mb);
	const __m512 two = _mm512_set1_ps(2.0f), one = _mm512_set1_ps(1.0f);
	const __m512i two_i = _mm512_set1_epi32(2), syv = _mm512_set1_epi32(sy), szv = _mm512_set1_epi32(sz);
	__m512 sum = _mm512_loadu_ps(G->sum);
	int32_t o[RC_FPR_LANES] __attribute__((aligned(64)));
	for (int m = m0; m < m1; m++) {
		const __m512 mf = _mm512_set1_ps((float)m);
		const __m512i mv = _mm512_set1_epi32(m);
		__mmask16 act = _mm512_cmple_epi32_mask(ma, mv) & _mm512_cmpgt_epi32_mask(mb, mv);
		__m512 px = _mm512_add_ps(bx, _mm512_mul_ps(mf, dx));
		__m512 py = _mm512_add_ps(by, _mm512_mul_ps(mf, dy));
		__m512 pz = _mm512_add_ps(bz, _mm512_mul_ps(mf, dz));
		__m512i ix = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(px, two)), two_i);
		__m512i iy = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(py, two)), two_i);
		__m512i iz = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(pz, two)), two_i);
		__m512 fx = _mm512_sub_ps(px, _mm512_cvtepi32_ps(ix));
		__m512 fy = _mm512_sub_ps(py, _mm512_cvtepi32_ps(iy));
		__m512 fz = _mm512_sub_ps(pz, _mm512_cvtepi32_ps(iz));
		__m512 gx = _mm512_sub_ps(one, fx), gy = _mm512_sub_ps(one, fy), gz = _mm512_sub_ps(one, fz);
		/* a lane outside its run may stand far outside the volume: it
		 * reads voxel 0 */
		__m512i oi = _mm512_add_epi32(_mm512_add_epi32(_mm512_mullo_epi32(iz, szv), _mm512_mullo_epi32(iy, syv)),
					      ix);
		_mm512_store_si512(o, _mm512_maskz_mov_epi32(act, oi));
		RC_FPR_INDICES_IN_MEMORY(o);
		/* each lane's index read once, for the four rows */
		__m128 x[4][RC_FPR_LANES / 2];
#pragma GCC unroll 8
		for (int q = 0; q < RC_FPR_LANES / 2; q++)
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				x[r][q] = rc_fpr_pairs2(row[r], o[2 * q], o[2 * q + 1]);
		__m512 c[4];
		for (int r = 0; r < 4; r++)
			c[r] = lerp_pairs(pairs8(x[r]), pairs8(x[r] + 4), gx, fx);
		/* (c00, c01, c10, c11) = c[0 .. 3], as in the portable loop */
		__m512 val = _mm512_add_ps(_mm512_mul_ps(gz, _mm512_add_ps(_mm512_mul_ps(gy, c[0]), _mm512_mul_ps(fy, c[1]))),
					   _mm512_mul_ps(fz, _mm512_add_ps(_mm512_mul_ps(gy, c[2]), _mm512_mul_ps(fy, c[3]))));
		sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(act, val));
	}
	_mm512_storeu_ps(G->sum, sum);
}
