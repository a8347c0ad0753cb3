/*
 * bench-cpu: the CPU engine's projectors on the RabbitCT shape.
 *
 * Back projection (RC_BP_VOXEL): 496 views of 1248x960 pixels of 0.308 mm
 * into 256^3 (1 mm) and 512^3 (0.5 mm) voxels, cone geometry D = 750 mm,
 * S = 1200 mm over 360 degrees (RabbitCT's sizes; its own matrices are a
 * C-arm's, ours are a circle, which takes the same loop).  GUPS = views x
 * voxels / seconds / 1e9, for 1 thread and for all threads.
 * Forward projection: rays per second (detector pixels per second) of
 * RC_FP_RAYCAST and RC_FP_ROTATE into the 256^3 volume, over 2 views.
 * Also RC_BP_MATCHED (the transpose of RAYCAST) as rays per second.
 * Peak memory is getrusage's ru_maxrss; the ISA path is what the voxel back
 * projector dispatched to.  Each row gives the wall-clock rate and the rate
 * per CPU-second (all threads' CPU time): on a machine shared with other
 * work the second is what the code achieves on the cores it was given.
 *
 * Last, the general (C-arm) path: the 512^3 back projection from matrices
 * tilted by 0.5 degrees, 62 views over the circle, all threads; then the
 * narrower ISA paths this CPU also runs (AVX2, baseline x86-64: what a CPU
 * without AVX-512 takes), the cone back projection from 62 views.
 * RECOND_BENCH_QUICK=1: 64^3 and 96^3 from 32 views of 312x240 (seconds).
 * RECOND_BENCH_THREADS=n: the "all threads" count (default: one per core).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "backend/cpu/engine_cpu.h"
#include "geometry/geometry.h"
#include "util/rc_clock.h"

/* CPU seconds of all threads of this process: on a shared machine the rate
 * per CPU-second says what the code does on the cores it actually got. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct shape {
	int nviews, nu, nv;
	double du;
};

static rc_geom *make_geom(const struct shape *s, int n, double fov_mm)
{
	double *ang = malloc((size_t)s->nviews * sizeof *ang);
	if (!ang)
		return NULL;
	for (int k = 0; k < s->nviews; k++)
		ang[k] = 360.0 * k / s->nviews;
	rc_volume_desc v = { n, n, n, fov_mm / n, fov_mm / n, fov_mm / n, 0, 0, 0 };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = s->nviews, .det = { s->nu, s->nv, s->du, s->du, 0, 0 },
			    .source_isocenter_mm = 750, .source_detector_mm = 1200, .angles_deg = ang };
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&sp, &v, NULL, &g, &err))
		fprintf(stderr, "bench-cpu: geometry: %s\n", err.msg);
	free(ang);
	return g;
}

/* A C-arm-like geometry: the circle of make_geom over nviews views, its
 * matrices tilted by tilt_rad about the x axis (calibrated C-arm matrices
 * have small P[2], P[10], which the back projector's general column path
 * takes; a plain circle has them 0). */
static rc_geom *make_geom_tilted(const struct shape *s, int nviews, int n, double fov_mm, double tilt_rad)
{
	struct shape c = *s;
	c.nviews = nviews;
	rc_geom *g0 = make_geom(&c, n, fov_mm), *g = NULL;
	double *m = g0 ? malloc((size_t)nviews * 12 * sizeof *m) : NULL;
	if (!m) {
		rc_geom_free(g0);
		return NULL;
	}
	double ct = cos(tilt_rad), st = sin(tilt_rad);
	for (int k = 0; k < nviews; k++) {
		const double *P = rc_geom_view(g0, k)->P;
		for (int r = 0; r < 3; r++) {
			double *o = m + 12 * k + 4 * r;
			o[0] = P[4 * r];
			o[1] = ct * P[4 * r + 1] + st * P[4 * r + 2];
			o[2] = -st * P[4 * r + 1] + ct * P[4 * r + 2];
			o[3] = P[4 * r + 3];
		}
	}
	rc_geom_spec sp = { .type = RC_GEOM_MATRICES, .nviews = nviews, .det = { s->nu, s->nv, s->du, s->du, 0, 0 },
			    .matrices = m };
	rc_err err;
	if (rc_geom_new(&sp, rc_geom_volume(g0), NULL, &g, &err))
		fprintf(stderr, "bench-cpu: tilted geometry: %s\n", err.msg);
	free(m);
	rc_geom_free(g0);
	return g;
}

static void fill(float *p, size_t n, unsigned seed)
{
	/* smooth-ish positive data: the values do not change the work */
	for (size_t i = 0; i < n; i++)
		p[i] = (float)(1.0 + 0.5 * sin(0.001 * (double)(i + seed)));
}

/* Calibration: eight independent chains of 4-lane single-precision
 * multiply then add (SSE, GCC vector extensions).  Each chain waits 8 cycles
 * (4 + 4) per step, so eight keep the two vector ports busy: 8 flops per
 * cycle, 20 GFLOP/s for a dedicated 2.5 GHz core.  Printed per CPU-second,
 * it says how much of such a core a CPU-second of this machine was. */
typedef float rc_v4 __attribute__((vector_size(16)));

static double calibrate_gflops(void)
{
	rc_v4 acc[8], b = { 0.999999f, 0.999999f, 0.999999f, 0.999999f }, c = { 1e-7f, 1e-7f, 1e-7f, 1e-7f };
	for (int i = 0; i < 8; i++)
		acc[i] = (rc_v4){ 1.0f + 0.01f * (float)i, 1.0f, 1.0f, 1.0f };
	const long iters = 50000000;
	double c0 = cpu_s();
	for (long it = 0; it < iters; it++) {
		acc[0] = acc[0] * b + c;
		acc[1] = acc[1] * b + c;
		acc[2] = acc[2] * b + c;
		acc[3] = acc[3] * b + c;
		acc[4] = acc[4] * b + c;
		acc[5] = acc[5] * b + c;
		acc[6] = acc[6] * b + c;
		acc[7] = acc[7] * b + c;
	}
	double dc = cpu_s() - c0;
	float sum = 0;
	for (int i = 0; i < 8; i++)
		sum += acc[i][0] + acc[i][1] + acc[i][2] + acc[i][3];
	return sum > 0 ? 8.0 * 8 * iters / dc / 1e9 : 0;
}

static double peak_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024.0;
}

/* One row of voxel back projection: views [0, nviews) of proj through g
 * into vol, on threads threads (0: one per core) and the ISA path isa
 * (NULL: the widest).  Returns 0, or 1 after printing why. */
static int bp_row(const char *name, const rc_geom *g, const float *proj, float *vol, int nviews, int threads,
		  const char *isa)
{
	rc_engine *e = NULL;
	rc_err err;
	size_t nvox = rc_volume_count(rc_geom_volume(g));
	int rc = 1;
	if (rc_engine_cpu_new(g, threads, &e, &err) || (isa && rc_engine_cpu_set_isa(e, isa, &err))) {
		fprintf(stderr, "bench-cpu: %s\n", err.msg);
		goto out;
	}
	double t0 = rc_now_s(), c0 = cpu_s();
	if (rc_engine_back(e, RC_BP_VOXEL, proj, vol, 0, nviews, &err)) {
		fprintf(stderr, "bench-cpu: %s\n", err.msg);
		goto out;
	}
	double dt = rc_now_s() - t0, dc = cpu_s() - c0, upd = (double)nvox * nviews / 1e9;
	printf("| %-36s | %7d | %9.2f | %9.2f | %12.3f | %14.3f | %9s |\n", name, rc_engine_cpu_threads(e), dt, dc,
	       upd / dt, upd / dc, "GUPS");
	fflush(stdout);
	rc = 0;
out:
	rc_engine_free(e);
	return rc;
}

int main(void)
{
	int quick = getenv("RECOND_BENCH_QUICK") && atoi(getenv("RECOND_BENCH_QUICK"));
	int all = getenv("RECOND_BENCH_THREADS") ? atoi(getenv("RECOND_BENCH_THREADS")) : 0;
	struct shape full = { 496, 1248, 960, 0.308 }, small = { 32, 312, 240, 1.232 };
	const struct shape *s = quick ? &small : &full;
	int sizes[2] = { quick ? 64 : 256, quick ? 96 : 512 };
	const double fov = 256.0;
	int rc = 0;

	rc_geom *g0 = make_geom(s, sizes[0], fov);
	if (!g0)
		return 1;
	size_t np = rc_geom_proj_count(g0), nvox_max = (size_t)sizes[1] * sizes[1] * sizes[1];
	/* one volume of the larger size serves every row */
	float *proj = malloc(np * sizeof(float)), *vol = malloc(nvox_max * sizeof(float));
	if (!proj || !vol) {
		fprintf(stderr, "bench-cpu: out of memory for %zu MiB of projections and volume\n",
			(np + nvox_max) * 4 >> 20);
		return 1;
	}
	fill(proj, np, 1);
	rc_geom_free(g0);

	printf("bench-cpu: %d views of %dx%d%s; CPU ISA path: %s\n", s->nviews, s->nu, s->nv,
	       quick ? " (RECOND_BENCH_QUICK)" : " (RabbitCT shape)", rc_engine_cpu_isa());
	printf("| %-36s | %7s | %9s | %9s | %12s | %14s | %9s |\n", "task", "threads", "wall s", "CPU s", "rate (wall)",
	       "per CPU-second", "unit");
	printf("|%s|%s|%s|%s|%s|%s|%s|\n", "--------------------------------------", "---------", "-----------",
	       "-----------", "--------------", "----------------", "-----------");
	for (int si = 0; si < 2; si++) {
		int n = sizes[si];
		rc_geom *g = make_geom(s, n, fov);
		if (!g)
			return 1;
		size_t nvox = rc_volume_count(rc_geom_volume(g));
		char name[64];
		snprintf(name, sizeof name, "back projection voxel %d^3", n);
		for (int pass = 0; pass < 2; pass++)
			if (bp_row(name, g, proj, vol, s->nviews, pass == 0 ? 1 : all, NULL))
				return 1;
		if (si == 0) {
			/* forward projectors and the matched transpose, all threads */
			rc_engine *e = NULL;
			rc_err err;
			if (rc_engine_cpu_new(g, all, &e, &err))
				return 1;
			int nt = rc_engine_cpu_threads(e);
			fill(vol, nvox, 7);
			const int nfv = 2;
			static const char *names[3] = { "forward raycast", "forward rotate", "back matched (raycast^T)" };
			for (int kind = 0; kind < 3; kind++) {
				double t0 = rc_now_s(), c0 = cpu_s();
				if (kind < 2)
					rc = rc_engine_forward(e, (rc_fp_kind)kind, vol, proj, 0, nfv, &err);
				else
					rc = rc_engine_back(e, RC_BP_MATCHED, proj, vol, 0, nfv, &err);
				double dt = rc_now_s() - t0, dc = cpu_s() - c0;
				if (rc) {
					fprintf(stderr, "bench-cpu: %s\n", err.msg);
					return 1;
				}
				char name[64];
				snprintf(name, sizeof name, "%s %d^3", names[kind], n);
				double rays = (double)nfv * s->nu * s->nv;
				printf("| %-36s | %7d | %9.2f | %9.2f | %12.3g | %14.3g | %9s |\n", name, nt, dt, dc,
				       rays / dt, rays / dc, "rays/s");
				fflush(stdout);
			}
			rc_engine_free(e);
			fill(proj, np, 1);
		}
		rc_geom_free(g);
	}
	/* C-arm-like matrices (0.5 degree tilt), an eighth of the views over
	 * the whole circle, all threads */
	const int nv8 = s->nviews / 8;
	rc_geom *gt = make_geom_tilted(s, nv8, sizes[1], fov, 0.5 * M_PI / 180);
	char name[64];
	snprintf(name, sizeof name, "back proj. %d^3, C-arm %d views", sizes[1], nv8);
	rc = !gt || bp_row(name, gt, proj, vol, nv8, all, NULL);
	rc_geom_free(gt);
	if (rc)
		return 1;
	/* The narrower paths a CPU without AVX-512 (or AVX2) takes: the same
	 * cone back projection, an eighth of the views, all threads */
	static const char *const narrower[2] = { "avx2", "baseline" };
	int below = !strcmp(rc_engine_cpu_isa(), "avx512") ? 0 : !strcmp(rc_engine_cpu_isa(), "avx2") ? 1 : 2;
	for (int i = below; i < 2; i++)
		for (int si = 0; si < 2; si++) {
			rc_geom *g = make_geom(s, sizes[si], fov);
			snprintf(name, sizeof name, "back proj. %d^3, %s, %d views", sizes[si], narrower[i], nv8);
			rc = !g || bp_row(name, g, proj, vol, nv8, all, narrower[i]);
			rc_geom_free(g);
			if (rc)
				return 1;
		}
	printf("peak memory (ru_maxrss): %.0f MiB\n", peak_mib());
	printf("calibration: %.1f GFLOP/s per CPU-second in an SSE multiply-add loop (a dedicated 2.5 GHz core: 20)\n",
	       calibrate_gflops());
	free(vol);
	free(proj);
	return 0;
}
