/*
 * resident: a whole run of an algorithm on one device backend, every
 * vector resident on the device (the OpenCL backend of engine_opencl.h,
 * the CUDA backend of engine_cuda.h): the algorithm's vectors are checked
 * against the device's memory before anything is allocated, and the
 * algorithm-dependent choices (the CUDA interpolation) are made here, above
 * both the algorithms and the backends.
 *
 * Contract of the runs: that of rc_algo_run (vol overwritten, progress and
 * cancel once per iteration and per subset, RC_ECANCELLED leaves the last
 * complete iterate); vol is written when the run ends.  RC_ETOOBIG when
 * the device cannot hold the run (nothing was run: use rc_algo_run over
 * the device's engine, which uploads per call and, for CUDA, uses slabs).
 * Fan and parallel stacks run resident too (the 2-D projectors on the
 * device's buffers, one batch as on the host backend).
 */
#ifndef RC_RESIDENT_H
#define RC_RESIDENT_H

#include <stdint.h>

#include "algo/algo.h"
#include "backend/cuda/engine_cuda.h"
#include "backend/opencl/engine_opencl.h"

/* 1 when the resident OpenCL run takes p on g: every algorithm on every
 * geometry. */
int rc_opencl_algo_supported(const rc_algo_params *p, const rc_geom *g);
/* 0 when a resident run of p fits e's device (rc_algo_vectors and the
 * engine's own buffers); RC_ETOOBIG or RC_EUNSUPPORTED otherwise. */
int rc_opencl_run_fits(rc_engine *e, const rc_algo_params *p, rc_err *err);
/* rc_algo_run_on over the OpenCL backend of e, after rc_opencl_run_fits. */
int rc_opencl_run_algo(rc_engine *e, const rc_algo_params *p, const float *proj, float *vol,
		       const rc_algo_hooks *hooks, rc_err *err);

/* 1 when the resident CUDA run takes p on g: every algorithm on every
 * geometry the CUDA engine takes, in a build with CUDA. */
int rc_cuda_algo_supported(const rc_algo_params *p, const rc_geom *g);
/* The backend of a resident CUDA run of p: AUTO interpolation resolved for
 * the algorithm (SART's forward HW; the matched pair of SIRT, CGLS and MLEM
 * EXACT, engine_cuda.h), the vectors set aside (rc_backend_cuda_new).  For
 * callers that read the backend's stats after the run.  o may be NULL. */
int rc_cuda_resident_open(const rc_algo_params *p, const rc_geom *g, const rc_cuda_options *o, rc_backend **ret,
			  rc_err *err);
/* rc_algo_run_on over rc_cuda_resident_open's backend. */
int rc_cuda_run_algo(const rc_algo_params *p, const rc_geom *g, const rc_cuda_options *o, const float *proj,
		     float *vol, const rc_algo_hooks *hooks, rc_err *err);

#endif
