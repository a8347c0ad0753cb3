#!/usr/bin/env python3
"""reconctl end to end against a real daemon: submit (upload), watch --json,
get in every format, list, status, devices, cancel, delete, and the exit
codes scripts rely on (0, 1, 2, 3, 4, 5)."""

import json
import os
import subprocess
import threading
import time

from recond_harness import (RECONCTL, ROOT, Daemon, check, require_engine, fake_worker, proj_bytes, require_binaries,
                            run_main, small_spec, tempdir)
from recond_client import Client

UNKNOWN = "0d6c9e4a-1111-4222-8333-444455556666"


def ctl(d, *args, timeout=120):
    p = subprocess.run([RECONCTL, "--url", d.url if d else "http://127.0.0.1:1"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def main():
    require_binaries()
    require_binaries(RECONCTL)
    tmp = tempdir()
    d = Daemon().start()
    require_engine(d.api())
    spec = small_spec(label="reconctl")
    spec_path = os.path.join(tmp, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    proj_path = os.path.join(tmp, "proj.f32")
    with open(proj_path, "wb") as f:
        f.write(b"\0\0\x80\x3f" * (proj_bytes(spec) // 4))  # all 1.0

    rc, out, err = ctl(d, "submit", spec_path, "--projections", proj_path)
    jid = out.strip()
    check("submit: exit 0 and prints the id", rc == 0 and len(jid) == 36, "rc %d out %r err %r" % (rc, out, err))
    rc, out, err = ctl(d, "--json", "watch", jid)
    lines = [json.loads(ln) for ln in out.splitlines() if ln.strip()]
    want_rc, want_state = 0, "succeeded"
    check("watch --json: exit %d, one JSON line per event" % want_rc, rc == want_rc and len(lines) >= 1,
          "rc %d %s" % (rc, err))
    check("watch --json: last line is end/%s" % want_state, lines and lines[-1]["event"] == "end"
          and lines[-1]["data"]["state"] == want_state, str(lines[-1:]))
    check("watch --json: events carry state or progress",
          all(ln["event"] in ("state", "progress", "end") for ln in lines), str([ln["event"] for ln in lines]))

    job = json.loads(ctl(d, "--json", "status", jid)[1])
    for fmt, name in (("raw", "v.raw"), ("nifti", "v.nii"), ("mha", "v.mha")):
        path = os.path.join(tmp, name)
        rc, out, err = ctl(d, "get", jid, "-o", path)
        size = os.path.getsize(path) if os.path.exists(path) else -1
        check("get -o %s: exit 0, file written" % name, rc == 0 and size >= job["volume_bytes"],
              "rc %d size %d err %s" % (rc, size, err))
        check("get -o %s: no .part left" % name, not os.path.exists(path + ".part"))
    with open(os.path.join(tmp, "v.raw"), "rb") as f:
        raw = f.read()
    check("get raw: exactly volume_bytes", len(raw) == job["volume_bytes"])
    with open(os.path.join(tmp, "v.nii"), "rb") as f:
        nii = f.read()
    check("get nifti: ends with the raw volume", nii.endswith(raw) and nii[344:347] == b"n+1")
    p = subprocess.run([RECONCTL, "--url", d.url, "get", jid, "-o", "-", "--format", "raw"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check("get -o - writes the volume to stdout", p.returncode == 0 and p.stdout == raw)

    rc, out, _ = ctl(d, "--json", "list")
    check("list --json contains the job", rc == 0 and jid in [j["id"] for j in json.loads(out)["jobs"]])
    rc, out, _ = ctl(d, "list", "--state", want_state)
    check("list --state (table) shows the job", rc == 0 and jid in out and want_state in out, out[:300])
    rc, out, _ = ctl(d, "status", jid)
    check("status (text)", rc == 0 and want_state in out, out)
    rc, out, _ = ctl(d, "--json", "devices")
    check("devices --json", rc == 0 and len(json.loads(out)["devices"]) >= 1, out[:200])
    rc, out, _ = ctl(d, "devices")
    check("devices (table)", rc == 0 and "ENGINE" in out, out[:200])
    rc, out, err = ctl(d, "cancel", jid)
    check("cancel of a finished job: exit 0, job kept", rc == 0 and "already" in err and
          ctl(d, "status", jid)[0] == 0, err)

    # Exit codes.
    rc, _, err = ctl(d, "status", UNKNOWN)
    check("exit 2 for an unknown job (404)", rc == 2 and "404" in err, "rc %d %s" % (rc, err))
    bad_spec = os.path.join(tmp, "bad.json")
    with open(bad_spec, "w") as f:
        json.dump(dict(spec, algorithm={"name": "magic"}), f)
    rc, out, err = ctl(d, "submit", bad_spec, "--projections", proj_path)
    check("exit 2 for a spec the server refuses (400)", rc == 2 and "algorithm" in err, "rc %d %s" % (rc, err))
    short = os.path.join(tmp, "short.f32")
    with open(short, "wb") as f:
        f.write(b"\0" * 100)
    n_before = len(json.loads(ctl(d, "--json", "list")[1])["jobs"])
    rc, out, err = ctl(d, "submit", spec_path, "--projections", short)
    n_after = len(json.loads(ctl(d, "--json", "list")[1])["jobs"])
    check("exit 2 for a projection file of the wrong length (422), job deleted again",
          rc == 2 and out == "" and n_after == n_before, "rc %d %s; jobs %d -> %d" % (rc, err, n_before, n_after))
    rc, _, _ = ctl(d, "status", "not-an-id")
    check("exit 1 for a malformed id", rc == 1)
    rc, _, _ = ctl(d, "frobnicate")
    check("exit 1 for an unknown command", rc == 1)
    rc, _, _ = ctl(d, "submit", spec_path)
    check("exit 1 for submit without --projections", rc == 1)
    with open(os.path.join(tmp, "dup.json"), "w") as f:
        f.write('{"label": "a", "label": "b"}')
    rc, _, _ = ctl(d, "submit", os.path.join(tmp, "dup.json"), "--projections", proj_path)
    check("exit 1 for a spec file with duplicate keys", rc == 1)
    rc, _, err = ctl(None, "list")
    check("exit 3 when the daemon is unreachable", rc == 3, err)

    # The PACS-style example script: one acquisition in an inbox.
    inbox = tempdir()
    acq = os.path.join(inbox, "acq1")
    os.makedirs(acq)
    with open(os.path.join(acq, "spec.json"), "w") as f:
        json.dump(spec, f)
    with open(os.path.join(acq, "projections.f32"), "wb") as f:
        f.write(b"\0\0\x80\x3f" * (proj_bytes(spec) // 4))
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "clients", "python", "example.py"), inbox],
                       capture_output=True, timeout=120, env=dict(os.environ, RECOND_URL=d.url))
    check("example.py: exit 0, volume.nii in done/", p.returncode == 0 and
          os.path.getsize(os.path.join(inbox, "done", "acq1", "volume.nii")) > job["volume_bytes"],
          "exit %d %s" % (p.returncode, p.stderr.decode()[-300:]))

    # 5: cancelled.
    rc, out, _ = ctl(d, "submit", spec_path, "--projections", proj_path, "--no-start")
    cid = out.strip()
    rc, out, _ = ctl(d, "cancel", cid)
    check("cancel of an unstarted job: exit 0, cancelled", rc == 0 and "cancelled" in out, out)
    rc, out, _ = ctl(d, "watch", cid)
    check("watch of a cancelled job: exit 5", rc == 5, "rc %d" % rc)
    rc, out, _ = ctl(d, "delete", cid)
    check("delete: exit 0", rc == 0 and ctl(d, "status", cid)[0] == 2)
    d.stop()

    # 4: failed (a worker that always crashes).
    d2 = Daemon(worker=fake_worker("crash")).start()
    rc, out, err = ctl(d2, "submit", spec_path, "--projections", proj_path, "--watch")
    check("submit --watch of a job whose worker crashes: exit 4", rc == 4 and "failed" in out,
          "rc %d out %r err %r" % (rc, out, err))
    d2.stop()

    # The event stream of a running job (a stand-in worker that reports a
    # progress line every 0.1 s): reconctl and the Python module follow it,
    # and a cancel ends both with "cancelled" (reconctl exit 5).
    d3 = Daemon(worker=fake_worker("slow")).start()
    rc, out, err = ctl(d3, "submit", spec_path, "--projections", proj_path)
    sid = out.strip()
    api = d3.api()
    api.wait_state(sid, ("running",), timeout=30, poll=0.02)
    w = subprocess.Popen([RECONCTL, "--url", d3.url, "--json", "watch", sid], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    seen = []

    def follow():
        for ev, data in Client(d3.url).watch(sid, timeout=60):
            seen.append((ev, data))
    th = threading.Thread(target=follow)
    th.start()
    time.sleep(1.5)
    api.delete("/v1/jobs/%s" % sid)
    try:
        out, err = w.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        w.kill()
        out, err = w.communicate()
    th.join(30)
    lines = [json.loads(ln) for ln in out.decode().splitlines() if ln.strip()]
    kinds = [ln["event"] for ln in lines]
    check("watch --json of a running job: progress events arrive", kinds.count("progress") >= 3,
          str(kinds[:8]))
    check("watch --json: first event is the job's state", kinds[:1] == ["state"], str(kinds[:3]))
    check("watch of a job cancelled while running: exit 5, ends with cancelled",
          w.returncode == 5 and lines and lines[-1]["data"]["state"] == "cancelled",
          "rc %s %s" % (w.returncode, err.decode()[-200:]))
    pk = [ev for ev, _ in seen]
    check("python watch(): progress events, then end/cancelled", pk.count("progress") >= 3 and
          seen and seen[-1][0] == "end" and seen[-1][1]["state"] == "cancelled", str(pk[:6] + pk[-2:]))
    prog = [data for ev, data in seen if ev == "progress"]
    check("progress events count up", all(b["iteration"] > a["iteration"] for a, b in zip(prog, prog[1:])),
          str([p["iteration"] for p in prog[:10]]))
    d3.stop()


if __name__ == "__main__":
    run_main(main)
