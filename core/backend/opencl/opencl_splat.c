/*
 * opencl_splat: host side of kernels/opencl/splat.cl (opencl_splat.h).
 *
 * The per-view table carries what the CPU engine computes in double per
 * view (P, the gain's c0, cu, cv, whether the view is a cone view); where
 * the device has no fp64 it goes as float and the column set-up rounds as
 * float (no such device has been tested: PoCL has fp64).  Forward: fill
 * the views with 0, scatter (RC_OCL_SPLAT_CHUNK views per launch), multiply
 * by the gain.  Back: per RC_OCL_SPLAT_CHUNK views, the views times the
 * gain into a buffer of that many views, then one gathering launch,
 * accumulating.
 */
#include "backend/opencl/opencl_splat.h"

#include <stdlib.h>

#include "backend/splat_dev.h"
#include "projectors/proj_cpu.h"

#define RC_SPLAT_ZC 8 /* kernels/opencl/splat.cl */
/* views per launch: a launch's work stays short (a display watchdog) */
#define RC_OCL_SPLAT_CHUNK 32

struct rc_ocl_splat {
	cl_context ctx;
	cl_command_queue q;
	cl_kernel fp, gain, gained, bp;
	cl_mem tab;
	cl_mem gp; /* RC_OCL_SPLAT_CHUNK views times the gain: the back projection's input */
	cl_int4 n;
	int nu, nv, nviews;
	int gpu; /* the program's variant (RC_GPU) */
};

static int upload_table(rc_ocl_splat *s, const rc_geom *g, int fp64, rc_err *err)
{
	size_t n;
	double *t = rc_splat_dev_table(g, &n);
	if (!t)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the splat pair's view table");
	size_t bytes = n * (fp64 ? sizeof(double) : sizeof(float));
	if (!fp64) { /* in place: floats are no wider than doubles */
		float *f = (float *)t;
		for (size_t i = 0; i < n; i++)
			f[i] = (float)t[i];
	}
	cl_int e;
	s->tab = clCreateBuffer(s->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, t, &e);
	free(t);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clCreateBuffer (splat view table)");
}

int rc_ocl_splat_new(cl_context ctx, cl_command_queue q, cl_program prog, int fp64, int gpu, const rc_geom *g,
		     rc_ocl_splat **ret, rc_err *err)
{
	rc_ocl_splat *s = calloc(1, sizeof *s);
	if (!s)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the OpenCL splat pair");
	const rc_volume_desc *v = rc_geom_volume(g);
	s->ctx = ctx;
	s->q = q;
	s->gpu = gpu;
	s->n = (cl_int4){ { v->nx, v->ny, v->nz, 0 } };
	s->nu = rc_geom_detector(g)->nu;
	s->nv = rc_geom_detector(g)->nv;
	s->nviews = rc_geom_nviews(g);
	cl_int e;
	int rc = 0;
	s->fp = clCreateKernel(prog, "fp_splat", &e);
	if (e == CL_SUCCESS)
		s->gain = clCreateKernel(prog, "splat_gain", &e);
	if (e == CL_SUCCESS)
		s->gained = clCreateKernel(prog, "splat_gained", &e);
	if (e == CL_SUCCESS)
		s->bp = clCreateKernel(prog, "bp_splat", &e);
	if (e == CL_SUCCESS)
		s->gp = clCreateBuffer(ctx, CL_MEM_READ_WRITE,
				       (size_t)RC_OCL_SPLAT_CHUNK * (size_t)s->nu * (size_t)s->nv * sizeof(float), NULL, &e);
	if (e != CL_SUCCESS)
		rc = rc_cl_fail(err, e, "clCreateKernel (splat pair)");
	if (!rc)
		rc = upload_table(s, g, fp64, err);
	if (rc) {
		rc_ocl_splat_free(s);
		return rc;
	}
	*ret = s;
	return 0;
}

void rc_ocl_splat_free(rc_ocl_splat *s)
{
	if (!s)
		return;
	cl_kernel ks[4] = { s->fp, s->gain, s->gained, s->bp };
	for (int i = 0; i < 4; i++)
		if (ks[i])
			clReleaseKernel(ks[i]);
	if (s->tab)
		clReleaseMemObject(s->tab);
	if (s->gp)
		clReleaseMemObject(s->gp);
	free(s);
}

#define SETARG(kern, i, v) e |= clSetKernelArg(kern, i, sizeof(v), &(v))

static int run(rc_ocl_splat *s, cl_kernel k, const size_t g[3], const char *what, rc_err *err)
{
	cl_int e = clEnqueueNDRangeKernel(s->q, k, 3, NULL, g, NULL, 0, NULL, NULL);
	return e == CL_SUCCESS ? 0 : rc_fail(err, RC_EDEVICE, "", "OpenCL launch of %s failed: %s (%d)", what,
					     rc_cl_strerror(e), (int)e);
}

static int check(const rc_ocl_splat *s, int first, int last, rc_err *err)
{
	if (!s)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "voxels project more than %.1f pixel apart on this geometry (or it is not a cone or "
			       "matrices geometry with a flat detector): the OpenCL engine does not splat it",
			       RC_SPLAT_MAX_STEP);
	if (first < 0 || last > s->nviews || first > last)
		return rc_fail(err, RC_EINVAL, "", "view range [%d, %d) is outside 0..%d", first, last, s->nviews);
	return 0;
}

int rc_ocl_splat_fp(rc_ocl_splat *s, cl_mem vol, cl_mem proj, int first, int last, rc_err *err)
{
	int rc = check(s, first, last, err);
	if (rc || first == last)
		return rc;
	const size_t view = (size_t)s->nu * (size_t)s->nv;
	float zero = 0.0f;
	cl_int e = clEnqueueFillBuffer(s->q, proj, &zero, sizeof zero, (size_t)first * view * sizeof(float),
				       (size_t)(last - first) * view * sizeof(float), 0, NULL, NULL);
	if (e != CL_SUCCESS)
		return rc_cl_fail(err, e, "clEnqueueFillBuffer (splat views)");
	for (int c = first; c < last && !rc; c += RC_OCL_SPLAT_CHUNK) {
		int cl = c + RC_OCL_SPLAT_CHUNK < last ? c + RC_OCL_SPLAT_CHUNK : last;
		e = 0;
		SETARG(s->fp, 0, proj);
		SETARG(s->fp, 1, vol);
		SETARG(s->fp, 2, s->tab);
		SETARG(s->fp, 3, c);
		SETARG(s->fp, 4, s->n);
		SETARG(s->fp, 5, s->nu);
		SETARG(s->fp, 6, s->nv);
		SETARG(s->gain, 0, proj);
		SETARG(s->gain, 1, s->tab);
		SETARG(s->gain, 2, c);
		SETARG(s->gain, 3, s->nu);
		SETARG(s->gain, 4, s->nv);
		if (e != CL_SUCCESS)
			return rc_cl_fail(err, e, "clSetKernelArg (fp_splat)");
		/* the CPU variant's work-item runs a whole view (splat.cl) */
		size_t gf[3] = { s->gpu ? (size_t)s->n.s[0] : 1, s->gpu ? (size_t)s->n.s[1] : 1, (size_t)(cl - c) };
		size_t gg[3] = { (size_t)s->nu, (size_t)s->nv, (size_t)(cl - c) };
		rc = run(s, s->fp, gf, "fp_splat", err);
		if (!rc)
			rc = run(s, s->gain, gg, "splat_gain", err);
	}
	return rc;
}

int rc_ocl_splat_bp(rc_ocl_splat *s, cl_mem proj, cl_mem vol, int first, int last, int add, rc_err *err)
{
	int rc = check(s, first, last, err);
	if (rc || (first == last && add))
		return rc;
	if (first == last) {
		float zero = 0.0f;
		size_t nvox = (size_t)s->n.s[0] * (size_t)s->n.s[1] * (size_t)s->n.s[2];
		cl_int e = clEnqueueFillBuffer(s->q, vol, &zero, sizeof zero, 0, nvox * sizeof(float), 0, NULL, NULL);
		return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clEnqueueFillBuffer (volume)");
	}
	for (int c = first; c < last && !rc; c += RC_OCL_SPLAT_CHUNK) {
		int cl = c + RC_OCL_SPLAT_CHUNK < last ? c + RC_OCL_SPLAT_CHUNK : last;
		int acc = add || c > first;
		cl_int e = 0;
		SETARG(s->gained, 0, s->gp);
		SETARG(s->gained, 1, proj);
		SETARG(s->gained, 2, s->tab);
		SETARG(s->gained, 3, c);
		SETARG(s->gained, 4, s->nu);
		SETARG(s->gained, 5, s->nv);
		SETARG(s->bp, 0, vol);
		SETARG(s->bp, 1, s->gp);
		SETARG(s->bp, 2, s->tab);
		SETARG(s->bp, 3, c);
		SETARG(s->bp, 4, cl);
		SETARG(s->bp, 5, acc);
		SETARG(s->bp, 6, s->n);
		SETARG(s->bp, 7, s->nu);
		SETARG(s->bp, 8, s->nv);
		if (e != CL_SUCCESS)
			return rc_cl_fail(err, e, "clSetKernelArg (bp_splat)");
		size_t gg[3] = { (size_t)s->nu, (size_t)s->nv, (size_t)(cl - c) };
		size_t g[3] = { (size_t)s->n.s[0], (size_t)s->n.s[1], (size_t)((s->n.s[2] + RC_SPLAT_ZC - 1) / RC_SPLAT_ZC) };
		rc = run(s, s->gained, gg, "splat_gained", err);
		if (!rc)
			rc = run(s, s->bp, g, "bp_splat", err);
	}
	return rc;
}
