/*
 * proj_splat_col: the column loop of the splatting forward projector
 * (proj_splat.c), included once per ISA file with RC_SPLAT_SUFFIX naming
 * it, so the same C is compiled for baseline x86-64, AVX2 and AVX-512.
 *
 * A cone view's voxel column lands on one pair of padded detector columns
 * c0, c1 (weights w0, w1: proj_cpu.h's footprint) at padded rows
 * v_z = V0 + z S, with the footprint's weight rc_splat_hat(|v_z - j|, sv)
 * on row j.  Scattering each
 * voxel to its rows floor(v_z) and floor(v_z) + 1 chains every voxel on the
 * last one's store (about 9 cycles a voxel); here each detector row gathers
 * instead: row j gets sum_z a_z hat(|v_z - j|), from the at most
 * T = floor(2 / |S|) + 1 voxels z whose v_z is within a pixel of j, which
 * vectorises over the rows.  Only the real rows 1..nv are written: a voxel
 * whose v_z is off the back projector's range [0, nv + 1] has no weight on
 * them, so the back projector's clamps need no test here.
 */
#ifndef RC_PROJ_SPLAT_COL_H
#define RC_PROJ_SPLAT_COL_H

#include <math.h>
#include <stddef.h>

#include "projectors/proj_cpu.h"

/* Most voxels a detector row gathers from: |S| >= 2 / (RC_SPLAT_T - 1) */
#define RC_SPLAT_T 8

void rc_splat_col_baseline(const float *restrict a, int nz, double V0, double S, float sv, float w0, float w1,
			   float *restrict c0, float *restrict c1, int nv);
void rc_splat_col_avx2(const float *restrict a, int nz, double V0, double S, float sv, float w0, float w1,
		       float *restrict c0, float *restrict c1, int nv);
void rc_splat_col_avx512(const float *restrict a, int nz, double V0, double S, float sv, float w0, float w1,
			 float *restrict c0, float *restrict c1, int nv);

#endif

#ifdef RC_SPLAT_SUFFIX
#define RC_SPLAT_CAT2(a, b) a##_##b
#define RC_SPLAT_CAT(a, b) RC_SPLAT_CAT2(a, b)

/* Rows j0..j1 with T candidate voxels each (T a constant after inlining). */
static inline __attribute__((always_inline)) void RC_SPLAT_CAT(rows, RC_SPLAT_SUFFIX)(
	const float *restrict a, int nz, float V0, float S, float iS, float reach, float sv, float w0, float w1,
	float *restrict c0, float *restrict c1, int j0, int j1, const int T)
{
	for (int j = j0; j <= j1; j++) {
		float fj = (float)j;
		/* first z with v_z past j - 1 (S > 0) or j + 1 (S < 0): floor by
		 * truncation after an offset that keeps the argument positive
		 * (it is above -(reach + 1) for the rows in range) */
		float zlo = (fj - V0) * iS - reach + 64.0f;
		int zs = (int)zlo - 63;
		float acc = 0.0f;
#pragma GCC unroll 8
		for (int t = 0; t < T; t++) {
			int z = zs + t;
			/* written as single selects, which GCC if-converts */
			int zc = z < 0 ? 0 : z;
			zc = zc < nz - 1 ? zc : nz - 1;
			float w = rc_splat_hat(fabsf(V0 + (float)z * S - fj), sv);
			w = z == zc ? w : 0.0f;
			acc += w * a[zc];
		}
		c0[j] += w0 * acc;
		c1[j] += w1 * acc;
	}
}

void RC_SPLAT_CAT(rc_splat_col, RC_SPLAT_SUFFIX)(const float *restrict a, int nz, double V0, double S, float sv,
						  float w0, float w1, float *restrict c0, float *restrict c1, int nv)
{
	double vlo = S > 0 ? V0 : V0 + (nz - 1) * S, vhi = S > 0 ? V0 + (nz - 1) * S : V0;
	int j0 = vlo < 1 ? 1 : (int)vlo;
	int j1 = vhi + 1 > nv ? nv : (int)(vhi + 1);
	if (j0 > j1)
		return;
	const float iS = (float)(1.0 / S), reach = (float)(1.0 / fabs(S));
	const int T = (int)(2.0 / fabs(S)) + 1;
	if (T <= 3)
		RC_SPLAT_CAT(rows, RC_SPLAT_SUFFIX)(a, nz, (float)V0, (float)S, iS, reach, sv, w0, w1, c0, c1, j0, j1, 3);
	else if (T <= 4)
		RC_SPLAT_CAT(rows, RC_SPLAT_SUFFIX)(a, nz, (float)V0, (float)S, iS, reach, sv, w0, w1, c0, c1, j0, j1, 4);
	else
		RC_SPLAT_CAT(rows, RC_SPLAT_SUFFIX)(a, nz, (float)V0, (float)S, iS, reach, sv, w0, w1, c0, c1, j0, j1,
						     RC_SPLAT_T);
}

#endif
