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
 * is compared with; CPU, or cuSPARSE on a GPU).
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

/* The job path for a fan or parallel geometry: every algorithm, fdk as one
 * product with FBP's back-projection matrix (fbp_matrix.h) in place of the
 * distance-driven system matrix; fills report->matrix and report->engine =
 * "tensor".  Engine "cpu" runs the CPU path only. */
int rc_tensor_run(const rc_recon_spec *s, const rc_geom *g, const float *proj, float *vol,
		  const rc_algo_hooks *hooks, rc_recon_report *report, rc_err *err);

typedef struct rc_tensor_opts {
	const char *cache_dir; /* NULL = build the matrix every time */
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
} rc_tensor_opts;

void rc_tensor_opts_default(rc_tensor_opts *o);

/* rc_tensor_run with explicit options (tests, benchmarks). */
int rc_tensor_solve(const rc_tensor_opts *o, const rc_algo_params *algo, const rc_geom *g,
		    const float *proj, float *vol, const rc_algo_hooks *hooks,
		    rc_recon_report *report, rc_err *err);

#endif
