/*
 * elementwise_ops: the per-element formulas of the backends' vector steps
 * (backend.h's update, mul, axpy, xpay, inv_guarded, ratio, residual),
 * written once for every place that runs them:
 *
 *   host C        core/backend/vec_host.c (the host and tensor backends)
 *                 and core/backend/tensor/backend_tensor.c's column loops
 *   OpenCL C      kernels/opencl/elementwise.cl; mk/opencl.mk pastes this
 *                 file where the .cl includes it, as the runtime compiler
 *                 has no file to include
 *   CUDA          kernels/cuda/elementwise.cu (the CUDA backend's and the
 *                 tensor backend's vectors) and tensor_wmma.cu's column steps
 *
 * so every device applies the same float operations in the same order.
 * What stays with each device is the loop around a formula: the grid, the
 * view range, and the sums, whose order (float lanes added in double on
 * the host, a tree per work-group or warp on devices) is the device's.
 *
 * No fused multiply-add: a formula's product and sum are rounded apart on
 * every device.  The host compiles with -ffp-contract=off, elementwise.cl
 * pastes this file below its FP_CONTRACT OFF pragma, and CUDA, where nvcc
 * contracts by default, spells the product and sum as __fmul_rn and
 * __fadd_rn (RC_EW_MUL, RC_EW_ADD); a lone subtraction cannot contract.
 *
 * The file is plain C99 that OpenCL C and CUDA C++ also accept: no
 * includes, no types beyond float and int.  RC_EW_FN qualifies a formula:
 * static inline on the host and in OpenCL C, a forced-inline device
 * function in CUDA (also under tools/cuda-emu, whose cuda_runtime.h
 * defines RC_CUDA_EMU; include it before this file there).
 */
#ifndef RC_ELEMENTWISE_OPS_H
#define RC_ELEMENTWISE_OPS_H

#if defined(__CUDACC__) || defined(RC_CUDA_EMU)
#define RC_EW_FN __device__ __forceinline__
#define RC_EW_MUL(a, b) __fmul_rn((a), (b))
#define RC_EW_ADD(a, b) __fadd_rn((a), (b))
#else /* C11 and OpenCL C */
#define RC_EW_FN static inline
#define RC_EW_MUL(a, b) ((a) * (b))
#define RC_EW_ADD(a, b) ((a) + (b))
#endif

/* max(x, 0); a NaN becomes 0 */
RC_EW_FN float rc_ew_clamp0(float x)
{
	return x > 0.0f ? x : 0.0f;
}

/* The running maximum of a guarded inverse's first pass: x when x > m, so
 * a NaN never wins (x86's maxps(x, m) is this formula lane by lane). */
RC_EW_FN float rc_ew_max(float m, float x)
{
	return x > m ? x : m;
}

/* update: v + lambda * u * c, i.e. v + ((lambda * u) * c), then clamped at
 * 0 when nonneg (non-negative SART) */
RC_EW_FN float rc_ew_update(float v, float u, float c, float lambda, int nonneg)
{
	float x = RC_EW_ADD(v, RC_EW_MUL(RC_EW_MUL(lambda, u), c));
	return nonneg ? rc_ew_clamp0(x) : x;
}

/* mul: v * (u * c) */
RC_EW_FN float rc_ew_mul(float v, float u, float c)
{
	return RC_EW_MUL(v, RC_EW_MUL(u, c));
}

/* axpy: y + a * x */
RC_EW_FN float rc_ew_axpy(float y, float a, float x)
{
	return RC_EW_ADD(y, RC_EW_MUL(a, x));
}

/* xpay: x + a * y */
RC_EW_FN float rc_ew_xpay(float x, float a, float y)
{
	return RC_EW_ADD(x, RC_EW_MUL(a, y));
}

/* inv_guarded: 1 / x where x > eps and x > 0, else 0 (eps = rel * the
 * largest element, at least 0).  A loop of it vectorises on the host only
 * without -ftrapping-math (GCC will not if-convert a division that might
 * trap): the Makefile compiles vec_host.c with -fno-trapping-math. */
RC_EW_FN float rc_ew_inv_guarded(float x, float eps)
{
	return x > eps && x > 0.0f ? 1.0f / x : 0.0f;
}

/* residual and ratio: the residual p - e of a ray, summed squared by the
 * caller before it overwrites e */
RC_EW_FN float rc_ew_residual(float p, float e)
{
	return p - e;
}

/* residual: the weighted residual d * w that replaces e */
RC_EW_FN float rc_ew_weigh(float d, float w)
{
	return RC_EW_MUL(d, w);
}

/* ratio (MLEM's p / A x): max(p, 0) / e where e > eps, else 0 */
RC_EW_FN float rc_ew_ratio(float e, float p, float eps)
{
	return e > eps ? rc_ew_clamp0(p) / e : 0.0f;
}

#endif
