/* PLACEHOLDER until the CPU projectors land: replaced, not kept. */
#include "engine_cpu.h"

int rc_engine_cpu_new(const rc_geom *g, int threads, rc_engine **ret, rc_err *err)
{
	(void)g; (void)threads; (void)ret;
	return rc_fail(err, RC_EUNSUPPORTED, "execution.engine", "the CPU engine is not implemented yet");
}

const char *rc_engine_cpu_isa(void) { return "baseline"; }
