#!/usr/bin/env python3
"""A fan-beam job on the tensor engine through the daemon (paper 001):
analytic projections of a centred disk, 3 slices of different density,
computed here from API.md's fan formulas (independent of the C code) ->
submit with execution.engine "tensor", precision "mixed", cgls -> the job
succeeds, reports its system matrix (fragment, non-zeros, non-empty blocks
before/after ordering, bytes), one progress event per iteration run, and the
volume's mean inside the disk matches each slice's density.

Bounds: 32x32 pixels of 1 mm, 96 views, 48 bins sampled at their centres
(the matrix averages over bins), 15 CGLS iterations: the disk interior mean
is within 5% of the true density (an x/y mix-up or a slice mix-up would be
off by 100% or more); the ordering must lower the non-empty block share.
"""

import array
import math

from recond_harness import Daemon, check, log, read_f32, require_binaries, run_main
from recond_client import Client

N, VIEWS, NU, SLICES, ITER = 32, 96, 48, 3, 15
D, S, DU, RADIUS = 100.0, 200.0, 1.5, 10.0
DENSITY = [0.02, 0.04, 0.01]


def chord(src, dst, r):
    """Length of the segment src->dst (2-D) inside the disk |x| <= r."""
    dx, dy = dst[0] - src[0], dst[1] - src[1]
    L = math.hypot(dx, dy)
    ux, uy = dx / L, dy / L
    # distance of the line from the origin
    d = abs(src[0] * uy - src[1] * ux)
    return 2 * math.sqrt(r * r - d * d) if d < r else 0.0


def projections():
    out = array.array("f", bytes(4 * SLICES * VIEWS * NU))
    for z in range(SLICES):
        for k in range(VIEWS):
            t = math.radians(360.0 * k / VIEWS)
            c, s = math.cos(t), math.sin(t)
            src = (D * c, D * s)
            det = (-(S - D) * c, -(S - D) * s)
            for i in range(NU):
                off = (i - (NU - 1) / 2.0) * DU
                pix = (det[0] - off * s, det[1] + off * c)
                out[(z * VIEWS + k) * NU + i] = DENSITY[z] * chord(src, pix, RADIUS)
    return out.tobytes()


def main():
    require_binaries()
    d = Daemon().start()
    c = Client(d.url, timeout=30)
    spec = {
        "label": "tensor-fan",
        "geometry": {
            "type": "fan", "source_isocenter_mm": D, "source_detector_mm": S, "slices": SLICES,
            "angles": {"start_deg": 0.0, "step_deg": 360.0 / VIEWS, "count": VIEWS},
            "detector": {"nu": NU, "du_mm": DU, "offset_u_mm": 0.0},
        },
        "volume": {"nx": N, "ny": N, "nz": SLICES, "voxel_mm": [1.0, 1.0, 1.0]},
        "algorithm": {"name": "cgls", "iterations": ITER},
        "execution": {"engine": "tensor", "precision": "mixed"},
        "priority": 5,
    }
    job = c.submit(spec, projections())
    events, final = [], None
    for ev, data in c.watch(job["id"], timeout=240):
        events.append(ev)
        if ev == "end":
            final = data
    check("tensor job succeeded", final and final["state"] == "succeeded",
          "state %s error %s" % (final and final["state"], final and final.get("error")))
    st = c.status(job["id"])
    m = st.get("matrix") or {}
    log("matrix: %s" % m)
    check("status reports the matrix", m.get("fragment") == "32.8.16" and m.get("nnz", 0) > 0 and
          m.get("bytes", 0) > 0, str(m))
    check("ordering lowers the non-empty blocks",
          0 < m.get("blocks_pct_after", 0) < m.get("blocks_pct_before", 0), str(m))
    check("engine is tensor", st.get("engine") == "tensor", str(st.get("engine")))
    # the default CGLS starts from FBP's volume and may stop on stagnation
    # before ITER (docs/algorithms.md, "Defaults"): one event per iteration run
    done = (st.get("progress") or {}).get("iteration")
    check("one progress event per iteration", isinstance(done, int) and 1 <= done <= ITER and
          events.count("progress") == done, "%d progress events, %s iterations" % (events.count("progress"), done))
    vol = read_f32(c.get(job["id"], fmt="raw"))
    check("volume size", len(vol) == N * N * SLICES, str(len(vol)))
    for z in range(SLICES):
        vals = []
        for iy in range(N):
            for ix in range(N):
                x, y = ix - (N - 1) / 2.0, iy - (N - 1) / 2.0
                if x * x + y * y < (RADIUS - 2.5) ** 2:
                    vals.append(vol[(z * N + iy) * N + ix])
        mean = sum(vals) / len(vals)
        check("slice %d: mean inside the disk within 5%% of %.3f" % (z, DENSITY[z]),
              abs(mean - DENSITY[z]) < 0.05 * DENSITY[z], "%.5f" % mean)
    d.stop()


if __name__ == "__main__":
    run_main(main)
