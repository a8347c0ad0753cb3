/*
 * Tests of worker_end_decide (server/jobs/worker_end.c): how a worker's end becomes the
 * job's state and error.  Table-driven: the wait status, whether the volume
 * is in place, whether the daemon asked for a cancel or its own stop, and
 * what the worker said.  Only a stop the daemon asked for is a cancel; a
 * SIGTERM from outside (caught by the worker, which then exits 3) or a
 * SIGKILL from outside fails the job with a message naming the signal.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/worker_end.h"
#include "worker_proto.h"

#define EXITED(n) (((n) & 0xff) << 8) /* a wait status, as WIFEXITED reads it */
#define KILLED(s) ((s) & 0x7f)

static const struct row {
	const char *what;
	worker_end w;
	job_state want;
	const char *code;     /* NULL: left as the worker wrote it */
	const char *contains; /* in the message; NULL: not checked */
	const char *absent;   /* not in the message; NULL: not checked */
} table[] = {
	{ "clean exit with a volume", { .status = EXITED(0), .volume_ok = 1 }, JOB_SUCCEEDED, NULL, NULL, NULL },
	{ "clean exit, then a stop: kept", { .status = EXITED(0), .volume_ok = 1, .stop_asked = 1 }, JOB_SUCCEEDED,
	  NULL, NULL, NULL },
	{ "clean exit raced by a cancel", { .status = EXITED(0), .volume_ok = 1, .cancel_asked = 1 }, JOB_CANCELLED,
	  "cancelled", "cancelled by request", NULL },
	{ "user's cancel, worker exits 3", { .status = EXITED(WORKER_EXIT_CANCELLED), .cancel_asked = 1,
	  .saw_error = 1, .signal = SIGTERM }, JOB_CANCELLED, "cancelled", "cancelled by request", NULL },
	{ "user's cancel, SIGKILL after the grace", { .status = KILLED(SIGKILL), .cancel_asked = 1 }, JOB_CANCELLED,
	  "cancelled", "cancelled by request", NULL },
	{ "daemon stop: back to the queue", { .status = EXITED(WORKER_EXIT_CANCELLED), .stop_asked = 1,
	  .saw_error = 1 }, JOB_QUEUED, NULL, NULL, NULL },
	{ "SIGTERM from outside, caught", { .status = EXITED(WORKER_EXIT_CANCELLED), .saw_error = 1,
	  .signal = SIGTERM, .lines = 3 }, JOB_FAILED, "worker_crashed", "signal 15 (SIGTERM) from outside the daemon",
	  "cancelled by request" },
	{ "SIGINT from outside, caught", { .status = EXITED(WORKER_EXIT_CANCELLED), .saw_error = 1, .signal = SIGINT },
	  JOB_FAILED, "worker_crashed", "signal 2 (SIGINT) from outside the daemon", "cancelled by request" },
	{ "exit 3 without a signal named", { .status = EXITED(WORKER_EXIT_CANCELLED) }, JOB_FAILED, "worker_crashed",
	  "SIGTERM or SIGINT from outside the daemon", "cancelled by request" },
	{ "SIGKILL from outside (OOM killer)", { .status = KILLED(SIGKILL), .lines = 2 }, JOB_FAILED, "worker_crashed",
	  "signal 9 (SIGKILL) from outside the daemon", NULL },
	{ "SIGSEGV: the worker's own fault", { .status = KILLED(SIGSEGV) }, JOB_FAILED, "worker_crashed",
	  "signal 11 (SIGSEGV)", "outside" },
	{ "an error line, then exit 7", { .status = EXITED(7), .saw_error = 1, .lines = 2 }, JOB_FAILED, "disk_full",
	  "the worker's message", NULL },
	{ "exit 0 without a volume", { .status = EXITED(0), .lines = 1 }, JOB_FAILED, "worker_crashed",
	  "exited with status 0 without a report", NULL },
	{ "worker's own error", { .status = EXITED(WORKER_EXIT_FAILED), .saw_error = 1, .lines = 1 }, JOB_FAILED,
	  "disk_full", "the worker's message", NULL },
	{ "worker not started", { .status = EXITED(127) }, JOB_FAILED, "internal_error", "could not be started", NULL },
	{ "stream idle: paused", { .status = EXITED(WORKER_EXIT_STREAM_IDLE), .saw_error = 1 }, JOB_RECEIVING, NULL,
	  NULL, NULL },
	{ "stream yielded to the queue", { .status = EXITED(WORKER_EXIT_CANCELLED), .yield_asked = 1, .saw_error = 1,
	  .signal = SIGTERM }, JOB_RECEIVING, NULL, NULL, NULL },
	{ "stream yield raced by a cancel", { .status = EXITED(WORKER_EXIT_CANCELLED), .yield_asked = 1,
	  .cancel_asked = 1 }, JOB_CANCELLED, "cancelled", "cancelled by request", NULL },
	{ "stream yield raced by the daemon's stop", { .status = EXITED(WORKER_EXIT_CANCELLED), .yield_asked = 1,
	  .stop_asked = 1 }, JOB_QUEUED, NULL, NULL, NULL },
	{ "stream idle raced by a cancel", { .status = EXITED(WORKER_EXIT_STREAM_IDLE), .cancel_asked = 1 },
	  JOB_CANCELLED, "cancelled", "cancelled by request", NULL },
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		const struct row *t = &table[i];
		char code[32] = "disk_full", msg[512] = "the worker's message";
		job_state got = worker_end_decide(&t->w, "/usr/bin/recond-worker", code, sizeof code, msg, sizeof msg);
		if (got != t->want)
			fail_msg("%s: state %d, want %d (%s)", t->what, got, t->want, msg);
		if (t->code && strcmp(code, t->code))
			fail_msg("%s: code %s, want %s", t->what, code, t->code);
		if (t->contains && !strstr(msg, t->contains))
			fail_msg("%s: message \"%s\" lacks \"%s\"", t->what, msg, t->contains);
		if (t->absent && strstr(msg, t->absent))
			fail_msg("%s: message \"%s\" has \"%s\"", t->what, msg, t->absent);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
