/* node: the heartbeat and lease-expiry thread (node.h). */
#include "jobs/node.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jobs/app.h"
#include "backend/cpu/engine_cpu.h"
#include "algo/names.h"
#include "device_json.h"
#include "base/log.h"
#include "jobs/runner.h"
#include "util/rc_clock.h"

struct node_thread {
	app *a;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop;
};

json_t *node_devices_json(app *a)
{
	const char *state = runner_busy(a->run) ? "busy" : "idle";
	char model_dir[4300];
	snprintf(model_dir, sizeof model_dir, "%.4200s/models", a->state_dir);
	json_t *probed = runner_devices(a->run);
	json_t *out = json_array();
	size_t i;
	json_t *d;
	json_array_foreach(probed, i, d) {
		json_t *copy = json_deep_copy(d);
		const char *id = json_string_value(json_object_get(copy, "device_id"));
		json_object_set_new(copy, "state", json_string(state));
		json_object_set_new(copy, "models", device_models_json(id ? model_dir : NULL, id));
		json_array_append_new(out, copy);
	}
	json_decref(probed);
	if (json_array_size(out) == 0) { /* not probed (yet): the host CPU */
		char id[128], name[160];
		rc_cpu_identity(id, sizeof id, name, sizeof name);
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		json_array_append_new(out, json_pack("{sssssssssssIsissso}", "name", name, "engine",
						     rc_name_str(RC_NAMES_ENGINE, RC_ENGINE_CPU), "type", "cpu",
						     "device_id", id, "hw_group", "host-cpu", "memory_bytes",
						     (json_int_t)pages * psz, "compute_units",
						     (int)sysconf(_SC_NPROCESSORS_ONLN), "state", state, "models",
						     device_models_json(model_dir, id)));
	}
	return out;
}

static unsigned engine_bits(json_t *devs)
{
	unsigned bits = 0;
	size_t i;
	json_t *d;
	int e;
	json_array_foreach(devs, i, d) {
		const char *name = json_string_value(json_object_get(d, "engine"));
		if (name && !rc_name_parse(RC_NAMES_ENGINE, name, &e))
			bits |= 1u << e;
	}
	return bits;
}

int node_engines_offered(app *a, unsigned *ret_bits, int *ret_probed, rc_err *err)
{
	/* probed before the devices: the probe may end between the two reads
	 * (two lock holds), and devices read after a "probed" are the probe's;
	 * the other order could pair the empty list from before the probe with
	 * probed = 1 and refuse (422) a device this node has */
	int probed = runner_probed(a->run);
	json_t *own = runner_devices(a->run);
	unsigned bits = engine_bits(own);
	json_decref(own);
	if (store_is_shared(a->st)) {
		node_row *rows = NULL;
		int n = 0;
		if (store_nodes_list(a->st, &rows, &n, err))
			return err->code;
		for (int i = 0; i < n; i++) {
			json_t *devs = rows[i].age_s < NODE_ALIVE_S && rows[i].devices
					       ? json_loads(rows[i].devices, 0, NULL)
					       : NULL;
			bits |= engine_bits(devs);
			json_decref(devs);
			node_row_clear(&rows[i]);
		}
		free(rows);
	}
	*ret_bits = bits;
	*ret_probed = probed;
	return 0;
}

static void heartbeat(app *a)
{
	json_t *devs = node_devices_json(a);
	char *text = json_dumps(devs, JSON_COMPACT);
	char running[37] = "";
	rc_err err;
	runner_current(a->run, running);
	if (text && store_node_heartbeat(a->st, text, running, a->started, &err))
		rlog(LOG_P_WARNING, "heartbeat_failed", "node=%s error=\"%s\"", store_node(a->st), rlog_q(err.msg));
	free(text);
	json_decref(devs);
}

static void expire(app *a)
{
	int n = 0;
	rc_err err;
	if (store_lease_expire(a->st, a->cfg->max_attempts, &n, &err))
		rlog(LOG_P_WARNING, "lease_expiry_failed", "node=%s error=\"%s\"", store_node(a->st), rlog_q(err.msg));
	else if (n) {
		rlog(LOG_P_WARNING, "leases_expired", "node=%s count=%d max_attempts=%d", store_node(a->st), n,
		     a->cfg->max_attempts);
		runner_kick(a->run); /* queued again: maybe for this node */
	}
}

static void *node_main(void *arg)
{
	node_thread *n = arg;
	app *a = n->a;
	int shared = store_is_shared(a->st);
	double expire_every = a->cfg->lease_s / 2, last_beat = 0, last_expire = 0;
	for (;;) {
		double now = rc_now_s();
		if (now - last_beat >= NODE_HEARTBEAT_S) {
			heartbeat(a);
			last_beat = now;
		}
		if (shared && now - last_expire >= expire_every) {
			expire(a);
			last_expire = now;
		}
		pthread_mutex_lock(&n->lock);
		if (!n->stop) {
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_nsec += 250000000L; /* the shorter period's granularity */
			if (dl.tv_nsec >= 1000000000L) {
				dl.tv_sec++;
				dl.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&n->cond, &n->lock, &dl);
		}
		int stop = n->stop;
		pthread_mutex_unlock(&n->lock);
		if (stop)
			break;
	}
	return NULL;
}

int node_start(app *a, node_thread **ret, rc_err *err)
{
	node_thread *n = calloc(1, sizeof *n);
	if (!n)
		return rc_fail(err, RC_ENOMEM, "", "out of memory");
	n->a = a;
	pthread_mutex_init(&n->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cond, &ca);
	pthread_condattr_destroy(&ca);
	int e = pthread_create(&n->thread, NULL, node_main, n);
	if (e) {
		pthread_cond_destroy(&n->cond);
		pthread_mutex_destroy(&n->lock);
		free(n);
		return rc_fail(err, RC_EINTERNAL, "", "cannot start the node thread: %s", strerror(e));
	}
	*ret = n;
	return 0;
}

void node_stop(node_thread *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->stop = 1;
	pthread_cond_signal(&n->cond);
	pthread_mutex_unlock(&n->lock);
	pthread_join(n->thread, NULL);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	free(n);
}
