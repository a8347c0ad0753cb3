/*
 * opencl_ew: host side of kernels/opencl/elementwise.cl (opencl_ew.h).
 *
 * One work-group size for every kernel: the largest power of two up to 256
 * that the device and each kernel accept (the reductions' tree needs a
 * power of two).  Reductions launch at most max_groups groups (a few per
 * compute unit: enough to fill a GPU, few enough that the host's share of
 * the sum, one double per group, stays negligible) and read the partials
 * back with a blocking read: the read is also the wait.
 */
#include "backend/opencl/opencl_ew.h"

#include <stdlib.h>
#include <string.h>

#include "backend/opencl/engine_opencl_impl.h"

enum { EW_UPDATE = 0, EW_INV, EW_AXPY, EW_XPAY, EW_DOT, EW_RESIDUAL, EW_MAX, EW_SUM, EW_RATIO, EW_MUL2, EW_COUNT };
static const char *const ew_names[EW_COUNT] = { "ew_update", "ew_inv_guarded", "ew_axpy",  "ew_xpay",
						"ew_dot",    "ew_residual",    "ew_max",   "ew_sum",
						"ew_ratio",  "ew_mul2" };

struct rc_ocl_ew {
	cl_command_queue q;
	cl_kernel k[EW_COUNT];
	size_t local;      /* work-group size, a power of two */
	size_t max_groups; /* of a reduction */
	size_t acc;        /* bytes of a partial sum: 8 (fp64) or 4 */
	cl_mem partial;    /* max_groups partial sums (or maxima) */
	void *host;        /* their host copy */
};

#define SETARG(kern, i, v) e |= clSetKernelArg(kern, i, sizeof(v), &(v))

void rc_ocl_ew_free(rc_ocl_ew *w)
{
	if (!w)
		return;
	for (int k = 0; k < EW_COUNT; k++)
		if (w->k[k])
			clReleaseKernel(w->k[k]);
	if (w->partial)
		clReleaseMemObject(w->partial);
	free(w->host);
	free(w);
}

int rc_ocl_ew_new(rc_engine *eng, rc_ocl_ew **ret, rc_err *err)
{
	rc_ocl_handles h;
	if (rc_ocl_engine_handles(eng, &h))
		return rc_fail(err, RC_EINVAL, "execution.engine", "the OpenCL element-wise kernels need an OpenCL engine");
	rc_ocl_ew *w = calloc(1, sizeof *w);
	if (!w)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the OpenCL element-wise kernels");
	int rc = 0;
	cl_int e;
	w->q = h.q;
	w->acc = h.fp64 ? sizeof(double) : sizeof(float);
	size_t dev_max = 0;
	cl_ulong lmem = 0;
	cl_uint cu = 0;
	clGetDeviceInfo(h.dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof dev_max, &dev_max, NULL);
	clGetDeviceInfo(h.dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
	clGetDeviceInfo(h.dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
	size_t cap = 256;
	if (dev_max && dev_max < cap)
		cap = dev_max;
	if (lmem && lmem / w->acc < cap)
		cap = (size_t)(lmem / w->acc);
	for (int k = 0; k < EW_COUNT; k++) {
		w->k[k] = clCreateKernel(h.prog, ew_names[k], &e);
		if (e != CL_SUCCESS) {
			rc = rc_cl_fail(err, e, "clCreateKernel (element-wise)");
			goto fail;
		}
		size_t kwg = 0;
		if (clGetKernelWorkGroupInfo(w->k[k], h.dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) ==
			    CL_SUCCESS && kwg && kwg < cap)
			cap = kwg;
	}
	w->local = 1;
	while (w->local * 2 <= cap)
		w->local *= 2;
	w->max_groups = (size_t)(cu ? cu : 1) * (h.gpu ? 32 : 8);
	if (w->max_groups > 4096)
		w->max_groups = 4096;
	w->partial = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, w->max_groups * w->acc, NULL, &e);
	if (e != CL_SUCCESS) {
		rc = rc_cl_fail(err, e, "clCreateBuffer (partial sums)");
		goto fail;
	}
	w->host = malloc(w->max_groups * w->acc);
	if (!w->host) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the partial sums");
		goto fail;
	}
	*ret = w;
	return 0;
fail:
	rc_ocl_ew_free(w);
	return rc;
}

static int launch_map(rc_ocl_ew *w, int k, size_t n, rc_err *err)
{
	if (n == 0)
		return 0;
	size_t g = (n + w->local - 1) / w->local * w->local;
	cl_int e = clEnqueueNDRangeKernel(w->q, w->k[k], 1, NULL, &g, &w->local, 0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_fail(err, RC_EDEVICE, "", "OpenCL launch of %s failed: %s (%d)", ew_names[k],
			       rc_cl_strerror(e), (int)e);
	return 0;
}

/* Launches reduction k over n elements and reads back its partials;
 * *groups = how many. */
static int launch_reduce(rc_ocl_ew *w, int k, size_t n, size_t *groups, rc_err *err)
{
	size_t ng = (n + w->local - 1) / w->local;
	if (ng > w->max_groups)
		ng = w->max_groups;
	if (ng < 1)
		ng = 1;
	size_t g = ng * w->local;
	cl_int e = clEnqueueNDRangeKernel(w->q, w->k[k], 1, NULL, &g, &w->local, 0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_fail(err, RC_EDEVICE, "", "OpenCL launch of %s failed: %s (%d)", ew_names[k],
			       rc_cl_strerror(e), (int)e);
	size_t elem = k == EW_MAX ? sizeof(float) : w->acc;
	e = clEnqueueReadBuffer(w->q, w->partial, CL_TRUE, 0, ng * elem, w->host, 0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "read of the partial sums");
	*groups = ng;
	return 0;
}

static double sum_partials(const rc_ocl_ew *w, size_t ng)
{
	double s = 0.0;
	for (size_t i = 0; i < ng; i++)
		s += w->acc == sizeof(double) ? ((const double *)w->host)[i] : ((const float *)w->host)[i];
	return s;
}

int rc_ocl_ew_fill(rc_ocl_ew *w, cl_mem a, float v, size_t off, size_t n, rc_err *err)
{
	if (n == 0)
		return 0;
	cl_int e = clEnqueueFillBuffer(w->q, a, &v, sizeof v, off * sizeof(float), n * sizeof(float), 0, NULL, NULL);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clEnqueueFillBuffer");
}

int rc_ocl_ew_copy(rc_ocl_ew *w, cl_mem dst, cl_mem src, size_t n, rc_err *err)
{
	cl_int e = clEnqueueCopyBuffer(w->q, src, dst, 0, 0, n * sizeof(float), 0, NULL, NULL);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clEnqueueCopyBuffer");
}

int rc_ocl_ew_write(rc_ocl_ew *w, cl_mem dst, const float *src, size_t n, rc_err *err)
{
	cl_int e = clEnqueueWriteBuffer(w->q, dst, CL_TRUE, 0, n * sizeof(float), src, 0, NULL, NULL);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "write to the device");
}

int rc_ocl_ew_write_at(rc_ocl_ew *w, cl_mem dst, size_t off, const float *src, size_t n, rc_err *err)
{
	cl_int e = clEnqueueWriteBuffer(w->q, dst, CL_TRUE, off * sizeof(float), n * sizeof(float), src, 0, NULL, NULL);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "write to the device");
}

int rc_ocl_ew_read(rc_ocl_ew *w, cl_mem src, float *dst, size_t n, rc_err *err)
{
	cl_int e = clEnqueueReadBuffer(w->q, src, CL_TRUE, 0, n * sizeof(float), dst, 0, NULL, NULL);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "read from the device");
}

int rc_ocl_ew_inv_guarded(rc_ocl_ew *w, cl_mem a, size_t n, double rel, rc_err *err)
{
	cl_kernel k = w->k[EW_MAX];
	cl_ulong nn = n;
	cl_int e = 0;
	SETARG(k, 0, a);
	SETARG(k, 1, nn);
	e |= clSetKernelArg(k, 2, w->local * sizeof(float), NULL);
	SETARG(k, 3, w->partial);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (ew_max)");
	size_t ng;
	int rc = launch_reduce(w, EW_MAX, n, &ng, err);
	if (rc)
		return rc;
	float mx = 0.0f;
	for (size_t i = 0; i < ng; i++) {
		float v = ((const float *)w->host)[i];
		mx = v > mx ? v : mx;
	}
	float eps = (float)(rel * mx);
	k = w->k[EW_INV];
	e = 0;
	SETARG(k, 0, a);
	SETARG(k, 1, eps);
	SETARG(k, 2, nn);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (ew_inv_guarded)");
	return launch_map(w, EW_INV, n, err);
}

int rc_ocl_ew_update(rc_ocl_ew *w, cl_mem v, cl_mem u, cl_mem c, size_t coff, float lambda,
		     int nonneg, size_t n, rc_err *err)
{
	cl_kernel k = w->k[EW_UPDATE];
	cl_ulong nn = n, co = coff;
	cl_int nonneg_ = nonneg != 0, e = 0;
	SETARG(k, 0, v);
	SETARG(k, 1, u);
	SETARG(k, 2, c);
	SETARG(k, 3, co);
	SETARG(k, 4, lambda);
	SETARG(k, 5, nonneg_);
	SETARG(k, 6, nn);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (ew_update)");
	return launch_map(w, EW_UPDATE, n, err);
}

static int axpy_like(rc_ocl_ew *w, int kk, cl_mem y, float a, cl_mem x, size_t n, rc_err *err)
{
	cl_kernel k = w->k[kk];
	cl_ulong nn = n;
	cl_int e = 0;
	SETARG(k, 0, y);
	if (kk == EW_AXPY) {
		SETARG(k, 1, a);
		SETARG(k, 2, x);
	} else {
		SETARG(k, 1, x);
		SETARG(k, 2, a);
	}
	SETARG(k, 3, nn);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, kk == EW_AXPY ? "clSetKernelArg (ew_axpy)" : "clSetKernelArg (ew_xpay)");
	return launch_map(w, kk, n, err);
}

int rc_ocl_ew_axpy(rc_ocl_ew *w, cl_mem y, float a, cl_mem x, size_t n, rc_err *err)
{
	return axpy_like(w, EW_AXPY, y, a, x, n, err);
}

int rc_ocl_ew_xpay(rc_ocl_ew *w, cl_mem y, cl_mem x, float a, size_t n, rc_err *err)
{
	return axpy_like(w, EW_XPAY, y, a, x, n, err);
}

int rc_ocl_ew_dot(rc_ocl_ew *w, cl_mem a, cl_mem b, size_t n, double *ret, rc_err *err)
{
	cl_kernel k = w->k[EW_DOT];
	cl_ulong nn = n;
	cl_int e = 0;
	SETARG(k, 0, a);
	SETARG(k, 1, b);
	SETARG(k, 2, nn);
	e |= clSetKernelArg(k, 3, w->local * w->acc, NULL);
	SETARG(k, 4, w->partial);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (ew_dot)");
	size_t ng;
	int rc = launch_reduce(w, EW_DOT, n, &ng, err);
	if (!rc)
		*ret = sum_partials(w, ng);
	return rc;
}

int rc_ocl_ew_residual(rc_ocl_ew *w, cl_mem er, cl_mem p, cl_mem wt, size_t off, size_t n,
		       double *sum2, rc_err *err)
{
	cl_kernel k = w->k[EW_RESIDUAL];
	cl_ulong oo = off, nn = n;
	cl_int weighted = wt != NULL, e = 0;
	cl_mem wbuf = wt ? wt : er; /* any valid buffer: not read unweighted */
	SETARG(k, 0, er);
	SETARG(k, 1, p);
	SETARG(k, 2, wbuf);
	SETARG(k, 3, weighted);
	SETARG(k, 4, oo);
	SETARG(k, 5, nn);
	e |= clSetKernelArg(k, 6, w->local * w->acc, NULL);
	SETARG(k, 7, w->partial);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (ew_residual)");
	size_t ng;
	int rc = launch_reduce(w, EW_RESIDUAL, n, &ng, err);
	if (!rc)
		*sum2 = sum_partials(w, ng);
	return rc;
}

int rc_ocl_ew_sum(rc_ocl_ew *w, cl_mem a, size_t n, double *ret, rc_err *err)
{
	cl_kernel k = w->k[EW_SUM];
	cl_ulong nn = n;
	cl_int e = 0;
	SETARG(k, 0, a);
	SETARG(k, 1, nn);
	e |= clSetKernelArg(k, 2, w->local * w->acc, NULL);
	SETARG(k, 3, w->partial);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (ew_sum)");
	size_t ng;
	int rc = launch_reduce(w, EW_SUM, n, &ng, err);
	if (!rc)
		*ret = sum_partials(w, ng);
	return rc;
}

int rc_ocl_ew_ratio(rc_ocl_ew *w, cl_mem y, cl_mem p, float eps, size_t off, size_t n, double *sum2,
		    rc_err *err)
{
	cl_kernel k = w->k[EW_RATIO];
	cl_ulong oo = off, nn = n;
	cl_int e = 0;
	if (!n) {
		*sum2 = 0.0;
		return 0;
	}
	SETARG(k, 0, y);
	SETARG(k, 1, p);
	SETARG(k, 2, eps);
	SETARG(k, 3, oo);
	SETARG(k, 4, nn);
	e |= clSetKernelArg(k, 5, w->local * w->acc, NULL);
	SETARG(k, 6, w->partial);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (ew_ratio)");
	size_t ng;
	int rc = launch_reduce(w, EW_RATIO, n, &ng, err);
	if (!rc)
		*sum2 = sum_partials(w, ng);
	return rc;
}

int rc_ocl_ew_mul2(rc_ocl_ew *w, cl_mem v, cl_mem u, cl_mem c, size_t n, rc_err *err)
{
	cl_kernel k = w->k[EW_MUL2];
	cl_ulong nn = n;
	cl_int e = 0;
	SETARG(k, 0, v);
	SETARG(k, 1, u);
	SETARG(k, 2, c);
	SETARG(k, 3, nn);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (ew_mul2)");
	return launch_map(w, EW_MUL2, n, err);
}
