/*
 * shepp_case: the iterative algorithms' test problem, shared by
 * test_algos_cpu.c and test_opencl_algo.c: analytic Shepp-Logan projections
 * (phantom 0.94 fov wide) of a cone scan of n^3 voxels over fov mm from
 * nviews views over 360 degrees (D = 1000 mm, S = 1500 mm, a detector of
 * 5n/4 pixels of 1.5 voxels), the phantom voxelised with 4^3 sub-samples as
 * the truth, and a central cylinder as the mask the error is taken over.
 * A file that defines SHEPP_CASE_PIXEL_VOXELS first gets pixels of that many
 * voxels (1.5: voxels project up to ~1.05 pixel apart, so the CPU engine
 * runs the footprint pair; 1.75: at most ~0.9, the splat pair), and one
 * that defines SHEPP_CASE_DETECTOR_PIXELS(n) that many pixels per side, and
 * one that defines SHEPP_CASE_SHAPE a detector of that shape (flat unless
 * told: RC_DETECTOR_CURVED is the cylinder, du an arc length).
 */
#ifndef RC_TEST_SHEPP_CASE_H
#define RC_TEST_SHEPP_CASE_H

#include <stdint.h>
#include <stdlib.h>

#include "geometry/geometry.h"
#include "geometry/metrics.h"
#include "geometry/phantom.h"

#ifndef SHEPP_CASE_PIXEL_VOXELS
#define SHEPP_CASE_PIXEL_VOXELS 1.5
#endif
#ifndef SHEPP_CASE_DETECTOR_PIXELS
#define SHEPP_CASE_DETECTOR_PIXELS(n) ((n) * 5 / 4)
#endif
#ifndef SHEPP_CASE_SHAPE
#define SHEPP_CASE_SHAPE RC_DETECTOR_FLAT
#endif

typedef struct shepp_case {
	rc_geom *g;
	float *proj, *ref; /* projections, voxelised truth */
	uint8_t *mask;
	size_t np, nvox;
	int nd; /* detector pixels per side */
} shepp_case;

/* 0, or -1 with c partly filled (free it with shepp_case_free). */
static int shepp_case_new(int n, int nviews, double fov, shepp_case *c)
{
	int rc = -1;
	rc_phantom *ph = NULL;
	rc_err err;
	double *angles = malloc((size_t)nviews * sizeof *angles);
	*c = (shepp_case){ 0 };
	if (!angles)
		goto out;
	for (int k = 0; k < nviews; k++)
		angles[k] = 360.0 * k / nviews;
	double vx = fov / n;
	rc_volume_desc vol = { .nx = n, .ny = n, .nz = n, .vx = vx, .vy = vx, .vz = vx };
	c->nd = SHEPP_CASE_DETECTOR_PIXELS(n);
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = nviews,
			    .det = { .nu = c->nd, .nv = c->nd, .du = SHEPP_CASE_PIXEL_VOXELS * vx,
				     .dv = SHEPP_CASE_PIXEL_VOXELS * vx, .shape = SHEPP_CASE_SHAPE },
			    .source_isocenter_mm = 1000, .source_detector_mm = 1500, .angles_deg = angles };
	if (rc_geom_new(&sp, &vol, NULL, &c->g, &err))
		goto out;
	c->np = rc_geom_proj_count(c->g);
	c->nvox = rc_volume_count(&vol);
	c->proj = malloc(c->np * sizeof(float));
	c->ref = malloc(c->nvox * sizeof(float));
	c->mask = malloc(c->nvox);
	if (!c->proj || !c->ref || !c->mask || rc_phantom_shepp_logan(0.94 * fov, &ph, &err))
		goto out;
	if (rc_phantom_project(ph, c->g, 0, c->proj, &err) || rc_phantom_voxelize(ph, &vol, 4, 0, c->ref, &err))
		goto out;
	rc_mask_cylinder(&vol, 0.45 * fov, 0.35 * fov, c->mask);
	rc = 0;
out:
	rc_phantom_free(ph);
	free(angles);
	return rc;
}

static void shepp_case_free(shepp_case *c)
{
	free(c->proj);
	free(c->ref);
	free(c->mask);
	rc_geom_free(c->g);
	*c = (shepp_case){ 0 };
}

#endif
