/*
 * opencl_ew: the element-wise steps of the iterative algorithms on device
 * buffers of an OpenCL engine (kernels/opencl/elementwise.cl), the device
 * side of vec_host.h's rc_v* loops, for the OpenCL backend.  Internal to
 * core/ (and its tests).
 *
 * Everything is enqueued on the engine's in-order queue; the functions that
 * return a number (dot, residual, inv_guarded's maximum) wait for it, the
 * others only enqueue.  Offsets and counts are in floats.
 */
#ifndef RC_OPENCL_EW_H
#define RC_OPENCL_EW_H

#include <stddef.h>

#include "backend/engine.h"
#include "backend/opencl/opencl_util.h"

typedef struct rc_ocl_ew rc_ocl_ew;

/* Kernels from the engine's program, sizes for this device.  e must be an
 * OpenCL engine (RC_EINVAL otherwise); it must outlive the result. */
int rc_ocl_ew_new(rc_engine *e, rc_ocl_ew **ret, rc_err *err);
void rc_ocl_ew_free(rc_ocl_ew *w);

/* a[off .. off+n) = v */
int rc_ocl_ew_fill(rc_ocl_ew *w, cl_mem a, float v, size_t off, size_t n, rc_err *err);
/* dst[0..n) = src[0..n) */
int rc_ocl_ew_copy(rc_ocl_ew *w, cl_mem dst, cl_mem src, size_t n, rc_err *err);
/* host <-> device, blocking */
int rc_ocl_ew_write(rc_ocl_ew *w, cl_mem dst, const float *src, size_t n, rc_err *err);
/* n floats at float offset off of dst from src (blocking). */
int rc_ocl_ew_write_at(rc_ocl_ew *w, cl_mem dst, size_t off, const float *src, size_t n, rc_err *err);
int rc_ocl_ew_read(rc_ocl_ew *w, cl_mem src, float *dst, size_t n, rc_err *err);

/* rc_vinv_guarded: a = a > rel * max(a, 0) && a > 0 ? 1 / a : 0 */
int rc_ocl_ew_inv_guarded(rc_ocl_ew *w, cl_mem a, size_t n, double rel, rc_err *err);
/* rc_vupdate: v += lambda * u * c, then max(v, 0) when nonneg; c is read
 * from element coff on (one block's column sums in a cache of several) */
int rc_ocl_ew_update(rc_ocl_ew *w, cl_mem v, cl_mem u, cl_mem c, size_t coff, float lambda,
		     int nonneg, size_t n, rc_err *err);
/* rc_vaxpy: y += a x */
int rc_ocl_ew_axpy(rc_ocl_ew *w, cl_mem y, float a, cl_mem x, size_t n, rc_err *err);
/* rc_vxpay: y = x + a y */
int rc_ocl_ew_xpay(rc_ocl_ew *w, cl_mem y, cl_mem x, float a, size_t n, rc_err *err);
/* *ret = a . b, summed in double */
int rc_ocl_ew_dot(rc_ocl_ew *w, cl_mem a, cl_mem b, size_t n, double *ret, rc_err *err);
/* rc_vresidual on [off, off+n): e = (p - e) * wt (wt NULL: weight 1);
 * *sum2 = sum of (p - e)^2 */
int rc_ocl_ew_residual(rc_ocl_ew *w, cl_mem e, cl_mem p, cl_mem wt, size_t off, size_t n,
		       double *sum2, rc_err *err);
/* *ret = sum of a, in double */
int rc_ocl_ew_sum(rc_ocl_ew *w, cl_mem a, size_t n, double *ret, rc_err *err);
/* rc_vratio: y = y > eps ? max(p, 0) / y : 0; *sum2 = sum (p - y)^2 before */
int rc_ocl_ew_ratio(rc_ocl_ew *w, cl_mem y, cl_mem p, float eps, size_t off, size_t n, double *sum2,
		    rc_err *err);
/* rc_vmul2: v *= u * c */
int rc_ocl_ew_mul2(rc_ocl_ew *w, cl_mem v, cl_mem u, cl_mem c, size_t n, rc_err *err);

#endif
