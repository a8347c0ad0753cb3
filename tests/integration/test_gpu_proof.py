#!/usr/bin/env python3
"""make gpu-proof (scripts/gpu-proof.sh, docs/cuda.md) here, without a GPU:

- its GPU run stops at once with "no CUDA device" and exit 77 (nvidia-smi
  taken off the PATH, as on a machine without a driver);
- RECOND_GPU_PROOF_EMU=1 rehearses every step on tools/cuda-emu: the build,
  the GPU tests (each passes or, test_tensor_gpu, skips), the benchmarks,
  and one table with a row per figure, every target's figure measured and
  marked "stand-in", none "met" or "MISSED" (no stand-in figure is a GPU
  result); exit 0.  About a minute on 2 cores.
- the table script fails (exit 1) when a figure with a target is missing or a
  test failed, so a step that stops half-way cannot pass for a proof.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recond_harness import BUILD, ROOT, check, log, run_main, skip, tempdir  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "gpu-proof.sh")
TABLE = os.path.join(ROOT, "scripts", "gpu-proof-table.py")
TARGET_KEYS = ["bp512_upload_hw_ms", "bp512_resident_hw_gups", "bp1024_upload_hw_ms", "sart_hw_ms",
               "tensor_cg_ms", "tensor_cg_speedup", "tensor_cg_err_ratio", "stream_paper000_tail_pct",
               "stream_rabbitct_tail_pct"]
OTHER_KEYS = ["cgls_exact_ms", "trigeneous_fwd_err", "trigeneous_back_err", "device_bw"]


def main():
    if os.path.realpath(BUILD) != os.path.realpath(os.path.join(ROOT, "build")):
        skip("gpu-proof's rehearsal uses the tree's build/ (RECOND_BUILD is %s)" % BUILD)
    no_gpu()  # needs no nvcc: a PATH without nvidia-smi, or a fake one
    if not shutil.which("nvcc") and not os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        skip("no nvcc: the CUDA stand-in cannot be built")
    rehearsal()


def no_gpu():
    """No GPU: "no CUDA device", 77 (a PATH without nvidia-smi)."""
    d = tempdir()
    bindir = os.path.join(d, "bin")
    os.mkdir(bindir)
    for tool in ("bash", "head", "tr", "date", "mkdir", "nproc", "dirname"):
        p = shutil.which(tool)
        if p:
            os.symlink(p, os.path.join(bindir, tool))
    env = dict(os.environ, PATH=bindir, RECOND_GPU_PROOF_OUT=os.path.join(d, "out"))
    env.pop("RECOND_GPU_PROOF_EMU", None)
    r = subprocess.run(["bash", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    check("without a GPU gpu-proof exits 77", r.returncode == 77, "exit %d: %s%s" % (r.returncode, r.stdout,
                                                                                       r.stderr))
    check("without a GPU gpu-proof says \"no CUDA device\"", "no CUDA device" in r.stdout, r.stdout)
    # a driver but no working GPU: nvidia-smi answers on stdout and fails
    fake = os.path.join(bindir, "nvidia-smi")
    with open(fake, "w") as f:
        f.write("#!/bin/bash\necho 'No devices were found'\nexit 6\n")
    os.chmod(fake, 0o755)
    r = subprocess.run(["bash", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    check("a driver without a GPU: gpu-proof exits 77 with \"no CUDA device\"",
          r.returncode == 77 and "no CUDA device" in r.stdout,
          "exit %d: %s%s" % (r.returncode, r.stdout, r.stderr))


def rehearsal():
    """The rehearsal on the stand-in, every step; then the table's own checks."""
    d = tempdir()
    out = os.path.join(d, "out")
    env = dict(os.environ, RECOND_GPU_PROOF_EMU="1", RECOND_GPU_PROOF_OUT=out)
    r = subprocess.run(["bash", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    log(r.stdout[-3000:])
    check("the stand-in rehearsal exits 0", r.returncode == 0, "exit %d\n%s\n%s" % (r.returncode,
                                                                                     r.stdout[-4000:],
                                                                                     r.stderr[-2000:]))
    table = open(os.path.join(out, "table.md")).read() if os.path.exists(os.path.join(out, "table.md")) else ""
    check("one table, marked as the stand-in's", table.count("| figure | value |") == 1 and
          "STAND-IN" in table, table[:500])
    figs = {}
    if os.path.exists(os.path.join(out, "figures.txt")):
        for line in open(os.path.join(out, "figures.txt")):
            f = line.split()
            if len(f) >= 6:
                figs[f[1]] = float(f[2])
    for k in TARGET_KEYS + OTHER_KEYS:
        check("figure %s measured" % k, k in figs, ", ".join(sorted(figs)))
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and "figure" not in ln and "---" not in ln]
    targets = [ln for ln in rows if "≤" in ln or "≥" in ln]
    check("every target row is a stand-in figure", len(targets) == len(TARGET_KEYS) and
          all(ln.rstrip().endswith("| stand-in |") for ln in targets), "\n".join(targets))
    check("no stand-in figure is called met or missed", " met |" not in table and "MISSED" not in table)
    tests = open(os.path.join(out, "tests.txt")).read() if os.path.exists(os.path.join(out, "tests.txt")) else ""
    for t in ("test_engine_cuda", "test_tensor_cg", "test_plane_resident", "test_trigeneous"):
        check("%s passed on the rehearsal" % t, ("%s PASS" % t) in tests, tests)

    # 3. the table fails on a missing figure or a failed test
    fig2 = os.path.join(d, "fig2.txt")
    with open(fig2, "w") as f:
        f.writelines(ln for ln in open(os.path.join(out, "figures.txt")) if "sart_hw_ms" not in ln)
    r = subprocess.run([sys.executable, TABLE, "--device", "x", "--emu", "1", fig2,
                        os.path.join(out, "tests.txt")], capture_output=True, text=True)
    check("a missing figure fails the table", r.returncode == 1 and "sart_hw_ms" in r.stdout, r.stdout[-800:])
    t2 = os.path.join(d, "tests2.txt")
    with open(t2, "w") as f:
        f.write(tests + "test_engine_cuda FAIL 1.0\n")
    r = subprocess.run([sys.executable, TABLE, "--device", "x", "--emu", "1",
                        os.path.join(out, "figures.txt"), t2], capture_output=True, text=True)
    check("a failed test fails the table", r.returncode == 1 and "FAILED" in r.stdout, r.stdout[-800:])
    # a GPU's figures get verdicts against the targets
    r = subprocess.run([sys.executable, TABLE, "--device", "x", "--emu", "0",
                        os.path.join(out, "figures.txt"), os.path.join(out, "tests.txt")],
                       capture_output=True, text=True)
    check("on a GPU a stand-in-slow SART misses its target",
          any("SART" in ln and ln.rstrip().endswith("| MISSED |") for ln in r.stdout.splitlines()),
          r.stdout[-1500:])


if __name__ == "__main__":
    run_main(main)
