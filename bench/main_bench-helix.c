/*
 * bench-helix: the helical FDK (algo_fdk_helix.c) against the circular FDK
 * on the same machine, volume and detector: one table row per scan, its
 * views, the seconds of the reconstruction (weighting, filtering and back
 * projection), the voxel-views it back-projected and their rate, the
 * seconds per voxel of the volume and, for the helix, the most filtered
 * views it held at once and the slabs.  The circular row is a full turn
 * of the cone (FDK on the whole stack); the helix rows cover the volume at
 * pitch factors 0.5, 1 and 1.5 (pitch over the detector's height at the
 * axis).  Voxel-views are the pairs of a view and a voxel whose height
 * at the axis projects within the rows the view uses (all rows for the
 * circle, the window's for the helix): what the back projections visit.
 * The circle runs twice, on the volume and on the slices its detector
 * covers at the axis; the second is the reference (x circ) of the helix
 * rows.  Rates are per CPU second (the process's user and system time:
 * on a shared machine the wall clock varies far more).  The projections
 * are a smooth synthetic pattern (the work does not depend on the data).
 * Default: 192^2 x 64 voxels of 0.6 mm from a 256 x 32 curved detector of
 * 1 mm pixels, D = 570, S = 1040 mm, 360 views per turn (15 s here;
 * RECOND_BENCH_FLAT=1: a flat detector).  RECOND_BENCH_QUICK=1: 64^2 x 24
 * from 96 x 16, 120 views per turn.  RECOND_BENCH_CLINICAL=1 adds the clinical
 * case: 512^2 x 400 voxels of 0.7 x 0.7 x 0.625 mm from a 64-row curved
 * detector (736 columns of 1.28 mm, rows of 1.14 mm: 0.625 mm at the
 * axis), 1000 views per turn, pitch factor 1, with its peak memory (RSS).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "algo/algo.h"
#include "algo/fdk_helix.h"
#include "backend/backend.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "geometry/geometry.h"
#include "util/rc_clock.h"

typedef struct scan {
	double D, S;
	rc_detector_desc det;
	rc_volume_desc vol;
	int views_turn;
} scan;

/* A helix over the covered range of vol (pf > 0), or one turn of the cone. */
static rc_geom *make_geom(const scan *c, double pf, double **ang)
{
	rc_geom_spec sp = { .type = pf > 0 ? RC_GEOM_HELIX : RC_GEOM_CONE, .source_isocenter_mm = c->D,
			    .source_detector_mm = c->S, .det = c->det };
	double h_iso = c->det.nv * c->det.dv * c->D / c->S, pitch = pf * h_iso;
	int n = c->views_turn;
	if (pf > 0) {
		const rc_volume_desc *v = &c->vol;
		double R = hypot(0.5 * v->nx * v->vx, 0.5 * v->ny * v->vy), gm = asin(R / c->D);
		/* the scan long enough for the 3-PI window at pitch factors up to
		 * 0.5 (the helical FDK takes it where it fits), else the
		 * Tam-Danielsson window's */
		double npi = pf <= 0.5 ? 3 : 1;
		double m = pitch * (0.5 * npi + gm / M_PI) + c->det.dv * (c->D + R) / c->S + pitch / c->views_turn;
		double z0 = v->cz - (v->nz - 1) / 2.0 * v->vz - m, z1 = v->cz + (v->nz - 1) / 2.0 * v->vz + m;
		n = (int)ceil((z1 - z0) / pitch * c->views_turn) + 1;
		sp.pitch_mm = pitch;
		sp.z_start_mm = z0;
	}
	*ang = malloc(sizeof(double) * (size_t)n);
	if (!*ang)
		return NULL;
	for (int k = 0; k < n; k++)
		(*ang)[k] = k * 360.0 / c->views_turn;
	sp.nviews = n;
	sp.angles_deg = *ang;
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&sp, &c->vol, NULL, &g, &err)) {
		fprintf(stderr, "bench-helix: %s\n", err.msg);
		return NULL;
	}
	return g;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static double peak_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024.0;
}

/* One row; returns 0 on success. */
static int row(const scan *c, double pf, double *circ_rate)
{
	double *ang = NULL;
	rc_geom *g = make_geom(c, pf, &ang);
	if (!g) {
		free(ang);
		return 1;
	}
	size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(&c->vol);
	float *proj = malloc(np * sizeof(float)), *vol = malloc(nvox * sizeof(float));
	rc_engine *e = NULL;
	rc_exec *x = NULL;
	rc_backend *b = NULL;
	rc_err err;
	int rc = 1;
	if (!proj || !vol)
		goto out;
	for (size_t i = 0; i < np; i++) {
		size_t u = i % (size_t)c->det.nu, j = (i / (size_t)c->det.nu) % (size_t)c->det.nv;
		proj[i] = (float)(1.0 + 0.5 * sin(0.05 * (double)u) * cos(0.1 * (double)j));
	}
	if (rc_engine_cpu_new(g, 0, &e, &err) || rc_exec_new(&e, 1, &x, &err) || rc_backend_host_new(x, &b, &err)) {
		fprintf(stderr, "bench-helix: %s\n", err.msg);
		goto out;
	}
	rc_algo_params p;
	rc_algo_params_default(&p, RC_ALGO_FDK);
	rc_fdk_helix_stats st = { 0 };
	double t0 = rc_now_s(), c0 = cpu_s();
	rc = pf > 0 ? rc_fdk_helix_run(&p, b, proj, vol, NULL, &st, &err) : rc_algo_run(&p, x, proj, vol, NULL, &err);
	double t = rc_now_s() - t0, ct = cpu_s() - c0;
	if (rc) {
		fprintf(stderr, "bench-helix: %s\n", err.msg);
		goto out;
	}
	/* the rate per CPU second: on a shared machine the wall clock varies by
	 * 2x from run to run, the CPU time far less */
	double vv = st.voxel_views;
	if (pf == 0) {
		/* the same count as the helix's: the slices whose height (at the
		 * axis) projects within the detector's rows */
		double zr = 0.5 * c->det.nv * c->det.dv * c->D / c->S;
		for (int iz = 0; iz < c->vol.nz; iz++)
			vv += fabs(c->vol.cz + (iz - (c->vol.nz - 1) / 2.0) * c->vol.vz) <= zr
				      ? (double)c->vol.nx * c->vol.ny * rc_geom_nviews(g)
				      : 0.0;
	}
	double rate = vv / ct;
	if (pf == 0)
		*circ_rate = rate;
	char label[32], held[48];
	if (pf > 0) {
		snprintf(label, sizeof label, "helix %.1f %d-PI", pf, st.npi);
		snprintf(held, sizeof held, "%d views (%.1f MiB), %d slabs", st.max_views,
			 st.max_views * (double)st.view_bytes / 1048576, st.slabs);
	} else {
		snprintf(label, sizeof label, "circ. %dz", c->vol.nz);
		snprintf(held, sizeof held, "%d views (%.1f MiB)", rc_geom_nviews(g), np * 4.0 / 1048576);
	}
	printf("| %-14s | %6d | %8.3f | %8.3f | %10.3g | %9.3g | %5.2f | %9.3f | %-32s | %8.0f |\n", label,
	       rc_geom_nviews(g), t, ct, vv, rate, rate / *circ_rate, ct / nvox * 1e6, held, peak_mib());
out:
	rc_backend_free(b);
	rc_exec_free(x);
	rc_engine_free(e);
	rc_geom_free(g);
	free(proj);
	free(vol);
	free(ang);
	return rc;
}

static void header(const scan *c, const char *name)
{
	printf("%s: %dx%dx%d voxels of %.3g x %.3g x %.3g mm, %s detector %d x %d of %.3g x %.3g mm, D %.0f S %.0f mm, "
	       "%d views per turn\n\n",
	       name, c->vol.nx, c->vol.ny, c->vol.nz, c->vol.vx, c->vol.vy, c->vol.vz,
	       c->det.shape == RC_DETECTOR_CURVED ? "curved" : "flat", c->det.nu, c->det.nv, c->det.du, c->det.dv, c->D,
	       c->S, c->views_turn);
	printf("| scan           |  views |  seconds |  CPU s   | voxel-views | per CPU s  | x circ | CPU us/voxel | filtered views held              | peak MiB |\n");
	printf("| -------------- | ------ | -------- | -------- | ----------- | ---------- | ------ | -------- | -------------------------------- | -------- |\n");
}

int main(void)
{
	const char *q = getenv("RECOND_BENCH_QUICK"), *cl = getenv("RECOND_BENCH_CLINICAL");
	int quick = q && *q && strcmp(q, "0") != 0, clinical = cl && *cl && strcmp(cl, "0") != 0, rc = 0;
	scan c = { .D = 570, .S = 1040, .views_turn = quick ? 120 : 360 };
	const char *fl = getenv("RECOND_BENCH_FLAT");
	c.det = (rc_detector_desc){ .nu = quick ? 96 : 256, .nv = quick ? 16 : 32, .du = 1.0, .dv = 1.0,
				    .shape = fl && *fl && strcmp(fl, "0") ? RC_DETECTOR_FLAT : RC_DETECTOR_CURVED };
	int n = quick ? 64 : 192;
	c.vol = (rc_volume_desc){ .nx = n, .ny = n, .nz = quick ? 24 : 64, .vx = 0.6, .vy = 0.6, .vz = 0.6 };
	header(&c, "helical against circular FDK");
	double circ = 1;
	rc |= row(&c, 0, &circ);
	/* the circle on the slices its detector covers (at the axis): its rate
	 * there is the reference of the rows below */
	scan cc = c;
	cc.vol.nz = (int)floor(c.det.nv * c.det.dv * c.D / c.S / c.vol.vz);
	rc |= row(&cc, 0, &circ);
	for (int i = 1; i <= 3; i++)
		rc |= row(&c, 0.5 * i, &circ);
	if (clinical) {
		scan k = { .D = 570, .S = 1040, .views_turn = 1000 };
		k.det = (rc_detector_desc){ .nu = 736, .nv = 64, .du = 1.28, .dv = 0.625 * 1040 / 570,
					    .shape = RC_DETECTOR_CURVED };
		k.vol = (rc_volume_desc){ .nx = 512, .ny = 512, .nz = 400, .vx = 0.7, .vy = 0.7, .vz = 0.625 };
		printf("\n");
		header(&k, "clinical (RECOND_BENCH_CLINICAL)");
		double kc = 1;
		scan kk = k;
		kk.vol.nz = (int)floor(k.det.nv * k.det.dv * k.D / k.S / k.vol.vz);
		rc |= row(&kk, 0, &kc);
		rc |= row(&k, 1.0, &kc);
	}
	return rc;
}
