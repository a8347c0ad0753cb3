/*
 * engine_cuda_algo: whole SART / SIRT / CGLS / MLEM runs on one GPU with
 * every buffer resident (engine_cuda.h, rc_cuda_run_algo).
 *
 * The host only orders kernels and reads back two scalars per iteration
 * (the residual norm, CGLS's alpha and beta); projections, volumes, the
 * row and column sums all stay on the device from the first upload of the
 * measured projections to the final download of the volume.  Before any
 * allocation the bytes are added up (rc_cuda_algo_bytes) and compared with
 * the free memory: a job that does not fit is refused with RC_ETOOBIG and
 * recon.c runs it through the engine path, which splits the volume in slabs.
 *
 * The updates are those of the CPU algorithms, step for step, so that both
 * paths give the same iterates up to float rounding:
 *   SART  algo_sart.c rc_sart_core: R = 1/A1 and C_b = 1/B_b 1 guarded as
 *         rc_vinv_guarded (computed once, on the host, with that very
 *         function), contiguous blocks in bit-reversed order, B = RC_BP_VOXEL
 *   SIRT  the same loop, one block, B = RC_BP_MATCHED
 *   CGLS  algo_cgls.c (paper 001 Alg. 1 carrying r = p - A x)
 * MLEM runs through the engine path.  The residual per iteration is the one
 * the CPU algorithms report.
 */
#ifdef RC_HAVE_CUDA
#include "engine_cuda_impl.h"

#include "algo_util.h"
#include "vec_host.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* algo_sart.c's guards: rays whose row sum is below 1e-3 of the largest and
 * voxels whose column sum is below 1e-6 of the largest get no update. */
#define ROWSUM_REL_EPS 1e-3
#define COLSUM_REL_EPS 1e-6

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rc_cuda_algo_supported(const rc_algo_params *p, const rc_geom *g)
{
	if (!p || !g || !cu_geom_ok(g, NULL))
		return 0;
	return p->name == RC_ALGO_SART || p->name == RC_ALGO_SIRT || p->name == RC_ALGO_CGLS;
}

static int subsets_of(const rc_algo_params *p, const rc_geom *g)
{
	int m = p->name == RC_ALGO_SART && p->subsets > 1 ? p->subsets : 1;
	return m > rc_geom_nviews(g) ? rc_geom_nviews(g) : m;
}

/* Algorithm buffers, in floats: projection-sized and volume-sized. */
static void algo_buffers(const rc_algo_params *p, const rc_geom *g, int *nproj, int *nvol)
{
	switch (p->name) {
	case RC_ALGO_SART:
	case RC_ALGO_SIRT: {
		int m = subsets_of(p, g);
		*nproj = 3;                  /* b, residual, 1/A1 */
		*nvol = 2 + m + (m > 1);     /* x, upd, 1/C per block, last iterate */
		break;
	}
	default:            /* CGLS */
		*nproj = 2; /* r, q */
		*nvol = 3;  /* x, p, s */
		break;
	}
}

static uint64_t ctx_bytes(const rc_geom *g)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	return (uint64_t)rc_volume_count(v) * sizeof(float) +
	       2 * (uint64_t)RC_CUDA_MAX_BATCH * rc_geom_view_count(g) * sizeof(float);
}

uint64_t rc_cuda_algo_bytes(const rc_algo_params *p, const rc_geom *g)
{
	if (!rc_cuda_algo_supported(p, g))
		return 0;
	int np, nv;
	algo_buffers(p, g, &np, &nv);
	return ctx_bytes(g) + (uint64_t)np * rc_geom_proj_count(g) * sizeof(float) +
	       (uint64_t)nv * rc_volume_count(rc_geom_volume(g)) * sizeof(float) + 64;
}

typedef struct run {
	cu_ctx c;
	const rc_geom *g;
	const rc_algo_params *p;
	const rc_algo_hooks *hooks;
	size_t V, P, view;
	int n;
	float *pb[3], *vb[64];
	double *dd;
	int exact_fp, exact_bp;
	double t0;
} run;

static int cancelled(const run *r)
{
	return r->hooks && r->hooks->cancel && atomic_load(r->hooks->cancel);
}

static void progress(const run *r, int it, double residual)
{
	if (!r->hooks || !r->hooks->progress)
		return;
	rc_progress pr = {.iteration = it, .of = r->p->iterations, .residual = residual,
			  .elapsed_s = now_s() - r->t0};
	r->hooks->progress(r->hooks->ud, &pr);
}

/* sum x*y over n elements, in double */
static int dot(run *r, const float *x, const float *y, size_t n, double *ret, rc_err *err)
{
	int rc = 0;
	double h = 0;
	CU_CHECK(cudaMemsetAsync(r->dd, 0, sizeof(double), r->c.ks), "cudaMemsetAsync(dot)");
	CU_CHECK((cudaError_t)rc_cuda_dot(x, y, n, r->dd, r->c.ks), "launch of the dot product");
	CU_CHECK(cudaMemcpyAsync(&h, r->dd, sizeof(double), cudaMemcpyDeviceToHost, r->c.ks),
		 "cudaMemcpyAsync(dot -> host)");
	CU_CHECK(cudaStreamSynchronize(r->c.ks), "cudaStreamSynchronize(dot)");
	*ret = h;
out:
	return rc;
}

/* out[views first..last) = A x for a device volume x */
static int fwd(run *r, const float *x, float *out, int first, int last, int exact, rc_err *err)
{
	int rc = cu_upload_slab(&r->c, x, 0, r->c.nz, err);
	if (!rc)
		rc = cu_fp_ray(&r->c, 0, r->c.nz, out + (size_t)first * r->view, first, last, 0, exact, err);
	return rc;
}

/* out = At proj (matched, all views) */
static int adj(run *r, const float *proj, float *out, rc_err *err)
{
	int rc = 0;
	CU_CHECK(cudaMemsetAsync(out, 0, r->V * sizeof(float), r->c.ks), "cudaMemsetAsync(volume)");
	rc = cu_bp_matched(&r->c, proj, out, 0, r->c.nz, 0, r->n, err);
out:
	return rc;
}

static int download(run *r, const float *x, float *vol, rc_err *err)
{
	int rc = 0;
	CU_CHECK(cudaMemcpyAsync(vol, x, r->V * sizeof(float), cudaMemcpyDeviceToHost, r->c.ks),
		 "cudaMemcpyAsync(volume -> host)");
	CU_CHECK(cudaStreamSynchronize(r->c.ks), "cudaStreamSynchronize(volume)");
out:
	return rc;
}

/* a[] = guarded inverse of a device array, through the host once per run */
static int inv_guarded(run *r, float *a, size_t n, double rel, float *host, rc_err *err)
{
	int rc = 0;
	CU_CHECK(cudaMemcpyAsync(host, a, n * sizeof(float), cudaMemcpyDeviceToHost, r->c.ks),
		 "cudaMemcpyAsync(sums -> host)");
	CU_CHECK(cudaStreamSynchronize(r->c.ks), "cudaStreamSynchronize(sums)");
	rc_vinv_guarded(host, n, rel);
	CU_CHECK(cudaMemcpyAsync(a, host, n * sizeof(float), cudaMemcpyHostToDevice, r->c.ks),
		 "cudaMemcpyAsync(inverse sums -> device)");
	CU_CHECK(cudaStreamSynchronize(r->c.ks), "cudaStreamSynchronize(inverse sums)");
out:
	return rc;
}

static int run_sart(run *r, float *vol, rc_err *err)
{
	int rc = 0;
	const int m = subsets_of(r->p, r->g);
	const int sirt = r->p->name == RC_ALGO_SIRT;
	float *b = r->pb[0], *res = r->pb[1], *rinv = r->pb[2];
	float *x = r->vb[0], *upd = r->vb[1], *xprev = m > 1 ? r->vb[2 + m] : NULL;
	float **cinv = r->vb + 2;
	const float lambda = (float)r->p->relaxation;
	cudaStream_t ks = r->c.ks;
	int order[64];
	float *host = malloc((r->P > r->V ? r->P : r->V) * sizeof(float));
	if (!host)
		return rc_fail(err, RC_ENOMEM, "", "out of host memory for the row and column sums");
	rc_subset_order(m, order);

	/* R = 1 / A(1) over all views */
	CU_CHECK((cudaError_t)rc_cuda_fill(x, 1.0f, r->V, ks), "launch of fill");
	rc = fwd(r, x, rinv, 0, r->n, r->exact_fp, err);
	if (!rc)
		rc = inv_guarded(r, rinv, r->P, ROWSUM_REL_EPS, host, err);
	if (rc)
		goto out;
	/* C_b = 1 / B_b(1) */
	CU_CHECK((cudaError_t)rc_cuda_fill(res, 1.0f, r->P, ks), "launch of fill");
	for (int s = 0; s < m; s++) {
		int f = (int)((long)r->n * s / m), l = (int)((long)r->n * (s + 1) / m);
		rc = sirt ? adj(r, res, cinv[s], err)
			  : cu_bp_voxel(&r->c, res, cinv[s], 0, r->c.nz, f, l, r->exact_bp, err);
		if (!rc)
			rc = inv_guarded(r, cinv[s], r->V, COLSUM_REL_EPS, host, err);
		if (rc)
			goto out;
	}
	CU_CHECK(cudaMemsetAsync(x, 0, r->V * sizeof(float), ks), "cudaMemsetAsync(x)");

	int it_done = 0, mid = 0; /* mid: cancelled between blocks, x is partial */
	for (int it = 1; it <= r->p->iterations; it++) {
		if (cancelled(r)) {
			rc = RC_ECANCELLED;
			break;
		}
		if (xprev)
			CU_CHECK(cudaMemcpyAsync(xprev, x, r->V * sizeof(float), cudaMemcpyDeviceToDevice, ks),
				 "cudaMemcpyAsync(x -> last iterate)");
		CU_CHECK(cudaMemsetAsync(r->dd, 0, sizeof(double), ks), "cudaMemsetAsync(residual)");
		for (int k = 0; k < m; k++) {
			if (k > 0 && cancelled(r)) {
				rc = RC_ECANCELLED;
				mid = 1;
				break;
			}
			int s = order[k];
			int f = (int)((long)r->n * s / m), l = (int)((long)r->n * (s + 1) / m);
			size_t o = (size_t)f * r->view, cnt = (size_t)(l - f) * r->view;
			rc = fwd(r, x, res, f, l, r->exact_fp, err);
			if (rc)
				goto out;
			CU_CHECK((cudaError_t)rc_cuda_residual(b + o, res + o, rinv + o, cnt, r->dd, ks),
				 "launch of residual");
			if (sirt) {
				rc = adj(r, res, upd, err);
			} else {
				rc = cu_bp_voxel(&r->c, res, upd, 0, r->c.nz, f, l, r->exact_bp, err);
			}
			if (rc)
				goto out;
			CU_CHECK((cudaError_t)rc_cuda_update(x, upd, cinv[s], lambda, r->p->nonnegative, r->V, ks),
				 "launch of update");
		}
		if (rc == RC_ECANCELLED)
			break;
		double r2 = 0;
		CU_CHECK(cudaMemcpyAsync(&r2, r->dd, sizeof(double), cudaMemcpyDeviceToHost, ks),
			 "cudaMemcpyAsync(residual -> host)");
		CU_CHECK(cudaStreamSynchronize(ks), "cudaStreamSynchronize(iteration)");
		it_done = it;
		progress(r, it, sqrt(r2));
	}
	{
		int drc = download(r, mid ? xprev : x, vol, err);
		if (drc)
			rc = drc;
		else if (rc == RC_ECANCELLED)
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it_done);
	}
out:
	free(host);
	return rc;
}

static int run_cgls(run *r, const float *proj, float *vol, rc_err *err)
{
	int rc = 0;
	float *res = r->pb[0], *q = r->pb[1];
	float *x = r->vb[0], *p = r->vb[1], *s = r->vb[2];
	cudaStream_t ks = r->c.ks;
	double gamma, qq;
	/* x = 0, r = b, p = s = At r */
	CU_CHECK(cudaMemcpyAsync(res, proj, r->P * sizeof(float), cudaMemcpyHostToDevice, ks),
		 "cudaMemcpyAsync(projections -> device)");
	CU_CHECK(cudaMemsetAsync(x, 0, r->V * sizeof(float), ks), "cudaMemsetAsync(x)");
	rc = adj(r, res, s, err);
	if (rc)
		goto out;
	CU_CHECK(cudaMemcpyAsync(p, s, r->V * sizeof(float), cudaMemcpyDeviceToDevice, ks),
		 "cudaMemcpyAsync(s -> p)");
	rc = dot(r, s, s, r->V, &gamma, err);
	if (rc)
		goto out;
	for (int it = 1; it <= r->p->iterations; it++) {
		if (cancelled(r)) {
			rc = RC_ECANCELLED;
			break;
		}
		if (gamma <= 0) { /* converged exactly: nothing left to fit */
			double rr;
			rc = dot(r, res, res, r->P, &rr, err);
			if (rc)
				goto out;
			progress(r, it, sqrt(rr));
			continue;
		}
		rc = fwd(r, p, q, 0, r->n, 1, err);
		if (rc)
			goto out;
		rc = dot(r, q, q, r->P, &qq, err);
		if (rc)
			goto out;
		if (qq <= 0)
			qq = 1e-300;
		const float alpha = (float)(gamma / qq);
		CU_CHECK((cudaError_t)rc_cuda_axpy(x, alpha, p, r->V, ks), "launch of axpy(x)");
		CU_CHECK((cudaError_t)rc_cuda_axpy(res, -alpha, q, r->P, ks), "launch of axpy(r)");
		rc = adj(r, res, s, err);
		if (rc)
			goto out;
		double gnew, rr;
		rc = dot(r, s, s, r->V, &gnew, err);
		if (!rc)
			rc = dot(r, res, res, r->P, &rr, err);
		if (rc)
			goto out;
		const float beta = (float)(gnew / gamma);
		gamma = gnew;
		CU_CHECK((cudaError_t)rc_cuda_xpby(p, s, beta, r->V, ks), "launch of xpby");
		progress(r, it, sqrt(rr));
	}
	{
		int drc = download(r, x, vol, err);
		if (drc)
			rc = drc;
		else if (rc == RC_ECANCELLED)
			rc = rc_fail(err, RC_ECANCELLED, "", "the reconstruction was cancelled");
	}
out:
	return rc;
}

int rc_cuda_run_algo(const rc_algo_params *p, const rc_geom *g, const rc_cuda_options *o,
		     const float *proj, float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	int rc = 0;
	rc_cuda_options def;
	run r;
	memset(&r, 0, sizeof r);
	r.t0 = now_s();
	if (!o) {
		rc_cuda_options_default(&def);
		o = &def;
	}
	if (!cu_geom_ok(g, err))
		return err ? err->code : RC_EUNSUPPORTED;
	if (!rc_cuda_algo_supported(p, g))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.name",
			       "the resident CUDA path runs sart, sirt and cgls; run %s through the "
			       "CUDA engine (rc_algo_run)", rc_algo_name_str(p->name));
	if (p->iterations < 1)
		return rc_fail(err, RC_EINVAL, "algorithm.iterations", "iterations must be >= 1 (got %d)",
			       p->iterations);
	if (p->name != RC_ALGO_CGLS && !(p->relaxation > 0 && p->relaxation < 2))
		return rc_fail(err, RC_EINVAL, "algorithm.relaxation",
			       "relaxation must be in (0, 2) (got %g)", p->relaxation);
	if (p->name == RC_ALGO_SART && (p->subsets < 1 || p->subsets > rc_geom_nviews(g)))
		return rc_fail(err, RC_EINVAL, "algorithm.subsets",
			       "subsets must be between 1 and the number of views, %d (got %d)",
			       rc_geom_nviews(g), p->subsets);
	if (rc_engine_cuda_count() <= o->ordinal || o->ordinal < 0)
		return rc_fail(err, RC_ENOTFOUND, "execution.engine", "no CUDA device %d on this machine",
			       o->ordinal);
	r.g = g;
	r.p = p;
	r.hooks = hooks;
	r.V = rc_volume_count(rc_geom_volume(g));
	r.P = rc_geom_proj_count(g);
	r.view = rc_geom_view_count(g);
	r.n = rc_geom_nviews(g);
	/* CGLS and SIRT need A to be the matched back projector's transpose;
	 * SART's voxel back projector is no transpose anyway (AUTO = HW) */
	r.exact_fp = p->name != RC_ALGO_SART || o->fp_interp == RC_CUDA_INTERP_EXACT;
	r.exact_bp = o->bp_interp == RC_CUDA_INTERP_EXACT;

	int np, nvb;
	algo_buffers(p, g, &np, &nvb);
	if (subsets_of(p, g) > 60)
		return rc_fail(err, RC_EINVAL, "algorithm.subsets",
			       "at most %d subsets on the resident CUDA path (got %d)",
			       60, p->subsets);
	uint64_t budget, own = rc_cuda_algo_bytes(p, g) - ctx_bytes(g);
	rc = cu_budget(o->ordinal, o, &budget, err);
	if (rc)
		return rc;
	cu_plan plan;
	rc = cu_make_plan(g, o, CU_NEED_VOLTEX | CU_NEED_BATCH, budget, own, &plan, err);
	if (rc)
		return rc;
	if (plan.nslabs > 1 || plan.batch < RC_CUDA_MAX_BATCH)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the resident CUDA run needs %.1f MiB and %.1f MiB are free; run it through "
			       "the CUDA engine, which works in slabs",
			       (double)rc_cuda_algo_bytes(p, g) / 1048576.0, (double)budget / 1048576.0);
	rc = cu_ctx_init(&r.c, g, o, CU_NEED_VOLTEX | CU_NEED_BATCH, &plan, err);
	if (rc)
		return rc;
	for (int i = 0; i < np; i++)
		CU_CHECK(cudaMalloc((void **)&r.pb[i], r.P * sizeof(float)), "cudaMalloc(projection buffer)");
	for (int i = 0; i < nvb; i++)
		CU_CHECK(cudaMalloc((void **)&r.vb[i], r.V * sizeof(float)), "cudaMalloc(volume buffer)");
	CU_CHECK(cudaMalloc((void **)&r.dd, sizeof(double)), "cudaMalloc(dot)");

	if (p->name == RC_ALGO_CGLS) {
		rc = run_cgls(&r, proj, vol, err);
	} else {
		CU_CHECK(cudaMemcpyAsync(r.pb[0], proj, r.P * sizeof(float), cudaMemcpyHostToDevice, r.c.ks),
			 "cudaMemcpyAsync(projections -> device)");
		rc = run_sart(&r, vol, err);
	}
out:
	for (int i = 0; i < 3; i++)
		cu_release(cudaFree(r.pb[i]));
	for (int i = 0; i < (int)(sizeof r.vb / sizeof r.vb[0]); i++)
		cu_release(cudaFree(r.vb[i]));
	cu_release(cudaFree(r.dd));
	cu_ctx_release(&r.c);
	return rc;
}

#else
typedef int rc_engine_cuda_algo_unused;
#endif /* RC_HAVE_CUDA */
