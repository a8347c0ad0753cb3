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
#define RC_BP_CHUNK 64 /* voxels of a row whose sums a CPU work-item keeps */

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
	/* One row of voxels per work-item, in chunks of RC_BP_CHUNK voxels
	 * whose sums stay in private memory: views outside, x inside, so that
	 * one view's detector row is read along x while it is in cache (views
	 * inside x would touch every view's image for every few voxels).  Each
	 * voxel still adds its views in order.  Scalar on purpose: PoCL
	 * vectorises across work-items, and the same loop written with float4
	 * (as paper 002's CPU version does) measured 4682 ms against 1751 ms on
	 * paper 000's case (docs/opencl-planner.md). */
	int iy = get_global_id(0), iz = get_global_id(1);
	if (iy >= n.y || iz >= n.z)
		return;
	float y = org.y + iy * sp.y, z = org.z + iz * sp.z;
	__global float *row = out + ((size_t)iz * n.y + iy) * n.x;
	for (int x0 = 0; x0 < n.x; x0 += RC_BP_CHUNK) {
		int nc = n.x - x0 < RC_BP_CHUNK ? n.x - x0 : RC_BP_CHUNK;
		float acc[RC_BP_CHUNK];
		for (int i = 0; i < RC_BP_CHUNK; i++)
			acc[i] = 0.0f;
		for (int k = first; k < last; k++) {
			__global const float *P = views + (size_t)k * RC_VIEW_FLOATS;
			float ru = P[1] * y + P[2] * z + P[3];
			float rv = P[5] * y + P[6] * z + P[7];
			float rw = P[9] * y + P[10] * z + P[11];
			for (int i = 0; i < nc; i++) {
				float x = org.x + (x0 + i) * sp.x;
				float iw = 1.0f / (P[8] * x + rw);
				float u = (P[0] * x + ru) * iw, v = (P[4] * x + rv) * iw;
				acc[i] += bilinear(proj, k, u, v, nu, nv) * (iw * iw);
			}
		}
		for (int i = 0; i < nc; i++)
			row[x0 + i] = accumulate ? row[x0 + i] + acc[i] : acc[i];
	}
#endif
}
