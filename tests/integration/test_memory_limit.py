#!/usr/bin/env python3
"""The memory check at POST /v1/jobs (docs/server.md, "Memory").

A daemon started with --memory-limit 64M refuses a job whose worker is
predicted (core/plan/memory.h) to need more and that cannot run out of core
(FDK and the iterative methods with a voxel-driven pair do: test_out_of_core.py,
test_out_of_core_cgls.py, test_out_of_core_sart.py; ray casting does not add up
over slabs): 64^3 SART with algorithm.projector "raycast" from 90 views of 128x128
(the process, a 5.9 MB stack, its vectors, the volumes) is 422
`unsupported`, field `volume`, the message naming the bytes needed (the
prediction, which the unit test holds within 30 % above measured peaks), the
budget (67108864) and what to change; nothing is stored.  Where the long
object's extension (bounded from the spec) is what does not fit, the
message says what the job needs with algorithm.extend "off".  A small job
(16^3 from 24 views of 24x24: predicted ~50 MiB) is accepted, shows its
prediction as summary.plan_memory_bytes, runs and succeeds, and its
measured peak_rss_mb is not above the prediction.  The same limit from the
config file (`"memory_limit": "64M"`) refuses the same job; a bad value is
refused at start.  A daemon without the flag (the machine's memory less its
reserve) accepts the usual small jobs and the 64^3 one.
"""

import json
import os
import re
import subprocess

import recond_harness
from recond_harness import Daemon, check, log, require_binaries, run_main, small_spec, store_files, tempdir
import phantom

LIMIT = 64 << 20


def big_spec():
    s = phantom.cone_spec(n=64, voxel=1.0, views=90, nu=128, nv=128, du=1.5, dv=1.5,
                          algorithm={"name": "sart", "iterations": 3, "projector": "raycast"},
                          label="too-big-for-64M")
    return s


def refused(api, store, what):
    before = store_files(store)
    st, _, body, doc = api.post_json("/v1/jobs", big_spec())
    err = (doc or {}).get("error") or {}
    msg = err.get("message", "")
    log("%s: %d %s" % (what, st, body[:400]))
    check("%s: 422 unsupported, field volume" % what,
          st == 422 and err.get("code") == "unsupported" and err.get("field") == "volume", str(body[:300]))
    need = [int(x) for x in re.findall(r"needs about (\d+) bytes", msg)]
    check("%s: the message names the bytes needed (over the budget)" % what, need and need[0] > LIMIT, msg)
    check("%s: the message names the budget" % what, str(LIMIT) in msg, msg)
    check("%s: the message says what to change" % what,
          "smaller volume" in msg and "fewer views" in msg and "--memory-limit" in msg, msg)
    check("%s: nothing stored" % what, store_files(store) == before and api.job_ids() == [])


def main():
    require_binaries()
    # --memory-limit 64M
    d = Daemon(extra=["--memory-limit", "64M"]).start()
    api = d.api()
    refused(api, d.store, "--memory-limit 64M")
    # where the long object's extension (bounded from the spec) is what does
    # not fit, the refusal says what the asked volume alone needs
    ext = phantom.cone_spec(n=59, voxel=1.0, views=24, nu=128, nv=128, du=1.5, dv=1.5,
                            algorithm={"name": "sart", "iterations": 3, "projector": "raycast"},
                            label="extension-over-64M")
    st, _, body, doc = api.post_json("/v1/jobs", ext)
    msg = ((doc or {}).get("error") or {}).get("message", "")
    log("sart whose extension does not fit: %d %s" % (st, body[:400]))
    off = [int(x) for x in re.findall(r"in core, (\d+) with algorithm.extend \"off\"", msg)]
    check("a job whose extension does not fit: 422 naming algorithm.extend \"off\" and what it needs then",
          st == 422 and off and off[0] <= LIMIT and msg.endswith("raise --memory-limit"), msg)
    spec = small_spec(autostart=False)
    job = api.create(spec)
    pred = job["summary"].get("plan_memory_bytes")
    check("a small job is accepted under 64M, its prediction shown", isinstance(pred, int) and 0 < pred <= LIMIT,
          str(pred))
    st, _, body, _ = api.put("/v1/jobs/%s/projections" % job["id"], bytes(recond_harness.proj_bytes(spec)))
    check("its projections are stored", st in (200, 201, 202, 204), "%d %s" % (st, body[:200]))
    api.post_json("/v1/jobs/%s/start" % job["id"], {})
    j = api.wait_state(job["id"], ("succeeded", "failed", "cancelled"), timeout=120)
    check("the small job succeeds", j["state"] == "succeeded", json.dumps(j.get("error")))
    rss = j.get("peak_rss_mb")
    log("small job: predicted %.1f MiB, measured %s MiB" % (pred / 1048576.0, rss))
    check("its measured peak is not above the prediction", rss is not None and rss * 1048576 <= pred,
          "%s MiB measured, %.1f MiB predicted" % (rss, pred / 1048576.0))
    d.stop()

    # the config key, in its string form
    cfg = os.path.join(tempdir("recond-cfg-"), "recond.json")
    with open(cfg, "w") as f:
        json.dump({"memory_limit": "64M"}, f)
    d = Daemon(config=cfg).start()
    refused(d.api(), d.store, "memory_limit \"64M\" in the config")
    d.stop()

    # a bad value is refused at start, naming the option
    p = subprocess.run([recond_harness.RECOND, "--memory-limit", "12X", "--store", tempdir("recond-store-")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    check("--memory-limit 12X is refused at start", p.returncode != 0 and b"memory-limit" in p.stdout,
          p.stdout.decode(errors="replace")[:300])

    # without the flag: the machine's memory less its reserve
    d = Daemon().start()
    api = d.api()
    for s in (small_spec(), big_spec()):
        st, _, body, doc = api.post_json("/v1/jobs", s)
        check("without --memory-limit: %s accepted" % s["label"], st == 201, "%d %s" % (st, body[:300]))
    d.stop()


if __name__ == "__main__":
    run_main(main)
