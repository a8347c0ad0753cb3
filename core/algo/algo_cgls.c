/*
 * CGLS: conjugate gradients on the normal equations A^T A x = A^T p (paper
 * 001 Alg. 1) with A = rc_algo_fp and A^T = rc_algo_bp_matched, its exact
 * transpose (CG needs a symmetric A^T A; with an unmatched pair it stalls).
 *
 * Alg. 1 keeps the normal-equation residual s = A^T (p - A x) and forms
 * q = A^T A d.  The CGLS arrangement below produces the same iterates in
 * exact arithmetic but carries the data residual r = p - A x as well:
 *
 *   x = 0, r = p, s = A^T r, d = s, gamma = ||s||^2
 *     (from a start x0, algorithm.initial: r = p - A x0, one more
 *     forward projection)
 *   per iteration:  q = A d                       (forward projection)
 *                   alpha = gamma / ||q||^2       (= gamma / d^T A^T A d)
 *                   x += alpha d,  r -= alpha q
 *                   s = A^T r                     (back projection)
 *                   beta = ||s||^2 / gamma,  d = s + beta d
 *
 * so p^T A^T A p of Alg. 1 becomes ||A d||^2 (better conditioned in float),
 * and ||r|| = ||p - A x||, which CGLS minimises over a growing Krylov space,
 * is available each iteration without an extra projection: it is what the
 * progress call reports and it never rises.  The last iteration skips the
 * back projection it would only need for the next direction.
 *
 * Batches (backend.h): a 2-D stack is one least-squares problem per slice,
 * so alpha, beta and gamma are kept per batch (paper 001 runs its 32
 * slices so); a batch whose gamma or ||A d||^2 reaches 0 has converged and
 * keeps alpha = beta = 0, and once every batch has, the remaining
 * iterations only report.  A cone stack is one batch: the textbook method.
 *
 * With TV (algorithm.tv.weight = kappa > 0) the problem becomes
 * min 1/2 ||A x - p||^2 + beta TV(x), beta = kappa s a per batch
 * (algo_util.h's rc_tv: s the data's mean density, a the mean of A^T A 1,
 * measured at the start with one more forward projection: the sum of
 * A^T A 1 is ||A 1||^2).  It is
 * solved by nonlinear conjugate gradients on the same recurrences: the
 * gradient s = A^T r - beta grad TV(x) is exact at every iterate, the step
 * uses the lagged-diffusivity curvature
 *   alpha = gamma / (||A d||^2 + beta d^T L(x) d),  L(x) = D^T W(x) D
 * (tv_host.h), which is what makes TV's non-quadratic term look quadratic
 * around x, and d restarts as s every RC_CGLS_RESTART iterations, since L
 * moves with x.  Each iteration adds two TV operator calls, no projection,
 * and r = p - A x stays exact (x moves only along d).  beta = 0 is the
 * textbook CGLS above, unchanged.
 *
 * algorithm.nonnegative clamps the returned volume at 0 (clamping the
 * iterate would break the recurrences); relaxation and subsets do not
 * apply.
 *
 * Vectors, allocated once per run: r and q (projection-sized each), x, s
 * and d (volume-sized each), and with TV one more volume for L(x) d and
 * grad TV(x).
 */
#include "algo/algo_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per-batch scalars of one run, in one allocation. */
struct coef {
	double *gamma, *gnew, *qq, *rr, *dld;
	float *alpha, *neg, *beta, *tvneg; /* tvneg: -beta_tv per batch */
	int *active;
};

static int any_active(const struct coef *c, int n)
{
	for (int k = 0; k < n; k++)
		if (c->active[k])
			return 1;
	return 0;
}

/* A checkpoint (algo.h's rc_algo_state) of the run's vectors x, r, d
 * and scalars: the stop rule's last residual, res, the phase (0: after
 * iteration `iteration`; 1: within it, x and r moved and d, gamma not yet:
 * the run goes on with its back projection) and gamma and active per
 * batch. */
static int save(const rc_algo_hooks *hooks, rc_backend *b, rc_vec *const v[3], const struct coef *c,
		double *scal, double last, double res, int phase, int iteration, rc_err *err)
{
	const int B = b->nbatch;
	scal[0] = last;
	scal[1] = res;
	scal[2] = phase;
	for (int k = 0; k < B; k++) {
		scal[3 + k] = c->gamma[k];
		scal[3 + B + k] = c->active[k];
	}
	rc_algo_state st = { .name = RC_ALGO_CGLS, .iteration = iteration, .nvec = 3, .vec = { v[0], v[1], v[2] },
			     .space = { RC_SPACE_VOLUME, RC_SPACE_PROJ, RC_SPACE_VOLUME },
			     .nscal = 3 + 2 * B, .scal = scal };
	return rc_algo_checkpoint(hooks, b, &st, err);
}

int rc_cgls_run(const rc_algo_params *p, rc_backend *b, const float *proj,
		float *vol, const rc_algo_hooks *hooks, rc_err *err)
{
	rc_initial start = RC_INITIAL_GIVEN;
	const rc_algo_state *rs = hooks ? hooks->resume : NULL;
	int rc = rc_algo_check(p, b, proj, vol, 0, 0, err);
	if (rc || (rc = rs ? rc_algo_resume_check(p, b, rs, err) : rc_algo_start(p, b, proj, vol, hooks, &start, err)))
		return rc;
	const int nviews = rc_geom_nviews(b->geom);
	const int B = b->nbatch;
	const double t0 = rc_now_s();
	int it_done = rs ? rs->iteration : 0;
	/* a checkpoint's scalars: the stop rule's last residual, res, gamma
	 * and active per batch (algo.h) */
	double *scal = calloc(3 + 2 * (size_t)B, sizeof *scal);
	/* which checkpoint the vectors hold now (save's phase), -1: none
	 * (d moved before gamma; a cancel then saves nothing) */
	int form = -1, held = 0, pending = 0; /* held: the iteration of that state */
	if (rs)
		memcpy(vol, rs->host[0], rc_volume_count(rc_geom_volume(b->geom)) * sizeof *vol);
	rc_vec *r = NULL, *q = NULL, *x = NULL, *s = NULL, *d = NULL, *t = NULL;
	struct coef c;
	rc_stop stop;
	rc_tv tv = { 0 };
	void *mem = calloc((size_t)B, 5 * sizeof(double) + 4 * sizeof(float) + sizeof(int));
	if (!mem || !scal) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %d batches", B);
		goto out_free;
	}
	c.gamma = mem;
	c.gnew = c.gamma + B;
	c.qq = c.gnew + B;
	c.rr = c.qq + B;
	c.dld = c.rr + B;
	c.alpha = (float *)(c.dld + B);
	c.neg = c.alpha + B;
	c.beta = c.neg + B;
	c.tvneg = c.beta + B;
	c.active = (int *)(c.tvneg + B);

	if ((rc = rc_bk_vec_new(b, RC_SPACE_PROJ, &r, err)) || (rc = rc_bk_vec_new(b, RC_SPACE_PROJ, &q, err)) ||
	    (rc = (start != RC_INITIAL_ZERO ? rc_bk_vec_holding : rc_bk_vec_for)(b, RC_SPACE_VOLUME, vol, &x,
										    err)) ||
	    (rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &s, err)) || (rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &d, err)) ||
	    (p->tv_weight > 0.0 && (rc = rc_bk_vec_new(b, RC_SPACE_VOLUME, &t, err))))
		goto out_free;
	rc_stop_init(p, b->geom, proj, &stop);
	if ((rc = rc_bk_upload(b, r, proj, err)))
		goto out_free;
	if (t) {
		/* beta = kappa s a: q = A 1, s from r = p and q, a = mean A^T q;
		 * A^T is A's transpose, so the sum of A^T q is 1^T A^T A 1 =
		 * ||q||^2 and takes no back projection (the sum of A^T q equals
		 * it to rounding) */
		size_t nvox = rc_volume_count(rc_geom_volume(b->geom)) / (size_t)B;
		if ((rc = rc_bk_fill(b, d, 1.0f, RC_VIEWS_ALL, err)) ||
		    (rc = rc_bk_forward(b, rc_algo_fp(p, b), d, q, 0, nviews, err)) ||
		    (rc = rc_tv_new(p, b, r, q, 1, &tv, err)) || (rc = rc_bk_dot(b, q, q, c.gnew, err)))
			goto out_free;
		for (int k = 0; k < B; k++)
			c.tvneg[k] = tv.on ? (float)(-p->tv_weight * tv.scale[k] * c.gnew[k] / (double)nvox) : 0.0f;
	}

	/* x = 0, r = p, s = A^T r, d = s, gamma = ||s||^2 (grad TV(0) = 0);
	 * from a start x0 (algorithm.initial): r = p - A x0,
	 * s = A^T r - beta grad TV(x0) */
	double res = 0.0;
	if (rs) {
		/* the checkpoint's r, d and scalars instead (x is vol) */
		if ((rc = rc_bk_upload(b, r, rs->host[1], err)) || (rc = rc_bk_upload(b, d, rs->host[2], err)))
			goto out_free;
		res = rs->scal[1];
		pending = rs->scal[2] != 0.0;
		for (int k = 0; k < B; k++) {
			c.gamma[k] = rs->scal[3 + k];
			c.active[k] = rs->scal[3 + B + k] != 0.0;
		}
		goto resumed;
	}
	if (start != RC_INITIAL_ZERO) {
		for (int k = 0; k < B; k++)
			c.neg[k] = -1.0f;
		if ((rc = rc_bk_forward(b, rc_algo_fp(p, b), x, q, 0, nviews, err)) ||
		    (rc = rc_bk_axpy(b, r, c.neg, q, err)) ||
		    (rc = rc_bk_back(b, rc_algo_bp_matched(p, b), r, s, 0, nviews, err)) ||
		    (tv.on && ((rc = rc_bk_tv_apply(b, x, x, t, tv.eps, tv.host, err)) ||
			       (rc = rc_bk_axpy(b, s, c.tvneg, t, err)))))
			goto out_free;
	} else if ((rc = rc_bk_fill(b, x, 0.0f, RC_VIEWS_ALL, err)) ||
		   (rc = rc_bk_back(b, rc_algo_bp_matched(p, b), r, s, 0, nviews, err)))
		goto out_free;
	if ((rc = rc_bk_copy(b, d, s, err)) || (rc = rc_bk_dot(b, s, s, c.gamma, err)) ||
	    (rc = rc_bk_dot(b, r, r, c.rr, err)))
		goto out_free;
	res = sqrt(rc_bk_total(b, c.rr));
	for (int k = 0; k < B; k++)
		c.active[k] = 1;
resumed:
	if (rs)
		stop.last = rs->scal[0];

	/* a checkpoint within an iteration goes on with its back projection */
	if (pending)
		it_done--;
	for (int it = it_done + 1; it <= p->iterations; it++) {
		form = pending ? 1 : 0;
		held = pending ? it : it_done;
		if (!pending && rc_algo_cancelled(hooks)) {
			rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it_done);
			goto out_download;
		}
		/* gamma = 0: x already solves the batch's normal equations; the
		 * remaining iterations would divide 0 by 0, so they only report */
		for (int k = 0; k < B && !pending; k++)
			c.active[k] = c.active[k] && c.gamma[k] > 0.0;
		if (!pending && any_active(&c, B)) {
			if ((rc = rc_bk_forward(b, rc_algo_fp(p, b), d, q, 0, nviews, err)) ||
			    (rc = rc_bk_dot(b, q, q, c.qq, err)))
				goto out_download;
			/* d^T L(x) d: TV's curvature along d (beta_tv >= 0 adds to ||A d||^2) */
			if (tv.on && ((rc = rc_bk_tv_apply(b, x, d, t, tv.eps, tv.host, err)) ||
				      (rc = rc_bk_dot(b, d, t, c.dld, err))))
				goto out_download;
			for (int k = 0; k < B; k++) {
				double curv = c.qq[k] - (tv.on ? c.tvneg[k] * c.dld[k] : 0.0);
				/* curvature 0: d in the null space of A, nothing to gain */
				c.active[k] = c.active[k] && curv > 0.0;
				c.alpha[k] = c.active[k] ? (float)(c.gamma[k] / curv) : 0.0f;
				c.neg[k] = -c.alpha[k];
			}
			/* x and r change only while a batch is active (0 * d would
			 * still turn an inf in d into a NaN in x) */
			if (any_active(&c, B) &&
			    ((rc = rc_bk_axpy(b, x, c.alpha, d, err)) || (rc = rc_bk_axpy(b, r, c.neg, q, err)) ||
			     (rc = rc_bk_dot(b, r, r, c.rr, err))))
				goto out_download;
			res = sqrt(rc_bk_total(b, c.rr));
		}
		form = 1;
		held = it;
		if (any_active(&c, B) && it < p->iterations) {
			if (!pending && rc_algo_cancelled(hooks)) {
				/* x and r form a complete iterate already */
				it_done = it;
				rc_algo_report(hooks, b, x, it, p->iterations, res, t0, NULL);
				rc = rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it);
				goto out_download;
			}
			/* s = A^T r - beta_tv grad TV(x) */
			if ((rc = rc_bk_back(b, rc_algo_bp_matched(p, b), r, s, 0, nviews, err)) ||
			    (tv.on && ((rc = rc_bk_tv_apply(b, x, x, t, tv.eps, tv.host, err)) ||
				       (rc = rc_bk_axpy(b, s, c.tvneg, t, err)))) ||
			    (rc = rc_bk_dot(b, s, s, c.gnew, err)))
				goto out_download;
			/* with TV, d restarts as s every RC_CGLS_RESTART iterations (and
			 * every batch takes part again: L has moved) */
			int restart = tv.on && it % RC_CGLS_RESTART == 0;
			for (int k = 0; k < B; k++) {
				if (restart)
					c.active[k] = c.gnew[k] > 0.0;
				c.beta[k] = c.active[k] && !restart ? (float)(c.gnew[k] / c.gamma[k]) : 0.0f;
			}
			form = -1;
			if ((rc = rc_bk_xpay(b, d, s, c.beta, err)))
				goto out_download;
			for (int k = 0; k < B; k++)
				if (c.active[k])
					c.gamma[k] = c.gnew[k];
		}
		pending = 0;
		if ((rc = rc_bk_finish(b, err)))
			goto out_download;
		it_done = it;
		form = 0;
		held = it;
		const char *why = rc_stop_check(&stop, res);
		if ((rc = rc_algo_report(hooks, b, x, it, p->iterations, res, t0, why)) || why)
			goto out_download;
		rc_vec *const v[3] = { x, r, d };
		if (it < p->iterations && (rc = save(hooks, b, v, &c, scal, stop.last, res, 0, it, err)))
			goto out_download;
	}

out_download:
	/* cancelled (SIGTERM): the state the vectors still hold is kept (a
	 * cancel within an iteration's first projection leaves the last whole
	 * iteration, one within its back projection the iteration's update) */
	if (rc == RC_ECANCELLED && form >= 0 && held >= 1 && held < p->iterations) {
		rc_vec *const v[3] = { x, r, d };
		rc_err e2;
		save(hooks, b, v, &c, scal, stop.last, res, form, held, &e2);
	}
	/* vol is written after a clean run or a cancel (algo.h); the clamp is
	 * update with lambda 0 (s holds finite values) */
	if (!rc || rc == RC_ECANCELLED) {
		int drc = p->nonnegative ? rc_bk_update(b, x, s, s, 0.0f, 1, err) : 0;
		if (!drc)
			drc = rc_bk_download(b, x, vol, err);
		if (drc)
			rc = drc;
	}
out_free:
	rc_bk_vec_free(b, t);
	rc_bk_vec_free(b, d);
	rc_bk_vec_free(b, s);
	rc_bk_vec_free(b, x);
	rc_bk_vec_free(b, q);
	rc_bk_vec_free(b, r);
	free(mem);
	free(scal);
	rc_tv_free(&tv);
	return rc;
}
