/*
 * bench-tensor-spmm: the tensor path's two CPU products alone (A X and
 * A^T Y over 32 slices, the CPU layout of bsr_cpu.h built from the 8.32.16
 * BSR in paper 001's order), wall and CPU time of all threads per product
 * and per image per iteration (= one A and one A^T over 32 images), for
 * tuning the kernels without a whole CGLS run.  Sizes and matrix cache as
 * bench-tensor-cg (RECOND_BENCH_SEED001=1: 512^2 from 720 x 512).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "projectors/bsr.h"
#include "projectors/bsr_cpu.h"
#include "projectors/morton.h"
#include "util/rc_clock.h"
#include "paper001.h"

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
	const char *q = getenv("RECOND_BENCH_QUICK"), *s1 = getenv("RECOND_BENCH_SEED001");
	const char *cache = getenv("RECOND_BENCH_CACHE");
	int quick = q && *q && strcmp(q, "0"), seed = s1 && *s1 && strcmp(s1, "0");
	int n = quick ? 64 : seed ? 512 : 256, nviews = quick ? 90 : seed ? 720 : 360, nu = n, nz = 32;
	if (!cache)
		cache = "/tmp/recond-bench-cache";
	mkdir(cache, 0755);
	rc_geom *g = NULL;
	rc_csr *m = NULL;
	rc_bsr *b = NULL;
	rc_bsr_cpu *c = NULL;
	int32_t *rp = NULL, *cp = NULL;
	float *x = NULL, *y = NULL;
	rc_err err;
	int rc = 1;
	double t0 = rc_now_s();
	if (paper001_geom(n, nviews, nu, nz, &g, &err) || rc_dd_cached(g, cache, 0, &m, NULL, &err) ||
	    rc_morton_perm(nu, nviews, 4, 2, &rp, &err) || rc_morton_perm(n, n, 4, 2, &cp, &err) ||
	    rc_bsr_build(m, rp, cp, RC_FRAG_8_32_16, 0, &b, &err))
		goto out;
	rc_csr_free(m);
	m = NULL;
	double t1 = rc_now_s();
	if (rc_bsr_cpu_build(b, 0, &c, &err))
		goto out;
	double t2 = rc_now_s();
	int64_t R0 = rc_bsr_rows_pad(b), C0 = rc_bsr_cols_pad(b);
	rc_bsr_free(b);
	b = NULL;
	/* 64-byte aligned, as the tensor backend's vectors */
	x = aligned_alloc(64, sizeof(float) * (size_t)(C0 * nz));
	y = aligned_alloc(64, sizeof(float) * (size_t)(R0 * nz));
	if (!x || !y)
		goto out;
	for (int64_t i = 0; i < C0 * nz; i++)
		x[i] = (float)(i % 97) / 97.0f;
	for (int64_t i = 0; i < R0 * nz; i++)
		y[i] = (float)(i % 89) / 89.0f - 0.5f;
	printf("bench-tensor-spmm: %d^2 from %d x %d, %d slices, %lld non-zeros, path %s; matrix %.1f s, CPU layout %.1f s\n",
	       n, nviews, nu, nz, (long long)c->a.nnz, rc_bsr_cpu_path(c), t1 - t0, t2 - t1);
	int reps = quick ? 20 : 4;
	/* the fp32 input's kernels in one run: the row groups the build made
	 * (the default), groups of 2 and 4 made here, one row at a time */
	rc_spm16p keep_ap = c->ap, keep_atp = c->atp, gp[2][2];
	memset(gp, 0, sizeof gp);
	for (int k = 0; k < 2 && keep_ap.group; k++) {
		if (rc_spm16p_make(&c->a, 2 + 2 * k, 0, &gp[k][0]) || rc_spm16p_make(&c->at, 2 + 2 * k, 0, &gp[k][1])) {
			fprintf(stderr, "bench-tensor-spmm: out of memory for the row groups\n");
			return 1;
		}
		for (int t = 0; t < 2; t++) {
			const rc_spm16p *p = &gp[k][t];
			double nnz = (double)(t ? c->at.nnz : c->a.nnz), q = p->group == 4 ? 4.0 * (double)p->qptr[p->pairs / 2] : 0;
			printf("  groups of %d, %s: %.1f%% of the non-zeros in columns all rows of the group have, %.1f%% in "
			       "columns both rows of a pair have (not all), %.1f%% alone\n",
			       p->group, t ? "A^T" : "A", 100 * q / nnz, 200 * (double)p->sptr[p->pairs] / nnz,
			       100 * (double)p->rest.nnz / nnz);
		}
	}
	/* then the bf16 input (where the CPU has it): the build's groups, one
	 * row at a time */
	/* which pairing of a group's four rows shares most (columns both
	 * rows of a pair have, counted twice): (0 1)(2 3), (0 2)(1 3), (0 3)(1 2) */
	for (int t = 0; t < 2; t++) {
		const rc_spm16 *m = t ? &c->at : &c->a;
		static const int pr[3][4] = { { 0, 1, 2, 3 }, { 0, 2, 1, 3 }, { 0, 3, 1, 2 } };
		double sh[3] = { 0, 0, 0 };
		for (int64_t g = 0; g + 4 <= m->rows; g += 4)
			for (int v = 0; v < 3; v++)
				for (int h = 0; h < 2; h++) {
					int64_t i = m->ptr[g + pr[v][2 * h]], ie = m->ptr[g + pr[v][2 * h] + 1];
					int64_t j = m->ptr[g + pr[v][2 * h + 1]], je = m->ptr[g + pr[v][2 * h + 1] + 1];
					while (i < ie && j < je) {
						if (m->idx[i] == m->idx[j])
							sh[v] += 2, i++, j++;
						else if (m->idx[i] < m->idx[j])
							i++;
						else
							j++;
					}
				}
		printf("  %s: pairings (01)(23) %.1f%%, (02)(13) %.1f%%, (03)(12) %.1f%% of the non-zeros shared in pairs\n",
		       t ? "A^T" : "A", 100 * sh[0] / (double)m->nnz, 100 * sh[1] / (double)m->nnz, 100 * sh[2] / (double)m->nnz);
	}
	static const char *vname[6] = { "build", "pairs", "quads", "single", "bf16", "bf16-1" };
	int keep_in = c->input, nvar = keep_ap.group ? (rc_bsr_cpu_set_input(c, RC_SPM_IN_BF16) ? 4 : 6) : 1;
	c->input = keep_in;
	for (int pass = 0; pass < 2 * nvar; pass++) {
		int trans = pass % 2, var = keep_ap.group ? pass / 2 : 3;
		c->input = var >= 4 ? RC_SPM_IN_BF16 : RC_SPM_IN_FP32;
		c->ap = var == 0 || var == 4 ? keep_ap : var < 3 ? gp[var - 1][0] : (rc_spm16p){ 0 };
		c->atp = var == 0 || var == 4 ? keep_atp : var < 3 ? gp[var - 1][1] : (rc_spm16p){ 0 };
		double w = 1e30, cc = 1e30;
		for (int r = 0; r < reps; r++) {
			double a = rc_now_s(), ca = cpu_s();
			rc_bsr_cpu_mul(c, trans, trans ? y : x, trans ? x : y, nz, 0);
			double dw = rc_now_s() - a, dc = cpu_s() - ca;
			w = dw < w ? dw : w;
			cc = dc < cc ? dc : cc;
		}
		printf("  %-4s %-6s best of %d: %8.1f ms wall %8.1f ms cpu, per image %.3f / %.3f ms, %.2f cpu-ns per non-zero x 32 slices\n",
		       trans ? "A^T" : "A", vname[var], reps, 1e3 * w, 1e3 * cc, 1e3 * w / nz, 1e3 * cc / nz, 1e9 * cc / (double)c->a.nnz);
	}
	c->ap = keep_ap;
	c->atp = keep_atp;
	c->input = keep_in;
	for (int k = 0; k < 2; k++) {
		rc_spm16p_free(&gp[k][0]);
		rc_spm16p_free(&gp[k][1]);
	}
	/* the 16-bit inputs against the fp32 one: relative L2 difference of
	 * A x and A^T y (x, y as above) */
	{
		int64_t big = R0 > C0 ? R0 : C0;
		float *y32 = malloc(sizeof(float) * (size_t)(big * nz)), *y16 = malloc(sizeof(float) * (size_t)(big * nz));
		int keep = c->input;
		for (int mode = 1; mode <= 4 && y32 && y16; mode++) {
			int tr = mode > 2;
			int64_t no = tr ? C0 : R0;
			c->input = RC_SPM_IN_FP32;
			rc_bsr_cpu_mul(c, tr, tr ? y : x, y32, nz, 0);
			c->input = 2 - mode % 2;
			rc_bsr_cpu_mul(c, tr, tr ? y : x, y16, nz, 0);
			double d = 0, n2 = 0;
			for (int64_t i = 0; i < no * nz; i++) {
				d += ((double)y16[i] - y32[i]) * ((double)y16[i] - y32[i]);
				n2 += (double)y32[i] * y32[i];
			}
			printf("  input %s: %s differs from the fp32 input's by %.3g (relative L2)\n", mode % 2 ? "fp16" : "bf16",
			       tr ? "A^T y" : "A x", sqrt(d / n2));
		}
		c->input = keep;
		free(y32);
		free(y16);
	}
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "bench-tensor-spmm: %s\n", err.msg);
	rc_bsr_cpu_free(c);
	rc_bsr_free(b);
	rc_csr_free(m);
	rc_geom_free(g);
	free(rp);
	free(cp);
	free(x);
	free(y);
	return rc;
}
