#!/usr/bin/env python3
"""The access-control matrix: every operation of api/openapi.yaml, called
with no token, a wrong token and a token of each role (read, submit,
admin), against a daemon with a token file.

The documented rule (docs/server.md, "Configuration"): /healthz, /readyz,
/metrics and the operator page (/, /ui/app.js, /ui/app.css) need no token;
every other route needs one; GET (and HEAD) need read; POST, PUT and PATCH
need submit; DELETE of a finished job needs admin (of an unfinished one, which
answers 409 "cancel it first", submit).  Below the route's role: 403
forbidden; no token or an unknown one: 401 unauthorized with
`WWW-Authenticate: Bearer`.  At or above it: the route's own answer, which
must be one the operation documents (and not 401/403).  A submit token
acts on its own jobs only (test_owners.py covers that rule), so the job of
each call is created by the token under test where it may create one.  The
operations are
read from the OpenAPI file, so a new route is in the matrix the day it is
added; a method + path the rule does not cover fails the test.

Also: without tokens the daemon refuses a non-loopback listen address.
"""

import hashlib
import json
import os
import subprocess

import yaml

from recond_harness import (OPENAPI, RECOND, Daemon, check, proj_bytes, require_binaries, run_main, small_spec,
                            tempdir, view_bytes)

TOKENS = {"reader": ("matrix-read-0123456789", "read"), "submitter": ("matrix-submit-0123456789", "submit"),
          "admin": ("matrix-admin-0123456789", "admin")}
RANK = {None: 0, "read": 1, "submit": 2, "admin": 3}
PUBLIC = ("/healthz", "/readyz", "/metrics", "/", "/ui/app.js", "/ui/app.css")  # + the operator page


def needed_role(method, path, finished):
    if path in PUBLIC:
        return None
    if method in ("get", "head"):
        return "read"
    if method in ("post", "put", "patch"):
        return "submit"
    if method == "delete" and path == "/v1/jobs/{id}":
        return "admin" if finished else "submit"
    raise AssertionError("the access rule does not cover %s %s" % (method.upper(), path))


def main():
    require_binaries()
    doc = yaml.safe_load(open(OPENAPI))
    tmp = tempdir("recond-access-")
    tokfile = os.path.join(tmp, "tokens.json")
    with open(tokfile, "w") as f:
        json.dump({"tokens": [{"name": n, "role": r, "sha256": hashlib.sha256(t.encode()).hexdigest()}
                              for n, (t, r) in TOKENS.items()]}, f)
    d = Daemon(extra=["--token-file", tokfile]).start()
    api = d.api()
    admin = TOKENS["admin"][0]
    admin_api = d.api(token=admin)
    spec = small_spec(n=8, views=6, nu=8, nv=8, algorithm={"name": "fdk"}, label="access")

    def fresh_job(finished, tok):
        owner = tok if dict((t, r) for _, (t, r) in TOKENS.items()).get(tok) == "submit" else admin
        st, _, body, j = api.post_json("/v1/jobs", spec, token=owner)
        assert st == 201, body
        if finished:
            api.put("/v1/jobs/%s/projections" % j["id"], b"\0" * proj_bytes(spec), token=owner)
            api.request("POST", "/v1/jobs/%s/start" % j["id"], token=owner)
            j = admin_api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=60)
        return j

    creds = [("no token", None), ("a wrong token", "not-a-known-token-0123")] + \
            [("role " + r, t) for _, (t, r) in TOKENS.items()]
    calls = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method not in ("get", "put", "post", "patch", "delete", "head"):
                continue
            documented = set(int(s) for s in op.get("responses", {}) if s.isdigit())
            # a finished job where the route wants one (and where an open event
            # stream would wait for it); DELETE both ways
            variants = [False, True] if method == "delete" else \
                [path.endswith(("/volume", "/push", "/events", "/preview"))]
            for finished in variants:
                for cname, tok in creds:
                    job = fresh_job(finished, tok) if "{id}" in path else None
                    p = path.replace("{id}", job["id"] if job else "").replace("{k}", "0")
                    body, headers = None, {}
                    if method == "post" and path == "/v1/jobs":
                        body, headers = json.dumps(spec).encode(), {"Content-Type": "application/json"}
                    elif method == "put" and path.endswith("/projections"):
                        body = b"\0" * proj_bytes(spec)
                    elif method == "put":
                        body = b"\0" * view_bytes(spec)
                    elif method == "patch":
                        body, headers = b'{"priority": 3}', {"Content-Type": "application/json"}
                    if path.endswith("/events"):
                        headers["Accept"] = "text/event-stream"
                    if tok:
                        headers["Authorization"] = "Bearer " + tok
                    st, hdrs, data, _ = api.request(method.upper(), p + ("?format=raw" if path.endswith("/volume") else ""),
                                                    body=body, headers=headers, token=None, timeout=30)
                    calls += 1
                    need = needed_role(method, path, finished)
                    role = tok and dict((t, r) for _, (t, r) in TOKENS.items()).get(tok)
                    name = "%s %s%s with %s" % (method.upper(), path, " (finished job)" if finished and job else "", cname)
                    if need is None:
                        ok = st not in (401, 403) and st in documented
                        want = "its own answer, no token needed"
                    elif role is None:
                        ok = st == 401 and "bearer" in hdrs.get("www-authenticate", "").lower()
                        want = "401 with WWW-Authenticate: Bearer"
                    elif RANK[role] < RANK[need]:
                        ok = st == 403
                        want = "403 (needs %s)" % need
                    else:
                        ok = st not in (401, 403) and st in documented
                        want = "a documented answer (needs %s)" % need
                    check("%s -> %s" % (name, want), ok, "got %d %s" % (st, data[:120]))
    check("the matrix called every operation with 5 credentials (%d calls)" % calls, calls >= 5 * 10)

    # Without tokens, a non-loopback address is refused at start, with the reason.
    p = subprocess.run([RECOND, "--listen", "0.0.0.0:0", "--store", tempdir("recond-store-")],
                       capture_output=True, text=True, timeout=30)
    check("no tokens + 0.0.0.0: refuses to start and says why", p.returncode != 0 and "token" in p.stderr.lower(),
          "exit %d: %s" % (p.returncode, p.stderr.strip()[-200:]))
    d.stop()


if __name__ == "__main__":
    run_main(main)
