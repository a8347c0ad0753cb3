#!/usr/bin/env python3
"""Streaming FDK (execution.stream): the job reconstructs while its views
arrive one by one, and its volume equals the batch FDK of the same views.

Checks, against a real daemon and worker on loopback:
- a streamed job (views in a shuffled order, a pause between them) runs
  before its last view, reports views_done in its progress and "preview"
  events on its event stream, and ends with the batch job's volume
  (max |stream - batch| / max |batch| <= 1e-5), on a full scan and on a
  short scan (Parker weights from the geometry's angles);
- the default (execution.stream absent) streams an autostart FDK job whose
  views come one by one, and not one whose stack comes whole;
- the same on the OpenCL engine (its backend uploads the filtered views
  per group) when the host has an OpenCL device;
- a view stored again after it was back-projected: the job falls back to
  the whole stack, says so (stream.fallback), and the volume is the batch
  volume of the final views;
- once a streaming job has every view it takes no more uploads (409);
- views that stop coming: after stream_idle_s the job goes back to
  receiving (the queue goes on); the rest of the views finish it;
- kill -9 of the daemon mid-stream: after the restart the job streams
  again from the views it has, and finishes with the batch volume;
- execution.stream true where FDK cannot stream (sart, a fan geometry) is
  refused at creation (422 naming execution.stream).
"""
import json
import os
import random
import threading
import time

from recond_harness import (sirt_runs, Daemon, check, deadline, log, read_f32, run_main, tempdir, require_binaries, view_bytes)
from recond_client import Client
import phantom

TOL = 1e-5


def spec_for(views=60, n=32, stream=True, autostart=True, span=360.0, label="stream"):
    s = phantom.cone_spec(n=n, voxel=1.5, views=views, nu=48, nv=40, du=1.6, dv=1.6,
                          algorithm={"name": "fdk"}, label=label)
    s["geometry"]["angles"]["step_deg"] = span / views
    s["autostart"] = autostart
    if stream is not None:
        s["execution"]["stream"] = stream
    return s


def volume(api, jid):
    st, _, body, _ = api.get("/v1/jobs/%s/volume" % jid, timeout=60)
    return read_f32(body) if st == 200 else None


def rel_max(a, b):
    peak = max(abs(x) for x in b) or 1.0
    return max(abs(x - y) for x, y in zip(a, b)) / peak


def batch_volume(api, spec, data):
    s = json.loads(json.dumps(spec))
    s["execution"]["stream"] = False
    s["autostart"] = False
    j = api.create(s)
    api.put("/v1/jobs/%s/projections" % j["id"], data)
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    jj = api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=120)
    check("batch FDK job succeeds", jj["state"] == "succeeded", jj.get("error"))
    check("a job with execution.stream false does not stream", jj["stream"]["mode"] == "off"
          and jj["stream"]["views_streamed"] is None, jj["stream"])
    return volume(api, j["id"])


class Events(threading.Thread):
    """Reads a job's event stream; keeps the event names and progress data."""

    def __init__(self, d, jid):
        super().__init__(daemon=True)
        self.url, self.jid = d.url, jid
        self.names, self.progress = [], []

    def run(self):
        for name, data in Client(self.url).events(self.jid, idle_timeout=120):
            self.names.append(name)
            if name == "progress":
                self.progress.append(data)


def upload_views(api, jid, spec, data, order, pause=0.01):
    vb = view_bytes(spec)
    for k in order:
        st, _, body, _ = api.put("/v1/jobs/%s/projections/%d" % (jid, k), data[k * vb:(k + 1) * vb])
        if st != 200:
            return "view %d: %d %s" % (k, st, body[:200])
        time.sleep(pause)
    return None


def streamed(d, api, spec, data, batch, name, order=None, pause=0.01):
    j = api.create(spec)
    jid = j["id"]
    ev = Events(d, jid)
    ev.start()
    n = spec["geometry"]["angles"]["count"]
    order = order or random.Random(7).sample(range(n), n)
    err = upload_views(api, jid, spec, data, order[:-1], pause)
    check("%s: every view but the last is stored" % name, err is None, err)
    # the job must have started before its last view
    alive = deadline(30)
    jj = api.job(jid)
    while alive() and jj["state"] != "running":
        time.sleep(0.02)
        jj = api.job(jid)
    check("%s: the job runs before its last view arrives" % name, jj["state"] == "running"
          and jj["stream"]["active"], "%s %s" % (jj["state"], jj["stream"]))
    alive = deadline(30)
    while alive() and (api.job(jid)["progress"].get("views_done") or 0) < n - 1:
        time.sleep(0.02)
    jj = api.job(jid)
    check("%s: the progress counts the views back-projected" % name,
          jj["progress"].get("views_done") == n - 1 and jj["progress"].get("views_expected") == n, jj["progress"])
    err = upload_views(api, jid, spec, data, order[-1:], 0)
    jj = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60, poll=0.02)
    check("%s: the streamed job succeeds" % name, jj["state"] == "succeeded" and err is None, jj.get("error") or err)
    check("%s: it reports every view streamed, no fallback" % name,
          jj["stream"]["views_streamed"] == n and jj["stream"]["fallback"] is None, jj["stream"])
    vol = volume(api, jid)
    diff = rel_max(vol, batch) if vol and batch else 1.0
    check("%s: the volume equals the batch FDK's (max rel diff <= %g)" % (name, TOL), diff <= TOL, "%.3g" % diff)
    ev.join(10)
    check("%s: the event stream sends progress with views_done and preview events" % name,
          "preview" in ev.names and any("views_done" in p for p in ev.progress),
          "%d events: %s" % (len(ev.names), sorted(set(ev.names))))
    return jj


def main():
    require_binaries()
    cfg = os.path.join(tempdir("recond-stream-cfg-"), "recond.json")
    with open(cfg, "w") as f:
        json.dump({"stream_idle_s": 5}, f)  # above the device engines' 1 s group wait
    d = Daemon(config=cfg).start()
    api = d.api()

    spec = spec_for()
    data = phantom.project_cone(spec)
    batch = batch_volume(api, spec, data)
    streamed(d, api, spec, data, batch, "full scan, shuffled views")

    short = spec_for(views=48, span=220.0, label="short scan")
    sdata = phantom.project_cone(short)
    sbatch = batch_volume(api, short, sdata)
    streamed(d, api, short, sdata, sbatch, "short scan (Parker)", order=list(range(48)))

    # another engine through the same backend calls: OpenCL (PoCL on the CPU in CI)
    st, _, _, devs = api.get("/v1/devices")
    if any(dv.get("engine") == "opencl" for dv in (devs or {}).get("devices", [])):
        ocl = spec_for(label="opencl")
        ocl["execution"]["engine"] = "opencl"
        oj = streamed(d, api, ocl, data, batch, "OpenCL engine")
        check("OpenCL: the streamed job ran on the OpenCL engine", oj.get("engine") == "opencl", oj.get("engine"))
    else:
        log("no OpenCL device here: the OpenCL case is not run (it runs where PoCL is installed, as in CI)")

    # the default: an autostart FDK job whose views come one by one
    auto = spec_for(stream=None, label="auto")
    jj = streamed(d, api, auto, data, batch, "execution.stream absent, views one by one")
    check("the default mode is auto", jj["stream"]["mode"] == "auto", jj["stream"])
    j = api.create(auto)
    api.put("/v1/jobs/%s/projections" % j["id"], data)
    jj = api.wait_state(j["id"], ("succeeded", "failed"), timeout=60)
    check("auto: a whole stack runs as a batch", jj["state"] == "succeeded" and jj["stream"]["views_streamed"] is None
          and not jj["stream"]["active"], jj["stream"])

    # a view stored again after it was back-projected
    j = api.create(spec)
    jid, vb, n = j["id"], view_bytes(spec), 60
    upload_views(api, jid, spec, data, range(0, 30), 0.005)
    alive = deadline(30)
    while alive() and (api.job(jid)["progress"].get("views_done") or 0) < 30:
        time.sleep(0.02)
    bad = bytes(vb)  # zeros: a wrong view, then the right one again
    st1 = api.put("/v1/jobs/%s/projections/5" % jid, bad)[0]
    st2 = api.put("/v1/jobs/%s/projections/5" % jid, data[5 * vb:6 * vb])[0]
    upload_views(api, jid, spec, data, range(30, n), 0.005)
    jj = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60)
    check("a view stored again while streaming is taken (200, 200)", (st1, st2) == (200, 200), (st1, st2))
    check("then the job falls back to the whole stack and says so",
          jj["state"] == "succeeded" and bool(jj["stream"]["fallback"]), jj["stream"])
    vol = volume(api, jid)
    diff = rel_max(vol, batch) if vol else 1.0
    check("its volume is the batch volume of the final views", diff <= TOL, "%.3g" % diff)

    # views that stop coming, then come
    j = api.create(spec)
    jid = j["id"]
    upload_views(api, jid, spec, data, range(0, 10), 0)
    alive = deadline(20)
    jj = api.job(jid)
    seen_running = False
    while alive() and not (jj["state"] == "receiving" and seen_running):
        seen_running |= jj["state"] == "running"
        time.sleep(0.05)
        jj = api.job(jid)
    check("views that stop for stream_idle_s: the job goes back to receiving", jj["state"] == "receiving"
          and not jj["stream"]["active"], "%s %s" % (jj["state"], jj["stream"]))
    upload_views(api, jid, spec, data, range(10, n), 0)
    jj = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60)
    vol = volume(api, jid)
    diff = rel_max(vol, batch) if vol else 1.0
    check("the rest of the views finish it with the batch volume", jj["state"] == "succeeded" and diff <= TOL,
          "%s %.3g" % (jj["state"], diff))

    # once a streaming job has every view it takes no more uploads: its
    # volume is made from exactly those (here it waits behind a long job)
    blocker = phantom.cone_spec(n=48, voxel=1.0, views=90, nu=64, nv=64, du=1.2, dv=1.2,
                                algorithm=sirt_runs(2000), label="blocker")
    bj = api.create(blocker)
    g = blocker["geometry"]
    api.put("/v1/jobs/%s/projections" % bj["id"], bytes(4 * g["angles"]["count"] * 64 * 64))
    api.post_json("/v1/jobs/%s/start" % bj["id"], b"")
    api.wait_state(bj["id"], ("running",), timeout=30, poll=0.02)
    j = api.create(spec)
    jid = j["id"]
    upload_views(api, jid, spec, data, range(n - 1), 0)
    mid = api.put("/v1/jobs/%s/projections/0" % jid, data[:vb])[0]
    upload_views(api, jid, spec, data, [n - 1], 0)
    jj = api.job(jid)
    st, _, body, _ = api.put("/v1/jobs/%s/projections/0" % jid, data[:vb])
    check("a queued streaming job takes a view stored again while views are missing (200), "
          "and no upload once it has them all (409)", mid == 200 and st == 409 and jj["state"] == "queued",
          "%s %d %s %s" % (mid, st, jj["state"], body[:160]))
    api.post_json("/v1/jobs/%s/cancel" % bj["id"], b"")
    jj = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60)
    vol = volume(api, jid)
    diff = rel_max(vol, batch) if vol else 1.0
    check("then it runs (from the whole stack: every view was there when it started) to the batch volume",
          jj["state"] == "succeeded" and diff <= TOL, "%s %.3g" % (jj["state"], diff))

    # kill -9 of the daemon mid-stream
    j = api.create(spec)
    jid = j["id"]
    upload_views(api, jid, spec, data, range(0, 25), 0)
    api.wait_state(jid, ("running",), timeout=20, poll=0.02)
    d.kill9()
    d.start()
    api = d.api()
    jj = api.job(jid)
    check("after kill -9 the streaming job is back in the queue or running", jj["state"] in ("queued", "running")
          and jj["views_present"] == 25 and jj["stream"]["active"], "%s %d" % (jj["state"], jj["views_present"]))
    upload_views(api, jid, spec, data, range(25, n), 0)
    jj = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60)
    vol = volume(api, jid)
    diff = rel_max(vol, batch) if vol else 1.0
    check("it finishes after the restart with the batch volume", jj["state"] == "succeeded" and diff <= TOL,
          "%s %.3g" % (jj["state"], diff))

    # refused where FDK cannot stream
    s = spec_for()
    s["algorithm"] = {"name": "sart", "iterations": 2}
    st, _, body, doc = api.post_json("/v1/jobs", json.dumps(s).encode())
    check("execution.stream true with sart: 422 naming execution.stream", st == 422
          and (doc or {}).get("error", {}).get("field") == "execution.stream", body[:300])
    fan = {"label": "fan", "geometry": {"type": "fan", "source_isocenter_mm": 200.0, "source_detector_mm": 400.0,
                                         "angles": {"start_deg": 0, "step_deg": 3, "count": 120},
                                         "detector": {"nu": 64, "du_mm": 1.0}},
           "volume": {"nx": 32, "ny": 32, "nz": 2, "voxel_mm": [1, 1, 1]},
           "algorithm": {"name": "fdk"}, "execution": {"stream": True}}
    st, _, body, doc = api.post_json("/v1/jobs", json.dumps(fan).encode())
    check("execution.stream true on a fan geometry: 422 naming execution.stream", st == 422
          and (doc or {}).get("error", {}).get("field") == "execution.stream", body[:300])
    d.stop()


if __name__ == "__main__":
    run_main(main)
