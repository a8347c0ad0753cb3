#!/usr/bin/env python3
"""Cancel and shutdown reach a worker within about a second however long its
iterations are: the CPU engine stops a projection between its thread pool's
tasks once the worker's cancel flag is set (core/util/threadpool.h), so a
cancel in the middle of a several-second iteration does not wait for its end
(nor for the daemon's SIGKILL after 10 s).  A job whose iteration takes
seconds (measured from its first iteration) is cancelled in the middle of its
second and reaches `cancelled` within 2 s; the daemon's SIGTERM with such a
job running exits within 2 s."""

import signal
import time

from recond_harness import (Daemon, check, deadline, log, proj_bytes, require_binaries, require_engine, run_main,
                            sirt_runs, small_spec)

# One SIRT iteration of this job on one thread takes about 10 s on an idle
# core, more on a loaded one (checked below: the test says nothing when
# iterations are short).
N, VIEWS, DET = 128, 360, 128
MIN_ITER_S = 4.0


def long_job(api, label):
    # ray casting's pair: auto takes the faster footprint pair on this
    # geometry, whose iterations can end under MIN_ITER_S
    spec = small_spec(n=N, views=VIEWS, nu=DET, nv=DET, label=label, algorithm=dict(sirt_runs(50), projector="raycast"))
    spec["execution"] = dict(spec.get("execution") or {}, threads=1)
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], b"\0" * proj_bytes(spec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    return j["id"]


def first_iteration(api, jid):
    """Waits for iteration 1; returns (job, seconds it took)."""
    alive = deadline(240)
    j = api.job(jid)
    while alive() and (j.get("progress") or {}).get("iteration", 0) < 1 and j["state"] in ("queued", "running"):
        time.sleep(0.05)
        j = api.job(jid)
    p = j.get("progress") or {}
    return j, p.get("elapsed_s") or 0.0


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    require_engine(api)

    jid = long_job(api, "cancel-long")
    j, t_iter = first_iteration(api, jid)
    check("the long job iterates", j["state"] == "running" and j["progress"]["iteration"] >= 1, str(j.get("progress")))
    check("one iteration takes at least %.0f s (else this test proves nothing)" % MIN_ITER_S, t_iter >= MIN_ITER_S,
          "%.2f s" % t_iter)
    time.sleep(min(1.0, t_iter / 3))  # inside iteration 2's projections
    t0 = time.monotonic()
    st, _, _, _ = api.post_json("/v1/jobs/%s/cancel" % jid, b"")
    j = api.wait_state(jid, ("cancelled", "failed", "succeeded"), timeout=60, poll=0.02)
    dt = time.monotonic() - t0
    log("cancel mid-iteration: %.2f s (an iteration takes %.2f s)" % (dt, t_iter))
    check("cancel mid-iteration: 202 then cancelled", st == 202 and j["state"] == "cancelled", "%d %s" % (st, j["state"]))
    check("cancelled within 2 s although an iteration takes %.1f s" % t_iter, dt <= 2.0, "%.2f s" % dt)

    jid = long_job(api, "shutdown-long")
    j, t_iter = first_iteration(api, jid)
    check("the second long job iterates", j["state"] == "running", j["state"])
    time.sleep(min(1.0, t_iter / 3))
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    try:
        d.proc.wait(timeout=30)
    except Exception:
        pass
    dt = time.monotonic() - t0
    log("daemon SIGTERM mid-iteration: exited in %.2f s (an iteration takes %.2f s)" % (dt, t_iter))
    check("the daemon exited on SIGTERM", d.proc.poll() is not None, "exit %s" % d.proc.poll())
    check("shutdown within 2 s although an iteration takes %.1f s" % t_iter, dt <= 2.0, "%.2f s" % dt)

    d2 = Daemon(store=d.store).start()
    j = d2.api().job(jid)
    check("the interrupted job is queued again after the restart", j["state"] in ("queued", "running"), j["state"])
    d2.stop()


if __name__ == "__main__":
    run_main(main)
