#!/usr/bin/env python3
"""Every job is either refused at creation or runs: nothing is accepted and
failed later (issue 17).

Walks geometry (cone, matrices, fan, parallel) x algorithm (fdk, sart, sirt,
cgls, mlem) x execution.engine (auto, cpu, opencl, cuda, tensor,
trigeneous) x execution.precision (fp32, mixed) through POST /v1/jobs.  Each
combination is either refused with 422 "unsupported" (any 4xx passes: the
status comes from server/http/http_error.c's one table), naming the field at
fault and every choice that would run, with nothing stored, or accepted
(201), given tiny projections (16 views of 24 x 24 pixels or 24 bins, an
8^3 volume, 2 iterations) and started, and then it must end `succeeded`.
The rules, as docs/api.md's table states them:

- cone and matrices run every algorithm on auto, cpu, opencl, cuda and
  trigeneous (not tensor);
- fan and parallel run every algorithm on every engine (iterative: the
  tensor backend or the CPU, OpenCL or CUDA engine's Joseph pair, split by
  trigeneous; fdk is FBP: the engine's 2-D back projection, or the tensor
  backend's product with FBP's matrix);
- opencl and cuda need such a device on some node of the store now (here:
  the daemon's own GET /v1/devices), else 422 at creation; a build without
  CUDA has no cuda device;
- execution.precision (fp32, mixed) is accepted on every combination.

The device rule's source is the probe: a daemon whose probe (--probe-worker)
lists the CPU and a (fake) CUDA device and no OpenCL device accepts cuda
(in a CUDA build; the job is not run) and refuses opencl; a daemon whose
probe has not answered yet answers 503 unavailable to an opencl or cuda job
and 201 to a cpu one.  With PostgreSQL (a private cluster of two nodes, as
test_cluster.py's; left out where PostgreSQL 15 is missing) a node without
a CUDA device accepts a cuda job while the other node, whose probe lists
one, is alive, and refuses it once that node has stopped (no heartbeat for
6 s).
"""

import json
import math
import os
import re
import subprocess
import time

import recond_harness
from recond_harness import (Daemon, Validation, check, deadline, log, require_binaries, run_main, store_files,
                            tempdir)

GEOMETRIES = ["cone", "matrices", "fan", "parallel"]
ALGORITHMS = ["fdk", "sart", "sirt", "cgls", "mlem"]
ENGINES = ["auto", "cpu", "opencl", "cuda", "tensor", "trigeneous"]
PRECISIONS = ["fp32", "mixed", "bf16"]
DEVICE_ENGINES = ("opencl", "cuda")  # engines that need a device of their kind
OFFERED = set()  # the device engines GET /v1/devices lists (main() fills it)

# the rule for fdk (FBP) on fan and parallel: which engines run it
def runs(geom, algo, engine):
    """docs/api.md's table: whether the combination runs (else 422 at creation)."""
    if engine in DEVICE_ENGINES and engine not in OFFERED:
        return False
    return geom in ("fan", "parallel") or engine != "tensor"


VIEWS, NU, N, D, S, DU = 16, 24, 8, 200.0, 400.0, 3.0


def matrices(views):
    """docs/geometry.md's matrices of the cone geometry below (world mm -> pixel (u, v, 1) * w)."""
    out = []
    for k in range(views):
        t = math.radians(360.0 * k / views)
        c, s_ = math.cos(t), math.sin(t)
        n, eu, ev, src = (-c, -s_, 0.0), (-s_, c, 0.0), (0.0, 0.0, 1.0), (D * c, D * s_, 0.0)
        cu = cv = (NU - 1) / 2.0
        rows = [[S / DU * eu[i] + cu * n[i] for i in range(3)], [S / DU * ev[i] + cv * n[i] for i in range(3)], list(n)]
        out.append([x for r in rows for x in r + [-sum(r[i] * src[i] for i in range(3))]])
    return out


def spec(geom, algo, engine, precision):
    g = {"type": geom}
    if geom == "matrices":
        g["matrices"] = matrices(VIEWS)
        g["detector"] = {"nu": NU, "nv": NU}
    else:
        g["angles"] = {"start_deg": 0.0, "step_deg": 360.0 / VIEWS, "count": VIEWS}
    if geom == "cone":
        g.update(source_isocenter_mm=D, source_detector_mm=S,
                 detector={"nu": NU, "nv": NU, "du_mm": DU, "dv_mm": DU})
    elif geom in ("fan", "parallel"):
        if geom == "fan":
            g.update(source_isocenter_mm=D, source_detector_mm=S)
        g.update(slices=N, detector={"nu": NU, "du_mm": DU})
    a = {"name": algo}
    if algo != "fdk":
        a["iterations"] = 2
    return {"label": "combination %s/%s/%s/%s" % (geom, algo, engine, precision), "geometry": g,
            "volume": {"nx": N, "ny": N, "nz": N, "voxel_mm": 2.0}, "algorithm": a,
            "execution": {"engine": engine, "precision": precision}}


def projections(geom):
    """A centred ball's projections, the same for every view (float32 bytes): cone and matrices
    [view][v][u], fan and parallel [slice][view][u]."""
    import array
    r = 6.0  # mm in the detector's scale
    prof = [2 * math.sqrt(max(0.0, r * r - ((i - (NU - 1) / 2.0) * DU / 2) ** 2)) * 0.02 for i in range(NU)]
    if geom in ("cone", "matrices"):
        view = [p * (1.0 if abs(j - (NU - 1) / 2.0) * DU / 2 < r else 0.0) for j in range(NU) for p in prof]
        return array.array("f", view * VIEWS).tobytes()
    return array.array("f", prof * (VIEWS * N)).tobytes()


def names_all(msg, words):
    return all(re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(w), msg) for w in words)


def script(body):
    path = os.path.join(tempdir("recond-probe-"), "probe.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o700)
    return path


def cuda_built():
    worker = os.path.join(recond_harness.BIN, "recond-worker")
    out = subprocess.run(["ldd", worker], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    return "libcudart" in out


def probe_rules():
    """The devices come from the daemon's probe, and nothing is decided before it answers."""
    J = {"Content-Type": "application/json"}
    fake = {"devices": [{"name": "host", "engine": "cpu", "type": "cpu", "device_id": "cpu:host:2c",
                         "hw_group": "host-cpu", "memory_bytes": 1 << 30, "compute_units": 2},
                        {"name": "Fake GPU", "engine": "cuda", "type": "gpu", "device_id": "cuda:GPU-fake",
                         "hw_group": "gpu-0", "memory_bytes": 1 << 30, "compute_units": 1}]}
    fake_probe = script("echo '%s'\n" % json.dumps(fake))
    d = Daemon(extra=["--probe-worker", fake_probe]).start()
    api = d.api()
    st, _, data, doc = api.request("POST", "/v1/jobs", json.dumps(spec("cone", "sirt", "cuda", "fp32")).encode(), J)
    want = 201 if cuda_built() else 422
    check("a probe listing a CUDA device: a cuda job is %d (CUDA build: %s)" % (want, cuda_built()), st == want,
          "got %d %s" % (st, data[:300]))
    st, _, data, doc = api.request("POST", "/v1/jobs", json.dumps(spec("cone", "sirt", "opencl", "fp32")).encode(), J)
    err = (doc or {}).get("error") or {}
    check("a probe listing no OpenCL device: an opencl job is 422 unsupported naming cpu and trigeneous",
          st == 422 and err.get("field") == "execution.engine" and names_all(err.get("message", ""), ["cpu", "trigeneous"]),
          "got %d %s" % (st, data[:300]))
    d.stop()
    d = Daemon(extra=["--probe-worker", script("sleep 6\nexec '%s' \"$@\"\n" % recond_harness.WORKER)]).start(ready=False)
    api = d.api()
    st, _, data, doc = api.request("POST", "/v1/jobs", json.dumps(spec("cone", "sirt", "opencl", "fp32")).encode(), J)
    check("before the probe answered: an opencl job is 503 unavailable", st == 503 and
          ((doc or {}).get("error") or {}).get("code") == "unavailable", "got %d %s" % (st, data[:300]))
    st, _, data, doc = api.request("POST", "/v1/jobs", json.dumps(spec("cone", "sirt", "cpu", "fp32")).encode(), J)
    check("before the probe answered: a cpu job is 201", st == 201, "got %d %s" % (st, data[:300]))
    d.stop()
    return fake_probe


def cluster_rules(fake_probe):
    import cluster_harness
    why = cluster_harness.pg_missing()
    if why:
        log("cluster part left out: %s" % why)
        return
    J = {"Content-Type": "application/json"}
    cl = cluster_harness.Cluster(2)
    cl.nodes[0].extra += ["--probe-worker", fake_probe]
    cl.start()
    api = cl.api(1)
    alive = deadline(10)  # a node's probed devices reach the store with its next heartbeat (every 2 s)
    listed = []
    while alive() and "cuda" not in listed:
        st, _, _, doc = api.get("/v1/nodes")
        listed = [dv.get("engine") for n in (doc or {}).get("nodes", []) if n.get("name") == "node-1"
                  for dv in n.get("devices", [])]
        time.sleep(0.2)
    check("cluster: GET /v1/nodes on node-2 lists node-1's CUDA device", "cuda" in listed, str(listed))
    body = json.dumps(spec("cone", "sirt", "cuda", "fp32")).encode()
    st, _, data, _ = api.request("POST", "/v1/jobs", body, J)
    want = 201 if cuda_built() else 422
    check("cluster: node-2 (no CUDA device) answers %d to a cuda job while node-1 (a CUDA device) is alive" % want,
          st == want, "got %d %s" % (st, data[:300]))
    cl.nodes[0].stop()
    alive = deadline(20)
    t0 = time.monotonic()
    while alive():
        st, _, data, doc = api.request("POST", "/v1/jobs", body, J)
        if st != 201:
            break
        time.sleep(0.5)
    err = (doc or {}).get("error") or {}
    check("cluster: once node-1 has stopped, node-2 refuses the cuda job (422 unsupported after %.1f s; alive: "
          "a heartbeat younger than 6 s)" % (time.monotonic() - t0),
          st == 422 and err.get("code") == "unsupported" and err.get("field") == "execution.engine",
          "got %d %s" % (st, data[:300]))
    cl.stop()


def main():
    require_binaries()
    cluster_rules(probe_rules())
    d = Daemon().start()
    api = d.api()
    st, _, _, doc = api.get("/v1/devices")
    OFFERED.update(dv["engine"] for dv in doc["devices"] if dv.get("engine") in DEVICE_ENGINES)
    log("device engines offered: %s" % (", ".join(sorted(OFFERED)) or "none"))
    accepted, refused = {}, []
    J = {"Content-Type": "application/json"}
    data_of = {g: projections(g) for g in GEOMETRIES}
    for geom in GEOMETRIES:
        for algo in ALGORITHMS:
            for engine in ENGINES:
                for prec in PRECISIONS:
                    name = "%s x %s x %s x %s" % (geom, algo, engine, prec)
                    before = store_files(d.store)
                    st, _, data, doc = api.request("POST", "/v1/jobs",
                                                   json.dumps(spec(geom, algo, engine, prec)).encode(), J)
                    if runs(geom, algo, engine):
                        ok = st == 201 and isinstance(doc, dict) and doc.get("state") == "created"
                        check("%s: accepted (201)" % name, ok, "got %d %s" % (st, data[:300].decode("utf-8", "replace")))
                        if ok:
                            accepted[doc["id"]] = (name, geom)
                        continue
                    err = (doc.get("error") if isinstance(doc, dict) else None) or {}
                    msg = err.get("message", "")
                    if not any(runs(geom, algo, e) for e in ENGINES):
                        field = "algorithm.name"
                        choices = [a for a in ALGORITHMS if any(runs(geom, a, e) for e in ENGINES)]
                    else:
                        field = "execution.engine"
                        choices = [e for e in ENGINES if runs(geom, algo, e)]
                    ok = (400 <= st < 500 and err.get("code") == "unsupported" and err.get("field") == field
                          and names_all(msg, choices))
                    check("%s: refused %d unsupported, field %s, message names %s" % (name, st, field, ", ".join(choices)),
                          ok, "got %d %s" % (st, data[:300].decode("utf-8", "replace")))
                    check("%s: the refusal stored nothing" % name, store_files(d.store) == before)
                    refused.append(name)
    check("some combinations are refused and some accepted", accepted and refused,
          "%d accepted, %d refused" % (len(accepted), len(refused)))
    listed = sorted(jid for jid, _state, _views in api.job_ids())
    check("the job list holds exactly the accepted jobs", listed == sorted(accepted),
          "%d listed, %d accepted" % (len(listed), len(accepted)))
    # every accepted job runs to succeeded (one at a time, in the order queued); uploaded only
    # now, so that the refusals above saw a store that nothing else changed
    t0 = time.monotonic()
    for jid, (name, geom) in accepted.items():
        up = api.put("/v1/jobs/%s/projections" % jid, data_of[geom])[0]
        sst = api.request("POST", "/v1/jobs/%s/start" % jid, b"", J)[0]
        check("%s: uploaded (%d) and started (%d)" % (name, up, sst), up == 200 and sst in (200, 202))
    alive = deadline(600)
    final = {}
    while len(final) < len(accepted) and alive():
        st, _, _, doc = api.get("/v1/jobs?limit=1000")
        for j in doc["jobs"] if st == 200 else []:
            if j["id"] in accepted and j["state"] in ("succeeded", "failed", "cancelled"):
                final[j["id"]] = j
        time.sleep(0.2)
    log("%d accepted jobs ran in %.1f s" % (len(accepted), time.monotonic() - t0))
    for jid, (name, _geom) in accepted.items():
        j = final.get(jid) or api.job(jid)
        err = j.get("error") or {}
        check("%s: succeeded (engine %s)" % (name, j.get("engine")), j["state"] == "succeeded",
              "%s: %s %s" % (j["state"], err.get("code"), err.get("message")))
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
