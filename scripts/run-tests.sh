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
reran=()

# The test writes to a file that is shown as it grows: no pipe, so a child
# a test leaves behind cannot hold the run open past the timeout.
run_logged() {
  timeout "$timeout_s" "$@" >"$log" 2>&1 </dev/null &
  local pid=$!
  tail -s 0.1 -n +1 -f --pid=$pid "$log"
  wait $pid
}

# LeakSanitizer's own tracer can crash at exit under load ("LeakSanitizer has
# encountered a fatal error", seen once with PoCL's threads): the sanitizer
# failed, not the test.  Only an ASan test whose output shows no failure of
# its own qualifies; a leak report, an ASan or UBSan error or a failed
# assertion fails as usual.
lsan_tracer_crash() {
  [[ $1 == asan/* ]] && grep -q "LeakSanitizer has encountered a fatal error" "$log" &&
    ! grep -qE '^\[  (FAILED|ERROR) |ERROR: (Address|Leak)Sanitizer:|runtime error:' "$log"
}

run_one() {
  local name=$1; shift
  local start=$(date +%s%N)
  echo "=== $name"
  run_logged "$@"
  local rc=$?
  if [ "$rc" -ne 0 ] && lsan_tracer_crash "$name"; then
    echo "--- the leak checker itself failed (above); running $name again"
    reran+=("$name")
    run_logged "$@"
    rc=$?
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
[ ${#reran[@]} -gt 0 ] && printf 'run again after the leak checker itself failed: %s\n' "${reran[@]}"
[ ${#failed[@]} -gt 0 ] && printf 'failed: %s\n' "${failed[@]}"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
