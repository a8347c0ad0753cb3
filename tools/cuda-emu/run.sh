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
mkdir -p "$out/kernels"
cd "$root"
inc="-I$root/tools/cuda-emu/include -Icore -Ikernels/cuda"
# launches kernel<<<g, b, sh, s>>>(args) become emu_launch(g, b, sh, s, [&]{ kernel(args); })
# the tensor path (tensor_*.cu: cuSPARSE, WMMA) is outside what the stand-in models
for f in $(ls kernels/cuda/*.cu | grep -v "/tensor_"); do
  python3 - "$f" "$out/kernels/$(basename "${f%.cu}").cpp" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r'([A-Za-z_]\w*(?:<[^<>;()]*>)?)<<<(.*?)>>>\((.*?)\);',
           lambda m: 'emu_launch(%s, [&]() { %s(%s); });' % (m.group(2), m.group(1), m.group(3)),
           s, flags=re.S)
open(sys.argv[2], 'w').write('#include "cuda_runtime.h"\n#line 1 "%s"\n' % sys.argv[1] + s)
PY
done
objs=()
for f in "$out"/kernels/*.cpp tools/cuda-emu/emu.cpp; do
  o="$out/$(basename "${f%.cpp}").o"
  g++ -O2 -std=c++17 -DRC_HAVE_CUDA=1 $inc -c "$f" -o "$o"
  objs+=("$o")
done
# the CUDA host files against the stand-in headers; the rest of core/ from
# the regular build (run `make` first)
make -s --no-print-directory build/lib/libreconcore.a
for f in core/backend/cuda/*.c; do
  o="$out/core_$(basename "${f%.c}").o"
  cc -O2 -std=c11 -D_GNU_SOURCE -DRC_HAVE_CUDA=1 -pthread $inc -c "$f" -o "$o"
  objs+=("$o")
done
small=; [ "${EMU_SMALL:-0}" = 1 ] && small=-DRC_TEST_SMALL
# EMU_TESTS: the unit tests to build and run on the stand-in (names of tests/unit/*.c)
for t in ${EMU_TESTS:-test_engine_cuda}; do
  cc -O2 -std=c11 -D_GNU_SOURCE -DRC_HAVE_CUDA=1 $small -pthread $inc -Itests/unit "tests/unit/$t.c" \
     "${objs[@]}" build/lib/libreconcore.a -o "$out/$t" \
     $(pkg-config --libs cmocka fftw3f fftw3 OpenCL) -lstdc++ -lm -lpthread
  "$out/$t"
done
