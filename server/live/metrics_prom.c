/* prom: counters and the Prometheus text rendering (prom.h). */
#include "live/metrics_prom.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Iteration times span a 64^3 SART step on one core (~0.05 s) to a 512^3
 * CGLS step (~minutes): buckets spread over that range. */
static const double iter_buckets[] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300 };
#define NBUCKETS (sizeof iter_buckets / sizeof iter_buckets[0])
#define MAX_DEV 16

struct metrics {
	pthread_mutex_t lock;
	uint64_t bytes;
	uint64_t req[6];          /* by status class 1xx..5xx, [0] other */
	uint64_t iter_count, iter_bucket[NBUCKETS];
	double iter_sum;
	int ndev;
	char dev[MAX_DEV][32];
	double busy[MAX_DEV];
	uint64_t finished[JOB_NSTATES];
	uint64_t crashes;
};

int metrics_new(metrics **ret)
{
	metrics *m = calloc(1, sizeof *m);
	if (!m)
		return RC_ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	*ret = m;
	return 0;
}

void metrics_free(metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void metrics_bytes_received(metrics *m, uint64_t n)
{
	pthread_mutex_lock(&m->lock);
	m->bytes += n;
	pthread_mutex_unlock(&m->lock);
}

void metrics_request(metrics *m, unsigned status)
{
	pthread_mutex_lock(&m->lock);
	m->req[status >= 100 && status < 600 ? status / 100 : 0]++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_iteration(metrics *m, double s)
{
	pthread_mutex_lock(&m->lock);
	m->iter_count++;
	m->iter_sum += s;
	for (size_t i = 0; i < NBUCKETS; i++)
		if (s <= iter_buckets[i])
			m->iter_bucket[i]++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_device_busy(metrics *m, const char *device, double s)
{
	pthread_mutex_lock(&m->lock);
	int i;
	for (i = 0; i < m->ndev; i++)
		if (!strcmp(m->dev[i], device))
			break;
	if (i == m->ndev && m->ndev < MAX_DEV) {
		snprintf(m->dev[i], sizeof m->dev[i], "%s", device);
		m->ndev++;
	}
	if (i < m->ndev)
		m->busy[i] += s;
	pthread_mutex_unlock(&m->lock);
}

void metrics_job_finished(metrics *m, job_state s)
{
	pthread_mutex_lock(&m->lock);
	if ((unsigned)s < JOB_NSTATES)
		m->finished[s]++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_worker_crash(metrics *m)
{
	pthread_mutex_lock(&m->lock);
	m->crashes++;
	pthread_mutex_unlock(&m->lock);
}

struct buf { char *p; size_t len, cap; int oom; };

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		char *np = realloc(b->p, b->cap * 2 + (size_t)n);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = b->cap * 2 + (size_t)n;
	}
}

char *metrics_render(metrics *m, store *st)
{
	struct buf b = { malloc(4096), 0, 4096, 0 };
	if (!b.p)
		return NULL;
	int counts[JOB_NSTATES];
	int have = st && store_counts(st, counts, NULL) == 0;
	bprintf(&b, "# HELP recond_jobs Jobs in the store by state.\n# TYPE recond_jobs gauge\n");
	for (int s = 0; s < JOB_NSTATES; s++)
		bprintf(&b, "recond_jobs{state=\"%s\"} %d\n", job_state_name((job_state)s), have ? counts[s] : 0);
	bprintf(&b, "# HELP recond_queue_depth Jobs waiting to run.\n# TYPE recond_queue_depth gauge\n");
	bprintf(&b, "recond_queue_depth %d\n", have ? counts[JOB_QUEUED] : 0);
	bprintf(&b, "# HELP recond_store_up Whether the store answered (the job gauges are 0 when not).\n"
		    "# TYPE recond_store_up gauge\nrecond_store_up %d\n", have);
	if (st) {
		/* which node of a cluster answered: every series of this text is its */
		char name[2 * 64 + 1], *o = name;
		for (const char *p = store_node(st); *p && o < name + sizeof name - 2; p++) {
			if (*p == '\\' || *p == '"')
				*o++ = '\\';
			*o++ = *p == '\n' ? ' ' : *p;
		}
		*o = '\0';
		bprintf(&b, "# HELP recond_node_info The node that serves these metrics and its store's backend.\n"
			    "# TYPE recond_node_info gauge\nrecond_node_info{node=\"%s\",backend=\"%s\"} 1\n", name,
			store_backend_name(st));
	}
	pthread_mutex_lock(&m->lock);
	bprintf(&b, "# HELP recond_bytes_received_total Projection bytes stored.\n# TYPE recond_bytes_received_total counter\n");
	bprintf(&b, "recond_bytes_received_total %llu\n", (unsigned long long)m->bytes);
	bprintf(&b, "# HELP recond_requests_total HTTP requests answered by status class.\n# TYPE recond_requests_total counter\n");
	for (int c = 1; c < 6; c++)
		bprintf(&b, "recond_requests_total{code=\"%dxx\"} %llu\n", c, (unsigned long long)m->req[c]);
	bprintf(&b, "# HELP recond_iteration_seconds Wall time of one reconstruction iteration.\n"
		    "# TYPE recond_iteration_seconds histogram\n");
	for (size_t i = 0; i < NBUCKETS; i++)
		bprintf(&b, "recond_iteration_seconds_bucket{le=\"%g\"} %llu\n", iter_buckets[i],
			(unsigned long long)m->iter_bucket[i]);
	bprintf(&b, "recond_iteration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)m->iter_count);
	bprintf(&b, "recond_iteration_seconds_sum %.6f\nrecond_iteration_seconds_count %llu\n", m->iter_sum,
		(unsigned long long)m->iter_count);
	bprintf(&b, "# HELP recond_device_busy_seconds_total Seconds each device spent running jobs.\n"
		    "# TYPE recond_device_busy_seconds_total counter\n");
	for (int i = 0; i < m->ndev; i++)
		bprintf(&b, "recond_device_busy_seconds_total{device=\"%s\"} %.3f\n", m->dev[i], m->busy[i]);
	bprintf(&b, "# HELP recond_jobs_finished_total Jobs that reached a final state since start.\n"
		    "# TYPE recond_jobs_finished_total counter\n");
	for (int s = JOB_SUCCEEDED; s < JOB_NSTATES; s++)
		bprintf(&b, "recond_jobs_finished_total{state=\"%s\"} %llu\n", job_state_name((job_state)s),
			(unsigned long long)m->finished[s]);
	bprintf(&b, "# HELP recond_worker_crashes_total Workers that died from a signal or without a report.\n"
		    "# TYPE recond_worker_crashes_total counter\n");
	bprintf(&b, "recond_worker_crashes_total %llu\n", (unsigned long long)m->crashes);
	pthread_mutex_unlock(&m->lock);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}
