/*
 * Tests of the worker supervisor (server/jobs/supervisor.c) with /bin/sh as
 * the child: lines on the pipe at the fd asked for, descriptors moved to
 * their numbers, a partial last line kept, an exec that fails (127, no
 * line), SIGTERM that ends a child, SIGKILL after the grace period for one
 * that ignores SIGTERM, a stop asked while reaping, and supervisor_kill.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "jobs/supervisor.h"
#include "util/rc_clock.h"

struct seen {
	char lines[8][64];
	int n;
};

static void on_line(void *ud, char *line)
{
	struct seen *s = ud;
	if (s->n < 8)
		snprintf(s->lines[s->n++], sizeof s->lines[0], "%s", line);
}

/* Runs sh -c script with its output on out_fd (and extra fds), reading
 * lines until the end; returns the wait status. */
static int run_sh(const char *script, int out_fd, int from, int to, struct seen *seen, double term_after_s,
		  double grace_s, double *took)
{
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	supervisor_spec spec = { .prog = "/bin/sh", .argv = argv, .out_fd = out_fd, .fds = { { from, to } },
				 .nfds = 1, .grace_s = grace_s };
	supervised *w = malloc(sizeof *w);
	assert_non_null(w);
	assert_int_equal(supervisor_spawn(w, &spec, NULL), 0);
	assert_true(w->pid > 0);
	double t0 = rc_now_s();
	for (;;) {
		int n = supervisor_poll(w, 20);
		if (term_after_s > 0 && seen->n > 0 && rc_now_s() - t0 > term_after_s) /* once it runs */
			supervisor_term(w);
		supervisor_escalate(w);
		if (n <= 0)
			continue;
		if (!supervisor_read(w))
			break;
		supervisor_lines(w, on_line, seen);
	}
	int status = -1;
	supervisor_reap(w, NULL, NULL, &status, NULL);
	*took = rc_now_s() - t0;
	free(w);
	return status;
}

static void test_lines(void **state)
{
	(void)state;
	struct seen s = { 0 };
	double took;
	int st = run_sh("echo one >&3; printf 'two\\nthree' >&3", 3, -1, 4, &s, 0, 1, &took);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(s.n, 2); /* "three" has no newline: no line */
	assert_string_equal(s.lines[0], "one");
	assert_string_equal(s.lines[1], "two");
}

static void test_stdout_and_fds(void **state)
{
	(void)state;
	char path[] = "/tmp/test_supervisor.XXXXXX";
	int tmp = mkstemp(path);
	assert_true(tmp >= 0);
	unlink(path);
	int from = fcntl(tmp, F_DUPFD_CLOEXEC, 10);
	close(tmp);
	struct seen s = { 0 };
	double took;
	/* stdout is the pipe; fd 4 is the file; stdin is /dev/null */
	int st = run_sh("echo out; echo file >&4; read x || echo eof", 1, from, 4, &s, 0, 1, &took);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.lines[0], "out");
	assert_string_equal(s.lines[1], "eof");
	char buf[16] = { 0 };
	assert_int_equal(pread(from, buf, sizeof buf - 1, 0), 5);
	assert_string_equal(buf, "file\n");
	close(from);
}

static void test_exec_fails(void **state)
{
	(void)state;
	char *argv[] = { "/nonexistent/worker", NULL };
	supervisor_spec spec = { .prog = "/nonexistent/worker", .argv = argv, .out_fd = 3, .grace_s = 1 };
	supervised *w = malloc(sizeof *w);
	assert_int_equal(supervisor_spawn(w, &spec, NULL), 0);
	while (supervisor_poll(w, 100) <= 0 || supervisor_read(w))
		;
	assert_int_equal(w->used, 0);
	int status = -1;
	supervisor_reap(w, NULL, NULL, &status, NULL);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 127);
	free(w);
}

static void test_term(void **state)
{
	(void)state;
	struct seen s = { 0 };
	double took;
	int st = run_sh("echo up >&3; exec sleep 30", 3, -1, 4, &s, 0.1, 10, &took);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	assert_true(took < 5);
}

static void test_escalate(void **state)
{
	(void)state;
	struct seen s = { 0 };
	double took;
	/* ignores SIGTERM: SIGKILL after the 0.3 s grace */
	int st = run_sh("trap '' TERM; echo up >&3; while :; do sleep 0.05; done", 3, -1, 4, &s, 0.1, 0.3, &took);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_true(took >= 0.4 && took < 5);
}

static int always(void *ud)
{
	(*(int *)ud)++;
	return 1;
}

static void test_reap_stop(void **state)
{
	(void)state;
	/* output closed, process alive: the stop asked while reaping ends it */
	char *argv[] = { "/bin/sh", "-c", "exec 3>&-; exec sleep 30", NULL };
	supervisor_spec spec = { .prog = "/bin/sh", .argv = argv, .out_fd = 3, .grace_s = 10 };
	supervised *w = malloc(sizeof *w);
	assert_int_equal(supervisor_spawn(w, &spec, NULL), 0);
	while (supervisor_poll(w, 100) <= 0 || supervisor_read(w))
		;
	int status = -1, asked = 0;
	double t0 = rc_now_s();
	supervisor_reap(w, always, &asked, &status, NULL);
	assert_true(asked > 0);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	assert_true(rc_now_s() - t0 < 5);
	free(w);
}

static void test_kill(void **state)
{
	(void)state;
	char *argv[] = { "/bin/sh", "-c", "trap '' TERM; exec sleep 30", NULL };
	supervisor_spec spec = { .prog = "/bin/sh", .argv = argv, .out_fd = 1, .grace_s = 0 };
	supervised *w = malloc(sizeof *w);
	assert_int_equal(supervisor_spawn(w, &spec, NULL), 0);
	int status = -1;
	supervisor_kill(w, &status);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(w->fd, -1);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),    cmocka_unit_test(test_stdout_and_fds), cmocka_unit_test(test_exec_fails),
		cmocka_unit_test(test_term),     cmocka_unit_test(test_escalate),       cmocka_unit_test(test_reap_stop),
		cmocka_unit_test(test_kill),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
