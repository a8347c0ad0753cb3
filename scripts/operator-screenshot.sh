#!/usr/bin/env bash
# Takes docs/operator-page.png (or the file given): a daemon on loopback with a
# throwaway store gets a queue (a finished SART job, one left waiting, one
# created without data), then headless Chromium screenshots the operator page
# once it has data.  A plain `chromium --headless --screenshot URL` may shoot
# before the page's first poll has answered (the header then still says
# "connecting…" and the queue is empty: what the old picture showed);
# --virtual-time-budget=5000 makes Chromium run 5 s of the page's timers and
# fetches (several polls) before it shoots.
#
#   scripts/operator-screenshot.sh [OUT.png]    (BUILD=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/operator-page.png}
BIN=${BUILD:-build}/bin
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "operator-screenshot: no chromium (scripts/install-deps.sh installs it)" >&2; exit 1; }
TMP=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

"$BIN/recond" --listen 127.0.0.1:0 --port-file "$TMP/port" --store "$TMP/store" 2>"$TMP/recond.log" &
PID=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
[ -s "$TMP/port" ] || { cat "$TMP/recond.log" >&2; exit 1; }
URL=http://127.0.0.1:$(cat "$TMP/port")
CTL=("$BIN/reconctl" --url "$URL" --quiet)

python3 tests/integration/phantom.py --out "$TMP/demo" >/dev/null
python3 - "$TMP/demo/job.json" <<'PY'
import json, sys
p = sys.argv[1]
j = json.load(open(p))
j["label"] = "phantom 32^3 (SART)"
json.dump(j, open(p, "w"))
j["label"] = "phantom 32^3 (not started)"
json.dump(j, open(p.replace("job.json", "wait.json"), "w"))
j["label"] = "phantom 32^3 (no data yet)"
json.dump(j, open(p.replace("job.json", "empty.json"), "w"))
PY
"${CTL[@]}" submit "$TMP/demo/job.json" --projections "$TMP/demo/projections.f32" --watch >/dev/null || true
"${CTL[@]}" submit "$TMP/demo/wait.json" --projections "$TMP/demo/projections.f32" --no-start >/dev/null
curl -sf -X POST "$URL/v1/jobs" -H 'Content-Type: application/json' -d @"$TMP/demo/empty.json" >/dev/null

"$CHROMIUM" --headless=new --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$TMP/profile" \
	--window-size=1360,860 --virtual-time-budget=5000 --screenshot="$OUT" "$URL/" 2>"$TMP/chromium.log" ||
	{ cat "$TMP/chromium.log" >&2; exit 1; }
echo "operator-screenshot: wrote $OUT" >&2
