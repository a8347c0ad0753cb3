#!/usr/bin/env python3
"""The long object through the API (docs/algorithms.md "The long object"):
a body 200 mm long in an 8-slice volume on a cone scan whose rows see far
beyond it.  The default CGLS (algorithm.extend absent: auto) runs on the
volume extended in z, says so in the job's extend (run_nz > asked_nz,
mass_beyond true, voxels_factor), returns the asked 8 slices, and its
error over them (against the analytic phantom, phantom.py) is at most FDK's
and below the run with extend "off"; fdk reports no extend; a bad word is
refused at creation naming algorithm.extend, nothing stored.  A kill -9 in
the middle of the extended run resumes from its checkpoint (of the extended
volume) to the uninterrupted run's volume to 1e-5."""

import math
import os
import time

import phantom
from recond_harness import Daemon, Validation, check, deadline, log, read_f32, require_binaries, run_main

# a body much longer than the volume, an insert inside it, one beyond it
LONG_BODY = [
    ((0.0, 0.0, 0.0), (18.0, 14.0, 100.0), 0.02),
    ((5.0, -4.0, 2.0), (5.0, 4.0, 5.0), 0.015),
    ((-5.0, 5.0, 25.0), (7.0, 6.0, 10.0), 0.02),
]
ITERS = 8


def spec_for(label, algorithm, checkpoint_s=0):
    s = phantom.cone_spec(n=24, voxel=2.0, views=60, nu=40, nv=40, du=3.0, dv=3.0, algorithm=algorithm, label=label)
    s["volume"]["nz"] = 8
    s["autostart"] = False
    s["execution"]["checkpoint_s"] = checkpoint_s
    return s


def run_job(api, spec, proj, wait=True):
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], proj)
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    if not wait:
        return j["id"], None
    return j["id"], api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=240)


def volume(api, jid):
    st, _, body, _ = api.get("/v1/jobs/%s/volume" % jid)
    return read_f32(body) if st == 200 else None


def rel_diff(a, b):
    d2 = sum((float(x) - float(y)) ** 2 for x, y in zip(a, b))
    n2 = sum(float(y) ** 2 for y in b)
    return math.sqrt(d2 / n2) if n2 > 0 else float("inf")


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    spec0 = spec_for("projections", {"name": "fdk"})
    proj = phantom.project_cone(spec0, LONG_BODY)
    truth = phantom.voxelise(spec0, LONG_BODY)
    nvox = 24 * 24 * 8

    fid, f = run_job(api, spec_for("fdk", {"name": "fdk"}), proj)
    check("fdk succeeds and reports no extension", f["state"] == "succeeded" and f.get("extend") is None,
          "%s %s" % (f["state"], f.get("extend")))
    e_fdk = phantom.rel_error(volume(api, fid), truth)

    cid, c = run_job(api, spec_for("cgls-auto", {"name": "cgls"}), proj)
    ext = c.get("extend") or {}
    log("cgls auto: extend %s" % ext)
    check("the default cgls succeeds on the extended volume (extend: run_nz > asked_nz 8, mass beyond)",
          c["state"] == "succeeded" and ext.get("asked_nz") == 8 and ext.get("run_nz", 0) > 8
          and ext.get("mass_beyond") is True and ext.get("first_slice", 0) > 0, "%s %s" % (c["state"], ext))
    check("voxels_factor is run_nz / asked_nz",
          abs(ext.get("voxels_factor", 0) - ext.get("run_nz", 0) / 8.0) < 1e-9, str(ext))
    v = volume(api, cid)
    check("the volume is the asked one's size", v is not None and len(v) == nvox, str(v and len(v)))
    e_auto = phantom.rel_error(v, truth)

    oid, o = run_job(api, spec_for("cgls-off", {"name": "cgls", "extend": "off"}), proj)
    oext = o.get("extend") or {}
    check("extend off runs the asked slices only", o["state"] == "succeeded" and oext.get("run_nz") == 8
          and oext.get("mass_beyond") is None, "%s %s" % (o["state"], oext))
    e_off = phantom.rel_error(volume(api, oid), truth)
    log("relative error over the asked slices: fdk %.4f, cgls auto %.4f, cgls off %.4f" % (e_fdk, e_auto, e_off))
    check("cgls with the extension is at most fdk's error over all asked slices", e_auto <= e_fdk,
          "auto %.4f, fdk %.4f" % (e_auto, e_fdk))
    check("and below its run without it", e_auto < e_off, "auto %.4f, off %.4f" % (e_auto, e_off))

    # a bad word: refused at creation, naming the field, nothing stored
    n_before = len((api.get("/v1/jobs")[3] or {}).get("jobs", []))
    for bad, algo in (("a word", {"name": "sart", "extend": "sideways"}), ("on fdk", {"name": "fdk", "extend": "on"}),
                      ("a number", {"name": "mlem", "extend": 1})):
        st, _, body, doc = api.post_json("/v1/jobs", spec_for("bad", algo))
        field = ((doc or {}).get("error") or {}).get("field") if isinstance(doc, dict) else None
        check("extend %s is refused (4xx) naming algorithm.extend" % bad,
              400 <= st < 500 and (field == "algorithm.extend" or b"algorithm.extend" in body), "%d %s" % (st, body[:200]))
    n_after = len((api.get("/v1/jobs")[3] or {}).get("jobs", []))
    check("nothing stored for the refusals", n_after == n_before, "%d -> %d" % (n_before, n_after))

    # a kill -9 mid-run: the extended state resumes to the uninterrupted volume
    algo = {"name": "cgls", "iterations": ITERS, "initial": "zero", "stop": {"stagnation": 0, "discrepancy": 0}}
    rid, r = run_job(api, spec_for("reference", algo), proj)
    check("the uninterrupted extended run succeeds", r["state"] == "succeeded" and (r.get("extend") or {}).get("run_nz", 0) > 8,
          "%s %s" % (r["state"], r.get("extend")))
    ref = volume(api, rid)
    jid, _ = run_job(api, spec_for("resumed", algo, 0.001), proj, wait=False)
    alive = deadline(120)
    j = api.job(jid)
    while alive() and j["state"] in ("queued", "running") and (j.get("progress") or {}).get("iteration", 0) < 3:
        time.sleep(0.01)
        j = api.job(jid)
    at = (j.get("progress") or {}).get("iteration", 0)
    ckpt = os.path.join(d.store, "jobs", jid, "checkpoint.bin")
    check("the extended run keeps a checkpoint", j["state"] == "running" and os.path.exists(ckpt),
          "%s %s" % (j["state"], j.get("progress")))
    d.kill9()
    d.start()
    api = d.api()
    j = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=240)
    rfi = j.get("resumed_from_iteration")
    log("interrupted at iteration %d, resumed from %s" % (at, rfi))
    check("it resumed from its checkpoint and succeeded", j["state"] == "succeeded" and isinstance(rfi, int) and rfi >= 1,
          "%s %s %s" % (j["state"], rfi, j.get("error")))
    diff = rel_diff(volume(api, jid), ref)
    log("resumed against uninterrupted: %.3g" % diff)
    check("the resumed volume equals the uninterrupted one to 1e-5", diff <= 1e-5, "%.3g" % diff)
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
