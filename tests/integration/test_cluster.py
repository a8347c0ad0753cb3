#!/usr/bin/env python3
"""Three recond daemons on one PostgreSQL database and one spool directory
(docs/cluster.md), started by cluster_harness.py on loopback with lease_s 2:

 a) 30 small jobs (16^3 SIRT, 2 iterations) created and uploaded round-robin
    through the three nodes with autostart: every job succeeds, each runs
    exactly once (one `event=job_running` line in all the nodes' logs,
    `attempts` 0, `node` the node that logged it), every node ran some, each
    job reads the same from every node and every volume downloads the same
    from any node;
 d) GET /v1/nodes from each node lists the three nodes alive;
 b) kill -9 of the node running a longer job (48^3 SIRT, 40 iterations,
    about 6 s) mid-run: its lease expires, the job is re-queued and finishes
    on another node with `attempts` 1 and the volume of the same job run
    undisturbed; /v1/nodes shows the killed node not alive once its heartbeat
    lapses; restarted, it is alive again.  Server-sent events of the job
    opened on all three nodes: the progress seen on a node that does not run
    the job (polled from the store) lags the running node's by at most ~1 s;
 c) kill -9 of PostgreSQL's postmaster while a client PUTs views one by one
    (rotating through the nodes): the uploads get 503 `unavailable` while it
    is down and are retried until 200; after PostgreSQL is restarted every
    acknowledged view is present, the spool file holds exactly the bytes sent,
    and the job (autostart) succeeds; the nodes are all alive again.

Exit 77 (skip) only when PostgreSQL 15's binaries (or, as root, the user
postgres) are missing.  A part of the daemon's contract that is not there
fails with a message that names it.
"""

import http.client
import json
import statistics
import threading
import time

import phantom
from cluster_harness import Cluster, SseRecorder, pg_missing, sse_lag
from recond_harness import (sirt_runs, Api, check, deadline, finish, log, read_f32, run_main, skip, small_spec, RECOND,
                            WORKER)

LEASE_S = 2
FINAL = ("succeeded", "failed", "cancelled")
T0 = time.monotonic()


def elapsed():
    return "%.1f s" % (time.monotonic() - T0)


def jget(api, jid, retry_s=10):
    """The job from one node; a 503 (store unavailable) is retried for retry_s."""
    alive = deadline(retry_s)
    st, _, body, doc = api.get("/v1/jobs/" + jid)
    while st == 503 and alive():
        time.sleep(0.2)
        st, _, body, doc = api.get("/v1/jobs/" + jid)
    if st != 200:
        raise RuntimeError("GET /v1/jobs/%s on %s answered %d: %s" % (jid, api.port, st, body[:200]))
    return doc


def nodes_doc(api):
    st, _, body, doc = api.get("/v1/nodes", timeout=10)
    if st != 200 or not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        return None, "GET /v1/nodes answered %d: %s" % (st, body[:200])
    return {n.get("name"): n for n in doc["nodes"]}, ""


def brief(nodes):
    """name: alive, running, heartbeat of each node of a /v1/nodes answer."""
    if not nodes:
        return str(nodes)
    return "; ".join("%s alive=%s running=%s heartbeat=%s" % (k, v.get("alive"), v.get("running"), v.get("heartbeat"))
                     for k, v in sorted(nodes.items()))


def wait_job(api, jid, pred, timeout, poll=0.05):
    alive = deadline(timeout)
    j = jget(api, jid)
    while not pred(j) and alive():
        time.sleep(poll)
        j = jget(api, jid)
    return j


# -- the parts -----------------------------------------------------------------------

def part_a(cl, apis):
    names = [nd.name for nd in cl.nodes]
    spec = small_spec(n=16, views=24, nu=24, nv=24, algorithm=sirt_runs(2), autostart=True)
    proj = phantom.project_cone(spec)
    ids = []
    t0 = time.monotonic()
    for i in range(30):
        s = dict(spec, label="cluster-a-%02d" % i)
        j = apis[i % 3].create(s)
        st, _, body, _ = apis[(i + 1) % 3].put("/v1/jobs/%s/projections" % j["id"], proj)
        if st != 200:
            check("a: upload of job %d through %s" % (i, names[(i + 1) % 3]), False, "%d %s" % (st, body[:200]))
        ids.append(j["id"])
    alive = deadline(120)
    jobs = {}
    while alive():
        jobs = {jid: jget(apis[0], jid) for jid in ids}
        if all(j["state"] in FINAL for j in jobs.values()):
            break
        time.sleep(0.2)
    dt = time.monotonic() - t0
    states = [j["state"] for j in jobs.values()]
    check("a: all 30 jobs succeeded (%.1f s)" % dt, states.count("succeeded") == 30,
          "%s; first error %s" % ({s: states.count(s) for s in set(states)},
                                  next((j.get("error") for j in jobs.values() if j.get("error")), None)))
    have_fields = all("node" in j and "attempts" in j for j in jobs.values())
    check("a: the job JSON has node and attempts", have_fields,
          "keys: %s" % sorted(next(iter(jobs.values())).keys()) if jobs and not have_fields else "")
    runs = cl.job_runs()
    once = [jid for jid in ids if len(runs.get(jid, [])) == 1]
    check("a: each job ran exactly once (one job_running line in all the logs)", len(once) == 30,
          "; ".join("%s: %s" % (jid[:8], runs.get(jid, [])) for jid in ids if len(runs.get(jid, [])) != 1)[:600])
    bad = cl.node_fields_logged()
    check("a: every job_running line carries node=NAME of its node", not bad, "; ".join(bad[:4]))
    if have_fields:
        wrong = ["%s node=%s attempts=%s logged on %s" % (jid[:8], jobs[jid]["node"], jobs[jid]["attempts"],
                                                         runs.get(jid))
                 for jid in ids if jobs[jid]["attempts"] != 0 or [jobs[jid]["node"]] != runs.get(jid)]
        check("a: each job has attempts 0 and node = the node whose log shows it running", not wrong,
              "; ".join(wrong[:4]))
    per = {}
    for jid in ids:
        for n in runs.get(jid, []):
            per[n] = per.get(n, 0) + 1
    check("a: all three nodes ran some of the jobs", all(per.get(n, 0) > 0 for n in names),
          "runs per node %s" % per)
    log("a: runs per node %s" % per)

    # Each job reads the same from every node.
    keys = ("state", "node", "attempts", "views_present", "views_expected", "timings", "error",
            "label", "priority")
    differ, other = [], set()
    for jid in ids:
        docs = [jget(a, jid) for a in apis]
        for k in keys:
            if len(set(json.dumps(d.get(k), sort_keys=True) for d in docs)) != 1:
                differ.append("%s.%s: %s" % (jid[:8], k, [d.get(k) for d in docs]))
        for k in set().union(*docs):
            if len(set(json.dumps(d.get(k), sort_keys=True) for d in docs)) != 1:
                other.add(k)
    check("a: each job's status is the same from every node (%s)" % ", ".join(keys), not differ,
          "; ".join(differ[:4]))
    if other:
        log("a: note: fields that differ between nodes for some job: %s" % sorted(other))

    # Every volume downloads the same from any node (same input, same result).
    vols = set()
    bad = []
    for i, jid in enumerate(ids):
        st, _, body, _ = apis[(i + 2) % 3].get("/v1/jobs/%s/volume" % jid)
        if st != 200 or len(body) != 4 * 16 ** 3:
            bad.append("%s: %d, %d bytes" % (jid[:8], st, len(body)))
        else:
            vols.add(body)
    check("a: every volume downloads from a node other than its creator's, all 30 equal",
          not bad and len(vols) == 1, "; ".join(bad[:3]) or "%d distinct volumes" % len(vols))
    for jid in ids:
        apis[0].delete("/v1/jobs/" + jid)


def part_d_alive(cl, apis, names, tag):
    ok_all = True
    for nd, a in zip(cl.nodes, apis):
        alive = deadline(3 * LEASE_S + 5)
        nodes, why = nodes_doc(a)
        while alive() and (nodes is None or any(not nodes.get(n, {}).get("alive") for n in names)):
            time.sleep(0.2)
            nodes, why = nodes_doc(a)
        ok = nodes is not None and set(names) <= set(nodes) and all(nodes[n].get("alive") is True for n in names)
        if nodes is not None:
            fields = {"name", "devices", "running", "heartbeat", "alive", "started"}
            missing = sorted(set().union(*(fields - set(v) for v in nodes.values()))) if nodes else sorted(fields)
            if missing:
                check("d: /v1/nodes entries have %s" % ", ".join(sorted(fields)), False, "missing %s" % missing)
                ok_all = False
        ok_all &= check("d%s: GET /v1/nodes on %s lists %s alive" % (tag, nd.name, ", ".join(names)), ok,
                        "" if ok else why or brief(nodes))
    return ok_all


def part_b(cl, apis):
    names = [nd.name for nd in cl.nodes]
    spec = small_spec(n=48, views=60, nu=48, nv=48, algorithm=sirt_runs(40),
                      autostart=True, label="cluster-b")
    proj = phantom.project_cone(spec)
    j = apis[0].create(spec)
    jid = j["id"]
    rec = [SseRecorder(nd, jid) for nd in cl.nodes]
    for r in rec:
        r.start()
    time.sleep(0.3)
    st, _, body, _ = apis[0].put("/v1/jobs/%s/projections" % jid, proj)
    if not check("b: upload of the long job", st == 200, "" if st == 200 else "%d %s" % (st, body[:200])):
        return
    j = wait_job(apis[0], jid, lambda j: j["state"] == "running" and (j.get("progress") or {}).get("iteration", 0) >= 3
                 or j["state"] in FINAL, timeout=60)
    victim_name = j.get("node")
    if victim_name not in names:
        runs = cl.job_runs().get(jid, [])
        check("b: the running job names its node", False, "node=%r; logs say %s" % (victim_name, runs))
        victim_name = runs[0] if runs else None
    if not check("b: the long job is running mid-way before the kill",
                 j["state"] == "running" and victim_name is not None,
                 "%s iteration %s" % (j["state"], (j.get("progress") or {}).get("iteration"))):
        return
    vi = names.index(victim_name)
    others = [i for i in range(3) if i != vi]
    oapi = apis[others[0]]
    it_at_kill = (j.get("progress") or {}).get("iteration")
    t_kill = time.monotonic()
    cl.kill9(vi)
    log("b: killed %s at iteration %s (%s)" % (victim_name, it_at_kill, elapsed()))

    # SSE latency while it ran on the victim: the victim's own stream against the others'.
    lags = []
    for i in others:
        lags += sse_lag(rec[vi], rec[i], t_to=t_kill)

    # The reference: the same job, undisturbed, on a surviving node.
    ref = apis[others[1]].create(dict(spec, label="cluster-b-reference"))
    apis[others[1]].put("/v1/jobs/%s/projections" % ref["id"], proj)

    # One loop watches both: d) /v1/nodes shows the victim not alive once its heartbeat
    # lapses; b) its lease expires, the job is re-queued with attempts 1 and another node
    # takes it.  Each is timed from the kill.
    t_dead = t_retaken = None
    nodes, why, j = None, "", None
    alive = deadline(6 * LEASE_S + 20)
    while alive() and (t_dead is None or t_retaken is None):
        if t_dead is None:
            nodes, why = nodes_doc(oapi)
            if nodes is not None and nodes.get(victim_name, {}).get("alive") is False:
                t_dead = time.monotonic() - t_kill
        if t_retaken is None:
            j = jget(oapi, jid)
            if ((j.get("attempts") or 0) >= 1 and j.get("node") not in (None, victim_name)) or \
                    j["state"] in ("failed", "cancelled"):
                t_retaken = time.monotonic() - t_kill
        time.sleep(0.05)
    check("d: GET /v1/nodes on %s shows the killed %s not alive (%s s after the kill)"
          % (names[others[0]], victim_name, "%.1f" % t_dead if t_dead is not None else "never"),
          t_dead is not None and all(nodes.get(names[i], {}).get("alive") for i in others), why or brief(nodes))
    check("b: the lease expired and another node took the job (%s s after the kill, lease_s %d)"
          % ("%.1f" % t_retaken if t_retaken is not None else "never", LEASE_S),
          j.get("attempts") == 1 and j.get("node") not in (None, victim_name) and j["state"] in ("running", "succeeded"),
          "state %s node %s attempts %s" % (j["state"], j.get("node"), j.get("attempts")))

    # The killed node comes back (its recovery must leave the job, now another node's, alone).
    cl.restart(vi)
    apis[vi] = cl.nodes[vi].api()
    log("b: restarted %s (%s)" % (victim_name, elapsed()))

    j = wait_job(oapi, jid, lambda j: j["state"] in FINAL, timeout=120)
    rj = wait_job(oapi, ref["id"], lambda j: j["state"] in FINAL, timeout=120)
    runs = cl.job_runs().get(jid, [])
    check("b: the job succeeded on another node with attempts 1",
          j["state"] == "succeeded" and j.get("attempts") == 1 and j.get("node") not in (None, victim_name),
          "state %s node %s attempts %s error %s" % (j["state"], j.get("node"), j.get("attempts"), j.get("error")))
    check("b: it ran twice: once on the killed node, once on another",
          len(runs) == 2 and runs.count(victim_name) == 1, str(runs))
    _, _, a, _ = apis[vi].get("/v1/jobs/%s/volume" % jid)
    _, _, b, _ = apis[others[0]].get("/v1/jobs/%s/volume" % ref["id"])
    va, vb = read_f32(a), read_f32(b)
    ok = rj["state"] == "succeeded" and len(a) == len(b) == 4 * 48 ** 3
    diff = max((abs(x - y) for x, y in zip(va, vb)), default=float("inf")) if ok else float("inf")
    scale = max((abs(x) for x in vb), default=0.0)
    check("b: the volume equals the undisturbed run's (max |diff| %.3g, relative %.3g%s)"
          % (diff, diff / scale if scale else float("inf"), ", byte-identical" if a == b else ""),
          ok and scale > 0 and diff <= 1e-5 * scale,
          "reference %s, %d and %d bytes" % (rj["state"], len(a), len(b)))

    # The restarted node has rejoined.
    nodes, why = nodes_doc(oapi)
    alive = deadline(3 * LEASE_S + 5)
    while alive() and (nodes is None or not nodes.get(victim_name, {}).get("alive")):
        time.sleep(0.2)
        nodes, why = nodes_doc(oapi)
    check("b: the restarted %s is alive again in /v1/nodes" % victim_name,
          nodes is not None and nodes.get(victim_name, {}).get("alive") is True, why or brief(nodes))

    # SSE: the nodes that did not run the job saw its progress (polled from the store).
    t_end = time.monotonic()
    runner2 = j.get("node")
    if runner2 in names:
        ri = names.index(runner2)
        for i in range(3):
            if i not in (ri, vi):
                lags += sse_lag(rec[ri], rec[i], t_from=t_kill, t_to=t_end)
    for i in others:  # a node that polls the store sees the final state up to ~1 s later
        rec[i].join(10)
    for r in rec:
        r.close()
    ends = {}
    for i in others:
        st_ev = [d for _, n, d in rec[i].events if n == "state" and isinstance(d, dict)]
        ends[names[i]] = st_ev[-1].get("state") if st_ev else None
    check("b: the event streams on the surviving nodes end with the job succeeded",
          all(v == "succeeded" for v in ends.values()), "%s; statuses %s; errors %s"
          % (ends, [r.status for r in rec], [r.error for r in rec if r.error]))
    if lags:
        med, mx = statistics.median(lags), max(lags)
        log("b: SSE progress on a node not running the job lags the running node's by median %.3f s, "
            "max %.3f s (%d iterations compared)" % (med, mx, len(lags)))
        check("b: SSE progress from another node lags by at most ~1 s (median %.2f s, max %.2f s)" % (med, mx),
              med <= 1.0 and mx <= 2.0)
    else:
        check("b: SSE progress events of the job reach a node that does not run it", False,
              "progress events per node: %s" % {names[i]: len(rec[i].progress_times()) for i in range(3)})
    for x in (jid, ref["id"]):
        oapi.delete("/v1/jobs/" + x)


def part_c(cl, apis):
    views = 40
    spec = small_spec(n=16, views=views, nu=24, nv=24, algorithm=sirt_runs(2),
                      autostart=True, label="cluster-c")
    data = [phantom.project_view(spec, k) for k in range(views)]
    j = apis[1].create(spec)
    jid = j["id"]
    acked = []
    answers = {}
    unexpected = []
    codes503 = set()
    lock = threading.Lock()
    stop = threading.Event()

    def client():
        alive = deadline(90)
        for k in range(views):
            while alive() and not stop.is_set():
                a = apis[k % 3]
                try:
                    st, _, body, doc = Api("http://127.0.0.1:%d" % a.port, validate=False).put(
                        "/v1/jobs/%s/projections/%d" % (jid, k), data[k], timeout=20)
                except (OSError, http.client.HTTPException) as e:
                    st, body, doc = "error: %s" % type(e).__name__, b"", None
                with lock:
                    answers[st] = answers.get(st, 0) + 1
                if st == 200:
                    with lock:
                        acked.append(k)
                    break
                if st == 503:
                    codes503.add(((doc or {}).get("error") or {}).get("code") if isinstance(doc, dict) else None)
                elif not str(st).startswith("error"):
                    unexpected.append("view %d: %s %s" % (k, st, body[:150]))
                time.sleep(0.1)
            time.sleep(0.1)

    t = threading.Thread(target=client, daemon=True)
    t.start()
    alive = deadline(30)
    while alive() and len(acked) < 8:
        time.sleep(0.02)
    pid = cl.pg.kill9()
    n_at_kill = len(acked)
    log("c: killed PostgreSQL's postmaster (pid %d) after %d views acknowledged (%s)" % (pid, n_at_kill, elapsed()))
    time.sleep(1.0)
    st, _, body, doc = apis[0].get("/v1/jobs/" + jid)
    code = ((doc or {}).get("error") or {}).get("code") if isinstance(doc, dict) else None
    check("c: GET of the job while PostgreSQL is down: 503 unavailable", st == 503 and code == "unavailable",
          "" if code == "unavailable" else "%d %s" % (st, body[:200]))
    time.sleep(2.0)
    during = dict(answers)
    cl.pg.restart()
    log("c: PostgreSQL restarted (%s); answers so far %s" % (elapsed(), during))
    t.join(100)
    stop.set()
    check("c: the uploads got 503 while PostgreSQL was down", during.get(503, 0) > 0, str(during))
    check("c: the 503 answers carry the code unavailable", codes503 == {"unavailable"}, str(codes503))
    check("c: no other answer than 200 and 503", not unexpected, "; ".join(unexpected[:4]))
    check("c: the client's every view was acknowledged after retries", sorted(acked) == list(range(views)),
          "%d of %d; answers %s" % (len(acked), views, answers))
    j = wait_job(apis[2], jid, lambda j: j["state"] in FINAL, timeout=90, poll=0.1)
    present = [jget(a, jid).get("views_present") for a in apis]
    check("c: every acknowledged view is present, seen from each node", present == [len(acked)] * 3,
          "views_present %s, acknowledged %d" % (present, len(acked)))
    try:
        with open(cl.spool_file(jid, "projections.f32"), "rb") as f:
            spool = f.read()
    except OSError as e:
        spool = b""
        log("c: %s" % e)
    same = [k for k in acked if spool[k * len(data[k]):(k + 1) * len(data[k])] == data[k]]
    check("c: the spool file holds exactly the bytes acknowledged", len(same) == len(acked) and
          len(spool) == sum(len(x) for x in data), "%d of %d views equal, %d bytes" % (len(same), len(acked),
                                                                                      len(spool)))
    check("c: the job completed after PostgreSQL came back", j["state"] == "succeeded",
          "%s %s" % (j["state"], j.get("error")))
    apis[0].delete("/v1/jobs/" + jid)


def main():
    why = pg_missing()
    if why:
        skip("PostgreSQL 15 is not installed: " + why)
    import os
    import subprocess
    built = all(os.access(p, os.X_OK) for p in (RECOND, WORKER))
    if not check("recond and recond-worker are built", built, "" if built else "%s, %s" % (RECOND, WORKER)):
        finish()  # a failure, not a skip: only a missing PostgreSQL skips this test
    helptext = subprocess.run([RECOND, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
    has = "--spool" in helptext and "--node" in helptext
    if not check("recond --help lists --spool and --node", has,
                 "" if has else "the daemon side of the cluster (server/base/config.c) is not there yet"):
        finish()
    cl = Cluster(3, lease_s=LEASE_S, max_attempts=3)
    try:
        cl.start()
    except RuntimeError as e:
        check("three daemons start on one PostgreSQL database and spool (--store URI --spool --node, "
              "config lease_s/max_attempts)", False, str(e)[:600])
        finish()
    check("three nodes started on %s (%s)" % (cl.pg.uri, elapsed()), True)
    apis = [nd.api() for nd in cl.nodes]
    names = [nd.name for nd in cl.nodes]

    for name, fn in (("a", lambda: part_a(cl, apis)), ("d", lambda: part_d_alive(cl, apis, names, "")),
                     ("b", lambda: part_b(cl, apis)), ("c", lambda: part_c(cl, apis)),
                     ("d after c", lambda: part_d_alive(cl, apis, names, " after PostgreSQL's restart"))):
        t0 = time.monotonic()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - one part's failure is reported, the others still run
            import traceback
            traceback.print_exc()
            check("part %s ran to its end" % name, False, "%s: %s" % (type(e).__name__, e))
        log("part %s: %.1f s (total %s)" % (name, time.monotonic() - t0, elapsed()))
        for nd in cl.nodes:
            if nd.proc and nd.proc.poll() is not None:
                check("%s is still running after part %s" % (nd.name, name), False, "exit %s" % nd.proc.returncode)
                nd.dump_log(tail=30)
                try:
                    nd.start()
                except RuntimeError:
                    pass
    check("no node died", all(nd.proc and nd.proc.poll() is None for nd in cl.nodes))


if __name__ == "__main__":
    run_main(main)
