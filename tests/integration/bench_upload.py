#!/usr/bin/env python3
"""Benchmark (run by hand, not a test): upload throughput of a big projection
stack over loopback with the daemon's resident memory during it, and status
latency under 32 concurrent pollers while a job runs.

    RECOND_BUILD=$PWD/build nice python3 tests/integration/bench_upload.py [--gib 1] [--url URL]

Without --url it starts its own daemon on a temporary store (under
$TMPDIR; the stack needs that much free disk).  The stack is sent from memory
in 4 MiB chunks (no file read on the client side) with an exact
Content-Length, like `curl -T`; the sender is one Python thread, so the
figure is a lower bound of what the daemon takes.
"""

import argparse
import http.client
import threading
import time
import urllib.parse

import phantom
from recond_harness import Api, Daemon, require_engine, log, small_spec
from test_pollers import CLIENTS, pct, poll

CHUNK = 4 << 20


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    return -1


def big_spec(gib):
    views = 256 * gib  # 1024 x 1024 float32 = 4 MiB per view
    s = phantom.cone_spec(n=64, voxel=0.5, views=views, nu=1024, nv=1024, du=0.2, dv=0.2, D=1000.0, S=1500.0,
                          algorithm={"name": "fdk"}, label="bench-upload")
    return s


def upload(url, jid, nbytes):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.putrequest("PUT", "/v1/jobs/%s/projections" % jid)
    c.putheader("Content-Type", "application/octet-stream")
    c.putheader("Content-Length", str(nbytes))
    c.endheaders()
    chunk = memoryview(bytes(CHUNK))
    left = nbytes
    t0 = time.monotonic()
    while left > 0:
        n = min(CHUNK, left)
        c.sock.sendall(chunk[:n])
        left -= n
    t_sent = time.monotonic()
    r = c.getresponse()
    body = r.read()
    t1 = time.monotonic()
    c.close()
    return r.status, body, t_sent - t0, t1 - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=int, default=1)
    ap.add_argument("--url")
    ap.add_argument("--pid", type=int, help="daemon pid for RSS (with --url)")
    ap.add_argument("--poll-seconds", type=float, default=10.0)
    a = ap.parse_args()
    d = None
    if a.url:
        url, pid = a.url, a.pid
    else:
        d = Daemon().start()
        url, pid = d.url, d.proc.pid
    api = Api(url, validate=False)
    spec = big_spec(a.gib)
    job = api.create(spec)
    nbytes = job["projection_bytes"]
    samples = []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            if pid:
                samples.append(rss_kib(pid))
            time.sleep(0.05)

    base = rss_kib(pid) if pid else -1
    th = threading.Thread(target=sampler)
    th.start()
    status, body, t_send, t_total = upload(url, job["id"], nbytes)
    stop.set()
    th.join()
    peak = max(samples) if samples else -1
    log("upload: %d bytes (%.2f GiB), answer %d" % (nbytes, nbytes / 2 ** 30, status))
    log("upload: %.1f MB/s until the answer (%.2f s; bytes sent in %.2f s, then %.2f s to fsync and answer)"
        % (nbytes / t_total / 1e6, t_total, t_send, t_total - t_send))
    if pid:
        log("daemon RSS: %.1f MiB before, peak %.1f MiB during the upload (growth %.1f MiB)"
            % (base / 1024, peak / 1024, (peak - base) / 1024))
    api.post_json("/v1/jobs/%s/cancel" % job["id"], b"")
    api.delete("/v1/jobs/%s" % job["id"])

    # Status latency under 32 pollers while a job runs.
    require_engine(api)
    sspec = small_spec(n=32, views=60, nu=32, nv=32, label="bench-busy",
                       algorithm={"name": "sirt", "iterations": 5000})
    j = api.create(sspec)
    api.put("/v1/jobs/%s/projections" % j["id"], phantom.project_cone(sspec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    api.wait_state(j["id"], ("running",), timeout=60, poll=0.02)
    lat = [[] for _ in range(CLIENTS)]
    errors = []
    stop_at = time.monotonic() + a.poll_seconds
    ths = [threading.Thread(target=poll, args=(url, j["id"], stop_at, lat[i], errors)) for i in range(CLIENTS)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    allv = [x for ls in lat for x in ls]
    state = api.job(j["id"])["state"]
    log("status under %d pollers (job %s): %d answers in %.0f s (%.0f/s), %d errors, median %.2f ms, "
        "p99 %.2f ms, max %.2f ms" % (CLIENTS, state, len(allv), a.poll_seconds, len(allv) / a.poll_seconds,
                                      len(errors), pct(allv, 0.5) * 1e3, pct(allv, 0.99) * 1e3,
                                      max(allv) * 1e3 if allv else -1))
    api.post_json("/v1/jobs/%s/cancel" % j["id"], b"")
    api.wait_state(j["id"], ("cancelled", "failed", "succeeded"), timeout=30)
    if d:
        d.stop()


if __name__ == "__main__":
    main()
