/*
 * test_ooc: out-of-core FDK in z-slabs (core/plan/ooc.h).  The slabs,
 * each reconstructed from only the detector rows it reads out of a stack
 * file, give the in-memory FDK of the whole stack to 1e-5 (max abs over
 * max) on a flat cone with its detector and volume off centre, a curved
 * cone, matrices, a short scan (Parker) and a fan; the data is noise, so
 * a row missing from a slab's read shows.  The middle slabs read fewer
 * rows than the detector has.  The plan: in core where the whole job
 * fits, slabs whose predicted peak fits a smaller budget, and a refusal
 * naming the least it needs below one slice's peak.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/memory.h"
#include "plan/ooc.h"
#include "plan/recon.h"

#define NVIEWS 40

static double angles[NVIEWS];
static double mats[NVIEWS * 12];

static void cone_spec(rc_recon_spec *s, int n, int nu, int nv, double range_deg)
{
	memset(s, 0, sizeof *s);
	s->geom.type = RC_GEOM_CONE;
	s->geom.nviews = NVIEWS;
	s->geom.det = (rc_detector_desc){ .nu = nu, .nv = nv, .du = 1.6, .dv = 1.5, .offset_u = 0.4, .offset_v = 2.2 };
	s->geom.source_isocenter_mm = 120;
	s->geom.source_detector_mm = 200;
	for (int k = 0; k < NVIEWS; k++)
		angles[k] = range_deg * k / NVIEWS;
	s->geom.angles_deg = angles;
	s->vol = (rc_volume_desc){ .nx = n, .ny = n, .nz = n, .vx = 1, .vy = 1, .vz = 1, .cz = 1.3 };
	rc_algo_params_default(&s->algo, RC_ALGO_FDK);
	s->engine = RC_ENGINE_CPU;
}

static uint32_t xs = 2463534242u;
static float rnd(void)
{
	xs ^= xs << 13;
	xs ^= xs >> 17;
	xs ^= xs << 5;
	return (float)(xs % 10000) / 10000.0f;
}

/* The stack in a file (noise, a NaN in it that both runs read as 0), the
 * in-memory FDK, and the slabs of thickness nz: max |slab - whole| / max |whole|. */
static double compare(const rc_recon_spec *s, int nz, int *rows_mid, int *nv_out)
{
	int once = 0;
	rc_err err;
	rc_geom *g = NULL;
	if (rc_geom_new(&s->geom, &s->vol, NULL, &g, &err))
		fail_msg("rc_geom_new: %s", err.msg);
	size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(&s->vol);
	float *proj = malloc(sizeof(float) * np), *whole = malloc(sizeof(float) * nvox);
	float *parts = malloc(sizeof(float) * nvox);
	assert_non_null(proj);
	assert_non_null(whole);
	assert_non_null(parts);
	for (size_t i = 0; i < np; i++)
		proj[i] = rnd();
	proj[np / 3] = NAN;
	char path[] = "/tmp/recond-test-ooc-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, proj, sizeof(float) * np), (ssize_t)(sizeof(float) * np));
	proj[np / 3] = 0.0f; /* the in-memory run's checks zero it (checks.h) */
	rc_recon_report rep;
	if (rc_recon_run(s, proj, whole, NULL, &rep, &err))
		fail_msg("whole: %s", err.msg);
	int n = s->vol.nz;
	size_t plane = (size_t)s->vol.nx * (size_t)s->vol.ny;
	double worst = 0;
	/* each slab filtering its rows, then (cone, matrices) from the stack
	 * filtered once, 7 views at a time, back-projected RC_OOC_FDK_VIEWS
	 * and then 5 views at a time (the last chunk shorter) */
	int src = fd;
	for (int pass = 0; pass < 3; pass++) {
		char fpath[] = "/tmp/recond-test-ooc-filt-XXXXXX";
		if (pass == 2 && src == fd)
			break;
		if (pass == 1) {
			if (!rc_ooc_filters_once(g))
				break;
			once = 1;
			src = mkstemp(fpath);
			assert_true(src >= 0);
			unlink(fpath);
			if (rc_ooc_filter(s, g, fd, src, 7, NULL, &err))
				fail_msg("filter: %s", err.msg);
		}
		memset(parts, 0, sizeof(float) * nvox);
		for (int z0 = 0; z0 < n; z0 += nz) {
			int z1 = z0 + nz < n ? z0 + nz : n;
			if (rc_ooc_fdk_slab_views(s, g, src, pass > 0, z0, z1, pass == 2 ? 5 : RC_OOC_FDK_VIEWS,
						  parts + plane * (size_t)z0, NULL, &rep, &err))
				fail_msg("slab %d..%d: %s", z0, z1, err.msg);
		}
		double dmax = 0, vmax = 0;
		for (size_t i = 0; i < nvox; i++) {
			dmax = fmax(dmax, fabs((double)parts[i] - whole[i]));
			vmax = fmax(vmax, fabs((double)whole[i]));
		}
		assert_true(vmax > 0);
		print_message("  %s: error %.2e\n",
			      pass == 2 ? "filtered once, 5 views a call" : pass ? "filtered once" : "filtered per slab",
			      dmax / vmax);
		worst = fmax(worst, dmax / vmax);
	}
	if (src != fd)
		close(src);
	int r0, r1;
	rc_ooc_slab_rows(g, n / 2 - nz / 2, n / 2 - nz / 2 + nz, &r0, &r1);
	if (rows_mid)
		*rows_mid = r1 - r0;
	if (nv_out)
		*nv_out = rc_geom_is_2d(g) ? n : rc_geom_detector(g)->nv;
	close(fd);
	free(proj);
	free(whole);
	free(parts);
	rc_geom_free(g);
	/* cone and matrices went both ways; fan does not filter once */
	assert_int_equal(once, s->geom.type == RC_GEOM_CONE || s->geom.type == RC_GEOM_MATRICES);
	return worst;
}

static void test_cone_flat(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 40, 56, 60, 360);
	int rows, nv;
	double e = compare(&s, 7, &rows, &nv);
	print_message("flat cone, slabs of 7: error %.2e, a middle slab reads %d of %d rows\n", e, rows, nv);
	assert_true(e <= 1e-5);
	assert_true(rows < nv / 2);
}

/* A volume taller than the field of view: slabs of one slice near its
 * ends are missed by some views, as in the in-memory run (0 from them). */
static void test_taller_than_view(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 40, 20, 360);
	s.vol.nz = 41;
	int rows, nv;
	double e = compare(&s, 1, &rows, &nv);
	print_message("a volume taller than the view, slabs of 1: error %.2e\n", e);
	assert_true(e <= 1e-5);
}

static void test_cone_curved(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 36, 56, 56, 360);
	s.geom.det.shape = RC_DETECTOR_CURVED;
	int rows, nv;
	double e = compare(&s, 5, &rows, &nv);
	print_message("curved cone, slabs of 5: error %.2e, a middle slab reads %d of %d rows\n", e, rows, nv);
	assert_true(e <= 1e-5);
	assert_true(rows < nv);
}

static void test_short_scan(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 32, 56, 52, 220);
	s.geom.det.offset_u = 0;
	double e = compare(&s, 9, NULL, NULL);
	print_message("short scan, slabs of 9: error %.2e\n", e);
	assert_true(e <= 1e-5);
}

static void test_matrices(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 32, 56, 52, 360);
	s.geom.det.offset_u = 0;
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s.geom, &s.vol, NULL, &g, &err))
		fail_msg("rc_geom_new: %s", err.msg);
	for (int k = 0; k < NVIEWS; k++)
		memcpy(mats + 12 * k, rc_geom_view(g, k)->P, sizeof(double) * 12);
	rc_geom_free(g);
	s.geom.type = RC_GEOM_MATRICES;
	s.geom.matrices = mats;
	s.geom.angles_deg = NULL;
	int rows, nv;
	double e = compare(&s, 6, &rows, &nv);
	print_message("matrices, slabs of 6: error %.2e, a middle slab reads %d of %d rows\n", e, rows, nv);
	assert_true(e <= 1e-5);
	assert_true(rows < nv);
}

static void test_fan(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 40, 1, 360);
	s.geom.type = RC_GEOM_FAN;
	s.geom.det.nv = 1;
	s.geom.det.offset_v = 0;
	s.geom.det.offset_u = 0;
	s.vol.nz = 10;
	double e = compare(&s, 3, NULL, NULL);
	print_message("fan, slabs of 3 slices: error %.2e\n", e);
	assert_true(e <= 1e-5);
}

static void test_plan(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 96, 128, 128, 360);
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s.geom, &s.vol, NULL, &g, &err))
		fail_msg("rc_geom_new: %s", err.msg);
	rc_ooc_plan p;
	uint64_t whole = rc_plan_memory(&s, 0);
	assert_int_equal(rc_ooc_plan_fdk(&s, g, 0, &p, &err), 0);
	assert_int_equal(p.slabs, 1);
	assert_int_equal(rc_ooc_plan_fdk(&s, g, whole, &p, &err), 0);
	assert_int_equal(p.slabs, 1);
	assert_true(p.predicted_bytes == whole);
	/* just under the in-memory run: the whole volume as one filtered slab
	 * (its rows of 32 views, not the whole stack), not two */
	assert_int_equal(rc_ooc_plan_fdk(&s, g, whole - 1, &p, &err), 0);
	assert_int_equal(p.slabs, 1);
	assert_int_equal(p.slab_nz, 96);
	assert_true(p.filter_chunk > 0 && p.predicted_bytes < whole);
	/* half the excess over the process: slabs */
	uint64_t budget = RC_MEM_BASE + (whole - RC_MEM_BASE) / 3;
	assert_int_equal(rc_ooc_plan_fdk(&s, g, budget, &p, &err), 0);
	print_message("plan under %llu of %llu bytes: %d slabs of %d, %d rows, %llu bytes predicted\n",
		      (unsigned long long)budget, (unsigned long long)whole, p.slabs, p.slab_nz, p.rows,
		      (unsigned long long)p.predicted_bytes);
	assert_true(p.slabs > 1);
	assert_true(p.predicted_bytes <= budget);
	assert_true(p.slab_nz * p.slabs >= 96 && p.slab_nz * (p.slabs - 1) < 96);
	assert_true(p.rows < 128);
	/* every budget that plans gets slabs that fit it, the evened-out
	 * thickness included (its slabs start elsewhere and read other rows) */
	int planned = 0;
	for (uint64_t b = RC_MEM_BASE + (1u << 20); b < whole; b += (whole - RC_MEM_BASE) / 97) {
		if (rc_ooc_plan_fdk(&s, g, b, &p, &err))
			continue;
		planned++;
		assert_true(p.predicted_bytes <= b);
		assert_true(p.slab_nz * p.slabs >= 96 && p.slab_nz * (p.slabs - 1) < 96);
	}
	assert_true(planned > 50);
	/* below the process's own peak: refused, naming what it needs */
	int rc = rc_ooc_plan_fdk(&s, g, RC_MEM_BASE, &p, &err);
	assert_int_equal(rc, RC_EUNSUPPORTED);
	assert_string_equal(err.field, "volume");
	assert_true(p.predicted_bytes > RC_MEM_BASE);
	assert_non_null(strstr(err.msg, "bytes"));
	/* the filtered slabs' tile scratch is per thread of the job's engine
	 * (execution.threads), not per core: 8 MiB over the process hold
	 * slabs on 1 thread, not one slice on 1024 (~75 MiB of scratch) */
	uint64_t small = RC_MEM_BASE + (8u << 20);
	s.threads = 1;
	assert_int_equal(rc_ooc_plan_fdk(&s, g, small, &p, &err), 0);
	assert_true(p.filter_chunk > 0 && p.predicted_bytes <= small);
	s.threads = 1024;
	assert_int_equal(rc_ooc_plan_fdk(&s, g, small, &p, &err), RC_EUNSUPPORTED);
	assert_true(p.predicted_bytes > small + (64u << 20));
	rc_geom_free(g);
}

/* One slice, a displaced detector (not filtered once), over the budget:
 * one slab of the rows that slice reads, which the plan must still mark
 * out of core (slabs 1 and no filtering pass alike the in-core plan's),
 * else the worker runs the whole stack in memory over its budget. */
static void test_plan_one_slice(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 96, 128, 128, 360);
	s.vol.nz = 1;
	s.geom.det.offset_u = 60;
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s.geom, &s.vol, NULL, &g, &err))
		fail_msg("rc_geom_new: %s", err.msg);
	assert_int_equal(rc_ooc_filters_once(g), 0);
	rc_ooc_plan p;
	uint64_t whole = rc_plan_memory(&s, 0);
	assert_int_equal(rc_ooc_plan_fdk(&s, g, whole, &p, &err), 0);
	assert_false(rc_ooc_plan_out_of_core(&p));
	assert_int_equal(rc_ooc_plan_fdk(&s, g, whole - 1, &p, &err), 0);
	print_message("one slice under %llu bytes: %d slab, %d of 128 rows, %llu bytes predicted\n",
		      (unsigned long long)(whole - 1), p.slabs, p.rows, (unsigned long long)p.predicted_bytes);
	assert_int_equal(p.slabs, 1);
	assert_int_equal(p.filter_chunk, 0);
	assert_true(p.rows < 128 && p.predicted_bytes < whole);
	assert_true(rc_ooc_plan_out_of_core(&p));
	rc_geom_free(g);
}

/* Whether a library whose path holds name is mapped into this process. */
static int mapped(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;
	while (f && !found && fgets(line, sizeof line, f))
		found = strstr(line, name) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* engine auto runs the slabs on the cpu engine, which the plan counts:
 * no device enumeration, whose OpenCL ICD loads PoCL (and LLVM) where it
 * is installed.  Both ways: each slab filtering its rows, and from the
 * stack filtered once.  (Where PoCL is not installed, or something before
 * loaded it, only the report's engine is checked.) */
static void test_auto_on_cpu(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 16, 32, 32, 360);
	s.engine = RC_ENGINE_AUTO;
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s.geom, &s.vol, NULL, &g, &err))
		fail_msg("rc_geom_new: %s", err.msg);
	size_t np = rc_geom_proj_count(g);
	float *proj = malloc(sizeof(float) * np), slab[16 * 16 * 8];
	assert_non_null(proj);
	for (size_t i = 0; i < np; i++)
		proj[i] = rnd();
	char path[] = "/tmp/recond-test-ooc-auto-XXXXXX", fpath[] = "/tmp/recond-test-ooc-auto-f-XXXXXX";
	int fd = mkstemp(path), ff = mkstemp(fpath);
	assert_true(fd >= 0 && ff >= 0);
	unlink(path);
	unlink(fpath);
	assert_int_equal(write(fd, proj, sizeof(float) * np), (ssize_t)(sizeof(float) * np));
	int before = mapped("libpocl");
	assert_int_equal(rc_ooc_filter(&s, g, fd, ff, 7, NULL, &err), 0);
	for (int filtered = 0; filtered < 2; filtered++) {
		rc_recon_report rep;
		if (rc_ooc_fdk_slab(&s, g, filtered ? ff : fd, filtered, 4, 12, slab, NULL, &rep, &err))
			fail_msg("slab: %s", err.msg);
		assert_string_equal(rep.engine, "cpu");
	}
	print_message("auto: PoCL mapped before %d, after the slabs %d\n", before, mapped("libpocl"));
	if (!before)
		assert_false(mapped("libpocl"));
	close(fd);
	close(ff);
	free(proj);
	rc_geom_free(g);
}

/* A helix is not run in slabs: no filtering pass (its views' heights are
 * not those of a narrowed cone job), and a slab of it refused by name. */
static void test_helix(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 16, 32, 32, 360);
	s.geom.type = RC_GEOM_HELIX;
	s.geom.det.offset_u = 0;
	s.geom.pitch_mm = 0;
	s.geom.z_start_mm = 0;
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s.geom, &s.vol, NULL, &g, &err))
		fail_msg("rc_geom_new: %s", err.msg);
	assert_false(rc_ooc_filters_once(g));
	float slab[16 * 16 * 4];
	rc_recon_report rep;
	for (int filtered = 0; filtered < 2; filtered++) {
		memset(&err, 0, sizeof err);
		assert_int_equal(rc_ooc_fdk_slab(&s, g, -1, filtered, 0, 4, slab, NULL, &rep, &err), RC_EUNSUPPORTED);
		assert_string_equal(err.field, "geometry.type");
	}
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_on_cpu), cmocka_unit_test(test_cone_flat), cmocka_unit_test(test_taller_than_view), cmocka_unit_test(test_cone_curved), cmocka_unit_test(test_short_scan),
		cmocka_unit_test(test_matrices),  cmocka_unit_test(test_fan),	      cmocka_unit_test(test_plan), cmocka_unit_test(test_plan_one_slice), cmocka_unit_test(test_helix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
