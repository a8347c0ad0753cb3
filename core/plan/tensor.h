/*
 * tensor: a fan or parallel job on the tensor path of paper 001: the
 * distance-driven system matrix (dd_matrix.h, cached per geometry), its
 * pseudo-Morton ordering (morton.h), BSR fp16 blocks of one WMMA fragment
 * shape (bsr.h), opened as a backend (backend.h, backend_tensor.c) on which
 * every iterative algorithm of algo.h runs, for all slices at once.  On the
 * GPU (RC_HAVE_CUDA and a device) vectors stay on the device and the
 * products run on tensor cores; otherwise on the CPU from the same fp16
 * blocks.
 *
 * Precision: "mixed" (or "fp16") = fp16 matrix, fp32 vectors (the tensor
 * path); "fp32" = the same matrix in CSR fp32 (the reference the mixed path
 * is compared with; CPU, or cuSPARSE on a GPU); "bf16" = mixed with bf16
 * operands in the CPU products where the CPU has AVX512_BF16; "auto" (the
 * default) = mixed (docs/tensor.md, "precision auto").  The report says
 * which ran (report->matrix.precision).
 * On the CPU the mixed path's layout (bsr_cpu.h) is cached per geometry
 * beside the matrix (bsr_cpu_cache.h): a job on a cached geometry maps it.
 * Fragment: 8.32.16 (smallest matrix, paper Table 3) when there are 32 or
 * more slices, 16.16.16 from 16, else 32.8.16; slices are padded to whole
 * fragments on the GPU.
 * Layouts (API.md): projections [slice][view][u], volume [z][y][x], one
 * slice per z.
 */
#ifndef RC_TENSOR_H
#define RC_TENSOR_H

#include <stdint.h>

#include "backend/tensor/backend_tensor.h"
#include "plan/recon_spec.h"

typedef struct rc_tensor_opts {
	const char *cache_dir; /* NULL = build the matrix every time */
	int64_t cache_bytes;   /* cache_dir kept under this (matrix_cache.h); 0 = no bound */
	int fragment;          /* rc_frag, or -1 = by slice count */
	int mixed;             /* 1 = fp16 BSR, 0 = fp32 CSR */
	int gpu;               /* -1 = when present, 0 = never, 1 = required */
	int threads;           /* 0 = all cores */
	int cpu_input;         /* CPU, mixed, AVX-512, 32 slices: rc_spm_input (bsr_cpu.h) of the
				* products, -1 = the default (fp32; RECOND_TENSOR_CPU_INPUT) */
	int cpu_single_rows;   /* CPU, mixed, AVX-512, 32 slices, fp32 or bf16 input: 1 = rows one at a
				* time, not the row groups of bsr_cpu.h (the former kernels, for
				* comparisons) */
	int cpu_blocks;        /* CPU, mixed: 1 = products over the BSR blocks (rc_bsr_mul, the
				* former path, for comparisons), 0 = over the non-zeros (bsr_cpu.h) */
	const float *vol_ref;  /* optional reference volume: error per iteration */
	/* per iteration (through rc_algo_hooks.iterate: the iterate is
	 * downloaded), with the error ||x - ref|| / ||ref|| when vol_ref is
	 * given (else -1) and the relative change ||x_k - x_k-1|| / ||x_k||;
	 * may be NULL */
	void (*iter)(void *ud, int iteration, double residual, double rel_change, double error);
	void *iter_ud;
	/* the set-up's phase and fraction done (rc_recon_spec.setup); may be NULL */
	void (*setup)(void *ud, const char *phase, double fraction);
	void *setup_ud;
} rc_tensor_opts;

void rc_tensor_opts_default(rc_tensor_opts *o);

/* Whether s's tensor job runs the fp32 CSR path: precision fp32, or auto
 * with more than AUTO_MAX_SUBSETS ordered subsets (the rest run the fp16
 * layout).  The memory plan counts the matrix by it. */
int rc_tensor_runs_fp32(const rc_recon_spec *s);

/* The options of a job's spec: its precision (mixed and bf16: the fp16
 * blocks), threads, matrix cache; engine "cpu" runs the CPU path only.
 * RC_EINVAL for a precision that is no word of names.h. */
int rc_tensor_opts_of(const rc_recon_spec *s, rc_tensor_opts *o, rc_err *err);

/* The tensor backend of a run of algo on the fan or parallel geometry g
 * (the job path; plan/open.c opens it for execution.engine): the
 * distance-driven system matrix, or for fdk FBP's back-projection matrix
 * (fbp_matrix.h) as one product; everything it runs on is released with
 * it (rc_backend_free).  Fills report->matrix, report->engine = "tensor"
 * and the device's name and identity (report may be NULL). */
int rc_tensor_open(const rc_tensor_opts *o, const rc_algo_params *algo, const rc_geom *g, rc_backend **ret,
		   rc_recon_report *report, rc_err *err);
/* After a run on rc_tensor_open's backend: the measured milliseconds per
 * product into report->dev[0] (the GPU times a pair now when ran is
 * non-zero: its calls are queued, not timed one by one). */
void rc_tensor_report(rc_backend *b, int ran, rc_recon_report *report);

/* Open, run (with opts->iter's per-iteration error), report and close:
 * for tests and benchmarks. */
int rc_tensor_solve(const rc_tensor_opts *o, const rc_algo_params *algo, const rc_geom *g,
		    const float *proj, float *vol, const rc_algo_hooks *hooks,
		    rc_recon_report *report, rc_err *err);

#endif
