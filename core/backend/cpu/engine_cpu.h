/*
 * engine_cpu: the native CPU engine, all cores through a thread pool.
 * Loops run x fastest (paper 002's CPU variant), the back projector's inner
 * loop has no per-voxel division and vectorises; wider ISA paths
 * (*_avx2.c, *_avx512.c) are chosen at run time.
 */
#ifndef RC_ENGINE_CPU_H
#define RC_ENGINE_CPU_H

#include <stddef.h>

#include "backend/engine.h"

/* This host's CPU as a device.  id: "cpu:<model name>:<cores>c" (characters
 * outside [A-Za-z0-9.-_:+] become '_'), the one identity of the CPU: the
 * engine's device_id, the device registry's (devices.h), the key its
 * performance models are stored under and the `device_id` of GET
 * /v1/devices.  name: "<model name> (<cores> cores)".  Either may be NULL. */
void rc_cpu_identity(char *id, size_t idlen, char *name, size_t namelen);

/* threads: 0 = one per online core.  The engine borrows g. */
int rc_engine_cpu_new(const rc_geom *g, int threads, rc_engine **ret, rc_err *err);

/* The code path the back projector dispatched to on this machine:
 * "avx512", "avx2" or "baseline" (for `make bench`). */
const char *rc_engine_cpu_isa(void);

/* Forces the back projector's path of engine e ("baseline", "avx2",
 * "avx512"; RC_EUNSUPPORTED when this CPU lacks it), for tests and the
 * benchmark.  e must come from rc_engine_cpu_new. */
int rc_engine_cpu_set_isa(rc_engine *e, const char *isa, rc_err *err);

/* Whether the engine offers the splat pair (engine.h's `splat`) on g: a
 * cone or matrices geometry whose voxels project at most *limit pixels
 * apart (in u and v, over every view); *step is how far apart they do
 * (infinity for fan and parallel). */
int rc_engine_cpu_splat_check(const rc_geom *g, double *step, double *limit);

/* Threads of engine e's pool. */
int rc_engine_cpu_threads(const rc_engine *e);

#endif
