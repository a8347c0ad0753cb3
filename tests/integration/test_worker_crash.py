#!/usr/bin/env python3
"""A worker that crashes (SIGSEGV) fails its job only: the job is failed with
a clear error, the daemon keeps answering, and the next job runs with the
real worker.  The daemon's worker option points at a wrapper script that
crashes on its first run and execs the real worker afterwards; a second
daemon gets a worker that exits at once with status 7 (no report; 2 would
be "failed" and 3 "cancelled" in worker_proto.h)."""

from recond_harness import (Daemon, Validation, check, fake_worker, proj_bytes, require_binaries,
                            run_main, small_spec)


def run(api, spec):
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], b"\0" * proj_bytes(spec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    return api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=120)


def main():
    require_binaries()
    d = Daemon(worker=fake_worker("crash-once")).start()
    api = d.api()
    j1 = run(api, small_spec(label="crashes"))
    check("crashing worker: its job is failed", j1["state"] == "failed", j1["state"])
    err = j1.get("error") or {}
    check("crashing worker: the error says the worker crashed", err.get("code") in ("worker_crashed", "internal_error")
          and err.get("message"), str(err))
    st, _, _, _ = api.get("/readyz")
    check("crashing worker: daemon still ready", st == 200)
    j2 = run(api, small_spec(label="after-crash"))
    check("next job runs with the real worker and succeeds", j2["state"] == "succeeded",
          "%s %s" % (j2["state"], j2.get("error")))
    st, _, body, _ = api.get("/metrics")
    check("metrics count the worker crash", b"recond_worker_crashes_total 1" in body,
          [ln for ln in body.decode().splitlines() if "crash" in ln].__str__())
    d.stop()

    d2 = Daemon(worker=fake_worker("exit7")).start()
    api = d2.api()
    j3 = run(api, small_spec(label="exits"))
    check("worker exiting with status 7: job failed with an error", j3["state"] == "failed" and j3.get("error"),
          "%s %s" % (j3["state"], j3.get("error")))
    j4 = run(api, small_spec(label="exits-again"))
    check("worker exiting with status 7: the next job fails the same way, daemon up",
          j4["state"] == "failed" and api.get("/readyz")[0] == 200, j4["state"])
    Validation.report()
    d2.stop()


if __name__ == "__main__":
    run_main(main)
