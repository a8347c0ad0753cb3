/*
 * proj_zfast: the volume copied z-fastest ([y][x][z]) for the voxel-driven
 * forward projectors (proj_splat.c, proj_footprint.c), which read voxel
 * columns along z: read with the volume's stride (a power of two, often)
 * every voxel of a column maps to one L1 set and misses (the strided read
 * was 2x slower).  A buffer the projectors can do without: kept only
 * within rc_proj_keep_reserve's limit.
 */
#include "projectors/proj_cpu.h"

#include <stdlib.h>

struct zfast_ctx {
	const rc_volume_desc *v;
	const float *vol;
	float *xt;
};

/* Row iy of the volume into xt, 16 z-planes at a time. */
static void transpose_task(void *arg, long iy, int worker)
{
	const struct zfast_ctx *c = arg;
	(void)worker;
	const size_t nx = (size_t)c->v->nx, nz = (size_t)c->v->nz, plane = nx * (size_t)c->v->ny;
	float *out = c->xt + (size_t)iy * nx * nz;
	const float *in = c->vol + (size_t)iy * nx;
	for (size_t z0 = 0; z0 < nz; z0 += 16)
		for (size_t ix = 0; ix < nx; ix++)
			for (size_t z = z0; z < nz && z < z0 + 16; z++)
				out[ix * nz + z] = in[z * plane + ix];
}

const float *rc_zfast_fill(rc_zfast *z, const rc_volume_desc *v, const float *vol, rc_pool *pool)
{
	if (!z->xt && !z->failed) {
		size_t bytes = rc_volume_count(v) * sizeof(float);
		if (rc_proj_keep_reserve(bytes, "RECOND_SPLAT_COPY_MAX_MB")) {
			z->xt = malloc(bytes);
			if (z->xt)
				z->bytes = bytes;
			else
				rc_proj_keep_release(bytes);
		}
		z->failed = !z->xt;
	}
	if (!z->xt)
		return NULL;
	struct zfast_ctx c = { v, vol, z->xt };
	rc_pool_run(pool, v->ny, transpose_task, &c);
	return z->xt;
}

void rc_zfast_release(rc_zfast *z)
{
	if (z->xt)
		rc_proj_keep_release(z->bytes);
	free(z->xt);
	*z = (rc_zfast){ 0 };
}

float *rc_volume_z_table(const rc_volume_desc *v)
{
	float *zw = malloc((size_t)v->nz * sizeof(float));
	for (int z = 0; zw && z < v->nz; z++) {
		double X[3];
		rc_volume_voxel_pos(v, 0, 0, z, X);
		zw[z] = (float)X[2];
	}
	return zw;
}
