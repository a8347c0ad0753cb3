#!/usr/bin/env python3
"""What slice previews cost a running job (docs/api.md, "Slice previews"):
the same iterative job run alone and then under 32 pollers that each fetch
a preview PNG (axes z, y, x in turn) every POLL_S seconds, as 32 open
operator pages would.  Target: the job slows by at most 5 %.

The pollers are threads of this process (one client on the same 2 cores:
their own CPU is part of the cost measured).  Prints the job's run time
alone and polled (each twice, alternating, to see the noise), the slowdown,
and the answers the pollers got (200, 304, 409 before the first snapshot,
503 when the render slots were busy).
Usage: preview_bench.py BUILD_DIR   (RECOND_BENCH_QUICK=1: a small job)
"""
import collections
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) > 1:
    os.environ["RECOND_BUILD"] = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from recond_harness import sirt_runs, Api, Daemon, tempdir  # noqa: E402
from stream_bench import data_for  # noqa: E402

POLLERS = 32
POLL_S = 0.5


def spec(n, views, nu, nv, its):
    return {"label": "preview bench", "autostart": False,
            "geometry": {"type": "cone", "source_isocenter_mm": 1000.0, "source_detector_mm": 1500.0,
                         "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views},
                         "detector": {"nu": nu, "nv": nv, "du_mm": 1.0 * 256 / nu, "dv_mm": 1.0 * 256 / nu}},
            "volume": {"nx": n, "ny": n, "nz": n, "voxel_mm": [0.5 * 128 / n] * 3},
            "algorithm": sirt_runs(its)}


def run_job(api, sp, data, pollers):
    j = api.create(sp)
    jid = j["id"]
    assert api.put("/v1/jobs/%s/projections" % jid, data, timeout=600)[0] == 200
    stop = threading.Event()
    codes = collections.Counter()
    lock = threading.Lock()

    def poll(i):
        cli = Api("http://%s:%d" % (api.host, api.port), validate=False)
        k = i
        while not stop.is_set():
            axis = "zyx"[k % 3]
            k += 1
            try:
                st = cli.get("/v1/jobs/%s/preview?axis=%s&format=png" % (jid, axis), timeout=30)[0]
            except OSError:
                st = "error"
            with lock:
                codes[st] += 1
            stop.wait(POLL_S)

    threads = [threading.Thread(target=poll, args=(i,), daemon=True) for i in range(pollers)]
    for t in threads:
        t.start()
    api.post_json("/v1/jobs/%s/start" % jid, b"")
    while True:
        jj = api.job(jid)
        if jj["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(30)
    assert jj["state"] == "succeeded", jj.get("error")
    api.delete("/v1/jobs/" + jid)
    return jj["timings"]["run_s"], codes


def main():
    quick = os.environ.get("RECOND_BENCH_QUICK") == "1"
    n, views, nu, nv, its = (64, 90, 96, 80, 5) if quick else (128, 210, 256, 200, 8)
    d = Daemon(store=tempdir("recond-bench-preview-")).start()
    api = d.api()
    api.validate = False
    sp = spec(n, views, nu, nv, its)
    data = data_for(views, nu, nv)
    alone, polled, seen = [], [], collections.Counter()
    for _ in range(2):
        alone.append(run_job(api, sp, data, 0)[0])
        t, c = run_job(api, sp, data, POLLERS)
        polled.append(t)
        seen.update(c)
    d.stop()
    a, p = min(alone), min(polled)
    print("Preview cost: SIRT %d it, %d^3 <- %d x %dx%d, alone vs %d pollers (one PNG each every %.1f s)"
          % (its, n, views, nu, nv, POLLERS, POLL_S))
    print("| run | job run_s (2 runs) | best |")
    print("| --- | --- | ---: |")
    print("| alone | %s | %.3f |" % (", ".join("%.3f" % x for x in alone), a))
    print("| %d pollers | %s | %.3f |" % (POLLERS, ", ".join("%.3f" % x for x in polled), p))
    print("slowdown %.1f %% (target <= 5 %%); preview answers: %s" % (100 * (p / a - 1),
          ", ".join("%s: %d" % (k, v) for k, v in sorted(seen.items(), key=str))))


if __name__ == "__main__":
    main()
