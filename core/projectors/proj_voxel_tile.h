/*
 * proj_voxel_tile: the inner loops of the voxel-driven back projector
 * (proj_voxel.c), included once per ISA file with RC_BPV_TILE naming the
 * function, so the same C is compiled for baseline x86-64, AVX2 and AVX-512.
 *
 * One call does one tile of RC_BPV_BX x by x bz voxels (bz: the whole
 * depth up to RC_BPV_BZMAX, so that the per-column set-up is paid once per
 * column, not once per slab) for the block of K views in job->img.  Images
 * are stored transposed (column-major: v fastest) and padded (one zero column/row before, two after), and u, v are
 * clamped to [-1, n], which makes bilinear interpolation with zero outside the
 * detector exact without any test per voxel.
 *
 * Column layout (every view of the call a cone view or close to one,
 * proj_voxel.c): the sums of the tile are kept z-fastest ([y][x][z]) and
 * reach the volume once per call (or per block, without the tiles buffer).
 * Cone views (P[2] = P[10] = 0): u and w depend on (x, y) only, so a voxel
 * column along z reads one pair of detector columns, at v = v0 + z dv.  Per
 * (view, y) one pass computes, for every x, 1/w, the weight 1/w^2, the
 * column and fraction of u, and v0, dv already divided by w; then z runs
 * innermost over contiguous detector memory.  Views close to a cone (a
 * C-arm's matrices) run along the same columns with w, u w and v w linear
 * in z (gen_cols, gen_col).  An ISA file may define RC_BPV_CONE_COLUMN and
 * RC_BPV_GEN_COLUMN to replace the portable column loops (no gathers: see
 * proj_voxel_avx512.c, proj_voxel_avx2.c), and RC_BPV_CONE_ROWS to replace
 * cone_rows.
 *
 * Row layout (any other 3x4 matrix): per (view, z, y) row w(x) = aw + bw x is
 * linear in x.  One division gives r0 = 1/w at the row's centre; three
 * Newton steps r <- r (2 - w r) give 1/w at every voxel without division,
 * vectorised.  With d = |w - w_centre| / w_centre <= RC_BPV_NEWTON_MAX
 * (0.1) the relative error is d^8 <= 1e-8, below float rounding; tile rows
 * are RC_BPV_BX voxels, so d is at most (RC_BPV_BX - 1) |bw| / (2 w), with
 * |bw| / w the relative change of depth per voxel (well under 1 %
 * for C-arm and CT matrices).  Rows beyond that bound or with w <= 0 take a
 * per-voxel division path.
 */
#ifndef RC_PROJ_VOXEL_JOB
#define RC_PROJ_VOXEL_JOB

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "projectors/proj_cpu.h"

#define RC_BPV_BX 32 /* tile of BX x by x bz voxels: docs/cpu-engine.md */
#define RC_BPV_BYMAX 64 /* by: 16, 32 or 64 (proj_voxel.c tile_rows) */
#define RC_BPV_BZMAX 1024 /* deepest tile: bounds the per-worker scratch */
#define RC_BPV_TAIL 128       /* floats after the last column: window over-reads */
/* Slices ahead that the write-back of sums added to the volume (a block
 * of a call without kept tiles: an out-of-core slab's chunk of views)
 * prefetches: 7-10 % less time in the tile function at make bench-large
 * --scale 4 (docs/server.md "Speed") */
#define RC_BPV_PREFETCH_Z 16
#define RC_BPV_NEWTON_MAX 0.1 /* |w - w_centre| / w_centre along a tile row */
#define RC_BPV_CAT2(a, b) a##_##b
#define RC_BPV_CAT(a, b) RC_BPV_CAT2(a, b)

struct rc_bpv_job {
	int nx, ny, nz, nu, nv;
	int K;              /* views in this block */
	int Hs;             /* column stride of a padded image: nv + 3 rounded up to 16 */
	size_t img_stride;  /* Hs * (nu + 3) + RC_BPV_TAIL */
	const float *img;   /* K padded transposed images, pixel (i, j) at (i+1)*Hs + j+1 */
	double P[RC_BPV_BLOCK][12];
	int sorted;         /* column layout: columns sorted by detector column (col_order) */
	int cone;           /* column layout: every view of the call is cone-like
			     * (P[2] = P[10] = 0, or near enough: proj_voxel.c) */
	int overwrite;      /* first block of a call: vol = sum, else vol += sum */
	int hat;            /* cone views weigh with the splat's footprint
			     * (proj_cpu.h; RC_BP_SPLAT), not bilinear */
	float *tiles;       /* NULL, or every tile's sums kept across the call's blocks */
	int first_block, last_block; /* with tiles: zero the sums / write them out */
	float *vol;
	double x0[3], s[3]; /* world position of voxel 0, voxel size */
	int by;             /* tile rows, <= RC_BPV_BYMAX */
	int bz;             /* tile depth: min(nz, RC_BPV_BZMAX) */
	int nxb, nyb, nzb;  /* tiles along x, y and z */
	float *scratch;     /* scratch_floats per worker, 64-byte aligned */
	size_t scratch_floats;
	/* a cone with a cylindrical detector (proj_cyl.c): every view takes the
	 * column layout, its columns set up by rc_bpv_cyl_rows from these */
	int cyl;
	double cyl_su, cyl_sv;        /* S / du, S / dv (pixels per radian, per unit of z / L) */
	double cyl_cu, cyl_cv;        /* u, v of the central ray: (n - 1) / 2 - offset / d, v padded (+ 1) */
	double cyl_view[RC_BPV_BLOCK][5]; /* per view: cos, sin of the angle, the source's x, y, z */
};

/* Floats of one tile's sums (RC_BPV_TILE_FLOATS(by, bz) per task in tiles). */
#define RC_BPV_TILE_FLOATS(by, bz) ((size_t)RC_BPV_BX * (size_t)(by) * (size_t)(bz))

/* Scratch floats per worker for tiles bz deep: the tile's sums, seven
 * arrays of per-column set-up, the column order, z positions. */
#define RC_BPV_SCRATCH_FLOATS(by, bz) ((size_t)RC_BPV_BX * (size_t)(by) * ((size_t)(bz) + 8) + (size_t)(bz) + 16)
#define RC_BPV_SORT_BINS 1024 /* bins of a tile's counting sort by detector column */
/* A tile whose detector footprint in a view (the centre tile's, padded:
 * proj_voxel.c) is at most this many bytes runs its columns in (y, x)
 * order, unsorted: the footprint stays in L1 in any order, and the sort's
 * three passes per view cost more than they save.  29-slice slabs of a
 * 512^2 x 256 volume from 512 x 384 views (make bench-large --scale 4; 9 KiB)
 * spent 14 % of their back projection sorting, 86-slice ones (26 KiB) ran
 * 4 % faster unsorted; whole volumes of 128 slices and more (40 KiB at
 * 256^2 x 128 there, 100s of KiB at RabbitCT's 5 pixels a voxel) stay
 * sorted (docs/server.md "Out of core") */
#define RC_BPV_UNSORTED_BYTES (32u << 10)

/* The vector column loops (proj_voxel_avx2.c, proj_voxel_avx512.c) compute
 * v = fma(zw, dv, v0) and do not clamp it.  This drops the voxels at both
 * ends of a column whose v lies outside [0, vmax]: clamped, they would add
 * exactly zero, and with dv >= 0 v grows with z (fma is monotone), so they
 * are all at the ends.  Returns the voxels left; *zw and *acc move past the
 * dropped first ones. */
static inline int rc_bpv_drop_off_detector(int n, const float *restrict *zw, float *restrict *acc, float v0, float dv,
					   float vmax)
{
	while (n > 0 && !(fmaf((*zw)[0], dv, v0) >= 0.0f)) {
		++*zw;
		++*acc;
		n--;
	}
	while (n > 0 && !(fmaf((*zw)[n - 1], dv, v0) <= vmax))
		n--;
	return n;
}

/* The cylinder (proj_cyl.c): rc_bpv_cyl_setup fills J's cyl fields for
 * views k0 .. k0 + K - 1; rc_bpv_cyl_rows gives cone_rows's outputs for view
 * k of the block: u = atan2(side, depth) S / du and v linear in z with
 * slope S / (L dv), weight 1 / L^2, L the distance from the source in the
 * plane of rotation.  In double, vectorised: one atan per column and view, paid
 * once per view for the tile's whole depth. */
void rc_bpv_cyl_setup(const rc_geom *g, int k0, int K, struct rc_bpv_job *J);
void rc_bpv_cyl_rows(const struct rc_bpv_job *J, int k, double yw, int x0, int n, int nzt, float zw0,
		     float *restrict fu, float *restrict v0, float *restrict dv, float *restrict wt,
		     int32_t *restrict col, int32_t *restrict za, int32_t *restrict zb);

void rc_bpv_tile_baseline(const struct rc_bpv_job *J, long task, int worker);
void rc_bpv_tile_avx2(const struct rc_bpv_job *J, long task, int worker);
void rc_bpv_tile_avx512(const struct rc_bpv_job *J, long task, int worker);

#endif

#ifdef RC_BPV_TILE

#ifndef RC_BPV_CONE_ROWS
/* Row set-up of the cone path for view P, row y, voxels x0..x0+n-1: the
 * padded column, its fraction, v at z = 0 (padded), dv/dz, 1/w^2, and the
 * tile's slices [za, zb) whose voxels land on the detector (v in (0, vmax)
 * padded; one voxel of margin each side).  Voxels behind the source or off
 * the detector's columns get za = zb = 0: they contribute nothing.  Written
 * without branches so that it vectorises. */
static void RC_BPV_CAT(cone_rows, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, const double *P, double yw, int x0,
						 int n, int nzt, float zw0, float *restrict fu, float *restrict v0,
						 float *restrict dv, float *restrict wt, int32_t *restrict col,
						 int32_t *restrict za, int32_t *restrict zb)
{
	const double umax = J->nu, vmax = J->nv + 1, zinv = 1.0 / J->s[2];
	const double rp6 = P[6] != 0 && isfinite(1.0 / P[6]) ? 1.0 / P[6] : 0;
	for (int i = 0; i < n; i++) {
		double xw = J->x0[0] + (x0 + i) * J->s[0];
		double w = P[8] * xw + P[9] * yw + P[11];
		int ok = w > 0;
		double iw = 1.0 / (ok ? w : 1.0);
		double u = (P[0] * xw + P[1] * yw + P[3]) * iw;
		ok = ok && u > -1 && u < umax;
		u = ok ? u : 0;
		double fl = floor(u);
		double v = (P[4] * xw + P[5] * yw + P[7]) * iw + 1; /* +1: padded row */
		/* z where v crosses 0 and vmax: zw = (v' - v) / dv, 1/dv = w / P[6] */
		double z1 = (0 - v) * w * rp6, z2 = (vmax - v) * w * rp6;
		double lo = (z1 < z2 ? z1 : z2) - zw0, hi = (z1 < z2 ? z2 : z1) - zw0;
		lo = rp6 != 0 ? lo * zinv - 1 : 0;
		hi = rp6 != 0 ? hi * zinv + 2 : nzt;
		lo = lo < 0 ? 0 : lo > nzt ? nzt : lo;
		hi = hi < 0 ? 0 : hi > nzt ? nzt : hi;
		col[i] = ok ? (int32_t)fl + 1 : 0;
		fu[i] = (float)(u - fl);
		v0[i] = (float)v;
		dv[i] = (float)(P[6] * iw);
		wt[i] = ok ? (float)(iw * iw) : 0.0f;
		za[i] = ok ? (int32_t)lo : 0;
		zb[i] = ok ? (int32_t)hi : 0;
	}
}

#define RC_BPV_CONE_ROWS RC_BPV_CAT(cone_rows, RC_BPV_SUFFIX)
#endif

#ifndef RC_BPV_CONE_ROWS_HAT
/* The splat footprint's u weights (rc_splat_hat_u) for the columns of one
 * row set up by cone_rows: the blend fu becomes w1 / (w0 + w1) and the
 * weight wt gains the factor w0 + w1, so that the column loops' blend
 * T = c0 + fu (c1 - c0) times wt is w0 c0 + w1 c1 times the old wt. */
static void RC_BPV_CAT(hat_rows, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, const double *P, double yw, int x0,
						int n, float *restrict fu, float *restrict wt)
{
	/* a column behind the source has wt = 0 and keeps it (its w is
	 * replaced by 1, its weights are finite).  GCC 12 does not vectorise
	 * this loop (15 ms of a 105 ms RC_BP_SPLAT of paper 000's case): the
	 * AVX-512 set-up does the same 8 columns at a time
	 * (RC_BPV_CONE_ROWS_HAT) */
	double Q[12];
	memcpy(Q, P, sizeof Q);
	const double xs = J->x0[0], sx = J->s[0], sy = J->s[1];
	for (int i = 0; i < n; i++) {
		double xw = xs + (x0 + i) * sx;
		double w = Q[8] * xw + Q[9] * yw + Q[11];
		double iw = 1.0 / (w > 0 ? w : 1.0);
		double u = (Q[0] * xw + Q[1] * yw + Q[3]) * iw;
		float w0, w1;
		rc_splat_hat_u(Q, u, iw, sx, sy, fu[i], &w0, &w1);
		float sum = w0 + w1;
		fu[i] = sum > 0.0f ? w1 / sum : 0.0f;
		wt[i] *= sum;
	}
}
#endif

/* The portable loop of the cone path: one view, one voxel column of n z
 * positions zw, detector columns c0 and c1 = c0 + Hs.  sv != 1: the splat
 * footprint's v weights rc_splat_hat(|v - row|, sv) / sv on the two rows
 * (the caller's wt holds the factor sv). */
static inline void RC_BPV_CAT(cone_col_c, RC_BPV_SUFFIX)(int n, float *restrict acc, const float *restrict c0,
							 const float *restrict c1, const float *restrict zw, float v0,
							 float dv, float fu, float wt, float vmax, float sv)
{
	/* v is monotone in z: the voxels whose v is off [0, vmax] (clamped,
	 * they would add exactly zero) are at the ends; dropping them leaves
	 * a loop with no clamps.  v is computed here exactly as in the loop. */
	while (n > 0 && !(v0 + zw[0] * dv >= 0.0f && v0 + zw[0] * dv <= vmax)) {
		zw++;
		acc++;
		n--;
	}
	while (n > 0 && !(v0 + zw[n - 1] * dv >= 0.0f && v0 + zw[n - 1] * dv <= vmax))
		n--;
	if (sv != 1.0f) {
		for (int z = 0; z < n; z++) {
			float v = v0 + zw[z] * dv;
			int32_t iv = (int32_t)v;
			float fv = v - (float)iv;
			float a = c0[iv], b = c1[iv], c = c0[iv + 1], d = c1[iv + 1];
			float top = a + fu * (b - a), bot = c + fu * (d - c);
			float h0 = 1.0f - fv * sv, h1 = 1.0f - (1.0f - fv) * sv;
			h0 = h0 > 0.0f ? h0 : 0.0f;
			h1 = h1 > 0.0f ? h1 : 0.0f;
			acc[z] += wt * (h0 * top + h1 * bot);
		}
		return;
	}
	for (int z = 0; z < n; z++) {
		float v = v0 + zw[z] * dv;
		int32_t iv = (int32_t)v;
		float fv = v - (float)iv;
		float a = c0[iv], b = c1[iv], c = c0[iv + 1], d = c1[iv + 1];
		float top = a + fu * (b - a), bot = c + fu * (d - c);
		acc[z] += wt * (top + fv * (bot - top));
	}
}

#ifndef RC_BPV_CONE_COLUMN
#define RC_BPV_CONE_COLUMN RC_BPV_CAT(cone_col_c, RC_BPV_SUFFIX)
#endif

/* Column set-up of a general matrix (P[2] or P[10] not 0, e.g. a C-arm's
 * calibrated matrices) for row y, voxels x0..x0+n-1: along a voxel column
 * w = aw + bw z, u w = au + bu z, v w = av + bv z (z the position in mm;
 * the b's are P[10], P[2], P[6] for every column), r0 = 1/w at the tile
 * column's centre zc, and the slices [za, zb) where the voxel may land on the
 * detector: u and v are monotone along a column (w > 0 on it), so each
 * crosses its limits at most once; one voxel of margin each side (the
 * column loop clamps, so the margin only needs to be conservative). */
static void RC_BPV_CAT(gen_cols, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, const double *P, double yw, int x0,
						int n, int nzt, double zw0, double zc, float *restrict aw,
						float *restrict au, float *restrict av, float *restrict r0,
						int32_t *restrict col, int32_t *restrict za, int32_t *restrict zb)
{
	const double lim[2][2] = { { -1, J->nu }, { -1, J->nv } };
	for (int i = 0; i < n; i++) {
		double xw = J->x0[0] + (x0 + i) * J->s[0];
		double a[3] = { P[0] * xw + P[1] * yw + P[3], P[4] * xw + P[5] * yw + P[7], P[8] * xw + P[9] * yw + P[11] };
		double b[3] = { P[2], P[6], P[10] };
		/* z range (mm) where lim[d][0] < (a[d] + b[d] z) / w(z) < lim[d][1] */
		double lo = zw0 - J->s[2], hi = zw0 + nzt * J->s[2];
		for (int d = 0; d < 2; d++)
			for (int e = 0; e < 2; e++) {
				double c = lim[d][e], den = b[d] - c * b[2], num = c * a[2] - a[d];
				/* f(z) - c has the sign of (a[d] - c a[2]) + den z, times w > 0 */
				double f_lo = a[d] - c * a[2] + den * lo;
				int inside_above = e == 0; /* f > lim[0] wanted, f < lim[1] wanted */
				if (den == 0) {
					if ((f_lo > 0) != inside_above)
						hi = lo; /* never inside */
					continue;
				}
				double zc_ = num / den;
				/* f - c grows with z when den > 0 */
				if ((den > 0) == inside_above)
					lo = zc_ > lo ? zc_ : lo;
				else
					hi = zc_ < hi ? zc_ : hi;
			}
		double zl = (lo - zw0) / J->s[2] - 1, zh = (hi - zw0) / J->s[2] + 2;
		zl = zl < 0 ? 0 : zl > nzt ? nzt : zl;
		zh = zh < 0 ? 0 : zh > nzt ? nzt : zh;
		za[i] = hi > lo ? (int32_t)zl : 0;
		zb[i] = hi > lo ? (int32_t)zh : 0;
		aw[i] = (float)a[2];
		au[i] = (float)a[0];
		av[i] = (float)a[1];
		r0[i] = (float)(1.0 / (a[2] + b[2] * zc));
		/* the detector column at the column's centre, for col_order */
		double uc = (a[0] + b[0] * zc) / (a[2] + b[2] * zc);
		col[i] = uc > -1 && uc < J->nu ? (int32_t)floor(uc) + 1 : 0;
	}
}

/* The per-voxel loop of a general matrix along a voxel column (t = zw, z
 * in mm) or a tile row of the row layout (t = x - x0): w = aw + bw t, 1/w by
 * three Newton steps r <- r (2 - w r) from r0 = 1/w at the line's centre (see
 * the top), u w = au + bu t, v w = av + bv t, u and v clamped to the padded
 * detector, bilinear, weight 1/w^2. */
static inline void RC_BPV_CAT(gen_col, RC_BPV_SUFFIX)(int n, float *restrict acc, const float *restrict img,
						      const float *restrict zw, float aw, float bw, float au,
						      float bu, float av, float bv, float r0, float umax, float vmax,
						      int Hs)
{
	for (int z = 0; z < n; z++) {
		float w = aw + bw * zw[z], r = r0;
		r = r * (2.0f - w * r);
		r = r * (2.0f - w * r);
		r = r * (2.0f - w * r);
		float u = (au + bu * zw[z]) * r + 1.0f, v = (av + bv * zw[z]) * r + 1.0f;
		u = u < 0.0f ? 0.0f : u;
		u = u > umax ? umax : u;
		v = v < 0.0f ? 0.0f : v;
		v = v > vmax ? vmax : v;
		int32_t iu = (int32_t)u, iv = (int32_t)v;
		float fu = u - (float)iu, fv = v - (float)iv;
		int32_t idx = iu * Hs + iv;
		float a = img[idx], b = img[idx + Hs];
		float c = img[idx + 1], d = img[idx + Hs + 1];
		float top = a + fu * (b - a), bot = c + fu * (d - c);
		acc[z] += r * r * (top + fv * (bot - top));
	}
}

#ifndef RC_BPV_GEN_COLUMN
#define RC_BPV_GEN_COLUMN RC_BPV_CAT(gen_col, RC_BPV_SUFFIX)
#endif

/* One view, one (z, y) row of a general matrix, exact division per voxel
 * (the fallback for rows where the Newton path is not accurate). */
static void RC_BPV_CAT(gen_row_div, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, const float *img, int n, double aw,
						   double bw, double au, double bu, double av, double bv,
						   float *restrict acc)
{
	const int Hs = J->Hs;
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
		const float *p = img + (size_t)iu * Hs + iv;
		float top = p[0] + fu * (p[Hs] - p[0]), bot = p[1] + fu * (p[Hs + 1] - p[1]);
		acc[x] += (float)(iw * iw) * (top + fv * (bot - top));
	}
}

/* General path, view k: every (y, z) row of the tile; sums [z][y][x]. */
static void RC_BPV_CAT(gen_view, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, int k, int x0, int nxt, int y0, int y1,
						int z0, int z1, float *acc)
{
	const double *P = J->P[k];
	const float *restrict img = J->img + (size_t)k * J->img_stride;
	const float umax = (float)(J->nu + 1), vmax = (float)(J->nv + 1);
	double xs = J->x0[0] + x0 * J->s[0];
	float xi[RC_BPV_BX]; /* x - x0 of the row's voxels */
	for (int x = 0; x < RC_BPV_BX; x++)
		xi[x] = (float)x;
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
			/* the column loop's arithmetic with x in place of z */
			RC_BPV_CAT(gen_col, RC_BPV_SUFFIX)(nxt, row, img, xi, (float)aw, (float)bw, (float)au, (float)bu,
							   (float)av, (float)bv, (float)(1.0 / wc), umax, vmax, J->Hs);
		}
	}
}

/* The order of a view's voxel columns (c = y * RC_BPV_BX + x; those with
 * za < zb only): sorted by detector column col (for a view close to a cone,
 * the one at the column's centre), so that columns reading the same pair
 * of detector columns follow each other and find it in L1.  Voxels several
 * pixels wide (256^3 on the RabbitCT shape: 5 pixels) leave no two
 * neighbouring voxel columns on the same detector column, whatever the
 * direction; along the ray through the source they are.  A stable counting
 * sort; a tile spanning more than RC_BPV_SORT_BINS detector columns (a
 * volume near the source) is sorted by groups of 2, 4, ... columns.
 * Returns the count. */
static int RC_BPV_CAT(col_order, RC_BPV_SUFFIX)(const int32_t *col, const int32_t *za, const int32_t *zb, int nxt,
						 int nyt, int32_t *order)
{
	int lo = INT32_MAX, hi = INT32_MIN;
	for (int y = 0; y < nyt; y++)
		for (int x = 0; x < nxt; x++) {
			int c = y * RC_BPV_BX + x;
			if (za[c] < zb[c]) {
				lo = col[c] < lo ? col[c] : lo;
				hi = col[c] > hi ? col[c] : hi;
			}
		}
	if (hi < lo)
		return 0;
	int shift = 0;
	while ((hi - lo) >> shift >= RC_BPV_SORT_BINS)
		shift++;
	int start[RC_BPV_SORT_BINS + 1];
	memset(start, 0, sizeof(int) * (size_t)(((hi - lo) >> shift) + 2));
	for (int y = 0; y < nyt; y++)
		for (int x = 0; x < nxt; x++) {
			int c = y * RC_BPV_BX + x;
			if (za[c] < zb[c])
				start[((col[c] - lo) >> shift) + 1]++;
		}
	for (int b = 1; b <= ((hi - lo) >> shift) + 1; b++)
		start[b] += start[b - 1];
	for (int y = 0; y < nyt; y++)
		for (int x = 0; x < nxt; x++) {
			int c = y * RC_BPV_BX + x;
			if (za[c] < zb[c])
				order[start[(col[c] - lo) >> shift]++] = c;
		}
	return start[(hi - lo) >> shift];
}

/* Column layout, view k: the set-up of every voxel column of the tile (cone
 * or general), then the columns in the order that keeps the detector in L1
 * (col_order).  Sums [y][x][z], z
 * positions zw[0..bz) (beyond the tile the sequence goes on, so that a
 * vector may read a whole chunk). */
static void RC_BPV_CAT(col_view, RC_BPV_SUFFIX)(const struct rc_bpv_job *J, int k, int x0, int nxt, int y0, int y1,
						int z0, int nzt, const float *zw, float *rowbuf, float *acc)
{
	const float *restrict img = J->img + (size_t)k * J->img_stride;
	const float umax = (float)(J->nu + 1), vmax = (float)(J->nv + 1);
	const int Hs = J->Hs, T = RC_BPV_BX * J->by;
	const double *P = J->P[k];
	const int cone = J->cyl || (P[2] == 0 && P[10] == 0);
	/* cone: fu, v0, dv, wt; general: aw, au, av, r0 (in the same arrays); both:
	 * the detector column col and the slices [za, zb) */
	float *f0 = rowbuf, *f1 = f0 + T, *f2 = f1 + T, *f3 = f2 + T;
	int32_t *col = (int32_t *)(f3 + T), *za = col + T, *zb = za + T;
	double zw0 = J->x0[2] + z0 * J->s[2], zc = zw0 + 0.5 * (nzt - 1) * J->s[2];
	for (int y = y0; y < y1; y++) {
		int r = (y - y0) * RC_BPV_BX;
		double yw = J->x0[1] + y * J->s[1];
		if (J->cyl) {
			rc_bpv_cyl_rows(J, k, yw, x0, nxt, nzt, zw[0], f0 + r, f1 + r, f2 + r, f3 + r, col + r, za + r,
					zb + r);
		} else if (cone) {
			RC_BPV_CONE_ROWS(J, P, yw, x0, nxt, nzt, zw[0], f0 + r, f1 + r, f2 + r, f3 + r, col + r,
					 za + r, zb + r);
#ifndef RC_BPV_CONE_ROWS_HAT
			if (J->hat)
				RC_BPV_CAT(hat_rows, RC_BPV_SUFFIX)(J, P, yw, x0, nxt, f0 + r, f3 + r);
#endif
		} else
			RC_BPV_CAT(gen_cols, RC_BPV_SUFFIX)(J, P, yw, x0, nxt, nzt, zw0, zc, f0 + r, f1 + r, f2 + r,
							    f3 + r, col + r, za + r, zb + r);
	}
	const int nyt = y1 - y0;
	int32_t *order = zb + T;
	/* a thin tile (an out-of-core slab) reads a detector footprint that
	 * stays in L1 in any order (RC_BPV_UNSORTED_BYTES) */
	const int sorted = J->sorted;
	int n = sorted ? RC_BPV_CAT(col_order, RC_BPV_SUFFIX)(col, za, zb, nxt, nyt, order) : nyt * RC_BPV_BX;
	for (int i = 0; i < n; i++) {
		int c = sorted ? order[i] : i;
		if (!sorted && (i % RC_BPV_BX >= nxt || za[c] >= zb[c]))
			continue;
		float *a = acc + (size_t)c * (size_t)J->bz + za[c];
		if (cone) {
			const float *c0 = img + (size_t)col[c] * Hs;
			const float sv = J->hat ? rc_splat_hat_sv(f2[c], J->s[2]) : 1.0f;
			RC_BPV_CONE_COLUMN(zb[c] - za[c], a, c0, c0 + Hs, zw + za[c], f1[c], f2[c], f0[c], f3[c] * sv,
					   vmax, sv);
		} else {
			RC_BPV_GEN_COLUMN(zb[c] - za[c], a, img, zw + za[c], f0[c], (float)P[10], f1[c], (float)P[2],
					  f2[c], (float)P[6], f3[c], umax, vmax, Hs);
		}
	}
}

void RC_BPV_TILE(const struct rc_bpv_job *J, long task, int worker)
{
	/* task -> (xb, yb, zb), x fastest: neighbouring tasks share detector rows */
	int xb = (int)(task % J->nxb), yb = (int)(task / J->nxb % J->nyb), zb = (int)(task / J->nxb / J->nyb);
	int x0 = xb * RC_BPV_BX, x1 = x0 + RC_BPV_BX < J->nx ? x0 + RC_BPV_BX : J->nx;
	int y0 = yb * J->by, y1 = y0 + J->by < J->ny ? y0 + J->by : J->ny;
	const int bz = J->bz;
	int z0 = zb * bz, z1 = z0 + bz < J->nz ? z0 + bz : J->nz;
	const int nxt = x1 - x0, nyt = y1 - y0, nzt = z1 - z0;
	float *S = J->scratch + (size_t)worker * J->scratch_floats;
	/* scratch: the tile's sums (unless they persist in J->tiles), then
	 * the row buffers, then z positions */
	float *acc = J->tiles ? J->tiles + (size_t)task * RC_BPV_TILE_FLOATS(J->by, bz) : S;
	float *rowbuf = S + RC_BPV_TILE_FLOATS(J->by, bz);
	float *zw = rowbuf + 8 * RC_BPV_BX * J->by;
	if (!J->tiles || J->first_block)
		memset(acc, 0, sizeof(float) * RC_BPV_TILE_FLOATS(J->by, bz));
	for (int z = 0; z < bz + 16; z++) /* + 16: a chunk may start anywhere */
		zw[z] = (float)(J->x0[2] + (z0 + z) * J->s[2]);
	/* Views outermost: the tile's sums stay in L1/L2 while one view's
	 * detector footprint of the tile is read. */
	for (int k = 0; k < J->K; k++) {
		if (J->cone)
			RC_BPV_CAT(col_view, RC_BPV_SUFFIX)(J, k, x0, nxt, y0, y1, z0, nzt, zw, rowbuf, acc);
		else
			RC_BPV_CAT(gen_view, RC_BPV_SUFFIX)(J, k, x0, nxt, y0, y1, z0, z1, acc);
	}
	if (J->tiles && !J->last_block)
		return;
	if (J->cone) {
		/* z innermost: a row of sums reads one line of each of its 32
		 * columns, which the next 15 z read again from L1 (z outermost,
		 * the tile's 2048 columns' lines fell out of L1 between them) */
		const size_t plane = (size_t)J->ny * (size_t)J->nx;
		for (int y = y0; y < y1; y++)
			for (int z = z0; z < z1; z++) {
				float *restrict out = J->vol + ((size_t)z * (size_t)J->ny + (size_t)y) * (size_t)J->nx + x0;
				const float *restrict col = acc + (size_t)(y - y0) * RC_BPV_BX * bz + (z - z0);
				/* adding, the row is read first: its slices are a
				 * plane apart, past the hardware prefetcher's reach */
				if (!J->overwrite && z + RC_BPV_PREFETCH_Z < z1) {
					__builtin_prefetch(out + RC_BPV_PREFETCH_Z * plane, 1);
					__builtin_prefetch(out + RC_BPV_PREFETCH_Z * plane + nxt - 1, 1);
				}
				for (int x = 0; x < nxt; x++)
					out[x] = J->overwrite ? col[(size_t)x * bz] : out[x] + col[(size_t)x * bz];
			}
		return;
	}
	for (int z = z0; z < z1; z++)
		for (int y = y0; y < y1; y++) {
			float *restrict out = J->vol + ((size_t)z * (size_t)J->ny + (size_t)y) * (size_t)J->nx + x0;
			const float *restrict row = acc + ((size_t)(z - z0) * nyt + (y - y0)) * RC_BPV_BX;
			if (J->overwrite)
				memcpy(out, row, (size_t)nxt * sizeof(float));
			else
				for (int x = 0; x < nxt; x++)
					out[x] += row[x];
		}
}

#endif
