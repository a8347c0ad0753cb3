/* algo_util: shared steps of the iterative algorithms (algo_util.h). */
#include "algo/algo_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/noise.h"

int rc_algo_cancelled(const rc_algo_hooks *h)
{
	return h && h->cancel && atomic_load(h->cancel) != 0;
}

int rc_algo_report(const rc_algo_hooks *h, rc_backend *b, const rc_vec *x, int iteration, int of,
		   double residual, double t0, const char *stopped)
{
	if (!h)
		return 0;
	if (h->progress) {
		rc_progress pr = { .iteration = iteration, .of = of, .residual = residual,
				   .elapsed_s = rc_now_s() - t0, .stopped = stopped };
		h->progress(h->ud, &pr);
	}
	return h->iterate ? h->iterate(h->ud, b, x, iteration) : 0;
}

int rc_algo_check(const rc_algo_params *p, rc_backend *b, const float *proj,
		  const float *vol, int check_lambda, int check_subsets, rc_err *err)
{
	if (!p || !b || !proj || !vol)
		return rc_fail(err, RC_EINVAL, "", "an algorithm needs parameters, a backend, projections and a volume");
	int rc = rc_algo_iterations_check(p->name, p->iterations, err);
	if (rc)
		return rc;
	if (check_lambda && !(p->relaxation > 0.0 && p->relaxation < 2.0))
		return rc_fail(err, RC_EINVAL, "algorithm.relaxation",
			       "algorithm.relaxation must lie strictly between 0 and 2 (got %g)",
			       p->relaxation);
	int nviews = rc_geom_nviews(b->geom);
	if (check_subsets && (p->subsets < 0 || p->subsets > nviews))
		return rc_fail(err, RC_EINVAL, "algorithm.subsets",
			       "algorithm.subsets must be between 1 and the number of views, %d (got %d)",
			       nviews, p->subsets);
	if (!(p->tv_weight >= 0.0 && p->tv_weight <= RC_TV_MAX_WEIGHT) || (p->tv_weight > 0.0 && p->tv_steps < 1))
		return rc_fail(err, RC_EINVAL, "algorithm.tv.weight",
			       "algorithm.tv.weight must lie in [0, %g] with at least one step (got %g, %d steps)",
			       RC_TV_MAX_WEIGHT, p->tv_weight, p->tv_steps);
	if (!(p->stop_tolerance >= 0.0 && p->stop_tolerance < 1.0) ||
	    !(p->stop_discrepancy >= 0.0 && p->stop_discrepancy <= 100.0) ||
	    !(p->stop_stagnation >= 0.0 && p->stop_stagnation < 1.0) ||
	    !(p->noise_sigma >= 0.0 && isfinite(p->noise_sigma)))
		return rc_fail(err, RC_EINVAL, "algorithm.stop",
			       "algorithm.stop needs 0 <= tolerance < 1, 0 <= discrepancy <= 100, 0 <= stagnation < 1 "
			       "and a finite noise_sigma >= 0 (got %g, %g, %g, %g)", p->stop_tolerance,
			       p->stop_discrepancy, p->stop_stagnation, p->noise_sigma);
	if (p->projector == RC_PROJECTOR_SPLAT && !(b->caps & RC_BK_SPLAT))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "algorithm.projector \"splat\" needs one engine (cpu, opencl or cuda) on a cone or "
			       "matrices geometry with a flat detector whose voxels project at most a pixel apart "
			       "(this run: the %s backend); use \"raycast\" or \"auto\"",
			       b->name);
	if (p->projector == RC_PROJECTOR_FOOTPRINT && !(b->caps & RC_BK_FOOTPRINT))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "algorithm.projector \"footprint\" needs the CPU engine on a cone (flat or curved "
			       "detector) or matrices geometry, the volume in front of every source (this run: the %s "
			       "backend); use \"raycast\" or \"auto\"",
			       b->name);
	if ((int)p->initial < RC_INITIAL_ZERO || (int)p->initial > RC_INITIAL_AUTO)
		return rc_fail(err, RC_EINVAL, "algorithm.initial", "algorithm.initial %d is not a start",
			       (int)p->initial);
	if ((int)p->projector < RC_PROJECTOR_AUTO || (int)p->projector > RC_PROJECTOR_FOOTPRINT)
		return rc_fail(err, RC_EINVAL, "algorithm.projector", "algorithm.projector %d is not a projector",
			       (int)p->projector);
	return 0;
}

int rc_algo_start(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol, const rc_algo_hooks *hooks,
		  rc_initial *start, rc_err *err)
{
	*start = p->initial;
	if (p->initial == RC_INITIAL_AUTO)
		*start = (b->caps & RC_BK_FDK) && !rc_fdk_suits(b->geom, p->scan, NULL) ? RC_INITIAL_FDK
										       : RC_INITIAL_ZERO;
	if (*start != RC_INITIAL_FDK)
		return 0;
	if (!(b->caps & RC_BK_FDK))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.initial",
			       "algorithm.initial \"fdk\" is run before the %s backend, not on it (its back "
			       "projection is not FDK's)",
			       b->name);
	rc_algo_params f;
	rc_algo_params_default(&f, RC_ALGO_FDK);
	f.scan = p->scan;
	rc_algo_hooks h = { 0 };
	if (hooks)
		h.cancel = hooks->cancel;
	if (hooks && hooks->phase)
		hooks->phase(hooks->ud, RC_PHASE_FDK_START);
	int rc = rc_fdk_run(&f, b, proj, vol, &h, err);
	if (!rc && hooks && hooks->phase)
		hooks->phase(hooks->ud, RC_PHASE_ITERATING);
	return rc;
}

void rc_subset_range(int b, int S, int n, int *first, int *last)
{
	*first = (int)((long)b * n / S);
	*last = (int)((long)(b + 1) * n / S);
}

void rc_subset_order(int S, int *order)
{
	int bits = 0;
	while ((1 << bits) < S)
		bits++;
	int k = 0;
	for (int i = 0; i < (1 << bits); i++) {
		int r = 0;
		for (int b = 0; b < bits; b++)
			if (i & (1 << b))
				r |= 1 << (bits - 1 - b);
		if (r < S)
			order[k++] = r;
	}
}

int rc_sart_cache_all(const rc_algo_params *p, int S, size_t nvox)
{
	/* SART's column sums come from the voxel-driven back projector: a
	 * block's are a closed form or one more back projection of its views,
	 * about 1/S of an iteration's (colsum.h), so by default they are not
	 * kept (S volumes: the memory target is the volume + 3 volumes + 2 stacks);
	 * OS-EM's come from the matched back projector, which may be ray
	 * casting's transpose (4x the cost), so they are kept within the cap */
	if (!p->subset_cache_bytes && p->name == RC_ALGO_SART)
		return S == 1;
	size_t cap = p->subset_cache_bytes ? p->subset_cache_bytes : RC_SUBSET_CACHE_BYTES;
	return S == 1 || (size_t)S <= cap / (nvox * sizeof(float));
}

void rc_stop_init(const rc_algo_params *p, const rc_geom *g, const float *proj, rc_stop *s)
{
	size_t n = rc_geom_proj_count(g);
	*s = (rc_stop){ 0 };
	if (p->stop_tolerance > 0.0) {
		/* in double element by element, not vec_host's rc_vdot (float
		 * lanes, ~1e-7): the threshold is exact to rounding */
		double pp = 0.0;
		for (size_t i = 0; i < n; i++)
			pp += (double)proj[i] * proj[i];
		s->tolerance = p->stop_tolerance * sqrt(pp);
	}
	s->stagnation = p->stop_stagnation;
	if (p->stop_discrepancy > 0.0) {
		double e = p->noise_sigma > 0.0 ? p->noise_sigma * p->noise_sigma * (double)n
						: rc_noise_energy(proj, n, rc_geom_detector(g)->nu, 0);
		s->discrepancy = e > 0.0 ? p->stop_discrepancy * sqrt(e) : 0.0;
	}
}

double rc_tv_weight(const rc_algo_params *p, const float *proj, size_t n, int nu)
{
	if (!p->tv_auto || !(p->tv_weight > 0.0) || p->name == RC_ALGO_FDK || !proj)
		return p->tv_weight;
	return rc_tv_weight_rel(p, rc_noise_relative(proj, n, nu, p->noise_sigma, 0));
}

double rc_tv_weight_rel(const rc_algo_params *p, double rel)
{
	if (!p->tv_auto || !(p->tv_weight > 0.0) || p->name == RC_ALGO_FDK)
		return p->tv_weight;
	if (rel < 0.0 || rel >= RC_TV_REF_NOISE)
		return p->tv_weight;
	return p->tv_weight * (rel > RC_TV_MIN_NOISE ? rel : RC_TV_MIN_NOISE) / RC_TV_REF_NOISE;
}

const char *rc_stop_check(rc_stop *s, double residual)
{
	if (!isfinite(residual))
		return NULL;
	double last = s->last;
	s->last = residual;
	if (s->discrepancy > 0.0 && residual <= s->discrepancy)
		return "discrepancy";
	if (s->tolerance > 0.0 && residual <= s->tolerance)
		return "tolerance";
	if (s->stagnation > 0.0 && last > 0.0 && last - residual < s->stagnation * last)
		return "stagnation";
	return NULL;
}

int rc_tv_new(const rc_algo_params *p, rc_backend *b, const rc_vec *meas, const rc_vec *a1, int S, rc_tv *t,
	      rc_err *err)
{
	const int B = b->nbatch;
	int rc = 0;
	*t = (rc_tv){ 0 };
	if (!(p->tv_weight > 0.0))
		return 0;
	t->scale = calloc((size_t)B, sizeof *t->scale);
	t->step = calloc((size_t)B, sizeof *t->step);
	double *ps = calloc((size_t)B, sizeof *ps), *as = calloc((size_t)B, sizeof *as);
	if (!t->scale || !t->step || !ps || !as) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %d batches", B);
		goto out;
	}
	if ((rc = rc_bk_dot(b, meas, NULL, ps, err)) || (rc = rc_bk_dot(b, a1, NULL, as, err)))
		goto out;
	double top = 0.0;
	t->steps = p->tv_steps > S ? (p->tv_steps + S - 1) / S : 1;
	for (int k = 0; k < B; k++) {
		double m = as[k] > 0.0 ? ps[k] / as[k] : 0.0;
		t->scale[k] = isfinite(m) && m > 0.0 ? m : 0.0;
		top = t->scale[k] > top ? t->scale[k] : top;
		t->step[k] = (float)(-p->tv_weight * t->scale[k] / t->steps);
	}
	t->eps = (float)(RC_TV_EPS_REL * top);
	t->on = top > 0.0;
	if (t->on && !b->ops->tv_apply &&
	    !(t->host = malloc(3 * rc_volume_count(rc_geom_volume(b->geom)) * sizeof *t->host)))
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for host copies of the TV operator's volumes");
out:
	free(as);
	free(ps);
	if (rc)
		rc_tv_free(t);
	return rc;
}

void rc_tv_free(rc_tv *t)
{
	free(t->scale);
	free(t->step);
	free(t->host);
	*t = (rc_tv){ 0 };
}

int rc_tv_descend(rc_backend *b, const rc_tv *t, rc_vec *x, rc_vec *g, int nonneg, rc_err *err)
{
	int rc = 0;
	if (!t->on)
		return 0;
	for (int k = 0; k < t->steps && !rc; k++)
		if (!(rc = rc_bk_tv_apply(b, x, x, g, t->eps, t->host, err)))
			rc = rc_bk_axpy(b, x, t->step, g, err);
	/* a step may cross 0: clamp again (update with lambda 0 is the clamp
	 * alone) */
	if (!rc && nonneg)
		rc = rc_bk_update(b, x, g, g, 0.0f, 1, err);
	return rc;
}
