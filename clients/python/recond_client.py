"""recond_client: a small client of the recond CT reconstruction daemon.

Standard library only (urllib, json), so that a PACS or scanner-side script
can copy this one file.  The verbs match reconctl:

    c = Client("http://127.0.0.1:8080", token=None)
    job = c.submit(spec, "projections.f32")     # create + upload + start
    for event, data in c.watch(job["id"]):      # server-sent events
        ...
    final = c.wait(job["id"])                   # until succeeded/failed/cancelled
    c.get(job["id"], "volume.nii", fmt="nifti")
    c.get(job["id"], "series.zip", fmt="dicom")  # the DICOM series as a ZIP
    instances = c.get_dicom_multipart(job["id"])  # or one bytes per instance
    c.destinations(); c.push(job["id"])           # PACS: list, send again

Every error answer of the daemon raises RecondError with .status (HTTP
status), .code and .message from its JSON error body; a network failure
raises RecondError with status 0 and code "network".  Uploads and downloads
stream in chunks: memory use does not grow with the data.
"""

import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "RecondError", "TERMINAL_STATES"]

TERMINAL_STATES = ("succeeded", "failed", "cancelled")
_CHUNK = 1 << 20


class RecondError(Exception):
    """An error answer of the daemon (status >= 400) or a network failure (status 0)."""

    def __init__(self, status, code, message, field=None):
        super().__init__("%s %s: %s" % (status, code, message) if status else "%s: %s" % (code, message))
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class _FileBody:
    """A file-like body that reads at most `size` bytes in big chunks and reports progress."""

    def __init__(self, fp, size, progress):
        self.fp, self.left, self.size, self.progress = fp, size, size, progress

    def read(self, n=-1):
        # http.client asks for 8 KiB blocks; handing it 1 MiB (it sends
        # whatever it gets) cuts the per-block overhead of a big upload.
        data = self.fp.read(min(_CHUNK, self.left))
        self.left -= len(data)
        if self.progress:
            self.progress(self.size - self.left, self.size)
        return data

    def __iter__(self):
        while self.left > 0:
            data = self.read(_CHUNK)
            if not data:
                return
            yield data


def _error_from(status, body):
    try:
        e = json.loads(body.decode("utf-8", "replace"))["error"]
        return RecondError(status, e.get("code", "error"), e.get("message", ""), e.get("field"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return RecondError(status, "http_error", body[:200].decode("utf-8", "replace") or "(no body)")


class Client:
    """One daemon.  url: its base URL; token: a bearer token or None; timeout: seconds per request."""

    def __init__(self, url=None, token=None, timeout=60.0):
        self.url = (url or os.environ.get("RECOND_URL") or "http://127.0.0.1:8080").rstrip("/")
        self.token = token if token is not None else os.environ.get("RECOND_TOKEN")
        self.timeout = timeout

    # -- plumbing ---------------------------------------------------------

    def _open(self, method, path, body=None, headers=None, timeout=None):
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=h)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            with e:
                raise _error_from(e.code, e.read()) from None
        except (urllib.error.URLError, OSError) as e:
            raise RecondError(0, "network", str(getattr(e, "reason", e))) from None

    def _json(self, method, path, doc=None):
        body, headers = None, {}
        if doc is not None:
            body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
            headers["Content-Type"] = "application/json"
        elif method == "POST":
            body = b""
        with self._open(method, path, body, headers) as r:
            data = r.read()
        return json.loads(data) if data else None

    @staticmethod
    def _id(job_id):
        return urllib.parse.quote(str(job_id), safe="")

    # -- verbs -------------------------------------------------------------

    def create(self, spec):
        """POST /v1/jobs; spec is a dict (or JSON bytes).  Returns the job."""
        return self._json("POST", "/v1/jobs", spec)

    def upload(self, job_id, data, view=None, progress=None):
        """PUT the whole stack (view None) or one view.  data: bytes, a path, or a
        binary file object positioned at the start (its remaining size is sent).
        progress(done, total) is called as bytes go out.  Returns the job."""
        path = "/v1/jobs/%s/projections" % self._id(job_id)
        if view is not None:
            path += "/%d" % int(view)
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, (bytes, bytearray, memoryview)):
            headers["Content-Length"] = str(len(data))
            with self._open("PUT", path, bytes(data), headers) as r:
                return json.loads(r.read() or b"null")
        if isinstance(data, (str, os.PathLike)):
            with open(data, "rb") as fp:
                return self.upload(job_id, fp, view, progress)
        size = os.fstat(data.fileno()).st_size - data.tell()
        headers["Content-Length"] = str(size)
        with self._open("PUT", path, _FileBody(data, size, progress), headers,
                        timeout=max(self.timeout, 600)) as r:
            return json.loads(r.read() or b"null")

    def upload_field(self, job_id, field, data):
        """PUT a job of counts' flat, dark or bad-pixel map (field "flat", "dark",
        "bad_pixels" or "bad-pixels"; the spec's input names it "uploaded").  data:
        bytes or a path: one or more detector images (rows x nu of the job's
        input.dtype; several are averaged), or one uint8 image for the bad
        pixels.  Returns the job."""
        route = {"flat": "flat", "dark": "dark", "bad_pixels": "bad-pixels", "bad-pixels": "bad-pixels"}[field]
        if isinstance(data, (str, os.PathLike)):
            with open(data, "rb") as fp:
                data = fp.read()
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))}
        with self._open("PUT", "/v1/jobs/%s/%s" % (self._id(job_id), route), bytes(data), headers) as r:
            return json.loads(r.read() or b"null")

    def start(self, job_id):
        """POST start: queue a job whose views are all present.  Returns the job."""
        return self._json("POST", "/v1/jobs/%s/start" % self._id(job_id))

    def submit(self, spec, projections, start=None, progress=None, flat=None, dark=None, bad_pixels=None):
        """create + upload + start (start unless the spec autostarts; start=False
        leaves it unqueued).  flat, dark, bad_pixels: a job of counts' uploaded
        fields (bytes or paths, upload_field), sent before the projections.  A job
        whose upload fails is cancelled and removed again."""
        job = self.create(spec)
        try:
            for field, data in (("flat", flat), ("dark", dark), ("bad_pixels", bad_pixels)):
                if data is not None:
                    self.upload_field(job["id"], field, data)
            job = self.upload(job["id"], projections, progress=progress)
        except Exception:
            try:  # cancel, then remove (DELETE needs the admin role with tokens)
                self.cancel(job["id"])
                self.delete(job["id"])
            except RecondError:
                pass
            raise
        autostart = isinstance(spec, dict) and spec.get("autostart") is True
        if start or (start is None and not autostart):
            job = self.start(job["id"])
        return job

    def status(self, job_id):
        """GET /v1/jobs/{id}: state, progress, plan, timings, error."""
        return self._json("GET", "/v1/jobs/%s" % self._id(job_id))

    def list(self, state=None, limit=None, offset=None):
        """GET /v1/jobs: {"jobs": [...], "total", "limit", "offset"}, newest first."""
        q = {k: v for k, v in (("state", state), ("limit", limit), ("offset", offset)) if v is not None}
        return self._json("GET", "/v1/jobs" + ("?" + urllib.parse.urlencode(q) if q else ""))

    def cancel(self, job_id):
        """POST cancel: cancel a job that has not finished (never deletes).  Returns
        the job as the daemon answered (a running job: cancel_requested), or as it
        is when it had already finished (the daemon's 409)."""
        try:
            return self._json("POST", "/v1/jobs/%s/cancel" % self._id(job_id))
        except RecondError as e:
            if e.status != 409:
                raise
            return self.status(job_id)

    def set_priority(self, job_id, priority):
        """PATCH /v1/jobs/{id}: the priority (0..9, higher runs first) of a job that has
        not started running.  Returns the job; a running or finished job is refused
        (RecondError 409) and keeps its priority."""
        return self._json("PATCH", "/v1/jobs/%s" % self._id(job_id), {"priority": priority})

    def delete(self, job_id):
        """DELETE /v1/jobs/{id}: remove a finished job and its files (admin role with
        tokens).  A job that has not finished is refused (RecondError 409): cancel first."""
        return self._json("DELETE", "/v1/jobs/%s" % self._id(job_id))

    def devices(self):
        """GET /v1/devices: the list of devices."""
        d = self._json("GET", "/v1/devices")
        return d.get("devices", []) if isinstance(d, dict) else d

    def events(self, job_id, idle_timeout=40.0):
        """One connection to the event stream: yields (event, data) with data
        parsed as JSON where it is JSON; ends when the server ends the stream.
        Raises RecondError(0, "timeout") after idle_timeout quiet seconds."""
        path = "/v1/jobs/%s/events" % self._id(job_id)
        r = self._open("GET", path, headers={"Accept": "text/event-stream"}, timeout=idle_timeout)
        with r:
            name, data = "", []
            while True:
                try:
                    raw = r.readline(1 << 20)
                except (socket.timeout, TimeoutError):
                    raise RecondError(0, "timeout", "no event for %.0f s" % idle_timeout) from None
                except OSError as e:
                    raise RecondError(0, "network", str(e)) from None
                if not raw:
                    return
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if data:
                        text = "\n".join(data)
                        try:
                            payload = json.loads(text)
                        except ValueError:
                            payload = text
                        yield name or "message", payload
                    name, data = "", []
                elif line.startswith(":"):
                    continue
                else:
                    field, _, value = line.partition(":")
                    if value.startswith(" "):
                        value = value[1:]
                    if field == "event":
                        name = value
                    elif field == "data":
                        data.append(value)

    def watch(self, job_id, timeout=None, idle_timeout=40.0):
        """Yields (event, data) until the job ends, reconnecting when the stream
        closes or goes quiet; the job's GET decides when it has ended.  The last
        item is ("end", final job).  timeout: overall seconds (None = no limit),
        past which RecondError(0, "timeout") is raised."""
        t_end = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.status(job_id)
            if job.get("state") in TERMINAL_STATES:
                yield "end", job
                return
            if t_end is not None and time.monotonic() > t_end:
                raise RecondError(0, "timeout", "job %s still %s after %.0f s" % (job_id, job.get("state"), timeout))
            idle = idle_timeout if t_end is None else max(1.0, min(idle_timeout, t_end - time.monotonic()))
            t0 = time.monotonic()
            try:
                for event, data in self.events(job_id, idle):
                    yield event, data
                    if event == "deleted":
                        break
                    if event == "state" and isinstance(data, dict) and data.get("state") in TERMINAL_STATES:
                        break
            except RecondError as e:
                if e.status != 0:
                    raise
            if time.monotonic() - t0 < 0.5:
                time.sleep(0.5)  # a stream that closes at once must not make us spin

    def wait(self, job_id, timeout=None):
        """Blocks until the job ends; returns the final job."""
        last = None
        for event, data in self.watch(job_id, timeout):
            last = data
        return last

    def get(self, job_id, out=None, fmt="raw", byte_range=None):
        """GET the volume.  out: a path (written to out.part, renamed when
        complete), a binary file object, or None (returns the bytes); with a
        path or file the number of bytes written is returned.  fmt: raw, nifti,
        mha, or dicom (a ZIP of the series, {id}/NNNNN.dcm; sent chunked, its
        length unknown in advance).  byte_range: (first, last) inclusive, for
        a Range request (not for dicom)."""
        if byte_range is not None and fmt == "dicom":
            raise ValueError("format dicom has no Range requests")
        path = "/v1/jobs/%s/volume?format=%s" % (self._id(job_id), urllib.parse.quote(fmt))
        headers = {"Accept": "*/*"}
        if byte_range is not None:
            headers["Range"] = "bytes=%d-%d" % byte_range
        with self._open("GET", path, headers=headers, timeout=max(self.timeout, 600)) as r:
            if out is None:
                return r.read()
            if hasattr(out, "write"):
                return _copy(r, out)
            part = str(out) + ".part"
            try:
                with open(part, "wb") as fp:
                    n = _copy(r, fp)
                os.replace(part, out)
            except BaseException:
                try:
                    os.unlink(part)
                except OSError:
                    pass
                raise
            return n

    def geometry(self, job_id, fmt="rtk"):
        """GET /v1/jobs/{id}/geometry: the job's geometry as RTK's geometry XML
        (a str; fmt "rtk" is the one format).  422 for fan and parallel jobs."""
        path = "/v1/jobs/%s/geometry?format=%s" % (self._id(job_id), urllib.parse.quote(fmt))
        with self._open("GET", path, headers={"Accept": "application/xml"}) as r:
            return r.read().decode("utf-8")

    def get_dicom_multipart(self, job_id):
        """GET the DICOM series as multipart/related; type="application/dicom"
        (as WADO-RS answers): a list with one bytes object per instance, in
        slice order.  The whole series is held in memory; get(fmt="dicom")
        streams a ZIP to a file instead."""
        path = "/v1/jobs/%s/volume?format=dicom" % self._id(job_id)
        headers = {"Accept": 'multipart/related; type="application/dicom"'}
        with self._open("GET", path, headers=headers, timeout=max(self.timeout, 600)) as r:
            ctype = r.headers.get("Content-Type", "")
            try:
                body = r.read()
            except OSError as e:
                raise RecondError(0, "network", str(e)) from None
        return _multipart_parts(ctype, body)

    def push(self, job_id):
        """POST /v1/jobs/{id}/push: send a succeeded job's DICOM series again to
        every destination of its output.push.  Returns the job (its "push"
        entries pending, "delivery" sending)."""
        return self._json("POST", "/v1/jobs/%s/push" % self._id(job_id))

    def destinations(self):
        """GET /v1/destinations: the configured PACS (name, kind, url or host and
        port; never credentials)."""
        d = self._json("GET", "/v1/destinations")
        return d.get("destinations", []) if isinstance(d, dict) else d


def _multipart_parts(ctype, body):
    """The bodies of a multipart answer (RFC 2046): each delimiter is CRLF "--"
    boundary, so a part's data ends before the CRLF that precedes the next
    one.  Only the boundary parameter of ctype is used."""
    if not ctype.lower().startswith("multipart/"):
        raise RecondError(0, "bad_answer", "expected a multipart answer, got %r" % ctype)
    m = re.search(r';\s*boundary=(?:"([^"]+)"|([^;\s]+))', ctype, re.I)
    if not m:
        raise RecondError(0, "bad_answer", "no boundary in %r" % ctype)
    delim = b"\r\n--" + (m.group(1) or m.group(2)).encode("ascii")
    # The first delimiter may open the body without a CRLF in front of it.
    chunks = (b"\r\n" + body).split(delim)
    parts = []
    for chunk in chunks[1:]:  # chunks[0] is the preamble
        if chunk.startswith(b"--"):
            return parts  # the close delimiter; what follows is the epilogue
        head, sep, data = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise RecondError(0, "bad_answer", "a multipart part has no header end")
        parts.append(data)
    raise RecondError(0, "bad_answer", "the multipart answer has no closing boundary (truncated)")


def _copy(src, dst):
    n = 0
    while True:
        try:
            b = src.read(_CHUNK)
        except OSError as e:
            raise RecondError(0, "network", str(e)) from None
        if not b:
            return n
        dst.write(b)
        n += len(b)
