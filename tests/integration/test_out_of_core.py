#!/usr/bin/env python3
"""Out-of-core FDK under a memory budget (docs/server.md, "Memory"; core/plan/ooc.h).

A daemon started with --memory-limit 64M accepts an FDK job whose volume (256^3,
64 MiB) and stack (60 views of 160x160, 5.9 MiB) together exceed the budget:
its summary.memory_plan says out_of_core with several z-slabs, each reading
fewer detector rows than the detector has, and a predicted peak under the
budget.  It runs and succeeds; its volume equals the one a daemon without the
limit reconstructs in memory from the same stack to 1e-5 (max abs difference
over max abs), and its measured peak_rss_mb is under the budget and under
the plan's prediction (while the in-memory run's is over the budget).  A second such job
cancelled as soon as it runs ends cancelled with no volume and no
scratch file left in the store; a streaming one (views sent one by
one, a pause halfway) waits for its whole stack, says so in
stream.fallback, and gives the same volume.  The
data is noise, so a detector row a slab failed to read shows.  Under the
same budget a SART job of that size is refused at creation (422, field
volume) with the memory it needs and why it cannot run out of core (CGLS
and SIRT run out of core: test_out_of_core_cgls.py), and nothing is stored; with --memory-limit 48M (below the process's own figure)
the FDK job is refused too, naming the least it needs.
"""

import json
import os
import time

import numpy as np

import recond_harness
from recond_harness import Daemon, check, log, require_binaries, run_main, store_files
import phantom
from ooc_common import against_in_core, run

LIMIT = 64 << 20


def spec(algorithm=None):
    s = phantom.cone_spec(n=256, voxel=0.5, views=60, nu=160, nv=160, du=1.5, dv=1.5, D=400.0, S=800.0,
                          algorithm=algorithm or {"name": "fdk"}, label="out-of-core")
    s["execution"] = {"engine": "cpu"}
    s["autostart"] = False
    return s


def stack(s):
    rng = np.random.default_rng(37)
    return rng.random(recond_harness.proj_bytes(s) // 4, dtype=np.float32).tobytes()



def refused(api, store, s, what, words):
    before = store_files(store)
    st, _, body, doc = api.post_json("/v1/jobs", s)
    err = (doc or {}).get("error") or {}
    msg = err.get("message", "")
    log("%s: %d %s" % (what, st, body[:500]))
    check("%s: 422 unsupported, field volume" % what,
          st == 422 and err.get("code") == "unsupported" and err.get("field") == "volume", str(body[:300]))
    for w in words:
        check("%s: the message says %r" % (what, w), w in msg, msg)
    check("%s: nothing stored" % what, store_files(store) == before)


def main():
    require_binaries()
    s = spec()
    data = stack(s)

    d = Daemon(extra=["--memory-limit", "64M"]).start()
    api = d.api()
    job, j, ooc = run(api, s, data, "under 64M")
    plan = job["summary"].get("memory_plan") or {}
    log("plan at creation: %s" % json.dumps(plan))
    check("the plan is out of core, in several slabs", plan.get("mode") == "out_of_core" and plan.get("slabs", 0) > 1,
          json.dumps(plan))
    check("a slab reads fewer rows than the detector has", 0 < plan.get("rows", 0) < 160, json.dumps(plan))
    check("the predicted peak is under the budget", 0 < plan.get("predicted_bytes", 0) <= LIMIT
          and plan.get("budget_bytes") == LIMIT, json.dumps(plan))
    check("the job shows the plan that ran", (j.get("memory_plan") or {}).get("mode") == "out_of_core",
          json.dumps(j.get("memory_plan")))
    rss = j.get("peak_rss_mb")
    log("out of core: peak %s MiB, predicted %.1f MiB, %s s" % (rss, plan.get("predicted_bytes", 0) / 1048576.0,
                                                                 (j.get("timings") or {}).get("recon_s")))
    check("its peak_rss_mb is under the budget", rss is not None and rss * 1048576 <= LIMIT, str(rss))
    check("its peak_rss_mb is not above the prediction", rss is not None and rss * 1048576 <= plan["predicted_bytes"],
          str(rss))
    # a cancel stops it between (or within) slabs: no volume, no scratch file left
    job = api.create(s)
    api.put("/v1/jobs/%s/projections" % job["id"], data)
    api.post_json("/v1/jobs/%s/start" % job["id"], {})
    api.wait_state(job["id"], ("running", "succeeded", "failed"), timeout=60)
    # at once: its 16 slabs take under a second on an idle machine
    time.sleep(0.05)
    st, _, _, _ = api.post_json("/v1/jobs/%s/cancel" % job["id"], b"")
    j = api.wait_state(job["id"], ("succeeded", "failed", "cancelled"), timeout=60)
    check("a cancelled out-of-core job ends cancelled", j["state"] == "cancelled", "%d %s" % (st, j["state"]))
    left = [os.path.join(dp, f) for dp, _, fs in os.walk(d.store) for f in fs
            if job["id"] in dp and (f.endswith(".tmp") or f == "volume.f32")]
    jdir = os.path.join(d.store, "jobs", job["id"])
    check("it leaves no volume and no scratch file", os.path.exists(os.path.join(jdir, "projections.f32")) and not left,
          "%s %s" % (os.listdir(jdir) if os.path.isdir(jdir) else "no " + jdir, left))
    # a streaming job planned out of core waits for its whole stack, then runs from it
    ss = spec()
    ss["autostart"] = True
    job = api.create(ss)
    vb = 160 * 160 * 4
    for k in range(60):
        api.put("/v1/jobs/%s/projections/%d" % (job["id"], k), data[k * vb:(k + 1) * vb])
        if k == 29:
            time.sleep(1.5)
    j = api.wait_state(job["id"], ("succeeded", "failed", "cancelled"), timeout=240)
    fb = (j.get("stream") or {}).get("fallback") or ""
    check("a streaming job runs out of core once its views are in", j["state"] == "succeeded"
          and (j.get("memory_plan") or {}).get("mode") == "out_of_core" and "out of core" in fb,
          "%s %s %s" % (j["state"], json.dumps(j.get("error")), json.dumps(j.get("stream"))))
    st, _, vol, _ = api.get("/v1/jobs/%s/volume?format=raw" % job["id"], timeout=120)
    check("its volume is the batch one", st == 200 and vol == ooc.tobytes(), "%d %d" % (st, len(vol)))
    refused(api, d.store, spec({"name": "sirt", "iterations": 3, "projector": "raycast"}), "ray-cast sirt under 64M",
            ["needs about", "voxel-driven pair", str(LIMIT), "smaller volume", "--memory-limit"])
    d.stop()

    d = Daemon(extra=["--memory-limit", "48M"]).start()
    refused(d.api(), d.store, spec(), "fdk under 48M", ["one slice at a time out of core needs about", str(48 << 20), "--memory-limit"])
    d.stop()

    against_in_core(s, data, LIMIT, ooc)


if __name__ == "__main__":
    run_main(main)
