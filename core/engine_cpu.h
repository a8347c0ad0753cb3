/*
 * engine_cpu: the native CPU engine, all cores through a thread pool.
 * Loops run x fastest (paper 002's CPU variant), the back projector's inner
 * loop has no per-voxel division and vectorises; wider ISA paths
 * (*_avx2.c, *_avx512.c) are chosen at run time.
 */
#ifndef RC_ENGINE_CPU_H
#define RC_ENGINE_CPU_H

#include "engine.h"

/* threads: 0 = one per online core.  The engine borrows g. */
int rc_engine_cpu_new(const rc_geom *g, int threads, rc_engine **ret, rc_err *err);

/* The code path the back projector dispatched to on this machine:
 * "avx512", "avx2" or "baseline" (for `make bench`). */
const char *rc_engine_cpu_isa(void);

/* Forces the back projector's path of engine e ("baseline", "avx2",
 * "avx512"; RC_EUNSUPPORTED when this CPU lacks it), for tests and the
 * benchmark.  e must come from rc_engine_cpu_new. */
int rc_engine_cpu_set_isa(rc_engine *e, const char *isa, rc_err *err);

/* Threads of engine e's pool. */
int rc_engine_cpu_threads(const rc_engine *e);

#endif
