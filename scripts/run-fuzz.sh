#!/usr/bin/env bash
# Runs the libFuzzer harnesses built by mk/fuzz.mk ($BUILD/fuzz/fuzz_NAME).
#
#   scripts/run-fuzz.sh fuzz BUILD SECONDS [NAME...]
#       each harness for SECONDS in turn, over its corpus $BUILD/fuzz/corpus/NAME
#       (kept between runs; new inputs land there) and its seeds
#       tests/fuzz/corpus/NAME, with tests/fuzz/NAME.dict when there is one;
#       crashes go to $BUILD/fuzz/artifacts/NAME/.  Prints per harness:
#       runs, execs/s, coverage (edges, features), corpus size, crashes.
#   scripts/run-fuzz.sh regress BUILD 0 [NAME...]
#       each seed corpus once (-runs=0), as `make test` does
#       (tests/integration/test_fuzz_corpus.sh); fails on any crash.
#
# No NAME: every tests/fuzz/fuzz_*.c.  Exit status: 0 when no harness found a
# crash, leak or timeout, 1 otherwise.
set -u
mode=${1:?mode: fuzz or regress}
build=${2:?build directory}
secs=${3:-60}
shift 3 || shift $#
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do
		n=${f#tests/fuzz/fuzz_}
		names+=("${n%.c}")
	done
fi
# The harnesses' own stops are errors here, never "skipped" (libFuzzer's
# default exit code for a crash is 77, the test runner's code for a skip).
common=(-error_exitcode=1 -timeout_exitcode=1 -timeout=25 -rss_limit_mb=4096)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
summary=()
for n in "${names[@]}"; do
	bin=$build/fuzz/fuzz_$n
	seeds=tests/fuzz/corpus/$n
	if [ ! -x "$bin" ]; then
		echo "run-fuzz: $bin is not built (make fuzz-build)" >&2
		status=1
		continue
	fi
	extra=()
	# The daemon logs a line per request on stderr; libFuzzer keeps its
	# own output (and the sanitizers') on a copy of it.
	[ "$n" = upload ] && extra+=(-close_fd_mask=2)
	if [ "$mode" = regress ]; then
		start=$(date +%s%N)
		mkdir -p "$build/fuzz/artifacts/$n"
		if "$bin" "${common[@]}" -runs=0 -artifact_prefix="$build/fuzz/artifacts/$n/" "$seeds" \
			>"$build/fuzz/regress-$n.log" 2>&1; then
			ms=$(( ($(date +%s%N) - start) / 1000000 ))
			summary+=("$(printf '%-10s %4d seeds  ok  (%d ms)' "$n" "$(ls "$seeds" | wc -l)" "$ms")")
		else
			status=1
			tail -n 40 "$build/fuzz/regress-$n.log"
			summary+=("$(printf '%-10s FAILED: see %s' "$n" "$build/fuzz/regress-$n.log")")
		fi
		continue
	fi
	corpus=$build/fuzz/corpus/$n
	art=$build/fuzz/artifacts/$n
	mkdir -p "$corpus" "$art"
	dict=()
	[ -f "tests/fuzz/$n.dict" ] && dict=(-dict="tests/fuzz/$n.dict")
	log=$build/fuzz/fuzz-$n.log
	# crash-, leak-, timeout-, oom- files; slow-unit- ones are only reported
	found() { ls "$art" | grep -cvE '^slow-unit-'; }
	before=$(found)
	echo "=== fuzz_$n for ${secs}s (log: $log)"
	"$bin" "${common[@]}" "${extra[@]}" "${dict[@]}" -max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$art/" "$corpus" "$seeds" >"$log" 2>&1
	rc=$?
	after=$(found)
	slow=$(ls "$art" | grep -c '^slow-unit-')
	last=$(grep -E '#[0-9]+.*cov: ' "$log" | tail -n 1)
	cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
	ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
	runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log")
	eps=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log")
	size=$(ls "$corpus" | wc -l)
	crashes=$((after - before))
	if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ]; then
		status=1
		grep -E 'ERROR|runtime error|SUMMARY|fuzz_[a-z]+: ' "$log" | head -n 20
	fi
	summary+=("$(printf '%-10s %9s runs %7s execs/s  cov %5s  ft %6s  corpus %5s  crashes %s%s%s' "$n" \
		"${runs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "$size" "$crashes" \
		"$([ "$crashes" -gt 0 ] && echo " (in $art)")" \
		"$([ "$slow" -gt 0 ] && echo ", $slow slow inputs kept in $art")")")
done
echo
printf '%s\n' "${summary[@]}"
exit $status
