#!/usr/bin/env python3
"""Views uploaded one by one, out of order, one of them twice (garbage first,
the right data second): the job reports which views are present, autostart
queues it when the last view arrives, and the result equals that of the same
data uploaded as one stack, so the repeated view replaced the earlier one."""

import random

import phantom
from recond_harness import (Daemon, Validation, check, require_engine, proj_bytes, read_f32, require_binaries,
                            run_main, small_spec)


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    spec = small_spec(views=24, autostart=True, label="views")
    nviews = 24
    views = [phantom.project_view(spec, k) for k in range(nviews)]

    job = api.create(spec)
    jid = job["id"]
    check("new job is created with 0 views", job["state"] == "created" and job["views_present"] == 0 and
          job["views_expected"] == nviews and job["view_bytes"] == len(views[0]), str(job)[:300])
    order = list(range(nviews))
    random.Random(7).shuffle(order)
    garbage = b"\x00\x00\xc0\x7f" * (len(views[0]) // 4)  # NaNs: a wrong view poisons the result
    first = order[0]
    st, _, body, doc = api.put("/v1/jobs/%s/projections/%d" % (jid, first), garbage)
    check("PUT a view is 200", st == 200, body[:200])
    check("after one view: receiving, 1 present", doc and doc["state"] == "receiving" and doc["views_present"] == 1,
          str(doc and (doc["state"], doc["views_present"])))
    last_doc = doc
    for k in order[1:-1]:
        st, _, body, last_doc = api.put("/v1/jobs/%s/projections/%d" % (jid, k), views[k])
        if st != 200:
            check("PUT view %d" % k, False, body[:200])
            break
    check("after %d views: %d present" % (nviews - 1, nviews - 1), last_doc["views_present"] == nviews - 1,
          str(last_doc["views_present"]))
    missing = order[-1]
    check("views_missing names the one missing view", last_doc["views_missing"] == [[missing, missing]],
          str(last_doc["views_missing"]))
    check("still receiving (no autostart before the last view)", last_doc["state"] == "receiving", last_doc["state"])
    st, _, _, doc = api.post_json("/v1/jobs/%s/start" % jid, b"")
    check("start with a view missing is 409 conflict", st == 409 and doc and doc["error"]["code"] == "conflict",
          str(st))
    st, _, _, doc = api.put("/v1/jobs/%s/projections/%d" % (jid, first), views[first])
    check("repeated view is accepted and does not count twice", st == 200 and doc["views_present"] == nviews - 1,
          str(doc and doc["views_present"]))
    st, _, _, doc = api.put("/v1/jobs/%s/projections/%d" % (jid, missing), views[missing])
    check("last view: autostart queues the job", st == 200 and doc["state"] in ("queued", "running", "succeeded",
                                                                                 "failed")
          and doc["views_missing"] == [], str(doc and doc["state"]))
    require_engine(api)
    fin = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=120)
    check("view-by-view job succeeded", fin["state"] == "succeeded", str(fin.get("error")))

    # The same data in one stack.
    spec2 = dict(spec, label="stack")
    job2 = api.create(spec2)
    stack = b"".join(views)
    check("stack length is projection_bytes", len(stack) == job2["projection_bytes"] == proj_bytes(spec2))
    st, _, body, _ = api.put("/v1/jobs/%s/projections" % job2["id"], stack)
    check("PUT the whole stack is 200", st == 200, body[:200])
    fin2 = api.wait_state(job2["id"], ("succeeded", "failed", "cancelled"), timeout=120)
    check("stack job succeeded", fin2["state"] == "succeeded", str(fin2.get("error")))

    _, _, a, _ = api.get("/v1/jobs/%s/volume" % jid)
    _, _, b, _ = api.get("/v1/jobs/%s/volume" % fin2["id"])
    va, vb = read_f32(a), read_f32(b)
    finite = all(x == x for x in va)
    check("view-by-view volume has no NaN (the garbage view was replaced)", finite)
    diff = max((abs(x - y) for x, y in zip(va, vb)), default=1.0)
    scale = max((abs(y) for y in vb), default=0.0)
    check("view-by-view volume equals the stack volume", len(a) == len(b) and diff <= 1e-5 * scale,
          "max diff %g of %g" % (diff, scale))
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
