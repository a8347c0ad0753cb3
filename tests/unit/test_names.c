/* test_names: core's one table of choice words (names.h): every word parses
 * to its value and back, unknown words are refused with a message that lists
 * the choices, and the typed wrappers of algo.h agree with the table.  The
 * API side (api/openapi.yaml's enums) is tests/integration/test_names.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "algo/algo.h"
#include "geometry/geometry.h"
#include "algo/names.h"

static void test_round_trip(void **state)
{
	(void)state;
	for (int s = 0; s < RC_NAMES_COUNT; s++) {
		assert_non_null(rc_name_set_key((rc_name_set)s));
		assert_true(rc_names_count((rc_name_set)s) > 0);
		for (int i = 0; i < rc_names_count((rc_name_set)s); i++) {
			int v = -1, back = -1;
			const char *w = rc_names_at((rc_name_set)s, i, &v, NULL);
			assert_non_null(w);
			assert_int_equal(rc_name_parse((rc_name_set)s, w, &back), 0);
			assert_int_equal(back, v);
			assert_string_equal(rc_name_str((rc_name_set)s, v), w);
		}
		assert_null(rc_names_at((rc_name_set)s, rc_names_count((rc_name_set)s), NULL, NULL));
	}
}

static const struct {
	rc_name_set set;
	const char *word;
	int value;
} known[] = {
	{ RC_NAMES_ENGINE, "trigeneous", RC_ENGINE_TRIGENEOUS },
	{ RC_NAMES_ENGINE, "auto", RC_ENGINE_AUTO },
	{ RC_NAMES_ALGORITHM, "fdk", RC_ALGO_FDK },
	{ RC_NAMES_ALGORITHM, "mlem", RC_ALGO_MLEM },
	{ RC_NAMES_WINDOW, "shepp-logan", RC_WINDOW_SHEPP_LOGAN },
	{ RC_NAMES_SCAN, "short", RC_SCAN_SHORT },
	{ RC_NAMES_GEOMETRY, "parallel", RC_GEOM_PARALLEL },
	{ RC_NAMES_PRECISION, "mixed", RC_PRECISION_MIXED },
	{ RC_NAMES_PRECISION, "auto", RC_PRECISION_AUTO },
	{ RC_NAMES_FORMAT, "nifti", RC_FORMAT_NIFTI },
};

static void test_known_values(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		int v = -1;
		assert_int_equal(rc_name_parse(known[i].set, known[i].word, &v), 0);
		assert_int_equal(v, known[i].value);
	}
	rc_algo_name a;
	rc_filter_window w;
	assert_int_equal(rc_algo_name_parse("cgls", &a), 0);
	assert_int_equal(a, RC_ALGO_CGLS);
	assert_string_equal(rc_algo_name_str(RC_ALGO_SIRT), "sirt");
	assert_string_equal(rc_algo_name_str((rc_algo_name)99), "unknown");
	assert_int_equal(rc_filter_window_parse("hann", &w), 0);
	assert_int_equal(w, RC_WINDOW_HANN);
	assert_int_equal(rc_filter_window_parse("box", &w), RC_EINVAL);
}

static void test_refusals(void **state)
{
	(void)state;
	int v = 7;
	assert_int_equal(rc_name_parse(RC_NAMES_ENGINE, "gpu", &v), RC_EINVAL);
	assert_int_equal(rc_name_parse(RC_NAMES_ENGINE, NULL, &v), RC_EINVAL);
	assert_int_equal(rc_name_parse(RC_NAMES_ENGINE, "CPU", &v), RC_EINVAL); /* exact words only */
	assert_int_equal(v, 7);
	assert_null(rc_name_str(RC_NAMES_FORMAT, 42));
	rc_err err;
	rc_err_clear(&err);
	assert_int_equal(rc_name_fail(&err, RC_NAMES_ENGINE, "execution.engine", "gpu"), RC_EINVAL);
	assert_string_equal(err.field, "execution.engine");
	assert_string_equal(err.msg, "execution.engine must be one of auto, cpu, opencl, cuda, tensor or trigeneous "
				     "(got \"gpu\")");
	char buf[64];
	assert_string_equal(rc_names_join(RC_NAMES_PRECISION, 0, buf, sizeof buf), "auto, fp32, mixed or bf16");
	assert_string_equal(rc_names_join(RC_NAMES_ENGINE, RC_NAME_DEVICE, buf, sizeof buf), "cpu, opencl or cuda");
	assert_string_equal(rc_names_join(RC_NAMES_FORMAT, 0, buf, 6), "raw, "); /* truncated, terminated */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_known_values),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
