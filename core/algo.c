/* algo: names, defaults and dispatch of the algorithms (algo.h). */
#include "algo.h"

#include <string.h>

static const char *const algo_names[] = {
	[RC_ALGO_FDK] = "fdk", [RC_ALGO_SART] = "sart", [RC_ALGO_SIRT] = "sirt",
	[RC_ALGO_CGLS] = "cgls", [RC_ALGO_MLEM] = "mlem",
};

static const char *const window_names[] = {
	[RC_WINDOW_RAM_LAK] = "ram-lak", [RC_WINDOW_SHEPP_LOGAN] = "shepp-logan",
	[RC_WINDOW_HANN] = "hann",
};

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

int rc_algo_name_parse(const char *s, rc_algo_name *ret)
{
	for (size_t i = 0; i < sizeof algo_names / sizeof algo_names[0]; i++) {
		if (s && strcmp(s, algo_names[i]) == 0) {
			*ret = (rc_algo_name)i;
			return 0;
		}
	}
	return RC_EINVAL;
}

const char *rc_algo_name_str(rc_algo_name n)
{
	if ((unsigned)n < sizeof algo_names / sizeof algo_names[0])
		return algo_names[n];
	return "unknown";
}

int rc_filter_window_parse(const char *s, rc_filter_window *ret)
{
	for (size_t i = 0; i < sizeof window_names / sizeof window_names[0]; i++) {
		if (s && strcmp(s, window_names[i]) == 0) {
			*ret = (rc_filter_window)i;
			return 0;
		}
	}
	return RC_EINVAL;
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
