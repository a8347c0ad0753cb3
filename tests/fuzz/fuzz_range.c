/*
 * fuzz_range: the Range header of volume downloads (server/http/http_range.c)
 * against a reference written from its contract (http_range.h) in another
 * style: split at the first '-', both sides digits only, numbers in 128
 * bits.  Any difference in the answer or in the selected bytes aborts, and
 * a selection must lie inside the body.
 *
 * Input: byte 0 picks the body length (a table of the lengths that matter:
 * 0, 1, a NIfTI header + a small volume, 2^64 - 1, or the next 8 bytes
 * raw); the rest, up to its first NUL, is the header value.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_range.h"

static int all_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* Decimal digits into 64 bits; past 2^64 - 1 it stays there. */
static uint64_t value(const char *s, size_t n)
{
	unsigned __int128 v = 0;
	for (size_t i = 0; i < n; i++) {
		v = v * 10 + (unsigned)(s[i] - '0');
		if (v > UINT64_MAX)
			v = (unsigned __int128)UINT64_MAX + 1;
	}
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static int lower_eq(const char *s, const char *lit, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != lit[i])
			return 0;
	}
	return 1;
}

static int reference(const char *h, uint64_t total, uint64_t *a, uint64_t *b)
{
	if (!h || strlen(h) < 6 || !lower_eq(h, "bytes=", 6))
		return 0;
	const char *spec = h + 6, *dash = strchr(spec, '-');
	if (!dash)
		return 0;
	size_t ln = (size_t)(dash - spec), rn = strlen(dash + 1);
	if (!all_digits(spec, ln) || !all_digits(dash + 1, rn) || (ln == 0 && rn == 0))
		return 0;
	if (ln == 0) {
		uint64_t n = value(dash + 1, rn);
		if (n == 0 || total == 0)
			return -1;
		*a = n >= total ? 0 : total - n;
		*b = total - 1;
		return 1;
	}
	uint64_t first = value(spec, ln), last = rn ? value(dash + 1, rn) : UINT64_MAX;
	if (last < first)
		return 0;
	if (first >= total)
		return -1;
	*a = first;
	*b = last < total ? last : total - 1;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t totals[] = { 0, 1, 2, 10, 1024, 352 + 1024, UINT64_MAX, UINT64_MAX - 1 };
	if (size < 1)
		return 0;
	uint64_t total;
	size_t at = 1;
	if (data[0] < 0xf0 || size < 9) {
		total = totals[data[0] % (sizeof totals / sizeof totals[0])];
	} else {
		memcpy(&total, data + 1, 8);
		at = 9;
	}
	char *h = malloc(size - at + 1);
	if (!h)
		return 0;
	memcpy(h, data + at, size - at);
	h[size - at] = '\0';
	uint64_t a = 1, b = 2, ra = 3, rb = 4;
	int rc = http_range_parse(h, total, &a, &b);
	int want = reference(h, total, &ra, &rb);
	if (rc != want || (rc == 1 && (a != ra || b != rb)) || (rc != 1 && (a != 1 || b != 2)) ||
	    (rc == 1 && !(a <= b && b < total))) {
		fprintf(stderr, "fuzz_range: \"%s\" of %llu: got %d [%llu, %llu], reference %d [%llu, %llu]\n", h,
			(unsigned long long)total, rc, (unsigned long long)a, (unsigned long long)b, want,
			(unsigned long long)ra, (unsigned long long)rb);
		abort();
	}
	free(h);
	return 0;
}
