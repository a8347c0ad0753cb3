#!/usr/bin/env python3
"""reconctl end to end against a real daemon: submit (upload), watch --json,
get in every format, list, status, devices, cancel, delete, and the exit
codes scripts rely on (0, 1, 2, 3, 4, 5); status and watch say where a job
stopped and why in the API's words (docs/api.md, "Progress"); then, with a daemon configured with
two (unreachable) PACS, destinations, get --format dicom, push and the Python
module's DICOM calls.  No PACS is needed: nothing here waits for a send."""

import json
import os
import subprocess
import threading
import time
import zipfile

from recond_harness import (RECONCTL, ROOT, Daemon, check, require_engine, fake_worker, proj_bytes, require_binaries,
                            run_main, small_spec, tempdir)
from recond_client import Client

UNKNOWN = "0d6c9e4a-1111-4222-8333-444455556666"
STOP_WHY = {"stagnation": "the residual stopped falling", "tolerance": "the residual fell below the tolerance",
            "discrepancy": "the residual reached the noise level"}


def progress_words(state, p):
    """reconctl's state line for the API's progress p."""
    text = "%s, iteration %d of %d" % (state, p["iteration"], p["iterations"])
    if p.get("stopped"):
        text += ", stopped: " + p["stopped"]
        if p["stopped"] in STOP_WHY:
            text += " (%s)" % STOP_WHY[p["stopped"]]
    return text


def stopped_early(d, tmp):
    """A job that stagnates at k of 10: status and watch say "iteration k of 10, stopped: stagnation"."""
    import phantom
    spec = small_spec(n=32, views=48, nu=40, nv=40, label="stagnates",
                      algorithm={"name": "sirt", "iterations": 10, "initial": "fdk", "stop": {"stagnation": 0.2}})
    spec_path, proj_path = os.path.join(tmp, "stag.json"), os.path.join(tmp, "stag.f32")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    with open(proj_path, "wb") as f:
        f.write(phantom.project_cone(spec))
    rc, out, err = ctl(d, "submit", spec_path, "--projections", proj_path, "--watch")
    jid = out.strip()
    job = d.api().job(jid)
    p = job["progress"]
    check("a job that stagnates: the API has iteration %s of %s, stopped %s" % (p.get("iteration"),
          p.get("iterations"), p.get("stopped")), rc == 0 and p.get("stopped") == "stagnation" and
          0 < p["iteration"] < 10 and p["iterations"] == 10, json.dumps(p))
    want = progress_words("succeeded", p)
    check("submit --watch says %r on stderr when it ends" % want, ("reconctl: " + want) in err.splitlines(),
          repr(err[-300:]))
    rc, out, err = ctl(d, "status", jid)
    check("status: 'state:    %s'" % want, rc == 0 and ("state:    %s\n" % want) in out, repr(out))


def ctl(d, *args, timeout=120):
    p = subprocess.run([RECONCTL, "--url", d.url if d else "http://127.0.0.1:1"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def dicom_and_pacs(tmp):
    """A daemon with a stow-rs and a c-store destination (both unreachable: port 9)."""
    cfg = os.path.join(tmp, "pacs.json")
    with open(cfg, "w") as f:
        json.dump({"destinations": [
            {"name": "pacs-main", "kind": "stow-rs", "url": "http://127.0.0.1:9/dicom-web",
             "username": "u", "password": "s3cret"},
            {"name": "dimse", "kind": "c-store", "host": "127.0.0.1", "port": 9, "called_ae": "PACS"}]}, f)
    d = Daemon(config=cfg).start()
    rc, out, err = ctl(d, "destinations")
    check("destinations: exit 0, lists both with kind and address",
          rc == 0 and all(w in out for w in ("pacs-main", "stow-rs", "http://127.0.0.1:9/dicom-web",
                                                "dimse", "c-store", "127.0.0.1:9", "PACS")),
          "rc %d out %r err %r" % (rc, out, err))
    rc, jout, _ = ctl(d, "--json", "destinations")
    check("destinations: never the password", "s3cret" not in out + err + jout)
    names = [x["name"] for x in json.loads(jout)["destinations"]] if rc == 0 else []
    check("destinations --json: the daemon's answer", names == ["pacs-main", "dimse"], jout[:300])

    # A small FDK job without destinations: its series as a ZIP of DICOM files.
    spec = small_spec(algorithm={"name": "fdk"}, label="reconctl-dicom")
    spec["dicom"] = {"patient_id": "RCTL-1", "patient_name": "TEST^RECONCTL"}
    spec_path = os.path.join(tmp, "dicom.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    proj_path = os.path.join(tmp, "proj.f32")
    rc, out, err = ctl(d, "submit", spec_path, "--projections", proj_path, "--watch")
    jid = out.strip()
    check("FDK job with dicom fields: submit --watch exit 0", rc == 0 and "succeeded" in err,
          "rc %d out %r err %r" % (rc, out, err))
    check("submit --watch: stdout is the id alone, one line (id=$(...) captures it)",
          out.splitlines() == [jid] and len(jid) == 36, "out %r" % out)
    zpath = os.path.join(tmp, "series.zip")
    rc, out, err = ctl(d, "get", jid, "-o", zpath)
    check("get -o series.zip (dicom from the name): exit 0, no .part left",
          rc == 0 and os.path.exists(zpath) and not os.path.exists(zpath + ".part"), "rc %d err %s" % (rc, err))
    nz = spec["volume"]["nz"]
    entries = []
    try:
        with zipfile.ZipFile(zpath) as z:
            entries = [(n, z.read(n)) for n in sorted(z.namelist())]
    except (OSError, zipfile.BadZipFile) as e:
        check("the ZIP opens", False, str(e))
    check("ZIP: one entry per slice, named {id}/NNNNN.dcm",
          entries and all(n.startswith(jid + "/") and n.endswith(".dcm") for n, _ in entries)
          and len(entries) == nz, "%d entries (nz %d): %s" % (len(entries), nz, [n for n, _ in entries[:2]]))
    check("ZIP: every entry is DICOM ('DICM' at byte 128)",
          entries and all(b[128:132] == b"DICM" for _, b in entries))
    try:
        import pydicom
    except ImportError:
        pydicom = None
    if pydicom and entries:
        import io
        ds = pydicom.dcmread(io.BytesIO(entries[0][1]))
        check("pydicom: CT image of the patient", ds.Modality == "CT" and ds.PatientID == "RCTL-1",
              "%s %s" % (ds.Modality, ds.PatientID))
    def read(path):
        with open(path, "rb") as f:
            return f.read()
    zbytes = read(zpath)
    rc, out, err = ctl(d, "get", jid, "-o", os.path.join(tmp, "series.bin"), "--format", "dicom")
    check("get --format dicom with another name: the same ZIP",
          rc == 0 and read(os.path.join(tmp, "series.bin")) == zbytes, "rc %d err %s" % (rc, err))
    rc, out, err = ctl(d, "status", jid)
    check("status: the series (dicom line), no delivery without destinations",
          rc == 0 and "dicom:" in out and "instances" in out and "delivery" not in out, out)
    rc, out, err = ctl(d, "push", jid)
    check("push of a job that names no destination: exit 2 (409)", rc == 2 and "409" in err,
          "rc %d out %r err %r" % (rc, out, err))
    rc, _, _ = ctl(d, "push", "not-an-id")
    check("push: exit 1 for a malformed id", rc == 1)

    c = Client(d.url)
    parts = c.get_dicom_multipart(jid)
    check("python get_dicom_multipart: the ZIP's instances, in order",
          [b for _, b in entries] == parts and len(parts) > 0, "%d parts, %d entries" % (len(parts), len(entries)))
    pz = os.path.join(tmp, "py.zip")
    n = c.get(jid, pz, fmt="dicom")
    check("python get(fmt='dicom'): the same ZIP", n == len(zbytes) and read(pz) == zbytes)
    check("python destinations()", [x["name"] for x in c.destinations()] == ["pacs-main", "dimse"])

    # A job that names both destinations: push answers at once (the sends
    # themselves go on in the background and fail against port 9).
    spec["output"] = {"push": ["pacs-main", "dimse"]}
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    rc, out, err = ctl(d, "submit", spec_path, "--projections", proj_path, "--watch")
    pjid = out.strip()
    check("job with output.push: succeeded", rc == 0 and "succeeded" in err and out.splitlines() == [pjid],
          "rc %d out %r err %s" % (rc, out, err))
    states = ("pending", "sending", "sent", "send_failed")
    rc, out, err = ctl(d, "status", pjid)
    lines = [ln for ln in out.splitlines() if ln.startswith("push:")]
    check("status: delivery and one push line per destination",
          rc == 0 and "delivery:" in out and len(lines) == 2 and "pacs-main" in lines[0] and "dimse" in lines[1]
          and all(any(s in ln for s in states) for ln in lines), out)
    rc, out, err = ctl(d, "push", pjid)
    lines = [ln for ln in out.splitlines() if ln.startswith("push:")]
    check("push: exit 0, prints delivery and each destination's state",
          rc == 0 and "delivery:" in out and len(lines) == 2 and "pacs-main" in lines[0] and "stow-rs" in lines[0]
          and "dimse" in lines[1] and "c-store" in lines[1], "rc %d out %r err %r" % (rc, out, err))
    rc, out, err = ctl(d, "--json", "push", pjid)
    j = json.loads(out) if rc == 0 else {}
    check("push --json: the job, with push entries and delivery",
          j.get("id") == pjid and [p["destination"] for p in j.get("push", [])] == ["pacs-main", "dimse"]
          and j.get("delivery") in ("sending", "sent", "send_failed"), out[:300])
    j = c.push(pjid)
    check("python push(): the job with its pushes", [p["destination"] for p in j["push"]] == ["pacs-main", "dimse"])
    d.stop()


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
    check("watch --json: events carry state, progress or preview",
          all(ln["event"] in ("state", "progress", "preview", "end") for ln in lines), str([ln["event"] for ln in lines]))

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
    check("a failed upload: the cause (422) is printed before what was done (removed)",
          "422" in err and "removed" in err and err.index("422") < err.index("removed"), err)
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

    stopped_early(d, tmp)

    # 5: cancelled.
    rc, out, _ = ctl(d, "submit", spec_path, "--projections", proj_path, "--no-start")
    cid = out.strip()
    rc, out, err = ctl(d, "delete", cid)
    check("delete of an unfinished job: exit 2 (409), says cancel first, job kept",
          rc == 2 and "409" in err and "cancel" in err and ctl(d, "status", cid)[0] == 0, "rc %d %s" % (rc, err))
    rc, out, _ = ctl(d, "cancel", cid)
    check("cancel of an unstarted job: exit 0, cancelled", rc == 0 and "cancelled" in out, out)
    rc, out, err = ctl(d, "watch", cid)
    check("watch of a cancelled job: exit 5", rc == 5, "rc %d" % rc)
    want = progress_words("cancelled", d.api().job(cid)["progress"])
    rc, out, err = ctl(d, "status", cid)
    check("status of a job cancelled before it ran: %r (iterations asked: 3)" % want,
          want == "cancelled, iteration 0 of 3, stopped: cancelled" and ("state:    %s\n" % want) in out, repr(out))
    rc, out, _ = ctl(d, "delete", cid)
    check("delete: exit 0", rc == 0 and ctl(d, "status", cid)[0] == 2)
    d.stop()

    # 4: failed (a worker that always crashes).
    d2 = Daemon(worker=fake_worker("crash")).start()
    rc, out, err = ctl(d2, "submit", spec_path, "--projections", proj_path, "--watch")
    check("submit --watch of a job whose worker crashes: exit 4, state on stderr, id alone on stdout",
          rc == 4 and "failed" in err and len(out.splitlines()) == 1 and "failed" not in out,
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
    api.request("POST", "/v1/jobs/%s/cancel" % sid)
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

    dicom_and_pacs(tmp)


if __name__ == "__main__":
    run_main(main)
