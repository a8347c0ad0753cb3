/*
 * bench-opencl-algo: milliseconds per iteration of SART (all views, and
 * ordered subsets), SIRT and CGLS on the first OpenCL device three ways:
 *   resident   rc_opencl_run_algo: buffers on the device, element-wise
 *              steps as kernels (kernels/opencl/elementwise.cl)
 *   host ew    rc_algo_run over the same OpenCL engine: the projections on
 *              the device, each call moving its input and output through
 *              the host, element-wise steps on the host (algo_util.c)
 *   cpu        rc_algo_run over the native CPU engine, for scale
 * and, separately, the element-wise steps of one SART iteration alone (the
 * residual over the stack and the update over the volume): device kernels
 * (to completion) against the host loops.  Per-iteration times are the
 * steady ones, the fastest of iterations 2..4 (progress elapsed_s
 * differences), so the row and column sums, PoCL's first-launch compiles
 * and some of the shared machine's noise are left out.
 * Data: analytic Shepp-Logan projections (phantom.h).
 * A second table: on cases whose voxels project under a pixel apart
 * (pixels of 1.75 voxels, magnification 1.5), where algorithm.projector
 * auto runs the splat pair on every engine, the resident run with the
 * splat pair against the same run with ray casting's (projector
 * "raycast") on the same device, and the CPU engine's splat run.
 * RECOND_BENCH_QUICK=1: only 32^3 from 30 views (seconds); RECOND_BENCH_SPLAT=1:
 * only the splat table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/algo.h"
#include "algo/algo_util.h"
#include "backend/vec_host.h"
#include "backend/cpu/engine_cpu.h"
#include "plan/resident.h"
#include "backend/opencl/engine_opencl.h"
#include "backend/opencl/engine_opencl_impl.h"
#include "backend/exec.h"
#include "geometry/geometry.h"
#include "backend/opencl/opencl_ew.h"
#include "geometry/phantom.h"
#include "util/rc_clock.h"

#define ITERS 4

typedef struct timing {
	double t[ITERS + 1];
} timing;

static void on_progress(void *ud, const rc_progress *p)
{
	timing *tm = ud;
	if (p->iteration <= ITERS)
		tm->t[p->iteration] = p->elapsed_s;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ms of the steady iteration, or -1 on failure */
static double per_iter(int where, rc_engine *ocl, rc_exec *xo, rc_exec *xc, const rc_algo_params *p,
		       const float *proj, float *vol)
{
	timing tm;
	memset(&tm, 0, sizeof tm);
	rc_algo_hooks h = { .progress = on_progress, .ud = &tm };
	rc_err err;
	int rc = where == 0 ? rc_opencl_run_algo(ocl, p, proj, vol, &h, &err)
				     : rc_algo_run(p, where == 1 ? xo : xc, proj, vol, &h, &err);
	if (rc) {
		fprintf(stderr, "run: %s\n", err.msg);
		return -1;
	}
	double best = tm.t[2] - tm.t[1];
	for (int k = 3; k <= ITERS; k++)
		best = tm.t[k] - tm.t[k - 1] < best ? tm.t[k] - tm.t[k - 1] : best;
	return 1e3 * best;
}

/* median ms of one SART iteration's element-wise steps, device and host */
static int ew_times(rc_engine *ocl, const rc_geom *g, double *dev_ms, double *host_ms)
{
	size_t P = rc_geom_proj_count(g), V = rc_volume_count(rc_geom_volume(g));
	rc_ocl_handles h;
	rc_ocl_ew *w = NULL;
	rc_err err;
	if (rc_ocl_engine_handles(ocl, &h) || rc_ocl_ew_new(ocl, &w, &err))
		return -1;
	float *e = calloc(P, sizeof *e), *pp = calloc(P, sizeof *pp), *wt = calloc(P, sizeof *wt);
	float *v = calloc(V, sizeof *v), *u = calloc(V, sizeof *u), *c = calloc(V, sizeof *c);
	cl_mem m[3] = { 0 };
	cl_int ce = 0;
	for (int i = 0; i < 3; i++)
		m[i] = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, P * sizeof(float), NULL, &ce);
	int rc = !e || !pp || !wt || !v || !u || !c || ce != CL_SUCCESS;
	enum { REPS = 21 };
	double td[REPS], th[REPS];
	for (int r = 0; r < REPS && !rc; r++) {
		double s2, t0 = rc_now_s();
		rc = rc_ocl_ew_residual(w, m[0], m[1], m[2], 0, P, &s2, &err) ||
		     rc_ocl_ew_update(w, h.vol, m[1], m[2], 0, 0.5f, 0, V, &err) || clFinish(h.q) != CL_SUCCESS;
		td[r] = rc_now_s() - t0;
		t0 = rc_now_s();
		rc_seg sg = { .start = 0, .len = P, .stride = 0, .n = 1 };
		s2 = rc_vresidual(&sg, e, pp, wt);
		rc_vupdate(v, u, c, 0.5f, 0, V);
		th[r] = rc_now_s() - t0 + 0.0 * s2;
	}
	if (!rc) {
		qsort(td, REPS, sizeof td[0], cmp_d);
		qsort(th, REPS, sizeof th[0], cmp_d);
		*dev_ms = 1e3 * td[REPS / 2];
		*host_ms = 1e3 * th[REPS / 2];
	}
	for (int i = 0; i < 3; i++)
		if (m[i])
			clReleaseMemObject(m[i]);
	free(e), free(pp), free(wt), free(v), free(u), free(c);
	rc_ocl_ew_free(w);
	return rc ? -1 : 0;
}

/* One cone case: n^3 voxels over 64 mm from nviews views of nd x nd pixels
 * of du mm (SID 1000, SDD 1500), its Shepp-Logan projections, the OpenCL
 * and CPU engines and an executor of each. */
typedef struct bench_case {
	double *angles;
	rc_geom *g;
	rc_engine *ocl, *cpu;
	rc_exec *xo, *xc;
	rc_phantom *ph;
	float *proj, *v;
} bench_case;

static void case_close(bench_case *c)
{
	rc_exec_free(c->xo);
	rc_exec_free(c->xc);
	rc_engine_free(c->ocl);
	rc_engine_free(c->cpu);
	rc_phantom_free(c->ph);
	rc_geom_free(c->g);
	free(c->proj);
	free(c->v);
	free(c->angles);
	memset(c, 0, sizeof *c);
}

static int case_open(int n, int nviews, int nd, double du, bench_case *c, rc_err *err)
{
	memset(c, 0, sizeof *c);
	c->angles = malloc((size_t)nviews * sizeof(double));
	if (!c->angles)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	for (int k = 0; k < nviews; k++)
		c->angles[k] = 360.0 * k / nviews;
	double vx = 64.0 / n;
	rc_volume_desc vol = { .nx = n, .ny = n, .nz = n, .vx = vx, .vy = vx, .vz = vx };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = nviews, .det = { .nu = nd, .nv = nd, .du = du, .dv = du },
			    .source_isocenter_mm = 1000, .source_detector_mm = 1500, .angles_deg = c->angles };
	int rc = rc_geom_new(&sp, &vol, NULL, &c->g, err);
	if (!rc)
		rc = rc_phantom_shepp_logan(0.94 * 64.0, &c->ph, err);
	if (!rc) {
		c->proj = malloc(rc_geom_proj_count(c->g) * sizeof *c->proj);
		c->v = malloc(rc_volume_count(&vol) * sizeof *c->v);
		rc = !c->proj || !c->v ? rc_fail(err, RC_ENOMEM, "", "out of memory")
				       : rc_phantom_project(c->ph, c->g, 0, c->proj, err);
	}
	if (!rc)
		rc = rc_engine_opencl_new(c->g, NULL, &c->ocl, err) || rc_engine_cpu_new(c->g, 0, &c->cpu, err) ||
		     rc_exec_new(&c->ocl, 1, &c->xo, err) || rc_exec_new(&c->cpu, 1, &c->xc, err);
	if (rc)
		case_close(c);
	return rc;
}

static const struct {
	rc_algo_name a;
	int subsets; /* 0: subsets of 6 views */
	const char *label;
} algs[] = { { RC_ALGO_SART, 1, "SART" }, { RC_ALGO_SART, 0, "SART, subsets of 6 views" },
	     { RC_ALGO_SIRT, 1, "SIRT" }, { RC_ALGO_CGLS, 1, "CGLS" } };
#define NALGS (int)(sizeof algs / sizeof algs[0])

static void algo_params(int i, int nviews, rc_algo_params *p)
{
	rc_algo_params_plain(p, algs[i].a);
	p->iterations = ITERS;
	p->subsets = algs[i].subsets ? algs[i].subsets : nviews / 6;
}

static int one_case(int n, int nviews, int nd)
{
	bench_case c;
	rc_err err;
	if (case_open(n, nviews, nd, 1.5 * 64.0 * 5 / 4 / nd, &c, &err)) {
		fprintf(stderr, "bench-opencl-algo: %s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < NALGS; i++) {
		rc_algo_params p;
		algo_params(i, nviews, &p);
		double t[3];
		for (int w = 0; w < 3; w++)
			t[w] = per_iter(w, c.ocl, c.xo, c.xc, &p, c.proj, c.v);
		printf("| %d^3, %d views of %dx%d | %s | %.1f | %.1f | %.1f |\n", n, nviews, nd, nd, algs[i].label, t[0],
		       t[1], t[2]);
	}
	double dm, hm;
	if (ew_times(c.ocl, c.g, &dm, &hm) == 0)
		printf("| %d^3, %d views of %dx%d | element-wise steps of one SART iteration | %.2f | %.2f (host loops) | |\n",
		       n, nviews, nd, nd, dm, hm);
	case_close(&c);
	return 0;
}

/* The splat table's rows for n^3 from nviews views, pixels of 1.75 voxels. */
static int splat_case(int n, int nviews)
{
	bench_case c;
	rc_err err;
	int nd = n * 5 / 4;
	if (case_open(n, nviews, nd, 1.75 * 64.0 / n, &c, &err)) {
		fprintf(stderr, "bench-opencl-algo: %s\n", err.msg);
		return 1;
	}
	if (!c.ocl->splat || !c.cpu->splat) {
		fprintf(stderr, "bench-opencl-algo: no splat pair on %d^3 from %d views\n", n, nviews);
		case_close(&c);
		return 1;
	}
	for (int i = 0; i < NALGS; i++) {
		rc_algo_params p;
		algo_params(i, nviews, &p);
		double ts = per_iter(0, c.ocl, NULL, c.xc, &p, c.proj, c.v);
		double tc = per_iter(2, c.ocl, NULL, c.xc, &p, c.proj, c.v);
		p.projector = RC_PROJECTOR_RAYCAST;
		double tr = per_iter(0, c.ocl, NULL, c.xc, &p, c.proj, c.v);
		printf("| %d^3, %d views of %dx%d | %s | %.1f | %.1f | %.2f | %.1f | %.2f |\n", n, nviews, nd, nd,
		       algs[i].label, ts, tr, tr / ts, tc, ts / tc);
	}
	case_close(&c);
	return 0;
}

int main(void)
{
	const char *q = getenv("RECOND_BENCH_QUICK");
	int quick = q && *q && strcmp(q, "0") != 0;
	rc_opencl_device d[RC_OPENCL_MAX_DEVICES];
	int nd = 0;
	rc_err err;
	if (rc_opencl_devices(d, RC_OPENCL_MAX_DEVICES, &nd, &err) || nd == 0) {
		printf("bench-opencl-algo: no OpenCL device\n");
		return 0;
	}
	printf("bench-opencl-algo on %s (%s), ms per iteration (steady: fastest of iterations 2..%d)%s\n\n", d[0].name,
	       d[0].platform_name, ITERS, quick ? " (RECOND_BENCH_QUICK)" : "");
	printf("| case | algorithm | OpenCL resident | OpenCL, host element-wise | cpu engine |\n");
	printf("| --- | --- | --- | --- | --- |\n");
	const char *so = getenv("RECOND_BENCH_SPLAT");
	int splat_only = so && *so && strcmp(so, "0") != 0;
	int rc = splat_only ? 0 : one_case(32, 30, 40);
	if (!quick && !splat_only && !rc)
		rc = one_case(32, 60, 40);
	if (!quick && !splat_only && !rc)
		rc = one_case(64, 120, 80);
	if (rc)
		return rc;
	printf("\nThe splat pair (pixels of 1.75 voxels: voxels project under a pixel apart), ms per iteration\n\n");
	printf("| case | algorithm | OpenCL resident, splat | same, raycast | raycast / splat | cpu engine, splat "
	       "| OpenCL splat / cpu |\n");
	printf("| --- | --- | --- | --- | --- | --- | --- |\n");
	rc = splat_case(32, 30);
	if (!quick && !rc)
		rc = splat_case(64, 120);
	return rc;
}
