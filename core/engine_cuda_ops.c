/* PLACEHOLDER until the CUDA engine lands: replaced, not kept. */
#ifdef RC_HAVE_CUDA
#include "engine_cuda.h"

int rc_engine_cuda_new_opts(const rc_geom *g, const rc_cuda_options *o,
			    rc_engine **ret, rc_err *err)
{
	(void)g; (void)o; (void)ret;
	return rc_fail(err, RC_EUNSUPPORTED, "execution.engine", "the CUDA engine is not implemented yet");
}

int rc_engine_cuda_new(const rc_geom *g, int ordinal, rc_engine **ret, rc_err *err)
{
	rc_cuda_options o;
	rc_cuda_options_default(&o);
	o.ordinal = ordinal;
	return rc_engine_cuda_new_opts(g, &o, ret, err);
}

int rc_engine_cuda_last_slabs(const rc_engine *e) { (void)e; return 0; }

int rc_cuda_algo_supported(const rc_algo_params *p, const rc_geom *g) { (void)p; (void)g; return 0; }
uint64_t rc_cuda_algo_bytes(const rc_algo_params *p, const rc_geom *g) { (void)p; (void)g; return 0; }

int rc_cuda_run_algo(const rc_algo_params *p, const rc_geom *g,
		     const rc_cuda_options *o, const float *proj, float *vol,
		     const rc_algo_hooks *hooks, rc_err *err)
{
	(void)p; (void)g; (void)o; (void)proj; (void)vol; (void)hooks;
	return rc_fail(err, RC_EUNSUPPORTED, "execution.engine", "the resident CUDA path is not implemented yet");
}
#else
/* ISO C forbids an empty translation unit. */
typedef int rc_engine_cuda_ops_unused;
#endif
