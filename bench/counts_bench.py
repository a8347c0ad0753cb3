#!/usr/bin/env python3
"""The cost of detector counts: the same cone FDK job through the daemon as
float32 line integrals and as uint16 counts with uploaded flat and dark
fields (docs/api.md, "Detector counts").  The worker converts the counts in
one pass before FDK runs and reports its seconds (input.convert_s); the
table gives them against the FDK job's reconstruction time (timings.recon_s
of the line-integral job) and the ratio, which the issue bounds at 5 %.

    bench/counts_bench.py BUILD_DIR [--views N] [--n N] [--det NU NV]

Default: paper 000's shape (bench-algo's: 210 views of 256 x 200 pixels of
1 mm, 128^3 voxels of 0.5 mm, D = 1000 mm, S = 1500 mm), the one the bound
names; --views 496 --det 1248 960 --n 512 gives RabbitCT's.  The counts are
made from a smooth pattern (what the pass costs does not depend
on the values); the volume is not checked here (tests/integration/
test_counts.py does that).
"""
import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["RECOND_BUILD"] = os.path.abspath(sys.argv.pop(1))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
from recond_harness import Daemon  # noqa: E402
from recond_client import Client  # noqa: E402


def spec(views, nu, nv, n, counts):
    """Paper 000's geometry, the detector and voxels scaled with nu and n."""
    s = {"label": "counts-bench",
         "geometry": {"type": "cone", "source_isocenter_mm": 1000.0, "source_detector_mm": 1500.0,
                      "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views},
                      "detector": {"nu": nu, "nv": nv, "du_mm": 256.0 / nu, "dv_mm": 256.0 / nu}},
         "volume": {"nx": n, "ny": n, "nz": n, "voxel_mm": [0.5 * 128 / n] * 3},
         "algorithm": {"name": "fdk"}, "execution": {"stream": False}}
    if counts:
        s["input"] = {"kind": "intensity", "dtype": "uint16", "flat": "uploaded", "dark": "uploaded"}
    return s


def run(c, sp, data, flat=None, dark=None):
    job = c.submit(sp, data, flat=flat, dark=dark)
    c.wait(job["id"], timeout=3600)
    st = c.status(job["id"])
    c.delete(job["id"])
    if st["state"] != "succeeded":
        raise RuntimeError("job %s: %s" % (st["state"], st.get("error")))
    return st


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--views", type=int, default=210)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--det", type=int, nargs=2, default=[256, 200])
    a = ap.parse_args()
    nu, nv = a.det
    jj, ii = np.mgrid[0:nv, 0:nu]
    flat = np.round(50000.0 * (1 + 0.1 * np.sin(0.01 * ii))).astype(np.uint16)
    dark = np.full((nv, nu), 100, np.uint16)
    p = (0.5 + 0.4 * np.sin(0.02 * ii) * np.cos(0.03 * jj)).astype(np.float32)
    view = np.round(dark + (flat.astype(np.float64) - dark) * np.exp(-p)).astype(np.uint16)
    counts = np.broadcast_to(view, (a.views, nv, nu)).tobytes()
    lines = np.broadcast_to(p, (a.views, nv, nu)).tobytes()
    d = Daemon().start()
    c = Client(d.url, timeout=600)
    try:
        li = run(c, spec(a.views, nu, nv, a.n, False), lines)
        co = run(c, spec(a.views, nu, nv, a.n, True), counts, flat.tobytes(), dark.tobytes())
    finally:
        d.stop()
    fdk_s = li["timings"]["recon_s"]
    conv_s = co["input"]["convert_s"]
    print("counts_bench: %d views of %d x %d, %d^3, %d CPUs, load %.1f" % (a.views, nu, nv, a.n, os.cpu_count(),
                                                                           os.getloadavg()[0]))
    print()
    print("| job | stack GB | FDK recon s | convert s | convert / FDK | clamped pixels |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print("| float32 line integrals | %.2f | %.2f | - | - | - |" % (len(lines) / 1e9, fdk_s))
    print("| uint16 counts + flat + dark | %.2f | %.2f | %.3f | %.1f %% | %d |"
          % (len(counts) / 1e9, co["timings"]["recon_s"], conv_s, 100 * conv_s / fdk_s, co["input"]["clamped_pixels"]))
    print()
    print("conversion %.3f s = %.1f %% of FDK's %.2f s (target <= 5 %%: %s)"
          % (conv_s, 100 * conv_s / fdk_s, fdk_s, "met" if conv_s <= 0.05 * fdk_s else "not met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
