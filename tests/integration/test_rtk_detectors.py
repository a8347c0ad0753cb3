#!/usr/bin/env python3
"""Offset (half-fan) and cylindrical cone detectors against RTK: projections that RTK itself made
(its analytic RayEllipsoidIntersectionImageFilter, not recond's projector) sent to recond over HTTP,
recond's FDK error held to RTK's FDK on the same data (docs/geometry.md, "Offset detectors" and
"Cylindrical cone detectors").

The phantom is peers_map's 3-D Shepp-Logan with its two tilted ellipsoids set straight (RTK's
ellipsoid angle is not mapped), 0.94 of a 64^3 volume of 1 mm voxels; the truth is it voxelised
(2^3 sub-samples); errors are peers_map.rel_error inside the central cylinder (r = 0.45 fov, |z| <=
0.35 fov).  120 views over 360 degrees, D = 500, S = 750 mm.

- offset flat detector: 64 of 1.5 mm pixels, shifted by +28 mm (the centre of the field of view
  is seen from both sides over 8 mm, the rest from one side): recond's FDK (which weighs it with
  Wang's redundancy weight by itself and says so in summary.fdk.displaced_detector) must be within
  5 % of RTK's FDK after RTK's DisplacedDetectorImageFilter; the same for the detector shifted
  the other way; CGLS must run on it (and beat 0.3).
- cylindrical detector (RadiusCylindricalDetector = SDD, shape "curved"): 140 pixels of 1.5 mm of
  arc, centred, D = 150, S = 300 mm (a +-20 degree fan, where the shape matters).  RTK 2.7's FDK
  refuses cylindrical detectors, so RTK reconstructs the same data resampled onto the equivalent
  flat detector (peers_map.curved_to_flat; the resampling costs RTK accuracy), and, a fairer
  yardstick, its own exact projections on that flat detector; recond's FDK of the cylindrical
  data must be within 5 % of both.  CGLS must run on it (and beat 0.3).  The same data sent as a
  flat detector (the shape left out) must be further off, so the test can fail.

What is sent is what a scanner sends: RTK's line integrals turned into uint16 counts with a gain
pattern across the detector (the flat field, sent as two images that average to it) and a dark
field of its own (to_counts); RTK reconstructs -ln((I - dark) / (flat - dark)) of the same rounded
counts.  Each clean job must carry no warning, and the same counts sent with the geometry as RTK's
own XML (geometry.type "rtk", written by RTK's writer) must give the JSON route's volume.  Runs in build/peers-venv when `make bench-peers` made it, else in
$RECOND_BUILD/rtk-venv (numpy and itk-rtk from PyPI, pinned as bench-peers' venv gets them; made
on first use); PyPI unreachable: fails with the reason, unless RECOND_OFFLINE=1 (exit 77).

Measured (2 shared cores): offset +-28 mm recond FDK 0.2076, RTK 0.2076 (without widening the
filtered views past the inner edge recond had 0.2320), CGLS 10 0.264; cylinder recond FDK 0.1402,
RTK of the resampled data 0.1725, of exact flat data 0.1407, the data read as flat 0.2285, CGLS 10
0.209; about a minute (40 s more the first time ITK loads).
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import recond_harness
    recond_harness.run_in_peers_venv(__file__, "rtk-venv", recond_harness.RTK_PKGS, recond_harness.RTK_PROBE)

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import numpy as np  # noqa: E402

from recond_harness import Daemon, check, log, require_binaries, run_main  # noqa: E402
from recond_client import Client  # noqa: E402
import peers_map as pm  # noqa: E402

N = 64
VX = 1.0
NVIEWS = 120
D, S = 500.0, 750.0
D_CYL, S_CYL = 150.0, 300.0  # the cylinder's case: a +-20 degree fan, where the shape matters
DU = 1.5
REL = 1.05         # recond's FDK error at most this times RTK's
PLAIN = {"subsets": 1, "nonnegative": False, "tv": {"weight": 0}, "stop": {"discrepancy": 0, "stagnation": 0},
         "initial": "zero"}
COUNTS = {"kind": "intensity", "dtype": "uint16", "flat": "uploaded", "dark": "uploaded"}


def phantom():
    return [(c, a, 0.0, mu) for c, a, _phi, mu in pm.shepp_logan(0.94 * N * VX)]


def to_counts(proj):
    """A scanner's uint16 counts of the line integrals: a flat field with a gain pattern across the
    detector (+-25 %) and a dark field of its own pattern.  Returns (counts, flat body of two images
    that average to the flat, dark body, the line integrals every reconstructor is given: RTK's
    -ln((I - dark) / (flat - dark)) of the same rounded counts, float64 then float32)."""
    nviews, nv, nu = proj.shape
    jj, ii = np.meshgrid(np.arange(nv), np.arange(nu), indexing="ij")
    flat = np.rint(40000.0 * (1.0 + 0.25 * np.sin(ii / 7.0) * np.cos(jj / 11.0))).astype(np.uint16)
    dark = np.rint(150.0 + 40.0 * np.cos(ii / 5.0 + jj / 9.0)).astype(np.uint16)
    f, dk = flat.astype(np.float64), dark.astype(np.float64)
    counts = np.rint(dk + (f - dk) * np.exp(-proj.astype(np.float64))).astype(np.uint16)
    lines = -np.log((counts.astype(np.float64) - dk) / (f - dk))
    flat_body = np.stack([flat + 1, flat - 1]).astype(np.uint16).tobytes()  # two images, averaged
    return counts, flat_body, dark.tobytes(), lines.astype(np.float32)


def send(c, label, geom, vol, data, algo):
    """Counts, flat and dark (to_counts) to a new job; returns (volume [z][y][x], final job)."""
    counts, flat_body, dark_body, _ = data
    spec = {"label": label, "geometry": geom, "volume": vol, "algorithm": algo, "input": COUNTS}
    job = c.submit(spec, np.ascontiguousarray(counts).tobytes(), flat=flat_body, dark=dark_body)
    final = c.wait(job["id"], timeout=300)
    if not final or final.get("state") != "succeeded":
        raise AssertionError("%s: job ended %s: %s" % (label, final and final.get("state"), final and final.get("error")))
    v = np.frombuffer(c.get(job["id"], fmt="raw"), np.float32).reshape(vol["nz"], vol["ny"], vol["nx"])
    return v, final


def rtk_xml(m):
    """RTK's own writer's XML of a mapping's geometry (the detector's offsets are in the stack's
    origin, as rtk_mapping puts them)."""
    g = pm.rtk_objects(m)
    return pm.rtk_write_xml(g)


def same_by_xml(c, label, geom, m, vol, data, x):
    """The same counts sent with the geometry as RTK's XML give the same volume as the JSON route."""
    det = geom["detector"]
    g = {"type": "rtk", "xml": rtk_xml(m), "detector": {"nu": det["nu"], "nv": det["nv"], "du_mm": det["du_mm"],
         "dv_mm": det["dv_mm"], "origin_u_mm": m["proj_origin"][0], "origin_v_mm": m["proj_origin"][1]}}
    xx, _ = send(c, label + " (RTK XML)", g, vol, data, {"name": "fdk"})
    d = float(np.max(np.abs(xx - x)) / np.max(np.abs(x)))
    check("%s: RTK's XML route gives the JSON route's volume (max diff %.1e of the peak)" % (label, d), d < 1e-5)


def no_warnings(label, job):
    ws = [w.get("code") for w in job.get("warnings") or []]
    check("%s: no warning on clean counts (%s)" % (label, ws), not ws)


def offset_case(c, ells, vol, ref, mask, sign):
    angles = [360.0 * k / NVIEWS for k in range(NVIEWS)]
    nu, nv = 64, 80
    geom = pm.cone_geometry(D, S, angles, nu, nv, DU, DU, offset_u=sign * 28.0)
    m = pm.rtk_mapping(geom, vol)
    data = to_counts(pm.rtk_project_ellipsoids(m, ells, NVIEWS, nu, nv))
    t0 = time.monotonic()
    x, job = send(c, "rtk offset %+d" % sign, geom, vol, data, {"name": "fdk"})
    t_rc = time.monotonic() - t0
    xr, t_rtk = pm.rtk_fdk(m, data[3], vol, displaced=True)
    e, er = pm.rel_error(x, ref, mask), pm.rel_error(xr, ref, mask)
    log("offset %+.0f mm: recond FDK %.4f (%.2f s), RTK FDK + displaced detector filter %.4f (%.2f s)"
        % (sign * 28.0, e, t_rc, er, t_rtk))
    check("offset detector (%+.0f mm): recond's FDK error %.4f <= %.2f x RTK's %.4f" % (sign * 28.0, e, REL, er),
          e <= REL * er)
    shown = (job.get("summary") or {}).get("fdk", {}).get("displaced_detector")
    check("the job says FDK weighed a displaced detector (summary.fdk.displaced_detector)", shown is True, str(shown))
    no_warnings("offset %+.0f mm" % (sign * 28.0), job)
    same_by_xml(c, "offset %+.0f mm" % (sign * 28.0), geom, m, vol, data, x)
    return geom, data


def cylinder_case(c, ells, vol, ref, mask):
    angles = [360.0 * k / NVIEWS for k in range(NVIEWS)]
    nu, nv = 140, 128
    geom = pm.cone_geometry(D_CYL, S_CYL, angles, nu, nv, DU, DU, shape="curved")
    m = pm.rtk_mapping(geom, vol)
    data = to_counts(pm.rtk_project_ellipsoids(m, ells, NVIEWS, nu, nv))
    t0 = time.monotonic()
    x, job = send(c, "rtk cylinder", geom, vol, data, {"name": "fdk"})
    t_rc = time.monotonic() - t0
    no_warnings("cylinder", job)
    same_by_xml(c, "cylinder", geom, m, vol, data, x)
    flat, fproj = pm.curved_to_flat(data[3], geom)
    xr, t_rtk = pm.rtk_fdk(pm.rtk_mapping(flat, vol), fproj, vol, displaced=False)
    e, er = pm.rel_error(x, ref, mask), pm.rel_error(xr, ref, mask)
    log("cylinder: recond FDK %.4f (%.2f s, engine %s), RTK FDK of the data resampled flat %.4f (%.2f s)"
        % (e, t_rc, job.get("engine"), er, t_rtk))
    check("cylindrical detector: recond's FDK error %.4f <= %.2f x RTK's (resampled flat) %.4f" % (e, REL, er),
          e <= REL * er)
    # a fairer yardstick: RTK's FDK of its own exact projections on that flat detector
    fm = pm.rtk_mapping(flat, vol)
    fexact = pm.rtk_project_ellipsoids(fm, ells, NVIEWS, flat["detector"]["nu"], nv)
    xe, _ = pm.rtk_fdk(fm, fexact, vol, displaced=False)
    ee = pm.rel_error(xe, ref, mask)
    log("RTK FDK of exact projections on the equivalent flat detector: %.4f" % ee)
    check("cylindrical detector: recond's FDK error %.4f <= %.2f x RTK's on exact flat data %.4f" % (e, REL, ee),
          e <= REL * ee)
    wrong = dict(geom, detector={k: v for k, v in geom["detector"].items() if k != "shape"})
    xw, _ = send(c, "rtk cylinder read as flat", wrong, vol, data, {"name": "fdk"})
    ew = pm.rel_error(xw, ref, mask)
    log("cylinder data read as a flat detector: %.4f" % ew)
    check("the cylinder's data read as flat are further off (%.4f > 1.1 x %.4f)" % (ew, e), ew > 1.1 * e)
    xc, jc = send(c, "rtk cylinder cgls", geom, vol, data, dict(PLAIN, name="cgls", iterations=10))
    ec = pm.rel_error(xc, ref, mask)
    log("cylinder: recond CGLS 10 %.4f (projector %s)" % (ec, jc.get("projector")))
    check("CGLS runs on the cylindrical detector (error %.4f < 0.3)" % ec, ec < 0.3)
    check("projector auto runs the footprint pair on the cylinder", jc.get("projector") == "footprint",
          str(jc.get("projector")))


def main():
    require_binaries()
    vol = {"nx": N, "ny": N, "nz": N, "voxel_mm": [VX, VX, VX]}
    ells = phantom()
    ref = pm.voxelise(ells, vol, sub=2)
    fov = N * VX
    mask = pm.cylinder_mask(vol, 0.45 * fov, 0.35 * fov)
    # the mapping itself: RTK's analytic projections equal recond's formulas (flat offset, cylinder)
    for shape, nu, off in (("flat", 40, 20.0), ("curved", 64, 0.0)):
        g = pm.cone_geometry(D, S, [0.0, 37.0, 151.0], nu, 24, 2.5, 2.5, off, 0.0, shape)
        pr = pm.rtk_project_ellipsoids(pm.rtk_mapping(g, vol), ells, 3, nu, 24)
        po = pm.project_cone(ells, g)
        d = float(np.linalg.norm(pr - po) / np.linalg.norm(po))
        check("RTK's projections on the %s detector equal recond's formulas (rel. diff %.1e)" % (shape, d), d < 1e-4)
    d = Daemon().start()
    c = Client(d.url, timeout=60)
    geom, data = offset_case(c, ells, vol, ref, mask, +1)
    offset_case(c, ells, vol, ref, mask, -1)
    xs, _ = send(c, "rtk offset cgls", geom, vol, data, dict(PLAIN, name="cgls", iterations=10))
    es = pm.rel_error(xs, ref, mask)
    log("offset +28 mm: recond CGLS 10 %.4f" % es)
    check("CGLS runs on the offset detector (error %.4f < 0.3)" % es, es < 0.3)
    cylinder_case(c, ells, vol, ref, mask)
    d.stop()


if __name__ == "__main__":
    run_main(main)
