#!/usr/bin/env python3
"""A streaming helical FDK job through the daemon (execution.stream on a helix).

The helix of test_helix_job.py (flat detector, pitch factor 1, exact line integrals built in Python),
its views uploaded one by one in scan order: the job runs before its last view, its progress reports
final_slices and final_z_mm (how far in z the volume is final) growing monotonically from the
volume's bottom face (the scan goes up) and reaching its top face, part of the volume is final before
the last view arrives, and the volume equals the batch job's of the same views (max |stream - batch| /
max |batch| <= 1e-5).  An iterative algorithm with execution.stream on a helix is refused (422,
execution.stream).  About 35 s on the shared 2-core machine (5 s of CPU).
"""

import json
import time

from recond_harness import Daemon, check, deadline, log, require_binaries, run_main
from test_helix_job import N, VOX, geometry, project, spec
from test_stream import Events, batch_volume, rel_max, upload_views, volume

TOL = 1e-5


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    g = geometry("flat")
    n = g["angles"]["count"]
    data = project(g).tobytes()
    log("flat helix: %d views, a %d^3 volume" % (n, N))

    batch = batch_volume(api, spec("helix-batch", g, {"name": "fdk"}), data)

    s = spec("helix-stream", g, {"name": "fdk"})
    s["execution"]["stream"] = True
    s["autostart"] = True
    j = api.create(s)
    jid = j["id"]
    ev = Events(d, jid)
    ev.start()
    err = upload_views(api, jid, s, data, range(n - 1), 0.005)
    check("every view but the last is stored", err is None, err)
    alive = deadline(30)
    while alive() and (api.job(jid)["progress"].get("views_done") or 0) < n - 1:
        time.sleep(0.02)
    before_last = api.job(jid)
    err = upload_views(api, jid, s, data, [n - 1], 0)
    check("the last view is stored", err is None, err)
    check("the job runs before its last view", before_last["state"] == "running" and before_last["stream"]["active"],
          "%s %s" % (before_last["state"], before_last["stream"]))
    bp = before_last["progress"]
    # the views in are said even when the upload pauses between two of the
    # worker's throttled reports
    check("before the last view, the progress counts every view in (views_done %s of %d)"
          % (bp.get("views_done"), n), bp.get("views_done") == n - 1, bp)
    check("before the last view, part of the volume is final (final_slices %s, final_z_mm %s)"
          % (bp.get("final_slices"), bp.get("final_z_mm")),
          (bp.get("final_slices") or 0) > 0 and bp.get("final_z_mm") is not None, bp)
    jj = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60, poll=0.02)
    check("the streamed helix job succeeds", jj["state"] == "succeeded", jj.get("error"))
    check("every view streamed, no fallback", jj["stream"]["views_streamed"] == n and jj["stream"]["fallback"] is None,
          jj["stream"])
    vol = volume(api, jid)
    diff = rel_max(vol, batch) if vol and batch else 1.0
    check("the streamed volume equals the batch one (max rel diff %.3g <= %g)" % (diff, TOL), diff <= TOL)
    ev.join(10)
    zs = [(p["final_slices"], p["final_z_mm"]) for p in ev.progress if "final_z_mm" in p]
    log("final (slices, z mm) in the progress events: %s" % zs)
    top = N * VOX / 2
    check("the final z grows monotonically and reaches the volume's top face (%.1f mm)" % top,
          len(zs) >= 2 and all(a[1] <= b[1] and a[0] <= b[0] for a, b in zip(zs, zs[1:]))
          and zs[-1][0] == N and abs(zs[-1][1] - top) < 1e-6, zs)
    check("previews were sent", "preview" in ev.names, sorted(set(ev.names)))

    it = spec("helix-stream-sirt", g, {"name": "sirt", "iterations": 2}, "cpu")
    it["execution"]["stream"] = True
    st, _, body, doc = api.post_json("/v1/jobs", json.dumps(it).encode())
    check("sirt with execution.stream on a helix: 422 naming execution.stream", st == 422
          and (doc or {}).get("error", {}).get("field") == "execution.stream", body[:300])
    d.stop()


if __name__ == "__main__":
    run_main(main)
