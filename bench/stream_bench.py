#!/usr/bin/env python3
"""Streaming FDK against batch FDK through the HTTP API (docs/api.md,
"Streaming FDK"): the time from the last view's 200 to `succeeded`, as a
fraction of the batch FDK's run time (target <= 10 %).

Per case, one daemon (a throwaway store on local disk) and the same
projections (synthetic: the run time does not depend on the values):
- batch: the whole stack uploaded, then start; run = the job's timings.run_s
  (started to finished, worker start and volume write included);
- stream: views uploaded one by one at a scanner's pace (acquisition =
  ACQ_FACTOR x the batch run, at least 1 s, so that the reconstruction can
  keep up as it does behind a real gantry); tail = from the last view's 200
  to the job seen `succeeded` (polled every 5 ms);
- also "as fast as possible": the views back to back, for what the upload
  alone costs.

Cases: paper 000's shape (128^3 <- 210 views of 256x200) and RabbitCT's
(512^3 <- 496 views of 1248x960); RECOND_BENCH_QUICK=1 runs a 64^3 case only.
RECOND_BENCH_ENGINE picks execution.engine (default cpu; opencl: PoCL here);
RECOND_BENCH_ONLY=text runs the cases whose name contains it.
Usage: stream_bench.py BUILD_DIR
"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) > 1:
    os.environ["RECOND_BUILD"] = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from recond_harness import Daemon, tempdir  # noqa: E402

ACQ_FACTOR = 1.2
ENGINE = os.environ.get("RECOND_BENCH_ENGINE", "cpu")


def spec(n, voxel, views, nu, nv, pix, D, S, stream, label):
    return {"label": label, "autostart": stream,
            "geometry": {"type": "cone", "source_isocenter_mm": D, "source_detector_mm": S,
                         "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views},
                         "detector": {"nu": nu, "nv": nv, "du_mm": pix, "dv_mm": pix}},
            "volume": {"nx": n, "ny": n, "nz": n, "voxel_mm": [voxel] * 3},
            "algorithm": {"name": "fdk"}, "execution": {"stream": stream, "engine": ENGINE}}


def data_for(views, nu, nv):
    import array
    row = array.array("f", [((i * 7919) % 1000) / 1000.0 for i in range(nu)])
    return (row * (nv * views)).tobytes()


def wait_done(api, jid, poll=0.005, timeout=3600):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        j = api.job(jid)
        if j["state"] in ("succeeded", "failed", "cancelled"):
            return j, time.monotonic()
        time.sleep(poll)
    raise RuntimeError("job %s did not finish" % jid)


def run_case(api, name, geo, data):
    views, nu, nv = geo[2], geo[3], geo[4]
    vb = 4 * nu * nv
    # batch
    j = api.create(spec(*geo, stream=False, label=name + " batch"))
    st = api.put("/v1/jobs/%s/projections" % j["id"], data, timeout=3600)[0]
    assert st == 200, st
    t0 = time.monotonic()
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    jb, t1 = wait_done(api, j["id"])
    assert jb["state"] == "succeeded", jb.get("error")
    batch_run = jb["timings"]["run_s"]
    rows = [(name, "batch (whole stack, then start)", batch_run, None, t1 - t0, None)]
    api.delete("/v1/jobs/" + j["id"])
    for paced in (True, False):
        acq = max(1.0, ACQ_FACTOR * batch_run) if paced else 0.0
        j = api.create(spec(*geo, stream=True, label=name + " stream"))
        jid = j["id"]
        t_start = time.monotonic()
        for k in range(views):
            due = t_start + acq * k / views
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            st = api.put("/v1/jobs/%s/projections/%d" % (jid, k), data[k * vb:(k + 1) * vb], timeout=600)[0]
            assert st == 200, st
        t_last = time.monotonic()
        js, t_done = wait_done(api, jid)
        assert js["state"] == "succeeded", js.get("error")
        assert js["stream"]["views_streamed"] == views, js["stream"]
        tail = t_done - t_last
        label = "stream, paced over %.1f s (%.0f views/s)" % (t_last - t_start, views / (t_last - t_start)) \
            if paced else "stream, views back to back (%.1f s)" % (t_last - t_start)
        rows.append((name, label, js["timings"]["run_s"], tail, None, tail / batch_run))
        api.delete("/v1/jobs/" + jid)
    return rows


def main():
    quick = os.environ.get("RECOND_BENCH_QUICK") == "1"
    cases = [("64^3 <- 90 x 96x80 (quick)", (64, 1.0, 90, 96, 80, 1.2, 500.0, 800.0))] if quick else [
        ("paper 000: 128^3 <- 210 x 256x200", (128, 0.5, 210, 256, 200, 1.0, 1000.0, 1500.0)),
        ("RabbitCT: 512^3 <- 496 x 1248x960", (512, 0.5, 496, 1248, 960, 0.308, 750.0, 1200.0)),
    ]
    only = os.environ.get("RECOND_BENCH_ONLY")
    if only:
        cases = [c for c in cases if only in c[0]]
    store = tempdir("recond-bench-stream-")
    d = Daemon(store=store).start()
    api = d.api()
    api.validate = False
    rows = []
    for name, geo in cases:
        data = data_for(geo[2], geo[3], geo[4])
        rows += run_case(api, name, geo, data)
        del data
    d.stop()
    print("Streaming FDK vs batch FDK, through the HTTP API (one daemon, %s engine, %d cores)"
          % (ENGINE, os.cpu_count()))
    print("| case | run | job run_s | last view 200 -> succeeded s | client start -> succeeded s | tail / batch run (target <= 0.10) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %s | %.3f | %s | %s | %s |" % (r[0], r[1], r[2], "%.3f" % r[3] if r[3] is not None else "",
                                                   "%.3f" % r[4] if r[4] is not None else "",
                                                   "%.3f" % r[5] if r[5] is not None else ""))


if __name__ == "__main__":
    main()
