#!/usr/bin/env bash
# pg_cluster.sh: a private PostgreSQL cluster for tests, with Debian's
# postgresql-15 binaries: initdb and pg_ctl into DIR, on a free port of
# 127.0.0.1 with its socket in DIR; no system service is involved.
#
#   pg_cluster.sh start DIR   prints the database's URI (postgresql://...)
#   pg_cluster.sh stop DIR    stops the cluster and removes DIR
#
# initdb refuses to run as root: as root the cluster runs as the package's
# unprivileged user postgres, DIR chowned to it.  Exit status 77 (skip) when
# the binaries or that user are missing.  fsync is off: the tests exercise
# the store's logic, not the disk under PostgreSQL.
set -euo pipefail
bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,13p' "$0" >&2; exit 2; }

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case $cmd in
start)
	[ -x "$bin/initdb" ] || { echo "pg_cluster: no $bin/initdb (Debian's postgresql-15)" >&2; exit 77; }
	if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
		echo "pg_cluster: running as root and there is no user postgres to run the cluster" >&2
		exit 77
	fi
	mkdir -p "$dir"
	[ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	as_pg "$bin/initdb" -D "$dir/data" -U recond --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null ||
		{ cat "$dir/server.log" >&2; exit 1; }
	as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U recond recond_test
	echo "$port" >"$dir/port"
	echo "postgresql://recond@127.0.0.1:$port/recond_test"
	;;
stop)
	if [ -d "$dir/data" ]; then
		as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
	;;
*)
	echo "pg_cluster: unknown command $cmd (start, stop)" >&2
	exit 2
	;;
esac
