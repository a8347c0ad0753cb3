/* residual: the relative residual of a result (residual.h). */
#include "plan/residual.h"

#include <math.h>
#include <stdlib.h>

#include "plan/open.h"

/* The views the residual compares: every view after an iterative run (one
 * projection more than its 2 per iteration), a few evenly spaced ones
 * after FDK, whose back projection is about ten times cheaper per view than
 * a ray-cast forward projection: 2 + nviews/100 views keep the residual
 * near a tenth of FDK's time and still see every view-independent mistake
 * (units, transposed rows, intensities). */
int rc_residual_views(const rc_recon_spec *s, int nviews)
{
	if (s->algo.name != RC_ALGO_FDK)
		return nviews;
	int m = 2 + nviews / 100;
	return m < nviews ? m : nviews;
}

static int project(rc_backend *b, const float *vol, float *out, const int *views, int m, int all, rc_err *err)
{
	rc_vec *x = NULL, *y = NULL;
	int rc = rc_bk_vec_from(b, RC_SPACE_VOLUME, vol, &x, err);
	/* Ax straight into out where the backend can (host vectors): one
	 * stack-sized buffer, after the algorithm has freed its own */
	if (!rc)
		rc = rc_bk_vec_for(b, RC_SPACE_PROJ, out, &y, err);
	if (all && !rc)
		rc = rc_bk_forward(b, rc_bk_fp(b), x, y, 0, -1, err);
	for (int i = 0; !all && i < m && !rc; i++)
		rc = rc_bk_forward(b, rc_bk_fp(b), x, y, views[i], views[i] + 1, err);
	if (!rc)
		rc = rc_bk_finish(b, err);
	if (!rc)
		rc = rc_bk_download(b, y, out, err);
	rc_bk_vec_free(b, y);
	rc_bk_vec_free(b, x);
	return rc;
}

int rc_recon_residual(const rc_recon_spec *s, rc_backend *b, const rc_geom *g, const float *proj,
		      const float *vol, double *rel, rc_err *err)
{
	size_t n = rc_geom_proj_count(g);
	int nviews = rc_geom_nviews(g), m = rc_residual_views(s, nviews), all = m == nviews;
	int nu = rc_geom_detector(g)->nu, rows = (int)(rc_geom_view_count(g) / (size_t)nu);
	*rel = NAN;
	float *ax = malloc(n * sizeof *ax);
	int *views = malloc((size_t)m * sizeof *views);
	if (!ax || !views) {
		free(ax);
		free(views);
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the residual's %zu values", n);
	}
	for (int i = 0; i < m; i++) /* evenly spaced, at the middle of each share */
		views[i] = (int)(((double)i + 0.5) * nviews / m);
	rc_backend *cpu = NULL;
	int rc = 0;
	if ((b->caps & RC_BK_MATRIX) && s->algo.name == RC_ALGO_FDK) {
		/* the tensor backend's FDK matrix is FBP's, not A */
		rc_recon_spec f = *s;
		rc_algo_params_default(&f.algo, RC_ALGO_FDK);
		rc = rc_backend_open(RC_ENGINE_CPU, NULL, 0, &f, g, &cpu, err);
	}
	if (!rc)
		rc = project(cpu ? cpu : b, vol, ax, views, m, all, err);
	if (!rc) {
		double e2 = 0, p2 = 0;
		for (int i = 0; i < m; i++)
			for (int j = 0; j < rows; j++) {
				size_t off = rc_geom_row_offset(g, all ? i : views[i], j);
				for (int u = 0; u < nu; u++) {
					double p = proj[off + u], d = p - (double)ax[off + u];
					if (!isfinite(p))
						continue;
					e2 += d * d;
					p2 += p * p;
				}
			}
		*rel = p2 > 0 ? sqrt(e2 / p2) : NAN;
	}
	rc_backend_free(cpu);
	free(views);
	free(ax);
	return rc;
}
