#!/usr/bin/env python3
"""The HTTP layer against hostile or unusual clients (server/http/http.c,
http_upload.c, http_jobs.c; docs/server.md "Security"), over raw loopback
sockets so that the bytes on the wire are exactly the ones under test:

- pipelining: 201 requests written back to back on one keep-alive
  connection are all answered, in order (MHD 0.9.75 closed the connection
  after the first when the answer was queued on the request's first call);
- upload bodies longer than the views: a chunked body of twice a view (or
  of twice the stack) that also declares Content-Length = the view is
  refused 400 (the two framings together; the upload's own byte count,
  which would answer 413, stays a backstop no framing reaches now),
  nothing is acknowledged and the views stay absent (it was 200 with the
  first bytes stored);
- body framing (RFC 9112 6.1, 6.3): Transfer-Encoding with Content-Length,
  Content-Length headers that differ, a list or a malformed second one are
  400 and the connection is closed (the first of two lengths was used);
  two equal lengths are one length;
- slowloris: connections that trickle header lines (one every 0.4 s) are
  closed --header-timeout after they opened (they stayed open, since each
  line resets MHD's idle timeout), so /readyz from a third address is
  answered within the deadline even when the trickling clients hold every
  thread; and by default one address gets at most a quarter of --threads,
  so /readyz is answered throughout while two addresses trickle.
- JSON bodies: four concurrent 16 MiB bodies of empty objects to POST
  /v1/jobs are refused (400 too_big) at once and the daemon's peak RSS grows
  by less than 256 MiB (each took 3 s and 1.3 GB before: jansson's tree of
  5.6 million objects); a PATCH body over 4 KiB is 413.
"""

import select
import socket
import threading
import time

from recond_harness import (Daemon, check, deadline, require_binaries, run_main, small_spec, view_bytes)


def connect(d, src="127.0.0.1", timeout=5):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", d.port))
    return s


def read_answers(s, count, seconds=10):
    """Reads until count answers (with Content-Length bodies) are in, the peer closes, or the time is up;
    returns (list of (status, head, body), closed)."""
    buf, out, closed = b"", [], False
    alive = deadline(seconds)
    while len(out) < count and alive():
        while True:  # take every whole answer out of buf
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buf[:end].decode("latin-1")
            n = 0
            for ln in head.split("\r\n")[1:]:
                k, _, v = ln.partition(":")
                if k.strip().lower() == "content-length":
                    n = int(v.strip())
            if len(buf) < end + 4 + n:
                break
            out.append((int(head.split()[1]), head, buf[end + 4:end + 4 + n]))
            buf = buf[end + 4 + n:]
        if len(out) >= count:
            break
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            closed = True
            break
        if not b:
            closed = True
            break
        buf += b
    return out, closed


def pipelining(d):
    s = connect(d)
    reqs = []
    for i in range(201):
        path = "/healthz" if i % 2 == 0 else "/v1/jobs?limit=%d" % (1 + i % 7)
        reqs.append(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path.encode())
    s.sendall(b"".join(reqs))
    got, closed = read_answers(s, len(reqs))
    s.close()
    check("201 pipelined GETs: every one answered", len(got) == 201, "%d answers, closed=%s" % (len(got), closed))
    in_order = all(st == 200 and ((b'"status"' in body) if i % 2 == 0 else (b'"jobs"' in body))
                   for i, (st, _, body) in enumerate(got))
    check("pipelined answers are 200 and in request order", in_order)
    check("no pipelined answer says Connection: close",
          not any("connection: close" in h.lower() for _, h, _ in got))


def chunked(body, piece=1000):
    out = b""
    for i in range(0, len(body), piece):
        out += b"%x\r\n" % len(body[i:i + piece]) + body[i:i + piece] + b"\r\n"
    return out + b"0\r\n\r\n"


def put_raw(d, path, headers, body):
    s = connect(d)
    s.sendall(b"PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n" % (path.encode(), headers) + body)
    got, _ = read_answers(s, 1, seconds=10)
    s.close()
    return got[0][0] if got else 0


def upload_excess(d):
    api = d.api()
    spec = small_spec(views=4)
    st, _, _, j = api.post_json("/v1/jobs", spec)
    check("job created", st == 201, st)
    jid, vb = j["id"], view_bytes(spec)
    nb = 4 * vb
    for what, path, declared, body in (("one view", "/projections/0", vb, b"\1" * (2 * vb)),
                                       ("whole stack", "/projections", nb, b"\1" * (2 * nb))):
        st = put_raw(d, "/v1/jobs/%s%s" % (jid, path),
                     b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % declared, chunked(body))
        check("%s: chunked body of 2x with Content-Length of 1x refused 400" % what, st == 400, st)
        j = api.job(jid)
        check("%s: nothing acknowledged" % what, j["views_present"] == 0 and j["state"] == "created",
              "%s views_present %s" % (j["state"], j["views_present"]))
    st = put_raw(d, "/v1/jobs/%s/projections/1" % jid, b"Content-Length: %d\r\n" % (2 * vb), b"\1" * (2 * vb))
    check("a 2x body declared as such is 413", st == 413, st)


def framing(d):
    api = d.api()
    spec = small_spec(views=4)
    st, _, _, j = api.post_json("/v1/jobs", spec)
    jid, vb = j["id"], view_bytes(spec)
    view = "/v1/jobs/%s/projections/%%d" % jid
    cases = (("Transfer-Encoding and Content-Length, exact body", 0,
              b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % vb, chunked(b"\1" * vb)),
             ("two Content-Lengths that differ", 1,
              b"Content-Length: %d\r\nContent-Length: %d\r\n" % (vb, 2 * vb), b"\1" * (2 * vb)),
             ("a Content-Length list", 2, b"Content-Length: %d\r\nContent-Length: %d, %d\r\n" % (vb, vb, vb),
              b"\1" * vb),
             ("a signed second Content-Length", 3, b"Content-Length: %d\r\nContent-Length: +%d\r\n" % (vb, vb),
              b"\1" * vb))
    for what, k, headers, body in cases:
        s = connect(d)
        s.sendall(b"PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n" % ((view % k).encode(), headers) + body)
        got, closed = read_answers(s, 2, seconds=5)
        s.close()
        st = got[0][0] if got else 0
        check("%s: 400" % what, st == 400, got[0][1].split("\r\n")[0] if got else "no answer")
        check("%s: connection closed after the answer" % what, closed and len(got) == 1, "%d answers" % len(got))
    j = api.job(jid)
    check("refused framings stored nothing", j["views_present"] == 0, j["views_present"])
    st = put_raw(d, view % 0, b"Content-Length: %d\r\nContent-Length: %d\r\n" % (vb, vb), b"\1" * vb)
    check("two equal Content-Lengths are one: 200", st == 200, st)


def readyz(d, src):
    """Whether GET /readyz from src is answered 200 within 1 s."""
    try:
        s = connect(d, src, timeout=1)
        s.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        got, _ = read_answers(s, 1, seconds=1)
        s.close()
        return bool(got) and got[0][0] == 200
    except OSError:
        return False


def trickle(d, per_addr, seconds, probe_every=0.5):
    """Opens per_addr connections from 127.0.0.2 and from 127.0.0.3 that send a request line and then one
    header line every 0.4 s, never the blank line; probes /readyz from 127.0.0.4 meanwhile. Returns
    (seconds each trickler stayed open (None: still open at the end), [(t, readyz ok)])."""
    socks = []
    t0 = time.monotonic()
    for src in ("127.0.0.2", "127.0.0.3"):
        for _ in range(per_addr):
            try:
                s = connect(d, src, timeout=1)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                socks.append(s)
            except OSError:
                pass
    closed_at = {s: None for s in socks}
    probes, next_line, next_probe = [], t0, t0 + 0.2
    while time.monotonic() - t0 < seconds:
        now = time.monotonic()
        live = [s for s in socks if closed_at[s] is None]
        if now >= next_line:
            next_line = now + 0.4
            for s in live:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    closed_at[s] = now - t0
        if now >= next_probe:
            next_probe = now + probe_every
            probes.append((now - t0, readyz(d, "127.0.0.4")))
        live = [s for s in socks if closed_at[s] is None]
        r, _, _ = select.select(live, [], [], 0.05) if live else ([], [], [])
        for s in r:
            try:
                if not s.recv(4096):
                    closed_at[s] = time.monotonic() - t0
            except OSError:
                closed_at[s] = time.monotonic() - t0
    for s in socks:
        s.close()
    return [closed_at[s] for s in socks], probes


def slowloris():
    # every thread taken by two addresses (6 + 6 of 12): the header deadline frees them
    d = Daemon(extra=["--threads", "12", "--max-per-ip", "6", "--header-timeout", "2"]).start()
    closed, probes = trickle(d, 6, 4.5)
    check("trickling connections: all 12 accepted", len(closed) == 12, len(closed))
    late = [c for c in closed if c is None or not 1.5 <= c <= 3.5]
    check("trickling connections closed at the 2 s header deadline", not late and closed,
          "closed after %s s" % sorted(round(c, 2) if c is not None else None for c in closed))
    ok_at = [t for t, ok in probes if ok]
    check("/readyz from a third address answered within 3.5 s", bool(ok_at) and ok_at[0] <= 3.5,
          "answered at %s" % [round(t, 1) for t in ok_at])
    d.stop()
    # default share: a quarter of --threads per address, so a third address always gets in
    d = Daemon(extra=["--threads", "12", "--header-timeout", "30"]).start()
    closed, probes = trickle(d, 6, 2.5)
    opened = [c for c in closed if c is None or c > 0.3]
    check("default per-address share: 3 of 6 connections per address stay", len(opened) == 6,
          "%d stayed" % len(opened))
    check("/readyz from a third address answered throughout", probes and all(ok for _, ok in probes),
          probes)
    d.stop()


def peak_rss_kib(d):
    with open("/proc/%d/status" % d.proc.pid) as f:
        for ln in f:
            if ln.startswith("VmHWM:"):
                return int(ln.split()[1])
    return 0


def json_bodies(d):
    body = b'{"zz":[' + b",".join([b"{}"] * ((16 << 20) // 3 - 10)) + b"]}"
    base = peak_rss_kib(d)
    res = []

    def one():
        t = time.monotonic()
        st, _, _, j = d.api().request("POST", "/v1/jobs", body, {"Content-Type": "application/json"}, timeout=60)
        res.append((st, (j or {}).get("error", {}).get("code"), time.monotonic() - t))
    ts = [threading.Thread(target=one) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    grew = (peak_rss_kib(d) - base) / 1024.0
    check("4 concurrent 16 MiB bodies of empty objects: 400 too_big",
          len(res) == 4 and all(st == 400 and code == "too_big" for st, code, _ in res), res)
    check("... each answered within 1.5 s", res and all(t < 1.5 for _, _, t in res),
          [round(t, 2) for _, _, t in res])
    check("... peak RSS grew by less than 256 MiB", grew < 256, "%.0f MiB" % grew)
    deep = b"[" * 5000 + b"]" * 5000
    st, _, _, j = d.api().request("POST", "/v1/jobs", deep, {"Content-Type": "application/json"})
    check("5000 nested arrays: 400 too_big", st == 400 and j["error"]["code"] == "too_big", st)
    st, _, _, j = d.api().post_json("/v1/jobs", small_spec())
    st, _, _, _ = d.api().request("PATCH", "/v1/jobs/" + j["id"], b'{"priority": 5' + b" " * 5000 + b"}",
                                   {"Content-Type": "application/json"})
    check("PATCH body over 4 KiB: 413", st == 413, st)


def main():
    require_binaries()
    d = Daemon().start()
    pipelining(d)
    upload_excess(d)
    framing(d)
    json_bodies(d)
    d.stop()
    slowloris()


if __name__ == "__main__":
    run_main(main)
