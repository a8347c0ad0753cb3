/*
 * bench-algo: milliseconds per iteration of SART, SIRT, CGLS and MLEM with
 * the CPU engine on paper 000's test case: a 128^3 volume of 0.5 mm voxels
 * from 210 views of 256x200 pixels of 1 mm, D = 1000 mm, S = 1500 mm, over
 * 360 degrees; the data are analytic Shepp-Logan projections.  One table
 * row per algorithm: the steady per-iteration time (the second of three
 * iterations: the first also carries the set-up, row and column sums or
 * CGLS's first back projection, and CGLS's last skips its back
 * projection), the set-up (the first iteration's extra time), and the
 * error reached after the three.  FDK's row is its one pass, weighting and
 * filtering included.
 * RECOND_BENCH_QUICK=1: the same field of view at 32^3 from 30 views of
 * 64x50, a second or two.
 * RECOND_BENCH_THREADS=n sets the CPU engine's threads (default: all).
 * RECOND_BENCH_VOXEL_MM and RECOND_BENCH_PIXEL_MM replace the voxel and
 * pixel sizes (the ratio of projected voxel to pixel is 1.5 vx / du at the
 * isocentre: 2.0 and 2.4 are issue 34's case, 1.25), and
 * RECOND_BENCH_PROJECTOR=auto|splat|raycast|footprint sets
 * algorithm.projector (default auto).
 * RECOND_BENCH_DETECTOR=curved makes the detector a cylinder (du an arc
 * length); RECOND_BENCH_ONLY=sirt,cgls runs the rows whose labels it
 * names (default all).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "algo/algo.h"
#include "algo/names.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "geometry/geometry.h"
#include "geometry/metrics.h"
#include "geometry/phantom.h"

#define MAX_IT 16

typedef struct timing {
	double t[MAX_IT + 1];
	int n;
} timing;

static void on_progress(void *ud, const rc_progress *p)
{
	timing *tm = ud;
	if (p->iteration <= MAX_IT)
		tm->t[p->iteration] = p->elapsed_s;
	tm->n = p->iteration;
}

int main(void)
{
	const char *q = getenv("RECOND_BENCH_QUICK");
	int quick = q && *q && strcmp(q, "0") != 0;
	const char *th = getenv("RECOND_BENCH_THREADS");
	int threads = th ? atoi(th) : 0;
	int n = quick ? 32 : 128, nviews = quick ? 30 : 210;
	int nu = quick ? 64 : 256, nv = quick ? 50 : 200;
	int iters = 3;
	double vx = quick ? 2.0 : 0.5, du = quick ? 4.0 : 1.0;
	const char *vxs = getenv("RECOND_BENCH_VOXEL_MM"), *dus = getenv("RECOND_BENCH_PIXEL_MM");
	const char *pjs = getenv("RECOND_BENCH_PROJECTOR");
	vx = vxs && atof(vxs) > 0 ? atof(vxs) : vx;
	du = dus && atof(dus) > 0 ? atof(dus) : du;
	int pj = RC_PROJECTOR_AUTO;
	if (pjs && *pjs && rc_name_parse(RC_NAMES_PROJECTOR, pjs, &pj)) {
		fprintf(stderr, "bench-algo: RECOND_BENCH_PROJECTOR=%s is not a projector\n", pjs);
		return 1;
	}

	double *angles = malloc((size_t)nviews * sizeof(double));
	if (!angles)
		return 1;
	for (int k = 0; k < nviews; k++)
		angles[k] = 360.0 * k / nviews;
	rc_volume_desc vol = { .nx = n, .ny = n, .nz = n, .vx = vx, .vy = vx, .vz = vx };
	const char *shape = getenv("RECOND_BENCH_DETECTOR"), *only = getenv("RECOND_BENCH_ONLY");
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = nviews,
			    .det = { .nu = nu, .nv = nv, .du = du, .dv = du,
				     .shape = shape && strcmp(shape, "curved") == 0 ? RC_DETECTOR_CURVED
										    : RC_DETECTOR_FLAT },
			    .source_isocenter_mm = 1000, .source_detector_mm = 1500,
			    .angles_deg = angles };
	rc_err err;
	rc_geom *g = NULL;
	rc_phantom *ph = NULL;
	rc_engine *e = NULL;
	rc_exec *x = NULL;
	float *proj = NULL, *ref = NULL, *out = NULL;
	uint8_t *mask = NULL;
	int rc = 1;
	if (rc_geom_new(&sp, &vol, NULL, &g, &err))
		goto fail;
	size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(&vol);
	proj = malloc(np * sizeof(float));
	ref = malloc(nvox * sizeof(float));
	out = malloc(nvox * sizeof(float));
	mask = malloc(nvox);
	if (!proj || !ref || !out || !mask) {
		rc_fail(&err, RC_ENOMEM, "", "out of memory");
		goto fail;
	}
	double fov = n * vx;
	if (rc_phantom_shepp_logan(0.94 * fov, &ph, &err) || rc_phantom_project(ph, g, threads, proj, &err) ||
	    rc_phantom_voxelize(ph, &vol, 2, threads, ref, &err))
		goto fail;
	rc_mask_cylinder(&vol, 0.45 * fov, 0.35 * fov, mask);
	if (rc_engine_cpu_new(g, threads, &e, &err) || rc_exec_new(&e, 1, &x, &err))
		goto fail;

	printf("algorithms, CPU engine (%s, %s threads): %d^3 voxels of %.2g mm from %d views of %dx%d (%.2g mm, %s), "
	       "D=1000 S=1500 mm\n",
	       rc_engine_cpu_isa(), threads ? th : "all", n, vx, nviews, nu, nv, du,
	       sp.det.shape == RC_DETECTOR_CURVED ? "curved" : "flat");
	printf("projector %s (the engine offers splat %d, footprint %d)\n", rc_name_str(RC_NAMES_PROJECTOR, pj),
	       e->splat, e->footprint);
	printf("%-18s %6s %12s %10s %10s\n", "algorithm", "iters", "ms/iter", "setup ms", "rel.error");
	static const struct {
		rc_algo_name name;
		int subsets;
		const char *label;
	} runs[] = {
		{ RC_ALGO_FDK, 1, "fdk" },
		{ RC_ALGO_SART, 1, "sart" },
		{ RC_ALGO_SART, 10, "sart (10 subsets)" },
		{ RC_ALGO_SIRT, 1, "sirt" },
		{ RC_ALGO_CGLS, 1, "cgls" },
		{ RC_ALGO_MLEM, 1, "mlem" },
	};
	for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
		if (only && *only && !strstr(only, runs[i].label))
			continue;
		rc_algo_params p;
		rc_algo_params_plain(&p, runs[i].name);
		p.iterations = iters;
		p.subsets = runs[i].subsets;
		if (runs[i].name != RC_ALGO_FDK)
			p.projector = (rc_projector)pj;
		timing tm = { .n = 0 };
		rc_algo_hooks h = { .progress = on_progress, .ud = &tm };
		if (rc_algo_run(&p, x, proj, out, &h, &err))
			goto fail;
		int fdk = runs[i].name == RC_ALGO_FDK;
		double per = fdk ? tm.t[1] : tm.t[2] - tm.t[1];
		printf("%-18s %6d %12.1f %10.1f %10.4f\n", runs[i].label, fdk ? 1 : iters, 1e3 * per,
		       fdk ? 0.0 : 1e3 * (tm.t[1] - per), rc_metric_rel_error(out, ref, mask, nvox));
		fflush(stdout);
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("peak memory: %.1f MiB\n", ru.ru_maxrss / 1024.0);
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "bench-algo: %s\n", err.msg);
	if (err.code == RC_EUNSUPPORTED)
		rc = 0; /* the engine is not built here: nothing to measure */
out:
	rc_exec_free(x);
	rc_engine_free(e);
	rc_phantom_free(ph);
	rc_geom_free(g);
	free(mask);
	free(out);
	free(ref);
	free(proj);
	free(angles);
	return rc;
}
