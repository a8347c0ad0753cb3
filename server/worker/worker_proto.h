/*
 * worker_proto: what the worker (main_recond-worker.c) tells the daemon, one
 * JSON object per line on the progress pipe:
 *
 *   {"type":"progress","iteration":3,"of":10,"residual":1.2,"elapsed_s":4.1}
 *   {"type":"report", "engine":"cpu", "plan":[...], "matrix":{...}|null,
 *    "iterations_done":10, "seconds":12.3, "progress":{...}}
 *   {"type":"error","code":"invalid_argument","field":"...","message":"..."}
 *
 * Exit status: 0 = volume.f32 written (fsynced, renamed into place),
 * WORKER_EXIT_CANCELLED = stopped by SIGTERM/SIGINT, WORKER_EXIT_FAILED = an
 * error line was written, anything else (or a signal) = the worker crashed.
 */
#ifndef RC_WORKER_PROTO_H
#define RC_WORKER_PROTO_H

#define WORKER_EXIT_FAILED 2
#define WORKER_EXIT_CANCELLED 3

#endif
