/*
 * recon_spec: the types of one reconstruction job as core sees it: what to
 * run (rc_recon_spec, parsed from the job's JSON by server/worker/spec.c)
 * and what ran (rc_recon_report).  Apart from recon.h so that the paths a
 * job can take (tensor.h) share them without including recon.h.
 */
#ifndef RC_RECON_SPEC_H
#define RC_RECON_SPEC_H

#include "algo/algo.h"
#include "algo/names.h"
#include "geometry/geometry.h"

#define RC_RECON_MAX_DEVICES RC_EXEC_MAX_ENGINES

typedef struct rc_recon_spec {
	rc_geom_spec geom;
	rc_volume_desc vol;
	rc_algo_params algo;
	rc_engine_choice engine; /* execution.engine, parsed once by the spec (names.h) */
	char precision[8];   /* auto (tensor: mixed; fp32 = CSR fp32, mixed = fp16 matrix, fp32
			      * vectors, bf16 = mixed with bf16 operands) */
	int threads;         /* CPU threads, 0 = all cores */
	rc_limits limits;
	const char *model_dir; /* where fitted performance models are kept; NULL = none */
	const char *cache_dir; /* tensor: system matrices cached per geometry; NULL = none */
	int64_t cache_bytes;   /* the bound on cache_dir (matrix_cache.h); 0 = none */
	int residual;          /* after the run, one forward projection of the result:
				* report->relative_residual (plan/residual.c) */
	/* the tensor path's set-up before the run (may be NULL): its phase
	 * ("loading_matrix" from the cache, "building_matrix") and the
	 * fraction of it done, 0 to 1 */
	void (*setup)(void *ud, const char *phase, double fraction);
	void *setup_ud;
	/* Optional (NULL: none): a backend over the one the job opened, that
	 * the algorithm runs on (the worker's MPI ranks split views so:
	 * server/worker/mpi/mpi_backend.c).  It borrows inner; the run frees
	 * it before inner.  Reports and the residual use inner. */
	int (*wrap)(void *ud, rc_backend *inner, rc_backend **ret, rc_err *err);
	void *wrap_ud;
	/* Optional (NULL: rc_recon_run decides): the run's extent as
	 * rc_extent_of found it for this spec and data (extend.h), so a
	 * caller that sized its checkpoints by it does not scan twice */
	const struct rc_extent *extent;
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
	char precision[8];                  /* what ran: fp32, mixed, bf16 */
	char cache[8];                      /* hit (the matrix in the form the products read came
					       from the cache), miss (built, then stored), off */
	double setup_s;                     /* rc_tensor_open: matrix, ordering, layout */
} rc_recon_matrix_report;

typedef struct rc_recon_report {
	char engine[16];                    /* what ran: cpu, opencl, cuda, tensor, trigeneous */
	char projector[16];                 /* the iterative algorithm's matched pair: splat, raycast,
					       distance-driven (fan, parallel); "" for fdk */
	int ndevices;
	rc_recon_device_report dev[RC_RECON_MAX_DEVICES];
	rc_recon_matrix_report matrix;
	int iterations_done;
	double seconds;
	double relative_residual;           /* ||p - Ax|| / ||p|| of the result; NaN = not computed */
	/* the long object (extend.h): the slices the iterations ran on (the
	 * asked nz where not extended; 0 before the run got there), the asked
	 * volume's first among them, the data's verdict (rc_extent's
	 * mass_beyond) */
	int run_nz, run_z0, mass_beyond;
	double tv_weight;                   /* the TV weight that ran (algo.h's rc_tv_weight: the
					       default follows the data's noise); 0 for fdk or off */
} rc_recon_report;

#endif
