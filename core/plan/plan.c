/*
 * plan: model fit and split (plan.h).
 */
#include "plan/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sample { double w, t; };

static int by_w(const void *pa, const void *pb)
{
	const struct sample *a = pa, *b = pb;
	return (a->w > b->w) - (a->w < b->w);
}

/* Ordinary least squares over s[0..n-1]; returns -1 when the w are all equal. */
static int line(const struct sample *s, int n, double *a, double *b)
{
	double mw = 0, mt = 0;
	for (int i = 0; i < n; i++) {
		mw += s[i].w;
		mt += s[i].t;
	}
	mw /= n;
	mt /= n;
	double sww = 0, swt = 0;
	for (int i = 0; i < n; i++) {
		sww += (s[i].w - mw) * (s[i].w - mw);
		swt += (s[i].w - mw) * (s[i].t - mt);
	}
	if (n < 2 || sww <= 0)
		return -1;
	*a = swt / sww;
	*b = mt - *a * mw;
	return 0;
}

int rc_model_fit(const double *w, const double *t, int n, int require_min,
		 rc_model *ret, rc_err *err)
{
	if (n < 2)
		return rc_fail(err, RC_EINVAL, "", "a performance model needs timed runs at two or more workloads (got %d)", n);
	struct sample *s = malloc((size_t)n * sizeof *s);
	if (!s)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d model samples", n);
	int rc = 0;
	for (int i = 0; i < n; i++) {
		if (!(isfinite(w[i]) && isfinite(t[i]) && w[i] > 0 && t[i] >= 0)) {
			rc = rc_fail(err, RC_EINVAL, "", "model sample %d is not a positive workload with a time (%g views, %g s)",
				     i, w[i], t[i]);
			goto out;
		}
		s[i] = (struct sample){ w[i], t[i] };
	}
	qsort(s, (size_t)n, sizeof *s, by_w);
	int distinct = 1;
	for (int i = 1; i < n; i++)
		distinct += s[i].w != s[i - 1].w;
	if (require_min && distinct < RC_PLAN_MIN_WORKLOADS) {
		rc = rc_fail(err, RC_EINVAL, "", "calibration needs timed runs at %d or more workloads (got %d)",
			     RC_PLAN_MIN_WORKLOADS, distinct);
		goto out;
	}
	/* Flat start (paper 000 Fig. 5): compare each leading step's slope with
	 * the slope of the upper half, where the device is certainly full. */
	int start = 0;
	if (n >= 4) {
		double ah, bh;
		int half = n / 2 < 3 ? n - 3 : n / 2;
		if (line(s + half, n - half, &ah, &bh) == 0 && ah > 0) {
			while (start < n - 3) {
				double dw = s[start + 1].w - s[start].w;
				double slope = dw > 0 ? (s[start + 1].t - s[start].t) / dw : ah;
				if (slope >= 0.5 * ah)
					break;
				start++;
			}
		}
	}
	double a, b;
	if (line(s + start, n - start, &a, &b)) {
		rc = rc_fail(err, RC_EINVAL, "", "a performance model needs two or more different workloads");
		goto out;
	}
	if (!(a > 0) || !isfinite(b)) {
		rc = rc_fail(err, RC_EINVAL, "", "the timed runs give no rising line (slope %g s/view): time more views per run", a);
		goto out;
	}
	*ret = (rc_model){ .a = a, .b = b, .valid = 1, .npoints = n - start, .dropped = start };
out:
	free(s);
	return rc;
}

double rc_plan_makespan(const rc_model *models, const int *views, int k)
{
	double m = 0;
	for (int i = 0; i < k; i++)
		if (views[i] > 0) {
			double t = rc_model_predict(&models[i], views[i]);
			if (t > m)
				m = t;
		}
	return m;
}

static int same_group(const char *const *g, int i, int j)
{
	return g && g[i] && g[j] && g[i][0] && strcmp(g[i], g[j]) == 0;
}

int rc_plan_split(const rc_model *models, const char *const *hw_groups, int k,
		  int W, double host_s, rc_plan *ret, rc_err *err)
{
	if (k < 1 || k > RC_PLAN_MAX_DEVICES)
		return rc_fail(err, RC_EINVAL, "", "a plan needs 1 to %d devices (got %d)", RC_PLAN_MAX_DEVICES, k);
	if (W < 0)
		return rc_fail(err, RC_EINVAL, "", "a plan needs a non-negative number of views (got %d)", W);
	int use[RC_PLAN_MAX_DEVICES];
	int any = 0;
	for (int i = 0; i < k; i++) {
		const rc_model *m = &models[i];
		use[i] = m->valid && m->a > 0 && isfinite(m->a) && isfinite(m->b);
		any |= use[i];
	}
	if (!any)
		return rc_fail(err, RC_EINVAL, "", "no device has a performance model to plan with");
	/* One device per hardware group: the one fastest on the whole task. */
	for (int i = 0; i < k; i++)
		for (int j = 0; j < k; j++)
			if (i != j && use[i] && use[j] && same_group(hw_groups, i, j)) {
				double ti = rc_model_predict(&models[i], W), tj = rc_model_predict(&models[j], W);
				if (tj < ti || (tj == ti && j < i))
					use[i] = 0;
			}

	rc_plan p = { .k = k, .single = -1 };
	double wf[RC_PLAN_MAX_DEVICES] = {0};
	/* Closed form; a device with a negative share is too slow to help. */
	for (;;) {
		double sa = 0, sb = 0;
		for (int i = 0; i < k; i++)
			if (use[i]) {
				sa += 1.0 / models[i].a;
				sb += models[i].b / models[i].a;
			}
		double T = (W + sb) / sa;
		int worst = -1;
		for (int i = 0; i < k; i++) {
			if (!use[i])
				continue;
			wf[i] = (T - models[i].b) / models[i].a;
			if (wf[i] < 0 && (worst < 0 || wf[i] < wf[worst]))
				worst = i;
		}
		if (worst < 0)
			break;
		use[worst] = 0;
		wf[worst] = 0;
	}
	/* Fig. 6 lines 1-6: floor, then greedy by finishing time. */
	long given = 0;
	for (int i = 0; i < k; i++) {
		p.views[i] = use[i] ? (int)floor(wf[i]) : 0;
		if (p.views[i] > W)
			p.views[i] = W;
		given += p.views[i];
	}
	while (given > W) { /* float error can only overshoot by a view or so */
		int best = -1;
		for (int i = 0; i < k; i++)
			if (p.views[i] > 0 && (best < 0 || rc_model_predict(&models[i], p.views[i]) >
						 rc_model_predict(&models[best], p.views[best])))
				best = i;
		p.views[best]--;
		given--;
	}
	while (given < W) {
		int best = -1;
		double tb = 0;
		for (int i = 0; i < k; i++) {
			if (!use[i])
				continue;
			double t = rc_model_predict(&models[i], p.views[i] + 1);
			if (best < 0 || t < tb) {
				best = i;
				tb = t;
			}
		}
		p.views[best]++;
		given++;
	}
	p.split_s = rc_plan_makespan(models, p.views, k);
	/* Fig. 6 lines 7-10: a single device (or the host) that is no slower
	 * than the split takes the whole task: no merge, no threads. */
	int best = -1;
	double tbest = 0;
	for (int i = 0; i < k; i++) {
		if (!(models[i].valid && models[i].a > 0))
			continue;
		double t = rc_model_predict(&models[i], W);
		if (best < 0 || t < tbest) {
			best = i;
			tbest = t;
		}
	}
	if (tbest <= p.split_s) {
		memset(p.views, 0, sizeof p.views);
		p.views[best] = W;
		p.single = best;
	}
	p.makespan_s = rc_plan_makespan(models, p.views, k);
	if (host_s > 0 && host_s < p.makespan_s)
		p.on_host = 1;
	for (int i = 0; i < k; i++)
		p.predicted_s[i] = p.views[i] > 0 ? rc_model_predict(&models[i], p.views[i]) : 0;
	*ret = p;
	return 0;
}
