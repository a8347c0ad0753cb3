/*
 * fdk_helix: FDK on a helix of nonzero pitch (algo_fdk.c hands it the run;
 * docs/fdk.md argues the method).  Internal to core/.
 */
#ifndef RC_FDK_HELIX_H
#define RC_FDK_HELIX_H

#include "algo/algo.h"

/* The window's edge, in detector rows either side of the Tam-Danielsson
 * boundary (helix.c keeps one row of the detector free for it). */
#define RC_HELIX_EDGE_ROWS 1.0
/* A slab's filtered views are kept under this (or under a quarter of the
 * stack): slabs are made thinner, down to two window reaches, until they
 * are (algo_fdk_helix.c). */
#define RC_HELIX_SLAB_BYTES ((double)(256u << 20))

/* The window the helical FDK weighs g's views with: the widest n-PI
 * window (n = 5, 3) that lies within the detector's rows less one at each
 * edge and over whose n-PI interval every voxel of the volume is seen
 * (helix.c's checks with n half turns), else the Tam-Danielsson window
 * (1, which rc_geom_new checked). */
int rc_fdk_helix_npi(const rc_geom *g);

/* 0 when g (a helix of nonzero pitch) suits the helical FDK; refuses a
 * displaced detector (its data are not complete over a PI interval). */
int rc_fdk_helix_suits(const rc_geom *g, rc_err *err);

/* The helical FDK: weighted and filtered views, back-projected slab by slab
 * with only the views whose window sees the slab (b's geometry; the back
 * projection runs on the CPU engine of each slab).  *stats (may be NULL)
 * gets the voxel-views it back-projected and the most views it held. */
typedef struct rc_fdk_helix_stats {
	int npi; /* the window: 1 (Tam-Danielsson), 3 or 5 (n-PI) */
	double voxel_views;
	int max_views;
	size_t view_bytes; /* what a held view takes: the rows the window reaches */
	int slabs;
} rc_fdk_helix_stats;
int rc_fdk_helix_run(const rc_algo_params *p, rc_backend *b, const float *proj, float *vol,
		     const rc_algo_hooks *hooks, rc_fdk_helix_stats *stats, rc_err *err);

#endif
