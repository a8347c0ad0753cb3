/*
 * splat: the splat projector pair (RC_FP_SPLAT, RC_BP_SPLAT) on device
 * buffers, the sums of the CPU engine's core/projectors/proj_splat.c and of
 * the OpenCL engine's kernels/opencl/splat.cl (which has the model and the
 * per-view table's layout, RC_CUDA_SPLAT_*): the column set-up in double,
 * the per-voxel steps in float.
 *
 * fp_splat: one thread per voxel column and view scatters with atomicAdd
 * into the zeroed views (a cone view's column gathers each detector row
 * from the at most T voxels within a pixel of it, proj_splat_col.h's loop);
 * splat_gain then multiplies the views by g.  bp_splat gathers, 32 x 8
 * columns a block, RC_CUDA_BP_ZPT voxels along z per thread, from the views
 * times g (splat_gained, one batch of views at a time).  Atomic additions come in any order: sums agree with the CPU
 * engine's to float rounding.
 */
#include "backend/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

#define RC_SPLAT_T 8

__device__ __forceinline__ float splat_scale(double w) { return w < 1 ? (float)(1.0 / w) : 1.0f; }
__device__ __forceinline__ float splat_hat(float d, float s)
{
	float r = 1.0f - d * s;
	return r > 0.0f ? r * s : 0.0f;
}

__device__ __forceinline__ void splat_deposit(float *view, int fl, float w0, float w1, float v, float a, float sv,
					      int nu, int nv)
{
	int iv = (int)v;
	float fv = v - (float)iv;
	float lo = a * splat_hat(fv, sv), hi = a * splat_hat(1.0f - fv, sv);
	for (int r = 0; r < 2; r++) {
		int j = iv - 1 + r;
		float h = r ? hi : lo;
		if (j < 0 || j >= nv || h == 0.0f)
			continue;
		if (fl >= 0)
			atomicAdd(view + (size_t)j * nu + fl, w0 * h);
		if (fl + 1 < nu)
			atomicAdd(view + (size_t)j * nu + fl + 1, w1 * h);
	}
}

__global__ void __launch_bounds__(256)
rc_k_fp_splat(float *proj, const float *__restrict__ vol, const double *__restrict__ tab, rc_cuda_splat g, int first)
{
	const int ix = blockIdx.x * blockDim.x + threadIdx.x, iy = blockIdx.y * blockDim.y + threadIdx.y;
	const int k = first + (int)blockIdx.z;
	if (ix >= g.nx || iy >= g.ny)
		return;
	const int nu = g.nu, nv = g.nv, nz = g.nz;
	const double *P = tab + RC_CUDA_SPLAT_HEAD + (size_t)k * RC_CUDA_SPLAT_VIEW;
	const double ox = tab[0], oy = tab[1], oz = tab[2], vx = tab[3], vy = tab[4], vz = tab[5];
	const double X = ox + ix * vx, Y = oy + iy * vy;
	float *view = proj + (size_t)k * nu * nv;
	const size_t plane = (size_t)g.nx * g.ny, at = (size_t)iy * g.nx + ix;
	if (P[21] == 0) { /* any other matrix: per voxel, bilinear */
		const double au = P[0] * X + P[1] * Y + P[3], av = P[4] * X + P[5] * Y + P[7];
		const double aw = P[8] * X + P[9] * Y + P[11];
		for (int z = 0; z < nz; z++) {
			double zw = (float)(oz + z * vz);
			double w = aw + P[10] * zw;
			if (!(w > 0))
				continue;
			double iw = 1 / w;
			double u = (au + P[2] * zw) * iw, v = (av + P[6] * zw) * iw + 1;
			if (!(u > -1 && u < nu && v >= 0 && v <= nv + 1))
				continue;
			double fl = floor(u);
			float fu = (float)(u - fl);
			splat_deposit(view, (int)fl, 1.0f - fu, fu, (float)v, (float)(iw * iw) * vol[(size_t)z * plane + at],
				      1.0f, nu, nv);
		}
		return;
	}
	const double w = P[8] * X + P[9] * Y + P[11];
	if (!(w > 0))
		return;
	const double iw = 1 / w, u = (P[0] * X + P[1] * Y + P[3]) * iw;
	if (!(u > -1 && u < nu))
		return;
	const double fl = floor(u), dv = P[6] * iw;
	const double v0 = (P[4] * X + P[5] * Y + P[7]) * iw + 1;
	const float wt = (float)(iw * iw);
	const float sv = fabs(dv) * vz < 1 ? (float)(w * P[22]) : 1.0f;
	double ha = fabs(P[0] - u * P[8]) * iw * vx, hb = fabs(P[1] - u * P[9]) * iw * vy;
	float su = splat_scale(ha > hb ? ha : hb), fu = (float)(u - fl);
	const float w0 = splat_hat(fu, su) * wt, w1 = splat_hat(1.0f - fu, su) * wt;
	const int c = (int)fl;
	const double z0 = (float)oz;
	const double V0 = v0 + z0 * dv, S = vz * dv;
	if (fabs(S) * RC_SPLAT_T <= 2.0) {
		for (int z = 0; z < nz; z++) {
			float vzp = (float)v0 + (float)(oz + z * vz) * (float)dv;
			if (vzp >= 0.0f && vzp <= (float)(nv + 1))
				splat_deposit(view, c, w0, w1, vzp, vol[(size_t)z * plane + at], sv, nu, nv);
		}
		return;
	}
	double vlo = S > 0 ? V0 : V0 + (nz - 1) * S, vhi = S > 0 ? V0 + (nz - 1) * S : V0;
	int j0 = vlo < 1 ? 1 : (int)vlo, j1 = vhi + 1 > nv ? nv : (int)(vhi + 1);
	const double id = 1 / S;
	const float iS = (float)id, reach = (float)fabs(id), fV0 = (float)V0, fS = (float)S;
	const int T = (int)(2 * fabs(id)) + 1;
	for (int j = j0; j <= j1; j++) {
		float fj = (float)j;
		float zlo = (fj - fV0) * iS - reach + 64.0f;
		int zs = (int)zlo - 63;
		float d = fV0 + (float)zs * fS - fj, acc = 0.0f;
		for (int t = 0; t < T; t++) {
			int z = zs + t;
			if (z >= 0 && z < nz)
				acc += splat_hat(fabsf(d), sv) * vol[(size_t)z * plane + at];
			d += fS;
		}
		if (acc == 0.0f)
			continue;
		float *row = view + (size_t)(j - 1) * nu;
		if (c >= 0)
			atomicAdd(row + c, w0 * acc);
		if (c + 1 < nu)
			atomicAdd(row + c + 1, w1 * acc);
	}
}

__device__ __forceinline__ float splat_gain_at(const double *P, int i, int j)
{
	float x = (float)(P[12] - j * P[18]) - (float)i * (float)P[15];
	float y = (float)(P[13] - j * P[19]) - (float)i * (float)P[16];
	float z = (float)(P[14] - j * P[20]) - (float)i * (float)P[17];
	return sqrtf(x * x + y * y + z * z);
}

__global__ void rc_k_splat_gain(float *proj, const double *__restrict__ tab, rc_cuda_splat g, int first)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
	const int k = first + (int)blockIdx.z;
	if (i >= g.nu || j >= g.nv)
		return;
	const double *P = tab + RC_CUDA_SPLAT_HEAD + (size_t)k * RC_CUDA_SPLAT_VIEW;
	proj[((size_t)k * g.nv + j) * g.nu + i] *= splat_gain_at(P, i, j);
}

/* gp views 0, 1, .. = proj views first, first + 1, .. times g: the back
 * projection's input, each pixel's gain taken once */
__global__ void rc_k_splat_gained(float *gp, const float *__restrict__ proj, const double *__restrict__ tab,
				  rc_cuda_splat g, int first)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
	const int q = (int)blockIdx.z, k = first + q;
	if (i >= g.nu || j >= g.nv)
		return;
	const double *P = tab + RC_CUDA_SPLAT_HEAD + (size_t)k * RC_CUDA_SPLAT_VIEW;
	gp[((size_t)q * g.nv + j) * g.nu + i] = proj[((size_t)k * g.nv + j) * g.nu + i] * splat_gain_at(P, i, j);
}

__device__ __forceinline__ float splat_px(const float *__restrict__ gp, int first, int k, int i, int j, int nu, int nv)
{
	if (i < 0 || j < 0 || i >= nu || j >= nv)
		return 0.0f;
	return gp[((size_t)(k - first) * nv + j) * nu + i];
}

__global__ void __launch_bounds__(256)
rc_k_bp_splat(float *vol, const float *__restrict__ gp, const double *__restrict__ tab, rc_cuda_splat g, int first,
	      int last, int accumulate)
{
	const int ix = blockIdx.x * blockDim.x + threadIdx.x, iy = blockIdx.y * blockDim.y + threadIdx.y;
	const int zc = blockIdx.z * RC_CUDA_BP_ZPT;
	if (ix >= g.nx || iy >= g.ny || zc >= g.nz)
		return;
	const int nu = g.nu, nv = g.nv;
	const double ox = tab[0], oy = tab[1], oz = tab[2], vx = tab[3], vy = tab[4], vz = tab[5];
	const double X = ox + ix * vx, Y = oy + iy * vy;
	const int nzc = g.nz - zc < RC_CUDA_BP_ZPT ? g.nz - zc : RC_CUDA_BP_ZPT;
	float acc[RC_CUDA_BP_ZPT], zw[RC_CUDA_BP_ZPT];
	for (int q = 0; q < RC_CUDA_BP_ZPT; q++) {
		acc[q] = 0.0f;
		zw[q] = (float)(oz + (zc + q) * vz);
	}
	const float vmax = (float)(nv + 1);
	for (int k = first; k < last; k++) {
		const double *P = tab + RC_CUDA_SPLAT_HEAD + (size_t)k * RC_CUDA_SPLAT_VIEW;
		if (P[21] == 0) {
			const double au = P[0] * X + P[1] * Y + P[3], av = P[4] * X + P[5] * Y + P[7];
			const double aw = P[8] * X + P[9] * Y + P[11];
			for (int q = 0; q < nzc; q++) {
				double w = aw + P[10] * (double)zw[q];
				if (!(w > 0))
					continue;
				double iw = 1 / w;
				double u = (au + P[2] * (double)zw[q]) * iw, v = (av + P[6] * (double)zw[q]) * iw + 1;
				if (!(u > -1 && u < nu && v >= 0 && v <= nv + 1))
					continue;
				int c = (int)floor(u);
				float fu = (float)(u - floor(u)), fv32 = (float)v;
				int iv = (int)fv32;
				float fv = fv32 - (float)iv;
				float lo = splat_hat(fv, 1.0f), hi = splat_hat(1.0f - fv, 1.0f);
				float s = lo * ((1.0f - fu) * splat_px(gp, first, k, c, iv - 1, nu, nv) +
						fu * splat_px(gp, first, k, c + 1, iv - 1, nu, nv)) +
					  hi * ((1.0f - fu) * splat_px(gp, first, k, c, iv, nu, nv) +
						fu * splat_px(gp, first, k, c + 1, iv, nu, nv));
				acc[q] += (float)(iw * iw) * s;
			}
			continue;
		}
		const double w = P[8] * X + P[9] * Y + P[11];
		if (!(w > 0))
			continue;
		const double iw = 1 / w, u = (P[0] * X + P[1] * Y + P[3]) * iw;
		if (!(u > -1 && u < nu))
			continue;
		const double fl = floor(u), dvr = P[6] * iw;
		const float v0 = (float)((P[4] * X + P[5] * Y + P[7]) * iw + 1), dv = (float)dvr;
		const float wt = (float)(iw * iw);
		const float sv = fabs(dvr) * vz < 1 ? (float)(w * P[22]) : 1.0f;
		double ha = fabs(P[0] - u * P[8]) * iw * vx, hb = fabs(P[1] - u * P[9]) * iw * vy;
		float su = splat_scale(ha > hb ? ha : hb), fu = (float)(u - fl);
		const float w0 = splat_hat(fu, su) * wt, w1 = splat_hat(1.0f - fu, su) * wt;
		const int c = (int)fl;
		for (int q = 0; q < nzc; q++) {
			float v = v0 + zw[q] * dv;
			if (!(v >= 0.0f && v <= vmax))
				continue;
			int iv = (int)v;
			float fv = v - (float)iv;
			float lo = splat_hat(fv, sv), hi = splat_hat(1.0f - fv, sv);
			float s = 0.0f;
			if (lo != 0.0f)
				s += lo * (w0 * splat_px(gp, first, k, c, iv - 1, nu, nv) +
					   w1 * splat_px(gp, first, k, c + 1, iv - 1, nu, nv));
			if (hi != 0.0f)
				s += hi * (w0 * splat_px(gp, first, k, c, iv, nu, nv) +
					   w1 * splat_px(gp, first, k, c + 1, iv, nu, nv));
			acc[q] += s;
		}
	}
	const size_t plane = (size_t)g.nx * (size_t)g.ny;
	for (int q = 0; q < nzc; q++) {
		size_t idx = (size_t)(zc + q) * plane + (size_t)iy * g.nx + ix;
		vol[idx] = accumulate ? vol[idx] + acc[q] : acc[q];
	}
}

extern "C" int rc_cuda_launch_fp_splat(const float *vol, const double *tab, float *proj, const rc_cuda_splat *g,
				       int first, int last, cudaStream_t s)
{
	dim3 block(32, 8, 1);
	dim3 grid((g->nx + 31) / 32, (g->ny + 7) / 8, last - first);
	rc_k_fp_splat<<<grid, block, 0, s>>>(proj, vol, tab, *g, first);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return (int)e;
	dim3 ggrid((g->nu + 31) / 32, (g->nv + 7) / 8, last - first);
	rc_k_splat_gain<<<ggrid, block, 0, s>>>(proj, tab, *g, first);
	return (int)cudaGetLastError();
}

extern "C" int rc_cuda_launch_bp_splat(const float *proj, const double *tab, float *gp, float *vol,
				       const rc_cuda_splat *g, int first, int last, int accumulate, cudaStream_t s)
{
	dim3 block(32, 8, 1);
	dim3 ggrid((g->nu + 31) / 32, (g->nv + 7) / 8, last - first);
	rc_k_splat_gained<<<ggrid, block, 0, s>>>(gp, proj, tab, *g, first);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return (int)e;
	dim3 grid((g->nx + 31) / 32, (g->ny + 7) / 8, (g->nz + RC_CUDA_BP_ZPT - 1) / RC_CUDA_BP_ZPT);
	rc_k_bp_splat<<<grid, block, 0, s>>>(vol, gp, tab, *g, first, last, accumulate);
	return (int)cudaGetLastError();
}
