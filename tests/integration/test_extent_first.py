#!/usr/bin/env python3
"""A job over the budget only for the long object's predicted extension
(docs/server.md, "Out of core"; server/worker/main_recond-worker.c extent_first).

The memory prediction bounds extend "auto"'s extension from the spec
(core/plan/extend.h rc_extent_bound_nz).  A CGLS job (48^3 from 24 views of
96 x 128, rows above and below the volume's shadow; the phantom inside the
volume, so the data show no mass beyond it)
is given a --memory-limit between its prediction with algorithm.extend "off"
and with "auto": the daemon plans it out of core at creation, and the
worker, reading the data's verdict from the stack's file before it plans,
runs it in core on the asked volume (the finished job's memory_plan
in_core, extend not extended, no mass beyond), its peak under the budget and
its volume equal to the in-memory run's without a limit to 1e-6.
"""

import json

import numpy as np

from recond_harness import Daemon, check, log, require_binaries, run_main
import phantom
from ooc_common import run

N, VIEWS, NU, NV = 48, 24, 96, 128


def spec(extend="auto"):
    s = phantom.cone_spec(n=N, voxel=1.0, views=VIEWS, nu=NU, nv=NV, du=1.0, dv=1.0, D=200.0, S=400.0,
                          algorithm={"name": "cgls", "iterations": 3, "extend": extend}, label="extent-first")
    s["execution"] = {"engine": "cpu"}
    s["autostart"] = False
    return s


def main():
    require_binaries()
    s = spec()
    data = b"".join(phantom.project_view(s, k) for k in range(VIEWS))

    d = Daemon().start()
    need = {e: d.api().create(spec(e))["summary"].get("plan_memory_bytes") for e in ("auto", "off")}
    log("predicted: %s" % json.dumps(need))
    check("the extension's bound is what the prediction adds", need["off"] and need["auto"] > need["off"],
          json.dumps(need))
    _, whole_j, whole = run(d.api(), s, data, "without a limit")
    d.stop()

    limit = (need["off"] + need["auto"]) // 2
    d = Daemon(extra=["--memory-limit", str(limit)]).start()
    job, j, vol = run(d.api(), s, data, "under %d bytes" % limit)
    d.stop()
    plan = job["summary"].get("memory_plan") or {}
    log("plan at creation %s; that ran %s; extend %s; peak %s MiB" % (json.dumps(plan), json.dumps(j.get("memory_plan")),
                                                                   json.dumps(j.get("extend")), j.get("peak_rss_mb")))
    check("at creation it is planned out of core (the bound is over the budget)", plan.get("mode") == "out_of_core",
          json.dumps(plan))
    check("the worker runs it in core on the data's verdict", (j.get("memory_plan") or {}).get("mode") == "in_core",
          json.dumps(j.get("memory_plan")))
    check("not extended, no mass beyond", (j.get("extend") or {}).get("run_nz") == N
          and (j.get("extend") or {}).get("mass_beyond") is False, json.dumps(j.get("extend")))
    rss = j.get("peak_rss_mb")
    check("its peak is under the budget", rss is not None and rss * 1048576 <= limit, str(rss))
    peak = float(np.max(np.abs(whole)))
    err = float(np.max(np.abs(vol.astype(np.float64) - whole))) / peak
    log("max |under the limit - without| / max = %.3g" % err)
    check("the volume equals the run's without a limit to 1e-6", err <= 1e-6, "%.3g" % err)
    check("the same verdict as without a limit", j.get("extend") == whole_j.get("extend"),
          "%s %s" % (json.dumps(j.get("extend")), json.dumps(whole_j.get("extend"))))


if __name__ == "__main__":
    run_main(main)
