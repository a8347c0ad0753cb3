/*
 * test_opencl_plane: fan and parallel stacks on the OpenCL engine
 * (kernels/opencl/bp_plane.cl) on the first OpenCL device (PoCL here),
 * small sizes because PoCL compiles every kernel of the program.
 *
 *  - RC_BP_VOXEL, FBP's back projection: the OpenCL engine against the CPU
 *    engine's rc_bp_plane (proj_plane.c) and a double precision loop of its
 *    definition, on all views and on a view range that is not a multiple
 *    of the launch chunk (the rectangle copies of a [slice][view][u] stack);
 *  - an FBP job through rc_recon_run on execution.engine "opencl" against
 *    the same job on "cpu" and against the phantom;
 *  - the matched pair (RC_FP_RAYCAST and RC_BP_MATCHED on 2-D: Joseph's
 *    forward projection and its transpose): the C reference
 *    (proj_joseph.c, through the CPU engine) against a double precision
 *    Joseph written here from A, the OpenCL engine against the C, the
 *    forward projection of a voxelised disk phantom against its analytic
 *    line integrals, and the adjoint test <A x, y> = <x, A^T y>;
 *  - SART, SIRT, CGLS and MLEM jobs on "opencl" (resident: the OpenCL
 *    backend over the engine's buffers): error against the phantom under a bound that one
 *    iteration misses; the tensor backend's error ("cpu") is printed
 *    beside it.
 * Each on a flat fan, parallel and a curved (equiangular) fan; and a
 * curved fan's jobs on flat data read as curved are clearly worse.
 * Skips (77) without OpenCL.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/algo.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/opencl/engine_opencl.h"
#include "geometry/geometry.h"
#include "geometry/metrics.h"
#include "geometry/phantom.h"
#include "ocl_testutil.h"
#include "plan/recon.h"
#include "util/rc_clock.h"

#define NX 32
#define NZ 3
#define NU 64
#define NVIEWS 90
#define TEST_CACHE "/tmp/recond-test-ocl-cache"

/* the geometry cases: a flat fan, parallel and a curved (equiangular) fan */
#define NCASES 3
#define CURVED 2
static const rc_geom_type types[NCASES] = { RC_GEOM_FAN, RC_GEOM_PARALLEL, RC_GEOM_FAN };
static const char *const type_name[NCASES] = { "fan", "parallel", "curved" };

static double angles[NVIEWS];

static rc_geom_spec spec_of(int c)
{
	for (int k = 0; k < NVIEWS; k++)
		angles[k] = 360.0 * k / NVIEWS + 1.5;
	/* fan: magnification 1.5, the detector covers 42 mm at the axis */
	rc_geom_spec s = { .type = types[c], .nviews = NVIEWS, .det = { NU, 1, 1.0, 1.0, 0.35, 0 },
			   .source_isocenter_mm = 200, .source_detector_mm = 300, .angles_deg = angles };
	if (c == CURVED) {
		/* a wide fan (+-37 degrees, the volume within +-34), where an
		 * arc and a flat detector differ by most of a pixel at the
		 * disks' edges (S (tan g - g) = 0.9 mm at 19 degrees): the
		 * source 40 mm from the axis, the arc 70 mm from it */
		s.det = (rc_detector_desc){ NU, 1, 1.4, 1.0, 0.35, 0, RC_DETECTOR_CURVED };
		s.source_isocenter_mm = 40;
		s.source_detector_mm = 70;
	}
	return s;
}

static const rc_volume_desc vol_desc = { NX, NX + 2, NZ, 1.0, 0.9, 1.0, 0.4, -0.3, 0 };

static rc_geom *geom_of(int c)
{
	rc_geom_spec s = spec_of(c);
	rc_geom *g = NULL;
	rc_err err;
	if (rc_geom_new(&s, &vol_desc, NULL, &g, &err))
		fail_msg("geometry: %s", err.msg);
	return g;
}

static rc_engine *ocl_new(const rc_geom *g)
{
	rc_opencl_options o;
	rc_opencl_options_default(&o);
	o.cache_dir = TEST_CACHE;
	rc_engine *e = NULL;
	rc_err err;
	double t0 = rc_now_s();
	if (rc_engine_opencl_new(g, &o, &e, &err))
		fail_msg("rc_engine_opencl_new: %s", err.msg);
	print_message("OpenCL engine (%s) open: %.2f s\n", rc_engine_opencl_variant(e), rc_now_s() - t0);
	return e;
}

static uint64_t rng = 987654321;
static double urand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static double rel_diff_d(const float *a, const double *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += (a[i] - b[i]) * (a[i] - b[i]);
		den += b[i] * b[i];
	}
	return sqrt(num / den);
}

/* RC_BP_VOXEL of a 2-D stack in double, from its definition (engine.h,
 * proj_plane.c): sum over views of the linear, zero-outside detector value
 * at u over w^2 (w = 1 for parallel); a curved fan's u on the arc
 * (rc_geom_plane_u) over L^2, cos^2(gamma(u)) / w^2. */
static void ref_bp_plane(const rc_geom *g, const float *proj, double *vol, int first, int last)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nu = rc_geom_detector(g)->nu, fan = rc_geom_type_of(g) == RC_GEOM_FAN;
	const int curved = fan && rc_geom_detector(g)->shape == RC_DETECTOR_CURVED;
	for (int z = 0; z < v->nz; z++)
		for (int y = 0; y < v->ny; y++)
			for (int x = 0; x < v->nx; x++) {
				double X[3], acc = 0;
				rc_volume_voxel_pos(v, x, y, z, X);
				for (int k = first; k < last; k++) {
					double w, u = rc_geom_plane_u(g, k, X[0], X[1], &w);
					double wt = fan ? 1.0 / (w * w) : 1.0;
					if (curved) {
						double cg = cos(rc_geom_fan_angle(g, u));
						wt *= cg * cg;
					}
					const float *row = proj + rc_geom_row_offset(g, k, z);
					double fl = floor(u), f = u - fl;
					int i = (int)fl;
					double a = i >= 0 && i < nu ? row[i] : 0, b = i + 1 >= 0 && i + 1 < nu ? row[i + 1] : 0;
					acc += (a + f * (b - a)) * wt;
				}
				vol[((size_t)z * v->ny + y) * v->nx + x] = acc;
			}
}

static void test_bp_voxel(void **state)
{
	(void)state;
	for (int t = 0; t < NCASES; t++) {
		rc_geom *g = geom_of(t);
		size_t np = rc_geom_proj_count(g), nv = rc_volume_count(rc_geom_volume(g));
		float *proj = malloc(np * sizeof(float)), *vo = malloc(nv * sizeof(float)), *vc = malloc(nv * sizeof(float));
		double *ref = malloc(nv * sizeof(double));
		for (size_t i = 0; i < np; i++)
			proj[i] = (float)urand();
		rc_engine *ocl = ocl_new(g), *cpu = NULL;
		rc_err err;
		assert_int_equal(rc_engine_cpu_new(g, 0, &cpu, &err), 0);
		/* all views (three launches of 32), then 7..50 (two, the second short) */
		static const int ranges[2][2] = { { 0, NVIEWS }, { 7, 50 } };
		for (int r = 0; r < 2; r++) {
			int f = ranges[r][0], l = ranges[r][1];
			double t0 = rc_now_s();
			assert_int_equal(rc_engine_back(ocl, RC_BP_VOXEL, proj, vo, f, l, &err), 0);
			double ms = 1e3 * (rc_now_s() - t0);
			assert_int_equal(rc_engine_back(cpu, RC_BP_VOXEL, proj, vc, f, l, &err), 0);
			ref_bp_plane(g, proj, ref, f, l);
			double d_ocl = rel_diff_d(vo, ref, nv), d_cpu = rel_diff_d(vc, ref, nv);
			double d_oc = rc_metric_rel_error(vo, vc, NULL, nv);
			print_message("%-8s views %2d..%2d: OpenCL vs double %.2e, CPU vs double %.2e, OpenCL vs CPU %.2e "
				      "(%.1f ms)\n",
				      type_name[t], f, l, d_ocl, d_cpu, d_oc, ms);
			assert_true(d_ocl <= 1e-5 && d_cpu <= 1e-5 && d_oc <= 1e-5);
		}
		/* rotation and splatting are not 2-D projectors */
		assert_int_equal(rc_engine_forward(ocl, RC_FP_ROTATE, vo, proj, 0, NVIEWS, &err), RC_EUNSUPPORTED);
		assert_int_equal(rc_engine_forward(cpu, RC_FP_SPLAT, vo, proj, 0, NVIEWS, &err), RC_EUNSUPPORTED);
		rc_engine_free(ocl);
		rc_engine_free(cpu);
		rc_geom_free(g);
		free(proj);
		free(vo);
		free(vc);
		free(ref);
	}
}

/* ---- the matched pair ------------------------------------------------------ */

/* Joseph's forward projection in double from the view's A (proj_joseph.c's
 * definition): pixel iu's ray a i + b j + c = 0 in voxel indices (the line
 * of A's coordinate rc_geom_line_u(iu): iu when flat, the tangent
 * detector's point of the arc's ray when curved), sampled
 * per column where |b| >= |a| (else per row), linear across, zero outside,
 * ds mm per sample. */
static void ref_fp_plane(const rc_geom *g, const float *vol, double *proj)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nu = rc_geom_detector(g)->nu, nk = rc_geom_nviews(g);
	double X[3];
	rc_volume_voxel_pos(v, 0, 0, 0, X);
	for (int z = 0; z < v->nz; z++)
		for (int k = 0; k < nk; k++) {
			const double *A = rc_geom_view(g, k)->A;
			for (int iu = 0; iu < nu; iu++) {
				double f = rc_geom_line_u(g, iu);
				double ax = A[0] - f * A[3], ay = A[1] - f * A[4], a0 = A[2] - f * A[5];
				double a = ax * v->vx, b = ay * v->vy, c = ax * X[0] + ay * X[1] + a0;
				int percol = fabs(b) >= fabs(a);
				int ns = percol ? v->nx : v->ny, m = percol ? v->ny : v->nx;
				double r = percol ? a / b : b / a;
				double ds = percol ? hypot(v->vx, v->vy * r) : hypot(v->vy, v->vx * r);
				double sum = 0;
				for (int sidx = 0; sidx < ns; sidx++) {
					double t = percol ? -(a * sidx + c) / b : -(b * sidx + c) / a;
					int c0 = (int)floor(t);
					for (int cc = c0; cc <= c0 + 1; cc++) {
						if (cc < 0 || cc >= m || fabs(t - cc) >= 1)
							continue;
						int ix = percol ? sidx : cc, iy = percol ? cc : sidx;
						sum += (1 - fabs(t - cc)) * vol[((size_t)z * v->ny + iy) * v->nx + ix];
					}
				}
				proj[((size_t)z * nk + k) * nu + iu] = sum * ds;
			}
		}
}

static double dot_f(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

static void test_matched_pair(void **state)
{
	(void)state;
	rc_phantom *ph = NULL;
	for (int t = 0; t < NCASES; t++) {
		rc_geom *g = geom_of(t);
		size_t np = rc_geom_proj_count(g), nv = rc_volume_count(rc_geom_volume(g));
		float *x = malloc(nv * sizeof(float)), *y = malloc(np * sizeof(float));
		float *pc = malloc(np * sizeof(float)), *po = malloc(np * sizeof(float)), *pa = malloc(np * sizeof(float));
		float *bc = malloc(nv * sizeof(float)), *bo = malloc(nv * sizeof(float));
		double *pref = malloc(np * sizeof(double));
		rc_engine *ocl = ocl_new(g), *cpu = NULL;
		rc_err err;
		assert_int_equal(rc_engine_cpu_new(g, 0, &cpu, &err), 0);

		/* the disk phantom, voxelised, against its analytic line integrals */
		if (!ph) {
			rc_ellipsoid e[2] = { { { 0.5, -0.5, 0 }, { 13, 13, 1000 }, 0, 0.02 },
					      { { 4, 3, 0 }, { 4, 4, 1000 }, 0, 0.01 } };
			assert_int_equal(rc_phantom_new(e, 2, &ph, &err), 0);
		}
		assert_int_equal(rc_phantom_voxelize(ph, rc_geom_volume(g), 4, 0, x, &err), 0);
		assert_int_equal(rc_phantom_project(ph, g, 0, pa, &err), 0);
		double t0 = rc_now_s();
		assert_int_equal(rc_engine_forward(ocl, RC_FP_RAYCAST, x, po, 0, NVIEWS, &err), 0);
		double ms_fp = 1e3 * (rc_now_s() - t0);
		assert_int_equal(rc_engine_forward(cpu, RC_FP_RAYCAST, x, pc, 0, NVIEWS, &err), 0);
		ref_fp_plane(g, x, pref);
		double e_an = rc_metric_rel_error(po, pa, NULL, np);
		double d_cref = rel_diff_d(pc, pref, np), d_oc = rc_metric_rel_error(po, pc, NULL, np);
		print_message("%-8s forward: OpenCL vs analytic %.4f, C vs double %.2e, OpenCL vs C %.2e (%.1f ms)\n",
			      type_name[t], e_an, d_cref, d_oc, ms_fp);
		assert_true(e_an < 0.02);
		assert_true(d_cref <= 1e-5 && d_oc <= 1e-5);

		/* random x and y: the back projections agree, and each is the
		 * forward's transpose */
		for (size_t i = 0; i < nv; i++)
			x[i] = (float)urand();
		for (size_t i = 0; i < np; i++)
			y[i] = (float)urand();
		static const int ranges[2][2] = { { 0, NVIEWS }, { 7, 50 } };
		for (int r = 0; r < 2; r++) {
			int f = ranges[r][0], l = ranges[r][1];
			/* pc/po: A x on views f..l, zero elsewhere (so <A x, y> runs over them) */
			memset(pc, 0, np * sizeof(float));
			memset(po, 0, np * sizeof(float));
			assert_int_equal(rc_engine_forward(cpu, RC_FP_RAYCAST, x, pc, f, l, &err), 0);
			assert_int_equal(rc_engine_forward(ocl, RC_FP_RAYCAST, x, po, f, l, &err), 0);
			t0 = rc_now_s();
			assert_int_equal(rc_engine_back(ocl, RC_BP_MATCHED, y, bo, f, l, &err), 0);
			double ms_bp = 1e3 * (rc_now_s() - t0);
			assert_int_equal(rc_engine_back(cpu, RC_BP_MATCHED, y, bc, f, l, &err), 0);
			double lc = dot_f(pc, y, np), rcd = dot_f(x, bc, nv);
			double lo = dot_f(po, y, np), ro = dot_f(x, bo, nv);
			double gc = fabs(lc - rcd) / fabs(lc), go = fabs(lo - ro) / fabs(lo);
			double d_back = rc_metric_rel_error(bo, bc, NULL, nv), d_fwd = rc_metric_rel_error(po, pc, NULL, np);
			print_message("%-8s views %2d..%2d: adjoint gap C %.2e OpenCL %.2e; OpenCL vs C forward %.2e "
				      "back %.2e (back %.1f ms)\n",
				      type_name[t], f, l, gc, go, d_fwd, d_back, ms_bp);
			assert_true(gc <= 1e-5 && go <= 1e-5);
			assert_true(d_back <= 1e-5 && d_fwd <= 1e-5);
		}
		/* a forward projection of views 7..50 leaves the others as they were */
		for (size_t i = 0; i < np; i++)
			po[i] = -1.0f;
		assert_int_equal(rc_engine_forward(ocl, RC_FP_RAYCAST, x, po, 7, 50, &err), 0);
		for (int z = 0; z < NZ; z++)
			for (int k = 0; k < NVIEWS; k++)
				if (k < 7 || k >= 50)
					for (int i = 0; i < NU; i++)
						assert_true(po[rc_geom_row_offset(g, k, z) + i] == -1.0f);
		rc_engine_free(ocl);
		rc_engine_free(cpu);
		rc_geom_free(g);
		free(x);
		free(y);
		free(pc);
		free(po);
		free(pa);
		free(bc);
		free(bo);
		free(pref);
	}
	rc_phantom_free(ph);
}

/* ---- jobs through rc_recon_run -------------------------------------------- */

/* A disk of 13 mm radius (an ellipsoid long in z: every slice sees the same
 * disk) with a denser off-centre disk inside it. */
static rc_phantom *disk_phantom(void)
{
	rc_ellipsoid e[2] = { { { 0.5, -0.5, 0 }, { 13, 13, 1000 }, 0, 0.02 },
			      { { 4, 3, 0 }, { 4, 4, 1000 }, 0, 0.01 } };
	rc_phantom *p = NULL;
	rc_err err;
	assert_int_equal(rc_phantom_new(e, 2, &p, &err), 0);
	return p;
}

struct job_case {
	rc_recon_spec s;
	float *proj, *truth;
	uint8_t *mask;
	size_t np, nv;
};

/* A job of case c; data_case is the geometry its projections come from
 * (c itself, or the flat fan to read a flat detector's data as curved). */
static void job_open_data(struct job_case *j, int c, int data_case, rc_algo_name a)
{
	rc_recon_spec_default(&j->s);
	j->s.geom = spec_of(c);
	j->s.vol = vol_desc;
	rc_algo_params_plain(&j->s.algo, a);
	rc_geom *g = geom_of(data_case);
	j->np = rc_geom_proj_count(g);
	j->nv = rc_volume_count(&vol_desc);
	j->proj = malloc(j->np * sizeof(float));
	j->truth = malloc(j->nv * sizeof(float));
	j->mask = malloc(j->nv);
	rc_phantom *p = disk_phantom();
	assert_int_equal(rc_phantom_project(p, g, 0, j->proj, NULL), 0);
	assert_int_equal(rc_phantom_voxelize(p, &vol_desc, 3, 0, j->truth, NULL), 0);
	rc_mask_cylinder(&vol_desc, 14, 100, j->mask);
	rc_phantom_free(p);
	rc_geom_free(g);
}

static void job_open(struct job_case *j, int c, rc_algo_name a)
{
	job_open_data(j, c, c, a);
}

static void job_close(struct job_case *j)
{
	free(j->proj);
	free(j->truth);
	free(j->mask);
}

static float *job_run(struct job_case *j, const char *engine, rc_recon_report *rep)
{
	float *v = malloc(j->nv * sizeof(float));
	rc_err err;
	int ev = -1;
	assert_int_equal(rc_name_parse(RC_NAMES_ENGINE, engine, &ev), 0);
	j->s.engine = (rc_engine_choice)ev;
	assert_int_equal(rc_recon_check(&j->s, &err), 0);
	int rc = rc_recon_run(&j->s, j->proj, v, NULL, rep, &err);
	if (rc)
		fail_msg("%s job: %s", engine, err.msg);
	return v;
}

static void test_fbp_job(void **state)
{
	(void)state;
	for (int t = 0; t < NCASES; t++) {
		struct job_case j;
		rc_recon_report rep;
		job_open(&j, t, RC_ALGO_FDK);
		double t0 = rc_now_s();
		float *vo = job_run(&j, "opencl", &rep);
		double s_ocl = rc_now_s() - t0;
		assert_string_equal(rep.engine, "opencl");
		float *vc = job_run(&j, "cpu", &rep);
		assert_string_equal(rep.engine, "cpu");
		double d = rc_metric_rel_error(vo, vc, NULL, j.nv), e = rc_metric_rel_error(vo, j.truth, j.mask, j.nv);
		print_message("FBP %-8s opencl vs cpu %.2e, error against the phantom %.4f (opencl job %.2f s)\n",
			      type_name[t], d, e, s_ocl);
		assert_true(d <= 1e-5);
		assert_true(e < 0.15);
		free(vo);
		free(vc);
		job_close(&j);
	}
}

static void test_iterative_jobs(void **state)
{
	(void)state;
	static const struct {
		rc_algo_name a;
		const char *name;
		int iters;
		double bound;
	} algos[] = {
		/* bounds: about 1.2x what PoCL measured for fan and parallel
		 * (SART 0.119/0.121, SIRT 0.041/0.052, CGLS 0.057/0.063, MLEM
		 * 0.109/0.110; one iteration 0.32..0.37) */
		{ RC_ALGO_SART, "sart", 10, 0.15 },
		{ RC_ALGO_SIRT, "sirt", 40, 0.07 },
		{ RC_ALGO_CGLS, "cgls", 10, 0.08 },
		{ RC_ALGO_MLEM, "mlem", 40, 0.14 },
	};
	for (int t = 0; t < NCASES; t++)
		for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
			struct job_case j;
			rc_recon_report rep;
			job_open(&j, t, algos[i].a);
			j.s.algo.iterations = 1;
			float *v1 = job_run(&j, "opencl", &rep);
			j.s.algo.iterations = algos[i].iters;
			double t0 = rc_now_s();
			float *vo = job_run(&j, "opencl", &rep);
			double s_ocl = rc_now_s() - t0;
			assert_string_equal(rep.engine, "opencl");
			assert_string_equal(rep.projector, "joseph");
			float *vc = job_run(&j, "cpu", &rep);
			double e1 = rc_metric_rel_error(v1, j.truth, j.mask, j.nv);
			double eo = rc_metric_rel_error(vo, j.truth, j.mask, j.nv);
			double ec = rc_metric_rel_error(vc, j.truth, j.mask, j.nv);
			print_message("%-4s %-8s %2d iterations: error opencl %.4f (1 iteration %.4f), tensor %.4f; "
				      "opencl job %.2f s\n",
				      algos[i].name, type_name[t], algos[i].iters, eo, e1, ec, s_ocl);
			assert_true(eo < algos[i].bound);
			assert_true(e1 > algos[i].bound);
			free(v1);
			free(vo);
			free(vc);
			job_close(&j);
		}
}

/* A curved fan's jobs read their data on the arc: data taken on a flat
 * detector of the same pixels, distances, offset and angles (the disk
 * phantom projected on it) and read as curved reconstruct clearly worse
 * than the arc's own data, FBP and SIRT. */
static void test_curved_mismatch(void **state)
{
	(void)state;
	static const struct {
		rc_algo_name a;
		const char *name;
		int iters;
	} algos[] = { { RC_ALGO_FDK, "fbp", 1 }, { RC_ALGO_SIRT, "sirt", 40 } };
	for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
		struct job_case j;
		rc_recon_report rep;
		job_open(&j, CURVED, algos[i].a);
		j.s.algo.iterations = algos[i].iters;
		float *vm = job_run(&j, "opencl", &rep);
		assert_string_equal(rep.engine, "opencl");
		/* flat data: the curved case's spec with a flat detector */
		rc_geom_spec sf = spec_of(CURVED);
		sf.det.shape = RC_DETECTOR_FLAT;
		rc_geom *gf = NULL;
		assert_int_equal(rc_geom_new(&sf, &vol_desc, NULL, &gf, NULL), 0);
		float *pf = malloc(j.np * sizeof(float));
		rc_phantom *p = disk_phantom();
		assert_int_equal(rc_phantom_project(p, gf, 0, pf, NULL), 0);
		rc_phantom_free(p);
		rc_geom_free(gf);
		memcpy(j.proj, pf, j.np * sizeof(float));
		free(pf);
		float *vx = job_run(&j, "opencl", &rep);
		double em = rc_metric_rel_error(vm, j.truth, j.mask, j.nv);
		double ex = rc_metric_rel_error(vx, j.truth, j.mask, j.nv);
		print_message("curved %-4s on opencl: error %.4f on curved data, %.4f on flat data read as curved\n",
			      algos[i].name, em, ex);
		assert_true(ex > 2.0 * em);
		free(vm);
		free(vx);
		job_close(&j);
	}
}

int main(void)
{
	tu_need_opencl();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bp_voxel),
		cmocka_unit_test(test_fbp_job),
		cmocka_unit_test(test_matched_pair),
		cmocka_unit_test(test_iterative_jobs),
		cmocka_unit_test(test_curved_mismatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
