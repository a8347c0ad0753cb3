/*
 * recon: a job from spec to volume (recon.h).  It picks the backend
 * (backend.h) and runs the one algorithm code (rc_algo_run_on) on it.
 *
 * execution.engine picks the devices:
 *   cpu         the native CPU engine alone (the host backend)
 *   opencl      one OpenCL device alone (a GPU if there is one): the OpenCL
 *               backend, every buffer resident on the device; a run too big
 *               for it goes through the engine (host backend, per-call
 *               uploads)
 *   cuda        the first CUDA GPU: the CUDA backend (resident), else the
 *               CUDA engine through the host backend (z-slabs)
 *   trigeneous  every device (devices.h), each task split by the planner
 *               (plan.h) with the stored models, calibrating the devices
 *               that have none for this problem first: the host backend
 *               over an rc_exec of several engines is the split backend
 *   auto        the split when stored models predict it faster than any
 *               one device; otherwise the one device the models favour, and
 *               without models a CUDA GPU if present, else the CPU (the
 *               first device that opens if that fails).  auto never spends
 *               job time on calibration and opens only the chosen devices.
 *   tensor      tensor.h's rc_tensor_run (paper 001): the tensor backend
 *               over the distance-driven system matrix
 * Fan and parallel geometries run on the tensor backend for auto, cpu (its
 * CPU path, fp32 CSR unless precision is mixed) and tensor; rc_recon_check
 * refuses them on the other engines, and fdk on them.
 *
 * After a run with a model directory every device's measured time per call
 * is added to its model (devices.h), so plans follow the hardware.  If a
 * device fails mid-job, exec.c drops it and replan() splits the tasks again
 * over the devices left, with their models.
 */
#include "plan/recon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/devices.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/cuda/engine_cuda.h"
#include "plan/resident.h"
#include "backend/opencl/engine_opencl.h"
#include "algo/names.h"
#include "plan/plan.h"
#include "plan/tensor.h"
#include "util/rc_clock.h"

void rc_recon_spec_default(rc_recon_spec *s)
{
	memset(s, 0, sizeof *s);
	rc_algo_params_default(&s->algo, RC_ALGO_SART);
	s->engine = RC_ENGINE_AUTO;
	snprintf(s->precision, sizeof s->precision, "fp32");
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
	if (s->geom.type != RC_GEOM_CONE && s->geom.type != RC_GEOM_MATRICES)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.stream",
			       "execution.stream runs on cone and matrices geometries; a %s job is reconstructed "
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
	/* the projector pair: fan/parallel have their own (distance-driven on
	 * the tensor backend, Joseph's on the OpenCL and CUDA engines);
	 * the splat pair is the CPU engine's alone (its geometry condition is
	 * checked where the geometry is built: the spec parser, rc_geom) */
	const char *proj = rc_name_str(RC_NAMES_PROJECTOR, (int)s->algo.projector);
	if (s->algo.projector != RC_PROJECTOR_AUTO && (s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "algorithm.projector \"%s\" is for cone and matrices geometries; a %s job projects "
			       "with its own pair (the tensor engine's distance-driven one, the OpenCL and CUDA "
			       "engines' Joseph one): use \"auto\"",
			       proj ? proj : "?", geom);
	if (s->algo.projector == RC_PROJECTOR_SPLAT && eng != RC_ENGINE_AUTO && eng != RC_ENGINE_CPU)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "algorithm.projector \"splat\" runs on the CPU engine only: use execution.engine auto "
			       "or cpu, or algorithm.projector \"raycast\" or \"auto\" on %s",
			       engine);
	return 0;
}

/* The back projector the algorithm runs with ray casting forward (one engine
 * with the splat pair runs RC_FP_SPLAT and RC_BP_SPLAT in its place:
 * load_models, rc_bk_fp); SART on a fan or parallel stack runs the matched
 * one (algo_sart.c). */
static rc_bp_kind algo_bp(rc_algo_name n, const rc_geom *g)
{
	return n == RC_ALGO_FDK || (n == RC_ALGO_SART && !rc_geom_is_2d(g)) ? RC_BP_VOXEL : RC_BP_MATCHED;
}

/* A job's devices: engines, what they are, their models and the plan. */
struct job {
	const rc_recon_spec *s;
	const rc_geom *g;
	int n;
	rc_device dev[RC_EXEC_MAX_ENGINES];
	rc_engine *eng[RC_EXEC_MAX_ENGINES];
	rc_model model[RC_EXEC_MAX_ENGINES][RC_TASK_COUNT];
	double predicted_s[RC_EXEC_MAX_ENGINES][RC_TASK_COUNT]; /* < 0: none */
	char shape[64];
	char cache_dir[1024];
	rc_exec *x;
};

/* Whether the job's iterative algorithm projects with the splat pair: one
 * engine that offers it (rc_bk_fp) and a projector that does not rule it
 * out (rc_algo_fp). */
static int job_splat(const struct job *j)
{
	return j->n == 1 && j->eng[0]->splat && j->s->algo.name != RC_ALGO_FDK &&
	       j->s->algo.projector != RC_PROJECTOR_RAYCAST;
}

static void job_free(struct job *j)
{
	rc_exec_free(j->x);
	for (int i = 0; i < j->n; i++)
		rc_engine_free(j->eng[i]);
}

static int add_engine(struct job *j, const rc_device *d, rc_err *err)
{
	if (j->n >= RC_EXEC_MAX_ENGINES)
		return rc_fail(err, RC_EINTERNAL, "", "more than %d devices", RC_EXEC_MAX_ENGINES);
	rc_device_open_opts o = { .threads = j->s->threads, .cache_dir = j->cache_dir[0] ? j->cache_dir : NULL };
	rc_engine *e = NULL;
	int rc = rc_device_open(d, j->g, &o, &e, err);
	if (rc)
		return rc;
	j->dev[j->n] = *d;
	j->eng[j->n] = e;
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		j->model[j->n][t] = (rc_model){ .valid = 0 };
		j->predicted_s[j->n][t] = -1;
	}
	j->n++;
	return 0;
}

/* The planner's split of every task over the living engines. */
static int plan_tasks(struct job *j, rc_err *err)
{
	int W = rc_geom_nviews(j->g);
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		rc_model m[RC_EXEC_MAX_ENGINES];
		const char *groups[RC_EXEC_MAX_ENGINES];
		for (int i = 0; i < j->n; i++) {
			m[i] = j->model[i][t];
			if (j->x && !rc_exec_alive(j->x, i))
				m[i].valid = 0;
			groups[i] = j->dev[i].hw_group;
		}
		rc_plan p;
		int rc = rc_plan_split(m, groups, j->n, W, 0, &p, err);
		if (rc)
			return rc;
		for (int i = 0; i < j->n; i++)
			j->predicted_s[i][t] = p.views[i] > 0 ? p.predicted_s[i] : (m[i].valid ? 0 : -1);
		if (j->x && (rc = rc_exec_set_split(j->x, (rc_task)t, p.views, err)))
			return rc;
	}
	return 0;
}

static int replan(void *ud, rc_exec *x, int failed, rc_err *err)
{
	struct job *j = ud;
	(void)failed;
	(void)x;
	/* a living engine without a model still has to take views */
	int any = 0;
	for (int i = 0; i < j->n; i++)
		any |= rc_exec_alive(j->x, i) && j->model[i][0].valid && j->model[i][1].valid;
	if (!any)
		for (int i = 0; i < j->n; i++)
			if (rc_exec_alive(j->x, i))
				for (int t = 0; t < RC_TASK_COUNT; t++)
					j->model[i][t] = (rc_model){ .a = 1, .b = 0, .valid = 1 };
	return plan_tasks(j, err);
}

static int have_models(const struct job *j, int i)
{
	return j->model[i][RC_TASK_FORWARD].valid && j->model[i][RC_TASK_BACK].valid;
}

/* auto: which devices to open, from the stored models alone (opening an
 * OpenCL device builds or loads its program: not for a device left idle). */
static void auto_choose(const struct job *j, const rc_device *all, int nall, int *want)
{
	rc_model m[RC_TASK_COUNT][RC_DEVICES_MAX];
	const char *groups[RC_DEVICES_MAX];
	int modelled = 0;
	for (int i = 0; i < nall; i++) {
		rc_model mm[RC_TASK_COUNT];
		want[i] = 0;
		groups[i] = all[i].hw_group;
		if (rc_models_load(j->s->model_dir, all[i].device_id, j->shape, mm, NULL) ||
		    !mm[RC_TASK_FORWARD].valid || !mm[RC_TASK_BACK].valid)
			mm[0].valid = mm[1].valid = 0;
		for (int t = 0; t < RC_TASK_COUNT; t++)
			m[t][i] = mm[t];
		modelled += mm[0].valid;
	}
	if (modelled) {
		for (int t = 0; t < RC_TASK_COUNT; t++) {
			rc_plan p;
			if (rc_plan_split(m[t], groups, nall, rc_geom_nviews(j->g), 0, &p, NULL))
				continue;
			for (int i = 0; i < nall; i++)
				want[i] |= p.views[i] > 0;
		}
		return;
	}
	/* no models: a CUDA GPU if there is one, else the cpu engine */
	int pick = 0;
	for (int i = 0; i < nall; i++)
		if (all[i].kind == RC_DEVICE_CUDA) {
			pick = i;
			break;
		}
	want[pick] = 1;
}

/* Opens the engines execution.engine asks for (a 2-D geometry: the cpu
 * engine, or the OpenCL or CUDA engine when asked for). */
static int open_devices(struct job *j, rc_engine_choice mode, rc_err *err)
{
	rc_device all[RC_DEVICES_MAX];
	int nall = 0;
	if (mode == RC_ENGINE_CPU || (rc_geom_is_2d(j->g) && mode == RC_ENGINE_AUTO)) {
		/* not the whole list: loading the OpenCL platforms (PoCL and
		 * LLVM) took a quarter of a short CPU job's set-up */
		rc_devices_cpu(&all[0]);
		return add_engine(j, &all[0], err);
	}
	int rc = rc_devices_enumerate(all, RC_DEVICES_MAX, &nall, err);
	if (rc)
		return rc;
	if (mode == RC_ENGINE_OPENCL || mode == RC_ENGINE_CUDA) {
		rc_device_kind want = mode == RC_ENGINE_OPENCL ? RC_DEVICE_OPENCL : RC_DEVICE_CUDA;
		int pick = -1;
		for (int i = 0; i < nall; i++)
			if (all[i].kind == want && (pick < 0 || (strcmp(all[pick].type, "gpu") && !strcmp(all[i].type, "gpu"))))
				pick = i;
		if (pick < 0)
			return rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
				       "execution.engine \"%s\": this host has no %s device",
				       rc_name_str(RC_NAMES_ENGINE, mode), want == RC_DEVICE_OPENCL ? "OpenCL" : "CUDA");
		return add_engine(j, &all[pick], err);
	}
	/* trigeneous: everything that opens; auto: what the models chose, and
	 * if none of that opens, the first device that does */
	int want[RC_DEVICES_MAX];
	for (int i = 0; i < nall; i++)
		want[i] = 1;
	if (mode == RC_ENGINE_AUTO)
		auto_choose(j, all, nall, want);
	rc_err first;
	int first_rc = 0;
	for (int pass = 0; pass < 2 && j->n == 0; pass++)
		for (int i = 0; i < nall && j->n < RC_EXEC_MAX_ENGINES; i++) {
			rc_err e1;
			if (pass == 0 ? !want[i] : want[i])
				continue;
			int r = add_engine(j, &all[i], &e1);
			if (r && !first_rc) {
				first_rc = r;
				first = e1;
			}
			if (pass == 1 && j->n)
				break;
		}
	if (j->n == 0) {
		if (err)
			*err = first;
		return first_rc ? first_rc : rc_fail(err, RC_EDEVICE, "execution.engine", "no device could be opened");
	}
	return 0;
}

/* Loads models; trigeneous calibrates the engines without one. */
static int load_models(struct job *j, int calibrate, rc_err *err)
{
	const char *dir = j->s->model_dir;
	rc_bp_kind bp = algo_bp(j->s->algo.name, j->g);
	rc_fp_kind fp = RC_FP_RAYCAST;
	if (job_splat(j)) { /* the pair rc_algo_fp picks */
		fp = RC_FP_SPLAT;
		bp = bp == RC_BP_MATCHED ? RC_BP_SPLAT : bp;
	}
	float *vol = NULL, *proj = NULL;
	int rc = 0;
	for (int i = 0; i < j->n; i++) {
		if ((rc = rc_models_load(dir, j->dev[i].device_id, j->shape, j->model[i], err)))
			goto out;
		if (have_models(j, i) || !calibrate)
			continue;
		if (!vol) {
			vol = malloc(rc_volume_count(rc_geom_volume(j->g)) * sizeof *vol);
			proj = malloc(rc_geom_proj_count(j->g) * sizeof *proj);
			if (!vol || !proj) {
				rc = rc_fail(err, RC_ENOMEM, "", "out of memory for calibration buffers");
				goto out;
			}
		}
		if (j->dev[i].kind == RC_DEVICE_OPENCL && (rc = rc_engine_opencl_tune(j->eng[i], err)))
			goto out;
		/* a device that cannot be timed (noise, a failure) is not planned
		 * with; the job still runs on the others */
		if (rc_devices_calibrate(j->eng[i], fp, bp, dir, j->dev[i].device_id, j->shape, vol, proj,
					 j->model[i], NULL))
			for (int t = 0; t < RC_TASK_COUNT; t++)
				j->model[i][t] = (rc_model){ .valid = 0 };
	}
out:
	free(vol);
	free(proj);
	return rc;
}

static void fill_report(struct job *j, rc_recon_report *r)
{
	int nviews = rc_geom_nviews(j->g);
	int used = 0;
	r->ndevices = j->n;
	for (int i = 0; i < j->n && i < RC_RECON_MAX_DEVICES; i++) {
		rc_recon_device_report *d = &r->dev[i];
		snprintf(d->name, sizeof d->name, "%s", j->eng[i]->name);
		snprintf(d->device_id, sizeof d->device_id, "%s", j->dev[i].device_id);
		int any = 0;
		for (int t = 0; t < RC_TASK_COUNT; t++) {
			int v[RC_EXEC_MAX_ENGINES];
			rc_exec_get_split(j->x, (rc_task)t, v);
			d->views[t] = v[i];
			any |= v[i] > 0;
			d->predicted_ms[t] = j->predicted_s[i][t] >= 0 ? 1e3 * j->predicted_s[i][t] : -1;
			long nv = rc_exec_total_views(j->x, (rc_task)t, i);
			long calls = nv > 0 && v[i] > 0 ? (nv + v[i] - 1) / v[i] : 0;
			if (nv > 0 && !calls) /* dropped mid-job: its calls had the old split */
				calls = (nv + nviews - 1) / nviews;
			d->measured_ms[t] = calls ? 1e3 * rc_exec_total_seconds(j->x, (rc_task)t, i) / (double)calls : 0;
		}
		used += any;
	}
	snprintf(r->engine, sizeof r->engine, "%.15s", used > 1 ? "trigeneous" : j->n ? j->eng[0]->name : "none");
	for (int i = 0; used == 1 && i < j->n; i++)
		if (r->dev[i].views[0] + r->dev[i].views[1] > 0)
			snprintf(r->engine, sizeof r->engine, "%.15s", j->eng[i]->name);
}

/* One measured sample of a device's task, calls of views per call taking
 * seconds in all, added to its model (devices.h) when the job keeps models:
 * the mean call is the sample.  A failure to store only loses this
 * refinement. */
static void add_sample(const rc_recon_spec *s, const char *device_id, const char *shape, rc_task t, double views,
		       double calls, double seconds)
{
	if (!s->model_dir || !s->model_dir[0] || calls < 1 || views < 1)
		return;
	double w = views / calls, sec = seconds / calls;
	(void)rc_models_add(s->model_dir, device_id, shape, t, &w, &sec, 1, 0, NULL, NULL);
}

/* Measured seconds per call refit each device's model (devices.h). */
static void refit(struct job *j)
{
	for (int i = 0; i < j->n; i++)
		for (int t = 0; t < RC_TASK_COUNT; t++) {
			long nv = rc_exec_total_views(j->x, (rc_task)t, i);
			double sec = rc_exec_total_seconds(j->x, (rc_task)t, i);
			int v[RC_EXEC_MAX_ENGINES];
			rc_exec_get_split(j->x, (rc_task)t, v);
			if (nv <= 0 || v[i] <= 0 || !rc_exec_alive(j->x, i))
				continue;
			long calls = (nv + v[i] - 1) / v[i];
			add_sample(j->s, j->dev[i].device_id, j->shape, (rc_task)t, (double)nv, (double)calls, sec);
		}
}

/* The report and the model refit of a run on one device backend: all views
 * of every task on it, the measured time per call from the backend's
 * stats (there is no prediction: the device ran alone). */
static void report_single(const rc_recon_spec *s, const rc_backend *b, const char *device_id, const char *shape,
			  rc_recon_report *report)
{
	const rc_backend_stats *st = &b->stats;
	snprintf(report->engine, sizeof report->engine, "%.15s", b->name);
	report->ndevices = 1;
	snprintf(report->dev[0].name, sizeof report->dev[0].name, "%s", b->name);
	snprintf(report->dev[0].device_id, sizeof report->dev[0].device_id, "%s", device_id);
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		report->dev[0].views[t] = rc_geom_nviews(b->geom);
		report->dev[0].predicted_ms[t] = -1;
		report->dev[0].measured_ms[t] = st->calls[t] ? 1e3 * st->seconds[t] / (double)st->calls[t] : 0;
		add_sample(s, device_id, shape, (rc_task)t, (double)st->views[t], (double)st->calls[t], st->seconds[t]);
	}
}

/* execution.engine = "cuda": the resident run (rc_algo_run_on over the CUDA
 * backend).  RC_ETOOBIG: not run, take the engine path. */
static int run_cuda_resident(const rc_recon_spec *s, const rc_geom *g, const float *proj, float *vol,
			     const rc_algo_hooks *hooks, rc_recon_report *report, rc_err *err)
{
	if (rc_engine_cuda_count() < 1 || !rc_cuda_algo_supported(&s->algo, g))
		return RC_ETOOBIG; /* not applicable: take the engine path */
	rc_backend *b = NULL;
	rc_err e1;
	char shape[64];
	rc_cuda_device_info ci;
	int rc = rc_cuda_resident_open(&s->algo, g, NULL, &b, &e1);
	if (rc == RC_ETOOBIG)
		return rc;
	if (!rc)
		rc = rc_algo_run_on(&s->algo, b, proj, vol, hooks, &e1);
	if (rc && err)
		*err = e1;
	if (b) {
		rc_shape_key(g, algo_bp(s->algo.name, g), shape, sizeof shape);
		if (rc_engine_cuda_info(0, &ci, NULL))
			ci.device_id[0] = 0;
		report_single(s, b, ci.device_id, shape, report);
	}
	rc_backend_free(b);
	return rc;
}

/* execution.engine = "opencl": the resident run (rc_algo_run_on over the
 * OpenCL backend) on the one engine open_devices chose.  RC_ETOOBIG: not
 * run, take the engine path. */
static int run_opencl_resident(struct job *j, const float *proj, float *vol, const rc_algo_hooks *hooks,
			       rc_recon_report *report, rc_err *err)
{
	rc_backend *b = NULL;
	rc_err e1;
	int rc = rc_opencl_run_fits(j->eng[0], &j->s->algo, &e1);
	if (!rc)
		rc = rc_backend_opencl_new(j->eng[0], &b, &e1);
	if (rc == RC_ETOOBIG)
		return rc;
	if (!rc)
		rc = rc_algo_run_on(&j->s->algo, b, proj, vol, hooks, &e1);
	if (rc && err)
		*err = e1;
	if (b)
		report_single(j->s, b, j->dev[0].device_id, j->shape, report);
	rc_backend_free(b);
	return rc;
}

/* rc_algo_start on the CPU engine's host backend (algorithm.initial "fdk"
 * of a job that runs on the tensor backend, which cannot run FDK): FDK's
 * volume of proj into vol, the job's cancel honoured. */
static int cpu_fdk_start(const rc_recon_spec *s, const rc_geom *g, const float *proj, float *vol,
			 const rc_algo_hooks *hooks, rc_err *err)
{
	rc_engine *e = NULL;
	rc_exec *x = NULL;
	rc_backend *b = NULL;
	int rc = rc_engine_cpu_new(g, s->threads, &e, err);
	rc_initial start;
	if (!rc && !(rc = rc_exec_new(&e, 1, &x, err)) && !(rc = rc_backend_host_new(x, &b, err)))
		rc = rc_algo_start(&s->algo, b, proj, vol, hooks, &start, err);
	rc_backend_free(b);
	rc_exec_free(x);
	rc_engine_free(e);
	return rc;
}

int rc_recon_run(const rc_recon_spec *s, const float *proj, float *vol,
		 const rc_algo_hooks *hooks, rc_recon_report *report, rc_err *err)
{
	rc_geom *g = NULL;
	struct job j;
	memset(&j, 0, sizeof j);
	j.s = s;
	rc_recon_report local;
	if (!report)
		report = &local;
	memset(report, 0, sizeof *report);
	double t0 = rc_now_s();

	int refused = rc_recon_check(s, err);
	if (refused)
		return refused;
	rc_engine_choice mode = s->engine;
	/* the splat pair is the CPU engine's: auto must not pick another */
	if (mode == RC_ENGINE_AUTO && s->algo.projector == RC_PROJECTOR_SPLAT)
		mode = RC_ENGINE_CPU;
	const char *pair = "raycast"; /* the device backends' pair (2-D: Joseph's) */
	int rc = rc_geom_new(&s->geom, &s->vol, &s->limits, &g, err);
	if (rc)
		goto out;
	j.g = g;
	/* the tensor backend (paper 001, helper "tensor"): asked for, or any
	 * iterative 2-D job on auto or cpu (cpu runs the tensor backend's CPU
	 * path; the CPU engine's Joseph pair is the OpenCL engine's reference).
	 * An iterative 2-D job on opencl or cuda runs rc_algo_run below over
	 * the host backend with that engine and its Joseph pair (resident.c's
	 * rc_opencl_algo_supported and rc_cuda_algo_supported leave 2-D to that
	 * path). */
	int fbp = rc_geom_is_2d(g) && s->algo.name == RC_ALGO_FDK;
	if (mode == RC_ENGINE_TENSOR || (rc_geom_is_2d(g) && !fbp && (mode == RC_ENGINE_AUTO || mode == RC_ENGINE_CPU))) {
		/* the tensor backend cannot run FDK (rc_algo_start): the start
		 * is the CPU engine's, then given; auto where FDK suits g */
		rc_recon_spec given = *s;
		if (s->algo.initial == RC_INITIAL_AUTO)
			given.algo.initial = rc_fdk_suits(g, s->algo.scan, NULL) ? RC_INITIAL_ZERO : RC_INITIAL_FDK;
		if (s->algo.name != RC_ALGO_FDK && given.algo.initial == RC_INITIAL_FDK) {
			/* auto is decided: the CPU engine runs FDK without asking again */
			if (!(rc = cpu_fdk_start(&given, g, proj, vol, hooks, err))) {
				given.algo.initial = RC_INITIAL_GIVEN;
				rc = rc_tensor_run(&given, g, proj, vol, hooks, report, err);
			}
		} else {
			rc = rc_tensor_run(&given, g, proj, vol, hooks, report, err);
		}
		pair = "distance-driven";
		goto out;
	}
	if (mode == RC_ENGINE_CUDA && !rc_geom_is_2d(g)) {
		rc = run_cuda_resident(s, g, proj, vol, hooks, report, err);
		if (rc != RC_ETOOBIG)
			goto out;
	}
	rc_shape_key(g, algo_bp(s->algo.name, g), j.shape, sizeof j.shape);
	if (s->model_dir && s->model_dir[0])
		snprintf(j.cache_dir, sizeof j.cache_dir, "%s/opencl-cache", s->model_dir);
	if ((rc = open_devices(&j, mode, err)))
		goto out;
	/* one engine with the splat pair runs every iterative algorithm's
	 * forward projection (and SIRT's, CGLS's, MLEM's back projection) by
	 * splatting (backend.h rc_bk_fp): its timings are another shape's */
	if (job_splat(&j))
		snprintf(j.shape + strlen(j.shape), sizeof j.shape - strlen(j.shape), "-splat");
	if (mode == RC_ENGINE_OPENCL && j.n == 1 && j.dev[0].kind == RC_DEVICE_OPENCL &&
	    rc_opencl_algo_supported(&s->algo, g)) {
		rc = run_opencl_resident(&j, proj, vol, hooks, report, err);
		if (rc != RC_ETOOBIG)
			goto out;
	}
	/* trigeneous calibrates what has no model (also a lone device: its
	 * report then has predictions); auto only reads what is stored */
	int trig = mode == RC_ENGINE_TRIGENEOUS;
	if ((rc = load_models(&j, trig, err)))
		goto out;
	if ((rc = rc_exec_new(j.eng, j.n, &j.x, err)))
		goto out;
	int modelled = 0;
	for (int i = 0; i < j.n; i++)
		modelled += have_models(&j, i);
	if (modelled && (rc = plan_tasks(&j, err)))
		goto out;
	if (j.n > 1)
		rc_exec_set_replan(j.x, replan, &j);
	pair = job_splat(&j) ? "splat" : rc_geom_is_2d(g) ? "joseph" : "raycast";
	rc = rc_algo_run(&s->algo, j.x, proj, vol, hooks, err);
	fill_report(&j, report);
	if (!rc)
		refit(&j);
out:
	snprintf(report->projector, sizeof report->projector, "%s", s->algo.name == RC_ALGO_FDK ? "" : pair);
	report->seconds = rc_now_s() - t0;
	job_free(&j);
	rc_geom_free(g);
	return rc;
}
