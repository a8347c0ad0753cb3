/*
 * engine: one compute device seen by the algorithms.
 *
 * An engine is opened for one geometry (its constructor, e.g.
 * rc_engine_cpu_new in engine_cpu.h, uploads whatever stays resident) and then
 * forward-projects or back-projects any range of views [first, last).  Because
 * any engine can run any view range, the planner (plan.h) can split a task
 * across any set of devices and exec.h runs the split.
 *
 * Buffers are host memory in the layouts of ARCHITECTURE.md: projections
 * float32 [view][v][u] (the whole stack, indexed by absolute view number;
 * fan/parallel: [slice][view][u] as API.md says, index rows through
 * rc_geom_row_offset / rc_geom_view_stride / rc_geom_row_stride),
 * volumes float32 [z][y][x].  An engine may keep device copies; it must not
 * keep pointers to the caller's buffers between calls.
 */
#ifndef RC_ENGINE_H
#define RC_ENGINE_H

#include "geometry/geometry.h"
#include "util/rc_error.h"

typedef enum rc_fp_kind {
	RC_FP_RAYCAST = 0, /* ray casting, trilinear sampling (paper 002 Alg. 2);
	                      its exact adjoint is RC_BP_MATCHED */
	RC_FP_ROTATE,      /* rotation + projection (paper 000 §3.2, Approach B);
	                      circular geometries (cone) only */
	RC_FP_SPLAT,       /* voxel-driven splatting, the transpose of RC_BP_VOXEL
	                      times a per-pixel gain; its exact adjoint is
	                      RC_BP_SPLAT (engines with `splat` set only) */
	RC_FP_FOOTPRINT,   /* separable footprints (SF-TR); its exact adjoint
	                      is RC_BP_FOOTPRINT (engines with `footprint`
	                      set only) */
} rc_fp_kind;

typedef enum rc_bp_kind {
	RC_BP_VOXEL = 0,   /* voxel-driven, bilinear, 1/w^2 (paper 002 Eq. 1):
	                      the FDK and SART back projector */
	RC_BP_MATCHED,     /* exact adjoint (transpose) of RC_FP_RAYCAST, for CGLS */
	RC_BP_SPLAT,       /* exact adjoint of RC_FP_SPLAT: RC_BP_VOXEL of the
	                      projections times the gain (proj_splat.c) */
	RC_BP_FOOTPRINT,   /* exact adjoint of RC_FP_FOOTPRINT (proj_footprint.c) */
} rc_bp_kind;

typedef struct rc_engine rc_engine;

typedef struct rc_engine_ops {
	/* proj[views first..last-1] = A_kind(vol) for those views; other views
	 * of proj are left untouched. */
	int (*forward)(rc_engine *e, rc_fp_kind kind, const float *vol,
		       float *proj, int first, int last, rc_err *err);
	/* vol = sum over views first..last-1 of the back projection of proj
	 * (vol is overwritten, not accumulated). */
	int (*back)(rc_engine *e, rc_bp_kind kind, const float *proj,
		    float *vol, int first, int last, rc_err *err);
	void (*free)(rc_engine *e);
	/* Optional (NULL: the engine only overwrites): vol += the back
	 * projection of views first..last-1 of proj, for every kind `back`
	 * takes, without a volume of scratch where the projector can add in
	 * place (RC_BP_VOXEL and RC_BP_SPLAT on every engine: the OpenCL and
	 * CUDA splat gathers add from their first chunk when asked): a
	 * streaming FDK adds each group of views so (algo_fdk.c). */
	int (*back_add)(rc_engine *e, rc_bp_kind kind, const float *proj,
			float *vol, int first, int last, rc_err *err);
} rc_engine_ops;

/* Fields every engine fills; engines embed this struct first. */
struct rc_engine {
	const rc_engine_ops *ops;
	const rc_geom *geom;     /* borrowed; outlives the engine */
	char name[32];           /* "cpu", "opencl", "cuda" */
	char device_id[128];     /* stable identity of the device, for model storage */
	char hw_group[64];       /* engines with the same hw_group share hardware
	                            (PoCL's CPU device and the cpu engine): the
	                            planner never counts them as two */
	int splat;               /* runs RC_FP_SPLAT and RC_BP_SPLAT for this
	                            geometry (the CPU engine, where
	                            rc_splat_suits holds): the algorithms' matched
	                            pair is then the splat pair (backend.h) */
	int footprint;           /* runs RC_FP_FOOTPRINT and RC_BP_FOOTPRINT
	                            (the CPU engine, where rc_footprint_suits
	                            holds) */
	int footprint_auto;      /* and projector auto picks it where the splat
	                            pair is not offered (backend.h): footprint,
	                            less on a curved cone whose voxels project
	                            at most a pixel apart (there ray casting's
	                            pair is closer to line integrals) */
};

static inline int rc_engine_forward(rc_engine *e, rc_fp_kind kind, const float *vol,
				    float *proj, int first, int last, rc_err *err)
{
	return e->ops->forward(e, kind, vol, proj, first, last, err);
}

static inline int rc_engine_back(rc_engine *e, rc_bp_kind kind, const float *proj,
				 float *vol, int first, int last, rc_err *err)
{
	return e->ops->back(e, kind, proj, vol, first, last, err);
}

/* engine.h's back_add; RC_EUNSUPPORTED where the engine has none. */
static inline int rc_engine_back_add(rc_engine *e, rc_bp_kind kind, const float *proj,
				     float *vol, int first, int last, rc_err *err)
{
	if (!e->ops->back_add)
		return rc_fail(err, RC_EUNSUPPORTED, "", "the %s engine has no accumulating back projection", e->name);
	return e->ops->back_add(e, kind, proj, vol, first, last, err);
}

static inline void rc_engine_free(rc_engine *e)
{
	if (e)
		e->ops->free(e);
}

#endif
