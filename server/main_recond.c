/*
 * recond: the CT reconstruction daemon.  Wires config, store, event hub,
 * metrics, auth, audit log, runner and HTTP together (daemon.h), then waits for
 * signals in the main thread (every other thread has them blocked):
 *   SIGTERM/SIGINT  stop: refuse new requests, let requests in flight finish
 *                   (an unfinished upload is not acknowledged), stop the
 *                   running job and put it back in the queue;
 *   SIGHUP          reload the bearer tokens.
 * With systemd (Type=notify) it reports READY/STATUS and, while the runner
 * loop is alive, WATCHDOG keep-alives.
 */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "http/http.h"
#include "base/log.h"
#include "jobs/runner.h"

/* recond-worker next to this binary. */
static void default_worker(char *dst, size_t n)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len <= 0) {
		snprintf(dst, n, "recond-worker");
		return;
	}
	self[len] = '\0';
	snprintf(dst, n, "%.1000s/recond-worker", dirname(self));
}

static void write_port_file(const char *path, int port)
{
	char tmp[1100];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return;
	fprintf(f, "%d\n", port);
	fclose(f);
	rename(tmp, path);
}

int main(int argc, char **argv)
{
	config cfg;
	rc_err err;
	rc_err_clear(&err);
	config_default(&cfg);
	int rc = config_parse_args(&cfg, argc, argv, &err);
	if (rc == 1)
		return 0;
	if (rc) {
		fprintf(stderr, "recond: %s\n", err.msg);
		return 2;
	}
	if (!cfg.worker[0])
		default_worker(cfg.worker, sizeof cfg.worker);
	/* The device probe runs the real worker even when --worker names a
	 * stand-in (tests), so that stand-ins only ever see job directories. */
	if (!cfg.probe_worker[0])
		default_worker(cfg.probe_worker, sizeof cfg.probe_worker);
	runner_mpi_check(&cfg); /* execution.ranks > 1: mpirun and recond-worker-mpi */
	if (access(cfg.worker, X_OK))
		rlog(LOG_P_WARNING, "worker_missing", "worker=%s error=\"%s\" (jobs will fail until it exists)", cfg.worker,
		     strerror(errno));
	/* the audit log's default is the node's state directory (daemon.c) */

	/* Signals are taken by sigtimedwait below; every thread created from
	 * here on inherits the mask. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	app a;
	int port = 0;
	if (daemon_start(&a, &cfg, &port, &err)) {
		rlog(LOG_P_ERR, "startup_failed", "error=\"%s\"", rlog_q(err.msg));
		fprintf(stderr, "recond: %s\n", err.msg);
		config_clear(&cfg);
		return 1;
	}
	if (cfg.port_file[0])
		write_port_file(cfg.port_file, port);
	rlog(LOG_P_INFO, "listening", "addr=%s port=%d tls=%s tokens=%d worker=%s", cfg.listen_host, port,
	     cfg.tls_cert[0] ? "yes" : "no", auth_count(a.auth), cfg.worker);
	uint64_t machine = 0, budget = config_memory_budget(&cfg, &machine);
	rlog(LOG_P_INFO, "memory_budget", "bytes=%llu machine=%llu from=%s", (unsigned long long)budget,
	     (unsigned long long)machine, cfg.memory_limit ? "memory_limit" : budget ? "machine" : "none");
	sd_notifyf(0, "READY=1\nSTATUS=serving on %s:%d", cfg.listen_host, port);

	uint64_t wd_usec = 0;
	int wd = sd_watchdog_enabled(0, &wd_usec) > 0;
	long tick_ms = wd ? (long)(wd_usec / 2000) : 1000;
	if (tick_ms > 1000 || tick_ms <= 0)
		tick_ms = 1000;
	for (;;) {
		struct timespec to = { tick_ms / 1000, (tick_ms % 1000) * 1000000L };
		siginfo_t si;
		int sig = sigtimedwait(&sigs, &si, &to);
		if (sig == SIGHUP) {
			if (daemon_reload_tokens(&a, &err))
				rlog(LOG_P_ERR, "tokens_reload_failed", "error=\"%s\" (the previous tokens stay)", rlog_q(err.msg));
			else
				rlog(LOG_P_INFO, "tokens_reloaded", "tokens=%d", auth_count(a.auth));
		} else if (sig == SIGTERM || sig == SIGINT) {
			rlog(LOG_P_INFO, "stopping", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
			break;
		}
		/* Keep-alives only while the runner loop is alive: a wedged runner
		 * lets systemd restart the daemon. */
		if (wd && runner_healthy(a.run))
			sd_notify(0, "WATCHDOG=1");
		int counts[JOB_NSTATES];
		if (store_counts(a.st, counts, NULL) == 0)
			sd_notifyf(0, "STATUS=serving on %s:%d; %d running, %d queued, %d receiving", cfg.listen_host, port,
				   counts[JOB_RUNNING], counts[JOB_QUEUED], counts[JOB_RECEIVING] + counts[JOB_CREATED]);
	}
	sd_notify(0, "STOPPING=1\nSTATUS=stopping");
	daemon_stop(&a, 5.0);
	rlog(LOG_P_INFO, "stopped", "clean=yes");
	config_clear(&cfg);
	return 0;
}
