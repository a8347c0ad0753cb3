#!/usr/bin/env python3
"""Durability soak: several clients use recond while it is kill -9'd at
random moments; after every restart the store must hold everything that was
acknowledged (docs/server.md "Durability soak").

  tests/soak/soak.py --kills N [--seed S] [--clients C] [--worker soak|real]
  make soak KILLS=1000 [SEED=1]            (mk/soak.mk)
  tests/integration/test_soak.py           (make test: 50 kills)

Each client thread owns its jobs and, chosen by a seeded RNG: creates small
cone and fan jobs, uploads whole stacks and single views (in any order,
sometimes sending a view again with new bytes), starts, cancels (POST
/cancel where the daemon has it, else DELETE), downloads volumes and deletes
finished jobs.  The main thread kills the daemon (-9; sometimes while it is
still starting), waits for its workers to die, starts it on the same store
and, with the clients held and the workers parked (the stand-in worker waits
while a pause file exists), checks the store against what the clients were
told:

- losses: an acknowledged job that is gone; a job whose state went back
  (created < receiving < queued/running < final; running may become queued,
  since a restart re-queues it; a final state never changes; a cancel
  answered 202 must not come back queued); an acknowledged view that is
  absent although no later upload of it was tried; spec.json or
  projections.f32 missing.
- corruptions: a view marked present (not in views_missing) whose bytes in
  projections.f32, at the offsets of docs/geometry.md "Projection stack
  layout", are neither the acknowledged ones nor those of an upload of it
  whose answer was lost; spec.json not the body that was posted; a
  succeeded job whose volume.f32 (and any volume downloaded) is not the
  reference for its projections; a job nobody created; a deleted job back.
- orphans: a spool directory without a job, a temporary (.NAME.tmp), any
  other file, or a volume.f32 of a job that has not succeeded.

The stand-in worker (soak_worker.py) makes the reference exact: its volume
is SHAKE-256 of projections.f32.  --worker real runs recond-worker instead
(engine cpu, tiny jobs): then a succeeded volume must have the right size
and equal every other volume reconstructed from the same projections (the
first one seen is the reference).

Prints one line per restart with -v, and at the end
  soak: kills=K acks=A losses=L corruptions=C orphans=O
and the first problems found; exit 0 when L, C, O and the count of
unexpected answers (5xx) are all 0.  Every wait is bounded.
"""

import argparse
import hashlib
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, HERE)

import recond_harness as H  # noqa: E402
import soak_worker  # noqa: E402

RANK = {"created": 0, "receiving": 1, "queued": 2, "running": 2, "succeeded": 4, "failed": 4, "cancelled": 4}
FINAL = ("succeeded", "failed", "cancelled")
MAX_JOBS = 3          # live jobs per client
REQ_TIMEOUT = 20.0
KIND_NAME = {"losses": "loss", "corruptions": "corruption", "orphans": "orphan"}


class NotSent(Exception):
    """The request never reached a daemon (connection refused): it had no effect."""


class Unknown(Exception):
    """The request may have reached the daemon, but its answer was lost."""


# -- the model of what the clients were told -----------------------------------

class View:
    __slots__ = ("acked", "pending", "dirty")

    def __init__(self):
        self.acked = None    # bytes of the last upload answered 200
        self.pending = []    # bytes of uploads since then whose answer was lost
        self.dirty = False   # an upload since the last 200 may have cleared the view


class Job:
    def __init__(self, client, label, spec, body):
        self.id = None
        self.client = client
        self.label = label
        self.spec = spec
        self.body = body
        g = spec["geometry"]
        self.nviews = g["angles"]["count"]
        self.nu = g["detector"]["nu"]
        if g["type"] in ("fan", "parallel"):
            self.rows = g["slices"]
            self.view_stride, self.row_stride = self.nu, self.nviews * self.nu
        else:
            self.rows = g["detector"]["nv"]
            self.view_stride, self.row_stride = self.nu * self.rows, self.nu
        self.view_bytes = 4 * self.nu * self.rows
        self.proj_bytes = self.view_bytes * self.nviews
        self.vol_bytes = soak_worker.volume_bytes(spec)
        self.views = [View() for _ in range(self.nviews)]
        self.state = "created"   # last state the daemon told
        self.min_rank = 0
        self.final = None        # a final state, once told
        self.cancel_req = False  # a cancel was answered 202
        self.deleted = None      # None, "acked" or "unknown"
        self.downloaded = False

    def rows_of(self, k):
        """(file offset, length) of each row of view k, in the order of the view's bytes."""
        rb = 4 * self.nu
        return [(4 * (k * self.view_stride + j * self.row_stride), rb) for j in range(self.rows)]

    def view_from(self, stack, k):
        return b"".join(bytes(stack[o:o + n]) for o, n in self.rows_of(k))

    def stack_of(self, contents):
        out = bytearray(self.proj_bytes)
        for k, c in enumerate(contents):
            for j, (o, n) in enumerate(self.rows_of(k)):
                out[o:o + n] = c[j * n:(j + 1) * n]
        return bytes(out)


class Gate:
    """Holds the clients while the daemon is down and the store is checked."""

    def __init__(self):
        self.cond = threading.Condition()
        self.is_open = False
        self.active = 0
        self.stopping = False

    def enter(self):
        with self.cond:
            while not self.is_open and not self.stopping:
                self.cond.wait(0.5)
            if self.stopping:
                return False
            self.active += 1
            return True

    def leave(self):
        with self.cond:
            self.active -= 1
            self.cond.notify_all()

    def close(self, timeout=60):
        end = time.monotonic() + timeout
        with self.cond:
            self.is_open = False
            while self.active and time.monotonic() < end:
                self.cond.wait(0.1)
            return self.active == 0

    def open(self):
        with self.cond:
            self.is_open = True
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.lock = threading.Lock()
        self.gate = Gate()
        self.addr = None
        self.cancel_mode = None   # "post" or "delete", found on first use
        self.pending_creates = {}  # label -> Job whose create was not answered
        self.clients = []
        self.jobs_by_id = {}
        self.counts = {k: 0 for k in ("kills", "kills_starting", "acks", "losses", "corruptions", "orphans",
                                      "unexpected", "creates", "views", "stacks", "starts", "cancels",
                                      "deletes", "downloads", "views_checked", "cancels_202", "volumes_checked",
                                      "adopted", "restarts", "orphans_removed")}
        self.problems = []
        self.real_refs = {}       # sha256(projections) -> volume (worker "real")
        self.orphans_seen = set()

    # -- bookkeeping ---------------------------------------------------------
    def count(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def problem(self, kind, msg):
        with self.lock:
            self.counts[kind] += 1
            self.problems.append("%s: %s" % (KIND_NAME.get(kind, kind), msg))
            if self.args.verbose:
                H.log("  ! %s: %s" % (kind, msg))

    # -- HTTP ------------------------------------------------------------------
    def request(self, method, path, body=None, ctype=None):
        """(status, body bytes, JSON or None).  NotSent or Unknown when there is no answer."""
        host, port = self.addr
        c = http.client.HTTPConnection(host, port, timeout=REQ_TIMEOUT)
        try:
            try:
                c.connect()
            except OSError as e:
                raise NotSent(str(e))
            h = {"Content-Type": ctype} if ctype else {}
            try:
                try:
                    c.request(method, path, body=body, headers=h)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the daemon may answer before it read the body; getresponse says
                r = c.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as e:
                raise Unknown(str(e))
            doc = None
            if data and "json" in (r.getheader("Content-Type") or ""):
                try:
                    doc = json.loads(data)
                except ValueError:
                    doc = None
            if r.status >= 500:
                self.problem("unexpected", "%s %s answered %d: %s" % (method, path, r.status, data[:200]))
            return r.status, data, doc
        finally:
            c.close()

    # -- the model ---------------------------------------------------------------
    def told(self, job, doc, where, restarted=False):
        """The daemon told a job's state (any 2xx answer with the job, or the listing; restarted:
        the first look after a restart)."""
        st = doc.get("state")
        if st not in RANK:
            return
        # After a 202 cancel the job may still run (the worker stops within an iteration) and
        # end in any final state; after a restart it must not be queued or run again.
        gone_back = ("created", "receiving", "queued", "running") if restarted else ("created", "receiving", "queued")
        if job.final and st != job.final:
            self.problem("losses", "job %s was %s, now %s (%s)" % (job.id, job.final, st, where))
        elif not job.final and RANK[st] < job.min_rank:
            self.problem("losses", "job %s went back to %s (%s)" % (job.id, st, where))
        elif job.cancel_req and st in gone_back:
            self.problem("losses", "job %s: its cancel was answered 202, now %s (%s)" % (job.id, st, where))
            job.cancel_req = False  # counted once
        job.state = st
        job.min_rank = max(job.min_rank, RANK[st])
        if st in FINAL and not job.final:
            job.final = st


class Client(threading.Thread):
    def __init__(self, soak, idx):
        super().__init__(name="client-%d" % idx, daemon=True)
        self.s = soak
        self.idx = idx
        self.rng = random.Random("%d-%d" % (soak.args.seed, idx))
        self.jobs = []
        self.n = 0

    def run(self):
        while self.s.gate.enter():
            try:
                self.step()
            except (NotSent, Unknown):
                pass
            except Exception as e:  # noqa: BLE001 - a bug in the soak must not hang it
                self.s.problem("unexpected", "client %d: %s: %s" % (self.idx, type(e).__name__, e))
            finally:
                self.s.gate.leave()
            time.sleep(self.rng.uniform(0.0, 0.01))

    # -- choices ---------------------------------------------------------------
    def live(self):
        return [j for j in self.jobs if j.deleted is None and j.id]

    def step(self):
        live = self.live()
        r = self.rng.random()
        if len(live) < 1 or (len(live) < MAX_JOBS and r < 0.2):
            return self.create()
        j = self.rng.choice(live)
        st = j.state
        r = self.rng.random()
        if st in ("created", "receiving"):
            complete = all(v.acked is not None and not v.dirty for v in j.views)
            if r < 0.02:
                return self.cancel(j)
            if complete and r < 0.6:
                return self.start_job(j)
            if r < 0.3:
                return self.upload_stack(j)
            return self.upload_views(j)
        if st in ("queued", "running"):
            if r < 0.04:
                return self.cancel(j)
            time.sleep(0.01)
            return self.get(j)
        if st == "succeeded" and not j.downloaded and r < 0.7:
            return self.download(j)
        if r < 0.6:
            return self.delete(j)
        return self.get(j)

    def make_spec(self, label):
        rng = self.rng
        it = rng.randint(1, 6)
        if rng.random() < 0.2:
            views, nu = rng.randint(4, 24), rng.choice((8, 16, 32))
            g = {"type": rng.choice(("fan", "parallel")), "slices": rng.randint(1, 3),
                 "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views},
                 "detector": {"nu": nu, "du_mm": 1.5, "offset_u_mm": 0.0}}
            if g["type"] == "fan":
                g.update({"source_isocenter_mm": 100.0, "source_detector_mm": 200.0})
            spec = {"label": label, "geometry": g,
                    "volume": {"nx": 8, "ny": 8, "nz": g["slices"], "voxel_mm": [1.0, 1.0, 1.0]},
                    "algorithm": H.sirt_runs(it), "execution": {"engine": "cpu"}}
        else:
            import phantom
            big = rng.random() < 0.1
            views = rng.randint(24, 40) if big else rng.randint(4, 16)
            nu = 64 if big else rng.choice((8, 16, 32))
            nv = 64 if big else rng.choice((8, 16))
            spec = phantom.cone_spec(n=8, voxel=2.0, views=views, nu=nu, nv=nv, du=3.0, dv=3.0,
                                     algorithm=H.sirt_runs(it), label=label)
        spec["priority"] = rng.randint(0, 9)
        spec["autostart"] = rng.random() < 0.3
        return spec

    # -- operations ----------------------------------------------------------------
    def create(self):
        self.n += 1
        label = "soak-%d-c%d-%d" % (self.s.args.seed, self.idx, self.n)
        spec = self.make_spec(label)
        body = json.dumps(spec).encode()
        job = Job(self.idx, label, spec, body)
        with self.s.lock:
            self.s.pending_creates[label] = job
        try:
            st, data, doc = self.s.request("POST", "/v1/jobs", body, "application/json")
        except NotSent:
            with self.s.lock:
                self.s.pending_creates.pop(label, None)
            raise
        with self.s.lock:
            self.s.pending_creates.pop(label, None)
        if st != 201 or not doc:
            self.s.problem("unexpected", "create answered %d: %s" % (st, data[:200]))
            return
        job.id = doc["id"]
        self.s.count("acks")
        self.s.count("creates")
        self.jobs.append(job)
        with self.s.lock:
            self.s.jobs_by_id[job.id] = job
        self.s.told(job, doc, "create")

    def _upload(self, job, path, ks, contents, body):
        before = [(job.views[k].dirty, list(job.views[k].pending)) for k in ks]
        for k, c in zip(ks, contents):
            job.views[k].dirty = True
            job.views[k].pending.append(c)
        try:
            st, data, doc = self.s.request("PUT", path, body, "application/octet-stream")
        except NotSent:
            for k, (d, p) in zip(ks, before):
                job.views[k].dirty, job.views[k].pending = d, p
            raise
        if st == 200:
            for k, c in zip(ks, contents):
                v = job.views[k]
                v.acked, v.pending, v.dirty = c, [], False
            self.s.count("acks")
            self.s.told(job, doc, "upload")
            return True
        for k, c in zip(ks, contents):  # answered: these bytes are not marked present
            try:
                job.views[k].pending.remove(c)
            except ValueError:
                pass
        if st == 409 and doc:
            self.refresh(job)
        elif st != 409:
            self.s.problem("unexpected", "PUT %s answered %d: %s" % (path, st, data[:200]))
        return False

    def upload_stack(self, job):
        contents = [self.rng.randbytes(job.view_bytes) for _ in range(job.nviews)]
        if self._upload(job, "/v1/jobs/%s/projections" % job.id, list(range(job.nviews)), contents,
                        job.stack_of(contents)):
            self.s.count("stacks")

    def upload_views(self, job):
        missing = [k for k, v in enumerate(job.views) if v.acked is None or v.dirty]
        present = [k for k, v in enumerate(job.views) if v.acked is not None and not v.dirty]
        self.rng.shuffle(missing)
        ks = missing[:self.rng.randint(1, 6)]
        if present and (not ks or self.rng.random() < 0.15):
            ks.append(self.rng.choice(present))  # send an acknowledged view again, new bytes
        for k in ks:
            c = self.rng.randbytes(job.view_bytes)
            if self._upload(job, "/v1/jobs/%s/projections/%d" % (job.id, k), [k], [c], c):
                self.s.count("views")
            if job.state not in ("created", "receiving"):
                break

    def start_job(self, job):
        st, data, doc = self.s.request("POST", "/v1/jobs/%s/start" % job.id, b"")
        if st in (200, 202) and doc:
            self.s.count("acks")
            self.s.count("starts")
            self.s.told(job, doc, "start")
        elif st == 409:
            self.refresh(job)
        else:
            self.s.problem("unexpected", "start answered %d: %s" % (st, data[:200]))

    def cancel(self, job):
        s = self.s
        if s.cancel_mode != "delete":
            st, data, doc = s.request("POST", "/v1/jobs/%s/cancel" % job.id, b"")
            if st in (404, 405) and b"no such endpoint" in data or st == 405:
                s.cancel_mode = "delete"  # a daemon without POST /cancel
            else:
                s.cancel_mode = "post"
        if s.cancel_mode == "delete":
            job.deleted = "unknown"  # an old daemon's DELETE removes a job that finished meanwhile
            try:
                st, data, doc = s.request("DELETE", "/v1/jobs/%s" % job.id)
            except NotSent:
                job.deleted = None
                raise
            if st != 204:
                job.deleted = None
        if st in (200, 202) and doc:
            s.count("acks")
            s.count("cancels")
            if st == 202:
                job.cancel_req = True
                s.count("cancels_202")
            s.told(job, doc, "cancel")
        elif st == 204:
            job.deleted = "acked"
            s.count("acks")
            s.count("deletes")
            self.jobs.remove(job)
        elif st == 409:
            self.refresh(job)
        else:
            s.problem("unexpected", "cancel answered %d: %s" % (st, data[:200]))

    def delete(self, job):
        job.deleted = "unknown"
        try:
            st, data, doc = self.s.request("DELETE", "/v1/jobs/%s" % job.id)
        except NotSent:
            job.deleted = None
            raise
        if st == 204:
            job.deleted = "acked"
            self.s.count("acks")
            self.s.count("deletes")
            self.jobs.remove(job)
        else:
            job.deleted = None
            if st != 409:
                self.s.problem("unexpected", "DELETE answered %d: %s" % (st, data[:200]))
            self.refresh(job)

    def refresh(self, job):
        st, data, doc = self.s.request("GET", "/v1/jobs/%s" % job.id)
        if st == 200 and doc:
            self.s.told(job, doc, "get")
        elif st == 404:
            self.s.problem("losses", "job %s (%s) answered 404" % (job.id, job.label))
            job.deleted = "acked"  # reported once
        else:
            self.s.problem("unexpected", "GET job answered %d: %s" % (st, data[:200]))

    get = refresh

    def download(self, job):
        st, data, _ = self.s.request("GET", "/v1/jobs/%s/volume?format=raw" % job.id)
        if st != 200:
            if st not in (404, 409):
                self.s.problem("unexpected", "volume answered %d" % st)
            return self.refresh(job)
        job.downloaded = True
        self.s.count("downloads")
        with open(os.path.join(self.s.store, "jobs", job.id, "projections.f32"), "rb") as f:
            proj = f.read()
        ok, why = self.s.volume_ok(job, proj, data)
        if not ok:
            self.s.problem("corruptions", "download of job %s: %s" % (job.id, why))


# -- the soak --------------------------------------------------------------------------

def soak_volume_ok(self, job, proj, vol):
    if len(vol) != job.vol_bytes:
        return False, "volume is %d bytes, not %d" % (len(vol), job.vol_bytes)
    if self.args.worker == "soak":
        if vol != soak_worker.reference(proj, job.vol_bytes):
            return False, "volume differs from the reference of its projections"
        return True, ""
    key = hashlib.sha256(proj).hexdigest()
    with self.lock:
        ref = self.real_refs.setdefault(key, vol)
    return (ref == vol, "volume differs from the first one made of the same projections")


Soak.volume_ok = soak_volume_ok


def workers_of(store):
    """Pids of stand-in workers (or recond-workers) that name this store on their command line."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if store.encode() in cmd and b"--progress-fd" in cmd:
            out.append(int(p))
    return out


def list_jobs(s):
    jobs, offset = [], 0
    while True:
        st, data, doc = s.request("GET", "/v1/jobs?limit=1000&offset=%d" % offset)
        if st != 200 or not doc:
            raise RuntimeError("GET /v1/jobs answered %d: %s" % (st, data[:200]))
        jobs += doc["jobs"]
        offset += len(doc["jobs"])
        if not doc["jobs"] or offset >= doc["total"]:
            return jobs


def missing_set(doc):
    out = set()
    for a, b in doc.get("views_missing") or []:
        out.update(range(a, b + 1))
    return out


def verify(s, phase):
    """Checks the store against the model; the clients are held, the workers parked."""
    listed = {j["id"]: j for j in list_jobs(s)}
    jobsdir = os.path.join(s.store, "jobs")
    on_disk = sorted(os.listdir(jobsdir))
    with s.lock:
        pending = dict(s.pending_creates)
        s.pending_creates.clear()
    by_label = {j.label: j for j in pending.values()}
    for jid, doc in listed.items():
        job = s.jobs_by_id.get(jid)
        if job is None:
            job = by_label.pop(doc["label"], None)
            if job is None:
                s.problem("corruptions", "%s: job %s (%s) that no client created" % (phase, jid, doc["label"]))
                continue
            job.id = jid  # created, answer lost: the clients take it on
            s.jobs_by_id[jid] = job
            s.clients[job.client].jobs.append(job)
            s.count("adopted")
        if job.deleted == "acked":
            s.problem("corruptions", "%s: job %s was deleted (204) and is back" % (phase, jid))
            continue
        job.deleted = None
        s.told(job, doc, phase, restarted=True)
        check_job(s, job, doc, phase)
    for jid, job in list(s.jobs_by_id.items()):
        if jid in listed:
            continue
        if job.deleted is None:
            s.problem("losses", "%s: job %s (%s, %s) is gone" % (phase, jid, job.label, job.state))
        job.deleted = "acked"
        del s.jobs_by_id[jid]
        cl = s.clients[job.client]
        if job in cl.jobs:
            cl.jobs.remove(job)
    # orphans: anything in the spool that no job accounts for
    for name in on_disk:
        p = os.path.join(jobsdir, name)
        if name not in listed:
            if p not in s.orphans_seen:
                s.problem("orphans", "%s: %s has no job" % (phase, p))
            s.orphans_seen.add(p)
            continue
        st = listed[name]["state"]
        for f in sorted(os.listdir(p)):
            if f in ("spec.json", "projections.f32") or (f == "volume.f32" and st == "succeeded"):
                continue
            if s.args.worker == "real" and st in ("queued", "running") and "volume" in f:
                continue  # recond-worker is not held by the pause file: it may be writing now
            if os.path.join(p, f) not in s.orphans_seen:  # counted once
                s.problem("orphans", "%s: %s/%s (job %s)" % (phase, p, f, st))
            s.orphans_seen.add(os.path.join(p, f))


def check_job(s, job, doc, phase):
    d = os.path.join(s.store, "jobs", job.id)
    try:
        with open(os.path.join(d, "spec.json"), "rb") as f:
            body = f.read()
        if body != job.body:
            s.problem("corruptions", "%s: job %s: spec.json is not the body posted" % (phase, job.id))
    except OSError as e:
        s.problem("losses", "%s: job %s: spec.json: %s" % (phase, job.id, e))
    try:
        with open(os.path.join(d, "projections.f32"), "rb") as f:
            proj = f.read()
    except OSError as e:
        s.problem("losses", "%s: job %s: projections.f32: %s" % (phase, job.id, e))
        return
    if len(proj) != job.proj_bytes:
        s.problem("corruptions", "%s: job %s: projections.f32 is %d bytes, not %d" %
                  (phase, job.id, len(proj), job.proj_bytes))
        return
    miss = missing_set(doc)
    for k, v in enumerate(job.views):
        if k in miss:
            if v.acked is not None and not v.dirty:
                s.problem("losses", "%s: job %s view %d was acknowledged and is missing" % (phase, job.id, k))
            v.acked, v.pending, v.dirty = None, [], False
            continue
        got = job.view_from(proj, k)
        s.count("views_checked")
        if got == v.acked or got in v.pending:
            v.acked, v.pending, v.dirty = got, [], False
        else:
            what = "no upload of it" if v.acked is None and not v.pending else \
                "neither the acknowledged bytes nor those of a later upload"
            s.problem("corruptions", "%s: job %s view %d is marked present but holds %s" %
                      (phase, job.id, k, what))
            v.acked, v.pending, v.dirty = got, [], False  # counted once
    if doc["state"] == "succeeded":
        try:
            with open(os.path.join(d, "volume.f32"), "rb") as f:
                vol = f.read()
        except OSError as e:
            s.problem("losses", "%s: job %s succeeded: volume.f32: %s" % (phase, job.id, e))
            return
        ok, why = s.volume_ok(job, proj, vol)
        s.count("volumes_checked")
        if not ok:
            s.problem("corruptions", "%s: job %s: %s" % (phase, job.id, why))


def damage(s):
    """--self-test: with the daemon down, one loss, one corruption and one
    orphan that the checks must find (a harness must be able to fail)."""
    import sqlite3
    jobs = [j for j in s.jobs_by_id.values() if j.deleted is None]
    with_view = [j for j in jobs if any(v.acked is not None and not v.dirty for v in j.views)]
    if len(jobs) < 2 or not with_view:
        return False  # too early: at the next kill
    victim = with_view[0]
    k = next(k for k, v in enumerate(victim.views) if v.acked is not None and not v.dirty)
    off = victim.rows_of(k)[0][0]
    with open(os.path.join(s.store, "jobs", victim.id, "projections.f32"), "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x55]))
    with open(os.path.join(s.store, "jobs", victim.id, "stray.bin"), "wb") as f:
        f.write(b"x")
    lost = next(j for j in jobs if j is not victim)
    db = sqlite3.connect(os.path.join(s.store, "recond.db"))
    db.execute("DELETE FROM jobs WHERE id=?", (lost.id,))
    db.commit()
    db.close()
    H.log("self-test: flipped a byte of job %s view %d, left stray.bin beside it, deleted the row of job %s"
          % (victim.id, k, lost.id))
    return True


def start_daemon(s, d):
    d.start(timeout=60)
    s.addr = ("127.0.0.1", d.port)
    s.count("restarts")
    m = [ln for ln in d.read_log().splitlines() if "orphans_removed=" in ln]
    if m:
        try:
            n = int(m[-1].split("orphans_removed=")[1].split()[0])
            s.count("orphans_removed", n)
        except (IndexError, ValueError):
            pass


def kill_while_starting(s, d, delay):
    """Starts the daemon and kills it -9 after delay seconds, ready or not (recovery cut short)."""
    d.starts += 1
    d.portfile = os.path.join(d.logdir, "port-%d" % d.starts)
    d.logpath = os.path.join(d.logdir, "recond-%d.log" % d.starts)
    with open(d.logpath, "wb") as lf:
        p = subprocess.Popen(d.args(), stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait(10)


def wait_workers_gone(store, timeout=10):
    alive = H.deadline(timeout)
    while alive():
        if not workers_of(store):
            return True
        time.sleep(0.01)
    return False


def fake_worker_script():
    """A worker script that runs soak_worker.py (its pace comes from SOAK_STEP_S in the daemon's environment)."""
    d = H.tempdir("recond-soak-worker-")
    path = os.path.join(d, "soak-worker.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec /usr/bin/python3 '%s' \"$@\"\n" % os.path.join(HERE, "soak_worker.py"))
    os.chmod(path, 0o700)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--worker", choices=("soak", "real"), default="soak")
    ap.add_argument("--run-min", type=float, default=0.05, help="shortest run between kills (s)")
    ap.add_argument("--run-max", type=float, default=0.8, help="longest run between kills (s)")
    ap.add_argument("--step", type=float, default=0.05, help="stand-in worker: seconds per iteration")
    ap.add_argument("--store", help="store directory (default: a new temporary one, removed at the end)")
    ap.add_argument("--self-test", action="store_true",
                    help="damage the store once (a lost job, a changed byte, a stray file) and succeed "
                         "only if the checks count each")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    H.require_binaries()
    s = Soak(args)
    s.store = args.store or H.tempdir("recond-soak-store-")
    os.makedirs(s.store, exist_ok=True)
    pause = os.path.join(H.tempdir("recond-soak-pause-"), "pause")
    env = {"SOAK_PAUSE": pause, "SOAK_STEP_S": str(args.step)}
    worker = fake_worker_script() if args.worker == "soak" else None
    d = H.Daemon(store=s.store, worker=worker, env=env)
    t0 = time.monotonic()
    H.log("soak: seed=%d kills=%d clients=%d worker=%s store=%s" %
          (args.seed, args.kills, args.clients, args.worker, s.store))
    open(pause, "w").close()
    start_daemon(s, d)
    verify(s, "start")
    s.clients = [Client(s, i) for i in range(args.clients)]
    for c in s.clients:
        c.start()
    kills = 0
    damaged = False
    try:
        while kills < args.kills:
            os.unlink(pause)
            s.gate.open()
            time.sleep(s.rng.uniform(args.run_min, args.run_max))
            open(pause, "w").close()  # workers started from now on wait
            d.kill9()
            kills += 1
            s.count("kills")
            if not s.gate.close():
                raise RuntimeError("clients did not stop within 60 s")
            if not wait_workers_gone(s.store):
                s.problem("unexpected", "workers still alive 10 s after their daemon was killed: %s" %
                          workers_of(s.store))
            if args.self_test and not damaged:
                damaged = damage(s)
            if kills < args.kills and s.rng.random() < 0.05:
                kill_while_starting(s, d, s.rng.uniform(0.0, 0.15))
                kills += 1
                s.count("kills")
                s.count("kills_starting")
                wait_workers_gone(s.store)
            start_daemon(s, d)
            verify(s, "restart %d" % kills)
            if args.verbose:
                H.log("restart %d: %s" % (kills, " ".join("%s=%d" % kv for kv in sorted(s.counts.items()))))
        # last: a clean stop (SIGTERM) and start, then the same checks
        os.unlink(pause)
        s.gate.open()
        time.sleep(args.run_max)
        open(pause, "w").close()
        s.gate.close()
        rc = d.stop()
        if rc != 0:
            s.problem("unexpected", "SIGTERM: recond exited %s" % rc)
        wait_workers_gone(s.store)
        start_daemon(s, d)
        verify(s, "after SIGTERM")
    finally:
        s.gate.stop()
        for c in s.clients:
            c.join(30)
        if os.path.exists(pause):
            os.unlink(pause)
        d.stop()
    c = s.counts
    H.log("soak: %.0f s; restarts=%d (kills while starting=%d); acks: creates=%d stacks=%d views=%d starts=%d "
          "cancels=%d (202: %d) deletes=%d; adopted (create answered late)=%d; checked: views=%d volumes=%d "
          "downloads=%d; orphans removed by recovery=%d; unexpected answers=%d" %
          (time.monotonic() - t0, c["restarts"], c["kills_starting"], c["creates"], c["stacks"], c["views"],
           c["starts"], c["cancels"], c["cancels_202"], c["deletes"], c["adopted"], c["views_checked"], c["volumes_checked"],
           c["downloads"], c["orphans_removed"], c["unexpected"]))
    for p in s.problems[:20]:
        H.log("  " + p)
    H.log("soak: kills=%d acks=%d losses=%d corruptions=%d orphans=%d" %
          (c["kills"], c["acks"], c["losses"], c["corruptions"], c["orphans"]))
    bad = c["losses"] + c["corruptions"] + c["orphans"] + c["unexpected"]
    if args.self_test:
        ok = damaged and c["losses"] >= 1 and c["corruptions"] >= 1 and c["orphans"] >= 1 and not c["unexpected"]
        H.log("self-test: the damage was %s" % ("found" if ok else "NOT found"))
        return 0 if ok else 1
    if args.store is None and not bad:
        shutil.rmtree(s.store, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
