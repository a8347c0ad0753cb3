"""A real Orthanc PACS for the integration tests that talk DICOM / DICOMweb.

- available() -> (ok, reason): whether /usr/sbin/Orthanc and the DICOMweb
  plugin (Debian packages orthanc, orthanc-dicomweb) are installed; a test
  skips with the reason otherwise.
- Orthanc(aet, dicomweb, username, password): start() writes its own config
  JSON into a fresh tempfile.mkdtemp() directory (storage and index there,
  HTTP and DICOM on free ports, remote access off, C-STORE accepted from any
  calling AE but only with the right called AE, no Lua, no /etc/orthanc),
  runs `Orthanc --no-jobs FILE` (that file is the only config read), stdout and
  stderr in orthanc.log in the same directory, and waits (bounded) until
  GET /system answers with our AET and DICOM port.  stop() sends SIGTERM,
  then SIGKILL, and removes the directory; atexit stops whatever is left
  (recond_harness, imported here, makes SIGTERM and SIGINT run atexit), and
  Orthanc gets SIGKILL (PR_SET_PDEATHSIG) if the test process dies.
- Nothing is written outside the temporary directory, so it runs as root or
  as a normal user.

Orthanc 1.10.1 binds its HTTP and DICOM ports on all interfaces (it has no
bind-address option); "RemoteAccessAllowed": false makes the HTTP server
refuse non-loopback clients, and every URL here is on 127.0.0.1.  The free
ports are found by binding 127.0.0.1:0 and closing, so another process may
take one before Orthanc does: start() retries once with new ports when the
log says a port could not be bound.
"""

import atexit
import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from recond_harness import free_port, log

ORTHANC = os.environ.get("ORTHANC_BIN") or "/usr/sbin/Orthanc"
DICOMWEB_PLUGIN = (os.environ.get("ORTHANC_DICOMWEB_PLUGIN")
                   or "/usr/share/orthanc/plugins/libOrthancDicomWeb.so")

_running = []


def available():
    """(True, "") when Orthanc and its DICOMweb plugin are installed, else (False, why)."""
    if not os.access(ORTHANC, os.X_OK):
        return False, "Orthanc is not installed (%s; Debian package orthanc)" % ORTHANC
    if not os.path.isfile(DICOMWEB_PLUGIN):
        return False, ("the Orthanc DICOMweb plugin is not installed (%s; Debian package "
                       "orthanc-dicomweb)" % DICOMWEB_PLUGIN)
    return True, ""


def _stop_all():
    for o in list(_running):
        o.stop()


atexit.register(_stop_all)


def _die_with_parent():
    """In the child: SIGKILL Orthanc when the test process dies, even by SIGKILL (Linux)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort; atexit still stops it
        pass


class Orthanc:
    def __init__(self, aet="ORTHANC", dicomweb=True, username=None, password=None,
                 extra_config=None):
        """extra_config: optional dict merged last into the config (e.g.
        {"OverwriteInstances": True}); key names as in `Orthanc --config=-`."""
        self.aet = aet
        self.dicomweb = dicomweb
        self.username = username
        self.password = password or ""
        self.extra_config = dict(extra_config or {})
        self.dir = None
        self.config_path = None
        self.log_path = None
        self.http_port = None
        self.dicom_port = None
        self.proc = None
        self.startup_s = None

    # -- addresses -------------------------------------------------------------

    @property
    def http_url(self):
        return "http://127.0.0.1:%d" % self.http_port

    @property
    def dicomweb_url(self):
        return self.http_url + "/dicom-web"

    # -- life cycle ------------------------------------------------------------

    def _config(self):
        c = {
            "Name": "recond-it-" + self.aet,
            "StorageDirectory": os.path.join(self.dir, "storage"),
            "IndexDirectory": os.path.join(self.dir, "index"),
            "LuaScripts": [],
            "ExecuteLuaEnabled": False,
            "Plugins": [DICOMWEB_PLUGIN] if self.dicomweb else [],
            "ConcurrentJobs": 2,
            "SaveJobs": False,
            "HttpServerEnabled": True,
            "HttpPort": self.http_port,
            "HttpDescribeErrors": True,
            "HttpThreadsCount": 10,
            "RemoteAccessAllowed": False,
            "SslEnabled": False,
            "AuthenticationEnabled": bool(self.username),
            "RegisteredUsers": {self.username: self.password} if self.username else {},
            "WebDavEnabled": False,
            "DicomServerEnabled": True,
            "DicomAet": self.aet,
            "DicomPort": self.dicom_port,
            "DicomCheckCalledAet": True,
            "DicomAlwaysAllowEcho": True,
            "DicomAlwaysAllowStore": True,
            "DicomCheckModalityHost": False,
            "DicomModalities": {},
            "OrthancPeers": {},
            "OverwriteInstances": False,
        }
        if self.dicomweb:
            c["DicomWeb"] = {"Enable": True, "Root": "/dicom-web/", "EnableWado": False}
        c.update(self.extra_config)
        return c

    def start(self, timeout=30):
        ok, why = available()
        if not ok:
            raise RuntimeError(why)
        for attempt in (1, 2):
            try:
                return self._start_once(timeout)
            except RuntimeError:
                clash = self._port_clash()
                self.stop()  # the exception carries the log tail; nothing is left behind
                if attempt == 2 or not clash:
                    raise
                # a port was taken between free_port() and Orthanc: once more, new ports

    def _port_clash(self):
        text = self.read_log().lower()
        # Orthanc 1.10.1: "The TCP port of the HTTP server is privileged or already in use"
        # (code 2003), "The TCP port of the DICOM server is privileged or already in use" (2004)
        return "already in use" in text or "cannot bind" in text

    def _start_once(self, timeout):
        self.dir = tempfile.mkdtemp(prefix="recond-orthanc-")
        self.config_path = os.path.join(self.dir, "orthanc.json")
        self.log_path = os.path.join(self.dir, "orthanc.log")
        self.http_port = free_port()
        self.dicom_port = free_port()
        for _ in range(5):
            if self.dicom_port != self.http_port:
                break
            self.dicom_port = free_port()
        with open(self.config_path, "w") as f:
            json.dump(self._config(), f, indent=2)
        t0 = time.monotonic()
        with open(self.log_path, "wb") as lf:
            # cwd is the temp dir, so any relative path Orthanc might use stays there
            self.proc = subprocess.Popen([ORTHANC, "--no-jobs", self.config_path],
                                         stdout=lf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.dir,
                                         env=dict(os.environ, HOME=self.dir),
                                         preexec_fn=_die_with_parent)
        _running.append(self)
        last = ""
        while time.monotonic() - t0 < timeout and self.proc.poll() is None:
            try:
                sysinfo = self.get("/system", timeout=2)
                # a stranger on a raced port would not have our AET and DICOM port
                if sysinfo.get("DicomAet") == self.aet and sysinfo.get("DicomPort") == self.dicom_port:
                    self.startup_s = time.monotonic() - t0
                    return self
                last = "GET /system answered %r" % (sysinfo,)
            except (OSError, ValueError) as e:  # URLError, HTTPError, refused, bad JSON
                last = "GET /system: %s" % e
            time.sleep(0.1)
        code = self.proc.poll()
        waited = time.monotonic() - t0
        tail = self.read_log().splitlines()[-40:]
        self._kill()
        why = ("exited with status %s" % code) if code is not None else ("no answer in %d s" % timeout)
        raise RuntimeError("Orthanc did not start (%s after %.1f s; %s); log %s:\n%s"
                           % (why, waited, last, self.log_path, "\n".join("  | " + ln for ln in tail)))

    def _kill(self, timeout=10):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self in _running:
            _running.remove(self)

    def stop(self, timeout=10):
        """SIGTERM, SIGKILL after timeout s; removes the temp dir; returns the exit status."""
        self._kill(timeout)
        code = self.proc.returncode if self.proc else None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        return code

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- REST ------------------------------------------------------------------

    def _request(self, path, timeout):
        req = urllib.request.Request(self.http_url + path)
        if self.username:
            tok = base64.b64encode(("%s:%s" % (self.username, self.password)).encode()).decode()
            req.add_header("Authorization", "Basic " + tok)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read()

    def get_bytes(self, path, timeout=30):
        """Body of GET http_url+path; raises urllib.error.HTTPError on a non-2xx answer."""
        return self._request(path, timeout)

    def get(self, path, timeout=30):
        """Parsed JSON of GET http_url+path."""
        return json.loads(self._request(path, timeout))

    # -- log -------------------------------------------------------------------

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def dump_log(self, tail=40):
        lines = self.read_log().splitlines()[-tail:]
        log("---- orthanc log (%s, last %d lines) ----" % (self.log_path, len(lines)))
        for ln in lines:
            log("  | " + ln)
        log("---- end of log ----")
