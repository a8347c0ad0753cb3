/*
 * runner_probe: the devices of this node, from `worker --devices` run once
 * at start in a thread of its own (runner_impl.h): drivers are loaded only
 * in that child, never in the daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "algo/names.h"
#include "base/log.h"
#include "jobs/runner_impl.h"
#include "util/rc_clock.h"
#include "jobs/supervisor.h"

void runner_engines(runner *r, char *buf, size_t n)
{
	json_t *devs = runner_devices(r);
	int cl = 0, cuda = 0, e;
	size_t i;
	json_t *d;
	json_array_foreach(devs, i, d) { /* the device's engine word, parsed as the spec's are (names.h) */
		if (rc_name_parse(RC_NAMES_ENGINE, json_string_value(json_object_get(d, "engine")), &e))
			continue;
		cl |= e == RC_ENGINE_OPENCL;
		cuda |= e == RC_ENGINE_CUDA;
	}
	json_decref(devs);
	snprintf(buf, n, "%s%s%s%s%s", cl ? rc_name_str(RC_NAMES_ENGINE, RC_ENGINE_OPENCL) : "", cl ? "," : "",
		 cuda ? rc_name_str(RC_NAMES_ENGINE, RC_ENGINE_CUDA) : "", cuda ? "," : "",
		 rc_name_str(RC_NAMES_ENGINE, RC_ENGINE_CPU));
}

json_t *runner_devices(runner *r)
{
	pthread_mutex_lock(&r->lock);
	json_t *d = json_incref(r->devices);
	pthread_mutex_unlock(&r->lock);
	return d;
}

int runner_probed(runner *r)
{
	pthread_mutex_lock(&r->lock);
	int p = r->probed;
	pthread_mutex_unlock(&r->lock);
	return p;
}

#define PROBE_TIMEOUT_S 20.0 /* CUDA + OpenCL enumeration; /readyz waits for it */

/* Runs `worker --devices` and keeps its list.  Drivers are loaded only in
 * that child, never in the daemon. */
static void probe_devices(runner *r)
{
	json_t *devs = NULL;
	const char *prog = r->a->cfg->probe_worker[0] ? r->a->cfg->probe_worker : r->a->cfg->worker;
	char *argv[] = { (char *)prog, "--devices", NULL };
	supervisor_spec spec = { .prog = prog, .argv = argv, .out_fd = 1, .grace_s = 0 };
	supervised *s = malloc(sizeof *s); /* its buffer is the whole answer */
	if (s && supervisor_spawn(s, &spec, NULL) == 0) {
		pthread_mutex_lock(&r->lock);
		r->probe_pid = s->pid;
		pthread_mutex_unlock(&r->lock);
		double t0 = rc_now_s();
		while (s->used < sizeof s->out - 1 && rc_now_s() - t0 < PROBE_TIMEOUT_S) {
			if (supervisor_poll(s, 250) <= 0)
				continue;
			if (!supervisor_read(s))
				break;
		}
		supervisor_kill(s, NULL);
		pthread_mutex_lock(&r->lock);
		r->probe_pid = 0;
		pthread_mutex_unlock(&r->lock);
		json_t *j = json_loads(s->out, 0, NULL);
		if (json_is_array(json_object_get(j, "devices")))
			devs = json_incref(json_object_get(j, "devices"));
		json_decref(j);
	}
	free(s);
	if (devs)
		rlog(LOG_P_INFO, "devices_probed", "count=%zu", json_array_size(devs));
	else
		rlog(LOG_P_WARNING, "devices_probe_failed", "probe=%s (listing the CPU only)",
		     r->a->cfg->probe_worker[0] ? r->a->cfg->probe_worker : r->a->cfg->worker);
	pthread_mutex_lock(&r->lock);
	r->devices = devs;
	r->probed = 1;
	pthread_mutex_unlock(&r->lock);
}

static void *probe_main(void *arg)
{
	probe_devices(arg);
	return NULL;
}

int runner_probe_start(runner *r)
{
	/* Its own thread: a slow driver start delays /readyz, not the queue. */
	if (pthread_create(&r->probe_thread, NULL, probe_main, r) == 0)
		r->probe_started = 1;
	else
		r->probed = 1;
	return 0;
}

void runner_probe_stop(runner *r)
{
	if (!r->probe_started)
		return;
	pthread_mutex_lock(&r->lock);
	if (r->probe_pid > 0)
		kill(r->probe_pid, SIGKILL);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->probe_thread, NULL);
	r->probe_started = 0;
}
