/*
 * proj_raycast_group: the inner loop of the forward ray caster
 * (proj_raycast.c) over a group of RC_FPR_LANES neighbouring rays of one
 * detector row, compiled from this C for baseline x86-64 (RC_FPR_GROUP
 * naming the function; the compiler vectorises it across rays, one lane per
 * ray) and written with intrinsics for AVX2 and AVX-512
 * (proj_raycast_pairs.h), with the same arithmetic; and the matched
 * transpose's loop, compiled from this C for every ISA (RC_BPM_GROUP).
 *
 * The caller has split every ray's samples into a head, a run [ma, mb) of
 * samples whose eight corners all lie inside the volume, and a tail; the
 * head and tail take the checked scalar path, this loop takes the runs
 * (through the zero-bordered copy the run is the whole ray).  A
 * lane outside its run reads voxel 0 and adds nothing.  Sample positions and
 * weights are computed exactly as sample_at and gather8 do (b + m d with
 * m a float, no contraction in ISO C), and each lane adds its samples in m
 * order, so the result is bit-identical to the scalar loop.
 */
#ifndef RC_PROJ_RAYCAST_GROUP_H
#define RC_PROJ_RAYCAST_GROUP_H

#include <stddef.h>

#define RC_FPR_LANES 16

struct rc_fpr_group {
	float b[3][RC_FPR_LANES], d[3][RC_FPR_LANES]; /* sample m at b + m d */
	int ma[RC_FPR_LANES], mb[RC_FPR_LANES];       /* the run of inside samples */
	float sum[RC_FPR_LANES];                      /* in: the head's sum */
};

/* Volumes with fewer voxels than this index with 32-bit integers. */
#define RC_FPR_MAX_VOXELS ((long long)1 << 30)

/* The samples [*m0, *m1) that lanes l0 .. l0 + nl - 1 of G span (empty
 * when *m0 >= *m1): the vector loops run over them, each lane masked to
 * its own run. */
static inline void rc_fpr_group_span(const struct rc_fpr_group *G, int l0, int nl, int *m0, int *m1)
{
	int a = G->ma[l0], b = G->mb[l0];
	for (int l = l0 + 1; l < l0 + nl; l++) {
		a = G->ma[l] < a ? G->ma[l] : a;
		b = G->mb[l] > b ? G->mb[l] : b;
	}
	*m0 = a;
	*m1 = b;
}

void rc_fpr_group_baseline(const float *vol, int nx, int ny, struct rc_fpr_group *G);
void rc_fpr_group_avx2(const float *vol, int nx, int ny, struct rc_fpr_group *G);
void rc_fpr_group_avx512(const float *vol, int nx, int ny, struct rc_fpr_group *G);

/* The matched transpose's inner loop: the samples [m0, m1) of a group of
 * RC_BPM_RAYS neighbouring rays of one detector row, scattered into the
 * slices [z0, z1) of vol (see bp_task in proj_raycast.c). */
#define RC_BPM_LANES 16 /* samples per chunk */
#define RC_BPM_RAYS 16  /* rays per group */

struct rc_bpm_group {
	float b[3][RC_BPM_RAYS], d[3][RC_BPM_RAYS]; /* sample m at b + m d */
	float v[RC_BPM_RAYS];                       /* step * p(ray) */
	int m0[RC_BPM_RAYS], m1[RC_BPM_RAYS];       /* samples that may touch the slab; m0 == m1: none */
	int n[3];
	int z0, z1; /* the slab */
};

void rc_bpm_group_baseline(float *vol, const struct rc_bpm_group *G);
void rc_bpm_group_avx2(float *vol, const struct rc_bpm_group *G);
void rc_bpm_group_avx512(float *vol, const struct rc_bpm_group *G);
/* The checked scatter of one sample (proj_raycast.c): corners outside the
 * volume or the slab are left out. */
void rc_bpm_scatter_edge(float *vol, const int *n, int ix, int iy, int iz, float fx, float fy, float fz,
			 float v, int z0, int z1);

#endif

#ifdef RC_FPR_GROUP
/* no-trapping-math: lets GCC turn the per-lane select into a blend (we
 * never enable floating-point traps; no value changes) */
__attribute__((optimize("no-trapping-math"))) void RC_FPR_GROUP(const float *restrict vol, int nx, int ny, struct rc_fpr_group *restrict G)
{
	int m0, m1;
	rc_fpr_group_span(G, 0, RC_FPR_LANES, &m0, &m1);
	const int sy = nx, sz = nx * ny;
	float sum[RC_FPR_LANES];
	for (int l = 0; l < RC_FPR_LANES; l++)
		sum[l] = G->sum[l];
	for (int m = m0; m < m1; m++) {
		const float mf = (float)m;
		for (int l = 0; l < RC_FPR_LANES; l++) {
			int act = (m >= G->ma[l]) & (m < G->mb[l]);
			float px = G->b[0][l] + mf * G->d[0][l];
			float py = G->b[1][l] + mf * G->d[1][l];
			float pz = G->b[2][l] + mf * G->d[2][l];
			int ix = (int)(px + 2.0f) - 2, iy = (int)(py + 2.0f) - 2, iz = (int)(pz + 2.0f) - 2;
			float fx = px - (float)ix, fy = py - (float)iy, fz = pz - (float)iz;
			float gx = 1 - fx, gy = 1 - fy, gz = 1 - fz;
			/* a lane outside its run may stand far outside the volume:
			 * zero its indices before they are multiplied */
			ix &= -act;
			iy &= -act;
			iz &= -act;
			int o = iz * sz + iy * sy + ix;
			float c00 = gx * vol[o] + fx * vol[o + 1];
			float c01 = gx * vol[o + sy] + fx * vol[o + sy + 1];
			float c10 = gx * vol[o + sz] + fx * vol[o + sz + 1];
			float c11 = gx * vol[o + sz + sy] + fx * vol[o + sz + sy + 1];
			float val = gz * (gy * c00 + fy * c01) + fz * (gy * c10 + fy * c11);
			sum[l] += act ? val : 0.0f;
		}
	}
	for (int l = 0; l < RC_FPR_LANES; l++)
		G->sum[l] = sum[l];
}
#endif

#ifdef RC_BPM_GROUP
/* Chunk by chunk (samples [c, c + RC_BPM_LANES), c a multiple of
 * RC_BPM_LANES), ray by ray: neighbouring rays visit the same cache lines
 * at the same m, so a chunk of the whole group stays in L1 (one ray after
 * the other would stream its whole path, 4 lines per sample for a ray
 * along y, through L1 for every ray).  Every voxel therefore sums its
 * samples in (chunk, ray, m) order, which does not depend on the slab.
 * Per ray and chunk: positions, corner indices and the eight weights in a
 * lane loop the compiler vectorises (the same expressions as sample_at,
 * so the same values on every ISA), then the adds one sample after
 * another, scalar.  Samples whose corners lie in the volume in x and y and
 * whose z corners both (or one: the slab's first or last slice) lie in the
 * slab take unchecked adds, the others (the ends of the ray)
 * rc_bpm_scatter_edge.  No SLP vectorisation: pairing p[0] and p[1] into
 * one 8-byte load and store makes the next sample's load straddle two
 * earlier stores when it moves one voxel in x, which defeats store-to-load
 * forwarding. */
__attribute__((optimize("no-trapping-math", "no-tree-slp-vectorize"))) void RC_BPM_GROUP(float *restrict vol, const struct rc_bpm_group *restrict G)
{
	const int nx = G->n[0], ny = G->n[1], z0 = G->z0, z1 = G->z1;
	const ptrdiff_t sy = nx, sz = (ptrdiff_t)nx * ny;
	int lo = -1, hi = 0;
	for (int q = 0; q < RC_BPM_RAYS; q++) {
		if (G->m1[q] <= G->m0[q])
			continue;
		lo = lo < 0 || G->m0[q] < lo ? G->m0[q] : lo;
		hi = G->m1[q] > hi ? G->m1[q] : hi;
	}
	if (lo < 0)
		return;
	for (int m = lo - lo % RC_BPM_LANES; m < hi; m += RC_BPM_LANES) {
		for (int q = 0; q < RC_BPM_RAYS; q++) {
			const int a = G->m0[q] > m ? G->m0[q] - m : 0;
			const int e = G->m1[q] < m + RC_BPM_LANES ? G->m1[q] - m : RC_BPM_LANES;
			if (a >= e)
				continue;
			const float bx = G->b[0][q], by = G->b[1][q], bz = G->b[2][q];
			const float dx = G->d[0][q], dy = G->d[1][q], dz = G->d[2][q], v = G->v[q];
			int ix[RC_BPM_LANES], iy[RC_BPM_LANES], iz[RC_BPM_LANES], kind[RC_BPM_LANES];
			float fx[RC_BPM_LANES], fy[RC_BPM_LANES], fz[RC_BPM_LANES], w[8][RC_BPM_LANES];
			for (int l = 0; l < RC_BPM_LANES; l++) {
				const float mf = (float)(m + l);
				float px = bx + mf * dx, py = by + mf * dy, pz = bz + mf * dz;
				int jx = (int)(px + 2.0f) - 2, jy = (int)(py + 2.0f) - 2, jz = (int)(pz + 2.0f) - 2;
				float gx, gy, gz;
				ix[l] = jx;
				iy[l] = jy;
				iz[l] = jz;
				fx[l] = px - (float)jx;
				fy[l] = py - (float)jy;
				fz[l] = pz - (float)jz;
				gx = 1 - fx[l];
				gy = 1 - fy[l];
				gz = 1 - fz[l];
				/* 3: all eight corners in the slab; 1: the lower four
				 * (the slab's last slice); 2: the upper four (its
				 * first); 0: check */
				int xy = ((unsigned)jx < (unsigned)(nx - 1)) & ((unsigned)jy < (unsigned)(ny - 1));
				int zlo = (jz >= z0) & (jz < z1), zhi = (jz + 1 >= z0) & (jz + 1 < z1);
				kind[l] = xy * (zlo + 2 * zhi);
				float w00 = gz * gy * v, w01 = gz * fy[l] * v, w10 = fz[l] * gy * v, w11 = fz[l] * fy[l] * v;
				w[0][l] = gx * w00;
				w[1][l] = fx[l] * w00;
				w[2][l] = gx * w01;
				w[3][l] = fx[l] * w01;
				w[4][l] = gx * w10;
				w[5][l] = fx[l] * w10;
				w[6][l] = gx * w11;
				w[7][l] = fx[l] * w11;
			}
			for (int l = a; l < e; l++) {
				const ptrdiff_t o = (ptrdiff_t)iy[l] * sy + ix[l];
				if (kind[l] == 3) {
					float *p = vol + (ptrdiff_t)iz[l] * sz + o;
					p[0] += w[0][l];
					p[1] += w[1][l];
					p[sy] += w[2][l];
					p[sy + 1] += w[3][l];
					p[sz] += w[4][l];
					p[sz + 1] += w[5][l];
					p[sz + sy] += w[6][l];
					p[sz + sy + 1] += w[7][l];
				} else if (kind[l] == 1) {
					float *p = vol + (ptrdiff_t)iz[l] * sz + o;
					p[0] += w[0][l];
					p[1] += w[1][l];
					p[sy] += w[2][l];
					p[sy + 1] += w[3][l];
				} else if (kind[l] == 2) {
					float *p = vol + (ptrdiff_t)(iz[l] + 1) * sz + o;
					p[0] += w[4][l];
					p[1] += w[5][l];
					p[sy] += w[6][l];
					p[sy + 1] += w[7][l];
				} else if (iz[l] >= z0 - 1 && iz[l] < z1) {
					rc_bpm_scatter_edge(vol, G->n, ix[l], iy[l], iz[l], fx[l], fy[l], fz[l], v, z0,
							    z1);
				}
			}
		}
	}
}
#endif
