/*
 * splat_dev: what the device engines' splat pairs share (OpenCL:
 * opencl_splat.c, kernels/opencl/splat.cl; CUDA: cuda_splat.c,
 * kernels/cuda/splat.cu): when they run it, and the per-view table the
 * kernels read, in double (the CPU engine's column set-up,
 * core/projectors/proj_splat.c).
 */
#ifndef RC_SPLAT_DEV_H
#define RC_SPLAT_DEV_H

#include <stddef.h>

#include "geometry/geometry.h"

/* The table: RC_SPLAT_DEV_HEAD values (voxel (0, 0, 0) in mm, the voxel
 * size, 2 unused), then RC_SPLAT_DEV_VIEW per view: [0..11] P, [12..14]
 * c0, [15..17] cu, [18..20] cv (rc_splat_gain, times the voxel volume),
 * [21] 1 on a cone view (P[2] = P[10] = 0), [22] 1 / (|P[6]| vz), [23]
 * unused. */
#define RC_SPLAT_DEV_HEAD 8
#define RC_SPLAT_DEV_VIEW 24

/* Whether the device engines run the splat pair on g, as the CPU engine
 * does: a cone or matrices geometry with a flat detector whose voxels
 * project at most RC_SPLAT_MAX_STEP pixels apart (rc_splat_suits), unless
 * RECOND_NO_SPLAT is set. */
int rc_dev_splat_suits(const rc_geom *g);

/* A malloc'd table of *n doubles for g; NULL when out of memory. */
double *rc_splat_dev_table(const rc_geom *g, size_t *n);

#endif
