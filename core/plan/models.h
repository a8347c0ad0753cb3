/*
 * models: the store of fitted performance models (plan.h), per device
 * identity and problem shape.  Only files and numbers: no device is opened,
 * so the daemon can read it for GET /v1/devices while workers write it.
 *
 * One file per device and shape: <model_dir>/<device>-<hash>/<shape>.model
 * (<device> is the device_id made file-name safe, <hash> keeps ids that
 * sanitise alike apart), plain lines:
 *   device <device_id>
 *   shape <shape>
 *   updated <task> <unix seconds>       the last store of that task's samples
 *   sample <task> <views> <seconds>     one timed run (task 0 forward, 1 back)
 * The model is the line fitted through a task's samples when it is read, so
 * the samples are the truth and a refit is only adding samples.  Files are
 * written atomically (temp, fsync, rename): a reader sees the old or the new.
 */
#ifndef RC_MODELS_H
#define RC_MODELS_H

#include <stddef.h>

#include "backend/exec.h"
#include "plan/plan.h"

#define RC_MODEL_MAX_SAMPLES 32    /* per device, shape and task */

/* Loads the models of device_id for shape (both tasks).  A device or shape
 * without a file gives invalid models and returns 0. */
int rc_models_load(const char *model_dir, const char *device_id, const char *shape,
		   rc_model out[RC_TASK_COUNT], rc_err *err);

/* Adds n samples (views w[i] took t[i] seconds) of task to the stored ones
 * (replace = 1 drops the old samples first: a calibration), refits, stores.
 * A sample at a workload already stored is averaged half/half with it (the
 * model follows the device); when full, a new workload replaces the oldest.
 * The new model is returned in *ret (may be NULL; invalid when the samples
 * cannot be fitted yet).  model_dir NULL or "": fits without storing. */
int rc_models_add(const char *model_dir, const char *device_id, const char *shape,
		  rc_task task, const double *w, const double *t, int n, int replace,
		  rc_model *ret, rc_err *err);

/* One stored shape of a device. */
typedef struct rc_device_model {
	char shape[64];
	rc_model model[RC_TASK_COUNT];   /* .valid = 0: none (yet) for that task */
	int samples[RC_TASK_COUNT];      /* stored samples per task */
	long long updated[RC_TASK_COUNT];/* unix seconds of the last store; 0 = never */
} rc_device_model;

/* Every shape stored for device_id, sorted by shape, at most max (the rest
 * are left out).  No directory or no models: *n = 0, returns 0. */
int rc_models_list(const char *model_dir, const char *device_id, rc_device_model *out, int max,
		   int *n, rc_err *err);

#endif
