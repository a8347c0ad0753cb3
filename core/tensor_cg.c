/* tensor_cg: see tensor_cg.h.  Dots are accumulated in double. */
#include "tensor_cg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* d[c] = sum_i a[i][c] * b[i][c] */
static void col_dots(const float *a, const float *b, int64_t n, int nc, double *d)
{
	for (int c = 0; c < nc; c++)
		d[c] = 0;
	for (int64_t i = 0; i < n; i++)
		for (int c = 0; c < nc; c++)
			d[c] += (double)a[i * nc + c] * b[i * nc + c];
}

int rc_cgls(const rc_cg_ops *ops, const float *b, float *x, const rc_cg_opts *opts,
	    int *ret_done, rc_err *err)
{
	int64_t n = ops->n, m = ops->m;
	int nc = ops->ncols, rc = 0, done = 0;
	float *r = malloc((size_t)(n * nc) * sizeof *r);
	float *p = malloc((size_t)(n * nc) * sizeof *p);
	float *s = malloc((size_t)(m * nc) * sizeof *s);
	float *t = malloc((size_t)(m * nc) * sizeof *t);
	double *phi = malloc((size_t)nc * 5 * sizeof *phi);
	if (!r || !p || !s || !t || !phi) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the CG vectors (%.1f MiB)",
			     (double)(2 * n + 2 * m) * nc * 4 / 1048576.0);
		goto out;
	}
	double *phi2 = phi + nc, *tt = phi + 2 * nc, *alpha = phi + 3 * nc, *pp = phi + 4 * nc;
	double bnorm2 = 0, refnorm2 = 0;
	for (int64_t i = 0; i < m * nc; i++)
		bnorm2 += (double)b[i] * b[i];
	if (opts->x_ref)
		for (int64_t i = 0; i < n * nc; i++)
			refnorm2 += (double)opts->x_ref[i] * opts->x_ref[i];
	memset(x, 0, (size_t)(n * nc) * sizeof *x);
	memcpy(s, b, (size_t)(m * nc) * sizeof *s);
	rc = ops->back(ops->ud, s, r);
	if (rc)
		goto fail_op;
	memcpy(p, r, (size_t)(n * nc) * sizeof *p);
	col_dots(r, r, n, nc, phi);
	for (int it = 1; it <= opts->iterations; it++) {
		if (opts->cancel && atomic_load(opts->cancel)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "the job was cancelled after %d iterations", done);
			goto out;
		}
		rc = ops->fwd(ops->ud, p, t);
		if (rc)
			goto fail_op;
		col_dots(t, t, m, nc, tt);
		col_dots(p, p, n, nc, pp);
		double dx2 = 0;
		for (int c = 0; c < nc; c++) {
			alpha[c] = tt[c] > 0 ? phi[c] / tt[c] : 0;
			dx2 += alpha[c] * alpha[c] * pp[c];
		}
		for (int64_t i = 0; i < n; i++)
			for (int c = 0; c < nc; c++)
				x[i * nc + c] += (float)alpha[c] * p[i * nc + c];
		for (int64_t i = 0; i < m; i++)
			for (int c = 0; c < nc; c++)
				s[i * nc + c] -= (float)alpha[c] * t[i * nc + c];
		rc = ops->back(ops->ud, s, r);
		if (rc)
			goto fail_op;
		col_dots(r, r, n, nc, phi2);
		for (int c = 0; c < nc; c++) {
			double beta = phi[c] > 0 ? phi2[c] / phi[c] : 0;
			for (int64_t i = 0; i < n; i++)
				p[i * nc + c] = r[i * nc + c] + (float)beta * p[i * nc + c];
			phi[c] = phi2[c];
		}
		done = it;
		rc_cg_iter rep = { .iteration = it, .of = opts->iterations, .error = -1 };
		double s2 = 0, x2 = 0, e2 = 0;
		for (int64_t i = 0; i < m * nc; i++)
			s2 += (double)s[i] * s[i];
		for (int64_t i = 0; i < n * nc; i++) {
			x2 += (double)x[i] * x[i];
			if (opts->x_ref) {
				double d = (double)x[i] - opts->x_ref[i];
				e2 += d * d;
			}
		}
		rep.residual = sqrt(s2);
		rep.rel_residual = bnorm2 > 0 ? sqrt(s2 / bnorm2) : 0;
		rep.rel_change = x2 > 0 ? sqrt(dx2 / x2) : 0;
		if (opts->x_ref)
			rep.error = refnorm2 > 0 ? sqrt(e2 / refnorm2) : sqrt(e2);
		if (opts->iter) {
			rc = opts->iter(opts->ud, &rep);
			if (rc)
				goto out;
		}
	}
	goto out;
fail_op:
	rc = rc_fail(err, rc, "", "a system matrix product failed inside CG (code %d)", rc);
out:
	if (ret_done)
		*ret_done = done;
	free(r);
	free(p);
	free(s);
	free(t);
	free(phi);
	return rc;
}
