"""What the out-of-core tests (test_out_of_core.py, test_out_of_core_cgls.py,
test_out_of_core_default.py) share: their cone job and its noisy stack, a job
run through the daemon to its raw volume, and the same job in core without a
limit, whose volume the out-of-core one must equal to 1e-5."""

import json

import numpy as np

from recond_harness import Daemon, check, log
import phantom


def cone_job(n, views, det, algorithm, label):
    """A cone job on the cpu engine (n^3 of 0.5 mm from views of det^2 pixels of 2 mm), not started
    when its projections are stored."""
    s = phantom.cone_spec(n=n, voxel=0.5, views=views, nu=det, nv=det, du=2.0, dv=2.0, D=400.0, S=800.0,
                          algorithm=algorithm, label=label)
    s["execution"] = {"engine": "cpu"}
    s["autostart"] = False
    return s


def noisy_stack(s, views, amplitude, zero_mean):
    """s's analytic projections plus uniform noise of amplitude times their maximum, seed 37:
    zero_mean centres it (rays missing the volume then carry none of the object), else it is
    positive."""
    data = b"".join(phantom.project_view(s, k) for k in range(views))
    a = np.frombuffer(data, dtype=np.float32).copy()
    u = np.random.default_rng(37).random(a.size, dtype=np.float32)
    a += ((u - 0.5) if zero_mean else u) * amplitude * float(a.max())
    return a.tobytes()


def run(api, s, data, what):
    """Creates s, stores data, runs it: (the created job, the finished one, its volume)."""
    v = s["volume"]
    nvox = v["nx"] * v["ny"] * v["nz"]
    job = api.create(s)
    st, _, body, _ = api.put("/v1/jobs/%s/projections" % job["id"], data)
    check("%s: projections stored" % what, st in (200, 201, 202, 204), "%d %s" % (st, body[:200]))
    api.post_json("/v1/jobs/%s/start" % job["id"], {})
    j = api.wait_state(job["id"], ("succeeded", "failed", "cancelled"), timeout=240)
    check("%s: succeeded" % what, j["state"] == "succeeded", json.dumps(j.get("error")))
    st, _, vol, _ = api.get("/v1/jobs/%s/volume?format=raw" % job["id"], timeout=120)
    check("%s: volume downloaded" % what, st == 200 and len(vol) == nvox * 4, "%d %d" % (st, len(vol)))
    return job, j, np.frombuffer(vol, dtype=np.float32)


def against_in_core(s, data, limit, ooc, on_job=None):
    """The same job on a daemon without a limit: in core, its peak over limit,
    and the out-of-core volume ooc equal to its volume to 1e-5 (max abs / max);
    on_job (if given) is called with that finished job."""
    d = Daemon().start()
    job, j, whole = run(d.api(), s, data, "without a limit")
    if on_job:
        on_job(j)
    check("without a limit it runs in core", (job["summary"].get("memory_plan") or {}).get("mode") == "in_core",
          json.dumps(job["summary"].get("memory_plan")))
    rss = j.get("peak_rss_mb")
    log("in core: peak %s MiB, %s s" % (rss, (j.get("timings") or {}).get("recon_s")))
    check("the in-memory run's peak is over the budget", rss is not None and rss * 1048576 > limit, str(rss))
    d.stop()
    peak = float(np.max(np.abs(whole)))
    err = float(np.max(np.abs(ooc.astype(np.float64) - whole))) / peak if peak > 0 else float("inf")
    log("max |out of core - in memory| / max |in memory| = %.3g" % err)
    check("the out-of-core volume equals the in-memory one to 1e-5", err <= 1e-5, "%.3g" % err)


def stopped(j):
    """(iterations done, the stop rule or None) of finished job j."""
    p = j.get("progress") or {}
    return (p.get("iteration"), p.get("stopped"))


def same_stop_in_core(s, data, limit, ooc, j):
    """against_in_core, and the in-core job stops after the same iteration,
    for the same reason, as the out-of-core job j; returns the in-core job."""
    whole = {}
    against_in_core(s, data, limit, ooc, on_job=lambda w: whole.update(j=w))
    log("iterations: out of core %s, in core %s" % (stopped(j), stopped(whole["j"])))
    check("it stops after the same iteration as in memory, for the same reason", stopped(j) == stopped(whole["j"]),
          "%s %s" % (stopped(j), stopped(whole["j"])))
    return whole["j"]


def ran_out_of_core(job, j, limit, what, chunks=None):
    """Job (its creation answer job, finished j) was planned out of core in
    more than one slab (in chunks blocks where given) under limit, shows
    that plan, and peaked under the budget."""
    plan = job["summary"].get("memory_plan") or {}
    log("plan at creation: %s" % json.dumps(plan))
    check("the %s is planned out of core" % what, plan.get("mode") == "out_of_core" and plan.get("slabs", 0) > 1
          and (chunks is None or plan.get("chunks") == chunks) and 0 < plan.get("predicted_bytes", 0) <= limit,
          json.dumps(plan))
    check("the job shows the plan that ran", (j.get("memory_plan") or {}).get("mode") == "out_of_core",
          json.dumps(j.get("memory_plan")))
    rss = j.get("peak_rss_mb")
    log("out of core: peak %s MiB, %s s, progress %s" % (rss, (j.get("timings") or {}).get("recon_s"),
                                                         json.dumps(j.get("progress"))))
    check("its peak_rss_mb is under the budget", rss is not None and rss * 1048576 <= limit, str(rss))
