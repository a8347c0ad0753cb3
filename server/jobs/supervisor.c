/* supervisor: a child process on a pipe, stopped and reaped (supervisor.h). */
#include "jobs/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/rc_clock.h"

int supervisor_spawn(supervised *s, const supervisor_spec *spec, rc_err *err)
{
	int p[2];
	memset(s, 0, sizeof *s);
	s->fd = -1;
	s->grace_s = spec->grace_s;
	if (pipe2(p, O_CLOEXEC))
		return rc_fail(err, RC_EIO, "", "pipe: %s", strerror(errno));
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return rc_fail(err, RC_EIO, "", "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		/* Child: only async-signal-safe calls until exec.  getppid()
		 * closes the race with a parent that died before prctl. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0 && devnull != 0) {
			dup2(devnull, 0);
			close(devnull);
		}
		if (p[1] != spec->out_fd) {
			if (dup2(p[1], spec->out_fd) < 0) /* the copy is not close-on-exec */
				_exit(127);
		} else {
			fcntl(spec->out_fd, F_SETFD, 0);
		}
		for (int i = 0; i < spec->nfds; i++)
			if (spec->fds[i].from >= 0 && dup2(spec->fds[i].from, spec->fds[i].to) < 0)
				_exit(127);
		execv(spec->prog, spec->argv);
		_exit(127);
	}
	close(p[1]);
	s->pid = pid;
	s->fd = p[0];
	return 0;
}

int supervisor_poll(supervised *s, int timeout_ms)
{
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	return poll(&pfd, 1, timeout_ms);
}

int supervisor_read(supervised *s)
{
	ssize_t got = read(s->fd, s->out + s->used, sizeof s->out - 1 - s->used);
	if (got < 0 && errno == EINTR)
		return 1;
	if (got <= 0)
		return 0;
	s->used += (size_t)got;
	s->out[s->used] = '\0';
	return 1;
}

void supervisor_lines(supervised *s, supervisor_line_fn *on_line, void *ud)
{
	char *start = s->out, *nl;
	while ((nl = strchr(start, '\n'))) {
		*nl = '\0';
		on_line(ud, start);
		start = nl + 1;
	}
	s->used = (size_t)(s->out + s->used - start);
	memmove(s->out, start, s->used);
	if (s->used == sizeof s->out - 1)
		s->used = 0; /* a line longer than the buffer is not ours: drop it */
}

void supervisor_term(supervised *s)
{
	if (s->term_at)
		return;
	kill(s->pid, SIGTERM);
	s->term_at = rc_now_s();
}

void supervisor_escalate(supervised *s)
{
	if (s->term_at && rc_now_s() - s->term_at > s->grace_s)
		kill(s->pid, SIGKILL);
}

static void close_output(supervised *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

void supervisor_reap(supervised *s, supervisor_stop_fn *stop, void *ud, int *status, struct rusage *ru)
{
	int st = 0;
	struct rusage use = { 0 };
	useconds_t nap = 500;
	close_output(s);
	for (;;) {
		pid_t w = wait4(s->pid, &st, WNOHANG, &use);
		if (w == s->pid || (w < 0 && errno != EINTR))
			break;
		if (stop && stop(ud) && !s->term_at)
			supervisor_term(s);
		else
			supervisor_escalate(s);
		usleep(nap);
		nap = nap < 50000 ? nap * 2 : 50000;
	}
	if (status)
		*status = st;
	if (ru)
		*ru = use;
}

void supervisor_kill(supervised *s, int *status)
{
	int st = 0;
	close_output(s);
	if (waitpid(s->pid, &st, WNOHANG) == 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &st, 0);
	}
	if (status)
		*status = st;
}
