/*
 * common: what every recond OpenCL kernel shares.  Built with
 *   -DRC_GPU=0|1     0: CPU variant (2-D decomposition, a row of voxels per
 *                    work-item, float4 arithmetic: paper 002's CPU version);
 *                    1: GPU variant (one voxel/pixel per work-item, x fastest
 *                    so that neighbouring work-items touch neighbouring words)
 *   -DRC_IMAGES=0|1  1: projections and volume are read through image3d_t
 *                    (texture cache; GPU variant only)
 *
 * Per-view geometry, RC_VIEW_FLOATS floats per view, written by the host
 * (engine_opencl.c) from rc_view:
 *   [0..11]  P, the normalised 3x4 matrix: (u w, v w, w) = P (x, y, z, 1)
 *   [12..20] Minv: the ray through pixel (u, v) has direction Minv (u, v, 1)
 *   [21..23] the source position in mm
 *   [24]     cos(angle), [25] sin(angle)  (rotation kernels)
 *
 * Interpolation: samples outside the grid are 0 (zero padding), in both the
 * bilinear detector and the trilinear volume lookups; the engine's double
 * precision reference in tests/unit/test_engine_opencl.c says the same.
 * Images use nearest reads at integer coordinates with CLK_ADDRESS_CLAMP
 * (border 0) and the weights are computed here: hardware linear filtering
 * uses 8-bit weights on most GPUs, far from the 1e-4 the engines must agree to.
 */
#define RC_VIEW_FLOATS 26

#ifndef RC_GPU
#define RC_GPU 0
#endif
#ifndef RC_IMAGES
#define RC_IMAGES 0
#endif

#if RC_IMAGES
__constant sampler_t rc_nearest = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;
#endif

/* Bilinear lookup of view k at continuous pixel (u, v), zero outside. */
#if RC_IMAGES
#define RC_PROJ_ARG __read_only image3d_t proj
static float proj_at(__read_only image3d_t proj, int i, int j, int k, int nu, int nv)
{
	(void)nu; (void)nv;
	return read_imagef(proj, rc_nearest, (int4)(i, j, k, 0)).x;
}
#else
#define RC_PROJ_ARG __global const float *restrict proj
static float proj_at(__global const float *restrict proj, int i, int j, int k, int nu, int nv)
{
	if (i < 0 || j < 0 || i >= nu || j >= nv)
		return 0.0f;
	return proj[((size_t)k * nv + j) * nu + i];
}
#endif

#define PROJ_AT(i, j) proj_at(proj, (i), (j), k, nu, nv)

static float bilinear(RC_PROJ_ARG, int k, float u, float v, int nu, int nv)
{
	float fu = floor(u), fv = floor(v);
	int i = (int)fu, j = (int)fv;
	float du = u - fu, dv = v - fv;
	/* whole 2x2 neighbourhood outside: skip the reads (most rays miss edges) */
	if (i < -1 || j < -1 || i >= nu || j >= nv)
		return 0.0f;
	float p00 = PROJ_AT(i, j), p10 = PROJ_AT(i + 1, j);
	float p01 = PROJ_AT(i, j + 1), p11 = PROJ_AT(i + 1, j + 1);
	return (1.0f - dv) * ((1.0f - du) * p00 + du * p10) + dv * ((1.0f - du) * p01 + du * p11);
}

/* Trilinear lookup of the volume at continuous voxel index (x, y, z). */
#if RC_IMAGES
#define RC_VOL_ARG __read_only image3d_t vol
static float vol_at(__read_only image3d_t vol, int x, int y, int z, int nx, int ny, int nz)
{
	(void)nx; (void)ny; (void)nz;
	return read_imagef(vol, rc_nearest, (int4)(x, y, z, 0)).x;
}
#else
#define RC_VOL_ARG __global const float *restrict vol
static float vol_at(__global const float *restrict vol, int x, int y, int z, int nx, int ny, int nz)
{
	if (x < 0 || y < 0 || z < 0 || x >= nx || y >= ny || z >= nz)
		return 0.0f;
	return vol[((size_t)z * ny + y) * nx + x];
}
#endif

static float trilinear(RC_VOL_ARG, float x, float y, float z, int nx, int ny, int nz)
{
	float fx = floor(x), fy = floor(y), fz = floor(z);
	int i = (int)fx, j = (int)fy, l = (int)fz;
	if (i < -1 || j < -1 || l < -1 || i >= nx || j >= ny || l >= nz)
		return 0.0f;
	float dx = x - fx, dy = y - fy, dz = z - fz;
	float c00 = (1.0f - dx) * vol_at(vol, i, j, l, nx, ny, nz) + dx * vol_at(vol, i + 1, j, l, nx, ny, nz);
	float c10 = (1.0f - dx) * vol_at(vol, i, j + 1, l, nx, ny, nz) + dx * vol_at(vol, i + 1, j + 1, l, nx, ny, nz);
	float c01 = (1.0f - dx) * vol_at(vol, i, j, l + 1, nx, ny, nz) + dx * vol_at(vol, i + 1, j, l + 1, nx, ny, nz);
	float c11 = (1.0f - dx) * vol_at(vol, i, j + 1, l + 1, nx, ny, nz) + dx * vol_at(vol, i + 1, j + 1, l + 1, nx, ny, nz);
	float c0 = (1.0f - dy) * c00 + dy * c10;
	float c1 = (1.0f - dy) * c01 + dy * c11;
	return (1.0f - dz) * c0 + dz * c1;
}
