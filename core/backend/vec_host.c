/* vec_host: element-wise loops over host float arrays (vec_host.h); the
 * per-element formulas are elementwise_ops.h's, shared with the devices. */
#include "backend/vec_host.h"

#include <immintrin.h>

#include "backend/elementwise_ops.h"

/* Elements summed in float lanes before the partial sum goes into a double:
 * 16 lanes of 256 terms each keep the float error near 1e-5 relative in
 * the worst case while the lane loop vectorises. */
#define SUM_BLOCK 4096
#define SUM_LANES 16

rc_seg rc_seg_views(const rc_geom *g, int first, int last)
{
	size_t vs = rc_geom_view_stride(g);
	rc_seg s;
	if (rc_geom_is_2d(g)) {
		/* [slice][view][u]: one run of views per slice */
		s.n = rc_geom_volume(g)->nz;
		s.start = (size_t)first * vs;
		s.len = (size_t)(last - first) * vs;
		s.stride = rc_geom_row_stride(g);
	} else {
		s.n = 1;
		s.start = (size_t)first * vs;
		s.len = (size_t)(last - first) * vs;
		s.stride = 0;
	}
	return s;
}

void rc_vfill(float *a, float v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = v;
}

double rc_vdot(const float *a, const float *b, size_t n)
{
	double total = 0.0;
	for (size_t s = 0; s < n; s += SUM_BLOCK) {
		size_t e = n - s < SUM_BLOCK ? n : s + SUM_BLOCK;
		float acc[SUM_LANES] = { 0 };
		size_t i = s;
		for (; i + SUM_LANES <= e; i += SUM_LANES)
			for (int l = 0; l < SUM_LANES; l++)
				acc[l] += a[i + l] * b[i + l];
		double part = 0.0;
		for (int l = 0; l < SUM_LANES; l++)
			part += acc[l];
		for (; i < e; i++)
			part += (double)a[i] * b[i];
		total += part;
	}
	return total;
}

double rc_vsum(const float *a, size_t n)
{
	double total = 0.0;
	for (size_t s = 0; s < n; s += SUM_BLOCK) {
		size_t e = n - s < SUM_BLOCK ? n : s + SUM_BLOCK;
		float acc[SUM_LANES] = { 0 };
		size_t i = s;
		for (; i + SUM_LANES <= e; i += SUM_LANES)
			for (int l = 0; l < SUM_LANES; l++)
				acc[l] += a[i + l];
		double part = 0.0;
		for (int l = 0; l < SUM_LANES; l++)
			part += acc[l];
		for (; i < e; i++)
			part += a[i];
		total += part;
	}
	return total;
}

void rc_vaxpy(float *restrict y, float a, const float *restrict x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = rc_ew_axpy(y[i], a, x[i]);
}

void rc_vxpay(float *restrict y, const float *restrict x, float a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = rc_ew_xpay(x[i], a, y[i]);
}

void rc_vinv_guarded(float *a, size_t n, double rel)
{
	/* the maximum in SSE (baseline x86-64) by hand: GCC keeps a float max
	 * scalar unless NaNs may be ignored; maxps(x, m) is rc_ew_max(m, x)
	 * lane by lane, NaN included */
	__m128 m4 = _mm_setzero_ps();
	size_t i = 0;
	for (; i + 4 <= n; i += 4)
		m4 = _mm_max_ps(_mm_loadu_ps(a + i), m4);
	float lane[4], mx = 0.0f;
	_mm_storeu_ps(lane, m4);
	for (int l = 0; l < 4; l++)
		mx = rc_ew_max(mx, lane[l]);
	for (; i < n; i++)
		mx = rc_ew_max(mx, a[i]);
	float eps = (float)(rel * mx);
	/* kept: above eps and above 0; with mx == 0 nothing is: all become 0.
	 * Vectorised: this file is compiled with -fno-trapping-math (Makefile) */
	for (i = 0; i < n; i++)
		a[i] = rc_ew_inv_guarded(a[i], eps);
}

void rc_vupdate(float *restrict v, const float *restrict u, const float *restrict c,
		float lambda, int nonneg, size_t n)
{
	/* one pass with the clamp (a second pass over v cost a quarter of the
	 * call's memory traffic); each loop vectorises */
	if (nonneg)
		for (size_t i = 0; i < n; i++)
			v[i] = rc_ew_update(v[i], u[i], c[i], lambda, 1);
	else
		for (size_t i = 0; i < n; i++)
			v[i] = rc_ew_update(v[i], u[i], c[i], lambda, 0);
}

void rc_vmul2(float *restrict v, const float *restrict u, const float *restrict c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = rc_ew_mul(v[i], u[i], c[i]);
}

/* Residual of one contiguous block; weighted (w) and plain variants are
 * separate loops so that each vectorises without a branch inside. */
static double residual_block(float *restrict e, const float *restrict p,
			     const float *restrict w, size_t n)
{
	double total = 0.0;
	for (size_t s = 0; s < n; s += SUM_BLOCK) {
		size_t end = n - s < SUM_BLOCK ? n : s + SUM_BLOCK;
		float acc[SUM_LANES] = { 0 };
		size_t i = s;
		for (; i + SUM_LANES <= end; i += SUM_LANES)
			for (int l = 0; l < SUM_LANES; l++) {
				float d = rc_ew_residual(p[i + l], e[i + l]);
				acc[l] += d * d;
				e[i + l] = rc_ew_weigh(d, w[i + l]);
			}
		double part = 0.0;
		for (int l = 0; l < SUM_LANES; l++)
			part += acc[l];
		for (; i < end; i++) {
			float d = rc_ew_residual(p[i], e[i]);
			part += (double)d * d;
			e[i] = rc_ew_weigh(d, w[i]);
		}
		total += part;
	}
	return total;
}

static double residual_block_plain(float *restrict e, const float *restrict p, size_t n)
{
	double total = 0.0;
	for (size_t s = 0; s < n; s += SUM_BLOCK) {
		size_t end = n - s < SUM_BLOCK ? n : s + SUM_BLOCK;
		float acc[SUM_LANES] = { 0 };
		size_t i = s;
		for (; i + SUM_LANES <= end; i += SUM_LANES)
			for (int l = 0; l < SUM_LANES; l++) {
				float d = rc_ew_residual(p[i + l], e[i + l]);
				acc[l] += d * d;
				e[i + l] = d;
			}
		double part = 0.0;
		for (int l = 0; l < SUM_LANES; l++)
			part += acc[l];
		for (; i < end; i++) {
			float d = rc_ew_residual(p[i], e[i]);
			part += (double)d * d;
			e[i] = d;
		}
		total += part;
	}
	return total;
}

double rc_vresidual(const rc_seg *s, float *restrict e, const float *restrict p,
		    const float *restrict w)
{
	double total = 0.0;
	for (int b = 0; b < s->n; b++) {
		size_t o = s->start + (size_t)b * s->stride;
		total += w ? residual_block(e + o, p + o, w + o, s->len)
			   : residual_block_plain(e + o, p + o, s->len);
	}
	return total;
}

double rc_vratio(float *restrict e, const float *restrict p, float eps, size_t n)
{
	double r2 = 0.0;
	for (size_t i = 0; i < n; i++) {
		float d = rc_ew_residual(p[i], e[i]);
		r2 += (double)d * d;
		e[i] = rc_ew_ratio(e[i], p[i], eps);
	}
	return r2;
}
