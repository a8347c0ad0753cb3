/*
 * recond: the CT reconstruction daemon.  Wires config, store, event hub,
 * metrics, auth, audit log, runner and HTTP together (app.h), then waits for
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

#include "app.h"
#include "http.h"
#include "log.h"

static void default_worker(config *c)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0) {
		snprintf(c->worker, sizeof c->worker, "recond-worker");
		return;
	}
	self[n] = '\0';
	snprintf(c->worker, sizeof c->worker, "%.1000s/recond-worker", dirname(self));
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
		default_worker(&cfg);
	if (access(cfg.worker, X_OK))
		rlog(LOG_P_WARNING, "worker_missing", "worker=%s error=\"%s\" (jobs will fail until it exists)", cfg.worker,
		     strerror(errno));
	if (!cfg.audit_log[0])
		snprintf(cfg.audit_log, sizeof cfg.audit_log, "%.1000s/audit.log", cfg.store);

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
	memset(&a, 0, sizeof a);
	a.cfg = &cfg;
	http *h = NULL;
	int exit_code = 1, requeued = 0, orphans = 0, port = 0;
	if (store_open(cfg.store, &a.st, &err) || store_recover(a.st, &requeued, &orphans, &err)) {
		rlog(LOG_P_ERR, "store_failed", "store=%s error=\"%s\"", cfg.store, err.msg);
		goto out;
	}
	rlog(LOG_P_INFO, "store_open", "store=%s requeued=%d orphans_removed=%d", cfg.store, requeued, orphans);
	if (hub_new(&a.hub) || metrics_new(&a.met) || auth_new(&a.auth)) {
		rlog(LOG_P_ERR, "startup_failed", "error=\"out of memory\"");
		goto out;
	}
	if (auth_load(a.auth, cfg.tokens, &err)) {
		rlog(LOG_P_ERR, "tokens_invalid", "error=\"%s\"", err.msg);
		goto out;
	}
	if (audit_open(cfg.audit_log, &a.audit))
		rlog(LOG_P_WARNING, "audit_unavailable", "path=%s error=\"%s\"", cfg.audit_log, strerror(errno));
	if (runner_new(&a, &a.run, &err) || runner_start(a.run, &err)) {
		rlog(LOG_P_ERR, "runner_failed", "error=\"%s\"", err.msg);
		goto out;
	}
	if (http_start(&a, &h, &port, &err)) {
		rlog(LOG_P_ERR, "listen_failed", "error=\"%s\"", err.msg);
		fprintf(stderr, "recond: %s\n", err.msg);
		goto out;
	}
	if (cfg.port_file[0])
		write_port_file(cfg.port_file, port);
	rlog(LOG_P_INFO, "listening", "addr=%s port=%d tls=%s tokens=%d worker=%s", cfg.listen_host, port,
	     cfg.tls_cert[0] ? "yes" : "no", auth_count(a.auth), cfg.worker);
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
			json_t *t = NULL;
			if (config_reload_tokens(&cfg, &t, &err) || auth_load(a.auth, t, &err))
				rlog(LOG_P_ERR, "tokens_reload_failed", "error=\"%s\" (the previous tokens stay)", err.msg);
			else
				rlog(LOG_P_INFO, "tokens_reloaded", "tokens=%d", auth_count(a.auth));
			json_decref(t);
		} else if (sig == SIGTERM || sig == SIGINT) {
			rlog(LOG_P_INFO, "stopping", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
			break;
		}
		/* Keep-alives only while the runner loop is alive: a wedged runner
		 * lets systemd restart the daemon. */
		if (wd && runner_healthy(a.run))
			sd_notify(0, "WATCHDOG=1");
	}
	sd_notify(0, "STOPPING=1\nSTATUS=stopping");
	atomic_store(&a.stopping, 1);
	hub_shutdown(a.hub);
	runner_stop(a.run);
	http_stop(h, 5.0);
	h = NULL;
	exit_code = 0;
	rlog(LOG_P_INFO, "stopped", "clean=yes");
out:
	http_stop(h, 0);
	runner_stop(a.run);
	runner_free(a.run);
	audit_close(a.audit);
	auth_free(a.auth);
	metrics_free(a.met);
	hub_free(a.hub);
	store_close(a.st);
	config_clear(&cfg);
	return exit_code;
}
