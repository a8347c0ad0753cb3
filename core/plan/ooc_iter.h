/*
 * ooc_iter: out-of-core CGLS, SIRT, SART and MLEM (OS-EM too), an iterative job whose vectors would not fit
 * its worker's memory budget (memory.h), run in z-slabs of the volume and
 * chunks of views, every vector streamed from files each iteration.
 *
 * The voxel-driven pairs (splat, footprint: docs/cpu-engine.md) are sums
 * over voxels, so they are exactly additive over z-slabs: A x = sum over
 * slabs of A_slab x_slab and (A^T y)_slab = A_slab^T y, where A_slab is the
 * job narrowed to the slab's slices (cz moved), to the detector rows the
 * slab projects onto (rc_ooc_slab_rows, ooc.h) and to a chunk of views
 * (angles or matrices from the chunk's first view).  Ray casting's pair
 * interpolates across slab boundaries and is not additive: it is refused
 * (projector auto takes the voxel-driven pair the in-memory run would,
 * else it is refused too).
 *
 * CGLS's vectors: x (the volume file being written), d and s (volume
 * scratch file, slab after slab), r and q (projection scratch file, view
 * chunk after view chunk).  One iteration:
 *   q = A d     per view chunk: q's chunk zeroed, per slab: d's slab read,
 *               projected onto the slab's rows of the chunk, added; written
 *   alpha = gamma / ||q||^2; r -= alpha q, x += alpha d (streamed)
 *   s = A^T r   per slab: per view chunk the slab's rows of r read and
 *               back-projected, summed; written (||s||^2)
 *   beta = ||s||^2 / gamma; d = s + beta d (streamed)
 * I/O per iteration (V a volume, P a stack, C chunks, S slabs, R the rows
 * a slab reads over the detector's nv): reads C V + S (R / nv) P + 4 V + 2 P,
 * writes 3 V + 2 P.  The start: algorithm.initial zero, or fdk / auto
 * (where the in-memory run would take FDK) the out-of-core FDK (ooc.h)
 * into x first, its filtered stack in the q region, then r = p - A x0.
 *
 * SIRT (algo_sirt.c): rinv = 1 / A 1 (a forward pass of ones, guarded as
 * the backend guards it: a pass for the maximum, one to invert) at 0 of
 * pscr, C = 1 / A^T 1 likewise at 0 of vscr; per iteration a forward pass
 * of x whose chunks become rinv (p - A x) before they are written (at P of
 * pscr), then a back projection pass whose slabs update x in place
 * (x += lambda C s, clamped with nonnegative), x's start clamped too.  I/O
 * per iteration: reads C V + S (R / nv) P + 2 V + 2 P, writes V + P.
 *
 * MLEM (algo_mlem.c, one subset) runs SIRT's passes as algo_sart.c's EM: A 1 only for the
 * start (sum p+ / sum A 1: filled, or the FDK start floored at
 * RC_EM_START_FLOOR of it), each chunk of A x made the ratio p+ / A x, each
 * slab x *= C A^T (ratio); its TV descent always clamps.
 *
 * SART and OS-EM (rc_sart_core with S blocks of views, rc_ooc_iter_subsets;
 * SART's one block too): R = 1 / A 1 as SIRT's at 0 of pscr; per block in
 * rc_subset_order's order, its residual from its A x (held in memory, a
 * block of views) and p, then one pass over x: per slab read, updated with
 * its back projection of the residual (SART: RC_BP_VOXEL, rc_sart_run's)
 * and the block's column sums, written, and projected onto the next
 * block's views into the next A x.  TV's T = ceil(tv.steps / S) steps per
 * block run in the same pass as a wavefront (slab j updated while slab
 * j - k takes step k; T + 1 slabs in flight, T carried slices).  The
 * column sums as colsum.c has them: SART's closed form where the in-memory
 * run takes it (the check on block 0's B_0(1), slab by slab, at the
 * start), else B_s(1) inverted against the block's largest value (found
 * at the start: a back projection of ones per block), B_s(1) written then
 * at blk V of vscr and read back per slab where rc_ooc_iter_colsum_kept,
 * else back-projected again per slab.  I/O per iteration: reads S V + 2 P
 * (OS-EM: P; kept sums: S V more), writes S V; the first block's A x none more (x0 zero, or floored: formed in
 * the floor's pass) but from an FDK start without nonnegative (a pass, once).
 *
 * A job's defaults run as in memory:
 *   - the stop rules (algo_util.h's rc_stop): a pass over the stack after
 *     the start (the FDK start plans against the whole budget, this pass
 *     fills q's chunk), in pieces of whole blocks of noise.h's rows
 *     (non-finite values as 0), gives ||p||, the noise energies
 *     (discrepancy; the default TV weight's relative noise, rc_tv_weight)
 *     and sum p exactly as the whole stack does; the residual each
 *     iteration is the streamed ||p - A x||, the stop's reason goes to the
 *     progress call.  Reads P, only where the discrepancy (without
 *     noise_sigma), TV, MLEM or SIRT's tolerance needs it: CGLS's tolerance
 *     takes ||p|| from its copy r = p.
 *   - algorithm.extend "auto": the data's verdict (extend.h's
 *     rc_extent_decide_file, a view or a sampled row per read) before the run; where
 *     it would extend the volume, the run is refused (field
 *     algorithm.extend, with the memory the extended run needs in core).
 *     "on" is refused by the plan where the in-memory run would extend
 *     (rc_extent_decide: the rays reach beyond the volume and the extended
 *     geometry can be built).  Reads at most P.
 *   - TV (rc_tv; tv_host.h's operator D^T W(w) D d, a stencil one slice
 *     deep in z): per slab over the slab and a slice of halo each side, its
 *     values in the slab the whole volume's.  Its scale s = sum p / sum A 1
 *     takes a forward pass of ones (SIRT's and SART's A 1 pass already),
 *     CGLS's mean of A^T A 1 that pass's ||A 1||^2 / voxels (algo_cgls.c's:
 *     the pair is a transpose pair).  CGLS per iteration: d^T L(x) d
 *     (reads 2 V) and grad TV(x) in the back projection's slabs (reads V),
 *     each with 2 (S - 1) slices of halo more, d restarted every
 *     RC_CGLS_RESTART (algo_util.h) iterations as algo_cgls.c does.  SIRT:
 *     the tv.steps descent steps after each update, a pass each in place
 *     (the slice below a slab carried from before its update): reads V and
 *     S - 1 slices, writes V per step.  The operator's weights are
 *     allocated once per run (rc_tv_apply_in).
 *
 * Refused out of core (the caller says so with the memory in core): an
 * extended volume, fan and parallel geometries, checkpoints (none are
 * taken), algorithm.initial "given".  CGLS's
 * algorithm.nonnegative clamps the result at the end as in memory.
 */
#ifndef RC_PLAN_OOC_ITER_H
#define RC_PLAN_OOC_ITER_H

#include <stdint.h>

#include "algo/algo.h"
#include "plan/ooc.h"
#include "plan/recon_spec.h"

/* The voxel-driven pair s runs on g (splat or footprint: what projector
 * auto takes in memory), RC_PROJECTOR_RAYCAST where that is ray casting's. */
rc_projector rc_ooc_iter_pair(const rc_recon_spec *s, const rc_geom *g);

/* SART's and OS-EM's blocks of views S (rc_algo_subsets; SART's one
 * block included) where s runs as blocks out of core, else 0 (CGLS, SIRT,
 * MLEM with one subset). */
int rc_ooc_iter_subsets(const rc_recon_spec *s);
/* The most blocks whose B_s(1) the run keeps on disk (colsum kept: S
 * volumes in vscr) instead of back-projecting them again per slab */
#define RC_OOC_COLSUM_KEEP_BLOCKS 8
/* Whether s's column sums are kept in vscr (B_s(1), S volumes): OS-EM and
 * one-block SART (the closed form never theirs) with S at most
 * RC_OOC_COLSUM_KEEP_BLOCKS; SART's other blocks take the closed form or
 * are back-projected again */
int rc_ooc_iter_colsum_kept(const rc_recon_spec *s);
/* Whether s's SART may take the column sums' closed form on g (colsum.h:
 * blocks, not all kept, every view covering the volume; the weights are
 * measured at the start): only then are its sums held */
int rc_ooc_iter_form_may(const rc_recon_spec *s, const rc_geom *g);
/* The bytes an out-of-core run of s writes beside the spool's stack: the
 * volume's temporary and the scratch files of rc_ooc_iter (vscr's volumes,
 * pscr's stacks; the FDK start's filtered stack is pscr's first). */
uint64_t rc_ooc_iter_disk_bytes(const rc_recon_spec *s);
/* TV's steps per block (rc_tv_new's ceil(tv.steps / S), SIRT's and CGLS's
 * S = 1); 0 without TV. */
int rc_ooc_iter_tv_steps(const rc_recon_spec *s);

/* Why s (geometry g, NULL: not built) cannot run its iterative method out of core, or NULL. */
const char *rc_ooc_iter_refusal(const rc_recon_spec *s, const rc_geom *g);

/* The plan for s (CGLS, SIRT, SART or MLEM, g its geometry) under budget bytes: in core
 * (slabs 1) when rc_plan_memory(s) fits, else slabs (slab_nz, rows: the
 * most a slab reads) and chunks of views (chunks; each holds
 * ceil(nviews / chunks) views; SART and OS-EM: chunks their S blocks)
 * that fit, chosen for the least I/O per iteration; predicted_bytes also
 * covers the FDK start.  RC_EUNSUPPORTED
 * (field "volume") when none fits (*p: the least plan's figure) or when
 * rc_ooc_iter_refusal says why. */
int rc_ooc_plan_iter(const rc_recon_spec *s, const rc_geom *g, uint64_t budget, rc_ooc_plan *p, rc_err *err);

/* Bytes read plus written per CGLS iteration by plan p (the figure above,
 * plus TV's passes where s has TV; SIRT's and MLEM's are lower without TV;
 * SART's and OS-EM's 2 S V + 2 P, OS-EM's P less, S V more where the
 * column sums are kept, TV's steps adding none). */
uint64_t rc_ooc_iter_io(const rc_recon_spec *s, const rc_ooc_plan *p);

/* CGLS, SIRT, SART or MLEM (s->algo.name) of s (geometry g) under plan p from the stack file stack (fp32, the
 * spec's layout, non-finite values read as 0) into the volume file xfd
 * (read-write, written whole: nx * ny * nz fp32 from offset 0), with
 * scratch files vscr (2 volumes; SIRT, MLEM 1; SART, OS-EM S where
 * rc_ooc_iter_colsum_kept, else none) and pscr
 * (2 stacks; SART and OS-EM 1: A 1) open read-write.
 * hooks: progress after each iteration (residual ||p - A x||), cancel
 * between and within the passes; iterate, phase and checkpoints are not
 * called.  rep: iterations_done, seconds, relative_residual (||r|| / ||p||
 * before the clamp; NaN with nonnegative, and for SIRT and MLEM), projector,
 * run_nz, run_z0 and mass_beyond (the asked volume's), tv_weight. */
int rc_ooc_iter(const rc_recon_spec *s, const rc_geom *g, int stack, int xfd, int vscr, int pscr,
		const rc_ooc_plan *p, const rc_algo_hooks *hooks, rc_recon_report *rep, rc_err *err);

#endif
