#!/usr/bin/env python3
"""Geometries imported from ASTRA: sinograms that ASTRA itself made, on ASTRA's own geometries,
reconstructed by recond through its HTTP API after peers_map.astra_to_recond turned ASTRA's
geometry into a job spec (docs/geometry.md, "Importing geometries from ASTRA and RTK").

The phantom is an ASTRA image (row 0 at +y, docs/geometry.md): a 2-D Shepp-Logan with an
off-centre disk, 64 x 64 pixels, ASTRA's default volume window (one unit = one pixel, here
0.5 mm: unit_mm = 0.5, so recond's volume in 1/mm is ASTRA's image / 0.5).  ASTRA's FP_CPU
(`line_fanflat`, `line`) makes the sinograms, of the phantom drawn on a 4x finer grid over the
same window (so that neither tool reconstructs data of its own discrete model):

- fan: `fanflat` (source 160, detector 80 units from the axis, 112 bins of 1.4 units), angles
  over the full circle that start at 17.8 degrees and are jittered by up to 0.3 of their step
  (non-uniform), the detector shifted by 3.5 bins (astra.geom_postalignment: a fanflat_vec);
  recond SIRT (100 iterations), CGLS (8) and FBP (`fdk`, engines auto (the CPU engine) and
  tensor) against ASTRA's SIRT and CGLS (ASTRA's
  CPU FBP takes the plain `parallel` geometry only, so recond's fan FBP is held to the phantom
  alone);
- fan, bins reversed: the same fanflat_vec with u negated (astra_to_recond reverses each row);
  CGLS;
- parallel: `parallel`, 96 bins of 0.9 units, 120 views over 180 degrees from 31 degrees; recond
  CGLS and FBP (auto and tensor) against ASTRA's CGLS and FBP;
- parallel, shifted: the same with the detector shifted by −2.25 bins (a parallel_vec); CGLS
  against ASTRA's, FBP against the phantom.

Each recond volume, brought back to ASTRA's image layout and units with the mapping's
from_recond, must be within 0.25 of the phantom (relative L2 in a disk of radius 28 pixels) and
at most 0.03 above the error of ASTRA's own reconstruction (the same algorithm and iterations,
`line` projectors) of the same sinogram.  The same fan CGLS job mapped wrongly (angle sign
flipped; u mirrored) must be more than twice as far off, so the test can fail.

Measured (2 shared cores): fan SIRT 0.161 (ASTRA 0.176), CGLS 0.185 (0.186), FBP 0.162 (the
same on tensor); reversed bins CGLS 0.185 (0.186); parallel CGLS 0.196 (0.182), FBP 0.160 (the
same on tensor; ASTRA 0.215);
shifted parallel CGLS 0.180 (0.176), FBP 0.148; the wrong mappings 0.76 (angle sign) and 0.89
(u mirrored); about 14 s in all.
Also checked: peers_map.astra_vectors equals astra.geom_2vec for fanflat and parallel.

Runs in build/peers-venv when `make bench-peers` has made it, else in $RECOND_BUILD/astra-venv
(numpy and astra-toolbox, pinned, from PyPI; made on first use, about 30 s and 0.7 GB), so `make
test` runs it; PyPI unreachable: fails with the reason, unless RECOND_OFFLINE=1 (then exit 77 when
neither venv is there), as test_contract.py does.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import recond_harness
    recond_harness.run_in_peers_venv(__file__, "astra-venv", recond_harness.ASTRA_PKGS, recond_harness.ASTRA_PROBE)

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import numpy as np  # noqa: E402
import astra  # noqa: E402

from recond_harness import Daemon, check, log, require_binaries, run_main  # noqa: E402
from recond_client import Client  # noqa: E402
import peers_map  # noqa: E402

N = 64
FINE = 4
UNIT_MM = 0.5
MASK_R = 28.0
# 2-D Shepp-Logan (peers_map's table at z = 0, in units of the half width) plus an off-centre disk
# that makes any flip visible: (x, y, a, b, phi_deg, mu per unit)
ELLIPSES = [(r[0], r[1], r[3], r[4], r[6], r[7] * 0.1) for r in peers_map.SHEPP_LOGAN if r[2] == 0] + \
    [(0.42, -0.38, 0.09, 0.09, 0.0, 0.06)]
# recond's "plain" methods (docs/peers.md): what ASTRA runs
PLAIN = {"subsets": 1, "nonnegative": False, "tv": {"weight": 0}, "stop": {"discrepancy": 0, "stagnation": 0},
         "initial": "zero"}
ITERS = {"sirt": 100, "cgls": 8}
# bounds on the relative L2 against the phantom, and how far above ASTRA's own error recond may be
BOUND = {"sirt": 0.25, "cgls": 0.25, "fdk": 0.25}
MARGIN = 0.03
WRONG_FACTOR = 2.0  # a wrong mapping's error must exceed this times the right one's


def phantom(vg, sub=4):
    """The phantom as an ASTRA image [row][col]: column c at x = minX + (c + 1/2)·px, row r at
    y = maxY − (r + 1/2)·py (ASTRA's image orientation), sub x sub samples per pixel."""
    o = vg["option"]
    rows, cols = vg["GridRowCount"], vg["GridColCount"]
    px, py = (o["WindowMaxX"] - o["WindowMinX"]) / cols, (o["WindowMaxY"] - o["WindowMinY"]) / rows
    f = (np.arange(sub) + 0.5) / sub
    x = o["WindowMinX"] + (np.arange(cols)[:, None] + f[None, :]).ravel() * px
    y = o["WindowMaxY"] - (np.arange(rows)[:, None] + f[None, :]).ravel() * py
    X, Y = np.meshgrid(x, y)
    half = (o["WindowMaxX"] - o["WindowMinX"]) / 2 * 0.94
    img = np.zeros_like(X)
    for cx, cy, a, b, phi, mu in ELLIPSES:
        c, s = np.cos(np.radians(phi)), np.sin(np.radians(phi))
        dx, dy = X - cx * half, Y - cy * half
        u, w = (c * dx + s * dy) / (a * half), (-s * dx + c * dy) / (b * half)
        img += mu * (u * u + w * w <= 1.0)
    return img.reshape(rows, sub, cols, sub).mean(axis=(1, 3)).astype(np.float32)


def mask(vg):
    o = vg["option"]
    rows, cols = vg["GridRowCount"], vg["GridColCount"]
    x = o["WindowMinX"] + (np.arange(cols) + 0.5) * (o["WindowMaxX"] - o["WindowMinX"]) / cols
    y = o["WindowMaxY"] - (np.arange(rows) + 0.5) * (o["WindowMaxY"] - o["WindowMinY"]) / rows
    return x[None, :] ** 2 + y[:, None] ** 2 <= MASK_R ** 2


def err(x, ref, m):
    return float(np.linalg.norm((x - ref)[m]) / np.linalg.norm(ref[m]))


def projector(pg, vg):
    kind = "line_fanflat" if pg["type"].startswith("fanflat") else "line"
    return astra.create_projector(kind, pg, vg)


def astra_sino(pg, vg, img):
    pid = projector(pg, vg)
    try:
        sid, sino = astra.create_sino(img, pid)
        astra.data2d.delete(sid)
    finally:
        astra.projector.delete(pid)
    return sino


def astra_recon(pg, vg, sino, algo):
    """ASTRA's own CPU reconstruction (SIRT, CGLS, FBP) of the sinogram, as an image."""
    pid = projector(pg, vg)
    sid = astra.data2d.create("-sino", pg, sino)
    rid = astra.data2d.create("-vol", vg, 0.0)
    cfg = astra.astra_dict({"sirt": "SIRT", "cgls": "CGLS", "fdk": "FBP"}[algo])
    cfg.update(ProjectorId=pid, ProjectionDataId=sid, ReconstructionDataId=rid)
    aid = astra.algorithm.create(cfg)
    try:
        astra.algorithm.run(aid, ITERS.get(algo, 1))
        return astra.data2d.get(rid)
    finally:
        astra.algorithm.delete(aid)
        astra.data2d.delete([sid, rid])
        astra.projector.delete(pid)


def recond_recon(c, label, pg, vg, sino, algo, engine="auto", **wrong):
    """The sinogram reconstructed by recond: astra_to_recond's spec and stack, uploaded, started,
    waited for, downloaded, and brought back to ASTRA's image layout."""
    m = peers_map.astra_to_recond(pg, vg, unit_mm=UNIT_MM, **wrong)
    a = {"name": algo}
    if algo != "fdk":
        a.update(PLAIN, iterations=ITERS[algo])
    spec = {"label": label, "geometry": m["geometry"], "volume": m["volume"], "algorithm": a,
            "execution": {"engine": engine}}
    job = c.submit(spec, m["to_recond"](sino).tobytes())
    final = c.wait(job["id"], timeout=300)
    if not final or final.get("state") != "succeeded":
        raise AssertionError("%s: job ended %s: %s" % (label, final and final.get("state"), final and final.get("error")))
    vol = np.frombuffer(c.get(job["id"], fmt="raw"), np.float32).reshape(1, vg["GridRowCount"], vg["GridColCount"])
    return m["from_recond"](vol)[0], final


def fan_geometry():
    rng = np.random.default_rng(20261126)
    k = np.arange(120)
    step = 2 * np.pi / len(k)
    angles = np.radians(17.8) + (k + rng.uniform(-0.3, 0.3, len(k))) * step
    pg = astra.create_proj_geom("fanflat", 1.4, 112, angles, 160.0, 80.0)
    return astra.geom_postalignment(pg, 3.5)


def parallel_geometry():
    angles = np.radians(31.0) + np.arange(120) * np.pi / 120
    return astra.create_proj_geom("parallel", 0.9, 96, angles)


def check_vectors():
    for pg in (astra.create_proj_geom("fanflat", 1.3, 7, np.array([0.3, 1.0, 4.0]), 100.0, 50.0),
               astra.create_proj_geom("parallel", 1.3, 7, np.array([0.3, 1.0, 4.0]))):
        ours, theirs = peers_map.astra_vectors(pg), astra.geom_2vec(pg)["Vectors"]
        d = float(np.max(np.abs(ours - theirs)))
        check("astra_vectors(%s) equals astra.geom_2vec (max diff %.1e)" % (pg["type"], d), d < 1e-9)


def fine_sino(pg, vg):
    """ASTRA's sinogram of the phantom drawn FINE times finer over the same window: the data of
    a continuous object, not of either tool's own discrete model of the 64 x 64 image."""
    o = vg["option"]
    vf = astra.create_vol_geom(N * FINE, N * FINE, o["WindowMinX"], o["WindowMaxX"], o["WindowMinY"], o["WindowMaxY"])
    return astra_sino(pg, vf, phantom(vf, sub=2))


def compare(c, name, pg, vg, ref, m, algo, peer=True, engine="auto"):
    sino = fine_sino(pg, vg)
    t0 = time.monotonic()
    x, job = recond_recon(c, "astra %s %s" % (name, algo), pg, vg, sino, algo, engine)
    if engine != "auto":
        name = "%s (engine %s)" % (name, engine)
    e = err(x, ref, m)
    detail = "engine %s, %.2f s" % (job.get("engine"), time.monotonic() - t0)
    if peer:
        ea = err(astra_recon(pg, vg, sino, algo), ref, m)
        log("%s %s: recond %.4f, ASTRA %.4f (%s)" % (name, algo, e, ea, detail))
        check("%s %s: recond's error %.4f < %.2f and at most ASTRA's %.4f + %.2f" % (name, algo, e, BOUND[algo], ea, MARGIN),
              e < BOUND[algo] and e <= ea + MARGIN, detail)
    else:
        log("%s %s: recond %.4f (%s)" % (name, algo, e, detail))
        check("%s %s: recond's error %.4f < %.2f (ASTRA's CPU FBP takes plain parallel only)" % (name, algo, e, BOUND[algo]),
              e < BOUND[algo], detail)
    return sino, e


def main():
    require_binaries()
    check_vectors()
    vg = astra.create_vol_geom(N, N)
    ref = phantom(vg)
    m = mask(vg)
    d = Daemon().start()
    c = Client(d.url, timeout=60)

    fan = fan_geometry()
    compare(c, "fanflat", fan, vg, ref, m, "sirt")
    sino, e_right = compare(c, "fanflat", fan, vg, ref, m, "cgls")
    compare(c, "fanflat", fan, vg, ref, m, "fdk", peer=False)
    compare(c, "fanflat", fan, vg, ref, m, "fdk", peer=False, engine="tensor")
    for what, wrong in (("angle sign flipped", {"angle_sign": -1.0}), ("u mirrored", {"mirror_u": True})):
        x, _ = recond_recon(c, "astra fanflat cgls, %s" % what, fan, vg, sino, "cgls", **wrong)
        ew = err(x, ref, m)
        log("fanflat cgls with the %s: %.4f" % (what, ew))
        check("fanflat cgls with the %s: error %.4f > %.1f x %.4f" % (what, ew, WRONG_FACTOR, e_right),
              ew > WRONG_FACTOR * e_right)

    rev = dict(fan, Vectors=fan["Vectors"] * np.array([1, 1, 1, 1, -1, -1]))
    spec = peers_map.astra_to_recond(rev, vg, unit_mm=UNIT_MM)
    check("fanflat_vec with its bins reversed maps to the same recond geometry",
          spec["geometry"] == peers_map.astra_to_recond(fan, vg, unit_mm=UNIT_MM)["geometry"],
          "%s" % spec["geometry"]["detector"])
    compare(c, "fanflat_vec reversed", rev, vg, ref, m, "cgls")

    par = parallel_geometry()
    compare(c, "parallel", par, vg, ref, m, "cgls")
    compare(c, "parallel", par, vg, ref, m, "fdk")
    compare(c, "parallel", par, vg, ref, m, "fdk", engine="tensor")
    shifted = astra.geom_postalignment(par, -2.25)
    compare(c, "parallel_vec shifted", shifted, vg, ref, m, "cgls")
    compare(c, "parallel_vec shifted", shifted, vg, ref, m, "fdk", peer=False)
    d.stop()


if __name__ == "__main__":
    run_main(main)
