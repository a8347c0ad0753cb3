/* algo_util: shared steps of the iterative algorithms (algo_util.h). */
#include "algo/algo_util.h"

#include <math.h>

int rc_algo_cancelled(const rc_algo_hooks *h)
{
	return h && h->cancel && atomic_load(h->cancel) != 0;
}

int rc_algo_report(const rc_algo_hooks *h, rc_backend *b, const rc_vec *x, int iteration, int of,
		   double residual, double t0)
{
	if (!h)
		return 0;
	if (h->progress) {
		rc_progress pr = { .iteration = iteration, .of = of, .residual = residual,
				   .elapsed_s = rc_now_s() - t0 };
		h->progress(h->ud, &pr);
	}
	return h->iterate ? h->iterate(h->ud, b, x, iteration) : 0;
}

int rc_algo_check(const rc_algo_params *p, rc_backend *b, const float *proj,
		  const float *vol, int check_lambda, int check_subsets, rc_err *err)
{
	if (!p || !b || !proj || !vol)
		return rc_fail(err, RC_EINVAL, "", "an algorithm needs parameters, a backend, projections and a volume");
	if (p->iterations < 1)
		return rc_fail(err, RC_EINVAL, "algorithm.iterations",
			       "algorithm.iterations must be at least 1 (got %d)", p->iterations);
	if (check_lambda && !(p->relaxation > 0.0 && p->relaxation < 2.0))
		return rc_fail(err, RC_EINVAL, "algorithm.relaxation",
			       "algorithm.relaxation must lie strictly between 0 and 2 (got %g)",
			       p->relaxation);
	int nviews = rc_geom_nviews(b->geom);
	if (check_subsets && (p->subsets < 1 || p->subsets > nviews))
		return rc_fail(err, RC_EINVAL, "algorithm.subsets",
			       "algorithm.subsets must be between 1 and the number of views, %d (got %d)",
			       nviews, p->subsets);
	return 0;
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
	size_t cap = p->subset_cache_bytes ? p->subset_cache_bytes : RC_SUBSET_CACHE_BYTES;
	return S == 1 || (size_t)S <= cap / (nvox * sizeof(float));
}
