/*
 * fp_raycast: ray casting with trilinear sampling (paper 002 Alg. 2,
 * RC_FP_RAYCAST) and its exact transpose (RC_BP_MATCHED).
 *
 * The ray of pixel (i, j) of view k leaves the source along
 * d = Minv (i, j, 1) / |.|.  It is clipped to the support of the trilinear
 * interpolant, voxel index -1 .. n per axis (world lo..hi), to [t0, t1] and
 * sampled at t0 + (m + 1/2) h, m = 0 .. ceil((t1 - t0)/h) - 1, h = half the
 * smallest voxel (the CPU engine's definition, core/proj_raycast.c):
 *   forward   p(ray) = h * sum_m trilinear(f, x_m)
 *   matched   f[c]  += h * p(ray) * w_c(x_m)   for every ray, m and corner c.
 * One work-item per detector pixel (i fastest) in both variants.  The
 * transpose scatters with a compare-and-swap float add (OpenCL 1.2 has no
 * float atomics); the order of the additions is free, so results match the
 * CPU engine to float rounding, not bit for bit.
 */
struct rc_ray {
	float3 g, gd; /* continuous voxel index of sample 0, and the step */
	int m;        /* samples */
};

static struct rc_ray ray_setup(__global const float *V, int i, int j, float4 org, float4 sp,
			       float4 lo, float4 hi, float h)
{
	struct rc_ray r;
	float3 s = (float3)(V[21], V[22], V[23]);
	float3 d = (float3)(V[12] * i + V[13] * j + V[14], V[15] * i + V[16] * j + V[17],
			    V[18] * i + V[19] * j + V[20]);
	d = d / sqrt(dot(d, d));
	float t0 = 0.0f, t1 = INFINITY;
	float sv[3] = { s.x, s.y, s.z }, dv[3] = { d.x, d.y, d.z };
	float lv[3] = { lo.x, lo.y, lo.z }, hv[3] = { hi.x, hi.y, hi.z };
	for (int a = 0; a < 3; a++) {
		if (fabs(dv[a]) < 1e-12f) {
			if (sv[a] <= lv[a] || sv[a] >= hv[a])
				t1 = -1.0f;
			continue;
		}
		float ta = (lv[a] - sv[a]) / dv[a], tb = (hv[a] - sv[a]) / dv[a];
		t0 = fmax(t0, fmin(ta, tb));
		t1 = fmin(t1, fmax(ta, tb));
	}
	r.m = t1 > t0 ? (int)ceil((t1 - t0) / h) : 0;
	float3 isp = (float3)(1.0f / sp.x, 1.0f / sp.y, 1.0f / sp.z);
	r.g = (s + (t0 + 0.5f * h) * d - (float3)(org.x, org.y, org.z)) * isp;
	r.gd = h * d * isp;
	return r;
}

__kernel void fp_raycast(__global float *restrict out, RC_VOL_ARG,
			 __global const float *restrict views, int first,
			 int4 n, float4 org, float4 sp, float4 lo, float4 hi,
			 float h, int nu, int nv)
{
	int i = get_global_id(0), j = get_global_id(1), k = first + (int)get_global_id(2);
	if (i >= nu || j >= nv)
		return;
	struct rc_ray r = ray_setup(views + (size_t)k * RC_VIEW_FLOATS, i, j, org, sp, lo, hi, h);
	float sum = 0.0f;
	for (int q = 0; q < r.m; q++) {
		float3 p = r.g + (float)q * r.gd;
		sum += trilinear(vol, p.x, p.y, p.z, n.x, n.y, n.z);
	}
	out[((size_t)k * nv + j) * nu + i] = sum * h;
}

static void atomic_add_f(volatile __global float *p, float v)
{
	union { unsigned int u; float f; } old, upd;
	do {
		old.f = *p;
		upd.f = old.f + v;
	} while (atomic_cmpxchg((volatile __global unsigned int *)p, old.u, upd.u) != old.u);
}

__kernel void bp_matched(__global float *out, __global const float *restrict proj,
			 __global const float *restrict views, int first,
			 int4 n, float4 org, float4 sp, float4 lo, float4 hi,
			 float h, int nu, int nv)
{
	int i = get_global_id(0), j = get_global_id(1), k = first + (int)get_global_id(2);
	if (i >= nu || j >= nv)
		return;
	float pv = proj[((size_t)k * nv + j) * nu + i] * h;
	if (pv == 0.0f)
		return;
	struct rc_ray r = ray_setup(views + (size_t)k * RC_VIEW_FLOATS, i, j, org, sp, lo, hi, h);
	for (int q = 0; q < r.m; q++) {
		float3 p = r.g + (float)q * r.gd;
		float fx = floor(p.x), fy = floor(p.y), fz = floor(p.z);
		int x = (int)fx, y = (int)fy, z = (int)fz;
		float dx = p.x - fx, dy = p.y - fy, dz = p.z - fz;
		for (int c = 0; c < 8; c++) {
			int cx = x + (c & 1), cy = y + ((c >> 1) & 1), cz = z + (c >> 2);
			if (cx < 0 || cy < 0 || cz < 0 || cx >= n.x || cy >= n.y || cz >= n.z)
				continue;
			float w = (c & 1 ? dx : 1.0f - dx) * (c & 2 ? dy : 1.0f - dy) * (c & 4 ? dz : 1.0f - dz);
			atomic_add_f(out + ((size_t)cz * n.y + cy) * n.x + cx, pv * w);
		}
	}
}
