/*
 * plan: the performance model of paper 000 and the split of one task's views
 * across devices.  No device code here: only numbers in, numbers out.
 *
 * Model: a device runs a task (forward or back projection) on W views in
 * T(W) = a*W + b seconds (paper 000 Eqs. 4-6).  a and b come from a least
 * squares line through timed runs at >= 5 workloads, leaving out the flat
 * start where the device is not yet full (Fig. 5b).
 *
 * Split: all used devices finish together, a_k W_k + b_k = T for every k and
 * sum W_k = W (Eqs. 2-3), so T = (W + sum b_k/a_k) / sum 1/a_k and
 * W_k = (T - b_k)/a_k: Eqs. 7-9 for any K.  A device whose W_k comes out
 * negative is left out and the rest solved again.  The floats are floored and
 * the remaining views handed out greedily to the device that finishes first
 * with one more (Fig. 6 lines 1-6).  Then the execute-on-host test (lines
 * 7-10): when one device alone (or the host, if its time is given) is
 * predicted no slower than the split, the whole task goes there.
 *
 * Devices with the same hw_group share hardware (PoCL's CPU device and the
 * cpu engine run on the same cores): only the fastest of a group is used.
 */
#ifndef RC_PLAN_H
#define RC_PLAN_H

#include "util/rc_error.h"

#define RC_PLAN_MAX_DEVICES 8
#define RC_PLAN_MIN_WORKLOADS 5

/* T(W) = a*W + b seconds; valid = 0: no model (the device is not planned). */
typedef struct rc_model {
	double a, b;
	int valid;
	int npoints; /* samples the line went through, after the flat start */
	int dropped; /* samples left out as the flat start */
} rc_model;

static inline double rc_model_predict(const rc_model *m, double w)
{
	return m->a * w + m->b;
}

/* Fits the line through n samples (w[i] views, t[i] seconds; any order).
 * Needs >= RC_PLAN_MIN_WORKLOADS distinct workloads when require_min is set
 * (calibration); a refit from job times may pass require_min = 0 (>= 2).
 * The flat start: leading samples whose slope to the next sample is under
 * half the slope of the upper half of the data are left out, keeping >= 3
 * (or all, when fewer).  Fails when the fitted slope is not positive. */
int rc_model_fit(const double *w, const double *t, int n, int require_min,
		 rc_model *ret, rc_err *err);

typedef struct rc_plan {
	int k;                                  /* devices */
	int views[RC_PLAN_MAX_DEVICES];         /* views per device, sum = W */
	double predicted_s[RC_PLAN_MAX_DEVICES];/* a W_k + b, 0 for W_k = 0 */
	double makespan_s;                      /* max of predicted_s */
	double split_s;                         /* makespan of the split before the host test */
	int single;                             /* >= 0: everything on this device */
	int on_host;                            /* host_s beat every device: run on the host */
} rc_plan;

/* Splits W views across k devices with the given models (invalid ones get
 * nothing) and hw_groups (NULL or "" = unshared).  host_s > 0 is the host's
 * own time for the task (Fig. 6 line 8); pass <= 0 to compare against the
 * best single device only.  Fails when no device has a valid model. */
int rc_plan_split(const rc_model *models, const char *const *hw_groups, int k,
		  int W, double host_s, rc_plan *ret, rc_err *err);

/* The predicted makespan of a given split (for comparing with the paper's). */
double rc_plan_makespan(const rc_model *models, const int *views, int k);

#endif
