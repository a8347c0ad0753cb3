/* algo_run: runs an algorithm on a backend (algo.h's rc_algo_run_on,
 * rc_algo_run) and says what it allocates (rc_algo_vectors). */
#include "algo/algo_util.h"

int rc_algo_run_on(const rc_algo_params *p, rc_backend *b, const float *proj,
		   float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	if (!p || !b)
		return rc_fail(err, RC_EINVAL, "", "an algorithm needs parameters and a backend");
	/* the default TV weight follows the data's noise (algo.h) */
	rc_algo_params q;
	if (p->tv_auto && p->name != RC_ALGO_FDK) {
		q = *p;
		q.tv_weight = rc_tv_weight(p, proj, rc_geom_proj_count(b->geom), rc_geom_detector(b->geom)->nu);
		q.tv_auto = 0;
		p = &q;
	}
	switch (p->name) {
	case RC_ALGO_FDK: return rc_fdk_run(p, b, proj, vol, hooks, err);
	case RC_ALGO_SART: return rc_sart_run(p, b, proj, vol, hooks, err);
	case RC_ALGO_SIRT: return rc_sirt_run(p, b, proj, vol, hooks, err);
	case RC_ALGO_CGLS: return rc_cgls_run(p, b, proj, vol, hooks, err);
	case RC_ALGO_MLEM: return rc_mlem_run(p, b, proj, vol, hooks, err);
	}
	return rc_fail(err, RC_EINVAL, "algorithm.name", "unknown algorithm %d", (int)p->name);
}

int rc_algo_run(const rc_algo_params *p, rc_exec *x, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	rc_backend *b = NULL;
	if (!x)
		return rc_fail(err, RC_EINVAL, "", "an algorithm needs an executor");
	int rc = rc_backend_host_new(x, &b, err);
	if (rc)
		return rc;
	rc = rc_algo_run_on(p, b, proj, vol, hooks, err);
	rc_backend_free(b);
	return rc;
}

void rc_algo_vectors(const rc_algo_params *p, const rc_geom *g, int *nvol, int *nproj)
{
	rc_algo_vectors_n(p, rc_geom_nviews(g), rc_volume_count(rc_geom_volume(g)), nvol, nproj);
}

void rc_algo_vectors_n(const rc_algo_params *p, int nviews, size_t nvox, int *nvol, int *nproj)
{
	/* the allocations of each algo_*.c, the result volume and the measured
	 * stack included */
	int S = rc_algo_subsets(p, nviews);
	int tv = p->tv_weight > 0.0;
	switch (p->name) {
	/* FDK: a streaming run adds its groups onto the volume (rc_bk_back_add,
	 * algo_fdk.c): no scratch volume either way */
	case RC_ALGO_FDK: *nvol = 1, *nproj = 1; break;
	case RC_ALGO_CGLS: *nvol = 3 + tv, *nproj = 2; break;
	default: /* SART, SIRT, MLEM (the same loop) */
		*nvol = 2 + (S > 1) + (rc_sart_cache_all(p, S, nvox) ? S : 1);
		*nproj = 3;
		break;
	}
}
