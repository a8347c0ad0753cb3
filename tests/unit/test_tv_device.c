/*
 * test_tv_device: the total-variation operator on the OpenCL device
 * (kernels/opencl/tv.cl, the OpenCL backend's tv_apply) against the host's
 * (tv_host.c, rc_tv_apply), and the algorithms with TV on through it.
 *
 *  - random volumes of odd shapes, 3-D and planar (2-D per slice), with
 *    flat patches (zero differences), single-voxel rows, columns and
 *    slices, w != d and w == d, eps from 1e-6 (weights near 1/|Dx|) to
 *    10 (nearly quadratic): max |device - host| / max |host| <= 1e-5;
 *  - the OpenCL backend runs TV without the host: during a SART, SIRT,
 *    CGLS and MLEM run with their defaults (TV on) the volume crosses the
 *    bus once each way (the start and the result), and the results agree
 *    with the host backend's to <= 1e-5 (relative L2).
 * The CUDA kernel (kernels/cuda/tv.cu) has the same checks in
 * test_engine_cuda.c, on the stand-in.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/algo.h"
#include "backend/backend.h"
#include "backend/cpu/engine_cpu.h"
#include "backend/exec.h"
#include "backend/opencl/engine_opencl.h"
#include "backend/opencl/engine_opencl_impl.h"
#include "backend/opencl/opencl_tv.h"
#include "backend/tv_host.h"
#include "geometry/metrics.h"
#include "ocl_testutil.h"
#include "shepp_case.h"

static float rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((*s >> 40) & 0xffffff) / (float)(1 << 24);
}

/* A random volume with a flat box (exact zero differences) in it. */
static void fill_vol(const rc_tv_shape *s, uint64_t *seed, float *x)
{
	for (int z = 0; z < s->nz; z++)
		for (int y = 0; y < s->ny; y++)
			for (int i = 0; i < s->nx; i++) {
				size_t k = ((size_t)z * s->ny + y) * s->nx + i;
				int flat = i >= s->nx / 3 && i < 2 * s->nx / 3 + 1 && y >= s->ny / 3 && y < 2 * s->ny / 3 + 1;
				x[k] = flat ? 0.75f : rnd(seed);
			}
}

static void test_kernel_vs_host(void **state)
{
	(void)state;
	static const rc_tv_shape shapes[] = {
		{ 13, 11, 7, 0 }, { 13, 11, 7, 1 }, { 1, 9, 5, 0 }, { 9, 1, 5, 0 }, { 9, 5, 1, 0 },
		{ 1, 1, 6, 0 },   { 32, 17, 3, 1 }, { 2, 2, 2, 0 }, { 40, 33, 21, 0 },
	};
	static const float epss[] = { 1e-6f, 1e-2f, 0.2f, 10.0f };
	rc_geom *g = tu_cone(8, 12, 10, 4);
	rc_engine *e = NULL;
	rc_opencl_options oo;
	rc_opencl_options_default(&oo);
	rc_err err;
	assert_non_null(g);
	assert_int_equal(rc_engine_opencl_new(g, &oo, &e, &err), 0);
	rc_ocl_handles h;
	assert_int_equal(rc_ocl_engine_handles(e, &h), 0);
	rc_ocl_tv *tv = NULL;
	assert_int_equal(rc_ocl_tv_new(e, &tv, &err), 0);
	uint64_t seed = 99;
	double worst = 0;
	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
		const rc_tv_shape *s = &shapes[si];
		size_t n = (size_t)s->nx * s->ny * s->nz, bytes = n * sizeof(float);
		float *w = malloc(bytes), *d = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
		assert_true(w && d && want && got);
		fill_vol(s, &seed, w);
		fill_vol(s, &seed, d);
		cl_int ce;
		cl_mem mw = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, w, &ce);
		assert_int_equal(ce, CL_SUCCESS);
		cl_mem md = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, d, &ce);
		assert_int_equal(ce, CL_SUCCESS);
		cl_mem mo = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, bytes, NULL, &ce);
		assert_int_equal(ce, CL_SUCCESS);
		for (size_t ei = 0; ei < sizeof epss / sizeof epss[0]; ei++)
			for (int same = 0; same < 2; same++) {
				const float *hd = same ? w : d;
				assert_int_equal(rc_tv_apply(s, w, hd, want, epss[ei], 0, &err), 0);
				assert_int_equal(rc_ocl_tv_apply(tv, s, mw, same ? mw : md, mo, epss[ei], &err), 0);
				assert_int_equal(clEnqueueReadBuffer(h.q, mo, CL_TRUE, 0, bytes, got, 0, NULL, NULL),
						 CL_SUCCESS);
				double peak = 0, diff = 0;
				for (size_t i = 0; i < n; i++) {
					assert_true(isfinite(got[i]));
					peak = fmax(peak, fabs(want[i]));
					diff = fmax(diff, fabs((double)got[i] - want[i]));
				}
				double rel = peak > 0 ? diff / peak : diff;
				worst = fmax(worst, rel);
				if (rel > 1e-5)
					fail_msg("%dx%dx%d%s eps %g %s: max |device - host| / max |host| = %.3g",
						 s->nx, s->ny, s->nz, s->planar ? " planar" : "", epss[ei],
						 same ? "w = d" : "w != d", rel);
			}
		clReleaseMemObject(mw);
		clReleaseMemObject(md);
		clReleaseMemObject(mo);
		free(w), free(d), free(want), free(got);
	}
	print_message("TV on the OpenCL device vs the host: worst max |device - host| / max |host| = %.3g over %zu "
		      "shapes x %zu eps x (w = d, w != d)\n",
		      worst, sizeof shapes / sizeof shapes[0], sizeof epss / sizeof epss[0]);
	rc_ocl_tv_free(tv);
	rc_engine_free(e);
	rc_geom_free(g);
}

/* --- the algorithms with TV on ------------------------------------------------ */

/* Counts whole-volume crossings of a backend (its upload and download of
 * volume vectors), through a copy of its ops table. */
static rc_backend_ops counted;
static const rc_backend_ops *inner;
static size_t vol_floats;
static int ups, downs;

static int count_upload(rc_backend *b, rc_vec *dst, const float *src, rc_err *err)
{
	int rc = inner->upload(b, dst, src, err);
	ups++;
	return rc;
}

static int count_download(rc_backend *b, const rc_vec *src, float *dst, rc_err *err)
{
	downs++;
	return inner->download(b, src, dst, err);
}

static void test_algos_tv(void **state)
{
	(void)state;
	static const rc_algo_name algos[] = { RC_ALGO_SART, RC_ALGO_SIRT, RC_ALGO_CGLS, RC_ALGO_MLEM };
	shepp_case C;
#ifdef RC_TEST_SMALL
	assert_int_equal(shepp_case_new(16, 24, 32.0, &C), 0);
#else
	assert_int_equal(shepp_case_new(24, 40, 32.0, &C), 0);
#endif
	vol_floats = C.nvox;
	rc_err err;
	rc_engine *cpu = NULL, *ocl = NULL;
	rc_exec *x = NULL;
	rc_opencl_options oo;
	rc_opencl_options_default(&oo);
	/* ray casting's pair on both: the CPU engine would take its footprint
	 * pair on this geometry */
	setenv("RECOND_NO_FOOTPRINT", "1", 1);
	assert_int_equal(rc_engine_cpu_new(C.g, 0, &cpu, &err), 0);
	unsetenv("RECOND_NO_FOOTPRINT");
	assert_int_equal(rc_exec_new(&cpu, 1, &x, &err), 0);
	assert_int_equal(rc_engine_opencl_new(C.g, &oo, &ocl, &err), 0);
	float *vh = malloc(C.nvox * sizeof(float)), *vo = malloc(C.nvox * sizeof(float));
	assert_true(vh && vo);
	for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
		rc_algo_params p;
		rc_algo_params_default(&p, algos[a]);
		assert_true(p.tv_weight > 0);
		p.iterations = 3;
		if (algos[a] == RC_ALGO_MLEM)
			p.subsets = 4;
		rc_backend *bh = NULL, *bo = NULL;
		assert_int_equal(rc_backend_host_new(x, &bh, &err), 0);
		assert_int_equal(rc_backend_opencl_new(ocl, &bo, &err), 0);
		assert_non_null(bo->ops->tv_apply);
		assert_int_equal(rc_algo_run_on(&p, bh, C.proj, vh, NULL, &err), 0);
		inner = bo->ops;
		counted = *inner;
		counted.upload = count_upload;
		counted.download = count_download;
		bo->ops = &counted;
		ups = downs = 0;
		int rc = rc_algo_run_on(&p, bo, C.proj, vo, NULL, &err);
		bo->ops = inner;
		if (rc)
			fail_msg("%s on OpenCL: %s", rc_algo_name_str(algos[a]), err.msg);
		double d = rc_metric_rel_error(vo, vh, NULL, C.nvox);
		print_message("%s defaults (tv %.3g, %d TV steps): opencl vs host %.2g; uploads %d, downloads %d\n",
			      rc_algo_name_str(algos[a]), p.tv_weight, p.tv_steps, d, ups, downs);
		assert_true(d <= 1e-5);
		/* the same run through rc_bk_tv_apply's host copies crosses per TV
		 * step; the device's adds no crossing to a run without TV */
		int ups_tv = ups, downs_tv = downs;
		counted.tv_apply = NULL;
		bo->ops = &counted;
		ups = downs = 0;
		rc = rc_algo_run_on(&p, bo, C.proj, vo, NULL, &err);
		bo->ops = inner;
		assert_int_equal(rc, 0);
		int ups_host = ups, downs_host = downs;
		rc_algo_params q = p;
		q.tv_weight = 0.0;
		bo->ops = &counted;
		ups = downs = 0;
		rc = rc_algo_run_on(&q, bo, C.proj, vo, NULL, &err);
		bo->ops = inner;
		assert_int_equal(rc, 0);
		print_message("  crossings (up, down): device TV %d, %d; host TV %d, %d; no TV %d, %d\n", ups_tv, downs_tv,
			      ups_host, downs_host, ups, downs);
		assert_int_equal(ups_tv, ups);
		assert_int_equal(downs_tv, downs);
		assert_true(ups_host + downs_host > ups + downs);
		rc_backend_free(bo);
		rc_backend_free(bh);
	}
	free(vh), free(vo);
	rc_engine_free(ocl);
	rc_exec_free(x);
	rc_engine_free(cpu);
	shepp_case_free(&C);
}

int main(void)
{
	tu_need_opencl();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_vs_host),
		cmocka_unit_test(test_algos_tv),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
