/*
 * open: the one way from an execution.engine to a backend (backend.h).
 *
 * rc_backend_open takes the engine (names.h's enum, parsed once by the job
 * spec), the devices it may use and the job, and returns the backend that
 * runs it: the tensor backend, the resident CUDA or OpenCL backend, or the
 * host backend over one engine or the planner's split of several (open.c
 * says which when).  Callers then run any algorithm on it
 * (rc_algo_run_on) and ask its capabilities (rc_backend.caps), never its
 * name.
 *
 * Life cycle: open, run, rc_backend_report (what ran, the measured times;
 * the performance models are refitted from them), rc_backend_free (which
 * closes every device, engine, executor and matrix the open made).
 */
#ifndef RC_OPEN_H
#define RC_OPEN_H

#include "backend/backend.h"
#include "plan/devices.h"
#include "plan/recon_spec.h"

/* The backend of a run of s->algo on g (borrowed: both outlive the
 * backend) with execution.engine `engine` (s->engine is not read, so a
 * caller can open another engine for the same job).  devices: the devices
 * the engine may use (rc_devices_enumerate's entries, ndevices of them),
 * or NULL for this host's.  s supplies the threads, the model and cache
 * directories (trigeneous calibrates devices without a model and stores
 * what it measured) and the precision of the tensor path.  Errors:
 * RC_EUNSUPPORTED (no such device), RC_EDEVICE, RC_ENOMEM, RC_EINVAL. */
int rc_backend_open(rc_engine_choice engine, const rc_device *devices, int ndevices, const rc_recon_spec *s,
		    const rc_geom *g, rc_backend **ret, rc_err *err);

/* After a run on b (rc_backend_open's; nothing for another backend): the
 * report of what ran (engine, devices, their views, predicted and measured
 * milliseconds per call, the projector pair, the tensor path's matrix)
 * into report, and, when ran is non-zero and s->model_dir is set, every
 * device's measured times added to its model. */
void rc_backend_report(rc_backend *b, int ran, rc_recon_report *report);

#endif
