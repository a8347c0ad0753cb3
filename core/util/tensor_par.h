/*
 * tensor_par: the parallel loop of the tensor path (matrix construction,
 * block conversion, CPU SpMM).  Work items [0, n) are handed out in chunks
 * from an atomic counter, so uneven items (block rows of different lengths)
 * balance themselves.  One call = one set of threads, joined before return;
 * calls are coarse (a whole product), so no pool is kept.
 */
#ifndef RC_TENSOR_PAR_H
#define RC_TENSOR_PAR_H

#include <stdint.h>

/* fn(item, worker, ud) for item in [0, n); worker in [0, threads) indexes
 * per-thread scratch.  Returns the first non-zero fn result (others still
 * finish their current item and stop taking new ones). */
typedef int (*rc_par_fn)(int64_t item, int worker, void *ud);

/* threads <= 0: one per online core.  The count actually used is capped by n
 * and returned by rc_par_threads for sizing scratch. */
int rc_par_threads(int threads, int64_t n);
int rc_par_for(int64_t n, int64_t chunk, int threads, rc_par_fn fn, void *ud);

#endif
