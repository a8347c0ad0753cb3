#!/usr/bin/env python3
"""Out-of-core FDK in one slab (docs/server.md "Out of core"; core/plan/ooc.h).

Under --memory-limit 64M, an FDK job whose volume (96^3, 3.4 MiB) fits but whose
stack (360 views of 160x160, 35 MiB) does not fit beside it in memory runs out
of core as one slab of the whole volume: its views filtered once into the
scratch file, the slab back-projecting their rows 32 views at a time, so it
pays each voxel column's set-up once, not once per slab.  Its summary's
memory_plan says out_of_core with 1 slab of 96 slices and a filtering pass of
several chunks, predicted under the budget; the job's measured peak_rss_mb is
under the budget; its volume equals the one a daemon without the limit
reconstructs in memory to 1e-5 (max abs difference over max abs), whose peak
is over the budget.  The data is noise, so a missing row or chunk shows.

A volume of one slice (96 x 96 x 1) from views of a displaced detector (not
filtered once: no filtering pass) whose whole stack does not fit is out of
core all the same, one slab of the rows that slice reads (memory_plan
out_of_core, 1 slab of 1 slice, 1 chunk, predicted under the budget, where
the in-memory plan is over it), its volume the in-memory one to 1e-5.
"""

import json

import numpy as np

import recond_harness
from recond_harness import Daemon, check, log, require_binaries, run_main
import phantom
from ooc_common import against_in_core, run

LIMIT = 64 << 20


def spec():
    s = phantom.cone_spec(n=96, voxel=0.5, views=360, nu=160, nv=160, du=1.5, dv=1.5, D=400.0, S=800.0,
                          algorithm={"name": "fdk"}, label="out-of-core, one slab")
    s["execution"] = {"engine": "cpu"}
    s["autostart"] = False
    return s


def one_slice_spec():
    s = phantom.cone_spec(n=96, voxel=0.5, views=200, nu=128, nv=128, du=1.6, dv=1.5, D=400.0, S=800.0,
                          algorithm={"name": "fdk"}, label="out-of-core, one slice")
    s["volume"]["nz"] = 1
    s["geometry"]["detector"]["offset_u_mm"] = 60.0
    s["execution"] = {"engine": "cpu"}
    s["autostart"] = False
    return s


def one_slice():
    s = one_slice_spec()
    data = np.random.default_rng(38).random(recond_harness.proj_bytes(s) // 4, dtype=np.float32).tobytes()
    d = Daemon().start()
    job, _, whole = run(d.api(), s, data, "one slice without a limit")
    inplan = job["summary"].get("memory_plan") or {}
    d.stop()
    log("one slice, in core: %s" % json.dumps(inplan))
    check("one slice: in core without a limit, predicted over the budget",
          inplan.get("mode") == "in_core" and inplan.get("predicted_bytes", 0) > LIMIT, json.dumps(inplan))
    d = Daemon(extra=["--memory-limit", "64M"]).start()
    job, j, ooc = run(d.api(), s, data, "one slice under 64M")
    plan = job["summary"].get("memory_plan") or {}
    ran = j.get("memory_plan") or {}
    d.stop()
    log("one slice, under 64M: %s, peak %s MiB" % (json.dumps(plan), j.get("peak_rss_mb")))
    check("one slice: out of core, one slab of its rows, no filtering pass",
          plan.get("mode") == "out_of_core" and plan.get("slabs") == 1 and plan.get("slab_nz") == 1
          and plan.get("chunks") == 1 and plan.get("rows", 128) < 128
          and 0 < plan.get("predicted_bytes", 0) <= LIMIT, json.dumps(plan))
    check("one slice: the job ran that plan", ran.get("mode") == "out_of_core", json.dumps(ran))
    peak = float(np.max(np.abs(whole)))
    err = float(np.max(np.abs(ooc.astype(np.float64) - whole))) / peak if peak > 0 else float("inf")
    check("one slice: the out-of-core volume equals the in-memory one to 1e-5", err <= 1e-5, "%.3g" % err)


def main():
    require_binaries()
    one_slice()
    s = spec()
    data = np.random.default_rng(37).random(recond_harness.proj_bytes(s) // 4, dtype=np.float32).tobytes()
    d = Daemon(extra=["--memory-limit", "64M"]).start()
    job, j, ooc = run(d.api(), s, data, "under 64M")
    plan = job["summary"].get("memory_plan") or {}
    log("plan at creation: %s" % json.dumps(plan))
    check("the plan is out of core, one slab of the whole volume after a filtering pass",
          plan.get("mode") == "out_of_core" and plan.get("slabs") == 1 and plan.get("slab_nz") == 96
          and plan.get("chunks", 0) > 1, json.dumps(plan))
    check("the predicted peak is under the budget", 0 < plan.get("predicted_bytes", 0) <= LIMIT, json.dumps(plan))
    ran = j.get("memory_plan") or {}
    check("the job ran that plan", ran.get("mode") == "out_of_core" and ran.get("slabs") == 1, json.dumps(ran))
    rss = j.get("peak_rss_mb")
    log("out of core: peak %s MiB, predicted %.1f MiB, %s s" % (rss, plan.get("predicted_bytes", 0) / 1048576.0,
                                                                 (j.get("timings") or {}).get("recon_s")))
    check("its peak_rss_mb is under the budget", rss is not None and rss * 1048576 <= LIMIT, str(rss))
    d.stop()
    against_in_core(s, data, LIMIT, ooc)


if __name__ == "__main__":
    run_main(main)
