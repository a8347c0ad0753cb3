/*
 * memory: a prediction of the worker's peak resident memory for one job,
 * from its spec alone (no geometry is built, nothing is allocated), so the
 * daemon can refuse at creation a job the machine cannot hold instead of
 * letting its worker grow into the OOM killer (server/http/http_jobs.c).
 *
 * The model (bytes; V = one volume, P = the projection stack, both fp32):
 *
 *   base      the process, its libraries, FFTW's plans, thread stacks:
 *             RC_MEM_BASE (50 MiB: a small job's whole peak measures
 *             45-48 MiB); an engine that loads OpenCL or CUDA platforms
 *             (opencl, cuda, trigeneous) adds RC_MEM_DEVICE_LIBS.
 *   fdk       the stack (mapped) + its filtered copy (algo_fdk.c) + the
 *             result volume + on cone and matrices 1.5 volumes measured
 *             beyond them (256^3 and RabbitCT's 512^3): 2 P + 2.5 V (2-D:
 *             2 P + V), streaming or not (a streaming run adds each group
 *             onto the volume, rc_bk_back_add); on
 *             the tensor engine (2-D) FBP's matrix, ~2.5 bytes per view and
 *             pixel.  Cone and matrices FDK then compute the relative
 *             residual (plan/residual.c) while the back projection's kept
 *             tiles (~V) are held: the stack, the result, those tiles and
 *             the forward projector's kept volume copy, P + 3.1 V + the
 *             views compared; the larger of the two phases counts (the
 *             residual's where the stack is small beside the volume).
 *   iterative the vectors rc_algo_vectors counts (result and stack
 *             included; CGLS 3 stacks, not 2: measured) + one volume of the
 *             host backend's scratch, + 3
 *             volumes of TV's host buffers (algo_util.c) when tv_weight > 0;
 *             the FDK start (initial fdk/auto) peaks before the iterations
 *             with fdk's figure: the larger of the two counts.
 *   extended  an iterative run on a 3-D geometry may reconstruct the
 *             volume extended in z (extend.h): V above is then the extended
 *             volume's (rc_extent_bound_nz's slices), and the asked volume
 *             is kept apart on top (+ V asked).
 *   footprint (cone, matrices iterative on the CPU engine, where the
 *             footprint pair runs: asked for, or auto where voxels may
 *             project more than a pixel apart, bounded from above from
 *             the spec, on a flat or curved cone) the pair's buffers on top of the iterations'
 *             (proj_footprint.c): its back projection's block of views
 *             (min(64 MiB, P), a view at least), one view per thread and
 *             the volume's z-fastest copy: min(64 MiB, P) + T view + V.
 *   tensor    (fan, parallel iterative) the system matrix, one 2-D matrix
 *             shared by every slice: nnz ~ views x nx x ny x min(nu, 1 + w / du')
 *             (a pixel's distance-driven footprint w = 1.27 vx over the bin
 *             width du' at the pixel, du / magnification), times the bytes per
 *             non-zero of A and A^T (fp32 CSR: 12.5; mixed / bf16, whose
 *             CPU build holds the fp32 CSR and the non-zero layouts with
 *             their row groups at once: 31, fitted to the fan runs of
 *             docs/benchmarks.md and test_plan.c when the build also held
 *             the BSR blocks; without them 8 + 6 + 6 + ~9 = ~29 per
 *             actual non-zero, ~25 per estimated one: the figure now errs
 *             high by ~20 % of the matrix's share), plus the vectors twice
 *             (host layout and the ordered one).
 *
 * Calibrated against the peak_rss_mb figures of docs/benchmarks.md and runs
 * of small jobs (tests/unit/test_plan.c checks both: never below a
 * measurement, within 30 % above it).  The figure errs on the high side:
 * it is a refusal threshold, not an estimate for a dashboard.
 *
 * FDK's ramp filter holds per worker thread (every core: algo_fdk.c) a
 * batch of rows padded for the FFT, real and complex, and a view's
 * weights: rc_mem_fdk_filter_bytes, on top of FDK's figure (a few MiB on
 * this machine, gigabytes on a many-core host with a wide detector).
 *
 * A job over the budget gets an out-of-core plan whose figure is its
 * slabs' (core/plan/ooc.h, ooc_iter.h: they call this function for a
 * slab's narrowed job) instead of a refusal.
 */
#ifndef RC_PLAN_MEMORY_H
#define RC_PLAN_MEMORY_H

#include <stdint.h>

#include "plan/recon_spec.h"

#define RC_MEM_BASE ((uint64_t)50 << 20)
#define RC_MEM_DEVICE_LIBS ((uint64_t)128 << 20)
/* the footprint pair's block of back-projected views (proj_footprint.c's
 * RC_FPF_BLOCK_BYTES) */
#define RC_MEM_FPF_BLOCK ((uint64_t)64 << 20)
/* the columns of its back projection's tile, each thread's nz sums of each
 * (proj_footprint.c's RC_FPF_TILE squared) */
#define RC_MEM_FPF_TILE_COLS 64

/* Predicted peak resident bytes of the worker running s; streaming: an FDK
 * job that back-projects views as they arrive (the same figure since its
 * groups are added onto the volume in place: kept for the callers).
 * Saturates at UINT64_MAX instead of overflowing. */
uint64_t rc_plan_memory(const rc_recon_spec *s, int streaming);

/* FDK's per-thread filter buffers for s (rc_parallel_threads(0) threads,
 * each a batch of detector rows of the FFT's length, real and complex,
 * and a view of weights). */
uint64_t rc_mem_fdk_filter_bytes(const rc_recon_spec *s);

#endif
