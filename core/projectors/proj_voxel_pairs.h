/*
 * proj_voxel_pairs: the voxel back projector's column loops that load each
 * voxel's samples as pairs, included by proj_voxel_avx2.c (AVX2 + FMA).
 * The AVX-512 file keeps its windows: there the same loops measured
 * 0.95-1.07x (cone views, 7- and 8-vector windows) and 0.73x (C-arm views
 * at 512^3).
 *
 * A voxel at detector position (u, v) reads the pixels (iu, iv),
 * (iu, iv + 1), (iu + 1, iv), (iu + 1, iv + 1) of a transposed image
 * (column-major, v fastest): two pairs of neighbouring floats.  Each pair is
 * loaded as one 64-bit broadcast (a load with no shuffle), the pairs of 8
 * voxels are merged into two vectors by blends (any vector port), and two
 * in-lane shuffles per vector of pairs split them into the voxels' samples,
 * in the voxels' order.  Per 8 voxels that is 16 pair loads and 8 index
 * loads (the indices go through memory), and a cost that does not grow with
 * the rows between voxels, as the windows' permutes do
 * (docs/cpu-engine.md).
 */
#ifndef RC_PROJ_VOXEL_PAIRS_H
#define RC_PROJ_VOXEL_PAIRS_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* acc[0 .. 8) += wt val, the first n lanes only when n < 8 */
static inline void chunk8_add(float *acc, int n, __m256 wtv, __m256 val)
{
	if (n >= 8) {
		_mm256_storeu_ps(acc, _mm256_fmadd_ps(wtv, val, _mm256_loadu_ps(acc)));
		return;
	}
	__m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	_mm256_maskstore_ps(acc, m, _mm256_fmadd_ps(wtv, val, _mm256_maskload_ps(acc, m)));
}

/* Two neighbouring samples c[i], c[i + 1] as one 64-bit lane, broadcast
 * (a load with no shuffle) */
static inline __m256d pair_at(const float *c, int32_t i)
{
	double d;
	memcpy(&d, c + i, sizeof d);
	return _mm256_set1_pd(d);
}

/* The pairs of voxels 0, 1, 4, 5 (lo) and 2, 3, 6, 7 (hi) of a chunk of
 * column c, in 64-bit lanes: blends on any vector port, none on the
 * shuffle port. */
static inline void pairs8(const float *c, const int32_t *i, __m256 *lo, __m256 *hi)
{
	*lo = _mm256_castpd_ps(_mm256_blend_pd(_mm256_blend_pd(pair_at(c, i[0]), pair_at(c, i[1]), 2),
					       _mm256_blend_pd(pair_at(c, i[4]), pair_at(c, i[5]), 8), 12));
	*hi = _mm256_castpd_ps(_mm256_blend_pd(_mm256_blend_pd(pair_at(c, i[2]), pair_at(c, i[3]), 2),
					       _mm256_blend_pd(pair_at(c, i[6]), pair_at(c, i[7]), 8), 12));
}

/* The indices iv (through memory: each addresses two loads) and fractions
 * fv of the chunk of 8 voxels at zw.  v is clamped to vmax for the lanes
 * past the column's end in its last chunk, so that they read inside the
 * column; every other voxel's v is on the detector already. */
static inline void pairs8_idx(const float *zw, __m256 dvv, __m256 v0v, __m256 vmaxv, int32_t *iv, __m256 *fv)
{
	__m256 v = _mm256_min_ps(_mm256_fmadd_ps(_mm256_loadu_ps(zw), dvv, v0v), vmaxv);
	__m256i i = _mm256_cvttps_epi32(v);
	_mm256_store_si256((__m256i *)iv, i);
	*fv = _mm256_sub_ps(v, _mm256_cvtepi32_ps(i));
}

/* The column loop for voxels more than ~1.9 rows apart (windows wider than
 * 16 rows): per voxel the pairs c0[iv], c0[iv + 1] and c1[iv], c1[iv + 1]
 * are loaded, blended as the window is, T = c0 + fu (c1 - c0), and split
 * into top and bottom by two in-lane shuffles, whose lanes are in the
 * voxels' order because pairs8 placed them so.  The next chunk's indices
 * are computed before this chunk's loads. */
static inline void cone_col_pairs8(int n, float *restrict acc, const float *restrict c0, const float *restrict c1,
			    const float *restrict zw, float v0, float dv, float fu, float wt, float vmax)
{
	const __m256 v0v = _mm256_set1_ps(v0), dvv = _mm256_set1_ps(dv), vmaxv = _mm256_set1_ps(vmax);
	const __m256 fuv = _mm256_set1_ps(fu), wtv = _mm256_set1_ps(wt);
	_Alignas(32) int32_t iv[2][8];
	__m256 fv[2];
	if (n <= 0)
		return;
	pairs8_idx(zw, dvv, v0v, vmaxv, iv[0], &fv[0]);
	for (int z = 0, b = 0; z < n; z += 8, b ^= 1) {
		if (z + 8 < n)
			pairs8_idx(zw + z + 8, dvv, v0v, vmaxv, iv[b ^ 1], &fv[b ^ 1]);
		__m256 a0, a1, b0, b1;
		pairs8(c0, iv[b], &a0, &a1);
		pairs8(c1, iv[b], &b0, &b1);
		__m256 t0 = _mm256_fmadd_ps(fuv, _mm256_sub_ps(b0, a0), a0);
		__m256 t1 = _mm256_fmadd_ps(fuv, _mm256_sub_ps(b1, a1), a1);
		__m256 top = _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
		__m256 bot = _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
		chunk8_add(acc + z, n - z, wtv, _mm256_fmadd_ps(fv[b], _mm256_sub_ps(bot, top), top));
	}
}

/* The general column loop (a view close to a cone, proj_voxel_tile.h
 * gen_col) with the cone loop's pairs: per voxel w, 1/w (three Newton
 * steps from r0), u and v clamped to the padded detector as gen_col computes
 * them (so every lane, a tail chunk's too, reads inside the image), the
 * pairs img[idx], img[idx + 1] and img[idx + Hs], img[idx + Hs + 1] at
 * idx = iu Hs + iv, split into the four samples by in-lane shuffles.  u
 * may cross pixel borders anywhere along the column: each voxel addresses
 * its own columns. */
static inline void gen_col_pairs8(int n, float *restrict acc, const float *restrict img, const float *restrict zw,
				  float aw, float bw, float au, float bu, float av, float bv, float r0, float umax,
				  float vmax, int Hs)
{
	const __m256 awv = _mm256_set1_ps(aw), bwv = _mm256_set1_ps(bw), auv = _mm256_set1_ps(au);
	const __m256 buv = _mm256_set1_ps(bu), avv = _mm256_set1_ps(av), bvv = _mm256_set1_ps(bv);
	const __m256 r0v = _mm256_set1_ps(r0), two = _mm256_set1_ps(2.0f), one = _mm256_set1_ps(1.0f);
	const __m256 zero = _mm256_setzero_ps(), umaxv = _mm256_set1_ps(umax), vmaxv = _mm256_set1_ps(vmax);
	const __m256i hs = _mm256_set1_epi32(Hs);
	_Alignas(32) int32_t idx[8];
	for (int z = 0; z < n; z += 8) {
		__m256 zv = _mm256_loadu_ps(zw + z);
		__m256 w = _mm256_fmadd_ps(bwv, zv, awv), r = r0v;
		for (int it = 0; it < 3; it++)
			r = _mm256_mul_ps(r, _mm256_fnmadd_ps(w, r, two));
		__m256 u = _mm256_fmadd_ps(_mm256_fmadd_ps(buv, zv, auv), r, one);
		__m256 v = _mm256_fmadd_ps(_mm256_fmadd_ps(bvv, zv, avv), r, one);
		u = _mm256_min_ps(_mm256_max_ps(u, zero), umaxv);
		v = _mm256_min_ps(_mm256_max_ps(v, zero), vmaxv);
		__m256i iu = _mm256_cvttps_epi32(u), iv = _mm256_cvttps_epi32(v);
		__m256 fu = _mm256_sub_ps(u, _mm256_cvtepi32_ps(iu)), fv = _mm256_sub_ps(v, _mm256_cvtepi32_ps(iv));
		_mm256_store_si256((__m256i *)idx, _mm256_add_epi32(_mm256_mullo_epi32(iu, hs), iv));
		__m256 p0, p1, q0, q1;
		pairs8(img, idx, &p0, &p1);
		pairs8(img + Hs, idx, &q0, &q1);
		__m256 a = _mm256_shuffle_ps(p0, p1, _MM_SHUFFLE(2, 0, 2, 0));
		__m256 c = _mm256_shuffle_ps(p0, p1, _MM_SHUFFLE(3, 1, 3, 1));
		__m256 b = _mm256_shuffle_ps(q0, q1, _MM_SHUFFLE(2, 0, 2, 0));
		__m256 d = _mm256_shuffle_ps(q0, q1, _MM_SHUFFLE(3, 1, 3, 1));
		__m256 top = _mm256_fmadd_ps(fu, _mm256_sub_ps(b, a), a);
		__m256 bot = _mm256_fmadd_ps(fu, _mm256_sub_ps(d, c), c);
		chunk8_add(acc + z, n - z, _mm256_mul_ps(r, r), _mm256_fmadd_ps(fv, _mm256_sub_ps(bot, top), top));
	}
}

#endif
