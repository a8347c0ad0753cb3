/*
 * recond-worker: reconstructs one job directory (spec.json +
 * projections.f32 -> volume.f32).  The daemon runs it per job (runner.c) so
 * that whatever happens here ends this job only; it works the same from the
 * command line:
 *
 *   recond-worker var/jobs/ID              progress lines on stdout
 *   recond-worker --progress-fd 3 [--state-dir STORE] [--live-fd 4]
 *                 [--stream-fd 5 --stream-idle S] DIR   (as the daemon runs it;
 *     worker_proto.h: the live volume and the streamed views' stamps)
 *     --memory-limit BYTES plans the job within that budget (spec.h
 *     job_spec_plan): in core, or FDK in z-slabs, CGLS, SIRT, SART and MLEM in slabs and chunks of views, out of core (ooc_run.h)
 *     --state-dir keeps fitted device models in STORE/models and system
 *     matrices of the tensor path in STORE/matrices, so later jobs reuse them
 *     (--matrix-cache-bytes N keeps that directory under N bytes, least
 *     recently used first, projectors/matrix_cache.h; 0 = no matrix cache)
 *   recond-worker --devices [--state-dir STORE]   the devices of this build,
 *     as JSON (ids as core's registry gives them; with STORE, their models)
 *   recond-worker --names    core's table of choice words (names.h) as JSON,
 *     one list per set plus "device_engine"; tests compare it with the API
 *
 * Before the run the geometry and the data are checked (core/plan/checks.h;
 * NaN and inf are zeroed in this process's private copy of a batch stack),
 * after it the result's relative residual (plan/residual.h); the report
 * line carries the warnings and the residual (docs/api.md, "Warnings").
 *
 * SIGTERM or SIGINT sets the algorithm's cancel flag: the run stops between
 * two tasks of the projection under way on the CPU engine (threadpool.h),
 * else within one iteration, and the process exits WORKER_EXIT_CANCELLED.  The volume is
 * written to a temporary, fsynced, renamed, and the directory fsynced, so a
 * volume.f32 that exists is always complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "device_json.h"
#include "plan/devices.h"
#include "durable.h"
#include "input_conv.h"
#include "backend/cuda/engine_cuda.h"
#include "backend/opencl/engine_opencl.h"
#include "algo/names.h"
#include "plan/checks.h"
#include "plan/extend.h"
#include "plan/recon.h"
#include "ooc_run.h"
#include "spec.h"
#include "util/rc_clock.h"
#include "util/threadpool.h"
#include "worker_proto.h"
#include "worker_ranks.h"

static atomic_int cancel_flag;
static FILE *out;
static rc_progress last;
/* What the run is doing (worker_proto.h): "preparing" until the run starts,
 * then the algorithm's phases, "writing" after it. */
static const char *phase = WORKER_PHASE_PREPARING;
static int asked; /* algorithm.iterations: the iterations the job asked for */
static int asked_nz, spec_iterative; /* volume.nz, and whether the job is iterative on a 3-D geometry */

/* The live volume the daemon previews (or the worker's own buffer). */
static struct {
	float *vol;
	double last_emit;
	double copy_s; /* the last preview's copy of the iterate (a backend's download) */
} live;

/* A streaming FDK's view source: the daemon's stamps (worker_proto.h). */
struct stream {
	const _Atomic uint32_t *stamp;
	uint32_t *seen;      /* the stamp each view had when it was given; 0 = not given */
	int n, given;
	double idle_s, last_new;
	int replaced;        /* first view stored again after it was given, or -1 */
	input_conv *conv;    /* counts: each view given is converted first (NULL: line integrals) */
};

/* Checkpoints of an iterative run (checkpoint.h): every `every` seconds
 * after a whole iteration and when a cancel (SIGTERM) stops the run. */
static struct {
	const char *dir;
	uint64_t id;
	double every, last;
	size_t nvol, nproj;
	float *scratch;  /* max(nvol, nproj) floats, allocated at the first */
	int resumed_from; /* the iteration a resumed run continued from, 0: none */
} ck;

static volatile sig_atomic_t stop_signal; /* the signal that set cancel_flag */
static json_t *memory_plan; /* the plan that ran (spec.h job_spec_plan), for the report */
static rc_extent run_extent; /* the run's extent where checkpoint_setup found it */
static int have_extent;
static json_t *ranks_info; /* a run across ranks: the report's "ranks" (worker_ranks.h) */
static int ranks_same = -1; /* its ranks' volumes the same (view split), -1: not compared */

static void on_signal(int sig)
{
	stop_signal = sig;
	atomic_store(&cancel_flag, 1);
}

static void emit(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	if (s) {
		fprintf(out, "%s\n", s);
		fflush(out);
		free(s);
	}
	json_decref(j);
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* One progress line (worker_proto.h): iteration done, iterations asked,
 * why the run stopped before them (null: it did not), its phase, and the
 * fraction of a set-up phase done (fraction < 0: none). */
static void emit_progress(const char *type, const rc_progress *p, double fraction)
{
	int of = p->of > 0 ? p->of : asked;
	json_t *j = json_pack("{sssisisisosossso}", "type", type, "iteration", p->iteration, "of", of,
			      "iterations", of, "residual", num(p->residual), "elapsed_s", num(p->elapsed_s),
			      "phase", phase, "stopped", p->stopped ? json_string(p->stopped) : json_null());
	if (j && p->views_of) {
		json_object_set_new(j, "views_done", json_integer(p->views_done));
		json_object_set_new(j, "views_expected", json_integer(p->views_of));
	}
	if (j && p->zfinal) {
		json_object_set_new(j, "final_slices", json_integer(p->final_slices));
		json_object_set_new(j, "final_z_mm", num(p->final_z_mm));
	}
	if (j && fraction >= 0)
		json_object_set_new(j, "phase_fraction", json_real(fraction));
	emit(j);
}

static void on_progress(void *ud, const rc_progress *p)
{
	(void)ud;
	last = *p;
	/* an iterative run without an FDK start (a zero start, a resume) says
	 * nothing before its first iteration: that iteration's line is the
	 * phase's first */
	if (!strcmp(phase, WORKER_PHASE_PREPARING))
		phase = RC_PHASE_ITERATING;
	emit_progress("progress", p, -1);
}

/* A new phase: a phase line (the progress line's fields, the counts
 * unchanged; worker_proto.h). */
static void set_phase(const char *ph)
{
	phase = ph;
	emit_progress("phase", &last, -1);
}

static void on_phase(void *ud, const char *ph)
{
	(void)ud;
	set_phase(ph);
}

/* The tensor path's set-up (the system matrix loaded or built): a phase
 * line with the fraction of it done, at most every WORKER_PREVIEW_EVERY_S
 * but always at its start and end. */
static void on_setup(void *ud, const char *ph, double fraction)
{
	static double last_s;
	(void)ud;
	double now = rc_now_s();
	if (!strcmp(phase, ph) && fraction > 0.0 && fraction < 1.0 && now - last_s < WORKER_PREVIEW_EVERY_S)
		return;
	last_s = now;
	phase = ph;
	emit_progress("phase", &last, fraction);
	/* set up: the run's own phases follow (its FDK start, or its first
	 * iteration's line, as after preparing) */
	if (fraction >= 1.0)
		phase = WORKER_PHASE_PREPARING;
}

/* After each iteration (or streamed group): the iterate into the live
 * volume (nothing to copy where the run works in it) and a preview line,
 * at most every WORKER_PREVIEW_EVERY_S and always after the last.  The
 * copy is not free (the tensor backend's is a gather out of its ordered
 * layout: tens of ms at 512^2 x 32 slices, against iterations of a few
 * hundred): previews come at most every 20 copies' time, so they take at
 * most 5 % of the run. */
static int on_iterate(void *ud, rc_backend *b, const rc_vec *x, int iteration)
{
	(void)ud;
	double now = rc_now_s();
	int final = iteration >= last.of && last.of > 0 && (!last.views_of || last.views_done == last.views_of);
	double every = 20.0 * live.copy_s > WORKER_PREVIEW_EVERY_S ? 20.0 * live.copy_s : WORKER_PREVIEW_EVERY_S;
	if (!final && now - live.last_emit < every)
		return 0;
	rc_err e;
	/* x NULL: an extended run put the asked slices in live.vol (recon.h) */
	if (x && rc_bk_download(b, x, live.vol, &e))
		return 0; /* a preview is not worth failing the job */
	live.last_emit = rc_now_s();
	live.copy_s = live.last_emit - now;
	emit(json_pack("{sssisisisi}", "type", "preview", "iteration", last.iteration, "of", last.of, "views_done",
		       last.views_done, "views_expected", last.views_of));
	return 0;
}

/* Not being able to keep a checkpoint never fails the job: it says so on
 * stderr (the daemon's log) and goes on. */
static int on_checkpoint(void *ud, rc_backend *b, const rc_algo_state *s, rc_err *err)
{
	(void)ud;
	(void)err;
	double now = rc_now_s();
	if (!atomic_load(&cancel_flag) && now - ck.last < ck.every)
		return 0;
	size_t n = ck.nvol > ck.nproj ? ck.nvol : ck.nproj;
	if (!ck.scratch && !(ck.scratch = malloc(n * sizeof(float)))) {
		fprintf(stderr, "recond-worker: no memory for a checkpoint\n");
		ck.last = now;
		return 0;
	}
	rc_err e;
	if (ckpt_write(ck.dir, ck.id, b, s, ck.nvol, ck.nproj, ck.scratch, &e))
		fprintf(stderr, "recond-worker: checkpoint after iteration %d not kept: %s\n", s->iteration, e.msg);
	ck.last = rc_now_s();
	return 0;
}

/* The run's checkpoint: an iterative batch job with checkpoint_s > 0 keeps
 * them, and continues from one of this spec and these inputs (st filled,
 * 1) where it exists. */
static int checkpoint_setup(const job_spec *spec, const char *dir, int streaming, const float *lines,
			    rc_algo_state *st)
{
	/* ranks would each write the one checkpoint: none across ranks */
	if (spec->r.algo.name == RC_ALGO_FDK || streaming || !(spec->checkpoint_s > 0.0) || ranks_size() > 1)
		return 0;
	rc_err e;
	rc_err_clear(&e);
	if (ckpt_identity(dir, &ck.id, &e)) {
		fprintf(stderr, "recond-worker: no checkpoints: %s\n", e.msg);
		return 0;
	}
	ck.dir = dir;
	ck.every = spec->checkpoint_s;
	ck.last = rc_now_s();
	/* the volume the run iterates on: the asked one, or it extended in z
	 * (core/plan/extend.h; the same spec and data decide the same) */
	rc_extent ext;
	if (rc_extent_of(&spec->r, lines, &ext, &e)) {
		fprintf(stderr, "recond-worker: no checkpoints: %s\n", e.msg);
		ck.dir = NULL;
		return 0;
	}
	run_extent = ext; /* the run takes it (recon_spec.h extent): one scan */
	have_extent = 1;
	ck.nvol = rc_volume_count(&ext.run);
	ck.nproj = spec->proj_bytes / spec->sample_bytes;
	int got = ckpt_read(dir, ck.id, ck.nvol, ck.nproj, st, &e);
	if (got > 0 && st->iteration < spec->r.algo.iterations) {
		ck.resumed_from = st->iteration;
		return 1;
	}
	if (got > 0)
		ckpt_state_free(st);
	if (got != 0 || e.msg[0])
		fprintf(stderr, "recond-worker: checkpoint not used: %s\n", e.msg[0] ? e.msg : "past the last iteration");
	return 0;
}

static int stream_views(void *ud, double wait_s, int *list, int max, rc_err *err)
{
	struct stream *st = ud;
	double until = rc_now_s() + wait_s;
	for (;;) {
		int got = 0;
		for (int k = 0; k < st->n; k++) {
			uint32_t s = atomic_load_explicit(&st->stamp[k], memory_order_acquire);
			if (!st->seen[k]) {
				if (s && !(s & 1) && got < max) {
					st->seen[k] = s;
					list[got++] = k;
				}
			} else if (s != st->seen[k] && st->replaced < 0) {
				st->replaced = k;
			}
		}
		double now = rc_now_s();
		st->given += got;
		if (got) {
			if (st->conv)
				input_conv_views(st->conv, list, got);
			st->last_new = now;
			return got;
		}
		if (atomic_load(&cancel_flag))
			return rc_fail(err, RC_ECANCELLED, "", "cancelled");
		if (st->given < st->n && now - st->last_new > st->idle_s)
			return rc_fail(err, RC_EUNAVAIL, "stream_idle",
				       "no view arrived for %.0f s (%d of %d views streamed)", st->idle_s, st->given, st->n);
		if (now >= until)
			return 0;
		usleep(2000);
	}
}

static int stream_wait_complete(struct stream *st, rc_err *err);

/* Waits until every view is present (as stream_views waits), then compares
 * each view's stamp with the one it was used at: 1 when one changed (noted
 * in replaced; seen takes the new stamps), 0 when the volume was made from
 * exactly the stored views, or an error.  Once every view is present the
 * daemon takes no more uploads (job_row_uploadable), so a settled stream
 * stays settled. */
static int stream_settle(struct stream *st, rc_err *err)
{
	int rc = stream_wait_complete(st, err), changed = 0;
	if (rc)
		return rc;
	for (int k = 0; k < st->n; k++) {
		uint32_t s = atomic_load_explicit(&st->stamp[k], memory_order_acquire);
		if (s != st->seen[k]) {
			if (st->replaced < 0)
				st->replaced = k;
			st->seen[k] = s;
			changed = 1;
		}
	}
	return changed;
}

/* Whether every view is present (after a view was stored again: the batch
 * run needs the final bytes); waits as stream_views does. */
static int stream_wait_complete(struct stream *st, rc_err *err)
{
	for (;;) {
		int all = 1;
		for (int k = 0; k < st->n && all; k++) {
			uint32_t s = atomic_load_explicit(&st->stamp[k], memory_order_acquire);
			all = s && !(s & 1);
		}
		if (all)
			return 0;
		if (atomic_load(&cancel_flag))
			return rc_fail(err, RC_ECANCELLED, "", "cancelled");
		if (rc_now_s() - st->last_new > st->idle_s)
			return rc_fail(err, RC_EUNAVAIL, "stream_idle", "a view stored again did not arrive within %.0f s",
				       st->idle_s);
		usleep(2000);
	}
}

/* The checks' findings (checks.h) and the residual, for the report. */
static json_t *warnings_json(const rc_warnings *ws)
{
	json_t *a = json_array();
	for (int i = 0; i < ws->n; i++)
		json_array_append_new(a, json_pack("{ssss}", "code", ws->w[i].code, "message", ws->w[i].message));
	return a;
}

static json_t *result_json(const rc_recon_report *rep, const rc_data_stats *ds, int checked)
{
	return json_pack("{sososI}", "relative_residual", num(rep->relative_residual), "noise_relative",
			 checked && ds->rms > 0 ? num(ds->noise_sigma / ds->rms) : json_null(), "non_finite_values",
			 (json_int_t)(checked ? ds->non_finite : 0));
}

static void emit_report(const rc_recon_report *rep, json_t *stream, json_t *warnings, json_t *result,
			json_t *input)
{
	json_t *plan = json_array();
	for (int i = 0; i < rep->ndevices && i < RC_RECON_MAX_DEVICES; i++) {
		const rc_recon_device_report *d = &rep->dev[i];
		json_array_append_new(plan, json_pack("{sssss{sisi}s{soso}s{soso}}", "name", d->name, "device_id", d->device_id,
			"views", "forward", d->views[RC_TASK_FORWARD], "back", d->views[RC_TASK_BACK],
			"predicted_ms", "forward", d->predicted_ms[RC_TASK_FORWARD] < 0 ? json_null() : num(d->predicted_ms[RC_TASK_FORWARD]),
			"back", d->predicted_ms[RC_TASK_BACK] < 0 ? json_null() : num(d->predicted_ms[RC_TASK_BACK]),
			"measured_ms", "forward", num(d->measured_ms[RC_TASK_FORWARD]), "back", num(d->measured_ms[RC_TASK_BACK])));
	}
	json_t *matrix = json_null();
	if (rep->matrix.present)
		matrix = json_pack("{sssIsfsfsIsssssf}", "fragment", rep->matrix.fragment, "nnz",
				   (json_int_t)rep->matrix.nnz, "blocks_pct_before", rep->matrix.blocks_pct_before,
				   "blocks_pct_after", rep->matrix.blocks_pct_after, "bytes", (json_int_t)rep->matrix.bytes,
				   "precision", rep->matrix.precision, "cache", rep->matrix.cache, "setup_s",
				   rep->matrix.setup_s);
	json_t *j = json_pack("{sssssososisfs{sisisoso}}", "type", "report", "engine", rep->engine, "plan", plan,
			      "matrix", matrix, "iterations_done", rep->iterations_done, "seconds", rep->seconds,
			      "progress", "iteration", last.iteration, "of", last.of > 0 ? last.of : asked,
			      "residual", num(last.residual), "elapsed_s", num(last.elapsed_s));
	if (j) {
		json_t *p = json_object_get(j, "progress");
		json_object_set_new(p, "iterations", json_integer(last.of > 0 ? last.of : asked));
		json_object_set_new(p, "stopped", last.stopped ? json_string(last.stopped) : json_null());
		json_object_set_new(p, "phase", json_string(phase));
	}
	if (j)
		json_object_set_new(j, "projector", rep->projector[0] ? json_string(rep->projector) : json_null());
	if (j)
		json_object_set_new(j, "tv_weight", num(rep->tv_weight));
	/* the long object (core/plan/extend.h): what an iterative 3-D run
	 * reconstructed to keep the asked slices */
	if (j && rep->run_nz > 0 && asked_nz > 0 && spec_iterative)
		json_object_set_new(j, "extend", json_pack("{sisisisosf}", "asked_nz", asked_nz, "run_nz", rep->run_nz,
							   "first_slice", rep->run_z0, "mass_beyond",
							   rep->mass_beyond < 0 ? json_null() : json_boolean(rep->mass_beyond),
							   "voxels_factor", (double)rep->run_nz / asked_nz));
	if (j && stream)
		json_object_set(j, "stream", stream);
	if (j && warnings)
		json_object_set(j, "warnings", warnings);
	if (j && result)
		json_object_set(j, "result", result);
	if (j && memory_plan)
		json_object_set(j, "memory_plan", memory_plan);
	json_object_set_new(j, "input", input ? input : json_pack("{ss}", "kind", "line_integrals"));
	json_object_set_new(j, "resumed_from_iteration", ck.resumed_from ? json_integer(ck.resumed_from) : json_null());
	if (j && ranks_info)
		json_object_set(j, "ranks", ranks_info);
	if (j && ranks_same >= 0)
		json_object_set_new(j, "ranks_identical", json_boolean(ranks_same));
	emit(j);
}

static int fail(const rc_err *e)
{
	json_t *line = json_pack("{ssssssss}", "type", "error", "code", rc_code_name(e->code), "field", e->field,
				 "message", e->msg);
	/* which signal stopped it: the daemon tells its own cancel from a
	 * signal sent from outside (worker_proto.h) */
	if (line && e->code == RC_ECANCELLED && stop_signal)
		json_object_set_new(line, "signal", json_integer(stop_signal));
	emit(line);
	if (ranks_size() > 1)
		fprintf(stderr, "recond-worker rank %d: %s%s%s\n", ranks_rank(), e->field, e->field[0] ? ": " : "", e->msg);
	else
		fprintf(stderr, "recond-worker: %s%s%s\n", e->field, e->field[0] ? ": " : "", e->msg);
	if (e->code == RC_EUNAVAIL && !strcmp(e->field, "stream_idle"))
		return WORKER_EXIT_STREAM_IDLE;
	return e->code == RC_ECANCELLED ? WORKER_EXIT_CANCELLED : WORKER_EXIT_FAILED;
}

/* --devices: every device this build can use, as the daemon's /v1/devices
 * lists them, with the ids of core's registry (devices.h: the ids that
 * models are stored under); with --state-dir also each one's stored models.
 * Probing happens here, not in the daemon, so that drivers are only ever
 * loaded by the worker. */
static int list_devices(const char *model_dir)
{
	rc_device dev[RC_DEVICES_MAX];
	int nd = 0;
	rc_err err;
	if (rc_devices_enumerate(dev, RC_DEVICES_MAX, &nd, &err)) {
		fprintf(stderr, "recond-worker: %s\n", err.msg);
		return WORKER_EXIT_FAILED;
	}
	rc_opencl_device cl[RC_OPENCL_MAX_DEVICES];
	int ncl = 0;
	if (rc_opencl_devices(cl, RC_OPENCL_MAX_DEVICES, &ncl, NULL))
		ncl = 0;
	json_t *devs = json_array();
	for (int i = 0; i < nd; i++) {
		const rc_device *d = &dev[i];
		long long mem = 0;
		int units = 0;
		if (d->kind == RC_DEVICE_CPU) {
			mem = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
			units = (int)sysconf(_SC_NPROCESSORS_ONLN);
		} else if (d->kind == RC_DEVICE_OPENCL) {
			for (int k = 0; k < ncl; k++)
				if (cl[k].platform == d->platform && cl[k].device == d->device) {
					mem = (long long)cl[k].global_mem;
					units = cl[k].compute_units;
				}
		} else {
			rc_cuda_device_info ci;
			if (rc_engine_cuda_info(d->ordinal, &ci, NULL) == 0) {
				mem = (long long)ci.total_bytes;
				units = ci.multiprocessors;
			}
		}
		json_t *o = json_pack("{sssssssssssIsi}", "name", d->name, "engine", d->engine, "type", d->type,
				      "device_id", d->device_id, "hw_group", d->hw_group, "memory_bytes", (json_int_t)mem,
				      "compute_units", units);
		if (model_dir)
			json_object_set_new(o, "models", device_models_json(model_dir, d->device_id));
		json_array_append_new(devs, o);
	}
	json_t *o = json_pack("{so}", "devices", devs);
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return WORKER_EXIT_FAILED;
	printf("%s\n", s);
	free(s);
	return 0;
}

/* --names: every set of names.h as {"engine": [...], ...}, in display
 * order, and "device_engine": the engine words a device can report. */
static int print_names(void)
{
	json_t *o = json_object(), *dev = json_array();
	for (int s = 0; s < RC_NAMES_COUNT; s++) {
		json_t *a = json_array();
		unsigned flags;
		const char *w;
		for (int i = 0; (w = rc_names_at((rc_name_set)s, i, NULL, &flags)); i++) {
			json_array_append_new(a, json_string(w));
			if (s == RC_NAMES_ENGINE && (flags & RC_NAME_DEVICE))
				json_array_append_new(dev, json_string(w));
		}
		json_object_set_new(o, rc_name_set_key((rc_name_set)s), a);
	}
	json_object_set_new(o, "device_engine", dev);
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return WORKER_EXIT_FAILED;
	printf("%s\n", s);
	free(s);
	return 0;
}

static int write_volume(const char *dir, const float *vol, size_t bytes, rc_err *err)
{
	return durable_write_file(dir, "volume.f32", vol, bytes, err);
}

static void on_slab(void *ud, int done, int of)
{
	(void)ud;
	double f = (double)done / of;
	int n = last.of > 0 ? last.of : asked;
	emit(json_pack("{sssisisisososssosisiso}", "type", "phase", "iteration", 0, "of", n, "iterations", n, "residual",
		       json_null(), "elapsed_s", num(last.elapsed_s), "phase", phase, "phase_fraction", json_real(f),
		       "slabs_done", done, "slabs", of, "stopped", json_null()));
}

/* An iterative job over the budget only for the long object's predicted
 * extension (memory.h bounds it from the spec): the data's verdict from
 * the stack's file first (extend.h, a view per read), so that a job whose
 * data do not extend it plans on the asked volume (in core where that
 * fits) and runs that verdict; 1 then, *plan the spec to plan with.
 * Counts and a stack still streaming are left to the run. */
static int extent_first(job_spec *spec, const char *path, uint64_t budget, int streaming, job_spec *plan)
{
	if (!budget || streaming || spec->in.intensity || ranks_size() > 1 || spec->r.algo.name == RC_ALGO_FDK ||
	    spec->r.algo.extend != RC_EXTEND_AUTO || job_spec_memory(spec) <= budget)
		return 0;
	*plan = *spec;
	plan->r.algo.extend = RC_EXTEND_OFF;
	if (job_spec_memory(plan) > budget) /* out of core either way: the run decides */
		return 0;
	rc_geom *g = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ok = 0;
	if (fd >= 0 && !rc_geom_new(&spec->r.geom, &spec->r.vol, &spec->r.limits, &g, NULL) &&
	    !rc_extent_decide_file(&spec->r, g, fd, &run_extent, NULL) && run_extent.run.nz == spec->r.vol.nz) {
		have_extent = 1;
		spec->r.extent = &run_extent;
		ok = 1;
	}
	rc_geom_free(g);
	if (fd >= 0)
		close(fd);
	return ok;
}

/* The out-of-core run of plan p (ooc_run.h) and its report: a streaming
 * job waits for its whole stack first (sv non-NULL); the geometry's
 * warnings only (the data is never in memory whole to be checked, nor the
 * volume to be projected for a residual). */
static int run_out_of_core(job_spec *spec, const char *dir, const rc_ooc_plan *p, struct stream *sv, rc_err *err)
{
	int rc = 0;
	json_t *stream = NULL, *warn = NULL, *result = NULL;
	if (sv) {
		sv->last_new = rc_now_s();
		if ((rc = stream_wait_complete(sv, err)))
			return rc;
		stream = json_pack("{siss}", "views_streamed", 0, "fallback",
				   "out of core: reconstructed from the whole stack once every view was stored");
	}
	rc_geom *g = NULL;
	rc_warnings ws = { 0 };
	rc_data_stats ds;
	memset(&ds, 0, sizeof ds);
	if (rc_geom_new(&spec->r.geom, &spec->r.vol, &spec->r.limits, &g, NULL) == 0)
		rc_check_geometry(g, &ws);
	rc_geom_free(g);
	rc_recon_report rep;
	memset(&rep, 0, sizeof rep);
	rep.relative_residual = NAN;
	if (spec->r.algo.name != RC_ALGO_FDK) {
		/* out-of-core CGLS, SIRT, SART or MLEM: a progress line per iteration, the FDK start's phase */
		rc_algo_hooks h = { .progress = on_progress, .cancel = &cancel_flag, .phase = on_phase };
		rc = ooc_run_iter(spec, dir, p, &h, &rep, err);
		if (!rc)
			set_phase(WORKER_PHASE_WRITING);
		goto report;
	}
	set_phase(WORKER_PHASE_FDK);
	rc = ooc_run(spec, dir, p, &cancel_flag, on_slab, NULL, &rep, err);
	if (!rc) {
		last.iteration = 1;
		last.of = 1;
		last.elapsed_s = rep.seconds;
		emit_progress("progress", &last, -1);
		set_phase(WORKER_PHASE_WRITING);
	}
report:
	warn = warnings_json(&ws);
	result = result_json(&rep, &ds, 0);
	emit_report(&rep, stream, warn, result, NULL);
	json_decref(stream);
	json_decref(warn);
	json_decref(result);
	return rc;
}

/* A rank's share of a cone or matrices FDK of line integrals split by z
 * (worker_ranks.h): its slices [z0, z1) (ranks_slab) reconstructed by
 * rc_ooc_fdk_slab from only the detector rows they project onto, read
 * with pread from the spool's stack and filtered alone (FDK filters along
 * rows), then written at their offset into the shared volume file
 * (ranks_write_slabs).  The rank holds its slab and its rows, never the
 * whole stack or volume (spec.c job_spec_memory predicts that).  As out of
 * core: the geometry's warnings only (the stack is never whole here to be
 * checked), no residual (it needs the whole volume). */
static int run_rank_slab(job_spec *spec, const char *dir, rc_err *err)
{
	int z0, z1, fd = -1, rc;
	ranks_slab(spec->r.vol.nz, &z0, &z1);
	size_t slice = (size_t)spec->r.vol.nx * (size_t)spec->r.vol.ny;
	float *slab = NULL;
	rc_geom *g = NULL;
	rc_warnings ws = { 0 };
	rc_data_stats ds;
	memset(&ds, 0, sizeof ds);
	rc_recon_report rep;
	memset(&rep, 0, sizeof rep);
	rep.relative_residual = NAN;
	json_t *warn = NULL, *result = NULL;
	/* views that see none of a rank's slices are fine: the whole volume
	 * passed the view checks (geometry.h rc_limits.part) */
	spec->r.limits.part = 1;
	spec->r.residual = 0;
	if ((rc = rc_geom_new(&spec->r.geom, &spec->r.vol, &spec->r.limits, &g, err)))
		goto done;
	rc_check_geometry(g, &ws);
	set_phase(WORKER_PHASE_FDK);
	char path[4200];
	snprintf(path, sizeof path, "%s/projections.f32", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = rc_fail(err, RC_EIO, "projections", "cannot open %s: %s", path, strerror(errno));
		goto done;
	}
	if (z1 > z0 && !(slab = malloc(sizeof(float) * slice * (size_t)(z1 - z0)))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for rank %d's slab of %d slices", ranks_rank(), z1 - z0);
		goto done;
	}
	rc_algo_hooks h = { .cancel = &cancel_flag };
	if (z1 > z0)
		rc = rc_ooc_fdk_slab(&spec->r, g, fd, 0, z0, z1, slab, &h, &rep, err);
done:
	if (fd >= 0)
		close(fd);
	rc_geom_free(g);
	/* a rank that failed ends them all (main's exit: ranks_abort): the
	 * others wait in the collective below */
	if (rc) {
		free(slab);
		return rc;
	}
	ranks_info = ranks_report(rep.seconds, 0, &ranks_same);
	ranks_same = -1;
	last.iteration = 1;
	last.of = 1;
	last.elapsed_s = rep.seconds;
	emit_progress("progress", &last, -1);
	if (!atomic_load(&cancel_flag))
		set_phase(WORKER_PHASE_WRITING);
	warn = warnings_json(&ws);
	result = result_json(&rep, &ds, 0);
	emit_report(&rep, NULL, warn, result, NULL);
	json_decref(warn);
	json_decref(result);
	if (atomic_load(&cancel_flag))
		rc = rc_fail(err, RC_ECANCELLED, "", "cancelled");
	else
		rc = ranks_write_slabs(dir, "volume.f32", slab, (uint64_t)z0 * slice * sizeof(float),
				       (uint64_t)(z1 - z0) * slice * sizeof(float), spec->vol_bytes, err);
	free(slab);
	return rc;
}

/* FNV-1a of the volume: the ranks of a view split compare theirs. */
static uint64_t volume_hash(const float *vol, size_t bytes)
{
	const unsigned char *p = (const unsigned char *)vol;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < bytes; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* A job across ranks (worker_ranks.h) run in core: a cone or matrices FDK
 * of counts (line integrals take run_rank_slab) gives each rank its z-slab, a volume of nz' slices whose centre moves with it
 * (geometry.h: z = (iz - (nz - 1) / 2) vz + cz), so that every voxel keeps
 * its place; other jobs split their views (ranks_wrap).  Returns 1 for a
 * slab with [z0, z1) set, else 0. */
static int ranks_setup(job_spec *spec, int *z0, int *z1)
{
	*z0 = 0;
	*z1 = spec->r.vol.nz;
	if (ranks_size() < 2)
		return 0;
	spec->r.residual = ranks_rank() == 0;
	if (!job_spec_slabs(spec)) {
		spec->r.wrap = ranks_wrap;
		return 0;
	}
	rc_volume_desc *v = &spec->r.vol;
	int nz = v->nz;
	ranks_slab(nz, z0, z1);
	v->nz = *z1 - *z0;
	v->cz += ((double)*z0 + (v->nz - 1) / 2.0 - (nz - 1) / 2.0) * v->vz;
	/* the relative residual needs the whole volume: not computed */
	spec->r.residual = 0;
	spec->r.limits.part = 1;
	return 1;
}

int main(int argc, char **argv)
{
	rc_err err;
	rc_err_clear(&err);
	if (ranks_init(&argc, &argv, &err)) {
		fprintf(stderr, "recond-worker: %s\n", err.msg);
		return WORKER_EXIT_FAILED;
	}
	static const struct option opts[] = {
		{ "progress-fd", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 't' },
		{ "devices", no_argument, NULL, 'd' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "names", no_argument, NULL, 'n' },
		{ "live-fd", required_argument, NULL, 'l' },
		{ "stream-fd", required_argument, NULL, 'S' },
		{ "stream-idle", required_argument, NULL, 'i' },
		{ "matrix-cache-bytes", required_argument, NULL, 'm' },
		{ "memory-limit", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int progress_fd = STDOUT_FILENO, threads = -1, o, devices = 0, names = 0, live_fd = -1, stream_fd = -1;
	double stream_idle = 300;
	long long cache_bytes = -1; /* the daemon's matrix_cache_bytes; -1 = no bound */
	unsigned long long memory_limit = 0; /* the job's memory budget, bytes; 0 = none */
	const char *state_dir = NULL;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'p')
			progress_fd = atoi(optarg);
		else if (o == 't')
			threads = atoi(optarg);
		else if (o == 'd')
			devices = 1;
		else if (o == 's')
			state_dir = optarg;
		else if (o == 'n')
			names = 1;
		else if (o == 'l')
			live_fd = atoi(optarg);
		else if (o == 'S')
			stream_fd = atoi(optarg);
		else if (o == 'i')
			stream_idle = atof(optarg);
		else if (o == 'm')
			cache_bytes = atoll(optarg);
		else if (o == 'M')
			memory_limit = strtoull(optarg, NULL, 10);
		else {
			fprintf(stderr, "usage: recond-worker [--progress-fd N] [--threads N] [--state-dir DIR] [--memory-limit BYTES] JOBDIR\n       recond-worker --devices [--state-dir DIR]\n       recond-worker --names\n");
			return o == 'h' ? 0 : WORKER_EXIT_FAILED;
		}
	}
	if (names)
		return print_names();
	if (devices) {
		char md[4200];
		snprintf(md, sizeof md, "%s/models", state_dir ? state_dir : "");
		return list_devices(state_dir ? md : NULL);
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: recond-worker [--progress-fd N] [--threads N] [--state-dir DIR] JOBDIR\n       recond-worker --devices [--state-dir DIR]\n       recond-worker --names\n");
		return WORKER_EXIT_FAILED;
	}
	const char *dir = argv[optind];
	/* across ranks, rank 0 alone speaks for the job */
	if (ranks_rank() > 0)
		out = fopen("/dev/null", "w");
	else
		out = progress_fd == STDOUT_FILENO ? stdout : fdopen(progress_fd, "w");
	if (!out) {
		fprintf(stderr, "recond-worker: cannot open progress fd %d: %s\n", progress_fd, strerror(errno));
		return WORKER_EXIT_FAILED;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* a cancel also stops a projection between its tasks (threadpool.h) */
	rc_pool_watch_cancel(&cancel_flag);

	char path[4200];
	job_spec *spec = NULL;
	snprintf(path, sizeof path, "%s/spec.json", dir);
	int rc = job_spec_load(path, &spec, &err);
	if (rc)
		return fail(&err);
	if (threads >= 0)
		spec->r.threads = threads;
	asked = spec->r.algo.name == RC_ALGO_FDK ? 1 : spec->r.algo.iterations;
	asked_nz = spec->r.vol.nz;
	spec_iterative = spec->r.algo.name != RC_ALGO_FDK && spec->r.geom.type != RC_GEOM_FAN &&
			 spec->r.geom.type != RC_GEOM_PARALLEL;
	last.elapsed_s = NAN;
	last.residual = NAN;
	set_phase(WORKER_PHASE_PREPARING);
	char model_dir[4200], cache_dir[4200];
	if (state_dir) {
		/* best effort: without them a job still runs, only uncached */
		snprintf(model_dir, sizeof model_dir, "%s/models", state_dir);
		snprintf(cache_dir, sizeof cache_dir, "%s/matrices", state_dir);
		if ((mkdir(model_dir, 0750) == 0 || errno == EEXIST))
			spec->r.model_dir = model_dir;
		/* matrix_cache_bytes 0: no matrix cache at all */
		if (cache_bytes != 0 && (mkdir(cache_dir, 0750) == 0 || errno == EEXIST)) {
			spec->r.cache_dir = cache_dir;
			spec->r.cache_bytes = cache_bytes > 0 ? cache_bytes : 0;
		}
	}
	spec->r.setup = on_setup;

	/* A streaming job's views keep arriving: the mapping is shared so that
	 * it sees the daemon's writes (a view is announced after its fsync). */
	int streaming = stream_fd >= 0 && ranks_size() == 1 && rc_recon_streams(&spec->r, NULL) == 0;
	struct stream sv = { .n = spec->nviews, .idle_s = stream_idle > 0 ? stream_idle : 300, .replaced = -1 };
	const float *proj = MAP_FAILED;
	input_conv *conv = NULL;
	json_t *stream_info = NULL, *warn_json = NULL, *result = NULL;
	rc_geom *geom = NULL;
	rc_warnings warns = { 0 };
	rc_data_stats dstats;
	int checked = 0;
	memset(&dstats, 0, sizeof dstats);
	live.vol = MAP_FAILED;
	snprintf(path, sizeof path, "%s/projections.f32", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) || (uint64_t)sb.st_size != spec->proj_bytes) {
		rc = rc_fail(&err, RC_EIO, "projections", "%s must hold %llu bytes (%s)", path,
			     (unsigned long long)spec->proj_bytes, fd < 0 ? strerror(errno) : "size differs");
		if (fd >= 0)
			close(fd);
		goto out;
	}
	/* a batch run's private mapping is writable: NaN and inf are zeroed
	 * in this process's copy (checks.h), the stored stack stays as sent */
	proj = mmap(NULL, spec->proj_bytes, streaming ? PROT_READ : PROT_READ | PROT_WRITE,
		    streaming ? MAP_SHARED : MAP_PRIVATE, fd, 0);
	close(fd);
	if (live_fd >= 0)
		live.vol = mmap(NULL, spec->vol_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, live_fd, 0);
	else
		live.vol = mmap(NULL, spec->vol_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (streaming) {
		sv.stamp = mmap(NULL, sizeof(uint32_t) * (size_t)sv.n, PROT_READ, MAP_SHARED, stream_fd, 0);
		sv.seen = calloc((size_t)sv.n, sizeof(uint32_t));
	}
	if (proj == MAP_FAILED || live.vol == MAP_FAILED ||
	    (streaming && (sv.stamp == MAP_FAILED || !sv.seen))) {
		rc = rc_fail(&err, RC_ENOMEM, "", "cannot map the projections, the %llu-byte volume or the view stamps",
			     (unsigned long long)spec->vol_bytes);
		goto out;
	}
	/* over the budget: FDK (or an iterative method) out of core from the
	 * file, in z-slabs or as one slab of its rows (ooc_run.h); neither
	 * mapping above is touched, so neither costs resident memory */
	rc_ooc_plan mplan;
	job_spec plan_off;
	int decided = extent_first(spec, path, memory_limit, streaming, &plan_off);
	if ((rc = job_spec_plan(decided ? &plan_off : spec, memory_limit, "the worker's --memory-limit", &mplan,
				&err)))
		goto out;
	memory_plan = job_plan_json(&mplan);
	if (rc_ooc_plan_out_of_core(&mplan)) {
		rc = run_out_of_core(spec, dir, &mplan, streaming ? &sv : NULL, &err);
		goto out;
	}
	/* FDK split by z across ranks: each rank its slab from its rows */
	if (ranks_size() > 1 && job_spec_slabs(spec) && !spec->in.intensity) {
		rc = run_rank_slab(spec, dir, &err);
		goto out;
	}
	/* counts: line integrals, in one pass now or view by view as they stream */
	const float *lines = proj;
	if (spec->in.intensity) {
		if ((rc = input_conv_open(spec, dir, proj, &conv, &err)))
			goto out;
		if (!streaming)
			input_conv_all(conv, spec->r.threads);
		sv.conv = conv;
		lines = input_conv_lines(conv);
	}
	sv.last_new = rc_now_s();
	/* what the geometry and the data say before the run (a streamed
	 * stack is checked once it is whole, after the run) */
	spec->r.residual = 1;
	if (rc_geom_new(&spec->r.geom, &spec->r.vol, &spec->r.limits, &geom, NULL) == 0) {
		rc_check_geometry(geom, &warns);
		if (!streaming) {
			rc_check_data(geom, lines, (float *)lines, spec->r.threads, &dstats, &warns);
			checked = 1;
		}
	}
	rc_algo_hooks hooks = { .progress = on_progress, .ud = NULL, .cancel = &cancel_flag, .iterate = on_iterate,
				.phase = on_phase };
	/* an iterative run's phases come from the run itself (its FDK start,
	 * then iterating; on_progress for one without a start): set here they
	 * would show iterating before fdk_start */
	if (spec->r.algo.name == RC_ALGO_FDK)
		set_phase(WORKER_PHASE_FDK);
	rc_algo_state resume;
	memset(&resume, 0, sizeof resume);
	if (checkpoint_setup(spec, dir, streaming, lines, &resume))
		hooks.resume = &resume;
	if (have_extent)
		spec->r.extent = &run_extent;
	if (ck.dir)
		hooks.checkpoint = on_checkpoint;
	if (streaming) {
		hooks.views = stream_views;
		hooks.ud = &sv;
		spec->r.algo.streaming = 1; /* its groups are added onto the volume: no scratch */
	}
	/* across ranks: no previews (each rank holds a slab, or a copy) */
	int z0, z1, slab = ranks_setup(spec, &z0, &z1);
	size_t slice = (size_t)spec->r.vol.nx * (size_t)spec->r.vol.ny;
	if (ranks_size() > 1)
		hooks.iterate = NULL;
	rc_recon_report rep;
	memset(&rep, 0, sizeof rep);
	if (!slab || z1 > z0)
		rc = rc_recon_run(&spec->r, lines, live.vol + (size_t)z0 * slice, &hooks, &rep, &err);
	/* A view stored again after it was back-projected cannot be taken back
	 * out of the sum: the job is made again from the whole stack, until no
	 * view changed under the last run. */
	for (int round = 0; !rc && streaming; round++) {
		int changed = stream_settle(&sv, &err);
		if (changed < 0) {
			rc = changed;
			break;
		}
		if (!changed && (sv.replaced < 0 || round > 0))
			break;
		hooks.views = NULL;
		hooks.ud = NULL;
		spec->r.algo.streaming = 0;
		if (conv)
			input_conv_all(conv, spec->r.threads); /* the final bytes of every view */
		memset(&rep, 0, sizeof rep);
		rc = rc_recon_run(&spec->r, lines, live.vol, &hooks, &rep, &err);
	}
	if (streaming && sv.replaced >= 0)
		stream_info = json_pack("{sisiss}", "views_streamed", sv.given, "replaced_view", sv.replaced, "fallback",
					"a view was stored again after it was back-projected: reconstructed from the "
					"whole stack");
	else if (streaming)
		stream_info = json_pack("{sisn}", "views_streamed", sv.given, "fallback");
	rep.iterations_done = rep.iterations_done ? rep.iterations_done : last.iteration;
	/* a rank that failed ends them all: the others wait in a collective */
	if (rc && ranks_size() > 1)
		ranks_abort(fail(&err));
	if (ranks_size() > 1) {
		uint64_t h = slab ? 0 : volume_hash(live.vol, spec->vol_bytes);
		ranks_info = ranks_report(rep.seconds, h, &ranks_same);
		if (slab)
			ranks_same = -1;
	}
	if (!rc && geom && streaming) {
		rc_check_data(geom, lines, NULL, spec->r.threads, &dstats, &warns);
		checked = 1;
	}
	if (!rc && checked)
		rc_check_residual(rep.relative_residual, &dstats, &warns);
	if (!rc && !atomic_load(&cancel_flag))
		set_phase(WORKER_PHASE_WRITING);
	warn_json = warnings_json(&warns);
	result = result_json(&rep, &dstats, checked);
	emit_report(&rep, stream_info, warn_json, result, conv ? input_conv_report(conv) : NULL);
	if (!rc && atomic_load(&cancel_flag))
		rc = rc_fail(&err, RC_ECANCELLED, "", "cancelled");
	if (!rc && slab)
		rc = ranks_write_slabs(dir, "volume.f32", live.vol + (size_t)z0 * slice, (uint64_t)z0 * slice * sizeof(float),
				       (uint64_t)(z1 - z0) * slice * sizeof(float), spec->vol_bytes, &err);
	else if (!rc && ranks_rank() == 0)
		rc = write_volume(dir, live.vol, spec->vol_bytes, &err);
	/* the volume is kept: its checkpoint is of no more use */
	if (!rc && ck.dir)
		ckpt_remove(dir);
	ckpt_state_free(&resume);
	free(ck.scratch);
out:
	json_decref(memory_plan);
	json_decref(stream_info);
	json_decref(warn_json);
	json_decref(result);
	rc_geom_free(geom);
	if (proj != MAP_FAILED)
		munmap((void *)proj, spec->proj_bytes);
	if (live.vol != MAP_FAILED)
		munmap(live.vol, spec->vol_bytes);
	if (streaming && sv.stamp && sv.stamp != MAP_FAILED)
		munmap((void *)sv.stamp, sizeof(uint32_t) * (size_t)sv.n);
	free(sv.seen);
	input_conv_close(conv);
	job_spec_free(spec);
	json_decref(ranks_info);
	if (rc) {
		int code = fail(&err);
		ranks_abort(code);
		return code;
	}
	ranks_finalize();
	return 0;
}
