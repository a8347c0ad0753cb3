/*
 * bench-tensor-setup: the tensor path's set-up on a CPU (rc_tensor_open,
 * precision mixed), a first job on a geometry (no cache: the matrix and
 * the CPU layout built, the layout's cache file written beside it) and a
 * second (the layout mapped), with the wall and process CPU seconds of
 * each set-up phase (rc_tensor_opts.setup) and a hash of the layout as
 * the cache holds it (equal hashes: the same layout, bit for bit).
 * Geometry: make bench-peers' fan case, 256^2 pixels of 0.5 mm, 360 views
 * of 256 bins of 1 mm, D = 1000, S = 1500 mm, 32 slices;
 * RECOND_BENCH_N=512: 512^2 of 0.25 mm from 720 x 512 bins of 0.5 mm;
 * RECOND_BENCH_QUICK=1: 64^2 of 2 mm from 90 x 64 bins of 4 mm.
 * Then the CPU layout's two builds back to back in one process (same
 * load), each from the DD matrix built again: straight from the CSR (the
 * set-up's path) and through the fp16 BSR (rc_bsr_build, rc_bsr_cpu_build,
 * with the DD matrix written to the cache as that path did), their CPU
 * seconds per step and their layouts' hashes (equal: the same layout;
 * the program fails where they differ).
 * The cache is a fresh directory under RECOND_BENCH_CACHE (default /tmp),
 * removed at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algo/algo.h"
#include "backend/backend.h"
#include "plan/tensor.h"
#include "projectors/bsr_cpu_cache.h"
#include "projectors/dd_matrix.h"
#include "projectors/morton.h"
#include "util/rc_clock.h"

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct clk {
	double w0, c0, w, c;
	char phase[32];
	double frac;
};

static void on_setup(void *ud, const char *phase, double fraction)
{
	struct clk *k = ud;
	double w = rc_now_s(), c = cpu_s();
	if (k->phase[0])
		printf("    %-16s %4.2f -> %4.2f  wall %6.3f s  cpu %6.3f s\n", k->phase, k->frac, fraction, w - k->w,
		       c - k->c);
	snprintf(k->phase, sizeof k->phase, "%s", phase);
	k->frac = fraction;
	k->w = w;
	k->c = c;
}

static uint64_t h64(uint64_t h, const void *p, size_t n)
{
	return rc_dd_fnv1a(p, n) ^ (h * 1099511628211ULL);
}

static uint64_t spm_hash(uint64_t h, const rc_spm16 *m)
{
	h = h64(h, &m->nnz, sizeof m->nnz);
	h = h64(h, m->ptr, (size_t)(m->rows + 1) * sizeof *m->ptr);
	h = h64(h, m->idx, (size_t)m->nnz * sizeof *m->idx);
	return h64(h, m->val, (size_t)m->nnz * sizeof *m->val);
}

static uint64_t grp_hash(uint64_t h, const rc_spm16p *p)
{
	if (!p->group)
		return h;
	int64_t ns = p->sptr[p->pairs];
	h = h64(h, p->sptr, (size_t)(p->pairs + 1) * sizeof *p->sptr);
	h = h64(h, p->sidx, (size_t)ns * sizeof *p->sidx);
	h = h64(h, p->sval, (size_t)ns * sizeof *p->sval);
	if (p->group == 4) {
		int64_t nq = p->qptr[p->pairs / 2];
		h = h64(h, p->qptr, (size_t)(p->pairs / 2 + 1) * sizeof *p->qptr);
		h = h64(h, p->qidx, (size_t)nq * sizeof *p->qidx);
		h = h64(h, p->qval, (size_t)nq * sizeof *p->qval);
	}
	return spm_hash(h, &p->rest);
}

static int job(const char *label, const rc_geom *g, const char *dir)
{
	rc_tensor_opts o;
	rc_tensor_opts_default(&o);
	o.cache_dir = dir;
	struct clk k = { 0 };
	o.setup = on_setup;
	o.setup_ud = &k;
	rc_algo_params p;
	rc_algo_params_plain(&p, RC_ALGO_CGLS);
	rc_recon_report rep;
	memset(&rep, 0, sizeof rep);
	rc_backend *bk = NULL;
	rc_err err;
	printf("  %s\n", label);
	double w0 = rc_now_s(), c0 = cpu_s();
	k.w = w0;
	k.c = c0;
	if (rc_tensor_open(&o, &p, g, &bk, &rep, &err)) {
		fprintf(stderr, "bench-tensor-setup: %s\n", err.msg);
		return 1;
	}
	double w1 = rc_now_s(), c1 = cpu_s();
	rc_backend_free(bk); /* joins the cache file's writer */
	double w2 = rc_now_s(), c2 = cpu_s();
	const rc_recon_matrix_report *mr = &rep.matrix;
	printf("    set-up %.3f s wall, %.3f s cpu (cache %s; nnz %lld, blocks %.3f%% -> %.3f%%, BSR %lld B); "
	       "then the cache file's writer %.3f s wall, %.3f s cpu\n",
	       w1 - w0, c1 - c0, mr->cache, (long long)mr->nnz, mr->blocks_pct_before, mr->blocks_pct_after,
	       (long long)mr->bytes, w2 - w1, c2 - c1);
	return 0;
}

static uint64_t layout_hash(const rc_bsr_cpu *c)
{
	return grp_hash(grp_hash(spm_hash(spm_hash(0, &c->a), &c->at), &c->ap), &c->atp);
}

/* One build of the layout, from the DD matrix on: blocks 0 straight from
 * the CSR, 1 through the BSR. */
static int chain(const rc_geom *g, const char *dir, int blocks, uint64_t *hash)
{
	const rc_volume_desc *v = rc_geom_volume(g);
	int nviews = rc_geom_nviews(g), nu = rc_geom_detector(g)->nu;
	rc_csr *m = NULL;
	rc_bsr *b = NULL;
	rc_bsr_cpu *c = NULL;
	int32_t *rp = NULL, *cp = NULL;
	rc_err err;
	int hit, rc = 1;
	double w[5], u[5];
	w[0] = rc_now_s();
	u[0] = cpu_s();
	if (blocks ? rc_dd_cached(g, dir, 0, &m, &hit, &err) : rc_dd_build(g, 0, &m, &err))
		goto out;
	w[1] = rc_now_s();
	u[1] = cpu_s();
	int64_t neb0, tot0, neb = 0;
	if (rc_morton_perm(nu, nviews, 4, 2, &rp, &err) || rc_morton_perm(v->nx, v->ny, 4, 2, &cp, &err) ||
	    rc_bsr_count(m, NULL, NULL, RC_FRAG_8_32_16, 0, &neb0, &tot0, &err))
		goto out;
	w[2] = rc_now_s();
	u[2] = cpu_s();
	if (blocks && rc_bsr_build(m, rp, cp, RC_FRAG_8_32_16, 0, &b, &err))
		goto out;
	w[3] = rc_now_s();
	u[3] = cpu_s();
	if (blocks ? rc_bsr_cpu_build(b, 0, &c, &err) : rc_bsr_cpu_from_csr(m, rp, cp, RC_FRAG_8_32_16, 0, 1, &c, &neb, &err))
		goto out;
	w[4] = rc_now_s();
	u[4] = cpu_s();
	printf("  %-26s DD matrix%s %.3f s, block count %.3f s, BSR %.3f s, layout %.3f s: %.3f s CPU (%.3f s wall); "
	       "layout hash %016llx, blocks %lld\n",
	       blocks ? "layout through the BSR:" : "layout from the CSR:", blocks ? " (and its file)" : "", u[1] - u[0],
	       u[2] - u[1], u[3] - u[2], u[4] - u[3], u[4] - u[0], w[4] - w[0], (unsigned long long)layout_hash(c),
	       (long long)(blocks ? b->neb : neb));
	*hash = layout_hash(c);
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "bench-tensor-setup: %s\n", err.msg);
	rc_bsr_cpu_free(c);
	rc_bsr_free(b);
	rc_csr_free(m);
	free(rp);
	free(cp);
	return rc;
}

int main(void)
{
	const char *ns = getenv("RECOND_BENCH_N"), *base = getenv("RECOND_BENCH_CACHE"), *q = getenv("RECOND_BENCH_QUICK");
	int quick = q && *q && strcmp(q, "0");
	int n = quick ? 64 : ns && atoi(ns) == 512 ? 512 : 256, nviews = n == 512 ? 720 : n == 64 ? 90 : 360, nu = n,
	    nz = 32;
	double px = 128.0 / n, du = 256.0 / nu;
	static double ang[720];
	for (int i = 0; i < nviews; i++)
		ang[i] = 360.0 * i / nviews;
	rc_geom_spec sp = { .type = RC_GEOM_FAN, .nviews = nviews, .angles_deg = ang, .source_isocenter_mm = 1000,
			    .source_detector_mm = 1500 };
	sp.det.nu = nu;
	sp.det.nv = 1;
	sp.det.du = du;
	rc_volume_desc v = { n, n, nz, px, px, px, 0, 0, 0 };
	rc_geom *g = NULL;
	rc_err err;
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/rc-setup-XXXXXX", base && *base ? base : "/tmp");
	if (rc_geom_new(&sp, &v, NULL, &g, &err) || !mkdtemp(dir)) {
		fprintf(stderr, "bench-tensor-setup: no geometry or cache directory\n");
		return 1;
	}
	printf("tensor set-up (CPU, precision mixed): %d slices of %d^2 from %d x %d fan views\n", nz, n, nviews, nu);
	int rc = job("first job (nothing cached)", g, dir) || job("second job (the layout cached)", g, dir);
	rc_bsr_cpu *c = NULL;
	rc_nz_meta meta;
	if (!rc && rc_bsr_cpu_load(g, dir, RC_FRAG_8_32_16, 0, &c, &meta) == 0) {
		uint64_t h = spm_hash(0, &c->a);
		h = spm_hash(h, &c->at);
		h = grp_hash(h, &c->ap);
		h = grp_hash(h, &c->atp);
		printf("  layout hash %016llx (A %lld non-zeros, rows %lld x %lld padded)\n", (unsigned long long)h,
		       (long long)c->a.nnz, (long long)meta.rows_pad, (long long)meta.cols_pad);
		rc_bsr_cpu_free(c);
	}
	if (!rc) {
		printf("  the layout's builds, one after the other (CPU seconds of all threads per step)\n");
		uint64_t h0 = 0, h1 = 1;
		rc = chain(g, dir, 0, &h0) || chain(g, dir, 1, &h1);
		if (!rc && h0 != h1) {
			fprintf(stderr, "bench-tensor-setup: the two builds' layouts differ\n");
			rc = 1;
		}
	}
	char cmd[1100];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "bench-tensor-setup: %s not removed\n", dir);
	rc_geom_free(g);
	return rc;
}
