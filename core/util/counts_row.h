/*
 * counts_row: one row of core/util/counts.c's conversion, included once per
 * ISA file with RC_COUNTS_SUFFIX naming it (counts.c: baseline x86-64,
 * counts_avx2.c, counts_avx512.c), so the same C vectorises to each
 * register width; counts.c picks the widest the CPU has.  Compiled with
 * -fno-trapping-math (Makefile), without which GCC does not if-convert the
 * clamps.
 */
#ifndef RC_COUNTS_ROW_H
#define RC_COUNTS_ROW_H

#include <stdint.h>

#define RC_COUNTS_ROW_DECL(isa)                                                                                     \
	uint64_t rc_counts_row_u16_##isa(const uint16_t *restrict s, const float *restrict dk,                     \
					 const float *restrict sc, float *restrict d, int nu);                      \
	uint64_t rc_counts_row_f32_##isa(const float *restrict s, const float *restrict dk, const float *restrict sc, \
					 float *restrict d, int nu);
RC_COUNTS_ROW_DECL(baseline)
RC_COUNTS_ROW_DECL(avx2)
RC_COUNTS_ROW_DECL(avx512)

#endif

#ifdef RC_COUNTS_SUFFIX
#include <math.h>

/* the includer includes util/counts.h (RC_COUNTS_RATIO_MIN) first */
#define RC_COUNTS_CAT2(a, b) a##_##b
#define RC_COUNTS_CAT(a, b) RC_COUNTS_CAT2(a, b)

#define RATIO_MAX (1.0f / (float)RC_COUNTS_RATIO_MIN)

/* ln x for a normal positive x (the clamped ratio): Cephes' logf (the
 * mantissa's polynomial, about 1 ulp), branch-free so that the pixel loop
 * vectorises; libm's logf is a call per pixel and was most of the pass. */
static inline float ln_normal(float x)
{
	union { float f; uint32_t i; } u = { x };
	float e = (float)((int)((u.i >> 23) & 0xff) - 126);
	u.i = (u.i & 0x007fffffu) | 0x3f000000u; /* mantissa in [0.5, 1) */
	float m = u.f;
	float lo = m < 0.70710678f ? 1.0f : 0.0f;
	e -= lo;
	m = m + lo * m - 1.0f;
	float z = m * m;
	float y = ((((((((7.0376836292e-2f * m - 1.1514610310e-1f) * m + 1.1676998740e-1f) * m - 1.2420140846e-1f) * m +
		      1.4249322787e-1f) * m - 1.6668057665e-1f) * m + 2.0000714765e-1f) * m - 2.4999993993e-1f) * m +
		   3.3333331174e-1f) * m * z;
	y += -2.12194440e-4f * e;
	y += -0.5f * z;
	return m + y + 0.693359375f * e;
}

/* -ln of the ratio, clamped to its bounds (NaN too); *out_of_range is 1
 * when it was clamped.  A dead pixel (scale 0) gives 0 and is not counted
 * here (the fixes replace it; rc_counts_image counts it once). */
static inline float line_integral(float num, float scale, unsigned *out_of_range)
{
	float r = num * scale;
	unsigned dead = scale == 0.0f, lo = !(r >= (float)RC_COUNTS_RATIO_MIN), hi = r > RATIO_MAX;
	r = hi ? RATIO_MAX : r;
	r = lo ? (float)RC_COUNTS_RATIO_MIN : r;
	r = dead ? 1.0f : r;
	*out_of_range = (lo | hi) & !dead;
	return -ln_normal(r);
}

/* One row: plain loops over restrict arrays with a local count, so that
 * GCC vectorises them (the log above is branch-free). */
uint64_t RC_COUNTS_CAT(rc_counts_row_u16, RC_COUNTS_SUFFIX)(const uint16_t *restrict s, const float *restrict dk, const float *restrict sc,
			float *restrict d, int nu)
{
	unsigned n = 0;
	for (int i = 0; i < nu; i++) {
		unsigned o;
		d[i] = line_integral((float)s[i] - dk[i], sc[i], &o);
		n += o;
	}
	return n;
}

uint64_t RC_COUNTS_CAT(rc_counts_row_f32, RC_COUNTS_SUFFIX)(const float *restrict s, const float *restrict dk, const float *restrict sc,
			float *restrict d, int nu)
{
	unsigned n = 0;
	for (int i = 0; i < nu; i++) {
		unsigned o;
		d[i] = line_integral(s[i] - dk[i], sc[i], &o);
		n += o;
	}
	return n;
}

#endif
