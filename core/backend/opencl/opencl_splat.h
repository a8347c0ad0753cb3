/*
 * opencl_splat: the splat projector pair (RC_FP_SPLAT, RC_BP_SPLAT) on an
 * OpenCL engine's device buffers (kernels/opencl/splat.cl), the same sums
 * as the CPU engine's (core/projectors/proj_splat.c).  Internal to core/:
 * the OpenCL engine owns one where the geometry suits the pair
 * (splat_dev.h's rc_dev_splat_suits) and the OpenCL backend runs it on its vectors.
 */
#ifndef RC_OPENCL_SPLAT_H
#define RC_OPENCL_SPLAT_H

#include "geometry/geometry.h"
#include "backend/opencl/opencl_util.h"

typedef struct rc_ocl_splat rc_ocl_splat;

/* The kernels of prog (built with RC_GPU = gpu) and the per-view table on
 * ctx (double where fp64). */
int rc_ocl_splat_new(cl_context ctx, cl_command_queue q, cl_program prog, int fp64, int gpu, const rc_geom *g,
		     rc_ocl_splat **ret, rc_err *err);
void rc_ocl_splat_free(rc_ocl_splat *s);

/* Views [first, last) of proj = A vol (the other views untouched).  Enqueued only. */
int rc_ocl_splat_fp(rc_ocl_splat *s, cl_mem vol, cl_mem proj, int first, int last, rc_err *err);
/* vol = A^T of views [first, last) of proj (vol zeroed when first == last),
 * or vol += it when add (the first chunk's gather adds too).  Enqueued only. */
int rc_ocl_splat_bp(rc_ocl_splat *s, cl_mem proj, cl_mem vol, int first, int last, int add, rc_err *err);

#endif
