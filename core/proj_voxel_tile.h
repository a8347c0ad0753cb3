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
 * linear in x; 1/w comes from the value RC_BPV_LAG voxels earlier by two
 * Newton steps r <- r (2 - w r), which is division-free and vectorises with
 * lanes RC_BPV_LAG apart.  With e = RC_BPV_LAG |bw| / w the relative error
 * after two steps is about e^4; rows with e > RC_BPV_NEWTON_MAX (1.6e-7 at
 * the limit, below float rounding) or with w <= 0 anywhere use a per-voxel
 * division path instead (never the case for real C-arm or CT matrices).
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

#define RC_BPV_BLOCK 32 /* views per sweep of the volume: docs/cpu-engine.md */
#define RC_BPV_BY 4     /* tile: y rows ... */
#define RC_BPV_BZ 16    /* ... times z slices (row setup amortised over BZ) */
#define RC_BPV_LAG 16   /* Newton lag (one AVX-512 vector of floats) */
#define RC_BPV_NEWTON_MAX 0.02
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
	int nyb, nzb;       /* tiles along y and z */
	float *scratch;     /* scratch_floats per worker, 64-byte aligned */
	size_t scratch_floats;
	size_t nxp;         /* nx rounded up to 16 */
};

void rc_bpv_tile_baseline(const struct rc_bpv_job *J, long task, int worker);
void rc_bpv_tile_avx2(const struct rc_bpv_job *J, long task, int worker);
void rc_bpv_tile_avx512(const struct rc_bpv_job *J, long task, int worker);

#endif

#ifdef RC_BPV_TILE

static void RC_BPV_CAT(cone_rows, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, const double *P, double yw,
						 float *restrict fu, float *restrict v0, float *restrict dv,
						 float *restrict wt, int32_t *restrict col)
{
	double umax = J->nu;
	for (int x = 0; x < J->nx; x++) {
		double xw = J->x0[0] + x * J->s[0];
		double w = P[8] * xw + P[9] * yw + P[11];
		if (!(w > 0)) { /* behind the source: contributes nothing */
			fu[x] = 0;
			col[x] = 0;
			v0[x] = 0;
			dv[x] = 0;
			wt[x] = 0;
			continue;
		}
		double iw = 1.0 / w;
		double u = (P[0] * xw + P[1] * yw + P[3]) * iw;
		u = u < -1 ? -1 : u > umax ? umax : u;
		double fl = floor(u);
		col[x] = (int32_t)fl + 1;
		fu[x] = (float)(u - fl);
		v0[x] = (float)((P[4] * xw + P[5] * yw + P[7]) * iw + 1); /* +1: padded row */
		dv[x] = (float)(P[6] * iw);
		wt[x] = (float)(iw * iw);
	}
}

static void RC_BPV_CAT(cone_tile, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, int y0, int y1, int z0, int z1,
						 float *S)
{
	const int nx = J->nx, K = J->K, Wp = J->Wp;
	const size_t nxp = J->nxp;
	float *restrict acc = S;
	float *fu = acc + nxp, *v0 = fu + K * nxp, *dv = v0 + K * nxp, *wt = dv + K * nxp;
	int32_t *col = (int32_t *)(wt + K * nxp);
	const float vmax = (float)(J->nv + 1);
	for (int y = y0; y < y1; y++) {
		double yw = J->x0[1] + y * J->s[1];
		for (int k = 0; k < K; k++)
			RC_BPV_CAT(cone_rows, RC_BPV_SUFFIX)(J, J->P[k], yw, fu + k * nxp, v0 + k * nxp,
							     dv + k * nxp, wt + k * nxp, col + k * nxp);
		for (int z = z0; z < z1; z++) {
			const float zw = (float)(J->x0[2] + z * J->s[2]);
			for (int x = 0; x < nx; x++)
				acc[x] = 0;
			for (int k = 0; k < K; k++) {
				const float *restrict img = J->img + (size_t)k * J->img_stride;
				const float *restrict kfu = fu + k * nxp, *restrict kv0 = v0 + k * nxp;
				const float *restrict kdv = dv + k * nxp, *restrict kwt = wt + k * nxp;
				const int32_t *restrict kcol = col + k * nxp;
				for (int x = 0; x < nx; x++) {
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
			float *restrict out = J->vol + ((size_t)z * (size_t)J->ny + (size_t)y) * (size_t)nx;
			if (J->overwrite)
				for (int x = 0; x < nx; x++)
					out[x] = acc[x];
			else
				for (int x = 0; x < nx; x++)
					out[x] += acc[x];
		}
	}
}

/* One view, one (z, y) row of a general matrix: exact division per voxel
 * (the fallback for rows where the Newton path is not accurate). */
static void RC_BPV_CAT(gen_row_div, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, const float *img, double aw,
						   double bw, double au, double bu, double av, double bv,
						   float *restrict acc)
{
	const int Wp = J->Wp;
	for (int x = 0; x < J->nx; x++) {
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

static void RC_BPV_CAT(gen_tile, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, int y0, int y1, int z0, int z1,
						float *S)
{
	const int nx = J->nx, Wp = J->Wp;
	float *restrict acc = S;
	float *restrict iw = S + J->nxp;
	const float umax = (float)(J->nu + 1), vmax = (float)(J->nv + 1);
	for (int z = z0; z < z1; z++) {
		double zw = J->x0[2] + z * J->s[2];
		for (int y = y0; y < y1; y++) {
			double yw = J->x0[1] + y * J->s[1];
			for (int x = 0; x < nx; x++)
				acc[x] = 0;
			for (int k = 0; k < J->K; k++) {
				const double *P = J->P[k];
				const float *restrict img = J->img + (size_t)k * J->img_stride;
				double aw = P[8] * J->x0[0] + P[9] * yw + P[10] * zw + P[11], bw = P[8] * J->s[0];
				double au = P[0] * J->x0[0] + P[1] * yw + P[2] * zw + P[3], bu = P[0] * J->s[0];
				double av = P[4] * J->x0[0] + P[5] * yw + P[6] * zw + P[7], bv = P[4] * J->s[0];
				double wlo = fmin(aw, aw + bw * (nx - 1));
				if (!(wlo > 0) || RC_BPV_LAG * fabs(bw) > RC_BPV_NEWTON_MAX * wlo) {
					RC_BPV_CAT(gen_row_div, RC_BPV_SUFFIX)(J, img, aw, bw, au, bu, av, bv, acc);
					continue;
				}
				const float faw = (float)aw, fbw = (float)bw;
				const float fau = (float)au, fbu = (float)bu, fav = (float)av, fbv = (float)bv;
				int head = nx < RC_BPV_LAG ? nx : RC_BPV_LAG;
				for (int x = 0; x < head; x++)
					iw[x] = (float)(1.0 / (aw + bw * x));
				for (int x = RC_BPV_LAG; x < nx; x++) {
					float w = faw + fbw * (float)x, r = iw[x - RC_BPV_LAG];
					r = r * (2.0f - w * r);
					iw[x] = r * (2.0f - w * r);
				}
				for (int x = 0; x < nx; x++) {
					float r = iw[x];
					float u = (fau + fbu * (float)x) * r + 1.0f, v = (fav + fbv * (float)x) * r + 1.0f;
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
			float *restrict out = J->vol + ((size_t)z * (size_t)J->ny + (size_t)y) * (size_t)nx;
			if (J->overwrite)
				for (int x = 0; x < nx; x++)
					out[x] = acc[x];
			else
				for (int x = 0; x < nx; x++)
					out[x] += acc[x];
		}
	}
}

void RC_BPV_TILE(const struct rc_bpv_job *J, long task, int worker)
{
	int yb = (int)(task % J->nyb), zb = (int)(task / J->nyb);
	int y0 = yb * RC_BPV_BY, y1 = y0 + RC_BPV_BY < J->ny ? y0 + RC_BPV_BY : J->ny;
	int z0 = zb * RC_BPV_BZ, z1 = z0 + RC_BPV_BZ < J->nz ? z0 + RC_BPV_BZ : J->nz;
	float *S = J->scratch + (size_t)worker * J->scratch_floats;
	if (J->cone)
		RC_BPV_CAT(cone_tile, RC_BPV_SUFFIX)(J, y0, y1, z0, z1, S);
	else
		RC_BPV_CAT(gen_tile, RC_BPV_SUFFIX)(J, y0, y1, z0, z1, S);
}

#endif
