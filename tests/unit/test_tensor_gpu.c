/*
 * test_tensor_gpu: the CUDA products of the tensor path against the CPU
 * implementation: WMMA and half2 (fp16 blocks) against rc_bsr_mul /
 * rc_bsr_mul_t for each fragment shape, cuSPARSE and the on-the-fly kernel
 * against the fp32 CSR, the algorithms on the tensor backend's device
 * vectors against its CPU path (CGLS after 30 iterations, SART with 8
 * subsets, MLEM: the same error), the 8-symmetry projection against its CPU version, and the
 * job path with the GPU required.  Skips (77) with "no CUDA device".
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "projectors/bsr.h"
#include "projectors/morton.h"
#include "plan/tensor.h"
#include "backend/tensor/tensor_gpu.h"
#include "tensor_phantom.h"
#include "projectors/tensor_sym.h"

#ifdef RC_HAVE_CUDA

#define N_IMG 96
#define N_VIEWS 120
#define NC 32

static double rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += (double)(a[i] - b[i]) * (a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

static unsigned lcg(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static void test_products(void **state)
{
	(void)state;
	rc_geom *g;
	int nu = N_IMG + N_IMG / 4;
	assert_int_equal(tp_geom(RC_GEOM_FAN, N_IMG, 1.0, N_VIEWS, nu, 1, 0, &g), 0);
	rc_csr *m = NULL;
	rc_err err;
	assert_int_equal(rc_dd_build(g, 0, &m, &err), 0);
	int32_t *rp = NULL, *cp = NULL;
	assert_int_equal(rc_morton_perm(nu, N_VIEWS, 4, 2, &rp, &err), 0);
	assert_int_equal(rc_morton_perm(N_IMG, N_IMG, 4, 2, &cp, &err), 0);
	double *A = malloc(sizeof(double) * 6 * N_VIEWS);
	for (int k = 0; k < N_VIEWS; k++)
		memcpy(A + 6 * k, rc_geom_view(g, k)->A, sizeof(double) * 6);
	rc_tgpu_geom gg = { N_VIEWS, nu, N_IMG, N_IMG, 1, 1, 0, 0, A };
	for (int f = 0; f < RC_FRAG_COUNT; f++) {
		rc_bsr *b = NULL;
		assert_int_equal(rc_bsr_build(m, rp, cp, (rc_frag)f, 0, &b, &err), 0);
		int64_t R = rc_bsr_rows_pad(b), C = rc_bsr_cols_pad(b);
		float *x = calloc((size_t)(C * NC), sizeof(float)), *y = calloc((size_t)(R * NC), sizeof(float));
		float *cpu = malloc(sizeof(float) * (size_t)((R > C ? R : C) * NC));
		float *gpu = malloc(sizeof(float) * (size_t)((R > C ? R : C) * NC));
		unsigned s = 5;
		/* real pixels and rows only: the padding stays zero */
		for (int i = 0; i < m->cols; i++)
			for (int c = 0; c < NC; c++)
				x[(int64_t)cp[i] * NC + c] = (float)(lcg(&s) % 1000) / 1000.0f * (1 + c);
		for (int i = 0; i < m->rows; i++)
			for (int c = 0; c < NC; c++)
				y[(int64_t)rp[i] * NC + c] = (float)(lcg(&s) % 1000) / 1000.0f - 0.25f;
		rc_tgpu *t = NULL;
		char msg[256];
		int rc = rc_tgpu_new(b, m, rp, cp, &gg, NC, &t, msg, sizeof msg);
		if (rc)
			fail_msg("rc_tgpu_new: %s", msg);
		for (int kind = 0; kind < RC_TGPU_KIND_COUNT; kind++) {
			/* fp16 kinds are compared with the fp16 CPU product,
			 * fp32 kinds with the fp32 CSR product brought into the
			 * same ordered space */
			double tol = kind == RC_TGPU_WMMA ? 2e-3 : kind == RC_TGPU_HALF2 ? 5e-3 : 1e-5;
			for (int tr = 0; tr < 2; tr++) {
				int64_t nout = tr ? C : R;
				if (kind <= RC_TGPU_HALF2) {
					if (tr)
						assert_int_equal(rc_bsr_mul_t(b, y, cpu, NC, 0), 0);
					else
						assert_int_equal(rc_bsr_mul(b, x, cpu, NC, 0), 0);
				} else {
					/* natural-order CSR product, then ordered */
					float *nin = malloc(sizeof(float) * (size_t)((R > C ? R : C) * NC));
					float *nout_v = malloc(sizeof(float) * (size_t)((R > C ? R : C) * NC));
					rc_csr *mt = NULL;
					if (tr) {
						rc_perm_unapply(rp, m->rows, NC, y, nin);
						assert_int_equal(rc_csr_transpose(m, &mt, &err), 0);
						assert_int_equal(rc_csr_mul(mt, nin, nout_v, NC, 0, &err), 0);
						rc_perm_apply(cp, m->cols, C, NC, nout_v, cpu);
					} else {
						rc_perm_unapply(cp, m->cols, NC, x, nin);
						assert_int_equal(rc_csr_mul(m, nin, nout_v, NC, 0, &err), 0);
						rc_perm_apply(rp, m->rows, R, NC, nout_v, cpu);
					}
					rc_csr_free(mt);
					free(nin);
					free(nout_v);
				}
				rc = rc_tgpu_mul(t, (rc_tgpu_kind)kind, tr, tr ? y : x, gpu, msg, sizeof msg);
				if (rc)
					fail_msg("rc_tgpu_mul kind %d: %s", kind, msg);
				double e = rel_l2(gpu, cpu, (size_t)(nout * NC));
				printf("%-8s kind %d %s: relative L2 vs CPU %.2e\n", rc_frag_get((rc_frag)f)->name, kind,
				       tr ? "A^T" : "A  ", e);
				assert_true(e < tol);
			}
		}
		rc_tgpu_free(t);
		free(x);
		free(y);
		free(cpu);
		free(gpu);
		rc_bsr_free(b);
	}
	free(A);
	free(rp);
	free(cp);
	rc_csr_free(m);
	rc_geom_free(g);
}

struct trace {
	double err;
};

static void on_iter(void *ud, int it, double residual, double rel_change, double error)
{
	(void)it;
	(void)residual;
	(void)rel_change;
	((struct trace *)ud)->err = error;
}

/* GPU vs CPU through rc_tensor_solve (the tensor backend on device vectors
 * and on the host): CGLS after 30 iterations within 1% of the same error,
 * SART with 8 subsets (view-range kernels) and MLEM (ratio, guarded
 * inverse) within 2%.  The error is computed from the returned volumes. */
static void test_algorithms(void **state)
{
	(void)state;
	rc_geom *g;
	int nu = N_IMG + N_IMG / 4, nz = 3;
	assert_int_equal(tp_geom(RC_GEOM_FAN, N_IMG, 1.0, N_VIEWS, nu, nz, 0, &g), 0);
	size_t npix = (size_t)N_IMG * N_IMG, nrow = (size_t)N_VIEWS * nu;
	float *proj = malloc(sizeof(float) * nrow * nz), *ref = malloc(sizeof(float) * npix * nz);
	float *vg = malloc(sizeof(float) * npix * nz), *vc = malloc(sizeof(float) * npix * nz);
	double scale = N_IMG / 128.0;
	tp_pixelize(rc_geom_volume(g), 4, scale, ref);
	for (int k = 0; k < N_VIEWS; k++)
		for (int u = 0; u < nu; u++)
			proj[(size_t)k * nu + u] = (float)tp_bin_integral(g, k, u, 8, scale);
	for (int z = 1; z < nz; z++) {
		memcpy(proj + z * nrow, proj, sizeof(float) * nrow);
		memcpy(ref + z * npix, ref, sizeof(float) * npix);
	}
	const struct {
		rc_algo_name name;
		int iterations, subsets;
		double tol;
	} runs[] = { { RC_ALGO_CGLS, 30, 1, 0.01 }, { RC_ALGO_SART, 5, 8, 0.02 }, { RC_ALGO_MLEM, 20, 1, 0.02 } };
	for (int k = 0; k < 3; k++) {
		rc_algo_params ap;
		rc_algo_params_plain(&ap, runs[k].name);
		ap.iterations = runs[k].iterations;
		ap.subsets = runs[k].subsets;
		rc_tensor_opts o;
		rc_tensor_opts_default(&o);
		struct trace tr = { 0 };
		o.iter = on_iter;
		o.iter_ud = &tr;
		rc_err err;
		rc_recon_report rep;
		memset(&rep, 0, sizeof rep);
		o.gpu = 1;
		int rc = rc_tensor_solve(&o, &ap, g, proj, vg, NULL, &rep, &err);
		if (rc)
			fail_msg("GPU solve: %s", err.msg);
		printf("GPU: %s, %s\n", rep.dev[0].name, rep.dev[0].device_id);
		o.gpu = 0;
		assert_int_equal(rc_tensor_solve(&o, &ap, g, proj, vc, NULL, &rep, &err), 0);
		double eg = rel_l2(vg, ref, npix * nz), ec = rel_l2(vc, ref, npix * nz);
		printf("%s, %d iterations, %d subsets: error GPU (WMMA) %.5f, CPU (fp16 BSR) %.5f\n",
		       rc_algo_name_str(ap.name), ap.iterations, ap.subsets, eg, ec);
		assert_true(fabs(eg - ec) <= runs[k].tol * ec);
	}
	free(proj);
	free(ref);
	free(vg);
	free(vc);
	rc_geom_free(g);
}

static void test_symmetric(void **state)
{
	(void)state;
	int n = 128, nviews = 128;
	double ang[128];
	for (int k = 0; k < nviews; k++)
		ang[k] = 360.0 * k / nviews;
	double R = n * sqrt(2) / 2 + 2;
	rc_geom_spec sp = { .type = RC_GEOM_FAN, .nviews = nviews, .angles_deg = ang, .source_isocenter_mm = 3 * R,
			    .source_detector_mm = 5 * R };
	sp.det.nu = n + n / 2 + 1;
	sp.det.nv = 1;
	sp.det.du = 5 * R * tan(asin(1.0 / 3)) * 2 / sp.det.nu;
	rc_volume_desc v = { n, n, 1, 1, 1, 1, 0, 0, 0 };
	rc_geom *g;
	rc_err err;
	assert_int_equal(rc_geom_new(&sp, &v, NULL, &g, &err), 0);
	rc_sym *s = NULL;
	assert_int_equal(rc_sym_new(g, 0, &s, &err), 0);
	float *img = malloc(sizeof(float) * n * n), *pc = malloc(sizeof(float) * s->rows), *pg = malloc(sizeof(float) * s->rows);
	tp_pixelize(&v, 2, 1.0, img);
	assert_int_equal(rc_sym_forward_cpu(s, img, pc, 0, &err), 0);
	char msg[256];
	double ms = 0;
	int rc = rc_tgpu_sym_forward(s, img, pg, &ms, msg, sizeof msg);
	if (rc)
		fail_msg("rc_tgpu_sym_forward: %s", msg);
	double e = rel_l2(pg, pc, (size_t)s->rows);
	printf("symmetric projection %dx%d: GPU vs CPU relative L2 %.2e, %.3f ms\n", n, n, e, ms);
	assert_true(e < 2e-3);
	free(img);
	free(pc);
	free(pg);
	rc_sym_free(s);
	rc_geom_free(g);
}

int main(void)
{
	if (rc_tgpu_device_count() < 1) {
		printf("no CUDA device\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_products),
		cmocka_unit_test(test_algorithms),
		cmocka_unit_test(test_symmetric),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void)
{
	printf("no CUDA device (this build has no CUDA)\n");
	return 77;
}

#endif
