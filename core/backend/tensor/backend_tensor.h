/*
 * backend_tensor: the tensor backend (backend.h) over the distance-driven
 * system matrix of a fan or parallel geometry (backend_tensor.c).
 *
 * Vectors are the tensor path's [row][ncols] arrays: row = an ordered,
 * padded index (rows_pad projection rows, in pseudo-Morton order of
 * (view, bin); cols_pad pixels for a volume), ncols >= nz slices side by
 * side, columns nz.. and padding rows zero.  upload/download gather and
 * scatter the host layouts.  Batches are the nz slices (one column each).
 * forward and back: A and A^T for every rc_fp_kind / rc_bp_kind (the DD
 * pair is matched).  A view subset costs a full product, except on the
 * CPU's fp32 CSR, where it costs its share (see the .c).
 */
#ifndef RC_BACKEND_TENSOR_H
#define RC_BACKEND_TENSOR_H

#include <stdint.h>

#include "backend/backend.h"

struct rc_bsr;
struct rc_bsr_cpu;
struct rc_csr;
struct rc_tgpu;

typedef struct rc_tensor_mat {
	const rc_geom *g;
	struct rc_bsr_cpu *cpu;           /* CPU: fp16 products over the non-zeros (bsr_cpu.h) when non-NULL */
	const struct rc_bsr *bsr;         /* CPU: fp16 products over the blocks when non-NULL and cpu is NULL */
	const struct rc_csr *csr, *csr_t; /* CPU: fp32 products when bsr is NULL */
	const int32_t *rperm, *cperm;     /* natural -> ordered index; NULL = identity */
	int64_t rows_pad, cols_pad;
	int ncols;                        /* >= nz; a multiple of 32 on the GPU */
	int threads;                      /* CPU products, 0 = all cores */
	struct rc_tgpu *gpu;              /* non-NULL: device vectors and products */
	int gpu_kind;                     /* rc_tgpu_kind of the products */
	int fbp_start;                    /* CPU, the system matrix: RC_BP_VOXEL is FBP's back projection
					   * (RC_BK_FDK: an iterative job's FDK start), A^T scaled per pixel
					   * so that its sum over the views weighs as FBP's (backend_tensor.c) */
	double proj_div;                  /* 0 or 1: none; else projections are divided by it at upload
					   * and multiplied at download (FBP's matrix is scaled by D^2
					   * on a fan so that fp16 holds its weights: tensor.c) */
} rc_tensor_mat;

/* Borrows everything m points to (it must outlive the backend).  The CPU
 * path times its products into b->stats (a subset's product counts as one
 * over every view: it is one); the GPU path queues them untimed. */
int rc_backend_tensor_new(const rc_tensor_mat *m, rc_backend **ret, rc_err *err);

/* The GPU path: milliseconds of one forward and one back product, timed
 * now (its calls are queued, not timed one by one); 0 and 0 on the CPU
 * path, whose products b->stats counts. */
void rc_backend_tensor_time(rc_backend *b, double *ms_forward, double *ms_back);

#endif
