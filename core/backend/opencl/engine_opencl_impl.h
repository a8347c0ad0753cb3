/*
 * engine_opencl_impl: what the OpenCL backend (backend_opencl.c,
 * opencl_ew.c) needs from an open OpenCL engine, internal to core/ and its
 * tests: the engine's context, queue and program (elementwise.cl is built
 * into the same program as the projectors), its two work buffers, and the
 * projectors on device buffers, so a run never moves a volume or a stack
 * through the host between iterations.
 */
#ifndef RC_ENGINE_OPENCL_IMPL_H
#define RC_ENGINE_OPENCL_IMPL_H

#include "backend/engine.h"
#include "backend/opencl/opencl_splat.h"
#include "backend/opencl/opencl_util.h"

typedef struct rc_ocl_handles {
	cl_context ctx;
	cl_command_queue q; /* in order: launches need no events between them */
	cl_device_id dev;
	cl_program prog;
	cl_mem vol;         /* the engine's volume buffer (nx*ny*nz floats) */
	cl_mem proj;        /* the engine's projection buffer (the whole stack) */
	int fp64;           /* the program was built with RC_FP64=1 */
	int gpu;            /* GPU variant */
} rc_ocl_handles;

/* Fills h for an OpenCL engine; RC_EINVAL (nothing filled) for any other. */
int rc_ocl_engine_handles(rc_engine *e, rc_ocl_handles *h);

/* The engine's splat pair (opencl_splat.h), NULL where the geometry does
 * not suit it (engine.h's splat is then 0). */
rc_ocl_splat *rc_ocl_engine_splat(rc_engine *e);

/* RC_FP_RAYCAST from the device buffer vol into views [first, last) of the
 * device buffer proj (other views untouched; a fan or parallel stack:
 * those views of every slice, Joseph's fp_plane).  Enqueued only; the
 * engine's images, if it uses them, are refreshed from the buffer first. */
int rc_ocl_forward_dev(rc_engine *e, cl_mem vol, cl_mem proj, int first, int last, rc_err *err);

/* vol = B_kind of views [first, last) of proj, both device buffers (a fan
 * or parallel stack: bp_plane.cl's FBP back projection or fp_plane's
 * transpose; RC_BP_SPLAT: the splat pair's, where the engine has it).
 * Enqueued only. */
int rc_ocl_back_dev(rc_engine *e, rc_bp_kind kind, cl_mem proj, cl_mem vol, int first, int last,
		    rc_err *err);
/* vol += B_kind of views [first, last) of proj (engine.h's back_add on
 * device buffers).  Enqueued only. */
int rc_ocl_back_dev_add(rc_engine *e, rc_bp_kind kind, cl_mem proj, cl_mem vol, int first, int last,
			rc_err *err);

#endif
