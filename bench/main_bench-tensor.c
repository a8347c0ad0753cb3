/*
 * bench-tensor: paper 001's tables on this machine.
 *
 *  1. Table 3: non-empty blocks before/after the pseudo-Morton ordering for
 *     a 512^2 image and 720 x 512 fan projections, each fragment shape, and
 *     Table 5's matrix memory derived from the same counts (CPU only).
 *  2. CPU products (fp16 BSR, fp32 accumulation; and fp32 CSR) in ms per
 *     image per iteration (one A and one A^T product / slices) at a modest
 *     size, 32 slices.
 *  3. On a GPU: Table 4's grid (images 64^2 .. 512^2, 720 x 512 projections,
 *     32 slices) for each fragment shape (WMMA), cuSPARSE CSR fp32, half2
 *     and on-the-fly; matrix memory (Table 5); fraction of the memory
 *     bandwidth the WMMA products reach; Table 6's single-slice projection
 *     through the 8 symmetries.  Without a device: "no CUDA device".
 * RECOND_BENCH_QUICK=1: small sizes, finishes in seconds.
 *
 * Geometry (paper 001 gives the sizes only): fan beam over 360 degrees,
 * source 1000 mm from the axis, detector 2000 mm from the source, bins
 * sized so the detector sees the whole image from every view; the image
 * spans 512 mm whatever its pixel count (the paper keeps the projections
 * fixed at 720 x 512 while the image grows).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "projectors/bsr.h"
#include "projectors/dd_matrix.h"
#include "projectors/morton.h"
#include "backend/tensor/tensor_gpu.h"
#include "projectors/tensor_sym.h"
#include "util/rc_clock.h"
#include "paper001.h"

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static rc_geom *bench_geom(int n, int nviews, int nu, int nz)
{
	rc_geom *g = NULL;
	rc_err err;
	if (paper001_geom(n, nviews, nu, nz, &g, &err)) {
		fprintf(stderr, "bench-tensor: geometry: %s\n", err.msg);
		exit(1);
	}
	return g;
}

static void perms(const rc_geom *g, int32_t **rp, int32_t **cp)
{
	rc_err err;
	const rc_volume_desc *v = rc_geom_volume(g);
	if (rc_morton_perm(rc_geom_detector(g)->nu, rc_geom_nviews(g), 4, 2, rp, &err) ||
	    rc_morton_perm(v->nx, v->ny, 4, 2, cp, &err)) {
		fprintf(stderr, "bench-tensor: %s\n", err.msg);
		exit(1);
	}
}

static void table3(int quick)
{
	int n = quick ? 128 : 512, nviews = quick ? 180 : 720, nu = quick ? 128 : 512;
	static const double paper_before[3] = { 5.19, 8.83, 3.36 }, paper_after[3] = { 2.01, 2.57, 1.55 };
	static const double paper_gb[3] = { 3.92, 4.98, 3.04 };
	rc_geom *g = bench_geom(n, nviews, nu, 1);
	int32_t *rp, *cp;
	perms(g, &rp, &cp);
	int64_t nb[RC_FRAG_COUNT], tb[RC_FRAG_COUNT], na[RC_FRAG_COUNT], ta[RC_FRAG_COUNT], nnz = 0;
	rc_err err;
	double t0 = rc_now_s();
	if (rc_dd_block_stats(g, NULL, NULL, 0, nb, tb, &nnz, &err) ||
	    rc_dd_block_stats(g, rp, cp, 0, na, ta, NULL, &err)) {
		fprintf(stderr, "bench-tensor: %s\n", err.msg);
		exit(1);
	}
	printf("Table 3: non-empty blocks, %dx%d image, %dx%d fan projections (%.1f s to count)\n", n, n, nviews, nu,
	       rc_now_s() - t0);
	printf("  matrix %d x %d, %lld non-zeros (paper, 512^2: 321.9e6)\n", nviews * nu, n * n, (long long)nnz);
	printf("  %-9s %-9s %12s %9s %9s %7s   %s\n", "fragment", "block", "blocks", "before%", "after%", "gain",
	       n == 512 ? "paper before -> after" : "");
	for (int f = 0; f < RC_FRAG_COUNT; f++) {
		const rc_frag_info *fi = rc_frag_get((rc_frag)f);
		double b = 100.0 * (double)nb[f] / (double)tb[f], a = 100.0 * (double)na[f] / (double)ta[f];
		char blk[16];
		snprintf(blk, sizeof blk, "%dx%d", fi->m, fi->k);
		printf("  %-9s %-9s %12lld %9.2f %9.2f %6.2fx", fi->name, blk, (long long)tb[f], b, a, b / a);
		if (n == 512)
			printf("   %.2f -> %.2f (%.2fx)", paper_before[f], paper_after[f], paper_before[f] / paper_after[f]);
		printf("\n");
	}
	printf("Table 5 from these counts: matrix memory (GB = 1e9 bytes)\n");
	for (int f = 0; f < RC_FRAG_COUNT; f++) {
		const rc_frag_info *fi = rc_frag_get((rc_frag)f);
		double bytes = (double)na[f] * fi->m * fi->k * 2 + (double)(tb[f] / ((n * n + 15) / 16) + 1) * 8 +
			       (double)na[f] * 4;
		printf("  BSR(half) %-9s %8.2f GB", fi->name, bytes / 1e9);
		if (n == 512)
			printf("   (paper: %.2f)", paper_gb[f]);
		printf("\n");
	}
	printf("  CSR(fp32)           %8.2f GB%s\n", ((double)nnz * 8 + (double)nviews * nu * 4) / 1e9,
	       n == 512 ? "   (paper: 1.93)" : "");
	free(rp);
	free(cp);
	rc_geom_free(g);
}

static void cpu_products(int quick)
{
	int n = quick ? 64 : 128, nviews = quick ? 90 : 180, nu = quick ? 64 : 128, nc = 32;
	int reps = quick ? 1 : 3;
	rc_geom *g = bench_geom(n, nviews, nu, 1);
	int32_t *rp, *cp;
	perms(g, &rp, &cp);
	rc_csr *m = NULL, *mt = NULL;
	rc_err err;
	double t0 = rc_now_s();
	if (rc_dd_build(g, 0, &m, &err) || rc_csr_transpose(m, &mt, &err)) {
		fprintf(stderr, "bench-tensor: %s\n", err.msg);
		exit(1);
	}
	printf("CPU products: %dx%d image, %dx%d projections, %d slices, all cores; matrix built in %.2f s\n", n, n,
	       nviews, nu, nc, rc_now_s() - t0);
	printf("  (wall ms on a shared machine; cpu ms = CPU time of all threads, the load-independent cost)\n");
	printf("  %-16s %10s %10s %16s %12s %16s %8s\n", "matrix", "A ms", "A^T ms", "ms/image/iter", "cpu ms/iter",
	       "cpu ms/image/it", "MiB");
	for (int f = 0; f <= RC_FRAG_COUNT; f++) {
		rc_bsr *b = NULL;
		int64_t R = m->rows, C = m->cols;
		if (f < RC_FRAG_COUNT) {
			if (rc_bsr_build(m, rp, cp, (rc_frag)f, 0, &b, &err)) {
				fprintf(stderr, "bench-tensor: %s\n", err.msg);
				exit(1);
			}
			R = rc_bsr_rows_pad(b);
			C = rc_bsr_cols_pad(b);
		}
		float *x = malloc(sizeof(float) * (size_t)(C * nc)), *y = malloc(sizeof(float) * (size_t)(R * nc));
		for (int64_t i = 0; i < C * nc; i++)
			x[i] = (float)(i % 17) / 17.0f;
		for (int64_t i = 0; i < R * nc; i++)
			y[i] = (float)(i % 13) / 13.0f;
		double tf = 1e30, tb = 1e30, tc = 1e30;
		for (int r = 0; r < reps; r++) {
			double c0 = cpu_s();
			double t = rc_now_s();
			if (b)
				rc_bsr_mul(b, x, y, nc, 0);
			else
				rc_csr_mul(m, x, y, nc, 0, &err);
			tf = fmin(tf, rc_now_s() - t);
			t = rc_now_s();
			if (b)
				rc_bsr_mul_t(b, y, x, nc, 0);
			else
				rc_csr_mul(mt, y, x, nc, 0, &err);
			tb = fmin(tb, rc_now_s() - t);
			tc = fmin(tc, cpu_s() - c0);
		}
		double mib = b ? (double)rc_bsr_bytes(b) / 1048576.0 : (double)(m->nnz * 8 + (int64_t)m->rows * 8) / 1048576.0;
		char name[32];
		snprintf(name, sizeof name, "%s %s", b ? "BSR fp16" : "CSR fp32", b ? rc_frag_get((rc_frag)f)->name : "");
		printf("  %-16s %10.2f %10.2f %16.3f %12.2f %16.3f %8.1f\n", name, 1e3 * tf, 1e3 * tb, 1e3 * (tf + tb) / nc,
		       1e3 * tc, 1e3 * tc / nc, mib);
		free(x);
		free(y);
		rc_bsr_free(b);
	}
	rc_csr_free(m);
	rc_csr_free(mt);
	free(rp);
	free(cp);
	rc_geom_free(g);
}

#ifdef RC_HAVE_CUDA
static void gpu_tables(int quick)
{
	static const int sizes_full[] = { 64, 128, 256, 320, 384, 512 }, sizes_quick[] = { 64, 128 };
	const int *sizes = quick ? sizes_quick : sizes_full;
	int nsizes = quick ? 2 : 6, nviews = quick ? 180 : 720, nu = quick ? 128 : 512, nc = 32;
	int reps = quick ? 2 : 10;
	static const char *kind_name[RC_TGPU_KIND_COUNT] = { "WMMA", "half2", "cuSPARSE", "on-the-fly" };
	char msg[256];
	printf("GPU: Table 4, ms per image per iteration (A and A^T over %d slices, / %d), %dx%d projections\n", nc, nc,
	       nviews, nu);
	for (int si = 0; si < nsizes; si++) {
		int n = sizes[si];
		rc_geom *g = bench_geom(n, nviews, nu, 1);
		int32_t *rp, *cp;
		perms(g, &rp, &cp);
		rc_csr *m = NULL;
		rc_err err;
		if (rc_dd_build(g, 0, &m, &err)) {
			fprintf(stderr, "bench-tensor: %s\n", err.msg);
			exit(1);
		}
		double *A = malloc(sizeof(double) * 6 * nviews);
		for (int k = 0; k < nviews; k++)
			memcpy(A + 6 * k, rc_geom_view(g, k)->A, sizeof(double) * 6);
		rc_tgpu_geom gg = { nviews, nu, n, n, 512.0 / n, 512.0 / n, 0, 0, A };
		for (int f = 0; f < RC_FRAG_COUNT; f++) {
			rc_bsr *b = NULL;
			rc_tgpu *t = NULL;
			if (rc_bsr_build(m, rp, cp, (rc_frag)f, 0, &b, &err)) {
				fprintf(stderr, "bench-tensor: %s\n", err.msg);
				exit(1);
			}
			/* the baselines do not depend on the fragment: run them with the last */
			int last = f == RC_FRAG_COUNT - 1;
			if (rc_tgpu_new(b, last ? m : NULL, rp, cp, last ? &gg : NULL, nc, &t, msg, sizeof msg)) {
				printf("  %4d^2 %-8s: %s\n", n, rc_frag_get((rc_frag)f)->name, msg);
				rc_bsr_free(b);
				continue;
			}
			for (int kind = 0; kind < (last ? RC_TGPU_KIND_COUNT : 1); kind++) {
				double mf = 0, mb = 0;
				if (rc_tgpu_time(t, (rc_tgpu_kind)kind, reps, &mf, &mb, msg, sizeof msg)) {
					printf("  %4d^2 %-10s: %s\n", n, kind_name[kind], msg);
					continue;
				}
				int64_t bytes = rc_tgpu_matrix_bytes(t, (rc_tgpu_kind)kind);
				double gbs = bytes > 0 ? 2.0 * (double)bytes / ((mf + mb) * 1e-3) / 1e9 : 0;
				char label[32];
				snprintf(label, sizeof label, "%s%s%s", kind_name[kind], kind == RC_TGPU_WMMA ? " " : "",
					 kind == RC_TGPU_WMMA ? rc_frag_get((rc_frag)f)->name : "");
				printf("  %4d^2 %-18s %8.3f ms/image/iter (A %.3f ms, A^T %.3f ms)  matrix %.2f GB  %.0f GB/s = %.0f%% of %.0f GB/s  [%s]\n",
				       n, label, (mf + mb) / nc, mf, mb, (double)bytes / 1e9, gbs,
				       100 * gbs / rc_tgpu_peak_gbs(t), rc_tgpu_peak_gbs(t), rc_tgpu_device_name(t));
			}
			rc_tgpu_free(t);
			rc_bsr_free(b);
		}
		free(A);
		free(rp);
		free(cp);
		rc_csr_free(m);
		rc_geom_free(g);
		/* Table 6: one slice through the 8 symmetries (32.8.16) */
		rc_geom *gs = bench_geom(n, nviews, nu, 1);
		rc_sym *s = NULL;
		if (!rc_sym_new(gs, 0, &s, &err)) {
			float *img = calloc((size_t)n * n, sizeof(float)), *proj = malloc(sizeof(float) * (size_t)s->rows);
			for (int i = 0; i < n * n; i++)
				img[i] = (float)(i % 7) / 7.0f;
			double ms = 0, best = 1e30;
			for (int r = 0; r < 3; r++)
				if (!rc_tgpu_sym_forward(s, img, proj, &ms, msg, sizeof msg))
					best = fmin(best, ms);
			printf("  %4d^2 symmetric single-slice forward (32.8.16): %.3f ms, sector matrix %.2f GB\n", n, best,
			       (double)rc_bsr_bytes(s->b) / 1e9);
			free(img);
			free(proj);
			rc_sym_free(s);
		} else {
			printf("  %4d^2 symmetric projection: %s\n", n, err.msg);
		}
		rc_geom_free(gs);
	}
}
#endif

int main(void)
{
	const char *q = getenv("RECOND_BENCH_QUICK");
	int quick = q && *q && strcmp(q, "0");
	printf("bench-tensor (paper 001)%s\n", quick ? " [quick]" : "");
	table3(quick);
	cpu_products(quick);
#ifdef RC_HAVE_CUDA
	if (rc_tgpu_device_count() > 0)
		gpu_tables(quick);
	else
		printf("GPU tables (Table 4, 5, 6): no CUDA device\n");
#else
	printf("GPU tables (Table 4, 5, 6): no CUDA device (this build has no CUDA)\n");
#endif
	return 0;
}
