/*
 * Tests of runner_mpi_blame (server/jobs/runner_mpi.c): the rank that ended
 * a failed job across MPI ranks, read from Open MPI 4's words in the job's
 * ranks.log (a rank killed by a signal, a rank that called MPI_Abort after
 * its own error line), and nothing claimed from a log that names no rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "jobs/runner_impl.h"

static int blame(const char *log, int ranks, char *msg, size_t n)
{
	char dir[] = "/tmp/test_runner_mpi.XXXXXX", path[128];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/ranks.log", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(log, f);
	fclose(f);
	msg[0] = '\0';
	int rc = runner_mpi_blame(dir, ranks, msg, n);
	unlink(path);
	rmdir(dir);
	return rc;
}

static void test_killed(void **state)
{
	(void)state;
	char msg[512];
	const char *log = "--------------------------------------------------------------------------\n"
			  "Primary job  terminated normally, but 1 process returned\n"
			  "--------------------------------------------------------------------------\n"
			  "mpirun noticed that process rank 2 with PID 4242 on node n7 exited on signal 9 (Killed).\n";
	assert_int_equal(blame(log, 3, msg, sizeof msg), 1);
	assert_non_null(strstr(msg, "rank 2 of 3"));
	assert_non_null(strstr(msg, "n7"));
	assert_non_null(strstr(msg, "signal 9"));
}

static void test_aborted(void **state)
{
	(void)state;
	char msg[512];
	const char *log = "recond-worker rank 1: projections: cannot map the stack\n"
			  "--------------------------------------------------------------------------\n"
			  "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 2.\n";
	assert_int_equal(blame(log, 2, msg, sizeof msg), 1);
	assert_non_null(strstr(msg, "rank 1 of 2 failed: projections: cannot map the stack"));
}

static void test_nothing(void **state)
{
	(void)state;
	char msg[512];
	assert_int_equal(blame("some unrelated line\n", 2, msg, sizeof msg), 0);
	assert_string_equal(msg, "");
	assert_int_equal(runner_mpi_blame("/nonexistent-dir-of-test_runner_mpi", 2, msg, sizeof msg), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_killed),
		cmocka_unit_test(test_aborted),
		cmocka_unit_test(test_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
