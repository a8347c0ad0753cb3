#!/usr/bin/env python3
"""Tensor jobs through the daemon: each execution.precision reports the one
that ran, and they differ as bench-tensor-cg says; a second job on a
geometry maps its cached matrix instead of building it.

Data: 32 fan slices of 48^2 (1 mm) from 96 views of 64 bins, two disks whose
densities change with the slice, projected with exact chords by phantom.py
(API.md's fan formulas, independent of the C code).  Plain CGLS, 20
iterations (past its best iteration, where the precisions part).

Checks (the bench's figures: docs/tensor.md, "precision auto"):
- fp32 reports precision fp32 and the CSR; mixed, auto (the default) and
  bf16 report what ran (bf16 where the CPU has AVX512_BF16, else mixed);
  auto's volume equals mixed's to the bit (the same path);
- mixed is not fp32's volume (another path ran) but within 1e-2 of it
  (relative L2), and its error against the phantom within 1.05x fp32's;
- where bf16 ran, its volume is further from fp32's than mixed's (8-bit
  operands), its error still within 1.25x;
- the first job on the geometry reports matrix.cache "miss" and passes
  through phase building_matrix with phase_fraction (0..1); the next reports
  "hit", and its set-up takes under half the first's.
"""

import array
import threading
import time

from recond_harness import Daemon, check, log, read_f32, require_binaries, run_main
from recond_client import Client
import phantom

N, VIEWS, NU, SLICES, ITER = 48, 96, 64, 32, 20
D, S, DU = 100.0, 200.0, 1.5
# x, y, r, density per slice (5 % more per slice)
DISKS = [(x, y, r, [rho * (1.0 + 0.05 * z) for z in range(SLICES)])
         for x, y, r, rho in [(0.0, 0.0, 18.0, 0.02), (6.0, -4.0, 5.0, 0.01)]]


def projections(geom):
    return array.array("f", phantom.project_fan_disks(geom, DISKS, SLICES)).tobytes()


def rel(a, b):
    return phantom.rel_error(a, b)


def spec(precision):
    ex = {"engine": "tensor"}
    if precision:
        ex["precision"] = precision
    return {
        "label": "tensor-precision-%s" % (precision or "default"),
        "geometry": {
            "type": "fan", "source_isocenter_mm": D, "source_detector_mm": S, "slices": SLICES,
            "angles": {"start_deg": 0.0, "step_deg": 360.0 / VIEWS, "count": VIEWS},
            "detector": {"nu": NU, "du_mm": DU, "offset_u_mm": 0.0},
        },
        "volume": {"nx": N, "ny": N, "nz": SLICES, "voxel_mm": [1.0, 1.0, 1.0]},
        "algorithm": {"name": "cgls", "iterations": ITER, "initial": "zero", "nonnegative": False,
                      "tv": {"weight": 0}, "stop": {"discrepancy": 0, "stagnation": 0}},
        "execution": ex,
        "priority": 5,
    }


def run(c, precision, proj):
    """Runs a job, watching its events from before its start; returns (job, volume, phases seen)."""
    job = c.submit(spec(precision), proj, start=False)
    seen = []

    def watch():
        try:
            for ev, data in c.watch(job["id"], timeout=240):
                p = (data.get("progress") if ev in ("state", "end") else data) if isinstance(data, dict) else None
                if isinstance(p, dict) and p.get("phase"):
                    seen.append((p["phase"], p.get("phase_fraction")))
        except Exception as e:  # the final GET below decides
            log("watch: %s" % e)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    time.sleep(0.5)
    c.start(job["id"])
    t.join(240)
    st = c.status(job["id"])
    check("%s job succeeded" % (precision or "default"), st["state"] == "succeeded",
          "%s %s" % (st["state"], st.get("error")))
    return st, read_f32(c.get(job["id"], fmt="raw")), seen


def main():
    require_binaries()
    proj = projections(spec(None)["geometry"])
    ref = phantom.pixelize_disks(N, DISKS, SLICES)
    d = Daemon().start()
    c = Client(d.url, timeout=60)
    res = {}
    for prec in ("mixed", "mixed", None, "fp32", "bf16"):
        st, vol, seen = run(c, prec, proj)
        m = st.get("matrix") or {}
        log("%s: matrix %s, device %s, error %.5f, phases %s" % (
            prec, m, (st.get("plan") or [{}])[0].get("name"), rel(vol, ref), seen))
        res.setdefault(prec or "auto", []).append((st, vol, seen))

    (m1, v1, seen1), (m2, v2, seen2) = res["mixed"]
    a1, a2 = m1["matrix"], m2["matrix"]
    check("the first job on the geometry builds its matrix (cache miss)", a1.get("cache") == "miss", str(a1))
    fr = [f for ph, f in seen1 if ph == "building_matrix"]
    check("its progress says building_matrix with a phase_fraction in [0, 1]",
          fr and all(isinstance(f, (int, float)) and 0 <= f <= 1 for f in fr), str(seen1))
    check("the second maps the cached one (cache hit, phase loading_matrix)",
          a2.get("cache") == "hit" and any(ph == "loading_matrix" for ph, _ in seen2), "%s %s" % (a2, seen2))
    check("the second's set-up takes under half the first's",
          0 <= a2.get("setup_s", 1e9) < 0.5 * a1.get("setup_s", 0), "%s s against %s s" % (
              a2.get("setup_s"), a1.get("setup_s")))
    check("a hit gives the same volume as the build", v1 == v2, "%.3g" % rel(v2, v1))

    ma, va, _ = res["auto"][0]
    mf, vf, _ = res["fp32"][0]
    mb, vb, _ = res["bf16"][0]
    check("precision auto (the default) ran mixed, the same volume", ma["matrix"].get("precision") == "mixed"
          and va == v1, "%s %.3g" % (ma["matrix"].get("precision"), rel(va, v1)))
    check("fp32 ran fp32 on the CSR", mf["matrix"].get("precision") == "fp32" and
          mf["matrix"].get("fragment") == "csr.fp32", str(mf["matrix"]))
    check("mixed reports mixed", a1.get("precision") == "mixed", str(a1))
    dev_b = (mb.get("plan") or [{}])[0].get("name", "")
    ran_b = mb["matrix"].get("precision")
    check("bf16 reports what ran (bf16 iff its device is the bf16 path)",
          (ran_b == "bf16") == ("bf16" in dev_b) and ran_b in ("bf16", "mixed"), "%s on %s" % (ran_b, dev_b))
    ef, em, eb = rel(vf, ref), rel(v1, ref), rel(vb, ref)
    dm, db = rel(v1, vf), rel(vb, vf)
    log("errors against the phantom: fp32 %.5f mixed %.5f bf16 (%s) %.5f; from fp32: mixed %.2e bf16 %.2e"
        % (ef, em, ran_b, eb, dm, db))
    check("mixed is another path than fp32 (volumes differ) but within 1e-2 of it", 0 < dm < 1e-2, "%.3g" % dm)
    check("mixed's error within 1.05x fp32's", em <= 1.05 * ef, "%.5f vs %.5f" % (em, ef))
    if ran_b == "bf16":
        check("bf16 (8-bit operands) is further from fp32 than mixed, its error within 1.25x fp32's",
              db > dm and eb <= 1.25 * ef, "%.3g vs %.3g; %.5f vs %.5f" % (db, dm, eb, ef))
    else:
        check("bf16 without AVX512_BF16 ran mixed: mixed's volume", vb == v1, "%.3g" % rel(vb, v1))
    d.stop()


if __name__ == "__main__":
    run_main(main)
