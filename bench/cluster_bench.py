#!/usr/bin/env python3
"""How many jobs per second one PostgreSQL database hands out to a cluster
of recond daemons (docs/cluster.md, "Limits"), and how late a node that does
not run a job relays its progress over server-sent events.

Claims: 3 and then 10 daemons on one private PostgreSQL 15 (started by
tests/integration/cluster_harness.py) and one spool directory, each with a
stand-in worker that writes an 8^3 volume of zeros and exits at once, so
that what is measured is the queue: the claim (SELECT ... FOR UPDATE SKIP
LOCKED, the lease), the fork+exec of the worker, the outcome's commit.  JOBS
tiny jobs (200; QUICK: 40) are created and uploaded without autostart, then
started one after the other round-robin through the nodes; the time is from
the first job's `timings.queued` to the last one's `timings.finished` (the
daemons' clocks; one machine).  Also printed: how long the client took to
start them all (when that is close to the total, the client was the limit),
and the claims each node made.

SSE: two daemons, a stand-in worker printing a progress line every 0.1 s;
the job's event stream is read from both nodes, and for each iteration the
arrival on the node that does not run the job is compared with the arrival
on the node that does.

Usage: cluster_bench.py BUILD_DIR   (RECOND_BENCH_QUICK=1: 40 jobs, a shorter
SSE run).  Exit 77 when PostgreSQL 15 is not installed.
"""
import datetime
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) > 1:
    os.environ["RECOND_BUILD"] = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from cluster_harness import Cluster, SseRecorder, pg_missing, sse_lag, write_worker  # noqa: E402
from recond_harness import sirt_runs, fake_worker, proj_bytes, small_spec, tempdir  # noqa: E402

QUICK = os.environ.get("RECOND_BENCH_QUICK") == "1"
JOBS = 40 if QUICK else 200
SSE_S = 4 if QUICK else 10
N = 8
HOLD = "cluster-bench-hold"


def ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def claims(nnodes):
    """(drain seconds, queue-to-done seconds, queueing seconds, runs per node) for JOBS tiny jobs."""
    d = tempdir("recond-cbench-")
    release = os.path.join(d, "release")
    # The stand-in worker: a job labelled HOLD waits for the release file (so that
    # every node is busy while the tiny jobs are queued), the others exit at once.
    worker = write_worker(d, "worker.sh",
                          "for a; do dir=$a; done\n"
                          "if grep -q %s \"$dir/spec.json\"; then\n"
                          "  while [ ! -e '%s' ]; do sleep 0.005; done\n"
                          "fi\n"
                          "head -c %d /dev/zero > \"$dir/.volume.f32.tmp\" && mv \"$dir/.volume.f32.tmp\" \"$dir/volume.f32\"\n"
                          "exit 0\n" % (HOLD, release, 4 * N ** 3))
    cl = Cluster(nnodes, worker=worker, lease_s=15, worker_threads=1).start(timeout=120)
    apis = [nd.api() for nd in cl.nodes]
    spec = small_spec(n=N, views=8, nu=8, nv=8, algorithm=sirt_runs(1), label="claim")
    data = b"\0" * proj_bytes(spec)
    holds = []
    for i in range(nnodes):
        j = apis[i].create(dict(spec, label=HOLD, autostart=True))
        assert apis[i].put("/v1/jobs/%s/projections" % j["id"], data)[0] == 200
        holds.append(j["id"])
    t0 = time.monotonic()
    while sum(apis[0].job(h)["state"] == "running" for h in holds) < nnodes:
        if time.monotonic() - t0 > 60:
            raise RuntimeError("the %d hold jobs are not all running after 60 s" % nnodes)
        time.sleep(0.05)
    ids = []
    t0 = time.monotonic()
    for i in range(JOBS):
        a = apis[i % nnodes]
        j = a.create(dict(spec, autostart=True))
        assert a.put("/v1/jobs/%s/projections" % j["id"], data)[0] == 200
        ids.append(j["id"])
    t_queue = time.monotonic() - t0
    t_release = time.time()
    with open(release, "w"):
        pass
    t0 = time.monotonic()
    while True:
        st, _, _, doc = apis[0].get("/v1/jobs?limit=1000")
        states = [j["state"] for j in doc["jobs"]] if st == 200 else []
        if len(states) == JOBS + nnodes and all(s in ("succeeded", "failed", "cancelled") for s in states):
            break
        if time.monotonic() - t0 > 600:
            raise RuntimeError("jobs not finished after 600 s: %s" % {s: states.count(s) for s in set(states)})
        time.sleep(0.2)
    jobs = [apis[0].job(jid) for jid in ids]
    bad = [j for j in jobs if j["state"] != "succeeded"]
    if bad:
        raise RuntimeError("%d jobs did not succeed, e.g. %s" % (len(bad), bad[0].get("error")))
    first = min(ts(j["timings"]["queued"]) for j in jobs)
    last = max(ts(j["timings"]["finished"]) for j in jobs)
    per = {}
    for j in jobs:
        per[j["node"]] = per.get(j["node"], 0) + 1
    per = [per.get(nd.name, 0) for nd in cl.nodes]
    cl.stop()
    return last - t_release, last - first, t_queue, per


def sse():
    cl = Cluster(2, worker=fake_worker("slow"), lease_s=15).start(timeout=120)
    apis = [nd.api() for nd in cl.nodes]
    spec = small_spec(n=N, views=8, nu=8, nv=8, label="sse", autostart=True)
    j = apis[0].create(spec)
    rec = [SseRecorder(nd, j["id"]) for nd in cl.nodes]
    for r in rec:
        r.start()
    time.sleep(0.3)
    apis[0].put("/v1/jobs/%s/projections" % j["id"], b"\0" * proj_bytes(spec))
    time.sleep(SSE_S)
    runner = apis[1].job(j["id"]).get("node")
    names = [nd.name for nd in cl.nodes]
    if runner not in names:
        cl.stop()
        raise RuntimeError("the job names no node (%r)" % runner)
    ri = names.index(runner)
    lags = sse_lag(rec[ri], rec[1 - ri])
    apis[1 - ri].post_json("/v1/jobs/%s/cancel" % j["id"], b"")
    for r in rec:
        r.close()
    cl.stop()
    return lags, len(rec[ri].progress_times())


def main():
    why = pg_missing()
    if why:
        print("cluster_bench: skipped, PostgreSQL 15 is not installed: %s" % why)
        return 77
    rows = []
    for n in (3, 10):
        drain, total, t_queue, per = claims(n)
        rows.append((n, drain, total, t_queue, per))
    print("claims through one PostgreSQL (stand-in worker exiting at once, %d cores)" % os.cpu_count())
    print("%5s %5s %8s %7s %12s %10s  %s" % ("nodes", "jobs", "seconds", "jobs/s", "queued->done", "queueing",
                                             "claims per node"))
    for n, drain, total, t_queue, per in rows:
        print("%5d %5d %8.2f %7.1f %12.2f %10.2f  %s" % (n, JOBS, drain, JOBS / drain if drain > 0 else float("inf"),
                                                       total, t_queue, " ".join(str(x) for x in per)))
    print("seconds: from releasing the nodes (every one busy while the jobs were queued) to the last job "
          "finished; queued->done: the first job queued to the last finished, including queueing (one "
          "client, one job at a time)")
    lags, n_local = sse()
    if lags:
        lags.sort()
        print("SSE progress relayed by a node that does not run the job: %d of %d iterations seen, lag median %.3f s, "
              "p95 %.3f s, max %.3f s" % (len(lags), n_local, statistics.median(lags),
                                          lags[min(len(lags) - 1, int(0.95 * len(lags)))], lags[-1]))
    else:
        print("SSE: the node that does not run the job relayed no progress event (%d on the running node)" % n_local)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
