#!/usr/bin/env bash
# The worker is its own floor (docs/architecture.md): recond-worker links
# core and server/worker/ only, so `ldd` of it shows neither SQLite nor
# libmicrohttpd (the daemon's), and no file of server/worker/ includes the
# store, the HTTP layer or their libraries' headers.  The Makefile gives the
# worker its own LDLIBS and compiles server/worker/ without -Iserver;
# scripts/check-layout.sh checks the includes of every floor.
set -u
cd "$(dirname "$0")/../.."
build=${RECOND_BUILD:-build}
w=$build/bin/recond-worker
[ -x "$w" ] || { echo "SKIP: $w is not built yet"; exit 77; }
fail=0
libs=$(ldd "$w") || { echo "FAIL - ldd $w"; exit 1; }
for lib in libsqlite3 libmicrohttpd; do
	if grep -q "$lib" <<<"$libs"; then
		echo "FAIL - $w links $lib:"; grep "$lib" <<<"$libs"; fail=1
	else
		echo "ok - $w does not link $lib"
	fi
done
bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](store\.h|http[^">]*\.h|microhttpd\.h|sqlite3\.h)[">]' \
	server/worker/*.[ch] 2>/dev/null)
if [ -n "$bad" ]; then
	echo "FAIL - server/worker/ includes a daemon header:"; echo "$bad"; fail=1
else
	echo "ok - server/worker/ includes no store, HTTP, libmicrohttpd or SQLite header"
fi
# It still works: --names answers without the daemon's libraries.
if "$w" --names | grep -q '"engine"'; then
	echo "ok - $w --names runs"
else
	echo "FAIL - $w --names"; fail=1
fi
exit $fail
