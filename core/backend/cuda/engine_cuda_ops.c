/*
 * engine_cuda_ops: the CUDA rc_engine (engine.h semantics; engine_cuda.h).
 *
 * The device state (cu_ctx) is planned and allocated at the first call, from
 * the memory free then, and kept until the engine is freed, so an iterative
 * run allocates once.  Each call uploads its input, runs the slabs of the
 * plan and downloads its output before returning: the engine keeps no
 * pointer to the caller's buffers.  exec.h may call from any thread, so
 * every call first makes the engine's device current.
 */
#ifdef RC_HAVE_CUDA
#include "backend/cuda/engine_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cu_engine {
	rc_engine base;
	rc_cuda_options opt;
	cu_ctx c;
	int ready;
	int last_slabs;
} cu_engine;

static int ensure_ctx(cu_engine *e, rc_err *err)
{
	if (e->ready)
		return cu_ctx_bind(&e->c, err);
	uint64_t budget;
	cu_plan p;
	int need = CU_NEED_VOL | CU_NEED_VOLTEX | CU_NEED_BATCH | CU_NEED_PROJ;
	int rc = cu_budget(e->opt.ordinal, &e->opt, &budget, err);
	if (rc)
		return rc;
	rc = cu_make_plan(e->base.geom, &e->opt, need, budget, 0, &p, err);
	if (rc)
		return rc;
	rc = cu_ctx_init(&e->c, e->base.geom, &e->opt, need, &p, err);
	if (rc)
		return rc;
	e->ready = 1;
	return 0;
}

static int check_range(const rc_engine *e, int first, int last, rc_err *err)
{
	int n = rc_geom_nviews(e->geom);
	if (first < 0 || last > n || first > last)
		return rc_fail(err, RC_EINVAL, "", "view range [%d, %d) is outside [0, %d)", first, last, n);
	return 0;
}

/* The slab bounds of slab s of the plan. */
static void slab(const cu_ctx *c, int s, int *z0, int *z1)
{
	*z0 = s * c->plan.zs;
	*z1 = *z0 + c->plan.zs < c->nz ? *z0 + c->plan.zs : c->nz;
}

static int cu_forward(rc_engine *base, rc_fp_kind kind, const float *vol, float *proj, int first,
		      int last, rc_err *err)
{
	cu_engine *e = (cu_engine *)base;
	cu_ctx *c = &e->c;
	int rc = check_range(base, first, last, err);
	if (rc || first == last)
		return rc;
	rc = ensure_ctx(e, err);
	if (rc)
		return rc;
	const size_t view_b = c->view_elems * sizeof(float);
	/* AUTO: exact ray casting (the adjoint promise), hardware rotation */
	const int exact = kind == RC_FP_RAYCAST ? e->opt.fp_interp != RC_CUDA_INTERP_HW
						: e->opt.bp_interp == RC_CUDA_INTERP_EXACT;
	if (kind == RC_FP_ROTATE) {
		if (c->plan.nslabs > 1)
			return rc_fail(err, RC_ETOOBIG, "volume",
				       "the rotation + projection forward projector needs the whole volume "
				       "on the GPU and this one is run in %d slabs; use ray casting",
				       c->plan.nslabs);
		if (!c->drot) {
			/* the rotated grid only when asked for: about twice the volume */
			rc = cu_ctx_add_rot(c, err);
			if (rc)
				return rc;
		}
	} else if (kind != RC_FP_RAYCAST) {
		return rc_fail(err, RC_EINVAL, "", "unknown forward projector %d", (int)kind);
	}
	const int chunk = c->plan.chunk;
	int uploaded = -1;
	for (int c0 = first; c0 < last; c0 += chunk) {
		const int c1 = last - c0 < chunk ? last : c0 + chunk;
		for (int s = 0; s < c->plan.nslabs; s++) {
			int z0, z1;
			slab(c, s, &z0, &z1);
			if (uploaded != s) {
				rc = cu_upload_slab(c, vol, z0, z1, err);
				if (rc)
					return rc;
				uploaded = s;
			}
			if (kind == RC_FP_ROTATE)
				rc = cu_fp_rotate(c, c->dproj, c0, c1, exact, err);
			else
				rc = cu_fp_ray(c, z0, z1, c->dproj, c0, c1, s > 0, exact, err);
			if (rc)
				return rc;
		}
		cudaError_t ce = cudaMemcpyAsync(proj + (size_t)c0 * c->view_elems, c->dproj,
						 (size_t)(c1 - c0) * view_b, cudaMemcpyDefault, c->ks);
		if (ce == cudaSuccess)
			ce = cudaStreamSynchronize(c->ks);
		if (ce != cudaSuccess)
			return cu_fail(err, ce, "forward projection (download of the projections)");
	}
	e->last_slabs = c->plan.nslabs;
	return 0;
}

static int cu_back(rc_engine *base, rc_bp_kind kind, const float *proj, float *vol, int first,
		   int last, rc_err *err)
{
	cu_engine *e = (cu_engine *)base;
	cu_ctx *c = &e->c;
	int rc = check_range(base, first, last, err);
	if (rc)
		return rc;
	if (kind != RC_BP_VOXEL && kind != RC_BP_MATCHED)
		return rc_fail(err, RC_EINVAL, "", "unknown back projector %d", (int)kind);
	rc = ensure_ctx(e, err);
	if (rc)
		return rc;
	const size_t plane = (size_t)c->nx * (size_t)c->ny;
	const size_t view_b = c->view_elems * sizeof(float);
	const int exact = e->opt.bp_interp == RC_CUDA_INTERP_EXACT;
	for (int s = 0; s < c->plan.nslabs; s++) {
		int z0, z1;
		slab(c, s, &z0, &z1);
		const size_t slab_b = plane * (size_t)(z1 - z0) * sizeof(float);
		if (kind == RC_BP_VOXEL) {
			rc = cu_bp_voxel(c, proj, c->dvol, z0, z1, first, last, exact, err);
			if (rc)
				return rc;
		} else {
			cudaError_t ce = cudaMemsetAsync(c->dvol, 0, slab_b, c->ks);
			if (ce != cudaSuccess)
				return cu_fail(err, ce, "cudaMemsetAsync(volume slab)");
			for (int c0 = first; c0 < last; c0 += c->plan.chunk) {
				const int c1 = last - c0 < c->plan.chunk ? last : c0 + c->plan.chunk;
				ce = cudaMemcpyAsync(c->dproj, proj + (size_t)c0 * c->view_elems,
						     (size_t)(c1 - c0) * view_b, cudaMemcpyDefault, c->ks);
				if (ce != cudaSuccess)
					return cu_fail(err, ce, "cudaMemcpyAsync(projections -> device)");
				rc = cu_bp_matched(c, c->dproj, c->dvol, z0, z1, c0, c1, err);
				if (rc)
					return rc;
			}
		}
		cudaError_t ce = cudaMemcpyAsync(vol + (size_t)z0 * plane, c->dvol, slab_b, cudaMemcpyDefault,
						 c->ks);
		if (ce == cudaSuccess)
			ce = cudaStreamSynchronize(c->ks);
		if (ce != cudaSuccess)
			return cu_fail(err, ce, "back projection (download of the volume slab)");
	}
	e->last_slabs = c->plan.nslabs;
	return 0;
}

static void cu_free(rc_engine *base)
{
	cu_engine *e = (cu_engine *)base;
	if (!e)
		return;
	cu_ctx_release(&e->c);
	free(e);
}

static const rc_engine_ops cu_ops = {
	.forward = cu_forward,
	.back = cu_back,
	.free = cu_free,
};

int rc_engine_cuda_new_opts(const rc_geom *g, const rc_cuda_options *o, rc_engine **ret, rc_err *err)
{
	rc_cuda_options def;
	if (!o) {
		rc_cuda_options_default(&def);
		o = &def;
	}
	if (!cu_geom_ok(g, err))
		return err ? err->code : RC_EUNSUPPORTED;
	rc_cuda_device_info info;
	int rc = rc_engine_cuda_info(o->ordinal, &info, err);
	if (rc)
		return rc;
	cu_engine *e = calloc(1, sizeof *e);
	if (!e)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the CUDA engine");
	e->base.ops = &cu_ops;
	e->base.geom = g;
	e->opt = *o;
	snprintf(e->base.name, sizeof e->base.name, "cuda");
	snprintf(e->base.device_id, sizeof e->base.device_id, "%s", info.device_id);
	snprintf(e->base.hw_group, sizeof e->base.hw_group, "%.*s", (int)sizeof e->base.hw_group - 1,
		 info.device_id);
	*ret = &e->base;
	return 0;
}

int rc_engine_cuda_new(const rc_geom *g, int ordinal, rc_engine **ret, rc_err *err)
{
	rc_cuda_options o;
	rc_cuda_options_default(&o);
	o.ordinal = ordinal;
	return rc_engine_cuda_new_opts(g, &o, ret, err);
}

int rc_engine_cuda_last_slabs(const rc_engine *e)
{
	if (!e || strcmp(e->name, "cuda"))
		return 0;
	return ((const cu_engine *)e)->last_slabs;
}

#else
typedef int rc_engine_cuda_ops_unused;
#endif /* RC_HAVE_CUDA */
