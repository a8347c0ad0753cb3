/*
 * rc_avx512_pick: 16 entries of a window held in registers, by two-source
 * permutes (vpermt2ps), for the AVX-512 loops that read a short array's
 * entries at indices a few dozen apart (the voxel back projector's tile
 * loop, the footprint pair's taps) instead of the hardware gather, which
 * loads 16 floats one by one.  Include only where __AVX512F__ is on.
 */
#ifndef RC_PROJ_AVX512_PICK_H
#define RC_PROJ_AVX512_PICK_H

#include <immintrin.h>

/* The 16 entries T[rel] of a window of 16 NV entries held in t[0 .. NV),
 * rel in [0, 16 NV), NV <= 8 (lanes with rel outside get some entry).
 * Each 32-entry part (a pair of vectors; the last part of an odd NV is
 * one vector, passed twice) is picked with a permute masked to the lanes
 * whose rel falls in it: a lane's index stays in x until its part writes
 * it, so the parts chain without blends. */
static inline __attribute__((always_inline)) __m512 rc_avx512_pick(int NV, const __m512 *t, __m512i rel)
{
	if (NV <= 2)
		return _mm512_permutex2var_ps(t[0], rel, t[1]);
	__mmask16 b5 = _mm512_test_epi32_mask(rel, _mm512_set1_epi32(32));
	__m512i x = rel;
	if (NV <= 4) {
		x = _mm512_castps_si512(_mm512_mask2_permutex2var_ps(t[0], x, (__mmask16)~b5, t[1]));
		return _mm512_mask2_permutex2var_ps(t[2], x, b5, t[NV == 3 ? 2 : 3]);
	}
	__mmask16 b6 = _mm512_test_epi32_mask(rel, _mm512_set1_epi32(64));
	x = _mm512_castps_si512(_mm512_mask2_permutex2var_ps(t[0], x, _kor_mask16(b5, b6) ^ 0xffff, t[1]));
	x = _mm512_castps_si512(_mm512_mask2_permutex2var_ps(t[2], x, _kandn_mask16(b6, b5), t[3]));
	if (NV <= 6)
		return _mm512_mask2_permutex2var_ps(t[4], x, b6, t[NV == 5 ? 4 : 5]);
	x = _mm512_castps_si512(_mm512_mask2_permutex2var_ps(t[4], x, _kandn_mask16(b5, b6), t[5]));
	return _mm512_mask2_permutex2var_ps(t[6], x, _kand_mask16(b5, b6), t[NV == 7 ? 6 : 7]);
}

#endif
