/*
 * node: this daemon as one node of a cluster (docs/server.md, "Clusters").
 *
 * One thread: every NODE_HEARTBEAT_S it upserts the node's row (devices,
 * running job, start time, heartbeat; store_node_heartbeat), and with a
 * shared store (PostgreSQL) every lease_s / 2 it gives up the running jobs
 * whose lease passed, any node's (store_lease_expire): they go back to the
 * queue, or fail at max_attempts.  A store that cannot be reached only
 * delays both: the next tick tries again.
 */
#ifndef RC_NODE_H
#define RC_NODE_H

#include <jansson.h>

#include "util/rc_error.h"

#define NODE_HEARTBEAT_S 2.0
/* a node is alive while its heartbeat is younger than this */
#define NODE_ALIVE_S (3 * NODE_HEARTBEAT_S)

struct app;
typedef struct node_thread node_thread;

int node_start(struct app *a, node_thread **ret, rc_err *err);
/* Stops and frees the thread (NULL: nothing). */
void node_stop(node_thread *n);

/* This node's devices as GET /v1/devices lists them (a new array). */
json_t *node_devices_json(struct app *a);

/* Which device engines some node of the store offers now, as a bit set of
 * (1 << rc_engine_choice) over the devices' "engine" (cpu, opencl, cuda):
 * this daemon's own probe (runner_devices) and, with a shared store
 * (PostgreSQL), every alive node's row (its last heartbeat younger than
 * NODE_ALIVE_S).  *ret_probed: whether this daemon's probe has answered
 * (before, its own devices are unknown).  0, or the store's error. */
int node_engines_offered(struct app *a, unsigned *ret_bits, int *ret_probed, rc_err *err);

#endif
