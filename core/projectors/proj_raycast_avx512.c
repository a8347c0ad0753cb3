/* The ray caster's group loops compiled for AVX-512 (F, VL, DQ, BW)
 * (proj_raycast_group.h); called only when the CPU has them.
 *
 * The forward loop is written out here (proj_raycast_pairs.h).  Compiled
 * from the portable C, each of a sample's eight corner loads became 16
 * scalar loads and inserts per vector, with each lane's index extracted
 * again for every corner: about 34 instructions per ray and sample, and
 * about half as fast as this loop (docs/cpu-engine.md). */
#pragma GCC target("prefer-vector-width=512")
#include <immintrin.h>
#include <stdint.h>

#define RC_BPM_GROUP rc_bpm_group_avx512
#include "projectors/proj_raycast_group.h"
#include "projectors/proj_raycast_pairs.h"

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

/* The group's rays: sample m of lane l at b + m d, in its run when
 * ma <= m < mb */
struct lanes {
	__m512 bx, by, bz, dx, dy, dz;
	__m512i ma, mb, sy, sz;
};

/* Sample m's fractions and active lanes; its lanes' voxel indices go to o
 * (0 for lanes outside their run: such a lane may stand far outside the
 * volume, and reads voxel 0). */
struct sample {
	__m512 fx, fy, fz;
	__mmask16 act;
};

static inline struct sample sample_index(const struct lanes *L, int m, int32_t *o)
{
	const __m512 mf = _mm512_set1_ps((float)m), two = _mm512_set1_ps(2.0f);
	const __m512i mv = _mm512_set1_epi32(m), two_i = _mm512_set1_epi32(2);
	struct sample S;
	S.act = _mm512_cmple_epi32_mask(L->ma, mv) & _mm512_cmpgt_epi32_mask(L->mb, mv);
	__m512 px = _mm512_add_ps(L->bx, _mm512_mul_ps(mf, L->dx));
	__m512 py = _mm512_add_ps(L->by, _mm512_mul_ps(mf, L->dy));
	__m512 pz = _mm512_add_ps(L->bz, _mm512_mul_ps(mf, L->dz));
	__m512i ix = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(px, two)), two_i);
	__m512i iy = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(py, two)), two_i);
	__m512i iz = _mm512_sub_epi32(_mm512_cvttps_epi32(_mm512_add_ps(pz, two)), two_i);
	S.fx = _mm512_sub_ps(px, _mm512_cvtepi32_ps(ix));
	S.fy = _mm512_sub_ps(py, _mm512_cvtepi32_ps(iy));
	S.fz = _mm512_sub_ps(pz, _mm512_cvtepi32_ps(iz));
	__m512i oi = _mm512_add_epi32(_mm512_add_epi32(_mm512_mullo_epi32(iz, L->sz), _mm512_mullo_epi32(iy, L->sy)), ix);
	_mm512_store_si512(o, _mm512_maskz_mov_epi32(S.act, oi));
	return S;
}

void rc_fpr_group_avx512(const float *restrict vol, int nx, int ny, struct rc_fpr_group *restrict G)
{
	_Static_assert(RC_FPR_LANES == 16, "one vector of lanes");
	int m0, m1;
	rc_fpr_group_span(G, 0, RC_FPR_LANES, &m0, &m1);
	if (m0 >= m1)
		return;
	const int sy = nx, sz = nx * ny;
	const float *const row[4] = { vol, vol + sy, vol + sz, vol + sz + sy }; /* a cell's (y, z) rows */
	const struct lanes L = { _mm512_loadu_ps(G->b[0]), _mm512_loadu_ps(G->b[1]), _mm512_loadu_ps(G->b[2]),
				 _mm512_loadu_ps(G->d[0]), _mm512_loadu_ps(G->d[1]), _mm512_loadu_ps(G->d[2]),
				 _mm512_loadu_si512(G->ma), _mm512_loadu_si512(G->mb),  _mm512_set1_epi32(sy),
				 _mm512_set1_epi32(sz) };
	const __m512 one = _mm512_set1_ps(1.0f);
	__m512 sum = _mm512_loadu_ps(G->sum);
	/* sample m's indices in o[m & 1], computed one sample ahead: the next
	 * sample's loads need not wait for this one's arithmetic (+10-15 %) */
	int32_t o[2][RC_FPR_LANES] __attribute__((aligned(64)));
	struct sample cur = sample_index(&L, m0, o[m0 & 1]), nxt = cur;
	for (int m = m0; m < m1; m++) {
		if (m + 1 < m1)
			nxt = sample_index(&L, m + 1, o[(m + 1) & 1]);
		const int32_t *oc = o[m & 1];
		RC_FPR_INDICES_IN_MEMORY(oc);
		const __m512 fx = cur.fx, fy = cur.fy, fz = cur.fz;
		const __m512 gx = _mm512_sub_ps(one, fx), gy = _mm512_sub_ps(one, fy), gz = _mm512_sub_ps(one, fz);
		/* each lane's index read once, for the four rows */
		__m128 x[4][RC_FPR_LANES / 2];
#pragma GCC unroll 8
		for (int q = 0; q < RC_FPR_LANES / 2; q++)
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				x[r][q] = rc_fpr_pairs2(row[r], oc[2 * q], oc[2 * q + 1]);
		__m512 c[4];
		for (int r = 0; r < 4; r++)
			c[r] = lerp_pairs(pairs8(x[r]), pairs8(x[r] + 4), gx, fx);
		/* (c00, c01, c10, c11) = c[0 .. 3], as in the portable loop */
		__m512 val = _mm512_add_ps(_mm512_mul_ps(gz, _mm512_add_ps(_mm512_mul_ps(gy, c[0]), _mm512_mul_ps(fy, c[1]))),
					   _mm512_mul_ps(fz, _mm512_add_ps(_mm512_mul_ps(gy, c[2]), _mm512_mul_ps(fy, c[3]))));
		sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(cur.act, val));
		cur = nxt;
	}
	_mm512_storeu_ps(G->sum, sum);
}
