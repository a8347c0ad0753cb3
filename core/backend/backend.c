/* backend: the calls every backend shares (backend.h). */
#include "backend/backend.h"

#include <stdlib.h>

#include "backend/tv_host.h"

int rc_bk_vec_from(rc_backend *b, rc_space s, const float *host, rc_vec **ret, rc_err *err)
{
	/* a borrowed input is only read: backend.h's contract for vec_borrow */
	if (b->ops->vec_borrow)
		return b->ops->vec_borrow(b, s, (float *)host, ret, err);
	rc_vec *v = NULL;
	int rc = b->ops->vec_new(b, s, &v, err);
	if (!rc && (rc = b->ops->upload(b, v, host, err))) {
		b->ops->vec_free(b, v);
		v = NULL;
	}
	if (!rc)
		*ret = v;
	return rc;
}

int rc_bk_upload_views(rc_backend *b, rc_vec *proj, const float *host, int first, int last, rc_err *err)
{
	if (!b->ops->upload_views || rc_geom_is_2d(b->geom))
		return b->ops->upload(b, proj, host, err);
	return b->ops->upload_views(b, proj, host, first, last, err);
}

int rc_bk_vec_for(rc_backend *b, rc_space s, float *host, rc_vec **ret, rc_err *err)
{
	if (b->ops->vec_borrow)
		return b->ops->vec_borrow(b, s, host, ret, err);
	return b->ops->vec_new(b, s, ret, err);
}

int rc_bk_vec_holding(rc_backend *b, rc_space s, float *host, rc_vec **ret, rc_err *err)
{
	/* rc_bk_vec_from's vector, but host is the caller's to write: a
	 * borrowed one is host itself, which the result may then overwrite */
	return rc_bk_vec_from(b, s, host, ret, err);
}

double rc_bk_total(const rc_backend *b, const double *per_batch)
{
	double t = 0.0;
	for (int k = 0; k < b->nbatch; k++)
		t += per_batch[k];
	return t;
}

void rc_bk_views(const rc_backend *b, int *first, int *last)
{
	int nv = rc_geom_nviews(b->geom);
	if (*last < 0 || *last > nv)
		*last = nv;
	if (*first < 0)
		*first = 0;
	if (*first > *last)
		*first = *last;
}

rc_bk_runs rc_bk_view_runs(const rc_backend *b, rc_space space, size_t n, int first, int last)
{
	if (space == RC_SPACE_VOLUME)
		return (rc_bk_runs){ 0, n, 0, 1 };
	rc_bk_views(b, &first, &last);
	const rc_geom *g = b->geom;
	const size_t vs = rc_geom_view_stride(g);
	if (!rc_geom_is_2d(g))
		return (rc_bk_runs){ (size_t)first * vs, (size_t)(last - first) * vs, 0, 1 };
	if (first == 0 && last == rc_geom_nviews(g))
		return (rc_bk_runs){ 0, n, 0, 1 };
	/* a view of a 2-D stack is nu floats of each slice */
	return (rc_bk_runs){ (size_t)first * vs, (size_t)(last - first) * vs, rc_geom_row_stride(g),
			     rc_geom_volume(g)->nz };
}

void rc_bk_count(rc_backend *b, rc_task task, int first, int last, double seconds)
{
	rc_bk_views(b, &first, &last);
	b->stats.seconds[task] += seconds;
	b->stats.calls[task]++;
	b->stats.views[task] += last > first ? last - first : 0;
}

int rc_bk_back_add(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last,
		   rc_err *err)
{
	if (b->ops->back_add)
		return b->ops->back_add(b, kind, proj, vol, first, last, err);
	rc_vec *tmp = NULL;
	float *ones = malloc(sizeof *ones * (size_t)b->nbatch);
	int rc = ones ? rc_bk_vec_new(b, RC_SPACE_VOLUME, &tmp, err)
		      : rc_fail(err, RC_ENOMEM, "", "out of memory for a back projection to add");
	for (int i = 0; !rc && i < b->nbatch; i++)
		ones[i] = 1.0f;
	if (!rc && !(rc = rc_bk_back(b, kind, proj, tmp, first, last, err)))
		rc = rc_bk_axpy(b, vol, ones, tmp, err);
	rc_bk_vec_free(b, tmp);
	free(ones);
	return rc;
}

rc_tv_shape rc_bk_tv_shape(const rc_backend *b)
{
	const rc_volume_desc *v = rc_geom_volume(b->geom);
	return (rc_tv_shape){ .nx = v->nx, .ny = v->ny, .nz = v->nz, .planar = rc_geom_is_2d(b->geom) };
}

int rc_bk_tv_apply(rc_backend *b, const rc_vec *w, const rc_vec *d, rc_vec *out, float eps, float *host,
		   rc_err *err)
{
	if (b->ops->tv_apply)
		return b->ops->tv_apply(b, w, d, out, eps, err);
	/* a device backend without its own: the volumes make a round trip */
	rc_tv_shape s = rc_bk_tv_shape(b);
	size_t n = rc_volume_count(rc_geom_volume(b->geom));
	float *mem = host ? host : malloc(3 * n * sizeof *mem);
	int rc;
	if (!mem)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for host copies of the TV operator's volumes");
	float *hw = mem, *hd = w == d ? hw : mem + n, *ho = mem + 2 * n;
	if (!(rc = rc_bk_download(b, w, hw, err)) && (w == d || !(rc = rc_bk_download(b, d, hd, err)))) {
		if (!(rc = rc_tv_apply(&s, hw, hd, ho, eps, 0, err)))
			rc = rc_bk_upload(b, out, ho, err);
	}
	if (!host)
		free(mem);
	return rc;
}
