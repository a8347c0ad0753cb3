/*
 * bench-longobj: the long object (core/plan/extend.h, docs/algorithms.md
 * "The long object").  A body 240 mm long (an ellipsoid of 200 x 150 mm
 * across with a long rod and inserts inside and beyond the volume), an
 * 80-slice volume of 128 x 128 voxels of 2 mm (1 mm slices: 256 x 256 x
 * 80 mm), 180 views over 360 degrees of 200 x 120 pixels of 2 mm, D = 600
 * mm, S = 1000 mm (the rows see 144 mm at the isocentre); exact analytic
 * projections.  One row per run through rc_recon_run with the job's
 * defaults: FDK, then each iterative method with algorithm.extend "off" and
 * "auto": the relative error over all the asked slices, over the central
 * eight and in the worst slice, the slices the iterations ran on and the
 * seconds.
 * RECOND_BENCH_QUICK=1: 64 x 64 x 40 voxels from 90 views of 100 x 60.
 * RECOND_BENCH_ALGOS=cgls,sart (default all four); RECOND_BENCH_THREADS=n.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/metrics.h"
#include "geometry/phantom.h"
#include "plan/recon.h"

static double slice_error(const float *x, const float *t, size_t slice, int z0, int n)
{
	return rc_metric_rel_error(x + (size_t)z0 * slice, t + (size_t)z0 * slice, NULL, (size_t)n * slice);
}

int main(void)
{
	const char *q = getenv("RECOND_BENCH_QUICK"), *th = getenv("RECOND_BENCH_THREADS");
	const char *al = getenv("RECOND_BENCH_ALGOS");
	int quick = q && *q && strcmp(q, "0") != 0, s2 = quick ? 2 : 1;
	int nviews = 180 / s2;
	double *ang = malloc((size_t)nviews * sizeof *ang);
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews;
	rc_recon_spec s;
	rc_recon_spec_default(&s);
	s.geom = (rc_geom_spec){ .type = RC_GEOM_CONE, .nviews = nviews,
				 .det = { .nu = 200 / s2, .nv = 120 / s2, .du = 2.0 * s2, .dv = 2.0 * s2 },
				 .source_isocenter_mm = 600, .source_detector_mm = 1000, .angles_deg = ang };
	s.vol = (rc_volume_desc){ .nx = 128 / s2, .ny = 128 / s2, .nz = 80 / s2, .vx = 2.0 * s2, .vy = 2.0 * s2,
				  .vz = 1.0 * s2 };
	s.engine = RC_ENGINE_CPU;
	s.threads = th ? atoi(th) : 0;
	rc_ellipsoid e[] = {
		{ { 0, 0, 0 }, { 100, 75, 120 }, 0, 0.02 },
		{ { -40, 10, 0 }, { 15, 18, 110 }, 15, 0.03 },  /* a long bone-like rod */
		{ { 35, -20, 10 }, { 20, 15, 25 }, 0, -0.006 },  /* inside the slab */
		{ { 20, 35, -15 }, { 12, 12, 10 }, 0, 0.008 },
		{ { 0, -25, 70 }, { 45, 35, 25 }, 0, 0.025 },    /* beyond, above */
		{ { 15, 20, -75 }, { 35, 30, 30 }, 0, 0.02 },    /* beyond, below */
	};
	rc_phantom *ph = NULL;
	rc_geom *g = NULL;
	rc_err err;
	if (rc_phantom_new(e, (int)(sizeof e / sizeof e[0]), &ph, &err) ||
	    rc_geom_new(&s.geom, &s.vol, NULL, &g, &err)) {
		fprintf(stderr, "bench-longobj: %s\n", err.msg);
		return 1;
	}
	size_t nvox = rc_volume_count(&s.vol), slice = (size_t)s.vol.nx * s.vol.ny;
	float *proj = malloc(rc_geom_proj_count(g) * sizeof *proj), *truth = malloc(nvox * sizeof *truth);
	float *vol = malloc(nvox * sizeof *vol);
	if (!proj || !truth || !vol || rc_phantom_project(ph, g, s.threads, proj, &err) ||
	    rc_phantom_voxelize(ph, &s.vol, 3, s.threads, truth, &err)) {
		fprintf(stderr, "bench-longobj: %s\n", err.msg);
		return 1;
	}
	printf("| method | extend | slices run | error, all %d slices | central 8 | worst slice | iterations | s |\n",
	       s.vol.nz);
	printf("|---|---|---|---|---|---|---|---|\n");
	static const rc_algo_name algos[] = { RC_ALGO_FDK, RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	for (int a = 0; a < 5; a++) {
		const char *name = rc_algo_name_str(algos[a]);
		if (a && al && !strstr(al, name))
			continue;
		for (int m = 0; m < (a ? 2 : 1); m++) {
			rc_recon_spec r = s;
			rc_algo_params_default(&r.algo, algos[a]);
			r.algo.extend = m == 0 && a ? RC_EXTEND_OFF : RC_EXTEND_AUTO;
			rc_recon_report rep;
			if (rc_recon_run(&r, proj, vol, NULL, &rep, &err)) {
				fprintf(stderr, "bench-longobj: %s: %s\n", name, err.msg);
				return 1;
			}
			double worst = 0;
			for (int z = 0; z < s.vol.nz; z++)
				worst = fmax(worst, slice_error(vol, truth, slice, z, 1));
			printf("| %s | %s | %d | %.4f | %.4f | %.3f | %d | %.1f |\n", name,
			       a ? rc_name_str(RC_NAMES_EXTEND, (int)r.algo.extend) : "-", a ? rep.run_nz : s.vol.nz,
			       slice_error(vol, truth, slice, 0, s.vol.nz), slice_error(vol, truth, slice, s.vol.nz / 2 - 4, 8),
			       worst, a ? rep.iterations_done : 1, rep.seconds);
			fflush(stdout);
		}
	}
	free(proj);
	free(truth);
	free(vol);
	free(ang);
	rc_geom_free(g);
	rc_phantom_free(ph);
	return 0;
}
