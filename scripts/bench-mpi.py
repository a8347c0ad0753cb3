#!/usr/bin/env python3
"""Scaling of one job across MPI ranks on this machine (docs/cluster.md, docs/benchmarks.md):
an FDK and a CGLS job run by recond-worker (one process) and by `mpirun -np N
recond-worker-mpi` for each N asked, each rank with cores / N threads (at least 1), so
that every row uses the same cores.  Prints a table: wall seconds of the whole run
(mpirun's start and the volume write included), the slowest rank's reconstruction
seconds, the speed-up against one process and the largest difference from its volume
(relative to its largest value).

  scripts/bench-mpi.py [--build build] [--ranks 1,2,4] [--fdk N,VIEWS,DET] [--cgls N,VIEWS,DET,ITERS]
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
MPI_ARGS = ["--oversubscribe", "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", "lo"]


def job(d, alg, n, views, det, iters):
    os.makedirs(d, exist_ok=True)
    algorithm = {"name": "fdk"} if alg == "fdk" else \
        {"name": alg, "iterations": iters, "initial": "zero", "stop": {"stagnation": 0}}
    spec = {"geometry": {"type": "cone", "source_isocenter_mm": 400.0, "source_detector_mm": 800.0,
                         "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views},
                         "detector": {"nu": det, "nv": det, "du_mm": 2.0, "dv_mm": 2.0}},
            "volume": {"nx": n, "ny": n, "nz": n, "voxel_mm": 1.0 * 128 / n},
            "algorithm": algorithm, "execution": {"engine": "cpu"}}
    with open(os.path.join(d, "spec.json"), "w") as f:
        json.dump(spec, f)
    # a centred ball's chord lengths: smooth, nonzero data (timing does not depend on it)
    u = (np.arange(det) - (det - 1) / 2) * 2.0 / 2.0
    r2 = u[None, :] ** 2 + u[:, None] ** 2
    view = np.sqrt(np.maximum(40.0 ** 2 - r2, 0)).astype(np.float32) * 0.02
    np.broadcast_to(view, (views, det, det)).astype(np.float32).tofile(os.path.join(d, "projections.f32"))


def run(build, d, ranks, cores):
    threads = str(max(1, cores // ranks))
    if ranks == 1:
        cmd = [os.path.join(build, "bin", "recond-worker"), "--threads", threads, d]
    else:
        cmd = ["mpirun", "-np", str(ranks)] + MPI_ARGS + \
              [os.path.join(build, "bin", "recond-worker-mpi"), "--threads", threads, d]
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True)
    wall = time.time() - t0
    if p.returncode:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    rep = [json.loads(ln) for ln in p.stdout.splitlines() if '"type":"report"' in ln][-1]
    ranks_s = [r["seconds"] for r in rep.get("ranks") or [{"seconds": rep["seconds"]}]]
    vol = np.fromfile(os.path.join(d, "volume.f32"), dtype=np.float32)
    return wall, max(ranks_s), vol, int(threads)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--fdk", default="128,180,192")
    ap.add_argument("--cgls", default="64,90,96,5")
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        raise SystemExit("mpirun is not installed (openmpi-bin)")
    cores = os.cpu_count() or 1
    ranks = [int(x) for x in a.ranks.split(",")]
    print("cores %d; each rank runs cores/ranks threads (at least 1); %s" % (cores, time.strftime("%Y-%m-%d")))
    print("| job | ranks | threads/rank | wall s | slowest rank s | speed-up (wall) | max diff / max |")
    print("|---|---|---|---|---|---|---|")
    tmp = tempfile.mkdtemp(prefix="bench-mpi-")
    try:
        for alg, cfg in (("fdk", a.fdk), ("cgls", a.cgls)):
            v = [int(x) for x in cfg.split(",")]
            n, views, det, iters = v[0], v[1], v[2], (v[3] if len(v) > 3 else 1)
            d = os.path.join(tmp, alg)
            job(d, alg, n, views, det, iters)
            ref = None
            base = None
            for r in ranks:
                wall, slow, vol, th = run(a.build, d, r, cores)
                if ref is None:
                    ref, base = vol, wall
                diff = float(np.max(np.abs(vol - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
                name = "fdk %d^3, %d views %d^2" % (n, views, det) if alg == "fdk" else \
                    "cgls %d^3, %d views %d^2, %d it" % (n, views, det, iters)
                print("| %s | %d | %d | %.2f | %.2f | %.2f | %.1e |" % (name, r, th, wall, slow, base / wall, diff))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
