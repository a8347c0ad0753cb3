/*
 * proj_cyl: the voxel-driven back projection of a cone geometry with a
 * cylindrical (curved) detector, RC_BP_VOXEL's on that geometry:
 *   f(x) = sum_k  p_k(u_k(x), v_k(x)) / L_k(x)^2,
 * bilinear in the detector with zero outside, (u, v) the cylinder's pixel
 * indices and L the distance from the source in the plane of rotation
 * (rc_geom_cyl_project): FDK's back projection for an equiangular detector
 * (algo_fdk.c) and SART's.  The ray-casting pair needs nothing of its own:
 * it reads every ray from rc_geom_ray, which knows the cylinder.
 *
 * u and L depend on a voxel's (x, y) only and v is linear in z along a
 * column with slope S / (L dv), as on a flat cone detector u and w are and
 * v is.  So the engine runs the flat detector's tiles (proj_voxel.c,
 * proj_voxel_tile.h: padded transposed view blocks, SIMD column loops per
 * ISA) and only the per-(view, column) set-up differs: rc_bpv_cyl_rows,
 * one atan per column and view (branch-free, vectorised).
 *
 * rc_bp_cyl is the plain version in double (one task per voxel row, views
 * transposed first), the reference the tiles are tested against
 * (test_detectors).
 */
#include "projectors/proj_atan.h"
#include "projectors/proj_cpu.h"
#include "projectors/proj_voxel_tile.h"

#include <math.h>
#include <stdlib.h>

void rc_bpv_cyl_setup(const rc_geom *g, int k0, int K, struct rc_bpv_job *J)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	const double S = rc_geom_sdd(g);
	J->cyl = 1;
	J->cyl_su = S / d->du;
	J->cyl_sv = S / d->dv;
	J->cyl_cu = (d->nu - 1) / 2.0 - d->offset_u / d->du;
	J->cyl_cv = (d->nv - 1) / 2.0 - d->offset_v / d->dv + 1;
	for (int k = 0; k < K; k++) {
		const rc_view *vw = rc_geom_view(g, k0 + k);
		double *c = J->cyl_view[k];
		c[0] = cos(vw->angle_rad);
		c[1] = sin(vw->angle_rad);
		c[2] = vw->src[0];
		c[3] = vw->src[1];
		c[4] = vw->src[2];
	}
}

/* rc_geom_cyl_project's u, v and L per column, in the padded image's
 * indices, laid out as the flat cone's cone_rows (proj_voxel_tile.h).
 * Compiled for AVX-512, AVX2 and baseline x86-64, the loader picking the
 * widest the CPU has (GCC's target_clones); no contraction into FMA (ISO C
 * mode), so each gives the same bits. */
#if defined(__GNUC__) && !defined(__clang__)
/* clang 14 (the fuzz build) emits no resolver for a target_clones function
 * called from other files: there it is the baseline alone */
#define CYL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CYL_CLONES
#endif
CYL_CLONES void rc_bpv_cyl_rows(const struct rc_bpv_job *J, int k, double yw, int x0, int n, int nzt, float zw0,
		     float *restrict fu, float *restrict v0, float *restrict dv, float *restrict wt,
		     int32_t *restrict col, int32_t *restrict za, int32_t *restrict zb)
{
	const double *c = J->cyl_view[k];
	const double ct = c[0], st = c[1], py = yw - c[3];
	const double umax = J->nu, vmax = J->nv + 1, zinv = 1.0 / J->s[2];
	for (int i = 0; i < n; i++) {
		double px = J->x0[0] + (x0 + i) * J->s[0] - c[2];
		double depth = -ct * px - st * py, side = -st * px + ct * py, l = sqrt(depth * depth + side * side);
		/* depth > 0: the detector spans under +-90 degrees of fan
		 * (rc_geom_new), so a point level with or behind the source
		 * misses it */
		double u = rc_atan_bf(side / (depth > 0 ? depth : 1.0)) * J->cyl_su + J->cyl_cu;
		int ok = (depth > 0) & (u > -1) & (u < umax);
		u = ok ? u : 0;
		/* floor by truncation (u > -1; floor is a call without SSE4.1) */
		double fl = (double)((int)(u + 1.0) - 1), il = 1.0 / (ok ? l : 1.0);
		double slope = J->cyl_sv * il; /* dv/dz */
		double v = (0 - c[4]) * slope + J->cyl_cv;
		/* z where v crosses 0 and vmax, one voxel of margin each side */
		double z1 = (0 - v) / slope, z2 = (vmax - v) / slope;
		double lo = ((z1 < z2 ? z1 : z2) - zw0) * zinv - 1, hi = ((z1 < z2 ? z2 : z1) - zw0) * zinv + 2;
		lo = lo < 0 ? 0 : lo > nzt ? nzt : lo;
		hi = hi < 0 ? 0 : hi > nzt ? nzt : hi;
		col[i] = ok ? (int32_t)fl + 1 : 0;
		fu[i] = (float)(u - fl);
		v0[i] = (float)v;
		dv[i] = (float)slope;
		wt[i] = ok ? (float)(il * il) : 0.0f;
		za[i] = ok ? (int32_t)lo : 0;
		zb[i] = ok ? (int32_t)hi : 0;
	}
}

struct cyl_job {
	const rc_geom *g;
	const float *proj;
	float *vol;
	int first, last;
	double *acc;  /* per worker: nx * nz sums, [ix][iz] */
	float *tr;    /* views first..last transposed, [k - first][u][v] */
};

/* View k transposed: a voxel column reads two contiguous detector columns. */
static void cyl_transpose(void *ctx, long task, int worker)
{
	(void)worker;
	const struct cyl_job *J = ctx;
	const rc_detector_desc *d = rc_geom_detector(J->g);
	int k = J->first + (int)task;
	const float *in = J->proj + rc_geom_row_offset(J->g, k, 0);
	float *out = J->tr + (size_t)task * (size_t)d->nu * (size_t)d->nv;
	for (int j = 0; j < d->nv; j++)
		for (int i = 0; i < d->nu; i++)
			out[(size_t)i * (size_t)d->nv + (size_t)j] = in[(size_t)j * (size_t)d->nu + (size_t)i];
}

/* One voxel row (iy) of every slice: per view, u and L of each voxel
 * column (x, y) once (they do not depend on z), then v linear in z down
 * the column; sums in double in acc until the last view. */
static void cyl_rows(void *ctx, long task, int worker)
{
	const struct cyl_job *J = ctx;
	const rc_geom *g = J->g;
	const rc_volume_desc *v = rc_geom_volume(g);
	int iy = (int)task;
	size_t n = (size_t)v->nz * (size_t)v->nx;
	double *acc = J->acc + (size_t)worker * n;
	for (size_t i = 0; i < n; i++)
		acc[i] = 0.0;
	const rc_detector_desc *d = rc_geom_detector(g);
	const double nvd = d->nv;
	const size_t nv = (size_t)d->nv;
	for (int k = J->first; k < J->last; k++) {
		const float *view = J->tr + (size_t)(k - J->first) * (size_t)d->nu * nv;
		for (int ix = 0; ix < v->nx; ix++) {
			double X[3], u, v0, L, v1;
			rc_volume_voxel_pos(v, ix, iy, 0, X);
			rc_geom_cyl_project(g, k, X, &u, &v0, &L);
			X[2] += v->vz;
			rc_geom_cyl_project(g, k, X, &u, &v1, &L);
			double fu0 = floor(u);
			if (!(fu0 >= -1 && fu0 < d->nu))
				continue;
			/* the column's two detector columns, a missing one weighted 0 */
			int i0 = (int)fu0, ia = i0 >= 0 ? i0 : i0 + 1, ib = i0 + 1 < d->nu ? i0 + 1 : i0;
			double a = u - fu0, wa = i0 >= 0 ? 1.0 - a : 0.0, wb = i0 + 1 < d->nu ? a : 0.0;
			const float *ca = view + (size_t)ia * nv, *cb = view + (size_t)ib * nv;
			double dvz = v1 - v0, w = 1.0 / (L * L);
			double *col = acc + (size_t)ix * (size_t)v->nz;
			for (int iz = 0; iz < v->nz; iz++) {
				/* floor by truncation above -1 (floor is a call without SSE4.1) */
				double vv = v0 + iz * dvz;
				if (!(vv >= -1.0 && vv < nvd))
					continue;
				int j = (int)(vv + 1.0) - 1;
				double b = vv - j, sum = 0.0;
				if (j >= 0)
					sum += (1.0 - b) * (wa * ca[j] + wb * cb[j]);
				if (j + 1 < d->nv)
					sum += b * (wa * ca[j + 1] + wb * cb[j + 1]);
				col[iz] += w * sum;
			}
		}
	}
	for (int iz = 0; iz < v->nz; iz++) {
		float *out = J->vol + ((size_t)iz * (size_t)v->ny + (size_t)iy) * (size_t)v->nx;
		for (int ix = 0; ix < v->nx; ix++)
			out[ix] = (float)acc[(size_t)ix * (size_t)v->nz + (size_t)iz];
	}
}

int rc_bp_cyl(const rc_geom *g, rc_pool *pool, const float *proj, float *vol, int first, int last, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	int threads = rc_pool_threads(pool);
	double *acc = malloc(sizeof(double) * (size_t)threads * (size_t)v->nz * (size_t)v->nx);
	float *tr = malloc(sizeof(float) * (size_t)(last - first > 0 ? last - first : 1) * (size_t)d->nu * (size_t)d->nv);
	if (!acc || !tr) {
		free(acc);
		free(tr);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the cylinder back projection's sums and views");
	}
	struct cyl_job J = { g, proj, vol, first, last, acc, tr };
	rc_pool_run(pool, (long)(last - first), cyl_transpose, &J);
	rc_pool_run(pool, (long)v->ny, cyl_rows, &J);
	free(acc);
	free(tr);
	return 0;
}
