#!/usr/bin/env python3
"""make bench-peers: recond against RTK (cone) and ASTRA (fan) on the same projections.

Creates build/peers-venv (numpy, itk-rtk, astra-toolbox from PyPI; reused when present) and runs
itself in it.  First the geometry mapping checks (scripts/peers_map.py, as
tests/integration/test_peers_mapping.py), then the cases, one markdown table each:

- paper 000's case: 128^3 voxels of 0.5 mm from 210 views of 256x200 pixels of 1 mm, D = 1000 mm,
  S = 1500 mm, full circle (bench/main_bench-algo.c): FDK, SART, SIRT, CGLS, MLEM at 5 and 20
  iterations (CGLS and MLEM also with the ray-casting pair; rows that share an RTK configuration
  share its run);
- issue 34's coarse case: 128^3 voxels of 2 mm from 210 views of 256x200 pixels of 2.4 mm (voxels
  project 1.25 pixels apart, so the CPU engine runs the footprint pair), D = 1000, S = 1500 mm, 5
  iterations: FDK, recond's defaults and the plain methods against RTK;
- offset and cylindrical detectors (RTK): 128^3 (0.5 mm) from 240 views; the projections made by
  RTK's own analytic projector (the phantom's tilted ellipsoids set straight); FDK on a flat
  detector of 128 pixels of 0.75 mm shifted by 28 mm (D = 500, S = 750 mm) against RTK's FDK after
  its DisplacedDetectorImageFilter, and on a cylindrical detector (280 pixels of 0.75 mm of arc,
  D = 150, S = 300 mm, a +-20 degree fan) against RTK's FDK of the same data resampled onto the
  equivalent flat detector (RTK 2.7's FDK refuses cylindrical detectors);
- 2-D (ASTRA): 32 fan slices of 256^2 (0.5 mm) from 360 views of 256 bins of 1 mm, CGLS, SIRT and
  recond's FBP (ASTRA's CPU FBP takes parallel geometries only); 32 parallel slices of 256^2 from
  360 views over 180 degrees of 384 bins of 0.5 mm, FBP against ASTRA's FBP_CPU and CGLS; the 2-D
  tables also give ms per image (slice) and iteration, since recond runs every slice in one job
  and ASTRA one slice after another;
- RabbitCT-shaped FDK: 512^3 (0.5 mm) from 496 views of 1248x960 (0.308 mm), D = 750, S = 1200 mm
  (bench/main_bench-cpu.c's shape); skipped with BENCH_PEERS_QUICK=1;
- RabbitCT-shaped iterative (`--only rabbitct-iter`, issue 34): 256^3 voxels of 1 mm from the same
  496 views of 1248x960 (0.308 mm), D = 750, S = 1200 mm (voxels project 5.2 pixels apart at the
  isocentre: the footprint pair), 5 iterations of plain SIRT, CGLS and MLEM against RTK, with a
  second table of seconds per iteration next to the footprint pair's floor (docs/cpu-engine.md's
  estimate at the case's ratio, `fpf_floor_s`); BENCH_PEERS_QUICK=1 runs it at 1/8 of the size in
  every dimension (32^3 of 8 mm from 62 views of 156x120 of 2.464 mm: the same field of view and
  ratio), RTK takes hours at the full size on two cores; BENCH_PEERS_SCALE=k runs it at 1/k of the
  size along every axis and of the views (k = 2: 128^3 of 2 mm from 248 views of 624x480 of 0.616 mm);
  k must divide 16 (1, 2, 4, 8 or 16: the sizes 256, 496, 1248 and 960 divide by it exactly, so the
  field of view and ratio stay), any other k is refused; under BENCH_PEERS_QUICK=1 the quick size
  wins and BENCH_PEERS_SCALE is not read.

BENCH_PEERS_QUICK=1 shrinks the cases (bench-algo's quick sizes) and skips RabbitCT's FDK.

Data: recond's modified Shepp-Logan (core/geometry/phantom.c's table, 0.94 of the field of view)
with exact line integrals from docs/api.md's formulas (peers_map.project_cone/_fan/_parallel); the
same float32 stack goes to both tools.  Truth: the same phantom voxelised (2^3 sub-samples; 2^2 in
a fan slice's plane).  Error: relative L2, ‖x − x0‖ / ‖x0‖, inside bench-algo's central cylinder
(radius 0.45·fov, half height 0.35·fov; a fan case: the radius in every slice).

What is timed: recond, from `POST /v1/jobs/{id}/start` until GET /v1/jobs/{id} reads `succeeded`
(polled every 20 ms: queueing, the worker's start, reading the spool, the reconstruction, writing
the volume; the table's "(recon s)" is the job's own timings.recon_s, the algorithm alone); the
upload and the download are not timed.  RTK: the filter's Update() (images built
from numpy beforehand).  ASTRA: astra.algorithm.run() summed over the slices (data objects made
beforehand).  All on every core: recond's worker default, ITK's default thread count, ASTRA's CPU
algorithms are single-threaded.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def scale_of(text):
    """BENCH_PEERS_SCALE's k: a divisor of 16 (of 256, 496, 1248 and 960, the RabbitCT-shaped
    iterative case's sizes, so that 1/k of each keeps the field of view); anything else exits."""
    try:
        k = int(text)
    except ValueError:
        k = 0
    if k not in (1, 2, 4, 8, 16):
        sys.exit("BENCH_PEERS_SCALE=%s: k must be 1, 2, 4, 8 or 16 (a divisor of 256, 496, 1248 and 960)" % text)
    return k


def ensure_venv(build):
    venv = os.path.join(build, "peers-venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    probe = "import numpy, itk, astra; from itk import RTK"
    if not (os.access(py, os.X_OK) and subprocess.run([py, "-c", probe], capture_output=True).returncode == 0):
        print("bench-peers: creating %s (numpy, itk-rtk, astra-toolbox from PyPI)" % venv, flush=True)
        subprocess.check_call([sys.executable, "-m", "venv", venv])
        subprocess.check_call([py, "-m", "pip", "install", "-q", "--upgrade", "pip"])
        subprocess.check_call([py, "-m", "pip", "install", "-q", "numpy", "itk-rtk", "astra-toolbox"])
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


# --- recond through its HTTP API ---------------------------------------------------------------

class Recond:
    def __init__(self, build):
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        os.environ.setdefault("RECOND_BUILD", build)
        import recond_harness as h
        self.h = h
        self.store = tempfile.mkdtemp(prefix="recond-peers-")
        self.daemon = h.Daemon(store=self.store).start()
        self.api = h.Api(self.daemon.url, validate=False)
        print("recond %s (store %s)" % (self.daemon.url, self.store), flush=True)

    def run(self, spec, proj):
        """Creates the job, uploads proj (float32 in recond's layout), starts it, waits; returns
        (volume [z][y][x] float32, seconds from start to succeeded, the job)."""
        import numpy as np
        j = self.api.create(spec)
        st, _, body, _ = self.api.request("PUT", "/v1/jobs/%s/projections" % j["id"],
                                          body=memoryview(np.ascontiguousarray(proj, np.float32)).cast("B"),
                                          headers={"Content-Type": "application/octet-stream"}, timeout=3600)
        if st != 200:
            raise RuntimeError("upload answered %d: %s" % (st, body[:300]))
        t0 = time.monotonic()
        st, _, body, _ = self.api.post_json("/v1/jobs/%s/start" % j["id"], b"")
        if st not in (200, 202):
            raise RuntimeError("start answered %d: %s" % (st, body[:300]))
        job = self.api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=7200, poll=0.02)
        dt = time.monotonic() - t0
        if job["state"] != "succeeded":
            raise RuntimeError("job %s: %s %s" % (j["id"], job["state"], job.get("error")))
        st, _, data, _ = self.api.get("/v1/jobs/%s/volume?format=raw" % j["id"], timeout=3600)
        if st != 200:
            raise RuntimeError("download answered %d" % st)
        v = spec["volume"]
        vol = np.frombuffer(data, np.float32).reshape(v["nz"], v["ny"], v["nx"]).copy()
        self.api.delete("/v1/jobs/%s" % j["id"])
        return vol, dt, job

    def stop(self):
        self.daemon.stop()
        import shutil
        shutil.rmtree(self.store, ignore_errors=True)


def recon_s(job):
    """The worker's own reconstruction time (job.timings.recon_s): the part of recond's wall time
    spent in the algorithm, without queueing, the worker's start and the spool I/O."""
    t = (job.get("timings") or {}).get("recon_s")
    return float("nan") if t is None else t


def peak_mib(job):
    """The worker's peak resident memory (job.peak_rss_mb), MiB."""
    m = job.get("peak_rss_mb")
    return float("nan") if m is None else m


def recond_spec(geom, vol, algo, label):
    """A job on engine cpu; algo's "_precision" (not sent as such) picks execution.precision (none:
    the default, auto)."""
    algo = dict(algo)
    precision = algo.pop("_precision", None)
    ex = {"engine": "cpu"}
    if precision:
        ex["precision"] = precision
    return {"label": label, "geometry": geom, "volume": vol, "algorithm": algo, "execution": ex, "priority": 5}


def tensor_info(job, nz):
    """What a 2-D job on the tensor backend says about itself: the precision that ran, the matrix
    cache (hit: mapped from an earlier job's, miss: built), its set-up s, and the ms per image and
    iteration inside its iterations (progress.elapsed_s over the iterations run: the figure
    bench-tensor-cg gives)."""
    m = job.get("matrix") or {}
    p = job.get("progress") or {}
    its, el = p.get("iteration") or 0, p.get("elapsed_s")
    per = 1000.0 * el / (its * nz) if its and nz and isinstance(el, (int, float)) else float("nan")
    return m.get("precision", "—"), m.get("cache", "—"), m.get("setup_s", float("nan")), per


def bench_tensor_cg(build):
    """bench-tensor-cg's fp16 non-zeros row at its default size (256^2 from 360 x 256 fan views, 32
    slices, 10 iterations): wall and CPU ms per image per iteration, or None."""
    exe = os.path.join(build, "bin", "bench-tensor-cg")
    env = dict(os.environ, RECOND_BENCH_ROWS="nz", RECOND_BENCH_ITERS="10")
    try:
        out = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=1800).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for ln in out.splitlines():
        if ln.strip().startswith("fp16 non-zeros"):
            f = ln.split()
            return float(f[3]), float(f[4])
    return None


# --- RTK -----------------------------------------------------------------------------------------

def rtk_run(pm, m, proj, vol, kind, iterations=1, per_subset=None, lam=1.0, x0=None):
    """One RTK reconstruction of recond's stack proj; returns (volume [z][y][x], Update() seconds)."""
    import itk
    import numpy as np
    from itk import RTK as rtk
    T = itk.Image[itk.F, 3]
    g = pm.rtk_objects(m)
    p = pm.rtk_proj_image(m, proj)
    init = np.full((vol["nz"], vol["ny"], vol["nx"]), 0.0 if x0 is None else x0, np.float32)
    v0 = pm.rtk_vol_image(m, init)
    nviews = proj.shape[0]
    if kind == "fdk":
        f = rtk.FDKConeBeamReconstructionFilter[T].New()
        f.SetInput(0, v0)
        f.SetInput(1, p)
        f.SetGeometry(g)
        f.GetRampFilter().SetTruncationCorrection(0.0)
        f.GetRampFilter().SetHannCutFrequency(0.0)   # ram-lak, recond's default window
    elif kind == "sart":
        f = rtk.SARTConeBeamReconstructionFilter[T, T].New()
        f.SetInput(0, v0)
        f.SetInput(1, p)
        f.SetGeometry(g)
        f.SetNumberOfIterations(iterations)
        f.SetLambda(lam)
        f.SetNumberOfProjectionsPerSubset(per_subset or nviews)
        f.SetForwardProjectionFilter(f.ForwardProjectionType_FP_JOSEPH)
        f.SetBackProjectionFilter(f.BackProjectionType_BP_VOXELBASED)
    elif kind == "cgls":
        f = rtk.ConjugateGradientConeBeamReconstructionFilter[T].New()
        f.SetInputVolume(v0)
        f.SetInputProjectionStack(p)
        f.SetInputWeights(pm.rtk_proj_image(m, np.ones_like(proj)))
        f.SetGeometry(g)
        f.SetNumberOfIterations(iterations)
        f.SetDisableDisplacedDetectorFilter(True)
        f.SetForwardProjectionFilter(f.ForwardProjectionType_FP_JOSEPH)
        f.SetBackProjectionFilter(f.BackProjectionType_BP_JOSEPH)
    elif kind == "mlem":
        f = rtk.OSEMConeBeamReconstructionFilter[T, T].New()
        f.SetInput(0, v0)
        f.SetInput(1, p)
        f.SetGeometry(g)
        f.SetNumberOfIterations(iterations)
        f.SetNumberOfProjectionsPerSubset(nviews)   # one subset: MLEM
        f.SetForwardProjectionFilter(f.ForwardProjectionType_FP_JOSEPH)
        f.SetBackProjectionFilter(f.BackProjectionType_BP_JOSEPH)
    else:
        raise ValueError(kind)
    t0 = time.monotonic()
    f.Update()
    dt = time.monotonic() - t0
    return m["from_rtk"](itk.array_from_image(f.GetOutput())), dt


def mlem_start(pm, m, proj, vol):
    """recond's MLEM start, x0 = Σ max(p, 0) / Σ A1 (A1 from RTK's Joseph projector: ray lengths)."""
    import numpy as np
    a1 = pm.rtk_forward(m, np.ones((vol["nz"], vol["ny"], vol["nx"]), np.float32), *proj.shape[0:1],
                        proj.shape[2], proj.shape[1])
    return float(np.clip(proj, 0, None).sum(dtype=np.float64) / a1.sum(dtype=np.float64))


# --- ASTRA ---------------------------------------------------------------------------------------

def astra_run(pm, m, sinos, vol, alg, iterations):
    """ASTRA's CPU algorithm slice by slice (sinos [slice][view][u]); returns (volume, seconds of
    astra.algorithm.run summed).  Fan: `line_fanflat` on the mapping's fanflat_vec; parallel:
    `line` on the plain `parallel` geometry of the same views (a = θ + 90°, no offset), the one
    ASTRA's CPU FBP takes (it refuses parallel_vec and every fan geometry)."""
    import astra
    import numpy as np
    vg, pg = pm.astra_geoms(m)
    if m["type"] == "parallel_vec":
        V = m["vectors"]
        if np.any(np.abs(V[:, 2:4]) > 1e-9):
            raise ValueError("a detector offset has no plain ASTRA parallel geometry")
        du = float(np.hypot(V[0, 4], V[0, 5]))
        pg = astra.create_proj_geom("parallel", du, m["nu"], np.arctan2(V[:, 5], V[:, 4]))
    pid = astra.create_projector("line_fanflat" if m["type"] == "fanflat_vec" else "line", pg, vg)
    out = np.empty((vol["nz"], vol["ny"], vol["nx"]), np.float32)
    total = 0.0
    try:
        for iz in range(sinos.shape[0]):
            sid = astra.data2d.create("-sino", pg, sinos[iz])
            rid = astra.data2d.create("-vol", vg, 0.0)
            cfg = astra.astra_dict(alg)
            cfg["ProjectorId"] = pid
            cfg["ProjectionDataId"] = sid
            cfg["ReconstructionDataId"] = rid
            aid = astra.algorithm.create(cfg)
            t0 = time.monotonic()
            astra.algorithm.run(aid, iterations)
            total += time.monotonic() - t0
            out[iz] = m["from_astra"](astra.data2d.get(rid))
            astra.algorithm.delete(aid)
            astra.data2d.delete([sid, rid])
    finally:
        astra.projector.delete(pid)
    return out, total


# --- the cases -----------------------------------------------------------------------------------

def table(title, peer, rows):
    print()
    print("### " + title)
    print()
    print("| algorithm | iterations | recond s | (recon s) | %s s | recond / %s | recond error | %s error "
          "| ‖recond − %s‖ / ‖%s‖ | recond peak MiB |" % (peer, peer, peer, peer, peer))
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.4f | %.4f | %.4f | %.0f |" % r)
    sys.stdout.flush()


def cone_case(pm, rc, title, n, vx, nviews, nu, nv, du, D, S, algos, iters_list):
    import numpy as np
    vol = {"nx": n, "ny": n, "nz": n, "voxel_mm": [vx, vx, vx]}
    geom = pm.cone_geometry(D, S, [360.0 * k / nviews for k in range(nviews)], nu, nv, du, du)
    fov = n * vx
    ells = pm.shepp_logan(0.94 * fov)
    t0 = time.monotonic()
    proj = pm.project_cone(ells, geom)
    ref = pm.voxelise(ells, vol, sub=2)
    mask = pm.cylinder_mask(vol, 0.45 * fov, 0.35 * fov)
    print("\n%s: data made in %.1f s (%d views of %dx%d, %.0f MB)" % (title, time.monotonic() - t0, nviews, nu, nv,
                                                                   proj.nbytes / 1e6), flush=True)
    m = pm.rtk_mapping(geom, vol)
    x0 = None
    rows = []
    rtk_done = {}  # one RTK run per (method, iterations, settings): rows that share it reuse it
    for name, its in [(a, i) for a in algos for i in ([1] if a[0] == "fdk" else iters_list)]:
        label, ralgo, rtk_kind, rtk_kw = name
        algo = dict(ralgo)
        if label != "fdk":
            algo["iterations"] = its
        rv, rt, job = rc.run(recond_spec(geom, vol, algo, "peers-%s-%d" % (label, its)), proj)
        kw = dict(rtk_kw)
        if rtk_kind == "mlem":
            if x0 is None:
                x0 = mlem_start(pm, m, proj, vol)
            kw["x0"] = x0
        key = (rtk_kind, its, repr(sorted(rtk_kw.items())))
        if key not in rtk_done:
            rtk_done[key] = rtk_run(pm, m, proj, vol, rtk_kind, iterations=its, **kw)
        pv, pt = rtk_done[key]
        rows.append((label, its, rt, recon_s(job), pt, rt / pt, pm.rel_error(rv, ref, mask), pm.rel_error(pv, ref, mask),
                     pm.rel_error(rv, pv, mask), peak_mib(job)))
        print("  %-40s %3d  recond %.2f s  RTK %.2f s" % (label, its, rt, pt), flush=True)
        del rv, pv
    rtk_done.clear()
    table(title, "RTK", rows)
    del proj
    return rows


def fpf_floor_s(n, nviews, r, cores=None, ghz=2.5):
    """The footprint pair's floor for one forward and one back projection of n^3 voxels over nviews
    views at ratio r (projected voxel over pixel): docs/cpu-engine.md's estimate per voxel-view, the
    1-D passes' taps at 0.45 cycle (forward r (floor(1/r) + 3) row-taps, back floor(r) + 3
    voxel-taps), the outer product's (r + 1.5) r multiply-adds at 0.087 cycle each (16 lanes) on
    each side, the column set-up's ~150 cycles over n voxels on each side, at ghz on every core."""
    import math
    cores = cores or os.cpu_count()
    fwd = 0.45 * r * (math.floor(1.0 / r) + 3) + 0.087 * (r + 1.5) * r + 150.0 / n
    bwd = 0.45 * (math.floor(r) + 3) + 0.087 * (r + 1.5) * r + 150.0 / n
    return float(n) ** 3 * nviews * (fwd + bwd) / (ghz * 1e9 * cores)


def per_iteration_table(title, rows, floor_s):
    """Seconds per iteration of the plain methods (from 0: the job's recon_s over its iterations;
    RTK: Update() over them) next to the footprint pair's floor for one forward and one back."""
    print()
    print("### " + title + ": seconds per iteration")
    print()
    print("| algorithm | iterations | recond s/it | RTK s/it | pair's floor s/it | recond / floor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        it = r[3] / r[1]
        print("| %s | %d | %.3f | %.3f | %.3f | %.1f |" % (r[0], r[1], it, r[4] / r[1], floor_s, it / floor_s))
    sys.stdout.flush()


def detector_case(pm, rc, title, n, vx, nviews, D, S, du, offset_nu, offset_mm, cyl):
    """FDK on an offset flat detector and on a cylindrical one, the projections made by RTK's
    analytic projector (the Shepp-Logan's tilted ellipsoids set straight): recond's FDK against
    RTK's FDK with its displaced-detector filter, and for the cylinder against RTK's FDK of the
    data resampled onto the equivalent flat detector (RTK 2.7's FDK refuses cylinders).
    cyl = (D, S, nu) of the cylinder's case."""
    vol = {"nx": n, "ny": n, "nz": n, "voxel_mm": [vx, vx, vx]}
    fov = n * vx
    ells = [(c, a, 0.0, mu) for c, a, _phi, mu in pm.shepp_logan(0.94 * fov)]
    ref = pm.voxelise(ells, vol, sub=2)
    mask = pm.cylinder_mask(vol, 0.45 * fov, 0.35 * fov)
    angles = [360.0 * k / nviews for k in range(nviews)]
    nv = int(1.25 * fov * S / D / du)
    rows = []
    geom = pm.cone_geometry(D, S, angles, offset_nu, nv, du, du, offset_u=offset_mm)
    m = pm.rtk_mapping(geom, vol)
    proj = pm.rtk_project_ellipsoids(m, ells, nviews, offset_nu, nv)
    rv, rt, job = rc.run(recond_spec(geom, vol, {"name": "fdk"}, "peers-offset-fdk"), proj)
    pv, pt = pm.rtk_fdk(m, proj, vol, displaced=True)
    rows.append(("fdk, offset detector %+.0f mm (RTK + DisplacedDetectorImageFilter)" % offset_mm, 1, rt,
                 recon_s(job), pt, rt / pt, pm.rel_error(rv, ref, mask), pm.rel_error(pv, ref, mask),
                 pm.rel_error(rv, pv, mask), peak_mib(job)))
    cd, cs, cnu = cyl
    cnv = int(1.25 * fov * cs / (cd - fov / 2) / du)
    geom = pm.cone_geometry(cd, cs, angles, cnu, cnv, du, du, shape="curved")
    m = pm.rtk_mapping(geom, vol)
    proj = pm.rtk_project_ellipsoids(m, ells, nviews, cnu, cnv)
    rv, rt, job = rc.run(recond_spec(geom, vol, {"name": "fdk"}, "peers-cylinder-fdk"), proj)
    flat, fproj = pm.curved_to_flat(proj, geom)
    pv, pt = pm.rtk_fdk(pm.rtk_mapping(flat, vol), fproj, vol, displaced=False)
    rows.append(("fdk, cylindrical detector (RTK: resampled flat)", 1, rt, recon_s(job), pt, rt / pt,
                 pm.rel_error(rv, ref, mask), pm.rel_error(pv, ref, mask), pm.rel_error(rv, pv, mask), peak_mib(job)))
    table(title, "RTK", rows)


def table2d(title, rows, slices, bench=None):
    """The 2-D table: recond runs every slice in one job, ASTRA one slice after another, so the
    times are also given per image (slice) and iteration, in ms.  A row without an ASTRA run
    (fan FBP: ASTRA's CPU FBP is parallel-only) shows "—" in ASTRA's columns.  "ASTRA / recond" is
    the speed-up of the whole job (start to succeeded) over ASTRA's run; the tensor columns say
    what the job ran (precision, matrix cache, set-up s) and its ms per image per iteration inside
    the iterations, next to bench-tensor-cg's (bench, when given)."""
    print()
    print("### " + title)
    print()
    if bench:
        print("bench-tensor-cg in the same run (fp16 non-zeros, 256^2 from 360 x 256, 32 slices, 10 iterations): "
              "%.2f ms wall, %.2f CPU ms per image per iteration (CPU of all threads)" % bench)
        print()
    print("| algorithm | iterations | recond s | (recon s) | ASTRA s | ASTRA / recond | recond ms / image / it "
          "| ASTRA ms / image / it | recond error | ASTRA error | ‖recond − ASTRA‖ / ‖ASTRA‖ | recond peak MiB "
          "| precision ran | matrix | set-up s | ms / image / it in iterations |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |")
    dash = "—"
    for label, its, rt, rs, at, er, ea, ed, mib, (prec, cache, setup, per_it) in rows:
        per = 1000.0 / (slices * its)
        peer = at is not None
        print("| %s | %d | %.2f | %.2f | %s | %s | %.2f | %s | %.4f | %s | %s | %.0f | %s | %s | %s | %s |" % (
            label, its, rt, rs, "%.2f" % at if peer else dash, "%.1f" % (at / rt) if peer else dash, rt * per,
            "%.2f" % (at * per) if peer else dash, er, "%.4f" % ea if peer else dash,
            "%.4f" % ed if peer else dash, mib, prec, cache, "%.2f" % setup if setup == setup else dash,
            "%.2f" % per_it if per_it == per_it else dash))
    sys.stdout.flush()


def flat_case(pm, rc, title, kind, n, vx, slices, vz, nviews, nu, du, D, S, runs, bench=None):
    """A 2-D case: kind "fan" (full circle, D and S) or "parallel" (180 degrees); runs are
    (label, recond algorithm, ASTRA algorithm or None, iterations)."""
    import numpy as np
    vol = {"nx": n, "ny": n, "nz": slices, "voxel_mm": [vx, vx, vz]}
    if kind == "fan":
        geom = pm.fan_geometry(D, S, [360.0 * k / nviews for k in range(nviews)], nu, du, slices)
    else:
        geom = pm.parallel_geometry([180.0 * k / nviews for k in range(nviews)], nu, du, slices)
    fov = n * vx
    ells = pm.shepp_logan(0.94 * fov)
    t0 = time.monotonic()
    sinos = (pm.project_fan if kind == "fan" else pm.project_parallel)(ells, geom, vol)
    ref = pm.voxelise(ells, vol, sub=2, planar=True)
    mask = pm.cylinder_mask(vol, 0.45 * fov, 1e9)
    print("\n%s: data made in %.1f s" % (title, time.monotonic() - t0), flush=True)
    m = (pm.astra_fan_mapping if kind == "fan" else pm.astra_parallel_mapping)(geom, vol)
    rows, peer = [], {}  # rows with the same ASTRA algorithm and iterations share its run
    for label, ralgo, alg, its in runs:
        algo = dict(ralgo) if ralgo["name"] == "fdk" else dict(ralgo, iterations=its)
        rv, rt, job = rc.run(recond_spec(geom, vol, algo, "peers-2d-%s-%s-%d" % (kind, label, its)), sinos)
        er = pm.rel_error(rv, ref, mask)
        if alg:
            if (alg, its) not in peer:
                peer[(alg, its)] = astra_run(pm, m, sinos, vol, alg, its)
            av, at = peer[(alg, its)]
            rows.append((label, its, rt, recon_s(job), at, er, pm.rel_error(av, ref, mask), pm.rel_error(rv, av, mask),
                         peak_mib(job), tensor_info(job, slices)))
            print("  %-40s %3d  recond %.2f s  ASTRA %.2f s" % (label, its, rt, at), flush=True)
        else:
            rows.append((label, its, rt, recon_s(job), None, er, None, None, peak_mib(job), tensor_info(job, slices)))
            print("  %-40s %3d  recond %.2f s  (no ASTRA CPU run)" % (label, its, rt), flush=True)
    table2d(title, rows, slices, bench)
    return np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default="", help="comma list of cases: mapping,paper000,coarse,detectors,fan,rabbitct,"
                    "rabbitct-iter")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    ensure_venv(build)
    sys.path.insert(0, HERE)
    import peers_map as pm
    quick = os.environ.get("BENCH_PEERS_QUICK", "0") not in ("", "0")
    # refused before any case runs; the quick size wins over it
    scale = 1 if quick else scale_of(os.environ.get("BENCH_PEERS_SCALE", "1") or "1")
    only = set(filter(None, a.only.split(",")))
    want = (lambda c: not only or c in only)

    import itk
    import astra
    print("bench-peers on %s (%d cores)%s; RTK %s (itk %s), ASTRA %s"
          % (cpu_model(), os.cpu_count(), ", BENCH_PEERS_QUICK" if quick else "",
             _version("itk-rtk"), itk.Version.GetITKVersion(), astra.__version__), flush=True)

    if want("mapping"):
        print("\n## geometry mappings (tests/integration/test_peers_mapping.py)\n")
        bad = 0
        for name, ok, _detail in (pm.check_phantom_module() + pm.check_rtk_mapping() + pm.check_rtk_matrices()
                                  + pm.check_astra_mapping() + pm.check_astra_parallel_mapping()):
            print("%s - %s" % ("ok" if ok else "FAIL", name))
            bad += not ok
        if bad:
            print("bench-peers: a geometry mapping check failed; no timings", file=sys.stderr)
            return 1

    rc = Recond(build)
    # The textbook methods, as RTK and ASTRA run them: recond's defaults add ordered subsets (sart),
    # non-negativity, TV, a stopping rule and MLEM's start from FDK (docs/algorithms.md), shown in
    # rows of their own.
    plain = {"subsets": 1, "nonnegative": False, "tv": {"weight": 0}, "stop": {"discrepancy": 0, "stagnation": 0},
             "initial": "zero"}
    try:
        lam = 1.0
        if want("paper000"):
            nv_ = 30 if quick else 210
            sub = 10
            dsub = max(1, nv_ // 10)
            algos = [
                ("fdk", {"name": "fdk"}, "fdk", {}),
                ("sart, recond's defaults (%d subsets, TV, from FDK, stagnation stop) (RTK %d proj./subset)"
                 % (dsub, nv_ // dsub), {"name": "sart"}, "sart", {"per_subset": nv_ // dsub, "lam": lam}),
                ("sart, the defaults from 0 without the stagnation stop (RTK %d proj./subset)" % (nv_ // dsub),
                 {"name": "sart", "initial": "zero", "stop": {"stagnation": 0}}, "sart",
                 {"per_subset": nv_ // dsub, "lam": lam}),
                ("sart, plain, 10 subsets (RTK %d proj./subset)" % (nv_ // sub),
                 dict(plain, name="sart", subsets=sub, relaxation=lam), "sart", {"per_subset": nv_ // sub, "lam": lam}),
                ("sart, plain, 1 subset (RTK all proj.)",
                 dict(plain, name="sart", relaxation=lam), "sart", {"per_subset": nv_, "lam": lam}),
                ("sirt, plain (RTK: SART, all proj./subset)", dict(plain, name="sirt", relaxation=lam), "sart",
                 {"per_subset": nv_, "lam": lam}),
                ("sirt, recond's defaults (TV) (RTK: SART, all proj./subset)", {"name": "sirt"}, "sart",
                 {"per_subset": nv_, "lam": lam}),
                ("cgls, plain", dict(plain, name="cgls"), "cgls", {}),
                ("cgls, plain, ray-casting pair", dict(plain, name="cgls", projector="raycast"), "cgls", {}),
                ("cgls, recond's defaults (from FDK, TV, stagnation stop)", {"name": "cgls"}, "cgls", {}),
                ("mlem, plain (RTK: OSEM, 1 subset)", dict(plain, name="mlem"), "mlem", {}),
                ("mlem, recond's defaults (from FDK, TV, stagnation stop) (RTK: OSEM, 1 subset)", {"name": "mlem"},
                 "mlem", {}),
                ("mlem, plain, ray-casting pair (RTK: OSEM, 1 subset)", dict(plain, name="mlem", projector="raycast"),
                 "mlem", {}),
            ]
            if quick:
                cone_case(pm, rc, "paper 000's case, quick: 32^3 (2 mm) from 30 views of 64x50 (4 mm)",
                          32, 2.0, 30, 64, 50, 4.0, 1000.0, 1500.0, algos, [5, 20])
            else:
                cone_case(pm, rc, "paper 000's case: 128^3 (0.5 mm) from 210 views of 256x200 (1 mm), D=1000 S=1500 mm",
                          128, 0.5, 210, 256, 200, 1.0, 1000.0, 1500.0, algos, [5, 20])
        if want("coarse"):
            # voxels 1.25 pixels apart: the footprint pair (docs/cpu-engine.md)
            nv_ = 30 if quick else 210
            dsub = max(1, nv_ // 10)
            algos = [
                ("fdk", {"name": "fdk"}, "fdk", {}),
                ("sart, recond's defaults (%d subsets, TV, from FDK, stagnation stop) (RTK %d proj./subset)"
                 % (dsub, nv_ // dsub), {"name": "sart"}, "sart", {"per_subset": nv_ // dsub, "lam": lam}),
                ("sirt, plain (RTK: SART, all proj./subset)", dict(plain, name="sirt", relaxation=lam), "sart",
                 {"per_subset": nv_, "lam": lam}),
                ("sirt, recond's defaults (TV) (RTK: SART, all proj./subset)", {"name": "sirt"}, "sart",
                 {"per_subset": nv_, "lam": lam}),
                ("cgls, plain", dict(plain, name="cgls"), "cgls", {}),
                ("cgls, recond's defaults (from FDK, TV, stagnation stop)", {"name": "cgls"}, "cgls", {}),
                ("mlem, plain (RTK: OSEM, 1 subset)", dict(plain, name="mlem"), "mlem", {}),
                ("mlem, recond's defaults (from FDK, TV, stagnation stop) (RTK: OSEM, 1 subset)", {"name": "mlem"},
                 "mlem", {}),
            ]
            if quick:
                cone_case(pm, rc, "issue 34's coarse case, quick: 32^3 (8 mm) from 30 views of 64x50 (9.6 mm)",
                          32, 8.0, 30, 64, 50, 9.6, 1000.0, 1500.0, algos, [5])
            else:
                cone_case(pm, rc, "issue 34's coarse case: 128^3 (2 mm) from 210 views of 256x200 (2.4 mm), D=1000 "
                          "S=1500 mm", 128, 2.0, 210, 256, 200, 2.4, 1000.0, 1500.0, algos, [5])
        if want("detectors"):
            if quick:
                detector_case(pm, rc, "offset and cylindrical detectors, quick: 32^3 (2 mm) from 60 views, D=500 S=750 "
                              "(cylinder D=150 S=300)", 32, 2.0, 60, 500.0, 750.0, 3.0, 32, 28.0, (150.0, 300.0, 70))
            else:
                detector_case(pm, rc, "offset and cylindrical detectors: 128^3 (0.5 mm) from 240 views, D=500 S=750 "
                              "(cylinder D=150 S=300)", 128, 0.5, 240, 500.0, 750.0, 0.75, 128, 28.0,
                              (150.0, 300.0, 280))
        if want("fan"):
            # the first two jobs on the geometry: the matrix built (and stored), then mapped
            runs = [("cgls, recond's defaults (from FDK, TV, stagnation stop), 1st job on the geometry",
                     {"name": "cgls"}, "CGLS", 10),
                    ("cgls, recond's defaults, 2nd job on the geometry", {"name": "cgls"}, "CGLS", 10),
                    ("cgls, plain (precision auto)", dict(plain, name="cgls"), "CGLS", 10),
                    ("cgls, plain, precision fp32 (CSR)", dict(plain, name="cgls", _precision="fp32"), "CGLS", 10),
                    ("cgls, plain, precision bf16", dict(plain, name="cgls", _precision="bf16"), "CGLS", 10),
                    ("sirt, plain", dict(plain, name="sirt"), "SIRT", 10),
                    ("fdk (FBP, ram-lak; ASTRA's CPU FBP is parallel-only)", {"name": "fdk"}, None, 1)]
            if quick:
                flat_case(pm, rc, "2-D fan, quick: 4 slices of 64^2 (2 mm) from 90 views of 64 bins (4 mm)",
                          "fan", 64, 2.0, 4, 8.0, 90, 64, 4.0, 1000.0, 1500.0, runs)
            else:
                flat_case(pm, rc, "2-D fan: 32 slices of 256^2 (0.5 mm) from 360 views of 256 bins (1 mm)",
                          "fan", 256, 0.5, 32, 2.0, 360, 256, 1.0, 1000.0, 1500.0, runs, bench_tensor_cg(build))
            runs = [("fdk (FBP, ram-lak) vs ASTRA FBP (FBP_CPU)", {"name": "fdk"}, "FBP", 1),
                    ("cgls, plain", dict(plain, name="cgls"), "CGLS", 10)]
            if quick:
                flat_case(pm, rc, "2-D parallel, quick: 4 slices of 64^2 (2 mm) from 90 views over 180 degrees of "
                          "96 bins (2 mm)", "parallel", 64, 2.0, 4, 8.0, 90, 96, 2.0, None, None, runs)
            else:
                flat_case(pm, rc, "2-D parallel: 32 slices of 256^2 (0.5 mm) from 360 views over 180 degrees of "
                          "384 bins (0.5 mm)", "parallel", 256, 0.5, 32, 2.0, 360, 384, 0.5, None, None, runs)
        if want("rabbitct") and not quick:
            cone_case(pm, rc, "RabbitCT-shaped FDK: 512^3 (0.5 mm) from 496 views of 1248x960 (0.308 mm), D=750 S=1200 mm",
                      512, 0.5, 496, 1248, 960, 0.308, 750.0, 1200.0, [("fdk", {"name": "fdk"}, "fdk", {})], [1])
        elif want("rabbitct"):
            print("\n(RabbitCT-shaped FDK skipped: BENCH_PEERS_QUICK)")
        if want("rabbitct-iter"):
            # issue 34: 256^3 of 1 mm from RabbitCT's views, voxels 5.2 pixels apart (the footprint
            # pair); quick: 1/8 in every dimension, the same field of view and ratio
            n, vx, nv_, nu, nvv, du = (32, 8.0, 62, 156, 120, 2.464) if quick else (256, 1.0, 496, 1248, 960, 0.308)
            # BENCH_PEERS_SCALE=k: 1/k of the size along every axis and of the views, the same
            # field of view and ratio (k = 2: 128^3 of 2 mm from 248 views of 624x480)
            k = scale
            if k > 1:
                n, vx, nv_, nu, nvv, du = n // k, vx * k, nv_ // k, nu // k, nvv // k, du * k
            D, S = 750.0, 1200.0
            algos = [
                ("sirt, plain (RTK: SART, all proj./subset)", dict(plain, name="sirt", relaxation=lam), "sart",
                 {"per_subset": nv_, "lam": lam}),
                ("cgls, plain", dict(plain, name="cgls"), "cgls", {}),
                ("mlem, plain (RTK: OSEM, 1 subset)", dict(plain, name="mlem"), "mlem", {}),
            ]
            title = ("RabbitCT-shaped iterative%s: %d^3 (%g mm) from %d views of %dx%d (%g mm), D=750 S=1200 mm"
                     % (", quick (1/8 size)" if quick else (", 1/%d size" % k if k > 1 else ""), n, vx, nv_, nu,
                        nvv, du))
            rows = cone_case(pm, rc, title, n, vx, nv_, nu, nvv, du, D, S, algos, [5])
            per_iteration_table(title, rows, fpf_floor_s(n, nv_, vx * S / D / du))
    finally:
        rc.stop()
    print("\nerror: relative L2 against the voxelised phantom inside the central cylinder "
          "(r = 0.45 fov, |z| <= 0.35 fov; 2-D: r only); difference: the same norm of recond − peer over "
          "the peer's volume.  recond s: start to succeeded over HTTP; RTK s: Update(); ASTRA s: "
          "algorithm.run summed over slices.  One run each.")
    return 0


def _version(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:  # noqa: BLE001
        return "?"


if __name__ == "__main__":
    sys.exit(main())
