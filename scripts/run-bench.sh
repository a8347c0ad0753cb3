#!/usr/bin/env bash
# Runs every benchmark program (build/bin/bench-*) in turn, then the
# benchmarks through the daemon (bench/*_bench.py: uploads, streaming FDK,
# previews); each prints its own table.  RECOND_BENCH_QUICK=1 shrinks the
# problems for a smoke run.
set -u
build=${1:-build}
rc=0
for b in "$build"/bin/bench-*; do
  [ -x "$b" ] || continue
  echo "### $(basename "$b")"
  "$b" || rc=1
  echo
done
# Through the daemon: upload speed (curl -T, store on local disk), the last
# view to the volume of a streaming FDK, what 32 preview pollers cost a job
# (docs/server.md, "Upload speed"; docs/api.md, "Streaming FDK", "Slice previews"),
# the jobs per second one PostgreSQL hands out to 3 and 10 daemons and the SSE
# lag between nodes (docs/cluster.md, "Limits"; 77 = no PostgreSQL 15, not a failure).
for p in upload_bench stream_bench preview_bench cluster_bench; do
  echo "### $p"
  /usr/bin/python3 "bench/$p.py" "$build"
  r=$?
  [ $r -ne 0 ] && [ $r -ne 77 ] && rc=1
  echo
done
exit $rc
