#!/usr/bin/env python3
"""The bound on the tensor engine's on-disk matrix cache (STATE/matrices,
config matrix_cache_bytes, docs/tensor.md "The matrix cache").

Two fan geometries (the second's angles start half a step later, so its
matrices are other files of about the same size), small enough that a job
takes a second:
- without a bound (the default 20G), a job on each leaves both geometries'
  files (the sizes of each measured here);
- restarted with a bound of 1.5 times the larger geometry's files, the
  daemon prunes at its start: the older geometry's files go, the
  directory is under the bound, and a job on the newer one hits;
- a job on the older geometry then misses (rebuilds) and succeeds, the
  directory stays under the bound, and the other geometry's files make
  room, so a job on it misses too rather than failing;
- with a bound smaller than any file, the start empties the directory and
  a job succeeds with nothing written; with 0 the cache is off (these two
  through the config file: a string with a suffix, a number);
- a bad value of the flag or the key stops the daemon naming it.
"""

import json
import os
import subprocess

import recond_harness
from recond_harness import Daemon, check, log, require_binaries, run_main, tempdir
from recond_client import Client

N, VIEWS, NU, SLICES = 32, 48, 48, 3
D, S, DU = 100.0, 200.0, 1.5


def spec(start_deg):
    return {
        "geometry": {
            "type": "fan", "source_isocenter_mm": D, "source_detector_mm": S, "slices": SLICES,
            "angles": {"start_deg": start_deg, "step_deg": 360.0 / VIEWS, "count": VIEWS},
            "detector": {"nu": NU, "du_mm": DU, "offset_u_mm": 0.0},
        },
        "volume": {"nx": N, "ny": N, "nz": SLICES, "voxel_mm": [1.0, 1.0, 1.0]},
        "algorithm": {"name": "cgls", "iterations": 3},
        "execution": {"engine": "tensor", "precision": "mixed"},
    }


G1, G2 = spec(0.0), spec(180.0 / VIEWS)
PROJ = bytes(4 * SLICES * VIEWS * NU)


def files(store):
    """{name: bytes} of the cache's files (the state directory is the spool, here the store)."""
    out = {}
    for root, _, names in os.walk(store):
        if os.path.basename(root) == "matrices":
            for n in names:
                out[n] = os.path.getsize(os.path.join(root, n))
    return out


def job(c, s, what):
    j = c.submit(s, PROJ)
    final = None
    for ev, data in c.watch(j["id"], timeout=240):
        if ev == "end":
            final = data
    st = c.status(j["id"])
    check("%s: job succeeded" % what, st["state"] == "succeeded", "%s %s" % (st["state"], st.get("error")))
    cache = (st.get("matrix") or {}).get("cache")
    log("%s: matrix.cache %s" % (what, cache))
    return cache


def main():
    require_binaries()
    store = tempdir("recond-mcache-")
    d = Daemon(store=store).start()
    c = Client(d.url, timeout=60)
    check("G1 misses", job(c, G1, "G1 unbounded") == "miss")
    f1 = files(store)
    check("G1 wrote its files", len(f1) >= 1, str(f1))
    check("G2 misses", job(c, G2, "G2 unbounded") == "miss")
    f12 = files(store)
    f2 = {n: b for n, b in f12.items() if n not in f1}
    check("G2 wrote other files, G1's stay", f2 and all(n in f12 for n in f1), str(f12))
    d.stop()
    s1, s2 = sum(f1.values()), sum(f2.values())
    bound = int(1.5 * max(s1, s2))
    log("G1 %d bytes, G2 %d bytes, bound %d" % (s1, s2, bound))

    d = Daemon(store=store, extra=["--matrix-cache-bytes", str(bound)]).start()
    c = Client(d.url, timeout=60)
    f = files(store)
    check("the start pruned to the bound", sum(f.values()) <= bound, str(f))
    check("the least recently used (G1's) went, G2's stayed",
          not any(n in f for n in f1) and all(n in f for n in f2), str(f))
    check("G2 hits", job(c, G2, "G2 bounded") == "hit")
    check("G1 misses (rebuilt)", job(c, G1, "G1 bounded") == "miss")
    f = files(store)
    check("under the bound after G1", sum(f.values()) <= bound and any(n in f for n in f1), str(f))
    check("G2 misses rather than failing", job(c, G2, "G2 again") == "miss")
    f = files(store)
    check("under the bound after G2", sum(f.values()) <= bound, str(f))
    d.stop()

    d = Daemon(store=store, config=config({"matrix_cache_bytes": "1K"})).start()
    c = Client(d.url, timeout=60)
    check("a bound below any file: the start empties the cache", sum(files(store).values()) == 0, str(files(store)))
    check("a job larger than the bound runs uncached", job(c, G1, "G1 1K") == "miss")
    check("and writes nothing", sum(files(store).values()) == 0, str(files(store)))
    d.stop()

    d = Daemon(store=store, config=config({"matrix_cache_bytes": 0})).start()
    c = Client(d.url, timeout=60)
    check("0: no matrix cache", job(c, G1, "G1 off") == "off")
    d.stop()

    for what, args in (("the flag", ["--matrix-cache-bytes", "5X"]),
                       ("the key", ["--config", config({"matrix_cache_bytes": "lots"})]),
                       ("a negative key", ["--config", config({"matrix_cache_bytes": -1})])):
        p = subprocess.run([recond_harness.RECOND, "--listen", "127.0.0.1:0", "--store", tempdir()] + args,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        err = p.stderr.decode("utf-8", "replace")
        check("a bad value of %s stops the daemon, naming it" % what,
              p.returncode != 0 and "matrix" in err and "cache" in err, "%s %s" % (p.returncode, err))


def config(obj):
    path = os.path.join(tempdir(), "recond.json")
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


if __name__ == "__main__":
    run_main(main)
