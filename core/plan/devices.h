/*
 * devices: the registry of this host's compute devices, their calibration,
 * and the listing of each with its fitted performance models (models.h).
 *
 * Devices: the native CPU engine (always), every OpenCL device of every
 * platform (ICD loader), every CUDA device (engine_cuda.h; none in builds
 * without CUDA).  Each has a stable identity (device_id, the key its models
 * are stored under) and a hardware group: the cpu engine and a CPU OpenCL
 * device are both "host-cpu"; an NVIDIA GPU seen through OpenCL gets the
 * CUDA identity "cuda:GPU-<uuid>" as its group when the driver reports the
 * UUID, so the planner never counts one piece of hardware twice.
 *
 * The cpu engine's identity is rc_cpu_identity (engine_cpu.h), the same
 * string the engine reports, so one device has one id everywhere.
 *
 * Models (models.h) are stored per device identity and problem shape as
 * timed samples (views, seconds) per task.  Calibration replaces them with
 * fresh timed runs at >= 5 workloads; every real job adds its measured times
 * (recon.c) and the line is refitted.
 */
#ifndef RC_DEVICES_H
#define RC_DEVICES_H

#include "backend/engine.h"
#include "backend/exec.h"
#include "plan/models.h"
#include "plan/plan.h"

#define RC_DEVICES_MAX 16
#define RC_DEVICES_MAX_MODELS 16   /* shapes listed per device */

typedef enum rc_device_kind {
	RC_DEVICE_CPU = 0,
	RC_DEVICE_OPENCL,
	RC_DEVICE_CUDA,
} rc_device_kind;

typedef struct rc_device {
	rc_device_kind kind;
	int platform, device;    /* OpenCL indices */
	int ordinal;             /* CUDA device number */
	char engine[16];         /* names.h, an engine word flagged RC_NAME_DEVICE: cpu, opencl, cuda */
	char type[8];            /* "cpu", "gpu", "other" */
	char name[128];
	char device_id[128];     /* model storage key */
	char hw_group[64];
} rc_device;

/* Every device of this host, the cpu engine first.  Never fails for a
 * missing OpenCL or CUDA: those simply add no devices. */
int rc_devices_enumerate(rc_device *out, int max, int *n, rc_err *err);

/* The host CPU's entry of that list (its first), without the others. */
void rc_devices_cpu(rc_device *d);

typedef struct rc_device_open_opts {
	int threads;             /* cpu engine threads; 0 = all cores */
	const char *cache_dir;   /* OpenCL program and work-group caches; NULL = none */
} rc_device_open_opts;

/* Opens device d as an engine for geometry g (borrowed). */
int rc_device_open(const rc_device *d, const rc_geom *g, const rc_device_open_opts *o,
		   rc_engine **ret, rc_err *err);

/* The problem a model is valid for: "cone-128x128x128-256x200-voxel" (the
 * geometry type, volume, detector and back projector; recon.c appends
 * "-splat" where one engine runs the splat pair). */
void rc_shape_key(const rc_geom *g, rc_bp_kind bp, char *buf, size_t len);

/* Times forward (fp) and back (bp) projection on the
 * engine at RC_PLAN_MIN_WORKLOADS + 1 workloads from 1/16 to 1/2 of the
 * views (after one untimed warm-up; the faster of two runs each), fits both models, stores them
 * when model_dir is set.  vol and proj are scratch buffers of the geometry's
 * sizes (contents are overwritten). */
int rc_devices_calibrate(rc_engine *e, rc_fp_kind fp, rc_bp_kind bp, const char *model_dir, const char *device_id,
			 const char *shape, float *vol, float *proj, rc_model out[RC_TASK_COUNT],
			 rc_err *err);

/* Each device with the models stored for it (models.h). */
typedef struct rc_device_listing {
	rc_device dev;
	int nmodels;
	rc_device_model models[RC_DEVICES_MAX_MODELS];
} rc_device_listing;

/* Fills out[0..*n-1] (at most max) with every device and its stored models
 * (model_dir may be NULL: no models). */
int rc_devices_list(const char *model_dir, rc_device_listing *out, int max, int *n, rc_err *err);

#endif
