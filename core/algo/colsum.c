/*
 * colsum: SART's and OS-EM's per-block inverse column sums (colsum.h says
 * which way each run takes and why).
 */
#include "algo/colsum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_util.h"

struct rc_colsum {
	rc_backend *b;
	rc_bp_kind bp;
	int S;
	rc_colsum_way way;
	rc_vec **slot;  /* S slots when kept, else one */
	float *host;    /* the one slot's memory (closed form and recomputed) */
	float *form;    /* closed form: S maps of nx * ny inverse sums */
	int current;    /* the block the one slot holds (-1: none) */
};

/* C = 1 / B(ones) over views [first, last) into c. */
static int back_inverse(rc_colsum *c, rc_vec *ones, rc_vec *dst, int first, int last, rc_err *err)
{
	int rc = rc_bk_fill(c->b, ones, 1.0f, first, last, err);
	if (!rc)
		rc = rc_bk_back(c->b, c->bp, ones, dst, first, last, err);
	return rc ? rc : rc_bk_inv_guarded(c->b, dst, RC_COLSUM_REL_EPS, err);
}

/* Every view a cone view (P[2] = P[10] = 0: w fixed along a voxel column)
 * whose detector holds the projections of the volume's corner voxels, so
 * of every voxel (a projection maps the box to a convex set): a bilinear
 * lookup of ones is 1 everywhere.  The back projector's weights are
 * measured next (try_form). */
int rc_colsum_form_may_hold(const rc_geom *g)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const rc_detector_desc *d = rc_geom_detector(g);
	for (int k = 0; k < rc_geom_nviews(g); k++) {
		const double *P = rc_geom_view(g, k)->P;
		if (P[2] != 0.0 || P[10] != 0.0)
			return 0;
		for (int c = 0; c < 8; c++) {
			double X[3];
			rc_volume_voxel_pos(v, c & 1 ? v->nx - 1 : 0, c & 2 ? v->ny - 1 : 0, c & 4 ? v->nz - 1 : 0, X);
			double w = P[8] * X[0] + P[9] * X[1] + P[11];
			if (!(w > 0))
				return 0;
			double u = (P[0] * X[0] + P[1] * X[1] + P[3]) / w;
			double vv = (P[4] * X[0] + P[5] * X[1] + P[6] * X[2] + P[7]) / w;
			if (!(u >= 0 && u <= d->nu - 1 && vv >= 0 && vv <= d->nv - 1))
				return 0;
		}
	}
	return 1;
}

void rc_colsum_block_sums(const rc_geom *g, int S, int blk, double *out)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const size_t nxy = (size_t)v->nx * (size_t)v->ny;
	int first, last;
	rc_subset_range(blk, S, rc_geom_nviews(g), &first, &last);
	for (size_t i = 0; i < nxy; i++)
		out[i] = 0.0;
	for (int k = first; k < last; k++) {
		const double *P = rc_geom_view(g, k)->P;
		for (int iy = 0, i = 0; iy < v->ny; iy++)
			for (int ix = 0; ix < v->nx; ix++, i++) {
				double X[3];
				rc_volume_voxel_pos(v, ix, iy, 0, X);
				double w = P[8] * X[0] + P[9] * X[1] + P[11];
				out[i] += 1.0 / (w * w);
			}
	}
}

/* sums[s * nxy + i]: every block's (rc_colsum_block_sums). */
static void block_sums(const rc_geom *g, int S, double *sums)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const size_t nxy = (size_t)v->nx * (size_t)v->ny;
	for (int s = 0; s < S; s++)
		rc_colsum_block_sums(g, S, s, sums + (size_t)s * nxy);
}

int rc_colsum_form_fits(const float *b1, size_t n, const double *sums, size_t nxy, double kappa)
{
	if (!(kappa > 0.0) || !isfinite(kappa))
		return 0;
	for (size_t i = 0, j = 0; i < n; i++) {
		double want = kappa * sums[j];
		if (!(fabs(b1[i] - want) <= RC_COLSUM_FORM_TOL * want))
			return 0;
		if (++j == nxy) /* i mod nxy, without a division per voxel */
			j = 0;
	}
	return 1;
}

void rc_colsum_form_map(const double *sums, size_t n, double kappa, float *dst)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = (float)(1.0 / (kappa * sums[i]));
}

/* The closed form if the first block's B_0(1), back-projected into the
 * slot, is kappa * sum over its views of 1/w_k^2 at every voxel (the
 * weights the back projector applies; rc_colsum_form_may_hold has checked every
 * view's coverage); c->form stays NULL otherwise. */
static int try_form(rc_colsum *c, rc_vec *ones, rc_err *err)
{
	const rc_geom *g = c->b->geom;
	const rc_volume_desc *v = rc_geom_volume(g);
	const size_t nxy = (size_t)v->nx * (size_t)v->ny, nvox = rc_volume_count(v);
	double *sums = malloc((size_t)c->S * nxy * sizeof *sums);
	int rc, first, last;
	if (!sums)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d blocks' column sums", c->S);
	rc_subset_range(0, c->S, rc_geom_nviews(g), &first, &last);
	if ((rc = rc_bk_fill(c->b, ones, 1.0f, first, last, err)) ||
	    (rc = rc_bk_back(c->b, c->bp, ones, c->slot[0], first, last, err)) ||
	    (rc = rc_bk_download(c->b, c->slot[0], c->host, err)))
		goto out;
	block_sums(g, c->S, sums);
	const double kappa = c->host[0] / sums[0];
	if (!rc_colsum_form_fits(c->host, nvox, sums, nxy, kappa))
		goto out;
	c->form = malloc((size_t)c->S * nxy * sizeof *c->form);
	if (!c->form) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %d blocks' column sums", c->S);
		goto out;
	}
	rc_colsum_form_map(sums, (size_t)c->S * nxy, kappa, c->form);
out:
	free(sums);
	return rc;
}

int rc_colsum_new(rc_backend *b, rc_bp_kind bp, int S, int cache, rc_vec *ones, rc_colsum **ret, rc_err *err)
{
	const rc_volume_desc *v = rc_geom_volume(b->geom);
	rc_colsum *c = calloc(1, sizeof *c);
	int rc = 0, nslot = cache ? S : 1;
	if (!c || !(c->slot = calloc((size_t)nslot, sizeof *c->slot))) {
		free(c);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d subsets", S);
	}
	c->b = b;
	c->bp = bp;
	c->S = S;
	c->current = -1;
	c->way = cache ? RC_COLSUM_KEPT : RC_COLSUM_RECOMPUTED;
	if (cache) {
		for (int s = 0; s < S && !rc; s++) {
			int first, last;
			rc_subset_range(s, S, rc_geom_nviews(b->geom), &first, &last);
			if (!(rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &c->slot[s], err)))
				rc = back_inverse(c, ones, c->slot[s], first, last, err);
		}
		goto out;
	}
	/* one slot: in host memory of ours when the backend's vectors are
	 * host memory (the closed form writes it directly) */
	if (b->ops->vec_borrow) {
		if (!(c->host = malloc(rc_volume_count(v) * sizeof(float)))) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the column sums");
			goto out;
		}
		rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, c->host, &c->slot[0], err);
	} else {
		rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &c->slot[0], err);
	}
	if (!rc && c->host && S > 1 && bp == RC_BP_VOXEL && rc_colsum_form_may_hold(b->geom) &&
	    !(rc = try_form(c, ones, err)) && c->form)
		c->way = RC_COLSUM_FORM;
out:
	if (rc) {
		rc_colsum_free(c);
		return rc;
	}
	*ret = c;
	return 0;
}

int rc_colsum_get(rc_colsum *c, int blk, rc_vec *ones, const rc_vec **ret, rc_err *err)
{
	int rc = 0;
	if (c->way == RC_COLSUM_KEPT) {
		*ret = c->slot[blk];
		return 0;
	}
	if (c->current != blk) {
		c->current = -1;
		if (c->way == RC_COLSUM_FORM) {
			const rc_volume_desc *v = rc_geom_volume(c->b->geom);
			const size_t nxy = (size_t)v->nx * (size_t)v->ny;
			for (int z = 0; z < v->nz; z++)
				memcpy(c->host + (size_t)z * nxy, c->form + (size_t)blk * nxy, nxy * sizeof(float));
			rc = rc_bk_upload(c->b, c->slot[0], c->host, err);
		} else {
			int first, last;
			rc_subset_range(blk, c->S, rc_geom_nviews(c->b->geom), &first, &last);
			rc = back_inverse(c, ones, c->slot[0], first, last, err);
		}
		if (rc)
			return rc;
		c->current = blk;
	}
	*ret = c->slot[0];
	return 0;
}

rc_colsum_way rc_colsum_way_of(const rc_colsum *c) { return c->way; }

void rc_colsum_free(rc_colsum *c)
{
	if (!c)
		return;
	int nslot = c->way == RC_COLSUM_KEPT ? c->S : 1;
	for (int s = 0; s < nslot; s++)
		rc_bk_vec_free(c->b, c->slot[s]);
	free(c->slot);
	free(c->host);
	free(c->form);
	free(c);
}
