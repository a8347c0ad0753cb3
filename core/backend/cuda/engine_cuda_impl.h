/*
 * engine_cuda_impl: what the CUDA engine's host files share (not a public
 * header).  A cu_ctx holds one device's streams, the texture arrays the
 * projectors read and the buffers a slab of work needs; engine_cuda_ops.c
 * (the rc_engine) and backend_cuda.c (the backend of the resident runs:
 * vectors in device memory) both run their projections through the cu_*
 * calls below, which accept host or device pointers alike
 * (cudaMemcpyDefault with unified addressing).  Kernels and copies of a
 * context are queued on c->ks in order; only cu_bp_voxel also uses the
 * copy stream c->cs, ordered against ks with events.
 *
 * Slabs: a slab is the volume's planes z in [z0, z1).  Forward projection
 * adds the slabs' contributions, back projection writes each slab's part of
 * the volume; both give the whole-volume result (cuda_kernels.h).
 */
#ifndef RC_ENGINE_CUDA_IMPL_H
#define RC_ENGINE_CUDA_IMPL_H

#ifdef RC_HAVE_CUDA

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/engine_cuda.h"

/* Records a failed CUDA call as RC_EDEVICE (RC_ENOMEM for allocations) with
 * the context, e.g. "cudaMalloc3DArray(volume slab 512x512x65)". */
int cu_fail(rc_err *err, cudaError_t ce, const char *ctx);
/* Cleanup paths: a failure there is not the caller's error any more; the
 * sticky error state is cleared so the next call starts clean (ASTRA's
 * logCuda plays this role; core/ does not log). */
void cu_release(cudaError_t ce);

#define CU_CHECK(call, ctx)                                  \
	do {                                                 \
		cudaError_t ce_ = (call);                    \
		if (ce_ != cudaSuccess) {                    \
			rc = cu_fail(err, ce_, ctx);         \
			goto out;                            \
		}                                            \
	} while (0)

typedef struct cu_plan {
	int zs;          /* slab depth (planes); nz = no slabs */
	int nslabs;
	int chunk;       /* views of the linear projection buffer (0 = none) */
	int batch;       /* views per back projection launch */
	uint64_t bytes;  /* device bytes the plan allocates */
	uint64_t budget; /* what it was fitted into */
} cu_plan;

enum {
	CU_NEED_VOL = 1,    /* slab accumulator (back projection) */
	CU_NEED_VOLTEX = 2, /* 3-D texture of a slab (forward projection) */
	CU_NEED_BATCH = 4,  /* two layered textures + pinned staging (voxel BP) */
	CU_NEED_PROJ = 8,   /* linear projection chunk (forward, matched BP) */
	CU_NEED_ROT = 16,   /* rotated volume (RC_FP_ROTATE) */
};

typedef struct cu_ctx {
	int ordinal;
	const rc_geom *g;
	rc_cuda_options opt;
	cu_plan plan;
	int need;
	int nx, ny, nz, nu, nv;
	size_t view_elems;
	cudaStream_t ks, cs;                 /* kernels, copies */
	cudaEvent_t copied[2], consumed[2];
	cudaEvent_t ready;                   /* ks reached this point (cu_bp_voxel) */
	cudaArray_t barr[2];
	cudaTextureObject_t btex[2][2];      /* [buffer][exact] */
	float *stage[2];                     /* pinned staging for pageable sources */
	cudaArray_t varr;
	int vdepth;
	cudaTextureObject_t vtex[2];         /* [exact] */
	float *zero_plane;                   /* host: clears the plane after the last slab */
	float *dvol;
	float *dproj;
	float *drot;
	int bp_add;                          /* the back projection being queued
	                                        adds to its output (engine.h's
	                                        back_add): set around it only */
	int rot_nr;
	float rot_vr;
} cu_ctx;

/* Free device bytes on `ordinal` (cudaMemGetInfo), capped by o->mem_budget
 * and less a margin for the context and fragmentation. */
int cu_budget(int ordinal, const rc_cuda_options *o, uint64_t *ret, rc_err *err);

/* Fits the buffers `need` asks for into budget - reserved: the deepest slab
 * first, then the largest projection chunk.  RC_ETOOBIG with the sizes when
 * even one plane does not fit. */
int cu_make_plan(const rc_geom *g, const rc_cuda_options *o, int need, uint64_t budget,
		 uint64_t reserved, cu_plan *ret, rc_err *err);

/* Allocates what `need` asks for under plan p (the device must be current). */
int cu_ctx_init(cu_ctx *c, const rc_geom *g, const rc_cuda_options *o, int need,
		const cu_plan *p, rc_err *err);
void cu_ctx_release(cu_ctx *c);

/* Allocates the rotated grid of RC_FP_ROTATE in an initialised context,
 * after checking that it fits the memory free now (RC_ETOOBIG if not). */
int cu_ctx_add_rot(cu_ctx *c, rc_err *err);

/* Makes c->ordinal the calling thread's device (exec runs engines on their
 * own threads). */
int cu_ctx_bind(cu_ctx *c, rc_err *err);

/* Planes [z0, min(z1 + 1, nz)) of vol (host or device, whole volume) into
 * the 3-D texture; the next plane is zeroed when the texture is deeper. */
int cu_upload_slab(cu_ctx *c, const float *vol, int z0, int z1, rc_err *err);

/* Ray-cast views [first, last) of the slab in the texture into
 * out[(k - first) * view] (device); adds to out when accumulate. */
int cu_fp_ray(cu_ctx *c, int z0, int z1, float *out, int first, int last, int accumulate,
	      int exact, rc_err *err);

/* Rotation + projection of views [first, last) of the whole volume in the
 * texture into out (device), as cu_fp_ray. */
int cu_fp_rotate(cu_ctx *c, float *out, int first, int last, int exact, rc_err *err);

/* dvol (device, slab [z0, z1)) = sum over views [first, last) of the voxel
 * back projection of proj (host or device, the whole stack); dvol += that
 * sum while c->bp_add is set. */
int cu_bp_voxel(cu_ctx *c, const float *proj, float *dvol, int z0, int z1, int first, int last,
		int exact, rc_err *err);

/* dvol (device, slab) += matched back projection of dproj (device; view
 * first at offset 0) over views [first, last). */
int cu_bp_matched(cu_ctx *c, const float *dproj, float *dvol, int z0, int z1, int first,
		  int last, rc_err *err);

/* Ray step in mm: half the smallest voxel side (TIGRE's default sampling,
 * accuracy 0.5). */
float cu_ray_step(const rc_geom *g);

/* 1 when the geometry is one the CUDA projectors take (cone, matrices). */
int cu_geom_ok(const rc_geom *g, rc_err *err);

#endif /* RC_HAVE_CUDA */
#endif
