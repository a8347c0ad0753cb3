#!/usr/bin/env python3
"""POST cancel of a queued and of a running job: the queued one is cancelled
at once (200), the running one is asked to stop (202, cancel_requested) and
is cancelled within about one iteration; its worker is gone, the runner is
free (the next job runs).  DELETE of a job that has not finished is 409 and
changes nothing (DELETE never cancels); cancel of a finished job is 409;
DELETE of a cancelled job removes it and its files (then 404)."""

import os
import time

import phantom
from recond_harness import (sirt_runs, Daemon, Validation, check, deadline, require_engine, log, proj_bytes,
                            require_binaries, run_main, small_spec)


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    require_engine(api)
    lspec = small_spec(n=32, views=60, nu=32, nv=32, label="long",
                       algorithm=sirt_runs(2000))
    lproj = phantom.project_cone(lspec)
    long_job = api.create(lspec)
    api.put("/v1/jobs/%s/projections" % long_job["id"], lproj)
    api.post_json("/v1/jobs/%s/start" % long_job["id"], b"")
    sspec = small_spec(label="queued")
    queued = api.create(sspec)
    api.put("/v1/jobs/%s/projections" % queued["id"], b"\0" * proj_bytes(sspec))
    api.post_json("/v1/jobs/%s/start" % queued["id"], b"")

    j = api.wait_state(long_job["id"], ("running",), timeout=60, poll=0.02)
    alive = deadline(60)
    while alive() and j["progress"]["iteration"] < 2:
        time.sleep(0.05)
        j = api.job(long_job["id"])
    check("long job running", j["state"] == "running", j["state"])
    q = api.job(queued["id"])
    check("second job queued behind it", q["state"] == "queued", q["state"])

    for jid, what in ((queued["id"], "queued"), (long_job["id"], "running")):
        st, _, _, doc = api.delete("/v1/jobs/%s" % jid)
        check("DELETE a %s job: 409 conflict naming cancel, job unchanged" % what,
              st == 409 and doc["error"]["code"] == "conflict" and "/cancel" in doc["error"]["message"] and
              api.job(jid)["state"] == what, "%d %s" % (st, doc))
    st, _, _, doc = api.post_json("/v1/jobs/%s/cancel" % queued["id"], b"")
    check("cancel a queued job: 200, cancelled", st == 200 and doc["state"] == "cancelled", "%d %s" % (st, doc))

    t_iter = None
    if j["progress"].get("elapsed_s") and j["progress"]["iteration"]:
        t_iter = j["progress"]["elapsed_s"] / j["progress"]["iteration"]
    t0 = time.monotonic()
    st, _, _, doc = api.post_json("/v1/jobs/%s/cancel" % long_job["id"], b"")
    check("cancel a running job: 202, cancel_requested", st == 202 and doc.get("cancel_requested") is True,
          "%d %s" % (st, doc and doc.get("state")))
    j = api.wait_state(long_job["id"], ("cancelled", "failed", "succeeded"), timeout=60, poll=0.02)
    dt = time.monotonic() - t0
    check("running job cancelled", j["state"] == "cancelled", j["state"])
    bound = max(2.0, 3 * (t_iter or 0.5))
    check("cancelled within about one iteration (< %.1f s)" % bound, dt < bound,
          "%.2f s, %.3f s per iteration" % (dt, t_iter or -1))
    log("cancel of a running job took %.2f s (%.3f s per iteration; iteration %s of %s)" %
        (dt, t_iter or -1, j["progress"]["iteration"], j["progress"]["of"]))
    check("cancelled job stopped early", j["progress"]["iteration"] < j["progress"]["of"], str(j["progress"]))

    nxt = small_spec(label="after-cancel")
    n = api.create(nxt)
    api.put("/v1/jobs/%s/projections" % n["id"], b"\0" * proj_bytes(nxt))
    api.post_json("/v1/jobs/%s/start" % n["id"], b"")
    n = api.wait_state(n["id"], ("succeeded", "failed", "cancelled"), timeout=60)
    check("the next job runs after the cancel", n["state"] == "succeeded", n["state"])

    for jid, what in ((long_job["id"], "cancelled"), (n["id"], "succeeded")):
        st, _, _, doc = api.post_json("/v1/jobs/%s/cancel" % jid, b"")
        check("cancel a %s job: 409 conflict, job unchanged" % what,
              st == 409 and doc["error"]["code"] == "conflict" and api.job(jid)["state"] == what, "%d %s" % (st, doc))
    st, _, _, _ = api.delete("/v1/jobs/%s" % long_job["id"])
    check("DELETE a cancelled job: 204", st == 204, str(st))
    st, _, _, _ = api.get("/v1/jobs/%s" % long_job["id"])
    check("deleted job is 404", st == 404, str(st))
    leftovers = [p for p, _, fs in os.walk(d.store) for f in fs if long_job["id"] in os.path.join(p, f)]
    check("deleted job's files are gone", not leftovers, str(leftovers[:3]))
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
