/*
 * engine_cuda: NVIDIA GPUs through the CUDA runtime.
 *
 * Two ways in:
 *  - rc_engine_cuda_new: one more rc_engine (engine.h semantics exactly), so
 *    the planner can give a GPU any share of any task.  Each call uploads its
 *    inputs (the volume as a 3-D texture, projections in batches of views
 *    into layered 2-D textures, uploads overlapped with the kernels on two
 *    streams) and downloads its result.
 *  - rc_cuda_run_algo: a whole SART / SIRT / CGLS run on one GPU with every
 *    buffer resident and the element-wise steps as kernels; recon.c calls it
 *    for execution.engine = "cuda" (FDK: use the engine through rc_algo_run,
 *    the filter stays on the host and the back projection runs here).
 *
 * Memory: the bytes a call needs are computed before anything is allocated
 * and compared with the free device memory (cudaMemGetInfo, capped by
 * rc_cuda_options.mem_budget); an engine call that does not fit runs the
 * volume in z-slabs, a resident run that does not fit is refused with
 * RC_ETOOBIG (recon.c then falls back to the engine path).
 *
 * Builds without nvcc (RC_HAVE_CUDA undefined) keep every function: the
 * count is 0 and the rest return RC_EUNSUPPORTED with a message saying the
 * build has no CUDA.  docs/cuda.md has the kernels' design and numbers.
 */
#ifndef RC_ENGINE_CUDA_H
#define RC_ENGINE_CUDA_H

#include <stdint.h>

#include "algo.h"
#include "engine.h"

/* Interpolation of the texture reads. */
typedef enum rc_cuda_interp {
	/* The fast choice wherever it is safe: HW for RC_BP_VOXEL, RC_FP_ROTATE
	 * and the forward projection of the resident SART; EXACT for the
	 * engine's RC_FP_RAYCAST (engine.h promises RC_BP_MATCHED is its exact
	 * adjoint, and the engine cannot know whether CGLS is calling) and for
	 * the resident SIRT and CGLS. */
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
	rc_cuda_interp fp_interp; /* RC_FP_RAYCAST; CGLS and SIRT always EXACT */
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
 * (cone and matrices geometries; fan/parallel return RC_EUNSUPPORTED). */
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

/* 1 when rc_cuda_run_algo runs this algorithm on this geometry. */
int rc_cuda_algo_supported(const rc_algo_params *p, const rc_geom *g);

/* Bytes rc_cuda_run_algo needs on the device for this job (0 if unsupported). */
uint64_t rc_cuda_algo_bytes(const rc_algo_params *p, const rc_geom *g);

/* A whole run resident on one GPU; same contract as rc_algo_run (vol
 * overwritten, progress and cancel once per iteration, RC_ECANCELLED leaves
 * the last complete iterate).  RC_ETOOBIG when it does not fit (nothing was
 * run: fall back to rc_algo_run over a CUDA engine, which uses slabs);
 * RC_EUNSUPPORTED for algorithms or geometries it does not run.  o may be
 * NULL (defaults). */
int rc_cuda_run_algo(const rc_algo_params *p, const rc_geom *g,
		     const rc_cuda_options *o, const float *proj, float *vol,
		     const rc_algo_hooks *hooks, rc_err *err);

#endif
