/* algo: the parameters' defaults (algo.h); the algorithms' names are in
 * names.c's table, their dispatch in algo_run.c. */
#include "algo/algo.h"

#include <string.h>

void rc_algo_params_default(rc_algo_params *p, rc_algo_name name)
{
	memset(p, 0, sizeof *p);
	p->name = name;
	p->iterations = name == RC_ALGO_FDK ? 1 : 10;
	p->relaxation = 1.0;
	p->subsets = 0;
	p->nonnegative = 1;
	if (name != RC_ALGO_FDK) {
		p->tv_weight = RC_TV_DEFAULT_WEIGHT;
		p->tv_auto = 1;
		p->tv_steps = RC_TV_DEFAULT_STEPS;
		p->stop_discrepancy = RC_STOP_DEFAULT_TAU;
	}
	/* every iterative method starts from FDK and stops on stagnation
	 * (docs/algorithms.md, "Defaults") */
	if (name != RC_ALGO_FDK) {
		p->initial = RC_INITIAL_AUTO;
		p->stop_stagnation = name == RC_ALGO_MLEM ? RC_MLEM_DEFAULT_STAGNATION : RC_DEFAULT_STAGNATION;
	}
	p->window = RC_WINDOW_RAM_LAK;
	p->cutoff = 1.0;
	p->scan = RC_SCAN_AUTO;
}

void rc_algo_params_plain(rc_algo_params *p, rc_algo_name name)
{
	rc_algo_params_default(p, name);
	p->iterations = name == RC_ALGO_FDK ? 1 : 10;
	p->subsets = 1;
	p->nonnegative = 0;
	p->tv_weight = 0.0;
	p->tv_auto = 0;
	p->tv_steps = 0;
	p->stop_discrepancy = 0.0;
	p->stop_stagnation = 0.0;
	p->initial = RC_INITIAL_ZERO;
}

int rc_algo_iterations_check(rc_algo_name name, long long iterations, rc_err *err)
{
	if (name == RC_ALGO_FDK && iterations != 1)
		return rc_fail(err, RC_EINVAL, "algorithm.iterations", "algorithm.iterations must be 1 for fdk (got %lld)",
			       iterations);
	if (iterations < 1 || iterations > RC_ALGO_MAX_ITERATIONS)
		return rc_fail(err, RC_EINVAL, "algorithm.iterations",
			       "algorithm.iterations must be between 1 and %d (got %lld)", RC_ALGO_MAX_ITERATIONS,
			       iterations);
	return 0;
}

int rc_algo_subsets(const rc_algo_params *p, int nviews)
{
	if (p->name != RC_ALGO_SART && p->name != RC_ALGO_MLEM)
		return 1;
	if (p->subsets)
		return p->subsets;
	return p->name == RC_ALGO_SART ? rc_sart_default_subsets(nviews) : 1;
}

int rc_sart_default_subsets(int nviews)
{
	int s = nviews / RC_SART_VIEWS_PER_SUBSET;
	return s < 1 ? 1 : s;
}
