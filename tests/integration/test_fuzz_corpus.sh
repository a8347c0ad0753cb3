#!/usr/bin/env bash
# The fuzz harnesses' regression run: builds tests/fuzz/fuzz_*.c under
# $RECOND_BUILD/fuzz (mk/fuzz.mk; clang and libFuzzer, from
# scripts/install-deps.sh) when needed and runs each over its seed corpus
# tests/fuzz/corpus/NAME once (-runs=0): every input a fuzzer once crashed on
# stays there, so the bug stays fixed.  Seconds, once built (the first build
# compiles the libraries again with clang and the sanitizers: minutes).
# Skips (77) when clang cannot link a libFuzzer program.
set -u
cd "$(dirname "$0")/../.."
build=${RECOND_BUILD:-build}
probe=$(mktemp -d /tmp/test_fuzz_corpus.XXXXXX)
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
	>"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >/dev/null 2>&1; then
	echo "SKIP: clang with libFuzzer (packages clang, libclang-rt-14-dev) is not installed"
	exit 77
fi
# Called from `make test` (a recipe) or by hand: a make of our own either way.
unset MAKEFLAGS MFLAGS MAKELEVEL
if ! make --no-print-directory BUILD="$build" -j"$(nproc)" fuzz-build >"$probe/build.log" 2>&1; then
	tail -n 40 "$probe/build.log"
	echo "FAIL: building the fuzz harnesses"
	exit 1
fi
bash scripts/run-fuzz.sh regress "$build" 0
