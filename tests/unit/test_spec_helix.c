/*
 * A helix job spec through server/worker/spec.c: parsed to the numbers it
 * says; each refusal (a missing or misplaced pitch_mm, a pitch beyond the
 * detector's window, a volume outside the covered range, reversing angles,
 * an engine, an iterative streaming run or MPI ranks that do not run a
 * helix) names its
 * field and stores nothing (the engines: rc_recon_check, the daemon's
 * check at creation).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plan/recon.h"
#include "spec.h"

#define HELIX(pitch, extra) \
	"\"geometry\": {\"type\": \"helix\", \"source_isocenter_mm\": 1000, \"source_detector_mm\": 1500," \
	" \"pitch_mm\": " pitch ", \"z_start_mm\": -22" extra "," \
	" \"angles\": {\"start_deg\": 0, \"step_deg\": 2, \"count\": 250}," \
	" \"detector\": {\"nu\": 64, \"nv\": 48, \"du_mm\": 1.0, \"dv_mm\": 1.0, \"shape\": \"curved\"}}"
#define VOL(cz) "\"volume\": {\"nx\": 32, \"ny\": 32, \"nz\": 16, \"voxel_mm\": [0.5, 0.5, 0.5], \"center_mm\": [0, 0, " cz "]}"
#define ALG "\"algorithm\": {\"name\": \"fdk\"}"

static int parse(const char *json, job_spec **s, rc_err *err)
{
	rc_err_clear(err);
	return job_spec_parse(json, strlen(json), 1ull << 30, s, err);
}

static void test_helix_ok(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	const char *j = "{" HELIX("32", "") ", " VOL("0") ", " ALG "}";
	if (parse(j, &s, &err))
		fail_msg("%s: %s", err.field, err.msg);
	assert_int_equal(s->r.geom.type, RC_GEOM_HELIX);
	assert_true(s->r.geom.pitch_mm == 32 && s->r.geom.z_start_mm == -22);
	assert_int_equal(s->r.geom.det.shape, RC_DETECTOR_CURVED);
	assert_int_equal(s->nviews, 250);
	char *sum = job_spec_summary(s);
	assert_non_null(strstr(sum, "\"geometry\":\"helix\""));
	free(sum);
	job_spec_free(s);
	/* its FDK streams (slab by slab as the views arrive) */
	j = "{" HELIX("32", "") ", " VOL("0") ", " ALG ", \"execution\": {\"stream\": true}}";
	if (parse(j, &s, &err))
		fail_msg("%s: %s", err.field, err.msg);
	assert_int_equal(s->stream, STREAM_ON);
	job_spec_free(s);
}

static void test_helix_bad(void **state)
{
	(void)state;
	static const struct {
		const char *json, *field;
	} bad[] = {
		{ "{\"geometry\": {\"type\": \"helix\", \"source_isocenter_mm\": 1000, \"source_detector_mm\": 1500,"
		  " \"angles\": {\"start_deg\": 0, \"step_deg\": 2, \"count\": 250},"
		  " \"detector\": {\"nu\": 64, \"nv\": 48, \"du_mm\": 1.0, \"dv_mm\": 1.0}}, " VOL("0") ", " ALG "}",
		  "geometry.pitch_mm" },
		{ "{\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 1000, \"source_detector_mm\": 1500,"
		  " \"pitch_mm\": 3, \"angles\": {\"start_deg\": 0, \"step_deg\": 2, \"count\": 180},"
		  " \"detector\": {\"nu\": 64, \"nv\": 48, \"du_mm\": 1.0, \"dv_mm\": 1.0}}, " VOL("0") ", " ALG "}",
		  "geometry.pitch_mm" },
		{ "{" HELIX("70", "") ", " VOL("0") ", " ALG "}", "geometry.pitch_mm" },
		{ "{" HELIX("\"x\"", "") ", " VOL("0") ", " ALG "}", "geometry.pitch_mm" },
		{ "{" HELIX("32", "") ", " VOL("10") ", " ALG "}", "volume" },
		{ "{" HELIX("32", "") ", " VOL("0") ", " ALG ", \"execution\": {\"engine\": \"opencl\"}}",
		  "execution.engine" },
		{ "{" HELIX("32", "") ", " VOL("0") ", " ALG ", \"execution\": {\"engine\": \"tensor\"}}",
		  "execution.engine" },
		{ "{" HELIX("32", "") ", " VOL("0") ", " ALG ", \"execution\": {\"engine\": \"trigeneous\"}}",
		  "execution.engine" },
		/* a helix streams its FDK only, as a cone */
		{ "{" HELIX("32", "") ", " VOL("0") ", \"algorithm\": {\"name\": \"sirt\"}, \"execution\": {\"stream\": true}}",
		  "execution.stream" },
		{ "{" HELIX("32", "") ", " VOL("0") ", " ALG ", \"execution\": {\"ranks\": 2}}",
		  "execution.ranks" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		job_spec *s = NULL;
		rc_err err;
		int rc = parse(bad[i].json, &s, &err);
		/* the engines are the daemon's check at creation (http_jobs.c):
		 * core's rc_recon_check */
		if (!rc) {
			rc = rc_recon_check(&s->r, &err);
			job_spec_free(s);
			s = NULL;
		}
		print_message("case %zu: rc %d, %s: %s\n", i, rc, err.field, err.msg);
		assert_int_not_equal(rc, 0);
		assert_string_equal(err.field, bad[i].field);
		assert_null(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_helix_ok),
		cmocka_unit_test(test_helix_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
