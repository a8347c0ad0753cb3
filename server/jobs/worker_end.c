/* worker_end: the job's state from its worker's end (worker_end.h). */
#include "jobs/worker_end.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "worker_proto.h"

/* "15 (SIGTERM)": the number and the name, which strsignal does not give */
static void signal_words(int sig, char *buf, size_t n)
{
	const char *abbrev = sigabbrev_np(sig);
	snprintf(buf, n, "%d (%s%s)", sig, abbrev ? "SIG" : "", abbrev ? abbrev : "unknown signal");
}

job_state worker_end_decide(const worker_end *w, const char *worker, char *code, size_t ncode, char *msg, size_t nmsg)
{
	int st = w->status, exited = WIFEXITED(st), ex = exited ? WEXITSTATUS(st) : -1;
	char sig[48];
	if (exited && ex == 0 && w->volume_ok && !w->cancel_asked)
		return JOB_SUCCEEDED; /* finished before the stop took effect: keep it */
	if (w->stop_asked && !w->cancel_asked)
		return JOB_QUEUED;
	if (w->yield_asked && !w->cancel_asked)
		return JOB_RECEIVING; /* the queue goes on; the stream's next view queues it again */
	if (w->cancel_asked) {
		snprintf(code, ncode, "cancelled");
		snprintf(msg, nmsg, "cancelled by request");
		return JOB_CANCELLED;
	}
	if (exited && ex == WORKER_EXIT_STREAM_IDLE)
		return JOB_RECEIVING; /* the views stopped coming: back to receiving */
	if (w->saw_error && exited && ex != WORKER_EXIT_CANCELLED && !(ex == 127 && !w->lines))
		return JOB_FAILED; /* the worker's own code and message */
	snprintf(code, ncode, "worker_crashed");
	if (WIFSIGNALED(st)) {
		int s = WTERMSIG(st);
		/* a fault of the worker's own, or a signal sent to it (the daemon
		 * sends one only for a cancel or its stop, handled above) */
		int own = s == SIGSEGV || s == SIGBUS || s == SIGFPE || s == SIGILL || s == SIGABRT || s == SIGTRAP ||
			  s == SIGSYS;
		signal_words(s, sig, sizeof sig);
		snprintf(msg, nmsg, "the worker process was killed by signal %s%s; the job's data is intact and it can be "
			 "resubmitted", sig, own ? "" : " from outside the daemon");
	} else if (exited && ex == WORKER_EXIT_CANCELLED) {
		/* the worker caught a SIGTERM or SIGINT that the daemon did not send */
		if (w->signal > 0)
			signal_words(w->signal, sig, sizeof sig);
		else
			snprintf(sig, sizeof sig, "SIGTERM or SIGINT");
		snprintf(msg, nmsg, "the worker process was stopped by signal %s from outside the daemon (no cancel was "
			 "asked); the job's data is intact and it can be resubmitted", sig);
	} else if (ex == 127 && !w->lines) {
		snprintf(code, ncode, "internal_error");
		snprintf(msg, nmsg, "the worker %.200s could not be started (check the worker path)", worker);
	} else {
		snprintf(msg, nmsg, "the worker process exited with status %d without a report", ex);
	}
	return JOB_FAILED;
}
