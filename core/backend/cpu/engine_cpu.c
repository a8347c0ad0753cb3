/*
 * engine_cpu: engine.h's operations on the host CPU through the projectors
 * of proj_cpu.h and one thread pool created with the engine.  Buffers that
 * the projectors keep (padded view blocks and per-thread rows for RC_BP_VOXEL,
 * the rotated volume for RC_FP_ROTATE, the zero-bordered volume for
 * RC_FP_RAYCAST, the per-thread images of RC_FP_SPLAT, the views of the
 * footprint pair) are allocated at the
 * first call that needs them and reused, so iterative algorithms allocate nothing per call.
 * Cone and matrices geometries (a cone with a curved detector: the
 * ray-casting pair and the voxel back projection, its columns set up by
 * proj_cyl.c); of a fan or parallel stack the voxel back
 * projection (FBP's, proj_plane.c) and the Joseph pair (proj_joseph.c, the
 * reference of the OpenCL engine's): a job's iterative products on these
 * geometries run on the tensor backend's distance-driven matrix
 * (plan/recon.c), so the pair here serves tests and direct callers.
 */
#include "backend/cpu/engine_cpu.h"
#include "backend/splat_dev.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "projectors/proj_cpu.h"
#include "util/threadpool.h"

struct cpu_engine {
	rc_engine base; /* first: the engine.h view */
	rc_pool *pool;
	rc_cpu_isa isa;
	rc_bpv *bpv;
	rc_rotate *rot;
	rc_fpr *fpr;
	rc_fps *fps;
	rc_fpf *fpf;
};

/* plane: the call is one the CPU engine runs on a fan or parallel stack
 * (RC_FP_RAYCAST, RC_BP_VOXEL, RC_BP_MATCHED); curved: one it runs on a
 * cone with a curved detector (those and the footprint pair). */
static int check_call(struct cpu_engine *c, int first, int last, const void *in, const void *out, int plane,
		      int curved, rc_err *err)
{
	const rc_geom *g = c->base.geom;
	if (rc_geom_is_2d(g) && !plane)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "the CPU engine projects fan and parallel geometries by ray casting (Joseph) and "
			       "back-projects them voxel-driven or matched; not by rotation, splatting or footprints");
	if (!rc_geom_is_2d(g) && rc_geom_detector(g)->shape == RC_DETECTOR_CURVED && !curved)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.detector.shape",
			       "the CPU engine projects a cone with a curved detector by ray casting or footprints "
			       "and back-projects it voxel-driven, matched or by footprints; not by rotation or "
			       "splatting");
	if (first < 0 || last > rc_geom_nviews(g) || first > last)
		return rc_fail(err, RC_EINVAL, "", "view range [%d, %d) is outside 0..%d", first, last,
			       rc_geom_nviews(g));
	if (!in || !out)
		return rc_fail(err, RC_EINVAL, "", "the CPU engine needs input and output buffers");
	return 0;
}

static int cpu_forward_run(rc_engine *e, rc_fp_kind kind, const float *vol, float *proj, int first,
		       int last, rc_err *err)
{
	struct cpu_engine *c = (struct cpu_engine *)e;
	int rc = check_call(c, first, last, vol, proj, kind == RC_FP_RAYCAST,
			    kind == RC_FP_RAYCAST || kind == RC_FP_FOOTPRINT, err);
	if (rc)
		return rc;
	if (rc_geom_is_2d(e->geom))
		return rc_fp_plane(e->geom, c->pool, vol, proj, first, last, err);
	switch (kind) {
	case RC_FP_RAYCAST:
		if (!c->fpr && (rc = rc_fpr_new(e->geom, &c->fpr, err)))
			return rc;
		rc_fp_raycast(c->fpr, c->pool, c->isa, vol, proj, first, last);
		return 0;
	case RC_FP_ROTATE:
		if (rc_geom_type_of(e->geom) != RC_GEOM_CONE)
			return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
				       "the rotation forward projector needs a circular (cone) geometry; use "
				       "ray casting for matrices");
		if (!c->rot && (rc = rc_rotate_new(e->geom, &c->rot, err)))
			return rc;
		rc_fp_rotate(c->rot, c->pool, vol, proj, first, last);
		return 0;
	case RC_FP_FOOTPRINT:
		if (!e->footprint)
			return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
				       "the footprint pair needs a cone or matrices geometry with the volume in front "
				       "of every source; use ray casting");
		if (!c->fpf && (rc = rc_fpf_new(e->geom, rc_pool_threads(c->pool), &c->fpf, err)))
			return rc;
		return rc_fp_footprint(c->fpf, c->pool, c->isa, vol, proj, first, last, err);
	case RC_FP_SPLAT:
		if (!e->splat)
			return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
				       "voxels project more than %.1f pixel apart on this geometry: splatting "
				       "would ripple; use ray casting",
				       RC_SPLAT_MAX_STEP);
		if (!c->fps && (rc = rc_fps_new(e->geom, rc_pool_threads(c->pool), &c->fps, err)))
			return rc;
		rc_fp_splat(c->fps, c->pool, c->isa, vol, proj, first, last);
		return 0;
	}
	return rc_fail(err, RC_EINVAL, "algorithm.projector", "unknown forward projector %d", (int)kind);
}

static int scratch_add(struct cpu_engine *c, rc_bp_kind kind, const float *proj, float *vol, int first, int last,
		       rc_err *err);

/* accumulate: vol += the sum (engine.h's back_add).  The voxel-driven
 * projectors add in place; the matched and footprint ones start from a
 * zeroed volume, so they add through a volume of this call (no algorithm
 * accumulates them). */
static int cpu_back_run(rc_engine *e, rc_bp_kind kind, const float *proj, float *vol, int first,
			int last, int accumulate, rc_err *err)
{
	struct cpu_engine *c = (struct cpu_engine *)e;
	const int plane = kind == RC_BP_VOXEL || kind == RC_BP_MATCHED;
	int rc = check_call(c, first, last, proj, vol, plane, plane || kind == RC_BP_FOOTPRINT, err);
	if (rc)
		return rc;
	if (accumulate && (kind == RC_BP_MATCHED || kind == RC_BP_FOOTPRINT))
		return scratch_add(c, kind, proj, vol, first, last, err);
	if (rc_geom_is_2d(e->geom))
		return kind == RC_BP_VOXEL ? rc_bp_plane_acc(e->geom, c->pool, proj, vol, first, last, accumulate, err)
					   : rc_bp_plane_matched(e->geom, c->pool, proj, vol, first, last, err);
	/* a curved cone's RC_BP_VOXEL is rc_bp_voxel's too: its tiles take the
	 * cylinder's column set-up (proj_cyl.c) */
	switch (kind) {
	case RC_BP_VOXEL:
	case RC_BP_SPLAT:
		if (kind == RC_BP_SPLAT && !e->splat)
			return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
				       "voxels project more than %.1f pixel apart on this geometry: the splat "
				       "pair would ripple; use the matched ray-casting pair",
				       RC_SPLAT_MAX_STEP);
		if (!c->bpv && (rc = rc_bpv_new(e->geom, rc_pool_threads(c->pool), &c->bpv, err)))
			return rc;
		rc_bp_voxel_acc(c->bpv, c->pool, c->isa, proj, vol, first, last, kind == RC_BP_SPLAT, accumulate);
		return 0;
	case RC_BP_MATCHED:
		rc_bp_matched(e->geom, c->pool, c->isa, proj, vol, first, last);
		return 0;
	case RC_BP_FOOTPRINT:
		if (!e->footprint)
			return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
				       "the footprint pair needs a cone or matrices geometry with the volume in front "
				       "of every source; use the matched ray-casting pair");
		if (!c->fpf && (rc = rc_fpf_new(e->geom, rc_pool_threads(c->pool), &c->fpf, err)))
			return rc;
		return rc_bp_footprint(c->fpf, c->pool, c->isa, proj, vol, first, last, err);
	}
	return rc_fail(err, RC_EINVAL, "algorithm.projector", "unknown back projector %d", (int)kind);
}

static int scratch_add(struct cpu_engine *c, rc_bp_kind kind, const float *proj, float *vol, int first, int last,
		       rc_err *err)
{
	size_t n = rc_volume_count(rc_geom_volume(c->base.geom));
	float *tmp = malloc(n * sizeof *tmp);
	if (!tmp)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a back projection to add (%zu voxels)", n);
	int rc = cpu_back_run(&c->base, kind, proj, tmp, first, last, 0, err);
	for (size_t i = 0; !rc && i < n; i++)
		vol[i] += tmp[i];
	free(tmp);
	return rc;
}

/* A projection stops between its pool's tasks once the process's cancel
 * flag is set (threadpool.h), so a cancel reaches a long iteration within
 * about one task's time; what it wrote is then unspecified. */
static int cpu_interruptible(struct cpu_engine *c, int rc, rc_err *err)
{
	rc_pool_interruptible(c->pool, 0);
	if (!rc && rc_pool_cancel_seen())
		rc = rc_fail(err, RC_ECANCELLED, "", "cancelled during a projection");
	return rc;
}

static int cpu_forward(rc_engine *e, rc_fp_kind kind, const float *vol, float *proj, int first,
		       int last, rc_err *err)
{
	struct cpu_engine *c = (struct cpu_engine *)e;
	rc_pool_interruptible(c->pool, 1);
	return cpu_interruptible(c, cpu_forward_run(e, kind, vol, proj, first, last, err), err);
}

static int cpu_back(rc_engine *e, rc_bp_kind kind, const float *proj, float *vol, int first,
		    int last, rc_err *err)
{
	struct cpu_engine *c = (struct cpu_engine *)e;
	rc_pool_interruptible(c->pool, 1);
	return cpu_interruptible(c, cpu_back_run(e, kind, proj, vol, first, last, 0, err), err);
}

static int cpu_back_add(rc_engine *e, rc_bp_kind kind, const float *proj, float *vol, int first, int last,
			rc_err *err)
{
	struct cpu_engine *c = (struct cpu_engine *)e;
	rc_pool_interruptible(c->pool, 1);
	return cpu_interruptible(c, cpu_back_run(e, kind, proj, vol, first, last, 1, err), err);
}

static void cpu_free(rc_engine *e)
{
	struct cpu_engine *c = (struct cpu_engine *)e;
	rc_rotate_free(c->rot);
	rc_bpv_free(c->bpv);
	rc_fpr_free(c->fpr);
	rc_fps_free(c->fps);
	rc_fpf_free(c->fpf);
	rc_pool_free(c->pool);
	free(c);
}

static const rc_engine_ops cpu_ops = {
	.forward = cpu_forward, .back = cpu_back, .free = cpu_free, .back_add = cpu_back_add
};

void rc_cpu_identity(char *id, size_t idlen, char *name, size_t namelen)
{
	char model[96] = "unknown";
	FILE *f = fopen("/proc/cpuinfo", "re");
	if (f) {
		char line[256];
		while (fgets(line, sizeof line, f)) {
			char *colon = strchr(line, ':');
			if (!strncmp(line, "model name", 10) && colon) {
				char *s = colon + 1;
				while (*s == ' ' || *s == '\t')
					s++;
				s[strcspn(s, "\n")] = 0;
				snprintf(model, sizeof model, "%s", s);
				break;
			}
		}
		fclose(f);
	}
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (name)
		snprintf(name, namelen, "%s (%ld cores)", model, ncpu);
	/* a file-name-safe key: models are stored in a directory named after it */
	for (char *p = model; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr(".-_:+", *p))
			*p = '_';
	if (id)
		snprintf(id, idlen, "cpu:%.96s:%ldc", model, ncpu);
}

int rc_engine_cpu_new(const rc_geom *g, int threads, rc_engine **ret, rc_err *err)
{
	int rc;
	if (!g || !ret)
		return rc_fail(err, RC_EINVAL, "", "rc_engine_cpu_new needs a geometry and a result pointer");
	struct cpu_engine *c = calloc(1, sizeof *c);
	if (!c)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the CPU engine");
	if ((rc = rc_pool_new(threads, &c->pool, err)))
		goto out_free;
	c->base.ops = &cpu_ops;
	c->base.geom = g;
	snprintf(c->base.name, sizeof c->base.name, "cpu");
	rc_cpu_identity(c->base.device_id, sizeof c->base.device_id, NULL, 0);
	snprintf(c->base.hw_group, sizeof c->base.hw_group, "host-cpu");
	c->isa = rc_cpu_isa_best();
	/* the same rule as the device engines' (a 2-D stack has the Joseph
	 * pair alone) */
	c->base.splat = rc_dev_splat_suits(g);
	c->base.footprint = !rc_geom_is_2d(g) && rc_footprint_suits(g) && !getenv("RECOND_NO_FOOTPRINT");
	c->base.footprint_auto = c->base.footprint && rc_footprint_auto_suits(g);
	*ret = &c->base;
	return 0;
out_free:
	free(c);
	return rc;
}

const char *rc_engine_cpu_isa(void) { return rc_cpu_isa_name(rc_cpu_isa_best()); }

int rc_engine_cpu_set_isa(rc_engine *e, const char *isa, rc_err *err)
{
	struct cpu_engine *c = (struct cpu_engine *)e;
	for (int i = 0; i < RC_ISA_COUNT; i++) {
		if (strcmp(isa, rc_cpu_isa_name((rc_cpu_isa)i)))
			continue;
		if (!rc_cpu_isa_supported((rc_cpu_isa)i))
			return rc_fail(err, RC_EUNSUPPORTED, "", "this CPU cannot run the %s path", isa);
		c->isa = (rc_cpu_isa)i;
		return 0;
	}
	return rc_fail(err, RC_EINVAL, "", "unknown ISA path \"%s\" (baseline, avx2 or avx512)", isa);
}

int rc_engine_cpu_splat_check(const rc_geom *g, double *step, double *limit)
{
	*step = rc_splat_max_step(g);
	*limit = RC_SPLAT_MAX_STEP;
	return *step <= *limit;
}

int rc_engine_cpu_threads(const rc_engine *e)
{
	return rc_pool_threads(((const struct cpu_engine *)e)->pool);
}
