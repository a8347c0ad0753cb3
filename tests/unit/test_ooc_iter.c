/*
 * test_ooc_iter: out-of-core CGLS, SIRT, MLEM, SART and OS-EM (core/plan/ooc_iter.h).  Slabs of a few
 * slices and chunks of a few views, every vector in a file, give the
 * in-memory CGLS (rc_recon_run, the same voxel-driven pair) to 1e-5 (max
 * abs over max) from zero and from the FDK start, with the splat and the
 * footprint pair, on a flat cone off centre and on matrices; SIRT too
 * (from zero, and from FDK with the clamp and lambda 1.5).  The stop
 * rules (stagnation, discrepancy with the noise estimated, tolerance) stop
 * both runs after the same iteration for the same reason, early; a job's
 * defaults (FDK start, TV with its noise-set weight, the stop rules,
 * extend auto on data with no mass beyond the volume) give the in-memory
 * run to 1e-5 for CGLS and SIRT, and CGLS's TV across a restart of d.
 * extend auto: the verdict read from the file is the in-memory one, and a
 * run it would extend is refused naming algorithm.extend; extend "on" is
 * not refused where in memory the extension falls back to the asked
 * volume.  The plan: in core where the job fits, slabs and chunks whose
 * predicted peak fits a smaller budget (with TV thinner than without),
 * refusals of ray casting and extend "on"; SART in blocks of its subsets' views (a
 * block too big refused naming algorithm.subsets); its I/O figure's TV part
 * is the bytes TV adds to a measured iteration (CGLS, SIRT), SART's figure
 * (2 S V + 2 P) a measured iteration's, TV adding nothing; SART (default
 * subsets, FDK start, both ways to the column sums, its defaults with TV
 * steps in flight and the stop rules) and OS-EM give the in-memory run to
 * 1e-5 (test_sart, test_osem); the stack's
 * statistics pass comes after the FDK start (I/O before its phase); a
 * cancel stops the run (SART: from the progress hook after iteration 1).
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
#include <sys/stat.h>
#include <unistd.h>

#include "algo/colsum.h"
#include "plan/extend.h"
#include "plan/memory.h"
#include "plan/open.h"
#include "plan/ooc_iter.h"
#include "geometry/phantom.h"
#include "plan/recon.h"

#define NVIEWS 36

static double angles[NVIEWS];
static double mats[NVIEWS * 12];

static void cone_spec(rc_recon_spec *s, int n, int nu, int nv)
{
	memset(s, 0, sizeof *s);
	s->geom.type = RC_GEOM_CONE;
	s->geom.nviews = NVIEWS;
	s->geom.det = (rc_detector_desc){ .nu = nu, .nv = nv, .du = 2.5, .dv = 2.4, .offset_u = 0.4, .offset_v = 2.2 };
	s->geom.source_isocenter_mm = 120;
	s->geom.source_detector_mm = 200;
	for (int k = 0; k < NVIEWS; k++)
		angles[k] = 360.0 * k / NVIEWS;
	s->geom.angles_deg = angles;
	s->vol = (rc_volume_desc){ .nx = n, .ny = n, .nz = n, .vx = 1, .vy = 1, .vz = 1, .cz = 1.3 };
	rc_algo_params_plain(&s->algo, RC_ALGO_CGLS);
	s->algo.iterations = 6;
	s->algo.extend = RC_EXTEND_OFF;
	s->algo.projector = RC_PROJECTOR_SPLAT;
	s->engine = RC_ENGINE_CPU;
	s->threads = 2;
}

static int scratch(void)
{
	char path[] = "/tmp/recond-test-oociter-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	return fd;
}

/* The last progress call of a run: its iteration and stop rule. */
struct last {
	int it;
	char stopped[16];
};

/* s's geometry, built (a test fails where it cannot be). */
static rc_geom *geom_of(const rc_recon_spec *s)
{
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s->geom, &s->vol, NULL, &g, &err))
		fail_msg("rc_geom_new: %s", err.msg);
	return g;
}

static void on_progress(void *ud, const rc_progress *p)
{
	struct last *l = ud;
	l->it = p->iteration;
	snprintf(l->stopped, sizeof l->stopped, "%s", p->stopped ? p->stopped : "");
}

/* compare's data: 0 a smooth object over the whole detector, 1 a ball
 * inside the volume (no mass beyond it: extend auto does not extend) */
static int data_ball;
static double ball_noise = 0.004; /* the ball's noise, uniform, this wide */
/* compare's in-memory run, which the out-of-core one matched */
static struct last mem_last;
static double mem_tv; /* and its TV weight */

/* A smooth object's projections plus a little noise (and a NaN both runs
 * read as 0) in a file; the in-memory CGLS and the out-of-core one with
 * slabs of nzs slices and chunks of views: max |ooc - mem| / max |mem|.
 * Both stop after the same iteration for the same reason. */
static double compare(const rc_recon_spec *s, int nzs, int chunks)
{
	rc_err err;
	rc_geom *g = geom_of(s);
	size_t np = rc_geom_proj_count(g), nvox = rc_volume_count(&s->vol);
	float *proj = malloc(sizeof(float) * np), *mem = malloc(sizeof(float) * nvox), *ooc = malloc(sizeof(float) * nvox);
	assert_non_null(proj);
	assert_non_null(mem);
	assert_non_null(ooc);
	uint32_t xs = 2463534242u;
	size_t view = (size_t)s->geom.det.nu * (size_t)s->geom.det.nv;
	for (size_t i = 0; i < np; i++) {
		xs ^= xs << 13;
		xs ^= xs >> 17;
		xs ^= xs << 5;
		double u = (double)(i % (size_t)s->geom.det.nu) / s->geom.det.nu - 0.5;
		double v = (double)(i % view / (size_t)s->geom.det.nu) / s->geom.det.nv - 0.5;
		proj[i] = (float)(fmax(0.0, 0.2 - u * u - v * v) * 40.0 + (xs % 1000) / 1000.0 * 0.5);
		if (data_ball)
			proj[i] = (float)(((xs % 1000) / 1000.0 - 0.5) * ball_noise);
	}
	if (data_ball) {
		const double c[3] = { 0.5, -0.4, 1.3 };
		rc_phantom *ph = NULL;
		float *ideal = malloc(sizeof(float) * np);
		assert_non_null(ideal);
		assert_int_equal(rc_phantom_ball(c, 7.0, 0.02, &ph, &err), 0);
		assert_int_equal(rc_phantom_project(ph, g, 0, ideal, &err), 0);
		for (size_t i = 0; i < np; i++)
			proj[i] += ideal[i];
		rc_phantom_free(ph);
		free(ideal);
	}
	proj[np / 3] = NAN;
	int fd = scratch();
	assert_int_equal(write(fd, proj, sizeof(float) * np), (ssize_t)(sizeof(float) * np));
	proj[np / 3] = 0.0f;
	rc_recon_report rep, mrep;
	struct last ml = { 0 }, ol = { 0 };
	rc_algo_hooks mh = { .progress = on_progress, .ud = &ml }, oh = { .progress = on_progress, .ud = &ol };
	if (rc_recon_run(s, proj, mem, &mh, &mrep, &err))
		fail_msg("in memory: %s", err.msg);
	rc_ooc_plan p = { .slab_nz = nzs, .chunks = chunks, .slabs = (s->vol.nz + nzs - 1) / nzs };
	int xfd = scratch(), vscr = scratch(), pscr = scratch();
	if (rc_ooc_iter(s, g, fd, xfd, vscr, pscr, &p, &oh, &rep, &err))
		fail_msg("out of core: %s", err.msg);
	/* the disk the worker checks before the run covers every file it wrote */
	uint64_t wrote = 0;
	const int files[3] = { xfd, vscr, pscr };
	for (int i = 0; i < 3; i++) {
		struct stat st;
		assert_int_equal(fstat(files[i], &st), 0);
		wrote += (uint64_t)st.st_size;
	}
	print_message("  scratch and volume files %llu bytes, the disk check's figure %llu\n", (unsigned long long)wrote,
		      (unsigned long long)rc_ooc_iter_disk_bytes(s));
	assert_true(wrote <= rc_ooc_iter_disk_bytes(s));
	print_message("  in memory %d iterations (%s), out of core %d (%s); run nz %d and %d, TV weight %g and %g\n",
		      mrep.iterations_done, ml.stopped, rep.iterations_done, ol.stopped, mrep.run_nz, rep.run_nz,
		      mrep.tv_weight, rep.tv_weight);
	assert_int_equal(rep.iterations_done, mrep.iterations_done);
	assert_int_equal(ol.it, ml.it);
	assert_string_equal(ol.stopped, ml.stopped);
	assert_int_equal(rep.run_nz, s->vol.nz);
	assert_true(rep.tv_weight == mrep.tv_weight || (rep.tv_weight == 0.0 && s->algo.tv_weight == 0.0));
	mem_last = ml;
	mem_tv = mrep.tv_weight;
	assert_int_equal(pread(xfd, ooc, sizeof(float) * nvox, 0), (ssize_t)(sizeof(float) * nvox));
	double dmax = 0, vmax = 0, d2 = 0, v2 = 0;
	size_t at = 0;
	for (size_t i = 0; i < nvox; i++) {
		double d = fabs((double)ooc[i] - mem[i]);
		if (d > dmax)
			at = i;
		dmax = fmax(dmax, d);
		vmax = fmax(vmax, fabs((double)mem[i]));
		d2 += d * d;
		v2 += (double)mem[i] * mem[i];
	}
	assert_true(vmax > 0);
	print_message("  relative L2 %.2e; the largest difference at voxel %zu (z %zu), %g against %g\n", sqrt(d2 / v2), at,
		      at / ((size_t)s->vol.nx * (size_t)s->vol.ny), (double)ooc[at], (double)mem[at]);
	close(fd);
	close(xfd);
	close(vscr);
	close(pscr);
	free(proj);
	free(mem);
	free(ooc);
	rc_geom_free(g);
	return dmax / vmax;
}

static void test_cone_zero(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	double e = compare(&s, 5, 5);
	print_message("cone, splat, zero start, slabs of 5, 5 chunks: error %.2e\n", e);
	assert_true(e <= 1e-5);
}

static void test_cone_fdk(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	s.algo.initial = RC_INITIAL_FDK;
	s.algo.nonnegative = 1;
	double e = compare(&s, 7, 4);
	print_message("cone, splat, fdk start, nonnegative, slabs of 7, 4 chunks: error %.2e\n", e);
	assert_true(e <= 1e-5);
}

static void test_footprint_matrices(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 20, 32, 28);
	rc_geom *g = geom_of(&s);
	for (int k = 0; k < NVIEWS; k++)
		memcpy(mats + 12 * k, rc_geom_view(g, k)->P, sizeof(double) * 12);
	rc_geom_free(g);
	s.geom.type = RC_GEOM_MATRICES;
	s.geom.matrices = mats;
	s.geom.angles_deg = NULL;
	s.algo.projector = RC_PROJECTOR_FOOTPRINT;
	double e = compare(&s, 3, 6);
	print_message("matrices, footprint, slabs of 3, 6 chunks: error %.2e\n", e);
	assert_true(e <= 1e-5);
}

/* extend "on" out of core: refused only where the in-memory run would
 * extend.  A source above the volume looking down: the rays reach up to it,
 * the extended volume would hold it, so in memory the asked volume runs
 * (rc_extent_decide's fallback) and out of core it is not refused. */
static void test_extend_on_fallback(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 16, 32, 32);
	const double zs = 14.0, f = 4.0, c = 15.5; /* f: voxels under a pixel apart (splat) */
	s.geom.type = RC_GEOM_MATRICES;
	s.geom.nviews = 4;
	s.geom.angles_deg = NULL;
	s.geom.matrices = mats;
	s.vol.cz = 0;
	for (int k = 0; k < 4; k++) {
		/* camera u along (cos, sin), v along (-sin, cos), depth zs - z */
		double a = k * M_PI / 2, co = cos(a), si = sin(a);
		double P[12] = { f * co, f * si, -c, c * zs, -f * si, f * co, -c, c * zs, 0, 0, -1, zs };
		memcpy(mats + 12 * k, P, sizeof P);
	}
	rc_geom *g = geom_of(&s);
	rc_err err;
	s.algo.extend = RC_EXTEND_ON;
	s.algo.projector = RC_PROJECTOR_SPLAT;
	rc_extent raw, e;
	rc_extent_plan(g, NULL, RC_EXTEND_ON, &raw);
	assert_int_equal(rc_extent_of(&s, NULL, &e, &err), 0);
	print_message("extend on, source above: the reach's nz %d, the run's %d\n", raw.run.nz, e.run.nz);
	assert_true(raw.run.nz > s.vol.nz);
	assert_int_equal(e.run.nz, s.vol.nz);
	const char *why = rc_ooc_iter_refusal(&s, g);
	if (why)
		fail_msg("refused: %s", why);
	rc_geom_free(g);
}

/* Bytes this process read plus wrote through system calls so far
 * (/proc/self/io rchar + wchar, this read of it included). */
static uint64_t io_now(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char key[32];
	unsigned long long v, sum = 0;
	assert_non_null(f);
	while (fscanf(f, "%31s %llu", key, &v) == 2)
		if (!strcmp(key, "rchar:") || !strcmp(key, "wchar:"))
			sum += v;
	fclose(f);
	return sum;
}

/* The I/O of an iteration of s out of core (slabs of nzs, chunks): the
 * run's bytes with iterations it + 1 less those with it (CGLS's last
 * iteration skips its back projection: it >= 2). */
static uint64_t iteration_io(rc_recon_spec *s, int nzs, int chunks, int it)
{
	rc_err err;
	rc_geom *g = geom_of(s);
	size_t np = rc_geom_proj_count(g);
	float *proj = malloc(sizeof(float) * np);
	assert_non_null(proj);
	for (size_t i = 0; i < np; i++)
		proj[i] = (float)(i % 97) * 0.01f;
	int fd = scratch();
	assert_int_equal(write(fd, proj, sizeof(float) * np), (ssize_t)(sizeof(float) * np));
	rc_ooc_plan p = { .slab_nz = nzs, .chunks = chunks, .slabs = (s->vol.nz + nzs - 1) / nzs };
	uint64_t used[2];
	for (int k = 0; k < 2; k++) {
		int xfd = scratch(), vscr = scratch(), pscr = scratch();
		rc_recon_report rep;
		s->algo.iterations = it + k;
		uint64_t t0 = io_now();
		if (rc_ooc_iter(s, g, fd, xfd, vscr, pscr, &p, NULL, &rep, &err))
			fail_msg("out of core: %s", err.msg);
		used[k] = io_now() - t0;
		assert_int_equal(rep.iterations_done, it + k);
		close(xfd);
		close(vscr);
		close(pscr);
	}
	close(fd);
	free(proj);
	rc_geom_free(g);
	return used[1] - used[0];
}

/* io_now() at the FDK start's phase */
static void on_phase_io(void *ud, const char *phase)
{
	if (!strcmp(phase, RC_PHASE_FDK_START))
		*(uint64_t *)ud = io_now();
}

/* The stack's statistics pass (here the discrepancy rule's noise) comes
 * after the FDK start, whose own plan takes the whole budget: less than a
 * stack read before the start's phase (CGLS, SIRT). */
static void test_stats_after_start(void **state)
{
	(void)state;
	for (int sirt = 0; sirt < 2; sirt++) {
		rc_recon_spec s;
		cone_spec(&s, 24, 36, 30);
		if (sirt)
			rc_algo_params_plain(&s.algo, RC_ALGO_SIRT);
		s.algo.initial = RC_INITIAL_FDK;
		s.algo.extend = RC_EXTEND_OFF;
		s.algo.stop_discrepancy = 1.0;
		s.algo.iterations = 2;
		rc_err err;
		rc_geom *g = geom_of(&s);
		size_t np = rc_geom_proj_count(g);
		float *proj = malloc(sizeof(float) * np);
		assert_non_null(proj);
		for (size_t i = 0; i < np; i++)
			proj[i] = (float)(i % 89) * 0.01f;
		int fd = scratch(), xfd = scratch(), vscr = scratch(), pscr = scratch();
		assert_int_equal(write(fd, proj, sizeof(float) * np), (ssize_t)(sizeof(float) * np));
		rc_ooc_plan p = { .slab_nz = 5, .chunks = 1, .slabs = 5 };
		uint64_t at = 0;
		rc_algo_hooks h = { .phase = on_phase_io, .ud = &at };
		rc_recon_report rep;
		uint64_t t0 = io_now();
		if (rc_ooc_iter(&s, g, fd, xfd, vscr, pscr, &p, &h, &rep, &err))
			fail_msg("out of core: %s", err.msg);
		print_message("%s: %llu bytes of I/O before the FDK start, a stack %zu\n", sirt ? "sirt" : "cgls",
			      (unsigned long long)(at - t0), sizeof(float) * np);
		assert_true(at > t0);
		assert_true(at - t0 < sizeof(float) * np);
		close(fd);
		close(xfd);
		close(vscr);
		close(pscr);
		free(proj);
		rc_geom_free(g);
	}
}

/* The plan's I/O figure counts TV's passes with their halo slices: an
 * iteration's measured bytes with TV less those without are its TV part
 * (CGLS: 3 (V + 2 (S - 1) slices); SIRT: per step 2 V + S - 1 slices). */
static void test_tv_io(void **state)
{
	(void)state;
	const int nzs = 5, chunks = 3;
	for (int sirt = 0; sirt < 2; sirt++) {
		rc_recon_spec s;
		cone_spec(&s, 24, 36, 30);
		if (sirt)
			rc_algo_params_plain(&s.algo, RC_ALGO_SIRT);
		s.algo.initial = RC_INITIAL_ZERO;
		s.algo.projector = RC_PROJECTOR_SPLAT;
		s.algo.extend = RC_EXTEND_OFF;
		uint64_t plain = iteration_io(&s, nzs, chunks, 2);
		rc_ooc_plan p = { .slab_nz = nzs, .chunks = chunks, .slabs = (24 + nzs - 1) / nzs, .rows = 30 };
		uint64_t fplain = rc_ooc_iter_io(&s, &p);
		s.algo.tv_weight = 0.05;
		s.algo.tv_auto = 0;
		s.algo.tv_steps = 3;
		uint64_t tv = iteration_io(&s, nzs, chunks, 2);
		uint64_t ftv = rc_ooc_iter_io(&s, &p);
		print_message("%s: an iteration's I/O %llu bytes, with TV %llu; the figure's TV part %llu\n",
			      sirt ? "sirt" : "cgls", (unsigned long long)plain, (unsigned long long)tv,
			      (unsigned long long)(ftv - fplain));
		/* reading /proc/self/io counts too: a few bytes, its digits */
		assert_true(tv > plain);
		assert_true(llabs((long long)(tv - plain) - (long long)(ftv - fplain)) <= 64);
	}
}

static void test_sirt(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	s.algo.name = RC_ALGO_SIRT;
	double e = compare(&s, 5, 3);
	print_message("sirt, splat, zero start, slabs of 5, 3 chunks: error %.2e\n", e);
	assert_true(e <= 1e-5);
	s.algo.initial = RC_INITIAL_FDK;
	s.algo.nonnegative = 1;
	s.algo.relaxation = 1.5;
	e = compare(&s, 7, 2);
	print_message("sirt, splat, fdk start, nonnegative, lambda 1.5, slabs of 7, 2 chunks: error %.2e\n", e);
	assert_true(e <= 1e-5);
}

/* The stop rules: thresholds from the stack read in pieces, the same
 * iteration and reason as in memory; a stagnation that fires early. */
static void test_stop_rules(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	data_ball = 1;
	s.algo.iterations = 30;
	s.algo.stop_stagnation = 0.05;
	double e = compare(&s, 5, 4);
	print_message("cgls, stagnation 0.05: stopped after %d (%s), error %.2e\n", mem_last.it, mem_last.stopped, e);
	assert_true(e <= 1e-5);
	assert_true(mem_last.it < s.algo.iterations);
	assert_string_equal(mem_last.stopped, "stagnation");
	s.algo.stop_stagnation = 0;
	s.algo.stop_discrepancy = 1.0; /* the noise estimated from the stack */
	e = compare(&s, 7, 3);
	print_message("cgls, discrepancy 1: stopped after %d (%s), error %.2e\n", mem_last.it, mem_last.stopped, e);
	assert_true(e <= 1e-5);
	assert_string_equal(mem_last.stopped, "discrepancy");
	s.algo.stop_discrepancy = 0;
	s.algo.stop_tolerance = 0.05;
	s.algo.name = RC_ALGO_SIRT;
	e = compare(&s, 6, 5);
	print_message("sirt, tolerance 0.05: stopped after %d (%s), error %.2e\n", mem_last.it, mem_last.stopped, e);
	assert_true(e <= 1e-5);
	assert_string_equal(mem_last.stopped, "tolerance");
	data_ball = 0;
}

/* A job's defaults (docs/algorithms.md): FDK start, TV with the weight
 * the noise sets, the discrepancy and stagnation stops, extend auto (the
 * ball leaves no mass beyond the volume: not extended), projector auto. */
static void test_defaults(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	data_ball = 1;
	rc_algo_params_default(&s.algo, RC_ALGO_CGLS);
	s.algo.iterations = 12;
	double e = compare(&s, 5, 4);
	print_message("cgls defaults, slabs of 5, 4 chunks: %d iterations (%s), error %.2e\n", mem_last.it,
		      mem_last.stopped, e);
	assert_true(e <= 1e-5);
	/* less noise: a default TV weight below RC_TV_DEFAULT_WEIGHT, the
	 * same as in memory (rc_tv_weight from the stack in pieces) */
	ball_noise = 0.0004;
	e = compare(&s, 5, 4);
	print_message("cgls defaults, less noise: TV weight %g, error %.2e\n", mem_tv, e);
	assert_true(e <= 1e-5);
	assert_true(mem_tv > 0.0 && mem_tv < RC_TV_DEFAULT_WEIGHT);
	ball_noise = 0.004;
	/* TV on its own (no stop) across a restart of d, zero start */
	s.algo.stop_stagnation = 0;
	s.algo.stop_discrepancy = 0;
	s.algo.initial = RC_INITIAL_ZERO;
	s.algo.iterations = 7;
	e = compare(&s, 3, 3);
	print_message("cgls TV, zero start, 7 iterations, slabs of 3: error %.2e\n", e);
	assert_true(e <= 1e-5);
	rc_algo_params_default(&s.algo, RC_ALGO_SIRT);
	s.algo.iterations = 12;
	e = compare(&s, 5, 3);
	print_message("sirt defaults, slabs of 5, 3 chunks: %d iterations (%s), error %.2e\n", mem_last.it,
		      mem_last.stopped, e);
	assert_true(e <= 1e-5);
	/* slabs of one slice: every TV halo from the neighbours (SIRT's carried) */
	s.algo.iterations = 3;
	e = compare(&s, 1, 2);
	print_message("sirt defaults, 3 iterations, slabs of 1: error %.2e\n", e);
	assert_true(e <= 1e-5);
	rc_algo_params_default(&s.algo, RC_ALGO_CGLS);
	s.algo.iterations = 3;
	e = compare(&s, 1, 2);
	print_message("cgls defaults, 3 iterations, slabs of 1: error %.2e\n", e);
	assert_true(e <= 1e-5);
	data_ball = 0;
}

/* MLEM (one subset): from its constant start, and with its defaults (FDK
 * start floored, TV, stagnation 0.05 and discrepancy); OS-EM is refused. */
static void test_mlem(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	data_ball = 1;
	s.algo.name = RC_ALGO_MLEM;
	s.algo.iterations = 5;
	double e = compare(&s, 5, 3);
	print_message("mlem, constant start, slabs of 5, 3 chunks: error %.2e\n", e);
	assert_true(e <= 1e-5);
	rc_algo_params_default(&s.algo, RC_ALGO_MLEM);
	s.algo.iterations = 8;
	e = compare(&s, 7, 4);
	print_message("mlem defaults, slabs of 7, 4 chunks: %d iterations (%s), error %.2e\n", mem_last.it,
		      mem_last.stopped, e);
	assert_true(e <= 1e-5);
	data_ball = 0;
	rc_geom *g = geom_of(&s);
	s.algo.subsets = 4;
	assert_null(rc_ooc_iter_refusal(&s, g));
	assert_int_equal(rc_ooc_iter_subsets(&s), 4);
	s.algo.subsets = 1;
	assert_null(rc_ooc_iter_refusal(&s, g));
	assert_int_equal(rc_ooc_iter_subsets(&s), 0);
	rc_geom_free(g);
}

/* SART (ordered subsets, rc_sart_core) out of core: a block of views at a
 * time, x read and written once per block.  Its default subsets (36 views:
 * 3 blocks), from zero and from FDK, with the column sums' closed form and
 * (a detector that misses the volume's corners) recomputed per slab; with
 * its defaults (FDK start, TV with 4 steps per block in flight, the stop
 * rules, stagnation and tolerance stopping early); with 12 blocks (a TV
 * step each); slabs of one slice.  On the
 * ball (inside the volume) to 1e-5; on the smooth object over the whole
 * detector (mass beyond the volume, which its last slice takes up through
 * rays of small row and column sums) to 2e-5 in slabs and 1e-6 in one
 * slab: the slabs' float sums of A x, not the method, differ there. */
static void test_sart(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	rc_algo_params_plain(&s.algo, RC_ALGO_SART);
	s.algo.subsets = 0;
	s.algo.projector = RC_PROJECTOR_SPLAT;
	s.algo.extend = RC_EXTEND_OFF;
	s.algo.iterations = 4;
	assert_int_equal(rc_ooc_iter_subsets(&s), 3);
	double e = compare(&s, 24, 1);
	print_message("sart, 3 blocks, smooth object beyond the volume, zero start, one slab: error %.2e\n", e);
	assert_true(e <= 1e-6);
	e = compare(&s, 5, 1);
	print_message("sart, 3 blocks, smooth object beyond the volume, zero start, slabs of 5: error %.2e\n", e);
	assert_true(e <= 2e-5);
	data_ball = 1;
	e = compare(&s, 5, 1);
	print_message("sart, 3 blocks, zero start, slabs of 5: error %.2e\n", e);
	assert_true(e <= 1e-5);
	s.algo.initial = RC_INITIAL_FDK;
	s.algo.nonnegative = 1;
	s.algo.relaxation = 0.8;
	e = compare(&s, 7, 1);
	print_message("sart, fdk start, nonnegative, lambda 0.8, slabs of 7: error %.2e\n", e);
	assert_true(e <= 1e-5);
	/* not floored: the first block's A x takes a pass of its own */
	s.algo.nonnegative = 0;
	e = compare(&s, 7, 1);
	print_message("sart, fdk start, lambda 0.8, slabs of 7: error %.2e\n", e);
	assert_true(e <= 1e-5);
	s.algo.nonnegative = 1;
	/* a narrow detector: the closed form does not hold, C_s back-projected */
	rc_recon_spec n;
	cone_spec(&n, 24, 20, 30);
	n.algo = s.algo;
	rc_geom *g = geom_of(&n);
	assert_false(rc_colsum_form_may_hold(g));
	rc_geom_free(g);
	g = geom_of(&s);
	assert_true(rc_colsum_form_may_hold(g));
	rc_geom_free(g);
	e = compare(&n, 5, 1);
	print_message("sart, narrow detector (column sums recomputed), slabs of 5: error %.2e\n", e);
	assert_true(e <= 1e-5);
	rc_algo_params_default(&s.algo, RC_ALGO_SART);
	s.algo.iterations = 10;
	assert_int_equal(rc_ooc_iter_tv_steps(&s), 4);
	e = compare(&s, 5, 1);
	print_message("sart defaults, slabs of 5: %d iterations (%s), error %.2e\n", mem_last.it, mem_last.stopped, e);
	assert_true(e <= 1e-5);
	s.algo.subsets = 12;
	s.algo.iterations = 3;
	assert_int_equal(rc_ooc_iter_tv_steps(&s), 1);
	e = compare(&s, 4, 1);
	print_message("sart defaults, 12 blocks, slabs of 4: error %.2e\n", e);
	assert_true(e <= 1e-5);
	s.algo.subsets = 0;
	s.algo.iterations = 2;
	e = compare(&s, 1, 1);
	print_message("sart defaults, 2 iterations, slabs of 1: error %.2e\n", e);
	assert_true(e <= 1e-5);
	/* the stop rules early: stagnation, then the tolerance (the residual
	 * summed over the blocks, each before its update) */
	s.algo.iterations = 30;
	s.algo.stop_discrepancy = 0;
	s.algo.stop_stagnation = 0.2;
	e = compare(&s, 5, 1);
	print_message("sart defaults, stagnation 0.2: stopped after %d (%s), error %.2e\n", mem_last.it,
		      mem_last.stopped, e);
	assert_true(e <= 1e-5);
	assert_true(mem_last.it < s.algo.iterations);
	assert_string_equal(mem_last.stopped, "stagnation");
	s.algo.stop_stagnation = 0;
	s.algo.stop_tolerance = 0.05;
	e = compare(&s, 5, 1);
	print_message("sart defaults, tolerance 0.05: stopped after %d (%s), error %.2e\n", mem_last.it,
		      mem_last.stopped, e);
	assert_true(e <= 1e-5);
	assert_true(mem_last.it < s.algo.iterations);
	assert_string_equal(mem_last.stopped, "tolerance");
	data_ball = 0;
}

/* OS-EM (MLEM with 4 subsets): from its constant start, and its defaults
 * (FDK start floored, TV, the stop rules) */
static void test_osem(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	data_ball = 1;
	rc_algo_params_plain(&s.algo, RC_ALGO_MLEM);
	s.algo.extend = RC_EXTEND_OFF;
	s.algo.subsets = 4;
	s.algo.projector = RC_PROJECTOR_SPLAT;
	s.algo.iterations = 4;
	double e = compare(&s, 5, 1);
	print_message("os-em, 4 subsets, constant start, slabs of 5: error %.2e\n", e);
	assert_true(e <= 1e-5);
	/* blocks of 5 and 6 views (36 over 7), the forward pass of ones in
	 * chunks of the largest */
	s.algo.subsets = 7;
	e = compare(&s, 6, 1);
	print_message("os-em, 7 subsets, constant start, slabs of 6: error %.2e\n", e);
	assert_true(e <= 1e-5);
	rc_algo_params_default(&s.algo, RC_ALGO_MLEM);
	s.algo.subsets = 4;
	s.algo.iterations = 6;
	e = compare(&s, 7, 1);
	print_message("os-em defaults, 4 subsets, slabs of 7: %d iterations (%s), error %.2e\n", mem_last.it,
		      mem_last.stopped, e);
	assert_true(e <= 1e-5);
	data_ball = 0;
}

/* The bytes one backend's opening reads (/proc/cpuinfo and the like: a
 * slab's projection opens one, slab_project) */
static uint64_t open_io(const rc_recon_spec *s)
{
	rc_geom *g = geom_of(s);
	rc_err err;
	uint64_t t0 = io_now();
	for (int k = 0; k < 10; k++) {
		rc_backend *b = NULL;
		assert_int_equal(rc_backend_open(RC_ENGINE_CPU, NULL, 0, s, g, &b, &err), 0);
		rc_backend_free(b);
	}
	uint64_t per = (io_now() - t0) / 10;
	rc_geom_free(g);
	return per;
}

/* SART's I/O per iteration is the plan's figure: x read and written once
 * per block, the block's p and R read (2 S V + 2 P), TV's steps (4 per
 * block here) in memory; besides it, the opening of a slab's backend twice
 * per slab and block (its back projection, the next block's projection:
 * the closed form's column sums take none), measured apart */
static void test_sart_io(void **state)
{
	(void)state;
	const int nzs = 5;
	uint64_t plain = 0;
	for (int tv = 0; tv < 2; tv++) {
		rc_recon_spec s;
		cone_spec(&s, 24, 36, 30);
		rc_algo_params_plain(&s.algo, RC_ALGO_SART);
		s.algo.subsets = 0;
		s.algo.projector = RC_PROJECTOR_SPLAT;
		s.algo.extend = RC_EXTEND_OFF;
		if (tv) {
			s.algo.tv_weight = 0.05;
			s.algo.tv_steps = 10;
		}
		uint64_t io = iteration_io(&s, nzs, 1, 2);
		rc_ooc_plan p = { .slab_nz = nzs, .chunks = 3, .slabs = (24 + nzs - 1) / nzs, .rows = 30 };
		uint64_t fig = rc_ooc_iter_io(&s, &p);
		uint64_t V = 4ull * 24 * 24 * 24, P = 4ull * 36 * 36 * 30;
		print_message("sart%s: an iteration's I/O %llu bytes, the figure %llu (2 S V + 2 P = %llu)\n",
			      tv ? " with TV" : "", (unsigned long long)io, (unsigned long long)fig,
			      (unsigned long long)(2 * 3 * V + 2 * P));
		uint64_t opens = 2 * 3 * 5 * open_io(&s);
		print_message("  besides the figure: %lld bytes; 30 backends' opening %llu\n", (long long)io - (long long)fig,
			      (unsigned long long)opens);
		assert_int_equal(fig, 2 * 3 * V + 2 * P);
		/* an opening's bytes vary by a few dozen (the files under /proc
		 * and /sys it reads): 128 each, less than a slab's 11520 bytes */
		assert_true(llabs((long long)io - (long long)(fig + opens)) <= 30 * 128);
		/* TV's steps add no I/O (the halo read of /proc/self/io's digits aside) */
		if (tv)
			assert_true(llabs((long long)io - (long long)plain) <= 64);
		plain = io;
	}
	/* OS-EM (4 subsets): B_s(1) kept in vscr and read per block (3 S V + P),
	 * two openings per slab and block (none for the column sums) */
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	rc_algo_params_plain(&s.algo, RC_ALGO_MLEM);
	s.algo.subsets = 4;
	s.algo.projector = RC_PROJECTOR_SPLAT;
	s.algo.extend = RC_EXTEND_OFF;
	assert_true(rc_ooc_iter_colsum_kept(&s));
	uint64_t io = iteration_io(&s, nzs, 4, 2);
	rc_ooc_plan p = { .slab_nz = nzs, .chunks = 4, .slabs = (24 + nzs - 1) / nzs, .rows = 30 };
	uint64_t fig = rc_ooc_iter_io(&s, &p), V = 4ull * 24 * 24 * 24, P = 4ull * 36 * 36 * 30;
	uint64_t opens = 2 * 4 * 5 * open_io(&s);
	print_message("os-em: an iteration's I/O %llu bytes, the figure %llu (3 S V + P = %llu), openings %llu\n",
		      (unsigned long long)io, (unsigned long long)fig, (unsigned long long)(3 * 4 * V + P),
		      (unsigned long long)opens);
	assert_int_equal(fig, 3 * 4 * V + P);
	assert_true(llabs((long long)io - (long long)(fig + opens)) <= 40 * 128);
}

/* extend auto: the verdict from the file is the in-memory one; where the
 * data show mass beyond the volume (the smooth object over the whole
 * detector) the run is refused naming algorithm.extend, nothing run. */
static void test_extend(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 24, 36, 30);
	s.algo.extend = RC_EXTEND_AUTO;
	rc_geom *g = geom_of(&s);
	rc_err err;
	size_t np = rc_geom_proj_count(g);
	float *proj = malloc(sizeof(float) * np);
	assert_non_null(proj);
	size_t view = (size_t)s.geom.det.nu * (size_t)s.geom.det.nv;
	for (size_t i = 0; i < np; i++) {
		double u = (double)(i % (size_t)s.geom.det.nu) / s.geom.det.nu - 0.5;
		double v = (double)(i % view / (size_t)s.geom.det.nu) / s.geom.det.nv - 0.5;
		proj[i] = (float)(fmax(0.0, 0.2 - u * u - v * v) * 40.0);
	}
	proj[np / 2] = INFINITY; /* read as 0 by both */
	int fd = scratch();
	assert_int_equal(write(fd, proj, sizeof(float) * np), (ssize_t)(sizeof(float) * np));
	proj[np / 2] = 0.0f;
	rc_extent em, ef;
	rc_extent_decide(&s, g, proj, &em);
	assert_int_equal(rc_extent_decide_file(&s, g, fd, &ef, &err), 0);
	print_message("extend auto: in memory nz %d (mass beyond %d), from the file nz %d (%d)\n", em.run.nz,
		      em.mass_beyond, ef.run.nz, ef.mass_beyond);
	assert_int_equal(em.run.nz, ef.run.nz);
	assert_int_equal(em.z0, ef.z0);
	assert_int_equal(em.mass_beyond, ef.mass_beyond);
	assert_true(ef.run.nz > s.vol.nz);
	rc_ooc_plan p = { .slab_nz = 6, .chunks = 2, .slabs = 4 };
	int xfd = scratch(), vscr = scratch(), pscr = scratch();
	rc_recon_report rep;
	assert_int_equal(rc_ooc_iter(&s, g, fd, xfd, vscr, pscr, &p, NULL, &rep, &err), RC_EUNSUPPORTED);
	print_message("refused: %s: %s\n", err.field, err.msg);
	assert_string_equal(err.field, "algorithm.extend");
	assert_int_equal(rep.iterations_done, 0);
	close(fd);
	close(xfd);
	close(vscr);
	close(pscr);
	free(proj);
	rc_geom_free(g);
}

/* A cancel set before the run stops it with RC_ECANCELLED. */
static void test_cancel(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 16, 24, 20);
	rc_geom *g = geom_of(&s);
	rc_err err;
	int fd = scratch(), xfd = scratch(), vscr = scratch(), pscr = scratch();
	assert_int_equal(ftruncate(fd, (off_t)(sizeof(float) * rc_geom_proj_count(g))), 0);
	atomic_int stop = 1;
	rc_algo_hooks h = { .cancel = &stop };
	rc_ooc_plan p = { .slab_nz = 4, .chunks = 3, .slabs = 4 };
	rc_recon_report rep;
	assert_int_equal(rc_ooc_iter(&s, g, fd, xfd, vscr, pscr, &p, &h, &rep, &err), RC_ECANCELLED);
	close(fd);
	close(xfd);
	close(vscr);
	close(pscr);
	rc_geom_free(g);
}

/* Sets the cancel flag (ud) once iteration 1 has reported */
static void cancel_after_first(void *ud, const rc_progress *p)
{
	if (p->iteration >= 1)
		atomic_store((atomic_int *)ud, 1);
}

/* SART's blocks (ooc_subsets.c) cancelled from the progress hook after
 * iteration 1: RC_ECANCELLED naming the iterations done, one reported */
static void test_cancel_sart(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 16, 24, 20);
	rc_algo_params_plain(&s.algo, RC_ALGO_SART);
	s.algo.subsets = 0;
	s.algo.extend = RC_EXTEND_OFF;
	s.algo.iterations = 4;
	int S = rc_ooc_iter_subsets(&s);
	assert_true(S > 1);
	rc_geom *g = geom_of(&s);
	rc_err err;
	int fd = scratch(), xfd = scratch(), vscr = scratch(), pscr = scratch();
	assert_int_equal(ftruncate(fd, (off_t)(sizeof(float) * rc_geom_proj_count(g))), 0);
	atomic_int stop = 0;
	rc_algo_hooks h = { .cancel = &stop, .progress = cancel_after_first, .ud = &stop };
	rc_ooc_plan p = { .slab_nz = 4, .chunks = S, .slabs = 4 };
	rc_recon_report rep;
	assert_int_equal(rc_ooc_iter(&s, g, fd, xfd, vscr, pscr, &p, &h, &rep, &err), RC_ECANCELLED);
	assert_int_equal(rep.iterations_done, 1);
	assert_string_equal(err.msg, "cancelled after 1 iterations");
	close(fd);
	close(xfd);
	close(vscr);
	close(pscr);
	rc_geom_free(g);
}

static void test_plan(void **state)
{
	(void)state;
	rc_recon_spec s;
	cone_spec(&s, 64, 96, 80);
	s.algo.projector = RC_PROJECTOR_FOOTPRINT;
	rc_geom *g = geom_of(&s);
	rc_err err;
	rc_ooc_plan p;
	uint64_t whole = rc_plan_memory(&s, 0);
	assert_int_equal(rc_ooc_plan_iter(&s, g, whole, &p, &err), 0);
	assert_int_equal(p.slabs, 1);
	uint64_t budget = RC_MEM_BASE + ((uint64_t)1 << 20);
	if (rc_ooc_plan_iter(&s, g, budget, &p, &err))
		fail_msg("plan: %s", err.msg);
	print_message("plan under %llu: %d slabs of %d, %d rows, %d chunks, %llu bytes, %llu bytes of I/O per iteration\n",
		      (unsigned long long)budget, p.slabs, p.slab_nz, p.rows, p.chunks,
		      (unsigned long long)p.predicted_bytes, (unsigned long long)rc_ooc_iter_io(&s, &p));
	assert_true(p.slabs > 1);
	assert_true(p.predicted_bytes <= budget);
	/* not one slice and one view */
	assert_int_equal(rc_ooc_plan_iter(&s, g, RC_MEM_BASE, &p, &err), RC_EUNSUPPORTED);
	assert_true(p.predicted_bytes > RC_MEM_BASE);
	/* refusals: ray casting, SART */
	s.algo.projector = RC_PROJECTOR_RAYCAST;
	assert_int_equal(rc_ooc_plan_iter(&s, g, budget, &p, &err), RC_EUNSUPPORTED);
	assert_non_null(strstr(err.msg, "voxel-driven"));
	s.algo.projector = RC_PROJECTOR_FOOTPRINT;
	/* TV and the stop rules plan, with TV's slabs of halo in the figure:
	 * thinner slabs than the plain job's, over its need at their size */
	rc_ooc_plan plain, q;
	if (rc_ooc_plan_iter(&s, g, budget, &plain, &err))
		fail_msg("plan: %s", err.msg);
	s.algo.tv_weight = 0.1;
	s.algo.stop_stagnation = 0.01;
	if (rc_ooc_plan_iter(&s, g, budget, &q, &err))
		fail_msg("plan with TV: %s", err.msg);
	print_message("with TV: slabs of %d (plain %d), %llu bytes\n", q.slab_nz, plain.slab_nz,
		      (unsigned long long)q.predicted_bytes);
	assert_true(q.predicted_bytes <= budget);
	assert_true(q.slab_nz < plain.slab_nz);
	rc_ooc_plan plain_q;
	s.algo.tv_weight = 0;
	assert_int_equal(rc_ooc_plan_iter(&s, g, q.predicted_bytes, &plain_q, &err), 0);
	assert_true(plain_q.slab_nz > q.slab_nz); /* TV's halo slabs cost at q's size */
	s.algo.tv_weight = 0.1;
	/* extend auto plans (the data decide at the run), on where it extends does not */
	s.algo.extend = RC_EXTEND_AUTO;
	assert_int_equal(rc_ooc_plan_iter(&s, g, budget, &q, &err), 0);
	s.algo.extend = RC_EXTEND_ON;
	assert_int_equal(rc_ooc_plan_iter(&s, g, budget, &q, &err), RC_EUNSUPPORTED);
	assert_non_null(strstr(err.msg, "algorithm.extend"));
	s.algo.extend = RC_EXTEND_OFF;
	s.algo.tv_weight = 0;
	/* SART plans in blocks of its default subsets' views (36 views: 3 blocks of 12) */
	s.algo.name = RC_ALGO_SART;
	s.algo.subsets = 0;
	budget += (uint64_t)1 << 20; /* two blocks of 12 views: 0.7 MiB */
	if (rc_ooc_plan_iter(&s, g, budget, &p, &err))
		fail_msg("sart's plan: %s", err.msg);
	print_message("sart under %llu: %d slabs of %d, %d blocks, %llu bytes\n", (unsigned long long)budget, p.slabs,
		      p.slab_nz, p.chunks, (unsigned long long)p.predicted_bytes);
	assert_true(p.slabs > 1);
	assert_int_equal(p.chunks, 3);
	assert_true(p.predicted_bytes <= budget);
	/* one block (all 36 views) with one slice does not fit: refused naming the subsets */
	s.algo.subsets = 1;
	assert_int_equal(rc_ooc_plan_iter(&s, g, RC_MEM_BASE + ((uint64_t)1 << 19), &p, &err), RC_EUNSUPPORTED);
	assert_non_null(strstr(err.msg, "algorithm.subsets"));
	rc_geom_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cone_zero),
		cmocka_unit_test(test_cone_fdk),
		cmocka_unit_test(test_footprint_matrices),
		cmocka_unit_test(test_sirt),
		cmocka_unit_test(test_stop_rules),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_mlem),
		cmocka_unit_test(test_sart),
		cmocka_unit_test(test_osem),
		cmocka_unit_test(test_sart_io),
		cmocka_unit_test(test_extend),
		cmocka_unit_test(test_extend_on_fallback),
		cmocka_unit_test(test_tv_io),
		cmocka_unit_test(test_stats_after_start),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_cancel_sart),
		cmocka_unit_test(test_plan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
