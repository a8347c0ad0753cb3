#!/usr/bin/env python3
"""Upload speed: RabbitCT's stack (496 views of 960 x 1248 float32, 2.38 GB,
for a 512^3 cone job) sent with `curl -T` over loopback to a daemon whose
store is on local disk, until its 200 (every byte fdatasync'ed), with the
daemon's memory and the figures that bound it, measured in the same run
(docs/server.md, "Upload speed"):

- disk: `dd if=/dev/zero bs=1M conv=fdatasync` of the same size in the
  same directory, and the same with `bs=64M oflag=direct` (the device
  without the page cache).  The upload ends with an fdatasync of all of it,
  so it cannot beat the disk's rate, the better of the two: the first
  copies everything into the page cache before most of the writing starts,
  which an upload that starts write-back as it goes does not wait for;
- page cache: the same `dd` without fdatasync (the copy into the page cache
  that every upload pays);
- loopback: the same `curl -T` of the same file to a sink that discards the
  body (this program's thread; answers 100 Continue, then 200): what curl
  and loopback TCP manage on this machine.

floor = the least of the three; upload / floor says how close the daemon
gets.  Each run measures all four, one after the other, each after a sync
and a pause of 3 s (this VM's disk and CPUs vary from second to second; its
disk is slower while it still writes out what came before); the job of each
run is created, uploaded, cancelled and deleted.  The daemon's line `event=views_stored` splits the
upload into receiving (the bytes in, written to the page cache and handed
to write-back) and the final fdatasync.  After the first run the spool file
is compared with the file sent.

    bench/upload_bench.py BUILD_DIR [--runs N] [--views N] [--dir DIR]
                          [--pollers SECONDS] [--dtype float32|uint16]

--dtype uint16 sends the same views as uint16 detector counts (half the
bytes; the rates are of bytes sent).

RECOND_BENCH_QUICK=1: 40 views (192 MB), one run.  The store and the files
go to --dir, else $RECOND_BENCH_DIR, else $TMPDIR (/tmp): local disk, not
tmpfs (the table names the file system).  --pollers also measures status
latency under 32 pollers while a job runs (needs the worker's CPU engine).
"""
import argparse
import atexit
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    os.environ["RECOND_BUILD"] = os.path.abspath(sys.argv.pop(1))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from recond_harness import Api, Daemon  # noqa: E402

NU, NV = 1248, 960
MB = 1e6
MIB = 1 << 20


def rabbitct_spec(views, dtype="float32"):
    """The RabbitCT shape (bench-cpu's): 512^3 of 0.5 mm, detector of 0.308 mm, D = 750, S = 1200; uint16:
    a job of detector counts (docs/api.md, "Detector counts") of the same views, 2 bytes a sample."""
    inp = {"input": {"kind": "intensity", "dtype": "uint16", "flat": 60000, "dark": 100}} if dtype == "uint16" else {}
    return dict(inp, **{"label": "upload-bench",
            "geometry": {"type": "cone", "source_isocenter_mm": 750.0, "source_detector_mm": 1200.0,
                         "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views},
                         "detector": {"nu": NU, "nv": NV, "du_mm": 0.308, "dv_mm": 0.308}},
            "volume": {"nx": 512, "ny": 512, "nz": 512, "voxel_mm": [0.5, 0.5, 0.5]},
            "algorithm": {"name": "fdk"}})


def fs_type(path):
    """The file system of path, from /proc/mounts (longest mount point that holds it)."""
    path, best, kind = os.path.realpath(path), "", "?"
    try:
        with open("/proc/mounts") as f:
            for ln in f:
                p = ln.split()
                mnt = p[1].replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                    best, kind = mnt, p[2]
    except OSError:
        pass
    return kind


def vm_kib(pid):
    d = {}
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            k = ln.split(":")[0]
            if k in ("VmHWM", "VmRSS"):
                d[k] = int(ln.split()[1])
    return d


def write_source(path, nbytes):
    """The stack to upload: a random 16 MiB block repeated (nothing below can compress it), on disk."""
    block = os.urandom(16 * MIB)
    with open(path, "wb") as f:
        left = nbytes
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.flush()
        os.fdatasync(f.fileno())


def settle(seconds):
    """sync, then a pause: this VM's disk takes writes fast, then slows while the host writes them out (and
    while it discards a deleted job's blocks), so each measurement starts from a disk that has been quiet."""
    subprocess.run(["sync"])
    time.sleep(seconds)


def dd(path, mib, how):
    """MB/s of dd if=/dev/zero of the size (timed from outside; the file is removed):
    how = "fdatasync": bs=1M conv=fdatasync; "direct": bs=64M oflag=direct conv=fdatasync; "cache": bs=1M."""
    bs = 64 if how == "direct" else 1
    count = (mib + bs - 1) // bs
    args = ["dd", "if=/dev/zero", "of=" + path, "bs=%dM" % bs, "count=%d" % count, "status=none"]
    args += {"fdatasync": ["conv=fdatasync"], "direct": ["oflag=direct", "conv=fdatasync"], "cache": []}[how]
    t0 = time.monotonic()
    ok = subprocess.run(args, stderr=subprocess.DEVNULL).returncode == 0  # direct: EINVAL on tmpfs
    dt = time.monotonic() - t0
    if os.path.exists(path):
        os.unlink(path)  # the page cache's copy leaves dirty pages that unlink drops unwritten
    return count * bs * MIB / dt / MB if ok else float("nan")


class Sink:
    """A loopback HTTP server that reads one PUT body at a time into a reused buffer and throws it away."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(4)
        self.port = self.ls.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        buf = memoryview(bytearray(4 * MIB))
        while True:
            c, _ = self.ls.accept()
            with c:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                head, _, rest = head.partition(b"\r\n\r\n")
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                left = (int(m.group(1)) if m else 0) - len(rest)
                if re.search(rb"(?im)^expect:\s*100-continue", head):
                    c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                while left > 0:
                    n = c.recv_into(buf, min(len(buf), left))
                    if not n:
                        break
                    left -= n
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def curl_put(src, url):
    """(HTTP status, seconds until the answer) of curl -T src url."""
    out = subprocess.run(["curl", "-sS", "-T", src, url, "-o", "/dev/null", "-w", "%{http_code} %{time_total}"],
                         capture_output=True, text=True)
    p = out.stdout.split()
    if out.returncode or len(p) != 2:
        raise RuntimeError("curl -T %s: exit %d %s" % (url, out.returncode, out.stderr.strip()))
    return int(p[0]), float(p[1])


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(16 * MIB), fb.read(16 * MIB)
            if x != y:
                return False
            if not x:
                return True


def upload_run(d, api, spec, src, nbytes, verify, pause):
    job = api.create(spec)
    jid = job["id"]
    if job["projection_bytes"] != nbytes:
        raise RuntimeError("job wants %d bytes, the file has %d" % (job["projection_bytes"], nbytes))
    settle(pause)
    before = vm_kib(d.proc.pid)
    status, secs = curl_put(src, d.url + "/v1/jobs/%s/projections" % jid)
    after = vm_kib(d.proc.pid)
    m = re.findall(r"event=views_stored id=%s .*receive_s=([\d.]+) fsync_s=([\d.]+)" % jid, d.read_log())
    recv_s, fsync_s = (float(m[-1][0]), float(m[-1][1])) if m else (float("nan"), float("nan"))
    same = same_bytes(src, os.path.join(d.store, "jobs", jid, "projections.f32")) if verify and status == 200 else None
    api.post_json("/v1/jobs/%s/cancel" % jid, b"")
    api.delete("/v1/jobs/%s" % jid)
    return {"status": status, "s": secs, "mbs": nbytes / secs / MB, "recv_s": recv_s, "fsync_s": fsync_s,
            "before": before, "after": after, "same": same}


def pollers(d, api, seconds):
    """Status latency under 32 pollers while a SIRT job runs (formerly tests/integration/bench_upload.py)."""
    from test_pollers import CLIENTS, busy_job, pct, run_pollers
    j = busy_job(api, "bench-busy", 5000)
    lat, errors = run_pollers(d.url, j["id"], seconds)
    allv = [x for ls in lat for x in ls]
    print("\nstatus under %d pollers while a job runs: %d answers in %.0f s (%.0f/s), %d errors, median %.2f ms, "
          "p99 %.2f ms, max %.2f ms" % (CLIENTS, len(allv), seconds, len(allv) / seconds, len(errors),
                                        pct(allv, 0.5) * 1e3, pct(allv, 0.99) * 1e3,
                                        max(allv) * 1e3 if allv else -1))
    api.post_json("/v1/jobs/%s/cancel" % j["id"], b"")
    api.wait_state(j["id"], ("cancelled", "failed", "succeeded"), timeout=30)


def main():
    quick = os.environ.get("RECOND_BENCH_QUICK", "") not in ("", "0")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1 if quick else 3)
    ap.add_argument("--views", type=int, default=40 if quick else 496)
    ap.add_argument("--dir", default=os.environ.get("RECOND_BENCH_DIR") or tempfile.gettempdir())
    ap.add_argument("--pollers", type=float, default=0.0, metavar="SECONDS")
    ap.add_argument("--dtype", choices=("float32", "uint16"), default="float32")
    a = ap.parse_args()
    if not shutil.which("curl"):
        print("upload_bench: skipped (no curl)")
        return 0
    nbytes = a.views * NV * NU * (2 if a.dtype == "uint16" else 4)
    mib = (nbytes + MIB - 1) // MIB
    work = tempfile.mkdtemp(prefix="recond-upload-bench-", dir=a.dir)
    atexit.register(shutil.rmtree, work, True)
    free = shutil.disk_usage(work).free
    if free < 3 * nbytes + (1 << 30):
        print("upload_bench: skipped (%s has %.1f GB free; needs %.1f)" % (work, free / 1e9, (3 * nbytes + (1 << 30)) / 1e9))
        return 0
    fs = fs_type(work)
    print("upload_bench: %d views of %d x %d %s = %d bytes (%.2f GB), %s on %s, %d run(s); %d CPUs, load %.1f"
          % (a.views, NV, NU, a.dtype, nbytes, nbytes / 1e9, work, fs, a.runs, os.cpu_count(), os.getloadavg()[0]))
    if fs in ("tmpfs", "ramfs"):
        print("upload_bench: warning: %s is in memory; the disk figures mean nothing here" % work)
    src = os.path.join(work, "stack.f32")
    write_source(src, nbytes)
    d = Daemon(store=os.path.join(work, "store")).start()
    api = Api(d.url, validate=False)
    spec = rabbitct_spec(a.views, a.dtype)
    sink = Sink()
    rows = []
    pause = 1.0 if quick else 3.0
    for i in range(a.runs):
        up = upload_run(d, api, spec, src, nbytes, i == 0, pause)
        if up["status"] != 200 or up["same"] is False:
            print("upload_bench: the upload was answered %d%s" % (up["status"], ", but the spool file differs from "
                                                                 "the file sent" if up["same"] is False else ""))
            d.dump_log()
            return 1
        settle(pause)
        disk = dd(os.path.join(work, "dd.bin"), mib, "fdatasync")
        settle(pause)
        direct = dd(os.path.join(work, "dd.bin"), mib, "direct")
        settle(pause)
        cache = dd(os.path.join(work, "dd.bin"), mib, "cache")
        settle(pause)
        st, ls = curl_put(src, "http://127.0.0.1:%d/sink" % sink.port)
        loop = nbytes / ls / MB if st == 200 else float("nan")
        up.update(disk=disk, direct=direct, cache=cache, loop=loop)
        rows.append(up)
    end = vm_kib(d.proc.pid)
    print()
    print("| run | size GB | upload s | MB/s | GB/s | receive s | fsync s | VmHWM MiB before -> after "
          "| VmRSS MiB before -> after | disk: dd fdatasync MB/s | disk: dd direct MB/s | page cache: dd MB/s "
          "| loopback: curl MB/s | floor MB/s | upload / floor |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, r in enumerate(rows):
        r["disk_best"] = max(r["disk"], r["direct"]) if r["direct"] == r["direct"] else r["disk"]
        floor = min(r["disk_best"], r["cache"], r["loop"])
        print("| %d | %.2f | %.2f | %.0f | %.2f | %.2f | %.2f | %.1f -> %.1f | %.1f -> %.1f | %.0f | %.0f | %.0f | %.0f "
              "| %.0f | %.2f |"
              % (i + 1, nbytes / 1e9, r["s"], r["mbs"], r["mbs"] / 1e3, r["recv_s"], r["fsync_s"],
                 r["before"]["VmHWM"] / 1024, r["after"]["VmHWM"] / 1024,
                 r["before"]["VmRSS"] / 1024, r["after"]["VmRSS"] / 1024,
                 r["disk"], r["direct"], r["cache"], r["loop"], floor, r["mbs"] / floor))
    med = statistics.median(r["mbs"] for r in rows)
    limits = {"the disk (the better of the two dd)": statistics.median(r["disk_best"] for r in rows),
              "the page cache (dd)": statistics.median(r["cache"] for r in rows),
              "loopback with curl": statistics.median(r["loop"] for r in rows)}
    lim = min(limits, key=limits.get)
    print()
    print("median upload %.0f MB/s (%.2f GB/s) over %d run(s), %.2f of the median floor (%.0f MB/s: %s); "
          "target 1 GB/s: %s; spool file equal to the file sent; daemon VmHWM %.1f MiB, VmRSS %.1f MiB at the end"
          % (med, med / 1e3, len(rows), med / limits[lim], limits[lim], lim, "met" if med >= 1000 else "not met",
             end["VmHWM"] / 1024, end["VmRSS"] / 1024))
    if a.pollers > 0:
        pollers(d, api, a.pollers)
    d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
