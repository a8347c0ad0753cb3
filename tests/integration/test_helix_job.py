#!/usr/bin/env python3
"""A helix job through the daemon: geometry.type "helix".

Exact line integrals of phantom.py's ellipsoids along rays built here from docs/api.md's helix
formulas (source (D cos t, D sin t, z_k), z_k = z_start + pitch (t_k - t_0) / 360 deg, the cone's
detector centred at that height; independent of the C code), flat and curved detectors:
D 200 mm, S 400 mm, 40 x 16 pixels of 1.5 mm (12 mm at the axis), pitch factor 1 (12 mm), 60 views
per turn; a 20^3 volume of 1.2 mm inside the covered range.

- fdk (the helical FDK) on engine auto and cgls on engine cpu succeed, under BOUND against the
  voxelised phantom; the same data reconstructed as a circular cone (pitch 0) is clearly worse
  (the pitch is used);
- refusals at creation, nothing stored: a pitch beyond the window (400, geometry.pitch_mm), a
  volume beyond the covered range (400, volume), engine opencl (422, execution.engine).

Measured (2026-11-29, this machine): flat fdk 0.0785, cgls (10 iterations) 0.0565; curved fdk
0.0788; the flat data read as pitch 0: 0.4988.  Bound 0.2.  About 15 s.
"""

import array
import math

from phantom import DEFAULT_PHANTOM, chord, rel_error, voxelise
from recond_harness import Daemon, check, log, read_f32, require_binaries, run_main
from recond_client import Client, RecondError

D, S, NU, NV, DU, VIEWS_TURN = 200.0, 400.0, 40, 16, 1.5, 60
H_ISO = NV * DU * D / S
N, VOX = 20, 1.2
BOUND = 0.2
# the phantom scaled into the 24 mm volume
PHANTOM = [((c[0] * 0.8, c[1] * 0.8, c[2] * 0.8), (a[0] * 0.8, a[1] * 0.8, a[2] * 0.8), mu)
           for c, a, mu in DEFAULT_PHANTOM]


def geometry(shape, pitch_factor=1.0, views=None):
    pitch = pitch_factor * H_ISO
    # the covered range (docs/geometry.md "Helix"): margin |pitch| (1/2 + gamma/pi) + dv (D + R) / S
    r = math.hypot(N * VOX / 2, N * VOX / 2)
    m = pitch * (0.5 + math.asin(r / D) / math.pi) + DU * (D + r) / S
    z0 = -(N - 1) / 2 * VOX - m - 0.5
    n = views or int(math.ceil((2 * -z0) / pitch * VIEWS_TURN)) + 1
    return {
        "type": "helix", "source_isocenter_mm": D, "source_detector_mm": S, "pitch_mm": pitch,
        "z_start_mm": z0, "angles": {"start_deg": 0.0, "step_deg": 360.0 / VIEWS_TURN, "count": n},
        "detector": {"nu": NU, "nv": NV, "du_mm": DU, "dv_mm": DU, "shape": shape},
    }


def project(g):
    a = g["angles"]
    out = array.array("f")
    for k in range(a["count"]):
        t = math.radians(a["start_deg"] + k * a["step_deg"])
        ct, st = math.cos(t), math.sin(t)
        z = g["z_start_mm"] + g["pitch_mm"] * k * a["step_deg"] / 360.0
        src = (D * ct, D * st, z)
        for j in range(NV):
            vm = (j - (NV - 1) / 2.0) * DU
            for i in range(NU):
                um = (i - (NU - 1) / 2.0) * DU
                if g["detector"]["shape"] == "curved":
                    aa, bb = S * math.cos(um / S), S * math.sin(um / S)
                else:
                    aa, bb = S, um
                # n = -(ct, st, 0), e_u = (-st, ct, 0)
                d = (-aa * ct - bb * st, -aa * st + bb * ct, vm)
                ln = math.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
                d = (d[0] / ln, d[1] / ln, d[2] / ln)
                out.append(sum(chord(src, d, e) for e in PHANTOM))
    return out


def spec(label, g, algorithm, engine="auto"):
    return {"label": label, "geometry": g, "volume": {"nx": N, "ny": N, "nz": N, "voxel_mm": [VOX] * 3},
            "algorithm": algorithm, "execution": {"engine": engine}, "priority": 5}


def run_job(c, sp, data, ref):
    job = c.submit(sp, data.tobytes())
    final = None
    for ev, ed in c.watch(job["id"], timeout=240):
        if ev == "end":
            final = ed
    ok = final and final["state"] == "succeeded"
    check("%s succeeded" % sp["label"], ok, "state %s error %s" % (final and final["state"], final and final.get("error")))
    if not ok:
        return None
    e = rel_error(read_f32(c.get(job["id"], fmt="raw")), ref)
    log("%s: relative L2 error %.4f" % (sp["label"], e))
    return e


def refused(c, sp, status, field):
    before = len(c.list() or [])
    try:
        c.create(sp)
        check("%s refused" % sp["label"], False, "accepted")
    except RecondError as e:
        check("%s refused: %s %s (%s)" % (sp["label"], e.status, e.field, e.message[:80]),
              e.status == status and e.field == field, "want %d %s" % (status, field))
    check("%s: nothing stored" % sp["label"], len(c.list() or []) == before)


def main():
    require_binaries()
    d = Daemon().start()
    c = Client(d.url, timeout=30)
    ref = voxelise(spec("ref", geometry("flat"), {"name": "fdk"}), PHANTOM)
    for shape in ("flat", "curved"):
        g = geometry(shape)
        data = project(g)
        log("%s helix: %d views" % (shape, g["angles"]["count"]))
        e = run_job(c, spec("helix-fdk-" + shape, g, {"name": "fdk"}), data, ref)
        if e is not None:
            check("%s helical FDK: error %.4f below %.2f" % (shape, e, BOUND), e < BOUND)
        if shape == "flat":
            ec = run_job(c, spec("helix-cgls-flat", g, {"name": "cgls", "iterations": 10}, "cpu"), data, ref)
            if ec is not None:
                check("flat helix cgls: error %.4f below %.2f" % (ec, BOUND), ec < BOUND)
            g0 = dict(g, pitch_mm=0.0, z_start_mm=0.0)
            e0 = run_job(c, spec("helix-as-circle", g0, {"name": "fdk"}), data, ref)
            if e0 is not None and e is not None:
                check("the same data as pitch 0 is clearly worse: %.4f > 2 x %.4f" % (e0, e), e0 > 2 * e)
    g = geometry("flat")
    refused(c, spec("pitch-too-large", dict(g, pitch_mm=2.2 * H_ISO), {"name": "fdk"}), 400, "geometry.pitch_mm")
    sp = spec("volume-outside", g, {"name": "fdk"})
    sp["volume"]["center_mm"] = [0.0, 0.0, 8.0]
    refused(c, sp, 400, "volume")
    refused(c, spec("helix-on-opencl", g, {"name": "fdk"}, "opencl"), 422, "execution.engine")
    d.stop()


if __name__ == "__main__":
    run_main(main)
