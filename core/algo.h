/*
 * algo: the reconstruction algorithms, written once over rc_exec so that
 * every engine and every split of devices runs them.
 *
 *   FDK   algo_fdk.c   cosine weight, ramp filter (FFTW) with a window,
 *                      Parker weights for a short scan, RC_BP_VOXEL
 *   SART  algo_sart.c  paper 000 Eq. 1, all views per iteration (or ordered
 *                      subsets), relaxation lambda, RC_FP_RAYCAST/RC_BP_VOXEL
 *   SIRT  algo_sirt.c  row/column-sum normalised simultaneous updates
 *   CGLS  algo_cgls.c  paper 001 Alg. 1 on the matched pair RC_FP_RAYCAST /
 *                      RC_BP_MATCHED
 *   MLEM  algo_mlem.c  multiplicative EM update
 *
 * Every iteration calls hooks->progress and checks hooks->cancel; all
 * buffers are allocated once per run, never per iteration.
 */
#ifndef RC_ALGO_H
#define RC_ALGO_H

#include <stdatomic.h>

#include "exec.h"

typedef enum rc_algo_name {
	RC_ALGO_FDK = 0,
	RC_ALGO_SART,
	RC_ALGO_SIRT,
	RC_ALGO_CGLS,
	RC_ALGO_MLEM,
} rc_algo_name;

typedef enum rc_filter_window {
	RC_WINDOW_RAM_LAK = 0,
	RC_WINDOW_SHEPP_LOGAN,
	RC_WINDOW_HANN,
} rc_filter_window;

typedef enum rc_scan_mode {
	RC_SCAN_AUTO = 0,  /* short scan (Parker) when the angular range < 360 deg - one step */
	RC_SCAN_FULL,
	RC_SCAN_SHORT,
} rc_scan_mode;

typedef struct rc_algo_params {
	rc_algo_name name;
	int iterations;          /* iterative algorithms; >= 1 */
	double relaxation;       /* SART/SIRT lambda, (0, 2) */
	int subsets;             /* SART ordered subsets; 1 = all views per iteration */
	int nonnegative;         /* clamp the volume at 0 after each update */
	rc_filter_window window; /* FDK */
	double cutoff;           /* FDK, fraction of Nyquist in (0, 1]; 1 = none */
	rc_scan_mode scan;       /* FDK */
} rc_algo_params;

/* Fills defaults: 10 iterations, lambda 1 (SART) , 1 subset, ram-lak, cutoff 1. */
void rc_algo_params_default(rc_algo_params *p, rc_algo_name name);

/* Parses "sart" etc.; returns 0 or RC_EINVAL. */
int rc_algo_name_parse(const char *s, rc_algo_name *ret);
const char *rc_algo_name_str(rc_algo_name n);
int rc_filter_window_parse(const char *s, rc_filter_window *ret);

typedef struct rc_progress {
	int iteration;      /* 1-based, just finished */
	int of;             /* total iterations */
	double residual;    /* ||A x - b|| (CGLS: ||A^T r|| is also fine; see each algo) */
	double elapsed_s;   /* since the start of the run */
} rc_progress;

typedef struct rc_algo_hooks {
	/* Called after every iteration; may be NULL. */
	void (*progress)(void *ud, const rc_progress *p);
	void *ud;
	/* Non-zero asks the run to stop; checked at least once per iteration
	 * (and per subset / view block).  May be NULL. */
	const atomic_int *cancel;
} rc_algo_hooks;

/* Reconstructs vol (rc_volume_count floats, overwritten) from proj (the whole
 * stack).  Returns RC_ECANCELLED when cancelled (vol then holds the last
 * complete iterate).  hooks may be NULL. */
int rc_algo_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err);

/* The algorithms themselves (same contract); rc_algo_run dispatches. */
int rc_fdk_run(const rc_algo_params *p, rc_exec *x, const float *proj,
	       float *vol, const rc_algo_hooks *hooks, rc_err *err);
int rc_sart_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err);
int rc_sirt_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err);
int rc_cgls_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err);
int rc_mlem_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err);

#endif
