/*
 * bench-trigeneous: paper 000's test case (a 128^3 volume of 0.5 mm voxels
 * from 210 views of 256x200 pixels of 1 mm, D = 1000 mm, S = 1500 mm, 360
 * degrees) on every device of this host alone and split by the planner.
 *
 * For each device: the work-group search (OpenCL), the calibration (timed
 * runs at 6 workloads, paper 000 Fig. 5), the fitted T = a W + b per task,
 * then full forward (RC_FP_RAYCAST) and back (RC_BP_VOXEL) projections of
 * all views (median of 3), predicted against measured (the error in %; paper 000:
 * 1.19% forward, 5.96% back).  Then the planner's split over all devices
 * (one per hardware group) and, for comparison, the split the planner would
 * make if devices sharing hardware were counted as two (what that costs is
 * the reason the planner never does it).  Last, OpenCL on a CPU device
 * against the native cpu engine on the same cores (paper 002: >= 90%).
 * RECOND_BENCH_QUICK=1: 48^3 from 42 views of 64x50, seconds.  --proof
 * (make gpu-proof): also the planner's split as lines "PROOF key value
 * unit floor basis" (its prediction error per task, and the split's time
 * against the best device alone) for scripts/gpu-proof.sh's table.
 * RECOND_BENCH_ENGINES=cpu,cuda: only devices of those engines (gpu-proof's
 * CPU + GPU split, without calibrating every OpenCL device as well).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/devices.h"
#include "backend/opencl/engine_opencl.h"
#include "backend/exec.h"
#include "geometry/geometry.h"
#include "plan/plan.h"
#include "util/rc_clock.h"

#define MAXD RC_EXEC_MAX_ENGINES

static double pct(double pred, double meas) { return 100.0 * (pred - meas) / meas; }

/* One full task on an executor with the given split; the median of reps
 * (calibration keeps the mean of its timed ranges, so neither side is the
 * lucky minimum). */
static double run_split(rc_exec *x, rc_task t, const int *views, float *vol, float *proj, int reps)
{
	rc_err err;
	if (rc_exec_set_split(x, t, views, &err)) {
		fprintf(stderr, "split: %s\n", err.msg);
		return -1;
	}
	int nviews = rc_geom_nviews(rc_exec_geom(x));
	double ts[8];
	if (reps > 8)
		reps = 8;
	for (int r = 0; r < reps; r++) {
		double t0 = rc_now_s();
		int rc = t == RC_TASK_FORWARD ? rc_exec_forward(x, RC_FP_RAYCAST, vol, proj, 0, nviews, &err)
					      : rc_exec_back(x, RC_BP_VOXEL, proj, vol, 0, nviews, &err);
		if (rc) {
			fprintf(stderr, "run: %s\n", err.msg);
			return -1;
		}
		ts[r] = rc_now_s() - t0;
		for (int i = r; i > 0 && ts[i] < ts[i - 1]; i--) { /* insertion sort */
			double tmp = ts[i];
			ts[i] = ts[i - 1];
			ts[i - 1] = tmp;
		}
	}
	return ts[reps / 2];
}

int main(int argc, char **argv)
{
	const int proof = argc > 1 && !strcmp(argv[1], "--proof");
	const char *q = getenv("RECOND_BENCH_QUICK");
	int quick = q && *q && strcmp(q, "0") != 0;
	int n = quick ? 48 : 128, nviews = quick ? 42 : 210, nu = quick ? 64 : 256, nv = quick ? 50 : 200;
	double vx = quick ? 128.0 / 48 * 0.5 : 0.5, pix = quick ? 4.0 : 1.0;
	int reps = 3;

	double *ang = malloc((size_t)nviews * sizeof *ang);
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews;
	rc_geom_spec spec = { .type = RC_GEOM_CONE, .nviews = nviews,
			      .det = { .nu = nu, .nv = nv, .du = pix, .dv = pix },
			      .source_isocenter_mm = 1000, .source_detector_mm = 1500, .angles_deg = ang };
	rc_volume_desc vd = { .nx = n, .ny = n, .nz = n, .vx = vx, .vy = vx, .vz = vx };
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&spec, &vd, NULL, &g, &err)) {
		fprintf(stderr, "geometry: %s\n", err.msg);
		return 1;
	}
	size_t nvox = rc_volume_count(&vd), np = rc_geom_proj_count(g);
	float *vol = malloc(nvox * sizeof *vol), *proj = malloc(np * sizeof *proj);
	if (!vol || !proj)
		return 1;

	rc_device all[RC_DEVICES_MAX];
	int nall = 0;
	rc_devices_enumerate(all, RC_DEVICES_MAX, &nall, &err);
	rc_device dev[MAXD];
	rc_engine *eng[MAXD];
	rc_model model[MAXD][RC_TASK_COUNT];
	int nd = 0;
	char cache[] = "/tmp/recond-bench-ocl-cache";
	rc_device_open_opts oo = { 0, cache };
	printf("paper 000 case: %d^3 voxels from %d views of %dx%d%s\n\n", n, nviews, nu, nv, quick ? " (quick)" : "");
	const char *only = getenv("RECOND_BENCH_ENGINES");
	for (int i = 0; i < nall && nd < MAXD; i++) {
		rc_engine *e = NULL;
		if (only && *only && !strstr(only, all[i].engine)) {
			printf("  %-7s %-40.40s not used: not in RECOND_BENCH_ENGINES\n", all[i].engine, all[i].name);
			continue;
		}
		if (rc_device_open(&all[i], g, &oo, &e, &err)) {
			printf("  %-7s %-40.40s not used: %s\n", all[i].engine, all[i].name, err.msg);
			continue;
		}
		if (all[i].kind == RC_DEVICE_OPENCL && rc_engine_opencl_tune(e, &err))
			printf("  work-group search failed: %s\n", err.msg);
		char shape[64];
		rc_shape_key(g, RC_BP_VOXEL, shape, sizeof shape);
		if (rc_devices_calibrate(e, RC_FP_RAYCAST, RC_BP_VOXEL, NULL, all[i].device_id, shape, vol, proj, model[nd], &err)) {
			printf("  %-7s %-40.40s calibration failed: %s\n", all[i].engine, all[i].name, err.msg);
			rc_engine_free(e);
			continue;
		}
		dev[nd] = all[i];
		eng[nd++] = e;
	}
	if (nd == 0) {
		printf("no device could be opened\n");
		return 0;
	}
	for (size_t i = 0; i < nvox; i++)
		vol[i] = (float)(i % 97) * 1e-3f;

	printf("%-2s %-7s %-10s %-34s %-5s %10s %10s %6s %10s %10s %8s\n", "#", "engine", "hw group", "device",
	       "task", "a ms/view", "b ms", "fitpts", "pred ms", "meas ms", "err %");
	double alone[MAXD][RC_TASK_COUNT];
	for (int i = 0; i < nd; i++) {
		rc_exec *x = NULL;
		if (rc_exec_new(&eng[i], 1, &x, &err))
			return 1;
		for (int t = 0; t < RC_TASK_COUNT; t++) {
			int all_views = nviews;
			double m = run_split(x, (rc_task)t, &all_views, vol, proj, reps);
			double p = rc_model_predict(&model[i][t], nviews);
			alone[i][t] = m;
			printf("%-2d %-7s %-10.10s %-34.34s %-5s %10.3f %10.2f %3d(-%d) %10.1f %10.1f %+8.2f\n", i,
			       dev[i].engine, dev[i].hw_group, dev[i].name, t ? "back" : "fwd", 1e3 * model[i][t].a,
			       1e3 * model[i][t].b, model[i][t].npoints, model[i][t].dropped, 1e3 * p, 1e3 * m,
			       pct(p, m));
		}
		rc_exec_free(x);
	}

	/* the split over all devices, as planned and as if groups were ignored */
	if (nd > 1) {
		rc_exec *x = NULL;
		if (rc_exec_new(eng, nd, &x, &err))
			return 1;
		const char *groups[MAXD];
		for (int i = 0; i < nd; i++)
			groups[i] = dev[i].hw_group;
		printf("\nsplit (views per device in the order above)\n");
		printf("%-28s %-5s %-20s %10s %10s %8s %14s\n", "plan", "task", "views", "pred ms", "meas ms", "err %",
		       "vs best alone");
		for (int pass = 0; pass < 2; pass++)
			for (int t = 0; t < RC_TASK_COUNT; t++) {
				rc_model m[MAXD];
				for (int i = 0; i < nd; i++)
					m[i] = model[i][t];
				rc_plan p;
				if (rc_plan_split(m, pass ? NULL : groups, nd, nviews, 0, &p, &err))
					continue;
				char vs[64] = "";
				int len = 0;
				for (int i = 0; i < nd; i++)
					len += snprintf(vs + len, sizeof vs - (size_t)len, "%s%d", i ? "," : "(", p.views[i]);
				snprintf(vs + len, sizeof vs - (size_t)len, ")");
				double meas = run_split(x, (rc_task)t, p.views, vol, proj, reps);
				double best = INFINITY;
				for (int i = 0; i < nd; i++)
					best = fmin(best, alone[i][t]);
				printf("%-28s %-5s %-20s %10.1f %10.1f %+8.2f %+13.1f%%\n",
				       pass ? "groups ignored (shared HW)" : "planner (one per HW group)", t ? "back" : "fwd",
				       vs, 1e3 * p.makespan_s, 1e3 * meas, pct(p.makespan_s, meas), 100.0 * (best - meas) / best);
				if (proof && !pass) {
					/* the engines the planner gave views to, as the basis */
					char who[64] = "";
					int wl = 0;
					for (int i = 0; i < nd && wl < (int)sizeof who; i++)
						if (p.views[i] > 0)
							wl += snprintf(who + wl, sizeof who - (size_t)wl, "%s%s", wl ? "+" : "",
								       dev[i].engine);
					printf("PROOF trigeneous_%s_err %.6g %% 0 split:%s\n", t ? "back" : "fwd",
					       pct(p.makespan_s, meas), who);
					printf("PROOF trigeneous_%s_ms %.6g ms %.6g best-alone\n", t ? "back" : "fwd",
					       1e3 * meas, 1e3 * best);
				}
			}
		rc_exec_free(x);
	}

	/* OpenCL on a CPU device against the native engine on the same cores */
	int cpu = -1, ocl_cpu = -1;
	for (int i = 0; i < nd; i++) {
		if (dev[i].kind == RC_DEVICE_CPU && cpu < 0)
			cpu = i;
		if (dev[i].kind == RC_DEVICE_OPENCL && !strcmp(dev[i].type, "cpu") && ocl_cpu < 0)
			ocl_cpu = i;
	}
	if (cpu >= 0 && ocl_cpu >= 0) {
		printf("\nOpenCL (%s, variant %s) vs native cpu engine, same cores: speed of OpenCL in %% of native\n",
		       dev[ocl_cpu].name, rc_engine_opencl_variant(eng[ocl_cpu]));
		for (int t = 0; t < RC_TASK_COUNT; t++)
			printf("  %-5s native %10.1f ms, OpenCL %10.1f ms: %6.1f%%\n", t ? "back" : "fwd",
			       1e3 * alone[cpu][t], 1e3 * alone[ocl_cpu][t], 100.0 * alone[cpu][t] / alone[ocl_cpu][t]);
	} else {
		printf("\nOpenCL-on-CPU vs native: needs both a cpu engine and an OpenCL CPU device (have %s, %s)\n",
		       cpu >= 0 ? "cpu" : "no cpu engine", ocl_cpu >= 0 ? "OpenCL CPU" : "no OpenCL CPU device");
	}
	for (int i = 0; i < nd; i++)
		rc_engine_free(eng[i]);
	free(vol);
	free(proj);
	free(ang);
	rc_geom_free(g);
	return 0;
}
