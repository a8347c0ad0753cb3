/*
 * split: the trigeneous split of paper 000 as a backend over backends.
 *
 * A split backend fans each projection out over child backends, each child
 * projecting a contiguous share of the views on its own memory, in the
 * proportions the planner gave per task (rc_split_set: the performance
 * model's partition, plan.h).  Children may be any backends of one
 * geometry: the host backend over an engine, or a device-resident one (the
 * OpenCL and CUDA backends), which keeps its own volume and projection
 * vectors on its device between calls.
 *
 * Vectors live on the first child, the home, which must keep them in host
 * memory (RC_BK_HOST: the host backend); every element-wise call runs
 * there.  A projection moves only what it must: forward sends each other
 * child the volume and takes back the projections of its share; back
 * sends each other child its share of the views (upload_views where it
 * has it) and takes back its partial volume, and the partial volumes are
 * added in child order, so a split run equals a one-device run to float
 * rounding.  Host children read and write the home's memory in place.
 * Children run concurrently, one thread each (the home on the caller's).
 *
 * Life cycle: rc_backend_split_new(children, n) takes the children (the
 * split's rc_backend_free frees them); rc_split_set sets the views per
 * child and task (default: every view on the home).
 */
#ifndef RC_SPLIT_H
#define RC_SPLIT_H

#include "backend/backend.h"

#define RC_SPLIT_MAX RC_EXEC_MAX_ENGINES

/* A split over children[0..n) (n in 1..RC_SPLIT_MAX, one geometry, one
 * batch, children[0] with RC_BK_HOST).  Takes the children on success. */
int rc_backend_split_new(rc_backend *const *children, int n, rc_backend **ret, rc_err *err);

/* views[i] views of every call of task go to child i: counts >= 0 that add
 * up to the geometry's views.  RC_EINVAL otherwise (nothing changed). */
int rc_split_set(rc_backend *split, rc_task task, const int *views, rc_err *err);

void rc_split_get(const rc_backend *split, rc_task task, int *views);

/* Failures: when a child's share fails with a device error (anything but
 * RC_EINVAL and RC_ECANCELLED) while another child lives, the child is
 * dropped for the rest of the run (it gets no views; the home keeps the
 * vectors even when its own projections are dropped), the replan hook (by
 * default: its views to the others in proportion to theirs) sets new
 * views with rc_split_set, and the call runs again.  Non-zero from the
 * hook ends the call with it. */
typedef int (*rc_split_replan_fn)(void *ud, rc_backend *split, int failed, rc_err *err);
void rc_split_set_replan(rc_backend *split, rc_split_replan_fn fn, void *ud);
/* 0 once child i was dropped; its error says why. */
int rc_split_alive(const rc_backend *split, int i);
const rc_err *rc_split_failure(const rc_backend *split, int i);

/* Child i's projection seconds and views of task so far (its share of
 * every call, transfers included), for job reports and the models'
 * refit. */
double rc_split_seconds(const rc_backend *split, rc_task task, int i);
long rc_split_views(const rc_backend *split, rc_task task, int i);

#endif
