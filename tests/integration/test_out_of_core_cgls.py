#!/usr/bin/env python3
"""Out-of-core CGLS under a memory budget (docs/server.md, "Out of core"; core/plan/ooc_iter.h).

A daemon started with --memory-limit 64M accepts a plain CGLS job (splat pair,
zero start, no TV, no stop rules, the asked volume only) whose volume (256^3, 64
MiB) and stack (24 views of 128x128) together exceed the budget: its
summary.memory_plan says out_of_core in several slabs with a predicted peak
under the budget.  It runs and succeeds with a progress line per iteration;
its volume equals the one a daemon without the limit reconstructs in memory
from the same stack with the same parameters to 1e-5 (max abs difference over
max abs), and its measured peak_rss_mb is under the budget (the in-memory
run's is over it).  A SIRT job of the same parameters is planned out of
core too.  Under the same budget a CGLS job with algorithm.extend "on"
(which would extend this cone's volume) is refused at creation (422, field
volume, the message naming algorithm.extend), and nothing is stored.  A job
with the defaults (FDK start, TV, stop rules, extend auto) runs out of core:
test_out_of_core_default.py.
"""

import json


import recond_harness
from recond_harness import Daemon, check, log, require_binaries, run_main, store_files
from ooc_common import against_in_core, cone_job, noisy_stack, run

LIMIT = 64 << 20
N, VIEWS, DET = 256, 24, 128
ALGO = {"name": "cgls", "iterations": 3, "initial": "zero", "projector": "splat", "extend": "off",
        "nonnegative": False, "tv": {"weight": 0}, "stop": {"discrepancy": 0, "stagnation": 0}}


def spec(algorithm=None):
    return cone_job(N, VIEWS, DET, algorithm or dict(ALGO), "out-of-core-cgls")


def stack(s):
    return noisy_stack(s, VIEWS, 0.05, zero_mean=False)



def main():
    require_binaries()
    s = spec()
    data = stack(s)

    d = Daemon(extra=["--memory-limit", "64M"]).start()
    api = d.api()
    job, j, ooc = run(api, s, data, "cgls under 64M")
    plan = job["summary"].get("memory_plan") or {}
    log("plan at creation: %s" % json.dumps(plan))
    check("the plan is out of core, in several slabs", plan.get("mode") == "out_of_core" and plan.get("slabs", 0) > 1,
          json.dumps(plan))
    check("the predicted peak is under the budget", 0 < plan.get("predicted_bytes", 0) <= LIMIT
          and plan.get("budget_bytes") == LIMIT, json.dumps(plan))
    check("the job shows the plan that ran", (j.get("memory_plan") or {}).get("mode") == "out_of_core",
          json.dumps(j.get("memory_plan")))
    check("it ran its iterations", (j.get("progress") or {}).get("iteration") == 3
          or j.get("iterations_done") == 3 or (j.get("result") or {}).get("iterations_done") == 3,
          json.dumps({k: j.get(k) for k in ("progress", "iterations_done")}))
    rss = j.get("peak_rss_mb")
    log("out of core: peak %s MiB, predicted %.1f MiB, %s s" % (rss, plan.get("predicted_bytes", 0) / 1048576.0,
                                                                 (j.get("timings") or {}).get("recon_s")))
    check("its peak_rss_mb is under the budget", rss is not None and rss * 1048576 <= LIMIT, str(rss))
    # SIRT with the same parameters is planned out of core too (test_ooc_iter.c runs it)
    sirt = dict(ALGO, name="sirt")
    js = api.create(spec(sirt))
    sp = js["summary"].get("memory_plan") or {}
    check("sirt under 64M is planned out of core", sp.get("mode") == "out_of_core"
          and 0 < sp.get("predicted_bytes", 0) <= LIMIT, json.dumps(sp))
    bad = dict(ALGO, extend="on")
    before = store_files(d.store)
    st, _, body, doc = api.post_json("/v1/jobs", spec(bad))
    err = (doc or {}).get("error") or {}
    log("cgls with extend on under 64M: %d %s" % (st, body[:400]))
    check("cgls with extend on under 64M: 422, field volume, names algorithm.extend",
          st == 422 and err.get("field") == "volume" and "algorithm.extend" in err.get("message", ""), body[:300])
    check("cgls with extend on under 64M: nothing stored", store_files(d.store) == before)
    d.stop()

    against_in_core(s, data, LIMIT, ooc)


if __name__ == "__main__":
    run_main(main)
