/*
 * opencl_tv: the total-variation operator of tv_host.h on device buffers
 * of an OpenCL engine (kernels/opencl/tv.cl), the OpenCL backend's
 * tv_apply: no volume crosses to the host.  Internal to core/ (and its
 * tests).  Enqueued on the engine's in-order queue only.
 */
#ifndef RC_OPENCL_TV_H
#define RC_OPENCL_TV_H

#include "backend/engine.h"
#include "backend/opencl/opencl_util.h"
#include "backend/tv_host.h"

typedef struct rc_ocl_tv rc_ocl_tv;

/* The kernel from e's program; e must be an OpenCL engine (RC_EINVAL
 * otherwise) and outlive the result. */
int rc_ocl_tv_new(rc_engine *e, rc_ocl_tv **ret, rc_err *err);
void rc_ocl_tv_free(rc_ocl_tv *t);

/* out = D^T W(w) D d over volumes of shape s (out distinct from w and d). */
int rc_ocl_tv_apply(rc_ocl_tv *t, const rc_tv_shape *s, cl_mem w, cl_mem d, cl_mem out, float eps, rc_err *err);

#endif
