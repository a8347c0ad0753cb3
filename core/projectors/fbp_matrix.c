/*
 * fbp_matrix: FBP's 2-D back projection (proj_plane.c) as a sparse matrix,
 * so that the tensor engine runs FDK on a fan or parallel stack as one
 * product on its CPU or GPU path (paper 001's machinery, another matrix).
 *
 * M has dd_matrix.h's shape (rows = view * nu + u, columns = iy * nx + ix)
 * and M^T q is rc_bp_plane's back projection of one slice: pixel (x, y)
 * takes 1 - f from bin floor(u) and f from the next bin of each view, times
 * the view's distance weight, with (u, weight) from rc_plane_fbp_weight.
 * M^T is built first (one row per pixel, at most 2 entries per view, in
 * ascending column order), in parallel over pixel rows, then transposed.
 */
#include "projectors/fbp_matrix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "projectors/proj_cpu.h"
#include "util/parfor.h"

struct fbp_build {
	const rc_geom *g;
	double scale;
	rc_csr *t;      /* M^T: rows are pixels */
	int32_t *count; /* entries of each pixel row */
};

/* Entries of pixel row iy, at the row's fixed slots (2 per view). */
static void build_row(void *ud, int worker, int iy)
{
	(void)worker;
	const struct fbp_build *B = ud;
	const rc_geom *g = B->g;
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nu = rc_geom_detector(g)->nu, nviews = rc_geom_nviews(g);
	for (int ix = 0; ix < v->nx; ix++) {
		int64_t pix = (int64_t)iy * v->nx + ix, at = pix * 2 * nviews, n = 0;
		double X[3];
		rc_volume_voxel_pos(v, ix, iy, 0, X);
		for (int k = 0; k < nviews; k++) {
			double u, wt = B->scale * rc_plane_fbp_weight(g, k, X[0], X[1], &u);
			if (!(u > -1.0 && u < nu))
				continue;
			double fl = floor(u), f = u - fl;
			int i = (int)fl;
			/* zero outside the detector, as rc_bp_plane */
			if (i >= 0 && f < 1.0) {
				B->t->col[at + n] = (int32_t)(k * nu + i);
				B->t->val[at + n++] = (float)((1.0 - f) * wt);
			}
			if (i + 1 < nu && f > 0.0) {
				B->t->col[at + n] = (int32_t)(k * nu + i + 1);
				B->t->val[at + n++] = (float)(f * wt);
			}
		}
		B->count[pix] = (int32_t)n;
	}
}

int rc_fbp_matrix_build(const rc_geom *g, double scale, int threads, rc_csr **ret, rc_err *err)
{
	if (!rc_geom_is_2d(g))
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type", "the FBP matrix is for fan and parallel geometries");
	const rc_volume_desc *v = rc_geom_volume(g);
	const int nviews = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu;
	const int64_t npix = (int64_t)v->nx * v->ny, slots = npix * 2 * nviews;
	/* rows and columns of both M and M^T are int, columns int32 */
	if ((int64_t)nviews * nu > INT32_MAX || npix > INT32_MAX || slots > ((int64_t)1 << 40))
		return rc_fail(err, RC_ETOOBIG, "geometry", "the FBP matrix of %d views x %d bins x %lld pixels is too large",
			       nviews, nu, (long long)npix);
	struct fbp_build B = { g, scale, calloc(1, sizeof(rc_csr)), calloc((size_t)npix, sizeof(int32_t)) };
	rc_csr *t = B.t;
	int rc = 0;
	if (!t || !B.count) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the FBP matrix");
		goto out;
	}
	t->rows = (int)npix;
	t->cols = nviews * nu;
	t->row_ptr = calloc((size_t)npix + 1, sizeof *t->row_ptr);
	t->col = malloc((size_t)slots * sizeof *t->col);
	t->val = malloc((size_t)slots * sizeof *t->val);
	if (!t->row_ptr || !t->col || !t->val) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the FBP matrix (%lld entries)", (long long)slots);
		goto out;
	}
	rc_parallel_for(v->ny, threads, build_row, &B);
	/* pack the fixed slots into CSR rows, in place (rows only move down) */
	for (int64_t p = 0; p < npix; p++) {
		int64_t from = p * 2 * nviews, to = t->row_ptr[p];
		memmove(t->col + to, t->col + from, (size_t)B.count[p] * sizeof *t->col);
		memmove(t->val + to, t->val + from, (size_t)B.count[p] * sizeof *t->val);
		t->row_ptr[p + 1] = to + B.count[p];
	}
	t->nnz = t->row_ptr[npix];
	rc = rc_csr_transpose(t, ret, err);
out:
	free(B.count);
	rc_csr_free(t);
	return rc;
}
