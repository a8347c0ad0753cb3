/*
 * engine_opencl_algo: whole SART / SIRT / CGLS runs on one OpenCL engine
 * with every buffer resident (engine_opencl.h, rc_opencl_run_algo).
 *
 * The measured projections go to the device once and the volume comes back
 * once; in between the host only orders launches and reads back the
 * scalars the algorithms branch on (the residual, CGLS's dot products, the
 * maxima of the row and column sums), each a few doubles of partial sums.
 * The projectors are the engine's own kernels run on device buffers
 * (engine_opencl_impl.h), and the engine's two work buffers are the run's
 * residual (projection sized) and update (volume sized).
 *
 * The steps are those of the CPU algorithms, in the same order with the
 * same float operations (opencl_ew.h mirrors algo_util.h), so both paths
 * give the same iterates up to float rounding:
 *   SART  algo_sart.c rc_sart_core: R = 1 / A1 and C_b = 1 / B_b 1 guarded
 *         as rc_vinv_guarded, contiguous blocks in bit-reversed order, the
 *         C_b of all blocks kept up to SUBSET_CACHE_BYTES (else recomputed
 *         before each block), B = RC_BP_VOXEL
 *   SIRT  the same loop, one block, B = RC_BP_MATCHED
 *   CGLS  algo_cgls.c, carrying r = p - A x, the same convergence guards
 * Progress and cancel follow rc_algo_run: a progress call per iteration
 * with the residual the CPU algorithms report, the cancel flag checked per
 * iteration and per subset, and RC_ECANCELLED leaves the last complete
 * iterate in vol.  vol is written only when the run ends (a progress
 * callback must not read it); after a device failure it holds zeros.
 */
#include "engine_opencl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo_util.h"
#include "engine_opencl_impl.h"
#include "opencl_ew.h"

/* algo_sart.c's guards and subset cache limit */
#define ROWSUM_REL_EPS 1e-3
#define COLSUM_REL_EPS 1e-6
#define SUBSET_CACHE_BYTES ((size_t)256 << 20)

int rc_opencl_algo_supported(const rc_algo_params *p, const rc_geom *g)
{
	if (!p || !g || rc_geom_is_2d(g))
		return 0;
	return p->name == RC_ALGO_SART || p->name == RC_ALGO_SIRT || p->name == RC_ALGO_CGLS;
}

typedef struct run {
	rc_engine *e;
	rc_ocl_handles h;
	rc_ocl_ew *w;
	const rc_algo_params *p;
	const rc_algo_hooks *hooks;
	size_t V, P, view;
	size_t cache_bytes; /* per-subset column sums kept up to this */
	int n;
	cl_mem mem[8]; /* what this run allocated, released at the end */
	int nmem;
	double t0;
} run;

static int alloc(run *r, size_t floats, cl_mem *ret, rc_err *err)
{
	cl_int e;
	*ret = clCreateBuffer(r->h.ctx, CL_MEM_READ_WRITE, floats * sizeof(float), NULL, &e);
	if (e != CL_SUCCESS)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the resident OpenCL run cannot allocate its buffers (%s); run it through the "
			       "engine path", rc_cl_strerror(e));
	r->mem[r->nmem++] = *ret;
	return 0;
}

static int cancelled(const run *r)
{
	return rc_algo_cancelled(r->hooks);
}

static int finish(run *r, rc_err *err)
{
	cl_int e = clFinish(r->h.q);
	return e == CL_SUCCESS ? 0 : rc_cl_fail(err, e, "clFinish");
}

static int run_sart(run *r, const float *proj, float *vol, rc_err *err)
{
	const int S = r->p->name == RC_ALGO_SART ? r->p->subsets : 1;
	const rc_bp_kind bp = r->p->name == RC_ALGO_SART ? RC_BP_VOXEL : RC_BP_MATCHED;
	const int cache = S == 1 || (size_t)S <= r->cache_bytes / (r->V * sizeof(float));
	const float lambda = (float)r->p->relaxation;
	rc_ocl_ew *w = r->w;
	cl_mem res = r->h.proj, upd = r->h.vol, b, rinv, x, cinv, prev = NULL;
	int rc, it_done = 0;
	int *order = malloc((size_t)S * sizeof *order);
	if (!order)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for %d subsets", S);
	if ((rc = alloc(r, r->P, &b, err)) || (rc = alloc(r, r->P, &rinv, err)) || (rc = alloc(r, r->V, &x, err)) ||
	    (rc = alloc(r, (cache ? (size_t)S : 1) * r->V, &cinv, err)) || (S > 1 && (rc = alloc(r, r->V, &prev, err))))
		goto out;
	rc_subset_order(S, order);
	if ((rc = rc_ocl_ew_write(w, b, proj, r->P, err)))
		goto out;

	/* R = 1 / A(1) over all views */
	if ((rc = rc_ocl_ew_fill(w, upd, 1.0f, 0, r->V, err)) ||
	    (rc = rc_ocl_forward_dev(r->e, upd, rinv, 0, r->n, err)) ||
	    (rc = rc_ocl_ew_inv_guarded(w, rinv, r->P, ROWSUM_REL_EPS, err)))
		goto out;
	/* C_b = 1 / B_b(1); res holds ones meanwhile */
	if ((rc = rc_ocl_ew_fill(w, res, 1.0f, 0, r->P, err)))
		goto out;
	for (int k = 0; k < (cache ? S : 0); k++) {
		int f, l;
		rc_subset_range(k, S, r->n, &f, &l);
		if ((rc = rc_ocl_back_dev(r->e, bp, res, upd, f, l, err)) ||
		    (rc = rc_ocl_ew_inv_guarded(w, upd, r->V, COLSUM_REL_EPS, err)))
			goto out;
		cl_int e = clEnqueueCopyBuffer(r->h.q, upd, cinv, 0, (size_t)k * r->V * sizeof(float),
					       r->V * sizeof(float), 0, NULL, NULL);
		if (e != CL_SUCCESS) {
			rc = rc_cl_fail(err, e, "clEnqueueCopyBuffer (column sums)");
			goto out;
		}
	}
	if ((rc = rc_ocl_ew_fill(w, x, 0.0f, 0, r->V, err)))
		goto out;

	int mid = 0; /* cancelled between blocks: x is partial, prev is the iterate */
	for (int it = 1; it <= r->p->iterations && !rc; it++) {
		if (cancelled(r)) {
			rc = RC_ECANCELLED;
			break;
		}
		if (prev && (rc = rc_ocl_ew_copy(w, prev, x, r->V, err)))
			goto out;
		double r2 = 0.0;
		for (int k = 0; k < S; k++) {
			int blk = order[k], f, l;
			rc_subset_range(blk, S, r->n, &f, &l);
			if (k > 0 && cancelled(r)) {
				rc = RC_ECANCELLED;
				mid = 1;
				break;
			}
			size_t off = (size_t)f * r->view, cnt = (size_t)(l - f) * r->view;
			if (!cache) {
				/* C_b of this block into the one slot; views f..l of res hold
				 * ones until the forward projection below overwrites them */
				if ((rc = rc_ocl_ew_fill(w, res, 1.0f, off, cnt, err)) ||
				    (rc = rc_ocl_back_dev(r->e, bp, res, cinv, f, l, err)) ||
				    (rc = rc_ocl_ew_inv_guarded(w, cinv, r->V, COLSUM_REL_EPS, err)))
					goto out;
			}
			double s2;
			if ((rc = rc_ocl_forward_dev(r->e, x, res, f, l, err)) ||
			    (rc = rc_ocl_ew_residual(w, res, b, rinv, off, cnt, &s2, err)) ||
			    (rc = rc_ocl_back_dev(r->e, bp, res, upd, f, l, err)))
				goto out;
			r2 += s2;
			size_t coff = cache ? (size_t)blk * r->V : 0;
			if ((rc = rc_ocl_ew_update(w, x, upd, cinv, coff, lambda, r->p->nonnegative, r->V, err)))
				goto out;
		}
		if (rc)
			break;
		if ((rc = finish(r, err)))
			goto out;
		it_done = it;
		rc_algo_report(r->hooks, NULL, NULL, it, r->p->iterations, sqrt(r2), r->t0);
	}
	{
		int drc = rc_ocl_ew_read(w, mid ? prev : x, vol, r->V, err);
		if (drc)
			rc = drc;
		else if (rc == RC_ECANCELLED)
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it_done);
	}
out:
	free(order);
	return rc;
}

static int run_cgls(run *r, const float *proj, float *vol, rc_err *err)
{
	rc_ocl_ew *w = r->w;
	cl_mem res = r->h.proj, s = r->h.vol, q, x, d;
	int rc, it_done = 0;
	if ((rc = alloc(r, r->P, &q, err)) || (rc = alloc(r, r->V, &x, err)) || (rc = alloc(r, r->V, &d, err)))
		return rc;
	/* x = 0, r = p, s = A^T r, d = s */
	double gamma, rr;
	if ((rc = rc_ocl_ew_fill(w, x, 0.0f, 0, r->V, err)) || (rc = rc_ocl_ew_write(w, res, proj, r->P, err)) ||
	    (rc = rc_ocl_back_dev(r->e, RC_BP_MATCHED, res, s, 0, r->n, err)) ||
	    (rc = rc_ocl_ew_copy(w, d, s, r->V, err)) || (rc = rc_ocl_ew_dot(w, s, s, r->V, &gamma, err)) ||
	    (rc = rc_ocl_ew_dot(w, res, res, r->P, &rr, err)))
		return rc;
	double resn = sqrt(rr);
	int converged = 0;
	for (int it = 1; it <= r->p->iterations; it++) {
		if (cancelled(r)) {
			rc = RC_ECANCELLED;
			break;
		}
		/* gamma = 0: x solves the normal equations already (algo_cgls.c) */
		if (!converged && gamma > 0.0) {
			double qq;
			if ((rc = rc_ocl_forward_dev(r->e, d, q, 0, r->n, err)) ||
			    (rc = rc_ocl_ew_dot(w, q, q, r->P, &qq, err)))
				return rc;
			if (qq > 0.0) {
				float alpha = (float)(gamma / qq);
				if ((rc = rc_ocl_ew_axpy(w, x, alpha, d, r->V, err)) ||
				    (rc = rc_ocl_ew_axpy(w, res, -alpha, q, r->P, err)) ||
				    (rc = rc_ocl_ew_dot(w, res, res, r->P, &rr, err)))
					return rc;
				resn = sqrt(rr);
			} else {
				converged = 1; /* d in the null space of A */
			}
		} else {
			converged = 1;
		}
		if (!converged && it < r->p->iterations) {
			if (cancelled(r)) {
				/* x and r form a complete iterate already */
				it_done = it;
				rc_algo_report(r->hooks, NULL, NULL, it, r->p->iterations, resn, r->t0);
				rc = RC_ECANCELLED;
				break;
			}
			double gnew;
			if ((rc = rc_ocl_back_dev(r->e, RC_BP_MATCHED, res, s, 0, r->n, err)) ||
			    (rc = rc_ocl_ew_dot(w, s, s, r->V, &gnew, err)) ||
			    (rc = rc_ocl_ew_xpay(w, d, s, (float)(gnew / gamma), r->V, err)))
				return rc;
			gamma = gnew;
		}
		if ((rc = finish(r, err)))
			return rc;
		it_done = it;
		rc_algo_report(r->hooks, NULL, NULL, it, r->p->iterations, resn, r->t0);
	}
	int drc = rc_ocl_ew_read(w, x, vol, r->V, err);
	if (drc)
		return drc;
	if (rc == RC_ECANCELLED)
		return rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it_done);
	return rc;
}

static int check_params(const rc_algo_params *p, const rc_geom *g, const float *proj, const float *vol,
			rc_err *err)
{
	if (!p || !g || !proj || !vol)
		return rc_fail(err, RC_EINVAL, "", "an algorithm needs parameters, an engine, projections and a volume");
	if (!rc_opencl_algo_supported(p, g))
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.name",
			       "the resident OpenCL path runs sart, sirt and cgls on cone and matrices geometries; "
			       "run %s through the OpenCL engine (rc_algo_run)", rc_algo_name_str(p->name));
	if (p->iterations < 1)
		return rc_fail(err, RC_EINVAL, "algorithm.iterations",
			       "algorithm.iterations must be at least 1 (got %d)", p->iterations);
	if (p->name != RC_ALGO_CGLS && !(p->relaxation > 0.0 && p->relaxation < 2.0))
		return rc_fail(err, RC_EINVAL, "algorithm.relaxation",
			       "algorithm.relaxation must lie strictly between 0 and 2 (got %g)", p->relaxation);
	int nviews = rc_geom_nviews(g);
	if (p->name == RC_ALGO_SART && (p->subsets < 1 || p->subsets > nviews))
		return rc_fail(err, RC_EINVAL, "algorithm.subsets",
			       "algorithm.subsets must be between 1 and the number of views, %d (got %d)", nviews,
			       p->subsets);
	return 0;
}

/* Bytes the run allocates besides the engine's own buffers. */
static size_t run_bytes(const rc_algo_params *p, size_t V, size_t P, size_t cache_bytes)
{
	if (p->name == RC_ALGO_CGLS)
		return (P + 2 * V) * sizeof(float);
	int S = p->name == RC_ALGO_SART ? p->subsets : 1;
	int cache = S == 1 || (size_t)S <= cache_bytes / (V * sizeof(float));
	return (2 * P + V + (cache ? (size_t)S : 1) * V + (S > 1 ? V : 0)) * sizeof(float);
}

int rc_opencl_run_algo(rc_engine *e, const rc_algo_params *p, const float *proj, float *vol,
		       const rc_algo_hooks *hooks, rc_err *err)
{
	return rc_ocl_run_algo_cache(e, p, proj, vol, hooks, SUBSET_CACHE_BYTES, err);
}

int rc_ocl_run_algo_cache(rc_engine *e, const rc_algo_params *p, const float *proj, float *vol,
			  const rc_algo_hooks *hooks, size_t cache_bytes, rc_err *err)
{
	run r;
	memset(&r, 0, sizeof r);
	r.t0 = rc_algo_now();
	if (!e || rc_ocl_engine_handles(e, &r.h))
		return rc_fail(err, RC_EINVAL, "execution.engine", "the resident OpenCL run needs an OpenCL engine");
	const rc_geom *g = e->geom;
	int rc = check_params(p, g, proj, vol, err);
	if (rc)
		return rc;
	r.e = e;
	r.p = p;
	r.hooks = hooks;
	r.V = rc_volume_count(rc_geom_volume(g));
	r.P = rc_geom_proj_count(g);
	r.view = rc_geom_view_count(g);
	r.n = rc_geom_nviews(g);
	/* a device that would have to page (or that allocates lazily and fails
	 * later) is refused up front; recon.c then takes the engine path */
	cl_ulong gmem = 0;
	clGetDeviceInfo(r.h.dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
	r.cache_bytes = cache_bytes;
	size_t need = run_bytes(p, r.V, r.P, cache_bytes) + (r.V + r.P) * sizeof(float);
	if (gmem && need > gmem)
		return rc_fail(err, RC_ETOOBIG, "volume",
			       "the resident OpenCL run needs %.1f MiB and the device has %.1f MiB; run it "
			       "through the engine path", (double)need / 1048576.0, (double)gmem / 1048576.0);
	memset(vol, 0, r.V * sizeof(float));
	if ((rc = rc_ocl_ew_new(e, &r.w, err)))
		return rc;
	rc = p->name == RC_ALGO_CGLS ? run_cgls(&r, proj, vol, err) : run_sart(&r, proj, vol, err);
	/* after a failure nothing may still be queued on the buffers released below */
	clFinish(r.h.q);
	for (int i = 0; i < r.nmem; i++)
		clReleaseMemObject(r.mem[i]);
	rc_ocl_ew_free(r.w);
	return rc;
}
