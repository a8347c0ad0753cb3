/*
 * split: a backend over backends (split.h).
 *
 * A split vector is host memory (owned, or the caller's when borrowed)
 * with the home's vector over it, so the element-wise calls are the
 * home's, unchanged.  A projection cuts [first, last) into contiguous
 * shares in the task's proportions (rc_partition_bounds, the engine
 * split's own), runs every non-empty share on its child (the home on the
 * calling thread, the others on threads of their own), then, for back
 * projection, adds the partial volumes into the result in child order.
 * A host child borrows the split's memory; a resident child keeps a volume
 * and a projection vector of its own (made at its first share) and a host
 * buffer for what it sends back (projections, or a partial volume).
 */
#include "backend/split.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/exec.h"
#include "backend/vec_host.h"
#include "util/rc_clock.h"

struct rc_vec {
	rc_space space;
	float *mem;
	int owned;
	rc_vec *h; /* the home's vector over mem */
};

typedef struct split {
	rc_backend base;
	int n;
	rc_backend *c[RC_SPLIT_MAX];
	int views[RC_TASK_COUNT][RC_SPLIT_MAX];
	size_t nvox, nproj;
	rc_vec *cvol[RC_SPLIT_MAX], *cproj[RC_SPLIT_MAX]; /* resident children's own vectors */
	float *stage[RC_SPLIT_MAX];                      /* what a resident child sends back */
	float *partial[RC_SPLIT_MAX];                    /* host children's partial volumes */
	double seconds[RC_TASK_COUNT][RC_SPLIT_MAX];
	long nviews[RC_TASK_COUNT][RC_SPLIT_MAX];
	int dead[RC_SPLIT_MAX];
	rc_err failure[RC_SPLIT_MAX];
	rc_split_replan_fn replan;
	void *replan_ud;
} split;

static rc_backend *home(rc_backend *b) { return ((split *)b)->c[0]; }

/* ---- vectors -------------------------------------------------------------- */

static int vec_make(rc_backend *b, rc_space s, float *mem, rc_vec **ret, rc_err *err)
{
	split *x = (split *)b;
	size_t n = s == RC_SPACE_VOLUME ? x->nvox : x->nproj;
	rc_vec *v = calloc(1, sizeof *v);
	float *p = mem ? mem : malloc(n * sizeof(float));
	if (!v || !p) {
		free(v);
		if (!mem)
			free(p);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a split %s vector (%zu values)",
			       s == RC_SPACE_VOLUME ? "volume" : "projection", n);
	}
	*v = (rc_vec){ .space = s, .mem = p, .owned = !mem };
	int rc = x->c[0]->ops->vec_borrow(x->c[0], s, p, &v->h, err);
	if (rc) {
		if (v->owned)
			free(p);
		free(v);
		return rc;
	}
	*ret = v;
	return 0;
}

static int vec_new(rc_backend *b, rc_space s, rc_vec **ret, rc_err *err) { return vec_make(b, s, NULL, ret, err); }

static int vec_borrow(rc_backend *b, rc_space s, float *host, rc_vec **ret, rc_err *err)
{
	return vec_make(b, s, host, ret, err);
}

static void vec_free(rc_backend *b, rc_vec *v)
{
	rc_bk_vec_free(home(b), v->h);
	if (v->owned)
		free(v->mem);
	free(v);
}

static int upload(rc_backend *b, rc_vec *dst, const float *src, rc_err *err)
{
	(void)err;
	split *x = (split *)b;
	if (dst->mem != src)
		memcpy(dst->mem, src, (dst->space == RC_SPACE_VOLUME ? x->nvox : x->nproj) * sizeof(float));
	return 0;
}

static int download(rc_backend *b, const rc_vec *src, float *dst, rc_err *err)
{
	(void)err;
	split *x = (split *)b;
	if (src->mem != dst)
		memcpy(dst, src->mem, (src->space == RC_SPACE_VOLUME ? x->nvox : x->nproj) * sizeof(float));
	return 0;
}

/* ---- projections ---------------------------------------------------------- */

struct share {
	split *x;
	int i;
	rc_task task;
	int kind;
	const rc_vec *in; /* the split's volume (forward) or projections (back) */
	rc_vec *out;      /* the split's projections (forward) or volume (back) */
	float *dst;       /* back: where child i's partial volume goes */
	int add;          /* back: child i adds into the result itself */
	int first, last;
	int rc;
	rc_err err;
	double seconds;
};

/* A resident child's own vectors and its host buffer, at its first share. */
static int child_vectors(split *x, int i, rc_task task, rc_err *err)
{
	rc_backend *c = x->c[i];
	int rc = 0;
	if (!x->cvol[i])
		rc = rc_bk_vec_new(c, RC_SPACE_VOLUME, &x->cvol[i], err);
	if (!rc && !x->cproj[i])
		rc = rc_bk_vec_new(c, RC_SPACE_PROJ, &x->cproj[i], err);
	if (!rc && task == RC_TASK_FORWARD && !x->stage[i] && !(c->ops->download_views && !rc_geom_is_2d(x->base.geom)) &&
	    !(x->stage[i] = malloc(x->nproj * sizeof(float))))
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a device's projections (%zu values)", x->nproj);
	return rc;
}

/* Child i's share of a forward projection into the split's memory. */
static int share_forward(struct share *s)
{
	split *x = s->x;
	rc_backend *c = x->c[s->i];
	rc_fp_kind kind = (rc_fp_kind)s->kind;
	rc_vec *v = NULL, *p = NULL;
	int rc;
	if (s->i == 0)
		return rc_bk_forward(c, kind, s->in->h, s->out->h, s->first, s->last, &s->err);
	if (c->caps & RC_BK_HOST) { /* reads and writes the split's memory in place */
		if (!(rc = c->ops->vec_borrow(c, RC_SPACE_VOLUME, s->in->mem, &v, &s->err)) &&
		    !(rc = c->ops->vec_borrow(c, RC_SPACE_PROJ, s->out->mem, &p, &s->err)))
			rc = rc_bk_forward(c, kind, v, p, s->first, s->last, &s->err);
		rc_bk_vec_free(c, v);
		rc_bk_vec_free(c, p);
		return rc;
	}
	if ((rc = rc_bk_upload(c, x->cvol[s->i], s->in->mem, &s->err)) ||
	    (rc = rc_bk_forward(c, kind, x->cvol[s->i], x->cproj[s->i], s->first, s->last, &s->err)))
		return rc;
	if (c->ops->download_views && !rc_geom_is_2d(x->base.geom)) /* only the share's views cross */
		return c->ops->download_views(c, x->cproj[s->i], s->out->mem, s->first, s->last, &s->err);
	if ((rc = rc_bk_download(c, x->cproj[s->i], x->stage[s->i], &s->err)))
		return rc;
	rc_seg g = rc_seg_views(x->base.geom, s->first, s->last);
	for (int j = 0; j < g.n; j++) {
		size_t o = g.start + (size_t)j * g.stride;
		memcpy(s->out->mem + o, x->stage[s->i] + o, g.len * sizeof(float));
	}
	return 0;
}

/* Child i's share of a back projection into s->dst. */
static int share_back(struct share *s)
{
	split *x = s->x;
	rc_backend *c = x->c[s->i];
	rc_bp_kind kind = (rc_bp_kind)s->kind;
	rc_vec *v = NULL, *p = NULL;
	int rc;
	if (s->i == 0 && s->dst == s->out->mem) /* the home has work: it is the first, and writes the result */
		return s->add ? rc_bk_back_add(c, kind, s->in->h, s->out->h, s->first, s->last, &s->err)
			      : rc_bk_back(c, kind, s->in->h, s->out->h, s->first, s->last, &s->err);
	if (c->caps & RC_BK_HOST) {
		if (!(rc = c->ops->vec_borrow(c, RC_SPACE_PROJ, s->in->mem, &p, &s->err)) &&
		    !(rc = c->ops->vec_borrow(c, RC_SPACE_VOLUME, s->dst, &v, &s->err)))
			rc = rc_bk_back(c, kind, p, v, s->first, s->last, &s->err);
		rc_bk_vec_free(c, v);
		rc_bk_vec_free(c, p);
		return rc;
	}
	if ((rc = rc_bk_upload_views(c, x->cproj[s->i], s->in->mem, s->first, s->last, &s->err)) ||
	    (rc = rc_bk_back(c, kind, x->cproj[s->i], x->cvol[s->i], s->first, s->last, &s->err)))
		return rc;
	return rc_bk_download(c, x->cvol[s->i], s->dst, &s->err);
}

static void *run_share(void *arg)
{
	struct share *s = arg;
	double t0 = rc_now_s();
	rc_err_clear(&s->err);
	s->rc = s->task == RC_TASK_FORWARD ? share_forward(s) : share_back(s);
	s->seconds = rc_now_s() - t0;
	return NULL;
}

/* One attempt of a projection; failed[i] set for a child whose share
 * failed with a device error. */
/* add (back only): the result += the sum.  The home adds in place when it
 * is the one living child; otherwise every share goes to a partial volume
 * and the result takes their sum once all succeeded, so that a rerun after
 * a dropped child adds nothing twice. */
static int run_once(split *x, rc_task task, int kind, const rc_vec *in, rc_vec *out, int first, int last,
		    int add, int *failed, rc_err *err)
{
	int bounds[RC_SPLIT_MAX + 1], used = -1, rc, alive = 0;
	for (int i = 0; i < x->n; i++)
		alive += !x->dead[i];
	rc_partition_bounds(x->views[task], x->n, rc_geom_nviews(x->base.geom), first, last, bounds);
	struct share sh[RC_SPLIT_MAX];
	pthread_t th[RC_SPLIT_MAX];
	int started[RC_SPLIT_MAX] = { 0 };
	for (int i = 0; i < x->n; i++) {
		sh[i] = (struct share){ .x = x, .i = i, .task = task, .kind = kind, .in = in, .out = out,
					.first = bounds[i], .last = bounds[i + 1], .add = add && alive == 1 && i == 0 };
		if (bounds[i + 1] <= bounds[i])
			continue;
		if (i > 0 && !(x->c[i]->caps & RC_BK_HOST)) {
			rc_err e1;
			if ((rc = child_vectors(x, i, task, &e1))) {
				if (rc_is_device_failure(rc)) { /* no room on the device: drop it as a failure */
					failed[i] = 1;
					x->failure[i] = e1;
				}
				if (err)
					*err = e1;
				return rc;
			}
		}
		if (task == RC_TASK_BACK) {
			if (used < 0 && (!add || sh[i].add)) {
				sh[i].dst = out->mem; /* the first child with work writes the result */
			} else {
				size_t bytes = x->nvox * sizeof(float);
				if (!x->partial[i] && !(x->partial[i] = malloc(bytes)))
					return rc_fail(err, RC_ENOMEM, "", "out of memory for a partial volume (%zu values)",
						       x->nvox);
				sh[i].dst = x->partial[i];
			}
		}
		if (used < 0)
			used = i;
	}
	if (used < 0) { /* no view: forward writes nothing, back an empty sum */
		if (task == RC_TASK_BACK && !add)
			memset(out->mem, 0, x->nvox * sizeof(float));
		return 0;
	}
	for (int i = used + 1; i < x->n; i++)
		if (bounds[i + 1] > bounds[i]) {
			if (pthread_create(&th[i], NULL, run_share, &sh[i]) == 0)
				started[i] = 1;
			else
				run_share(&sh[i]);
		}
	run_share(&sh[used]);
	for (int i = 0; i < x->n; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	rc = 0;
	for (int i = 0; i < x->n; i++) {
		int nv = bounds[i + 1] - bounds[i];
		if (nv <= 0)
			continue;
		if (sh[i].rc) {
			if (rc_is_device_failure(sh[i].rc)) {
				failed[i] = 1;
				x->failure[i] = sh[i].err;
			}
			if (!rc) {
				rc = sh[i].rc;
				if (err)
					*err = sh[i].err;
			}
			continue;
		}
		x->seconds[task][i] += sh[i].seconds;
		x->nviews[task][i] += nv;
	}
	if (!rc && task == RC_TASK_BACK) /* fixed order: later children's partial volumes into the result */
		for (int i = used; i < x->n; i++) {
			if (bounds[i + 1] <= bounds[i] || sh[i].dst == out->mem)
				continue;
			const float *p = x->partial[i];
			for (size_t j = 0; j < x->nvox; j++)
				out->mem[j] += p[j];
		}
	return rc;
}

/* The default replan: the dropped child's views to the living ones
 * (rc_partition_redistribute, as the engine split does). */
static int redistribute(void *ud, rc_backend *b, int failed, rc_err *err)
{
	split *x = (split *)b;
	(void)ud;
	(void)failed;
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		int v[RC_SPLIT_MAX];
		rc_partition_redistribute(x->views[t], x->dead, x->n, rc_geom_nviews(b->geom), v);
		int rc = rc_split_set(b, (rc_task)t, v, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* A projection; a child whose share fails with a device error while
 * another lives is dropped, the views are split again over the living
 * (the replan hook, else redistribute) and the call runs again: forward
 * shares are disjoint and back rebuilds every partial volume, so nothing
 * of the failed attempt remains.  The home keeps the vectors either way. */
static int run_task(rc_backend *b, rc_task task, int kind, const rc_vec *in, rc_vec *out, int first, int last,
		    int add, rc_err *err)
{
	split *x = (split *)b;
	rc_bk_views(b, &first, &last);
	double t0 = rc_now_s();
	for (;;) {
		int failed[RC_SPLIT_MAX] = { 0 };
		int rc = run_once(x, task, kind, in, out, first, last, add, failed, err);
		int nfailed = 0, alive_after = 0;
		for (int i = 0; i < x->n; i++) {
			nfailed += failed[i];
			alive_after += !x->dead[i] && !failed[i];
		}
		if (!rc || !nfailed || !alive_after) {
			if (!rc)
				rc_bk_count(b, task, first, last, rc_now_s() - t0);
			return rc;
		}
		for (int i = 0; i < x->n; i++)
			if (failed[i]) {
				x->dead[i] = 1;
				for (int t = 0; t < RC_TASK_COUNT; t++)
					x->views[t][i] = 0;
			}
		for (int i = 0; i < x->n; i++)
			if (failed[i] && (rc = x->replan ? x->replan(x->replan_ud, b, i, err) : redistribute(NULL, b, i, err)))
				return rc;
	}
}

static int forward(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj, int first, int last,
		   rc_err *err)
{
	return run_task(b, RC_TASK_FORWARD, (int)kind, vol, proj, first, last, 0, err);
}

static int back(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last, rc_err *err)
{
	return run_task(b, RC_TASK_BACK, (int)kind, proj, vol, first, last, 0, err);
}

static int back_add(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		    rc_err *err)
{
	return run_task(b, RC_TASK_BACK, (int)kind, proj, vol, first, last, 1, err);
}

/* ---- element-wise: the home's ------------------------------------------- */

static int fill(rc_backend *b, rc_vec *y, float v, int first, int last, rc_err *err)
{
	return rc_bk_fill(home(b), y->h, v, first, last, err);
}

static int copy(rc_backend *b, rc_vec *y, const rc_vec *x, rc_err *err) { return rc_bk_copy(home(b), y->h, x->h, err); }

static int axpy(rc_backend *b, rc_vec *y, const float *a, const rc_vec *x, rc_err *err)
{
	return rc_bk_axpy(home(b), y->h, a, x->h, err);
}

static int xpay(rc_backend *b, rc_vec *y, const rc_vec *x, const float *a, rc_err *err)
{
	return rc_bk_xpay(home(b), y->h, x->h, a, err);
}

static int dot(rc_backend *b, const rc_vec *x, const rc_vec *y, double *ret, rc_err *err)
{
	return rc_bk_dot(home(b), x->h, y ? y->h : NULL, ret, err);
}

static int inv_guarded(rc_backend *b, rc_vec *y, double rel, rc_err *err)
{
	return rc_bk_inv_guarded(home(b), y->h, rel, err);
}

static int ratio(rc_backend *b, rc_vec *y, const rc_vec *p, float eps, int first, int last, double *sum2,
		 rc_err *err)
{
	return rc_bk_ratio(home(b), y->h, p->h, eps, first, last, sum2, err);
}

static int residual(rc_backend *b, rc_vec *e, const rc_vec *p, const rc_vec *w, int first, int last, double *sum2,
		    rc_err *err)
{
	return rc_bk_residual(home(b), e->h, p->h, w ? w->h : NULL, first, last, sum2, err);
}

static int update(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, float lambda, int nonneg, rc_err *err)
{
	return rc_bk_update(home(b), v->h, u->h, c->h, lambda, nonneg, err);
}

static int mul(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, rc_err *err)
{
	return rc_bk_mul(home(b), v->h, u->h, c->h, err);
}

static int tv_apply(rc_backend *b, const rc_vec *w, const rc_vec *d, rc_vec *out, float eps, rc_err *err)
{
	return rc_bk_tv_apply(home(b), w->h, d->h, out->h, eps, NULL, err);
}

static void split_free(rc_backend *b)
{
	split *x = (split *)b;
	for (int i = 0; i < x->n; i++) {
		if (x->c[i]) {
			rc_bk_vec_free(x->c[i], x->cvol[i]);
			rc_bk_vec_free(x->c[i], x->cproj[i]);
		}
		free(x->stage[i]);
		free(x->partial[i]);
		rc_backend_free(x->c[i]);
	}
	free(x);
}

static const rc_backend_ops split_ops = {
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
	.free = split_free,
};

int rc_backend_split_new(rc_backend *const *children, int n, rc_backend **ret, rc_err *err)
{
	if (n < 1 || n > RC_SPLIT_MAX)
		return rc_fail(err, RC_EINVAL, "", "a split needs 1 to %d backends (got %d)", RC_SPLIT_MAX, n);
	if (!(children[0]->caps & RC_BK_HOST) || !children[0]->ops->vec_borrow)
		return rc_fail(err, RC_EINVAL, "", "a split's first backend keeps its vectors in host memory (got %s)",
			       children[0]->name);
	const rc_geom *g = children[0]->geom;
	unsigned all = ~0u;
	for (int i = 0; i < n; i++) {
		if (children[i]->geom != g || children[i]->nbatch != 1)
			return rc_fail(err, RC_EINVAL, "", "the backends of a split share one geometry and one batch");
		all &= children[i]->caps;
	}
	split *x = calloc(1, sizeof *x);
	if (!x)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the split backend");
	x->n = n;
	memcpy(x->c, children, (size_t)n * sizeof children[0]);
	x->nvox = rc_volume_count(rc_geom_volume(g));
	x->nproj = rc_geom_proj_count(g);
	for (int t = 0; t < RC_TASK_COUNT; t++)
		x->views[t][0] = rc_geom_nviews(g);
	x->base.ops = &split_ops;
	x->base.geom = g;
	x->base.nbatch = 1;
	snprintf(x->base.name, sizeof x->base.name, "%s", n > 1 ? "trigeneous" : children[0]->name);
	x->base.caps = RC_BK_HOST | RC_BK_SPLIT | (all & (RC_BK_FDK | RC_BK_SPLAT | RC_BK_FOOTPRINT | RC_BK_FOOTPRINT_AUTO));
	*ret = &x->base;
	return 0;
}

int rc_split_set(rc_backend *b, rc_task task, const int *views, rc_err *err)
{
	split *x = (split *)b;
	int rc = rc_partition_check(views, x->dead, x->n, rc_geom_nviews(b->geom), "backend", err);
	if (!rc)
		memcpy(x->views[task], views, (size_t)x->n * sizeof views[0]);
	return rc;
}

double rc_split_seconds(const rc_backend *b, rc_task task, int i) { return ((const split *)b)->seconds[task][i]; }
long rc_split_views(const rc_backend *b, rc_task task, int i) { return ((const split *)b)->nviews[task][i]; }

void rc_split_get(const rc_backend *b, rc_task task, int *views)
{
	const split *x = (const split *)b;
	memcpy(views, x->views[task], (size_t)x->n * sizeof views[0]);
}

void rc_split_set_replan(rc_backend *b, rc_split_replan_fn fn, void *ud)
{
	split *x = (split *)b;
	x->replan = fn;
	x->replan_ud = ud;
}

int rc_split_alive(const rc_backend *b, int i) { return !((const split *)b)->dead[i]; }
const rc_err *rc_split_failure(const rc_backend *b, int i) { return &((const split *)b)->failure[i]; }
