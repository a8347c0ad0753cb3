/*
 * Fan and parallel stacks on the CUDA engine: the three 2-D projections of
 * kernels/opencl/bp_plane.cl, line for line (the derivations are in
 * core/projectors/proj_plane.c and proj_joseph.c, the C references):
 *
 *   bp_plane    RC_BP_VOXEL, FBP's back projection: per voxel, the sum over
 *               views of the detector row, linear in u and zero outside,
 *               over w^2 (w = 1 for parallel);
 *   fp_plane    RC_FP_RAYCAST, Joseph's forward projection: per pixel ray
 *               a i + b j + c = 0 in voxel indices, one sample per column
 *               (per row where the ray is steeper), linear across, times
 *               the mm per sample;
 *   bp_plane_t  RC_BP_MATCHED, its exact transpose as a per-voxel gather
 *               (no atomics): the pixels between the projections of the
 *               voxel's one-voxel-each-way segments, each weighed with
 *               fp_plane's own expression.
 *
 * Projections [slice][view][u] and volumes [z][y][x] in plain device
 * buffers (a stack's rows are short, its slices many: no textures); the
 * per-view floats (rc_plane_view) are a device array of
 * RC_CUDA_PLANE_FLOATS per view, the Joseph pair's rays (rc_plane_rays) one
 * of RC_CUDA_PLANE_RAY_FLOATS per view and pixel, read by both kernels.  One thread per voxel or pixel, x fastest.
 * A curved fan (g.curved) maps a point's (u w, w) to the arc's pixel index
 * atan2(u w - cu w, sdu w) sdu + cu (bp_plane.cl and proj_cpu.h's
 * rc_plane_arc say why); its rays are in the table already.
 * The arithmetic uses __fmul_rn / __fadd_rn where the C references round
 * each operation (they are built with -ffp-contract=off), so that nvcc does
 * not fuse the products that decide a sample's weight.
 */
#include "backend/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

__device__ __forceinline__ float plane_lerp(const float *row, float u, int nu)
{
	u = fminf(fmaxf(u, -1.0f), (float)nu);
	float fl = floorf(u), f = __fadd_rn(u, -fl);
	int i = (int)fl;
	float a = i >= 0 && i < nu ? row[i] : 0.0f;
	float b = i + 1 >= 0 && i + 1 < nu ? row[i + 1] : 0.0f;
	return __fadd_rn(a, __fmul_rn(f, __fadd_rn(b, -a)));
}

/* a + b p + c q, rounded as written */
__device__ __forceinline__ float lin(float a, float b, float p, float c, float q)
{
	return __fadd_rn(__fadd_rn(a, __fmul_rn(b, p)), __fmul_rn(c, q));
}

__global__ void bp_plane_kernel(const float *proj, const float *pv, float *vol, rc_cuda_plane g, int first,
				int last, int accumulate)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
	if (i >= g.nx || j >= g.ny)
		return;
	const float *slice = proj + (size_t)z * g.nviews * g.nu;
	float acc = 0.0f;
	for (int k = first; k < last; k++) {
		const float *V = pv + (size_t)k * RC_CUDA_PLANE_FLOATS;
		float w = lin(V[3], V[5], (float)j, V[4], (float)i);
		if (g.curved) {
			/* u on the arc, weight 1/L^2 = sdu^2 / (x^2 + y^2) */
			float h = lin(V[0], V[2], (float)j, V[1], (float)i);
			float y = __fadd_rn(h, -__fmul_rn(g.cu, w)), x = __fmul_rn(g.sdu, w);
			float u = __fadd_rn(__fmul_rn(atan2f(y, x), g.sdu), g.cu);
			float val = plane_lerp(slice + (size_t)k * g.nu, u, g.nu);
			float wt = __fmul_rn(g.sdu, g.sdu) / __fadd_rn(__fmul_rn(x, x), __fmul_rn(y, y));
			acc = __fadd_rn(acc, __fmul_rn(val, wt));
			continue;
		}
		float iw = 1.0f / w;
		float u = __fmul_rn(lin(V[0], V[2], (float)j, V[1], (float)i), iw);
		float val = plane_lerp(slice + (size_t)k * g.nu, u, g.nu);
		acc = __fadd_rn(acc, g.fan ? __fmul_rn(__fmul_rn(val, iw), iw) : val);
	}
	size_t idx = ((size_t)z * g.ny + j) * g.nx + i;
	vol[idx] = accumulate ? vol[idx] + acc : acc;
}

struct plane_ray {
	float a, b, c, ds;
	int percol;
};

/* pixel iu's ray of view k from the host's table (rc_plane_rays) */
__device__ __forceinline__ plane_ray ray_get(const float *rays, int k, int nu, int iu)
{
	const float *p = rays + ((size_t)k * nu + iu) * RC_CUDA_PLANE_RAY_FLOATS;
	plane_ray r;
	r.a = p[0];
	r.b = p[1];
	r.c = p[2];
	r.ds = p[3];
	r.percol = fabsf(r.b) >= fabsf(r.a);
	return r;
}

__device__ __forceinline__ float ray_at(const plane_ray &r, int idx)
{
	return r.percol ? -__fadd_rn(__fmul_rn(r.a, (float)idx), r.c) / r.b
			: -__fadd_rn(__fmul_rn(r.b, (float)idx), r.c) / r.a;
}

__global__ void fp_plane_kernel(const float *vol, const float *rays, float *proj, rc_cuda_plane g, int first,
				int last)
{
	int iu = blockIdx.x * blockDim.x + threadIdx.x, k = first + blockIdx.y, z = blockIdx.z;
	if (iu >= g.nu || k >= last)
		return;
	plane_ray r = ray_get(rays, k, g.nu, iu);
	const float *slice = vol + (size_t)z * g.ny * g.nx;
	int ns = r.percol ? g.nx : g.ny, m = r.percol ? g.ny : g.nx;
	float sum = 0.0f;
	for (int s = 0; s < ns; s++) {
		float t = ray_at(r, s);
		float fl = floorf(t);
		if (fl < -1.0f || fl >= (float)m)
			continue;
		int c0 = (int)fl;
		for (int c = c0; c <= c0 + 1; c++) {
			if (c < 0 || c >= m)
				continue;
			float wgt = __fadd_rn(1.0f, -fabsf(__fadd_rn(t, -(float)c)));
			float x = r.percol ? slice[(size_t)c * g.nx + s] : slice[(size_t)s * g.nx + c];
			sum = __fadd_rn(sum, __fmul_rn(wgt, x));
		}
	}
	proj[((size_t)z * g.nviews + k) * g.nu + iu] = __fmul_rn(sum, r.ds);
}

__device__ __forceinline__ float u_of(const float *V, float p, float q)
{
	return lin(V[0], V[1], p, V[2], q) / lin(V[3], V[4], p, V[5], q);
}

/* a curved fan: the tangent of the point's fan angle (bp_plane.cl's
 * plane_tan_arc; one atan for each extreme tangent) */
__device__ __forceinline__ float tan_arc(const float *V, float p, float q, float cu, float sdu)
{
	float h = lin(V[0], V[1], p, V[2], q), w = lin(V[3], V[4], p, V[5], q);
	return __fadd_rn(h, -__fmul_rn(cu, w)) / __fmul_rn(sdu, w);
}

__global__ void bp_plane_t_kernel(const float *proj, const float *pv, const float *rays, float *vol,
				  rc_cuda_plane g, int first, int last, int accumulate)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
	if (i >= g.nx || j >= g.ny)
		return;
	const float *slice = proj + (size_t)z * g.nviews * g.nu;
	float fi = (float)i, fj = (float)j;
	float acc = 0.0f;
	for (int k = first; k < last; k++) {
		const float *V = pv + (size_t)k * RC_CUDA_PLANE_FLOATS;
		const float *row = slice + (size_t)k * g.nu;
		float e0, e1, e2, e3;
		if (g.curved) {
			e0 = tan_arc(V, fi, fj - 1.0f, g.cu, g.sdu);
			e1 = tan_arc(V, fi, fj + 1.0f, g.cu, g.sdu);
			e2 = tan_arc(V, fi - 1.0f, fj, g.cu, g.sdu);
			e3 = tan_arc(V, fi + 1.0f, fj, g.cu, g.sdu);
		} else {
			e0 = u_of(V, fi, fj - 1.0f);
			e1 = u_of(V, fi, fj + 1.0f);
			e2 = u_of(V, fi - 1.0f, fj);
			e3 = u_of(V, fi + 1.0f, fj);
		}
		float umin = fminf(fminf(e0, e1), fminf(e2, e3)), umax = fmaxf(fmaxf(e0, e1), fmaxf(e2, e3));
		if (g.curved) {
			umin = __fadd_rn(__fmul_rn(atanf(umin), g.sdu), g.cu);
			umax = __fadd_rn(__fmul_rn(atanf(umax), g.sdu), g.cu);
		}
		if (!(umax >= 0.0f && umin <= (float)(g.nu - 1)))
			continue;
		int lo = umin <= 0.0f ? 0 : (int)floorf(umin);
		int hi = umax >= (float)(g.nu - 1) ? g.nu - 1 : (int)ceilf(umax);
		for (int iu = lo; iu <= hi; iu++) {
			plane_ray r = ray_get(rays, k, g.nu, iu);
			float d = r.percol ? fabsf(__fadd_rn(ray_at(r, i), -fj)) : fabsf(__fadd_rn(ray_at(r, j), -fi));
			if (d < 1.0f)
				acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(__fadd_rn(1.0f, -d), r.ds), row[iu]));
		}
	}
	size_t idx = ((size_t)z * g.ny + j) * g.nx + i;
	vol[idx] = accumulate ? vol[idx] + acc : acc;
}

static dim3 vol_grid(const rc_cuda_plane *g, dim3 b)
{
	return dim3((g->nx + b.x - 1) / b.x, (g->ny + b.y - 1) / b.y, g->nz);
}

extern "C" int rc_cuda_launch_bp_plane(const float *proj, const float *pv, const float *rays, float *vol,
				       const rc_cuda_plane *g, int first, int last, int accumulate, int matched,
				       cudaStream_t s)
{
	dim3 b(32, 8, 1);
	if (matched)
		bp_plane_t_kernel<<<vol_grid(g, b), b, 0, s>>>(proj, pv, rays, vol, *g, first, last, accumulate);
	else
		bp_plane_kernel<<<vol_grid(g, b), b, 0, s>>>(proj, pv, vol, *g, first, last, accumulate);
	return (int)cudaGetLastError();
}

extern "C" int rc_cuda_launch_fp_plane(const float *vol, const float *rays, float *proj, const rc_cuda_plane *g,
				       int first, int last, cudaStream_t s)
{
	/* one grid row per view, at most 65535 per launch (gridDim.y's
	 * limit; a stack may have up to 10^6 views) */
	dim3 b(64, 1, 1);
	for (int c = first; c < last; c += 65535) {
		int cl = last - c > 65535 ? c + 65535 : last;
		dim3 gr((g->nu + 63) / 64, cl - c, g->nz);
		fp_plane_kernel<<<gr, b, 0, s>>>(vol, rays, proj, *g, c, cl);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess)
			return (int)e;
	}
	return (int)cudaSuccess;
}
