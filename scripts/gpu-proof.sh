#!/usr/bin/env bash
# make gpu-proof: on a machine with an NVIDIA GPU, builds for its
# architecture, runs the GPU tests, then the benchmarks, and prints one
# table of every figure beside its floor and its target (docs/cuda.md,
# "make gpu-proof").  Capped at RECOND_GPU_PROOF_LIMIT (540 s) to fit 8 minutes on an H100 / H200; not yet run on a GPU.
#
#   no GPU (nvidia-smi finds none): prints "no CUDA device", exits 77
#   RECOND_GPU_PROOF_EMU=1: rehearses every step on tools/cuda-emu (the CUDA
#     stand-in on the CPU) with small sizes; the table says so and its
#     figures are no GPU results
#   RECOND_GPU_PROOF_OUT=dir: logs, figures and the table (default
#     build/gpu-proof-out)
#   RECOND_GPU_PROOF_LIMIT=s: the whole run's limit (default 540): each step
#     gets at most what is left of it, so the table is printed before an
#     outer timeout of a little more (a step cut short shows as TIMEOUT)
# Exit: 0 when every test passed and every bench gave its figures (figures
# that miss their targets are reported in the table, not failed), 1
# otherwise, 77 without a device.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
emu=${RECOND_GPU_PROOF_EMU:-0}
skip_fails=0 # on a GPU a GPU test that skips (exit 77) found no device: a failure
out=${RECOND_GPU_PROOF_OUT:-$root/build/gpu-proof-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
figs=$out/figures.txt tests=$out/tests.txt
: >"$figs"; : >"$tests"
jobs=$(nproc)
t_start=$(date +%s)
t_end=$(( t_start + ${RECOND_GPU_PROOF_LIMIT:-540} ))
ok=1

# the step's own limit, or what is left of the run's (at least 1 s)
cap() { local left=$(( t_end - $(date +%s) )); [ $left -lt 1 ] && left=1; [ $1 -lt $left ] && echo $1 || echo $left; }

step() { printf '\n=== gpu-proof: %s (%ss)\n' "$1" $(( $(date +%s) - t_start )); }

# run_test NAME LIMIT_S CMD...: its output to $out/NAME.log, one line in
# tests.txt: NAME STATUS SECONDS
run_test() {
  local name=$1 limit=$(cap $2); shift 2
  local t0=$(date +%s%N) rc st
  timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1 </dev/null
  rc=$?
  case $rc in
    0) st=PASS;;
    77) if [ $skip_fails = 1 ]; then st=FAIL; ok=0; else st=SKIP; fi;;
    124|137) st=TIMEOUT; ok=0;;
    *) st=FAIL; ok=0;;
  esac
  local s=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%s %s %d.%03d\n' "$name" "$st" $((s / 1000)) $((s % 1000)) >>"$tests"
  printf '  %-34s %-7s %d.%03d s\n' "$name" "$st" $((s / 1000)) $((s % 1000))
  [ "$st" = PASS ] || [ "$st" = SKIP ] || tail -n 20 "$out/$name.log" | sed 's/^/    | /'
}

# run_bench NAME LIMIT_S CMD...: its output to $out/NAME.log, its PROOF
# lines to figures.txt
run_bench() {
  local name=$1 limit=$(cap $2); shift 2
  local t0=$(date +%s) rc
  timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1 </dev/null
  rc=$?
  grep '^PROOF ' "$out/$name.log" | sed "s/^PROOF /$name /" >>"$figs"
  grep -v '^PROOF ' "$out/$name.log" | sed 's/^/  /'
  if [ $rc -ne 0 ]; then
    ok=0
    echo "  $name: exit $rc$( { [ $rc = 124 ] || [ $rc = 137 ]; } && echo " (over its ${limit} s)")"
    echo "$name FAIL $(( $(date +%s) - t0 ))" >>"$tests"
  fi
}

if [ "$emu" = 1 ]; then
  # ---- the rehearsal on the stand-in ------------------------------------
  device="STAND-IN: tools/cuda-emu on the CPU ($(nproc) cores); no figure here is a GPU result"
  bin=build/bin tdir=build/tests edir=$out/emu
  step "build (the regular build, then the stand-in's programs)"
  # test_trigeneous opens jobs (plan/open.c), which link the tensor path:
  # it runs from the regular build (no CUDA device there: CPU + OpenCL)
  emu_src=(tests/unit/test_engine_cuda.c bench/main_bench-cuda.c bench/main_bench-trigeneous.c)
  opt=() # the 2-D and splat tests on the devices, where this tree has them
  for t in test_plane_resident test_splat_device; do [ -f tests/unit/$t.c ] && opt+=($t); done
  need=(build/bin/bench-tensor-cg build/tests/test_tensor_gpu build/tests/test_tensor_cg build/tests/test_trigeneous)
  for t in "${opt[@]}"; do need+=(build/tests/$t); done
  if ! make -s --no-print-directory -j"$jobs" "${need[@]}" >"$out/build.log" 2>&1 ||
     ! EMU_SMALL=1 tools/cuda-emu/build.sh "$edir" "${emu_src[@]}" >>"$out/build.log" 2>&1; then
    tail -n 30 "$out/build.log"; echo "gpu-proof: the build failed ($out/build.log)"; exit 1
  fi
  # one that links the tensor path (jobs through plan/open.c) cannot link
  # the stand-in: it runs from the regular build, its CUDA part skipped
  for t in "${opt[@]}"; do
    rm -f "$edir/$t"
    EMU_SMALL=1 tools/cuda-emu/build.sh "$edir" tests/unit/$t.c >>"$out/build.log" 2>&1 ||
      echo "  $t: does not link against the stand-in; run from the regular build"
  done
  export EMU_DEVICE_BYTES=${EMU_DEVICE_BYTES:-4294967296}
  step "GPU tests (on the stand-in; the tensor tests and test_trigeneous on the regular build)"
  run_test test_engine_cuda 600 "$edir/test_engine_cuda"
  run_test test_tensor_gpu 120 "$tdir/test_tensor_gpu"
  run_test test_tensor_cg 300 "$tdir/test_tensor_cg"
  for t in "${opt[@]}"; do
    if [ -x "$edir/$t" ]; then run_test "$t" 600 "$edir/$t"; else run_test "$t" 600 "$tdir/$t"; fi
  done
  run_test test_trigeneous 600 "$tdir/test_trigeneous"
  step "benchmarks (stand-in sizes)"
  run_bench bench-cuda 900 "$edir/bench-cuda" --proof --small
  # tensor cores are not modelled by the stand-in: the same CGLS over the
  # tensor backend with CPU products, fp16 non-zeros against fp32 CSR
  RECOND_BENCH_QUICK=1 RECOND_BENCH_ITERS=3 RECOND_BENCH_ROWS=nz,csr \
    run_bench bench-tensor-cg 300 "$bin/bench-tensor-cg" --proof
  RECOND_BENCH_QUICK=1 RECOND_BENCH_ENGINES=cpu,cuda run_bench bench-trigeneous 600 "$edir/bench-trigeneous" --proof
else
  # ---- a GPU ------------------------------------------------------------
  # a driver without a working GPU prints "No devices were found" (or an
  # NVML error) and exits non-zero; an old driver has no compute_cap field
  ccap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null) || ccap=
  ccap=$(printf '%s\n' "$ccap" | head -n 1 | tr -d ' ')
  if ! [[ $ccap =~ ^[0-9]+\.[0-9]+$ ]]; then
    echo "no CUDA device"
    exit 77
  fi
  nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
  if [ -z "$nvcc" ]; then
    echo "gpu-proof: a GPU (compute capability $ccap) but no nvcc: install the CUDA toolkit"; exit 1
  fi
  sm=${ccap/./}
  IFS=, read -r gname gdrv gmem < <(nvidia-smi --query-gpu=name,driver_version,memory.total \
                                        --format=csv,noheader | head -n 1)
  gpu="$gname (driver${gdrv}, memory${gmem})"
  cudav=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  device="$gpu, compute capability $ccap (sm_$sm), CUDA $cudav"
  build=build/gpu-proof-sm$sm
  bin=$build/bin tdir=$build/tests
  step "build for sm_$sm in $build ($jobs jobs)"
  tests_c=(test_engine_cuda test_tensor_gpu test_tensor_cg test_trigeneous)
  for t in test_plane_resident test_splat_device; do [ -f tests/unit/$t.c ] && tests_c+=($t); done
  need=($bin/bench-cuda $bin/bench-tensor-cg $bin/bench-trigeneous)
  for t in "${tests_c[@]}"; do need+=($tdir/$t); done
  if ! make -s --no-print-directory -j"$jobs" BUILD=$build \
       CUDA_GENCODE="-gencode arch=compute_$sm,code=sm_$sm -gencode arch=compute_$sm,code=compute_$sm" \
       "${need[@]}" >"$out/build.log" 2>&1; then
    tail -n 30 "$out/build.log"; echo "gpu-proof: the build failed ($out/build.log)"; exit 1
  fi
  step "GPU tests"
  skip_fails=1
  for t in "${tests_c[@]}"; do run_test "$t" 120 "$tdir/$t"; done
  step "benchmarks"
  run_bench bench-cuda 240 "$bin/bench-cuda" --proof
  RECOND_BENCH_SEED001=1 RECOND_BENCH_GPU=1 RECOND_BENCH_ITERS=8 \
    run_bench bench-tensor-cg 240 "$bin/bench-tensor-cg" --proof
  RECOND_BENCH_ENGINES=cpu,cuda run_bench bench-trigeneous 150 "$bin/bench-trigeneous" --proof
fi

step "table"
python3 scripts/gpu-proof-table.py --device "$device" --emu "$emu" --seconds $(( $(date +%s) - t_start )) \
  "$figs" "$tests" | tee "$out/table.md"
[ ${PIPESTATUS[0]} -eq 0 ] || ok=0
[ $ok = 1 ] && exit 0 || exit 1
