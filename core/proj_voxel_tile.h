/*
 * proj_voxel_tile: the inner loops of the voxel-driven back projector
 * (proj_voxel.c), included once per ISA file with RC_BPV_TILE naming the
 * function, so the same C is compiled for baseline x86-64, AVX2 and AVX-512
 * and the compiler vectorises each (gathers for the four detector reads).
 *
 * One call does one tile: RC_BPV_BY rows y times RC_BPV_BZ slices z of the
 * volume, all x, for the block of K views in job->img.  Loops run x fastest.
 *
 * Cone path (P[2] = P[10] = 0 for every view of the block): w and u depend on
 * (x, y) only, so per (view, y) one row pass computes 1/w, the weight 1/w^2,
 * the column and fraction of u, and v = v0 + z * dv with v0, dv already
 * divided by w; the per-voxel loop is then FMAs, a clamp, a truncation and
 * four gathers, no division.  Those rows are recomputed per tile (once per
 * RC_BPV_BZ slices), so their divisions cost 1/RC_BPV_BZ of an update each.
 *
 * General path (any 3x4 matrix): per (view, z, y) row w(x) = aw + bw x is
 * linear in x.  One division gives r0 = 1/w at the row's centre; three
 * Newton steps r <- r (2 - w r) give 1/w at every voxel without division,
 * vectorised.  With d = |w - w_centre| / w_centre <= RC_BPV_NEWTON_MAX
 * (0.1) the relative error is d^8 <= 1e-8, below float rounding; tile rows
 * are RC_BPV_BX voxels, so d is about 16 |bw| / w, 0.01 for RabbitCT-like
 * C-arms.  Rows beyond that bound or with w <= 0 take a per-voxel division
 * path (never the case for real C-arm or CT matrices).
 *
 * Images are padded (one zero column/row before, two after) and u, v are
 * clamped to [-1, n], which makes bilinear interpolation with zero outside
 * the detector exact without any test per voxel.
 */
#ifndef RC_PROJ_VOXEL_JOB
#define RC_PROJ_VOXEL_JOB

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RC_BPV_BLOCK 32 /* views per sweep of the volume: docs/cpu-engine.md */
#ifndef RC_BPV_BX       /* tile of BX x BY x BZ voxels: docs/cpu-engine.md */
#define RC_BPV_BX 32
#define RC_BPV_BY 32
#define RC_BPV_BZ 32
#endif
#define RC_BPV_NEWTON_MAX 0.1 /* |w - w_centre| / w_centre along a tile row */
#define RC_BPV_CAT2(a, b) a##_##b
#define RC_BPV_CAT(a, b) RC_BPV_CAT2(a, b)

struct rc_bpv_job {
	int nx, ny, nz, nu, nv;
	int K;              /* views in this block */
	int Wp;             /* padded image width nu + 3; height nv + 3 */
	size_t img_stride;  /* Wp * (nv + 3) */
	const float *img;   /* K padded images, pixel (i, j) at (j+1)*Wp + i+1 */
	double P[RC_BPV_BLOCK][12];
	int cone;           /* every view of the block has P[2] = P[10] = 0 */
	int overwrite;      /* first block of a call: vol = sum, else vol += sum */
	float *vol;
	double x0[3], s[3]; /* world position of voxel 0, voxel size */
	int nxb, nyb, nzb;  /* tiles along x, y and z */
	float *scratch;     /* scratch_floats per worker, 64-byte aligned */
	size_t scratch_floats;
};

void rc_bpv_tile_baseline(const struct rc_bpv_job *J, long task, int worker);
void rc_bpv_tile_avx2(const struct rc_bpv_job *J, long task, int worker);
void rc_bpv_tile_avx512(const struct rc_bpv_job *J, long task, int worker);

#endif

#ifdef RC_BPV_TILE

/* Row set-up of the cone path for view P, row y, voxels x0..x0+n-1. */
static void RC_BPV_CAT(cone_rows, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, const double *P, double yw, int x0,
						 int n, float *restrict fu, float *restrict v0, float *restrict dv,
						 float *restrict wt, int32_t *restrict col)
{
	double umax = J->nu;
	for (int i = 0; i < n; i++) {
		double xw = J->x0[0] + (x0 + i) * J->s[0];
		double w = P[8] * xw + P[9] * yw + P[11];
		if (!(w > 0)) { /* behind the source: contributes nothing */
			fu[i] = 0;
			col[i] = 0;
			v0[i] = 0;
			dv[i] = 0;
			wt[i] = 0;
			continue;
		}
		double iw = 1.0 / w;
		double u = (P[0] * xw + P[1] * yw + P[3]) * iw;
		u = u < -1 ? -1 : u > umax ? umax : u;
		double fl = floor(u);
		col[i] = (int32_t)fl + 1;
		fu[i] = (float)(u - fl);
		v0[i] = (float)((P[4] * xw + P[5] * yw + P[7]) * iw + 1); /* +1: padded row */
		dv[i] = (float)(P[6] * iw);
		wt[i] = (float)(iw * iw);
	}
}

/* The per-voxel loop of the cone path: one view, one (y, z) row.  A
 * function of its own with restrict arguments, so that GCC proves the
 * loads independent of acc and vectorises it (four gathers). */
static inline void RC_BPV_CAT(cone_row, RC_BPV_SUFFIX)(int n, float *restrict acc, const float *restrict img,
						       const float *restrict kv0, const float *restrict kdv,
						       const float *restrict kfu, const float *restrict kwt,
						       const int32_t *restrict kcol, float zw, float vmax, int Wp)
{
	for (int x = 0; x < n; x++) {
		float v = kv0[x] + zw * kdv[x];
		v = v < 0.0f ? 0.0f : v;
		v = v > vmax ? vmax : v;
		int32_t iv = (int32_t)v;
		float fv = v - (float)iv;
		int32_t idx = iv * Wp + kcol[x];
		float a = img[idx], b = img[idx + 1];
		float c = img[idx + Wp], d = img[idx + Wp + 1];
		float top = a + kfu[x] * (b - a), bot = c + kfu[x] * (d - c);
		acc[x] += kwt[x] * (top + fv * (bot - top));
	}
}

/* The per-voxel loop of the general path: w = aw + bw x, 1/w by three
 * Newton steps r <- r (2 - w r) from the row centre's 1/w (see the top). */
static inline void RC_BPV_CAT(gen_row, RC_BPV_SUFFIX)(int n, float *restrict acc, const float *restrict img,
						      float aw, float bw, float r0, float au, float bu, float av,
						      float bv, float umax, float vmax, int Wp)
{
	for (int x = 0; x < n; x++) {
		float w = aw + bw * (float)x, r = r0;
		r = r * (2.0f - w * r);
		r = r * (2.0f - w * r);
		r = r * (2.0f - w * r);
		float u = (au + bu * (float)x) * r + 1.0f, v = (av + bv * (float)x) * r + 1.0f;
		u = u < 0.0f ? 0.0f : u;
		u = u > umax ? umax : u;
		v = v < 0.0f ? 0.0f : v;
		v = v > vmax ? vmax : v;
		int32_t iu = (int32_t)u, iv = (int32_t)v;
		float fu = u - (float)iu, fv = v - (float)iv;
		int32_t idx = iv * Wp + iu;
		float a = img[idx], b = img[idx + 1];
		float c = img[idx + Wp], d = img[idx + Wp + 1];
		float top = a + fu * (b - a), bot = c + fu * (d - c);
		acc[x] += r * r * (top + fv * (bot - top));
	}
}

/* One view, one (z, y) row of a general matrix, exact division per voxel
 * (the fallback for rows where the Newton path is not accurate). */
static void RC_BPV_CAT(gen_row_div, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, const float *img, int n, double aw,
						   double bw, double au, double bu, double av, double bv,
						   float *restrict acc)
{
	const int Wp = J->Wp;
	for (int x = 0; x < n; x++) {
		double w = aw + bw * x;
		if (!(w > 0))
			continue;
		double iw = 1.0 / w;
		double u = (au + bu * x) * iw + 1, v = (av + bv * x) * iw + 1;
		u = u < 0 ? 0 : u > J->nu + 1 ? J->nu + 1 : u;
		v = v < 0 ? 0 : v > J->nv + 1 ? J->nv + 1 : v;
		int iu = (int)u, iv = (int)v;
		float fu = (float)(u - iu), fv = (float)(v - iv);
		const float *p = img + (size_t)iv * Wp + iu;
		float top = p[0] + fu * (p[1] - p[0]), bot = p[Wp] + fu * (p[Wp + 1] - p[Wp]);
		acc[x] += (float)(iw * iw) * (top + fv * (bot - top));
	}
}

/* General path, view k: every (y, z) row of the tile. */
static void RC_BPV_CAT(gen_view, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, int k, int x0, int nxt, int y0, int y1,
						int z0, int z1, float *acc)
{
	const double *P = J->P[k];
	const float *restrict img = J->img + (size_t)k * J->img_stride;
	const float umax = (float)(J->nu + 1), vmax = (float)(J->nv + 1);
	double xs = J->x0[0] + x0 * J->s[0];
	for (int z = z0; z < z1; z++) {
		double zw = J->x0[2] + z * J->s[2];
		for (int y = y0; y < y1; y++) {
			double yw = J->x0[1] + y * J->s[1];
			float *row = acc + ((size_t)(z - z0) * (y1 - y0) + (y - y0)) * RC_BPV_BX;
			double aw = P[8] * xs + P[9] * yw + P[10] * zw + P[11], bw = P[8] * J->s[0];
			double au = P[0] * xs + P[1] * yw + P[2] * zw + P[3], bu = P[0] * J->s[0];
			double av = P[4] * xs + P[5] * yw + P[6] * zw + P[7], bv = P[4] * J->s[0];
			double wc = aw + bw * (nxt - 1) / 2.0, dev = fabs(bw) * (nxt - 1) / 2.0;
			if (!(wc > 0) || dev > RC_BPV_NEWTON_MAX * wc) {
				RC_BPV_CAT(gen_row_div, RC_BPV_SUFFIX)(J, img, nxt, aw, bw, au, bu, av, bv, row);
				continue;
			}
			RC_BPV_CAT(gen_row, RC_BPV_SUFFIX)(nxt, row, img, (float)aw, (float)bw, (float)(1.0 / wc),
							   (float)au, (float)bu, (float)av, (float)bv, umax, vmax, J->Wp);
		}
	}
}

void RC_BPV_TILE(const struct rc_bpv_job *J, long task, int worker)
{
	/* task -> (xb, yb, zb), x fastest: neighbouring tasks share detector rows */
	int xb = (int)(task % J->nxb), yb = (int)(task / J->nxb % J->nyb), zb = (int)(task / J->nxb / J->nyb);
	int x0 = xb * RC_BPV_BX, x1 = x0 + RC_BPV_BX < J->nx ? x0 + RC_BPV_BX : J->nx;
	int y0 = yb * RC_BPV_BY, y1 = y0 + RC_BPV_BY < J->ny ? y0 + RC_BPV_BY : J->ny;
	int z0 = zb * RC_BPV_BZ, z1 = z0 + RC_BPV_BZ < J->nz ? z0 + RC_BPV_BZ : J->nz;
	const int nxt = x1 - x0, nyt = y1 - y0, Wp = J->Wp;
	float *S = J->scratch + (size_t)worker * J->scratch_floats;
	/* scratch: acc[z][y][BX] of the tile, then the row buffers */
	float *acc = S;
	float *fu = acc + (size_t)RC_BPV_BY * RC_BPV_BZ * RC_BPV_BX;
	float *v0 = fu + RC_BPV_BX, *dv = v0 + RC_BPV_BX, *wt = dv + RC_BPV_BX;
	int32_t *col = (int32_t *)(wt + RC_BPV_BX);
	memset(acc, 0, sizeof(float) * RC_BPV_BY * RC_BPV_BZ * RC_BPV_BX);
	const float vmax = (float)(J->nv + 1);
	/* Views outermost: the tile's sums stay in L1/L2 while one view's
	 * detector rows for the tile are read, so the caches hold one view's
	 * footprint of the tile, not the block's. */
	for (int k = 0; k < J->K; k++) {
		if (!J->cone) {
			RC_BPV_CAT(gen_view, RC_BPV_SUFFIX)(J, k, x0, nxt, y0, y1, z0, z1, acc);
			continue;
		}
		const float *restrict img = J->img + (size_t)k * J->img_stride;
		for (int y = y0; y < y1; y++) {
			RC_BPV_CAT(cone_rows, RC_BPV_SUFFIX)(J, J->P[k], J->x0[1] + y * J->s[1], x0, nxt, fu, v0, dv, wt, col);
			for (int z = z0; z < z1; z++) {
				float zw = (float)(J->x0[2] + z * J->s[2]);
				float *row = acc + ((size_t)(z - z0) * nyt + (y - y0)) * RC_BPV_BX;
				RC_BPV_CAT(cone_row, RC_BPV_SUFFIX)(nxt, row, img, v0, dv, fu, wt, col, zw, vmax, Wp);
			}
		}
	}
	for (int z = z0; z < z1; z++)
		for (int y = y0; y < y1; y++) {
			const float *restrict row = acc + ((size_t)(z - z0) * nyt + (y - y0)) * RC_BPV_BX;
			float *restrict out = J->vol + ((size_t)z * (size_t)J->ny + (size_t)y) * (size_t)J->nx + x0;
			if (J->overwrite)
				memcpy(out, row, (size_t)nxt * sizeof(float));
			else
				for (int x = 0; x < nxt; x++)
					out[x] += row[x];
		}
}

#endif
