/*
 * proj_splat: RC_FP_SPLAT, the voxel-driven forward projector whose exact
 * transpose is the FDK back projector (proj_voxel.c) with a per-pixel gain
 * (RC_BP_SPLAT).  Both sides run over voxels, so the matched pair costs about
 * what the back projector costs, where ray casting and its transpose walk
 * every ray at half-voxel steps (docs/cpu-engine.md, "Splatting").
 *
 * The model.  A voxel of density x and volume V at depth w adds x times
 * V |grad u x grad v| to the detector's pixel values in sum (the line
 * integrals through it, integrated over the detector, in pixel units).  With
 * P's rows a, b, n (geometry.h: |n| = 1, w = n.X + w0), grad u = (a - u n) / w,
 * so that factor is |c(u, v)| / w^2 with
 *     c(u, v) = (a - u n) x (b - v n) = a x b - u (n x b) - v (a x n),
 * the 1/w^2 of the back projector times a gain g(u, v) = V |c(u, v)| that
 * depends on the pixel alone.  The voxel's value is spread over the four
 * pixels around its projection, on a cone view with proj_cpu.h's footprint
 * (a hat as wide as the voxel's projected step along u and along v, which
 * is bilinear at a step of a pixel), on other views bilinearly, so
 *     A = G B^T,   A^T = B G     (G: diagonal, g at each pixel centre),
 * with B = RC_BP_VOXEL exactly (its padding, its clamps, its 1/w^2) run
 * with the same footprint (rc_bp_voxel's splat_gain).  g changes by about
 * 1e-4 of itself per pixel, so evaluating it at the pixel rather than at
 * the voxel's projection is far below the model's own error.  The bilinear
 * footprint is a voxel smeared over a pixel either side: its projections
 * were 1.13-1.21x further from analytic line integrals than ray casting's,
 * and plain CGLS and MLEM fitted that blur (docs/cpu-engine.md); the hat's
 * are 0.97-0.99x.
 *
 * Where it holds.  The footprints of neighbouring voxels overlap to a flat
 * sum only while voxels project at most a pixel apart; coarser, the
 * forward projection ripples (by half at 1.5 pixels).  rc_splat_suits says
 * whether every voxel step projects to at most RC_SPLAT_MAX_STEP pixels in
 * u and v on every view; the CPU engine offers the pair only then
 * (otherwise iterative jobs keep ray casting and its transpose).
 *
 * Work.  A task is one view: the volume is swept in voxel columns along z
 * (u and w are constant along a column of a cone view, v is linear in z), each
 * column adding into two columns of a transposed, zero-padded image of the
 * worker's (the back projector's layout: pixel (i, j) at (i + 1) Hs + j + 1),
 * then the image's inside, times g, is the view.  Views are independent, so
 * no atomics and a result that does not depend on the thread count.
 */
#include "projectors/proj_cpu.h"
#include "projectors/proj_splat_col.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rc_fps {
	const rc_geom *g;
	int Hs;            /* column stride of a padded transposed image: nv + 3 */
	size_t img_floats; /* Hs * (nu + 3) */
	float *img;        /* one image per worker */
	float *zw;         /* world z of every slice */
	float *colbuf;     /* nz floats per worker: a column copied z-contiguous */
	rc_zfast zf;       /* the volume z-fastest, for the cone path (none: it reads the volume strided) */
};

void rc_splat_gain_init(const rc_geom *g, int k, rc_splat_gain *gn)
{
	const double *P = rc_geom_view(g, k)->P;
	const rc_volume_desc *v = rc_geom_volume(g);
	const double a[3] = { P[0], P[1], P[2] }, b[3] = { P[4], P[5], P[6] }, n[3] = { P[8], P[9], P[10] };
	const double V = v->vx * v->vy * v->vz;
	for (int i = 0; i < 3; i++) {
		int i1 = (i + 1) % 3, i2 = (i + 2) % 3;
		gn->c0[i] = V * (a[i1] * b[i2] - a[i2] * b[i1]);
		gn->cu[i] = V * (n[i1] * b[i2] - n[i2] * b[i1]);
		gn->cv[i] = V * (a[i1] * n[i2] - a[i2] * n[i1]);
	}
}

void rc_splat_gain_line(const rc_splat_gain *gn, double u, double v, int along_v, int n, float *restrict out)
{
	const double *s = along_v ? gn->cv : gn->cu;
	const float x0 = (float)(gn->c0[0] - u * gn->cu[0] - v * gn->cv[0]), sx = (float)s[0];
	const float y0 = (float)(gn->c0[1] - u * gn->cu[1] - v * gn->cv[1]), sy = (float)s[1];
	const float z0 = (float)(gn->c0[2] - u * gn->cu[2] - v * gn->cv[2]), sz = (float)s[2];
	for (int i = 0; i < n; i++) {
		float x = x0 - (float)i * sx, y = y0 - (float)i * sy, z = z0 - (float)i * sz;
		out[i] = sqrtf(x * x + y * y + z * z);
	}
}

/* Largest projected voxel step (pixels, in u or in v) of view P over the
 * volume: the Jacobian of (u, v) times the voxel size on each axis, at the
 * eight corners (the magnification is largest at a corner); infinity when a
 * corner is not in front of the source. */
static double view_max_step(const double *P, const rc_volume_desc *v, double zlo, double zhi)
{
	const double s[3] = { v->vx, v->vy, v->vz };
	double worst = 0;
	for (int c = 0; c < 8; c++) {
		double X[3];
		rc_volume_voxel_pos(v, c & 1 ? v->nx - 1 : 0, c & 2 ? v->ny - 1 : 0, c & 4 ? v->nz - 1 : 0, X);
		X[2] = fmin(fmax(X[2], zlo), zhi);
		double w = P[8] * X[0] + P[9] * X[1] + P[10] * X[2] + P[11];
		if (!(w > 0))
			return INFINITY;
		double u = (P[0] * X[0] + P[1] * X[1] + P[2] * X[2] + P[3]) / w;
		double vv = (P[4] * X[0] + P[5] * X[1] + P[6] * X[2] + P[7]) / w;
		for (int i = 0; i < 3; i++) {
			double du = fabs(P[i] - u * P[8 + i]) * s[i] / w;
			double dv = fabs(P[4 + i] - vv * P[8 + i]) * s[i] / w;
			worst = fmax(worst, fmax(du, dv));
		}
	}
	return worst;
}

double rc_splat_max_step(const rc_geom *g)
{
	rc_geom_type t = rc_geom_type_of(g);
	/* a curved cone's pixels are no projective image: no splat pair */
	if ((!rc_geom_type_is_cone(t) && t != RC_GEOM_MATRICES) || rc_geom_detector(g)->shape == RC_DETECTOR_CURVED)
		return INFINITY;
	/* a helix's view sees a slab of the volume about its source's height
	 * (the detector's rows at the far side of the volume): the step
	 * elsewhere never reaches a pixel */
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *v = rc_geom_volume(g);
	double reach = INFINITY;
	if (t == RC_GEOM_HELIX) {
		double R = hypot(fabs(v->cx) + 0.5 * v->nx * v->vx, fabs(v->cy) + 0.5 * v->ny * v->vy);
		reach = (0.5 * d->nv * d->dv + fabs(d->offset_v) + d->dv) * (rc_geom_sid(g) + R) / rc_geom_sdd(g) + v->vz;
	}
	double worst = 0;
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		double zs = rc_geom_view(g, k)->src[2];
		worst = fmax(worst, view_max_step(rc_geom_view(g, k)->P, v, zs - reach, zs + reach));
	}
	return worst;
}

int rc_splat_suits(const rc_geom *g) { return rc_splat_max_step(g) <= RC_SPLAT_MAX_STEP; }

int rc_fps_new(const rc_geom *g, int threads, rc_fps **ret, rc_err *err)
{
	const rc_detector_desc *d = rc_geom_detector(g);
	const rc_volume_desc *v = rc_geom_volume(g);
	rc_fps *f = calloc(1, sizeof *f);
	if (!f)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the splatting projector");
	f->g = g;
	f->Hs = d->nv + 3;
	f->img_floats = (size_t)f->Hs * (size_t)(d->nu + 3);
	f->img = malloc((size_t)threads * f->img_floats * sizeof(float));
	f->zw = rc_volume_z_table(v);
	f->colbuf = malloc((size_t)threads * (size_t)v->nz * sizeof(float));
	if (!f->img || !f->zw || !f->colbuf) {
		int rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the splatting projector's images (%zu MiB)",
				 ((size_t)threads * f->img_floats * sizeof(float)) >> 20);
		rc_fps_free(f);
		return rc;
	}
	*ret = f;
	return 0;
}

void rc_fps_free(rc_fps *f)
{
	if (!f)
		return;
	free(f->img);
	free(f->zw);
	free(f->colbuf);
	rc_zfast_release(&f->zf);
	free(f);
}

typedef void (*rc_splat_col_fn)(const float *restrict, int, double, double, float, float, float, float *restrict,
				float *restrict, int);

struct splat_ctx {
	const rc_fps *f;
	rc_splat_col_fn col_fn;
	const float *vol;
	const float *xt;
	float *proj;
	int first;
	int constant; /* every voxel is vol[0] (SART's row sums: A 1) */
};

/* The four deposits of value a at padded column pair c0, c1 (weights w0,
 * w1) and padded row v (>= 0), v scale sv (proj_cpu.h's footprint; 1:
 * bilinear): the transpose of proj_voxel_tile.h's lookup. */
static inline void deposit(float *restrict c0, float *restrict c1, float w0, float w1, float v, float a, float sv)
{
	int32_t iv = (int32_t)v;
	float fv = v - (float)iv;
	float lo = a * rc_splat_hat(fv, sv), hi = a * rc_splat_hat(1.0f - fv, sv);
	c0[iv] += w0 * lo;
	c1[iv] += w1 * lo;
	c0[iv + 1] += w0 * hi;
	c1[iv + 1] += w1 * hi;
}

/* A column of nz voxels of one value a at padded rows v_z = V0 + z S, |S| at
 * most a pixel (rc_splat_suits) and sv = 1 / |S| (1 at |S| = 1): the hats
 * of neighbouring voxels sum to sv wherever two overlap, so every row
 * between the first and the last voxel's gets a sv and only the rows
 * within a pixel beyond the ends are summed voxel by voxel (the voxels
 * within a pixel of the row). */
static void const_column(float a, int nz, double V0, double S, float sv, float w0, float w1, float *restrict c0,
			 float *restrict c1, int nv)
{
	double vlo = S > 0 ? V0 : V0 + (nz - 1) * S, vhi = S > 0 ? V0 + (nz - 1) * S : V0;
	int j0 = vlo < 1 ? 1 : (int)vlo, j1 = vhi + 1 > nv ? nv : (int)(vhi + 1);
	/* the inner rows ceil(vlo) .. floor(vhi) within j0 .. j1 */
	int ja = (int)ceil(vlo), jb = (int)floor(vhi);
	ja = ja < j0 ? j0 : ja;
	jb = jb > j1 ? j1 : jb;
	const float in0 = w0 * (a * sv), in1 = w1 * (a * sv);
	for (int j = ja; j <= jb; j++) {
		c0[j] += in0;
		c1[j] += in1;
	}
	for (int j = j0; j <= j1; j++) {
		if (j >= ja && j <= jb) {
			j = jb;
			continue;
		}
		/* voxels z with |V0 + z S - j| < 1, clamped to the column */
		double za = (j - 1 - V0) / S, zb = (j + 1 - V0) / S;
		int lo = (int)floor(za < zb ? za : zb), hi = (int)ceil(za < zb ? zb : za);
		lo = lo < 0 ? 0 : lo;
		hi = hi > nz - 1 ? nz - 1 : hi;
		float acc = 0.0f;
		for (int z = lo; z <= hi; z++)
			acc += a * rc_splat_hat(fabsf((float)V0 + (float)z * (float)S - (float)j), sv);
		c0[j] += w0 * acc;
		c1[j] += w1 * acc;
	}
}

/* A cone view (P[2] = P[10] = 0): u and w are fixed along a voxel column and
 * v is linear in z, so each column is one call of the column loop
 * (proj_splat_col.h) on the column's values, z-contiguous (xt, or copied
 * into the worker's column buffer).  The set-up is proj_voxel_tile.h's
 * cone_rows in double.  Columns whose voxels are under a quarter of a row
 * apart (T over RC_SPLAT_T) scatter voxel by voxel instead. */
static void cone_view(const rc_fps *f, const double *P, const float *vol, const float *xt, float *img,
		      float *colbuf, rc_splat_col_fn col_fn, int constant)
{
	const rc_volume_desc *v = rc_geom_volume(f->g);
	const rc_detector_desc *d = rc_geom_detector(f->g);
	const size_t plane = (size_t)v->nx * (size_t)v->ny, Hs = (size_t)f->Hs;
	const double z0 = f->zw[0];
	/* the v scale 1 / (|dv| vz) = w / (|P[6]| vz) where below 1 pixel:
	 * no division per column (rc_splat_hat_sv's value) */
	const double sv_w = P[6] != 0 ? 1.0 / (fabs(P[6]) * v->vz) : 0.0;
	for (int iy = 0; iy < v->ny; iy++) {
		/* w and the numerators of u and v are linear along x */
		double X[3];
		rc_volume_voxel_pos(v, 0, iy, 0, X);
		const double wr = P[8] * X[0] + P[9] * X[1] + P[11], ur = P[0] * X[0] + P[1] * X[1] + P[3];
		const double vr = P[4] * X[0] + P[5] * X[1] + P[7];
		for (int ix = 0; ix < v->nx; ix++) {
			double w = wr + P[8] * (ix * v->vx);
			if (!(w > 0))
				continue;
			double iw = 1.0 / w;
			double u = (ur + P[0] * (ix * v->vx)) * iw;
			if (!(u > -1 && u < d->nu))
				continue;
			double fl = floor(u), dv = P[6] * iw;
			double v0 = (vr + P[4] * (ix * v->vx)) * iw + 1;
			float *c0 = img + ((size_t)fl + 1) * Hs;
			const size_t at = (size_t)iy * (size_t)v->nx + (size_t)ix;
			const float wt = (float)(iw * iw);
			const float sv = fabs(dv) * v->vz < 1 ? (float)(w * sv_w) : 1.0f;
			float w0, w1;
			rc_splat_hat_u(P, u, iw, v->vx, v->vy, (float)(u - fl), &w0, &w1);
			w0 *= wt;
			w1 *= wt;
			if (constant && fabs(dv * v->vz) <= 1.0) {
				const_column(vol[0], v->nz, v0 + z0 * dv, v->vz * dv, sv, w0, w1, c0, c0 + Hs, d->nv);
				continue;
			}
			const float *a = xt ? xt + at * (size_t)v->nz : colbuf;
			for (int z = 0; !xt && z < v->nz; z++)
				colbuf[z] = vol[at + (size_t)z * plane];
			if (fabs(dv * v->vz) * RC_SPLAT_T > 2.0) {
				col_fn(a, v->nz, v0 + z0 * dv, v->vz * dv, sv, w0, w1, c0, c0 + Hs, d->nv);
				continue;
			}
			for (int z = 0; z < v->nz; z++) {
				float vz = (float)v0 + f->zw[z] * (float)dv;
				if (vz >= 0.0f && vz <= (float)(d->nv + 1))
					deposit(c0, c0 + Hs, w0, w1, vz, a[z], sv);
			}
		}
	}
}

/* Any other matrix: per voxel, with the back projector's clamps (u in
 * (-1, nu), padded v in [0, nv + 1], w > 0). */
static void general_column(const rc_fps *f, const double *P, double xw, double yw, const float *restrict x,
			   size_t zstride, float *restrict img)
{
	const rc_detector_desc *d = rc_geom_detector(f->g);
	const int nz = rc_geom_volume(f->g)->nz;
	const double au = P[0] * xw + P[1] * yw + P[3], av = P[4] * xw + P[5] * yw + P[7];
	const double aw = P[8] * xw + P[9] * yw + P[11];
	for (int z = 0; z < nz; z++) {
		double zw = f->zw[z];
		double w = aw + P[10] * zw;
		if (!(w > 0))
			continue;
		double iw = 1.0 / w;
		double u = (au + P[2] * zw) * iw, v = (av + P[6] * zw) * iw + 1;
		if (!(u > -1 && u < d->nu && v >= 0 && v <= d->nv + 1))
			continue;
		double fl = floor(u);
		float *c0 = img + ((size_t)fl + 1) * (size_t)f->Hs, fu = (float)(u - fl);
		deposit(c0, c0 + f->Hs, 1.0f - fu, fu, (float)v, (float)(iw * iw) * x[(size_t)z * zstride], 1.0f);
	}
}

static void splat_task(void *arg, long t, int worker)
{
	const struct splat_ctx *c = arg;
	const rc_fps *f = c->f;
	const rc_volume_desc *v = rc_geom_volume(f->g);
	const rc_detector_desc *d = rc_geom_detector(f->g);
	const int k = c->first + (int)t;
	const double *P = rc_geom_view(f->g, k)->P;
	const int cone = P[2] == 0 && P[10] == 0;
	float *img = f->img + (size_t)worker * f->img_floats;
	const size_t zstride = (size_t)v->nx * (size_t)v->ny;
	memset(img, 0, f->img_floats * sizeof(float));
	if (cone)
		cone_view(f, P, c->vol, c->xt, img, f->colbuf + (size_t)worker * (size_t)v->nz, c->col_fn,
			  c->constant);
	else
		for (int iy = 0; iy < v->ny; iy++)
			for (int ix = 0; ix < v->nx; ix++) {
				double X[3];
				rc_volume_voxel_pos(v, ix, iy, 0, X);
				const float *x = c->vol + (size_t)iy * (size_t)v->nx + (size_t)ix;
				general_column(f, P, X[0], X[1], x, zstride, img);
			}
	rc_splat_gain gn;
	float gain[RC_SPLAT_GAIN_CHUNK];
	rc_splat_gain_init(f->g, k, &gn);
	for (int j = 0; j < d->nv; j++) {
		float *out = c->proj + rc_geom_row_offset(f->g, k, j);
		const float *in = img + (size_t)f->Hs + (size_t)j + 1;
		for (int i0 = 0; i0 < d->nu; i0 += RC_SPLAT_GAIN_CHUNK) {
			int m = d->nu - i0 < RC_SPLAT_GAIN_CHUNK ? d->nu - i0 : RC_SPLAT_GAIN_CHUNK;
			rc_splat_gain_line(&gn, i0, j, 0, m, gain);
			for (int i = 0; i < m; i++)
				out[i0 + i] = in[(size_t)(i0 + i) * (size_t)f->Hs] * gain[i];
		}
	}
}

void rc_fp_splat(rc_fps *f, rc_pool *pool, rc_cpu_isa isa, const float *vol, float *proj, int first, int last)
{
	static const rc_splat_col_fn fns[RC_ISA_COUNT] = { rc_splat_col_baseline, rc_splat_col_avx2,
							   rc_splat_col_avx512 };
	const rc_volume_desc *v = rc_geom_volume(f->g);
	struct splat_ctx c = { .f = f, .vol = vol, .proj = proj, .first = first,
			       .col_fn = fns[rc_cpu_isa_supported(isa) ? isa : RC_ISA_BASELINE] };
	if (last <= first)
		return;
	size_t n = rc_volume_count(v), i = 1;
	while (i < n && vol[i] == vol[0])
		i++;
	c.constant = i == n;
	if (c.constant)
		goto project; /* no column is read */
	c.xt = rc_zfast_fill(&f->zf, v, vol, pool);
project:
	rc_pool_run(pool, last - first, splat_task, &c);
}

#define RC_SPLAT_SUFFIX baseline
#include "projectors/proj_splat_col.h"
