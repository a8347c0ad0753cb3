/*
 * bp_voxel: voxel-driven back projection with the 3x4 matrices, bilinear
 * detector lookup and the 1/w^2 weight (paper 002 Eq. 1, RC_BP_VOXEL):
 *   out(x) [+]= sum over views k in [first, last) of p_k(u, v) / w^2,
 *   (u w, v w, w) = P_k (x, 1).
 * Views are summed in order inside one voxel, as the CPU engine does.
 *
 * Arguments: out [z][y][x]; n = (nx, ny, nz); org = world mm of voxel
 * (0, 0, 0); sp = voxel size; accumulate = 0 overwrites out.
 */
__kernel void bp_voxel(__global float *restrict out, RC_PROJ_ARG,
		       __global const float *restrict views, int first, int last,
		       int accumulate, int4 n, float4 org, float4 sp, int nu, int nv)
{
#if RC_GPU
	int ix = get_global_id(0), iy = get_global_id(1), iz = get_global_id(2);
	if (ix >= n.x || iy >= n.y || iz >= n.z)
		return;
	float x = org.x + ix * sp.x, y = org.y + iy * sp.y, z = org.z + iz * sp.z;
	float acc = 0.0f;
	for (int k = first; k < last; k++) {
		__global const float *P = views + (size_t)k * RC_VIEW_FLOATS;
		float iw = 1.0f / (P[8] * x + P[9] * y + P[10] * z + P[11]);
		float u = (P[0] * x + P[1] * y + P[2] * z + P[3]) * iw;
		float v = (P[4] * x + P[5] * y + P[6] * z + P[7]) * iw;
		acc += bilinear(proj, k, u, v, nu, nv) * iw * iw;
	}
	size_t idx = ((size_t)iz * n.y + iy) * n.x + ix;
	out[idx] = accumulate ? out[idx] + acc : acc;
#else
	/* One row of voxels per work-item, four at a time: the terms that do
	 * not depend on x are hoisted out of the row. */
	int iy = get_global_id(0), iz = get_global_id(1);
	if (iy >= n.y || iz >= n.z)
		return;
	float y = org.y + iy * sp.y, z = org.z + iz * sp.z;
	__global float *row = out + ((size_t)iz * n.y + iy) * n.x;
	for (int ix = 0; ix < n.x; ix += 4) {
		float4 x = org.x + (float4)(ix, ix + 1, ix + 2, ix + 3) * sp.x;
		float4 acc = (float4)(0.0f);
		for (int k = first; k < last; k++) {
			__global const float *P = views + (size_t)k * RC_VIEW_FLOATS;
			float ru = P[1] * y + P[2] * z + P[3];
			float rv = P[5] * y + P[6] * z + P[7];
			float rw = P[9] * y + P[10] * z + P[11];
			float4 iw = 1.0f / (P[8] * x + rw);
			float4 u = (P[0] * x + ru) * iw, v = (P[4] * x + rv) * iw;
			float4 wt = iw * iw;
			acc.s0 += bilinear(proj, k, u.s0, v.s0, nu, nv) * wt.s0;
			acc.s1 += bilinear(proj, k, u.s1, v.s1, nu, nv) * wt.s1;
			acc.s2 += bilinear(proj, k, u.s2, v.s2, nu, nv) * wt.s2;
			acc.s3 += bilinear(proj, k, u.s3, v.s3, nu, nv) * wt.s3;
		}
		float a[4] = { acc.s0, acc.s1, acc.s2, acc.s3 };
		for (int l = 0; l < 4 && ix + l < n.x; l++)
			row[ix + l] = accumulate ? row[ix + l] + a[l] : a[l];
	}
#endif
}
