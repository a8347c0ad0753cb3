#!/usr/bin/env bash
# Runs every benchmark program (build/bin/bench-*) in turn; each prints its
# own table.  RECOND_BENCH_QUICK=1 shrinks the problems for a smoke run.
set -u
build=${1:-build}
rc=0
for b in "$build"/bin/bench-*; do
  [ -x "$b" ] || continue
  echo "### $(basename "$b")"
  "$b" || rc=1
  echo
done
exit $rc
