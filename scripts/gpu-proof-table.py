#!/usr/bin/env python3
"""make gpu-proof's table (scripts/gpu-proof.sh; docs/cuda.md, "make gpu-proof").

Reads the figures the benches printed ("BENCH key value unit floor basis", one
a line: the PROOF lines with the bench's name in front) and the tests' results
("NAME STATUS SECONDS"), and prints one Markdown table: each figure beside its
floor (what the device found bounds it to) and its target (issue 40), with a
verdict.  On the stand-in (--emu 1) every verdict is "stand-in": its figures
time a CPU running the kernels one thread at a time and say nothing of a GPU.

Exit status 1 when a test failed or a figure with a target is missing (a step
did not run to its end), else 0; figures that miss their targets are named
in the table and below it, not failed.

Usage: gpu-proof-table.py --device TEXT --emu 0|1 --seconds N FIGURES TESTS
"""
import argparse
import sys

# key: (label, unit shown, target as (op, value) or None, note)
ROWS = [
    ("bp512_upload_hw_ms", "RabbitCT 512³ FDK back projection incl. upload and download (hw interp.)",
     ("<=", 100.0), "ms"),
    ("bp512_resident_hw_gups", "RabbitCT 512³ back projection, projections resident (hw)", (">=", 300.0), "GUPS"),
    ("bp512_upload_hw_gups", "RabbitCT 512³ back projection incl. upload (hw)", None, "GUPS"),
    ("bp512_resident_exact_ms", "RabbitCT 512³ back projection, resident (exact interp.)", None, "ms"),
    ("bp512_upload_exact_ms", "RabbitCT 512³ back projection incl. upload (exact)", None, "ms"),
    ("bp1024_upload_hw_ms", "RabbitCT 1024³ FDK back projection incl. upload and download (hw)",
     ("<=", 800.0), "ms"),
    ("bp1024_resident_hw_gups", "RabbitCT 1024³ back projection, resident (hw)", None, "GUPS"),
    ("sart_hw_ms", "paper 000 SART, per iteration (128³ ← 210 × 256×200, resident)", ("<=", 5.0), "ms"),
    ("cgls_exact_ms", "paper 000 CGLS, per iteration (matched pair, resident)", None, "ms"),
    ("tensor_cg_ms", "tensor-core CG on seed-001, per image per iteration (fp16 BSR)", ("<=", 0.08), "ms"),
    ("tensor_cg_speedup", "tensor-core CG against the project's cuSPARSE fp32 CSR baseline", (">=", 5.0), "x"),
    ("tensor_cg_err_ratio", "tensor-core CG error / fp32 CSR error", ("<=", 1.1), "x"),
    ("trigeneous_fwd_err", "trigeneous CPU + GPU split, forward: model's prediction error", None, "%"),
    ("trigeneous_back_err", "trigeneous CPU + GPU split, back: model's prediction error", None, "%"),
    ("trigeneous_fwd_ms", "trigeneous split, forward (floor column: best device alone)", None, "ms"),
    ("trigeneous_back_ms", "trigeneous split, back (floor column: best device alone)", None, "ms"),
    ("stream_paper000_tail_pct", "streaming FDK tail, paper 000's shape, % of the batch run", ("<=", 10.0), "%"),
    ("stream_rabbitct_tail_pct", "streaming FDK tail, RabbitCT's shape, % of the batch run", ("<=", 10.0), "%"),
    ("device_bw", "device memory bandwidth, measured (floor column: nominal peak)", None, "GB/s"),
    ("upload_bw", "pinned upload bandwidth, measured", None, "GB/s"),
]


def num(v):
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 0.1:
        return "%.2f" % v
    return "%.3g" % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", required=True)
    ap.add_argument("--emu", default="0")
    ap.add_argument("--seconds", default="")
    ap.add_argument("figures")
    ap.add_argument("tests")
    a = ap.parse_args()
    emu = a.emu == "1"

    figs = {}
    for line in open(a.figures):
        f = line.split()
        if len(f) < 6:
            continue
        try:
            bench, key, value, unit, floor, basis = f[0], f[1], float(f[2]), f[3], float(f[4]), " ".join(f[5:])
        except ValueError:  # a malformed line: the figure stays missing (and fails the run)
            print("gpu-proof: an unreadable figure line: %s" % line.strip(), file=sys.stderr)
            continue
        figs[key] = (value, unit, floor, basis, bench)
    tests = []
    for line in open(a.tests):
        f = line.split()
        if len(f) >= 3:
            tests.append((f[0], f[1], f[2]))

    print("## make gpu-proof%s" % (" — STAND-IN REHEARSAL, no GPU result" if emu else ""))
    print()
    print("Device: %s.%s" % (a.device, "  Run time: %s s." % a.seconds if a.seconds else ""))
    if emu:
        print("Figures below time tools/cuda-emu (kernels run as C++ on the CPU, one thread; the tensor "
              "CG's products on the CPU) at stand-in sizes under the same keys; they only show that "
              "every step runs to its figure.")
    print()
    print("| figure | value | floor | target | verdict |")
    print("| --- | --- | --- | --- | --- |")
    missing, missed = [], []
    for key, label, target, unit in ROWS:
        if key not in figs:
            if target:
                missing.append(key)
            tg = "%s %s %s" % ("≤" if target[0] == "<=" else "≥", num(target[1]), unit) if target else ""
            print("| %s | (not measured) | | %s | %s |" % (label, tg, "MISSING" if target else ""))
            continue
        value, u, floor, basis, bench = figs[key]
        fl = "%s %s (%s)" % (num(floor), u, basis) if floor > 0 else (basis if basis != "-" else "")
        tg = "%s %s %s" % ("≤" if target and target[0] == "<=" else "≥", num(target[1]), unit) if target else ""
        if not target:
            verdict = ""
        elif emu:
            verdict = "stand-in"
        else:
            met = value <= target[1] if target[0] == "<=" else value >= target[1]
            verdict = "met" if met else "MISSED"
            if not met:
                missed.append(label)
        print("| %s | %s %s | %s | %s | %s |" % (label, num(value), u, fl, tg, verdict))
    print()
    bad = [t for t in tests if t[1] not in ("PASS", "SKIP")]
    print("Tests: " + ", ".join("%s %s (%s s)" % t for t in tests))
    if bad:
        print("FAILED: " + ", ".join(t[0] for t in bad))
    if missing:
        print("Missing figures (a step did not finish): " + ", ".join(missing))
    if missed:
        print("Missed targets: " + "; ".join(missed))
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
