"""Shared machinery of the integration tests (tests/integration/test_*.py).

- Daemon: starts build/bin/recond on a free loopback port with a temporary
  store (and optionally a tokens config, another worker binary or more
  environment, e.g. LD_PRELOAD for tests/faults/iofault.c), waits for
  /readyz, stops it (SIGTERM, then SIGKILL), kills it with -9 on demand, and
  keeps its stderr in a log file that is printed when a check fails.
- Api: one request at a time over http.client, returning (status, headers,
  body, parsed JSON); every JSON answer of an operation in api/openapi.yaml is
  validated against the schema of its status (OpenAPI 3.0 -> JSON Schema
  draft 4: `nullable` becomes a union with null, $refs of
  #/components/... are resolved).
- Checks: check(name, ok, detail) prints one line per check ("ok - ..." or
  "FAIL - ..."); finish() exits 0, 1 (a check failed) or 77 (skipped).
- Every wait is bounded (deadline()); Daemon and temporary directories are
  cleaned up by atexit even when a test dies with an exception.

Daemon flags come from `recond --help` (server/base/config.c): --listen
127.0.0.1:0 with --port-file (no race for a free port), --store DIR,
--config FILE, --worker PATH, --token-file FILE.
"""

import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
BUILD = os.environ.get("RECOND_BUILD") or os.path.join(ROOT, "build")
BIN = os.path.join(BUILD, "bin")
RECOND = os.path.join(BIN, "recond")
WORKER = os.path.join(BIN, "recond-worker")
RECONCTL = os.path.join(BIN, "reconctl")
OPENAPI = os.path.join(ROOT, "api", "openapi.yaml")

_failed = []
_passed = [0]
_cleanups = []


def log(msg):
    print(msg, flush=True)


def check(name, ok, detail=""):
    if isinstance(detail, (bytes, bytearray)):
        detail = detail.decode("utf-8", "replace")
    detail = str(detail)
    if ok:
        _passed[0] += 1
        log("ok - %s%s" % (name, (": " + detail) if detail else ""))
    else:
        _failed.append(name)
        log("FAIL - %s%s" % (name, (": " + detail) if detail else ""))
        for d in Daemon.running:
            d.dump_log(tail=40)
    return ok


def skip(reason):
    log("SKIP: %s" % reason)
    if _failed:
        finish()  # a check that already failed is not hidden by the skip
    sys.exit(77)


def require_binaries(*paths):
    for p in paths or (RECOND, WORKER):
        if not os.access(p, os.X_OK):
            skip("%s is not built yet" % p)


def finish():
    log("%d checks passed, %d failed%s" % (_passed[0], len(_failed),
                                           (": " + "; ".join(_failed)) if _failed else ""))
    sys.exit(1 if _failed else 0)


# The peers' packages from PyPI, pinned as bench-peers' venv gets them: one rtk-venv for every
# test that needs RTK.
RTK_PKGS = ["numpy<2.5", "itk-rtk==2.7.0.post1"]
RTK_PROBE = "import numpy, itk; from itk import RTK"
ASTRA_PKGS = ["numpy<2.3", "astra-toolbox==2.5.0"]
ASTRA_PROBE = "import numpy, astra"


def run_in_peers_venv(test_file, venv_name, packages, probe):
    """Runs test_file again under a python where probe succeeds: bench-peers' venv
    ($RECOND_BUILD/peers-venv) when it has the packages, else $RECOND_BUILD/venv_name made from
    packages (pip_venv); exits with that run's status.  In that run (RECOND_PEERS_CHILD=1) it
    returns at once."""
    if os.environ.get("RECOND_PEERS_CHILD") == "1":
        return
    peers = os.path.join(BUILD, "peers-venv", "bin", "python")
    if os.access(peers, os.X_OK) and subprocess.run([peers, "-c", probe], capture_output=True).returncode == 0:
        py = peers
    else:
        py = pip_venv(os.path.join(BUILD, venv_name), packages, probe)
    sys.exit(subprocess.call([py, os.path.abspath(test_file)], env=dict(os.environ, RECOND_PEERS_CHILD="1")))


def pip_venv(venv, packages, probe):
    """The python of venv, a virtual environment with packages (pip specs) from PyPI, made on first
    use under a lock (several test runs may start at once) unless python -c probe already succeeds
    there.  RECOND_OFFLINE=1 and no such venv: skip (exit 77); pip failing: one failed check and
    finish(), with pip's last lines."""
    import fcntl
    py = os.path.join(venv, "bin", "python")
    what = " ".join(packages)

    def ready():
        return os.access(py, os.X_OK) and subprocess.run([py, "-c", probe], capture_output=True).returncode == 0

    if ready():
        return py
    if os.environ.get("RECOND_OFFLINE") == "1":
        skip("RECOND_OFFLINE=1 and %s has no %s (run once with PyPI reachable)" % (venv, what))
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return py
        log("creating %s with %s from PyPI" % (venv, what))
        for cmd in ([sys.executable, "-m", "venv", "--clear", venv],
                    [py, "-m", "pip", "install", "-q", "--retries", "2", "--timeout", "30"] + list(packages)):
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if p.returncode != 0:
                why = (p.stderr or p.stdout).strip().splitlines()[-6:]
                check("%s installs into %s (PyPI must be reachable; RECOND_OFFLINE=1 skips this test)" % (what, venv),
                      False, "%s: exit %d: %s" % (" ".join(cmd[:4]), p.returncode, " | ".join(why)))
                finish()
    if not ready():
        check("%s imports in %s after the install" % (what, venv), False)
        finish()
    return py


def run_main(fn):
    """Runs a test body; an exception is one failed check, not a traceback with daemons left behind."""
    try:
        fn()
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report anything, then clean up
        traceback.print_exc()
        check("test body ran to the end", False, "%s: %s" % (type(e).__name__, e))
    finish()


def _cleanup_all():
    for d in list(Daemon.running):
        d.stop()
    for fn in reversed(_cleanups):
        try:
            fn()
        except Exception:  # noqa: BLE001
            pass


atexit.register(_cleanup_all)
for _sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(_sig, lambda s, f: sys.exit(128 + s))


def child_pids(ppid):
    """Pids of the living processes whose parent is ppid (a daemon's workers, a postmaster's children)."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == ppid and fields[0] != "Z":
            out.append(int(p))
    return out


def pid_alive(pid):
    """Whether process pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def tempdir(prefix="recond-it-"):
    d = tempfile.mkdtemp(prefix=prefix)
    _cleanups.append(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def deadline(seconds):
    t = time.monotonic() + seconds
    return lambda: time.monotonic() < t


class Daemon:
    running = []

    def __init__(self, store=None, config=None, worker=None, extra=None, env=None):
        self.store = store or tempdir("recond-store-")
        self.config = config
        self.worker = worker
        self.extra = list(extra or [])
        self.env = dict(env or {})  # added to the environment of the daemon (and so of its workers)
        self.port = None
        self.portfile = None
        self.proc = None
        self.logdir = tempdir("recond-log-")
        self.logpath = None
        self.starts = 0

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def args(self):
        a = [RECOND, "--listen", "127.0.0.1:0", "--port-file", self.portfile, "--store", self.store]
        if self.config:
            a += ["--config", self.config]
        if self.worker:
            a += ["--worker", self.worker]
        return a + self.extra

    def start(self, timeout=30, ready=True):
        """Starts on a port the daemon picks (--listen 127.0.0.1:0, --port-file) and waits for /readyz
        (ready=False: for /healthz only, e.g. while its device probe has not answered)."""
        self.starts += 1
        self.portfile = os.path.join(self.logdir, "port-%d" % self.starts)
        self.logpath = os.path.join(self.logdir, "recond-%d.log" % self.starts)
        with open(self.logpath, "wb") as lf:
            self.proc = subprocess.Popen(self.args(), stdout=lf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL,
                                         env=dict(os.environ, **self.env) if self.env else None)
        Daemon.running.append(self)
        alive = deadline(timeout)
        while alive() and self.proc.poll() is None:
            try:
                with open(self.portfile) as f:
                    self.port = int(f.read().strip())
                st, _, _, _ = Api(self.url, validate=False).get("/readyz" if ready else "/healthz", timeout=2)
                if st == 200:
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        self.dump_log()
        self._reap()
        raise RuntimeError("recond did not become ready within %d s (exit %s, args %s)"
                           % (timeout, self.proc.poll(), " ".join(self.args())))

    def read_log(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def dump_log(self, tail=60):
        lines = self.read_log().splitlines()[-tail:]
        log("---- recond log (%s, last %d lines) ----" % (self.logpath, len(lines)))
        for ln in lines:
            log("  | " + ln)
        log("---- end of log ----")

    def _reap(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self in Daemon.running:
            Daemon.running.remove(self)

    def stop(self, timeout=20):
        """SIGTERM, then SIGKILL after timeout; returns the exit status."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reap()
        return self.proc.returncode

    def kill9(self):
        """kill -9 the daemon and its whole process group is NOT touched: workers
        are the daemon's business (they must notice the parent is gone)."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._reap()

    def api(self, token=None):
        return Api(self.url, token=token)


# -- OpenAPI validation --------------------------------------------------------

class _Spec:
    doc = None
    routes = None

    @classmethod
    def load(cls):
        if cls.doc is not None or not os.path.exists(OPENAPI):
            return cls.doc
        import yaml  # python3-yaml
        with open(OPENAPI) as f:
            cls.doc = yaml.safe_load(f)
        cls.routes = []
        for path, item in cls.doc.get("paths", {}).items():
            rx = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$"
            cls.routes.append((re.compile(rx), path, item))
        return cls.doc

    @classmethod
    def convert(cls, node):
        """OpenAPI 3.0 schema -> JSON Schema draft 4, with $refs inlined."""
        if isinstance(node, list):
            return [cls.convert(x) for x in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = cls.doc
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            return cls.convert(target)
        out = {k: cls.convert(v) for k, v in node.items()
               if k not in ("nullable", "description", "example", "format", "default")}
        if node.get("nullable"):
            return {"anyOf": [out, {"type": "null"}]}
        return out

    @classmethod
    def response_schema(cls, method, path, status):
        """(found_operation, schema or None) for an answer."""
        if cls.load() is None:
            return False, None
        for rx, _tmpl, item in cls.routes:
            if rx.match(path):
                op = item.get(method.lower())
                if not op:
                    return False, None
                resp = op.get("responses", {}).get(str(status))
                if resp is None:
                    return True, "undocumented"
                while "$ref" in resp:
                    resp = cls._deref(resp["$ref"])
                sch = resp.get("content", {}).get("application/json", {}).get("schema")
                return True, cls.convert(sch) if sch else None
        return False, None

    @classmethod
    def _deref(cls, ref):
        target = cls.doc
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
        return target


class Validation:
    """Counts of answers validated against api/openapi.yaml, per test process."""
    validated = 0
    problems = []

    @classmethod
    def report(cls):
        if _Spec.load() is None:
            check("openapi: api/openapi.yaml exists", False, OPENAPI)
            return
        check("openapi: %d answers match api/openapi.yaml" % cls.validated, not cls.problems,
              "; ".join(cls.problems[:5]))


def validate_answer(method, path, status, ctype, doc):
    import jsonschema  # python3-jsonschema
    p = urllib.parse.urlsplit(path).path
    found, schema = _Spec.response_schema(method, p, status)
    if not found:
        return
    if schema == "undocumented":
        Validation.problems.append("%s %s answered %d, which the contract does not list" % (method, p, status))
        return
    if schema is None:
        return
    if "json" not in (ctype or ""):
        Validation.problems.append("%s %s %d: Content-Type %s, not JSON" % (method, p, status, ctype))
        return
    try:
        jsonschema.Draft4Validator(schema).validate(doc)
        Validation.validated += 1
    except jsonschema.ValidationError as e:
        Validation.problems.append("%s %s %d: %s at %s" % (method, p, status, e.message[:200],
                                                           "/".join(str(x) for x in e.absolute_path)))


# -- HTTP ------------------------------------------------------------------------

class Api:
    """Requests to one daemon.  Each returns (status, headers dict lower-cased, body bytes, json or None)."""

    def __init__(self, url, token=None, validate=True):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.token = token
        self.validate = validate

    def request(self, method, path, body=None, headers=None, timeout=30, token=Ellipsis):
        h = dict(headers or {})
        tok = self.token if token is Ellipsis else token
        if tok:
            h["Authorization"] = "Bearer " + tok
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            try:
                c.request(method, path, body=body, headers=h)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon may answer (413, 401, ...) before it has read the whole body
            r = c.getresponse()
            data = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
            status = r.status
        finally:
            c.close()
        doc = None
        ctype = hdrs.get("content-type", "")
        if data and "json" in ctype:
            try:
                doc = json.loads(data)
            except ValueError:
                doc = None
        if self.validate:
            validate_answer(method, path, status, ctype, doc)
        return status, hdrs, data, doc

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post_json(self, path, doc, **kw):
        body = doc if isinstance(doc, (bytes, str)) else json.dumps(doc)
        if isinstance(body, str):
            body = body.encode()
        return self.request("POST", path, body=body, headers={"Content-Type": "application/json"}, **kw)

    def put(self, path, data, **kw):
        return self.request("PUT", path, body=data, headers={"Content-Type": "application/octet-stream"}, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    # conveniences over the API
    def create(self, spec):
        st, _, body, doc = self.post_json("/v1/jobs", spec)
        if st != 201:
            raise RuntimeError("POST /v1/jobs answered %d: %s" % (st, body[:300]))
        return doc

    def job(self, jid):
        st, _, body, doc = self.get("/v1/jobs/" + jid)
        if st != 200:
            raise RuntimeError("GET job answered %d: %s" % (st, body[:300]))
        return doc

    def wait_state(self, jid, states, timeout=120, poll=0.1):
        """Polls until the job is in one of states; returns the job (or the last one seen on timeout)."""
        alive = deadline(timeout)
        j = self.job(jid)
        while j["state"] not in states and alive():
            time.sleep(poll)
            j = self.job(jid)
        return j

    def job_ids(self):
        st, _, body, doc = self.get("/v1/jobs?limit=1000")
        if st != 200:
            raise RuntimeError("GET /v1/jobs answered %d: %s" % (st, body[:300]))
        return [(j["id"], j["state"], j.get("views_present")) for j in doc["jobs"]]


def store_files(store):
    """Names and sizes of every file under the store except SQLite's own (they change on reads)."""
    out = {}
    for dirpath, _dirs, files in os.walk(store):
        for f in files:
            if re.search(r"\.(db|sqlite3?)(-wal|-shm|-journal)?$", f) or f.endswith(("-wal", "-shm")):
                continue
            if f.startswith("audit.log"):
                continue  # the audit log records refused requests too, by design
            p = os.path.join(dirpath, f)
            try:
                out[os.path.relpath(p, store)] = os.path.getsize(p)
            except OSError:
                pass
    return out


def f32(values):
    import array
    return array.array("f", values).tobytes()


def read_f32(data):
    import array
    a = array.array("f")
    a.frombytes(data)
    return a


def sirt_runs(iterations):
    """SIRT that runs every iteration asked for: from 0 and without the stagnation stop (its
    defaults start from FDK's volume and stop after a few, docs/algorithms.md), the tests' job of
    a known length and progress."""
    return {"name": "sirt", "iterations": iterations, "initial": "zero", "stop": {"stagnation": 0}}


def small_spec(n=16, views=24, nu=24, nv=24, algorithm=None, autostart=False, label="small"):
    """A small, cheap cone job (spec dict)."""
    import phantom
    s = phantom.cone_spec(n=n, voxel=2.0, views=views, nu=nu, nv=nv, du=3.0, dv=3.0,
                          algorithm=algorithm or sirt_runs(3), label=label)
    s["autostart"] = autostart
    return s


def proj_bytes(spec):
    g = spec["geometry"]
    return 4 * g["angles"]["count"] * g["detector"]["nu"] * g["detector"]["nv"]


def view_bytes(spec):
    """Bytes of one view of a cone job (detector nu x nv float32)."""
    d = spec["geometry"]["detector"]
    return 4 * d["nu"] * d["nv"]


# -- engine availability and fake workers --------------------------------------------

_engine = {}


def require_engine(api):
    """A tiny job must reconstruct: every build has the CPU engine, so a probe
    that fails (unsupported or otherwise) fails the test; it is never a skip."""
    if _engine.get("ok"):
        return
    spec = small_spec(n=8, views=8, nu=8, nv=8, label="engine-probe")
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], b"\0" * proj_bytes(spec))
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    j = api.wait_state(j["id"], ("succeeded", "failed", "cancelled"), timeout=60)
    err = j.get("error") or {}
    ok = j["state"] == "succeeded"
    check("engine probe job succeeds", ok, "%s: %s" % (err.get("code"), err.get("message")))
    if not ok:
        finish()
    api.delete("/v1/jobs/%s" % j["id"])
    _engine["ok"] = True


def fake_worker(kind):
    """A stand-in for recond-worker (daemon option --worker), as a shell script:
    crash      SIGSEGV at once
    crash-once SIGSEGV on the first run, then exec the real worker
    exit7      exit status 7 without a report (neither failed nor cancelled)
    slow       one progress line per 0.1 s on fd 3 for 60 s; SIGTERM -> exit 3
               (cancelled), as the real worker's protocol says (worker_proto.h)"""
    d = tempdir("recond-fake-")
    mark = os.path.join(d, "crashed-once")
    body = {
        "crash": "kill -SEGV $$\n",
        "crash-once": "if [ ! -e '%s' ]; then touch '%s'; kill -SEGV $$; fi\nexec '%s' \"$@\"\n"
                      % (mark, mark, WORKER),
        "exit7": "exit 7\n",
        "slow": "trap 'exit 3' TERM INT\ni=0\nwhile [ $i -lt 600 ]; do\n"
                "  echo \"{\\\"type\\\":\\\"progress\\\",\\\"iteration\\\":$i,\\\"of\\\":600,"
                "\\\"elapsed_s\\\":0}\" >&3\n  sleep 0.1\n  i=$((i+1))\ndone\nexit 2\n",
    }[kind]
    path = os.path.join(d, "worker-%s.sh" % kind)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o700)
    return path
