/*
 * elementwise: the element-wise calls of the OpenCL backend
 * (core/backend/opencl/backend_opencl.c through opencl_ew.c), each the loop of
 * core/backend/vec_host.c with the same float operations in the same order
 * (FP_CONTRACT off, so no fused multiply-add the host loops lack).
 *
 * Map kernels take one element per work-item, the global size rounded up
 * to the work-group size.  Reductions (dot products, the residual, the
 * maximum of rc_vinv_guarded) give each work-item a share of the array,
 * reduce the work-group in local memory (a power-of-two tree) and write one
 * partial per work-group; the host adds the partials in double.  The share
 * is strided by the global size on GPUs (neighbouring work-items read
 * neighbouring words: coalesced) and one contiguous run on CPUs, where the
 * runtime runs a group's work-items one after the other and a stride of
 * the global size would touch a new page per element (PoCL: 17 ms for a
 * 768000-element residual strided, 20x the host loop).  With RC_FP64 (cl_khr_fp64, set by the engine) the sums are
 * double from the first term, as the CPU's blocks of 4096 floats are added
 * in double; without it they are float (GPUs without fp64: the sums then
 * carry about 1e-6 relative error per 1e6 terms).
 *
 * Indices are ulong: a 2048^2 x 1000 stack has more than 2^32 elements.
 *
 * The per-element formulas are core/backend/elementwise_ops.h's, shared
 * with the host and CUDA; the runtime compiler has no file to include, so
 * mk/opencl.mk pastes the header in place of its #include when it embeds
 * this file.  It comes after the pragma, which then covers its formulas.
 */
#pragma OPENCL FP_CONTRACT OFF

#include "backend/elementwise_ops.h"

#ifndef RC_FP64
#define RC_FP64 0
#endif
#if RC_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double rc_acc;
#else
typedef float rc_acc;
#endif

/* v += lambda * u * c, then max(v, 0) when nonneg (rc_vupdate); c from
 * element coff on (SART's per-subset column sums share one buffer) */
__kernel void ew_update(__global float *restrict v, __global const float *restrict u,
			__global const float *restrict c, ulong coff, float lambda, int nonneg, ulong n)
{
	ulong i = get_global_id(0);
	if (i >= n)
		return;
	v[i] = rc_ew_update(v[i], u[i], c[coff + i], lambda, nonneg);
}

/* a = a > eps && a > 0 ? 1 / a : 0 (rc_vinv_guarded, eps from ew_max).
 * OpenCL allows 2.5 ulp for a float division without
 * -cl-fp32-correctly-rounded-divide-sqrt: within the float rounding the
 * paths are compared to, and the option would slow the projectors too. */
__kernel void ew_inv_guarded(__global float *restrict a, float eps, ulong n)
{
	ulong i = get_global_id(0);
	if (i >= n)
		return;
	a[i] = rc_ew_inv_guarded(a[i], eps);
}

/* y += a * x (rc_vaxpy) */
__kernel void ew_axpy(__global float *restrict y, float a, __global const float *restrict x, ulong n)
{
	ulong i = get_global_id(0);
	if (i >= n)
		return;
	y[i] = rc_ew_axpy(y[i], a, x[i]);
}

/* y = x + a * y (rc_vxpay) */
__kernel void ew_xpay(__global float *restrict y, __global const float *restrict x, float a, ulong n)
{
	ulong i = get_global_id(0);
	if (i >= n)
		return;
	y[i] = rc_ew_xpay(x[i], a, y[i]);
}

/* i over this work-item's share of [0, n) (see the top) */
#if RC_GPU
#define FOR_MY_SHARE(i, n) for (ulong i = get_global_id(0); i < (n); i += get_global_size(0))
#else
#define FOR_MY_SHARE(i, n)                                                                  \
	for (ulong c_ = ((n) + get_global_size(0) - 1) / get_global_size(0), i = get_global_id(0) * c_, \
		   e_ = min((ulong)(n), i + c_);                                                \
	     i < e_; i++)
#endif

/* the work-group's sum of v into partial[group] (local size a power of two) */
static void group_sum(rc_acc v, __local rc_acc *scratch, __global rc_acc *partial)
{
	size_t l = get_local_id(0);
	scratch[l] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
		if (l < s)
			scratch[l] += scratch[l + s];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (l == 0)
		partial[get_group_id(0)] = scratch[0];
}

/* partial sums of a . b */
__kernel void ew_dot(__global const float *restrict a, __global const float *restrict b, ulong n,
		     __local rc_acc *scratch, __global rc_acc *partial)
{
	rc_acc s = 0;
	FOR_MY_SHARE(i, n)
		s += (rc_acc)a[i] * (rc_acc)b[i];
	group_sum(s, scratch, partial);
}

/* partial sums of a */
__kernel void ew_sum(__global const float *restrict a, ulong n, __local rc_acc *scratch,
		     __global rc_acc *partial)
{
	rc_acc s = 0;
	FOR_MY_SHARE(i, n)
		s += (rc_acc)a[i];
	group_sum(s, scratch, partial);
}

/* Over elements [off, off + n): d = p - e, e = d * w (weighted) or d;
 * partial sums of d^2 (rc_vresidual on one contiguous block of views). */
__kernel void ew_residual(__global float *restrict e, __global const float *restrict p,
			  __global const float *restrict w, int weighted, ulong off, ulong n,
			  __local rc_acc *scratch, __global rc_acc *partial)
{
	rc_acc s = 0;
	FOR_MY_SHARE(i, n) {
		ulong k = off + i;
		float d = rc_ew_residual(p[k], e[k]);
		s += (rc_acc)d * (rc_acc)d;
		e[k] = weighted ? rc_ew_weigh(d, w[k]) : d;
	}
	group_sum(s, scratch, partial);
}

/* over [off, off + n): e = e > eps ? max(p, 0) / e : 0; partial sums of
 * (p - e)^2 taken before (rc_vratio, MLEM's p / A x) */
__kernel void ew_ratio(__global float *restrict e, __global const float *restrict p, float eps, ulong off,
		       ulong n, __local rc_acc *scratch, __global rc_acc *partial)
{
	rc_acc s = 0;
	FOR_MY_SHARE(i, n) {
		ulong k = off + i;
		float x = e[k], pv = p[k];
		float d = rc_ew_residual(pv, x);
		s += (rc_acc)d * (rc_acc)d;
		e[k] = rc_ew_ratio(x, pv, eps);
	}
	group_sum(s, scratch, partial);
}

/* v *= u * c (rc_vmul2) */
__kernel void ew_mul2(__global float *restrict v, __global const float *restrict u,
		      __global const float *restrict c, ulong n)
{
	ulong i = get_global_id(0);
	if (i >= n)
		return;
	v[i] = rc_ew_mul(v[i], u[i], c[i]);
}

/* partial maxima of max(0, a) (the start value of rc_vinv_guarded's max) */
__kernel void ew_max(__global const float *restrict a, ulong n, __local float *scratch,
		     __global float *partial)
{
	float m = 0.0f;
	FOR_MY_SHARE(i, n)
		m = rc_ew_max(m, a[i]);
	size_t l = get_local_id(0);
	scratch[l] = m;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
		if (l < s)
			scratch[l] = rc_ew_max(scratch[l], scratch[l + s]);
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (l == 0)
		partial[get_group_id(0)] = scratch[0];
}
