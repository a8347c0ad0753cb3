/* PLACEHOLDER until the sart implementation lands: replaced, not kept. */
#include "algo.h"

int rc_sart_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	(void)p; (void)x; (void)proj; (void)vol; (void)hooks;
	return rc_fail(err, RC_EUNSUPPORTED, "algorithm.name", "sart is not implemented yet");
}
