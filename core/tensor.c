/*
 * tensor: the job path (tensor.h).  Steps: matrix from the cache (or built),
 * orderings, BSR of one fragment shape, gather the sinograms into the
 * ordered [row][slice] layout, CGLS on the GPU or the CPU, scatter back.
 * The CPU products are timed per call for the job report.
 */
#include "tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bsr.h"
#include "dd_matrix.h"
#include "engine_cpu.h"
#include "engine_cuda.h"
#include "morton.h"
#include "tensor_cg.h"
#include "tensor_gpu.h"

/* Alg. 2 block sizes: paper 001 §4.2, "we found the choice B_x = 4, B_y = 2
 * to give good sparsity patterns". */
#define MORTON_BX 4
#define MORTON_BY 2

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rc_tensor_opts_default(rc_tensor_opts *o)
{
	memset(o, 0, sizeof *o);
	o->fragment = -1;
	o->mixed = 1;
	o->gpu = -1;
}

struct cpu_ops {
	const rc_bsr *b;
	const rc_csr *m, *mt;
	int nc, threads;
	double sec[2];
	long calls[2];
};

static int cpu_fwd(void *ud, const float *x, float *y)
{
	struct cpu_ops *c = ud;
	double t = now_s();
	int rc = c->b ? rc_bsr_mul(c->b, x, y, c->nc, c->threads) : rc_csr_mul(c->m, x, y, c->nc, c->threads, NULL);
	c->sec[0] += now_s() - t;
	c->calls[0]++;
	return rc;
}

static int cpu_back(void *ud, const float *y, float *x)
{
	struct cpu_ops *c = ud;
	double t = now_s();
	int rc = c->b ? rc_bsr_mul_t(c->b, y, x, c->nc, c->threads) : rc_csr_mul(c->mt, y, x, c->nc, c->threads, NULL);
	c->sec[1] += now_s() - t;
	c->calls[1]++;
	return rc;
}

struct progress {
	const rc_tensor_opts *o;
	const rc_algo_hooks *hooks;
	double t0;
	int of;
};

static int on_iter(void *ud, const rc_cg_iter *it)
{
	struct progress *p = ud;
	if (p->o->iter)
		p->o->iter(p->o->iter_ud, it->iteration, it->residual, it->rel_change, it->error);
	if (p->hooks && p->hooks->progress) {
		rc_progress pr = { .iteration = it->iteration, .of = p->of, .residual = it->residual,
				   .elapsed_s = now_s() - p->t0 };
		p->hooks->progress(p->hooks->ud, &pr);
	}
	return 0;
}

#ifdef RC_HAVE_CUDA
static int on_gpu_iter(void *ud, int iteration, double residual, double rel_change)
{
	struct progress *p = ud;
	rc_cg_iter it = { .iteration = iteration, .of = p->of, .residual = residual, .rel_change = rel_change,
			  .error = -1 };
	on_iter(p, &it);
	if (p->hooks && p->hooks->cancel && atomic_load(p->hooks->cancel))
		return RC_ECANCELLED;
	return 0;
}
#endif

/* proj [z][row] -> Y [perm(row)][col z] (padded rows and slices zero). */
static void gather(const float *proj, int nz, int64_t rows, const int32_t *perm, int64_t rows_pad, int nc, float *Y)
{
	memset(Y, 0, (size_t)(rows_pad * nc) * sizeof *Y);
	for (int z = 0; z < nz; z++)
		for (int64_t r = 0; r < rows; r++)
			Y[(perm ? (int64_t)perm[r] : r) * nc + z] = proj[(int64_t)z * rows + r];
}

static void scatter(const float *X, int nz, int64_t cols, const int32_t *perm, int nc, float *vol)
{
	for (int z = 0; z < nz; z++)
		for (int64_t c = 0; c < cols; c++)
			vol[(int64_t)z * cols + c] = X[(perm ? (int64_t)perm[c] : c) * nc + z];
}

static rc_frag pick_fragment(int nz)
{
	/* the smallest matrix of Table 3 needs 32 slices to fill its fragment */
	if (nz >= 32)
		return RC_FRAG_8_32_16;
	if (nz >= 16)
		return RC_FRAG_16_16_16;
	return RC_FRAG_32_8_16;
}

int rc_tensor_solve(const rc_tensor_opts *o, const rc_algo_params *algo, const rc_geom *g,
		    const float *proj, float *vol, const rc_algo_hooks *hooks,
		    rc_recon_report *report, rc_err *err)
{
	rc_recon_report local;
	if (!report)
		report = &local;
	double t0 = now_s();
	rc_csr *m = NULL, *mt = NULL;
	rc_bsr *b = NULL;
	int32_t *rperm = NULL, *cperm = NULL;
	float *Y = NULL, *X = NULL, *Xref = NULL;
	int rc = 0, done = 0, hit = 0;
#ifdef RC_HAVE_CUDA
	rc_tgpu *gt = NULL;
#endif
	snprintf(report->engine, sizeof report->engine, "tensor");
	if (!rc_geom_is_2d(g))
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "the tensor engine runs fan and parallel geometries; use another execution.engine for cone or matrices");
	if (algo->name != RC_ALGO_CGLS)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.name",
			       "algorithm.name \"%s\" is not available on the tensor engine, which runs \"cgls\" only",
			       rc_algo_name_str(algo->name));
	if (algo->iterations < 1)
		return rc_fail(err, RC_EINVAL, "algorithm.iterations",
			       "algorithm.iterations must be at least 1 (got %d)", algo->iterations);
	const rc_volume_desc *v = rc_geom_volume(g);
	int nviews = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu, nz = v->nz;
	int64_t rows = (int64_t)nviews * nu, cols = (int64_t)v->nx * v->ny;
	rc_frag frag = o->fragment >= 0 && o->fragment < RC_FRAG_COUNT ? (rc_frag)o->fragment : pick_fragment(nz);

	rc = rc_dd_cached(g, o->cache_dir, o->threads, &m, &hit, err);
	if (rc)
		goto out;
	rc = rc_morton_perm(nu, nviews, MORTON_BX, MORTON_BY, &rperm, err);
	if (rc)
		goto out;
	rc = rc_morton_perm(v->nx, v->ny, MORTON_BX, MORTON_BY, &cperm, err);
	if (rc)
		goto out;
	rc_recon_matrix_report *mr = &report->matrix;
	mr->present = 1;
	mr->nnz = m->nnz;
	int64_t neb0, tot0;
	rc = rc_bsr_count(m, NULL, NULL, frag, o->threads, &neb0, &tot0, err);
	if (rc)
		goto out;
	mr->blocks_pct_before = tot0 ? 100.0 * (double)neb0 / (double)tot0 : 0;

	int use_gpu = 0;
#ifdef RC_HAVE_CUDA
	use_gpu = o->gpu != 0 && rc_tgpu_device_count() > 0;
#endif
	if (o->gpu == 1 && !use_gpu) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "execution.engine", "no CUDA device: the tensor engine's GPU path is not available here");
		goto out;
	}
	int64_t rows_pad = rows, cols_pad = cols;
	const int32_t *rp = NULL, *cp = NULL;
	if (o->mixed || use_gpu) {
		rc = rc_bsr_build(m, rperm, cperm, frag, o->threads, &b, err);
		if (rc)
			goto out;
		rows_pad = rc_bsr_rows_pad(b);
		cols_pad = rc_bsr_cols_pad(b);
		rp = rperm;
		cp = cperm;
		mr->blocks_pct_after = rc_bsr_neb_pct(b);
	} else {
		int64_t neb1, tot1;
		rc = rc_bsr_count(m, rperm, cperm, frag, o->threads, &neb1, &tot1, err);
		if (rc)
			goto out;
		mr->blocks_pct_after = tot1 ? 100.0 * (double)neb1 / (double)tot1 : 0;
	}
	if (o->mixed) {
		snprintf(mr->fragment, sizeof mr->fragment, "%s", rc_frag_get(frag)->name);
		mr->bytes = rc_bsr_bytes(b);
	} else {
		snprintf(mr->fragment, sizeof mr->fragment, "csr.fp32");
		mr->bytes = m->nnz * 8 + (int64_t)(m->rows + 1) * 8;
	}
#ifdef RC_HAVE_CUDA
	char msg[256] = "";
	if (use_gpu) {
		rc = rc_tgpu_new(b, o->mixed ? NULL : m, rperm, cperm, NULL, (nz + 31) / 32 * 32, &gt, msg, sizeof msg);
		if (rc == RC_ETOOBIG && o->gpu != 1) {
			/* does not fit the device: the CPU path, in its own index space */
			use_gpu = 0;
			rc = 0;
			if (!o->mixed) {
				rows_pad = rows;
				cols_pad = cols;
				rp = cp = NULL;
			}
		} else if (rc) {
			rc = rc_fail(err, rc, "execution.engine", "tensor engine, GPU: %s", msg);
			goto out;
		}
	}
#endif
	int nc = use_gpu ? (nz + 31) / 32 * 32 : nz;
	Y = malloc((size_t)(rows_pad * nc) * sizeof *Y);
	X = malloc((size_t)(cols_pad * nc) * sizeof *X);
	if (!Y || !X) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for %d slices of CG vectors", nc);
		goto out;
	}
	gather(proj, nz, rows, rp, rows_pad, nc, Y);
	if (o->vol_ref) {
		Xref = malloc((size_t)(cols_pad * nc) * sizeof *Xref);
		if (!Xref) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the reference volume");
			goto out;
		}
		float *tmp = Xref;
		memset(tmp, 0, (size_t)(cols_pad * nc) * sizeof *tmp);
		for (int z = 0; z < nz; z++)
			for (int64_t c = 0; c < cols; c++)
				tmp[(cp ? (int64_t)cp[c] : c) * nc + z] = o->vol_ref[(int64_t)z * cols + c];
	}
	struct progress pg = { .o = o, .hooks = hooks, .t0 = t0, .of = algo->iterations };
	report->ndevices = 1;
	rc_recon_device_report *d = &report->dev[0];
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		d->views[t] = nviews;
		d->predicted_ms[t] = -1;
	}
#ifdef RC_HAVE_CUDA
	if (use_gpu) {
		rc_tgpu_kind kind = o->mixed ? RC_TGPU_WMMA : RC_TGPU_CUSPARSE;
		snprintf(d->name, sizeof d->name, "cuda-tensor");
		/* the device's one identity (devices.h); the current CUDA device is 0 */
		rc_cuda_device_info ci;
		if (rc_engine_cuda_info(0, &ci, NULL) == 0)
			snprintf(d->device_id, sizeof d->device_id, "%s", ci.device_id);
		else
			snprintf(d->device_id, sizeof d->device_id, "%s", rc_tgpu_device_name(gt));
		rc = rc_tgpu_cgls(gt, kind, Y, X, algo->iterations, on_gpu_iter, &pg, &done, msg, sizeof msg);
		double msf = 0, msb = 0;
		if (!rc)
			rc_tgpu_time(gt, kind, 1, &msf, &msb, msg, sizeof msg);
		d->measured_ms[RC_TASK_FORWARD] = msf;
		d->measured_ms[RC_TASK_BACK] = msb;
		if (rc == RC_ECANCELLED)
			rc = rc_fail(err, RC_ECANCELLED, "", "the job was cancelled after %d iterations", done);
		else if (rc)
			rc = rc_fail(err, rc, "execution.engine", "tensor engine, GPU: %s", msg);
	}
#endif
	if (!use_gpu) {
		if (!o->mixed) {
			rc = rc_csr_transpose(m, &mt, err);
			if (rc)
				goto out;
		}
		struct cpu_ops co = { .b = o->mixed ? b : NULL, .m = m, .mt = mt, .nc = nc, .threads = o->threads };
		rc_cg_ops ops = { .n = cols_pad, .m = rows_pad, .ncols = nc, .fwd = cpu_fwd, .back = cpu_back, .ud = &co };
		rc_cg_opts copts = { .iterations = algo->iterations, .x_ref = Xref,
				     .cancel = hooks ? hooks->cancel : NULL, .iter = on_iter, .ud = &pg };
		snprintf(d->name, sizeof d->name, "cpu-%s", o->mixed ? "bsr-fp16" : "csr-fp32");
		rc_cpu_identity(d->device_id, sizeof d->device_id, NULL, 0);
		rc = rc_cgls(&ops, Y, X, &copts, &done, err);
		for (int t = 0; t < RC_TASK_COUNT; t++)
			d->measured_ms[t] = co.calls[t] ? 1e3 * co.sec[t] / (double)co.calls[t] : 0;
	}
	if (!rc || rc == RC_ECANCELLED)
		scatter(X, nz, cols, cp, nc, vol);
	report->iterations_done = done;
out:
#ifdef RC_HAVE_CUDA
	rc_tgpu_free(gt);
#endif
	report->seconds = now_s() - t0;
	free(Y);
	free(X);
	free(Xref);
	free(rperm);
	free(cperm);
	rc_bsr_free(b);
	rc_csr_free(mt);
	rc_csr_free(m);
	(void)hit;
	return rc;
}

int rc_tensor_run(const rc_recon_spec *s, const rc_geom *g, const float *proj, float *vol,
		  const rc_algo_hooks *hooks, rc_recon_report *report, rc_err *err)
{
	rc_tensor_opts o;
	rc_tensor_opts_default(&o);
	o.cache_dir = s->cache_dir;
	o.threads = s->threads;
	if (!strcmp(s->precision, "fp32"))
		o.mixed = 0;
	else if (!strcmp(s->precision, "mixed") || !strcmp(s->precision, "fp16"))
		o.mixed = 1;
	else
		return rc_fail(err, RC_EINVAL, "execution.precision",
			       "execution.precision \"%s\" is not known to the tensor engine; use \"mixed\" (fp16 matrix) or \"fp32\"",
			       s->precision);
	return rc_tensor_solve(&o, &s->algo, g, proj, vol, hooks, report, err);
}
