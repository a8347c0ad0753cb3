#!/usr/bin/env python3
"""DELETE while the DICOM series is being written leaves no patient file
(docs/server.md "Spool layout").  GET /v1/jobs/{id}/volume?format=dicom on
a job that has just succeeded writes its series (about a hundred instances
with the patient's name and id) into the job's directory; a DELETE 0.1 s
later must leave neither the job's directory nor any .dcm file in the
spool, whatever the GET answers.  Repeated, since the window is a race."""

import os
import threading
import time

from recond_harness import Daemon, check, proj_bytes, require_binaries, run_main, small_spec

TRIALS = 6


def spool_leftovers(store, jid):
    left = []
    jobs = os.path.join(store, "jobs")
    if os.path.exists(os.path.join(jobs, jid)):
        left.append("jobs/%s" % jid)
    for root, _dirs, files in os.walk(jobs):
        left += [os.path.join(root, f) for f in files if f.endswith(".dcm")]
    return left


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    leftovers, deleted = [], 0
    for t in range(TRIALS):
        spec = small_spec(n=112, views=24, nu=24, nv=24, label="dicom-delete-%d" % t, algorithm={"name": "fdk"})
        spec["dicom"] = {"patient_id": "PID-77310", "patient_name": "Testpatient^Jana^Q"}
        j = api.create(spec)
        api.put("/v1/jobs/%s/projections" % j["id"], b"\0" * proj_bytes(spec))
        api.post_json("/v1/jobs/%s/start" % j["id"], b"")
        jj = api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=120, poll=0.02)
        if jj["state"] != "succeeded":
            check("trial %d: the job succeeded" % t, False, "%s %s" % (jj["state"], jj.get("error")))
            continue
        got = {}

        def download(jid=j["id"], got=got):
            try:
                got["status"] = d.api().get("/v1/jobs/%s/volume?format=dicom" % jid, timeout=120)[0]
            except Exception as e:  # the connection may end when the job goes
                got["status"] = repr(e)

        th = threading.Thread(target=download)
        th.start()
        time.sleep(0.1)
        st, _, _, doc = api.delete("/v1/jobs/%s" % j["id"])
        th.join(120)
        deleted += st == 204
        if st != 204:
            check("trial %d: DELETE answers 204" % t, False, "%d %s" % (st, doc))
        left = spool_leftovers(d.store, j["id"])
        if left:
            leftovers.append("trial %d (GET %s): %d left, e.g. %s" % (t, got.get("status"), len(left), left[:2]))
    check("every DELETE answered 204", deleted == TRIALS, "%d of %d" % (deleted, TRIALS))
    check("no job directory and no .dcm file left after a DELETE that raced the series' writer", not leftovers,
          "; ".join(leftovers))
    d.stop()


if __name__ == "__main__":
    run_main(main)
