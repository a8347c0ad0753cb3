#!/usr/bin/env python3
"""Owners and patient fields (docs/server.md, "Owners and patient fields"),
against a daemon with a token file of two submitters, a reader without phi,
a reader with phi and an admin without phi:

- a job belongs to the token that created it (owner in the Job);
- a submitter cannot upload to, start, cancel, PATCH, DELETE or push
  another's job (403 forbidden naming the owner, nothing changed); the
  owner can, and admin can act on every job;
- a token without phi sees every job but no label and no dicom fields in
  the list, the job and the event stream (phi_redacted true), and no
  format=dicom download (403); a phi token and the owner see them, and the
  audit log gets a line naming the token and the job for each such read;
- a bare token without "Bearer " is 401 with a message saying how the
  header must read."""

import hashlib
import http.client
import json
import os
import subprocess
import urllib.parse

from recond_harness import (RECOND, Daemon, Validation, check, proj_bytes, require_binaries, run_main, small_spec,
                            tempdir)

TOKENS = {
    "ct-a": ("own-a-0123456789", "submit", False),
    "ct-b": ("own-b-0123456789", "submit", False),
    "viewer": ("own-r-0123456789", "read", False),
    "clinician": ("own-p-0123456789", "read", True),
    "ops": ("own-x-0123456789", "admin", False),
}
PATIENT = {"patient_id": "PID-4411", "patient_name": "Owner^Olga", "patient_birth_date": "19650412"}
LABEL = "Owner Olga head"


def write_tokens(path):
    doc = {"tokens": []}
    for name, (tok, role, phi) in TOKENS.items():
        t = {"name": name, "role": role, "sha256": hashlib.sha256(tok.encode()).hexdigest()}
        if phi:
            t["phi"] = True
        doc["tokens"].append(t)
    with open(path, "w") as f:
        json.dump(doc, f)


def first_state_event(url, jid, token):
    """The first "state" event of the job's stream (its data as JSON)."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
    try:
        c.request("GET", "/v1/jobs/%s/events" % jid,
                  headers={"Accept": "text/event-stream", "Authorization": "Bearer " + token})
        r = c.getresponse()
        if r.status != 200:
            return r.status, None
        name, data = "", ""
        while True:
            line = r.readline().decode().rstrip("\r\n")
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
            elif line == "" and name == "state":
                return 200, json.loads(data)
    finally:
        c.close()


def phi_shown(job):
    return job.get("label") == LABEL and job.get("dicom", {}).get("patient_name") == PATIENT["patient_name"]


def phi_hidden(job):
    return job.get("label") == "" and "dicom" not in job and job.get("phi_redacted") is True


def audit_lines(d):
    path = os.path.join(d.store, "audit.log")
    with open(path) as f:
        return f.read().splitlines()


def audited(d, name, jid, path_part):
    """Whether the audit log has a phi line of token name for job jid (written
    before the answer, so it is there once the answer came)."""
    return any("token=%s " % name in ln and "phi_jobs=" in ln and jid in ln.split("phi_jobs=")[1].split(",")
               and path_part in ln for ln in audit_lines(d))


def main():
    require_binaries()
    tmp = tempdir("recond-owners-")
    tokfile = os.path.join(tmp, "tokens.json")
    write_tokens(tokfile)
    d = Daemon(extra=["--token-file", tokfile]).start()
    api = d.api()
    A, B, R, P, X = (TOKENS[k][0] for k in ("ct-a", "ct-b", "viewer", "clinician", "ops"))
    spec = small_spec(label=LABEL)
    spec["dicom"] = dict(PATIENT)
    body = json.dumps(spec).encode()
    stack = b"\0" * proj_bytes(spec)

    st, _, raw, ja = api.post_json("/v1/jobs", body, token=A)
    check("ct-a creates a job -> 201 with owner ct-a and its own patient fields",
          st == 201 and ja["owner"] == "ct-a" and ja["label"] == LABEL and ja["phi_redacted"] is False,
          "%d %s" % (st, raw[:200]))
    jid = ja["id"]
    before = api.get("/v1/jobs/%s" % jid, token=X)[3]

    # Another submitter acts on ct-a's job: 403 naming the owner, nothing changed.
    for what, method, path, data in (
            ("uploads the stack", "PUT", "/v1/jobs/%s/projections" % jid, stack),
            ("uploads a view", "PUT", "/v1/jobs/%s/projections/0" % jid, stack[:ja["view_bytes"]]),
            ("uploads a flat field", "PUT", "/v1/jobs/%s/flat" % jid, stack[:ja["view_bytes"]]),
            ("uploads a bad-pixel map", "PUT", "/v1/jobs/%s/bad-pixels" % jid, stack[:ja["view_bytes"] // 4]),
            ("starts", "POST", "/v1/jobs/%s/start" % jid, b""),
            ("cancels", "POST", "/v1/jobs/%s/cancel" % jid, b""),
            ("patches the priority", "PATCH", "/v1/jobs/%s" % jid, b'{"priority": 9}'),
            ("patches with a body over the PATCH cap", "PATCH", "/v1/jobs/%s" % jid, b" " * 8192),
            ("deletes", "DELETE", "/v1/jobs/%s" % jid, None),
            ("pushes", "POST", "/v1/jobs/%s/push" % jid, b"")):
        hdrs = {"Content-Type": "application/json"} if method in ("POST", "PATCH") else None
        st, _, raw, doc = api.request(method, path, body=data, headers=hdrs, token=B)
        msg = (doc or {}).get("error", {}).get("message", "")
        check("ct-b %s ct-a's job -> 403 naming the owner" % what,
              st == 403 and doc["error"]["code"] == "forbidden" and '"ct-a"' in msg, "%d %s" % (st, raw[:200]))
    after = api.get("/v1/jobs/%s" % jid, token=X)[3]
    keep = ("state", "priority", "views_present", "cancel_requested")
    check("the refused requests changed nothing", all(before[k] == after[k] for k in keep),
          str([(k, before[k], after[k]) for k in keep if before[k] != after[k]]))

    # The owner acts on its job; admin acts on anyone's.
    st, _, raw, doc = api.request("PATCH", "/v1/jobs/%s" % jid, body=b'{"priority": 8}',
                                  headers={"Content-Type": "application/json"}, token=A)
    check("ct-a patches its own job -> 200", st == 200 and doc["priority"] == 8, "%d %s" % (st, raw[:200]))
    st, _, raw, doc = api.request("PATCH", "/v1/jobs/%s" % jid, body=b'{"priority": 2}',
                                  headers={"Content-Type": "application/json"}, token=X)
    check("admin patches ct-a's job -> 200, redacted (admin has no phi)",
          st == 200 and doc["priority"] == 2 and phi_hidden(doc), "%d %s" % (st, raw[:200]))
    st, _, raw, _ = api.put("/v1/jobs/%s/projections" % jid, stack, token=A)
    check("ct-a uploads to its own job -> 200", st == 200, "%d %s" % (st, raw[:200]))

    jb = api.post_json("/v1/jobs", body, token=B)[3]
    st, _, raw, _ = api.request("POST", "/v1/jobs/%s/cancel" % jb["id"], body=b"", token=X)
    check("admin cancels ct-b's job -> 200", st == 200, "%d %s" % (st, raw[:200]))
    st, _, raw, _ = api.request("DELETE", "/v1/jobs/%s" % jb["id"], token=X)
    check("admin deletes ct-b's cancelled job -> 204", st == 204, "%d %s" % (st, raw[:200]))

    # Patient fields: the list, the job and the event stream.
    for who, tok, shown in (("viewer (read, no phi)", R, False), ("ct-b (not the owner)", B, False),
                            ("ops (admin, no phi)", X, False), ("clinician (read, phi)", P, True),
                            ("ct-a (the owner)", A, True)):
        lst = api.get("/v1/jobs", token=tok)[3]
        row = [j for j in lst["jobs"] if j["id"] == jid]
        job = api.get("/v1/jobs/%s" % jid, token=tok)[3]
        est, ev = first_state_event(d.url, jid, tok)
        if shown:
            check("%s: list shows the label" % who, row and row[0]["label"] == LABEL and not row[0]["phi_redacted"])
            check("%s: the job shows label and dicom" % who, phi_shown(job), json.dumps(job)[:120])
            check("%s: the event stream shows the label" % who, est == 200 and ev and ev["label"] == LABEL,
                  "%s %s" % (est, ev and ev.get("label")))
        else:
            check("%s: list shows the job, without the label" % who,
                  row and row[0]["label"] == "" and row[0]["phi_redacted"] and row[0]["owner"] == "ct-a")
            check("%s: the job has no label and no dicom" % who, phi_hidden(job), json.dumps(job)[:120])
            check("%s: the event stream has no label" % who, est == 200 and ev and phi_hidden(ev),
                  "%s %s" % (est, ev and ev.get("label")))
    check("the audit log has the clinician's reads of the job (get, list, events)",
          audited(d, "clinician", jid, 'path="/v1/jobs/%s" ' % jid) and audited(d, "clinician", jid, 'path="/v1/jobs" ')
          and audited(d, "clinician", jid, "/events"), "\n".join(audit_lines(d)[-8:]))
    check("the audit log has no phi line of the viewer",
          not any("token=viewer " in ln and "phi_jobs=" in ln for ln in audit_lines(d)))

    # The job runs; the DICOM series (patient fields) needs phi or ownership.
    api.request("POST", "/v1/jobs/%s/start" % jid, body=b"", token=A)
    fin = d.api(token=R).wait_state(jid, ("succeeded", "failed", "cancelled"), timeout=60)
    if fin["state"] == "succeeded":
        st = api.get("/v1/jobs/%s/volume?format=dicom" % jid, token=R)[0]
        check("viewer downloads format=dicom -> 403", st == 403, str(st))
        st = api.get("/v1/jobs/%s/volume?format=raw" % jid, token=R)[0]
        check("viewer downloads format=raw -> 200", st == 200, str(st))
        st = api.get("/v1/jobs/%s/volume?format=dicom" % jid, token=P)[0]
        check("clinician downloads format=dicom -> 200, audited",
              st == 200 and audited(d, "clinician", jid, "/volume"), str(st))
    else:
        check("job finished", False, fin["state"])

    # A token without the Bearer scheme.
    st, h, raw, doc = api.request("GET", "/v1/jobs", headers={"Authorization": R}, token=None)
    check("a bare token -> 401 saying the header must read 'Authorization: Bearer TOKEN'",
          st == 401 and "Authorization: Bearer TOKEN" in doc["error"]["message"], "%d %s" % (st, raw[:200]))
    Validation.report()
    d.stop()

    # The token name "-" is reserved for loopback mode.
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        json.dump({"tokens": [{"name": "-", "role": "admin", "sha256": "0" * 64}]}, f)
    p = subprocess.run([RECOND, "--listen", "127.0.0.1:0", "--store", tempdir("recond-store-"), "--token-file", bad],
                       capture_output=True, text=True, timeout=30)
    check("a token named \"-\" is refused at start", p.returncode != 0 and "reserved" in p.stderr,
          p.stderr[-300:])

    # Without tokens: everything allowed, owner "-", patient fields shown.
    d = Daemon().start()
    api = d.api()
    j = api.post_json("/v1/jobs", body)[3]
    g = api.get("/v1/jobs/%s" % j["id"])[3]
    check("no tokens: owner \"-\" and the patient fields", g["owner"] == "-" and phi_shown(g), json.dumps(g)[:300])
    st = api.request("POST", "/v1/jobs/%s/cancel" % j["id"], body=b"")[0]
    check("no tokens: cancel -> 200", st == 200, str(st))
    # A list's audit: the ids shown with patient fields, 25 to a line.
    ids = {j["id"]} | {api.post_json("/v1/jobs", body)[3]["id"] for _ in range(29)}
    n_before = len(audit_lines(d))
    listed = {x["id"] for x in api.get("/v1/jobs?limit=1000")[3]["jobs"]}
    lines = [ln for ln in audit_lines(d)[n_before:] if 'path="/v1/jobs" phi_jobs=' in ln]
    got = [ln.split("phi_jobs=")[1].split(",") for ln in lines]
    check("no tokens: a list of 30 jobs is audited in 2 lines naming each job once",
          listed == ids and len(got) == 2 and sorted(len(g) for g in got) == [5, 25]
          and sorted(sum(got, [])) == sorted(ids), "%d lines %s" % (len(got), [len(g) for g in got]))
    d.stop()


if __name__ == "__main__":
    run_main(main)
