/*
 * test_durable: the durable writes' temporary names (durable.h
 * durable_tmp_path, shared by durable_write_parts and the out-of-core run):
 * dir/.NAME.HOST.PID.RANDOM.tmp, the host with no '/' or '.', two names of
 * one process apart; a durable write leaves its file and no temporary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include <cmocka.h>

#include "durable.h"

static void test_tmp_path(void **state)
{
	(void)state;
	char a[512], b[512], pid[32];
	durable_tmp_path(a, sizeof a, "/spool/jobs/x", "volume.f32");
	durable_tmp_path(b, sizeof b, "/spool/jobs/x", "volume.f32");
	print_message("%s\n%s\n", a, b);
	const char *pre = "/spool/jobs/x/.volume.f32.";
	assert_int_equal(strncmp(a, pre, strlen(pre)), 0);
	size_t n = strlen(a);
	assert_true(n > 4 && !strcmp(a + n - 4, ".tmp"));
	/* HOST.PID.RANDOM between the name and .tmp: exactly two dots */
	const char *mid = a + strlen(pre);
	int dots = 0;
	for (const char *c = mid; c < a + n - 4; c++) {
		dots += *c == '.';
		assert_true(*c != '/');
	}
	assert_int_equal(dots, 2);
	snprintf(pid, sizeof pid, ".%ld.", (long)getpid());
	assert_non_null(strstr(mid, pid));
	/* the random part: two temporaries of one process differ */
	assert_string_not_equal(a, b);
}

static void test_write_leaves_no_temporary(void **state)
{
	(void)state;
	char dir[] = "/tmp/recond-test-durable-XXXXXX";
	assert_non_null(mkdtemp(dir));
	rc_err err;
	assert_int_equal(durable_write_file(dir, "spec.json", "{}", 2, &err), 0);
	DIR *d = opendir(dir);
	assert_non_null(d);
	int files = 0, spec = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			files++;
			spec += !strcmp(e->d_name, "spec.json");
		}
	closedir(d);
	assert_int_equal(files, 1);
	assert_int_equal(spec, 1);
	char p[256];
	snprintf(p, sizeof p, "%s/spec.json", dir);
	unlink(p);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tmp_path),
		cmocka_unit_test(test_write_leaves_no_temporary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
