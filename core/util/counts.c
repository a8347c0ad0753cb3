/*
 * counts: see counts.h.  The per-pixel scale 1 / (flat - dark) is computed
 * once; each image is then one pass (subtract, multiply, log) and a short
 * fix-up of its bad pixels from a list built once.
 */
#include "util/counts.h"

#define RC_COUNTS_SUFFIX baseline
#include "util/counts_row.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A bad pixel: value = wa * image[a] + wb * image[b] (good pixels only). */
typedef struct fix {
	int j, i;
	int ja, ia, jb, ib;
	float wa, wb;
} fix;

typedef uint64_t (*row_u16_fn)(const uint16_t *restrict, const float *restrict, const float *restrict,
			       float *restrict, int);
typedef uint64_t (*row_f32_fn)(const float *restrict, const float *restrict, const float *restrict, float *restrict,
			       int);

struct rc_counts {
	rc_counts_dtype t;
	row_u16_fn row_u16;  /* the widest ISA the CPU has (counts_row.h) */
	row_f32_fn row_f32;
	int rows, nu;
	float *dark;   /* rows * nu */
	float *scale;  /* 1 / (flat - dark); 0 where dead */
	fix *fixes;
	size_t nfix;
	uint64_t dead;
};

size_t rc_counts_sample_bytes(rc_counts_dtype t)
{
	return t == RC_COUNTS_U16 ? 2 : 4;
}

/* The nearest good pixel of row j from i in direction d (-1, +1), or -1. */
static int good_along_u(const uint8_t *badm, int nu, int j, int i, int d)
{
	for (int x = i + d; x >= 0 && x < nu; x += d)
		if (!badm[(size_t)j * nu + x])
			return x;
	return -1;
}

static int good_along_v(const uint8_t *badm, int rows, int nu, int j, int i, int d)
{
	for (int y = j + d; y >= 0 && y < rows; y += d)
		if (!badm[(size_t)y * nu + i])
			return y;
	return -1;
}

/* The fix of bad pixel (j, i) from badm's good pixels (counts.h). */
static fix fix_of(const uint8_t *badm, int rows, int nu, int j, int i)
{
	fix f = { .j = j, .i = i, .ja = j, .jb = j, .ia = 0, .ib = 0, .wa = 0, .wb = 0 };
	int l = good_along_u(badm, nu, j, i, -1), r = good_along_u(badm, nu, j, i, +1);
	if (l >= 0 && r >= 0) {
		f.ia = l;
		f.ib = r;
		f.wb = (float)(i - l) / (float)(r - l);
		f.wa = 1.0f - f.wb;
	} else if (l >= 0 || r >= 0) {
		f.ia = f.ib = l >= 0 ? l : r;
		f.wa = 1.0f;
	} else {
		int dn = good_along_v(badm, rows, nu, j, i, -1), up = good_along_v(badm, rows, nu, j, i, +1);
		f.ia = f.ib = i;
		if (dn >= 0 && up >= 0) {
			f.ja = dn;
			f.jb = up;
			f.wa = f.wb = 0.5f;
		} else if (dn >= 0 || up >= 0) {
			f.ja = f.jb = dn >= 0 ? dn : up;
			f.wa = 1.0f;
		}
	}
	return f;
}

int rc_counts_new(rc_counts_dtype t, int rows, int nu, const float *flat, const float *dark, const uint8_t *bad,
		  rc_counts **ret, rc_err *err)
{
	size_t n = (size_t)rows * (size_t)nu;
	rc_counts *c = calloc(1, sizeof *c);
	uint8_t *badm = c ? calloc(n ? n : 1, 1) : NULL;
	int rc = 0;
	if (!c || !badm || !(c->dark = malloc(sizeof(float) * n)) || !(c->scale = malloc(sizeof(float) * n))) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the %zu-pixel flat and dark fields", n);
		goto out;
	}
	c->t = t;
	c->row_u16 = rc_counts_row_u16_baseline;
	c->row_f32 = rc_counts_row_f32_baseline;
#if defined(__x86_64__) && defined(__GNUC__)
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		c->row_u16 = rc_counts_row_u16_avx2;
		c->row_f32 = rc_counts_row_f32_avx2;
	}
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx2") &&
	    __builtin_cpu_supports("fma")) {
		c->row_u16 = rc_counts_row_u16_avx512;
		c->row_f32 = rc_counts_row_f32_avx512;
	}
#endif
	c->rows = rows;
	c->nu = nu;
	size_t nbad = 0;
	for (size_t p = 0; p < n; p++) {
		double g = (double)flat[p] - (double)dark[p];
		c->dark[p] = dark[p];
		c->scale[p] = g > 0 && isfinite(g) ? (float)(1.0 / g) : 0.0f;
		if (c->scale[p] == 0.0f || !isfinite(c->scale[p])) {
			c->scale[p] = 0.0f;
			c->dead++;
		}
		badm[p] = (bad && bad[p]) || c->scale[p] == 0.0f;
		nbad += badm[p];
	}
	if (n && c->dead == n) {
		rc = rc_fail(err, RC_EINVAL, "input.flat",
			     "the flat field is not above the dark field at any pixel: p = -ln((I - dark) / (flat - "
			     "dark)) needs flat > dark");
		goto out;
	}
	c->fixes = malloc(sizeof(fix) * (nbad ? nbad : 1));
	if (!c->fixes) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %zu bad pixels", nbad);
		goto out;
	}
	for (int j = 0; j < rows; j++)
		for (int i = 0; i < nu; i++)
			if (badm[(size_t)j * nu + i])
				c->fixes[c->nfix++] = fix_of(badm, rows, nu, j, i);
out:
	free(badm);
	if (rc) {
		rc_counts_free(c);
		return rc;
	}
	*ret = c;
	return 0;
}

void rc_counts_free(rc_counts *c)
{
	if (!c)
		return;
	free(c->dark);
	free(c->scale);
	free(c->fixes);
	free(c);
}

uint64_t rc_counts_dead(const rc_counts *c)
{
	return c->dead;
}

uint64_t rc_counts_image(const rc_counts *c, const void *src, uint64_t src_row_stride, float *dst,
			 uint64_t dst_row_stride)
{
	uint64_t clamped = 0;
	for (int j = 0; j < c->rows; j++) {
		const float *dk = c->dark + (size_t)j * c->nu, *sc = c->scale + (size_t)j * c->nu;
		float *d = dst + (uint64_t)j * dst_row_stride;
		if (c->t == RC_COUNTS_U16)
			clamped += c->row_u16((const uint16_t *)src + (uint64_t)j * src_row_stride, dk, sc, d, c->nu);
		else
			clamped += c->row_f32((const float *)src + (uint64_t)j * src_row_stride, dk, sc, d, c->nu);
	}
	/* fixes read good pixels only, so their order does not matter */
	for (size_t f = 0; f < c->nfix; f++) {
		const fix *x = &c->fixes[f];
		float a = dst[(uint64_t)x->ja * dst_row_stride + (uint64_t)x->ia];
		float b = dst[(uint64_t)x->jb * dst_row_stride + (uint64_t)x->ib];
		dst[(uint64_t)x->j * dst_row_stride + (uint64_t)x->i] = x->wa == 0 && x->wb == 0 ? 0.0f : x->wa * a + x->wb * b;
	}
	return clamped + c->dead;
}

void rc_counts_average(rc_counts_dtype t, const void *images, int n, size_t pixels, float *out)
{
	for (size_t p = 0; p < pixels; p++) {
		double s = 0;
		for (int k = 0; k < n; k++)
			s += t == RC_COUNTS_U16 ? (double)((const uint16_t *)images)[(size_t)k * pixels + p]
						: (double)((const float *)images)[(size_t)k * pixels + p];
		out[p] = (float)(s / (n > 0 ? n : 1));
	}
}
