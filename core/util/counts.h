/*
 * counts: detector counts (intensities) -> line integrals,
 *   p = -ln((I - dark) / (flat - dark)),
 * one detector image (rows x nu) at a time, with a bad-pixel map whose
 * pixels are interpolated from good neighbours.
 *
 * Floor: the ratio (I - dark) / (flat - dark) is clamped to
 * [RC_COUNTS_RATIO_MIN, 1 / RC_COUNTS_RATIO_MIN], so p lies in
 * [-13.8, 13.8]; a pixel whose ratio is not a number or falls outside that
 * range (I <= dark: nothing got through) is clamped and counted.  A pixel
 * where flat - dark <= 0 (dead, or the gain image wrong there) has no
 * scale: it is treated as a bad pixel (interpolated) and counted in every
 * image.  Bad pixels take the linear interpolation between the nearest good
 * pixels of their row (one side only: that one's value); a row without a
 * good pixel takes the mean of the nearest good pixels above and below in
 * the same column; a pixel with none of these is 0.
 *
 * Pure C: no I/O.  An rc_counts is read-only once built, so many threads
 * may convert images with one.
 */
#ifndef RC_COUNTS_H
#define RC_COUNTS_H

#include <stddef.h>
#include <stdint.h>

#include "util/rc_error.h"

#define RC_COUNTS_RATIO_MIN 1e-6

typedef enum rc_counts_dtype {
	RC_COUNTS_U16 = 0,  /* little-endian uint16 */
	RC_COUNTS_F32 = 1,  /* float32 */
} rc_counts_dtype;

typedef struct rc_counts rc_counts;

/* Bytes of one sample of dtype. */
size_t rc_counts_sample_bytes(rc_counts_dtype t);

/* rows x nu images, row-major.  flat and dark (float, rows * nu each) are
 * copied; bad (rows * nu bytes, nonzero = bad) may be NULL.  Errors:
 * RC_EINVAL "input.flat" when flat - dark is not positive at any pixel
 * (or is not a number), RC_ENOMEM. */
int rc_counts_new(rc_counts_dtype t, int rows, int nu, const float *flat, const float *dark,
		  const uint8_t *bad, rc_counts **ret, rc_err *err);
void rc_counts_free(rc_counts *c);

/* Pixels where flat - dark <= 0 (counted in every image converted). */
uint64_t rc_counts_dead(const rc_counts *c);

/* One detector image: src holds rows rows of nu samples of the dtype,
 * row j at src + j * src_row_stride samples; dst (floats) row j at
 * dst + j * dst_row_stride.  Returns the pixels clamped or dead in it. */
uint64_t rc_counts_image(const rc_counts *c, const void *src, uint64_t src_row_stride, float *dst,
			 uint64_t dst_row_stride);

/* Averages n images of the dtype (rows * nu samples each, back to back)
 * into out (rows * nu floats), in double. */
void rc_counts_average(rc_counts_dtype t, const void *images, int n, size_t pixels, float *out);

#endif
