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
# upload_bench twice: float32 line integrals, then uint16 counts (the same views, half the bytes);
# counts_bench: the counts-to-line-integrals pass against the FDK it precedes.
for p in upload_bench "upload_bench --dtype uint16" counts_bench stream_bench preview_bench cluster_bench; do
  echo "### $p"
  # shellcheck disable=SC2086 # the name carries its options
  /usr/bin/python3 bench/${p%% *}.py "$build" ${p#"${p%% *}"}
  r=$?
  [ $r -ne 0 ] && [ $r -ne 77 ] && rc=1
  echo
done
exit $rc
