#!/usr/bin/env python3
"""Job warnings (docs/api.md, "Warnings"): the mistakes a new user makes
with real data end `succeeded`, so each must leave a warning with its code
in GET /v1/jobs/{id}, and a clean job none (the test fails both ways).

One stack of exact line integrals of the asymmetric ellipsoid phantom
(phantom.py, independent of the C code), then the same data sent as a new
user would get it wrong:

- clean: no warning, and result.relative_residual reported (FDK too) and
  small;
- pixel pitch in cm (du_mm, dv_mm 10x too small): voxel_units / fov;
- voxel size in cm: voxel_units;
- angles in radians (the degrees' values / 57.3): angles_radians;
- pre-log intensities (10000 exp(-p)) sent as line integrals: pre_log;
- the detector transposed (each view's rows and columns swapped):
  detector_transposed (row sums that change over views; its relative
  residual, 0.135 against 0.048 for the clean job, is below the floor);
- NaN in some views: non_finite (counted and zeroed; the job succeeds);
- a detector narrower than the object: truncated;
- an iterative job (sirt) on clean data: no warning, residual reported;
- reconctl status and watch print the warnings;
- the geometry's warnings already come with the job's creation (201).
"""

import array
import math
import random
import struct
import subprocess

from phantom import cone_spec, project_cone
from recond_harness import Daemon, check, log, require_binaries, run_main, RECOND, RECONCTL, WORKER
from recond_client import Client

N, VIEWS, NU = 24, 60, 40
# phantom.py's ellipsoid with a bar along z off the axis: a detector read
# transposed turns the bar across the rows, which no volume explains
PHANTOM = [
    ((0.0, 0.0, 0.0), (10.0, 9.0, 10.0), 0.02),
    ((5.0, -3.0, 0.0), (2.0, 2.0, 9.0), 0.03),
    ((-5.0, 4.0, -4.0), (3.0, 3.0, 3.0), -0.01),
]


def spec(label, **over):
    s = cone_spec(n=N, voxel=1.0, views=VIEWS, nu=NU, nv=NU, du=1.5, dv=1.5, label=label)
    det = s["geometry"]["detector"]
    if "pitch" in over:
        det["du_mm"] = det["dv_mm"] = over["pitch"]
    if "voxel" in over:
        s["volume"]["voxel_mm"] = [over["voxel"]] * 3
    if over.get("radians"):
        a = s["geometry"].pop("angles")
        s["geometry"]["angles_deg"] = [math.radians(a["start_deg"] + k * a["step_deg"]) for k in range(a["count"])]
    if "nu" in over:
        det["nu"] = over["nu"]
    if "algorithm" in over:

        s["algorithm"] = over["algorithm"]
    return s


def transposed(data):
    a = array.array("f")
    a.frombytes(data)
    out = array.array("f", bytes(len(data)))
    n = NU * NU
    for k in range(VIEWS):
        for j in range(NU):
            for i in range(NU):
                out[k * n + i * NU + j] = a[k * n + j * NU + i]
    return out.tobytes()


def codes(job):
    return sorted(w["code"] for w in job.get("warnings") or [])


def main():
    require_binaries(RECOND, WORKER)
    clean = project_cone(spec("ref"), PHANTOM)
    a = array.array("f")
    a.frombytes(clean)
    rng = random.Random(33)
    peak = max(a)
    noisy = array.array("f", (x + rng.gauss(0.0, 0.03 * peak) for x in a)).tobytes()
    prelog = array.array("f", (10000.0 * math.exp(-x) for x in a)).tobytes()
    nan = bytearray(clean)
    for idx in (5 * NU * NU + 100, 5 * NU * NU + 101, 17 * NU * NU + 7):
        nan[4 * idx:4 * idx + 4] = struct.pack("f", float("nan"))
    cases = [
        ("clean", spec("clean"), clean, []),
        ("pitch_cm", spec("pitch_cm", pitch=0.15), clean, ["voxel_units"]),
        ("voxel_cm", spec("voxel_cm", voxel=0.1), clean, ["voxel_units"]),
        # FDK refuses 6 degrees of views (a short scan needs 180 + fan): sirt runs
        ("radians", spec("radians", radians=True, algorithm={"name": "sirt", "iterations": 10}), clean,
         ["angles_radians"]),
        ("pre_log", spec("pre_log"), prelog, ["pre_log", "residual_high"]),
        ("transposed", spec("transposed"), transposed(clean), ["detector_transposed"]),
        ("nan", spec("nan"), bytes(nan), ["non_finite"]),
        # 20 columns of 1.5 mm see 15 mm at the axis: the 20 mm wide object is cut off
        ("truncated", spec("truncated", nu=20), project_cone(spec("ref20", nu=20), PHANTOM), ["truncated"]),
        ("noisy", spec("noisy"), noisy, []),
        ("sirt", spec("sirt", algorithm={"name": "sirt", "iterations": 20}), clean, []),
    ]
    d = Daemon()
    d.start()
    c = Client(d.url, timeout=60)
    # the geometry's warnings come with the 201, before any view is sent
    made = c.create(spec("pitch_cm_created", pitch=0.15))
    check("at creation: the geometry's warnings (voxel_units, fov_not_covered), not in the summary",
          "voxel_units" in codes(made) and "fov_not_covered" in codes(made) and
          "warnings" not in made.get("summary", {}), "%s %s" % (codes(made), made.get("summary")))
    made = c.create(spec("clean_created"))
    check("at creation: a sound geometry has none", codes(made) == [], codes(made))
    jobs = {}
    for name, s, data, _ in cases:
        jobs[name] = c.submit(s, data)["id"]
    for name, s, data, want in cases:
        job = c.wait(jobs[name], timeout=120)
        got = codes(job)
        res = (job.get("result") or {}).get("relative_residual")
        log("%-10s state=%s warnings=%s relative_residual=%s noise=%s" %
            (name, job["state"], got, res, (job.get("result") or {}).get("noise_relative")))
        for w in job.get("warnings") or []:
            log("    %s: %s" % (w["code"], w["message"]))
        check("%s: succeeded" % name, job["state"] == "succeeded", job.get("error"))
        check("%s: relative residual reported" % name, isinstance(res, float) and res >= 0, job.get("result"))
        if want:
            check("%s: warns %s" % (name, want), all(w in got for w in want), got)
        else:
            check("%s: no warning" % name, got == [], job.get("warnings"))
    # reconctl shows them: status on stdout, watch at the end on stderr
    p = subprocess.run([RECONCTL, "--url", d.url, "status", jobs["pre_log"]], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    out = p.stdout.decode()
    check("reconctl status shows the warning and the residual",
          p.returncode == 0 and "warning:  pre_log:" in out and "residual: " in out, out)
    p = subprocess.run([RECONCTL, "--url", d.url, "watch", jobs["transposed"]], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    err = p.stderr.decode()
    check("reconctl watch shows the warning when the job ends", "warning:  detector_transposed:" in err, err)
    p = subprocess.run([RECONCTL, "--url", d.url, "status", jobs["clean"]], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    check("reconctl status of a clean job shows no warning", "warning:" not in p.stdout.decode(), p.stdout)
    d.stop()


if __name__ == "__main__":
    run_main(main)
