/* backend: the calls every backend shares (backend.h). */
#include "backend/backend.h"

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

int rc_bk_vec_for(rc_backend *b, rc_space s, float *host, rc_vec **ret, rc_err *err)
{
	if (b->ops->vec_borrow)
		return b->ops->vec_borrow(b, s, host, ret, err);
	return b->ops->vec_new(b, s, ret, err);
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

void rc_bk_count(rc_backend *b, rc_task task, int first, int last, double seconds)
{
	rc_bk_views(b, &first, &last);
	b->stats.seconds[task] += seconds;
	b->stats.calls[task]++;
	b->stats.views[task] += last > first ? last - first : 0;
}
