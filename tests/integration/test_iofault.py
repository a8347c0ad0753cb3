#!/usr/bin/env python3
"""I/O faults: the daemon (and the workers it forks) run under the LD_PRELOAD
shim tests/faults/iofault.c, which makes one kind of call on one kind of
file fail with ENOSPC, EDQUOT or EIO while a control file exists.  For each
point where recond writes (job create: directory, spec.json, the
preallocated projections.f32, the directories' fsyncs, the SQLite commit;
whole and per-view uploads: the spool file and the commit of the views;
sending an acknowledged view again when its bit cannot be cleared; start;
the worker's volume write) and each errno:

- the request is answered 507 disk_full (ENOSPC, EDQUOT) or 500 io_error
  (EIO) with a message, and the shim's log shows the fault happened (a case
  whose fault never fires tests nothing, and fails);
- nothing is acknowledged: no job is created (no row, no directory left), an
  upload's views stay absent, acknowledged views keep their bytes, a start
  leaves the job where it was;
- once the fault is cleared the same request succeeds, and every job of the
  matrix runs to "succeeded" at the end.

The worker's volume write failing (the disk fills during the run) fails the
job with the worker's code and a message naming the file, keeps the
projections (views and bytes), leaves no volume.f32 and no temporary; a
failed job stays failed (POST start: 409), the same data in a new job
succeeds once there is space.  A commit that fails while the runner records
a finished job is retried until it succeeds (the job does not stay
"running").  After all of it a restart finds nothing to clean up.
The matrix is printed at the end (docs/server.md "I/O faults" has it)."""

import os
import random
import subprocess
import time

from recond_harness import (sirt_runs, BUILD, ROOT, Daemon, check, deadline, f32, log, proj_bytes, require_binaries,
                            run_main, small_spec, tempdir, view_bytes)

SHIM = os.path.join(BUILD, "lib", "iofault.so")
EXPECT = {"ENOSPC": (507, "disk_full"), "EDQUOT": (507, "disk_full"), "EIO": (500, "io_error")}
UUID_GLOB = "????????-????-????-????-????????????"
rng = random.Random(7)
matrix = []  # (point, op, errno, what was seen, ok)


def shim_path():
    """build/lib/iofault.so (mk/soak.mk builds it with the tests); compiled here when missing."""
    if os.path.exists(SHIM):
        return SHIM
    out = os.path.join(tempdir("recond-iofault-so-"), "iofault.so")
    subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
                    os.path.join(ROOT, "tests", "faults", "iofault.c"), "-o", out, "-ldl", "-lpthread"],
                   check=True)
    return out


class Faults:
    def __init__(self):
        d = tempdir("recond-iofault-")
        self.ctl = os.path.join(d, "ctl")
        self.log = os.path.join(d, "log")

    def env(self):
        return {"LD_PRELOAD": shim_path(), "IOFAULT_CTL": self.ctl, "IOFAULT_LOG": self.log}

    def arm(self, op, err, path, after=0, count=0):
        open(self.log, "w").close()
        tmp = self.ctl + ".new"
        with open(tmp, "w") as f:
            f.write("op=%s errno=%s path=%s after=%d count=%d\n" % (op, err, path, after, count))
        os.rename(tmp, self.ctl)  # a new inode: the shim reads the rule again

    def clear(self):
        if os.path.exists(self.ctl):
            os.unlink(self.ctl)

    def fired(self):
        try:
            with open(self.log) as f:
                return [ln.split() for ln in f if ln.strip()]
        except OSError:
            return []


def data_for(spec):
    n = proj_bytes(spec) // 4
    return f32([rng.uniform(0.0, 2.0) for _ in range(n)])


def disk(d, jid):
    with open(os.path.join(d.store, "jobs", jid, "projections.f32"), "rb") as f:
        return f.read()


def total_jobs(api):
    st, _, _, doc = api.get("/v1/jobs?limit=1")
    return doc["total"] if st == 200 else -1


def job_dirs(d):
    return sorted(os.listdir(os.path.join(d.store, "jobs")))


def answered(name, op, err, st, doc, fired):
    """Checks one faulted answer: the status and code of the errno, a message, the fault logged."""
    want_st, want_code = EXPECT[err]
    e = (doc or {}).get("error") or {}
    ok = st == want_st and e.get("code") == want_code and bool(e.get("message")) and bool(fired)
    seen = "%d %s" % (st, e.get("code")) if fired else "%d (fault never fired)" % st
    matrix.append((name, op, err, seen, ok))
    check("%s [%s %s]: %d %s with a message" % (name, op, err, want_st, want_code), ok,
          "%d %s: %s; faults injected: %d" % (st, e.get("code"), e.get("message"), len(fired)))
    return ok


def create_cases(d, api, f, done):
    points = [
        ("create: mkdir of the job directory", "mkdir", "*/jobs/" + UUID_GLOB, ("ENOSPC", "EDQUOT", "EIO")),
        ("create: open spec.json temporary", "open", "*/.spec.json.*.tmp", ("ENOSPC", "EIO")),
        ("create: write spec.json", "write", "*/.spec.json.*.tmp", ("ENOSPC", "EIO")),
        ("create: fsync spec.json", "fsync", "*/.spec.json.*.tmp", ("ENOSPC", "EIO")),
        ("create: rename spec.json into place", "rename", "*/spec.json", ("ENOSPC", "EIO")),
        ("create: fsync the job directory", "fsync", "*/jobs/" + UUID_GLOB, ("ENOSPC", "EIO")),
        ("create: open projections.f32", "open", "*/projections.f32", ("ENOSPC", "EIO")),
        ("create: preallocate projections.f32", "fallocate", "*/projections.f32", ("ENOSPC", "EDQUOT", "EIO")),
        ("create: fsync projections.f32", "fsync", "*/projections.f32", ("ENOSPC", "EIO")),
        ("create: fsync the jobs directory", "fsync", "*/jobs", ("ENOSPC", "EIO")),
        ("create: write the SQLite WAL (commit)", "write,pwrite", "*/recond.db-wal", ("ENOSPC", "EIO")),
        ("create: fsync the SQLite WAL (commit)", "sync", "*/recond.db-wal", ("ENOSPC", "EDQUOT", "EIO")),
    ]
    for name, op, path, errs in points:
        for err in errs:
            spec = small_spec(n=8, views=6, nu=8, nv=8, label="create-%s-%s" % (op, err))
            n0, dirs0 = total_jobs(api), job_dirs(d)
            f.arm(op, err, path)
            st, _, _, doc = api.post_json("/v1/jobs", spec)
            fired = f.fired()
            f.clear()
            answered(name, op, err, st, doc, fired)
            check("%s [%s %s]: no job, no directory left" % (name, op, err),
                  total_jobs(api) == n0 and job_dirs(d) == dirs0,
                  "jobs %d -> %d; directories %s -> %s" % (n0, total_jobs(api), dirs0[-2:], job_dirs(d)[-2:]))
            st, _, body, doc = api.post_json("/v1/jobs", spec)
            if check("%s [%s %s]: the same create succeeds once the fault is cleared" % (name, op, err),
                     st == 201, "%d %s" % (st, body[:200])):
                data = data_for(spec)
                st, _, body, _ = api.put("/v1/jobs/%s/projections" % doc["id"], data)
                check("upload after the fault cleared: 200", st == 200, body[:200])
                done.append((doc["id"], spec, data))


def upload_cases(d, api, f, done):
    points = [
        ("upload: open the spool file", "open", "*/projections.f32", ("ENOSPC", "EIO")),
        ("upload: pwrite into the spool file", "pwrite", "*/projections.f32", ("ENOSPC", "EDQUOT", "EIO")),
        ("upload: fdatasync of the spool file", "fdatasync", "*/projections.f32", ("ENOSPC", "EIO")),
        ("upload: write the SQLite WAL (views set)", "write,pwrite", "*/recond.db-wal", ("ENOSPC", "EIO")),
        ("upload: fsync the SQLite WAL (views set)", "sync", "*/recond.db-wal", ("ENOSPC", "EIO")),
    ]
    for whole in (True, False):
        kind = "whole stack" if whole else "one view"
        for name, op, path, errs in points:
            for err in errs:
                label = "%s (%s)" % (name, kind)
                spec = small_spec(n=8, views=6, nu=8, nv=8, label="upload-%s-%s" % (op, err))
                j = api.create(spec)
                jid, data, vb = j["id"], data_for(spec), view_bytes(spec)
                if not whole:  # view 0 acknowledged before the fault
                    st, _, body, _ = api.put("/v1/jobs/%s/projections/0" % jid, data[:vb])
                    check("view 0 before the fault: 200", st == 200, body[:200])
                f.arm(op, err, path)
                if whole:
                    st, _, _, doc = api.put("/v1/jobs/%s/projections" % jid, data)
                else:
                    st, _, _, doc = api.put("/v1/jobs/%s/projections/1" % jid, data[vb:2 * vb])
                fired = f.fired()
                f.clear()
                answered(label, op, err, st, doc, fired)
                jj = api.job(jid)
                if whole:
                    ok = jj["views_present"] == 0 and jj["state"] == "created"
                else:
                    ok = jj["views_present"] == 1 and jj["views_missing"][0][0] == 1 and \
                        disk(d, jid)[:vb] == data[:vb]
                check("%s [%s %s]: nothing acknowledged (%s)" % (label, op, err,
                      "no view present" if whole else "view 1 absent, view 0 kept its bytes"),
                      ok, "%s present, missing %s" % (jj["views_present"], jj["views_missing"]))
                if whole:
                    st, _, body, _ = api.put("/v1/jobs/%s/projections" % jid, data)
                else:
                    st, _, body, _ = api.put("/v1/jobs/%s/projections/1" % jid, data[vb:2 * vb])
                check("%s [%s %s]: the same upload succeeds once the fault is cleared" % (label, op, err),
                      st == 200 and (not whole or disk(d, jid) == data), "%d %s" % (st, body[:200]))
                if not whole:
                    for k in range(2, 6):
                        api.put("/v1/jobs/%s/projections/%d" % (jid, k), data[k * vb:(k + 1) * vb])
                done.append((jid, spec, data))


def resend_cases(d, api, f, done):
    """An acknowledged view sent again while its bit cannot be cleared: refused before a byte is
    written, the acknowledged bytes stay present."""
    for whole in (True, False):
        for op in ("write,pwrite", "sync"):
            for err in ("ENOSPC", "EIO"):
                name = "re-send over acknowledged %s: SQLite WAL (views clear)" % ("stack" if whole else "view")
                spec = small_spec(n=8, views=6, nu=8, nv=8, label="resend")
                j = api.create(spec)
                jid, old, new, vb = j["id"], data_for(spec), data_for(spec), view_bytes(spec)
                api.put("/v1/jobs/%s/projections" % jid, old)
                f.arm(op, err, "*/recond.db-wal")
                if whole:
                    st, _, _, doc = api.put("/v1/jobs/%s/projections" % jid, new)
                else:
                    st, _, _, doc = api.put("/v1/jobs/%s/projections/2" % jid, new[2 * vb:3 * vb])
                fired = f.fired()
                f.clear()
                answered(name, op, err, st, doc, fired)
                jj = api.job(jid)
                check("%s [%s %s]: every view still present with its acknowledged bytes" % (name, op, err),
                      jj["views_present"] == 6 and disk(d, jid) == old, "%d present" % jj["views_present"])
                if whole:
                    st, _, _, _ = api.put("/v1/jobs/%s/projections" % jid, new)
                    want = new
                else:
                    st, _, _, _ = api.put("/v1/jobs/%s/projections/2" % jid, new[2 * vb:3 * vb])
                    want = old[:2 * vb] + new[2 * vb:3 * vb] + old[3 * vb:]
                check("%s [%s %s]: sent again once cleared: 200, new bytes on disk" % (name, op, err),
                      st == 200 and disk(d, jid) == want, str(st))
                done.append((jid, spec, want))


def start_cases(d, api, f, started):
    for op in ("write,pwrite", "sync"):
        for err in ("ENOSPC", "EIO"):
            name = "start: SQLite WAL (queue)"
            spec = small_spec(n=8, views=6, nu=8, nv=8, label="start")
            j = api.create(spec)
            data = data_for(spec)
            api.put("/v1/jobs/%s/projections" % j["id"], data)
            f.arm(op, err, "*/recond.db-wal")
            st, _, _, doc = api.post_json("/v1/jobs/%s/start" % j["id"], b"")
            fired = f.fired()
            f.clear()
            answered(name, op, err, st, doc, fired)
            jj = api.job(j["id"])
            check("%s [%s %s]: the job is not queued" % (name, op, err), jj["state"] == "receiving", jj["state"])
            st, _, body, _ = api.post_json("/v1/jobs/%s/start" % j["id"], b"")
            check("%s [%s %s]: start succeeds once the fault is cleared (202)" % (name, op, err), st == 202,
                  "%d %s" % (st, body[:200]))
            # run it now: the volume cases below fault every volume write
            api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=60, poll=0.02)
            started.append(j["id"])


def volume_cases(d, api, f):
    """The worker's volume write fails: the disk fills during the run."""
    points = [
        ("run: open the volume temporary", "open", "*/.volume.f32.*.tmp", ("ENOSPC", "EIO")),
        ("run: write the volume (disk fills)", "write", "*/.volume.f32.*.tmp", ("ENOSPC", "EDQUOT", "EIO")),
        ("run: fsync the volume", "fsync", "*/.volume.f32.*.tmp", ("ENOSPC", "EIO")),
        ("run: rename the volume into place", "rename", "*/volume.f32", ("ENOSPC", "EIO")),
        ("run: fsync the job directory after the rename", "fsync", "*/jobs/{id}", ("ENOSPC", "EIO")),
    ]
    for name, op, path, errs in points:
        for err in errs:
            spec = small_spec(n=8, views=6, nu=8, nv=8, label="volume-%s-%s" % (op, err))
            j = api.create(spec)
            jid, data = j["id"], data_for(spec)
            api.put("/v1/jobs/%s/projections" % jid, data)
            f.arm(op, err, path.replace("{id}", jid))
            st, _, _, _ = api.post_json("/v1/jobs/%s/start" % jid, b"")
            jj = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60, poll=0.02)
            fired = f.fired()
            f.clear()
            e = jj.get("error") or {}
            want_code = EXPECT[err][1]
            ok = jj["state"] == "failed" and e.get("code") == want_code and "volume" in (e.get("message") or "") \
                and bool(fired)
            seen = "failed %s" % e.get("code") if fired else "%s (fault never fired)" % jj["state"]
            matrix.append((name, op, err, seen, ok))
            check("%s [%s %s]: job failed, %s, the message names the file" % (name, op, err, want_code), ok,
                  "%s %s: %s; faults injected: %d" % (jj["state"], e.get("code"), e.get("message"), len(fired)))
            jd = os.path.join(d.store, "jobs", jid)
            left = sorted(os.listdir(jd))
            check("%s [%s %s]: projections kept (views and bytes), no volume, no temporary" % (name, op, err),
                  jj["views_present"] == 6 and disk(d, jid) == data and left == ["projections.f32", "spec.json"],
                  "%d views present; files %s" % (jj["views_present"], left))
            st, _, _, _ = api.post_json("/v1/jobs/%s/start" % jid, b"")
            check("%s [%s %s]: a failed job stays failed (start: 409)" % (name, op, err), st == 409, str(st))
            j2 = api.create(spec)
            api.put("/v1/jobs/%s/projections" % j2["id"], data)
            api.post_json("/v1/jobs/%s/start" % j2["id"], b"")
            j2 = api.wait_state(j2["id"], ("succeeded", "failed", "cancelled"), timeout=60, poll=0.02)
            check("%s [%s %s]: the same data in a new job succeeds once there is space" % (name, op, err),
                  j2["state"] == "succeeded", "%s %s" % (j2["state"], j2.get("error")))


def finish_case(f):
    """The commit that records a finished job fails: the runner retries it, the job ends succeeded."""
    worker = os.path.join(tempdir("recond-iofault-w-"), "soak-worker.sh")
    with open(worker, "w") as fh:
        fh.write("#!/bin/sh\nexec /usr/bin/python3 '%s' \"$@\"\n" % os.path.join(ROOT, "tests", "soak",
                                                                               "soak_worker.py"))
    os.chmod(worker, 0o700)
    env = dict(f.env(), SOAK_STEP_S="0.3")
    d = Daemon(worker=worker, env=env).start()
    api = d.api()
    spec = small_spec(n=8, views=6, nu=8, nv=8, label="finish", algorithm=sirt_runs(4))
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], data_for(spec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    api.wait_state(j["id"], ("running",), timeout=30, poll=0.02)
    f.arm("sync", "EIO", "*/recond.db-wal")
    alive = deadline(20)
    while alive() and "event=store_error" not in d.read_log():
        time.sleep(0.05)
    mid = api.job(j["id"])["state"]
    time.sleep(1.5)  # at least one retry while the fault lasts
    fired = f.fired()
    f.clear()
    jj = api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=20, poll=0.05)
    ok = mid == "running" and jj["state"] == "succeeded" and len(fired) >= 2
    matrix.append(("finish: SQLite WAL while recording the outcome", "sync", "EIO",
                   "retried, then succeeded" if ok else "%s -> %s" % (mid, jj["state"]), ok))
    check("a failed commit of a finished job is retried; the job ends succeeded once the fault clears", ok,
          "state while failing %s, then %s; faults injected %d" % (mid, jj["state"], len(fired)))
    check("the retry is logged", "event=store_recovered" in d.read_log())
    d.stop()


def main():
    require_binaries()
    f = Faults()
    d = Daemon(env=f.env()).start()
    api = d.api()
    done, started = [], []
    create_cases(d, api, f, done)
    upload_cases(d, api, f, done)
    resend_cases(d, api, f, done)
    start_cases(d, api, f, started)
    volume_cases(d, api, f)
    st, _, _, _ = api.get("/readyz")
    check("the daemon is up after every fault", st == 200 and d.proc.poll() is None)
    # every job of the matrix runs once the faults are gone
    for jid, _spec, _data in done:
        api.post_json("/v1/jobs/%s/start" % jid, b"")
    bad = []
    for jid in [x[0] for x in done] + started:
        jj = api.wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60, poll=0.05)
        if jj["state"] != "succeeded":
            bad.append("%s %s %s" % (jid, jj["state"], jj.get("error")))
    check("all %d jobs of the matrix succeed once the faults are cleared" % (len(done) + len(started)),
          not bad, "; ".join(bad[:3]))
    for jid, _spec, data in done:
        if disk(d, jid) != data:
            check("job %s: projections on disk are the acknowledged bytes" % jid, False)
    # nothing to clean up: no directory without a job, no temporary, no stray volume
    d.stop()
    d.start()
    line = [ln for ln in d.read_log().splitlines() if "event=store_open" in ln]
    check("restart after the matrix: nothing to clean up (orphans_removed=0)",
          line and "orphans_removed=0" in line[-1], line[-1] if line else "no store_open line")
    d.stop()
    finish_case(f)
    log("fault matrix (point, call, errno -> answer):")
    for name, op, err, seen, ok in matrix:
        log("  %-52s %-13s %-7s -> %s%s" % (name, op, err, seen, "" if ok else "   <-- FAIL"))


if __name__ == "__main__":
    run_main(main)
