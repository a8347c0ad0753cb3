#!/usr/bin/env python3
"""A job that no engine can run as asked is refused at creation, never
accepted and failed later.

Walks geometry (cone, fan, parallel) x algorithm (fdk, sart, sirt, cgls, mlem)
x execution.engine (auto, cpu, opencl, cuda, tensor, trigeneous) through
POST /v1/jobs.  Each combination is either refused with 422 "unsupported"
(any 4xx passes: the status comes from server/http_error.c's one table),
naming the field at fault and every choice that would run, with nothing
stored, or accepted (201; the job is not run: whether the host has the
device is decided when it runs).  The rules, as docs/api.md states them:

- fdk (FBP) on fan and parallel runs on the CPU, OpenCL or CUDA engine:
  execution.engine auto, cpu, opencl or cuda;
- the other algorithms on fan and parallel run on the tensor backend or the
  OpenCL or CUDA engine: execution.engine auto, cpu, tensor, opencl or cuda;
- the tensor engine runs fan and parallel only;
- cone runs every algorithm on auto, cpu, opencl, cuda and trigeneous.
"""

import json
import os
import re
import subprocess

import recond_harness
from recond_harness import Daemon, Validation, check, require_binaries, run_main, store_files

GEOMETRIES = ["cone", "fan", "parallel"]
ALGORITHMS = ["fdk", "sart", "sirt", "cgls", "mlem"]
ENGINES = ["auto", "cpu", "opencl", "cuda", "tensor", "trigeneous"]


def cuda_built():
    """A build without nvcc refuses execution.engine cuda at creation."""
    worker = os.path.join(recond_harness.BUILD, "bin", "recond-worker")
    out = subprocess.run(["ldd", worker], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    return "libcudart" in out


CUDA_BUILT = None


def runs(geom, algo, engine):
    global CUDA_BUILT
    if CUDA_BUILT is None:
        CUDA_BUILT = cuda_built()
    if engine == "cuda" and not CUDA_BUILT:
        return False
    flat = geom in ("fan", "parallel")
    if flat and algo == "fdk":
        return engine in ("auto", "cpu", "opencl", "cuda")
    if flat:
        return engine in ("auto", "cpu", "tensor", "opencl", "cuda")
    return engine != "tensor"


def spec(geom, algo, engine):
    views, nu = 16, 24
    g = {"type": geom, "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views}}
    if geom == "cone":
        g.update(source_isocenter_mm=200.0, source_detector_mm=400.0,
                 detector={"nu": nu, "nv": nu, "du_mm": 3.0, "dv_mm": 3.0})
        vol = {"nx": 16, "ny": 16, "nz": 16, "voxel_mm": 2.0}
    else:
        if geom == "fan":
            g.update(source_isocenter_mm=200.0, source_detector_mm=400.0)
        g.update(slices=2, detector={"nu": nu, "du_mm": 3.0})
        vol = {"nx": 16, "ny": 16, "nz": 2, "voxel_mm": 2.0}
    a = {"name": algo}
    if algo != "fdk":
        a["iterations"] = 2
    return {"label": "refusal %s/%s/%s" % (geom, algo, engine), "geometry": g, "volume": vol,
            "algorithm": a, "execution": {"engine": engine}}


def names_all(msg, words):
    return all(re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(w), msg) for w in words)


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    accepted, refused = [], []
    J = {"Content-Type": "application/json"}
    for geom in GEOMETRIES:
        for algo in ALGORITHMS:
            for engine in ENGINES:
                name = "%s x %s x %s" % (geom, algo, engine)
                before = store_files(d.store)
                st, _, data, doc = api.request("POST", "/v1/jobs", json.dumps(spec(geom, algo, engine)).encode(), J)
                if runs(geom, algo, engine):
                    ok = st == 201 and isinstance(doc, dict) and doc.get("state") == "created"
                    check("%s: accepted (201)" % name, ok, "got %d %s" % (st, data[:300].decode("utf-8", "replace")))
                    if ok:
                        accepted.append(doc["id"])
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
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
