/*
 * recon: one whole reconstruction job, from a parsed spec and the projection
 * stack to the volume.  This is what the worker process (server/) calls; it
 * owns the choice of engines ("execution.engine"), the plan of views per
 * device (plan.h) and the report of what ran.  No JSON here: server/worker/spec.c
 * parses the job's JSON into rc_recon_spec.
 */
#ifndef RC_RECON_H
#define RC_RECON_H

#include "algo.h"
#include "geometry.h"

#define RC_RECON_MAX_DEVICES RC_EXEC_MAX_ENGINES

typedef struct rc_recon_spec {
	rc_geom_spec geom;
	rc_volume_desc vol;
	rc_algo_params algo;
	char engine[16];     /* auto, cpu, opencl, cuda, tensor, trigeneous */
	char precision[8];   /* fp32 (tensor: mixed = fp16 matrix, fp32 vectors) */
	int threads;         /* CPU threads, 0 = all cores */
	rc_limits limits;
	const char *model_dir; /* where fitted performance models are kept; NULL = none */
	const char *cache_dir; /* tensor: system matrices cached per geometry; NULL = none */
} rc_recon_spec;

/* What ran, for the job's status: per device, the views of each task, the
 * predicted and the measured milliseconds per iteration. */
typedef struct rc_recon_device_report {
	char name[32];
	char device_id[128];
	int views[RC_TASK_COUNT];
	double predicted_ms[RC_TASK_COUNT]; /* < 0: no model */
	double measured_ms[RC_TASK_COUNT];  /* mean per call */
} rc_recon_device_report;

typedef struct rc_recon_matrix_report { /* tensor jobs */
	int present;
	char fragment[16];                  /* "16.16.16" */
	long long nnz;
	double blocks_pct_before, blocks_pct_after;
	long long bytes;
} rc_recon_matrix_report;

typedef struct rc_recon_report {
	char engine[16];                    /* what ran: cpu, opencl, cuda, tensor, trigeneous */
	int ndevices;
	rc_recon_device_report dev[RC_RECON_MAX_DEVICES];
	rc_recon_matrix_report matrix;
	int iterations_done;
	double seconds;
} rc_recon_report;

void rc_recon_spec_default(rc_recon_spec *s);

/* Whether this build runs the spec's algorithm on its geometry type with its
 * execution.engine: 0, or RC_EUNSUPPORTED with a message (field
 * "execution.engine" or "algorithm.name") that names what is supported.
 * Decided from the spec alone, without opening a device, so the daemon can
 * refuse a job at creation instead of failing it when it runs; whether the
 * host has the device is still decided when the job runs. */
int rc_recon_check(const rc_recon_spec *s, rc_err *err);

/* Validates the spec (messages name the field), builds the geometry, opens
 * the engines, runs the algorithm.  proj holds the whole stack
 * (rc_geom_proj_count floats); vol receives rc_volume_count floats.
 * report (may be NULL) is filled also on failure, as far as the run got. */
int rc_recon_run(const rc_recon_spec *s, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_recon_report *report, rc_err *err);

#endif
