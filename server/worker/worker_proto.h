/*
 * worker_proto: what the worker (main_recond-worker.c) and the daemon tell
 * each other.
 *
 * Worker -> daemon, one JSON object per line on the progress pipe:
 *
 *   {"type":"progress","iteration":3,"iterations":10,"of":10,"residual":1.2,
 *    "elapsed_s":4.1,"phase":"iterating","stopped":null}
 *     iteration: iterations done; iterations (and "of", its older name):
 *     the iterations asked (1 for FDK); stopped: the stop rule that ended
 *     the run before them ("stagnation", "tolerance", "discrepancy"), null
 *     otherwise; phase: "preparing" (reading and checking the input),
 *     "loading_matrix" / "building_matrix" (a tensor job's system matrix,
 *     with "phase_fraction" 0..1), "fdk_start" (an iterative job's FDK
 *     start), "iterating", "fdk" (an
 *     FDK job's run), "writing" (the volume); a streaming FDK adds
 *     "views_done" and "views_expected", a streaming helical FDK also
 *     "final_slices" and "final_z_mm" (how far the volume is final)
 *   {"type":"phase", ...the fields of "progress"...}
 *     the phase changed (the counts did not): the daemon sends it as a
 *     state event, so that the event stream keeps one progress event per
 *     iteration
 *   {"type":"preview","iteration":3,"of":10,"views_done":0,"views_expected":0}
 *     the live volume holds a new snapshot (at most every
 *     WORKER_PREVIEW_EVERY_S, and after the last iteration)
 *   {"type":"report", "engine":"cpu", "plan":[...], "matrix":{...}|null,
 *    "iterations_done":10, "seconds":12.3, "progress":{...},
 *    "stream":{...}|absent}
 *   {"type":"error","code":"invalid_argument","field":"...","message":"..."}
 *
 * Daemon -> worker, shared memory (memfds the daemon makes and passes):
 *   --live-fd N    vol_bytes of float32 [z][y][x]: the worker reconstructs
 *                  into it, so the daemon's previews read the current
 *                  iterate without a copy
 *   --stream-fd N  (streaming FDK) one uint32 per view, written by the
 *                  daemon as uploads change views: 0 never present, odd =
 *                  absent (being written), even = present, a new even
 *                  value each time the view is stored again
 *   --stream-idle S  give up streaming when no view came for S seconds
 *
 * Exit status: 0 = volume.f32 written (fsynced, renamed into place),
 * WORKER_EXIT_CANCELLED = stopped by SIGTERM/SIGINT (its error line, code
 * "cancelled", has "signal": the number; the daemon calls it a cancel only
 * when it sent the signal itself), WORKER_EXIT_FAILED = an
 * error line was written, WORKER_EXIT_STREAM_IDLE = a streaming job's views
 * stopped coming (the daemon pauses the stream), anything else (or a
 * signal) = the worker crashed.
 */
#ifndef RC_WORKER_PROTO_H
#define RC_WORKER_PROTO_H

#define WORKER_EXIT_FAILED 2
#define WORKER_EXIT_CANCELLED 3
#define WORKER_EXIT_STREAM_IDLE 4

#define WORKER_PREVIEW_EVERY_S 0.2

/* The worker's phases besides the algorithm's (RC_PHASE_* in algo.h). */
#define WORKER_PHASE_PREPARING "preparing"
#define WORKER_PHASE_FDK "fdk"
#define WORKER_PHASE_WRITING "writing"

#endif
