#!/usr/bin/env python3
"""RTK's geometry XML in and out of recond (geometry.type "rtk", GET /v1/jobs/{id}/geometry?format=rtk),
checked against RTK itself (docs/geometry.md, "RTK's geometry file").

- circular: RTK makes a circular geometry (120 views over the full circle from 5 degrees, SID 300,
  SDD 500, ProjectionOffsetX 2.1, ProjectionOffsetY -1.4) and writes it with its XML writer; the
  same projections (recond's analytic ones of an off-centre object, peers_map.project_cone) are
  reconstructed with FDK by a job posted with the XML and by one posted with the equivalent JSON
  `cone` geometry: the two volumes must agree to float rounding (and the XML job's summary says
  `cone`, so FDK ran on a circular geometry);
- tilted: RTK makes a geometry with out-of-plane and in-plane angles, source and projection
  offsets and a SID that changes per view, and RTK's Joseph projector (not recond's) projects the
  voxelised object through it; recond's CGLS of those projections, posted with RTK's XML (it
  becomes `matrices`), must be within BOUND of the object, and the same job with a wrong XML (the
  gantry angles negated) more than WRONG_FACTOR times as far off;
- round trip: each job's GET /v1/jobs/{id}/geometry?format=rtk read back by RTK's own XML reader
  gives RTK's original matrices (circular, tilted) and, for the JSON cone job, the matrices of
  recond's cone formulas (peers_map.cone_matrices), to 1e-9 relative; a fan job's is 422;
- bad XML over HTTP (an entity expansion bomb, an external entity, fewer projections than
  geometry.views) is a 400 naming geometry.xml, and nothing is stored.

Measured (2 shared cores): circular FDK volumes differ by 0 (max |a - b| / max |b|), FDK 0.086
against the object; tilted CGLS 0.140, the wrong XML 1.34; round trips 7e-16 to 5e-15; about
40 s in all.

Runs in build/peers-venv when `make bench-peers` has made it, else in $RECOND_BUILD/rtk-venv
(numpy and itk-rtk, pinned, from PyPI; made on first use), as test_astra_import does with ASTRA.
"""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import recond_harness
    recond_harness.run_in_peers_venv(__file__, "rtk-venv", recond_harness.RTK_PKGS, recond_harness.RTK_PROBE)

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
import numpy as np  # noqa: E402
import itk  # noqa: E402
from itk import RTK as rtk  # noqa: E402

from recond_harness import Daemon, check, log, require_binaries, run_main  # noqa: E402
from recond_client import Client, RecondError  # noqa: E402
import peers_map  # noqa: E402

NU, NV, DU, DV = 96, 72, 0.7, 0.7
ORIGIN = [-(NU - 1) / 2.0 * DU, -(NV - 1) / 2.0 * DV]
VOL = {"nx": 64, "ny": 64, "nz": 48, "voxel_mm": 0.5}
PLAIN = {"subsets": 1, "nonnegative": False, "tv": {"weight": 0}, "stop": {"discrepancy": 0, "stagnation": 0},
         "initial": "zero"}
BOUND = 0.3
WRONG_FACTOR = 2.0


def write_xml(g):
    return peers_map.rtk_write_xml(g)


def read_xml(text):
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        r = rtk.ThreeDCircularProjectionGeometryXMLFileReader.New()
        r.SetFilename(path)
        r.GenerateOutputInformation()
        return r.GetOutputObject()
    finally:
        os.unlink(path)


def matrices(g):
    return [np.array(itk.array_from_vnl_matrix(g.GetMatrix(k).GetVnlMatrix().as_matrix()))
            for k in range(len(g.GetGantryAngles()))]


def worst_rel(ms_a, ms_b):
    w = 0.0
    for a, b in zip(ms_a, ms_b):
        a, b = peers_map._unit_w(a), peers_map._unit_w(b)
        w = max(w, float(np.max(np.abs(a - b)) / np.max(np.abs(b))))
    return w if len(ms_a) == len(ms_b) else float("inf")


def rtk_job(xml, algo, views=None):
    g = {"type": "rtk", "xml": xml, "detector": {"nu": NU, "nv": NV, "du_mm": DU, "dv_mm": DV,
                                                  "origin_u_mm": ORIGIN[0], "origin_v_mm": ORIGIN[1]}}
    if views:
        g["views"] = views
    return {"geometry": g, "volume": VOL, "algorithm": algo}


def run(c, spec, proj, label):
    spec = dict(spec, label=label)
    job = c.submit(spec, np.ascontiguousarray(proj, dtype=np.float32).tobytes())
    final = c.wait(job["id"], timeout=300)
    if not final or final.get("state") != "succeeded":
        raise AssertionError("%s: job ended %s: %s" % (label, final and final.get("state"), final and final.get("error")))
    vol = np.frombuffer(c.get(job["id"], fmt="raw"), np.float32).reshape(VOL["nz"], VOL["ny"], VOL["nx"])
    return job["id"], vol, final


def rtk_joseph(g, vol_zyx, nviews):
    """RTK's Joseph projection of a recond volume through RTK geometry g, as recond's [view][v][u]."""
    m = peers_map.rtk_mapping(peers_map.cone_geometry(300.0, 500.0, [0.0], NU, NV, DU, DV), VOL)
    T = itk.Image[itk.F, 3]
    zero = peers_map.rtk_image(np.zeros((nviews, NV, NU), np.float32), [ORIGIN[0], ORIGIN[1], 0.0], [DU, DV, 1.0])
    fp = rtk.JosephForwardProjectionImageFilter[T, T].New()
    fp.SetInput(0, zero)
    fp.SetInput(1, peers_map.rtk_vol_image(m, vol_zyx))
    fp.SetGeometry(g)
    fp.Update()
    return itk.array_from_image(fp.GetOutput()).copy()


def tilted(sign=1.0):
    g = rtk.ThreeDCircularProjectionGeometry.New()
    for k in range(90):
        a = 3.0 + 4.0 * k
        g.AddProjection(300.0 + 5.0 * np.sin(np.radians(a)), 500.0, sign * a, 1.0, 0.5, 4.0, 3.0, 1.5, -1.0)
    return g


def body():
    require_binaries()
    ells = peers_map.test_object()
    x_ref = peers_map.voxelise(ells, VOL, sub=2)
    mask = peers_map.cylinder_mask(VOL, 14.0, 10.0)
    d = Daemon().start()
    try:
        c = Client(d.url, timeout=60)

        # circular: the XML route and the JSON route, FDK on the same projections
        angles = [5.0 + 3.0 * k for k in range(120)]
        gc = rtk.ThreeDCircularProjectionGeometry.New()
        for a in angles:
            gc.AddProjection(300.0, 500.0, a, 2.1, -1.4)
        xml_c = write_xml(gc)
        geom = peers_map.cone_geometry(300.0, 500.0, angles, NU, NV, DU, DV, offset_u=2.1, offset_v=-1.4)
        proj = peers_map.project_cone(ells, geom)
        id_x, vol_x, fin_x = run(c, rtk_job(xml_c, {"name": "fdk"}, views=120), proj, "rtk-xml circular")
        id_j, vol_j, _ = run(c, {"geometry": geom, "volume": VOL, "algorithm": {"name": "fdk"}}, proj, "json circular")
        diff = float(np.max(np.abs(vol_x - vol_j)) / np.max(np.abs(vol_j)))
        check("circular: FDK of the XML job equals FDK of the JSON cone job (max diff %.2g <= 1e-6)" % diff, diff <= 1e-6)
        summ = (fin_x.get("summary") or {}).get("geometry")
        check("circular: RTK's circular file becomes a cone geometry (summary says %r)" % summ, summ == "cone")
        e_fdk = peers_map.rel_error(vol_x, x_ref, mask)
        check("circular: the FDK volume is the object (rel. L2 %.3f < %.2f)" % (e_fdk, BOUND), e_fdk < BOUND)

        # tilted: RTK's projector, recond's CGLS through the XML (matrices)
        gt = tilted()
        proj_t = rtk_joseph(gt, x_ref, 90)
        cgls = dict(PLAIN, name="cgls", iterations=10)
        id_t, vol_t, fin_t = run(c, rtk_job(write_xml(gt), cgls), proj_t, "rtk-xml tilted")
        summ = (fin_t.get("summary") or {}).get("geometry")
        check("tilted: RTK's tilted file becomes a matrices geometry (summary says %r)" % summ, summ == "matrices")
        e_t = peers_map.rel_error(vol_t, x_ref, mask)
        check("tilted: CGLS of RTK's Joseph projections is the object (rel. L2 %.3f < %.2f)" % (e_t, BOUND), e_t < BOUND)
        _, vol_w, _ = run(c, rtk_job(write_xml(tilted(-1.0)), cgls), proj_t, "rtk-xml tilted wrong")
        e_w = peers_map.rel_error(vol_w, x_ref, mask)
        check("tilted: with the gantry angles negated it is far off (rel. L2 %.3f > %.1f x %.3f)" % (e_w, WRONG_FACTOR, e_t),
              e_w > WRONG_FACTOR * e_t)

        # round trips through RTK's reader
        for what, jid, want in (("circular (rtk job)", id_x, matrices(gc)), ("tilted (rtk job)", id_t, matrices(gt))):
            back = read_xml(c.geometry(jid))
            w = worst_rel(matrices(back), want)
            check("round trip %s: RTK reads GET ?format=rtk back to its own matrices (max rel. diff %.1e < 1e-9)"
                  % (what, w), w < 1e-9)
        back = read_xml(c.geometry(id_j))
        ours = peers_map.rtk_to_recond_matrices(back, ORIGIN, [DU, DV])
        w = worst_rel(ours, peers_map.cone_matrices(geom))
        check("round trip JSON cone job: RTK's matrices of GET ?format=rtk are recond's cone matrices "
              "(max rel. diff %.1e < 1e-9)" % w, w < 1e-9)
        fan = c.create({"geometry": peers_map.fan_geometry(300.0, 500.0, [0, 90], 32, 1.0, 4),
                        "volume": {"nx": 16, "ny": 16, "nz": 4, "voxel_mm": 1.0}, "algorithm": {"name": "fdk"}})
        try:
            c.geometry(fan["id"])
            status = 200
        except RecondError as e:
            status = e.status
        check("a fan job's geometry?format=rtk is 422 (got %d)" % status, status == 422)

        # bad XML over HTTP
        before = c.list()["total"]
        laughs = ('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
                  '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;">]>'
                  '<RTKThreeDCircularGeometry version="3"><SourceToIsocenterDistance>&d;</SourceToIsocenterDistance>'
                  '</RTKThreeDCircularGeometry>')
        external = ('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                    '<RTKThreeDCircularGeometry version="3"><SourceToIsocenterDistance>&x;</SourceToIsocenterDistance>'
                    '</RTKThreeDCircularGeometry>')
        for what, spec in (("an entity expansion bomb", rtk_job(laughs, {"name": "fdk"})),
                           ("an external entity", rtk_job(external, {"name": "fdk"})),
                           ("120 projections, geometry.views 121", rtk_job(xml_c, {"name": "fdk"}, views=121)),
                           ("malformed XML", rtk_job(xml_c[:-30], {"name": "fdk"}))):
            try:
                c.create(spec)
                st, field = 201, None
            except RecondError as e:
                st, field = e.status, e.field
            check("%s: 400 naming geometry.xml (got %d, field %r)" % (what, st, field), st == 400 and field == "geometry.xml")
        after = c.list()["total"]
        check("nothing stored by the refused specs (%d jobs before, %d after)" % (before, after), before == after)
        log("circular FDK diff %.2g err %.3f; tilted CGLS %.3f, wrong %.3f" % (diff, e_fdk, e_t, e_w))
    finally:
        d.stop()


if __name__ == "__main__":
    run_main(body)
