/* The ray caster's group loops compiled for AVX2 + FMA
 * (proj_raycast_group.h); called only when the CPU has them.
 *
 * The forward loop is written out here (proj_raycast_pairs.h), 8 lanes
 * per vector: the group's two halves one after the other, each over its
 * own run of samples. */
#include <immintrin.h>
#include <stdint.h>

#define RC_BPM_GROUP rc_bpm_group_avx2
#include "projectors/proj_raycast_group.h"
#include "projectors/proj_raycast_pairs.h"

/* gx a + fx b per lane, a and b the two floats of each lane's pair, x[q]
 * holding the pairs of lanes 2q and 2q + 1.  The shuffle takes elements
 * 0, 2 (or 1, 3) of each 128-bit half of both sources, so the halves are
 * filled with lanes 0, 1 | 4, 5 and 2, 3 | 6, 7 to come out in lane order. */
static inline __m256 lerp_pairs(const __m128 *x, __m256 gx, __m256 fx)
{
	__m256 p = _mm256_insertf128_ps(_mm256_castps128_ps256(x[0]), x[2], 1);
	__m256 q = _mm256_insertf128_ps(_mm256_castps128_ps256(x[1]), x[3], 1);
	__m256 a = _mm256_shuffle_ps(p, q, _MM_SHUFFLE(2, 0, 2, 0)), b = _mm256_shuffle_ps(p, q, _MM_SHUFFLE(3, 1, 3, 1));
	return _mm256_add_ps(_mm256_mul_ps(gx, a), _mm256_mul_ps(fx, b));
}

/* Lanes h .. h + 7 of the group: sample m at b + m d, in its run when
 * ma <= m < mb */
struct lanes {
	__m256 bx, by, bz, dx, dy, dz;
	__m256i ma, mb, sy, sz;
};

/* Sample m's fractions and active lanes (all ones); its lanes' voxel
 * indices go to o (0 for lanes outside their run: such a lane may stand far
 * outside the volume, and reads voxel 0). */
struct sample {
	__m256 fx, fy, fz;
	__m256i act;
};

static inline struct sample sample_index(const struct lanes *L, int m, int32_t *o)
{
	const __m256 mf = _mm256_set1_ps((float)m), two = _mm256_set1_ps(2.0f);
	const __m256i mv = _mm256_set1_epi32(m), two_i = _mm256_set1_epi32(2);
	struct sample S;
	S.act = _mm256_andnot_si256(_mm256_cmpgt_epi32(L->ma, mv), _mm256_cmpgt_epi32(L->mb, mv));
	__m256 px = _mm256_add_ps(L->bx, _mm256_mul_ps(mf, L->dx));
	__m256 py = _mm256_add_ps(L->by, _mm256_mul_ps(mf, L->dy));
	__m256 pz = _mm256_add_ps(L->bz, _mm256_mul_ps(mf, L->dz));
	__m256i ix = _mm256_sub_epi32(_mm256_cvttps_epi32(_mm256_add_ps(px, two)), two_i);
	__m256i iy = _mm256_sub_epi32(_mm256_cvttps_epi32(_mm256_add_ps(py, two)), two_i);
	__m256i iz = _mm256_sub_epi32(_mm256_cvttps_epi32(_mm256_add_ps(pz, two)), two_i);
	S.fx = _mm256_sub_ps(px, _mm256_cvtepi32_ps(ix));
	S.fy = _mm256_sub_ps(py, _mm256_cvtepi32_ps(iy));
	S.fz = _mm256_sub_ps(pz, _mm256_cvtepi32_ps(iz));
	__m256i oi = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(iz, L->sz), _mm256_mullo_epi32(iy, L->sy)), ix);
	_mm256_store_si256((__m256i *)o, _mm256_and_si256(S.act, oi));
	return S;
}

/* Lanes h .. h + 7 of the group, over their own run of samples. */
static void half_group(const float *restrict vol, int nx, int ny, struct rc_fpr_group *restrict G, int h)
{
	int m0, m1;
	rc_fpr_group_span(G, h, 8, &m0, &m1);
	if (m0 >= m1)
		return;
	const int sy = nx, sz = nx * ny;
	const float *const row[4] = { vol, vol + sy, vol + sz, vol + sz + sy }; /* a cell's (y, z) rows */
	const struct lanes L = { _mm256_loadu_ps(G->b[0] + h), _mm256_loadu_ps(G->b[1] + h),
				 _mm256_loadu_ps(G->b[2] + h), _mm256_loadu_ps(G->d[0] + h),
				 _mm256_loadu_ps(G->d[1] + h), _mm256_loadu_ps(G->d[2] + h),
				 _mm256_loadu_si256((const __m256i *)(G->ma + h)),
				 _mm256_loadu_si256((const __m256i *)(G->mb + h)), _mm256_set1_epi32(sy),
				 _mm256_set1_epi32(sz) };
	const __m256 one = _mm256_set1_ps(1.0f);
	__m256 sum = _mm256_loadu_ps(G->sum + h);
	/* sample m's indices in o[m & 1], computed one sample ahead */
	int32_t o[2][8] __attribute__((aligned(32)));
	struct sample cur = sample_index(&L, m0, o[m0 & 1]), nxt = cur;
	for (int m = m0; m < m1; m++) {
		if (m + 1 < m1)
			nxt = sample_index(&L, m + 1, o[(m + 1) & 1]);
		const int32_t *oc = o[m & 1];
		RC_FPR_INDICES_IN_MEMORY(oc);
		const __m256 fx = cur.fx, fy = cur.fy, fz = cur.fz;
		const __m256 gx = _mm256_sub_ps(one, fx), gy = _mm256_sub_ps(one, fy), gz = _mm256_sub_ps(one, fz);
		/* each lane's index read once, for the four rows */
		__m128 x[4][4];
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				x[r][q] = rc_fpr_pairs2(row[r], oc[2 * q], oc[2 * q + 1]);
		__m256 c[4];
		for (int r = 0; r < 4; r++)
			c[r] = lerp_pairs(x[r], gx, fx);
		/* (c00, c01, c10, c11) = c[0 .. 3], as in the portable loop */
		__m256 val = _mm256_add_ps(_mm256_mul_ps(gz, _mm256_add_ps(_mm256_mul_ps(gy, c[0]), _mm256_mul_ps(fy, c[1]))),
					   _mm256_mul_ps(fz, _mm256_add_ps(_mm256_mul_ps(gy, c[2]), _mm256_mul_ps(fy, c[3]))));
		/* sum += act ? val : 0 */
		sum = _mm256_add_ps(sum, _mm256_and_ps(_mm256_castsi256_ps(cur.act), val));
		cur = nxt;
	}
	_mm256_storeu_ps(G->sum + h, sum);
}

void rc_fpr_group_avx2(const float *restrict vol, int nx, int ny, struct rc_fpr_group *restrict G)
{
	_Static_assert(RC_FPR_LANES == 16, "two vectors of lanes");
	half_group(vol, nx, ny, G, 0);
	half_group(vol, nx, ny, G, 8);
}
