/*
 * cuda_kernels: the contract between the host code of the CUDA engine
 * (core/engine_cuda_*.c, plain C) and the kernels (kernels/cuda/, one .cu
 * per kernel family).
 *
 * Every launcher only launches (no allocation, no synchronisation) and
 * returns the cudaError_t of the launch, so the C side checks it with its
 * context string.  Geometry travels by value as a kernel parameter: CUDA
 * places kernel parameters in constant bank 0, so every thread of a warp
 * reading the same matrix entry is one broadcast, exactly what ASTRA
 * (cuda/3d/cone_bp.cu) and TIGRE (voxel_backprojection.cu) get from their
 * __constant__ arrays, without a cudaMemcpyToSymbol per batch that would
 * serialise the copy stream against the running kernel.
 *
 * Index space: the kernels work in continuous voxel indices of the slab they
 * write; host code folds the voxel size and the volume origin into the
 * matrices and rays (engine_cuda_ctx.c), so a kernel never sees millimetres
 * except for the ray step.
 */
#ifndef RC_CUDA_KERNELS_H
#define RC_CUDA_KERNELS_H

#ifdef RC_HAVE_CUDA
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Views per back projection launch.  32 is TIGRE's PROJ_PER_KERNEL, "optimal
 * value in the paper by Zinsser and Keck"; it also keeps a batch's matrices
 * (32 * 48 bytes) well inside the 4 KB kernel parameter space. */
#define RC_CUDA_MAX_BATCH 32
/* Voxels along z per thread of the voxel back projector: their sums stay in
 * registers across all views of a launch (ASTRA's cone_bp uses 8 too). */
#define RC_CUDA_BP_ZPT 8

/* Back projection batch: P maps voxel index (ix, iy, iz - z0, 1) of the
 * slab to (u*w, v*w, w), w in mm (geometry.h normalisation). */
typedef struct rc_cuda_bp_batch {
	int n;
	float P[RC_CUDA_MAX_BATCH][12];
} rc_cuda_bp_batch;

/* One ray-cast view: the source and the map from pixel (i, j, 1) to the ray
 * direction, both already in voxel-index units of the whole volume
 * (a = (src - origin) / voxel, M = diag(1/voxel) * Minv); the world length of
 * an index-space vector d is |diag(voxel) d|, kept as vox[]. */
typedef struct rc_cuda_ray_view {
	float a[3];
	float M[9];
} rc_cuda_ray_view;

typedef struct rc_cuda_ray_batch {
	int n;
	rc_cuda_ray_view v[RC_CUDA_MAX_BATCH];
} rc_cuda_ray_batch;

/* Volume and slab for the ray kernels.  The slab owns voxels z in [z0, z1);
 * the texture (forward) holds z in [tz0, tz0 + depth) of the volume. */
typedef struct rc_cuda_ray_vol {
	int nx, ny, nz;
	int z0, z1;
	int tz0;
	float vox[3];  /* voxel size in mm */
	float step;    /* sample spacing along the ray in mm */
	int nu, nv;
} rc_cuda_ray_vol;

/* vol[z][y][x] (slab) = (accumulate ? vol : 0) + sum over the batch of
 * 1/w^2 * bilinear(view k at (u, v)); tex is a layered 2-D texture of the
 * batch's views, linear filtering when exact == 0, point filtering when
 * exact == 1 (the kernel then interpolates in fp32). */
int rc_cuda_launch_bp_voxel(cudaTextureObject_t tex, const rc_cuda_bp_batch *b,
			    float *vol, int nx, int ny, int nz, int accumulate,
			    int exact, cudaStream_t s);

/* proj[k][j][i] = (accumulate ? proj : 0) + line integral of the slab's
 * samples along the ray of pixel (i, j) of view k of the batch; tex is the
 * 3-D texture of the volume slab (z from tz0), linear filtering unless
 * exact. */
int rc_cuda_launch_fp_ray(cudaTextureObject_t tex, const rc_cuda_ray_batch *b,
			  const rc_cuda_ray_vol *rv, float *proj, int accumulate,
			  int exact, cudaStream_t s);

/* The exact adjoint of rc_cuda_launch_fp_ray (exact = 1): scatters
 * proj[k][j][i] * step * trilinear weight into vol (slab [z0, z1), which
 * must be zeroed or hold a partial sum) with atomicAdd. */
int rc_cuda_launch_bp_matched(const float *proj, const rc_cuda_ray_batch *b,
			      const rc_cuda_ray_vol *rv, float *vol, cudaStream_t s);

/* Rotation + projection (paper 000 §3.2, Approach B), cone geometry only;
 * fp_rotate.cu has the design.  Step 1 resamples the volume (3-D texture,
 * whole volume, linear filtering unless exact) onto a grid rotated with the
 * view so that the source sits on the +x axis, stored rot[x][z][y]: each
 * x-plane the projection step reads is one contiguous image, read with
 * coalesced rows.  Step 2 marches every pixel's ray plane by plane. */
typedef struct rc_cuda_rot_geom {
	int nx, ny, nz;        /* the volume */
	int nr;                /* rotated grid: nr x nr in-plane, nz planes in z */
	float vr;              /* rotated grid spacing in x and y, mm */
	float vox[3];          /* volume voxel size, mm */
	float ctr[3];          /* volume centre (cx, cy, cz), mm */
	float cos_t, sin_t;    /* the view's angle */
	float D, S;            /* source-isocentre and source-detector, mm */
	int nu, nv;
	float du, dv, off_u, off_v;
} rc_cuda_rot_geom;
int rc_cuda_launch_rotate(cudaTextureObject_t vol_tex, const rc_cuda_rot_geom *g,
			  float *rot, int exact, cudaStream_t s);
/* proj[j][i] (one view) = line integral through rot. */
int rc_cuda_launch_project_rotated(const float *rot, const rc_cuda_rot_geom *g,
				   float *proj, cudaStream_t s);

/* Fan and parallel stacks (plane.cu; the OpenCL engine's bp_plane.cl and
 * the C references proj_plane.c and proj_joseph.c): projections
 * [slice][view][u], volume [z][y][x], pv RC_CUDA_PLANE_FLOATS per view
 * (projectors/proj_cpu.h's rc_plane_view). */
#define RC_CUDA_PLANE_FLOATS 6
#define RC_CUDA_PLANE_RAY_FLOATS 4 /* rays: a, b, c, ds per view and pixel */
typedef struct rc_cuda_plane {
	int nx, ny, nz, nu, nviews;
	int fan; /* FBP's back projection weighs by 1/w^2 */
	/* a curved fan: FBP and the transpose's pixel search map a point to
	 * the arc with cu and sdu (projectors/proj_cpu.h's rc_plane_arc) */
	int curved;
	float cu, sdu;
} rc_cuda_plane;
/* vol = (accumulate ? vol : 0) + over views [first, last): FBP's back
 * projection (matched == 0, RC_BP_VOXEL) or the exact transpose of
 * rc_cuda_launch_fp_plane (matched == 1, RC_BP_MATCHED). */
int rc_cuda_launch_bp_plane(const float *proj, const float *pv, const float *rays, float *vol,
			    const rc_cuda_plane *g, int first, int last, int accumulate, int matched, cudaStream_t s);
/* proj views [first, last) of every slice = Joseph's forward projection of
 * vol (RC_FP_RAYCAST on 2-D); the other views are untouched. */
int rc_cuda_launch_fp_plane(const float *vol, const float *rays, float *proj, const rc_cuda_plane *g,
			    int first, int last, cudaStream_t s);

/* The splat pair (splat.cu; the OpenCL engine's kernels/opencl/splat.cl has
 * the model): tab holds RC_CUDA_SPLAT_HEAD doubles (voxel (0, 0, 0) in mm,
 * the voxel size) then RC_CUDA_SPLAT_VIEW per view (P, the gain's c0, cu,
 * cv, 1 on a cone view, 1 / (|P[6]| vz)), built by cuda_splat.c. */
#define RC_CUDA_SPLAT_HEAD 8
#define RC_CUDA_SPLAT_VIEW 24
typedef struct rc_cuda_splat {
	int nx, ny, nz, nu, nv;
} rc_cuda_splat;
/* proj views [first, last) (zeroed by the caller) += the splat of vol,
 * then times the gain: RC_FP_SPLAT.  Two launches. */
int rc_cuda_launch_fp_splat(const float *vol, const double *tab, float *proj, const rc_cuda_splat *g, int first,
			    int last, cudaStream_t s);
/* vol = (accumulate ? vol : 0) + RC_BP_SPLAT of views [first, last) (at
 * most RC_CUDA_MAX_BATCH): the views times the gain into gp (that many
 * views), then the gather.  Two launches. */
int rc_cuda_launch_bp_splat(const float *proj, const double *tab, float *gp, float *vol, const rc_cuda_splat *g,
			    int first, int last, int accumulate, cudaStream_t s);

/* Element-wise steps of the CUDA backend (backend_cuda.c) and of the tensor
 * backend's device vectors (core/backend/tensor/tensor_gpu.cu), n elements
 * each, every one the loop of core/vec_host.c it names with the formula of
 * core/backend/elementwise_ops.h (elementwise.cu).  Device pointers; sums go
 * into device doubles that the caller zeroes first. */
int rc_cuda_fill(float *x, float v, size_t n, cudaStream_t s);
/* A view mask over a stack of rows of nc elements whose row r holds rays of
 * view rv[r] (a device array): a masked step touches the rows of views
 * [first, last) only (the tensor backend's [row][slice] projections). */
typedef struct rc_cuda_views {
	const int *rv;
	int nc, first, last;
} rc_cuda_views;
/* rc_vresidual: e = (p - e) * w (w NULL: weight 1); *sum2 += sum of
 * (p - e)^2 before the weighting; views NULL: every element. */
int rc_cuda_residual(const float *p, float *e, const float *w, size_t n, const rc_cuda_views *views,
		     double *sum2, cudaStream_t s);
/* rc_vupdate: v += lambda * u * c, then max(v, 0) when nonneg. */
int rc_cuda_update(float *v, const float *u, const float *c, float lambda, int nonneg, size_t n,
		   cudaStream_t s);
/* rc_vmul2: v *= u * c */
int rc_cuda_mul(float *v, const float *u, const float *c, size_t n, cudaStream_t s);
/* rc_vaxpy: y += a * x */
int rc_cuda_axpy(float *y, float a, const float *x, size_t n, cudaStream_t s);
/* rc_vxpay: y = x + a * y */
int rc_cuda_xpay(float *y, const float *x, float a, size_t n, cudaStream_t s);
/* rc_vdot: *out += sum of x * y; y NULL: rc_vsum, *out += sum of x. */
int rc_cuda_dot(const float *x, const float *y, size_t n, double *out, cudaStream_t s);
/* rc_vinv_guarded in two launches: rc_cuda_max puts max(0, max x) into
 * *mx (the float's bits; the caller zeroes it), then rc_cuda_inv_guarded
 * sets x = x > eps && x > 0 ? 1 / x : 0 with eps = (float)(rel * max). */
int rc_cuda_max(const float *x, size_t n, unsigned *mx, cudaStream_t s);
int rc_cuda_inv_guarded(float *x, size_t n, double rel, const unsigned *mx, cudaStream_t s);
/* rc_vratio: e = e > eps ? max(p, 0) / e : 0; *sum2 += sum of (p - e)^2
 * taken before; views NULL: every element. */
int rc_cuda_ratio(float *e, const float *p, float eps, size_t n, const rc_cuda_views *views, double *sum2,
		  cudaStream_t s);

/* tv_host.h's operator (kernels/cuda/tv.cu): out = D^T W(w) D d over
 * [z][y][x] volumes of nx x ny x nz (out distinct from w and d), 2-D per
 * slice when planar. */
int rc_cuda_tv_apply(const float *w, const float *d, float *out, int nx, int ny, int nz, int planar, float eps,
		     cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif /* RC_HAVE_CUDA */
#endif
