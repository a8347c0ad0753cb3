/*
 * Rotation + projection forward projector (paper 000 §3.2, Approach B) for
 * circular cone geometries.
 *
 * Per view: (1) the rotation kernel resamples the volume onto a square grid
 * turned with the gantry, so that in the rotated frame the source sits at
 * (D, 0, 0), the detector is the plane x = D - S and its axes are y (u) and
 * z (v).  The grid is stored rot[x][z][y]: one x-plane is one contiguous
 * nz x nr image.  (2) The projection kernel gives each detector pixel a
 * thread (u fastest) that walks the x-planes, intersects its ray with each
 * plane and reads the plane bilinearly; neighbouring threads read
 * neighbouring y of the same plane rows, which is the coalesced layout the
 * paper's Approach B gets its 6.23x from.  Each plane stands for the ray
 * length vr * |ray| / S between planes.  Values outside the grid are 0.
 */
#include "backend/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

template <bool EXACT>
__device__ __forceinline__ float sample_plane(cudaTextureObject_t tex, float x, float y, float z)
{
	/* z is an integer plane: trilinear reduces to bilinear in x and y */
	if (!EXACT)
		return tex3D<float>(tex, x + 0.5f, y + 0.5f, z + 0.5f);
	float fx = floorf(x), fy = floorf(y);
	float ax = x - fx, ay = y - fy;
	float x0 = fx + 0.5f, y0 = fy + 0.5f, z0 = z + 0.5f;
	float c00 = tex3D<float>(tex, x0, y0, z0);
	float c10 = tex3D<float>(tex, x0 + 1.0f, y0, z0);
	float c01 = tex3D<float>(tex, x0, y0 + 1.0f, z0);
	float c11 = tex3D<float>(tex, x0 + 1.0f, y0 + 1.0f, z0);
	return (1.0f - ay) * ((1.0f - ax) * c00 + ax * c10) + ay * ((1.0f - ax) * c01 + ax * c11);
}

template <bool EXACT>
__global__ void __launch_bounds__(256)
rc_k_rotate(cudaTextureObject_t tex, const rc_cuda_rot_geom g, float *__restrict__ rot)
{
	const int iy = blockIdx.x * blockDim.x + threadIdx.x;
	const int iz = blockIdx.y * blockDim.y + threadIdx.y;
	const int ix = blockIdx.z;
	if (iy >= g.nr || iz >= g.nz)
		return;
	const float h = 0.5f * (float)(g.nr - 1);
	const float qx = ((float)ix - h) * g.vr, qy = ((float)iy - h) * g.vr;
	/* rotated frame -> world: rotate by +theta about z */
	const float px = g.cos_t * qx - g.sin_t * qy, py = g.sin_t * qx + g.cos_t * qy;
	const float fx = (px - g.ctr[0]) / g.vox[0] + 0.5f * (float)(g.nx - 1);
	const float fy = (py - g.ctr[1]) / g.vox[1] + 0.5f * (float)(g.ny - 1);
	rot[((size_t)ix * g.nz + iz) * g.nr + iy] = sample_plane<EXACT>(tex, fx, fy, (float)iz);
}

extern "C" int rc_cuda_launch_rotate(cudaTextureObject_t vol_tex, const rc_cuda_rot_geom *g,
				     float *rot, int exact, cudaStream_t s)
{
	dim3 block(32, 8, 1);
	dim3 grid((g->nr + 31) / 32, (g->nz + 7) / 8, g->nr);
	if (exact)
		rc_k_rotate<true><<<grid, block, 0, s>>>(vol_tex, *g, rot);
	else
		rc_k_rotate<false><<<grid, block, 0, s>>>(vol_tex, *g, rot);
	return (int)cudaGetLastError();
}

__device__ __forceinline__ float rot_at(const float *__restrict__ plane, int nr, int nz, int y, int z)
{
	return (y >= 0 && y < nr && z >= 0 && z < nz) ? __ldg(plane + (size_t)z * nr + y) : 0.0f;
}

__global__ void __launch_bounds__(256)
rc_k_project_rotated(const float *__restrict__ rot, const rc_cuda_rot_geom g, float *__restrict__ proj)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	const int j = blockIdx.y * blockDim.y + threadIdx.y;
	if (i >= g.nu || j >= g.nv)
		return;
	const float u = ((float)i - 0.5f * (float)(g.nu - 1)) * g.du + g.off_u;
	const float v = ((float)j - 0.5f * (float)(g.nv - 1)) * g.dv + g.off_v;
	const float h = 0.5f * (float)(g.nr - 1);
	const float hz = 0.5f * (float)(g.nz - 1);
	float sum = 0.0f;
	for (int ix = 0; ix < g.nr; ix++) {
		const float x = ((float)ix - h) * g.vr;
		const float lam = (g.D - x) / g.S; /* fraction of the way to the detector */
		if (lam <= 0.0f || lam >= 1.0f)
			continue;
		const float fy = lam * u / g.vr + h;
		const float fz = (lam * v - g.ctr[2]) / g.vox[2] + hz;
		const float y0f = floorf(fy), z0f = floorf(fz);
		const float ay = fy - y0f, az = fz - z0f;
		const int y0 = (int)y0f, z0 = (int)z0f;
		if (y0 < -1 || y0 >= g.nr || z0 < -1 || z0 >= g.nz)
			continue;
		const float *plane = rot + (size_t)ix * g.nz * g.nr;
		sum += (1.0f - az) * ((1.0f - ay) * rot_at(plane, g.nr, g.nz, y0, z0) +
				      ay * rot_at(plane, g.nr, g.nz, y0 + 1, z0)) +
		       az * ((1.0f - ay) * rot_at(plane, g.nr, g.nz, y0, z0 + 1) +
			     ay * rot_at(plane, g.nr, g.nz, y0 + 1, z0 + 1));
	}
	const float len = sqrtf(g.S * g.S + u * u + v * v);
	proj[(size_t)j * g.nu + i] = sum * g.vr * len / g.S;
}

extern "C" int rc_cuda_launch_project_rotated(const float *rot, const rc_cuda_rot_geom *g,
					      float *proj, cudaStream_t s)
{
	dim3 block(32, 8, 1);
	dim3 grid((g->nu + 31) / 32, (g->nv + 7) / 8, 1);
	rc_k_project_rotated<<<grid, block, 0, s>>>(rot, *g, proj);
	return (int)cudaGetLastError();
}
