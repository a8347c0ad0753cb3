/* opencl_tv: host side of kernels/opencl/tv.cl (opencl_tv.h). */
#include "backend/opencl/opencl_tv.h"

#include <stdlib.h>

#include "backend/opencl/engine_opencl_impl.h"

struct rc_ocl_tv {
	cl_command_queue q;
	cl_kernel k;
};

int rc_ocl_tv_new(rc_engine *e, rc_ocl_tv **ret, rc_err *err)
{
	rc_ocl_handles h;
	if (rc_ocl_engine_handles(e, &h))
		return rc_fail(err, RC_EINVAL, "execution.engine", "the OpenCL TV kernel needs an OpenCL engine");
	rc_ocl_tv *t = calloc(1, sizeof *t);
	if (!t)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the OpenCL TV kernel");
	cl_int ce;
	t->q = h.q;
	t->k = clCreateKernel(h.prog, "tv_apply", &ce);
	if (ce != CL_SUCCESS) {
		free(t);
		return rc_cl_fail(err, ce, "clCreateKernel (tv_apply)");
	}
	*ret = t;
	return 0;
}

void rc_ocl_tv_free(rc_ocl_tv *t)
{
	if (!t)
		return;
	clReleaseKernel(t->k);
	free(t);
}

int rc_ocl_tv_apply(rc_ocl_tv *t, const rc_tv_shape *s, cl_mem w, cl_mem d, cl_mem out, float eps, rc_err *err)
{
	cl_int4 n = { { s->nx, s->ny, s->nz, 0 } };
	cl_int planar = s->planar;
	cl_float eps2 = eps * eps; /* tv_host.c's eps2, rounded alike */
	cl_int e = clSetKernelArg(t->k, 0, sizeof out, &out);
	e |= clSetKernelArg(t->k, 1, sizeof w, &w);
	e |= clSetKernelArg(t->k, 2, sizeof d, &d);
	e |= clSetKernelArg(t->k, 3, sizeof n, &n);
	e |= clSetKernelArg(t->k, 4, sizeof planar, &planar);
	e |= clSetKernelArg(t->k, 5, sizeof eps2, &eps2);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clSetKernelArg (tv_apply)");
	size_t g[3] = { (size_t)s->nx, (size_t)s->ny, (size_t)s->nz };
	e = clEnqueueNDRangeKernel(t->q, t->k, 3, NULL, g, NULL, 0, NULL, NULL);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "launch of tv_apply");
}
