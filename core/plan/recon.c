/*
 * recon: a job from spec to volume (recon.h): the checks of a spec against
 * what this build runs, then rc_backend_open (open.h: the one place that
 * turns execution.engine into a backend) and the one algorithm code
 * (rc_algo_run_on) on it, then the report (and the models' refit) of what
 * ran.  Fan and parallel geometries run on the tensor backend for auto,
 * cpu (its CPU path, fp32 CSR unless precision is mixed) and tensor, and
 * on the OpenCL and CUDA engines' 2-D projections for opencl, cuda and
 * trigeneous; fdk on them runs on the CPU engine's 2-D back projection
 * (auto, cpu) or as one product with FBP's matrix (tensor).
 */
#include "plan/recon.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/names.h"
#include "backend/cuda/engine_cuda.h"
#include "plan/extend.h"
#include "plan/open.h"
#include "plan/residual.h"
#include "util/rc_clock.h"

void rc_recon_spec_default(rc_recon_spec *s)
{
	memset(s, 0, sizeof *s);
	rc_algo_params_default(&s->algo, RC_ALGO_SART);
	s->engine = RC_ENGINE_AUTO;
	snprintf(s->precision, sizeof s->precision, "auto");
}

/* Whether engine e runs algorithm a on a geometry of type g, from the spec
 * and the build alone: on fan and parallel the iterative algorithms run on
 * the tensor backend (execution.engine auto, cpu or tensor) or on the
 * OpenCL or CUDA engine's Joseph pair through the host backend, and fdk
 * (FBP) on the CPU, OpenCL or CUDA engine's 2-D back projection (auto,
 * cpu, opencl, cuda) or as one product with FBP's matrix on the tensor
 * backend (tensor), and trigeneous splits the views over the CPU, OpenCL
 * and CUDA engines' 2-D projections; the tensor engine runs fan and
 * parallel only; cuda needs a build with CUDA (whether a node has a GPU the
 * daemon checks at creation: server/http_jobs.c, engine_offered).  Every
 * message of rc_recon_check lists the choices this accepts. */
static int engine_runs(rc_engine_choice e, rc_algo_name a, rc_geom_type g)
{
	int is2d = g == RC_GEOM_FAN || g == RC_GEOM_PARALLEL;
	(void)a; /* each geometry's engines run every algorithm */
	if (e == RC_ENGINE_CUDA && !rc_engine_cuda_built())
		return 0;
	/* a helix runs on the CPU engine (its helical FDK slabs the volume on
	 * it; the device engines' kernels are not checked on a helix) */
	if (g == RC_GEOM_HELIX)
		return e == RC_ENGINE_AUTO || e == RC_ENGINE_CPU;
	return is2d || e != RC_ENGINE_TENSOR;
}

struct combo {
	int engine, algo, geom; /* -1: any */
};

static int combo_runs(const struct combo *c)
{
	for (int e = 0; e < rc_names_count(RC_NAMES_ENGINE); e++) {
		int ev, av, gv;
		rc_names_at(RC_NAMES_ENGINE, e, &ev, NULL);
		if (c->engine >= 0 && ev != c->engine)
			continue;
		for (int a = 0; a < rc_names_count(RC_NAMES_ALGORITHM); a++) {
			rc_names_at(RC_NAMES_ALGORITHM, a, &av, NULL);
			if (c->algo >= 0 && av != c->algo)
				continue;
			for (int g = 0; g < rc_names_count(RC_NAMES_GEOMETRY); g++) {
				rc_names_at(RC_NAMES_GEOMETRY, g, &gv, NULL);
				if ((c->geom < 0 || gv == c->geom) &&
				    engine_runs((rc_engine_choice)ev, (rc_algo_name)av, (rc_geom_type)gv))
					return 1;
			}
		}
	}
	return 0;
}

static int keep_engine(int v, void *ud)
{
	struct combo c = *(const struct combo *)ud;
	c.engine = v;
	return combo_runs(&c);
}

static int keep_algo(int v, void *ud)
{
	struct combo c = *(const struct combo *)ud;
	c.algo = v;
	return combo_runs(&c);
}

static int keep_geom(int v, void *ud)
{
	struct combo c = *(const struct combo *)ud;
	c.geom = v;
	return combo_runs(&c);
}

int rc_recon_streams(const rc_recon_spec *s, rc_err *err)
{
	if (s->algo.name != RC_ALGO_FDK)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.stream",
			       "execution.stream is for fdk: an iterative algorithm needs every view before its first "
			       "iteration (it shows its iterates as previews instead)");
	/* a helix streams on the CPU engine (engine_runs keeps it there): its
	 * FDK reconstructs slab by slab as the views of each slab arrive */
	if (s->geom.type != RC_GEOM_CONE && s->geom.type != RC_GEOM_MATRICES && s->geom.type != RC_GEOM_HELIX)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.stream",
			       "execution.stream runs on cone, helix and matrices geometries; a %s job is reconstructed "
			       "from the whole stack (the tensor engine's 2-D path)",
			       rc_name_str(RC_NAMES_GEOMETRY, (int)s->geom.type));
	if (s->engine == RC_ENGINE_TENSOR)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.stream",
			       "execution.stream does not run on execution.engine \"tensor\" (it solves from the "
			       "whole stack); use auto, cpu, opencl, cuda or trigeneous");
	return 0;
}

int rc_recon_check(const rc_recon_spec *s, rc_err *err)
{
	rc_engine_choice eng = s->engine;
	const char *engine = rc_name_str(RC_NAMES_ENGINE, (int)eng);
	if (!engine)
		return rc_fail(err, RC_EINVAL, "execution.engine", "execution.engine %d is not an engine", (int)eng);
	int rc = rc_algo_iterations_check(s->algo.name, s->algo.iterations, err);
	if (rc)
		return rc;
	const char *algo = rc_algo_name_str(s->algo.name);
	const char *geom = rc_name_str(RC_NAMES_GEOMETRY, (int)s->geom.type);
	char l1[128], l2[128];
	if (!geom)
		return rc_fail(err, RC_EINVAL, "geometry.type", "geometry.type %d is not a geometry type", (int)s->geom.type);
	/* the CUDA engine's 2-D kernels launch one grid layer per slice
	 * (plane.cu): gridDim.z is at most 65535, volume.nz at most 65536 */
	if (eng == RC_ENGINE_CUDA && (s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL) &&
	    s->vol.nz > 65535)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
			       "execution.engine \"cuda\" runs fan and parallel stacks of at most 65535 slices (got %d); "
			       "use execution.engine auto, cpu or tensor",
			       s->vol.nz);
	struct combo on_geom = { -1, -1, (int)s->geom.type }, for_algo = { -1, (int)s->algo.name, -1 };
	if (!keep_algo((int)s->algo.name, &on_geom))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.name",
			       "algorithm.name \"%s\" does not run on a %s geometry: %s runs %s; %s runs on %s", algo,
			       geom, geom, rc_names_join_if(RC_NAMES_ALGORITHM, keep_algo, &on_geom, l1, sizeof l1),
			       algo, rc_names_join_if(RC_NAMES_GEOMETRY, keep_geom, &for_algo, l2, sizeof l2));
	if (!engine_runs(eng, s->algo.name, s->geom.type)) {
		struct combo c = { -1, (int)s->algo.name, (int)s->geom.type };
		return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
			       "execution.engine \"%s\" does not run %s on a %s geometry: use execution.engine %s", engine,
			       algo, geom, rc_names_join_if(RC_NAMES_ENGINE, keep_engine, &c, l1, sizeof l1));
	}
	/* a cone with a curved (cylindrical) detector runs on the CPU engine
	 * only: its ray-casting and footprint pairs and the voxel back
	 * projection (proj_cyl.c, proj_footprint.c); the OpenCL, CUDA and
	 * tensor kernels map points through a flat P */
	if (rc_geom_type_is_cone(s->geom.type) && s->geom.det.shape == RC_DETECTOR_CURVED) {
		if (eng != RC_ENGINE_AUTO && eng != RC_ENGINE_CPU)
			return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
				       "execution.engine \"%s\" does not run a cone geometry with a curved detector "
				       "(geometry.detector.shape \"curved\"): use execution.engine auto or cpu", engine);
		if (s->algo.projector == RC_PROJECTOR_SPLAT)
			return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
				       "algorithm.projector \"splat\" needs a flat detector; a cone with a curved "
				       "detector projects by footprints or ray casting: use \"footprint\", \"raycast\" "
				       "or \"auto\"");
	}
	/* the projector pair: fan/parallel have their own (distance-driven on
	 * the tensor backend, Joseph's on the OpenCL and CUDA engines); the
	 * splat pair runs on the CPU, OpenCL and CUDA engines (its geometry
	 * condition is checked where the geometry is built: the spec parser,
	 * rc_geom) */
	const char *proj = rc_name_str(RC_NAMES_PROJECTOR, (int)s->algo.projector);
	if (s->algo.projector != RC_PROJECTOR_AUTO && (s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "algorithm.projector \"%s\" is for cone and matrices geometries; a %s job projects "
			       "with its own pair (the tensor engine's distance-driven one, the OpenCL and CUDA "
			       "engines' Joseph one): use \"auto\"",
			       proj ? proj : "?", geom);
	/* splat runs on one engine: the tensor engine and a trigeneous split
	 * have no splat pair */
	if (s->algo.projector == RC_PROJECTOR_SPLAT && eng != RC_ENGINE_AUTO && eng != RC_ENGINE_CPU &&
	    eng != RC_ENGINE_OPENCL && eng != RC_ENGINE_CUDA)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "algorithm.projector \"splat\" runs on one engine, cpu, opencl or cuda: use one of "
			       "those or auto, or algorithm.projector \"raycast\" or \"auto\" on %s",
			       engine);
	/* the footprint pair is the CPU engine's alone too (proj_footprint.c) */
	if (s->algo.projector == RC_PROJECTOR_FOOTPRINT && eng != RC_ENGINE_AUTO && eng != RC_ENGINE_CPU)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "algorithm.projector \"footprint\" runs on the CPU engine only: use execution.engine "
			       "auto or cpu, or algorithm.projector \"raycast\" or \"auto\" on %s",
			       engine);
	return 0;
}

/* The progress hook of a run, counting its iterations for the report;
 * the caller's hooks pass through. */
struct counted {
	const rc_algo_hooks *user;
	int done;
	/* an extended run (extend.h): its volume, the asked one, where the
	 * asked slices start in it; iterate hands the asked slices over in
	 * vol (x NULL) */
	float *run_vol, *vol;
	size_t slice, asked;
	int z0;
	double copy_s, copied_at; /* the last download of the iterate: its time, when */
};

/* The asked slices of an extended run's volume into the caller's. */
static void crop(const struct counted *c)
{
	if (c->run_vol != c->vol)
		memcpy(c->vol, c->run_vol + (size_t)c->z0 * c->slice, c->asked * sizeof(float));
}

static void c_progress(void *ud, const rc_progress *p)
{
	struct counted *c = ud;
	c->done = p->iteration;
	if (c->user && c->user->progress)
		c->user->progress(c->user->ud, p);
}

static int c_iterate(void *ud, rc_backend *b, const rc_vec *x, int iteration)
{
	struct counted *c = ud;
	if (c->run_vol == c->vol)
		return c->user->iterate(c->user->ud, b, x, iteration);
	/* a device backend's download of the whole extended volume is not
	 * free: at most every 20 downloads' time (5 % of the run); the hook
	 * sees the slices of the last one (the result is cropped after) */
	double now = rc_now_s();
	if (c->copied_at > 0 && now - c->copied_at < 20.0 * c->copy_s)
		return c->user->iterate(c->user->ud, b, NULL, iteration);
	rc_err e;
	if (rc_bk_download(b, x, c->run_vol, &e))
		return 0; /* a preview missed is not the run failed */
	crop(c);
	c->copied_at = rc_now_s();
	c->copy_s = c->copied_at - now;
	return c->user->iterate(c->user->ud, b, NULL, iteration);
}

static void c_phase(void *ud, const char *phase)
{
	struct counted *c = ud;
	c->user->phase(c->user->ud, phase);
}

static int c_views(void *ud, double wait_s, int *list, int max, rc_err *err)
{
	struct counted *c = ud;
	return c->user->views(c->user->ud, wait_s, list, max, err);
}

static int c_checkpoint(void *ud, rc_backend *b, const rc_algo_state *st, rc_err *err)
{
	struct counted *c = ud;
	return c->user->checkpoint(c->user->ud, b, st, err);
}

/* algorithm.initial "fdk" of an iterative job whose backend cannot run
 * FDK (!RC_BK_FDK: the tensor backend): FDK's volume of proj into vol on
 * the CPU engine's host backend, the job's cancel honoured. */
static int cpu_fdk_start(const rc_recon_spec *s, const rc_algo_params *given, const rc_geom *g, const float *proj,
			 float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	rc_recon_spec f = *s;
	rc_algo_params_default(&f.algo, RC_ALGO_FDK);
	rc_backend *b = NULL;
	rc_initial start;
	int rc = rc_backend_open(RC_ENGINE_CPU, NULL, 0, &f, g, &b, err);
	if (!rc)
		rc = rc_algo_start(given, b, proj, vol, hooks, &start, err);
	rc_backend_free(b);
	return rc;
}

int rc_recon_run(const rc_recon_spec *s, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_recon_report *report, rc_err *err)
{
	rc_geom *g = NULL, *ga = NULL;
	rc_backend *b = NULL;
	float *run_vol = vol;
	rc_recon_report local;
	if (!report)
		report = &local;
	memset(report, 0, sizeof *report);
	report->relative_residual = NAN;
	report->mass_beyond = -1;
	double t0 = rc_now_s();

	int rc = rc_recon_check(s, err);
	if (rc)
		return rc;
	if ((rc = rc_geom_new(&s->geom, &s->vol, &s->limits, &ga, err)))
		goto out;
	/* the long object (extend.h): an iterative run on the asked volume
	 * extended by the slabs its rays cross, the asked slices kept; the
	 * extended geometry is built without the job's byte limit, which the
	 * asked one passed (the memory prediction counts the extension) */
	rc_recon_spec sr = *s;
	rc_extent ext;
	if (s->extent && s->extent->run.nx == s->vol.nx && s->extent->run.ny == s->vol.ny &&
	    s->extent->run.nz >= s->vol.nz)
		ext = *s->extent;
	else
		rc_extent_decide(s, ga, proj, &ext);
	report->run_nz = ext.run.nz;
	report->run_z0 = ext.z0;
	report->mass_beyond = ext.mass_beyond;
	/* a geometry whose extended volume cannot be built (a source inside
	 * it) runs the asked one */
	if (ext.run.nz != s->vol.nz && rc_geom_new(&s->geom, &ext.run, NULL, &g, NULL) == 0) {
		sr.vol = ext.run;
		if (!(run_vol = malloc(rc_volume_count(&ext.run) * sizeof(float)))) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the extended volume (%d slices)", ext.run.nz);
			goto out;
		}
	} else {
		ext.run = s->vol;
		ext.z0 = 0;
		report->run_nz = s->vol.nz;
		report->run_z0 = 0;
		g = ga;
		ga = NULL;
	}
	if ((rc = rc_backend_open(sr.engine, NULL, 0, &sr, g, &b, err)))
		goto out;
	rc_algo_params given = sr.algo;
	if (given.name != RC_ALGO_FDK && !(b->caps & RC_BK_FDK)) {
		/* the start is the CPU engine's, then given; auto where FDK suits g */
		if (given.initial == RC_INITIAL_AUTO)
			given.initial = rc_fdk_suits(g, given.scan, NULL) ? RC_INITIAL_ZERO : RC_INITIAL_FDK;
		/* a resumed run starts from its checkpoint instead */
		if (given.initial == RC_INITIAL_FDK && !(hooks && hooks->resume)) {
			if ((rc = cpu_fdk_start(&sr, &given, g, proj, run_vol, hooks, err)))
				goto out;
			given.initial = RC_INITIAL_GIVEN;
		}
	}
	/* the default TV weight follows the data's noise: decided once here,
	 * so the job reports the weight that ran */
	given.tv_weight = rc_tv_weight(&given, proj, rc_geom_proj_count(g), rc_geom_detector(g)->nu);
	given.tv_auto = 0;
	report->tv_weight = given.tv_weight;
	size_t slice = (size_t)s->vol.nx * (size_t)s->vol.ny;
	struct counted cnt = { .user = hooks, .run_vol = run_vol, .vol = vol, .slice = slice,
			       .asked = rc_volume_count(&s->vol), .z0 = ext.z0 };
	rc_algo_hooks wrapped = { .progress = c_progress, .ud = &cnt, .cancel = hooks ? hooks->cancel : NULL,
				  .iterate = hooks && hooks->iterate ? c_iterate : NULL,
				  .views = hooks && hooks->views ? c_views : NULL,
				  .phase = hooks && hooks->phase ? c_phase : NULL,
				  .checkpoint = hooks && hooks->checkpoint ? c_checkpoint : NULL,
				  .resume = hooks ? hooks->resume : NULL };
	rc_backend *run = b;
	if (s->wrap && (rc = s->wrap(s->wrap_ud, b, &run, err)))
		goto out;
	rc = rc_algo_run_on(&given, run, proj, run_vol, &wrapped, err);
	if (run != b)
		rc_backend_free(run);
	/* vol holds the last iterate also after a cancel (algo.h) */
	if (!rc || rc == RC_ECANCELLED)
		crop(&cnt);
	rc_backend_report(b, rc == 0, report);
	report->iterations_done = cnt.done;
	/* the result against its data, one forward projection (a failure
	 * here leaves it unknown, not the job failed); an extended run's
	 * whole volume, the one that explains the data */
	if (!rc && s->residual && !(hooks && hooks->cancel && atomic_load(hooks->cancel))) {
		rc_err rerr;
		if (rc_recon_residual(&sr, b, g, proj, run_vol, &report->relative_residual, &rerr))
			report->relative_residual = NAN;
	}
out:
	report->seconds = rc_now_s() - t0;
	rc_backend_free(b);
	if (run_vol != vol)
		free(run_vol);
	rc_geom_free(g);
	rc_geom_free(ga);
	return rc;
}
