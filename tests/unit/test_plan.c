/*
 * test_plan: the performance model fit and the split of paper 000.
 * References: paper 000 Table 3 and its published partitions, and a brute
 * force search over every integer split of small tasks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "plan/plan.h"

/* Table 3, devices in the paper's (DGPU, CPU, IGPU) order: (alpha, beta),
 * (gamma, delta), (epsilon, zeta). */
static const rc_model fp_models[3] = {
	{ .a = 0.0020, .b = 0.0061, .valid = 1 },
	{ .a = 0.0180, .b = 0.0209, .valid = 1 },
	{ .a = 0.0118, .b = 0.0428, .valid = 1 },
};
static const rc_model bp_models[3] = {
	{ .a = 0.0007, .b = 0.0533, .valid = 1 },
	{ .a = 0.0063, .b = 0.0279, .valid = 1 },
	{ .a = 0.0032, .b = 0.0178, .valid = 1 },
};

static void table3_forward(void **state)
{
	(void)state;
	rc_plan p;
	assert_int_equal(rc_plan_split(fp_models, NULL, 3, 211, 0, &p, NULL), 0);
	assert_int_equal(p.views[0], 169);
	assert_int_equal(p.views[1], 17);
	assert_int_equal(p.views[2], 25);
	assert_int_equal(p.single, -1);
	assert_int_equal(p.on_host, 0);
}

static void table3_back(void **state)
{
	(void)state;
	rc_plan p;
	assert_int_equal(rc_plan_split(bp_models, NULL, 3, 211, 0, &p, NULL), 0);
	assert_int_equal(p.views[0] + p.views[1] + p.views[2], 211);
	const int paper[3] = { 149, 20, 42 };
	double tp = rc_plan_makespan(bp_models, paper, 3);
	assert_true(p.makespan_s <= tp + 1e-12);
	/* and the model says splitting beats the discrete GPU alone */
	assert_true(p.makespan_s < rc_model_predict(&bp_models[0], 211));
}

/* Closed form against the definition: all devices finish at one time. */
static void closed_form_equal_finish(void **state)
{
	(void)state;
	rc_plan p;
	assert_int_equal(rc_plan_split(fp_models, NULL, 3, 211000, 0, &p, NULL), 0);
	double t0 = p.predicted_s[0];
	for (int i = 1; i < 3; i++)
		assert_true(fabs(p.predicted_s[i] - t0) <= fp_models[i].a + 1e-9);
}

static double brute_best(const rc_model *m, int k, int W)
{
	double best = INFINITY;
	int v[3] = {0};
	for (v[0] = 0; v[0] <= W; v[0]++)
		for (v[1] = 0; v[1] <= W - v[0]; v[1]++) {
			if (k == 2 && v[0] + v[1] != W)
				continue;
			v[2] = k == 3 ? W - v[0] - v[1] : 0;
			double t = rc_plan_makespan(m, v, k);
			if (t < best)
				best = t;
		}
	return best;
}

/* Greedy rounding is within one view of the best integer split. */
static void against_brute_force(void **state)
{
	(void)state;
	srand(7);
	for (int trial = 0; trial < 200; trial++) {
		rc_model m[3];
		double amax = 0;
		for (int i = 0; i < 3; i++) {
			m[i] = (rc_model){ .a = 0.001 + 0.02 * rand() / (double)RAND_MAX,
					   .b = 0.1 * rand() / (double)RAND_MAX, .valid = 1 };
			if (m[i].a > amax)
				amax = m[i].a;
		}
		int W = 1 + rand() % 60;
		rc_plan p;
		assert_int_equal(rc_plan_split(m, NULL, 3, W, 0, &p, NULL), 0);
		assert_int_equal(p.views[0] + p.views[1] + p.views[2], W);
		double best = brute_best(m, 3, W);
		assert_true(p.makespan_s >= best - 1e-12);
		assert_true(p.makespan_s <= best + amax + 1e-12);
	}
}

static void slow_device_left_out(void **state)
{
	(void)state;
	rc_model m[2] = { { .a = 0.001, .b = 0.01, .valid = 1 }, { .a = 0.01, .b = 5.0, .valid = 1 } };
	rc_plan p;
	assert_int_equal(rc_plan_split(m, NULL, 2, 100, 0, &p, NULL), 0);
	assert_int_equal(p.views[0], 100);
	assert_int_equal(p.views[1], 0);
	assert_int_equal(p.single, 0);
}

static void invalid_model_gets_nothing(void **state)
{
	(void)state;
	rc_model m[2] = { { .valid = 0 }, { .a = 0.01, .b = 0.0, .valid = 1 } };
	rc_plan p;
	assert_int_equal(rc_plan_split(m, NULL, 2, 10, 0, &p, NULL), 0);
	assert_int_equal(p.views[0], 0);
	assert_int_equal(p.views[1], 10);
	m[1].valid = 0;
	assert_int_equal(rc_plan_split(m, NULL, 2, 10, 0, &p, NULL), RC_EINVAL);
}

/* Two devices on the same cores are one: the faster takes the group's part. */
static void shared_hardware_counted_once(void **state)
{
	(void)state;
	rc_model m[3] = { { .a = 0.010, .b = 0.0, .valid = 1 },   /* cpu engine */
			  { .a = 0.012, .b = 0.0, .valid = 1 },   /* PoCL on the same CPU */
			  { .a = 0.005, .b = 0.0, .valid = 1 } }; /* a GPU */
	const char *groups[3] = { "host-cpu", "host-cpu", "pci:0000:01:00.0" };
	rc_plan p;
	assert_int_equal(rc_plan_split(m, groups, 3, 90, 0, &p, NULL), 0);
	assert_int_equal(p.views[1], 0);
	assert_int_equal(p.views[0], 30);
	assert_int_equal(p.views[2], 60);
	/* without groups both CPU "devices" would be given work */
	assert_int_equal(rc_plan_split(m, NULL, 3, 90, 0, &p, NULL), 0);
	assert_true(p.views[1] > 0);
}

/* Fig. 6 lines 7-10: a host faster than the split takes the task. */
static void execute_on_host(void **state)
{
	(void)state;
	rc_plan p;
	assert_int_equal(rc_plan_split(fp_models, NULL, 3, 211, 0.2, &p, NULL), 0);
	assert_int_equal(p.on_host, 1);
	assert_int_equal(rc_plan_split(fp_models, NULL, 3, 211, 10.0, &p, NULL), 0);
	assert_int_equal(p.on_host, 0);
	/* one view cannot be split: the faster device takes it alone */
	rc_model m[2] = { { .a = 0.002, .b = 1.0, .valid = 1 }, { .a = 0.001, .b = 1.0, .valid = 1 } };
	assert_int_equal(rc_plan_split(m, NULL, 2, 1, 0, &p, NULL), 0);
	assert_int_equal(p.single, 1);
	assert_int_equal(p.views[1], 1);
	assert_int_equal(rc_plan_split(m, NULL, 2, 10, 0, &p, NULL), 0);
	assert_int_equal(p.single, -1);
}

static void fit_exact_line(void **state)
{
	(void)state;
	double w[6] = { 35, 5, 10, 20, 50, 70 }, t[6];
	for (int i = 0; i < 6; i++)
		t[i] = 0.004 * w[i] + 0.03;
	rc_model m;
	assert_int_equal(rc_model_fit(w, t, 6, 1, &m, NULL), 0);
	assert_true(fabs(m.a - 0.004) < 1e-12);
	assert_true(fabs(m.b - 0.03) < 1e-12);
	assert_int_equal(m.dropped, 0);
}

/* Fig. 5: a GPU that is flat until it is full; the flat start is left out. */
static void fit_leaves_out_flat_start(void **state)
{
	(void)state;
	double w[10], t[10];
	for (int i = 0; i < 10; i++) {
		w[i] = 10.0 * (i + 1);
		t[i] = fmax(0.2, 0.005 * w[i] + 0.05); /* knee at W = 30 */
		t[i] *= 1.0 + 0.002 * ((i % 3) - 1);   /* a little timing noise */
	}
	rc_model m;
	assert_int_equal(rc_model_fit(w, t, 10, 1, &m, NULL), 0);
	assert_true(m.dropped >= 2 && m.dropped <= 3);
	assert_true(fabs(m.a - 0.005) / 0.005 < 0.02);
	assert_true(fabs(m.b - 0.05) < 0.01);
	/* the line through everything is visibly worse (the Fig. 5a error) */
	double sw = 0, st = 0, sww = 0, swt = 0;
	for (int i = 0; i < 10; i++) {
		sw += w[i];
		st += t[i];
		sww += w[i] * w[i];
		swt += w[i] * t[i];
	}
	double a_all = (10 * swt - sw * st) / (10 * sww - sw * sw);
	assert_true(fabs(a_all - 0.005) > fabs(m.a - 0.005));
}

static void fit_needs_five_workloads(void **state)
{
	(void)state;
	double w[5] = { 1, 2, 3, 4, 4 }, t[5] = { 1, 2, 3, 4, 4 };
	rc_model m;
	rc_err err;
	assert_int_equal(rc_model_fit(w, t, 5, 1, &m, &err), RC_EINVAL);
	assert_int_equal(rc_model_fit(w, t, 5, 0, &m, &err), 0);
	double flat[5] = { 1, 1, 1, 1, 1 };
	double w5[5] = { 1, 2, 3, 4, 5 };
	assert_int_equal(rc_model_fit(w5, flat, 5, 1, &m, &err), RC_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table3_forward),
		cmocka_unit_test(table3_back),
		cmocka_unit_test(closed_form_equal_finish),
		cmocka_unit_test(against_brute_force),
		cmocka_unit_test(slow_device_left_out),
		cmocka_unit_test(invalid_model_gets_nothing),
		cmocka_unit_test(shared_hardware_counted_once),
		cmocka_unit_test(execute_on_host),
		cmocka_unit_test(fit_exact_line),
		cmocka_unit_test(fit_leaves_out_flat_start),
		cmocka_unit_test(fit_needs_five_workloads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
