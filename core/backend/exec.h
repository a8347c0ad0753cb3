/*
 * exec: runs one task (forward or back projection of all views) split across
 * several engines, one thread per engine, each on its own view range.
 *
 * Forward projection needs no merge: each engine writes its own views.  Back
 * projection gives each engine a partial volume and sums them in a fixed
 * order, so a split run equals a single-device run within float rounding.
 * With one engine every call goes straight through.  The measured time of
 * each engine's share is kept for the planner (plan.h) and job reports.
 *
 * Life cycle: rc_exec_new(engines, n) borrows the engines (the caller frees
 * them after rc_exec_free); rc_exec_set_split sets the views per engine and
 * task (default: everything on engine 0).
 *
 * Failures: when an engine's share fails with a device error (anything but
 * RC_EINVAL and RC_ECANCELLED) while another engine is still alive, the
 * failed engine is dropped for the rest of the job, the replan hook (or, by
 * default, a redistribution of its views in proportion to the others') sets
 * new splits over the living engines, and the call is run again.  The error
 * that dropped it is kept for the report.
 */
#ifndef RC_EXEC_H
#define RC_EXEC_H

#include "backend/engine.h"

#define RC_EXEC_MAX_ENGINES 8

typedef enum rc_task { RC_TASK_FORWARD = 0, RC_TASK_BACK = 1, RC_TASK_COUNT } rc_task;

typedef struct rc_exec rc_exec;

/* The partition of a split, shared by the engine split here and the split
 * backend (split.h): whether views[0..n) may be a split of nviews views
 * (none negative, none for a dropped part, all covered; part names the
 * parts in messages: "engine", "backend"); the contiguous shares of
 * [first, last) in its proportions, bounds[i]..bounds[i+1] for part i; and
 * whether a part's error drops it from the split (a device's failure, not
 * a bad argument or a cancel). */
int rc_partition_check(const int *views, const int *dead, int n, int nviews, const char *part, rc_err *err);
void rc_partition_bounds(const int *views, int n, int nviews, int first, int last, int *bounds);
int rc_is_device_failure(int rc);
/* A dropped part's views given to the living parts in proportion to what
 * they have (all to the first living one if they have none): out[0..n). */
void rc_partition_redistribute(const int *views, const int *dead, int n, int nviews, int *out);

int rc_exec_new(rc_engine *const *engines, int n, rc_exec **ret, rc_err *err);
void rc_exec_free(rc_exec *x);

const rc_geom *rc_exec_geom(const rc_exec *x);
/* The engine's name ("cpu", "opencl", ...), "trigeneous" for several. */
const char *rc_exec_name(const rc_exec *x);
/* How many engines x runs on (dropped ones included). */
int rc_exec_engines(const rc_exec *x);
/* Every engine runs RC_FP_SPLAT and RC_BP_SPLAT (engine.h's `splat`). */
int rc_exec_splat(const rc_exec *x);
/* Every engine runs RC_FP_FOOTPRINT and RC_BP_FOOTPRINT (`footprint`). */
int rc_exec_footprint(const rc_exec *x);
/* And every engine's auto picks them (`footprint_auto`). */
int rc_exec_footprint_auto(const rc_exec *x);

/* views[i] views of each task go to engine i, in engine order; the counts
 * must add up to the number of views, and dropped engines get none. */
int rc_exec_set_split(rc_exec *x, rc_task task, const int *views, rc_err *err);
void rc_exec_get_split(const rc_exec *x, rc_task task, int *views);

/* Forward-project views [first, last) (all views: 0, nviews), split in
 * proportion to the task's split. */
int rc_exec_forward(rc_exec *x, rc_fp_kind kind, const float *vol, float *proj,
		    int first, int last, rc_err *err);
/* vol = sum of the back projections of views [first, last). */
int rc_exec_back(rc_exec *x, rc_bp_kind kind, const float *proj, float *vol,
		 int first, int last, rc_err *err);
/* vol += the sum of the back projections of views [first, last): in place
 * on the one living engine where it has back_add (engine.h), else through
 * partial volumes added in engine order once every share succeeded. */
int rc_exec_back_add(rc_exec *x, rc_bp_kind kind, const float *proj, float *vol,
		     int first, int last, rc_err *err);

/* Called after engine `failed` was dropped: set new splits (every task) over
 * the living engines with rc_exec_set_split; non-zero ends the job. */
typedef int (*rc_exec_replan_fn)(void *ud, rc_exec *x, int failed, rc_err *err);
void rc_exec_set_replan(rc_exec *x, rc_exec_replan_fn fn, void *ud);
/* 0 once engine i was dropped; its error says why. */
int rc_exec_alive(const rc_exec *x, int i);
const rc_err *rc_exec_failure(const rc_exec *x, int i);

/* Views engine i had in the last call of task. */
int rc_exec_last_views(const rc_exec *x, rc_task task, int i);
/* Sum of seconds and views over all calls so far (for job reports). */
double rc_exec_total_seconds(const rc_exec *x, rc_task task, int i);
long rc_exec_total_views(const rc_exec *x, rc_task task, int i);

#endif
