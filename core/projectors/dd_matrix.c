/*
 * dd_matrix: distance-driven rows, the threaded CSR build and the CSR fp32
 * products (dd_matrix.h).  The build generates every row once: each
 * thread appends its views' sorted rows to its own buffer, then the
 * buffers are copied into place (a copy costs a fraction of generating
 * the rows again; the matrix is held twice for that moment).
 */
#include "projectors/dd_matrix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "projectors/proj_cpu.h"
#include "util/tensor_par.h"

#define RC_CSR_SUFFIX baseline
#include "projectors/csr_row.h"

int rc_dd_row_cap(const rc_geom *g)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	return v->nx * v->ny;
}

/* Pixels of image row (or column) crossed between the boundary positions
 * pa, pb along that row; n pixels of size s starting at p0. */
static int row_overlaps(double pa, double pb, double p0, double s, int n, double L,
			int line, int rows_mode, int nx, int32_t *cols, float *vals,
			int k, int cap)
{
	if (pa > pb) {
		double t = pa;
		pa = pb;
		pb = t;
	}
	double width = pb - pa;
	double p1 = p0 + n * s;
	if (!(width > 0) || pb <= p0 || pa >= p1)
		return k;
	int ia = (int)floor((pa - p0) / s), ib = (int)floor((pb - p0) / s);
	if (ia < 0)
		ia = 0;
	if (ib > n - 1)
		ib = n - 1;
	for (int i = ia; i <= ib; i++) {
		double lo = p0 + i * s, hi = lo + s;
		if (pa > lo)
			lo = pa;
		if (pb < hi)
			hi = pb;
		if (hi <= lo)
			continue;
		if (k >= cap)
			return -1;
		cols[k] = rows_mode ? line * nx + i : i * nx + line;
		vals[k] = (float)((hi - lo) / width * L);
		k++;
	}
	return k;
}

int rc_dd_row(const rc_geom *g, int view, int u, int32_t *cols, float *vals, int cap)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	const double *A = rc_geom_view(g, view)->A;
	double e0 = u - 0.5, e1 = u + 0.5, ec = u;
	if (rc_geom_detector(g)->shape == RC_DETECTOR_CURVED) {
		/* a curved bin is bounded by the rays at its edge angles: the
		 * lines of A at their tangent-plane indices (geometry.h) */
		e0 = rc_geom_line_u(g, e0);
		e1 = rc_geom_line_u(g, e1);
		ec = rc_geom_line_u(g, ec);
	}
	/* boundary lines a x + b y + c = 0 */
	double a0 = A[0] - e0 * A[3], b0 = A[1] - e0 * A[4], c0 = A[2] - e0 * A[5];
	double a1 = A[0] - e1 * A[3], b1 = A[1] - e1 * A[4], c1 = A[2] - e1 * A[5];
	double ac = A[0] - ec * A[3], bc = A[1] - ec * A[4];
	double nn = sqrt(ac * ac + bc * bc);
	double x0 = v->cx - v->nx * v->vx / 2, y0 = v->cy - v->ny * v->vy / 2;
	int k = 0;
	if (!(nn > 0))
		return 0;
	if (fabs(ac) >= fabs(bc)) {
		/* ray closer to the y axis: walk image rows, positions along x */
		if (fabs(a0) < 1e-12 * nn || fabs(a1) < 1e-12 * nn)
			return 0;
		double L = v->vy * nn / fabs(ac);
		for (int j = 0; j < v->ny; j++) {
			double y = y0 + (j + 0.5) * v->vy;
			double xa = -(b0 * y + c0) / a0, xb = -(b1 * y + c1) / a1;
			double xm = 0.5 * (xa + xb);
			if (A[3] * xm + A[4] * y + A[5] <= 0)
				continue; /* behind the source */
			k = row_overlaps(xa, xb, x0, v->vx, v->nx, L, j, 1, v->nx, cols, vals, k, cap);
			if (k < 0)
				return -1;
		}
	} else {
		if (fabs(b0) < 1e-12 * nn || fabs(b1) < 1e-12 * nn)
			return 0;
		double L = v->vx * nn / fabs(bc);
		for (int i = 0; i < v->nx; i++) {
			double x = x0 + (i + 0.5) * v->vx;
			double ya = -(a0 * x + c0) / b0, yb = -(a1 * x + c1) / b1;
			double ym = 0.5 * (ya + yb);
			if (A[3] * x + A[4] * ym + A[5] <= 0)
				continue;
			k = row_overlaps(ya, yb, y0, v->vy, v->ny, L, i, 0, v->nx, cols, vals, k, cap);
			if (k < 0)
				return -1;
		}
	}
	return k;
}

void rc_csr_free(rc_csr *m)
{
	if (!m)
		return;
	free(m->row_ptr);
	free(m->col);
	free(m->val);
	free(m);
}

/* Per-thread scratch of the build: a row's entries before sorting, and
 * buckets for the counting sort by image row. */
struct scratch {
	int32_t *cols, *tcols;
	float *vals, *tvals;
	int *count;
	int32_t *bc; /* the thread's views' rows, one after the other */
	float *bv;
	int64_t bn, bcap;
};

struct build {
	const rc_geom *g;
	rc_csr *m;
	int nu, cap, ny, nx;
	struct scratch *s;
	int64_t *voff; /* per view: its rows' start in its thread's buffer */
	int *vwork;    /* per view: the thread */
	int pass;      /* 0: generate, 1: copy into place */
};

/* Columns sorted by counting sort on the image row (col / nx): the entries of
 * one image row come out in ascending x in both walking modes. */
static void sort_row(struct scratch *s, int n, int nx, int ny, int32_t *out_c, float *out_v)
{
	int sorted = 1;
	for (int i = 1; i < n && sorted; i++)
		sorted = s->cols[i] > s->cols[i - 1];
	if (sorted) {
		memcpy(out_c, s->cols, (size_t)n * sizeof *out_c);
		memcpy(out_v, s->vals, (size_t)n * sizeof *out_v);
		return;
	}
	memset(s->count, 0, (size_t)(ny + 1) * sizeof *s->count);
	for (int i = 0; i < n; i++)
		s->count[s->cols[i] / nx + 1]++;
	for (int j = 0; j < ny; j++)
		s->count[j + 1] += s->count[j];
	for (int i = 0; i < n; i++) {
		int p = s->count[s->cols[i] / nx]++;
		s->tcols[p] = s->cols[i];
		s->tvals[p] = s->vals[i];
	}
	/* within one image row the pixels arrive in ascending x only when the
	 * walk went along x; along y each image row holds one pixel per column
	 * visited in ascending x too, so the result is sorted */
	memcpy(out_c, s->tcols, (size_t)n * sizeof *out_c);
	memcpy(out_v, s->tvals, (size_t)n * sizeof *out_v);
}

static int build_view(int64_t view, int worker, void *ud)
{
	struct build *b = ud;
	rc_csr *m = b->m;
	if (b->pass == 1) {
		const struct scratch *s = &b->s[b->vwork[view]];
		int64_t at = m->row_ptr[view * b->nu], n = m->row_ptr[(view + 1) * b->nu] - at;
		if (!n)
			return 0; /* (its thread may have no buffer) */
		memcpy(m->col + at, s->bc + b->voff[view], (size_t)n * sizeof *m->col);
		memcpy(m->val + at, s->bv + b->voff[view], (size_t)n * sizeof *m->val);
		return 0;
	}
	struct scratch *s = &b->s[worker];
	b->voff[view] = s->bn;
	b->vwork[view] = worker;
	for (int u = 0; u < b->nu; u++) {
		int64_t row = view * b->nu + u;
		int n = rc_dd_row(b->g, (int)view, u, s->cols, s->vals, b->cap);
		if (n < 0)
			return RC_EINTERNAL;
		if (s->bn + n > s->bcap) {
			int64_t cap = (s->bcap + n) * 3 / 2;
			int32_t *c = realloc(s->bc, (size_t)cap * sizeof *c);
			if (c)
				s->bc = c;
			float *v = c ? realloc(s->bv, (size_t)cap * sizeof *v) : NULL;
			if (!v)
				return RC_ENOMEM;
			s->bv = v;
			s->bcap = cap;
		}
		if (n)
			sort_row(s, n, b->nx, b->ny, s->bc + s->bn, s->bv + s->bn);
		s->bn += n;
		m->row_ptr[row + 1] = n;
	}
	return 0;
}

int rc_dd_build(const rc_geom *g, int threads, rc_csr **ret, rc_err *err)
{
	if (!rc_geom_is_2d(g))
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "the distance-driven system matrix is built for fan and parallel geometries only");
	const rc_volume_desc *v = rc_geom_volume(g);
	int nviews = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu;
	int rc = 0;
	/* rows and columns are int32 indices here and in the BSR and GPU copies */
	if ((int64_t)v->nx * v->ny > INT32_MAX / 2 || (int64_t)nviews * nu > INT32_MAX / 2)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the system matrix of a %dx%d image and %dx%d projections is too large for the tensor engine",
			       v->nx, v->ny, nviews, nu);
	int nt = rc_par_threads(threads, nviews);
	struct build b = { .g = g, .nu = nu, .cap = rc_dd_row_cap(g), .nx = v->nx, .ny = v->ny };
	rc_csr *m = calloc(1, sizeof *m);
	b.s = calloc((size_t)nt, sizeof *b.s);
	b.voff = malloc((size_t)nviews * sizeof *b.voff);
	b.vwork = malloc((size_t)nviews * sizeof *b.vwork);
	if (!m || !b.s || !b.voff || !b.vwork) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the system matrix");
		goto out;
	}
	b.m = m;
	m->rows = nviews * nu;
	m->cols = v->nx * v->ny;
	m->row_ptr = calloc((size_t)m->rows + 1, sizeof *m->row_ptr);
	for (int t = 0; t < nt; t++) {
		b.s[t].cols = malloc((size_t)b.cap * sizeof(int32_t));
		b.s[t].tcols = malloc((size_t)b.cap * sizeof(int32_t));
		b.s[t].vals = malloc((size_t)b.cap * sizeof(float));
		b.s[t].tvals = malloc((size_t)b.cap * sizeof(float));
		b.s[t].count = malloc((size_t)(v->ny + 1) * sizeof(int));
		if (!b.s[t].cols || !b.s[t].tcols || !b.s[t].vals || !b.s[t].tvals || !b.s[t].count) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the system matrix build");
			goto out;
		}
	}
	if (!m->row_ptr) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the system matrix");
		goto out;
	}
	b.pass = 0;
	rc = rc_par_for(nviews, 1, nt, build_view, &b);
	if (rc) {
		rc = rc == RC_ENOMEM ? rc_fail(err, rc, "", "out of memory for the system matrix build")
				     : rc_fail(err, RC_EINTERNAL, "", "the distance-driven row generator overflowed its buffer");
		goto out;
	}
	for (int r = 0; r < m->rows; r++)
		m->row_ptr[r + 1] += m->row_ptr[r];
	m->nnz = m->row_ptr[m->rows];
	m->col = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *m->col);
	m->val = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *m->val);
	if (!m->col || !m->val) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %lld system matrix entries", (long long)m->nnz);
		goto out;
	}
	/* pass 1 only copies: it never fails */
	b.pass = 1;
	(void)rc_par_for(nviews, 1, nt, build_view, &b);
	*ret = m;
	m = NULL;
out:
	if (b.s)
		for (int t = 0; t < nt; t++) {
			free(b.s[t].cols);
			free(b.s[t].tcols);
			free(b.s[t].vals);
			free(b.s[t].tvals);
			free(b.s[t].count);
			free(b.s[t].bc);
			free(b.s[t].bv);
		}
	free(b.s);
	free(b.voff);
	free(b.vwork);
	rc_csr_free(m);
	return rc;
}

int rc_csr_transpose(const rc_csr *m, rc_csr **ret, rc_err *err)
{
	rc_csr *t = calloc(1, sizeof *t);
	int rc = 0;
	if (!t)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the transposed matrix");
	t->rows = m->cols;
	t->cols = m->rows;
	t->nnz = m->nnz;
	t->row_ptr = calloc((size_t)t->rows + 1, sizeof *t->row_ptr);
	t->col = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *t->col);
	t->val = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *t->val);
	int64_t *fill = calloc((size_t)t->rows + 1, sizeof *fill);
	if (!t->row_ptr || !t->col || !t->val || !fill) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the transposed matrix");
		goto out;
	}
	for (int64_t i = 0; i < m->nnz; i++)
		t->row_ptr[m->col[i] + 1]++;
	for (int r = 0; r < t->rows; r++)
		t->row_ptr[r + 1] += t->row_ptr[r];
	memcpy(fill, t->row_ptr, (size_t)t->rows * sizeof *fill);
	/* rows of m in ascending order make the columns of t ascending */
	for (int r = 0; r < m->rows; r++)
		for (int64_t i = m->row_ptr[r]; i < m->row_ptr[r + 1]; i++) {
			int64_t p = fill[m->col[i]]++;
			t->col[p] = r;
			t->val[p] = m->val[i];
		}
	*ret = t;
	t = NULL;
out:
	free(fill);
	rc_csr_free(t);
	return rc;
}

typedef void (*csr_row_fn)(const int32_t *restrict col, const float *restrict val, int64_t n,
			   const float *restrict X, int nc, float *restrict y);

struct csr_mul {
	const rc_csr *m;
	const float *X;
	float *Y;
	int ncols;
	int64_t r0;     /* first row */
	int32_t c0, c1; /* the columns used */
	csr_row_fn row; /* the widest csr_row.h kernel the CPU runs */
};

/* The first entry of row r at a column >= c (columns ascend in a row). */
static int64_t first_at(const rc_csr *m, int64_t r, int32_t c)
{
	int64_t lo = m->row_ptr[r], hi = m->row_ptr[r + 1];
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (m->col[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int csr_mul_row(int64_t i, int worker, void *ud)
{
	(void)worker;
	const struct csr_mul *c = ud;
	const rc_csr *m = c->m;
	int64_t r = c->r0 + i;
	int64_t e0 = c->c0 > 0 ? first_at(m, r, c->c0) : m->row_ptr[r];
	int64_t e1 = c->c1 < m->cols ? first_at(m, r, c->c1) : m->row_ptr[r + 1];
	c->row(m->col + e0, m->val + e0, e1 - e0, c->X, c->ncols, c->Y + r * c->ncols);
	return 0;
}

int rc_csr_mul(const rc_csr *m, const float *X, float *Y, int ncols, int threads, rc_err *err)
{
	return rc_csr_mul_range(m, X, Y, ncols, threads, 0, m->rows, 0, m->cols, err);
}

int rc_csr_mul_range(const rc_csr *m, const float *X, float *Y, int ncols, int threads, int64_t r0, int64_t r1,
		     int32_t c0, int32_t c1, rc_err *err)
{
	(void)err;
	rc_cpu_isa isa = rc_cpu_isa_best();
	struct csr_mul c = { m, X, Y, ncols, r0, c0, c1,
			     isa >= RC_ISA_AVX512 ? rc_csr_row_avx512 : isa >= RC_ISA_AVX2 ? rc_csr_row_avx2
											 : rc_csr_row_baseline };
	return r1 > r0 ? rc_par_for(r1 - r0, 64, threads, csr_mul_row, &c) : 0;
}
