/*
 * runner_mpi: a job of execution.ranks N > 1 (docs/cluster.md).  Its worker
 * is recond-worker-mpi under `mpirun -np N [--host H] [--hostfile F] ARGS`;
 * mpirun's standard output is the progress pipe (Open MPI's ranks do not
 * inherit the daemon's fd 3; rank 0 alone writes lines) and its standard
 * error, with every rank's, goes to the job directory's ranks.log, which
 * names the rank that ended a failed job (runner_mpi_blame).  No live
 * volume and no view stamps: a job across ranks neither previews nor
 * streams (its ranks may be on other machines).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "jobs/runner_impl.h"
#include "jobs/supervisor.h"
#include "spec.h"

#define MPI_MAX_ARGS 64

/* Whether prog runs: a path, or a name found on PATH (then replaced by
 * its path: the supervisor execs a path). */
static int runnable(char *prog, size_t size)
{
	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0;
	const char *path = getenv("PATH");
	char dir[4096], full[8200];
	while (path && *path) {
		size_t n = strcspn(path, ":");
		snprintf(dir, sizeof dir, "%.*s", (int)(n < sizeof dir ? n : sizeof dir - 1), path);
		snprintf(full, sizeof full, "%s/%s", dir[0] ? dir : ".", prog);
		if (access(full, X_OK) == 0 && strlen(full) < size) {
			snprintf(prog, size, "%s", full);
			return 1;
		}
		path += n + (path[n] == ':');
	}
	return 0;
}

void runner_mpi_check(config *c)
{
	c->mpi_off[0] = '\0';
	if (!c->mpi_worker[0]) {
		char w[1024];
		/* the real worker's directory (next to recond unless configured),
		 * whatever stand-in --worker names */
		snprintf(w, sizeof w, "%s", c->probe_worker[0] ? c->probe_worker : c->worker);
		snprintf(c->mpi_worker, sizeof c->mpi_worker, "%.1000s/recond-worker-mpi", dirname(w));
	}
	if (c->mpi_max_ranks <= 0)
		return;
	if (!runnable(c->mpirun, sizeof c->mpirun))
		snprintf(c->mpi_off, sizeof c->mpi_off, "the MPI launcher %.150s is not installed (openmpi-bin)", c->mpirun);
	else if (access(c->mpi_worker, X_OK))
		snprintf(c->mpi_off, sizeof c->mpi_off, "the MPI worker %.150s is missing (built where libopenmpi-dev is)",
			 c->mpi_worker);
	if (c->mpi_off[0])
		rlog(LOG_P_WARNING, "mpi_unavailable", "mpi_max_ranks=%d error=\"%s\" (jobs with execution.ranks > 1 are refused)",
		     c->mpi_max_ranks, rlog_q(c->mpi_off));
	else
		rlog(LOG_P_INFO, "mpi_ready", "mpi_max_ranks=%d mpirun=%s worker=%s hosts=\"%s\" hostfile=\"%s\"",
		     c->mpi_max_ranks, c->mpirun, c->mpi_worker, rlog_q(c->mpi_hosts), rlog_q(c->mpi_hostfile));
}

int runner_mpi_ranks(const char *dir)
{
	char path[4200];
	job_spec *s = NULL;
	snprintf(path, sizeof path, "%s/spec.json", dir);
	if (job_spec_load(path, &s, NULL))
		return 1; /* the worker reports the spec's problem itself */
	int n = s->ranks;
	job_spec_free(s);
	return n > 1 ? n : 1;
}

int runner_mpi_offered(const config *cfg, int ranks, rc_err *err)
{
	if (ranks <= 1)
		return 0;
	if (cfg->mpi_max_ranks <= 0)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.ranks",
			       "execution.ranks %d asks for MPI, which this daemon does not run (its operator sets "
			       "--mpi-max-ranks, docs/cluster.md): leave execution.ranks out or 1", ranks);
	if (cfg->mpi_off[0])
		return rc_fail(err, RC_EUNSUPPORTED, "execution.ranks",
			       "execution.ranks %d asks for MPI, which is unavailable here: %s; leave execution.ranks "
			       "out or 1", ranks, cfg->mpi_off);
	if (ranks > cfg->mpi_max_ranks)
		return rc_fail(err, RC_EUNSUPPORTED, "execution.ranks",
			       "execution.ranks %d is more than this daemon allows (mpi_max_ranks %d)", ranks,
			       cfg->mpi_max_ranks);
	return 0;
}

int runner_mpi_local(const config *cfg)
{
	return !cfg->mpi_hosts[0] && !cfg->mpi_hostfile[0];
}

int runner_mpi_spawn(runner *r, const char *dir, int ranks, supervised *w, rc_err *err)
{
	const config *c = r->a->cfg;
	char np[16], threads[16], mcache[32], logpath[4300], args[1024];
	char *argv[MPI_MAX_ARGS + 16];
	int n = 0;
	snprintf(np, sizeof np, "%d", ranks);
	snprintf(threads, sizeof threads, "%d", c->worker_threads);
	snprintf(mcache, sizeof mcache, "%llu",
		 (unsigned long long)(c->matrix_cache_bytes > INT64_MAX ? INT64_MAX : c->matrix_cache_bytes));
	snprintf(args, sizeof args, "%s", c->mpi_args);
	argv[n++] = (char *)c->mpirun;
	argv[n++] = "-np";
	argv[n++] = np;
	if (c->mpi_hosts[0]) {
		argv[n++] = "--host";
		argv[n++] = (char *)c->mpi_hosts;
	}
	if (c->mpi_hostfile[0]) {
		argv[n++] = "--hostfile";
		argv[n++] = (char *)c->mpi_hostfile;
	}
	char *save = NULL;
	for (char *t = strtok_r(args, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		if (n >= MPI_MAX_ARGS)
			return rc_fail(err, RC_EINVAL, "mpi_args", "mpi_args has more than %d words", MPI_MAX_ARGS - 8);
		argv[n++] = t;
	}
	argv[n++] = (char *)c->mpi_worker;
	argv[n++] = "--threads";
	argv[n++] = threads;
	argv[n++] = "--state-dir";
	argv[n++] = r->a->state_dir;
	argv[n++] = "--matrix-cache-bytes";
	argv[n++] = mcache;
	argv[n++] = (char *)dir;
	argv[n] = NULL;
	snprintf(logpath, sizeof logpath, "%s/ranks.log", dir);
	/* >= 10: supervisor_spawn moves it to 2 (supervisor.h) */
	int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640), lfd = -1;
	if (fd >= 0) {
		lfd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
		close(fd);
	}
	if (lfd < 0)
		return rc_fail(err, RC_EIO, "", "cannot open %s: %s", logpath, strerror(errno));
	supervisor_spec spec = { .prog = c->mpirun, .argv = argv, .out_fd = 1, .fds = { { lfd, 2 } }, .nfds = 1,
				 .grace_s = 10.0 };
	int rc = supervisor_spawn(w, &spec, err);
	close(lfd);
	if (!rc)
		rlog(LOG_P_INFO, "job_ranks", "dir=%s ranks=%d mpirun_pid=%d worker=%s", dir, ranks, (int)w->pid,
		     c->mpi_worker);
	return rc;
}

/* The first number after pat in s, or -1. */
static int number_after(const char *s, const char *pat)
{
	const char *p = strstr(s, pat);
	return p ? atoi(p + strlen(pat)) : -1;
}

int runner_mpi_blame(const char *dir, int ranks, char *msg, size_t n)
{
	char path[4300], buf[16384];
	snprintf(path, sizeof path, "%s/ranks.log", dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t got = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[got] = '\0';
	/* Open MPI 4's words: "mpirun noticed that process rank 1 with PID
	 * 123 on node n1 exited on signal 9 (Killed)." (a rank that died);
	 * "MPI_ABORT was invoked on rank 1" (a rank that failed, after its
	 * own "recond-worker rank 1: ..." line) */
	int rank = number_after(buf, "process rank ");
	if (rank >= 0) {
		int sig = number_after(buf, "exited on signal ");
		const char *node = strstr(buf, " on node ");
		char host[128] = "?";
		if (node)
			sscanf(node + 9, "%127[^ \n]", host);
		if (sig > 0)
			snprintf(msg, n, "rank %d of %d (on node %s) was killed by signal %d; the job's other ranks were "
				 "stopped", rank, ranks, host, sig);
		else
			snprintf(msg, n, "rank %d of %d (on node %s) exited before the job ended; the job's other ranks "
				 "were stopped", rank, ranks, host);
		return 1;
	}
	if ((rank = number_after(buf, "MPI_ABORT was invoked on rank ")) >= 0) {
		char pat[64], line[400] = "";
		snprintf(pat, sizeof pat, "recond-worker rank %d: ", rank);
		const char *p = strstr(buf, pat);
		if (p)
			sscanf(p + strlen(pat), "%399[^\n]", line);
		snprintf(msg, n, "rank %d of %d failed%s%s", rank, ranks, line[0] ? ": " : "", line);
		return 1;
	}
	return 0;
}
