/*
 * Tests of server/live/preview.c, the slice previews: every axis and several
 * indices of a small volume whose voxels are all different, extracted from
 * a copy of only the span preview_span names (ASan catches a read outside
 * it), rendered to PNG and decoded back with libpng's reader, against the
 * slice and the grey levels computed here from preview.h's rules; the window
 * arithmetic row by row; the default window (the 0.5 % / 99.5 % points by
 * selection) against a full sort, on a flat slice and with NaN and inf; the
 * size cap; and the cache: a hit returns the rendered bytes, a key being
 * rendered makes a second request wait for it, a full set of render slots
 * answers busy, and the least recently used entry is the one evicted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <png.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live/preview.h"

/* V(x, y, z) of the test volume: every voxel its own value. */
static float voxel(int x, int y, int z)
{
	return (float)(x + 10 * y + 100 * z);
}

static float *make_volume(const int d[3])
{
	float *v = malloc((size_t)d[0] * d[1] * d[2] * sizeof *v);
	assert_non_null(v);
	for (int z = 0; z < d[2]; z++)
		for (int y = 0; y < d[1]; y++)
			for (int x = 0; x < d[0]; x++)
				v[((size_t)z * d[1] + y) * d[0] + x] = voxel(x, y, z);
	return v;
}

/* Pixel (row r, column c) of slice k of axis, from preview.h's table:
 * coronal and sagittal rows count down from the last z (superior). */
static float expected(const int d[3], preview_axis axis, int k, int r, int c)
{
	switch (axis) {
	case PREVIEW_AXIS_Z: return voxel(c, r, k);
	case PREVIEW_AXIS_Y: return voxel(c, k, d[2] - 1 - r);
	default: return voxel(k, c, d[2] - 1 - r);
	}
}

static uint8_t grey_of(double x, double lo, double hi)
{
	if (!isfinite(x))
		return 0;
	if (hi <= lo)
		return x < lo ? 0 : x > hi ? 255 : 128;
	double g = round((x - lo) / (hi - lo) * 255.0);
	return g < 0 ? 0 : g > 255 ? 255 : (uint8_t)g;
}

/* Decodes an 8-bit grey PNG; *w, *h its size. */
static uint8_t *decode(const bytebuf *b, int *w, int *h)
{
	png_image img;
	memset(&img, 0, sizeof img);
	img.version = PNG_IMAGE_VERSION;
	assert_true(png_image_begin_read_from_memory(&img, b->p, b->len));
	assert_int_equal(img.format, PNG_FORMAT_GRAY); /* as stored: one 8-bit grey channel */
	uint8_t *px = malloc(PNG_IMAGE_SIZE(img));
	assert_non_null(px);
	assert_true(png_image_finish_read(&img, NULL, px, 0, NULL));
	*w = (int)img.width;
	*h = (int)img.height;
	return px;
}

static void test_axes(void **state)
{
	(void)state;
	const int d[3] = { 5, 4, 3 }; /* nx, ny, nz */
	float *vol = make_volume(d);
	/* the window of the volume's range, 0..234 */
	const preview_window win = { .set = 1, .center = 117, .width = 234 };
	for (int a = 0; a < 3; a++) {
		preview_axis axis = (preview_axis)a;
		int w, h, n;
		preview_geometry(d, axis, &w, &h, &n);
		int want_w = axis == PREVIEW_AXIS_X ? d[1] : d[0], want_h = axis == PREVIEW_AXIS_Z ? d[1] : d[2];
		assert_int_equal(w, want_w);
		assert_int_equal(h, want_h);
		assert_int_equal(n, d[a]); /* slices along x: nx of them, ... */
		for (int k = 0; k < n; k++) {
			uint64_t first, count;
			preview_span(d, axis, k, &first, &count);
			/* only the span, in a buffer of its own: a read outside it is a bug */
			float *span = malloc(count * sizeof *span);
			assert_non_null(span);
			memcpy(span, vol + first, count * sizeof *span);
			float *slice = malloc((size_t)w * h * sizeof *slice);
			assert_non_null(slice);
			preview_extract(span, first, d, axis, k, slice);
			for (int r = 0; r < h; r++)
				for (int c = 0; c < w; c++)
					assert_float_equal(slice[r * w + c], expected(d, axis, k, r, c), 0);

			bytebuf png = { 0 };
			rc_err err;
			assert_int_equal(preview_render(span, first, d, axis, k, &win, &png, &err), 0);
			assert_memory_equal(png.p, "\x89PNG\r\n\x1a\n", 8);
			int pw, ph;
			uint8_t *g = decode(&png, &pw, &ph);
			assert_int_equal(pw, w);
			assert_int_equal(ph, h);
			for (int r = 0; r < h; r++)
				for (int c = 0; c < w; c++)
					assert_int_equal(g[r * w + c], grey_of(expected(d, axis, k, r, c), 0, 234));
			free(g);
			bytebuf_free(&png);
			free(slice);
			free(span);
		}
	}
	free(vol);
}

static void test_window_table(void **state)
{
	(void)state;
	static const struct { double x, lo, hi; uint8_t want; } t[] = {
		{ 0, 0, 255, 0 }, { 255, 0, 255, 255 }, { 100, 0, 255, 100 },
		{ -5, 0, 255, 0 }, { 300, 0, 255, 255 },              /* clamped */
		{ 0.5, 0, 1, 128 }, { 0.25, 0, 1, 64 },               /* 63.75 rounds up */
		{ 40, -160, 240, 128 },                               /* window=40,400: 127.5 -> 128 */
		{ -160, -160, 240, 0 }, { 240, -160, 240, 255 },
		{ NAN, 0, 1, 0 }, { INFINITY, 0, 1, 0 }, { -INFINITY, 0, 1, 0 },
		{ 3, 3, 3, 128 }, { 2, 3, 3, 0 }, { 4, 3, 3, 255 },   /* hi == lo: a threshold */
		{ 0, 0, 1e-310, 0 }, { 1, 0, 1e-310, 255 },           /* too narrow to scale (255 / w = inf): no NaN */
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		float x = (float)t[i].x;
		uint8_t g = 77;
		preview_grey(&x, 1, t[i].lo, t[i].hi, &g);
		if (g != t[i].want)
			print_error("row %zu: %g in [%g, %g] -> %d, want %d\n", i, t[i].x, t[i].lo, t[i].hi, g, t[i].want);
		assert_int_equal(g, t[i].want);
	}
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static void test_window_auto(void **state)
{
	(void)state;
	rc_err err;
	double lo, hi;
	/* a flat slice: lo == hi, every pixel mid-grey */
	float flat[64];
	uint8_t g[64];
	for (int i = 0; i < 64; i++)
		flat[i] = 7.25f;
	assert_int_equal(preview_window_auto(flat, 64, &lo, &hi, &err), 0);
	assert_float_equal(lo, 7.25, 0);
	assert_float_equal(hi, 7.25, 0);
	preview_grey(flat, 64, lo, hi, g);
	for (int i = 0; i < 64; i++)
		assert_int_equal(g[i], 128);
	/* ... and with NaN and inf pixels, which are 0 and do not move the window */
	flat[3] = NAN;
	flat[10] = INFINITY;
	flat[11] = -INFINITY;
	assert_int_equal(preview_window_auto(flat, 64, &lo, &hi, &err), 0);
	assert_float_equal(lo, 7.25, 0);
	assert_float_equal(hi, 7.25, 0);
	preview_grey(flat, 64, lo, hi, g);
	for (int i = 0; i < 64; i++)
		assert_int_equal(g[i], i == 3 || i == 10 || i == 11 ? 0 : 128);
	/* nothing finite: lo = hi = 0 */
	float none[3] = { NAN, INFINITY, NAN };
	assert_int_equal(preview_window_auto(none, 3, &lo, &hi, &err), 0);
	assert_float_equal(lo, 0, 0);
	assert_float_equal(hi, 0, 0);

	/* pseudo-random values with duplicates, NaN and inf, several sizes: the
	 * selection's points against a sort of the finite values */
	static const size_t sizes[] = { 1, 2, 3, 199, 200, 201, 1000, 4099 };
	uint32_t s = 12345;
	for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
		size_t n = sizes[t], m = 0;
		float *px = malloc(n * sizeof *px), *fin = malloc(n * sizeof *fin);
		assert_non_null(px);
		assert_non_null(fin);
		for (size_t i = 0; i < n; i++) {
			s = s * 1664525u + 1013904223u;
			px[i] = (s >> 8) % 97 == 0 ? NAN : (s >> 8) % 89 == 0 ? INFINITY : (float)((s >> 12) % 500) - 250.f;
			if (isfinite(px[i]))
				fin[m++] = px[i];
		}
		assert_int_equal(preview_window_auto(px, n, &lo, &hi, &err), 0);
		if (m) {
			qsort(fin, m, sizeof *fin, cmp_float);
			assert_float_equal(lo, fin[(size_t)floor(0.005 * (double)(m - 1))], 0);
			assert_float_equal(hi, fin[(size_t)ceil(0.995 * (double)(m - 1))], 0);
		}
		free(fin);
		free(px);
	}
}

/* The orientation as a DICOM viewer shows the series (ImageOrientationPatient
 * 1/0/0/0/1/0, +z superior): a bright voxel at (x, y, z) lands, in
 * patient terms, right-left across every view and superior at the top of
 * the coronal and sagittal ones. */
static void test_orientation(void **state)
{
	(void)state;
	const int d[3] = { 9, 7, 5 }, mx = 2, my = 5, mz = 4; /* z = 4: the most superior slice */
	float *vol = calloc((size_t)d[0] * d[1] * d[2], sizeof *vol);
	assert_non_null(vol);
	vol[((size_t)mz * d[1] + my) * d[0] + mx] = 1;
	/* axis: index, then where the marker is (row, column) */
	const int want[3][3] = { [PREVIEW_AXIS_Z] = { mz, my, mx },     /* y down (posterior), x right (left) */
				 [PREVIEW_AXIS_Y] = { my, 0, mx },      /* superior in row 0 */
				 [PREVIEW_AXIS_X] = { mx, 0, my } };    /* anterior (y = 0) on the left */
	for (int a = 0; a < 3; a++) {
		int w, h, n;
		preview_geometry(d, (preview_axis)a, &w, &h, &n);
		float *slice = malloc((size_t)w * h * sizeof *slice);
		assert_non_null(slice);
		preview_extract(vol, 0, d, (preview_axis)a, want[a][0], slice);
		for (int r = 0; r < h; r++)
			for (int c = 0; c < w; c++)
				assert_float_equal(slice[r * w + c], r == want[a][1] && c == want[a][2] ? 1 : 0, 0);
		free(slice);
	}
	free(vol);
}

/* The volume's window: the rule over every voxel (a volume under the
 * sample size is read whole), the same for all slices; and its cache. */
static void test_volume_window(void **state)
{
	(void)state;
	const int d[3] = { 11, 13, 17 };
	size_t n = (size_t)d[0] * d[1] * d[2], m = 0;
	float *vol = malloc(n * sizeof *vol), *fin = malloc(n * sizeof *fin);
	assert_non_null(vol);
	assert_non_null(fin);
	uint32_t s = 777;
	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		/* slices of very different ranges: a slice's own window would differ */
		vol[i] = (s >> 8) % 101 == 0 ? NAN : (float)((s >> 12) % 1000) * (float)(1 + i / (d[0] * d[1]));
		if (isfinite(vol[i]))
			fin[m++] = vol[i];
	}
	qsort(fin, m, sizeof *fin, cmp_float);
	double lo, hi;
	rc_err err;
	assert_int_equal(preview_volume_window(vol, n, &lo, &hi, &err), 0);
	assert_float_equal(lo, fin[(size_t)floor(0.005 * (double)(m - 1))], 0);
	assert_float_equal(hi, fin[(size_t)ceil(0.995 * (double)(m - 1))], 0);
	/* a slice's own window is not the volume's (why the default changed) */
	double slo, shi;
	assert_int_equal(preview_window_auto(vol, (size_t)d[0] * d[1], &slo, &shi, &err), 0);
	assert_true(shi < hi);

	/* a volume over the sample size: a ramp 0..1 in memory order, whose
	 * points are 0.005 and 0.995; the evenly spread runs must find them */
	uint64_t big = PREVIEW_WINDOW_SAMPLE + 3 * PREVIEW_WINDOW_RUN + 17;
	float *ramp = malloc(big * sizeof *ramp);
	assert_non_null(ramp);
	for (uint64_t i = 0; i < big; i++)
		ramp[i] = (float)((double)i / (double)(big - 1));
	assert_int_equal(preview_volume_window(ramp, big, &lo, &hi, &err), 0);
	assert_float_equal(lo, 0.005, 1e-3);
	assert_float_equal(hi, 0.995, 1e-3);
	ramp[big - 1] = NAN; /* the last run ends at the last voxel (ASan: not past it) */
	assert_int_equal(preview_volume_window(ramp, big, &lo, &hi, &err), 0);
	assert_float_equal(hi, 0.995, 1e-3);
	free(ramp);

	preview_cache *c;
	assert_int_equal(preview_cache_new(2, 1, &c, &err), 0);
	double a = -1, b = -1;
	assert_int_equal(preview_cache_window_get(c, "job.final", &a, &b), 0);
	for (int i = 0; i < PREVIEW_WINDOWS + 3; i++) { /* more than it keeps: the oldest go */
		char key[32];
		snprintf(key, sizeof key, "job%d.final", i);
		preview_cache_window_put(c, key, i, i + 0.5);
	}
	assert_int_equal(preview_cache_window_get(c, "job0.final", &a, &b), 0);
	assert_int_equal(preview_cache_window_get(c, "job3.final", &a, &b), 1);
	assert_float_equal(a, 3, 0);
	assert_float_equal(b, 3.5, 0);
	preview_cache_window_put(c, "job3.final", 4, 5); /* the same key again replaces it */
	assert_int_equal(preview_cache_window_get(c, "job3.final", &a, &b), 1);
	assert_float_equal(a, 4, 0);
	preview_cache_free(c);
	free(fin);
	free(vol);
}

/* The whole render with the default window: a slice with NaN decodes to the
 * levels of the window the data gives. */
static void test_render_default(void **state)
{
	(void)state;
	const int d[3] = { 16, 8, 1 };
	float px[128];
	for (int i = 0; i < 128; i++)
		px[i] = (float)i;
	px[5] = NAN;
	bytebuf png = { 0 };
	rc_err err;
	assert_int_equal(preview_render(px, 0, d, PREVIEW_AXIS_Z, 0, NULL, &png, &err), 0);
	double lo, hi;
	assert_int_equal(preview_window_auto(px, 128, &lo, &hi, &err), 0);
	assert_float_equal(lo, 0, 0);   /* 127 finite values: floor(0.63) = 0 */
	assert_float_equal(hi, 127, 0); /* ceil(125.37) = 126, the 127th finite value is 127 */
	int w, h;
	uint8_t *g = decode(&png, &w, &h);
	assert_int_equal(w, 16);
	assert_int_equal(h, 8);
	for (int i = 0; i < 128; i++)
		assert_int_equal(g[i], grey_of(px[i], lo, hi));
	free(g);
	bytebuf_free(&png);
}

static void test_too_big(void **state)
{
	(void)state;
	const int d[3] = { 5000, 5000, 2 };
	bytebuf png = { 0 };
	rc_err err;
	/* refused before a pixel is read */
	assert_int_equal(preview_render(NULL, 0, d, PREVIEW_AXIS_Z, 0, NULL, &png, &err), RC_ETOOBIG);
	assert_string_equal(err.field, "axis");
	assert_int_equal(png.len, 0);
}

struct waiter {
	preview_cache *c;
	const char *key;
	int got;
	bytebuf b;
};

static void *wait_for(void *p)
{
	struct waiter *w = p;
	w->got = preview_cache_get(w->c, w->key, 5.0, &w->b);
	return NULL;
}

static void test_cache(void **state)
{
	(void)state;
	preview_cache *c;
	rc_err err;
	assert_int_equal(preview_cache_new(1, 2, &c, &err), RC_EINVAL); /* fewer entries than renders */
	assert_int_equal(preview_cache_new(3, 2, &c, &err), 0);
	bytebuf b = { 0 };
	assert_int_equal(preview_cache_get(c, "a", 1, &b), PREVIEW_RENDER);
	/* a second request for "a" waits for that render and gets its bytes */
	struct waiter w = { .c = c, .key = "a" };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, wait_for, &w), 0);
	assert_int_equal(preview_cache_get(c, "b", 1, &b), PREVIEW_RENDER);
	/* both slots rendering: a third key is busy */
	assert_int_equal(preview_cache_get(c, "c", 0.05, &b), PREVIEW_BUSY);
	preview_cache_put(c, "a", "AAAA", 4);
	pthread_join(th, NULL);
	assert_int_equal(w.got, PREVIEW_HIT);
	assert_int_equal(w.b.len, 4);
	assert_memory_equal(w.b.p, "AAAA", 4);
	bytebuf_free(&w.b);
	/* a failed render keeps nothing: the next request renders */
	preview_cache_put(c, "b", NULL, 0);
	assert_int_equal(preview_cache_get(c, "b", 1, &b), PREVIEW_RENDER);
	preview_cache_put(c, "b", "BB", 2);
	/* hits return the same bytes, appended to what the buffer held */
	bytebuf_add(&b, "x", 1);
	assert_int_equal(preview_cache_get(c, "a", 1, &b), PREVIEW_HIT);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.p, "xAAAA", 5);
	b.len = 0;
	/* three entries: a, b, c; "a" was used last, so d evicts b */
	assert_int_equal(preview_cache_get(c, "c", 1, &b), PREVIEW_RENDER);
	preview_cache_put(c, "c", "C", 1);
	assert_int_equal(preview_cache_get(c, "a", 1, &b), PREVIEW_HIT);
	b.len = 0;
	assert_int_equal(preview_cache_get(c, "d", 1, &b), PREVIEW_RENDER);
	preview_cache_put(c, "d", "D", 1);
	assert_int_equal(preview_cache_get(c, "a", 1, &b), PREVIEW_HIT);
	assert_int_equal(preview_cache_get(c, "c", 1, &b), PREVIEW_HIT);
	assert_int_equal(preview_cache_get(c, "d", 1, &b), PREVIEW_HIT);
	assert_int_equal(preview_cache_get(c, "b", 1, &b), PREVIEW_RENDER);
	preview_cache_put(c, "b", NULL, 0);
	assert_int_equal(b.len, 6); /* A A A A C D */
	assert_memory_equal(b.p, "AAAACD", 6);
	bytebuf_free(&b);
	preview_cache_free(c);
	preview_cache_free(NULL);
}

/* The real thing through the cache: the bytes of a hit are the render's. */
static void test_cache_render(void **state)
{
	(void)state;
	const int d[3] = { 7, 6, 5 };
	float *vol = make_volume(d);
	preview_cache *c;
	rc_err err;
	assert_int_equal(preview_cache_new(2, 1, &c, &err), 0);
	bytebuf first = { 0 }, again = { 0 };
	assert_int_equal(preview_cache_get(c, "job.final.y3.auto", 1, &first), PREVIEW_RENDER);
	assert_int_equal(preview_render(vol, 0, d, PREVIEW_AXIS_Y, 3, NULL, &first, &err), 0);
	preview_cache_put(c, "job.final.y3.auto", first.p, first.len);
	assert_int_equal(preview_cache_get(c, "job.final.y3.auto", 1, &again), PREVIEW_HIT);
	assert_int_equal(again.len, first.len);
	assert_memory_equal(again.p, first.p, first.len);
	bytebuf_free(&first);
	bytebuf_free(&again);
	preview_cache_free(c);
	free(vol);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_axes),
		cmocka_unit_test(test_window_table),
		cmocka_unit_test(test_window_auto),
		cmocka_unit_test(test_orientation),
		cmocka_unit_test(test_volume_window),
		cmocka_unit_test(test_render_default),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_cache_render),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
