/*
 * backend_opencl: the backend whose vectors are buffers on one OpenCL
 * device (backend.h), for whole runs resident on it (resident.h,
 * rc_opencl_run_algo).
 *
 * The measured projections go to the device once and the volume comes back
 * once; in between the host only orders launches and reads back the scalars
 * the algorithms branch on (dot products, residuals, the maxima of the row
 * and column sums), each a few doubles of partial sums.  The projectors are
 * the engine's own kernels on device buffers (engine_opencl_impl.h), the
 * element-wise calls the kernels of elementwise.cl through opencl_ew.h,
 * every one the loop of vec_host.c with the same float operations.
 *
 * Everything goes on the engine's in-order queue: only the calls that
 * return a number wait.  There is one batch, as on the host backend over
 * the same engine (a fan or parallel stack is one problem: the 2-D
 * projectors keep the slices apart anyway).  A view range is one
 * contiguous block of a cone or matrices stack and one block per slice of
 * a fan or parallel stack ([slice][view][u]): the element-wise calls on a
 * range of a 2-D stack run once per slice.
 */
#include "backend/opencl/engine_opencl.h"

#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/opencl/engine_opencl_impl.h"
#include "backend/opencl/opencl_ew.h"
#include "backend/opencl/opencl_tv.h"
#include "util/rc_clock.h"

struct rc_vec {
	cl_mem m;
	size_t n;
	rc_space space;
	int lent; /* the engine's own buffer: not released here */
};

typedef struct ocl_backend {
	rc_backend base;
	rc_engine *e;
	rc_ocl_handles h;
	rc_ocl_ew *w;
	rc_ocl_tv *tv;
	size_t nvox, nproj;
	int lent[2]; /* the engine's volume / stack buffer is in use as a vector */
} ocl_backend;

#define OB(b) ((ocl_backend *)(b))

static int vec_new(rc_backend *b, rc_space s, rc_vec **ret, rc_err *err)
{
	ocl_backend *o = OB(b);
	rc_vec *v = calloc(1, sizeof *v);
	if (!v)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for an OpenCL vector");
	v->n = s == RC_SPACE_VOLUME ? o->nvox : o->nproj;
	v->space = s;
	/* the engine's own volume and stack serve as the first vector of each
	 * space: its device-buffer projectors never use them, and a resident
	 * run then needs no more memory than the run's other vectors */
	if (!o->lent[s]) {
		o->lent[s] = v->lent = 1;
		v->m = s == RC_SPACE_VOLUME ? o->h.vol : o->h.proj;
		*ret = v;
		return 0;
	}
	cl_int e;
	v->m = clCreateBuffer(o->h.ctx, CL_MEM_READ_WRITE, v->n * sizeof(float), NULL, &e);
	if (e != CL_SUCCESS) {
		double mib = (double)v->n * sizeof(float) / 1048576.0;
		free(v);
		/* RC_ETOOBIG: the caller runs the job through the engine path */
		return rc_fail(err, RC_ETOOBIG, "volume", "the OpenCL device cannot hold a %s vector of %.1f MiB (%s)",
			       s == RC_SPACE_VOLUME ? "volume" : "projection", mib, rc_cl_strerror(e));
	}
	*ret = v;
	return 0;
}

static void vec_free(rc_backend *b, rc_vec *v)
{
	if (v->lent)
		OB(b)->lent[v->space] = 0;
	else
		clReleaseMemObject(v->m);
	free(v);
}

static int upload(rc_backend *b, rc_vec *dst, const float *src, rc_err *err)
{
	return rc_ocl_ew_write(OB(b)->w, dst->m, src, dst->n, err);
}

static int download(rc_backend *b, const rc_vec *src, float *dst, rc_err *err)
{
	return rc_ocl_ew_read(OB(b)->w, src->m, dst, src->n, err);
}

static int upload_views(rc_backend *b, rc_vec *dst, const float *src, int first, int last, rc_err *err)
{
	rc_bk_runs r = rc_bk_view_runs(b, dst->space, dst->n, first, last);
	int rc = 0;
	for (int j = 0; j < r.count && !rc; j++) {
		size_t off = r.off + (size_t)j * r.stride;
		rc = rc_ocl_ew_write_at(OB(b)->w, dst->m, off, src + off, r.n, err);
	}
	return rc;
}

static int download_views(rc_backend *b, const rc_vec *src, float *dst, int first, int last, rc_err *err)
{
	rc_bk_runs r = rc_bk_view_runs(b, src->space, src->n, first, last);
	for (int j = 0; j < r.count; j++) {
		size_t off = r.off + (size_t)j * r.stride;
		cl_int e = clEnqueueReadBuffer(OB(b)->h.q, src->m, CL_TRUE, off * sizeof(float), r.n * sizeof(float),
					       dst + off, 0, NULL, NULL);
		if (e != CL_SUCCESS)
			return rc_cl_fail(err, e, "read views from the device");
	}
	return 0;
}

static int finish(rc_backend *b, rc_err *err);

static int forward(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj, int first, int last,
		   rc_err *err)
{
	if (kind != RC_FP_RAYCAST && kind != RC_FP_SPLAT)
		return rc_fail(err, RC_EUNSUPPORTED, "",
			       "the OpenCL backend forward-projects by ray casting or splatting only");
	/* a 2-D stack: Joseph's ray casting; a cone: the engine's ray caster or splat pair */
	rc_bk_views(b, &first, &last);
	if (first == last)
		return 0;
	double t0 = rc_now_s();
	int rc = kind == RC_FP_SPLAT ? rc_ocl_splat_fp(rc_ocl_engine_splat(OB(b)->e), vol->m, proj->m, first, last, err)
				     : rc_ocl_forward_dev(OB(b)->e, vol->m, proj->m, first, last, err);
	/* the wait makes the time the projection's (the queue is in order:
	 * on a CPU device it costs nothing; on a GPU one launch latency per
	 * projection, which events would save) */
	if (!rc && (rc = finish(b, err)) == 0)
		rc_bk_count(b, RC_TASK_FORWARD, first, last, rc_now_s() - t0);
	return rc;
}

static int back(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		rc_err *err)
{
	rc_bk_views(b, &first, &last);
	double t0 = rc_now_s();
	int rc = rc_ocl_back_dev(OB(b)->e, kind, proj->m, vol->m, first, last, err);
	if (!rc && first < last && (rc = finish(b, err)) == 0)
		rc_bk_count(b, RC_TASK_BACK, first, last, rc_now_s() - t0);
	return rc;
}

static int back_add(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		    rc_err *err)
{
	rc_bk_views(b, &first, &last);
	double t0 = rc_now_s();
	int rc = rc_ocl_back_dev_add(OB(b)->e, kind, proj->m, vol->m, first, last, err);
	if (!rc && first < last && (rc = finish(b, err)) == 0)
		rc_bk_count(b, RC_TASK_BACK, first, last, rc_now_s() - t0);
	return rc;
}

static int fill(rc_backend *b, rc_vec *y, float v, int first, int last, rc_err *err)
{
	rc_bk_runs r = rc_bk_view_runs(b, y->space, y->n, first, last);
	int rc = 0;
	for (int j = 0; j < r.count && !rc; j++)
		rc = rc_ocl_ew_fill(OB(b)->w, y->m, v, r.off + (size_t)j * r.stride, r.n, err);
	return rc;
}

static int copy(rc_backend *b, rc_vec *y, const rc_vec *x, rc_err *err)
{
	return rc_ocl_ew_copy(OB(b)->w, y->m, x->m, y->n, err);
}

static int axpy(rc_backend *b, rc_vec *y, const float *a, const rc_vec *x, rc_err *err)
{
	return rc_ocl_ew_axpy(OB(b)->w, y->m, a[0], x->m, y->n, err);
}

static int xpay(rc_backend *b, rc_vec *y, const rc_vec *x, const float *a, rc_err *err)
{
	return rc_ocl_ew_xpay(OB(b)->w, y->m, x->m, a[0], y->n, err);
}

static int dot(rc_backend *b, const rc_vec *x, const rc_vec *y, double *ret, rc_err *err)
{
	return y ? rc_ocl_ew_dot(OB(b)->w, x->m, y->m, x->n, ret, err) : rc_ocl_ew_sum(OB(b)->w, x->m, x->n, ret, err);
}

static int inv_guarded(rc_backend *b, rc_vec *y, double rel, rc_err *err)
{
	return rc_ocl_ew_inv_guarded(OB(b)->w, y->m, y->n, rel, err);
}

static int ratio(rc_backend *b, rc_vec *y, const rc_vec *p, float eps, int first, int last, double *sum2,
		 rc_err *err)
{
	rc_bk_runs r = rc_bk_view_runs(b, y->space, y->n, first, last);
	int rc = 0;
	*sum2 = 0.0;
	for (int j = 0; j < r.count && !rc; j++) {
		double s = 0.0;
		rc = rc_ocl_ew_ratio(OB(b)->w, y->m, p->m, eps, r.off + (size_t)j * r.stride, r.n, &s, err);
		*sum2 += s;
	}
	return rc;
}

static int residual(rc_backend *b, rc_vec *e, const rc_vec *p, const rc_vec *w, int first, int last,
		    double *sum2, rc_err *err)
{
	rc_bk_runs r = rc_bk_view_runs(b, e->space, e->n, first, last);
	int rc = 0;
	*sum2 = 0.0;
	for (int j = 0; j < r.count && !rc; j++) {
		double s = 0.0;
		rc = rc_ocl_ew_residual(OB(b)->w, e->m, p->m, w ? w->m : NULL, r.off + (size_t)j * r.stride, r.n, &s,
					err);
		*sum2 += s;
	}
	return rc;
}

static int update(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, float lambda, int nonneg,
		  rc_err *err)
{
	return rc_ocl_ew_update(OB(b)->w, v->m, u->m, c->m, 0, lambda, nonneg, v->n, err);
}

static int mul(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, rc_err *err)
{
	return rc_ocl_ew_mul2(OB(b)->w, v->m, u->m, c->m, v->n, err);
}

/* tv_host.h's operator on the device (kernels/opencl/tv.cl) */
static int tv_apply(rc_backend *b, const rc_vec *w, const rc_vec *d, rc_vec *out, float eps, rc_err *err)
{
	rc_tv_shape s = rc_bk_tv_shape(b);
	return rc_ocl_tv_apply(OB(b)->tv, &s, w->m, d->m, out->m, eps, err);
}

static int finish(rc_backend *b, rc_err *err)
{
	cl_int e = clFinish(OB(b)->h.q);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clFinish");
}

static void ocl_free(rc_backend *b)
{
	/* nothing may still be queued on buffers the caller frees next */
	clFinish(OB(b)->h.q);
	rc_ocl_ew_free(OB(b)->w);
	rc_ocl_tv_free(OB(b)->tv);
	free(b);
}

static const rc_backend_ops ocl_ops = {
	.vec_new = vec_new,
	.vec_free = vec_free,
	.upload = upload,
	.upload_views = upload_views,
	.download_views = download_views,
	.download = download,
	.forward = forward,
	.back = back,
	.back_add = back_add,
	.fill = fill,
	.copy = copy,
	.axpy = axpy,
	.xpay = xpay,
	.dot = dot,
	.inv_guarded = inv_guarded,
	.ratio = ratio,
	.residual = residual,
	.update = update,
	.mul = mul,
	.tv_apply = tv_apply,
	.finish = finish,
	.free = ocl_free,
};

int rc_backend_opencl_new(rc_engine *e, rc_backend **ret, rc_err *err)
{
	rc_ocl_handles h;
	if (!e || rc_ocl_engine_handles(e, &h))
		return rc_fail(err, RC_EINVAL, "execution.engine", "the OpenCL backend needs an OpenCL engine");
	ocl_backend *o = calloc(1, sizeof *o);
	if (!o)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the OpenCL backend");
	int rc = rc_ocl_ew_new(e, &o->w, err);
	if (!rc && (rc = rc_ocl_tv_new(e, &o->tv, err)))
		rc_ocl_ew_free(o->w);
	if (rc) {
		free(o);
		return rc;
	}
	o->base.ops = &ocl_ops;
	o->base.geom = e->geom;
	o->base.nbatch = 1;
	snprintf(o->base.name, sizeof o->base.name, "%s", e->name);
	o->base.caps = RC_BK_RESIDENT | RC_BK_FDK | (e->splat ? RC_BK_SPLAT : 0u);
	o->e = e;
	o->h = h;
	o->nvox = rc_volume_count(rc_geom_volume(e->geom));
	o->nproj = rc_geom_proj_count(e->geom);
	*ret = &o->base;
	return 0;
}

int rc_backend_opencl_fits(rc_engine *e, int nvol, int nproj, rc_err *err)
{
	rc_ocl_handles h;
	if (!e || rc_ocl_engine_handles(e, &h))
		return rc_fail(err, RC_EINVAL, "execution.engine", "the OpenCL backend needs an OpenCL engine");
	/* a device that would have to page (or that allocates lazily and fails
	 * later) is refused up front; the caller then takes the engine path */
	size_t V = rc_volume_count(rc_geom_volume(e->geom)), P = rc_geom_proj_count(e->geom);
	/* the engine's own volume and stack are the first vector of each space */
	double need = ((double)(nvol > 1 ? nvol : 1) * (double)V + (double)(nproj > 1 ? nproj : 1) * (double)P) *
		      sizeof(float);
	cl_ulong gmem = 0;
	clGetDeviceInfo(h.dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
	if (gmem && need > (double)gmem)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the resident OpenCL run needs %.1f MiB and the device has %.1f MiB; run it "
			       "through the engine path", need / 1048576.0, (double)gmem / 1048576.0);
	return 0;
}
