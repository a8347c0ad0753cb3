#!/usr/bin/env bash
# Builds programs against cuda-emu, a CPU stand-in for the CUDA runtime: the
# kernels of kernels/cuda (launches turned into emu_launch calls) and the
# CUDA engine's host files against the stand-in headers, then each given
# test or bench source linked with them and the regular build's
# libreconcore.a (run `make` first; its own CUDA objects are not pulled in:
# the stand-in's come first on the link line).  EMU_SMALL=1 compiles tests
# with RC_TEST_SMALL (the ASan sizes).  The tensor path (tensor_*.cu:
# cuSPARSE, WMMA) is outside what the stand-in models: a program that
# needs it does not link.
#   Usage: tools/cuda-emu/build.sh OUTDIR SOURCE.c...   -> OUTDIR/NAME
#   (tests/unit/test_x.c -> OUTDIR/test_x, bench/main_bench-x.c -> OUTDIR/bench-x)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1; shift
mkdir -p "$out/kernels"
out=$(cd "$out" && pwd)
cd "$root"
inc="-I$root/tools/cuda-emu/include -Icore -Ikernels/cuda -Ibuild/gen"
# launches kernel<<<g, b, sh, s>>>(args) become emu_launch(g, b, sh, s, [&]{ kernel(args); })
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
# the regular build
make -s --no-print-directory build/lib/libreconcore.a
for f in core/backend/cuda/*.c; do
  o="$out/core_$(basename "${f%.c}").o"
  cc -O2 -std=c11 -D_GNU_SOURCE -DRC_HAVE_CUDA=1 -pthread $inc -c "$f" -o "$o"
  objs+=("$o")
done
small=; [ "${EMU_SMALL:-0}" = 1 ] && small=-DRC_TEST_SMALL
for src in "$@"; do
  name=$(basename "${src%.c}"); name=${name#main_}
  cc -O2 -std=c11 -D_GNU_SOURCE -DRC_HAVE_CUDA=1 $small -pthread $inc "$src" \
     "${objs[@]}" build/lib/libreconcore.a -o "$out/$name" \
     $(pkg-config --libs cmocka fftw3f fftw3 OpenCL) -lstdc++ -lm -lpthread
done
