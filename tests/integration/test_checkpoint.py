#!/usr/bin/env python3
"""Checkpoints survive a restart (docs/server.md "Checkpoints"): an iterative
job with execution.checkpoint_s keeps its state in its directory, and after
a kill -9 of the daemon (its worker dies with it) or the daemon's SIGTERM in
the middle of an iteration the re-queued job continues from its checkpoint
(resumed_from_iteration), runs every iteration, and its volume equals an
uninterrupted run's to 1e-5 (relative).  CGLS (its directions are in the
checkpoint) with a checkpoint after every iteration for the kill -9, SART
with its defaults (FDK's start, ordered subsets, TV) and checkpoint_s an
hour for the SIGTERM, so that the checkpoint it resumes from is the one
written at the SIGTERM.  A checkpoint of another spec is not used,
and a finished job's checkpoint is removed."""

import math
import os
import time

import phantom
from recond_harness import (Daemon, Validation, check, deadline, log, read_f32, require_binaries, require_engine,
                            run_main, small_spec)

ITERS = 30


def spec_for(label, algorithm, checkpoint_s):
    s = small_spec(n=40, views=60, nu=40, nv=40, label=label, algorithm=dict(algorithm, iterations=ITERS))
    s["execution"]["checkpoint_s"] = checkpoint_s
    return s


def submit(api, spec, proj):
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], proj)
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    return j["id"]


def volume(api, jid):
    st, _, body, _ = api.get("/v1/jobs/%s/volume" % jid)
    return read_f32(body) if st == 200 else None


def rel_diff(a, b):
    d2 = sum((float(x) - float(y)) ** 2 for x, y in zip(a, b))
    n2 = sum(float(y) ** 2 for y in b)
    return math.sqrt(d2 / n2) if n2 > 0 else float("inf")


def wait_iteration(api, jid, k):
    alive = deadline(120)
    j = api.job(jid)
    while alive() and j["state"] in ("queued", "running") and (j.get("progress") or {}).get("iteration", 0) < k:
        time.sleep(0.01)
        j = api.job(jid)
    return j


def interrupted(d, api, name, algorithm, proj, stop, every):
    """Runs the reference and the checkpointed job (checkpoint_s every);
    stop(d) interrupts the latter after a few iterations; returns the
    daemon's api after the restart."""
    ref = submit(api, spec_for(name + "-reference", algorithm, 0), proj)
    r = api.wait_state(ref, ("succeeded", "failed", "cancelled"), timeout=240)
    check("%s: the uninterrupted run succeeds, every iteration" % name,
          r["state"] == "succeeded" and r["progress"]["iteration"] == ITERS and r.get("resumed_from_iteration") is None,
          "%s %s %s" % (r["state"], r["progress"], r.get("error")))
    ref_vol = volume(api, ref)
    t_iter = r["progress"]["elapsed_s"] / max(1, r["progress"]["iteration"])

    jid = submit(api, spec_for(name, algorithm, every), proj)
    j = wait_iteration(api, jid, 4)
    check("%s: the job runs iteration 4 or later before the interruption" % name,
          j["state"] == "running" and ITERS > j["progress"]["iteration"] >= 4, "%s %s" % (j["state"], j["progress"]))
    ckpt = os.path.join(d.store, "jobs", jid, "checkpoint.bin")
    if every < 1:
        check("%s: its checkpoint is in its directory" % name, os.path.exists(ckpt), ckpt)
    else:
        check("%s: no checkpoint yet (the next is due in %.0f s): the SIGTERM's is the one used" % (name, every),
              not os.path.exists(ckpt), ckpt)
    at = j["progress"]["iteration"]
    time.sleep(t_iter * 0.5)
    stop(d)
    d.start()
    api = d.api()
    j = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=240)
    rfi = j.get("resumed_from_iteration")
    log("%s: interrupted at iteration %d (%.3f s an iteration), resumed from iteration %s" % (name, at, t_iter, rfi))
    check("%s: re-queued after the restart and succeeded, every iteration" % name,
          j["state"] == "succeeded" and j["progress"]["iteration"] == ITERS, "%s %s %s" % (j["state"], j["progress"], j.get("error")))
    check("%s: resumed_from_iteration is where it was interrupted (%d)" % (name, at),
          isinstance(rfi, int) and at <= rfi < ITERS, str(rfi))
    v = volume(api, jid)
    diff = rel_diff(v, ref_vol) if v is not None and ref_vol is not None else float("inf")
    log("%s: resumed volume against the uninterrupted one: relative difference %.3g" % (name, diff))
    check("%s: the resumed volume equals the uninterrupted one to 1e-5" % name, diff <= 1e-5, "%.3g" % diff)
    err = phantom.rel_error(v, phantom.voxelise(spec_for(name, algorithm, 0))) if v is not None else float("inf")
    check("%s: and it is a reconstruction (relative error < 0.5)" % name, err < 0.5, "%.4f" % err)
    check("%s: the finished job's checkpoint is removed" % name, not os.path.exists(ckpt), ckpt)
    return api


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    require_engine(api)
    spec0 = spec_for("projections", {"name": "cgls"}, 0)
    proj = phantom.project_cone(spec0)

    cgls = {"name": "cgls", "initial": "zero", "stop": {"stagnation": 0, "discrepancy": 0}}
    api = interrupted(d, api, "cgls-kill9", cgls, proj, lambda dd: dd.kill9(), 0.001)

    sart = {"name": "sart", "stop": {"stagnation": 0, "discrepancy": 0}}
    api = interrupted(d, api, "sart-sigterm", sart, proj, lambda dd: dd.stop(), 3600)

    # a checkpoint of another spec (here: another job's) is not used
    other = submit(api, spec_for("other", cgls, 0.001), proj)
    j = wait_iteration(api, other, 3)
    d.kill9()
    a = os.path.join(d.store, "jobs", other, "checkpoint.bin")
    b_spec = spec_for("foreign", cgls, 0.001)
    b_spec["autostart"] = False
    d.start()
    api = d.api()
    bj = api.create(b_spec)
    api.put("/v1/jobs/%s/projections" % bj["id"], proj)
    with open(a, "rb") as f:
        data = f.read()
    with open(os.path.join(d.store, "jobs", bj["id"], "checkpoint.bin"), "wb") as f:
        f.write(data)
    api.post_json("/v1/jobs/%s/start" % bj["id"], b"")
    jb = api.wait_state(bj["id"], ("succeeded", "failed", "cancelled"), timeout=240)
    check("a checkpoint of another spec is not used: the job runs from the start",
          jb["state"] == "succeeded" and jb.get("resumed_from_iteration") is None, "%s %s" % (jb["state"], jb.get("resumed_from_iteration")))
    api.wait_state(other, ("succeeded", "failed", "cancelled"), timeout=240)
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
