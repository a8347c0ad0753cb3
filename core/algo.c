/* algo: defaults and dispatch of the algorithms (algo.h); their names are
 * in names.c's table. */
#include "algo.h"

#include <string.h>

void rc_algo_params_default(rc_algo_params *p, rc_algo_name name)
{
	memset(p, 0, sizeof *p);
	p->name = name;
	p->iterations = name == RC_ALGO_FDK ? 1 : 10;
	p->relaxation = 1.0;
	p->subsets = 1;
	p->window = RC_WINDOW_RAM_LAK;
	p->cutoff = 1.0;
	p->scan = RC_SCAN_AUTO;
}

int rc_algo_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	if (p->name != RC_ALGO_FDK && p->iterations < 1)
		return rc_fail(err, RC_EINVAL, "algorithm.iterations",
			       "algorithm.iterations must be at least 1 (got %d)", p->iterations);
	switch (p->name) {
	case RC_ALGO_FDK: return rc_fdk_run(p, x, proj, vol, hooks, err);
	case RC_ALGO_SART: return rc_sart_run(p, x, proj, vol, hooks, err);
	case RC_ALGO_SIRT: return rc_sirt_run(p, x, proj, vol, hooks, err);
	case RC_ALGO_CGLS: return rc_cgls_run(p, x, proj, vol, hooks, err);
	case RC_ALGO_MLEM: return rc_mlem_run(p, x, proj, vol, hooks, err);
	}
	return rc_fail(err, RC_EINVAL, "algorithm.name", "unknown algorithm %d", (int)p->name);
}
