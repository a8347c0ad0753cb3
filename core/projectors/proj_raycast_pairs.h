/*
 * proj_raycast_pairs: the corner loads of the forward ray caster's vector
 * loops written with intrinsics (proj_raycast_avx2.c, proj_raycast_avx512.c).
 *
 * A sample's eight corners are four pairs: vol[o + row] and vol[o + row + 1]
 * for the cell's four (y, z) rows.  Each pair is one 8-byte load, two lanes'
 * pairs share a 128-bit register (movq, movhps), and the vector of lane
 * pairs is split into the x and x + 1 corners by one shuffle per vector.
 * Each lane's index is read from memory once (the vector is stored, then
 * read per lane), which costs less than extracting it from the register.
 * On the Xeon measured, the 8-byte loads beat loads masked to each lane's
 * two elements (fewer cache-line splits) and scalar loads (twice the loads
 * and inserts).  The arithmetic around them is the portable loop's,
 * operation for operation, so every ISA gives the same projections.
 */
#ifndef RC_PROJ_RAYCAST_PAIRS_H
#define RC_PROJ_RAYCAST_PAIRS_H

#include <immintrin.h>
#include <stdint.h>

/* After the lanes' indices are stored: the compiler must read them back
 * from memory, not extract them from the vector register. */
#define RC_FPR_INDICES_IN_MEMORY(o) __asm__ volatile("" : : "r"(o) : "memory")

/* r[a], r[a + 1], r[b], r[b + 1] */
static inline __m128 rc_fpr_pairs2(const float *r, int32_t a, int32_t b)
{
	__m128 lo = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(const void *)(r + a)));
	return _mm_loadh_pi(lo, (const __m64 *)(const void *)(r + b));
}

#endif
