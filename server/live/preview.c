/*
 * preview: slice -> window -> grey bytes -> PNG (libpng into a bytebuf), and
 * the cache of rendered PNGs (preview.h).
 *
 * The render is the costly part of a preview (the slice's pages, the
 * selection, deflate), and pollers ask for the same slice of the same volume
 * generation over and over, so the cache keeps the last few PNGs by key and
 * lets one request render a key while the others asking for it wait.  The
 * same mutex and condition variable bound the renders in flight: a counting
 * semaphore with a timed wait, so a burst of different slices gets a quick
 * "busy" instead of a queue of renders.
 */
#include "live/preview.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void preview_geometry(const int dims[3], preview_axis axis, int *ret_w, int *ret_h, int *ret_n)
{
	switch (axis) {
	case PREVIEW_AXIS_Z: *ret_w = dims[0], *ret_h = dims[1], *ret_n = dims[2]; break;
	case PREVIEW_AXIS_Y: *ret_w = dims[0], *ret_h = dims[2], *ret_n = dims[1]; break;
	default: *ret_w = dims[1], *ret_h = dims[2], *ret_n = dims[0]; break;
	}
}

/* Element (x, y, z) of the volume. */
static uint64_t elem(const int dims[3], uint64_t x, uint64_t y, uint64_t z)
{
	return (z * (uint64_t)dims[1] + y) * (uint64_t)dims[0] + x;
}

void preview_span(const int dims[3], preview_axis axis, int index, uint64_t *ret_first, uint64_t *ret_count)
{
	uint64_t k = (uint64_t)index, first, last;
	uint64_t nx = (uint64_t)dims[0], ny = (uint64_t)dims[1], nz = (uint64_t)dims[2];
	switch (axis) {
	case PREVIEW_AXIS_Z: first = elem(dims, 0, 0, k), last = elem(dims, nx - 1, ny - 1, k); break;
	case PREVIEW_AXIS_Y: first = elem(dims, 0, k, 0), last = elem(dims, nx - 1, k, nz - 1); break;
	default: first = elem(dims, k, 0, 0), last = elem(dims, k, ny - 1, nz - 1); break;
	}
	*ret_first = first;
	*ret_count = last - first + 1;
}

void preview_extract(const float *data, uint64_t first, const int dims[3], preview_axis axis, int index,
		     float *out)
{
	int w, h, n;
	preview_geometry(dims, axis, &w, &h, &n);
	for (int r = 0; r < h; r++) {
		float *row = out + (size_t)r * (size_t)w;
		/* coronal and sagittal rows run from superior (the last z) down */
		uint64_t z = axis == PREVIEW_AXIS_Z ? (uint64_t)index : (uint64_t)(h - 1 - r);
		if (axis == PREVIEW_AXIS_Z || axis == PREVIEW_AXIS_Y) { /* a row is a run of x */
			uint64_t e = axis == PREVIEW_AXIS_Z ? elem(dims, 0, (uint64_t)r, z) : elem(dims, 0, (uint64_t)index, z);
			memcpy(row, data + (e - first), (size_t)w * sizeof *row);
		} else { /* axis x: a row of y at stride nx */
			const float *p = data + (elem(dims, (uint64_t)index, 0, z) - first);
			for (int c = 0; c < w; c++)
				row[c] = p[(size_t)c * (size_t)dims[0]];
		}
	}
}

static float median3(float a, float b, float c)
{
	if (a > b) { float t = a; a = b; b = t; }
	if (b > c) b = c;
	return a > b ? a : b;
}

/* The k-th smallest of a[0..n-1] (Hoare's selection, median-of-three
 * pivots; reorders a).  Average O(n), and no NaN here: a holds finite
 * values only, so every comparison is a total order. */
static float select_kth(float *a, ptrdiff_t n, ptrdiff_t k)
{
	ptrdiff_t lo = 0, hi = n - 1;
	while (lo < hi) {
		float pivot = median3(a[lo], a[lo + (hi - lo) / 2], a[hi]);
		ptrdiff_t i = lo, j = hi;
		while (i <= j) {
			while (a[i] < pivot)
				i++;
			while (a[j] > pivot)
				j--;
			if (i <= j) {
				float t = a[i];
				a[i++] = a[j];
				a[j--] = t;
			}
		}
		/* a[lo..j] <= pivot <= a[i..hi], and anything between equals it */
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return a[k];
	}
	return a[k];
}

/* The percentile window of the finite values in nruns runs of `run`
 * consecutive values of px[0..n), evenly spaced from the first value to the
 * last (one run: px[0..run)). */
static int window_of(const float *px, uint64_t n, size_t run, size_t nruns, double *ret_lo, double *ret_hi,
		     rc_err *err)
{
	size_t total = run * nruns;
	float *v = malloc((total ? total : 1) * sizeof *v);
	if (!v)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the preview's window (%zu values)", total);
	size_t m = 0;
	for (size_t r = 0; r < nruns; r++) {
		const float *p = px + (nruns > 1 ? (uint64_t)r * (n - run) / (nruns - 1) : 0);
		for (size_t i = 0; i < run; i++)
			if (isfinite(p[i]))
				v[m++] = p[i];
	}
	double lo = 0, hi = 0;
	if (m) {
		ptrdiff_t klo = (ptrdiff_t)floor(0.005 * (double)(m - 1));
		ptrdiff_t khi = (ptrdiff_t)ceil(0.995 * (double)(m - 1));
		lo = select_kth(v, (ptrdiff_t)m, klo);
		/* after the first selection everything past klo is >= v[klo] */
		hi = khi > klo ? select_kth(v + klo + 1, (ptrdiff_t)m - klo - 1, khi - klo - 1) : lo;
	}
	free(v);
	*ret_lo = lo;
	*ret_hi = hi;
	return 0;
}

int preview_window_auto(const float *px, size_t n, double *ret_lo, double *ret_hi, rc_err *err)
{
	return window_of(px, n, n, 1, ret_lo, ret_hi, err);
}

int preview_volume_window(const float *vol, uint64_t n, double *ret_lo, double *ret_hi, rc_err *err)
{
	/* a big volume: runs of a page or so each, so that the read is bounded
	 * (~64 MB) however big the volume is, and spread over all of it */
	if (n > PREVIEW_WINDOW_SAMPLE)
		return window_of(vol, n, PREVIEW_WINDOW_RUN, (size_t)(PREVIEW_WINDOW_SAMPLE / PREVIEW_WINDOW_RUN),
				 ret_lo, ret_hi, err);
	return window_of(vol, n, (size_t)n, 1, ret_lo, ret_hi, err);
}

void preview_grey(const float *px, size_t n, double lo, double hi, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		double x = px[i];
		if (!isfinite(x))
			out[i] = 0;
		else if (hi <= lo)
			out[i] = x < lo ? 0 : x > hi ? 255 : 128;
		else {
			/* in the documented order (a reciprocal would round 127.5
			 * of window=40,400 down); !(g > 0) also catches a NaN */
			double g = (x - lo) / (hi - lo) * 255.0 + 0.5;
			out[i] = !(g > 0) ? 0 : g >= 255 ? 255 : (uint8_t)g;
		}
	}
}

/* libpng reports errors by longjmp; this carries its message out. */
struct png_sink {
	bytebuf *out;
	char why[160];
};

static void png_on_error(png_structp p, png_const_charp msg)
{
	struct png_sink *s = png_get_error_ptr(p);
	snprintf(s->why, sizeof s->why, "%s", msg);
	png_longjmp(p, 1);
}

static void png_on_warning(png_structp p, png_const_charp msg)
{
	(void)p; /* nothing we write can warn; a library warning is no failure */
	(void)msg;
}

static void png_on_write(png_structp p, png_bytep data, size_t n)
{
	struct png_sink *s = png_get_io_ptr(p);
	if (bytebuf_add(s->out, data, n))
		png_error(p, "out of memory");
}

static void png_on_flush(png_structp p)
{
	(void)p;
}

/* The libpng calls, apart from preview_png so that no local variable of
 * its lives across libpng's longjmp.  0, or -1 (sink->why says why). */
static int png_encode(png_structp p, png_infop info, struct png_sink *sink, const uint8_t *grey, int w, int h)
{
	if (setjmp(png_jmpbuf(p)))
		return -1;
	png_set_write_fn(p, sink, png_on_write, png_on_flush);
	png_set_IHDR(p, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	/* Level 3: previews are polled and cached, so speed over the last few
	 * per cent of size (zlib's default 6 is ~2x slower on CT slices). */
	png_set_compression_level(p, 3);
	png_write_info(p, info);
	for (int r = 0; r < h; r++)
		png_write_row(p, grey + (size_t)r * (size_t)w);
	png_write_end(p, NULL);
	return 0;
}

int preview_png(const uint8_t *grey, int w, int h, bytebuf *out, rc_err *err)
{
	struct png_sink sink = { .out = out };
	size_t len0 = out->len;
	int rc = 0;
	png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, png_on_error, png_on_warning);
	png_infop info = p ? png_create_info_struct(p) : NULL;
	if (!info) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the PNG encoder");
		goto out_destroy;
	}
	if (png_encode(p, info, &sink, grey, w, h)) {
		out->len = len0;
		rc = rc_fail(err, !strcmp(sink.why, "out of memory") ? RC_ENOMEM : RC_EINTERNAL, "",
			     "cannot encode the preview as PNG: %s", sink.why);
	}
out_destroy:
	png_destroy_write_struct(&p, &info);
	return rc;
}

int preview_render(const float *data, uint64_t first, const int dims[3], preview_axis axis, int index,
		   const preview_window *win, bytebuf *png, rc_err *err)
{
	int w, h, n, rc;
	preview_geometry(dims, axis, &w, &h, &n);
	size_t npx = (size_t)w * (size_t)h;
	if (npx > PREVIEW_MAX_PIXELS)
		return rc_fail(err, RC_ETOOBIG, "axis", "a slice along %c is %d x %d pixels; previews go up to %llu pixels "
			       "(download the volume instead)", "xyz"[axis], w, h, (unsigned long long)PREVIEW_MAX_PIXELS);
	float *px = malloc(npx * sizeof *px);
	uint8_t *grey = malloc(npx);
	if (!px || !grey) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a %d x %d preview", w, h);
		goto out_free;
	}
	preview_extract(data, first, dims, axis, index, px);
	double lo, hi;
	if (win && win->set) {
		lo = win->center - win->width / 2;
		hi = win->center + win->width / 2;
	} else if ((rc = preview_window_auto(px, npx, &lo, &hi, err))) {
		goto out_free;
	}
	preview_grey(px, npx, lo, hi, grey);
	rc = preview_png(grey, w, h, png, err);
out_free:
	free(grey);
	free(px);
	return rc;
}

/* --- the cache ---------------------------------------------------------- */

enum { SLOT_EMPTY = 0, SLOT_RENDERING, SLOT_READY };

struct slot {
	int state;
	char key[PREVIEW_KEY_MAX + 1];
	unsigned char *png;
	size_t len;
	unsigned long long used; /* tick of the last hit or store: the oldest goes first */
};

struct window_entry {
	char key[PREVIEW_KEY_MAX + 1]; /* "" when empty */
	double lo, hi;
	unsigned long long used;
};

struct preview_cache {
	struct window_entry windows[PREVIEW_WINDOWS];
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a render ended: a key became ready or a slot came free */
	struct slot *slots;
	int nslots, renders, rendering;
	unsigned long long tick;
};

int preview_cache_new(int entries, int renders, preview_cache **ret, rc_err *err)
{
	if (renders < 1 || entries < renders)
		return rc_fail(err, RC_EINVAL, "preview_concurrency",
			       "the preview cache needs 1 <= renders <= entries (got %d renders, %d entries)", renders, entries);
	preview_cache *c = calloc(1, sizeof *c);
	pthread_condattr_t ca;
	if (!c || !(c->slots = calloc((size_t)entries, sizeof *c->slots))) {
		free(c);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the preview cache");
	}
	pthread_mutex_init(&c->lock, NULL);
	/* timed waits against the monotonic clock: a clock step is no timeout */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->changed, &ca);
	pthread_condattr_destroy(&ca);
	c->nslots = entries;
	c->renders = renders;
	*ret = c;
	return 0;
}

void preview_cache_free(preview_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nslots; i++)
		free(c->slots[i].png);
	free(c->slots);
	pthread_cond_destroy(&c->changed);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static struct slot *find(preview_cache *c, const char *key)
{
	for (int i = 0; i < c->nslots; i++)
		if (c->slots[i].state != SLOT_EMPTY && !strcmp(c->slots[i].key, key))
			return &c->slots[i];
	return NULL;
}

/* An empty slot, else the least recently used ready one (there is one:
 * fewer than `renders` <= nslots slots are rendering). */
static struct slot *victim(preview_cache *c)
{
	struct slot *best = NULL;
	for (int i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];
		if (s->state == SLOT_EMPTY)
			return s;
		if (s->state == SLOT_READY && (!best || s->used < best->used))
			best = s;
	}
	return best;
}

int preview_cache_get(preview_cache *c, const char *key, double wait_s, bytebuf *hit)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	double whole = floor(wait_s);
	until.tv_sec += (time_t)whole;
	until.tv_nsec += (long)((wait_s - whole) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	int rc, cacheable = strlen(key) <= PREVIEW_KEY_MAX;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct slot *s = cacheable ? find(c, key) : NULL;
		if (s && s->state == SLOT_READY) {
			s->used = ++c->tick;
			rc = bytebuf_add(hit, s->png, s->len) ? RC_ENOMEM : PREVIEW_HIT;
			break;
		}
		if (!s && c->rendering < c->renders) {
			c->rendering++;
			struct slot *v = cacheable ? victim(c) : NULL;
			if (v) { /* reserve it: later requests for key wait for this render */
				free(v->png);
				*v = (struct slot){ .state = SLOT_RENDERING, .used = ++c->tick };
				snprintf(v->key, sizeof v->key, "%s", key);
			}
			rc = PREVIEW_RENDER;
			break;
		}
		/* key is being rendered, or every slot is busy: wait for a change */
		if (pthread_cond_timedwait(&c->changed, &c->lock, &until) == ETIMEDOUT) {
			rc = PREVIEW_BUSY;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void preview_cache_put(preview_cache *c, const char *key, const void *png, size_t len)
{
	pthread_mutex_lock(&c->lock);
	struct slot *s = strlen(key) <= PREVIEW_KEY_MAX ? find(c, key) : NULL;
	if (s && s->state == SLOT_RENDERING) {
		unsigned char *copy = png ? malloc(len ? len : 1) : NULL;
		if (copy) {
			memcpy(copy, png, len);
			s->png = copy;
			s->len = len;
			s->state = SLOT_READY;
		} else { /* failed (or no memory to keep it): the next request renders again */
			s->state = SLOT_EMPTY;
		}
	}
	c->rendering--;
	pthread_cond_broadcast(&c->changed);
	pthread_mutex_unlock(&c->lock);
}

int preview_cache_window_get(preview_cache *c, const char *key, double *ret_lo, double *ret_hi)
{
	int found = 0;
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < PREVIEW_WINDOWS && !found; i++) {
		struct window_entry *e = &c->windows[i];
		if (e->key[0] && !strcmp(e->key, key)) {
			*ret_lo = e->lo;
			*ret_hi = e->hi;
			e->used = ++c->tick;
			found = 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

void preview_cache_window_put(preview_cache *c, const char *key, double lo, double hi)
{
	if (!key[0] || strlen(key) > PREVIEW_KEY_MAX)
		return;
	pthread_mutex_lock(&c->lock);
	struct window_entry *v = &c->windows[0];
	for (int i = 0; i < PREVIEW_WINDOWS; i++) {
		struct window_entry *e = &c->windows[i];
		if (e->key[0] && !strcmp(e->key, key)) { /* two requests computed it: keep one */
			v = e;
			break;
		}
		if (e->used < v->used)
			v = e;
	}
	snprintf(v->key, sizeof v->key, "%s", key);
	v->lo = lo;
	v->hi = hi;
	v->used = ++c->tick;
	pthread_mutex_unlock(&c->lock);
}
