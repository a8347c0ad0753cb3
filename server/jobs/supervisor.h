/*
 * supervisor: one child process the daemon runs and watches (the worker of
 * a job, the device probe): spawn it with its output on a pipe, read what
 * it writes (as lines or as a whole), stop it (SIGTERM, then SIGKILL after
 * a grace period) and reap it.  It never decides what the child's end
 * means: the job's final state is worker_end_decide's (worker_end.h).
 *
 * Life cycle: supervisor_spawn; then, until supervisor_read says the output
 * ended, supervisor_poll and supervisor_read (and supervisor_lines for
 * line-based output), with supervisor_term to ask the child to stop and
 * supervisor_escalate on each turn; then supervisor_reap (or
 * supervisor_kill for a child that has had its time).  Used from one
 * thread; the pid may be read by others (to kill it) under their own lock.
 *
 * The child: signals unblocked, SIGKILL when the daemon dies (a worker must
 * not outlive a daemon killed with -9: the next daemon re-queues the job
 * and would run a second worker on the same directory), stdin from
 * /dev/null, the pipe as out_fd, extra descriptors moved to their numbers;
 * everything else the daemon has open is O_CLOEXEC and vanishes at exec.
 * A child that cannot exec exits 127 without a line.
 */
#ifndef RC_SUPERVISOR_H
#define RC_SUPERVISOR_H

#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "util/rc_error.h"

#define SUPERVISOR_MAX_FDS 4
#define SUPERVISOR_BUF 65536

typedef struct supervisor_spec {
	const char *prog;          /* the program (execv: a path) */
	char *const *argv;         /* its argv, NULL-terminated, argv[0] included */
	int out_fd;                /* the child's descriptor that is the pipe's write end (3, or 1) */
	/* descriptors the child gets at these numbers: each from is >= 10 so
	 * that no dup2 overwrites one before it is copied; from < 0: none */
	struct { int from, to; } fds[SUPERVISOR_MAX_FDS];
	int nfds;
	double grace_s;            /* SIGTERM -> SIGKILL */
} supervisor_spec;

typedef struct supervised {
	pid_t pid;                 /* > 0 once spawned */
	int fd;                    /* the pipe's read end; -1 once closed */
	double term_at;            /* monotonic time of the SIGTERM; 0 = not asked to stop */
	double grace_s;
	char out[SUPERVISOR_BUF];  /* what it wrote and supervisor_lines has not taken */
	size_t used;
} supervised;

/* Starts spec's program: 0 with s ready, or RC_EIO (no pipe, no fork). */
int supervisor_spawn(supervised *s, const supervisor_spec *spec, rc_err *err);

/* poll(2) of the output for up to timeout_ms: > 0 when there is something
 * to read (or its end), 0 on a timeout, < 0 on an error (EINTR). */
int supervisor_poll(supervised *s, int timeout_ms);

/* Reads once into s->out (at most what fits: a full buffer reads nothing):
 * 1 when bytes came or the read was interrupted, 0 at the end of the output
 * (the child closed it, normally by exiting) or on an error. */
int supervisor_read(supervised *s);

typedef void supervisor_line_fn(void *ud, char *line);
/* Hands each complete line of s->out (without its '\n') to on_line and
 * keeps the rest; a partial line that fills the buffer is no line of the
 * protocol's and is dropped. */
void supervisor_lines(supervised *s, supervisor_line_fn *on_line, void *ud);

/* Asks the child to stop (SIGTERM), once: later calls do nothing. */
void supervisor_term(supervised *s);
/* SIGKILL when the child was asked to stop more than grace_s ago. */
void supervisor_escalate(supervised *s);

/* Closes the output if still open and waits for the child: each turn
 * stop(ud) (NULL: never) says whether it is to stop, which sends SIGTERM
 * once, then SIGKILL after the grace period, as above; the waits start at
 * 0.5 ms (the child exits right after its output ends) and grow to 50 ms.
 * *status and *ru (either may be NULL) are the child's. */
typedef int supervisor_stop_fn(void *ud);
void supervisor_reap(supervised *s, supervisor_stop_fn *stop, void *ud, int *status, struct rusage *ru);

/* Closes the output if still open and reaps the child, with SIGKILL first
 * when it has not exited yet (a probe past its time). */
void supervisor_kill(supervised *s, int *status);

#endif
