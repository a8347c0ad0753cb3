#!/usr/bin/env python3
"""PATCH /v1/jobs/{id} {"priority": N}: the priority of a job that has not
started.  Two jobs queued (same priority, A before B) behind a long running
one: raising B's priority makes B run before A, where the queue's order
alone (FIFO within a priority) would run A first; the answer is the job
with its new priority and the job's event stream gets a state event.  A
created job's priority changes too.  A running or finished job is 409
naming its state and keeps its priority; bodies that are not {"priority":
0..9} are 400 naming the field (413 over the body cap); an unknown job 404.
Also the Python client's set_priority and reconctl's priority command."""

import json
import os
import subprocess
import threading
import time

from recond_harness import (sirt_runs, RECONCTL, Daemon, Validation, check, deadline, log, proj_bytes, require_binaries,
                            require_engine, run_main, small_spec)
from recond_client import Client, RecondError


def patch(api, jid, body, **kw):
    if not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    return api.request("PATCH", "/v1/jobs/%s" % jid, body=body, headers={"Content-Type": "application/json"}, **kw)


def queued_job(api, label):
    spec = small_spec(label=label)
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], b"\0" * proj_bytes(spec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    return j["id"]


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    require_engine(api)
    lspec = small_spec(n=32, views=60, nu=32, nv=32, label="long", algorithm=sirt_runs(2000))
    long_id = api.create(lspec)["id"]
    api.put("/v1/jobs/%s/projections" % long_id, b"\0" * proj_bytes(lspec))
    api.post_json("/v1/jobs/%s/start" % long_id, b"")
    j = api.wait_state(long_id, ("running",), timeout=60, poll=0.02)
    check("the long job runs", j["state"] == "running", j["state"])
    a_id = queued_job(api, "A")
    b_id = queued_job(api, "B")
    check("A and B are queued behind it, both priority 5",
          [(api.job(x)["state"], api.job(x)["priority"]) for x in (a_id, b_id)] == [("queued", 5)] * 2)

    # Watch B's events while its priority changes.
    events = []

    def watch():
        c = Client(d.url, timeout=30)
        try:
            for ev, data in c.events(b_id, idle_timeout=10):
                events.append((ev, data))
                if ev == "state" and isinstance(data, dict) and data.get("priority") == 9:
                    return
        except RecondError:
            pass

    t = threading.Thread(target=watch)
    t.start()
    alive = deadline(5)
    while alive() and not events:  # the stream's first event: the job as it is
        time.sleep(0.01)
    st, _, _, doc = patch(api, b_id, {"priority": 9})
    check("PATCH B priority 9: 200, the job with priority 9, still queued",
          st == 200 and doc["priority"] == 9 and doc["state"] == "queued" and doc["id"] == b_id, "%d %s" % (st, doc))
    t.join(15)
    check("B's event stream got a state event with priority 9",
          any(ev == "state" and isinstance(data, dict) and data.get("priority") == 9 for ev, data in events),
          str([(ev, isinstance(data, dict) and data.get("priority")) for ev, data in events]))

    # Running: 409 naming the state, priority unchanged.
    st, _, _, doc = patch(api, long_id, {"priority": 1})
    err = (doc or {}).get("error", {})
    check("PATCH a running job: 409 conflict naming running, priority unchanged",
          st == 409 and err.get("code") == "conflict" and "running" in err.get("message", "") and
          api.job(long_id)["priority"] == 5, "%d %s" % (st, err))

    # Bad bodies: 400 naming the field, nothing changes.
    bad = [(b"", "invalid_json", ""), (b"not json", "invalid_json", ""), (b"[]", "invalid_json", ""),
           (b"7", "invalid_json", ""), (b'{"priority": 1, "priority": 2}', "invalid_json", ""),
           ({}, "invalid_argument", "priority"), ({"priority": "9"}, "invalid_argument", "priority"),
           ({"priority": 10}, "invalid_argument", "priority"), ({"priority": -1}, "invalid_argument", "priority"),
           ({"priority": 1.5}, "invalid_argument", "priority"), ({"priority": True}, "invalid_argument", "priority"),
           ({"priority": None}, "invalid_argument", "priority"),
           ({"priority": 3, "label": "x"}, "invalid_argument", "label"),
           ({"state": "queued"}, "invalid_argument", "state")]
    for body, code, field in bad:
        st, _, _, doc = patch(api, a_id, body)
        err = (doc or {}).get("error", {})
        check("PATCH %s: 400 %s%s" % (body, code, " naming " + field if field else ""),
              st == 400 and err.get("code") == code and err.get("field", "") == field and
              (not field or field in err.get("message", "")), "%d %s" % (st, err))
    check("A is still queued with priority 5 after the refused bodies",
          (api.job(a_id)["state"], api.job(a_id)["priority"]) == ("queued", 5))
    st, _, _, doc = patch(api, a_id, b'{"priority": ' + b" " * (17 << 20) + b"1}")
    check("a body over the cap: 413", st == 413 and doc["error"]["code"] == "body_too_large", "%d %s" % (st, doc))
    st, _, _, doc = patch(api, "00000000-0000-4000-8000-000000000000", {"priority": 3})
    check("an unknown job: 404", st == 404, "%d %s" % (st, doc))
    st, hd, _, doc = api.request("PUT", "/v1/jobs/%s" % a_id, body=b"{}")
    check("PUT: 405, Allow lists PATCH", st == 405 and "PATCH" in hd.get("allow", ""), "%d %s" % (st, hd))

    # A created job (no views yet) may change priority too; the Python client and reconctl.
    spec = small_spec(label="created")
    created = api.create(spec)["id"]
    c = Client(d.url, timeout=30)
    j = c.set_priority(created, 0)
    check("python: set_priority on a created job: priority 0, still created",
          j["priority"] == 0 and j["state"] == "created", str(j and (j["priority"], j["state"])))
    if os.access(RECONCTL, os.X_OK):
        p = subprocess.run([RECONCTL, "--url", d.url, "priority", created, "7"], capture_output=True, text=True)
        check("reconctl priority ID 7: exit 0, prints the new priority",
              p.returncode == 0 and "7" in p.stdout and api.job(created)["priority"] == 7, "%d %r %r"
              % (p.returncode, p.stdout, p.stderr))
        p = subprocess.run([RECONCTL, "--url", d.url, "priority", created, "12"], capture_output=True, text=True)
        check("reconctl priority ID 12: a usage error (exit 1), nothing sent", p.returncode == 1 and
              api.job(created)["priority"] == 7, "%d %r" % (p.returncode, p.stderr))
        p = subprocess.run([RECONCTL, "--url", d.url, "priority", long_id, "3"], capture_output=True, text=True)
        check("reconctl priority of a running job: exit 2 with the daemon's message", p.returncode == 2 and
              "running" in p.stderr, "%d %r" % (p.returncode, p.stderr))

    # Cancel the long job: B (priority 9) runs before A, which was queued first.
    api.post_json("/v1/jobs/%s/cancel" % long_id, b"")
    fa = api.wait_state(a_id, ("succeeded", "failed", "cancelled"), timeout=120)
    fb = api.wait_state(b_id, ("succeeded", "failed", "cancelled"), timeout=120)
    ta, tb = fa["timings"]["started"], fb["timings"]["started"]
    check("A and B succeed", fa["state"] == fb["state"] == "succeeded", "%s %s" % (fa["state"], fb["state"]))
    check("B (raised to 9) started before A (queued first, priority 5)", ta and tb and tb < ta,
          "A started %s, B started %s" % (ta, tb))
    log("started: B %s, A %s" % (tb, ta))
    for jid, state in ((b_id, "succeeded"), (long_id, "cancelled")):
        st, _, _, doc = patch(api, jid, {"priority": 2})
        err = (doc or {}).get("error", {})
        check("PATCH a %s job: 409 naming %s" % (state, state),
              st == 409 and state in err.get("message", ""), "%d %s" % (st, err))
    Validation.report()
    check("the daemon is still up", d.proc.poll() is None)
    d.stop()


if __name__ == "__main__":
    run_main(main)
