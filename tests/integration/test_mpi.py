#!/usr/bin/env python3
"""One job across MPI ranks (execution.ranks, docs/cluster.md) on this machine's loopback:
FDK (z-slabs) and CGLS (views split, back projections summed with MPI_Allreduce) with 1, 2
and 3 ranks (mpirun --oversubscribe on 2 cores) give the single-process volume to 1e-5 of its
largest value; so do SIRT, MLEM, SART with 4 subsets and a fan CGLS on the tensor backend
with 2 ranks, every rank ending with the same volume; the Job lists every rank with its
time; a rank killed with SIGKILL fails the job with a message naming it, the daemon keeps
serving and runs the next job; a cancel ends every rank; an FDK rank's peak is its slab's and the detector rows it reads
(under 3/4 of one process's where the stack is large, and under the per-rank prediction);
ranks beyond --mpi-max-ranks, or on
a daemon without MPI, are refused with 422 naming execution.ranks.
Skipped where mpirun or recond-worker-mpi is missing (install-deps.sh installs Open MPI)."""

import json
import os
import shutil
import signal
import time

from recond_harness import (BUILD, Daemon, Validation, check, deadline, log, read_f32, require_binaries, run_main,
                            skip)
import phantom

MPI_WORKER = os.path.join(BUILD, "bin", "recond-worker-mpi")
# Open MPI refuses root without these; loopback only, more ranks than cores
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
MPI_ARGS = "--oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo"


def spec_of(alg, ranks, n=24, views=40, iterations=4):
    algorithm = {"name": "fdk"} if alg == "fdk" else \
        {"name": alg, "iterations": iterations, "initial": "zero", "stop": {"stagnation": 0}}
    s = phantom.cone_spec(n=n, voxel=1.0, views=views, nu=40, nv=40, du=1.5, dv=1.5, algorithm=algorithm,
                          label="%s-ranks-%d" % (alg, ranks))
    s["execution"]["ranks"] = ranks
    return s


def fan_case(ranks, alg="cgls"):
    """A small fan stack (4 slices) on execution.engine auto: CGLS runs on the tensor backend."""
    views, nu, n, sl = 60, 48, 32, 4
    s = {"label": "fan-%s-ranks-%d" % (alg, ranks),
         "geometry": {"type": "fan", "slices": sl, "source_isocenter_mm": 200.0, "source_detector_mm": 400.0,
                      "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views},
                      "detector": {"nu": nu, "du_mm": 1.5}},
         "volume": {"nx": n, "ny": n, "nz": sl, "voxel_mm": [1.0, 1.0, 1.0]},
         "algorithm": {"name": alg, "iterations": 3, "initial": "zero"},
         "execution": {"engine": "auto", "ranks": ranks}}
    row = []
    for i in range(nu):
        u = (i - (nu - 1) / 2) * 1.5
        row.append(0.02 * max(15.0 ** 2 - u * u, 0.0) ** 0.5)
    return s, __import__("array").array("f", row * (views * sl)).tobytes()


def run(api, spec, proj, timeout=120):
    j = api.create(spec)
    st, _, body, _ = api.put("/v1/jobs/%s/projections" % j["id"], proj)
    if st not in (200, 204):
        raise RuntimeError("PUT projections answered %d: %s" % (st, body[:200]))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    return api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=timeout)


def volume(api, jid):
    st, _, body, _ = api.get("/v1/jobs/%s/volume" % jid)
    return read_f32(body) if st == 200 else None


def rel_max(v, ref):
    m = max(abs(x) for x in ref) or 1.0
    return max(abs(a - b) for a, b in zip(v, ref)) / m


def rank_pids(job_dir_tail):
    """{rank: pid} of the recond-worker-mpi processes working on the job directory."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read().split(b"\0")
            if not cmd or not cmd[0].endswith(b"recond-worker-mpi") or not cmd[-2].endswith(job_dir_tail.encode()):
                continue
            with open("/proc/%s/environ" % p, "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
            r = env.get(b"OMPI_COMM_WORLD_RANK")
            if r is not None:
                out[int(r)] = int(p)
        except (OSError, IndexError, ValueError):
            pass
    return out


def rows_only(api):
    """A stack large beside the volume (59 MiB, 300 views of 256 x 200, noise) for 128 x 128 x 96:
    each of 3 ranks reads and filters only the rows its slab reaches, so its peak is well under
    one process's (which holds the stack and its filtered copy whole) and under the per-rank
    prediction, and the volume is the one-process one to 1e-5."""
    import numpy as np
    s = phantom.cone_spec(n=128, voxel=1.0, views=300, nu=256, nv=200, du=1.0, dv=1.0, D=500.0, S=1000.0,
                          algorithm={"name": "fdk"}, label="rows-only")
    s["volume"]["nz"] = 96
    data = np.random.default_rng(5).random(300 * 256 * 200, dtype=np.float32).tobytes()
    out = {}
    for r in (1, 3):
        s["execution"]["ranks"] = r
        j = run(api, s, data, timeout=300)
        st, _, body, _ = api.get("/v1/jobs/%s/volume?format=raw" % j["id"], timeout=120)
        ok = j["state"] == "succeeded" and st == 200
        check("rows-only fdk, %d rank(s): succeeded" % r, ok, "%s %s" % (j["state"], j.get("error")))
        if not ok:
            return
        out[r] = (j, np.frombuffer(body, dtype=np.float32).astype(np.float64))
    one, ranks = out[1][0], out[3][0]
    peaks = [x["peak_rss_mb"] for x in ranks.get("ranks") or []]
    pred = ranks["summary"]["plan_memory_bytes"] / 1048576.0
    log("rows-only fdk: one process %.1f MiB; 3 ranks %s MiB, predicted per rank %.1f MiB"
        % (one["peak_rss_mb"], peaks, pred))
    check("rows-only fdk, 3 ranks: every rank's peak under 3/4 of one process's",
          len(peaks) == 3 and max(peaks) < 0.75 * one["peak_rss_mb"], "%s %s" % (peaks, one["peak_rss_mb"]))
    check("rows-only fdk, 3 ranks: every rank's peak under the per-rank prediction",
          len(peaks) == 3 and max(peaks) <= pred, "%s %.1f" % (peaks, pred))
    ref, v = out[1][1], out[3][1]
    err = float(np.max(np.abs(v - ref)) / np.max(np.abs(ref)))
    log("rows-only fdk, 3 ranks: max |ranks - one process| / max |one process| = %.3g" % err)
    check("rows-only fdk, 3 ranks: the one-process volume to 1e-5", err <= 1e-5, "%.3g" % err)


def main():
    require_binaries()
    if not shutil.which("mpirun"):
        skip("mpirun is not installed (openmpi-bin; scripts/install-deps.sh installs it)")
    if not os.access(MPI_WORKER, os.X_OK):
        skip("%s is not built (libopenmpi-dev)" % MPI_WORKER)

    # a daemon without MPI refuses ranks > 1
    d0 = Daemon().start()
    st, _, body, doc = d0.api().post_json("/v1/jobs", spec_of("fdk", 2))
    check("no --mpi-max-ranks: ranks 2 refused with 422 naming execution.ranks",
          st == 422 and (doc or {}).get("error", {}).get("field") == "execution.ranks", "%d %s" % (st, body[:200]))
    d0.stop()

    d = Daemon(extra=["--mpi-max-ranks", "3", "--mpi-args", MPI_ARGS], env=MPI_ENV).start()
    api = d.api()
    st, _, body, doc = api.post_json("/v1/jobs", spec_of("fdk", 4))
    check("ranks 4 over --mpi-max-ranks 3: 422 naming execution.ranks",
          st == 422 and (doc or {}).get("error", {}).get("field") == "execution.ranks", "%d %s" % (st, body[:200]))
    st, _, body, doc = api.post_json("/v1/jobs", spec_of("fdk", 0))
    check("ranks 0: 400 naming execution.ranks",
          st == 400 and (doc or {}).get("error", {}).get("field") == "execution.ranks", "%d %s" % (st, body[:200]))
    bad = spec_of("fdk", 2)
    bad["execution"]["stream"] = True
    st, _, body, doc = api.post_json("/v1/jobs", bad)
    check("ranks 2 with stream true: 422 naming execution.stream",
          st == 422 and (doc or {}).get("error", {}).get("field") == "execution.stream", "%d %s" % (st, body[:200]))

    proj = phantom.project_cone(spec_of("fdk", 1))
    proj = proj if isinstance(proj, bytes) else __import__("array").array("f", proj).tobytes()
    for alg in ("fdk", "cgls"):
        ref = None
        for ranks in (1, 2, 3):
            t0 = time.time()
            j = run(api, spec_of(alg, ranks), proj)
            ok = j["state"] == "succeeded"
            check("%s ranks %d: succeeded" % (alg, ranks), ok, "%s %s" % (j["state"], j.get("error")))
            if not ok:
                continue
            v = volume(api, j["id"])
            check("%s ranks %d: summary.ranks" % (alg, ranks), j["summary"].get("ranks", 1) == ranks, j["summary"])
            if ranks == 1:
                ref = v
                check("%s ranks 1: no ranks list (one process)" % alg, j.get("ranks") is None, j.get("ranks"))
                continue
            err = rel_max(v, ref)
            check("%s ranks %d: volume equals one process's to 1e-5" % (alg, ranks), err <= 1e-5,
                  "max |diff| / max |ref| = %.2e (%.2f s)" % (err, time.time() - t0))
            rk = j.get("ranks") or []
            check("%s ranks %d: the Job lists every rank with its time" % (alg, ranks),
                  [r["rank"] for r in rk] == list(range(ranks)) and all(r["seconds"] >= 0 and r["host"] for r in rk),
                  rk)
            if alg == "cgls":
                check("cgls ranks %d: every rank ended with the same volume" % ranks, j.get("ranks_identical") is True,
                      j.get("ranks_identical"))

    # the other algorithms and a fan stack on the tensor backend, 2 ranks against 1
    cases = []
    for alg, extra in (("sirt", {}), ("mlem", {}), ("sart", {"subsets": 4})):
        one, two = spec_of(alg, 1, iterations=3), spec_of(alg, 2, iterations=3)
        one["algorithm"].update(extra)
        two["algorithm"].update(extra)
        cases.append((alg + (" subsets 4" if extra else ""), one, two, proj))
    (f1, fp), (f2, _) = fan_case(1), fan_case(2)
    cases.append(("fan cgls (tensor)", f1, f2, fp))
    for name, one, two, data in cases:
        j1, j2 = run(api, one, data), run(api, two, data)
        ok = j1["state"] == "succeeded" and j2["state"] == "succeeded"
        check("%s: 1 and 2 ranks succeeded" % name, ok, "%s %s / %s %s" % (j1["state"], j1.get("error"), j2["state"],
                                                                          j2.get("error")))
        if ok:
            err = rel_max(volume(api, j2["id"]), volume(api, j1["id"]))
            check("%s: 2 ranks equal one process to 1e-5, ranks identical" % name,
                  err <= 1e-5 and j2.get("ranks_identical") is True, "%.2e %s" % (err, j2.get("ranks_identical")))

    # a rank killed with SIGKILL: a CGLS long enough to be caught running
    long_spec = spec_of("cgls", 2, iterations=10000)
    j = api.create(long_spec)
    api.put("/v1/jobs/%s/projections" % j["id"], proj)
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    alive = deadline(60)
    pids = {}
    while alive() and len(pids) < 2:
        pids = rank_pids(j["id"])
        time.sleep(0.2)
    check("killed rank: both ranks seen running", len(pids) == 2, pids)
    if 1 in pids:
        time.sleep(1.0)  # into its iterations
        os.kill(pids[1], signal.SIGKILL)
    jf = api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=60)
    msg = (jf.get("error") or {}).get("message") or ""
    check("killed rank: the job failed", jf["state"] == "failed", "%s %s" % (jf["state"], jf.get("error")))
    check("killed rank: the error names rank 1", "rank 1" in msg, msg)
    alive = deadline(20)
    while alive() and rank_pids(j["id"]):
        time.sleep(0.2)
    check("killed rank: no rank left running", not rank_pids(j["id"]), rank_pids(j["id"]))
    st, _, _, _ = api.get("/readyz")
    check("killed rank: the daemon still answers /readyz", st == 200, st)
    jn = run(api, spec_of("fdk", 2), proj)
    check("killed rank: the next job (fdk, 2 ranks) succeeds", jn["state"] == "succeeded",
          "%s %s" % (jn["state"], jn.get("error")))
    # a cancel reaches every rank: the job ends cancelled, no rank left
    j = api.create(spec_of("cgls", 2, iterations=10000))
    api.put("/v1/jobs/%s/projections" % j["id"], proj)
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    alive = deadline(60)
    while alive() and len(rank_pids(j["id"])) < 2:
        time.sleep(0.2)
    time.sleep(1.0)
    t0 = time.time()
    api.post_json("/v1/jobs/%s/cancel" % j["id"], b"")
    jc = api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=60)
    check("cancel across ranks: the job ends cancelled", jc["state"] == "cancelled",
          "%s %s after %.1f s" % (jc["state"], jc.get("error"), time.time() - t0))
    alive = deadline(20)
    while alive() and rank_pids(j["id"]):
        time.sleep(0.2)
    check("cancel across ranks: no rank left running", not rank_pids(j["id"]), "%s after %.1f s"
          % (rank_pids(j["id"]), time.time() - t0))
    # z-slabs: each rank's memory is its slab's and its detector rows' (it reads and filters
    # only those), so an FDK over the memory budget as one process is accepted across ranks;
    # a slab that some views miss reconstructs as the one-process volume does there.  64^2
    # slices: the slab's saving outweighs what Open MPI adds to each rank's process
    tall = spec_of("fdk", 1, n=64)
    tall["volume"]["nz"] = 480
    tp = phantom.project_cone(tall)
    tp = tp if isinstance(tp, bytes) else __import__("array").array("f", tp).tobytes()
    mem = {}
    for r in (1, 3):
        s = json.loads(json.dumps(tall))
        s["execution"]["ranks"] = r
        mem[r] = api.create(s)["summary"]["plan_memory_bytes"]
    check("fdk z-slabs: 3 ranks predict less memory per rank than one process", mem[3] < mem[1], mem)
    j1 = run(api, tall, tp)
    ref = volume(api, j1["id"]) if j1["state"] == "succeeded" else None
    check("tall fdk, one process: succeeded", ref is not None, "%s %s" % (j1["state"], j1.get("error")))
    rows_only(api)
    d.stop()
    budget = (mem[1] + mem[3]) // 2
    d = Daemon(extra=["--mpi-max-ranks", "3", "--mpi-args", MPI_ARGS, "--memory-limit", str(budget)],
               env=MPI_ENV).start()
    api = d.api()
    st, _, body, doc = api.post_json("/v1/jobs", tall)
    mp = ((doc or {}).get("summary") or {}).get("memory_plan") or {}
    check("fdk over the budget as one process: planned out of core (docs/server.md)",
          st == 201 and mp.get("mode") == "out_of_core", "%d %s" % (st, mp or body[:160]))
    tall["execution"]["ranks"] = 3
    # ranks started on this machine share its budget (no --mpi-hosts here)
    st, _, body, doc = api.post_json("/v1/jobs", tall)
    check("3 ranks on this machine together over the budget: 422 naming execution.ranks",
          st == 422 and (doc or {}).get("error", {}).get("field") == "execution.ranks", "%d %s" % (st, body[:200]))
    d.stop()
    # listed hosts (here this one with 3 slots): each rank is checked alone
    d = Daemon(extra=["--mpi-max-ranks", "3", "--mpi-args", MPI_ARGS, "--memory-limit", str(budget),
                      "--mpi-hosts", "localhost:3"], env=MPI_ENV).start()
    api = d.api()
    jt = run(api, tall, tp)
    jp = (jt.get("summary") or {}).get("memory_plan") or {}
    check("fdk over the budget as one process: 3 ranks over listed hosts accepted, in core each, and succeeded",
          jt["state"] == "succeeded" and jp.get("mode") == "in_core",
          "%s %s %s" % (jt["state"], jt.get("error"), jp))
    if jt["state"] == "succeeded" and ref is not None:
        err = rel_max(volume(api, jt["id"]), ref)
        log("tall fdk, 3 ranks: max |ranks - one process| / max |one process| = %.3g" % err)
        check("tall fdk, 3 ranks: the one-process volume to 1e-5", err <= 1e-5, "%.2e" % err)
        peaks = [r["peak_rss_mb"] for r in jt.get("ranks") or []]
        check("tall fdk, 3 ranks: every rank's own peak under the budget", peaks and max(peaks) * 1048576 < budget,
              "ranks %s MiB, budget %.1f MiB, mpirun's tree %s MiB" % (peaks, budget / 1048576.0, jt.get("peak_rss_mb")))
        check("tall fdk, 3 ranks: every rank's own peak under the per-rank prediction",
              peaks and max(peaks) * 1048576 <= mem[3], "ranks %s MiB, predicted %.1f MiB" % (peaks, mem[3] / 1048576.0))
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
