/*
 * fuzz_counts: core/util/counts.c, the conversion of detector counts to
 * line integrals, on fuzzed fields and images.  Input: byte 0 the dtype
 * (bit 0: uint16 or float32) and whether a bad-pixel map follows (bit 1),
 * bytes 1 and 2 the rows and nu (1..16 each), then flat, dark (float32
 * each), the bad-pixel map (uint8) and one image of the dtype, each
 * rows * nu values, cut short inputs padded with zeros.  Checked besides the
 * sanitizers:
 *  - rc_counts_new refuses (RC_EINVAL, input.flat) exactly when flat - dark
 *    is positive nowhere, and then returns nothing;
 *  - every line integral is finite and within the floor's bounds
 *    |p| <= -ln(RC_COUNTS_RATIO_MIN) (a bad pixel interpolates good ones, a
 *    pixel with no good neighbour is 0);
 *  - the clamped count is at most the pixels, at least the dead pixels;
 *  - the averaging of the image with itself gives the image back.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/counts.h"

static void check(int ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "fuzz_counts: %s\n", what);
	abort();
}

/* n bytes of the input at *pos (zeros past its end) */
static void take(const uint8_t *data, size_t size, size_t *pos, void *out, size_t n)
{
	size_t have = *pos < size ? size - *pos : 0;
	if (have > n)
		have = n;
	memset(out, 0, n);
	if (have)
		memcpy(out, data + *pos, have);
	*pos += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	rc_counts_dtype t = (data[0] & 1) ? RC_COUNTS_F32 : RC_COUNTS_U16;
	int with_bad = (data[0] & 2) != 0;
	int rows = 1 + data[1] % 16, nu = 1 + data[2] % 16;
	size_t n = (size_t)rows * (size_t)nu, pos = 3, sb = rc_counts_sample_bytes(t);
	float *flat = malloc(sizeof(float) * n), *dark = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * n);
	float *avg = malloc(sizeof(float) * n);
	uint8_t *bad = malloc(n), *img = malloc(2 * sb * n);
	if (!flat || !dark || !out || !avg || !bad || !img)
		goto out;
	take(data, size, &pos, flat, sizeof(float) * n);
	take(data, size, &pos, dark, sizeof(float) * n);
	take(data, size, &pos, bad, n);
	take(data, size, &pos, img, sb * n);
	memcpy(img + sb * n, img, sb * n);
	size_t live = 0;
	for (size_t p = 0; p < n; p++) {
		double g = (double)flat[p] - (double)dark[p];
		float s = g > 0 && isfinite(g) ? (float)(1.0 / g) : 0.0f;
		live += s != 0.0f && isfinite(s);
	}
	rc_counts *c = NULL;
	rc_err err;
	rc_err_clear(&err);
	int rc = rc_counts_new(t, rows, nu, flat, dark, with_bad ? bad : NULL, &c, &err);
	if (rc) {
		check(rc == RC_EINVAL && !strcmp(err.field, "input.flat") && !c && live == 0, "a refusal of a usable flat");
		goto out;
	}
	check(live > 0, "a flat below the dark everywhere taken");
	uint64_t clamped = rc_counts_image(c, img, (uint64_t)nu, out, (uint64_t)nu);
	double bound = -log(RC_COUNTS_RATIO_MIN) * 1.0001;
	for (size_t p = 0; p < n; p++)
		check(isfinite(out[p]) && fabs(out[p]) <= bound, "a line integral out of the floor's bounds");
	check(clamped <= n && clamped >= rc_counts_dead(c), "the clamped count");
	rc_counts_free(c);
	rc_counts_average(t, img, 2, n, avg);
	for (size_t p = 0; p < n; p++) {
		double v = t == RC_COUNTS_U16 ? (double)((const uint16_t *)(const void *)img)[p]
					      : (double)((const float *)(const void *)img)[p];
		check(isnan(v) ? isnan(avg[p]) : avg[p] == (float)v, "the average of an image with itself");
	}
out:
	free(flat);
	free(dark);
	free(out);
	free(avg);
	free(bad);
	free(img);
	return 0;
}
