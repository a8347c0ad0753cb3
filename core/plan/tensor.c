/*
 * tensor: the job path (tensor.h).  Steps: matrix from the cache (or built),
 * orderings, BSR of one fragment shape (or the CSR fp32 and its transpose),
 * the tensor backend over it (backend_tensor.c: vectors in the ordered
 * [row][slice] layout, on the GPU or the CPU), then the algorithm as every
 * engine runs it (rc_algo_run_on).  The CPU products are timed per call
 * for the job report; on the GPU a forward and a back product are timed
 * after the run.
 */
#include "plan/tensor.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/names.h"
#include "projectors/bsr.h"
#include "projectors/bsr_cpu.h"
#include "projectors/bsr_cpu_cache.h"
#include "projectors/dd_matrix.h"
#include "projectors/fbp_matrix.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/cuda/engine_cuda.h"
#include "backend/backend.h"
#include "projectors/morton.h"
#include "util/rc_clock.h"
#include "backend/tensor/tensor_gpu.h"

/* Alg. 2 block sizes: paper 001 §4.2, "we found the choice B_x = 4, B_y = 2
 * to give good sparsity patterns". */
#define MORTON_BX 4
#define MORTON_BY 2

/* precision auto: up to this many ordered subsets the fp16 layout's whole
 * products per subset still beat the CSR's shares (at 32 slices a CSR
 * product costs 8.7 of the layout's on paper 001's case, more on a loaded
 * machine: docs/tensor.md, "precision auto") */
#define AUTO_MAX_SUBSETS 8

void rc_tensor_opts_default(rc_tensor_opts *o)
{
	memset(o, 0, sizeof *o);
	o->fragment = -1;
	o->mixed = 1;
	o->gpu = -1;
	o->cpu_input = -1;
}

/* Hooks around the caller's: progress passes through (and keeps the
 * residual and the iteration count), iterate computes opts->iter's error
 * and relative change from the downloaded iterate. */
struct watch {
	const rc_tensor_opts *o;
	const rc_algo_hooks *user;
	int done;
	double residual;
	size_t nvox;
	float *cur, *prev; /* host copies of the iterate (opts->iter only) */
	double refnorm2;
};

static void w_progress(void *ud, const rc_progress *p)
{
	struct watch *w = ud;
	w->done = p->iteration;
	w->residual = p->residual;
	if (w->user && w->user->progress)
		w->user->progress(w->user->ud, p);
}

static int w_iterate(void *ud, rc_backend *b, const rc_vec *x, int iteration)
{
	struct watch *w = ud;
	if (w->o->iter) {
		rc_err e;
		int rc = rc_bk_download(b, x, w->cur, &e);
		if (rc)
			return rc;
		double e2 = 0, x2 = 0, d2 = 0;
		for (size_t i = 0; i < w->nvox; i++) {
			double xv = w->cur[i], d = xv - w->prev[i];
			x2 += xv * xv;
			d2 += d * d;
			if (w->o->vol_ref) {
				double r = xv - w->o->vol_ref[i];
				e2 += r * r;
			}
		}
		double error = -1;
		if (w->o->vol_ref)
			error = w->refnorm2 > 0 ? sqrt(e2 / w->refnorm2) : sqrt(e2);
		w->o->iter(w->o->iter_ud, iteration, w->residual, x2 > 0 ? sqrt(d2 / x2) : 0, error);
		float *t = w->prev;
		w->prev = w->cur;
		w->cur = t;
	}
	return w->user && w->user->iterate ? w->user->iterate(w->user->ud, b, x, iteration) : 0;
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

/* What a tensor backend runs on (the matrix in its forms, the orderings,
 * the GPU's copy): released after the backend (rc_backend.release). */
struct tstate {
	rc_csr *m, *mt;
	rc_bsr *b;
	rc_bsr_cpu *bc;
	int32_t *rperm, *cperm;
	/* the CPU layout written to the cache while the run reads it (the
	 * write and its fsync cost the first job seconds it need not wait) */
	pthread_t store;
	int storing;
	const rc_geom *g;
	const char *cache_dir;
	int64_t cache_bound;
	int frag;
	rc_nz_meta meta;
	/* the layout as the writer reads it, copied before the thread starts:
	 * the run then writes its own scratch fields (xh, input) freely */
	rc_bsr_cpu snap;
#ifdef RC_HAVE_CUDA
	rc_tgpu *gt;
#endif
};

static void *store_layout(void *ud)
{
	struct tstate *ts = ud;
	rc_err err; /* best effort: a cache that cannot be written leaves the job as it is */
	if (rc_bsr_cpu_store(ts->g, ts->cache_dir, ts->cache_bound, ts->frag, &ts->snap, &ts->meta, &err))
		fprintf(stderr, "matrix cache: the CPU layout not stored: %s\n", err.msg);
	return NULL;
}

static void tstate_free(void *ud)
{
	struct tstate *ts = ud;
	if (!ts)
		return;
	if (ts->storing)
		pthread_join(ts->store, NULL);
#ifdef RC_HAVE_CUDA
	rc_tgpu_free(ts->gt);
#endif
	free(ts->rperm);
	free(ts->cperm);
	rc_bsr_free(ts->b);
	rc_bsr_cpu_free(ts->bc);
	rc_csr_free(ts->mt);
	rc_csr_free(ts->m);
	free(ts);
}

/* The cache directory's bound for matrix_cache.h (< 0: none). */
static int64_t cache_bound(const rc_tensor_opts *o) { return o->cache_bytes > 0 ? o->cache_bytes : -1; }

/* A layout larger than the cache's bound is not written (rc_mcache_admit):
 * the DD matrix then is, where it fits, so a later job reads it instead of
 * building it (the layout is ~2.6x its size).  Best effort, as the
 * layout's write. */
static void dd_if_layout_too_big(const rc_tensor_opts *o, const rc_geom *g, int frag, const struct tstate *ts)
{
	int64_t bound = cache_bound(o), lb = bound < 0 ? -1 : rc_bsr_cpu_file_bytes(g, frag, ts->bc);
	rc_err e;
	if (lb > bound && rc_dd_store(g, o->cache_dir, bound, ts->m, &e))
		fprintf(stderr, "matrix cache: the DD matrix not stored: %s\n", e.msg);
}

static void setup_at(const rc_tensor_opts *o, const char *phase, double fraction)
{
	if (o->setup)
		o->setup(o->setup_ud, phase, fraction);
}

/* The CPU layout's 16-bit input (bf16 where asked); RC_EUNSUPPORTED where
 * this CPU has no path for it. */
static int cpu_input(const rc_tensor_opts *o, rc_bsr_cpu *bc, rc_err *err)
{
	if (o->cpu_input >= 0 && rc_bsr_cpu_set_input(bc, (rc_spm_input)o->cpu_input))
		return rc_fail(err, RC_EUNSUPPORTED, "execution.precision",
			       "this CPU has no path for the tensor engine's %s products",
			       o->cpu_input == RC_SPM_IN_BF16 ? "bf16" : "requested");
	return 0;
}

int rc_tensor_open(const rc_tensor_opts *o, const rc_algo_params *algo, const rc_geom *g, rc_backend **ret,
		   rc_recon_report *report, rc_err *err)
{
	rc_recon_report local;
	if (!report)
		report = &local;
	rc_backend *bk = NULL;
	int rc = 0, hit = 0;
	double t0 = rc_now_s();
	snprintf(report->engine, sizeof report->engine, "tensor");
	if (!rc_geom_is_2d(g))
		return rc_fail(err, RC_EUNSUPPORTED, "geometry.type",
			       "the tensor engine runs fan and parallel geometries; use another execution.engine for cone or matrices");
	struct tstate *ts = calloc(1, sizeof *ts);
	if (!ts)
		return rc_fail(err, RC_ENOMEM, "", "out of memory for the tensor path");
	const rc_volume_desc *v = rc_geom_volume(g);
	int nviews = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu, nz = v->nz;
	int64_t rows = (int64_t)nviews * nu, cols = (int64_t)v->nx * v->ny;
	rc_frag frag = o->fragment >= 0 && o->fragment < RC_FRAG_COUNT ? (rc_frag)o->fragment : pick_fragment(nz);
	double proj_div = 1.0;
	rc_recon_matrix_report *mr = &report->matrix;
	mr->present = 1;
	/* FBP's matrix (an FDK job) is never cached */
	snprintf(mr->cache, sizeof mr->cache, "%s",
		 o->cache_dir && *o->cache_dir && algo->name != RC_ALGO_FDK ? "miss" : "off");

	int use_gpu = 0;
#ifdef RC_HAVE_CUDA
	use_gpu = o->gpu != 0 && rc_tgpu_device_count() > 0;
#endif
	if (o->gpu == 1 && !use_gpu) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "execution.engine", "no CUDA device: the tensor engine's GPU path is not available here");
		goto out;
	}
	/* The CPU's mixed path reads only its non-zero layout (bsr_cpu.h): a
	 * cached one is mapped, and nothing else is built. */
	int cpu_nz = !use_gpu && o->mixed && !o->cpu_blocks && !o->cpu_single_rows && algo->name != RC_ALGO_FDK;
	/* the CPU layout made straight from the DD matrix (no blocks: they
	 * are the GPU's operand) */
	int cpu_csr = !use_gpu && o->mixed && !o->cpu_blocks;
	rc_tensor_mat tm = { .g = g, .threads = o->threads, .proj_div = proj_div };
	int64_t rows_pad = rows, cols_pad = cols;
	const int32_t *rp = NULL, *cp = NULL;
	if (cpu_nz && o->cache_dir && *o->cache_dir) {
		rc_nz_meta meta;
		setup_at(o, "loading_matrix", 0.0);
		if (rc_bsr_cpu_load(g, o->cache_dir, (int)frag, o->threads, &ts->bc, &meta) == 0) {
			snprintf(mr->cache, sizeof mr->cache, "hit");
			mr->nnz = meta.nnz;
			mr->blocks_pct_before = meta.pct_before;
			mr->blocks_pct_after = meta.pct_after;
			mr->bytes = meta.bsr_bytes;
			snprintf(mr->fragment, sizeof mr->fragment, "%s", rc_frag_get(frag)->name);
			if ((rc = cpu_input(o, ts->bc, err)) ||
			    (rc = rc_morton_perm(nu, nviews, MORTON_BX, MORTON_BY, &ts->rperm, err)) ||
			    (rc = rc_morton_perm(v->nx, v->ny, MORTON_BX, MORTON_BY, &ts->cperm, err)))
				goto out;
			tm.cpu = ts->bc;
			tm.ncols = nz;
			rows_pad = meta.rows_pad;
			cols_pad = meta.cols_pad;
			rp = ts->rperm;
			cp = ts->cperm;
			setup_at(o, "loading_matrix", 1.0);
			goto backend;
		}
	}
	/* the fractions of a build, from the shares of its steps at 512^2 */
	setup_at(o, "building_matrix", 0.0);

	/* FDK is one product with FBP's back-projection matrix (fbp_matrix.h)
	 * in place of the system matrix: the backend's back product is M^T.
	 * A fan's matrix is scaled by D^2 (fp16 holds its weights then) and
	 * the backend divides the projections by D^2 as they are uploaded:
	 * FDK's filter is linear. */
	if (algo->name == RC_ALGO_FDK) {
		proj_div = rc_geom_type_of(g) == RC_GEOM_FAN ? rc_geom_sid(g) * rc_geom_sid(g) : 1.0;
		tm.proj_div = proj_div;
		rc = rc_fbp_matrix_build(g, proj_div, o->threads, &ts->m, err);
	} else {
		/* where the CPU layout is cached the DD matrix need not be: its
		 * file is read if there, not written */
		rc = cpu_nz ? rc_dd_cached_nostore(g, o->cache_dir, o->threads, &ts->m, &hit, err)
			    : rc_dd_cached_bounded(g, o->cache_dir, cache_bound(o), o->threads, &ts->m, &hit, err);
		/* the DD matrix from the cache: a hit where the products read it */
		if (!rc && hit && !cpu_nz)
			snprintf(mr->cache, sizeof mr->cache, "hit");
	}
	if (rc)
		goto out;
	setup_at(o, "building_matrix", 0.35);
	rc = rc_morton_perm(nu, nviews, MORTON_BX, MORTON_BY, &ts->rperm, err);
	if (rc)
		goto out;
	rc = rc_morton_perm(v->nx, v->ny, MORTON_BX, MORTON_BY, &ts->cperm, err);
	if (rc)
		goto out;
	mr->nnz = ts->m->nnz;
	int64_t neb0, tot0;
	rc = rc_bsr_count(ts->m, NULL, NULL, frag, o->threads, &neb0, &tot0, err);
	if (rc)
		goto out;
	mr->blocks_pct_before = tot0 ? 100.0 * (double)neb0 / (double)tot0 : 0;
	/* the CPU layout straight from the matrix: the steps' shares at 256^2 */
	setup_at(o, "building_matrix", cpu_csr ? 0.4 : 0.45);

	if (cpu_csr) {
		int64_t neb;
		const rc_frag_info *fi = rc_frag_get(frag);
		/* single rows asked for: the row groups not made at all */
		rc = rc_bsr_cpu_from_csr(ts->m, ts->rperm, ts->cperm, frag, o->threads, !o->cpu_single_rows, &ts->bc,
					 &neb, err);
		if (rc)
			goto out;
		rows_pad = ts->bc->a.rows;
		cols_pad = ts->bc->a.cols;
		rp = ts->rperm;
		cp = ts->cperm;
		/* the BSR not made, as far as its share and bytes go */
		rc_bsr shape = { .bm = fi->m, .bk = fi->k, .mb = (int)(rows_pad / fi->m), .nb = (int)(cols_pad / fi->k),
				 .neb = neb };
		mr->blocks_pct_after = rc_bsr_neb_pct(&shape);
		mr->bytes = rc_bsr_bytes(&shape);
		if (cpu_nz && !hit && o->cache_dir && *o->cache_dir)
			dd_if_layout_too_big(o, g, (int)frag, ts);
		/* the layout holds all the products read */
		rc_csr_free(ts->m);
		ts->m = NULL;
	} else if (o->mixed || use_gpu) {
		rc = rc_bsr_build(ts->m, ts->rperm, ts->cperm, frag, o->threads, &ts->b, err);
		if (rc)
			goto out;
		rows_pad = rc_bsr_rows_pad(ts->b);
		cols_pad = rc_bsr_cols_pad(ts->b);
		rp = ts->rperm;
		cp = ts->cperm;
		mr->blocks_pct_after = rc_bsr_neb_pct(ts->b);
	} else {
		int64_t neb1, tot1;
		rc = rc_bsr_count(ts->m, ts->rperm, ts->cperm, frag, o->threads, &neb1, &tot1, err);
		if (rc)
			goto out;
		mr->blocks_pct_after = tot1 ? 100.0 * (double)neb1 / (double)tot1 : 0;
	}
	setup_at(o, "building_matrix", cpu_csr ? 0.95 : 0.65);
	if (o->mixed) {
		snprintf(mr->fragment, sizeof mr->fragment, "%s", rc_frag_get(frag)->name);
		if (ts->b)
			mr->bytes = rc_bsr_bytes(ts->b);
	} else {
		snprintf(mr->fragment, sizeof mr->fragment, "csr.fp32");
		mr->bytes = ts->m->nnz * 8 + (int64_t)(ts->m->rows + 1) * 8;
	}
#ifdef RC_HAVE_CUDA
	char msg[256] = "";
	if (use_gpu) {
		int nc32 = (nz + 31) / 32 * 32, nvol, nproj;
		rc_algo_vectors(algo, g, &nvol, &nproj);
		rc = rc_tgpu_new(ts->b, o->mixed ? NULL : ts->m, ts->rperm, ts->cperm, NULL, nc32, &ts->gt, msg,
				 sizeof msg);
		/* the algorithm's vectors and the subset scratch vector */
		if (!rc)
			rc = rc_tgpu_vec_fit(ts->gt, nvol, nproj + 1, msg, sizeof msg);
		if (rc == RC_ETOOBIG && o->gpu != 1) {
			/* does not fit the device: the CPU path, in its own index space */
			rc_tgpu_free(ts->gt);
			ts->gt = NULL;
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
		} else {
			tm.gpu = ts->gt;
			tm.gpu_kind = o->mixed ? RC_TGPU_WMMA : RC_TGPU_CUSPARSE;
			tm.ncols = nc32;
		}
	}
#endif
	if (!use_gpu) {
		if (o->mixed && o->cpu_blocks) {
			tm.bsr = ts->b;
		} else if (o->mixed) {
			/* from the blocks where they were made (a GPU that the
			 * matrix did not fit) */
			if (!ts->bc) {
				if ((rc = rc_bsr_cpu_build(ts->b, o->threads, &ts->bc, err)))
					goto out;
				setup_at(o, "building_matrix", 0.9);
			}
			if ((rc = cpu_input(o, ts->bc, err)))
				goto out;
			/* (a layout from the CSR has none already; one from the
			 * blocks has) */
			if (o->cpu_single_rows) {
				rc_spm16p_free(&ts->bc->ap);
				rc_spm16p_free(&ts->bc->atp);
			}
			tm.cpu = ts->bc;
			/* a later job on this geometry maps it: written beside the
			 * run (joined when the backend is freed; without a thread,
			 * now) */
			if (cpu_nz && o->cache_dir && *o->cache_dir) {
				ts->meta = (rc_nz_meta){ rows_pad, cols_pad, mr->nnz, mr->bytes, mr->blocks_pct_before,
							 mr->blocks_pct_after };
				ts->g = g;
				ts->cache_dir = o->cache_dir;
				ts->cache_bound = cache_bound(o);
				ts->frag = (int)frag;
				ts->snap = *ts->bc;
				ts->storing = pthread_create(&ts->store, NULL, store_layout, ts) == 0;
				if (!ts->storing)
					store_layout(ts);
			}
			/* the products read only bc now: give back the blocks and the
			 * fp32 CSR (5.5 GB at 512^2) before the vectors are made */
			rc_bsr_free(ts->b);
			ts->b = NULL;
			rc_csr_free(ts->m);
			ts->m = NULL;
		} else {
			rc = rc_csr_transpose(ts->m, &ts->mt, err);
			if (rc)
				goto out;
			tm.csr = ts->m;
			tm.csr_t = ts->mt;
		}
		tm.ncols = nz;
	}
	setup_at(o, "building_matrix", 1.0);
backend:
	/* an iterative job's FDK start: FBP's back projection from A^T on the
	 * CPU path (backend_tensor.c), not the CPU engine's nor a second matrix */
	tm.fbp_start = algo->name != RC_ALGO_FDK && !use_gpu && (tm.cpu || tm.csr_t);
	tm.rperm = rp;
	tm.cperm = cp;
	tm.rows_pad = rows_pad;
	tm.cols_pad = cols_pad;
	if ((rc = rc_backend_tensor_new(&tm, &bk, err)))
		goto out;
	bk->release = tstate_free;
	bk->owner = ts;

	report->ndevices = 1;
	rc_recon_device_report *d = &report->dev[0];
	for (int t = 0; t < RC_TASK_COUNT; t++) {
		d->views[t] = nviews;
		d->predicted_ms[t] = -1;
	}
	if (use_gpu) {
#ifdef RC_HAVE_CUDA
		snprintf(d->name, sizeof d->name, "cuda-tensor");
		/* the device's one identity (devices.h); the current CUDA device is 0 */
		rc_cuda_device_info ci;
		if (rc_engine_cuda_info(0, &ci, NULL) == 0)
			snprintf(d->device_id, sizeof d->device_id, "%s", ci.device_id);
		else
			snprintf(d->device_id, sizeof d->device_id, "%s", rc_tgpu_device_name(ts->gt));
#endif
	} else {
		if (ts->bc)
			snprintf(d->name, sizeof d->name, "cpu-nz-fp16-%s", rc_bsr_cpu_path(ts->bc));
		else
			snprintf(d->name, sizeof d->name, "cpu-%s", o->mixed ? "bsr-fp16" : "csr-fp32");
		rc_cpu_identity(d->device_id, sizeof d->device_id, NULL, 0);
	}
	/* what ran: bf16 only where the CPU products take bf16 operands, 32
	 * slices on AVX512_BF16 (rc_bsr_cpu_mul); the GPU's WMMA, another
	 * slice count or a CPU without it run it as mixed */
	snprintf(mr->precision, sizeof mr->precision, "%s",
		 !o->mixed ? "fp32" : ts->bc && ts->bc->input == RC_SPM_IN_BF16 && tm.ncols == 32 ? "bf16" : "mixed");
	mr->setup_s = rc_now_s() - t0;
	*ret = bk;
	return 0;
out:
	tstate_free(ts);
	return rc;
}

void rc_tensor_report(rc_backend *bk, int ran, rc_recon_report *report)
{
	rc_recon_device_report *d = &report->dev[0];
	if (bk->caps & RC_BK_RESIDENT) {
		double msf = 0, msb = 0;
		if (ran)
			rc_backend_tensor_time(bk, &msf, &msb);
		d->measured_ms[RC_TASK_FORWARD] = msf;
		d->measured_ms[RC_TASK_BACK] = msb;
	} else {
		const rc_backend_stats *st = &bk->stats;
		for (int t = 0; t < RC_TASK_COUNT; t++)
			d->measured_ms[t] = st->calls[t] ? 1e3 * st->seconds[t] / (double)st->calls[t] : 0;
	}
}

int rc_tensor_solve(const rc_tensor_opts *o, const rc_algo_params *algo, const rc_geom *g,
		    const float *proj, float *vol, const rc_algo_hooks *hooks,
		    rc_recon_report *report, rc_err *err)
{
	rc_recon_report local;
	if (!report)
		report = &local;
	double t0 = rc_now_s();
	rc_backend *bk = NULL;
	struct watch w = { .o = o, .user = hooks };
	int rc = rc_tensor_open(o, algo, g, &bk, report, err);
	if (rc)
		goto out;
	w.nvox = rc_volume_count(rc_geom_volume(g));
	if (o->iter) {
		w.cur = malloc(w.nvox * sizeof *w.cur);
		w.prev = calloc(w.nvox, sizeof *w.prev);
		if (!w.cur || !w.prev) {
			rc = rc_fail(err, RC_ENOMEM, "", "out of memory for the per-iteration volume");
			goto out;
		}
		if (o->vol_ref)
			for (size_t i = 0; i < w.nvox; i++)
				w.refnorm2 += (double)o->vol_ref[i] * o->vol_ref[i];
	}
	rc_algo_hooks wh = { .progress = w_progress, .ud = &w, .cancel = hooks ? hooks->cancel : NULL,
			     .iterate = w_iterate };
	rc = rc_algo_run_on(algo, bk, proj, vol, &wh, err);
	report->iterations_done = w.done;
	rc_tensor_report(bk, !rc, report);
out:
	rc_backend_free(bk);
	report->seconds = rc_now_s() - t0;
	free(w.cur);
	free(w.prev);
	return rc;
}

int rc_tensor_runs_fp32(const rc_recon_spec *s)
{
	int precision;
	if (rc_name_parse(RC_NAMES_PRECISION, s->precision, &precision))
		return 0;
	if (precision == RC_PRECISION_AUTO)
		return rc_algo_subsets(&s->algo, s->geom.nviews) > AUTO_MAX_SUBSETS;
	return precision == RC_PRECISION_FP32;
}

int rc_tensor_opts_of(const rc_recon_spec *s, rc_tensor_opts *o, rc_err *err)
{
	rc_tensor_opts_default(o);
	o->cache_dir = s->cache_dir;
	o->cache_bytes = s->cache_bytes;
	o->threads = s->threads;
	o->setup = s->setup;
	o->setup_ud = s->setup_ud;
	int precision;
	if (rc_name_parse(RC_NAMES_PRECISION, s->precision, &precision))
		return rc_name_fail(err, RC_NAMES_PRECISION, "execution.precision", s->precision);
	/* auto: mixed, whose error stays within 1.05x fp32's (docs/tensor.md,
	 * "precision auto": 1.002x on paper 001's case, bf16 1.12x) at half
	 * its time or less; but with more than AUTO_MAX_SUBSETS ordered
	 * subsets fp32, whose CSR products cost a subset its share where the
	 * fp16 layout's cost a whole product each (backend_tensor.c) */
	if (precision == RC_PRECISION_AUTO)
		precision = rc_tensor_runs_fp32(s) ? RC_PRECISION_FP32 : RC_PRECISION_MIXED;
	o->mixed = precision != RC_PRECISION_FP32;
	/* bf16: the mixed path with bf16 operands (vdpbf16ps) where the CPU
	 * has them, else the mixed path as it is (the GPU's WMMA reads fp16) */
	if (precision == RC_PRECISION_BF16 && rc_bsr_cpu_has_bf16())
		o->cpu_input = RC_SPM_IN_BF16;
	/* engine cpu: the tensor backend's CPU path, never a GPU */
	if (s->engine == RC_ENGINE_CPU)
		o->gpu = 0;
	return 0;
}
