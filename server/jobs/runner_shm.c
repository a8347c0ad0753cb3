/*
 * runner_shm: the running job's shared memory with its worker
 * (worker_proto.h, runner_impl.h): the live volume that previews read, and
 * for a streaming job the per-view stamps that tell the worker which views
 * are stored.
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

#include "base/log.h"
#include "jobs/runner_impl.h"
#include "util/rc_clock.h"

/* The job's shared memory for its worker (worker_proto.h): the live
 * volume, and for a streaming job that still misses views the stamps, with
 * every present view stamped.  The stamps are published before the store's
 * bitmap is read, so a view stored meanwhile is stamped by runner_views or
 * here, never by neither (and not by both: stamped_first).  Returns 0, 1 for
 * a streaming job whose stamps could not be made (it must not run: its
 * missing views would be zeros), or -1 (it runs without a live volume). */
int runner_share_memory(runner *r, const char *id, int *live_fd, int *stamp_fd)
{
	job_row row;
	rc_err err;
	*live_fd = *stamp_fd = -1;
	if (store_get(r->a->st, id, 0, &row, &err))
		return -1;
	int fd = memfd_create("recond-live", MFD_CLOEXEC), rc = -1;
	if (fd >= 0 && ftruncate(fd, (off_t)row.vol_bytes) == 0)
		*live_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (fd >= 0)
		close(fd);
	if (*live_fd < 0)
		goto out;
	pthread_mutex_lock(&r->lock);
	r->live_fd = *live_fd;
	r->live_gen = 0;
	pthread_mutex_unlock(&r->lock);
	rc = 0;
	if (!row.streaming || row.views_present >= row.views_expected)
		goto out;
	size_t bytes = sizeof(uint32_t) * (size_t)row.views_expected;
	fd = memfd_create("recond-views", MFD_CLOEXEC);
	if (fd >= 0 && ftruncate(fd, (off_t)bytes) == 0)
		*stamp_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (fd >= 0)
		close(fd);
	void *map = *stamp_fd >= 0 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *stamp_fd, 0) : MAP_FAILED;
	uint8_t *first = calloc((size_t)row.views_expected, 1);
	if (map == MAP_FAILED || !first) {
		if (map != MAP_FAILED)
			munmap(map, bytes);
		if (*stamp_fd >= 0)
			close(*stamp_fd);
		*stamp_fd = -1;
		free(first);
		rc = 1;
		goto out;
	}
	pthread_mutex_lock(&r->lock);
	r->stamp = map;
	r->stamped_first = first;
	r->nstamp = row.views_expected;
	r->last_view_at = rc_now_s();
	pthread_mutex_unlock(&r->lock);
	job_row_clear(&row);
	if (store_get(r->a->st, id, 1, &row, &err) == 0) {
		pthread_mutex_lock(&r->lock);
		for (int k = 0; k < r->nstamp; k++)
			if ((row.present[k >> 3] >> (k & 7)) & 1 && !atomic_load(&r->stamp[k])) {
				atomic_store(&r->stamp[k], r->next_stamp += 2);
				r->stamped_first[k] = 1;
			}
		/* a shared store: views stored through other nodes are seen by
		 * polling the bitmap from here on (stamp_from_store) */
		if (store_is_shared(r->a->st) && (r->seen = malloc(((size_t)r->nstamp + 7) / 8)))
			memcpy(r->seen, row.present, ((size_t)r->nstamp + 7) / 8);
		r->cleared_seen = row.views_cleared;
		pthread_mutex_unlock(&r->lock);
	}
out:
	job_row_clear(&row);
	return rc;
}

void runner_unshare_memory(runner *r, int stamp_fd)
{
	pthread_mutex_lock(&r->lock);
	if (r->live_fd >= 0)
		close(r->live_fd);
	r->live_fd = -1;
	r->live_gen = 0;
	if (r->stamp)
		munmap((void *)r->stamp, sizeof(uint32_t) * (size_t)r->nstamp);
	r->stamp = NULL;
	free(r->stamped_first);
	r->stamped_first = NULL;
	r->nstamp = 0;
	free(r->seen);
	r->seen = NULL;
	free(r->prog_json);
	r->prog_json = NULL;
	pthread_mutex_unlock(&r->lock);
	if (stamp_fd >= 0)
		close(stamp_fd);
}

int runner_live_volume(runner *r, const char *id, int *fd, unsigned long *generation)
{
	int rc = RC_ENOTFOUND;
	*fd = -1;
	*generation = 0;
	pthread_mutex_lock(&r->lock);
	if (!strcmp(r->current, id) && r->live_fd >= 0) {
		*fd = fcntl(r->live_fd, F_DUPFD_CLOEXEC, 0);
		*generation = r->live_gen;
		rc = *fd >= 0 ? 0 : RC_EIO;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void runner_views(runner *r, const char *id, int first, int last, int set)
{
	pthread_mutex_lock(&r->lock);
	if (r->stamp && !strcmp(r->current, id))
		r->last_view_at = rc_now_s(); /* a clear too: an upload has begun (runner_stream_waiting) */
	if (r->stamp && !strcmp(r->current, id))
		for (int k = first < 0 ? 0 : first; k < last && k < r->nstamp; k++) {
			uint32_t s = atomic_load(&r->stamp[k]);
			/* An upload clears its views before it writes them; a set
			 * with no clear since share_memory stamped the view is that
			 * stamp's own commit: stamping it again would look like a
			 * view stored twice. */
			int own = r->stamped_first[k];
			r->stamped_first[k] = 0;
			if (set && !own) {
				atomic_store(&r->stamp[k], r->next_stamp += 2);
				r->last_view_at = rc_now_s();
			}
			else if (!set && s && !(s & 1))
				atomic_store(&r->stamp[k], s | 1);
		}
	pthread_mutex_unlock(&r->lock);
}

/* A shared store's streaming job: views stored or cleared through any node
 * show in the row's bitmap; each change since the last look is stamped as
 * runner_views stamps a local one.  A view cleared and stored again between
 * two looks leaves the bitmap as it was: the row's count of cleared views
 * tells, and then every present view is stamped again, so that a worker
 * that used one finishes from the whole stack (stream.fallback). */
void runner_stamp_from_store(runner *r, const char *id)
{
	job_row row;
	if (store_get(r->a->st, id, 1, &row, NULL))
		return; /* the next look */
	pthread_mutex_lock(&r->lock);
	if (r->stamp && r->seen && row.present && row.views_expected == r->nstamp) {
		long long fell = 0;
		for (int k = 0; k < r->nstamp; k++) {
			int now = (row.present[k >> 3] >> (k & 7)) & 1, was = (r->seen[k >> 3] >> (k & 7)) & 1;
			uint32_t s = atomic_load(&r->stamp[k]);
			fell += was && !now;
			if (now && (!s || (s & 1))) {
				atomic_store(&r->stamp[k], r->next_stamp += 2);
				r->last_view_at = rc_now_s();
			}
			else if (!now && s && !(s & 1))
				atomic_store(&r->stamp[k], s | 1);
		}
		if (row.views_cleared - r->cleared_seen > fell) /* in doubt: the whole stack */
			for (int k = 0; k < r->nstamp; k++)
				if ((row.present[k >> 3] >> (k & 7)) & 1)
					atomic_store(&r->stamp[k], r->next_stamp += 2);
		memcpy(r->seen, row.present, ((size_t)r->nstamp + 7) / 8);
		r->cleared_seen = row.views_cleared;
	}
	pthread_mutex_unlock(&r->lock);
	job_row_clear(&row);
}

/* Whether the running job is a stream whose worker waits for views: it has
 * back-projected every view stamped so far and none came for
 * STREAM_YIELD_S. */
int runner_stream_waiting(runner *r)
{
	pthread_mutex_lock(&r->lock);
	int present = 0, waiting = r->stamp && rc_now_s() - r->last_view_at >= STREAM_YIELD_S;
	for (int k = 0; waiting && k < r->nstamp; k++) {
		uint32_t s = atomic_load(&r->stamp[k]);
		present += s && !(s & 1);
	}
	/* every view here: the worker is finishing (its last back projections,
	 * the volume's write), not waiting */
	waiting = waiting && present < r->nstamp && r->prog.views_done >= present;
	pthread_mutex_unlock(&r->lock);
	return waiting;
}
