/* residual: the relative residual of a result (residual.h). */
#include "plan/residual.h"

#include <math.h>
#include <stdlib.h>

#include "plan/open.h"

static int project(rc_backend *b, const float *vol, float *out, rc_err *err)
{
	rc_vec *x = NULL, *y = NULL;
	int rc = rc_bk_vec_from(b, RC_SPACE_VOLUME, vol, &x, err);
	/* Ax straight into out where the backend can (host vectors): one
	 * stack-sized buffer, after the algorithm has freed its own */
	if (!rc)
		rc = rc_bk_vec_for(b, RC_SPACE_PROJ, out, &y, err);
	if (!rc)
		rc = rc_bk_forward(b, rc_bk_fp(b), x, y, 0, -1, err);
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
	*rel = NAN;
	float *ax = malloc(n * sizeof *ax);
	if (!ax)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the residual's %zu values", n);
	rc_backend *cpu = NULL;
	int rc = 0;
	if ((b->caps & RC_BK_MATRIX) && s->algo.name == RC_ALGO_FDK) {
		/* the tensor backend's FDK matrix is FBP's, not A */
		rc_recon_spec f = *s;
		rc_algo_params_default(&f.algo, RC_ALGO_FDK);
		rc = rc_backend_open(RC_ENGINE_CPU, NULL, 0, &f, g, &cpu, err);
	}
	if (!rc)
		rc = project(cpu ? cpu : b, vol, ax, err);
	if (!rc) {
		double e2 = 0, p2 = 0;
		for (size_t i = 0; i < n; i++) {
			if (!isfinite(proj[i]))
				continue;
			double d = (double)proj[i] - (double)ax[i];
			e2 += d * d;
			p2 += (double)proj[i] * proj[i];
		}
		*rel = p2 > 0 ? sqrt(e2 / p2) : NAN;
	}
	rc_backend_free(cpu);
	free(ax);
	return rc;
}
