#!/usr/bin/env bash
# scripts/check-layout.sh passes on this tree, and on copies of its sources
# with one bad include injected it fails, naming the file: an upward include
# (core -> server, core subfolder -> server, worker -> daemon, between the
# daemon's floors, a daemon folder that is no floor), a daemon
# include of a worker-internal header, a kernel include of a core header that
# is not a kernel contract, an include that goes up core's own floors, and
# header cycles; a cycle named on the allow-list passes as allowed.
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

out=$(bash scripts/check-layout.sh "${incs[@]}" 2>&1)
if [ $? -eq 0 ]; then ok "the tree passes"; else bad "the tree fails:"; echo "$out"; fi

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

exit $fail
