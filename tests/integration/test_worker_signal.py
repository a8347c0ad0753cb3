#!/usr/bin/env python3
"""A signal that nobody in the daemon sent ends a worker: the job fails with
worker_crashed and a message naming the signal and saying it came from
outside the daemon, never "cancelled by request" (docs/server.md "Queue and
worker").  SIGTERM, which the worker catches and stops on as it does for the
daemon's own cancel, and SIGKILL (the OOM killer's).  A cancel the daemon
sends is still a cancel (test_cancel.py)."""

import os
import signal
import time

from recond_harness import (Daemon, check, child_pids, deadline, proj_bytes, require_binaries, run_main,
                            sirt_runs, small_spec)


def running_worker(d, api, label):
    """Starts a long job and returns (job id, its worker's pid) once it iterates."""
    spec = small_spec(n=24, views=40, nu=24, nv=24, label=label, algorithm=sirt_runs(5000))
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], b"\0" * proj_bytes(spec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    alive = deadline(60)
    jj = api.job(j["id"])
    while alive() and not (jj["state"] == "running" and (jj.get("progress") or {}).get("iteration", 0) >= 1):
        time.sleep(0.05)
        jj = api.job(j["id"])
    pids = child_pids(d.proc.pid)
    workers = []
    for p in pids:
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"recond-worker" in cmd and j["id"].encode() in cmd:
            workers.append(p)
    return j["id"], workers


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGKILL, "SIGKILL")):
        jid, workers = running_worker(d, api, "killed-%s" % name)
        check("%s: the job's worker found" % name, len(workers) == 1, str(workers))
        if len(workers) != 1:
            continue
        os.kill(workers[0], sig)
        j = api.wait_state(jid, ("succeeded", "failed", "cancelled", "queued"), timeout=60, poll=0.02)
        err = j.get("error") or {}
        msg = err.get("message") or ""
        check("%s from outside: the job failed, not cancelled" % name, j["state"] == "failed",
              "%s %s" % (j["state"], err))
        check("%s from outside: code worker_crashed" % name, err.get("code") == "worker_crashed", str(err))
        check("%s from outside: the message names signal %d (%s) from outside the daemon" % (name, sig, name),
              ("signal %d (%s)" % (sig, name)) in msg and "outside the daemon" in msg and "by request" not in msg,
              msg)
        check("%s from outside: no cancel was asked" % name, not j.get("cancel_requested"), str(j.get("cancel_requested")))
    st, _, _, _ = api.get("/readyz")
    check("the daemon is still ready", st == 200)
    d.stop()


if __name__ == "__main__":
    run_main(main)
