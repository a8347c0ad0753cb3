"""Several recond daemons on one PostgreSQL database and one spool directory
(docs/cluster.md), for tests/integration/test_cluster.py and
bench/cluster_bench.py.

- Postgres: a private PostgreSQL 15 cluster started with pg_cluster.sh
  (initdb + pg_ctl into a temporary directory, a free port of 127.0.0.1, as
  the user postgres when run as root); stopped and removed at exit, also when
  the test dies.  kill9() sends SIGKILL to the postmaster (the pid in
  DIR/data/postmaster.pid) and waits for its backends to go; restart() starts
  it again with pg_cluster.sh's own command line on the same port.
  missing() says why the cluster cannot run here (PostgreSQL 15 binaries or
  the postgres user absent), which is a skip (77).
- Node: a recond_harness.Daemon with --store URI --spool DIR --node NAME and
  a config file (lease_s, max_attempts, worker_threads); its logs are kept
  over restarts, so runs() counts every `event=job_running` line it wrote.
- Cluster: a Postgres, a shared spool and N nodes (node-1 .. node-N) on
  loopback; kill9(i), restart(i), runs_per_node(), job_runs().
- SseRecorder: a thread reading one node's GET /v1/jobs/{id}/events with
  the arrival time of each event; sse_lag(local, remote) gives how far the
  progress events of a node that does not run the job (polled from the
  store) trail those of the node that runs it, iteration by iteration.
- write_worker(dir, name, body): a stand-in worker script (bench/cluster_bench.py's
  exits at once, so that it measures claims, not reconstructions).
"""

import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

from recond_harness import Daemon, child_pids, deadline, log, pid_alive, skip, tempdir, _cleanups

HERE = os.path.dirname(os.path.abspath(__file__))
PG_CLUSTER = os.path.join(HERE, "pg_cluster.sh")
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")

RUNNING_RX = re.compile(r"event=job_running\b(.*)$", re.M)


def _kv(text):
    """key=value pairs of a log line's tail (values unquoted or "quoted")."""
    return dict(m.group(1, 3) if m.group(3) is not None else (m.group(1), m.group(2))
                for m in re.finditer(r'(\w+)=(?:"([^"]*)"|(\S*))', text))


def pg_missing():
    """Why a private PostgreSQL 15 cluster cannot start here, or None."""
    if not os.access(os.path.join(PG_BIN, "initdb"), os.X_OK):
        return "no %s/initdb (Debian's postgresql-15)" % PG_BIN
    if os.getuid() == 0:
        try:
            import pwd
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no user postgres to run the cluster"
    return None


def _as_pg(argv):
    return (["runuser", "-u", "postgres", "--"] + argv) if os.getuid() == 0 else argv


class Postgres:
    def __init__(self):
        self.dir = None
        self.uri = None
        self.port = None

    def start(self):
        why = pg_missing()
        if why:
            skip("PostgreSQL 15 is not installed: " + why)
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="recond-pgc-")
        _cleanups.append(self.stop)
        p = subprocess.run(["bash", PG_CLUSTER, "start", self.dir], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if p.returncode == 77:
            skip("PostgreSQL 15: " + p.stderr.decode(errors="replace").strip())
        if p.returncode != 0:
            raise RuntimeError("pg_cluster.sh start failed (%d): %s" % (p.returncode, p.stderr.decode(errors="replace")))
        self.uri = p.stdout.decode().strip().splitlines()[-1]
        with open(os.path.join(self.dir, "port")) as f:
            self.port = int(f.read().strip())
        log("cluster: PostgreSQL at %s (%s)" % (self.uri, self.dir))
        return self

    def stop(self):
        if self.dir and os.path.isdir(self.dir):
            subprocess.run(["bash", PG_CLUSTER, "stop", self.dir], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
            # a postmaster killed with -9 and not restarted leaves children behind
            self._reap_orphans()
            subprocess.run(["rm", "-rf", self.dir])
        self.dir = None

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
                pid = int(f.readline().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def _reap_orphans(self):
        """Backends of a killed postmaster still running: SIGKILL (their data dir is ours)."""
        if not self.dir:
            return
        data = os.path.join(self.dir, "data")
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read()
                if data.encode() in cmd or ("-k %s" % self.dir).encode() in cmd.replace(b"\0", b" "):
                    os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass

    def kill9(self):
        """SIGKILL to the postmaster; waits until it and its children are gone (backends
        notice the postmaster's death; those that linger past 10 s get SIGKILL too)."""
        pid = self.postmaster_pid()
        if not pid:
            raise RuntimeError("no running postmaster in %s" % self.dir)
        kids = child_pids(pid)
        os.kill(pid, signal.SIGKILL)
        alive = deadline(10)
        while alive() and (os.path.exists("/proc/%d" % pid) or any(pid_alive(k) for k in kids)):
            time.sleep(0.05)
        for k in kids:
            if pid_alive(k):
                try:
                    os.kill(k, signal.SIGKILL)
                except OSError:
                    pass
        alive = deadline(10)
        while alive() and any(pid_alive(k) for k in kids):
            time.sleep(0.05)
        return pid

    def restart(self):
        """The start command of pg_cluster.sh, on the same data directory and port.  A
        postmaster.pid whose process is dead, or a zombie its parent has not reaped yet (the
        new postmaster's kill(pid, 0) would take it for a running server), is removed first,
        as after a crash."""
        pidfile = os.path.join(self.dir, "data", "postmaster.pid")
        try:
            with open(pidfile) as f:
                old = int(f.readline().strip())
            if not pid_alive(old):
                os.unlink(pidfile)
        except (OSError, ValueError):
            pass
        p = subprocess.run(_as_pg([os.path.join(PG_BIN, "pg_ctl"), "-D", os.path.join(self.dir, "data"),
                                   "-l", os.path.join(self.dir, "server.log"), "-w", "-t", "60", "-o",
                                   "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off" % (self.port, self.dir),
                                   "start"]),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if p.returncode != 0:
            raise RuntimeError("pg_ctl start failed (%d): %s\n%s" % (p.returncode, p.stdout.decode(errors="replace"),
                                                                     self.server_log(30)))
        return self

    def server_log(self, tail=40):
        try:
            with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
                return "\n".join(f.read().splitlines()[-tail:])
        except OSError:
            return ""


class Node(Daemon):
    """One recond of the cluster."""

    def __init__(self, name, uri, spool, config, worker=None, env=None):
        Daemon.__init__(self, store=uri, config=config, worker=worker,
                        extra=["--spool", spool, "--node", name], env=env)
        self.name = name

    def logs(self):
        """Every log this node wrote, over all its starts."""
        out = []
        for k in range(1, self.starts + 1):
            try:
                with open(os.path.join(self.logdir, "recond-%d.log" % k), "rb") as f:
                    out.append(f.read().decode("utf-8", "replace"))
            except OSError:
                pass
        return "\n".join(out)

    def runs(self):
        """[(job id, node= field or None)] of every event=job_running line of this node."""
        out = []
        for m in RUNNING_RX.finditer(self.logs()):
            kv = _kv(m.group(1))
            out.append((kv.get("id"), kv.get("node")))
        return out


class Cluster:
    def __init__(self, n, worker=None, lease_s=2, max_attempts=3, worker_threads=1, config=None, env=None):
        self.pg = Postgres().start()
        self.spool = tempdir("recond-spool-")
        cfg = {"lease_s": lease_s, "max_attempts": max_attempts, "worker_threads": worker_threads}
        cfg.update(config or {})
        self.config_doc = cfg
        self.config = os.path.join(tempdir("recond-ccfg-"), "recond.json")
        with open(self.config, "w") as f:
            json.dump(cfg, f)
        self.nodes = [Node("node-%d" % (i + 1), self.pg.uri, self.spool, self.config, worker=worker, env=env)
                      for i in range(n)]

    def start(self, timeout=60):
        for nd in self.nodes:
            nd.start(timeout=timeout)
        return self

    def node(self, name):
        return next(nd for nd in self.nodes if nd.name == name)

    def api(self, i):
        return self.nodes[i].api()

    def kill9(self, i):
        self.nodes[i].kill9()

    def restart(self, i, timeout=60):
        return self.nodes[i].start(timeout=timeout)

    def stop(self):
        for nd in self.nodes:
            nd.stop()
        self.pg.stop()

    def job_runs(self):
        """{job id: [node names whose log shows it running]} (the node that logged it)."""
        out = {}
        for nd in self.nodes:
            for jid, _field in nd.runs():
                out.setdefault(jid, []).append(nd.name)
        return out

    def runs_per_node(self):
        return {nd.name: len(nd.runs()) for nd in self.nodes}

    def node_fields_logged(self):
        """Whether every job_running line carries node=NAME of the node that wrote it."""
        bad = []
        for nd in self.nodes:
            for jid, field in nd.runs():
                if field != nd.name:
                    bad.append("%s logged id=%s node=%s" % (nd.name, jid, field))
        return bad

    def spool_file(self, jid, name):
        return os.path.join(self.spool, "jobs", jid, name)


def write_worker(path_dir, name, body):
    """A stand-in worker script (answers --devices with no devices)."""
    p = os.path.join(path_dir, name)
    with open(p, "w") as f:
        f.write("#!/bin/sh\ncase \"$1\" in --devices) echo '{\"devices\":[]}'; exit 0;; esac\n" + body)
    os.chmod(p, 0o700)
    return p


class SseRecorder(threading.Thread):
    """Reads GET /v1/jobs/{id}/events of one node; keeps (monotonic time, event, data)."""

    def __init__(self, node, jid):
        threading.Thread.__init__(self, daemon=True)
        self.node, self.jid = node, jid
        self.events = []
        self.status = None
        self.error = None
        self.conn = None

    def run(self):
        try:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.node.port, timeout=60)
            self.conn.request("GET", "/v1/jobs/%s/events" % self.jid, headers={"Accept": "text/event-stream"})
            r = self.conn.getresponse()
            self.status = r.status
            if r.status != 200:
                return
            name, data = "message", []
            while True:
                line = r.readline()
                if not line:
                    return
                line = line.decode("utf-8", "replace").rstrip("\r\n")
                if not line:
                    if data:
                        try:
                            doc = json.loads("\n".join(data))
                        except ValueError:
                            doc = None
                        self.events.append((time.monotonic(), name, doc))
                    name, data = "message", []
                    continue
                if line.startswith(":"):
                    continue
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    name = value
                elif field == "data":
                    data.append(value)
        except (OSError, http.client.HTTPException) as e:
            self.error = "%s: %s" % (type(e).__name__, e)

    def progress_times(self):
        """{iteration: first time seen} of the progress events."""
        out = {}
        for t, name, doc in self.events:
            if name == "progress" and isinstance(doc, dict) and isinstance(doc.get("iteration"), int):
                out.setdefault(doc["iteration"], t)
        return out

    def close(self):
        try:
            if self.conn and self.conn.sock:
                self.conn.sock.shutdown(2)
        except OSError:
            pass


def sse_lag(local, remote, t_from=None, t_to=None):
    """Lags (s) of remote's progress events behind local's for the iterations both saw."""
    lt, rt = local.progress_times(), remote.progress_times()
    out = []
    for k, t in lt.items():
        if k in rt and (t_from is None or t >= t_from) and (t_to is None or t <= t_to):
            out.append(rt[k] - t)
    return out
