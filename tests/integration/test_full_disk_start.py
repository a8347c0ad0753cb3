#!/usr/bin/env python3
"""A daemon starts on a full store disk (docs/server.md "I/O faults").  The
store already has jobs: one succeeded, one that was running when the daemon
was killed (-9), so recovery at start has a job to re-queue.  Then every
write into the store's directory fails with ENOSPC (the LD_PRELOAD shim
tests/faults/iofault.c, as test_iofault.py uses it) and the daemon starts
again: it must come up (start reads the schema, writes nothing when it is
current; a recovery that cannot write is logged and retried), answer GET
/v1/jobs 200 with the jobs, and refuse a create with 507 disk_full.  Once
the disk has room again the runner recovers (the killed job leaves
"running") and the queue goes on."""

import time

from recond_harness import (Daemon, check, deadline, proj_bytes, require_binaries, run_main, sirt_runs,
                            small_spec)
from test_iofault import Faults


def main():
    require_binaries()
    f = Faults()
    d = Daemon(env=f.env()).start()
    api = d.api()
    spec = small_spec(label="done")
    done = api.create(spec)
    api.put("/v1/jobs/%s/projections" % done["id"], b"\0" * proj_bytes(spec))
    api.post_json("/v1/jobs/%s/start" % done["id"], b"")
    j = api.wait_state(done["id"], ("succeeded", "failed", "cancelled"), timeout=60, poll=0.05)
    check("a job succeeded before the disk filled", j["state"] == "succeeded", j["state"])
    lspec = small_spec(n=24, views=40, nu=24, nv=24, label="long", algorithm=sirt_runs(5000))
    long_job = api.create(lspec)
    api.put("/v1/jobs/%s/projections" % long_job["id"], b"\0" * proj_bytes(lspec))
    api.post_json("/v1/jobs/%s/start" % long_job["id"], b"")
    api.wait_state(long_job["id"], ("running",), timeout=60, poll=0.02)
    d.kill9()

    # The store's disk is full: every write that would take space in it fails.  Left alone: mkdir and
    # ftruncate (on a full disk an existing directory still answers EEXIST, and SQLite's shrinking of
    # its WAL index works) and the WAL index itself, recond.db-shm, which SQLite sized when the store
    # was first opened (the glob's [!m] spares the one file of the store whose name ends in "m").
    f.arm("write,pwrite,fsync,fdatasync,fallocate", "ENOSPC", d.store + "/*[!m]")
    try:
        d.start()
        up = True
    except RuntimeError as e:
        up = False
        check("the daemon starts on a full store disk", False, str(e))
    if not up:
        return
    check("the daemon starts on a full store disk", True)
    api = d.api()  # a new port
    log_text = d.read_log()
    check("the failed recovery is logged", "event=recover_failed" in log_text,
          [ln for ln in log_text.splitlines() if "store" in ln or "recover" in ln][-3:])
    st, _, _, doc = api.get("/v1/jobs")
    ids = [x["id"] for x in (doc or {}).get("jobs", [])] if st == 200 else []
    check("GET /v1/jobs answers 200 with the stored jobs", st == 200 and done["id"] in ids and long_job["id"] in ids,
          "%d %s" % (st, ids))
    st, _, _, _ = api.get("/v1/jobs/%s" % done["id"])
    check("GET of a job answers 200", st == 200, str(st))
    st, _, _, doc = api.post_json("/v1/jobs", small_spec(label="refused"))
    check("POST /v1/jobs is refused with 507 disk_full", st == 507 and (doc or {}).get("error", {}).get("code") ==
          "disk_full", "%d %s" % (st, doc))
    check("the shim did inject faults", bool(f.fired()))

    # room again: the runner recovers, the killed job leaves "running"
    f.clear()
    alive = deadline(30)
    while alive() and "event=recovered" not in d.read_log():
        time.sleep(0.05)
    check("recovery succeeds once the disk has room", "event=recovered" in d.read_log())
    jj = api.wait_state(long_job["id"], ("queued", "running"), timeout=10, poll=0.05)
    api.post_json("/v1/jobs/%s/cancel" % long_job["id"], b"")
    jj = api.wait_state(long_job["id"], ("cancelled", "failed", "succeeded"), timeout=60, poll=0.05)
    check("the re-queued job runs again (and is cancelled here)", jj["state"] == "cancelled", jj["state"])
    st, _, _, doc = api.post_json("/v1/jobs", small_spec(label="accepted"))
    check("a create succeeds once the disk has room", st == 201, "%d %s" % (st, doc))
    d.stop()


if __name__ == "__main__":
    run_main(main)
