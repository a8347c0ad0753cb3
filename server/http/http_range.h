/*
 * http_range: the one Range header a volume download honours (RFC 9110
 * section 14): "bytes=FIRST-LAST", "bytes=FIRST-" or "bytes=-SUFFIX", with
 * FIRST, LAST and SUFFIX plain decimal digits (no sign, no blanks) and the
 * unit "bytes" in any case.
 *
 * Anything else (another unit, several ranges, a malformed spec, LAST before
 * FIRST) is no usable Range: the server then sends the whole body with 200,
 * as RFC 9110 allows.  A syntactically valid range that selects nothing of a
 * body of total bytes (FIRST at or past the end, a suffix of 0, or an empty
 * body) is unsatisfiable: 416.  A LAST or a SUFFIX past the end is clamped
 * to the end; numbers too large for 64 bits count as "past the end".
 */
#ifndef RC_HTTP_RANGE_H
#define RC_HTTP_RANGE_H

#include <stdint.h>

/* h (may be NULL) against a body of total bytes.  Returns 1 with the
 * selected bytes in [*ret_first, *ret_last] (both set only then), 0 when
 * there is no usable Range (answer the whole body), -1 when the range is
 * unsatisfiable (answer 416). */
int http_range_parse(const char *h, uint64_t total, uint64_t *ret_first, uint64_t *ret_last);

#endif
