/* The voxel back projector's tile loops compiled for AVX-512 (F, VL, DQ, BW)
 * (proj_voxel_tile.h); called only when the CPU has them.
 *
 * The cone path's column loop is replaced by one without gathers (a gather
 * costs ~30 cycles on the Xeons measured, docs/cpu-engine.md).  A voxel
 * column reads one pair of detector columns c0, c1 at v = v0 + z dv, so 16
 * consecutive z fall in a window of at most 15 |dv| + 3 consecutive rows.
 * The window is loaded with plain vector loads and each voxel's four
 * samples (rows iv, iv+1 of both columns) are picked out of registers with
 * two-source permutes (vpermt2ps, 32 entries) and, for windows of 64 or 128
 * rows, a blend on the index bits above 5.  Columns whose window is wider than 128
 * rows (voxels much larger than pixels), or with dv < 0, take the portable
 * loop.  The arithmetic is the portable loop's (plus one FMA for v). */
#pragma GCC target("tune=skylake-avx512,prefer-vector-width=512")
#include <immintrin.h>

#include "proj_voxel_tile.h"

/* The 16 samples T[rel] of a window of W = 32 << log2(W / 32) rows held in
 * t[0..W/16), rel in [0, W). */
static inline __m512 pick32(const __m512 *t, __m512i rel) { return _mm512_permutex2var_ps(t[0], rel, t[1]); }

static inline __m512 pick64(const __m512 *t, __m512i rel)
{
	__mmask16 hi = _mm512_test_epi32_mask(rel, _mm512_set1_epi32(32));
	return _mm512_mask_blend_ps(hi, pick32(t, rel), pick32(t + 2, rel));
}

static inline __m512 pick128(const __m512 *t, __m512i rel)
{
	__mmask16 hi = _mm512_test_epi32_mask(rel, _mm512_set1_epi32(64));
	return _mm512_mask_blend_ps(hi, pick64(t, rel), pick64(t + 4, rel));
}

/* One chunk of 16 voxels, z .. z+15: v, its row iv and fraction fv, the
 * window's first row ivmin (lane 0: v grows with z) and each lane's row in
 * the window, rel. */
#define RC_BPV_CHUNK_HEAD                                                                                \
	__m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(zw + z), dvv, v0v);                                    \
	v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), vmaxv);                                   \
	__m512i iv = _mm512_cvttps_epi32(v);                                                               \
	__m512 fv = _mm512_sub_ps(v, _mm512_cvtepi32_ps(iv));                                              \
	int ivmin = _mm_cvtsi128_si32(_mm512_castsi512_si128(iv));                                         \
	__m512i rel = _mm512_sub_epi32(iv, _mm512_set1_epi32(ivmin));                                      \
	__m512i rel1 = _mm512_add_epi32(rel, one)

/* acc[z .. z+15] += wt * (top + fv (bot - top)), masked at the column's end */
#define RC_BPV_CHUNK_TAIL                                                                                \
	__m512 val = _mm512_fmadd_ps(fv, _mm512_sub_ps(bot, top), top);                                    \
	__mmask16 m = n - z >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - z)) - 1);                  \
	_mm512_mask_storeu_ps(acc + z, m, _mm512_fmadd_ps(wtv, val, _mm512_maskz_loadu_ps(m, acc + z)))

/* Window of 32 rows: blend the two columns once, T = c0 + fu (c1 - c0),
 * then two picks (fewest permutes).  Measured fastest for this window. */
#define RC_BPV_CHUNK_BLEND_FIRST                                                                         \
	do {                                                                                               \
		RC_BPV_CHUNK_HEAD;                                                                         \
		__m512 t[2];                                                                               \
		for (int j = 0; j < 2; j++) {                                                              \
			__m512 a = _mm512_loadu_ps(c0 + ivmin + 16 * j), b = _mm512_loadu_ps(c1 + ivmin + 16 * j); \
			t[j] = _mm512_fmadd_ps(fuv, _mm512_sub_ps(b, a), a);                               \
		}                                                                                          \
		__m512 top = pick32(t, rel), bot = pick32(t, rel1);                                        \
		RC_BPV_CHUNK_TAIL;                                                                         \
	} while (0)

/* Windows of 64 and 128 rows: pick the four samples from the raw columns,
 * then blend (fewer vector arithmetic operations than blending the whole
 * window first; measured faster for these windows). */
#define RC_BPV_CHUNK_PICK_FIRST(NV, PICK)                                                                \
	do {                                                                                               \
		RC_BPV_CHUNK_HEAD;                                                                         \
		__m512 w0[NV], w1[NV];                                                                     \
		for (int j = 0; j < NV; j++) {                                                             \
			w0[j] = _mm512_loadu_ps(c0 + ivmin + 16 * j);                                      \
			w1[j] = _mm512_loadu_ps(c1 + ivmin + 16 * j);                                      \
		}                                                                                          \
		__m512 a = PICK(w0, rel), b = PICK(w1, rel), c = PICK(w0, rel1), d = PICK(w1, rel1);       \
		__m512 top = _mm512_fmadd_ps(fuv, _mm512_sub_ps(b, a), a);                                 \
		__m512 bot = _mm512_fmadd_ps(fuv, _mm512_sub_ps(d, c), c);                                 \
		RC_BPV_CHUNK_TAIL;                                                                         \
	} while (0)

static inline void cone_col_c_avx512(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
				     const float *restrict zw, float v0, float dv, float fu, float wt, float vmax);

/* zw holds at least n rounded up to 16 increasing positions. */
static inline void cone_col_avx512(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
				   const float *restrict zw, float v0, float dv, float fu, float wt, float vmax)
{
	/* rows spanned by 16 voxels, +1 for floor, +1 for the second sample,
	 * +1 for rounding of v */
	float span = dv * (zw[15] - zw[0]) + 3.0f;
	const __m512 v0v = _mm512_set1_ps(v0), dvv = _mm512_set1_ps(dv), vmaxv = _mm512_set1_ps(vmax);
	const __m512 fuv = _mm512_set1_ps(fu), wtv = _mm512_set1_ps(wt);
	const __m512i one = _mm512_set1_epi32(1);
	if (!(dv >= 0) || !(span <= 128.0f)) {
		cone_col_c_avx512(n, acc, c0, c1, zw, v0, dv, fu, wt, vmax);
		return;
	}
	if (span <= 32.0f)
		for (int z = 0; z < n; z += 16)
			RC_BPV_CHUNK_BLEND_FIRST;
	else if (span <= 64.0f)
		for (int z = 0; z < n; z += 16)
			RC_BPV_CHUNK_PICK_FIRST(4, pick64);
	else
		for (int z = 0; z < n; z += 16)
			RC_BPV_CHUNK_PICK_FIRST(8, pick128);
}

#define RC_BPV_CONE_COLUMN cone_col_avx512
#define RC_BPV_TILE rc_bpv_tile_avx512
#define RC_BPV_SUFFIX avx512
#include "proj_voxel_tile.h"
