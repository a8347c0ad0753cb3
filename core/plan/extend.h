/*
 * extend: the long object.  A patient, or a long part, reaches beyond the
 * volume a job asks for, and the rays through that volume carry the mass
 * beyond it.  FDK filters row by row and back-projects onto the asked
 * voxels only, so that mass costs it little; an iterative method fits the
 * asked voxels to whole line integrals and piles the mass outside into
 * them (worst in the end slices).  An iterative run on a 3-D geometry
 * therefore reconstructs the asked volume extended in z by the slabs that
 * the rays through it cross inside its x-y column, and keeps the asked
 * slices (rc_recon_run, docs/algorithms.md "The long object").
 *
 * The reach is found from the rays themselves (rc_geom_ray), not from an
 * orbit's formula, so cone (flat and curved), matrices and any geometry
 * whose rays rc_geom_ray gives inherit it: for every view, rows of the
 * detector and a comb of columns, the ray's segment inside the volume's x-y
 * column; where that segment crosses the asked slab, its z range widens
 * the reach.  Every ray that crosses the asked volume then lies, within
 * the column, wholly inside the extended one; rays that cross only the
 * added slabs may still be cut short (the same problem one slab further
 * out, where it no longer lands in the asked slices directly).
 *
 * algorithm.extend "auto" (the default) extends only where the data show
 * mass beyond the asked slab: the rays that cross the column but miss the
 * asked volume (they see nothing but what lies above or below it) carry on
 * average more than RC_EXTEND_MASS_FRACTION of what the rays through it
 * carry, or no such ray exists to tell.  Mass close above or below the
 * asked volume near the axis is seen only by rays through it (a band of
 * about R / (D - R) of the volume's half height, R its x-y radius, D the
 * source's distance): an object that ends there is not extended for;
 * "on" extends whatever the data show, "off" never.
 *
 * The slabs added are at most RC_EXTEND_MAX_SIDE times the asked nz each
 * side; where the extended geometry cannot be built (a source inside it),
 * rc_recon_run runs the asked volume (report->run_nz says which ran).
 *
 * The volume's x-y extent is not extended: an object wider than the asked
 * column (lateral truncation) stays the iterative methods' limit there.
 */
#ifndef RC_PLAN_EXTEND_H
#define RC_PLAN_EXTEND_H

#include "plan/recon_spec.h"

/* The mean line integral of the rays that miss the asked volume in its
 * column, over that of the rays through it, above which "auto" extends. */
#define RC_EXTEND_MASS_FRACTION 0.01

/* The most slices a run adds on each side, times the asked nz.  A circular
 * or helical orbit's rays reach (D + R)/(D - R) - 1 of the half height
 * beyond each face, or a column's width times the cone's slope: well
 * within it; rays that run along the column (sources above the volume, as
 * in tomosynthesis) would reach to their sources. */
#define RC_EXTEND_MAX_SIDE 1.0

typedef struct rc_extent {
	rc_volume_desc run; /* the volume the iterations run on (the asked one, or it extended in z) */
	int z0;             /* the asked slice 0 is run's slice z0 */
	int below, above;   /* slices the rays through the asked volume reach beyond it, each side */
	int mass_beyond;    /* the data's verdict: 1 mass beyond, 0 none, -1 no ray to tell (no data: -1) */
} rc_extent;

/* The extent of an iterative run of g on proj (may be NULL: the data not
 * read, mass_beyond -1) under mode: run is g's volume unless mode is on,
 * or auto with mass_beyond != 0, and the reach is not 0.  Fan and parallel
 * geometries (independent slices) are never extended.  Nothing is
 * allocated. */
void rc_extent_plan(const rc_geom *g, const float *proj, rc_extend mode, rc_extent *e);

/* The extent of job s on proj: its geometry built (s->limits; err says
 * why not) and rc_extent_plan under s->algo.extend, or the asked volume for
 * fdk.  What rc_recon_run reconstructs, so a caller can size what it keeps
 * of the run's state (checkpoints) before it. */
int rc_extent_of(const rc_recon_spec *s, const float *proj, rc_extent *e, rc_err *err);

/* rc_extent_of's decision on the asked geometry ga already built: fdk,
 * extend off and 2-D geometries run the asked volume; an extension whose
 * geometry cannot be built (a source inside it) falls back to it. */
void rc_extent_decide(const rc_recon_spec *s, const rc_geom *ga, const float *proj, rc_extent *e);

/* The same from the stack's file fd (fp32 in the spec's layout; a view per
 * read where every row is sampled, nv <= 512, else a sampled row per read;
 * non-finite values as 0): the out-of-core
 * run's (core/plan/ooc_iter.c), whose stack is never in memory whole.
 * 0, or RC_EIO / RC_ENOMEM in err. */
int rc_extent_decide_file(const rc_recon_spec *s, const rc_geom *ga, int fd, rc_extent *e, rc_err *err);

/* An upper bound of the extended run's nz from the spec alone (the
 * memory prediction, memory.c): s->vol.nz for fdk, fan, parallel and
 * extend off; for a cone the reach of rays from a source at distance D
 * through the volume's x-y radius R, (D + R) / (D - R) of its z edges,
 * within the detector's rows; for other geometries their rays' reach
 * where the spec holds its arrays (the geometry built without limits), from
 * a coarser scan than the run's so that job creation stays quick (at most
 * 720 views and 48 rows, the rows beside the last crossing ones counted,
 * 2 slices more each side), else the asked nz. */
int rc_extent_bound_nz(const rc_recon_spec *s);

#endif
