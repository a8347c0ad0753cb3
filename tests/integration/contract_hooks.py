"""Schemathesis hooks of the contract test (tests/integration/test_contract.py);
loaded by schemathesis from the test's venv (SCHEMATHESIS_HOOKS=contract_hooks),
never run by scripts/run-tests.sh itself.

The documented exceptions (docs/api.md, "Contract tests").  JSON Schema states
each field's type and range; these rules tie several fields, or a request to
the job it names, together, so no schema can state them.  A schema-valid
request that breaks one is refused (400 with `field` naming the part at fault,
or 422 unsupported), and schemathesis' positive_data_acceptance check would
count that as a failure.  So before a *positive* case is sent, before_call
applies the rules to it (negative cases go out as generated, and every check
still judges the answer):

  createJob
    too_big      projections + volume fit the daemon's --max-job-bytes: the
                 cap is the operator's, not the schema's (sizes are halved)
    geometry     the source outside the volume, the detector beyond it and
                 seeing it, a projection not singular in doubles, a curved
                 fan within 80 degrees of its central ray (rc_geom_new):
                 relations of distances, volume size, voxel size, centre,
                 pixel sizes and counts (centre and offsets become 0, the
                 distances grow past the volume, pixels far too small or
                 large for their distance, or a curved fan wider than
                 1 rad each side, become S / count)
    helix        the pitch within the detector's window and the volume within
                 the covered z range (rc_geom_new): relations of the pitch,
                 angles, z_start, detector and volume: pitch_mm and z_start_mm
                 become 0 (the circular cone), the rest is fitted as a cone's
    matrices     a 3x4 matrix sees the volume only by chance: each is
                 replaced by the cone matrix of its view
    rtk          a generated string is no RTK geometry file: the geometry is
                 fitted as the circular cone of its stack and views and
                 written back as RTK's XML (origin centred)
    subsets      algorithm.subsets <= the number of views
    memory       the worker's predicted peak fits the machine's budget (422
                 unsupported, field volume; core/plan/memory.h): an iterative
                 fan/parallel job on auto, cpu or tensor builds a system
                 matrix of up to views x nx x ny x nu non-zeros, whatever the
                 bytes stored; nx and ny are halved until that bound at 31
                 bytes each is under 8 GiB
    slices       fan/parallel geometry.slices == volume.nz
    unsupported  what the engines run (422, rc_recon_check): fan/parallel
                 run every algorithm (fdk as FBP) on every engine (flat
                 or curved fan), only with projector auto; tensor runs
                 fan/parallel only; a cone with a curved (cylindrical)
                 detector runs on auto and cpu only, a helix too; opencl and cuda need such a device on
                 the daemon (GET /v1/devices, read once): else cpu
    stream       execution.stream true only where FDK streams (fdk on cone or
                 matrices or helix, not the tensor engine): else it is dropped
    ranks        execution.ranks > 1 only where the daemon runs MPI jobs
                 (--mpi-max-ranks; the test's daemon runs none, 422): becomes 1
    splat        projector splat only where voxels project at most a pixel
                 apart (a ratio of voxel size, pixel size and distances):
                 becomes raycast
    footprint    projector footprint only on the CPU engine (auto, cpu) (422):
                 becomes raycast
    push         output.push names only destinations the operator
                 configured (none here): becomes []
    birth date   dicom.patient_birth_date is a calendar date (no 31 April)
  putProjections, putView
    length       the body is exactly the job's projection_bytes / view_bytes
                 long, and k < its views_expected: both are the job's, not
                 the schema's (the hook asks the daemon, then sends zeros)
  getVolume      416 for a Range past the end of this job's volume is in the
                 positive_data_acceptance statuses (tests/integration/contract.toml)
  getPreview     index < the job's nx, ny or nz along axis (the job's size)

Timing, not a rule: before any getVolume or getPreview the hook waits (at most 5 s) for a
queued or running job to end, as a client would; otherwise whether a scenario
downloads a volume or gets 409 would depend on how fast the worker is.

Test budget only (not contract rules): a positive job runs at most 2
iterations of at most 2 TV steps on at most 2 threads.

Also here: event_data_conformance, a check of its own: every event of
GET /v1/jobs/{id}/events carries JSON of the schema its name says (state: Job,
progress: Progress, preview: PreviewEvent, deleted: {}); the OpenAPI schema of an event can only say
that `data` is a string.  And after_call counts the requests per operation
and status into $RECOND_CONTRACT_COUNTS for the test to print.
"""

import atexit
import json
import math
import os
import threading
import time

import requests
import schemathesis

URL = os.environ.get("RECOND_CONTRACT_URL", "")
MAX_JOB_BYTES = int(os.environ.get("RECOND_CONTRACT_MAX_JOB_BYTES", "4194304"))
OPENAPI = os.environ.get("RECOND_CONTRACT_OPENAPI", "")
COUNTS = os.environ.get("RECOND_CONTRACT_COUNTS", "")

_counts = {}
_lock = threading.Lock()


def _positive(case):
    meta = getattr(case, "meta", None)
    try:
        return meta is not None and meta.generation.mode.is_positive
    except AttributeError:
        return False


LABELS = {"POST /v1/jobs": "createJob", "PUT /v1/jobs/{id}/projections": "putProjections",
          "PUT /v1/jobs/{id}/projections/{k}": "putView", "GET /v1/jobs/{id}/events": "jobEvents",
          "GET /v1/jobs/{id}/volume": "getVolume", "GET /v1/jobs/{id}/preview": "getPreview"}


def _op(case):
    return LABELS.get(case.operation.label)


# -- createJob: the cross-field rules ---------------------------------------------------------

def _views(g):
    if g["type"] == "matrices":
        return len(g["matrices"])
    if "angles" in g:
        return g["angles"]["count"]
    return len(g["angles_deg"])


def _set_views(g, n):
    if g["type"] == "matrices":
        del g["matrices"][n:]
    elif "angles" in g:
        g["angles"]["count"] = n
    else:
        del g["angles_deg"][n:]


def _voxels(v):
    vm = v["voxel_mm"]
    return list(vm) if isinstance(vm, list) else [vm] * 3


def _fit_sizes(spec):
    """Halves the largest size until projections + volume fit MAX_JOB_BYTES (check_sizes)."""
    g, v = spec["geometry"], spec["volume"]
    d = g["detector"]
    is2d = g["type"] in ("fan", "parallel")

    def total():
        rows = v["nz"] if is2d else d.get("nv", 1)
        return 4 * (v["nx"] * v["ny"] * v["nz"] + _views(g) * d["nu"] * rows)

    while total() > MAX_JOB_BYTES:
        sizes = [(v["nx"], "nx"), (v["ny"], "ny"), (v["nz"], "nz"), (d["nu"], "nu"), (_views(g), "views")]
        if not is2d:
            sizes.append((d["nv"], "nv"))
        n, what = max(sizes)
        if what == "views":
            _set_views(g, max(1, n // 2))
        elif what in ("nu", "nv"):
            d[what] = max(1, n // 2)
        else:
            v[what] = max(1, n // 2)


def _cone_matrix(k, n, sid, sdd, nu, nv):
    """Row-major 3x4 of view k of n of a circular cone geometry, 1 mm pixels (docs/api.md)."""
    t = 2 * math.pi * k / n
    c, s = math.cos(t), math.sin(t)
    src = (sid * c, sid * s, 0.0)
    nvec = (-c, -s, 0.0)          # towards the detector
    eu, ev = (-s, c, 0.0), (0.0, 0.0, 1.0)
    cu, cv = (nu - 1) / 2.0, (nv - 1) / 2.0
    rows = [[sdd * eu[i] + cu * nvec[i] for i in range(3)],
            [sdd * ev[i] + cv * nvec[i] for i in range(3)],
            list(nvec)]
    out = []
    for r in rows:
        out += r + [-sum(r[i] * src[i] for i in range(3))]
    return out


def _fit_geometry(spec):
    g, v = spec["geometry"], spec["volume"]
    d = g["detector"]
    if "center_mm" in v:
        v["center_mm"] = [0.0, 0.0, 0.0]
    for key in ("offset_u_mm", "offset_v_mm"):
        if key in d:
            d[key] = 0.0
    vox = _voxels(v)
    half = [v["nx"] * vox[0] / 2, v["ny"] * vox[1] / 2, v["nz"] * vox[2] / 2]
    r = math.sqrt(sum(h * h for h in half))
    if r > 1e5:  # keep the distances below their maximum of 1e6 mm
        f = r / 1e5
        v["voxel_mm"] = [max(x / f, 1e-6) for x in vox] if isinstance(v["voxel_mm"], list) \
            else max(v["voxel_mm"] / f, 1e-6)
        vox = _voxels(v)
        half = [v["nx"] * vox[0] / 2, v["ny"] * vox[1] / 2, v["nz"] * vox[2] / 2]
        r = math.sqrt(sum(h * h for h in half))
    rxy = math.hypot(half[0], half[1])
    if g["type"] == "helix":
        g["pitch_mm"] = 0.0
        if "z_start_mm" in g:
            g["z_start_mm"] = 0.0
    if g["type"] in ("cone", "helix", "fan"):
        if g["source_isocenter_mm"] <= 1.01 * rxy:
            g["source_isocenter_mm"] = 1.5 * rxy + 1
        if g["source_detector_mm"] <= g["source_isocenter_mm"] + 1.01 * rxy:
            g["source_detector_mm"] = g["source_isocenter_mm"] + 1.5 * rxy + 1
        _fit_pixels(g)
    elif g["type"] == "matrices":
        # 1 mm pixels; a detector distance of at least its width keeps the left 3x3 block
        # well conditioned (its determinant is sdd^2, invert3's bar 1e-12 * (sum |m|)^3)
        sid = 1.5 * r + 1
        sdd = sid + 1.5 * r + 1 + max(d["nu"], d["nv"])
        n = len(g["matrices"])
        g["matrices"] = [_cone_matrix(k, n, sid, sdd, d["nu"], d["nv"]) for k in range(n)]


def _fit_pixels(g):
    """cone/fan, offsets 0: pixels neither vanishing nor huge next to the distance (rc_geom_new refuses a
    projection that is singular in doubles).  Keeps them when the pixel scales a = S/du, b = S/dv are in
    [1, 1e6], within 1e3 of each other and at least the centre pixel index; that bounds the relative
    determinant well above rc_geom_new's 1e-12.  Else du = dv = S / (the larger pixel count)."""
    d, S = g["detector"], g["source_detector_mm"]
    cone = g["type"] in ("cone", "helix")
    a = S / d["du_mm"]
    b = S / d["dv_mm"] if cone else a
    cu, cv = (d["nu"] - 1) / 2.0, ((d["nv"] - 1) / 2.0 if cone else 0.0)
    # a curved fan's edges must stay within 80 degrees of the central ray: keep it within 1 rad
    narrow = d.get("shape") != "curved" or d["nu"] * d["du_mm"] / 2 <= S
    if 1 <= a <= 1e6 and 1 <= b <= 1e6 and max(a, b) <= 1e3 * min(a, b) and cu <= a and cv <= b and narrow:
        return
    px = max(S / max(d["nu"], d.get("nv", 1)), 1e-6)
    d["du_mm"] = px
    if cone:
        d["dv_mm"] = px


def _rtk_as_cone(g):
    """A `rtk` geometry's stand-in for the fitting: a circular cone of its stack and view count."""
    d, n = g["detector"], g.get("views", 4)
    return {"type": "cone", "source_isocenter_mm": 1000.0, "source_detector_mm": 1500.0,
            "angles": {"start_deg": 0.0, "step_deg": 360.0 / n, "count": n},
            "detector": {"nu": d["nu"], "nv": d["nv"], "du_mm": d["du_mm"], "dv_mm": d["dv_mm"]}}


def _cone_as_rtk(c, g):
    """The fitted cone back as RTK's XML (the writer's layout, no matrices) in the rtk geometry g."""
    d, a = c["detector"], c["angles"]
    views = "".join("<Projection><GantryAngle>%r</GantryAngle></Projection>" % (a["start_deg"] + k * a["step_deg"])
                    for k in range(a["count"]))
    g["xml"] = ('<?xml version="1.0"?>\n<!DOCTYPE RTKGEOMETRY>\n<RTKThreeDCircularGeometry version="3">'
                "<SourceToIsocenterDistance>%r</SourceToIsocenterDistance>"
                "<SourceToDetectorDistance>%r</SourceToDetectorDistance>%s</RTKThreeDCircularGeometry>\n"
                % (c["source_isocenter_mm"], c["source_detector_mm"], views))
    g["detector"] = {"nu": d["nu"], "nv": d["nv"], "du_mm": d["du_mm"], "dv_mm": d["dv_mm"],
                     "origin_u_mm": -(d["nu"] - 1) / 2.0 * d["du_mm"], "origin_v_mm": -(d["nv"] - 1) / 2.0 * d["dv_mm"]}
    if "views" in g:
        g["views"] = a["count"]


_offered = []


def _device_engines():
    """The device engines (opencl, cuda) the daemon's GET /v1/devices lists, read once."""
    if not _offered:
        r = requests.get("%s/v1/devices" % URL, timeout=10)
        _offered.append({d.get("engine") for d in r.json().get("devices", [])})
    return _offered[0]


def _fit_algorithm(spec):
    g, a = spec["geometry"], spec["algorithm"]
    ex = spec.get("execution", {})
    is2d = g["type"] in ("fan", "parallel")
    if "projector" in a and (is2d or a["projector"] == "splat"):
        a["projector"] = "auto" if is2d else "raycast"
    eng = ex.get("engine")
    if not is2d and eng == "tensor":
        ex["engine"] = "cpu"
    if ex.get("engine") in ("opencl", "cuda") and ex["engine"] not in _device_engines():
        ex["engine"] = "cpu"
    # a cone with a curved (cylindrical) detector runs on the CPU engine only
    if g["type"] == "cone" and g["detector"].get("shape") == "curved" and ex.get("engine") not in (None, "auto", "cpu"):
        ex["engine"] = "cpu"
    # a helix runs on the CPU engine only (its fdk streams)
    if g["type"] == "helix" and ex.get("engine") not in (None, "auto", "cpu"):
        ex["engine"] = "cpu"
    if ex.get("stream") and (a["name"] != "fdk" or is2d or ex.get("engine") == "tensor"):
        del ex["stream"]
    # execution.ranks > 1 is the operator's to allow (--mpi-max-ranks; none here)
    if ex.get("ranks", 1) > 1:
        ex["ranks"] = 1
    # the footprint pair: the CPU engine, flat or curved detector (422 elsewhere)
    if a.get("projector") == "footprint" and ex.get("engine") not in (None, "auto", "cpu"):
        a["projector"] = "raycast"
    if "subsets" in a:
        a["subsets"] = min(a["subsets"], _views(g))
    if "slices" in g:
        g["slices"] = spec["volume"]["nz"]
    # test budget
    if a["name"] != "fdk":
        a["iterations"] = min(a.get("iterations", 2), 2)
    if "steps" in a.get("tv", {}):
        a["tv"]["steps"] = min(a["tv"]["steps"], 2)
    if ex.get("threads", 0) > 2:
        ex["threads"] = 2


def _fit_output(spec):
    if "push" in spec.get("output", {}):
        spec["output"]["push"] = []
    dob = spec.get("dicom", {}).get("patient_birth_date")
    if dob:
        y, m, dd = int(dob[:4]), int(dob[4:6]), int(dob[6:])
        leap = (y % 4 == 0 and y % 100 != 0) or y % 400 == 0
        days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]
        spec["dicom"]["patient_birth_date"] = "%04d%02d%02d" % (y, m, min(dd, days))


MATRIX_BYTES_MAX = 8 << 30


def _fit_memory(spec):
    """Halves nx or ny until an iterative 2-D job's system matrix is bounded under MATRIX_BYTES_MAX."""
    g, v = spec["geometry"], spec["volume"]
    algo = (spec.get("algorithm") or {}).get("name", "sart")
    engine = (spec.get("execution") or {}).get("engine", "auto")
    if g["type"] not in ("fan", "parallel") or algo == "fdk" or engine not in ("auto", "cpu", "tensor"):
        return
    while _views(g) * v["nx"] * v["ny"] * g["detector"]["nu"] * 31 > MATRIX_BYTES_MAX and max(v["nx"], v["ny"]) > 1:
        k = "nx" if v["nx"] >= v["ny"] else "ny"
        v[k] = max(1, v[k] // 2)


def _fit_input(spec):
    """A job of counts: flat above dark when both are numbers; the fields as numbers (an
    "uploaded" one would hold the job's start, and its uploads, until it came)."""
    inp = spec.get("input")
    if not isinstance(inp, dict) or inp.get("kind") != "intensity":
        return
    inp.pop("bad_pixels", None)
    if not isinstance(inp.get("dark"), (int, float)) or isinstance(inp.get("dark"), bool):
        inp["dark"] = 0
    if not isinstance(inp.get("flat"), (int, float)) or isinstance(inp.get("flat"), bool) or inp["flat"] <= inp["dark"]:
        inp["flat"] = inp["dark"] * 2 + 1000


def fit_spec(spec):
    """The spec with the cross-field rules applied (in place; returns it)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("geometry"), dict):
        return spec
    try:
        rtk = spec["geometry"] if spec["geometry"].get("type") == "rtk" else None
        if rtk is not None:  # fitted as the circular cone it becomes, then written as XML
            spec["geometry"] = _rtk_as_cone(rtk)
        _fit_sizes(spec)
        _fit_memory(spec)
        _fit_geometry(spec)
        _fit_algorithm(spec)
        if rtk is not None:
            _cone_as_rtk(spec["geometry"], rtk)
            spec["geometry"] = rtk
        _fit_output(spec)
        _fit_input(spec)
    except (KeyError, TypeError, ValueError, AttributeError):
        pass  # not a schema-valid spec after all: send it as it is
    return spec


# -- previews: the job's own sizes ------------------------------------------------------------

def _fit_preview(case):
    """index < the job's nx, ny or nz along axis (the job's, not the schema's).  Some phases hand the
    hook the query already serialized ("5"): both forms are fitted.  The window's WIDTH > 0 is the
    schema's own pattern."""
    q = case.query if isinstance(case.query, dict) else {}
    k, axis = q.get("index"), q.get("axis", "z")
    if isinstance(k, str) and k.isdigit():
        k = int(k)
    if not isinstance(k, int) or isinstance(k, bool):
        return
    vol = ((_job(case.path_parameters.get("id")) or {}).get("summary") or {}).get("volume")
    if isinstance(vol, list) and len(vol) == 3 and axis in ("x", "y", "z"):
        q["index"] = k % vol["xyz".index(axis)]


# -- uploads: the job's own lengths --------------------------------------------------------------

def _job(jid):
    try:
        r = requests.get("%s/v1/jobs/%s" % (URL, jid), timeout=10)
        return r.json() if r.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def _fit_upload(case, op):
    job = _job(case.path_parameters.get("id"))
    if not job:
        return
    if op == "putProjections":
        case.body = bytes(job["projection_bytes"])
    else:
        k = case.path_parameters.get("k")
        if isinstance(k, int) and job["views_expected"] > 0:
            case.path_parameters["k"] = k % job["views_expected"]
        case.body = bytes(job["view_bytes"])


def _wait_ended(jid, seconds=5.0):
    """A job that is queued or running: wait (polling) until it has ended, at most seconds."""
    t = time.monotonic() + seconds
    job = _job(jid)
    while job and job["state"] in ("queued", "running") and time.monotonic() < t:
        time.sleep(0.05)
        job = _job(jid)


@schemathesis.hook
def before_call(context, case, kwargs):
    op = _op(case)
    if op == "getVolume":
        # A client downloads once the job has ended; without this wait the download would
        # race the (fast) worker and the scenario would depend on timing.
        _wait_ended((case.path_parameters or {}).get("id"))
        return
    if op == "getPreview":
        # The same for a preview (a running job's is 409 or a live PNG by timing alone).
        _wait_ended((case.path_parameters or {}).get("id"))
        if _positive(case):
            _fit_preview(case)
        return
    if not _positive(case):
        return
    if op == "createJob" and isinstance(case.body, dict):
        fit_spec(case.body)
    elif op in ("putProjections", "putView"):
        _fit_upload(case, op)


# -- events: each event's data against its schema ---------------------------------------------------

_schemas = {}


def _convert(doc, node):
    """OpenAPI 3.0 schema -> JSON Schema draft 4 with $refs inlined (nullable -> a union with null)."""
    if isinstance(node, list):
        return [_convert(doc, x) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        t = doc
        for part in node["$ref"].lstrip("#/").split("/"):
            t = t[part]
        return _convert(doc, t)
    out = {k: _convert(doc, v) for k, v in node.items()
           if k not in ("nullable", "description", "example", "format", "default", "discriminator")}
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def _validator(name):
    if name not in _schemas:
        import jsonschema_rs
        import yaml
        with open(OPENAPI) as f:
            doc = yaml.safe_load(f)
        _schemas[name] = jsonschema_rs.Draft4Validator(_convert(doc, doc["components"]["schemas"][name]))
    return _schemas[name]


EVENT_SCHEMA = {"state": "Job", "progress": "Progress", "preview": "PreviewEvent"}


def parse_sse(text):
    """[(event, data)] of an event stream (comments and blank-only blocks skipped)."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            out.append((name, "\n".join(data)))
    return out


@schemathesis.check
def event_data_conformance(ctx, response, case):
    if _op(case) != "jobEvents" or response.status_code != 200:
        return None
    for i, (name, data) in enumerate(parse_sse(response.content.decode("utf-8", "replace"))):
        try:
            doc = json.loads(data)
        except ValueError:
            raise AssertionError("event %d (%s): data is not JSON: %.200s" % (i, name, data))
        if name == "deleted":
            if doc != {}:
                raise AssertionError("event %d (deleted): data is %.200s, not {}" % (i, data))
            continue
        if name not in EVENT_SCHEMA:
            raise AssertionError("event %d: unknown event name %r" % (i, name))
        errors = [e.message for e in _validator(EVENT_SCHEMA[name]).iter_errors(doc)]
        if errors:
            raise AssertionError("event %d (%s): data violates the %s schema: %s"
                                 % (i, name, EVENT_SCHEMA[name], "; ".join(errors[:3])[:600]))
    return None


# -- counts for the test's summary ------------------------------------------------------------------

@schemathesis.hook
def after_call(context, case, response):
    """Requests per operation and status (the test prints them: jobs were created, filled, run, fetched)."""
    with _lock:
        per = _counts.setdefault(case.operation.label, {})
        key = str(response.status_code)
        per[key] = per.get(key, 0) + 1


def _dump_counts():
    """Adds this run's counts to the file's (the test runs schemathesis twice)."""
    if not COUNTS:
        return
    try:
        with open(COUNTS) as f:
            total = json.load(f)
    except (OSError, ValueError):
        total = {}
    for op, per in _counts.items():
        t = total.setdefault(op, {})
        for st, n in per.items():
            t[st] = t.get(st, 0) + n
    with open(COUNTS, "w") as f:
        json.dump(total, f)


atexit.register(_dump_counts)
