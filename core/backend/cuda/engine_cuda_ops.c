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

#include "backend/cuda/cuda_splat.h"
#include "backend/splat_dev.h"
#include "projectors/proj_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cu_engine {
	rc_engine base;
	rc_cuda_options opt;
	cu_ctx c;
	int ready;
	int last_slabs;
	/* a fan or parallel stack: plane.cu's kernels on plain buffers,
	 * allocated at the first call (no slabs, textures or plan) */
	int plane;
	float *pvol, *pproj, *ppv, *prays;
	rc_cuda_plane pg;
	/* the splat pair (cuda_splat.h) on a whole volume and stack of its own,
	 * allocated at the first splat call */
	cu_splat *sp;
	float *svol, *sproj;
} cu_engine;

/* --- the splat pair ---------------------------------------------------------- */

static void splat_release(cu_engine *e)
{
	cu_splat_free(e->sp);
	if (e->svol)
		cu_release(cudaFree(e->svol));
	if (e->sproj)
		cu_release(cudaFree(e->sproj));
	e->sp = NULL;
	e->svol = e->sproj = NULL;
}

static int splat_ready(cu_engine *e, rc_err *err)
{
	int rc = 0;
	CU_CHECK(cudaSetDevice(e->opt.ordinal), "cudaSetDevice");
	if (e->sp)
		return 0;
	const rc_geom *g = e->base.geom;
	CU_CHECK(cudaMalloc((void **)&e->svol, rc_volume_count(rc_geom_volume(g)) * sizeof(float)),
		 "cudaMalloc(splat volume)");
	CU_CHECK(cudaMalloc((void **)&e->sproj, rc_geom_proj_count(g) * sizeof(float)), "cudaMalloc(splat projections)");
	rc = cu_splat_new(g, &e->sp, err);
out:
	if (rc) /* all or nothing: the next call starts again */
		splat_release(e);
	return rc;
}

/* The views [first, last) go through the engine's own stack; RC_BP_SPLAT
 * reads only those, and adds to out when the engine's bp_add is set. */
static int splat_call(cu_engine *e, int forward, const float *in, float *out, int first, int last, rc_err *err)
{
	if (!e->base.splat)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			       "voxels project more than %.1f pixel apart on this geometry (or a volume and a stack do "
			       "not fit the device): the CUDA engine does not splat it",
			       RC_SPLAT_MAX_STEP);
	int rc = splat_ready(e, err);
	if (rc)
		return rc;
	const rc_geom *g = e->base.geom;
	const size_t nvox = rc_volume_count(rc_geom_volume(g)), view = rc_geom_view_count(g);
	const size_t off = (size_t)first * view, n = (size_t)(last - first) * view * sizeof(float);
	if (forward) {
		CU_CHECK(cudaMemcpy(e->svol, in, nvox * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy(volume -> device)");
		if ((rc = cu_splat_fp(e->sp, e->svol, e->sproj, first, last, 0, err)))
			goto out;
		CU_CHECK(cudaMemcpy(out + off, e->sproj + off, n, cudaMemcpyDeviceToHost), "cudaMemcpy(views -> host)");
	} else {
		CU_CHECK(cudaMemcpy(e->sproj + off, in + off, n, cudaMemcpyHostToDevice), "cudaMemcpy(views -> device)");
		/* adding: the device's volume starts as the caller's */
		if (e->c.bp_add)
			CU_CHECK(cudaMemcpy(e->svol, out, nvox * sizeof(float), cudaMemcpyHostToDevice),
				 "cudaMemcpy(volume -> device)");
		if ((rc = cu_splat_bp(e->sp, e->sproj, e->svol, first, last, e->c.bp_add, 0, err)))
			goto out;
		CU_CHECK(cudaMemcpy(out, e->svol, nvox * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy(volume -> host)");
	}
out:
	return rc;
}

/* --- fan and parallel stacks (plane.cu) ----------------------------------- */

static int plane_ready(cu_engine *e, rc_err *err)
{
	int rc = 0;
	cudaError_t ce = cudaSetDevice(e->opt.ordinal);
	if (ce != cudaSuccess)
		return cu_fail(err, ce, "cudaSetDevice");
	if (e->pvol)
		return 0;
	const rc_geom *g = e->base.geom;
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nk = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu;
	const size_t nv = (size_t)nk * RC_CUDA_PLANE_FLOATS, nr = (size_t)nk * nu * RC_CUDA_PLANE_RAY_FLOATS;
	float *h = malloc((nv > nr ? nv : nr) * sizeof(float));
	if (!h)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d views' rays", nk);
	for (int k = 0; k < nk; k++)
		rc_plane_view(g, k, h + (size_t)k * RC_CUDA_PLANE_FLOATS);
	CU_CHECK(cudaMalloc((void **)&e->ppv, nv * sizeof(float)), "cudaMalloc(in-plane view matrices)");
	CU_CHECK(cudaMemcpy(e->ppv, h, nv * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy(in-plane view matrices)");
	rc_plane_rays(g, h);
	CU_CHECK(cudaMalloc((void **)&e->prays, nr * sizeof(float)), "cudaMalloc(rays)");
	CU_CHECK(cudaMemcpy(e->prays, h, nr * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy(rays)");
	CU_CHECK(cudaMalloc((void **)&e->pproj, rc_geom_proj_count(g) * sizeof(float)), "cudaMalloc(projections)");
	CU_CHECK(cudaMalloc((void **)&e->pvol, rc_volume_count(v) * sizeof(float)), "cudaMalloc(volume)");
	e->pg = (rc_cuda_plane){ v->nx, v->ny, v->nz, nu, nk, rc_geom_type_of(g) == RC_GEOM_FAN, 0, 0.0f, 0.0f };
	e->pg.curved = rc_plane_arc(g, &e->pg.cu, &e->pg.sdu);
out:
	free(h);
	if (rc) { /* all or nothing: the next call starts again */
		float **bufs[4] = { &e->pvol, &e->pproj, &e->ppv, &e->prays };
		for (int i = 0; i < 4; i++) {
			if (*bufs[i])
				cu_release(cudaFree(*bufs[i]));
			*bufs[i] = NULL;
		}
	}
	return rc;
}

/* Views [first, last) of every slice between host and device: one run of
 * (last - first) * nu floats per slice. */
static int plane_copy_views(cu_engine *e, float *dst, const float *src, int first, int last, enum cudaMemcpyKind kind,
			    rc_err *err)
{
	const size_t row = (size_t)e->pg.nviews * e->pg.nu, off = (size_t)first * e->pg.nu;
	const size_t n = (size_t)(last - first) * e->pg.nu * sizeof(float);
	for (int z = 0; z < e->pg.nz; z++) {
		cudaError_t ce = cudaMemcpy(dst + z * row + off, src + z * row + off, n, kind);
		if (ce != cudaSuccess)
			return cu_fail(err, ce, kind == cudaMemcpyHostToDevice ? "cudaMemcpy(views -> device)"
									 : "cudaMemcpy(views -> host)");
	}
	return 0;
}

static int plane_forward(cu_engine *e, rc_fp_kind kind, const float *vol, float *proj, int first, int last,
			 rc_err *err)
{
	if (kind != RC_FP_RAYCAST)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "the CUDA engine forward-projects fan and parallel stacks by ray casting (Joseph)");
	int rc = plane_ready(e, err);
	if (rc)
		return rc;
	cudaError_t ce = cudaMemcpy(e->pvol, vol, rc_volume_count(rc_geom_volume(e->base.geom)) * sizeof(float),
				    cudaMemcpyHostToDevice);
	if (ce != cudaSuccess)
		return cu_fail(err, ce, "cudaMemcpy(volume -> device)");
	ce = (cudaError_t)rc_cuda_launch_fp_plane(e->pvol, e->prays, e->pproj, &e->pg, first, last, 0);
	if (ce == cudaSuccess)
		ce = cudaDeviceSynchronize();
	if (ce != cudaSuccess)
		return cu_fail(err, ce, "fp_plane");
	return plane_copy_views(e, proj, e->pproj, first, last, cudaMemcpyDeviceToHost, err);
}

/* RC_CUDA_MAX_BATCH views per launch, as the voxel back projection. */
static int plane_back(cu_engine *e, rc_bp_kind kind, const float *proj, float *vol, int first, int last,
		      rc_err *err)
{
	if (kind != RC_BP_VOXEL && kind != RC_BP_MATCHED)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "the CUDA engine back-projects fan and parallel stacks voxel-driven or matched");
	int rc = plane_ready(e, err);
	if (!rc)
		rc = plane_copy_views(e, e->pproj, proj, first, last, cudaMemcpyHostToDevice, err);
	if (rc)
		return rc;
	const size_t nvox = rc_volume_count(rc_geom_volume(e->base.geom));
	const int add = e->c.bp_add;
	/* adding: the device's volume starts as the caller's */
	cudaError_t ce = add ? cudaMemcpy(e->pvol, vol, nvox * sizeof(float), cudaMemcpyHostToDevice) : cudaSuccess;
	if (first == last && !add)
		ce = cudaMemset(e->pvol, 0, nvox * sizeof(float));
	for (int c = first; c < last && ce == cudaSuccess; c += RC_CUDA_MAX_BATCH) {
		int cl = c + RC_CUDA_MAX_BATCH < last ? c + RC_CUDA_MAX_BATCH : last;
		ce = (cudaError_t)rc_cuda_launch_bp_plane(e->pproj, e->ppv, e->prays, e->pvol, &e->pg, c, cl, add || c > first,
							  kind == RC_BP_MATCHED, 0);
	}
	if (ce == cudaSuccess)
		ce = cudaDeviceSynchronize();
	if (ce != cudaSuccess)
		return cu_fail(err, ce, kind == RC_BP_MATCHED ? "bp_plane_t" : "bp_plane");
	ce = cudaMemcpy(vol, e->pvol, nvox * sizeof(float), cudaMemcpyDeviceToHost);
	return ce == cudaSuccess ? 0 : cu_fail(err, ce, "cudaMemcpy(volume -> host)");
}

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
	if (e->plane)
		return plane_forward(e, kind, vol, proj, first, last, err);
	if (kind == RC_FP_SPLAT)
		return splat_call(e, 1, vol, proj, first, last, err);
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
	if (e->plane)
		return plane_back(e, kind, proj, vol, first, last, err);
	if (kind == RC_BP_SPLAT)
		return splat_call(e, 0, proj, vol, first, last, err);
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
		/* adding: the slab starts as the caller's */
		if (c->bp_add) {
			cudaError_t ce = cudaMemcpyAsync(c->dvol, vol + (size_t)z0 * plane, slab_b, cudaMemcpyDefault,
							 c->ks);
			if (ce != cudaSuccess)
				return cu_fail(err, ce, "back projection (upload of the volume slab)");
		}
		if (kind == RC_BP_VOXEL) {
			rc = cu_bp_voxel(c, proj, c->dvol, z0, z1, first, last, exact, err);
			if (rc)
				return rc;
		} else {
			cudaError_t ce = c->bp_add ? cudaSuccess : cudaMemsetAsync(c->dvol, 0, slab_b, c->ks);
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
	if (e->sp || e->svol || e->sproj) {
		cu_release(cudaSetDevice(e->opt.ordinal));
		splat_release(e);
	}
	if (e->plane) {
		cu_release(cudaSetDevice(e->opt.ordinal));
		float *bufs[4] = { e->pvol, e->pproj, e->ppv, e->prays };
		for (int i = 0; i < 4; i++)
			if (bufs[i])
				cu_release(cudaFree(bufs[i]));
	}
	free(e);
}

/* engine.h's back_add: each slab of the volume goes to the device, takes
 * the views' sum and comes back */
static int cu_back_add(rc_engine *base, rc_bp_kind kind, const float *proj, float *vol, int first, int last,
		       rc_err *err)
{
	cu_engine *e = (cu_engine *)base;
	e->c.bp_add = 1;
	int rc = cu_back(base, kind, proj, vol, first, last, err);
	e->c.bp_add = 0;
	return rc;
}

static const rc_engine_ops cu_ops = {
	.forward = cu_forward,
	.back = cu_back,
	.back_add = cu_back_add,
	.free = cu_free,
};

int rc_engine_cuda_new_opts(const rc_geom *g, const rc_cuda_options *o, rc_engine **ret, rc_err *err)
{
	rc_cuda_options def;
	if (!o) {
		rc_cuda_options_default(&def);
		o = &def;
	}
	/* fan and parallel: plane.cu's kernels (the resident CUDA backend stays
	 * with cone and matrices: cu_geom_ok) */
	if (!g || (!rc_geom_is_2d(g) && !cu_geom_ok(g, err)))
		return g ? (err ? err->code : RC_EUNSUPPORTED) : rc_fail(err, RC_EINVAL, "", "no geometry");
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
	e->plane = rc_geom_is_2d(g);
	/* the splat pair where the geometry suits it and a volume and a stack
	 * fit in the device's memory free now (splat_ready allocates them) */
	uint64_t budget = 0;
	e->base.splat = rc_dev_splat_suits(g) && cu_budget(o->ordinal, o, &budget, NULL) == 0 &&
			(rc_volume_count(rc_geom_volume(g)) + rc_geom_proj_count(g)) * sizeof(float) < budget;
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
