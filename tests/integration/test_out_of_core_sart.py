#!/usr/bin/env python3
"""Out-of-core SART with a job's defaults (docs/server.md, "Out of core"; core/plan/ooc_iter.h).

A daemon started with --memory-limit 64M accepts a SART job that names only
the algorithm and its iterations: its default ordered subsets (views / 10: 4
blocks of 10 views), the FDK start, TV with the weight the data's noise sets
(3 steps per block), the stop rules.  Its volume (160^3, 16 MiB) and the
in-core vectors exceed the budget, so it is planned out of core in blocks of
views (memory_plan.chunks 4).  It succeeds with its peak_rss_mb under the
budget, stops after the same iteration as the in-memory run of a daemon
without the limit, and its volume equals that run's to 1e-5 (max abs
difference over max abs).  An OS-EM job (MLEM with 4 subsets) of the same
size is planned out of core too (test_ooc_iter.c runs it against memory).
"""

import json

from recond_harness import Daemon, check, log, require_binaries, run_main
from ooc_common import cone_job, noisy_stack, ran_out_of_core, run, same_stop_in_core

LIMIT = 64 << 20
N, VIEWS, DET, ITER = 160, 40, 128, 4


def spec():
    return cone_job(N, VIEWS, DET, {"name": "sart", "iterations": ITER}, "out-of-core-sart")


def main():
    require_binaries()
    s = spec()
    data = noisy_stack(s, VIEWS, 0.02, zero_mean=True)

    d = Daemon(extra=["--memory-limit", "64M"]).start()
    job, j, ooc = run(d.api(), s, data, "default sart under 64M")
    ran_out_of_core(job, j, LIMIT, "default sart job, in its 4 blocks of views,", chunks=4)
    o = spec()
    o["algorithm"] = {"name": "mlem", "iterations": ITER, "subsets": 4}
    mp = d.api().create(o)["summary"].get("memory_plan") or {}
    check("os-em (mlem, 4 subsets) under 64M is planned out of core", mp.get("mode") == "out_of_core"
          and mp.get("chunks") == 4 and 0 < mp.get("predicted_bytes", 0) <= LIMIT, json.dumps(mp))
    d.stop()

    same_stop_in_core(s, data, LIMIT, ooc, j)


if __name__ == "__main__":
    run_main(main)
