/*
 * ooc: out-of-core FDK, a job whose worker would not fit its memory budget
 * (memory.h) reconstructed in z-slabs of the volume.
 *
 * A slab [z0, z1) of the volume needs, from every view, only the detector
 * rows its voxels project onto (rc_ooc_slab_rows: the slab's box projected
 * through every view, plus the rows the back projection's bilinear
 * interpolation reads next to them).  FDK filters along detector rows
 * (algo_fdk.c: weights of (u, v), a ramp along u), so those rows filtered
 * alone are the rows of the whole stack filtered.  A slab is therefore an
 * FDK job of its own: the volume narrowed to [z0, z1) (cz moved), the
 * detector narrowed to rows [r0, r1) (offset_v moved, or the matrices' v
 * row shifted by r0), run by rc_recon_run on the job's engine (auto: the
 * cpu engine, which the plan counts), from rows
 * read with pread out of the stack file.  Its peak is rc_plan_memory of that
 * narrowed job; the plan (rc_ooc_plan_fdk) takes the thickest slab whose
 * peak fits the budget.  The result equals the in-memory FDK up to the
 * order of float sums.
 *
 * Where FDK filters view by view on the job's own detector (cone and
 * matrices without a displaced detector: rc_ooc_filters_once), the rows
 * slabs share (the cone's spread) are not filtered again per slab: a first
 * pass filters the stack once, in chunks of whole views, into a scratch
 * file (rc_ooc_filter, rc_fdk_filter_views), and each slab reads its rows
 * of that file, RC_OOC_FDK_VIEWS views at a time, and only back-projects
 * them onto itself (RC_BP_VOXEL, as rc_fdk_run does after filtering, on
 * a backend over the chunk's views cut from the job's geometry with the
 * slab's volume and rows, rc_geom_slab; one report per slab); a slab then
 * holds its rows of those views only, once.  Fan, parallel and displaced detectors
 * run each slab as a whole FDK job (2-D slabs share no rows).
 *
 * Streaming jobs and counts (input.kind "counts") are not run out of core;
 * neither are iterative methods (the caller refuses them with the memory
 * they need).
 */
#ifndef RC_PLAN_OOC_H
#define RC_PLAN_OOC_H

#include <stdint.h>

#include "algo/algo.h"
#include "plan/recon_spec.h"
#include "projectors/proj_cpu.h"

typedef struct rc_ooc_plan {
	int out_of_core;          /* 1: run from the file (rc_ooc_plan_out_of_core); 0: in core */
	int slabs;                /* z-slabs (1 out of core: the whole volume as one slab) */
	int slab_nz;              /* voxels along z per slab (the last may be thinner) */
	int rows;                 /* the most detector rows (slices for fan, parallel) a slab reads */
	int chunks;               /* chunks of views of the filtering pass (1: none, each slab filters its rows) */
	int filter_chunk;         /* views per chunk of that pass; 0: no pass */
	uint64_t predicted_bytes; /* the worker's predicted peak under this plan */
	uint64_t budget_bytes;    /* what it was planned against; 0 = no budget */
} rc_ooc_plan;

/* Whether plan p runs out of core: the job over its budget, in z-slabs or
 * as one slab (the whole volume fits but not the stack beside it: its rows
 * from a filtering pass chunk by chunk, or, one slice not filtered once,
 * only the rows that slice reads).  Set by the planners on every path past
 * the in-core one, not inferred from slabs: a one-slice volume is one slab
 * either way. */
static inline int rc_ooc_plan_out_of_core(const rc_ooc_plan *p)
{
	return p->out_of_core;
}

/* The detector rows [*r0, *r1) (0 <= r0 <= r1 <= nv; r0 == r1: none) that
 * voxels z0..z1-1 of g's volume project onto in any view, with the rows the
 * bilinear back projection reads beside them.  Fan and parallel: the slices
 * themselves. */
void rc_ooc_slab_rows(const rc_geom *g, int z0, int z1, int *r0, int *r1);

/* s narrowed to volume slices [z0, z1) and detector rows [r0, r1) (cone,
 * matrices; fan and parallel take rows = slices): *sub shares s's pointers
 * but its matrices, which are *owned (free it; NULL when none). */
int rc_ooc_sub_spec(const rc_recon_spec *s, int z0, int z1, int r0, int r1, rc_recon_spec *sub, double **owned,
		    rc_err *err);

/* The plan for s (an FDK job, g its geometry) under budget bytes: in core
 * (out_of_core 0) when rc_plan_memory(s) fits, else the thickest slabs that fit
 * (one slab of the whole volume where the views are filtered once and it
 * fits: rc_ooc_plan_out_of_core).
 * RC_EUNSUPPORTED (field "volume") when not even one slice fits: *p still
 * holds the one-slice plan, whose predicted_bytes is the least it needs. */
int rc_ooc_plan_fdk(const rc_recon_spec *s, const rc_geom *g, uint64_t budget, rc_ooc_plan *p, rc_err *err);

/* Whether g's FDK filters each view once into a file the slabs read
 * (cone, matrices, no displaced detector; never a helix, which is not run
 * in slabs). */
int rc_ooc_filters_once(const rc_geom *g);

/* FDK's filtering of every view of g (s->algo's window), chunk views at a
 * time, from the stack file in (line integrals, fp32, non-finite values
 * read as 0) into out at the same offsets; cancel may be NULL. */
int rc_ooc_filter(const rc_recon_spec *s, const rc_geom *g, int in, int out, int chunk, const atomic_int *cancel,
		  rc_err *err);

/* The FDK of volume slices [z0, z1) of s (geometry g) from the stack file
 * fd (the spec's layout, fp32, starting at offset 0): line integrals
 * (filtered 0: non-finite values read as 0, as the in-memory run's checks
 * zero them), or rc_ooc_filter's output (filtered 1, where
 * rc_ooc_filters_once).  It reads only the rows the slab needs; slab gets
 * nx * ny * (z1 - z0) floats.  hooks may carry cancel only.  The core of
 * the out-of-core run and of a rank's share of an FDK split by z.  Not a
 * helix (RC_EUNSUPPORTED). */
int rc_ooc_fdk_slab(const rc_recon_spec *s, const rc_geom *g, int fd, int filtered, int z0, int z1, float *slab,
		    const rc_algo_hooks *hooks, rc_recon_report *rep, rc_err *err);

/* Views a filtered slab back-projects per call (rc_ooc_fdk_slab): it holds
 * its rows of that many views, not of all, and adds each chunk's back
 * projection onto the slab.  One block of the CPU engine's back projection
 * (RC_BPV_BLOCK): it then keeps no second slab of sums (its tiles), so a
 * budget buys slabs 2-3x as thick, for a write-back of the sums per
 * 32 views (docs/server.md "Out of core"). */
#define RC_OOC_FDK_VIEWS RC_BPV_BLOCK

/* rc_ooc_fdk_slab with filtered rows back-projected views at a time
 * (views <= 0 or >= the job's: all at once); rc_ooc_fdk_slab takes
 * RC_OOC_FDK_VIEWS, which the plan (rc_ooc_plan_fdk) counts. */
int rc_ooc_fdk_slab_views(const rc_recon_spec *s, const rc_geom *g, int fd, int filtered, int z0, int z1, int views,
			  float *slab, const rc_algo_hooks *hooks, rc_recon_report *rep, rc_err *err);

#endif
