/*
 * residual: how well a result explains its data, for every job whatever
 * its algorithm: ||p - Ax|| / ||p|| with A the forward projector of the
 * iterative algorithms on the backend that ran the job (FDK included: a
 * forward projection of its volume in a few views).  A job whose data does not fit its
 * geometry (angles, units, a transposed detector) shows it here.
 */
#ifndef RC_RESIDUAL_H
#define RC_RESIDUAL_H

#include "backend/backend.h"
#include "plan/recon_spec.h"

/* How many views the residual compares (of nviews): all after an
 * iterative run, 2 + nviews/100 evenly spaced ones after FDK. */
int rc_residual_views(const rc_recon_spec *s, int nviews);

/* *rel = ||p - A vol|| / ||p|| over the finite values of proj (in the views
 * of rc_residual_views), projected
 * on b (on the CPU engine where b's projections are not A: the tensor
 * backend's FBP matrix).  NaN when p is all zero. */
int rc_recon_residual(const rc_recon_spec *s, rc_backend *b, const rc_geom *g, const float *proj,
		      const float *vol, double *rel, rc_err *err);

#endif
