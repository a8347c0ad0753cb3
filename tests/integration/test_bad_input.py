#!/usr/bin/env python3
"""Every kind of bad input gets the right 4xx with a JSON error body
{"error": {"code", "message"}} and changes nothing stored: the job list and
every file of the store (but SQLite's own) are the same before and after."""

import copy
import json

from recond_harness import (Daemon, Validation, check, proj_bytes, require_binaries, run_main,
                            small_spec, store_files)

UNKNOWN = "0d6c9e4a-1111-4222-8333-444455556666"


def expect(api, name, want_status, want_code, method, path, body=None, headers=None, token=Ellipsis):
    st, h, data, doc = api.request(method, path, body=body, headers=headers, token=token)
    err = doc.get("error") if isinstance(doc, dict) else None
    ok = (st == want_status and isinstance(err, dict) and isinstance(err.get("message"), str)
          and err.get("message") and (want_code is None or err.get("code") == want_code)
          and "json" in h.get("content-type", ""))
    check("%s -> %d %s" % (name, want_status, want_code or ""), ok,
          "got %d %s" % (st, data[:200].decode("utf-8", "replace")))
    return doc


def spec_with(path, value, base=None):
    s = copy.deepcopy(base or small_spec())
    node = s
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return json.dumps(s).encode()


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    base = small_spec()

    # Fixtures made before the snapshot: a created job and a finished one.
    open_job = api.create(base)
    fin = api.create(dict(base, label="finished"))
    st, _, body, _ = api.put("/v1/jobs/%s/projections" % fin["id"], b"\0" * proj_bytes(base))
    api.post_json("/v1/jobs/%s/start" % fin["id"], b"")
    fin = api.wait_state(fin["id"], ("succeeded", "failed"), timeout=60)
    check("fixture: a finished job", fin["state"] in ("succeeded", "failed"), fin["state"])
    have_volume = fin["state"] == "succeeded"
    before_jobs = api.job_ids()
    before_files = store_files(d.store)

    J = {"Content-Type": "application/json"}
    post = lambda name, body, st=400, code="invalid_json": expect(api, name, st, code, "POST", "/v1/jobs", body, J)

    # Malformed JSON and bodies that are not a spec.
    post("malformed JSON", b'{"label": "x",')
    post("empty body", b"")
    post("JSON array instead of object", b"[]")
    post("JSON string", b'"job"')
    post("duplicate keys", b'{"label":"a","label":"b"}')
    dup = json.dumps(base)[:-1] + ', "volume": {"nx": 4, "ny": 4, "nz": 4, "voxel_mm": 1}}'
    post("duplicate key volume (spec otherwise valid)", dup.encode())
    post("NaN literal", spec_with("volume.voxel_mm", 1.0).replace(b"1.0", b"NaN", 1))
    post("Infinity literal", spec_with("geometry.source_isocenter_mm", 1.0).replace(b"1.0", b"Infinity", 1))
    post("number beyond double range (1e999)", spec_with("geometry.source_isocenter_mm", 1.0)
         .replace(b"1.0", b"1e999", 1), 400, None)
    post("invalid UTF-8", b'{"label": "\xff\xfe"}')

    # Well-formed JSON, wrong content: 400 invalid_argument, field named.
    bad = [
        ("nx is a string", "volume.nx", "32"),
        ("nx is fractional", "volume.nx", 3.5),
        ("nx is negative", "volume.nx", -4),
        ("nx is zero", "volume.nx", 0),
        ("nx is huge", "volume.nx", 10 ** 12),
        ("voxel negative", "volume.voxel_mm", [-1.0, 1.0, 1.0]),
        ("voxel array of 2", "volume.voxel_mm", [1.0, 1.0]),
        ("voxel is null", "volume.voxel_mm", None),
        ("source distance negative", "geometry.source_isocenter_mm", -5.0),
        ("source distance zero", "geometry.source_isocenter_mm", 0),
        ("source distance huge", "geometry.source_isocenter_mm", 1e300),
        ("detector inside the volume", "geometry.source_detector_mm", 1.0),
        ("angle count zero", "geometry.angles.count", 0),
        ("angle count is a bool", "geometry.angles.count", True),
        ("angle count huge", "geometry.angles.count", 10 ** 9),
        ("angles object missing", "geometry.angles", KeyError),
        ("detector nu a string", "geometry.detector.nu", "48"),
        ("detector du negative", "geometry.detector.du_mm", -1.0),
        ("unknown geometry type", "geometry.type", "helix"),
        ("unknown algorithm", "algorithm.name", "magic"),
        ("algorithm name is a number", "algorithm.name", 3),
        ("iterations zero", "algorithm.iterations", 0),
        ("iterations negative", "algorithm.iterations", -3),
        ("iterations huge", "algorithm.iterations", 10 ** 9),
        ("relaxation NaN-ish string", "algorithm.relaxation", "nan"),
        ("relaxation > 2", "algorithm.relaxation", 5.0),
        ("tv a number", "algorithm.tv", 0.1),
        ("tv weight negative", "algorithm.tv", {"weight": -0.5}),
        ("tv weight huge", "algorithm.tv", {"weight": 1e9}),
        ("tv steps zero", "algorithm.tv", {"steps": 0}),
        ("tv unknown key", "algorithm.tv", {"weight": 0.1, "mu": 2}),
        ("stop tolerance 1", "algorithm.stop", {"tolerance": 1.0}),
        ("stop discrepancy a string", "algorithm.stop", {"discrepancy": "1"}),
        ("stop noise negative", "algorithm.stop", {"noise_sigma": -1}),
        ("stop a list", "algorithm.stop", [1]),
        ("projector unknown", "algorithm.projector", "joseph"),
        ("projector a number", "algorithm.projector", 2),
        ("projector splat where voxels project 1.3+ pixels apart", "algorithm.projector", "splat"),
        ("unknown engine", "execution.engine", "quantum"),
        ("priority a string", "priority", "high"),
        ("priority 99", "priority", 99),
        ("autostart a string", "autostart", "yes"),
        ("label a number", "label", 5),
        ("label too long", "label", "x" * 10000),
        ("volume missing", "volume", KeyError),
        ("algorithm missing", "algorithm", KeyError),
        ("unknown top-level key", "colour", "blue"),
        ("unknown nested key", "volume.depth", 3),
    ]
    for name, path, value in bad:
        doc = post(name, spec_with(path, value, base), 400, None)
        code = doc and doc.get("error", {}).get("code")
        check("  %s: code invalid_argument or too_big" % name, code in ("invalid_argument", "too_big"), str(code))
    doc = post("unknown algorithm names the field", spec_with("algorithm.name", "magic", base), 400, "invalid_argument")
    check("  error.field is algorithm.name", doc and doc["error"].get("field") == "algorithm.name",
          str(doc and doc["error"].get("field")))
    # geometry.detector.shape: fan and cone (flat by default, or curved); not parallel.
    fan = copy.deepcopy(base)
    fan["geometry"] = {"type": "fan", "source_isocenter_mm": 200.0, "source_detector_mm": 400.0,
                       "angles": {"start_deg": 0.0, "step_deg": 15.0, "count": 24},
                       "detector": {"nu": 24, "du_mm": 3.0, "shape": "curved"}}
    par = copy.deepcopy(base)
    par["geometry"] = {"type": "parallel", "angles": {"start_deg": 0.0, "step_deg": 15.0, "count": 12},
                       "detector": {"nu": 24, "du_mm": 1.0, "shape": "flat"}}
    for name, path, value, b, field in (
            ("shape on parallel", "geometry.detector.shape", "flat", par, "geometry.detector.shape"),
            ("unknown shape", "geometry.detector.shape", "round", fan, "geometry.detector.shape"),
            ("shape a number", "geometry.detector.shape", 1, fan, "geometry.detector.shape"),
            ("curved fan wider than 80 degrees", "geometry.detector.nu", 800, fan, "geometry.detector")):
        doc = post(name, spec_with(path, value, b), 400, "invalid_argument")
        err = (doc or {}).get("error", {})
        check("  error.field is %s" % field, err.get("field") == field, str(err.get("field")))
        if name == "shape on parallel":
            check("  the message says shape is the fan's and cone's", "fan" in err.get("message", "")
                  and "cone" in err.get("message", ""), err.get("message"))
        if name == "unknown shape":
            check("  the message lists the choices", "flat" in err.get("message", "")
                  and "curved" in err.get("message", ""), err.get("message"))
    # A curved fan runs on every engine a flat one runs on (no 422 for its shape on opencl, cuda or
    # trigeneous): test_curved_fan.py runs it on opencl and trigeneous.
    huge = dict(base, volume={"nx": 8192, "ny": 8192, "nz": 8192, "voxel_mm": [0.01, 0.01, 0.01]})
    post("volume of 2 TiB (over the memory cap): a validation error", json.dumps(huge).encode(), 400, "too_big")
    post("body of 20 MB", b'{"label": "' + b"x" * (20 << 20) + b'"}', 413, "body_too_large")

    # Uploads: length checked before anything is stored.
    pid = "/v1/jobs/%s/projections" % open_job["id"]
    nb = proj_bytes(base)
    vb = open_job["view_bytes"]
    expect(api, "stack upload one float short", 422, "wrong_length", "PUT", pid, b"\0" * (nb - 4))
    expect(api, "stack upload one float long", 413, "body_too_large", "PUT", pid, b"\0" * (nb + 4))
    expect(api, "stack upload empty", 422, "wrong_length", "PUT", pid, b"")
    expect(api, "view upload short", 422, "wrong_length", "PUT", pid + "/0", b"\0" * (vb - 1))
    expect(api, "view upload long", 413, "body_too_large", "PUT", pid + "/0", b"\0" * (vb + 4))
    # Exactly twice the bytes: float64 data, the likeliest mistake; the 413 says so (and only then).
    for name, path, n in (("stack", pid, nb), ("view", pid + "/0", vb)):
        doc = expect(api, "%s upload of float64 (twice the bytes)" % name, 413, "body_too_large", "PUT", path,
                     b"\0" * (2 * n))
        msg = (doc or {}).get("error", {}).get("message", "")
        check("  %s: the 413 says float64? recond takes float32" % name,
              "float64" in msg and "float32" in msg and "twice" in msg, msg)
    doc = expect(api, "stack upload one float long (again)", 413, "body_too_large", "PUT", pid, b"\0" * (nb + 4))
    check("  a length that is not twice: no float64 hint", "float64" not in (doc or {}).get("error", {}).get(
        "message", ""), str(doc))
    expect(api, "view index = views_expected", 400, "invalid_argument", "PUT", pid + "/24", b"\0" * vb)
    expect(api, "view index negative", 400, "invalid_argument", "PUT", pid + "/-1", b"\0" * vb)
    expect(api, "view index not a number", 400, "invalid_argument", "PUT", pid + "/abc", b"\0" * vb)
    expect(api, "view index huge", 400, "invalid_argument", "PUT", pid + "/99999999999999999999", b"\0" * vb)

    # One fault, one answer (server/http/http_error.c): more bytes than allowed is the same status and
    # code on every route, whether the length was declared or counted as the bytes arrived.
    def chunked(n, piece=1 << 20):
        yield b'{"label": "'
        for _ in range(n // piece):
            yield b"x" * piece
        yield b'"}'
    over = [("spec body with Content-Length over the cap", "POST", "/v1/jobs",
             b'{"label": "' + b"x" * (20 << 20) + b'"}', J),
            ("spec body chunked, over the cap as it arrives", "POST", "/v1/jobs", chunked(20 << 20), J),
            ("whole stack longer than the spec", "PUT", pid, b"\0" * (nb + 4), None),
            ("one view longer than the spec", "PUT", pid + "/0", b"\0" * (vb + 4), None)]
    answers = []
    for name, method, path, body, hdrs in over:
        doc = expect(api, "too many bytes: " + name, 413, "body_too_large", method, path, body, hdrs)
        answers.append((method, doc and doc.get("error", {}).get("code")))
    check("too many bytes: the same status and code on POST /v1/jobs and both uploads",
          len({code for _, code in answers}) == 1 and {m for m, _ in answers} == {"POST", "PUT"}, str(answers))

    fp = "/v1/jobs/%s/projections" % fin["id"]
    expect(api, "upload to a finished job", 409, "conflict", "PUT", fp, b"\0" * nb)
    expect(api, "view upload to a finished job", 409, "conflict", "PUT", fp + "/0", b"\0" * vb)
    expect(api, "start with no views", 409, "conflict", "POST", "/v1/jobs/%s/start" % open_job["id"], b"")
    expect(api, "volume of an unfinished job", 409, "conflict", "GET", "/v1/jobs/%s/volume" % open_job["id"])
    if have_volume:  # (no engine in this build: the fixture failed, it has no volume)
        expect(api, "volume in an unknown format", 400, "invalid_argument", "GET",
               "/v1/jobs/%s/volume?format=png" % fin["id"])
        expect(api, "range beyond the end", 416, "range_not_satisfiable", "GET", "/v1/jobs/%s/volume" % fin["id"],
               headers={"Range": "bytes=%d-" % (10 ** 9)})

    # Ids.
    for name, jid in (("not a UUID", "abc"), ("UUID with a trailing char", UNKNOWN + "0"),
                      ("upper-case UUID", UNKNOWN.upper()), ("path traversal", "..%2F..%2Fetc%2Fpasswd"),
                      ("UUID with braces", "{" + UNKNOWN + "}")):
        expect(api, "GET job: %s" % name, 400, "invalid_id", "GET", "/v1/jobs/" + jid)
        expect(api, "PUT view: %s" % name, 400, "invalid_id", "PUT", "/v1/jobs/%s/projections/0" % jid, b"\0" * vb)
    for method, path, body in (("GET", "", None), ("DELETE", "", None), ("POST", "/start", b""),
                               ("POST", "/cancel", b""),
                               ("PUT", "/projections", b"\0" * nb), ("PUT", "/projections/0", b"\0" * vb),
                               ("GET", "/events", None), ("GET", "/volume", None)):
        expect(api, "%s unknown job%s" % (method, path), 404, "not_found", method, "/v1/jobs/" + UNKNOWN + path, body)
    expect(api, "unknown path", 404, None, "GET", "/v1/nothing")
    expect(api, "method not allowed", 405, "method_not_allowed", "PATCH", "/v1/jobs", b"{}", J)

    after_jobs = api.job_ids()
    after_files = store_files(d.store)
    check("job list unchanged by every bad request", after_jobs == before_jobs,
          "before %s after %s" % (before_jobs, after_jobs))
    check("store files unchanged by every bad request", after_files == before_files,
          "added %s removed %s changed %s" % (sorted(set(after_files) - set(before_files)),
                                               sorted(set(before_files) - set(after_files)),
                                               sorted(k for k in after_files if k in before_files
                                                      and after_files[k] != before_files[k])))
    j = api.job(open_job["id"])
    check("open job still created with 0 views", j["state"] == "created" and j["views_present"] == 0,
          "%s %s" % (j["state"], j["views_present"]))
    Validation.report()
    d.stop()

    # A job larger than the store's free space is the client's to resize: 400
    # too_big naming the free space at creation, nothing stored (507 is kept
    # for a disk that fills after creation; test_iofault).  The daemon's byte
    # cap is raised to 1 PiB and its memory budget to ~1 EiB so that only the
    # disk can refuse it.
    huge = small_spec()
    huge["volume"].update(nx=16384, ny=16384, nz=16384)
    huge["volume"]["voxel_mm"] = [0.002, 0.002, 0.002]
    # With the machine's memory budget (no --memory-limit) the same volume
    # as a ray-cast SIRT job, which has no out-of-core plan (docs/server.md
    # "Out of core": ray casting does not add up over slabs; with a
    # voxel-driven pair it would be planned out of core and meet the disk's
    # check), is refused first for its memory (docs/server.md "Memory"):
    # 422 unsupported, field volume, naming the bytes needed and the budget.
    d = Daemon(extra=["--max-job-bytes", str(1 << 50)]).start()
    api = d.api()
    huge_raycast = dict(huge, algorithm={"name": "sirt", "iterations": 3, "projector": "raycast"})
    doc = expect(api, "a job larger than the machine's memory", 422, "unsupported", "POST", "/v1/jobs",
                 json.dumps(huge_raycast).encode(), J)
    err = (doc or {}).get("error") or {}
    msg = err.get("message", "")
    check("the memory refusal names the field volume, the bytes needed and the budget",
          err.get("field") == "volume" and "needs about" in msg and "a job may take" in msg
          and "the machine's memory" in msg, msg)
    check("nothing stored for it", api.job_ids() == [] and store_files(d.store) == {}, str(store_files(d.store)))
    d.stop()
    d = Daemon(extra=["--max-job-bytes", str(1 << 50), "--memory-limit", "1000000T"]).start()
    api = d.api()
    doc = expect(api, "a job larger than the store's free space", 400, "too_big", "POST", "/v1/jobs",
                 json.dumps(huge).encode(), J)
    msg = ((doc or {}).get("error") or {}).get("message", "")
    check("the refusal names the bytes needed and the bytes free", "17592186" in msg and "free" in msg, msg)
    check("nothing stored for it", api.job_ids() == [] and store_files(d.store) == {}, str(store_files(d.store)))
    d.stop()


if __name__ == "__main__":
    run_main(main)
