/*
 * mpi_backend: a backend over a rank's own backend (backend.h) that splits
 * the views of every projection over the ranks of an MPI communicator, so
 * that the iterative algorithms (and FDK's back projection) run unchanged
 * across ranks (docs/cluster.md).
 *
 * Every rank holds the whole volume and the whole projection space, on the
 * whole geometry.  Rank r owns the contiguous views [nviews r / size,
 * nviews (r + 1) / size): its forward projections compute only those, and
 * every projection vector is zero outside them (made so at vec_new,
 * upload and fill; copy, axpy, xpay, ratio and residual keep zeros zero).
 * Back projections back-project the owned views of the range and sum the
 * partial volumes over the ranks with MPI_Allreduce: one volume of floats
 * per back projection.  Volume vectors are the same on every rank, so
 * volume element-wise calls run locally; a projection dot product, the
 * sums of ratio and residual are gathered and added in rank order (the
 * same double on every rank), inv_guarded of a projection vector takes the
 * maximum over the ranks.  A subset of views (SART, ordered subsets) gives
 * each rank only its owned views of the subset: correct, not faster.
 */
#ifndef RC_MPI_BACKEND_H
#define RC_MPI_BACKEND_H

#include <mpi.h>

#include "backend/backend.h"

/* A backend over inner (borrowed: freed after this one by its owner) on
 * comm.  0 or RC_ENOMEM. */
int rc_backend_mpi_new(rc_backend *inner, MPI_Comm comm, rc_backend **ret, rc_err *err);

#endif
