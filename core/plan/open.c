/*
 * open: the backend of a job (open.h), for every execution.engine.
 *
 * Five routes, chosen here and nowhere else:
 *   tensor      execution.engine tensor, and an iterative fan or parallel
 *               job on auto or cpu: the tensor backend over the system
 *               matrix (tensor.h), fbp on tensor over FBP's matrix
 *   cuda        a job on cuda: the CUDA backend, every vector resident
 *               (resident.h; a fan or parallel stack with plane.cu's
 *               kernels); RC_ETOOBIG from the device's memory plan falls
 *               through to the host route (z-slabs)
 *   opencl      a job on opencl: the OpenCL backend, every vector resident
 *               (a fan or parallel stack with bp_plane.cl's kernels);
 *               RC_ETOOBIG falls through to the host route
 *   split       several devices (trigeneous, auto with models that favour
 *               a split): the split backend (split.h) over a backend per
 *               device (open_split), the planner's partition per task
 *   host        one device: the host backend over an rc_exec of its engine
 * The job (struct job) owns the engines, the executors and the models; it is
 * the backend's owner (rc_backend.release), so rc_backend_free closes it,
 * and rc_backend_report reads it for the report and the models' refit.
 *
 * execution.engine picks the devices:
 *   cpu         the native CPU engine alone
 *   opencl      one OpenCL device alone (a GPU if there is one)
 *   cuda        the first CUDA GPU
 *   trigeneous  every device (devices.h), each task split by the planner
 *               (plan.h) with the stored models, calibrating the devices
 *               that have none for this problem first
 *   auto        the split when stored models predict it faster than any
 *               one device; otherwise the one device the models favour, and
 *               without models a CUDA GPU if present, else the CPU (the
 *               first device that opens if that fails).  auto never spends
 *               job time on calibration and opens only the chosen devices.
 *   tensor      the tensor backend (paper 001)
 * If a device fails mid-job, the split drops it and replan() splits the
 * tasks again over the devices left, with their models.
 */
#include "plan/open.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/split.h"
#include "plan/resident.h"
#include "plan/tensor.h"

/* The back projector the algorithm runs with ray casting forward (one engine
 * with the splat pair runs RC_FP_SPLAT and RC_BP_SPLAT in its place:
 * load_models, rc_bk_fp); SART on a fan or parallel stack runs the matched
 * one (algo_sart.c). */
static rc_bp_kind algo_bp(rc_algo_name n, const rc_geom *g)
{
	return n == RC_ALGO_FDK || (n == RC_ALGO_SART && !rc_geom_is_2d(g)) ? RC_BP_VOXEL : RC_BP_MATCHED;
}

/* How a job's backend was opened (the four routes of the top). */
enum route { ROUTE_HOST, ROUTE_SPLIT, ROUTE_TENSOR, ROUTE_CUDA, ROUTE_OPENCL };

/* A job's devices: engines, what they are, their models and the plan; it
 * is the owner of the backend rc_backend_open returns. */
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
	rc_exec *x;                       /* the host route's executor */
	rc_backend *sp;                   /* the split route's backend (owned by the caller) */
	rc_exec *xs[RC_EXEC_MAX_ENGINES]; /* its host children's executors, one engine each */
	enum route route;
	rc_backend *b;                    /* the backend this job opened */
	void (*inner_release)(void *);    /* what that backend released itself */
	void *inner_owner;
	rc_recon_report opened;           /* what the tensor path reported at open */
	char single_id[128];              /* a resident run's device identity */
};

/* Whether the job's iterative algorithm projects with the splat pair:
 * engines that all offer it (rc_bk_fp: the host backend's and the split's
 * RC_BK_SPLAT; the CPU, OpenCL and CUDA engines offer it on the same
 * geometries) and a projector that does not rule it out (rc_algo_fp). */
static int job_splat(const struct job *j)
{
	int all = j->n > 0;
	for (int i = 0; i < j->n; i++)
		all = all && j->eng[i]->splat;
	return all && j->s->algo.name != RC_ALGO_FDK && j->s->algo.projector != RC_PROJECTOR_RAYCAST &&
	       j->s->algo.projector != RC_PROJECTOR_FOOTPRINT;
}

/* Likewise the footprint pair: asked for, or auto where the splat pair is
 * not offered (rc_bk_fp's order). */
static int job_footprint(const struct job *j)
{
	return j->n == 1 && j->eng[0]->footprint && j->s->algo.name != RC_ALGO_FDK &&
	       (j->s->algo.projector == RC_PROJECTOR_FOOTPRINT ||
		(j->s->algo.projector == RC_PROJECTOR_AUTO && !j->eng[0]->splat && j->eng[0]->footprint_auto));
}

/* The same for a resident device backend (RC_BK_SPLAT: its engine has
 * the pair, rc_bk_fp). */
static int backend_splat(const struct job *j, const rc_backend *b)
{
	return (b->caps & RC_BK_SPLAT) && j->s->algo.name != RC_ALGO_FDK &&
	       j->s->algo.projector != RC_PROJECTOR_RAYCAST && j->s->algo.projector != RC_PROJECTOR_FOOTPRINT;
}

static void job_free(struct job *j)
{
	rc_exec_free(j->x);
	for (int i = 0; i < j->n; i++) {
		rc_exec_free(j->xs[i]);
		rc_engine_free(j->eng[i]);
	}
}

/* The split of the job's projections, whichever route holds it: device
 * i alive, its views per task, its views and seconds so far. */
static int job_alive(const struct job *j, int i)
{
	return j->sp ? rc_split_alive(j->sp, i) : j->x ? rc_exec_alive(j->x, i) : 1;
}

static int job_set_split(struct job *j, rc_task t, const int *views, rc_err *err)
{
	return j->sp ? rc_split_set(j->sp, t, views, err) : j->x ? rc_exec_set_split(j->x, t, views, err) : 0;
}

static void job_get_split(const struct job *j, rc_task t, int *views)
{
	if (j->sp)
		rc_split_get(j->sp, t, views);
	else
		rc_exec_get_split(j->x, t, views);
}

static long job_views(const struct job *j, rc_task t, int i)
{
	return j->sp ? rc_split_views(j->sp, t, i) : rc_exec_total_views(j->x, t, i);
}

static double job_seconds(const struct job *j, rc_task t, int i)
{
	return j->sp ? rc_split_seconds(j->sp, t, i) : rc_exec_total_seconds(j->x, t, i);
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
			if (!job_alive(j, i))
				m[i].valid = 0;
			groups[i] = j->dev[i].hw_group;
		}
		rc_plan p;
		int rc = rc_plan_split(m, groups, j->n, W, 0, &p, err);
		if (rc)
			return rc;
		for (int i = 0; i < j->n; i++)
			j->predicted_s[i][t] = p.views[i] > 0 ? p.predicted_s[i] : (m[i].valid ? 0 : -1);
		if ((rc = job_set_split(j, (rc_task)t, p.views, err)))
			return rc;
	}
	return 0;
}

/* After device `failed` was dropped: the planner over the living ones. */
static int replan(struct job *j, rc_err *err)
{
	/* a living engine without a model still has to take views */
	int any = 0;
	for (int i = 0; i < j->n; i++)
		any |= job_alive(j, i) && j->model[i][0].valid && j->model[i][1].valid;
	if (!any)
		for (int i = 0; i < j->n; i++)
			if (job_alive(j, i))
				for (int t = 0; t < RC_TASK_COUNT; t++)
					j->model[i][t] = (rc_model){ .a = 1, .b = 0, .valid = 1 };
	return plan_tasks(j, err);
}

static int replan_split(void *ud, rc_backend *sp, int failed, rc_err *err)
{
	(void)sp;
	(void)failed;
	return replan(ud, err);
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

/* Opens the engines execution.engine asks for, from the devices given
 * (NULL: this host's; a 2-D geometry on auto: the cpu engine). */
static int open_devices(struct job *j, rc_engine_choice mode, const rc_device *given, int ngiven, rc_err *err)
{
	rc_device all[RC_DEVICES_MAX];
	int nall = 0;
	if (given) {
		nall = ngiven < RC_DEVICES_MAX ? ngiven : RC_DEVICES_MAX;
		memcpy(all, given, (size_t)nall * sizeof all[0]);
	}
	if (mode == RC_ENGINE_CPU || (rc_geom_is_2d(j->g) && mode == RC_ENGINE_AUTO)) {
		for (int i = 0; i < nall; i++)
			if (all[i].kind == RC_DEVICE_CPU)
				return add_engine(j, &all[i], err);
		/* not the whole list: loading the OpenCL platforms (PoCL and
		 * LLVM) took a quarter of a short CPU job's set-up */
		rc_devices_cpu(&all[0]);
		return add_engine(j, &all[0], err);
	}
	int rc = given ? 0 : rc_devices_enumerate(all, RC_DEVICES_MAX, &nall, err);
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
	} else if (job_footprint(j)) {
		fp = RC_FP_FOOTPRINT;
		bp = bp == RC_BP_MATCHED ? RC_BP_FOOTPRINT : bp;
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
			job_get_split(j, (rc_task)t, v);
			d->views[t] = v[i];
			any |= v[i] > 0;
			d->predicted_ms[t] = j->predicted_s[i][t] >= 0 ? 1e3 * j->predicted_s[i][t] : -1;
			long nv = job_views(j, (rc_task)t, i);
			long calls = nv > 0 && v[i] > 0 ? (nv + v[i] - 1) / v[i] : 0;
			if (nv > 0 && !calls) /* dropped mid-job: its calls had the old split */
				calls = (nv + nviews - 1) / nviews;
			d->measured_ms[t] = calls ? 1e3 * job_seconds(j, (rc_task)t, i) / (double)calls : 0;
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
			long nv = job_views(j, (rc_task)t, i);
			double sec = job_seconds(j, (rc_task)t, i);
			int v[RC_EXEC_MAX_ENGINES];
			job_get_split(j, (rc_task)t, v);
			if (nv <= 0 || v[i] <= 0 || !job_alive(j, i))
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

/* The split route: a child backend per device, the first (the home of
 * the vectors) the host backend over its engine; an OpenCL device on a
 * cone or matrices geometry joins as the OpenCL backend, its vectors
 * resident (they are the engine's own buffers: no memory beyond the
 * engine's); every other device as the host backend over its engine. */
static int open_split(struct job *j, rc_backend **ret, rc_err *err)
{
	rc_backend *c[RC_EXEC_MAX_ENGINES] = { 0 };
	int rc = 0;
	for (int i = 0; i < j->n && !rc; i++) {
		if (i > 0 && j->dev[i].kind == RC_DEVICE_OPENCL && !rc_geom_is_2d(j->g) &&
		    rc_opencl_algo_supported(&j->s->algo, j->g))
			rc = rc_backend_opencl_new(j->eng[i], &c[i], err);
		else if (!(rc = rc_exec_new(&j->eng[i], 1, &j->xs[i], err)))
			rc = rc_backend_host_new(j->xs[i], &c[i], err);
	}
	if (!rc && !(rc = rc_backend_split_new(c, j->n, ret, err))) {
		j->sp = *ret;
		return 0;
	}
	for (int i = 0; i < j->n; i++)
		rc_backend_free(c[i]);
	return rc;
}

static void job_release(void *ud)
{
	struct job *j = ud;
	if (j->inner_release)
		j->inner_release(j->inner_owner);
	job_free(j);
	free(j);
}

/* The job that opened b, or NULL. */
static struct job *job_of(const rc_backend *b)
{
	return b && b->release == job_release ? b->owner : NULL;
}

/* Makes j the owner of b (b's own release runs first when it is freed). */
static void adopt(struct job *j, rc_backend *b)
{
	j->b = b;
	j->inner_release = b->release;
	j->inner_owner = b->owner;
	b->release = job_release;
	b->owner = j;
}

/* The tensor route: the tensor backend (paper 001, the helper "tensor"):
 * asked for, or any iterative 2-D job on auto or cpu (cpu runs its CPU
 * path; the CPU engine's Joseph pair is the OpenCL engine's reference).
 * An iterative 2-D job on opencl or cuda takes the host route with that
 * engine and its Joseph pair. */
static int wants_tensor(rc_engine_choice mode, const rc_algo_params *p, const rc_geom *g)
{
	int fbp = rc_geom_is_2d(g) && p->name == RC_ALGO_FDK;
	return mode == RC_ENGINE_TENSOR || (rc_geom_is_2d(g) && !fbp && (mode == RC_ENGINE_AUTO || mode == RC_ENGINE_CPU));
}

static int open_tensor(struct job *j, rc_engine_choice mode, rc_backend **ret, rc_err *err)
{
	rc_tensor_opts o;
	rc_recon_spec s = *j->s;
	s.engine = mode;
	int rc = rc_tensor_opts_of(&s, &o, err);
	if (!rc)
		rc = rc_tensor_open(&o, &j->s->algo, j->g, ret, &j->opened, err);
	return rc;
}

int rc_backend_open(rc_engine_choice engine, const rc_device *devices, int ndevices, const rc_recon_spec *s,
		    const rc_geom *g, rc_backend **ret, rc_err *err)
{
	if (!s || !g || !ret)
		return rc_fail(err, RC_EINVAL, "", "a backend needs a spec and a geometry");
	if (!rc_name_str(RC_NAMES_ENGINE, (int)engine))
		return rc_fail(err, RC_EINVAL, "execution.engine", "execution.engine %d is not an engine", (int)engine);
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the job's devices");
	j->s = s;
	j->g = g;
	rc_engine_choice mode = engine;
	/* an explicit splat pair needs one engine that has it: auto, which may
	 * split over several devices, takes the CPU engine's */
	if (mode == RC_ENGINE_AUTO && s->algo.projector == RC_PROJECTOR_SPLAT)
		mode = RC_ENGINE_CPU;
	/* and the footprint pair */
	if (mode == RC_ENGINE_AUTO && s->algo.projector == RC_PROJECTOR_FOOTPRINT)
		mode = RC_ENGINE_CPU;
	/* so are the curved cone's projectors (rc_recon_check) */
	if (mode == RC_ENGINE_AUTO && rc_geom_type_of(g) == RC_GEOM_CONE &&
	    rc_geom_detector(g)->shape == RC_DETECTOR_CURVED)
		mode = RC_ENGINE_CPU;
	/* and a helix's (rc_recon_check: engine_runs) */
	if (mode == RC_ENGINE_AUTO && rc_geom_type_of(g) == RC_GEOM_HELIX)
		mode = RC_ENGINE_CPU;
	rc_backend *b = NULL;
	int rc;
	if (wants_tensor(mode, &s->algo, g)) {
		j->route = ROUTE_TENSOR;
		if ((rc = open_tensor(j, mode, &b, err)))
			goto fail;
		goto done;
	}
	rc_shape_key(g, algo_bp(s->algo.name, g), j->shape, sizeof j->shape);
	if (mode == RC_ENGINE_CUDA && rc_cuda_algo_supported(&s->algo, g)) {
		int ordinal = 0, have = 0;
		for (int i = 0; devices && i < ndevices; i++)
			if (devices[i].kind == RC_DEVICE_CUDA) {
				ordinal = devices[i].ordinal;
				have = 1;
				break;
			}
		rc_cuda_device_info ci;
		/* the resident backend runs on CUDA device 0 (rc_cuda_resident_open):
		 * when the caller's devices name another, the engine path runs it */
		if ((have || (!devices && rc_engine_cuda_count() > 0)) && ordinal == 0) {
			rc_err e1;
			rc = rc_cuda_resident_open(&s->algo, g, NULL, &b, &e1);
			if (!rc) {
				j->route = ROUTE_CUDA;
				if (backend_splat(j, b)) /* the resident pair's timings are another shape's */
					snprintf(j->shape + strlen(j->shape), sizeof j->shape - strlen(j->shape), "-splat");
				if (rc_engine_cuda_info(ordinal, &ci, NULL))
					ci.device_id[0] = 0;
				snprintf(j->single_id, sizeof j->single_id, "%s", ci.device_id);
				goto done;
			}
			if (rc != RC_ETOOBIG) {
				if (err)
					*err = e1;
				goto fail;
			}
		}
	}
	if (s->model_dir && s->model_dir[0])
		snprintf(j->cache_dir, sizeof j->cache_dir, "%s/opencl-cache", s->model_dir);
	if ((rc = open_devices(j, mode, devices, ndevices, err)))
		goto fail;
	/* one engine with the splat pair runs every iterative algorithm's
	 * forward projection (and SIRT's, CGLS's, MLEM's back projection) by
	 * splatting (backend.h rc_bk_fp): its timings are another shape's */
	if (job_splat(j))
		snprintf(j->shape + strlen(j->shape), sizeof j->shape - strlen(j->shape), "-splat");
	else if (job_footprint(j)) /* likewise the footprint pair */
		snprintf(j->shape + strlen(j->shape), sizeof j->shape - strlen(j->shape), "-footprint");
	if (mode == RC_ENGINE_OPENCL && j->n == 1 && j->dev[0].kind == RC_DEVICE_OPENCL &&
	    rc_opencl_algo_supported(&s->algo, g)) {
		rc_err e1;
		rc = rc_opencl_run_fits(j->eng[0], &s->algo, &e1);
		if (!rc)
			rc = rc_backend_opencl_new(j->eng[0], &b, &e1);
		if (!rc) {
			j->route = ROUTE_OPENCL;
			snprintf(j->single_id, sizeof j->single_id, "%s", j->dev[0].device_id);
			goto done;
		}
		if (rc != RC_ETOOBIG) {
			if (err)
				*err = e1;
			goto fail;
		}
	}
	/* trigeneous calibrates what has no model (also a lone device: its
	 * report then has predictions); auto only reads what is stored */
	if ((rc = load_models(j, mode == RC_ENGINE_TRIGENEOUS, err)))
		goto fail;
	if (j->n > 1) {
		j->route = ROUTE_SPLIT;
		if ((rc = open_split(j, &b, err)))
			goto fail;
		rc_split_set_replan(b, replan_split, j);
	} else {
		j->route = ROUTE_HOST;
		if ((rc = rc_exec_new(j->eng, j->n, &j->x, err)) || (rc = rc_backend_host_new(j->x, &b, err)))
			goto fail;
	}
	int modelled = 0;
	for (int i = 0; i < j->n; i++)
		modelled += have_models(j, i);
	if (modelled && (rc = plan_tasks(j, err))) {
		rc_backend_free(b);
		goto fail;
	}
done:
	adopt(j, b);
	*ret = b;
	return 0;
fail:
	job_free(j);
	free(j);
	return rc;
}

void rc_backend_report(rc_backend *b, int ran, rc_recon_report *report)
{
	struct job *j = job_of(b);
	if (!j || !report)
		return;
	/* the device backends' pair: ray casting, on a 2-D stack Joseph's */
	const char *pair = rc_geom_is_2d(j->g) ? "joseph" : "raycast";
	switch (j->route) {
	case ROUTE_TENSOR:
		*report = j->opened;
		rc_tensor_report(b, ran, report);
		pair = "distance-driven";
		break;
	case ROUTE_CUDA:
	case ROUTE_OPENCL:
		report_single(j->s, b, j->single_id, j->shape, report);
		if (backend_splat(j, b))
			pair = "splat";
		break;
	case ROUTE_HOST:
	case ROUTE_SPLIT:
		fill_report(j, report);
		if (ran)
			refit(j);
		pair = job_splat(j)	 ? "splat"
		       : job_footprint(j) ? "footprint"
		       : rc_geom_is_2d(j->g) ? "joseph"
					     : "raycast";
		break;
	}
	snprintf(report->projector, sizeof report->projector, "%s", j->s->algo.name == RC_ALGO_FDK ? "" : pair);
}
