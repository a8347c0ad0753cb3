/*
 * fp_rotate: paper 000's forward projector for circular (cone) geometries,
 * a rotation kernel and a projection kernel (§3.2, Approach B), RC_FP_ROTATE
 * with exactly the CPU engine's definition (core/proj_rotate.c):
 *
 * rotate_view: view k at angle t resamples each slice (bilinear, zero
 * outside) onto a grid of spacing h = min(vx, vy) aligned with
 * a = (cos t, sin t) (towards the source) and b = (-sin t, cos t), centred on
 * the volume centre, na x nb points.  R[z][ib][ia] is written with ia fastest:
 * neighbouring work-items write neighbouring words (Approach B).
 *
 * project_view: every ray crosses the planes a = const once; its integral is
 * the sum over planes of a bilinear sample of R in (b, z) times h / |d.a|.
 * Work-items of neighbouring pixels read neighbouring (b, z) of a plane.
 */
__kernel void rotate_view(__global float *restrict R, __global const float *restrict vol,
			  int4 n, float ca, float sa, int na, int nb, float4 sp, float h)
{
	int ia = get_global_id(0), ib = get_global_id(1), z = get_global_id(2);
	if (ia >= na || ib >= nb || z >= n.z)
		return;
	float ha = (na - 1) / 2.0f, hb = (nb - 1) / 2.0f;
	float cx = (n.x - 1) / 2.0f, cy = (n.y - 1) / 2.0f;
	float ax = h * ca / sp.x, ay = h * sa / sp.y;
	float bx = -h * sa / sp.x, by = h * ca / sp.y;
	float fx = cx + (ib - hb) * bx - ha * ax + ia * ax;
	float fy = cy + (ib - hb) * by - ha * ay + ia * ay;
	float flx = floor(fx), fly = floor(fy);
	int ix = (int)flx, iy = (int)fly;
	float gx = fx - flx, gy = fy - fly, s = 0.0f;
	__global const float *sl = vol + (size_t)z * n.x * n.y;
	for (int c = 0; c < 4; c++) {
		int x = ix + (c & 1), y = iy + (c >> 1);
		if (x < 0 || y < 0 || x >= n.x || y >= n.y)
			continue;
		s += (c & 1 ? gx : 1.0f - gx) * (c & 2 ? gy : 1.0f - gy) * sl[(size_t)y * n.x + x];
	}
	R[((size_t)z * nb + ib) * na + ia] = s;
}

__kernel void project_view(__global float *restrict out, __global const float *restrict R,
			   __global const float *restrict views, int k, int4 n, float ca, float sa,
			   int na, int nb, float4 sp, float4 ctr, float h, int nu, int nv)
{
	int i = get_global_id(0), j = get_global_id(1);
	if (i >= nu || j >= nv)
		return;
	__global const float *V = views + (size_t)k * RC_VIEW_FLOATS;
	float3 o = (float3)(V[21], V[22], V[23]);
	float3 d = (float3)(V[12] * i + V[13] * j + V[14], V[15] * i + V[16] * j + V[17],
			    V[18] * i + V[19] * j + V[20]);
	d = d / sqrt(dot(d, d));
	float ha = (na - 1) / 2.0f, hb = (nb - 1) / 2.0f;
	float z0 = ctr.z - (n.z - 1) / 2.0f * sp.z;
	float oa = (o.x - ctr.x) * ca + (o.y - ctr.y) * sa;
	float ob = -(o.x - ctr.x) * sa + (o.y - ctr.y) * ca;
	float da = d.x * ca + d.y * sa, db = -d.x * sa + d.y * ca;
	float t0 = (-ha * h - oa) / da, dt = h / da;
	float fb0 = (ob + t0 * db) / h + hb, dfb = dt * db / h;
	float fz0 = (o.z + t0 * d.z - z0) / sp.z, dfz = dt * d.z / sp.z;
	size_t plane = (size_t)na * nb;
	float sum = 0.0f;
	for (int ia = 0; ia < na; ia++) {
		float fb = fb0 + ia * dfb, fz = fz0 + ia * dfz;
		float flb = floor(fb), flz = floor(fz);
		int ib = (int)flb, iz = (int)flz;
		if (ib < -1 || ib >= nb || iz < -1 || iz >= n.z)
			continue;
		float gb = fb - flb, gz = fz - flz;
		__global const float *p = R + ia;
		for (int c = 0; c < 4; c++) {
			int b = ib + (c & 1), z = iz + (c >> 1);
			if (b < 0 || z < 0 || b >= nb || z >= n.z)
				continue;
			sum += (c & 1 ? gb : 1.0f - gb) * (c & 2 ? gz : 1.0f - gz) * p[(size_t)z * plane + (size_t)b * na];
		}
	}
	out[((size_t)k * nv + j) * nu + i] = sum * (h / fabs(da));
}
