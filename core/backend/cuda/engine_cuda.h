/*
 * engine_cuda: NVIDIA GPUs through the CUDA runtime.
 *
 * Two ways in:
 *  - rc_engine_cuda_new: one more rc_engine (engine.h semantics exactly), so
 *    the planner can give a GPU any share of any task.  Each call uploads its
 *    inputs (the volume as a 3-D texture, projections in batches of views
 *    into layered 2-D textures, uploads overlapped with the kernels on two
 *    streams) and downloads its result.  A fan or parallel stack takes
 *    another path (kernels/cuda/plane.cu, plain device buffers, no slabs):
 *    RC_BP_VOXEL is FBP's back projection, RC_FP_RAYCAST Joseph's forward
 *    projection and RC_BP_MATCHED its exact transpose, each as the CPU
 *    engine's C references (proj_plane.c, proj_joseph.c) compute it.
 *  - rc_cuda_run_algo: a whole run resident on one GPU.  It is the shared
 *    algorithms of algo.h (algo_fdk.c, algo_sart.c, algo_sirt.c,
 *    algo_cgls.c, algo_mlem.c: the same code the host backend runs) over
 *    the CUDA backend, rc_backend_cuda_new: vectors in device memory, the
 *    projections through the engine's projector calls, the element-wise
 *    steps as kernels, only the scalars an algorithm branches on read back.
 *    recon.c calls it for execution.engine = "cuda" (FDK: the filter stays
 *    on the host, the filtered stack is uploaded once).
 *
 * Memory: the bytes a call needs are computed before anything is allocated
 * and compared with the free device memory (cudaMemGetInfo, capped by
 * rc_cuda_options.mem_budget); an engine call that does not fit runs the
 * volume in z-slabs, a resident run that does not fit (rc_algo_vectors'
 * vectors plus the projector's textures) is refused with RC_ETOOBIG
 * (recon.c then falls back to the engine path).
 *
 * Builds without nvcc (RC_HAVE_CUDA undefined) keep every function: the
 * count is 0 and the rest return RC_EUNSUPPORTED with a message saying the
 * build has no CUDA.  docs/cuda.md has the kernels' design and numbers.
 */
#ifndef RC_ENGINE_CUDA_H
#define RC_ENGINE_CUDA_H

#include <stdint.h>

#include "backend/backend.h"
#include "backend/engine.h"

/* Interpolation of the texture reads. */
typedef enum rc_cuda_interp {
	/* The fast choice wherever it is safe: HW for RC_BP_VOXEL, RC_FP_ROTATE
	 * and the forward projection of the resident SART; EXACT for the
	 * engine's and the backend's RC_FP_RAYCAST (engine.h promises
	 * RC_BP_MATCHED is its exact adjoint, and neither knows whether CGLS
	 * is calling) and for the resident SIRT, CGLS and MLEM. */
	RC_CUDA_INTERP_AUTO = 0,
	/* Hardware bilinear/trilinear filtering: one fetch per sample, weights
	 * in 9-bit fixed point (8 fractional bits, CUDA C Programming Guide,
	 * "Texture Fetching"), so results differ from the CPU engine by up to
	 * about 1/256 of the local contrast per sample (the tests bound the
	 * relative difference by 2e-3). */
	RC_CUDA_INTERP_HW,
	/* Point fetches combined with fp32 weights: the CPU engine's arithmetic
	 * (relative difference < 1e-4), 4 (2-D) or 8 (3-D) fetches per sample. */
	RC_CUDA_INTERP_EXACT,
} rc_cuda_interp;

typedef struct rc_cuda_options {
	int ordinal;            /* CUDA device number, 0 .. rc_engine_cuda_count()-1 */
	uint64_t mem_budget;    /* bytes the engine may use; 0 = the free memory
	                           (less a safety margin); tests force slabs with it */
	rc_cuda_interp fp_interp; /* RC_FP_RAYCAST; SIRT, CGLS, MLEM always EXACT */
	rc_cuda_interp bp_interp; /* RC_BP_VOXEL and RC_FP_ROTATE */
	int views_per_launch;   /* back projection batch, 1..32; 0 = 32 */
} rc_cuda_options;

void rc_cuda_options_default(rc_cuda_options *o);

/* Number of usable CUDA devices; 0 without a device, driver or CUDA build.
 * Never fails. */
int rc_engine_cuda_count(void);

/* 1 when this build has CUDA compiled in (whether or not a device exists). */
int rc_engine_cuda_built(void);

typedef struct rc_cuda_device_info {
	char name[96];           /* "NVIDIA H100 80GB HBM3" */
	char device_id[128];     /* "cuda:GPU-<uuid>": stable across reboots */
	uint64_t total_bytes;
	uint64_t free_bytes;     /* at the time of the call */
	int cc_major, cc_minor;  /* compute capability */
	int multiprocessors;
	double mem_bandwidth_gbs;/* from the memory clock and bus width; 0 if unknown */
} rc_cuda_device_info;

int rc_engine_cuda_info(int ordinal, rc_cuda_device_info *info, rc_err *err);

/* An engine on device `ordinal` with default options.  Sets name "cuda",
 * device_id as in rc_cuda_device_info and hw_group = device_id.  Borrows g
 * (any geometry; so does the resident backend, rc_backend_cuda_new). */
int rc_engine_cuda_new(const rc_geom *g, int ordinal, rc_engine **ret, rc_err *err);
int rc_engine_cuda_new_opts(const rc_geom *g, const rc_cuda_options *o,
			    rc_engine **ret, rc_err *err);

/* Number of z-slabs the engine's last call ran in (1 = whole volume); for
 * tests and reports.  e must be a CUDA engine. */
int rc_engine_cuda_last_slabs(const rc_engine *e);

/* Page-locked host memory for projection stacks: the engine then uploads by
 * DMA straight from it, overlapped with the kernels, instead of staging
 * through its own pinned buffers.  Plain malloc without CUDA or a device;
 * free with rc_cuda_host_free (NULL is fine). */
void *rc_cuda_host_alloc(size_t bytes);
void rc_cuda_host_free(void *p);

/* The CUDA backend (backend.h; core/backend_cuda.c): vectors in the memory
 * of device o->ordinal, nbatch 1, name "cuda"; every geometry (borrowed): a
 * fan or parallel stack runs plane.cu's kernels on the vectors (no
 * textures or plan; the interpolation options do not apply).  Interpolation from o with the engine's meaning of AUTO:
 * RC_FP_RAYCAST is HW only when o->fp_interp is HW (AUTO is EXACT: the
 * backend cannot know whether the algorithm needs the matched pair, so a
 * caller running SART passes HW for speed); RC_BP_VOXEL and RC_FP_ROTATE are
 * EXACT only when o->bp_interp is EXACT.  reserve: the bytes of the vectors
 * the caller will allocate (rc_algo_vectors), set aside before the
 * projector's textures are planned; RC_ETOOBIG, nothing allocated, when the
 * volume would not fit in one slab.  A vector that cannot be allocated
 * later is RC_ETOOBIG too.  Every projection is timed by a pair of events
 * on the kernel stream and counted in b->stats (backend.h) at the next
 * point where the backend waits anyway (a scalar read back, a download,
 * finish): no wait of its own.  Without CUDA: RC_EUNSUPPORTED. */
int rc_backend_cuda_new(const rc_geom *g, const rc_cuda_options *o, uint64_t reserve,
			rc_backend **ret, rc_err *err);

#endif
