#!/usr/bin/env python3
"""ASTRA's CGLS (line_fanflat, CPU, one thread) on bench-tensor-cg's data, for the ratio of issue 17.

Run bench-tensor-cg with RECOND_BENCH_DUMP=DIR first (it writes proj.f32 [slice][view][u],
ref.f32 [slice][y][x] and geom.json), then, with the Python that has astra-toolbox
(build/peers-venv):

    python bench/tensor_astra.py DIR [iterations=8] [slices=0,15,31]

Prints ms per image per iteration (wall and CPU time of this process: ASTRA's CPU algorithms run
on one thread) and the relative L2 error against the phantom per slice, the same metric as
bench-tensor-cg's (no mask).  The geometry mapping is scripts/peers_map.py's (recond fan = ASTRA
fanflat_vec, image flipped in y).
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import peers_map as pm  # noqa: E402


def main():
    d = sys.argv[1]
    its = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    g = json.load(open(os.path.join(d, "geom.json")))
    n, nz, nv, nu = g["n"], g["nz"], g["nviews"], g["nu"]
    slices = [int(s) for s in sys.argv[3].split(",")] if len(sys.argv) > 3 else [0, nz // 2, nz - 1]
    proj = np.fromfile(os.path.join(d, "proj.f32"), np.float32).reshape(nz, nv, nu)
    ref = np.fromfile(os.path.join(d, "ref.f32"), np.float32).reshape(nz, n, n)
    geom = {"source_isocenter_mm": g["source_isocenter_mm"], "source_detector_mm": g["source_detector_mm"],
            "detector": {"nu": nu, "du_mm": g["du_mm"]}, "angles_deg": [360.0 * k / nv for k in range(nv)]}
    vol = {"nx": n, "ny": n, "nz": nz, "voxel_mm": g["voxel_mm"]}
    m = pm.astra_fan_mapping(geom, vol)
    import astra
    vg, pg = pm.astra_geoms(m)
    pid = astra.create_projector("line_fanflat", pg, vg)
    wall = cpu = 0.0
    errs = []
    for iz in slices:
        sid = astra.data2d.create("-sino", pg, proj[iz])
        rid = astra.data2d.create("-vol", vg, 0.0)
        cfg = astra.astra_dict("CGLS")
        cfg["ProjectorId"], cfg["ProjectionDataId"], cfg["ReconstructionDataId"] = pid, sid, rid
        aid = astra.algorithm.create(cfg)
        t0, c0 = time.monotonic(), time.process_time()
        astra.algorithm.run(aid, its)
        wall += time.monotonic() - t0
        cpu += time.process_time() - c0
        v = m["from_astra"](astra.data2d.get(rid))
        errs.append(float(np.linalg.norm(v - ref[iz]) / np.linalg.norm(ref[iz])))
        astra.algorithm.delete(aid)
        astra.data2d.delete([sid, rid])
    astra.projector.delete(pid)
    k = len(slices) * its
    print("ASTRA %s CGLS (line_fanflat, CPU): %d^2 from %d x %d, %d iterations, slices %s" %
          (astra.__version__, n, nv, nu, its, ",".join(map(str, slices))))
    print("  ms/image/iter %.1f wall, %.1f cpu;  rel.err per slice %s" %
          (1e3 * wall / k, 1e3 * cpu / k, " ".join("%.4f" % e for e in errs)))


if __name__ == "__main__":
    main()
