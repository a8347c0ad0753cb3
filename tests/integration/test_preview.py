#!/usr/bin/env python3
"""GET /v1/jobs/{id}/preview: slices of a job's volume as 8-bit grey PNGs.

After an FDK job of the analytic phantom (phantom.py) on a 32 x 28 x 24
volume succeeds: each axis answers a PNG (signature, IHDR size and 8-bit
grey, every pixel equal to the raw volume's voxel through the window by
docs/api.md's rule and orientation: decoded here with zlib), the default
index is the middle slice and the middle z slice is not flat; without
window= every slice goes through the volume's 0.5 / 99.5 % points (named
in X-Recond-Window); a marker ball at a known (x, y, z) shows in each view
where a DICOM viewer shows it in the job's own series (pydicom); bad
parameters are 400 naming the parameter; a created, a queued and a
cancelled job are 409 naming the state (a running one: 409 until its worker
has a live volume, then a PNG with its generation); ETag and If-None-Match
give 304; 32 pollers of one slice at once all get the same PNG.
"""

import math
import os
import re
import struct
import threading
import urllib.parse
import zlib

import yaml

import phantom
from recond_harness import (ROOT, sirt_runs, Api, Daemon, Validation, check, deadline, log, proj_bytes, read_f32, require_binaries,
                            require_engine, run_main, small_spec)

PNG_SIG = b"\x89PNG\r\n\x1a\n"
NX, NY, NZ = 32, 28, 24


def png_chunks(data):
    pos, out = 8, []
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        out.append((kind, data[pos + 8:pos + 8 + n]))
        pos += 12 + n
    return out


def ihdr(data):
    """(width, height, bit depth, colour type) of a PNG."""
    kind, body = png_chunks(data)[0]
    assert kind == b"IHDR", kind
    return struct.unpack(">IIBB", body[:10])


def decode_grey(data):
    """Rows of an 8-bit greyscale, non-interlaced PNG (filters 0-4 undone)."""
    w, h, depth, ctype = ihdr(data)
    assert depth == 8 and ctype == 0, (depth, ctype)
    raw = zlib.decompress(b"".join(body for kind, body in png_chunks(data) if kind == b"IDAT"))
    rows, prev = [], bytearray(w)
    for r in range(h):
        f, line = raw[r * (w + 1)], bytearray(raw[r * (w + 1) + 1:(r + 1) * (w + 1)])
        for i in range(w):
            a = line[i - 1] if i else 0
            b, c = prev[i], (prev[i - 1] if i else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return rows


def grey(x, lo, hi):
    """docs/api.md: round((x - lo) / (hi - lo) * 255) clamped; NaN, inf 0; hi == lo a threshold."""
    if x != x or x in (float("inf"), float("-inf")):
        return 0
    if hi <= lo:
        return 0 if x < lo else 255 if x > hi else 128
    g = (x - lo) / (hi - lo) * 255.0 + 0.5
    return 0 if not g > 0 else 255 if g >= 255 else int(g)


def voxel_at(vol, axis, k, r, c):
    """Pixel (row r, column c) of slice k along axis (docs/api.md's orientation:
    coronal and sagittal rows count down from the last, superior, z)."""
    x, y, z = {"z": (c, r, k), "y": (c, k, NZ - 1 - r), "x": (k, c, NZ - 1 - r)}[axis]
    return vol[(z * NY + y) * NX + x]


def volume_window(vol):
    """docs/api.md: the 0.5 % and 99.5 % points of the volume's finite values."""
    v = sorted(x for x in vol if x == x and abs(x) != float("inf"))
    m = len(v)
    return v[math.floor(0.005 * (m - 1))], v[math.ceil(0.995 * (m - 1))]


# A marker: a small dense ball at a voxel centre away from every symmetry
# plane (mm, as the volume's voxel centres are: (i - (n-1)/2) * 1 mm), so a
# flipped axis puts it elsewhere.
MARKER_MM = (8.5, -6.5, 6.5)
MARKER = (MARKER_MM, (2.0, 2.0, 2.0), 0.08)


def marker_job(api):
    spec = phantom.cone_spec(n=32, views=60, nu=48, nv=48, du=1.5, dv=1.5, algorithm={"name": "fdk"},
                             label="preview-marker")
    spec["volume"].update(nx=NX, ny=NY, nz=NZ)
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], phantom.project_cone(spec, phantom.DEFAULT_PHANTOM + [MARKER]))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    j = api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=120)
    check("the marker job succeeds", j["state"] == "succeeded", "%s %s" % (j["state"], j.get("error")))
    return j["id"]


def centroid(rows, cut):
    """(row, column) centroid of the pixels >= cut."""
    pts = [(r, c) for r, row in enumerate(rows) for c, g in enumerate(row) if g >= cut]
    if not pts:
        return (-99.0, -99.0)
    return (sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts))


def check_marker(api):
    """The marker where a DICOM viewer shows it.  From the job's series
    (pydicom, the ZIP download): its patient position from the HU pixels and
    ImagePositionPatient / ImageOrientationPatient / PixelSpacing; then where
    a viewer draws it: axial as the instance is stored, coronal and sagittal
    with the most superior (+z) slice at the top, the patient's right (-x)
    on the left of axial and coronal, anterior (-y) on the left of
    sagittal.  The preview of each view must put it there."""
    import io
    import zipfile
    import pydicom
    jid = marker_job(api)
    st, _, body, _ = api.get("/v1/jobs/%s/volume?format=dicom" % jid, timeout=120)
    check("marker: the DICOM ZIP downloads", st == 200, str(st))
    if st != 200:
        return
    zf = zipfile.ZipFile(io.BytesIO(body))
    insts = [pydicom.dcmread(io.BytesIO(zf.read(n))) for n in zf.namelist()]
    insts.sort(key=lambda d: float(d.ImagePositionPatient[2]))  # inferior to superior
    iop = [float(v) for v in insts[0].ImageOrientationPatient]
    check("marker: the series is axial, rows along +x, columns along +y", iop == [1, 0, 0, 0, 1, 0], str(iop))
    sy, sx = (float(v) for v in insts[0].PixelSpacing)  # row spacing (y), column spacing (x)
    x0, y0 = float(insts[0].ImagePositionPatient[0]), float(insts[0].ImagePositionPatient[1])
    zs = [float(d.ImagePositionPatient[2]) for d in insts]
    # the marker's centre of mass in patient mm, over voxels well above the body
    acc, tot = [0.0, 0.0, 0.0], 0.0
    for d in insts:
        px = d.pixel_array
        hu = px * float(d.RescaleSlope) + float(d.RescaleIntercept)
        for r in range(d.Rows):
            for c in range(d.Columns):
                if hu[r][c] > 2000:  # 0.08/mm over water 0.0192: > 3000 HU at its core
                    w = float(hu[r][c])
                    acc[0] += w * (x0 + c * sx)
                    acc[1] += w * (y0 + r * sy)
                    acc[2] += w * float(d.ImagePositionPatient[2])
                    tot += w
    pos = [a / tot for a in acc] if tot else [1e9] * 3
    check("marker: the series shows it at its (x, y, z) %s mm (found %s)" % (MARKER_MM, ["%.2f" % p for p in pos]),
          all(abs(p - q) < 1.0 for p, q in zip(pos, MARKER_MM)), "")
    col = (pos[0] - x0) / sx                   # DICOM column: along +x (towards the patient's left)
    row = (pos[1] - y0) / sy                   # DICOM row: along +y (posterior)
    k = min(range(len(zs)), key=lambda i: abs(zs[i] - pos[2]))
    from_top = (max(zs) - pos[2]) / (zs[1] - zs[0])  # a viewer's MPR row: superior at the top
    want = {"z": (round(k), (row, col)), "y": (round(row), (from_top, col)), "x": (round(col), (from_top, row))}
    for axis, (index, (r, c)) in want.items():
        st, _, png, _ = api.get("/v1/jobs/%s/preview?axis=%s&index=%d&window=0.07,0.04" % (jid, axis, index))
        got = centroid(decode_grey(png), 200) if st == 200 else (-99, -99)
        check("marker: preview axis %s index %d shows it at (row, column) (%.1f, %.1f) as a viewer of the "
              "series does (found (%.1f, %.1f))" % (axis, index, r, c, got[0], got[1]),
              abs(got[0] - r) <= 1.0 and abs(got[1] - c) <= 1.0, str(st))


def finished_job(api):
    spec = phantom.cone_spec(n=32, views=60, nu=48, nv=48, du=1.5, dv=1.5, algorithm={"name": "fdk"},
                             label="preview-fdk")
    spec["volume"].update(nx=NX, ny=NY, nz=NZ)
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], phantom.project_cone(spec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    j = api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=120)
    check("the phantom job succeeds", j["state"] == "succeeded", "%s %s" % (j["state"], j.get("error")))
    return j["id"]


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    require_engine(api)
    jid = finished_job(api)
    base = "/v1/jobs/%s/preview" % jid
    st, _, raw, _ = api.get("/v1/jobs/%s/volume" % jid)
    vol = read_f32(raw)
    check("the raw volume is 32 x 28 x 24 floats", st == 200 and len(vol) == NX * NY * NZ, "%d %d" % (st, len(vol)))

    # Each axis: a PNG of the slice's size whose pixels are the voxels through the window.
    lo, hi = 0.0, 0.03  # window=0.015,0.03
    for axis, (w, h, n) in (("z", (NX, NY, NZ)), ("y", (NX, NZ, NY)), ("x", (NY, NZ, NX))):
        for k in (0, n // 2 + 1, n - 1):
            st, hd, body, _ = api.get("%s?axis=%s&index=%d&window=0.015,0.03" % (base, axis, k))
            ok = st == 200 and hd.get("content-type") == "image/png" and body[:8] == PNG_SIG
            check("axis %s index %d: 200 image/png with the PNG signature" % (axis, k), ok,
                  "%d %s %r" % (st, hd.get("content-type"), body[:40]))
            if not ok:
                continue
            check("axis %s: IHDR %d x %d, 8-bit grey" % (axis, w, h), ihdr(body) == (w, h, 8, 0), str(ihdr(body)))
            rows = decode_grey(body)
            bad = [(r, c) for r in range(h) for c in range(w)
                   if rows[r][c] != grey(voxel_at(vol, axis, k, r, c), lo, hi)]
            check("axis %s index %d: every pixel is its voxel through the window (superior at the top of "
                  "coronal and sagittal slices)" % (axis, k), not bad, "%d pixels differ, first %s" % (len(bad), bad[:3]))
            check("axis %s: X-Recond-Generation final, Cache-Control no-store, an ETag" % axis,
                  hd.get("x-recond-generation") == "final" and hd.get("cache-control") == "no-store" and
                  hd.get("etag", "").startswith('"'), str(hd))

    # The default window: the volume's 0.5 / 99.5 % points, the same for every slice, named in X-Recond-Window.
    vlo, vhi = volume_window(vol)
    for axis, n in (("z", NZ), ("y", NY), ("x", NX)):
        for k in (1, n // 3, n - 2):
            st, hd, body, _ = api.get("%s?axis=%s&index=%d" % (base, axis, k))
            win = hd.get("x-recond-window", "")
            try:
                c, w = (float(t) for t in win.split(","))
            except ValueError:
                c, w = float("nan"), float("nan")
            check("default window of axis %s index %d: X-Recond-Window is the volume's (%.6g, %.6g)" %
                  (axis, k, vlo, vhi), abs(c - (vlo + vhi) / 2) < 1e-9 and abs(w - (vhi - vlo)) < 1e-9, win)
            if st != 200 or c != c:
                continue
            lo, hi = c - w / 2, c + w / 2
            h, wd = {"z": (NY, NX), "y": (NZ, NX), "x": (NZ, NY)}[axis]
            rows = decode_grey(body)
            bad = [(r, cc) for r in range(h) for cc in range(wd)
                   if rows[r][cc] != grey(voxel_at(vol, axis, k, r, cc), lo, hi)]
            check("default window of axis %s index %d: every pixel through the volume's window" % (axis, k),
                  not bad, "%d pixels differ, first %s" % (len(bad), bad[:3]))

    # Defaults: axis z, the middle slice, the window from the data; the phantom's middle is not flat.
    st, hd, body, _ = api.get(base)
    st2, _, body2, _ = api.get("%s?axis=z&index=%d&format=png" % (base, NZ // 2))
    check("no parameters: the middle z slice (index nz / 2)", st == st2 == 200 and body == body2, "%d %d" % (st, st2))
    levels = set(b for row in decode_grey(body) for b in row) if st == 200 else set()
    check("the middle z slice of the phantom is not flat (many grey levels, black and white)",
          len(levels) > 20 and 0 in levels and 255 in levels, "%d levels" % len(levels))
    st, hd2, body3, _ = api.request("HEAD", base)
    check("HEAD: 200, no body, the same ETag", st == 200 and not body3 and hd2.get("etag") == hd.get("etag"),
          "%d %r" % (st, hd2))

    # ETag / If-None-Match.
    etag = hd.get("etag", "")
    for inm in (etag, "W/" + etag, '"other", ' + etag, "*"):
        st, h304, b304, _ = api.get(base, headers={"If-None-Match": inm})
        check("If-None-Match %s: 304, no body, same ETag and generation" % inm,
              st == 304 and not b304 and h304.get("etag") == etag and h304.get("x-recond-generation") == "final",
              "%d %r" % (st, h304))
    st, _, _, _ = api.get(base, headers={"If-None-Match": '"something-else"'})
    check("If-None-Match of another tag: 200", st == 200, str(st))
    _, hw, _, _ = api.get(base + "?window=0.01,0.02")
    _, hx, _, _ = api.get(base + "?axis=x")
    check("another window or axis has another ETag", len({etag, hw.get("etag"), hx.get("etag")}) == 3,
          "%s %s %s" % (etag, hw.get("etag"), hx.get("etag")))
    _, h40, _, _ = api.get(base + "?window=0.01,0.020")
    check("the same window written differently has the same ETag", h40.get("etag") == hw.get("etag"),
          "%s %s" % (h40.get("etag"), hw.get("etag")))

    # 32 pollers of one slice at once: one render, the rest from the cache or waiting for it.
    results = []

    def poll():
        a = Api(d.url, validate=False)
        for _ in range(3):
            results.append(a.get(base + "?axis=y&index=5")[::2])

    threads = [threading.Thread(target=poll) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    statuses = sorted(set(st for st, _ in results))
    check("32 pollers x 3 of one slice: all 200 with the same PNG", len(results) == 96 and statuses == [200] and
          len(set(b for _, b in results)) == 1, "%d answers, statuses %s" % (len(results), statuses))

    # Bad parameters: 400 invalid_argument naming the parameter.
    bad = [("axis=w", "axis"), ("axis=", "axis"), ("axis=xy", "axis"), ("axis=Z", "axis"),
           ("index=-1", "index"), ("index=abc", "index"), ("index=", "index"), ("index=+3", "index"),
           ("index=%d" % NZ, "index"), ("axis=x&index=%d" % NX, "index"), ("index=99999999", "index"),
           ("format=jpeg", "format"), ("format=", "format"),
           ("window=1", "window"), ("window=1,0", "window"), ("window=1,-2", "window"),
           ("window=nan,1", "window"), ("window=1,inf", "window"), ("window=a,b", "window"),
           ("window=1,2,3", "window"), ("window=,", "window"), ("window=%201,2", "window"),
           ("window=0x10,2", "window"), ("window=1e10,1", "window"), ("window=0,1e10", "window"),
           ("window=0.0,0.0", "window"), ("window=1,0.000", "window"), ("window=1,-0.5", "window")]
    for q, field in bad:
        st, _, _, doc = api.get("%s?%s" % (base, q))
        err = (doc or {}).get("error", {})
        check("%s: 400 naming %s" % (q, field), st == 400 and err.get("code") == "invalid_argument" and
              err.get("field") == field and field in err.get("message", ""), "%d %s" % (st, err))
    # The schema's pattern for window is the grammar: every string it matches
    # is answered 200, every other one 400 (as the contract test's phases expect).
    with open(os.path.join(ROOT, "api", "openapi.yaml")) as f:
        params = yaml.safe_load(f)["paths"]["/v1/jobs/{id}/preview"]["parameters"]
    pattern = [p for p in params if p.get("name") == "window"][0]["schema"]["pattern"]
    for w in ("0.02,0.04", "-5,0.5", "0,.5", "0,0.000001", "999999999.5,999999999", "-0,1", "1.0,1.0",
              "0,0", "0,0.0", "1,00.5", "01,1", "1.,1", "+1,1", "1,1e-3", "1,%202", "1,0.0000000", "-,1"):
        st, _, _, _ = api.get("%s?window=%s" % (base, w))
        want = 200 if re.search(pattern, urllib.parse.unquote(w)) else 400
        check("window=%s: %d, as the schema's pattern says" % (w, want), st == want, str(st))
    st, _, _, doc = api.get("%s?index=%d" % (base, NZ))
    msg = (doc or {}).get("error", {}).get("message", "")
    check("index out of range: the message names the range 0 to %d" % (NZ - 1), "0 to %d" % (NZ - 1) in msg, msg)
    st, _, _, _ = api.get("%s?frobnicate=1" % base)
    check("an unknown parameter is ignored, as on every route", st == 200, str(st))
    st, _, _, doc = api.get("/v1/jobs/00000000-0000-4000-8000-000000000000/preview")
    check("an unknown job: 404", st == 404, "%d %s" % (st, doc))
    st, _, _, doc = api.get("/v1/jobs/nope/preview")
    check("a bad id: 400 invalid_id", st == 400 and doc["error"]["code"] == "invalid_id", "%d %s" % (st, doc))
    st, hd, _, doc = api.request("POST", base)
    check("POST: 405 with Allow: GET, HEAD", st == 405 and hd.get("allow") == "GET, HEAD", "%d %s" % (st, hd))

    check_marker(api)

    # States without a volume: 409 naming the state.
    created = api.create(small_spec(label="preview-created"))
    lspec = small_spec(n=32, views=60, nu=32, nv=32, label="preview-long",
                       algorithm=sirt_runs(2000))
    long_job = api.create(lspec)
    api.put("/v1/jobs/%s/projections" % long_job["id"], b"\0" * proj_bytes(lspec))
    api.post_json("/v1/jobs/%s/start" % long_job["id"], b"")
    qspec = small_spec(label="preview-queued")
    queued = api.create(qspec)
    api.put("/v1/jobs/%s/projections" % queued["id"], b"\0" * proj_bytes(qspec))
    api.post_json("/v1/jobs/%s/start" % queued["id"], b"")
    lj = api.wait_state(long_job["id"], ("running",), timeout=60, poll=0.02)
    check("a long job runs, another is queued behind it",
          lj["state"] == "running" and api.job(queued["id"])["state"] == "queued", lj["state"])
    for j, state in ((created, "created"), (queued, "queued")):
        st, _, _, doc = api.get("/v1/jobs/%s/preview" % j["id"])
        err = (doc or {}).get("error", {})
        check("a %s job: 409 conflict naming its state, no volume yet" % state,
              st == 409 and err.get("code") == "conflict" and state in err.get("message", "") and
              "no volume yet" in err.get("message", ""), "%d %s" % (st, err))
    # Running: a PNG of the live volume once its worker has one (else 409 naming running).
    alive = deadline(10)
    while True:
        st, hd, body, doc = api.get("/v1/jobs/%s/preview?axis=x" % long_job["id"])
        if st != 409 or not alive():
            break
    if st == 200:
        gen = hd.get("x-recond-generation", "")
        check("a running job: a PNG of its live volume with a numeric generation",
              body[:8] == PNG_SIG and gen.isdigit() and ihdr(body)[:2] == (32, 32), "%s %s" % (gen, ihdr(body)))
        st, h304, _, _ = api.get("/v1/jobs/%s/preview?axis=x" % long_job["id"],
                                 headers={"If-None-Match": hd.get("etag", "")})
        check("a running job: If-None-Match of the current generation is 304 (or 200 with a newer one)",
              st == 304 or (st == 200 and h304.get("x-recond-generation") != gen), "%d %s" % (st, h304))
    else:
        err = (doc or {}).get("error", {})
        check("a running job without a live volume: 409 naming running", st == 409 and
              "running" in err.get("message", ""), "%d %s" % (st, err))
        log("the runner has no live volume for a running job yet (runner_live_volume): previews of running "
            "jobs answer 409")
    api.post_json("/v1/jobs/%s/cancel" % long_job["id"], b"")
    api.wait_state(long_job["id"], ("cancelled", "failed", "succeeded"), timeout=60)
    st, _, _, doc = api.get("/v1/jobs/%s/preview" % long_job["id"])
    err = (doc or {}).get("error", {})
    check("a cancelled job: 409 naming cancelled", st == 409 and "cancelled" in err.get("message", ""),
          "%d %s" % (st, err))
    api.wait_state(queued["id"], ("succeeded", "failed", "cancelled"), timeout=60)

    Validation.report()
    check("the daemon is still up", d.proc.poll() is None)
    d.stop()


if __name__ == "__main__":
    run_main(main)
