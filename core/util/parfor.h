/*
 * parfor: a minimal parallel for over [0, n) on plain pthreads, for the
 * embarrassingly parallel helpers outside the engines (analytic projection,
 * voxelisation, FDK filtering).  Items are handed out one at a time from an
 * atomic counter, so uneven items balance; threads are created per call
 * (calls are per job, not per voxel, so the cost is negligible).
 */
#ifndef RC_PARFOR_H
#define RC_PARFOR_H

/* Calls fn(ud, worker, i) for every i in [0, n), on up to `threads`
 * threads (0 = one per online core); worker is in [0, threads_used) and lets
 * fn use per-thread scratch.  Returns the number of threads used (>= 1).
 * Falls back to the calling thread alone when threads cannot be created. */
int rc_parallel_for(int n, int threads, void (*fn)(void *ud, int worker, int i), void *ud);

/* The number of threads rc_parallel_for(…, threads, …) would use at most. */
int rc_parallel_threads(int threads);

#endif
