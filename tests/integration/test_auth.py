#!/usr/bin/env python3
"""Bearer tokens and roles (daemon started with --token-file): a missing,
wrong or malformed token is 401, a role below the route's is 403, both with
a JSON error and nothing stored; read < submit < admin; health endpoints need
no token; SIGHUP reloads the token file; reconctl and the Python module send
the token."""

import hashlib
import json
import os
import signal
import subprocess
import time

from recond_harness import (RECONCTL, Daemon, Validation, check, deadline, proj_bytes, require_binaries,
                            run_main, small_spec, store_files, tempdir)
from recond_client import Client, RecondError

TOKENS = {"reader": ("r-token-1234567890", "read"), "submitter": ("s-token-1234567890", "submit"),
          "admin": ("a-token-1234567890", "admin")}


def write_tokens(path, tokens):
    doc = {"tokens": [{"name": n, "role": role, "sha256": hashlib.sha256(tok.encode()).hexdigest()}
                      for n, (tok, role) in tokens.items()]}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def expect(api, name, want, method, path, body=None, token=None, code=None):
    st, h, data, doc = api.request(method, path, body=body, token=token,
                                   headers={"Content-Type": "application/json"} if method == "POST" else None)
    err = doc.get("error") if isinstance(doc, dict) else None
    ok = st == want
    if want >= 400:
        ok = ok and isinstance(err, dict) and bool(err.get("message")) and (code is None or err.get("code") == code)
    check("%s -> %d" % (name, want), ok, "got %d %s" % (st, data[:160]))
    return doc


def main():
    require_binaries()
    tmp = tempdir()
    tokfile = os.path.join(tmp, "tokens.json")
    write_tokens(tokfile, TOKENS)
    d = Daemon(extra=["--token-file", tokfile]).start()
    api = d.api()
    R, S, A = (TOKENS[k][0] for k in ("reader", "submitter", "admin"))
    spec = small_spec(label="auth")
    body = json.dumps(spec).encode()

    expect(api, "healthz without a token", 200, "GET", "/healthz")
    expect(api, "metrics without a token", 200, "GET", "/metrics")
    job = expect(api, "submitter creates a job", 201, "POST", "/v1/jobs", body, S)
    jid = job["id"]
    before = (api.request("GET", "/v1/jobs", token=R)[3]["jobs"], store_files(d.store))

    expect(api, "list without a token", 401, "GET", "/v1/jobs", code="unauthorized")
    expect(api, "create without a token", 401, "POST", "/v1/jobs", body, code="unauthorized")
    expect(api, "create with a wrong token", 401, "POST", "/v1/jobs", body, "not-a-token", code="unauthorized")
    st, _, _, doc = api.request("GET", "/v1/jobs", headers={"Authorization": "Basic " + R})
    check("Basic instead of Bearer -> 401", st == 401 and doc and doc["error"]["code"] == "unauthorized", str(st))
    st, _, _, doc = api.request("GET", "/v1/jobs", headers={"Authorization": "Bearer"})
    check("Bearer with no token -> 401", st == 401, str(st))
    expect(api, "token with a trailing character", 401, "GET", "/v1/jobs", token=R + "x")
    expect(api, "reader creates -> forbidden", 403, "POST", "/v1/jobs", body, R, code="forbidden")
    expect(api, "reader uploads -> forbidden", 403, "PUT", "/v1/jobs/%s/projections" % jid,
           b"\0" * proj_bytes(spec), R, code="forbidden")
    expect(api, "reader starts -> forbidden", 403, "POST", "/v1/jobs/%s/start" % jid, b"", R, code="forbidden")
    expect(api, "reader cancels -> forbidden", 403, "POST", "/v1/jobs/%s/cancel" % jid, b"", R, code="forbidden")
    expect(api, "reader deletes -> forbidden", 403, "DELETE", "/v1/jobs/%s" % jid, None, R, code="forbidden")
    expect(api, "no token upload", 401, "PUT", "/v1/jobs/%s/projections/0" % jid, b"\0" * job["view_bytes"])
    after = (api.request("GET", "/v1/jobs", token=R)[3]["jobs"], store_files(d.store))
    check("refused requests changed nothing stored", after == before)

    expect(api, "reader reads a job", 200, "GET", "/v1/jobs/%s" % jid, token=R)
    expect(api, "reader lists devices", 200, "GET", "/v1/devices", token=R)
    expect(api, "submitter uploads", 200, "PUT", "/v1/jobs/%s/projections" % jid, b"\0" * proj_bytes(spec), S)
    expect(api, "submitter starts", 202, "POST", "/v1/jobs/%s/start" % jid, b"", S)
    fin = None
    alive = deadline(60)
    while alive():
        fin = api.request("GET", "/v1/jobs/%s" % jid, token=R)[3]
        if fin["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.1)
    check("job finished", fin["state"] in ("succeeded", "failed"), fin["state"])
    if fin["state"] == "succeeded":
        expect(api, "reader downloads the volume", 200, "GET", "/v1/jobs/%s/volume" % jid, token=R)
    expect(api, "submitter deletes a finished job -> forbidden", 403, "DELETE", "/v1/jobs/%s" % jid, None, S,
           code="forbidden")
    expect(api, "admin deletes a finished job", 204, "DELETE", "/v1/jobs/%s" % jid, None, A)

    # Clients send the token.
    c = Client(d.url, token=R)
    check("python: list with a read token", isinstance(c.list()["jobs"], list))
    try:
        Client(d.url, token="wrong").list()
        check("python: wrong token raises 401", False)
    except RecondError as e:
        check("python: wrong token raises 401", e.status == 401 and e.code == "unauthorized", str(e))
    p = subprocess.run([RECONCTL, "--url", d.url, "--token", R, "list"], capture_output=True, timeout=30)
    check("reconctl --token: list exit 0", p.returncode == 0, p.stderr.decode())
    p = subprocess.run([RECONCTL, "--url", d.url, "list"], capture_output=True, timeout=30,
                       env=dict(os.environ, RECOND_TOKEN="wrong"))
    check("reconctl with a wrong $RECOND_TOKEN: exit 2", p.returncode == 2, p.stderr.decode())

    # SIGHUP reloads the token file.
    NEW = "n-token-0987654321"
    write_tokens(tokfile, {"newreader": (NEW, "read"), "admin": TOKENS["admin"]})
    os.kill(d.proc.pid, signal.SIGHUP)
    alive = deadline(10)
    while alive() and api.request("GET", "/v1/jobs", token=NEW)[0] != 200:
        time.sleep(0.1)
    check("after SIGHUP the new token works", api.request("GET", "/v1/jobs", token=NEW)[0] == 200)
    check("after SIGHUP the removed token is refused", api.request("GET", "/v1/jobs", token=R)[0] == 401)
    check("daemon survived SIGHUP", d.proc.poll() is None)

    # A reload never switches authentication off: an empty list, no list, a
    # misspelled key or a file that is not an object keep the previous tokens.
    bad_files = {"an empty list": '{"tokens": []}', "an empty object": "{}",
                 "a misspelled key": json.dumps({"tokenz": [{"name": "x", "role": "read",
                                                             "sha256": "0" * 64}]}),
                 "a list at the top": "[]", "tokens and an unknown key": '{"tokens": [], "x": 1}'}
    for what, text in bad_files.items():
        failed_before = d.read_log().count("tokens_reload_failed")
        with open(tokfile + ".tmp", "w") as f:
            f.write(text)
        os.replace(tokfile + ".tmp", tokfile)
        os.kill(d.proc.pid, signal.SIGHUP)
        alive = deadline(10)
        while alive() and d.read_log().count("tokens_reload_failed") == failed_before:
            time.sleep(0.05)
        check("reload of %s is refused and logged" % what,
              d.read_log().count("tokens_reload_failed") == failed_before + 1, d.read_log()[-400:])
        expect(api, "after reloading %s: anonymous list still 401" % what, 401, "GET", "/v1/jobs")
        expect(api, "after reloading %s: anonymous create still 401" % what, 401, "POST", "/v1/jobs", body)
        expect(api, "after reloading %s: the previous token still works" % what, 200, "GET", "/v1/jobs",
               token=NEW)
    Validation.report()
    d.stop()

    # Without tokens the daemon refuses a non-loopback address.
    p = subprocess.run([d.args()[0], "--listen", "0.0.0.0:0", "--store", tempdir("recond-store-")],
                       capture_output=True, timeout=20)
    msg = (p.stdout + p.stderr).decode()
    check("no tokens + 0.0.0.0: refuses to start and says why", p.returncode != 0 and "token" in msg.lower(),
          "exit %d: %s" % (p.returncode, msg[-300:]))


if __name__ == "__main__":
    run_main(main)
