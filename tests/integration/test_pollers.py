#!/usr/bin/env python3
"""32 clients polling a job's status while it runs all get answers; prints
the median and p99 latency."""

import threading
import time

import phantom
from recond_harness import (sirt_runs, Api, Daemon, Validation, check, require_engine, log, require_binaries,
                            run_main, small_spec)

CLIENTS = 32
SECONDS = 4.0


def poll(url, jid, stop_at, lat, errors):
    api = Api(url, validate=False)
    while time.monotonic() < stop_at:
        t0 = time.monotonic()
        try:
            st, _, _, doc = api.get("/v1/jobs/" + jid, timeout=10)
            dt = time.monotonic() - t0
            if st == 200 and doc and doc["id"] == jid:
                lat.append(dt)
            else:
                errors.append(st)
        except OSError as e:
            errors.append(str(e))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def busy_job(api, label, iterations):
    """A long SIRT job of the phantom, started and running (the engine probed first)."""
    require_engine(api)
    spec = small_spec(n=32, views=60, nu=32, nv=32, label=label,
                      algorithm=sirt_runs(iterations))
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], phantom.project_cone(spec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    api.wait_state(j["id"], ("running",), timeout=60, poll=0.02)
    return j


def run_pollers(url, jid, seconds):
    """CLIENTS threads polling the job for seconds: (latencies per client, errors)."""
    lat = [[] for _ in range(CLIENTS)]
    errors = []
    stop_at = time.monotonic() + seconds
    threads = [threading.Thread(target=poll, args=(url, jid, stop_at, lat[i], errors))
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 30)
    return lat, errors


def main():
    require_binaries()
    # The pollers stand for 32 consoles, which would come from 32 addresses: the
    # per-address cap (64) is not what this measures (test_http_hardening does).
    # From one address, 32 clients that open a connection per poll can hold
    # more than 64 at once: a closed connection counts until its server thread
    # has seen the close, and on a loaded 2-core machine that thread can run
    # after the client's next connection was accepted (MHD then logs "Server
    # reached connection limit" and resets the socket).
    d = Daemon(extra=["--max-per-ip", "256"]).start()
    api = d.api()
    j = busy_job(api, "busy", 2000)
    lat, errors = run_pollers(d.url, j["id"], SECONDS)
    state = api.job(j["id"])["state"]
    allv = [x for ls in lat for x in ls]
    check("job was running during the polls", state == "running", state)
    check("every one of %d pollers got answers" % CLIENTS, all(len(ls) > 0 for ls in lat),
          "answers per client %s" % [len(ls) for ls in lat])
    check("no poll failed", not errors, str(errors[:5]))
    med, p99 = pct(allv, 0.5) * 1000, pct(allv, 0.99) * 1000
    log("status latency under %d pollers while a job runs: %d answers in %.0f s (%.0f/s), "
        "median %.1f ms, p99 %.1f ms, max %.1f ms" %
        (CLIENTS, len(allv), SECONDS, len(allv) / SECONDS, med, p99, max(allv) * 1000 if allv else -1))
    check("p99 status latency under 1 s", p99 < 1000, "%.1f ms" % p99)
    api.post_json("/v1/jobs/%s/cancel" % j["id"], b"")
    api.wait_state(j["id"], ("cancelled", "failed", "succeeded"), timeout=30)
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
