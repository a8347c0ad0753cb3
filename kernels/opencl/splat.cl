/*
 * splat: the splat projector pair on device buffers (RC_FP_SPLAT and its
 * exact adjoint RC_BP_SPLAT), the sums of the CPU engine's
 * core/projectors/proj_splat.c and proj_voxel.c's splat_gain path:
 *   A = G B^T,  A^T = B G,
 * B the voxel back projection with the splat footprint (a hat as wide as
 * the voxel's projected step along u and v on a cone view, bilinear on
 * other views) and 1/w^2, G the per-pixel gain g(u, v) = V |c0 - u cu - v cv|.
 *
 * The per-view table (core/backend/splat_dev.c), RC_SPLAT_TAB_HEAD reals of volume
 * then RC_SPLAT_VIEW_REALS per view, in double where the device has fp64
 * (the column set-up is the CPU engine's, in double; the per-voxel steps
 * are float, as there):
 *   head  ox, oy, oz (voxel (0, 0, 0), mm), vx, vy, vz
 *   view  [0..11] P, [12..14] c0, [15..17] cu, [18..20] cv (times V),
 *         [21] 1 on a cone view (P[2] = P[10] = 0), [22] 1 / (|P[6]| vz)
 *
 * fp_splat scatters into the zeroed views: a voxel column of a cone view
 * gathers each detector row from the at most T voxels within a pixel of it,
 * as proj_splat_col.h does, and adds the row's sum to its two detector
 * columns (atomic adds on the GPU variant; the CPU variant's work-item owns
 * a view); splat_gain then multiplies by g.  bp_splat gathers: each
 * work-item sums RC_SPLAT_ZC voxels of one column over the views, reading
 * the views times g (splat_gained, a chunk of views).  The order of the
 * atomic additions is free, so sums agree with the CPU engine's to float
 * rounding.
 */
#ifndef RC_FP64
#define RC_FP64 0
#endif
#if RC_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real;
#else
typedef float real;
#endif

/* the table's layout comes from core/backend/splat_dev.h through the build
 * options (engine_opencl.c) */
#if !defined(RC_SPLAT_TAB_HEAD) || !defined(RC_SPLAT_VIEW_REALS)
#error "build with -DRC_SPLAT_TAB_HEAD and -DRC_SPLAT_VIEW_REALS (splat_dev.h)"
#endif
#define RC_SPLAT_T 8  /* rows gather from at most this many voxels (proj_splat_col.h) */
#define RC_SPLAT_ZC 8 /* voxels of a column per bp_splat work-item */

#ifndef RC_GPU
#define RC_GPU 0
#endif

/* A GPU variant's work-items share the views: a compare-and-swap float add
 * (OpenCL 1.2 has no float atomics).  The CPU variant's work-item owns its
 * view: a plain add. */
#if RC_GPU
#define SPLAT_ADD(p, v) splat_add((p), (v))
#else
#define SPLAT_ADD(p, v) (*(p) += (v))
#endif

static void splat_add(volatile __global float *p, float v)
{
	union {
		unsigned int u;
		float f;
	} old, upd;
	do {
		old.f = *p;
		upd.f = old.f + v;
	} while (atomic_cmpxchg((volatile __global unsigned int *)p, old.u, upd.u) != old.u);
}

/* proj_cpu.h's rc_splat_hat_scale and rc_splat_hat */
static float splat_scale(real w) { return w < 1 ? (float)(1.0f / w) : 1.0f; }
static float splat_hat(float d, float s)
{
	float r = 1.0f - d * s;
	return r > 0.0f ? r * s : 0.0f;
}

/* Value a at padded column pair fl + 1, fl + 2 (weights w0, w1), padded
 * row v (proj_splat.c's deposit): only real pixels are written. */
static void splat_deposit(__global float *view, int fl, float w0, float w1, float v, float a, float sv, int nu,
			  int nv)
{
	int iv = (int)v;
	float fv = v - (float)iv;
	float lo = a * splat_hat(fv, sv), hi = a * splat_hat(1.0f - fv, sv);
	/* padded row iv is real row iv - 1 */
	for (int r = 0; r < 2; r++) {
		int j = iv - 1 + r;
		float h = r ? hi : lo;
		if (j < 0 || j >= nv || h == 0.0f)
			continue;
		if (fl >= 0)
			SPLAT_ADD(view + (size_t)j * nu + fl, w0 * h);
		if (fl + 1 < nu)
			SPLAT_ADD(view + (size_t)j * nu + fl + 1, w1 * h);
	}
}

/* Voxel column (ix, iy) into view k. */
static void splat_column(__global float *proj, __global const float *restrict vol, __global const real *restrict tab,
			 int ix, int iy, int k, int4 n, int nu, int nv)
{
	__global const real *P = tab + RC_SPLAT_TAB_HEAD + (size_t)k * RC_SPLAT_VIEW_REALS;
	const real ox = tab[0], oy = tab[1], oz = tab[2], vx = tab[3], vy = tab[4], vz = tab[5];
	const real X = ox + ix * vx, Y = oy + iy * vy;
	__global float *view = proj + (size_t)k * nu * nv;
	const size_t plane = (size_t)n.x * n.y, at = (size_t)iy * n.x + ix;
	if (P[21] == 0) { /* any other matrix: per voxel, bilinear (general_column) */
		const real au = P[0] * X + P[1] * Y + P[3], av = P[4] * X + P[5] * Y + P[7];
		const real aw = P[8] * X + P[9] * Y + P[11];
		for (int z = 0; z < n.z; z++) {
			real zw = (float)(oz + z * vz);
			real w = aw + P[10] * zw;
			if (!(w > 0))
				continue;
			real iw = 1 / w;
			real u = (au + P[2] * zw) * iw, v = (av + P[6] * zw) * iw + 1;
			if (!(u > -1 && u < nu && v >= 0 && v <= nv + 1))
				continue;
			real fl = floor(u);
			float fu = (float)(u - fl);
			splat_deposit(view, (int)fl, 1.0f - fu, fu, (float)v, (float)(iw * iw) * vol[(size_t)z * plane + at],
				      1.0f, nu, nv);
		}
		return;
	}
	/* a cone view (cone_view): u and w fixed along the column, v linear in z */
	const real w = P[8] * X + P[9] * Y + P[11];
	if (!(w > 0))
		return;
	const real iw = 1 / w, u = (P[0] * X + P[1] * Y + P[3]) * iw;
	if (!(u > -1 && u < nu))
		return;
	const real fl = floor(u), dv = P[6] * iw;
	const real v0 = (P[4] * X + P[5] * Y + P[7]) * iw + 1;
	const float wt = (float)(iw * iw);
	const float sv = fabs(dv) * vz < 1 ? (float)(w * P[22]) : 1.0f;
	/* rc_splat_hat_u */
	real ha = fabs(P[0] - u * P[8]) * iw * vx, hb = fabs(P[1] - u * P[9]) * iw * vy;
	float su = splat_scale(ha > hb ? ha : hb), fu = (float)(u - fl);
	const float w0 = splat_hat(fu, su) * wt, w1 = splat_hat(1.0f - fu, su) * wt;
	const int c = (int)fl;
	const real z0 = (float)oz;
	const real V0 = v0 + z0 * dv, S = vz * dv;
	if (fabs(S) * RC_SPLAT_T <= 2.0) { /* voxels under a quarter row apart: one by one */
		for (int z = 0; z < n.z; z++) {
			float vzp = (float)v0 + (float)(oz + z * vz) * (float)dv;
			if (vzp >= 0.0f && vzp <= (float)(nv + 1))
				splat_deposit(view, c, w0, w1, vzp, vol[(size_t)z * plane + at], sv, nu, nv);
		}
		return;
	}
	/* rc_splat_col: each row j of j0..j1 (padded) gathers from T voxels */
	real vlo = S > 0 ? V0 : V0 + (n.z - 1) * S, vhi = S > 0 ? V0 + (n.z - 1) * S : V0;
	int j0 = vlo < 1 ? 1 : (int)vlo, j1 = vhi + 1 > nv ? nv : (int)(vhi + 1);
	const real id = 1 / S;
	const float iS = (float)id, reach = (float)fabs(id), fV0 = (float)V0, fS = (float)S;
	const int T = (int)(2 * fabs(id)) + 1;
	for (int j = j0; j <= j1; j++) {
		float fj = (float)j;
		float zlo = (fj - fV0) * iS - reach + 64.0f;
		int zs = (int)zlo - 63;
		float d = fV0 + (float)zs * fS - fj, acc = 0.0f;
		for (int t = 0; t < T; t++) {
			int z = zs + t;
			if (z >= 0 && z < n.z)
				acc += splat_hat(fabs(d), sv) * vol[(size_t)z * plane + at];
			d += fS;
		}
		if (acc == 0.0f)
			continue;
		__global float *row = view + (size_t)(j - 1) * nu;
		if (c >= 0)
			SPLAT_ADD(row + c, w0 * acc);
		if (c + 1 < nu)
			SPLAT_ADD(row + c + 1, w1 * acc);
	}
}

/* GPU variant: a work-item per voxel column and view (global nx, ny,
 * views); CPU variant: a work-item per view (global 1, 1, views), its
 * columns in the volume's order, as the CPU engine's task. */
__kernel void fp_splat(__global float *proj, __global const float *restrict vol, __global const real *restrict tab,
		       int first, int4 n, int nu, int nv)
{
	int k = first + (int)get_global_id(2);
#if RC_GPU
	int ix = get_global_id(0), iy = get_global_id(1);
	if (ix < n.x && iy < n.y)
		splat_column(proj, vol, tab, ix, iy, k, n, nu, nv);
#else
	for (int iy = 0; iy < n.y; iy++)
		for (int ix = 0; ix < n.x; ix++)
			splat_column(proj, vol, tab, ix, iy, k, n, nu, nv);
#endif
}

/* g at pixel (i, j) of view P: x0 = c0 - j cv along the row, then - i cu
 * in float (proj_splat.c's rc_splat_gain_line along u) */
static float splat_gain_at(__global const real *P, int i, int j)
{
	float x = (float)(P[12] - j * P[18]) - (float)i * (float)P[15];
	float y = (float)(P[13] - j * P[19]) - (float)i * (float)P[16];
	float z = (float)(P[14] - j * P[20]) - (float)i * (float)P[17];
	return sqrt(x * x + y * y + z * z);
}

/* proj views [first, first + global(2)) *= g */
__kernel void splat_gain(__global float *proj, __global const real *restrict tab, int first, int nu, int nv)
{
	int i = get_global_id(0), j = get_global_id(1), k = first + (int)get_global_id(2);
	if (i >= nu || j >= nv)
		return;
	__global const real *P = tab + RC_SPLAT_TAB_HEAD + (size_t)k * RC_SPLAT_VIEW_REALS;
	proj[((size_t)k * nv + j) * nu + i] *= splat_gain_at(P, i, j);
}

/* out views 0, 1, .. = proj views first, first + 1, .. times g (global nu,
 * nv, views): bp_splat's input, so that it reads each pixel's gain once */
__kernel void splat_gained(__global float *out, __global const float *restrict proj, __global const real *restrict tab,
			   int first, int nu, int nv)
{
	int i = get_global_id(0), j = get_global_id(1), q = get_global_id(2), k = first + q;
	if (i >= nu || j >= nv)
		return;
	__global const real *P = tab + RC_SPLAT_TAB_HEAD + (size_t)k * RC_SPLAT_VIEW_REALS;
	out[((size_t)q * nv + j) * nu + i] = proj[((size_t)k * nv + j) * nu + i] * splat_gain_at(P, i, j);
}

/* Pixel (i, j) of view k of the gained views (view first at 0), 0 outside
 * the detector. */
static float splat_px(__global const float *restrict gp, int first, int k, int i, int j, int nu, int nv)
{
	if (i < 0 || j < 0 || i >= nu || j >= nv)
		return 0.0f;
	return gp[((size_t)(k - first) * nv + j) * nu + i];
}

/* vol (+)= B G proj over views [first, last), gp = G proj of those views
 * (splat_gained): work-item (x, y, chunk of RC_SPLAT_ZC voxels along z). */
__kernel void bp_splat(__global float *vol, __global const float *restrict gp, __global const real *restrict tab,
		       int first, int last, int accumulate, int4 n, int nu, int nv)
{
	int ix = get_global_id(0), iy = get_global_id(1), zc = get_global_id(2) * RC_SPLAT_ZC;
	if (ix >= n.x || iy >= n.y || zc >= n.z)
		return;
	const real ox = tab[0], oy = tab[1], oz = tab[2], vx = tab[3], vy = tab[4], vz = tab[5];
	const real X = ox + ix * vx, Y = oy + iy * vy;
	const int nzc = n.z - zc < RC_SPLAT_ZC ? n.z - zc : RC_SPLAT_ZC;
	float acc[RC_SPLAT_ZC], zw[RC_SPLAT_ZC];
	for (int q = 0; q < RC_SPLAT_ZC; q++) {
		acc[q] = 0.0f;
		zw[q] = (float)(oz + (zc + q) * vz);
	}
	const float vmax = (float)(nv + 1);
	for (int k = first; k < last; k++) {
		__global const real *P = tab + RC_SPLAT_TAB_HEAD + (size_t)k * RC_SPLAT_VIEW_REALS;
		if (P[21] == 0) { /* bilinear, the transpose of fp_splat's general path */
			const real au = P[0] * X + P[1] * Y + P[3], av = P[4] * X + P[5] * Y + P[7];
			const real aw = P[8] * X + P[9] * Y + P[11];
			for (int q = 0; q < nzc; q++) {
				real w = aw + P[10] * (real)zw[q];
				if (!(w > 0))
					continue;
				real iw = 1 / w;
				real u = (au + P[2] * (real)zw[q]) * iw, v = (av + P[6] * (real)zw[q]) * iw + 1;
				if (!(u > -1 && u < nu && v >= 0 && v <= nv + 1))
					continue;
				int c = (int)floor(u);
				float fu = (float)(u - floor(u)), fv32 = (float)v;
				int iv = (int)fv32;
				float fv = fv32 - (float)iv;
				float lo = splat_hat(fv, 1.0f), hi = splat_hat(1.0f - fv, 1.0f);
				float s = lo * ((1.0f - fu) * splat_px(gp, first, k, c, iv - 1, nu, nv) +
						fu * splat_px(gp, first, k, c + 1, iv - 1, nu, nv)) +
					  hi * ((1.0f - fu) * splat_px(gp, first, k, c, iv, nu, nv) +
						fu * splat_px(gp, first, k, c + 1, iv, nu, nv));
				acc[q] += (float)(iw * iw) * s;
			}
			continue;
		}
		const real w = P[8] * X + P[9] * Y + P[11];
		if (!(w > 0))
			continue;
		const real iw = 1 / w, u = (P[0] * X + P[1] * Y + P[3]) * iw;
		if (!(u > -1 && u < nu))
			continue;
		const real fl = floor(u), dvr = P[6] * iw;
		const float v0 = (float)((P[4] * X + P[5] * Y + P[7]) * iw + 1), dv = (float)dvr;
		const float wt = (float)(iw * iw);
		const float sv = fabs(dvr) * vz < 1 ? (float)(w * P[22]) : 1.0f;
		real ha = fabs(P[0] - u * P[8]) * iw * vx, hb = fabs(P[1] - u * P[9]) * iw * vy;
		float su = splat_scale(ha > hb ? ha : hb), fu = (float)(u - fl);
		const float w0 = splat_hat(fu, su) * wt, w1 = splat_hat(1.0f - fu, su) * wt;
		const int c = (int)fl;
		for (int q = 0; q < nzc; q++) {
			float v = v0 + zw[q] * dv;
			if (!(v >= 0.0f && v <= vmax))
				continue;
			int iv = (int)v;
			float fv = v - (float)iv;
			float lo = splat_hat(fv, sv), hi = splat_hat(1.0f - fv, sv);
			float s = 0.0f;
			if (lo != 0.0f)
				s += lo * (w0 * splat_px(gp, first, k, c, iv - 1, nu, nv) +
					   w1 * splat_px(gp, first, k, c + 1, iv - 1, nu, nv));
			if (hi != 0.0f)
				s += hi * (w0 * splat_px(gp, first, k, c, iv, nu, nv) +
					   w1 * splat_px(gp, first, k, c + 1, iv, nu, nv));
			acc[q] += s;
		}
	}
	for (int q = 0; q < nzc; q++) {
		size_t idx = ((size_t)(zc + q) * n.y + iy) * n.x + ix;
		vol[idx] = accumulate ? vol[idx] + acc[q] : acc[q];
	}
}
