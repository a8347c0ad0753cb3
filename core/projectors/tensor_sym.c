/*
 * tensor_sym: the sector matrix and index maps of the symmetric single-slice
 * projection (tensor_sym.h), and its CPU run.
 *
 * The 8 transforms act on centred pixel coordinates (p, q) as
 * (p, q) -> (a p + b q, c p + d q).  Projecting T z in view k equals
 * projecting z with the view matrix A_k diag(T, 1); the view k' holding that
 * matrix (or its bin mirror F A_k diag(T, 1), F = [[-1, nu-1], [0, 1]]) is
 * looked up by comparing matrices, so no assumption on the angle list is
 * made.
 */
#include "projectors/tensor_sym.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "projectors/morton.h"

static const int T[8][4] = {
	{ 1, 0, 0, 1 },  { 0, -1, 1, 0 }, { -1, 0, 0, -1 }, { 0, 1, -1, 0 }, /* rotations */
	{ -1, 0, 0, 1 }, { 1, 0, 0, -1 }, { 0, 1, 1, 0 },   { 0, -1, -1, 0 }, /* mirrors */
};

void rc_sym_free(rc_sym *s)
{
	if (!s)
		return;
	free(s->src);
	free(s->w0);
	free(s->rowsrc);
	rc_bsr_free(s->b);
	free(s);
}

static int same6(const double *x, const double *y)
{
	double scale = 0;
	for (int i = 0; i < 6; i++)
		scale = fmax(scale, fmax(fabs(x[i]), fabs(y[i])));
	for (int i = 0; i < 6; i++)
		if (fabs(x[i] - y[i]) > 1e-9 * scale)
			return 0;
	return 1;
}

/* Pixel index of T_s applied to pixel (ix, iy) of an n x n grid. */
static int32_t map_pixel(int s, int n, int ix, int iy)
{
	/* doubled centred coordinates stay integers for odd and even n */
	int p2 = 2 * ix - (n - 1), q2 = 2 * iy - (n - 1);
	int pp = T[s][0] * p2 + T[s][1] * q2, qq = T[s][2] * p2 + T[s][3] * q2;
	return (int32_t)(((qq + n - 1) / 2) * n + (pp + n - 1) / 2);
}

int rc_sym_new(const rc_geom *g, int threads, rc_sym **ret, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	int nviews = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu, n = v->nx;
	int rc = 0;
	rc_sym *s = NULL;
	rc_csr *m = NULL, *m0 = NULL;
	int32_t *rperm = NULL, *cperm = NULL, *colj = NULL, *order = NULL;
	if (!rc_geom_is_2d(g) || v->nx != v->ny || v->vx != v->vy || v->cx != 0 || v->cy != 0)
		return rc_fail(err, RC_EUNSUPPORTED, "volume",
			       "the symmetric projection needs a fan or parallel geometry with a square image centred on the axis");
	s = calloc(1, sizeof *s);
	if (!s)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the symmetry maps");
	s->n = n;
	s->nviews = nviews;
	s->nu = nu;
	s->rows = (int64_t)nviews * nu;
	int64_t npix = (int64_t)n * n;
	s->rowsrc = malloc((size_t)(8 * s->rows) * sizeof *s->rowsrc);
	colj = malloc((size_t)npix * sizeof *colj);
	order = malloc((size_t)npix * sizeof *order);
	if (!s->rowsrc || !colj || !order) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the symmetry maps");
		goto out;
	}
	rc = rc_morton_perm(nu, nviews, 4, 2, &rperm, err);
	if (rc)
		goto out;
	rc = rc_morton_perm(n, n, 4, 2, &cperm, err);
	if (rc)
		goto out;
	/* view map of every transform */
	for (int t = 0; t < 8; t++)
		for (int k = 0; k < nviews; k++) {
			const double *A = rc_geom_view(g, k)->A;
			double want[6], flip[6];
			for (int r = 0; r < 2; r++) {
				want[3 * r] = A[3 * r] * T[t][0] + A[3 * r + 1] * T[t][2];
				want[3 * r + 1] = A[3 * r] * T[t][1] + A[3 * r + 1] * T[t][3];
				want[3 * r + 2] = A[3 * r + 2];
			}
			for (int i = 0; i < 3; i++) {
				flip[i] = -want[i] + (nu - 1) * want[3 + i];
				flip[3 + i] = want[3 + i];
			}
			int found = -1, mirrored = 0;
			for (int k2 = 0; k2 < nviews && found < 0; k2++) {
				const double *B = rc_geom_view(g, k2)->A;
				if (same6(B, want))
					found = k2;
				else if (same6(B, flip)) {
					found = k2;
					mirrored = 1;
				}
			}
			if (found < 0) {
				rc = rc_fail(err, RC_EUNSUPPORTED, "geometry.angles",
					     "the geometry has no 8-fold symmetry: view %d under transform %d matches no view "
					     "(angles must be closed under 90-degree rotations and mirrors, detector offset 0)", k, t);
				goto out;
			}
			for (int u = 0; u < nu; u++)
				s->rowsrc[(int64_t)t * s->rows + (int64_t)k * nu + u] =
					rperm[(int64_t)found * nu + (mirrored ? nu - 1 - u : u)];
		}
	/* fundamental sector 0 <= q <= p, its pixels in pseudo-Morton order */
	int64_t n0 = 0;
	for (int64_t i = 0; i < npix; i++)
		order[i] = -1;
	for (int iy = 0; iy < n; iy++)
		for (int ix = 0; ix < n; ix++) {
			int p2 = 2 * ix - (n - 1), q2 = 2 * iy - (n - 1);
			if (q2 >= 0 && q2 <= p2)
				order[cperm[iy * n + ix]] = iy * n + ix;
		}
	for (int64_t i = 0; i < npix; i++)
		colj[i] = -1;
	for (int64_t k = 0; k < npix; k++)
		if (order[k] >= 0)
			colj[order[k]] = (int32_t)n0++;
	s->n0 = n0;
	s->src = malloc((size_t)(8 * n0) * sizeof *s->src);
	s->w0 = malloc((size_t)n0 * sizeof *s->w0);
	if (!s->src || !s->w0) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the symmetry maps");
		goto out;
	}
	for (int iy = 0; iy < n; iy++)
		for (int ix = 0; ix < n; ix++) {
			int32_t j = colj[iy * n + ix];
			if (j < 0)
				continue;
			int stab = 0;
			for (int t = 0; t < 8; t++) {
				int32_t q = map_pixel(t, n, ix, iy);
				s->src[(int64_t)t * n0 + j] = q;
				stab += q == iy * n + ix;
			}
			s->w0[j] = 1.0f / (float)stab;
		}
	/* A0: the columns of the sector, renumbered j; rows ordered as usual */
	rc = rc_dd_build(g, threads, &m, err);
	if (rc)
		goto out;
	m0 = calloc(1, sizeof *m0);
	if (!m0) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the sector matrix");
		goto out;
	}
	m0->rows = m->rows;
	m0->cols = (int)n0;
	m0->row_ptr = calloc((size_t)m->rows + 1, sizeof *m0->row_ptr);
	m0->col = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *m0->col);
	m0->val = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *m0->val);
	if (!m0->row_ptr || !m0->col || !m0->val) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the sector matrix");
		goto out;
	}
	for (int r = 0; r < m->rows; r++) {
		for (int64_t i = m->row_ptr[r]; i < m->row_ptr[r + 1]; i++) {
			int32_t j = colj[m->col[i]];
			if (j >= 0) {
				m0->col[m0->nnz] = j;
				m0->val[m0->nnz] = m->val[i];
				m0->nnz++;
			}
		}
		m0->row_ptr[r + 1] = m0->nnz;
	}
	rc = rc_bsr_build(m0, rperm, NULL, RC_FRAG_32_8_16, threads, &s->b, err);
	if (rc)
		goto out;
	*ret = s;
	s = NULL;
out:
	rc_csr_free(m);
	rc_csr_free(m0);
	free(rperm);
	free(cperm);
	free(colj);
	free(order);
	rc_sym_free(s);
	return rc;
}

int rc_sym_forward_cpu(const rc_sym *s, const float *img, float *proj, int threads, rc_err *err)
{
	int64_t cols_pad = rc_bsr_cols_pad(s->b), rows_pad = rc_bsr_rows_pad(s->b);
	float *X = calloc((size_t)(cols_pad * 8), sizeof *X), *Y = malloc((size_t)(rows_pad * 8) * sizeof *Y);
	if (!X || !Y) {
		free(X);
		free(Y);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the symmetric projection");
	}
	for (int64_t j = 0; j < s->n0; j++)
		for (int t = 0; t < 8; t++)
			X[j * 8 + t] = s->w0[j] * img[s->src[(int64_t)t * s->n0 + j]];
	int rc = rc_bsr_mul(s->b, X, Y, 8, threads);
	for (int64_t r = 0; r < s->rows && !rc; r++) {
		float acc = 0;
		for (int t = 0; t < 8; t++)
			acc += Y[(int64_t)s->rowsrc[(int64_t)t * s->rows + r] * 8 + t];
		proj[r] = acc;
	}
	free(X);
	free(Y);
	return rc;
}
