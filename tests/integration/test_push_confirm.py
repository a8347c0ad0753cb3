#!/usr/bin/env python3
"""dicom.push_confirm_warnings: a job with warnings does not reach the PACS
before an operator confirms it (POST /v1/jobs/{id}/push), against a real
Orthanc (orthanc_harness.py, as test_pacs.py).

- a clean job (exact line integrals of phantom.py's ellipsoids) has no
  warning and is sent by itself;
- the same data as intensities (1e4 exp(-p), the pre-log mistake) succeeds
  with the pre_log warning; its push is held: delivery
  awaiting_confirmation, the push pending with no next_attempt and the
  reason in its error, nothing in Orthanc after a while, still held after
  a daemon restart; its event stream's last state carries the warnings;
- POST push sends it; Orthanc then holds the series, whose Image Comments
  name the warning;
- without the key (the default) the same job is sent without waiting.
"""

import json
import math
import array
import os
import time

import orthanc_harness
import phantom
from recond_harness import Daemon, check, log, require_binaries, run_main, skip, tempdir
from test_pacs import orthanc_series, submit, wait_delivery, wait_job

NZ = 12


def make_spec(push, patient, label):
    s = phantom.cone_spec(n=16, voxel=1.5, views=48, nu=32, nv=32, du=1.5, dv=1.5, label=label)
    s["volume"]["nz"] = NZ
    s["output"] = {"water_mu_per_mm": 0.0192, "push": push}
    s["dicom"] = {"patient_id": patient}
    s["autostart"] = True
    return s


def write_cfg(path, o, confirm):
    cfg = {"dicom": {"push_retry_s": 0.2, "push_max_attempts": 2},
           "destinations": [{"name": "pacs", "kind": "c-store", "host": "127.0.0.1", "port": o.dicom_port,
                             "called_ae": "ORTHANC", "calling_ae": "RECOND-IT", "timeout_s": 30}]}
    if confirm is not None:
        cfg["dicom"]["push_confirm_warnings"] = confirm
    with open(path, "w") as f:
        json.dump(cfg, f)


def main():
    require_binaries()
    ok, why = orthanc_harness.available()
    if not ok:
        skip(why)
    try:
        import pydicom  # noqa: F401
    except ImportError:
        skip("pydicom is not installed (Debian package python3-pydicom)")
    tmp = tempdir("recond-confirm-")
    o = orthanc_harness.Orthanc(aet="ORTHANC")
    o.start()
    cfg_path = os.path.join(tmp, "recond.json")
    write_cfg(cfg_path, o, True)
    d = Daemon(config=cfg_path).start()
    api = d.api()

    clean = phantom.project_cone(make_spec(["pacs"], "X", "ref"))
    a = array.array("f")
    a.frombytes(clean)
    prelog = array.array("f", (1e4 * math.exp(-x) for x in a)).tobytes()

    jid = submit(api, make_spec(["pacs"], "PID-CLEAN", "clean"), clean)
    j = wait_delivery(api, jid, ("sent", "send_failed"))
    check("a clean job has no warning and is sent by itself", j.get("warnings") == [] and j.get("delivery") == "sent",
          "%s %s" % (j.get("warnings"), j.get("push")))

    jid = submit(api, make_spec(["pacs"], "PID-WARN", "prelog"), prelog)
    j = wait_job(api, jid, lambda j: j["state"] in ("succeeded", "failed", "cancelled"))
    codes = [w["code"] for w in j.get("warnings") or []]
    check("the pre-log job succeeds with the pre_log warning", j["state"] == "succeeded" and "pre_log" in codes,
          "%s %s" % (j["state"], codes))
    push = (j.get("push") or [{}])[0]
    check("its push is held: delivery awaiting_confirmation, pending, no next_attempt, the reason given",
          j.get("delivery") == "awaiting_confirmation" and push.get("state") == "pending" and
          push.get("next_attempt") is None and "POST /v1/jobs/%s/push" % jid in (push.get("error") or ""),
          "%s %s" % (j.get("delivery"), push))
    from recond_client import Client
    states = [data for ev, data in Client(d.url).events(jid, idle_timeout=5)
              if ev == "state" and isinstance(data, dict)]
    check("its event stream's state carries the warnings",
          states and "pre_log" in [w["code"] for w in states[-1].get("warnings", [])],
          str(states[-1].get("warnings") if states else None))
    time.sleep(1.5)
    _, insts = orthanc_series(o, "PID-WARN")
    check("nothing reached Orthanc while it waits", not insts, "%d instances" % len(insts))
    d.stop()
    d.start()
    api = d.api()
    time.sleep(1.0)
    j = api.job(jid)
    check("still held after a restart", j.get("delivery") == "awaiting_confirmation", str(j.get("push")))

    st, _, _, doc = api.request("POST", "/v1/jobs/%s/push" % jid)
    check("POST push (the confirmation) answers 202", st == 202, str(st))
    j = wait_delivery(api, jid, ("sent", "send_failed"))
    check("... and the series is sent", j.get("delivery") == "sent", str(j.get("push")))
    _, insts = orthanc_series(o, "PID-WARN")
    comments = str(getattr(insts[0], "ImageComments", "")) if insts else ""
    check("Orthanc holds it, its Image Comments name the warning", len(insts) == NZ and "pre_log" in comments,
          "%d instances, comments %r" % (len(insts), comments[:200]))

    # without the key: sent without waiting
    d.stop()
    write_cfg(cfg_path, o, None)
    d.start()
    api = d.api()
    jid = submit(api, make_spec(["pacs"], "PID-NOKEY", "prelog-nokey"), prelog)
    j = wait_delivery(api, jid, ("sent", "send_failed", "awaiting_confirmation"))
    check("without dicom.push_confirm_warnings a job with warnings is sent",
          j.get("delivery") == "sent" and j.get("warnings"), "%s %s" % (j.get("delivery"), j.get("warnings")))
    d.stop()
    o.stop()


if __name__ == "__main__":
    run_main(main)
