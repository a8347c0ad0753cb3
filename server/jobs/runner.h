/*
 * runner: takes queued jobs one at a time (priority, then first queued) and
 * runs each in a worker process: fork + exec of the configured worker with
 * the job directory, progress read as JSON lines from a pipe (worker_proto.h).
 *
 * The worker is another process so that a crash, a signal or a device fault
 * ends that job only: the runner records "failed" with what it learnt (exit
 * status, signal, the worker's last error line) and takes the next job.
 * Cancel sends SIGTERM (the worker sets the algorithm's cancel flag and stops
 * within one iteration), SIGKILL after a grace period; the process exit frees
 * every byte the job held.  runner_stop (daemon shutdown) stops the worker
 * the same way and puts its job back in the queue.
 */
#ifndef RC_RUNNER_H
#define RC_RUNNER_H

#include <jansson.h>

#include "base/config.h"
#include "store/store.h"
#include "util/rc_error.h"

struct app;
typedef struct runner runner;

typedef struct run_progress {
	int iteration, of;  /* iterations done, asked (the worker's "iterations") */
	double residual;    /* NAN when unknown */
	double elapsed_s;
	double eta_s;       /* NAN when unknown */
	char stopped[16];   /* the stop rule that ended the run here, or "" */
	char phase[16];     /* the worker's phase (worker_proto.h); "" before its first line */
	double phase_fraction; /* of a phase that says how far it is (building_matrix), else NAN */
	int views_done;     /* streaming FDK: views back-projected so far, */
	int views_expected; /* of this many (0 when not streaming) */
	int final_slices;   /* streaming helical FDK: slices final from the scan's start, */
	double final_z_mm;  /* up to this z (NAN: not reported) */
} run_progress;

/* A job's row changed (it started, ended): job_changed(a, id) publishes
 * it (the daemon passes app_job_changed, which reads the runner's
 * progress: a call back up would close a cycle). */
typedef void runner_changed_fn(struct app *a, const char *id);

int runner_new(struct app *a, runner_changed_fn *job_changed, runner **ret, rc_err *err);
int runner_start(runner *r, rc_err *err);
/* Stops the thread; a running job is stopped and re-queued. */
void runner_stop(runner *r);
void runner_free(runner *r);

/* Something was queued: look at the queue now. */
void runner_kick(runner *r);
/* Asks the running job id (if it is the one running, or about to be) to stop. */
void runner_cancel(runner *r, const char *id);
/* Live progress of job id; 0 when it is the running job. */
int runner_progress(runner *r, const char *id, run_progress *out);
/* True while the runner thread has looped recently (watchdog). */
int runner_healthy(runner *r);
/* The devices the worker reported at start (`recond-worker --devices`), a
 * new reference to a JSON array; NULL until probed or when probing failed. */
json_t *runner_devices(runner *r);
/* True once the device probe has finished (successfully or not). */
int runner_probed(runner *r);
/* The engines this node's devices can run, for placement
 * (store_take_next_on): cpu, each device's engine, tensor with a CUDA
 * device (the tensor path's GPU), trigeneous with any OpenCL or CUDA device. */
void runner_engines(runner *r, char *buf, size_t n);
/* True while a job runs. */
int runner_busy(runner *r);
/* The running job's id into id ("" when idle). */
void runner_current(runner *r, char id[37]);

/* The running job's live volume (the worker's current iterate, or a
 * streaming FDK's partial sum): *fd gets a duplicate of the memfd's
 * descriptor, writable like it, so map it read-only (close it): vol_bytes
 * floats [z][y][x]; *generation how many snapshots the
 * worker has announced (0 = none yet: the contents are zeros).  A reader may
 * see a snapshot being overwritten by the next one.  RC_ENOTFOUND when id is
 * not the running job or its worker has not started. */
int runner_live_volume(runner *r, const char *id, int *fd, unsigned long *generation);
/* Views [first, last) of job id were marked present (set) or absent: a
 * streaming worker of id learns of them at once. */
void runner_views(runner *r, const char *id, int first, int last, int set);

/* At start (runner_mpi.c): mpi_worker's default (recond-worker-mpi next
 * to the probe worker, the real one: next to recond unless configured) and, when mpi_max_ranks > 0 but mpirun or that worker is
 * missing, mpi_off saying why jobs with execution.ranks > 1 are refused
 * (docs/cluster.md). */
void runner_mpi_check(config *c);

/* Whether this daemon runs a job of `ranks` MPI ranks (1: always): 0, or
 * RC_EUNSUPPORTED naming execution.ranks and why (no MPI, unavailable,
 * more than mpi_max_ranks).  At creation and again before a spawn: a node
 * of a shared spool may run none, or fewer since a restart. */
int runner_mpi_offered(const config *cfg, int ranks, rc_err *err);

/* Whether mpirun starts every rank on this machine (no --mpi-hosts and no
 * --mpi-hostfile): the ranks' memory then adds up against one budget. */
int runner_mpi_local(const config *cfg);

#endif
