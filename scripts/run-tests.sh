#!/usr/bin/env bash
# Runs every test: unit tests (release, then ASan+UBSan), then the integration
# tests in tests/integration (test_*.sh, test_*.py) against the release build.
# Exit status of a test: 0 passed, 77 skipped (automake's convention, e.g. "no
# CUDA device"), anything else failed.  Prints one summary line at the end.
set -u
build=${1:-build}
mkdir -p "$build"; export RECOND_BUILD=$(cd "$build" && pwd)
# protect_shadow_gap=0: the CUDA driver maps device memory into the range ASan
# reserves as its shadow gap; without it any ASan binary that touches cudart
# on a GPU machine dies at the first CUDA call.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:protect_shadow_gap=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
timeout_s=${RECOND_TEST_TIMEOUT:-1200}
pass=0 fail=0 skip=0 failed=()

log=$(mktemp /tmp/recond-test-log.XXXXXX)
trap 'rm -f "$log"' EXIT

run_one() {
  local name=$1; shift
  local start=$(date +%s%N)
  echo "=== $name"
  timeout "$timeout_s" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  # LeakSanitizer's own tracer can crash at exit under load ("LeakSanitizer
  # has encountered a fatal error", seen once with PoCL's threads): the
  # sanitizer failed, not the test, so run it once more.  A leak it reports
  # fails as before.
  if [ "$rc" -ne 0 ] && grep -q "LeakSanitizer has encountered a fatal error" "$log"; then
    echo "--- the leak checker itself failed (above); running $name again"
    timeout "$timeout_s" "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
  fi
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  local secs="$((ms / 1000)).$(printf %03d $((ms % 1000)))"
  case $rc in
    0) pass=$((pass+1)); echo "--- PASS $name (${secs}s)";;
    77) skip=$((skip+1)); echo "--- SKIP $name (${secs}s)";;
    *) fail=$((fail+1)); failed+=("$name"); echo "--- FAIL $name (exit $rc, ${secs}s)";;
  esac
}

for t in "$build"/tests/test_*; do
  [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
for t in "$build"/asan/tests/test_*; do
  [ -x "$t" ] && run_one "asan/$(basename "$t")" "$t"
done
for t in tests/integration/test_*.sh; do
  [ -f "$t" ] && run_one "$t" bash "$t"
done
for t in tests/integration/test_*.py; do
  [ -f "$t" ] && run_one "$t" /usr/bin/python3 "$t"
done

echo
[ ${#failed[@]} -gt 0 ] && printf 'failed: %s\n' "${failed[@]}"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
