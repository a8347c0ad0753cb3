/* ooc_iter: out-of-core CGLS in z-slabs and chunks of views (ooc_iter.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo_util.h"
#include "backend/elementwise_ops.h"
#include "backend/splat_dev.h"
#include "plan/memory.h"
#include "plan/ooc_iter.h"
#include "plan/open.h"
#include "projectors/proj_cpu.h"
#include "util/rc_clock.h"

/* The voxel-driven pair s runs on g: what projector auto takes in memory
 * (backend.h's rc_bk_fp on the CPU engine), RC_PROJECTOR_RAYCAST when it
 * is ray casting's (not additive over slabs). */
static rc_projector pair_of(const rc_recon_spec *s, const rc_geom *g)
{
	if (s->algo.projector != RC_PROJECTOR_AUTO)
		return s->algo.projector;
	if (rc_dev_splat_suits(g))
		return RC_PROJECTOR_SPLAT;
	if (!rc_geom_is_2d(g) && rc_footprint_suits(g) && rc_footprint_auto_suits(g) && !getenv("RECOND_NO_FOOTPRINT"))
		return RC_PROJECTOR_FOOTPRINT;
	return RC_PROJECTOR_RAYCAST;
}

const char *rc_ooc_iter_refusal(const rc_recon_spec *s, const rc_geom *g)
{
	const rc_algo_params *a = &s->algo;
	if (a->name != RC_ALGO_CGLS && a->name != RC_ALGO_SIRT)
		return "out of core, only fdk, cgls and sirt run";
	if (s->geom.type == RC_GEOM_FAN || s->geom.type == RC_GEOM_PARALLEL)
		return "out of core, cgls and sirt run cone and matrices geometries only";
	if (a->tv_weight > 0)
		return "out of core, cgls and sirt run without TV (algorithm.tv.weight 0)";
	if (a->stop_tolerance > 0 || a->stop_discrepancy > 0 || a->stop_stagnation > 0)
		return "out of core, cgls and sirt run their iterations without stop rules (algorithm.stop: tolerance, "
		       "discrepancy and stagnation 0)";
	if (a->extend != RC_EXTEND_OFF)
		return "out of core, cgls and sirt run the asked volume only (algorithm.extend \"off\")";
	if (s->engine != RC_ENGINE_CPU && s->engine != RC_ENGINE_AUTO)
		return "out of core, cgls and sirt run on the cpu engine";
	if (a->projector == RC_PROJECTOR_RAYCAST || (g && pair_of(s, g) == RC_PROJECTOR_RAYCAST))
		return "out of core, cgls and sirt need a voxel-driven pair (algorithm.projector splat or footprint: ray "
		       "casting's does not add up over slabs)";
	/* the whole job's pair, as in memory (a slab may suit where the whole does not) */
	if (g && pair_of(s, g) == RC_PROJECTOR_SPLAT && !rc_dev_splat_suits(g))
		return "algorithm.projector \"splat\" needs a flat detector whose voxels project at most a pixel apart";
	if (g && pair_of(s, g) == RC_PROJECTOR_FOOTPRINT && !rc_footprint_suits(g))
		return "algorithm.projector \"footprint\" does not run on this geometry";
	return NULL;
}

/* ---- the plan ----------------------------------------------------------- */

static int evened(int n, int want)
{
	int parts = (n + want - 1) / want;
	return (n + parts - 1) / parts;
}

/* The most rows a slab of nzs slices (evened out) reads. */
static int most_rows(const rc_geom *g, int nz, int nzs)
{
	int most = 0;
	for (int z0 = 0; z0 < nz; z0 += nzs) {
		int r0, r1;
		rc_ooc_slab_rows(g, z0, z0 + nzs < nz ? z0 + nzs : nz, &r0, &r1);
		most = r1 - r0 > most ? r1 - r0 : most;
	}
	return most;
}

/* The peak of an iteration with slabs of nzs slices reading rows rows and
 * chunks of nk views: the process, q's chunk of whole views, the slab's
 * rows of the chunk (and the backend's copy), three slabs (the pass's, the
 * sum's, the backend's copy) and the projectors' own buffers (the voxel
 * back projection's block of 32 transposed views; the footprint pair's
 * block of views, a view per thread and the slab's z-fastest copy). */
static uint64_t iter_need(const rc_recon_spec *s, int footprint, int nzs, int rows, int nk)
{
	int sirt = s->algo.name == RC_ALGO_SIRT; /* one more slab: x beside s and C */
	uint64_t nu = (uint64_t)s->geom.det.nu, nv = (uint64_t)s->geom.det.nv, r = (uint64_t)(rows > 0 ? rows : 1);
	uint64_t slab = (uint64_t)s->vol.nx * (uint64_t)s->vol.ny * (uint64_t)nzs * 4;
	uint64_t chunk = nv * nu * (uint64_t)nk * 4, sub = r * nu * (uint64_t)nk * 4;
	uint64_t need = RC_MEM_BASE + chunk + 2 * sub + (uint64_t)(3 + sirt) * slab;
	need += 32 * ((r + 3 + 15) & ~(uint64_t)15) * (nu + 3) * 4;
	if (footprint) {
		long threads = s->threads > 0 ? s->threads : sysconf(_SC_NPROCESSORS_ONLN);
		threads = threads < 1 ? 1 : threads;
		need += (sub < RC_MEM_FPF_BLOCK ? sub : RC_MEM_FPF_BLOCK) + (uint64_t)threads * r * nu * 4 + slab;
	}
	return need;
}

static uint64_t io_of(const rc_recon_spec *s, int nzs, int rows, int chunks)
{
	uint64_t V = (uint64_t)s->vol.nx * (uint64_t)s->vol.ny * (uint64_t)s->vol.nz * 4;
	uint64_t P = (uint64_t)s->geom.det.nu * (uint64_t)s->geom.det.nv * (uint64_t)s->geom.nviews * 4;
	uint64_t S = (uint64_t)((s->vol.nz + nzs - 1) / nzs);
	uint64_t rowsP = P / (uint64_t)s->geom.det.nv * (uint64_t)rows;
	return (uint64_t)chunks * V + S * rowsP + 4 * V + 2 * P + 3 * V + 2 * P;
}

uint64_t rc_ooc_iter_io(const rc_recon_spec *s, const rc_ooc_plan *p)
{
	return io_of(s, p->slab_nz, p->rows, p->chunks);
}

int rc_ooc_plan_iter(const rc_recon_spec *s, const rc_geom *g, uint64_t budget, rc_ooc_plan *p, rc_err *err)
{
	memset(p, 0, sizeof *p);
	p->slabs = 1;
	p->slab_nz = s->vol.nz;
	p->rows = s->geom.det.nv;
	p->chunks = 1;
	p->budget_bytes = budget;
	p->predicted_bytes = rc_plan_memory(s, 0);
	if (!budget || p->predicted_bytes <= budget)
		return 0;
	const char *why = rc_ooc_iter_refusal(s, g);
	if (why)
		return rc_fail(err, RC_EUNSUPPORTED, "volume", "%s", why);
	rc_projector pair = pair_of(s, g);
	int nz = s->vol.nz, nviews = s->geom.nviews, fp = pair == RC_PROJECTOR_FOOTPRINT;
	if (nz < 2)
		return rc_fail(err, RC_EUNSUPPORTED, "volume", "out of core, an iterative run needs at least 2 slices to split");
	/* the FDK start's own plan, when the run takes it */
	uint64_t fdk_need = 0;
	int fdk = s->algo.initial == RC_INITIAL_FDK ||
		  (s->algo.initial == RC_INITIAL_AUTO && !rc_fdk_suits(g, s->algo.scan, NULL));
	if (fdk) {
		rc_recon_spec f = *s;
		rc_algo_params_default(&f.algo, RC_ALGO_FDK);
		f.algo.scan = s->algo.scan;
		rc_ooc_plan fp_plan;
		rc_err e;
		if (rc_ooc_plan_fdk(&f, g, budget, &fp_plan, &e))
			return rc_fail(err, RC_EUNSUPPORTED, "volume",
				       "out of core, the FDK start does not fit (%s): algorithm.initial \"zero\" may",
				       e.msg);
		fdk_need = fp_plan.predicted_bytes;
	}
	/* for each chunk size (halving), the thickest slab that fits; the
	 * thickest of those, then the least I/O per iteration: the splat walks
	 * z columns, its set-up per column and view paid once per slab (at
	 * 128^3 from 24 views, CGLS in slabs of 6, 32 and 128 slices took 7.4,
	 * 1.9 and 1.05 s, 0.92 s in memory), while a chunk more re-reads d
	 * once, mostly from the page cache */
	int found = 0;
	uint64_t best_io = 0, least = UINT64_MAX;
	for (int nk = nviews;; nk = (nk + 1) / 2) {
		int chunks = (nviews + nk - 1) / nk;
		nk = (nviews + chunks - 1) / chunks;
		uint64_t n1 = iter_need(s, fp, 1, most_rows(g, nz, 1), nk);
		least = n1 < least ? n1 : least;
		if (n1 <= budget) {
			int good = 1, bad = nz + 1;
			while (bad - good > 1) {
				int mid = good + (bad - good) / 2, nzs = evened(nz, mid);
				if (iter_need(s, fp, nzs, most_rows(g, nz, nzs), nk) <= budget)
					good = mid;
				else
					bad = mid;
			}
			int nzs = evened(nz, good), rows = most_rows(g, nz, nzs);
			uint64_t io = io_of(s, nzs, rows, chunks);
			if (!found || nzs > p->slab_nz || (nzs == p->slab_nz && io < best_io)) {
				found = 1;
				best_io = io;
				p->slab_nz = nzs;
				p->slabs = (nz + nzs - 1) / nzs;
				p->rows = rows;
				p->chunks = chunks;
				p->predicted_bytes = iter_need(s, fp, nzs, rows, nk);
			}
		}
		if (nk == 1)
			break;
	}
	if (!found) {
		p->predicted_bytes = least > fdk_need ? least : fdk_need;
		return rc_fail(err, RC_EUNSUPPORTED, "volume",
			       "out of core, one slice and one view at a time needs about %llu bytes, over the "
			       "budget of %llu bytes",
			       (unsigned long long)least, (unsigned long long)budget);
	}
	if (p->slabs == 1 && nz > 1) {
		/* out of core all the same (the stacks do not fit): two slabs
		 * mark the plan so, for a few rows read twice */
		p->slab_nz = (nz + 1) / 2;
		p->slabs = 2;
		p->rows = most_rows(g, nz, p->slab_nz);
		uint64_t n2 = iter_need(s, fp, p->slab_nz, p->rows, (nviews + p->chunks - 1) / p->chunks);
		p->predicted_bytes = n2 > p->predicted_bytes ? n2 : p->predicted_bytes;
	}
	p->predicted_bytes = p->predicted_bytes > fdk_need ? p->predicted_bytes : fdk_need;
	return 0;
}

/* ---- files -------------------------------------------------------------- */

static int rd(int fd, void *dst, size_t want, uint64_t off, rc_err *err)
{
	size_t got = 0;
	while (got < want) {
		ssize_t r = pread(fd, (char *)dst + got, want - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return rc_fail(err, RC_EIO, "", "cannot read a scratch or stack file: %s", strerror(errno));
		if (r == 0) { /* past the end of a sparse file just truncated: zeros */
			memset((char *)dst + got, 0, want - got);
			return 0;
		}
		got += (size_t)r;
	}
	return 0;
}

static int wr(int fd, const void *src, size_t len, uint64_t off, rc_err *err)
{
	size_t done = 0;
	while (done < len) {
		ssize_t w = pwrite(fd, (const char *)src + done, len - done, (off_t)(off + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return rc_fail(err, RC_EIO, "", "cannot write a scratch or volume file: %s",
				       w < 0 ? strerror(errno) : "no space");
		done += (size_t)w;
	}
	return 0;
}

/* ---- one run ------------------------------------------------------------ */

typedef struct run {
	const rc_recon_spec *s;
	const rc_geom *g;
	rc_projector pair;
	const atomic_int *cancel;
	uint64_t budget;        /* the plan's; 0: none */
	int nz, nzs, slabs, nviews, nk, chunks;
	size_t plane, view, nu; /* floats: a slice, a view, a row */
	uint64_t V, P;          /* bytes: a volume, a stack */
	int *r0, *r1;           /* per slab: the detector rows it reads */
	float *chunk, *rows, *a, *b, *c; /* c: SIRT's x slab */
	int pscr, vscr, stack;            /* SIRT: rinv (pscr at 0), C (vscr at 0), p */
} run;

static int cancelled(const run *R, rc_err *err)
{
	if (R->cancel && atomic_load(R->cancel))
		return rc_fail(err, RC_ECANCELLED, "", "cancelled");
	return 0;
}

/* Slab z0..z1 of views k0..k1 onto (back 0) or from (back 1) rows r0..r1:
 * vol (nx ny (z1-z0)) <-> rows ((k1-k0) (r1-r0) nu), the output overwritten. */
static int slab_project(const run *R, int back, int z0, int z1, int r0, int r1, int k0, int k1, float *vol,
			float *rows, rc_err *err)
{
	rc_recon_spec sub;
	double *owned = NULL;
	rc_geom *g = NULL;
	rc_backend *b = NULL;
	rc_vec *vv = NULL, *vp = NULL;
	int rc = rc_ooc_sub_spec(R->s, z0, z1, r0, r1, &sub, &owned, err);
	if (rc)
		return rc;
	sub.geom.nviews = k1 - k0;
	if (sub.geom.type == RC_GEOM_MATRICES)
		sub.geom.matrices += 12 * (size_t)k0;
	else
		sub.geom.angles_deg += k0;
	sub.limits.part = 1; /* views that see none of the slab are fine */
	sub.algo.projector = R->pair;
	sub.residual = 0;
	if ((rc = rc_geom_new(&sub.geom, &sub.vol, &sub.limits, &g, err)) ||
	    (rc = rc_backend_open(sub.engine, NULL, 0, &sub, g, &b, err)))
		goto out;
	rc_fp_kind fk = rc_algo_fp(&sub.algo, b);
	if (fk == RC_FP_RAYCAST) {
		rc = rc_fail(err, RC_EUNSUPPORTED, "algorithm.projector",
			     "out of core, a slab's backend offers no voxel-driven pair");
		goto out;
	}
	if (back) {
		if (!(rc = rc_bk_vec_from(b, RC_SPACE_PROJ, rows, &vp, err)) &&
		    !(rc = rc_bk_vec_for(b, RC_SPACE_VOLUME, vol, &vv, err)) &&
		    !(rc = rc_bk_back(b, rc_algo_bp_matched(&sub.algo, b), vp, vv, 0, k1 - k0, err)))
			rc = rc_bk_download(b, vv, vol, err);
	} else {
		if (!(rc = rc_bk_vec_from(b, RC_SPACE_VOLUME, vol, &vv, err)) &&
		    !(rc = rc_bk_vec_for(b, RC_SPACE_PROJ, rows, &vp, err)) &&
		    !(rc = rc_bk_forward(b, fk, vv, vp, 0, k1 - k0, err)))
			rc = rc_bk_download(b, vp, rows, err);
	}
out:
	if (b) {
		rc_bk_vec_free(b, vv);
		rc_bk_vec_free(b, vp);
	}
	rc_backend_free(b);
	rc_geom_free(g);
	free(owned);
	return rc;
}

static void chunk_views(const run *R, int c, int *k0, int *k1)
{
	*k0 = c * R->nk;
	*k1 = *k0 + R->nk < R->nviews ? *k0 + R->nk : R->nviews;
}

static void slab_z(const run *R, int i, int *z0, int *z1)
{
	*z0 = i * R->nzs;
	*z1 = *z0 + R->nzs < R->nz ? *z0 + R->nzs : R->nz;
}

static int sirt_residual(run *R, int k0, int k1, double *r2, rc_err *err);

/* dst (proj at dst_off) = A (volume vfd at v_off; vfd < 0: ones); *qq =
 * ||A v||^2; sirt: each chunk A x made SIRT's weighted residual
 * rinv (p - A x) before it is written, *qq then ||p - A x||^2. */
static int forward(run *R, int vfd, uint64_t v_off, int dst, uint64_t dst_off, int sirt, double *qq, rc_err *err)
{
	*qq = 0;
	for (int c = 0; c < R->chunks; c++) {
		int k0, k1, rc;
		chunk_views(R, c, &k0, &k1);
		size_t nk = (size_t)(k1 - k0);
		memset(R->chunk, 0, sizeof(float) * R->view * nk);
		for (int i = 0; i < R->slabs; i++) {
			int z0, z1, r0 = R->r0[i], r1 = R->r1[i];
			slab_z(R, i, &z0, &z1);
			if (r1 <= r0)
				continue;
			if (vfd < 0)
				for (size_t j = 0; j < R->plane * (size_t)(z1 - z0); j++)
					R->a[j] = 1.0f;
			if ((rc = cancelled(R, err)) ||
			    (vfd >= 0 && (rc = rd(vfd, R->a, sizeof(float) * R->plane * (size_t)(z1 - z0),
						  v_off + sizeof(float) * R->plane * (size_t)z0, err))) ||
			    (rc = slab_project(R, 0, z0, z1, r0, r1, k0, k1, R->a, R->rows, err)))
				return rc;
			size_t n = (size_t)(r1 - r0) * R->nu;
			for (size_t k = 0; k < nk; k++) {
				float *q = R->chunk + k * R->view + (size_t)r0 * R->nu;
				const float *f = R->rows + k * n;
				for (size_t j = 0; j < n; j++)
					q[j] += f[j];
			}
		}
		if (sirt && (rc = sirt_residual(R, k0, k1, qq, err)))
			return rc;
		for (size_t j = 0; j < R->view * nk && !sirt; j++)
			*qq += (double)R->chunk[j] * R->chunk[j];
		if ((rc = wr(dst, R->chunk, sizeof(float) * R->view * nk, dst_off + sizeof(float) * R->view * (size_t)k0,
			     err)))
			return rc;
	}
	return 0;
}

static int sirt_update(run *R, int z0, int z1, int xfd, rc_err *err);

/* volume dst (at dst_off) = A^T (proj pfd at p_off; pfd < 0: ones); *ss =
 * its ||.||^2; sirt: SIRT's update of x (dst) with it instead. */
static int backward(run *R, int pfd, uint64_t p_off, int dst, uint64_t dst_off, int sirt, double *ss, rc_err *err)
{
	*ss = 0;
	for (int i = 0; i < R->slabs; i++) {
		int z0, z1, r0 = R->r0[i], r1 = R->r1[i], rc;
		slab_z(R, i, &z0, &z1);
		size_t n = R->plane * (size_t)(z1 - z0), nr = (size_t)(r1 - r0) * R->nu;
		memset(R->b, 0, sizeof(float) * n);
		for (int c = 0; c < R->chunks && r1 > r0; c++) {
			int k0, k1;
			chunk_views(R, c, &k0, &k1);
			if ((rc = cancelled(R, err)))
				return rc;
			if (pfd < 0)
				for (size_t j = 0; j < nr * (size_t)(k1 - k0); j++)
					R->rows[j] = 1.0f;
			for (int k = k0; k < k1 && pfd >= 0; k++)
				if ((rc = rd(pfd, R->rows + (size_t)(k - k0) * nr, sizeof(float) * nr,
					     p_off + sizeof(float) * ((size_t)k * R->view + (size_t)r0 * R->nu), err)))
					return rc;
			if ((rc = slab_project(R, 1, z0, z1, r0, r1, k0, k1, R->a, R->rows, err)))
				return rc;
			for (size_t j = 0; j < n; j++)
				R->b[j] += R->a[j];
		}
		if (sirt) {
			if ((rc = sirt_update(R, z0, z1, dst, err)))
				return rc;
			continue;
		}
		for (size_t j = 0; j < n; j++)
			*ss += (double)R->b[j] * R->b[j];
		if ((rc = wr(dst, R->b, sizeof(float) * n, dst_off + sizeof(float) * R->plane * (size_t)z0, err)))
			return rc;
	}
	return 0;
}

/* Streamed y = y + a x over n floats of files (yfd, yoff) and (xfd, xoff),
 * in pieces of len floats in bufs ybuf and xbuf; xpay: y = x + a y.
 * *yy = ||y||^2 after (may be NULL). */
static int stream_axpy(int yfd, uint64_t yoff, int xfd, uint64_t xoff, uint64_t n, size_t len, float a, int xpay,
		       float *ybuf, float *xbuf, double *yy, rc_err *err)
{
	if (yy)
		*yy = 0;
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		int rc;
		if ((rc = rd(yfd, ybuf, sizeof(float) * m, yoff + 4 * i, err)) ||
		    (rc = rd(xfd, xbuf, sizeof(float) * m, xoff + 4 * i, err)))
			return rc;
		for (size_t j = 0; j < m; j++) {
			ybuf[j] = xpay ? xbuf[j] + a * ybuf[j] : ybuf[j] + a * xbuf[j];
			if (yy)
				*yy += (double)ybuf[j] * ybuf[j];
		}
		if ((rc = wr(yfd, ybuf, sizeof(float) * m, yoff + 4 * i, err)))
			return rc;
	}
	return 0;
}

/* Streamed copy of n floats, non-finite values as 0 (sanitise 1); *yy its ||.||^2. */
static int stream_copy(int dfd, uint64_t doff, int sfd, uint64_t soff, uint64_t n, size_t len, float *buf,
		       double *yy, rc_err *err)
{
	*yy = 0;
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		int rc;
		if ((rc = rd(sfd, buf, sizeof(float) * m, soff + 4 * i, err)))
			return rc;
		for (size_t j = 0; j < m; j++) {
			if (!isfinite(buf[j]))
				buf[j] = 0.0f;
			*yy += (double)buf[j] * buf[j];
		}
		if ((rc = wr(dfd, buf, sizeof(float) * m, doff + 4 * i, err)))
			return rc;
	}
	return 0;
}

/* The out-of-core FDK start into xfd (ooc.h) under the plan's budget (none:
 * the iterations' slabs), its filtered stack in pscr's first stack. */
static int fdk_start(run *R, int stack, int xfd, int pscr, rc_err *err)
{
	rc_recon_spec f = *R->s;
	rc_algo_params_default(&f.algo, RC_ALGO_FDK);
	f.algo.scan = R->s->algo.scan;
	rc_ooc_plan fp;
	float *slab = NULL;
	int rc = rc_ooc_plan_fdk(&f, R->g, R->budget, &fp, err);
	if (rc)
		return rc;
	if (!R->budget) {
		fp.slab_nz = R->nzs;
		fp.filter_chunk = rc_ooc_filters_once(R->g) ? R->nk : 0;
	}
	if (fp.filter_chunk > 0 && (rc = rc_ooc_filter(&f, R->g, stack, pscr, fp.filter_chunk, R->cancel, err)))
		return rc;
	if (!(slab = malloc(sizeof(float) * R->plane * (size_t)fp.slab_nz)))
		return rc_fail(err, RC_ENOMEM, "", "out of memory for a slab of %d slices", fp.slab_nz);
	rc_algo_hooks h = { .cancel = R->cancel };
	for (int z0 = 0; z0 < R->nz && !rc; z0 += fp.slab_nz) {
		int z1 = z0 + fp.slab_nz < R->nz ? z0 + fp.slab_nz : R->nz;
		rc_recon_report rep;
		if (!(rc = cancelled(R, err)) &&
		    !(rc = rc_ooc_fdk_slab(&f, R->g, fp.filter_chunk > 0 ? pscr : stack, fp.filter_chunk > 0, z0, z1,
					   slab, &h, &rep, err)))
			rc = wr(xfd, slab, sizeof(float) * R->plane * (size_t)(z1 - z0),
				sizeof(float) * R->plane * (size_t)z0, err);
	}
	free(slab);
	return rc;
}

static int progress(const rc_algo_hooks *hooks, int it, int of, double res, double t0)
{
	if (hooks && hooks->progress) {
		rc_progress pr = { .iteration = it, .of = of, .residual = res, .elapsed_s = rc_now_s() - t0 };
		hooks->progress(hooks->ud, &pr);
	}
	return 0;
}

/* x clamped at 0, slab by slab */
static int clamp(run *R, int xfd, rc_err *err)
{
	for (int i = 0; i < R->slabs; i++) {
		int z0, z1, rc;
		slab_z(R, i, &z0, &z1);
		size_t n = R->plane * (size_t)(z1 - z0);
		uint64_t off = sizeof(float) * R->plane * (size_t)z0;
		if ((rc = rd(xfd, R->a, sizeof(float) * n, off, err)))
			return rc;
		for (size_t j = 0; j < n; j++)
			R->a[j] = R->a[j] > 0.0f ? R->a[j] : 0.0f;
		if ((rc = wr(xfd, R->a, sizeof(float) * n, off, err)))
			return rc;
	}
	return 0;
}

/* x0 into xfd: 0 (the file truncated to its size reads zeros) or FDK's
 * (algorithm.initial fdk, or auto where the in-memory run takes it:
 * rc_algo_start); *start says which. */
static int start_x(run *R, int stack, int xfd, int pscr, const rc_algo_hooks *hooks, rc_initial *start, rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	int rc;
	*start = a->initial;
	if (*start == RC_INITIAL_AUTO)
		*start = !rc_fdk_suits(R->g, a->scan, NULL) ? RC_INITIAL_FDK : RC_INITIAL_ZERO;
	if (*start == RC_INITIAL_GIVEN)
		return rc_fail(err, RC_EUNSUPPORTED, "algorithm.initial", "out of core, the start is zero or fdk");
	if (ftruncate(xfd, 0) || ftruncate(xfd, (off_t)R->V))
		return rc_fail(err, RC_EIO, "", "cannot size the volume file: %s", strerror(errno));
	if (*start == RC_INITIAL_FDK) {
		if (hooks && hooks->phase)
			hooks->phase(hooks->ud, RC_PHASE_FDK_START);
		if ((rc = fdk_start(R, stack, xfd, pscr, err)))
			return rc;
		if (hooks && hooks->phase)
			hooks->phase(hooks->ud, RC_PHASE_ITERATING);
	}
	return 0;
}

/* n floats of fd from off replaced by their guarded inverse (the
 * backend's inv_guarded: 1 / v where v > rel * max, else 0), two passes */
static int inv_guarded(run *R, int fd, uint64_t off, uint64_t n, double rel, rc_err *err)
{
	size_t len = R->plane * (size_t)R->nzs;
	float mx = 0.0f;
	int rc;
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		if ((rc = rd(fd, R->a, sizeof(float) * m, off + 4 * i, err)))
			return rc;
		for (size_t j = 0; j < m; j++)
			mx = rc_ew_max(mx, R->a[j]);
	}
	float eps = (float)(rel * mx);
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		if ((rc = rd(fd, R->a, sizeof(float) * m, off + 4 * i, err)))
			return rc;
		for (size_t j = 0; j < m; j++)
			R->a[j] = rc_ew_inv_guarded(R->a[j], eps);
		if ((rc = wr(fd, R->a, sizeof(float) * m, off + 4 * i, err)))
			return rc;
	}
	return 0;
}

/* SIRT: views k0..k1 of A x in R->chunk become rinv (p - A x) (algo_sart.c's
 * residual; p's non-finite values as 0); *r2 += ||p - A x||^2 there */
static int sirt_residual(run *R, int k0, int k1, double *r2, rc_err *err)
{
	uint64_t n = (uint64_t)R->view * (uint64_t)(k1 - k0), off = 4 * (uint64_t)R->view * (uint64_t)k0;
	size_t len = R->plane * (size_t)R->nzs;
	int rc;
	for (uint64_t i = 0; i < n; i += len) {
		size_t m = n - i < len ? (size_t)(n - i) : len;
		if ((rc = rd(R->stack, R->a, sizeof(float) * m, off + 4 * i, err)) ||
		    (rc = rd(R->pscr, R->b, sizeof(float) * m, off + 4 * i, err)))
			return rc;
		float *e = R->chunk + i;
		for (size_t j = 0; j < m; j++) {
			float p = isfinite(R->a[j]) ? R->a[j] : 0.0f, d = rc_ew_residual(p, e[j]);
			*r2 += (double)d * d;
			e[j] = rc_ew_weigh(d, R->b[j]);
		}
	}
	return 0;
}

/* SIRT: x's slab z0..z1 += lambda C (A^T e) (R->b), clamped with nonnegative */
static int sirt_update(run *R, int z0, int z1, int xfd, rc_err *err)
{
	size_t n = R->plane * (size_t)(z1 - z0);
	uint64_t off = sizeof(float) * R->plane * (size_t)z0;
	const rc_algo_params *a = &R->s->algo;
	int rc;
	if ((rc = rd(R->vscr, R->a, sizeof(float) * n, off, err)) || (rc = rd(xfd, R->c, sizeof(float) * n, off, err)))
		return rc;
	for (size_t j = 0; j < n; j++)
		R->c[j] = rc_ew_update(R->c[j], R->b[j], R->a[j], (float)a->relaxation, a->nonnegative);
	return wr(xfd, R->c, sizeof(float) * n, off, err);
}

/* SIRT (algo_sirt.c): x += lambda C A^T (rinv (p - A x)), rinv = 1 / A 1
 * and C = 1 / A^T 1 guarded as the backend guards them; scratch: C at 0 of
 * vscr, rinv at 0 and the weighted residual at P of pscr.  Per iteration
 * a forward pass (the residual formed per chunk of views) and a back
 * projection pass that updates x slab by slab. */
static int iterate_sirt(run *R, int stack, int xfd, int vscr, int pscr, const rc_algo_hooks *hooks,
			rc_recon_report *rep, rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	const double t0 = rc_now_s();
	double r2, none;
	rc_initial start;
	int rc = start_x(R, stack, xfd, pscr, hooks, &start, err);
	if (rc)
		return rc;
	if (start != RC_INITIAL_ZERO && a->nonnegative && (rc = clamp(R, xfd, err)))
		return rc;
	if ((rc = forward(R, -1, 0, pscr, 0, 0, &none, err)) ||
	    (rc = inv_guarded(R, pscr, 0, R->P / 4, RC_ROWSUM_REL_EPS, err)) ||
	    (rc = backward(R, -1, 0, vscr, 0, 0, &none, err)) ||
	    (rc = inv_guarded(R, vscr, 0, R->V / 4, RC_COLSUM_REL_EPS, err)))
		return rc;
	for (int it = 1; it <= a->iterations; it++) {
		if ((rc = cancelled(R, err)))
			return rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
		r2 = 0;
		if ((rc = forward(R, xfd, 0, pscr, R->P, 1, &r2, err)) ||
		    (rc = backward(R, pscr, R->P, xfd, 0, 1, &none, err)))
			return rc;
		rep->iterations_done = it;
		progress(hooks, it, a->iterations, sqrt(r2), t0);
	}
	return 0;
}

static int iterate(run *R, int stack, int xfd, int vscr, int pscr, const rc_algo_hooks *hooks, rc_recon_report *rep,
		   rc_err *err)
{
	const rc_algo_params *a = &R->s->algo;
	const double t0 = rc_now_s();
	/* scratch: d at 0 and s at V of vscr; q at 0 and r at P of pscr */
	const uint64_t D = 0, S = R->V, Q = 0, Rr = R->P;
	const uint64_t nvox = R->V / 4, nproj = R->P / 4;
	/* the vector passes stream both spaces in pieces of a slab, in a and b */
	size_t slen = R->plane * (size_t)R->nzs;
	double pp, rr, qq, gamma, gnew;
	rc_initial start;
	int rc = start_x(R, stack, xfd, pscr, hooks, &start, err);
	if (rc)
		return rc;
	/* r = p (- A x0) */
	if ((rc = stream_copy(pscr, Rr, stack, 0, nproj, slen, R->a, &pp, err)))
		return rc;
	rr = pp;
	if (start == RC_INITIAL_FDK && ((rc = forward(R, xfd, 0, pscr, Q, 0, &qq, err)) ||
					(rc = stream_axpy(pscr, Rr, pscr, Q, nproj, slen, -1.0f, 0, R->a, R->b, &rr,
							  err))))
		return rc;
	/* s = A^T r, d = s, gamma = ||s||^2 */
	if ((rc = backward(R, pscr, Rr, vscr, S, 0, &gamma, err)) ||
	    (rc = stream_copy(vscr, D, vscr, S, nvox, slen, R->a, &gnew, err)))
		return rc;
	double res = sqrt(rr);
	int active = 1, it;
	for (it = 1; it <= a->iterations; it++) {
		if ((rc = cancelled(R, err)))
			return rc_fail(err, RC_ECANCELLED, "", "cancelled after %d iterations", it - 1);
		active = active && gamma > 0.0;
		if (active) {
			if ((rc = forward(R, vscr, D, pscr, Q, 0, &qq, err)))
				return rc;
			active = qq > 0.0;
		}
		if (active) {
			float alpha = (float)(gamma / qq);
			if ((rc = stream_axpy(pscr, Rr, pscr, Q, nproj, slen, -alpha, 0, R->a, R->b, &rr, err)) ||
			    (rc = stream_axpy(xfd, 0, vscr, D, nvox, slen, alpha, 0, R->a, R->b, NULL, err)))
				return rc;
			res = sqrt(rr);
		}
		if (active && it < a->iterations) {
			if ((rc = backward(R, pscr, Rr, vscr, S, 0, &gnew, err)))
				return rc;
			float beta = (float)(gnew / gamma);
			/* d = s + beta d */
			if ((rc = stream_axpy(vscr, D, vscr, S, nvox, slen, beta, 1, R->a, R->b, NULL, err)))
				return rc;
			gamma = gnew;
		}
		rep->iterations_done = it;
		progress(hooks, it, a->iterations, res, t0);
	}
	if (a->nonnegative && (rc = clamp(R, xfd, err)))
		return rc;
	rep->relative_residual = a->nonnegative || !(pp > 0) ? NAN : res / sqrt(pp);
	return 0;
}

int rc_ooc_iter(const rc_recon_spec *s, const rc_geom *g, int stack, int xfd, int vscr, int pscr,
		const rc_ooc_plan *p, const rc_algo_hooks *hooks, rc_recon_report *rep, rc_err *err)
{
	double t0 = rc_now_s();
	memset(rep, 0, sizeof *rep);
	rep->relative_residual = NAN;
	const char *why = rc_ooc_iter_refusal(s, g);
	if (why)
		return rc_fail(err, RC_EUNSUPPORTED, "volume", "%s", why);
	run R = { .s = s, .g = g, .pair = pair_of(s, g), .cancel = hooks ? hooks->cancel : NULL };
	R.budget = p->budget_bytes;
	R.stack = stack;
	R.pscr = pscr;
	R.vscr = vscr;
	R.nz = s->vol.nz;
	R.nzs = p->slab_nz > 0 && p->slab_nz < R.nz ? p->slab_nz : R.nz;
	R.slabs = (R.nz + R.nzs - 1) / R.nzs;
	R.nviews = s->geom.nviews;
	R.chunks = p->chunks > 0 && p->chunks < R.nviews ? p->chunks : 1;
	R.nk = (R.nviews + R.chunks - 1) / R.chunks;
	R.chunks = (R.nviews + R.nk - 1) / R.nk;
	R.nu = (size_t)s->geom.det.nu;
	R.view = R.nu * (size_t)s->geom.det.nv;
	R.plane = (size_t)s->vol.nx * (size_t)s->vol.ny;
	R.V = 4 * (uint64_t)R.plane * (uint64_t)R.nz;
	R.P = 4 * (uint64_t)R.view * (uint64_t)R.nviews;
	int most = 0, rc = 0;
	R.r0 = calloc((size_t)R.slabs, sizeof(int));
	R.r1 = calloc((size_t)R.slabs, sizeof(int));
	if (R.r0 && R.r1)
		for (int i = 0; i < R.slabs; i++) {
			int z0, z1;
			slab_z(&R, i, &z0, &z1);
			rc_ooc_slab_rows(g, z0, z1, &R.r0[i], &R.r1[i]);
			most = R.r1[i] - R.r0[i] > most ? R.r1[i] - R.r0[i] : most;
		}
	size_t slab = R.plane * (size_t)R.nzs, chunk = R.view * (size_t)R.nk;
	R.chunk = malloc(sizeof(float) * chunk);
	R.rows = malloc(sizeof(float) * (size_t)(most > 0 ? most : 1) * R.nu * (size_t)R.nk);
	R.a = malloc(sizeof(float) * slab);
	R.b = malloc(sizeof(float) * slab);
	int sirt = s->algo.name == RC_ALGO_SIRT;
	R.c = sirt ? malloc(sizeof(float) * slab) : NULL;
	if (!R.r0 || !R.r1 || !R.chunk || !R.rows || !R.a || !R.b || (sirt && !R.c)) {
		rc = rc_fail(err, RC_ENOMEM, "", "out of memory for a slab of %d slices and a chunk of %d views", R.nzs,
			     R.nk);
		goto out;
	}
	snprintf(rep->projector, sizeof rep->projector, "%s",
		 R.pair == RC_PROJECTOR_FOOTPRINT ? "footprint" : "splat");
	snprintf(rep->engine, sizeof rep->engine, "cpu");
	rc = (sirt ? iterate_sirt : iterate)(&R, stack, xfd, vscr, pscr, hooks, rep, err);
out:
	free(R.r0);
	free(R.r1);
	free(R.chunk);
	free(R.rows);
	free(R.a);
	free(R.b);
	free(R.c);
	rep->seconds = rc_now_s() - t0;
	return rc;
}
