#!/usr/bin/env python3
"""A streaming FDK job that waits for its scanner does not hold the queue
(docs/server.md "Queue and worker").  The stream receives part of its views
and runs; an ordinary job queued behind it must succeed while the stream
still waits for the rest (before, the stream held the only runner for up to
stream_idle_s, 300 s by default).  Then the rest of the views arrive and
the stream succeeds too, with the batch FDK's volume."""

import random
import time

import phantom
from recond_harness import (Daemon, check, deadline, proj_bytes, require_binaries, run_main, small_spec)
from test_stream import TOL, batch_volume, rel_max, spec_for, upload_views, volume


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    spec = spec_for(views=48, n=24, label="slow-scanner")
    data = phantom.project_cone(spec)
    batch = batch_volume(api, spec, data)
    n = spec["geometry"]["angles"]["count"]
    order = random.Random(11).sample(range(n), n)
    half = n // 2

    j = api.create(spec)
    sid = j["id"]
    err = upload_views(api, sid, spec, data, order[:half], 0.005)
    check("the stream's first views are stored", err is None, err)
    alive = deadline(30)
    jj = api.job(sid)
    while alive() and not (jj["state"] == "running" and (jj["progress"].get("views_done") or 0) >= half):
        time.sleep(0.02)
        jj = api.job(sid)
    check("the stream runs and has back-projected the views it has", jj["state"] == "running" and
          jj["progress"].get("views_done") == half, "%s %s" % (jj["state"], jj["progress"]))

    ospec = small_spec(label="ordinary")
    o = api.create(ospec)
    api.put("/v1/jobs/%s/projections" % o["id"], b"\0" * proj_bytes(ospec))
    api.post_json("/v1/jobs/%s/start" % o["id"], b"")
    oj = api.wait_state(o["id"], ("succeeded", "failed", "cancelled"), timeout=30, poll=0.05)
    check("an ordinary job queued behind a waiting stream succeeds while the stream waits",
          oj["state"] == "succeeded", "%s %s" % (oj["state"], oj.get("error")))
    sj = api.job(sid)
    check("the stream is still waiting for its views meanwhile", sj["state"] in ("running", "receiving", "queued"),
          sj["state"])
    check("the yield is logged", "event=stream_yield" in d.read_log())

    err = upload_views(api, sid, spec, data, order[half:], 0.005)
    check("the stream's other views are stored", err is None, err)
    sj = api.wait_state(sid, ("succeeded", "failed", "cancelled"), timeout=60, poll=0.05)
    check("the stream succeeds once its views have come", sj["state"] == "succeeded",
          "%s %s" % (sj["state"], sj.get("error")))
    vol = volume(api, sid)
    diff = rel_max(vol, batch) if vol and batch else 1.0
    check("the stream's volume equals the batch FDK's (max rel diff <= %g)" % TOL, diff <= TOL, "%.3g" % diff)
    d.stop()


if __name__ == "__main__":
    run_main(main)
