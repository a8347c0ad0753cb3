#!/usr/bin/env python3
"""make bench-large: FDK out of core under a memory budget (docs/server.md "Memory").

The issue's case is a 2048 x 2048 x 1024 volume (16 GiB) from 1200 views of
2048 x 1536 (14 GiB) under an 8 GiB budget.  --scale S divides every size by
S (and the budget's part above the process's 50 MiB, RC_MEM_BASE, by S^3) so that a
smaller machine or a shorter run keeps the same shape: the volume and the
stack together still several times the budget.

The job directory (spec.json, projections.f32 of uniform noise: FDK's speed
does not depend on the values) is written under --dir, then recond-worker runs
it twice: with --memory-limit (out of core) and, where the machine holds it,
without (in core).  Printed: seconds, CPU seconds and peak RSS (/usr/bin/time), the plan,
the voxel-views per second of each and their ratio (also per CPU second,
steadier on a shared machine), and the largest difference of the two
volumes over the largest value.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def parse_bytes(s):
    m = re.fullmatch(r"(\d+)([KMGT]?)", s)
    if not m:
        raise SystemExit("bad size %r" % s)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2)]


def spec_of(a):
    s = a.scale
    n = [a.nx // s, a.ny // s, a.nz // s]
    return {
        "label": "bench-large",
        "geometry": {
            "type": "cone", "source_isocenter_mm": 800.0, "source_detector_mm": 1600.0,
            "angles": {"start_deg": 0.0, "step_deg": 360.0 / (a.views // s), "count": a.views // s},
            "detector": {"nu": a.nu // s, "nv": a.nv // s, "du_mm": 0.2 * s, "dv_mm": 0.2 * s},
        },
        "volume": {"nx": n[0], "ny": n[1], "nz": n[2], "voxel_mm": [0.1 * s] * 3},
        "algorithm": {"name": "fdk"},
        "execution": {"engine": "cpu", "stream": False},
    }


def write_job(d, spec, seed=37):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "spec.json"), "w") as f:
        json.dump(spec, f)
    g = spec["geometry"]
    view = g["detector"]["nu"] * g["detector"]["nv"]
    rng = np.random.default_rng(seed)
    t0 = time.time()
    with open(os.path.join(d, "projections.f32"), "wb") as f:
        for _ in range(g["angles"]["count"]):
            f.write(rng.random(view, dtype=np.float32).tobytes())
        f.flush()
        os.fsync(f.fileno())
    return time.time() - t0


def run(worker, d, limit, threads):
    cmd = ["/usr/bin/time", "-f", "TIME %M %e %U %S", worker]
    if limit:
        cmd += ["--memory-limit", str(limit)]
    if threads:
        cmd += ["--threads", str(threads)]
    p = subprocess.run(cmd + [d], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rep = None
    for line in p.stdout.splitlines():
        j = json.loads(line)
        if j.get("type") == "report":
            rep = j
        if j.get("type") == "error":
            raise SystemExit("worker failed: %s" % line)
    m = re.search(r"TIME (\d+) ([\d.]+) ([\d.]+) ([\d.]+)", p.stderr)
    if p.returncode or not rep or not m:
        raise SystemExit("worker exit %d: %s" % (p.returncode, p.stderr[-800:]))
    return {"rss_mib": int(m.group(1)) / 1024.0, "wall_s": float(m.group(2)), "recon_s": rep["seconds"],
            "cpu_s": float(m.group(3)) + float(m.group(4)),
            "plan": rep.get("memory_plan")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--dir", default=None, help="where the job directory is written (default: a temporary one)")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--nx", type=int, default=2048)
    ap.add_argument("--ny", type=int, default=2048)
    ap.add_argument("--nz", type=int, default=1024)
    ap.add_argument("--views", type=int, default=1200)
    ap.add_argument("--nu", type=int, default=2048)
    ap.add_argument("--nv", type=int, default=1536)
    ap.add_argument("--budget", default="8G", help="the budget at scale 1 (K, M, G suffixes)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--in-core", choices=["auto", "yes", "no"], default="auto",
                    help="also run without a budget (auto: where volume + stack take under half the memory)")
    a = ap.parse_args()
    worker = os.path.join(a.build, "bin", "recond-worker")
    base = 50 << 20  # core/plan/memory.h RC_MEM_BASE
    budget = base + (parse_bytes(a.budget) - base) // (a.scale ** 3)
    spec = spec_of(a)
    g, v = spec["geometry"], spec["volume"]
    vol_b = 4 * v["nx"] * v["ny"] * v["nz"]
    proj_b = 4 * g["angles"]["count"] * g["detector"]["nu"] * g["detector"]["nv"]
    print("bench-large: %dx%dx%d volume (%.2f GiB) from %d views of %dx%d (%.2f GiB), budget %.0f MiB" %
          (v["nx"], v["ny"], v["nz"], vol_b / 2 ** 30, g["angles"]["count"], g["detector"]["nu"],
           g["detector"]["nv"], proj_b / 2 ** 30, budget / 2 ** 20))
    tmp = None
    d = a.dir
    if not d:
        tmp = d = tempfile.mkdtemp(prefix="recond-bench-large-")
    try:
        w = write_job(d, spec)
        print("stack written in %.1f s" % w)
        vv = float(v["nx"]) * v["ny"] * v["nz"] * g["angles"]["count"]
        ooc = run(worker, d, budget, a.threads)
        os.rename(os.path.join(d, "volume.f32"), os.path.join(d, "volume-ooc.f32"))
        print("out of core: %.2f s (worker %.2f s, %.2f CPU s), peak RSS %.1f MiB, %.3g voxel-views/s, plan %s" %
              (ooc["recon_s"], ooc["wall_s"], ooc["cpu_s"], ooc["rss_mib"], vv / ooc["recon_s"],
               json.dumps(ooc["plan"])))
        mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        if a.in_core == "yes" or (a.in_core == "auto" and 3.5 * (vol_b + proj_b) < mem / 2):
            inc = run(worker, d, 0, a.threads)
            print("in core:     %.2f s (worker %.2f s, %.2f CPU s), peak RSS %.1f MiB, %.3g voxel-views/s" %
                  (inc["recon_s"], inc["wall_s"], inc["cpu_s"], inc["rss_mib"], vv / inc["recon_s"]))
            print("ratio out of core / in core (voxel-views per second): %.2f; per CPU second (the whole "
                  "worker, reading the stack included): %.2f" %
                  (inc["recon_s"] / ooc["recon_s"], inc["cpu_s"] / ooc["cpu_s"]))
            x = np.memmap(os.path.join(d, "volume-ooc.f32"), dtype=np.float32, mode="r")
            y = np.memmap(os.path.join(d, "volume.f32"), dtype=np.float32, mode="r")
            dmax = vmax = 0.0
            for i in range(0, x.size, 1 << 24):
                xs, ys = x[i:i + (1 << 24)], y[i:i + (1 << 24)]
                dmax = max(dmax, float(np.max(np.abs(xs.astype(np.float64) - ys))))
                vmax = max(vmax, float(np.max(np.abs(ys))))
            print("max |out of core - in core| / max |in core| = %.3g" % (dmax / vmax if vmax else float("nan")))
        elif a.in_core == "no":
            print("in core: not run (--in-core no)")
        else:
            print("in core: not run (the volume and the stack do not fit this machine's memory)")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
