/*
 * prom: the daemon's counters for GET /metrics (Prometheus text format
 * 0.0.4).  Counters are atomics or behind one mutex; gauges that the store
 * knows (jobs by state, queue depth) are read from it at scrape time.
 */
#ifndef RC_PROM_H
#define RC_PROM_H

#include <stdint.h>

#include "store/store.h"

typedef struct metrics metrics;

int metrics_new(metrics **ret);
void metrics_free(metrics *m);

void metrics_bytes_received(metrics *m, uint64_t n);
void metrics_request(metrics *m, unsigned status);
void metrics_iteration(metrics *m, double seconds);
void metrics_device_busy(metrics *m, const char *device, double seconds);
void metrics_job_finished(metrics *m, job_state s);
void metrics_worker_crash(metrics *m);

/* Renders everything; malloc'd text or NULL. */
char *metrics_render(metrics *m, store *st);

#endif
