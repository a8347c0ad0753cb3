#!/usr/bin/env bash
# Builds the CUDA engine (host code and kernels) against cuda-emu, a CPU
# stand-in for the CUDA runtime, and runs tests/unit/test_engine_cuda.c (or
# the tests EMU_TESTS names, e.g. "test_engine_cuda test_splat_device") on
# it (EMU_SMALL=1: the ASan sizes, minutes faster).  A check of the engine's logic (indexing, slabs, the CUDA
# backend under the shared algorithms, the memory plan) on machines without a GPU; it says nothing
# about real CUDA behaviour or speed.  Usage: tools/cuda-emu/run.sh [outdir]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build/cuda-emu}
# EMU_TESTS: the unit tests to build and run on the stand-in (names of tests/unit/*.c)
tests=${EMU_TESTS:-test_engine_cuda}
srcs=(); for t in $tests; do srcs+=("tests/unit/$t.c"); done
"$root/tools/cuda-emu/build.sh" "$out" "${srcs[@]}"
for t in $tests; do "$out/$t"; done
