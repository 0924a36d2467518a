#!/usr/bin/env bash
# The MCP tools through real clients: the official Python MCP SDK over streamable HTTP and over
# stdio (tests/mcp/), against the service on a fresh SQLite database, then on a fresh Postgres
# database. Any failure, or a panic in the service's log, fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${TMPDIR:-/tmp}/gatekeeper-mcp-venv"
if ! "$venv/bin/python" -c 'import mcp, pytest' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "mcp==2.3.0" "pytest==8.4.2"
fi

cargo build --quiet --bin gatekeeper
export GATEKEEPER_BIN="$PWD/target/debug/gatekeeper" TAU_DATA="$PWD/../shared/data/tau-bench-airline.jsonl.gz"

run_against() { # backend database_url
  local backend=$1 url=$2 port data pid status=0
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  data=$(mktemp -d)
  export GATEKEEPER_KEY="mcp-$RANDOM-0123456789abcdef" GATEKEEPER_URL="http://127.0.0.1:$port"
  echo "== MCP clients on $backend (port $port)"
  env GATEKEEPER_API_KEYS="ci:$GATEKEEPER_KEY" GATEKEEPER_DATA_DIR="$data" DATABASE_URL="$url" \
    "$GATEKEEPER_BIN" serve --listen "127.0.0.1:$port" >"$data/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    curl -fsS "$GATEKEEPER_URL/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$venv/bin/python" -m pytest -q tests/mcp || status=$?
  kill "$pid"; wait "$pid" || true
  if grep -q "panicked" "$data/server.log"; then
    echo "the service panicked under the MCP clients on $backend:"; grep -B2 -A5 panicked "$data/server.log"; status=1
  fi
  rm -rf "$data"
  return "$status"
}

run_against SQLite ""
db="gk_mcp_$$"
run_against Postgres "postgres://postgres@127.0.0.1:5432/$db"
psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
