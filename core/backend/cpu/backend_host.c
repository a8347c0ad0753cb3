/*
 * backend_host: the backend whose vectors are host memory (backend.h).
 *
 * Projections go through an rc_exec, so one host backend serves the CPU
 * engine alone, one OpenCL or CUDA engine on its per-call path (uploads per
 * call), and an exec's split over several engines (tests and benchmarks; a
 * job on several devices runs on split.h's backend over backends).  The element-wise calls are
 * vec_host.h's loops on the calling thread.  Vectors can borrow the
 * caller's arrays, so the measured stack and the result volume are never
 * copied.
 *
 * One batch: an engine behind the exec may couple the slices of a 2-D
 * stack (test_algos' explicit matrix does), so CGLS keeps one step length.
 * Projection times are exec.h's (per engine); the stats count them as a
 * whole.
 */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "util/rc_clock.h"
#include "backend/vec_host.h"

struct rc_vec {
	float *p;
	size_t n;
	rc_space space;
	int owned;
};

typedef struct host {
	rc_backend base;
	rc_exec *x;
	size_t nvox, nproj;
} host;

static int vec_make(rc_backend *b, rc_space s, float *mem, rc_vec **ret, rc_err *err)
{
	host *h = (host *)b;
	rc_vec *v = calloc(1, sizeof *v);
	size_t n = s == RC_SPACE_VOLUME ? h->nvox : h->nproj;
	float *p = mem ? mem : malloc(n * sizeof(float));
	if (!v || !p) {
		free(v);
		if (!mem)
			free(p);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a %s vector (%zu values)",
			       s == RC_SPACE_VOLUME ? "volume" : "projection", n);
	}
	*v = (rc_vec){ .p = p, .n = n, .space = s, .owned = !mem };
	*ret = v;
	return 0;
}

static int vec_new(rc_backend *b, rc_space s, rc_vec **ret, rc_err *err)
{
	return vec_make(b, s, NULL, ret, err);
}

static int vec_borrow(rc_backend *b, rc_space s, float *host, rc_vec **ret, rc_err *err)
{
	return vec_make(b, s, host, ret, err);
}

static void vec_free(rc_backend *b, rc_vec *v)
{
	(void)b;
	if (v->owned)
		free(v->p);
	free(v);
}

static int upload(rc_backend *b, rc_vec *dst, const float *src, rc_err *err)
{
	(void)b;
	(void)err;
	if (dst->p != src)
		memcpy(dst->p, src, dst->n * sizeof(float));
	return 0;
}

static int download(rc_backend *b, const rc_vec *src, float *dst, rc_err *err)
{
	(void)b;
	(void)err;
	if (src->p != dst)
		memcpy(dst, src->p, src->n * sizeof(float));
	return 0;
}

static int forward(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj, int first, int last,
		   rc_err *err)
{
	host *h = (host *)b;
	rc_bk_views(b, &first, &last);
	double t0 = rc_now_s();
	int rc = rc_exec_forward(h->x, kind, vol->p, proj->p, first, last, err);
	rc_bk_count(b, RC_TASK_FORWARD, first, last, rc_now_s() - t0);
	return rc;
}

static int back(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		rc_err *err)
{
	host *h = (host *)b;
	rc_bk_views(b, &first, &last);
	double t0 = rc_now_s();
	int rc = rc_exec_back(h->x, kind, proj->p, vol->p, first, last, err);
	rc_bk_count(b, RC_TASK_BACK, first, last, rc_now_s() - t0);
	return rc;
}

static int back_add(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		    rc_err *err)
{
	host *h = (host *)b;
	rc_bk_views(b, &first, &last);
	double t0 = rc_now_s();
	int rc = rc_exec_back_add(h->x, kind, proj->p, vol->p, first, last, err);
	rc_bk_count(b, RC_TASK_BACK, first, last, rc_now_s() - t0);
	return rc;
}

/* The blocks of v that views [first, last) cover (a volume: the whole). */
static rc_seg span(const rc_backend *b, const rc_vec *v, int first, int last)
{
	if (v->space == RC_SPACE_VOLUME)
		return (rc_seg){ .start = 0, .len = v->n, .stride = 0, .n = 1 };
	rc_bk_views(b, &first, &last);
	if (first == last)
		return (rc_seg){ .n = 0 };
	return rc_seg_views(b->geom, first, last);
}

static int fill(rc_backend *b, rc_vec *y, float v, int first, int last, rc_err *err)
{
	(void)err;
	rc_seg s = span(b, y, first, last);
	for (int j = 0; j < s.n; j++)
		rc_vfill(y->p + s.start + (size_t)j * s.stride, v, s.len);
	return 0;
}

static int copy(rc_backend *b, rc_vec *y, const rc_vec *x, rc_err *err)
{
	return upload(b, y, x->p, err);
}

/* One batch (see the top): a[0], ret[0]. */
static int axpy(rc_backend *b, rc_vec *y, const float *a, const rc_vec *x, rc_err *err)
{
	(void)b;
	(void)err;
	rc_vaxpy(y->p, a[0], x->p, y->n);
	return 0;
}

static int xpay(rc_backend *b, rc_vec *y, const rc_vec *x, const float *a, rc_err *err)
{
	(void)b;
	(void)err;
	rc_vxpay(y->p, x->p, a[0], y->n);
	return 0;
}

static int dot(rc_backend *b, const rc_vec *x, const rc_vec *y, double *ret, rc_err *err)
{
	(void)b;
	(void)err;
	ret[0] = y ? rc_vdot(x->p, y->p, x->n) : rc_vsum(x->p, x->n);
	return 0;
}

static int inv_guarded(rc_backend *b, rc_vec *y, double rel, rc_err *err)
{
	(void)b;
	(void)err;
	rc_vinv_guarded(y->p, y->n, rel);
	return 0;
}

static int ratio(rc_backend *b, rc_vec *y, const rc_vec *p, float eps, int first, int last, double *sum2,
		 rc_err *err)
{
	(void)err;
	rc_bk_views(b, &first, &last);
	rc_seg s = rc_seg_views(b->geom, first, last);
	*sum2 = 0.0;
	for (int i = 0; i < s.n; i++) {
		size_t o = s.start + (size_t)i * s.stride;
		*sum2 += rc_vratio(y->p + o, p->p + o, eps, s.len);
	}
	return 0;
}

static int residual(rc_backend *b, rc_vec *e, const rc_vec *p, const rc_vec *w, int first, int last,
		    double *sum2, rc_err *err)
{
	(void)err;
	rc_seg s = span(b, e, first, last);
	*sum2 = rc_vresidual(&s, e->p, p->p, w ? w->p : NULL);
	return 0;
}

static int update(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, float lambda, int nonneg,
		  rc_err *err)
{
	(void)b;
	(void)err;
	rc_vupdate(v->p, u->p, c->p, lambda, nonneg, v->n);
	return 0;
}

static int mul(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, rc_err *err)
{
	(void)b;
	(void)err;
	rc_vmul2(v->p, u->p, c->p, v->n);
	return 0;
}

static void host_free(rc_backend *b)
{
	free(b);
}

static int tv_apply(rc_backend *b, const rc_vec *w, const rc_vec *d, rc_vec *out, float eps, rc_err *err)
{
	rc_tv_shape s = rc_bk_tv_shape(b);
	return rc_tv_apply(&s, w->p, d->p, out->p, eps, 0, err);
}

static const rc_backend_ops host_ops = {
	.vec_new = vec_new,
	.vec_borrow = vec_borrow,
	.vec_free = vec_free,
	.upload = upload,
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
	.free = host_free,
};

int rc_backend_host_new(rc_exec *x, rc_backend **ret, rc_err *err)
{
	if (!x)
		return rc_fail(err, RC_EINVAL, "", "the host backend needs an executor");
	host *h = calloc(1, sizeof *h);
	if (!h)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the host backend");
	const rc_geom *g = rc_exec_geom(x);
	h->base.ops = &host_ops;
	h->base.geom = g;
	h->base.nbatch = 1;
	snprintf(h->base.name, sizeof h->base.name, "%s", rc_exec_name(x));
	h->base.caps = RC_BK_HOST | RC_BK_FDK | (rc_exec_splat(x) ? RC_BK_SPLAT : 0u) |
		       (rc_exec_footprint(x) ? RC_BK_FOOTPRINT : 0u) |
		       (rc_exec_footprint_auto(x) ? RC_BK_FOOTPRINT_AUTO : 0u) |
		       (rc_exec_engines(x) > 1 ? RC_BK_SPLIT : 0u);
	h->x = x;
	h->nvox = rc_volume_count(rc_geom_volume(g));
	h->nproj = rc_geom_proj_count(g);
	*ret = &h->base;
	return 0;
}
