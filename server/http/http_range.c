/*
 * http_range: the Range header of downloads (http_range.h).  Numbers are
 * read digit by digit rather than with strtoull, which would also take
 * blanks, a sign ("-5" wraps to 2^64 - 5) and stop silently at overflow.
 */
#include "http/http_range.h"

#include <stddef.h>
#include <strings.h>

/* Reads the digits at *s (at least one) into *v, saturating at UINT64_MAX;
 * advances *s past them.  Returns 0, or -1 when *s holds no digit. */
static int read_u64(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
	}
	*s = p;
	*v = x;
	return 0;
}

int http_range_parse(const char *h, uint64_t total, uint64_t *ret_first, uint64_t *ret_last)
{
	if (!h || strncasecmp(h, "bytes=", 6))
		return 0;
	const char *s = h + 6;
	uint64_t first, last = UINT64_MAX;
	if (*s == '-') { /* the last SUFFIX bytes */
		uint64_t n;
		s++;
		if (read_u64(&s, &n) || *s)
			return 0;
		if (n == 0 || total == 0)
			return -1;
		*ret_first = n >= total ? 0 : total - n;
		*ret_last = total - 1;
		return 1;
	}
	if (read_u64(&s, &first) || *s++ != '-')
		return 0;
	if (*s && (read_u64(&s, &last) || *s || last < first))
		return 0;
	if (first >= total)
		return -1;
	*ret_first = first;
	*ret_last = last >= total ? total - 1 : last;
	return 1;
}
