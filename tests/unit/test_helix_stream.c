/*
 * Streaming helical FDK (algo_fdk_helix.c): views delivered one by one,
 * in scan order and shuffled, with the table moving up and down,
 * reconstruct the batch helical FDK's volume
 * to 1e-5; the final slices reported grow monotonically, from the scan's
 * start, and reach the whole volume; the slices reported final already
 * equal the batch volume although the stack holds only the views
 * delivered so far (the rest are NaN: a slab that used a view before it
 * arrived would show it); an error from the view source ends the run.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/algo.h"
#include "backend/exec.h"
#include "helix_case.h"
#include "proj_testutil.h"

#define VIEWS_TURN 60
#define NZ 40

static const rc_volume_desc VOL = { .nx = 24, .ny = 24, .nz = NZ, .vx = 1, .vy = 1, .vz = 1 };

struct feed {
	int *order, n, next, chunk, fail_after;
	int last_done, last_final, reports, calls_iterate, final_seen, views_at_first;
	double last_z;
	const float *batch; /* the batch volume: a slab reported final equals it */
	const float *vol;   /* the streamed volume (the run writes it in place) */
	double worst;       /* the largest |stream - batch| / peak over final slices */
	double peak;
	int up;
	const float *full; /* every view; copied into stack as delivered */
	float *stack;
	size_t view_n;
};

static int feed_views(void *ud, double wait_s, int *list, int max, rc_err *err)
{
	struct feed *f = ud;
	(void)wait_s;
	if (f->fail_after && f->next >= f->fail_after)
		return rc_fail(err, RC_EIO, "", "the scanner went away");
	int c = f->chunk++ % 3; /* 0, 1, 2 views per call: "none came in time" too */
	if (c > max)
		c = max;
	if (c > f->n - f->next)
		c = f->n - f->next;
	memcpy(list, f->order + f->next, sizeof(int) * (size_t)c);
	for (int i = 0; i < c; i++)
		memcpy(f->stack + (size_t)list[i] * f->view_n, f->full + (size_t)list[i] * f->view_n,
		       sizeof(float) * f->view_n);
	f->next += c;
	return c;
}

static void feed_progress(void *ud, const rc_progress *p)
{
	struct feed *f = ud;
	assert_int_equal(p->views_of, f->n);
	assert_true(p->views_done >= f->last_done && p->views_done <= f->next);
	assert_int_equal(p->zfinal, 1);
	assert_true(p->final_slices >= f->last_final && p->final_slices <= NZ);
	double zlo = VOL.cz - NZ / 2.0 * VOL.vz;
	double z = f->up ? zlo + p->final_slices * VOL.vz : zlo + (NZ - p->final_slices) * VOL.vz;
	assert_true(fabs(p->final_z_mm - z) < 1e-9);
	if (f->reports)
		assert_true(f->up ? p->final_z_mm >= f->last_z : p->final_z_mm <= f->last_z);
	/* the slices reported final are the batch's already */
	size_t plane = (size_t)VOL.nx * VOL.ny;
	int iz0 = f->up ? 0 : NZ - p->final_slices, iz1 = f->up ? p->final_slices : NZ;
	for (size_t i = (size_t)iz0 * plane; i < (size_t)iz1 * plane; i++)
		f->worst = fmax(f->worst, fabs((double)f->vol[i] - f->batch[i]) / f->peak);
	if (p->final_slices > 0 && !f->last_final)
		f->views_at_first = p->views_done;
	f->last_done = p->views_done;
	f->last_final = p->final_slices;
	f->last_z = p->final_z_mm;
	f->reports++;
	f->final_seen |= p->final_slices == NZ;
}

static int feed_iterate(void *ud, rc_backend *b, const rc_vec *x, int iteration)
{
	struct feed *f = ud;
	(void)b;
	assert_non_null(x);
	(void)iteration;
	f->calls_iterate++;
	return 0;
}

static void shuffle(int *o, int n, uint64_t seed)
{
	for (int k = n - 1; k > 0; k--) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		int j = (int)((seed >> 33) % (uint64_t)(k + 1)), t = o[k];
		o[k] = o[j];
		o[j] = t;
	}
}

/* hx_geom's helix run the other way: the table moves down (pitch < 0),
 * from the top of the same covered range */
static rc_geom *geom_down(double pf, rc_detector_shape shape)
{
	double *ang = NULL;
	rc_geom *up = NULL, *g = NULL;
	rc_err err;
	assert_int_equal(hx_geom(pf, VIEWS_TURN, shape, &VOL, &ang, &up, &err), 0);
	int n = rc_geom_nviews(up);
	rc_geom_spec sp = { .type = RC_GEOM_HELIX, .source_isocenter_mm = HX_D, .source_detector_mm = HX_S,
			    .nviews = n, .angles_deg = ang, .pitch_mm = -pf * HX_H_ISO,
			    .z_start_mm = rc_geom_view(up, n - 1)->src[2] };
	sp.det = (rc_detector_desc){ .nu = HX_NU, .nv = HX_NV, .du = 1.0, .dv = 1.0, .shape = shape };
	if (rc_geom_new(&sp, &VOL, NULL, &g, &err))
		fail_msg("%s: %s", err.field, err.msg);
	rc_geom_free(up);
	free(ang);
	return g;
}

static void stream_case(double pf, rc_detector_shape shape)
{
	double *ang = NULL;
	rc_geom *g = NULL;
	rc_err err;
	rc_phantom *ph = NULL;
	if (pf > 0)
		assert_int_equal(hx_geom(pf, VIEWS_TURN, shape, &VOL, &ang, &g, &err), 0);
	else
		g = geom_down(-pf, shape);
	free(ang);
	assert_int_equal(hx_phantom(&ph, &err), 0);
	int n = rc_geom_nviews(g);
	size_t nv = rc_volume_count(&VOL);
	size_t np = rc_geom_proj_count(g);
	float *proj = falloc(np), *stack = falloc(np), *batch = falloc(nv), *vol = falloc(nv);
	assert_int_equal(rc_phantom_project(ph, g, 0, proj, &err), 0);
	rc_engine *e = make_engine(g, 0);
	rc_exec *x = NULL;
	assert_int_equal(rc_exec_new(&e, 1, &x, &err), 0);
	rc_algo_params a;
	rc_algo_params_default(&a, RC_ALGO_FDK);
	assert_int_equal(rc_algo_run(&a, x, proj, batch, NULL, &err), 0);
	double peak = 0;
	for (size_t i = 0; i < nv; i++)
		peak = fmax(peak, fabs(batch[i]));
	assert_true(peak > 0);
	int *order = malloc(sizeof(int) * (size_t)n);
	assert_non_null(order);
	for (int pass = 0; pass < 2; pass++) {
		for (int k = 0; k < n; k++)
			order[k] = k;
		if (pass)
			shuffle(order, n, 12345);
		/* garbage where nothing is final yet: the run must not show it */
		for (size_t i = 0; i < nv; i++)
			vol[i] = 1e6f;
		for (size_t i = 0; i < np; i++)
			stack[i] = NAN;
		struct feed f = { .order = order, .n = n, .batch = batch, .vol = vol, .peak = peak,
				  .up = pf > 0, .full = proj, .stack = stack, .view_n = np / (size_t)n };
		rc_algo_hooks hooks = { .progress = feed_progress, .iterate = feed_iterate, .views = feed_views,
					.ud = &f };
		assert_int_equal(rc_algo_run(&a, x, stack, vol, &hooks, &err), 0);
		assert_int_equal(f.next, n);
		assert_int_equal(f.last_done, n);
		assert_int_equal(f.last_final, NZ);
		assert_true(f.final_seen);
		assert_true(f.calls_iterate >= 1);
		double diff = 0;
		for (size_t i = 0; i < nv; i++)
			diff = fmax(diff, fabs((double)vol[i] - batch[i]));
		assert_true(f.up ? rc_geom_view(g, n - 1)->src[2] > rc_geom_view(g, 0)->src[2]
				 : rc_geom_view(g, n - 1)->src[2] < rc_geom_view(g, 0)->src[2]);
		print_message("%s pitch factor %.1f, %d views %s: %d reports, max |stream - batch| / max |batch| = %.3g "
			      "(at the reports, over the slices called final: %.3g)\n",
			      shape == RC_DETECTOR_CURVED ? "curved" : "flat", pf, n, pass ? "shuffled" : "in order",
			      f.reports, diff / peak, f.worst);
		assert_true(diff / peak <= 1e-5);
		assert_true(f.worst <= 1e-5);
		/* in scan order, the volume's first slabs are final before the
		 * last views arrive */
		if (!pass) {
			print_message("  the first slab final after %d of %d views\n", f.views_at_first, n);
			assert_true(f.reports >= 3);
			assert_true(f.views_at_first < n / 2);
		}
		/* an error from the view source ends the run with it */
		if (pass) {
			struct feed h = f;
			h.next = h.chunk = h.last_done = h.last_final = h.reports = 0;
			h.fail_after = n / 2;
			hooks.ud = &h;
			assert_int_equal(rc_algo_run(&a, x, stack, vol, &hooks, &err), RC_EIO);
		}
	}
	free(order);
	rc_exec_free(x);
	rc_engine_free(e);
	free(proj);
	free(stack);
	free(batch);
	free(vol);
	rc_phantom_free(ph);
	rc_geom_free(g);
}

static void test_stream_flat(void **s)
{
	(void)s;
	stream_case(1.0, RC_DETECTOR_FLAT);
}

static void test_stream_curved(void **s)
{
	(void)s;
	stream_case(0.5, RC_DETECTOR_CURVED);
}

/* the table moving down: the volume is final from its top face */
static void test_stream_down(void **s)
{
	(void)s;
	stream_case(-1.0, RC_DETECTOR_FLAT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_flat),
		cmocka_unit_test(test_stream_curved),
		cmocka_unit_test(test_stream_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
