#!/usr/bin/env python3
"""The DICOM series names the iterations that ran (docs/api.md, "Progress"):
its Derivation Description is "recond sirt, K of 10 iterations (stopped:
stagnation)" for a job that the stagnation rule ended at iteration K (K
from the API's progress), and "recond sirt, 3 iterations" for one that ran
all it asked for.  Read with pydicom from GET .../volume?format=dicom."""

import io
import zipfile

import phantom
from recond_harness import Daemon, check, require_binaries, require_engine, run_main, sirt_runs, small_spec


def derivations(api, jid):
    import pydicom
    st, hdrs, body, _ = api.get("/v1/jobs/%s/volume?format=dicom" % jid, timeout=120)
    if st != 200:
        return {"%d %s" % (st, body[:200])}
    zf = zipfile.ZipFile(io.BytesIO(body))
    return {str(pydicom.dcmread(io.BytesIO(zf.read(n))).DerivationDescription) for n in zf.namelist()}


def run_job(api, spec, data):
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], data)
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    return api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=120)


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    require_engine(api)
    spec = small_spec(n=32, views=48, nu=40, nv=40, label="stagnates",
                      algorithm={"name": "sirt", "iterations": 10, "initial": "fdk", "stop": {"stagnation": 0.2}})
    data = phantom.project_cone(spec)
    fin = run_job(api, spec, data)
    p = fin["progress"]
    check("the job stagnated before its 10 iterations (iteration %s, stopped %s)" % (p.get("iteration"),
          p.get("stopped")), fin["state"] == "succeeded" and p.get("stopped") == "stagnation" and
          0 < p["iteration"] < 10, str(p))
    want = "recond sirt, %d of 10 iterations (stopped: stagnation)" % p["iteration"]
    got = derivations(api, fin["id"])
    check("every instance's Derivation Description is %r" % want, got == {want}, str(got))

    full = run_job(api, dict(spec, label="all ran", algorithm=sirt_runs(3)), data)
    p = full["progress"]
    got = derivations(api, full["id"])
    check("a job that ran its 3 iterations: 'recond sirt, 3 iterations'",
          full["state"] == "succeeded" and p["iteration"] == 3 and p.get("stopped") is None and
          got == {"recond sirt, 3 iterations"}, "%s %s" % (p, got))
    d.stop()


if __name__ == "__main__":
    run_main(main)
