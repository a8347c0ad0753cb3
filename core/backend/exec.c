/*
 * exec: one task split across engines (exec.h).
 *
 * Each call cuts the requested view range into contiguous shares in the
 * proportions of the task's split, runs every non-empty share on its engine
 * in its own thread (engine 0 on the calling thread), then, for back
 * projection, adds the partial volumes into vol in engine order.  Partial
 * volumes are allocated at the first back projection and kept, so an
 * iterative run allocates nothing per iteration.  A share that fails with
 * a device error drops its engine (exec.h), re-plans and reruns the call:
 * forward shares write disjoint views and back projection rebuilds every
 * partial volume, so a rerun leaves no trace of the failed attempt.
 * rc_exec_back_add keeps that promise by adding into vol only after every
 * share succeeded, except on a lone living engine, which adds in place.
 */
#include "backend/exec.h"
#include "util/rc_clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct rc_exec {
	int n;
	rc_engine *eng[RC_EXEC_MAX_ENGINES];
	int split[RC_TASK_COUNT][RC_EXEC_MAX_ENGINES];
	float *partial[RC_EXEC_MAX_ENGINES]; /* [0] only for rc_exec_back_add: engine 0 writes vol */
	int last_views[RC_TASK_COUNT][RC_EXEC_MAX_ENGINES];
	double total_s[RC_TASK_COUNT][RC_EXEC_MAX_ENGINES];
	long total_views[RC_TASK_COUNT][RC_EXEC_MAX_ENGINES];
	int dead[RC_EXEC_MAX_ENGINES];
	rc_err failure[RC_EXEC_MAX_ENGINES];
	rc_exec_replan_fn replan;
	void *replan_ud;
};

struct share {
	rc_exec *x;
	int i;
	rc_task task;
	int kind;
	const float *in;
	float *out;
	int first, last;
	int add; /* back_add into out */
	int rc;
	rc_err err;
	double seconds;
};

int rc_exec_new(rc_engine *const *engines, int n, rc_exec **ret, rc_err *err)
{
	if (n < 1 || n > RC_EXEC_MAX_ENGINES)
		return rc_fail(err, RC_EINVAL, "", "an executor needs 1 to %d engines (got %d)",
			       RC_EXEC_MAX_ENGINES, n);
	const rc_geom *g = engines[0]->geom;
	for (int i = 1; i < n; i++)
		if (engines[i]->geom != g)
			return rc_fail(err, RC_EINTERNAL, "", "engines of one executor must share a geometry");
	rc_exec *x = calloc(1, sizeof *x);
	if (!x)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the executor");
	x->n = n;
	memcpy(x->eng, engines, (size_t)n * sizeof engines[0]);
	for (int t = 0; t < RC_TASK_COUNT; t++)
		x->split[t][0] = rc_geom_nviews(g);
	*ret = x;
	return 0;
}

void rc_exec_free(rc_exec *x)
{
	if (!x)
		return;
	for (int i = 0; i < x->n; i++)
		free(x->partial[i]);
	free(x);
}

const rc_geom *rc_exec_geom(const rc_exec *x) { return x->eng[0]->geom; }

const char *rc_exec_name(const rc_exec *x) { return x->n > 1 ? "trigeneous" : x->eng[0]->name; }

int rc_exec_engines(const rc_exec *x) { return x->n; }

int rc_exec_splat(const rc_exec *x)
{
	for (int i = 0; i < x->n; i++)
		if (!x->eng[i]->splat)
			return 0;
	return x->n > 0;
}

int rc_exec_footprint(const rc_exec *x)
{
	for (int i = 0; i < x->n; i++)
		if (!x->eng[i]->footprint)
			return 0;
	return x->n > 0;
}

int rc_exec_footprint_auto(const rc_exec *x)
{
	for (int i = 0; i < x->n; i++)
		if (!x->eng[i]->footprint_auto)
			return 0;
	return x->n > 0;
}

int rc_partition_check(const int *views, const int *dead, int n, int nviews, const char *part, rc_err *err)
{
	long sum = 0;
	for (int i = 0; i < n; i++) {
		if (views[i] < 0)
			return rc_fail(err, RC_EINVAL, "", "a split cannot give %s %d a negative view count", part, i);
		if (views[i] > 0 && dead[i])
			return rc_fail(err, RC_EINVAL, "", "a split cannot give views to %s %d: it was dropped", part, i);
		sum += views[i];
	}
	if (sum != nviews)
		return rc_fail(err, RC_EINVAL, "", "a split must cover all %d views (got %ld)", nviews, sum);
	return 0;
}

int rc_exec_set_split(rc_exec *x, rc_task task, const int *views, rc_err *err)
{
	int rc = rc_partition_check(views, x->dead, x->n, rc_geom_nviews(rc_exec_geom(x)), "engine", err);
	if (!rc)
		memcpy(x->split[task], views, (size_t)x->n * sizeof views[0]);
	return rc;
}

void rc_exec_get_split(const rc_exec *x, rc_task task, int *views)
{
	memcpy(views, x->split[task], (size_t)x->n * sizeof views[0]);
}


void rc_partition_bounds(const int *views, int n, int nviews, int first, int last, int *bounds)
{
	long acc = 0;
	bounds[0] = first;
	for (int i = 0; i < n; i++) {
		acc += views[i];
		/* round the cumulative share, so the shares add up exactly */
		bounds[i + 1] = first + (int)(((long)(last - first) * acc + nviews / 2) / nviews);
	}
	bounds[n] = last;
}

/* Contiguous shares of [first, last) in the proportions of the split:
 * bounds[i]..bounds[i+1] goes to engine i. */
static void cut(const rc_exec *x, rc_task task, int first, int last, int *bounds)
{
	rc_partition_bounds(x->split[task], x->n, rc_geom_nviews(rc_exec_geom(x)), first, last, bounds);
}

static void *run_share(void *arg)
{
	struct share *s = arg;
	rc_engine *e = s->x->eng[s->i];
	double t0 = rc_now_s();
	rc_err_clear(&s->err);
	if (s->task == RC_TASK_FORWARD)
		s->rc = rc_engine_forward(e, (rc_fp_kind)s->kind, s->in, s->out, s->first, s->last, &s->err);
	else if (s->add)
		s->rc = rc_engine_back_add(e, (rc_bp_kind)s->kind, s->in, s->out, s->first, s->last, &s->err);
	else
		s->rc = rc_engine_back(e, (rc_bp_kind)s->kind, s->in, s->out, s->first, s->last, &s->err);
	s->seconds = rc_now_s() - t0;
	return NULL;
}

void rc_exec_set_replan(rc_exec *x, rc_exec_replan_fn fn, void *ud)
{
	x->replan = fn;
	x->replan_ud = ud;
}

int rc_exec_alive(const rc_exec *x, int i) { return !x->dead[i]; }
const rc_err *rc_exec_failure(const rc_exec *x, int i) { return &x->failure[i]; }

void rc_partition_redistribute(const int *views, const int *dead, int n, int nviews, int *out)
{
	long alive_sum = 0, acc = 0;
	int first_alive = -1, given = 0;
	for (int i = 0; i < n; i++)
		if (!dead[i]) {
			alive_sum += views[i];
			if (first_alive < 0)
				first_alive = i;
		}
	for (int i = 0; i < n; i++) {
		out[i] = 0;
		if (dead[i] || alive_sum == 0)
			continue;
		acc += views[i];
		int upto = (int)((acc * nviews + alive_sum / 2) / alive_sum);
		out[i] = upto - given;
		given = upto;
	}
	if (alive_sum == 0 && first_alive >= 0)
		out[first_alive] = nviews;
}

/* The default replan: rc_partition_redistribute for every task. */
static int redistribute(void *ud, rc_exec *x, int failed, rc_err *err)
{
	(void)ud;
	(void)failed;
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		int v[RC_EXEC_MAX_ENGINES];
		rc_partition_redistribute(x->split[t], x->dead, x->n, rc_geom_nviews(rc_exec_geom(x)), v);
		int rc = rc_exec_set_split(x, (rc_task)t, v, err);
		if (rc)
			return rc;
	}
	return 0;
}

int rc_is_device_failure(int rc)
{
	return rc && rc != RC_EINVAL && rc != RC_ECANCELLED;
}

static int run_once(rc_exec *x, rc_task task, int kind, const float *in,
		    float *out, int first, int last, int add, int *failed, rc_err *err);

static int run_task(rc_exec *x, rc_task task, int kind, const float *in,
		    float *out, int first, int last, int add, rc_err *err)
{
	for (;;) {
		int failed[RC_EXEC_MAX_ENGINES] = {0};
		int rc = run_once(x, task, kind, in, out, first, last, add, failed, err);
		if (!rc)
			return 0;
		int nfailed = 0, alive_after = 0;
		for (int i = 0; i < x->n; i++) {
			nfailed += failed[i];
			alive_after += !x->dead[i] && !failed[i];
		}
		if (!nfailed || !alive_after)
			return rc;
		for (int i = 0; i < x->n; i++) {
			if (!failed[i])
				continue;
			x->dead[i] = 1;
			for (int t = 0; t < RC_TASK_COUNT; t++)
				x->split[t][i] = 0; /* rebuilt below; never cut for a dead engine */
		}
		for (int i = 0; i < x->n; i++) {
			if (!failed[i])
				continue;
			int r = x->replan ? x->replan(x->replan_ud, x, i, err) : redistribute(NULL, x, i, err);
			if (r)
				return r;
		}
	}
}

/* add: out += the back projection.  An engine adds into out itself only
 * when it is the one living engine and has back_add (nothing to rerun the
 * call on, and no partial volume); otherwise every share goes to a partial
 * volume and out only takes their sum once all succeeded, so a rerun after
 * a dropped engine adds nothing twice. */
static int run_once(rc_exec *x, rc_task task, int kind, const float *in,
		    float *out, int first, int last, int add, int *failed, rc_err *err)
{
	int nviews = rc_geom_nviews(rc_exec_geom(x));
	if (first < 0 || last > nviews || first > last)
		return rc_fail(err, RC_EINVAL, "", "view range [%d, %d) is outside 0..%d", first, last, nviews);
	size_t nvox = rc_volume_count(rc_geom_volume(rc_exec_geom(x)));
	int bounds[RC_EXEC_MAX_ENGINES + 1];
	cut(x, task, first, last, bounds);

	struct share sh[RC_EXEC_MAX_ENGINES];
	pthread_t th[RC_EXEC_MAX_ENGINES];
	int started[RC_EXEC_MAX_ENGINES] = {0};
	int used = 0, alive = 0;
	for (int i = 0; i < x->n; i++)
		alive += !x->dead[i];
	for (int i = 0; i < x->n; i++) {
		int direct = alive == 1 && x->eng[i]->ops->back_add;
		sh[i] = (struct share){ .x = x, .i = i, .task = task, .kind = kind, .in = in,
					.first = bounds[i], .last = bounds[i + 1], .add = add && direct };
		if (task == RC_TASK_FORWARD) {
			sh[i].out = out;
		} else if (used == 0 && (!add || direct)) {
			sh[i].out = out; /* the first engine with work writes vol itself */
		} else {
			if (!x->partial[i] && !(x->partial[i] = malloc(nvox * sizeof(float))))
				return rc_fail(err, RC_ENOMEM, "", "out of memory for a partial volume of %zu voxels", nvox);
			sh[i].out = x->partial[i];
		}
		if (bounds[i + 1] > bounds[i])
			used++;
	}
	if (task == RC_TASK_BACK && used == 0) {
		if (!add)
			memset(out, 0, nvox * sizeof(float));
		return 0;
	}
	/* Engines other than the first with work run on their own threads. */
	int first_used = -1;
	for (int i = 0; i < x->n; i++) {
		if (bounds[i + 1] <= bounds[i])
			continue;
		if (first_used < 0) {
			first_used = i;
			continue;
		}
		if (pthread_create(&th[i], NULL, run_share, &sh[i]) == 0)
			started[i] = 1;
		else
			run_share(&sh[i]);
	}
	run_share(&sh[first_used]);
	for (int i = 0; i < x->n; i++)
		if (started[i])
			pthread_join(th[i], NULL);

	int rc = 0;
	for (int i = 0; i < x->n; i++) {
		int nv = bounds[i + 1] - bounds[i];
		x->last_views[task][i] = nv;
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
		x->total_s[task][i] += sh[i].seconds;
		x->total_views[task][i] += nv;
	}
	if (rc || task == RC_TASK_FORWARD)
		return rc;
	/* Fixed order: partial volumes of later engines into vol (of every
	 * engine with work when adding through them) */
	for (int i = first_used; i < x->n; i++) {
		if (bounds[i + 1] <= bounds[i] || sh[i].out == out)
			continue;
		const float *p = x->partial[i];
		for (size_t j = 0; j < nvox; j++)
			out[j] += p[j];
	}
	return 0;
}

int rc_exec_forward(rc_exec *x, rc_fp_kind kind, const float *vol, float *proj,
		    int first, int last, rc_err *err)
{
	return run_task(x, RC_TASK_FORWARD, (int)kind, vol, proj, first, last, 0, err);
}

int rc_exec_back(rc_exec *x, rc_bp_kind kind, const float *proj, float *vol,
		 int first, int last, rc_err *err)
{
	return run_task(x, RC_TASK_BACK, (int)kind, proj, vol, first, last, 0, err);
}

int rc_exec_back_add(rc_exec *x, rc_bp_kind kind, const float *proj, float *vol, int first, int last,
		     rc_err *err)
{
	return run_task(x, RC_TASK_BACK, (int)kind, proj, vol, first, last, 1, err);
}

int rc_exec_last_views(const rc_exec *x, rc_task task, int i) { return x->last_views[task][i]; }
double rc_exec_total_seconds(const rc_exec *x, rc_task task, int i) { return x->total_s[task][i]; }
long rc_exec_total_views(const rc_exec *x, rc_task task, int i) { return x->total_views[task][i]; }
