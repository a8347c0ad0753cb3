#!/usr/bin/env bash
# scripts/check-layout.sh passes on this tree, and on copies of its sources
# with one bad include injected it fails, naming the file: an upward include
# (core -> server, core subfolder -> server, worker -> daemon, between the
# daemon's floors, a daemon folder that is no floor), a daemon
# include of a worker-internal header, a kernel include of a core header that
# is not a kernel contract, an include that goes up core's own floors, and
# header cycles; a cycle named on the allow-list passes as allowed.  With
# --calls, the tree's own daemon objects (when built) pass, and small trees
# compiled here fail on a call up a floor, a call cycle and a missing
# object, and pass a call down and a call through a table of operations.
set -u
cd "$(dirname "$0")/../.."
src=$(pwd)
tmp=$(mktemp -d /tmp/test_check_layout.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
# The Makefile's -I directories (make check-layout passes the same).
incs=(-Icore -Ibuild/gen -Iserver/worker -Iserver)

ok() { echo "ok - $*"; }
bad() { echo "FAIL - $*"; fail=1; }

objs=$(cd "${RECOND_BUILD:-build}" 2>/dev/null && pwd)/rel
calls=()
[ -d "$objs/server" ] && calls=(--calls "$objs")
out=$(bash scripts/check-layout.sh "${incs[@]}" "${calls[@]}" 2>&1)
if [ $? -eq 0 ]; then ok "the tree passes${calls:+ (with its calls, $objs)}"; else bad "the tree fails:"; echo "$out"; fi

mkdir "$tmp/base"
for d in core kernels server clients tools bench tests scripts; do
	cp -r "$d" "$tmp/base/"
done

# fresh: a new copy in $tmp/$n, entered; the case edits it, then
# expect_fail NAME WANT checks that the script fails there and says WANT.
n=0
fresh() { n=$((n + 1)); cp -r "$tmp/base" "$tmp/$n"; cd "$tmp/$n"; }
expect_fail() {
	local name=$1 want=$2 out rc
	out=$(bash "$src/scripts/check-layout.sh" "${incs[@]}" 2>&1); rc=$?
	cd "$src"
	if [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out"; then
		ok "$name: fails, saying \"$want\""
	else
		bad "$name: exit $rc, expected a failure saying \"$want\":"; echo "$out"
	fi
}
inject() { # inject FILE LINE: LINE goes in front of the file's first #include
	awk -v add="$2" '!done && /^#include/ { print add; done = 1 } { print }' "$1" > "$1.new" && mv "$1.new" "$1"
}

fresh; out=$(bash "$src/scripts/check-layout.sh" "${incs[@]}" 2>&1)
if [ $? -eq 0 ]; then ok "an untouched copy passes"; else bad "an untouched copy fails:"; echo "$out"; fi
cd "$src"

fresh; inject core/geometry/geometry.c '#include "store/store.h"'
expect_fail "core/geometry/geometry.c includes store/store.h" 'core/geometry/geometry.c:'
fresh; inject core/geometry/geometry.c '#include "store/store.h"'
expect_fail "core/geometry/geometry.c includes store/store.h (the rule)" 'upward include: floor core/geometry may not include floor server/store'

fresh; mkdir -p core/algo && printf '#include "http/http.h"\nint rc_sub_x;\n' > core/algo/sub.c
expect_fail "a file in a core subfolder includes http/http.h" 'core/algo/sub.c:1: #include "http/http.h"'

fresh; inject server/worker/spec.c '#include "store/store.h"'
expect_fail "the worker includes store/store.h" 'server/worker/spec.c:'

fresh; printf '#ifndef W_RUN_H\n#define W_RUN_H\n#endif\n' > server/worker/worker_run.h
inject server/jobs/runner.c '#include "worker_run.h"'
expect_fail "the daemon includes a worker-internal header" "the daemon may include only the worker's public headers"

fresh; inject kernels/cuda/fp_rotate.cu '#include "geometry/geometry.h"'
expect_fail "a kernel includes a core header that is no contract" "kernels/ may include only core's kernel-contract headers"

fresh; inject core/geometry/geometry.c '#include "../kernels/cuda/ray.cuh"'
expect_fail "core includes kernels/" 'may not include floor kernels'

fresh; inject server/store/store.h '#include "jobs/app.h"'
expect_fail "store.h includes jobs/app.h (the daemon's floors)" 'upward include: floor server/store may not include floor server/jobs'

fresh; inject server/base/log.c '#include "http/http_range.h"'
expect_fail "base/log.c includes http/http.http_range.h" 'server/base/log.c:'

fresh; mkdir -p server/misc && printf '#include "base/log.h"\nint rc_misc_x;\n' > server/misc/x.c
expect_fail "a file in a folder of server/ that is no floor" 'server/misc/x.c: server/misc is no floor of the daemon'

fresh; inject server/live/hub.h '#include "live/preview.h"'
inject server/live/preview.h '#include "live/hub.h"'
expect_fail "hub.h <-> preview.h (one floor)" 'file include cycle: server/live/hub.h -> server/live/preview.h -> server/live/hub.h'

fresh; inject server/live/preview.c '#include "live/hub.h"'
inject server/live/hub.c '#include "live/preview.h"'
expect_fail "hub.c includes preview.h, preview.c includes hub.h" 'module include cycle'

fresh; inject core/util/threadpool.c '#include "algo/algo.h"'
expect_fail "core/util includes core/algo (floors inside core)" 'upward include: floor core/util may not include floor core/algo'

fresh; inject core/backend/exec.c '#include "plan/plan.h"'
expect_fail "core/backend includes core/plan" 'upward include: floor core/backend may not include floor core/plan'

fresh; inject core/geometry/geometry.h '#include "geometry/phantom.h"'
expect_fail "geometry.h <-> phantom.h" 'file include cycle'

fresh; inject core/geometry/geometry.h '#include "geometry/phantom.h"'
printf 'core/geometry/geometry core/geometry/phantom\n' >> scripts/check-layout.allow
out=$(bash "$src/scripts/check-layout.sh" "${incs[@]}" 2>&1); rc=$?
cd "$src"
if [ $rc -eq 0 ] && grep -qF "allowed" <<<"$out"; then ok "a cycle on the allow-list passes, reported as allowed"
else bad "a cycle on the allow-list: exit $rc:"; echo "$out"; fi

# Calls (--calls): small daemon trees whose files declare what they call
# (no include: the include check passes), compiled to DIR/FILE.o as the
# Makefile names objects, then checked from their symbols.
calltree() { # calltree NAME FILE SOURCE...: a tree in $tmp/calls-NAME, compiled
	local d=$tmp/calls-$1; shift
	mkdir -p "$d"
	while [ $# -gt 0 ]; do
		mkdir -p "$d/$(dirname "$1")" "$d/obj/$(dirname "$1")"
		printf '%s\n' "$2" > "$d/$1"
		cc -c -o "$d/obj/${1%.c}.o" "$d/$1" || bad "calltree: cc $1"
		shift 2
	done
	echo "$d"
}
expect_calls() { # expect_calls NAME DIR RC WANT
	local out rc
	out=$(bash "$src/scripts/check-layout.sh" -C "$2" -Iserver --calls "$2/obj" 2>&1); rc=$?
	if { [ "$3" = 0 ] && [ $rc -eq 0 ]; } || { [ "$3" != 0 ] && [ $rc -ne 0 ]; } && grep -qF -- "$4" <<<"$out"; then
		ok "$1: exit $rc, saying \"$4\""
	else
		bad "$1: exit $rc, expected $3 and \"$4\":"; echo "$out"
	fi
}
d=$(calltree down server/base/a.c 'int a_one(void) { return 1; }' \
	server/http/b.c 'int a_one(void); int b_two(void) { return a_one() + 1; }')
expect_calls "a call down a floor passes" "$d" 0 "1 calls between daemon files"
d=$(calltree up server/base/a.c 'int b_two(void); int a_one(void) { return b_two() - 1; }' \
	server/http/b.c 'int b_two(void) { return 2; }')
expect_calls "base/a.c calls into http/b.c" "$d" 1 \
	"server/base/a.c: upward call: floor server/base may not call floor server/http (b_two in server/http/b.c)"
d=$(calltree cycle server/store/x.c 'int y_f(int); int x_f(int n) { return n ? y_f(n - 1) : 0; }' \
	server/store/y.c 'int x_f(int); int y_f(int n) { return n ? x_f(n - 1) : 1; }')
expect_calls "x.c and y.c call each other (one floor)" "$d" 1 \
	"call cycle: server/store/x.c -> server/store/y.c -> server/store/x.c"
d=$(calltree ops server/store/x.c 'static int x_get(void) { return 1; } struct ops { int (*get)(void); }; const struct ops x_ops = { x_get };' \
	server/store/y.c 'struct ops { int (*get)(void); }; extern const struct ops x_ops; int y_f(void) { return x_ops.get(); }')
expect_calls "a call through another file's table of operations is one edge, no cycle" "$d" 0 "1 calls between daemon files"
d=$(calltree noobj server/base/a.c 'int a_one(void) { return 1; }')
rm "$d/obj/server/base/a.o"
expect_calls "a daemon file without its object" "$d" 1 "server/base/a.c: no object"

exit $fail
