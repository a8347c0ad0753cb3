#!/usr/bin/env python3
"""The footprint pair's buffers in the memory prediction (core/plan/memory.h).

A cone job whose voxels project 2.5 pixels apart (2 mm voxels, magnification
2, 1.6 mm pixels) runs the footprint pair, asked for and under auto.  Its
prediction (summary.plan_memory_bytes) exceeds the same job's with ray
casting's pair by the pair's buffers (the back projection's block of views,
here the whole 24 MiB stack, one view per thread and the volume's copy), and
the measured peak (peak_rss_mb) of the run stays under the prediction.
"""

import json

import recond_harness
from recond_harness import Daemon, check, log, require_binaries, run_main, sirt_runs
import phantom

VIEWS, NU, NV, N = 128, 256, 192, 64


def spec(projector, label):
    s = phantom.cone_spec(n=N, voxel=2.0, views=VIEWS, nu=NU, nv=NV, du=1.6, dv=1.6, D=200.0, S=400.0,
                          algorithm=dict(sirt_runs(2), projector=projector), label=label)
    s["autostart"] = False
    return s


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    pred = {}
    for projector in ("raycast", "footprint", "auto"):
        job = api.create(spec(projector, "fp-mem-" + projector))
        pred[projector] = (job["id"], job["summary"].get("plan_memory_bytes"))
    log("predicted MiB: " + ", ".join("%s %.1f" % (k, v[1] / 1048576.0) for k, v in pred.items()))
    stack = 4 * VIEWS * NU * NV
    extra = pred["footprint"][1] - pred["raycast"][1]
    check("footprint: the prediction counts the block of views and the volume's copy",
          extra >= stack + 4 * N ** 3, "%d bytes more than ray casting's" % extra)
    check("auto at a 2.5 ratio is predicted as the footprint pair", pred["auto"][1] == pred["footprint"][1],
          str(pred))
    jid = pred["footprint"][0]
    st, _, body, _ = api.put("/v1/jobs/%s/projections" % jid, bytes(recond_harness.proj_bytes(spec("footprint", ""))))
    check("projections stored", st in (200, 201, 202, 204), "%d %s" % (st, body[:200]))
    api.post_json("/v1/jobs/%s/start" % jid, {})
    j = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=180)
    check("the footprint job succeeds", j["state"] == "succeeded", json.dumps(j.get("error")))
    check("it ran the footprint pair", j.get("projector") == "footprint", str(j.get("projector")))
    rss = j.get("peak_rss_mb")
    log("footprint job: predicted %.1f MiB, measured %s MiB" % (pred["footprint"][1] / 1048576.0, rss))
    check("its measured peak is not above the prediction", rss is not None and rss * 1048576 <= pred["footprint"][1],
          "%s MiB measured" % rss)
    d.stop()


if __name__ == "__main__":
    run_main(main)
