#!/usr/bin/env bash
# The coverage map (/ui) in a real headless browser: Debian's Chromium driven by Python
# Playwright (tests/ui/), against the service on a fresh SQLite database with an API key, seeded
# with a real tau-bench conversation and a 10,000-turn one. The page reads everything through
# the REST API, which both backends answer alike, so one backend is enough here. Any failure, or
# a panic in the service's log, fails the run. UI_SCREENSHOT=docs/coverage-map.png rewrites the
# README's screenshot.
set -euo pipefail
cd "$(dirname "$0")/.."

# Playwright's own browser download is not reachable from here: use Debian's Chromium.
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
venv="${TMPDIR:-/tmp}/gatekeeper-ui-venv"
if ! "$venv/bin/python" -c 'import playwright, pytest' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "playwright==1.65.2" "pytest==8.4.2"
fi

cargo build --quiet --bin gatekeeper
target="${CARGO_TARGET_DIR:-$PWD/target}"
export GATEKEEPER_BIN="$target/debug/gatekeeper" TAU_DATA="$PWD/../shared/data/tau-bench-airline.jsonl.gz"
export CHROMIUM="$(command -v chromium)"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data=$(mktemp -d)
export GATEKEEPER_KEY="ui-$RANDOM-0123456789abcdef" GATEKEEPER_URL="http://127.0.0.1:$port"
echo "== the coverage map in Chromium $("$CHROMIUM" --version | awk '{print $2}') (port $port)"
env GATEKEEPER_API_KEYS="ci:$GATEKEEPER_KEY" GATEKEEPER_DATA_DIR="$data" DATABASE_URL="" \
  "$GATEKEEPER_BIN" serve --listen "127.0.0.1:$port" >"$data/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  curl -fsS "$GATEKEEPER_URL/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
status=0
"$venv/bin/python" -m pytest -q -s tests/ui "$@" || status=$?
kill "$pid"; wait "$pid" || true
if grep -q "panicked" "$data/server.log"; then
  echo "the service panicked under the browser:"; grep -B2 -A5 panicked "$data/server.log"; status=1
fi
rm -rf "$data"
exit "$status"
