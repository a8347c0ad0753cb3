/*
 * proj_raycast_group: the inner loop of the forward ray caster
 * (proj_raycast.c) over a group of RC_FPR_LANES neighbouring rays of one
 * detector row, included once per ISA file with RC_FPR_GROUP naming the
 * function, so the same C is compiled for baseline x86-64, AVX2 and AVX-512
 * and the compiler vectorises it across rays (one lane per ray).
 *
 * The caller has split every ray's samples into a head, a run [ma, mb) of
 * samples whose eight corners all lie inside the volume, and a tail; the
 * head and tail take the checked scalar path, this loop takes the runs.  A
 * lane outside its run reads voxel 0 and adds nothing.  Sample positions and
 * weights are computed exactly as sample_at and gather8 do (b + m d with
 * m a float, no contraction in ISO C), and each lane adds its samples in m
 * order, so the result is bit-identical to the scalar loop.
 */
#ifndef RC_PROJ_RAYCAST_GROUP_H
#define RC_PROJ_RAYCAST_GROUP_H

#define RC_FPR_LANES 16

struct rc_fpr_group {
	float b[3][RC_FPR_LANES], d[3][RC_FPR_LANES]; /* sample m at b + m d */
	int ma[RC_FPR_LANES], mb[RC_FPR_LANES];       /* the run of inside samples */
	float sum[RC_FPR_LANES];                      /* in: the head's sum */
};

/* Volumes with fewer voxels than this index with 32-bit integers. */
#define RC_FPR_MAX_VOXELS ((long long)1 << 30)

void rc_fpr_group_baseline(const float *vol, int nx, int ny, struct rc_fpr_group *G);
void rc_fpr_group_avx2(const float *vol, int nx, int ny, struct rc_fpr_group *G);
void rc_fpr_group_avx512(const float *vol, int nx, int ny, struct rc_fpr_group *G);

#endif

#ifdef RC_FPR_GROUP
/* no-trapping-math: lets GCC turn the per-lane select into a blend (we
 * never enable floating-point traps; no value changes) */
__attribute__((optimize("no-trapping-math"))) void RC_FPR_GROUP(const float *restrict vol, int nx, int ny, struct rc_fpr_group *restrict G)
{
	int m0 = G->ma[0], m1 = G->mb[0];
	for (int l = 1; l < RC_FPR_LANES; l++) {
		m0 = G->ma[l] < m0 ? G->ma[l] : m0;
		m1 = G->mb[l] > m1 ? G->mb[l] : m1;
	}
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
