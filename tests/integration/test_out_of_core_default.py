#!/usr/bin/env python3
"""Out-of-core CGLS with a job's defaults (docs/server.md, "Out of core"; core/plan/ooc_iter.h).

A daemon started with --memory-limit 64M accepts a CGLS job that names only
the algorithm and its iterations: the defaults (docs/algorithms.md) start
from FDK, add TV with the weight the data's noise sets, stop on the
discrepancy and stagnation rules and leave algorithm.extend "auto".  Its
volume (160^3, 16 MiB) and the in-core vectors with TV (four volumes and two
stacks) exceed the budget, so it is planned out of core; the phantom lies
inside the volume and the noise has zero mean, so the data show no mass
beyond it and the run is not extended.  It succeeds with its peak_rss_mb
under the budget, stops after the same iteration as the in-memory run of a
daemon without the limit (for the same reason, if any), and its volume equals
that run's to 1e-5 (max abs difference over max abs).  It reports the same
TV weight and the same verdict on the long object (no mass beyond, not
extended) as the in-memory run.  Default MLEM and SIRT jobs of the same size
are planned out of core too.
"""

import json


from recond_harness import Daemon, check, log, require_binaries, run_main
from ooc_common import cone_job, noisy_stack, ran_out_of_core, run, same_stop_in_core

LIMIT = 64 << 20
N, VIEWS, DET, ITER = 160, 24, 128, 4


def spec():
    return cone_job(N, VIEWS, DET, {"name": "cgls", "iterations": ITER}, "out-of-core-default")


def stack(s):
    return noisy_stack(s, VIEWS, 0.02, zero_mean=True)


def main():
    require_binaries()
    s = spec()
    data = stack(s)

    d = Daemon(extra=["--memory-limit", "64M"]).start()
    job, j, ooc = run(d.api(), s, data, "default cgls under 64M")
    ran_out_of_core(job, j, LIMIT, "default job")
    # MLEM and SIRT with their defaults are planned out of core too (test_ooc_iter.c runs them)
    for name in ("mlem", "sirt"):
        o = spec()
        o["algorithm"] = {"name": name, "iterations": ITER}
        mp = d.api().create(o)["summary"].get("memory_plan") or {}
        check("default %s under 64M is planned out of core" % name, mp.get("mode") == "out_of_core"
              and 0 < mp.get("predicted_bytes", 0) <= LIMIT, json.dumps(mp))
    d.stop()

    w = same_stop_in_core(s, data, LIMIT, ooc, j)
    log("tv_weight %s and %s, extend %s and %s" % (j.get("tv_weight"), w.get("tv_weight"), json.dumps(j.get("extend")),
                                                   json.dumps(w.get("extend"))))
    check("the same TV weight from the data's noise as in memory",
          j.get("tv_weight") and w.get("tv_weight") and abs(j["tv_weight"] - w["tv_weight"]) <= 1e-12 * w["tv_weight"],
          "%s %s" % (j.get("tv_weight"), w.get("tv_weight")))
    check("the long object's verdict as in memory: no mass beyond, not extended",
          (j.get("extend") or {}).get("run_nz") == N and (j.get("extend") or {}).get("mass_beyond") is False
          and j.get("extend") == w.get("extend"), "%s %s" % (json.dumps(j.get("extend")), json.dumps(w.get("extend"))))


if __name__ == "__main__":
    run_main(main)
