/*
 * fp_raycast: ray casting with trilinear sampling (paper 002 Alg. 2,
 * RC_FP_RAYCAST).  The ray of pixel (i, j) of view k leaves the source along
 * d = Minv (i, j, 1) / |.|; it is clipped to the volume's box (voxel edges,
 * lo..hi) to [t0, t1] and sampled at t0 + (m + 1/2) h, m = 0 .. ceil((t1 -
 * t0)/h) - 1; the value is h times the sum of the trilinear samples.
 * One work-item per detector pixel (i fastest) in both variants; a ray is
 * the natural unit of work on CPUs as well.
 */
__kernel void fp_raycast(__global float *restrict out, RC_VOL_ARG,
			 __global const float *restrict views, int first,
			 int4 n, float4 org, float4 sp, float4 lo, float4 hi,
			 float h, int nu, int nv)
{
	int i = get_global_id(0), j = get_global_id(1), k = first + (int)get_global_id(2);
	if (i >= nu || j >= nv)
		return;
	__global const float *V = views + (size_t)k * RC_VIEW_FLOATS;
	float3 s = (float3)(V[21], V[22], V[23]);
	float3 d = (float3)(V[12] * i + V[13] * j + V[14], V[15] * i + V[16] * j + V[17],
			    V[18] * i + V[19] * j + V[20]);
	d = d / sqrt(dot(d, d));
	float t0 = 0.0f, t1 = INFINITY;
	float sv[3] = { s.x, s.y, s.z }, dv[3] = { d.x, d.y, d.z };
	float lv[3] = { lo.x, lo.y, lo.z }, hv[3] = { hi.x, hi.y, hi.z };
	for (int a = 0; a < 3; a++) {
		if (fabs(dv[a]) < 1e-12f) {
			if (sv[a] < lv[a] || sv[a] > hv[a])
				t1 = -1.0f;
			continue;
		}
		float ta = (lv[a] - sv[a]) / dv[a], tb = (hv[a] - sv[a]) / dv[a];
		t0 = fmax(t0, fmin(ta, tb));
		t1 = fmin(t1, fmax(ta, tb));
	}
	float sum = 0.0f;
	if (t1 > t0) {
		int m = (int)ceil((t1 - t0) / h);
		float3 isp = (float3)(1.0f / sp.x, 1.0f / sp.y, 1.0f / sp.z);
		float3 o = (float3)(org.x, org.y, org.z);
		/* continuous voxel index of the first sample, and its step */
		float3 g = (s + (t0 + 0.5f * h) * d - o) * isp;
		float3 gd = h * d * isp;
		for (int q = 0; q < m; q++) {
			float3 p = g + (float)q * gd;
			sum += trilinear(vol, p.x, p.y, p.z, n.x, n.y, n.z);
		}
	}
	out[((size_t)k * nv + j) * nu + i] = sum * h;
}
