/* morton: see morton.h. */
#include "projectors/morton.h"

#include <stdlib.h>
#include <string.h>

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

int64_t rc_morton_alg2(int a, int b, int bx, int by, int W)
{
	int64_t tx = a % bx, ty = b % by;
	int64_t bxx = a / bx, byy = b / by;
	int64_t tx2 = bxx % bx, ty2 = byy % by;
	int64_t bx2 = bxx / bx, by2 = byy / by;
	int64_t i1 = (tx2 * by + ty2) + (bx2 * (W / (by * by)) + by2) * bx * by;
	return (tx * by + ty) + i1 * bx * by;
}

int rc_morton_perm(int na, int nb, int bx, int by, int32_t **ret, rc_err *err)
{
	if (!is_pow2(bx) || !is_pow2(by))
		return rc_fail(err, RC_EINVAL, "", "pseudo-Morton block sizes must be powers of two (got %d x %d)", bx, by);
	if (na < 1 || nb < 1)
		return rc_fail(err, RC_EINVAL, "", "pseudo-Morton extents must be positive (got %d x %d)", na, nb);
	int64_t pa = ((int64_t)na + bx * bx - 1) / (bx * bx) * (bx * bx);
	int64_t pb = ((int64_t)nb + by * by - 1) / (by * by) * (by * by);
	int64_t n = (int64_t)na * nb, np = pa * pb;
	if (np > INT32_MAX)
		return rc_fail(err, RC_ETOOBIG, "", "pseudo-Morton extent %lld is too large", (long long)np);
	int32_t *perm = malloc((size_t)n * sizeof *perm);
	int32_t *slot = malloc((size_t)np * sizeof *slot);
	if (!perm || !slot) {
		free(perm);
		free(slot);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a pseudo-Morton permutation");
	}
	for (int64_t i = 0; i < np; i++)
		slot[i] = -1;
	for (int b = 0; b < nb; b++)
		for (int a = 0; a < na; a++)
			slot[rc_morton_alg2(a, b, bx, by, (int)pb)] = (int32_t)((int64_t)b * na + a);
	/* rank by key: keys of the padded grid are a bijection onto [0, np) */
	int32_t next = 0;
	for (int64_t k = 0; k < np; k++)
		if (slot[k] >= 0)
			perm[slot[k]] = next++;
	free(slot);
	*ret = perm;
	return 0;
}

void rc_perm_apply(const int32_t *perm, int64_t n, int64_t nout, int ncols, const float *in, float *out)
{
	if (nout > n)
		memset(out + n * ncols, 0, (size_t)(nout - n) * (size_t)ncols * sizeof *out);
	for (int64_t i = 0; i < n; i++)
		memcpy(out + (perm ? (int64_t)perm[i] : i) * ncols, in + i * ncols, (size_t)ncols * sizeof *out);
}

void rc_perm_unapply(const int32_t *perm, int64_t n, int ncols, const float *in, float *out)
{
	for (int64_t i = 0; i < n; i++)
		memcpy(out + i * ncols, in + (perm ? (int64_t)perm[i] : i) * ncols, (size_t)ncols * sizeof *out);
}
