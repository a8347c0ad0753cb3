/* The voxel back projector's tile loops compiled for AVX2 + FMA
 * (proj_voxel_tile.h); called only when the CPU has them.
 *
 * The cone path's column loop is replaced by one without gathers, like the
 * AVX-512 one (proj_voxel_avx512.c): 8 consecutive voxels of a column fall
 * in a window of at most 7 |dv| + 3 rows of the two detector columns c0, c1.
 * The window (16 or 32 rows) is loaded with plain vector loads and
 * blended, T = c0 + fu (c1 - c0); each voxel's T[iv] and T[iv + 1] are
 * picked with vpermps (8 entries) per 8-row part and blends on the index
 * bits above 3.  The portable loop GCC vectorises with scalar loads
 * standing in for gathers (vgatherdps ran slower still, docs/cpu-engine.md)
 * spends four shuffles per voxel on inserting the loaded samples; the window
 * spends one or two.  Measured on the RabbitCT shape (docs/cpu-engine.md):
 * 1.3x the portable loop at 512^3 (32-row windows), but 0.66x at 256^3 with
 * 64-row windows (eight permutes and seven blends per pick), so columns
 * whose window is wider than 32 rows, or with dv < 0, take the portable
 * loop. */
#include <immintrin.h>
#include <math.h>

#include "proj_voxel_tile.h"

/* The 8 samples T[rel] of a window of 8 NV rows held in t[0..NV), rel in
 * [0, 8 NV): vpermps picks within each 8-row part (index bits 0-2), blends
 * on bits 3 and up (moved to the sign bit, which blendv tests) choose the
 * part. */
static inline __attribute__((always_inline)) __m256 pick(int NV, const __m256 *t, __m256i rel)
{
	__m256 p[8];
	for (int j = 0; j < NV; j++)
		p[j] = _mm256_permutevar8x32_ps(t[j], rel);
	for (int bit = 3, step = 1; step < NV; bit++, step *= 2) {
		__m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(rel, 31 - bit));
		for (int j = 0; j + step < NV; j += 2 * step)
			p[j] = _mm256_blendv_ps(p[j], p[j + step], sel);
	}
	return p[0];
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

/* acc[0 .. 8) += wt (top + fv (bot - top)) for the chunk c, the first n
 * lanes only when n < 8 */
static inline __attribute__((always_inline)) void chunk8_add(int NV, const struct chunk8 *c, float *acc, int n,
							     const float *restrict c0, const float *restrict c1,
							     __m256 fuv, __m256 wtv)
{
	__m256 t[8];
	for (int j = 0; j < NV; j++) {
		__m256 a = _mm256_loadu_ps(c0 + c->ivmin + 8 * j), b = _mm256_loadu_ps(c1 + c->ivmin + 8 * j);
		t[j] = _mm256_fmadd_ps(fuv, _mm256_sub_ps(b, a), a);
	}
	__m256 top = pick(NV, t, c->rel), bot = pick(NV, t, c->rel1);
	__m256 val = _mm256_fmadd_ps(c->fv, _mm256_sub_ps(bot, top), top);
	if (n >= 8) {
		_mm256_storeu_ps(acc, _mm256_fmadd_ps(wtv, val, _mm256_loadu_ps(acc)));
		return;
	}
	__m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	_mm256_maskstore_ps(acc, m, _mm256_fmadd_ps(wtv, val, _mm256_maskload_ps(acc, m)));
}

/* The column loop for a window of NV vectors, the next chunk's indices
 * computed before this chunk's picks (software pipelining, as in the
 * AVX-512 loop). */
static inline __attribute__((always_inline)) void cone_col_win8(int NV, int n, float *restrict acc,
								const float *restrict c0,
								const float *restrict c1,
								const float *restrict zw, float v0,
								float dv, float fu, float wt)
{
	const __m256 v0v = _mm256_set1_ps(v0), dvv = _mm256_set1_ps(dv);
	const __m256 fuv = _mm256_set1_ps(fu), wtv = _mm256_set1_ps(wt);
	if (n <= 0)
		return;
	struct chunk8 next = chunk8_idx(zw, dvv, v0v);
	for (int z = 0; z < n; z += 8) {
		struct chunk8 c = next;
		if (z + 8 < n)
			next = chunk8_idx(zw + z + 8, dvv, v0v);
		chunk8_add(NV, &c, acc + z, n - z, c0, c1, fuv, wtv);
	}
}

static inline void cone_col_c_avx2(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
				   const float *restrict zw, float v0, float dv, float fu, float wt, float vmax);

/* zw holds at least n rounded up to 8 increasing positions. */
static inline void cone_col_avx2(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
				 const float *restrict zw, float v0, float dv, float fu, float wt, float vmax)
{
	/* rows spanned by 8 voxels, +1 for floor, +1 for the second sample,
	 * +1 for rounding of v */
	float span = dv * (zw[7] - zw[0]) + 3.0f;
	if (!(dv >= 0) || !(span <= 32.0f)) {
		cone_col_c_avx2(n, acc, c0, c1, zw, v0, dv, fu, wt, vmax);
		return;
	}
	/* Drop the voxels whose v (computed exactly as the vector lanes do)
	 * lies outside [0, vmax]: they add zero (see proj_voxel_avx512.c). */
	while (n > 0 && !(fmaf(zw[0], dv, v0) >= 0.0f)) {
		zw++;
		acc++;
		n--;
	}
	while (n > 0 && !(fmaf(zw[n - 1], dv, v0) <= vmax))
		n--;
	if (span <= 16.0f)
		cone_col_win8(2, n, acc, c0, c1, zw, v0, dv, fu, wt);
	else
		cone_col_win8(4, n, acc, c0, c1, zw, v0, dv, fu, wt);
}

#define RC_BPV_CONE_COLUMN cone_col_avx2
#define RC_BPV_TILE rc_bpv_tile_avx2
#define RC_BPV_SUFFIX avx2
#include "proj_voxel_tile.h"
