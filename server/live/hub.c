/* hub: ring of recent job events with a condition variable (hub.h). */
#include "live/hub.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct hub_event {
	unsigned long long seq;
	char id[37];
	char ev[32];
	char *data;
};

struct hub {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned long long head;  /* seq of the newest event; events are 1-based */
	int shutdown;
	struct hub_event ring[HUB_RING];
};

int hub_new(hub **ret)
{
	hub *h = calloc(1, sizeof *h);
	if (!h)
		return RC_ENOMEM;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cond, &ca);
	pthread_condattr_destroy(&ca);
	*ret = h;
	return 0;
}

void hub_free(hub *h)
{
	if (!h)
		return;
	for (int i = 0; i < HUB_RING; i++)
		free(h->ring[i].data);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

void hub_publish(hub *h, const char *id, const char *event, const char *data)
{
	char *copy = strdup(data ? data : "{}");
	if (!copy)
		return;
	pthread_mutex_lock(&h->lock);
	struct hub_event *e = &h->ring[(h->head + 1) % HUB_RING];
	free(e->data);
	e->seq = ++h->head;
	strncpy(e->id, id, sizeof e->id - 1);
	e->id[sizeof e->id - 1] = '\0';
	strncpy(e->ev, event, sizeof e->ev - 1);
	e->ev[sizeof e->ev - 1] = '\0';
	e->data = copy;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

void hub_shutdown(hub *h)
{
	pthread_mutex_lock(&h->lock);
	h->shutdown = 1;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

unsigned long long hub_head(hub *h)
{
	pthread_mutex_lock(&h->lock);
	unsigned long long s = h->head;
	pthread_mutex_unlock(&h->lock);
	return s;
}

int hub_next(hub *h, const char *id, unsigned long long *seq, int timeout_ms,
	     char ev[32], char **data)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	int rc = RC_ENOTFOUND;
	pthread_mutex_lock(&h->lock);
	for (;;) {
		if (h->shutdown) {
			rc = RC_ECANCELLED;
			break;
		}
		if (h->head > *seq && h->head - *seq > HUB_RING) {
			*seq = h->head;
			rc = RC_ETOOBIG;
			break;
		}
		int found = 0;
		while (*seq < h->head) {
			struct hub_event *e = &h->ring[(*seq + 1) % HUB_RING];
			(*seq)++;
			if (!strcmp(e->id, id)) {
				memcpy(ev, e->ev, 32);
				*data = strdup(e->data);
				found = 1;
				break;
			}
		}
		if (found) {
			rc = *data ? 0 : RC_ENOMEM;
			break;
		}
		if (pthread_cond_timedwait(&h->cond, &h->lock, &dl) == ETIMEDOUT) {
			rc = RC_ENOTFOUND;
			break;
		}
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}
