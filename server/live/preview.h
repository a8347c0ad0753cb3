/*
 * preview: one slice of a float32 volume as an 8-bit grey PNG, and a small
 * cache of rendered previews that also bounds how many render at once.  No
 * HTTP and no files: server/http/http_preview.c maps the volume, builds the key
 * and answers; this file turns mapped floats into PNG bytes.
 *
 * Invariants:
 *  - The volume is float32 [z][y][x] (x fastest), dims = {nx, ny, nz}.
 *  - Slices (w x h pixels, row-major, row 0 first in the PNG), in the
 *    orientation DICOM viewers show the job's series (server/pacs writes
 *    ImageOrientationPatient 1\0\0\0\1\0 and +z superior, so +x is the
 *    patient's left, +y posterior, +z superior; docs/geometry.md):
 *      axis z, index k: w = nx, h = ny, pixel (row r, column c) = V[k][r][c]
 *      axis y, index k: w = nx, h = nz, pixel (r, c) = V[nz-1-r][k][c]
 *      axis x, index k: w = ny, h = nz, pixel (r, c) = V[nz-1-r][c][k]
 *    so an axial slice is the series' own image (x = 0, the patient's
 *    right, on the left; y = 0, anterior, at the top) and coronal and
 *    sagittal slices have the highest z (superior) in row 0, x = 0 (right)
 *    or y = 0 (anterior) on the left.
 *  - Grey levels: a window [lo, hi] maps x to round((x - lo) / (hi - lo)
 *    * 255) clamped to 0..255; NaN and +-inf are 0.  A window with hi <= lo
 *    (a flat slice) is a threshold: below 0, above 255, equal 128, so a flat
 *    slice is mid-grey.
 *  - The percentile window of a set of values is [the 0.5 % point, the
 *    99.5 % point] of its finite values, by selection (no full sort): with
 *    m finite values sorted v[0..m-1], lo = v[floor(0.005 (m-1))] and
 *    hi = v[ceil(0.995 (m-1))].  The API's default is that window of the
 *    whole volume (preview_volume_window), one for every slice of a volume
 *    version; preview_render without a window uses the slice's own.
 *
 * Life cycle of the cache: preview_cache_new, then per request
 * preview_cache_get; PREVIEW_RENDER obliges the caller to call
 * preview_cache_put with the same key (NULL bytes when the render failed),
 * which wakes everyone waiting for that key or for a render slot;
 * preview_cache_free when no request is left.  Thread-safe.
 */
#ifndef RC_PREVIEW_H
#define RC_PREVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "base/bytebuf.h"
#include "util/rc_error.h"

typedef enum preview_axis { PREVIEW_AXIS_X = 0, PREVIEW_AXIS_Y, PREVIEW_AXIS_Z } preview_axis;

/* Largest slice rendered (pixels): 4096 x 4096.  The render holds the slice
 * as floats, a copy for the selection and the grey bytes (~150 MB at the
 * cap), per concurrent render. */
#define PREVIEW_MAX_PIXELS (1ull << 24)

/* An explicit window: [center - width/2, center + width/2]; set = 0 means
 * the default from the data. */
typedef struct preview_window {
	int set;
	double center, width;
} preview_window;

/* Width and height of a slice along axis, and how many slices there are. */
void preview_geometry(const int dims[3], preview_axis axis, int *ret_w, int *ret_h, int *ret_n);

/* The elements [*ret_first, *ret_first + *ret_count) of the volume that
 * slice index of axis reads: what the caller must map.  index < n. */
void preview_span(const int dims[3], preview_axis axis, int index, uint64_t *ret_first, uint64_t *ret_count);

/* Copies the slice into out (w * h floats).  data[0] is element first of
 * the volume and data holds at least the span of preview_span. */
void preview_extract(const float *data, uint64_t first, const int dims[3], preview_axis axis, int index,
		     float *out);

/* The default window of n pixels (preview_window's rule).  No finite value:
 * lo = hi = 0.  0, or RC_ENOMEM. */
int preview_window_auto(const float *px, size_t n, double *ret_lo, double *ret_hi, rc_err *err);

/* Largest sample the volume's window is taken from: a volume of up to this
 * many voxels is read whole, a bigger one as SAMPLE / RUN runs of RUN
 * consecutive voxels (in memory order), evenly spaced from the first voxel
 * to the last: a bounded read (64 MB) that still meets every part of it. */
#define PREVIEW_WINDOW_SAMPLE (1ull << 24)
#define PREVIEW_WINDOW_RUN 1024

/* The percentile window of the n voxels of vol (sampled as above).  No
 * finite value: lo = hi = 0.  0, or RC_ENOMEM. */
int preview_volume_window(const float *vol, uint64_t n, double *ret_lo, double *ret_hi, rc_err *err);

/* Grey levels of n pixels through the window [lo, hi] (the rule above). */
void preview_grey(const float *px, size_t n, double lo, double hi, uint8_t *out);

/* w x h grey bytes as an 8-bit greyscale PNG appended to out.  0, or
 * RC_ENOMEM / RC_EINTERNAL (out keeps what it had). */
int preview_png(const uint8_t *grey, int w, int h, bytebuf *out, rc_err *err);

/* Slice index of axis through win (NULL or !set: the default window) as a
 * PNG appended to png: preview_extract + the window + preview_png.
 * RC_ETOOBIG for a slice over PREVIEW_MAX_PIXELS. */
int preview_render(const float *data, uint64_t first, const int dims[3], preview_axis axis, int index,
		   const preview_window *win, bytebuf *png, rc_err *err);

typedef struct preview_cache preview_cache;

/* What preview_cache_get found. */
enum { PREVIEW_HIT = 0, PREVIEW_RENDER = 1, PREVIEW_BUSY = 2 };

/* A cache of the last `entries` previews, at most `renders` rendering at
 * once (1 <= renders <= entries).  0, or RC_ENOMEM / RC_EINVAL. */
int preview_cache_new(int entries, int renders, preview_cache **ret, rc_err *err);
void preview_cache_free(preview_cache *c);

/* Keys are at most this long (a longer one is never cached). */
#define PREVIEW_KEY_MAX 191

/* PREVIEW_HIT: the PNG of key was cached; its bytes are appended to hit.
 * PREVIEW_RENDER: the caller holds a render slot for key and must call
 * preview_cache_put.  PREVIEW_BUSY: no slot came free (and nobody finished
 * rendering key) within wait_s seconds; nothing to put.  A request for a key
 * that another request is rendering waits for that render instead of
 * rendering it again.  RC_ENOMEM when hit cannot grow. */
int preview_cache_get(preview_cache *c, const char *key, double wait_s, bytebuf *hit);

/* Ends the render of key: png/len are copied into the cache (png NULL: the
 * render failed, nothing is kept) and the slot is freed. */
void preview_cache_put(preview_cache *c, const char *key, const void *png, size_t len);

/* The volume windows computed lately, by volume key (job and version; at
 * most PREVIEW_KEY_MAX characters, PREVIEW_WINDOWS kept, oldest out):
 * preview_cache_window_get answers 1 and the window when key is known,
 * else 0; preview_cache_window_put records one. */
#define PREVIEW_WINDOWS 16
int preview_cache_window_get(preview_cache *c, const char *key, double *ret_lo, double *ret_hi);
void preview_cache_window_put(preview_cache *c, const char *key, double lo, double hi);

#endif
