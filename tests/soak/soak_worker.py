#!/usr/bin/env python3
"""A stand-in for recond-worker in the durability soak (tests/soak/soak.py).

It speaks the worker's protocol (server/worker/worker_proto.h) and keeps its
durability rules, but its "reconstruction" is a function whose result the
soak can predict: reference(projections, n) below, n bytes that depend on
every byte of projections.f32.  So "every finished volume matches a
reference" is an exact comparison, whatever the job's geometry.

  soak_worker.py [--progress-fd N] [--threads N] [--state-dir DIR] JOBDIR

- one progress line per "iteration" (the spec's algorithm.iterations, at
  least 1), SOAK_STEP_S seconds apart (default 0.03), so that cancels and
  kills find jobs running;
- SIGTERM or SIGINT stops it between iterations with exit status 3
  (cancelled), as the real worker's cancel flag does; once the volume is
  being written it finishes the write (exit 0), like the real worker;
- the volume is written as durable.c writes it: .volume.f32.PID.tmp, fsync,
  rename to volume.f32, fsync of the directory;
- while the file named by SOAK_PAUSE exists it waits before starting, so
  that the soak can look at the store after a restart with no worker
  writing (a job may be "running" then, its worker parked here).
"""

import hashlib
import json
import os
import signal
import sys
import time

WORKER_EXIT_FAILED = 2
WORKER_EXIT_CANCELLED = 3


def reference(projections, nbytes):
    """The volume this worker writes for a projection stack: SHAKE-256 of it, nbytes long."""
    return hashlib.shake_256(projections).digest(nbytes)


def volume_bytes(spec):
    v = spec["volume"]
    return 4 * int(v["nx"]) * int(v["ny"]) * int(v["nz"])


_cancel = [False]


def _on_term(_sig, _frame):
    _cancel[0] = True


def write_durable(d, name, data):
    tmp = os.path.join(d, ".%s.%d.tmp" % (name, os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o640)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, os.path.join(d, name))
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def main(argv):
    if "--devices" in argv:
        print(json.dumps({"devices": []}))
        return 0
    fd = 1
    args = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--progress-fd", "--threads", "--state-dir", "--live-fd", "--stream-fd", "--stream-idle",
                 "--matrix-cache-bytes", "--memory-limit"):
            if a == "--progress-fd":
                fd = int(argv[i + 1])
            i += 2
            continue
        args.append(a)
        i += 1
    if len(args) != 1:
        sys.stderr.write("usage: soak_worker.py [--progress-fd N] JOBDIR\n")
        return WORKER_EXIT_FAILED
    jobdir = args[0]
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    out = os.fdopen(fd, "w", buffering=1)

    def emit(doc):
        try:
            out.write(json.dumps(doc) + "\n")
        except OSError:
            pass

    pause = os.environ.get("SOAK_PAUSE")
    while pause and os.path.exists(pause) and not _cancel[0]:
        time.sleep(0.01)
    try:
        with open(os.path.join(jobdir, "spec.json"), "rb") as f:
            spec = json.loads(f.read())
        iters = max(1, int(spec.get("algorithm", {}).get("iterations", 1)))
        step = float(os.environ.get("SOAK_STEP_S", "0.03"))
        t0 = time.monotonic()
        for it in range(1, iters + 1):
            if _cancel[0]:
                return WORKER_EXIT_CANCELLED
            time.sleep(step)
            emit({"type": "progress", "iteration": it, "of": iters, "residual": None,
                  "elapsed_s": time.monotonic() - t0})
        if _cancel[0]:
            return WORKER_EXIT_CANCELLED
        with open(os.path.join(jobdir, "projections.f32"), "rb") as f:
            proj = f.read()
        write_durable(jobdir, "volume.f32", reference(proj, volume_bytes(spec)))
        emit({"type": "report", "engine": "soak", "plan": [], "matrix": None, "iterations_done": iters,
              "seconds": time.monotonic() - t0, "projector": None,
              "progress": {"iteration": iters, "of": iters, "residual": None,
                           "elapsed_s": time.monotonic() - t0}})
        return 0
    except (OSError, ValueError, KeyError) as e:
        emit({"type": "error", "code": "io_error", "field": "", "message": "soak worker: %s" % e})
        return WORKER_EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
