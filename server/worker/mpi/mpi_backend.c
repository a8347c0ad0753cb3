/*
 * mpi_backend: views split over MPI ranks (mpi_backend.h).
 *
 * A vector here is the inner backend's vector with its space, so that the
 * calls whose meaning differs by space (fill, dot, inv_guarded, back) know
 * which they act on.  The host buffers of the reductions are made at the
 * first call that needs them.
 */
#include "mpi_backend.h"

#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/elementwise_ops.h"

struct rc_vec {
	rc_space space;
	rc_vec *in;
};

typedef struct mpib {
	rc_backend base;
	rc_backend *in;
	MPI_Comm comm;
	int rank, size;
	int nviews, v0, v1; /* this rank's views [v0, v1) */
	size_t nvox, nproj;
	float *host;        /* max(nvox, nproj) floats: the reductions' host copy */
	double *gather;     /* size * nbatch doubles */
} mpib;

static rc_backend *inner(rc_backend *b) { return ((mpib *)b)->in; }

/* This rank's part of views [first, last): empty when first >= last. */
static void own(const mpib *m, int *first, int *last)
{
	rc_bk_views(m->in, first, last);
	if (*first < m->v0)
		*first = m->v0;
	if (*last > m->v1)
		*last = m->v1;
	if (*last < *first)
		*last = *first;
}

static int mpi_fail(rc_err *err, int mrc, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;
	if (MPI_Error_string(mrc, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof msg, "MPI error %d", mrc);
	return rc_fail(err, RC_EIO, "execution.ranks", "%s: %s", what, msg);
}

static int host_buffer(mpib *m, rc_err *err)
{
	if (m->host)
		return 0;
	size_t n = m->nvox > m->nproj ? m->nvox : m->nproj;
	if (!(m->host = malloc(n * sizeof(float))))
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the ranks' %zu-value reduction buffer", n);
	return 0;
}

/* ret[i] = sum over ranks, in rank order, of each rank's v[i]: the same
 * doubles on every rank whatever MPI's reduction order. */
static int sum_ranks(mpib *m, double *v, int n, rc_err *err)
{
	int mrc = MPI_Allgather(v, n, MPI_DOUBLE, m->gather, n, MPI_DOUBLE, m->comm);
	if (mrc != MPI_SUCCESS)
		return mpi_fail(err, mrc, "gathering a sum over the ranks");
	for (int i = 0; i < n; i++) {
		double s = 0.0;
		for (int r = 0; r < m->size; r++)
			s += m->gather[(size_t)r * (size_t)n + (size_t)i];
		v[i] = s;
	}
	return 0;
}

/* ---- vectors -------------------------------------------------------------- */

/* The views other ranks own set to zero. */
static int zero_others(mpib *m, rc_vec *v, rc_err *err)
{
	int rc = 0;
	if (m->v0 > 0)
		rc = m->in->ops->fill(m->in, v->in, 0.0f, 0, m->v0, err);
	if (!rc && m->v1 < m->nviews)
		rc = m->in->ops->fill(m->in, v->in, 0.0f, m->v1, m->nviews, err);
	return rc;
}

static int vec_new(rc_backend *b, rc_space s, rc_vec **ret, rc_err *err)
{
	mpib *m = (mpib *)b;
	rc_vec *v = calloc(1, sizeof *v);
	if (!v)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	v->space = s;
	int rc = m->in->ops->vec_new(m->in, s, &v->in, err);
	if (!rc && s == RC_SPACE_PROJ)
		rc = m->in->ops->fill(m->in, v->in, 0.0f, RC_VIEWS_ALL, err);
	if (rc) {
		if (v->in)
			m->in->ops->vec_free(m->in, v->in);
		free(v);
		return rc;
	}
	*ret = v;
	return 0;
}

static void vec_free(rc_backend *b, rc_vec *v)
{
	if (!v)
		return;
	inner(b)->ops->vec_free(inner(b), v->in);
	free(v);
}

static int upload(rc_backend *b, rc_vec *dst, const float *src, rc_err *err)
{
	mpib *m = (mpib *)b;
	int rc = m->in->ops->upload(m->in, dst->in, src, err);
	if (!rc && dst->space == RC_SPACE_PROJ)
		rc = zero_others(m, dst, err);
	return rc;
}

static int download(rc_backend *b, const rc_vec *src, float *dst, rc_err *err)
{
	return inner(b)->ops->download(inner(b), src->in, dst, err);
}

/* ---- projections ---------------------------------------------------------- */

static int forward(rc_backend *b, rc_fp_kind kind, const rc_vec *vol, rc_vec *proj, int first, int last, rc_err *err)
{
	mpib *m = (mpib *)b;
	own(m, &first, &last);
	if (first == last)
		return 0;
	return m->in->ops->forward(m->in, kind, vol->in, proj->in, first, last, err);
}

/* The volume summed over the ranks, in place: through the host, in pieces
 * MPI's int counts can hold. */
static int allreduce_volume(mpib *m, rc_vec *vol, rc_err *err)
{
	int rc = host_buffer(m, err);
	if (!rc)
		rc = m->in->ops->download(m->in, vol->in, m->host, err);
	if (rc)
		return rc;
	const size_t piece = (size_t)1 << 28;
	for (size_t at = 0; at < m->nvox; at += piece) {
		size_t n = m->nvox - at < piece ? m->nvox - at : piece;
		int mrc = MPI_Allreduce(MPI_IN_PLACE, m->host + at, (int)n, MPI_FLOAT, MPI_SUM, m->comm);
		if (mrc != MPI_SUCCESS)
			return mpi_fail(err, mrc, "summing the back projections over the ranks");
	}
	return m->in->ops->upload(m->in, vol->in, m->host, err);
}

static int back(rc_backend *b, rc_bp_kind kind, const rc_vec *proj, rc_vec *vol, int first, int last, rc_err *err)
{
	mpib *m = (mpib *)b;
	own(m, &first, &last);
	int rc = first == last ? m->in->ops->fill(m->in, vol->in, 0.0f, RC_VIEWS_ALL, err)
			       : m->in->ops->back(m->in, kind, proj->in, vol->in, first, last, err);
	if (!rc)
		rc = allreduce_volume(m, vol, err);
	return rc;
}

/* ---- element-wise ----------------------------------------------------------- */

static int fill(rc_backend *b, rc_vec *y, float v, int first, int last, rc_err *err)
{
	mpib *m = (mpib *)b;
	if (y->space == RC_SPACE_PROJ) {
		own(m, &first, &last);
		if (first == last)
			return 0;
	}
	return m->in->ops->fill(m->in, y->in, v, first, last, err);
}

static int copy(rc_backend *b, rc_vec *y, const rc_vec *x, rc_err *err)
{
	return inner(b)->ops->copy(inner(b), y->in, x->in, err);
}

static int axpy(rc_backend *b, rc_vec *y, const float *a, const rc_vec *x, rc_err *err)
{
	return inner(b)->ops->axpy(inner(b), y->in, a, x->in, err);
}

static int xpay(rc_backend *b, rc_vec *y, const rc_vec *x, const float *a, rc_err *err)
{
	return inner(b)->ops->xpay(inner(b), y->in, x->in, a, err);
}

static int dot(rc_backend *b, const rc_vec *x, const rc_vec *y, double *ret, rc_err *err)
{
	mpib *m = (mpib *)b;
	int rc = m->in->ops->dot(m->in, x->in, y ? y->in : NULL, ret, err);
	if (!rc && x->space == RC_SPACE_PROJ)
		rc = sum_ranks(m, ret, m->base.nbatch, err);
	return rc;
}

/* A projection vector's maximum is over every rank's views: taken here on
 * the host with the element-wise rule of elementwise_ops.h. */
static int inv_guarded(rc_backend *b, rc_vec *y, double rel, rc_err *err)
{
	mpib *m = (mpib *)b;
	if (y->space == RC_SPACE_VOLUME)
		return m->in->ops->inv_guarded(m->in, y->in, rel, err);
	int rc = host_buffer(m, err);
	if (!rc)
		rc = m->in->ops->download(m->in, y->in, m->host, err);
	if (rc)
		return rc;
	float mx = 0.0f;
	for (size_t i = 0; i < m->nproj; i++)
		mx = rc_ew_max(mx, m->host[i]);
	int mrc = MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_FLOAT, MPI_MAX, m->comm);
	if (mrc != MPI_SUCCESS)
		return mpi_fail(err, mrc, "the maximum over the ranks");
	float eps = (float)(rel * mx);
	for (size_t i = 0; i < m->nproj; i++)
		m->host[i] = rc_ew_inv_guarded(m->host[i], eps);
	return m->in->ops->upload(m->in, y->in, m->host, err);
}

static int ratio(rc_backend *b, rc_vec *y, const rc_vec *p, float eps, int first, int last, double *sum2, rc_err *err)
{
	mpib *m = (mpib *)b;
	int rc = m->in->ops->ratio(m->in, y->in, p->in, eps, first, last, sum2, err);
	if (!rc && sum2)
		rc = sum_ranks(m, sum2, 1, err);
	return rc;
}

static int residual(rc_backend *b, rc_vec *e, const rc_vec *p, const rc_vec *w, int first, int last, double *sum2,
		    rc_err *err)
{
	mpib *m = (mpib *)b;
	int rc = m->in->ops->residual(m->in, e->in, p->in, w ? w->in : NULL, first, last, sum2, err);
	if (!rc && sum2)
		rc = sum_ranks(m, sum2, 1, err);
	return rc;
}

static int update(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, float lambda, int nonneg, rc_err *err)
{
	return inner(b)->ops->update(inner(b), v->in, u->in, c->in, lambda, nonneg, err);
}

static int mul(rc_backend *b, rc_vec *v, const rc_vec *u, const rc_vec *c, rc_err *err)
{
	return inner(b)->ops->mul(inner(b), v->in, u->in, c->in, err);
}

static int tv_apply(rc_backend *b, const rc_vec *w, const rc_vec *d, rc_vec *out, float eps, rc_err *err)
{
	return inner(b)->ops->tv_apply(inner(b), w->in, d->in, out->in, eps, err);
}

static int finish(rc_backend *b, rc_err *err)
{
	return inner(b)->ops->finish ? inner(b)->ops->finish(inner(b), err) : 0;
}

static void mpib_free(rc_backend *b)
{
	mpib *m = (mpib *)b;
	free(m->host);
	free(m->gather);
	free(m);
}

static const rc_backend_ops mpi_ops = {
	.vec_new = vec_new, .vec_free = vec_free, .upload = upload, .download = download,
	.forward = forward, .back = back, .fill = fill, .copy = copy, .axpy = axpy, .xpay = xpay,
	.dot = dot, .inv_guarded = inv_guarded, .ratio = ratio, .residual = residual, .update = update,
	.mul = mul, .finish = finish, .free = mpib_free,
};
static const rc_backend_ops mpi_ops_tv = {
	.vec_new = vec_new, .vec_free = vec_free, .upload = upload, .download = download,
	.forward = forward, .back = back, .fill = fill, .copy = copy, .axpy = axpy, .xpay = xpay,
	.dot = dot, .inv_guarded = inv_guarded, .ratio = ratio, .residual = residual, .update = update,
	.mul = mul, .tv_apply = tv_apply, .finish = finish, .free = mpib_free,
};

int rc_backend_mpi_new(rc_backend *in, MPI_Comm comm, rc_backend **ret, rc_err *err)
{
	mpib *m = calloc(1, sizeof *m);
	if (!m)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	MPI_Comm_rank(comm, &m->rank);
	MPI_Comm_size(comm, &m->size);
	m->in = in;
	m->comm = comm;
	m->nviews = rc_geom_nviews(in->geom);
	m->v0 = (int)((int64_t)m->nviews * m->rank / m->size);
	m->v1 = (int)((int64_t)m->nviews * (m->rank + 1) / m->size);
	const rc_volume_desc *vd = rc_geom_volume(in->geom);
	m->nvox = (size_t)vd->nx * (size_t)vd->ny * (size_t)vd->nz;
	m->nproj = rc_geom_proj_count(in->geom);
	m->gather = calloc((size_t)m->size * (size_t)(in->nbatch > 0 ? in->nbatch : 1), sizeof(double));
	if (!m->gather) {
		free(m);
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	}
	m->base.ops = in->ops->tv_apply ? &mpi_ops_tv : &mpi_ops;
	m->base.geom = in->geom;
	m->base.nbatch = in->nbatch;
	/* vectors are the inner backend's, but never borrowed: a projection
	 * vector is zero outside this rank's views */
	m->base.caps = in->caps & ~(unsigned)RC_BK_HOST;
	snprintf(m->base.name, sizeof m->base.name, "%s", in->name);
	*ret = &m->base;
	return 0;
}
