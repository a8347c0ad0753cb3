/*
 * engine_cuda_ctx: the CUDA engine's device state and the projection calls
 * built on the kernels (engine_cuda_impl.h).
 *
 * Memory is planned before anything is allocated: cu_budget reads the free
 * memory (TIGRE's checkFreeMemory habit), cu_make_plan fits the buffers into
 * it (slabs of z planes when the volume does not fit), cu_ctx_init allocates
 * exactly the plan.  Nothing here allocates per call.
 *
 * Voxel back projection streams the views through two layered textures:
 * while the kernel works on batch i out of buffer i % 2, the copy stream
 * fills the other buffer with batch i + 1 (from pinned or device memory by
 * DMA; pageable host memory goes through a pinned staging buffer, the CPU
 * copy overlapping the running kernel).  Events order the two streams.
 */
#ifdef RC_HAVE_CUDA
#include "backend/cuda/engine_cuda_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cu_fail(rc_err *err, cudaError_t ce, const char *ctx)
{
	/* clears a non-sticky error so that later calls do not report it again */
	(void)cudaGetLastError();
	return rc_fail(err, ce == cudaErrorMemoryAllocation ? RC_ENOMEM : RC_EDEVICE, "execution.engine",
		       "CUDA: %s failed: %s (%s)", ctx, cudaGetErrorName(ce), cudaGetErrorString(ce));
}

void cu_release(cudaError_t ce)
{
	if (ce != cudaSuccess)
		(void)cudaGetLastError();
}

int cu_geom_ok(const rc_geom *g, rc_err *err)
{
	rc_geom_type t = rc_geom_type_of(g);
	if (t != RC_GEOM_CONE && t != RC_GEOM_MATRICES) {
		rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			"the resident CUDA backend runs cone and matrices geometries; fan and parallel stacks "
			"run on the CUDA engine through the host backend (plane.cu)");
		return 0;
	}
	/* its kernels map points through a flat P (the CPU engine runs it) */
	if (rc_geom_detector(g)->shape == RC_DETECTOR_CURVED) {
		rc_fail(err, RC_EUNSUPPORTED, "execution.engine",
			"the CUDA engine does not run a cone geometry with a curved detector; use the CPU engine");
		return 0;
	}
	return 1;
}

float cu_ray_step(const rc_geom *g)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	return (float)(0.5 * fmin(v->vx, fmin(v->vy, v->vz)));
}

int cu_budget(int ordinal, const rc_cuda_options *o, uint64_t *ret, rc_err *err)
{
	int rc = 0;
	size_t fr = 0, tot = 0;
	CU_CHECK(cudaSetDevice(ordinal), "cudaSetDevice");
	CU_CHECK(cudaMemGetInfo(&fr, &tot), "cudaMemGetInfo");
	/* Keep room for the context's own allocations (kernel stacks, printf,
	 * texture descriptors) and for fragmentation. */
	uint64_t margin = (uint64_t)256 << 20;
	margin += (uint64_t)fr / 50;
	uint64_t b = (uint64_t)fr > margin ? (uint64_t)fr - margin : 0;
	if (o->mem_budget && o->mem_budget < b)
		b = o->mem_budget;
	*ret = b;
out:
	return rc;
}

/* Rotated grid of RC_FP_ROTATE: square, spacing min(vx, vy), centred on the
 * rotation axis and wide enough for every rotation of the volume. */
static void rot_grid(const rc_geom *g, int *nr, float *vr)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	double s = fmin(v->vx, v->vy);
	double hx = 0.5 * v->nx * v->vx, hy = 0.5 * v->ny * v->vy;
	double r = 0;
	for (int i = 0; i < 4; i++) {
		double x = v->cx + ((i & 1) ? hx : -hx), y = v->cy + ((i & 2) ? hy : -hy);
		r = fmax(r, sqrt(x * x + y * y));
	}
	*nr = 2 * (int)ceil(r / s) + 1;
	*vr = (float)s;
}

int cu_make_plan(const rc_geom *g, const rc_cuda_options *o, int need, uint64_t budget,
		 uint64_t reserved, cu_plan *ret, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	const int nviews = rc_geom_nviews(g);
	const uint64_t view_b = (uint64_t)d->nu * (uint64_t)d->nv * sizeof(float);
	const uint64_t plane_b = (uint64_t)v->nx * (uint64_t)v->ny * sizeof(float);
	cu_plan p;
	memset(&p, 0, sizeof p);
	p.budget = budget;
	p.batch = o->views_per_launch <= 0 || o->views_per_launch > RC_CUDA_MAX_BATCH
			  ? RC_CUDA_MAX_BATCH
			  : o->views_per_launch;
	uint64_t avail = budget > reserved ? budget - reserved : 0;
	uint64_t batch_b = 0;
	if (need & CU_NEED_BATCH) {
		/* fewer views per launch before fewer planes per slab: a batch
		 * of one view still runs, a slab costs a re-upload of all views */
		while (p.batch > 1 && 2 * (uint64_t)p.batch * view_b > avail / 4)
			p.batch /= 2;
		batch_b = 2 * (uint64_t)p.batch * view_b;
	}
	uint64_t rot_b = 0;
	if (need & CU_NEED_ROT) {
		int nr;
		float vr;
		rot_grid(g, &nr, &vr);
		rot_b = (uint64_t)nr * (uint64_t)nr * (uint64_t)v->nz * sizeof(float);
	}
	for (int zs = v->nz;; zs = (zs + 1) / 2) {
		if ((need & CU_NEED_ROT) && zs < v->nz)
			break; /* rotation needs the whole volume */
		int nslabs = (v->nz + zs - 1) / zs;
		zs = (v->nz + nslabs - 1) / nslabs; /* even slabs */
		uint64_t base = batch_b + rot_b;
		if (need & CU_NEED_VOL)
			base += plane_b * (uint64_t)zs;
		if (need & CU_NEED_VOLTEX)
			base += plane_b * (uint64_t)(zs + 1 < v->nz ? zs + 1 : v->nz);
		if (base <= avail) {
			int chunk = 0;
			if (need & CU_NEED_PROJ) {
				uint64_t fit = (avail - base) / view_b;
				chunk = fit >= (uint64_t)nviews ? nviews : (int)fit;
			}
			if (!(need & CU_NEED_PROJ) || chunk >= 1) {
				p.zs = zs;
				p.nslabs = nslabs;
				p.chunk = chunk;
				p.bytes = base + (uint64_t)chunk * view_b;
				*ret = p;
				return 0;
			}
		}
		if (zs == 1)
			break;
	}
	return rc_fail(err, RC_ETOOBIG, "volume",
		       "the job does not fit the GPU's memory even in slabs of one plane: it needs "
		       "%.1f MiB at least and %.1f MiB are free for it (%.1f MiB of it reserved); "
		       "use a smaller volume or detector, or another engine",
		       (double)(batch_b + rot_b + 2 * plane_b + view_b + reserved) / 1048576.0,
		       (double)budget / 1048576.0, (double)reserved / 1048576.0);
}

static int make_tex(cudaArray_t a, int linear, cudaTextureObject_t *t, rc_err *err)
{
	int rc = 0;
	struct cudaResourceDesc rd;
	struct cudaTextureDesc td;
	memset(&rd, 0, sizeof rd);
	memset(&td, 0, sizeof td);
	rd.resType = cudaResourceTypeArray;
	rd.res.array.array = a;
	/* border colour 0 (memset): the zero padding of the CPU projectors */
	for (int i = 0; i < 3; i++)
		td.addressMode[i] = cudaAddressModeBorder;
	td.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
	td.readMode = cudaReadModeElementType;
	td.normalizedCoords = 0;
	CU_CHECK(cudaCreateTextureObject(t, &rd, &td, NULL), "cudaCreateTextureObject");
out:
	return rc;
}

int cu_ctx_bind(cu_ctx *c, rc_err *err)
{
	int rc = 0;
	CU_CHECK(cudaSetDevice(c->ordinal), "cudaSetDevice");
out:
	return rc;
}

int cu_ctx_init(cu_ctx *c, const rc_geom *g, const rc_cuda_options *o, int need,
		const cu_plan *p, rc_err *err)
{
	int rc = 0;
	char what[160];
	memset(c, 0, sizeof *c);
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	c->ordinal = o->ordinal;
	c->g = g;
	c->opt = *o;
	c->plan = *p;
	c->need = need;
	c->nx = v->nx;
	c->ny = v->ny;
	c->nz = v->nz;
	c->nu = d->nu;
	c->nv = d->nv;
	c->view_elems = (size_t)d->nu * (size_t)d->nv;
	const size_t plane = (size_t)c->nx * (size_t)c->ny;
	struct cudaChannelFormatDesc fd = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);

	CU_CHECK(cudaSetDevice(c->ordinal), "cudaSetDevice");
	CU_CHECK(cudaStreamCreateWithFlags(&c->ks, cudaStreamNonBlocking), "cudaStreamCreate(kernels)");
	CU_CHECK(cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking), "cudaStreamCreate(copies)");
	for (int b = 0; b < 2; b++) {
		CU_CHECK(cudaEventCreateWithFlags(&c->copied[b], cudaEventDisableTiming), "cudaEventCreate");
		CU_CHECK(cudaEventCreateWithFlags(&c->consumed[b], cudaEventDisableTiming), "cudaEventCreate");
	}
	CU_CHECK(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming), "cudaEventCreate");
	if (need & CU_NEED_BATCH) {
		for (int b = 0; b < 2; b++) {
			struct cudaExtent ext = {(size_t)c->nu, (size_t)c->nv, (size_t)p->batch};
			snprintf(what, sizeof what, "cudaMalloc3DArray(projection batch %dx%dx%d, layered)",
				 c->nu, c->nv, p->batch);
			CU_CHECK(cudaMalloc3DArray(&c->barr[b], &fd, ext, cudaArrayLayered), what);
			rc = make_tex(c->barr[b], 1, &c->btex[b][0], err);
			if (rc)
				goto out;
			rc = make_tex(c->barr[b], 0, &c->btex[b][1], err);
			if (rc)
				goto out;
			snprintf(what, sizeof what, "cudaMallocHost(staging, %zu bytes)",
				 (size_t)p->batch * c->view_elems * sizeof(float));
			CU_CHECK(cudaMallocHost((void **)&c->stage[b],
						(size_t)p->batch * c->view_elems * sizeof(float)), what);
		}
	}
	if (need & CU_NEED_VOLTEX) {
		c->vdepth = p->zs + 1 < c->nz ? p->zs + 1 : c->nz;
		struct cudaExtent ext = {(size_t)c->nx, (size_t)c->ny, (size_t)c->vdepth};
		snprintf(what, sizeof what, "cudaMalloc3DArray(volume slab %dx%dx%d)", c->nx, c->ny, c->vdepth);
		CU_CHECK(cudaMalloc3DArray(&c->varr, &fd, ext, 0), what);
		rc = make_tex(c->varr, 1, &c->vtex[0], err);
		if (rc)
			goto out;
		rc = make_tex(c->varr, 0, &c->vtex[1], err);
		if (rc)
			goto out;
		if (p->nslabs > 1) {
			c->zero_plane = calloc(plane, sizeof(float));
			if (!c->zero_plane) {
				rc = rc_fail(err, RC_ENOMEM, "", "out of host memory for a zero plane");
				goto out;
			}
		}
	}
	if (need & CU_NEED_VOL) {
		snprintf(what, sizeof what, "cudaMalloc(volume slab, %zu bytes)", plane * p->zs * sizeof(float));
		CU_CHECK(cudaMalloc((void **)&c->dvol, plane * (size_t)p->zs * sizeof(float)), what);
	}
	if ((need & CU_NEED_PROJ) && p->chunk > 0) {
		snprintf(what, sizeof what, "cudaMalloc(projections, %d views)", p->chunk);
		CU_CHECK(cudaMalloc((void **)&c->dproj, (size_t)p->chunk * c->view_elems * sizeof(float)), what);
	}
	if (need & CU_NEED_ROT) {
		rot_grid(g, &c->rot_nr, &c->rot_vr);
		size_t n = (size_t)c->rot_nr * (size_t)c->rot_nr * (size_t)c->nz;
		snprintf(what, sizeof what, "cudaMalloc(rotated volume %dx%dx%d)", c->rot_nr, c->rot_nr, c->nz);
		CU_CHECK(cudaMalloc((void **)&c->drot, n * sizeof(float)), what);
	}
out:
	if (rc)
		cu_ctx_release(c);
	return rc;
}

int cu_ctx_add_rot(cu_ctx *c, rc_err *err)
{
	int rc = 0;
	char what[160];
	uint64_t budget = 0;
	if (rc_geom_type_of(c->g) != RC_GEOM_CONE)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "the rotation + projection forward projector needs a circular (cone) geometry");
	rc = cu_budget(c->ordinal, &c->opt, &budget, err);
	if (rc)
		return rc;
	/* the budget option caps the engine as a whole */
	if (c->opt.mem_budget)
		budget = budget > c->plan.bytes ? budget - c->plan.bytes : 0;
	rot_grid(c->g, &c->rot_nr, &c->rot_vr);
	size_t n = (size_t)c->rot_nr * (size_t)c->rot_nr * (size_t)c->nz;
	if ((uint64_t)n * sizeof(float) > budget)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the rotation + projection forward projector needs %.1f MiB for the rotated "
			       "volume and %.1f MiB are free; use ray casting",
			       (double)n * sizeof(float) / 1048576.0, (double)budget / 1048576.0);
	snprintf(what, sizeof what, "cudaMalloc(rotated volume %dx%dx%d)", c->rot_nr, c->rot_nr, c->nz);
	CU_CHECK(cudaMalloc((void **)&c->drot, n * sizeof(float)), what);
out:
	return rc;
}

void cu_ctx_release(cu_ctx *c)
{
	if (!c || !c->ks)
		return;
	cu_release(cudaSetDevice(c->ordinal));
	cu_release(cudaStreamSynchronize(c->ks));
	cu_release(cudaStreamSynchronize(c->cs));
	for (int b = 0; b < 2; b++) {
		for (int x = 0; x < 2; x++)
			if (c->btex[b][x])
				cu_release(cudaDestroyTextureObject(c->btex[b][x]));
		if (c->barr[b])
			cu_release(cudaFreeArray(c->barr[b]));
		if (c->stage[b])
			cu_release(cudaFreeHost(c->stage[b]));
		if (c->copied[b])
			cu_release(cudaEventDestroy(c->copied[b]));
		if (c->consumed[b])
			cu_release(cudaEventDestroy(c->consumed[b]));
	}
	if (c->ready)
		cu_release(cudaEventDestroy(c->ready));
	for (int x = 0; x < 2; x++)
		if (c->vtex[x])
			cu_release(cudaDestroyTextureObject(c->vtex[x]));
	if (c->varr)
		cu_release(cudaFreeArray(c->varr));
	cu_release(cudaFree(c->dvol));
	cu_release(cudaFree(c->dproj));
	cu_release(cudaFree(c->drot));
	cu_release(cudaStreamDestroy(c->ks));
	cu_release(cudaStreamDestroy(c->cs));
	free(c->zero_plane);
	memset(c, 0, sizeof *c);
}

static struct cudaMemcpy3DParms copy_params(const float *src, int w, int h, int depth,
					    cudaArray_t dst, int dst_z)
{
	struct cudaMemcpy3DParms p;
	memset(&p, 0, sizeof p);
	p.srcPtr.ptr = (void *)src;
	p.srcPtr.pitch = (size_t)w * sizeof(float);
	p.srcPtr.xsize = (size_t)w;
	p.srcPtr.ysize = (size_t)h;
	p.dstArray = dst;
	p.dstPos.z = (size_t)dst_z;
	p.extent.width = (size_t)w;
	p.extent.height = (size_t)h;
	p.extent.depth = (size_t)depth;
	p.kind = cudaMemcpyDefault;
	return p;
}

int cu_upload_slab(cu_ctx *c, const float *vol, int z0, int z1, rc_err *err)
{
	int rc = 0;
	const size_t plane = (size_t)c->nx * (size_t)c->ny;
	int m = (z1 + 1 < c->nz ? z1 + 1 : c->nz) - z0;
	struct cudaMemcpy3DParms p = copy_params(vol + (size_t)z0 * plane, c->nx, c->ny, m, c->varr, 0);
	CU_CHECK(cudaMemcpy3DAsync(&p, c->ks), "cudaMemcpy3DAsync(volume slab -> 3-D texture)");
	if (m < c->vdepth) {
		/* the last slab is shorter than the texture: the plane after it
		 * must read as the zero padding, not the previous slab's data */
		p = copy_params(c->zero_plane, c->nx, c->ny, 1, c->varr, m);
		CU_CHECK(cudaMemcpy3DAsync(&p, c->ks), "cudaMemcpy3DAsync(zero plane -> 3-D texture)");
	}
out:
	return rc;
}

/* World position of voxel (0, 0, z0) and the voxel size. */
static void vol_origin(const rc_geom *g, int z0, double o[3], double vox[3])
{
	const rc_volume_desc *v = rc_geom_volume(g);
	rc_volume_voxel_pos(v, 0, 0, z0, o);
	vox[0] = v->vx;
	vox[1] = v->vy;
	vox[2] = v->vz;
}

static void ray_view(const rc_geom *g, int k, rc_cuda_ray_view *rv)
{
	double o[3], vox[3];
	vol_origin(g, 0, o, vox);
	const rc_view *vw = rc_geom_view(g, k);
	for (int r = 0; r < 3; r++) {
		rv->a[r] = (float)((vw->src[r] - o[r]) / vox[r]);
		for (int col = 0; col < 3; col++)
			rv->M[3 * r + col] = (float)(vw->Minv[3 * r + col] / vox[r]);
	}
}

static rc_cuda_ray_vol ray_vol(const cu_ctx *c, int z0, int z1)
{
	const rc_volume_desc *v = rc_geom_volume(c->g);
	rc_cuda_ray_vol rv;
	memset(&rv, 0, sizeof rv);
	rv.nx = c->nx;
	rv.ny = c->ny;
	rv.nz = c->nz;
	rv.z0 = z0;
	rv.z1 = z1;
	rv.tz0 = z0;
	rv.vox[0] = (float)v->vx;
	rv.vox[1] = (float)v->vy;
	rv.vox[2] = (float)v->vz;
	rv.step = cu_ray_step(c->g);
	rv.nu = c->nu;
	rv.nv = c->nv;
	return rv;
}

int cu_fp_ray(cu_ctx *c, int z0, int z1, float *out, int first, int last, int accumulate,
	      int exact, rc_err *err)
{
	int rc = 0;
	rc_cuda_ray_vol rv = ray_vol(c, z0, z1);
	rc_cuda_ray_batch b;
	for (int b0 = first; b0 < last; b0 += RC_CUDA_MAX_BATCH) {
		b.n = last - b0 < RC_CUDA_MAX_BATCH ? last - b0 : RC_CUDA_MAX_BATCH;
		for (int k = 0; k < b.n; k++)
			ray_view(c->g, b0 + k, &b.v[k]);
		CU_CHECK((cudaError_t)rc_cuda_launch_fp_ray(c->vtex[exact ? 1 : 0], &b, &rv,
							    out + (size_t)(b0 - first) * c->view_elems,
							    accumulate, exact, c->ks),
			 "launch of the ray-casting forward projector");
	}
out:
	return rc;
}

int cu_bp_matched(cu_ctx *c, const float *dproj, float *dvol, int z0, int z1, int first, int last,
		  rc_err *err)
{
	int rc = 0;
	rc_cuda_ray_vol rv = ray_vol(c, z0, z1);
	rc_cuda_ray_batch b;
	for (int b0 = first; b0 < last; b0 += RC_CUDA_MAX_BATCH) {
		b.n = last - b0 < RC_CUDA_MAX_BATCH ? last - b0 : RC_CUDA_MAX_BATCH;
		for (int k = 0; k < b.n; k++)
			ray_view(c->g, b0 + k, &b.v[k]);
		CU_CHECK((cudaError_t)rc_cuda_launch_bp_matched(dproj + (size_t)(b0 - first) * c->view_elems,
								&b, &rv, dvol, c->ks),
			 "launch of the matched back projector");
	}
out:
	return rc;
}

/* P' = P * T, T mapping slab voxel index (ix, iy, iz, 1) to world mm, so the
 * kernel works in indices; computed in double, rounded once. */
static void bp_matrix(const rc_geom *g, int k, int z0, float out[12])
{
	double o[3], vox[3];
	vol_origin(g, z0, o, vox);
	const double *P = rc_geom_view(g, k)->P;
	for (int r = 0; r < 3; r++) {
		const double *row = P + 4 * r;
		out[4 * r + 0] = (float)(row[0] * vox[0]);
		out[4 * r + 1] = (float)(row[1] * vox[1]);
		out[4 * r + 2] = (float)(row[2] * vox[2]);
		out[4 * r + 3] = (float)(row[3] + row[0] * o[0] + row[1] * o[1] + row[2] * o[2]);
	}
}

int cu_bp_voxel(cu_ctx *c, const float *proj, float *dvol, int z0, int z1, int first, int last,
		int exact, rc_err *err)
{
	int rc = 0;
	const size_t plane = (size_t)c->nx * (size_t)c->ny;
	const size_t view_b = c->view_elems * sizeof(float);
	if (first >= last) {
		if (!c->bp_add)
			CU_CHECK(cudaMemsetAsync(dvol, 0, plane * (size_t)(z1 - z0) * sizeof(float), c->ks),
				 "cudaMemsetAsync(volume slab)");
		goto out;
	}
	struct cudaPointerAttributes attr;
	CU_CHECK(cudaPointerGetAttributes(&attr, proj), "cudaPointerGetAttributes(projections)");
	/* pinned host or device memory: DMA straight from it */
	const int direct = attr.type != cudaMemoryTypeUnregistered;
	if (direct) {
		/* a device stack may come from kernels queued on ks (the backend's
		 * residual): the copies wait for everything queued there so far */
		CU_CHECK(cudaEventRecord(c->ready, c->ks), "cudaEventRecord(ready)");
		CU_CHECK(cudaStreamWaitEvent(c->cs, c->ready, 0), "cudaStreamWaitEvent(copies after kernels)");
	}
	rc_cuda_bp_batch bb;
	const int batch = c->plan.batch;
	for (int i = 0, b0 = first; b0 < last; i++, b0 += batch) {
		const int b = i & 1;
		bb.n = last - b0 < batch ? last - b0 : batch;
		for (int k = 0; k < bb.n; k++)
			bp_matrix(c->g, b0 + k, z0, bb.P[k]);
		const float *src = proj + (size_t)b0 * c->view_elems;
		if (!direct) {
			/* the staging buffer and the array were last used by batch
			 * i - 2, whose kernel must be done */
			CU_CHECK(cudaEventSynchronize(c->consumed[b]), "cudaEventSynchronize(batch buffer)");
			memcpy(c->stage[b], src, (size_t)bb.n * view_b);
			src = c->stage[b];
		} else {
			CU_CHECK(cudaStreamWaitEvent(c->cs, c->consumed[b], 0), "cudaStreamWaitEvent(copies)");
		}
		struct cudaMemcpy3DParms p = copy_params(src, c->nu, c->nv, bb.n, c->barr[b], 0);
		CU_CHECK(cudaMemcpy3DAsync(&p, c->cs), "cudaMemcpy3DAsync(projections -> layered texture)");
		CU_CHECK(cudaEventRecord(c->copied[b], c->cs), "cudaEventRecord(copied)");
		CU_CHECK(cudaStreamWaitEvent(c->ks, c->copied[b], 0), "cudaStreamWaitEvent(kernels)");
		CU_CHECK((cudaError_t)rc_cuda_launch_bp_voxel(c->btex[b][exact ? 1 : 0], &bb, dvol, c->nx,
							      c->ny, z1 - z0, c->bp_add || i > 0, exact, c->ks),
			 "launch of the voxel back projector");
		CU_CHECK(cudaEventRecord(c->consumed[b], c->ks), "cudaEventRecord(consumed)");
	}
out:
	return rc;
}

int cu_fp_rotate(cu_ctx *c, float *out, int first, int last, int exact, rc_err *err)
{
	int rc = 0;
	const rc_volume_desc *v = rc_geom_volume(c->g);
	const rc_detector_desc *d = rc_geom_detector(c->g);
	if (rc_geom_type_of(c->g) != RC_GEOM_CONE)
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "the rotation + projection forward projector needs a circular (cone) geometry");
	rc_cuda_rot_geom rg;
	memset(&rg, 0, sizeof rg);
	rg.nx = c->nx;
	rg.ny = c->ny;
	rg.nz = c->nz;
	rg.nr = c->rot_nr;
	rg.vr = c->rot_vr;
	rg.vox[0] = (float)v->vx;
	rg.vox[1] = (float)v->vy;
	rg.vox[2] = (float)v->vz;
	rg.ctr[0] = (float)v->cx;
	rg.ctr[1] = (float)v->cy;
	rg.ctr[2] = (float)v->cz;
	rg.D = (float)rc_geom_sid(c->g);
	rg.S = (float)rc_geom_sdd(c->g);
	rg.nu = d->nu;
	rg.nv = d->nv;
	rg.du = (float)d->du;
	rg.dv = (float)d->dv;
	rg.off_u = (float)d->offset_u;
	rg.off_v = (float)d->offset_v;
	for (int k = first; k < last; k++) {
		double th = rc_geom_view(c->g, k)->angle_rad;
		rg.cos_t = (float)cos(th);
		rg.sin_t = (float)sin(th);
		CU_CHECK((cudaError_t)rc_cuda_launch_rotate(c->vtex[exact ? 1 : 0], &rg, c->drot, exact, c->ks),
			 "launch of the rotation kernel");
		CU_CHECK((cudaError_t)rc_cuda_launch_project_rotated(c->drot, &rg,
								     out + (size_t)(k - first) * c->view_elems,
								     c->ks),
			 "launch of the projection kernel (rotated volume)");
	}
out:
	return rc;
}

#else
typedef int rc_engine_cuda_ctx_unused;
#endif /* RC_HAVE_CUDA */
