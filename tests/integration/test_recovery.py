#!/usr/bin/env python3
"""kill -9 of the daemon during an upload and during a run, then a restart on
the same store: every acknowledged view is still there (the half-sent one is
not), the upload can be finished, and the job that was running is re-queued
and succeeds with the right result."""

import socket
import time

import phantom
from recond_harness import (sirt_runs, Daemon, child_pids, Validation, check, deadline, require_engine, fake_worker, log, pid_alive,
                            read_f32, require_binaries, run_main, small_spec)

LONG_ITERS = 20


def half_put(d, path, total, sent):
    """Opens a PUT of `total` bytes, sends `sent` of them, and leaves it hanging."""
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: %d\r\n\r\n" % (path, total)).encode())
    s.sendall(b"\x01" * sent)
    return s


def alive_pids(pids):
    return [p for p in pids if pid_alive(p)]


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()

    # 1. kill -9 during an upload.
    spec = small_spec(views=24, label="upload-kill")
    views = [phantom.project_view(spec, k) for k in range(24)]
    job = api.create(spec)
    jid = job["id"]
    acked = list(range(0, 24, 2))  # even views acknowledged
    for k in acked:
        st, _, body, _ = api.put("/v1/jobs/%s/projections/%d" % (jid, k), views[k])
        if st != 200:
            check("PUT view %d before the kill" % k, False, body[:200])
    hang = half_put(d, "/v1/jobs/%s/projections/1" % jid, len(views[1]), len(views[1]) // 2)
    time.sleep(0.3)
    d.kill9()
    hang.close()
    d.start()
    api = d.api()
    j = api.job(jid)
    check("after kill -9 during upload: acknowledged views present", j["views_present"] == len(acked),
          "%d present, %d acknowledged" % (j["views_present"], len(acked)))
    check("after kill -9 during upload: the half-sent view is missing",
          [1, 1] in j["views_missing"] and j["state"] == "receiving", str(j["views_missing"][:4]))
    for k in range(1, 24, 2):
        api.put("/v1/jobs/%s/projections/%d" % (jid, k), views[k])
    check("resumed upload: every view present", api.job(jid)["views_present"] == 24)

    # SIGTERM with a job running and an upload half sent: the daemon exits
    # cleanly and soon; after a restart the job is back in the queue and the
    # half-sent view is not there.  (A stand-in worker, so this runs with or
    # without an engine.)
    ds = Daemon(worker=fake_worker("slow")).start()
    sapi = ds.api()
    tj = sapi.create(spec)
    sapi.put("/v1/jobs/%s/projections" % tj["id"], b"".join(views))
    sapi.post_json("/v1/jobs/%s/start" % tj["id"], b"")
    sapi.wait_state(tj["id"], ("running",), timeout=30, poll=0.02)
    uj = sapi.create(spec)
    sapi.put("/v1/jobs/%s/projections/0" % uj["id"], views[0])
    workers = child_pids(ds.proc.pid)
    hang = half_put(ds, "/v1/jobs/%s/projections/1" % uj["id"], len(views[1]), len(views[1]) // 2)
    time.sleep(0.3)
    t0 = time.monotonic()
    rc = ds.stop(timeout=30)
    dt = time.monotonic() - t0
    hang.close()
    check("SIGTERM: daemon exits 0 within 15 s despite a half-sent upload", rc == 0 and dt < 15,
          "exit %s after %.1f s" % (rc, dt))
    check("SIGTERM: the worker is gone", not alive_pids(workers), str(alive_pids(workers)))
    ds.start()
    sapi = ds.api()
    t = sapi.job(tj["id"])
    check("SIGTERM: the running job is back in the queue after restart", t["state"] in ("queued", "running"),
          t["state"])
    u = sapi.job(uj["id"])
    check("SIGTERM: the acknowledged view is kept, the half-sent one is not", u["views_present"] == 1 and
          u["views_missing"][:1] == [[1, 23]], "%s %s" % (u["views_present"], u["views_missing"]))
    ds.stop()
    require_engine(api)
    st, _, _, _ = api.post_json("/v1/jobs/%s/start" % jid, b"")
    j = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=120)
    check("resumed upload: job succeeded", j["state"] == "succeeded", str(j.get("error")))

    # Reference volume of the same data from an uninterrupted job.
    ref_spec = dict(spec, label="reference")
    r = api.create(ref_spec)
    api.put("/v1/jobs/%s/projections" % r["id"], b"".join(views))
    api.post_json("/v1/jobs/%s/start" % r["id"], b"")
    rj = api.wait_state(r["id"], ("succeeded", "failed"), timeout=120)
    _, _, a, _ = api.get("/v1/jobs/%s/volume" % jid)
    _, _, b, _ = api.get("/v1/jobs/%s/volume" % r["id"])
    va, vb = read_f32(a), read_f32(b)
    scale = max((abs(x) for x in vb), default=0.0)
    check("resumed upload gives the same volume as an uninterrupted one",
          rj["state"] == "succeeded" and len(a) == len(b) and
          max(abs(x - y) for x, y in zip(va, vb)) <= 1e-5 * scale)

    # 2. kill -9 during a run.
    lspec = small_spec(n=24, views=40, nu=24, nv=24, label="run-kill",
                       algorithm=sirt_runs(LONG_ITERS))
    lj = api.create(lspec)
    lproj = phantom.project_cone(lspec)
    api.put("/v1/jobs/%s/projections" % lj["id"], lproj)
    api.post_json("/v1/jobs/%s/start" % lj["id"], b"")
    j = api.wait_state(lj["id"], ("running",), timeout=60, poll=0.02)
    alive = deadline(60)
    while alive() and j["state"] == "running" and j["progress"]["iteration"] < 1:
        time.sleep(0.05)
        j = api.job(lj["id"])
    check("long job is running before the kill", j["state"] == "running",
          "%s iteration %s" % (j["state"], j["progress"]["iteration"]))
    workers = child_pids(d.proc.pid)
    check("a worker process runs the job", len(workers) >= 1, str(workers))
    d.kill9()
    alive = deadline(10)
    while alive() and alive_pids(workers):
        time.sleep(0.1)
    left = alive_pids(workers)
    check("the worker exits when its daemon is killed", not left, "still running: %s" % left)
    d.start()
    api = d.api()
    j = api.job(lj["id"])
    check("after restart the running job is re-queued", j["state"] in ("queued", "running", "succeeded"), j["state"])
    j = api.wait_state(lj["id"], ("succeeded", "failed", "cancelled"), timeout=240)
    check("re-queued job succeeds", j["state"] == "succeeded", "%s %s" % (j["state"], j.get("error")))
    check("re-queued job ran every iteration", j["progress"]["iteration"] == LONG_ITERS, str(j["progress"]))
    _, _, v, _ = api.get("/v1/jobs/%s/volume" % lj["id"])
    err = phantom.rel_error(read_f32(v), phantom.voxelise(lspec))
    log("re-queued job: relative error %.4f vs the voxelised phantom" % err)
    check("re-queued job's volume is a reconstruction (relative error < 0.5)", err < 0.5, "%.4f" % err)
    st, _, _, _ = api.get("/readyz")
    check("daemon ready after both restarts", st == 200)
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
