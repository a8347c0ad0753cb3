/*
 * test_models: the performance model store (models.h) and the one device
 * identity (engine_cpu.h, devices.h).  References: lines T(W) = a W + b
 * chosen here (the samples are exact, so a fit must give them back), and
 * the store's documented rules: a job's time at a stored workload is
 * averaged half/half, a new workload is added, a full store drops the
 * oldest, a calibration replaces.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "plan/devices.h"
#include "backend/cpu/engine_cpu.h"
#include "plan/models.h"

static const char *SHAPE = "cone-16x16x16-24x20-voxel";

struct dir {
	char path[64];
};

static int setup(void **state)
{
	struct dir *d = malloc(sizeof *d);
	snprintf(d->path, sizeof d->path, "/tmp/recond-test-modelsXXXXXX");
	if (!mkdtemp(d->path))
		return -1;
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dir *d = *state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->path);
	int rc = system(cmd);
	free(d);
	return rc;
}

static const double A0 = 2e-3, B0 = 1e-2; /* seconds per view, per call */
static const double W[6] = { 4, 8, 12, 16, 24, 32 };

/* A calibration: 6 exact samples of A0 W + B0. */
static void calibrate(const char *dir, const char *id, rc_task task, double scale)
{
	double t[6];
	for (int i = 0; i < 6; i++)
		t[i] = scale * (A0 * W[i] + B0);
	rc_model m;
	rc_err err;
	assert_int_equal(rc_models_add(dir, id, SHAPE, task, W, t, 6, 1, &m, &err), 0);
	assert_true(m.valid);
	assert_true(fabs(m.a - scale * A0) < 1e-12 && fabs(m.b - scale * B0) < 1e-12);
}

/* One job's measured time per call at w views. */
static rc_model job(const char *dir, const char *id, rc_task task, double w, double t)
{
	rc_model m;
	rc_err err;
	assert_int_equal(rc_models_add(dir, id, SHAPE, task, &w, &t, 1, 0, &m, &err), 0);
	return m;
}

/* A job measured the device slower than the model: the refit moves the
 * prediction toward the measurement, never past it; at a stored workload
 * (averaged half/half) further with every job that measures the same; at a
 * new workload in one step (one more sample). */
static void refit_moves_toward_measurement(void **state)
{
	const char *dir = ((struct dir *)*state)->path;
	calibrate(dir, "cpu:test", RC_TASK_BACK, 1.0);
	double w = 24, old = A0 * w + B0, meas = 2 * old, prev = old;
	for (int k = 0; k < 4; k++) {
		rc_model m = job(dir, "cpu:test", RC_TASK_BACK, w, meas);
		assert_true(m.valid);
		double p = rc_model_predict(&m, w);
		assert_true(p > prev + 1e-6);  /* moved toward the measurement ... */
		assert_true(p < meas);         /* ... not past it */
		assert_true(m.a > A0);         /* a slower device: steeper */
		prev = p;
	}
	/* loaded back from the file, the same line */
	rc_model l[RC_TASK_COUNT];
	assert_int_equal(rc_models_load(dir, "cpu:test", SHAPE, l, NULL), 0);
	assert_true(l[RC_TASK_BACK].valid && fabs(rc_model_predict(&l[RC_TASK_BACK], w) - prev) < 1e-12);
	assert_false(l[RC_TASK_FORWARD].valid); /* the other task untouched */
	/* a faster measurement pulls it back down */
	rc_model m = job(dir, "cpu:test", RC_TASK_BACK, w, old);
	assert_true(rc_model_predict(&m, w) < prev);

	/* a new workload: one step toward, not past */
	calibrate(dir, "cpu:test2", RC_TASK_FORWARD, 1.0);
	w = 20, old = A0 * w + B0, meas = 2 * old;
	m = job(dir, "cpu:test2", RC_TASK_FORWARD, w, meas);
	assert_true(rc_model_predict(&m, w) > old + 1e-6 && rc_model_predict(&m, w) < meas);
	rc_device_model dm[1];
	int n = 0;
	assert_int_equal(rc_models_list(dir, "cpu:test2", dm, 1, &n, NULL), 0);
	assert_int_equal(dm[0].samples[RC_TASK_FORWARD], 7);
}

/* The device became 1.5x slower: jobs measuring it at the stored
 * workloads bring a and b to the new line (each sample halves its error). */
static void refit_converges_to_new_device(void **state)
{
	const char *dir = ((struct dir *)*state)->path;
	calibrate(dir, "opencl:test", RC_TASK_FORWARD, 1.0);
	rc_model m = { 0 };
	for (int round = 0; round < 12; round++)
		for (int i = 0; i < 6; i++)
			m = job(dir, "opencl:test", RC_TASK_FORWARD, W[i], 1.5 * (A0 * W[i] + B0));
	assert_true(m.valid);
	assert_true(fabs(m.a / (1.5 * A0) - 1) < 1e-3);
	assert_true(fabs(m.b / (1.5 * B0) - 1) < 1e-3);
	/* the stored samples still number 6: same workloads, averaged in place */
	rc_device_model l[4];
	int n = 0;
	assert_int_equal(rc_models_list(dir, "opencl:test", l, 4, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(l[0].samples[RC_TASK_FORWARD], 6);
	/* a calibration replaces them all */
	calibrate(dir, "opencl:test", RC_TASK_FORWARD, 1.0);
}

/* A new workload is one more sample; a full store drops the oldest, so a
 * device whose times changed is, after 32 jobs, fitted on the new ones only. */
static void new_workloads_and_full_store(void **state)
{
	const char *dir = ((struct dir *)*state)->path;
	calibrate(dir, "cuda:GPU-test", RC_TASK_BACK, 3.0); /* the old device: 3x slower */
	rc_model m = { 0 };
	for (int i = 0; i < RC_MODEL_MAX_SAMPLES; i++) {
		double w = 100 + i; /* none of the calibration's */
		m = job(dir, "cuda:GPU-test", RC_TASK_BACK, w, A0 * w + B0);
		rc_device_model l[1];
		int n = 0;
		assert_int_equal(rc_models_list(dir, "cuda:GPU-test", l, 1, &n, NULL), 0);
		int expect = 6 + i + 1 < RC_MODEL_MAX_SAMPLES ? 6 + i + 1 : RC_MODEL_MAX_SAMPLES;
		assert_int_equal(l[0].samples[RC_TASK_BACK], expect);
	}
	/* all 6 calibration samples are gone: exactly the new line */
	assert_true(m.valid);
	assert_true(fabs(m.a - A0) < 1e-9 && fabs(m.b - B0) < 1e-7);
}

/* Listing: per device id, every shape (sorted) with samples, models and the
 * update time; ids that sanitise alike are kept apart; no store, no models. */
static void listing(void **state)
{
	const char *dir = ((struct dir *)*state)->path;
	long long t0 = (long long)time(NULL);
	calibrate(dir, "gpu:a/b", RC_TASK_FORWARD, 1.0);
	calibrate(dir, "gpu:a/b", RC_TASK_BACK, 2.0);
	double w[2] = { 10, 20 }, t[2] = { 0.5, 0.9 };
	rc_err err;
	assert_int_equal(rc_models_add(dir, "gpu:a/b", "cone-8x8x8-8x8-voxel", RC_TASK_FORWARD, w, t, 2, 1, NULL, &err), 0);
	double w1 = 10, t1 = 0.5;
	assert_int_equal(rc_models_add(dir, "gpu:a_b", SHAPE, RC_TASK_BACK, &w1, &t1, 1, 1, NULL, &err), 0);
	long long t1s = (long long)time(NULL);

	rc_device_model l[RC_DEVICES_MAX_MODELS];
	int n = 0;
	assert_int_equal(rc_models_list(dir, "gpu:a/b", l, RC_DEVICES_MAX_MODELS, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(l[0].shape, "cone-16x16x16-24x20-voxel"); /* sorted */
	assert_string_equal(l[1].shape, "cone-8x8x8-8x8-voxel");
	assert_int_equal(l[0].samples[RC_TASK_FORWARD], 6);
	assert_int_equal(l[0].samples[RC_TASK_BACK], 6);
	assert_true(fabs(l[0].model[RC_TASK_BACK].a - 2 * A0) < 1e-12);
	assert_true(fabs(l[1].model[RC_TASK_FORWARD].a - 0.04) < 1e-12);
	assert_true(fabs(l[1].model[RC_TASK_FORWARD].b - 0.1) < 1e-12);
	assert_int_equal(l[1].samples[RC_TASK_BACK], 0);
	assert_false(l[1].model[RC_TASK_BACK].valid);
	assert_int_equal(l[1].updated[RC_TASK_BACK], 0);
	for (int t = 0; t < RC_TASK_COUNT; t++)
		assert_true(l[0].updated[t] >= t0 && l[0].updated[t] <= t1s);

	/* "gpu:a_b" is another device: one sample, no line yet */
	assert_int_equal(rc_models_list(dir, "gpu:a_b", l, RC_DEVICES_MAX_MODELS, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(l[0].samples[RC_TASK_BACK], 1);
	assert_false(l[0].model[RC_TASK_BACK].valid);
	assert_int_equal(l[0].samples[RC_TASK_FORWARD], 0);

	assert_int_equal(rc_models_list(dir, "gpu:none", l, RC_DEVICES_MAX_MODELS, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(rc_models_list(NULL, "gpu:a/b", l, RC_DEVICES_MAX_MODELS, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(rc_models_list(dir, "gpu:a/b", l, 1, &n, &err), 0);
	assert_int_equal(n, 1); /* max respected */
	assert_int_equal(rc_models_add(dir, "gpu:a/b", SHAPE, (rc_task)7, w, t, 2, 0, NULL, &err), RC_EINVAL);
}

/* One identity for the CPU: the engine's device_id, the registry's, the
 * model store key that rc_devices_list looks up. */
static void one_cpu_identity(void **state)
{
	const char *dir = ((struct dir *)*state)->path;
	char id[128], name[160];
	rc_cpu_identity(id, sizeof id, name, sizeof name);
	assert_true(!strncmp(id, "cpu:", 4) && id[strlen(id) - 1] == 'c');
	assert_null(strchr(id, ' '));
	assert_non_null(strstr(name, "cores)"));

	rc_device d[RC_DEVICES_MAX];
	int n = 0;
	assert_int_equal(rc_devices_enumerate(d, RC_DEVICES_MAX, &n, NULL), 0);
	assert_true(n >= 1 && d[0].kind == RC_DEVICE_CPU);
	assert_string_equal(d[0].device_id, id);
	assert_string_equal(d[0].name, name);

	static const rc_volume_desc vol = { 8, 8, 8, 1, 1, 1, 0, 0, 0 };
	double ang[4] = { 0, 90, 180, 270 };
	rc_geom_spec sp = { .type = RC_GEOM_CONE, .nviews = 4, .det = { 12, 12, 1.5, 1.5, 0, 0 },
			    .source_isocenter_mm = 100, .source_detector_mm = 200, .angles_deg = ang };
	rc_geom *g = NULL;
	assert_int_equal(rc_geom_new(&sp, &vol, NULL, &g, NULL), 0);
	rc_engine *e = NULL;
	assert_int_equal(rc_device_open(&d[0], g, NULL, &e, NULL), 0);
	assert_string_equal(e->device_id, id);
	rc_engine_free(e);
	rc_geom_free(g);

	/* a model stored under the engine's id is the registry device's */
	calibrate(dir, id, RC_TASK_FORWARD, 1.0);
	rc_device_listing *l = calloc(RC_DEVICES_MAX, sizeof *l);
	assert_non_null(l);
	assert_int_equal(rc_devices_list(dir, l, RC_DEVICES_MAX, &n, NULL), 0);
	assert_int_equal(l[0].nmodels, 1);
	assert_string_equal(l[0].models[0].shape, SHAPE);
	assert_true(l[0].models[0].model[RC_TASK_FORWARD].valid);
	free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(refit_moves_toward_measurement, setup, teardown),
		cmocka_unit_test_setup_teardown(refit_converges_to_new_device, setup, teardown),
		cmocka_unit_test_setup_teardown(new_workloads_and_full_store, setup, teardown),
		cmocka_unit_test_setup_teardown(listing, setup, teardown),
		cmocka_unit_test_setup_teardown(one_cpu_identity, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
