/*
 * Tests of server/worker/spec.c: a valid spec of each geometry type parses to
 * the numbers it says, and a table of bad specs each fails with RC_EBADJSON
 * (not a JSON object), RC_EINVAL or RC_ETOOBIG naming the field at fault.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "plan/recon.h"
#include "spec.h"

#define CONE_GEOM "\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 1000, \"source_detector_mm\": 1500," \
	" \"angles\": {\"start_deg\": 0, \"step_deg\": 2, \"count\": 180}," \
	" \"detector\": {\"nu\": 64, \"nv\": 48, \"du_mm\": 1.0, \"dv_mm\": 1.0}}"
#define VOL "\"volume\": {\"nx\": 32, \"ny\": 32, \"nz\": 16, \"voxel_mm\": [0.5, 0.5, 0.5]}"
#define ALG "\"algorithm\": {\"name\": \"sart\", \"iterations\": 3, \"relaxation\": 0.5}"

static int parse(const char *json, uint64_t cap, job_spec **s, rc_err *err)
{
	rc_err_clear(err);
	return job_spec_parse(json, strlen(json), cap, s, err);
}

static void test_cone_ok(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	const char *j = "{\"label\": \"phantom\", " CONE_GEOM ", " VOL ", " ALG
			", \"execution\": {\"engine\": \"cpu\"}, \"priority\": 7, \"autostart\": true}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_string_equal(s->label, "phantom");
	assert_int_equal(s->priority, 7);
	assert_int_equal(s->autostart, 1);
	assert_int_equal(s->nviews, 180);
	assert_int_equal(s->rows, 48);
	assert_int_equal(s->nu, 64);
	assert_true(s->view_bytes == 64u * 48u * 4u);
	assert_true(s->proj_bytes == 180u * 64u * 48u * 4u);
	assert_true(s->vol_bytes == 32u * 32u * 16u * 4u);
	assert_true(s->angles[179] == 358.0);
	assert_int_equal(s->r.algo.name, RC_ALGO_SART);
	assert_int_equal(s->r.algo.iterations, 3);
	assert_true(s->r.algo.relaxation == 0.5);
	/* the defaults of an iterative job (algo.h) */
	assert_int_equal(s->r.algo.subsets, 0);
	assert_int_equal(s->r.algo.nonnegative, 1);
	assert_true(s->r.algo.tv_weight == RC_TV_DEFAULT_WEIGHT && s->r.algo.tv_steps == RC_TV_DEFAULT_STEPS);
	assert_int_equal(s->r.algo.tv_auto, 1); /* the weight follows the data's noise */
	assert_true(s->r.algo.stop_discrepancy == RC_STOP_DEFAULT_TAU && s->r.algo.noise_sigma == 0.0);
	assert_int_equal(s->r.engine, RC_ENGINE_CPU);
	job_spec_free(s);
	/* and given ones */
	j = "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"cgls\", \"nonnegative\": false, "
	    "\"tv\": {\"weight\": 0, \"steps\": 3}, \"stop\": {\"tolerance\": 0.01, \"discrepancy\": 0, "
	    "\"noise_sigma\": 0.002}}}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_int_equal(s->r.algo.iterations, 10);
	assert_int_equal(s->r.algo.nonnegative, 0);
	assert_true(s->r.algo.tv_weight == 0.0 && s->r.algo.tv_steps == 3);
	assert_int_equal(s->r.algo.tv_auto, 0);
	assert_true(s->r.algo.stop_tolerance == 0.01 && s->r.algo.stop_discrepancy == 0.0);
	assert_true(s->r.algo.noise_sigma == 0.002);
	assert_true(job_spec_row_offset(s, 2, 1) == 4u * (2u * 64u * 48u + 64u));
	job_spec_free(s);
	/* tv without a weight keeps the default's, which follows the noise;
	 * a weight given, the default's value included, is used as given */
	j = "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sirt\", \"tv\": {\"steps\": 4}}}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_true(s->r.algo.tv_weight == RC_TV_DEFAULT_WEIGHT && s->r.algo.tv_steps == 4 && s->r.algo.tv_auto == 1);
	job_spec_free(s);
	j = "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sirt\", \"tv\": {\"weight\": 0.02}}}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_true(s->r.algo.tv_weight == RC_TV_DEFAULT_WEIGHT && s->r.algo.tv_auto == 0);
	job_spec_free(s);
}

static void test_parallel_layout(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	const char *j = "{\"geometry\": {\"type\": \"parallel\", \"angles_deg\": [0, 45, 90, 135],"
			" \"detector\": {\"nu\": 40, \"du_mm\": 1}}, " VOL ", \"algorithm\": {\"name\": \"cgls\"}}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_int_equal(s->nviews, 4);
	assert_int_equal(s->rows, 16); /* one row per slice */
	assert_true(s->view_bytes == 40u * 16u * 4u);
	/* [slice][view][u]: row j of view k at (j * nviews + k) * nu floats */
	assert_true(job_spec_row_offset(s, 3, 2) == 4u * (2u * 4u * 40u + 3u * 40u));
	assert_int_equal(s->priority, 5);
	assert_int_equal(s->autostart, 0);
	job_spec_free(s);
}

/* algorithm.projector: parsed, refused for fdk and where voxels project
 * more than a pixel apart (the parser: it builds the geometry), and by
 * rc_recon_check for fan/parallel and with an engine other than auto/cpu. */
static void test_projector_choice(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	const char *j = "{" CONE_GEOM ", " VOL ", " ALG "}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_int_equal(s->r.algo.projector, RC_PROJECTOR_AUTO);
	job_spec_free(s);
	static const char *const names[] = { "splat", "raycast", "auto" };
	static const rc_projector values[] = { RC_PROJECTOR_SPLAT, RC_PROJECTOR_RAYCAST, RC_PROJECTOR_AUTO };
	for (int i = 0; i < 3; i++) {
		char buf[1024];
		snprintf(buf, sizeof buf, "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"cgls\", \"projector\": \"%s\"}, "
			 "\"execution\": {\"engine\": \"%s\"}}", names[i], "cpu");
		assert_int_equal(parse(buf, 0, &s, &err), 0);
		assert_int_equal(s->r.algo.projector, values[i]);
		assert_int_equal(rc_recon_check(&s->r, &err), 0);
		/* the splat pair runs on one engine: cpu, opencl or cuda, not a
		 * trigeneous split */
		s->r.engine = RC_ENGINE_OPENCL;
		assert_int_equal(rc_recon_check(&s->r, &err), 0);
		s->r.engine = RC_ENGINE_CUDA;
		assert_int_equal(rc_recon_check(&s->r, &err), 0);
		s->r.engine = RC_ENGINE_TRIGENEOUS;
		int rc = rc_recon_check(&s->r, &err);
		if (values[i] == RC_PROJECTOR_SPLAT) {
			assert_int_equal(rc, RC_EUNSUPPORTED);
			assert_string_equal(err.field, "algorithm.projector");
			assert_non_null(strstr(err.msg, "one engine"));
		} else {
			assert_int_equal(rc, 0);
		}
		job_spec_free(s);
	}
	/* fan/parallel: auto only */
	j = "{\"geometry\": {\"type\": \"parallel\", \"angles_deg\": [0, 45, 90, 135],"
	    " \"detector\": {\"nu\": 40, \"du_mm\": 1}}, " VOL ", \"algorithm\": {\"name\": \"cgls\", "
	    "\"projector\": \"raycast\"}}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_int_equal(rc_recon_check(&s->r, &err), RC_EUNSUPPORTED);
	assert_string_equal(err.field, "algorithm.projector");
	job_spec_free(s);
}

/* algorithm.initial: SART and MLEM start from FDK's volume by default,
 * SIRT and CGLS from 0; either word parses on every iterative algorithm. */
static void test_initial_choice(void **state)
{
	(void)state;
	static const char *const algs[] = { "sart", "sirt", "cgls", "mlem" };
	/* none given (the default: auto), then each word */
	static const char *const given[] = { "", ", \"initial\": \"zero\"", ", \"initial\": \"fdk\"",
					     ", \"initial\": \"auto\"" };
	static const rc_initial want[] = { RC_INITIAL_AUTO, RC_INITIAL_ZERO, RC_INITIAL_FDK, RC_INITIAL_AUTO };
	for (int a = 0; a < 4; a++)
		for (int w = 0; w < 4; w++) {
			char buf[1024];
			job_spec *s = NULL;
			rc_err err;
			snprintf(buf, sizeof buf, "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"%s\"%s}}", algs[a],
				 given[w]);
			assert_int_equal(parse(buf, 0, &s, &err), 0);
			assert_int_equal(s->r.algo.initial, want[w]);
			job_spec_free(s);
		}
}

/* algorithm.extend (the long object, core/plan/extend.h): auto by default,
 * each word on every iterative algorithm. */
static void test_extend_choice(void **state)
{
	(void)state;
	static const char *const algs[] = { "sart", "sirt", "cgls", "mlem" };
	static const char *const given[] = { "", ", \"extend\": \"off\"", ", \"extend\": \"on\"",
					     ", \"extend\": \"auto\"" };
	static const rc_extend want[] = { RC_EXTEND_AUTO, RC_EXTEND_OFF, RC_EXTEND_ON, RC_EXTEND_AUTO };
	for (int a = 0; a < 4; a++)
		for (int w = 0; w < 4; w++) {
			char buf[1024];
			job_spec *s = NULL;
			rc_err err;
			snprintf(buf, sizeof buf, "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"%s\"%s}}", algs[a],
				 given[w]);
			assert_int_equal(parse(buf, 0, &s, &err), 0);
			assert_int_equal(s->r.algo.extend, want[w]);
			job_spec_free(s);
		}
}

/* geometry.detector.shape: fan and cone, "flat" by default, words from core's
 * table; every algorithm runs on a curved fan, on each engine that runs a
 * flat one. */
#define FAN_DET(extra) "{\"geometry\": {\"type\": \"fan\", \"source_isocenter_mm\": 100, " \
	"\"source_detector_mm\": 200, \"angles\": {\"start_deg\": 0, \"step_deg\": 3, \"count\": 120}, " \
	"\"detector\": {\"nu\": 60, \"du_mm\": 1" extra "}}, " VOL ", "

/* cuda runs 2-D stacks of at most 65535 slices (plane.cu's grid) */
static void test_cuda_slices(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	const char *json = "{\"geometry\": {\"type\": \"parallel\", \"slices\": 65536, \"angles\": {\"start_deg\": 0, "
			   "\"step_deg\": 3, \"count\": 4}, \"detector\": {\"nu\": 4, \"du_mm\": 1}}, \"volume\": "
			   "{\"nx\": 2, \"ny\": 2, \"nz\": 65536, \"voxel_mm\": 1}, \"algorithm\": {\"name\": \"fdk\"}, "
			   "\"execution\": {\"engine\": \"cuda\"}}";
	assert_int_equal(parse(json, 0, &s, &err), 0);
	assert_int_equal(rc_recon_check(&s->r, &err), RC_EUNSUPPORTED);
	assert_string_equal(err.field, "execution.engine");
	assert_non_null(strstr(err.msg, "65535 slices"));
	job_spec_free(s);
}

static void test_detector_shape(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	assert_int_equal(parse(FAN_DET("") ALG "}", 0, &s, &err), 0);
	assert_int_equal(s->r.geom.det.shape, RC_DETECTOR_FLAT);
	job_spec_free(s);
	s = NULL;
	assert_int_equal(parse(FAN_DET(", \"shape\": \"flat\"") ALG "}", 0, &s, &err), 0);
	assert_int_equal(s->r.geom.det.shape, RC_DETECTOR_FLAT);
	job_spec_free(s);
	s = NULL;
	assert_int_equal(parse(FAN_DET(", \"shape\": \"curved\"") ALG "}", 0, &s, &err), 0);
	assert_int_equal(s->r.geom.det.shape, RC_DETECTOR_CURVED);
	assert_int_equal(rc_recon_check(&s->r, &err), 0);
	job_spec_free(s);
	s = NULL;
	/* fdk runs on the curved fan (equiangular FBP) */
	assert_int_equal(parse(FAN_DET(", \"shape\": \"curved\"") "\"algorithm\": {\"name\": \"fdk\"}}", 0, &s, &err),
			 0);
	assert_int_equal(rc_recon_check(&s->r, &err), 0);
	/* and on every engine a flat fan runs on: the OpenCL and CUDA
	 * engines' 2-D kernels map to the arc (rc_plane_arc), so a curved fan
	 * is checked as a flat one is (cuda on a build without CUDA is
	 * refused by engine_runs for both) */
	static const char *const dev_eng[] = { "opencl", "cuda", "trigeneous" };
	for (int i = 0; i < 3; i++) {
		int ev = -1;
		assert_int_equal(rc_name_parse(RC_NAMES_ENGINE, dev_eng[i], &ev), 0);
		s->r.engine = (rc_engine_choice)ev;
		s->r.geom.det.shape = RC_DETECTOR_FLAT;
		rc_err_clear(&err);
		int rc_flat = rc_recon_check(&s->r, &err);
		s->r.geom.det.shape = RC_DETECTOR_CURVED;
		rc_err_clear(&err);
		assert_int_equal(rc_recon_check(&s->r, &err), rc_flat);
		if (i == 0)
			assert_int_equal(rc_flat, 0);
	}
	job_spec_free(s);
	s = NULL;
	/* an unknown word lists the choices */
	assert_int_equal(parse(FAN_DET(", \"shape\": \"round\"") ALG "}", 0, &s, &err), RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector.shape");
	assert_non_null(strstr(err.msg, "flat"));
	assert_non_null(strstr(err.msg, "curved"));
	assert_null(s);
	/* a fan wider than the arc allows */
	assert_int_equal(parse(FAN_DET(", \"shape\": \"curved\", \"offset_u_mm\": 260") ALG "}", 0, &s, &err),
			 RC_EINVAL);
	assert_string_equal(err.field, "geometry.detector");
	assert_null(s);
	/* a cone takes a cylindrical detector, on the CPU engine only */
	{
		char buf[1024];
		const char *c = "{" CONE_GEOM ", " VOL ", " ALG "}";
		const char *at = strstr(c, "\"detector\": {") + strlen("\"detector\": {");
		snprintf(buf, sizeof buf, "%.*s\"shape\": \"curved\", %s", (int)(at - c), c, at);
		assert_int_equal(parse(buf, 0, &s, &err), 0);
		assert_int_equal(s->r.geom.det.shape, RC_DETECTOR_CURVED);
		assert_int_equal(rc_recon_check(&s->r, &err), 0);
		s->r.engine = RC_ENGINE_OPENCL;
		assert_int_equal(rc_recon_check(&s->r, &err), RC_EUNSUPPORTED);
		assert_string_equal(err.field, "execution.engine");
		job_spec_free(s);
		s = NULL;
	}
	/* other types: the key is refused, saying it is the fan's and cone's */
	static const char *const other[] = {
		"{\"geometry\": {\"type\": \"parallel\", \"angles_deg\": [0, 45, 90, 135],"
		" \"detector\": {\"nu\": 40, \"du_mm\": 1}}, " VOL ", " ALG "}",
	};
	for (int i = 0; i < 1; i++) {
		char buf[1024];
		const char *at = strstr(other[i], "\"detector\": {");
		assert_non_null(at);
		at += strlen("\"detector\": {");
		snprintf(buf, sizeof buf, "%.*s\"shape\": \"flat\", %s", (int)(at - other[i]), other[i], at);
		assert_int_equal(parse(buf, 0, &s, &err), RC_EINVAL);
		assert_string_equal(err.field, "geometry.detector.shape");
		assert_non_null(strstr(err.msg, "fan"));
		assert_null(s);
	}
}

/* execution.stream: absent = auto where FDK streams, off elsewhere */
static void test_stream_modes(void **state)
{
	(void)state;
	static const struct {
		const char *alg, *exec;
		int want;
	} c[] = {
		{ "{\"name\": \"fdk\"}", "{}", STREAM_AUTO },
		{ "{\"name\": \"fdk\"}", "{\"stream\": true}", STREAM_ON },
		{ "{\"name\": \"fdk\"}", "{\"stream\": false}", STREAM_OFF },
		{ "{\"name\": \"fdk\"}", "{\"engine\": \"tensor\"}", STREAM_OFF },
		{ "{\"name\": \"sart\"}", "{}", STREAM_OFF },
		{ "{\"name\": \"sart\"}", "{\"stream\": false}", STREAM_OFF },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char buf[1024];
		job_spec *s = NULL;
		rc_err err;
		snprintf(buf, sizeof buf, "{" CONE_GEOM ", " VOL ", \"algorithm\": %s, \"execution\": %s}", c[i].alg, c[i].exec);
		assert_int_equal(parse(buf, 0, &s, &err), 0);
		assert_int_equal(s->stream, c[i].want);
		job_spec_free(s);
	}
}

/* execution.checkpoint_s: 60 s when absent, 0 turns checkpoints off */
static void test_checkpoint_s(void **state)
{
	(void)state;
	static const struct {
		const char *exec;
		double want;
	} c[] = { { "{}", SPEC_CHECKPOINT_DEFAULT_S }, { "{\"checkpoint_s\": 0}", 0.0 }, { "{\"checkpoint_s\": 2.5}", 2.5 } };
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char buf[1024];
		job_spec *s = NULL;
		rc_err err;
		snprintf(buf, sizeof buf, "{" CONE_GEOM ", " VOL ", " ALG ", \"execution\": %s}", c[i].exec);
		assert_int_equal(parse(buf, 0, &s, &err), 0);
		assert_true(s->checkpoint_s == c[i].want);
		job_spec_free(s);
	}
	assert_true(SPEC_CHECKPOINT_DEFAULT_S == 60.0);
}

/* execution.ranks: 1 when absent, 1..SPEC_MAX_RANKS, no stream across
 * ranks (auto turns off, true is refused), the summary's "ranks" only
 * above 1 */
static void test_ranks(void **state)
{
	(void)state;
	static const struct {
		const char *alg, *exec;
		int rc, ranks, stream;
		const char *field;
	} c[] = {
		{ "{\"name\": \"fdk\"}", "{}", 0, 1, STREAM_AUTO, "" },
		{ "{\"name\": \"fdk\"}", "{\"ranks\": 3}", 0, 3, STREAM_OFF, "" },
		{ "{\"name\": \"cgls\"}", "{\"ranks\": 4096}", 0, 4096, STREAM_OFF, "" },
		{ "{\"name\": \"fdk\"}", "{\"ranks\": 2, \"stream\": true}", RC_EUNSUPPORTED, 0, 0, "execution.stream" },
		{ "{\"name\": \"fdk\"}", "{\"ranks\": 0}", RC_EINVAL, 0, 0, "execution.ranks" },
		{ "{\"name\": \"fdk\"}", "{\"ranks\": 4097}", RC_EINVAL, 0, 0, "execution.ranks" },
		{ "{\"name\": \"fdk\"}", "{\"ranks\": 1.5}", RC_EINVAL, 0, 0, "execution.ranks" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char buf[1024];
		job_spec *s = NULL;
		rc_err err;
		snprintf(buf, sizeof buf, "{" CONE_GEOM ", " VOL ", \"algorithm\": %s, \"execution\": %s}", c[i].alg, c[i].exec);
		int rc = parse(buf, 0, &s, &err);
		assert_int_equal(rc, c[i].rc);
		if (rc) {
			assert_string_equal(err.field, c[i].field);
			continue;
		}
		assert_int_equal(s->ranks, c[i].ranks);
		assert_int_equal(s->stream, c[i].stream);
		char *sum = job_spec_summary(s);
		char want[32];
		snprintf(want, sizeof want, "\"ranks\":%d", c[i].ranks);
		assert_true((strstr(sum, want) != NULL) == (c[i].ranks > 1));
		free(sum);
		job_spec_free(s);
	}
}

/* A cone FDK across ranks is predicted per rank from the detector rows its
 * slab reads (spec.c rank_slab_memory): here 3 slabs of 20 of 60 slices,
 * none seen by all 256 rows of a 94 MiB stack, so the figure lies strictly
 * between a slab with one row (plus the MPI allowance) and a slab with the
 * whole detector, and under the one-process figure. */
static void test_rank_memory(void **state)
{
	(void)state;
	const char *fmt = "{\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 500,"
			  " \"source_detector_mm\": 1000, \"angles\": {\"start_deg\": 0, \"step_deg\": 1,"
			  " \"count\": 360}, \"detector\": {\"nu\": 256, \"nv\": 256, \"du_mm\": 0.25, \"dv_mm\": 0.25}},"
			  " \"volume\": {\"nx\": 32, \"ny\": 32, \"nz\": 60, \"voxel_mm\": 1.0},"
			  " \"algorithm\": {\"name\": \"fdk\"}, \"execution\": {\"engine\": \"cpu\", \"ranks\": %d}}";
	char buf[1024];
	job_spec *one = NULL, *three = NULL;
	rc_err err;
	snprintf(buf, sizeof buf, fmt, 1);
	assert_int_equal(parse(buf, 0, &one, &err), 0);
	snprintf(buf, sizeof buf, fmt, 3);
	assert_int_equal(parse(buf, 0, &three, &err), 0);
	rc_recon_spec sub = three->r;
	sub.vol.nz = 20;
	/* a slab with the whole detector, without even the block and the
	 * allowance: what a rank holding the whole stack would need at least */
	uint64_t mpi = 6ull << 20, full = rc_plan_memory(&sub, 0);
	sub.geom.det.nv = 1;
	uint64_t least = rc_plan_memory(&sub, 0) + mpi;
	uint64_t got = job_spec_memory(three);
	print_message("per rank %.2f MiB (one row %.2f, whole detector %.2f), one process %.2f MiB\n", got / 1048576.0,
		      least / 1048576.0, full / 1048576.0, job_spec_memory(one) / 1048576.0);
	assert_true(got > least);
	assert_true(got < full);
	assert_true(got < job_spec_memory(one));
	job_spec_free(one);
	job_spec_free(three);
}

static void test_matrices_ok(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	/* Two views of the cone above at 0 and 90 degrees, D=1000, S=1500, 1 mm pixels, 32x32 detector. */
	const char *j = "{\"geometry\": {\"type\": \"matrices\", \"detector\": {\"nu\": 32, \"nv\": 32},"
			" \"matrices\": [[15.5, 1500, 0, -15500, 15.5, 0, 1500, -15500, 1, 0, 0, -1000],"
			" [-1500, 15.5, 0, -15500, 0, 15.5, 1500, -15500, 0, 1, 0, -1000]]},"
			" \"volume\": {\"nx\": 16, \"ny\": 16, \"nz\": 16, \"voxel_mm\": 0.5}, \"algorithm\": {\"name\": \"sirt\"}}";
	int rc = parse(j, 0, &s, &err);
	if (rc)
		print_error("%s: %s\n", err.field, err.msg);
	assert_int_equal(rc, 0);
	assert_int_equal(s->nviews, 2);
	assert_true(s->proj_bytes == 2u * 32u * 32u * 4u);
	job_spec_free(s);
}

/* The stored form read back (job_spec_load, as the worker and downloads read
 * it) parses to the same spec as the body did, and the summary says it. */
static void test_load_and_summary(void **state)
{
	(void)state;
	const char *j = "{\"label\": \"stored\", " CONE_GEOM ", " VOL ", " ALG ", \"execution\": {\"engine\": \"opencl\"}}";
	char path[] = "/tmp/test_spec_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_true(write(fd, j, strlen(j)) == (ssize_t)strlen(j));
	close(fd);
	job_spec *a = NULL, *b = NULL;
	rc_err err;
	assert_int_equal(parse(j, 0, &a, &err), 0);
	assert_int_equal(job_spec_load(path, &b, &err), 0);
	unlink(path);
	assert_string_equal(b->label, "stored");
	assert_true(a->proj_bytes == b->proj_bytes && a->vol_bytes == b->vol_bytes);
	assert_true(b->r.vol.nx == 32 && b->r.vol.nz == 16 && b->r.vol.vx == 0.5);
	char *s = job_spec_summary(b);
	assert_non_null(s);
	/* plan_memory_bytes: job_spec_memory's figure (the model is test_plan's);
	 * warnings: the geometry's (core/plan/checks.h), none for this one */
	char want[512];
	snprintf(want, sizeof want, "{\"geometry\":\"cone\",\"detector\":[64,48],\"volume\":[32,32,16],"
		 "\"voxel_mm\":[0.5,0.5,0.5],\"algorithm\":\"sart\",\"iterations\":3,\"subsets\":18,"
		 "\"tv_weight\":0.02,\"engine\":\"opencl\",\"plan_memory_bytes\":%llu,\"warnings\":[]}",
		 (unsigned long long)job_spec_memory(b));
	assert_true(job_spec_memory(b) > b->proj_bytes + b->vol_bytes);
	assert_string_equal(s, want);
	free(s);
	job_spec_free(a);
	job_spec_free(b);
	rc_err_clear(&err);
	assert_int_equal(job_spec_load("/nonexistent/spec.json", &b, &err), RC_EIO);
	assert_non_null(strstr(err.msg, "/nonexistent/spec.json"));
}

struct bad_case {
	const char *name;
	const char *json;
	int code;
	const char *field; /* substring expected in err.field */
};

#define G_ANG(a) "\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 1000, \"source_detector_mm\": 1500," \
	" \"angles\": " a ", \"detector\": {\"nu\": 64, \"nv\": 48, \"du_mm\": 1.0, \"dv_mm\": 1.0}}"
#define G_DET(d) "\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": 1000, \"source_detector_mm\": 1500," \
	" \"angles\": {\"start_deg\": 0, \"step_deg\": 2, \"count\": 180}, \"detector\": " d "}"
#define G_SID(x) "\"geometry\": {\"type\": \"cone\", \"source_isocenter_mm\": " x ", \"source_detector_mm\": 1500," \
	" \"angles\": {\"start_deg\": 0, \"step_deg\": 2, \"count\": 180}," \
	" \"detector\": {\"nu\": 64, \"nv\": 48, \"du_mm\": 1.0, \"dv_mm\": 1.0}}"

#define IN_J(x) "{" CONE_GEOM ", " VOL ", " ALG ", \"input\": " x "}"
static const struct bad_case bad[] = {
	{ "input not an object", IN_J("\"intensity\""), RC_EINVAL, "input" },
	{ "input unknown kind", IN_J("{\"kind\": \"counts\"}"), RC_EINVAL, "input.kind" },
	{ "input unknown key", IN_J("{\"kind\": \"intensity\", \"flat\": 9, \"gain\": 1}"), RC_EINVAL, "input.gain" },
	{ "input dtype", IN_J("{\"kind\": \"intensity\", \"dtype\": \"uint8\", \"flat\": 9}"), RC_EINVAL, "input.dtype" },
	{ "input dtype not a string", IN_J("{\"kind\": \"intensity\", \"dtype\": 16, \"flat\": 9}"), RC_EINVAL, "input.dtype" },
	{ "input flat missing", IN_J("{\"kind\": \"intensity\", \"dark\": 9}"), RC_EINVAL, "input.flat" },
	{ "input flat <= dark", IN_J("{\"kind\": \"intensity\", \"flat\": 100, \"dark\": 100}"), RC_EINVAL, "input.flat" },
	{ "input flat below dark", IN_J("{\"kind\": \"intensity\", \"flat\": 50, \"dark\": 100}"), RC_EINVAL, "input.flat" },
	{ "input flat zero", IN_J("{\"kind\": \"intensity\", \"flat\": 0}"), RC_EINVAL, "input.flat" },
	{ "input flat NaN string", IN_J("{\"kind\": \"intensity\", \"flat\": \"NaN\"}"), RC_EINVAL, "input.flat" },
	{ "input flat NaN literal", IN_J("{\"kind\": \"intensity\", \"flat\": NaN}"), RC_EBADJSON, "" },
	{ "input flat bool", IN_J("{\"kind\": \"intensity\", \"flat\": true}"), RC_EINVAL, "input.flat" },
	{ "input dark negative", IN_J("{\"kind\": \"intensity\", \"flat\": 9, \"dark\": -1}"), RC_EINVAL, "input.dark" },
	{ "input dark word", IN_J("{\"kind\": \"intensity\", \"flat\": 9, \"dark\": \"upload\"}"), RC_EINVAL, "input.dark" },
	{ "input bad_pixels", IN_J("{\"kind\": \"intensity\", \"flat\": 9, \"bad_pixels\": true}"), RC_EINVAL, "input.bad_pixels" },
	{ "input bad_pixels word", IN_J("{\"kind\": \"intensity\", \"flat\": 9, \"bad_pixels\": \"none\"}"), RC_EINVAL, "input.bad_pixels" },
	{ "input dtype on line integrals", IN_J("{\"kind\": \"line_integrals\", \"dtype\": \"uint16\"}"), RC_EINVAL, "input.dtype" },
	{ "not json", "{\"label\": ", RC_EBADJSON, "" },
	{ "not an object", "[1, 2]", RC_EBADJSON, "" },
	{ "duplicate key", "{\"label\": \"a\", \"label\": \"b\", " CONE_GEOM ", " VOL ", " ALG "}", RC_EBADJSON, "" },
	{ "NaN literal", "{" G_SID("NaN") ", " VOL ", " ALG "}", RC_EBADJSON, "" },
	{ "overflowing number", "{" G_SID("1e999") ", " VOL ", " ALG "}", RC_EBADJSON, "" },
	{ "negative distance", "{" G_SID("-5") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.source_isocenter_mm" },
	{ "zero distance", "{" G_SID("0") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.source_isocenter_mm" },
	{ "huge distance", "{" G_SID("1e300") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.source_isocenter_mm" },
	{ "distance as string", "{" G_SID("\"1000\"") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.source_isocenter_mm" },
	{ "source inside the volume", "{" G_SID("2") ", " VOL ", " ALG "}", RC_EINVAL, "geometry" },
	{ "unknown algorithm", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"art\"}}", RC_EINVAL, "algorithm.name" },
	{ "unknown engine", "{" CONE_GEOM ", " VOL ", " ALG ", \"execution\": {\"engine\": \"gpu\"}}", RC_EINVAL, "execution.engine" },
	{ "unknown precision", "{" CONE_GEOM ", " VOL ", " ALG ", \"execution\": {\"precision\": \"fp64\"}}", RC_EINVAL, "execution.precision" },
	{ "stream not a boolean", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\"}, \"execution\": {\"stream\": 1}}", RC_EINVAL, "execution.stream" },
	{ "stream with sart", "{" CONE_GEOM ", " VOL ", " ALG ", \"execution\": {\"stream\": true}}", RC_EUNSUPPORTED, "execution.stream" },
	{ "stream on the tensor engine", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\"}, \"execution\": {\"stream\": true, \"engine\": \"tensor\"}}", RC_EUNSUPPORTED, "execution.stream" },
	{ "negative checkpoint_s", "{" CONE_GEOM ", " VOL ", " ALG ", \"execution\": {\"checkpoint_s\": -1}}", RC_EINVAL, "execution.checkpoint_s" },
	{ "checkpoint_s over a day", "{" CONE_GEOM ", " VOL ", " ALG ", \"execution\": {\"checkpoint_s\": 1e6}}", RC_EINVAL, "execution.checkpoint_s" },
	{ "checkpoint_s a string", "{" CONE_GEOM ", " VOL ", " ALG ", \"execution\": {\"checkpoint_s\": \"60\"}}", RC_EINVAL, "execution.checkpoint_s" },
	{ "unknown top key", "{" CONE_GEOM ", " VOL ", " ALG ", \"priorty\": 3}", RC_EINVAL, "priorty" },
	{ "unknown nested key", "{" G_DET("{\"nu\": 64, \"nv\": 48, \"du_mm\": 1, \"dv_mm\": 1, \"pitch\": 2}") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.detector.pitch" },
	{ "missing geometry", "{" VOL ", " ALG "}", RC_EINVAL, "geometry" },
	{ "missing volume", "{" CONE_GEOM ", " ALG "}", RC_EINVAL, "volume" },
	{ "missing algorithm", "{" CONE_GEOM ", " VOL "}", RC_EINVAL, "algorithm" },
	{ "unknown type", "{\"geometry\": {\"type\": \"helical\", \"detector\": {\"nu\": 4}}, " VOL ", " ALG "}", RC_EINVAL, "geometry.type" },
	{ "nu zero", "{" G_DET("{\"nu\": 0, \"nv\": 48, \"du_mm\": 1, \"dv_mm\": 1}") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.detector.nu" },
	{ "nu real", "{" G_DET("{\"nu\": 64.5, \"nv\": 48, \"du_mm\": 1, \"dv_mm\": 1}") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.detector.nu" },
	{ "nu huge", "{" G_DET("{\"nu\": 10000000000, \"nv\": 48, \"du_mm\": 1, \"dv_mm\": 1}") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.detector.nu" },
	{ "du negative", "{" G_DET("{\"nu\": 64, \"nv\": 48, \"du_mm\": -1, \"dv_mm\": 1}") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.detector.du_mm" },
	{ "dv missing", "{" G_DET("{\"nu\": 64, \"nv\": 48, \"du_mm\": 1}") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.detector.dv_mm" },
	{ "count zero", "{" G_ANG("{\"start_deg\": 0, \"step_deg\": 1, \"count\": 0}") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.angles.count" },
	{ "count huge", "{" G_ANG("{\"start_deg\": 0, \"step_deg\": 1, \"count\": 100000000}") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.angles.count" },
	{ "angles not object", "{" G_ANG("[0, 1]") ", " VOL ", " ALG "}", RC_EINVAL, "geometry.angles" },
	{ "angle list bad element", "{\"geometry\": {\"type\": \"parallel\", \"angles_deg\": [0, \"x\"], \"detector\": {\"nu\": 40, \"du_mm\": 1}}, " VOL ", " ALG "}", RC_EINVAL, "geometry.angles_deg[1]" },
	{ "both angle forms", "{\"geometry\": {\"type\": \"parallel\", \"angles_deg\": [0], \"angles\": {\"start_deg\": 0, \"step_deg\": 1, \"count\": 2}, \"detector\": {\"nu\": 40, \"du_mm\": 1}}, " VOL ", " ALG "}", RC_EINVAL, "geometry.angles" },
	{ "distance on parallel", "{\"geometry\": {\"type\": \"parallel\", \"source_isocenter_mm\": 5, \"angles_deg\": [0], \"detector\": {\"nu\": 40, \"du_mm\": 1}}, " VOL ", " ALG "}", RC_EINVAL, "geometry.source_isocenter_mm" },
	{ "slices mismatch", "{\"geometry\": {\"type\": \"parallel\", \"slices\": 3, \"angles_deg\": [0], \"detector\": {\"nu\": 40, \"du_mm\": 1}}, " VOL ", " ALG "}", RC_EINVAL, "geometry.slices" },
	{ "shape on matrices", "{\"geometry\": {\"type\": \"matrices\", \"detector\": {\"nu\": 8, \"nv\": 8, \"shape\": \"curved\"}, \"matrices\": [[1, 2, 3]]}, " VOL ", " ALG "}", RC_EINVAL, "geometry.detector.shape" },
	{ "shape not a string", "{\"geometry\": {\"type\": \"fan\", \"source_isocenter_mm\": 100, \"source_detector_mm\": 200, \"angles_deg\": [0, 90], \"detector\": {\"nu\": 60, \"du_mm\": 1, \"shape\": 1}}, " VOL ", " ALG "}", RC_EINVAL, "geometry.detector.shape" },
	{ "matrix short", "{\"geometry\": {\"type\": \"matrices\", \"detector\": {\"nu\": 8, \"nv\": 8}, \"matrices\": [[1, 2, 3]]}, " VOL ", " ALG "}", RC_EINVAL, "geometry.matrices[0]" },
	{ "matrix singular", "{\"geometry\": {\"type\": \"matrices\", \"detector\": {\"nu\": 8, \"nv\": 8}, \"matrices\": [[0,0,0,1,0,0,0,1,0,0,0,1]]}, " VOL ", " ALG "}", RC_EINVAL, "geometry" },
	{ "voxel zero", "{" CONE_GEOM ", \"volume\": {\"nx\": 32, \"ny\": 32, \"nz\": 16, \"voxel_mm\": 0}, " ALG "}", RC_EINVAL, "volume.voxel_mm" },
	{ "voxel two numbers", "{" CONE_GEOM ", \"volume\": {\"nx\": 32, \"ny\": 32, \"nz\": 16, \"voxel_mm\": [1, 1]}, " ALG "}", RC_EINVAL, "volume.voxel_mm" },
	{ "nx negative", "{" CONE_GEOM ", \"volume\": {\"nx\": -1, \"ny\": 32, \"nz\": 16, \"voxel_mm\": 1}, " ALG "}", RC_EINVAL, "volume.nx" },
	{ "iterations zero", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"iterations\": 0}}", RC_EINVAL, "algorithm.iterations" },
	{ "fdk iterations", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\", \"iterations\": 5}}", RC_EINVAL, "algorithm.iterations" },
	{ "relaxation 2", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"relaxation\": 2}}", RC_EINVAL, "algorithm.relaxation" },
	{ "subsets > views", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"subsets\": 181}}", RC_EINVAL, "algorithm.subsets" },
	{ "tv weight negative", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"tv\": {\"weight\": -1}}}", RC_EINVAL, "algorithm.tv.weight" },
	{ "tv weight string", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"cgls\", \"tv\": {\"weight\": \"0.1\"}}}", RC_EINVAL, "algorithm.tv.weight" },
	{ "tv steps zero", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"tv\": {\"steps\": 0}}}", RC_EINVAL, "algorithm.tv.steps" },
	{ "tv unknown key", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"tv\": {\"lambda\": 1}}}", RC_EINVAL, "algorithm.tv.lambda" },
	{ "tv not object", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"tv\": 0.1}}", RC_EINVAL, "algorithm.tv" },
	{ "tv on fdk", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\", \"tv\": {\"weight\": 0.1}}}", RC_EINVAL, "algorithm.tv" },
	{ "stop tolerance 1", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"mlem\", \"stop\": {\"tolerance\": 1}}}", RC_EINVAL, "algorithm.stop.tolerance" },
	{ "stop discrepancy negative", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sirt\", \"stop\": {\"discrepancy\": -1}}}", RC_EINVAL, "algorithm.stop.discrepancy" },
	{ "stop noise null", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"stop\": {\"noise_sigma\": null}}}", RC_EINVAL, "algorithm.stop.noise_sigma" },
	{ "stop on fdk", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\", \"stop\": {}}}", RC_EINVAL, "algorithm.stop" },
	{ "projector unknown", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"projector\": \"joseph\"}}", RC_EINVAL, "algorithm.projector" },
	{ "stagnation 1", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"mlem\", \"stop\": {\"stagnation\": 1}}}", RC_EINVAL, "algorithm.stop.stagnation" },
	{ "stagnation negative", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"mlem\", \"stop\": {\"stagnation\": -0.1}}}", RC_EINVAL, "algorithm.stop.stagnation" },
	{ "initial unknown", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"initial\": \"fbp\"}}", RC_EINVAL, "algorithm.initial" },
	{ "initial not a string", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"mlem\", \"initial\": 1}}", RC_EINVAL, "algorithm.initial" },
	{ "extend unknown", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"extend\": \"always\"}}", RC_EINVAL, "algorithm.extend" },
	{ "extend not a string", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"cgls\", \"extend\": true}}", RC_EINVAL, "algorithm.extend" },
	{ "extend on fdk", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\", \"extend\": \"off\"}}", RC_EINVAL, "algorithm.extend" },
	{ "initial on fdk", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\", \"initial\": \"zero\"}}", RC_EINVAL, "algorithm.initial" },
	{ "projector number", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"sart\", \"projector\": 1}}", RC_EINVAL, "algorithm.projector" },
	{ "projector on fdk", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\", \"projector\": \"raycast\"}}", RC_EINVAL, "algorithm.projector" },
	{ "splat on coarse voxels", "{" CONE_GEOM ", \"volume\": {\"nx\": 32, \"ny\": 32, \"nz\": 16, \"voxel_mm\": 1}, \"algorithm\": {\"name\": \"cgls\", \"projector\": \"splat\"}}", RC_EINVAL, "algorithm.projector" },
	{ "window unknown", "{" CONE_GEOM ", " VOL ", \"algorithm\": {\"name\": \"fdk\", \"window\": \"box\"}}", RC_EINVAL, "algorithm.window" },
	{ "priority high", "{" CONE_GEOM ", " VOL ", " ALG ", \"priority\": 10}", RC_EINVAL, "priority" },
	{ "autostart string", "{" CONE_GEOM ", " VOL ", " ALG ", \"autostart\": \"yes\"}", RC_EINVAL, "autostart" },
	{ "label number", "{\"label\": 5, " CONE_GEOM ", " VOL ", " ALG "}", RC_EINVAL, "label" },
	{ "memory cap", "{" CONE_GEOM ", \"volume\": {\"nx\": 4096, \"ny\": 4096, \"nz\": 4096, \"voxel_mm\": 0.001}, " ALG "}", RC_ETOOBIG, "" },
#define DCM(x) "{" CONE_GEOM ", " VOL ", " ALG ", \"dicom\": " x "}"
	{ "birth date 30 February", DCM("{\"patient_birth_date\": \"20000230\"}"), RC_EINVAL, "dicom.patient_birth_date" },
	{ "birth date 29 February 1900", DCM("{\"patient_birth_date\": \"19000229\"}"), RC_EINVAL, "dicom.patient_birth_date" },
	{ "65 characters of LO", DCM("{\"institution\": \"" "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" "\"}"), RC_EINVAL, "dicom.institution" },
	{ "17 characters of SH", DCM("{\"accession_number\": \"xxxxxxxxxxxxxxxxx\"}"), RC_EINVAL, "dicom.accession_number" },
	{ "six name components", DCM("{\"patient_name\": \"a^b^c^d^e^f\"}"), RC_EINVAL, "dicom.patient_name" },
	{ "a UID with an empty component", DCM("{\"study_instance_uid\": \"1..2\"}"), RC_EINVAL, "dicom.study_instance_uid" },
	{ "a UID of letters", DCM("{\"study_instance_uid\": \"1.2.abc\"}"), RC_EINVAL, "dicom.study_instance_uid" },
	{ "patient_sex not a string", DCM("{\"patient_sex\": 1}"), RC_EINVAL, "dicom.patient_sex" },
	{ "a tab in a description", DCM("{\"study_description\": \"a\\tb\"}"), RC_EINVAL, "dicom.study_description" },
	{ "push not a list", "{" CONE_GEOM ", " VOL ", " ALG ", \"output\": {\"push\": \"a\"}}", RC_EINVAL, "output.push" },
	{ "push a name twice", "{" CONE_GEOM ", " VOL ", " ALG ", \"output\": {\"push\": [\"a\", \"a\"]}}", RC_EINVAL, "output.push" },
	{ "push an empty name", "{" CONE_GEOM ", " VOL ", " ALG ", \"output\": {\"push\": [\"\"]}}", RC_EINVAL, "output.push[0]" },
	{ "negative water", "{" CONE_GEOM ", " VOL ", " ALG ", \"output\": {\"water_mu_per_mm\": -0.02}}", RC_EINVAL, "output.water_mu_per_mm" },
};

/* output and dicom: defaults, given values, lengths in characters. */
static void test_output_dicom(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	const char *j = "{" CONE_GEOM ", " VOL ", " ALG "}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_true(s->out.water_mu_per_mm == 0.0192 && s->out.npush == 0 && !s->dicom.patient_name[0]);
	job_spec_free(s);
	/* 64 two-byte characters are 64 characters of LO; 29 February 2000 is a date */
	j = "{" CONE_GEOM ", " VOL ", " ALG ", \"output\": {\"water_mu_per_mm\": 0.02, \"push\": [\"x\", \"y\"]}, "
	    "\"dicom\": {\"patient_name\": \"Doe^Jane\", \"patient_birth_date\": \"20000229\", \"patient_sex\": \"F\", "
	    "\"study_instance_uid\": \"1.2.0.10\", \"institution\": "
	    "\"\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4"
	    "\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4"
	    "\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4"
	    "\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\u00e4\"}}";
	assert_int_equal(parse(j, 0, &s, &err), 0);
	assert_true(s->out.water_mu_per_mm == 0.02);
	assert_int_equal(s->out.npush, 2);
	assert_string_equal(s->out.push[1], "y");
	assert_string_equal(s->dicom.patient_name, "Doe^Jane");
	assert_string_equal(s->dicom.patient_birth_date, "20000229");
	assert_string_equal(s->dicom.study_instance_uid, "1.2.0.10");
	assert_int_equal(strlen(s->dicom.institution), 128);
	/* the stored spec's output and dicom alone read the same */
	char path[] = "/tmp/test_spec_out.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, j, strlen(j)), (ssize_t)strlen(j));
	close(fd);
	job_output out;
	job_dicom d;
	assert_int_equal(job_spec_load_output(path, &out, &d, &err), 0);
	assert_memory_equal(&out, &s->out, sizeof out);
	assert_memory_equal(&d, &s->dicom, sizeof d);
	unlink(path);
	job_spec_free(s);
}

/* input: line integrals by default (4 bytes a sample), counts of uint16
 * (2 bytes: view_bytes, proj_bytes and the row offsets follow) or float32,
 * flat and dark numbers or "uploaded". */
static void test_input(void **state)
{
	(void)state;
	job_spec *s = NULL;
	rc_err err;
	assert_int_equal(parse("{" CONE_GEOM ", " VOL ", " ALG "}", 0, &s, &err), 0);
	assert_int_equal(s->in.intensity, 0);
	assert_int_equal(s->sample_bytes, 4);
	job_spec_free(s);
	assert_int_equal(parse(IN_J("{\"kind\": \"intensity\", \"dtype\": \"uint16\", \"flat\": \"uploaded\", "
				    "\"dark\": 100, \"bad_pixels\": \"uploaded\"}"), 0, &s, &err), 0);
	assert_int_equal(s->in.intensity, 1);
	assert_int_equal(s->in.dtype, RC_COUNTS_U16);
	assert_int_equal(s->in.uploaded[INPUT_FLAT], 1);
	assert_int_equal(s->in.uploaded[INPUT_DARK], 0);
	assert_int_equal(s->in.uploaded[INPUT_BAD], 1);
	assert_true(s->in.dark == 100.0);
	assert_int_equal(s->sample_bytes, 2);
	assert_true(s->view_bytes == 64u * 48u * 2u);
	assert_true(s->proj_bytes == 180u * 64u * 48u * 2u);
	assert_true(job_spec_row_offset(s, 2, 1) == 2u * (2u * 64u * 48u + 64u));
	job_spec_free(s);
	/* dtype defaults to uint16; dark to 0; flat uploaded with dark a number above nothing yet */
	assert_int_equal(parse(IN_J("{\"kind\": \"intensity\", \"dtype\": \"float32\", \"flat\": 1.5}"), 0, &s,
			       &err), 0);
	assert_int_equal(s->in.dtype, RC_COUNTS_F32);
	assert_int_equal(s->sample_bytes, 4);
	assert_true(s->in.flat == 1.5 && s->in.dark == 0.0);
	job_spec_free(s);
	/* fan: a view is nz rows of nu uint16 ([slice][view][u]) */
	const char *fan = "{\"geometry\": {\"type\": \"parallel\", \"angles_deg\": [0, 45, 90, 135],"
			  " \"detector\": {\"nu\": 40, \"du_mm\": 1}}, " VOL ", \"algorithm\": {\"name\": \"cgls\"},"
			  " \"input\": {\"kind\": \"intensity\", \"flat\": 4000}}";
	assert_int_equal(parse(fan, 0, &s, &err), 0);
	assert_true(s->view_bytes == 40u * 16u * 2u);
	assert_true(job_spec_row_offset(s, 3, 2) == 2u * (2u * 4u * 40u + 3u * 40u));
	job_spec_free(s);
}

static void test_bad(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		job_spec *s = NULL;
		rc_err err;
		int rc = parse(bad[i].json, 1ull << 30, &s, &err);
		if (rc != bad[i].code || !strstr(err.field, bad[i].field) || !err.msg[0]) {
			print_error("case \"%s\": rc %d field \"%s\" msg \"%s\" (want %d, field ~ \"%s\")\n",
				    bad[i].name, rc, err.field, err.msg, bad[i].code, bad[i].field);
			fail();
		}
		assert_null(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cone_ok),
		cmocka_unit_test(test_parallel_layout),
		cmocka_unit_test(test_projector_choice),
		cmocka_unit_test(test_initial_choice),
		cmocka_unit_test(test_extend_choice),
		cmocka_unit_test(test_cuda_slices),
		cmocka_unit_test(test_detector_shape),
		cmocka_unit_test(test_matrices_ok),
		cmocka_unit_test(test_stream_modes),
		cmocka_unit_test(test_checkpoint_s),
		cmocka_unit_test(test_ranks),
		cmocka_unit_test(test_rank_memory),
		cmocka_unit_test(test_load_and_summary),
		cmocka_unit_test(test_output_dicom),
		cmocka_unit_test(test_input),
		cmocka_unit_test(test_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
