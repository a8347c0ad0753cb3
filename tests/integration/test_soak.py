#!/usr/bin/env python3
"""The durability soak's short form (tests/soak/soak.py; `make soak
KILLS=1000` runs the long one): first its self-test (the store is damaged
once, by hand, and the checks must count the lost job, the changed byte and
the stray file), then 50 kill -9s of a daemon that four clients keep busy,
with every acknowledged view, job state and volume checked after each
restart; no loss, corruption, orphan or 5xx is allowed."""

import os
import subprocess
import sys
import time

from recond_harness import ROOT, check, log, require_binaries, run_main

SOAK = os.path.join(ROOT, "tests", "soak", "soak.py")
KILLS = int(os.environ.get("RECOND_SOAK_KILLS", "50"))
SEED = os.environ.get("RECOND_SOAK_SEED", "1")


def soak(*args, timeout=600):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, SOAK] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    out = p.stdout.decode("utf-8", "replace")
    for ln in out.splitlines():
        log("  | " + ln)
    summary = [ln for ln in out.splitlines() if ln.startswith("soak: kills=")]
    return p.returncode, summary[-1] if summary else "(no summary)", time.monotonic() - t0


def main():
    require_binaries()
    rc, line, dt = soak("--kills", "3", "--seed", SEED, "--run-min", "0.5", "--self-test", timeout=300)
    check("soak self-test: a damaged store is reported (loss, corruption, orphan)", rc == 0, line)
    rc, line, dt = soak("--kills", str(KILLS), "--seed", SEED)
    check("soak: %d kill -9s, nothing acknowledged lost or corrupted, no orphan (%.0f s)" % (KILLS, dt),
          rc == 0 and line.startswith("soak: kills=%d " % KILLS), line)


if __name__ == "__main__":
    run_main(main)
