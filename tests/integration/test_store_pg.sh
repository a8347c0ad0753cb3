#!/usr/bin/env bash
# The store's unit tests (tests/unit/test_store.c) against PostgreSQL: starts
# a private cluster (pg_cluster.sh), runs the release and the ASan+UBSan
# test_store of $RECOND_BUILD with RECOND_TEST_PG set (each runs the SQLite
# group, then the PostgreSQL one), and stops the cluster whatever happens.
# 77 (skip) when PostgreSQL 15 is not installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${RECOND_BUILD:-$here/../../build}
dir=$(mktemp -d /tmp/recond-pg.XXXXXX)
trap 'bash "$here/pg_cluster.sh" stop "$dir"' EXIT
uri=$(bash "$here/pg_cluster.sh" start "$dir")
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -ne 0 ] && { echo "test_store_pg: the cluster did not start" >&2; exit 1; }
echo "test_store_pg: cluster at $uri"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rc=0
for t in "$build/tests/test_store" "$build/asan/tests/test_store"; do
	if [ ! -x "$t" ]; then
		echo "test_store_pg: no $t (make tests)" >&2
		rc=1
		continue
	fi
	echo "=== $t"
	RECOND_TEST_PG=$uri "$t" || rc=1
done
exit $rc
