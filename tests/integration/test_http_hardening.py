#!/usr/bin/env python3
"""The HTTP layer against hostile or unusual clients (server/http.c,
http_upload.c, http_jobs.c; docs/server.md "Security"), over raw loopback
sockets so that the bytes on the wire are exactly the ones under test:

- pipelining: 201 requests written back to back on one keep-alive
  connection are all answered, in order (MHD 0.9.75 closed the connection
  after the first when the answer was queued on the request's first call);
"""

import socket
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


def main():
    require_binaries()
    d = Daemon().start()
    pipelining(d)
    d.stop()


if __name__ == "__main__":
    run_main(main)
