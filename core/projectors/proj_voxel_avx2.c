/* The voxel back projector's tile loops compiled for AVX2 + FMA
 * (proj_voxel_tile.h); called only when the CPU has them.
 *
 * The column loops are replaced by ones without gathers (vgatherdps ran
 * slower than GCC's scalar loads standing in for them, docs/cpu-engine.md).
 * A cone view's voxel column reads one pair of detector columns c0, c1 at
 * v = v0 + z dv; each voxel's samples are blended as T = c0 + fu (c1 - c0)
 * and interpolated between T[iv] and T[iv + 1]:
 * - voxels up to ~1.9 rows apart (8 of them within a window of 16 rows):
 *   the window of both columns is loaded with plain vector loads and
 *   blended, and T[iv], T[iv + 1] are picked with vpermps per 8-row half
 *   and one blend on index bit 3;
 * - voxels further apart: each voxel's samples are loaded as pairs
 *   (proj_voxel_pairs.h).  The window's permutes and blends grow with its
 *   rows (32 rows: four permutes and three blends per pick; 64 rows: eight
 *   and seven), the pairs' cost does not: 1.27-1.52x the portable loop at
 *   256^3 (5.2 rows apart) and 1.03-1.18x the 32-row window at 512^3
 *   (2.6 rows), but 0.63x the 16-row window at 1.3 rows apart.
 * Columns with dv < 0 take the portable loop.  Views close to a cone (a
 * C-arm's matrices) take the pairs along every column (1.4-1.8x the
 * portable loop): each voxel addresses its own detector columns, so u may
 * cross pixel borders anywhere. */
#include <immintrin.h>

#include "projectors/proj_voxel_tile.h"
#include "projectors/proj_voxel_pairs.h"

/* The 8 samples T[rel] of a window of 16 rows t[0], t[1], rel in [0, 16):
 * vpermps picks within each 8-row half (index bits 0-2), a blend on bit 3
 * (moved to the sign bit, which blendv tests) chooses the half. */
static inline __m256 pick16(const __m256 *t, __m256i rel)
{
	__m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(rel, 28));
	return _mm256_blendv_ps(_mm256_permutevar8x32_ps(t[0], rel), _mm256_permutevar8x32_ps(t[1], rel), sel);
}

/* A chunk of 8 voxels: the fraction of v = v0 + zw dv, the window's first
 * row ivmin (lane 0: v grows with z) and each lane's row in the window,
 * rel (and rel + 1).  No clamping: the caller keeps v in [0, vmax]. */
struct chunk8 {
	__m256 fv;
	__m256i rel, rel1;
	int ivmin;
};

static inline struct chunk8 chunk8_idx(const float *zw, __m256 dvv, __m256 v0v)
{
	struct chunk8 c;
	__m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(zw), dvv, v0v);
	__m256i iv = _mm256_cvttps_epi32(v);
	c.fv = _mm256_sub_ps(v, _mm256_cvtepi32_ps(iv));
	c.ivmin = _mm_cvtsi128_si32(_mm256_castsi256_si128(iv));
	c.rel = _mm256_sub_epi32(iv, _mm256_set1_epi32(c.ivmin));
	c.rel1 = _mm256_add_epi32(c.rel, _mm256_set1_epi32(1));
	return c;
}

/* One chunk's value top + fv (bot - top) from its 16-row window; hat: the
 * splat footprint's h0 top + h1 bot (proj_voxel_avx512.c's chunk_val) */
static inline __attribute__((always_inline)) __m256 chunk8_val(int hat, const struct chunk8 *c,
							       const float *restrict c0, const float *restrict c1,
							       __m256 fuv, __m256 svv)
{
	__m256 t[2];
	for (int j = 0; j < 2; j++) {
		__m256 a = _mm256_loadu_ps(c0 + c->ivmin + 8 * j), b = _mm256_loadu_ps(c1 + c->ivmin + 8 * j);
		t[j] = _mm256_fmadd_ps(fuv, _mm256_sub_ps(b, a), a);
	}
	__m256 top = pick16(t, c->rel), bot = pick16(t, c->rel1);
	if (hat) {
		/* h1 = max(0, fv sv + (1 - sv)) */
		const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
		__m256 h0 = _mm256_max_ps(_mm256_fnmadd_ps(c->fv, svv, one), zero);
		__m256 h1 = _mm256_max_ps(_mm256_fmadd_ps(c->fv, svv, _mm256_sub_ps(one, svv)), zero);
		return _mm256_fmadd_ps(h0, top, _mm256_mul_ps(h1, bot));
	}
	return _mm256_fmadd_ps(c->fv, _mm256_sub_ps(bot, top), top);
}

/* The column loop of 16-row windows, the next chunk's indices computed
 * before this chunk's picks (software pipelining, as in the AVX-512
 * loop). */
static inline __attribute__((always_inline)) void cone_col_win8(int hat, int n, float *restrict acc,
								const float *restrict c0, const float *restrict c1,
								const float *restrict zw, float v0, float dv,
								float fu, float wt, float sv)
{
	const __m256 v0v = _mm256_set1_ps(v0), dvv = _mm256_set1_ps(dv);
	const __m256 fuv = _mm256_set1_ps(fu), wtv = _mm256_set1_ps(wt), svv = _mm256_set1_ps(sv);
	if (n <= 0)
		return;
	struct chunk8 next = chunk8_idx(zw, dvv, v0v);
	for (int z = 0; z < n; z += 8) {
		struct chunk8 c = next;
		if (z + 8 < n)
			next = chunk8_idx(zw + z + 8, dvv, v0v);
		chunk8_add(acc + z, n - z, wtv, chunk8_val(hat, &c, c0, c1, fuv, svv));
	}
}

static inline void cone_col_c_avx2(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
				   const float *restrict zw, float v0, float dv, float fu, float wt, float vmax, float sv);

/* zw holds at least n rounded up to 8 increasing positions. */
static inline void cone_col_avx2(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
				 const float *restrict zw, float v0, float dv, float fu, float wt, float vmax, float sv)
{
	/* rows spanned by 8 voxels, +1 for floor, +1 for the second sample,
	 * +1 for rounding of v */
	float span = dv * (zw[7] - zw[0]) + 3.0f;
	/* the splat footprint (sv != 1) on the 16-row window, else the
	 * portable loop */
	if (!(dv >= 0) || (sv != 1.0f && !(span <= 16.0f))) {
		cone_col_c_avx2(n, acc, c0, c1, zw, v0, dv, fu, wt, vmax, sv);
		return;
	}
	n = rc_bpv_drop_off_detector(n, &zw, &acc, v0, dv, vmax);
	if (sv != 1.0f)
		cone_col_win8(1, n, acc, c0, c1, zw, v0, dv, fu, wt, sv);
	else if (span <= 16.0f)
		cone_col_win8(0, n, acc, c0, c1, zw, v0, dv, fu, wt, 1.0f);
	else
		cone_col_pairs8(n, acc, c0, c1, zw, v0, dv, fu, wt, vmax);
}

#define RC_BPV_GEN_COLUMN gen_col_pairs8
#define RC_BPV_CONE_COLUMN cone_col_avx2
#define RC_BPV_TILE rc_bpv_tile_avx2
#define RC_BPV_SUFFIX avx2
#include "projectors/proj_voxel_tile.h"
