/*
 * cuda_splat: the splat projector pair (RC_FP_SPLAT, RC_BP_SPLAT) on device
 * buffers of the CUDA engine and backend (kernels/cuda/splat.cu), the same
 * sums as the CPU engine's.  Internal to core/backend/cuda.
 */
#ifndef RC_CUDA_SPLAT_H
#define RC_CUDA_SPLAT_H

#ifdef RC_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "geometry/geometry.h"
#include "util/rc_error.h"

typedef struct cu_splat cu_splat;

/* The per-view table on the current device. */
int cu_splat_new(const rc_geom *g, cu_splat **ret, rc_err *err);
void cu_splat_free(cu_splat *s);

/* Views [first, last) of dproj (the whole stack, device) = A dvol; the
 * other views untouched.  Queued on st only. */
int cu_splat_fp(cu_splat *s, const float *dvol, float *dproj, int first, int last, cudaStream_t st, rc_err *err);
/* dvol = A^T of views [first, last) of dproj (0 when first == last), or
 * dvol += it when add.  Queued on st only. */
int cu_splat_bp(cu_splat *s, const float *dproj, float *dvol, int first, int last, int add, cudaStream_t st,
		rc_err *err);

#endif
#endif
