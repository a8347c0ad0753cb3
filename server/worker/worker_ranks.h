/*
 * worker_ranks: the worker as one rank of a job run across processes
 * (execution.ranks, docs/cluster.md).  recond-worker links ranks_none.c:
 * one process, rank 0 of 1, every call below a no-op.  recond-worker-mpi
 * links mpi/ranks_mpi.c instead: under mpirun (Open MPI's environment
 * present) the ranks of MPI_COMM_WORLD, else the same single process.
 *
 * Cone and matrices FDK: each rank reconstructs its z-slab (ranks_slab) of
 * the volume, from only the detector rows it projects onto where the stack
 * is of line integrals (core/plan/ooc.h rc_ooc_fdk_slab), and writes it
 * into the shared volume file (ranks_write_slabs).
 * Iterative methods (and FDK of fan and parallel stacks): ranks_wrap puts
 * mpi_backend.h's view split over the job's backend; rank 0 writes the
 * volume.  Rank 0 alone writes progress lines.  A rank that fails aborts
 * the whole job (ranks_abort): MPI has no way back into a collective that
 * one rank left.
 */
#ifndef RC_WORKER_RANKS_H
#define RC_WORKER_RANKS_H

#include <jansson.h>
#include <stdint.h>

#include "backend/backend.h"
#include "util/rc_error.h"

/* Joins the ranks when run under mpirun; 0 or an error. */
int ranks_init(int *argc, char ***argv, rc_err *err);
int ranks_rank(void);
int ranks_size(void);

/* This rank's slices [z0, z1) of nz: contiguous, in rank order, sizes
 * differing by at most one (empty when nz < ranks). */
void ranks_slab(int nz, int *z0, int *z1);

/* rc_recon_spec.wrap: the view split over inner (mpi_backend.h). */
int ranks_wrap(void *ud, rc_backend *inner, rc_backend **ret, rc_err *err);

/* Collective: every rank writes its bytes [off, off + len) of a file of
 * total bytes at dir/name, made whole, fsynced and renamed into place by
 * rank 0 once every rank wrote.  0 or the first rank's error. */
int ranks_write_slabs(const char *dir, const char *name, const void *buf, uint64_t off, uint64_t len,
		      uint64_t total, rc_err *err);

/* Collective: on rank 0 [{rank, host, pid, seconds, peak_rss_mb}, ...] of
 * every rank (seconds: its own run; peak_rss_mb: its own so far) and whether hash is the same on every rank; NULL
 * on the others and for one process. */
json_t *ranks_report(double seconds, uint64_t hash, int *identical);

/* Ends every rank of the job with code (this one's error already said). */
void ranks_abort(int code);
void ranks_finalize(void);

#endif
