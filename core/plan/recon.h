/*
 * recon: one whole reconstruction job, from a parsed spec and the projection
 * stack to the volume.  This is what the worker process (server/) calls: it
 * checks the spec, opens the backend of its execution.engine (open.h, which
 * owns the choice of devices and the plan of views per device), runs the
 * algorithm on it and reports what ran.  No JSON here: server/worker/spec.c
 * parses the job's JSON into rc_recon_spec.
 */
#ifndef RC_RECON_H
#define RC_RECON_H

#include "plan/recon_spec.h"

void rc_recon_spec_default(rc_recon_spec *s);

/* Whether this build runs the spec's algorithm on its geometry type with its
 * execution.engine: 0, or RC_EUNSUPPORTED with a message (field
 * "execution.engine" or "algorithm.name") that names what is supported.
 * Decided from the spec alone, without opening a device, so the daemon can
 * refuse a job at creation instead of failing it when it runs; whether a
 * node has the device (opencl, cuda) the daemon checks next to it
 * (server/http_jobs.c, engine_offered). */
int rc_recon_check(const rc_recon_spec *s, rc_err *err);

/* Whether rc_recon_run honours hooks->views (FDK back-projecting views as
 * they arrive): 0, or RC_EUNSUPPORTED with a message (field
 * "execution.stream") that says what streams.  FDK on cone and matrices
 * geometries streams on every engine but the tensor engine (its 2-D path
 * runs on whole sinograms). */
int rc_recon_streams(const rc_recon_spec *s, rc_err *err);

/* Validates the spec (messages name the field), builds the geometry, opens
 * the engines, runs the algorithm.  An iterative run on a 3-D geometry
 * runs on the volume extended in z where extend.h says (rc_extent_of: its
 * checkpoints' volume vectors are of that volume; its iterate hook gets
 * x NULL with the asked slices in vol) and keeps the asked slices.  proj holds the whole stack
 * (rc_geom_proj_count floats); vol receives rc_volume_count floats.
 * report (may be NULL) is filled also on failure, as far as the run got. */
int rc_recon_run(const rc_recon_spec *s, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_recon_report *report, rc_err *err);

#endif
