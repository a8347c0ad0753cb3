/*
 * runner_impl: what the runner's files share (runner.h is its interface):
 * the struct, behind r->lock for everything another thread reads.
 *   runner.c        the queue loop and one job's run (the worker through
 *                   supervisor.h, its lines, its outcome)
 *   runner_shm.c    the running job's shared memory: the live volume, a
 *                   stream's view stamps (worker_proto.h)
 *   runner_lease.c  with a shared store: the lease, the live progress in the
 *                   row, a stream's bitmap
 *   runner_probe.c  the device probe (`worker --devices`) and its answers
 * runner.c calls the three others; runner_lease.c calls runner_shm.c; none
 * calls back.
 */
#ifndef RC_RUNNER_IMPL_H
#define RC_RUNNER_IMPL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobs/app.h"
#include "jobs/runner.h"

#define PROGRESS_EVERY_S 0.5  /* a shared store gets the live progress this often at most */
#define STREAM_POLL_MS 50     /* a shared store's streaming job: the bitmap is read this often */
/* A stream whose worker has back-projected every view it has and got no new
 * one for this long gives the runner to the queued jobs (docs/server.md):
 * long enough for a scanner's steady pace (views come every few ms to
 * 100 ms), short against stream_idle_s (300 s) that held the queue before. */
#define STREAM_YIELD_S 1.0

struct runner {
	app *a;
	runner_changed_fn *job_changed;
	pthread_t thread;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop, kicked;
	char current[37];        /* running job, "" when idle */
	char cancel_id[37];      /* cancel asked for this id */
	run_progress prog;
	double prog_wall;        /* monotonic time of the last progress line */
	atomic_llong heartbeat;  /* monotonic ms of the last loop */
	json_t *devices;         /* from the probe; under lock */
	int probed;
	pthread_t probe_thread;
	int probe_started;
	pid_t probe_pid;         /* under lock; 0 when none */
	/* the running job's shared memory (worker_proto.h), under lock */
	int live_fd;             /* its live volume; -1 when none */
	unsigned long live_gen;  /* preview lines seen */
	_Atomic uint32_t *stamp; /* streaming: one stamp per view; NULL when not streaming */
	uint8_t *stamped_first;  /* views share_memory stamped, not yet touched by runner_views */
	int nstamp;
	uint32_t next_stamp;     /* the last even stamp handed out */
	double last_view_at;     /* monotonic time a view was last stamped (streaming) */
	/* shared store: what the other nodes see of the running job */
	char *prog_json;         /* the last progress event, under lock; NULL = none */
	unsigned prog_seq;       /* bumped with prog_json */
	uint8_t *seen;           /* streaming: the bitmap at the last look, under lock */
	long long cleared_seen;  /* the row's views_cleared then */
};

/* runner_shm.c.  The job's memfds for its worker, as share_memory below
 * says; the stamps of a shared store's stream from the row's bitmap; whether
 * a stream's worker waits for views. */
int runner_share_memory(runner *r, const char *id, int *live_fd, int *stamp_fd);
void runner_unshare_memory(runner *r, int stamp_fd);
void runner_stamp_from_store(runner *r, const char *id);
int runner_stream_waiting(runner *r);

/* runner_lease.c */
enum { LEASE_HELD = 0, LEASE_CANCEL, LEASE_LOST };


struct lease {
	double renew_at, prog_at, stream_at;
	double held_at;       /* when the last renewal (or the take) began */
	unsigned prog_sent;
	int failing;
};
int runner_lease_tick(runner *r, const char *id, struct lease *ls);

/* runner_probe.c: the probe's thread, started with the runner (0); stopped
 * (its child killed) with it. */
int runner_probe_start(runner *r);
void runner_probe_stop(runner *r);

/* Jobs across MPI ranks (runner_mpi.c, docs/cluster.md; runner.h has
 * runner_mpi_check).  ranks: the job's execution.ranks (1 when its spec cannot be read);
 * spawn: its worker under mpirun; blame: msg names the rank that ended a
 * failed job, from ranks.log (1), or 0 when the log names none. */
struct supervised;
int runner_mpi_ranks(const char *dir);
int runner_mpi_spawn(runner *r, const char *dir, int ranks, struct supervised *w, rc_err *err);
int runner_mpi_blame(const char *dir, int ranks, char *msg, size_t n);

#endif
