/*
 * bench-tensor-cg: CGLS on the tensor path (paper 001 Alg. 1 as the one
 * CGLS of core/algo over the tensor backend), CPU products, in ms per image
 * per iteration: a fan-beam Shepp-Logan of 32 slices of n^2 from nviews x
 * nu projections (bench-tensor's geometry), fp16 BSR (precision mixed) and
 * fp32 CSR.  The per-iteration time is the mean of iterations 2..N from
 * the progress calls (the first carries the set-up: the matrix, its
 * ordering and blocks are built before the run and not counted); the
 * error is the relative L2 against the voxelised phantom after N.
 * The whole iteration is timed: both products and the element-wise steps,
 * so this row moves when the algorithm code does.
 * RECOND_BENCH_QUICK=1: 64^2 from 90 x 64, a second or two.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry/metrics.h"
#include "geometry/phantom.h"
#include "plan/tensor.h"

#define ITERS 8

typedef struct timing {
	double t[ITERS + 1];
} timing;

static void on_progress(void *ud, const rc_progress *p)
{
	timing *tm = ud;
	if (p->iteration >= 1 && p->iteration <= ITERS)
		tm->t[p->iteration] = p->elapsed_s;
}

int main(void)
{
	const char *q = getenv("RECOND_BENCH_QUICK");
	int quick = q && *q && strcmp(q, "0");
	int n = quick ? 64 : 256, nviews = quick ? 90 : 360, nu = quick ? 64 : 256, nz = 32;
	static double ang[4096];
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews;
	double px = 512.0 / n, R = 512.0 * sqrt(2) / 2, D = 1000, S = 2000;
	rc_geom_spec sp = { .type = RC_GEOM_FAN, .nviews = nviews, .angles_deg = ang, .source_isocenter_mm = D,
			    .source_detector_mm = S };
	sp.det.nu = nu;
	sp.det.nv = 1;
	sp.det.du = 2 * S * tan(asin(R / D)) / nu;
	rc_volume_desc v = { n, n, nz, px, px, px, 0, 0, 0 };
	rc_geom *g = NULL;
	rc_phantom *ph = NULL;
	rc_err err;
	float *proj = NULL, *ref = NULL, *vol = NULL;
	int rc = 1;
	if (rc_geom_new(&sp, &v, NULL, &g, &err))
		goto out;
	size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(&v);
	proj = malloc(np * sizeof *proj);
	ref = malloc(nvox * sizeof *ref);
	vol = malloc(nvox * sizeof *vol);
	if (!proj || !ref || !vol) {
		rc_fail(&err, RC_ENOMEM, "", "out of memory");
		goto out;
	}
	if (rc_phantom_shepp_logan(0.9 * 512.0, &ph, &err) || rc_phantom_project(ph, g, 0, proj, &err) ||
	    rc_phantom_voxelize(ph, &v, 2, 0, ref, &err))
		goto out;
	printf("tensor CG (CGLS, CPU products, all cores): %d slices of %d^2 from %d x %d fan projections, %d "
	       "iterations\n", nz, n, nviews, nu, ITERS);
	printf("  %-18s %16s %12s\n", "matrix", "ms/image/iter", "rel.error");
	for (int mixed = 1; mixed >= 0; mixed--) {
		rc_tensor_opts o;
		rc_tensor_opts_default(&o);
		o.mixed = mixed;
		o.gpu = 0;
		rc_algo_params p;
		rc_algo_params_plain(&p, RC_ALGO_CGLS);
		p.iterations = ITERS;
		timing tm;
		memset(&tm, 0, sizeof tm);
		rc_algo_hooks h = { .progress = on_progress, .ud = &tm };
		rc_recon_report rep;
		if (rc_tensor_solve(&o, &p, g, proj, vol, &h, &rep, &err))
			goto out;
		double per = (tm.t[ITERS] - tm.t[1]) / (ITERS - 1);
		printf("  %-18s %16.3f %12.4f\n", mixed ? "BSR fp16 (mixed)" : "CSR fp32", 1e3 * per / nz,
		       rc_metric_rel_error(vol, ref, NULL, nvox));
		fflush(stdout);
	}
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "bench-tensor-cg: %s\n", err.msg);
	rc_phantom_free(ph);
	rc_geom_free(g);
	free(proj);
	free(ref);
	free(vol);
	return rc;
}
