#!/usr/bin/env python3
"""Jobs of detector counts (input.kind "intensity") through the daemon.

Exact line integrals p of the ellipsoid phantom (phantom.py, independent of
the C code) on a cone geometry become uint16 counts
I = round(dark + (flat - dark) exp(-p)) with a per-pixel gain (flat varies
by pixel, 20 %) and a per-pixel dark field.  The flat goes up as two images
(flat - 7 and flat + 7: their average is the flat), the dark as one, over
HTTP; the counts as the whole stack.  The reference is the same job sent as
float32 line integrals computed here in double precision from the same
counts, -ln((I - dark) / (flat - dark)): the volumes must agree to 1e-4
(relative L2; float32 rounding of p is ~1e-7) for FDK, CGLS, and an
autostarted FDK that streams view by view (the worker converts each view as
it is given), and `reconctl submit --flat F --dark D`; and a parallel
SIRT job of 2 slices whose counts go up view by view (a view's rows are the
slices, scattered into the [slice][view][u] stack at 2 bytes a sample).  Against the exact p the counts' quantisation costs < 1e-2.

Dead pixels: a flat equal to the dark at 3 pixels gives dead_pixels 3 and
clamped_pixels 3 x views, the pixels interpolated (volume within 1e-2).

Clamping: 37 pixels set to 0 counts (below the dark) are counted
(input.clamped_pixels == 37 in GET /v1/jobs/{id}, 0 on the clean job); with
a bad-pixel map marking them they are interpolated and the volume stays
within 2e-2 of the reference, without it the error is larger (the check can
fail).

Noisy counts (Poisson, about 2000 photons a pixel in air): SIRT, SART, CGLS and MLEM with their
defaults each end closer to the phantom than FDK with its own.

Bad input, each a 4xx naming the field with nothing stored: a flat at or
below the dark everywhere, a flat body that is not a whole number of images,
a bad-pixel map of two images, a flat for a job of line integrals, a start
before the flat is in, a view of an autostarting job before its flat, a
float32-sized stack for a uint16 job.
"""

import json
import os
import subprocess

import numpy as np

import phantom
from recond_harness import RECONCTL, Daemon, check, log, require_binaries, run_main, tempdir
from recond_client import Client, RecondError

VIEWS, NU, NV, N = 48, 40, 40, 32
DARK0 = 100.0


def spec_of(algorithm, inp=None, autostart=False, label="counts"):
    s = phantom.cone_spec(n=N, voxel=1.0, views=VIEWS, nu=NU, nv=NV, du=1.8, dv=1.8, algorithm=algorithm,
                          label=label)
    s["autostart"] = autostart
    if inp is not None:
        s["input"] = inp
    return s


COUNTS_INPUT = {"kind": "intensity", "dtype": "uint16", "flat": "uploaded", "dark": "uploaded"}


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def expect_error(name, fn, status, field):
    try:
        fn()
    except RecondError as e:
        return check(name, e.status == status and (e.field or "") == field,
                     "%d field %r: %s" % (e.status, e.field, e.message))
    return check(name, False, "no error")


def run_job(c, spec, proj, flat=None, dark=None, bad=None):
    job = c.submit(spec, proj, flat=flat, dark=dark, bad_pixels=bad)
    c.wait(job["id"], timeout=300)
    st = c.status(job["id"])
    if st["state"] != "succeeded":
        check("job %s succeeded" % spec["label"], False, "%s %s" % (st["state"], st.get("error")))
        return None, st
    return np.frombuffer(c.get(job["id"], fmt="raw"), dtype=np.float32).astype(np.float64), st


def body():
    require_binaries()
    base = spec_of({"name": "fdk"})
    p = np.frombuffer(phantom.project_cone(base), dtype=np.float32).astype(np.float64).reshape(VIEWS, NV, NU)
    jj, ii = np.mgrid[0:NV, 0:NU]
    gain = 1.0 + 0.2 * np.sin(0.3 * ii) * np.cos(0.2 * jj)
    flat = np.round(30000.0 * gain)
    dark = np.round(DARK0 + 20.0 * ((ii + 2 * jj) % 7))
    counts = np.round(dark + (flat - dark) * np.exp(-p)).astype(np.uint16)
    p_ref = -np.log((counts.astype(np.float64) - dark) / (flat - dark))
    flat_body = np.concatenate([(flat - 7).astype(np.uint16).ravel(), (flat + 7).astype(np.uint16).ravel()]).tobytes()
    dark_body = dark.astype(np.uint16).tobytes()
    log("line integrals up to %.3f; quantisation changes p by up to %.2e" % (p.max(), np.abs(p_ref - p).max()))

    d = Daemon().start()
    c = Client(d.url, timeout=60)

    for algo in ({"name": "fdk"}, {"name": "cgls", "iterations": 6}):
        ref, _ = run_job(c, spec_of(algo, label="ref-" + algo["name"]), p_ref.astype(np.float32).tobytes())
        exact, _ = run_job(c, spec_of(algo, label="exact-" + algo["name"]), p.astype(np.float32).tobytes())
        vol, st = run_job(c, spec_of(algo, COUNTS_INPUT, label="counts-" + algo["name"]), counts.tobytes(),
                          flat=flat_body, dark=dark_body)
        if ref is None or vol is None or exact is None:
            continue
        e = rel(vol, ref)
        check("%s: counts + flat + dark equal the same job as float32 line integrals" % algo["name"], e < 1e-4,
              "rel L2 %.2e (bound 1e-4)" % e)
        e2 = rel(vol, exact)
        check("%s: against the exact line integrals only the quantisation differs" % algo["name"], e2 < 1e-2,
              "rel L2 %.2e (bound 1e-2)" % e2)
        inp = st.get("input") or {}
        check("%s: input reported, nothing clamped" % algo["name"],
              inp.get("kind") == "intensity" and inp.get("dtype") == "uint16" and inp.get("clamped_pixels") == 0,
              json.dumps(inp))
        ws = [w.get("code") for w in st.get("warnings") or []]
        check("%s: counts are checked as the line integrals they become (no pre_log warning)" % algo["name"],
              "pre_log" not in ws, json.dumps(ws))
        if algo["name"] == "fdk":
            fdk_ref = ref
            log("fdk: conversion %.4f s of the job's %.3f s" % (inp.get("convert_s", -1), st.get("timings", {}).get("run_s") or -1))

    # streaming: an autostarted FDK given its views one by one converts each as it comes
    job = c.create(spec_of({"name": "fdk"}, COUNTS_INPUT, autostart=True, label="counts-stream"))
    expect_error("a view of an autostarting job before its flat is refused",
                 lambda: c.upload(job["id"], counts[0].tobytes(), view=0), 409, "flat")
    c.upload_field(job["id"], "flat", flat_body)
    c.upload_field(job["id"], "dark", dark_body)
    for k in range(VIEWS):
        c.upload(job["id"], counts[k].tobytes(), view=k)
    c.wait(job["id"], timeout=300)
    st = c.status(job["id"])
    if check("streamed job of counts succeeded", st["state"] == "succeeded", str(st.get("error"))):
        vol = np.frombuffer(c.get(job["id"], fmt="raw"), dtype=np.float32).astype(np.float64)
        e = rel(vol, fdk_ref)
        check("streamed FDK of counts equals FDK of the line integrals", e < 1e-4,
              "rel L2 %.2e; stream %s" % (e, json.dumps(st.get("stream"))))

    # clamping and bad pixels: 37 pixels of view 5 at 0 counts (below the dark)
    rng = np.random.default_rng(3)
    hit = rng.choice(NV * NU, 37, replace=False)
    broken = counts.copy()
    broken[5].ravel()[hit] = 0
    badmap = np.zeros((NV, NU), np.uint8)
    badmap.ravel()[hit] = 1
    inp_bad = dict(COUNTS_INPUT, bad_pixels="uploaded")
    vol_nb, st_nb = run_job(c, spec_of({"name": "fdk"}, COUNTS_INPUT, label="clamped"), broken.tobytes(),
                            flat=flat_body, dark=dark_body)
    vol_b, st_b = run_job(c, spec_of({"name": "fdk"}, inp_bad, label="bad-pixels"), broken.tobytes(),
                          flat=flat_body, dark=dark_body, bad=badmap.tobytes())
    if vol_nb is not None and vol_b is not None:
        check("clamped pixels counted and reported", (st_nb.get("input") or {}).get("clamped_pixels") == 37,
              json.dumps(st_nb.get("input")))
        e_nb, e_b = rel(vol_nb, fdk_ref), rel(vol_b, fdk_ref)
        check("bad pixels interpolated from their neighbours", e_b < 2e-2 and e_b < e_nb / 3,
              "rel L2 %.2e with the map, %.2e without" % (e_b, e_nb))

    # parallel, 2 slices: the stack is [slice][view][u] and a view's rows are the slices; the counts
    # go up view by view (each scattered into its rows at 2 bytes a sample), the flat and dark are
    # nz x nu images
    pv, pnu, pnz = 30, 24, 2
    pspec = {"geometry": {"type": "parallel", "angles": {"start_deg": 0, "step_deg": 6, "count": pv},
                          "detector": {"nu": pnu, "du_mm": 1.0}, "slices": pnz},
             "volume": {"nx": 16, "ny": 16, "nz": pnz, "voxel_mm": 1.0},
             "algorithm": {"name": "sirt", "iterations": 4, "initial": "zero"}, "execution": {"engine": "cpu"}}
    ss, kk, uu = np.mgrid[0:pnz, 0:pv, 0:pnu]
    pp = 0.3 * np.exp(-((uu - 11.5) / 6.0) ** 2) * (1 + 0.2 * ss) * (1 + 0.1 * np.cos(kk * 0.2))
    pflat = np.round(20000 + 3000 * np.sin(np.mgrid[0:pnz, 0:pnu][1] * 0.4)).astype(np.float64)
    pdark = np.full((pnz, pnu), 50.0)
    pc = np.round(pdark[:, None, :] + (pflat - pdark)[:, None, :] * np.exp(-pp)).astype(np.uint16)
    ppref = -np.log((pc.astype(np.float64) - pdark[:, None, :]) / (pflat - pdark)[:, None, :])
    ref, _ = run_job(c, dict(pspec, label="par-ref"), ppref.astype(np.float32).tobytes())
    job = c.create(dict(pspec, label="par-counts", input=COUNTS_INPUT))
    c.upload_field(job["id"], "flat", pflat.astype(np.uint16).tobytes())
    c.upload_field(job["id"], "dark", pdark.astype(np.uint16).tobytes())
    for k in range(pv):
        c.upload(job["id"], np.ascontiguousarray(pc[:, k, :]).tobytes(), view=k)
    c.start(job["id"])
    c.wait(job["id"], timeout=300)
    st = c.status(job["id"])
    if ref is not None and check("parallel job of counts succeeded", st["state"] == "succeeded", str(st.get("error"))):
        vol = np.frombuffer(c.get(job["id"], fmt="raw"), dtype=np.float32).astype(np.float64)
        e = rel(vol, ref)
        check("parallel: counts uploaded view by view equal the float32 line integrals", e < 1e-4, "rel L2 %.2e" % e)

    # reconctl submit --flat F --dark D: the same volume
    tmp = tempdir()
    files = {}
    for name, data in (("spec.json", json.dumps(spec_of({"name": "fdk"}, COUNTS_INPUT, label="reconctl")).encode()),
                       ("counts.u16", counts.tobytes()), ("flat.u16", flat_body), ("dark.u16", dark_body)):
        files[name] = os.path.join(tmp, name)
        with open(files[name], "wb") as f:
            f.write(data)
    r = subprocess.run([RECONCTL, "--url", d.url, "--quiet", "submit", files["spec.json"], "--projections",
                        files["counts.u16"], "--flat", files["flat.u16"], "--dark", files["dark.u16"], "--watch"],
                       capture_output=True, timeout=300)
    jid = r.stdout.decode().strip()
    if check("reconctl submit --flat --dark succeeded", r.returncode == 0, r.stderr.decode()[-300:]):
        vol = np.frombuffer(c.get(jid, fmt="raw"), dtype=np.float32).astype(np.float64)
        e = rel(vol, fdk_ref)
        check("reconctl's job of counts equals FDK of the line integrals", e < 1e-4, "rel L2 %.2e" % e)

    # dead pixels: a flat at the dark at 3 pixels (both images) has no scale there: they are
    # interpolated as bad pixels and counted in every view
    dflat = np.stack([flat - 7, flat + 7])
    dead_at = [(3, 4), (20, 20), (39, 0)]
    for j, i in dead_at:
        dflat[:, j, i] = dark[j, i]
    vol_d, st_d = run_job(c, spec_of({"name": "fdk"}, COUNTS_INPUT, label="dead"), counts.tobytes(),
                          flat=dflat.astype(np.uint16).tobytes(), dark=dark_body)
    if vol_d is not None:
        inp = st_d.get("input") or {}
        check("dead pixels (flat = dark) counted in every view",
              inp.get("dead_pixels") == 3 and inp.get("clamped_pixels") == 3 * VIEWS, json.dumps(inp))
        e = rel(vol_d, fdk_ref)
        check("dead pixels interpolated", e < 1e-2, "rel L2 %.2e" % e)

    # bad input
    store = d.store

    def job_files(jid):
        return sorted(os.listdir(os.path.join(store, "jobs", jid)))

    job = c.create(spec_of({"name": "fdk"}, dict(COUNTS_INPUT, dark=DARK0 + 500), label="bad"))
    jid = job["id"]
    before = job_files(jid)
    low = np.full((NV, NU), DARK0 + 500, np.uint16).tobytes()
    expect_error("a flat at the dark everywhere is refused", lambda: c.upload_field(jid, "flat", low), 400, "flat")
    expect_error("a flat of 1.5 images is refused", lambda: c.upload_field(jid, "flat", flat_body[:3 * NU * NV]),
                 422, "Content-Length")
    expect_error("a flat of float32 images for a uint16 job (not a whole number of images) is refused",
                 lambda: c.upload_field(jid, "flat", flat_body[:2 * NU * NV] + b"\0\0"), 422, "Content-Length")
    expect_error("a dark for a job whose dark is a number is refused",
                 lambda: c.upload_field(jid, "dark", dark_body), 409, "input.dark")
    expect_error("a bad-pixel map the job does not take is refused",
                 lambda: c.upload_field(jid, "bad_pixels", badmap.tobytes()), 409, "input.bad_pixels")
    expect_error("a stack of float32 size for a uint16 job is refused",
                 lambda: c.upload(jid, p.astype(np.float32).tobytes()), 413, "Content-Length")
    check("nothing stored by the refused uploads", job_files(jid) == before, "%s -> %s" % (before, job_files(jid)))
    c.upload(jid, counts.tobytes())
    expect_error("start before the flat is in is refused", lambda: c.start(jid), 409, "flat")
    job = c.create(spec_of({"name": "fdk"}, inp_bad, label="bad2"))
    expect_error("a bad-pixel map of two images is refused",
                 lambda: c.upload_field(job["id"], "bad_pixels", badmap.tobytes() * 2), 413, "Content-Length")
    job = c.create(spec_of({"name": "fdk"}, label="lines"))
    expect_error("a flat for a job of line integrals is refused",
                 lambda: c.upload_field(job["id"], "flat", flat_body), 409, "input.kind")
    noisy_counts(c, p, flat, dark)
    d.stop()


def noisy_counts(c, p, flat, dark):
    """Poisson counts of a low-dose scan (about 2000 photons a pixel in air): every iterative
    method with its defaults ends closer to the phantom than FDK with its defaults, as on noisy
    line integrals (test_algos_noisy)."""
    rng = np.random.default_rng(20261129)
    f = np.round(flat * (2000.0 / 30000.0)) + dark
    mean = (f - dark) * np.exp(-p)
    counts = np.clip(rng.poisson(mean) + dark, 0, 65535).astype(np.uint16)
    flat_body = f.astype(np.uint16).tobytes()
    dark_body = dark.astype(np.uint16).tobytes()
    spec = spec_of({"name": "fdk"})
    truth = np.frombuffer(phantom.voxelise(spec), dtype=np.float32).astype(np.float64)
    errs = {}
    for name in ("fdk", "sirt", "sart", "cgls", "mlem"):
        vol, st = run_job(c, spec_of({"name": name}, COUNTS_INPUT, label="noisy-" + name), counts.tobytes(),
                          flat=flat_body, dark=dark_body)
        if vol is not None:
            errs[name] = rel(vol, truth)
    log("noisy counts, defaults: " + ", ".join("%s %.4f" % kv for kv in errs.items()))
    for name in ("sirt", "sart", "cgls", "mlem"):
        if name in errs and "fdk" in errs:
            check("noisy counts: %s's defaults end closer to the phantom than FDK's (%.4f < %.4f)"
                  % (name, errs[name], errs["fdk"]), errs[name] < errs["fdk"])


if __name__ == "__main__":
    run_main(body)
